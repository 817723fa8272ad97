/* SPDX-License-Identifier: MIT */
/*
 * The cow backend against a reference model: seeded random writes,
 * overwrites, reads, discards, write-zeroes, flushes and reopens compared
 * with a flat buffer, the offline checker (check.h) run on every closed
 * image; sparse writes across a 16 TiB volume; and the reuse rule: freed
 * blocks come back only after the next commit is durable.
 */
#include "backends/cow/check.h"
#include "backends/cow/cow_int.h"
#include "tests/cow_test.h"

/* Run the offline checker; fail the test on any problem. */
static void report_line(void *opaque, const char *msg)
{
	fprintf(stderr, "cow_check: %s\n", msg);
}

static struct cow_check_result check_clean(const char *path, const char *when)
{
	struct cow_check_result r;
	int ret = cow_check(path, COW_CHECK_DATA, &r, report_line, NULL);

	ck_assert_msg(ret == 0, "%s: the checker ran (got %d)", when, ret);
	ck_assert_msg(r.errors == 0,
		      "%s: the image is consistent (%llu problems, %llu leaked)",
		      when, (unsigned long long)r.errors,
		      (unsigned long long)r.leaked);
	return r;
}

/* ---- the reference model ---- */

enum model_op { OP_WRITE, OP_READ, OP_DISCARD, OP_ZEROES, OP_FLUSH,
		OP_REOPEN, OP_NR };

static void model_run(uint8_t csum_type, uint64_t size, unsigned int steps,
		      unsigned int salt)
{
	char *path = cow_test_image(size, csum_type);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *model = g_malloc0(size);
	size_t cap = 300 * KiB;
	unsigned char *buf = g_malloc(cap), *back = g_malloc(cap);
	unsigned int counts[OP_NR] = { 0 }, k;
	struct test_rng rng;

	test_rng_init(&rng, salt);
	for (k = 0; k < steps; k++) {
		uint64_t r = test_rng_range(&rng, 0, 99);
		enum model_op op = r < 45 ? OP_WRITE : r < 75 ? OP_READ :
				   r < 83 ? OP_DISCARD : r < 90 ? OP_ZEROES :
				   r < 97 ? OP_FLUSH : OP_REOPEN;
		size_t len = (size_t)test_rng_range(&rng, 1, cap);
		uint64_t pos;

		/* Half the requests block aligned. */
		if (test_rng_next(&rng) % 2)
			len = (len + 4095) & ~(size_t)4095;
		len = MIN(len, cap);
		pos = test_rng_range(&rng, 0, size - len);
		if (test_rng_next(&rng) % 2)
			pos &= ~(uint64_t)4095;
		counts[op]++;
		switch (op) {
		case OP_WRITE:
			test_rng_fill(&rng, buf, len);
			cow_test_write(b, buf, len, pos, &rng);
			memcpy(model + pos, buf, len);
			break;
		case OP_READ:
			ck_assert_msg(cow_test_read(b, back, len, pos, &rng) ==
				      (ssize_t)len,
				      "step %u: read %zu at %llu", k, len,
				      (unsigned long long)pos);
			ck_assert_msg(memcmp(back, model + pos, len) == 0,
				      "step %u: %zu bytes at %llu match the model",
				      k, len, (unsigned long long)pos);
			break;
		case OP_DISCARD:
		case OP_ZEROES:
			ck_assert_msg((op == OP_DISCARD ?
				       backend_discard(b, pos, len) :
				       backend_write_zeroes(b, pos, len)) == 0,
				      "step %u: %s of %zu at %llu", k,
				      op == OP_DISCARD ? "discard" : "write_zeroes",
				      len, (unsigned long long)pos);
			memset(model + pos, 0, len);
			break;
		case OP_FLUSH:
			ck_assert_msg(backend_flush(b) == 0, "step %u: flush",
				      k);
			break;
		case OP_REOPEN:
			backend_close(b);
			check_clean(path, "after close");
			b = cow_test_open(path, 0);
			break;
		case OP_NR:
			break;
		}
	}
	/* The whole image, after a last reopen. */
	backend_close(b);
	check_clean(path, "at the end");
	b = cow_test_open(path, 0);
	for (uint64_t pos = 0; pos < size; pos += cap) {
		size_t len = (size_t)MIN((uint64_t)cap, size - pos);

		ck_assert_msg(cow_test_read(b, back, len, pos, NULL) ==
			      (ssize_t)len &&
			      memcmp(back, model + pos, len) == 0,
			      "final sweep: %zu bytes at %llu match the model",
			      len, (unsigned long long)pos);
	}
	ck_assert_msg(cow_test_stats(b).csum_errors == 0 &&
		      cow_test_stats(b).meta_errors == 0,
		      "no checksum or metadata errors in a healthy run");
	/* Space is reused: the container stays within a small multiple of
	 * what the volume can hold. */
	ck_assert_msg(cow_test_stats(b).nr_blocks < 3 * (size / 4096) + 512,
		      "the container did not grow without bound (%llu blocks for a %llu-block volume)",
		      (unsigned long long)cow_test_stats(b).nr_blocks,
		      (unsigned long long)(size / 4096));
	backend_close(b);
	fprintf(stderr, "model: %u writes, %u reads, %u discards, %u write_zeroes, %u flushes, %u reopens\n",
		counts[OP_WRITE], counts[OP_READ], counts[OP_DISCARD],
		counts[OP_ZEROES], counts[OP_FLUSH], counts[OP_REOPEN]);
	g_free(model);
	g_free(buf);
	g_free(back);
	g_free(path);
}

