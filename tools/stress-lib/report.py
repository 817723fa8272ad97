# SPDX-License-Identifier: MIT
"""Results of tools/stress: one record per combination (backend, file
system, mode), written as a JSON line and printed as one text line; the
totals.  The text is made from the record alone, so `tools/stress --report
results.jsonl` prints the same lines again from a saved run.

Text format (the golden tests in tests/golden/ hold it):

  BACKEND/FS    MODE    STATUS  DURATION  DETAILS
      error lines, indented, for a FAIL (at most MAX_ERRORS)
  ...
  N skipped                       (only when something was skipped)
  N passed, N failed              (always the last line)
"""
import json

MAX_ERRORS = 5
JSON_VERSION = 1


def mib(n):
    return "%.0f MiB" % (n / 1048576.0)


def details_stress(r):
    c = r.get("counts", {})
    parts = ["fio %d runs, %s verified" % (c.get("fio_runs", 0),
                                           mib(r.get("bytes", {}).get(
                                               "fio_verified", 0))),
             "fsx %d ops" % c.get("fsx_ops", 0),
             "meta %d ops (%d files, %d dirs)" % (
                 c.get("meta_ops", 0), c.get("meta_files", 0),
                 c.get("meta_dirs", 0)),
             "fstrim %d" % c.get("fstrim", 0)]
    return ", ".join(parts) + "; fsck clean, model verified"


def details_crash(r):
    c = r.get("counts", {})
    return ("%d/%d rounds survived, %d durable records intact, "
            "fsck clean after each" % (r.get("rounds_survived", 0),
                                       r.get("rounds", 0),
                                       c.get("durable_records", 0)))


def details_faults(r):
    c = r.get("counts", {})
    return ("%d/%d rounds survived, %d faults injected, %d durable records "
            "intact, %d acknowledged sectors read back; fsck clean after "
            "each" % (r.get("rounds_survived", 0), r.get("rounds", 0),
                      c.get("faults_injected", 0),
                      c.get("durable_records", 0),
                      c.get("block_checked_sectors", 0)))


DETAILS = {"stress": details_stress, "crash": details_crash,
           "faults": details_faults}


def line(r):
    """The text line of one record (plus its error lines for a FAIL)."""
    name = "%s/%s" % (r["backend"], r["fs"])
    status = r["status"]
    dur = "%ds" % round(r["duration_s"]) if status != "SKIP" else ""
    if status == "PASS":
        text = DETAILS[r["mode"]](r)
    elif status == "SKIP":
        text = r["reason"]
    else:
        text = r["reason"]
        if r["mode"] in ("crash", "faults") and r.get("rounds"):
            text = "%d/%d rounds survived; %s" % (
                r.get("rounds_survived", 0), r["rounds"], text)
    out = ["%-12s %-6s %-4s %5s  %s" % (name, r["mode"], status, dur, text)]
    more = r.get("errors", [])[1:]     # the first one is the reason
    for e in more[:MAX_ERRORS]:
        out.append("    " + e)
    if len(more) > MAX_ERRORS:
        out.append("    (%d more errors in the JSON results)" %
                   (len(more) - MAX_ERRORS))
    return "\n".join(out)


def totals(results):
    """The closing lines: skipped (if any), then passed and failed."""
    n = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for r in results:
        n[r["status"]] += 1
    out = []
    if n["SKIP"]:
        out.append("%d skipped" % n["SKIP"])
    out.append("%d passed, %d failed" % (n["PASS"], n["FAIL"]))
    return "\n".join(out), n


def record(backend, fs, mode, seed, time_s, **kw):
    """A new result record (status PASS until something fails)."""
    r = {"version": JSON_VERSION, "backend": backend, "fs": fs, "mode": mode,
         "status": "PASS", "reason": "", "seed": seed, "time_s": time_s,
         "started": None, "duration_s": 0.0, "phases": {}, "counts": {},
         "bytes": {}, "errors": []}
    r.update(kw)
    return r


def fail(r, message):
    """Record a failure; the first one is the reason on the text line."""
    if r["status"] != "FAIL":
        r["status"] = "FAIL"
        r["reason"] = message
    r["errors"].append(message)


def fail_first(r, message):
    """A failure that explains the others (a dead daemon): the reason."""
    r["status"] = "FAIL"
    r["reason"] = message
    r["errors"].insert(0, message)


def skip(r, reason):
    r["status"] = "SKIP"
    r["reason"] = reason
    return r


def to_json(r):
    return json.dumps(r, sort_keys=True)


def load(path):
    """The records of a JSON lines file."""
    out = []
    with open(path) as f:
        for no, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                r = json.loads(text)
            except ValueError as e:
                raise ValueError("%s:%d: not JSON: %s" % (path, no, e))
            for key in ("backend", "fs", "mode", "status"):
                if key not in r:
                    raise ValueError("%s:%d: no %r" % (path, no, key))
            r.setdefault("duration_s", 0)
            r.setdefault("reason", "")
            out.append(r)
    return out
