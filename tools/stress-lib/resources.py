# SPDX-License-Identifier: MIT
"""What tools/stress starts, mounts and attaches, and how it is released.

Everything is recorded the moment it is made and released by release(),
innermost first, also after a failure or Ctrl-C: helper processes killed
by PID, inner file systems unmounted, loop devices detached (only those
backed by a file under the run's own work dir), FUSE mounts unmounted,
daemons stopped by PID (TERM, then KILL).  Every child runs in its own
session, so a Ctrl-C reaches tools/stress alone and it tears down in order.

Threads: workload threads spawn processes while the main thread may be
releasing; spawn() refuses (raises Stopping) once release() has begun.
"""
import os
import signal
import subprocess
import threading
import time


class Stopping(Exception):
    """The run is being torn down: start nothing new."""


def unescape_mount_path(field):
    """/proc/self/mounts escapes space, tab, newline and backslash."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"),
                     ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def mount_points():
    """Mount points, from /proc/self/mounts (never touches a file system,
    which may belong to a dead daemon)."""
    with open("/proc/self/mounts") as f:
        return [unescape_mount_path(line.split()[1]) for line in f
                if len(line.split()) > 2]


def is_mount(path):
    return path in mount_points()


def mounted_under(root):
    return [m for m in mount_points() if m == root or
            m.startswith(root + "/")]


def loop_backing(dev):
    """The file loop device dev is attached to, or ''."""
    try:
        name = os.path.basename(dev)
        with open("/sys/block/%s/loop/backing_file" % name) as f:
            return f.read().strip()
    except OSError:
        return ""


def loops_under(root):
    """Loop devices attached to a file under root."""
    out = []
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return out
    for name in sorted(names):
        if name.startswith("loop") and \
                loop_backing(name).startswith(root + "/"):
            out.append("/dev/" + name)
    return out


def call(argv, timeout=60):
    """Run argv, output discarded; its status, or 124 after timeout."""
    try:
        return subprocess.call(argv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124


def pid_alive(pid):
    """Running and not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


class Resources:
    def __init__(self, root, log):
        self.root = root        # the run's work dir
        self.log = log          # log(message): progress on stderr
        self.lock = threading.Lock()
        self.closing = False
        self.helpers = []       # Popen: fio, fsx, metaload, mkfs, ...
        self.daemons = []       # Popen: dioloop mount -f
        self.inner = []         # mount points of file systems on loop devices
        self.loops = []         # loop devices attached for us
        self.fuse = []          # dioloop mount points

    # ------------------------------------------------------------ recording

    def spawn(self, argv, daemon=False, **kw):
        """Popen(argv) in its own session, recorded; stdin is /dev/null."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        with self.lock:
            if self.closing:
                raise Stopping()
            p = subprocess.Popen(argv, start_new_session=True, **kw)
            (self.daemons if daemon else self.helpers).append(p)
        return p

    def forget(self, p):
        """p has exited and was reaped: never signal that PID again."""
        with self.lock:
            for lst in (self.helpers, self.daemons):
                if p in lst:
                    lst.remove(p)

    def _add(self, lst, item):
        with self.lock:
            lst.append(item)

    def _drop(self, lst, item):
        with self.lock:
            if item in lst:
                lst.remove(item)

    def add_inner(self, path):
        self._add(self.inner, path)

    def forget_inner(self, path):
        self._drop(self.inner, path)

    def add_loop(self, dev):
        self._add(self.loops, dev)

    def forget_loop(self, dev):
        self._drop(self.loops, dev)

    def add_fuse(self, path):
        self._add(self.fuse, path)

    def forget_fuse(self, path):
        self._drop(self.fuse, path)

    # ------------------------------------------------------------ commands

    def run(self, argv, timeout=120, out=None, started=None):
        """Run argv to completion (killed after timeout seconds): returns
        (status, output); status 124 on timeout.  Output goes to the file
        out when given (and is returned too).  started(popen) is called
        once it runs (a worker that may need to signal it)."""
        p = self.spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if started:
            started(p)
        # Interrupted (Ctrl-C): p stays recorded, release() kills it.
        try:
            text, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            text, _ = p.communicate()
            rc = 124
            text += b"\n[tools/stress: killed after %d s]\n" % timeout
        self.forget(p)
        text = text.decode(errors="replace")
        if out:
            with open(out, "a") as f:
                f.write("$ %s\n%s" % (" ".join(argv), text))
        return rc, text

    def kill_helpers(self):
        """kill -9 every helper still running (after a crash: a load
        that did not notice the dead daemon)."""
        with self.lock:
            helpers = list(self.helpers)
        for p in helpers:
            if p.poll() is None:
                self.log("kill -KILL %d (%s)" %
                         (p.pid, os.path.basename(str(p.args[0]))))
                os.kill(p.pid, signal.SIGKILL)

    # ------------------------------------------------------------ release

    def _wait_gone(self, p, seconds):
        try:
            p.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def release(self):
        """Release everything, innermost first; returns what was left
        behind (empty when everything is gone)."""
        with self.lock:
            self.closing = True
            helpers = list(self.helpers)
            daemons = list(self.daemons)
        for p in helpers:
            if p.poll() is None:
                self.log("cleanup: kill -KILL %d (%s)" %
                         (p.pid, os.path.basename(str(p.args[0]))))
                os.kill(p.pid, signal.SIGKILL)
            self._wait_gone(p, 30)
            self.forget(p)
        for path in reversed(list(self.inner)):
            if is_mount(path):
                self.log("cleanup: umount " + path)
                if call(["umount", path]) != 0:
                    call(["umount", "-l", path])
            self.forget_inner(path)
        for dev in sorted(set(self.loops) | set(loops_under(self.root))):
            if loop_backing(dev).startswith(self.root + "/"):
                self.log("cleanup: losetup -d " + dev)
                call(["losetup", "-d", dev])
                for _ in range(100):
                    if not loop_backing(dev).startswith(self.root + "/"):
                        break
                    time.sleep(0.1)
            self.forget_loop(dev)
        for path in reversed(list(self.fuse)):
            for cmd in (["fusermount3", "-u"], ["fusermount3", "-u", "-z"],
                        ["umount", "-l"]):
                if not is_mount(path):
                    break
                self.log("cleanup: %s %s" % (" ".join(cmd), path))
                call(cmd + [path])
            self.forget_fuse(path)
        for p in daemons:
            # Unmounted: it exits by itself, else TERM, then KILL.
            if not self._wait_gone(p, 3):
                self.log("cleanup: kill -TERM daemon %d" % p.pid)
                os.kill(p.pid, signal.SIGTERM)
                if not self._wait_gone(p, 10):
                    self.log("cleanup: kill -KILL daemon %d" % p.pid)
                    os.kill(p.pid, signal.SIGKILL)
                    self._wait_gone(p, 10)
            self.forget(p)
        left = ["still mounted: " + m for m in mounted_under(self.root)]
        left += ["loop device still attached: %s -> %s" % (d, loop_backing(d))
                 for d in loops_under(self.root)]
        left += ["process still running: %d" % p.pid
                 for p in helpers + daemons if pid_alive(p.pid)]
        return left
