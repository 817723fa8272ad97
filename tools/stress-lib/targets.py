# SPDX-License-Identifier: MIT
"""What tools/stress runs on: backends (how an image is made and served)
and file systems (mkfs, fsck, mount), one table entry each.

Adding a backend is one entry in BACKENDS: its name, how to tell whether
this build has it, how to create an image, and which SOURCE to mount.  A
backend whose images live elsewhere (nfs: on the server of --nfs-url;
rbd: in the Ceph pool or namespace of --rbd-url) also says where an image
is (image_path) and how it is named (node_names: unique per run, since the
server's directory outlives the work dir).
"""
import os
import shutil
import subprocess
import urllib.parse


class Backend:
    def __init__(self, name, probe, create, source=None, mount_opts=(),
                 export=None, check=None, image_path=None, node_names=None,
                 remote=False, discard=True, remove=None):
        self.name = name
        self.probe = probe              # probe(ctx) -> None, or why not
        self.create = create            # create(ctx, path, size) -> argv
        self.source = source or (lambda ctx, src_dir: src_dir)
        # image_path(ctx, src_dir, name) -> the image's path (or URL)
        self.image_path = image_path or \
            (lambda ctx, src_dir, name: os.path.join(src_dir, name))
        # node_names(ctx, combo) -> (name of the file system's image, name
        # of the spare node's image)
        self.node_names = node_names or \
            (lambda ctx, combo: ("fs.img", "fsx.img"))
        # remote: the images are not in the work dir (removed separately)
        self.remote = remote
        # remove(ctx, name) -> argv removing a remote image (None: through
        # --nfs-export, or not at all)
        self.remove = remove
        # discard: nodes can deallocate (fallocate PUNCH_HOLE); without,
        # dioloop-fsx punches no holes (-H) and there is no fstrim load.
        self.discard = discard
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


def create_raw(ctx, path, size):
    return [ctx.dioloop, "create", "--size", size, path]


NO_NFS_URL = "no NFS server given (--nfs-url)"


def probe_nfs(ctx):
    """nfs runs with a server directory (--nfs-url) and a build whose
    `dioloop create` takes nfs:// URLs."""
    if not getattr(ctx, "nfs_url", None):
        return NO_NFS_URL
    try:
        text = subprocess.run([ctx.dioloop, "create", "--help"],
                              capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    if "nfs://" not in text:
        return "backend nfs is not available yet in this build"
    return None


def nfs_image_url(url, name):
    """The URL of image name in the directory URL (its options kept):
    nfs://H:P/DIR?opts + a.img -> nfs://H:P/DIR/a.img?opts."""
    base, sep, opts = url.partition("?")
    return base.rstrip("/") + "/" + name + sep + opts


NO_RBD_URL = "no Ceph cluster given (--rbd-url)"


def probe_rbd(ctx):
    """rbd runs with a pool or namespace (--rbd-url) and a build that has
    the rbd backend (`dioloop info` knows the protocol)."""
    if not getattr(ctx, "rbd_url", None):
        return NO_RBD_URL
    try:
        text = subprocess.run([ctx.dioloop, "info", "rbd://p/i?timeout=1"],
                              capture_output=True, text=True,
                              timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        text = "unknown protocol"
    if "unknown protocol" in text:
        return "backend rbd is not in this build (librbd-dev, librados-dev)"
    if not shutil.which("rbd"):
        return "the rbd tool is not installed (ceph-common)"
    return None


def rbd_remove(ctx, name):
    """`rbd rm` of image name in --rbd-url's pool and namespace, with the
    URL's conf, id and keyring."""
    u = urllib.parse.urlsplit(ctx.rbd_url)  # rbd://POOL[/NS][?...]
    pool, ns = u.netloc, u.path.strip("/")
    argv = ["rbd", "rm", "--no-progress", "--pool", pool,
            "--namespace", ns, "--image", name]
    q = urllib.parse.parse_qs(u.query)
    for key, opt in (("conf", "-c"), ("id", "--id"),
                     ("keyring", "--keyring")):
        if key in q:
            argv += [opt, q[key][-1]]
    return argv


def nfs_node_names(ctx, combo):
    """Names unique to this run and combination: the server's directory
    may hold images of other runs (kept after a failure, or left when
    there is no --nfs-export to remove them)."""
    prefix = "stress-%s-%s-%s-" % (ctx.run_id, combo.fs.name, combo.mode)
    return prefix + "fs.img", prefix + "fsx.img"


BACKENDS = {
    "raw": Backend("raw", probe=lambda ctx: None, create=create_raw),
    "cow": Backend("cow", probe=probe_create_format("cow"),
                   create=lambda ctx, path, size: [
                       ctx.dioloop, "create", "--format", "cow",
                       "--size", size, path],
                   export=lambda ctx, path, out: [
                       ctx.dioloop, "convert", "--format", "raw", path, out],
                   check=lambda ctx, path: [ctx.dioloop, "check", path]),
    # nfs: the images are created in the server directory --nfs-url
    # (`dioloop create nfs://.../NAME.img`), the mount serves that URL,
    # and the checks read an image's bytes back over NFS (`dioloop
    # convert` to a plain file in the work dir).
    "nfs": Backend("nfs", probe=probe_nfs, create=create_raw,
                   source=lambda ctx, src_dir: ctx.nfs_url,
                   image_path=lambda ctx, src_dir, name:
                       nfs_image_url(ctx.nfs_url, name),
                   node_names=nfs_node_names, remote=True,
                   # NFSv3 cannot deallocate: discard is EOPNOTSUPP.
                   discard=False,
                   export=lambda ctx, path, out: [
                       ctx.dioloop, "convert", "--format", "raw", path, out]),
    # rbd: the same with images in the pool or namespace --rbd-url
    # (`dioloop create rbd://POOL[/NS]/NAME`), removed with `rbd rm`.
    "rbd": Backend("rbd", probe=probe_rbd, create=create_raw,
                   source=lambda ctx, src_dir: ctx.rbd_url,
                   image_path=lambda ctx, src_dir, name:
                       nfs_image_url(ctx.rbd_url, name),
                   node_names=nfs_node_names, remote=True,
                   remove=rbd_remove,
                   export=lambda ctx, path, out: [
                       ctx.dioloop, "convert", "--format", "raw", path, out]),
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
