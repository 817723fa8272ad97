#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Fitting the system: mount(8) -t fuse.dioloop goes through mount.fuse3,
# which runs "dioloop SOURCE MOUNTPOINT -o OPTS" (by name); an
# /etc/fstab line (here a private fstab file, mount -T) mounts the same
# way, with the options an fstab line carries (_netdev, nofail, x-...);
# umount(8) unmounts and the daemon exits after flushing.  A bad option
# fails the mount with one line naming it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "mount -t fuse.dioloop through mount.fuse3, fstab, umount" mount umount mount.fuse3 jq

# mount.fuse3 runs the file system's program by name through /bin/sh,
# and mount(8) clears PATH before it runs mount.fuse3: the shell's default
# path finds it (/usr/local/sbin first; cmake --install puts dioloop in
# /usr/local/bin).  So this build's binary goes in /usr/local/sbin for the
# test's duration, unless another dioloop is there already.
[[ $(basename "$DIOLOOP_BIN") == dioloop ]] ||
	it_die "DIOLOOP_BIN must be a file named dioloop (mount.fuse3 runs it by name), got $DIOLOOP_BIN"
LINK=/usr/local/sbin/dioloop
if [[ -L $LINK && ! -e $LINK ]]; then
	rm -f "$LINK"	# dangling: left by an interrupted run
fi
if [[ -e $LINK || -L $LINK ]]; then
	[[ $(readlink -f "$LINK") == "$(readlink -f "$DIOLOOP_BIN")" ]] ||
		it_skip "$LINK exists and is not this build's dioloop: mount(8) would run it"
else
	mkdir -p /usr/local/sbin
	ln -s "$DIOLOOP_BIN" "$LINK" || it_die "cannot link $LINK to $DIOLOOP_BIN"
	trap 'rc=$?; rm -f "$LINK"; (exit $rc); it_cleanup' EXIT
fi

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
must "dioloop create --size 8M disk0.img" "$DIOLOOP_BIN" create --size 8M "$SRC/disk0.img"

# mounted_daemon: after a mount through the helper, record the mount and
# the daemon's PID (from stats.json) for cleanup; sets DPID.
mounted_daemon() {
	DPID=
	if is_mount "$MNT"; then
		IT_FUSE+=("$MNT")
		DPID=$(jq -r .pid "$MNT/.dioloop/stats.json" 2>/dev/null)
		[[ $DPID =~ ^[0-9]+$ ]] && IT_PIDS+=("$DPID")
	fi
}

# unmount_helper_mount WHAT: umount(8), then the daemon exits by itself.
unmount_helper_mount() {
	expect_ok "$1: umount $MNT" umount "$MNT"
	forget_mount "$MNT"
	if [[ -n $DPID ]] && wait_gone "$DPID" 15; then
		it_ok "$1: the daemon (PID $DPID) exited after umount"
		forget_pid "$DPID"
	else
		it_fail "$1: expected the daemon ${DPID:-?} to exit after umount"
	fi
}

it_log "---- mount -t fuse.dioloop"
expect_ok "mount -t fuse.dioloop SRC MNT -o iops=800,allow_other,_netdev,nofail" \
	mount -t fuse.dioloop "$SRC" "$MNT" -o iops=800,allow_other,_netdev,nofail
mounted_daemon
expect_eq "the mount's type in /proc/mounts" fuse.dioloop \
	"$(awk -v d="$MNT" '$2 == d { print $3 }' /proc/self/mounts)"
expect_eq "the mount's source in /proc/mounts" "dioloop:$SRC" \
	"$(awk -v d="$MNT" '$2 == d { print $1 }' /proc/self/mounts)"
expect_eq "the option reached the daemon (iops of disk0.img)" 800 \
	"$(jq '.nodes["disk0.img"].throttle.limits.iops' "$MNT/.dioloop/stats.json")"
expect_io "a write through the node" "ok 65536" pwrite "$MNT/disk0.img" 0 65536 11
unmount_helper_mount "mount -t"
expect_io "after umount, the image holds the write" "ok same" check "$SRC/disk0.img" 0 65536 11

it_log "---- an fstab line"
cat >"$IT_TMP/fstab" <<EOF
# as in /etc/fstab
$SRC  $MNT  fuse.dioloop  defaults,_netdev,nofail,x-systemd.after=network-online.target,write_bps=64M  0  0
EOF
expect_ok "mount -T FSTAB MNT (the fstab line)" mount -T "$IT_TMP/fstab" "$MNT"
mounted_daemon
expect_eq "the fstab options reached the daemon (write_bps of disk0.img)" $((64 << 20)) \
	"$(jq '.nodes["disk0.img"].throttle.limits.write_bps' "$MNT/.dioloop/stats.json")"
expect_io "a read through the node" "ok same" check "$MNT/disk0.img" 0 65536 11
unmount_helper_mount "fstab"

it_log "---- a bad option fails the mount, in one line"
rc=0
mount -t fuse.dioloop "$SRC" "$MNT" -o iops=fast >"$IT_TMP/bad.out" 2>&1 || rc=$?
mounted_daemon
if ((rc != 0)) && ! is_mount "$MNT"; then
	it_ok "mount -o iops=fast fails (exit status $rc) and mounts nothing"
else
	it_fail "mount -o iops=fast: expected a failure and no mount, got exit status $rc"
fi
expect_match "its message names the bad value" "dioloop: mount: bad value 'fast' for iops.*" \
	"$(head -n 1 "$IT_TMP/bad.out")"

it_end
