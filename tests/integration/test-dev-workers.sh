#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# -o transport=dev: each FUSE worker reaps the backend completions of the
# reads and writes it started and replies to them itself (no hand-over to
# the completion thread).  fio verify at QD1, and at QD32 with 4 jobs and
# 4k-256k blocks, on a node: every fio read and write at QD1 was completed
# by a worker (stats --json counts them).  Then the connection is aborted
# (/sys/fs/fuse/connections/N/abort) under QD32 writes: the workers end
# with I/O of their own in flight, which they must still complete; the
# daemon exits, and a new daemon serves the image with fio verify.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "FUSE workers reap their own completions (-o transport=dev)" fio jq

# dev_stat MNT KEY: the daemon's stats --json .transport.KEY
dev_stat() {
	"$DIOLOOP_BIN" stats --json "$1" | jq -r ".transport.$2"
}

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
must "dioloop create --size 128M node.img" "$DIOLOOP_BIN" create --size 128M "$SRC/node.img"
NODE=$MNT/node.img

start_daemon "$SRC" "$MNT" -o transport=dev
expect_eq "transport=dev: stats say dev" dev "$(dev_stat "$MNT" name)"

before=$(dev_stat "$MNT" dev_completions_reaped)
run_fio_verify "node, QD1, 4k" --name=qd1 --filename="$NODE" --rw=randwrite \
	--bs=4k --iodepth=1 --size=16M
reaped=$(($(dev_stat "$MNT" dev_completions_reaped) - before))
# 4096 writes and 4096 verify reads, each one backend I/O of the raw node.
if ((reaped >= 8192)); then
	it_ok "QD1: the workers completed every fio I/O themselves ($reaped completions)"
else
	it_fail "QD1: expected the workers to reap at least 8192 completions (fio's reads and writes), got $reaped"
fi
workers=$(dev_stat "$MNT" dev_workers_reaping)
if ((workers >= 1)); then
	it_ok "the workers that served the I/O reap their own completions ($workers)"
else
	it_fail "expected at least one worker reaping its own completions, got $workers"
fi
run_fio_verify "node, QD32, 4 jobs, 4k-256k" --name=qd32 --filename="$NODE" \
	--rw=randwrite --bsrange=4k-256k --iodepth=32 --numjobs=4 \
	--size=16M --offset_increment=16M
expect_same_bytes "node.img after fio: node vs image" "$NODE" "$SRC/node.img"

# Abort the connection under QD32 writes: every worker stops reading, some
# with writes of their own still in flight in the backend.
# fusectl mounted for the test if it is not (unmounted by the cleanup).
CONNS=/sys/fs/fuse/connections
if ! is_mount "$CONNS"; then
	must "mount fusectl on $CONNS" mount -t fusectl fusectl "$CONNS"
	IT_INNER+=("$CONNS")
fi
conn=$CONNS/$(stat -c %d "$MNT")
[[ -e $conn/abort ]] || it_die "no $conn/abort"
daemon=$DAEMON_PID
start_helper timeout -k 5 120 fio --name=busy --filename="$NODE" --direct=1 \
	--ioengine=libaio --rw=randwrite --bs=4k --iodepth=32 --size=64M \
	--time_based --runtime=60 --output="$IT_TMP/busy.out" 2>"$IT_TMP/busy.err"
busy=$HELPER_PID
# Until the workers have served some of fio's writes.
base=$(dev_stat "$MNT" dev_completions_reaped)
for ((i = 0; i < 100; i++)); do
	(($(dev_stat "$MNT" dev_completions_reaped) - base >= 1000)) && break
	sleep 0.1
done
echo 1 >"$conn/abort" || it_die "cannot write $conn/abort"
daemon_wait "$daemon"
if [[ $DAEMON_STATUS == running ]]; then
	it_fail "after the connection was aborted under QD32 writes: expected the daemon to exit within 60 s, it still runs"
else
	it_ok "after the connection was aborted under QD32 writes, the daemon exited (status $DAEMON_STATUS)"
fi
wait_gone "$busy" 30 || kill -KILL "$busy" 2>/dev/null
wait "$busy" 2>/dev/null
forget_pid "$busy"
# The aborted mount is left for us to unmount.
if is_mount "$MNT"; then
	expect_ok "umount of the aborted mount" umount "$MNT"
fi
forget_mount "$MNT"

start_daemon "$SRC" "$MNT" -o transport=dev
run_fio_verify "node after the abort, QD32, 4k" --name=after --filename="$NODE" \
	--rw=randwrite --bs=4k --iodepth=32 --size=16M
expect_same_bytes "node.img after the abort and fio: node vs image" "$NODE" "$SRC/node.img"
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
expect_eq "the daemon exits 0 after umount" 0 "$DAEMON_STATUS"

it_end
