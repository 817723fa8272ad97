/* SPDX-License-Identifier: MIT */
/*
 * Crash consistency of the cow backend: a forked child writes and flushes
 * in rounds and is SIGKILLed, either at a named point of the I/O path or
 * the commit (cow_test_hook: after a data write, after the seal, between
 * the metadata pages and their sync, between that sync and the superblock,
 * between the superblock and its sync, after the commit), or at a random
 * moment.  The parent then checks the image offline (check.h), reopens it
 * and compares every byte with a model replayed from the same seed: the
 * last committed generation is intact and every write flushed before the
 * kill reads back.  The recovered image must also keep working.
 */
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#include "backends/cow/check.h"
#include "tests/cow_test.h"

#define IMG_SIZE (4 * MiB)
#define MAX_OP (160 * KiB)

/* Progress the child reports to the parent (shared memory). */
struct progress {
	atomic_int round;		/* round being worked on */
	atomic_int flushed;		/* last round whose flush returned */
};

/* ---- the rounds: the same ops for the child and the model ---- */

/*
 * Apply round r's ops to b (when not NULL) and to model: 1-5 writes or
 * discards, the first always a write.  0, or the first failing op's
 * result (children only).
 */
static int round_ops(struct backend *b, unsigned char *model,
		     unsigned int salt, int r)
{
	unsigned char *buf = g_malloc(MAX_OP);
	struct test_rng rng;
	int n, i, ret = 0;

	test_rng_init(&rng, (uint64_t)salt * 100003u + (uint64_t)r);
	n = (int)test_rng_range(&rng, 1, 5);
	for (i = 0; i < n && !ret; i++) {
		size_t len = (size_t)test_rng_range(&rng, 1, MAX_OP);
		uint64_t pos;
		bool discard = i > 0 && test_rng_range(&rng, 0, 4) == 0;

		if (test_rng_next(&rng) % 2)
			len = (len + 4095) & ~(size_t)4095;
		len = MIN(len, MAX_OP);
		pos = test_rng_range(&rng, 0, IMG_SIZE - len);
		if (test_rng_next(&rng) % 2)
			pos &= ~(uint64_t)4095;
		if (discard) {
			if (b)
				ret = backend_discard(b, pos, len);
			memset(model + pos, 0, len);
		} else {
			test_rng_fill(&rng, buf, len);
			if (b && backend_pwrite(b, buf, len, pos) != (ssize_t)len)
				ret = -EIO;
			memcpy(model + pos, buf, len);
		}
	}
	g_free(buf);
	return ret;
}

/* The model after rounds [0, upto] (upto < 0: nothing). */
static unsigned char *model_after(unsigned int salt, int upto)
{
	unsigned char *m = g_malloc0(IMG_SIZE);
	int r;

	for (r = 0; r <= upto; r++)
		round_ops(NULL, m, salt, r);
	return m;
}

/* Whether the image's content equals m. */
static bool image_equals(struct backend *b, const unsigned char *m)
{
	unsigned char *back = g_malloc(MiB);
	bool same = true;
	uint64_t pos;

	for (pos = 0; pos < IMG_SIZE && same; pos += MiB) {
		ck_assert_msg(backend_pread(b, back, MiB, pos) == (ssize_t)MiB,
			      "read 1 MiB at %llu of the recovered image",
			      (unsigned long long)pos);
		same = memcmp(back, m + pos, MiB) == 0;
	}
	g_free(back);
	return same;
}

static void report_line(void *opaque, const char *msg)
{
	fprintf(stderr, "cow_check: %s\n", msg);
}

static void check_clean(const char *path, const char *when)
{
	struct cow_check_result r;

	ck_assert_msg(cow_check(path, COW_CHECK_DATA, &r, report_line, NULL) == 0,
		      "%s: the checker ran", when);
	ck_assert_msg(r.errors == 0,
		      "%s: the image is consistent (%llu problems, %llu leaked)",
		      when, (unsigned long long)r.errors,
		      (unsigned long long)r.leaked);
}

