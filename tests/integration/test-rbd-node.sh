#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# rbd:// sources end to end against a real single-node Ceph cluster
# (ceph-lib.sh; the rbd_cluster CTest fixture's, or one of its own when
# run alone): `dioloop create` and `info` of an image in a namespace of
# pool rbd, `dioloop mount` of the namespace, a direct-I/O loop device
# over the node with ext4 (mkfs, files, fsck clean, remount, checksums),
# the image read back with librbd's own tool, a second daemon refused by
# the exclusive lock, kill -9 of the daemon during fsync'd writes (after
# a remount the journal replays, e2fsck is clean and every file fsync'd
# before the kill is intact), and the OSD killed for longer than the
# URL's timeout (EIO, one log line, a write then fails rather than being
# acknowledged and lost, the node works again once it is back), and the
# daemon's client blocklisted (`dioloop umount` reports the writes lost
# and unmounts anyway, as for an nfs server that does not answer).  Bad
# URLs, a missing pool and an existing image give one line and the
# documented status.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/ceph-lib.sh"

it_begin "rbd:// sources: images in a Ceph cluster as block nodes" rbd mkfs.ext4 e2fsck jq

# The backend may not be built (no librbd at build time).
if "$DIOLOOP_BIN" info "rbd://p/i" 2>&1 | grep -q "unknown protocol"; then
	it_skip "this dioloop has no rbd backend (built without librbd-dev/librados-dev)"
fi

# The fixture's cluster, or our own.
CLUSTER=${DIOLOOP_RBD_CLUSTER:-}
if [[ -n $CLUSTER ]]; then
	[[ -f $CLUSTER/ceph.conf ]] ||
		it_skip "$(cat "$CLUSTER.why" 2>/dev/null || echo "no cluster in $CLUSTER")"
	it_log "using the cluster in $CLUSTER"
else
	[[ -z $(ceph_missing_tools) ]] ||
		it_skip "missing: $(ceph_missing_tools)(apt-get install ceph-mon ceph-osd ceph-common)"
	CLUSTER=$IT_TMP/ceph
	# lib.sh's EXIT trap runs after ours, with the test's status.
	# shellcheck disable=SC2154  # set by the trap as it runs
	trap 'ceph_rc=$?; ceph_cluster_stop "$CLUSTER"; (exit $ceph_rc); it_cleanup' EXIT
	ceph_cluster_start "$CLUSTER" || it_die "could not start a Ceph cluster"
fi
export CEPH_CONF=$CLUSTER/ceph.conf
NS=it$$
must "rbd namespace create rbd/$NS" timeout 60 rbd namespace create "rbd/$NS"
DIR_URL=rbd://rbd/$NS
OPTS="?timeout=20"
MNT=$IT_TMP/mnt
IN=$IT_TMP/inner
mkdir -p "$MNT" "$IN"

it_log "---- create, info and errors"
must "dioloop create $DIR_URL/disk0 --size 96M" "$DIOLOOP_BIN" create "$DIR_URL/disk0$OPTS" --size 96M
expect_match "dioloop info $DIR_URL/disk0: a raw image on rbd" \
	'.*format: *raw on rbd .*size: *100663296 .*' \
	"$("$DIOLOOP_BIN" info "$DIR_URL/disk0$OPTS" 2>&1 | tr '\n' ' ')"
expect_eq "rbd ls rbd/$NS" disk0 "$(timeout 60 rbd ls "rbd/$NS")"
expect_one_line_error "create over an existing image" 1 \
	"$DIOLOOP_BIN" create "$DIR_URL/disk0" --size 1M
expect_one_line_error "create with a bad URL option" 2 \
	"$DIOLOOP_BIN" create "$DIR_URL/x?bogus=1" --size 1M
expect_one_line_error "mount a missing pool" 2 \
	"$DIOLOOP_BIN" mount "rbd://no-such-pool" "$MNT"
expect_one_line_error "mount a bad URL" 2 \
	"$DIOLOOP_BIN" mount "rbd://rbd/$NS/disk0/x" "$MNT"

