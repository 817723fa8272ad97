#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Bad input to the daemon and to the command line: writes past EOF,
# absurd offsets (also on a growable node), zero-length I/O, O_TRUNC, an
# image deleted or truncated on the host while a node is open, writes to
# read-only nodes (-o ro, a 0444 image), a SOURCE that does not exist, a
# MOUNTPOINT already in use, bad options.  Each gets a clean error (or a
# clean short result), and after each the daemon still serves another node.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "bad input: the daemon answers with clean errors and keeps serving"

M=$((1 << 20))
SIZE=$((8 * M))
EMPTY_SHA=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
ZERO4K_SHA=ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7
ANY_ERR='err E[A-Z0-9]+'

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
for img in a other del trunc; do
	must "dioloop create --size 8M $img.img" "$DIOLOOP_BIN" create --size 8M "$SRC/$img.img"
done
must "dioloop create --size 1M ro.img" "$DIOLOOP_BIN" create --size 1M "$SRC/ro.img"
chmod 0444 "$SRC/ro.img"
start_daemon "$SRC" "$MNT"
MAIN_PID=$DAEMON_PID

NSERVE=0
# still_serving AFTER: the daemon is alive and a write + read of another
# node (other.img, a fresh 64 KiB region each time) works.
still_serving() {
	local off
	NSERVE=$((NSERVE + 1))
	off=$(((NSERVE % 120) * 65536))
	if ! pid_alive "$MAIN_PID"; then
		it_show "$IT_TMP/daemon.1.log"
		it_die "after $1: expected the daemon (PID $MAIN_PID) alive, it is gone"
	fi
	expect_eq "after $1: other.img still served (write+read 64K at $off)" "ok 65536 / ok same" \
		"$(nodeio pwrite "$MNT/other.img" "$off" 65536 "$((NSERVE + 100))") / $(nodeio check "$MNT/other.img" "$off" 65536 "$((NSERVE + 100))")"
}

it_log "---- writes past EOF"
A=$MNT/a.img
expect_io "fill a.img" "ok $SIZE" pwrite "$A" 0 "$SIZE" 2
expect_io "pwrite at EOF" "err ENOSPC" pwrite "$A" "$SIZE" 4096
expect_io "pwrite across EOF (2048 in, 2048 out): a short write, as a block device's" "ok 2048" pwrite "$A" $((SIZE - 2048)) 4096 9
expect_io "the 2048 bytes before EOF were written" "ok same" check "$A" $((SIZE - 2048)) 2048 9
expect_io "pwrite 1 GiB past EOF" "err ENOSPC" pwrite "$A" $((SIZE + 1024 * M)) 4096
expect_io "ZERO_RANGE across EOF (no KEEP_SIZE)" "err ENOSPC" fallocate "$A" zero $((SIZE - 4096)) 8192
expect_io "fallocate mode 0 past EOF" "err ENOSPC" fallocate "$A" alloc "$SIZE" 4096
expect_eq "size after the refused writes" "$SIZE" "$(stat -c %s "$A")"
expect_eq "image size after the refused writes" "$SIZE" "$(stat -c %s "$SRC/a.img")"
still_serving "writes past EOF"

it_log "---- absurd offsets"
expect_match "pwrite at 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio pwrite "$A" 2^62 4096)"
expect_match "pwrite at 2^63-4096" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio pwrite "$A" $(((1 << 63) - 4096)) 4096)"
expect_match "pwrite at 2^63-1" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio pwrite "$A" $(((1 << 63) - 1)) 1)"
expect_io "pread at 2^62: 0 bytes" "ok 0 $EMPTY_SHA" pread "$A" 2^62 4096
expect_match "pread at 2^63-1" "ok 0 $EMPTY_SHA|err EINVAL" "$(nodeio pread "$A" $(((1 << 63) - 1)) 4096)"
expect_match "punch hole at 2^62 (KEEP_SIZE)" "ok|$ANY_ERR" "$(nodeio fallocate "$A" punch 2^62 4096)"
expect_match "ZERO_RANGE at 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio fallocate "$A" zero 2^62 4096)"
expect_io "punch hole of 2^62 bytes from 4K before EOF: clamped to EOF" "ok" \
	fallocate "$A" punch $((SIZE - 4096)) 2^62
