/* SPDX-License-Identifier: MIT */
/* Page pool: alignment, cap, all-or-nothing, stats, reuse, threads. */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iter/iov_iter.h"
#include "iter/page_pool.h"
#include "tests/testutil.h"

static struct dioloop_page_pool *pool_new_or_fail(size_t prealloc, size_t cap)
{
	struct dioloop_page_pool *pool = NULL;
	int ret = dioloop_page_pool_new(prealloc, cap, &pool);

	ck_assert_msg(ret == 0 && pool,
		      "expected a pool (prealloc %zu, cap %zu), got %d",
		      prealloc, cap, ret);
	return pool;
}

static struct dioloop_page_pool_stats pool_stats(struct dioloop_page_pool *p)
{
	struct dioloop_page_pool_stats st;

	dioloop_page_pool_get_stats(p, &st);
	return st;
}

/* One page without waiting, or NULL when cap pages are in use. */
static void *get_one(struct dioloop_page_pool *pool)
{
	void *page;

	return dioloop_page_pool_get_many(pool, &page, 1) == 0 ? page : NULL;
}

/* Give n pages back, one put each. */
static void put_all(struct dioloop_page_pool *pool, void **pages, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++)
		dioloop_page_pool_put(pool, pages[k]);
}

static bool page_aligned(const void *page)
{
	return ((uintptr_t)page & (DIOLOOP_PAGE_SIZE - 1)) == 0;
}

START_TEST(test_page_pool_new_invalid)
{
	struct dioloop_page_pool *pool = (void *)&pool;

	ck_assert_msg(dioloop_page_pool_new(0, 0, &pool) == -EINVAL,
		      "expected -EINVAL for cap 0");
	ck_assert_msg(dioloop_page_pool_new(5, 4, &pool) == -EINVAL,
		      "expected -EINVAL for prealloc > cap");
	ck_assert_msg(pool == (void *)&pool,
		      "expected *out untouched on error");
	dioloop_page_pool_free(NULL);
}
END_TEST

/* Every page is aligned, distinct and a whole page of its own. */
START_TEST(test_page_pool_alignment)
{
	struct test_rng r;
	size_t cap, prealloc, n, k;
	struct dioloop_page_pool *pool;
	unsigned char **pages;
	GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);

	test_rng_init(&r, 1);
	cap = test_rng_range(&r, 1, 300);
	prealloc = test_rng_range(&r, 0, cap);
	pool = pool_new_or_fail(prealloc, cap);
	pages = g_new(unsigned char *, cap);
	for (n = 0; n < cap; n++) {
		pages[n] = get_one(pool);
		ck_assert_msg(pages[n] != NULL,
			      "expected page %zu of cap %zu", n, cap);
		ck_assert_msg(page_aligned(pages[n]),
			      "expected page %p aligned to %zu", pages[n],
			      DIOLOOP_PAGE_SIZE);
		ck_assert_msg(g_hash_table_add(seen, pages[n]),
			      "expected page %p handed out once", pages[n]);
		memset(pages[n], (int)(n & 0xff), DIOLOOP_PAGE_SIZE);
	}
	/* Pages overlapping would have overwritten each other's pattern. */
	for (n = 0; n < cap; n++) {
		for (k = 0; k < DIOLOOP_PAGE_SIZE; k++)
			if (pages[n][k] != (unsigned char)(n & 0xff))
				break;
		ck_assert_msg(k == DIOLOOP_PAGE_SIZE,
			      "expected page %zu to keep its pattern (pages "
			      "don't overlap)", n);
	}
	for (n = 0; n < cap; n++)
		dioloop_page_pool_put(pool, pages[n]);
	dioloop_page_pool_free(pool);
	g_hash_table_destroy(seen);
	g_free(pages);
}
END_TEST

