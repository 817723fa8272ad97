#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cow images kept in a Ceph cluster: the cow format over the rbd store
# (formats over stores).
#  - `dioloop create --format cow rbd://...` makes the rbd image (`rbd ls`
#    shows it; an existing one is refused with one line, exit status 1;
#    one the format cannot be written into is removed again) and writes
#    the cow format into it: `info` says "cow on rbd", the
#    mount serves it as a cow node, ext4 made on it through a loop device
#    checks clean, and read back from the cluster it passes `dioloop
#    check`;
#  - a cow image imported into an rbd namespace is recognised by its magic
#    through librbd (`info` says "cow on rbd"), and served from `dioloop
#    mount rbd://...` as a cow node: ext4 through a direct-I/O loop
#    device, a snapshot IMAGE@NAME taken through the node (the cow
#    format's, inside the rbd image), its files as at the snapshot, a
#    scrub of the mounted image clean, and after the unmount the image
#    read back from the cluster (`rbd export`) passes `dioloop check`;
#  - `dioloop check` and `dioloop scrub` of a cow image in the pool read
#    it through librbd: clean (with and without the URL's options); while
#    a mount serves the image both are refused (its exclusive lock is the
#    daemon's); a data block corrupted in a copy of the image (`rbd
#    export`, changed, `rbd import`) is found by scrub (logical and
#    physical block); a raw image in the pool is said to be raw, as a
#    local one is;
#  - `info URL?OPTIONS` names the node IMAGE, without the options, and
#    the hint for an image without exclusive-lock names the image with its
#    namespace (rbd feature enable POOL/NAMESPACE/IMAGE).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/cowlib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "cow images in a Ceph cluster" rbd mkfs.ext4 e2fsck fsfreeze jq
cow_begin
rbd_test_cluster
MNT=$IT_TMP/mnt
IN=$IT_TMP/inner
mkdir -p "$MNT" "$IN"

# rbd_images: the namespace's image names, one line.
rbd_images() {
	timeout 60 rbd ls --pool rbd --namespace "$RBD_NS" 2>&1 | paste -sd' ' -
}

it_log "---- dioloop create --format cow of an rbd:// URL"
expect_ok "dioloop create --format cow --size 96M $RBD_URL/made" \
	"$DIOLOOP_BIN" create --format cow --size 96M "$RBD_URL/made"
expect_eq "rbd ls shows the image it made" made "$(rbd_images)"
expect_ok "dioloop info $RBD_URL/made" "$DIOLOOP_BIN" info "$RBD_URL/made"
info=$(paste -sd' ' "$IT_TMP/last.out")
expect_match "info: a cow image on rbd" '.*format: +cow on rbd.*' "$info"
expect_match "info: of the size asked for" '.*size: +100663296 .*' "$info"
expect_status "create of an image that exists is refused" 1 \
	"$DIOLOOP_BIN" create --format cow --size 96M "$RBD_URL/made"
expect_eq "... in one line" 1 "$(wc -l <"$IT_TMP/last.out")"
expect_match "... that says so" "dioloop: create: $RBD_URL/made: .*File exists" \
	"$(cat "$IT_TMP/last.out")"
expect_eq "... and leaves the image as it was (cow)" cow \
	"$("$DIOLOOP_BIN" info --json "$RBD_URL/made" 2>&1 | jq -r .format 2>&1)"
expect_status "a raw create over it is refused too" 1 \
	"$DIOLOOP_BIN" create --size 96M "$RBD_URL/made"
# Made without the exclusive-lock feature, the new image cannot be opened
# for writing: the format cannot go in after the image was made.
expect_status "a cow create whose new image cannot be written fails" 1 \
	env CEPH_ARGS="--rbd-default-features=layering" \
	"$DIOLOOP_BIN" create --format cow --size 96M "$RBD_URL/half"
