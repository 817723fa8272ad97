/* SPDX-License-Identifier: MIT */
/*
 * The page pool (see page_pool.h).
 *
 * Memory: one anonymous mapping of cap pages, reserved at creation and
 * brought into use from the bottom, POOL_GROW_PAGES at a time, as the
 * shared store runs dry.  A page's index in the mapping gives its state
 * byte (free or out), which catches foreign pages and second puts with
 * one exchange and no lock, wherever the page is put.
 *
 * The shared store is a stack of free pages under pool->lock.  Each thread
 * has a number (the lowest not held by a live thread), and its cache in a
 * pool is pool->caches[number]: a stack of free pages under a lock of its
 * own, which only its thread takes, except a thread taking pages back from
 * every cache when the store runs short.  A cache outlives its thread and
 * goes, pages and all, to the next thread given the same number.
 *
 * Lock order: pool->lock, then a cache's lock.  A thread never takes
 * pool->lock while it holds a cache's lock.
 *
 * A put into a cache and a thread starting to wait are ordered like
 * Dekker's: the putter fills its cache, then reads `waiters`; the waiter
 * raises `waiters`, then empties every cache.  With a seq_cst fence on
 * each side, either the putter sees the waiter and gives its cache to the
 * store, or the waiter finds the putter's pages.
 */
#include "iter/page_pool.h"

#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <glib.h>

#include "iter/iov_iter.h"

/* Pages the store brings into use at once when it runs dry. */
#define POOL_GROW_PAGES 64
/* Pages a cache moves to or from the store at once. */
#define CACHE_BATCH (DIOLOOP_PAGE_POOL_THREAD_PAGES / 2)
/* Threads alive at once that get a cache; others use the store. */
#define POOL_MAX_THREADS 1024

enum { PAGE_FREE = 0, PAGE_OUT = 1 };

struct page_cache {
	alignas(64) GMutex lock;
	unsigned int nr;		/* pages[0..nr): free, top last */
	int64_t net;			/* pages got minus pages put here */
	void *pages[DIOLOOP_PAGE_POOL_THREAD_PAGES];
};

/*
 * Below the lock, everything is protected by it.  Invariants: the store
 * holds nr_free pages; out == allocated - nr_free (pages in use or in a
 * cache); allocated <= cap.
 */
struct dioloop_page_pool {
	char *base;			/* cap pages, mapped at creation */
	size_t cap;
	_Atomic unsigned char *state;	/* PAGE_FREE or PAGE_OUT, per page */
	atomic_uint waiters;		/* threads waiting for pages; by lock */
	_Atomic(struct page_cache *) caches[POOL_MAX_THREADS];

	GMutex lock;
	GCond cond;			/* the store gained pages */
	void **free;			/* the store: cap slots */
	size_t nr_free;
	size_t allocated;
	size_t out;
	size_t high_water;		/* of out */
	int64_t net;			/* pages got minus put via the store */
	uint64_t shared_trips;
};

/* ---- thread numbers ---- */

static GMutex thread_numbers_lock;
static uint64_t thread_numbers[POOL_MAX_THREADS / 64];
static _Thread_local unsigned int thread_number_plus1;

static void thread_number_release(gpointer data)
{
	unsigned int n = GPOINTER_TO_UINT(data) - 1;

	g_mutex_lock(&thread_numbers_lock);
	thread_numbers[n / 64] &= ~((uint64_t)1 << (n % 64));
	g_mutex_unlock(&thread_numbers_lock);
	thread_number_plus1 = 0;
}

static GPrivate thread_number_key = G_PRIVATE_INIT(thread_number_release);

/* This thread's number, or -1 when POOL_MAX_THREADS threads have one. */
static int thread_number(void)
{
	unsigned int w;

	if (thread_number_plus1)
		return (int)thread_number_plus1 - 1;
	g_mutex_lock(&thread_numbers_lock);
	for (w = 0; w < G_N_ELEMENTS(thread_numbers); w++) {
		if (thread_numbers[w] != UINT64_MAX) {
			unsigned int bit = (unsigned int)__builtin_ctzll(
				~thread_numbers[w]);

			thread_numbers[w] |= (uint64_t)1 << bit;
			thread_number_plus1 = w * 64 + bit + 1;
			break;
		}
	}
	g_mutex_unlock(&thread_numbers_lock);
	if (!thread_number_plus1)
		return -1;
	g_private_set(&thread_number_key,
		      GUINT_TO_POINTER(thread_number_plus1));
	return (int)thread_number_plus1 - 1;
}

