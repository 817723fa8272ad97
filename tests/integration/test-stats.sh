#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Statistics and the control directory:
#  - .dioloop is not listed as a node, stats.json is read-only;
#  - every request is counted exactly (ops and bytes by type, errors by
#    errno, latency histograms whose counts match the ops), a node nobody
#    touched shows zeros;
#  - dioloop stats prints the table, --json the snapshot, --watch rates;
#  - the ctl file takes a command from a shell redirection;
#  - the daemon logs one line per event, naming the node;
#  - bad arguments to stats and limit get one line and exit status 2;
#  - stats --textfile in a directory anyone can write: symlinks another
#    user plants at the file's name and at its temporary's do not make
#    root write through them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "statistics: stats.json, dioloop stats, the ctl file, logs" jq

M=$((1 << 20))
SRC=$IT_TMP/src
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$MNT"
must "dioloop create --size 8M s.img" "$DIOLOOP_BIN" create --size 8M "$SRC/s.img"
must "dioloop create --size 8M t.img" "$DIOLOOP_BIN" create --size 8M "$SRC/t.img"
start_daemon "$SRC" "$MNT"
STATS=$MNT/.dioloop/stats.json

stat_of() {
	jq -r --arg n "$1" ".nodes[\$n]$2" "$STATS"
}

it_log "---- the control directory"
expect_eq "ls -A of the mount lists the nodes only" "s.img t.img" "$(all_names "$MNT")"
expect_eq "ls -A of .dioloop" "ctl stats.json" "$(all_names "$MNT/.dioloop")"
expect_eq "modes of .dioloop, stats.json, ctl" "755 444 600" \
	"$(stat -c %a "$MNT/.dioloop" "$STATS" "$MNT/.dioloop/ctl" | paste -sd' ' -)"
expect_io "stats.json cannot be opened for writing" "err EACCES" pwrite "$STATS" 0 10
expect_io "no node named .dioloop/anything else" "err ENOENT" stat "$MNT/.dioloop/other"
expect_eq "stats.json is valid JSON naming both nodes" "s.img,t.img" \
	"$(jq -r '.nodes | keys | join(",")' "$STATS")"

it_log "---- exact counts"
for i in 1 2 3; do
	expect_io "pwrite $i of 64 KiB to s.img" "ok 65536" pwrite "$MNT/s.img" $((i * 65536)) 65536 "$i"
done
expect_io "pwrite at EOF (ENOSPC)" "err ENOSPC" pwrite "$MNT/s.img" $((8 * M)) 4096
for i in 1 2; do
	expect_match "pread $i of 4 KiB" 'ok 4096 [0-9a-f]+' "$(nodeio pread "$MNT/s.img" 65536 4096)"
done
expect_io "fsync" "ok" fsync "$MNT/s.img"
expect_io "punch a hole" "ok" fallocate "$MNT/s.img" punch $M 65536
expect_io "zero a range" "ok" fallocate "$MNT/s.img" zero $((2 * M)) 8192
expect_eq "ops of s.img: read write flush discard write_zeroes copy" "2 4 1 1 1 0" \
	"$(stat_of s.img '.ops | [.read, .write, .flush, .discard, .write_zeroes, .copy] | map(tostring) | join(" ")')"
expect_eq "bytes of s.img: read write discard write_zeroes" "8192 196608 65536 8192" \
	"$(stat_of s.img '.bytes | [.read, .write, .discard, .write_zeroes] | map(tostring) | join(" ")')"
expect_eq "errors of s.img (by errno, total)" '{"ENOSPC":1} 1' \
	"$(stat_of s.img '.errors | tojson') $(stat_of s.img .errors_total)"
expect_eq "latency histogram counts = ops (read write flush)" "2 4 1" \
	"$(stat_of s.img '.latency_us | [.read.count, .write.count, .flush.count] | map(tostring) | join(" ")')"
expect_eq "latency buckets add up to the counts" "2 4 1" \
	"$(stat_of s.img '.latency_us | [.read.buckets, .write.buckets, .flush.buckets] | map(add | tostring) | join(" ")')"
expect_eq "32 log2 buckets per histogram" 32 "$(stat_of s.img '.latency_us.read.buckets | length')"
expect_eq "nothing in flight, nothing queued" "0 0" \
	"$(stat_of s.img .in_flight) $(stat_of s.img .throttle.queued)"
