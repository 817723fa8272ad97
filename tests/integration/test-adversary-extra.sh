#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# More of the trust boundary (see test-adversary.sh): root runs the daemon
# with allow_other, an unprivileged user (nobody) uses the mount and
# writes SOURCE.
#  - a migration does not open an image up: a node nobody could read
#    before is not readable after it, and the image's owner keeps it;
#  - an old orphan record of root's, kept aside through a hard link
#    (fs.protected_hardlinks=0) and put back in a sticky SOURCE, does not
#    truncate the image it was written for once that image has grown and
#    been flushed; nor is root's cow image outside SOURCE, hard-linked
#    into it, written or locked;
#  - a redirect renamed to another image name does not make that name
#    serve the migration's destination;
#  - a symlink the user plants to a file in a directory of SOURCE the
#    user cannot enter does not give the user that file's bytes;
#  - a file planted as IMAGE@VOLUME does not take the place of a volume
#    of root's cow image (before or after the snapshot is taken);
#  - a stream of refused names, each new, does not grow the daemon's
#    memory without bound (the table behind its log rate limit);
#  - cow images planted past the daemon's thread limit (a pids cgroup)
#    are refused, the daemon lives on and serves the others.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "trust boundary, more: migrations, replayed orphan records, renamed redirects" setpriv

# lock_probe FILE: "ok" when a write lock on all of FILE can be taken now
# (a POSIX record lock, which conflicts with the daemon's OFD lock), else
# "busy".
lock_probe() {
	"$IT_PY" -c 'import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("ok")
except OSError:
    print("busy")' "$1" 2>&1
}

it_other_user
HARDLINKS=/proc/sys/fs/protected_hardlinks
HARDLINKS_WAS=$(cat "$HARDLINKS" 2>/dev/null)

# The sysctl is changed only around single links, and put back by the
# EXIT trap too.
restore_hardlinks() {
	[[ -n $HARDLINKS_WAS && $(cat "$HARDLINKS" 2>/dev/null) != "$HARDLINKS_WAS" ]] &&
		echo "$HARDLINKS_WAS" >"$HARDLINKS"
	return 0
}
CGROUP=			# a pids cgroup this test made
CGROUP_PID=		# the daemon in it
release_cgroup() {
	[[ -n $CGROUP ]] || return 0
	if [[ -n $CGROUP_PID ]] && pid_alive "$CGROUP_PID"; then
		kill -KILL "$CGROUP_PID" 2>/dev/null
		wait_gone "$CGROUP_PID" 10
	fi
	rmdir "$CGROUP" 2>/dev/null && CGROUP=
	return 0
}
trap 'rc=$?; restore_hardlinks; release_cgroup; (exit $rc); it_cleanup' EXIT

chmod 0711 "$IT_TMP"
U=$IT_TMP/user
DST=$IT_TMP/dst			# root's migration destinations
mkdir -p "$U" "$DST"
cp "$IT_DIR/nodeio.py" "$U/"
chown -R "$USER_ID:$GROUP_ID" "$U"

as_user() {
	"${AS_USER[@]}" "$@"
}
user_io() {
	as_user "$IT_PY" "$U/nodeio.py" "$@" 2>&1
}
# as_user_link TARGET NAME: a hard link made by the user while
# fs.protected_hardlinks is 0.
as_user_link() {
	local rc=0
	echo 0 >"$HARDLINKS" || return 1
	as_user ln -- "$1" "$2" || rc=$?
	restore_hardlinks
	return "$rc"
}

it_log "---- a migration keeps who may read and write the node"
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC"
chown "$USER_ID:$GROUP_ID" "$SRC"
must "dioloop create secret.img (root's, 0600)" "$DIOLOOP_BIN" create --size 4M "$SRC/secret.img"
chmod 0600 "$SRC/secret.img"
nodeio pwrite "$SRC/secret.img" 0 65536 21 >/dev/null
must "dioloop create secret.cow (root's, 0600)" "$DIOLOOP_BIN" create --format cow --size 4M "$SRC/secret.cow"
chmod 0600 "$SRC/secret.cow"
must "dioloop create mine.img (the user's, 0600)" as_user "$DIOLOOP_BIN" create --size 4M "$SRC/mine.img"
as_user chmod 0600 "$SRC/mine.img"
start_daemon "$SRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_io "cow: root writes secret.cow" "ok 65536" pwrite "$MNT/secret.cow" 0 65536 22
expect_eq "before: the user cannot read secret.img" "err EACCES" \
	"$(user_io pread "$MNT/secret.img" 0 4096)"
expect_eq "before: the user writes mine.img" "ok 4096" \
	"$(user_io pwrite "$MNT/mine.img" 0 4096 23)"
