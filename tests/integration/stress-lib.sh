# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Helpers for the tests that run tools/stress (test-stress-*.sh); sourced
# after lib.sh.  stress_begin replaces it_begin's EXIT trap with one that
# first ends a tools/stress still running; a test that starts a server
# sets its own trap after that server's, calling stress_stop first.
STRESS=$IT_ROOT/tools/stress
GOLDEN=$IT_ROOT/tests/golden
STRESS_PID=

# On exit, a tools/stress still running gets SIGTERM (it releases what
# it made) before lib.sh's cleanup.
# shellcheck disable=SC2317  # called by the trap
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

# stress_begin TITLE TOOLS...: it_begin, the EXIT trap above, and
# tools/stress's work dir in the test's own temporary directory.
stress_begin() {
	it_begin "$@"
	# shellcheck disable=SC2154  # rc is the trap's own, set as it runs
	trap 'rc=$?; stress_stop; (exit $rc); it_cleanup' EXIT
	export TMPDIR=$IT_TMP
}

# run_stress NAME ARGS...: tools/stress ARGS in the background (so that a
# signal to this test is seen at once); stdout in $IT_TMP/NAME.out,
# progress in NAME.err, JSON lines in NAME.jsonl.  Sets STRESS_RC.
run_stress() {
	local name=$1
	shift
	# Over the transport the suite runs on (tools/run-tests).
	if [[ -n ${DIOLOOP_IT_TRANSPORT:-} ]]; then
		set -- "$@" --transport "$DIOLOOP_IT_TRANSPORT"
	fi
	it_log "run: tools/stress $* --json \$T/$name.jsonl"
	"$IT_PY" "$STRESS" "$@" --json "$IT_TMP/$name.jsonl" \
		>"$IT_TMP/$name.out" 2>"$IT_TMP/$name.err" </dev/null &
	STRESS_PID=$!
	STRESS_RC=0
	wait "$STRESS_PID" || STRESS_RC=$?
	STRESS_PID=
	it_log "$name: tools/stress exited $STRESS_RC; its stdout:"
	sed 's/^/    | /' "$IT_TMP/$name.out"
	if ((STRESS_RC != 0)); then
		it_log "$name: its progress (last lines):"
		it_show "$IT_TMP/$name.err" 30
	fi
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
		"$("$IT_PY" - "$IT_TMP/$1.jsonl" "$IT_TMP/$1.out" "$2" <<'PY'
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
PY
)"
}

# expect_nothing_left NAME: no mount, loop device, process or work dir of
# the run (the caller checks what a server holds).
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
