# SPDX-License-Identifier: MIT
"""One dioloop daemon of a combination: `dioloop mount -f --loop`, its
loop devices, its inner file system, and the ways it ends (dioloop umount,
or kill -9 and the cleanup of the dead mount)."""
import os
import re
import signal
import subprocess
import time

from resources import is_mount, loop_backing

SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:")


class SetupError(Exception):
    """A step the rest of the combination needs failed."""


def tail(path, n=8):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


class Daemon:
    """dioloop serving src at mnt with a loop device on every node."""

    def __init__(self, ctx, src, mnt, nodes, logdir, opts=()):
        self.ctx = ctx
        self.src = src
        self.mnt = mnt
        self.nodes = list(nodes)        # image names expected as nodes
        self.logdir = logdir
        self.opts = list(opts)
        self.proc = None
        self.loops = {}                 # node name -> /dev/loopN
        self.nstarts = 0
        self.logs = []

    def start(self):
        """Mount and attach; returns {node: loop device}."""
        res = self.ctx.res
        self.nstarts += 1
        log = os.path.join(self.logdir, "daemon.%d.log" % self.nstarts)
        loops = os.path.join(self.logdir, "loops.%d" % self.nstarts)
        self.logs.append(log)
        os.makedirs(self.mnt, exist_ok=True)
        transport = getattr(self.ctx, "transport", None)
        argv = [self.ctx.dioloop, "mount", "-f", "--loop"] + self.opts + \
            (["-o", "transport=" + transport] if transport else []) + \
            [self.src, self.mnt]
        self.ctx.log("start: " + " ".join(argv))
        with open(log, "w") as err, open(loops, "w") as out:
            self.proc = res.spawn(argv, daemon=True, stdout=out, stderr=err)
        self.write_pid_file()
        res.add_fuse(self.mnt)
        self.loops = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(loops) as f:
                for text in f:
                    fields = text.split()
                    if len(fields) == 2 and fields[0] not in self.loops:
                        self.loops[fields[0]] = fields[1]
                        res.add_loop(fields[1])
            # (A server's directory may hold other images too: they are
            # nodes with loop devices as well, released with ours.)
            if set(self.nodes) <= set(self.loops):
                break
            if self.proc.poll() is not None:
                raise SetupError("dioloop mount exited with status %s before "
                                 "attaching its loop devices: %s" %
                                 (self.proc.returncode, tail(log)))
            time.sleep(0.1)
        else:
            raise SetupError("dioloop mount --loop: %d of %d loop devices "
                             "after 30 s: %s" % (
                                 len(set(self.nodes) & set(self.loops)),
                                 len(self.nodes), tail(log)))
        missing = set(self.nodes) - set(self.loops)
        if missing or not is_mount(self.mnt):
            raise SetupError("dioloop mount --loop: expected nodes %s with "
                             "loop devices, got %s" %
                             (sorted(self.nodes), self.loops))
        return self.loops

    def write_pid_file(self):
        """logdir/daemon.pid: the running daemon's PID, replaced at once
        (rename) at each start, so that a test can find the daemon from
        the moment tools/stress says the load began, without a search."""
        path = os.path.join(self.logdir, "daemon.pid")
        with open(path + ".tmp", "w") as f:
            f.write("%d\n" % self.proc.pid)
        os.rename(path + ".tmp", path)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        """kill -9 the daemon; returns its exit status (-9 expected)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            return "still running 15 s after kill -9"
        self.ctx.res.forget(self.proc)
        return self.proc.returncode

    def release_dead_mount(self):
        """After kill -9: detach the loop devices, fusermount3 -u -z.
        Returns a list of problems."""
        res = self.ctx.res
        problems = []
        for dev in self.loops.values():
            rc, out = res.run(["losetup", "-d", dev], timeout=60)
            for _ in range(100):
                if not loop_backing(dev):
                    break
                time.sleep(0.1)
            if loop_backing(dev):
                problems.append("losetup -d %s: still attached to %s (%s)" %
                                (dev, loop_backing(dev), out.strip()))
            else:
                res.forget_loop(dev)
        rc, out = res.run(["fusermount3", "-u", "-z", self.mnt], timeout=60)
        if rc != 0 or is_mount(self.mnt):
            problems.append("fusermount3 -u -z %s: status %d: %s" %
                            (self.mnt, rc, out.strip()))
        else:
            res.forget_fuse(self.mnt)
        return problems

    def umount(self):
        """dioloop umount (detach, flush, unmount); the daemon must then
        exit 0.  Returns a list of problems."""
        res = self.ctx.res
        problems = []
        rc, out = res.run([self.ctx.dioloop, "umount", self.mnt], timeout=120)
        if rc != 0:
            problems.append("dioloop umount: status %d: %s" %
                            (rc, out.strip()))
        try:
            status = self.proc.wait(timeout=30)
            res.forget(self.proc)
            if status != 0:
                problems.append("the daemon exited with status %d after "
                                "dioloop umount, expected 0: %s" %
                                (status, tail(self.logs[-1])))
        except subprocess.TimeoutExpired:
            problems.append("the daemon still runs 30 s after dioloop umount")
        if not is_mount(self.mnt):
            res.forget_fuse(self.mnt)
        for dev in self.loops.values():
            if not loop_backing(dev):
                res.forget_loop(dev)
        return problems

    def sanitizer_reports(self):
        """Lines of a sanitizer report in any of this daemon's logs."""
        found = []
        for log in self.logs:
            try:
                with open(log, errors="replace") as f:
                    found += ["%s: %s" % (os.path.basename(log), t.strip())
                              for t in f if SANITIZER.search(t)]
            except OSError:
                pass
        return found[:3]


