/* SPDX-License-Identifier: MIT */
/*
 * The page pool.  Pages come from chunks of up to POOL_CHUNK_PAGES pages,
 * each allocated at a POOL_CHUNK_SIZE-aligned address, so masking a page's
 * address gives its chunk: put finds the chunk in O(1) (a hash lookup), which
 * lets it catch foreign pages and double puts with a per-chunk bitmap.
 * Free pages are kept on an intrusive LIFO list threaded through the pages
 * themselves (recently used pages are handed out first, still warm).
 *
 * A chunk smaller than POOL_CHUNK_PAGES (the last one before cap) still gets
 * the full alignment; the gap is address space, never touched memory.
 */
#include "iter/page_pool.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <glib.h>

#include "iter/iov_iter.h"

#define POOL_CHUNK_PAGES 64
#define POOL_CHUNK_SIZE (POOL_CHUNK_PAGES * DIOLOOP_PAGE_SIZE)

struct pool_chunk {
	char *mem;			/* POOL_CHUNK_SIZE aligned */
	unsigned int nr_pages;		/* <= POOL_CHUNK_PAGES */
	uint64_t in_use;		/* bit n: page n handed out */
};

_Static_assert(POOL_CHUNK_PAGES <= 64, "pool_chunk.in_use has 64 bits");

/* A free page's first bytes: the link to the next free page. */
struct free_page {
	struct free_page *next;
};

/*
 * Everything below the lock is protected by it.  Invariants:
 * nr_free + in_use == allocated <= cap; the free list holds nr_free pages.
 */
struct dioloop_page_pool {
	GMutex lock;
	GCond cond;			/* a page was put back */
	struct free_page *free_list;
	GHashTable *chunks;		/* chunk mem -> struct pool_chunk */
	size_t nr_free;
	size_t in_use;
	size_t high_water;
	size_t allocated;
	size_t cap;
	unsigned int waiters;		/* threads in get_wait */
};

static void pool_chunk_free(gpointer data)
{
	struct pool_chunk *chunk = data;

	free(chunk->mem);
	g_free(chunk);
}

/* The chunk page belongs to, or NULL if none of ours.  Lock held. */
static struct pool_chunk *pool_chunk_of(struct dioloop_page_pool *pool,
					void *page)
{
	uintptr_t base = (uintptr_t)page & ~(uintptr_t)(POOL_CHUNK_SIZE - 1);
	struct pool_chunk *chunk = g_hash_table_lookup(pool->chunks,
						       (void *)base);

	if (chunk && ((char *)page - chunk->mem) / DIOLOOP_PAGE_SIZE >=
		     chunk->nr_pages)
		return NULL;
	return chunk;
}

/*
 * Allocate a chunk of nr_pages (<= POOL_CHUNK_PAGES) and put its pages on
 * the free list.  0 or -ENOMEM.  Lock held (or the pool not yet shared):
 * growing under the lock keeps allocated <= cap without a second protocol,
 * and it happens at most cap / POOL_CHUNK_PAGES times.
 */
static int pool_grow(struct dioloop_page_pool *pool, size_t nr_pages)
{
	struct pool_chunk *chunk;
	void *mem;
	size_t n;

	g_assert(nr_pages > 0 && nr_pages <= POOL_CHUNK_PAGES);
	if (posix_memalign(&mem, POOL_CHUNK_SIZE,
			   nr_pages * DIOLOOP_PAGE_SIZE))
		return -ENOMEM;
	chunk = g_new(struct pool_chunk, 1);
	chunk->mem = mem;
	chunk->nr_pages = (unsigned int)nr_pages;
	chunk->in_use = 0;
	g_hash_table_insert(pool->chunks, mem, chunk);
	/* Push from the top so the lowest address is handed out first. */
	for (n = nr_pages; n-- > 0;) {
		void *page = chunk->mem + n * DIOLOOP_PAGE_SIZE;
		struct free_page *fp = page;

		fp->next = pool->free_list;
		pool->free_list = fp;
	}
	pool->nr_free += nr_pages;
	pool->allocated += nr_pages;
	return 0;
}

/* The next chunk's size when growing towards limit pages. */
static size_t pool_chunk_pages(const struct dioloop_page_pool *pool,
			       size_t limit)
{
	return MIN((size_t)POOL_CHUNK_PAGES, limit - pool->allocated);
}

int dioloop_page_pool_new(size_t prealloc, size_t cap,
			  struct dioloop_page_pool **out)
{
	struct dioloop_page_pool *pool;

