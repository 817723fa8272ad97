/* SPDX-License-Identifier: MIT */
/*
 * The fault-injection backend over "mem": rules hit exactly the ops they
 * name (nth, every kth, range, fraction), with the chosen errno, others
 * pass through with correct data; latency never blocks an asynchronous
 * submitter and its completion comes once; rules change at run time.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/filter_fault.h"
#include "backends/testing/mem.h"
#include "tests/testutil.h"

#define BLK 4096u

/* Open "fault" over a fresh "mem" with options opts. */
static struct backend *open_fault(const char *opts, struct backend **mem_out)
{
	struct backend_open_args margs = { .path = opts };
	struct backend_open_args fargs = { .path = "fault-test" };
	struct backend *mem, *f;
	int ret;

	ret = backend_open("mem", &margs, &mem);
	ck_assert_msg(ret == 0, "open mem \"%s\": expected 0, got %d", opts,
		      ret);
	fargs.inner = mem;
	ret = backend_open("fault", &fargs, &f);
	ck_assert_msg(ret == 0, "open fault: expected 0, got %d", ret);
	if (mem_out)
		*mem_out = mem;
	return f;
}

static void add_rule(struct backend *f, const struct fault_rule *r)
{
	int ret = fault_backend_add_rule(f, r);

	ck_assert_msg(ret == 0, "add rule: expected 0, got %d", ret);
}

static void fill_block(char *buf, unsigned int i)
{
	memset(buf, 'A' + (int)(i % 26), BLK);
	memcpy(buf, &i, sizeof(i));
}

/* Write block i with its pattern: the result of pwrite. */
static ssize_t write_block(struct backend *b, unsigned int i)
{
	char buf[BLK];

	fill_block(buf, i);
	return backend_pwrite(b, buf, BLK, (uint64_t)i * BLK);
}

/* True if block i of mem holds its pattern (checked past the engine). */
static bool block_has_pattern(struct backend *mem, unsigned int i)
{
	char want[BLK], got[BLK];

	fill_block(want, i);
	ck_assert_int_eq(mem_backend_peek(mem, (uint64_t)i * BLK, got, BLK), 0);
	return memcmp(want, got, BLK) == 0;
}

static bool block_is_zero(struct backend *mem, unsigned int i)
{
	char zero[BLK] = { 0 }, got[BLK];

	ck_assert_int_eq(mem_backend_peek(mem, (uint64_t)i * BLK, got, BLK), 0);
	return memcmp(zero, got, BLK) == 0;
}

START_TEST(test_fault_nth_fails_only_nth)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_WRITE, .nth = 3,
				.error = EIO };
	struct fault_stats st;
	unsigned int i;

	add_rule(f, &r);
	for (i = 0; i < 8; i++) {
		ssize_t ret = write_block(f, i);

		if (i == 2)
			ck_assert_msg(ret == -EIO,
				      "3rd write: expected -EIO, got %zd", ret);
		else
			ck_assert_msg(ret == BLK,
				      "write %u: expected %u, got %zd", i, BLK,
				      ret);
	}
	for (i = 0; i < 8; i++) {
		if (i == 2)
			ck_assert_msg(block_is_zero(mem, i),
				      "the failed write left block 2 untouched");
		else
			ck_assert_msg(block_has_pattern(mem, i),
				      "block %u holds what was written", i);
	}
	fault_backend_get_stats(f, &st);
	ck_assert_msg(st.injected[FAULT_KIND_WRITE] == 1 &&
		      st.ops[FAULT_KIND_WRITE] == 8,
		      "expected 1 injected of 8 writes, got %llu of %llu",
		      (unsigned long long)st.injected[FAULT_KIND_WRITE],
		      (unsigned long long)st.ops[FAULT_KIND_WRITE]);
	ck_assert_msg(st.injected[FAULT_KIND_READ] == 0,
		      "a write rule injects nothing into reads");
	backend_close(f);
}
END_TEST

