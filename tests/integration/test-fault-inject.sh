#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fault injection for users (-o fault= and dioloop fault):
#  - a rule given at mount fails reads of a byte range of one node;
#  - only nodes with a rule carry the fault filter; the first rule given
#    at run time stacks it;
#  - nth= fails exactly the Nth write, delay= slows reads, off clears;
#  - ext4 on a loop device over a node whose writes to one file's blocks
#    fail: a direct write and a buffered write + fsync see EIO, the other
#    nodes keep working, the errors are counted in stats.json; after
#    "dioloop fault ... off" the file can be rewritten, the file system
#    unmounted, and e2fsck finds it clean, every other file intact;
#  - bad rules get a one-line error and exit status 2.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "fault injection: mount-time and run-time rules, ext4 under injected EIO" \
	mkfs.ext4 e2fsck filefrag jq

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
must "dioloop create --size 96M fs.img" "$DIOLOOP_BIN" create --size 96M "$SRC/fs.img"
must "dioloop create --size 8M other.img" "$DIOLOOP_BIN" create --size 8M "$SRC/other.img"
must "dioloop create --size 1M mf.img" "$DIOLOOP_BIN" create --size 1M "$SRC/mf.img"
start_daemon "$SRC" "$MNT" -o fault=mf.img:read:error=EIO:offset=0:length=4096
MAIN_PID=$DAEMON_PID
STATS=$MNT/.dioloop/stats.json

stat_of() {
	jq -r --arg n "$1" ".nodes[\$n]$2" "$STATS"
}

NSERVE=0
# still_serving AFTER: the daemon is alive and other.img takes a write
# and reads it back.
still_serving() {
	local off
	NSERVE=$((NSERVE + 1))
	off=$((NSERVE * 65536))
	pid_alive "$MAIN_PID" || it_die "after $1: expected the daemon (PID $MAIN_PID) alive, it is gone"
	expect_eq "after $1: other.img still served (write+read 64K at $off)" "ok 65536 / ok same" \
		"$(nodeio pwrite "$MNT/other.img" "$off" 65536 "$((NSERVE + 100))") / $(nodeio check "$MNT/other.img" "$off" 65536 "$((NSERVE + 100))")"
}

it_log "---- a rule given at mount"
expect_io "mf.img: read of [0, 4K) fails (fault=mf.img:read:error=EIO:offset=0:length=4096)" \
	"err EIO" pread "$MNT/mf.img" 0 4096
expect_match "mf.img: a read outside the range works" 'ok 4096 [0-9a-f]+' "$(nodeio pread "$MNT/mf.img" 8192 4096)"
expect_io "mf.img: writes are not matched by a read rule" "ok 4096" pwrite "$MNT/mf.img" 0 4096
expect_eq "stats.json lists the mount-time rule" "read error=EIO offset=0 length=4096" \
	"$(stat_of mf.img '.faults.rules[0]')"
expect_eq "stats.json counts the injected read" 1 "$(stat_of mf.img .faults.injected.read)"
expect_eq "stats.json counts the EIO among mf.img's errors" 1 "$(stat_of mf.img .errors.EIO)"

it_log "---- the fault filter is stacked only where a rule asks for it"
expect_eq "mf.img (a mount-time rule) has the fault filter" '["fault"]' \
	"$(stat_of mf.img '.filters' | jq -c .)"
expect_eq "other.img (no rule) has no filter" '[]' "$(stat_of other.img '.filters' | jq -c .)"
expect_eq "other.img (no rule) reports no fault counters" null "$(stat_of other.img '.faults')"

it_log "---- nth=, delay=, off on other.img"
must "dioloop fault other.img write nth=3 error=ENOSPC" \
	"$DIOLOOP_BIN" fault "$MNT/other.img" write nth=3 error=ENOSPC
expect_eq "the first run-time rule stacks the fault filter on other.img" '["fault"]' \
	"$(stat_of other.img '.filters' | jq -c .)"
expect_eq "dioloop fault lists the rule" "rule 1: write error=ENOSPC nth=3" "$(head -n 1 "$IT_TMP/last.out")"
expect_eq "writes 1, 2, 3, 4 with nth=3" "ok 4096,ok 4096,err ENOSPC,ok 4096" \
	"$(for _ in 1 2 3 4; do nodeio pwrite "$MNT/other.img" 0 4096; done | paste -sd, -)"
must "dioloop fault other.img off" "$DIOLOOP_BIN" fault "$MNT/other.img" off
must "dioloop fault other.img read delay=300ms" "$DIOLOOP_BIN" fault "$MNT/other.img" read delay=300ms
t0=$(date +%s%N)
expect_match "a read with 300 ms of injected latency still works" 'ok 4096 [0-9a-f]+' \
	"$(nodeio pread "$MNT/other.img" 0 4096)"
took=$((($(date +%s%N) - t0) / 1000000))
if ((took >= 300)); then
	it_ok "the read took ${took} ms (>= 300)"
else
	it_fail "the read with delay=300ms: expected >= 300 ms, took ${took} ms"
