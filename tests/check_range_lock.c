/* SPDX-License-Identifier: MIT */
/* Range locks: compatibility, arrival order, grants on release. */
#include <check.h>
#include <glib.h>

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
	ck_assert_msg(!range_lock_acquire(&t, &x),
		      "exclusive range overlapping a held one must wait");
	ck_assert_msg(range_lock_acquire(&t, &far),
		      "adjacent non-overlapping range [8192,12288) granted");
	ck_assert_int_eq(granted_count, 0);
	range_lock_release(&t, &a);
	ck_assert_msg(granted_count == 1 && granted_order[0] == &x,
		      "release grants the waiting exclusive range");
	ck_assert(x.granted);
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
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(range_lock_suite());
}