expect_ok "migrate secret.img (raw)" "$DIOLOOP_BIN" migrate "$MNT/secret.img" "$DST/secret.raw"
expect_ok "migrate secret.cow (cow)" "$DIOLOOP_BIN" migrate "$MNT/secret.cow" "$DST/secret.cow"
expect_ok "migrate mine.img" "$DIOLOOP_BIN" migrate "$MNT/mine.img" "$DST/mine.raw"
expect_eq "after: the user still cannot read secret.img" "err EACCES" \
	"$(user_io pread "$MNT/secret.img" 0 4096)"
expect_eq "after: the user still cannot read secret.cow" "err EACCES" \
	"$(user_io pread "$MNT/secret.cow" 0 4096)"
expect_eq "after: secret.img's mode and owner" "600 0" "$(stat -c '%a %u' "$MNT/secret.img")"
expect_eq "after: mine.img's mode and owner" "600 $USER_ID" "$(stat -c '%a %u' "$MNT/mine.img")"
expect_eq "after: the user still writes mine.img" "ok 4096" \
	"$(user_io pwrite "$MNT/mine.img" 4096 4096 24)"
dioloop_umount "$MNT"
daemon_wait "$PID"

it_log "---- an old orphan record put back in a sticky SOURCE"
if [[ -z $HARDLINKS_WAS ]] || ! echo "$HARDLINKS_WAS" >"$HARDLINKS" 2>/dev/null; then
	it_log "cannot set $HARDLINKS here: case left out"
else
	SSRC=$IT_TMP/sticky
	SMNT=$IT_TMP/smnt
	mkdir -p "$SSRC"
	chmod 1777 "$SSRC"
	must "dioloop create victim.img (root's, 0644)" "$DIOLOOP_BIN" create --size 4M "$SSRC/victim.img"
	chmod 0644 "$SSRC/victim.img"
	must "the user's own directory in SOURCE" as_user mkdir "$SSRC/own"
	start_daemon "$SSRC" "$SMNT" -o allow_other,growable
	PID=$DAEMON_PID
	expect_io "root writes past the end of victim.img" "ok 65536" \
		pwrite "$SMNT/victim.img" 4194304 65536 31
	expect_ok "the user links root's live orphan record into a directory of theirs" \
		as_user_link "$SSRC/.victim.img.dioloop-orphan" "$SSRC/own/kept"
	expect_io "fsync victim.img (the record goes)" "ok" fsync "$SMNT/victim.img"
	expect_io "root writes more past the end" "ok 65536" \
		pwrite "$SMNT/victim.img" 4259840 65536 32
	expect_io "fsync victim.img" "ok" fsync "$SMNT/victim.img"
	dioloop_umount "$SMNT"
	daemon_wait "$PID"
	expect_eq "victim.img grew" 4325376 "$(stat -c %s "$SSRC/victim.img")"
	expect_ok "the user links the old record back as victim.img's" \
		as_user_link "$SSRC/own/kept" "$SSRC/.victim.img.dioloop-orphan"
	expect_ok "and removes their own name of it (one link left)" \
		as_user rm -f "$SSRC/own/kept"
	start_daemon "$SSRC" "$SMNT" -o allow_other
	PID=$DAEMON_PID
	expect_eq "victim.img keeps its size" 4325376 "$(stat -c %s "$SMNT/victim.img")"
	expect_io "root's flushed data is still there" "ok same" \
		check "$SSRC/victim.img" 4259840 65536 32
	dioloop_umount "$SMNT"
	daemon_wait "$PID"

	it_log "---- root's cow image outside SOURCE, hard-linked into it"
	mkdir -p "$IT_TMP/host"
	chmod 0755 "$IT_TMP/host"
	must "dioloop create host/vm.cow (root's, 0600, outside SOURCE)" \
		"$DIOLOOP_BIN" create --format cow --size 4M "$IT_TMP/host/vm.cow"
	chmod 0600 "$IT_TMP/host/vm.cow"
	VM_SUM=$(sha "$IT_TMP/host/vm.cow")
	expect_ok "the user links it into SOURCE" \
		as_user_link "$IT_TMP/host/vm.cow" "$SSRC/linked.cow"
	start_daemon "$SSRC" "$SMNT" -o allow_other
	PID=$DAEMON_PID
	ls -l "$SMNT" >/dev/null 2>&1
	expect_eq "root's vm.cow outside SOURCE is not written" "$VM_SUM" \
		"$(sha "$IT_TMP/host/vm.cow")"
	# A POSIX record lock conflicts with the daemon's OFD lock (flock(1)
	# would not: BSD locks never see it).
	expect_eq "an image the daemon serves is locked (the probe sees it)" busy \
		"$(lock_probe "$SSRC/victim.img")"
	expect_eq "root can still take vm.cow for writing" ok \
		"$(lock_probe "$IT_TMP/host/vm.cow")"
	dioloop_umount "$SMNT"
	daemon_wait "$PID"
