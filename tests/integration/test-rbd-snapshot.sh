#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Snapshots and clones of rbd images against a real Ceph cluster
# (rbd-lib.sh), through `dioloop snapshot` / `dioloop clone` on a mounted
# node and on an image URL:
#  - a snapshot of ext4 on the node (frozen) is an rbd snapshot, served as
#    the read-only node IMAGE@NAME (mode, EROFS), fsck -fn clean, its files
#    those of the snapshot's time while the origin changes on;
#  - a snapshot taken while a writer fsyncs files is crash-consistent: a
#    clone of the image at that time replays the journal, fsck is clean,
#    every file fsync'd before it is intact;
#  - a clone of an existing snapshot (`dioloop clone IMAGE@SNAP NAME`) is
#    an rbd clone of that snapshot, protected for it: it holds the
#    snapshot's files, is writable, and what is written to it reaches
#    neither the origin nor the snapshot; deleting the snapshot is refused
#    while the clone exists (as for cow), deleting the clone leaves the
#    snapshot readable and deletable; a snapshot its operator protected
#    stays protected after its clone is deleted;
#  - a clone IMAGE@NAME is writable and independent of its origin (an rbd
#    clone of a protected snapshot); delete is refused while it is in use,
#    then removes the clone image and its snapshot;
#  - offline: snapshot, clone (of the image and of a snapshot), convert of
#    the snapshot and of its clone (IMAGE@NAME) and delete of
#    rbd://POOL/NS/IMAGE while no daemon serves it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/rbd-lib.sh"

it_begin "rbd snapshots and clones as IMAGE@NAME nodes" rbd mkfs.ext4 e2fsck fsfreeze jq
rbd_test_cluster
OPTS="?timeout=20"
MNT=$IT_TMP/mnt
INNER=$IT_TMP/inner
mkdir -p "$MNT" "$INNER"

# dioloop_marks: the dioloop keys in disk's image metadata.
dioloop_marks() {
	timeout 60 rbd image-meta list --format json "rbd/$RBD_NS/disk" 2>&1 |
		jq -r 'if type == "object" then keys[] | select(startswith("dioloop.")) else "not an object: \(.)" end' 2>&1
}

# delete_volume WHAT NAME: snapshot --delete of disk's NAME succeeds.  The
# kernel sends the node's RELEASE after a loop device lets go of it, so
# "in use (open" is retried for a while; any other refusal is not.
delete_volume() {
	local rc i
	for ((i = 0; i < 300; i++)); do
		rc=0
		"$DIOLOOP_BIN" snapshot --delete "$MNT/disk" "$2" >"$IT_TMP/last.out" 2>&1 </dev/null || rc=$?
		((rc != 0)) && grep -q "is in use (open" "$IT_TMP/last.out" || break
		sleep 0.1
	done
	if ((rc == 0)); then
		it_ok "$1 (exit status 0)"
	else
		it_fail "$1: expected exit status 0, got $rc"
		it_show "$IT_TMP/last.out"
	fi
}

# attach_loop_ro FILE: a read-only direct-I/O loop device; sets LOOP_DEV.
attach_loop_ro() {
	LOOP_DEV=$(losetup -r --direct-io=on -f --show "$1" 2>"$IT_TMP/losetup.err") ||
		{ it_show "$IT_TMP/losetup.err"; it_die "losetup -r --direct-io=on -f --show $1 failed"; }
	IT_LOOPS+=("$LOOP_DEV")
}

# rbd_snaps IMAGE: the image's rbd snapshot names, one line.
rbd_snaps() {
	timeout 60 rbd snap ls --format json --pool rbd --namespace "$RBD_NS" --image "$1" 2>&1 |
		jq -r '[.[].name] | join(" ")' 2>&1
}

# rbd_images: the namespace's image names, one line.
rbd_images() {
	timeout 60 rbd ls --pool rbd --namespace "$RBD_NS" 2>&1 | paste -sd' ' -
}

must "dioloop create $RBD_URL/disk --size 96M" "$DIOLOOP_BIN" create "$RBD_URL/disk$OPTS" --size 96M
start_daemon "$RBD_URL$OPTS" "$MNT"
attach_loop "$MNT/disk"
LOOP=$LOOP_DEV
must "mkfs.ext4 on disk" mkfs.ext4 -q -F "$LOOP"
mount_inner "$LOOP" "$INNER"
must "write files with known checksums" make_files "$INNER" before

