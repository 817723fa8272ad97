/* SPDX-License-Identifier: MIT */
/*
 * A node's I/O admission (fusefs/nodes.c): requests count themselves in
 * and out without a lock, and a drain (resize, snapshot, migration
 * switch) waits for every request in flight and holds off new ones.
 *
 * The property: while a drainer holds the node drained, no request is
 * between its dioloop_node_io_begin and dioloop_node_io_end.  Requesters
 * and drainers race on every core; each requester counts itself inside,
 * and a drainer that finds anyone inside counts a breach.  Nothing may
 * hang either (the test's timeout).  And a node whose drain saw no
 * request left may be freed at once (dioloop_node_free): the last
 * request out touches it no more (ASan sees it when it does).
 */
#include <check.h>
#include <glib.h>
#include <stdatomic.h>
#include <string.h>

#include "fusefs/fs.h"
#include "tests/testutil.h"

#define REQUESTERS 4

struct gate_rig {
	struct dioloop_node node;
	_Atomic int inside;		/* requesters between begin and end */
	_Atomic bool drained;		/* a drainer holds the node */
	_Atomic unsigned breaches;	/* someone inside while drained */
	_Atomic bool stop;
	_Atomic unsigned long requests;
};

static void rig_init(struct gate_rig *r)
{
	memset(r, 0, sizeof(*r));
	g_mutex_init(&r->node.io_lock);
	g_cond_init(&r->node.io_cond);
}

static void rig_clear(struct gate_rig *r)
{
	g_mutex_clear(&r->node.io_lock);
	g_cond_clear(&r->node.io_cond);
}

static gpointer requester(gpointer data)
{
	struct gate_rig *r = data;

	while (!atomic_load(&r->stop)) {
		dioloop_node_io_begin(&r->node);
		atomic_fetch_add(&r->inside, 1);
		if (atomic_load(&r->drained))
			atomic_fetch_add(&r->breaches, 1);
		atomic_fetch_sub(&r->inside, 1);
		dioloop_node_io_end(&r->node);
		atomic_fetch_add(&r->requests, 1);
	}
	return NULL;
}

static gpointer drainer(gpointer data)
{
	struct gate_rig *r = data;
	unsigned i, spin;

	for (i = 0; i < test_iterations(20000); i++) {
		dioloop_node_drain_begin(&r->node);
		atomic_store(&r->drained, true);
		/* Look a few times: a requester admitted by mistake may be
		 * on its way in. */
		for (spin = 0; spin < 50; spin++)
			if (atomic_load(&r->inside))
				atomic_fetch_add(&r->breaches, 1);
		atomic_store(&r->drained, false);
		dioloop_node_drain_end(&r->node);
	}
	return NULL;
}

START_TEST(test_gate_no_request_inside_a_drain)
{
	struct gate_rig r;
	GThread *req[REQUESTERS], *dr[2];
	unsigned i, breaches;

	rig_init(&r);
	for (i = 0; i < REQUESTERS; i++)
		req[i] = g_thread_new("requester", requester, &r);
	for (i = 0; i < G_N_ELEMENTS(dr); i++)
		dr[i] = g_thread_new("drainer", drainer, &r);
	for (i = 0; i < G_N_ELEMENTS(dr); i++)
		g_thread_join(dr[i]);
	atomic_store(&r.stop, true);
	for (i = 0; i < REQUESTERS; i++)
		g_thread_join(req[i]);
	breaches = atomic_load(&r.breaches);
	ck_assert_msg(breaches == 0, "%u times a request was inside a drain",
		      breaches);
	ck_assert_int_eq(atomic_load(&r.node.in_flight), 0);
	ck_assert(!atomic_load(&r.node.draining));
	ck_assert_uint_gt(atomic_load(&r.requests), 0);
	rig_clear(&r);
}
END_TEST

struct one_call {
	struct gate_rig *r;
	_Atomic bool done;
};

static gpointer drain_once(gpointer data)
{
	struct one_call *c = data;

	dioloop_node_drain_begin(&c->r->node);
	atomic_store(&c->done, true);
	return NULL;
}

static gpointer begin_once(gpointer data)
{
	struct one_call *c = data;

	dioloop_node_io_begin(&c->r->node);
	atomic_store(&c->done, true);
	return NULL;
}

/* A drain waits for the request in flight; a request waits for the
 * drain to end.  (The pauses only give a wrong early return its chance:
 * a slow machine can miss the defect, never fail a correct gate.) */
START_TEST(test_gate_each_waits_for_the_other)
{
	struct gate_rig r;
	struct one_call c = { .r = &r };
	GThread *t;

	rig_init(&r);
	dioloop_node_io_begin(&r.node);
	t = g_thread_new("drain", drain_once, &c);
	g_usleep(50 * 1000);
	ck_assert_msg(!atomic_load(&c.done),
		      "the drain ended with a request in flight");
	dioloop_node_io_end(&r.node);
	g_thread_join(t);
	ck_assert(atomic_load(&c.done));

	atomic_store(&c.done, false);
	t = g_thread_new("begin", begin_once, &c);
	g_usleep(50 * 1000);
	ck_assert_msg(!atomic_load(&c.done),
		      "a request was admitted during the drain");
	dioloop_node_drain_end(&r.node);
	g_thread_join(t);
	ck_assert(atomic_load(&c.done));
	ck_assert_int_eq(atomic_load(&r.node.in_flight), 1);
	dioloop_node_io_end(&r.node);
	ck_assert_int_eq(atomic_load(&r.node.in_flight), 0);
	rig_clear(&r);
}
END_TEST

static gpointer end_once(gpointer data)
{
	dioloop_node_io_end(data);
	return NULL;
}

/* The last request ends on another thread while the node drains to be
 * freed; the free follows the drain at once. */
START_TEST(test_gate_free_after_drain)
{
	unsigned i;

	for (i = 0; i < test_iterations(2000); i++) {
		struct dioloop_node *node =
			g_aligned_alloc0(1, sizeof(*node),
					 _Alignof(struct dioloop_node));
		GThread *t;

		g_mutex_init(&node->io_lock);
		g_cond_init(&node->io_cond);
		dioloop_node_io_begin(node);
		t = g_thread_new("end", end_once, node);
		dioloop_node_drain_begin(node);
		g_mutex_clear(&node->io_lock);
		g_cond_clear(&node->io_cond);
		g_aligned_free(node);
		g_thread_join(t);
	}
}
END_TEST

static Suite *gate_suite(void)
{
	Suite *s = suite_create("node_gate");
	TCase *tc = tcase_create("gate");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_gate_no_request_inside_a_drain);
	tcase_add_test(tc, test_gate_each_waits_for_the_other);
	tcase_add_test(tc, test_gate_free_after_drain);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(gate_suite());
}
