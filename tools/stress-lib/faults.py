# SPDX-License-Identifier: MIT
"""--faults: the load with the daemon's fault injection on, in rounds.

Each round: fio, metaload and fstrim on the inner file system and
blockload.py on the spare node; after a random delay a burst of faults
(EIO on a fraction of writes, of reads and writes or of flushes, or
latency on every read and write) on both nodes through `dioloop fault
MOUNTPOINT/NODE RULE`, then `dioloop fault ... off` and a moment of load
without faults.  The file system may see errors (and give up: ext4 aborts
its journal, XFS shuts down, btrfs aborts the transaction); what must
hold: the daemon keeps running, every sector blockload wrote and was told
was written reads back (also next to failed unaligned writes), and after
umount, mount (log replay), umount, fsck is clean and everything metaload
fsync'd is intact.

Until the daemon has its user-facing fault injection (`dioloop fault`),
every --faults combination is skipped with NOT_AVAILABLE.
"""
import os
import re
import subprocess
import time

import report
from daemon import tail
from modes import finish_rounds, merge_counts, phase, trim_loop
from workloads import BlockLoad, FioLoop, Meta, durable_records, verify_durable

NOT_AVAILABLE = "fault injection not available in this build"

# (what the log says, the rule in `dioloop fault` words)
BURSTS = [
    ("EIO on 20% of writes", ["write", "error=EIO", "rate=20%"]),
    ("EIO on 10% of reads and writes", ["read+write", "error=EIO",
                                        "rate=10%"]),
    ("EIO on 30% of flushes", ["flush", "error=EIO", "rate=30%"]),
    ("20 ms latency on every read and write", ["read+write", "delay=20ms"]),
]


