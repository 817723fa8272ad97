/* SPDX-License-Identifier: MIT */
/*
 * The dio engine, driven directly: this file is its own backend (an
 * in-memory store with a get_block and a submit_io it controls), so each
 * test can choose the mapping, fail one I/O of a request, or complete I/Os
 * from other threads in random order.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/dio.h"
#include "tests/testutil.h"

#define STORE_SIZE (1u << 20)
#define SECTOR 512u

struct eng {
	struct backend b;
	struct dio_engine dio;		/* the engine's locks and counters */
	unsigned char *store;		/* physical bytes */
	unsigned char *written;		/* per 512-byte logical sector */
	bool fragment;			/* logical page p -> physical p ^ 1 */
	bool async;			/* complete I/Os on pool threads */
	unsigned dev_bits;
	atomic_int io_seen;
	int fail_io;			/* fail this I/O (1-based), 0 = none */
	int fail_errno;
	GMutex lock;			/* store and written */
	GThreadPool *pool;
	struct test_rng rng;		/* completion delays; by lock */
};

static struct eng *eng_from(struct backend *b)
{
	return (struct eng *)b;
}

static uint64_t eng_phys(const struct eng *e, uint64_t pos)
{
	if (!e->fragment)
		return pos;
	return ((pos >> 12) ^ 1) << 12 | (pos & 4095);
}

static int eng_get_block(struct backend *b, void *priv, uint64_t pos,
			 uint64_t len, bool create, struct dio_map *map)
{
	struct eng *e = eng_from(b);
	uint64_t n, s;
	bool hole;

	ck_assert_msg(pos % SECTOR == 0 && len % SECTOR == 0,
		      "get_block gets sector-aligned ranges (pos %llu len %llu)",
		      (unsigned long long)pos, (unsigned long long)len);
	if (e->fragment && len > 4096 - (pos & 4095))
		len = 4096 - (pos & 4095);
	g_mutex_lock(&e->lock);
	hole = !create && !e->written[pos / SECTOR];
	for (n = 0; n < len; n += SECTOR) {
		s = (pos + n) / SECTOR;
		if (create)
			e->written[s] = 1;
		else if (!e->written[s] != hole)
			break;
	}
	g_mutex_unlock(&e->lock);
	map->len = n;
	map->hole = hole;
	map->phys = eng_phys(e, pos);
	map->fd = -1;
	return 0;
}

static void eng_do_io(struct eng *e, struct dio_io *io)
{
	uint64_t phys = io->phys;
	int i, idx = atomic_fetch_add(&e->io_seen, 1) + 1;

	if (idx == e->fail_io) {
		dio_io_complete(io, -e->fail_errno);
		return;
	}
	g_mutex_lock(&e->lock);
	for (i = 0; i < io->nr_iov; i++) {
		struct iovec *v = &io->iov[i];

		if (io->write)
			memcpy(e->store + phys, v->iov_base, v->iov_len);
		else
			memcpy(v->iov_base, e->store + phys, v->iov_len);
		phys += v->iov_len;
	}
	g_mutex_unlock(&e->lock);
	dio_io_complete(io, (long)io->len);
}

static void eng_pool_func(gpointer data, gpointer user)
{
	struct eng *e = user;
	unsigned delay;

	g_mutex_lock(&e->lock);
	delay = (unsigned)test_rng_range(&e->rng, 0, 300);
	g_mutex_unlock(&e->lock);
	g_usleep(delay);
	eng_do_io(e, data);
}

static void eng_submit(struct backend *b, struct dio_io **ios, int n)
{
	struct eng *e = eng_from(b);
	int i;

	for (i = 0; i < n; i++) {
		if (e->async)
			g_thread_pool_push(e->pool, ios[i], NULL);
		else
			eng_do_io(e, ios[i]);
	}
}

static struct eng *eng_new(unsigned dev_align, bool async)
{
	struct eng *e = g_new0(struct eng, 1);

