# shellcheck shell=bash disable=SC2034
# (SC2034: the globals set here are read by the test scripts.)
# SPDX-License-Identifier: MIT
#
# Helpers shared by the integration tests (sourced, never run).
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   it_begin "what this test checks" TOOL...   # root, tools, temp dir, trap
#   ... expect_* checks: each prints "ok: ..." or "FAIL: ... expected ..., got ..."
#   it_end                                     # exit 0, or 1 after any failure
#
# Whatever a test makes is recorded the moment it is made (daemon PIDs,
# FUSE mounts, loop devices, inner mounts, helper processes) and released
# by the EXIT trap, innermost first, also when the test fails or is
# interrupted: inner file systems unmounted, loop devices detached (only
# the ones this test attached, by device, and only while they still point
# into the test's temp dir), FUSE mounts unmounted, daemons killed by PID,
# the temp dir removed.
#
# Exit status: 0 pass, 1 fail, 77 skip (not root, or a tool that the CI
# installs is missing here).
#
# Environment: DIOLOOP_BIN (default: build/dioloop of this tree),
# DIOLOOP_IT_KEEP=1 keeps the temp dir (logs) after a failure,
# DIOLOOP_IT_TIMEOUT (default 540 s, under ctest's 600): past it a watchdog
# stops the test so that its trap still cleans up.

set -uo pipefail
# mkfs.*, losetup, e2fsck live in sbin, which a CI environment may leave out.
PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin

