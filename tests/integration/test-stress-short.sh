#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress in its short mode, as CI runs it (under 3 minutes in all):
#   1. --short: every combination of backend and file system; each one
#      this build has passes (fio verify, dioloop-fsx on a spare node, the
#      metadata workload with its model, fstrim, then umount, fsck and
#      verify), the others are skipped as not available yet;
#   2. --short --crash: 2 rounds of kill -9 of the daemon under load per
#      combination; every round survived, fsync'd data intact;
#   3. --short --faults: passes, or is skipped while the daemon has no
#      fault injection.
# The filtered stdout of 1 and 2 (durations and counts become N) matches
# tests/golden/stress-short.out and stress-crash-short.out; the JSON lines
# hold one record per combination that agrees with the text; after each
# run nothing is left mounted, attached or running, and the work dir is
# gone.  A control shows that the metadata workload's checks can fail.
#
# When a backend lands, its lines in the golden files change from SKIP to
# PASS: update them with the run's filtered output.  nfs needs a server
# (--nfs-url): here its lines say SKIP; test-stress-nfs.sh runs it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STRESS=$IT_ROOT/tools/stress
GOLDEN=$IT_ROOT/tests/golden
STRESS_PID=

# On exit, a tools/stress still running gets SIGTERM (it releases what
# it made) before lib.sh's cleanup.
stress_stop() {
	[[ -n $STRESS_PID ]] || return 0
	if pid_alive "$STRESS_PID"; then
		it_log "cleanup: kill -TERM tools/stress $STRESS_PID"
		kill -TERM "$STRESS_PID" 2>/dev/null
		wait_gone "$STRESS_PID" 120 || kill -KILL "$STRESS_PID" 2>/dev/null
	fi
	wait "$STRESS_PID" 2>/dev/null
	STRESS_PID=
}

it_begin "tools/stress --short: every available combination passes" \
	fio fstrim mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs
trap 'rc=$?; stress_stop; (exit $rc); it_cleanup' EXIT
export TMPDIR=$IT_TMP	# tools/stress makes its work dir here

# run_stress NAME ARGS...: tools/stress ARGS in the background (so that a
# signal to this test is seen at once); stdout in $IT_TMP/NAME.out,
# progress in NAME.err, JSON lines in NAME.jsonl.  Sets STRESS_RC.
run_stress() {
	local name=$1
	shift
	it_log "run: tools/stress $* --json \$T/$name.jsonl"
	"$IT_PY" "$STRESS" "$@" --json "$IT_TMP/$name.jsonl" \
		>"$IT_TMP/$name.out" 2>"$IT_TMP/$name.err" </dev/null &
	STRESS_PID=$!
	STRESS_RC=0
	wait "$STRESS_PID" || STRESS_RC=$?
	STRESS_PID=
	it_log "$name: tools/stress exited $STRESS_RC; its stdout:"
	sed 's/^/    | /' "$IT_TMP/$name.out"
}

# expect_golden NAME: the filtered stdout of run NAME = tests/golden/NAME.out
expect_golden() {
	local got=$IT_TMP/$1.filtered
	awk -v work="$IT_TMP" -f "$GOLDEN/stress.filter" "$IT_TMP/$1.out" >"$got"
	if diff -u "$GOLDEN/$1.out" "$got" >"$IT_TMP/$1.diff"; then
		it_ok "$1: filtered output matches tests/golden/$1.out"
	else
		it_fail "$1: expected the filtered output to match tests/golden/$1.out, got (diff -u expected got):"
		sed 's/^/    | /' "$IT_TMP/$1.diff"
	fi
}