it_log "---- the namespace as SOURCE, ext4 on a direct-I/O loop device"
start_daemon "$DIR_URL$OPTS" "$MNT"
NODE=$MNT/disk0
expect_eq "nodes of $DIR_URL" disk0 "$(names "$MNT")"
expect_eq "the node's size" 100663296 "$(stat -c %s "$NODE")"
# The image header's times, not 1970: the node's mtime is the image's
# modify timestamp as `rbd info` reports it (the creation time until the
# cluster first updates it).
rbd_mtime=$(timeout 60 rbd info --format json "rbd/$NS/disk0" |
	jq -r '.modify_timestamp // .create_timestamp')
expect_eq "the node's mtime is the image's (rbd info: $rbd_mtime)" \
	"$(date -d "$rbd_mtime" +%s)" "$(stat -c %Y "$NODE")"
attach_loop "$NODE"
LOOP=$LOOP_DEV
fs_roundtrip ext4 "$LOOP"

it_log "---- a second daemon on the same image is refused"
MNT2=$IT_TMP/mnt2
mkdir -p "$MNT2"
# Its only image is locked by the first daemon: nothing to serve, so the
# mount is refused (exit status 1) and names the holder.
expect_status "a second daemon on the namespace" 1 \
	timeout -k 5 60 "$DIOLOOP_BIN" mount "$DIR_URL$OPTS" "$MNT2"
if is_mount "$MNT2"; then
	IT_FUSE+=("$MNT2")
	it_fail "the second daemon mounted $MNT2"
fi
expect_match "its message names the holder" '.*disk0.*exclusive lock is held by .*' \
	"$(paste -sd' ' "$IT_TMP/last.out")"

it_log "---- kill -9 of the daemon during fsync'd writes"
mount_inner "$LOOP" "$IN"
MANIFEST=$IT_TMP/fsynced.sha256
mkdir -p "$IN/before"
for i in 1 2 3 4; do
	out=$(nodeio write-file "$IN/before/f$i" $((i * 131072 + i * 1000)) "$i")
	[[ $out == ok* ]] || it_die "write-file before/f$i: expected ok SHA, got $out"
	echo "${out#ok }  before/f$i" >>"$MANIFEST"
done
STREAM_LOG=$IT_TMP/stream.sha256
: >"$STREAM_LOG"
start_helper "$IT_PY" "$IT_DIR/nodeio.py" write-loop "$IN" stream 64K "$STREAM_LOG" 2000 \
	</dev/null >"$IT_TMP/stream.out" 2>&1
WRITER_PID=$HELPER_PID
for ((i = 0; i < 200; i++)); do
	(($(wc -l <"$STREAM_LOG") >= 10)) && break
	sleep 0.1
done
((($(wc -l <"$STREAM_LOG")) > 0)) || it_die "the writer fsync'd no file in 20 s: $(cat "$IT_TMP/stream.out")"
VICTIM=$DAEMON_PID
it_log "kill -9 $VICTIM, $(wc -l <"$STREAM_LOG") files fsync'd by the writer so far"
kill -KILL "$VICTIM"
daemon_wait "$VICTIM"
expect_eq "exit status of the killed daemon" 137 "$DAEMON_STATUS"
if ! wait_gone "$WRITER_PID" 30; then
	kill -KILL "$WRITER_PID" 2>/dev/null
	wait_gone "$WRITER_PID" 10 || it_fail "the writer did not exit after kill -9"
fi
wait "$WRITER_PID" 2>/dev/null
forget_pid "$WRITER_PID"
cat "$STREAM_LOG" >>"$MANIFEST"
must "umount -l $IN" umount -l "$IN"
# shellcheck disable=SC2034  # lib.sh's cleanup reads it
IT_INNER=()
detach_loop "$LOOP"
must "fusermount3 -u -z $MNT" fusermount3 -u -z "$MNT"
forget_mount "$MNT"

