/* SPDX-License-Identifier: MIT */
/*
 * Throttling (fusefs/throttle.c) under a fake clock: token buckets with
 * bursts and debt, read/write/total limits, the fair share of a mount-wide
 * limit between busy nodes, limits changed while requests wait, FIFO
 * order, and that nothing waiting is ever lost.
 *
 * The simulation: each node keeps qd requests outstanding (a closed loop,
 * like fio at a queue depth); a dispatched request completes at once and
 * is replaced.  Time only moves when nothing more can go, by exactly the
 * wait dioloop_throttle_run() reports.
 *
 * The coarse simulation (sim_run_coarse) is closer to a real daemon: a
 * dispatched request completes lat_ns later, time moves in small ticks,
 * and the timer runs only every period, as a sleep that wakes late or on
 * a coarse tick would run it.  The rate must hold all the same.
 */
#include <check.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "fusefs/throttle.h"
#include "tests/testutil.h"

#define NS_PER_SEC UINT64_C(1000000000)
#define K 1024u
#define M (1024u * 1024u)

static uint64_t fake_now;

static uint64_t fake_clock(void *opaque)
{
	return fake_now;
}

struct sim_node {
	struct dioloop_throttle t;
	int dir;
	uint64_t bytes;			/* per request */
	unsigned int qd;		/* requests kept outstanding (0: idle) */
	unsigned int outstanding;
	uint64_t done_ops, done_bytes;
	uint64_t next_seq, done_seq;	/* FIFO check */
	bool out_of_order;
};

struct sim_req {
	struct dioloop_throttle_req treq;	/* first: cast back */
	struct sim_node *n;
	uint64_t seq;
	uint64_t due;			/* completes then (lat_ns) */
};

static uint64_t dispatched_by_run;

/* The coarse simulation: service time of a dispatched request (0: it
 * completes at once) and the requests in service, by due time. */
static uint64_t lat_ns;
static GQueue in_service = G_QUEUE_INIT;

static void sim_complete(struct sim_req *r)
{
	struct sim_node *n = r->n;

	if (r->seq != n->done_seq)
		n->out_of_order = true;
	n->done_seq = r->seq + 1;
	n->outstanding--;
	n->done_ops++;
	n->done_bytes += r->treq.bytes;
	g_free(r);
}

/* A request goes to the backend: done now, or lat_ns from now. */
static void sim_start(struct sim_req *r)
{
	if (!lat_ns) {
		sim_complete(r);
		return;
	}
	r->due = fake_now + lat_ns;
	g_queue_push_tail(&in_service, r);	/* due times only grow */
}

static void sim_dispatch(struct dioloop_throttle_req *treq)
{
	dispatched_by_run++;
	sim_start((struct sim_req *)treq);
}

/* Submit one request of n; true if it was admitted (and completed). */
static bool sim_submit(struct sim_node *n)
{
	struct sim_req *r = g_new0(struct sim_req, 1);

	r->treq = (struct dioloop_throttle_req){
		.dir = n->dir, .bytes = n->bytes, .dispatch = sim_dispatch,
	};
	r->n = n;
	r->seq = n->next_seq++;
	n->outstanding++;
	if (!dioloop_throttle_submit(&n->t, &r->treq))
		return false;
	sim_start(r);
	return true;
}

/* Top every node up to its queue depth. */
static void sim_fill(struct sim_node **nodes, int nr)
{
	int i, guard;

	for (i = 0; i < nr; i++)
		for (guard = 0; nodes[i]->outstanding < nodes[i]->qd; guard++) {
			/* Not ck_assert: each one is a write to check's
			 * pipe, and this loop is hot. */
			if (guard >= 1000000)
				ck_abort_msg("node %d: admitted without end: "
					     "no limit applies?", i);
			sim_submit(nodes[i]);
		}
}

/* Run the closed loop for ns of fake time. */
static void sim_run(struct dioloop_throttle_group *g, struct sim_node **nodes,
		    int nr, uint64_t ns)
{
	uint64_t end = fake_now + ns;

	while (fake_now < end) {
		uint64_t before, wait;

		sim_fill(nodes, nr);
		before = dispatched_by_run;
		wait = dioloop_throttle_run(g);
		sim_fill(nodes, nr);
		if (dispatched_by_run != before)
			continue;	/* more may go at this instant */
		if (wait == UINT64_MAX || wait > NS_PER_SEC)
			wait = NS_PER_SEC / 1000;
		fake_now = MIN(end, fake_now + MAX(wait, 1));
	}
}

