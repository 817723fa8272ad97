#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Golden-output tests of tools/stress's summary (xfstests style), which
# need neither root nor a mount:
#   - `tools/stress --report` of a stored JSON lines file (PASS, FAIL with
#     more errors than are printed, crash rounds, SKIP of a backend and of
#     --faults) prints exactly tests/golden/stress-report.out, exit 1;
#   - the awk filter the live tests use turns that output into
#     tests/golden/stress-report.filtered (durations and counts -> N);
#   - bad arguments: one line naming the argument, exit status 2, each as
#     in tests/golden/stress-bad-args.out.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STRESS=$IT_ROOT/tools/stress
GOLDEN=$IT_ROOT/tests/golden

it_log "golden output of tools/stress"
IT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dioloop-$IT_NAME.XXXXXX") || it_die "mktemp -d failed"
trap it_cleanup EXIT

# expect_same WHAT EXPECTED-FILE GOT-FILE
expect_same() {
	if diff -u "$2" "$3" >"$IT_TMP/diff"; then
		it_ok "$1: matches ${2#"$IT_ROOT"/}"
	else
		it_fail "$1: expected ${2#"$IT_ROOT"/}, got (diff -u expected got):"
		sed 's/^/    | /' "$IT_TMP/diff"
	fi
}

rc=0
"$IT_PY" "$STRESS" --report "$GOLDEN/stress-report.jsonl" >"$IT_TMP/report.out" 2>&1 || rc=$?
expect_eq "tools/stress --report of a run with failures: exit status" 1 "$rc"
expect_same "tools/stress --report" "$GOLDEN/stress-report.out" "$IT_TMP/report.out"

awk -v work=WORK -f "$GOLDEN/stress.filter" "$IT_TMP/report.out" >"$IT_TMP/report.filtered"
expect_same "the stress.filter of that output" "$GOLDEN/stress-report.filtered" \
	"$IT_TMP/report.filtered"

# Each bad argument: "exit STATUS: MESSAGE" lines.
: >"$IT_TMP/bad-args.out"
while read -r -a args; do
	rc=0
	msg=$("$IT_PY" "$STRESS" "${args[@]}" 2>&1 </dev/null) || rc=$?
	printf '%s => exit %d: %s\n' "${args[*]}" "$rc" "$msg" >>"$IT_TMP/bad-args.out"
done <<'EOF'
--fs zfs
--fs ext4,,xfs --backend cow,floppy
--fs
--time 0
--time soon
--rounds 0
--seed -1
--frobnicate
extra-argument
--report /nonexistent/results.jsonl
--nfs-url http://127.0.0.1/srv/images
--nfs-export /nonexistent
--nfs-url nfs://127.0.0.1/srv/images --nfs-export /nonexistent
--rbd-url rbd://rbd/ns/image/extra
EOF
expect_same "bad arguments" "$GOLDEN/stress-bad-args.out" "$IT_TMP/bad-args.out"

it_end
