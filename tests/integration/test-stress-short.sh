#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress --short, as CI runs it: every combination of backend and
# file system; each one this build has passes (fio verify, dioloop-fsx on
# a spare node, the metadata workload with its model, fstrim, then umount,
# fsck and verify), the others are skipped as not available yet.  The
# filtered stdout (durations and counts become N) matches
# tests/golden/stress-short.out; the JSON lines hold one record per
# combination that agrees with the text; after the run nothing is left
# mounted, attached or running, and the work dir is gone.  Controls show
# that a run whose daemon dies fails, and that the metadata workload's and
# blockload's checks can fail.  test-stress-crash.sh and
# test-stress-faults.sh run the other two short modes, beside this one.
#
# When a backend lands, its lines in the golden files change from SKIP to
# PASS: update them with the run's filtered output.  nfs needs a server
# (--nfs-url): here its lines say SKIP; test-stress-nfs.sh runs it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/stress-lib.sh"

stress_begin "tools/stress --short: every available combination passes" \
	fio fstrim mkfs.ext4 e2fsck mkfs.xfs xfs_repair mkfs.btrfs btrfs

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
