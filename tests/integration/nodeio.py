#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Precise system calls on block nodes, for the integration tests.

Each command does exactly the syscalls its name says and prints one line:
"ok ..." with the result, or "err ENAME" with the errno name, so a shell
test can compare it with what it expects.  The exit status is 0 either way
(2 for a usage error): the printed line is the result.

A FILE argument is a path, or fd:N for a descriptor inherited from the
shell (e.g. `exec 7<>node` then `nodeio.py pread fd:7 0 4096`).

Data written is a pattern of the byte range seeded by SEED (default 1):
byte i of the file region [off, off+len) is pattern(seed, off + i), so a
later read can be checked with `check` without keeping a copy.
"""
import array
import ctypes
import errno
import hashlib
import mmap
import os
import sys

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
SEEK_DATA = 3
SEEK_HOLE = 4

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64]


def pattern(seed, off, length):
    """Bytes of the pattern for [off, off+length): every 8-byte word holds
    its own offset xor a key from the seed, so misplaced data is caught."""
    first = off // 8
    last = (off + length + 7) // 8
    key = (seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    words = array.array("Q", range(first * 8, last * 8, 8))
    if sys.byteorder != "little":
        words.byteswap()
    raw = words.tobytes()
    # xor every word with the key, as one big integer (fast in C)
    raw = (int.from_bytes(raw, "little") ^
           int.from_bytes(key.to_bytes(8, "little") * (last - first),
                          "little")).to_bytes(len(raw), "little")
    start = off - first * 8
    return raw[start:start + length]


def open_file(spec, flags):
    """(fd, owned): fd:N is used as is, a path is opened with flags."""
    if spec.startswith("fd:"):
        return int(spec[3:]), False
    return os.open(spec, flags), True


def num(text):
    """An integer: decimal, 0x hex, or with a K/M/G suffix, or 2^N."""
    text = text.strip()
    if text.startswith("2^"):
        return 2 ** int(text[2:])
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper())
    if mult:
        return int(text[:-1], 0) * mult
    return int(text, 0)


def ename(err):
    return errno.errorcode.get(err.errno, str(err.errno))


def cmd_pwrite(a):
    """pwrite FILE OFF LEN [SEED]: one pwrite() of LEN pattern bytes."""
    fd, owned = open_file(a[0], os.O_WRONLY)
    off, length = num(a[1]), num(a[2])
    seed = num(a[3]) if len(a) > 3 else 1
    try:
        n = os.pwrite(fd, pattern(seed, off, length), off)
        return "ok %d" % n
    finally:
        if owned:
            os.close(fd)


def cmd_pread(a):
    """pread FILE OFF LEN: one pread(); prints the count and the sha256."""
    fd, owned = open_file(a[0], os.O_RDONLY)
    try:
        data = os.pread(fd, num(a[2]), num(a[1]))
        return "ok %d %s" % (len(data), hashlib.sha256(data).hexdigest())
    finally:
        if owned:
            os.close(fd)


def read_all(fd, off, length):
    """Read [off, off+length) with as many preads as it takes (stops at
    EOF)."""
    out = bytearray()
    while len(out) < length:
        chunk = os.pread(fd, min(length - len(out), 1 << 20), off + len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def cmd_check(a):
    """check FILE OFF LEN SEED|zero: compare the region with the pattern
    (or zeros); prints "ok same" or "ok differ at OFFSET"."""
    fd, owned = open_file(a[0], os.O_RDONLY)
    off, length = num(a[1]), num(a[2])
    try:
        data = read_all(fd, off, length)
    finally:
        if owned:
            os.close(fd)
    want = bytes(length) if a[3] == "zero" else pattern(num(a[3]), off,
                                                         length)
    if len(data) != length:
        return "ok short %d" % len(data)
    if data == want:
        return "ok same"
    i = next(i for i in range(length) if data[i] != want[i])
    return "ok differ at %d" % (off + i)


def cmd_open(a):
    """open FILE r|w|rw|trunc: open() only (trunc: O_WRONLY|O_TRUNC)."""
    flags = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR,
             "trunc": os.O_WRONLY | os.O_TRUNC}[a[1]]
    os.close(os.open(a[0], flags))
    return "ok"


def cmd_size(a):
    """size FILE: st_size through fstat of an open descriptor."""
    fd, owned = open_file(a[0], os.O_RDONLY)
    try:
        return "ok %d" % os.fstat(fd).st_size
    finally:
        if owned:
            os.close(fd)


def cmd_fsync(a):
    """fsync FILE: open read-write, fsync()."""
    fd, owned = open_file(a[0], os.O_RDWR)
    try:
        os.fsync(fd)
        return "ok"
    finally:
        if owned:
            os.close(fd)


def cmd_truncate(a):
    """truncate FILE SIZE: ftruncate() on a read-write descriptor."""
    fd, owned = open_file(a[0], os.O_RDWR)
    try:
        os.ftruncate(fd, num(a[1]))
        return "ok"
    finally:
        if owned:
            os.close(fd)


def cmd_fallocate(a):
    """fallocate FILE MODE OFF LEN: MODE is alloc, keep, punch or zero."""
    mode = {"alloc": 0, "keep": FALLOC_FL_KEEP_SIZE,
            "punch": FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            "zero": FALLOC_FL_ZERO_RANGE}[a[1]]
    fd, owned = open_file(a[0], os.O_RDWR)
    try:
        if _libc.fallocate(fd, mode, num(a[2]), num(a[3])) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return "ok"
    finally:
        if owned:
            os.close(fd)


def cmd_seek(a):
    """seek FILE OFF data|hole: lseek SEEK_DATA / SEEK_HOLE."""
    whence = {"data": SEEK_DATA, "hole": SEEK_HOLE}[a[2]]
    fd, owned = open_file(a[0], os.O_RDONLY)
    try:
        return "ok %d" % os.lseek(fd, num(a[1]), whence)
    finally:
        if owned:
            os.close(fd)


def cmd_copy(a):
    """copy IN OFF_IN OUT OFF_OUT LEN: copy_file_range() until LEN bytes
    are copied or it returns 0; prints the total."""
    fin, own_in = open_file(a[0], os.O_RDONLY)
    fout, own_out = open_file(a[2], os.O_WRONLY)
    off_in, off_out, length = num(a[1]), num(a[3]), num(a[4])
    done = 0
    try:
        while done < length:
            n = os.copy_file_range(fin, fout, length - done,
                                   off_in + done, off_out + done)
            if n == 0:
                break
            done += n
        return "ok %d" % done
    finally:
        if own_in:
            os.close(fin)
        if own_out:
            os.close(fout)


def cmd_copy_race(a):
    """copy-race IN OUT... : one thread per OUT, each with its own pair of
    open files, calls copy_file_range() of 64 KiB from IN to its OUT at the
    same moment; prints how many copied all of it."""
    import threading
    fds = [(os.open(a[0], os.O_RDONLY), os.open(out, os.O_WRONLY))
           for out in a[1:]]
    n = len(fds)
    barrier = threading.Barrier(n)
    done = [0] * n

    def one(k):
        fin, fout = fds[k]
        barrier.wait()
        try:
            done[k] = os.copy_file_range(fin, fout, 65536, 0, 0)
        except OSError:
            done[k] = -1

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for fin, fout in fds:
        os.close(fin)
        os.close(fout)
    return "ok %d" % sum(1 for d in done if d == 65536)


def cmd_mmap_read(a):
    """mmap-read FILE shared|private OFF LEN: map, read, print sha256."""
    shared = a[1] == "shared"
    off, length = num(a[2]), num(a[3])
    fd, owned = open_file(a[0], os.O_RDONLY)
    try:
        m = mmap.mmap(fd, off + length,
                      flags=mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ)
        data = m[off:off + length]
        m.close()
        return "ok %d %s" % (len(data), hashlib.sha256(data).hexdigest())
    finally:
        if owned:
            os.close(fd)


def cmd_mmap_write(a):
    """mmap-write FILE shared|private OFF LEN SEED: map read-write, store
    the pattern, msync (shared), unmap."""
    shared = a[1] == "shared"
    off, length, seed = num(a[2]), num(a[3]), num(a[4])
    fd, owned = open_file(a[0], os.O_RDWR)
    try:
        m = mmap.mmap(fd, off + length,
                      flags=mmap.MAP_SHARED if shared else mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
        m[off:off + length] = pattern(seed, off, length)
        if shared:
            m.flush()
        m.close()
        return "ok"
    finally:
        if owned:
            os.close(fd)


def cmd_mmap_coherent(a):
    """mmap-coherent FILE OFF LEN SEED: with FILE mapped shared (and its
    pages read in), pwrite pattern SEED at OFF through another open file,
    then the mapping must show it; store pattern SEED+1 through the
    mapping (no msync), then a pread must return it.  Prints ok, or what
    was stale."""
    off, length, seed = num(a[1]), num(a[2]), num(a[3])
    fd = os.open(a[0], os.O_RDWR)
    other = os.open(a[0], os.O_RDWR)
    try:
        m = mmap.mmap(fd, off + length, flags=mmap.MAP_SHARED,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            m[off:off + length]     # read the pages in
            os.pwrite(other, pattern(seed, off, length), off)
            if m[off:off + length] != pattern(seed, off, length):
                return "err the mapping missed a write through another file"
            m[off:off + length] = pattern(seed + 1, off, length)
            if os.pread(other, length, off) != pattern(seed + 1, off, length):
                return "err a read missed a store through the mapping"
            return "ok"
        finally:
            m.close()
    finally:
        os.close(other)
        os.close(fd)


def cmd_write_file(a):
    """write-file PATH SIZE SEED: create PATH with SIZE pattern bytes,
    fsync it and its directory; prints the sha256."""
    size, seed = num(a[1]), num(a[2])
    data = pattern(seed, 0, size)
    fd = os.open(a[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(os.path.dirname(os.path.abspath(a[0])), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return "ok %s" % hashlib.sha256(data).hexdigest()


def cmd_write_loop(a):
    """write-loop ROOT REL SIZE LOG MAX: write-file ROOT/REL/f0, f1, ...
    (seeds 1000, 1001, ...) up to MAX files; after each one's fsyncs append
    "SHA256  REL/fN" to LOG (sha256sum -c format); stop at the first
    error.  Prints how many files made it."""
    root, rel, size, log, most = a[0], a[1], num(a[2]), a[3], num(a[4])
    os.makedirs(os.path.join(root, rel), exist_ok=True)
    done = 0
    with open(log, "a") as out:
        try:
            for i in range(most):
                name = os.path.join(rel, "f%d" % i)
                digest = cmd_write_file([os.path.join(root, name), str(size),
                                         str(1000 + i)]).split()[1]
                out.write("%s  %s\n" % (digest, name))
                out.flush()
                done += 1
        except OSError as e:
            return "err %s after %d files" % (ename(e), done)
    return "ok %d" % done


def cmd_watchdog(a):
    """watchdog SECONDS PID: after SECONDS, SIGTERM to PID (a test
    script, whose trap then cleans up) and SIGKILL to its other children
    (what it waits for, and the daemons, so nothing it waits on can hang
    on a FUSE request)."""
    import signal
    import time
    seconds, pid = float(a[0]), int(a[1])
    time.sleep(seconds)
    sys.stderr.write("watchdog: still running after %g s: stopping PID %d "
                     "and its children\n" % (seconds, pid))
    me = os.getpid()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "ok"
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass
    return "ok"


def cmd_create(a):
    """create PATH: open(O_CREAT|O_EXCL|O_WRONLY)."""
    os.close(os.open(a[0], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    return "ok"


def cmd_unlink(a):
    """unlink PATH."""
    os.unlink(a[0])
    return "ok"


def cmd_mkdir(a):
    """mkdir PATH."""
    os.mkdir(a[0])
    return "ok"


def cmd_rename(a):
    """rename OLD NEW."""
    os.rename(a[0], a[1])
    return "ok"


def cmd_truncate_path(a):
    """truncate-path PATH SIZE: truncate() by name, no open."""
    os.truncate(a[0], num(a[1]))
    return "ok"


def cmd_stat(a):
    """stat PATH: stat() only; prints the size."""
    return "ok %d" % os.stat(a[0]).st_size


COMMANDS = {
    "watchdog": (cmd_watchdog, 2),
    "write-loop": (cmd_write_loop, 5),
    "create": (cmd_create, 1),
    "unlink": (cmd_unlink, 1),
    "mkdir": (cmd_mkdir, 1),
    "rename": (cmd_rename, 2),
    "stat": (cmd_stat, 1),
    "truncate-path": (cmd_truncate_path, 2),
    "pwrite": (cmd_pwrite, 3),
    "pread": (cmd_pread, 3),
    "check": (cmd_check, 4),
    "open": (cmd_open, 2),
    "size": (cmd_size, 1),
    "fsync": (cmd_fsync, 1),
    "truncate": (cmd_truncate, 2),
    "fallocate": (cmd_fallocate, 4),
    "seek": (cmd_seek, 3),
    "copy": (cmd_copy, 5),
    "copy-race": (cmd_copy_race, 2),
    "mmap-read": (cmd_mmap_read, 4),
    "mmap-write": (cmd_mmap_write, 5),
    "mmap-coherent": (cmd_mmap_coherent, 4),
    "write-file": (cmd_write_file, 3),
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS or \
            len(argv) - 2 < COMMANDS[argv[1]][1]:
        sys.stderr.write("usage: nodeio.py COMMAND ARGS...\n")
        for name, (fn, _) in sorted(COMMANDS.items()):
            sys.stderr.write("  %s\n" % fn.__doc__.splitlines()[0])
        return 2
    # NODEIO_READY=PATH: create PATH just before the command runs (a test
    # waits for it to know the call is on its way into the node).
    ready = os.environ.get("NODEIO_READY")
    if ready:
        open(ready, "w").close()
    try:
        print(COMMANDS[argv[1]][0](argv[2:]))
    except OSError as e:
        print("err %s" % ename(e))
    except (OverflowError, ValueError) as e:
        print("err %s" % type(e).__name__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