START_TEST(test_fault_every_kth_read)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_READ, .every = 3,
				.error = EIO };
	struct fault_stats st;
	unsigned int i, failed = 0;

	for (i = 0; i < 10; i++)
		ck_assert_int_eq(write_block(f, i), BLK);
	add_rule(f, &r);
	for (i = 0; i < 10; i++) {
		char want[BLK], got[BLK];
		ssize_t ret = backend_pread(f, got, BLK, (uint64_t)i * BLK);

		if (i % 3 == 2) {
			ck_assert_msg(ret == -EIO,
				      "read %u (every 3rd): expected -EIO, got %zd",
				      i + 1, ret);
			failed++;
			continue;
		}
		fill_block(want, i);
		ck_assert_msg(ret == BLK && memcmp(got, want, BLK) == 0,
			      "read %u passes through with the data (ret %zd)",
			      i + 1, ret);
	}
	fault_backend_get_stats(f, &st);
	ck_assert_msg(failed == 3 && st.injected[FAULT_KIND_READ] == 3,
		      "expected reads 3, 6, 9 to fail: %u failed, %llu counted",
		      failed,
		      (unsigned long long)st.injected[FAULT_KIND_READ]);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_range_hits_only_touching_ops)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_WRITE, .range_start = 16 * BLK,
				.range_len = BLK, .error = ENOSPC };
	char buf[2 * BLK];
	struct fault_stats st;
	ssize_t ret;

	add_rule(f, &r);
	memset(buf, 'x', sizeof(buf));
	ret = backend_pwrite(f, buf, BLK, 15 * BLK);
	ck_assert_msg(ret == BLK, "write ending where the range starts: "
		      "expected %u, got %zd", BLK, ret);
	ret = backend_pwrite(f, buf, BLK, 17 * BLK);
	ck_assert_msg(ret == BLK, "write starting where the range ends: "
		      "expected %u, got %zd", BLK, ret);
	ret = backend_pwrite(f, buf, 2 * BLK, 15 * BLK + 512);
	ck_assert_msg(ret == -ENOSPC, "write overlapping the range: expected "
		      "-ENOSPC, got %zd", ret);
	ret = backend_pwrite(f, buf, 100, 16 * BLK + 7);
	ck_assert_msg(ret == -ENOSPC, "write inside the range: expected "
		      "-ENOSPC, got %zd", ret);
	ret = backend_pread(f, buf, BLK, 16 * BLK);
	ck_assert_msg(ret == BLK, "a read of the range is not a write: "
		      "expected %u, got %zd", BLK, ret);
	fault_backend_get_stats(f, &st);
	ck_assert_msg(st.injected[FAULT_KIND_WRITE] == 2,
		      "expected 2 injected writes, got %llu",
		      (unsigned long long)st.injected[FAULT_KIND_WRITE]);
	ck_assert_msg(mem_backend_block_written(mem, 15 * BLK) &&
		      mem_backend_block_written(mem, 17 * BLK) &&
		      !mem_backend_block_written(mem, 16 * BLK),
		      "blocks 15 and 17 written, block 16 untouched");
	backend_close(f);
}
END_TEST

/* Run n reads under a fraction rule; returns the failures seen. */
static unsigned int run_fraction(double fraction, uint64_t seed,
				 unsigned int n, bool *pattern)
{
	struct backend *f = open_fault("size=64K", NULL);
	struct fault_rule r = { .ops = FAULT_OP_READ, .fraction = fraction,
				.seed = seed, .error = EIO };
	struct fault_stats st;
	unsigned int i, failed = 0;
	char buf[512];

	add_rule(f, &r);
	for (i = 0; i < n; i++) {
		ssize_t ret = backend_pread(f, buf, sizeof(buf),
					    (uint64_t)(i % 128) * 512);

		ck_assert_msg(ret == -EIO || ret == (ssize_t)sizeof(buf),
			      "read %u: expected -EIO or 512, got %zd", i, ret);
		if (pattern)
			pattern[i] = ret < 0;
		failed += ret < 0;
	}
	fault_backend_get_stats(f, &st);
	ck_assert_msg(st.injected[FAULT_KIND_READ] == failed,
		      "counter (%llu) equals the failures seen (%u)",
		      (unsigned long long)st.injected[FAULT_KIND_READ], failed);
	backend_close(f);
	return failed;
}

START_TEST(test_fault_fraction_is_seeded_and_near_target)
{
	unsigned int n = test_iterations(4000);
	bool *a, *b;
	unsigned int fa, fb, lo, hi;

	if (n < 400)
		n = 400;
	a = g_new0(bool, n);
	b = g_new0(bool, n);
	fa = run_fraction(0.25, 42, n, a);
	fb = run_fraction(0.25, 42, n, b);
	ck_assert_msg(fa == fb && memcmp(a, b, n * sizeof(bool)) == 0,
		      "the same seed fails the same reads");
	/* Binomial(n, 1/4): +-10% of n is > 4.6 standard deviations. */
	lo = n * 15 / 100;
	hi = n * 35 / 100;
	ck_assert_msg(fa >= lo && fa <= hi,
		      "fraction 0.25 of %u reads: expected %u..%u failures, got %u",
		      n, lo, hi, fa);
	ck_assert_msg(run_fraction(1.0, 7, 50, NULL) == 50,
		      "fraction 1 fails every read");
	g_free(a);
	g_free(b);
}
END_TEST

