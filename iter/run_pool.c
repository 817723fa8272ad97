/* SPDX-License-Identifier: MIT */
/*
 * Runs (see run_pool.h): one anonymous mapping, aligned to 2 MiB, cut
 * into nr runs; a stack of the free ones and a byte per run saying
 * whether it is out, under one lock.
 */
#include "iter/run_pool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include <glib.h>

#define RUN_HUGE_ALIGN ((size_t)2 << 20)

/* Under AddressSanitizer a free run is poisoned, as a free pool page is,
 * so a use after put is reported where it happens. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define run_poison(p, len) ASAN_POISON_MEMORY_REGION((p), (len))
#define run_unpoison(p, len) ASAN_UNPOISON_MEMORY_REGION((p), (len))
#else
#define run_poison(p, len) ((void)(p), (void)(len))
#define run_unpoison(p, len) ((void)(p), (void)(len))
#endif

struct dioloop_run_pool {
	char *map;		/* the mapping, as mmap gave it */
	size_t map_len;
	char *base;		/* run 0: map aligned up to 2 MiB */
	size_t run_size;
	unsigned int nr;

	GMutex lock;		/* everything below */
	unsigned int *free;	/* stack of free run numbers */
	unsigned int nr_free;
	bool *out;		/* per run */
	uint64_t high_water, taken, missed;
};

int dioloop_run_pool_new(size_t run_size, unsigned int nr,
			 struct dioloop_run_pool **out)
{
	struct dioloop_run_pool *pool;
	size_t len;
	char *map;
	unsigned int i;

	if (nr == 0 || run_size == 0 || run_size % 4096 != 0 ||
	    run_size > (SIZE_MAX - RUN_HUGE_ALIGN) / nr)
		return -EINVAL;
	len = run_size * nr + RUN_HUGE_ALIGN;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		return -ENOMEM;
	pool = g_new0(struct dioloop_run_pool, 1);
	pool->map = map;
	pool->map_len = len;
	pool->base = (char *)(((uintptr_t)map + RUN_HUGE_ALIGN - 1) &
			      ~(uintptr_t)(RUN_HUGE_ALIGN - 1));
	/* Only a hint: without huge pages a run is still one piece of
	 * virtual memory, as good as pool pages. */
	(void)madvise(pool->base, run_size * nr, MADV_HUGEPAGE);
	pool->run_size = run_size;
	pool->nr = nr;
	g_mutex_init(&pool->lock);
	pool->free = g_new(unsigned int, nr);
	pool->out = g_new0(bool, nr);
	/* Run 0 on top: the first runs used are the lowest. */
	for (i = 0; i < nr; i++)
		pool->free[i] = nr - 1 - i;
	pool->nr_free = nr;
	run_poison(pool->base, run_size * nr);
	*out = pool;
	return 0;
}

void dioloop_run_pool_free(struct dioloop_run_pool *pool)
{
	if (!pool)
		return;
	g_assert(pool->nr_free == pool->nr);
	run_unpoison(pool->base, pool->run_size * pool->nr);
	munmap(pool->map, pool->map_len);
	g_free(pool->free);
	g_free(pool->out);
	g_mutex_clear(&pool->lock);
	g_free(pool);
}

void *dioloop_run_pool_get(struct dioloop_run_pool *pool)
{
	unsigned int i, in_use;

	g_mutex_lock(&pool->lock);
	if (pool->nr_free == 0) {
		pool->missed++;
		g_mutex_unlock(&pool->lock);
		return NULL;
	}
	i = pool->free[--pool->nr_free];
	g_assert(!pool->out[i]);
	pool->out[i] = true;
	pool->taken++;
	in_use = pool->nr - pool->nr_free;
	if (in_use > pool->high_water)
		pool->high_water = in_use;
	g_mutex_unlock(&pool->lock);
	run_unpoison(pool->base + (size_t)i * pool->run_size, pool->run_size);
	return pool->base + (size_t)i * pool->run_size;
}

void dioloop_run_pool_put(struct dioloop_run_pool *pool, void *run)
{
	uintptr_t off = (uintptr_t)run - (uintptr_t)pool->base;
	size_t i = off / pool->run_size;

	/* Programming errors, as for pool pages: a foreign pointer or a
	 * second put would hand one run to two requests. */
	g_assert((uintptr_t)run >= (uintptr_t)pool->base &&
		 off % pool->run_size == 0 && i < pool->nr);
	g_mutex_lock(&pool->lock);
	g_assert(pool->out[i]);
	run_poison(run, pool->run_size);
	pool->out[i] = false;
	pool->free[pool->nr_free++] = (unsigned int)i;
	g_mutex_unlock(&pool->lock);
}

void dioloop_run_pool_get_stats(struct dioloop_run_pool *pool,
				struct dioloop_run_pool_stats *st)
{
	g_mutex_lock(&pool->lock);
	st->runs = pool->nr;
	st->in_use = pool->nr - pool->nr_free;
	st->high_water = pool->high_water;
	st->taken = pool->taken;
	st->missed = pool->missed;
	g_mutex_unlock(&pool->lock);
}
