#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Snapshots, clones, volume deletion, scrub and block sharing of cow images
# on a live mount, through the ctl file (control.h):
#  - ext4 on a cow node through a loop device, a writer making files with
#    fsync; a snapshot taken while it writes is a crash-consistent point in
#    time: a clone of it mounts (journal replay), then fsck -fn is clean and
#    every file the writer had fsynced before the snapshot is there intact;
#    a snapshot taken with the file system frozen passes fsck -fn as is;
#  - snapshot nodes IMAGE@NAME are listed, read-only (mode and EROFS), and
#    do not change while the origin is written on; a clone is writable and
#    independent of its origin and of the snapshot it came from;
#  - delete-volume: EBUSY while the node is open; afterwards the node is
#    gone and the container uses less space;
#  - scrub of a mounted image finds a corrupted block that only a snapshot
#    references (volume, logical and physical block), reading that block in
#    the snapshot gives EIO while its other blocks and the origin read fine;
#  - copy_file_range between two volumes of one image shares blocks: the
#    container grows by little;
#  - not a cow node: EOPNOTSUPP; after unmount the images check clean.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/cowlib.sh"

it_begin "cow snapshots, clones, delete-volume, scrub and copy offload on a mount" \
	mkfs.ext4 e2fsck fsfreeze jq
cow_begin

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
make_cow "$SRC/base.cow" 256M
make_cow "$SRC/blk.cow" 32M
must "dioloop create --size 8M raw.img" "$DIOLOOP_BIN" create --size 8M "$SRC/raw.img"
start_daemon "$SRC" "$MNT"
MIB=$((1 << 20))

# attach_loop_ro FILE: a read-only direct-I/O loop device; sets LOOP_DEV.
attach_loop_ro() {
	LOOP_DEV=$(losetup -r --direct-io=on -f --show "$1" 2>"$IT_TMP/losetup.err") ||
		{ it_show "$IT_TMP/losetup.err"; it_die "losetup -r --direct-io=on -f --show $1 failed"; }
	IT_LOOPS+=("$LOOP_DEV")
}

# ---------------------------------------------------------------- not cow
expect_eq "snapshot of a raw node: EOPNOTSUPP" EOPNOTSUPP \
	"$(ctl_errno "$MNT" snapshot raw.img s)"
expect_eq "scrub of a raw node: EOPNOTSUPP" EOPNOTSUPP "$(ctl_errno "$MNT" scrub raw.img)"
expect_eq "snapshot of a node that does not exist: ENOENT" ENOENT \
	"$(ctl_errno "$MNT" snapshot nosuch.cow s)"
expect_eq "snapshot with a bad volume name: EINVAL" EINVAL \
	"$(ctl_errno "$MNT" snapshot base.cow a@b)"
expect_eq "lookup of a volume that does not exist: ENOENT" "err ENOENT" \
	"$(nodeio open "$MNT/base.cow@nosuch" r)"
expect_eq "delete-volume of a default volume: EBUSY" EBUSY \
	"$(ctl_errno "$MNT" delete-volume base.cow)"

# ---------------------------------------------------------------- ext4, a writer, snapshots
attach_loop "$MNT/base.cow"
BASEDEV=$LOOP_DEV
must "mkfs.ext4 on the cow node's loop device" mkfs_fs ext4 "$BASEDEV"
INNER=$IT_TMP/inner-base
mount_inner "$BASEDEV" "$INNER"
must "write files with known checksums" make_files "$INNER" base
sync -f "$INNER"

WLOG=$IT_TMP/writer.sha256
: >"$WLOG"
start_helper nodeio write-loop "$INNER" w 256K "$WLOG" 240
WRITER=$HELPER_PID
# A few files fsync'd, however slow the machine: 237 more are to come.
deadline=$((SECONDS + 120))
while (($(wc -l <"$WLOG") < 3)) && pid_alive "$WRITER" && ((SECONDS < deadline)); do
	sleep 0.1
done
# Files whose fsync returned before the snapshot: they must be in it.
cp "$WLOG" "$IT_TMP/before-live.sha256"
expect_eq "the writer is still writing at the live snapshot" yes \
	"$(pid_alive "$WRITER" && echo yes || echo no)"
expect_ctl "snapshot while the writer runs" "base.cow@live" snapshot base.cow live
sleep 1
must "fsfreeze -f $INNER" fsfreeze -f "$INNER"
expect_ctl "snapshot of the frozen file system" "base.cow@frozen" snapshot base.cow frozen
must "fsfreeze -u $INNER" fsfreeze -u "$INNER"
expect_eq "snapshot with a name that is taken: EEXIST" EEXIST \
	"$(ctl_errno "$MNT" snapshot base.cow live)"
wait "$WRITER"
forget_pid "$WRITER"
expect_match "the writer made files before, during and after the snapshots" \
	'[0-9]+' "$(wc -l <"$WLOG")"
(($(wc -l <"$IT_TMP/before-live.sha256") > 0)) ||
	it_fail "expected the writer to have fsynced files before the live snapshot, got none"
sync -f "$INNER"

