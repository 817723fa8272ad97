/* SPDX-License-Identifier: MIT */
/*
 * The cow format's on-disk structures (backends/cow/format.h): checksums
 * against known values, encode/decode round trips, every validation rule
 * of superblocks, pages and volume entries, superblock choice at open
 * (fallback, both bad, not an image, truncated), and cow_format().
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backends/cow/format.h"
#include "tests/testutil.h"

/* ---- checksums ---- */

START_TEST(test_cow_crc32c_matches_the_standard_check_value)
{
	ck_assert_msg(cow_crc32c("123456789", 9) == 0xE3069283u,
		      "crc32c(\"123456789\") is 0xE3069283 (got 0x%08x)",
		      cow_crc32c("123456789", 9));
	ck_assert_msg(cow_crc32c("", 0) == 0,
		      "crc32c of nothing is 0 (got 0x%08x)", cow_crc32c("", 0));
}
END_TEST

START_TEST(test_cow_block_csum_uses_the_chosen_algorithm)
{
	uint8_t *blk = g_malloc(COW_BLOCK_SIZE);
	struct test_rng rng;

	test_rng_init(&rng, 1);
	test_rng_fill(&rng, blk, COW_BLOCK_SIZE);
	ck_assert_msg(cow_csum_block(COW_CSUM_CRC32C, blk) ==
		      cow_crc32c(blk, COW_BLOCK_SIZE),
		      "crc32c block checksum is crc32c of the 4096 bytes");
	ck_assert_msg(cow_csum_block(COW_CSUM_XXHASH64, blk) ==
		      XXH64(blk, COW_BLOCK_SIZE, 0),
		      "xxhash64 block checksum is XXH64 seed 0 of the block");
	ck_assert_msg(cow_csum_block(COW_CSUM_CRC32C, blk) >> 32 == 0,
		      "a crc32c checksum has its upper 32 bits zero");
	g_free(blk);
}
END_TEST

/* Checksums of blocks cut into random iovecs equal the flat ones. */
static void csum_iov_case(uint8_t type, unsigned int salt)
{
	enum { NB = 5 };
	uint8_t *data = g_malloc(NB * COW_BLOCK_SIZE);
	struct iovec iov[64];
	uint64_t got[NB], want[NB];
	struct test_rng rng;
	size_t pos = 0;
	int n = 0, i;

	test_rng_init(&rng, salt);
	test_rng_fill(&rng, data, NB * COW_BLOCK_SIZE);
	while (pos < NB * COW_BLOCK_SIZE) {
		size_t len = n == 63 ? NB * COW_BLOCK_SIZE - pos :
			     (size_t)test_rng_range(&rng, 1, 6000);

		len = MIN(len, NB * COW_BLOCK_SIZE - pos);
		iov[n++] = (struct iovec){ data + pos, len };
		pos += len;
	}
	cow_csum_iov(type, iov, n, NB, got);
	for (i = 0; i < NB; i++) {
		want[i] = cow_csum_block(type, data + i * COW_BLOCK_SIZE);
		ck_assert_msg(got[i] == want[i],
			      "%s of block %d over %d iovecs equals the flat checksum",
			      cow_csum_name(type), i, n);
	}
	g_free(data);
}

START_TEST(test_cow_csum_iov_handles_blocks_split_across_iovecs)
{
	unsigned int k;

	for (k = 0; k < test_iterations(50); k++) {
		csum_iov_case(COW_CSUM_CRC32C, 100 + k);
		csum_iov_case(COW_CSUM_XXHASH64, 200 + k);
	}
}
END_TEST

START_TEST(test_cow_csum_names_round_trip)
{
	ck_assert_msg(cow_csum_parse("crc32c") == COW_CSUM_CRC32C &&
		      cow_csum_parse("xxhash64") == COW_CSUM_XXHASH64,
		      "the two checksum names parse");
	ck_assert_msg(cow_csum_parse("md5") == 0 && cow_csum_parse(NULL) == 0,
		      "unknown names parse as 0");
	ck_assert_str_eq(cow_csum_name(COW_CSUM_CRC32C), "crc32c");
	ck_assert_msg(cow_csum_name(9) == NULL, "type 9 has no name");
}
END_TEST

/* ---- tree shape ---- */

