/* SPDX-License-Identifier: MIT */
/* Helpers shared by the unit tests. */
#ifndef DIOLOOP_TESTUTIL_H
#define DIOLOOP_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* The run's random seed: $DIOLOOP_TEST_SEED or the time; printed once so a
 * failing run can be repeated. */
uint64_t test_seed(void);
/* A small fast PRNG (splitmix64) seeded per test from test_seed(). */
struct test_rng {
	uint64_t s;
};
void test_rng_init(struct test_rng *r, uint64_t salt);
uint64_t test_rng_next(struct test_rng *r);
/* Uniform in [lo, hi]. */
uint64_t test_rng_range(struct test_rng *r, uint64_t lo, uint64_t hi);
void test_rng_fill(struct test_rng *r, void *buf, size_t len);

/* Scale an iteration count by $DIOLOOP_TEST_SCALE (percent, default 100;
 * valgrind runs use less).  Never below 1. */
unsigned test_iterations(unsigned n);

/* A fresh temporary directory (removed by test_rmdir_r). */
char *test_tmpdir(void);
void test_rmdir_r(const char *dir);

/* Run a suite and return the process exit status. */
int test_run_suite(Suite *s);

#endif
