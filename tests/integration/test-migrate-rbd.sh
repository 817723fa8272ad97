#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Live migration to and from a Ceph cluster (rbd-lib.sh: the rbd_cluster
# fixture's, or one of its own when run alone), while fio verify=crc32c
# runs through ext4 on a direct-I/O loop device over the node: a raw
# image moves to an rbd image, then that rbd image to a local cow image.
# A snapshot of the node while on rbd (a redirect to an rbd image) is a
# node too.  After each switch: no verify error, the files intact, e2fsck clean, the
# destination byte-identical to the node (the rbd image as `rbd export`
# reads it) and, after a restart, the node served from it.  Then `dioloop
# convert` of a sparse raw image to rbd:// and back: the same bytes, the
# holes kept.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "live migration and convert with rbd:// images" rbd fio mkfs.ext4 e2fsck jq
rbd_test_cluster
OPTS="?timeout=20"
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
INNER=$IT_TMP/inner
DST=$IT_TMP/dst
mkdir -p "$SRC" "$DST"

node_format() {
	jq -r --arg n "$1" '.nodes[$n].format' "$MNT/.dioloop/stats.json" 2>&1
}

# fio_load NAME: fio verify=crc32c in the inner file system, in the
# background (FIO).
fio_load() {
	start_helper fio --name="$1" --directory="$INNER" --size=16M --bs=4k \
		--rw=randwrite --ioengine=libaio --iodepth=16 --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --loops=3 \
		--output="$IT_TMP/$1.out"
	FIO=$HELPER_PID
	wait_fio_writing "$INNER/$1.0.0" $((16 * 1048576)) "$FIO"
}

# fio_check NAME
fio_check() {
	local rc=0
	wait "$FIO" || rc=$?
	forget_pid "$FIO"
	if ((rc == 0)) && grep -q "err= 0" "$IT_TMP/$1.out"; then
		it_ok "fio verify=crc32c through the switch ($1): no error"
	else
		it_fail "expected fio ($1) to verify without error, got exit status $rc:"
		it_show "$IT_TMP/$1.out" 15
	fi
}

must "create b.img" "$DIOLOOP_BIN" create --size 128M "$SRC/b.img"
start_daemon "$SRC" "$MNT"
attach_loop "$MNT/b.img"
LOOP=$LOOP_DEV
must "mkfs.ext4 on b.img" mkfs.ext4 -q -F "$LOOP"
mount_inner "$LOOP" "$INNER"
must "write files with known checksums" make_files "$INNER" b

it_log "---- raw -> rbd under fio"
fio_load to-rbd
expect_ok "migrate b.img to $RBD_URL/b under fio" \
	"$DIOLOOP_BIN" migrate --bps 32M "$MNT/b.img" "$RBD_URL/b$OPTS"
it_show "$IT_TMP/last.out" 3
fio_check to-rbd
expect_eq "b.img is served by the rbd backend" rbd "$(node_format b.img)"
check_files "$INNER" b
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
expect_ok "e2fsck of the migrated ext4 is clean" e2fsck -fn "$LOOP"
detach_loop "$LOOP"
sha_node=$(sha "$MNT/b.img")
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
must "rbd export rbd/$RBD_NS/b" timeout 120 rbd export --no-progress "rbd/$RBD_NS/b" "$IT_TMP/b.export"
expect_eq "the rbd image (rbd export) is byte-identical to the node" \
	"$sha_node" "$(sha "$IT_TMP/b.export")"
rm -f "$IT_TMP/b.export"

start_daemon "$SRC" "$MNT"
expect_eq "after a restart b.img is served by the rbd backend" rbd "$(node_format b.img)"
expect_eq "after a restart b.img has the rbd image's bytes" "$sha_node" "$(sha "$MNT/b.img")"

it_log "---- a snapshot of the node on rbd"
expect_ok "dioloop snapshot of b.img (on rbd)" "$DIOLOOP_BIN" snapshot "$MNT/b.img" pre
expect_eq "the snapshot is a node" "b.img b.img@pre" "$(names "$MNT")"
expect_same_bytes "the snapshot of the idle node" "$MNT/b.img" "$MNT/b.img@pre"
expect_eq "stats.json answers, the snapshot is read-only" true \
	"$(jq -r '.nodes["b.img@pre"].readonly' "$MNT/.dioloop/stats.json" 2>&1)"
expect_status "migrating a node with a snapshot is refused (one volume would move)" 1 \
	"$DIOLOOP_BIN" migrate "$MNT/b.img" "$DST/x.raw"
expect_ok "delete the snapshot" "$DIOLOOP_BIN" snapshot --delete "$MNT/b.img" pre

it_log "---- rbd -> cow under fio"
attach_loop "$MNT/b.img"
LOOP=$LOOP_DEV
mount_inner "$LOOP" "$INNER"
fio_load to-cow
expect_ok "migrate b.img (on rbd) to a cow image under fio" \
	"$DIOLOOP_BIN" migrate --format cow --bps 32M "$MNT/b.img" "$DST/b.cow"
it_show "$IT_TMP/last.out" 3
fio_check to-cow
expect_eq "b.img is served by the cow backend" cow "$(node_format b.img)"
check_files "$INNER" b
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
expect_ok "e2fsck after the switch to cow is clean" e2fsck -fn "$LOOP"
detach_loop "$LOOP"
sha_node=$(sha "$MNT/b.img")
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
start_daemon "$SRC" "$MNT"
expect_eq "after a restart b.img is served by the cow backend" cow "$(node_format b.img)"
expect_eq "after a restart b.img has the same bytes" "$sha_node" "$(sha "$MNT/b.img")"
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
expect_ok "the rbd image is no longer locked (rbd lock ls is empty)" \
	test -z "$(timeout 60 rbd lock ls "rbd/$RBD_NS/b" 2>&1)"

it_log "---- convert raw -> rbd:// -> raw"
C=$IT_TMP/c.img
must "a sparse 40 MiB raw image with 3 MiB of data" \
	dd if=/dev/urandom of="$C" bs=1M count=3 seek=5 status=none
truncate -s 40M "$C"
expect_ok "convert c.img to $RBD_URL/c" "$DIOLOOP_BIN" convert "$C" "$RBD_URL/c$OPTS"
expect_match "rbd du: 40 MiB provisioned, 3-4 MiB used (holes not written)" \
	'.*40 MiB +[34] MiB.*' "$(timeout 60 rbd du "rbd/$RBD_NS/c" 2>/dev/null | tail -n 1)"
expect_status "convert over the existing rbd image without --force" 1 \
	"$DIOLOOP_BIN" convert "$C" "$RBD_URL/c$OPTS"
expect_ok "convert $RBD_URL/c back to a raw file" "$DIOLOOP_BIN" convert "$RBD_URL/c$OPTS" "$IT_TMP/c2.img"
expect_same_bytes "raw -> rbd -> raw" "$C" "$IT_TMP/c2.img"
used=$(du -k "$IT_TMP/c2.img" | cut -f1)
expect_match "the raw copy is sparse (${used} KiB allocated)" '3[0-9][0-9][0-9]|4[0-9][0-9][0-9]' "$used"
rbd_test_cleanup
it_end
