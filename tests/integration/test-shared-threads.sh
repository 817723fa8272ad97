#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# No shared thread waits, and no thread outlives its job:
#  - 16 copy_file_range calls throttled by their source node's limit
#    (more than the worker threads) wait in the node's queue: an fsync of
#    another, unthrottled node and a `dioloop limit` command still answer
#    within 10 s, and lifting the limit lets the copies finish, right;
#  - 16 fsyncs and discards under a 20 s fault delay hold no thread
#    either: an fsync of another node and a control command still answer
#    within 10 s, and the delayed calls finish after their delay;
#  - a probe that does not answer in 30 s fails the test, which then
#    kills the daemon (by PID) so that the stuck calls end.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "throttled and delayed ops hold no shared thread"

SRC=$IT_TMP/src
DST=$IT_TMP/dst
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$DST"
# The kernel lets one fsync, fallocate or copy into a node reach the
# daemon at a time (the inode lock), so the calls that pile up go to
# many nodes: copies from a.img into c0..c15, fsyncs of f0..f9, discards
# of p0..p5.
NODES="a b $(echo c{0..15} f{0..9} p{0..5})"
for img in $NODES; do
	must "dioloop create --size 4M $img.img" "$DIOLOOP_BIN" create --size 4M "$SRC/$img.img"
