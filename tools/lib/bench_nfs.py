# SPDX-License-Identifier: MIT
"""The nfs targets of tools/bench (imported by it).

A loopback nfs-ganesha (tools/nfs-server) exports the directory that holds
the bench image, started at the first nfs target and stopped at the end
(SIGTERM to the script, which stops ganesha and the rpcbind it started).

  nfs-node  a dioloop node of `dioloop mount nfs://127.0.0.1:PORT/DIR`
  nfs-cp    libnfs's own nfs-cp copying the whole image from the server
            (1M seq read) or a local copy of it to the server (1M seq
            write): what libnfs moves over the same connection, the limit
            an nfs node is measured against.
"""
import os
import re
import signal
import subprocess
import time

NFS_TARGETS = {
    "nfs-node": "dioloop nfs node",
    "nfs-cp": "nfs-cp (libnfs limit)",
}
# The workloads nfs-cp stands for: (fio rw, direction).
NFS_CP_WORKLOADS = {"read-1m-qd8": "read", "write-1m-qd8": "write"}
NFS_CP_FILE = "nfs-cp.tmp"


class NfsServer:
    """tools/nfs-server DIR in its own session; url once it serves."""

    def __init__(self, root, log):
        self.root = root
        self.log = log
        self.proc = None
        self.url = None
        self.options = ""       # URL options: the MOUNT port, no rpcbind

    def start(self, directory, logpath, timeout=60):
        script = os.path.join(self.root, "tools", "nfs-server")
        logf = open(logpath, "a")
        self.proc = subprocess.Popen(["bash", script, directory],
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE,
                                     stderr=logf, text=True,
                                     start_new_session=True)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            with open(logpath, "a") as f:
                f.write(line)
            words = line.split()
            if line.startswith("serving ") and "as" in words:
                self.url = words[words.index("as") + 1]
                m = re.search(r"mountport=(\d+)", line)
                if m:
                    self.options = "mountport=" + m.group(1)
                return self.url
        self.stop()
        raise RuntimeError(f"tools/nfs-server did not start; log {logpath}")

    def stop(self):
        """SIGTERM to the script only (it stops what it started)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.log(f"tools/nfs-server (pid {self.proc.pid}) did not stop: "
                     "SIGKILL; its ganesha may be left running")
            self.proc.kill()
            self.proc.wait()


def libnfs_url(url, name, options):
    """nfs://HOST:PORT/DIR + name as nfs-cp takes it (port as nfsport=)."""
    rest = url[len("nfs://"):]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    opts = [o for o in (f"nfsport={port}" if port else "", options) if o]
    return f"nfs://{host}/{path}/{name}" + ("?" + "&".join(opts) if opts else "")


def nfs_cp_run(url, options, image, workdir, workload, rnd):
    """One nfs-cp copy of the image: a result record like tools/bench's
    fio records (bw_mib_s only)."""
    rec = {"kind": "run", "round": rnd, "target": "nfs-cp",
           "workload": workload, "iops": None, "bw_mib_s": None,
           "lat_us_mean": None, "clat_us_p99": None, "fio_usr_cpu": None,
           "fio_sys_cpu": None, "server_cpu_pct": None,
           "server_cpu_us_per_io": None, "loadavg_1m": os.getloadavg()[0],
           "error": None}
    size = os.stat(image).st_size
    local = os.path.join(workdir, NFS_CP_FILE)
    remote_file = os.path.join(os.path.dirname(image), NFS_CP_FILE)
    if NFS_CP_WORKLOADS[workload] == "read":
        cmd = ["nfs-cp", libnfs_url(url, os.path.basename(image), options), local]
    else:
        cmd = ["nfs-cp", image, libnfs_url(url, NFS_CP_FILE, options)]
    try:
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
    finally:
        for p in (local, remote_file):
            if os.path.exists(p):
                os.unlink(p)
    if r.returncode != 0:
        rec["error"] = f"nfs-cp exit {r.returncode}: " + " | ".join(
            (r.stdout + r.stderr).strip().splitlines()[-2:])
    elif wall > 0:
        rec["bw_mib_s"] = size / wall / (1 << 20)
        rec["iops"] = size / wall / (1 << 20)
    return rec