expect_io "the last 4K reads as zeros" "ok same" check "$A" $((SIZE - 4096)) 4096 zero
expect_io "SEEK_DATA at 2^62" "err ENXIO" seek "$A" 2^62 data
expect_io "copy_file_range from 2^62: nothing to copy" "ok 0" copy "$A" 2^62 "$MNT/other.img" 0 4096
expect_match "copy_file_range to 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio copy "$A" 0 "$MNT/other.img" 2^62 4096)"
expect_io "ftruncate to 2^62" "err EPERM" truncate "$A" 2^62
expect_io "a.img intact before that" "ok same" check "$A" 0 $((SIZE - 4096)) 2
expect_eq "size of a.img" "$SIZE" "$(stat -c %s "$A")"
still_serving "absurd offsets"

it_log "---- absurd offsets on a growable node"
GSRC=$IT_TMP/gsrc
GMNT=$IT_TMP/gmnt
mkdir -p "$GSRC"
must "dioloop create --size 1M g.img" "$DIOLOOP_BIN" create --size 1M "$GSRC/g.img"
start_daemon "$GSRC" "$GMNT" -o growable
G=$GMNT/g.img
expect_io "fill g.img" "ok $M" pwrite "$G" 0 "$M" 3
expect_match "growable: pwrite at 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio pwrite "$G" 2^62 4096)"
expect_match "growable: pwrite at 2^63-4096" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio pwrite "$G" $(((1 << 63) - 4096)) 4096)"
expect_match "growable: ftruncate to 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio truncate "$G" 2^62)"
expect_match "growable: fallocate mode 0 at 2^62" 'err (ENOSPC|EFBIG|EINVAL)' "$(nodeio fallocate "$G" alloc 2^62 4096)"
expect_io "growable: fsync after the refused extensions" "ok" fsync "$G"
expect_eq "growable: node size unchanged" "$M" "$(stat -c %s "$G")"
expect_eq "growable: image size unchanged" "$M" "$(stat -c %s "$GSRC/g.img")"
expect_io "growable: data intact" "ok same" check "$G" 0 "$M" 3
expect_io "growable: a sane extension still works" "ok 4096" pwrite "$G" "$M" 4096 3
expect_eq "growable: size after it" $((M + 4096)) "$(stat -c %s "$G")"
gdaemon=$DAEMON_PID
dioloop_umount "$GMNT"
daemon_wait "$gdaemon"
expect_eq "growable daemon's exit status" 0 "$DAEMON_STATUS"
expect_eq "growable: image size after unmount" $((M + 4096)) "$(stat -c %s "$GSRC/g.img")"
expect_eq "growable: nothing but the image left in its SOURCE" "g.img" "$(all_names "$GSRC")"
still_serving "absurd offsets on another mount"

it_log "---- zero-length I/O and O_TRUNC"
expect_io "pread of 0 bytes at 0" "ok 0 $EMPTY_SHA" pread "$A" 0 0
expect_io "pread of 0 bytes at EOF" "ok 0 $EMPTY_SHA" pread "$A" "$SIZE" 0
expect_io "pwrite of 0 bytes at 0" "ok 0" pwrite "$A" 0 0
expect_io "pwrite of 0 bytes past EOF" "ok 0" pwrite "$A" $((SIZE + 4096)) 0
expect_io "fallocate of 0 bytes" "err EINVAL" fallocate "$A" zero 0 0
expect_io "copy_file_range of 0 bytes" "ok 0" copy "$A" 0 "$MNT/other.img" 0 0
expect_match "open with O_TRUNC: ignored (a block device) or refused" "ok|err EPERM" "$(nodeio open "$A" trunc)"
expect_eq "size after open(O_TRUNC)" "$SIZE" "$(stat -c %s "$A")"
expect_io "data after open(O_TRUNC)" "ok same" check "$A" 0 $((SIZE - 4096)) 2
still_serving "zero-length I/O and O_TRUNC"

it_log "---- read-only nodes"
RO=$MNT/ro.img
ro_sha=$(sha "$SRC/ro.img")
expect_eq "mode of the node of a 0444 image" 444 "$(stat -c %a "$RO")"
expect_io "0444 image: open for reading" "ok" open "$RO" r
expect_io "0444 image: open for writing" "err EROFS" open "$RO" w
expect_io "0444 image: pwrite" "err EROFS" pwrite "$RO" 0 4096
expect_eq "0444 image: unchanged" "$ro_sha" "$(sha "$SRC/ro.img")"
still_serving "writes to a 0444 image"

