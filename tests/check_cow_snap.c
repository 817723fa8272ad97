/* SPDX-License-Identifier: MIT */
/*
 * Snapshots, clones, volume deletion, clone_range and scrub of the cow
 * backend (FORMAT.md section 8): data seen by each volume, independence,
 * exact reference counts (the offline checker after every step), space
 * freed by deletions, volumes open together, point-in-time snapshots
 * under a concurrent writer, shared blocks found bad by the scrub, and
 * the refusals (names, -EBUSY, -ENOENT, -EEXIST, -EROFS).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/file.h>

#include "backends/cow/check.h"
#include "tests/cow_test.h"

#define VOL_SIZE (4 * MiB)
#define VOL_BLOCKS (VOL_SIZE / 4096)

static void report_line(void *opaque, const char *msg)
{
	(void)opaque;
	fprintf(stderr, "cow_check: %s\n", msg);
}

/* The offline checker finds nothing: exact counts, valid pages. */
static struct cow_check_result check_clean(const char *path,
					   unsigned int flags,
					   const char *when)
{
	struct cow_check_result r;
	int ret = cow_check(path, flags, &r, report_line, NULL);

	ck_assert_msg(ret == 0, "%s: the checker ran (got %d)", when, ret);
	ck_assert_msg(r.errors == 0,
		      "%s: the image is consistent with exact reference counts (%llu problems, %llu leaked)",
		      when, (unsigned long long)r.errors,
		      (unsigned long long)r.leaked);
	return r;
}

static int try_open_vol(const char *path, const char *name,
			unsigned int flags, struct backend **out)
{
	struct backend_open_args args = { .path = path, .flags = flags,
					  .volume = name };
	int ret = backend_open("cow", &args, out);

	if (!ret)
		cow_set_commit_interval(*out, 0);
	return ret;
}

static struct backend *open_vol(const char *path, const char *name,
				unsigned int flags)
{
	struct backend *b = NULL;
	int ret = try_open_vol(path, name, flags, &b);

	ck_assert_msg(ret == 0, "open volume \"%s\" of %s: expected 0, got %d",
		      name ? name : "", path, ret);
	return b;
}

/* Block lbn as written with tag: every 8 bytes say (tag, lbn). */
static void fill_block(uint8_t *blk, uint32_t tag, uint64_t lbn)
{
	uint64_t w = (uint64_t)tag << 40 | lbn, i;

	for (i = 0; i < 4096 / 8; i++)
		memcpy(blk + i * 8, &w, 8);
}

/* Write blocks [first, first + n) with tag. */
static void write_tagged(struct backend *b, uint64_t first, uint64_t n,
			 uint32_t tag)
{
	uint8_t *buf = g_malloc(n * 4096);
	uint64_t i;

	for (i = 0; i < n; i++)
		fill_block(buf + i * 4096, tag, first + i);
	cow_test_write(b, buf, n * 4096, first * 4096, NULL);
	g_free(buf);
}

/* The tag of block lbn (0: zeros), asserting the block is whole. */
static uint32_t read_tag(struct backend *b, uint64_t lbn)
{
	uint8_t blk[4096], want[4096];
	uint64_t w;
	uint32_t tag;

	ck_assert_msg(cow_test_read(b, blk, 4096, lbn * 4096, NULL) == 4096,
		      "read block %llu", (unsigned long long)lbn);
	if (cow_test_is_zero(blk, 4096))
		return 0;
	memcpy(&w, blk, 8);
	tag = (uint32_t)(w >> 40);
	fill_block(want, tag, lbn);
	ck_assert_msg(memcmp(blk, want, 4096) == 0,
		      "block %llu holds one whole write (tag %u), not a mix",
		      (unsigned long long)lbn, tag);
	return tag;
}

/* Blocks [first, first + n) all have tag. */
static void expect_tags(struct backend *b, uint64_t first, uint64_t n,
			uint32_t tag, const char *what)
{
	uint64_t i;

	for (i = first; i < first + n; i++) {
		uint32_t got = read_tag(b, i);

		ck_assert_msg(got == tag, "%s: block %llu has tag %u, expected %u",
			      what, (unsigned long long)i, got, tag);
	}
}

static void flush_ok(struct backend *b)
{
	ck_assert_msg(backend_flush(b) == 0, "flush");
}

/* ---- snapshots and clones ---- */

START_TEST(test_cow_snap_snapshot_keeps_old_data_origin_gets_new)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *s;
	struct cow_tbuf *t;
	int round;

	/* 600 blocks: several leaves of a height-2 map. */
	write_tagged(b, 0, 600, 1);
	ck_assert_msg(cow_snapshot(b, "s1", false) == 0, "snapshot s1");
	check_clean(path, COW_CHECK_DATA, "after the snapshot");
	write_tagged(b, 100, 300, 2);
	write_tagged(b, 900, 10, 2);
	ck_assert_msg(backend_discard(b, 0, 50 * 4096) == 0, "discard");
	flush_ok(b);
	check_clean(path, COW_CHECK_DATA, "after overwriting the origin");
	for (round = 0; round < 2; round++) {
		s = open_vol(path, "s1", 0);
		expect_tags(s, 0, 600, 1, "snapshot");
		expect_tags(s, 600, 400, 0, "snapshot's holes");
		expect_tags(b, 0, 50, 0, "origin, discarded");
		expect_tags(b, 50, 50, 1, "origin, untouched");
		expect_tags(b, 100, 300, 2, "origin, overwritten");
		expect_tags(b, 400, 200, 1, "origin, untouched");
		expect_tags(b, 900, 10, 2, "origin, new");
		/* A snapshot opens read-only whatever the flags. */
		t = cow_tbuf_new(4096, 0, NULL);
		ck_assert_msg(cow_test_rw(s, DIOLOOP_WRITE, t, 0) == -EROFS,
			      "a write to a snapshot: -EROFS");
		cow_tbuf_free(t);
		ck_assert_msg(backend_discard(s, 0, 4096) == -EROFS &&
			      backend_resize(s, 8 * MiB) == -EROFS,
			      "discard and resize of a snapshot: -EROFS");
		backend_close(s);
		/* Reopen both, the origin last closed. */
		backend_close(b);
		check_clean(path, COW_CHECK_DATA, "closed");
		b = open_vol(path, NULL, 0);
	}
	backend_close(b);
	g_free(path);
}
END_TEST