START_TEST(test_cow_matches_reference_model_crc32c)
{
	model_run(COW_CSUM_CRC32C, 4 * MiB, test_iterations(1500), 1);
}
END_TEST

START_TEST(test_cow_matches_reference_model_xxhash64)
{
	model_run(COW_CSUM_XXHASH64, 4 * MiB, test_iterations(800), 2);
}
END_TEST

/* Height-2 map with several leaves and interior pages in play. */
START_TEST(test_cow_matches_reference_model_large_map)
{
	model_run(COW_CSUM_CRC32C, 40 * MiB, test_iterations(600), 3);
}
END_TEST

/* ---- a 16 TiB volume ---- */

START_TEST(test_cow_sparse_writes_across_a_16_tib_volume)
{
	uint64_t size = UINT64_C(16) << 40;
	char *path = cow_test_image(size, 0);
	struct backend *b = cow_test_open(path, 0);
	uint64_t where[] = { 0, UINT64_C(3) << 40, size / 2 + 12345,
			     size - 4096, size - 300 * KiB };
	unsigned char data[8192], back[8192];
	struct cow_check_result r;
	unsigned int i;

	for (i = 0; i < G_N_ELEMENTS(where); i++) {
		memset(data, (int)i + 1, sizeof(data));
		cow_test_write(b, data, MIN(sizeof(data), size - where[i]),
			       where[i], NULL);
	}
	ck_assert_msg(backend_flush(b) == 0, "flush");
	backend_close(b);
	r = check_clean(path, "16 TiB volume");
	ck_assert_msg(r.pages < 40,
		      "a sparse 16 TiB map costs a few pages (%llu)",
		      (unsigned long long)r.pages);
	ck_assert_msg(r.nr_blocks < 512,
		      "the container stays small (%llu blocks)",
		      (unsigned long long)r.nr_blocks);
	b = cow_test_open(path, 0);
	for (i = 0; i < G_N_ELEMENTS(where); i++) {
		size_t len = MIN(sizeof(data), size - where[i]);

		memset(data, (int)i + 1, sizeof(data));
		ck_assert_msg(cow_test_read(b, back, len, where[i], NULL) ==
			      (ssize_t)len && memcmp(back, data, len) == 0,
			      "write %u at %llu reads back after reopen", i,
			      (unsigned long long)where[i]);
	}
	ck_assert_msg(cow_test_read(b, back, 8192, UINT64_C(7) << 40, NULL) ==
		      8192 && cow_test_is_zero(back, 8192),
		      "the holes between read as zeros");
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- the reuse rule ---- */

/* Write n single blocks at lbn first.. and return the largest pbn. */
static void write_blocks(struct backend *b, uint64_t first, unsigned int n,
			 GHashTable *seen)
{
	unsigned char data[4096];
	unsigned int i;

	memset(data, 0x77, sizeof(data));
	for (i = 0; i < n; i++) {
		uint64_t pbn, csum;

		cow_test_write(b, data, 4096, (first + i) * 4096, NULL);
		ck_assert_msg(cow_map_block(b, first + i, &pbn, &csum) == 0 &&
			      pbn, "block %llu is mapped",
			      (unsigned long long)(first + i));
		if (seen)
			g_hash_table_add(seen, g_memdup2(&pbn, sizeof(pbn)));
	}
}

static bool seen_has(GHashTable *seen, uint64_t pbn)
{
	return g_hash_table_contains(seen, &pbn);
}

START_TEST(test_cow_freed_blocks_are_reused_only_after_the_next_commit)
{
	char *path = cow_test_image(16 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal,
						 g_free, NULL);
	unsigned char data[4096];
	uint64_t p1, p2, csum, nr;

	memset(data, 1, sizeof(data));
	cow_test_write(b, data, 4096, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush: generation 2 maps block 0");
	ck_assert_msg(cow_map_block(b, 0, &p1, &csum) == 0 && p1, "mapped");
	/* Overwrite: p1 is still part of generation 2. */
	cow_test_write(b, data, 4096, 0, NULL);
	ck_assert_msg(cow_map_block(b, 0, &p2, &csum) == 0 && p2 != p1,
		      "the overwrite went elsewhere");
	write_blocks(b, 100, 50, seen);
	ck_assert_msg(!seen_has(seen, p1),
		      "before the commit that frees it, block %llu is not reused",
		      (unsigned long long)p1);
	ck_assert_msg(backend_flush(b) == 0, "flush: generation 3 frees p1");
	write_blocks(b, 200, 50, seen);
	ck_assert_msg(!seen_has(seen, p1),
		      "freed in generation 3, block %llu is not reused before generation 4 is durable",
		      (unsigned long long)p1);
	ck_assert_msg(backend_flush(b) == 0, "flush: generation 4");
	/* Now reusable: writes take free blocks before growing. */
	nr = cow_test_stats(b).nr_blocks;
	g_hash_table_remove_all(seen);
	write_blocks(b, 300, 64, seen);
	ck_assert_msg(seen_has(seen, p1),
		      "after generation 4 is durable, block %llu is reused",
		      (unsigned long long)p1);
	ck_assert_msg(cow_test_stats(b).nr_blocks < nr + 64,
		      "and the container grew less than the 64 blocks written (%llu -> %llu)",
		      (unsigned long long)nr,
		      (unsigned long long)cow_test_stats(b).nr_blocks);
	backend_close(b);
	check_clean(path, "after the reuse test");
	g_hash_table_destroy(seen);
	g_free(path);
}
END_TEST

START_TEST(test_cow_after_reopen_free_blocks_are_reused_at_once)
{
	char *path = cow_test_image(16 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *data = g_malloc0(MiB);
	uint64_t nr, gen;

	cow_test_write(b, data, MiB, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	ck_assert_msg(backend_discard(b, 0, MiB) == 0, "discard 1 MiB");
	backend_close(b);	/* commits: 256 blocks freed */
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	gen = cow_test_stats(b).generation;
	backend_close(b);
	b = cow_test_open(path, 0);
	ck_assert_msg(cow_test_stats(b).generation == gen + 1,
		      "a writable open committed a new generation, retiring the older superblock");
	nr = cow_test_stats(b).nr_blocks;
	cow_test_write(b, data, 64 * KiB, 2 * MiB, NULL);
	ck_assert_msg(cow_test_stats(b).nr_blocks == nr,
		      "right after open, writes reuse freed blocks (%llu -> %llu)",
		      (unsigned long long)nr,
		      (unsigned long long)cow_test_stats(b).nr_blocks);
	backend_close(b);
	check_clean(path, "after the reopen test");
	g_free(data);
	g_free(path);
}
END_TEST

/* A request that started before an overwrite (it may be reading the old
 * block) keeps that block from being reused until it ends, whatever the
 * commits in between.  White box: the epoch is entered by hand. */
START_TEST(test_cow_read_in_flight_keeps_its_block_pinned)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	struct cow_container *img = ((struct cow_volume *)b->priv)->c;
	unsigned char data[4096];
	struct cow_epoch *reader;
	uint64_t p1, csum;
	int i;

	memset(data, 1, sizeof(data));
	cow_test_write(b, data, 4096, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	ck_assert_msg(cow_map_block(b, 0, &p1, &csum) == 0 && p1, "mapped");
	reader = cow_epoch_enter(img);
	cow_test_write(b, data, 4096, 0, NULL);	/* unmaps p1 */
	for (i = 0; i < 3; i++) {
		cow_test_write(b, data, 4096, 4096 * (uint64_t)(10 + i), NULL);
		ck_assert_msg(backend_flush(b) == 0, "flush %d", i);
	}
	ck_assert_msg(cow_alloc_refcount(&img->alloc, p1) == 0 &&
		      cow_alloc_is_pinned(&img->alloc, p1),
		      "three commits later p1 is free on disk but still pinned for the running request");
	cow_epoch_leave(img, reader);
	cow_test_write(b, data, 4096, 4096 * 20, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	ck_assert_msg(!cow_alloc_is_pinned(&img->alloc, p1),
		      "once the request ended, the next commit releases p1");
	backend_close(b);
	g_free(path);
}
END_TEST

/* Rewrite the refcount entry of block 2 in a fresh image's refcount
 * leaf (block 3, generation 1) with a valid page checksum. */
static void set_fresh_refcount(const char *path, uint32_t count)
{
	struct cow_page_hdr hdr = {
		.tree = COW_TREE_REFCOUNT, .level = 0,
		.nr_entries = COW_RC_ENTRIES, .generation = 1, .pbn = 3,
	};
	unsigned char page[4096];
	int fd = open(path, O_RDWR);

	ck_assert_msg(fd >= 0 && pread(fd, page, 4096, 3 * 4096) == 4096,
		      "read the refcount leaf");
	memcpy(hdr.uuid, page + 48, 16);
	cow_rc_set(page, 2, count);
	cow_page_seal(page, &hdr);
	ck_assert_msg(pwrite(fd, page, 4096, 3 * 4096) == 4096, "write it");
	close(fd);
}

START_TEST(test_cow_checker_finds_leaks_bad_counts_and_corrupt_pages)
{
	char *path = cow_test_image(MiB, 0);
	struct cow_check_result r;

	r = check_clean(path, "a fresh image");
	ck_assert_msg(r.generation == 1 && r.nr_blocks == 4 &&
		      r.used_blocks == 4 && r.pages == 2 && r.volumes == 1,
		      "a fresh image: generation 1, 4 blocks all used, 2 pages, 1 volume");
	set_fresh_refcount(path, 2);
	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) == 0 &&
		      r.leaked == 1 && r.errors == 1,
		      "a count above the references is one leak (%llu leaked, %llu problems)",
		      (unsigned long long)r.leaked,
		      (unsigned long long)r.errors);
	set_fresh_refcount(path, 0);
	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) == 0 &&
		      r.leaked == 0 && r.errors >= 2,
		      "a count below the references is found, and so is the wrong used count (%llu problems)",
		      (unsigned long long)r.errors);
	set_fresh_refcount(path, 1);
	check_clean(path, "repaired");
	cow_test_file_xor(path, 2 * 4096 + 1000, 0xff);
	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) == 0 && r.errors > 0,
		      "a corrupt volume page is found (%llu problems)",
		      (unsigned long long)r.errors);
	cow_test_file_xor(path, 0 * 4096 + 10, 0xff);
	cow_test_file_xor(path, 1 * 4096 + 10, 0xff);
	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) == -EUCLEAN,
		      "with no good superblock the check cannot run: -EUCLEAN");
	g_free(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_model");
	TCase *model = tcase_create("model");
	TCase *big = tcase_create("big");
	TCase *reuse = tcase_create("reuse");

	tcase_set_timeout(model, 600);
	tcase_add_test(model, test_cow_matches_reference_model_crc32c);
	tcase_add_test(model, test_cow_matches_reference_model_xxhash64);
	tcase_add_test(model, test_cow_matches_reference_model_large_map);
	suite_add_tcase(s, model);

	tcase_set_timeout(big, 300);
	tcase_add_test(big, test_cow_sparse_writes_across_a_16_tib_volume);
	suite_add_tcase(s, big);

	tcase_set_timeout(reuse, 300);
	tcase_add_test(reuse, test_cow_freed_blocks_are_reused_only_after_the_next_commit);
	tcase_add_test(reuse, test_cow_after_reopen_free_blocks_are_reused_at_once);
	tcase_add_test(reuse, test_cow_read_in_flight_keeps_its_block_pinned);
	tcase_add_test(reuse, test_cow_checker_finds_leaks_bad_counts_and_corrupt_pages);
	suite_add_tcase(s, reuse);

	return test_run_suite(s);
}