IT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
IT_ROOT=$(cd "$IT_DIR/../.." && pwd -P)
DIOLOOP_BIN=${DIOLOOP_BIN:-$IT_ROOT/build/dioloop}
[[ $DIOLOOP_BIN == /* ]] || DIOLOOP_BIN=$PWD/$DIOLOOP_BIN	# tests cd to their temp dir
IT_NAME=$(basename "$0" .sh)
IT_PY=python3
[[ -x /usr/bin/python3 ]] && IT_PY=/usr/bin/python3

IT_TMP=
IT_FAILED=0
IT_CHECKS=0
IT_NDAEMON=0
IT_PIDS=()	# daemons we started (ours to kill)
IT_HELPERS=()	# other background processes (fio, write loops)
IT_FUSE=()	# dioloop mount points
IT_LOOPS=()	# loop devices we attached (or dioloop --loop attached for us)
IT_INNER=()	# inner file systems mounted on loop devices
IT_WATCHDOG=

# Results of the helpers that cannot return them through $(...) because
# they record what they make:
DAEMON_PID=
DAEMON_LOG=
DAEMON_STATUS=
LOOP_DEV=

# ---------------------------------------------------------------- reporting

it_log() {
	printf '[%s %3ds] %s\n' "$IT_NAME" "$SECONDS" "$*"
}

it_ok() {
	IT_CHECKS=$((IT_CHECKS + 1))
	it_log "ok: $*"
}

it_fail() {
	IT_CHECKS=$((IT_CHECKS + 1))
	IT_FAILED=$((IT_FAILED + 1))
	it_log "FAIL: $*"
}

# it_die MESSAGE: a failure after which the test cannot go on.
it_die() {
	it_fail "$*"
	it_log "giving up"
	exit 1
}

it_skip() {
	it_log "SKIP: $*"
	exit 77
}

# Print the last lines of a file, indented (what a failing command said).
it_show() { # FILE [LINES]
	[[ -s $1 ]] || return 0
	tail -n "${2:-15}" "$1" | sed 's/^/    | /'
}

# ---------------------------------------------------------------- checks

# expect_eq WHAT EXPECTED GOT
expect_eq() {
	if [[ $3 == "$2" ]]; then
		it_ok "$1: $3"
		return 0
	fi
	it_fail "$1: expected '$2', got '$3'"
	return 1
}

# expect_match WHAT REGEX GOT (extended regex, whole string)
expect_match() {
	if [[ $3 =~ ^($2)$ ]]; then
		it_ok "$1: $3"
		return 0
	fi
	it_fail "$1: expected /$2/, got '$3'"
	return 1
}

# expect_status WHAT STATUS CMD...: CMD exits with STATUS (output kept in
# $IT_TMP/last.out and shown on failure).
expect_status() {
	local what=$1 want=$2 rc=0
	shift 2
	"$@" >"$IT_TMP/last.out" 2>&1 </dev/null || rc=$?
	if ((rc == want)); then
		it_ok "$what (exit status $rc)"
		return 0
	fi
	it_fail "$what: expected exit status $want from '$*', got $rc"
	it_show "$IT_TMP/last.out"
	return 1
}

# expect_one_line_error WHAT STATUS CMD...: CMD exits with STATUS and
# says why on exactly one line of stderr.
expect_one_line_error() {
	local what=$1 want=$2 rc=0 lines
	shift 2
	timeout -k 5 60 "$@" >"$IT_TMP/err.out" 2>"$IT_TMP/err.err" </dev/null || rc=$?
	expect_eq "$what: exit status" "$want" "$rc"
	lines=$(wc -l <"$IT_TMP/err.err")
	if expect_eq "$what: lines on stderr" 1 "$lines"; then
		it_log "    said: $(cat "$IT_TMP/err.err")"
	else
		it_show "$IT_TMP/err.err"
	fi
}

# expect_ok WHAT CMD...: CMD exits 0.
expect_ok() {
	local what=$1
	shift
	expect_status "$what" 0 "$@"
}

# must WHAT CMD...: a step the rest of the test needs.
must() {
	expect_ok "$@" || it_die "cannot go on without: $1"
}

# names DIR: the names `ls` shows in DIR, on one line; all_names DIR: with
# the dotfiles (ls -A).  ls on purpose: what a user listing the mount sees.
# shellcheck disable=SC2012
names() {
	ls -1 -- "$1" | paste -sd' ' -
}

# shellcheck disable=SC2012
all_names() {
	ls -1A -- "$1" | paste -sd' ' -
}

# it_scale N MIN: an operation count N scaled by $DIOLOOP_TEST_SCALE
# (percent, default 100, as the unit tests'), never below MIN.  The
# sanitizer stage runs fewer random operations on the same paths.
it_scale() {
	local n=$(($1 * ${DIOLOOP_TEST_SCALE:-100} / 100))
	echo $((n < $2 ? $2 : n))
}

# sha FILE: its sha256 (the digest alone), read in 1 MiB requests (a node
# read 4 KiB at a time is slow).
sha() {
	dd if="$1" bs=1M status=none | sha256sum | cut -d' ' -f1
}

# expect_same_bytes WHAT FILE_A FILE_B: byte-identical (sha256 of both;
# cmp names the first difference).
expect_same_bytes() {
	local a b
	a=$(sha "$2")
	b=$(sha "$3")
	if [[ -n $a && $a == "$b" ]]; then
		it_ok "$1: $2 and $3 are byte-identical"
		return 0
	fi
	it_fail "$1: expected $2 and $3 byte-identical, got: $(cmp -- "$2" "$3" 2>&1 | head -n 1)"
	return 1
}

# nodeio COMMAND ARGS...: one precise syscall (see nodeio.py); prints
# "ok ..." or "err ENAME".
nodeio() {
	"$IT_PY" "$IT_DIR/nodeio.py" "$@"
}

# expect_io WHAT EXPECTED NODEIO-ARGS...: the one line nodeio prints.
expect_io() {
	local what=$1 want=$2
	shift 2
	local args="$*"
	expect_eq "$what [nodeio ${args//"$IT_TMP"/\$T}]" "$want" "$(nodeio "$@" 2>&1)"
}

# ---------------------------------------------------------------- processes

# pid_alive PID: running, and not a zombie.
pid_alive() {
	local state
	state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# wait_gone PID SECONDS: 0 once PID has exited.
wait_gone() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		pid_alive "$1" || return 0
		sleep 0.1
	done
	return 1
}

# forget_pid PID: it exited and was reaped; never signal that number again.
forget_pid() {
	local i
	for i in "${!IT_PIDS[@]}"; do
		[[ ${IT_PIDS[i]} == "$1" ]] && unset 'IT_PIDS[i]'
	done
	for i in "${!IT_HELPERS[@]}"; do
		[[ ${IT_HELPERS[i]} == "$1" ]] && unset 'IT_HELPERS[i]'
	done
}

# start_helper CMD...: a background process we must not leave behind;
# sets HELPER_PID.
start_helper() {
	"$@" &
	HELPER_PID=$!
	IT_HELPERS+=("$HELPER_PID")
}

# ---------------------------------------------------------------- another user

# it_other_user: the unprivileged user the trust-boundary tests play
# (nobody): sets USER_ID, GROUP_ID and AS_USER (a command prefix that runs
# as that user), or skips the test when there is none.
it_other_user() {
	USER_ID=$(id -u nobody 2>/dev/null) || it_skip "no user 'nobody'"
	GROUP_ID=$(id -g nobody)
	AS_USER=(setpriv --reuid="$USER_ID" --regid="$GROUP_ID" --clear-groups --)
}

# ---------------------------------------------------------------- daemon

# start_daemon SRC MNT [MOUNT-ARGS...]: `dioloop mount -f` in the
# background; waits up to 60 s for the mount (an ASan build on a busy
# machine, or a remote source, can take seconds).  Sets DAEMON_PID, DAEMON_LOG.
# DIOLOOP_IT_TRANSPORT=uring|dev adds -o transport=... (tools/run-tests
# runs the suite over each transport).
start_daemon() {
	local src=$1 mnt=$2 i
	shift 2
	if [[ -n ${DIOLOOP_IT_TRANSPORT:-} && " $* " != *transport=* ]]; then
		set -- -o "transport=$DIOLOOP_IT_TRANSPORT" "$@"
	fi
	IT_NDAEMON=$((IT_NDAEMON + 1))
	DAEMON_LOG=$IT_TMP/daemon.$IT_NDAEMON.log
	mkdir -p "$mnt"
	it_log "start: dioloop mount -f${*:+ $*} $src $mnt"
	"$DIOLOOP_BIN" mount -f "$@" "$src" "$mnt" >"$DAEMON_LOG" 2>&1 </dev/null &
	DAEMON_PID=$!
	IT_PIDS+=("$DAEMON_PID")
	IT_FUSE+=("$mnt")
	for ((i = 0; i < 600; i++)); do
		if mountpoint -q "$mnt"; then
			return 0
		fi
		if ! pid_alive "$DAEMON_PID"; then
			it_show "$DAEMON_LOG"
			it_die "dioloop mount -f $* $src $mnt: the daemon exited before mounting"
		fi
		sleep 0.1
	done
	it_show "$DAEMON_LOG"
	it_die "dioloop mount -f $* $src $mnt: not mounted after 60 s"
}

# find_daemon_pid MNT: PIDs of `dioloop ... mount ... MNT` processes (a
# background daemon's PID is not ours otherwise).  Matches the whole last
# argument, so only the daemons of this test's own mount point.
find_daemon_pid() {
	local f pid
	local -a args
	for f in /proc/[0-9]*/cmdline; do
		pid=${f#/proc/}
		pid=${pid%/cmdline}
		mapfile -d '' args 2>/dev/null <"$f" || continue
		((${#args[@]} >= 3)) || continue
		[[ ${args[0]##*/} == dioloop && ${args[1]} == mount &&
			${args[-1]} == "$1" ]] || continue
		echo "$pid"
	done
}

# daemon_wait PID: wait (up to 60 s) for a daemon to exit; sets
# DAEMON_STATUS to its exit status when it is our child, "exited" when it
# is not (a background daemon), "running" if it did not exit.
daemon_wait() {
	local rc=0
	if ! wait_gone "$1" 60; then
		DAEMON_STATUS=running
		return
	fi
	if wait "$1" 2>/dev/null; then
		DAEMON_STATUS=0
	else
		rc=$?
		# 127: not our child (a daemon that went to the background).
		DAEMON_STATUS=$rc
		((rc == 127)) && DAEMON_STATUS=exited
	fi
	forget_pid "$1"
}

# dioloop_umount MNT: `dioloop umount`, checked; the mount is ours no more.
dioloop_umount() {
	if expect_ok "dioloop umount $1" "$DIOLOOP_BIN" umount "$1"; then
		forget_mount "$1"
		expect_eq "$1 is no longer a mount point" no \
			"$(is_mount "$1" && echo yes || echo no)"
	fi
}

forget_mount() {
	local i
	for i in "${!IT_FUSE[@]}"; do
		[[ ${IT_FUSE[i]} == "$1" ]] && unset 'IT_FUSE[i]'
	done
}

# ---------------------------------------------------------------- loop devices

# attach_loop FILE: losetup --direct-io=on; sets LOOP_DEV and checks that
# the kernel really uses direct I/O (/sys/block/loopN/loop/dio = 1).
attach_loop() {
	local dev
	dev=$(losetup --direct-io=on -f --show "$1" 2>"$IT_TMP/losetup.err") ||
		{ it_show "$IT_TMP/losetup.err"; it_die "losetup --direct-io=on -f --show $1 failed"; }
	IT_LOOPS+=("$dev")
	LOOP_DEV=$dev
	expect_eq "direct I/O on $dev over ${1##*/} (/sys/block/${dev#/dev/}/loop/dio)" 1 \
		"$(cat "/sys/block/${dev#/dev/}/loop/dio" 2>&1)"
}

# record_loop DEV: a loop device attached for us (dioloop mount --loop).
record_loop() {
	IT_LOOPS+=("$1")
}

# loop_backing DEV: the file a loop device is attached to, or nothing.
loop_backing() {
	cat "/sys/block/${1#/dev/}/loop/backing_file" 2>/dev/null
}

# wait_detached DEV SECONDS: 0 once DEV has no backing file.
wait_detached() {
	local i
	for ((i = 0; i < $2 * 10; i++)); do
		[[ -z $(loop_backing "$1") ]] && return 0
		sleep 0.1
	done
	return 1
}

forget_loop() {
	local i
	for i in "${!IT_LOOPS[@]}"; do
		[[ ${IT_LOOPS[i]} == "$1" ]] && unset 'IT_LOOPS[i]'
	done
}

# detach_loop DEV: losetup -d, checked, and wait until it is gone.
detach_loop() {
	if expect_ok "losetup -d $1" losetup -d "$1"; then
		if wait_detached "$1" 30; then
			forget_loop "$1"
		else
			it_fail "losetup -d $1: expected the device to let go of its file, still backed by $(loop_backing "$1")"
		fi
	fi
}

# ---------------------------------------------------------------- inner file systems

# mount_inner DEV DIR [MOUNT-OPTIONS...]
mount_inner() {
	local dev=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	must "mount${*:+ $*} $dev $dir" mount "$@" "$dev" "$dir"
	IT_INNER+=("$dir")
}

umount_inner() {
	local i
	expect_ok "umount $1" umount "$1" || return 1
	for i in "${!IT_INNER[@]}"; do
		[[ ${IT_INNER[i]} == "$1" ]] && unset 'IT_INNER[i]'
	done
}

# make_files DIR TAG: a few MB of files (random, patterned, odd sizes, in
# a subdirectory); their sha256 sums go to $IT_TMP/TAG.sha256.
make_files() {
	local dir=$1 list=$IT_TMP/$2.sha256
	mkdir -p "$dir/sub/deeper" || return 1
	head -c 1048576 /dev/urandom >"$dir/random-1M" &&
		head -c 3145728 /dev/urandom >"$dir/random-3M" &&
		head -c 123457 /dev/urandom >"$dir/sub/odd-size" &&
		head -c 2097152 <(yes "dioloop $2 pattern line") >"$dir/pattern-2M" &&
		head -c 524288 /dev/urandom >"$dir/sub/deeper/random-512K" &&
		echo "small file of $2" >"$dir/sub/small.txt" || return 1
	(cd "$dir" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$list"
}

# check_files DIR TAG: every file of make_files DIR TAG is intact.
check_files() {
	local out
	if out=$(cd "$1" && sha256sum --quiet -c "$IT_TMP/$2.sha256" 2>&1); then
		it_ok "$2: the $(wc -l <"$IT_TMP/$2.sha256") files written to $1 have their checksums"
		return 0
	fi
	it_fail "$2: expected every file in $1 to match its sha256, got:"
	printf '%s\n' "$out" | head -n 15 | sed 's/^/    | /'
	return 1
}

# ---------------------------------------------------------------- file systems on nodes

# Image sizes: XFS needs >= 300 MiB, btrfs >= 114 MiB (images are sparse).
declare -A FS_IMAGE_SIZE=([ext4]=96M [xfs]=320M [btrfs]=128M)

# mkfs_fs FS DEV
mkfs_fs() {
	case $1 in
	ext4) mkfs.ext4 -q -F "$2" ;;
	xfs) mkfs.xfs -q -f "$2" ;;
	btrfs) mkfs.btrfs -q -f "$2" ;;
	esac
}

# fsck_fs FS DEV-OR-IMAGE: a read-only check, exit 0 when clean.
fsck_fs() {
	case $1 in
	ext4) e2fsck -fn "$2" ;;
	xfs) if [[ -b $2 ]]; then xfs_repair -n "$2"; else xfs_repair -n -f "$2"; fi ;;
	btrfs) btrfs check --readonly "$2" ;;
	esac
}

# fs_roundtrip FS DEV: mkfs, mount, write files with known checksums,
# umount, fsck clean, remount, checksums match, umount.
fs_roundtrip() {
	local fs=$1 dev=$2 dir=$IT_TMP/inner-$1
	must "mkfs $fs on $dev" mkfs_fs "$fs" "$dev"
	mount_inner "$dev" "$dir"
	must "write files with known checksums to $fs on $dev" make_files "$dir" "$fs"
	umount_inner "$dir" || it_die "cannot go on with $dir mounted"
	expect_ok "fsck of $fs on $dev is clean" fsck_fs "$fs" "$dev"
	mount_inner "$dev" "$dir"
	check_files "$dir" "$fs"
	umount_inner "$dir" || it_die "cannot go on with $dir mounted"
}

# ---------------------------------------------------------------- fio

# wait_fio_writing FILE BYTES PID: wait (up to 60 s) until fio (PID) has
# laid out FILE at BYTES: from then on it writes, however long it took to
# start.
wait_fio_writing() {
	local i
	for ((i = 0; i < 600; i++)); do
		(($(stat -c %s "$1" 2>/dev/null || echo 0) >= $2)) && return 0
		pid_alive "$3" || return 0
		sleep 0.1
	done
}

# run_fio_verify WHAT FIO-ARGS...: fio writes with crc32c verify data and
# reads it back (direct I/O, libaio); it exits 0, reports no verify error,
# and every job ends with err=0.  Its output: $IT_TMP/fio.N.out (stdout
# and stderr through one descriptor: with --output fio would write its
# report over the verify errors it printed on stderr).
NFIO=0
run_fio_verify() {
	local what=$1 out rc=0 jobs bad
	shift
	NFIO=$((NFIO + 1))
	out=$IT_TMP/fio.$NFIO.out
	it_log "fio $what"
	timeout -k 10 240 fio --direct=1 --ioengine=libaio --verify=crc32c \
		--do_verify=1 --verify_fatal=1 --randrepeat=0 \
		--verify_state_save=0 "$@" </dev/null >"$out" 2>&1 || rc=$?
	if ((rc != 0)); then
		it_fail "fio $what: expected exit status 0, got $rc"
		# What fio said went wrong (a verify error comes before the
		# statistics), else the end of its output.
		bad=$(grep -iE 'verify|bad magic|bad header|crc32c|mismatch|err= *[1-9]|error' "$out" |
			head -n 8)
		if [[ -n $bad ]]; then
			printf '%s\n' "$bad" | sed 's/^/    | /'
		else
			it_show "$out" 25
		fi
		return
	fi
	it_ok "fio $what: exit status 0"
	bad=$(grep -iE 'verify[^ ]*:|bad magic|bad header|crc32c|mismatch' "$out" | head -n 5)
	if [[ -n $bad ]]; then
		it_fail "fio $what: expected no verify error in its output, got:"
		printf '%s\n' "$bad" | sed 's/^/    | /'
	else
		it_ok "fio $what: no verify error in its output"
	fi
	if ! grep -qE '^ +read: IOPS=' "$out"; then
		it_fail "fio $what: expected a read (verify) phase in its output, got none"
	fi
	jobs=$(grep -cE '^[^ ]+: \(groupid=[0-9]+, jobs=[0-9]+\): err= *0' "$out")
	bad=$(grep -E 'err= *[1-9]' "$out" | head -n 3)
	if [[ -n $bad || $jobs -eq 0 ]]; then
		it_fail "fio $what: expected every job to report err=0, got ${bad:-no job summary}"
		it_show "$out" 25
	else
		it_ok "fio $what: $jobs job summaries with err=0"
	fi
}

# ---------------------------------------------------------------- setup and cleanup

# it_begin DESCRIPTION TOOL...: check root and tools, make the temp dir and
# set the trap.
it_begin() {
	local desc=$1 t
	local -a missing=()
	shift
	it_log "$desc"
	((EUID == 0)) || it_skip "needs root (FUSE mounts, loop devices)"
	[[ -c /dev/fuse ]] || it_skip "no /dev/fuse"
	for t in fusermount3 losetup mountpoint cmp sha256sum "$IT_PY" "$@"; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	((${#missing[@]} == 0)) || it_skip "missing: ${missing[*]} (tools/run-tests installs them)"
	[[ -x $DIOLOOP_BIN ]] ||
		it_die "no dioloop binary at $DIOLOOP_BIN: build first, or set DIOLOOP_BIN"
	IT_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dioloop-$IT_NAME.XXXXXX") ||
		it_die "mktemp -d failed"
	# Tools that drop files in the working directory (fio's verify state)
	# drop them here.
	cd "$IT_TMP" || it_die "cd $IT_TMP failed"
	trap it_cleanup EXIT
	trap 'it_log "interrupted"; exit 130' INT
	trap 'it_log "terminated"; exit 143' TERM
	"$IT_PY" "$IT_DIR/nodeio.py" watchdog "${DIOLOOP_IT_TIMEOUT:-540}" $$ >/dev/null </dev/null &
	IT_WATCHDOG=$!
	it_log "dioloop: $DIOLOOP_BIN, temp dir: $IT_TMP"
}

# it_end: the verdict.  A sanitizer report in a daemon's log (a build
# with -DDIOLOOP_SANITIZE=ON) is a failure too.
it_end() {
	local log
	for log in "$IT_TMP"/daemon.*.log; do
		[[ -f $log ]] || continue
		if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$log"; then
			it_fail "expected no sanitizer report from the daemon, got one in ${log##*/}:"
			grep -m 5 -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$log" | sed 's/^/    | /'
		fi
	done
	if ((IT_FAILED)); then
		it_log "$IT_FAILED of $IT_CHECKS checks failed"
		exit 1
	fi
	it_log "all $IT_CHECKS checks passed"
	exit 0
}

# The mount points of /proc/self/mounts, one a line, with its octal
# escapes (\040 for a space, ...) undone.
mount_points() {
	awk '{ p = $2; gsub(/\\040/, " ", p); gsub(/\\011/, "\t", p)
	       gsub(/\\134/, "\\", p); print p }' /proc/self/mounts
}

# readme_block SECTION: the first ```sh block under "## SECTION" of the
# README, as it stands (what a reader pastes).
readme_block() {
	awk -v want="## $1" '$0 == want { sec = 1; next }
	     sec && /^## / { exit }
	     sec && /^```sh$/ { code = 1; next }
	     code && /^```/ { exit }
	     code { print }' "$IT_ROOT/README.md"
}

# Is DIR a mount point?  (From /proc/self/mounts: never touches the file
# system, which may belong to a dead daemon.)
is_mount() {
	mount_points | awk -v d="$1" '$0 == d { found = 1 } END { exit !found }'
}

# Is anything still mounted at or under DIR?
mounted_under() {
	mount_points | awk -v d="$1" '$0 == d || index($0, d "/") == 1 { found = 1 } END { exit !found }'
}

it_cleanup() {
	local rc=$? pid dir dev i log left=0
	trap - EXIT INT TERM
	[[ -n $IT_TMP ]] || exit "$rc"

	if [[ -n $IT_WATCHDOG ]]; then
		kill -TERM "$IT_WATCHDOG" 2>/dev/null
		wait "$IT_WATCHDOG" 2>/dev/null
	fi
	if ((rc != 0 && rc != 77)); then
		for log in "$IT_TMP"/daemon.*.log; do
			[[ -s $log ]] || continue
			it_log "${log##*/} (last lines):"
			it_show "$log" 10
		done
	fi

	for pid in "${IT_HELPERS[@]}"; do
		if pid_alive "$pid"; then
			it_log "cleanup: kill -KILL helper $pid"
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	for ((i = ${#IT_INNER[@]} - 1; i >= 0; i--)); do
		dir=${IT_INNER[i]:-}
		[[ -n $dir ]] || continue
		is_mount "$dir" || continue
		it_log "cleanup: umount $dir"
		timeout 30 umount "$dir" 2>/dev/null || umount -l "$dir"
	done
	for dev in "${IT_LOOPS[@]}"; do
		# Only while it is still attached to a file of ours.
		[[ $(loop_backing "$dev") == "$IT_TMP"/* ]] || continue
		it_log "cleanup: losetup -d $dev"
		timeout 30 losetup -d "$dev"
		wait_detached "$dev" 10 || {
			it_log "cleanup: $dev is still attached to $(loop_backing "$dev")"
			left=1
		}
	done
	for ((i = ${#IT_FUSE[@]} - 1; i >= 0; i--)); do
		dir=${IT_FUSE[i]:-}
		[[ -n $dir ]] || continue
		# Up to 3 times: a failed test may have stacked mounts there.
		for _ in 1 2 3; do
			is_mount "$dir" || break
			it_log "cleanup: fusermount3 -u $dir"
			timeout 30 fusermount3 -u "$dir" 2>/dev/null ||
				timeout 30 fusermount3 -u -z "$dir" 2>/dev/null ||
				umount -l "$dir"
		done
	done
	for pid in "${IT_PIDS[@]}"; do
		# Unmounted: give it a moment to exit by itself.
		wait_gone "$pid" 3
		if pid_alive "$pid"; then
			it_log "cleanup: kill -TERM daemon $pid"
			kill -TERM "$pid" 2>/dev/null
			if ! wait_gone "$pid" 5; then
				it_log "cleanup: kill -KILL daemon $pid"
				kill -KILL "$pid" 2>/dev/null
				wait_gone "$pid" 5
			fi
		fi
		wait "$pid" 2>/dev/null
	done
	if mounted_under "$IT_TMP"; then
		it_log "cleanup: still mounted under $IT_TMP, not removing it:"
		grep -F "$IT_TMP" /proc/self/mounts | sed 's/^/    | /'
		left=1
	elif ((rc != 0 && rc != 77)) && [[ ${DIOLOOP_IT_KEEP:-} == 1 ]]; then
		it_log "cleanup: kept $IT_TMP (DIOLOOP_IT_KEEP=1)"
	else
		rm -rf "$IT_TMP"
	fi
	if ((left && rc == 0)); then
		it_log "FAIL: cleanup left something behind"
		rc=1
	fi
	exit "$rc"
}
