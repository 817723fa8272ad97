/* SPDX-License-Identifier: MIT */
/*
 * Damaged cow images: bits flipped in data blocks read as -EIO exactly
 * there (and are counted); random damage anywhere (superblocks, pages,
 * data) never crashes, hangs or reads out of bounds - open, read, write,
 * flush, close and the offline checker all return (run it under ASan and
 * valgrind); and one writer per image.
 */
#include "backends/cow/check.h"
#include "tests/cow_test.h"

#include <sys/file.h>

/* A populated 4 MiB image: writes over several commits, some discards. */
static char *populated_image(unsigned int salt)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *buf = g_malloc(256 * KiB);
	struct test_rng rng;
	int i;

	test_rng_init(&rng, salt);
	for (i = 0; i < 30; i++) {
		size_t len = (size_t)test_rng_range(&rng, 1, 256 * KiB);
		uint64_t pos = test_rng_range(&rng, 0, 4 * MiB - len);

		test_rng_fill(&rng, buf, len);
		ck_assert_msg(backend_pwrite(b, buf, len, pos) == (ssize_t)len,
			      "populate: write %d", i);
		if (i % 7 == 3)
			ck_assert_msg(backend_discard(b, pos, len / 2) == 0,
				      "populate: discard");
		if (i % 5 == 4)
			ck_assert_msg(backend_flush(b) == 0, "populate: flush");
	}
	backend_close(b);
	g_free(buf);
	return path;
}

static void copy_file(const char *from, const char *to)
{
	gchar *data;
	gsize len;

	ck_assert_msg(g_file_get_contents(from, &data, &len, NULL),
		      "read %s", from);
	ck_assert_msg(g_file_set_contents(to, data, (gssize)len, NULL),
		      "write %s", to);
	g_free(data);
}

START_TEST(test_cow_damaged_data_blocks_read_eio_exactly_there)
{
	enum { NB = 200 };
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char data[4096], back[4096];
	bool damaged[NB] = { false };
	uint64_t pbn[NB], csum, nr_damaged = 0;
	struct cow_check_result r;
	struct test_rng rng;
	unsigned int i;

	test_rng_init(&rng, 1);
	for (i = 0; i < NB; i++) {
		memset(data, (int)i, sizeof(data));
		cow_test_write(b, data, 4096, (uint64_t)i * 4096 * 3, NULL);
	}
	ck_assert_msg(backend_flush(b) == 0, "flush");
	for (i = 0; i < NB; i++)
		ck_assert_msg(cow_map_block(b, (uint64_t)i * 3, &pbn[i], &csum) ==
			      0 && pbn[i], "block %u is mapped", i);
	backend_close(b);
	for (i = 0; i < NB; i++) {
		if (test_rng_range(&rng, 0, 9))
			continue;
		damaged[i] = true;
		nr_damaged++;
		cow_test_file_xor(path, pbn[i] * 4096 +
				  test_rng_range(&rng, 0, 4095),
				  (uint8_t)(1u << test_rng_range(&rng, 0, 7)));
	}
	ck_assert_msg(cow_check(path, 0, &r, NULL, NULL) == 0 && r.errors == 0,
		      "the metadata is still consistent");
	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) == 0 &&
		      r.bad_data == nr_damaged && r.errors == nr_damaged,
		      "an offline scrub finds exactly the %llu damaged blocks (%llu)",
		      (unsigned long long)nr_damaged,
		      (unsigned long long)r.bad_data);
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	for (i = 0; i < NB; i++) {
		ssize_t n = cow_test_read(b, back, 4096, (uint64_t)i * 4096 * 3,
					  NULL);

		memset(data, (int)i, sizeof(data));
		if (damaged[i])
			ck_assert_msg(n == -EIO,
				      "damaged block %u reads -EIO (got %zd)",
				      i, n);
		else
			ck_assert_msg(n == 4096 && !memcmp(back, data, 4096),
				      "undamaged block %u reads its data", i);
	}
	ck_assert_msg(cow_test_stats(b).csum_errors == nr_damaged,
		      "each damaged block was counted once (%llu of %llu)",
		      (unsigned long long)cow_test_stats(b).csum_errors,
		      (unsigned long long)nr_damaged);
	backend_close(b);
	g_free(path);
}
END_TEST

