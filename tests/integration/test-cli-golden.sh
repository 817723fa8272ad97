#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Golden-output tests of the command line (xfstests style): every command
# family runs a list of calls, good and bad, and what each prints (stdout
# and stderr, the temp dir filtered to T) and its exit status must match
# tests/golden/cli-*.out exactly, so that a changed message, help text or
# exit status is a reviewed diff.  The convention they pin (docs/cli.md):
#   - exit status 0 done, 1 failed, 2 bad usage or argument, a missing path
#     included;
#   - each error once, as one "dioloop: CMD: ..." line naming the command
#     typed, never an internal name;
#   - --output=json|human wherever --json is;
#   - sizes with fractions (1.5G), and `limit ... off`;
#   - a volume that others were made from is not deleted (offline and
#     through a mount), and says which volumes depend on it.
# DIOLOOP_GOLDEN_UPDATE=1 rewrites the golden files from this run (then
# review the diff).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

GOLDEN=$IT_ROOT/tests/golden

it_begin "golden output of the dioloop command line"
export LC_ALL=C TZ=UTC
unset G_MESSAGES_DEBUG

OUT=

# run ARGS...: `dioloop ARGS` in the temp dir; its output and exit status
# appended to $OUT, the temp dir shown as T.
run() {
	local rc=0
	printf '$ dioloop %s\n' "$*" >>"$OUT"
	"$DIOLOOP_BIN" "$@" >"$IT_TMP/run.out" 2>&1 </dev/null || rc=$?
	sed -e "s|$IT_TMP|T|g" "$IT_TMP/run.out" >>"$OUT"
	printf '[exit %d]\n' "$rc" >>"$OUT"
}

# family NAME: the calls that follow go to cli-NAME.out.
family() {
	OUT=$IT_TMP/cli-$1.out
	: >"$OUT"
}

# compare NAME: the run of family NAME against its golden file.
compare() {
	local want=$GOLDEN/cli-$1.out got=$IT_TMP/cli-$1.out
	if [[ ${DIOLOOP_GOLDEN_UPDATE:-} == 1 ]]; then
		cp "$got" "$want"
		it_log "updated ${want#"$IT_ROOT"/}"
	fi
	if diff -u "$want" "$got" >"$IT_TMP/diff"; then
		it_ok "dioloop $1 commands: output matches ${want#"$IT_ROOT"/}"
	else
		it_fail "dioloop $1 commands: expected ${want#"$IT_ROOT"/}, got (diff -u expected got):"
		sed 's/^/    | /' "$IT_TMP/diff"
	fi
}

# ---- usage: the top level and the help texts
family usage
run
run --help
run nosuch
run create --help
run limit --help
run info --nosuch-option x
compare usage

# ---- images: create, info, check, scrub, snapshot, clone, convert
family image
mkdir src
run create --size 1.5M src/r.img
run create --size 1.5 src/bad.img
run create --size 0.1K src/bad.img
run create --format cow --size 1.5M src/c.img
run create -f cow src/c2.img
run create src/nodir/x.img
run info src/r.img
run info --json src/r.img
run info --output=json src/r.img
run info --output=xml src/r.img
run info --output=human --json src/r.img
run info src/missing.img
# A redirect file nobody can believe (not ours: no mode 0600, junk)
# beside a missing image: still a missing path.
printf 'junk\n' >src/.ghost.img.dioloop-redirect
chmod 644 src/.ghost.img.dioloop-redirect
run info src/ghost.img
rm src/.ghost.img.dioloop-redirect
run check src/missing.img
run scrub src/missing.img
run check src/r.img
run snapshot src/r.img s1
run snapshot src/missing.img s1
run snapshot -d src/c.img s1
run snapshot src/c.img s1
run snapshot --delete src/c.img nosuch
run clone src/c.img@s1 k1
run snapshot --delete src/c.img s1
run convert src/missing.img src/out.img
run convert src/r.img
compare image

# ---- a mount: mount, limit, fault, stats, migrate
family mount
mkdir mnt
run mount src/missing mnt
run mount src mnt/missing
run mount -d src
start_daemon src "$IT_TMP/mnt"
run limit mnt
run limit mnt/r.img bps=1.5M iops=100
run limit mnt/r.img off
run limit mnt total_bps=1G
run limit mnt off
run limit mnt/r.img bps=1.5
run limit mnt/r.img total_bps=1M
run limit missing iops=5
run limit mnt/nope.img iops=5
run fault mnt off
run stats missing
run stats --count 2 mnt
run stats --output=yaml mnt
run migrate mnt/nope.img x.img
run migrate -d mnt/r.img x.img
run migrate --status mnt/r.img
run migrate --status --json mnt/r.img
run migrate --status mnt/r.img x.img
run migrate --status
run migrate --status --cancel mnt/r.img
run migrate --json mnt/r.img x.img
run migrate --status --output=xml mnt/r.img
run migrate --status mnt/nope.img
run migrate --status mnt
run migrate --status missing/r.img
run snapshot --delete mnt/c.img nosuch
run snapshot --delete mnt/c.img s1
compare mount
dioloop_umount "$IT_TMP/mnt"

it_end