START_TEST(test_cow_snap_clone_is_writable_and_independent)
{
	char *path = cow_test_image(VOL_SIZE, COW_CSUM_XXHASH64);
	struct backend *b = open_vol(path, NULL, 0), *c;

	write_tagged(b, 0, 300, 1);
	flush_ok(b);
	ck_assert_msg(cow_snapshot(b, "c1", true) == 0, "clone c1");
	c = open_vol(path, "c1", 0);
	expect_tags(c, 0, 300, 1, "clone at creation");
	write_tagged(c, 0, 100, 3);		/* clone changes */
	write_tagged(b, 50, 100, 2);		/* origin changes, overlapping */
	write_tagged(c, 700, 5, 3);
	flush_ok(c);
	check_clean(path, COW_CHECK_DATA, "both written");
	expect_tags(b, 0, 50, 1, "origin");
	expect_tags(b, 50, 100, 2, "origin");
	expect_tags(b, 150, 150, 1, "origin");
	expect_tags(b, 700, 5, 0, "origin does not see the clone's writes");
	expect_tags(c, 0, 100, 3, "clone");
	expect_tags(c, 100, 200, 1, "clone does not see the origin's writes");
	expect_tags(c, 700, 5, 3, "clone");
	backend_close(c);
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");
	c = open_vol(path, "c1", 0);
	b = open_vol(path, NULL, BACKEND_OPEN_RDONLY);
	expect_tags(c, 0, 100, 3, "clone after reopen");
	expect_tags(c, 100, 200, 1, "clone after reopen");
	expect_tags(b, 50, 100, 2, "origin after reopen");
	backend_close(b);
	backend_close(c);
	g_free(path);
}
END_TEST

START_TEST(test_cow_snap_snapshot_of_a_clone)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *c, *cs, *ss;

	write_tagged(b, 0, 400, 1);
	ck_assert_msg(cow_snapshot(b, "c1", true) == 0, "clone c1");
	c = open_vol(path, "c1", 0);
	write_tagged(c, 200, 100, 2);
	ck_assert_msg(cow_snapshot(c, "c1-snap", false) == 0,
		      "snapshot of the clone (its writes not flushed yet)");
	write_tagged(c, 250, 100, 3);
	write_tagged(b, 0, 400, 4);
	flush_ok(b);
	check_clean(path, COW_CHECK_DATA, "after writes over everything");
	cs = open_vol(path, "c1-snap", 0);
	expect_tags(cs, 0, 200, 1, "snapshot of the clone");
	expect_tags(cs, 200, 100, 2, "snapshot of the clone");
	expect_tags(cs, 300, 100, 1, "snapshot of the clone");
	/* A snapshot of a snapshot, and a clone of it. */
	ck_assert_msg(cow_snapshot(cs, "c1-snap-snap", false) == 0 &&
		      cow_snapshot(cs, "c1-snap-clone", true) == 0,
		      "snapshot and clone of a snapshot");
	ss = open_vol(path, "c1-snap-clone", 0);
	write_tagged(ss, 0, 10, 5);
	expect_tags(cs, 0, 10, 1, "the snapshot under its clone");
	backend_close(ss);
	backend_close(cs);
	backend_close(c);
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");
	b = open_vol(path, "c1-snap-snap", 0);
	expect_tags(b, 200, 100, 2, "snapshot of a snapshot after reopen");
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- deletion and space ---- */

START_TEST(test_cow_snap_delete_frees_exactly_the_unshared_blocks)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0);
	struct cow_check_result r1, r2;
	uint64_t used1, used2;

	write_tagged(b, 0, 800, 1);
	ck_assert_msg(cow_snapshot(b, "s", false) == 0, "snapshot");
	/* 120 blocks the snapshot alone keeps. */
	write_tagged(b, 300, 120, 2);
	flush_ok(b);
	r1 = check_clean(path, 0, "before the delete");
	used1 = cow_test_stats(b).used_blocks;
	ck_assert_msg(r1.used_blocks == used1,
		      "the checker and the backend agree on blocks in use (%llu, %llu)",
		      (unsigned long long)r1.used_blocks,
		      (unsigned long long)used1);
	ck_assert_msg(cow_delete_volume(b, "s") == 0, "delete the snapshot");
	r2 = check_clean(path, 0, "after the delete");
	used2 = cow_test_stats(b).used_blocks;
	ck_assert_msg(r2.data_blocks == r1.data_blocks - 120,
		      "exactly the 120 overwritten data blocks were freed (%llu -> %llu)",
		      (unsigned long long)r1.data_blocks,
		      (unsigned long long)r2.data_blocks);
	ck_assert_msg(r2.volumes == 1 && r1.volumes == 2, "one volume left");
	ck_assert_msg(used1 - used2 == 120 + (r1.pages - r2.pages),
		      "used blocks dropped by the unshared data and map pages (%llu -> %llu, pages %llu -> %llu)",
		      (unsigned long long)used1, (unsigned long long)used2,
		      (unsigned long long)r1.pages,
		      (unsigned long long)r2.pages);
	expect_tags(b, 0, 300, 1, "origin after the delete");
	expect_tags(b, 300, 120, 2, "origin after the delete");
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");
	ck_assert_msg(try_open_vol(path, "s", 0, &b) == -ENOENT,
		      "the deleted volume is gone");
	g_free(path);
}
END_TEST