START_TEST(test_page_pool_get_until_cap)
{
	static const size_t caps[] = { 1, 63, 64, 65, 130 };
	size_t c;

	for (c = 0; c < G_N_ELEMENTS(caps); c++) {
		size_t cap = caps[c], n;
		struct dioloop_page_pool *pool = pool_new_or_fail(0, cap);
		void **pages = g_new(void *, cap);
		struct dioloop_page_pool_stats st;
		void *again;

		for (n = 0; n < cap; n++) {
			pages[n] = get_one(pool);
			ck_assert_msg(pages[n] != NULL,
				      "cap %zu: expected page %zu", cap, n);
		}
		ck_assert_msg(get_one(pool) == NULL,
			      "cap %zu: expected NULL once cap pages are out",
			      cap);
		st = pool_stats(pool);
		ck_assert_msg(st.in_use == cap && st.allocated == cap &&
			      st.cap == cap && st.high_water == cap,
			      "cap %zu: expected in_use = allocated = "
			      "high_water = cap, got %zu/%zu/%zu", cap,
			      st.in_use, st.allocated, st.high_water);
		dioloop_page_pool_put(pool, pages[cap / 2]);
		again = get_one(pool);
		ck_assert_msg(again == pages[cap / 2],
			      "cap %zu: expected the page just put back", cap);
		put_all(pool, pages, cap);
		ck_assert_msg(pool_stats(pool).in_use == 0,
			      "expected in_use 0 after putting all back");
		dioloop_page_pool_free(pool);
		g_free(pages);
	}
}
END_TEST

START_TEST(test_page_pool_get_many_all_or_nothing)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(2, 10);
	void *held[3], *many[10];
	size_t k;

	for (k = 0; k < 3; k++)
		held[k] = get_one(pool);
	memset(many, 0, sizeof(many));
	ck_assert_msg(dioloop_page_pool_get_many(pool, many, 8) == -ENOMEM,
		      "expected -ENOMEM asking 8 with 7 left");
	ck_assert_msg(pool_stats(pool).in_use == 3,
		      "expected a failed get_many to take nothing");
	for (k = 0; k < 8; k++)
		ck_assert_msg(many[k] == NULL,
			      "expected a failed get_many not to fill pages");
	ck_assert_msg(dioloop_page_pool_get_many(pool, many, 0) == 0,
		      "expected get_many of 0 to succeed");
	ck_assert_msg(dioloop_page_pool_get_many(pool, many, 7) == 0,
		      "expected get_many of exactly the 7 left to succeed");
	for (k = 0; k < 7; k++)
		ck_assert_msg(many[k] && page_aligned(many[k]),
			      "expected get_many page %zu aligned", k);
	ck_assert_msg(pool_stats(pool).in_use == 10 &&
		      pool_stats(pool).allocated == 10,
		      "expected all 10 pages in use");
	ck_assert_msg(get_one(pool) == NULL,
		      "expected get to fail at cap after get_many");
	ck_assert_msg(dioloop_page_pool_get_many(pool, many + 7, 1) == -ENOMEM,
		      "expected get_many of 1 at cap to fail");
	put_all(pool, many, 7);
	put_all(pool, held, 3);
	ck_assert_msg(pool_stats(pool).in_use == 0,
		      "expected in_use 0 after the puts");
	dioloop_page_pool_free(pool);
}
END_TEST

/* A random get/put sequence against a model of in_use and high_water
 * (which counts this thread's cache too: at most THREAD_PAGES more). */
