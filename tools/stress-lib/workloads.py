# SPDX-License-Identifier: MIT
"""The loads tools/stress runs at once on a combination, each on its own
thread: fio verify jobs in the inner file system, dioloop-fsx on a spare
node, the metadata workload (metaload.py), periodic fstrim.

Each worker runs until stop() or its deadline, then finishes the run in
progress (a fio or fsx run is a few seconds).  A failure is recorded with
the time it was seen (crash mode keeps only those seen before the kill)
and stops that worker.  load_only: run without end and without counting
on the result (crash rounds), until the run is torn down.
"""
import json
import os
import re
import shutil
import sys
import threading
import time

from resources import Stopping

HERE = os.path.dirname(os.path.abspath(__file__))

# fio jobs: random and sequential, several block sizes, direct and
# buffered, each written then read back with verify=crc32c.  Sizes are in
# units of the scale (MiB): short mode uses scale 4, the long modes 16.
FIO_JOBS = [
    ("rand-4k-direct", "rw=randwrite\nbs=4k\ndirect=1\nioengine=libaio\n"
     "iodepth=16\n", 4),
    ("seq-128k-direct", "rw=write\nbs=128k\ndirect=1\nioengine=libaio\n"
     "iodepth=4\n", 4),
    ("rand-4k-64k-buffered", "rw=randwrite\nbsrange=4k-64k\nioengine=psync\n"
     "fsync=16\n", 2),
    ("rand-512-16k-direct", "rw=randwrite\nbsrange=512-16k\nblockalign=512\n"
     "direct=1\nioengine=libaio\niodepth=8\n", 1),
    ("seq-1m-buffered", "rw=write\nbs=1m\nioengine=psync\nend_fsync=1\n", 4),
]


def fio_jobfile(path, directory, scale, seed, load_only=False):
    """Write the job file; returns the bytes one run writes (and, when
    verifying, reads back)."""
    total = 0
    lines = ["[global]", "directory=%s" % directory, "thread",
             "randseed=%d" % seed, "verify_state_save=0"]
    if load_only:
        lines += ["time_based", "runtime=86400"]
    else:
        lines += ["verify=crc32c", "verify_fatal=1", "do_verify=1"]
    for name, body, units in FIO_JOBS:
        size = units * scale
        total += size << 20
        lines += ["", "[%s]" % name, body.rstrip(), "size=%dM" % size]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return total


def fio_problem(out):
    """The lines of fio output that say what went wrong."""
    keep = [t.strip() for t in out.splitlines()
            if re.search(r"verify|crc32c|bad (magic|header)|err= *[1-9]|"
                         r"fio: |error", t, re.I)]
    return " | ".join(keep[:4]) or out.strip()[-300:]


class Worker(threading.Thread):
    def __init__(self, ctx, name, deadline, load_only=False):
        super().__init__(name=name, daemon=True)
        self.ctx = ctx
        self.deadline = deadline
        self.load_only = load_only
        self.stopping = threading.Event()
        self.failures = []      # (monotonic time, message)
        self.counts = {}
        self.proc = None        # the process of the run in progress
        self.term_on_stop = load_only

    def stop(self):
        """No new run; with term_on_stop, SIGTERM (by PID) to the one in
        progress too (metaload and blockload then end cleanly)."""
        self.stopping.set()
        p = self.proc
        if p is not None and self.term_on_stop and p.poll() is None:
            p.terminate()

    def run_proc(self, argv, timeout, out):
        """ctx.res.run, keeping the process at hand for stop()."""
        def started(p):
            self.proc = p
            if self.stopping.is_set() and self.term_on_stop:
                p.terminate()
        try:
            return self.ctx.res.run(argv, timeout=timeout, out=out,
                                    started=started)
        finally:
            self.proc = None

    def more(self):
        return not self.stopping.is_set() and (
            self.load_only or time.monotonic() < self.deadline)

    def fail(self, message):
        self.failures.append((time.monotonic(), message))

    def count(self, key, n=1):
        self.counts[key] = self.counts.get(key, 0) + n

    def run(self):
        try:
            self.body()
        except Stopping:
            pass
        except Exception as e:     # a bug in tools/stress: say so
            self.fail("%s: tools/stress internal error: %r" % (self.name, e))