START_TEST(test_fault_flush_discard_zeroes_errors)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule flush = { .ops = FAULT_OP_FLUSH, .error = EIO };
	struct fault_rule discard = { .ops = FAULT_OP_DISCARD, .nth = 1,
				      .error = ENOSPC };
	struct fault_rule zeroes = { .ops = FAULT_OP_WRITE_ZEROES,
				     .error = EIO };
	struct fault_stats st;
	int ret;

	ck_assert_int_eq(write_block(f, 0), BLK);
	ck_assert_int_eq(backend_flush(f), 0);
	add_rule(f, &flush);
	add_rule(f, &discard);
	add_rule(f, &zeroes);
	ret = backend_flush(f);
	ck_assert_msg(ret == -EIO, "flush: expected -EIO, got %d", ret);
	ret = backend_discard(f, 0, BLK);
	ck_assert_msg(ret == -ENOSPC, "1st discard: expected -ENOSPC, got %d",
		      ret);
	ck_assert_msg(block_has_pattern(mem, 0),
		      "a failed discard leaves the data");
	ret = backend_write_zeroes(f, 0, BLK);
	ck_assert_msg(ret == -EIO, "write_zeroes: expected -EIO, got %d", ret);
	ck_assert_msg(block_has_pattern(mem, 0),
		      "a failed write_zeroes leaves the data");
	ret = backend_discard(f, 0, BLK);
	ck_assert_msg(ret == 0, "2nd discard (nth = 1): expected 0, got %d",
		      ret);
	ck_assert_msg(block_is_zero(mem, 0) &&
		      !mem_backend_block_written(mem, 0),
		      "the 2nd discard reached mem and made a hole");
	fault_backend_get_stats(f, &st);
	ck_assert_msg(st.injected[FAULT_KIND_FLUSH] == 1 &&
		      st.injected[FAULT_KIND_DISCARD] == 1 &&
		      st.injected[FAULT_KIND_WRITE_ZEROES] == 1,
		      "one injected flush, discard, write_zeroes");
	backend_close(f);
}
END_TEST

START_TEST(test_fault_clear_restores_pass_through)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_ALL, .error = EIO };
	char buf[BLK];
	unsigned int i;

	add_rule(f, &r);
	ck_assert_msg(write_block(f, 1) == -EIO, "all ops fail under the rule");
	ck_assert_msg(backend_pread(f, buf, BLK, 0) == -EIO, "reads too");
	ck_assert_msg(backend_flush(f) == -EIO, "flush too");
	fault_backend_clear(f);
	for (i = 0; i < 4; i++)
		ck_assert_msg(write_block(f, i) == BLK,
			      "write %u after clear: expected %u", i, BLK);
	for (i = 0; i < 4; i++) {
		char want[BLK];

		fill_block(want, i);
		ck_assert_msg(backend_pread(f, buf, BLK, (uint64_t)i * BLK) ==
				      BLK && !memcmp(buf, want, BLK),
			      "read %u after clear returns the data", i);
	}
	ck_assert_int_eq(backend_flush(f), 0);
	ck_assert_int_eq(backend_discard(f, 0, BLK), 0);
	ck_assert_msg(block_is_zero(mem, 0), "discard after clear reached mem");
	backend_close(f);
}
END_TEST