expect_eq "t.img, never touched: all zeros" 0 \
	"$(stat_of t.img ' | [.ops[], .bytes[], .errors_total] | add')"
expect_eq "format and size of s.img" "raw $((8 * M))" "$(stat_of s.img .format) $(stat_of s.img .size)"

it_log "---- dioloop stats"
must "dioloop stats MNT" "$DIOLOOP_BIN" stats "$MNT"
expect_match "the table's header" 'NODE +READS +WRITES +FLUSH .*' "$(head -n 1 "$IT_TMP/last.out")"
expect_match "the table's line for s.img: 2 reads, 4 writes, 1 flush" \
	's\.img +2 +4 +1 .*' "$(grep '^s\.img' "$IT_TMP/last.out")"
must "dioloop stats --json MNT" "$DIOLOOP_BIN" stats --json "$MNT"
expect_eq "--json prints the snapshot (4 writes of s.img)" 4 \
	"$(jq '.nodes["s.img"].ops.write' "$IT_TMP/last.out")"
# A load that lasts until the samples are taken, however slow the
# machine: small dd runs under write_bps=4M until told to stop.
must "dioloop limit MNT/t.img write_bps=4M" "$DIOLOOP_BIN" limit "$MNT/t.img" write_bps=4M
start_helper bash -c 'until [[ -e $1 ]]; do
	dd if=/dev/zero of="$2" bs=64k count=16 oflag=direct conv=notrunc status=none || exit 1
done' writer "$IT_TMP/stop-t" "$MNT/t.img"
DD_PID=$HELPER_PID
for ((i = 0; i < 300; i++)); do (($(stat_of t.img .ops.write) > 0)) && break; sleep 0.1; done
must "dioloop stats --watch --interval 0.3 --count 2 MNT (under load)" \
	"$DIOLOOP_BIN" stats --watch --interval 0.3 --count 2 "$MNT"
cp "$IT_TMP/last.out" "$IT_TMP/watch.out"
touch "$IT_TMP/stop-t"
expect_ok "the writer ends without an error" wait "$DD_PID"
forget_pid "$DD_PID"
must "dioloop limit MNT/t.img write_bps=0" "$DIOLOOP_BIN" limit "$MNT/t.img" write_bps=0
expect_eq "--watch without a terminal: one header, then plain lines" 1 "$(grep -c 'NODE' "$IT_TMP/watch.out")"
expect_match "--watch shows t.img writing (W/S > 0), its line starting with the time" \
	'[0-9]{2}:[0-9]{2}:[0-9]{2} t\.img +[0-9]+ +[1-9][0-9]* .*' \
	"$(grep ' t\.img ' "$IT_TMP/watch.out" | tail -n 1)"
expect_status "dioloop stats on a directory that is no dioloop mount" 2 "$DIOLOOP_BIN" stats "$IT_TMP"
expect_match "... in one line" "dioloop: stats: .* is not a dioloop mount point" "$(cat "$IT_TMP/last.out")"
expect_status "dioloop stats without a mount point" 2 "$DIOLOOP_BIN" stats

it_log "---- limits through the command and the ctl file"
for bad in "iops=fast" "speed=5" "burst_ms=0"; do
	expect_status "dioloop limit MNT $bad" 2 "$DIOLOOP_BIN" limit "$MNT" "$bad"
	expect_match "... in one line" "dioloop: limit: .*" "$(cat "$IT_TMP/last.out")"
done
expect_status "dioloop limit MNT/s.img total_bps=1M (mount-wide only)" 2 \
	"$DIOLOOP_BIN" limit "$MNT/s.img" total_bps=1M
expect_status "dioloop limit on no dioloop mount" 2 "$DIOLOOP_BIN" limit "$IT_TMP" iops=5
expect_status "dioloop limit on a node that does not exist" 2 "$DIOLOOP_BIN" limit "$MNT/nope.img" iops=5
must "dioloop limit MNT/s.img (show)" "$DIOLOOP_BIN" limit "$MNT/s.img"
expect_eq "dioloop limit without settings shows the limits" \
	"iops=off read_iops=off write_iops=off bps=off read_bps=off write_bps=off burst_ms=100" "$(cat "$IT_TMP/last.out")"
