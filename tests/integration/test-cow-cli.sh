#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The cow command-line tools: create (both checksum types), info (text and
# JSON), check (clean, corrupt metadata, not an image), scrub (clean, a
# corrupt data block listed by its lbn and pbn), snapshot / clone /
# snapshot --delete offline, convert raw -> cow -> raw (byte-identical,
# sparse) and from a snapshot, bad arguments (exit status 2, one line).
# Then online, through a running mount: snapshot and clone through a
# node, scrub of a mounted image with the progress bar, delete.
# Results are judged with independent tools: cmp, du, Python reading the
# container file.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "cow tools: create, info, check, scrub, snapshot, clone, convert" du dd jq

# Sanitizer reports of every dioloop process (a -DDIOLOOP_SANITIZE=ON
# build) land in files here; any is a failure (checked at the end).
export ASAN_OPTIONS="log_path=$IT_TMP/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="log_path=$IT_TMP/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

M=$((1 << 20))
D=$IT_TMP/img
mkdir -p "$D"
cd "$D" || it_die "cd $D"

dl() {
	"$DIOLOOP_BIN" "$@"
}

# expect_usage WHAT REGEX ARGS...: exit status 2, nothing on stdout, and
# exactly one line on stderr, "dioloop: ..." matching REGEX.
expect_usage() {
	local what=$1 re=$2 rc=0 err
	shift 2
	"$DIOLOOP_BIN" "$@" >"$IT_TMP/u.out" 2>"$IT_TMP/u.err" </dev/null || rc=$?
	err=$(cat "$IT_TMP/u.err")
	expect_eq "$what: exit status, stderr lines, stdout lines" "2 1 0" \
		"$rc $(wc -l <"$IT_TMP/u.err") $(wc -l <"$IT_TMP/u.out")" &&
		expect_match "$what: the message" "dioloop: .*($re).*" "$err"
}