RSRC=$IT_TMP/rsrc
RMNT=$IT_TMP/rmnt
mkdir -p "$RSRC"
must "dioloop create --size 1M r.img" "$DIOLOOP_BIN" create --size 1M "$RSRC/r.img"
must "fill r.img on the host" dd if=/dev/urandom of="$RSRC/r.img" bs=1M count=1 conv=notrunc status=none
r_sha=$(sha "$RSRC/r.img")
start_daemon "$RSRC" "$RMNT" -o ro
expect_io "-o ro: open for reading" "ok" open "$RMNT/r.img" r
expect_eq "-o ro: the node reads as its image" "$r_sha" "$(sha "$RMNT/r.img")"
expect_io "-o ro: open for writing" "err EROFS" open "$RMNT/r.img" w
expect_io "-o ro: open read-write" "err EROFS" open "$RMNT/r.img" rw
expect_io "-o ro: truncate by name" "err EROFS" truncate-path "$RMNT/r.img" 4096
expect_eq "-o ro: mode of the node has no write bits" 444 "$(stat -c %a "$RMNT/r.img")"
rdaemon=$DAEMON_PID
dioloop_umount "$RMNT"
daemon_wait "$rdaemon"
expect_eq "-o ro daemon's exit status" 0 "$DAEMON_STATUS"
expect_eq "-o ro: image unchanged" "$r_sha" "$(sha "$RSRC/r.img")"
still_serving "writes to an -o ro mount"

it_log "---- an image deleted on the host while its node is open"
exec 7<>"$MNT/del.img"
expect_io "write through the open node" "ok $M" pwrite fd:7 0 "$M" 5
rm -f "$SRC/del.img"
expect_match "after rm of the image: read through the open node" "ok same|$ANY_ERR" "$(nodeio check fd:7 0 "$M" 5)"
expect_match "after rm of the image: write through the open node" "ok 4096|$ANY_ERR" "$(nodeio pwrite fd:7 "$M" 4096 5)"
expect_match "after rm of the image: fsync through the open node" "ok|$ANY_ERR" "$(nodeio fsync fd:7)"
expect_eq "after rm of the image: ls no longer shows del.img" "a.img other.img ro.img trunc.img" "$(names "$MNT")"
still_serving "deleting an open image on the host"
exec 7>&-
gone=no
# The close reaches the daemon as an asynchronous RELEASE, and the kernel
# caches the entry for a second: polled, up to 30 s.
for ((i = 0; i < 300; i++)); do
	if [[ $(nodeio stat "$MNT/del.img") == "err ENOENT" ]]; then
		gone=yes
		break
	fi
	sleep 0.1
done
expect_eq "after close: stat of del.img fails with ENOENT" yes "$gone"
still_serving "closing the node of a deleted image"

it_log "---- an image truncated on the host while its node is open"
exec 8<>"$MNT/trunc.img"
expect_io "write 8M through the open node" "ok $SIZE" pwrite fd:8 0 "$SIZE" 6
expect_io "fsync" "ok" fsync fd:8
must "truncate -s 1M of the image on the host" truncate -s 1M "$SRC/trunc.img"
expect_io "after the host truncate: the first 1M still reads back" "ok same" check fd:8 0 "$M" 6
# Past the host's new EOF the old data is gone: a short read, zeros or a
# clean error, never the old bytes.
expect_match "after the host truncate: read at 4M (past the host's EOF)" \
	"ok 0 $EMPTY_SHA|ok 4096 $ZERO4K_SHA|$ANY_ERR" "$(nodeio pread fd:8 $((4 * M)) 4096)"
expect_match "after the host truncate: write at 4M" "ok 4096|$ANY_ERR" "$(nodeio pwrite fd:8 $((4 * M)) 4096 6)"
expect_match "after the host truncate: fsync" "ok|$ANY_ERR" "$(nodeio fsync fd:8)"
expect_match "after the host truncate: stat of the node" "ok [0-9]+|$ANY_ERR" "$(nodeio stat "$MNT/trunc.img")"
exec 8>&-
still_serving "truncating an open image on the host"