START_TEST(test_page_pool_stats)
{
	struct test_rng r;
	unsigned n, iters = test_iterations(20000);
	size_t cap, prealloc, held = 0, high = 0;
	struct dioloop_page_pool *pool;
	void **pages;

	test_rng_init(&r, 2);
	cap = test_rng_range(&r, 1, 200);
	prealloc = test_rng_range(&r, 0, cap);
	pool = pool_new_or_fail(prealloc, cap);
	pages = g_new(void *, cap);
	ck_assert_msg(pool_stats(pool).allocated == prealloc,
		      "expected exactly prealloc = %zu pages allocated at "
		      "first", prealloc);
	for (n = 0; n < iters; n++) {
		struct dioloop_page_pool_stats st;

		if (test_rng_range(&r, 0, 1) && held < cap) {
			pages[held] = get_one(pool);
			ck_assert_msg(pages[held] != NULL,
				      "expected a page below cap");
			held++;
		} else if (held) {
			size_t k = test_rng_range(&r, 0, held - 1);

			dioloop_page_pool_put(pool, pages[k]);
			pages[k] = pages[--held];
		}
		high = MAX(high, held);
		st = pool_stats(pool);
		ck_assert_msg(st.in_use == held && st.high_water >= high &&
			      st.high_water <=
				      high + DIOLOOP_PAGE_POOL_THREAD_PAGES,
			      "expected in_use %zu, high_water %zu + up to a "
			      "cache; got %zu, %zu", held, high, st.in_use,
			      st.high_water);
		ck_assert_msg(st.allocated <= cap &&
			      st.allocated >= st.high_water &&
			      st.allocated >= prealloc &&
			      st.allocated < MAX(prealloc, st.high_water) + 64,
			      "expected allocated (%zu) lazily grown in chunks "
			      "of <= 64 between max(prealloc, high_water) and "
			      "cap", st.allocated);
	}
	put_all(pool, pages, held);
	dioloop_page_pool_free(pool);
	g_free(pages);
}
END_TEST

START_TEST(test_page_pool_prealloc)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(100, 100);
	void *pages[100];

	ck_assert_msg(pool_stats(pool).allocated == 100,
		      "expected 100 pages preallocated");
	ck_assert_msg(dioloop_page_pool_get_many(pool, pages, 100) == 0,
		      "expected all preallocated pages at once");
	ck_assert_msg(pool_stats(pool).allocated == 100,
		      "expected no growth past the preallocation");
	put_all(pool, pages, 100);
	dioloop_page_pool_free(pool);
}
END_TEST

/* Put then get hands back the same page (LIFO: still warm in cache). */
START_TEST(test_page_pool_reuse)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(0, 8);
	void *a = get_one(pool), *b = get_one(pool);

	dioloop_page_pool_put(pool, a);
	ck_assert_msg(get_one(pool) == a,
		      "expected the page just put to be reused");
	dioloop_page_pool_put(pool, b);
	dioloop_page_pool_put(pool, a);
	ck_assert_msg(pool_stats(pool).allocated <= 8 &&
		      pool_stats(pool).in_use == 0,
		      "expected in_use 0 after reuse");
	dioloop_page_pool_free(pool);
}
END_TEST

/* ---- programming errors abort ---- */

START_TEST(test_page_pool_put_foreign_aborts)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(1, 4);
	static char foreign[2 * 4096];
	char *page = (char *)(((uintptr_t)foreign + 4095) & ~(uintptr_t)4095);

	dioloop_page_pool_put(pool, page);
	ck_abort_msg("expected put of a foreign page to abort");
}
END_TEST

START_TEST(test_page_pool_put_twice_aborts)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(1, 4);
	void *page = get_one(pool);

	dioloop_page_pool_put(pool, page);
	dioloop_page_pool_put(pool, page);
	ck_abort_msg("expected a second put of the same page to abort");
}
END_TEST

START_TEST(test_page_pool_free_in_use_aborts)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(1, 4);

	ck_assert_msg(get_one(pool) != NULL, "expected a page");
	dioloop_page_pool_free(pool);
	ck_abort_msg("expected freeing a pool with pages out to abort");
}
END_TEST

/* ---- threads ---- */

struct shared {
	struct dioloop_page_pool *pool;
	GMutex lock;
	GHashTable *out;	/* pages handed out; protected by lock */
	unsigned ops;
	gint dup;		/* a page was handed out twice */
	gint corrupt;		/* a page's pattern changed while held */
};

