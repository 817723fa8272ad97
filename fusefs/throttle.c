/* SPDX-License-Identifier: MIT */
/*
 * Token buckets, the fair share of the mount-wide limit, and the timer
 * thread that dispatches waiting requests (see throttle.h).
 *
 * Everything here depends on GLib only (no FUSE), so that the unit tests
 * can drive it with a fake clock.
 */
#include "fusefs/throttle.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

#include "backends/backend.h"

/* The production clock.  Any thread. */
uint64_t dioloop_throttle_monotonic_ns(void *opaque)
{
	return (uint64_t)g_get_monotonic_time() * 1000u;
}

/* No limit, the default burst.  Any thread. */
void dioloop_limits_init(struct dioloop_limits *l)
{
	*l = (struct dioloop_limits){ .burst_ms = DIOLOOP_DEFAULT_BURST_MS };
}

/* True if any rate is limited.  Any thread. */
bool dioloop_limits_any(const struct dioloop_limits *l)
{
	unsigned int i;

	for (i = 0; i < DIOLOOP_RATE_NR; i++)
		if (l->rate[i])
			return true;
	return false;
}

/* ---- a node's buckets ---- */

/* The burst in ms that l asks for, within bounds. */
static uint32_t burst_of(const struct dioloop_limits *l)
{
	return l->burst_ms ? MIN(l->burst_ms, DIOLOOP_MAX_BURST_MS) :
			     DIOLOOP_DEFAULT_BURST_MS;
}

/* Does request req draw from bucket key? */
static bool draws_from(const struct dioloop_throttle_req *req, int key)
{
	bool read = req->dir == DIOLOOP_READ;

	switch (key) {
	case DIOLOOP_RATE_IOPS:
		return true;
	case DIOLOOP_RATE_READ_IOPS:
		return read;
	case DIOLOOP_RATE_WRITE_IOPS:
		return !read;
	case DIOLOOP_RATE_BPS:
		return req->bytes > 0;
	case DIOLOOP_RATE_READ_BPS:
		return read && req->bytes > 0;
	case DIOLOOP_RATE_WRITE_BPS:
		return !read && req->bytes > 0;
	}
	return false;
}

/* True for the buckets counted in bytes. */
static bool key_is_bytes(int key)
{
	return key >= DIOLOOP_RATE_BPS;
}

/* Nanoseconds until t's own buckets admit req (0: now).  Lock held. */
static uint64_t node_wait(struct dioloop_throttle *t,
			  const struct dioloop_throttle_req *req, uint64_t now)
{
	uint64_t wait = 0;
	int k;

	for (k = 0; k < DIOLOOP_RATE_NR; k++) {
		if (!draws_from(req, k))
			continue;
		dioloop_bucket_refill(&t->bucket[k], now);
		wait = MAX(wait, dioloop_bucket_wait(&t->bucket[k]));
	}
	return wait;
}

/* Nanoseconds until the shared bucket admits anything.  Lock held. */
static uint64_t group_wait(struct dioloop_throttle_group *g, uint64_t now)
{
	dioloop_bucket_refill(&g->total, now);
	return dioloop_bucket_wait(&g->total);
}

/* Take req's cost from every bucket it draws from.  Lock held. */
static void charge(struct dioloop_throttle *t,
		   const struct dioloop_throttle_req *req)
{
	struct dioloop_throttle_group *g = t->group;
	int k;

	for (k = 0; k < DIOLOOP_RATE_NR; k++)
		if (draws_from(req, k))
			dioloop_bucket_charge(&t->bucket[k],
				      key_is_bytes(k) ? (double)req->bytes : 1.0);
	dioloop_bucket_charge(&g->total, (double)req->bytes);
	/* The virtual clock follows the least served node at dispatch. */
	g->vclock = MAX(g->vclock, t->vtime);
	t->vtime += req->bytes;
}

/* Must submit take the lock for t: a limit, or requests waiting.
 * Lock held. */
