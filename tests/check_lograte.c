/* SPDX-License-Identifier: MIT */
/*
 * The log rate limit (fusefs/lograte.c): one text at most once per
 * interval, the count of dropped copies on the next one let through, and
 * a bounded table of texts.  Times are given, not read from a clock.
 */
#include <check.h>
#include <glib.h>

#include "fusefs/lograte.h"
#include "tests/testutil.h"

#define INTERVAL_US (10 * G_USEC_PER_SEC)

START_TEST(test_lograte_repeats_dropped_within_the_interval)
{
	struct dioloop_lograte r;
	uint64_t repeats, others;
	int i, admitted = 0;

	dioloop_lograte_init(&r, INTERVAL_US, 16);
	for (i = 0; i < 1000; i++)
		admitted += dioloop_lograte_admit(&r, "bad.img: EUCLEAN",
						  1000 + i, &repeats, &others);
	ck_assert_msg(admitted == 1, "expected 1 of 1000 copies within the "
		      "interval let through, got %d", admitted);
	/* Once the interval is over: let through, with the count. */
	ck_assert(dioloop_lograte_admit(&r, "bad.img: EUCLEAN",
					1000 + INTERVAL_US, &repeats, &others));
	ck_assert_uint_eq(repeats, 999);
	ck_assert_uint_eq(others, 0);
	ck_assert(!dioloop_lograte_admit(&r, "bad.img: EUCLEAN",
					 1001 + INTERVAL_US, &repeats, &others));
	dioloop_lograte_destroy(&r);
}
END_TEST

START_TEST(test_lograte_different_texts_each_logged)
{
	struct dioloop_lograte r;
	uint64_t repeats, others;

	dioloop_lograte_init(&r, INTERVAL_US, 16);
	ck_assert(dioloop_lograte_admit(&r, "a.img: EIO", 1, &repeats, &others));
	ck_assert(dioloop_lograte_admit(&r, "a.img: EUCLEAN", 2, &repeats,
					&others));
	ck_assert(dioloop_lograte_admit(&r, "b.img: EIO", 3, &repeats, &others));
	ck_assert(!dioloop_lograte_admit(&r, "a.img: EIO", 4, &repeats,
					 &others));
	dioloop_lograte_destroy(&r);
}
END_TEST

START_TEST(test_lograte_table_bounded)
{
	struct dioloop_lograte r;
	uint64_t repeats, others;
	char text[32];
	int i, admitted = 0;

	dioloop_lograte_init(&r, INTERVAL_US, 8);
	for (i = 0; i < 100; i++) {
		g_snprintf(text, sizeof(text), "img%d: EIO", i);
		admitted += dioloop_lograte_admit(&r, text, 10 + i, &repeats,
						  &others);
	}
	ck_assert_int_eq(admitted, 8);
	ck_assert_uint_le(g_hash_table_size(r.seen), 8);
	/* Past the interval the old texts are forgotten: room again, and
	 * the first one let through says how many were dropped. */
	ck_assert(dioloop_lograte_admit(&r, "new: EIO", 10 + INTERVAL_US + 100,
					&repeats, &others));
	ck_assert_uint_eq(others, 92);
	ck_assert_uint_le(g_hash_table_size(r.seen), 8);
	dioloop_lograte_destroy(&r);
}
END_TEST

static Suite *lograte_suite(void)
{
	Suite *s = suite_create("lograte");
	TCase *tc = tcase_create("lograte");

	tcase_add_test(tc, test_lograte_repeats_dropped_within_the_interval);
	tcase_add_test(tc, test_lograte_different_texts_each_logged);
	tcase_add_test(tc, test_lograte_table_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(lograte_suite());
}