# expect_json NAME MODE: one JSON record per result line, agreeing with it.
expect_json() {
	expect_eq "$1: JSON records agree with the result lines" ok \
		"$("$IT_PY" - "$IT_TMP/$1.jsonl" "$IT_TMP/$1.out" "$2" <<'EOF'
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
lines = [l for l in open(sys.argv[2])
         if re.match(r"^[a-z]+/[a-z0-9]+ +(stress|crash|faults) ", l)]
if len(recs) != len(lines):
    sys.exit(print("%d records, %d result lines" % (len(recs), len(lines))))
for r, l in zip(recs, lines):
    f = l.split()
    for key in ("seed", "duration_s", "phases", "counts", "bytes", "errors",
                "started", "combo_seed"):
        if key not in r:
            sys.exit(print("record %s/%s has no %s" % (r["backend"], r["fs"], key)))
    if [r["backend"] + "/" + r["fs"], r["mode"], r["status"]] != f[:3]:
        sys.exit(print("record %s/%s %s %s, line %s" % (
            r["backend"], r["fs"], r["mode"], r["status"], f[:3])))
    if r["mode"] != sys.argv[3]:
        sys.exit(print("mode %s, expected %s" % (r["mode"], sys.argv[3])))
    if r["mode"] == "crash" and r["status"] == "PASS" and \
            r["rounds_survived"] != r["rounds"]:
        sys.exit(print("PASS with %s/%s rounds" % (r["rounds_survived"], r["rounds"])))
print("ok")
EOF
)"
}

# expect_nothing_left NAME: no mount, loop device, process or work dir.
expect_nothing_left() {
	local left
	left=$(awk -v d="$IT_TMP" 'index($2, d) == 1 { print $2 }' /proc/self/mounts)
	expect_eq "$1: nothing mounted under the test dir" "" "$left"
	left=$(grep -l "^$IT_TMP/" /sys/block/loop*/loop/backing_file 2>/dev/null)
	expect_eq "$1: no loop device attached to a file under the test dir" "" "$left"
	left=$(grep -las "$IT_TMP/[d]ioloop-stress" /proc/[0-9]*/cmdline | head -n 3)
	expect_eq "$1: no process running on the work dir" "" "$left"
	left=$(find "$IT_TMP" -maxdepth 1 -name 'dioloop-stress.*' | head -n 3)
	expect_eq "$1: the work dir is removed" "" "$left"
}

# The combinations this build runs: raw with each file system (and any
# other backend that has landed: then its golden lines say PASS).
run_stress stress-short --short --seed 1
expect_eq "stress-short: exit status" 0 "$STRESS_RC"
expect_match "stress-short: last line" "[1-9][0-9]* passed, 0 failed" \
	"$(tail -n 1 "$IT_TMP/stress-short.out")"
for fs in ext4 xfs btrfs; do
	expect_eq "stress-short: raw/$fs passes" 1 \
		"$(grep -cE "^raw/$fs +stress PASS " "$IT_TMP/stress-short.out")"
done
expect_golden stress-short
expect_json stress-short stress
expect_nothing_left stress-short

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

run_stress stress-faults-short --short --faults --backend raw --seed 1
expect_eq "stress-faults-short: exit status" 0 "$STRESS_RC"
expect_eq "stress-faults-short: each raw combination passes or says why it is skipped" 3 \
	"$(grep -cE '^raw/[a-z0-9]+ +faults (PASS|SKIP +fault injection not available in this build)' \
		"$IT_TMP/stress-faults-short.out")"
expect_nothing_left stress-faults-short

# Control: a daemon killed during a plain stress run fails that run, with
# the reason, and tools/stress still releases everything (the failed
# run's work dir, kept for its logs, is then removed here).
it_log "control: tools/stress --short --fs ext4 --backend raw, daemon killed"
# The load would last 300 s: the kill below ends it (the workers stop at
# their first failure), so a slow setup cannot make the kill miss it.
"$IT_PY" "$STRESS" --short --fs ext4 --backend raw --seed 1 --time 300 \
	>"$IT_TMP/killed.out" 2>"$IT_TMP/killed.err" </dev/null &
STRESS_PID=$!
# No time window: tools/stress writes its daemon's PID (logs/daemon.pid)
# before it says "load for"; wait for that line as long as it runs.
victim=
while pid_alive "$STRESS_PID"; do
	if grep -q "load for" "$IT_TMP/killed.err"; then
		pidfile=$(echo "$IT_TMP"/dioloop-stress.*/raw-ext4-stress/logs/daemon.pid)
		[[ -f $pidfile ]] && victim=$(<"$pidfile")
		break
	fi
	sleep 0.1
