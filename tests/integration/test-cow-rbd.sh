#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cow images kept in a Ceph cluster: the cow format over the rbd store
# (formats over stores).  A cow image imported into an rbd namespace is
# recognised by its magic through librbd (`info` says "cow on rbd"), and
# served from `dioloop mount rbd://...` as a cow node: ext4 through a
# direct-I/O loop device, a snapshot IMAGE@NAME taken through the node
# (the cow format's, inside the rbd image), its files as at the snapshot,
# a scrub of the mounted image clean, and after the unmount the image read
# back from the cluster (`rbd export`) passes `dioloop check`.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "cow images in a Ceph cluster" rbd mkfs.ext4 e2fsck fsfreeze jq
rbd_test_cluster
MNT=$IT_TMP/mnt
IN=$IT_TMP/inner
mkdir -p "$MNT" "$IN"

must "create c.cow (cow, 128M, local)" "$DIOLOOP_BIN" create --format cow --size 128M c.cow
must "rbd import c.cow rbd/$RBD_NS/c.cow" timeout 120 rbd import --no-progress c.cow "rbd/$RBD_NS/c.cow"
must "dioloop info $RBD_URL/c.cow" "$DIOLOOP_BIN" info "$RBD_URL/c.cow"
expect_match "info: a cow image on rbd" '.*format: +cow on rbd.*' "$(paste -sd' ' "$IT_TMP/last.out")"

start_daemon "$RBD_URL?timeout=20" "$MNT"
expect_eq "the node of the cow image" c.cow "$(names "$MNT")"
attach_loop "$MNT/c.cow"
LOOP=$LOOP_DEV
must "mkfs.ext4 on the cow node's loop device" mkfs.ext4 -q "$LOOP"
mount_inner "$LOOP" "$IN"
make_files "$IN" before
sync -f "$IN"
must "fsfreeze the file system" fsfreeze -f "$IN"
must "snapshot the node (s1)" "$DIOLOOP_BIN" snapshot "$MNT/c.cow" s1
must "thaw" fsfreeze -u "$IN"
echo changed >"$IN/random-1M"
umount_inner "$IN"
expect_eq "the snapshot node" "c.cow c.cow@s1" "$(names "$MNT" | paste -sd' ')"
must "fsck of the origin" e2fsck -fn "$LOOP"
detach_loop "$LOOP"
attach_loop_ro() {
	LOOP_DEV=$(losetup -r --direct-io=on -f --show "$1") || it_die "losetup -r $1"
	IT_LOOPS+=("$LOOP_DEV")
}
attach_loop_ro "$MNT/c.cow@s1"
SNAP_LOOP=$LOOP_DEV
must "fsck of the snapshot" e2fsck -fn "$SNAP_LOOP"
mount_inner "$SNAP_LOOP" "$IN" -o ro,noload
check_files "$IN" before
umount_inner "$IN"
detach_loop "$SNAP_LOOP"
must "scrub of the mounted cow image" "$DIOLOOP_BIN" scrub "$MNT/c.cow"
expect_match "... clean" '.*scrubbed [0-9]+ blocks, 0 bad.*' "$(paste -sd' ' "$IT_TMP/last.out")"
dioloop_umount "$MNT"

must "rbd export of the image" timeout 120 rbd export --no-progress "rbd/$RBD_NS/c.cow" back.cow
must "dioloop check of what the cluster holds" "$DIOLOOP_BIN" check back.cow
rbd_test_cleanup
it_end
