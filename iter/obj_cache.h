/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches of fixed-size objects: the request slots of the I/O
 * path.  A request is made on the thread that serves its queue and often
 * ends on another (a completion thread, a backend's service thread), so:
 *
 *  - each thread has its own free list for each cache, which only it
 *    touches: get and put on the thread that made the object take no lock
 *    and touch no shared cache line;
 *  - an object put on another thread goes back to its home thread's
 *    return list (one atomic push, no lock), which the home thread takes
 *    whole when its own list runs dry;
 *  - only a thread's first get, or a get with nothing free at home, goes to
 *    the heap.  In a steady state the heap is not on the path at all.
 *
 * A thread keeps at most `keep` free objects, those returned by other
 * threads included; more are given back to the heap (through the cache's
 * drop function, if it has one): a cache holds at most keep objects per
 * thread that uses it, besides those in use.  When a
 * thread ends, its free objects go back to the heap and its
 * home (with whatever is still out, which comes back to it) waits for the
 * next new thread.  The objects come zeroed from the heap only: a caller
 * initialises every field it reads.
 *
 * A cache is defined statically, once per kind of object:
 *     static struct dioloop_obj_cache slots =
 *             DIOLOOP_OBJ_CACHE_INIT(sizeof(struct slot), 64);
 * It lives as long as the process: objects from it may be put on any
 * thread at any time, including after every user of the kind has gone.
 */
#ifndef DIOLOOP_OBJ_CACHE_H
#define DIOLOOP_OBJ_CACHE_H

#include <glib.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct obj_home;

struct dioloop_obj_cache {
	GPrivate key;			/* this thread's struct obj_home */
	size_t size;			/* bytes of one object */
	unsigned int keep;		/* free objects a thread keeps */
	void (*drop)(void *obj);	/* frees what obj holds, before obj
					 * goes back to the heap; or NULL */
	GMutex lock;			/* homes, idle */
	struct obj_home *homes;		/* every home ever made */
	struct obj_home *idle;		/* homes of threads that ended */
	atomic_uint_fast64_t made;	/* objects taken from the heap */
	atomic_uint_fast64_t dropped;	/* objects given back to the heap */
};

struct dioloop_obj_cache_stats {
	uint64_t made;		/* objects taken from the heap, ever */
	uint64_t dropped;	/* objects given back to the heap, ever */
	uint64_t homes;		/* homes made: the most threads that used
				 * the cache at once (an ended thread's
				 * home goes to the next) */
};

void dioloop_obj_home_release(gpointer home);

#define DIOLOOP_OBJ_CACHE_INIT(object_size, keep_per_thread)              \
	DIOLOOP_OBJ_CACHE_INIT_DROP(object_size, keep_per_thread, NULL)
/* The same, for objects that keep memory of their own from use to use:
 * drop_fn(obj) frees it when the object goes back to the heap. */
#define DIOLOOP_OBJ_CACHE_INIT_DROP(object_size, keep_per_thread, drop_fn) \
	{                                                                  \
		.key = G_PRIVATE_INIT(dioloop_obj_home_release),           \
		.size = (object_size), .keep = (keep_per_thread),          \
		.drop = (drop_fn),                                         \
	}

/* An object of cache->size bytes, aligned for any type.  Never NULL (as
 * g_malloc, the process ends if the heap is exhausted). */
void *dioloop_obj_get(struct dioloop_obj_cache *cache);
/* Give obj back; any thread. */
void dioloop_obj_put(struct dioloop_obj_cache *cache, void *obj);

void dioloop_obj_cache_get_stats(struct dioloop_obj_cache *cache,
				 struct dioloop_obj_cache_stats *stats);

#endif