START_TEST(test_cow_tree_shape_matches_the_spec)
{
	ck_assert_msg(COW_PAGE_HDR + COW_INTERIOR_ENTRIES *
		      COW_INTERIOR_ENTRY_SIZE == COW_BLOCK_SIZE &&
		      COW_PAGE_HDR + COW_MAP_ENTRIES * COW_MAP_ENTRY_SIZE ==
		      COW_BLOCK_SIZE &&
		      COW_PAGE_HDR + COW_RC_ENTRIES * COW_RC_ENTRY_SIZE ==
		      COW_BLOCK_SIZE &&
		      COW_PAGE_HDR + COW_VOL_ENTRIES * COW_VOL_ENTRY_SIZE <=
		      COW_BLOCK_SIZE,
		      "every page kind fits one block");
	ck_assert_msg(cow_tree_span(COW_TREE_MAP, 1) == 252u * 168u,
		      "a level-1 map page covers 252*168 blocks");
	ck_assert_msg(cow_tree_height_for(COW_TREE_MAP, 1) == 1 &&
		      cow_tree_height_for(COW_TREE_MAP, 252) == 1 &&
		      cow_tree_height_for(COW_TREE_MAP, 253) == 2,
		      "one leaf covers 252 blocks, 253 need height 2");
	ck_assert_msg(cow_tree_height_for(COW_TREE_MAP,
					  (UINT64_C(16) << 40) /
					  COW_BLOCK_SIZE) == 5,
		      "a 16 TiB volume's map has height 5 (got %u)",
		      cow_tree_height_for(COW_TREE_MAP,
					  (UINT64_C(16) << 40) /
					  COW_BLOCK_SIZE));
	ck_assert_msg(cow_tree_span(COW_TREE_MAP, 20) == UINT64_MAX,
		      "spans saturate instead of overflowing");
	ck_assert_msg(cow_tree_height_for(COW_TREE_MAP, UINT64_MAX) == 0,
		      "no height covers 2^64 keys");
}
END_TEST

/* ---- superblock ---- */

static struct cow_sb sample_sb(uint32_t slot)
{
	struct cow_sb sb = {
		.version = COW_VERSION,
		.slot = slot,
		.generation = 7,
		.block_size = COW_BLOCK_SIZE,
		.csum_type = COW_CSUM_XXHASH64,
		.first_block = COW_FIRST_BLOCK,
		.nr_blocks = 5000,
		.create_time = 1700000000,
		.commit_time = 1700000123,
		.default_volume = 1,
		.next_volume_id = 4,
		.refcount_root = { 17, 7, 4900, 2 },
		.volume_root = { 18, 6, 3, 1 },
	};
	int i;

	for (i = 0; i < 16; i++)
		sb.uuid[i] = (uint8_t)(0xa0 + i);
	return sb;
}

START_TEST(test_cow_sb_encode_decode_round_trip)
{
	uint8_t *blk = g_malloc(COW_BLOCK_SIZE);
	struct cow_sb in = sample_sb(1), out;
	struct cow_err err = { "" };
	size_t i;

	cow_sb_encode(&in, blk);
	ck_assert_msg(memcmp(blk, "DLOOPCOW", 8) == 0,
		      "the magic is DLOOPCOW at offset 0");
	for (i = COW_SB_SIZE; i < COW_BLOCK_SIZE; i++)
		ck_assert_msg(blk[i] == 0, "byte %zu past the superblock is 0",
			      i);
	ck_assert_msg(cow_sb_decode(blk, 1, &out, &err) == 0,
		      "a freshly encoded superblock decodes: %s", err.msg);
	ck_assert_msg(memcmp(&in, &out, sizeof(in)) == 0,
		      "every field survives the round trip");
	g_free(blk);
}
END_TEST

/* Decode blk as slot and expect failure with a message containing what. */
static void expect_sb_bad(uint8_t *blk, uint32_t slot, bool reseal,
			  const char *what)
{
	struct cow_err err = { "" };
	struct cow_sb out;

	if (reseal)
		cow_put_le32(blk + COW_SB_CSUM_OFF,
			     cow_crc32c(blk, COW_SB_CSUM_OFF));
	ck_assert_msg(cow_sb_decode(blk, slot, &out, &err) == -EUCLEAN,
		      "a superblock with %s is refused with -EUCLEAN", what);
	ck_assert_msg(strstr(err.msg, what) != NULL,
		      "the reason mentions \"%s\" (got \"%s\")", what, err.msg);
}

