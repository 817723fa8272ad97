/* SPDX-License-Identifier: MIT */
/*
 * Byte-range locks granted in arrival order.  The queue holds granted and
 * waiting ranges in the order they arrived; a range may be granted when no
 * range before it in the queue overlaps it incompatibly (either side
 * exclusive).  With no waiters (the common case) release does no scan.
 */
#include "backends/range_lock.h"

#include "backends/aio.h"

static bool ranges_conflict(const struct range_lock *a,
			    const struct range_lock *b)
{
	return a->start < b->end && b->start < a->end &&
	       (a->exclusive || b->exclusive);
}

/* True if nothing queued before rl conflicts with it.  Lock held. */
static bool range_lock_grantable(const struct range_lock *rl)
{
	const GList *l;

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
}

void range_lock_tree_clear(struct range_lock_tree *tree)
{
	g_assert(g_queue_is_empty(&tree->queue));
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
	rl->grant = grant;
	rl->link.data = rl;
	rl->link.prev = rl->link.next = NULL;
}

/* Queue rl at the tail and grant it if possible.  Lock held. */
static bool range_lock_enqueue(struct range_lock_tree *tree,
			       struct range_lock *rl)
{
	g_queue_push_tail_link(&tree->queue, &rl->link);
	rl->granted = range_lock_grantable(rl);
	if (!rl->granted)
		tree->waiting++;
	return rl->granted;
}

bool range_lock_acquire(struct range_lock_tree *tree, struct range_lock *rl)
{
	bool granted;

	g_mutex_lock(&tree->lock);
	granted = range_lock_enqueue(tree, rl);
	g_mutex_unlock(&tree->lock);
	return granted;
}

void range_lock_acquire_wait(struct range_lock_tree *tree,
			     struct range_lock *rl)
{
	rl->grant = NULL;
	g_mutex_lock(&tree->lock);
	if (!range_lock_enqueue(tree, rl))
		while (!rl->granted)
			dioloop_aio_cond_wait(&tree->cond, &tree->lock);
	g_mutex_unlock(&tree->lock);
}

void range_lock_release(struct range_lock_tree *tree, struct range_lock *rl)
{
	GList *l, *ready = NULL;
	bool wake = false;

	g_mutex_lock(&tree->lock);
	g_assert(rl->granted);
	g_queue_unlink(&tree->queue, &rl->link);
	rl->granted = false;
	for (l = tree->waiting ? tree->queue.head : NULL; l; l = l->next) {
		struct range_lock *w = l->data;

		if (w->granted || !range_lock_grantable(w))
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

	/* Grant in arrival order, outside the lock: a grant callback may
	 * start I/O or take and release other ranges. */
	ready = g_list_reverse(ready);
	for (l = ready; l; l = l->next) {
		struct range_lock *w = l->data;

		w->grant(w);
	}
	g_list_free(ready);
}