START_TEST(test_fault_add_rule_rejects_invalid)
{
	struct backend *mem, *f = open_fault("size=64K", &mem);
	struct fault_rule none = { .ops = 0, .error = EIO };
	struct fault_rule neg = { .ops = FAULT_OP_READ, .error = -EIO };
	struct fault_rule frac = { .ops = FAULT_OP_READ, .fraction = 1.5,
				   .error = EIO };
	struct fault_rule idle = { .ops = FAULT_OP_READ };
	struct fault_rule ok = { .ops = FAULT_OP_READ, .error = EIO };

	ck_assert_int_eq(fault_backend_add_rule(f, &none), -EINVAL);
	ck_assert_int_eq(fault_backend_add_rule(f, &neg), -EINVAL);
	ck_assert_int_eq(fault_backend_add_rule(f, &frac), -EINVAL);
	ck_assert_int_eq(fault_backend_add_rule(f, &idle), -EINVAL);
	ck_assert_msg(fault_backend_add_rule(mem, &ok) == -EINVAL,
		      "a rule on a backend that is not \"fault\" is refused");
	ck_assert_int_eq(fault_backend_add_rule(f, &ok), 0);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_forwards_limits_map_info_resize)
{
	struct backend *mem, *f = open_fault("size=1M,align=4096,max_segs=8",
					     &mem);
	struct backend_extent ext;
	struct backend_info info;

	ck_assert_msg(!memcmp(&f->limits, &mem->limits, sizeof(f->limits)),
		      "limits are copied from inner");
	ck_assert_int_eq(f->limits.request_alignment, 4096);
	ck_assert_int_eq(f->limits.max_segs, 8);
	ck_assert_int_eq(write_block(f, 1), BLK);
	ck_assert_int_eq(backend_map(f, 0, 1 << 20, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == BLK,
		      "block 0 is a hole of %u bytes (got hole=%d len=%llu)",
		      BLK, ext.hole, (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(f, BLK, 1 << 20, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == BLK, "block 1 is data");
	ck_assert_int_eq(backend_info(f, &info), 0);
	ck_assert_str_eq(info.format, "mem");
	ck_assert_int_eq(info.size, 1 << 20);
	ck_assert_int_eq(info.allocated, BLK);
	ck_assert_int_eq(backend_resize(f, 2 << 20), 0);
	ck_assert_int_eq(backend_get_size(f), 2 << 20);
	ck_assert_int_eq(backend_get_size(mem), 2 << 20);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_map_resize_clone_errors)
{
	struct backend *f = open_fault("size=1M", NULL);
	struct backend *g = open_fault("size=1M", NULL);
	struct fault_rule r = { .ops = FAULT_OP_MAP | FAULT_OP_RESIZE |
				       FAULT_OP_CLONE_RANGE,
				.error = ENOSPC };
	struct backend_extent ext;
	struct fault_stats st;
	ssize_t ret;

	ret = backend_clone_range(f, 0, g, 0, BLK);
	ck_assert_msg(ret == -EOPNOTSUPP,
		      "clone_range forwards to mem, which has none: expected "
		      "-EOPNOTSUPP, got %zd", ret);
	add_rule(g, &r);
	ret = backend_clone_range(f, 0, g, 0, BLK);
	ck_assert_msg(ret == -ENOSPC,
		      "the destination's rule fails clone_range: got %zd", ret);
	ck_assert_int_eq(backend_clone_range(g, 0, f, 0, BLK), -EOPNOTSUPP);
	ck_assert_int_eq(backend_map(g, 0, BLK, &ext), -ENOSPC);
	ck_assert_int_eq(backend_map(f, 0, BLK, &ext), 0);
	ck_assert_int_eq(backend_resize(g, 2 << 20), -ENOSPC);
	ck_assert_msg(backend_get_size(g) == 1 << 20,
		      "a failed resize leaves the size");
	fault_backend_get_stats(g, &st);
	ck_assert_msg(st.injected[FAULT_KIND_MAP] == 1 &&
		      st.injected[FAULT_KIND_RESIZE] == 1 &&
		      st.injected[FAULT_KIND_CLONE_RANGE] == 1,
		      "one injected map, resize, clone_range");
	backend_close(f);
	backend_close(g);
}
END_TEST

/* An asynchronous request over one page-aligned buffer. */
struct async_io {
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec bv[4];
	char *buf;
	GMutex lock;
	GCond cond;
	int completions;		/* by lock */
	ssize_t res;			/* by lock */
	gint64 done_at;			/* by lock */
	GThread *thread;		/* the thread that completed it */
};

static void async_done(struct kiocb *iocb, ssize_t res)
{
	struct async_io *io = iocb->ki_private;

	g_mutex_lock(&io->lock);
	io->completions++;
	io->res = res;
	io->done_at = g_get_monotonic_time();
	io->thread = g_thread_self();
	g_cond_broadcast(&io->cond);
	g_mutex_unlock(&io->lock);
}

static struct async_io *async_io_new(int rw, uint64_t pos, size_t len)
{
	struct async_io *io = g_new0(struct async_io, 1);
	size_t i, nr = (len + BLK - 1) / BLK;

	ck_assert(nr <= G_N_ELEMENTS(io->bv));
	ck_assert_int_eq(posix_memalign((void **)&io->buf, BLK, nr * BLK), 0);
	memset(io->buf, 0, nr * BLK);
	for (i = 0; i < nr; i++)
		io->bv[i] = (struct bio_vec){
			.bv_page = io->buf + i * BLK,
			.bv_len = (unsigned int)(len - i * BLK < BLK ?
						 len - i * BLK : BLK),
		};
	iov_iter_init_bvec(&io->iter, io->bv, nr, len, 0);
	g_mutex_init(&io->lock);
	g_cond_init(&io->cond);
	io->iocb = (struct kiocb){ .ki_rw = rw, .ki_pos = pos,
				   .ki_iter = &io->iter,
				   .ki_complete = async_done,
				   .ki_private = io };
	return io;
}

/* Submit; the result as returned, and how long the call took (us). */
static ssize_t async_submit(struct backend *b, struct async_io *io,
			    gint64 *took)
{
	gint64 t0 = g_get_monotonic_time();
	ssize_t ret = backend_direct_IO_bvec(b, &io->iocb);

	*took = g_get_monotonic_time() - t0;
	return ret;
}

/* Wait (10 s at most) for the completion. */
static void async_wait(struct async_io *io)
{
	gint64 end = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;

	g_mutex_lock(&io->lock);
	while (!io->completions && g_get_monotonic_time() < end)
		g_cond_wait_until(&io->cond, &io->lock, end);
	g_mutex_unlock(&io->lock);
	ck_assert_msg(io->completions == 1,
		      "expected one completion within 10 s, got %d",
		      io->completions);
}

static void async_io_free(struct async_io *io)
{
	g_mutex_clear(&io->lock);
	g_cond_clear(&io->cond);
	free(io->buf);
	g_free(io);
}

/* A submit that waited out the latency takes at least LATENCY_US by
 * construction, so "took < LATENCY_US" tells it from one that did not;
 * long enough that a busy machine or valgrind does not stall a
 * non-blocking submit (or the look right after it) that long. */
#define LATENCY_US 500000

/* A delayed async read returns at once and completes once, later. */
static void check_async_latency(const char *mem_opts)
{
	struct backend *mem, *f = open_fault(mem_opts, &mem);
	struct fault_rule r = { .ops = FAULT_OP_READ,
				.latency_us = LATENCY_US };
	struct async_io *io;
	char want[2 * BLK];
	gint64 took, t0;
	ssize_t ret;

	memset(want, 'q', sizeof(want));
	ck_assert_int_eq(mem_backend_poke(mem, 3 * BLK, want, sizeof(want)),
			 0);
	add_rule(f, &r);
	io = async_io_new(DIOLOOP_READ, 3 * BLK, 2 * BLK);
	t0 = g_get_monotonic_time();
	ret = async_submit(f, io, &took);
	ck_assert_msg(ret == -EIOCBQUEUED,
		      "a delayed async read is queued: expected -EIOCBQUEUED, got %zd",
		      ret);
	ck_assert_msg(took < LATENCY_US,
		      "the submitter is not blocked by %d us of latency: the call took %lld us",
		      LATENCY_US, (long long)took);
	async_wait(io);
	ck_assert_msg(io->done_at - t0 >= LATENCY_US - 1000,
		      "completion comes after the latency: %lld us < %d us",
		      (long long)(io->done_at - t0), LATENCY_US);
	ck_assert_msg(io->res == 2 * BLK, "result: expected %u, got %zd",
		      2 * BLK, io->res);
	ck_assert_msg(!memcmp(io->buf, want, sizeof(want)),
		      "the delayed read delivers the data");
	ck_assert_msg(io->thread != g_thread_self(),
		      "the completion does not run on the submitter");
	g_usleep(50000);
	ck_assert_msg(io->completions == 1,
		      "completed exactly once (got %d)", io->completions);
	async_io_free(io);
	backend_close(f);
}

START_TEST(test_fault_async_latency_inner_inline)
{
	/* mem completes inline: fault holds the inline result back. */
	check_async_latency("size=1M");
}
END_TEST

START_TEST(test_fault_async_latency_inner_async)
{
	/* mem completes from its workers: fault holds the callback back. */
	check_async_latency("size=1M,async,delay_us=1000");
}
END_TEST

START_TEST(test_fault_async_error_with_latency_completes_later)
{
	struct backend *mem, *f = open_fault("size=1M,async", &mem);
	struct fault_rule r = { .ops = FAULT_OP_WRITE, .error = ENOSPC,
				.latency_us = LATENCY_US };
	struct async_io *io = async_io_new(DIOLOOP_WRITE, 0, BLK);
	gint64 took;
	ssize_t ret;

	add_rule(f, &r);
	memset(io->buf, 'w', BLK);
	ret = async_submit(f, io, &took);
	ck_assert_msg(ret == -EIOCBQUEUED && took < LATENCY_US,
		      "delayed error is queued without blocking (ret %zd, %lld us)",
		      ret, (long long)took);
	async_wait(io);
	ck_assert_msg(io->res == -ENOSPC, "completion: expected -ENOSPC, got %zd",
		      io->res);
	ck_assert_msg(!mem_backend_block_written(mem, 0),
		      "the failed write never reached mem");
	async_io_free(io);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_async_error_inline_without_latency)
{
	struct backend *mem, *f = open_fault("size=1M,async", &mem);
	struct fault_rule r = { .ops = FAULT_OP_READ, .error = EIO };
	struct async_io *io = async_io_new(DIOLOOP_READ, 0, BLK);
	gint64 took;
	ssize_t ret;

	add_rule(f, &r);
	ret = async_submit(f, io, &took);
	ck_assert_msg(ret == -EIO, "an injected error without latency is "
		      "returned inline: expected -EIO, got %zd", ret);
	g_usleep(20000);
	ck_assert_msg(io->completions == 0,
		      "an inline result has no callback (got %d)",
		      io->completions);
	async_io_free(io);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_sync_latency_sleeps)
{
	struct backend *f = open_fault("size=1M", NULL);
	struct fault_rule r = { .ops = FAULT_OP_WRITE | FAULT_OP_FLUSH,
				.latency_us = 50000 };
	char buf[BLK] = { 1 };
	struct fault_stats st;
	gint64 t0;

	add_rule(f, &r);
	t0 = g_get_monotonic_time();
	ck_assert_int_eq(backend_pwrite(f, buf, BLK, 0), BLK);
	ck_assert_msg(g_get_monotonic_time() - t0 >= 50000,
		      "a synchronous write waits out its 50 ms latency");
	t0 = g_get_monotonic_time();
	ck_assert_int_eq(backend_flush(f), 0);
	ck_assert_msg(g_get_monotonic_time() - t0 >= 50000,
		      "flush waits out its 50 ms latency");
	fault_backend_get_stats(f, &st);
	ck_assert_msg(st.delayed[FAULT_KIND_WRITE] == 1 &&
		      st.delayed[FAULT_KIND_FLUSH] == 1 &&
		      st.injected[FAULT_KIND_WRITE] == 0,
		      "one delayed write and flush, nothing injected");
	backend_close(f);
}
END_TEST

/* A blocking op submitted through fault_backend_submit_op. */
struct submitted_op {
	struct fault_op op;
	GMutex lock;
	GCond cond;
	int calls;			/* by lock */
	ssize_t ret;			/* by lock */
	gint64 done_at;			/* by lock */
};

static void submitted_op_done(struct fault_op *op, ssize_t ret)
{
	struct submitted_op *so = (struct submitted_op *)op;

	g_mutex_lock(&so->lock);
	so->calls++;
	so->ret = ret;
	so->done_at = g_get_monotonic_time();
	g_cond_signal(&so->cond);
	g_mutex_unlock(&so->lock);
}

/* Submit a blocking op; returns submit's result and how long it took. */
static ssize_t submit_op(struct backend *f, struct submitted_op *so,
			 enum fault_op_kind kind, uint64_t pos, uint64_t len,
			 gint64 *took)
{
	gint64 t0 = g_get_monotonic_time();
	ssize_t ret;

	g_mutex_init(&so->lock);
	g_cond_init(&so->cond);
	so->calls = 0;
	so->op = (struct fault_op){ .kind = kind, .pos = pos, .len = len,
				    .done = submitted_op_done };
	ret = fault_backend_submit_op(f, &so->op);
	*took = g_get_monotonic_time() - t0;
	return ret;
}

/* Wait for so's done (up to 5 s); its result. */
static ssize_t submitted_op_wait(struct submitted_op *so)
{
	gint64 deadline = g_get_monotonic_time() + 5000000;
	ssize_t ret;

	g_mutex_lock(&so->lock);
	while (!so->calls &&
	       g_cond_wait_until(&so->cond, &so->lock, deadline))
		;
	ck_assert_msg(so->calls == 1, "done called once within 5 s, got %d",
		      so->calls);
	ret = so->ret;
	g_mutex_unlock(&so->lock);
	return ret;
}

static void submitted_op_clear(struct submitted_op *so)
{
	g_mutex_clear(&so->lock);
	g_cond_clear(&so->cond);
}

/* A delayed flush or discard submitted as an op holds no thread: submit
 * returns at once and the delay thread runs the op once due. */
START_TEST(test_fault_submit_op_delays_without_blocking)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_FLUSH | FAULT_OP_DISCARD,
				.latency_us = LATENCY_US };
	struct submitted_op so;
	gint64 took, t0, looked;
	bool intact;
	ssize_t ret;

	ck_assert_int_eq(write_block(f, 1), BLK);
	add_rule(f, &r);
	t0 = g_get_monotonic_time();
	ret = submit_op(f, &so, FAULT_KIND_FLUSH, 0, 0, &took);
	ck_assert_msg(ret == -EIOCBQUEUED, "a delayed flush is queued: "
		      "expected -EIOCBQUEUED, got %zd", ret);
	ck_assert_msg(took < LATENCY_US, "submitting a flush with %d us "
		      "of latency returns at once, took %lld us", LATENCY_US,
		      (long long)took);
	ck_assert_int_eq(submitted_op_wait(&so), 0);
	ck_assert_msg(so.done_at - t0 >= LATENCY_US, "the flush completes "
		      "after its latency: %lld us < %d us",
		      (long long)(so.done_at - t0), LATENCY_US);
	submitted_op_clear(&so);

	t0 = g_get_monotonic_time();
	ret = submit_op(f, &so, FAULT_KIND_DISCARD, BLK, BLK, &took);
	ck_assert_int_eq(ret, -EIOCBQUEUED);
	intact = block_has_pattern(mem, 1);
	looked = g_get_monotonic_time() - t0;
	/* Only a look that ended within the latency proves the discard ran
	 * early: a submitter preempted longer saw it run, rightly. */
	ck_assert_msg(intact || looked >= LATENCY_US, "a delayed discard "
		      "has not run before its latency: gone %lld us after "
		      "submit (latency %d us)", (long long)looked, LATENCY_US);
	ck_assert_int_eq(submitted_op_wait(&so), 0);
	ck_assert_msg(block_is_zero(mem, 1), "the delayed discard ran");
	submitted_op_clear(&so);
	backend_close(f);
}
END_TEST

/* Without latency an op runs inline; an injected error with latency
 * comes through done and the op never runs. */
START_TEST(test_fault_submit_op_errors_inline_and_delayed)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct fault_rule now = { .ops = FAULT_OP_WRITE_ZEROES, .error = EIO };
	struct fault_rule later = { .ops = FAULT_OP_DISCARD, .error = ENOSPC,
				    .latency_us = LATENCY_US };
	struct submitted_op so;
	gint64 took;

	ck_assert_int_eq(write_block(f, 2), BLK);
	ck_assert_int_eq(submit_op(f, &so, FAULT_KIND_FLUSH, 0, 0, &took), 0);
	submitted_op_clear(&so);
	add_rule(f, &now);
	add_rule(f, &later);
	ck_assert_int_eq(submit_op(f, &so, FAULT_KIND_WRITE_ZEROES, 2 * BLK,
				   BLK, &took), -EIO);
	submitted_op_clear(&so);
	ck_assert_int_eq(submit_op(f, &so, FAULT_KIND_DISCARD, 2 * BLK, BLK,
				   &took), -EIOCBQUEUED);
	ck_assert_int_eq(submitted_op_wait(&so), -ENOSPC);
	submitted_op_clear(&so);
	ck_assert_msg(block_has_pattern(mem, 2), "failed ops leave the data");
	ck_assert_int_eq(submit_op(f, &so, FAULT_KIND_READ, 0, BLK, &took),
			 -EINVAL);
	submitted_op_clear(&so);
	backend_close(f);
}
END_TEST

