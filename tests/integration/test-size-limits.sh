#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Sizes at the end of off_t on a growable mount, for cow and raw nodes: a
# pwrite ending at INT64_MAX, fallocate and copy_file_range reaching it,
# truncates to huge sizes.  Each is refused (EFBIG or EINVAL) before
# anything changes: the node keeps its size and its data, no sidecar is
# left, and after unmount `dioloop info` and `dioloop check` still open
# every cow image with its old size.  A cow image grown to exactly its
# largest size (INT64_MAX rounded down to 4096) still opens too.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "size limits: nothing reaches past a backend's largest size"

M=$((1 << 20))
OFF_MAX=9223372036854775807		# INT64_MAX
COW_MAX=$((OFF_MAX - 4095))		# INT64_MAX rounded down to 4096

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC"
# One cow image per operation, so that one that breaks its image cannot
# hide what another does; the raw ones share an image.
COWS="cw cc cf ct"
for img in $COWS; do
	must "dioloop create --format cow $img.img" "$DIOLOOP_BIN" create --format cow --size 1M "$SRC/$img.img"
done
must "dioloop create --format cow cmax.img" "$DIOLOOP_BIN" create --format cow --size 1M "$SRC/cmax.img"
must "dioloop create r.img" "$DIOLOOP_BIN" create --size 1M "$SRC/r.img"
must "dioloop create in.img" "$DIOLOOP_BIN" create --size 1M "$SRC/in.img"
start_daemon "$SRC" "$MNT" -o growable

for img in $COWS r in; do
	expect_io "fill $img.img" "ok $M" pwrite "$MNT/$img.img" 0 "$M" 7
done

# unchanged NODE WHAT: the node still has its size and its data.
unchanged() {
	expect_eq "$2: size of ${1##*/}" "$M" "$(stat -c %s "$1")"
	expect_io "$2: data of ${1##*/}" "ok same" check "$1" 0 "$M" 7
}

for kind in cow raw; do
	if [[ $kind == cow ]]; then
		W=$MNT/cw.img C=$MNT/cc.img F=$MNT/cf.img T=$MNT/ct.img
	else
		W=$MNT/r.img C=$MNT/r.img F=$MNT/r.img T=$MNT/r.img
	fi
	it_log "---- $kind: write"
	expect_io "$kind: pwrite of 4K ending at INT64_MAX" "err EFBIG" \
		pwrite "$W" $((OFF_MAX - 4096)) 4096
	expect_io "$kind: pwrite of 1 byte at INT64_MAX - 1 (ending at INT64_MAX)" "err EFBIG" \
		pwrite "$W" $((OFF_MAX - 1)) 1
	expect_io "$kind: pwrite of 1 byte ending at INT64_MAX - 1" "err EFBIG" \
		pwrite "$W" $((OFF_MAX - 2)) 1
	# (The kernel refuses this one itself, EINVAL: pos + count overflows.)
	expect_match "$kind: pwrite at INT64_MAX (across 2^63)" 'err (EFBIG|EINVAL)' \
		"$(nodeio pwrite "$W" "$OFF_MAX" 1)"
	unchanged "$W" "$kind: after the writes"

	it_log "---- $kind: copy_file_range"
	expect_io "$kind: copy_file_range of 4K ending at INT64_MAX" "err EFBIG" \
		copy "$MNT/in.img" 0 "$C" $((OFF_MAX - 4096)) 4096
	expect_io "$kind: copy_file_range of 1 byte at INT64_MAX - 1" "err EFBIG" \
		copy "$MNT/in.img" 0 "$C" $((OFF_MAX - 1)) 1
	unchanged "$C" "$kind: after the copies"

	it_log "---- $kind: fallocate"
	expect_match "$kind: fallocate mode 0 ending at INT64_MAX" 'err (EFBIG|EINVAL)' \
		"$(nodeio fallocate "$F" alloc $((OFF_MAX - 4096)) 4096)"
	expect_match "$kind: ZERO_RANGE (no KEEP_SIZE) ending at INT64_MAX" 'err (EFBIG|EINVAL)' \
		"$(nodeio fallocate "$F" zero $((OFF_MAX - 4096)) 4096)"
	expect_io "$kind: fallocate mode 0 across 2^63" "err EFBIG" \
		fallocate "$F" alloc $((OFF_MAX - 4096)) 8192
	expect_io "$kind: punch hole (KEEP_SIZE) ending at INT64_MAX: past EOF, nothing to do" "ok" \
		fallocate "$F" punch $((OFF_MAX - 4096)) 4096
	unchanged "$F" "$kind: after fallocate"

	it_log "---- $kind: truncate"
	expect_match "$kind: ftruncate to INT64_MAX" 'err (EFBIG|EINVAL)' \
		"$(nodeio truncate "$T" "$OFF_MAX")"
	expect_match "$kind: ftruncate to INT64_MAX - 1" 'err (EFBIG|EINVAL)' \
		"$(nodeio truncate "$T" $((OFF_MAX - 1)))"
	expect_match "$kind: truncate by name to INT64_MAX" 'err (EFBIG|EINVAL)' \
		"$(nodeio truncate-path "$T" "$OFF_MAX")"
	unchanged "$T" "$kind: after the truncates"