done
start_daemon "$SRC" "$MNT"
PID=$DAEMON_PID
# Look every node up now: its image is opened at the first lookup, which
# the calls below then do not wait for.
must "stat every node" stat "$MNT"/*.img

# expect_quick WHAT CMD...: CMD succeeds within 10 s.  Waited for 30 s
# at most (so that the log says how late it is): a call stuck in the
# daemon cannot be killed, so past that the test kills the daemon, which
# ends every call on its mount, and stops.
expect_quick() {
	local what=$1 t0 ms rc=0 pid
	shift
	t0=$(date +%s%N)
	start_helper "$@" >"$IT_TMP/quick.out" 2>&1 </dev/null
	pid=$HELPER_PID
	if ! wait_gone "$pid" 30; then
		it_fail "$what: expected an answer within 10000 ms, got none after 30 s"
		it_log "killing the daemon $PID: nothing else ends the stuck calls"
		kill -KILL "$PID"
		it_die "the mount is stuck"
	fi
	wait "$pid" || rc=$?
	forget_pid "$pid"
	ms=$((($(date +%s%N) - t0) / 1000000))
	if ((rc == 0 && ms <= 10000)); then
		it_ok "$what: answered in $ms ms"
	else
		it_fail "$what: expected an answer within 10000 ms, got exit status $rc after $ms ms"
		it_show "$IT_TMP/quick.out"
	fi
}

# start_call TAG CMD...: a background nodeio call (output in TAG.out,
# TAG.ready made just before the call), its PID added to CALLS and its
# tag to TAGS.
CALLS=()
TAGS=()
start_call() {
	local tag=$1
	shift
	NODEIO_READY=$IT_TMP/$tag.ready start_helper bash -c '"$@" >"$0" 2>&1' \
		"$IT_TMP/$tag.out" "$IT_PY" "$IT_DIR/nodeio.py" "$@"
	CALLS+=("$HELPER_PID")
	TAGS+=("$tag")
}

# calls_on_their_way: wait (up to 60 s) until every call of start_call is
# about to make its syscall, then a second more for it to reach the
# daemon.
calls_on_their_way() {
	local i tag n
	for ((i = 0; i < 600; i++)); do
		n=0
		for tag in "${TAGS[@]}"; do
			[[ -e $IT_TMP/$tag.ready ]] && n=$((n + 1))
		done
		((n == ${#TAGS[@]})) && break
		sleep 0.1
	done
	it_log "$n of ${#TAGS[@]} calls started"
	sleep 1
}

# expect_calls_done WHAT SECONDS: the calls of start_call end within
# SECONDS, each printing a line that starts with "ok".
expect_calls_done() {
	local what=$1 limit=$2 pid tag left bad=0 t0=$SECONDS
	for pid in "${CALLS[@]}"; do
		left=$((limit - (SECONDS - t0)))
		if wait_gone "$pid" $((left > 0 ? left : 1)); then
			wait "$pid" 2>/dev/null
			forget_pid "$pid"
		fi
	done
	for tag in "${TAGS[@]}"; do
		[[ $(head -c 2 "$IT_TMP/$tag.out" 2>/dev/null) == ok ]] || bad=$((bad + 1))
	done
	expect_eq "$what: calls that ended with ok within $limit s" \
		"${#TAGS[@]}" $((${#TAGS[@]} - bad))
	CALLS=()
	TAGS=()
}

# where_calls_wait: where each call of start_call and each thread of the
# daemon waits now (kernel stack and wait channel), to tell a slow machine
# from a request stuck on its way.
where_calls_wait() {
	local pid child tid
	for pid in "${CALLS[@]}"; do
		for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null) "$pid"; do
			[[ -r /proc/$child/stack ]] || continue
			it_log "call $pid/$child ($(tr '\0' ' ' </proc/"$child"/cmdline 2>/dev/null | cut -c1-80)): syscall $(cut -d' ' -f1 /proc/"$child"/syscall 2>/dev/null), wchan $(cat /proc/"$child"/wchan 2>/dev/null)"
			sed 's/^/    | /' /proc/"$child"/stack 2>/dev/null | head -12
		done
	done
	for tid in /proc/"$DAEMON_PID"/task/*; do
		it_log "daemon thread $(cat "$tid"/comm 2>/dev/null): wchan $(cat "$tid"/wchan 2>/dev/null)"
	done
	"$IT_PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); [print("    |", k, json.dumps(v.get("throttle"))) for k, v in d["nodes"].items()]' \
		"$MNT/.dioloop/stats.json" 2>&1 | head -40
}

# queued NODE: requests of the node waiting for its limits now.
queued() {
	"$IT_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["nodes"][sys.argv[2]]["throttle"]["queued"])' \
		"$MNT/.dioloop/stats.json" "$1" 2>&1
}

it_log "---- 16 copies from a.img under its limit"
must "write 4 MiB of a.img" dd if=/dev/urandom of="$MNT/a.img" bs=1M count=4 \
	oflag=direct conv=notrunc status=none
# 4 KiB/s: after the burst, each 1 MiB chunk read waits 256 s.
must "dioloop limit a.img bps=4K" "$DIOLOOP_BIN" limit "$MNT/a.img" bps=4K
for i in {0..15}; do
	start_call "copy$i" copy "$MNT/a.img" $((i % 4))M "$MNT/c$i.img" 0 1M
done
calls_on_their_way
expect_quick "fsync of b.img (no limit) while 16 copies wait for a.img's limit" \
	"$IT_PY" "$IT_DIR/nodeio.py" fsync "$MNT/b.img"
expect_quick "dioloop limit b.img iops=100000 while 16 copies wait for a.img's limit" \
	"$DIOLOOP_BIN" limit "$MNT/b.img" iops=100000
# The first copy's first read went within the burst: the others wait
# (given up to 30 s more to arrive on a slow machine).
for ((i = 0; i < 300; i++)); do
	n=$(queued a.img)
	[[ $n == 15 ]] && break
	sleep 0.1
done
expect_eq "requests waiting in a.img's throttle meanwhile" 15 "$n" ||
	where_calls_wait
expect_quick "dioloop limit a.img bps=off (lift the limit)" \
	"$DIOLOOP_BIN" limit "$MNT/a.img" bps=off
expect_calls_done "throttled copies after the limit was lifted" 15
# mib_sha FILE N: sha256 of MiB N of FILE.
mib_sha() {
	dd if="$1" bs=1M skip="$2" count=1 iflag=direct status=none | sha256sum | cut -d' ' -f1
}
same=0
for i in {0..15}; do
	[[ $(mib_sha "$MNT/a.img" $((i % 4))) == "$(mib_sha "$MNT/c$i.img" 0)" ]] &&
		same=$((same + 1))
done
expect_eq "c0..c15.img that hold the MiB copied from a.img" 16 "$same"

it_log "---- 10 fsyncs and 6 discards under a 20 s fault delay"
for i in {0..9}; do
	must "dioloop fault f$i.img flush delay=20s" \
		"$DIOLOOP_BIN" fault "$MNT/f$i.img" flush delay=20s
	start_call "fsync$i" fsync "$MNT/f$i.img"
done
for i in {0..5}; do
	must "dioloop fault p$i.img discard delay=20s" \
		"$DIOLOOP_BIN" fault "$MNT/p$i.img" discard delay=20s
	start_call "punch$i" fallocate "$MNT/p$i.img" punch 0 4096
done
calls_on_their_way
expect_quick "fsync of b.img while 16 calls sit out a fault delay" \
	"$IT_PY" "$IT_DIR/nodeio.py" fsync "$MNT/b.img"
expect_quick "dioloop limit b.img iops=off while 16 calls sit out a fault delay" \
	"$DIOLOOP_BIN" limit "$MNT/b.img" iops=off
expect_calls_done "delayed fsyncs and discards" 40
for img in f{0..9} p{0..5}; do
	expect_ok "dioloop fault $img.img off" "$DIOLOOP_BIN" fault "$MNT/$img.img" off
done

dioloop_umount "$MNT"
daemon_wait "$PID"
expect_eq "the daemon exits 0 after umount" 0 "$DAEMON_STATUS"
it_end