/* Complete the requests in service that are due by now (all: drain). */
static void sim_reap(bool drain)
{
	struct sim_req *r;

	while ((r = g_queue_peek_head(&in_service)) &&
	       (drain || r->due <= fake_now))
		sim_complete(g_queue_pop_head(&in_service));
}

/*
 * Run the closed loop for ns of fake time in ticks of tick ns: requests
 * complete lat_ns after dispatch and are replaced at once; the timer runs
 * only every period ns.
 */
static void sim_run_coarse(struct dioloop_throttle_group *g,
			   struct sim_node **nodes, int nr, uint64_t ns,
			   uint64_t tick, uint64_t period)
{
	uint64_t end = fake_now + ns, next_timer = fake_now + period;

	for (; fake_now < end; fake_now += tick) {
		sim_reap(false);
		sim_fill(nodes, nr);
		if (fake_now >= next_timer) {
			dioloop_throttle_run(g);
			next_timer += period;
		}
	}
}

static void sim_node_init(struct sim_node *n, struct dioloop_throttle_group *g,
			  const struct dioloop_limits *l, int dir,
			  uint64_t bytes, unsigned int qd)
{
	memset(n, 0, sizeof(*n));
	dioloop_throttle_init(&n->t, g, l);
	n->dir = dir;
	n->bytes = bytes;
	n->qd = qd;
}

/* Stop the group (dispatching whatever waits) and check nothing was
 * lost or reordered. */
static void sim_finish(struct dioloop_throttle_group *g, struct sim_node **nodes,
		       int nr)
{
	int i;

	for (i = 0; i < nr; i++)
		nodes[i]->qd = 0;
	lat_ns = 0;
	sim_reap(true);
	dioloop_throttle_group_stop(g);
	for (i = 0; i < nr; i++) {
		ck_assert_msg(nodes[i]->outstanding == 0,
			      "node %d: %u requests still outstanding after "
			      "stop: every waiting request must be dispatched",
			      i, nodes[i]->outstanding);
		ck_assert_msg(!nodes[i]->out_of_order,
			      "node %d: requests dispatched out of FIFO order",
			      i);
		dioloop_throttle_destroy(&nodes[i]->t);
	}
	dioloop_throttle_group_destroy(g);
}

static void group_init(struct dioloop_throttle_group *g)
{
	fake_now = 5 * NS_PER_SEC;	/* not 0: stamps start anywhere */
	dispatched_by_run = 0;
	lat_ns = 0;
	dioloop_throttle_group_init(g, fake_clock, NULL);
}

/* Within pct percent of want? */
static bool within(double got, double want, double pct)
{
	return got >= want * (1 - pct / 100) && got <= want * (1 + pct / 100);
}

START_TEST(test_throttle_iops_limit_and_burst)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 500;
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4096, 32);
	sim_run(&g, nodes, 1, 10 * NS_PER_SEC);
	/* 10 s at 500/s, plus the burst (100 ms = 50 requests) and one
	 * admitted into debt. */
	ck_assert_msg(a.done_ops >= 5000 && a.done_ops <= 5051,
		      "500 IOPS for 10 s with a 50-request burst: expected "
		      "5000..5051 requests, got %llu",
		      (unsigned long long)a.done_ops);
	/* After the burst the rate is exact: the next second adds 500. */
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 499 && a.done_ops <= 501,
		      "expected 500 +- 1 requests in one more second, got %llu",
		      (unsigned long long)a.done_ops);
	sim_finish(&g, nodes, 1);
}
END_TEST

START_TEST(test_throttle_bps_large_requests_take_debt)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_BPS] = 1 * M;
	/* 256 KiB requests, larger than the 100 KiB burst: admitted whole,
	 * paid for by waiting. */
	sim_node_init(&a, &g, &l, DIOLOOP_WRITE, 256 * K, 4);
	sim_run(&g, nodes, 1, 10 * NS_PER_SEC);
	ck_assert_msg(a.done_bytes >= 10 * M &&
		      a.done_bytes <= 10 * M + 105 * K + 256 * K,
		      "1 MiB/s for 10 s: expected 10 MiB (+ burst and one "
		      "request), got %llu bytes",
		      (unsigned long long)a.done_bytes);
	sim_finish(&g, nodes, 1);
}
END_TEST

