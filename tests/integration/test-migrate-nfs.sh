#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Live migration of a mounted raw node to an NFS server (nfs-ganesha, see
# nfs-lib.sh) while fio verify=crc32c runs through ext4 on a direct-I/O
# loop device over the node: no verify error, e2fsck clean, files intact,
# and the file on the server byte-identical to the node; after a restart
# the node is served from the server.  Then a server that goes away in the
# middle of a migration: the migration fails, the node stays on its
# source, intact.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/nfs-lib.sh"

it_begin "live migration of a node to an NFS server" \
	ganesha.nfsd rpcinfo fio mkfs.ext4 e2fsck jq
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
EXPORT=$IT_TMP/export
mkdir -p "$SRC"
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"

must "create b.img" "$DIOLOOP_BIN" create --size 128M "$SRC/b.img"
must "create c.img" "$DIOLOOP_BIN" create --size 64M "$SRC/c.img"
start_daemon "$SRC" "$MNT"

node_format() {
	jq -r --arg n "$1" '.nodes[$n].format' "$MNT/.dioloop/stats.json" 2>&1
}

attach_loop "$MNT/b.img"
B_LOOP=$LOOP_DEV
INNER=$IT_TMP/inner
must "mkfs.ext4 on b.img" mkfs.ext4 -q -F "$B_LOOP"
mount_inner "$B_LOOP" "$INNER"
must "write files with known checksums" make_files "$INNER" b

start_helper fio --name=to-nfs --directory="$INNER" --size=16M --bs=4k \
	--rw=randwrite --ioengine=libaio --iodepth=16 --direct=1 \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --loops=4 \
	--output="$IT_TMP/fio.out"
FIO=$HELPER_PID
wait_fio_writing "$INNER/to-nfs.0.0" $((16 * 1048576)) "$FIO"
URL="$NFS_URL_BASE/b.img"
expect_ok "migrate b.img to $URL under fio" \
	"$DIOLOOP_BIN" migrate --bps 32M "$MNT/b.img" "$URL"
it_show "$IT_TMP/last.out" 3
rc=0
wait "$FIO" || rc=$?
forget_pid "$FIO"
if ((rc == 0)) && grep -q "err= 0" "$IT_TMP/fio.out"; then
	it_ok "fio verify=crc32c through the switch to NFS: no error"
else
	it_fail "expected fio to verify without error, got exit status $rc:"
	it_show "$IT_TMP/fio.out" 15
fi
expect_eq "b.img is served by the nfs backend" nfs "$(node_format b.img)"
expect_match "info on the node: the data lives on the server, a raw image on nfs" \
	".*format: +raw on nfs .*migrated: +to ${URL//./\\.} \(raw on nfs\).*" \
	"$("$DIOLOOP_BIN" info "$MNT/b.img" 2>&1 | tr '\n' ' ')"
check_files "$INNER" b
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
expect_ok "e2fsck of the migrated ext4 is clean" e2fsck -fn "$B_LOOP"
detach_loop "$B_LOOP"
sha_node=$(sha "$MNT/b.img")
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
expect_eq "the file on the server is byte-identical to the node" \
	"$sha_node" "$(sha "$EXPORT/b.img")"

start_daemon "$SRC" "$MNT"
expect_eq "after a restart b.img is served from the server" "$sha_node" \
	"$(sha "$MNT/b.img")"

# The server goes away in the middle of a migration.
must "fill c.img with 48 MiB of data" \
	dd if=/dev/urandom of="$MNT/c.img" bs=1M count=48 oflag=direct conv=notrunc status=none
# 1 MiB/s: a chunk a second for 48 s.  The server stops once the copy
# is under way (an event, not a guessed second), long before it ends.
expect_ok "start migrating c.img to the server, slowly" \
	"$DIOLOOP_BIN" migrate --detach --bps 1M "$MNT/c.img" "$NFS_URL_BASE/c.img?timeout=5"
copied=0
for ((i = 0; i < 600; i++)); do
	copied=$(jq -r '.nodes["c.img"].migration.copied // 0' "$MNT/.dioloop/stats.json" 2>/dev/null)
	[[ $copied =~ ^[0-9]+$ ]] && ((copied > 0)) && break
	sleep 0.1
done
expect_match "the copy to the server is under way when it stops" '[1-9][0-9]*' "$copied"
nfs_server_stop
it_log "server stopped"
# ctl LINE: one control command, its reply's first line.
ctl() {
	"$IT_PY" -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.write(fd, sys.argv[2].encode() + b"\n")
except OSError:
    pass
print(os.pread(fd, 65536, 0).decode().splitlines()[0])' "$MNT/.dioloop/ctl" "$1"
}
state=
for ((i = 0; i < 240; i++)); do
	state=$(ctl "migrate-status c.img" 2>&1 | cut -d' ' -f1)
	[[ $state == failed || $state == cancelled || $state == "done" ]] && break
	sleep 0.5
done
expect_eq "the migration fails once the server is gone for longer than its timeout" failed "$state"
expect_same_bytes "c.img still serves its source" "$SRC/c.img" "$MNT/c.img"
expect_eq "no redirect for c.img" no \
	"$([[ -e $SRC/.c.img.dioloop-redirect ]] && echo yes || echo no)"
nfs_server_start_again || it_fail "ganesha did not start again"
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
it_end