static void claim(struct shared *sh, unsigned char *page, unsigned char tag)
{
	g_mutex_lock(&sh->lock);
	if (!g_hash_table_add(sh->out, page))
		g_atomic_int_set(&sh->dup, 1);
	g_mutex_unlock(&sh->lock);
	memset(page, tag, DIOLOOP_PAGE_SIZE);
}

static void release(struct shared *sh, unsigned char *page, unsigned char tag)
{
	if (page[0] != tag || page[DIOLOOP_PAGE_SIZE / 2] != tag ||
	    page[DIOLOOP_PAGE_SIZE - 1] != tag)
		g_atomic_int_set(&sh->corrupt, 1);
	g_mutex_lock(&sh->lock);
	g_hash_table_remove(sh->out, page);
	g_mutex_unlock(&sh->lock);
}

struct worker {
	struct shared *sh;
	unsigned id;
};

/*
 * Hold up to 8 pages each, more than cap in all.  Only a thread holding
 * nothing blocks (get_wait); with pages it uses get / get_many, so a waiter
 * never holds what another waiter needs and the test cannot deadlock.
 */
static gpointer worker_thread(gpointer data)
{
	struct worker *w = data;
	struct shared *sh = w->sh;
	unsigned char tag = (unsigned char)(w->id + 1);
	unsigned char *held[8];
	size_t nr = 0;
	struct test_rng r;
	unsigned n;

	test_rng_init(&r, 100 + w->id);
	for (n = 0; n < sh->ops; n++) {
		unsigned what = (unsigned)test_rng_range(&r, 0, 3);
		void *two[2];

		if (!nr) {
			held[nr] = dioloop_page_pool_get_wait(sh->pool);
			if (!held[nr])
				return GINT_TO_POINTER(1);
			claim(sh, held[nr++], tag);
		} else if (what == 0 && nr < 8) {
			unsigned char *p = get_one(sh->pool);

			if (p) {
				claim(sh, p, tag);
				held[nr++] = p;
			}
		} else if (what == 1 && nr <= 6) {
			if (!dioloop_page_pool_get_many(sh->pool, two, 2)) {
				claim(sh, two[0], tag);
				claim(sh, two[1], tag);
				held[nr++] = two[0];
				held[nr++] = two[1];
			}
		} else if (what == 2) {
			release(sh, held[--nr], tag);
			dioloop_page_pool_put(sh->pool, held[nr]);
		} else {
			size_t k;

			for (k = 0; k < nr; k++)
				release(sh, held[k], tag);
			put_all(sh->pool, (void **)held,
						   nr);
			nr = 0;
		}
	}
	while (nr) {
		release(sh, held[--nr], tag);
		dioloop_page_pool_put(sh->pool, held[nr]);
	}
	return NULL;
}

START_TEST(test_page_pool_threads_never_share)
{
	enum { NR_THREADS = 4, CAP = 6 };
	struct shared sh = { 0 };
	struct worker w[NR_THREADS];
	GThread *th[NR_THREADS];
	struct dioloop_page_pool_stats st;
	unsigned k;

	sh.pool = pool_new_or_fail(4, CAP);
	g_mutex_init(&sh.lock);
	sh.out = g_hash_table_new(g_direct_hash, g_direct_equal);
	sh.ops = test_iterations(10000);
	for (k = 0; k < NR_THREADS; k++) {
		w[k].sh = &sh;
		w[k].id = k;
		th[k] = g_thread_new("pool-worker", worker_thread, &w[k]);
	}
	for (k = 0; k < NR_THREADS; k++)
		ck_assert_msg(g_thread_join(th[k]) == NULL,
			      "expected get_wait never to return NULL");
	ck_assert_msg(!g_atomic_int_get(&sh.dup),
		      "expected no page handed out twice at once");
	ck_assert_msg(!g_atomic_int_get(&sh.corrupt),
		      "expected no page written by another thread while held");
	st = pool_stats(sh.pool);
	ck_assert_msg(st.in_use == 0, "expected in_use 0 at the end, got %zu",
		      st.in_use);
	ck_assert_msg(st.high_water <= CAP && st.allocated <= CAP,
		      "expected never more than cap pages");
	ck_assert_msg(g_hash_table_size(sh.out) == 0,
		      "expected every page released");
	dioloop_page_pool_free(sh.pool);
	g_hash_table_destroy(sh.out);
	g_mutex_clear(&sh.lock);
}
END_TEST