START_TEST(test_throttle_read_and_write_limits_are_separate)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node r, w, *nodes[] = { &r };
	int i;

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_READ_IOPS] = 100;
	l.rate[DIOLOOP_RATE_WRITE_BPS] = 1000;
	/* Reads pay read_iops only (write_bps does not slow them). */
	sim_node_init(&r, &g, &l, DIOLOOP_READ, 4096, 16);
	sim_run(&g, nodes, 1, 2 * NS_PER_SEC);
	ck_assert_msg(r.done_ops >= 200 && r.done_ops <= 211,
		      "read_iops=100 for 2 s: expected 200..211 reads, got %llu",
		      (unsigned long long)r.done_ops);
	/* Writes on another node with the same limits: read_iops does not
	 * hold them; the first takes write_bps into debt. */
	sim_node_init(&w, &g, &l, DIOLOOP_WRITE, 4096, 0);
	ck_assert_msg(sim_submit(&w), "a 4 KiB write is admitted while reads "
		      "wait on read_iops");
	/* A zero-byte write (discard) draws from no bps bucket. */
	w.bytes = 0;
	for (i = 0; i < 5; i++)
		ck_assert_msg(sim_submit(&w), "zero-byte write %d admitted "
			      "although write_bps is in debt", i);
	w.bytes = 4096;
	ck_assert_msg(!sim_submit(&w), "a 4 KiB write waits for the write_bps "
		      "debt");
	/* FIFO on a node holds across directions: a read queued behind a
	 * waiting write waits its turn. */
	w.dir = DIOLOOP_READ;
	ck_assert_msg(!sim_submit(&w), "a read behind a waiting write waits");
	r.qd = 0;
	dioloop_throttle_group_stop(&g);
	ck_assert_msg(w.outstanding == 0 && r.outstanding == 0 &&
		      !w.out_of_order, "stop dispatched everything, in order");
	dioloop_throttle_destroy(&w.t);
	dioloop_throttle_destroy(&r.t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

START_TEST(test_throttle_total_bps_shared_by_two_busy_nodes)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, b, *nodes[] = { &a, &b };

	group_init(&g);
	dioloop_limits_init(&l);
	dioloop_throttle_group_set_total(&g, 10 * M, 0);
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 64 * K, 32);
	sim_node_init(&b, &g, &l, DIOLOOP_WRITE, 64 * K, 32);
	sim_run(&g, nodes, 2, 10 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 50.0 * M, 2) &&
		      within((double)b.done_bytes, 50.0 * M, 2),
		      "total_bps=10M over two busy nodes for 10 s: expected "
		      "50 MiB each +- 2%%, got %llu and %llu",
		      (unsigned long long)a.done_bytes,
		      (unsigned long long)b.done_bytes);
	sim_finish(&g, nodes, 2);
}
END_TEST

START_TEST(test_throttle_fair_share_is_in_bytes)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, b, *nodes[] = { &a, &b };

	group_init(&g);
	dioloop_limits_init(&l);
	dioloop_throttle_group_set_total(&g, 20 * M, 0);
	/* Many small requests against a few large ones. */
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4 * K, 64);
	sim_node_init(&b, &g, &l, DIOLOOP_READ, 1 * M, 4);
	sim_run(&g, nodes, 2, 10 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 100.0 * M, 3) &&
		      within((double)b.done_bytes, 100.0 * M, 3),
		      "4 KiB vs 1 MiB requests under total_bps=20M: expected "
		      "100 MiB each +- 3%%, got %llu and %llu",
		      (unsigned long long)a.done_bytes,
		      (unsigned long long)b.done_bytes);
	sim_finish(&g, nodes, 2);
}
END_TEST

START_TEST(test_throttle_node_below_its_share_leaves_the_rest)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits slow, none;
	struct sim_node a, b, *nodes[] = { &a, &b };

	group_init(&g);
	dioloop_limits_init(&slow);
	dioloop_limits_init(&none);
	slow.rate[DIOLOOP_RATE_BPS] = 2 * M;
	dioloop_throttle_group_set_total(&g, 10 * M, 0);
	sim_node_init(&a, &g, &slow, DIOLOOP_READ, 64 * K, 32);
	sim_node_init(&b, &g, &none, DIOLOOP_READ, 64 * K, 32);
	sim_run(&g, nodes, 2, 10 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 20.0 * M, 3) &&
		      within((double)b.done_bytes, 80.0 * M, 3),
		      "node limited to 2M under total 10M: expected 20 MiB and "
		      "80 MiB +- 3%%, got %llu and %llu",
		      (unsigned long long)a.done_bytes,
		      (unsigned long long)b.done_bytes);
	sim_finish(&g, nodes, 2);
}
END_TEST