fi
must "dioloop fault other.img off" "$DIOLOOP_BIN" fault "$MNT/other.img" off
expect_eq "dioloop fault ... off leaves no rule" "no fault rules" "$(head -n 1 "$IT_TMP/last.out")"

it_log "---- bad rules: one line, exit status 2"
for bad in "write error=EPERM" "write rate=2" "write offset=1M" "scribble"; do
	# shellcheck disable=SC2086  # the rule is split into words on purpose
	expect_status "dioloop fault other.img $bad" 2 "$DIOLOOP_BIN" fault "$MNT/other.img" $bad
	expect_match "dioloop fault other.img $bad: one line naming the problem" 'dioloop: fault: .*' \
		"$(cat "$IT_TMP/last.out")"
done
expect_status "dioloop fault on the mount point (not a node)" 2 "$DIOLOOP_BIN" fault "$MNT" write
expect_status "dioloop fault on a node that does not exist" 2 "$DIOLOOP_BIN" fault "$MNT/nope.img" write

it_log "---- ext4 on a node whose writes to one file fail"
attach_loop "$MNT/fs.img"
LOOP=$LOOP_DEV
INNER=$IT_TMP/inner
must "mkfs.ext4 on $LOOP" mkfs_fs ext4 "$LOOP"
mount_inner "$LOOP" "$INNER"
must "files with known checksums on the inner ext4" make_files "$INNER" base
expect_match "victim: 1 MiB file, fsynced" 'ok [0-9a-f]+' "$(nodeio write-file "$INNER/victim" 1M 7)"
must "sync" sync
# The victim's blocks on the node: its extents (4 KiB blocks of ext4 =
# byte offsets in the node; the loop device maps 1:1).
extents=$(filefrag -e -b4096 "$INNER/victim" |
	awk -F'[:. ]+' '/^ *[0-9]+:/ { print $5, $6 }')
nextents=$(wc -l <<<"$extents")
read -r first last <<<"$(head -n 1 <<<"$extents")"
it_log "victim: $nextents extent(s), the first at blocks $first..$last"
[[ $first =~ ^[0-9]+$ && $last =~ ^[0-9]+$ ]] || it_die "cannot read the victim's extents from filefrag: $extents"
OFF=$((first * 4096))
LEN=$(((last - first + 1) * 4096))
must "dioloop fault fs.img write error=EIO offset=$OFF length=$LEN" \
	"$DIOLOOP_BIN" fault "$MNT/fs.img" write error=EIO offset="$OFF" length="$LEN"

rc=0
dd if=/dev/urandom of="$INNER/victim" bs=64k count=4 conv=notrunc oflag=direct status=none \
	2>"$IT_TMP/dd-direct.err" || rc=$?
if ((rc != 0)) && grep -q 'Input/output error' "$IT_TMP/dd-direct.err"; then
	it_ok "a direct write into the victim fails with EIO ($(head -n 1 "$IT_TMP/dd-direct.err"))"
else
	it_fail "a direct write into the victim: expected EIO, got exit status $rc: $(cat "$IT_TMP/dd-direct.err")"
fi
rc=0
dd if=/dev/urandom of="$INNER/victim" bs=64k count=4 conv=notrunc,fsync status=none \
	2>"$IT_TMP/dd-buffered.err" || rc=$?
if ((rc != 0)) && grep -q 'Input/output error' "$IT_TMP/dd-buffered.err"; then
	it_ok "a buffered write + fsync of the victim fails with EIO ($(head -n 1 "$IT_TMP/dd-buffered.err"))"
else
	it_fail "a buffered write + fsync of the victim: expected EIO, got exit status $rc: $(cat "$IT_TMP/dd-buffered.err")"
fi
still_serving "EIO on fs.img"
injected=$(stat_of fs.img .faults.injected.write)
eio=$(stat_of fs.img .errors.EIO)
if ((injected >= 2 && eio >= 2)); then
	it_ok "stats.json: $injected writes of fs.img injected, $eio EIO errors counted"
else
	it_fail "stats.json: expected >= 2 injected writes and EIO errors on fs.img, got $injected and $eio"
fi
expect_eq "other.img has no EIO in stats.json (only the ENOSPC of nth=3)" "0 1" \
	"$(stat_of other.img '.errors.EIO // 0') $(stat_of other.img .errors.ENOSPC)"

must "dioloop fault fs.img off" "$DIOLOOP_BIN" fault "$MNT/fs.img" off
expect_match "after off, the victim can be rewritten and fsynced" 'ok [0-9a-f]+' \
	"$(nodeio write-file "$INNER/victim" 1M 8)"
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
expect_ok "e2fsck -fn of the inner ext4 after the faults: clean" e2fsck -fn "$LOOP"
mount_inner "$LOOP" "$INNER"
check_files "$INNER" base
expect_eq "the victim holds what was written after the faults" \
	"$(nodeio write-file "$IT_TMP/victim.ref" 1M 8 | cut -d' ' -f2)" "$(sha "$INNER/victim")"
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
detach_loop "$LOOP"
still_serving "the ext4 round"

dioloop_umount "$MNT"
daemon_wait "$MAIN_PID"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"
expect_ok "e2fsck -fn of the image file fs.img: clean" e2fsck -fn "$SRC/fs.img"

it_end
