#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress --short --faults on raw: each combination passes under
# injected I/O errors (or is skipped while the daemon has no fault
# injection), and nothing is left mounted, attached or running.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/stress-lib.sh"

stress_begin "tools/stress --short --faults: raw passes under injected errors" \
	fio fstrim mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs

run_stress stress-faults-short --short --faults --backend raw --seed 1
expect_eq "stress-faults-short: exit status" 0 "$STRESS_RC"
expect_eq "stress-faults-short: each raw combination passes or says why it is skipped" 3 \
	"$(grep -cE '^raw/[a-z0-9]+ +faults (PASS|SKIP +fault injection not available in this build)' \
		"$IT_TMP/stress-faults-short.out")"
expect_nothing_left stress-faults-short

it_end