START_TEST(test_throttle_idle_node_earns_no_credit)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, b, *nodes[] = { &a, &b };

	group_init(&g);
	dioloop_limits_init(&l);
	dioloop_throttle_group_set_total(&g, 10 * M, 0);
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 64 * K, 32);
	sim_node_init(&b, &g, &l, DIOLOOP_READ, 64 * K, 0);	/* idle */
	sim_run(&g, nodes, 2, 5 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 50.0 * M, 2),
		      "a alone gets all 10M/s: expected 50 MiB in 5 s, got %llu",
		      (unsigned long long)a.done_bytes);
	a.done_bytes = 0;
	b.qd = 32;	/* b wakes up after 5 s of idling */
	sim_run(&g, nodes, 2, 5 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 25.0 * M, 3) &&
		      within((double)b.done_bytes, 25.0 * M, 3),
		      "after b joins, expected 25 MiB each in 5 s (no credit "
		      "for idling), got a %llu, b %llu",
		      (unsigned long long)a.done_bytes,
		      (unsigned long long)b.done_bytes);
	sim_finish(&g, nodes, 2);
}
END_TEST

START_TEST(test_throttle_limit_change_takes_effect_at_once)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 100;
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4096, 32);
	sim_run(&g, nodes, 1, 2 * NS_PER_SEC);
	ck_assert_msg(a.outstanding == 32, "requests wait under 100 IOPS");

	l.rate[DIOLOOP_RATE_IOPS] = 1000;
	dioloop_throttle_set_limits(&a.t, &l);
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 990 && a.done_ops <= 1101,
		      "raised to 1000 IOPS: expected ~1000 in the next second "
		      "(+ the new burst), got %llu",
		      (unsigned long long)a.done_ops);

	l.rate[DIOLOOP_RATE_IOPS] = 100;
	dioloop_throttle_set_limits(&a.t, &l);
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 99 && a.done_ops <= 111,
		      "lowered to 100 IOPS: expected ~100 in the next second, "
		      "got %llu", (unsigned long long)a.done_ops);

	sim_finish(&g, nodes, 1);

	/* A huge debt under a tiny limit is forgiven when the limit
	 * changes. */
	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_BPS] = 1;
	sim_node_init(&a, &g, &l, DIOLOOP_WRITE, 1 * M, 4);
	sim_run(&g, nodes, 1, NS_PER_SEC / 10);
	ck_assert_msg(a.done_bytes == 1 * M, "1 B/s: one 1 MiB request went "
		      "into debt, got %llu bytes",
		      (unsigned long long)a.done_bytes);
	l.rate[DIOLOOP_RATE_BPS] = 2 * M;
	dioloop_throttle_set_limits(&a.t, &l);
	a.done_bytes = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC + NS_PER_SEC / 10);
	/* 1 MiB requests at 2 MiB/s: at 0, 0.5 and 1.0 s.  With the old
	 * 1 MiB debt carried over, only at 0.5 and 1.0 s. */
	ck_assert_msg(a.done_bytes == 3 * M,
		      "after 1 B/s -> 2M: expected 3 MiB in 1.1 s, got %llu "
		      "(the old debt must not carry over)",
		      (unsigned long long)a.done_bytes);
	sim_finish(&g, nodes, 1);
}
END_TEST

