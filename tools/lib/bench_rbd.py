# SPDX-License-Identifier: MIT
"""The rbd targets of tools/bench (imported by it).

A throwaway single-node Ceph cluster (tools/ceph-cluster: one mon, one
bluestore OSD, 127.0.0.1) under the bench's temporary directory, started
at the first rbd target and stopped at the end by the bench's cleanup.
The bench image is imported into it once (`rbd import`: random data, every
object written, as the other targets' image is fully allocated) as
rbd/bench.img.

  rbd-node   a dioloop node of `dioloop mount rbd://rbd MNT` (CEPH_CONF
             names the cluster), MNT/bench.img
  rbd-bench  librbd's own `rbd bench` on the same image: the same I/O
             size, --io-threads = the fio queue depth, the same pattern
             (rand, or full-seq for fio's one sequential stream) and
             direction, the limit rbd-node is measured
             against.  rbd bench is not time based: a warm-up run, grown
             until it lasts the ramp time, tells the rate, and the
             measured run's --io-total is that rate x the runtime.  It
             reports ops/sec and bytes/sec but no latency: the QD1 cell's
             latency is derived, QD / ops per second (Little's law).
"""
import os
import re
import signal
import subprocess
import time

RBD_TARGETS = {
    "rbd-node": "dioloop rbd node",
    "rbd-uring-node": "dioloop rbd node, io_uring",
    "rbd-bench": "rbd bench (librbd)",
    "rbd-fio": "fio's rbd engine (librbd)",
}
RBD_POOL = "rbd"
RBD_IMAGE = "bench.img"
# fio rw -> rbd bench (--io-type, --io-pattern); fio's default rwmixread
# is 50, as is rbd bench's --rw-mix-read.  fio's sequential job is one
# stream with the queue depth's requests in flight at consecutive
# offsets: rbd bench's "full-seq".  Its "seq" is --io-threads streams,
# each in its own part of the image, so that the requests in flight are
# spread over as many objects (and placement groups) instead of two or
# three: not the workload fio runs on the node.
RBD_IO = {"randread": ("read", "rand"), "randwrite": ("write", "rand"),
          "read": ("read", "full-seq"), "write": ("write", "full-seq"),
          "randrw": ("readwrite", "rand"), "rw": ("readwrite", "full-seq"),
          "readwrite": ("readwrite", "full-seq")}
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def rbd_packages(targets):
    """The Debian packages the rbd targets need (for tools/lib/deps.sh)."""
    return " ceph-mon ceph-osd ceph-common" if set(RBD_TARGETS) & set(targets) else ""


def rbd_fio_args(cluster):
    """fio's options for its rbd engine on the bench image (in place of
    the filename, libaio and direct=1), and the environment it runs in."""
    env = dict(os.environ, CEPH_CONF=cluster.nocache_conf)
    return ["--ioengine=rbd", "--clientname=admin", f"--pool={RBD_POOL}",
            f"--rbdname={RBD_IMAGE}"], env


def rbd_bench_args(rw, bs, qd):
    """rbd bench options for a fio workload: (list, None), or (None, why
    it cannot be mapped)."""
    if rw not in RBD_IO:
        return None, f"fio rw={rw} has no rbd bench --io-type/--io-pattern"
    io_type, pattern = RBD_IO[rw]
    # The cache off, as the node has it (backends/rbd/url.c): with it on,
    # rbd bench's writes complete in the client's memory.
    return ["--io-type", io_type, "--io-pattern", pattern,
            "--io-size", bs.upper(), "--io-threads", str(qd),
            "--rbd_cache=false"], None