START_TEST(test_cow_sb_decode_rejects_each_bad_field)
{
	uint8_t *blk = g_malloc(COW_BLOCK_SIZE);
	struct cow_sb sb;

#define FRESH(...) do { sb = sample_sb(0); __VA_ARGS__; cow_sb_encode(&sb, blk); } while (0)
	FRESH((void)0);
	blk[0] = 'X';
	expect_sb_bad(blk, 0, false, "no cow magic");
	FRESH((void)0);
	blk[100] ^= 1;
	expect_sb_bad(blk, 0, false, "bad checksum");
	FRESH((void)0);
	expect_sb_bad(blk, 1, false, "slot");
	FRESH(sb.version = 2);
	expect_sb_bad(blk, 0, false, "version 2");
	FRESH(sb.block_size = 8192);
	expect_sb_bad(blk, 0, false, "block size");
	FRESH(sb.csum_type = 7);
	expect_sb_bad(blk, 0, false, "checksum type");
	FRESH(sb.first_block = 3);
	expect_sb_bad(blk, 0, false, "first block");
	FRESH(sb.generation = 0);
	expect_sb_bad(blk, 0, false, "generation 0");
	FRESH(sb.nr_blocks = 1);
	expect_sb_bad(blk, 0, false, "container size");
	FRESH(sb.refcount_root.pbn = 5000);
	expect_sb_bad(blk, 0, false, "refcount root: root page outside");
	FRESH(sb.refcount_root.height = 0);
	expect_sb_bad(blk, 0, false, "refcount root: height");
	FRESH(sb.refcount_root.height = 1, sb.refcount_root.used = 100);
	expect_sb_bad(blk, 0, false, "too low for the container");
	FRESH(sb.refcount_root.gen = 8);
	expect_sb_bad(blk, 0, false, "root generation newer");
	FRESH(sb.refcount_root.pbn = 0);
	expect_sb_bad(blk, 0, false, "refcount root: empty root with");
	FRESH(sb.volume_root = (struct cow_ptr){ 0, 0, 0, 1 });
	expect_sb_bad(blk, 0, false, "volume root: empty");
	FRESH(sb.default_volume = 4);
	expect_sb_bad(blk, 0, false, "default volume id");
	FRESH(sb.default_volume = 0);
	expect_sb_bad(blk, 0, false, "default volume id");
	FRESH((void)0);
	blk[300] = 1;
	expect_sb_bad(blk, 0, true, "reserved byte 300");
	FRESH((void)0);
	blk[120 + 30] = 1;
	expect_sb_bad(blk, 0, true, "reserved bytes of a root pointer");
#undef FRESH
	g_free(blk);
}
END_TEST

START_TEST(test_cow_sb_features_refuse_unknown_incompat)
{
	struct cow_sb sb = sample_sb(0);
	struct cow_err err = { "" };

	ck_assert_msg(cow_sb_check_features(&sb, false, &err) == 0,
		      "no feature bits: opens read-write");
	sb.compat = 1;
	ck_assert_msg(cow_sb_check_features(&sb, false, &err) == 0,
		      "unknown compat bits are ignored");
	sb.ro_compat = 4;
	ck_assert_msg(cow_sb_check_features(&sb, false, &err) == -EROFS,
		      "unknown ro_compat bits refuse a read-write open");
	ck_assert_msg(cow_sb_check_features(&sb, true, &err) == 0,
		      "unknown ro_compat bits allow a read-only open");
	sb.incompat = 2;
	ck_assert_msg(cow_sb_check_features(&sb, true, &err) == -EOPNOTSUPP,
		      "unknown incompat bits refuse even read-only");
	ck_assert_msg(strstr(err.msg, "0x2") != NULL,
		      "the message names the unknown bits (got \"%s\")",
		      err.msg);
}
END_TEST

/* ---- metadata pages ---- */

static struct cow_page_hdr sample_hdr(void)
{
	struct cow_page_hdr h = {
		.tree = COW_TREE_MAP,
		.level = 1,
		.nr_entries = COW_INTERIOR_ENTRIES,
		.generation = 42,
		.pbn = 1234,
		.first_key = 252u * 168u * 3u,
		.owner = 1,
	};

	memset(h.uuid, 0x5c, 16);
	return h;
}

