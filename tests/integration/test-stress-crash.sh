#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress --short --crash: 2 rounds of kill -9 of the daemon under
# load per combination; every round survived, fsync'd data intact.  The
# filtered stdout matches tests/golden/stress-crash-short.out, the JSON
# lines agree with it, and nothing is left mounted, attached or running.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/stress-lib.sh"

stress_begin "tools/stress --short --crash: every combination survives kill -9" \
	fio fstrim mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs

run_stress stress-crash-short --short --crash --seed 1
expect_eq "stress-crash-short: exit status" 0 "$STRESS_RC"
for fs in ext4 xfs btrfs; do
	expect_eq "stress-crash-short: raw/$fs survives both rounds" 1 \
		"$(grep -cE "^raw/$fs +crash +PASS .* 2/2 rounds survived, [1-9][0-9]* durable records intact" \
			"$IT_TMP/stress-crash-short.out")"
done
expect_golden stress-crash-short
expect_json stress-crash-short crash
expect_nothing_left stress-crash-short

it_end
