#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Throttling, measured with fio and with the daemon's own counters:
#  - fio 4k randread at QD32 on a node limited to 500 IOPS (-o iops=500)
#    measures 500 +- 10% over 10 s, and no request fails;
#  - two busy nodes under one total_bps (set at run time) each get half
#    +- 15%;
#  - a limit changed at run time (dioloop limit) takes effect within a
#    second, up and down, while fio keeps running without an error;
#  - high limits hold: an IOPS limit (20,000, or half of what the node
#    does unthrottled if that is less) on 4k randread QD32 and on 4k
#    randread QD1, and a bandwidth limit (200 MiB/s, or half) on 128k
#    randwrite QD8, each delivered at 80%..110% of the limit over 4 s
#    after a second of ramp (the burst is not counted);
#  - a limit ten times what the node does unthrottled leaves it at least
#    70% of its unthrottled rate (4k randread QD32);
#  - buffered writes through the page cache (-o cache) are throttled too.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "throttling: IOPS and bandwidth limits, fair share, run-time changes" fio jq

M=$((1 << 20))
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
for img in r a b w h; do
	must "dioloop create --size 64M $img.img" "$DIOLOOP_BIN" create --size 64M "$SRC/$img.img"
done
start_daemon "$SRC" "$MNT" -o iops=500
STATS=$MNT/.dioloop/stats.json

# stat_of NODE JQ-PATH: one counter of the node from stats.json.
stat_of() {
	jq -r --arg n "$1" ".nodes[\$n]$2" "$STATS"
}

# fio_json WHAT OUT FIO-ARGS...: run fio with JSON output, checked for
# exit status 0 and err=0 in every job (a throttled request never fails).
fio_json() {
	local what=$1 out=$2 rc=0
	shift 2
	timeout -k 10 120 fio --output-format=json --output="$out" \
		--ioengine=libaio --direct=1 "$@" </dev/null >"$out.log" 2>&1 || rc=$?
	if ((rc != 0)); then
		it_fail "fio $what: expected exit status 0, got $rc"
		it_show "$out.log"
		it_show "$out"
		return 1
	fi
	expect_eq "fio $what: every job ends with err=0" 0 \
		"$(jq '[.jobs[].error] | add' "$out")"
}

# within WHAT WANT PCT GOT: GOT is WANT +- PCT percent.
within() {
	local what=$1 want=$2 pct=$3 got=$4
	if awk -v g="$got" -v w="$want" -v p="$pct" \
		'BEGIN { exit !(g >= w * (1 - p / 100) && g <= w * (1 + p / 100)) }'; then
		it_ok "$what: $got (want $want +- $pct%)"
	else
		it_fail "$what: expected $want +- $pct%, got $got"
	fi
}

it_log "---- 500 IOPS: fio 4k randread QD32 for 10 s"
expect_eq "limit of r.img from -o iops=500" 500 "$(stat_of r.img .throttle.limits.iops)"
if fio_json "randread QD32 under iops=500" "$IT_TMP/iops.json" --name=qd32 \
	--filename="$MNT/r.img" --rw=randread --bs=4k --iodepth=32 \
	--runtime=10 --time_based; then
	iops=$(jq '.jobs[0].read.iops' "$IT_TMP/iops.json")
	ios=$(jq '.jobs[0].read.total_ios' "$IT_TMP/iops.json")
	it_log "fio measured $iops IOPS ($ios reads in 10 s)"
	within "IOPS fio measured on a node limited to 500" 500 10 "$iops"
	reads=$(stat_of r.img .ops.read)
	if ((reads >= ios)); then
		it_ok "the daemon counted $reads reads of r.img, at least fio's $ios"
	else
		it_fail "the daemon counted reads of r.img: expected at least fio's $ios, got $reads"
	fi
	throttled=$(stat_of r.img .throttle.throttled)
	if ((throttled > ios / 2)); then
		it_ok "most reads waited for the limit: $throttled throttled"
	else
		it_fail "reads throttled: expected more than $((ios / 2)), got $throttled"
	fi
	expect_eq "errors on r.img" 0 "$(stat_of r.img .errors_total)"
fi