START_TEST(test_cow_snap_delete_clone_after_origin_rewrote_everything)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *c;
	struct cow_check_result r;
	uint64_t used;

	write_tagged(b, 0, VOL_BLOCKS, 1);
	ck_assert_msg(cow_snapshot(b, "c", true) == 0, "clone");
	c = open_vol(path, "c", 0);
	write_tagged(c, 10, 20, 3);
	backend_close(c);
	write_tagged(b, 0, VOL_BLOCKS, 2);
	flush_ok(b);
	r = check_clean(path, 0, "origin rewritten");
	ck_assert_msg(r.data_blocks == 2 * VOL_BLOCKS,
		      "origin and clone hold separate blocks (%llu)",
		      (unsigned long long)r.data_blocks);
	used = cow_test_stats(b).used_blocks;
	ck_assert_msg(cow_delete_volume(b, "c") == 0, "delete the clone");
	r = check_clean(path, COW_CHECK_DATA, "clone deleted");
	ck_assert_msg(r.data_blocks == VOL_BLOCKS,
		      "every block of the clone was freed (%llu data blocks left)",
		      (unsigned long long)r.data_blocks);
	ck_assert_msg(used - cow_test_stats(b).used_blocks >= VOL_BLOCKS,
		      "used blocks dropped by at least the clone's data");
	expect_tags(b, 0, VOL_BLOCKS, 2, "origin");
	/* Freed blocks are reused: writing again does not grow much. */
	{
		uint64_t nr;

		/* One more commit: what the deletion freed is reusable. */
		write_tagged(b, 0, 1, 2);
		flush_ok(b);
		nr = cow_test_stats(b).nr_blocks;
		write_tagged(b, 0, VOL_BLOCKS, 3);
		flush_ok(b);
		ck_assert_msg(cow_test_stats(b).nr_blocks <= nr + 16,
			      "the freed space is reused (%llu -> %llu blocks)",
			      (unsigned long long)nr,
			      (unsigned long long)cow_test_stats(b).nr_blocks);
	}
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");
	g_free(path);
}
END_TEST

START_TEST(test_cow_snap_resize_a_clone)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *c;

	write_tagged(b, 0, VOL_BLOCKS, 1);
	ck_assert_msg(cow_snapshot(b, "c", true) == 0, "clone");
	c = open_vol(path, "c", 0);
	ck_assert_msg(backend_resize(c, MiB + 8192) == 0, "shrink the clone");
	flush_ok(c);
	check_clean(path, COW_CHECK_DATA, "clone shrunk");
	/* Past a height-2 map: a new root over shared pages. */
	ck_assert_msg(backend_resize(c, 200 * MiB) == 0, "grow the clone");
	write_tagged(c, 100, 10, 2);
	write_tagged(c, 45000, 10, 2);
	flush_ok(c);
	check_clean(path, COW_CHECK_DATA, "clone grown");
	expect_tags(c, 0, 100, 1, "clone");
	expect_tags(c, 100, 10, 2, "clone");
	expect_tags(c, 110, 148, 1, "clone");
	expect_tags(c, 258, 100, 0, "clone, past the old end");
	expect_tags(c, 45000, 10, 2, "clone");
	expect_tags(b, 0, VOL_BLOCKS, 1, "origin");
	ck_assert_msg(backend_get_size(b) == (int64_t)VOL_SIZE,
		      "the origin keeps its size");
	backend_close(c);
	ck_assert_msg(cow_delete_volume(b, "c") == 0, "delete the clone");
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "clone deleted");
	g_free(path);
}
END_TEST

/* ---- two volumes open together ---- */

START_TEST(test_cow_snap_two_volumes_interleaved_writes_and_commits)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *v[2];
	uint32_t *model[2];
	struct test_rng rng;
	unsigned int k, i;

	v[0] = open_vol(path, NULL, 0);
	write_tagged(v[0], 0, VOL_BLOCKS, 1);
	ck_assert_msg(cow_snapshot(v[0], "other", true) == 0, "clone");
	v[1] = open_vol(path, "other", 0);
	for (i = 0; i < 2; i++) {
		model[i] = g_new(uint32_t, VOL_BLOCKS);
		for (k = 0; k < VOL_BLOCKS; k++)
			model[i][k] = 1;
	}
	test_rng_init(&rng, 11);
	for (k = 0; k < test_iterations(300); k++) {
		unsigned int w = (unsigned int)test_rng_range(&rng, 0, 1);
		uint64_t n = test_rng_range(&rng, 1, 40);
		uint64_t first = test_rng_range(&rng, 0, VOL_BLOCKS - n);
		uint32_t tag = 10 + k;
		uint64_t j;

		if (test_rng_range(&rng, 0, 9) == 0) {
			ck_assert_msg(backend_discard(v[w], first * 4096,
						      n * 4096) == 0, "discard");
			tag = 0;
		} else {
			write_tagged(v[w], first, n, tag);
		}
		for (j = first; j < first + n; j++)
			model[w][j] = tag;
		if (test_rng_range(&rng, 0, 9) == 0) {
			flush_ok(v[test_rng_range(&rng, 0, 1)]);
			check_clean(path, 0, "after a commit");
		}
	}
	for (i = 0; i < 2; i++)
		for (k = 0; k < VOL_BLOCKS; k++)
			ck_assert_msg(read_tag(v[i], k) == model[i][k],
				      "volume %u block %u matches its model", i,
				      k);
	backend_close(v[0]);	/* the container stays open for v[1] */
	flush_ok(v[1]);
	check_clean(path, COW_CHECK_DATA, "one closed");
	backend_close(v[1]);
	check_clean(path, COW_CHECK_DATA, "both closed");
	v[1] = open_vol(path, "other", BACKEND_OPEN_RDONLY);
	for (k = 0; k < VOL_BLOCKS; k++)
		ck_assert_msg(read_tag(v[1], k) == model[1][k],
			      "after reopen, block %u matches", k);
	backend_close(v[1]);
	g_free(model[0]);
	g_free(model[1]);
	g_free(path);
}
END_TEST

