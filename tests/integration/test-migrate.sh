#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Live migration of mounted nodes (dioloop migrate):
#  - raw -> cow of an idle node: the destination holds exactly the node's
#    bytes and its holes stay holes;
#  - raw -> cow and then cow -> raw while ext4 on a direct-I/O loop device
#    over the node runs fio verify=crc32c: no verify error, e2fsck clean,
#    every file intact; after a daemon restart the node serves the last
#    destination (the redirect);
#  - a destination that fills up mid-copy: the migration fails, the node
#    keeps serving its source, byte for byte;
#  - Ctrl-C of dioloop migrate, and kill -9 of the daemon during a
#    migration: the node is on its source, intact;
#  - a migration is visible: info on a migrated node (and on its source,
#    also when removed) names the destination and its format; a running
#    one is in stats.json, stats --watch and migrate --status, and what
#    it refuses names it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "live migration of mounted nodes between raw and cow" \
	fio mkfs.ext4 e2fsck jq

SRC=$IT_TMP/src
DST=$IT_TMP/dst
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$DST"

must "create a.img" "$DIOLOOP_BIN" create --size 64M "$SRC/a.img"
must "create b.img" "$DIOLOOP_BIN" create --size 256M "$SRC/b.img"
must "create c.img" "$DIOLOOP_BIN" create --size 64M "$SRC/c.img"
must "create d.img" "$DIOLOOP_BIN" create --size 64M "$SRC/d.img"
start_daemon "$SRC" "$MNT"

# migrate NODE DEST [OPTIONS...]: dioloop migrate, output in last.out.
migrate() {
	local node=$1 dest=$2
	shift 2
	"$DIOLOOP_BIN" migrate "$@" "$MNT/$node" "$dest" >"$IT_TMP/last.out" 2>&1 </dev/null
}

info_json() {
	"$DIOLOOP_BIN" info --json "$1"
}

# node_format NODE: the backend serving a node, from the mount's stats.
node_format() {
	jq -r --arg n "$1" '.nodes[$n].format' "$MNT/.dioloop/stats.json" 2>&1
}

# ---------------------------------------------------------------- idle raw -> cow

# 8 MiB of data in three places; the rest stays a hole.
for off in 0 20 50; do
	must "write 3 MiB at $off MiB of a.img" \
		dd if=/dev/urandom of="$MNT/a.img" bs=1M seek="$off" count=3 \
		oflag=direct conv=notrunc status=none
done
must "write 1 MiB at 63 MiB of a.img" \
	dd if=/dev/urandom of="$MNT/a.img" bs=1M seek=63 count=1 \
	oflag=direct conv=notrunc status=none
sha_before=$(sha "$MNT/a.img")
expect_ok "migrate a.img (idle) to a cow image" migrate a.img "$DST/a.cow" --format cow
it_show "$IT_TMP/last.out" 3
expect_eq "a.img reads the same after the switch" "$sha_before" "$(sha "$MNT/a.img")"
expect_same_bytes "the source is untouched" "$SRC/a.img" "$MNT/a.img"
expect_eq "the redirect names the destination" "$DST/a.cow" \
	"$(sed -n 's/^path //p' "$SRC/.a.img.dioloop-redirect" 2>&1)"
expect_eq "a.img is served by the cow backend now" cow \
	"$(node_format a.img)"
out=$("$DIOLOOP_BIN" info "$MNT/a.img" 2>&1)
expect_match "info on the node: format cow (the destination's)" \
	".*format: +cow.*" "$(tr '\n' ' ' <<<"$out")"
expect_match "info on the node: where the data lives" \
	".*migrated: +to $DST/a\.cow \(cow\).*" "$(tr '\n' ' ' <<<"$out")"
expect_eq "info --json on the node: migrated_to" "$DST/a.cow cow cow" \
	"$(info_json "$MNT/a.img" | jq -r '"\(.migrated_to.path) \(.migrated_to.format) \(.format)"' 2>&1)"