expect_eq "ls of the mount lists the snapshots as IMAGE@NAME" \
	"base.cow base.cow@frozen base.cow@live blk.cow raw.img" "$(names "$MNT")"
mode=$(stat -c %a "$MNT/base.cow@live")
expect_eq "snapshot node base.cow@live: no write bits in its mode ($mode)" 0 \
	$((8#$mode & 8#222))
expect_eq "size of the snapshot node = size of its origin" \
	"$(stat -c %s "$MNT/base.cow")" "$(stat -c %s "$MNT/base.cow@live")"
expect_io "opening the snapshot for writing fails (read-only volume)" "err EROFS" \
	open "$MNT/base.cow@live" w

attach_loop_ro "$MNT/base.cow@frozen"
FROZENDEV=$LOOP_DEV
expect_ok "e2fsck -fn of the frozen snapshot is clean" e2fsck -fn "$FROZENDEV"
detach_loop "$FROZENDEV"
live_sha=$(sha "$MNT/base.cow@live")
frozen_sha=$(sha "$MNT/base.cow@frozen")

# The live snapshot is a crash image: a clone of it replays the journal.
expect_ctl "clone of the live snapshot" "base.cow@fsck" clone base.cow@live fsck
attach_loop "$MNT/base.cow@fsck"
FSCKDEV=$LOOP_DEV
CLONE=$IT_TMP/inner-clone
mount_inner "$FSCKDEV" "$CLONE"
umount_inner "$CLONE"
expect_ok "e2fsck -fn of the live snapshot's clone after journal replay is clean" \
	e2fsck -fn "$FSCKDEV"
mount_inner "$FSCKDEV" "$CLONE"
check_files "$CLONE" base
if out=$(cd "$CLONE" && sha256sum --quiet -c "$IT_TMP/before-live.sha256" 2>&1); then
	it_ok "the $(wc -l <"$IT_TMP/before-live.sha256") files fsynced before the live snapshot are in it, intact"
else
	it_fail "expected every file fsynced before the live snapshot in its clone, got:"
	printf '%s\n' "$out" | head -n 10 | sed 's/^/    | /'
fi

# The clone is writable and independent.
must "write files to the clone" make_files "$CLONE/clone-only" clone
umount_inner "$CLONE"
mount_inner "$FSCKDEV" "$CLONE"
check_files "$CLONE/clone-only" clone
umount_inner "$CLONE"
expect_eq "the clone's files are not in the origin" no \
	"$([[ -e $INNER/clone-only ]] && echo yes || echo no)"

# More writes to the origin: overwrite files in place (the snapshots keep
# the old blocks) and add some.
for f in random-1M random-3M pattern-2M; do
	must "overwrite $f in the origin in place" dd if=/dev/urandom of="$INNER/$f" \
		bs=1M count=$(($(stat -c %s "$INNER/$f") / MIB)) conv=notrunc,fsync status=none
done
must "new files in the origin" make_files "$INNER/after" after
sync -f "$INNER"
expect_eq "base.cow@live unchanged after the origin was written on" "$live_sha" \
	"$(sha "$MNT/base.cow@live")"
expect_eq "base.cow@frozen unchanged after the origin was written on" "$frozen_sha" \
	"$(sha "$MNT/base.cow@frozen")"
check_files "$INNER/after" after
umount_inner "$INNER"
expect_ok "e2fsck -fn of the origin is clean" e2fsck -fn "$BASEDEV"

# ---------------------------------------------------------------- delete-volume
expect_eq "delete-volume of a node attached to a loop device: EBUSY" EBUSY \
	"$(ctl_errno "$MNT" delete-volume base.cow@fsck)"
detach_loop "$FSCKDEV"
used0=$(node_stat "$MNT" base.cow allocated)
# The loop driver's close of the node reaches the daemon as a FUSE
# RELEASE after losetup -d has returned: EBUSY until it has.
deadline=$((SECONDS + 30))
while err=$(ctl_errno "$MNT" delete-volume base.cow@fsck) && [[ $err == EBUSY ]] &&
	((SECONDS < deadline)); do
	sleep 0.1
done
expect_eq "delete-volume base.cow@fsck once the loop device let go of it" ok "$err"
for v in live frozen; do
	expect_ctl "delete-volume base.cow@$v" "deleted base.cow@$v" delete-volume "base.cow@$v"
done
used1=$(node_stat "$MNT" base.cow allocated)
expect_eq "ls after delete-volume" "base.cow blk.cow raw.img" "$(names "$MNT")"
expect_io "the deleted volume's node is gone" "err ENOENT" open "$MNT/base.cow@live" r
if ((used1 + 4 * MIB <= used0)); then
	it_ok "base.cow's container uses less after deleting its volumes ($used0 -> $used1 bytes)"
else
	it_fail "base.cow: expected its container usage to drop by at least 4 MiB after deleting the volumes that held 6 MiB of overwritten data, got $used0 -> $used1 bytes"
fi
detach_loop "$BASEDEV"

# ---------------------------------------------------------------- scrub
B=$MNT/blk.cow
must "blocks 100 and 200 of blk.cow (seed 1), fsync" nodeio pwrite "$B" $((100 * 4096)) 4096 1
must "block 200" nodeio pwrite "$B" $((200 * 4096)) 4096 1
must "fsync blk.cow" nodeio fsync "$B"
expect_ctl "snapshot blk.cow s1" "blk.cow@s1" snapshot blk.cow s1
expect_io "overwrite block 100 of the origin (seed 2)" "ok 4096" pwrite "$B" $((100 * 4096)) 4096 2
expect_io "fsync the origin" "ok" fsync "$B"
pbn=$("$DIOLOOP_COW_TOOL" pbn "$SRC/blk.cow" s1 100)
opbn=$("$DIOLOOP_COW_TOOL" pbn "$SRC/blk.cow" - 100)
expect_match "block 100 of s1 and of the origin are different physical blocks ($pbn, $opbn)" \
	'[1-9][0-9]*' "$( ((pbn != opbn)) && echo "$pbn")"
must "corrupt physical block $pbn (only s1 references it) in the container file" \
	dd if=/dev/urandom of="$SRC/blk.cow" bs=1 count=16 seek=$((pbn * 4096 + 1000)) \
	conv=notrunc,fsync status=none
expect_ctl "scrub of the mounted image finds the block" \
	"scrubbed [0-9]+ blocks, 1 bad bad s1 100 $pbn checksum" scrub blk.cow
expect_ctl "scrub-status after the scrub" "idle" scrub-status blk.cow@s1
expect_eq "stats.json: the scrub's result" "false 1" \
	"$(jq -r '.nodes["blk.cow"].scrub | "\(.running) \(.bad)"' "$MNT/.dioloop/stats.json")"
expect_io "reading the corrupted block of the snapshot: EIO" "err EIO" \
	pread "$MNT/blk.cow@s1" $((100 * 4096)) 4096
expect_io "the snapshot's other block reads fine" "ok same" \
	check "$MNT/blk.cow@s1" $((200 * 4096)) 4096 1
expect_io "the origin's block 100 reads fine" "ok same" check "$B" $((100 * 4096)) 4096 2
errs=$(node_stat "$MNT" "blk.cow@s1" checksum_errors)
expect_match "checksum errors of blk.cow@s1 in stats.json ($errs)" '[1-9][0-9]*' "$errs"

# ---------------------------------------------------------------- copy offload
must "8 MiB of data at 8 MiB in blk.cow" nodeio pwrite "$B" $((8 * MIB)) $((8 * MIB)) 3
must "fsync blk.cow" nodeio fsync "$B"
expect_ctl "clone blk.cow c2" "blk.cow@c2" clone blk.cow c2
used0=$(node_stat "$MNT" blk.cow allocated)
expect_io "copy_file_range of 8 MiB from blk.cow to blk.cow@c2" "ok $((8 * MIB))" \
	copy "$B" $((8 * MIB)) "$MNT/blk.cow@c2" $((20 * MIB)) $((8 * MIB))
expect_io "fsync blk.cow@c2" "ok" fsync "$MNT/blk.cow@c2"
expect_eq "the copy in blk.cow@c2 = its source" \
	"$(nodeio pread "$B" $((8 * MIB)) $((8 * MIB)))" \
	"$(nodeio pread "$MNT/blk.cow@c2" $((20 * MIB)) $((8 * MIB)))"
used1=$(node_stat "$MNT" blk.cow allocated)
N=$((3 * 4096 + 1000))
# One call, all of it (nodeio copy would call again after a short count).
expect_eq "one copy_file_range of 3 blocks and 1000 bytes (shared blocks, a copied tail)" \
	$N "$("$IT_PY" -c 'import os, sys
i = os.open(sys.argv[1], os.O_RDONLY); o = os.open(sys.argv[2], os.O_WRONLY)
print(os.copy_file_range(i, o, int(sys.argv[5]), int(sys.argv[3]), int(sys.argv[4])))' \
	"$B" "$MNT/blk.cow@c2" $((8 * MIB)) $((30 * MIB)) $N 2>&1)"
expect_eq "the unaligned copy = its source" "$(nodeio pread "$B" $((8 * MIB)) $N)" \
	"$(nodeio pread "$MNT/blk.cow@c2" $((30 * MIB)) $N)"
if ((used1 - used0 < MIB)); then
	it_ok "copy_file_range between volumes shared the blocks: the container grew by $((used1 - used0)) bytes for 8 MiB"
else
	it_fail "copy_file_range between volumes: expected the container to grow by less than 1 MiB (shared blocks), got $((used1 - used0)) bytes for 8 MiB"
fi

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"
expect_cow_clean "$SRC/base.cow"
expect_ok "dioloop-cow-tool check blk.cow (metadata): clean" \
	"$DIOLOOP_COW_TOOL" check "$SRC/blk.cow"
expect_status "dioloop-cow-tool check blk.cow data: the corrupted block is found" 1 \
	"$DIOLOOP_COW_TOOL" check "$SRC/blk.cow" data

it_end
