#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# A cow image on an NFS server (a real nfs-ganesha, nfs-lib.sh), its
# container reached through the nfs store:
#  - `dioloop mount nfs://...` serves the cow image found in the export as
#    a cow node (format cow in stats.json, the volume's size, not the
#    container file's; the container file's mtime on the server);
#  - ext4 through a direct-I/O loop device over the node: mkfs.ext4, files
#    with known checksums, e2fsck -fn clean;
#  - a snapshot through the ctl file: the node IMAGE@NAME is listed,
#    read-only, and its file system checks clean and holds the files;
#  - scrub of the mounted image reads every block through the store: no
#    bad block; a block corrupted in the exported file is found by scrub
#    (volume, logical and physical block) and reads as EIO through the
#    node until it is overwritten;
#  - after unmount, the exported file checks clean (`dioloop check` and
#    the cow library) and still has both volumes;
#  - `dioloop create --format cow nfs://...` makes the file on the server
#    and writes the cow format into it (`info` says cow on nfs, the file
#    checks clean); an existing file is refused with exit status 1;
#  - `dioloop check` and `dioloop scrub` of a cow image by its nfs:// URL
#    read it through the nfs store: clean; `info` of the URL with options
#    names the node without them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/cowlib.sh"
source "$IT_DIR/nfs-lib.sh"

it_begin "cow images on an NFS server: served, snapshotted, scrubbed, checked" \
	ganesha.nfsd rpcinfo mkfs.ext4 e2fsck jq
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"
cow_begin

EXPORT=$IT_TMP/export
IMAGES=$EXPORT/images
MNT=$IT_TMP/mnt
mkdir -p "$IMAGES" "$MNT"
make_cow "$IMAGES/disk.cow" 96M
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"
DIR_URL=$NFS_URL_BASE/images
# The MOUNT port given, not asked from rpcbind: another test's ganesha may
# have registered its own there.
OPTS="?timeout=60&mountport=$MNT_PORT"
NODE=$MNT/disk.cow

it_log "---- dioloop create --format cow of an nfs:// URL"
expect_ok "dioloop create --format cow --size 32M $DIR_URL/made.cow" \
	"$DIOLOOP_BIN" create --format cow --size 32M "$DIR_URL/made.cow$OPTS"
expect_match "info through nfs:// says cow on nfs" '.*format: +cow on nfs .*' \
	"$("$DIOLOOP_BIN" info "$DIR_URL/made.cow$OPTS" 2>&1 | tr '\n' ' ')"
expect_ok "the file made on the server checks clean" "$DIOLOOP_BIN" check "$IMAGES/made.cow"
expect_ok "dioloop check of the nfs:// URL" "$DIOLOOP_BIN" check "$DIR_URL/made.cow$OPTS"
expect_match "... clean" "$DIR_URL/made.cow\\?.*: generation .*: clean" "$(cat "$IT_TMP/last.out")"
expect_ok "dioloop scrub of the nfs:// URL" "$DIOLOOP_BIN" scrub "$DIR_URL/made.cow$OPTS"
expect_match "... clean" ".*scrubbed [0-9]+ blocks, 0 bad" "$(paste -sd' ' "$IT_TMP/last.out")"
expect_eq "info of the URL with options: the node is named without them" made.cow \
	"$("$DIOLOOP_BIN" info --json "$DIR_URL/made.cow$OPTS" 2>&1 | jq -r '.volumes[0].node' 2>&1)"
expect_status "create of a file that exists is refused" 1 \
	"$DIOLOOP_BIN" create --format cow --size 32M "$DIR_URL/made.cow$OPTS"
expect_eq "... in one line" 1 "$(wc -l <"$IT_TMP/last.out")"
rm -f "$IMAGES/made.cow"

it_log "---- mount the remote directory"
start_daemon "$DIR_URL$OPTS" "$MNT"
expect_eq "nodes of the remote directory" "disk.cow" "$(names "$MNT")"
expect_eq "the remote cow image is served as a cow node (stats.json format)" cow \
	"$(node_stat "$MNT" disk.cow format)"
expect_eq "the node's size is the volume's (96 MiB), not the container file's" \
	100663296 "$(stat -c %s "$NODE")"
expect_eq "the node's mtime is the exported container file's (the server's, not 1970)" \
	"$(stat -c %Y "$IMAGES/disk.cow")" "$(stat -c %Y "$NODE")"
expect_match "info on the exported image through nfs:// says cow on nfs" \
	'.*format: +cow on nfs .*' \
	"$("$DIOLOOP_BIN" info "$DIR_URL/disk.cow$OPTS" 2>&1 | tr '\n' ' ')"

