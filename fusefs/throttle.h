/* SPDX-License-Identifier: MIT */
/*
 * Throttling: one knob for all I/O (the LSF/MM "throttle that works for
 * all I/O").  Every read and write of a node passes one dispatch point;
 * there each request asks its node's token buckets (and the mount's
 * shared one) for admission.  Admitted requests go on at once; the others
 * wait in the node's FIFO and the group's timer thread dispatches them
 * when the buckets allow.  A throttled request only ever waits: it never
 * fails, and no thread waits for it (there is no call that sleeps until
 * admission: a blocking op that must wait returns to its pool and goes
 * on from its dispatch callback).
 *
 * Token buckets: a bucket holds up to `capacity` tokens (rate x burst_ms,
 * at least one) and gains `rate` tokens per second.  A request is
 * admitted while every bucket it draws from has tokens left (> 0), and
 * then takes its whole cost, which may leave a bucket in debt: a 1 MiB
 * write under bps=64K is not refused or split, it just makes the next
 * requests wait 16 s.  So the long-run rate is exactly the limit and a
 * burst is at most capacity plus one request.
 *
 * Fair share: the group bucket (total_bps) is shared by the nodes that
 * have requests waiting.  Among the nodes whose own limits allow their
 * next request, the one that has been given the fewest bytes of the
 * group goes first (a virtual clock in bytes, as in start-time fair
 * queueing); a node that becomes busy starts at the current virtual time,
 * so being idle earns no credit.  Two busy nodes thus get half each, and
 * a node held back by its own lower limit leaves the rest to the others
 * (max-min fairness).
 *
 * Holding the rate: a waiting request goes when the buckets allow, on
 * whichever thread comes first: the timer thread, woken for the earliest
 * moment one may go, or a submitter, which dispatches what is due ahead
 * of its own request before queueing it.  So at high rates the requests
 * that keep arriving pace the queue themselves and a late timer wake-up
 * (timer slack, a busy CPU) costs nothing; the timer is woken only when
 * a request moves its next wake-up earlier, not once per request.  No
 * token is lost to a late wake-up shorter than the burst, which the
 * bucket saves.
 *
 * Cost without limits: a node with no limit and nothing waiting, in a
 * group with no total_bps, is admitted on a lock-free check of two flags
 * (gated); the lock is taken only when a limit is set or requests wait.
 *
 * Time: the group's clock (nanoseconds, monotonic) is a function pointer
 * so that tests drive a fake clock and call dioloop_throttle_run()
 * themselves instead of starting the timer thread.
 *
 * Locking: group->lock protects every field marked "by lock" in the group
 * and in its throttles; the gated flags are written under it and read
 * without it.  dispatch callbacks are called without it.
 */
#ifndef DIOLOOP_THROTTLE_H
#define DIOLOOP_THROTTLE_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/token_bucket.h"

/* The per-node limits, in units per second; 0 means no limit. */
enum dioloop_rate_key {
	DIOLOOP_RATE_IOPS,		/* every request */
	DIOLOOP_RATE_READ_IOPS,
	DIOLOOP_RATE_WRITE_IOPS,
	DIOLOOP_RATE_BPS,		/* bytes of every request */
	DIOLOOP_RATE_READ_BPS,
	DIOLOOP_RATE_WRITE_BPS,
	DIOLOOP_RATE_NR
};

#define DIOLOOP_DEFAULT_BURST_MS 100u
#define DIOLOOP_MAX_BURST_MS 60000u

struct dioloop_limits {
	uint64_t rate[DIOLOOP_RATE_NR];	/* per second, 0 = unlimited */
	uint32_t burst_ms;		/* what a bucket saves up, in ms of
					 * its rate; 0 = the default */
};


/* Which way a request goes: DIOLOOP_READ or DIOLOOP_WRITE (backend.h). */
struct dioloop_throttle_req {
	int dir;			/* DIOLOOP_READ / DIOLOOP_WRITE */
	uint64_t bytes;			/* charged to the bps buckets */
	uint64_t queued_at;		/* ns, set when it has to wait */
	/* Called once, without the lock, when a request that had to wait
	 * may go: from the timer thread, from a later submit (a FUSE
	 * worker or worker thread) that found it due, or from whoever
	 * stops the group; never for a request that submit admitted. */
	void (*dispatch)(struct dioloop_throttle_req *req);
	GList link;			/* in the throttle's queue */
};

struct dioloop_throttle_group;

