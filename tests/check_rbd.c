/* SPDX-License-Identifier: MIT */
/*
 * The rbd backend.  Without a cluster: URL checking (one error line each,
 * -EINVAL, no network).  With one: a CTest fixture (tools/ceph-cluster
 * fixture DIR) starts a throwaway single-node cluster and sets
 *
 *   DIOLOOP_RBD_CLUSTER  DIR: DIR/ceph.conf is the cluster's config, or
 *                        DIR.why says why none could be started (the
 *                        cluster tests are then skipped, status 77)
 *
 * data round trips (many asynchronous requests in flight at unaligned
 * offsets, lengths and memory, read back after a reopen), EOF and
 * growable writes, flush/discard/write_zeroes/resize/map/info, the
 * exclusive lock refusing a second writer with the holder's name, images
 * of one pool sharing one librados client, and the errors of a missing image or pool and of an existing one.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static int warnings;
static char *last_warning;

static void count_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer unused)
{
	if (level & G_LOG_LEVEL_WARNING) {
		warnings++;
		g_free(last_warning);
		last_warning = g_strdup(msg);
	}
	fprintf(stderr, "log: %s\n", msg);
}

static void log_setup(void)
{
	warnings = 0;
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  count_log, NULL);
}

/* rbd://rbd/NAME-PID: a name no earlier run of this test used. */
static char *image_url(const char *name, const char *opts)
{
	return g_strdup_printf("rbd://rbd/%s-%ld%s%s", name, (long)getpid(),
			       opts ? "?" : "", opts ? opts : "");
}

static struct backend *open_url(const char *url, unsigned int flags)
{
	struct backend_open_args a = { .path = url, .flags = flags };
	g_autoptr(GError) error = NULL;
	struct backend *b = NULL;
	int ret;

	a.error = &error;
	ret = backend_open("rbd", &a, &b);
	ck_assert_msg(ret == 0, "open %s: %s", url,
		      error ? error->message : g_strerror(-ret));
	return b;
}

/* A new image, opened. */
static struct backend *make_open(const char *url, uint64_t size,
				 unsigned int flags)
{
	struct backend_create_args c = { .path = url, .size = size };
	g_autoptr(GError) error = NULL;
	int ret;

	ret = backend_create(NULL, &c, &error);
	ck_assert_msg(ret == 0, "create %s: %s", url,
		      error ? error->message : g_strerror(-ret));
	return open_url(url, flags);
}

/* ---- asynchronous requests ---- */

struct aio_op {
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec *bvec;
	char *buf;
	size_t len;
	ssize_t res;
	atomic_bool done;
};

static void aio_done(struct kiocb *iocb, ssize_t res)
{
	struct aio_op *op = iocb->ki_private;

	op->res = res;
	atomic_store(&op->done, true);
}

/* len bytes at pos, memory mem_off into its first page, one bio_vec per
 * page. */
static void aio_prep(struct aio_op *op, int rw, uint64_t pos, size_t len,
		     size_t mem_off)
{
	size_t i = 0, done = 0, pages = (mem_off + len + 4095) / 4096;

	memset(op, 0, sizeof(*op));
	op->buf = aligned_alloc(4096, pages * 4096);
	op->bvec = g_new(struct bio_vec, pages);
	op->len = len;
	while (done < len) {
		size_t off = i == 0 ? mem_off : 0;
		size_t n = MIN(4096 - off, len - done);

		op->bvec[i] = (struct bio_vec){ op->buf + i * 4096, (unsigned)n,
						(unsigned)off };
		i++;
		done += n;
	}
	iov_iter_init_bvec(&op->iter, op->bvec, i, len, 0);
	op->iocb = (struct kiocb){ .ki_rw = rw, .ki_pos = pos,
				   .ki_iter = &op->iter,
				   .ki_complete = aio_done, .ki_private = op };
}

static ssize_t aio_wait(struct aio_op *op, int seconds)
{
	int64_t end = g_get_monotonic_time() + (int64_t)seconds * G_USEC_PER_SEC;

	while (!atomic_load(&op->done)) {
		ck_assert_msg(g_get_monotonic_time() < end,
			      "request did not complete within %d s", seconds);
		g_usleep(500);
	}
	return op->res;
}