struct waiter {
	struct dioloop_page_pool *pool;
	void *page;
	gint done;
};

static gpointer waiter_thread(gpointer data)
{
	struct waiter *w = data;

	w->page = dioloop_page_pool_get_wait(w->pool);
	g_atomic_int_set(&w->done, 1);
	return NULL;
}

START_TEST(test_page_pool_get_wait_wakes_on_put)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(0, 2);
	struct waiter w[2] = { { pool, NULL, 0 }, { pool, NULL, 0 } };
	void *pages[2];
	GThread *th[2];
	int k;

	/* One waiter, woken by put. */
	ck_assert_msg(dioloop_page_pool_get_many(pool, pages, 2) == 0,
		      "expected both pages");
	th[0] = g_thread_new("waiter", waiter_thread, &w[0]);
	g_usleep(100 * 1000);
	ck_assert_msg(!g_atomic_int_get(&w[0].done),
		      "expected get_wait to block while cap pages are out");
	dioloop_page_pool_put(pool, pages[1]);
	g_thread_join(th[0]);
	ck_assert_msg(w[0].page == pages[1],
		      "expected the waiter to get the page just put");

	/* Two waiters, both woken by two puts. */
	pages[1] = w[0].page;
	w[0].page = NULL;
	w[0].done = 0;
	for (k = 0; k < 2; k++)
		th[k] = g_thread_new("waiter", waiter_thread, &w[k]);
	g_usleep(100 * 1000);
	ck_assert_msg(!g_atomic_int_get(&w[0].done) &&
		      !g_atomic_int_get(&w[1].done),
		      "expected both waiters blocked");
	put_all(pool, pages, 2);
	for (k = 0; k < 2; k++)
		g_thread_join(th[k]);
	ck_assert_msg(w[0].page && w[1].page && w[0].page != w[1].page,
		      "expected two puts to wake both waiters with distinct "
		      "pages");
	dioloop_page_pool_put(pool, w[0].page);
	dioloop_page_pool_put(pool, w[1].page);
	dioloop_page_pool_free(pool);
}
END_TEST

/* Threads that each need several pages at once, more in all than cap:
 * taking them all together, none holds some while it waits for the
 * rest, so they cannot hold the pool between them and wait for ever. */
struct several {
	struct dioloop_page_pool *pool;
	unsigned id, rounds;
	gint *bad;
};

static gpointer several_thread(gpointer data)
{
	struct several *sv = data;
	struct test_rng r;
	unsigned n;

	test_rng_init(&r, 300 + sv->id);
	for (n = 0; n < sv->rounds; n++) {
		size_t k, want = test_rng_range(&r, 2, 4);
		unsigned char *pages[4];

		dioloop_page_pool_get_many_wait(sv->pool, (void **)pages,
						want);
		for (k = 0; k < want; k++)
			pages[k][0] = (unsigned char)sv->id;
		g_thread_yield();
		for (k = 0; k < want; k++)
			if (pages[k][0] != (unsigned char)sv->id)
				g_atomic_int_set(sv->bad, 1);
		dioloop_page_pool_put_many(sv->pool, (void **)pages, want);
	}
	return NULL;
}