/* The recovered image keeps working: more rounds, flush, reopen. */
static void keeps_working(const char *path, unsigned int salt)
{
	struct backend *b = cow_test_open(path, 0);
	unsigned char *m = g_malloc0(IMG_SIZE);
	int r;

	ck_assert_msg(backend_pread(b, m, IMG_SIZE, 0) == (ssize_t)IMG_SIZE,
		      "read the recovered image");
	for (r = 0; r < 3; r++)
		ck_assert_msg(round_ops(b, m, salt + 7777, r) == 0,
			      "ops on the recovered image");
	ck_assert_msg(backend_flush(b) == 0, "flush the recovered image");
	backend_close(b);
	check_clean(path, "after more writes on the recovered image");
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	ck_assert_msg(image_equals(b, m),
		      "the writes after recovery read back");
	backend_close(b);
	g_free(m);
}

/* ---- children ---- */

struct child_args {
	const char *path;
	unsigned int salt;
	int rounds;
	int point;			/* hook point, -1: none */
	int nth;			/* kill at its nth occurrence */
	struct progress *progress;
};

static int crash_point = -1, crash_nth, crash_fd = -1;
static atomic_int crash_hits;

static void crash_hook(enum cow_test_point point)
{
	if ((int)point == crash_point &&
	    atomic_fetch_add(&crash_hits, 1) + 1 == crash_nth)
		cow_test_die(crash_fd);
}

/* Child: rounds of ops, each followed by a flush. */
static void writer_child(void *opaque, int kill_fd)
{
	struct child_args *a = opaque;
	unsigned char *scratch = g_malloc0(IMG_SIZE);
	struct backend *b;
	int r;

	crash_fd = kill_fd;
	crash_point = a->point;
	crash_nth = a->nth;
	atomic_store(&crash_hits, 0);
	cow_test_hook = crash_hook;
	COW_CHILD_CHECK(cow_test_try_open(a->path, 0, &b) == 0,
			"open %s", a->path);
	cow_set_commit_interval(b, 0);
	for (r = 0; r < a->rounds; r++) {
		atomic_store(&a->progress->round, r);
		COW_CHILD_CHECK(round_ops(b, scratch, a->salt, r) == 0,
				"round %d ops", r);
		COW_CHILD_CHECK(backend_flush(b) == 0, "round %d flush", r);
		atomic_store(&a->progress->flushed, r);
	}
	_exit(0);
}

static struct progress *progress_new(void)
{
	struct progress *p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_msg(p != MAP_FAILED, "mmap shared progress");
	atomic_store(&p->round, -1);
	atomic_store(&p->flushed, -1);
	return p;
}

/* ---- killed at a named point ---- */

static const char *point_name(int p)
{
	static const char *const names[] = {
		"after a data write", "after the seal",
		"after the metadata write", "after the metadata sync",
		"after the superblock write", "after the commit",
	};

	return p >= 0 && p < COW_TEST_NR_POINTS ? names[p] : "?";
}

/* One child killed at the nth occurrence of point; verify recovery. */
static void crash_at(int point, int nth, unsigned int salt)
{
	char *path = cow_test_image(IMG_SIZE, 0);
	struct progress *pr = progress_new();
	struct child_args a = { path, salt, 6, point, nth, pr };
	unsigned char *want;
	struct backend *b;
	int status, expect;

	status = cow_test_run_child(writer_child, &a);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "the child was killed %s #%d (status 0x%x)",
		      point_name(point), nth, status);
	/* The superblock reached the file from SB_WRITTEN on (a killed
	 * process loses nothing it wrote with O_DIRECT). */
	expect = atomic_load(&pr->flushed);
	if (point == COW_TEST_SB_WRITTEN || point == COW_TEST_COMMITTED)
		expect = atomic_load(&pr->round);
	check_clean(path, point_name(point));
	want = model_after(salt, expect);
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	ck_assert_msg(image_equals(b, want),
		      "killed %s #%d: the image holds exactly rounds 0..%d (flushed %d, working on %d)",
		      point_name(point), nth, expect,
		      atomic_load(&pr->flushed), atomic_load(&pr->round));
	ck_assert_msg(cow_test_stats(b).csum_errors == 0,
		      "no checksum errors after recovery");
	backend_close(b);
	keeps_working(path, salt);
	munmap(pr, sizeof(*pr));
	g_free(want);
	g_free(path);
}

