#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What an unprivileged user who can write SOURCE does to a root daemon,
for tests/integration/test-adversary.sh.

  flip LINK TARGET_A TARGET_B SECONDS
      Replace the symlink LINK by one to TARGET_A, then TARGET_B, and so on
      (rename over it: the name always exists) for SECONDS.  Prints
      "ok N" with the number of flips.
  scan FILE MARKER SECONDS
      Open FILE, read its first 64 KiB, close; again for SECONDS.  Prints
      "leak" as soon as MARKER (text) is among the bytes read, else
      "ok OPENS ERRORS" (errors: opens or reads that failed).
  scribble FILE SECONDS [MIN-WRITES]
      Open FILE read-write, write "SCRIBBLED" at 0, fsync, close; again for
      SECONDS, and past them (up to 60 s) until MIN-WRITES got through.
      Prints "ok WRITES ERRORS".
  chmod-loop FILE MODE SECONDS
      chmod FILE to MODE (octal) for SECONDS.  Prints "ok N ERRORS".
"""
import os
import sys
import time


def flip(link, a, b, seconds):
    end = time.monotonic() + seconds
    tmp = link + ".flip"
    n = 0
    while time.monotonic() < end:
        target = a if n % 2 == 0 else b
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(target, tmp)
        os.rename(tmp, link)
        n += 1
    os.symlink(a, tmp)
    os.rename(tmp, link)
    print("ok", n)


def scan(path, marker, seconds):
    end = time.monotonic() + seconds
    marker = marker.encode()
    opens = errors = 0
    while time.monotonic() < end:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            errors += 1
            continue
        opens += 1
        try:
            data = os.pread(fd, 65536, 0)
        except OSError:
            errors += 1
            data = b""
        os.close(fd)
        if marker in data:
            print("leak")
            return
    print("ok", opens, errors)


def scribble(path, seconds, min_writes=0):
    # Past the time, until min_writes writes got through (up to 60 s more):
    # a slow machine may give the window none.
    end = time.monotonic() + seconds
    writes = errors = 0
    while time.monotonic() < end or (writes < min_writes and
                                     time.monotonic() < end + 60):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            errors += 1
            if time.monotonic() >= end:
                time.sleep(0.001)   # past the race: no busy loop
            continue
        try:
            os.pwrite(fd, b"SCRIBBLED", 0)
            os.fsync(fd)
            writes += 1
        except OSError:
            errors += 1
        os.close(fd)
    print("ok", writes, errors)


def chmod_loop(path, mode, seconds):
    end = time.monotonic() + seconds
    n = errors = 0
    while time.monotonic() < end:
        try:
            os.chmod(path, mode)
            n += 1
        except OSError:
            errors += 1
    print("ok", n, errors)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, a = argv[1], argv[2:]
    if cmd == "flip" and len(a) == 4:
        flip(a[0], a[1], a[2], float(a[3]))
    elif cmd == "scan" and len(a) == 3:
        scan(a[0], a[1], float(a[2]))
    elif cmd == "scribble" and len(a) in (2, 3):
        scribble(a[0], float(a[1]), int(a[2]) if len(a) == 3 else 0)
    elif cmd == "chmod-loop" and len(a) == 3:
        chmod_loop(a[0], int(a[1], 8), float(a[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
