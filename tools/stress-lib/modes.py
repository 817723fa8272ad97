# SPDX-License-Identifier: MIT
"""One combination (backend, file system, mode) from images to result.

stress: images -> dioloop mount --loop -> mkfs -> mount -> fio verify
  jobs + dioloop-fsx on a spare node + metaload + fstrim at once for the
  time given -> umount -> fsck -> mount -> the model and fio's data
  verified -> umount -> dioloop umount (daemon exits 0) -> fsck of the
  image file -> the spare node's bytes = its image's.  An image file that
  is not its own bytes (cow) is checked (`dioloop check`) and exported to
  a raw file (`dioloop convert`) for both; one on an NFS server (nfs) is
  read back over NFS the same way.
crash: the same loads (not verified: they run until they fail) in rounds;
  each round kill -9 of the daemon at a random moment, umount -l, losetup
  -d, fusermount3 -u -z, remount, mount (log replay), umount, fsck,
  mount, every record metaload made durable (fsync'd) in any round intact.
faults: see faults.py.
"""
import hashlib
import os
import random
import time

import report
from daemon import Daemon, Inner, SetupError, tail
from workloads import (FioLoop, FsxLoop, Meta, TrimLoop, durable_records,
                       fio_problem, verify_durable, verify_model)

SPARE_SIZE = "64M"
GRACE = 600         # seconds a worker may overrun the deadline (then: hung)


def sha_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)


class Combo:
    def __init__(self, ctx, backend, fs, mode, seed):
        self.ctx = ctx
        self.backend = backend
        self.fs = fs
        self.mode = mode
        self.seed = seed
        self.rng = random.Random(seed)
        self.dir = os.path.join(ctx.workdir, "%s-%s-%s" % (backend.name,
                                                           fs.name, mode))
        self.src = os.path.join(self.dir, "images")
        self.mnt = os.path.join(self.dir, "nodes")
        self.fsdir = os.path.join(self.dir, "fs")
        self.logs = os.path.join(self.dir, "logs")
        self.daemon = None
        self.inner = None
        # The images' names: fs.img (the file system) and fsx.img (the
        # spare node), unique per run for a backend with a server.
        self.fs_img, self.fsx_img = backend.node_names(ctx, self)

    def image(self, name):
        """Where image name is: a path in the work dir, or a URL."""
        return self.backend.image_path(self.ctx, self.src, name)

    def setup(self):
        """Images, daemon with loop devices, mkfs, mount."""
        for d in (self.src, self.mnt, self.fsdir, self.logs):
            os.makedirs(d, exist_ok=True)
        for name, size in ((self.fs_img, self.fs.size),
                           (self.fsx_img, SPARE_SIZE)):
            argv = self.backend.create(self.ctx, self.image(name), size)
            rc, out = self.ctx.res.run(argv, timeout=120)
            if rc != 0:
                raise SetupError("%s: status %d: %s" % (" ".join(argv), rc,
                                                        out.strip()))
            if self.backend.remote:
                self.ctx.server_images.append(name)
                self.ctx.server_backend[name] = self.backend
                export = getattr(self.ctx, "nfs_export", None)
                if self.backend.name == "nfs" and export and not os.path.isfile(os.path.join(export, name)):
                    raise SetupError(
                        "--nfs-export %s: expected %s there after %s, found "
                        "none: is it the directory of --nfs-url on the "
                        "server?" % (export, name, " ".join(argv)))
        self.daemon = Daemon(self.ctx, self.backend.source(self.ctx, self.src),
                             self.mnt, [self.fs_img, self.fsx_img], self.logs,
                             self.backend.mount_opts)
        loops = self.daemon.start()
        self.inner = Inner(self.ctx, self.fs, self.fsdir, self.logs)
        self.inner.mkfs(loops[self.fs_img])
        self.inner.mount(loops[self.fs_img])


def image_bytes(c, name):
    """After dioloop umount: (path, None) with path a plain file holding
    image name's logical bytes - the image itself (raw), or an export of
    it (cow: after the image's own check passed) - or (None, problem)."""
    path = c.image(name)
    steps = []
    if c.backend.check:
        steps.append(c.backend.check(c.ctx, path))
    if c.backend.export:
        out = os.path.join(c.dir, "export-" + name)
        if os.path.exists(out):
            os.unlink(out)
        steps.append(c.backend.export(c.ctx, path, out))
        path = out
    for argv in steps:
        rc, text = c.ctx.res.run(argv, timeout=600)
        if rc != 0:
            last = [t for t in text.strip().splitlines() if t.strip()][-3:]
            return None, "%s: status %d: %s" % (" ".join(argv), rc,
                                                " | ".join(last))
    return path, None


def drop_export(c, path):
    """Remove an export made by image_bytes (not the image itself)."""
    if path and os.path.dirname(path) == c.dir:
        os.unlink(path)


