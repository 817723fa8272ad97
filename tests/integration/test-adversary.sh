#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The trust boundary: root runs the daemon with allow_other over a SOURCE
# that an unprivileged user (nobody) owns and writes.  Whatever that user
# plants in SOURCE, the daemon never reads, writes, truncates or chmods a
# file outside it, and never loses what it acknowledged:
#  - a planted redirect naming a root-only file is ignored;
#  - a symlink flipped between an image inside SOURCE and a root-only file
#    outside never serves the outside file's bytes, takes no write and no
#    chmod for it (a bounded race, some seconds);
#  - a symlink planted as an orphan record or a redirect's temporary is not
#    written through;
#  - a planted orphan record (old and current format) truncates nothing;
#  - the image lock follows a migration: a second daemon cannot serve the
#    destination read-write, a destination inside SOURCE is not served
#    under a second name, also after a restart;
#  - an image replaced under its name while mounted: new opens serve the
#    new file, and what they write and fsync is in it after the unmount;
#    a handle opened before keeps the old file.
# Each check compares the host files outside SOURCE byte for byte.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "trust boundary: a user who writes SOURCE against the root daemon" setpriv

it_other_user
RACE_SECONDS=${DIOLOOP_ADVERSARY_RACE_SECONDS:-5}

chmod 0711 "$IT_TMP"
U=$IT_TMP/user			# the user's tools
SRC=$IT_TMP/src			# SOURCE, the user's
MNT=$IT_TMP/mnt
HOST=$IT_TMP/host		# root's files outside SOURCE
DST=$IT_TMP/dst			# root's migration destinations
mkdir -p "$U" "$SRC" "$HOST" "$DST"
chmod 0755 "$HOST"
cp "$IT_DIR/adversary.py" "$IT_DIR/nodeio.py" "$U/"
chown -R "$USER_ID:$GROUP_ID" "$U" "$SRC"

as_user() {
	"${AS_USER[@]}" "$@"
}
adv() {
	as_user "$IT_PY" "$U/adversary.py" "$@" 2>&1
}
user_io() {
	as_user "$IT_PY" "$U/nodeio.py" "$@" 2>&1
}

# Root's secrets: 1 MiB each, a marker at the start, mode 0600.
make_secret() {
	{
		printf 'ROOT-SECRET-%s\n' "$1"
		head -c $((1024 * 1024 - 32)) /dev/urandom
	} | head -c $((1024 * 1024)) >"$HOST/$1"
	chmod 0600 "$HOST/$1"
}
for s in redirect flip orphan redirect-tmp victim; do
	make_secret "$s"
done
secret_sums() {
	(cd "$HOST" && sha256sum -- * && stat -c '%n %a %s' -- *) | paste -sd' ' -
}
SECRETS_BEFORE=$(secret_sums)
expect_host_untouched() {
	expect_eq "$1: every root file outside SOURCE is unchanged (content, mode, size)" \
		"$SECRETS_BEFORE" "$(secret_sums)"
}

# The user's images.
for img in inside.img grow.img mig.img twin.img lockme.img; do
	must "dioloop create $img (as the user)" as_user "$DIOLOOP_BIN" create --size 4M "$SRC/$img"
done
must "dioloop create swap.img" as_user "$DIOLOOP_BIN" create --size 4M "$SRC/swap.img"
# A root-owned image in the shared directory.
must "dioloop create victim.img (root's)" "$DIOLOOP_BIN" create --size 4M "$SRC/victim.img"
nodeio pwrite "$SRC/victim.img" 0 4194304 7 >/dev/null
VICTIM_SUM=$(sha "$SRC/victim.img")

it_log "---- planted sidecars, before the mount"
# An orphan record in the old format (32 bytes: magic, version 1, length,
# size 0, CRC-32), valid but not ours: it must truncate nothing.
"$IT_PY" - "$SRC/.victim.img.dioloop-orphan" <<'EOF'
import struct, sys, zlib
head = b"DLORPHAN" + struct.pack("<IIQ", 1, 32, 0)
open(sys.argv[1], "wb").write(head + struct.pack("<II", zlib.crc32(head), 0))
EOF
chown "$USER_ID:$GROUP_ID" "$SRC/.victim.img.dioloop-orphan"
# A redirect naming a root-only file, in the old format (a path) and as
# the current one would read, bound to the right inodes: neither is ours.
echo "$HOST/redirect" >"$SRC/.inside.img.dioloop-redirect"
# shellcheck disable=SC2046,SC2183  # stat's "DEV INO": two words each
printf 'dioloop-redirect 2\nname twin.img\nimage %s %s\ntarget %s %s\npath %s\n' \
	$(stat -c '%d %i' "$SRC/twin.img") $(stat -c '%d %i' "$HOST/redirect") \
	"$HOST/redirect" >"$SRC/.twin.img.dioloop-redirect"
