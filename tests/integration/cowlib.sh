# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# Helpers of the cow integration tests (sourced after lib.sh, never run).
#
# Images are made and checked two ways: with the command line under test
# (`dioloop create --format cow`, `dioloop check`) when this dioloop has
# them, and always with dioloop-cow-tool (tests/integration/cow-tool.c),
# which calls the cow library directly.
#
# Environment: DIOLOOP_COW_TOOL (default: next to DIOLOOP_BIN in the build
# tree).

DIOLOOP_COW_TOOL=${DIOLOOP_COW_TOOL:-$(dirname "$DIOLOOP_BIN")/tests/integration/dioloop-cow-tool}

# cow_begin: the cow tool is there and this build serves cow images.
cow_begin() {
	[[ -x $DIOLOOP_COW_TOOL ]] ||
		it_die "no dioloop-cow-tool at $DIOLOOP_COW_TOOL: build target dioloop-cow-tool, or set DIOLOOP_COW_TOOL"
	if "$DIOLOOP_BIN" create --help 2>&1 | grep -qw cow; then
		COW_CLI_CREATE=1
	else
		COW_CLI_CREATE=0
		it_log "this dioloop has no 'create --format cow': images are made with dioloop-cow-tool"
	fi
	if "$DIOLOOP_BIN" check --help >/dev/null 2>&1; then
		COW_CLI_CHECK=1
	else
		COW_CLI_CHECK=0
		it_log "this dioloop has no 'check': images are checked with dioloop-cow-tool only"
	fi
}

# make_cow PATH SIZE [CSUM]: a new cow image.
make_cow() {
	local csum=${3:-}
	if ((COW_CLI_CREATE)); then
		must "dioloop create --format cow${csum:+ --csum $csum} --size $2 ${1##*/}" \
			"$DIOLOOP_BIN" create --format cow ${csum:+--csum "$csum"} --size "$2" "$1"
	else
		must "dioloop-cow-tool create ${1##*/} $2${csum:+ $csum}" \
			"$DIOLOOP_COW_TOOL" create "$1" "$2" ${csum:+"$csum"}
	fi
}

# expect_cow_clean PATH: the image's metadata and data checksums are clean
# (the library's check, and `dioloop check` when this dioloop has it).
expect_cow_clean() {
	expect_ok "dioloop-cow-tool check ${1##*/} data: clean" \
		"$DIOLOOP_COW_TOOL" check "$1" data
	if ((COW_CLI_CHECK)); then
		expect_ok "dioloop check ${1##*/}: clean" "$DIOLOOP_BIN" check "$1"
	fi
}

# ctl_py MNT COMMAND: write the command to ctl and read the reply from
# the same open file (control.h); prints the reply, then "errno NAME"
# ("errno ok" when the write succeeded) as its last line.
ctl_py() {
	"$IT_PY" - "$1/.dioloop/ctl" "$2" <<'EOF'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.write(fd, (sys.argv[2] + "\n").encode())
    err = "ok"
except OSError as e:
    # errorcode names 95 ENOTSUP, its alias on Linux.
    err = ("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else
           errno.errorcode.get(e.errno, str(e.errno)))
sys.stdout.write(os.pread(fd, 1 << 20, 0).decode())
print("errno", err)
EOF
}

# ctl MNT COMMAND...: one control command; prints the reply; status 0
# when the command succeeded.  CTL_ERRNO: its errno name, or ok.
ctl() {
	local mnt=$1 out
	shift
	out=$(ctl_py "$mnt" "$*")
	CTL_ERRNO=${out##*errno }
	printf '%s\n' "$out" | sed '$d'
	[[ $CTL_ERRNO == ok ]]
}

# ctl_errno MNT COMMAND...: the errno name a control command gave (ok
# when it succeeded).
ctl_errno() {
	local out
	out=$(ctl_py "$1" "${*:2}")
	echo "${out##*errno }"
}

# expect_ctl WHAT REGEX COMMAND...: the command, sent to the mount at
# $MNT, succeeds, and its reply matches REGEX (whole reply, newlines as
# spaces).
expect_ctl() {
	local what=$1 want=$2 reply rc=0
	shift 2
	reply=$(ctl "$MNT" "$@") || rc=$?
	reply=$(printf '%s' "$reply" | paste -sd' ' -)
	if ((rc != 0)); then
		it_fail "$what: expected '$*' to succeed, got an error: $reply"
		return 1
	fi
	expect_match "$what [ctl $*]" "$want" "$reply"
}

# node_stat MNT NODE KEY: a number from the node's object in stats.json.
node_stat() {
	jq -r --arg n "$2" ".nodes[\$n].$3" "$1/.dioloop/stats.json"
}
