#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Data written through rbd nodes comes back intact, against a real Ceph
# cluster (rbd-lib.sh: the rbd_cluster fixture's, or one of its own when
# run alone).  Images made with `dioloop create` in a namespace of this
# test, the namespace mounted:
#  - fio writes verify=crc32c blocks to a node (O_DIRECT, libaio) and
#    reads them back at queue depth 1, at queue depth 32 with mixed block
#    sizes, and with 4 jobs at once, each in its own quarter of the
#    image: exit status 0, no verify error, err=0 in every job;
#  - ext4 and XFS on direct-I/O loop devices over nodes: mkfs, files with
#    known checksums, fsck clean (e2fsck -fn, xfs_repair -n), remount,
#    checksums match;
#  - after `dioloop umount`, each image as librbd's own tool exports it
#    holds what its node showed, and fsck of the exported file systems
#    is clean.
# A node that loses or changes written bytes fails fio's verify and the
# fsck (a build whose rbd write path drops the last byte of some writes
# does).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "fio verify, ext4 and XFS on rbd nodes" rbd fio mkfs.ext4 e2fsck mkfs.xfs xfs_repair
rbd_test_cluster
OPTS="?timeout=30"
MNT=$IT_TMP/mnt
mkdir -p "$MNT"
FSES=(ext4 xfs)

must "dioloop create $RBD_URL/fio --size 128M" \
	"$DIOLOOP_BIN" create "$RBD_URL/fio$OPTS" --size 128M
for fs in "${FSES[@]}"; do
	must "dioloop create $RBD_URL/$fs --size ${FS_IMAGE_SIZE[$fs]}" \
		"$DIOLOOP_BIN" create "$RBD_URL/$fs$OPTS" --size "${FS_IMAGE_SIZE[$fs]}"
done
start_daemon "$RBD_URL$OPTS" "$MNT"
expect_eq "nodes of $RBD_URL" "ext4 fio xfs" "$(names "$MNT")"

# fio first: a broken write path then fails its verify as well as the
# file systems' checks (a file system too broken to mount ends the test).
it_log "---- fio verify=crc32c on the node"
NODE=$MNT/fio
run_fio_verify "rbd node, QD1, 4k" --name=qd1 --filename="$NODE" --rw=randwrite \
	--bs=4k --iodepth=1 --size=8M
run_fio_verify "rbd node, QD32, 4k-256k" --name=qd32 --filename="$NODE" \
	--rw=randwrite --bsrange=4k-256k --iodepth=32 --offset=32M --size=64M
run_fio_verify "rbd node, 4 parallel jobs at offsets 0/32M/64M/96M, QD8" \
	--name=par --filename="$NODE" --rw=randwrite --bsrange=4k-64k --iodepth=8 \
	--numjobs=4 --offset=0 --offset_increment=32M --size=16M
declare -A NODE_SHA
NODE_SHA[fio]=$(sha "$NODE")

for fs in "${FSES[@]}"; do
	it_log "---- $fs on a direct-I/O loop device over the node"
	attach_loop "$MNT/$fs"
	LOOP=$LOOP_DEV
	fs_roundtrip "$fs" "$LOOP"
	detach_loop "$LOOP"
	NODE_SHA[$fs]=$(sha "$MNT/$fs")
done

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_log "---- the images as librbd's own tool reads them"
rbd_expect_export fio "${NODE_SHA[fio]}"
for fs in "${FSES[@]}"; do
	rbd_expect_export "$fs" "${NODE_SHA[$fs]}" "$fs"
done
rbd_test_cleanup
it_end
