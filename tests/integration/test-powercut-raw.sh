#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Power cuts under a real file system: ext4 on a direct-I/O loop device
# over a raw node, files written and fsync'd (file and directory), with
# the daemon logging what it does to the image (DIOLOOP_IOREC_LOG).  Then
# check_raw_powercut rebuilds the source directory as a power cut at a few
# random points of that log could have left it (unsynced writes dropped,
# reordered or torn at 512 bytes; see tests/check_raw_powercut.c), and for
# each: the daemon serves it (raw opens, orphan recovery runs), ext4
# mounts (journal replay), e2fsck -fn is clean, and every file whose fsync
# returned before the cut is intact.  DIOLOOP_POWERCUT_CUTS=N for more
# cuts (default 8).
#
# A torn write keeps or loses whole physical sectors of the disk the image
# lives on (lsblk's PHY-SEC; 512 where it cannot be told), as that disk
# would in a power cut.  Not 512 bytes everywhere: ext4 writes its
# 1,024-byte superblock with a checksum over both halves, so a cut that
# tears it between 512-byte sectors (mid-mount) leaves a file system the
# kernel refuses to mount on any disk that can tear there, whatever the
# daemon did: a disk that reports 512 is torn at 1,024 bytes here.
# Tearing at 512 bytes, at the backend's own level, is
# check_raw_powercut's unit tests' model.  DIOLOOP_POWERCUT_TEAR=N sets
# the unit.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "power cuts replayed from the daemon's log: ext4 mounts, is clean, keeps fsync'd files" \
	mkfs.ext4 e2fsck

CHECK=${DIOLOOP_CHECK_RAW_POWERCUT:-$(dirname "$DIOLOOP_BIN")/tests/check_raw_powercut}
[[ -x $CHECK ]] || it_die "no check_raw_powercut at $CHECK: build first, or set DIOLOOP_CHECK_RAW_POWERCUT"
NCUTS=${DIOLOOP_POWERCUT_CUTS:-8}

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
IN=$IT_TMP/inner
LOG=$IT_TMP/iorec.log
MANIFEST=$IT_TMP/fsynced
mkdir -p "$SRC" "$MNT" "$IN" "$IT_TMP/cuts"
must "truncate -s 64M disk.img" truncate -s 64M "$SRC/disk.img"
must "copy the image before the run" cp --sparse=always "$SRC/disk.img" "$IT_TMP/base.img"

# The physical sector of the disk under $1, or 512.
physical_sector() {
	local dev n
	dev=$(findmnt -no SOURCE -T "$1" 2>/dev/null | sed 's/\[.*//')
	n=$(lsblk -ndo PHY-SEC "$dev" 2>/dev/null | tr -d ' ')
	if [[ $n =~ ^[0-9]+$ ]] && ((n >= 512 && (n & (n - 1)) == 0)); then
		echo "$n"
	else
		echo 512
	fi
}
TEAR=${DIOLOOP_POWERCUT_TEAR:-$(physical_sector "$SRC")}
# Never inside ext4's 1,024-byte superblock (see above): a disk that says
# 512 (or a tmpfs, where it cannot be told) is torn at 1,024 bytes.
[[ -n ${DIOLOOP_POWERCUT_TEAR:-} ]] || ((TEAR >= 1024)) || TEAR=1024
it_log "torn writes keep or lose whole $TEAR-byte units (the physical sector under $SRC)"

now_us() {
	"$IT_PY" -c 'import time; print(time.monotonic_ns() // 1000)'
}

# ---- the recorded run
export DIOLOOP_IOREC_LOG=$LOG
start_daemon "$SRC" "$MNT"
unset DIOLOOP_IOREC_LOG
attach_loop "$MNT/disk.img"
LOOP=$LOOP_DEV
must "mkfs.ext4 on $LOOP" mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
MKFS_DONE=$(now_us)
mount_inner "$LOOP" "$IN"
: >"$MANIFEST"
for i in $(seq 1 24); do
	out=$(nodeio write-file "$IN/f$i" $((i * 37000 + 4096)) "$i")
	[[ $out == ok* ]] || it_die "write-file f$i: expected ok SHA, got $out"
	# Taken after fsync returned: a cut after this time must keep f$i.
	echo "$(now_us) ${out#ok }  f$i" >>"$MANIFEST"
	# Writes no fsync covers, between them: direct, so the daemon sees
	# them at once.
	must "loose$i" dd if=/dev/urandom of="$IN/loose$i" bs=64K count=$((i % 5 + 1)) \
		oflag=direct status=none
done
it_ok "24 files written and fsync'd on ext4 over the recorded node"
umount_inner "$IN"
detach_loop "$LOOP"
dioloop_umount "$MNT"
expect_eq "the daemon logged what it did" yes "$([[ -s $LOG ]] && echo yes || echo no)"

# ---- the cuts
if ! DIOLOOP_POWERCUT_LOG=$LOG DIOLOOP_POWERCUT_IMAGE=$SRC/disk.img \
	DIOLOOP_POWERCUT_BASE=$IT_TMP/base.img DIOLOOP_POWERCUT_OUT=$IT_TMP/cuts \
	DIOLOOP_POWERCUT_CUTS=$NCUTS DIOLOOP_POWERCUT_AFTER=$MKFS_DONE \
	DIOLOOP_POWERCUT_TEAR=$TEAR \
	"$CHECK" >"$IT_TMP/replay.out" 2>&1; then
	it_show "$IT_TMP/replay.out" 20
	it_die "check_raw_powercut could not replay the log"
fi
grep -E '^(test seed|[0-9]+ records|cut[0-9]+:)' "$IT_TMP/replay.out" | sed 's/^/    /'

MNT2=$IT_TMP/mnt2
IN2=$IT_TMP/inner2
for ((k = 0; k < NCUTS; k++)); do
	dir=$IT_TMP/cuts/cut$k
	t=$(cat "$dir.time")
	it_log "---- cut $k (lost what was logged from $t on)"
	start_daemon "$dir" "$MNT2"
	attach_loop "$MNT2/disk.img"
	LOOP=$LOOP_DEV
	mount_inner "$LOOP" "$IN2"	# replays the journal
	umount_inner "$IN2"
	expect_ok "cut $k: e2fsck -fn after the journal replay is clean" e2fsck -fn "$LOOP"
	mount_inner "$LOOP" "$IN2" -o ro
	: >"$IT_TMP/expect$k"
	while read -r when sum name; do
		if [[ $t == end ]] || ((when < t)); then
			echo "$sum  $name" >>"$IT_TMP/expect$k"
		fi
	done <"$MANIFEST"
	n=$(wc -l <"$IT_TMP/expect$k")
	if ((n == 0)); then
		it_ok "cut $k: no file was fsync'd before it"
	elif out=$(cd "$IN2" && sha256sum --quiet -c "$IT_TMP/expect$k" 2>&1); then
		it_ok "cut $k: the $n files fsync'd before the cut are intact"
	else
		it_fail "cut $k: expected the $n files fsync'd before the cut intact, got:"
		printf '%s\n' "$out" | head -n 10 | sed 's/^/    | /'
	fi
	umount_inner "$IN2"
	detach_loop "$LOOP"
	dioloop_umount "$MNT2"
done
it_end