/* Everything one can do with a damaged image: nothing may crash. */
static void exercise(const char *path, struct test_rng *rng)
{
	unsigned char *buf = g_malloc(64 * KiB);
	struct cow_check_result r;
	struct backend *b;
	uint64_t pos;
	int k;

	(void)cow_check(path, COW_CHECK_DATA, &r, NULL, NULL);
	if (cow_test_try_open(path, BACKEND_OPEN_RDONLY, &b) == 0) {
		for (pos = 0; pos < 4 * MiB; pos += 64 * KiB)
			(void)backend_pread(b, buf, 64 * KiB, pos);
		backend_close(b);
	}
	if (cow_test_try_open(path, 0, &b) == 0) {
		cow_set_commit_interval(b, 0);
		for (k = 0; k < 8; k++) {
			size_t len = (size_t)test_rng_range(rng, 1, 64 * KiB);

			pos = test_rng_range(rng, 0, 4 * MiB - len);
			test_rng_fill(rng, buf, len);
			(void)backend_pwrite(b, buf, len, pos);
			(void)backend_pread(b, buf, len, pos);
			if (k == 4)
				(void)backend_discard(b, pos, len);
		}
		(void)backend_flush(b);
		backend_close(b);
		(void)cow_check(path, COW_CHECK_DATA, &r, NULL, NULL);
	}
	g_free(buf);
}

START_TEST(test_cow_random_damage_never_crashes)
{
	char *orig = populated_image(2);
	char *dir = g_path_get_dirname(orig);
	char *copy = g_build_filename(dir, "damaged.cow", NULL);
	uint64_t nblocks = cow_test_file_size(orig) / 4096;
	struct test_rng rng;
	unsigned int k, j;

	test_rng_init(&rng, 3);
	for (k = 0; k < test_iterations(100); k++) {
		unsigned int flips = (unsigned int)test_rng_range(&rng, 1, 8);

		copy_file(orig, copy);
		for (j = 0; j < flips; j++) {
			/* Mostly superblocks and the first blocks (pages
			 * are dense there), anywhere otherwise. */
			uint64_t blk = test_rng_range(&rng, 0, 3) ?
				test_rng_range(&rng, 0, MIN(nblocks, 64) - 1) :
				test_rng_range(&rng, 0, nblocks - 1);
			uint64_t off = blk * 4096 +
				       (test_rng_next(&rng) % 2 ?
					test_rng_range(&rng, 0, 511) :
					test_rng_range(&rng, 0, 4095));

			cow_test_file_xor(copy, off,
					  (uint8_t)test_rng_range(&rng, 1, 255));
		}
		exercise(copy, &rng);
	}
	g_free(copy);
	g_free(dir);
	g_free(orig);
}
END_TEST

/* Flip bytes in block blk of path past its header and checksum, then
 * make its checksum valid again (a page or a superblock): the damage
 * then reaches the field-by-field validation. */
static void damage_resealed(const char *path, uint64_t blk,
			    struct test_rng *rng)
{
	unsigned char p[4096];
	int fd = open(path, O_RDWR), j;

	ck_assert_msg(fd >= 0 && pread(fd, p, 4096, (off_t)(blk * 4096)) == 4096,
		      "read block %llu", (unsigned long long)blk);
	for (j = 0; j < 1 + (int)test_rng_range(rng, 0, 3); j++) {
		size_t at = memcmp(p, "DLMP", 4) == 0 ?
			    test_rng_range(rng, 4, 4095) :
			    test_rng_range(rng, 8, COW_SB_CSUM_OFF - 1);
		/* Small numbers (lengths, counts, pbns) stay plausible. */
		p[at] = test_rng_next(rng) % 2 ? (uint8_t)test_rng_range(rng, 0, 8) :
						 (uint8_t)test_rng_next(rng);
	}
	if (memcmp(p, "DLMP", 4) == 0) {
		struct cow_page_hdr h = {
			.tree = p[4], .level = p[5],
			.nr_entries = (uint16_t)(p[6] | p[7] << 8),
			.generation = cow_get_le64(p + 16),
			.pbn = cow_get_le64(p + 24),
			.first_key = cow_get_le64(p + 32),
			.owner = cow_get_le64(p + 40),
		};

		memcpy(h.uuid, p + 48, 16);
		cow_page_seal(p, &h);
	} else if (cow_sb_has_magic(p)) {
		cow_put_le32(p + COW_SB_CSUM_OFF,
			     cow_crc32c(p, COW_SB_CSUM_OFF));
	}
	ck_assert_msg(pwrite(fd, p, 4096, (off_t)(blk * 4096)) == 4096,
		      "write block");
	close(fd);
}