def fsck_image(c, r):
    """fsck of fs.img's bytes after dioloop umount; failures go to r."""
    path, problem = image_bytes(c, c.fs_img)
    if not problem:
        problem = c.inner.fsck(path, image=True)
    drop_export(c, path)
    if problem:
        report.fail(r, "fsck of the image file after dioloop umount: " +
                    problem)


def run_workers(ctx, workers, deadline, r):
    """Start the workers, stop them at the deadline (or at the first
    failure), wait for them; failures go to r."""
    for w in workers:
        w.start()
    stopped = False
    while any(w.is_alive() for w in workers):
        now = time.monotonic()
        if not stopped and (now >= deadline or
                            any(w.failures for w in workers)):
            for w in workers:
                w.stop()
            stopped = True
        if now > deadline + GRACE:
            report.fail(r, "workers still running %d s after the deadline "
                        "(hung?): %s" % (GRACE, ", ".join(
                            w.name for w in workers if w.is_alive())))
            ctx.res.kill_helpers()
            break
        for w in workers:
            w.join(0.2)
    for w in workers:
        for _, message in w.failures:
            report.fail(r, message)


def merge_counts(r, workers):
    for w in workers:
        for k, v in w.counts.items():
            r["counts"][k] = r["counts"].get(k, 0) + v


def phase(r, name, t0):
    r["phases"][name] = round(time.monotonic() - t0, 1)
    return time.monotonic()


def finish_rounds(c, r, t):
    """After the crash or fault rounds: unmount, dioloop umount, fsck the
    image file; record the time of both phases."""
    for k in ("fio_bytes", "meta_bytes", "trimmed_bytes"):
        r["counts"].pop(k, None)
    t = phase(r, "rounds", t)
    if r["status"] == "FAIL":
        return
    problem = c.inner.umount()
    if problem:
        return report.fail(r, problem)
    for problem in c.daemon.umount():
        report.fail(r, problem)
    fsck_image(c, r)
    phase(r, "checks", t)


def trim_loop(ctx, c, logs, deadline, load_only=False):
    """[the fstrim worker], or [] when the backend cannot discard."""
    if not c.backend.discard:
        return []
    return [TrimLoop(ctx, c.fsdir, logs, deadline, ctx.trim_interval,
                     load_only)]


def trim_words(ctx, c):
    if not c.backend.discard:
        return "no fstrim (the %s backend cannot discard)" % c.backend.name
    return "fstrim every %d s" % ctx.trim_interval


def run_stress(ctx, c, r):
    t = time.monotonic()
    c.setup()
    t = phase(r, "setup", t)
    ctx.log("load for %d s: fio, dioloop-fsx on fsx.img, metaload, %s" %
            (ctx.time, trim_words(ctx, c)))
    deadline = time.monotonic() + ctx.time
    fio = FioLoop(ctx, c.fsdir, c.logs, c.seed, deadline, ctx.fio_scale)
    fsx = FsxLoop(ctx, os.path.join(c.mnt, c.fsx_img), c.logs, c.seed,
                  deadline, ctx.fsx_ops, punch_hole=c.backend.discard)
    meta = Meta(ctx, c.fsdir, c.logs, c.seed, ctx.time, 1)
    workers = [fio, fsx, meta] + trim_loop(ctx, c, c.logs, deadline)
    run_workers(ctx, workers, deadline, r)
    merge_counts(r, workers)
    if not c.daemon.alive():
        report.fail_first(r, "the daemon exited during the load with "
                          "status %s, expected it to keep running: %s" %
                          (c.daemon.proc.returncode, tail(c.daemon.logs[-1])))
    r["bytes"]["fio_verified"] = r["counts"].pop("fio_bytes", 0)
    r["bytes"]["meta_written"] = r["counts"].pop("meta_bytes", 0)
    r["bytes"]["trimmed"] = r["counts"].pop("trimmed_bytes", 0)
    t = phase(r, "load", t)
    if r["status"] == "FAIL":
        return
    ctx.log("checks: umount, fsck")
    ctx.res.run(["sync"], timeout=300)
    problem = c.inner.umount()
    if problem:
        return report.fail(r, problem)
    problem = c.inner.fsck()
    if problem:
        report.fail(r, "fsck after the load: " + problem)
    ctx.log("checks: mount, the model, fio --verify_only")
    c.inner.mount(c.inner.dev)
    problem = verify_model(ctx, c.fsdir, c.logs)
    if problem:
        report.fail(r, problem)
    if fio.last_job:
        out = os.path.join(c.logs, "fio.verify-after-remount.out")
        rc, text = ctx.res.run(["fio", "--verify_only", fio.last_job],
                               timeout=600, out=out)
        if rc != 0:
            report.fail(r, "fio --verify_only after the remount: status %d "
                        "(log: %s): %s" % (rc, out, fio_problem(text)))
    problem = c.inner.umount()
    if problem:
        return report.fail(r, problem)
    ctx.log("checks: dioloop umount, fsck of the image, fsx.img = its node")
    node_sha = sha_of(os.path.join(c.mnt, c.fsx_img))
    for problem in c.daemon.umount():
        report.fail(r, problem)
    fsck_image(c, r)
    path, problem = image_bytes(c, c.fsx_img)
    if problem:
        report.fail(r, "fsx.img after dioloop umount: " + problem)
        img_sha = node_sha
    else:
        img_sha = sha_of(path)
        drop_export(c, path)
    if img_sha != node_sha:
        report.fail(r, "fsx.img after dioloop umount: expected the bytes "
                    "its node had (sha256 %.12s), got sha256 %.12s" %
                    (node_sha, img_sha))
    phase(r, "checks", t)