expect_eq "info --json on the source image: migrated_to" "$DST/a.cow cow" \
	"$(info_json "$SRC/a.img" | jq -r '"\(.migrated_to.path) \(.format)"' 2>&1)"
expect_match "migrate --status after the switch says switched" \
	"a\.img: switched to $DST/a\.cow \(cow\).*" \
	"$("$DIOLOOP_BIN" migrate --status "$MNT/a.img" 2>&1)"
expect_eq "migrate --status --json after the switch" "switched false $DST/a.cow" \
	"$("$DIOLOOP_BIN" migrate --status --json "$MNT/a.img" | jq -r '"\(.state) \(.running) \(.dest)"' 2>&1)"
expect_match "migrate --status of a node never migrated" \
	"d\.img: no migration is running" \
	"$("$DIOLOOP_BIN" migrate --status "$MNT/d.img" 2>&1)"
mapped=$(info_json "$DST/a.cow" | jq -r '[.volumes[] | .mapped_blocks] | add' 2>&1)
expect_eq "the destination maps exactly the 10 MiB written (holes stay holes)" \
	2560 "$mapped"

# A cow image with another volume is not migrated (one volume would move).
must "snapshot a.img (now cow)" "$DIOLOOP_BIN" snapshot "$MNT/a.img" keep
expect_status "migrating a cow image with a snapshot is refused" 1 \
	"$DIOLOOP_BIN" migrate "$MNT/a.img" "$DST/a-snap.raw"
expect_match "the refusal says why" ".*snapshots or clones.*" "$(tr '\n' ' ' <"$IT_TMP/last.out")"
must "delete the snapshot" "$DIOLOOP_BIN" snapshot --delete "$MNT/a.img" keep

# A bad block in a cow source stops the migration with its address,
# unless told to leave it as a hole.
COW_TOOL=${DIOLOOP_COW_TOOL:-$(dirname "$DIOLOOP_BIN")/tests/integration/dioloop-cow-tool}
pbn=$("$COW_TOOL" pbn "$DST/a.cow" - 5 2>&1)
expect_match "logical block 5 of a.cow is stored" "[0-9]+" "$pbn"
must "corrupt the block holding logical block 5 of a.cow" \
	dd if=/dev/urandom of="$DST/a.cow" bs=4096 seek="$pbn" count=1 \
	conv=notrunc oflag=direct status=none
expect_status "migrating a.img with a corrupt block fails" 1 \
	"$DIOLOOP_BIN" migrate "$MNT/a.img" "$DST/a2.raw"
expect_match "the failure names the bad block's address" ".*error at byte 20480.*" \
	"$(tr '\n' ' ' <"$IT_TMP/last.out")"
expect_eq "a.img is still served by its cow image" cow "$(node_format a.img)"
expect_ok "with --ignore-bad-blocks the migration completes" \
	"$DIOLOOP_BIN" migrate --ignore-bad-blocks "$MNT/a.img" "$DST/a2.raw"
expect_eq "the bad block became zeros" \
	"$(head -c 4096 /dev/zero | sha256sum | cut -d' ' -f1)" \
	"$(dd if="$MNT/a.img" bs=4096 skip=5 count=1 status=none | sha256sum | cut -d' ' -f1)"
sha_before=$(sha "$MNT/a.img")

# ---------------------------------------------------------------- raw -> cow -> raw under load

attach_loop "$MNT/b.img"
B_LOOP=$LOOP_DEV
INNER=$IT_TMP/inner
must "mkfs.ext4 on b.img" mkfs.ext4 -q -F "$B_LOOP"
mount_inner "$B_LOOP" "$INNER"
must "write files with known checksums" make_files "$INNER" b

# fio_load TAG: fio verify=crc32c in the background, 4 rounds of random
# writes then a full verify each; FIO_PID.
fio_load() {
	start_helper fio --name="$1" --directory="$INNER" --size=24M --bs=4k \
		--rw=randwrite --ioengine=libaio --iodepth=16 --direct=1 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 --loops=4 \
		--output="$IT_TMP/fio-$1.out"
	FIO_PID=$HELPER_PID
	wait_fio_writing "$INNER/$1.0.0" $((24 * 1048576)) "$FIO_PID"
}

