/* SPDX-License-Identifier: MIT */
/*
 * A pool of DIOLOOP_PAGE_SIZE pages, aligned to DIOLOOP_PAGE_SIZE so they
 * satisfy any O_DIRECT memory alignment.  Request payloads and bio_vecs live
 * in these pages.
 *
 * The pool reserves address space for `cap` pages at once, touches
 * `prealloc` of them, and brings more into use on demand up to `cap`; it
 * never gives memory back before dioloop_page_pool_free().
 *
 * Each thread has a cache of up to DIOLOOP_PAGE_POOL_THREAD_PAGES free pages
 * per pool.  A request's pages come from the cache of the thread that takes
 * them and go back to the cache of the thread that puts them; only when a
 * cache runs dry or over does a thread take the pool's shared lock, moving
 * half a cache at once.  A small request therefore takes no shared lock
 * in the steady state.  Requests larger than half a cache go to the shared
 * store directly (one lock for all their pages).
 *
 * Cached pages are free pages: cap bounds the pages in use plus those in
 * caches, and when the shared store runs short a get takes back the pages
 * every other thread's cache holds (also a thread's that has ended) before
 * it fails or waits.  A put while another thread waits for pages gives
 * them to the shared store and wakes it.
 *
 * Exhaustion: dioloop_page_pool_get_many() fails with -ENOMEM (all or
 * none); dioloop_page_pool_get_wait() sleeps until another thread puts a
 * page back.  Never call get_wait from a thread that must run for pages to
 * come back (a completion thread): it may wait forever.
 *
 * Misuse aborts: putting a page that is not the pool's, or a page that is
 * not in use (a second put), or freeing a pool with pages in use.
 */
#ifndef DIOLOOP_PAGE_POOL_H
#define DIOLOOP_PAGE_POOL_H

#include <stddef.h>
#include <stdint.h>

/* Free pages one thread keeps per pool. */
#define DIOLOOP_PAGE_POOL_THREAD_PAGES 64

struct dioloop_page_pool;

struct dioloop_page_pool_stats {
	size_t in_use;		/* pages handed out now */
	size_t high_water;	/* most pages at once out of the shared
				 * store: handed out, or in a thread's
				 * cache (at most THREAD_PAGES per thread
				 * above the most ever handed out) */
	size_t allocated;	/* pages brought into use */
	size_t cap;		/* most pages the pool will bring in */
	uint64_t shared_trips;	/* times a get or put took the shared lock */
};

/* Create a pool; prealloc <= cap, cap > 0.  0 or -ENOMEM / -EINVAL. */
int dioloop_page_pool_new(size_t prealloc, size_t cap,
			  struct dioloop_page_pool **out);
/* Free the pool and its memory; every page must have been put back. */
void dioloop_page_pool_free(struct dioloop_page_pool *pool);

/* A page; waits while cap pages are in use.  Never NULL. */
void *dioloop_page_pool_get_wait(struct dioloop_page_pool *pool);
/* n (<= cap) pages at once, waiting until n are free together: a thread
 * never holds some while it waits for the rest, so threads that each
 * need several cannot hold the pool between them and wait for ever. */
void dioloop_page_pool_get_many_wait(struct dioloop_page_pool *pool,
				     void **pages, size_t n);
/* Take n pages at once, all or none: 0, or -ENOMEM when n are not free
 * (pages on their way between a thread's cache and the shared store, for
 * the moment of the move, are not). */
int dioloop_page_pool_get_many(struct dioloop_page_pool *pool, void **pages,
			       size_t n);
/* Give a page back; it must have come from this pool.  Any thread. */
void dioloop_page_pool_put(struct dioloop_page_pool *pool, void *page);
/* Give n pages back at once (a request's pages at its end). */
void dioloop_page_pool_put_many(struct dioloop_page_pool *pool, void **pages,
				size_t n);

/* Exact when no get or put runs at the same time. */
void dioloop_page_pool_get_stats(struct dioloop_page_pool *pool,
				 struct dioloop_page_pool_stats *stats);

#endif