/* ---- point in time under a writer ---- */

#define PIT_BLOCKS 256u

struct pit_writer {
	struct backend *b;
	atomic_bool stop;
	_Atomic uint32_t done[PIT_BLOCKS];	/* last completed tag */
	_Atomic unsigned int writes;
};

/* Wait until *count reaches at least target: progress of another thread,
 * however slow the machine.  A thread that is stuck for good is caught
 * by the tcase timeout. */
static void wait_count(_Atomic unsigned int *count, unsigned int target)
{
	while (atomic_load(count) < target)
		g_usleep(1000);
}

static void *pit_writer_main(void *arg)
{
	struct pit_writer *w = arg;
	struct test_rng rng;
	uint32_t tag = 1;

	test_rng_init(&rng, 21);
	while (!atomic_load(&w->stop)) {
		uint64_t n = test_rng_range(&rng, 1, 8);
		uint64_t first = test_rng_range(&rng, 0, PIT_BLOCKS - n), i;

		write_tagged(w->b, first, n, ++tag);
		for (i = first; i < first + n; i++)
			atomic_store(&w->done[i], tag);
		atomic_fetch_add(&w->writes, 1);
	}
	return NULL;
}

START_TEST(test_cow_snap_snapshot_under_a_writer_is_a_point_in_time)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *s;
	struct pit_writer *w = g_new0(struct pit_writer, 1);
	uint32_t before[PIT_BLOCKS];
	unsigned int snap, i;
	pthread_t th;

	cow_set_commit_interval(b, 20);	/* commits race with everything */
	w->b = b;
	ck_assert_int_eq(pthread_create(&th, NULL, pit_writer_main, w), 0);
	for (snap = 0; snap < 8; snap++) {
		char name[16];

		/* Let the writer go on for a while, and at least two
		 * writes, whatever the machine's load. */
		g_usleep(20000);
		wait_count(&w->writes, atomic_load(&w->writes) + 2);
		for (i = 0; i < PIT_BLOCKS; i++)
			before[i] = atomic_load(&w->done[i]);
		snprintf(name, sizeof(name), "pit%u", snap);
		ck_assert_msg(cow_snapshot(b, name, false) == 0,
			      "snapshot %s under the writer", name);
		s = open_vol(path, name, 0);
		for (i = 0; i < PIT_BLOCKS; i++) {
			uint32_t tag = read_tag(s, i);

			ck_assert_msg(tag >= before[i],
				      "%s block %u: tag %u; a write completed before the snapshot had tag %u",
				      name, i, tag, before[i]);
		}
		/* Taken once: it does not change as the writer goes on
		 * (for two writes at least). */
		g_usleep(10000);
		wait_count(&w->writes, atomic_load(&w->writes) + 2);
		for (i = 0; i < PIT_BLOCKS; i += 17)
			ck_assert_msg(read_tag(s, i) >= before[i], "stable");
		backend_close(s);
	}
	atomic_store(&w->stop, true);
	pthread_join(th, NULL);
	ck_assert_msg(atomic_load(&w->writes) > 10,
		      "the writer wrote meanwhile (%u)",
		      atomic_load(&w->writes));
	cow_set_commit_interval(b, 0);
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "after the writer");
	g_free(w);
	g_free(path);
}
END_TEST

/* ---- clone_range ---- */