expect_match "... in one line that says why" "dioloop: create: $RBD_URL/half: .*exclusive-lock.*" \
	"$(cat "$IT_TMP/last.out")"
expect_match "... naming the image with its namespace" \
	".*rbd feature enable rbd/$RBD_NS/half exclusive-lock.*" "$(cat "$IT_TMP/last.out")"
expect_eq "... and leaves no half-made image behind" made "$(rbd_images)"

it_log "---- check, scrub and info of images in the pool"
expect_ok "dioloop check $RBD_URL/made" "$DIOLOOP_BIN" check "$RBD_URL/made"
expect_match "... clean" "$RBD_URL/made: generation .*: clean" "$(cat "$IT_TMP/last.out")"
expect_ok "dioloop check of the URL with options" "$DIOLOOP_BIN" check "$RBD_URL/made?timeout=20"
expect_ok "dioloop scrub $RBD_URL/made" "$DIOLOOP_BIN" scrub "$RBD_URL/made"
expect_match "... clean" ".*$RBD_URL/made: scrubbed [0-9]+ blocks, 0 bad" \
	"$(paste -sd' ' "$IT_TMP/last.out")"
expect_ok "dioloop info $RBD_URL/made?timeout=20" "$DIOLOOP_BIN" info "$RBD_URL/made?timeout=20"
expect_match "info: the node is named without the URL's options" \
	".*NODE .* made +default .*" "$(paste -sd' ' "$IT_TMP/last.out")"
expect_eq "info --json: the node is named without the URL's options" made \
	"$("$DIOLOOP_BIN" info --json "$RBD_URL/made?timeout=20" 2>&1 | jq -r '.volumes[0].node' 2>&1)"
must "create a raw image in the pool" "$DIOLOOP_BIN" create --size 16M "$RBD_URL/plain"
expect_ok "dioloop check of a raw image in the pool" "$DIOLOOP_BIN" check "$RBD_URL/plain"
expect_eq "... says it is raw, as for a local raw image" \
	"$RBD_URL/plain: a raw image: no metadata to check" "$(cat "$IT_TMP/last.out")"
expect_ok "dioloop scrub of a raw image in the pool" "$DIOLOOP_BIN" scrub "$RBD_URL/plain"
expect_eq "... says it is raw, as for a local raw image" \
	"$RBD_URL/plain: a raw image: no checksums to verify" "$(cat "$IT_TMP/last.out")"
must "rbd rm of the raw image" timeout 60 rbd rm --no-progress "rbd/$RBD_NS/plain"
expect_status "dioloop check of an image that is not there" 2 "$DIOLOOP_BIN" check "$RBD_URL/gone"
expect_match "... says so" "dioloop: check: $RBD_URL/gone: .*No such file or directory" \
	"$(cat "$IT_TMP/last.out")"

must "create c.cow (cow, 128M, local)" "$DIOLOOP_BIN" create --format cow --size 128M c.cow
must "rbd import c.cow rbd/$RBD_NS/c.cow" timeout 120 rbd import --no-progress c.cow "rbd/$RBD_NS/c.cow"
must "dioloop info $RBD_URL/c.cow" "$DIOLOOP_BIN" info "$RBD_URL/c.cow"
expect_match "info: a cow image on rbd" '.*format: +cow on rbd.*' "$(paste -sd' ' "$IT_TMP/last.out")"

start_daemon "$RBD_URL?timeout=120" "$MNT"
expect_eq "the nodes of the cow images" "c.cow made" "$(names "$MNT" | paste -sd' ')"
expect_eq "stats.json: the created image is served as a cow node" cow \
	"$(jq -r '.nodes.made.format' "$MNT/.dioloop/stats.json" 2>&1)"
