#!/bin/bash
# SPDX-License-Identifier: MIT
#
# copy_file_range reaches the daemon however many copies start at once.
# A kernel with FUSE_COPY_FILE_RANGE_64 (6.18+) tries it first; libfuse
# 3.14 does not know it, and two copies answered ENOSYS at the same time
# made the kernel turn copy_file_range off for the whole mount: every copy
# after that went through a splice of the page cache (reads held page
# locks while they waited in a node's throttle, and opens of the node
# waited for those locks).  The daemon takes the 64-bit request as the
# 32-bit one, so no copy is answered ENOSYS.  Each round is a fresh mount
# (the kernel keeps what it learnt per mount) whose first copies are 16 at
# once, each to a node of its own (copies to one node wait for each other
# in the kernel); every one of them and one more after them must be
# counted by the daemon as a copy (a splice counts as reads and writes).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "copy_file_range reaches the daemon when many copies start at once"

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC"
must "dioloop create --size 4M a.img" "$DIOLOOP_BIN" create --size 4M "$SRC/a.img"
OUTS=()
for i in {0..15}; do
	must "dioloop create --size 1M b$i.img" "$DIOLOOP_BIN" create --size 1M "$SRC/b$i.img"
	OUTS+=("$MNT/b$i.img")
done

# copies: the copy_file_range calls the daemon counted, on all nodes.
copies() {
	"$IT_PY" -c 'import json, sys; print(sum(n["ops"]["copy"] for n in json.load(open(sys.argv[1]))["nodes"].values()))' \
		"$MNT/.dioloop/stats.json" 2>&1
}

for round in 1 2 3 4 5; do
	start_daemon "$SRC" "$MNT"
	must "stat the nodes" stat "$MNT/a.img" "${OUTS[@]}"
	expect_eq "round $round: 16 copies at once, each copied in full" "ok 16" \
		"$("$IT_PY" "$IT_DIR/nodeio.py" copy-race "$MNT/a.img" "${OUTS[@]}")"
	must "round $round: one copy after them" "$IT_PY" "$IT_DIR/nodeio.py" copy \
		"$MNT/a.img" 0 "$MNT/b0.img" 512K 64K
	expect_eq "round $round: copies the daemon counted" 17 "$(copies)"
	dioloop_umount "$MNT"
	daemon_wait "$DAEMON_PID"
	expect_eq "round $round: the daemon exits 0 after umount" 0 "$DAEMON_STATUS"
done

it_end
