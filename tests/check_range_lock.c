/* SPDX-License-Identifier: MIT */
/* Range locks: compatibility, arrival order, grants on release. */
#include <check.h>
#include <glib.h>
#include <stdatomic.h>

#include "backends/range_lock.h"
#include "tests/testutil.h"

static int granted_count;
static struct range_lock *granted_order[16];

static void record_grant(struct range_lock *rl)
{
	granted_order[granted_count++] = rl;
}

START_TEST(test_range_lock_shared_ranges_share)
{
	struct range_lock_tree t;
	struct range_lock a, b;

	range_lock_tree_init(&t);
	range_lock_init(&a, 0, 4096, false, record_grant);
	range_lock_init(&b, 0, 4096, false, record_grant);
	ck_assert_msg(range_lock_acquire(&t, &a), "first shared range granted");
	ck_assert_msg(range_lock_acquire(&t, &b),
		      "overlapping shared range granted at once");
	range_lock_release(&t, &a);
	range_lock_release(&t, &b);
	range_lock_tree_clear(&t);
}
END_TEST

START_TEST(test_range_lock_exclusive_waits_then_granted)
{
	struct range_lock_tree t;
	struct range_lock a, x, far;

	granted_count = 0;
	range_lock_tree_init(&t);
	range_lock_init(&a, 0, 8192, false, record_grant);
	range_lock_init(&x, 4096, 4097, true, record_grant);
	range_lock_init(&far, 8192, 12288, true, record_grant);
	ck_assert(range_lock_acquire(&t, &a));
	ck_assert_msg(a.fast, "a shared range with no exclusive one about "
		      "is granted outside the queue");
	ck_assert_msg(!range_lock_acquire(&t, &x),
		      "exclusive range overlapping a held one must wait");
	ck_assert_msg(!range_lock_acquire(&t, &far),
		      "an exclusive range waits for shared ranges granted "
		      "outside the queue, even one it does not overlap");
	ck_assert_int_eq(granted_count, 0);
	range_lock_release(&t, &a);
	ck_assert_msg(granted_count == 2 && granted_order[0] == &x &&
		      granted_order[1] == &far,
		      "release grants both waiting exclusive ranges, in order");
	ck_assert(x.granted && far.granted);
	range_lock_release(&t, &x);
	range_lock_release(&t, &far);
	range_lock_tree_clear(&t);
}
END_TEST

START_TEST(test_range_lock_fifo_no_starvation)
{
	struct range_lock_tree t;
	struct range_lock s1, x, s2;

	granted_count = 0;
	range_lock_tree_init(&t);
	range_lock_init(&s1, 0, 4096, false, record_grant);
	range_lock_init(&x, 0, 4096, true, record_grant);
	range_lock_init(&s2, 0, 4096, false, record_grant);
	ck_assert(range_lock_acquire(&t, &s1));
	ck_assert(!range_lock_acquire(&t, &x));
	ck_assert_msg(!range_lock_acquire(&t, &s2),
		      "a shared range queued behind a waiting exclusive one "
		      "waits (no starvation of the exclusive waiter)");
	range_lock_release(&t, &s1);
	ck_assert_msg(granted_count == 1 && granted_order[0] == &x,
		      "exclusive granted first");
	range_lock_release(&t, &x);
	ck_assert_msg(granted_count == 2 && granted_order[1] == &s2,
		      "then the shared one");
	range_lock_release(&t, &s2);
	range_lock_tree_clear(&t);
}
END_TEST

START_TEST(test_range_lock_shared_takes_queue_while_exclusive_there)
{
	struct range_lock_tree t;
	struct range_lock x, near, far;

	granted_count = 0;
	range_lock_tree_init(&t);
	range_lock_init(&x, 0, 4096, true, record_grant);
	range_lock_init(&near, 0, 4096, false, record_grant);
	range_lock_init(&far, 8192, 12288, false, record_grant);
	ck_assert(range_lock_acquire(&t, &x));
	ck_assert_msg(!range_lock_acquire(&t, &near),
		      "a shared range overlapping a held exclusive one waits");
	ck_assert_msg(range_lock_acquire(&t, &far) && !far.fast,
		      "a shared range elsewhere is granted, through the queue");
	range_lock_release(&t, &x);
	ck_assert(granted_count == 1 && granted_order[0] == &near);
	range_lock_release(&t, &near);
	range_lock_release(&t, &far);
	range_lock_tree_clear(&t);
}
END_TEST

/*
 * Shared ranges (most of them granted outside the queue) and exclusive
 * ones over overlapping bytes from several threads: no exclusive holder
 * ever sees a shared one inside, and every range is granted in the end.
 */
