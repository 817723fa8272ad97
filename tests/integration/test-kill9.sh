#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# kill -9 of the daemon under load: ext4 on a direct-I/O loop device over
# a node, files written and fsync'd (their checksums recorded), then fio
# and an fsync-per-file writer running while the daemon is killed.  After
# cleaning up the dead mount (umount -l the inner ext4, losetup -d, then
# fusermount3 -u -z) and mounting again: ext4 replays its journal, e2fsck
# -fn is clean, and every file fsync'd before the kill is intact.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "kill -9 of the daemon during writes: fsync'd data survives, ext4 is clean" \
	fio mkfs.ext4 e2fsck

SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
IN=$IT_TMP/inner
mkdir -p "$SRC" "$MNT" "$IN"
must "dioloop create --size 256M ext4.img" "$DIOLOOP_BIN" create --size 256M "$SRC/ext4.img"
start_daemon "$SRC" "$MNT"
VICTIM=$DAEMON_PID
attach_loop "$MNT/ext4.img"
LOOP=$LOOP_DEV
must "mkfs.ext4 on $LOOP" mkfs.ext4 -q -F "$LOOP"
mount_inner "$LOOP" "$IN"

# Files fsync'd before the load starts.
MANIFEST=$IT_TMP/fsynced.sha256
mkdir -p "$IN/before"
for i in 1 2 3 4 5 6 7 8; do
	out=$(nodeio write-file "$IN/before/f$i" $((i * 131072 + i * 1000)) "$i")
	[[ $out == ok* ]] || it_die "write-file before/f$i: expected ok SHA, got $out"
	echo "${out#ok }  before/f$i" >>"$MANIFEST"
done
it_ok "8 files written and fsync'd before the load (file and directory fsync)"

# The load: fio (buffered writes with periodic fsync, so the journal is
# busy) and a writer that fsyncs each file and logs it once fsync'd.
STREAM_LOG=$IT_TMP/stream.sha256
: >"$STREAM_LOG"
start_helper fio --name=load --directory="$IN" --rw=randwrite --bsrange=4k-64k \
	--size=24M --numjobs=2 --ioengine=psync --fsync=8 --time_based --runtime=120 \
	--verify_state_save=0 \
	--output="$IT_TMP/fio.out" </dev/null >/dev/null 2>&1
FIO_PID=$HELPER_PID
start_helper "$IT_PY" "$IT_DIR/nodeio.py" write-loop "$IN" stream 64K "$STREAM_LOG" 2000 \
	</dev/null >"$IT_TMP/stream.out" 2>&1
WRITER_PID=$HELPER_PID

# Let the load run until the writer has fsync'd a few files (up to 60 s:
# an ASan build on a busy machine).
for ((i = 0; i < 600; i++)); do
	(($(wc -l <"$STREAM_LOG") >= 10)) && break
	sleep 0.1
done
sleep 1
n_before=$(wc -l <"$STREAM_LOG")
((n_before > 0)) || it_die "the writer fsync'd no file in 60 s: $(cat "$IT_TMP/stream.out")"
expect_eq "fio still running when the daemon is killed" yes "$(pid_alive "$FIO_PID" && echo yes || echo no)"
expect_eq "writer still running when the daemon is killed" yes "$(pid_alive "$WRITER_PID" && echo yes || echo no)"

it_log "kill -9 $VICTIM (the daemon), $n_before files fsync'd by the writer so far"
kill -KILL "$VICTIM"
daemon_wait "$VICTIM"
expect_eq "exit status of the killed daemon" 137 "$DAEMON_STATUS"

# The writers now get errors; give them 30 s to notice, then kill them.
for pid in "$FIO_PID" "$WRITER_PID"; do
	if ! wait_gone "$pid" 30; then
		it_log "helper $pid still running 30 s after the kill: kill -9"
		kill -KILL "$pid" 2>/dev/null
		wait_gone "$pid" 10 || it_fail "helper $pid did not exit after kill -9 (stuck in the kernel?)"
	fi
	wait "$pid" 2>/dev/null
	forget_pid "$pid"
done
it_log "writer: $(cat "$IT_TMP/stream.out"); files it fsync'd: $(wc -l <"$STREAM_LOG")"
cat "$STREAM_LOG" >>"$MANIFEST"

# Clean up the dead mount: inner ext4 (lazily: its device is dead), the
# loop device, then the FUSE mount.
must "umount -l $IN" umount -l "$IN"
# shellcheck disable=SC2034  # lib.sh's cleanup reads it
IT_INNER=()
detach_loop "$LOOP"
must "fusermount3 -u -z $MNT" fusermount3 -u -z "$MNT"
forget_mount "$MNT"
expect_eq "$MNT after fusermount3 -u -z" no "$(is_mount "$MNT" && echo yes || echo no)"

it_log "---- restart"
start_daemon "$SRC" "$MNT"
attach_loop "$MNT/ext4.img"
LOOP=$LOOP_DEV
mount_inner "$LOOP" "$IN"	# replays the journal
umount_inner "$IN"
expect_ok "e2fsck -fn after the journal replay is clean" e2fsck -fn "$LOOP"
mount_inner "$LOOP" "$IN" -o ro
n=$(wc -l <"$MANIFEST")
if out=$(cd "$IN" && sha256sum --quiet -c "$MANIFEST" 2>&1); then
	it_ok "all $n files fsync'd before the kill are intact (8 before the load, $((n - 8)) by the writer)"
else
	it_fail "expected all $n files fsync'd before the kill intact, got:"
	printf '%s\n' "$out" | head -n 15 | sed 's/^/    | /'
fi
umount_inner "$IN"
detach_loop "$LOOP"
node_sha=$(sha "$MNT/ext4.img")
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the restarted daemon after dioloop umount" 0 "$DAEMON_STATUS"
expect_eq "ext4.img after unmount = its node before" "$node_sha" "$(sha "$SRC/ext4.img")"
expect_ok "e2fsck -fn of the image file is clean" e2fsck -fn "$SRC/ext4.img"

it_end