	e->store = g_malloc0(STORE_SIZE);
	e->written = g_malloc0(STORE_SIZE / SECTOR);
	e->dev_bits = (unsigned)g_bit_nth_lsf(dev_align, -1);
	e->async = async;
	e->b.limits = (struct backend_limits){
		.request_alignment = dev_align, .mem_alignment = dev_align,
		.block_size = 4096, .max_transfer = 1u << 20, .max_segs = 1024,
	};
	e->b.path = "eng";
	dio_engine_init(&e->dio);
	g_mutex_init(&e->lock);
	test_rng_init(&e->rng, 77);
	e->pool = g_thread_pool_new(eng_pool_func, e, 3, TRUE, NULL);
	return e;
}

static void eng_free(struct eng *e)
{
	g_thread_pool_free(e->pool, FALSE, TRUE);
	dio_engine_clear(&e->dio);
	g_mutex_clear(&e->lock);
	g_free(e->store);
	g_free(e->written);
	g_free(e);
}

/* Logical content of the store, independent of the engine. */
static void eng_peek(struct eng *e, uint64_t pos, void *buf, size_t len)
{
	unsigned char *out = buf;
	size_t i;

	g_mutex_lock(&e->lock);
	for (i = 0; i < len; i++)
		out[i] = e->written[(pos + i) / SECTOR] ?
			 e->store[eng_phys(e, pos + i)] : 0;
	g_mutex_unlock(&e->lock);
}

/* Caller memory as bio_vecs: separately allocated pages, the first piece
 * at first_off, later pieces at later_off, pieces at most piece_max. */
struct bvbuf {
	struct bio_vec bv[600];
	void *pages[600];
	int nr;
	struct iov_iter it;
};

static void bvbuf_init(struct bvbuf *m, size_t len, unsigned first_off,
		       unsigned later_off, unsigned piece_max)
{
	unsigned off = first_off;
	size_t total = len;

	m->nr = 0;
	while (len) {
		size_t n = 4096 - off;
		void *page;

		if (n > piece_max)
			n = piece_max;
		if (n > len)
			n = len;
		ck_assert_int_lt(m->nr, 600);
		ck_assert_int_eq(posix_memalign(&page, 4096, 4096), 0);
		memset(page, 0xEE, 4096);
		m->pages[m->nr] = page;
		m->bv[m->nr++] = (struct bio_vec){ page, (unsigned)n, off };
		len -= n;
		off = later_off;
	}
	iov_iter_init_bvec(&m->it, m->bv, (unsigned long)m->nr, total, 0);
}

static void bvbuf_free(struct bvbuf *m)
{
	int i;

	for (i = 0; i < m->nr; i++)
		free(m->pages[i]);
	m->nr = 0;
}

struct waiter {
	GMutex lock;
	GCond cond;
	int calls;
	ssize_t res;
};

static void waiter_complete(struct kiocb *iocb, ssize_t res)
{
	struct waiter *w = iocb->ki_private;

	g_mutex_lock(&w->lock);
	w->calls++;
	w->res = res;
	g_cond_broadcast(&w->cond);
	g_mutex_unlock(&w->lock);
}

/* One request through the engine; async kiocbs are waited for here and
 * must complete exactly once. */