	if (cap == 0 || prealloc > cap)
		return -EINVAL;
	pool = g_new0(struct dioloop_page_pool, 1);
	g_mutex_init(&pool->lock);
	g_cond_init(&pool->cond);
	pool->chunks = g_hash_table_new_full(g_direct_hash, g_direct_equal,
					     NULL, pool_chunk_free);
	pool->cap = cap;
	while (pool->allocated < prealloc) {
		if (pool_grow(pool, pool_chunk_pages(pool, prealloc)))
			goto out_free_pool;
	}
	*out = pool;
	return 0;

out_free_pool:
	dioloop_page_pool_free(pool);
	return -ENOMEM;
}

void dioloop_page_pool_free(struct dioloop_page_pool *pool)
{
	if (!pool)
		return;
	g_assert(pool->in_use == 0);
	g_hash_table_destroy(pool->chunks);
	g_cond_clear(&pool->cond);
	g_mutex_clear(&pool->lock);
	g_free(pool);
}

/* Take a free page, growing if none is free; NULL at cap or out of memory.
 * Lock held. */
static void *pool_take(struct dioloop_page_pool *pool)
{
	struct free_page *fp;
	struct pool_chunk *chunk;
	size_t idx;

	if (!pool->free_list &&
	    (pool->allocated == pool->cap ||
	     pool_grow(pool, pool_chunk_pages(pool, pool->cap))))
		return NULL;
	fp = pool->free_list;
	pool->free_list = fp->next;
	pool->nr_free--;
	pool->in_use++;
	if (pool->in_use > pool->high_water)
		pool->high_water = pool->in_use;
	chunk = pool_chunk_of(pool, fp);
	idx = ((char *)fp - chunk->mem) / DIOLOOP_PAGE_SIZE;
	chunk->in_use |= (uint64_t)1 << idx;
	return fp;
}

/* Push page back on the free list.  Lock held. */
static void pool_give_back(struct dioloop_page_pool *pool, void *page)
{
	struct pool_chunk *chunk = pool_chunk_of(pool, page);
	struct free_page *fp = page;
	uint64_t bit;

	/* Programming errors, not input: a page from elsewhere, a pointer
	 * into a page, or a page put twice would corrupt the free list. */
	g_assert(chunk != NULL);
	g_assert(((uintptr_t)page & (DIOLOOP_PAGE_SIZE - 1)) == 0);
	bit = (uint64_t)1 << (((char *)page - chunk->mem) / DIOLOOP_PAGE_SIZE);
	g_assert(chunk->in_use & bit);
	chunk->in_use &= ~bit;
	fp->next = pool->free_list;
	pool->free_list = fp;
	pool->nr_free++;
	pool->in_use--;
}

void *dioloop_page_pool_get_wait(struct dioloop_page_pool *pool)
{
	void *page;

	g_mutex_lock(&pool->lock);
	while (!(page = pool_take(pool))) {
		/* Below cap, pool_take() failed to allocate: don't wait for
		 * pages that may never have been handed out. */
		if (pool->allocated < pool->cap)
			break;
		pool->waiters++;
		g_cond_wait(&pool->cond, &pool->lock);
		pool->waiters--;
	}
	g_mutex_unlock(&pool->lock);
	return page;
}

int dioloop_page_pool_get_many(struct dioloop_page_pool *pool, void **pages,
			       size_t n)
{
	size_t k;

	g_mutex_lock(&pool->lock);
	while (pool->nr_free < n && pool->allocated < pool->cap) {
		if (pool_grow(pool, pool_chunk_pages(pool, pool->cap)))
			break;
	}
	if (pool->nr_free < n) {
		g_mutex_unlock(&pool->lock);
		return -ENOMEM;
	}
	for (k = 0; k < n; k++)
		pages[k] = pool_take(pool);
	g_mutex_unlock(&pool->lock);
	return 0;
}

void dioloop_page_pool_put(struct dioloop_page_pool *pool, void *page)
{
	g_mutex_lock(&pool->lock);
	pool_give_back(pool, page);
	if (pool->waiters)
		g_cond_signal(&pool->cond);
	g_mutex_unlock(&pool->lock);
}

void dioloop_page_pool_put_many(struct dioloop_page_pool *pool, void **pages,
				size_t n)
{
	size_t k;

	if (n == 0)
		return;
	g_mutex_lock(&pool->lock);
	for (k = 0; k < n; k++)
		pool_give_back(pool, pages[k]);
	if (pool->waiters)
		g_cond_broadcast(&pool->cond);
	g_mutex_unlock(&pool->lock);
}

void dioloop_page_pool_get_stats(struct dioloop_page_pool *pool,
				 struct dioloop_page_pool_stats *stats)
{
	g_mutex_lock(&pool->lock);
	stats->in_use = pool->in_use;
	stats->high_water = pool->high_water;
	stats->allocated = pool->allocated;
	stats->cap = pool->cap;
	g_mutex_unlock(&pool->lock);
}