static void update_gate(struct dioloop_throttle *t)
{
	atomic_store_explicit(&t->gated, dioloop_limits_any(&t->limits) ||
			      !g_queue_is_empty(&t->queue),
			      memory_order_release);
}

/* Queue req at t; t joins the busy nodes if it was idle.  Lock held. */
static void enqueue(struct dioloop_throttle *t,
		    struct dioloop_throttle_req *req, uint64_t now)
{
	struct dioloop_throttle_group *g = t->group;

	req->queued_at = now;
	req->link.data = req;
	if (g_queue_is_empty(&t->queue)) {
		/* Idle time earns no share. */
		t->vtime = MAX(t->vtime, g->vclock);
		t->active_link.data = t;
		g_queue_push_tail_link(&g->active, &t->active_link);
	}
	g_queue_push_tail_link(&t->queue, &req->link);
	atomic_store_explicit(&t->gated, true, memory_order_release);
}

static uint64_t collect(struct dioloop_throttle_group *g, GQueue *out,
			const struct dioloop_throttle_req *self);
static void dispatch_all(GQueue *q);

/* Admit or queue a request (throttle.h).  FUSE worker or worker
 * pool; never blocks. */
bool dioloop_throttle_submit(struct dioloop_throttle *t,
			     struct dioloop_throttle_req *req)
{
	struct dioloop_throttle_group *g = t->group;
	GQueue out = G_QUEUE_INIT;
	uint64_t now, wait;
	bool go = false;

	/* No limit anywhere and nothing waiting: no lock, no clock.  A
	 * limit set meanwhile applies from the next request. */
	if (!atomic_load_explicit(&t->gated, memory_order_acquire) &&
	    !atomic_load_explicit(&g->gated, memory_order_acquire))
		return true;

	g_mutex_lock(&g->lock);
	now = g->now(g->now_opaque);
	if (g->unlimited) {
		go = true;
	} else if (g_queue_is_empty(&t->queue) &&
		   /* Someone may be waiting for the shared bucket: take a
		    * turn rather than jump the fair order. */
		   !(g->total.rate > 0 && !g_queue_is_empty(&g->active)) &&
		   node_wait(t, req, now) == 0 && group_wait(g, now) == 0) {
		charge(t, req);
		go = true;
	} else {
		/* In the queue, behind whatever waits; then dispatch what
		 * is due, this request too if its turn came (the timer may
		 * not have woken yet). */
		enqueue(t, req, now);
		wait = collect(g, &out, req);
		if (req->link.data == NULL) {
			go = true;		/* collect took it */
		} else if (wait != UINT64_MAX && g->deadline &&
			   now + wait < g->deadline) {
			/* The timer sleeps past this one's turn. */
			g_cond_signal(&g->cond);
		}
	}
	g_mutex_unlock(&g->lock);
	dispatch_all(&out);
	return go;
}

/*
 * Move to out every waiting request that may go now, fairest first, and
 * return the nanoseconds until the next could.  self, if collect takes
 * it, is not put in out but marked taken (link.data NULL): the submit
 * that is asking admits it itself, not counted as throttled.  Lock held.
 */
static uint64_t collect(struct dioloop_throttle_group *g, GQueue *out,
			const struct dioloop_throttle_req *self)
{
	uint64_t now = g->now(g->now_opaque);

	for (;;) {
		struct dioloop_throttle *best = NULL;
		struct dioloop_throttle_req *req;
		uint64_t min_wait = UINT64_MAX, gw;
		GList *l;

		if (g_queue_is_empty(&g->active))
			return UINT64_MAX;
		for (l = g->active.head; l; l = l->next) {
			struct dioloop_throttle *t = l->data;
			uint64_t w = g->unlimited ? 0 :
				node_wait(t, g_queue_peek_head(&t->queue), now);

			if (w > 0)
				min_wait = MIN(min_wait, w);
			else if (!best || t->vtime < best->vtime)
				best = t;
		}
		gw = g->unlimited ? 0 : group_wait(g, now);
		if (!best || gw > 0)
			return MAX(best ? 0 : min_wait, gw);

		/* Links are embedded: pop the link, never the data (which
		 * would free the link). */
		req = g_queue_pop_head_link(&best->queue)->data;
		if (!g->unlimited)
			charge(best, req);
		if (g_queue_is_empty(&best->queue)) {
			g_queue_unlink(&g->active, &best->active_link);
			update_gate(best);
		}
		if (req == self) {
			req->link.data = NULL;
			continue;
		}
		best->throttled++;
		best->throttled_ns += now - MIN(now, req->queued_at);
		req->link.data = req;
		g_queue_push_tail_link(out, &req->link);
	}
}

