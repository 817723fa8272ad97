#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tools/stress on the nfs backend against a real nfs-ganesha (nfs-lib.sh),
# ext4 only, in its short mode (under a minute in all):
#   1. without --nfs-url the nfs combination is skipped, and says why;
#   2. --short --nfs-url URL --nfs-export DIR: the images are created on
#      the server, the URL mounted with --loop, load, fsck, the model and
#      fio verified, the images read back over NFS: PASS;
#   3. --short --crash: 2 rounds of kill -9 of the daemon and a remount of
#      the same URL; both survived, fsync'd data intact.
# After each run nothing is left mounted, attached or running, the work
# dir is gone and the images are removed from the server's directory.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/nfs-lib.sh"

STRESS=$IT_ROOT/tools/stress
STRESS_PID=

# On exit, a tools/stress still running gets SIGTERM (it releases what
# it made), then the server stops, then lib.sh's cleanup.
# shellcheck disable=SC2317  # called by the trap
stress_stop() {
	[[ -n $STRESS_PID ]] || return 0
	if pid_alive "$STRESS_PID"; then
		it_log "cleanup: kill -TERM tools/stress $STRESS_PID"
		kill -TERM "$STRESS_PID" 2>/dev/null
		wait_gone "$STRESS_PID" 120 || kill -KILL "$STRESS_PID" 2>/dev/null
	fi
	wait "$STRESS_PID" 2>/dev/null
	STRESS_PID=
}

it_begin "tools/stress --backend nfs: ext4 on nodes of an nfs:// mount" \
	ganesha.nfsd rpcinfo fio fstrim mkfs.ext4 e2fsck
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"
trap 'rc=$?; stress_stop; (exit $rc); it_cleanup' EXIT
export TMPDIR=$IT_TMP	# tools/stress makes its work dir here

# run_stress NAME ARGS...: tools/stress ARGS in the background (so that a
# signal to this test is seen at once); stdout in $IT_TMP/NAME.out,
# progress in NAME.err.  Sets STRESS_RC.
run_stress() {
	local name=$1
	shift
	it_log "run: tools/stress $*"
	"$IT_PY" "$STRESS" "$@" >"$IT_TMP/$name.out" 2>"$IT_TMP/$name.err" </dev/null &
	STRESS_PID=$!
	STRESS_RC=0
	wait "$STRESS_PID" || STRESS_RC=$?
	STRESS_PID=
	it_log "$name: tools/stress exited $STRESS_RC; its stdout:"
	sed 's/^/    | /' "$IT_TMP/$name.out"
	if ((STRESS_RC != 0)); then
		it_log "$name: its progress (last lines):"
		it_show "$IT_TMP/$name.err" 30
	fi
}

# expect_nothing_left NAME: no mount, loop device, process, work dir, and
# no image left in the server's directory.
expect_nothing_left() {
	local left
	left=$(awk -v d="$IT_TMP" 'index($2, d) == 1 { print $2 }' /proc/self/mounts)
	expect_eq "$1: nothing mounted under the test dir" "" "$left"
	left=$(grep -l "^$IT_TMP/" /sys/block/loop*/loop/backing_file 2>/dev/null)
	expect_eq "$1: no loop device attached to a file under the test dir" "" "$left"
	left=$(grep -las "$IT_TMP/[d]ioloop-stress" /proc/[0-9]*/cmdline | head -n 3)
	expect_eq "$1: no process running on the work dir" "" "$left"
	left=$(find "$IT_TMP" -maxdepth 1 -name 'dioloop-stress.*' | head -n 3)
	expect_eq "$1: the work dir is removed" "" "$left"
	expect_eq "$1: no image left in the server's directory" "" "$(ls -A "$IMAGES")"
}

run_stress no-url --short --backend nfs --fs ext4 --seed 1
expect_eq "no --nfs-url: exit status" 0 "$STRESS_RC"
expect_eq "no --nfs-url: nfs/ext4 is skipped, and says why" 1 \
	"$(grep -cE '^nfs/ext4 +stress SKIP +no NFS server given \(--nfs-url\)$' "$IT_TMP/no-url.out")"

EXPORT=$IT_TMP/export
IMAGES=$EXPORT/stress
mkdir -p "$IMAGES"
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"
# nfs_server_start set its own EXIT trap: stop tools/stress first.
trap 'rc=$?; stress_stop; nfs_server_cleanup; (exit $rc); it_cleanup' EXIT
# The MOUNT port given, not asked from rpcbind: another test's ganesha may
# have registered its own there.
URL="$NFS_URL_BASE/stress?timeout=30&mountport=$MNT_PORT"

run_stress nfs-short --short --backend nfs --fs ext4 --seed 1 \
	--nfs-url "$URL" --nfs-export "$IMAGES"
expect_eq "nfs-short: exit status" 0 "$STRESS_RC"
expect_eq "nfs-short: nfs/ext4 passes" 1 \
	"$(grep -cE '^nfs/ext4 +stress PASS .*fsck clean, model verified$' "$IT_TMP/nfs-short.out")"
expect_eq "nfs-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/nfs-short.out")"
expect_eq "nfs-short: the images were created on the server and removed" 2 \
	"$(grep -cE 'removed stress-[^ ]+-ext4-stress-fsx?\.img from the NFS server' "$IT_TMP/nfs-short.err")"
expect_nothing_left nfs-short

run_stress nfs-crash-short --short --crash --backend nfs --fs ext4 --seed 1 \
	--nfs-url "$URL" --nfs-export "$IMAGES"
expect_eq "nfs-crash-short: exit status" 0 "$STRESS_RC"
expect_eq "nfs-crash-short: nfs/ext4 survives both rounds" 1 \
	"$(grep -cE '^nfs/ext4 +crash +PASS .* 2/2 rounds survived, [1-9][0-9]* durable records intact' \
		"$IT_TMP/nfs-crash-short.out")"
expect_eq "nfs-crash-short: last line" "1 passed, 0 failed" "$(tail -n 1 "$IT_TMP/nfs-crash-short.out")"
expect_nothing_left nfs-crash-short

it_end