done
[[ -n $victim ]] || it_die "control: expected tools/stress to say \"load for\" with its daemon's PID in logs/daemon.pid, got: $(tail -n 3 "$IT_TMP/killed.err" | tr '\n' ' ')"
expect_eq "control: logs/daemon.pid names the daemon of tools/stress" "$victim" \
	"$(find_daemon_pid "$(dirname "$(dirname "$pidfile")")/nodes" | head -n 1)"
sleep 2
it_log "control: kill -9 $victim (the daemon)"
kill -KILL "$victim"
STRESS_RC=0
wait "$STRESS_PID" || STRESS_RC=$?
STRESS_PID=
expect_eq "control: exit status of tools/stress after its daemon was killed" 1 "$STRESS_RC"
expect_match "control: the result line names the dead daemon" \
	'raw/ext4 +stress FAIL .*the daemon exited during the load with status -9.*' \
	"$(grep '^raw/ext4' "$IT_TMP/killed.out")"
expect_eq "control: last line" "0 passed, 1 failed" "$(tail -n 1 "$IT_TMP/killed.out")"
if mounted_under "$IT_TMP"; then
	it_fail "control: expected nothing mounted under $IT_TMP after the failed run, got:"
	grep -F "$IT_TMP" /proc/self/mounts | sed 's/^/    | /'
else
	rm -rf "$IT_TMP"/dioloop-stress.*
fi
expect_nothing_left "control"

# Control: the metadata workload's checks fail when the file system does
# not hold what the model says (here a plain directory, changed behind
# its back).
META=$IT_ROOT/tools/stress-lib/metaload.py
C=$IT_TMP/control
mkdir -p "$C"
# It runs until it has made a durable file (an event, not a time), then
# stops on SIGTERM and writes its model.
"$IT_PY" "$META" run "$C/meta" --seed 1 --seconds 600 --state "$C/state.json" \
	--durable "$C/durable.jsonl" >"$C/run.out" 2>&1 </dev/null &
meta_pid=$!
IT_HELPERS+=("$meta_pid")
deadline=$((SECONDS + 120))
while pid_alive "$meta_pid" && ! grep -q '"kind": "file"' "$C/durable.jsonl" 2>/dev/null &&
	((SECONDS < deadline)); do
	sleep 0.1
done
kill -TERM "$meta_pid" 2>/dev/null
expect_ok "control: metaload ran until it made a durable file" wait "$meta_pid"
forget_pid "$meta_pid"
victim=$(find "$C/meta/durable" -type f | sort | head -n 1)
[[ -n $victim ]] || it_die "control: expected a durable file, got none"
echo tampered >>"$victim"
expect_status "control: metaload verify after a change to a file fails" 1 \
	"$IT_PY" "$META" verify "$C/meta" --state "$C/state.json"
expect_status "control: metaload verify-durable after a change to a durable file fails" 1 \
	"$IT_PY" "$META" verify-durable "$C/meta" --durable "$C/durable.jsonl"
expect_eq "control: verify-durable names the changed file" yes \
	"$(grep -q "${victim#"$C/meta/"}" "$IT_TMP/last.out" && echo yes || echo no)"
# ... and blockload's when a sector it wrote changes before its last check.
must "control: an 8 MiB file for blockload" truncate -s 8M "$C/block.img"
expect_status "control: blockload --self-test (one sector overwritten) fails" 1 \
	"$IT_PY" "$IT_ROOT/tools/stress-lib/blockload.py" "$C/block.img" --seed 1 \
	--seconds 1 --self-test
expect_match "control: blockload names the lost sector" \
	'.*acknowledged write lost: expected \(sector [0-9]+, generation [0-9]+\).*' \
	"$(tr '\n' ' ' <"$IT_TMP/last.out")"

it_end