START_TEST(test_cow_page_seal_verify_round_trip)
{
	uint8_t *page = g_malloc0(COW_BLOCK_SIZE);
	struct cow_page_hdr h = sample_hdr();
	struct cow_err err = { "" };
	struct cow_ptr p = { 99, 41, 250, 0 }, q;

	cow_interior_set(page, 167, &p);
	cow_page_seal(page, &h);
	ck_assert_msg(cow_page_verify(page, &h, &err) == 0,
		      "a sealed page verifies: %s", err.msg);
	cow_interior_get(page, 167, &q);
	ck_assert_msg(q.pbn == 99 && q.gen == 41 && q.used == 250,
		      "the last interior entry survives sealing");
	g_free(page);
}
END_TEST

/* Verify page against want, expecting a failure mentioning what. */
static void expect_page_bad(const uint8_t *page, struct cow_page_hdr want,
			    const char *what)
{
	struct cow_err err = { "" };

	ck_assert_msg(cow_page_verify(page, &want, &err) == -EUCLEAN,
		      "a page with %s is refused", what);
	ck_assert_msg(strstr(err.msg, what) != NULL,
		      "the reason mentions \"%s\" (got \"%s\")", what, err.msg);
	ck_assert_msg(strstr(err.msg, "block 1234") != NULL ||
		      strstr(err.msg, "block 7") != NULL,
		      "the reason names the block (got \"%s\")", err.msg);
}

START_TEST(test_cow_page_verify_catches_each_mismatch)
{
	uint8_t *page = g_malloc0(COW_BLOCK_SIZE);
	struct cow_page_hdr h = sample_hdr(), w;

	cow_page_seal(page, &h);
	page[2000] ^= 0x10;
	expect_page_bad(page, h, "bad checksum");
	page[2000] ^= 0x10;
	page[0] = 'X';
	expect_page_bad(page, h, "bad magic");
	page[0] = 'D';
	w = h;
	w.tree = COW_TREE_REFCOUNT;
	expect_page_bad(page, w, "tree type 1");
	w = h;
	w.level = 2;
	expect_page_bad(page, w, "level 1, expected 2");
	w = h;
	w.nr_entries = COW_MAP_ENTRIES;
	expect_page_bad(page, w, "168 entries");
	w = h;
	w.generation = 43;
	expect_page_bad(page, w, "stale or lost write");
	w = h;
	w.pbn = 7;
	expect_page_bad(page, w, "misdirected write");
	w = h;
	w.first_key = 0;
	expect_page_bad(page, w, "covers keys");
	w = h;
	w.uuid[3] = 0;
	expect_page_bad(page, w, "another image");
	g_free(page);
}
END_TEST

START_TEST(test_cow_leaf_entries_round_trip)
{
	uint8_t *page = g_malloc0(COW_BLOCK_SIZE);
	uint64_t pbn, csum;

	cow_map_set(page, 251, 0x123456789aULL, 0xfedcba9876543210ULL);
	cow_map_get(page, 251, &pbn, &csum);
	ck_assert_msg(pbn == 0x123456789aULL && csum == 0xfedcba9876543210ULL,
		      "the last map entry round-trips");
	ck_assert_msg(cow_leaf_entry_used(COW_TREE_MAP, page, 251) &&
		      !cow_leaf_entry_used(COW_TREE_MAP, page, 250),
		      "a map entry is used iff its pbn is non-zero");
	memset(page, 0, COW_BLOCK_SIZE);
	cow_rc_set(page, 1007, 0xdeadbeef);
	ck_assert_msg(cow_rc_get(page, 1007) == 0xdeadbeef,
		      "the last refcount entry round-trips");
	ck_assert_msg(cow_leaf_entry_used(COW_TREE_REFCOUNT, page, 1007) &&
		      !cow_leaf_entry_used(COW_TREE_REFCOUNT, page, 0),
		      "a refcount entry is used iff non-zero");
	g_free(page);
}
END_TEST