START_TEST(test_throttle_stats_count_waits)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct dioloop_throttle_stats st;
	struct sim_node a;
	uint64_t wait;

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 10;
	l.burst_ms = 100;	/* one request */
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 512, 0);
	ck_assert_msg(sim_submit(&a), "first request admitted");
	ck_assert_msg(!sim_submit(&a), "second request waits (10 IOPS)");
	ck_assert_msg(!sim_submit(&a), "third request waits behind it");
	dioloop_throttle_get_stats(&a.t, &st);
	ck_assert_msg(st.queued == 2 && st.throttled == 0,
		      "2 queued, none dispatched yet: got %llu, %llu",
		      (unsigned long long)st.queued,
		      (unsigned long long)st.throttled);
	wait = dioloop_throttle_run(&g);
	ck_assert_msg(wait > 0 && wait <= NS_PER_SEC / 10 + 1,
		      "the next request may go within 100 ms: wait %llu ns",
		      (unsigned long long)wait);
	fake_now += wait;
	ck_assert_msg(dioloop_throttle_run(&g) != UINT64_MAX &&
		      a.done_ops == 2, "one more dispatched after the wait");
	dioloop_throttle_get_stats(&a.t, &st);
	ck_assert_msg(st.queued == 1 && st.throttled == 1 &&
		      st.throttled_ns == wait,
		      "expected 1 queued, 1 throttled for %llu ns; got %llu, "
		      "%llu, %llu ns", (unsigned long long)wait,
		      (unsigned long long)st.queued,
		      (unsigned long long)st.throttled,
		      (unsigned long long)st.throttled_ns);
	dioloop_throttle_group_stop(&g);
	ck_assert_msg(a.outstanding == 0, "stop dispatched the last one");
	ck_assert_msg(sim_submit(&a), "after stop everything is admitted");
	dioloop_throttle_destroy(&a.t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

START_TEST(test_throttle_unlimited_admits_inline)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a;
	int i;

	group_init(&g);
	dioloop_limits_init(&l);
	sim_node_init(&a, &g, &l, DIOLOOP_WRITE, 1 * M, 0);
	for (i = 0; i < 10000; i++)
		ck_assert_msg(sim_submit(&a), "no limit: request %d admitted "
			      "inline", i);
	ck_assert_msg(dioloop_throttle_run(&g) == UINT64_MAX,
		      "nothing waits: run reports no next wake-up");
	dioloop_throttle_group_stop(&g);
	dioloop_throttle_destroy(&a.t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

/* Requests whose dispatch the real timer thread calls, counted. */
static GMutex timed_lock;
static GCond timed_cond;
static int timed_dispatched;		/* by timed_lock */

static void timed_dispatch(struct dioloop_throttle_req *req)
{
	(void)req;
	g_mutex_lock(&timed_lock);
	timed_dispatched++;
	g_cond_signal(&timed_cond);
	g_mutex_unlock(&timed_lock);
}

/* Wait until n requests were dispatched or the deadline (monotonic us)
 * passed: how many were. */
static int timed_wait(int n, gint64 deadline)
{
	int got;

	g_mutex_lock(&timed_lock);
	while (timed_dispatched < n &&
	       g_cond_wait_until(&timed_cond, &timed_lock, deadline))
		;
	got = timed_dispatched;
	g_mutex_unlock(&timed_lock);
	return got;
}

/* The real timer thread paces waiting requests: no submitter sleeps. */
START_TEST(test_throttle_timer_thread_paces_queued_requests)
{
	struct dioloop_throttle_req reqs[21];
	struct dioloop_throttle_group g;
	struct dioloop_throttle t;
	struct dioloop_limits l;
	gint64 start, took;
	int i, admitted = 0;

	timed_dispatched = 0;
	dioloop_throttle_group_init(&g, NULL, NULL);
	ck_assert_int_eq(dioloop_throttle_group_start(&g), 0);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_WRITE_IOPS] = 100;
	l.burst_ms = 10;	/* one request */
	dioloop_throttle_init(&t, &g, &l);
	start = g_get_monotonic_time();
	for (i = 0; i < 21; i++) {
		reqs[i] = (struct dioloop_throttle_req){
			.dir = DIOLOOP_WRITE, .dispatch = timed_dispatch };
		if (dioloop_throttle_submit(&t, &reqs[i]))
			admitted++;
	}
	took = g_get_monotonic_time() - start;
	/* The burst holds one; the tokens earned meanwhile (one per 10 ms
	 * the submissions took: many under valgrind) may let more go, and
	 * one more into debt.  That no submit sleeps is proven without a
	 * wall clock by test_throttle_submit_never_sleeps. */
	ck_assert_msg(admitted >= 1 && admitted <= 2 + took / 10000,
		      "one request fits the burst, plus one per 10 ms the "
		      "submissions took (%lld us): %d were admitted at once",
		      (long long)took, admitted);
	ck_assert_int_eq(timed_wait(21 - admitted, start + 5000000),
			 21 - admitted);
	took = g_get_monotonic_time() - start;
	/* The rest at 10 ms each (a generous upper bound: valgrind runs
	 * this too). */
	ck_assert_msg(took >= 180000 && took < 5000000,
		      "21 requests at 100 IOPS: expected about 200 ms, took "
		      "%lld us", (long long)took);
	dioloop_throttle_group_stop(&g);
	dioloop_throttle_destroy(&t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

/*
 * Submitting over the limit never sleeps, shown without a wall clock: the
 * clock is frozen and no timer thread runs, so a submit that waited for
 * its turn (for tokens, for the timer, for a dispatch) would never return
 * and the tcase timeout would catch it.  Each waiting request goes only
 * when the hand-driven clock has moved by its 10 ms.
 */
START_TEST(test_throttle_submit_never_sleeps)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };
	uint64_t wait;
	int i, admitted = 0;

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_WRITE_IOPS] = 100;
	l.burst_ms = 10;	/* one request */
	sim_node_init(&a, &g, &l, DIOLOOP_WRITE, 4096, 0);
	for (i = 0; i < 21; i++)
		if (sim_submit(&a))
			admitted++;
	ck_assert_msg(admitted == 1, "a frozen clock and a one-request "
		      "burst: exactly 1 of 21 admitted at once, got %d",
		      admitted);
	ck_assert_msg(dispatched_by_run == 0 && a.outstanding == 20,
		      "nothing waiting went before the clock moved: %llu "
		      "dispatched, %u outstanding",
		      (unsigned long long)dispatched_by_run, a.outstanding);
	/* The clock drives the rest, one per 10 ms. */
	for (i = 0; i < 20; i++) {
		wait = dioloop_throttle_run(&g);
		ck_assert_msg(wait > 0 && wait <= NS_PER_SEC / 100,
			      "request %d: the next may go within 10 ms, "
			      "wait %llu ns", i, (unsigned long long)wait);
		ck_assert_msg(dispatched_by_run == (uint64_t)i,
			      "request %d dispatched before its time", i);
		fake_now += wait;
		dioloop_throttle_run(&g);
		ck_assert_msg(dispatched_by_run == (uint64_t)i + 1,
			      "request %d not dispatched when due", i);
	}
	ck_assert_msg(dioloop_throttle_run(&g) == UINT64_MAX,
		      "all 21 went, nothing waits");
	sim_finish(&g, nodes, 1);
}
END_TEST