static ssize_t eng_rw(struct eng *e, int rw, uint64_t pos, struct iov_iter *it,
		      size_t count, bool async_kiocb)
{
	struct waiter w = { .calls = 0 };
	struct kiocb k = { .ki_rw = rw, .ki_pos = pos, .ki_iter = it,
			   .ki_complete = async_kiocb ? waiter_complete : NULL,
			   .ki_private = &w };
	struct dio_params p = {
		.engine = &e->dio,
		.count = count, .blkbits = 12, .dev_blkbits = e->dev_bits,
		.get_block = eng_get_block, .map_private = e,
		.submit_io = eng_submit, .flags = DIO_SKIP_HOLES,
	};
	bool queued;
	ssize_t ret;

	g_mutex_init(&w.lock);
	g_cond_init(&w.cond);
	ret = blockdev_direct_IO_bvec(&e->b, &k, &p);
	queued = ret == -EIOCBQUEUED;
	if (queued) {
		ck_assert_msg(async_kiocb, "-EIOCBQUEUED only for async kiocbs");
		g_mutex_lock(&w.lock);
		while (!w.calls)
			g_cond_wait(&w.cond, &w.lock);
		g_mutex_unlock(&w.lock);
		ret = w.res;
	}
	/* Give a wrongly doubled completion time to show up. */
	if (async_kiocb && e->async)
		g_usleep(500);
	g_mutex_lock(&w.lock);
	ck_assert_msg(w.calls == (queued ? 1 : 0),
		      "ki_complete runs once iff -EIOCBQUEUED was returned "
		      "(queued %d, calls %d)", queued, w.calls);
	g_mutex_unlock(&w.lock);
	g_mutex_clear(&w.lock);
	g_cond_clear(&w.cond);
	return ret;
}

START_TEST(test_dio_aligned_helper)
{
	unsigned bits = 12;

	ck_assert_msg(dio_aligned(8192, &bits, 9) && bits == 12,
		      "fs-block aligned: true, blkbits stays 12");
	ck_assert_msg(dio_aligned(512, &bits, 9) && bits == 9,
		      "only sector aligned: true, blkbits falls back to 9");
	bits = 12;
	ck_assert_msg(!dio_aligned(100, &bits, 9) && bits == 9,
		      "unaligned: false, blkbits set to the device's");
	bits = 12;
	ck_assert_msg(!dio_aligned(512, &bits, 12) && bits == 12,
		      "512 with a 4096 device: false");
}
END_TEST

static const uint64_t matrix_offsets[] = { 0, 512, 1024, 4096, 1, 511, 8191 };
static const size_t matrix_lengths[] = { 512, 4096, 8192, 1, 100, 4097,
					 3 * 4096 + 512 };
static const unsigned matrix_bvoffs[] = { 0, 512, 1 };

static void run_matrix(unsigned dev, bool async_io, bool async_kiocb)
{
	struct eng *e = eng_new(dev, async_io);
	unsigned char *model = g_malloc0(STORE_SIZE);
	unsigned char *want = g_malloc(65536), *got = g_malloc(65536);
	struct test_rng rng;
	size_t oi, li, bi;

	test_rng_init(&rng, dev + async_io * 2 + async_kiocb);
	for (oi = 0; oi < G_N_ELEMENTS(matrix_offsets); oi++)
	for (li = 0; li < G_N_ELEMENTS(matrix_lengths); li++)
	for (bi = 0; bi < G_N_ELEMENTS(matrix_bvoffs); bi++) {
		uint64_t pos = matrix_offsets[oi] + 65536 * (oi + 1);
		size_t len = matrix_lengths[li];
		unsigned bvoff = matrix_bvoffs[bi];
		struct bvbuf m;
		uint64_t bounced0 = atomic_load(&e->dio.stats.bounced);
		uint64_t rmw0 = atomic_load(&e->dio.stats.rmw);
		bool aligned, sub;
		ssize_t ret;
		int k;

		/* Write a fresh pattern through pieces starting at bvoff. */
		bvbuf_init(&m, len, bvoff, bvoff, 4096);
		test_rng_fill(&rng, want, len);
		iov_iter_copy_from_buf(&m.it, want, len);
		iov_iter_init_bvec(&m.it, m.bv, (unsigned long)m.nr, len, 0);
		ret = eng_rw(e, DIOLOOP_WRITE, pos, &m.it, len, async_kiocb);
		ck_assert_msg(ret == (ssize_t)len,
			      "dev %u write pos %llu len %zu bvoff %u: "
			      "expected %zu, got %zd", dev,
			      (unsigned long long)pos, len, bvoff, len, ret);
		memcpy(model + pos, want, len);

		aligned = pos % dev == 0 && len % dev == 0;
		sub = aligned;
		for (k = 0; k < m.nr; k++)
			if ((m.bv[k].bv_offset | m.bv[k].bv_len) % dev)
				aligned = false;
		ck_assert_msg(atomic_load(&e->dio.stats.bounced) - bounced0 ==
			      (aligned ? 0u : 1u),
			      "dev %u pos %llu len %zu bvoff %u: bounced iff "
			      "unaligned (aligned=%d)", dev,
			      (unsigned long long)pos, len, bvoff, aligned);
		ck_assert_msg(atomic_load(&e->dio.stats.rmw) - rmw0 ==
			      (sub ? 0u : 1u),
			      "read-modify-write iff offset/length unaligned");
		bvbuf_free(&m);

		/* The store holds exactly the model around the write. */
		eng_peek(e, pos - 4096, got, len + 8192);
		ck_assert_msg(memcmp(got, model + pos - 4096, len + 8192) == 0,
			      "store equals the model around pos %llu len %zu",
			      (unsigned long long)pos, len);

		/* Read it back through differently cut pieces. */
		bvbuf_init(&m, len + 1000, (bvoff + 7) % 4096, 0, 1500);
		ret = eng_rw(e, DIOLOOP_READ, pos - 500, &m.it, len + 1000,
			     async_kiocb);
		ck_assert_msg(ret == (ssize_t)(len + 1000),
			      "read back: expected %zu, got %zd", len + 1000,
			      ret);
		iov_iter_copy_to_buf(got, &m.it, len + 1000);
		ck_assert_msg(memcmp(got, model + pos - 500, len + 1000) == 0,
			      "read back equals the model (dev %u pos %llu "
			      "len %zu)", dev, (unsigned long long)pos, len);
		bvbuf_free(&m);
	}
	g_free(model);
	g_free(want);
	g_free(got);
	eng_free(e);
}

