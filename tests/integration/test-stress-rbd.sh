#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress on the rbd backend against a real Ceph cluster (rbd-lib.sh:
# the rbd_cluster fixture's, or one of its own when run alone), ext4 only,
# in its short mode (under a minute in all):
#   1. --short --rbd-url rbd://rbd/NS: the images are created in the
#      namespace, the URL mounted with --loop, load (fio verify,
#      dioloop-fsx with holes punched at any offset, metaload, fstrim),
#      fsck, the model and fio verified, the images read back with
#      `dioloop convert`: PASS, and the images removed with `rbd rm`;
#   2. --short --crash: 2 rounds of kill -9 of the daemon and a remount of
#      the same URL (the next daemon takes the dead one's exclusive
#      locks); both survived, fsync'd data intact.
# After each run nothing is left mounted, attached or running, the work
# dir is gone and the namespace holds no image.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/stress-lib.sh"
source "$IT_DIR/rbd-lib.sh"

stress_begin "tools/stress --backend rbd: ext4 on nodes of an rbd:// mount" \
	rbd fio fstrim mkfs.ext4 e2fsck
rbd_test_cluster
if [[ -n ${DIOLOOP_RBD_CLUSTER:-} ]]; then
	# shellcheck disable=SC2154  # set by the trap as it runs
	trap 'rc=$?; stress_stop; (exit $rc); it_cleanup' EXIT
else	# rbd_test_cluster's trap stops our own cluster
	# shellcheck disable=SC2154  # set by the trap as it runs
	trap 'rc=$?; stress_stop; ceph_cluster_stop "$CLUSTER"; (exit $rc); it_cleanup' EXIT
fi
URL="$RBD_URL?timeout=30"

# expect_server_clean NAME: expect_nothing_left, and no image left on
# the server.
expect_server_clean() {
	expect_nothing_left "$1"
	expect_eq "$1: no image left in the namespace" "" \
		"$(timeout 60 rbd ls "rbd/$RBD_NS" 2>&1)"
}

run_stress rbd-short --short --backend rbd --fs ext4 --seed 1 --rbd-url "$URL"
expect_eq "rbd-short: exit status" 0 "$STRESS_RC"
expect_eq "rbd-short: rbd/ext4 passes" 1 \
	"$(grep -cE '^rbd/ext4 +stress PASS .*fstrim [1-9][0-9]*; fsck clean, model verified$' "$IT_TMP/rbd-short.out")"
expect_eq "rbd-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/rbd-short.out")"
expect_eq "rbd-short: the images were created in the namespace and removed" 2 \
	"$(grep -cE 'removed stress-[^ ]+-ext4-stress-fsx?\.img \(rbd rm\)' "$IT_TMP/rbd-short.err")"
expect_server_clean rbd-short

run_stress rbd-crash-short --short --crash --backend rbd --fs ext4 --seed 1 --rbd-url "$URL"
expect_eq "rbd-crash-short: exit status" 0 "$STRESS_RC"
expect_eq "rbd-crash-short: rbd/ext4 survives both rounds" 1 \
	"$(grep -cE '^rbd/ext4 +crash +PASS .* 2/2 rounds survived, [1-9][0-9]* durable records intact' \
		"$IT_TMP/rbd-crash-short.out")"
expect_eq "rbd-crash-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/rbd-crash-short.out")"
expect_server_clean rbd-crash-short

rbd_test_cleanup
it_end