/* Lifting a limit lets every request that waits under it go at once. */
START_TEST(test_throttle_lifting_limit_frees_waiters)
{
	struct dioloop_throttle_req reqs[64];
	struct dioloop_throttle_group g;
	struct dioloop_throttle t;
	struct dioloop_limits l;
	gint64 start;
	int i, admitted = 0;

	timed_dispatched = 0;
	dioloop_throttle_group_init(&g, NULL, NULL);
	ck_assert_int_eq(dioloop_throttle_group_start(&g), 0);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_BPS] = 1;		/* a byte a second */
	dioloop_throttle_init(&t, &g, &l);
	for (i = 0; i < 64; i++) {
		reqs[i] = (struct dioloop_throttle_req){
			.dir = DIOLOOP_WRITE, .bytes = 1 << 20,
			.dispatch = timed_dispatch };
		if (dioloop_throttle_submit(&t, &reqs[i]))
			admitted++;
	}
	ck_assert_msg(admitted == 1, "at 1 B/s one 1 MiB request goes, %d "
		      "went", admitted);
	ck_assert_int_eq(timed_wait(1, g_get_monotonic_time() + 200000), 0);
	start = g_get_monotonic_time();
	dioloop_limits_init(&l);
	dioloop_throttle_set_limits(&t, &l);
	ck_assert_msg(timed_wait(63, start + 2000000) == 63,
		      "after the limit is lifted the 63 waiting requests go "
		      "within 2 s");
	dioloop_throttle_group_stop(&g);
	dioloop_throttle_destroy(&t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

/* ---- high rates ---- */

START_TEST(test_throttle_high_rates_hold)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };
	uint64_t gib = 1024ull * M;

	/* 100,000 IOPS of 4 KiB reads at QD32: 2 s, then one more. */
	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 100000;
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4096, 32);
	sim_run(&g, nodes, 1, 2 * NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 200000 && a.done_ops <= 210001,
		      "iops=100000 for 2 s (burst 10,000): expected "
		      "200000..210001 requests, got %llu",
		      (unsigned long long)a.done_ops);
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 99999 && a.done_ops <= 100001,
		      "iops=100000, the next second: expected 100000 +- 1, "
		      "got %llu", (unsigned long long)a.done_ops);
	sim_finish(&g, nodes, 1);

	/* 1 GiB/s of 128 KiB writes at QD32. */
	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_WRITE_BPS] = gib;
	sim_node_init(&a, &g, &l, DIOLOOP_WRITE, 128 * K, 32);
	sim_run(&g, nodes, 1, NS_PER_SEC / 2);
	a.done_bytes = 0;
	sim_run(&g, nodes, 1, 2 * NS_PER_SEC);
	ck_assert_msg(within((double)a.done_bytes, 2.0 * gib, 0.1),
		      "write_bps=1G for 2 s: expected 2 GiB +- 0.1%%, got %llu "
		      "bytes", (unsigned long long)a.done_bytes);
	sim_finish(&g, nodes, 1);
}
END_TEST

/* After idling, a node at 100,000 IOPS gets its burst (100 ms of the
 * rate) and one request more, no more; then the rate. */
START_TEST(test_throttle_burst_at_high_rate)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };
	unsigned int admitted = 0;

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 100000;
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4096, 32);
	sim_run(&g, nodes, 1, NS_PER_SEC);
	a.qd = 0;
	sim_run(&g, nodes, 1, 2 * NS_PER_SEC);		/* idle 2 s */
	ck_assert_int_eq(a.outstanding, 0);
	while (sim_submit(&a))
		admitted++;
	ck_assert_msg(admitted >= 10000 && admitted <= 10001,
		      "after 2 s idle at iops=100000 (burst 100 ms): expected "
		      "10000..10001 admitted at once, got %u", admitted);
	a.qd = 32;
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 99999 && a.done_ops <= 100002,
		      "the second after the burst: expected 100000, got %llu",
		      (unsigned long long)a.done_ops);
	sim_finish(&g, nodes, 1);
}
END_TEST