START_TEST(test_cow_snap_clone_range_shares_blocks)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	char *other = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *c, *o;
	uint64_t used, p1, p2, c1, c2;
	unsigned int i;

	write_tagged(b, 0, 256, 1);
	ck_assert_msg(cow_snapshot(b, "c", true) == 0, "clone");
	c = open_vol(path, "c", 0);
	flush_ok(b);
	used = cow_test_stats(b).used_blocks;
	/* Origin [0, 1 MiB) -> clone [2 MiB, 3 MiB). */
	ck_assert_msg(backend_clone_range(b, 0, c, 2 * MiB, MiB) ==
		      (ssize_t)MiB, "clone_range 1 MiB between volumes");
	/* Inside one volume, overlapping: [0, 200) -> [100, 300). */
	ck_assert_msg(backend_clone_range(b, 0, b, 100 * 4096, 200 * 4096) ==
		      (ssize_t)(200 * 4096), "overlapping clone_range");
	flush_ok(b);
	ck_assert_msg(cow_test_stats(b).used_blocks < used + 16,
		      "sharing cost map pages only (%llu -> %llu)",
		      (unsigned long long)used,
		      (unsigned long long)cow_test_stats(b).used_blocks);
	check_clean(path, COW_CHECK_DATA, "after clone_range");
	for (i = 0; i < 256; i++) {
		uint8_t want[4096], got[4096];

		ck_assert_msg(cow_map_block(b, i, &p1, &c1) == 0 &&
			      cow_map_block(c, 512 + i, &p2, &c2) == 0,
			      "map block %u", i);
		/* (The origin's blocks from 100 on were cloned over since.) */
		ck_assert_msg(i >= 100 || (p1 == p2 && c1 == c2 && p1),
			      "block %u is shared with the same checksum", i);
		fill_block(want, 1, i);
		ck_assert_msg(cow_test_read(c, got, 4096, (512 + i) * 4096,
					    NULL) == 4096 &&
			      memcmp(got, want, 4096) == 0,
			      "clone block %u reads the origin's data", 512 + i);
	}
	expect_tags(b, 0, 100, 1, "the source of the overlapping clone");
	for (i = 100; i < 300; i++) {
		uint8_t want[4096], got[4096];

		fill_block(want, 1, i - 100);
		ck_assert_msg(cow_test_read(b, got, 4096, i * 4096, NULL) ==
			      4096 && memcmp(got, want, 4096) == 0,
			      "block %u holds what block %u held (memmove)", i,
			      i - 100);
	}
	/* The copies are independent afterwards. */
	write_tagged(b, 0, 10, 7);
	{
		uint8_t want[4096], got[4096];

		fill_block(want, 1, 0);
		ck_assert_msg(cow_test_read(c, got, 4096, 2 * MiB, NULL) ==
			      4096 && memcmp(got, want, 4096) == 0,
			      "the clone keeps its block when the source changes");
	}
	/* What the core must copy itself. */
	ck_assert_msg(backend_clone_range(b, 512, c, 512, 4096) == -EOPNOTSUPP,
		      "unaligned: -EOPNOTSUPP");
	ck_assert_msg(backend_clone_range(b, 0, c, 0, 100) == -EOPNOTSUPP,
		      "less than a block: -EOPNOTSUPP");
	ck_assert_msg(backend_clone_range(b, 0, c, 0, 4096 + 100) == 4096,
		      "a partial tail: the whole blocks are cloned");
	o = open_vol(other, NULL, 0);
	ck_assert_msg(backend_clone_range(b, 0, o, 0, 4096) == -EXDEV,
		      "another container: -EXDEV");
	backend_close(o);
	ck_assert_msg(cow_snapshot(b, "ro", false) == 0, "snapshot");
	o = open_vol(path, "ro", 0);
	ck_assert_msg(backend_clone_range(b, 0, o, 0, 4096) == -EROFS,
		      "into a snapshot: -EROFS");
	ck_assert_msg(backend_clone_range(o, 0, c, 0, 8192) == 8192,
		      "out of a snapshot into a clone");
	backend_close(o);
	backend_close(c);
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");
	check_clean(other, COW_CHECK_DATA, "the other container");
	g_free(path);
	g_free(other);
}
END_TEST

/* ---- scrub ---- */

struct scrub_log {
	GArray *bad;			/* struct cow_bad_block */
	unsigned int progress_calls;
	uint64_t last_done;
};

static bool on_progress(void *opaque, const struct cow_scrub_progress *p)
{
	struct scrub_log *l = opaque;

	ck_assert_msg(p->done >= l->last_done && p->done <= p->total,
		      "progress moves forward within the total");
	l->last_done = p->done;
	l->progress_calls++;
	return true;
}

static void on_bad(void *opaque, const struct cow_bad_block *bad)
{
	struct scrub_log *l = opaque;

	g_array_append_val(l->bad, *bad);
}

static bool log_has(struct scrub_log *l, const char *vol, uint64_t lbn,
		    uint64_t pbn)
{
	guint i;

	for (i = 0; i < l->bad->len; i++) {
		struct cow_bad_block *x = &g_array_index(l->bad,
							 struct cow_bad_block, i);

		if (!strcmp(x->volume, vol) && x->lbn == lbn && x->pbn == pbn &&
		    x->error == -EBADMSG)
			return true;
	}
	return false;
}

static bool stop_at_once(void *opaque, const struct cow_scrub_progress *p)
{
	(void)opaque;
	(void)p;
	return false;
}

