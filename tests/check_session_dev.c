/* SPDX-License-Identifier: MIT */
/*
 * FUSE workers that reap their own completions (fusefs/session_dev.h),
 * with a pipe standing in for /dev/fuse: a reader's backend completions
 * run on it while it waits for its next request; a reader cancelled while
 * it waits still completes what it carries before its thread ends; two
 * readers of one fd each take a request once; a reader that serves a read
 * comes back for the next request, and one that serves a lookup hands
 * reading on to one standing by.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "backends/aio.h"
#include "fusefs/session_dev.h"
#include "tests/testutil.h"

struct dev_req {
	struct dioloop_aio_req req;
	struct iovec iov;
	pthread_t reader;	/* the thread that submitted it */
	atomic_int calls;
	atomic_bool on_reader;
	long res;
};

static void dev_req_done(struct dioloop_aio_req *r, long res)
{
	struct dev_req *d = (struct dev_req *)r;

	d->res = res;
	atomic_store(&d->on_reader, pthread_equal(pthread_self(), d->reader));
	atomic_fetch_add(&d->calls, 1);
}

/* A request that stays in flight until efd is written (IOCB_CMD_POLL). */
static void prep_poll(struct dev_req *d, int efd)
{
	memset(&d->req, 0, sizeof(d->req));
	io_prep_poll(&d->req.iocb, efd, POLLIN);
	d->req.iocb.data = &d->req;
	d->req.done = dev_req_done;
}

struct reader {
	int fd;				/* the pipe's read end */
	struct dioloop_aio *shared;	/* what requests are submitted through */
	struct dev_req *req;		/* submitted after the first read */
	char got[2];			/* what its two reads returned */
	ssize_t n[2];
};

/* Read one "request", submit req here (carried by this thread), then read
 * the next one, which comes only after req completed. */
static void *reader_thread(void *data)
{
	struct reader *r = data;
	struct dioloop_aio_req *p = &r->req->req;

	r->n[0] = dioloop_dev_read(r->fd, &r->got[0], 1);
	r->req->reader = pthread_self();
	dioloop_aio_submit_here(r->shared, &p, 1);
	r->n[1] = dioloop_dev_read(r->fd, &r->got[1], 1);
	return NULL;
}

static void wait_calls(struct dev_req *d, int n)
{
	int i;

	for (i = 0; i < 10000 && atomic_load(&d->calls) < n; i++)
		g_usleep(1000);
}

static void pipe_put(int fd, char c)
{
	ck_assert_int_eq(write(fd, &c, 1), 1);
}

/* A reader thread that has read one request and waits for the next,
 * carrying a poll of efd submitted through shared. */
struct carrying {
	int p[2], efd;
	struct dioloop_aio *shared;
	struct dev_req req;
	struct reader r;
	pthread_t t;
};

static void carrying_start(struct carrying *c)
{
	memset(c, 0, sizeof(*c));
	ck_assert_int_eq(pipe(c->p), 0);
	c->efd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_ge(c->efd, 0);
	ck_assert_int_eq(dioloop_aio_new(16, "test-shared", &c->shared), 0);
	prep_poll(&c->req, c->efd);
	c->r = (struct reader){ .fd = c->p[0], .shared = c->shared,
				.req = &c->req };
	pipe_put(c->p[1], 'a');
	ck_assert_int_eq(pthread_create(&c->t, NULL, reader_thread, &c->r), 0);
	g_usleep(50 * 1000);	/* it waits in its second read */
}

static void carrying_end(struct carrying *c)
{
	dioloop_aio_free(c->shared);
	close(c->efd);
	close(c->p[0]);
	close(c->p[1]);
}

/* The completion runs on the reader while it waits for its next request:
 * nothing else reaps it (the request is not written until it ran). */
START_TEST(test_completion_runs_on_waiting_reader)
{
	struct dioloop_dev_stats before, after;
	struct carrying c;

	dioloop_dev_get_stats(&before);
	carrying_start(&c);
	ck_assert_int_eq(eventfd_write(c.efd, 1), 0);
	wait_calls(&c.req, 1);
	ck_assert_msg(atomic_load(&c.req.calls) == 1,
		      "the completion did not run while its reader waited");
	ck_assert_msg(atomic_load(&c.req.on_reader),
		      "the completion ran on another thread, not its reader");
	pipe_put(c.p[1], 'b');
	ck_assert_int_eq(pthread_join(c.t, NULL), 0);
	ck_assert_int_eq(c.r.n[0], 1);
	ck_assert_int_eq(c.r.n[1], 1);
	ck_assert_int_eq(c.r.got[0], 'a');
	ck_assert_int_eq(c.r.got[1], 'b');
	dioloop_dev_get_stats(&after);
	ck_assert_uint_ge(after.reaped - before.reaped, 1);
	carrying_end(&c);
}
END_TEST

