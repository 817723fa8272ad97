#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cow images served as block nodes, in one directory with raw images
# (each recognised by its magic): ext4 and XFS made inside cow nodes
# through direct-I/O loop devices, files with known checksums, fsck clean;
# fio verify=crc32c at QD1 and QD32 on a cow node; after `dioloop umount`
# every cow image checks clean (metadata and every data checksum), and a
# new daemon serves the same file systems and data.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/cowlib.sh"

it_begin "ext4, xfs and fio verify on cow nodes next to raw ones" \
	mkfs.ext4 e2fsck mkfs.xfs xfs_repair fio jq
cow_begin

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
make_cow "$SRC/ext4.cow" "${FS_IMAGE_SIZE[ext4]}"
make_cow "$SRC/xfs.cow" "${FS_IMAGE_SIZE[xfs]}" xxhash64
make_cow "$SRC/fio.cow" 128M
must "dioloop create --size ${FS_IMAGE_SIZE[ext4]} raw.img" \
	"$DIOLOOP_BIN" create --size "${FS_IMAGE_SIZE[ext4]}" "$SRC/raw.img"

start_daemon "$SRC" "$MNT"
STATS=$MNT/.dioloop/stats.json
expect_eq "ls of the mount: every image, cow and raw" \
	"ext4.cow fio.cow raw.img xfs.cow" "$(names "$MNT")"
for n in ext4.cow xfs.cow fio.cow raw.img; do
	want=cow
	[[ $n == *.img ]] && want=raw
	expect_eq "format of node $n in stats.json (by magic)" "$want" \
		"$(node_stat "$MNT" "$n" format)"
done
expect_eq "size of node ext4.cow = the size it was made with" \
	$((96 << 20)) "$(stat -c %s "$MNT/ext4.cow")"
expect_eq "size of node xfs.cow" $((320 << 20)) "$(stat -c %s "$MNT/xfs.cow")"
used0=$(node_stat "$MNT" ext4.cow allocated)

declare -A DEV
for n in ext4 xfs; do
	attach_loop "$MNT/$n.cow"
	DEV[$n]=$LOOP_DEV
done
attach_loop "$MNT/raw.img"
RAWDEV=$LOOP_DEV

for n in ext4 xfs; do
	it_log "---- $n on ${DEV[$n]} (cow node $n.cow)"
	fs_roundtrip "$n" "${DEV[$n]}"
done
it_log "---- ext4 on $RAWDEV (raw node raw.img, same mount)"
must "mkfs ext4 on the raw node's loop device" mkfs_fs ext4 "$RAWDEV"
mount_inner "$RAWDEV" "$IT_TMP/inner-raw"
must "write files to ext4 on the raw node" make_files "$IT_TMP/inner-raw" raw
umount_inner "$IT_TMP/inner-raw" || it_die "cannot go on with inner-raw mounted"

used1=$(node_stat "$MNT" ext4.cow allocated)
if ((used1 > used0)); then
	it_ok "ext4.cow uses more container blocks after mkfs and files ($used0 -> $used1 bytes)"
else
	it_fail "ext4.cow: expected its container usage to grow after mkfs and files, got $used0 -> $used1 bytes"
fi

run_fio_verify "cow node, QD1, 4k" --name=qd1 --filename="$MNT/fio.cow" \
	--rw=randwrite --bs=4k --iodepth=1 --size=16M
run_fio_verify "cow node, QD32, 4k-256k" --name=qd32 --filename="$MNT/fio.cow" \
	--rw=randwrite --bsrange=4k-256k --iodepth=32 --size=96M
run_fio_verify "cow node, QD16, 512-byte-granular (read-modify-write)" \
	--name=unaligned --filename="$MNT/fio.cow" --rw=randwrite \
	--bsrange=512-12k --blockalign=512 --iodepth=16 --size=8M --offset=100M
expect_eq "checksum errors of the cow nodes in stats.json" "0 0 0" \
	"$(jq -r '[.nodes["ext4.cow", "xfs.cow", "fio.cow"].checksum_errors] | join(" ")' "$STATS")"

for n in ext4 xfs; do
	detach_loop "${DEV[$n]}"
done
detach_loop "$RAWDEV"
declare -A NODE_SHA
for n in ext4.cow xfs.cow fio.cow raw.img; do
	NODE_SHA[$n]=$(sha "$MNT/$n")
done

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

for n in ext4.cow xfs.cow fio.cow; do
	expect_cow_clean "$SRC/$n"
done
expect_ok "fsck of ext4 on the raw image file is clean" fsck_fs ext4 "$SRC/raw.img"

it_log "---- a new daemon over the same images"
start_daemon "$SRC" "$MNT"
for n in ext4.cow xfs.cow fio.cow raw.img; do
	expect_eq "sha256 of node $n after the restart = before" \
		"${NODE_SHA[$n]}" "$(sha "$MNT/$n")"
done
for n in ext4 xfs; do
	attach_loop "$MNT/$n.cow"
	DEV[$n]=$LOOP_DEV
	expect_ok "fsck of $n on cow node $n.cow after the restart is clean" \
		fsck_fs "$n" "${DEV[$n]}"
	mount_inner "${DEV[$n]}" "$IT_TMP/inner-$n"
	check_files "$IT_TMP/inner-$n" "$n"
	umount_inner "$IT_TMP/inner-$n"
	detach_loop "${DEV[$n]}"
done
attach_loop "$MNT/raw.img"
mount_inner "$LOOP_DEV" "$IT_TMP/inner-raw"
check_files "$IT_TMP/inner-raw" raw
umount_inner "$IT_TMP/inner-raw"
detach_loop "$LOOP_DEV"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the second daemon" 0 "$DAEMON_STATUS"
expect_cow_clean "$SRC/ext4.cow"

it_end
