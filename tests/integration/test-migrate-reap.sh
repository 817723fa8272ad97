#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# An ended migration leaves no thread behind: 50 migrations of one node
# leave the daemon's thread count and virtual size where they were after
# the first five (a thread that is never joined keeps its stack, 8 MiB of
# address space), and migrate-status still reports the last one.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "migrations leave no thread behind"

SRC=$IT_TMP/src
DST=$IT_TMP/dst
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$DST"
must "dioloop create --size 1M m.img" "$DIOLOOP_BIN" create --size 1M "$SRC/m.img"
start_daemon "$SRC" "$MNT"
PID=$DAEMON_PID
must "write 1 MiB of m.img" dd if=/dev/urandom of="$MNT/m.img" bs=1M count=1 \
	oflag=direct conv=notrunc status=none
sha_before=$(sha "$MNT/m.img")

# threads and VmSize (kB) of the daemon
threads_of() { ls "/proc/$PID/task" | wc -l; }
vmsize_of() { awk '/^VmSize:/ { print $2 }' "/proc/$PID/status"; }
prev=
for ((i = 1; i <= 50; i++)); do
	dest=$DST/m.$i.raw
	if ! "$DIOLOOP_BIN" migrate "$MNT/m.img" "$dest" >"$IT_TMP/last.out" 2>&1 </dev/null; then
		it_fail "migration $i of m.img to m.$i.raw: expected exit status 0"
		it_show "$IT_TMP/last.out"
		break
	fi
	# The node serves dest now: the previous destination is unused.
	[[ -n $prev ]] && rm -f "$prev"
	prev=$dest
	if ((i == 5)); then
		sleep 1
		threads5=$(threads_of)
		vm5=$(vmsize_of)
		it_log "after 5 migrations: $threads5 threads, VmSize $vm5 kB"
	fi
done
sleep 1
threads50=$(threads_of)
vm50=$(vmsize_of)
it_log "after 50 migrations: $threads50 threads, VmSize $vm50 kB"
if ((threads50 <= threads5 + 2)); then
	it_ok "threads after 50 migrations: $threads50 (after 5: $threads5)"
else
	it_fail "threads after 50 migrations: expected at most $((threads5 + 2)) (after 5: $threads5), got $threads50"
fi
# An unjoined thread keeps its stack (8 MiB of address space): 45 of them
# would add 360 MiB.
if ((vm50 <= vm5 + 65536)); then
	it_ok "VmSize after 50 migrations: $vm50 kB (after 5: $vm5 kB)"
else
	it_fail "VmSize after 50 migrations: expected at most $((vm5 + 65536)) kB (after 5: $vm5 kB), got $vm50 kB"
fi
# The control file answers the command written to it.
status=$(timeout -k 2 10 "$IT_PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"migrate-status m.img\n")
print(os.pread(fd, 4096, 0).decode().splitlines()[0])' "$MNT/.dioloop/ctl" 2>&1)
expect_match "migrate-status still reports the last migration" 'done .*' "$status"
expect_eq "m.img holds its bytes after 50 migrations" "$sha_before" "$(sha "$MNT/m.img")"

dioloop_umount "$MNT"
daemon_wait "$PID"
expect_eq "the daemon exits 0 after umount" 0 "$DAEMON_STATUS"
it_end