static void aio_free(struct aio_op *op)
{
	free(op->buf);
	g_free(op->bvec);
}

static bool all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- without a cluster ---- */

START_TEST(test_rbd_url_bad)
{
	static const char *const bad[] = {
		"rbd://",
		"rbd://pool",
		"rbd://pool/",
		"rbd://pool//img",
		"rbd://pool/ns/img/more",
		"rbd://pool/img@snap",
		"rbd://pool/img?bogus=1",
		"rbd://pool/img?timeout=0",
		"rbd://pool/img?timeout=abc",
		"rbd://pool/img?noequals",
		"rbd://pool/img?conf=",
	};
	static const char *const good_dirs[] = {
		"rbd://pool", "rbd://pool/", "rbd://pool/ns",
		"rbd://pool?conf=/x.conf&id=u",
	};
	size_t i;

	log_setup();
	ck_assert_msg(backend_lookup("rbd") != NULL, "rbd is registered");
	ck_assert_str_eq(backend_probe("rbd://pool/img"), "rbd");
	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct backend_open_args a = { .path = bad[i] };
		struct backend *b = NULL;
		int before = warnings, ret;

		ret = backend_open("rbd", &a, &b);
		ck_assert_msg(ret == -EINVAL, "open %s: expected -EINVAL, got %d",
			      bad[i], ret);
		ck_assert_msg(warnings == before + 1,
			      "open %s: expected one log line, got %d", bad[i],
			      warnings - before);
	}
	for (i = 0; i < G_N_ELEMENTS(good_dirs); i++)
		ck_assert_msg(backend_check_url(good_dirs[i], false, NULL) == 0,
			      "%s is a pool URL", good_dirs[i]);
	ck_assert_int_eq(backend_check_url("rbd://pool/ns/img", true, NULL), 0);
	ck_assert_int_eq(backend_check_url("rbd://pool/ns/img", false, NULL),
			 -EINVAL);
}
END_TEST

/* ---- with a cluster ---- */

/* Rounds of asynchronous requests at random unaligned offsets, lengths
 * and memory (non-overlapping within a round), checked against a model,
 * then read back whole after a flush and a reopen. */
START_TEST(test_rbd_random_io)
{
	const size_t size = 16 * MiB, slots = 16, slot = size / slots;
	g_autofree char *url = image_url("random", NULL);
	char *model = g_malloc0(size), *tmp = g_malloc(size);
	struct aio_op *ops = g_new0(struct aio_op, slots);
	struct test_rng rng;
	struct backend *b;
	size_t i;

	log_setup();
	test_rng_init(&rng, 1);
	b = make_open(url, size, 0);
	ck_assert_int_eq(backend_get_size(b), (int64_t)size);
	for (unsigned round = 0; round < 4; round++) {
		for (i = 0; i < slots; i++) {
			bool write = round < 2 || test_rng_range(&rng, 0, 2);
			size_t len = test_rng_range(&rng, 1, slot);
			uint64_t pos = i * slot + test_rng_range(&rng, 0, slot - len);

			aio_prep(&ops[i], write ? DIOLOOP_WRITE : DIOLOOP_READ,
				 pos, len, test_rng_range(&rng, 0, 4095));
			if (write) {
				struct iov_iter it = ops[i].iter;

				test_rng_fill(&rng, model + pos, len);
				iov_iter_copy_from_buf(&it, model + pos, len);
			}
			ck_assert_int_eq(backend_direct_IO_bvec(b, &ops[i].iocb),
					 -EIOCBQUEUED);
		}
		for (i = 0; i < slots; i++) {
			ssize_t r = aio_wait(&ops[i], 60);

			ck_assert_msg(r == (ssize_t)ops[i].len,
				      "round %u op %zu: expected %zu, got %zd",
				      round, i, ops[i].len, r);
			if (ops[i].iocb.ki_rw == DIOLOOP_READ) {
				struct iov_iter it = ops[i].iter;

				iov_iter_copy_to_buf(tmp, &it, ops[i].len);
				ck_assert_msg(!memcmp(tmp, model + ops[i].iocb.ki_pos,
						      ops[i].len),
					      "round %u: read at %llu differs",
					      round,
					      (unsigned long long)ops[i].iocb.ki_pos);
			}
			aio_free(&ops[i]);
		}
	}
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);
	b = open_url(url, BACKEND_OPEN_RDONLY);
	ck_assert_int_eq(backend_pread(b, tmp, size, 0), (ssize_t)size);
	ck_assert_msg(!memcmp(tmp, model, size),
		      "the image read after a reopen differs from what was written");
	backend_close(b);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
	g_free(ops);
	g_free(model);
	g_free(tmp);
}
END_TEST

