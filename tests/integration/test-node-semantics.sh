#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Block-node semantics (DESIGN.md, "Block-node semantics"), each checked
# with one precise syscall (nodeio.py) and against the image file itself:
# which images are listed, size, st_blksize, the short read at EOF, fsync,
# punch hole + SEEK_DATA/SEEK_HOLE, ZERO_RANGE, copy_file_range between
# nodes, growable nodes (write past EOF, truncate), truncate refused on
# fixed-size nodes, mmap (private and shared, with and without -o cache;
# a shared mapping coherent with direct I/O), images appearing and disappearing while mounted,
# no creating or removing through the mount, mode and owner mirrored.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "block-node semantics" stat

M=$((1 << 20))
EMPTY_SHA=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT" "$SRC/subdir"
for img in a b; do
	must "dioloop create --size 8M $img.img" "$DIOLOOP_BIN" create --size 8M "$SRC/$img.img"
done
# 1 MiB + 512: a size that is a multiple of 512 but not of 4096, full of
# random bytes, so the last partial block and the short read at EOF show.
ODD_SIZE=$((M + 512))
must "dioloop create --size $ODD_SIZE odd.img" "$DIOLOOP_BIN" create --size "$ODD_SIZE" "$SRC/odd.img"
must "fill odd.img with random bytes" dd if=/dev/urandom of="$SRC/odd.img" bs=$ODD_SIZE count=1 \
	conv=notrunc status=none iflag=fullblock
must "dioloop create .hidden.img" "$DIOLOOP_BIN" create --size 1M "$SRC/.hidden.img"
must "dioloop create outside.img (outside SOURCE)" "$DIOLOOP_BIN" create --size 1M "$IT_TMP/outside.img"
ln -s "$IT_TMP/outside.img" "$SRC/escape.img"
ln -s ../outside.img "$SRC/escape-relative.img"
ln -s a.img "$SRC/alias.img"
ln -s missing.img "$SRC/dangling.img"
must "dioloop create subdir/nested.img" "$DIOLOOP_BIN" create --size 1M "$SRC/subdir/nested.img"

start_daemon "$SRC" "$MNT"

it_log "---- which images are nodes"
expect_eq "ls of the mount: regular images and symlinks that stay inside SOURCE" \
	"a.img alias.img b.img odd.img" "$(names "$MNT")"
for name in .hidden.img escape.img escape-relative.img dangling.img subdir; do
	expect_io "$name is not a node" "err ENOENT" stat "$MNT/$name"
done
expect_io "alias.img (symlink inside SOURCE) is served, with a.img's size" "ok $((8 * M))" stat "$MNT/alias.img"

it_log "---- size, st_blksize, the short read at EOF"
for img in a odd; do
	expect_eq "size of node $img.img = size of its image" \
		"$(stat -c %s "$SRC/$img.img")" "$(stat -c %s "$MNT/$img.img")"
	expect_eq "st_blksize of node $img.img" 4096 "$(stat -c %o "$MNT/$img.img")"
	expect_eq "type of node $img.img" "regular file" "$(stat -c %F "$MNT/$img.img")"
done
expect_same_bytes "node odd.img vs its image (whole, through the partial last block)" \
	"$MNT/odd.img" "$SRC/odd.img"
expect_io "pread of 4096 bytes 100 bytes before EOF: a short read, the image's last 100 bytes" \
	"$(nodeio pread "$SRC/odd.img" $((ODD_SIZE - 100)) 4096)" pread "$MNT/odd.img" $((ODD_SIZE - 100)) 4096
got=$(nodeio pread "$MNT/odd.img" $((ODD_SIZE - 100)) 4096)
expect_eq "pread of 4096 bytes 100 bytes before EOF returns 100 bytes" "ok 100" "${got% *}"
expect_io "pread at EOF: 0 bytes" "ok 0 $EMPTY_SHA" pread "$MNT/odd.img" "$ODD_SIZE" 4096
expect_io "pread 1 GiB past EOF: 0 bytes" "ok 0 $EMPTY_SHA" pread "$MNT/odd.img" $((ODD_SIZE + 1024 * M)) 4096
expect_eq "reading node odd.img 4 KiB at a time gives exactly its size" "$ODD_SIZE" \
	"$(dd if="$MNT/odd.img" bs=4096 status=none | wc -c)"
expect_io "pwrite at EOF: ENOSPC" "err ENOSPC" pwrite "$MNT/a.img" $((8 * M)) 4096
# Across the end, as a block device: a short write up to the end.
expect_io "pwrite of 8 KiB 4 KiB before EOF: a short write of 4 KiB" "ok 4096" \
	pwrite "$MNT/a.img" $((8 * M - 4096)) 8192 9