it_log "---- command-line errors"
NOMNT=$IT_TMP/unused-mnt
mkdir -p "$NOMNT"
IT_FUSE+=("$NOMNT")	# in case a bad mount succeeds after all
NCLI=0
# cli_error WHAT STATUS CMD...: CMD exits with STATUS ("nonzero": any
# failure), says so in exactly one line on stderr starting "dioloop: ",
# and mounts nothing on $NOMNT.
cli_error() {
	local what=$1 want=$2 rc=0 err lines
	shift 2
	NCLI=$((NCLI + 1))
	err=$IT_TMP/cli.$NCLI.err
	timeout 20 "$@" >"$IT_TMP/cli.$NCLI.out" 2>"$err" </dev/null || rc=$?
	if [[ $want == nonzero ]] && ((rc != 0 && rc != 124)) || [[ $rc == "$want" ]]; then
		it_ok "$what: exit status $rc"
	else
		it_fail "$what: expected exit status $want, got $rc"
	fi
	lines=$(wc -l <"$err")
	if [[ $lines == 1 ]] && grep -q '^dioloop: ' "$err"; then
		it_ok "$what: one-line error: $(cat "$err")"
	else
		it_fail "$what: expected one line on stderr starting 'dioloop: ', got $lines lines:"
		it_show "$err"
	fi
	expect_eq "$what: nothing mounted on $NOMNT" no "$(is_mount "$NOMNT" && echo yes || echo no)"
}

cli_error "mount of a SOURCE that does not exist" nonzero \
	"$DIOLOOP_BIN" mount "$IT_TMP/no-such-source" "$NOMNT"
cli_error "mount of a SOURCE that is a file" nonzero \
	"$DIOLOOP_BIN" mount "$SRC/a.img" "$NOMNT"
cli_error "mount on a MOUNTPOINT that does not exist" nonzero \
	"$DIOLOOP_BIN" mount "$SRC" "$IT_TMP/no-such-mountpoint"
cli_error "mount -o bogus" 2 "$DIOLOOP_BIN" mount -o bogus "$SRC" "$NOMNT"
cli_error "mount -o threads=0" 2 "$DIOLOOP_BIN" mount -o threads=0 "$SRC" "$NOMNT"
cli_error "mount -o queue_depth=lots" 2 "$DIOLOOP_BIN" mount -o queue_depth=lots "$SRC" "$NOMNT"
cli_error "mount -o max_write=1000" 2 "$DIOLOOP_BIN" mount -o max_write=1000 "$SRC" "$NOMNT"
cli_error "mount --no-such-flag" 2 "$DIOLOOP_BIN" mount --no-such-flag "$SRC" "$NOMNT"
cli_error "mount with SOURCE only" 2 "$DIOLOOP_BIN" mount "$SRC"
cli_error "create --size 1000 (not a multiple of 512)" nonzero \
	"$DIOLOOP_BIN" create --size 1000 "$IT_TMP/bad-size.img"
expect_eq "create --size 1000 made no file" no "$([[ -e $IT_TMP/bad-size.img ]] && echo yes || echo no)"
still_serving "bad command lines"

# A MOUNTPOINT already in use: our own mount.
OSRC=$IT_TMP/osrc
mkdir -p "$OSRC"
must "dioloop create intruder.img" "$DIOLOOP_BIN" create --size 1M "$OSRC/intruder.img"
rc=0
timeout 20 "$DIOLOOP_BIN" mount "$OSRC" "$MNT" >"$IT_TMP/inuse.out" 2>"$IT_TMP/inuse.err" </dev/null || rc=$?
# If it mounted after all, its daemon is ours to stop.
for pid in $(find_daemon_pid "$MNT"); do
	[[ $pid == "$MAIN_PID" ]] || IT_PIDS+=("$pid")
done
if ((rc != 0 && rc != 124)); then
	it_ok "mount on a MOUNTPOINT already in use: exit status $rc"
else
	it_fail "mount on a MOUNTPOINT already in use: expected a non-zero exit status, got $rc ($(grep -c " $MNT " /proc/self/mounts) mounts on $MNT now)"
fi
lines=$(wc -l <"$IT_TMP/inuse.err")
if [[ $lines == 1 ]] && grep -q '^dioloop: ' "$IT_TMP/inuse.err"; then
	it_ok "mount on a MOUNTPOINT already in use: one-line error: $(cat "$IT_TMP/inuse.err")"
else
	it_fail "mount on a MOUNTPOINT already in use: expected one line on stderr starting 'dioloop: ', got $lines lines"
	it_show "$IT_TMP/inuse.err"
fi
if (($(grep -c " $MNT " /proc/self/mounts) > 1)); then
	it_log "a second file system was mounted over $MNT: unmounting it"
	fusermount3 -u "$MNT"
fi
expect_eq "the first mount still serves its own nodes" "a.img other.img ro.img trunc.img" \
	"$(names "$MNT")"
still_serving "a mount on the same MOUNTPOINT"

dioloop_umount "$MNT"
daemon_wait "$MAIN_PID"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_end