START_TEST(test_cow_snap_scrub_finds_exactly_the_corrupt_blocks)
{
	char *path = cow_test_image(16 * MiB, 0);
	struct backend *b = open_vol(path, NULL, 0), *s;
	struct scrub_log l = {
		.bad = g_array_new(FALSE, FALSE, sizeof(struct cow_bad_block)),
	};
	struct cow_scrub_progress res;
	uint64_t only_origin, shared, only_snap, csum, x;

	write_tagged(b, 0, 3000, 1);
	ck_assert_msg(cow_snapshot(b, "s", false) == 0, "snapshot");
	write_tagged(b, 10, 1, 2);		/* block 10 differs */
	ck_assert_msg(cow_snapshot(b, "c", true) == 0, "clone");
	flush_ok(b);
	s = open_vol(path, "s", 0);
	ck_assert_msg(cow_scrub(b, on_progress, on_bad, &l, &res) == 0 &&
		      res.bad == 0 && l.bad->len == 0,
		      "a healthy image scrubs clean");
	ck_assert_msg(res.total == 3 * 3000 && res.done == res.total,
		      "every mapped block of the three volumes was verified (%llu of %llu)",
		      (unsigned long long)res.done,
		      (unsigned long long)res.total);
	ck_assert_msg(l.progress_calls >= 3, "progress was reported (%u)",
		      l.progress_calls);
	/* Damage: a block only the origin and clone map, one all three
	 * share, one only the snapshot has. */
	ck_assert_msg(cow_map_block(b, 10, &only_origin, &csum) == 0 &&
		      cow_map_block(b, 2000, &shared, &csum) == 0 &&
		      cow_map_block(s, 10, &only_snap, &csum) == 0 &&
		      cow_map_block(s, 2000, &x, &csum) == 0 && x == shared &&
		      only_snap != only_origin, "found the blocks");
	cow_test_file_xor(path, only_origin * 4096 + 7, 0x40);
	cow_test_file_xor(path, shared * 4096 + 4095, 0x01);
	cow_test_file_xor(path, only_snap * 4096, 0x80);
	ck_assert_msg(cow_scrub(b, NULL, on_bad, &l, &res) == 0,
		      "the scrub ran");
	ck_assert_msg(res.bad == 6 && l.bad->len == 6,
		      "six bad mappings: two blocks of the origin, two of the clone, two of the snapshot (got %llu, %u)",
		      (unsigned long long)res.bad, l.bad->len);
	ck_assert_msg(log_has(&l, "", 10, only_origin) &&
		      log_has(&l, "c", 10, only_origin) &&
		      log_has(&l, "", 2000, shared) &&
		      log_has(&l, "s", 2000, shared) &&
		      log_has(&l, "c", 2000, shared) &&
		      log_has(&l, "s", 10, only_snap),
		      "each bad block is reported for every volume mapping it");
	ck_assert_msg(cow_test_stats(b).csum_errors == 2 &&
		      cow_test_stats(s).csum_errors == 2,
		      "counted in the open volumes' checksum errors (%llu, %llu)",
		      (unsigned long long)cow_test_stats(b).csum_errors,
		      (unsigned long long)cow_test_stats(s).csum_errors);
	ck_assert_msg(cow_scrub(b, stop_at_once, NULL, NULL, &res) ==
		      -ECANCELED, "a progress callback can stop the scrub");
	/* Repair by overwriting: clean again where the origin is
	 * concerned; the snapshot's blocks stay bad. */
	write_tagged(b, 10, 1, 3);
	write_tagged(b, 2000, 1, 3);
	g_array_set_size(l.bad, 0);
	ck_assert_msg(cow_scrub(s, NULL, on_bad, &l, &res) == 0 &&
		      res.bad == 4, "after the origin's repair: 4 bad (%llu)",
		      (unsigned long long)res.bad);
	backend_close(s);
	backend_close(b);
	/* Offline, the checker's data pass agrees. */
	{
		struct cow_check_result r;

		ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, NULL, NULL) ==
			      0 && r.bad_data == 3,
			      "the offline check finds the 3 bad blocks (%llu)",
			      (unsigned long long)r.bad_data);
	}
	g_array_free(l.bad, TRUE);
	g_free(path);
}
END_TEST

/* ---- everything at once ---- */

struct churn {
	struct backend *b;
	atomic_bool *stop;
	unsigned int salt;
	_Atomic unsigned int runs;
	uint64_t bad;			/* by the thread; read after join */
};

static void *churn_writer(void *arg)
{
	struct churn *w = arg;
	struct test_rng rng;
	uint32_t tag = 1000 * w->salt;

	test_rng_init(&rng, w->salt);
	while (!atomic_load(w->stop)) {
		uint64_t n = test_rng_range(&rng, 1, 8);
		uint64_t first = test_rng_range(&rng, 0, 600 - n);

		if (test_rng_range(&rng, 0, 9) == 0)
			ck_assert_msg(backend_discard(w->b, first * 4096,
						      n * 4096) == 0, "discard");
		else
			write_tagged(w->b, first, n, ++tag);
		atomic_fetch_add(&w->runs, 1);
	}
	return NULL;
}

static void *churn_scrubber(void *arg)
{
	struct churn *w = arg;

	while (!atomic_load(w->stop)) {
		struct cow_scrub_progress res;

		ck_assert_msg(cow_scrub(w->b, NULL, NULL, NULL, &res) == 0,
			      "scrub");
		w->bad += res.bad;
		atomic_fetch_add(&w->runs, 1);
	}
	return NULL;
}

START_TEST(test_cow_snap_writers_scrub_snapshots_and_deletes_at_once)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *c;
	atomic_bool stop = false;
	struct churn w[3];
	pthread_t th[3];
	unsigned int i, round;

	write_tagged(b, 0, 600, 1);
	ck_assert_msg(cow_snapshot(b, "c", true) == 0, "clone");
	c = open_vol(path, "c", 0);
	cow_set_commit_interval(b, 10);
	w[0] = (struct churn){ .b = b, .stop = &stop, .salt = 1 };
	w[1] = (struct churn){ .b = c, .stop = &stop, .salt = 2 };
	w[2] = (struct churn){ .b = c, .stop = &stop, .salt = 3 };
	ck_assert_int_eq(pthread_create(&th[0], NULL, churn_writer, &w[0]), 0);
	ck_assert_int_eq(pthread_create(&th[1], NULL, churn_writer, &w[1]), 0);
	ck_assert_int_eq(pthread_create(&th[2], NULL, churn_scrubber, &w[2]), 0);
	for (round = 0; round < test_iterations(40); round++) {
		char name[16];

		snprintf(name, sizeof(name), "s%u", round);
		ck_assert_msg(cow_snapshot(round % 2 ? c : b, name,
					   round % 3 == 0) == 0,
			      "snapshot %s", name);
		if (round >= 3) {
			snprintf(name, sizeof(name), "s%u", round - 3);
			ck_assert_msg(cow_delete_volume(b, name) == 0,
				      "delete %s", name);
		}
		g_usleep(5000);
	}
	/* Every thread ran at least once, however slow the machine (the
	 * writes and scrubs meanwhile race with the commits). */
	for (i = 0; i < 3; i++)
		wait_count(&w[i].runs, 1);
	atomic_store(&stop, true);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	fprintf(stderr, "churn: %u and %u writes, %u scrubs, %u rounds\n",
		atomic_load(&w[0].runs), atomic_load(&w[1].runs),
		atomic_load(&w[2].runs), round);
	ck_assert_msg(w[2].bad == 0 && atomic_load(&w[2].runs) > 0,
		      "%u scrubs under writes, snapshots and deletions found nothing bad (%llu)",
		      atomic_load(&w[2].runs), (unsigned long long)w[2].bad);
	ck_assert_msg(cow_test_stats(b).csum_errors == 0 &&
		      cow_test_stats(c).csum_errors == 0 &&
		      cow_test_stats(b).meta_errors == 0,
		      "no checksum or metadata errors");
	cow_set_commit_interval(b, 0);
	backend_close(c);
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "after the churn");
	g_free(path);
}
END_TEST