/*
 * Requests submitted from a completion, which runs on librbd's API strand
 * (the core's copiers and cow over rbd do this): a read that librbd
 * queues, completed later, and a write it refuses at once (read-only
 * image).  Neither completes inside the call that submitted it (the
 * submitter may hold a lock its completion takes), both give their
 * result, and nothing waits on the strand.
 */
struct nested {
	struct backend *b;
	struct aio_op outer, read, write;
	atomic_bool submitting;		/* inside a nested submit */
	atomic_bool completed_inside;
	ssize_t read_ret, write_ret;
};

static struct nested *the_nested;

static void nested_inner_done(struct kiocb *iocb, ssize_t res)
{
	if (atomic_load(&the_nested->submitting))
		atomic_store(&the_nested->completed_inside, true);
	aio_done(iocb, res);
}

static void nested_outer_done(struct kiocb *iocb, ssize_t res)
{
	struct nested *n = the_nested;

	atomic_store(&n->submitting, true);
	n->read_ret = backend_direct_IO_bvec(n->b, &n->read.iocb);
	n->write_ret = backend_direct_IO_bvec(n->b, &n->write.iocb);
	atomic_store(&n->submitting, false);
	aio_done(iocb, res);
}

START_TEST(test_rbd_submit_from_completion)
{
	g_autofree char *url = image_url("nested", NULL);
	struct nested n = { 0 };
	struct aio_op fill;
	struct backend *b;

	log_setup();
	b = make_open(url, MiB, 0);
	aio_prep(&fill, DIOLOOP_WRITE, 4096, 4096, 0);
	memset(fill.buf, 0x5a, 4096);
	ck_assert_int_eq(backend_direct_IO_bvec(b, &fill.iocb), -EIOCBQUEUED);
	ck_assert_int_eq(aio_wait(&fill, 60), 4096);
	aio_free(&fill);
	backend_close(b);
	n.b = open_url(url, BACKEND_OPEN_RDONLY);
	the_nested = &n;
	aio_prep(&n.outer, DIOLOOP_READ, 0, 4096, 0);
	n.outer.iocb.ki_complete = nested_outer_done;
	aio_prep(&n.read, DIOLOOP_READ, 4096, 4096, 0);
	n.read.iocb.ki_complete = nested_inner_done;
	aio_prep(&n.write, DIOLOOP_WRITE, 8192, 4096, 0);
	n.write.iocb.ki_complete = nested_inner_done;
	ck_assert_int_eq(backend_direct_IO_bvec(n.b, &n.outer.iocb),
			 -EIOCBQUEUED);
	ck_assert_int_eq(aio_wait(&n.outer, 60), 4096);
	ck_assert_int_eq(n.read_ret, -EIOCBQUEUED);
	ck_assert_int_eq(aio_wait(&n.read, 60), 4096);
	ck_assert_msg(n.read.buf[0] == 0x5a && n.read.buf[4095] == 0x5a,
		      "the nested read returns what was written");
	ck_assert_int_eq(n.write_ret, -EROFS);
	ck_assert_msg(!atomic_load(&n.completed_inside),
		      "a nested request completed inside the call that submitted it");
	aio_free(&n.outer);
	aio_free(&n.read);
	aio_free(&n.write);
	backend_close(n.b);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
}
END_TEST

/* Reads stop at EOF; writes past it fail whole, or grow a growable
 * image. */
