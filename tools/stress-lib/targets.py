# SPDX-License-Identifier: MIT
"""What tools/stress runs on: backends (how an image is made and served)
and file systems (mkfs, fsck, mount), one table entry each.

Adding a backend is one entry in BACKENDS: its name, how to tell whether
this build has it, how to create an image, and which SOURCE to mount (a
backend that needs a server adds start/stop hooks to its entry).
"""
import os
import shutil
import subprocess


class Backend:
    def __init__(self, name, probe, create, source=None, mount_opts=(),
                 export=None, check=None):
        self.name = name
        self.probe = probe              # probe(ctx) -> None, or why not
        self.create = create            # create(ctx, path, size) -> argv
        self.source = source or (lambda ctx, src_dir: src_dir)
        self.mount_opts = list(mount_opts)
        # export(ctx, path, out) -> argv writing the image's logical bytes
        # to the new plain file out, for an image file that is not its
        # own bytes (None: it is, as a raw image).
        self.export = export
        # check(ctx, path) -> argv checking the image itself after the
        # unmount, exit 0 when clean (None: nothing to check).
        self.check = check


def probe_create_format(fmt):
    """A backend is there when `dioloop create --format FMT` works (in
    ctx.probe_dir, a temporary directory)."""
    def probe(ctx):
        path = os.path.join(ctx.probe_dir, "probe-%s.img" % fmt)
        rc = subprocess.call([ctx.dioloop, "create", "--format", fmt,
                              "--size", "1M", path],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        if rc != 0:
            return "backend %s is not available yet in this build" % fmt
        return None
    return probe


def not_yet(name):
    def probe(ctx):
        return "backend %s is not available yet in this build" % name
    return probe


def create_raw(ctx, path, size):
    return [ctx.dioloop, "create", "--size", size, path]


BACKENDS = {
    "raw": Backend("raw", probe=lambda ctx: None, create=create_raw),
    "cow": Backend("cow", probe=probe_create_format("cow"),
                   create=lambda ctx, path, size: [
                       ctx.dioloop, "create", "--format", "cow",
                       "--size", size, path],
                   export=lambda ctx, path, out: [
                       ctx.dioloop, "convert", "--format", "raw", path, out],
                   check=lambda ctx, path: [ctx.dioloop, "check", path]),
    # nfs needs a server (nfs-ganesha) and an nfs:// SOURCE: its entry gets
    # start/stop hooks and a source() when the backend lands.
    "nfs": Backend("nfs", probe=not_yet("nfs"), create=create_raw),
}


class FileSystem:
    def __init__(self, name, mkfs, fsck, fsck_image, tools, size):
        self.name = name
        self.mkfs = mkfs                # argv prefix; the device is appended
        self.fsck = fsck                # fsck(dev) -> argv, read-only
        self.fsck_image = fsck_image    # the same on an image file
        self.tools = tools
        self.size = size                # node size (sparse image)

    def missing(self):
        """Why this file system cannot be tested here, or None."""
        gone = [t for t in self.tools if not shutil.which(t)]
        if gone:
            return "%s not installed (tools/run-tests installs it)" % \
                ", ".join(gone)
        return None


FILESYSTEMS = {
    "ext4": FileSystem("ext4", ["mkfs.ext4", "-q", "-F"],
                       lambda dev: ["e2fsck", "-fn", dev],
                       lambda img: ["e2fsck", "-fn", img],
                       ["mkfs.ext4", "e2fsck"], "1G"),
    "xfs": FileSystem("xfs", ["mkfs.xfs", "-q", "-f"],
                      lambda dev: ["xfs_repair", "-n", dev],
                      lambda img: ["xfs_repair", "-n", "-f", img],
                      ["mkfs.xfs", "xfs_repair"], "1G"),
    "btrfs": FileSystem("btrfs", ["mkfs.btrfs", "-q", "-f"],
                        lambda dev: ["btrfs", "check", "--readonly", dev],
                        lambda img: ["btrfs", "check", "--readonly", img],
                        ["mkfs.btrfs", "btrfs"], "1G"),
}
