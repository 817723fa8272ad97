#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# dioloop mount refuses what would mislead, while the terminal listens:
#   - a MOUNTPOINT with files in it (the mount would hide them): exit 1,
#     one line naming it and -o nonempty; with -o nonempty it mounts, and
#     the files are back after the umount;
#   - a SOURCE whose images are all served by another mount: exit 1, one
#     line per image saying why, then one line saying nothing can be
#     served; no mount is left behind;
#   - an empty SOURCE still mounts (images may come later).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "dioloop mount: non-empty mount points and sources with nothing to serve"
mkdir -p src full busy empty m-empty m1
must "create src/a.img" "$DIOLOOP_BIN" create --size 4M src/a.img
must "create src/b.img" "$DIOLOOP_BIN" create --size 4M src/b.img
echo keep >full/note.txt

# adopt NAME: a mount on $IT_TMP/NAME (made by `mount src NAME`) that
# should not have happened is still ours to release (the trap unmounts it
# and kills its daemon).
adopt() {
	local pid
	is_mount "$IT_TMP/$1" || return 0
	IT_FUSE+=("$IT_TMP/$1")
	for pid in $(find_daemon_pid "$1"); do
		IT_PIDS+=("$pid")
	done
}

expect_status "mount on a non-empty MOUNTPOINT" 1 "$DIOLOOP_BIN" mount src full
adopt full
expect_eq "... one line naming it and -o nonempty" \
	"dioloop: mount: MOUNTPOINT full is not empty: the mount would hide its files (use an empty directory, or -o nonempty)" \
	"$(cat "$IT_TMP/last.out")"
expect_eq "... nothing mounted there" no "$(is_mount "$IT_TMP/full" && echo yes || echo no)"

start_daemon src "$IT_TMP/full" -o nonempty
expect_eq "-o nonempty: the nodes are served" "a.img b.img" "$(names "$IT_TMP/full")"
dioloop_umount "$IT_TMP/full"
expect_eq "... and full/note.txt is there again" keep "$(cat full/note.txt)"

start_daemon src "$IT_TMP/m1"
expect_status "mount of a SOURCE whose every image is served elsewhere" 1 \
	"$DIOLOOP_BIN" mount src busy
adopt busy
expect_eq "... one line per image, then one saying nothing can be served" \
	"a.img: not served b.img: not served dioloop: mount: src: none of its 2 images can be served (the lines above say why)" \
	"$(sed -E 's/^dioloop\[[0-9]+\]: ([a-z.]+: not served).*/\1/' "$IT_TMP/last.out" | sort | paste -sd' ')"
expect_eq "... and nothing is mounted on busy" no "$(is_mount "$IT_TMP/busy" && echo yes || echo no)"
dioloop_umount "$IT_TMP/m1"

start_daemon empty "$IT_TMP/m-empty"
expect_eq "an empty SOURCE mounts (no nodes yet)" "" "$(names "$IT_TMP/m-empty")"
dioloop_umount "$IT_TMP/m-empty"
it_end
