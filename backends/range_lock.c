/* SPDX-License-Identifier: MIT */
/*
 * Byte-range locks granted in arrival order.  The queue holds granted and
 * waiting ranges in the order they arrived; a range may be granted when no
 * range before it in the queue overlaps it incompatibly (either side
 * exclusive) and, for an exclusive range, no shared range is held outside
 * the queue.  With no waiters (the common case) release does no scan.
 *
 * The fast path is Dekker's: a shared range raises fast_shared, then reads
 * exclusives; an exclusive range raises exclusives, then reads fast_shared
 * (both sequentially consistent), so at least one of them sees the other.
 * If the shared one does, it backs out to the queue; if the exclusive one
 * does, it waits, and the last fast shared range to end grants it.
 */
#include "backends/range_lock.h"

#include "backends/aio.h"

static bool ranges_conflict(const struct range_lock *a,
			    const struct range_lock *b)
{
	return a->start < b->end && b->start < a->end &&
	       (a->exclusive || b->exclusive);
}

/* True if nothing queued before rl conflicts with it, nor (for an
 * exclusive range) a shared one granted outside the queue.  Lock held. */
static bool range_lock_grantable(struct range_lock_tree *tree,
				 const struct range_lock *rl)
{
	const GList *l;

	if (rl->exclusive && atomic_load(&tree->fast_shared))
		return false;
	for (l = rl->link.prev; l; l = l->prev)
		if (ranges_conflict(l->data, rl))
			return false;
	return true;
}

void range_lock_tree_init(struct range_lock_tree *tree)
{
	g_mutex_init(&tree->lock);
	g_cond_init(&tree->cond);
	g_queue_init(&tree->queue);
	tree->waiting = 0;
	atomic_init(&tree->fast_shared, 0);
	atomic_init(&tree->exclusives, 0);
}

void range_lock_tree_clear(struct range_lock_tree *tree)
{
	g_assert(g_queue_is_empty(&tree->queue));
	g_assert(atomic_load(&tree->fast_shared) == 0);
	g_assert(atomic_load(&tree->exclusives) == 0 && tree->waiting == 0);
	g_mutex_clear(&tree->lock);
	g_cond_clear(&tree->cond);
}

void range_lock_init(struct range_lock *rl, uint64_t start, uint64_t end,
		     bool exclusive, range_lock_grant_t grant)
{
	rl->start = start;
	rl->end = end;
	rl->exclusive = exclusive;
	rl->granted = false;
	rl->fast = false;
	rl->grant = grant;
	rl->link.data = rl;
	rl->link.prev = rl->link.next = NULL;
}

/* Queue rl at the tail and grant it if possible.  Lock held. */
static bool range_lock_enqueue(struct range_lock_tree *tree,
			       struct range_lock *rl)
{
	/* Raised before fast_shared is read (in range_lock_grantable):
	 * a shared range that raised fast_shared after this read sees
	 * exclusives raised, and backs out. */
	if (rl->exclusive)
		atomic_fetch_add(&tree->exclusives, 1);
	g_queue_push_tail_link(&tree->queue, &rl->link);
	rl->granted = range_lock_grantable(tree, rl);
	if (!rl->granted)
		tree->waiting++;
	return rl->granted;
}

/* Grant what now can go, in arrival order, outside the lock (a grant
 * callback may start I/O or take and release other ranges).  Called with
 * the lock held; returns with it released. */
static void range_lock_grant_waiters(struct range_lock_tree *tree)
{
	GList *l, *ready = NULL;
	bool wake = false;

	for (l = tree->waiting ? tree->queue.head : NULL; l; l = l->next) {
		struct range_lock *w = l->data;

		if (w->granted || !range_lock_grantable(tree, w))
			continue;
		w->granted = true;
		tree->waiting--;
		if (w->grant)
			ready = g_list_prepend(ready, w);
		else
			wake = true;
	}
	if (wake)
		g_cond_broadcast(&tree->cond);
	g_mutex_unlock(&tree->lock);

	ready = g_list_reverse(ready);
	for (l = ready; l; l = l->next) {
		struct range_lock *w = l->data;

		w->grant(w);
	}
	g_list_free(ready);
}

/* A shared range granted outside the queue ends (or backs out): the
 * last one lets the exclusive ranges waiting for it go. */
static void range_lock_fast_put(struct range_lock_tree *tree)
{
	if (atomic_fetch_sub(&tree->fast_shared, 1) == 1 &&
	    atomic_load(&tree->exclusives)) {
		g_mutex_lock(&tree->lock);
		range_lock_grant_waiters(tree);
	}
}

/* The fast path: a shared range while no exclusive one is there. */
static bool range_lock_try_fast(struct range_lock_tree *tree,
				struct range_lock *rl)
{
	if (rl->exclusive)
		return false;
	/* Raised first, then exclusives read (range_lock.h says why not
	 * read before as well). */
	atomic_fetch_add(&tree->fast_shared, 1);
	if (atomic_load(&tree->exclusives)) {
		range_lock_fast_put(tree);
		return false;
	}
	rl->fast = true;
	rl->granted = true;
	return true;
}

bool range_lock_acquire(struct range_lock_tree *tree, struct range_lock *rl)
{
	bool granted;

	if (range_lock_try_fast(tree, rl))
		return true;
	g_mutex_lock(&tree->lock);
	granted = range_lock_enqueue(tree, rl);
	g_mutex_unlock(&tree->lock);
	return granted;
}

void range_lock_acquire_wait(struct range_lock_tree *tree,
			     struct range_lock *rl)
{
	rl->grant = NULL;
	if (range_lock_try_fast(tree, rl))
		return;
	g_mutex_lock(&tree->lock);
	if (!range_lock_enqueue(tree, rl))
		while (!rl->granted)
			dioloop_aio_cond_wait(&tree->cond, &tree->lock);
	g_mutex_unlock(&tree->lock);
}

void range_lock_release(struct range_lock_tree *tree, struct range_lock *rl)
{
	g_assert(rl->granted);
	if (rl->fast) {
		rl->fast = false;
		rl->granted = false;
		range_lock_fast_put(tree);
		return;
	}
	g_mutex_lock(&tree->lock);
	g_queue_unlink(&tree->queue, &rl->link);
	rl->granted = false;
	if (rl->exclusive)
		atomic_fetch_sub(&tree->exclusives, 1);
	range_lock_grant_waiters(tree);
}
