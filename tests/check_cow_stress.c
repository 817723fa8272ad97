/* SPDX-License-Identifier: MIT */
/*
 * The cow backend under concurrency: worker threads doing random writes,
 * reads, discards and write-zeroes on their own regions (each checked
 * against its own model), racing a thread that flushes and the periodic
 * committer at a short interval, plus readers of a shared region being
 * overwritten (the read epochs: a read returns old or new data, never
 * garbage or a checksum error).  Then close, the offline checker, reopen
 * and a full comparison.
 */
#include <stdatomic.h>

#include "backends/cow/check.h"
#include "tests/cow_test.h"

#define REGION (2 * MiB)
#define NR_WORKERS 4
#define SHARED_BLOCKS 64
/* The commits that must run while the workers work (since open). */
#define MIN_COMMITS 3
/* A worker goes on past its steps until MIN_COMMITS ran, for at most
 * this many times its steps: without commits the test fails, it does
 * not hang. */
#define MAX_STEPS_FACTOR 20u

struct stress {
	struct backend *b;
	unsigned char *model;		/* NR_WORKERS regions */
	atomic_bool stop;
	atomic_int failures;
	unsigned int steps;
};

struct worker {
	struct stress *s;
	int id;
	char why[200];
};

static void stress_fail(struct worker *w, const char *msg)
{
	if (!w->why[0])
		g_strlcpy(w->why, msg, sizeof(w->why));
	atomic_fetch_add(&w->s->failures, 1);
}

/* Has the worker done enough after k steps: its steps, and as many more
 * as the commits need (bounded), however fast or slow the machine. */
static bool worker_done(struct stress *s, unsigned int k)
{
	if (k < s->steps)
		return false;
	if (k >= s->steps * MAX_STEPS_FACTOR)
		return true;
	return cow_test_stats(s->b).commits >= MIN_COMMITS;
}

/* Random ops inside the worker's region, checked against its model. */
static gpointer worker_main(gpointer opaque)
{
	struct worker *w = opaque;
	struct stress *s = w->s;
	uint64_t base = (uint64_t)w->id * REGION;
	unsigned char *model = s->model + base;
	unsigned char *buf = g_malloc(128 * KiB), *back = g_malloc(128 * KiB);
	struct test_rng rng;
	unsigned int k;
	char msg[200];

	test_rng_init(&rng, 100 + (uint64_t)w->id);
	for (k = 0; !worker_done(s, k) && !w->why[0]; k++) {
		size_t len = (size_t)test_rng_range(&rng, 1, 128 * KiB);
		uint64_t off = test_rng_range(&rng, 0, REGION - len);
		uint64_t op = test_rng_range(&rng, 0, 9);
		ssize_t n;

		if (test_rng_next(&rng) % 2) {
			len = (len + 4095) & ~(size_t)4095;
			len = MIN(len, 128 * KiB);
			off &= ~(uint64_t)4095;
			off = MIN(off, REGION - len);
		}
		if (op < 5) {
			test_rng_fill(&rng, buf, len);
			n = backend_pwrite(s->b, buf, len, base + off);
			if (n != (ssize_t)len)
				stress_fail(w, "a write failed");
			memcpy(model + off, buf, len);
		} else if (op < 8) {
			n = backend_pread(s->b, back, len, base + off);
			if (n != (ssize_t)len || memcmp(back, model + off, len)) {
				snprintf(msg, sizeof(msg),
					 "worker %d step %u: read of %zu at %llu: %zd, %s",
					 w->id, k, len,
					 (unsigned long long)(base + off), n,
					 n == (ssize_t)len ? "wrong data" : "failed");
				stress_fail(w, msg);
			}
		} else {
			n = op == 8 ? backend_discard(s->b, base + off, len) :
				      backend_write_zeroes(s->b, base + off, len);
			if (n)
				stress_fail(w, "discard or write_zeroes failed");
			memset(model + off, 0, len);
		}
	}
	g_free(buf);
	g_free(back);
	return NULL;
}

/* Flush now and then until told to stop. */
static gpointer flusher_main(gpointer opaque)
{
	struct stress *s = opaque;

	while (!atomic_load(&s->stop)) {
		if (backend_flush(s->b) != 0)
			atomic_fetch_add(&s->failures, 1);
		usleep(3000);
	}
	return NULL;
}

/*
 * The shared region: block i always holds 4096 bytes of one value v
 * (a writer rewrites whole blocks); a reader must see some v, never a
 * mix, garbage or an error, however commits and reuse race it.
 */
