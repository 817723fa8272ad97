/* SPDX-License-Identifier: MIT */
/*
 * A pool of DIOLOOP_PAGE_SIZE pages, aligned to DIOLOOP_PAGE_SIZE so they
 * satisfy any O_DIRECT memory alignment.  Request payloads and bio_vecs live
 * in these pages.
 *
 * The pool preallocates `prealloc` pages and grows on demand up to `cap`
 * pages; it never frees memory before dioloop_page_pool_free().  get and put
 * are O(1) (an intrusive free list) and thread-safe (one mutex).
 *
 * Exhaustion: dioloop_page_pool_get_many() fails with -ENOMEM (all or
 * none); dioloop_page_pool_get_wait() sleeps until another thread puts a
 * page back.  Never call get_wait from a thread that must run for pages to
 * come back (a completion thread): it may wait forever.
 */
#ifndef DIOLOOP_PAGE_POOL_H
#define DIOLOOP_PAGE_POOL_H

#include <stddef.h>

struct dioloop_page_pool;

struct dioloop_page_pool_stats {
	size_t in_use;		/* pages handed out now */
	size_t high_water;	/* most pages ever handed out at once */
	size_t allocated;	/* pages allocated from the system */
	size_t cap;		/* most pages the pool will allocate */
};

/* Create a pool; prealloc <= cap, cap > 0.  0 or -ENOMEM / -EINVAL. */
int dioloop_page_pool_new(size_t prealloc, size_t cap,
			  struct dioloop_page_pool **out);
/* Free the pool and its memory; every page must have been put back. */
void dioloop_page_pool_free(struct dioloop_page_pool *pool);

/* A page; waits while cap pages are in use. NULL only if the system is out
 * of memory before cap is reached. */
void *dioloop_page_pool_get_wait(struct dioloop_page_pool *pool);
/* Take n pages at once, all or none: 0, or -ENOMEM when n are not free. */
int dioloop_page_pool_get_many(struct dioloop_page_pool *pool, void **pages,
			       size_t n);
/* Give a page back; it must have come from this pool. */
void dioloop_page_pool_put(struct dioloop_page_pool *pool, void *page);
/* Give n pages back under one lock (a request's pages at its end). */
void dioloop_page_pool_put_many(struct dioloop_page_pool *pool, void **pages,
				size_t n);

void dioloop_page_pool_get_stats(struct dioloop_page_pool *pool,
				 struct dioloop_page_pool_stats *stats);

#endif
