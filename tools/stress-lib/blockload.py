#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Acknowledged writes on a block node must read back, faults or not.

  blockload.py NODE --seed N [--seconds S]

Random writes of 1 to 64 sectors (512 bytes; so most are not aligned to
the 4 KiB block and go through the daemon's read-modify-write) at random
sector offsets, reads that check them, and fsyncs, until the time is up or
SIGTERM.  Each sector written holds (sector, generation) throughout, so a
read shows which write it came from.  A write that succeeded sets the
model of its sectors; one that failed (EIO from injected faults) makes
them unknown -- old or new data are both right -- but must not touch any
other sector, including the neighbours in the same 4 KiB block.  A read
that succeeds must match every known sector; read errors are counted.

On SIGTERM (sent once the faults are off) it reads every known sector a
last time, where any error counts.  Prints one JSON line of statistics.
Exit status: 0 every acknowledged sector intact, 1 one was not (the
message says which), 3 the node went away (ENOTCONN: a dead daemon).
"""
import argparse
import errno
import json
import os
import random
import signal
import struct
import sys
import time

SECTOR = 512
MAX_SECTORS = 64


def sector_data(sector, gen):
    return struct.pack("<QQ", sector, gen) * (SECTOR // 16)


def describe(buf, sector):
    got_sector, got_gen = struct.unpack_from("<QQ", buf)
    return "sector %d reads as (sector %d, generation %d)" % (
        sector, got_sector, got_gen)


class Lost(Exception):
    pass


class BlockLoad:
    def __init__(self, path, seed):
        self.fd = os.open(path, os.O_RDWR)
        self.nsectors = os.fstat(self.fd).st_size // SECTOR
        self.rng = random.Random(seed)
        self.model = {}     # sector -> generation (None: unknown)
        self.gen = 0
        self.stats = {"writes": 0, "write_errors": 0, "reads": 0,
                      "read_errors": 0, "fsyncs": 0, "fsync_errors": 0,
                      "checked_sectors": 0}

    def write(self):
        n = self.rng.randint(1, MAX_SECTORS)
        first = self.rng.randrange(0, self.nsectors - n)
        self.gen += 1
        buf = b"".join(sector_data(s, self.gen) for s in
                       range(first, first + n))
        try:
            done = os.pwrite(self.fd, buf, first * SECTOR)
        except OSError as e:
            if e.errno == errno.ENOTCONN:
                raise
            self.stats["write_errors"] += 1
            done = 0
        else:
            self.stats["writes"] += 1
        full = done // SECTOR
        for s in range(first, first + n):
            self.model[s] = self.gen if s < first + full else None

    def check(self, first, n, final=False):
        try:
            buf = os.pread(self.fd, n * SECTOR, first * SECTOR)
        except OSError as e:
            if e.errno == errno.ENOTCONN or final:
                raise
            self.stats["read_errors"] += 1
            return
        self.stats["reads"] += 1
        for i in range(n):
            gen = self.model.get(first + i)
            if gen is None:
                continue
            piece = buf[i * SECTOR:(i + 1) * SECTOR]
            self.stats["checked_sectors"] += 1
            if piece != sector_data(first + i, gen):
                raise Lost("acknowledged write lost: expected (sector %d, "
                           "generation %d), %s" % (first + i, gen,
                                                   describe(piece + bytes(16),
                                                            first + i)))

    def random_check(self):
        if not self.model:
            return
        s = self.rng.choice(list(self.model)) if len(self.model) < 4096 \
            else self.rng.randrange(0, self.nsectors)
        n = min(self.rng.randint(1, MAX_SECTORS), self.nsectors - s)
        self.check(s, n)

    def fsync(self):
        try:
            os.fsync(self.fd)
            self.stats["fsyncs"] += 1
        except OSError as e:
            if e.errno == errno.ENOTCONN:
                raise
            self.stats["fsync_errors"] += 1

    def final_check(self):
        """Every known sector, in runs of up to 256 sectors."""
        known = sorted(s for s, g in self.model.items() if g is not None)
        i = 0
        while i < len(known):
            first = known[i]
            j = i
            while j + 1 < len(known) and known[j + 1] < first + 256:
                j += 1
            self.check(first, known[j] - first + 1, final=True)
            i = j + 1


def main():
    ap = argparse.ArgumentParser(prog="blockload.py")
    ap.add_argument("node")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=86400)
    ap.add_argument("--self-test", action="store_true",
                    help="overwrite one known sector before the last "
                    "check, which must then fail")
    a = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    b = BlockLoad(a.node, a.seed)
    deadline = time.monotonic() + a.seconds
    rc, error = 0, None
    try:
        while not stop and time.monotonic() < deadline:
            r = b.rng.random()
            if r < 0.6:
                b.write()
            elif r < 0.95:
                b.random_check()
            else:
                b.fsync()
        if a.self_test and b.model:
            victim = max(s for s, g in b.model.items() if g is not None)
            os.pwrite(b.fd, sector_data(victim, b.gen + 1), victim * SECTOR)
        b.final_check()
    except Lost as e:
        rc, error = 1, str(e)
    except OSError as e:
        rc = 3 if e.errno == errno.ENOTCONN else 1
        error = "%s after %d writes" % (
            errno.errorcode.get(e.errno, str(e.errno)), b.stats["writes"])
    # The load is over: a SIGTERM now (the stop that raced our own
    # deadline) must not kill the exit, whose handlers Python resets.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = dict(b.stats)
    out["error"] = error
    out["known_sectors"] = sum(1 for g in b.model.values() if g is not None)
    print(json.dumps(out, sort_keys=True), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
