#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The README's quick start works when pasted: the first ```sh block under
# "## Quick start" is extracted and run, as it stands, with bash -e in an
# empty directory and this build's dioloop first on the PATH.  It must
# exit 0, print the image's info, and leave nothing behind (no mount, no
# loop device on the node); what it made is released by the trap if not.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "the README's quick start, pasted" mkfs.ext4
readme_block "Quick start" >quickstart.sh
expect_match "the quick start has a dioloop mount and umount" \
	'.*dioloop mount .*dioloop umount .*' "$(paste -sd' ' quickstart.sh)"
it_show quickstart.sh 20

mkdir bin work
ln -s "$DIOLOOP_BIN" bin/dioloop
# What the quick start would leave if it failed midway: ours to release.
IT_FUSE+=("$IT_TMP/work/mnt")
IT_INNER+=("$IT_TMP/work/inner")

rc=0
(cd work && PATH=$IT_TMP/bin:$PATH bash -e ../quickstart.sh) >run.out 2>&1 || rc=$?
it_show run.out 20
for dev in $(losetup -j "$IT_TMP/work/mnt/disk0.img" -O NAME -n 2>/dev/null); do
	record_loop "$dev"
done
expect_eq "the quick start exits 0" 0 "$rc"
expect_match "... and ends with the image's info" '.*format: *raw.*size: *1073741824 \(1.0 GiB\).*' \
	"$(paste -sd' ' run.out)"
expect_eq "... nothing mounted on mnt or inner" "no no" \
	"$(is_mount "$IT_TMP/work/mnt" && echo yes || echo no) $(is_mount "$IT_TMP/work/inner" && echo yes || echo no)"
expect_eq "... no loop device left on the node" "" \
	"$(losetup -j "$IT_TMP/work/mnt/disk0.img" 2>/dev/null)"
it_end
