#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A metadata-heavy file workload with an in-memory model, for tools/stress.

  metaload.py run DIR --seed N --seconds S --state FILE --durable LOG
              [--round R]
  metaload.py verify DIR --state FILE
  metaload.py verify-durable DIR --durable LOG

run: random creates, writes, appends, truncates, renames (of files and of
directories, across directories, over existing files), hard links,
symlinks, unlinks, rmdirs, fsyncs of files and directories, in directories
up to MAX_DEPTH levels deep under DIR/live-rR.  Every result is checked
against the model as it goes (reads, stats and directory listings).

Durable records: now and then a file is made durable -- written, fsync'd,
renamed (or created) into DIR/durable/rR/..., fsync'd again with its
directory -- and only then appended to LOG (a file outside the file system
under test), once an fsync of the round's probe file (DIR/probe-rR, empty)
has succeeded after it.  The probe is needed because a directory fsync
does not always report a file system that has shut down: XFS's returns 0
when the directory has nothing left in its log, and after a log write
error the shutdown drops (unpins) the directory's unwritten changes, so
"mkdir, fsync of its parent" can succeed with the new directory lost.  A
regular file's fsync fails on a shut-down file system (XFS, ext4), and a
shutdown is permanent: a probe fsync that succeeds after the durable
steps shows that the file system had not shut down when they returned.  A durable file is never touched again, so after a crash each
record of LOG must be intact, whatever happened to the rest.

At the end (the time is up, or SIGTERM) the model is written to --state
and one JSON line of statistics to stdout.  Exit status: 0 done, 1 the file
system disagreed with the model (the message says where), 3 an operation
failed (an errno, expected with --crash once the daemon is killed), 2 usage.