START_TEST(test_cow_volume_entry_round_trip_and_validation)
{
	uint8_t *page = g_malloc0(COW_BLOCK_SIZE);
	struct cow_volume_entry v = {
		.id = 3, .flags = COW_VOL_READONLY, .parent = 1,
		.size = 1 << 30, .map_root = { 77, 5, 1000, 3 },
		.create_generation = 5, .create_time = 1700000000,
		.last_snapshot_generation = 5,
	}, out;
	struct cow_err err = { "" };

	strcpy(v.name, "before-upgrade");
	cow_vol_set(page, 30, &v);
	ck_assert_msg(cow_vol_get(page, 30, &out, &err) == 0,
		      "an encoded volume entry decodes: %s", err.msg);
	ck_assert_msg(memcmp(&v, &out, sizeof(v)) == 0,
		      "every volume field survives the round trip");
	ck_assert_msg(cow_leaf_entry_used(COW_TREE_VOLUME, page, 30) &&
		      !cow_leaf_entry_used(COW_TREE_VOLUME, page, 29),
		      "a volume slot is used iff its id is non-zero");
	ck_assert_msg(cow_vol_get(page, 29, &out, &err) == 0 && out.id == 0,
		      "a zero slot decodes as free");

	page[COW_PAGE_HDR + 29 * COW_VOL_ENTRY_SIZE + 50] = 1;
	ck_assert_msg(cow_vol_get(page, 29, &out, &err) == -EUCLEAN,
		      "a free slot with stray bytes is refused");
	memset(page, 0, COW_BLOCK_SIZE);
	v.size = 1000;
	cow_vol_set(page, 0, &v);
	ck_assert_msg(cow_vol_get(page, 0, &out, &err) == -EUCLEAN &&
		      strstr(err.msg, "multiple"),
		      "a size that is not a block multiple is refused (%s)",
		      err.msg);
	v.size = UINT64_C(1) << 40;
	v.map_root.height = 2;
	cow_vol_set(page, 0, &v);
	ck_assert_msg(cow_vol_get(page, 0, &out, &err) == -EUCLEAN &&
		      strstr(err.msg, "does not cover"),
		      "a map too low for the size is refused (%s)", err.msg);
	v.map_root.height = 4;
	v.flags = 2;
	cow_vol_set(page, 0, &v);
	ck_assert_msg(cow_vol_get(page, 0, &out, &err) == -EUCLEAN &&
		      strstr(err.msg, "unknown flags"),
		      "unknown volume flags are refused (%s)", err.msg);
	v.flags = 0;
	cow_vol_set(page, 0, &v);
	memset(page + COW_PAGE_HDR + 88, 'n', 40);
	ck_assert_msg(cow_vol_get(page, 0, &out, &err) == -EUCLEAN &&
		      strstr(err.msg, "NUL"),
		      "a name without NUL is refused (%s)", err.msg);
	g_free(page);
}
END_TEST

/* ---- images: cow_format and cow_sb_read ---- */

static char *image_path(const char *name)
{
	char *dir = test_tmpdir();
	char *p = g_build_filename(dir, name, NULL);

	g_free(dir);
	return p;
}

static void make_cow(const char *path, uint64_t size, uint8_t csum)
{
	struct cow_format_opts o = { .size = size, .csum_type = csum };
	struct cow_err err = { "" };
	int ret = cow_format(path, &o, &err);

	ck_assert_msg(ret == 0, "cow_format %s: expected 0, got %d (%s)",
		      path, ret, err.msg);
}

/* cow_sb_read on path: the return value, with sb/slot/messages. */
static int read_sb(const char *path, struct cow_sb *sb, uint32_t *slot,
		   struct cow_err *fb, struct cow_err *err)
{
	int fd = open(path, O_RDONLY), ret;

	ck_assert_msg(fd >= 0, "open %s", path);
	ret = cow_sb_read(fd, sb, slot, fb, err);
	close(fd);
	return ret;
}

static void poke(const char *path, off_t off, uint8_t xor)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_msg(fd >= 0 && pread(fd, &b, 1, off) == 1, "read byte");
	b ^= xor;
	ck_assert_msg(pwrite(fd, &b, 1, off) == 1, "write byte");
	close(fd);
}

