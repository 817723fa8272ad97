/* SPDX-License-Identifier: MIT */
/*
 * The live-migration engine (backends/filter_mirror.h) over the "mem" test
 * double, with the "fault" layer for failures: holes stay holes, a copy
 * under concurrent writes converges to a byte-identical destination,
 * failures and -EAGAIN are counted like migrate_pages(), unreadable
 * source blocks stop the copy with their address (or become holes when
 * asked), cancel stops it, and the source is never written.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/filter_mirror.h"
#include "backends/filter_fault.h"
#include "backends/testing/mem.h"
#include "tests/testutil.h"

#define SIZE (32u << 20)
#define BLK 4096u

static struct backend *open_mem(const char *opts)
{
	struct backend_open_args args = { .path = opts };
	struct backend *b = NULL;

	ck_assert_int_eq(backend_open("mem", &args, &b), 0);
	return b;
}

/* A fault layer over inner (owning it). */
static struct backend *open_fault(struct backend *inner)
{
	struct backend_open_args args = { .path = "fault", .inner = inner };
	struct backend *b = NULL;

	ck_assert_int_eq(backend_open("fault", &args, &b), 0);
	return b;
}

/* Fill random blocks of b with random data (about fraction of them),
 * through the engine. */
static void fill_random(struct backend *b, struct test_rng *rng, unsigned pct)
{
	uint8_t *blk = g_malloc(BLK);
	uint64_t pos;

	for (pos = 0; pos < SIZE; pos += BLK) {
		if (test_rng_range(rng, 0, 99) >= pct)
			continue;
		test_rng_fill(rng, blk, BLK);
		ck_assert_int_eq(backend_pwrite(b, blk, BLK, pos), BLK);
	}
	g_free(blk);
}

/* dst's content equals src's, and dst has no data where src has holes. */
static void assert_same(struct backend *src, struct backend *dst)
{
	uint8_t *a = g_malloc(1u << 20), *b = g_malloc(1u << 20);
	uint64_t pos;

	for (pos = 0; pos < SIZE; pos += 1u << 20) {
		ck_assert_int_eq(mem_backend_peek(src, pos, a, 1u << 20), 0);
		ck_assert_int_eq(mem_backend_peek(dst, pos, b, 1u << 20), 0);
		ck_assert_msg(!memcmp(a, b, 1u << 20),
			      "destination differs in MiB %llu",
			      (unsigned long long)(pos >> 20));
	}
	for (pos = 0; pos < SIZE; pos += BLK)
		if (!mem_backend_block_written(src, pos))
			ck_assert_msg(!mem_backend_block_written(dst, pos),
				      "hole at %llu became data",
				      (unsigned long long)pos);
	g_free(a);
	g_free(b);
}