/* Every point, at several occurrences. */
static void crash_point_test(int point, unsigned int salt)
{
	struct test_rng rng;
	unsigned int k, n = test_iterations(4);

	test_rng_init(&rng, salt);
	for (k = 0; k < n; k++)
		crash_at(point, (int)test_rng_range(&rng, 1, 6),
			 salt * 100 + k);
}

START_TEST(test_cow_crash_after_data_write_keeps_last_commit)
{
	crash_point_test(COW_TEST_DATA_WRITTEN, 1);
}
END_TEST

START_TEST(test_cow_crash_after_seal_keeps_last_commit)
{
	crash_point_test(COW_TEST_SEALED, 2);
}
END_TEST

START_TEST(test_cow_crash_between_metadata_write_and_sync)
{
	crash_point_test(COW_TEST_META_WRITTEN, 3);
}
END_TEST

START_TEST(test_cow_crash_between_metadata_and_superblock)
{
	crash_point_test(COW_TEST_META_DURABLE, 4);
}
END_TEST

START_TEST(test_cow_crash_between_superblock_write_and_sync)
{
	crash_point_test(COW_TEST_SB_WRITTEN, 5);
}
END_TEST

START_TEST(test_cow_crash_after_commit_keeps_it)
{
	crash_point_test(COW_TEST_COMMITTED, 6);
}
END_TEST

/* ---- killed at a random moment ---- */

/* Run the writer for a random time, then SIGKILL it from here. */
static void crash_random(unsigned int salt, unsigned int max_ms)
{
	char *path = cow_test_image(IMG_SIZE, 0);
	struct progress *pr = progress_new();
	struct child_args a = { path, salt, 100000, -1, 0, pr };
	unsigned char *want;
	struct test_rng rng;
	struct backend *b;
	int status, flushed, round;
	pid_t pid;

	test_rng_init(&rng, salt);
	pid = fork();
	ck_assert_msg(pid >= 0, "fork");
	if (pid == 0)
		writer_child(&a, -1);
	/* Let it get going, then a random moment. */
	while (atomic_load(&pr->flushed) < 0)
		usleep(1000);
	usleep((useconds_t)test_rng_range(&rng, 0, max_ms * 1000));
	kill(pid, SIGKILL);
	ck_assert_msg(waitpid(pid, &status, 0) == pid, "waitpid");
	ck_assert_msg(WIFSIGNALED(status), "the child was killed (0x%x)",
		      status);
	flushed = atomic_load(&pr->flushed);
	round = atomic_load(&pr->round);
	check_clean(path, "after a kill at a random moment");
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	want = model_after(salt, flushed);
	if (!image_equals(b, want)) {
		/* Killed after its flush committed, before it said so. */
		g_free(want);
		want = model_after(salt, flushed + 1);
		ck_assert_msg(round == flushed + 1 && image_equals(b, want),
			      "the image holds rounds 0..%d or 0..%d (working on %d)",
			      flushed, flushed + 1, round);
	}
	backend_close(b);
	keeps_working(path, salt);
	munmap(pr, sizeof(*pr));
	g_free(want);
	g_free(path);
}

START_TEST(test_cow_crash_at_random_moments_keeps_every_flushed_write)
{
	unsigned int k;

	for (k = 0; k < test_iterations(12); k++)
		crash_random(1000 + k, 120);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_crash");
	TCase *points = tcase_create("points");
	TCase *random = tcase_create("random");

	tcase_set_timeout(points, 900);
	tcase_add_test(points, test_cow_crash_after_data_write_keeps_last_commit);
	tcase_add_test(points, test_cow_crash_after_seal_keeps_last_commit);
	tcase_add_test(points, test_cow_crash_between_metadata_write_and_sync);
	tcase_add_test(points, test_cow_crash_between_metadata_and_superblock);
	tcase_add_test(points, test_cow_crash_between_superblock_write_and_sync);
	tcase_add_test(points, test_cow_crash_after_commit_keeps_it);
	suite_add_tcase(s, points);

	tcase_set_timeout(random, 900);
	tcase_add_test(random, test_cow_crash_at_random_moments_keeps_every_flushed_write);
	suite_add_tcase(s, random);

	return test_run_suite(s);
}