START_TEST(test_dio_alignment_matrix_512)
{
	run_matrix(512, false, false);
	run_matrix(512, true, true);
}
END_TEST

START_TEST(test_dio_alignment_matrix_4096)
{
	run_matrix(4096, false, true);
	run_matrix(4096, true, false);
}
END_TEST

START_TEST(test_dio_holes_read_as_zeros_without_io)
{
	struct eng *e = eng_new(512, false);
	struct bvbuf m;
	unsigned char *got = g_malloc(65536), zero[4096] = { 0 };
	ssize_t ret;
	int i;

	bvbuf_init(&m, 65536, 0, 0, 4096);
	ret = eng_rw(e, DIOLOOP_READ, 0, &m.it, 65536, false);
	ck_assert_int_eq(ret, 65536);
	ck_assert_msg(atomic_load(&e->dio.stats.ios) == 0,
		      "reading a hole submits no I/O");
	ck_assert_msg(atomic_load(&e->dio.stats.holes) >= 1,
		      "the hole was counted");
	iov_iter_copy_to_buf(got, &m.it, 65536);
	for (i = 0; i < 16; i++)
		ck_assert_msg(memcmp(got + i * 4096, zero, 4096) == 0,
			      "hole page %d reads as zeros (not the 0xEE "
			      "the pages were filled with)", i);
	bvbuf_free(&m);

	/* One written page in the middle: one I/O, zeros around it. */
	bvbuf_init(&m, 4096, 0, 0, 4096);
	memset(got, 0x5A, 4096);
	iov_iter_copy_from_buf(&m.it, got, 4096);
	iov_iter_init_bvec(&m.it, m.bv, 1, 4096, 0);
	ck_assert_int_eq(eng_rw(e, DIOLOOP_WRITE, 32768, &m.it, 4096, false),
			 4096);
	bvbuf_free(&m);
	atomic_store(&e->dio.stats.ios, 0);
	bvbuf_init(&m, 65536, 0, 0, 4096);
	ck_assert_int_eq(eng_rw(e, DIOLOOP_READ, 0, &m.it, 65536, false),
			 65536);
	ck_assert_msg(atomic_load(&e->dio.stats.ios) == 1,
		      "only the written page is read (got %llu I/Os)",
		      (unsigned long long)atomic_load(&e->dio.stats.ios));
	iov_iter_copy_to_buf(got, &m.it, 65536);
	for (i = 0; i < 16; i++) {
		unsigned char want[4096];

		memset(want, i == 8 ? 0x5A : 0, sizeof(want));
		ck_assert_msg(memcmp(got + i * 4096, want, 4096) == 0,
			      "page %d: %s", i, i == 8 ? "written data" :
			      "zeros");
	}
	bvbuf_free(&m);
	g_free(got);
	eng_free(e);
}
END_TEST