/* ---- pages ---- */

/* Under AddressSanitizer a free page is poisoned, so a use after put is
 * reported like a use after free. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define page_poison(p) ASAN_POISON_MEMORY_REGION((p), DIOLOOP_PAGE_SIZE)
#define page_unpoison(p) ASAN_UNPOISON_MEMORY_REGION((p), DIOLOOP_PAGE_SIZE)
/* Before the mapping goes: the next mapping at its address starts clean. */
#define pool_unpoison(pool)                                                \
	ASAN_UNPOISON_MEMORY_REGION((pool)->base,                          \
				    (pool)->cap * DIOLOOP_PAGE_SIZE)
#else
#define page_poison(p) ((void)(p))
#define page_unpoison(p) ((void)(p))
#define pool_unpoison(pool) ((void)(pool))
#endif

/* Hand pages out: each was free. */
static void pages_mark_out(struct dioloop_page_pool *pool, void **pages,
			   size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		size_t idx = (size_t)((char *)pages[k] - pool->base) /
			     DIOLOOP_PAGE_SIZE;
		/* Not inside g_assert: the exchange must happen without it. */
		unsigned char was = atomic_exchange_explicit(
			&pool->state[idx], PAGE_OUT, memory_order_relaxed);

		g_assert(was == PAGE_FREE);
		page_unpoison(pages[k]);
	}
}

/* Take pages back: each must be ours and out.  Programming errors, not
 * input: a page from elsewhere, a pointer into a page, or a page put twice
 * would hand one page to two requests. */
static void pages_mark_free(struct dioloop_page_pool *pool, void **pages,
			    size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		char *page = pages[k];
		unsigned char was;
		size_t idx;

		g_assert(page >= pool->base &&
			 page < pool->base + pool->cap * DIOLOOP_PAGE_SIZE);
		g_assert(((uintptr_t)page & (DIOLOOP_PAGE_SIZE - 1)) == 0);
		idx = (size_t)(page - pool->base) / DIOLOOP_PAGE_SIZE;
		was = atomic_exchange_explicit(&pool->state[idx], PAGE_FREE,
					       memory_order_relaxed);
		g_assert(was == PAGE_OUT);
		page_poison(page);
	}
}

/* ---- the shared store (pool->lock held) ---- */

/* Bring pages into use until the store holds need, or limit (<= cap)
 * pages are in use. */
static void store_grow(struct dioloop_page_pool *pool, size_t need,
		       size_t limit)
{
	while (pool->nr_free < need && pool->allocated < limit) {
		size_t n = MIN((size_t)POOL_GROW_PAGES,
			       limit - pool->allocated);
		size_t k;

		/* Pushed from the top: the lowest address goes first. */
		for (k = n; k-- > 0;) {
			char *page = pool->base + (pool->allocated + k) *
							  DIOLOOP_PAGE_SIZE;

			page_poison(page);
			pool->free[pool->nr_free++] = page;
		}
		pool->allocated += n;
	}
}

static void store_push(struct dioloop_page_pool *pool, void *const *pages,
		       size_t n)
{
	memcpy(&pool->free[pool->nr_free], pages, n * sizeof(*pages));
	pool->nr_free += n;
	pool->out -= n;
	if (atomic_load(&pool->waiters))
		g_cond_broadcast(&pool->cond);
}

/* Move a cache's pages to the store. */
static void store_drain_cache(struct dioloop_page_pool *pool,
			      struct page_cache *cache)
{
	g_mutex_lock(&cache->lock);
	store_push(pool, cache->pages, cache->nr);
	cache->nr = 0;
	g_mutex_unlock(&cache->lock);
}

/* Take back the pages of every thread's cache. */
static void store_steal(struct dioloop_page_pool *pool)
{
	size_t i;

	for (i = 0; i < POOL_MAX_THREADS; i++) {
		struct page_cache *cache = atomic_load_explicit(
			&pool->caches[i], memory_order_acquire);

		if (cache)
			store_drain_cache(pool, cache);
	}
}

/*
 * Take at least need and at most want pages, bringing pages into use and
 * then taking back cached ones when the store has fewer than need.  The
 * number taken, or 0 (nothing taken) when need pages are not free.
 */