class FioLoop(Worker):
    """fio runs one after the other in fsdir/fio, each with a new seed."""

    def __init__(self, ctx, fsdir, logdir, seed, deadline, scale,
                 load_only=False):
        super().__init__(ctx, "fio", deadline, load_only)
        self.dir = os.path.join(fsdir, "fio")
        self.logdir = logdir
        self.seed = seed
        self.scale = scale
        self.last_job = None

    def body(self):
        n = 0
        while self.more():
            n += 1
            # A fresh set of files each run: blocks are freed and
            # reallocated, and fstrim has something to trim.
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir, exist_ok=True)
            job = os.path.join(self.logdir, "fio.%d.job" % n)
            nbytes = fio_jobfile(job, self.dir, self.scale, self.seed + n,
                                 self.load_only)
            out = os.path.join(self.logdir, "fio.%d.out" % n)
            timeout = 86400 if self.load_only else 600
            rc, text = self.run_proc(["fio", job], timeout, out)
            if rc != 0:
                self.fail("fio run %d: status %d (log: %s): %s" %
                          (n, rc, out, fio_problem(text)))
                return
            self.count("fio_runs")
            self.count("fio_bytes", nbytes)
            self.last_job = job
            if self.load_only:
                return


class FsxLoop(Worker):
    """dioloop-fsx runs on a spare node, each with the next seed."""

    def __init__(self, ctx, node, logdir, seed, deadline, nops,
                 load_only=False, punch_hole=True):
        super().__init__(ctx, "fsx", deadline, load_only)
        self.node = node
        self.logdir = logdir
        self.seed = seed
        self.nops = nops
        # -H: no punch_hole, on a node that cannot deallocate
        self.flags = [] if punch_hole else ["-H"]

    def body(self):
        n = 0
        while self.more():
            n += 1
            seed = self.seed + n
            nops = 100000000 if self.load_only else self.nops
            argv = [self.ctx.fsx, "-q", "-S", str(seed), "-N", str(nops),
                    "-o", "256K", "-B", "-a"] + self.flags + [self.node]
            out = os.path.join(self.logdir, "fsx.%d.out" % n)
            rc, text = self.run_proc(argv, 86400 if self.load_only else 600,
                                     out)
            if rc != 0:
                first = [t for t in text.splitlines() if "fsx:" in t][:3]
                self.fail("dioloop-fsx -S %d: status %d (log: %s): %s" %
                          (seed, rc, out, " | ".join(first) or text[-300:]))
                return
            self.count("fsx_runs")
            self.count("fsx_ops", nops)


class TrimLoop(Worker):
    """fstrim of the inner file system every interval seconds."""

    def __init__(self, ctx, fsdir, logdir, deadline, interval,
                 load_only=False):
        super().__init__(ctx, "fstrim", deadline, load_only)
        self.fsdir = fsdir
        self.log = os.path.join(logdir, "fstrim.out")
        self.interval = interval

    def body(self):
        while True:
            self.stopping.wait(self.interval)
            if not self.more():
                return
            rc, text = self.ctx.res.run(["fstrim", "-v", self.fsdir],
                                        timeout=300, out=self.log)
            if rc != 0:
                self.fail("fstrim -v %s: status %d: %s" %
                          (self.fsdir, rc, text.strip()))
                return
            self.count("fstrim")
            m = re.search(r"\((\d+) bytes\) trimmed", text)
            if m:
                self.count("trimmed_bytes", int(m.group(1)))


