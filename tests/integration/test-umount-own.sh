#!/bin/bash
# SPDX-License-Identifier: MIT
#
# dioloop umount acts only on what is its own: a path that is no dioloop
# mount (a tmpfs, a plain directory) is refused with status 2 and left as
# it was; on a dioloop mount only the loop devices backed by its nodes are
# detached (matched by device and inode, not by path prefix: a loop device
# on a file hidden under the mount point, or under a look-alike path,
# stays); a refusal (a file system mounted on a node's loop device) leaves
# the loop device attached with no autoclear flag, at once; and a broken
# image does not keep the rest from being flushed and unmounted.  The
# daemon's own teardown detaches only devices still backed by its nodes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/cowlib.sh"

it_begin "dioloop umount touches only its own mount and loop devices" mkfs.ext4
cow_begin

# is_mounted_yes_no DIR
is_mounted_yes_no() {
	is_mount "$1" && echo yes || echo no
}

# wait_loop_lines LOG N: the first N "NAME /dev/loopN" lines of a --loop
# daemon's log (it prints them once attached), waiting up to 10 s.
wait_loop_lines() {
	local i
	for ((i = 0; i < 100; i++)); do
		(($(grep -cE ' /dev/loop[0-9]+$' "$1") >= $2)) && break
		sleep 0.1
	done
	grep -oE '/dev/loop[0-9]+$' "$1" | head -n "$2"
}

# ---- a tmpfs is not a dioloop mount
mkdir -p tmpfs
must "mount a tmpfs" mount -t tmpfs -o size=1M tmpfs tmpfs
IT_INNER+=("$IT_TMP/tmpfs")
expect_status "dioloop umount on a tmpfs is refused" 2 \
	"$DIOLOOP_BIN" umount "$IT_TMP/tmpfs"
expect_match "the refusal names what it is" '.*tmpfs mount, not a dioloop mount.*' \
	"$(cat "$IT_TMP/last.out")"
expect_eq "the tmpfs is still mounted" yes "$(is_mounted_yes_no "$IT_TMP/tmpfs")"

# ---- a plain directory, with a loop device on a file below it
mkdir -p plain
truncate -s 8M plain/disk.img
attach_loop "$IT_TMP/plain/disk.img"
plain_loop=$LOOP_DEV
expect_status "dioloop umount on a plain directory is refused" 2 \
	"$DIOLOOP_BIN" umount "$IT_TMP/plain"
expect_eq "$plain_loop (on a file in the plain directory) is still attached" \
	"$IT_TMP/plain/disk.img" "$(loop_backing "$plain_loop")"

# ---- a dioloop mount with --loop, and loop devices that are not its own:
# one on a file hidden under the mount point (same path prefix), one
# under a look-alike path (mnt-other).
mkdir -p src mnt mnt-other
truncate -s 8M src/a.img src/b.img mnt/hidden.img mnt-other/x.img
attach_loop "$IT_TMP/mnt/hidden.img"
hidden_loop=$LOOP_DEV
attach_loop "$IT_TMP/mnt-other/x.img"
other_loop=$LOOP_DEV
# (-o nonempty: mnt holds hidden.img on purpose.)
start_daemon src "$IT_TMP/mnt" --loop -o nonempty
pid=$DAEMON_PID
mapfile -t node_loops < <(wait_loop_lines "$DAEMON_LOG" 2)
expect_eq "dioloop mount --loop attached a loop device per node" 2 "${#node_loops[@]}"
for dev in "${node_loops[@]}"; do
	record_loop "$dev"
done
dioloop_umount "$IT_TMP/mnt"
for dev in "${node_loops[@]}"; do
	expect_eq "$dev (a node's) is detached" "" "$(loop_backing "$dev")"
done
expect_eq "$hidden_loop (a file under the mount point, not a node) is still attached" \
	"$IT_TMP/mnt/hidden.img" "$(loop_backing "$hidden_loop")"
expect_eq "$other_loop (under a look-alike path) is still attached" \
	"$IT_TMP/mnt-other/x.img" "$(loop_backing "$other_loop")"
daemon_wait "$pid"
expect_eq "the daemon exited after dioloop umount" 0 "$DAEMON_STATUS"