START_TEST(test_page_pool_get_many_wait_no_deadlock)
{
	enum { NR_THREADS = 4, CAP = 6 };
	struct dioloop_page_pool *pool = pool_new_or_fail(0, CAP);
	struct several sv[NR_THREADS];
	GThread *th[NR_THREADS];
	gint bad = 0;
	unsigned k;

	for (k = 0; k < NR_THREADS; k++) {
		sv[k] = (struct several){ pool, k, test_iterations(5000),
					  &bad };
		th[k] = g_thread_new("several", several_thread, &sv[k]);
	}
	for (k = 0; k < NR_THREADS; k++)
		g_thread_join(th[k]);
	ck_assert_msg(!g_atomic_int_get(&bad),
		      "expected no page shared by two threads at once");
	ck_assert_msg(pool_stats(pool).in_use == 0, "expected in_use 0");
	dioloop_page_pool_free(pool);
}
END_TEST

/* get_many_wait returns only when all n are free, and then all of them. */
struct many_waiter {
	struct dioloop_page_pool *pool;
	void *pages[3];
	gint done;
};

static gpointer many_waiter_thread(gpointer data)
{
	struct many_waiter *w = data;

	dioloop_page_pool_get_many_wait(w->pool, w->pages, 3);
	g_atomic_int_set(&w->done, 1);
	return NULL;
}

START_TEST(test_page_pool_get_many_wait_all_together)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(0, 4);
	struct many_waiter w = { .pool = pool };
	void *held[4];
	GThread *th;

	ck_assert(dioloop_page_pool_get_many(pool, held, 4) == 0);
	th = g_thread_new("many-waiter", many_waiter_thread, &w);
	dioloop_page_pool_put_many(pool, held, 2);
	g_usleep(100 * 1000);
	ck_assert_msg(!g_atomic_int_get(&w.done),
		      "expected a wait for 3 pages to go on with 2 free");
	ck_assert_msg(pool_stats(pool).in_use == 2,
		      "expected the waiter to hold none of the 2 free pages");
	dioloop_page_pool_put(pool, held[2]);
	g_thread_join(th);
	ck_assert_msg(w.pages[0] && w.pages[1] && w.pages[2] &&
		      w.pages[0] != w.pages[1] && w.pages[1] != w.pages[2] &&
		      w.pages[0] != w.pages[2],
		      "expected 3 distinct pages");
	dioloop_page_pool_put_many(pool, w.pages, 3);
	dioloop_page_pool_put(pool, held[3]);
	dioloop_page_pool_free(pool);
}
END_TEST

/* ---- thread caches ---- */

/* A request's worth of pages got and put on one thread takes the shared
 * lock only to fill its cache. */
START_TEST(test_page_pool_cache_one_thread)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(0, 1024);
	unsigned n, iters = test_iterations(10000);
	void *pages[16];
	uint64_t trips;

	for (n = 0; n < iters; n++) {
		size_t k = n % 2 ? 1 : 16;

		ck_assert_msg(dioloop_page_pool_get_many(pool, pages, k) == 0,
			      "expected %zu pages", k);
		dioloop_page_pool_put_many(pool, pages, k);
	}
	trips = pool_stats(pool).shared_trips;
	ck_assert_msg(trips <= 2,
		      "expected the shared lock taken only to fill the "
		      "cache, got %" PRIu64 " trips for %u gets and puts",
		      trips, iters);
	ck_assert_msg(pool_stats(pool).in_use == 0, "expected in_use 0");
	dioloop_page_pool_free(pool);
}
END_TEST

/* Pages got on one thread and put on another (a FUSE worker and a
 * completion thread) move between them in batches: a small fraction of
 * a shared trip per page, and every page handed out once at a time. */
struct handoff {
	struct dioloop_page_pool *pool;
	GAsyncQueue *queue;	/* pages from the getter to the putter */
	unsigned pages;
};

static gpointer handoff_putter(gpointer data)
{
	struct handoff *h = data;
	unsigned n;

	for (n = 0; n < h->pages; n++) {
		unsigned char *page = g_async_queue_pop(h->queue);

		if (page[0] != (unsigned char)n)
			return GINT_TO_POINTER(1);
		dioloop_page_pool_put(h->pool, page);
	}
	return NULL;
}