def rbd_notes(targets, workloads):
    """Lines for the report's notes: what the rbd columns are."""
    out = []
    if "rbd-bench" in targets:
        out.append("- rbd bench (librbd): `rbd bench` with the fio workload's I/O size, "
                   "pattern and direction, --io-threads = queue depth, librbd's cache off "
                   "as the node has it; its ops/sec and "
                   "bytes/sec (ops/sec x I/O size here, its printed figure is rounded). "
                   "It reports no latency: its QD1 latency is QD / ops per second.")
        for w, (label, rw, bs, qd, _) in workloads.items():
            why = rbd_bench_args(rw, bs, qd)[1]
            if why:
                out.append(f"- rbd bench, {label}: empty, {why}.")
    if "rbd-fio" in targets:
        out.append("- fio's rbd engine (librbd): fio's own librbd client reading into and "
                   "writing from fio's buffers, as an application (or QEMU's rbd driver) "
                   "does; librbd's cache off.")
    if set(RBD_TARGETS) & set(targets):
        out.append("- rbd columns: a throwaway one-OSD Ceph cluster on 127.0.0.1 "
                   "(tools/ceph-cluster) on the same cores; the OSD's CPU is not "
                   "counted as server CPU.")
    return out


class RbdCluster:
    """tools/ceph-cluster start DIR, and the bench image imported into it,
    at the first ensure(); stop() undoes it."""

    def __init__(self, root, log, directory, image, logpath):
        self.script = os.path.join(root, "tools", "ceph-cluster")
        self.log = log
        self.dir, self.image, self.logpath = directory, image, logpath
        self.proc = None
        self.ready = False
        self.spec = f"{RBD_POOL}/{RBD_IMAGE}"
        self.url = f"rbd://{RBD_POOL}"

    def ensure(self):
        """Start it once (a failed start is not retried); returns self."""
        if self.proc is None:
            self.log(f"starting a Ceph cluster in {self.dir}")
            self.start()
        if not self.ready:
            raise RuntimeError("the Ceph cluster did not start (see the first error)")
        return self

    def start(self, timeout=300):
        directory, image, logpath = self.dir, self.image, self.logpath
        with open(logpath, "a") as logf:
            self.proc = subprocess.Popen(["bash", self.script, "start", directory],
                                         stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=logf, start_new_session=True)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"tools/ceph-cluster start took over {timeout} s; "
                               f"log {logpath}") from None
        if rc != 0:
            with open(logpath) as f:
                tail = " | ".join(f.read().strip().splitlines()[-2:])
            raise RuntimeError(f"tools/ceph-cluster start failed (exit {rc}): {tail}")
        # For rbd, rbd bench and dioloop (rbd:// URLs read $CEPH_CONF).
        os.environ["CEPH_CONF"] = os.path.join(directory, "ceph.conf")
        # For fio's rbd engine, which takes no librbd options: the same
        # file with librbd's cache off, as the node and rbd bench have it.
        self.nocache_conf = os.path.join(directory, "ceph-nocache.conf")
        with open(os.environ["CEPH_CONF"]) as src, \
                open(self.nocache_conf, "w") as dst:
            dst.write(src.read() + "\n[client]\n\trbd cache = false\n")
        size = os.stat(image).st_size
        self.log(f"importing the {size >> 20} MiB image into {self.spec}")
        r = subprocess.run(["rbd", "import", "--no-progress", image, self.spec],
                           capture_output=True, text=True, timeout=3600)
        if r.returncode != 0:
            raise RuntimeError(f"rbd import failed: {r.stderr.strip()}")
        # Every object written (random data: rbd import skips no zeros).
        r = subprocess.run(["rbd", "du", "--format", "json", self.spec],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r'"used_size":\s*(\d+)', r.stdout)
        if not m:
            self.log(f"could not check that {self.spec} is fully written: {r.stderr.strip()}")
        elif int(m.group(1)) < size:
            raise RuntimeError(f"{self.spec} is not fully written "
                               f"({m.group(1)} of {size} bytes)")
        self.ready = True

    def stop(self):
        """The start script (if still running) gets SIGTERM, on which it
        stops what it started; then tools/ceph-cluster stop DIR (daemons
        by PID, DIR removed)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=180)
            except subprocess.TimeoutExpired:
                self.log(f"tools/ceph-cluster start (pid {self.proc.pid}) "
                         "ignores SIGTERM: SIGKILL")
                self.proc.kill()
                self.proc.wait()
        if os.path.exists(self.dir):
            with open(self.logpath, "a") as logf:
                rc = subprocess.run(["bash", self.script, "stop", self.dir],
                                    stdout=logf, stderr=logf).returncode
            if rc != 0:
                self.log(f"tools/ceph-cluster stop {self.dir} failed (exit {rc}); "
                         f"log {self.logpath}")
        os.environ.pop("CEPH_CONF", None)


def parse_rbd_bench(out):
    """rbd bench's last line `elapsed: S ops: N ops/sec: X bytes/sec: Y U/s`:
    (ops, ops/sec, bytes/sec) or None."""
    m = re.search(r"elapsed:\s*(\d+)\s+ops:\s*(\d+)\s+ops/sec:\s*([\d.]+)\s+"
                  r"bytes/sec:\s*([\d.]+)\s*([KMGT]?i?B)/s", out)
    if not m:
        return None
    return (int(m.group(2)), float(m.group(3)),
            float(m.group(4)) * _UNITS.get(m.group(5), 1))


def _run_bench(spec, args, total, timeout):
    """One rbd bench of total bytes: (parsed, wall seconds, error).  On a
    timeout or an exception (an interrupt of tools/bench) subprocess.run
    kills it (SIGKILL: rbd ignores SIGTERM)."""
    cmd = ["rbd", "bench"] + args + ["--io-total", str(total), spec]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, 0, f"rbd bench did not finish in {timeout} s"
    wall = time.monotonic() - t0
    parsed = parse_rbd_bench(r.stdout)
    if r.returncode != 0 or parsed is None:
        return None, wall, (f"rbd bench exit {r.returncode}: " + " | ".join(
            (r.stdout + r.stderr).strip().splitlines()[-2:]))
    return parsed, wall, None


def rbd_bench_run(cluster, workload, spec, args, rnd, machine=None):
    """rbd bench for one fio workload (spec: tools/bench's WORKLOADS
    tuple; args: its options, runtime and ramp): a result record like
    tools/bench's fio records.  machine: (sample, per_io), tools/bench's
    machine counters, read around the measured run (the whole of it: rbd
    bench has no window of its own)."""
    _, rw, bs, qd, _ = spec
    runtime, ramp = args.runtime, args.ramp
    rec = {"kind": "run", "round": rnd, "target": "rbd-bench",
           "workload": workload, "iops": None, "bw_mib_s": None,
           "lat_us_mean": None, "clat_us_p99": None, "fio_usr_cpu": None,
           "fio_sys_cpu": None, "server_cpu_pct": None,
           "server_cpu_us_per_io": None, "loadavg_1m": os.getloadavg()[0],
           "error": None}
    opts, why = rbd_bench_args(rw, bs, qd)
    if opts is None:
        rec["error"] = why
        return rec
    io = {"K": 1 << 10, "M": 1 << 20}[bs[-1].upper()] * int(bs[:-1])
    # Warm-up, which also measures the rate: grown until it lasts the ramp
    # time (at least 0.5 s).
    total, least = io * qd * 16, max(ramp, 0.5)
    for _ in range(12):
        parsed, wall, err = _run_bench(cluster.spec, opts, total, 600)
        if err:
            rec["error"] = "warm-up: " + err
            return rec
        rate = total / max(wall, 1e-3)
        if wall >= least:
            break
        total *= 4 if wall < least / 4 else 2
    total = max(io * qd, int(rate * runtime) // io * io)
    m0 = machine[0]() if machine else None
    parsed, wall, err = _run_bench(cluster.spec, opts, total, 10 * runtime + 120)
    m1 = machine[0]() if machine else None
    if err:
        rec["error"] = err
        return rec
    ops, ops_s, bytes_s = parsed
    rec["iops"] = ops_s
    rec["bw_mib_s"] = ops_s * io / (1 << 20)
    rec["rbd_bytes_per_s"] = bytes_s
    rec["rbd_wall_s"] = wall
    if ops_s:
        rec["lat_us_mean"] = 1e6 * qd / ops_s
    if machine:
        rec.update(machine[1](m0, m1, wall, ops_s))
    return rec