struct mixer {
	struct range_lock_tree *tree;
	atomic_int *shared_inside;
	atomic_int *exclusive_inside;
	atomic_int *bad;
	int rounds;
	bool exclusive_every_8th;
};

static gpointer mixer_thread(gpointer data)
{
	struct mixer *m = data;
	int i;

	for (i = 0; i < m->rounds; i++) {
		bool excl = m->exclusive_every_8th && i % 8 == 0;
		struct range_lock rl;

		/* [0, 8192) or [4096, 8192): every two overlap. */
		range_lock_init(&rl, (uint64_t)(i % 2) * 4096, 8192, excl,
				NULL);
		range_lock_acquire_wait(m->tree, &rl);
		if (excl) {
			if (atomic_fetch_add(m->exclusive_inside, 1) != 0 ||
			    atomic_load(m->shared_inside) != 0)
				atomic_fetch_add(m->bad, 1);
			g_thread_yield();
			if (atomic_load(m->shared_inside) != 0)
				atomic_fetch_add(m->bad, 1);
			atomic_fetch_sub(m->exclusive_inside, 1);
		} else {
			atomic_fetch_add(m->shared_inside, 1);
			if (atomic_load(m->exclusive_inside) != 0)
				atomic_fetch_add(m->bad, 1);
			atomic_fetch_sub(m->shared_inside, 1);
		}
		range_lock_release(m->tree, &rl);
	}
	return NULL;
}

START_TEST(test_range_lock_fast_shared_against_exclusive)
{
	struct range_lock_tree t;
	atomic_int shared_inside = 0, exclusive_inside = 0, bad = 0;
	int rounds = (int)test_iterations(20000), i;
	struct mixer m[4];
	GThread *th[4];

	range_lock_tree_init(&t);
	for (i = 0; i < 4; i++) {
		m[i] = (struct mixer){ &t, &shared_inside, &exclusive_inside,
				       &bad, rounds, i < 2 };
		th[i] = g_thread_new("mixer", mixer_thread, &m[i]);
	}
	for (i = 0; i < 4; i++)
		g_thread_join(th[i]);
	int nbad = atomic_load(&bad);
	unsigned int fast = atomic_load(&t.fast_shared);
	unsigned int excl = atomic_load(&t.exclusives);

	ck_assert_msg(nbad == 0, "%d times an exclusive range had company",
		      nbad);
	ck_assert_uint_eq(fast, 0);
	ck_assert_uint_eq(excl, 0);
	range_lock_tree_clear(&t);
}
END_TEST

struct contender {
	struct range_lock_tree *tree;
	int *shared_counter;	/* protected by the exclusive range */
	int rounds;
};

static gpointer contender_thread(gpointer data)
{
	struct contender *c = data;
	int i;

	for (i = 0; i < c->rounds; i++) {
		struct range_lock rl;
		int v;

		range_lock_init(&rl, 100, 200, true, NULL);
		range_lock_acquire_wait(c->tree, &rl);
		v = *c->shared_counter;
		g_thread_yield();
		*c->shared_counter = v + 1;
		range_lock_release(c->tree, &rl);
	}
	return NULL;
}

START_TEST(test_range_lock_wait_excludes_threads)
{
	struct range_lock_tree t;
	int counter = 0, i, rounds = (int)test_iterations(2000);
	struct contender c = { &t, &counter, rounds };
	GThread *th[4];

	range_lock_tree_init(&t);
	for (i = 0; i < 4; i++)
		th[i] = g_thread_new("contender", contender_thread, &c);
	for (i = 0; i < 4; i++)
		g_thread_join(th[i]);
	ck_assert_msg(counter == 4 * rounds,
		      "exclusive ranges serialise: expected %d increments, got %d",
		      4 * rounds, counter);
	range_lock_tree_clear(&t);
}
END_TEST

static Suite *range_lock_suite(void)
{
	Suite *s = suite_create("range_lock");
	TCase *tc = tcase_create("grants");

	tcase_add_test(tc, test_range_lock_shared_ranges_share);
	tcase_add_test(tc, test_range_lock_exclusive_waits_then_granted);
	tcase_add_test(tc, test_range_lock_fifo_no_starvation);
	suite_add_tcase(s, tc);
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_range_lock_wait_excludes_threads);
	tcase_add_test(tc, test_range_lock_shared_takes_queue_while_exclusive_there);
	tcase_add_test(tc, test_range_lock_fast_shared_against_exclusive);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(range_lock_suite());
}
