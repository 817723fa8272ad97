#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's "Images in a Ceph cluster" works when pasted: its ```sh
# block is run, as it stands, with bash -e in an empty directory, this
# build's dioloop first on the PATH and CEPH_CONF naming the test cluster
# (the rbd_cluster fixture's; run alone, a cluster of its own).  It must
# exit 0, print the image's info and leave nothing behind (no mount, no
# loop device on the node); the image is removed afterwards.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "the README's Ceph section, pasted" rbd mkfs.ext4 jq
rbd_test_cluster
# An image of that name from an earlier run would make create fail.
timeout 60 rbd rm rbd/disk0 >/dev/null 2>&1 || true

readme_block "Images in a Ceph cluster" >ceph.sh
expect_match "the section has an rbd:// mount and umount" \
	'.*dioloop mount rbd://.*dioloop umount .*' "$(paste -sd' ' ceph.sh)"
it_show ceph.sh 20

mkdir bin work
ln -s "$DIOLOOP_BIN" bin/dioloop
IT_FUSE+=("$IT_TMP/work/mnt")
IT_INNER+=("$IT_TMP/work/inner")

rc=0
(cd work && PATH=$IT_TMP/bin:$PATH bash -e ../ceph.sh) >run.out 2>&1 || rc=$?
it_show run.out 20
for dev in $(losetup -j "$IT_TMP/work/mnt/disk0" -O NAME -n 2>/dev/null); do
	record_loop "$dev"
done
expect_eq "the section's commands exit 0" 0 "$rc"
expect_match "... and end with the image's info" '.*format: *raw on rbd.*size: *1073741824 \(1.0 GiB\).*' \
	"$(paste -sd' ' run.out)"
expect_eq "... nothing mounted on mnt or inner" "no no" \
	"$(is_mount "$IT_TMP/work/mnt" && echo yes || echo no) $(is_mount "$IT_TMP/work/inner" && echo yes || echo no)"
expect_eq "... no loop device left on the node" "" \
	"$(losetup -j "$IT_TMP/work/mnt/disk0" 2>/dev/null)"
must "rbd rm rbd/disk0" timeout 60 rbd rm rbd/disk0
rbd_test_cleanup
it_end