it_log "---- a snapshot of the frozen file system"
must "fsfreeze -f $INNER" fsfreeze -f "$INNER"
expect_ok "dioloop snapshot $MNT/disk frozen" "$DIOLOOP_BIN" snapshot "$MNT/disk" frozen
expect_eq "it prints the node's name" "disk@frozen" "$(cat "$IT_TMP/last.out")"
must "fsfreeze -u $INNER" fsfreeze -u "$INNER"
expect_eq "it is an rbd snapshot" frozen "$(rbd_snaps disk)"
expect_status "a snapshot with a name that is taken" 1 \
	"$DIOLOOP_BIN" snapshot "$MNT/disk" frozen
expect_status "a snapshot of a snapshot node" 1 \
	"$DIOLOOP_BIN" snapshot "$MNT/disk@frozen" again
# The origin changes on.
must "change the origin's files" make_files "$INNER" after
must "sync -f $INNER" sync -f "$INNER"
expect_eq "ls of the mount lists the snapshot as IMAGE@NAME" "disk disk@frozen" "$(names "$MNT")"
mode=$(stat -c %a "$MNT/disk@frozen")
expect_eq "snapshot node disk@frozen: no write bits in its mode ($mode)" 0 $((8#$mode & 8#222))
expect_eq "size of the snapshot node = size of its origin" \
	"$(stat -c %s "$MNT/disk")" "$(stat -c %s "$MNT/disk@frozen")"
expect_io "opening the snapshot for writing fails" "err EROFS" open "$MNT/disk@frozen" w
expect_eq "stats.json: the snapshot node is read-only, format rbd" "true rbd frozen" \
	"$(jq -r '.nodes["disk@frozen"] | "\(.readonly) \(.format) \(.volume)"' "$MNT/.dioloop/stats.json" 2>&1)"
attach_loop_ro "$MNT/disk@frozen"
SNAPDEV=$LOOP_DEV
expect_ok "e2fsck -fn of the frozen snapshot is clean" e2fsck -fn "$SNAPDEV"
SNAPMNT=$IT_TMP/snap
mount_inner "$SNAPDEV" "$SNAPMNT" -o ro,noload
check_files "$SNAPMNT" before
umount_inner "$SNAPMNT"
detach_loop "$SNAPDEV"

it_log "---- a clone of the existing snapshot"
expect_ok "dioloop clone $MNT/disk@frozen fromsnap" "$DIOLOOP_BIN" clone "$MNT/disk@frozen" fromsnap
expect_eq "it prints the node's name" "disk@fromsnap" "$(cat "$IT_TMP/last.out")"
expect_eq "the clone is an rbd image IMAGE@NAME" "disk disk@fromsnap" "$(rbd_images)"
expect_eq "it is an rbd clone of the snapshot" "rbd/$RBD_NS/disk@fromsnap" \
	"$(timeout 60 rbd children "rbd/$RBD_NS/disk@frozen" 2>&1)"
expect_eq "dioloop marks the protection it set in the image's metadata" \
	"dioloop.protected-for-clone.frozen" "$(dioloop_marks)"
expect_eq "ls of the mount lists the clone" "disk disk@fromsnap disk@frozen" "$(names "$MNT")"
mode=$(stat -c %a "$MNT/disk@fromsnap")
expect_eq "clone node disk@fromsnap is writable ($mode)" $((8#200)) $((8#$mode & 8#200))
attach_loop "$MNT/disk@fromsnap"
FROMDEV=$LOOP_DEV
expect_ok "e2fsck -fn of the clone of the frozen snapshot is clean" e2fsck -fn "$FROMDEV"
FROMMNT=$IT_TMP/fromsnap
mount_inner "$FROMDEV" "$FROMMNT"
check_files "$FROMMNT" before
must "write the clone's own files over the snapshot's" make_files "$FROMMNT" fromsnap
echo "only in the clone of the snapshot" >"$FROMMNT/fromsnap-only.txt"
umount_inner "$FROMMNT"
expect_ok "e2fsck -fn of the written clone is clean" e2fsck -fn "$FROMDEV"
mount_inner "$FROMDEV" "$FROMMNT" -o ro,noload
check_files "$FROMMNT" fromsnap
umount_inner "$FROMMNT"
expect_status "delete of the snapshot while a clone of it exists is refused" 1 \
	"$DIOLOOP_BIN" snapshot --delete "$MNT/disk" frozen
expect_match "... naming the clone" ".*another volume was made from it \(disk@fromsnap\).*" \
	"$(cat "$IT_TMP/last.out")"
expect_eq "the snapshot is still there" frozen "$(rbd_snaps disk)"
attach_loop_ro "$MNT/disk@frozen"
SNAPDEV=$LOOP_DEV
mount_inner "$SNAPDEV" "$SNAPMNT" -o ro,noload
check_files "$SNAPMNT" before
expect_eq "a file written in the clone is not in the snapshot" no \
	"$([[ -e $SNAPMNT/fromsnap-only.txt ]] && echo yes || echo no)"
umount_inner "$SNAPMNT"
detach_loop "$SNAPDEV"
expect_eq "a file written in the clone is not in the origin" no \
	"$([[ -e $INNER/fromsnap-only.txt ]] && echo yes || echo no)"
expect_status "delete of the clone while it is in use" 1 \
	"$DIOLOOP_BIN" snapshot --delete "$MNT/disk" fromsnap
detach_loop "$FROMDEV"
delete_volume "delete of the clone of the snapshot" fromsnap
expect_eq "the clone image is gone" disk "$(rbd_images)"
expect_eq "the snapshot stays, no longer protected" "frozen false" \
	"$(timeout 60 rbd snap ls --format json --pool rbd --namespace "$RBD_NS" --image disk 2>&1 |
		jq -r '.[] | "\(.name) \(.protected)"' 2>&1)"
expect_eq "ls of the mount lists the snapshot again, no clone" "disk disk@frozen" "$(names "$MNT")"
expect_eq "no dioloop mark left in the image's metadata" "" "$(dioloop_marks)"

it_log "---- a snapshot its operator protected stays protected"
must "rbd snap protect disk@frozen (the operator)" \
	timeout 60 rbd snap protect "rbd/$RBD_NS/disk@frozen"
expect_ok "dioloop clone $MNT/disk@frozen opclone" "$DIOLOOP_BIN" clone "$MNT/disk@frozen" opclone
delete_volume "delete of that clone" opclone
expect_eq "the snapshot stays protected after its last clone is deleted" "frozen true" \
	"$(timeout 60 rbd snap ls --format json --pool rbd --namespace "$RBD_NS" --image disk 2>&1 |
		jq -r '.[] | "\(.name) \(.protected)"' 2>&1)"
must "rbd snap unprotect disk@frozen (the operator)" \
	timeout 60 rbd snap unprotect "rbd/$RBD_NS/disk@frozen"

it_log "---- a snapshot and a clone while a writer fsyncs files"
MANIFEST=$IT_TMP/fsynced.sha256
STREAM_LOG=$IT_TMP/stream.sha256
: >"$STREAM_LOG"
start_helper "$IT_PY" "$IT_DIR/nodeio.py" write-loop "$INNER" stream 64K "$STREAM_LOG" 100000 \
	</dev/null >"$IT_TMP/stream.out" 2>&1
WRITER=$HELPER_PID
for ((i = 0; i < 600; i++)); do
	(($(wc -l <"$STREAM_LOG") >= 5)) && break
	sleep 0.1
done
cp "$STREAM_LOG" "$MANIFEST"
expect_ok "dioloop clone $MNT/disk work while the writer runs" "$DIOLOOP_BIN" clone "$MNT/disk" work
expect_eq "it prints the node's name" "disk@work" "$(cat "$IT_TMP/last.out")"
sleep 0.5
kill "$WRITER" 2>/dev/null
wait "$WRITER" 2>/dev/null
forget_pid "$WRITER"
expect_match "the writer fsync'd files before the clone ($(wc -l <"$MANIFEST"))" '[1-9][0-9]*' \
	"$(wc -l <"$MANIFEST")"
expect_eq "the clone is an rbd image with '@' in its name" "disk disk@work" "$(rbd_images)"
expect_eq "ls of the mount lists the clone, once" "disk disk@frozen disk@work" "$(names "$MNT")"
mode=$(stat -c %a "$MNT/disk@work")
expect_eq "clone node disk@work is writable ($mode)" $((8#200)) $((8#$mode & 8#200))
attach_loop "$MNT/disk@work"
CLONEDEV=$LOOP_DEV
CLONEMNT=$IT_TMP/clone
mount_inner "$CLONEDEV" "$CLONEMNT"	# replays the journal
umount_inner "$CLONEMNT"
expect_ok "e2fsck -fn of the clone after the journal replay is clean" e2fsck -fn "$CLONEDEV"
mount_inner "$CLONEDEV" "$CLONEMNT"
if out=$(cd "$CLONEMNT" && sha256sum --quiet -c "$MANIFEST" 2>&1); then
	it_ok "the $(wc -l <"$MANIFEST") files fsync'd before the clone are in it, intact"
else
	it_fail "expected every file fsync'd before the clone in it, got:"
	printf '%s\n' "$out" | head -n 15 | sed 's/^/    | /'
fi
check_files "$CLONEMNT" after
echo "only in the clone" >"$CLONEMNT/clone-only.txt"
sync -f "$CLONEMNT/clone-only.txt"
expect_eq "a file written in the clone is not in the origin" no \
	"$([[ -e $INNER/clone-only.txt ]] && echo yes || echo no)"
expect_status "delete of the clone while it is in use" 1 \
	"$DIOLOOP_BIN" snapshot --delete "$MNT/disk" work
umount_inner "$CLONEMNT"
detach_loop "$CLONEDEV"
delete_volume "delete of the clone" work
expect_eq "the clone image is gone" disk "$(rbd_images)"
expect_eq "and the snapshot it was made of" frozen "$(rbd_snaps disk)"
expect_ok "delete of the snapshot" "$DIOLOOP_BIN" snapshot --delete "$MNT/disk" frozen
expect_eq "no rbd snapshot is left" "" "$(rbd_snaps disk)"
expect_eq "ls of the mount lists the image alone" disk "$(names "$MNT")"
check_files "$INNER" after
umount_inner "$INNER"
expect_ok "e2fsck -fn of the origin is clean" e2fsck -fn "$LOOP"
detach_loop "$LOOP"
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"

it_log "---- offline: snapshot and clone of an image URL"
expect_ok "dioloop snapshot $RBD_URL/disk off" "$DIOLOOP_BIN" snapshot "$RBD_URL/disk$OPTS" off
expect_ok "dioloop clone $RBD_URL/disk offc" "$DIOLOOP_BIN" clone "$RBD_URL/disk$OPTS" offc
expect_eq "both are there" "@clone-offc off" "$(rbd_snaps disk | tr ' ' '\n' | sort | paste -sd' ' -)"
expect_ok "convert of the snapshot IMAGE@NAME to a raw file" \
	"$DIOLOOP_BIN" convert "$RBD_URL/disk$OPTS@off" "$IT_TMP/off.raw"
expect_ok "convert of the image to a raw file" "$DIOLOOP_BIN" convert "$RBD_URL/disk$OPTS" "$IT_TMP/head.raw"
# The snapshot named before the options, and options holding '/' (a
# conf= path): the volume is still "off", the options stay the image's.
for u in "$RBD_URL/disk@off$OPTS" "$RBD_URL/disk@off$OPTS&conf=$CEPH_CONF" \
	"$RBD_URL/disk$OPTS&conf=$CEPH_CONF@off"; do
	expect_eq "info $u: the volume" off \
		"$("$DIOLOOP_BIN" info "$u" 2>&1 | sed -n 's/^volume: *//p')"
done
expect_same_bytes "the snapshot, taken with nothing writing, holds the image's bytes" \
	"$IT_TMP/head.raw" "$IT_TMP/off.raw"
expect_ok "dioloop clone $RBD_URL/disk@off offsnapc (a clone of the snapshot)" \
	"$DIOLOOP_BIN" clone "$RBD_URL/disk$OPTS@off" offsnapc
expect_eq "it prints the node's name" "disk@offsnapc" "$(cat "$IT_TMP/last.out")"
expect_ok "convert of the snapshot's clone to a raw file" \
	"$DIOLOOP_BIN" convert "$RBD_URL/disk$OPTS@offsnapc" "$IT_TMP/offsnapc.raw"
expect_same_bytes "the snapshot's clone holds the snapshot's bytes" \
	"$IT_TMP/off.raw" "$IT_TMP/offsnapc.raw"
rm -f "$IT_TMP/off.raw" "$IT_TMP/head.raw" "$IT_TMP/offsnapc.raw"
expect_status "delete of the snapshot offline while its clone exists is refused" 1 \
	"$DIOLOOP_BIN" snapshot --delete "$RBD_URL/disk$OPTS" off
expect_ok "delete the snapshot's clone offline" "$DIOLOOP_BIN" snapshot --delete "$RBD_URL/disk$OPTS" offsnapc
expect_ok "delete the snapshot offline" "$DIOLOOP_BIN" snapshot --delete "$RBD_URL/disk$OPTS" off
expect_ok "delete the clone offline" "$DIOLOOP_BIN" snapshot --delete "$RBD_URL/disk$OPTS" offc
expect_eq "no snapshot is left" "" "$(rbd_snaps disk)"
expect_eq "no clone is left" disk "$(rbd_images)"
rbd_test_cleanup
it_end
