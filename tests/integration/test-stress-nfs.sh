#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress on the nfs backend against a real nfs-ganesha (nfs-lib.sh),
# ext4 only, in its short mode (under a minute in all):
#   1. without --nfs-url the nfs combination is skipped, and says why;
#   2. --short --nfs-url URL --nfs-export DIR: the images are created on
#      the server, the URL mounted with --loop, load, fsck, the model and
#      fio verified, the images read back over NFS: PASS;
#   3. --short --crash: 2 rounds of kill -9 of the daemon and a remount of
#      the same URL; both survived, fsync'd data intact.
# After each run nothing is left mounted, attached or running, the work
# dir is gone and the images are removed from the server's directory.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/stress-lib.sh"
source "$IT_DIR/nfs-lib.sh"

stress_begin "tools/stress --backend nfs: ext4 on nodes of an nfs:// mount" \
	ganesha.nfsd rpcinfo fio fstrim mkfs.ext4 e2fsck
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"
# expect_server_clean NAME: expect_nothing_left, and no image left on
# the server.
expect_server_clean() {
	expect_nothing_left "$1"
	expect_eq "$1: no image left in the server's directory" "" "$(ls -A "$IMAGES")"
}

run_stress no-url --short --backend nfs --fs ext4 --seed 1
expect_eq "no --nfs-url: exit status" 0 "$STRESS_RC"
expect_eq "no --nfs-url: nfs/ext4 is skipped, and says why" 1 \
	"$(grep -cE '^nfs/ext4 +stress SKIP +no NFS server given \(--nfs-url\)$' "$IT_TMP/no-url.out")"

EXPORT=$IT_TMP/export
IMAGES=$EXPORT/stress
mkdir -p "$IMAGES"
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"
# nfs_server_start set its own EXIT trap: stop tools/stress first.
# shellcheck disable=SC2154  # set by the trap as it runs
trap 'rc=$?; stress_stop; nfs_server_cleanup; (exit $rc); it_cleanup' EXIT
# The MOUNT port given, not asked from rpcbind: another test's ganesha may
# have registered its own there.
URL="$NFS_URL_BASE/stress?timeout=30&mountport=$MNT_PORT"

run_stress nfs-short --short --backend nfs --fs ext4 --seed 1 \
	--nfs-url "$URL" --nfs-export "$IMAGES"
expect_eq "nfs-short: exit status" 0 "$STRESS_RC"
expect_eq "nfs-short: nfs/ext4 passes" 1 \
	"$(grep -cE '^nfs/ext4 +stress PASS .*fsck clean, model verified$' "$IT_TMP/nfs-short.out")"
expect_eq "nfs-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/nfs-short.out")"
expect_eq "nfs-short: the images were created on the server and removed" 2 \
	"$(grep -cE 'removed stress-[^ ]+-ext4-stress-fsx?\.img from the NFS server' "$IT_TMP/nfs-short.err")"
expect_server_clean nfs-short

run_stress nfs-crash-short --short --crash --backend nfs --fs ext4 --seed 1 \
	--nfs-url "$URL" --nfs-export "$IMAGES"
expect_eq "nfs-crash-short: exit status" 0 "$STRESS_RC"
expect_eq "nfs-crash-short: nfs/ext4 survives both rounds" 1 \
	"$(grep -cE '^nfs/ext4 +crash +PASS .* 2/2 rounds survived, [1-9][0-9]* durable records intact' \
		"$IT_TMP/nfs-crash-short.out")"
expect_eq "nfs-crash-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/nfs-crash-short.out")"
expect_server_clean nfs-crash-short

it_end