verify: DIR must hold exactly what the model of --state says (every path,
type, size, content, symlink target, hard-link group and link count).
verify-durable: every record of LOG is intact, and every file under DIR
can be read.  Both print one JSON line; exit 0 clean, 1 differences.
"""
import argparse
import errno
import hashlib
import json
import os
import random
import signal
import stat
import sys
import time

MAX_DEPTH = 6               # live directories nest at most this deep
MAX_LIVE_BYTES = 48 << 20   # model data kept in memory (live files)
MAX_LIVE_ENTRIES = 3000     # past this, the workload shrinks the tree
MAX_REPORT = 20             # differences listed by verify

# Relative frequency of each operation.
OP_WEIGHTS = {
    "mkdir": 8, "create": 18, "write": 12, "append": 6, "truncate": 4,
    "rename_file": 10, "rename_dir": 3, "link": 6, "symlink": 3,
    "unlink": 10, "rmdir": 3, "rmtree": 1, "fsync": 5, "fsync_dir": 3,
    "read_check": 8, "stat_check": 6, "readdir_check": 4, "durable": 4,
}


class ModelMismatch(Exception):
    """The file system disagrees with the model."""


class Inode:
    """A regular file of the model; its links are paths in Model.files."""
    __slots__ = ("ident", "data", "links")

    def __init__(self, ident, data):
        self.ident = ident
        self.data = bytearray(data)
        self.links = 0


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def ename(err):
    return errno.errorcode.get(err.errno, str(err.errno))


def fsync_path(path, directory=False):
    """fsync a file or a directory by path."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class Workload:
    """The model and the operations; paths are relative to self.root."""

    def __init__(self, root, seed, rnd, durable_log):
        self.root = root
        self.rng = random.Random(seed)
        self.live = "live-r%d" % rnd
        self.durable_dir = "durable/r%d" % rnd
        self.durable_log = durable_log
        self.probe_name = "probe-r%d" % rnd
        self.probe = None              # fd of the probe file (setup)
        self.dirs = {self.live}        # live directories
        self.files = {}                # live path -> Inode
        self.symlinks = {}             # live path -> target
        self.durable_dirs = [self.durable_dir]
        self.durable = {}   # path -> ("file", Inode) or ("symlink", target)
        self.counter = 0
        self.next_inode = 0
        self.live_bytes = 0
        self.ops = {}
        self.bytes_written = 0
        self.nrecords = 0

    # ------------------------------------------------------------ helpers

    def p(self, rel):
        return os.path.join(self.root, rel)

    def name(self, prefix):
        self.counter += 1
        return "%s%d" % (prefix, self.counter)

    def depth(self, rel):
        return rel.count("/")

    def random_size(self):
        r = self.rng.random()
        if r < 0.15:
            return 0
        if r < 0.65:
            return self.rng.randint(1, 4096)
        if r < 0.98:
            return self.rng.randint(4097, 65536)
        return self.rng.randint(65537, 512 << 10)

    def pick(self, seq):
        return self.rng.choice(sorted(seq)) if seq else None

    def children(self, rel):
        """Names the model has directly in live directory rel."""
        pre = rel + "/"
        out = set()
        for coll in (self.dirs, self.files, self.symlinks):
            for q in coll:
                if q.startswith(pre) and "/" not in q[len(pre):]:
                    out.add(q[len(pre):])
        return out

    def new_inode(self, data):
        self.next_inode += 1
        ino = Inode(self.next_inode, data)
        self.live_bytes += len(data)
        return ino

    def add_link(self, rel, ino):
        self.files[rel] = ino
        ino.links += 1

    def drop_link(self, rel):
        ino = self.files.pop(rel)
        ino.links -= 1
        if ino.links == 0:
            self.live_bytes -= len(ino.data)

    def record(self, rec):
        """Append one durable record to the log (after it is durable, and
        the probe's fsync shows the file system did not shut down before
        it: see the module's comment)."""
        try:
            os.fsync(self.probe)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.p(self.probe_name))
        line = json.dumps(rec, sort_keys=True) + "\n"
        os.write(self.durable_log, line.encode())
        self.nrecords += 1

    # ------------------------------------------------------------ setup

    def setup(self):
        """Make DIR, DIR/live-rR and DIR/durable/rR, durably."""
        for rel in ("", "durable", self.durable_dir, self.live):
            path = self.p(rel) if rel else self.root
            if not os.path.isdir(path):
                os.mkdir(path)
                fsync_path(os.path.dirname(path.rstrip("/")), True)
        self.probe = os.open(self.p(self.probe_name),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fsync_path(self.root, True)
        self.record({"kind": "dir", "path": self.durable_dir})

    # ------------------------------------------------------------ operations

    def op_mkdir(self):
        parents = [d for d in self.dirs if self.depth(d) < MAX_DEPTH]
        parent = self.pick(parents)
        rel = parent + "/" + self.name("d")
        os.mkdir(self.p(rel))
        self.dirs.add(rel)

    def op_create(self):
        if self.live_bytes > MAX_LIVE_BYTES:
            return self.op_unlink()
        rel = self.pick(self.dirs) + "/" + self.name("f")
        data = self.rng.randbytes(self.random_size())
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            self.write_all(fd, data, 0)
            if self.rng.random() < 0.2:
                os.fsync(fd)
        finally:
            os.close(fd)
        self.bytes_written += len(data)
        self.add_link(rel, self.new_inode(data))

    def write_all(self, fd, data, off):
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done:], off + done)

    def op_write(self):
        rel = self.pick(self.files)
        if rel is None or self.live_bytes > MAX_LIVE_BYTES:
            return self.op_create()
        ino = self.files[rel]
        size = len(ino.data)
        off = self.rng.randint(0, size + 8192)
        data = self.rng.randbytes(self.rng.randint(1, 65536))
        fd = os.open(self.p(rel), os.O_WRONLY)
        try:
            self.write_all(fd, data, off)
        finally:
            os.close(fd)
        self.bytes_written += len(data)
        grow = max(0, off + len(data) - size)
        ino.data.extend(bytes(grow))
        ino.data[off:off + len(data)] = data
        self.live_bytes += grow

    def op_append(self):
        rel = self.pick(self.files)
        if rel is None:
            return self.op_create()
        ino = self.files[rel]
        data = self.rng.randbytes(self.rng.randint(1, 16384))
        fd = os.open(self.p(rel), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.bytes_written += len(data)
        ino.data.extend(data)
        self.live_bytes += len(data)

    def op_truncate(self):
        rel = self.pick(self.files)
        if rel is None:
            return self.op_create()
        ino = self.files[rel]
        size = len(ino.data)
        new = self.rng.randint(0, size + 65536) if size < 65536 else \
            self.rng.randint(0, size)
        os.truncate(self.p(rel), new)
        if new < size:
            del ino.data[new:]
        else:
            ino.data.extend(bytes(new - size))
        self.live_bytes += new - size

    def op_rename_file(self):
        src = self.pick(list(self.files) + list(self.symlinks))
        if src is None:
            return self.op_create()
        parent = self.pick(self.dirs)
        if self.rng.random() < 0.3:
            # Over an existing file or symlink (not a directory).
            existing = [q for q in self.children(parent)
                        if parent + "/" + q not in self.dirs]
            dst = parent + "/" + (self.pick(existing) if existing
                                  else self.name("r"))
        else:
            dst = parent + "/" + self.name("r")
        if dst == src:
            return
        if (src in self.files and dst in self.files and
                self.files[src] is self.files[dst]):
            return  # two links of one inode: rename(2) does nothing
        os.rename(self.p(src), self.p(dst))
        if dst in self.files:
            self.drop_link(dst)
        self.symlinks.pop(dst, None)
        if src in self.files:
            ino = self.files.pop(src)
            self.files[dst] = ino
        else:
            self.symlinks[dst] = self.symlinks.pop(src)

    def op_rename_dir(self):
        movable = [d for d in self.dirs if d != self.live]
        src = self.pick(movable)
        if src is None:
            return self.op_mkdir()
        sub_depth = max(self.depth(d) for d in self.dirs
                        if d == src or d.startswith(src + "/")) - \
            self.depth(src)
        parents = [d for d in self.dirs
                   if d != src and not d.startswith(src + "/") and
                   self.depth(d) + 1 + sub_depth <= MAX_DEPTH]
        parent = self.pick(parents)
        if parent is None:
            return
        dst = parent + "/" + self.name("m")
        os.rename(self.p(src), self.p(dst))

        def move(q):
            if q == src:
                return dst
            if q.startswith(src + "/"):
                return dst + q[len(src):]
            return q
        self.dirs = {move(q) for q in self.dirs}
        self.files = {move(q): v for q, v in self.files.items()}
        self.symlinks = {move(q): v for q, v in self.symlinks.items()}

    def op_link(self):
        src = self.pick(self.files)
        if src is None:
            return self.op_create()
        dst = self.pick(self.dirs) + "/" + self.name("l")
        os.link(self.p(src), self.p(dst))
        self.add_link(dst, self.files[src])

    def op_symlink(self):
        rel = self.pick(self.dirs) + "/" + self.name("s")
        target = "../" * self.rng.randint(0, 3) + self.name("t") * \
            self.rng.randint(1, 20)
        os.symlink(target, self.p(rel))
        self.symlinks[rel] = target

    def op_unlink(self):
        rel = self.pick(list(self.files) + list(self.symlinks))
        if rel is None:
            return
        os.unlink(self.p(rel))
        if rel in self.files:
            self.drop_link(rel)
        else:
            del self.symlinks[rel]

    def op_rmdir(self):
        used = {q.rsplit("/", 1)[0] for coll in
                (self.dirs, self.files, self.symlinks) for q in coll}
        empty = [d for d in self.dirs if d != self.live and d not in used]
        rel = self.pick(empty)
        if rel is None:
            return self.op_unlink()
        os.rmdir(self.p(rel))
        self.dirs.discard(rel)

    def op_rmtree(self):
        rel = self.pick([d for d in self.dirs if d != self.live])
        if rel is None:
            return
        # Bottom up, one syscall per entry, as the model sees them.
        inside = [q for q in list(self.files) + list(self.symlinks)
                  if q.startswith(rel + "/")]
        for q in inside:
            os.unlink(self.p(q))
            if q in self.files:
                self.drop_link(q)
            else:
                del self.symlinks[q]
        for d in sorted((d for d in self.dirs
                         if d == rel or d.startswith(rel + "/")),
                        key=lambda d: -self.depth(d)):
            os.rmdir(self.p(d))
            self.dirs.discard(d)

    def op_fsync(self):
        rel = self.pick(self.files)
        if rel is None:
            return self.op_create()
        fd = os.open(self.p(rel), os.O_RDONLY)
        try:
            if self.rng.random() < 0.5:
                os.fsync(fd)
            else:
                os.fdatasync(fd)
        finally:
            os.close(fd)

    def op_fsync_dir(self):
        fsync_path(self.p(self.pick(self.dirs)), True)

    def op_read_check(self):
        rel = self.pick(self.files)
        if rel is None:
            return self.op_create()
        got = read_file(self.p(rel))
        want = bytes(self.files[rel].data)
        if got != want:
            raise ModelMismatch("read of %s: %s" %
                                (rel, describe_diff(want, got)))

    def op_stat_check(self):
        rel = self.pick(list(self.files) + list(self.symlinks) +
                        list(self.dirs))
        st = os.lstat(self.p(rel))
        if rel in self.dirs:
            want = "directory"
            ok = stat.S_ISDIR(st.st_mode)
        elif rel in self.symlinks:
            want = "symlink to %s" % self.symlinks[rel]
            ok = stat.S_ISLNK(st.st_mode) and \
                os.readlink(self.p(rel)) == self.symlinks[rel]
        else:
            ino = self.files[rel]
            want = "file of %d bytes, %d links" % (len(ino.data), ino.links)
            ok = (stat.S_ISREG(st.st_mode) and st.st_size == len(ino.data)
                  and st.st_nlink == ino.links)
        if not ok:
            raise ModelMismatch("lstat of %s: expected %s, got mode %o, "
                                "size %d, %d links" %
                                (rel, want, st.st_mode, st.st_size,
                                 st.st_nlink))

    def op_readdir_check(self):
        rel = self.pick(self.dirs)
        got = set(os.listdir(self.p(rel)))
        want = self.children(rel)
        if got != want:
            raise ModelMismatch(
                "listing of %s: missing %s, unexpected %s" %
                (rel, sorted(want - got)[:5], sorted(got - want)[:5]))

    def durable_parent(self):
        """A durable directory to put the next durable entry in; now and
        then a new one (mkdir, then fsync of its parent: durable too)."""
        if self.rng.random() < 0.25:
            parent = self.rng.choice(self.durable_dirs)
            if self.depth(parent) < MAX_DEPTH:
                rel = parent + "/" + self.name("D")
                os.mkdir(self.p(rel))
                fsync_path(self.p(parent), True)
                self.durable_dirs.append(rel)
                self.record({"kind": "dir", "path": rel})
                return rel
        return self.rng.choice(self.durable_dirs)

    def op_durable(self):
        """Make one entry durable; it is never touched again."""
        parent = self.durable_parent()
        r = self.rng.random()
        candidates = [q for q, ino in self.files.items()
                      if ino.links == 1 and len(ino.data) <= 256 << 10]
        if r < 0.5 and candidates:
            # An existing live file: fsync, rename into place, fsync both.
            src = self.pick(candidates)
            rel = parent + "/" + self.name("F")
            fsync_path(self.p(src))
            os.rename(self.p(src), self.p(rel))
            fsync_path(self.p(rel))
            fsync_path(self.p(parent), True)
            ino = self.files.pop(src)
            self.live_bytes -= len(ino.data)
            data = bytes(ino.data)
        elif r < 0.9:
            # A new file, written and fsync'd in place.
            rel = parent + "/" + self.name("F")
            data = self.rng.randbytes(self.random_size() % (256 << 10))
            fd = os.open(self.p(rel), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644)
            try:
                self.write_all(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_path(self.p(parent), True)
            self.bytes_written += len(data)
        else:
            rel = parent + "/" + self.name("S")
            target = "durable-target-" + self.name("t")
            os.symlink(target, self.p(rel))
            fsync_path(self.p(parent), True)
            self.durable[rel] = ("symlink", target)
            self.record({"kind": "symlink", "path": rel, "target": target})
            return
        ino = Inode(0, b"")
        ino.data = bytearray(data)
        ino.links = 1
        self.durable[rel] = ("file", ino)
        self.record({"kind": "file", "path": rel, "size": len(data),
                     "sha256": sha256(data)})

    # ------------------------------------------------------------ driving

    def step(self):
        if len(self.files) + len(self.dirs) + len(self.symlinks) > \
                MAX_LIVE_ENTRIES:
            op = self.rng.choice(["unlink", "rmtree"])
        else:
            names = list(OP_WEIGHTS)
            op = self.rng.choices(names, [OP_WEIGHTS[n] for n in names])[0]
        self.current = op
        getattr(self, "op_" + op)()
        self.ops[op] = self.ops.get(op, 0) + 1

    def state(self):
        """The model, for verify: paths relative to the root."""
        inodes = {}
        files = {}
        for rel, ino in self.files.items():
            files[rel] = "i%d" % ino.ident
            inodes.setdefault("i%d" % ino.ident, {
                "size": len(ino.data), "sha256": sha256(ino.data),
                "links": ino.links})
        n = 0
        for rel, (kind, val) in self.durable.items():
            if kind == "file":
                n += 1
                files[rel] = "d%d" % n
                inodes["d%d" % n] = {"size": len(val.data),
                                     "sha256": sha256(val.data), "links": 1}
        files[self.probe_name] = "probe"
        inodes["probe"] = {"size": 0, "sha256": sha256(b""), "links": 1}
        symlinks = dict(self.symlinks)
        symlinks.update({rel: val for rel, (kind, val) in self.durable.items()
                         if kind == "symlink"})
        dirs = sorted(set(self.dirs) | {"durable"} |
                      set(self.durable_dirs))
        return {"dirs": dirs, "files": files, "inodes": inodes,
                "symlinks": symlinks}

    def stats(self):
        return {
            "ops": sum(self.ops.values()), "by_op": self.ops,
            "files": len(self.files) + sum(1 for k, _ in self.durable.values()
                                           if k == "file"),
            "dirs": len(self.dirs) + len(self.durable_dirs),
            "symlinks": len(self.symlinks),
            "extra_links": sum(1 for _ in self.files) -
            len({id(i) for i in self.files.values()}),
            "bytes_written": self.bytes_written,
            "durable_records": self.nrecords,
        }


def describe_diff(want, got):
    if len(want) != len(got):
        return "expected %d bytes, got %d" % (len(want), len(got))
    for i in range(len(want)):
        if want[i] != got[i]:
            return "expected byte 0x%02x at offset %d, got 0x%02x" % (
                want[i], i, got[i])
    return "no difference"


def cmd_run(a):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    log = os.open(a.durable, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    w = Workload(os.path.abspath(a.dir), a.seed, a.round, log)
    deadline = time.monotonic() + a.seconds
    rc, error = 0, None
    w.current = "setup"
    try:
        w.setup()
        while not stop and time.monotonic() < deadline:
            w.step()
    except ModelMismatch as e:
        rc, error = 1, "MISMATCH after %d ops: %s" % (sum(w.ops.values()), e)
    except OSError as e:
        rc = 3
        error = "%s: %s (%s) after %d ops" % (
            w.current, ename(e), e.filename or "", sum(w.ops.values()))
    # The load is over: a SIGTERM now (the stop that raced our own
    # deadline) must not kill the exit, whose handlers Python resets.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = w.stats()
    out["error"] = error
    if rc == 0:
        with open(a.state, "w") as f:
            json.dump(w.state(), f)
    print(json.dumps(out, sort_keys=True), flush=True)
    return rc


def scan(root):
    """What the file system holds under root: (dirs, files, symlinks),
    files as path -> (lstat, sha256)."""
    dirs, files, links = set(), {}, {}
    for top, dnames, fnames in os.walk(root):
        for n in dnames + fnames:
            path = os.path.join(top, n)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                dirs.add(rel)
            elif stat.S_ISLNK(st.st_mode):
                links[rel] = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                files[rel] = (st, sha256(read_file(path)))
            else:
                files[rel] = (st, "not a regular file")
    return dirs, files, links


def cmd_verify(a):
    with open(a.state) as f:
        model = json.load(f)
    diffs = []
    dirs, files, links = scan(a.dir)
    want_dirs = set(model["dirs"])
    for rel in sorted(want_dirs - dirs):
        diffs.append("missing directory %s" % rel)
    for rel in sorted(dirs - want_dirs):
        diffs.append("unexpected directory %s" % rel)
    for rel in sorted(set(model["symlinks"]) | set(links)):
        want, got = model["symlinks"].get(rel), links.get(rel)
        if want != got:
            diffs.append("symlink %s: expected %s, got %s" % (
                rel, want or "none", got or "none"))
    ino_of = {}   # st_ino -> model inode
    for rel in sorted(set(model["files"]) | set(files)):
        if rel not in files:
            diffs.append("missing file %s" % rel)
            continue
        if rel not in model["files"]:
            diffs.append("unexpected file %s" % rel)
            continue
        st, digest = files[rel]
        ident = model["files"][rel]
        ino = model["inodes"][ident]
        if st.st_size != ino["size"] or digest != ino["sha256"]:
            diffs.append("file %s: expected %d bytes sha256 %.12s, got %d "
                         "bytes sha256 %.12s" % (rel, ino["size"],
                                                 ino["sha256"], st.st_size,
                                                 digest))
        if st.st_nlink != ino["links"]:
            diffs.append("file %s: expected %d links, got %d" % (
                rel, ino["links"], st.st_nlink))
        if ino_of.setdefault(st.st_ino, ident) != ident:
            diffs.append("file %s: expected its own inode, shares one with "
                         "another file" % rel)
    nfiles = len(model["files"])
    print(json.dumps({"checked_files": nfiles, "checked_dirs": len(want_dirs),
                      "checked_symlinks": len(model["symlinks"]),
                      "differences": len(diffs),
                      "first": diffs[:MAX_REPORT]}, sort_keys=True))
    return 1 if diffs else 0


def cmd_verify_durable(a):
    diffs = []
    records = []
    with open(a.durable) as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    for rec in records:
        path = os.path.join(a.dir, rec["path"])
        try:
            st = os.lstat(path)
            if rec["kind"] == "dir":
                ok = stat.S_ISDIR(st.st_mode)
                got = "mode %o" % st.st_mode
            elif rec["kind"] == "symlink":
                got = os.readlink(path) if stat.S_ISLNK(st.st_mode) else \
                    "mode %o" % st.st_mode
                ok = got == rec["target"]
            else:
                data = read_file(path) if stat.S_ISREG(st.st_mode) else b""
                got = "%d bytes sha256 %.12s" % (len(data), sha256(data))
                ok = stat.S_ISREG(st.st_mode) and \
                    sha256(data) == rec["sha256"]
        except OSError as e:
            ok, got = False, ename(e)
        if not ok:
            want = {"dir": "a directory",
                    "symlink": "a symlink to %s" % rec.get("target"),
                    "file": "%s bytes sha256 %.12s" % (
                        rec.get("size"), rec.get("sha256"))}[rec["kind"]]
            diffs.append("%s: expected %s, got %s" % (rec["path"], want, got))
    # Everything else must at least be readable.
    nread = 0
    for top, _, fnames in os.walk(a.dir):
        for n in fnames:
            path = os.path.join(top, n)
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    read_file(path)
                    nread += 1
            except OSError as e:
                diffs.append("%s: expected to be readable, got %s" % (
                    os.path.relpath(path, a.dir), ename(e)))
    print(json.dumps({"records": len(records),
                      "files_read": nread, "differences": len(diffs),
                      "first": diffs[:MAX_REPORT]}, sort_keys=True))
    return 1 if diffs else 0


def main():
    ap = argparse.ArgumentParser(prog="metaload.py",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--seconds", type=float, required=True)
    r.add_argument("--state", required=True)
    r.add_argument("--durable", required=True)
    r.add_argument("--round", type=int, default=1)
    v = sub.add_parser("verify")
    v.add_argument("dir")
    v.add_argument("--state", required=True)
    d = sub.add_parser("verify-durable")
    d.add_argument("dir")
    d.add_argument("--durable", required=True)
    a = ap.parse_args()
    try:
        return {"run": cmd_run, "verify": cmd_verify,
                "verify-durable": cmd_verify_durable}[a.cmd](a)
    except OSError as e:
        print(json.dumps({"error": "%s: %s" % (ename(e), e.filename)}))
        return 3


if __name__ == "__main__":
    sys.exit(main())