/* 100,000 -> 1,000 -> 100,000 IOPS: each change holds within 100 ms. */
START_TEST(test_throttle_limit_change_at_high_rates)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };

	group_init(&g);
	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_IOPS] = 100000;
	sim_node_init(&a, &g, &l, DIOLOOP_READ, 4096, 32);
	sim_run(&g, nodes, 1, NS_PER_SEC);

	l.rate[DIOLOOP_RATE_IOPS] = 1000;
	dioloop_throttle_set_limits(&a.t, &l);
	sim_run(&g, nodes, 1, NS_PER_SEC / 10);
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC);
	ck_assert_msg(a.done_ops >= 999 && a.done_ops <= 1001,
		      "lowered to 1000 IOPS: from 100 ms on expected 1000 a "
		      "second, got %llu", (unsigned long long)a.done_ops);

	l.rate[DIOLOOP_RATE_IOPS] = 100000;
	dioloop_throttle_set_limits(&a.t, &l);
	a.done_ops = 0;
	sim_run(&g, nodes, 1, NS_PER_SEC / 10);
	ck_assert_msg(a.done_ops >= 9500,
		      "raised to 100000 IOPS: expected >= 9500 in the first "
		      "100 ms, got %llu", (unsigned long long)a.done_ops);
	sim_finish(&g, nodes, 1);
}
END_TEST

/* One case of the coarse simulation. */
struct coarse_case {
	const char *what;
	int key;			/* the one limit set */
	uint64_t rate;
	uint32_t burst_ms;		/* 0: the default */
	int dir;
	uint64_t bytes;
	unsigned int qd;
	uint64_t lat_us, tick_us, period_us;
	uint64_t secs;			/* measured, after 1 s of warm-up */
};

static const struct coarse_case coarse_cases[] = {
	/* The timer wakes every 4 ms (a coarse tick), the burst is 1 ms:
	 * the requests that keep arriving must pace the queue. */
	{ "iops=100000 burst_ms=1, 4k reads QD32, timer every 4 ms",
	  DIOLOOP_RATE_IOPS, 100000, 1, DIOLOOP_READ, 4096, 32, 100, 5, 4000,
	  2 },
	{ "write_iops=50000 burst_ms=1, 4k writes QD32, timer every 4 ms",
	  DIOLOOP_RATE_WRITE_IOPS, 50000, 1, DIOLOOP_WRITE, 4096, 32, 200, 5,
	  4000, 2 },
	{ "bps=1G burst_ms=1, 64k reads QD32, timer every 4 ms",
	  DIOLOOP_RATE_BPS, 1024ull * M, 1, DIOLOOP_READ, 64 * K, 32, 200, 5,
	  4000, 2 },
	/* The default burst, a timer that wakes 1 ms late. */
	{ "iops=100000, 4k reads QD32, timer every 1 ms",
	  DIOLOOP_RATE_IOPS, 100000, 0, DIOLOOP_READ, 4096, 32, 100, 5, 1000,
	  2 },
	{ "iops=1000, 4k reads QD1, timer every 1 ms",
	  DIOLOOP_RATE_IOPS, 1000, 0, DIOLOOP_READ, 4096, 1, 100, 10, 1000,
	  5 },
	{ "iops=10, 4k writes QD1, timer every 1 ms",
	  DIOLOOP_RATE_IOPS, 10, 0, DIOLOOP_WRITE, 4096, 1, 100, 100, 1000,
	  30 },
	{ "bps=64K, 4k reads QD32, timer every 1 ms",
	  DIOLOOP_RATE_BPS, 64 * K, 0, DIOLOOP_READ, 4096, 32, 100, 100, 1000,
	  10 },
	{ "bps=200M, 1M writes QD8, timer every 1 ms",
	  DIOLOOP_RATE_BPS, 200ull * M, 0, DIOLOOP_WRITE, 1 * M, 8, 2000, 10,
	  1000, 5 },
};

/* The delivered rate is within 2% of the limit, however coarse the
 * timer, at low and high rates, QD1 and QD32, reads and writes. */
