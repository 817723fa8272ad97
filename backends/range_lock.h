/* SPDX-License-Identifier: MIT */
/*
 * Byte-range locks for one image, granted in arrival order and without
 * blocking the caller: a request that cannot have its range now is queued
 * and its grant callback runs later, on the thread that releases the
 * conflicting range (a completion thread), or on a thread taking a shared
 * range that backs out of the fast path (below): any thread that takes
 * ranges, so a grant callback must not need a lock its caller may hold.
 *
 * Shared ranges (aligned writes) are compatible with each other; an
 * exclusive range (read-modify-write) conflicts with every overlapping
 * range.  A new range also waits behind overlapping ranges queued before it,
 * so exclusive waiters are never starved.
 *
 * The fast path: while no exclusive range is held or waiting, a shared
 * range is granted by two atomic operations, without the tree's lock or
 * queue (aligned writes on a node do not serialise on one mutex).  The
 * price is paid by the rare exclusive range: it waits for every shared
 * range granted that way, overlapping or not (a discard or punch behind a
 * write that hangs on a remote store waits as long as that write), and
 * while it is there each new shared range raises and lowers the count
 * before it takes the queue, and the one that lowers it to zero takes the
 * lock once more to grant what waited for it.  Reading the exclusive count
 * before raising would save that, but would leave the one read that
 * matters to a window no test can reach.
 */
#ifndef DIOLOOP_RANGE_LOCK_H
#define DIOLOOP_RANGE_LOCK_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct range_lock;
typedef void (*range_lock_grant_t)(struct range_lock *rl);

struct range_lock {
	uint64_t start, end;		/* [start, end) */
	bool exclusive;
	bool granted;			/* protected by the tree's lock */
	bool fast;			/* granted outside the queue */
	range_lock_grant_t grant;	/* called once when granted later;
					 * NULL for acquire_wait */
	GList link;			/* in the tree's queue */
};

struct range_lock_tree {
	GMutex lock;
	GCond cond;			/* wakes range_lock_acquire_wait() */
	GQueue queue;			/* held and waiting, arrival order;
					 * protected by lock */
	unsigned int waiting;		/* queued, not granted; by lock */
	/* Shared ranges granted outside the queue, and exclusive ranges in
	 * it: each side raises its own count, then reads the other's. */
	atomic_uint fast_shared;
	atomic_uint exclusives;		/* raised and lowered under lock */
};

void range_lock_tree_init(struct range_lock_tree *tree);
void range_lock_tree_clear(struct range_lock_tree *tree);

/* Fill a lock for [start, end). */
void range_lock_init(struct range_lock *rl, uint64_t start, uint64_t end,
		     bool exclusive, range_lock_grant_t grant);
/* Take the range: true if granted now; false if queued, in which case
 * rl->grant(rl) runs once it is granted. */
bool range_lock_acquire(struct range_lock_tree *tree, struct range_lock *rl);
/* Take the range, sleeping until it is granted. */
void range_lock_acquire_wait(struct range_lock_tree *tree,
			     struct range_lock *rl);
/* Release a granted range and grant what now can go (callbacks run on the
 * calling thread, outside the tree's lock). */
void range_lock_release(struct range_lock_tree *tree, struct range_lock *rl);

#endif
