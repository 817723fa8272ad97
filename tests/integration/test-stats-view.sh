#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# dioloop stats for people and for dashboards:
#   - the totals table fits 80 columns;
#   - --watch on a terminal (a pseudo-terminal of 80x24 under script(1))
#     redraws in place: each report starts with "home, clear", one header
#     per report, every line within 80 columns, the busy node shown and
#     the idle one hidden (shown with --all);
#   - --watch --json gives per-second rates, not totals;
#   - --prometheus prints the text exposition format: linted by promtool
#     (Debian's prometheus package) and checked by a parser of the format:
#     HELP/TYPE before the samples, label syntax, histogram buckets
#     cumulative with le ascending and +Inf = _count, counters never
#     below the JSON's values;
#   - --prometheus --textfile FILE writes FILE (node_exporter's textfile
#     collector) and leaves no temporary file.
# The load is a dd loop under a write limit that runs until every sample
# is taken: no time window to miss.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "dioloop stats: the live view and the Prometheus output" script jq
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC"
must "create busy.img" "$DIOLOOP_BIN" create --size 16M "$SRC/busy.img"
must "create idle.img" "$DIOLOOP_BIN" create --size 16M "$SRC/idle.img"
start_daemon "$SRC" "$MNT"
must "limit busy.img write_bps=2M" "$DIOLOOP_BIN" limit "$MNT/busy.img" write_bps=2M

# widest FILE: the longest line, escape sequences and CRs left out.
widest() {
	sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r$//' "$1" | awk '{ if (length > w) w = length } END { print w + 0 }'
}

must "dioloop stats MNT" "$DIOLOOP_BIN" stats "$MNT"
expect_eq "the totals table fits 80 columns" yes "$( (($(widest "$IT_TMP/last.out") <= 80)) && echo yes || echo no)"

# The writer runs until every sample is taken, however slow the machine:
# small dd runs in a loop until the file "stop" appears.
start_helper bash -c 'until [[ -e stop ]]; do
	dd if=/dev/zero of="$1" bs=64k count=4 oflag=direct conv=notrunc status=none || exit 1
	echo 4 >>writes.log
done' writer "$MNT/busy.img"
DD_PID=$HELPER_PID
sleep 0.3
script -qec "stty cols 80 rows 24; '$DIOLOOP_BIN' stats --watch --interval 0.3 --count 3 '$MNT'" \
	/dev/null >tty.out 2>&1 </dev/null
script -qec "stty cols 80 rows 24; '$DIOLOOP_BIN' stats --watch --all --interval 0.3 --count 1 '$MNT'" \
	/dev/null >tty-all.out 2>&1 </dev/null
"$DIOLOOP_BIN" stats --watch --json --interval 0.3 --count 1 "$MNT" >rates.json
touch stop
expect_ok "the writer ends without an error" wait "$DD_PID"
forget_pid "$DD_PID"
WRITES=$(awk '{ n += $1 } END { print n + 0 }' writes.log)

expect_eq "on a terminal: 3 reports, each redrawn from home after a clear" 3 \
	"$(grep -o $'\x1b\\[H\x1b\\[2J' tty.out | wc -l)"
expect_eq "... one header per report" 3 "$(grep -c 'NODE' tty.out)"
expect_eq "... every line within 80 columns" yes "$( (($(widest tty.out) <= 80)) && echo yes || echo no)"
expect_match "... busy.img is shown writing" '.*busy\.img +[0-9]+ +[1-9][0-9]* .*' \
	"$(grep 'busy\.img' tty.out | tail -n 1)"
expect_eq "... idle.img is hidden" 0 "$(grep -c 'idle\.img' tty.out)"
expect_eq "... and the title says so" 3 "$(grep -c 'idle nodes hidden' tty.out)"
expect_eq "--all shows idle.img too" 1 "$(grep -c 'idle\.img' tty-all.out)"
expect_eq "--watch --json: rates (busy.img writes per second > 0, idle.img 0)" "true true" \
	"$(jq -r '(.nodes["busy.img"].write_ops_per_s > 0), (.nodes["idle.img"].write_ops_per_s == 0)' rates.json | paste -sd' ')"
expect_eq "... and its interval" true "$(jq -r '.interval_s > 0.2' rates.json)"

