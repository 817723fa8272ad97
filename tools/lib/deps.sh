# shellcheck shell=bash
# Debian packages dioloop needs, and a helper that installs them.
# Sourced by tools/run-tests (and any other tool that needs the same set).

# Everything needed to build dioloop and run all of its tests, in one list.
# shellcheck disable=SC2034  # used by the scripts that source this file
DIOLOOP_PACKAGES="build-essential cmake pkg-config libglib2.0-dev libaio-dev check
libfuse3-dev fuse3 liburing-dev libnfs-dev nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils libisal-dev libxxhash-dev valgrind util-linux e2fsprogs
xfsprogs btrfs-progs fio python3
libjson-glib-dev jq groff-base man-db clang libclang-rt-14-dev
ceph-mon ceph-osd ceph-common librbd-dev librados-dev prometheus"

# dioloop_missing_packages PKG...
# Print, one per line, each PKG that dpkg does not report as installed.
dioloop_missing_packages() {
	local p status
	for p in "$@"; do
		status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) || status=
		[[ $status == "install ok installed" ]] || printf '%s\n' "$p"
	done
}

# dioloop_install_packages PKG...
# Install PKG... with apt-get unless all of them are installed already.
# Returns 0 when everything is installed afterwards, 1 otherwise (including
# when something is missing and we are not root).
dioloop_install_packages() {
	local missing

	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "dpkg-query not found: packages are installed automatically on Debian only." >&2
		echo "Install the equivalents of: $*" >&2
		return 1
	fi
	missing=$(dioloop_missing_packages "$@" | tr '\n' ' ')
	missing=${missing% }
	if [[ -z $missing ]]; then
		echo "all $# packages are installed"
		return 0
	fi
	if ((EUID != 0)); then
		echo "missing packages: $missing" >&2
		echo "run as root, or install them first: sudo apt-get install $missing" >&2
		return 1
	fi
	echo "missing packages: $missing"
	apt-get update </dev/null || return 1
	# The tests start their own servers (nfs-ganesha, Ceph): no package's
	# daemon (prometheus, ceph, ...) is started by the install, unless the
	# machine already has its own policy.
	local policy=/usr/sbin/policy-rc.d ours=0 rc=0
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && ours=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" </dev/null ||
		rc=1
	((ours)) && rm -f "$policy"
	((rc == 0)) || return 1
	missing=$(dioloop_missing_packages "$@" | tr '\n' ' ')
	if [[ -n ${missing// /} ]]; then
		echo "still missing after apt-get install: $missing" >&2
		return 1
	fi
}