fi
expect_eq "fs.protected_hardlinks is as it was" "$HARDLINKS_WAS" "$(cat "$HARDLINKS" 2>/dev/null)"

it_log "---- a redirect renamed to another image name"
RSRC=$IT_TMP/rsrc
mkdir -p "$RSRC"
chown "$USER_ID:$GROUP_ID" "$RSRC"
must "dioloop create a.img (root's)" "$DIOLOOP_BIN" create --size 4M "$RSRC/a.img"
start_daemon "$RSRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_ok "migrate a.img" "$DIOLOOP_BIN" migrate "$MNT/a.img" "$DST/a.raw"
expect_io "root writes a.img (to the destination)" "ok 65536" pwrite "$MNT/a.img" 0 65536 41
expect_io "fsync a.img" "ok" fsync "$MNT/a.img"
dioloop_umount "$MNT"
daemon_wait "$PID"
must "the user renames a.img's redirect to c.img's" \
	as_user mv "$RSRC/.a.img.dioloop-redirect" "$RSRC/.c.img.dioloop-redirect"
start_daemon "$RSRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_eq "c.img is not served" "err ENOENT" "$(nodeio open "$MNT/c.img" r 2>&1)"
expect_eq "c.img is not listed" "a.img" "$(names "$MNT")"
dioloop_umount "$MNT"
daemon_wait "$PID"
expect_eq "the destination holds root's write" "ok same" \
	"$(nodeio check "$DST/a.raw" 0 65536 41)"

it_log "---- a symlink into a directory of SOURCE the user cannot enter"
PSRC=$IT_TMP/psrc
mkdir -p "$PSRC/private"
chmod 1777 "$PSRC"
chmod 0700 "$PSRC/private"
must "dioloop create private/hidden.img (root's, 0644 in a 0700 directory)" \
	"$DIOLOOP_BIN" create --size 1M "$PSRC/private/hidden.img"
chmod 0644 "$PSRC/private/hidden.img"
nodeio pwrite "$PSRC/private/hidden.img" 0 65536 71 >/dev/null
expect_eq "the user cannot read private/hidden.img" "err EACCES" \
	"$(user_io pread "$PSRC/private/hidden.img" 0 4096)"
must "the user plants peek.img -> private/hidden.img" as_user ln -s private/hidden.img "$PSRC/peek.img"
start_daemon "$PSRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_match "the user cannot read it through peek.img" "err E[A-Z]+" \
	"$(user_io pread "$MNT/peek.img" 0 4096)"
dioloop_umount "$MNT"
daemon_wait "$PID"

it_log "---- a file planted under the name of a volume of root's cow image"
VSRC=$IT_TMP/vsrc
mkdir -p "$VSRC"
chmod 1777 "$VSRC"
must "dioloop create vm.cow (root's, 0600)" "$DIOLOOP_BIN" create --format cow --size 4M "$VSRC/vm.cow"
chmod 0600 "$VSRC/vm.cow"
plant_volume() { # NAME: the user's raw image with pattern 62
	as_user "$DIOLOOP_BIN" create --size 4M "$VSRC/$1" >/dev/null &&
		user_io pwrite "$VSRC/$1" 0 65536 62 >/dev/null
}
must "the user plants vm.cow@early" plant_volume vm.cow@early
start_daemon "$VSRC" "$MNT" -o allow_other
PID=$DAEMON_PID
expect_io "root writes vm.cow" "ok 65536" pwrite "$MNT/vm.cow" 0 65536 61
# Refusing the snapshot would do too; taking it, its node must serve it.
EARLY=taken
"$DIOLOOP_BIN" snapshot "$MNT/vm.cow" early >/dev/null 2>&1 || EARLY=refused
expect_ok "snapshot vm.cow late" "$DIOLOOP_BIN" snapshot "$MNT/vm.cow" late
expect_io "vm.cow@late is root's snapshot" "ok same" check "$MNT/vm.cow@late" 0 65536 61
must "the user plants vm.cow@late" plant_volume vm.cow@late
if [[ $EARLY == taken ]]; then
	expect_io "vm.cow@early is root's snapshot, not the user's file" "ok same" \
		check "$MNT/vm.cow@early" 0 65536 61
else
	it_ok "a snapshot named after the user's file vm.cow@early is refused"
fi
expect_io "vm.cow@late is still root's snapshot" "ok same" \
	check "$MNT/vm.cow@late" 0 65536 61