# wait_fio TAG
wait_fio() {
	local rc=0
	wait "$FIO_PID" || rc=$?
	forget_pid "$FIO_PID"
	if ((rc == 0)) && ! grep -q "verify:" "$IT_TMP/fio-$1.out" 2>/dev/null &&
		grep -q "err= 0" "$IT_TMP/fio-$1.out"; then
		it_ok "$1: fio verify=crc32c through the switch: no error"
	else
		it_fail "$1: expected fio to verify without error, got exit status $rc:"
		it_show "$IT_TMP/fio-$1.out" 15
	fi
}

fio_load raw-to-cow
# Throttled so that the copy runs while fio writes.
expect_ok "migrate b.img to cow under fio" migrate b.img "$DST/b.cow" --format cow --bps 64M
it_show "$IT_TMP/last.out" 3
wait_fio raw-to-cow
expect_eq "b.img is served by the cow backend" cow \
	"$(node_format b.img)"

fio_load cow-to-raw
expect_ok "migrate b.img back to raw under fio" migrate b.img "$DST/b.raw" --format raw --bps 64M
it_show "$IT_TMP/last.out" 3
wait_fio cow-to-raw
check_files "$INNER" b
umount_inner "$INNER" || it_die "cannot go on with $INNER mounted"
expect_ok "e2fsck of the migrated ext4 is clean" e2fsck -fn "$B_LOOP"
detach_loop "$B_LOOP"
sha_b=$(sha "$MNT/b.img")
expect_same_bytes "the node is its last destination" "$DST/b.raw" "$MNT/b.img"
expect_eq "b.img is served by the raw backend again" raw "$(node_format b.img)"

# ---------------------------------------------------------------- a full destination

must "fill c.img with 32 MiB of data" \
	dd if=/dev/urandom of="$MNT/c.img" bs=1M count=32 oflag=direct conv=notrunc status=none
TINY=$IT_TMP/tiny
mount_inner tmpfs "$TINY" -t tmpfs -o size=8M
expect_status "migrate c.img to a full file system fails" 1 \
	"$DIOLOOP_BIN" migrate "$MNT/c.img" "$TINY/c.raw"
it_show "$IT_TMP/last.out" 3
expect_match "the failure is said" ".*(No space left|stays on its source).*" \
	"$(tr '\n' ' ' <"$IT_TMP/last.out")"
expect_same_bytes "c.img still serves its source" "$SRC/c.img" "$MNT/c.img"
expect_eq "no redirect for c.img" no \
	"$([[ -e $SRC/.c.img.dioloop-redirect ]] && echo yes || echo no)"
expect_eq "the partial destination is removed" no \
	"$([[ -e $TINY/c.raw ]] && echo yes || echo no)"
umount_inner "$TINY"

# ---------------------------------------------------------------- Ctrl-C

start_helper "$DIOLOOP_BIN" migrate --bps 2M "$MNT/c.img" "$DST/c.raw"
CLI=$HELPER_PID
# The command sets its SIGINT handler before it asks the daemon: once the
# daemon shows the migration, a Ctrl-C reaches the handler.
for _ in $(seq 300); do
	"$DIOLOOP_BIN" migrate --status "$MNT/c.img" 2>/dev/null |
		grep -qF "migrating to $DST/c.raw (" && break
	pid_alive "$CLI" || break
	sleep 0.1
done
kill -INT "$CLI"
rc=0
wait "$CLI" || rc=$?
forget_pid "$CLI"
expect_eq "dioloop migrate interrupted exits 1" 1 "$rc"
expect_same_bytes "c.img is on its source after the cancel" "$SRC/c.img" "$MNT/c.img"
expect_eq "the cancelled destination is removed" no \
	"$([[ -e $DST/c.raw ]] && echo yes || echo no)"
status=$("$DIOLOOP_BIN" migrate --cancel "$MNT/c.img" 2>&1)
expect_match "cancel with nothing running says so" ".*no migration.*running.*" "$status"