/* A delayed clone_range submitted as an op: queued, then run on the
 * inner backends (mem has no clone: EOPNOTSUPP) once due, whether the
 * source has a fault filter or not. */
START_TEST(test_fault_submit_op_delays_clone_range)
{
	struct backend *mem, *f = open_fault("size=1M", NULL);
	struct backend *g = open_fault("size=1M", &mem);
	struct fault_rule r = { .ops = FAULT_OP_CLONE_RANGE,
				.latency_us = LATENCY_US };
	struct submitted_op so;
	gint64 took, t0;
	ssize_t ret;

	add_rule(g, &r);
	g_mutex_init(&so.lock);
	g_cond_init(&so.cond);
	so.calls = 0;
	so.op = (struct fault_op){ .kind = FAULT_KIND_CLONE_RANGE, .src = f,
				   .src_pos = 0, .pos = BLK, .len = BLK,
				   .done = submitted_op_done };
	t0 = g_get_monotonic_time();
	ret = fault_backend_submit_op(g, &so.op);
	took = g_get_monotonic_time() - t0;
	ck_assert_msg(ret == -EIOCBQUEUED && took < LATENCY_US,
		      "a delayed clone is queued at once: got %zd after %lld "
		      "us", ret, (long long)took);
	ck_assert_int_eq(submitted_op_wait(&so), -EOPNOTSUPP);
	ck_assert_msg(so.done_at - t0 >= LATENCY_US, "the clone runs after "
		      "its latency");
	so.calls = 0;
	/* A source without a fault filter is a plain backend (the filter
	 * is stacked only on nodes that have rules). */
	so.op.src = mem;
	ck_assert_int_eq(fault_backend_submit_op(g, &so.op), -EIOCBQUEUED);
	ck_assert_int_eq(submitted_op_wait(&so), -EOPNOTSUPP);
	submitted_op_clear(&so);
	backend_close(f);
	backend_close(g);
}
END_TEST