it_log "---- total_bps shared by two busy nodes"
must "dioloop limit MNT iops=0 total_bps=16M" "$DIOLOOP_BIN" limit "$MNT" iops=0 total_bps=16M
expect_eq "total_bps in stats.json after dioloop limit" $((16 * M)) "$(jq .limits.total_bps "$STATS")"
expect_eq "iops of a.img after dioloop limit MNT iops=0" 0 "$(stat_of a.img .throttle.limits.iops)"
if fio_json "two nodes, randread 64k QD16 each, 5 s" "$IT_TMP/share.json" \
	--rw=randread --bs=64k --iodepth=16 --runtime=5 --ramp_time=1 \
	--time_based --name=a --filename="$MNT/a.img" --name=b \
	--filename="$MNT/b.img"; then
	bw_a=$(jq '.jobs[0].read.bw_bytes' "$IT_TMP/share.json")
	bw_b=$(jq '.jobs[1].read.bw_bytes' "$IT_TMP/share.json")
	it_log "fio measured a.img $bw_a B/s, b.img $bw_b B/s under total_bps=16M"
	within "a.img's share of total_bps=16M (half)" $((8 * M)) 15 "$bw_a"
	within "b.img's share of total_bps=16M (half)" $((8 * M)) 15 "$bw_b"
	within "both together (total_bps=16M)" $((16 * M)) 10 $((bw_a + bw_b))
fi
must "dioloop limit MNT total_bps=0" "$DIOLOOP_BIN" limit "$MNT" total_bps=0

it_log "---- a limit changed at run time takes effect within a second"
must "dioloop limit MNT/w.img iops=200" "$DIOLOOP_BIN" limit "$MNT/w.img" iops=200
reads0=$(stat_of w.img .ops.read)
start_helper fio --output-format=json --output="$IT_TMP/change.json" \
	--ioengine=libaio --direct=1 --name=change --filename="$MNT/w.img" \
	--rw=randread --bs=4k --iodepth=32 --runtime=12 --time_based
FIO_PID=$HELPER_PID

# rate_over SECONDS: reads of w.img per second over the next SECONDS,
# time and count from the same snapshots (the daemon's uptime_s), so the
# time it takes to start jq is not in the rate.
snap() { jq -r '"\(.uptime_s) \(.nodes["w.img"].ops.read)"' "$STATS"; }
rate_over() {
	local a b
	a=$(snap)
	sleep "$1"
	b=$(snap)
	awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ")
		printf "%.0f", (y[2] - x[2]) / (y[1] - x[1]) }'
}

# fio is reading (a second's worth under the limit), whatever its start took.
for ((i = 0; i < 300; i++)); do (($(stat_of w.img .ops.read) >= reads0 + 200)) && break; sleep 0.1; done
within "read rate of w.img under iops=200 (1 s)" 200 15 "$(rate_over 1)"
must "dioloop limit MNT/w.img iops=1000" "$DIOLOOP_BIN" limit "$MNT/w.img" iops=1000
sleep 0.25
within "read rate of w.img from 0.25 s to 1 s after raising to iops=1000" 1000 15 "$(rate_over 0.75)"
must "dioloop limit MNT/w.img iops=200" "$DIOLOOP_BIN" limit "$MNT/w.img" iops=200
sleep 0.25
within "read rate of w.img from 0.25 s to 1 s after lowering to iops=200" 200 15 "$(rate_over 0.75)"
if wait "$FIO_PID"; then
	it_ok "fio across the limit changes: exit status 0"
	expect_eq "fio across the limit changes: err=0" 0 "$(jq '.jobs[0].error' "$IT_TMP/change.json")"
else
	it_fail "fio across the limit changes: expected exit status 0, got $?"
fi
forget_pid "$FIO_PID"
expect_eq "errors on w.img" 0 "$(stat_of w.img .errors_total)"

it_log "---- high limits: the rate holds far above 1,000 requests a second"
H=$MNT/h.img
expect_eq "h.img has no limit (mount default lifted)" 0 "$(stat_of h.img .throttle.limits.iops)"

# rate_of WHAT KEY FIO-ARGS...: fio on h.img for 4 s after 1 s of ramp;
# prints the job's KEY (iops or bw_bytes) of its direction, or nothing.
rate_of() {
	local what=$1 key=$2 out=$IT_TMP/high.json
	shift 2
	fio_json "$what" "$out" --name=high --filename="$H" --ramp_time=1 \
		--runtime=4 --time_based "$@" >/dev/null || return 0
	jq -r "[.jobs[0].read.$key, .jobs[0].write.$key] | max | floor" "$out"
}