class Meta(Worker):
    """metaload.py run in fsdir/meta (one process for the whole run)."""

    def __init__(self, ctx, fsdir, logdir, seed, seconds, rnd,
                 load_only=False):
        super().__init__(ctx, "meta", time.monotonic() + seconds, load_only)
        self.dir = os.path.join(fsdir, "meta")
        self.state = os.path.join(logdir, "meta.state.json")
        self.durable = os.path.join(logdir, "meta.durable.jsonl")
        self.out = os.path.join(logdir, "meta.r%d.out" % rnd)
        self.seed = seed
        self.seconds = 86400 if load_only else seconds
        self.round = rnd
        self.result = {}
        self.term_on_stop = True    # it ends its op and writes its state

    def body(self):
        argv = [sys.executable, os.path.join(HERE, "metaload.py"), "run",
                self.dir, "--seed", str(self.seed), "--seconds",
                str(self.seconds), "--state", self.state, "--durable",
                self.durable, "--round", str(self.round)]
        rc, text = self.run_proc(argv, self.seconds + 600, self.out)
        try:
            self.result = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.result = {}
        for key, name in (("ops", "meta_ops"), ("files", "meta_files"),
                          ("dirs", "meta_dirs"),
                          ("bytes_written", "meta_bytes")):
            self.count(name, self.result.get(key, 0))
        if rc != 0:
            self.fail("metaload: status %d (log: %s): %s" % (
                rc, self.out, self.result.get("error") or text[-300:]))



def durable_records(path):
    try:
        with open(path) as f:
            return sum(1 for t in f if t.strip())
    except OSError:
        return 0


def verify_model(ctx, fsdir, logdir):
    """metaload.py verify after the remount: None, or the problem."""
    meta = os.path.join(fsdir, "meta")
    out = os.path.join(logdir, "meta.verify.out")
    rc, text = ctx.res.run([sys.executable, os.path.join(HERE, "metaload.py"),
                            "verify", meta, "--state",
                            os.path.join(logdir, "meta.state.json")],
                           timeout=1200, out=out)
    return summarize_verify(rc, text, out, "model check after the remount")


def verify_durable(ctx, fsdir, logdir, rnd):
    """metaload.py verify-durable: (records checked, None or problem)."""
    meta = os.path.join(fsdir, "meta")
    out = os.path.join(logdir, "meta.durable.r%d.out" % rnd)
    rc, text = ctx.res.run([sys.executable, os.path.join(HERE, "metaload.py"),
                            "verify-durable", meta, "--durable",
                            os.path.join(logdir, "meta.durable.jsonl")],
                           timeout=1200, out=out)
    try:
        nrec = json.loads(text.strip().splitlines()[-1]).get("records", 0)
    except (ValueError, IndexError):
        nrec = 0
    return nrec, summarize_verify(rc, text, out, "durable records")


def summarize_verify(rc, text, out, what):
    if rc == 0:
        return None
    try:
        res = json.loads(text.strip().splitlines()[-1])
        first = res.get("first") or [res.get("error", "")]
        return "%s: %s differences (log: %s): %s" % (
            what, res.get("differences", "?"), out, "; ".join(first[:3]))
    except (ValueError, IndexError):
        return "%s: status %d (log: %s): %s" % (what, rc, out, text[-300:])


class BlockLoad(Worker):
    """blockload.py on a spare node: acknowledged writes must read back,
    through fault bursts; it runs until stop() (SIGTERM)."""

    def __init__(self, ctx, node, logdir, seed, rnd):
        super().__init__(ctx, "blockload", 0, load_only=True)
        self.node = node
        self.out = os.path.join(logdir, "blockload.r%d.out" % rnd)
        self.seed = seed
        self.result = {}
        self.status = None

    def body(self):
        argv = [sys.executable, os.path.join(HERE, "blockload.py"),
                self.node, "--seed", str(self.seed)]
        rc, text = self.run_proc(argv, 86400, self.out)
        self.status = rc
        try:
            self.result = json.loads(text.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.result = {}
        for key in ("writes", "write_errors", "read_errors",
                    "checked_sectors"):
            self.count("block_" + key, self.result.get(key, 0))
        if rc != 0:
            self.fail("blockload on %s: status %d (log: %s): %s" % (
                os.path.basename(self.node), rc, self.out,
                self.result.get("error") or text[-300:]))
