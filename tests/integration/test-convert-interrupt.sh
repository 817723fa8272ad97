#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# dioloop convert stopped midway leaves no partial DST behind:
#   - Ctrl-C (SIGINT) and SIGTERM: DST removed, one line saying so, exit
#     status 128+signal;
#   - --keep-partial: DST kept, with a line saying it is incomplete;
#   - without --format, DST is raw (qemu-img's default), cow when named
#     *.cow;
#   - a raw source in use gets no "take a snapshot" advice.
# The copy is made slow, not timed: SRC is a symlink to the node of a
# mount whose read_bps is 4 MiB/s, so 64 MiB take 16 s and the signal,
# sent once DST exists and a second later, always lands midway.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "dioloop convert: interrupts remove the partial destination"
S=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$S" "$MNT" links
must "create src/big.img (64 MiB)" "$DIOLOOP_BIN" create --size 64M "$S/big.img"
dd if=/dev/urandom of="$S/big.img" bs=1M count=64 conv=notrunc status=none
start_daemon "$S" "$MNT"
must "limit big.img read_bps=4M" "$DIOLOOP_BIN" limit "$MNT/big.img" read_bps=4M
ln -s "$MNT/big.img" links/big.img

# interrupted SIG DST [OPTIONS...]: convert links/big.img to DST, send SIG
# once DST exists (and one second more); the exit status in RC, stderr in
# $IT_TMP/conv.err.
interrupted() {
	local sig=$1 dst=$2 pid i
	shift 2
	"$DIOLOOP_BIN" convert "$@" links/big.img "$dst" 2>"$IT_TMP/conv.err" &
	pid=$!
	IT_HELPERS+=("$pid")
	for ((i = 0; i < 600; i++)); do
		[[ -e $dst ]] && break
		pid_alive "$pid" || break
		sleep 0.1
	done
	[[ -e $dst ]] || it_die "convert made no $dst: $(cat "$IT_TMP/conv.err")"
	sleep 1
	kill -"$sig" "$pid"
	RC=0
	wait "$pid" || RC=$?
	forget_pid "$pid"
}

interrupted INT out.raw
expect_eq "Ctrl-C: exit status 130" 130 "$RC"
expect_eq "Ctrl-C: the partial out.raw is removed" absent \
	"$([[ -e out.raw ]] && echo present || echo absent)"
expect_match "Ctrl-C: says it was interrupted" '.*dioloop: convert: interrupted \(Interrupt\).*' \
	"$(cat "$IT_TMP/conv.err")"

interrupted TERM out.cow
expect_eq "SIGTERM: exit status 143" 143 "$RC"
expect_eq "SIGTERM: the partial out.cow is removed" absent \
	"$([[ -e out.cow ]] && echo present || echo absent)"

interrupted INT kept.raw --keep-partial
expect_eq "--keep-partial: exit status 130" 130 "$RC"
expect_eq "--keep-partial: kept.raw is kept" present \
	"$([[ -e kept.raw ]] && echo present || echo absent)"
expect_match "--keep-partial: says kept.raw is incomplete" \
	'.*dioloop: convert: kept.raw is incomplete: .* of 64.0 MiB copied.*' \
	"$(cat "$IT_TMP/conv.err")"

it_log "---- the default format"
must "limit big.img off" "$DIOLOOP_BIN" limit "$MNT/big.img" off
must "create a cow image" "$DIOLOOP_BIN" create --format cow --size 4M c.img
must "convert c.img d.img" "$DIOLOOP_BIN" convert c.img d.img
expect_match "d.img (no --format) is raw" '.*format: *raw.*' \
	"$("$DIOLOOP_BIN" info d.img | paste -sd' ')"
must "convert c.img d.cow" "$DIOLOOP_BIN" convert c.img d.cow
expect_match "d.cow (no --format) is cow" '.*format: *cow.*' \
	"$("$DIOLOOP_BIN" info d.cow | paste -sd' ')"

it_log "---- a raw source in use"
expect_status "convert a served raw image" 1 "$DIOLOOP_BIN" convert "$S/big.img" x.raw
expect_match "... no snapshot advice for a raw image" \
	'.*in use by .*: unmount it first \(a raw image has no snapshots to copy from\)' \
	"$(cat "$IT_TMP/last.out")"
dioloop_umount "$MNT"
it_end
