#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# One daemon serves an image at a time (an OFD lock on the image):
#  - a second mount whose source holds the same image (a hard link) says
#    on its terminal which process holds it, exits 0 and serves its other
#    images; the refused node answers EBUSY, the first daemon keeps
#    serving it;
#  - a symlink alias inside one source shares its target's lock;
#  - two read-only mounts may share an image;
#  - once the first daemon is gone, the second serves the image;
#  - `dioloop umount` returns once the daemon has closed its images and
#    exited, even when closing takes seconds (a 2 s fault delay on flush),
#    so the image is free for the next command at once.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "image locks: a second mount of an image is refused, naming the holder" jq

SRC1=$IT_TMP/src1
SRC2=$IT_TMP/src2
SRC3=$IT_TMP/src3
MNT1=$IT_TMP/mnt1
MNT2=$IT_TMP/mnt2
mkdir -p "$SRC1" "$SRC2" "$SRC3" "$MNT1" "$MNT2"
must "dioloop create --size 8M shared.img" "$DIOLOOP_BIN" create --size 8M "$SRC1/shared.img"
must "dioloop create --size 8M own.img" "$DIOLOOP_BIN" create --size 8M "$SRC2/own.img"
must "dioloop create --size 1M ro.img" "$DIOLOOP_BIN" create --size 1M "$SRC1/ro.img"
ln "$SRC1/shared.img" "$SRC2/shared.img"	# the same image, another name
ln -s shared.img "$SRC1/alias.img"		# an alias inside the source
ln "$SRC1/ro.img" "$SRC3/ro.img"

start_daemon "$SRC1" "$MNT1"
PID1=$DAEMON_PID
expect_io "the first daemon writes shared.img" "ok 65536" pwrite "$MNT1/shared.img" 0 65536 3
expect_io "alias.img (symlink to shared.img in the same source) is served too" \
	"ok same" check "$MNT1/alias.img" 0 65536 3

it_log "---- a second mount of the same image (in the background, as a user would)"
rc=0
"$DIOLOOP_BIN" mount "$SRC2" "$MNT2" >"$IT_TMP/mount2.out" 2>"$IT_TMP/mount2.err" </dev/null || rc=$?
if is_mount "$MNT2"; then
	IT_FUSE+=("$MNT2")
	pid2=$(jq -r .pid "$MNT2/.dioloop/stats.json")
	[[ $pid2 =~ ^[0-9]+$ ]] && IT_PIDS+=("$pid2")
fi
expect_eq "the second mount exits 0 (it serves its other images)" 0 "$rc"
it_show "$IT_TMP/mount2.err"
expect_eq "its terminal is told who holds shared.img (one line)" 1 \
	"$(grep -c "shared.img: not served: the image is in use by process $PID1 (.*dioloop mount -f " \
		"$IT_TMP/mount2.err")"
expect_io "the second mount serves own.img" "ok 4096" pwrite "$MNT2/own.img" 0 4096 5
expect_io "the second mount refuses shared.img: EBUSY" "err EBUSY" stat "$MNT2/shared.img"
expect_io "the first daemon still serves shared.img" "ok same" check "$MNT1/shared.img" 0 65536 3
expect_eq "stats.json of the second mount has own.img only" own.img \
	"$(jq -r '.nodes | keys | join(",")' "$MNT2/.dioloop/stats.json")"

it_log "---- read-only mounts may share an image"
mkdir -p "$IT_TMP/mnt3"
expect_status "a read-only mount of SRC3, whose only image the first daemon has read-write, serves nothing: refused" 1 \
	"$DIOLOOP_BIN" mount -o ro "$SRC3" "$IT_TMP/mnt3"
if is_mount "$IT_TMP/mnt3"; then	# (not ours to leave behind)
	IT_FUSE+=("$IT_TMP/mnt3")
	for p in $(find_daemon_pid "$IT_TMP/mnt3"); do IT_PIDS+=("$p"); done
fi
expect_match "... saying ro.img is in use by the first daemon" \
	".*ro.img: not served: the image is in use by process $PID1 .*none of its 1 images can be served.*" \
	"$(paste -sd' ' "$IT_TMP/last.out")"
daemon_wait_stop() { # MNT PID
	dioloop_umount "$1"
	daemon_wait "$2"
	expect_eq "exit status of the daemon on $1" 0 "$DAEMON_STATUS"
}

it_log "---- once the first daemon is gone, the image is free"
daemon_wait_stop "$MNT1" "$PID1"
expect_io "the second mount now serves shared.img (the lock is retried at lookup)" \
	"ok same" check "$MNT2/shared.img" 0 65536 3
start_daemon "$SRC3" "$IT_TMP/mnt3" -o ro
PID3=$DAEMON_PID
start_daemon "$SRC3" "$IT_TMP/mnt4" -o ro
PID4=$DAEMON_PID
expect_io "two read-only mounts serve ro.img (read locks share): the first" \
	"ok 1048576" stat "$IT_TMP/mnt3/ro.img"
expect_io "two read-only mounts serve ro.img (read locks share): the second" \
	"ok 1048576" stat "$IT_TMP/mnt4/ro.img"
daemon_wait_stop "$IT_TMP/mnt3" "$PID3"
daemon_wait_stop "$IT_TMP/mnt4" "$PID4"
dioloop_umount "$MNT2"
[[ -n ${pid2:-} ]] && wait_gone "$pid2" 10 && forget_pid "$pid2"

it_log "---- dioloop umount waits for the daemon to close its images"
SRC5=$IT_TMP/src5
mkdir -p "$SRC5"
must "dioloop create --size 8M slow.img" "$DIOLOOP_BIN" create --size 8M "$SRC5/slow.img"
start_daemon "$SRC5" "$IT_TMP/mnt5"
PID5=$DAEMON_PID
expect_io "write slow.img" "ok 65536" pwrite "$IT_TMP/mnt5/slow.img" 0 65536 5
must "dioloop fault slow.img flush delay=2s" "$DIOLOOP_BIN" fault "$IT_TMP/mnt5/slow.img" flush delay=2s
dioloop_umount "$IT_TMP/mnt5"
expect_eq "the daemon has exited when dioloop umount returns" no \
	"$(pid_alive "$PID5" && echo yes || echo no)"
daemon_wait "$PID5"
expect_eq "exit status of the daemon" 0 "$DAEMON_STATUS"

it_end
