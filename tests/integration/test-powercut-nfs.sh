#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Power cuts of the nfs backend against a real nfs-ganesha (nfs-lib.sh):
# check_nfs_powercut records what the server answered to a seeded write
# and flush load (ganesha restarted once in the middle: a new write
# verifier, uncommitted writes sent again), then replays cut points from
# the server's view (tests/check_nfs_powercut.c): every write flushed
# before a cut must read back.  DIOLOOP_POWERCUT_CUTS=N for more cuts
# (default 300), DIOLOOP_TEST_SEED to repeat a run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/nfs-lib.sh"

it_begin "power cuts of nfs images replayed from what ganesha answered" ganesha.nfsd rpcinfo python3

CHECK=${DIOLOOP_CHECK_NFS_POWERCUT:-$(dirname "$DIOLOOP_BIN")/tests/check_nfs_powercut}
[[ -x $CHECK ]] || it_die "no check_nfs_powercut binary at $CHECK (set DIOLOOP_CHECK_NFS_POWERCUT)"
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"

EXPORT=$IT_TMP/export
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"

export DIOLOOP_NFS_URL=$NFS_URL_BASE
export DIOLOOP_NFS_EXPORT=$EXPORT
export DIOLOOP_NFS_CTL="bash $IT_DIR/nfs-lib.sh $NFS_STATE"
out=$IT_TMP/check_nfs_powercut.out
it_log "running $CHECK"
rc=0
CK_FORK=yes timeout -k 10 300 "$CHECK" >"$out" 2>&1 </dev/null || rc=$?
it_show "$out" 20
expect_eq "check_nfs_powercut exit status" 0 "$rc"
summary=$(grep -E '^[0-9]+%: Checks: ' "$out" | tail -n 1)
expect_match "check_nfs_powercut summary" '100%: Checks: 2, Failures: 0, Errors: 0' "$summary"
expect_match "check_nfs_powercut checked its cuts" '[1-9][0-9]*' "$(grep -c ' cuts checked in ' "$out")"
it_end