/* Many delayed async writes with different latencies all complete once,
 * with the right data, while rules change under them. */
START_TEST(test_fault_async_many_delayed_complete_once)
{
	enum { N = 32 };
	struct backend *mem, *f = open_fault("size=1M,async", &mem);
	struct async_io *ios[N];
	struct test_rng rng;
	unsigned int i;

	test_rng_init(&rng, 7);
	for (i = 0; i < N; i++) {
		struct fault_rule r = {
			.ops = FAULT_OP_WRITE,
			.range_start = (uint64_t)i * BLK,
			.range_len = BLK,
			.latency_us = (unsigned int)test_rng_range(&rng, 1000,
								   30000),
		};
		gint64 took;
		ssize_t ret;

		add_rule(f, &r);
		ios[i] = async_io_new(DIOLOOP_WRITE, (uint64_t)i * BLK, BLK);
		fill_block(ios[i]->buf, i);
		ret = async_submit(f, ios[i], &took);
		ck_assert_msg(ret == -EIOCBQUEUED,
			      "write %u: expected -EIOCBQUEUED, got %zd", i,
			      ret);
	}
	fault_backend_clear(f);
	for (i = 0; i < N; i++) {
		async_wait(ios[i]);
		ck_assert_msg(ios[i]->res == BLK,
			      "write %u: expected %u, got %zd", i, BLK,
			      ios[i]->res);
	}
	g_usleep(40000);
	for (i = 0; i < N; i++) {
		ck_assert_msg(ios[i]->completions == 1,
			      "write %u completed %d times, expected once", i,
			      ios[i]->completions);
		ck_assert_msg(block_has_pattern(mem, i), "block %u written", i);
		async_io_free(ios[i]);
	}
	backend_close(f);
}
END_TEST