# ---------------------------------------------------------------- a running migration is visible

# At 16 KiB/s the first 1 MiB chunk goes at once and the second waits
# about a minute: running through the checks below however slow the
# machine; it is cancelled, not waited for.
expect_ok "start a slow migration of c.img (--detach)" \
	"$DIOLOOP_BIN" migrate --detach --bps 16K "$MNT/c.img" "$DST/c3.raw"
for _ in $(seq 300); do
	copied=$(jq -r '.nodes["c.img"].migration.copied // 0' "$MNT/.dioloop/stats.json" 2>/dev/null)
	[[ $copied =~ ^[0-9]+$ ]] && ((copied > 0)) && break
	sleep 0.1
done
mig=$(jq -c '.nodes["c.img"].migration' "$MNT/.dioloop/stats.json" 2>&1)
expect_eq "stats.json: the migration's phase, destination, pass" \
	"copying $DST/c3.raw raw 1" \
	"$(jq -r '"\(.phase) \(.dest) \(.format) \(.pass)"' <<<"$mig" 2>&1)"
expect_eq "stats.json: bytes copied, remaining, rate > 0" "true true true" \
	"$(jq -r '"\(.copied > 0) \(.remaining > 0) \(.rate_bps > 0)"' <<<"$mig" 2>&1)"
expect_eq "stats.json: no migration on an idle node" null \
	"$(jq -c '.nodes["b.img"].migration' "$MNT/.dioloop/stats.json" 2>&1)"
expect_match "info on the node says it is being migrated, and where to" \
	".*format: +raw .*migrating: +to $DST/c3\.raw \(raw\): copying, [0-9]+% copied.*" \
	"$("$DIOLOOP_BIN" info "$MNT/c.img" 2>&1 | tr '\n' ' ')"
expect_eq "info --json on the source image: migrating" "$DST/c3.raw copying" \
	"$(info_json "$SRC/c.img" | jq -r '"\(.migrating.dest) \(.migrating.phase)"' 2>&1)"
out=$("$DIOLOOP_BIN" migrate --status "$MNT/c.img" 2>&1)
expect_match "migrate --status of the running migration" \
	"c\.img: migrating to $DST/c3\.raw \(raw\): copying, pass 1, .* copied \([0-9]+%\), .*/s" "$out"
"$DIOLOOP_BIN" stats --watch --interval 0.3 --count 1 "$MNT" >"$IT_TMP/watch.out" 2>&1
expect_match "stats --watch shows the migration under its node" \
	".*c\.img.* +migration copying [0-9]+% pass 1: .* copied, .* left, .*/s -> .*" \
	"$(tr '\n' ' ' <"$IT_TMP/watch.out")"
expect_eq "stats --watch: no line over 80 columns" 0 \
	"$(awk 'length > 80' "$IT_TMP/watch.out" | wc -l)"
expect_eq "stats --watch --json carries the migration" "copying $DST/c3.raw" \
	"$("$DIOLOOP_BIN" stats --watch --json --interval 0.3 --count 1 "$MNT" |
		jq -r '.nodes["c.img"].migration | "\(.phase) \(.dest)"' 2>&1)"
prom=$("$DIOLOOP_BIN" stats --prometheus "$MNT" 2>&1)
expect_match "stats --prometheus: the migration's gauges for c.img" \
	'.*# TYPE dioloop_migration_copied_bytes gauge dioloop_migration_copied_bytes\{node="c\.img"\} [1-9][0-9]* .*dioloop_migration_pass\{node="c\.img"\} 1 .*' \
	"$(tr '\n' ' ' <<<"$prom")"
expect_status "a second migration of c.img is refused" 1 \
	"$DIOLOOP_BIN" migrate --detach "$MNT/c.img" "$DST/c4.raw"
expect_match "the refusal names the running migration" \
	".*a migration to $DST/c3\.raw is running on 'c\.img'.*" \
	"$("$DIOLOOP_BIN" migrate --detach "$MNT/c.img" "$DST/c4.raw" 2>&1)"
