#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Mounting as a user (nobody), through fusermount3:
#  - dioloop create, mount, I/O on a node, stats, limit and umount work;
#  - without allow_other, even root is kept out of the mount;
#  - allow_other is refused with one line unless /etc/fuse.conf allows it
#    (and then root gets in); --loop is refused with one line.
# /dev/fuse must be usable by the user: where the machine leaves it
# 0600 (no udev rule), the test opens it up for its duration and puts the
# mode back afterwards.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "non-root mounts through fusermount3" setpriv jq

USER_ID=$(id -u nobody 2>/dev/null) || it_skip "no user 'nobody' to mount as"
GROUP_ID=$(id -g nobody)
AS_USER=(setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups --)
REAL_BIN=$DIOLOOP_BIN
[[ -u $(command -v fusermount3) ]] || it_skip "fusermount3 is not setuid root: users cannot mount"

FUSE_MODE=$(stat -c %a /dev/fuse)
# shellcheck disable=SC2317  # called from the EXIT trap
restore_fuse_mode() {
	[[ $(stat -c %a /dev/fuse) == "$FUSE_MODE" ]] || chmod "$FUSE_MODE" /dev/fuse
}
# Put the mode back before lib.sh's cleanup, keeping the exit status.
# shellcheck disable=SC2154  # set by the trap as it runs
trap 'rc=$?; restore_fuse_mode; (exit $rc); it_cleanup' EXIT
if ! "${AS_USER[@]}" test -r /dev/fuse -a -w /dev/fuse; then
	it_log "/dev/fuse is $FUSE_MODE: opening it to users for this test"
	chmod o+rw /dev/fuse
fi

# The user's own directories (IT_TMP is root's, 0700: let them through).
chmod 0711 "$IT_TMP"
U=$IT_TMP/user
mkdir -p "$U/src" "$U/mnt" "$U/mnt2"
cp "$IT_DIR/nodeio.py" "$U/nodeio.py"
chown -R "$USER_ID:$GROUP_ID" "$U"
as_user_io() {
	"${AS_USER[@]}" "$IT_PY" "$U/nodeio.py" "$@" 2>&1
}

must "dioloop create as the user" "${AS_USER[@]}" "$REAL_BIN" create --size 8M "$U/src/u.img"
expect_eq "the image belongs to the user" "$USER_ID" "$(stat -c %u "$U/src/u.img")"

# start_user_daemon MNT MOUNT-ARGS...: like start_daemon, as the user.
# (start_daemon waits with mountpoint(1), which root cannot use on a
# user's mount without allow_other: /proc/self/mounts tells instead.)
start_user_daemon() {
	local mnt=$1 i
	shift
	IT_NDAEMON=$((IT_NDAEMON + 1))
	DAEMON_LOG=$IT_TMP/daemon.$IT_NDAEMON.log
	it_log "start as $USER_ID: dioloop mount -f $* $U/src $mnt"
	"${AS_USER[@]}" "$REAL_BIN" mount -f "$@" "$U/src" "$mnt" >"$DAEMON_LOG" 2>&1 </dev/null &
	DAEMON_PID=$!	# setpriv execs: the daemon's own PID
	IT_PIDS+=("$DAEMON_PID")
	IT_FUSE+=("$mnt")
	for ((i = 0; i < 100; i++)); do
		is_mount "$mnt" && return 0
		pid_alive "$DAEMON_PID" || break
		sleep 0.1
	done
	it_show "$DAEMON_LOG"
	it_die "the user's dioloop mount -f $* on $mnt: not mounted"
}
start_user_daemon "$U/mnt"
PID=$DAEMON_PID
expect_eq "the daemon runs as the user" "$USER_ID" "$(stat -c %u "/proc/$PID")"
expect_match "the mount belongs to the user (user_id in /proc/mounts)" ".*user_id=$USER_ID,.*" \
	"$(awk -v d="$U/mnt" '$2 == d { print $4 }' /proc/self/mounts)"

it_log "---- the user's I/O, stats and limits"
expect_eq "the user writes u.img" "ok 65536" "$(as_user_io pwrite "$U/mnt/u.img" 0 65536 4)"
expect_eq "the user reads it back" "ok same" "$(as_user_io check "$U/mnt/u.img" 0 65536 4)"
expect_eq "the user fsyncs it" "ok" "$(as_user_io fsync "$U/mnt/u.img")"
expect_eq "the user reads stats.json" 1 \
	"$("${AS_USER[@]}" jq '.nodes["u.img"].ops.write' "$U/mnt/.dioloop/stats.json" 2>&1)"
expect_ok "the user runs dioloop limit" "${AS_USER[@]}" "$REAL_BIN" limit "$U/mnt/u.img" iops=1000
expect_ok "the user runs dioloop stats" "${AS_USER[@]}" "$REAL_BIN" stats "$U/mnt"

it_log "---- allow_other only when asked"
expect_io "root is kept out without allow_other" "err EACCES" stat "$U/mnt/u.img"
if grep -qx '[[:space:]]*user_allow_other[[:space:]]*' /etc/fuse.conf 2>/dev/null; then
	start_user_daemon "$U/mnt2" -o allow_other
	expect_io "with allow_other (user_allow_other is set), root gets in" "ok 0" stat "$U/mnt2/.dioloop/ctl"
else
	expect_status "mount -o allow_other as the user (no user_allow_other in /etc/fuse.conf)" 1 \
		"${AS_USER[@]}" "$REAL_BIN" mount "$U/src" "$U/mnt2" -o allow_other
	expect_match "... says why, in one line" "dioloop: mount: allow_other: .*user_allow_other.*" \
		"$(cat "$IT_TMP/last.out")"
fi
expect_status "mount --loop as the user" 2 "${AS_USER[@]}" "$REAL_BIN" mount --loop "$U/src" "$U/mnt2"
expect_match "... says why, in one line" "dioloop: mount: --loop needs root.*" "$(cat "$IT_TMP/last.out")"

it_log "---- the user unmounts"
# The daemon's last flush takes 2 s after the unmount: umount waits for it.
expect_ok "the user delays u.img's flushes by 2 s" \
	"${AS_USER[@]}" "$REAL_BIN" fault "$U/mnt/u.img" flush delay=2s
expect_ok "dioloop umount as the user" "${AS_USER[@]}" "$REAL_BIN" umount "$U/mnt"
forget_mount "$U/mnt"
expect_eq "... which returns once the user's daemon has exited" no \
	"$(pid_alive "$PID" && echo yes || echo no)"
daemon_wait "$PID"
expect_eq "exit status of the user's daemon" 0 "$DAEMON_STATUS"
expect_io "the image holds the user's data" "ok same" check "$U/src/u.img" 0 65536 4

it_end