struct rule_flipper {
	struct backend *f;
	atomic_bool stop;
	unsigned int flips;
};

static gpointer flip_rules(gpointer data)
{
	struct rule_flipper *fl = data;
	struct fault_rule r = { .ops = FAULT_OP_READ, .every = 2,
				.error = EIO };

	while (!atomic_load(&fl->stop)) {
		fault_backend_add_rule(fl->f, &r);
		g_usleep(100);
		fault_backend_clear(fl->f);
		fl->flips++;
	}
	return NULL;
}

START_TEST(test_fault_rules_change_while_io_runs)
{
	struct backend *mem, *f = open_fault("size=1M", &mem);
	struct rule_flipper fl = { .f = f };
	unsigned int i, n = test_iterations(2000);
	GThread *t;
	char buf[BLK], want[BLK];

	ck_assert_int_eq(write_block(f, 5), BLK);
	fill_block(want, 5);
	t = g_thread_new("flipper", flip_rules, &fl);
	for (i = 0; i < n; i++) {
		ssize_t ret = backend_pread(f, buf, BLK, 5 * BLK);

		ck_assert_msg(ret == -EIO || (ret == BLK && !memcmp(buf, want,
								   BLK)),
			      "read %u: expected -EIO or the data, got %zd", i,
			      ret);
	}
	atomic_store(&fl.stop, true);
	g_thread_join(t);
	fault_backend_clear(f);
	ck_assert_int_eq(backend_pread(f, buf, BLK, 5 * BLK), BLK);
	backend_close(f);
}
END_TEST

