/* SPDX-License-Identifier: MIT */
/*
 * Runs: buffers of one fixed size (a request's largest payload), each one
 * piece of memory, for large requests.
 *
 * A large direct I/O in 4 KiB pool pages reaches the disk as a list of
 * scattered pages: a 1 MiB write is 256 segments, more than a virtio disk
 * takes in one request (254), so the block layer splits it in two and
 * never merges it with its neighbours.  A run lies inside huge pages when
 * the kernel has them (the mapping is aligned to 2 MiB and advised for
 * them), so the same write is one or two segments and reaches the disk
 * whole.
 *
 * get never waits: with every run out it returns NULL and the caller uses
 * pool pages.  Runs are handed out last-put-first, so a steady load keeps
 * using the same few.  get and put take one lock; they are for requests
 * large enough that one lock is nothing next to their copy.
 */
#ifndef DIOLOOP_ITER_RUN_POOL_H
#define DIOLOOP_ITER_RUN_POOL_H

#include <stddef.h>
#include <stdint.h>

struct dioloop_run_pool;

struct dioloop_run_pool_stats {
	uint64_t runs;		/* how many there are */
	uint64_t in_use;	/* out now */
	uint64_t high_water;	/* most out at once */
	uint64_t taken;		/* gets that found one */
	uint64_t missed;	/* gets that found none */
};

/* nr runs of run_size bytes (a multiple of 4 KiB).  The memory is
 * reserved, not touched: a run takes memory when first used.  0 or
 * -errno. */
int dioloop_run_pool_new(size_t run_size, unsigned int nr,
			 struct dioloop_run_pool **out);
/* Every run must have been put back. */
void dioloop_run_pool_free(struct dioloop_run_pool *pool);
/* A free run, or NULL when every run is out (never waits). */
void *dioloop_run_pool_get(struct dioloop_run_pool *pool);
/* Give back a run from get.  Anything else, or a second put, aborts. */
void dioloop_run_pool_put(struct dioloop_run_pool *pool, void *run);
void dioloop_run_pool_get_stats(struct dioloop_run_pool *pool,
				struct dioloop_run_pool_stats *st);

#endif