START_TEST(test_page_pool_cache_two_threads)
{
	struct handoff h = { .pool = pool_new_or_fail(0, 256),
			     .queue = g_async_queue_new(),
			     .pages = test_iterations(20000) };
	GThread *putter = g_thread_new("putter", handoff_putter, &h);
	uint64_t trips;
	unsigned n;

	for (n = 0; n < h.pages; n++) {
		unsigned char *page = dioloop_page_pool_get_wait(h.pool);

		page[0] = (unsigned char)n;
		g_async_queue_push(h.queue, page);
	}
	ck_assert_msg(g_thread_join(putter) == NULL,
		      "expected every page to arrive as written");
	trips = pool_stats(h.pool).shared_trips;
	ck_assert_msg(trips <= h.pages / 8,
		      "expected at most one shared trip per 8 pages, got %"
		      PRIu64 " for %u pages", trips, h.pages);
	ck_assert_msg(pool_stats(h.pool).in_use == 0, "expected in_use 0");
	g_async_queue_unref(h.queue);
	dioloop_page_pool_free(h.pool);
}
END_TEST

/* A thread that put pages into its cache and then idles (or ends) does not
 * keep them from another thread that needs every page. */
struct idler {
	struct dioloop_page_pool *pool;
	GMutex lock;
	GCond cond;
	bool cached, leave;
};

static gpointer idler_thread(gpointer data)
{
	struct idler *id = data;
	void *pages[8];

	ck_assert(dioloop_page_pool_get_many(id->pool, pages, 8) == 0);
	dioloop_page_pool_put_many(id->pool, pages, 8);
	g_mutex_lock(&id->lock);
	id->cached = true;
	g_cond_broadcast(&id->cond);
	while (!id->leave)
		g_cond_wait(&id->cond, &id->lock);
	g_mutex_unlock(&id->lock);
	return NULL;
}

/* Take all cap pages at once, then give them back. */
static void take_all(struct dioloop_page_pool *pool, size_t cap,
		     const char *when)
{
	void **pages = g_new(void *, cap);
	size_t k;

	ck_assert_msg(dioloop_page_pool_get_many(pool, pages, cap) == 0,
		      "expected all %zu pages at once %s", cap, when);
	for (k = 0; k < cap; k += 8)
		dioloop_page_pool_put_many(pool, pages + k, MIN(8, cap - k));
	g_free(pages);
}

START_TEST(test_page_pool_cache_stolen)
{
	enum { CAP = 40 };
	struct idler id = { .pool = pool_new_or_fail(0, CAP) };
	GThread *th;
	void *one[CAP];
	size_t got;

	g_mutex_init(&id.lock);
	g_cond_init(&id.cond);
	th = g_thread_new("idler", idler_thread, &id);
	g_mutex_lock(&id.lock);
	while (!id.cached)
		g_cond_wait(&id.cond, &id.lock);
	g_mutex_unlock(&id.lock);
	/* Small gets, through this thread's cache, see them too. */
	for (got = 0; got < CAP; got++)
		if (dioloop_page_pool_get_many(id.pool, &one[got], 1) < 0)
			break;
	put_all(id.pool, one, got);
	g_mutex_lock(&id.lock);
	id.leave = true;
	g_cond_broadcast(&id.cond);
	g_mutex_unlock(&id.lock);
	g_thread_join(th);
	ck_assert_msg(got == CAP,
		      "expected %d pages one by one with another thread's "
		      "cache full, got %zu", CAP, got);
	id.cached = id.leave = false;
	th = g_thread_new("idler", idler_thread, &id);
	g_mutex_lock(&id.lock);
	while (!id.cached)
		g_cond_wait(&id.cond, &id.lock);
	id.leave = true;
	g_cond_broadcast(&id.cond);
	g_mutex_unlock(&id.lock);
	g_thread_join(th);
	take_all(id.pool, CAP, "after the thread that cached them ended");
	ck_assert_msg(pool_stats(id.pool).in_use == 0, "expected in_use 0");
	dioloop_page_pool_free(id.pool);
	g_cond_clear(&id.cond);
	g_mutex_clear(&id.lock);
}
END_TEST