/* Write 16 pages at 0 and return how many I/Os and iovecs it took. */
static void coalesce_case(bool fragment, uint32_t max_segs,
			  uint32_t max_transfer, bool contiguous_memory,
			  uint64_t *ios, uint64_t *segs)
{
	struct eng *e = eng_new(512, false);
	struct bio_vec bv[16];
	struct iov_iter it;
	void *mem = NULL;
	struct bvbuf m;
	int i;

	e->fragment = fragment;
	if (max_segs)
		e->b.limits.max_segs = max_segs;
	if (max_transfer)
		e->b.limits.max_transfer = max_transfer;
	if (contiguous_memory) {
		ck_assert_int_eq(posix_memalign(&mem, 4096, 65536), 0);
		memset(mem, 1, 65536);
		for (i = 0; i < 16; i++)
			bv[i] = (struct bio_vec){ (char *)mem + i * 4096, 4096, 0 };
		iov_iter_init_bvec(&it, bv, 16, 65536, 0);
	} else {
		bvbuf_init(&m, 65536, 0, 0, 4096);
		it = m.it;
	}
	ck_assert_int_eq(eng_rw(e, DIOLOOP_WRITE, 0, &it, 65536, false), 65536);
	*ios = atomic_load(&e->dio.stats.ios);
	*segs = atomic_load(&e->dio.stats.segs);
	if (contiguous_memory)
		free(mem);
	else
		bvbuf_free(&m);
	eng_free(e);
}

START_TEST(test_dio_coalesces_contiguous_pages)
{
	uint64_t ios, segs;

	coalesce_case(false, 0, 0, false, &ios, &segs);
	ck_assert_msg(ios == 1 && segs == 16,
		      "16 separate pages, contiguous on disk: 1 I/O with 16 "
		      "iovecs (got %llu, %llu)", (unsigned long long)ios,
		      (unsigned long long)segs);
	coalesce_case(false, 0, 0, true, &ios, &segs);
	ck_assert_msg(ios == 1 && segs == 1,
		      "contiguous memory merges into 1 iovec (got %llu, %llu)",
		      (unsigned long long)ios, (unsigned long long)segs);
	coalesce_case(true, 0, 0, false, &ios, &segs);
	ck_assert_msg(ios == 16,
		      "pages not contiguous on disk: 16 I/Os (got %llu)",
		      (unsigned long long)ios);
	coalesce_case(false, 4, 0, false, &ios, &segs);
	ck_assert_msg(ios == 4 && segs == 16,
		      "max_segs 4: 4 I/Os (got %llu)", (unsigned long long)ios);
	coalesce_case(false, 0, 16384, true, &ios, &segs);
	ck_assert_msg(ios == 4, "max_transfer 16 KiB: 4 I/Os (got %llu)",
		      (unsigned long long)ios);
}
END_TEST

static void error_case(bool async_io, bool async_kiocb, int fail_errno)
{
	struct eng *e = eng_new(512, async_io);
	struct bvbuf m;
	ssize_t ret;

	e->fragment = true;	/* 8 pages -> 8 I/Os */
	e->fail_io = 4;
	e->fail_errno = fail_errno;
	bvbuf_init(&m, 32768, 0, 0, 4096);
	ret = eng_rw(e, DIOLOOP_WRITE, 0, &m.it, 32768, async_kiocb);
	ck_assert_msg(atomic_load(&e->io_seen) == 8,
		      "all 8 I/Os were issued (got %d)",
		      atomic_load(&e->io_seen));
	ck_assert_msg(ret == -fail_errno,
		      "an error in I/O 4 of 8 fails the request with it: "
		      "expected %d, got %zd", -fail_errno, ret);
	bvbuf_free(&m);
	eng_free(e);
}