it_log "---- remount: journal replay, fsck, fsync'd files"
start_daemon "$DIR_URL$OPTS" "$MNT"
attach_loop "$NODE"
LOOP=$LOOP_DEV
mount_inner "$LOOP" "$IN"	# replays the journal (the lock passes to us)
umount_inner "$IN"
expect_ok "e2fsck -fn after the journal replay is clean" e2fsck -fn "$LOOP"
mount_inner "$LOOP" "$IN" -o ro
n=$(wc -l <"$MANIFEST")
if out=$(cd "$IN" && sha256sum --quiet -c "$MANIFEST" 2>&1); then
	it_ok "all $n files fsync'd before the kill are intact"
else
	it_fail "expected all $n files fsync'd before the kill intact, got:"
	printf '%s\n' "$out" | head -n 15 | sed 's/^/    | /'
fi
umount_inner "$IN"
detach_loop "$LOOP"
node_sha=$(sha "$NODE")
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_log "---- the OSD killed for longer than the timeout (5 s)"
start_daemon "$DIR_URL?timeout=5" "$MNT"
# Block 20000 as it is (ext4's, written back unchanged below), and a
# flush: librbd's cache, were it on, would now write back.
must "read block 20000 of the node" \
	dd if="$NODE" of="$IT_TMP/blk" bs=4k count=1 skip=20000 iflag=direct status=none
must "write it back, fsync" \
	dd if="$IT_TMP/blk" of="$NODE" bs=4k count=1 seek=20000 oflag=direct conv=notrunc,fsync status=none
must "ceph_osd_kill" ceph_osd_kill "$CLUSTER"
start=$SECONDS
# A block mkfs wrote (librbd answers for objects that do not exist
# without asking the OSD), not read by this daemon yet (no cache).
out=$(timeout -k 5 60 dd if="$NODE" of=/dev/null bs=4k count=1 skip=1 iflag=direct 2>&1)
rc=$?
took=$((SECONDS - start))
expect_eq "dd from the node with the OSD gone fails (not killed by timeout)" 1 "$rc"
expect_match "dd says EIO" '.*Input/output error.*' "$out"
expect_match "the read failed after the timeout, not at once and not much later (${took}s)" \
	"[4-9]|1[0-9]" "$took"
if grep -q 'no answer from the cluster within 5 s' "$DAEMON_LOG"; then
	it_ok "the daemon logged the outage: $(grep -m1 'no answer from the cluster' "$DAEMON_LOG")"
else
	it_fail "expected one log line about the outage"
	it_show "$DAEMON_LOG"
fi
# With the OSD gone a write cannot be durable: the write, or an fsync
# after it, must fail.  (librbd's cache acknowledged such a write, its
# writeback failed after timeout= with nobody told, and a later fsync
# returned 0: the data was lost silently.)  It must fail within a few
# timeouts, not hang: with librbd sending writes from the
# caller's buffer (rbd_disable_zero_copy_writes=false), the write's
# completion waited for the messenger to let go of the buffer, past
# timeout= (over 60 s).  The write and the flush at close each wait up
# to the timeout.
t0=$SECONDS
timeout -k 5 60 dd if="$IT_TMP/blk" of="$NODE" bs=4k count=1 seek=20000 oflag=direct \
	conv=notrunc status=none 2>/dev/null
rc=$?
took=$((SECONDS - t0))
if ((rc == 0)); then
	sleep 7		# the cache's writeback (dirty age 1 s) times out
	out=$(nodeio fsync "$NODE" 2>&1)
	expect_match "a write with the OSD gone was acknowledged; an fsync after it fails" \
		'err E.*' "$out"
elif ((rc == 124 || rc == 137)); then
	it_fail "a write with the OSD gone hung: dd killed after ${took}s (timeout=5)"
else
	expect_match "a write with the OSD gone fails within three times the timeout (${took}s)" \
		'([0-9]|1[0-5])' "$took"
