/* SPDX-License-Identifier: MIT */
/*
 * Per-thread object caches (see obj_cache.h).
 *
 * Each object is preceded by a header naming its home: the thread's
 * struct obj_home it was made for.  A home's `free` list belongs to the
 * thread that holds the home; `returned` is a lock-free stack others
 * push onto and the holder empties whole with one exchange (so no pop
 * ever races a push on the same node: no ABA).  Homes are never freed:
 * an object may come back to its home at any time.
 */
#include "iter/obj_cache.h"

#include <stdalign.h>
#include <stdbool.h>

struct obj_header {
	struct obj_home *home;
	struct obj_header *next;	/* on a free or returned list */
} __attribute__((aligned(alignof(max_align_t))));

struct obj_home {
	struct dioloop_obj_cache *cache;
	struct obj_header *free;	/* by the holder only */
	unsigned int nr_free;		/* by the holder only */
	struct obj_home *next_home;	/* cache->homes; by cache->lock */
	struct obj_home *next_idle;	/* cache->idle; by cache->lock */
	/* Pushed by other threads; on a line of its own, so that their
	 * pushes do not take the holder's lines away. */
	alignas(64) _Atomic(struct obj_header *) returned;
};

/* Under AddressSanitizer a free object is poisoned, as freed memory is,
 * so that a use after put is still caught (the header stays usable).
 * Not one that holds memory of its own (a cache with a drop function):
 * LeakSanitizer does not look for pointers in poisoned memory, and would
 * call what it holds lost. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
static void obj_poison(struct obj_header *h)
{
	if (!h->home->cache->drop)
		ASAN_POISON_MEMORY_REGION(h + 1, h->home->cache->size);
}

static void obj_unpoison(struct obj_header *h)
{
	ASAN_UNPOISON_MEMORY_REGION(h + 1, h->home->cache->size);
}
#else
static void obj_poison(struct obj_header *h)
{
	(void)h;
}

static void obj_unpoison(struct obj_header *h)
{
	(void)h;
}
#endif

static struct obj_header *obj_header_of(void *obj)
{
	return (struct obj_header *)obj - 1;
}

/* This thread's home in cache: an idle one if a thread has ended, else a
 * new one. */
static struct obj_home *obj_home_get(struct dioloop_obj_cache *cache)
{
	struct obj_home *home = g_private_get(&cache->key);

	if (home)
		return home;
	g_mutex_lock(&cache->lock);
	home = cache->idle;
	if (home) {
		cache->idle = home->next_idle;
	} else {
		/* Aligned as its returned line asks (g_new0 gives 16). */
		home = g_aligned_alloc0(1, sizeof(*home), alignof(*home));
		home->cache = cache;
		home->next_home = cache->homes;
		cache->homes = home;
	}
	g_mutex_unlock(&cache->lock);
	g_private_set(&cache->key, home);
	return home;
}

static void obj_drop(struct obj_header *h)
{
	struct dioloop_obj_cache *cache = h->home->cache;

	obj_unpoison(h);
	if (cache->drop)
		cache->drop(h + 1);
	atomic_fetch_add(&cache->dropped, 1);
	g_free(h);
}

/* Take back what other threads returned: up to keep free objects in
 * all, the rest to the heap.  The holder only. */
static void obj_take_returned(struct obj_home *home)
{
	struct obj_header *h = atomic_exchange_explicit(
		&home->returned, NULL, memory_order_acquire);

	while (h) {
		struct obj_header *next = h->next;

		if (home->nr_free < home->cache->keep) {
			h->next = home->free;
			home->free = h;
			home->nr_free++;
		} else {
			obj_drop(h);
		}
		h = next;
	}
}

/* Thread exit (the GPrivate's destructor): free objects go back to the
 * heap; the home waits for the next new thread, still receiving what
 * comes back to it. */
void dioloop_obj_home_release(gpointer data)
{
	struct obj_home *home = data;
	struct dioloop_obj_cache *cache = home->cache;

	while (home->free) {
		struct obj_header *h = home->free;

		home->free = h->next;
		obj_drop(h);
	}
	home->nr_free = 0;
	/* What came back so far goes too (keep 0); what comes back later
	 * waits for the home's next thread, which keeps at most keep. */
	{
		struct obj_header *h = atomic_exchange_explicit(
			&home->returned, NULL, memory_order_acquire);

		while (h) {
			struct obj_header *next = h->next;

			obj_drop(h);
			h = next;
		}
	}
	g_mutex_lock(&cache->lock);
	home->next_idle = cache->idle;
	cache->idle = home;
	g_mutex_unlock(&cache->lock);
}

void *dioloop_obj_get(struct dioloop_obj_cache *cache)
{
	struct obj_home *home = obj_home_get(cache);
	struct obj_header *h = home->free;

	if (!h && atomic_load_explicit(&home->returned, memory_order_relaxed)) {
		obj_take_returned(home);
		h = home->free;
	}
	if (h) {
		home->free = h->next;
		home->nr_free--;
		obj_unpoison(h);
		return h + 1;
	}
	h = g_malloc0(sizeof(*h) + cache->size);
	h->home = home;
	atomic_fetch_add(&cache->made, 1);
	return h + 1;
}

void dioloop_obj_put(struct dioloop_obj_cache *cache, void *obj)
{
	struct obj_header *h = obj_header_of(obj);
	struct obj_home *home = h->home;

	g_assert(home->cache == cache);
	if (home == g_private_get(&cache->key)) {
		if (home->nr_free >= cache->keep) {
			obj_drop(h);
			return;
		}
		obj_poison(h);
		h->next = home->free;
		home->free = h;
		home->nr_free++;
		return;
	}
	obj_poison(h);
	h->next = atomic_load_explicit(&home->returned, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(
		&home->returned, &h->next, h, memory_order_release,
		memory_order_relaxed))
		;
}

void dioloop_obj_cache_get_stats(struct dioloop_obj_cache *cache,
				 struct dioloop_obj_cache_stats *stats)
{
	uint64_t homes = 0;

	g_mutex_lock(&cache->lock);
	for (struct obj_home *home = cache->homes; home;
	     home = home->next_home)
		homes++;
	g_mutex_unlock(&cache->lock);
	stats->made = atomic_load(&cache->made);
	stats->dropped = atomic_load(&cache->dropped);
	stats->homes = homes;
}