it_log "---- ext4 through a loop device"
attach_loop "$NODE"
LOOP=$LOOP_DEV
must "mkfs.ext4 on the cow node's loop device" mkfs_fs ext4 "$LOOP"
INNER=$IT_TMP/inner
mount_inner "$LOOP" "$INNER"
must "write files with known checksums" make_files "$INNER" base
umount_inner "$INNER"
expect_ok "e2fsck -fn through the loop device is clean" e2fsck -fn "$LOOP"

it_log "---- a snapshot"
expect_ctl "snapshot of the remote cow node" "disk.cow@s1" snapshot disk.cow s1
expect_eq "the snapshot node is listed" "disk.cow disk.cow@s1" "$(names "$MNT")"
mode=$(stat -c %a "$NODE@s1")
expect_eq "snapshot node disk.cow@s1: no write bits in its mode ($mode)" 0 $((8#$mode & 8#222))
expect_io "opening the snapshot for writing fails (read-only volume)" "err EROFS" \
	open "$NODE@s1" w
must "write more files on the origin after the snapshot" bash -c \
	"mount '$LOOP' '$INNER' && mkdir -p '$INNER/after' && head -c 4M /dev/urandom >'$INNER/after/x' && umount '$INNER'"
SNAPLOOP=$(losetup -r --direct-io=on -f --show "$NODE@s1" 2>"$IT_TMP/losetup.err") ||
	{ it_show "$IT_TMP/losetup.err"; it_die "losetup -r of the snapshot node failed"; }
IT_LOOPS+=("$SNAPLOOP")
expect_ok "e2fsck -fn of the snapshot is clean" e2fsck -fn "$SNAPLOOP"
SNAPDIR=$IT_TMP/inner-snap
mount_inner "$SNAPLOOP" "$SNAPDIR" -o ro,noload
if check_files "$SNAPDIR" base; then
	it_ok "the snapshot holds the files written before it (sha256)"
else
	it_fail "expected the snapshot to hold the files written before it"
fi
if [[ -e $SNAPDIR/after ]]; then
	it_fail "expected no 'after' directory in the snapshot"
else
	it_ok "the snapshot does not see writes made after it"
fi
umount_inner "$SNAPDIR"
detach_loop "$SNAPLOOP"

it_log "---- scrub"
expect_ctl "scrub of the remote cow image: every block read back, none bad" \
	"scrubbed [1-9][0-9]* blocks, 0 bad" scrub disk.cow

detach_loop "$LOOP"

it_log "---- a corrupt block on the server: scrub finds it, a read gives EIO"
LBN=20000
expect_io "write logical block $LBN of the node (seed 1)" "ok 4096" \
	pwrite "$NODE" $((LBN * 4096)) 4096 1
expect_io "fsync of the node (a commit)" "ok" fsync "$NODE"
pbn=$("$DIOLOOP_COW_TOOL" pbn "$IMAGES/disk.cow" - $LBN)
expect_match "logical block $LBN has a physical block in the exported file" '[1-9][0-9]*' "$pbn"
must "corrupt physical block $pbn in the exported file" \
	dd if=/dev/urandom of="$IMAGES/disk.cow" bs=1 count=16 seek=$((pbn * 4096 + 1000)) \
	conv=notrunc,fsync status=none
expect_ctl "scrub through the nfs store finds the corrupt block" \
	"scrubbed [0-9]+ blocks, 1 bad bad .* $LBN $pbn checksum" scrub disk.cow
expect_io "reading the corrupt block through the node: EIO" "err EIO" \
	pread "$NODE" $((LBN * 4096)) 4096
expect_io "overwrite the corrupt block (seed 2)" "ok 4096" pwrite "$NODE" $((LBN * 4096)) 4096 2
expect_io "fsync of the node" "ok" fsync "$NODE"
expect_io "the block reads back what was written" "ok same" check "$NODE" $((LBN * 4096)) 4096 2
expect_ctl "scrub after the overwrite: none bad" "scrubbed [1-9][0-9]* blocks, 0 bad" scrub disk.cow
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"

it_log "---- check of the exported file"
expect_cow_clean "$IMAGES/disk.cow"
expect_ok "dioloop check of the image by its nfs:// URL" "$DIOLOOP_BIN" check "$DIR_URL/disk.cow$OPTS"
expect_match "... clean, both volumes" ".*: generation .*, 2 volumes, .*: clean" "$(cat "$IT_TMP/last.out")"
expect_match "dioloop info of the exported file lists the snapshot" ".*s1.*" \
	"$("$DIOLOOP_BIN" info "$IMAGES/disk.cow" 2>&1 | tr '\n' ' ')"
it_end
