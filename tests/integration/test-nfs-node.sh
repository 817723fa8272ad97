#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# nfs:// sources end to end against a real nfs-ganesha (nfs-lib.sh):
# `dioloop create` and `info` of an image on the server (a raw image on
# nfs), `dioloop mount`
# of the remote directory (and through the mount.fuse3 helper form), the
# nodes' times the server's,
# data written through a node byte-identical to the exported file, an
# image created later appearing as a node, a direct-I/O loop device over
# a node with ext4 and fio verify=crc32c, e2fsck of the server's file,
# the server stopped for longer than the URL's timeout (EIO, a log line,
# no hang, `dioloop umount` works), and one-line errors with exit status
# 2 for a bad URL, an unreachable port and a missing export.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/nfs-lib.sh"

it_begin "nfs:// sources: a remote directory as block nodes" ganesha.nfsd rpcinfo \
	fio mkfs.ext4 e2fsck dd jq
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"

EXPORT=$IT_TMP/export
IMAGES=$EXPORT/images
MNT=$IT_TMP/mnt
mkdir -p "$IMAGES" "$MNT"
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"
TIMEOUT=5
DIR_URL=$NFS_URL_BASE/images
# The MOUNT port given, not asked from rpcbind: another test's ganesha may
# have registered its own there.
MNTOPT="mountport=$MNT_PORT"
OPTS="?timeout=$TIMEOUT&$MNTOPT"

it_log "---- create and info"
must "dioloop create nfs://.../disk0.img --size 96M" \
	"$DIOLOOP_BIN" create "$DIR_URL/disk0.img$OPTS" --size 96M
expect_eq "the server's disk0.img has 96 MiB" 100663296 "$(stat -c %s "$IMAGES/disk0.img")"
expect_match "dioloop info nfs://.../disk0.img: a raw image on nfs" \
	'.*format: *raw on nfs .*size: *100663296 .*' \
	"$("$DIOLOOP_BIN" info "$DIR_URL/disk0.img$OPTS" 2>&1 | tr '\n' ' ')"
expect_eq "dioloop info --json nfs://.../disk0.img: format raw, protocol nfs" "raw nfs" \
	"$("$DIOLOOP_BIN" info --json "$DIR_URL/disk0.img$OPTS" 2>&1 | jq -r '"\(.format) \(.protocol)"')"
expect_one_line_error "create over an existing image" 1 \
	"$DIOLOOP_BIN" create "$DIR_URL/disk0.img?$MNTOPT" --size 1M
expect_one_line_error "create with a bad URL option" 2 \
	"$DIOLOOP_BIN" create "$DIR_URL/x.img?bogus=1&$MNTOPT" --size 1M
expect_one_line_error "info of a missing image" 1 \
	"$DIOLOOP_BIN" info "$DIR_URL/missing.img?$MNTOPT"

it_log "---- mount errors: one line, exit status 2"
expect_one_line_error "mount a bad URL (no directory)" 2 \
	"$DIOLOOP_BIN" mount "nfs://127.0.0.1:$NFS_PORT" "$MNT"
expect_one_line_error "mount a bad URL (unknown option)" 2 \
	"$DIOLOOP_BIN" mount "$DIR_URL?bogus=1&$MNTOPT" "$MNT"
expect_one_line_error "mount an unreachable port" 2 \
	"$DIOLOOP_BIN" mount "nfs://127.0.0.1:$(nfs_free_port)/images?timeout=3&mountport=$(nfs_free_port)" "$MNT"
expect_one_line_error "mount a missing export" 2 \
	"$DIOLOOP_BIN" mount "nfs://127.0.0.1:$NFS_PORT/no/such/export$OPTS" "$MNT"
expect_one_line_error "mount in the foreground, a missing export" 2 \
	"$DIOLOOP_BIN" mount -f "nfs://127.0.0.1:$NFS_PORT/no/such/export$OPTS" "$MNT"
expect_eq "nothing mounted on $MNT after the errors" no "$(is_mount "$MNT" && echo yes || echo no)"

