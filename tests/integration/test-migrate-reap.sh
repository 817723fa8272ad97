#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# An ended migration leaves no thread behind: after 25 migrations of one
# node no migration thread is alive, and the daemon does not keep the
# stacks of ended ones.  A thread that ended but was never joined is gone
# from /proc/PID/task but keeps its stack (8 MiB of address space), so
# 25 of them would leave 25 stacks no live thread uses.  glibc keeps the
# stacks of joined threads for reuse, up to 40 MiB (5 stacks); other
# pools (libfuse's workers) may grow during the run, so the check counts
# stacks beyond the live threads, not the threads themselves; and the
# daemon's other named threads (libfuse's workers and GLib's pool threads
# aside) are the same after 25 migrations as after 5.  migrate-status
# still reports the last migration.
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

# threads of the daemon, those named "migrate", and its thread stacks:
# anonymous read-write mappings of 8 MiB (the default stack size)
threads_of() { ls "/proc/$PID/task" | wc -l; }
migrate_threads_of() {
	local n=0 comm
	for comm in /proc/"$PID"/task/*/comm; do
		[[ $(cat "$comm" 2>/dev/null) == migrate ]] && ((n++))
	done
	echo "$n"
}
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
# The named threads and how many of each, but the pools that grow with
# load: libfuse's workers (the process's own name) and GLib's pools.
named_threads_of() {
	cat /proc/"$PID"/task/*/comm 2>/dev/null |
		grep -vxE 'dioloop|pool-.*' | sort | uniq -c | awk '{ printf "%s=%s ", $2, $1 }'
}
# The last job reports done just before its thread returns.
wait_no_migrate_thread() {
	local t
	for ((t = 0; t < 100; t++)); do
		(($(migrate_threads_of) == 0)) && return
		sleep 0.1
	done
}
prev=
for ((i = 1; i <= 25; i++)); do
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
		wait_no_migrate_thread
		named5=$(named_threads_of)
		it_log "after 5 migrations: $named5"
	fi
done
wait_no_migrate_thread
threads=$(threads_of)
stacks=$(stacks_of)
it_log "after 25 migrations: $threads threads, $stacks stacks, VmSize $(vmsize_of) kB"
expect_eq "migration threads alive after 25 migrations" 0 "$(migrate_threads_of)"
expect_eq "named threads after 25 migrations = after 5" "$named5" "$(named_threads_of)"
# Every thread but the main one runs on an 8 MiB stack; the rest are
# kept by glibc's cache (at most 5) or leaked.
spare=$((stacks - (threads - 1)))
if ((spare <= 5 + 1)); then
	it_ok "thread stacks beyond the live threads after 25 migrations: $spare"
else
	it_fail "thread stacks beyond the live threads after 25 migrations: expected at most 6, got $spare ($stacks stacks, $threads threads)"
fi
# The control file answers the command written to it.
status=$(timeout -k 2 10 "$IT_PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.write(fd, b"migrate-status m.img\n")
print(os.pread(fd, 4096, 0).decode().splitlines()[0])' "$MNT/.dioloop/ctl" 2>&1)
expect_match "migrate-status still reports the last migration" 'done .*' "$status"
expect_eq "m.img holds its bytes after 25 migrations" "$sha_before" "$(sha "$MNT/m.img")"

dioloop_umount "$MNT"
daemon_wait "$PID"
expect_eq "the daemon exits 0 after umount" 0 "$DAEMON_STATUS"
it_end