/* One node's throttle. */
struct dioloop_throttle {
	struct dioloop_throttle_group *group;
	struct dioloop_limits limits;	/* by lock */
	struct dioloop_bucket bucket[DIOLOOP_RATE_NR];	/* by lock */
	GQueue queue;			/* waiting requests, FIFO; by lock */
	GList active_link;		/* in group->active while queue is
					 * not empty; by lock */
	uint64_t vtime;			/* group bytes given; by lock */
	uint64_t throttled;		/* requests that had to wait; by lock */
	uint64_t throttled_ns;		/* their total wait; by lock */
	/* A limit is set or requests wait: submit must take the lock.
	 * Written under the lock, read without it. */
	atomic_bool gated;
};

struct dioloop_throttle_stats {
	uint64_t queued;		/* waiting now */
	uint64_t throttled;		/* requests that had to wait, ever */
	uint64_t throttled_ns;		/* their total wait */
};

typedef uint64_t (*dioloop_clock_fn)(void *opaque);

struct dioloop_throttle_group {
	GMutex lock;
	struct dioloop_bucket total;	/* total_bps, shared; by lock */
	uint64_t total_bps;		/* by lock */
	uint32_t burst_ms;		/* of the shared bucket; by lock */
	GQueue active;			/* throttles with waiting requests;
					 * by lock */
	uint64_t vclock;		/* virtual time of the fair share;
					 * by lock */
	bool unlimited;			/* stopping: admit everything; by lock */
	/* total_bps is set: every submit takes the lock.  Written under
	 * the lock, read without it. */
	atomic_bool gated;
	dioloop_clock_fn now;
	void *now_opaque;

	/* The timer thread (not started in unit tests). */
	GCond cond;			/* work for the timer; with lock */
	GThread *thread;
	bool stopping;			/* by lock */
	/* When the timer runs next (clock ns): 0 while it is awake (it
	 * looks again before it sleeps), UINT64_MAX when it sleeps until
	 * signalled.  A submit signals it only to move this earlier. */
	uint64_t deadline;		/* by lock */
};

/* Nanoseconds of the monotonic clock: the production clock. */
uint64_t dioloop_throttle_monotonic_ns(void *opaque);

/* Set up a group without limits; clock NULL = the monotonic clock. */
void dioloop_throttle_group_init(struct dioloop_throttle_group *g,
				 dioloop_clock_fn now, void *opaque);
/* Start the timer thread: 0 or -EAGAIN.  Control thread. */
int dioloop_throttle_group_start(struct dioloop_throttle_group *g);
/* Stop limiting: dispatch everything that waits, admit all from now on,
 * and end the timer thread.  Control thread; idempotent. */
void dioloop_throttle_group_stop(struct dioloop_throttle_group *g);
/* Free a stopped group (no throttle left in it). */
void dioloop_throttle_group_destroy(struct dioloop_throttle_group *g);
/* The shared limit in bytes per second (0: none) and its burst. */
void dioloop_throttle_group_set_total(struct dioloop_throttle_group *g,
				      uint64_t total_bps, uint32_t burst_ms);
uint64_t dioloop_throttle_group_total(struct dioloop_throttle_group *g);

/* A node's throttle in group g, with limits l (copied). */
void dioloop_throttle_init(struct dioloop_throttle *t,
			   struct dioloop_throttle_group *g,
			   const struct dioloop_limits *l);
/* Take a throttle out of its group; nothing may wait in it. */
void dioloop_throttle_destroy(struct dioloop_throttle *t);
/* Change a node's limits; they apply to the requests waiting now too.
 * A debt left under the old limits is forgiven.  Any thread. */
void dioloop_throttle_set_limits(struct dioloop_throttle *t,
				 const struct dioloop_limits *l);
void dioloop_throttle_get_limits(struct dioloop_throttle *t,
				 struct dioloop_limits *l);
void dioloop_throttle_get_stats(struct dioloop_throttle *t,
				struct dioloop_throttle_stats *st);

/*
 * Ask to dispatch req.  true: admitted, the caller dispatches it now.
 * false: it waits; req->dispatch will be called when it may go.  Before
 * returning, it may call the dispatch of requests queued ahead that are
 * due (without the lock).  Any thread; never blocks; takes no lock when
 * neither the node nor the group has a limit and nothing waits.
 */
bool dioloop_throttle_submit(struct dioloop_throttle *t,
			     struct dioloop_throttle_req *req);

/*
 * Dispatch every waiting request the buckets allow now (calling their
 * dispatch without the lock) and return the nanoseconds until the next
 * one could go, UINT64_MAX when nothing waits.  The timer thread's
 * body; tests call it with a fake clock.
 */
uint64_t dioloop_throttle_run(struct dioloop_throttle_group *g);

/* Limits with every rate 0 and the default burst. */
void dioloop_limits_init(struct dioloop_limits *l);
/* True if any rate is set. */
bool dioloop_limits_any(const struct dioloop_limits *l);

#endif
