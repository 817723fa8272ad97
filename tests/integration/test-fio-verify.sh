#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# fio random writes with verify=crc32c (O_DIRECT, libaio) on a block node
# and on a loop device over a node: queue depth 1, queue depth 32 with mixed
# block sizes, unaligned 512-byte-granular blocks (read-modify-write inside
# the daemon), and 4 parallel jobs on different offsets.  Zero verify
# errors; afterwards the image is byte-identical to the node.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "fio verify=crc32c on a node and on a loop device over a node" fio

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
must "dioloop create --size 128M node.img" "$DIOLOOP_BIN" create --size 128M "$SRC/node.img"
must "dioloop create --size 128M loop.img" "$DIOLOOP_BIN" create --size 128M "$SRC/loop.img"
must "dioloop create --size 8M control.img" "$DIOLOOP_BIN" create --size 8M "$SRC/control.img"
start_daemon "$SRC" "$MNT"


# Control: the same checks do catch bad data read through a node.  Write
# verifiable blocks, verify them (clean), corrupt one byte of the image on
# the host, verify again: fio must fail.
CONTROL=(fio --name=control --filename="$MNT/control.img" --direct=1
	--ioengine=libaio --iodepth=4 --rw=write --bs=4k --size=8M
	--verify=crc32c --verify_fatal=1 --verify_state_save=0)
must "control: fio writes verifiable blocks to control.img" "${CONTROL[@]}" --do_verify=0
expect_ok "control: fio --verify_only on the intact node" "${CONTROL[@]}" --verify_only
# Every bit of the byte flipped: a random byte would equal the old one
# once in 256 runs, and the control would then find nothing to catch.
flip_byte() {
	local file=$1 off=$2 old
	old=$(od -An -tu1 -j "$off" -N1 "$file" | tr -d ' ')
	[[ -n $old ]] || return 1
	# shellcheck disable=SC2059
	printf "\\x$(printf %02x $((old ^ 0xff)))" |
		dd of="$file" bs=1 seek="$off" conv=notrunc,fsync status=none
}
must "control: flip one byte of control.img on the host" \
	flip_byte "$SRC/control.img" $((4 * 1048576 + 100))
rc=0
"${CONTROL[@]}" --verify_only >"$IT_TMP/control.out" 2>&1 </dev/null || rc=$?
if ((rc != 0)) && grep -qiE 'verify|crc32c' "$IT_TMP/control.out"; then
	it_ok "control: fio --verify_only after the corruption fails (exit status $rc) and names the verify error"
else
	it_fail "control: expected fio --verify_only to fail with a verify error after corrupting control.img, got exit status $rc"
	it_show "$IT_TMP/control.out"
fi

NODE=$MNT/node.img
run_fio_verify "node, QD1, 4k" --name=qd1 --filename="$NODE" --rw=randwrite \
	--bs=4k --iodepth=1 --size=16M
run_fio_verify "node, QD32, 4k-256k" --name=qd32 --filename="$NODE" --rw=randwrite \
	--bsrange=4k-256k --iodepth=32 --size=96M
run_fio_verify "node, QD16, 512-byte-granular 512-12k (unaligned, read-modify-write)" \
	--name=unaligned --filename="$NODE" --rw=randwrite --bsrange=512-12k \
	--blockalign=512 --iodepth=16 --size=8M --offset=100M
run_fio_verify "node, 4 parallel jobs at offsets 0/32M/64M/96M, QD8" --name=par \
	--filename="$NODE" --rw=randwrite --bsrange=4k-64k --iodepth=8 \
	--numjobs=4 --offset=0 --offset_increment=32M --size=32M
# 1 MiB requests, 96 at once from two jobs: more than the mount's 64
# runs (large_request_runs), so over /dev/fuse most take a run and those
# that find every run out use pool pages (how many varies: not asserted).
# Every run is back once fio is done.
runs_stat() {
	"$DIOLOOP_BIN" stats --json "$MNT" | jq -r ".large_request_runs.$1"
}
taken0=$(runs_stat taken)
missed0=$(runs_stat missed)
run_fio_verify "node, 1M, 2 jobs at QD48 at offsets 0/64M" --name=big \
	--filename="$NODE" --rw=randwrite --bs=1M --iodepth=48 --numjobs=2 \
	--offset=0 --offset_increment=64M --size=64M
expect_eq "runs in use after fio" 0 "$(runs_stat in_use)"
if [[ $("$DIOLOOP_BIN" stats --json "$MNT" | jq -r .transport.name) == dev ]]; then
	taken=$(($(runs_stat taken) - taken0))
	missed=$(($(runs_stat missed) - missed0))
	if ((taken >= 64)); then
		it_ok "1 MiB requests over /dev/fuse took runs ($taken; $missed found none and used pool pages)"
	else
		it_fail "expected at least 64 of fio's 256 1 MiB requests to take a run, got $taken ($missed found none)"
	fi
fi
expect_same_bytes "node.img after fio: node vs image" "$NODE" "$SRC/node.img"

attach_loop "$MNT/loop.img"
LOOP=$LOOP_DEV
run_fio_verify "loop device, QD32, 4k-256k" --name=loopqd32 --filename="$LOOP" \
	--rw=randwrite --bsrange=4k-256k --iodepth=32 --size=96M
run_fio_verify "loop device, QD1, 512" --name=loopqd1 --filename="$LOOP" \
	--rw=randwrite --bs=512 --iodepth=1 --size=2M --offset=120M
run_fio_verify "loop device, 4 parallel jobs at offsets 0/32M/64M/96M, QD8" \
	--name=looppar --filename="$LOOP" --rw=randwrite --bsrange=4k-64k \
	--iodepth=8 --numjobs=4 --offset=0 --offset_increment=32M --size=32M
loop_sha=$(sha "$LOOP")
detach_loop "$LOOP"
expect_eq "loop.img: node content = what the loop device showed" \
	"$loop_sha" "$(sha "$MNT/loop.img")"
expect_same_bytes "loop.img after fio: node vs image" "$MNT/loop.img" "$SRC/loop.img"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"
expect_eq "loop.img after unmount = what the loop device showed" \
	"$loop_sha" "$(sha "$SRC/loop.img")"

it_end