def run_crash(ctx, c, r):
    t = time.monotonic()
    c.setup()
    t = phase(r, "setup", t)
    r["rounds"] = ctx.rounds
    r["rounds_survived"] = 0
    round_s = max(2.0, ctx.time / ctx.rounds)
    durable_log = os.path.join(c.logs, "meta.durable.jsonl")
    for rnd in range(1, ctx.rounds + 1):
        seed = c.seed + 1000 * rnd
        kill_after = c.rng.uniform(0.3, 1.0) * round_s
        ctx.log("round %d/%d: load, kill -9 of the daemon after %.1f s" %
                (rnd, ctx.rounds, kill_after))
        before = durable_records(durable_log)
        logs = os.path.join(c.logs, "round-%d" % rnd)
        os.makedirs(logs, exist_ok=True)
        start = time.monotonic()
        workers = [
            FioLoop(ctx, c.fsdir, logs, seed, 0, ctx.fio_scale, True),
            FsxLoop(ctx, os.path.join(c.mnt, c.fsx_img), logs, seed, 0,
                    ctx.fsx_ops, True, punch_hole=c.backend.discard),
            Meta(ctx, c.fsdir, c.logs, seed, 0, rnd, True),
        ] + trim_loop(ctx, c, logs, 0, True)
        for w in workers:
            w.start()
        # The kill comes at a random moment, but not before metaload has
        # made something durable in this round (up to 60 s more).
        while time.monotonic() - start < kill_after or (
                durable_records(durable_log) <= before + 1 and
                time.monotonic() - start < kill_after + 60):
            if any(w.failures for w in workers):
                break
            time.sleep(0.1)
        for w in workers:
            for _, message in w.failures:
                report.fail(r, "round %d, before the kill: %s" % (rnd,
                                                                 message))
        killed_at = time.monotonic()    # failures seen before: real
        status = c.daemon.kill9()
        ctx.log("round %d: killed the daemon (status %s) after %.1f s, %d "
                "durable records so far" % (rnd, status, killed_at - start,
                                            durable_records(durable_log)))
        if status != -9:
            report.fail(r, "round %d: kill -9 of the daemon: expected it to "
                        "die of SIGKILL, got %s" % (rnd, status))
        # The loads now fail; give them 30 s to notice, then kill them.
        for w in workers:
            w.stop()
        end = time.monotonic() + 30
        for w in workers:
            w.join(max(0, end - time.monotonic()))
        slow = [w.name for w in workers if w.is_alive()]
        if slow:
            ctx.log("round %d: still running 30 s after the kill: %s" %
                    (rnd, ", ".join(slow)))
        ctx.res.kill_helpers()
        for w in workers:
            w.join(30)
            if r["status"] != "FAIL":
                for when, message in w.failures:
                    if when < killed_at:
                        report.fail(r, "round %d, before the kill: %s" %
                                    (rnd, message))
        merge_counts(r, workers)
        if r["status"] == "FAIL":
            break
        ctx.log("round %d: umount -l, losetup -d, fusermount3 -u -z" % rnd)
        for problem in [c.inner.umount(lazy=True)] + \
                c.daemon.release_dead_mount():
            if problem:
                report.fail(r, "round %d, cleaning up the dead mount: %s" %
                            (rnd, problem))
        if r["status"] == "FAIL":
            break
        loops = c.daemon.start()
        ctx.log("round %d: mount (log replay), umount, fsck" % rnd)
        c.inner.mount(loops[c.fs_img])      # replays the journal
        problem = c.inner.umount() or c.inner.fsck()
        if problem:
            report.fail(r, "round %d, after the restart: %s" % (rnd, problem))
            break
        c.inner.mount(loops[c.fs_img])
        nrec, problem = verify_durable(ctx, c.fsdir, c.logs, rnd)
        r["counts"]["durable_records"] = nrec
        if problem:
            report.fail(r, "round %d: %s" % (rnd, problem))
            break
        r["rounds_survived"] = rnd
        ctx.log("round %d survived: fsck clean, %d durable records intact" %
                (rnd, nrec))
    finish_rounds(c, r, t)