expect_match "a snapshot during the migration names it too" \
	".*a migration to $DST/c3\.raw is running on 'c\.img'.*" \
	"$("$DIOLOOP_BIN" snapshot "$MNT/c.img" s1 2>&1)"
must "cancel the slow migration" "$DIOLOOP_BIN" migrate --cancel "$MNT/c.img"
for _ in $(seq 300); do
	"$DIOLOOP_BIN" migrate --status "$MNT/c.img" 2>&1 | grep -q "no migration is running" && break
	sleep 0.1
done
expect_match "migrate --status after the cancel" \
	"c\.img: the migration to $DST/c3\.raw was cancelled; the node stays on its source.*" \
	"$("$DIOLOOP_BIN" migrate --status "$MNT/c.img" 2>&1)"
expect_same_bytes "c.img is on its source after the cancel" "$SRC/c.img" "$MNT/c.img"

# ---------------------------------------------------------------- --remove-source

must "write 5 MiB to d.img" \
	dd if=/dev/urandom of="$MNT/d.img" bs=1M seek=7 count=5 oflag=direct conv=notrunc status=none
sha_d=$(sha "$MNT/d.img")
expect_ok "migrate d.img with --remove-source" migrate d.img "$DST/d.cow" --format cow --remove-source
expect_eq "the source image is removed" no "$([[ -e $SRC/d.img ]] && echo yes || echo no)"
expect_match "d.img is still listed" ".*d\.img.*" "$(names "$MNT")"
expect_eq "d.img reads the same from its destination" "$sha_d" "$(sha "$MNT/d.img")"
expect_eq "info on the removed source image: the destination's format" \
	"$DST/d.cow cow" \
	"$(info_json "$SRC/d.img" | jq -r '"\(.migrated_to.path) \(.format)"' 2>&1)"
expect_match "info on the node of a removed source" \
	".*format: +cow.*migrated: +to $DST/d\.cow \(cow\).*" \
	"$("$DIOLOOP_BIN" info "$MNT/d.img" 2>&1 | tr '\n' ' ')"

# ---------------------------------------------------------------- restart serves the redirects

dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
start_daemon "$SRC" "$MNT"
expect_eq "after a restart b.img serves its destination" "$sha_b" "$(sha "$MNT/b.img")"
expect_eq "after a restart a.img serves its destination" "$sha_before" "$(sha "$MNT/a.img")"
expect_eq "after a restart d.img (source removed) serves its destination" "$sha_d" "$(sha "$MNT/d.img")"
expect_ok "d.img (source removed) is writable after a restart" \
	dd if=/dev/urandom of="$MNT/d.img" bs=1M count=1 oflag=direct conv=notrunc status=none

# ---------------------------------------------------------------- kill -9 mid-migration

expect_ok "start a slow migration of c.img" \
	"$DIOLOOP_BIN" migrate --detach --bps 2M "$MNT/c.img" "$DST/c2.raw"
for _ in $(seq 300); do
	copied=$(jq -r '.nodes["c.img"].migration.copied // 0' "$MNT/.dioloop/stats.json" 2>/dev/null)
	[[ $copied =~ ^[0-9]+$ ]] && ((copied > 0)) && break
	sleep 0.1
done
VICTIM=$DAEMON_PID
kill -KILL "$VICTIM"
daemon_wait "$VICTIM"
must "fusermount3 -u -z $MNT" fusermount3 -u -z "$MNT"
forget_mount "$MNT"
expect_eq "no redirect for c.img after the crash" no \
	"$([[ -e $SRC/.c.img.dioloop-redirect ]] && echo yes || echo no)"
start_daemon "$SRC" "$MNT"
expect_same_bytes "after kill -9 c.img serves its source, intact" "$SRC/c.img" "$MNT/c.img"
dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"
expect_ok "dioloop check of the cow destination a.cow is clean" \
	"$DIOLOOP_BIN" check "$DST/a.cow"

it_end