/* libfuse cancels idle workers at the end of a session: one cancelled in
 * its wait, with a request still in flight, completes it before its thread
 * ends (or the request would never be answered, and the daemon's drain at
 * unmount would wait for ever). */
START_TEST(test_cancelled_reader_completes_what_it_carries)
{
	struct carrying c;

	carrying_start(&c);
	ck_assert_int_eq(pthread_cancel(c.t), 0);
	g_usleep(50 * 1000);	/* its exit waits for the poll */
	ck_assert_int_eq(atomic_load(&c.req.calls), 0);
	ck_assert_int_eq(eventfd_write(c.efd, 1), 0);
	ck_assert_int_eq(pthread_join(c.t, NULL), 0);
	ck_assert_msg(atomic_load(&c.req.calls) == 1,
		      "a cancelled reader ended without completing its request "
		      "(%d calls)", atomic_load(&c.req.calls));
	ck_assert(atomic_load(&c.req.on_reader));
	carrying_end(&c);
}
END_TEST

#define MANY_REQUESTS 2000

struct taker {
	int fd;
	int taken[MANY_REQUESTS];
	int n;
};

static void *taker_thread(void *data)
{
	struct taker *k = data;

	for (;;) {
		char buf[4];
		ssize_t n = dioloop_dev_read(k->fd, buf, 4);

		if (n <= 0)
			return NULL;	/* the write end closed */
		/* Requests of 4 bytes each, written whole: one per read. */
		ck_assert_int_eq(n, 4);
		memcpy(&k->taken[k->n++], buf, 4);
	}
}

/* Two readers of one fd (exclusive wake-ups, a non-blocking fd): each
 * request is read once, none is lost or left waiting. */
START_TEST(test_two_readers_take_each_request_once)
{
	static struct taker a, b;
	char *seen = g_malloc0(MANY_REQUESTS);
	pthread_t ta, tb;
	int p[2], i;

	ck_assert_int_eq(pipe(p), 0);
	a = (struct taker){ .fd = p[0] };
	b = (struct taker){ .fd = p[0] };
	ck_assert_int_eq(pthread_create(&ta, NULL, taker_thread, &a), 0);
	ck_assert_int_eq(pthread_create(&tb, NULL, taker_thread, &b), 0);
	for (i = 0; i < MANY_REQUESTS; i++) {
		ck_assert_int_eq(write(p[1], &i, 4), 4);
		if (i % 64 == 0)
			g_usleep(100);	/* both readers idle now and then */
	}
	close(p[1]);
	ck_assert_int_eq(pthread_join(ta, NULL), 0);
	ck_assert_int_eq(pthread_join(tb, NULL), 0);
	ck_assert_int_eq(a.n + b.n, MANY_REQUESTS);
	for (i = 0; i < a.n; i++)
		seen[a.taken[i]]++;
	for (i = 0; i < b.n; i++)
		seen[b.taken[i]]++;
	for (i = 0; i < MANY_REQUESTS; i++)
		ck_assert_msg(seen[i] == 1, "request %d read %d times", i,
			      seen[i]);
	g_free(seen);
	close(p[0]);
}
END_TEST


/* ---- who reads: a worker that serves a read comes back for the next
 * request itself; one that takes a request that may take long (a
 * lookup) hands reading on to a standing-by worker. */

#define LF_HOLD (1ull << 63)	/* in unique: the reader holds after it */
#define LF_BLOCKS (1ull << 62)	/* and says so, as a thread about to sleep
				 * on a lock or a synchronous request does */

static GMutex lf_lock;
static GCond lf_cond;
static int lf_reader_of[8];	/* unique -> reader id + 1 */
static int lf_released;		/* holds the test let go of */

struct lf_reader {
	int fd;
	int id;
};

static void *lf_reader_thread(void *data)
{
	struct lf_reader *r = data;
	int holds = 0;

	for (;;) {
		struct fuse_in_header in;
		ssize_t n = dioloop_dev_read(r->fd, &in, sizeof(in));

		if (n <= 0)
			return NULL;
		g_mutex_lock(&lf_lock);
		lf_reader_of[in.unique & 7] = r->id + 1;
		g_cond_broadcast(&lf_cond);
		if (in.unique & LF_BLOCKS)
			dioloop_thread_may_block();
		if (in.unique & LF_HOLD) {
			holds++;
			while (lf_released < holds)
				g_cond_wait(&lf_cond, &lf_lock);
		}
		g_mutex_unlock(&lf_lock);
	}
}