dioloop_umount "$MNT"
daemon_wait "$PID"

it_log "---- a stream of new refused names"
FSRC=$IT_TMP/fsrc
mkdir -p "$FSRC"
chown "$USER_ID:$GROUP_ID" "$FSRC"
# flood.py SRC MNT N: N times, a symlink out of SRC under a new name,
# looked up through MNT (refused and logged), then removed.
cat >"$U/flood.py" <<'EOF'
import os, sys
src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pad = "x" * 200
for i in range(n):
    name = "%s%08d.img" % (pad, i)
    os.symlink("/etc/passwd", os.path.join(src, name))
    try:
        os.stat(os.path.join(mnt, name))
    except OSError:
        pass
    os.unlink(os.path.join(src, name))
EOF
rss_kib() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}
if ldd "$DIOLOOP_BIN" 2>/dev/null | grep -q libasan; then
	# ASan's quarantine keeps freed memory: RSS says nothing there.  The
	# normal build's run measures it.
	it_log "not measured: the daemon is built with AddressSanitizer"
else
	start_daemon "$FSRC" "$MNT" -o allow_other
	PID=$DAEMON_PID
	# A first round: the daemon's tables and arenas reach their working
	# size.
	as_user "$IT_PY" "$U/flood.py" "$FSRC" "$MNT" 5000
	RSS0=$(rss_kib "$PID")
	as_user "$IT_PY" "$U/flood.py" "$FSRC" "$MNT" 60000
	RSS1=$(rss_kib "$PID")
	it_log "daemon RSS: $RSS0 KiB, then $RSS1 KiB after 60000 more refused names"
	expect_eq "60000 more refused names grow the daemon by less than 6 MiB" yes \
		"$( ((RSS1 - RSS0 < 6144)) && echo yes || echo no)"
	dioloop_umount "$MNT"
	daemon_wait "$PID"
fi

it_log "---- cow images past the daemon's thread limit"
PIDS_ROOT=/sys/fs/cgroup/pids
[[ -f $PIDS_ROOT/cgroup.procs ]] || PIDS_ROOT=/sys/fs/cgroup
if ! grep -qw pids "$PIDS_ROOT/cgroup.controllers" 2>/dev/null &&
	[[ ! -f $PIDS_ROOT/tasks ]]; then
	it_log "no pids cgroup here: case left out"
elif ! CGROUP=$(mktemp -d "$PIDS_ROOT/dioloop-$IT_NAME.XXXXXX" 2>/dev/null) ||
	[[ ! -f $CGROUP/pids.max ]]; then
	[[ -n $CGROUP ]] && rmdir "$CGROUP" 2>/dev/null
	CGROUP=
	it_log "cannot make a pids cgroup here: case left out"
else
	CSRC=$IT_TMP/csrc
	mkdir -p "$CSRC"
	chown "$USER_ID:$GROUP_ID" "$CSRC"
	must "dioloop create plain.img (the user's raw image)" \
		as_user "$DIOLOOP_BIN" create --size 4M "$CSRC/plain.img"
	# The daemon runs in the cgroup: a wrapper joins it and execs.
	printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" || exit 1\nexec "%s" "$@"\n' \
		"$CGROUP" "$DIOLOOP_BIN" >"$IT_TMP/in-cgroup"
	chmod 0755 "$IT_TMP/in-cgroup"
	REAL_BIN=$DIOLOOP_BIN
	DIOLOOP_BIN=$IT_TMP/in-cgroup
	start_daemon "$CSRC" "$MNT" -o allow_other
	DIOLOOP_BIN=$REAL_BIN
	PID=$DAEMON_PID
	CGROUP_PID=$PID
	expect_io "plain.img is served" "ok 4096" pwrite "$MNT/plain.img" 0 4096 51
	# Room for 8 more threads than it has now; each cow image opened
	# costs one.
	echo $(($(cat "$CGROUP/pids.current") + 8)) >"$CGROUP/pids.max"
	for i in $(seq 1 16); do
		as_user "$DIOLOOP_BIN" create --format cow --size 1M "$CSRC/c$i.img" >/dev/null ||
			it_die "dioloop create c$i.img"
	done
	as_user ls -l "$MNT" >/dev/null 2>&1
	sleep 1
	expect_eq "the daemon still runs" yes "$(pid_alive "$PID" && echo yes || echo no)"
	expect_io "plain.img is still served" "ok same" check "$MNT/plain.img" 0 4096 51
	echo max >"$CGROUP/pids.max"
	if pid_alive "$PID"; then
		dioloop_umount "$MNT"
		daemon_wait "$PID"
	fi
	release_cgroup
	expect_eq "the cgroup is gone" "" "$CGROUP"
fi

it_end