START_TEST(test_migrate_copies_data_keeps_holes)
{
	struct backend *src = open_mem("size=32M"), *dst = open_mem("size=32M");
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;
	uint8_t zero[BLK] = { 0 };

	test_rng_init(&rng, 1);
	fill_random(src, &rng, 30);
	/* A written block of zeros is data on the source, a hole after. */
	ck_assert_int_eq(backend_pwrite(src, zero, BLK, 5 * BLK), BLK);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(migration_copy(m), 0);
	ck_assert_int_eq(migration_finish(m), 0);
	migration_get_progress(m, &p);
	ck_assert(p.finished);
	ck_assert_int_eq(p.ranges_failed, 0);
	ck_assert_uint_eq(p.done, p.total);
	ck_assert_msg(!mem_backend_block_written(dst, 5 * BLK),
		      "a zero block is stored as a hole");
	assert_same(src, dst);
	migration_free(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

START_TEST(test_migrate_smaller_destination_refused)
{
	struct backend *src = open_mem("size=32M"), *dst = open_mem("size=16M");
	struct migration *m = NULL;

	ck_assert_int_eq(migration_new(src, dst, NULL, &m), -EINVAL);
	ck_assert_ptr_null(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

/* An image of the largest size create accepts (1 EiB of cow): the
 * bookkeeping is bounded (one bit a MiB would be 128 GiB, which aborted
 * the daemon), and the copy of what is all holes ends. */
START_TEST(test_migrate_huge_image)
{
	g_autofree char *dir = test_tmpdir();
	g_autofree char *sp = g_build_filename(dir, "src.cow", NULL);
	g_autofree char *dp = g_build_filename(dir, "dst.cow", NULL);
	struct backend_create_args cs = { .path = sp, .size = UINT64_C(1) << 60 };
	struct backend_create_args cd = { .path = dp, .size = UINT64_C(1) << 60 };
	struct backend_open_args os = { .path = sp }, od = { .path = dp };
	struct backend *src = NULL, *dst = NULL;
	struct migration *m = NULL;
	char block[BLK];

	ck_assert_int_eq(backend_create("cow", &cs, NULL), 0);
	ck_assert_int_eq(backend_create("cow", &cd, NULL), 0);
	ck_assert_int_eq(backend_open("cow", &os, &src), 0);
	ck_assert_int_eq(backend_open("cow", &od, &dst), 0);
	memset(block, 0x5a, sizeof(block));
	ck_assert_int_eq(backend_pwrite(src, block, BLK, (UINT64_C(1) << 59) + BLK),
			 BLK);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(migration_copy(m), 0);
	memset(block, 0, sizeof(block));
	ck_assert_int_eq(backend_pread(dst, block, BLK, (UINT64_C(1) << 59) + BLK),
			 BLK);
	ck_assert_int_eq(block[0], 0x5a);
	migration_free(m);
	backend_close(src);
	backend_close(dst);
	unlink(sp);
	unlink(dp);
	rmdir(dir);
}
END_TEST

/* A writer that writes random ranges to src and reports them dirty after
 * each write completed, as the daemon's write path does. */
struct writer {
	struct backend *src;
	struct migration *m;
	atomic_bool stop;
	uint64_t seed;
	_Atomic unsigned long writes;
};

static gpointer writer_thread(gpointer opaque)
{
	struct writer *w = opaque;
	uint8_t *buf = g_malloc(64 * 1024);
	struct test_rng rng;

	test_rng_init(&rng, w->seed);
	while (!atomic_load(&w->stop)) {
		size_t len = (size_t)test_rng_range(&rng, 1, 64 * 1024);
		uint64_t pos = test_rng_range(&rng, 0, SIZE - len);

		test_rng_fill(&rng, buf, len);
		if (test_rng_range(&rng, 0, 9) == 0) {
			ck_assert_int_eq(backend_discard(w->src, pos, len), 0);
		} else {
			ck_assert_int_eq(backend_pwrite(w->src, buf, len, pos),
					 (ssize_t)len);
		}
		migration_mark_dirty(w->m, pos, len);
		atomic_fetch_add(&w->writes, 1);
	}
	g_free(buf);
	return NULL;
}

START_TEST(test_migrate_converges_under_writes)
{
	struct backend *src = open_mem("size=32M,async"),
		       *dst = open_mem("size=32M,async");
	struct writer w = { .src = src, .seed = 2 };
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;
	GThread *t;

	test_rng_init(&rng, 3);
	fill_random(src, &rng, 50);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	w.m = m;
	t = g_thread_new("writer", writer_thread, &w);
	/* The copy can be quick: start it only once the writer is
	 * writing (a writer stuck for good: the tcase timeout). */
	while (atomic_load(&w.writes) == 0)
		g_usleep(1000);
	ck_assert_int_eq(migration_copy(m), 0);
	/* Quiesce: the owner stops admitting writes, waits for the rest. */
	atomic_store(&w.stop, true);
	g_thread_join(t);
	ck_assert_int_eq(migration_finish(m), 0);
	migration_get_progress(m, &p);
	ck_assert_msg(atomic_load(&w.writes) > 0, "the writer ran");
	ck_assert_msg(p.total >= p.done && p.done > 0, "progress counted");
	assert_same(src, dst);
	migration_free(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

START_TEST(test_migrate_destination_failure_leaves_source)
{
	struct backend *src = open_mem("size=32M"),
		       *dst = open_fault(open_mem("size=32M"));
	struct fault_rule r = { .ops = FAULT_OP_WRITE, .nth = 5,
				.error = ENOSPC };
	uint8_t *before = g_malloc(SIZE), *after = g_malloc(SIZE);
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;

	test_rng_init(&rng, 4);
	fill_random(src, &rng, 60);
	ck_assert_int_eq(mem_backend_peek(src, 0, before, SIZE), 0);
	ck_assert_int_eq(fault_backend_add_rule(dst, &r), 0);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(migration_copy(m), -ENOSPC);
	migration_get_progress(m, &p);
	ck_assert_int_eq(p.ranges_failed, 1);
	ck_assert_int_eq(p.error, -ENOSPC);
	ck_assert(!p.finished);
	ck_assert_int_eq(mem_backend_peek(src, 0, after, SIZE), 0);
	ck_assert_msg(!memcmp(before, after, SIZE), "the source is untouched");
	migration_free(m);
	g_free(before);
	g_free(after);
	backend_close(src);
	backend_close(dst);
}
END_TEST

START_TEST(test_migrate_eagain_is_retried)
{
	struct backend *src = open_mem("size=32M"),
		       *dst = open_fault(open_mem("size=32M"));
	/* Every third write asks for a retry. */
	struct fault_rule r = { .ops = FAULT_OP_WRITE, .every = 3,
				.error = EAGAIN };
	struct backend *inner;
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;

	test_rng_init(&rng, 5);
	/* Full: one write per chunk, so each chunk fails at most now and
	 * then, and its retry succeeds. */
	fill_random(src, &rng, 100);
	ck_assert_int_eq(fault_backend_add_rule(dst, &r), 0);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(migration_copy(m), 0);
	fault_backend_clear(dst);
	ck_assert_int_eq(migration_finish(m), 0);
	migration_get_progress(m, &p);
	ck_assert_msg(p.ranges_retried > 0, "retries counted");
	ck_assert_int_eq(p.ranges_failed, 0);
	inner = dst->inner;
	assert_same(src, inner);
	migration_free(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

START_TEST(test_migrate_bad_source_block)
{
	struct backend *src = open_fault(open_mem("size=32M")),
		       *dst = open_mem("size=32M");
	const uint64_t bad = 7 * (1u << 20) + 3 * BLK;
	struct fault_rule r = { .ops = FAULT_OP_READ, .range_start = bad,
				.range_len = BLK, .error = EIO };
	struct migrate_opts o = { .ignore_bad_blocks = true };
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;

	test_rng_init(&rng, 6);
	fill_random(src->inner, &rng, 100);
	ck_assert_int_eq(fault_backend_add_rule(src, &r), 0);

	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(migration_copy(m), -EIO);
	migration_get_progress(m, &p);
	ck_assert_msg(p.error_pos == bad, "bad block reported at %llu, not %llu",
		      (unsigned long long)p.error_pos,
		      (unsigned long long)bad);
	migration_free(m);

	ck_assert_int_eq(migration_new(src, dst, &o, &m), 0);
	ck_assert_int_eq(migration_copy(m), 0);
	ck_assert_int_eq(migration_finish(m), 0);
	migration_get_progress(m, &p);
	ck_assert_int_eq(p.bad_blocks, 1);
	ck_assert(!mem_backend_block_written(dst, bad));
	ck_assert(mem_backend_block_written(dst, bad + BLK));
	ck_assert(mem_backend_block_written(dst, bad - BLK));
	migration_free(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

static gpointer cancel_soon(gpointer opaque)
{
	g_usleep(50000);
	migration_cancel(opaque);
	return NULL;
}

START_TEST(test_migrate_cancel)
{
	struct backend *src = open_mem("size=32M"), *dst = open_mem("size=32M");
	/* 1 MiB/s: the copy of 32 MiB cannot end before the cancel. */
	struct migrate_opts o = { .bps = 1u << 20 };
	struct migration *m;
	struct test_rng rng;
	GThread *t;

	test_rng_init(&rng, 7);
	fill_random(src, &rng, 100);
	ck_assert_int_eq(migration_new(src, dst, &o, &m), 0);
	t = g_thread_new("cancel", cancel_soon, m);
	ck_assert_int_eq(migration_copy(m), -ECANCELED);
	g_thread_join(t);
	ck_assert(migration_cancelled(m));
	migration_free(m);
	backend_close(src);
	backend_close(dst);
}
END_TEST

/* The mirror filter marks what passes down (no daemon): writes (sync and
 * async), discards and zeroes after the first pass reach the destination;
 * the switch puts the destination in the mirror's place in the stack. */
START_TEST(test_migrate_mirror_marks_dirty)
{
	struct backend *src = open_mem("size=32M,async");
	struct backend *dst = open_mem("size=32M");
	struct backend *top, *mirror, *old = NULL;
	struct migrate_progress p;
	struct migration *m;
	struct test_rng rng;
	uint8_t *blk = g_malloc(BLK);

	test_rng_init(&rng, 11);
	fill_random(src, &rng, 10);
	ck_assert_int_eq(migration_new(src, dst, NULL, &m), 0);
	ck_assert_int_eq(mirror_filter_open(m, &mirror), 0);
	top = open_fault(src);
	mirror_filter_insert(&top, mirror);
	ck_assert_msg(top->inner == mirror && mirror->inner == src,
		      "the mirror sits under the fault filter, on the source");
	ck_assert_int_eq(migration_copy(m), 0);
	migration_get_progress(m, &p);
	ck_assert_uint_eq(p.dirty, 0);
	/* Changes after the copy, through the top of the stack. */
	test_rng_fill(&rng, blk, BLK);
	ck_assert_int_eq(backend_pwrite(top, blk, BLK, 20u << 20), BLK);
	ck_assert_int_eq(backend_discard(top, 0, 1u << 20), 0);
	ck_assert_int_eq(backend_write_zeroes(top, 3u << 20, 1u << 20), 0);
	migration_get_progress(m, &p);
	ck_assert_msg(p.dirty == 3 * MIGRATE_CHUNK,
		      "a write, a discard and a zeroing in three chunks: "
		      "expected %llu dirty bytes, got %llu",
		      (unsigned long long)(3 * MIGRATE_CHUNK),
		      (unsigned long long)p.dirty);
	ck_assert_int_eq(migration_finish(m), 0);
	assert_same(src, dst);
	ck_assert_int_eq(mirror_filter_switch(&top, mirror, &old), 0);
	ck_assert_msg(old == src && top->inner == dst,
		      "the switch puts dst under the fault filter");
	backend_close(mirror);
	migration_free(m);
	backend_close(old);
	backend_close(top);	/* closes dst */
	g_free(blk);
}
END_TEST

static Suite *migrate_suite(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_migrate_copies_data_keeps_holes);
	tcase_add_test(tc, test_migrate_smaller_destination_refused);
	tcase_add_test(tc, test_migrate_huge_image);
	tcase_add_test(tc, test_migrate_converges_under_writes);
	tcase_add_test(tc, test_migrate_destination_failure_leaves_source);
	tcase_add_test(tc, test_migrate_eagain_is_retried);
	tcase_add_test(tc, test_migrate_bad_source_block);
	tcase_add_test(tc, test_migrate_cancel);
	tcase_add_test(tc, test_migrate_mirror_marks_dirty);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(migrate_suite());
}