/* The test's readers start afresh (tests may share one process). */
static void lf_reset(void)
{
	g_mutex_lock(&lf_lock);
	memset(lf_reader_of, 0, sizeof(lf_reader_of));
	lf_released = 0;
	g_mutex_unlock(&lf_lock);
}

static void lf_send(int fd, uint32_t opcode, uint64_t unique)
{
	struct fuse_in_header in = { .len = sizeof(in), .opcode = opcode,
				     .unique = unique };

	ck_assert_int_eq(write(fd, &in, sizeof(in)), (ssize_t)sizeof(in));
}

/* The reader of request u (0: none yet), waiting up to ms for one. */
static int lf_wait_read(int u, int ms)
{
	gint64 end = g_get_monotonic_time() + ms * 1000;
	int who;

	g_mutex_lock(&lf_lock);
	while (!lf_reader_of[u] &&
	       g_cond_wait_until(&lf_cond, &lf_lock, end))
		;
	who = lf_reader_of[u];
	g_mutex_unlock(&lf_lock);
	return who;
}

static void lf_release(void)
{
	g_mutex_lock(&lf_lock);
	lf_released++;
	g_cond_broadcast(&lf_cond);
	g_mutex_unlock(&lf_lock);
}

/* Reader A serves a read (and holds in it), so it is the one to read
 * next; reader B starts meanwhile and stands by. */
struct lf_pair {
	int p[2];
	struct lf_reader a, b;
	pthread_t ta, tb;
};

static void lf_start(struct lf_pair *lf)
{
	lf_reset();
	ck_assert_int_eq(pipe(lf->p), 0);
	lf->a = (struct lf_reader){ .fd = lf->p[0], .id = 0 };
	lf->b = (struct lf_reader){ .fd = lf->p[0], .id = 1 };
	ck_assert_int_eq(pthread_create(&lf->ta, NULL, lf_reader_thread,
					&lf->a), 0);
	g_usleep(20 * 1000);
	lf_send(lf->p[1], FUSE_READ, 1 | LF_HOLD);
	ck_assert_int_eq(lf_wait_read(1, 5000), 1);
	ck_assert_int_eq(pthread_create(&lf->tb, NULL, lf_reader_thread,
					&lf->b), 0);
	g_usleep(50 * 1000);
}

/* A holds in request 2: request 3 must go to B. */
static void lf_expect_b_reads(struct lf_pair *lf, const char *why)
{
	g_usleep(50 * 1000);	/* B settles: reading, or standing by */
	lf_send(lf->p[1], FUSE_READ, 3);
	ck_assert_msg(lf_wait_read(3, 5000) == 2,
		      "a request waited while the only reader %s (reader %d)",
		      why, lf_wait_read(3, 0));
}

static void lf_end(struct lf_pair *lf)
{
	lf_release();
	close(lf->p[1]);
	ck_assert_int_eq(pthread_join(lf->ta, NULL), 0);
	ck_assert_int_eq(pthread_join(lf->tb, NULL), 0);
	close(lf->p[0]);
}

START_TEST(test_slow_request_hands_reading_on)
{
	struct lf_pair lf;

	lf_start(&lf);
	lf_send(lf.p[1], FUSE_LOOKUP, 2 | LF_HOLD);
	g_usleep(50 * 1000);
	ck_assert_msg(lf_wait_read(2, 0) == 0,
		      "a standing-by reader took a request while the reader "
		      "serving a read was to come back for it");
	/* A comes back, takes the lookup (and holds in it): B reads next. */
	lf_release();
	ck_assert_int_eq(lf_wait_read(2, 5000), 1);
	lf_expect_b_reads(&lf, "served a lookup");
	lf_end(&lf);
}
END_TEST

/* A reader serving a read that then sleeps (a lock, a synchronous
 * request to a remote) hands reading on too. */
START_TEST(test_blocked_reader_hands_reading_on)
{
	struct lf_pair lf;

	lf_start(&lf);
	lf_send(lf.p[1], FUSE_READ, 2 | LF_HOLD | LF_BLOCKS);
	lf_release();
	ck_assert_int_eq(lf_wait_read(2, 5000), 1);
	lf_expect_b_reads(&lf, "slept in a read");
	lf_end(&lf);
}
END_TEST

static Suite *session_dev_suite(void)
{
	Suite *s = suite_create("session_dev");
	TCase *tc = tcase_create("readers");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_completion_runs_on_waiting_reader);
	tcase_add_test(tc, test_cancelled_reader_completes_what_it_carries);
	tcase_add_test(tc, test_two_readers_take_each_request_once);
	tcase_add_test(tc, test_slow_request_hands_reading_on);
	tcase_add_test(tc, test_blocked_reader_hands_reading_on);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(session_dev_suite());
}
