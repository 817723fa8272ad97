/* SPDX-License-Identifier: MIT */
#include "tests/testutil.h"

#include "backends/backend.h"
#include "backends/testing/mem.h"

#include <errno.h>
#include <ftw.h>
#include <string.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

uint64_t test_seed(void)
{
	static uint64_t seed;
	static int done;

	if (!done) {
		const char *env = getenv("DIOLOOP_TEST_SEED");

		seed = env ? strtoull(env, NULL, 0) :
			     (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		done = 1;
		fprintf(stderr, "test seed: DIOLOOP_TEST_SEED=%" PRIu64 "\n",
			seed);
	}
	return seed;
}

void test_rng_init(struct test_rng *r, uint64_t salt)
{
	r->s = test_seed() ^ (salt * 0x9e3779b97f4a7c15ULL);
}

uint64_t test_rng_next(struct test_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t test_rng_range(struct test_rng *r, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + test_rng_next(r) % (hi - lo + 1);
}

void test_rng_fill(struct test_rng *r, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		uint64_t v = test_rng_next(r);
		size_t n = len < sizeof(v) ? len : sizeof(v);

		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
}

unsigned test_iterations(unsigned n)
{
	const char *env = getenv("DIOLOOP_TEST_SCALE");
	unsigned long pct = env ? strtoul(env, NULL, 10) : 100;
	unsigned long r = (unsigned long)n * pct / 100;

	return r ? (unsigned)r : 1;
}

char *test_tmpdir(void)
{
	GError *err = NULL;
	char *dir = g_dir_make_tmp("dioloop-test-XXXXXX", &err);

	ck_assert_msg(dir != NULL, "mkdtemp: %s", err ? err->message : "?");
	return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

void test_rmdir_r(const char *dir)
{
	if (dir)
		nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * Every test's temporary directory goes under one per run, removed at the
 * end even when a failed assertion ended a test before its cleanup.
 */
int test_run_suite(Suite *s)
{
	const char *base = getenv("TMPDIR");
	char *tmpl = g_build_filename(base && *base ? base : "/tmp",
				      "dioloop-check-XXXXXX", NULL);
	SRunner *sr;
	int failed;

	test_seed();
	/* The test doubles are the tests' own: the production registry
	 * lists none. */
	if (backend_register_for_tests(&mem_backend_ops) < 0) {
		fprintf(stderr, "cannot register the mem backend\n");
		g_free(tmpl);
		return EXIT_FAILURE;
	}
	if (!mkdtemp(tmpl)) {
		fprintf(stderr, "mkdtemp %s: %s\n", tmpl, g_strerror(errno));
		g_free(tmpl);
		return EXIT_FAILURE;
	}
	setenv("TMPDIR", tmpl, 1);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	test_rmdir_r(tmpl);
	g_free(tmpl);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
