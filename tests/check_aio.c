/* SPDX-License-Identifier: MIT */
/* The aio context: real O_DIRECT I/O, many in flight, ring overflow,
 * refused requests, completion thread identity. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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

/* A file opened O_DIRECT, n pages filled with fill, a shared context and
 * a reaped one of the given depth bound to this thread, on an eventfd. */
struct reaped_rig {
	char *dir, *path, *buf;
	int fd, efd;
	struct dioloop_aio *shared, *mine;
};

static void reaped_rig_open(struct reaped_rig *g, int n, char fill,
			    unsigned int depth)
{
	g->dir = test_tmpdir();
	g->path = g_build_filename(g->dir, "img", NULL);
	g->fd = open(g->path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	ck_assert_msg(g->fd >= 0, "open O_DIRECT: %s", g_strerror(errno));
	ck_assert_int_eq(posix_memalign((void **)&g->buf, 4096,
					(size_t)n * 4096), 0);
	memset(g->buf, fill, (size_t)n * 4096);
	g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(g->efd, 0);
	ck_assert_int_eq(dioloop_aio_new(8, "test-aio", &g->shared), 0);
	ck_assert_int_eq(dioloop_aio_new_reaped(depth, g->efd, &g->mine), 0);
	ck_assert(!dioloop_aio_thread_bound());
	dioloop_aio_bind_thread(g->mine);
	ck_assert(dioloop_aio_thread_bound());
	atomic_store(&done_count, 0);
}

static void reaped_rig_close(struct reaped_rig *g)
{
	dioloop_aio_free(g->mine);
	ck_assert_msg(!dioloop_aio_thread_bound(), "free unbinds");
	dioloop_aio_free(g->shared);
	close(g->efd);
	close(g->fd);
	free(g->buf);
	g_free(g->path);
	test_rmdir_r(g->dir);
	g_free(g->dir);
}

/*
 * A reaped context bound to this thread: requests submitted "here" through
 * the shared context run their done on this thread, only when it reaps,
 * and still count in the shared context's in_flight (so freeing that one
 * waits for them).  Depth 4 for 64 requests: the rest wait in the
 * context's queue and go in as reaping frees room.  A refused request
 * completes through the reap too.
 */
START_TEST(test_aio_reaped_context_runs_done_on_its_thread)
{
	enum { N = 64 };
	struct reaped_rig g;
	struct test_req reqs[N + 1];
	struct dioloop_aio_req *ptrs[N + 1];
	struct dioloop_aio_stats st;
	uint64_t v;
	int i, reaped = 0, rounds;

	memset(reqs, 0, sizeof(reqs));
	ck_assert_int_eq(dioloop_aio_reap_bound(0), -1);
	reaped_rig_open(&g, N, 'r', 4);
	for (i = 0; i < N; i++) {
		reqs[i].iov = (struct iovec){ g.buf + i * 4096, 4096 };
		reqs[i].aio = g.mine;
		dioloop_aio_prep_rw(&reqs[i].req, true, g.fd, &reqs[i].iov, 1,
				    (off_t)i * 4096, test_done);
		ptrs[i] = &reqs[i].req;
	}
	reqs[N].aio = g.mine;
	reqs[N].iov = (struct iovec){ g.buf, 512 };
	dioloop_aio_prep_rw(&reqs[N].req, false, -1, &reqs[N].iov, 1, 0,
			    test_done);
	ptrs[N] = &reqs[N].req;
	dioloop_aio_submit_here(g.shared, ptrs, N + 1);
	dioloop_aio_get_stats(g.shared, &st);
	ck_assert_msg(st.in_flight == N + 1,
		      "the shared context counts what it carries for us: %"
		      PRIu64, st.in_flight);
	g_usleep(50 * 1000);
	ck_assert_msg(atomic_load(&done_count) == 0,
		      "no done runs before this thread reaps (%d ran)",
		      atomic_load(&done_count));
	ck_assert_msg(read(g.efd, &v, sizeof(v)) == sizeof(v) && v > 0,
		      "the kernel signals the caller's eventfd");
	for (rounds = 0; rounds < 10000 && reaped < N + 1; rounds++)
		reaped += dioloop_aio_reap(g.mine, 10000);
	ck_assert_int_eq(reaped, N + 1);
	ck_assert_int_eq(atomic_load(&done_count), N + 1);
	for (i = 0; i < N; i++)
		ck_assert_msg(reqs[i].res == 4096 && reqs[i].calls == 1 &&
				      reqs[i].on_thread,
			      "write %d: res %ld, calls %d, on this thread %d",
			      i, reqs[i].res, reqs[i].calls,
			      reqs[i].on_thread);
	ck_assert_msg(reqs[N].res == -EBADF && reqs[N].calls == 1,
		      "refused: -EBADF once, got %ld x%d", reqs[N].res,
		      reqs[N].calls);
	dioloop_aio_get_stats(g.shared, &st);
	ck_assert(st.in_flight == 0);
	dioloop_aio_get_stats(g.mine, &st);
	ck_assert_msg(st.deferred > 0, "depth 4 < 64: some waited for room");
	ck_assert_int_eq(dioloop_aio_reap_bound(0), -1);

	reaped_rig_close(&g);
}
END_TEST

/* Plugged, sixteen separate submissions reach the kernel in one io_submit
 * at the unplug; a wait that reaps unplugs first (else it would wait for
 * what it holds). */
START_TEST(test_aio_plug_batches_submissions)
{
	enum { N = 16 };
	struct reaped_rig g;
	struct test_req reqs[N];
	struct dioloop_aio_stats st;
	int i, reaped = 0, rounds;

	memset(reqs, 0, sizeof(reqs));
	reaped_rig_open(&g, N, 'p', 64);

	dioloop_aio_plug();
	for (i = 0; i < N; i++) {
		struct dioloop_aio_req *p = &reqs[i].req;

		reqs[i].iov = (struct iovec){ g.buf + i * 4096, 4096 };
		reqs[i].aio = g.mine;
		dioloop_aio_prep_rw(&reqs[i].req, true, g.fd, &reqs[i].iov, 1,
				    (off_t)i * 4096, test_done);
		dioloop_aio_submit_here(g.shared, &p, 1);
	}
	dioloop_aio_get_stats(g.mine, &st);
	ck_assert_msg(st.submitted == 0, "plugged: nothing submitted yet, "
		      "got %" PRIu64, st.submitted);
	dioloop_aio_unplug();
	dioloop_aio_get_stats(g.mine, &st);
	ck_assert_msg(st.submitted == N && st.batches == 1,
		      "unplugged: %d requests in one io_submit, got %" PRIu64
		      " in %" PRIu64, N, st.submitted, st.batches);
	for (rounds = 0; rounds < 10000 && reaped < N; rounds++)
		reaped += dioloop_aio_reap(g.mine, 10000);
	ck_assert_int_eq(reaped, N);

	/* Plugged again: a reaping wait submits what it holds. */
	dioloop_aio_plug();
	for (i = 0; i < N; i++) {
		struct dioloop_aio_req *p = &reqs[i].req;

		dioloop_aio_prep_rw(&reqs[i].req, false, g.fd, &reqs[i].iov, 1,
				    (off_t)i * 4096, test_done);
		dioloop_aio_submit_here(g.shared, &p, 1);
	}
	for (rounds = 0; rounds < 10000 && atomic_load(&done_count) < 2 * N;
	     rounds++)
		ck_assert_int_ge(dioloop_aio_reap_bound(10000), 0);
	ck_assert_int_eq(atomic_load(&done_count), 2 * N);
	for (i = 0; i < N; i++)
		ck_assert_msg(reqs[i].res == 4096, "read %d: %ld", i,
			      reqs[i].res);
	reaped_rig_close(&g);
}
END_TEST

/* Another thread waits (dioloop_aio_free of the shared context) for a
 * request only the bound thread can complete; the bound thread itself
 * waits on a condition with dioloop_aio_cond_wait, which reaps, so both
 * end. */
struct cond_wait_case {
	GMutex lock;
	GCond cond;
	bool flag;
};

static void cond_done(struct dioloop_aio_req *r, long res)
{
	struct test_req *t = (struct test_req *)r;

	t->res = res;
	t->calls++;
	atomic_fetch_add(&done_count, 1);
}

static gpointer free_shared(gpointer data)
{
	struct dioloop_aio *shared = data;

	dioloop_aio_free(shared);	/* waits for the bound thread's reap */
	return NULL;
}

START_TEST(test_aio_cond_wait_reaps_the_bound_context)
{
	struct dioloop_aio *shared, *mine;
	struct test_req r = { 0 };
	struct dioloop_aio_req *p = &r.req;
	struct cond_wait_case c;
	GThread *t;
	char buf[512];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	ck_assert_int_ge(efd, 0);
	g_mutex_init(&c.lock);
	g_cond_init(&c.cond);
	c.flag = false;
	ck_assert_int_eq(dioloop_aio_new(8, "test-aio", &shared), 0);
	ck_assert_int_eq(dioloop_aio_new_reaped(8, efd, &mine), 0);
	dioloop_aio_bind_thread(mine);
	atomic_store(&done_count, 0);
	r.iov = (struct iovec){ buf, sizeof(buf) };
	dioloop_aio_prep_rw(&r.req, false, -1, &r.iov, 1, 0, cond_done);
	dioloop_aio_submit_here(shared, &p, 1);
	t = g_thread_new("free-shared", free_shared, shared);
	/* Wait until the other thread's free has returned: it can only once
	 * the request completed, which only this thread's reaping does. */
	g_mutex_lock(&c.lock);
	while (atomic_load(&done_count) == 0)
		dioloop_aio_cond_wait(&c.cond, &c.lock);
	g_mutex_unlock(&c.lock);
	g_thread_join(t);
	ck_assert_int_eq(r.calls, 1);
	ck_assert_int_eq(r.res, -EBADF);
	dioloop_aio_free(mine);
	close(efd);
	g_mutex_clear(&c.lock);
	g_cond_clear(&c.cond);
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
	tcase_add_test(tc, test_aio_reaped_context_runs_done_on_its_thread);
	tcase_add_test(tc, test_aio_cond_wait_reaps_the_bound_context);
	tcase_add_test(tc, test_aio_plug_batches_submissions);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(aio_suite());
}
