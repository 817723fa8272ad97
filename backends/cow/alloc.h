/* SPDX-License-Identifier: MIT */
/*
 * Block allocation and reference counts of a cow container (FORMAT.md
 * sections 7 and 8).
 *
 * The refcount tree in memory holds the counts of the last sealed
 * transaction: only the commit changes counts (cow_alloc_apply, and the
 * pages the refcount tree itself moves to).  Two in-memory bits per block,
 * kept beside each refcount leaf, say which blocks with count 0 may not be
 * handed out:
 *
 *   busy    reserved for a write in flight, or referenced by a mapping
 *           installed in memory whose +1 the next commit will apply;
 *           cleared by that +1, or by cow_alloc_unreserve (a failed
 *           write);
 *   pinned  count dropped to 0 in generation g: free on disk, reusable
 *           only once g+1 is durable and no read that could still be
 *           reading the block is running (cow_alloc_durable).
 *
 * A block is free when its count is 0 and neither bit is set.  After
 * open, no free block below nr_blocks is reused until a commit is durable
 * (the older superblock's state stays intact); opening for writing
 * commits at once (cow_commit_open).
 *
 * Locking: struct cow_alloc's lock (alloc_lock) protects everything here;
 * the functions take it themselves.  It nests inside the container's map_lock.
 * Functions that may read refcount pages say so; the others never do I/O
 * and may run on a completion thread.
 */
#ifndef DIOLOOP_COW_ALLOC_H
#define DIOLOOP_COW_ALLOC_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/cow/tree.h"

/* A run of blocks. */
struct cow_extent {
	uint64_t pbn;
	uint64_t len;
};

/* A reference-count change queued for the commit. */
struct cow_refop {
	uint64_t pbn;
	int32_t delta;			/* +1 or -1 */
};

struct cow_alloc_stats {
	uint64_t nr_blocks;		/* container size in blocks */
	uint64_t used;			/* blocks with a non-zero count */
	uint64_t busy;			/* reserved or not yet counted */
	uint64_t pinned;		/* freed, waiting for the reuse rule */
};

/* Preallocation ahead of the container's end: 1/8 of it, within these
 * bounds (blocks). */
#define COW_PREALLOC_MIN ((uint64_t)2048)	/* 8 MiB */
#define COW_PREALLOC_MAX ((uint64_t)262144)	/* 1 GiB */

struct cow_alloc {
	GMutex lock;
	struct cow_meta *meta;		/* nr_blocks is written under lock */
	struct cow_tree rc;		/* the refcount tree */
	uint64_t cursor;		/* next-fit scan position */
	bool reuse_allowed;		/* the first commit after open is durable */
	bool scan_empty;		/* a full scan found nothing to reuse */
	GQueue freed;			/* struct cow_freed, by generation */
	uint64_t file_blocks;		/* the store covers this many blocks */
	uint64_t nr_busy, nr_pinned;
};

/* Load the refcount tree's root.  0 or -errno (why in err). */
int cow_alloc_open(struct cow_alloc *a, struct cow_meta *meta,
		   const struct cow_ptr *root, struct cow_err *err);
void cow_alloc_close(struct cow_alloc *a);

/*
 * Reserve n blocks (marked busy), preferring runs, appended to out (a
 * GArray of struct cow_extent).  Reuses free blocks when allowed, else
 * grows the container.  May read refcount pages (not on a completion
 * thread).  0 or -errno; nothing is reserved on failure.
 */
int cow_alloc_reserve(struct cow_alloc *a, uint64_t n, GArray *out,
		      struct cow_err *err);
/* Give back reserved blocks that will not be referenced.  No I/O. */
void cow_alloc_unreserve(struct cow_alloc *a, uint64_t pbn, uint64_t len);

/*
 * Apply a transaction's queued changes for generation gen: every +1
 * first (clearing busy), then every -1 (a count reaching 0 pins the
 * block as freed in gen).  Commit thread; may read refcount pages.
 * 0 or -EUCLEAN (a count would drop below 0: corruption, why in err).
 */
int cow_alloc_apply(struct cow_alloc *a, const struct cow_refop *ops,
		    size_t n, uint64_t gen, struct cow_err *err);
/*
 * Subtract 1 from pbn's count in gen (applied after every +1 of the
 * transaction); *freed says whether it reached 0 (then pbn is pinned as
 * freed in gen).  Commit thread; may read refcount pages.  0 or -EUCLEAN
 * (the count is already 0, why in err).
 */
int cow_alloc_put(struct cow_alloc *a, uint64_t pbn, uint64_t gen,
		  bool *freed, struct cow_err *err);
/*
 * Move the dirty refcount pages to new blocks for gen (which changes more
 * counts, until nothing moves), encode them into out (GArray of struct
 * cow_wpage) and return the tree's root and the container size for the
 * superblock.  Commit thread.  0 or -errno.
 */
int cow_alloc_commit(struct cow_alloc *a, uint64_t gen, GArray *out,
		     struct cow_ptr *root, uint64_t *nr_blocks,
		     struct cow_err *err);
/*
 * Generation durable_gen is durable and no running read started before
 * generation oldest_reader: make reusable what the reuse rule allows.
 * No I/O.
 */
void cow_alloc_durable(struct cow_alloc *a, uint64_t durable_gen,
		       uint64_t oldest_reader);

void cow_alloc_get_stats(struct cow_alloc *a, struct cow_alloc_stats *st);
/* The count of pbn (loading pages as needed): >= 0 or -errno.  For tests
 * and checks. */
int64_t cow_alloc_refcount(struct cow_alloc *a, uint64_t pbn);
/* True when pbn is busy / pinned (tests). */
bool cow_alloc_is_busy(struct cow_alloc *a, uint64_t pbn);
bool cow_alloc_is_pinned(struct cow_alloc *a, uint64_t pbn);

#endif