/* Call dispatch on every request in q (lock not held). */
static void dispatch_all(GQueue *q)
{
	GList *l;

	while ((l = g_queue_pop_head_link(q))) {
		struct dioloop_throttle_req *req = l->data;

		req->dispatch(req);
	}
}

/* One round of the timer's work (throttle.h).  Tests; the timer
 * thread runs the same through collect(). */
uint64_t dioloop_throttle_run(struct dioloop_throttle_group *g)
{
	GQueue out = G_QUEUE_INIT;
	uint64_t wait;

	g_mutex_lock(&g->lock);
	wait = collect(g, &out, NULL);
	g_mutex_unlock(&g->lock);
	dispatch_all(&out);
	return wait;
}

/*
 * The timer thread: dispatch what may go, sleep until the next may.  It
 * asks for no timer slack (the default 50 us would be a tenth of the
 * gap between requests at 20,000 IOPS); what it oversleeps all the same
 * the buckets keep as tokens.
 */
static gpointer throttle_thread(gpointer data)
{
	struct dioloop_throttle_group *g = data;
	GQueue out = G_QUEUE_INIT;

	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	g_mutex_lock(&g->lock);
	for (;;) {
		uint64_t wait;

		g->deadline = 0;
		wait = collect(g, &out, NULL);
		if (!g_queue_is_empty(&out)) {
			g_mutex_unlock(&g->lock);
			dispatch_all(&out);
			g_mutex_lock(&g->lock);
			continue;
		}
		if (g->stopping && g_queue_is_empty(&g->active))
			break;
		if (wait == UINT64_MAX) {
			g->deadline = UINT64_MAX;
			g_cond_wait(&g->cond, &g->lock);
		} else {
			g->deadline = g->now(g->now_opaque) + wait;
			g_cond_wait_until(&g->cond, &g->lock,
					  g_get_monotonic_time() +
						  (gint64)(wait / 1000) + 1);
		}
	}
	g->deadline = UINT64_MAX;
	g_mutex_unlock(&g->lock);
	return NULL;
}

/* Set up a group without limits.  Control thread. */
void dioloop_throttle_group_init(struct dioloop_throttle_group *g,
				 dioloop_clock_fn now, void *opaque)
{
	*g = (struct dioloop_throttle_group){
		.burst_ms = DIOLOOP_DEFAULT_BURST_MS,
		.now = now ? now : dioloop_throttle_monotonic_ns,
		.now_opaque = opaque,
		/* No timer thread (tests): signalling it would be moot. */
		.deadline = 0,
	};
	atomic_init(&g->gated, false);
	g_mutex_init(&g->lock);
	g_cond_init(&g->cond);
	g_queue_init(&g->active);
}

/* Start the timer thread.  Control thread. */
int dioloop_throttle_group_start(struct dioloop_throttle_group *g)
{
	GError *err = NULL;

	g->thread = g_thread_try_new("dioloop-throttle", throttle_thread, g,
				     &err);
	if (!g->thread) {
		g_warning("throttle: cannot start the timer thread: %s",
			  err->message);
		g_error_free(err);
		return -EAGAIN;
	}
	return 0;
}

/* Dispatch everything, admit all from now on, end the timer
 * thread.  Control thread. */
