#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The trust boundary of what root runs on paths an unprivileged user
# (nobody) can write (see test-adversary.sh for what the user plants in
# SOURCE against the daemon):
#  - a migration into the user's directory: the user, swapping the new
#    file for one of their own (kept open) as soon as it appears, gets
#    none of the image's bytes, and the node is not served from the
#    user's file;
#  - convert into the user's directory: a symlink to a root-only file put
#    in place of the new file as soon as it appears is not written
#    through;
#  - convert's copy is no more open than its source (0600 stays 0600);
#  - root's commands do not follow the user's symlink to root's file
#    (convert, snapshot, info), and still follow root's own symlinks and
#    the user's to the user's own files;
#  - dioloop umount of a mount point under the user's directory, which
#    the user swaps for a symlink to another mount mid-way, flushes and
#    unmounts the dioloop mount, not the other one;
#  - names the user gives images (a newline, terminal escape sequences)
#    reach neither the daemon's log nor root's terminal raw.
# The user's swaps are driven by inotify (dioloop-race-swap, race-swap.c),
# fast enough to land inside the window between the create and the next
# open by name.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "trust boundary: root's commands on paths a user can write" setpriv

it_other_user
RACE_SECONDS=${DIOLOOP_ADVERSARY_RACE_SECONDS:-5}

chmod 0711 "$IT_TMP"
U=$IT_TMP/user			# the user's tools
UDIR=$IT_TMP/udir		# a directory the user owns
SRC=$IT_TMP/src			# root's SOURCE
MNT=$IT_TMP/mnt
HOST=$IT_TMP/host		# root's files
mkdir -p "$U" "$UDIR" "$SRC" "$HOST"
chmod 0755 "$HOST" "$SRC"
RACE_SWAP=${DIOLOOP_RACE_SWAP:-$(dirname "$DIOLOOP_BIN")/tests/integration/dioloop-race-swap}
[[ -x $RACE_SWAP ]] || it_die "no dioloop-race-swap at $RACE_SWAP: build it, or set DIOLOOP_RACE_SWAP"
install -m 0755 "$RACE_SWAP" "$U/race-swap"
chown -R "$USER_ID:$GROUP_ID" "$U" "$UDIR"

# A racer of the user's in the background: its output in $IT_TMP/race.out.
# Returns once its watch is in place.
start_racer() {
	rm -f "$IT_TMP/race.out" "$U/ready"
	start_helper bash -c '"$@" >"'"$IT_TMP"'/race.out" 2>&1' racer \
		"${AS_USER[@]}" "$U/race-swap" "$@" "$U/ready"
	RACER=$HELPER_PID
	for ((i = 0; i < 100; i++)); do
		[[ -e $U/ready ]] && return 0
		sleep 0.05
	done
	it_die "the user's racer did not start"
}
# racer_wait: the racer's end (not in $(...), whose subshell has no
# children to wait for); its output is then in $IT_TMP/race.out.
racer_wait() {
	wait "$RACER" 2>/dev/null
	forget_pid "$RACER"
}

# Root's image: 4 MiB, a marker at the start, mode 0600.
{
	printf 'ROOT-IMAGE-SECRET\n'
	head -c $((4 * 1024 * 1024)) /dev/urandom
} | head -c $((4 * 1024 * 1024)) >"$SRC/root.img"
chmod 0600 "$SRC/root.img"
ROOT_SUM=$(sha "$SRC/root.img")
# Root's file outside: as large as the image, so that a write through a
# symlink to it would land.
{
	printf 'ROOT-VICTIM\n'
	head -c $((4 * 1024 * 1024)) /dev/zero
} | head -c $((4 * 1024 * 1024)) >"$HOST/victim"
chmod 0600 "$HOST/victim"
VICTIM_SUM=$(sha256sum <"$HOST/victim")

it_log "---- a migration into the user's directory"
MIG_TRIES=20
for ((try = 1; try <= MIG_TRIES; try++)); do
	cp -p "$SRC/root.img" "$SRC/root$try.img"
done
start_daemon "$SRC" "$MNT"
PID=$DAEMON_PID
# Tries until the swap lands before the destination is locked (the
# migration then refuses), checking each time that the user got nothing:
# a swap after the switch leaves the name leading to the user's file,
# which the daemon then does not serve, and the image in the file renamed
# aside, root's and 0600.
for ((try = 1; try <= MIG_TRIES; try++)); do
	start_racer file "$UDIR" "dest$try.img" ROOT-IMAGE-SECRET 1
	"$DIOLOOP_BIN" migrate "$MNT/root$try.img" "$UDIR/dest$try.img" >"$IT_TMP/mig.out" 2>&1
	racer_wait
	race=$(cat "$IT_TMP/race.out")
	it_log "migrate, try $try: $race: $(paste -sd' ' "$IT_TMP/mig.out")"
	[[ $race == "ok swapped" ]] || break
	grep -q "changed after it was created" "$IT_TMP/mig.out" && break
	if [[ -e $MNT/root$try.img ]]; then
		[[ $(sha "$MNT/root$try.img") == "$ROOT_SUM" ]] || break
	else
		[[ $(stat -c '%u %a' "$UDIR/dest$try.img.aside") == "0 600" ]] || break
	fi
