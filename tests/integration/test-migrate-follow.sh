#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The image tools on the old path of a migrated image (dioloop migrate
# left .IMAGE.dioloop-redirect in the source directory): check, scrub
# and convert act on the destination the node serves, as info does, not
# on the source left behind:
#  - raw -> cow, then writes through the node: after the unmount check
#    and scrub of the old path report the cow image, and convert of it
#    copies what the node held, the writes after the switch included;
#    while mounted, check of the old path is refused as for the cow
#    image itself (it is served);
#  - the same with --remove-source (the old path is gone, its redirect
#    stays);
#  - a redirect that is not believed (not mode 0600, so not ours) is not
#    followed: check and convert see the raw source.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "check, scrub and convert follow a migrated image to its destination"

SRC=$IT_TMP/src
DST=$IT_TMP/dst
MNT=$IT_TMP/mnt
mkdir -p "$SRC" "$DST"
must "create a.img" "$DIOLOOP_BIN" create --size 16M "$SRC/a.img"
must "create b.img" "$DIOLOOP_BIN" create --size 16M "$SRC/b.img"
start_daemon "$SRC" "$MNT"

# put NODE MIB: 1 MiB of random data at MIB MiB of the node.
put() {
	must "write 1 MiB at $2 MiB of $1" \
		dd if=/dev/urandom of="$MNT/$1" bs=1M seek="$2" count=1 \
		oflag=direct conv=notrunc status=none
}

put a.img 0
must "migrate a.img to a cow image" \
	"$DIOLOOP_BIN" migrate "$MNT/a.img" "$DST/a.cow" --format cow
put a.img 8
sha_a=$(sha "$MNT/a.img")
expect_status "check of the old path while mounted: refused (the cow image is served)" 2 \
	"$DIOLOOP_BIN" check "$SRC/a.img"
expect_match "the refusal names the destination" ".*$DST/a\.cow is served by the mount.*" \
	"$(tr '\n' ' ' <"$IT_TMP/last.out")"

put b.img 0
must "migrate b.img to a cow image, removing the source" \
	"$DIOLOOP_BIN" migrate --remove-source "$MNT/b.img" "$DST/b.cow" --format cow
put b.img 4
sha_b=$(sha "$MNT/b.img")

dioloop_umount "$MNT"
daemon_wait "$DAEMON_PID"

# The source left behind is raw and lacks the writes after the switch.
[[ $(sha "$SRC/a.img") != "$sha_a" ]] ||
	it_die "the old source already holds the writes after the switch: nothing to tell apart"

for img in a b; do
	old=$SRC/$img.img
	expect_ok "check $img.img (old path)" "$DIOLOOP_BIN" check "$old"
	expect_match "check $img.img reports the cow image, clean" \
		"$old: generation [0-9]+, 1 volume, .* clean" "$(tail -n 1 "$IT_TMP/last.out")"
	expect_ok "scrub $img.img (old path)" "$DIOLOOP_BIN" scrub "$old"
	expect_match "scrub $img.img verifies the cow image's checksums" \
		"$old: scrubbed [1-9][0-9]* blocks, 0 bad" "$(tail -n 1 "$IT_TMP/last.out")"
	expect_ok "convert $img.img (old path) to $img-copy.raw" \
		"$DIOLOOP_BIN" convert "$old" "$IT_TMP/$img-copy.raw"
done
expect_eq "the copy of a.img holds what the node held (writes after the switch)" \
	"$sha_a" "$(sha "$IT_TMP/a-copy.raw")"
expect_eq "the copy of b.img (source removed) holds what the node held" \
	"$sha_b" "$(sha "$IT_TMP/b-copy.raw")"

# A redirect that is not ours (mode 0644) is not believed: the tools
# see the raw image at the old path, as the daemon would serve it.
must "chmod 0644 the redirect of a.img" chmod 0644 "$SRC/.a.img.dioloop-redirect"
expect_ok "check a.img with an untrusted redirect" "$DIOLOOP_BIN" check "$SRC/a.img"
expect_match "check a.img sees the raw source" ".*a raw image: no metadata to check.*" \
	"$(tr '\n' ' ' <"$IT_TMP/last.out")"
expect_ok "convert a.img with an untrusted redirect" \
	"$DIOLOOP_BIN" convert "$SRC/a.img" "$IT_TMP/a-source.raw"
expect_same_bytes "the copy is the raw source" "$SRC/a.img" "$IT_TMP/a-source.raw"
expect_status "check b.img (source removed) with an untrusted redirect: no such image" 2 \
	bash -c 'chmod 0644 "$1" && exec "$2" check "$3"' _ \
	"$SRC/.b.img.dioloop-redirect" "$DIOLOOP_BIN" "$SRC/b.img"

it_end