/* A thread waiting for the last page is woken by a put that lands in
 * another thread's cache, however the two interleave. */
struct relay {
	struct dioloop_page_pool *pool;
	void *page;
	unsigned rounds;
};

static gpointer relay_waiter(gpointer data)
{
	struct relay *r = data;
	unsigned n;

	for (n = 0; n < r->rounds; n++) {
		void *page = dioloop_page_pool_get_wait(r->pool);

		dioloop_page_pool_put(r->pool, page);
	}
	return NULL;
}

START_TEST(test_page_pool_cache_wakes_waiter)
{
	struct relay r = { .pool = pool_new_or_fail(0, 1),
			   .rounds = test_iterations(20000) };
	GThread *th = g_thread_new("waiter", relay_waiter, &r);
	unsigned n;

	for (n = 0; n < r.rounds; n++) {
		void *page = dioloop_page_pool_get_wait(r.pool);

		dioloop_page_pool_put(r.pool, page);
	}
	g_thread_join(th);
	ck_assert_msg(pool_stats(r.pool).in_use == 0, "expected in_use 0");
	dioloop_page_pool_free(r.pool);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan a free page is poisoned: a use after put ends the process as
 * a use after free would. */
START_TEST(test_page_pool_use_after_put_is_caught)
{
	struct dioloop_page_pool *pool = pool_new_or_fail(1, 4);
	volatile char *page = get_one(pool);

	page[0] = 1;
	dioloop_page_pool_put(pool, (void *)page);
	page[1] = 2;	/* ASan reports this and exits with status 1 */
	/* Not reported: leave nothing for LeakSanitizer, whose report would
	 * exit with status 1 too, and end with status 0. */
	dioloop_page_pool_free(pool);
}
END_TEST
#endif

static Suite *page_pool_suite(void)
{
	Suite *s = suite_create("page_pool");
	TCase *tc;

	tc = tcase_create("basics");
	tcase_add_test(tc, test_page_pool_new_invalid);
	tcase_add_test(tc, test_page_pool_alignment);
	tcase_add_test(tc, test_page_pool_get_until_cap);
	tcase_add_test(tc, test_page_pool_get_many_all_or_nothing);
	tcase_add_test(tc, test_page_pool_prealloc);
	tcase_add_test(tc, test_page_pool_reuse);
	suite_add_tcase(s, tc);

	tc = tcase_create("stats");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_page_pool_stats);
	suite_add_tcase(s, tc);

	tc = tcase_create("misuse");
	tcase_add_test_raise_signal(tc, test_page_pool_put_foreign_aborts,
				    SIGABRT);
	tcase_add_test_raise_signal(tc, test_page_pool_put_twice_aborts,
				    SIGABRT);
	tcase_add_test_raise_signal(tc, test_page_pool_free_in_use_aborts,
				    SIGABRT);
#if defined(__SANITIZE_ADDRESS__)
	tcase_add_exit_test(tc, test_page_pool_use_after_put_is_caught, 1);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_page_pool_threads_never_share);
	tcase_add_test(tc, test_page_pool_get_wait_wakes_on_put);
	tcase_add_test(tc, test_page_pool_get_many_wait_all_together);
	tcase_add_test(tc, test_page_pool_get_many_wait_no_deadlock);
	suite_add_tcase(s, tc);

	tc = tcase_create("thread caches");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_page_pool_cache_one_thread);
	tcase_add_test(tc, test_page_pool_cache_two_threads);
	tcase_add_test(tc, test_page_pool_cache_stolen);
	tcase_add_test(tc, test_page_pool_cache_wakes_waiter);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(page_pool_suite());
}