START_TEST(test_rbd_eof_growable)
{
	g_autofree char *url = image_url("eof", NULL);
	struct aio_op op;
	char buf[8192];
	struct backend *b;

	log_setup();
	b = make_open(url, 1 * MiB, 0);
	memset(buf, 7, sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b, buf, 4096, MiB - 4096), 4096);
	ck_assert_int_eq(backend_pread(b, buf, 8192, MiB - 4096), 4096);
	ck_assert_int_eq(buf[0], 7);
	ck_assert_int_eq(backend_pread(b, buf, 4096, MiB), 0);
	/* One request crossing EOF: refused whole, nothing written. */
	aio_prep(&op, DIOLOOP_WRITE, MiB - 4096, 8192, 0);
	op.iocb.ki_complete = NULL;
	ck_assert_int_eq(backend_direct_IO_bvec(b, &op.iocb), -ENOSPC);
	aio_free(&op);
	ck_assert_int_eq(backend_pread(b, buf, 4096, MiB - 4096), 4096);
	ck_assert_int_eq(buf[0], 7);
	backend_close(b);

	b = open_url(url, BACKEND_OPEN_GROWABLE);
	memset(buf, 9, sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b, buf, 8192, MiB - 100), 8192);
	ck_assert_int_eq(backend_get_size(b), (int64_t)(MiB - 100 + 8192));
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);
	b = open_url(url, BACKEND_OPEN_RDONLY);
	ck_assert_int_eq(backend_get_size(b), (int64_t)(MiB - 100 + 8192));
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(backend_pread(b, buf, 8192, MiB - 100), 8192);
	ck_assert_int_eq(buf[0], 9);
	ck_assert_int_eq(buf[8191], 9);
	backend_close(b);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
}
END_TEST

/* discard and write_zeroes read as zeros; map tells holes from data;
 * resize; info. */
