#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Bounded resources: the daemon raises its soft limit on open files to
# the hard limit, so 300 images (a few fds each) are served under a soft
# limit of 256, with no thread per node; and a corrupt image that every lookup tries to open again
# is logged once per interval, not once per lookup (any allow_other user
# could flood the log); numbers in options and ctl commands are parsed
# strictly (a negative bps= does not wrap around to a huge rate).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/cowlib.sh"

it_begin "open file limit raised; repeated errors logged with a rate limit"
cow_begin

# ---- 300 images under a soft limit of 256 open files
NIMAGES=300
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < 4 * NIMAGES)); then
	it_log "hard open file limit $hard: too low to serve $NIMAGES images; skipping that case"
else
	mkdir -p many
	for ((i = 0; i < NIMAGES; i++)); do
		printf 'image %05d' "$i" >"many/i$i.img"
		truncate -s 64K "many/i$i.img"
	done
	soft=$(ulimit -Sn)
	ulimit -Sn 256
	start_daemon many "$IT_TMP/mnt-many"
	pid=$DAEMON_PID
	ulimit -Sn "$soft"
	expect_eq "the daemon's soft open file limit is raised to the hard one" \
		"$hard" "$(awk '/^Max open files/ { print $4 }' "/proc/$pid/limits")"
	bad=0
	for ((i = 0; i < NIMAGES; i++)); do
		got=$(dd if="$IT_TMP/mnt-many/i$i.img" bs=4096 count=1 status=none 2>/dev/null |
			head -c 11)
		[[ $got == "$(printf 'image %05d' "$i")" ]] || bad=$((bad + 1))
	done
	expect_eq "every one of the $NIMAGES nodes reads its image's bytes" 0 "$bad"
	# No thread per node: the fault filter on every node starts its
	# delay thread only for a rule with a latency.
	threads=$(find "/proc/$pid/task" -mindepth 1 -maxdepth 1 | wc -l)
	expect_match "the daemon serving $NIMAGES open nodes runs fewer than 64 threads" \
		'[0-9]|[1-5][0-9]|6[0-3]' "$threads"
	fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
	it_log "the daemon serving $NIMAGES open raw nodes: $fds fds, $threads threads"
	dioloop_umount "$IT_TMP/mnt-many"
	daemon_wait "$pid"
fi

# ---- a corrupt image, looked up again and again
mkdir -p corrupt
make_cow "$IT_TMP/corrupt/bad.img" 16M
# Both superblocks' reserved bytes: neither copy is valid any more.
printf 'X' | dd of=corrupt/bad.img bs=1 seek=200 conv=notrunc status=none
printf 'X' | dd of=corrupt/bad.img bs=1 seek=$((4096 + 200)) conv=notrunc status=none
# A good image beside it: a SOURCE with nothing servable is refused.
truncate -s 1M corrupt/good.img
# lookups N: N lookups of bad.img in one process (milliseconds, not N
# process starts).  The daemon logs before it answers the lookup.
lookups() {
	"$IT_PY" -c 'import os, sys
for _ in range(int(sys.argv[2])):
    try:
        os.stat(sys.argv[1])
    except OSError:
        pass' "$IT_TMP/mnt-corrupt/bad.img" "$1"
}
t0=$(date +%s%N)	# the log's 10 s window cannot open before this
start_daemon corrupt "$IT_TMP/mnt-corrupt"
pid=$DAEMON_PID
log=$DAEMON_LOG
lookups 1
first=$(grep -c 'bad.img' "$log")
expect_match "the corrupt image is logged" '[1-9][0-9]*' "$first"
lookups 50
again=$(grep -c 'bad.img' "$log")
ms=$((($(date +%s%N) - t0) / 1000000))
if ((ms < 9500)); then
	expect_eq "50 more lookups of the corrupt image within 10 s ($ms ms) log nothing more" \
		"$first" "$again"
else
	it_log "the mount and 51 lookups took $ms ms, past the log's 10 s window: not checked"
fi
sleep 10
lookups 1
expect_match "after 10 s it is logged again, with how many were dropped" \
	'[1-9][0-9]*' "$(grep -c 'bad.img.*more times since it was last logged' "$log")"
dioloop_umount "$IT_TMP/mnt-corrupt"
daemon_wait "$pid"

# ---- numbers parsed strictly: no sign, no wrap, no exponent
mkdir -p nums mnt-nums
truncate -s 1M nums/a.img
IT_FUSE+=("$IT_TMP/mnt-nums")	# in case it is mounted after all
expect_status "mount -o commit=1e3 (an exponent) is refused" 2 \
	"$DIOLOOP_BIN" mount -o commit=1e3 nums "$IT_TMP/mnt-nums"
if is_mount "$IT_TMP/mnt-nums"; then
	it_fail "mount -o commit=1e3: expected nothing mounted, got a mount"
	fusermount3 -u "$IT_TMP/mnt-nums"
fi
forget_mount "$IT_TMP/mnt-nums"
start_daemon nums "$IT_TMP/mnt-nums"
pid=$DAEMON_PID
expect_eq "ctl 'migrate ... bps=-5' is refused (no unsigned wrap)" EINVAL \
	"$(ctl_errno "$IT_TMP/mnt-nums" "migrate a.img $IT_TMP/nums-dest.img bps=-5")"
sleep 0.5
expect_eq "no migration started: no destination image" no \
	"$([[ -e $IT_TMP/nums-dest.img ]] && echo yes || echo no)"
dioloop_umount "$IT_TMP/mnt-nums"
daemon_wait "$pid"

it_end