START_TEST(test_cow_format_creates_generation_one_in_both_slots)
{
	char *path = image_path("a.cow");
	struct cow_err fb, err = { "" };
	struct cow_sb sb;
	struct stat st;
	uint32_t slot;

	make_cow(path, 64 << 20, 0);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0,
		      "a new image's superblock reads: %s", err.msg);
	ck_assert_msg(fb.msg[0] == '\0', "no fallback on a new image (%s)",
		      fb.msg);
	ck_assert_msg(sb.generation == 1 && sb.nr_blocks == 4 &&
		      sb.csum_type == COW_CSUM_CRC32C &&
		      sb.default_volume == 1 && sb.next_volume_id == 2,
		      "generation 1, 4 blocks, crc32c, volume 1 (gen %llu, %llu blocks)",
		      (unsigned long long)sb.generation,
		      (unsigned long long)sb.nr_blocks);
	ck_assert_msg(sb.refcount_root.used == 4,
		      "all 4 blocks are in use at creation");
	ck_assert_msg(stat(path, &st) == 0 && st.st_size == 4 * 4096,
		      "the file is 4 blocks long");
	/* Either copy alone is enough. */
	poke(path, 0, 0xff);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0 && slot == 1,
		      "with slot 0 damaged, slot 1 is used");
	ck_assert_msg(strstr(fb.msg, "copy 0 is bad") &&
		      strstr(fb.msg, "no cow magic"),
		      "the fallback says which copy and why (got \"%s\")",
		      fb.msg);
	g_free(path);
}
END_TEST

START_TEST(test_cow_format_xxhash64_and_bad_arguments)
{
	char *path = image_path("x.cow");
	struct cow_format_opts o = { .size = 12345 };
	struct cow_err fb, err = { "" };
	struct cow_sb sb;
	uint32_t slot;

	ck_assert_msg(cow_format(path, &o, &err) == -EINVAL,
		      "a size that is not a block multiple is refused");
	o.size = 0;
	ck_assert_msg(cow_format(path, &o, &err) == -EINVAL,
		      "size 0 is refused");
	o.size = 1 << 20;
	o.csum_type = 9;
	ck_assert_msg(cow_format(path, &o, &err) == -EINVAL,
		      "an unknown checksum type is refused");
	ck_assert_msg(access(path, F_OK) != 0,
		      "refused creations leave no file");
	make_cow(path, 1 << 20, COW_CSUM_XXHASH64);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0 &&
		      sb.csum_type == COW_CSUM_XXHASH64,
		      "the checksum type chosen at create is recorded");
	o.csum_type = 0;
	ck_assert_msg(cow_format(path, &o, &err) == -EEXIST,
		      "an existing file is never overwritten");
	g_free(path);
}
END_TEST

START_TEST(test_cow_sb_read_both_bad_not_cow_and_truncated)
{
	char *path = image_path("b.cow");
	struct cow_err fb, err = { "" };
	struct cow_sb sb;
	uint32_t slot;
	int fd;

	make_cow(path, 1 << 20, 0);
	poke(path, 100, 1);
	poke(path, 4096 + 100, 1);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == -EUCLEAN,
		      "both copies bad: -EUCLEAN");
	ck_assert_msg(strstr(err.msg, "both superblock copies are bad") &&
		      strstr(err.msg, "copy 0: bad checksum") &&
		      strstr(err.msg, "copy 1: bad checksum"),
		      "the error names both problems (got \"%s\")", err.msg);

	/* A file of zeros, and a short one, are not cow images. */
	fd = open(path, O_RDWR | O_TRUNC);
	ck_assert_msg(fd >= 0 && ftruncate(fd, 1 << 20) == 0, "zero file");
	close(fd);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == -EINVAL &&
		      strstr(err.msg, "not a cow image"),
		      "zeros: not a cow image (got \"%s\")", err.msg);
	fd = open(path, O_RDWR | O_TRUNC);
	close(fd);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == -EINVAL,
		      "an empty file is not a cow image");

	/* Truncated inside slot 1: slot 0 still opens, and says so. */
	unlink(path);
	make_cow(path, 1 << 20, 0);
	ck_assert_msg(truncate(path, 4096 + 100) == 0, "truncate");
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0 && slot == 0,
		      "a file cut inside slot 1 still opens from slot 0");
	ck_assert_msg(strstr(fb.msg, "copy 1") && strstr(fb.msg, "missing"),
		      "the fallback says copy 1 is missing (got \"%s\")",
		      fb.msg);
	ck_assert_msg(truncate(path, 100) == 0, "truncate");
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == -EUCLEAN,
		      "a file cut inside slot 0 has no good copy (got \"%s\")",
		      err.msg);
	g_free(path);
}
END_TEST