done

it_log "---- raw: past the host file system's largest file"
# ext4 (4 KiB blocks) holds at most 16 TiB - 4 KiB, xfs 8 EiB: 2^62 is
# past the first, and never past the daemon's own bound when allowed.
expect_match "raw: pwrite at 2^62" 'ok 4096|err EFBIG' "$(nodeio pwrite "$MNT/r.img" 2^62 4096)"
if [[ $(stat -c %s "$MNT/r.img") == "$M" ]]; then
	it_log "the host refused 2^62: r.img must be as it was"
	unchanged "$MNT/r.img" "raw: after the write at 2^62"
	expect_eq "raw: no sidecar left next to r.img" "" \
		"$(find "$SRC" -maxdepth 1 -name '*.r.img.*' -printf '%f\n')"
fi

it_log "---- cow: the largest size itself"
expect_io "cow: pwrite of 4K ending at the largest size (2^63 - 4096)" "ok 4096" \
	pwrite "$MNT/cmax.img" $((COW_MAX - 4096)) 4096 9
expect_eq "cow: cmax.img has the largest size" "$COW_MAX" "$(stat -c %s "$MNT/cmax.img")"
expect_io "cow: one byte more: refused" "err EFBIG" pwrite "$MNT/cmax.img" "$COW_MAX" 1

for img in $COWS r in cmax; do
	expect_io "fsync $img.img" "ok" fsync "$MNT/$img.img"
done
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "the daemon's exit status" 0 "$DAEMON_STATUS"

it_log "---- the images after unmount"
for img in $COWS; do
	expect_ok "dioloop info $img.img opens it" "$DIOLOOP_BIN" info "$SRC/$img.img"
	expect_eq "dioloop info $img.img: size" "$M" \
		"$("$DIOLOOP_BIN" info "$SRC/$img.img" 2>/dev/null | awk '$1 == "size:" { print $2 }')"
	expect_ok "dioloop check $img.img: clean" "$DIOLOOP_BIN" check "$SRC/$img.img"
done
expect_eq "dioloop info cmax.img: size" "$COW_MAX" \
	"$("$DIOLOOP_BIN" info "$SRC/cmax.img" 2>/dev/null | awk '$1 == "size:" { print $2 }')"
expect_ok "dioloop check cmax.img: clean" "$DIOLOOP_BIN" check "$SRC/cmax.img"
expect_eq "r.img on the host keeps its size" "$M" "$(stat -c %s "$SRC/r.img")"
expect_eq "nothing but the images left in SOURCE" "cc.img cf.img cmax.img ct.img cw.img in.img r.img" \
	"$(all_names "$SRC")"

it_log "---- mounted again"
start_daemon "$SRC" "$MNT"
for img in $COWS; do
	expect_io "$img.img serves its data after a remount" "ok same" check "$MNT/$img.img" 0 "$M" 7
done
expect_io "cmax.img: the last block reads back" "ok same" \
	check "$MNT/cmax.img" $((COW_MAX - 4096)) 4096 9
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "the second daemon's exit status" 0 "$DAEMON_STATUS"

it_end