attach_loop "$MNT/made"
MADE_LOOP=$LOOP_DEV
expect_ok "mkfs.ext4 on the created image's loop device" mkfs.ext4 -q "$MADE_LOOP"
mount_inner "$MADE_LOOP" "$IN"
make_files "$IN" made
umount_inner "$IN"
expect_ok "fsck of the created image is clean" e2fsck -fn "$MADE_LOOP"
detach_loop "$MADE_LOOP"
attach_loop "$MNT/c.cow"
LOOP=$LOOP_DEV
expect_status "dioloop check of the served image is refused" 2 \
	"$DIOLOOP_BIN" check "$RBD_URL/c.cow"
expect_match "... as in use (its exclusive lock)" \
	"dioloop: check: $RBD_URL/c.cow: in use: .*" "$(cat "$IT_TMP/last.out")"
expect_status "dioloop scrub of the served image (by URL) is refused" 2 \
	"$DIOLOOP_BIN" scrub "$RBD_URL/c.cow"
expect_match "... as in use (its exclusive lock)" \
	".*dioloop: scrub: $RBD_URL/c.cow: in use: .*" "$(paste -sd' ' "$IT_TMP/last.out")"
must "mkfs.ext4 on the cow node's loop device" mkfs.ext4 -q "$LOOP"
mount_inner "$LOOP" "$IN"
make_files "$IN" before
sync -f "$IN"
must "fsfreeze the file system" fsfreeze -f "$IN"
must "snapshot the node (s1)" "$DIOLOOP_BIN" snapshot "$MNT/c.cow" s1
must "thaw" fsfreeze -u "$IN"
echo changed >"$IN/random-1M"
umount_inner "$IN"
expect_eq "the snapshot node" "c.cow c.cow@s1 made" "$(names "$MNT" | paste -sd' ')"
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

expect_ok "dioloop check of the image in the pool, unmounted" "$DIOLOOP_BIN" check "$RBD_URL/c.cow"
expect_match "... clean, both volumes" "$RBD_URL/c.cow: generation .*, 2 volumes, .*: clean" \
	"$(cat "$IT_TMP/last.out")"
expect_ok "dioloop scrub of the image in the pool, unmounted" "$DIOLOOP_BIN" scrub "$RBD_URL/c.cow"
expect_match "... every data block read, none bad" ".*$RBD_URL/c.cow: scrubbed [1-9][0-9]* blocks, 0 bad" \
	"$(paste -sd' ' "$IT_TMP/last.out")"
must "rbd export of the image" timeout 120 rbd export --no-progress "rbd/$RBD_NS/c.cow" back.cow
must "dioloop check of what the cluster holds" "$DIOLOOP_BIN" check back.cow
must "rbd export of the created image" timeout 120 rbd export --no-progress "rbd/$RBD_NS/made" made.cow
expect_ok "dioloop check of the created image as the cluster holds it" "$DIOLOOP_BIN" check made.cow

it_log "---- a corrupt data block in the pool: scrub finds it"
# Logical block 0 holds ext4's superblock: written, so mapped.
pbn=$("$DIOLOOP_COW_TOOL" pbn back.cow - 0)
expect_match "logical block 0 has a physical block" '[1-9][0-9]*' "$pbn"
must "corrupt physical block $pbn in the copy" \
	dd if=/dev/urandom of=back.cow bs=1 count=16 seek=$((pbn * 4096 + 1000)) \
	conv=notrunc status=none
must "rbd import of the corrupted copy as bad.cow" \
	timeout 120 rbd import --no-progress back.cow "rbd/$RBD_NS/bad.cow"
expect_status "dioloop scrub of the corrupted image in the pool: bad blocks" 1 \
	"$DIOLOOP_BIN" scrub "$RBD_URL/bad.cow"
expect_match "... the block, logical and physical" \
	".*bad block: volume [^ ]+ lbn 0 pbn $pbn \(checksum mismatch\).*$RBD_URL/bad.cow: scrubbed [0-9]+ blocks, 1 bad.*" \
	"$(paste -sd' ' "$IT_TMP/last.out")"
rbd_test_cleanup
it_end