expect_io "fsync" "ok" fsync "$MNT/a.img"
expect_io "... the last 4 KiB hold it" "ok same" check "$SRC/a.img" $((8 * M - 4096)) 4096 9
expect_eq "... and the image did not grow" $((8 * M)) "$(stat -c %s "$SRC/a.img")"

it_log "---- writes, fsync"
expect_io "pwrite 64 KiB at 0" "ok 65536" pwrite "$MNT/a.img" 0 65536 7
expect_io "fsync" "ok" fsync "$MNT/a.img"
expect_io "after fsync the image holds the data" "ok same" check "$SRC/a.img" 0 65536 7
expect_io "unaligned pwrite (1000 bytes at 4095)" "ok 1000" pwrite "$MNT/a.img" 4095 1000 8
expect_io "fsync" "ok" fsync "$MNT/a.img"
expect_io "unaligned write landed" "ok same" check "$SRC/a.img" 4095 1000 8
expect_io "bytes before it untouched" "ok same" check "$SRC/a.img" 0 4095 7
expect_io "bytes after it untouched" "ok same" check "$SRC/a.img" 5095 $((65536 - 5095)) 7

it_log "---- punch hole, SEEK_DATA / SEEK_HOLE"
expect_io "fill a.img with a pattern" "ok $((8 * M))" pwrite "$MNT/a.img" 0 $((8 * M)) 5
expect_io "SEEK_HOLE from 0 on a full node: the end" "ok $((8 * M))" seek "$MNT/a.img" 0 hole
expect_io "punch hole [1M, 2M) (PUNCH_HOLE|KEEP_SIZE)" "ok" fallocate "$MNT/a.img" punch $M $M
expect_eq "size after the punch" $((8 * M)) "$(stat -c %s "$MNT/a.img")"
expect_io "SEEK_DATA from 0" "ok 0" seek "$MNT/a.img" 0 data
expect_io "SEEK_HOLE from 0: the punched hole" "ok $M" seek "$MNT/a.img" 0 hole
expect_io "SEEK_DATA from inside the hole: its end" "ok $((2 * M))" seek "$MNT/a.img" $((M + 4096)) data
expect_io "SEEK_HOLE from 2M: the end of the node" "ok $((8 * M))" seek "$MNT/a.img" $((2 * M)) hole
expect_io "SEEK_DATA at EOF: ENXIO" "err ENXIO" seek "$MNT/a.img" $((8 * M)) data
expect_io "the punched range reads as zeros" "ok same" check "$MNT/a.img" $M $M zero
expect_io "data before the hole intact" "ok same" check "$MNT/a.img" 0 $M 5
expect_io "data after the hole intact" "ok same" check "$MNT/a.img" $((2 * M)) $M 5
expect_io "the image file has the hole too (SEEK_HOLE on the image)" "ok $M" seek "$SRC/a.img" 0 hole

it_log "---- ZERO_RANGE"
ZOFF=$((3 * M + 1000))
ZLEN=200000
expect_io "zero range [3M+1000, +200000) (unaligned both ends)" "ok" fallocate "$MNT/a.img" zero $ZOFF $ZLEN
expect_eq "size after ZERO_RANGE" $((8 * M)) "$(stat -c %s "$MNT/a.img")"
expect_io "the zeroed range reads as zeros" "ok same" check "$MNT/a.img" $ZOFF $ZLEN zero
expect_io "the 1000 bytes before it intact" "ok same" check "$MNT/a.img" $((3 * M)) 1000 5
expect_io "the bytes after it intact" "ok same" check "$MNT/a.img" $((ZOFF + ZLEN)) 10000 5
expect_io "the image agrees" "ok same" check "$SRC/a.img" $ZOFF $ZLEN zero
expect_io "fallocate mode 0 inside the node" "ok" fallocate "$MNT/a.img" alloc 0 $M
expect_io "fallocate mode 0 leaves data alone" "ok same" check "$MNT/a.img" 0 $M 5

it_log "---- copy_file_range between nodes"
expect_io "fill b.img" "ok $((8 * M))" pwrite "$MNT/b.img" 0 $((8 * M)) 6
expect_io "copy_file_range a.img[0, 2M) -> b.img[4M, 6M)" "ok $((2 * M))" copy "$MNT/a.img" 0 "$MNT/b.img" $((4 * M)) $((2 * M))
expect_io "the copy holds the same bytes (hole included)" \
	"$(nodeio pread "$MNT/a.img" 0 $((2 * M)))" pread "$MNT/b.img" $((4 * M)) $((2 * M))
expect_io "unaligned copy_file_range a.img[100, +1M+77) -> b.img[5000, ...)" "ok $((M + 77))" \
	copy "$MNT/a.img" 100 "$MNT/b.img" 5000 $((M + 77))