it_log "---- mount the remote directory"
start_daemon "$DIR_URL$OPTS" "$MNT"
NODE=$MNT/disk0.img
expect_eq "nodes of the remote directory" "disk0.img" "$(names "$MNT")"
expect_eq "the node's size" 100663296 "$(stat -c %s "$NODE")"
# The server's times, not 1970: mtime and ctime as the exported file has
# them (written through the server); atime recent (reads on the server
# may move it).
expect_eq "the node's mtime is the server's" "$(stat -c %Y "$IMAGES/disk0.img")" \
	"$(stat -c %Y "$NODE")"
expect_eq "the node's ctime is the server's" "$(stat -c %Z "$IMAGES/disk0.img")" \
	"$(stat -c %Z "$NODE")"
expect_eq "the node's atime is recent" yes \
	"$( (( $(stat -c %X "$NODE") > $(date +%s) - 600 )) && echo yes || echo no)"
head -c $((3 << 20)) /dev/urandom >"$IT_TMP/data"
sleep 1.1	# so that the write moves the mtime by a second
must "dd 3 MiB (O_DIRECT) to the node at 2 MiB, fsync" \
	dd if="$IT_TMP/data" of="$NODE" bs=1M seek=2 oflag=direct conv=notrunc,fsync status=none
mt_node=$(stat -c %Y "$NODE")
mt_server=$(stat -c %Y "$IMAGES/disk0.img")
expect_eq "after a write the node's mtime follows the server's (within 1 s; node $mt_node, server $mt_server)" yes \
	"$( ((mt_node >= mt_server - 1 && mt_node <= mt_server + 1)) && echo yes || echo no)"
dd if="$IMAGES/disk0.img" of="$IT_TMP/back" bs=1M skip=2 count=3 status=none
if cmp "$IT_TMP/data" "$IT_TMP/back"; then
	it_ok "the exported file holds the 3 MiB written through the node (cmp)"
else
	it_fail "expected the exported file to hold the bytes written through the node"
fi
expect_io "an unaligned write through the node" "ok 5000" pwrite "$NODE" 12345 5000 7
expect_io "fsync of the node" "ok" fsync "$NODE"
expect_io "the exported file holds the unaligned write" "ok same" check "$IMAGES/disk0.img" 12345 5000 7
expect_same_bytes "node vs the exported file" "$NODE" "$IMAGES/disk0.img"
expect_io "a read crossing EOF is short" "ok 4096 $(head -c 4096 /dev/zero | sha256sum | cut -d' ' -f1)" \
	pread "$NODE" $((100663296 - 4096)) 8192

must "dioloop create nfs://.../late.img while mounted" \
	"$DIOLOOP_BIN" create "$DIR_URL/late.img?$MNTOPT" --size 4M
for ((i = 0; i < 150; i++)); do
	[[ -e $MNT/late.img ]] && break
	sleep 0.2
done
expect_eq "an image created on the server later is a node" "disk0.img late.img" "$(names "$MNT")"

it_log "---- a direct-I/O loop device over the node, ext4, fio verify"
attach_loop "$NODE"
LOOP=$LOOP_DEV
must "mkfs.ext4 on $LOOP" mkfs.ext4 -q -F "$LOOP"
mount_inner "$LOOP" "$IT_TMP/inner"
run_fio() {
	local what=$1 out=$IT_TMP/fio.$2.out rc=0
	shift 2
	timeout -k 10 120 fio --directory="$IT_TMP/inner" --direct=1 --ioengine=libaio \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0 \
		--verify_state_save=0 --rw=randwrite --output="$out" "$@" </dev/null >>"$out" 2>&1 || rc=$?
	if ((rc == 0)) && ! grep -q 'verify:' "$out" && grep -q 'err= 0' "$out"; then
		it_ok "fio $what on ext4 over the nfs node: verified, err=0"
	else
		it_fail "fio $what: expected exit status 0 and no verify error, got $rc"
		it_show "$out"
	fi
}
run_fio "QD1, 4k" qd1 --name=qd1 --bs=4k --iodepth=1 --size=8M
run_fio "QD16, 4k-128k" qd16 --name=qd16 --bsrange=4k-128k --iodepth=16 --size=24M
umount_inner "$IT_TMP/inner"
detach_loop "$LOOP"
expect_io "fsync of the node after the loop device" "ok" fsync "$NODE"
expect_ok "e2fsck -fn of the server's file is clean" e2fsck -fn "$IMAGES/disk0.img"
expect_same_bytes "node vs the exported file after ext4 and fio" "$NODE" "$IMAGES/disk0.img"

