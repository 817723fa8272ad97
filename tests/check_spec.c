/* SPDX-License-Identifier: MIT */
/*
 * Limits and fault rules as users write them (fusefs/spec.c): what is
 * accepted, what each setting becomes, the one-line errors for what is
 * not, and that formatting gives back text the parser takes unchanged.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fusefs/spec.h"
#include "tests/testutil.h"

/* Parse a space-separated fault rule: 0 or -EINVAL (*err kept). */
static int parse_rule(const char *text, struct fault_rule *r, char **err)
{
	g_auto(GStrv) words = g_strsplit(text, " ", -1);

	return dioloop_fault_parse(words, (int)g_strv_length(words), r, err);
}

START_TEST(test_spec_limits_parse_values)
{
	struct dioloop_limit_update u = { 0 };
	struct dioloop_limits l;
	char *err = NULL;
	g_autofree char *text = NULL;

	ck_assert_int_eq(dioloop_limit_parse("iops=500", &u, &err), 0);
	ck_assert_int_eq(dioloop_limit_parse("bps=10M", &u, &err), 0);
	ck_assert_int_eq(dioloop_limit_parse("read_bps=off", &u, &err), 0);
	ck_assert_int_eq(dioloop_limit_parse("write_iops=0", &u, &err), 0);
	ck_assert_int_eq(dioloop_limit_parse("burst_ms=250", &u, &err), 0);
	ck_assert_int_eq(dioloop_limit_parse("total_bps=1G", &u, &err), 0);
	ck_assert_msg(u.value[DIOLOOP_RATE_IOPS] == 500 &&
		      u.value[DIOLOOP_RATE_BPS] == 10u << 20 &&
		      u.value[DIOLOOP_RATE_READ_BPS] == 0 &&
		      u.value[DIOLOOP_LIMIT_BURST_MS] == 250 &&
		      u.value[DIOLOOP_LIMIT_TOTAL_BPS] == 1u << 30,
		      "values: iops 500, bps 10 MiB, read_bps 0, burst 250, "
		      "total 1 GiB");
	ck_assert_msg(u.mask == ((1u << DIOLOOP_RATE_IOPS) |
				 (1u << DIOLOOP_RATE_BPS) |
				 (1u << DIOLOOP_RATE_READ_BPS) |
				 (1u << DIOLOOP_RATE_WRITE_IOPS) |
				 (1u << DIOLOOP_LIMIT_BURST_MS) |
				 (1u << DIOLOOP_LIMIT_TOTAL_BPS)),
		      "mask names exactly the keys given: 0x%x", u.mask);

	dioloop_limits_init(&l);
	l.rate[DIOLOOP_RATE_WRITE_BPS] = 7;	/* not named: kept */
	dioloop_limits_update(&l, &u);
	text = dioloop_limits_format(&l);
	ck_assert_str_eq(text, "iops=500 read_iops=0 write_iops=0 "
			       "bps=10485760 read_bps=0 write_bps=7 "
			       "burst_ms=250");
}
END_TEST

START_TEST(test_spec_limits_reject_with_a_message)
{
	static const struct {
		const char *word, *needle;
	} bad[] = {
		{ "iops", "expected KEY=VALUE" },
		{ "speed=5", "unknown limit 'speed'" },
		{ "iops=fast", "bad value 'fast' for iops" },
		{ "iops=10K", "bad value '10K' for iops" },
		{ "bps=-1", "bad value '-1' for bps" },
		{ "burst_ms=0", "milliseconds from 1 to 60000" },
		{ "burst_ms=60001", "milliseconds from 1 to 60000" },
		{ "iops=", "bad value '' for iops" },
		{ "iops=-5", "bad value '-5' for iops" },
		{ "iops=+5", "bad value '+5' for iops" },
		{ "iops= 5", "bad value ' 5' for iops" },
		{ "burst_ms=-0", "milliseconds from 1 to 60000" },
		{ "iops=18446744073709551617", "bad value" },
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct dioloop_limit_update u = { 0 };
		g_autofree char *err = NULL;
		int ret = dioloop_limit_parse(bad[i].word, &u, &err);

		ck_assert_msg(ret == -EINVAL && err &&
			      strstr(err, bad[i].needle) && !strchr(err, '\n'),
			      "'%s': expected -EINVAL and a one-line message "
			      "with '%s', got %d '%s'", bad[i].word,
			      bad[i].needle, ret, err ? err : "(none)");
		ck_assert_msg(u.mask == 0, "'%s' changes nothing", bad[i].word);
	}
}
END_TEST