START_TEST(test_dio_error_mid_request_fails_whole_request_once)
{
	error_case(false, false, EIO);
	error_case(false, true, EIO);
	error_case(true, false, ENOSPC);
	error_case(true, true, EIO);
}
END_TEST

START_TEST(test_dio_rejects_bad_requests)
{
	struct eng *e = eng_new(512, false);
	char buf[512];
	struct iovec iov = { buf, sizeof(buf) };
	struct iov_iter it;

	iov_iter_init(&it, &iov, 1, sizeof(buf), 0);
	ck_assert_msg(eng_rw(e, DIOLOOP_READ, 0, &it, 512, false) == -EINVAL,
		      "an iovec iterator is refused with -EINVAL");
	ck_assert_msg(eng_rw(e, DIOLOOP_READ, 0, &it, 0, false) == 0,
		      "count 0 returns 0");
	eng_free(e);
}
END_TEST

struct writer {
	struct eng *e;
	unsigned char value;
	uint64_t pos;
	size_t len;
	bool async_kiocb;
	pthread_barrier_t *barrier;
};

static gpointer writer_thread(gpointer data)
{
	struct writer *w = data;
	unsigned char buf[8192];
	struct bvbuf m;

	memset(buf, w->value, sizeof(buf));
	bvbuf_init(&m, w->len, (unsigned)(w->pos % 4096), 0, 4096);
	iov_iter_copy_from_buf(&m.it, buf, w->len);
	iov_iter_init_bvec(&m.it, m.bv, (unsigned long)m.nr, w->len, 0);
	pthread_barrier_wait(w->barrier);
	ck_assert_int_eq(eng_rw(w->e, DIOLOOP_WRITE, w->pos, &m.it, w->len,
				w->async_kiocb), (ssize_t)w->len);
	bvbuf_free(&m);
	return NULL;
}

static void write_sync(struct eng *e, uint64_t pos, size_t len,
		       unsigned char value)
{
	unsigned char buf[8192];
	struct bvbuf m;

	memset(buf, value, len);
	bvbuf_init(&m, len, 0, 0, 4096);
	iov_iter_copy_from_buf(&m.it, buf, len);
	iov_iter_init_bvec(&m.it, m.bv, (unsigned long)m.nr, len, 0);
	ck_assert_int_eq(eng_rw(e, DIOLOOP_WRITE, pos, &m.it, len, false),
			 (ssize_t)len);
	bvbuf_free(&m);
}

/* True if applying the four writers' ranges in some order to a block of
 * 'Z' gives got (writes serialised, no stale read-modify-write). */
static bool some_order_explains(const struct writer *w, const unsigned char *got)
{
	static const int perms[24][4] = {
		{0,1,2,3},{0,1,3,2},{0,2,1,3},{0,2,3,1},{0,3,1,2},{0,3,2,1},
		{1,0,2,3},{1,0,3,2},{1,2,0,3},{1,2,3,0},{1,3,0,2},{1,3,2,0},
		{2,0,1,3},{2,0,3,1},{2,1,0,3},{2,1,3,0},{2,3,0,1},{2,3,1,0},
		{3,0,1,2},{3,0,2,1},{3,1,0,2},{3,1,2,0},{3,2,0,1},{3,2,1,0},
	};
	unsigned char sim[8192];
	int p, k;

	for (p = 0; p < 24; p++) {
		memset(sim, 'Z', sizeof(sim));
		for (k = 0; k < 4; k++) {
			const struct writer *x = &w[perms[p][k]];

			memset(sim + x->pos, x->value, x->len);
		}
		if (memcmp(sim, got, sizeof(sim)) == 0)
			return true;
	}
	return false;
}