START_TEST(test_cow_resealed_damage_never_crashes)
{
	char *orig = populated_image(6);
	char *dir = g_path_get_dirname(orig);
	char *copy = g_build_filename(dir, "resealed.cow", NULL);
	uint64_t nblocks = cow_test_file_size(orig) / 4096;
	struct test_rng rng;
	unsigned int k, j;

	GArray *meta = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	unsigned char p[4096];
	uint64_t blk;
	int fd;

	/* The superblocks and every metadata page of the image. */
	fd = open(orig, O_RDONLY);
	ck_assert_msg(fd >= 0, "open");
	for (blk = 0; blk < nblocks; blk++) {
		ck_assert_msg(pread(fd, p, 4096, (off_t)(blk * 4096)) == 4096,
			      "read");
		if (blk < 2 || !memcmp(p, "DLMP", 4))
			g_array_append_val(meta, blk);
	}
	close(fd);
	ck_assert_msg(meta->len > 4, "the image has metadata pages (%u)",
		      meta->len);
	test_rng_init(&rng, 7);
	for (k = 0; k < test_iterations(200); k++) {
		copy_file(orig, copy);
		for (j = 0; j < 1 + k % 3; j++) {
			blk = test_rng_range(&rng, 0, 4) ?
			      g_array_index(meta, uint64_t,
					    test_rng_range(&rng, 0, meta->len - 1)) :
			      test_rng_range(&rng, 0, nblocks - 1);
			damage_resealed(copy, blk, &rng);
		}
		exercise(copy, &rng);
	}
	g_array_free(meta, TRUE);
	g_free(copy);
	g_free(dir);
	g_free(orig);
}
END_TEST

START_TEST(test_cow_truncated_at_any_block_never_crashes)
{
	char *orig = populated_image(4);
	char *dir = g_path_get_dirname(orig);
	char *copy = g_build_filename(dir, "short.cow", NULL);
	uint64_t nblocks = cow_test_file_size(orig) / 4096, cut;
	struct test_rng rng;
	unsigned int k;

	test_rng_init(&rng, 5);
	for (k = 0; k < test_iterations(40); k++) {
		copy_file(orig, copy);
		cut = test_rng_range(&rng, 0, nblocks * 4096 - 1);
		ck_assert_msg(truncate(copy, (off_t)cut) == 0, "truncate");
		exercise(copy, &rng);
	}
	g_free(copy);
	g_free(dir);
	g_free(orig);
}
END_TEST

START_TEST(test_cow_one_writer_per_image)
{
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, 0), *b2 = NULL;

	int fd;

	ck_assert_msg(cow_test_try_open(path, 0, &b2) == -EBUSY,
		      "a second writable open is refused with -EBUSY");
	/* In one process, a volume is open once (its container is shared
	 * by the volumes open in the process). */
	ck_assert_msg(cow_test_try_open(path, BACKEND_OPEN_RDONLY, &b2) ==
		      -EBUSY,
		      "a second open of the same volume in the process is refused with -EBUSY");
	/* Other processes: the writer holds an exclusive flock. */
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 &&
		      errno == EWOULDBLOCK,
		      "the writer holds the image's exclusive lock");
	close(fd);
	backend_close(b);
	ck_assert_msg(cow_test_try_open(path, BACKEND_OPEN_RDONLY, &b2) == 0,
		      "a read-only open is allowed");
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0,
		      "a read-only open takes no lock");
	close(fd);
	backend_close(b2);
	b = cow_test_open(path, 0);
	backend_close(b);
	g_free(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_corrupt");
	TCase *data = tcase_create("data");
	TCase *fuzz = tcase_create("fuzz");

	tcase_set_timeout(data, 300);
	tcase_add_test(data, test_cow_damaged_data_blocks_read_eio_exactly_there);
	tcase_add_test(data, test_cow_one_writer_per_image);
	suite_add_tcase(s, data);

	tcase_set_timeout(fuzz, 900);
	tcase_add_test(fuzz, test_cow_random_damage_never_crashes);
	tcase_add_test(fuzz, test_cow_resealed_damage_never_crashes);
	tcase_add_test(fuzz, test_cow_truncated_at_any_block_never_crashes);
	suite_add_tcase(s, fuzz);

	return test_run_suite(s);
}