static gpointer overwriter_main(gpointer opaque)
{
	struct stress *s = opaque;
	uint64_t base = (uint64_t)NR_WORKERS * REGION;
	unsigned char *buf = g_malloc(4096);
	struct test_rng rng;
	unsigned int v = 1;

	test_rng_init(&rng, 7);
	while (!atomic_load(&s->stop)) {
		uint64_t i = test_rng_range(&rng, 0, SHARED_BLOCKS - 1);

		memset(buf, (int)(v++ % 250) + 1, 4096);
		if (backend_pwrite(s->b, buf, 4096, base + i * 4096) != 4096)
			atomic_fetch_add(&s->failures, 1);
	}
	g_free(buf);
	return NULL;
}

static gpointer shared_reader_main(gpointer opaque)
{
	struct worker *w = opaque;
	struct stress *s = w->s;
	uint64_t base = (uint64_t)NR_WORKERS * REGION;
	unsigned char *back = g_malloc(SHARED_BLOCKS * 4096);
	unsigned int i, j;

	while (!atomic_load(&s->stop) && !w->why[0]) {
		ssize_t n = backend_pread(s->b, back, SHARED_BLOCKS * 4096,
					  base);

		if (n != (ssize_t)(SHARED_BLOCKS * 4096)) {
			stress_fail(w, "a read of the shared region failed");
			break;
		}
		for (i = 0; i < SHARED_BLOCKS; i++)
			for (j = 1; j < 4096; j++)
				if (back[i * 4096 + j] != back[i * 4096]) {
					stress_fail(w, "a shared block read torn or stale-reused data");
					i = SHARED_BLOCKS;
					break;
				}
	}
	g_free(back);
	return NULL;
}

static void report_line(void *opaque, const char *msg)
{
	fprintf(stderr, "cow_check: %s\n", msg);
}

START_TEST(test_cow_concurrent_ops_flushes_and_commits_stay_consistent)
{
	uint64_t size = (uint64_t)NR_WORKERS * REGION + SHARED_BLOCKS * 4096;
	char *path = cow_test_image(size, 0);
	struct stress s = { .steps = test_iterations(3000) };
	struct worker w[NR_WORKERS + 1];
	GThread *t[NR_WORKERS], *flusher, *over, *reader;
	struct cow_check_result r;
	unsigned char *back;
	int i;

	s.b = cow_test_open(path, 0);
	cow_set_commit_interval(s.b, 10);
	s.model = g_malloc0(NR_WORKERS * REGION);
	memset(w, 0, sizeof(w));
	for (i = 0; i <= NR_WORKERS; i++) {
		w[i].s = &s;
		w[i].id = i;
	}
	flusher = g_thread_new("flusher", flusher_main, &s);
	over = g_thread_new("overwriter", overwriter_main, &s);
	reader = g_thread_new("reader", shared_reader_main, &w[NR_WORKERS]);
	for (i = 0; i < NR_WORKERS; i++)
		t[i] = g_thread_new("worker", worker_main, &w[i]);
	for (i = 0; i < NR_WORKERS; i++)
		g_thread_join(t[i]);
	atomic_store(&s.stop, true);
	g_thread_join(flusher);
	g_thread_join(over);
	g_thread_join(reader);
	for (i = 0; i <= NR_WORKERS; i++)
		ck_assert_msg(!w[i].why[0], "thread %d: %s", i, w[i].why);
	ck_assert_msg(atomic_load(&s.failures) == 0,
		      "no operation failed (%d did)", atomic_load(&s.failures));
	ck_assert_msg(cow_test_stats(s.b).csum_errors == 0 &&
		      cow_test_stats(s.b).meta_errors == 0,
		      "no checksum or metadata errors under concurrency");
	ck_assert_msg(cow_test_stats(s.b).commits >= MIN_COMMITS,
		      "%d commits ran while the workers did (%llu in %u "
		      "steps each at most)", MIN_COMMITS,
		      (unsigned long long)cow_test_stats(s.b).commits,
		      s.steps * MAX_STEPS_FACTOR);
	backend_close(s.b);

	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, report_line, NULL) ==
		      0 && r.errors == 0,
		      "the closed image is consistent (%llu problems)",
		      (unsigned long long)r.errors);
	s.b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	back = g_malloc(NR_WORKERS * REGION);
	ck_assert_msg(backend_pread(s.b, back, NR_WORKERS * REGION, 0) ==
		      (ssize_t)(NR_WORKERS * REGION) &&
		      memcmp(back, s.model, NR_WORKERS * REGION) == 0,
		      "after reopen every region matches its worker's model");
	backend_close(s.b);
	g_free(back);
	g_free(s.model);
	g_free(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_stress");
	TCase *tc = tcase_create("stress");

	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_cow_concurrent_ops_flushes_and_commits_stay_consistent);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