START_TEST(test_throttle_holds_with_a_coarse_timer)
{
	const struct coarse_case *c = &coarse_cases[_i];
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct sim_node a, *nodes[] = { &a };
	bool bytes = c->key >= DIOLOOP_RATE_BPS;
	double got, want = (double)c->rate * (double)c->secs;

	group_init(&g);
	lat_ns = c->lat_us * 1000;
	dioloop_limits_init(&l);
	l.rate[c->key] = c->rate;
	l.burst_ms = c->burst_ms;
	sim_node_init(&a, &g, &l, c->dir, c->bytes, c->qd);
	sim_run_coarse(&g, nodes, 1, NS_PER_SEC, c->tick_us * 1000,
		       c->period_us * 1000);
	a.done_ops = a.done_bytes = 0;
	sim_run_coarse(&g, nodes, 1, c->secs * NS_PER_SEC, c->tick_us * 1000,
		       c->period_us * 1000);
	got = bytes ? (double)a.done_bytes : (double)a.done_ops;
	ck_assert_msg(within(got, want, 2),
		      "%s: expected %.0f %s in %llu s +- 2%%, got %.0f (%.1f%%)",
		      c->what, want, bytes ? "bytes" : "requests",
		      (unsigned long long)c->secs, got, 100.0 * got / want);
	sim_finish(&g, nodes, 1);
}
END_TEST

/* Submit on a node without limits while another thread holds the group
 * lock: it must not wait for the lock. */
struct nolock_arg {
	struct dioloop_throttle *t;
	struct dioloop_throttle_req req;
	atomic_int state;		/* 0 running, 1 admitted, 2 queued */
};

static gpointer nolock_submit(gpointer data)
{
	struct nolock_arg *a = data;

	atomic_store(&a->state, dioloop_throttle_submit(a->t, &a->req) ?
		     1 : 2);
	return NULL;
}

START_TEST(test_throttle_unlimited_takes_no_lock)
{
	struct dioloop_throttle_group g;
	struct dioloop_limits l;
	struct dioloop_throttle t;
	struct nolock_arg arg = { .t = &t };
	GThread *th;
	int i, state = 0;

	group_init(&g);
	dioloop_limits_init(&l);
	dioloop_throttle_init(&t, &g, &l);
	arg.req = (struct dioloop_throttle_req){ .dir = DIOLOOP_WRITE,
		.bytes = 4096, .dispatch = sim_dispatch };
	atomic_init(&arg.state, 0);
	g_mutex_lock(&g.lock);
	th = g_thread_new("submit", nolock_submit, &arg);
	/* Up to 30 s: a loaded CI machine may not run the thread for a
	 * while, and a submit that waits for the lock never ends. */
	for (i = 0; i < 30000 && !(state = atomic_load(&arg.state)); i++)
		g_usleep(1000);
	g_mutex_unlock(&g.lock);
	g_thread_join(th);
	ck_assert_msg(state == 1, "a request to a node without limits waited "
		      "for the throttle's lock held elsewhere (state %d after "
		      "30 s): the unlimited path must take no lock", state);
	dioloop_throttle_group_stop(&g);
	dioloop_throttle_destroy(&t);
	dioloop_throttle_group_destroy(&g);
}
END_TEST

static Suite *throttle_suite(void)
{
	Suite *s = suite_create("throttle");
	TCase *tc;

	tc = tcase_create("buckets");
	tcase_add_test(tc, test_throttle_iops_limit_and_burst);
	tcase_add_test(tc, test_throttle_bps_large_requests_take_debt);
	tcase_add_test(tc, test_throttle_read_and_write_limits_are_separate);
	tcase_add_test(tc, test_throttle_unlimited_admits_inline);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("fair_share");
	tcase_add_test(tc, test_throttle_total_bps_shared_by_two_busy_nodes);
	tcase_add_test(tc, test_throttle_fair_share_is_in_bytes);
	tcase_add_test(tc, test_throttle_node_below_its_share_leaves_the_rest);
	tcase_add_test(tc, test_throttle_idle_node_earns_no_credit);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("runtime");
	tcase_add_test(tc, test_throttle_limit_change_takes_effect_at_once);
	tcase_add_test(tc, test_throttle_stats_count_waits);
	tcase_add_test(tc, test_throttle_submit_never_sleeps);
	tcase_add_test(tc, test_throttle_timer_thread_paces_queued_requests);
	tcase_add_test(tc, test_throttle_lifting_limit_frees_waiters);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("high_rates");
	tcase_add_test(tc, test_throttle_high_rates_hold);
	tcase_add_test(tc, test_throttle_burst_at_high_rate);
	tcase_add_test(tc, test_throttle_limit_change_at_high_rates);
	tcase_add_loop_test(tc, test_throttle_holds_with_a_coarse_timer, 0,
			    G_N_ELEMENTS(coarse_cases));
	tcase_add_test(tc, test_throttle_unlimited_takes_no_lock);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(throttle_suite());
}