class Inner:
    """The file system on a loop device, mounted at path."""

    def __init__(self, ctx, fs, path, logdir):
        self.ctx = ctx
        self.fs = fs
        self.path = path
        self.log = os.path.join(logdir, "fs.log")
        self.dev = None

    def mkfs(self, dev):
        # mkfs.btrfs scans every block device of the machine before it
        # writes; another test's loop device failing at that moment (its
        # server gone) fails the scan ("cannot check mount status"), not
        # this device: tried again, at most three times.
        for attempt in range(3):
            rc, out = self.ctx.res.run(self.fs.mkfs + [dev], timeout=300,
                                       out=self.log)
            if rc == 0 or "cannot check mount status" not in out:
                break
            time.sleep(1)
        if rc != 0:
            raise SetupError("%s %s: status %d: %s" % (
                self.fs.mkfs[0], dev, rc, out.strip()[-300:]))

    def mount(self, dev):
        self.dev = dev
        os.makedirs(self.path, exist_ok=True)
        rc, out = self.ctx.res.run(["mount", dev, self.path], timeout=300,
                                   out=self.log)
        if rc != 0:
            raise SetupError("mount %s (%s): status %d: %s" % (
                dev, self.fs.name, rc, out.strip()))
        self.ctx.res.add_inner(self.path)

    def umount(self, lazy=False):
        """0, or a problem string."""
        argv = ["umount"] + (["-l"] if lazy else []) + [self.path]
        rc, out = self.ctx.res.run(argv, timeout=300, out=self.log)
        if rc == 0:
            self.ctx.res.forget_inner(self.path)
            return None
        return "%s: status %d: %s" % (" ".join(argv), rc, out.strip())

    def fsck(self, target=None, image=False):
        """A read-only check of the device (or an image file): None when
        clean, else a problem string naming the log."""
        target = target or self.dev
        argv = self.fs.fsck_image(target) if image else self.fs.fsck(target)
        log = os.path.join(os.path.dirname(self.log), "fsck.log")
        rc, out = self.ctx.res.run(argv, timeout=600, out=log)
        if rc == 0:
            return None
        last = [t for t in out.strip().splitlines() if t.strip()][-3:]
        return "%s: status %d (log: %s): %s" % (" ".join(argv), rc, log,
                                                " | ".join(last))