# json FILE EXPR: evaluate a Python expression over the JSON object d.
json() {
	"$IT_PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# cowtool COMMAND ARGS...: read or damage a container file (Python, from
# FORMAT.md, independent of the C code).
cat >"$IT_TMP/cowtool.py" <<'EOF'
import struct, sys
BS = 4096
def sb(f):
    best = None
    for slot in (0, 1):
        f.seek(slot * BS)
        b = f.read(512)
        if b[:8] != b"DLOOPCOW":
            continue
        gen, = struct.unpack_from("<Q", b, 40)
        if best is None or gen > best[0]:
            best = (gen, struct.unpack_from("<Q", b, 120)[0],
                    struct.unpack_from("<Q", b, 152)[0], b[68])
    return best
cmd, path = sys.argv[1], sys.argv[2]
with open(path, "r+b") as f:
    if cmd == "sb":            # generation refcount_root volume_root csum_type
        print(*sb(f))
    elif cmd == "find":        # pbns of the blocks equal to a 4 KiB file
        want = open(sys.argv[3], "rb").read()
        f.seek(0)
        pbn, found = 0, []
        while True:
            b = f.read(BS)
            if not b:
                break
            if b == want:
                found.append(pbn)
            pbn += 1
        print(*found)
    elif cmd == "flip":        # xor one byte at a byte offset
        off = int(sys.argv[3])
        f.seek(off)
        c = f.read(1)
        f.seek(off)
        f.write(bytes([c[0] ^ 0x5A]))
EOF
cowtool() {
	"$IT_PY" "$IT_TMP/cowtool.py" "$@"
}

# A 4 KiB block that appears nowhere else: the data block scrub must find.
"$IT_PY" -c 'import sys; sys.stdout.buffer.write((b"dioloop scrub marker %d " % 7 * 200)[:4096])' >"$IT_TMP/mark.bin"
MARK_LBN=2600

it_log "---- create"
must "create --format cow (crc32c by default)" dl create --format cow --size 64M a.img
must "create --format cow --csum xxhash64" dl create --format cow --csum xxhash64 --size 64M x.img
must "create (raw by default)" dl create --size 64M r.img
expect_eq "a.img: the cow magic, crc32c (type 1)" "DLOOPCOW 1" \
	"$(head -c 8 a.img) $(cowtool sb a.img | cut -d' ' -f4)"
expect_eq "x.img: xxhash64 (type 2)" 2 "$(cowtool sb x.img | cut -d' ' -f4)"
expect_eq "r.img: a sparse raw file of 64 MiB" "$((64 * M)) 0" "$(stat -c '%s %b' r.img)"
expect_status "create over an existing file" 1 dl create --format cow --size 64M a.img

it_log "---- info"
must "info a.img" dl info a.img
INFO=$(cat "$IT_TMP/last.out")
expect_match "info a.img: format" '.*format: +cow.*' "$INFO"
expect_match "info a.img: version, checksum, generation" \
	'.*version: +1.*checksum: +crc32c.*generation: +1.*' "$INFO"
expect_match "info a.img: logical size" ".*size: +$((64 * M)) \(64.0 MiB\).*" "$INFO"
expect_match "info a.img: container blocks" '.*blocks: +[0-9]+ of 4 KiB: [0-9]+ used, [0-9]+ free.*' "$INFO"
expect_match "info a.img: the volume table, the default volume" \
	'.*NODE +TYPE +SIZE +MAPPED +PARENT +CREATED.*a\.img +default +64\.0 MiB +0 bytes +- .*' "$INFO"
must "info --json x.img" dl info --json x.img
cp "$IT_TMP/last.out" "$IT_TMP/x.json"
expect_eq "info --json x.img: format, checksum, size, volumes" \
	"cow xxhash64 $((64 * M)) 1 default x.img None" \
	"$(json "$IT_TMP/x.json" 'd["format"], d["checksum"], d["size"], len(d["volumes"]), d["volumes"][0]["type"], d["volumes"][0]["node"], d["volumes"][0]["parent"]' | tr -d "(),'")"
expect_eq "info --json x.img: used + free = blocks" True \
	"$(json "$IT_TMP/x.json" 'd["container"]["used_blocks"] + d["container"]["free_blocks"] == d["container"]["blocks"]')"
must "info r.img (raw)" dl info r.img
expect_eq "info r.img: the raw lines as before" \
	"path:      r.img|format:    raw|size:      $((64 * M)) (64.0 MiB)|allocated: 0 (0 bytes)" \
	"$(paste -sd'|' "$IT_TMP/last.out")"
must "info --json r.img" dl info --json r.img
expect_eq "info --json r.img" "raw $((64 * M))" \
	"$(json "$IT_TMP/last.out" 'd["format"], d["size"]' | tr -d "(),'")"

it_log "---- convert raw -> cow -> raw"
# r.img: 1 MiB of data at 0, the marker block, 2 MiB at 40 MiB, and 16 MiB
# of written zeros (allocated on the host, but nothing to copy).
dd if=/dev/urandom of=r.img bs=1M count=1 conv=notrunc status=none
dd if="$IT_TMP/mark.bin" of=r.img bs=4096 seek=$MARK_LBN conv=notrunc status=none
dd if=/dev/urandom of=r.img bs=1M count=2 seek=40 conv=notrunc status=none
dd if=/dev/zero of=r.img bs=1M count=16 seek=20 conv=notrunc status=none
expect_match "r.img has 19 MiB allocated on the host" '19[0-9]{3}' "$(du -k r.img | cut -f1)"
must "convert -p --format cow r.img c.img" dl convert -p --format cow r.img c.img
expect_match "convert -p: the progress bar reached 100%" '.*100\.00%.*' "$(tr '\r' '\n' <"$IT_TMP/last.out")"
must "convert c.img r2.img --format raw" dl convert --format raw c.img r2.img
expect_eq "r2.img == r.img (cmp)" "" "$(cmp r.img r2.img 2>&1)"
expect_eq "c.img is a cow image, r2.img raw" "cow raw" \
	"$(dl info --json c.img | json /dev/stdin 'd["format"]') $(dl info --json r2.img | json /dev/stdin 'd["format"]')"
expect_eq "c.img: 3 MiB + 4 KiB mapped (holes and zeros not stored)" $(((3 * M + 4096) / 4096)) \
	"$(dl info --json c.img | json /dev/stdin 'd["volumes"][0]["mapped_blocks"]')"
# (The cow container grows in preallocated steps of a few MiB: it may hold
# up to 8 MiB more than its data.)
expect_eq "r2.img < 4.2 MiB and c.img < 12 MiB on the host (r.img: 19 MiB)" "yes yes" \
	"$( (($(du -k r2.img | cut -f1) < 4300)) && echo yes || echo no) $( (($(du -k c.img | cut -f1) < 12288)) && echo yes || echo no)"
must "convert c.img c2.img (no --format: raw, qemu-img's default)" dl convert c.img c2.img
expect_eq "c2.img is raw" raw "$(dl info --json c2.img | json /dev/stdin 'd["format"]')"
must "convert c.img c2.cow (no --format, DST named .cow)" dl convert c.img c2.cow
expect_eq "c2.cow is cow" cow "$(dl info --json c2.cow | json /dev/stdin 'd["format"]')"
must "convert --csum xxhash64 r.img cx.img (cow, the format given by --csum's image)" \
	dl convert --format cow --csum xxhash64 r.img cx.img
expect_eq "cx.img: xxhash64" xxhash64 "$(dl info --json cx.img | json /dev/stdin 'd["checksum"]')"
must "convert cx.img rx.img --format raw" dl convert --format raw cx.img rx.img
expect_eq "rx.img == r.img (cmp)" "" "$(cmp r.img rx.img 2>&1)"
expect_status "convert onto an existing DST" 1 dl convert --format raw c.img r2.img
must "convert --force onto an existing DST" dl convert --force --format raw c.img r2.img
expect_eq "r2.img == r.img after --force (cmp)" "" "$(cmp r.img r2.img 2>&1)"
must "convert without a tty and without -p" dl convert r.img r3.img
expect_match "... prints one summary line" 'convert: [0-9.]+ MiB in [0-9.]+ s \(.*/s\)' "$(cat "$IT_TMP/last.out")"
expect_eq "r3.img == r.img" "" "$(cmp r.img r3.img 2>&1)"
# Sparse in time too: an empty image of the largest size converts in
# one step per hole, not one per buffer (hours before).
must "create huge.cow (1 EiB)" dl create --format cow --size 1E huge.cow
must "convert huge.cow (1 EiB, all holes) within a minute" timeout 60 "$DIOLOOP_BIN" convert huge.cow huge2.cow
expect_eq "... the copy is 1 EiB" 1152921504606846976 "$(dl info --json huge2.cow | grep -o '"size" : [0-9]*' | grep -o '[0-9]*$' | head -n 1)"
rm -f huge.cow huge2.cow

it_log "---- check"
for img in a.img x.img c.img cx.img; do
	must "check $img" dl check "$img"
	expect_match "check $img: clean" ".*$img: generation [0-9]+, 1 volume, .*: clean" "$(cat "$IT_TMP/last.out")"
done
must "check r.img (raw)" dl check r.img
expect_eq "check r.img: nothing to check" "r.img: a raw image: no metadata to check" "$(cat "$IT_TMP/last.out")"
cp --sparse=always c.img meta-bad.img
read -r _ _ VOLROOT _ <<<"$(cowtool sb meta-bad.img)"
cowtool flip meta-bad.img $((VOLROOT * 4096 + 100))
expect_status "check with a corrupt volume-tree page (pbn $VOLROOT)" 1 dl check meta-bad.img
expect_match "check names the problem, then the summary" ".*pbn $VOLROOT.*|.*$VOLROOT.*" \
	"$(grep -v 'generation [0-9]*, ' "$IT_TMP/last.out" | head -n 1)"
expect_match "... and counts it" '.*[1-9][0-9]* errors.*' "$(tail -n 1 "$IT_TMP/last.out")"
head -c 65536 /dev/urandom >junk.img
printf 'DLOOPCOW' | dd of=junk.img conv=notrunc status=none
expect_status "check a random file with the cow magic (no usable superblock)" 2 dl check junk.img
expect_status "check a file that does not exist" 2 dl check nope.img
expect_status "check a directory" 2 dl check "$D"
# A volume that does not exist is an error, not a clean check of the
# rest: one line, exit status 1.
for cmd in check scrub info; do
	expect_one_line_error "$cmd c.img@nope (no such volume)" 1 "$DIOLOOP_BIN" "$cmd" c.img@nope
	expect_match "... says which" ".*c.img: no volume 'nope'" "$(cat "$IT_TMP/err.err")"
done
expect_one_line_error "check r.img@nope (a raw image has no volumes)" 1 "$DIOLOOP_BIN" check r.img@nope

it_log "---- scrub"
must "scrub c.img" dl scrub c.img
expect_match "scrub c.img: clean" ".*c.img: scrubbed $(((3 * M + 4096) / 4096)) blocks, 0 bad" "$(cat "$IT_TMP/last.out")"
must "scrub -p cx.img (xxhash64)" dl scrub -p cx.img
expect_match "scrub -p: the bar reached 100%" '.*100\.00%.*' "$(tr '\r' '\n' <"$IT_TMP/last.out")"
cp --sparse=always c.img data-bad.img
PBN=$(cowtool find data-bad.img "$IT_TMP/mark.bin")
expect_match "the marker block is stored once in the container" '[0-9]+' "$PBN"
cowtool flip data-bad.img $((PBN * 4096 + 1000))
expect_status "scrub with one corrupt data block" 1 dl scrub data-bad.img
expect_eq "scrub lists exactly that block" \
	"bad block: volume - lbn $MARK_LBN pbn $PBN (checksum mismatch)" \
	"$(grep '^bad block' "$IT_TMP/last.out")"
expect_match "... and counts it" '.*scrubbed [0-9]+ blocks, 1 bad' "$(tail -n 1 "$IT_TMP/last.out")"
must "scrub r.img (raw: nothing to verify)" dl scrub r.img
expect_status "scrub a file that does not exist" 2 dl scrub nope.img

it_log "---- snapshot, clone, delete (offline)"
must "snapshot c.img s1" dl snapshot c.img s1
expect_eq "snapshot prints the new node" "c.img@s1" "$(cat "$IT_TMP/last.out")"
must "clone c.img@s1 cl1" dl clone c.img@s1 cl1
expect_eq "clone prints the new node" "c.img@cl1" "$(cat "$IT_TMP/last.out")"
must "clone c.img cl2" dl clone c.img cl2
dl info --json c.img >"$IT_TMP/c.json"
expect_eq "info: four volumes (node type parent)" \
	"c.img default None|c.img@s1 snapshot c.img|c.img@cl1 clone c.img@s1|c.img@cl2 clone c.img" \
	"$(json "$IT_TMP/c.json" '"|".join("%s %s %s" % (v["node"], v["type"], v["parent"]) for v in d["volumes"])')"
expect_eq "info: the snapshot maps what the image maps" True \
	"$(json "$IT_TMP/c.json" 'd["volumes"][1]["mapped_blocks"] == d["volumes"][0]["mapped_blocks"] > 0')"
expect_match "info (text) lists the snapshot" '.*c\.img@s1 +snapshot +64\.0 MiB +3\.0 MiB +c\.img .*' "$(dl info c.img)"
must "check c.img with its volumes" dl check c.img
expect_match "check: clean, 4 volumes" '.*4 volumes, .*: clean' "$(cat "$IT_TMP/last.out")"
expect_status "snapshot with a name taken" 1 dl snapshot c.img s1
expect_status "snapshot of a raw image" 1 dl snapshot r.img s1
must "convert c.img@s1 s1.raw --format raw" dl convert --format raw c.img@s1 s1.raw
expect_eq "s1.raw == r.img (cmp)" "" "$(cmp r.img s1.raw 2>&1)"
must "convert c.img@cl1 cl1.cow (a clone, to cow)" dl convert c.img@cl1 cl1.cow
must "convert cl1.cow cl1.raw --format raw" dl convert --format raw cl1.cow cl1.raw
expect_eq "cl1.raw == r.img (cmp)" "" "$(cmp r.img cl1.raw 2>&1)"
must "snapshot --delete c.img cl2" dl snapshot --delete c.img cl2
expect_eq "delete prints what it deleted" "deleted c.img@cl2" "$(cat "$IT_TMP/last.out")"
expect_status "delete it again" 1 dl snapshot --delete c.img cl2
expect_eq "info: three volumes left" "c.img c.img@s1 c.img@cl1" \
	"$(dl info --json c.img | json /dev/stdin '" ".join(v["node"] for v in d["volumes"])')"
must "check c.img after the delete" dl check c.img
expect_match "check: clean, 3 volumes" '.*3 volumes, .*: clean' "$(cat "$IT_TMP/last.out")"
must "scrub c.img with its volumes" dl scrub c.img

it_log "---- bad arguments: exit status 2, one line naming them"
expect_usage "create --format qcow2" "qcow2" create --format qcow2 --size 1M q.img
expect_usage "create --csum md5" "md5" create --format cow --csum md5 --size 1M q.img
expect_usage "create --csum on a raw image" "--csum" create --csum xxhash64 --size 1M q.img
expect_usage "create --format cow --size 6000" "6000" create --format cow --size 6000 q.img
expect_usage "info without PATH" "PATH" info
expect_usage "check with two paths" "PATH" check a.img x.img
expect_usage "scrub --bogus" "bogus" scrub --bogus a.img
expect_usage "snapshot without NAME" "NAME" snapshot a.img
expect_usage "snapshot with a '/' in NAME" "a/b" snapshot a.img a/b
expect_usage "clone with a '@' in NAME" "x@y" clone a.img x@y
expect_usage "snapshot with a 40-byte NAME" "0123456789012345678901234567890123456789" \
	snapshot a.img 0123456789012345678901234567890123456789
expect_usage "snapshot --delete of IMAGE@VOLUME" "c.img@s1" snapshot --delete c.img@s1 s1
expect_usage "convert with one argument" "SRC" convert r.img
expect_usage "convert --format vmdk" "vmdk" convert --format vmdk r.img q.img
expect_usage "convert --csum to a raw DST" "--csum" convert --format raw --csum xxhash64 c.img q.img
expect_usage "convert onto itself" "source" convert --force r.img r.img
expect_usage "convert from a file that does not exist" "nope.img" convert nope.img q.img
expect_eq "no q.img was left behind" no "$([[ -e q.img ]] && echo yes || echo no)"

it_log "---- online: through a running mount"
OSRC=$IT_TMP/osrc
MNT=$IT_TMP/mnt
mkdir -p "$OSRC"
must "convert r.img into the mount's source as on.img (cow)" dl convert --format cow r.img "$OSRC/on.img"
start_daemon "$OSRC" "$MNT"
if ! bash -c "printf 'scrub-status on.img\n' > '$MNT/.dioloop/ctl'" 2>/dev/null; then
	it_log "SKIP online: this daemon has no snapshot/scrub commands on its ctl yet"
else
	must "snapshot MNT/on.img snap1 (a node)" dl snapshot "$MNT/on.img" snap1
	expect_eq "snapshot through the node prints the new node" "on.img@snap1" "$(cat "$IT_TMP/last.out")"
	expect_eq "node on.img@snap1 holds the image's data (cmp)" "" "$(cmp "$MNT/on.img" "$MNT/on.img@snap1" 2>&1)"
	must "snapshot OSRC/on.img snap2 (the image a mount serves)" dl snapshot "$OSRC/on.img" snap2
	expect_eq "... done by the daemon" "on.img@snap2" "$(cat "$IT_TMP/last.out")"
	must "clone MNT/on.img@snap1 cl" dl clone "$MNT/on.img@snap1" cl
	expect_eq "clone through the mount prints the new node" "on.img@cl" "$(cat "$IT_TMP/last.out")"
	must "info OSRC/on.img while mounted (read-only)" dl info --json "$OSRC/on.img"
	expect_eq "info while mounted: the volumes" "on.img on.img@snap1 on.img@snap2 on.img@cl" \
		"$(json "$IT_TMP/last.out" '" ".join(v["node"] for v in d["volumes"])')"
	must "snapshot --delete MNT/on.img snap2" dl snapshot --delete "$MNT/on.img" snap2
	expect_eq "delete through the mount" "deleted on.img@snap2" "$(cat "$IT_TMP/last.out")"
	expect_status "snapshot through the mount with a name taken" 1 dl snapshot "$MNT/on.img" snap1
	expect_status "snapshot --delete through the mount of a volume that does not exist" 1 \
		dl snapshot --delete "$MNT/on.img" nope
	expect_status "check refuses a mounted image" 2 dl check "$OSRC/on.img"
	expect_status "convert refuses a mounted image being written" 1 dl convert "$OSRC/on.img" on.raw
	must "convert MNT/on.img@snap1 (a snapshot of a mounted image)" \
		dl convert --format raw "$MNT/on.img@snap1" snap1.raw
	expect_eq "snap1.raw == r.img (cmp)" "" "$(cmp r.img snap1.raw 2>&1)"
	must "scrub -p MNT/on.img (mounted)" dl scrub -p "$MNT/on.img"
	expect_match "online scrub: clean, the bar at 100%" '.*100\.00%.*on.img: scrubbed [0-9]+ blocks, 0 bad *' \
		"$(tr '\r\n' '  ' <"$IT_TMP/last.out")"
	PBN=$(cowtool find "$OSRC/on.img" "$IT_TMP/mark.bin")
	if [[ $PBN =~ ^[0-9]+$ ]]; then
		cowtool flip "$OSRC/on.img" $((PBN * 4096 + 1000))
		expect_status "online scrub with one corrupt data block" 1 dl scrub "$OSRC/on.img"
		expect_match "online scrub lists that block" \
			".*bad block: volume [^ ]+ lbn $MARK_LBN pbn $PBN \(checksum mismatch\).*" \
			"$(cat "$IT_TMP/last.out")"
	else
		it_fail "the marker block in on.img: expected one pbn, got '$PBN'"
	fi
fi
daemon=$DAEMON_PID
dioloop_umount "$MNT"
daemon_wait "$daemon"
expect_eq "exit status of the daemon after dioloop umount" 0 "$DAEMON_STATUS"

# -o commit=SECONDS: a cow image commits on its own, without a flush.
CSRC=$IT_TMP/commit-src
CMNT=$IT_TMP/commit-mnt
mkdir -p "$CSRC"
must "create commit.img" "$DIOLOOP_BIN" create --format cow --size 16M "$CSRC/commit.img"
gen() { "$DIOLOOP_BIN" info --json "$CSRC/commit.img" | jq -r .generation; }
start_daemon "$CSRC" "$CMNT" -o commit=0.2
g0=$(gen)
must "write 1 MiB to commit.img (no flush)" \
	dd if=/dev/urandom of="$CMNT/commit.img" bs=1M count=1 oflag=direct conv=notrunc status=none
# Polled: a commit ends in host fsyncs, slow on a busy disk.  Under the
# 5 s default interval, so a commit= that is ignored still fails.
t0=$(date +%s%N)
g1=$g0
while (($(date +%s%N) - t0 < 4500000000)); do
	g1=$(gen)
	[[ $g1 =~ ^[0-9]+$ ]] && ((g1 > g0)) && break
	sleep 0.1
done
expect_eq "commit=0.2: a background commit followed the write (generation $g0 -> $g1)" yes \
	"$([[ $g1 =~ ^[0-9]+$ ]] && ((g1 > g0)) && echo yes || echo no)"
dioloop_umount "$CMNT"
daemon_wait "$DAEMON_PID"
start_daemon "$CSRC" "$CMNT" -o commit=0
g0=$(gen)
must "write 1 MiB to commit.img again (no flush)" \
	dd if=/dev/urandom of="$CMNT/commit.img" bs=1M count=1 oflag=direct conv=notrunc status=none
sleep 1.5
expect_eq "commit=0: no commit without a flush" "$g0" "$(gen)"
dioloop_umount "$CMNT"
daemon_wait "$DAEMON_PID"
expect_status "a bad commit= value is refused" 2 "$DIOLOOP_BIN" mount -o commit=soon "$CSRC" "$CMNT"
expect_one_line_error "commit= under a millisecond is refused, not taken as 0 (only on flush)" 2 \
	"$DIOLOOP_BIN" mount -o commit=0.0004 "$CSRC" "$CMNT"
expect_one_line_error "threads= past 1024 is refused, not cut down" 2 \
	"$DIOLOOP_BIN" mount -o threads=100000 "$CSRC" "$CMNT"
expect_one_line_error "queue_depth= past 4096 is refused, not cut down" 2 \
	"$DIOLOOP_BIN" mount -o queue_depth=4294967295 "$CSRC" "$CMNT"

for f in "$IT_TMP"/asan* "$IT_TMP"/ubsan*; do
	[[ -e $f ]] || continue
	it_fail "expected no sanitizer report, got ${f##*/}:"
	it_show "$f" 20
done
it_end