fi
must "ceph_osd_start" ceph_osd_start "$CLUSTER"
# The OSD says "active" before its placement groups peer: wait until the
# cluster serves a client again.
deadline=$((SECONDS + 120))
while ((SECONDS < deadline)); do
	timeout 10 rbd info "rbd/$NS/disk0" >/dev/null 2>&1 && break
	sleep 0.5
done
expect_ok "the same read works once the OSD is back" \
	timeout -k 5 60 dd if="$NODE" of=/dev/null bs=4k count=1 skip=1 iflag=direct status=none
expect_eq "the daemon logged the end of the outage once" 1 \
	"$(grep -c 'the cluster answers again' "$DAEMON_LOG")"
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_log "---- the daemon's client blocklisted: umount reports the loss and unmounts"
# With the OSD gone a flush still succeeds (no cache: nothing is held
# back), but a client the cluster has fenced (blocklisted, as a writer
# that breaks its lock does) can flush nothing.  As for an nfs server
# that does not answer: one line saying the writes not on the cluster
# are lost, and the mount is removed all the same (exit status 1),
# rather than refused and left mounted with no way to flush it.
start_daemon "$DIR_URL?timeout=5" "$MNT"
addr=$(timeout 60 rbd status --format json "rbd/$NS/disk0" | jq -r '.watchers[0].address // empty')
expect_match "the daemon's client watches disk0" '.+/[0-9]+' "$addr"
must "ceph osd blocklist add $addr" timeout 60 ceph osd blocklist add "$addr"
# An image opened after the fence, before any request noticed it: the
# fenced client, shared by the pool's images, gives way to a new one.
must "rbd create rbd/$NS/late (after the fence)" timeout 60 rbd create --size 4M "rbd/$NS/late"
for ((i = 0; i < 50; i++)); do
	[[ $(nodeio pread "$MNT/late" 0 4096 2>&1) == "ok 4096 "* ]] && break
	sleep 0.2
done
expect_match "an image made after the fence is served, through a new client" \
	'ok 4096 .*' "$(nodeio pread "$MNT/late" 0 4096 2>&1)"
for ((i = 0; i < 50; i++)); do
	[[ $(nodeio fsync "$NODE" 2>&1) == "err EIO" ]] && break
	sleep 0.2
done
expect_io "an fsync of the node fails once the client is blocklisted" "err EIO" fsync "$NODE"
daemon=$DAEMON_PID
start=$SECONDS
expect_one_line_error "dioloop umount with the client blocklisted" 1 \
	"$DIOLOOP_BIN" umount "$MNT"
took=$((SECONDS - start))
expect_match "it says the writes not on the cluster are lost" \
	'.*disk0: flush: Input/output error.*lost.*' "$(cat "$IT_TMP/err.err")"
if is_mount "$MNT"; then
	it_fail "expected $MNT unmounted all the same"
	fusermount3 -u -z "$MNT"
else
	it_ok "$MNT is unmounted all the same (${took}s)"
fi
forget_mount "$MNT"
daemon_wait "$daemon"
[[ $DAEMON_STATUS == running ]] && { wait_gone "$daemon" 30; daemon_wait "$daemon"; }
expect_match "the daemon exited after umount" '[0-9]+' "$DAEMON_STATUS"
expect_eq "the daemon's log says the client was blocklisted, once" 1 \
	"$(grep -c 'blocklisted this client' "$DAEMON_LOG")"
must "ceph osd blocklist rm $addr" timeout 60 ceph osd blocklist rm "$addr"

it_log "---- the image as librbd's own tool reads it"
must "rbd export rbd/$NS/disk0" timeout 120 rbd export "rbd/$NS/disk0" "$IT_TMP/export.img"
expect_eq "rbd export = the node before unmount" "$node_sha" "$(sha "$IT_TMP/export.img")"
expect_ok "e2fsck -fn of the exported image is clean" e2fsck -fn "$IT_TMP/export.img"
rm -f "$IT_TMP/export.img"
timeout 60 rbd rm --no-progress "rbd/$NS/disk0" >/dev/null 2>&1
timeout 60 rbd namespace remove "rbd/$NS" >/dev/null 2>&1
it_end