must "dioloop stats --prometheus MNT" "$DIOLOOP_BIN" stats --prometheus "$MNT"
cp "$IT_TMP/last.out" prom.txt
"$DIOLOOP_BIN" stats --json "$MNT" >snap.json
cat >promcheck.py <<'PY'
import json, re, sys
text, snap = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
sample = re.compile(r"^(%s)(\{(%s=\"(?:[^\"\\\n]|\\[\\\"n])*\")(,%s=\"(?:[^\"\\\n]|\\[\\\"n])*\")*\})? (\S+)$"
                    % (name_re, name_re, name_re))
types, helps, samples, errors = {}, set(), [], []
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith("# HELP "):
        helps.add(line.split()[2]); continue
    if line.startswith("# TYPE "):
        _, _, name, typ = line.split(" ", 3)
        if name in types: errors.append("line %d: second TYPE for %s" % (n, name))
        types[name] = typ; continue
    m = sample.match(line)
    if not m:
        errors.append("line %d: not a sample: %r" % (n, line)); continue
    name, value = m.group(1), m.group(5)
    base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in types else name
    if base not in types: errors.append("line %d: %s before its TYPE" % (n, name))
    if base not in helps: errors.append("line %d: %s has no HELP" % (n, name))
    float(value)
    labels = dict(re.findall(r'(%s)="((?:[^"\\]|\\.)*)"' % name_re, m.group(2) or ""))
    samples.append((name, labels, float(value) if value != "+Inf" else float("inf")))
# Histograms: per series, le ascending, counts cumulative, +Inf = _count.
hist = {}
for name, labels, v in samples:
    if name.endswith("_bucket"):
        key = (name[:-7], labels["node"], labels["op"])
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        hist.setdefault(key, []).append((le, v))
counts = {(n[:-6], l["node"], l["op"]): v for n, l, v in samples if n.endswith("_count")}
for key, b in hist.items():
    les = [le for le, _ in b]
    if les != sorted(les) or les[-1] != float("inf"):
        errors.append("%s: le not ascending to +Inf" % (key,))
    vals = [v for _, v in b]
    if vals != sorted(vals): errors.append("%s: buckets not cumulative" % (key,))
    if vals[-1] != counts.get(key): errors.append("%s: +Inf %s != _count %s" % (key, vals[-1], counts.get(key)))
# Counters against the JSON snapshot taken after them.
for name, labels, v in samples:
    if name == "dioloop_requests_total":
        j = snap["nodes"][labels["node"]]["ops"][labels["op"]]
        if v > j: errors.append("%s%s = %s > JSON %s" % (name, labels, v, j))
if not hist: errors.append("no histogram")
print("\n".join(errors) if errors else "ok %d samples, %d histograms" % (len(samples), len(hist)))
PY
expect_match "--prometheus: valid text exposition format" 'ok [0-9]+ samples, 6 histograms' \
	"$("$IT_PY" promcheck.py prom.txt snap.json 2>&1)"
# promtool (Debian's prometheus package) lints it as Prometheus itself
# parses it: exit status 0 and nothing to say.
if command -v promtool >/dev/null 2>&1; then
	expect_eq "--prometheus: promtool check metrics is clean" "0:" \
		"$(out=$(promtool check metrics <prom.txt 2>&1); echo "$?:$out")"
else
	it_fail "promtool is missing (apt-get install prometheus): the output is not linted"
fi
expect_match "... busy.img's $WRITES writes counted" ".*dioloop_requests_total\\{node=\"busy.img\",op=\"write\"\\} $WRITES .*" \
	"$(paste -sd' ' prom.txt)"
expect_match "... its write latency histogram has $WRITES requests" \
	".*dioloop_request_latency_seconds_count\\{node=\"busy.img\",op=\"write\"\\} $WRITES .*" "$(paste -sd' ' prom.txt)"

must "dioloop stats --prometheus --textfile dioloop.prom MNT" \
	"$DIOLOOP_BIN" stats --prometheus --textfile "$IT_TMP/dioloop.prom" "$MNT"
expect_match "--textfile: the file holds the metrics" '.*# TYPE dioloop_requests_total counter.*' \
	"$(paste -sd' ' dioloop.prom)"
expect_eq "... and no temporary file is left" "dioloop.prom" "$(find . -maxdepth 1 -name '*dioloop.prom*' -printf '%f\n' | paste -sd' ')"
expect_status "--textfile without --prometheus" 2 "$DIOLOOP_BIN" stats --textfile x.prom "$MNT"
dioloop_umount "$MNT"
it_end
