#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The nfs backend against a real nfs-ganesha (nfs-lib.sh): check_nfs's
# server tests (data byte-identical to the exported file, holes, EOF,
# many requests in flight, a server restart in the middle of a write load
# with the resend of uncommitted writes, a server stopped for longer than
# the timeout, and the error of a missing file, export or server).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$IT_DIR/nfs-lib.sh"

it_begin "nfs backend against nfs-ganesha" ganesha.nfsd rpcinfo python3

CHECK_NFS=${DIOLOOP_CHECK_NFS:-$(dirname "$DIOLOOP_BIN")/tests/check_nfs}
[[ -x $CHECK_NFS ]] || it_die "no check_nfs binary at $CHECK_NFS (set DIOLOOP_CHECK_NFS)"
[[ -n $(find /usr/lib* -name 'libfsalvfs*' -print -quit 2>/dev/null) ]] ||
	it_skip "nfs-ganesha-vfs is not installed (tools/run-tests installs it)"

EXPORT=$IT_TMP/export
nfs_server_start "$EXPORT" || it_die "could not start nfs-ganesha"

export DIOLOOP_NFS_URL=$NFS_URL_BASE
export DIOLOOP_NFS_EXPORT=$EXPORT
export DIOLOOP_NFS_PORT=$NFS_PORT
export DIOLOOP_NFS_CTL="bash $IT_DIR/nfs-lib.sh $NFS_STATE"
out=$IT_TMP/check_nfs.out
it_log "running $CHECK_NFS"
rc=0
CK_FORK=yes timeout -k 10 480 "$CHECK_NFS" >"$out" 2>&1 </dev/null || rc=$?
it_show "$out" 40
expect_eq "check_nfs exit status" 0 "$rc"
summary=$(grep -E '^[0-9]+%: Checks: ' "$out" | tail -n 1)
expect_match "check_nfs summary" '100%: Checks: [0-9]+, Failures: 0, Errors: 0' "$summary"
expect_match "check_nfs ran its server tests" '[1-9][0-9]*' "$(grep -c '^server test ' "$out")"
# Ganesha is still serving after all that.
if nfs_server_answers; then it_ok "ganesha answers at the end"; else it_fail "expected ganesha to answer at the end"; fi
it_end
