#!/bin/bash
# SPDX-License-Identifier: MIT
#
# librbd is loaded only when an rbd: URL is used (backends/rbd/api.h): a
# daemon serving local images maps no Ceph library, and on a machine
# without librbd (here: a mount namespace in which librbd.so.1 is an
# empty file) an rbd: URL gets one line naming the library and the
# package, while local images work as before.  No cluster is needed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "librbd is loaded for rbd: URLs only; without it, one line" unshare ldconfig
[[ ${DIOLOOP_RBD_BUILT:-0} == 1 ]] ||
	it_skip "this build has no rbd backend (DIOLOOP_RBD_BUILT=1 says it has)"
LIBRBD=$(ldconfig -p | awk '$1 == "librbd.so.1" { print $NF; exit }')
[[ -n $LIBRBD ]] || it_skip "librbd.so.1 is not installed"

mkdir src
truncate -s 16M src/disk.img

# ---- a daemon serving local images
start_daemon "$IT_TMP/src" "$IT_TMP/mnt"
expect_io "the node is served" "ok 4096" pwrite "$IT_TMP/mnt/disk.img" 0 4096 7
maps=$(cat "/proc/$DAEMON_PID/maps")
expect_match "the daemon's memory map is read (libfuse3 is in it)" \
	'.*/libfuse3\.so.*' "$(grep -m1 libfuse3 <<<"$maps")"
expect_eq "the daemon maps no Ceph library" "" \
	"$(grep -oE '/lib(rbd|rados|ceph-common)\.so[^ ]*$' <<<"$maps" | sort -u)"
dioloop_umount "$IT_TMP/mnt"
daemon_wait "$DAEMON_PID"
expect_eq "the daemon exited 0" 0 "$DAEMON_STATUS"

# ---- without librbd: CMD runs in a mount namespace of its own in which
# librbd.so.1 is /dev/null (dlopen: "file too short").
# shellcheck disable=SC2016  # expanded by the inner bash
WITHOUT_LIBRBD=(unshare -m bash -c 'mount --bind /dev/null "$0" && exec "$@"' "$LIBRBD")
"${WITHOUT_LIBRBD[@]}" true ||
	it_skip "cannot bind-mount over $LIBRBD in a mount namespace of its own"
mkdir mnt2
expect_one_line_error "mount rbd://rbd without librbd" 2 \
	"${WITHOUT_LIBRBD[@]}" "$DIOLOOP_BIN" mount rbd://rbd "$IT_TMP/mnt2"
expect_match "... names the library and the package" \
	'dioloop: mount: rbd://rbd: cannot load librbd.so.1 \(install librbd1 and librados2\): .*' \
	"$(cat "$IT_TMP/err.err")"
expect_one_line_error "create rbd://rbd/x without librbd" 1 \
	"${WITHOUT_LIBRBD[@]}" "$DIOLOOP_BIN" create rbd://rbd/x --size 1M
expect_match "... the same line" '.*cannot load librbd.so.1 .*' "$(cat "$IT_TMP/err.err")"
expect_ok "a local image's info works without librbd" \
	"${WITHOUT_LIBRBD[@]}" "$DIOLOOP_BIN" info "$IT_TMP/src/disk.img"
expect_match "... and says what it is" '.*format: *raw.*' "$(paste -sd' ' "$IT_TMP/last.out")"

it_end
