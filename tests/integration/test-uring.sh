#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# -o transport=uring: FUSE over io_uring.  With the fuse module's
# enable_uring on (set for the test, put back as it was on every way out):
# fio verify=crc32c at QD1 and QD32 on a node, mkfs.ext4 and fsck through a
# loop device with direct I/O; the requests really come through the rings
# (the daemon's log says so at mount, and stats --json counts at least
# every fio I/O as a ring request).  With enable_uring off, transport=uring
# refuses in one line and transport=auto serves through /dev/fuse.
# Skipped where the kernel's fuse has no io_uring support.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "FUSE over io_uring (-o transport=uring)" fio jq mkfs.ext4 e2fsck

mkdir -p "$IT_TMP/bad-src" "$IT_TMP/bad-mnt"
expect_status "transport=bogus is a usage error" 2 \
	"$DIOLOOP_BIN" mount -o transport=bogus "$IT_TMP/bad-src" "$IT_TMP/bad-mnt"
expect_eq "transport=bogus: one line, naming the choices" \
	"dioloop: mount: bad transport 'bogus': dev, uring or auto" \
	"$(cat "$IT_TMP/last.out")"

URING_PARAM=/sys/module/fuse/parameters/enable_uring
[[ -e $URING_PARAM ]] || it_skip "this kernel's fuse has no io_uring support (no $URING_PARAM)"
URING_OLD=$(cat "$URING_PARAM") || it_die "cannot read $URING_PARAM"

# enable_uring as it was, on every exit path (before lib.sh's cleanup, which
# exits; a mount that took io_uring keeps it).
uring_restore() {
	[[ $(cat "$URING_PARAM" 2>/dev/null) == "$URING_OLD" ]] && return
	echo "$URING_OLD" >"$URING_PARAM" ||
		it_log "cleanup: cannot put $URING_PARAM back to $URING_OLD"
}
trap 'rc=$?; uring_restore; (exit $rc); it_cleanup' EXIT

# uring_stat MNT KEY: the daemon's stats --json .transport.KEY
uring_stat() {
	"$DIOLOOP_BIN" stats --json "$1" | jq -r ".transport.$2"
}

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT" "$IT_TMP/mnt-off"
must "dioloop create --size 128M node.img" "$DIOLOOP_BIN" create --size 128M "$SRC/node.img"
must "dioloop create --size 128M fs.img" "$DIOLOOP_BIN" create --size 128M "$SRC/fs.img"

# Off: one line, no mount.
echo N >"$URING_PARAM" || it_die "cannot write $URING_PARAM"
rc=0
"$DIOLOOP_BIN" mount -o transport=uring "$SRC" "$IT_TMP/mnt-off" \
	>"$IT_TMP/off.out" 2>&1 </dev/null || rc=$?
# Mounted after all: unmounted by the cleanup.
[[ $rc -ne 0 ]] || IT_FUSE+=("$IT_TMP/mnt-off")
expect_eq "transport=uring with enable_uring=N: exit status" 1 "$rc"
expect_eq "transport=uring with enable_uring=N: lines of output" 1 \
	"$(wc -l <"$IT_TMP/off.out")"
expect_match "transport=uring with enable_uring=N: says why" \
	'.*transport=uring: .*enable_uring.*' "$(cat "$IT_TMP/off.out")"
expect_eq "transport=uring with enable_uring=N: not mounted" no \
	"$(is_mount "$IT_TMP/mnt-off" && echo yes || echo no)"

start_daemon "$SRC" "$MNT" -o transport=auto
expect_eq "transport=auto with enable_uring=N: serves through /dev/fuse" dev \
	"$(uring_stat "$MNT" name)"
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
DIOLOOP_IT_TRANSPORT='' start_daemon "$SRC" "$MNT"
expect_eq "no transport option with enable_uring=N: /dev/fuse" dev \
	"$(uring_stat "$MNT" name)"
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"

# On.
echo Y >"$URING_PARAM" || it_die "cannot write $URING_PARAM"
start_daemon "$SRC" "$MNT" -o transport=uring
log=$DAEMON_LOG
NODE=$MNT/node.img
expect_eq "transport=uring: stats say uring" uring "$(uring_stat "$MNT" name)"
expect_match "transport=uring: the daemon's log says so at mount" \
	'.*transport: uring \([0-9]+ queues.*' "$(cat "$log")"

before=$(uring_stat "$MNT" uring_requests)
handed_before=$(uring_stat "$MNT" uring_replies_handed)
lent_before=$(uring_stat "$MNT" uring_payloads_lent)
run_fio_verify "node, QD1, 4k" --name=qd1 --filename="$NODE" --rw=randwrite \
	--bs=4k --iodepth=1 --size=16M
after=$(uring_stat "$MNT" uring_requests)
handed=$(($(uring_stat "$MNT" uring_replies_handed) - handed_before))
lent=$(($(uring_stat "$MNT" uring_payloads_lent) - lent_before))
# 4096 writes and 4096 verify reads.
if ((after - before >= 8192)); then
	it_ok "QD1: every fio I/O came through a ring ($((after - before)) ring requests)"
else
	it_fail "QD1: expected at least 8192 ring requests, got $((after - before))"
fi
# The queue's thread reaps its own backend completions and replies on the
# spot: no reply of a read or write is handed over by another thread (a
# few other requests, such as a flush from the worker pool, may be).
if ((handed <= 16)); then
	it_ok "QD1: replies made on the ring's own thread ($handed of $((after - before)) handed over)"
else
	it_fail "QD1: expected the ring's thread to reply to its reads and writes, got $handed of $((after - before)) replies handed over by another thread"
fi
# Each read lands in, and each write goes out of, the ring's own buffer.
if ((lent >= 8192)); then
	it_ok "QD1: the I/O used the rings' buffers, no copy ($lent of $((after - before)) requests)"
else
	it_fail "QD1: expected fio's 8192 reads and writes to use the rings' buffers, got $lent"
fi
run_fio_verify "node, QD32, 4k-256k" --name=qd32 --filename="$NODE" --rw=randwrite \
	--bsrange=4k-256k --iodepth=32 --size=64M
expect_same_bytes "node.img after fio: node vs image" "$NODE" "$SRC/node.img"

attach_loop "$MNT/fs.img"
LOOP=$LOOP_DEV
before=$(uring_stat "$MNT" uring_requests)
must "mkfs.ext4 on $LOOP" mkfs_fs ext4 "$LOOP"
expect_ok "fsck of ext4 on $LOOP is clean" fsck_fs ext4 "$LOOP"
after=$(uring_stat "$MNT" uring_requests)
if ((after > before)); then
	it_ok "mkfs and fsck went through the rings ($((after - before)) ring requests)"
else
	it_fail "mkfs and fsck: expected ring requests, got $((after - before))"
fi
detach_loop "$LOOP"
expect_ok "fsck of ext4 on the image after detach is clean" fsck_fs ext4 "$SRC/fs.img"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

# No transport option: auto, which takes io_uring when the module allows.
DIOLOOP_IT_TRANSPORT='' start_daemon "$SRC" "$MNT"
expect_eq "no transport option with enable_uring=Y: uring (auto is the default)" uring \
	"$(uring_stat "$MNT" name)"
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"

uring_restore
expect_eq "enable_uring put back" "$URING_OLD" "$(cat "$URING_PARAM")"
it_end