/* Four writers at once over overlapping unaligned ranges: every trial
 * leaves the blocks as some serial order of the four writes would, and
 * never a mix (a read-modify-write that read before another write landed
 * would bring back old bytes). */
START_TEST(test_dio_overlapping_unaligned_writes_never_mix)
{
	struct eng *e = eng_new(512, true);
	int trial, trials = (int)test_iterations(200), i;
	pthread_barrier_t barrier;

	for (trial = 0; trial < trials; trial++) {
		struct writer w[4];
		GThread *th[4];
		unsigned char got[8192];

		write_sync(e, 0, 8192, 'Z');
		pthread_barrier_init(&barrier, NULL, 4);
		for (i = 0; i < 4; i++) {
			w[i] = (struct writer){ e, (unsigned char)('a' + i),
						600 + 150 * (uint64_t)i, 3000,
						i % 2 == 0, &barrier };
			th[i] = g_thread_new("writer", writer_thread, &w[i]);
		}
		for (i = 0; i < 4; i++)
			g_thread_join(th[i]);
		pthread_barrier_destroy(&barrier);
		eng_peek(e, 0, got, sizeof(got));
		ck_assert_msg(some_order_explains(w, got),
			      "trial %d: the blocks are not the result of any "
			      "serial order of the four writes", trial);
	}
	eng_free(e);
}
END_TEST

/* An aligned write and a read-modify-write of the same block race: the
 * head of the block that only the aligned write covers must end up with
 * its data; a stale read by the RMW would bring back the old 'Z'. */
START_TEST(test_dio_rmw_and_aligned_write_never_interleave)
{
	struct eng *e = eng_new(512, true);
	int trial, trials = (int)test_iterations(300);
	pthread_barrier_t barrier;

	for (trial = 0; trial < trials; trial++) {
		struct writer a = { e, 'A', 512, 512, true, &barrier };
		struct writer r = { e, 'B', 700, 324, true, &barrier };
		unsigned char got[512];
		GThread *ta, *tr;
		size_t k;

		write_sync(e, 0, 4096, 'Z');
		pthread_barrier_init(&barrier, NULL, 2);
		ta = g_thread_new("aligned", writer_thread, &a);
		tr = g_thread_new("rmw", writer_thread, &r);
		g_thread_join(ta);
		g_thread_join(tr);
		pthread_barrier_destroy(&barrier);
		eng_peek(e, 512, got, sizeof(got));
		for (k = 0; k < 188; k++)
			ck_assert_msg(got[k] == 'A',
				      "trial %d: byte %zu of the block is %#x, "
				      "expected the aligned write's 'A'", trial,
				      512 + k, got[k]);
		for (k = 188; k < 512; k++)
			ck_assert_msg(got[k] == 'A' || got[k] == 'B',
				      "trial %d: byte %zu is %#x", trial,
				      512 + k, got[k]);
	}
	eng_free(e);
}
END_TEST

static Suite *dio_suite(void)
{
	Suite *s = suite_create("dio");
	TCase *tc = tcase_create("alignment");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_dio_aligned_helper);
	tcase_add_test(tc, test_dio_alignment_matrix_512);
	tcase_add_test(tc, test_dio_alignment_matrix_4096);
	tcase_add_test(tc, test_dio_rejects_bad_requests);
	suite_add_tcase(s, tc);

	tc = tcase_create("mapping");
	tcase_add_test(tc, test_dio_holes_read_as_zeros_without_io);
	tcase_add_test(tc, test_dio_coalesces_contiguous_pages);
	suite_add_tcase(s, tc);

	tc = tcase_create("completion");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_dio_error_mid_request_fails_whole_request_once);
	tcase_add_test(tc, test_dio_overlapping_unaligned_writes_never_mix);
	tcase_add_test(tc, test_dio_rmw_and_aligned_write_never_interleave);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(dio_suite());
}