/* ---- crashes during a snapshot or a deletion ---- */

struct crash_arg {
	const char *path;
	enum cow_test_point point;
	bool delete;
};

static enum cow_test_point crash_point;
static int crash_fd = -1;

static void crash_hook(enum cow_test_point point)
{
	if (point == crash_point)
		cow_test_die(crash_fd);
}

static void crash_child(void *opaque, int kill_fd)
{
	struct crash_arg *a = opaque;
	struct backend_open_args args = { .path = a->path };
	struct backend *b = NULL;
	int ret;

	crash_point = a->point;
	crash_fd = kill_fd;
	cow_test_hook = crash_hook;
	COW_CHILD_CHECK(backend_open("cow", &args, &b) == 0, "open");
	cow_set_commit_interval(b, 0);
	ret = a->delete ? cow_delete_volume(b, "old") :
			  cow_snapshot(b, "new", true);
	COW_CHILD_CHECK(ret == 0, "volume operation: %d", ret);
	/* Not reached when the point was: the commit kills us. */
	cow_test_die(kill_fd);
}

START_TEST(test_cow_snap_crash_during_snapshot_or_delete)
{
	static const enum cow_test_point points[] = {
		COW_TEST_SEALED, COW_TEST_META_WRITTEN, COW_TEST_META_DURABLE,
		COW_TEST_SB_WRITTEN, COW_TEST_COMMITTED,
	};
	unsigned int i, del;

	for (del = 0; del < 2; del++) {
		for (i = 0; i < G_N_ELEMENTS(points); i++) {
			char *path = cow_test_image(VOL_SIZE, 0);
			struct backend *b = open_vol(path, NULL, 0), *x;
			struct crash_arg a = { path, points[i], del };
			int status, ret;

			write_tagged(b, 0, 800, 1);
			ck_assert_msg(cow_snapshot(b, "old", false) == 0,
				      "snapshot");
			write_tagged(b, 200, 300, 2);
			backend_close(b);
			status = cow_test_run_child(crash_child, &a);
			ck_assert_msg(WIFSIGNALED(status) &&
				      WTERMSIG(status) == SIGKILL,
				      "the child was killed at point %d (status %d)",
				      points[i], status);
			check_clean(path, COW_CHECK_DATA, "after the crash");
			b = open_vol(path, NULL, 0);
			expect_tags(b, 0, 200, 1, "origin after the crash");
			expect_tags(b, 200, 300, 2, "origin after the crash");
			ret = try_open_vol(path, del ? "old" : "new", 0, &x);
			ck_assert_msg(ret == 0 || ret == -ENOENT,
				      "the volume is there or not (%d)", ret);
			if (points[i] == COW_TEST_COMMITTED)
				ck_assert_msg(del ? ret == -ENOENT : ret == 0,
					      "a committed operation is durable");
			if (points[i] <= COW_TEST_META_DURABLE)
				ck_assert_msg(del ? ret == 0 : ret == -ENOENT,
					      "an uncommitted operation left no trace");
			if (ret == 0) {
				expect_tags(x, 0, 200, 1, "the volume");
				expect_tags(x, 200, 300, del ? 1 : 2,
					    "the volume");
				backend_close(x);
			}
			/* The recovered image keeps working. */
			write_tagged(b, 0, 50, 3);
			ck_assert_msg(cow_snapshot(b, "after", false) == 0,
				      "snapshot after recovery");
			backend_close(b);
			check_clean(path, COW_CHECK_DATA, "recovered");
			g_free(path);
		}
	}
}
END_TEST

/* ---- refusals ---- */

START_TEST(test_cow_snap_names)
{
	const char *bad[] = { "", ".", "..", "a/b", "snap@1", "tab\there",
			      "0123456789012345678901234567890123456789",
			      "\xff\xfe" };
	const char *good[] = { "s", "snap-2026.12.03", "012345678901234567890123456789012345678",
			       "caf\xc3\xa9", "with space", "..." };
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0);
	unsigned int i;

	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		ck_assert_msg(!cow_volume_name_valid(bad[i]),
			      "name %u is rejected", i);
		ck_assert_msg(cow_snapshot(b, bad[i], false) == -EINVAL,
			      "snapshot with bad name %u: -EINVAL", i);
	}
	ck_assert_msg(!cow_volume_name_valid(NULL), "NULL is rejected");
	for (i = 0; i < G_N_ELEMENTS(good); i++) {
		ck_assert_msg(cow_volume_name_valid(good[i]),
			      "name \"%s\" is accepted", good[i]);
		ck_assert_msg(cow_snapshot(b, good[i], i % 2) == 0,
			      "snapshot \"%s\"", good[i]);
	}
	{
		GArray *list = g_array_new(FALSE, FALSE,
					   sizeof(struct cow_volume_info));
		struct cow_volume_info *v;

		ck_assert_msg(cow_list_volumes(b, list) == 0 &&
			      list->len == 1 + G_N_ELEMENTS(good),
			      "listed %u volumes", list->len);
		v = &g_array_index(list, struct cow_volume_info, 0);
		ck_assert_msg(v->name[0] == 0 && v->open && !v->snapshot &&
			      v->size == VOL_SIZE, "the default volume first");
		for (i = 0; i < G_N_ELEMENTS(good); i++) {
			v = &g_array_index(list, struct cow_volume_info, i + 1);
			ck_assert_msg(!strcmp(v->name, good[i]) &&
				      v->snapshot == !(i % 2) && !v->open &&
				      v->parent == 1 && v->id > 1,
				      "volume %u listed as created", i);
		}
		g_array_free(list, TRUE);
	}
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "many volumes");
	g_free(path);
}
END_TEST

