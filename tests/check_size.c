/* SPDX-License-Identifier: MIT */
/*
 * Numbers and sizes as users write them (backends/size.c): parsed
 * strictly, so that no sign, space, trailing text or overflow is taken
 * (a '-5' never wraps around to a huge unsigned value).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "backends/size.h"
#include "tests/testutil.h"

START_TEST(test_size_u64_accepts_plain_digits)
{
	uint64_t v = 1;

	ck_assert_int_eq(dioloop_parse_u64("0", 10, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(dioloop_parse_u64("007", 10, &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(dioloop_parse_u64("18446744073709551615", UINT64_MAX,
					   &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

START_TEST(test_size_u64_rejects_sign_space_garbage_overflow)
{
	static const char *const bad[] = {
		"-5", "-0", "+5", " 5", "5 ", "", "5x", "0x10", "1e3", "5.0",
		"\t5",
	};
	uint64_t v = 42;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(dioloop_parse_u64(bad[i], UINT64_MAX, &v) ==
			      -EINVAL, "expected '%s' rejected with EINVAL",
			      bad[i]);
		ck_assert_uint_eq(v, 42);
	}
	ck_assert_int_eq(dioloop_parse_u64("18446744073709551616", UINT64_MAX,
					   &v), -ERANGE);
	ck_assert_int_eq(dioloop_parse_u64("99999999999999999999999", UINT64_MAX,
					   &v), -ERANGE);
	ck_assert_int_eq(dioloop_parse_u64("11", 10, &v), -ERANGE);
	ck_assert_uint_eq(v, 42);
}
END_TEST

START_TEST(test_size_suffixes_and_rejects)
{
	uint64_t v = 0;

	ck_assert_int_eq(dioloop_parse_size("4K", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(dioloop_parse_size("1GiB", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(1) << 30);
	ck_assert_int_eq(dioloop_parse_size("-5", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("-5K", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size(" 5", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("5KX", UINT64_MAX, &v), -EINVAL);
	/* 2^54 K does not fit: no wrap to a small value. */
	ck_assert_int_eq(dioloop_parse_size("18014398509481984K", UINT64_MAX,
					    &v), -ERANGE);
	ck_assert_int_eq(dioloop_parse_size("18446744073709551616", UINT64_MAX,
					    &v), -ERANGE);
}
END_TEST

START_TEST(test_size_fractions)
{
	uint64_t v = 0;

	ck_assert_int_eq(dioloop_parse_size("1.5G", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(3) << 29);
	ck_assert_int_eq(dioloop_parse_size("0.5KiB", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 512);
	ck_assert_int_eq(dioloop_parse_size(".25m", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(1) << 18);
	/* 0.1 KiB = 102.4 bytes: the nearest byte. */
	ck_assert_int_eq(dioloop_parse_size("0.1K", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 102);
	ck_assert_int_eq(dioloop_parse_size("2P", UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_C(2) << 50);
	ck_assert_int_eq(dioloop_parse_size("15.9999E", UINT64_MAX, &v), 0);
	ck_assert_int_eq(dioloop_parse_size("16E", UINT64_MAX, &v), -ERANGE);
	/* A fraction of a byte, or a point with nothing after it: no. */
	ck_assert_int_eq(dioloop_parse_size("1.5", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("1.5B", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("1.G", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("1.5.5G", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size(".G", UINT64_MAX, &v), -EINVAL);
	ck_assert_int_eq(dioloop_parse_size("1.5G", UINT64_C(1) << 30, &v),
			 -ERANGE);
}
END_TEST

START_TEST(test_size_decimal_strict)
{
	const char *end = NULL;
	double v = -1;

	ck_assert_int_eq(dioloop_parse_decimal("0.25", 1, &v, NULL), 0);
	ck_assert(v == 0.25);
	ck_assert_int_eq(dioloop_parse_decimal(".5", 1, &v, NULL), 0);
	ck_assert(v == 0.5);
	ck_assert_int_eq(dioloop_parse_decimal("10ms", 100, &v, &end), 0);
	ck_assert(v == 10);
	ck_assert_str_eq(end, "ms");
	/* The exponent is not part of the number: "e3" is what follows. */
	ck_assert_int_eq(dioloop_parse_decimal("1e3", 5000, &v, &end), 0);
	ck_assert(v == 1);
	ck_assert_str_eq(end, "e3");
	ck_assert_int_eq(dioloop_parse_decimal("1e3", 5000, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("-0", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("-1", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("+1", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("inf", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("nan", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("0x10", 100, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal(" 1", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("5.", 10, &v, NULL), -EINVAL);
	ck_assert_int_eq(dioloop_parse_decimal("3601", 3600, &v, NULL), -ERANGE);
}
END_TEST

static Suite *size_suite(void)
{
	Suite *s = suite_create("size");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_size_u64_accepts_plain_digits);
	tcase_add_test(tc, test_size_u64_rejects_sign_space_garbage_overflow);
	tcase_add_test(tc, test_size_suffixes_and_rejects);
	tcase_add_test(tc, test_size_fractions);
	tcase_add_test(tc, test_size_decimal_strict);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(size_suite());
}