# high_limit WHAT KEY LIMIT-KEY WANT FIO-ARGS...: measure h.img without a
# limit, set LIMIT-KEY to WANT or half the unthrottled rate if that is
# less (a slow host cannot deliver more than it does), and check fio gets
# 80%..110% of it.
high_limit() {
	local what=$1 key=$2 lkey=$3 want=$4 free lim got
	shift 4
	must "dioloop limit MNT/h.img $lkey=0" "$DIOLOOP_BIN" limit "$H" "$lkey=0"
	free=$(rate_of "$what, unthrottled" "$key" "$@")
	[[ -n $free ]] || return 0
	lim=$(( free / 2 < want ? free / 2 : want ))
	it_log "$what: $free unthrottled, limit $lkey=$lim"
	must "dioloop limit MNT/h.img $lkey=$lim" "$DIOLOOP_BIN" limit "$H" "$lkey=$lim"
	got=$(rate_of "$what under $lkey=$lim" "$key" "$@")
	[[ -n $got ]] || return 0
	if awk -v g="$got" -v l="$lim" 'BEGIN { exit !(g >= 0.8 * l && g <= 1.1 * l) }'; then
		it_ok "$what under $lkey=$lim: $got (80%..110% of the limit)"
	else
		it_fail "$what under $lkey=$lim: expected 80%..110% of the limit, got $got"
	fi
	must "dioloop limit MNT/h.img $lkey=0" "$DIOLOOP_BIN" limit "$H" "$lkey=0"
}

high_limit "4k randread QD32" iops iops 20000 --rw=randread --bs=4k --iodepth=32

# A limit above what the node does must not cost it any rate: ten times
# the unthrottled rate, measured between two unthrottled runs, delivers
# at least 70% of the lower of them (their spread on a busy machine is up
# to 15%; a throttle that capped the rate, as one that could not pace
# above 1,000 requests a second did, delivers a small fraction).
over_limit() {
	local free1 free2 lim got floor
	must "dioloop limit MNT/h.img iops=0" "$DIOLOOP_BIN" limit "$H" iops=0
	free1=$(rate_of "4k randread QD32, unthrottled" iops --rw=randread --bs=4k --iodepth=32)
	[[ -n $free1 ]] || return 0
	lim=$((10 * free1))
	must "dioloop limit MNT/h.img iops=$lim" "$DIOLOOP_BIN" limit "$H" "iops=$lim"
	got=$(rate_of "4k randread QD32 under iops=$lim" iops --rw=randread --bs=4k --iodepth=32)
	must "dioloop limit MNT/h.img iops=0" "$DIOLOOP_BIN" limit "$H" iops=0
	free2=$(rate_of "4k randread QD32, unthrottled again" iops --rw=randread --bs=4k --iodepth=32)
	[[ -n $got && -n $free2 ]] || return 0
	floor=$(( (free1 < free2 ? free1 : free2) * 7 / 10 ))
	if ((got >= floor)); then
		it_ok "4k randread QD32 under iops=$lim (10x unthrottled): $got, unthrottled $free1 and $free2"
	else
		it_fail "4k randread QD32 under iops=$lim (10x unthrottled): expected at least $floor (70% of unthrottled $free1, $free2), got $got"
	fi
}
over_limit
high_limit "4k randread QD1" iops read_iops 20000 --rw=randread --bs=4k --iodepth=1
high_limit "128k randwrite QD8" bw_bytes write_bps $((200 * M)) \
	--rw=randwrite --bs=128k --iodepth=8
expect_eq "errors on h.img" 0 "$(stat_of h.img .errors_total)"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_log "---- buffered writes through the page cache are throttled too"
CMNT=$IT_TMP/cmnt
start_daemon "$SRC" "$CMNT" -o cache,write_bps=1M,burst_ms=100
head -c $((4 * M)) /dev/urandom >"$IT_TMP/payload"
t0=$(date +%s.%N)
must "buffered dd of 4 MiB to w.img, then fsync" dd if="$IT_TMP/payload" of="$CMNT/w.img" \
	bs=1M conv=notrunc,fsync status=none
took=$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
# The first write (up to 1 MiB) goes at once into debt, the burst is
# 100 KiB: the rest takes at least 2.9 s at 1 MiB/s.
if awk -v t="$took" 'BEGIN { exit !(t >= 2.8 && t < 12) }'; then
	it_ok "4 MiB of buffered writes under write_bps=1M took ${took}s (>= 2.8 s)"
else
	it_fail "4 MiB of buffered writes under write_bps=1M: expected 2.8 s to 12 s, took ${took}s"
fi
expect_eq "the daemon throttled those writes" yes \
	"$(jq -r '.nodes["w.img"].throttle.throttled > 0 | if . then "yes" else "no" end' \
		"$CMNT/.dioloop/stats.json")"
daemon=$DAEMON_PID
dioloop_umount "$CMNT"
daemon_wait "$daemon"
expect_eq "the image holds the buffered writes" "$(sha "$IT_TMP/payload")" \
	"$(head -c $((4 * M)) "$SRC/w.img" | sha256sum | cut -d' ' -f1)"

it_end
