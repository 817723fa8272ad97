#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Synchronous direct writers of one node are served in parallel, as by a
# block device: four processes each write 4 KiB (plain pwrite; a node is a
# direct-I/O file) under a 10 s fault delay on writes, and the daemon sees
# all four writes in flight at once.  Without FOPEN_PARALLEL_DIRECT_WRITES
# in the open reply the kernel holds the node's inode lock across each
# write, so the daemon sees one at a time.  Then the data reads back.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "parallel direct writes of one node" jq

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
STATS=$MNT/.dioloop/stats.json
WRITERS=4
mkdir -p "$SRC"
must "dioloop create --size 16M w.img" "$DIOLOOP_BIN" create --size 16M "$SRC/w.img"
start_daemon "$SRC" "$MNT"
must "stat the node" stat "$MNT/w.img"
# 10 s per write: far longer than the four writers take to start, on any
# machine.
must "dioloop fault w.img write delay=10s" "$DIOLOOP_BIN" fault "$MNT/w.img" write delay=10s

WPIDS=()
for ((i = 0; i < WRITERS; i++)); do
	start_helper bash -c '"$@" >"$0" 2>&1' "$IT_TMP/w$i.out" \
		"$IT_PY" "$IT_DIR/nodeio.py" pwrite "$MNT/w.img" $((i * 65536)) 4096 $((i + 1))
	WPIDS+=("$HELPER_PID")
done
# The most writes the daemon had in flight at once, sampled until all
# four are seen or every writer is done (each write takes 10 s in the
# daemon; with one at a time, the four take 40 s).
max=0
for ((n = 0; n < 900; n++)); do
	cur=$(jq -r '.nodes["w.img"].in_flight' "$STATS" 2>/dev/null) || cur=0
	((cur > max)) && max=$cur
	((max >= WRITERS)) && break
	busy=0
	for p in "${WPIDS[@]}"; do
		pid_alive "$p" && busy=1
	done
	((busy)) || break
	sleep 0.1
done
for p in "${WPIDS[@]}"; do
	wait "$p" || true
	forget_pid "$p"
done
expect_eq "writes of w.img in flight at once (most seen)" "$WRITERS" "$max"
must "dioloop fault w.img off" "$DIOLOOP_BIN" fault "$MNT/w.img" off
for ((i = 0; i < WRITERS; i++)); do
	expect_eq "writer $i" "ok 4096" "$(cat "$IT_TMP/w$i.out")"
	expect_io "writer $i's data reads back" "ok same" check "$MNT/w.img" $((i * 65536)) 4096 $((i + 1))
done

it_end