expect_io "the unaligned copy holds the same bytes" \
	"$(nodeio pread "$MNT/a.img" 100 $((M + 77)))" pread "$MNT/b.img" 5000 $((M + 77))
expect_io "bytes just before the unaligned copy untouched" "ok same" check "$MNT/b.img" 0 5000 6
expect_io "bytes just after the unaligned copy untouched" "ok same" check "$MNT/b.img" $((5000 + M + 77)) 4096 6
expect_io "copy_file_range across the source's EOF: short" "ok 4096" \
	copy "$MNT/a.img" $((8 * M - 4096)) "$MNT/b.img" 0 $M
expect_io "fsync b.img" "ok" fsync "$MNT/b.img"
expect_same_bytes "b.img: node vs image after the copies" "$MNT/b.img" "$SRC/b.img"

it_log "---- truncate on a fixed-size node"
expect_io "ftruncate to 4M: EPERM" "err EPERM" truncate "$MNT/a.img" $((4 * M))
expect_io "ftruncate to 16M: EPERM" "err EPERM" truncate "$MNT/a.img" $((16 * M))
expect_eq "size after the refused truncates" $((8 * M)) "$(stat -c %s "$MNT/a.img")"
expect_eq "image size after the refused truncates" $((8 * M)) "$(stat -c %s "$SRC/a.img")"

it_log "---- mmap without -o cache (direct I/O)"
expect_io "MAP_PRIVATE read = pread" "$(nodeio pread "$MNT/a.img" 0 65536)" mmap-read "$MNT/a.img" private 0 65536
expect_io "MAP_PRIVATE write" "ok" mmap-write "$MNT/a.img" private 0 4096 99
expect_io "a MAP_PRIVATE write does not reach the node" "ok same" check "$MNT/a.img" 0 4096 5
# A block device maps shared: so does a node, through the page cache the
# kernel keeps coherent with the node's direct I/O.
expect_io "MAP_SHARED read = pread" "$(nodeio pread "$MNT/a.img" 0 65536)" mmap-read "$MNT/a.img" shared 0 65536
expect_io "MAP_SHARED write + msync" "ok" mmap-write "$MNT/a.img" shared 8192 8192 31
expect_io "the shared-mapping write reads back through the node" "ok same" check "$MNT/a.img" 8192 8192 31
expect_io "the shared-mapping write reached the image" "ok same" check "$SRC/a.img" 8192 8192 31
expect_io "a shared mapping and direct I/O see each other's writes" "ok" mmap-coherent "$MNT/a.img" 16384 8192 33
expect_io "fsync after the mapping's store" "ok" fsync "$MNT/a.img"
expect_io "the mapping's store reached the image" "ok same" check "$SRC/a.img" 16384 8192 34

it_log "---- no creating or removing through the mount"
expect_io "create new.img in the mount" "err EPERM" create "$MNT/new.img"
expect_io "unlink a.img in the mount" "err EPERM" unlink "$MNT/a.img"
expect_io "mkdir in the mount" "err EPERM" mkdir "$MNT/dir"
expect_io "rename a.img in the mount" "err EPERM" rename "$MNT/a.img" "$MNT/c.img"
expect_eq "image a.img still there" yes "$([[ -f $SRC/a.img ]] && echo yes || echo no)"

it_log "---- mode and owner mirror the image"
expect_eq "mode/owner of node a.img = its image" \
	"$(stat -c '%a %u %g' "$SRC/a.img")" "$(stat -c '%a %u %g' "$MNT/a.img")"
chmod 0640 "$SRC/a.img"
chown 1234:5678 "$SRC/a.img"
expect_eq "after chmod 0640 and chown 1234:5678 of the image: the node's" \
	"640 1234 5678" "$(stat -c '%a %u %g' "$MNT/a.img")"
chmod 0600 "$MNT/a.img"
expect_eq "after chmod 0600 of the node: the image's mode" 600 "$(stat -c %a "$SRC/a.img")"
chown 0:0 "$SRC/a.img"
touch -d '2001-02-03 04:05:06' "$SRC/a.img"
expect_eq "mtime of the node = mtime of the image" "$(stat -c %Y "$SRC/a.img")" "$(stat -c %Y "$MNT/a.img")"

it_log "---- images appearing and disappearing while mounted"
must "dioloop create late.img while mounted" "$DIOLOOP_BIN" create --size 2M "$SRC/late.img"
must "dioloop create .late-hidden.img while mounted" "$DIOLOOP_BIN" create --size 2M "$SRC/.late-hidden.img"
expect_eq "ls after adding late.img and .late-hidden.img" \
	"a.img alias.img b.img late.img odd.img" "$(names "$MNT")"