chown "$USER_ID:$GROUP_ID" "$SRC"/.*.dioloop-redirect
chmod 0600 "$SRC"/.*.dioloop-redirect
# A symlink as grow.img's orphan record, and as mig.img's redirect
# temporary.
as_user ln -s "$HOST/orphan" "$SRC/.grow.img.dioloop-orphan"
as_user ln -s "$HOST/redirect-tmp" "$SRC/.mig.img.dioloop-redirect.tmp"

start_daemon "$SRC" "$MNT" -o allow_other,growable
PID=$DAEMON_PID

it_log "---- planted orphan record"
expect_eq "victim.img keeps its size under a planted orphan record" 4194304 \
	"$(stat -c %s "$SRC/victim.img")"
expect_eq "victim.img keeps its data" "$VICTIM_SUM" "$(sha "$SRC/victim.img")"

it_log "---- planted redirects"
expect_same_bytes "inside.img serves its own image, not the redirect's file" \
	"$MNT/inside.img" "$SRC/inside.img"
expect_eq "no node reads the redirect's secret (as root)" no \
	"$(grep -qa ROOT-SECRET "$MNT/inside.img" "$MNT/twin.img" 2>/dev/null && echo yes || echo no)"
expect_eq "twin.img is its own image: 4 MiB" 4194304 "$(stat -c %s "$MNT/twin.img" 2>&1)"
expect_eq "the node's owner is the served file's (the user)" "$USER_ID" \
	"$(stat -c %u "$MNT/inside.img" 2>&1)"
user_io pwrite "$MNT/inside.img" 0 65536 3 >/dev/null
user_io pwrite "$MNT/twin.img" 0 65536 3 >/dev/null
expect_io "the user's write to inside.img is in inside.img" "ok same" \
	check "$SRC/inside.img" 0 65536 3
expect_host_untouched "planted redirects"

it_log "---- a symlink flipped in and out of SOURCE (${RACE_SECONDS} s)"
as_user ln -s inside.img "$SRC/flip.img"
start_helper adv flip "$SRC/flip.img" inside.img "$HOST/flip" "$RACE_SECONDS" >"$IT_TMP/flip.out"
FLIP=$HELPER_PID
start_helper adv scan "$MNT/flip.img" ROOT-SECRET "$RACE_SECONDS" >"$IT_TMP/scan-user.out"
SCAN_USER=$HELPER_PID
start_helper "$IT_PY" "$IT_DIR/adversary.py" scan "$MNT/flip.img" ROOT-SECRET "$RACE_SECONDS" >"$IT_TMP/scan-root.out" 2>&1
SCAN_ROOT=$HELPER_PID
start_helper adv scribble "$MNT/flip.img" "$RACE_SECONDS" 1 >"$IT_TMP/scribble.out"
SCRIBBLE=$HELPER_PID
start_helper adv chmod-loop "$MNT/flip.img" 0666 "$RACE_SECONDS" >"$IT_TMP/chmod.out"
CHMOD=$HELPER_PID
for p in "$FLIP" "$SCAN_USER" "$SCAN_ROOT" "$SCRIBBLE" "$CHMOD"; do
	wait "$p"
	forget_pid "$p"
done
expect_match "the links were flipped" "ok [0-9]+" "$(cat "$IT_TMP/flip.out")"
expect_match "the user's reads of flip.img never saw the outside file" "ok [0-9]+ [0-9]+" \
	"$(cat "$IT_TMP/scan-user.out")"
expect_match "root's reads of flip.img never saw the outside file" "ok [0-9]+ [0-9]+" \
	"$(cat "$IT_TMP/scan-root.out")"
expect_match "the user opened flip.img for writing meanwhile" "ok [1-9][0-9]* [0-9]+" \
	"$(cat "$IT_TMP/scribble.out")"
it_log "flips, scans, writes, chmods: $(cat "$IT_TMP"/{flip,scan-user,scan-root,scribble,chmod}.out | paste -sd' ' -)"
expect_host_untouched "the symlink race"

