/* SPDX-License-Identifier: MIT */
/* Runs of large requests: one piece of memory each, inside huge pages
 * where the kernel has them, never handed out twice, never waited for. */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iter/run_pool.h"
#include "tests/testutil.h"

#define RUN (1u << 20)

static struct dioloop_run_pool *runs_new_or_fail(size_t size, unsigned nr)
{
	struct dioloop_run_pool *pool = NULL;

	ck_assert_int_eq(dioloop_run_pool_new(size, nr, &pool), 0);
	ck_assert_ptr_nonnull(pool);
	return pool;
}

/* nr runs, then none: get says so at once, and counts the miss.  Each
 * run is run_size bytes of its own, aligned to its size from a 2 MiB
 * boundary (so that a 1 MiB run never straddles a huge page). */
START_TEST(test_run_pool_hands_out_each_run_once)
{
	enum { NR = 8 };
	struct dioloop_run_pool *pool = runs_new_or_fail(RUN, NR);
	struct dioloop_run_pool_stats st;
	char *runs[NR];
	int i, j;

	for (i = 0; i < NR; i++) {
		runs[i] = dioloop_run_pool_get(pool);
		ck_assert_ptr_nonnull(runs[i]);
		ck_assert_msg((uintptr_t)runs[i] % RUN == 0,
			      "run %d at %p: not aligned to its size", i,
			      (void *)runs[i]);
		memset(runs[i], 'a' + i, RUN);
		for (j = 0; j < i; j++)
			ck_assert_msg(runs[i] + RUN <= runs[j] ||
					      runs[j] + RUN <= runs[i],
				      "runs %d and %d overlap", i, j);
	}
	ck_assert_ptr_null(dioloop_run_pool_get(pool));
	for (i = 0; i < NR; i++)
		ck_assert_msg(runs[i][0] == 'a' + i &&
				      runs[i][RUN - 1] == 'a' + i,
			      "run %d was written by another", i);
	dioloop_run_pool_get_stats(pool, &st);
	ck_assert(st.runs == NR && st.in_use == NR && st.high_water == NR &&
		  st.taken == NR && st.missed == 1);
	/* Last put, first got: a steady load keeps using the same runs. */
	dioloop_run_pool_put(pool, runs[3]);
	ck_assert_ptr_eq(dioloop_run_pool_get(pool), runs[3]);
	for (i = 0; i < NR; i++)
		dioloop_run_pool_put(pool, runs[i]);
	dioloop_run_pool_get_stats(pool, &st);
	ck_assert(st.in_use == 0 && st.high_water == NR);
	dioloop_run_pool_free(pool);
}
END_TEST

START_TEST(test_run_pool_rejects_bad_sizes)
{
	struct dioloop_run_pool *pool = NULL;

	ck_assert_int_eq(dioloop_run_pool_new(0, 4, &pool), -EINVAL);
	ck_assert_int_eq(dioloop_run_pool_new(RUN, 0, &pool), -EINVAL);
	ck_assert_int_eq(dioloop_run_pool_new(RUN + 512, 4, &pool), -EINVAL);
	ck_assert_int_eq(dioloop_run_pool_new(SIZE_MAX & ~(size_t)4095, 2,
					      &pool),
			 -EINVAL);
	ck_assert_ptr_null(pool);
}
END_TEST

START_TEST(test_run_pool_put_twice_aborts)
{
	struct dioloop_run_pool *pool = runs_new_or_fail(RUN, 2);
	void *run = dioloop_run_pool_get(pool);

	dioloop_run_pool_put(pool, run);
	dioloop_run_pool_put(pool, run);
	ck_abort_msg("expected a second put of the same run to abort");
}
END_TEST

START_TEST(test_run_pool_put_foreign_aborts)
{
	struct dioloop_run_pool *pool = runs_new_or_fail(RUN, 2);
	char *run = dioloop_run_pool_get(pool);

	dioloop_run_pool_put(pool, run + 4096);
	ck_abort_msg("expected a pointer inside a run to abort");
}
END_TEST

/* Threads taking and giving back runs: a run is never held by two at
 * once (each stamps it while holding it and checks the stamp), and what
 * each takes it gives back. */
struct churn {
	struct dioloop_run_pool *pool;
	uint64_t id;
	unsigned rounds;
	unsigned got, missed;
};

static gpointer churn_thread(gpointer data)
{
	struct churn *c = data;
	unsigned r;

	for (r = 0; r < c->rounds; r++) {
		uint64_t *run = dioloop_run_pool_get(c->pool);

		if (!run) {
			c->missed++;
			continue;
		}
		c->got++;
		run[0] = c->id;
		run[RUN / sizeof(uint64_t) - 1] = c->id;
		g_thread_yield();
		if (run[0] != c->id ||
		    run[RUN / sizeof(uint64_t) - 1] != c->id)
			return GINT_TO_POINTER(1);
		dioloop_run_pool_put(c->pool, run);
	}
	return NULL;
}

START_TEST(test_run_pool_threads_never_share_a_run)
{
	enum { THREADS = 6, NR = 4 };
	struct dioloop_run_pool *pool = runs_new_or_fail(RUN, NR);
	struct dioloop_run_pool_stats st;
	struct churn c[THREADS];
	GThread *t[THREADS];
	uint64_t got = 0, missed = 0;
	int i;

	for (i = 0; i < THREADS; i++) {
		c[i] = (struct churn){ .pool = pool, .id = (uint64_t)i + 1,
				       .rounds = test_iterations(20000) };
		t[i] = g_thread_new("churn", churn_thread, &c[i]);
	}
	for (i = 0; i < THREADS; i++) {
		ck_assert_msg(g_thread_join(t[i]) == NULL,
			      "thread %d found its run stamped by another", i);
		got += c[i].got;
		missed += c[i].missed;
	}
	dioloop_run_pool_get_stats(pool, &st);
	ck_assert(st.in_use == 0);
	ck_assert_msg(st.taken == got && st.missed == missed,
		      "stats %" PRIu64 "/%" PRIu64 ", threads %" PRIu64
		      "/%" PRIu64, st.taken, st.missed, got, missed);
	ck_assert(st.high_water <= NR);
	dioloop_run_pool_free(pool);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
/* Under AddressSanitizer a run given back is poisoned: writing to it
 * after the put is reported, and ends the process with status 1 (this
 * test passing without the report would exit with 0). */
START_TEST(test_run_pool_use_after_put_is_reported)
{
	struct dioloop_run_pool *pool = runs_new_or_fail(RUN, 2);
	volatile char *run = dioloop_run_pool_get(pool);

	run[0] = 1;
	dioloop_run_pool_put(pool, (void *)run);
	run[100] = 1;	/* ASan reports this and exits with status 1 */
	dioloop_run_pool_free(pool);	/* not reported: exit status 0 */
}
END_TEST
#endif

static Suite *run_pool_suite(void)
{
	Suite *s = suite_create("run_pool");
	TCase *tc = tcase_create("runs");

	tcase_add_test(tc, test_run_pool_hands_out_each_run_once);
	tcase_add_test(tc, test_run_pool_rejects_bad_sizes);
	tcase_add_test(tc, test_run_pool_threads_never_share_a_run);
	tcase_add_test_raise_signal(tc, test_run_pool_put_twice_aborts,
				    SIGABRT);
	tcase_add_test_raise_signal(tc, test_run_pool_put_foreign_aborts,
				    SIGABRT);
#if defined(__SANITIZE_ADDRESS__)
	tcase_add_exit_test(tc, test_run_pool_use_after_put_is_reported, 1);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(run_pool_suite());
}