static size_t store_take(struct dioloop_page_pool *pool, void **pages,
			 size_t need, size_t want)
{
	size_t n;

	pool->shared_trips++;
	store_grow(pool, need, pool->cap);
	if (pool->nr_free < need)
		store_steal(pool);
	if (pool->nr_free < need)
		return 0;
	n = MIN(want, pool->nr_free);
	pool->nr_free -= n;
	memcpy(pages, &pool->free[pool->nr_free], n * sizeof(*pages));
	pool->out += n;
	pool->high_water = MAX(pool->high_water, pool->out);
	return n;
}

/* ---- thread caches ---- */

/* This thread's cache in pool, made on first use; NULL if the thread has
 * no number. */
static struct page_cache *cache_self(struct dioloop_page_pool *pool)
{
	int n = thread_number();
	struct page_cache *cache;

	if (n < 0)
		return NULL;
	/* Only the thread holding number n stores into caches[n]. */
	cache = atomic_load_explicit(&pool->caches[n], memory_order_acquire);
	if (!cache) {
		cache = g_aligned_alloc0(1, sizeof(*cache),
					 alignof(struct page_cache));
		g_mutex_init(&cache->lock);
		atomic_store_explicit(&pool->caches[n], cache,
				      memory_order_release);
	}
	return cache;
}

/* After pages went into this thread's cache: if a thread waits for pages,
 * give them to the store (see the top of this file). */
static void cache_wake_waiters(struct dioloop_page_pool *pool,
			       struct page_cache *cache)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&pool->waiters, memory_order_relaxed))
		return;
	g_mutex_lock(&pool->lock);
	store_drain_cache(pool, cache);
	g_mutex_unlock(&pool->lock);
}

static int cache_get(struct dioloop_page_pool *pool, struct page_cache *cache,
		     void **pages, size_t n)
{
	void *more[CACHE_BATCH + CACHE_BATCH];
	size_t got;

	g_mutex_lock(&cache->lock);
	if (cache->nr >= n) {
		cache->nr -= (unsigned int)n;
		memcpy(pages, &cache->pages[cache->nr], n * sizeof(*pages));
		cache->net += (int64_t)n;
		g_mutex_unlock(&cache->lock);
		return 0;
	}
	g_mutex_unlock(&cache->lock);

	g_mutex_lock(&pool->lock);
	got = store_take(pool, more, n, n + CACHE_BATCH);
	g_mutex_unlock(&pool->lock);
	if (!got)
		return -ENOMEM;
	memcpy(pages, more, n * sizeof(*pages));
	/* The rest to the cache: it held fewer than n <= CACHE_BATCH, and
	 * only this thread adds to it, so they fit. */
	g_mutex_lock(&cache->lock);
	memcpy(&cache->pages[cache->nr], more + n, (got - n) * sizeof(*more));
	cache->nr += (unsigned int)(got - n);
	cache->net += (int64_t)n;
	g_mutex_unlock(&cache->lock);
	if (got > n)
		cache_wake_waiters(pool, cache);
	return 0;
}

static void cache_put(struct dioloop_page_pool *pool, struct page_cache *cache,
		      void **pages, size_t n)
{
	void *spill[CACHE_BATCH];
	bool spilled = false;

	g_mutex_lock(&cache->lock);
	if (cache->nr + n > DIOLOOP_PAGE_POOL_THREAD_PAGES) {
		/* Full: the coldest half goes to the store. */
		memcpy(spill, cache->pages, sizeof(spill));
		memmove(cache->pages, cache->pages + CACHE_BATCH,
			(cache->nr - CACHE_BATCH) * sizeof(*cache->pages));
		cache->nr -= CACHE_BATCH;
		spilled = true;
	}
	memcpy(&cache->pages[cache->nr], pages, n * sizeof(*pages));
	cache->nr += (unsigned int)n;
	cache->net -= (int64_t)n;
	g_mutex_unlock(&cache->lock);
	if (spilled) {
		g_mutex_lock(&pool->lock);
		pool->shared_trips++;
		store_push(pool, spill, CACHE_BATCH);
		g_mutex_unlock(&pool->lock);
	}
	cache_wake_waiters(pool, cache);
}

/* ---- the API ---- */

int dioloop_page_pool_new(size_t prealloc, size_t cap,
			  struct dioloop_page_pool **out)
{
	struct dioloop_page_pool *pool;
	void *base;
	size_t k;