START_TEST(test_cow_snap_refusals)
{
	char *path = cow_test_image(VOL_SIZE, 0);
	struct backend *b = open_vol(path, NULL, 0), *s, *x = NULL;

	write_tagged(b, 0, 10, 1);
	ck_assert_msg(cow_snapshot(b, "s", false) == 0, "snapshot");
	ck_assert_msg(cow_snapshot(b, "s", true) == -EEXIST,
		      "a taken name: -EEXIST");
	ck_assert_msg(try_open_vol(path, "nope", 0, &x) == -ENOENT,
		      "an unknown volume: -ENOENT");
	ck_assert_msg(cow_delete_volume(b, "nope") == -ENOENT,
		      "deleting an unknown volume: -ENOENT");
	ck_assert_msg(cow_delete_volume(b, "") == -EBUSY &&
		      cow_delete_volume(b, NULL) == -EBUSY,
		      "deleting the default volume: -EBUSY");
	s = open_vol(path, "s", 0);
	ck_assert_msg(try_open_vol(path, "s", BACKEND_OPEN_RDONLY, &x) == -EBUSY,
		      "a volume open twice in one process: -EBUSY");
	ck_assert_msg(cow_delete_volume(b, "s") == -EBUSY,
		      "deleting an open volume: -EBUSY");
	backend_close(s);
	backend_close(b);

	/* A snapshot opened first opens the container read-only... */
	s = open_vol(path, "s", 0);
	ck_assert_msg(try_open_vol(path, NULL, 0, &x) == -EBUSY,
		      "then a writable volume: -EBUSY");
	ck_assert_msg(cow_snapshot(s, "t", false) == -EROFS &&
		      cow_delete_volume(s, "x") == -EROFS,
		      "no snapshots or deletions on a read-only container");
	b = open_vol(path, NULL, BACKEND_OPEN_RDONLY);
	backend_close(b);
	backend_close(s);
	/* ... unless asked otherwise. */
	s = open_vol(path, "s", BACKEND_OPEN_RDONLY | BACKEND_OPEN_CONTAINER_RW);
	b = open_vol(path, NULL, 0);
	write_tagged(b, 0, 10, 2);
	expect_tags(s, 0, 10, 1, "the snapshot");
	ck_assert_msg(cow_delete_volume(b, "s") == -EBUSY, "still open");
	backend_close(s);
	ck_assert_msg(cow_delete_volume(b, "s") == 0, "closed: deleted");
	ck_assert_msg(cow_snapshot(b, "s", false) == 0,
		      "the name is free again");
	backend_close(b);
	check_clean(path, COW_CHECK_DATA, "closed");

	/* Another process writes the image (it holds the lock): its
	 * snapshots can still be read, its writable volumes not opened. */
	{
		int fd = open(path, O_RDONLY);

		ck_assert_msg(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0,
			      "lock the image as another writer would");
		ck_assert_msg(try_open_vol(path, NULL, 0, &x) == -EBUSY,
			      "a writable volume of an image written elsewhere: -EBUSY");
		s = open_vol(path, "s", 0);
		expect_tags(s, 0, 10, 2, "a snapshot of an image written elsewhere");
		backend_close(s);
		close(fd);
	}
	g_free(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_snap");
	TCase *snap = tcase_create("snapshots");
	TCase *space = tcase_create("space");
	TCase *share = tcase_create("sharing");
	TCase *refuse = tcase_create("refusals");

	tcase_set_timeout(snap, 300);
	tcase_add_test(snap, test_cow_snap_snapshot_keeps_old_data_origin_gets_new);
	tcase_add_test(snap, test_cow_snap_clone_is_writable_and_independent);
	tcase_add_test(snap, test_cow_snap_snapshot_of_a_clone);
	tcase_add_test(snap, test_cow_snap_resize_a_clone);
	tcase_add_test(snap, test_cow_snap_two_volumes_interleaved_writes_and_commits);
	tcase_add_test(snap, test_cow_snap_snapshot_under_a_writer_is_a_point_in_time);
	suite_add_tcase(s, snap);

	tcase_set_timeout(space, 300);
	tcase_add_test(space, test_cow_snap_delete_frees_exactly_the_unshared_blocks);
	tcase_add_test(space, test_cow_snap_delete_clone_after_origin_rewrote_everything);
	tcase_add_test(space, test_cow_snap_crash_during_snapshot_or_delete);
	tcase_add_test(space, test_cow_snap_writers_scrub_snapshots_and_deletes_at_once);
	suite_add_tcase(s, space);

	tcase_set_timeout(share, 300);
	tcase_add_test(share, test_cow_snap_clone_range_shares_blocks);
	tcase_add_test(share, test_cow_snap_scrub_finds_exactly_the_corrupt_blocks);
	suite_add_tcase(s, share);

	tcase_set_timeout(refuse, 300);
	tcase_add_test(refuse, test_cow_snap_names);
	tcase_add_test(refuse, test_cow_snap_refusals);
	suite_add_tcase(s, refuse);

	return test_run_suite(s);
}