def unavailable(ctx):
    """Why --faults cannot run with this build, or None."""
    try:
        top = subprocess.run([ctx.dioloop, "--help"], capture_output=True,
                             text=True, timeout=30).stdout
        cmd = subprocess.run([ctx.dioloop, "fault", "--help"],
                             capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return NOT_AVAILABLE
    if not re.search(r"^\s+fault\s", top, re.M):
        return NOT_AVAILABLE
    if not all(w in cmd for w in ("error=", "rate=", "delay=", "off")):
        return NOT_AVAILABLE + " (dioloop fault does not take the rules " \
            "tools/stress uses: error=, rate=, delay=, off)"
    return None


class FaultControl:
    """`dioloop fault` on the nodes of one mount."""

    def __init__(self, ctx, mnt, log):
        self.ctx = ctx
        self.mnt = mnt
        self.log = log

    def run(self, node, words):
        argv = [self.ctx.dioloop, "fault", os.path.join(self.mnt, node)] + \
            words
        rc, out = self.ctx.res.run(argv, timeout=60, out=self.log)
        if rc != 0:
            return None, "%s: status %d: %s" % (" ".join(argv), rc,
                                                out.strip())
        return out, None

    def injected(self, node):
        """(errors injected into node so far, problem): from the
        "injected: read=N write=N ..." line of its rule listing (0 when
        the listing has none)."""
        out, problem = self.run(node, [])
        m = re.search(r"^injected:(.*)$", out or "", re.M)
        if not m:
            return 0, problem
        return sum(int(n) for n in re.findall(r"=(\d+)", m.group(1))), None


def run_faults(ctx, c, r):
    t = time.monotonic()
    c.setup()
    t = phase(r, "setup", t)
    r["rounds"] = ctx.rounds
    r["rounds_survived"] = 0
    r["counts"]["faults_injected"] = 0
    round_s = max(3.0, ctx.time / ctx.rounds)
    fc = FaultControl(ctx, c.mnt, os.path.join(c.logs, "fault.log"))
    durable_log = os.path.join(c.logs, "meta.durable.jsonl")
    for rnd in range(1, ctx.rounds + 1):
        seed = c.seed + 1000 * rnd
        name, words = c.rng.choice(BURSTS)
        burst_after = c.rng.uniform(0.2, 0.4) * round_s
        burst_len = c.rng.uniform(0.3, 0.5) * round_s
        ctx.log("round %d/%d: load, after %.1f s %.1f s of %s" %
                (rnd, ctx.rounds, burst_after, burst_len, name))
        logs = os.path.join(c.logs, "round-%d" % rnd)
        os.makedirs(logs, exist_ok=True)
        before = durable_records(durable_log)
        start = time.monotonic()
        block = BlockLoad(ctx, os.path.join(c.mnt, c.fsx_img), logs, seed,
                          rnd)
        workers = [
            FioLoop(ctx, c.fsdir, logs, seed, 0, ctx.fio_scale, True),
            Meta(ctx, c.fsdir, c.logs, seed, 0, rnd, True),
            block,
        ] + trim_loop(ctx, c, logs, 0, True)
        for w in workers:
            w.start()
        # The burst starts at its moment, once metaload made something
        # durable in this round (up to 60 s more).
        while time.monotonic() - start < burst_after or (
                durable_records(durable_log) <= before + 1 and
                time.monotonic() - start < burst_after + 60):
            if any(w.failures for w in workers):
                break
            time.sleep(0.1)
        burst_at = time.monotonic()     # failures seen before: real
        problems = []
        if not any(w.failures for w in workers):
            for node in (c.fs_img, c.fsx_img):
                _, problem = fc.run(node, words + ["seed=%d" % (seed + 1)])
                problems.append(problem)
            time.sleep(burst_len)
            for node in (c.fs_img, c.fsx_img):
                n, problem = fc.injected(node)
                r["counts"]["faults_injected"] += n
                problems.append(problem)
                problems.append(fc.run(node, ["off"])[1])
            # Load without faults for a moment: blockload writes again.
            time.sleep(max(1.0, round_s - (time.monotonic() - start)))
        for w in workers:
            w.stop()
        end = time.monotonic() + 30
        for w in workers:
            w.join(max(0, end - time.monotonic()))
        ctx.res.kill_helpers()
        for w in workers:
            w.join(30)
        if not c.daemon.alive():
            report.fail_first(r, "round %d: the daemon exited under %s with "
                              "status %s, expected it to keep running: %s" %
                              (rnd, name, c.daemon.proc.returncode,
                               tail(c.daemon.logs[-1])))
        for problem in problems:
            if problem:
                report.fail(r, "round %d: %s" % (rnd, problem))
        for w in workers:
            for when, message in w.failures:
                # The file system may fail under faults; blockload's
                # acknowledged sectors must survive them.
                if when < burst_at or w is block:
                    report.fail(r, "round %d (%s): %s" % (rnd, name, message))
                else:
                    r["counts"]["load_errors"] = \
                        r["counts"].get("load_errors", 0) + 1
        merge_counts(r, workers)
        if r["status"] == "FAIL":
            break
        ctx.log("round %d: %d faults injected so far; umount, mount (log "
                "replay), umount, fsck" %
                (rnd, r["counts"]["faults_injected"]))
        problem = c.inner.umount()
        if not problem:
            c.inner.mount(c.inner.dev)
            problem = c.inner.umount() or c.inner.fsck()
        if problem:
            report.fail(r, "round %d, after %s: %s" % (rnd, name, problem))
            break
        c.inner.mount(c.inner.dev)
        nrec, problem = verify_durable(ctx, c.fsdir, c.logs, rnd)
        r["counts"]["durable_records"] = nrec
        if problem:
            report.fail(r, "round %d, after %s: %s" % (rnd, name, problem))
            break
        r["rounds_survived"] = rnd
        ctx.log("round %d survived: fsck clean, %d durable records intact, "
                "%d acknowledged sectors read back" %
                (rnd, nrec, block.result.get("checked_sectors", 0)))
    finish_rounds(c, r, t)