void dioloop_throttle_group_stop(struct dioloop_throttle_group *g)
{
	GQueue out = G_QUEUE_INIT;

	g_mutex_lock(&g->lock);
	g->unlimited = true;
	g->stopping = true;
	g_cond_signal(&g->cond);
	if (!g->thread)
		collect(g, &out, NULL);
	g_mutex_unlock(&g->lock);
	dispatch_all(&out);
	if (g->thread)
		g_thread_join(g->thread);
	g->thread = NULL;
}

/* Free a stopped, empty group.  Control thread. */
void dioloop_throttle_group_destroy(struct dioloop_throttle_group *g)
{
	g_assert(!g->thread && g_queue_is_empty(&g->active));
	g_mutex_clear(&g->lock);
	g_cond_clear(&g->cond);
}

/* Set the shared limit and wake the timer.  Any thread. */
void dioloop_throttle_group_set_total(struct dioloop_throttle_group *g,
				      uint64_t total_bps, uint32_t burst_ms)
{
	g_mutex_lock(&g->lock);
	g->total_bps = total_bps;
	g->burst_ms = burst_ms ? MIN(burst_ms, DIOLOOP_MAX_BURST_MS) :
				 DIOLOOP_DEFAULT_BURST_MS;
	dioloop_bucket_set(&g->total, total_bps, g->burst_ms,
			   g->now(g->now_opaque));
	atomic_store_explicit(&g->gated, total_bps > 0, memory_order_release);
	g_cond_signal(&g->cond);
	g_mutex_unlock(&g->lock);
}

/* The shared limit in bytes per second.  Any thread. */
uint64_t dioloop_throttle_group_total(struct dioloop_throttle_group *g)
{
	uint64_t v;

	g_mutex_lock(&g->lock);
	v = g->total_bps;
	g_mutex_unlock(&g->lock);
	return v;
}

/* Apply limits to t's buckets.  Lock held. */
static void throttle_apply(struct dioloop_throttle *t,
			   const struct dioloop_limits *l, uint64_t now)
{
	int k;

	t->limits = *l;
	for (k = 0; k < DIOLOOP_RATE_NR; k++)
		dioloop_bucket_set(&t->bucket[k], l->rate[k], burst_of(l), now);
	update_gate(t);
}

/* Join a node's throttle to the group.  Whoever opens the node. */
void dioloop_throttle_init(struct dioloop_throttle *t,
			   struct dioloop_throttle_group *g,
			   const struct dioloop_limits *l)
{
	memset(t, 0, sizeof(*t));
	t->group = g;
	g_queue_init(&t->queue);
	g_mutex_lock(&g->lock);
	throttle_apply(t, l, g->now(g->now_opaque));
	t->vtime = g->vclock;
	g_mutex_unlock(&g->lock);
}

/* Leave the group; nothing may be waiting.  Whoever frees the node. */
void dioloop_throttle_destroy(struct dioloop_throttle *t)
{
	g_assert(g_queue_is_empty(&t->queue));
	t->group = NULL;
}

/* New limits for a node, waking the timer.  Any thread. */
void dioloop_throttle_set_limits(struct dioloop_throttle *t,
				 const struct dioloop_limits *l)
{
	struct dioloop_throttle_group *g = t->group;

	g_mutex_lock(&g->lock);
	throttle_apply(t, l, g->now(g->now_opaque));
	g_cond_signal(&g->cond);
	g_mutex_unlock(&g->lock);
}

/* A copy of a node's limits.  Any thread. */
void dioloop_throttle_get_limits(struct dioloop_throttle *t,
				 struct dioloop_limits *l)
{
	g_mutex_lock(&t->group->lock);
	*l = t->limits;
	g_mutex_unlock(&t->group->lock);
}

/* A snapshot of a node's throttle counters.  Any thread. */
void dioloop_throttle_get_stats(struct dioloop_throttle *t,
				struct dioloop_throttle_stats *st)
{
	g_mutex_lock(&t->group->lock);
	st->queued = g_queue_get_length(&t->queue);
	st->throttled = t->throttled;
	st->throttled_ns = t->throttled_ns;
	g_mutex_unlock(&t->group->lock);
}