START_TEST(test_fault_open_without_inner_fails)
{
	struct backend_open_args args = { .path = "x" };
	struct backend *f = (struct backend *)&args;
	int ret = backend_open("fault", &args, &f);

	ck_assert_msg(ret == -EINVAL && f == NULL,
		      "fault without inner: expected -EINVAL and no backend, got %d",
		      ret);
}
END_TEST

static Suite *fault_suite(void)
{
	Suite *s = suite_create("fault");
	TCase *rules = tcase_create("rules");
	TCase *latency = tcase_create("latency");

	tcase_set_timeout(rules, 300);
	tcase_add_test(rules, test_fault_nth_fails_only_nth);
	tcase_add_test(rules, test_fault_every_kth_read);
	tcase_add_test(rules, test_fault_range_hits_only_touching_ops);
	tcase_add_test(rules, test_fault_fraction_is_seeded_and_near_target);
	tcase_add_test(rules, test_fault_flush_discard_zeroes_errors);
	tcase_add_test(rules, test_fault_clear_restores_pass_through);
	tcase_add_test(rules, test_fault_add_rule_rejects_invalid);
	tcase_add_test(rules, test_fault_forwards_limits_map_info_resize);
	tcase_add_test(rules, test_fault_map_resize_clone_errors);
	tcase_add_test(rules, test_fault_rules_change_while_io_runs);
	tcase_add_test(rules, test_fault_open_without_inner_fails);
	suite_add_tcase(s, rules);

	tcase_set_timeout(latency, 300);
	tcase_add_test(latency, test_fault_async_latency_inner_inline);
	tcase_add_test(latency, test_fault_async_latency_inner_async);
	tcase_add_test(latency, test_fault_async_error_with_latency_completes_later);
	tcase_add_test(latency, test_fault_async_error_inline_without_latency);
	tcase_add_test(latency, test_fault_sync_latency_sleeps);
	tcase_add_test(latency, test_fault_submit_op_delays_without_blocking);
	tcase_add_test(latency, test_fault_submit_op_errors_inline_and_delayed);
	tcase_add_test(latency, test_fault_submit_op_delays_clone_range);
	tcase_add_test(latency, test_fault_async_many_delayed_complete_once);
	suite_add_tcase(s, latency);
	return s;
}

int main(void)
{
	return test_run_suite(fault_suite());
}
