#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ext4, XFS and btrfs on block nodes through `losetup --direct-io=on`:
# mkfs, files with known checksums, fsck clean, remount, checksums match;
# after `dioloop umount` every image file is byte-identical to what its node
# showed, and fsck of the image file itself is clean.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "mkfs/fsck of ext4, xfs, btrfs on loop devices over nodes" \
	mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs

FSES=(ext4 xfs btrfs)
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
for fs in "${FSES[@]}"; do
	must "dioloop create --size ${FS_IMAGE_SIZE[$fs]} $fs.img" \
		"$DIOLOOP_BIN" create --size "${FS_IMAGE_SIZE[$fs]}" "$SRC/$fs.img"
done

start_daemon "$SRC" "$MNT"
for fs in "${FSES[@]}"; do
	expect_eq "size of node $fs.img = size of its image" \
		"$(stat -c %s "$SRC/$fs.img")" "$(stat -c %s "$MNT/$fs.img")"
done

declare -A DEV
for fs in "${FSES[@]}"; do
	attach_loop "$MNT/$fs.img"
	DEV[$fs]=$LOOP_DEV
done

for fs in "${FSES[@]}"; do
	it_log "---- $fs on ${DEV[$fs]}"
	fs_roundtrip "$fs" "${DEV[$fs]}"
done

for fs in "${FSES[@]}"; do
	detach_loop "${DEV[$fs]}"
done

# What each node shows, before the daemon goes away.
declare -A NODE_SHA
for fs in "${FSES[@]}"; do
	NODE_SHA[$fs]=$(sha "$MNT/$fs.img")
	expect_same_bytes "node $fs.img vs its image, while mounted" \
		"$MNT/$fs.img" "$SRC/$fs.img"
done

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

for fs in "${FSES[@]}"; do
	expect_eq "sha256 of $fs.img after unmount = sha256 of its node before" \
		"${NODE_SHA[$fs]}" "$(sha "$SRC/$fs.img")"
	expect_ok "fsck of $fs on the image file $fs.img is clean" \
		fsck_fs "$fs" "$SRC/$fs.img"
done

it_end