it_log "---- the server stopped for longer than the timeout ($TIMEOUT s)"
must "stop nfs-ganesha" nfs_server_stop
start=$SECONDS
out=$(timeout -k 5 60 dd if="$NODE" of=/dev/null bs=64k count=1 skip=7 iflag=direct 2>&1)
rc=$?
took=$((SECONDS - start))
expect_eq "dd from the node with the server gone fails (not killed by timeout)" 1 "$rc"
expect_match "dd says EIO" '.*Input/output error.*' "$out"
expect_match "the read failed after the timeout, not at once and not much later (${took}s)" \
	"[4-9]|[12][0-9]" "$took"
expect_io "a write with the server gone: EIO" "err EIO" pwrite "$NODE" 8192 4096 3
sleep 1
if grep -qiE 'no answer from the server|EIO|Input/output error' "$DAEMON_LOG"; then
	it_ok "the daemon logged the failure: $(grep -iE -m1 'no answer from the server|EIO|Input/output error' "$DAEMON_LOG")"
else
	it_fail "expected a log line about the failed requests in the daemon log"
	it_show "$DAEMON_LOG"
fi
start=$SECONDS
dioloop_umount "$MNT"
took=$((SECONDS - start))
expect_match "dioloop umount with the server gone returns in bounded time (${took}s)" \
	"[0-9]|[1-3][0-9]" "$took"
daemon_wait "$DAEMON_PID"
[[ $DAEMON_STATUS == running ]] && { wait_gone "$DAEMON_PID" 30; daemon_wait "$DAEMON_PID"; }
expect_match "the daemon exited after umount" '[0-9]+' "$DAEMON_STATUS"
must "start nfs-ganesha again" nfs_server_start_again

it_log "---- writes not yet committed when the server goes: umount reports them"
start_daemon "$DIR_URL$OPTS" "$MNT"
expect_io "a write through the node (not flushed)" "ok 65536" pwrite "$NODE" 1M 65536 5
must "stop nfs-ganesha" nfs_server_stop
start=$SECONDS
expect_one_line_error "dioloop umount with an unflushed write and no server" 1 \
	"$DIOLOOP_BIN" umount "$MNT"
took=$((SECONDS - start))
expect_match "it says the writes not on the server are lost" '.*flush: Input/output error.*lost.*' \
	"$(cat "$IT_TMP/err.err")"
if is_mount "$MNT"; then
	it_fail "expected $MNT unmounted all the same"
else
	it_ok "$MNT is unmounted all the same (${took}s)"
	forget_mount "$MNT"
fi
daemon_wait "$DAEMON_PID"
[[ $DAEMON_STATUS == running ]] && { wait_gone "$DAEMON_PID" 30; daemon_wait "$DAEMON_PID"; }
expect_match "the daemon exited after umount" '[0-9]+' "$DAEMON_STATUS"
must "start nfs-ganesha again" nfs_server_start_again

it_log "---- the mount.fuse3 helper form"
expect_ok "dioloop URL MNT -o ro (as mount.fuse3 runs it)" \
	"$DIOLOOP_BIN" "$DIR_URL$OPTS" "$MNT" -o ro,_netdev
if is_mount "$MNT"; then
	IT_FUSE+=("$MNT")
	HPID=$(jq -r .pid "$MNT/.dioloop/stats.json" 2>/dev/null)
	[[ $HPID =~ ^[0-9]+$ ]] && IT_PIDS+=("$HPID")
	expect_eq "helper form: nodes" "disk0.img late.img" "$(names "$MNT")"
	expect_eq "helper form: read-only node (mode 0400)" "-r--------" "$(stat -c %A "$NODE")"
	expect_same_bytes "helper form: node vs the exported file" "$NODE" "$IMAGES/disk0.img"
	dioloop_umount "$MNT"
	[[ $HPID =~ ^[0-9]+$ ]] && wait_gone "$HPID" 30 && forget_pid "$HPID"
else
	it_fail "expected a mount on $MNT from the helper form"
fi
it_end
