# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# The Ceph cluster of an rbd integration test (sourced after lib.sh, once
# it_begin ran): the rbd_cluster CTest fixture's (DIOLOOP_RBD_CLUSTER), or,
# run alone, one of its own (ceph-lib.sh) stopped by the EXIT trap.
#   rbd_test_cluster     # skips without the backend or a cluster; sets
#                        # CLUSTER, exports CEPH_CONF, makes namespace
#                        # rbd/$RBD_NS ($RBD_URL = rbd://rbd/$RBD_NS)
#   rbd_expect_export IMAGE SHA [FS]  # `rbd export` of it: those bytes, fsck
#   rbd_test_cleanup     # remove the namespace's images and the namespace
source "$IT_DIR/ceph-lib.sh"

rbd_test_cluster() {
	# The backend may not be built (no librbd at build time).
	if "$DIOLOOP_BIN" info "rbd://p/i" 2>&1 | grep -q "unknown protocol"; then
		it_skip "this dioloop has no rbd backend (built without librbd-dev/librados-dev)"
	fi
	command -v rbd >/dev/null 2>&1 || it_skip "missing: rbd (apt-get install ceph-common)"
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
	RBD_NS=it$$
	# shellcheck disable=SC2034  # the tests' URL of the namespace
	RBD_URL=rbd://rbd/$RBD_NS
	must "rbd namespace create rbd/$RBD_NS" timeout 60 rbd namespace create "rbd/$RBD_NS"
}

# rbd_expect_export IMAGE SHA [FS]: the image rbd/$RBD_NS/IMAGE as
# librbd's own tool reads it (`rbd export`, no daemon in the way) has the
# sha256 SHA (what its node showed) and, given FS, a clean file system
# (fsck_fs of the exported file).  The export is removed.
rbd_expect_export() {
	local img=$1 want=$2 fs=${3:-} file=$IT_TMP/$1.export

	if expect_ok "rbd export rbd/$RBD_NS/$img" \
		timeout 120 rbd export --no-progress "rbd/$RBD_NS/$img" "$file"; then
		expect_eq "rbd export of $img = what its node showed" "$want" "$(sha "$file")"
		[[ -z $fs ]] ||
			expect_ok "fsck of $fs on the exported $img is clean" fsck_fs "$fs" "$file"
	fi
	rm -f "$file"
}

# Every image of the namespace (with its snapshots) and the namespace;
# clones go before their parents, so a few passes.
rbd_test_cleanup() {
	local img snap
	for _ in 1 2 3; do
		for img in $(timeout 60 rbd ls "rbd/$RBD_NS" 2>/dev/null); do
			for snap in $(timeout 60 rbd snap ls --format json "rbd/$RBD_NS/$img" 2>/dev/null |
				jq -r '.[].name' 2>/dev/null); do
				timeout 60 rbd snap unprotect "rbd/$RBD_NS/$img@$snap" >/dev/null 2>&1
			done
			timeout 60 rbd snap purge --no-progress "rbd/$RBD_NS/$img" >/dev/null 2>&1
			timeout 60 rbd rm --no-progress "rbd/$RBD_NS/$img" >/dev/null 2>&1
		done
		[[ -z $(timeout 60 rbd ls "rbd/$RBD_NS" 2>/dev/null) ]] && break
	done
	timeout 60 rbd namespace remove "rbd/$RBD_NS" >/dev/null 2>&1
}