START_TEST(test_spec_fault_rules_parse)
{
	struct fault_rule r;
	char *err = NULL;

	ck_assert_int_eq(parse_rule("write error=EIO rate=50%", &r, &err), 0);
	ck_assert_msg(r.ops == FAULT_OP_WRITE && r.error == EIO &&
		      r.fraction == 0.5 && !r.nth && !r.latency_us,
		      "write error=EIO rate=50%%");

	ck_assert_int_eq(parse_rule("read+write nth=3 error=enospc", &r, &err),
			 0);
	ck_assert_msg(r.ops == (FAULT_OP_READ | FAULT_OP_WRITE) &&
		      r.error == ENOSPC && r.nth == 3,
		      "read+write nth=3 error=ENOSPC");

	ck_assert_int_eq(parse_rule("all delay=20ms", &r, &err), 0);
	ck_assert_msg(r.latency_us == 20000 && r.error == 0 &&
		      (r.ops & FAULT_OP_FLUSH),
		      "delay alone adds latency and fails nothing");

	/* A delay of zero is still a delay (a script's computed delay),
	 * not the default error. */
	ck_assert_int_eq(parse_rule("all delay=0", &r, &err), 0);
	ck_assert_msg(r.latency_us == 0 && r.error == 0,
		      "delay=0 fails nothing (error %d)", r.error);

	ck_assert_int_eq(parse_rule("offset=1M length=64K", &r, &err), 0);
	ck_assert_msg(r.ops == (FAULT_OP_READ | FAULT_OP_WRITE) &&
		      r.error == EIO && r.range_start == 1u << 20 &&
		      r.range_len == 64u << 10,
		      "default ops read+write, default error EIO, the range");

	ck_assert_int_eq(parse_rule("op=flush every=2 delay=500us seed=9", &r,
				    &err), 0);
	ck_assert_msg(r.ops == FAULT_OP_FLUSH && r.every == 2 &&
		      r.latency_us == 500 && r.seed == 9 && r.error == 0,
		      "op=flush every=2 delay=500us seed=9");
	ck_assert_int_eq(parse_rule("zero delay=1s error=EIO", &r, &err), 0);
	ck_assert_msg(r.ops == FAULT_OP_WRITE_ZEROES &&
		      r.latency_us == 1000000 && r.error == EIO,
		      "zero delay=1s error=EIO");
}
END_TEST

START_TEST(test_spec_fault_rules_reject_with_a_message)
{
	static const struct {
		const char *text, *needle;
	} bad[] = {
		{ "write error=EPERM", "expected EIO or ENOSPC" },
		{ "write rate=2", "bad rate '2'" },
		{ "write rate=0", "bad rate '0'" },
		{ "write nth=0", "bad nth '0'" },
		{ "write delay=5min", "bad delay '5min'" },
		{ "write delay=61s", "bad delay '61s'" },
		{ "write offset=1M", "offset= needs length=" },
		{ "write length=0", "bad length '0'" },
		{ "scribble", "unknown fault word 'scribble'" },
		{ "read write", "ops given twice" },
		{ "write color=red", "unknown fault setting 'color'" },
		{ "op=read+bogus", "bad op 'read+bogus'" },
		{ "write delay=1e3", "bad delay '1e3'" },
		{ "write delay=-1ms", "bad delay '-1ms'" },
		{ "write delay=0x10", "bad delay '0x10'" },
		{ "write rate=1e-1", "bad rate '1e-1'" },
		{ "write rate=-0.5", "bad rate '-0.5'" },
		{ "write nth=-1", "bad nth '-1'" },
		{ "write seed=+3", "bad seed '+3'" },
		{ "write every=18446744073709551616", "bad every" },
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct fault_rule r;
		g_autofree char *err = NULL;
		int ret = parse_rule(bad[i].text, &r, &err);

		ck_assert_msg(ret == -EINVAL && err &&
			      strstr(err, bad[i].needle) && !strchr(err, '\n'),
			      "'%s': expected -EINVAL and a one-line message "
			      "with '%s', got %d '%s'", bad[i].text,
			      bad[i].needle, ret, err ? err : "(none)");
	}
}
END_TEST

START_TEST(test_spec_fault_format_round_trips)
{
	static const char *const rules[] = {
		"write error=EIO rate=0.25",
		"read+flush error=ENOSPC nth=7 every=3",
		"all delay=1500us",
		"all delay=0us",
		"read delay=300ms",
		"flush delay=2s",
		"write error=EIO offset=4096 length=8192 seed=42",
		"discard+zero error=EIO",
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(rules); i++) {
		struct fault_rule r, again;
		g_autofree char *err = NULL, *text = NULL;

		ck_assert_int_eq(parse_rule(rules[i], &r, &err), 0);
		text = dioloop_fault_format(&r);
		ck_assert_msg(!strcmp(text, rules[i]),
			      "format of '%s' gave '%s'", rules[i], text);
		ck_assert_int_eq(parse_rule(text, &again, &err), 0);
		ck_assert_msg(!memcmp(&r, &again, sizeof(r)),
			      "'%s' parses back to the same rule", text);
	}
}
END_TEST

START_TEST(test_spec_errno_names)
{
	char buf[16];

	ck_assert_str_eq(dioloop_errno_name(EIO, buf, sizeof(buf)), "EIO");
	ck_assert_str_eq(dioloop_errno_name(ENOSPC, buf, sizeof(buf)),
			 "ENOSPC");
	ck_assert_str_eq(dioloop_errno_name(4000, buf, sizeof(buf)), "E4000");
}
END_TEST

static Suite *spec_suite(void)
{
	Suite *s = suite_create("spec");
	TCase *tc;

	tc = tcase_create("limits");
	tcase_add_test(tc, test_spec_limits_parse_values);
	tcase_add_test(tc, test_spec_limits_reject_with_a_message);
	suite_add_tcase(s, tc);

	tc = tcase_create("faults");
	tcase_add_test(tc, test_spec_fault_rules_parse);
	tcase_add_test(tc, test_spec_fault_rules_reject_with_a_message);
	tcase_add_test(tc, test_spec_fault_format_round_trips);
	tcase_add_test(tc, test_spec_errno_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(spec_suite());
}
