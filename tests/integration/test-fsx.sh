#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# dioloop-fsx on block nodes: random reads (unaligned, across and at EOF),
# writes, punch hole, zero range, fsync, copy_file_range within a node and
# between two, and SEEK_DATA/SEEK_HOLE, each checked against an in-memory
# model.  A fixed seed, a random one (printed), one run with O_DIRECT, one
# with mapped reads and writes (MAP_SHARED + msync, mixed with O_DIRECT and
# buffered I/O: shared mmap works on direct-I/O nodes), one on a growable
# mount; the checker's self-test (a flipped model byte must fail it).
# After the runs each node is byte-identical to its image file, and stays
# so across the unmount.  The sanitizer stage runs fewer operations
# (DIOLOOP_TEST_SCALE).
#
# Environment: DIOLOOP_BIN (lib.sh), DIOLOOP_FSX (default: the dioloop-fsx
# of the build tree DIOLOOP_BIN is in).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DIOLOOP_FSX=${DIOLOOP_FSX:-$(dirname "$DIOLOOP_BIN")/tools/fsx/dioloop-fsx}
NFSX=0

# run_fsx WHAT FSX-ARGS...: one run, passing when dioloop-fsx exits 0; its
# report (seed, op log, the bytes that differ) is shown when it does not.
run_fsx() {
	local what=$1 log rc=0
	shift
	NFSX=$((NFSX + 1))
	log=$IT_TMP/fsx.$NFSX.log
	it_log "run: dioloop-fsx ${*//"$IT_TMP"/\$T}"
	"$DIOLOOP_FSX" "$@" >"$log" 2>&1 </dev/null || rc=$?
	if ((rc == 0)); then
		it_ok "$what: $(tail -n 1 "$log")"
		return 0
	fi
	it_fail "$what: expected dioloop-fsx to exit 0, got $rc"
	head -n 150 "$log" | sed 's/^/    | /'
	return 1
}

# unmount_and_wait MNT PID: fusermount3 -u, then the daemon exits 0.
unmount_and_wait() {
	if expect_ok "fusermount3 -u $1" fusermount3 -u "$1"; then
		forget_mount "$1"
		daemon_wait "$2"
		expect_eq "exit status of the daemon after fusermount3 -u" 0 \
			"$DAEMON_STATUS"
	fi
}

it_begin "dioloop-fsx random operations on block nodes"
[[ -x $DIOLOOP_FSX ]] ||
	it_die "no dioloop-fsx at $DIOLOOP_FSX: build first, or set DIOLOOP_FSX"
it_log "dioloop-fsx: $DIOLOOP_FSX"

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
for img in a b; do
	must "dioloop create --size 64M $img.img" \
		"$DIOLOOP_BIN" create --size 64M "$SRC/$img.img"
done
start_daemon "$SRC" "$MNT"
daemon=$DAEMON_PID
A=$MNT/a.img
B=$MNT/b.img
expect_eq "size of node a.img" 67108864 "$(stat -c %s "$A")"

# 1..3: the fixed seed, a random one, O_DIRECT; -B: a write past the end
# of a node fails with ENOSPC and the size never changes.
run_fsx "fixed seed" -q -S 1 -N "$(it_scale 20000 2000)" "$A" "$B"
SEED=$(( (RANDOM << 15) | RANDOM ))
N=$(it_scale 5000 1000)
it_log "random seed: $SEED (repeat: dioloop-fsx -S $SEED -N $N -o 2M -B A B)"
run_fsx "random seed $SEED, ops up to 2 MiB" -q -S "$SEED" -N "$N" -o 2M -B \
	"$A" "$B"
run_fsx "O_DIRECT" -q -S 2 -N "$(it_scale 10000 2000)" -a -B "$A" "$B"
# 4: mapped reads and writes (-m) among the rest: what a store into a
# MAP_SHARED mapping and msync put in a node, pread, O_DIRECT and a new
# mapping read back, and a direct write is seen through a new mapping.
run_fsx "mapped reads and writes (MAP_SHARED, msync), seed $SEED" -q \
	-S "$SEED" -N "$(it_scale 10000 2000)" -m -a -B "$A" "$B"

# The checker can fail: a model byte flipped after op 200 is caught by the
# read of op 201, with the report.
log=$IT_TMP/fsx-selftest.log
rc=0
"$DIOLOOP_FSX" -q -S 1 -N 400 -X 200 "$A" "$B" >"$log" 2>&1 </dev/null || rc=$?
expect_eq "self-test (-X 200): exit status of dioloop-fsx" 1 "$rc"
expect_eq "self-test (-X 200): a MISMATCH report for op 201" yes \
	"$(grep -q '^fsx: MISMATCH: read of FILE' "$log" &&
		grep -q '^fsx: seed 1, failed at op 201$' "$log" &&
		grep -q 'inject .*model byte flipped' "$log" && echo yes || echo no)"

# What fsx checked through the nodes is what the image files hold.
declare -A NODE_SHA
for img in a b; do
	expect_same_bytes "node $img.img vs its image, while mounted" \
		"$MNT/$img.img" "$SRC/$img.img"
	NODE_SHA[$img]=$(sha "$MNT/$img.img")
done
unmount_and_wait "$MNT" "$daemon"
for img in a b; do
	expect_eq "sha256 of $img.img after unmount = sha256 of its node before" \
		"${NODE_SHA[$img]}" "$(sha "$SRC/$img.img")"
done

# 5: a growable mount: writes and copies past the end grow the node (to a
# sector multiple), truncate resizes it.
SRC2=$IT_TMP/src-growable
MNT2=$IT_TMP/mnt-growable
mkdir -p "$SRC2" "$MNT2"
for img in c d; do
	must "dioloop create --size 16M $img.img" \
		"$DIOLOOP_BIN" create --size 16M "$SRC2/$img.img"
done
start_daemon "$SRC2" "$MNT2" -o growable
daemon=$DAEMON_PID
run_fsx "growable, seed $SEED" -q -S "$SEED" -N "$(it_scale 3000 1000)" -g -l 24M -a \
	"$MNT2/c.img" "$MNT2/d.img"
unmount_and_wait "$MNT2" "$daemon"

it_end