done
expect_eq "the user's swapped-in file got none of the image" "ok swapped" "$race"
if ((try > MIG_TRIES)); then
	it_log "the swap never landed before the lock in $MIG_TRIES tries: the refusal not seen"
else
	expect_match "the migration refuses the swapped destination" \
		'.*dest[0-9]+[.]img changed after it was created.*the node stays on its source.*' \
		"$(paste -sd' ' "$IT_TMP/mig.out")"
	expect_eq "the node still serves the image" "$ROOT_SUM" "$(sha "$MNT/root$try.img")"
fi
dioloop_umount "$MNT"
daemon_wait "$PID"

it_log "---- convert into the user's directory"
# The window is about a millisecond: tries until the swap lands in it
# (convert then refuses), checking root's file after each.
for ((try = 1; try <= 20; try++)); do
	rm -f "$UDIR"/copy.raw*
	start_racer symlink "$UDIR" copy.raw "$HOST/victim" "$RACE_SECONDS"
	rc=0
	"$DIOLOOP_BIN" convert "$SRC/root.img" "$UDIR/copy.raw" >"$IT_TMP/conv.out" 2>&1 || rc=$?
	racer_wait
	[[ $(sha256sum <"$HOST/victim") == "$VICTIM_SUM" ]] || break
	((rc == 0)) || break
done
it_log "convert, try $try: exit $rc: $(paste -sd' ' "$IT_TMP/conv.out")"
expect_eq "root's file the symlink names is unchanged" "$VICTIM_SUM" \
	"$(sha256sum <"$HOST/victim")"
if ((try > 20)); then
	it_log "the swap never landed inside the window in 20 tries: convert's refusal not seen"
else
	expect_match "convert refuses, in one line, to write through the swapped name" \
		'.*convert: .*copy.raw changed after it was created .*: not written' \
		"$(cat "$IT_TMP/conv.out")"
	expect_eq "... exit status 1" 1 "$rc"
	expect_eq "... and leaves the user's symlink alone" "$HOST/victim" \
		"$(readlink "$UDIR/copy.raw")"
fi

it_log "---- convert's copy keeps its source's permissions"
must "dioloop convert root.img (0600)" "$DIOLOOP_BIN" convert "$SRC/root.img" "$HOST/copy.raw"
expect_eq "the copy of a 0600 image is 0600" 600 "$(stat -c %a "$HOST/copy.raw")"
expect_eq "... and holds the image" "$ROOT_SUM" "$(sha "$HOST/copy.raw")"

it_log "---- the user's symlinks to root's files"
must "dioloop create --format cow root.cow (root's)" "$DIOLOOP_BIN" create --format cow --size 4M "$HOST/root.cow"
chmod 0600 "$HOST/root.cow"
COW_SUM=$(sha256sum <"$HOST/root.cow")
"${AS_USER[@]}" ln -s "$HOST/victim" "$UDIR/evil.img"
"${AS_USER[@]}" ln -s "$HOST/root.cow" "$UDIR/evil.cow"
expect_one_line_error "convert of the user's symlink to root's file" 2 \
	"$DIOLOOP_BIN" convert "$UDIR/evil.img" "$HOST/evil.raw"
expect_match "... says why" '.*evil.img is a symlink of user [0-9]+ to a file of user 0: not followed.*' \
	"$(cat "$IT_TMP/err.err")"
expect_eq "... and writes nothing" "" "$(find "$HOST" -name 'evil*')"
expect_one_line_error "snapshot through the user's symlink to root's cow image" 2 \
	"$DIOLOOP_BIN" snapshot "$UDIR/evil.cow" snap1
expect_one_line_error "info of IMAGE@VOLUME through it" 2 \
	"$DIOLOOP_BIN" info "$UDIR/evil.cow@snap1"
expect_eq "root's cow image is unchanged" "$COW_SUM" "$(sha256sum <"$HOST/root.cow")"
expect_eq "... and root's file" "$VICTIM_SUM" "$(sha256sum <"$HOST/victim")"
ln -s "$HOST/root.cow" "$HOST/link.cow"
expect_ok "root's own symlink is followed" "$DIOLOOP_BIN" info "$HOST/link.cow"
must "dioloop create mine.img (the user's)" "${AS_USER[@]}" "$DIOLOOP_BIN" create --size 1M "$UDIR/mine.img"
"${AS_USER[@]}" ln -s "$UDIR/mine.img" "$UDIR/link.img"
expect_ok "the user's symlink to the user's own image is followed" \
	"$DIOLOOP_BIN" convert "$UDIR/link.img" "$HOST/mine.raw"
