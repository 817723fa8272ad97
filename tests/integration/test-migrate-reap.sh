#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# An ended migration leaves no thread behind: after 50 migrations of one
# node the daemon has as many threads and as many thread stacks mapped as
# after the first five (a thread that ended but was never joined is gone
# from /proc/PID/task but keeps its stack: 8 MiB of address space), and
# migrate-status still reports the last one.
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

# threads of the daemon, and its thread stacks: anonymous read-write
# mappings of 8 MiB (the default stack size)
threads_of() { ls "/proc/$PID/task" | wc -l; }
stacks_of() {
	"$IT_PY" -c 'import sys
n = 0
for line in open("/proc/%s/maps" % sys.argv[1]):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    n += len(f) == 5 and f[1] == "rw-p" and hi - lo == 8 << 20
print(n)' "$PID"
}
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
		stacks5=$(stacks_of)
		it_log "after 5 migrations: $threads5 threads, $stacks5 stacks, VmSize $(vmsize_of) kB"
	fi
done
sleep 1
threads50=$(threads_of)
stacks50=$(stacks_of)
it_log "after 50 migrations: $threads50 threads, $stacks50 stacks, VmSize $(vmsize_of) kB"
if ((threads50 <= threads5 + 2)); then
	it_ok "threads after 50 migrations: $threads50 (after 5: $threads5)"
else
	it_fail "threads after 50 migrations: expected at most $((threads5 + 2)) (after 5: $threads5), got $threads50"
fi
if ((stacks50 <= stacks5 + 2)); then
	it_ok "thread stacks mapped after 50 migrations: $stacks50 (after 5: $stacks5)"
else
	it_fail "thread stacks mapped after 50 migrations: expected at most $((stacks5 + 2)) (after 5: $stacks5), got $stacks50"
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