expect_eq "size of the new node" $((2 * M)) "$(stat -c %s "$MNT/late.img")"
expect_io "write to the new node" "ok 4096" pwrite "$MNT/late.img" 4096 4096 3
expect_io "fsync the new node" "ok" fsync "$MNT/late.img"
expect_io "the write reached late.img" "ok same" check "$SRC/late.img" 4096 4096 3
rm -f "$SRC/late.img"
gone=no
for ((i = 0; i < 50; i++)); do
	if [[ $(nodeio stat "$MNT/late.img") == "err ENOENT" ]]; then
		gone=yes
		break
	fi
	sleep 0.1
done
expect_eq "late.img removed from SOURCE: stat of the node fails with ENOENT within 5 s" yes "$gone"
expect_eq "ls after removing late.img" "a.img alias.img b.img odd.img" "$(names "$MNT")"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_log "---- -o growable"
GSRC=$IT_TMP/gsrc
GMNT=$IT_TMP/gmnt
mkdir -p "$GSRC"
must "dioloop create --size 1M g.img" "$DIOLOOP_BIN" create --size 1M "$GSRC/g.img"
start_daemon "$GSRC" "$GMNT" -o growable
G=$GMNT/g.img
expect_io "pwrite 4096 bytes 4096 past EOF" "ok 4096" pwrite "$G" $((M + 4096)) 4096 4
expect_eq "node size after it" $((M + 8192)) "$(stat -c %s "$G")"
expect_io "the gap reads as zeros" "ok same" check "$G" $M 4096 zero
expect_io "the write reads back" "ok same" check "$G" $((M + 4096)) 4096 4
expect_io "fsync" "ok" fsync "$G"
expect_eq "image size after fsync" $((M + 8192)) "$(stat -c %s "$GSRC/g.img")"
expect_io "unaligned extending pwrite (100 bytes at EOF)" "ok 100" pwrite "$G" $((M + 8192)) 100 4
# The exact end, or rounded up to a sector or a block (raw: to its
# request alignment, so that sizes stay multiples of it).
expect_match "node size after it: the end of the write, or rounded up to 512 or 4096" \
	"$((M + 8192 + 100))|$((M + 8192 + 512))|$((M + 8192 + 4096))" "$(stat -c %s "$G")"
expect_io "the unaligned extension reads back" "ok same" check "$G" $((M + 8192)) 100 4
expect_io "ftruncate to 512K" "ok" truncate "$G" $((512 * 1024))
expect_eq "node size after truncate" $((512 * 1024)) "$(stat -c %s "$G")"
expect_io "fsync" "ok" fsync "$G"
expect_eq "image size after truncate" $((512 * 1024)) "$(stat -c %s "$GSRC/g.img")"
expect_io "ftruncate to 2M" "ok" truncate "$G" $((2 * M))
expect_eq "node size after growing truncate" $((2 * M)) "$(stat -c %s "$G")"
expect_io "the grown part reads as zeros (no stale data from before the shrink)" \
	"ok same" check "$G" $((512 * 1024)) $((1536 * 1024)) zero
expect_io "fallocate mode 0 past EOF grows the node" "ok" fallocate "$G" alloc $((2 * M)) $M
expect_eq "node size after fallocate" $((3 * M)) "$(stat -c %s "$G")"
daemon=$DAEMON_PID
dioloop_umount "$GMNT"
daemon_wait "$daemon"
expect_eq "exit status of the growable daemon" 0 "$DAEMON_STATUS"
expect_eq "image size after unmount" $((3 * M)) "$(stat -c %s "$GSRC/g.img")"

it_log "---- -o cache: shared mmap"
CSRC=$IT_TMP/csrc
CMNT=$IT_TMP/cmnt
mkdir -p "$CSRC"
must "dioloop create --size 1M c.img" "$DIOLOOP_BIN" create --size 1M "$CSRC/c.img"
start_daemon "$CSRC" "$CMNT" -o cache
C=$CMNT/c.img
expect_io "pwrite 64K" "ok 65536" pwrite "$C" 0 65536 2
expect_io "MAP_SHARED read = pread" "$(nodeio pread "$C" 0 65536)" mmap-read "$C" shared 0 65536
expect_io "MAP_SHARED write + msync" "ok" mmap-write "$C" shared 8192 8192 9
expect_io "fsync" "ok" fsync "$C"
expect_io "the shared-mapping write reads back through the node" "ok same" check "$C" 8192 8192 9
expect_io "the shared-mapping write reached the image" "ok same" check "$CSRC/c.img" 8192 8192 9
expect_io "the bytes around it untouched" "ok same" check "$CSRC/c.img" 0 8192 2
daemon=$DAEMON_PID
dioloop_umount "$CMNT"
daemon_wait "$daemon"
expect_eq "exit status of the -o cache daemon" 0 "$DAEMON_STATUS"

it_end