	if (cap == 0 || prealloc > cap || cap > SIZE_MAX / DIOLOOP_PAGE_SIZE)
		return -EINVAL;
	base = mmap(NULL, cap * DIOLOOP_PAGE_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -ENOMEM;
	pool = g_aligned_alloc0(1, sizeof(*pool), 64);
	pool->base = base;
	pool->cap = cap;
	pool->state = g_malloc0(cap);
	pool->free = g_new(void *, cap);
	g_mutex_init(&pool->lock);
	g_cond_init(&pool->cond);
	/* Touched, so that the memory is there before the first request. */
	for (k = 0; k < prealloc; k++)
		pool->base[k * DIOLOOP_PAGE_SIZE] = 0;
	store_grow(pool, prealloc, prealloc);
	*out = pool;
	return 0;
}

void dioloop_page_pool_free(struct dioloop_page_pool *pool)
{
	struct dioloop_page_pool_stats stats;
	size_t i;

	if (!pool)
		return;
	dioloop_page_pool_get_stats(pool, &stats);
	g_assert(stats.in_use == 0);
	for (i = 0; i < POOL_MAX_THREADS; i++) {
		struct page_cache *cache = atomic_load(&pool->caches[i]);

		if (cache) {
			g_mutex_clear(&cache->lock);
			g_aligned_free(cache);
		}
	}
	pool_unpoison(pool);
	munmap(pool->base, pool->cap * DIOLOOP_PAGE_SIZE);
	g_free(pool->free);
	g_free((void *)pool->state);
	g_cond_clear(&pool->cond);
	g_mutex_clear(&pool->lock);
	g_aligned_free(pool);
}

int dioloop_page_pool_get_many(struct dioloop_page_pool *pool, void **pages,
			       size_t n)
{
	struct page_cache *cache;
	int ret = 0;

	if (n == 0)
		return 0;
	cache = n <= CACHE_BATCH ? cache_self(pool) : NULL;
	if (cache) {
		ret = cache_get(pool, cache, pages, n);
	} else {
		g_mutex_lock(&pool->lock);
		if (store_take(pool, pages, n, n))
			pool->net += (int64_t)n;
		else
			ret = -ENOMEM;
		g_mutex_unlock(&pool->lock);
	}
	if (ret == 0)
		pages_mark_out(pool, pages, n);
	return ret;
}

void dioloop_page_pool_get_many_wait(struct dioloop_page_pool *pool,
				     void **pages, size_t n)
{
	g_assert(n <= pool->cap);
	if (n == 0 || dioloop_page_pool_get_many(pool, pages, n) == 0)
		return;
	g_mutex_lock(&pool->lock);
	atomic_fetch_add(&pool->waiters, 1);
	atomic_thread_fence(memory_order_seq_cst);
	while (!store_take(pool, pages, n, n))
		g_cond_wait(&pool->cond, &pool->lock);
	atomic_fetch_sub(&pool->waiters, 1);
	pool->net += (int64_t)n;
	g_mutex_unlock(&pool->lock);
	pages_mark_out(pool, pages, n);
}

void *dioloop_page_pool_get_wait(struct dioloop_page_pool *pool)
{
	void *page;

	dioloop_page_pool_get_many_wait(pool, &page, 1);
	return page;
}

void dioloop_page_pool_put_many(struct dioloop_page_pool *pool, void **pages,
				size_t n)
{
	struct page_cache *cache;

	if (n == 0)
		return;
	pages_mark_free(pool, pages, n);
	cache = n <= CACHE_BATCH ? cache_self(pool) : NULL;
	if (cache) {
		cache_put(pool, cache, pages, n);
		return;
	}
	g_mutex_lock(&pool->lock);
	pool->shared_trips++;
	store_push(pool, pages, n);
	pool->net -= (int64_t)n;
	g_mutex_unlock(&pool->lock);
}

void dioloop_page_pool_put(struct dioloop_page_pool *pool, void *page)
{
	dioloop_page_pool_put_many(pool, &page, 1);
}

void dioloop_page_pool_get_stats(struct dioloop_page_pool *pool,
				 struct dioloop_page_pool_stats *stats)
{
	int64_t in_use;
	size_t i;

	g_mutex_lock(&pool->lock);
	in_use = pool->net;
	for (i = 0; i < POOL_MAX_THREADS; i++) {
		struct page_cache *cache = atomic_load_explicit(
			&pool->caches[i], memory_order_acquire);

		if (cache) {
			g_mutex_lock(&cache->lock);
			in_use += cache->net;
			g_mutex_unlock(&cache->lock);
		}
	}
	stats->in_use = (size_t)in_use;
	stats->high_water = pool->high_water;
	stats->allocated = pool->allocated;
	stats->cap = pool->cap;
	stats->shared_trips = pool->shared_trips;
	g_mutex_unlock(&pool->lock);
}