ln -s "$UDIR" "$HOST/to-udir"
expect_ok "the user follows root's link to the user's own directory" \
	"${AS_USER[@]}" "$DIOLOOP_BIN" info "$HOST/to-udir/mine.img"
"${AS_USER[@]}" ln -s "$HOST" "$UDIR/out"
expect_one_line_error "convert into a destination through the user's link to root's directory" 2 \
	"$DIOLOOP_BIN" convert "$UDIR/mine.img" "$UDIR/out/planted.raw"
expect_eq "... writes nothing there" "" "$(find "$HOST" -name 'planted*')"

it_log "---- umount while the user swaps a directory above the mount point"
UHOME=$IT_TMP/uhome
mkdir -p "$UHOME/d/m" "$IT_TMP/victim/m"
chown -R "$USER_ID:$GROUP_ID" "$UHOME"
chmod 0755 "$UHOME" "$UHOME/d"
mount_inner tmpfs "$IT_TMP/victim/m" -t tmpfs -o size=8M
printf 'ROOT-TMPFS\n' >"$IT_TMP/victim/m/root.img"
chmod 0600 "$IT_TMP/victim/m/root.img"
# The swap lands at the umount's first look inside the mount, or later:
# ten tries, each checking the other mount.
for ((try = 1; try <= 10; try++)); do
	rm -f "$UHOME/d.aside"
	start_daemon "$SRC" "$UHOME/d/m" -o allow_other
	PID=$DAEMON_PID
	start_racer dir "$UHOME/d/m" "$UHOME/d" "$IT_TMP/victim" "$RACE_SECONDS"
	rc=0
	"$DIOLOOP_BIN" umount "$UHOME/d/m" >"$IT_TMP/umount.out" 2>&1 || rc=$?
	racer_wait
	it_log "umount, try $try: exit $rc: $(paste -sd' ' "$IT_TMP/umount.out"); the user: $(cat "$IT_TMP/race.out")"
	forget_mount "$UHOME/d/m"
	dmnt=$UHOME/d/m
	[[ -L $UHOME/d ]] && dmnt=$UHOME/d.aside/m
	# Gone, or (the swap came before umount looked) refused whole.
	gone=yes
	if grep -qF " $dmnt fuse.dioloop " /proc/self/mounts; then
		((rc == 2)) && grep -q 'refusing to touch it' "$IT_TMP/umount.out" ||
			gone=no
		fusermount3 -u -z "$dmnt"
	fi
	daemon_wait "$PID"
	# The user puts the directory back for the next try.
	if [[ -L $UHOME/d ]]; then
		rm "$UHOME/d"
		mv "$UHOME/d.aside" "$UHOME/d"
	fi
	mountpoint -q "$IT_TMP/victim/m" && [[ $gone == yes ]] || break
done
expect_eq "the other mount is still mounted" yes \
	"$(mountpoint -q "$IT_TMP/victim/m" && echo yes || echo no)"
expect_eq "... its file unchanged" "ROOT-TMPFS" "$(cat "$IT_TMP/victim/m/root.img" 2>&1)"
expect_eq "the dioloop mount is gone (or umount refused, touching nothing)" yes "$gone"
mountpoint -q "$IT_TMP/victim/m" || mount -t tmpfs tmpfs "$IT_TMP/victim/m"
umount_inner "$IT_TMP/victim/m"

it_log "---- names that would forge a log line or drive a terminal"
USRC=$IT_TMP/usrc
mkdir -p "$USRC"
chown "$USER_ID:$GROUP_ID" "$USRC"
ESC=$'\e'
FORGED=$'x\nFORGED: dioloop[1]: root.img: flushed OK.img'
TITLE="t${ESC}]0;OWNED${ESC}[2J.img"
"${AS_USER[@]}" ln -s "$HOST/victim" "$USRC/$FORGED"
must "the user's image with escapes in its name" \
	"${AS_USER[@]}" "$DIOLOOP_BIN" create --size 1M "$USRC/$TITLE"
start_daemon "$USRC" "$MNT" -o allow_other
PID=$DAEMON_PID
stat "$MNT/$FORGED" >/dev/null 2>&1	# a lookup: refused, and logged
"$DIOLOOP_BIN" stats "$MNT" >"$IT_TMP/stats.out" 2>&1
dioloop_umount "$MNT"
daemon_wait "$PID"
expect_eq "the refusal is logged, the name escaped" 1 \
	"$(grep -c 'x\\x0aFORGED: dioloop\[1\]: root.img: flushed OK.img: refused' "$DAEMON_LOG")"
expect_eq "no log line starts with the forged text" 0 "$(grep -c '^FORGED' "$DAEMON_LOG")"
expect_eq "no escape byte in the log" 0 "$(grep -c "$ESC" "$DAEMON_LOG")"
expect_eq "no escape byte in dioloop stats" 0 "$(grep -c "$ESC" "$IT_TMP/stats.out")"
expect_eq "... which shows the node, escaped" 1 "$(grep -c 't\\x1b]0;OWNED' "$IT_TMP/stats.out")"

it_end
