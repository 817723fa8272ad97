#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The control file takes commands in parallel: while a scrub of a large
# cow image runs (its command waits for the scrub), a `dioloop limit` on
# another node, `dioloop migrate --status` and `dioloop stats --watch`
# (which shows the scrub's progress) answer at once.  Before,
# each control write held the control file's inode lock until its reply,
# so every command on the mount waited for the scrub to end.
# The order is checked, not a time: the commands must return while the
# scrub is still running (its process alive, stats.json saying so).  The
# scrub is held to 16 MiB/s (`scrub --rate`) so that it lasts 16 s however
# fast the machine reads (unlimited, 1 GiB took 0.8 s, less than three
# commands of an ASan build); a limited scrub takes at least its size over
# its rate, online and offline, and a bad rate is refused in one line.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "control commands answer while a scrub runs" jq

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC"
must "create big.img (cow, 256M)" "$DIOLOOP_BIN" create --format cow --size 256M "$SRC/big.img"
must "create other.img" "$DIOLOOP_BIN" create --size 4M "$SRC/other.img"
start_daemon "$SRC" "$MNT"
must "fill big.img through its node" \
	dd if=/dev/urandom of="$MNT/big.img" bs=1M count=256 oflag=direct conv=notrunc,fsync status=none

scrub_running() {
	[[ $(jq -r '.nodes["big.img"].scrub.running' "$MNT/.dioloop/stats.json" 2>/dev/null) == true ]]
}

expect_status "scrub --rate 0 is refused" 2 "$DIOLOOP_BIN" scrub --rate 0 "$MNT/big.img"
expect_status "scrub --rate fast is refused" 2 "$DIOLOOP_BIN" scrub --rate fast "$MNT/big.img"
scrub_start=$SECONDS
"$DIOLOOP_BIN" scrub --rate 16M "$MNT/big.img" >"$IT_TMP/scrub.out" 2>&1 &
SCRUB_PID=$!
IT_HELPERS+=("$SCRUB_PID")
seen=no
while kill -0 "$SCRUB_PID" 2>/dev/null; do
	if scrub_running; then
		seen=yes
		break
	fi
done
if [[ $seen != yes ]]; then
	it_fail "the scrub of 1 GiB ended before stats.json showed it running: nothing was checked"
else
	it_ok "stats.json shows the scrub running"
	must "dioloop limit MNT/other.img (while the scrub runs)" \
		timeout -k 5 120 "$DIOLOOP_BIN" limit "$MNT/other.img"
	alive=no
	kill -0 "$SCRUB_PID" 2>/dev/null && scrub_running && alive=yes
	expect_eq "... it answered while the scrub was still running" yes "$alive"
	must "dioloop migrate --status MNT/other.img (while the scrub runs)" \
		timeout -k 5 120 "$DIOLOOP_BIN" migrate --status "$MNT/other.img"
	alive=no
	kill -0 "$SCRUB_PID" 2>/dev/null && scrub_running && alive=yes
	expect_eq "... so did migrate --status" yes "$alive"
	"$DIOLOOP_BIN" stats --watch --interval 0.1 --count 1 "$MNT" >"$IT_TMP/watch.out" 2>&1
	alive=no
	kill -0 "$SCRUB_PID" 2>/dev/null && scrub_running && alive=yes
	expect_eq "stats --watch answered while the scrub was still running" yes "$alive"
	expect_match "... with the scrub's progress under big.img" \
		'.* scrub [0-9]+%: [0-9]+ of 65536 blocks, 0 bad.*' "$(paste -sd' ' "$IT_TMP/watch.out")"
fi
rc=0
wait "$SCRUB_PID" || rc=$?
forget_pid "$SCRUB_PID"
expect_eq "the scrub finished clean (exit status)" 0 "$rc"
expect_match "... and says so" '.*big\.img: scrubbed [0-9]+ blocks, 0 bad.*' "$(cat "$IT_TMP/scrub.out")"
took=$((SECONDS - scrub_start))
expect_eq "256 MiB at --rate 16M took at least 14 s (took ${took} s)" yes \
	"$( ((took >= 14)) && echo yes || echo no)"
dioloop_umount "$MNT"
scrub_start=$SECONDS
expect_ok "offline scrub --rate 64M" "$DIOLOOP_BIN" scrub --rate 64M "$SRC/big.img"
took=$((SECONDS - scrub_start))
expect_eq "offline, 256 MiB at --rate 64M took at least 3 s (took ${took} s)" yes \
	"$( ((took >= 3)) && echo yes || echo no)"
it_end