START_TEST(test_cow_sb_read_picks_the_newer_generation)
{
	char *path = image_path("g.cow");
	uint8_t *blk = g_malloc(COW_BLOCK_SIZE);
	struct cow_err fb, err = { "" };
	struct cow_sb sb;
	uint32_t slot;
	int fd;

	make_cow(path, 1 << 20, 0);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0, "read");
	sb.generation = 2;
	sb.slot = 0;
	cow_sb_encode(&sb, blk);
	fd = open(path, O_RDWR);
	ck_assert_msg(pwrite(fd, blk, COW_BLOCK_SIZE, 0) == COW_BLOCK_SIZE,
		      "write slot 0");
	close(fd);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0 &&
		      slot == 0 && sb.generation == 2,
		      "generation 2 in slot 0 beats generation 1 in slot 1");
	/* A newer copy from another image is not trusted blindly. */
	sb.uuid[0] ^= 1;
	cow_sb_encode(&sb, blk);
	fd = open(path, O_RDWR);
	ck_assert_msg(pwrite(fd, blk, COW_BLOCK_SIZE, 0) == COW_BLOCK_SIZE,
		      "write slot 0");
	close(fd);
	ck_assert_msg(read_sb(path, &sb, &slot, &fb, &err) == 0,
		      "copies of two images: one is still chosen");
	ck_assert_msg(strstr(fb.msg, "another image") != NULL,
		      "and the fallback message says why (got \"%s\")",
		      fb.msg);
	g_free(blk);
	g_free(path);
}
END_TEST

/* Random damage to a superblock never crashes and is always noticed. */
START_TEST(test_cow_sb_decode_survives_random_damage)
{
	uint8_t *blk = g_malloc(COW_BLOCK_SIZE);
	struct cow_sb sb = sample_sb(0), out;
	struct cow_err err;
	struct test_rng rng;
	unsigned int k, j;

	test_rng_init(&rng, 77);
	for (k = 0; k < test_iterations(2000); k++) {
		cow_sb_encode(&sb, blk);
		for (j = 0; j < 1 + k % 4; j++)
			blk[test_rng_range(&rng, 0, COW_SB_SIZE - 1)] ^=
				(uint8_t)test_rng_range(&rng, 1, 255);
		ck_assert_msg(cow_sb_decode(blk, 0, &out, &err) == -EUCLEAN,
			      "damaged superblock %u is refused", k);
		/* Resealed damage is judged field by field: any result
		 * is fine as long as it is 0 or -EUCLEAN. */
		cow_put_le32(blk + COW_SB_CSUM_OFF,
			     cow_crc32c(blk, COW_SB_CSUM_OFF));
		j = (unsigned int)-cow_sb_decode(blk, 0, &out, &err);
		ck_assert_msg(j == 0 || j == EUCLEAN,
			      "a resealed damaged superblock decodes or is refused");
	}
	g_free(blk);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_format");
	TCase *csum = tcase_create("checksums");
	TCase *sb = tcase_create("superblock");
	TCase *pages = tcase_create("pages");
	TCase *image = tcase_create("image");

	tcase_add_test(csum, test_cow_crc32c_matches_the_standard_check_value);
	tcase_add_test(csum, test_cow_block_csum_uses_the_chosen_algorithm);
	tcase_add_test(csum, test_cow_csum_iov_handles_blocks_split_across_iovecs);
	tcase_add_test(csum, test_cow_csum_names_round_trip);
	suite_add_tcase(s, csum);

	tcase_add_test(sb, test_cow_tree_shape_matches_the_spec);
	tcase_add_test(sb, test_cow_sb_encode_decode_round_trip);
	tcase_add_test(sb, test_cow_sb_decode_rejects_each_bad_field);
	tcase_add_test(sb, test_cow_sb_features_refuse_unknown_incompat);
	tcase_add_test(sb, test_cow_sb_decode_survives_random_damage);
	suite_add_tcase(s, sb);

	tcase_add_test(pages, test_cow_page_seal_verify_round_trip);
	tcase_add_test(pages, test_cow_page_verify_catches_each_mismatch);
	tcase_add_test(pages, test_cow_leaf_entries_round_trip);
	tcase_add_test(pages, test_cow_volume_entry_round_trip_and_validation);
	suite_add_tcase(s, pages);

	tcase_add_test(image, test_cow_format_creates_generation_one_in_both_slots);
	tcase_add_test(image, test_cow_format_xxhash64_and_bad_arguments);
	tcase_add_test(image, test_cow_sb_read_both_bad_not_cow_and_truncated);
	tcase_add_test(image, test_cow_sb_read_picks_the_newer_generation);
	suite_add_tcase(s, image);

	return test_run_suite(s);
}
