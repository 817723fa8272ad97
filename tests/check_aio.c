/* SPDX-License-Identifier: MIT */
/* The aio context: real O_DIRECT I/O, many in flight, ring overflow,
 * refused requests, completion thread identity. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/aio.h"
#include "tests/testutil.h"

struct test_req {
	struct dioloop_aio_req req;
	struct iovec iov;
	long res;
	int calls;
	bool on_thread;
	struct dioloop_aio *aio;
};

static atomic_int done_count;

static void test_done(struct dioloop_aio_req *r, long res)
{
	struct test_req *t = (struct test_req *)r;

	t->res = res;
	t->calls++;
	t->on_thread = dioloop_aio_on_completion_thread(t->aio);
	atomic_fetch_add(&done_count, 1);
}

static void wait_done(int n)
{
	int i;

	for (i = 0; i < 30000 && atomic_load(&done_count) < n; i++)
		g_usleep(1000);
	ck_assert_msg(atomic_load(&done_count) == n,
		      "expected %d completions, got %d", n,
		      atomic_load(&done_count));
}

/* Writes n blocks through a context of the given depth, reads them back. */
static void write_read_blocks(unsigned depth, int n)
{
	char *dir = test_tmpdir();
	char *path = g_build_filename(dir, "img", NULL);
	struct dioloop_aio *aio;
	struct test_req *reqs = g_new0(struct test_req, n);
	struct dioloop_aio_req **ptrs = g_new(struct dioloop_aio_req *, n);
	char *buf;
	int fd, i;

	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	ck_assert_msg(fd >= 0, "open O_DIRECT: %s", g_strerror(errno));
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, (size_t)n * 4096), 0);
	for (i = 0; i < n; i++)
		memset(buf + i * 4096, 'a' + i % 26, 4096);
	ck_assert_int_eq(dioloop_aio_new(depth, "test-aio", &aio), 0);

	atomic_store(&done_count, 0);
	for (i = 0; i < n; i++) {
		reqs[i].iov = (struct iovec){ buf + i * 4096, 4096 };
		reqs[i].aio = aio;
		dioloop_aio_prep_rw(&reqs[i].req, true, fd, &reqs[i].iov, 1,
				    (off_t)i * 4096, test_done);
		ptrs[i] = &reqs[i].req;
	}
	dioloop_aio_submit(aio, ptrs, n);
	wait_done(n);
	for (i = 0; i < n; i++) {
		ck_assert_msg(reqs[i].res == 4096 && reqs[i].calls == 1,
			      "write %d: res %ld calls %d (expected 4096, 1)",
			      i, reqs[i].res, reqs[i].calls);
		ck_assert_msg(reqs[i].on_thread,
			      "done runs on the completion thread");
	}

	memset(buf, 0, (size_t)n * 4096);
	atomic_store(&done_count, 0);
	for (i = 0; i < n; i++) {
		reqs[i].calls = 0;
		dioloop_aio_prep_rw(&reqs[i].req, false, fd, &reqs[i].iov, 1,
				    (off_t)i * 4096, test_done);
	}
	dioloop_aio_submit(aio, ptrs, n);
	wait_done(n);
	for (i = 0; i < n; i++) {
		char want[4096];

		memset(want, 'a' + i % 26, sizeof(want));
		ck_assert_msg(reqs[i].res == 4096 && reqs[i].calls == 1,
			      "read %d: res %ld calls %d", i, reqs[i].res,
			      reqs[i].calls);
		ck_assert_msg(memcmp(buf + i * 4096, want, 4096) == 0,
			      "block %d reads back what was written", i);
	}
	if (depth < (unsigned)n) {
		struct dioloop_aio_stats st;

		dioloop_aio_get_stats(aio, &st);
		ck_assert_msg(st.deferred > 0,
			      "with depth %u < %d requests, some waited for "
			      "ring space", depth, n);
	}
	dioloop_aio_free(aio);
	close(fd);
	free(buf);
	g_free(reqs);
	g_free(ptrs);
	g_free(path);
	test_rmdir_r(dir);
	g_free(dir);
}

START_TEST(test_aio_many_in_flight)
{
	write_read_blocks(256, 200);
}
END_TEST

START_TEST(test_aio_ring_overflow_is_queued)
{
	write_read_blocks(4, 300);
}
END_TEST

START_TEST(test_aio_refused_request_completes_with_error)
{
	struct dioloop_aio *aio;
	struct test_req r = { 0 };
	struct dioloop_aio_req *p = &r.req;
	char buf[512];

	ck_assert_int_eq(dioloop_aio_new(8, "test-aio", &aio), 0);
	r.aio = aio;
	r.iov = (struct iovec){ buf, sizeof(buf) };
	atomic_store(&done_count, 0);
	dioloop_aio_prep_rw(&r.req, false, -1, &r.iov, 1, 0, test_done);
	dioloop_aio_submit(aio, &p, 1);
	wait_done(1);
	ck_assert_msg(r.res == -EBADF && r.calls == 1,
		      "bad fd: expected -EBADF once, got %ld x%d", r.res,
		      r.calls);
	dioloop_aio_free(aio);
}
END_TEST

static Suite *aio_suite(void)
{
	Suite *s = suite_create("aio");
	TCase *tc = tcase_create("io");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_aio_many_in_flight);
	tcase_add_test(tc, test_aio_ring_overflow_is_queued);
	tcase_add_test(tc, test_aio_refused_request_completes_with_error);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(aio_suite());
}
