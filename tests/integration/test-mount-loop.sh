#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# `dioloop mount --loop`: the daemon goes to the background, attaches a
# direct-I/O loop device to every node and prints "NAME /dev/loopN" for each.
# On those devices: ext4, XFS and btrfs, files with known checksums, fsck
# clean, remount, checksums match.  `dioloop umount` then detaches the loop
# devices itself, the daemon exits, and every image is byte-identical to what
# its node showed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "dioloop mount --loop: mkfs/fsck of ext4, xfs, btrfs" \
	mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs

FSES=(ext4 xfs btrfs)
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
for fs in "${FSES[@]}"; do
	must "dioloop create --size ${FS_IMAGE_SIZE[$fs]} $fs.img" \
		"$DIOLOOP_BIN" create --size "${FS_IMAGE_SIZE[$fs]}" "$SRC/$fs.img"
done

# Record the mount point first: whatever happens, cleanup unmounts it.
IT_FUSE+=("$MNT")
rc=0
"$DIOLOOP_BIN" mount --loop "$SRC" "$MNT" >"$IT_TMP/mount.out" 2>"$IT_TMP/mount.err" </dev/null ||
	rc=$?
mapfile -t pids < <(find_daemon_pid "$MNT")
IT_PIDS+=("${pids[@]}")
# Loop devices it printed: cleanup detaches them if they are still ours.
while read -r name dev; do
	[[ $dev == /dev/loop* ]] && record_loop "$dev"
done <"$IT_TMP/mount.out"
if ((rc != 0)); then
	it_show "$IT_TMP/mount.err"
	it_die "dioloop mount --loop $SRC $MNT: expected exit status 0, got $rc"
fi
it_ok "dioloop mount --loop exited 0 once ready"
expect_eq "background daemons serving $MNT" 1 "${#pids[@]}"
expect_eq "$MNT is a mount point" yes "$(is_mount "$MNT" && echo yes || echo no)"
expect_eq "lines printed by dioloop mount --loop" 3 "$(wc -l <"$IT_TMP/mount.out")"

declare -A DEV
while read -r name dev; do
	expect_match "line for $name" '/dev/loop[0-9]+' "$dev"
	DEV[${name%.img}]=$dev
done <"$IT_TMP/mount.out"
for fs in "${FSES[@]}"; do
	dev=${DEV[$fs]:-}
	[[ -n $dev ]] || it_die "dioloop mount --loop printed no line for $fs.img: $(cat "$IT_TMP/mount.out")"
	expect_eq "backing file of $dev" "$MNT/$fs.img" "$(loop_backing "$dev")"
	expect_eq "direct I/O on $dev (/sys/block/${dev#/dev/}/loop/dio)" 1 \
		"$(cat "/sys/block/${dev#/dev/}/loop/dio" 2>&1)"
	expect_eq "size of $dev = size of $fs.img" \
		"$(stat -c %s "$SRC/$fs.img")" "$(blockdev --getsize64 "$dev")"
done

for fs in "${FSES[@]}"; do
	it_log "---- $fs on ${DEV[$fs]}"
	fs_roundtrip "$fs" "${DEV[$fs]}"
done

# What each node shows, with the loop devices still attached (idle).
declare -A NODE_SHA
for fs in "${FSES[@]}"; do
	NODE_SHA[$fs]=$(sha "$MNT/$fs.img")
done

# dioloop umount detaches the loop devices, flushes, unmounts.
dioloop_umount "$MNT"
for fs in "${FSES[@]}"; do
	dev=${DEV[$fs]}
	if wait_detached "$dev" 10; then
		it_ok "dioloop umount detached $dev"
		forget_loop "$dev"
	else
		it_fail "dioloop umount: expected $dev detached, still backed by $(loop_backing "$dev")"
	fi
done
for pid in "${pids[@]}"; do
	daemon_wait "$pid"
	expect_eq "background daemon $pid after dioloop umount" exited "$DAEMON_STATUS"
done

for fs in "${FSES[@]}"; do
	expect_eq "sha256 of $fs.img after unmount = sha256 of its node before" \
		"${NODE_SHA[$fs]}" "$(sha "$SRC/$fs.img")"
	expect_ok "fsck of $fs on the image file $fs.img is clean" \
		fsck_fs "$fs" "$SRC/$fs.img"
done

it_end