it_log "---- symlinks planted as sidecars"
expect_io "a write past the end of grow.img (growable)" "ok 65536" \
	pwrite "$MNT/grow.img" 4194304 65536 5
expect_io "fsync grow.img" "ok" fsync "$MNT/grow.img"
expect_eq "grow.img grew" 4259840 "$(stat -c %s "$SRC/grow.img")"
expect_ok "migrate mig.img (its redirect temporary is a planted symlink)" \
	"$DIOLOOP_BIN" migrate "$MNT/mig.img" "$DST/mig.raw"
expect_eq "the redirect is a regular file of root's, 0600" "regular file 0 600" \
	"$(stat -c '%F %u %a' "$SRC/.mig.img.dioloop-redirect" 2>&1)"
expect_host_untouched "planted sidecar symlinks"

# second_daemon_refused WHEN: both images of DST (mig.raw, lockme.raw) are
# held by the first daemon, so a second daemon on DST has nothing to
# serve: its mount is refused (exit status 1) saying lockme.raw is in use.
second_daemon_refused() {
	mkdir -p "$IT_TMP/mnt2"
	expect_status "$1: a second daemon on the destination directory is refused" 1 \
		timeout -k 5 60 "$DIOLOOP_BIN" mount "$DST" "$IT_TMP/mnt2"
	if is_mount "$IT_TMP/mnt2"; then
		IT_FUSE+=("$IT_TMP/mnt2")
		it_fail "$1: a second daemon mounted $DST: it must not serve lockme.raw"
	fi
	expect_match "$1: it says lockme.raw is in use" ".*lockme.raw: not served: the image is in use.*" \
		"$(paste -sd' ' "$IT_TMP/last.out")"
}

it_log "---- the image lock follows a migration"
expect_io "write to lockme.img" "ok 65536" pwrite "$MNT/lockme.img" 0 65536 15
expect_ok "migrate lockme.img to a destination outside SOURCE" \
	"$DIOLOOP_BIN" migrate "$MNT/lockme.img" "$DST/lockme.raw"
second_daemon_refused "after the migration"
expect_ok "migrate swap.img to a file inside SOURCE" \
	"$DIOLOOP_BIN" migrate "$MNT/swap.img" "$SRC/swapped.img"
expect_io "swap.img writes go to the destination" "ok 4096" pwrite "$MNT/swap.img" 0 4096 9
expect_eq "the destination is not a second writable node" "err" \
	"$(nodeio open "$MNT/swapped.img" rw 2>&1 | cut -d' ' -f1)"
expect_io "the write reached the destination" "ok same" check "$SRC/swapped.img" 0 4096 9

it_log "---- an image replaced under its name while mounted"
expect_io "write A to inside.img" "ok 65536" pwrite "$MNT/inside.img" 0 65536 11
exec 7<>"$MNT/inside.img"
must "create new.img" as_user "$DIOLOOP_BIN" create --size 4M "$SRC/new.img"
nodeio pwrite "$SRC/new.img" 0 65536 12 >/dev/null
must "mv new.img over inside.img" as_user mv "$SRC/new.img" "$SRC/inside.img"
expect_io "a new open sees the new file" "ok same" check "$MNT/inside.img" 0 65536 12
expect_io "write C through a new open" "ok 4096" pwrite "$MNT/inside.img" 8192 4096 13
expect_io "fsync it" "ok" fsync "$MNT/inside.img"
expect_io "the handle opened before keeps the old file" "ok same" check fd:7 0 65536 11
expect_io "write D through the old handle" "ok 4096" pwrite fd:7 16384 4096 14
exec 7>&-
expect_host_untouched "all cases"

dioloop_umount "$MNT"
daemon_wait "$PID"
expect_io "after the unmount, the new inside.img holds C" "ok same" check "$SRC/inside.img" 8192 4096 13
expect_io "and not what went to the old file" "ok same" check "$SRC/inside.img" 16384 4096 12

it_log "---- after a restart, the lock is still on what the redirects serve"
start_daemon "$SRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_io "lockme.img is served from its destination" "ok same" check "$MNT/lockme.img" 0 65536 15
second_daemon_refused "after a restart"
expect_eq "swapped.img is not served under its own name" "err" \
	"$(nodeio open "$MNT/swapped.img" rw 2>&1 | cut -d' ' -f1)"
dioloop_umount "$MNT"
daemon_wait "$PID"
expect_host_untouched "the restart"
expect_eq "victim.img still has its size" 4194304 "$(stat -c %s "$SRC/victim.img")"

it_end