START_TEST(test_rbd_ops)
{
	const size_t size = 32 * MiB;
	g_autofree char *url = image_url("ops", NULL);
	char *buf = g_malloc(size);
	struct backend_extent ext;
	struct backend_info info;
	struct backend *b;

	log_setup();
	b = make_open(url, size, 0);
	ck_assert_int_eq(backend_map(b, 0, size, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == size,
		      "a new image is one hole (got hole=%d len=%llu)", ext.hole,
		      (unsigned long long)ext.len);
	memset(buf, 0x5a, 8 * MiB);
	ck_assert_int_eq(backend_pwrite(b, buf, 8 * MiB, 8 * MiB),
			 (ssize_t)(8 * MiB));
	ck_assert_int_eq(backend_flush(b), 0);
	ck_assert_int_eq(backend_map(b, 0, size, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 8 * MiB,
		      "hole before the data (got hole=%d len=%llu)", ext.hole,
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(b, 8 * MiB, size - 8 * MiB, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == 8 * MiB,
		      "the data (got hole=%d len=%llu)", ext.hole,
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(b, 16 * MiB, size - 16 * MiB, &ext), 0);
	ck_assert_msg(ext.hole, "hole after the data");

	ck_assert_int_eq(backend_discard(b, 8 * MiB, 4 * MiB), 0);
	ck_assert_int_eq(backend_write_zeroes(b, 12 * MiB + 1000, 5000), 0);
	ck_assert_int_eq(backend_pread(b, buf, 8 * MiB, 8 * MiB),
			 (ssize_t)(8 * MiB));
	ck_assert_msg(all_zero(buf, 4 * MiB), "a discarded range reads as zeros");
	ck_assert_int_eq(buf[4 * MiB], 0x5a);
	ck_assert_int_eq(buf[4 * MiB + 999], 0x5a);
	ck_assert_msg(all_zero(buf + 4 * MiB + 1000, 5000),
		      "write_zeroes reads as zeros");
	ck_assert_int_eq(buf[4 * MiB + 6000], 0x5a);
	/* A discard not aligned to librbd's discard granularity (64 KiB)
	 * reads as zeros to its first and last byte too. */
	ck_assert_int_eq(backend_discard(b, 13 * MiB + 0x1481, 0x30000), 0);
	ck_assert_int_eq(backend_pread(b, buf, 0x40000, 13 * MiB),
			 (ssize_t)0x40000);
	ck_assert_int_eq(buf[0x1480], 0x5a);
	ck_assert_msg(all_zero(buf + 0x1481, 0x30000),
		      "an unaligned discarded range reads as zeros");
	ck_assert_int_eq(buf[0x31481], 0x5a);

	ck_assert_int_eq(backend_info(b, &info), 0);
	ck_assert_str_eq(info.format, "rbd");
	ck_assert_uint_eq(info.size, size);
	ck_assert_msg(info.allocated > 0 && info.allocated <= size,
		      "allocated %llu", (unsigned long long)info.allocated);

	ck_assert_int_eq(backend_resize(b, 64 * MiB), 0);
	ck_assert_int_eq(backend_get_size(b), (int64_t)(64 * MiB));
	ck_assert_int_eq(backend_pwrite(b, buf, 4096, 60 * MiB), 4096);
	ck_assert_int_eq(backend_resize(b, 4 * MiB), 0);
	ck_assert_int_eq(backend_pread(b, buf, 8192, 4 * MiB - 4096), 4096);
	backend_close(b);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
	g_free(buf);
}
END_TEST

/* A second writer is refused with the holder's name; a reader is not;
 * once the first closes, the second gets in. */
START_TEST(test_rbd_exclusive_lock)
{
	g_autofree char *url = image_url("lock", NULL);
	struct backend_open_args a = { .path = url };
	g_autoptr(GError) error = NULL;
	struct backend *b, *b2 = NULL, *r;
	char buf[4096] = { 1 };

	log_setup();
	b = make_open(url, 4 * MiB, 0);
	ck_assert_int_eq(backend_pwrite(b, buf, sizeof(buf), 0), 4096);
	a.error = &error;
	ck_assert_int_eq(backend_open("rbd", &a, &b2), -EBUSY);
	ck_assert_msg(error && strstr(error->message, "held by"),
		      "the refusal names the holder: %s",
		      error ? error->message : "(none)");
	printf("second writer: %s\n", error->message);
	r = open_url(url, BACKEND_OPEN_RDONLY);
	ck_assert_int_eq(backend_pread(r, buf, sizeof(buf), 0), 4096);
	backend_close(r);
	/* The first writer still writes: the refusal took nothing. */
	ck_assert_int_eq(backend_pwrite(b, buf, sizeof(buf), 4096), 4096);
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);
	b2 = open_url(url, 0);
	ck_assert_int_eq(backend_pwrite(b2, buf, sizeof(buf), 0), 4096);
	backend_close(b2);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
}
END_TEST

/* The threads of this process now. */
static unsigned int threads_now(void)
{
	GDir *dir = g_dir_open("/proc/self/task", 0, NULL);
	unsigned int n = 0;

	ck_assert_ptr_nonnull(dir);
	while (g_dir_read_name(dir))
		n++;
	g_dir_close(dir);
	return n;
}

/* Images of one pool share one librados client (backends/rbd/conn.c):
 * the second and third open add none of a client's threads, and the
 * last one open keeps it while the others close. */
START_TEST(test_rbd_shared_client)
{
	g_autofree char *u1 = image_url("share1", NULL);
	g_autofree char *u2 = image_url("share2", NULL);
	g_autofree char *u3 = image_url("share3", NULL);
	const char *urls[] = { u1, u2, u3 };
	struct backend *b[3];
	char buf[4096], back[4096];
	unsigned int t0, t1, t3, i;

	log_setup();
	for (i = 0; i < 3; i++) {
		struct backend_create_args c = { .path = urls[i],
						 .size = 4 * MiB };

		ck_assert_int_eq(backend_create(NULL, &c, NULL), 0);
	}
	t0 = threads_now();
	b[0] = open_url(u1, 0);
	t1 = threads_now();
	b[1] = open_url(u2, 0);
	b[2] = open_url(u3, 0);
	t3 = threads_now();
	printf("threads: %u, with one image open %u, with three %u\n", t0,
	       t1, t3);
	ck_assert_msg(t1 >= t0 + 4, "a client has threads of its own: %u -> %u",
		      t0, t1);
	ck_assert_msg(t3 - t1 <= (t1 - t0) / 2,
		      "two more images of the pool added %u threads, where one client has %u",
		      t3 - t1, t1 - t0);
	backend_close(b[0]);
	backend_close(b[1]);
	memset(buf, 7, sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b[2], buf, sizeof(buf), 0), 4096);
	ck_assert_int_eq(backend_flush(b[2]), 0);
	backend_close(b[2]);
	ck_assert_uint_eq(threads_now(), t0);
	/* A new client once the last one closed. */
	b[2] = open_url(u3, BACKEND_OPEN_RDONLY);
	ck_assert_int_eq(backend_pread(b[2], back, sizeof(back), 0), 4096);
	ck_assert_mem_eq(back, buf, sizeof(buf));
	backend_close(b[2]);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(backend_remove_url(urls[i], NULL), 0);
}
END_TEST

/* Missing images and pools, existing images: one line each. */
START_TEST(test_rbd_errors)
{
	g_autofree char *url = image_url("exists", NULL);
	g_autofree char *missing = image_url("missing", NULL);
	g_autofree char *base = NULL;
	struct backend_create_args c = { .path = url, .size = MiB };
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	GError *error = NULL;
	struct backend_open_args a = { .error = &error };
	struct backend *b = NULL;
	bool listed = false;

	log_setup();
	ck_assert_int_eq(backend_create(NULL, &c, NULL), 0);
	ck_assert_int_eq(backend_create(NULL, &c, &error), -EEXIST);
	g_clear_error(&error);
	a.path = missing;
	ck_assert_int_eq(backend_open("rbd", &a, &b), -ENOENT);
	ck_assert_msg(strstr(error->message, "missing"), "%s", error->message);
	g_clear_error(&error);
	a.path = "rbd://no-such-pool/x";
	ck_assert_int_eq(backend_open("rbd", &a, &b), -ENOENT);
	ck_assert_msg(strstr(error->message, "no-such-pool"), "%s",
		      error->message);
	g_clear_error(&error);
	ck_assert_int_eq(backend_list_url("rbd://rbd", names, NULL), 0);
	base = g_path_get_basename(url);
	for (guint i = 0; i < names->len; i++)
		listed |= !strcmp(names->pdata[i], base);
	ck_assert_msg(listed, "rbd://rbd lists %s", base);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
	ck_assert_int_eq(warnings, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rbd");
	TCase *tc = tcase_create("url");
	const char *dir = getenv("DIOLOOP_RBD_CLUSTER");
	g_autofree char *conf = NULL, *why = NULL, *why_path = NULL;
	int ret;

	if (!backend_lookup("rbd")) {
		printf("SKIP: the rbd backend is not built (no librbd-dev/librados-dev)\n");
		return 77;
	}
	tcase_add_test(tc, test_rbd_url_bad);
	suite_add_tcase(s, tc);
	if (dir && *dir) {
		conf = g_build_filename(dir, "ceph.conf", NULL);
		why_path = g_strconcat(dir, ".why", NULL);
	}
	if (conf && access(conf, R_OK) == 0) {
		setenv("CEPH_CONF", conf, 1);
		tc = tcase_create("cluster");
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, test_rbd_random_io);
		tcase_add_test(tc, test_rbd_eof_growable);
		tcase_add_test(tc, test_rbd_ops);
		tcase_add_test(tc, test_rbd_exclusive_lock);
		tcase_add_test(tc, test_rbd_shared_client);
		tcase_add_test(tc, test_rbd_errors);
		tcase_add_test(tc, test_rbd_submit_from_completion);
		suite_add_tcase(s, tc);
		return test_run_suite(s);
	}
	if (why_path)
		g_file_get_contents(why_path, &why, NULL, NULL);
	ret = test_run_suite(s);
	printf("SKIP: the cluster tests: %s\n",
	       why ? g_strstrip(why) :
	       "DIOLOOP_RBD_CLUSTER is not set (ctest sets it through the rbd_cluster fixture)");
	return ret ? ret : 77;
}