# ---- a refusal leaves the loop device as it was, at once
mkdir -p src2 mnt2
truncate -s 32M src2/fs.img
start_daemon src2 "$IT_TMP/mnt2"
pid=$DAEMON_PID
attach_loop "$IT_TMP/mnt2/fs.img"
fs_loop=$LOOP_DEV
must "mkfs.ext4 on $fs_loop" mkfs.ext4 -q -F "$fs_loop"
mount_inner "$fs_loop" "$IT_TMP/inner"
t0=$(date +%s%N)
expect_status "dioloop umount while ext4 is mounted on a node's loop device fails" 1 \
	"$DIOLOOP_BIN" umount "$IT_TMP/mnt2"
ms=$((($(date +%s%N) - t0) / 1000000))
expect_eq "the refusal took under 3 s (no wait per device; $ms ms)" yes "$( ((ms < 3000)) && echo yes || echo no)"
expect_eq "$fs_loop is still attached" "$IT_TMP/mnt2/fs.img" "$(loop_backing "$fs_loop")"
expect_eq "$fs_loop has no autoclear flag left behind" 0 \
	"$(cat "/sys/block/${fs_loop#/dev/}/loop/autoclear")"
expect_eq "$IT_TMP/mnt2 is still mounted" yes "$(is_mounted_yes_no "$IT_TMP/mnt2")"
umount_inner "$IT_TMP/inner"
# A process that merely holds the device open (no exclusive claim): the
# detach cannot finish, and the device is left as it was.
# shellcheck disable=SC2016  # $1 is the inner shell's
start_helper bash -c 'exec sleep 60 <"$1"' holder "$fs_loop"
holder=$HELPER_PID
for ((i = 0; i < 300; i++)); do
	[[ $(readlink "/proc/$holder/fd/0" 2>/dev/null) == "$fs_loop" ]] && break
	sleep 0.1
done
expect_eq "the holder has $fs_loop open" "$fs_loop" "$(readlink "/proc/$holder/fd/0" 2>/dev/null)"
t0=$(date +%s%N)
expect_status "dioloop umount while another process holds a node's loop device fails" 1 \
	"$DIOLOOP_BIN" umount "$IT_TMP/mnt2"
ms=$((($(date +%s%N) - t0) / 1000000))
# 1 s per device by design, and a flush: waiting for the holder (60 s) is the bug.
expect_eq "it gave up within 4.5 s ($ms ms)" yes "$( ((ms < 4500)) && echo yes || echo no)"
expect_eq "... while the holder still held the device" yes "$(pid_alive "$holder" && echo yes || echo no)"
expect_eq "$fs_loop is still attached" "$IT_TMP/mnt2/fs.img" "$(loop_backing "$fs_loop")"
expect_eq "$fs_loop has its autoclear flag cleared again" 0 \
	"$(cat "/sys/block/${fs_loop#/dev/}/loop/autoclear")"
kill "$holder"
wait "$holder" 2>/dev/null
forget_pid "$holder"
expect_eq "$fs_loop is still attached once the holder closed it" \
	"$IT_TMP/mnt2/fs.img" "$(loop_backing "$fs_loop")"
dioloop_umount "$IT_TMP/mnt2"
expect_eq "$fs_loop (a node's, hand-attached) is detached" "" "$(loop_backing "$fs_loop")"
[[ -z $(loop_backing "$fs_loop") ]] && forget_loop "$fs_loop"
daemon_wait "$pid"

# ---- a broken image does not stop the unmount
mkdir -p src3 mnt3
truncate -s 8M src3/good.img
make_cow "$IT_TMP/src3/bad.img" 16M
# Both superblocks' reserved bytes: neither copy is valid any more.
printf 'X' | dd of=src3/bad.img bs=1 seek=200 conv=notrunc status=none
printf 'X' | dd of=src3/bad.img bs=1 seek=$((4096 + 200)) conv=notrunc status=none
start_daemon src3 "$IT_TMP/mnt3"
pid=$DAEMON_PID
expect_status "the broken image's node cannot be opened" 1 \
	dd if="$IT_TMP/mnt3/bad.img" of=/dev/null bs=4096 count=1 status=none
attach_loop "$IT_TMP/mnt3/good.img"
good_loop=$LOOP_DEV
dioloop_umount "$IT_TMP/mnt3"
expect_eq "$good_loop (the good node's) is detached" "" "$(loop_backing "$good_loop")"
[[ -z $(loop_backing "$good_loop") ]] && forget_loop "$good_loop"
daemon_wait "$pid"

# ---- the daemon's own teardown (SIGTERM) detaches only devices that
# still serve its nodes: one detached by hand and reused for another file
# is left alone.
mkdir -p src4 "mnt 4" reuse
truncate -s 8M src4/n.img reuse/r.img
start_daemon src4 "$IT_TMP/mnt 4" --loop
pid=$DAEMON_PID
mapfile -t node_loops < <(wait_loop_lines "$DAEMON_LOG" 1)
expect_eq "dioloop mount --loop (a mount point with a space) attached its node" 1 \
	"${#node_loops[@]}"
if ((${#node_loops[@]} == 1)); then
	reused=${node_loops[0]}
	record_loop "$reused"
	detach_loop "$reused"
	must "losetup $reused on an unrelated file" losetup "$reused" "$IT_TMP/reuse/r.img"
	record_loop "$reused"
	kill -TERM "$pid"
	daemon_wait "$pid"
	expect_eq "the daemon exited on SIGTERM" 0 "$DAEMON_STATUS"
	forget_mount "$IT_TMP/mnt 4"
	expect_eq "$reused (reused for an unrelated file) is still attached" \
		"$IT_TMP/reuse/r.img" "$(loop_backing "$reused")"
fi

# ---- a mount point whose name has a space (escaped in mountinfo)
start_daemon src4 "$IT_TMP/mnt 4"
pid=$DAEMON_PID
dioloop_umount "$IT_TMP/mnt 4"
daemon_wait "$pid"

# ---- a bind mount of a dioloop mount keeps the daemon serving: umount of
# the first returns at once, without waiting for a daemon that stays.
mkdir -p bind5
start_daemon src4 "$IT_TMP/mnt5"
pid=$DAEMON_PID
must "mount --bind mnt5 bind5" mount --bind "$IT_TMP/mnt5" "$IT_TMP/bind5"
IT_FUSE+=("$IT_TMP/bind5")
t0=$(date +%s%N)
expect_ok "dioloop umount of the mount, with a bind mount of it elsewhere" \
	"$DIOLOOP_BIN" umount "$IT_TMP/mnt5"
ms=$((($(date +%s%N) - t0) / 1000000))
forget_mount "$IT_TMP/mnt5"
expect_match "... says the mount lives on elsewhere" ".*lives on elsewhere.*" \
	"$(paste -sd' ' "$IT_TMP/last.out")"
expect_eq "... returns without waiting for the daemon ($ms ms)" yes \
	"$( ((ms < 10000)) && echo yes || echo no)"
expect_eq "... whose daemon still serves the bind mount" "ok 8388608" \
	"$(nodeio stat "$IT_TMP/bind5/n.img")"
must "umount bind5" umount "$IT_TMP/bind5"
forget_mount "$IT_TMP/bind5"
daemon_wait "$pid"
expect_eq "the daemon exits when its last mount goes" 0 "$DAEMON_STATUS"

# ---- SIGTERM while a read waits for a tiny limit (bps=1: 8 KiB would be
# admitted after more than two hours): the read is let go and the daemon
# exits, instead of living on, holding its image locks, until then.
mkdir -p src6
truncate -s 1M src6/t.img
start_daemon src6 "$IT_TMP/mnt6" -o bps=1
pid=$DAEMON_PID
start_helper dd if="$IT_TMP/mnt6/t.img" of=/dev/null bs=4k count=2 iflag=direct status=none
reader=$HELPER_PID
sleep 1
kill -TERM "$pid"
daemon_wait "$pid"
expect_eq "the daemon exited on SIGTERM with a read held by bps=1" 0 "$DAEMON_STATUS"
if [[ $DAEMON_STATUS == running ]]; then
	kill -KILL "$pid"	# the reader would wait for it
	daemon_wait "$pid"
fi
forget_mount "$IT_TMP/mnt6"
rc=0
wait "$reader" || rc=$?
forget_pid "$reader"
expect_eq "... and the held read was answered" 0 "$rc"

it_end