must "echo 'limit s.img read_iops=77' > ctl (a shell redirection)" \
	bash -c "echo 'limit s.img read_iops=77' > '$MNT/.dioloop/ctl'"
expect_eq "read_iops of s.img after the ctl command" 77 "$(stat_of s.img .throttle.limits.read_iops)"
expect_eq "t.img keeps its limits" 0 "$(stat_of t.img .throttle.limits.read_iops)"

it_log "---- the log: one line per event, naming the node"
DLOG=$DAEMON_LOG
expect_eq "the ENOSPC was logged, naming s.img" 1 \
	"$(grep -c "^dioloop\[$DAEMON_PID\]: s.img: write: No space left on device$" "$DLOG")"
expect_eq "the limit change was logged, naming s.img" 1 \
	"$(grep -c "^dioloop\[$DAEMON_PID\]: s.img: limits: read_iops=77$" "$DLOG")"
# The rate limit's window is 10 s. A burst on a node that has had no
# error yet starts its window, so its six errors fall in one window however
# slow the machine ran the checks before it.
# One process, so the six writes take milliseconds.
"$IT_PY" - "$MNT/t.img" $((8 * M)) <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
for _ in range(6):
    try:
        os.pwrite(fd, b"\0" * 4096, int(sys.argv[2]))
        sys.exit("pwrite at the end succeeded")
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
EOF
expect_eq "6 ENOSPC errors in a burst: logged once (rate-limited)" 1 \
	"$(grep -c "t.img: write: No space left on device" "$DLOG")"
expect_eq "... but all counted" 6 "$(stat_of t.img .errors.ENOSPC)"

it_log "---- stats --textfile: symlinks planted in a directory anyone can write"
# Another user plants symlinks to a file of root's at the textfile's name
# and at the name its temporary had (FILE.PID.tmp, PID the running
# stats --watch's): root's file keeps its bytes, FILE becomes a regular
# file holding the metrics.  The directory is 0777 without the sticky
# bit, where fs.protected_symlinks does not stop root following them.
PROM_DIR=$IT_TMP/textfile
VICTIM=$IT_TMP/root-owned
mkdir -p "$PROM_DIR"
chmod 0711 "$IT_TMP"	# the other user reaches PROM_DIR
chmod 0777 "$PROM_DIR"
echo "root's own bytes" >"$VICTIM"
chmod 0644 "$VICTIM"
victim_sha=$(sha "$VICTIM")
PLANT=()
if command -v setpriv >/dev/null && id -u nobody >/dev/null 2>&1; then
	PLANT=(setpriv --reuid="$(id -u nobody)" --regid="$(id -g nobody)" --clear-groups --)
fi
must "plant FILE -> root's file" "${PLANT[@]}" ln -s "$VICTIM" "$PROM_DIR/dioloop.prom"
start_helper "$DIOLOOP_BIN" stats --prometheus --textfile "$PROM_DIR/dioloop.prom" \
	--watch --interval 0.2 --count 10 "$MNT" >"$IT_TMP/textfile.out" 2>&1 </dev/null
STATS_PID=$HELPER_PID
must "plant FILE.$STATS_PID.tmp -> root's file" \
	"${PLANT[@]}" ln -s "$VICTIM" "$PROM_DIR/dioloop.prom.$STATS_PID.tmp"
rc=0
wait "$STATS_PID" || rc=$?
forget_pid "$STATS_PID"
expect_eq "stats --textfile --watch with the symlinks planted: exit status" 0 "$rc"
expect_eq "root's file keeps its bytes" "$victim_sha" "$(sha "$VICTIM")"
expect_eq "FILE is a regular file now, not the symlink" "regular file" \
	"$(stat -c %F "$PROM_DIR/dioloop.prom")"
expect_eq "FILE holds the metrics" 1 \
	"$(grep -c '^# TYPE dioloop_requests_total counter$' "$PROM_DIR/dioloop.prom")"
expect_eq "only FILE and the planted symlink are left (no temporary)" "dioloop.prom dioloop.prom.$STATS_PID.tmp" \
	"$(all_names "$PROM_DIR")"

daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

it_end
