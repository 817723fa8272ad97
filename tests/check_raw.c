/* SPDX-License-Identifier: MIT */
/*
 * The raw backend on real image files: data round trips checked against
 * the file itself (plain pread, independent of the engine), holes, EOF
 * rules, discard / write-zeroes / map, the size-extension protocol with
 * its orphan record (including crashes, in forked children killed at
 * named points), and ENOSPC on a small tmpfs.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/aio.h"
#include "backends/backend.h"
#include "backends/raw/orphan.h"
#include "backends/raw/raw.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* ---- files ---- */

/* Create path with size bytes, sparse. */
static void make_image(const char *path, uint64_t size)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_msg(fd >= 0, "create %s: %s", path, g_strerror(errno));
	ck_assert_msg(ftruncate(fd, (off_t)size) == 0, "ftruncate %s to %llu",
		      path, (unsigned long long)size);
	close(fd);
}

/* Write buf at pos with plain pwrite (not through the backend). */
static void file_write(const char *path, const void *buf, size_t len,
		       uint64_t pos)
{
	int fd = open(path, O_WRONLY);

	ck_assert_msg(fd >= 0, "open %s for writing", path);
	ck_assert_msg(pwrite(fd, buf, len, (off_t)pos) == (ssize_t)len,
		      "plain pwrite of %zu bytes at %llu", len,
		      (unsigned long long)pos);
	ck_assert_msg(fsync(fd) == 0, "fsync %s", path);
	close(fd);
}

/* Read the file with plain pread: bytes read. */
static ssize_t file_read(const char *path, void *buf, size_t len,
			 uint64_t pos)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len, (off_t)pos);
	close(fd);
	return n;
}

static struct stat file_stat(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path,
		      g_strerror(errno));
	return st;
}

static bool file_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static bool is_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static struct backend *open_raw(const char *path, unsigned int flags,
				struct dioloop_aio *aio)
{
	struct backend_open_args args = {
		.path = path,
		.flags = flags,
		.aio = aio,
	};
	struct backend *b = NULL;
	int ret = backend_open("raw", &args, &b);

	ck_assert_msg(ret == 0 && b, "backend_open raw %s: expected 0, got %d",
		      path, ret);
	return b;
}

/* ---- request memory: page-aligned buffers seen through bio_vecs ---- */

struct tbuf {
	char *mem;		/* pages */
	char *data;		/* mem + off: len contiguous bytes */
	size_t len;
	struct bio_vec *bv;
	unsigned long nr;
	struct iov_iter it;
};

/* A buffer of len bytes starting off bytes into its first page; with rng,
 * pages are also cut into two bio_vecs at random points. */
static struct tbuf *tbuf_new(size_t len, size_t off, struct test_rng *rng)
{
	struct tbuf *t = g_new0(struct tbuf, 1);
	size_t total = off + len, pages, pos = off;

	pages = (total + DIOLOOP_PAGE_SIZE - 1) / DIOLOOP_PAGE_SIZE;
	ck_assert_int_eq(posix_memalign((void **)&t->mem, DIOLOOP_PAGE_SIZE,
					pages * DIOLOOP_PAGE_SIZE), 0);
	memset(t->mem, 0x5a, pages * DIOLOOP_PAGE_SIZE);
	t->data = t->mem + off;
	t->len = len;
	t->bv = g_new0(struct bio_vec, pages * 2);
	while (pos < total) {
		size_t in_page = pos % DIOLOOP_PAGE_SIZE;
		size_t n = MIN(DIOLOOP_PAGE_SIZE - in_page, total - pos);
		char *page = t->mem + (pos - in_page);

		if (rng && n > 1 && test_rng_next(rng) % 2) {
			size_t cut = (size_t)test_rng_range(rng, 1, n - 1);

			t->bv[t->nr++] = (struct bio_vec){ page,
				(unsigned int)cut, (unsigned int)in_page };
			in_page += cut;
			pos += cut;
			n -= cut;
		}
		t->bv[t->nr++] = (struct bio_vec){ page, (unsigned int)n,
						   (unsigned int)in_page };
		pos += n;
	}
	return t;
}

static void tbuf_free(struct tbuf *t)
{
	free(t->mem);
	g_free(t->bv);
	g_free(t);
}

/* Point t->it at the whole buffer again. */
static struct iov_iter *tbuf_iter(struct tbuf *t)
{
	iov_iter_init_bvec(&t->it, t->bv, t->nr, t->len, 0);
	return &t->it;
}

/* One synchronous request through the core's entry point. */
static ssize_t sync_rw(struct backend *b, int rw, struct tbuf *t,
		       uint64_t pos)
{
	struct kiocb iocb = {
		.ki_rw = rw,
		.ki_pos = pos,
		.ki_iter = tbuf_iter(t),
	};

	return backend_direct_IO_bvec(b, &iocb);
}

/* ---- asynchronous requests ---- */

struct areq {
	struct kiocb iocb;
	struct tbuf *t;
	ssize_t res;
	atomic_int calls;
};

static GMutex async_lock;
static GCond async_cond;
static int async_done;		/* by async_lock */

static void areq_complete(struct kiocb *iocb, ssize_t res)
{
	struct areq *a = iocb->ki_private;

	a->res = res;
	atomic_fetch_add(&a->calls, 1);
	g_mutex_lock(&async_lock);
	async_done++;
	g_cond_broadcast(&async_cond);
	g_mutex_unlock(&async_lock);
}

static void async_reset(void)
{
	g_mutex_lock(&async_lock);
	async_done = 0;
	g_mutex_unlock(&async_lock);
}

/* Submit a; a result that came back inline counts as done. */
static void areq_submit(struct backend *b, struct areq *a, int rw,
			uint64_t pos)
{
	ssize_t ret;

	a->iocb = (struct kiocb){
		.ki_rw = rw,
		.ki_pos = pos,
		.ki_iter = tbuf_iter(a->t),
		.ki_complete = areq_complete,
		.ki_private = a,
	};
	atomic_store(&a->calls, 0);
	ret = backend_direct_IO_bvec(b, &a->iocb);
	if (ret != -EIOCBQUEUED)
		areq_complete(&a->iocb, ret);
}

/* Wait until n requests are done (60 s at most). */
static void async_wait(int n)
{
	gint64 deadline = g_get_monotonic_time() + 60 * G_TIME_SPAN_SECOND;

	g_mutex_lock(&async_lock);
	while (async_done < n)
		if (!g_cond_wait_until(&async_cond, &async_lock, deadline))
			break;
	ck_assert_msg(async_done == n,
		      "expected %d async completions within 60 s, got %d", n,
		      async_done);
	g_mutex_unlock(&async_lock);
}

static ssize_t async_rw(struct backend *b, int rw, struct tbuf *t,
			uint64_t pos)
{
	struct areq a = { .t = t };

	async_reset();
	areq_submit(b, &a, rw, pos);
	async_wait(1);
	ck_assert_msg(atomic_load(&a.calls) == 1,
		      "ki_complete called exactly once (got %d)",
		      atomic_load(&a.calls));
	return a.res;
}

/* ---- test hooks ---- */

static atomic_int hook_counts[RAW_TEST_ENOSPC_RETRY + 1];
static int crash_point = -1;
static int crash_fd = -1;	/* child: tell the parent to kill us */

static void counting_hook(enum raw_test_point point)
{
	atomic_fetch_add(&hook_counts[point], 1);
	if ((int)point != crash_point)
		return;
	/* Ask the parent for a SIGKILL from outside (valgrind would run
	 * its exit checks on a kill of ourselves) and wait for it here,
	 * at the point. */
	if (crash_fd >= 0 && write(crash_fd, "k", 1) == 1)
		for (;;)
			pause();
	raise(SIGKILL);
}

static void hooks_reset(void)
{
	int i;

	for (i = 0; i <= RAW_TEST_ENOSPC_RETRY; i++)
		atomic_store(&hook_counts[i], 0);
	crash_point = -1;
	raw_test_hook = counting_hook;
}

/* ---- a test's image ---- */

struct img {
	char *dir;
	char *path;
	char *record;
	struct backend *b;
};

static void img_setup(struct img *im, uint64_t size, unsigned int flags)
{
	im->dir = test_tmpdir();
	im->path = g_build_filename(im->dir, "disk.img", NULL);
	im->record = orphan_record_path(im->path);
	make_image(im->path, size);
	hooks_reset();
	im->b = flags == ~0u ? NULL : open_raw(im->path, flags, NULL);
}

static void img_teardown(struct img *im)
{
	if (im->b)
		backend_close(im->b);
	test_rmdir_r(im->dir);
	g_free(im->dir);
	g_free(im->path);
	g_free(im->record);
}

/* Compare the image file with the model over [0, len). */
static void check_file_matches(const char *path, const unsigned char *model,
			       size_t len)
{
	unsigned char *buf = g_malloc(len);
	size_t i;

	ck_assert_msg(file_read(path, buf, len, 0) == (ssize_t)len,
		      "plain pread of %zu bytes of the image", len);
	for (i = 0; i < len; i++)
		if (buf[i] != model[i])
			break;
	ck_assert_msg(i == len,
		      "image file byte %zu is 0x%02x, expected 0x%02x", i,
		      i < len ? buf[i] : 0, i < len ? model[i] : 0);
	g_free(buf);
}

/* ---- data round trips ---- */

START_TEST(test_raw_limits_are_probed)
{
	struct img im;
	struct backend_limits *lim;
	struct backend_info info;

	img_setup(&im, 1 * MiB, 0);
	lim = &im.b->limits;
	ck_assert_msg(lim->request_alignment >= 512 &&
		      !(lim->request_alignment & (lim->request_alignment - 1)),
		      "request_alignment is a power of two >= 512 (got %u)",
		      lim->request_alignment);
	ck_assert_msg(lim->block_size == 4096 || lim->block_size ==
		      lim->request_alignment,
		      "block_size 4096 (got %u)", lim->block_size);
	ck_assert_msg(lim->mem_alignment >= 1, "mem_alignment set (got %u)",
		      lim->mem_alignment);
	ck_assert_msg(lim->max_transfer == 1 * MiB,
		      "max_transfer 1 MiB (got %u)", lim->max_transfer);
	ck_assert_msg(lim->max_segs == IOV_MAX, "max_segs IOV_MAX (got %u)",
		      lim->max_segs);
	ck_assert_msg(im.b->aio != NULL, "a private aio context was created");
	ck_assert_int_eq(backend_info(im.b, &info), 0);
	ck_assert_msg(!strcmp(info.format, "raw") && info.size == 1 * MiB,
		      "info: format raw, size 1 MiB (got %s, %llu)",
		      info.format, (unsigned long long)info.size);
	ck_assert_msg(info.allocated == (uint64_t)file_stat(im.path).st_blocks *
					512,
		      "info.allocated = st_blocks * 512");
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_open_errors)
{
	char *dir = test_tmpdir();
	char *missing = g_build_filename(dir, "missing.img", NULL);
	struct backend_open_args args = { .path = missing };
	struct backend *b = NULL;
	int ret;

	ret = backend_open("raw", &args, &b);
	ck_assert_msg(ret == -ENOENT && b == NULL,
		      "a missing image: expected -ENOENT, got %d", ret);
	args.path = dir;
	ret = backend_open("raw", &args, &b);
	ck_assert_msg(ret < 0 && b == NULL,
		      "a directory is not an image: expected an error, got %d",
		      ret);
	args.flags = BACKEND_OPEN_RDONLY;
	ret = backend_open("raw", &args, &b);
	ck_assert_msg(ret == -EINVAL && b == NULL,
		      "a directory, read-only: expected -EINVAL, got %d", ret);
	test_rmdir_r(dir);
	g_free(missing);
	g_free(dir);
}
END_TEST

/* Random writes (aligned or not, sync or async), each checked at once
 * against the file, then everything read back through the backend. */
static void random_round_trips(bool aligned, bool async, unsigned n)
{
	const size_t size = 2 * MiB;
	unsigned char *model = g_malloc0(size);
	struct test_rng rng;
	struct img im;
	unsigned i;

	test_rng_init(&rng, (aligned ? 1 : 2) + (async ? 10 : 0));
	img_setup(&im, size, 0);
	for (i = 0; i < n; i++) {
		size_t len, off;
		uint64_t pos;
		struct tbuf *t;
		ssize_t res;

		if (aligned) {
			len = (size_t)test_rng_range(&rng, 1, 64) * 4096;
			pos = test_rng_range(&rng, 0, (size - len) / 4096) *
			      4096;
			off = 0;
		} else {
			len = (size_t)test_rng_range(&rng, 1, 70000);
			pos = test_rng_range(&rng, 0, size - len);
			off = (size_t)test_rng_range(&rng, 0, 4095);
		}
		t = tbuf_new(len, off, aligned ? NULL : &rng);
		test_rng_fill(&rng, t->data, len);
		res = async ? async_rw(im.b, DIOLOOP_WRITE, t, pos) :
			      sync_rw(im.b, DIOLOOP_WRITE, t, pos);
		ck_assert_msg(res == (ssize_t)len,
			      "write %u (%zu bytes at %llu, page offset %zu): expected %zu, got %zd",
			      i, len, (unsigned long long)pos, off, len, res);
		memcpy(model + pos, t->data, len);
		tbuf_free(t);
	}
	check_file_matches(im.path, model, size);
	for (i = 0; i < n; i++) {
		size_t len = (size_t)test_rng_range(&rng, 1, 100000);
		uint64_t pos = test_rng_range(&rng, 0, size - len);
		size_t off = aligned ? 0 : (size_t)test_rng_range(&rng, 0, 4095);
		struct tbuf *t;
		ssize_t res;

		if (aligned) {
			len = (len + 4095) & ~(size_t)4095;
			pos &= ~(uint64_t)4095;
			if (pos + len > size)
				pos = size - len;
		}
		t = tbuf_new(len, off, aligned ? NULL : &rng);
		res = async ? async_rw(im.b, DIOLOOP_READ, t, pos) :
			      sync_rw(im.b, DIOLOOP_READ, t, pos);
		ck_assert_msg(res == (ssize_t)len,
			      "read %u: expected %zu bytes, got %zd", i, len,
			      res);
		ck_assert_msg(memcmp(t->data, model + pos, len) == 0,
			      "read %u (%zu bytes at %llu) returns what was written",
			      i, len, (unsigned long long)pos);
		tbuf_free(t);
	}
	img_teardown(&im);
	g_free(model);
}

START_TEST(test_raw_rw_aligned_sync)
{
	random_round_trips(true, false, test_iterations(100));
}
END_TEST

START_TEST(test_raw_rw_unaligned_sync)
{
	random_round_trips(false, false, test_iterations(200));
}
END_TEST

START_TEST(test_raw_rw_aligned_async)
{
	random_round_trips(true, true, test_iterations(100));
}
END_TEST

START_TEST(test_raw_rw_unaligned_async)
{
	random_round_trips(false, true, test_iterations(200));
}
END_TEST

START_TEST(test_raw_many_requests_in_flight)
{
	enum { N = 128 };
	struct areq *a = g_new0(struct areq, N);
	struct test_rng rng;
	struct img im;
	unsigned char *model = g_malloc(N * 4096);
	int i;

	test_rng_init(&rng, 3);
	img_setup(&im, N * 4096, 0);
	async_reset();
	for (i = 0; i < N; i++) {
		a[i].t = tbuf_new(4096, 0, NULL);
		test_rng_fill(&rng, a[i].t->data, 4096);
		memcpy(model + i * 4096, a[i].t->data, 4096);
	}
	/* Scattered order, all submitted before any is waited for. */
	for (i = 0; i < N; i++) {
		int k = (i * 37) % N;

		areq_submit(im.b, &a[k], DIOLOOP_WRITE, (uint64_t)k * 4096);
	}
	async_wait(N);
	for (i = 0; i < N; i++)
		ck_assert_msg(a[i].res == 4096 && atomic_load(&a[i].calls) == 1,
			      "write %d: expected 4096 once, got %zd x%d", i,
			      a[i].res, atomic_load(&a[i].calls));
	check_file_matches(im.path, model, N * 4096);

	async_reset();
	for (i = 0; i < N; i++) {
		memset(a[i].t->data, 0, 4096);
		areq_submit(im.b, &a[i], DIOLOOP_READ, (uint64_t)i * 4096);
	}
	async_wait(N);
	for (i = 0; i < N; i++) {
		ck_assert_msg(a[i].res == 4096, "read %d: expected 4096, got %zd",
			      i, a[i].res);
		ck_assert_msg(!memcmp(a[i].t->data, model + i * 4096, 4096),
			      "read %d returns block %d's data", i, i);
		tbuf_free(a[i].t);
	}
	img_teardown(&im);
	g_free(a);
	g_free(model);
}
END_TEST

START_TEST(test_raw_shared_aio_context)
{
	struct dioloop_aio *aio;
	char *dir = test_tmpdir();
	char *p1 = g_build_filename(dir, "a.img", NULL);
	char *p2 = g_build_filename(dir, "b.img", NULL);
	struct backend *b1, *b2;
	char buf[8192], back[8192];

	ck_assert_int_eq(dioloop_aio_new(64, "test-raw-aio", &aio), 0);
	make_image(p1, 1 * MiB);
	make_image(p2, 1 * MiB);
	b1 = open_raw(p1, 0, aio);
	b2 = open_raw(p2, 0, aio);
	ck_assert_msg(b1->aio == aio && b2->aio == aio,
		      "both images use the context they were given");
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b1, buf, sizeof(buf), 4096), 8192);
	memset(buf, 'y', sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b2, buf, sizeof(buf), 4096), 8192);
	backend_close(b1);
	backend_close(b2);
	ck_assert_int_eq(file_read(p1, back, sizeof(back), 4096), 8192);
	ck_assert_msg(back[0] == 'x' && back[8191] == 'x', "a.img has x");
	ck_assert_int_eq(file_read(p2, back, sizeof(back), 4096), 8192);
	ck_assert_msg(back[0] == 'y' && back[8191] == 'y', "b.img has y");
	dioloop_aio_free(aio);
	test_rmdir_r(dir);
	g_free(p1);
	g_free(p2);
	g_free(dir);
}
END_TEST

/* A completion callback that tries a synchronous request. */
static struct backend *edeadlk_b;
static ssize_t edeadlk_res;

static void edeadlk_complete(struct kiocb *iocb, ssize_t res)
{
	struct tbuf *t = tbuf_new(4096, 0, NULL);

	edeadlk_res = sync_rw(edeadlk_b, DIOLOOP_WRITE, t, 0);
	tbuf_free(t);
	areq_complete(iocb, res);
}

START_TEST(test_raw_sync_request_on_completion_thread_is_edeadlk)
{
	struct img im;
	struct areq a;
	ssize_t ret = 0;
	int i;

	img_setup(&im, 1 * MiB, 0);
	a.t = tbuf_new(4096, 0, NULL);
	a.iocb = (struct kiocb){
		.ki_rw = DIOLOOP_READ,
		.ki_pos = 0,
		.ki_iter = tbuf_iter(a.t),
		.ki_complete = edeadlk_complete,
		.ki_private = &a,
	};
	edeadlk_b = im.b;
	edeadlk_res = 0;
	async_reset();
	/* Make the read touch the disk, so it completes on the thread. */
	memset(a.t->data, 1, 4096);
	file_write(im.path, a.t->data, 4096, 0);
	/* Completing inline is allowed, if rare: try until it queues. */
	for (i = 0; i < 100; i++) {
		a.iocb.ki_iter = tbuf_iter(a.t);
		ret = backend_direct_IO_bvec(im.b, &a.iocb);
		if (ret == -EIOCBQUEUED)
			break;
		ck_assert_msg(ret == 4096, "inline read result 4096 (got %zd)", ret);
	}
	ck_assert_msg(ret == -EIOCBQUEUED, "an async read was queued");
	async_wait(1);
	ck_assert_msg(edeadlk_res == -EDEADLK,
		      "a synchronous write from the completion thread fails with -EDEADLK (got %zd)",
		      edeadlk_res);
	tbuf_free(a.t);
	img_teardown(&im);
}
END_TEST

/* ---- holes, EOF, size ---- */

START_TEST(test_raw_hole_reads_zeros_and_stays_sparse)
{
	const size_t size = 16 * MiB;
	struct img im;
	unsigned char *data = g_malloc(64 * KiB), *buf = g_malloc(size);
	struct stat before, after;
	struct backend_info info;
	struct test_rng rng;
	ssize_t n;

	test_rng_init(&rng, 4);
	test_rng_fill(&rng, data, 64 * KiB);
	img_setup(&im, size, ~0u);
	file_write(im.path, data, 64 * KiB, 4 * MiB);
	im.b = open_raw(im.path, 0, NULL);
	before = file_stat(im.path);
	n = backend_pread(im.b, buf, size, 0);
	ck_assert_msg(n == (ssize_t)size, "read all 16 MiB (got %zd)", n);
	ck_assert_msg(is_zero(buf, 4 * MiB), "the hole before the data reads as zeros");
	ck_assert_msg(!memcmp(buf + 4 * MiB, data, 64 * KiB),
		      "the data between the holes reads back");
	ck_assert_msg(is_zero(buf + 4 * MiB + 64 * KiB, size - 4 * MiB - 64 * KiB),
		      "the hole after the data reads as zeros");
	after = file_stat(im.path);
	ck_assert_msg(after.st_blocks == before.st_blocks &&
		      (uint64_t)after.st_blocks * 512 < size / 2,
		      "the file stays sparse (%lld blocks before, %lld after)",
		      (long long)before.st_blocks, (long long)after.st_blocks);
	ck_assert_msg(backend_info(im.b, &info) == 0 && info.engine.holes > 0,
		      "holes were zero-filled without I/O");
	img_teardown(&im);
	g_free(data);
	g_free(buf);
}
END_TEST

START_TEST(test_raw_short_read_at_eof)
{
	const uint64_t size = 10 * 4096 + 1024;
	struct img im;
	struct tbuf *t;
	unsigned char pattern[1024];
	ssize_t res;

	img_setup(&im, size, ~0u);
	memset(pattern, 0xc3, sizeof(pattern));
	file_write(im.path, pattern, sizeof(pattern), size - 1024);
	im.b = open_raw(im.path, 0, NULL);
	ck_assert_msg(backend_get_size(im.b) == (int64_t)size,
		      "size %llu (a multiple of 512)", (unsigned long long)size);
	t = tbuf_new(8192, 0, NULL);
	res = sync_rw(im.b, DIOLOOP_READ, t, size - 1024);
	ck_assert_msg(res == 1024, "read crossing EOF is short: expected 1024, got %zd",
		      res);
	ck_assert_msg(!memcmp(t->data, pattern, 1024), "the short read has the data");
	res = async_rw(im.b, DIOLOOP_READ, t, size - 1024);
	ck_assert_msg(res == 1024, "async read crossing EOF: expected 1024, got %zd",
		      res);
	res = sync_rw(im.b, DIOLOOP_READ, t, size);
	ck_assert_msg(res == 0, "read at EOF: expected 0, got %zd", res);
	res = async_rw(im.b, DIOLOOP_READ, t, size + 4096);
	ck_assert_msg(res == 0, "async read past EOF: expected 0, got %zd", res);
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_write_past_eof_is_enospc)
{
	struct img im;
	struct tbuf *t = tbuf_new(8192, 0, NULL);
	ssize_t res;

	img_setup(&im, 64 * KiB, 0);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, 64 * KiB);
	ck_assert_msg(res == -ENOSPC, "write at EOF: expected -ENOSPC, got %zd", res);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, 60 * KiB);
	ck_assert_msg(res == -ENOSPC, "write crossing EOF: expected -ENOSPC, got %zd",
		      res);
	res = async_rw(im.b, DIOLOOP_WRITE, t, 1 * MiB);
	ck_assert_msg(res == -ENOSPC, "async write past EOF: expected -ENOSPC, got %zd",
		      res);
	ck_assert_msg(file_stat(im.path).st_size == 64 * KiB,
		      "the file keeps its size");
	ck_assert_msg(backend_get_size(im.b) == 64 * KiB, "the image keeps its size");
	ck_assert_msg(!file_exists(im.record), "no orphan record for refused writes");
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

/* The host file system's answer to a size: 0 or -errno of ftruncate on a
 * scratch file next to path (never the image). */
static int host_truncate(const char *path, uint64_t size)
{
	char *scratch = g_strconcat(path, ".scratch", NULL);
	int fd = open(scratch, O_RDWR | O_CREAT | O_TRUNC, 0600), ret = 0;

	ck_assert_msg(fd >= 0, "create %s", scratch);
	if (ftruncate(fd, (off_t)size) < 0)
		ret = -errno;
	close(fd);
	unlink(scratch);
	g_free(scratch);
	return ret;
}

START_TEST(test_raw_max_size_is_the_host_limit_and_checked_first)
{
	const uint64_t off_max = INT64_MAX;
	struct img im;
	struct tbuf *t = tbuf_new(4096, 0, NULL), *one = tbuf_new(1, 0, NULL);
	uint64_t max;
	ssize_t res;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_GROWABLE);
	max = im.b->limits.max_size;
	ck_assert_msg(max > 64 * KiB && max <= off_max &&
		      max % im.b->limits.block_size == 0,
		      "max_size %llu: a multiple of the block size up to INT64_MAX",
		      (unsigned long long)max);
	ck_assert_msg(host_truncate(im.path, max) == 0,
		      "the host holds a file of max_size (%llu)",
		      (unsigned long long)max);
	if (max <= off_max - 4096)
		ck_assert_msg(host_truncate(im.path, max + 4096) == -EFBIG,
			      "the host refuses a file 4 KiB past max_size");

	res = sync_rw(im.b, DIOLOOP_WRITE, t, max - 4095);
	ck_assert_msg(res == -EFBIG, "write ending 1 byte past max_size: expected -EFBIG, got %zd",
		      res);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, off_max - 4096);
	ck_assert_msg(res == (max == off_max ? 4096 : -EFBIG),
		      "write ending at INT64_MAX: got %zd", res);
	res = sync_rw(im.b, DIOLOOP_WRITE, one, off_max - 1);
	ck_assert_msg(res == -EFBIG, "1 byte at INT64_MAX - 1: expected -EFBIG, got %zd",
		      res);
	res = async_rw(im.b, DIOLOOP_WRITE, t, off_max - 1);
	ck_assert_msg(res == -EFBIG, "async write across 2^63: expected -EFBIG, got %zd",
		      res);
	ck_assert_msg(backend_resize(im.b, off_max) == -EFBIG,
		      "resize to INT64_MAX: -EFBIG");
	if (max <= off_max - 4096)
		ck_assert_msg(backend_resize(im.b, max + 4096) == -EFBIG,
			      "resize to 4 KiB past max_size: -EFBIG");
	ck_assert_msg(!file_exists(im.record),
		      "no orphan record: the writes were refused before anything changed");
	ck_assert_msg(backend_get_size(im.b) == 64 * KiB &&
		      file_stat(im.path).st_size == 64 * KiB,
		      "the image keeps its size");

	/* The largest size itself is not refused. */
	res = sync_rw(im.b, DIOLOOP_WRITE, t, max - 4096);
	ck_assert_msg(res == 4096, "write ending at max_size: expected 4096, got %zd",
		      res);
	ck_assert_msg(backend_get_size(im.b) == (int64_t)max,
		      "the image grew to max_size");
	tbuf_free(t);
	tbuf_free(one);
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_unaligned_size_is_rounded_down)
{
	const uint64_t file_size = 3 * 4096 + 700;
	struct img im;
	uint64_t ra, want;
	struct tbuf *t = tbuf_new(4096, 0, NULL);
	unsigned char tail[700];
	ssize_t res;

	img_setup(&im, file_size, ~0u);
	memset(tail, 0x77, sizeof(tail));
	file_write(im.path, tail, sizeof(tail), 3 * 4096);
	im.b = open_raw(im.path, 0, NULL);
	ra = im.b->limits.request_alignment;
	want = file_size / ra * ra;
	ck_assert_msg(backend_get_size(im.b) == (int64_t)want,
		      "size rounded down to %llu: expected %llu, got %lld",
		      (unsigned long long)ra, (unsigned long long)want,
		      (long long)backend_get_size(im.b));
	res = sync_rw(im.b, DIOLOOP_READ, t, 3 * 4096);
	ck_assert_msg(res == (ssize_t)(want - 3 * 4096),
		      "read of the last block stops at the rounded size: expected %llu, got %zd",
		      (unsigned long long)(want - 3 * 4096), res);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, want);
	ck_assert_msg(res == -ENOSPC, "no write past the rounded size (got %zd)", res);
	backend_close(im.b);
	im.b = NULL;
	ck_assert_msg(file_stat(im.path).st_size == (off_t)file_size,
		      "the ignored bytes stay in the file");
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

/* ---- the extension protocol ---- */

START_TEST(test_raw_growable_write_extends)
{
	struct img im;
	struct tbuf *t;
	uint64_t ra, pos = 64 * KiB + 100, want;
	unsigned char back[5000];
	ssize_t res;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_GROWABLE);
	ra = im.b->limits.request_alignment;
	t = tbuf_new(5000, 123, NULL);
	memset(t->data, 0xe1, 5000);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, pos);
	ck_assert_msg(res == 5000, "extending write: expected 5000, got %zd", res);
	want = (pos + 5000 + ra - 1) / ra * ra;
	ck_assert_msg(backend_get_size(im.b) == (int64_t)want,
		      "size grows to the end rounded up to %llu: expected %llu, got %lld",
		      (unsigned long long)ra, (unsigned long long)want,
		      (long long)backend_get_size(im.b));
	ck_assert_msg(file_read(im.path, back, 5000, pos) == 5000 &&
		      !memcmp(back, t->data, 5000),
		      "the extension's data is in the file");
	ck_assert_msg(file_exists(im.record),
		      "the orphan record stays until the next flush");
	ck_assert_int_eq(atomic_load(&hook_counts[RAW_TEST_ORPHAN_DURABLE]), 1);
	ck_assert_msg(backend_flush(im.b) == 0, "flush succeeds");
	ck_assert_msg(!file_exists(im.record), "flush removed the orphan record");
	/* Within the new size: no record needed. */
	res = sync_rw(im.b, DIOLOOP_WRITE, t, pos);
	ck_assert_msg(res == 5000 && !file_exists(im.record),
		      "a write inside the grown size needs no record");
	/* Extend again, close without flush: close removes the record. */
	res = async_rw(im.b, DIOLOOP_WRITE, t, want + 4096);
	ck_assert_msg(res == 5000, "async extending write: expected 5000, got %zd",
		      res);
	backend_close(im.b);
	im.b = NULL;
	ck_assert_msg(!file_exists(im.record), "close removed the orphan record");
	im.b = open_raw(im.path, 0, NULL);
	ck_assert_msg(backend_get_size(im.b) ==
		      (int64_t)((want + 4096 + 5000 + ra - 1) / ra * ra),
		      "the grown size survives reopening");
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_concurrent_extending_writes_share_one_record)
{
	enum { N = 32 };
	struct areq *a = g_new0(struct areq, N);
	unsigned char *model = g_malloc0(64 * KiB + N * 8192);
	struct img im;
	int i;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_GROWABLE);
	async_reset();
	for (i = 0; i < N; i++) {
		a[i].t = tbuf_new(8192, 0, NULL);
		memset(a[i].t->data, 'A' + i % 26, 8192);
		memcpy(model + 64 * KiB + i * 8192, a[i].t->data, 8192);
	}
	for (i = 0; i < N; i++)
		areq_submit(im.b, &a[i], DIOLOOP_WRITE,
			    64 * KiB + (uint64_t)i * 8192);
	async_wait(N);
	for (i = 0; i < N; i++) {
		ck_assert_msg(a[i].res == 8192 && atomic_load(&a[i].calls) == 1,
			      "extending write %d: expected 8192 once, got %zd x%d",
			      i, a[i].res, atomic_load(&a[i].calls));
		tbuf_free(a[i].t);
	}
	ck_assert_msg(backend_get_size(im.b) == (int64_t)(64 * KiB + N * 8192),
		      "size covers every extending write");
	ck_assert_msg(atomic_load(&hook_counts[RAW_TEST_ORPHAN_DURABLE]) == 1,
		      "one record for all the writes (created %d times)",
		      atomic_load(&hook_counts[RAW_TEST_ORPHAN_DURABLE]));
	check_file_matches(im.path, model, 64 * KiB + N * 8192);
	ck_assert_int_eq(backend_flush(im.b), 0);
	ck_assert_msg(!file_exists(im.record), "flush removed the shared record");
	img_teardown(&im);
	g_free(a);
	g_free(model);
}
END_TEST

START_TEST(test_raw_sync_image_extension_is_durable_at_completion)
{
	struct img im;
	struct tbuf *t = tbuf_new(4096, 0, NULL);
	ssize_t res;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_GROWABLE | BACKEND_OPEN_SYNC);
	memset(t->data, 0x42, 4096);
	res = async_rw(im.b, DIOLOOP_WRITE, t, 64 * KiB);
	ck_assert_msg(res == 4096, "extending write: expected 4096, got %zd", res);
	ck_assert_msg(atomic_load(&hook_counts[RAW_TEST_ORPHAN_DURABLE]) == 1,
		      "the record was made durable first");
	ck_assert_msg(!file_exists(im.record),
		      "on a sync image the record is gone when the write completes");
	ck_assert_msg(backend_get_size(im.b) == 68 * KiB, "size grew to 68 KiB");
	res = sync_rw(im.b, DIOLOOP_WRITE, t, 68 * KiB);
	ck_assert_msg(res == 4096 && !file_exists(im.record),
		      "sync kiocb too: expected 4096 and no record, got %zd", res);
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

/* A gate the EXTEND_DONE hook waits at (on the completion thread). */
static GMutex gate_lock;
static GCond gate_cond;
static bool gate_armed, gate_arrived, gate_open;

static void gate_hook(enum raw_test_point point)
{
	counting_hook(point);
	if (point != RAW_TEST_EXTEND_DONE)
		return;
	g_mutex_lock(&gate_lock);
	if (gate_armed) {
		gate_arrived = true;
		g_cond_broadcast(&gate_cond);
		while (!gate_open)
			g_cond_wait(&gate_cond, &gate_lock);
	}
	g_mutex_unlock(&gate_lock);
}

/* The size recorded in the image's orphan record (or 0 if none). */
static uint64_t record_size(const struct img *im)
{
	unsigned char rec[64];
	uint64_t size = 0;
	ssize_t n = file_read(im->record, rec, sizeof(rec), 0);

	if (n < 0)
		return 0;
	uint64_t dev, ino;
	ck_assert_msg(orphan_decode(rec, (size_t)n, &size, &dev, &ino) == 0,
		      "the orphan record decodes");
	ck_assert_msg(dev == (uint64_t)file_stat(im->path).st_dev &&
		      ino == (uint64_t)file_stat(im->path).st_ino,
		      "the orphan record names its image's dev:ino");
	return size;
}

/* Plant rec as the image's orphan record, as the daemon would have left
 * it (mode 0600, owned by us). */
static void plant_record(const struct img *im, const void *rec, size_t len)
{
	make_image(im->record, 0);
	ck_assert_msg(chmod(im->record, 0600) == 0, "chmod the record");
	file_write(im->record, rec, len, 0);
}

/* Encode a record of size for im's image. */
static void encode_record(const struct img *im, void *rec, uint64_t size)
{
	struct stat st = file_stat(im->path);

	orphan_encode(rec, size, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
}

struct submit_args {
	struct backend *b;
	struct areq *a;
	uint64_t pos;
};

static gpointer submit_thread(gpointer p)
{
	struct submit_args *s = p;

	areq_submit(s->b, s->a, DIOLOOP_WRITE, s->pos);
	return NULL;
}

START_TEST(test_raw_flush_rewrites_record_while_extension_in_flight)
{
	GThread *submitter;
	struct img im;
	struct tbuf *t = tbuf_new(64 * KiB, 0, NULL);
	struct areq a = { .t = t };
	ssize_t res;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_GROWABLE);
	raw_test_hook = gate_hook;
	memset(t->data, 0x31, 64 * KiB);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, 64 * KiB);
	ck_assert_msg(res == 64 * KiB, "first extending write: expected 64 KiB, got %zd",
		      res);
	ck_assert_msg(record_size(&im) == 64 * KiB,
		      "the record holds the size from before the extension (64 KiB)");

	/* A second extension, held after its I/O, before it completes. */
	g_mutex_lock(&gate_lock);
	gate_armed = true;
	gate_arrived = gate_open = false;
	g_mutex_unlock(&gate_lock);
	async_reset();
	/* From another thread: if the write completes inline, the hook
	 * holds that thread, not this one. */
	submitter = g_thread_new("submit", submit_thread,
				 &(struct submit_args){ im.b, &a, 128 * KiB });
	g_mutex_lock(&gate_lock);
	while (!gate_arrived)
		g_cond_wait(&gate_cond, &gate_lock);
	g_mutex_unlock(&gate_lock);

	ck_assert_msg(backend_flush(im.b) == 0, "flush with an extension in flight");
	ck_assert_msg(record_size(&im) == 128 * KiB,
		      "flush rewrote the record to the flushed size 128 KiB (got %llu)",
		      (unsigned long long)record_size(&im));

	g_mutex_lock(&gate_lock);
	gate_open = true;
	gate_armed = false;
	g_cond_broadcast(&gate_cond);
	g_mutex_unlock(&gate_lock);
	async_wait(1);
	g_thread_join(submitter);
	ck_assert_msg(a.res == 64 * KiB, "the held write completes (got %zd)", a.res);
	ck_assert_msg(backend_get_size(im.b) == 192 * KiB, "size 192 KiB");
	ck_assert_msg(file_exists(im.record), "the record stays until the next flush");
	ck_assert_int_eq(backend_flush(im.b), 0);
	ck_assert_msg(!file_exists(im.record), "the next flush removed it");
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

/* Flushes in a loop until told to stop (worker-thread work). */
struct flusher {
	struct backend *b;
	atomic_bool stop;
	atomic_int flushes, errors;
};

static gpointer flusher_thread(gpointer p)
{
	struct flusher *f = p;

	while (!atomic_load(&f->stop)) {
		if (backend_flush(f->b) != 0)
			atomic_fetch_add(&f->errors, 1);
		atomic_fetch_add(&f->flushes, 1);
		g_usleep(200);
	}
	return NULL;
}

/* Blocks written in random order in batches of async writes, most of
 * them extending, while another thread flushes: no hang, every write
 * lands, the size covers them all, no record is left. */
static void extension_stress(unsigned int flags)
{
	const int batch = 32;
	int n = ((int)test_iterations(512) + batch - 1) / batch * batch;
	struct areq *a = g_new0(struct areq, batch);
	unsigned char *model = g_malloc0((size_t)n * 4096);
	struct flusher f = { 0 };
	struct test_rng rng;
	GThread *th;
	struct img im;
	int i, j, *order;

	test_rng_init(&rng, 8 + flags);
	order = g_new(int, n);
	for (i = 0; i < n; i++)
		order[i] = i;
	/* Mostly ascending (extending), locally shuffled. */
	for (i = 0; i < n; i++) {
		int k = (int)test_rng_range(&rng, (uint64_t)i,
					    (uint64_t)MIN(n - 1, i + 48));
		int tmp = order[i];

		order[i] = order[k];
		order[k] = tmp;
	}
	img_setup(&im, 0, BACKEND_OPEN_GROWABLE | flags);
	for (i = 0; i < batch; i++)
		a[i].t = tbuf_new(4096, 0, NULL);
	f.b = im.b;
	th = g_thread_new("flusher", flusher_thread, &f);
	for (i = 0; i < n; i += batch) {
		async_reset();
		for (j = 0; j < batch; j++) {
			uint64_t blk = (uint64_t)order[i + j];

			test_rng_fill(&rng, a[j].t->data, 4096);
			memcpy(model + blk * 4096, a[j].t->data, 4096);
			areq_submit(im.b, &a[j], DIOLOOP_WRITE, blk * 4096);
		}
		async_wait(batch);
		for (j = 0; j < batch; j++)
			ck_assert_msg(a[j].res == 4096 &&
				      atomic_load(&a[j].calls) == 1,
				      "write of block %d: expected 4096 once, got %zd x%d",
				      order[i + j], a[j].res,
				      atomic_load(&a[j].calls));
	}
	atomic_store(&f.stop, true);
	g_thread_join(th);
	ck_assert_msg(atomic_load(&f.errors) == 0, "every flush succeeded");
	ck_assert_msg(backend_get_size(im.b) == (int64_t)n * 4096,
		      "size covers every block (%lld, expected %lld)",
		      (long long)backend_get_size(im.b), (long long)n * 4096);
	ck_assert_int_eq(backend_flush(im.b), 0);
	ck_assert_msg(!file_exists(im.record), "no record after the last flush");
	check_file_matches(im.path, model, (size_t)n * 4096);
	for (i = 0; i < batch; i++)
		tbuf_free(a[i].t);
	img_teardown(&im);
	g_free(a);
	g_free(order);
	g_free(model);
}

START_TEST(test_raw_extension_stress_with_concurrent_flush)
{
	extension_stress(0);
}
END_TEST

START_TEST(test_raw_extension_stress_sync_image)
{
	extension_stress(BACKEND_OPEN_SYNC);
}
END_TEST

/*
 * Run fn in a forked child; returns its wait status.  With kill_on_ask,
 * the child may ask (through crash_fd) to be killed: the parent sends it
 * SIGKILL, as kill -9 of a daemon would.
 */
static int run_child(void (*fn)(void *), void *arg, bool kill_on_ask)
{
	int pfd[2], status = 0;
	pid_t pid, w;

	ck_assert_msg(pipe(pfd) == 0, "pipe: %s", g_strerror(errno));
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", g_strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		crash_fd = kill_on_ask ? pfd[1] : -1;
		fn(arg);
		_exit(0);
	}
	close(pfd[1]);
	if (kill_on_ask) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		char c;

		/* EOF (the child exited) or a request; 120 s at most. */
		if (poll(&p, 1, 120000) == 1 && read(pfd[0], &c, 1) == 1)
			kill(pid, SIGKILL);
	}
	close(pfd[0]);
	do {
		w = waitpid(pid, &status, 0);
	} while (w < 0 && errno == EINTR);
	ck_assert_msg(w == pid, "waitpid: %s", g_strerror(errno));
	return status;
}

#define CHILD_CHECK(cond, ...)                                         \
	do {                                                           \
		if (!(cond)) {                                         \
			fprintf(stderr, "child: " __VA_ARGS__);        \
			fprintf(stderr, "\n");                         \
			_exit(1);                                      \
		}                                                      \
	} while (0)

struct crash_args {
	const char *path;
	int point;
};

/* Child: open growable, extend, get killed at the hook point. */
static void crash_child(void *p)
{
	struct crash_args *c = p;
	struct backend_open_args args = {
		.path = c->path,
		.flags = BACKEND_OPEN_GROWABLE,
	};
	struct backend *b;
	char *buf;

	hooks_reset();
	crash_point = c->point;
	CHILD_CHECK(backend_open("raw", &args, &b) == 0, "open failed");
	buf = g_malloc(128 * KiB);
	memset(buf, 0xee, 128 * KiB);
	backend_pwrite(b, buf, 128 * KiB, 64 * KiB);
	CHILD_CHECK(false, "the hook at point %d did not kill the child",
		    c->point);
}

/* The image had 64 KiB of data; a child died mid-extension at point. */
static void crash_mid_extension(int point)
{
	struct img im;
	unsigned char *data = g_malloc(64 * KiB), *back = g_malloc(64 * KiB);
	struct crash_args c;
	struct test_rng rng;
	struct stat st;
	int status;

	test_rng_init(&rng, 5);
	test_rng_fill(&rng, data, 64 * KiB);
	img_setup(&im, 64 * KiB, ~0u);
	file_write(im.path, data, 64 * KiB, 0);
	c.path = im.path;
	c.point = point;
	status = run_child(crash_child, &c, true);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		      "the child was killed at the hook (status 0x%x)", status);
	ck_assert_msg(file_exists(im.record),
		      "the orphan record survived the crash");
	st = file_stat(im.path);
	if (point == RAW_TEST_EXTEND_DONE)
		ck_assert_msg(st.st_size == 192 * KiB,
			      "the extending write reached the file (size %lld, expected 192 KiB)",
			      (long long)st.st_size);
	else
		ck_assert_msg(st.st_size == 64 * KiB,
			      "no extending write was issued (size %lld)",
			      (long long)st.st_size);

	hooks_reset();
	im.b = open_raw(im.path, 0, NULL);
	ck_assert_msg(backend_get_size(im.b) == 64 * KiB,
		      "recovery truncated the image back to 64 KiB (got %lld)",
		      (long long)backend_get_size(im.b));
	ck_assert_msg(file_stat(im.path).st_size == 64 * KiB,
		      "the file itself is 64 KiB again");
	ck_assert_msg(!file_exists(im.record), "recovery removed the record");
	ck_assert_msg(backend_pread(im.b, back, 64 * KiB, 0) == 64 * KiB &&
		      !memcmp(back, data, 64 * KiB),
		      "the data from before the crash is intact");
	img_teardown(&im);
	g_free(data);
	g_free(back);
}

START_TEST(test_raw_crash_after_orphan_record_is_durable)
{
	crash_mid_extension(RAW_TEST_ORPHAN_DURABLE);
}
END_TEST

START_TEST(test_raw_crash_before_extending_write_completes)
{
	crash_mid_extension(RAW_TEST_EXTEND_DONE);
}
END_TEST

START_TEST(test_raw_torn_record_is_removed_without_truncating)
{
	static const unsigned char garbage[10] = "DLORPH\x01\x02";
	unsigned char rec[ORPHAN_RECORD_LEN];
	struct img im;
	int round;

	for (round = 0; round < 2; round++) {
		img_setup(&im, 72 * KiB, ~0u);
		if (round == 0) {
			plant_record(&im, garbage, sizeof(garbage));
		} else {
			encode_record(&im, rec, 8 * KiB);
			rec[20] ^= 0x10;	/* a flipped bit: bad CRC */
			plant_record(&im, rec, sizeof(rec));
		}
		im.b = open_raw(im.path, 0, NULL);
		ck_assert_msg(backend_get_size(im.b) == 72 * KiB,
			      "a torn record (%s) does not truncate: expected 72 KiB, got %lld",
			      round ? "bad CRC" : "short",
			      (long long)backend_get_size(im.b));
		ck_assert_msg(!file_exists(im.record),
			      "the torn record (%s) was removed",
			      round ? "bad CRC" : "short");
		img_teardown(&im);
	}
}
END_TEST

START_TEST(test_raw_record_on_readonly_open_limits_size)
{
	unsigned char rec[ORPHAN_RECORD_LEN];
	struct img im;

	img_setup(&im, 128 * KiB, ~0u);
	encode_record(&im, rec, 64 * KiB);
	plant_record(&im, rec, sizeof(rec));
	im.b = open_raw(im.path, BACKEND_OPEN_RDONLY, NULL);
	ck_assert_msg(backend_get_size(im.b) == 64 * KiB,
		      "read-only: serves the recorded 64 KiB (got %lld)",
		      (long long)backend_get_size(im.b));
	backend_close(im.b);
	im.b = NULL;
	ck_assert_msg(file_exists(im.record) &&
		      file_stat(im.path).st_size == 128 * KiB,
		      "read-only open changed nothing");
	im.b = open_raw(im.path, 0, NULL);
	ck_assert_msg(backend_get_size(im.b) == 64 * KiB &&
		      file_stat(im.path).st_size == 64 * KiB &&
		      !file_exists(im.record),
		      "read-write open truncated to 64 KiB and removed the record");
	img_teardown(&im);
}
END_TEST

/* A format's store (BACKEND_OPEN_STORE): a record named like the
 * store's would-be sidecar is not raw's to act on, and the store never
 * makes one; its size changes only by resize. */
START_TEST(test_raw_store_ignores_and_makes_no_orphan_record)
{
	unsigned char rec[ORPHAN_RECORD_LEN];
	struct img im;
	char buf[4096];

	img_setup(&im, 128 * KiB, ~0u);
	encode_record(&im, rec, 64 * KiB);
	plant_record(&im, rec, sizeof(rec));
	im.b = open_raw(im.path, BACKEND_OPEN_STORE, NULL);
	ck_assert_msg(backend_get_size(im.b) == 128 * KiB &&
		      file_stat(im.path).st_size == 128 * KiB &&
		      file_exists(im.record),
		      "a store opens at its file's size and leaves the record alone (size %lld)",
		      (long long)backend_get_size(im.b));
	ck_assert_msg(unlink(im.record) == 0, "remove the planted record");
	memset(buf, 0x5a, sizeof(buf));
	ck_assert_msg(backend_pwrite(im.b, buf, sizeof(buf), 128 * KiB) == -ENOSPC,
		      "a store refuses writes past its size");
	ck_assert_msg(backend_resize(im.b, 256 * KiB) == 0 &&
		      backend_pwrite(im.b, buf, sizeof(buf), 128 * KiB) ==
		      (ssize_t)sizeof(buf) && backend_flush(im.b) == 0,
		      "after a resize the write fits");
	backend_close(im.b);
	im.b = NULL;
	ck_assert_msg(!file_exists(im.record) &&
		      file_stat(im.path).st_size == 256 * KiB,
		      "no record was made; the file keeps its size");
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_rdonly_refuses_writes)
{
	struct img im;
	struct tbuf *t = tbuf_new(4096, 0, NULL);
	struct kiocb iocb = {
		.ki_rw = DIOLOOP_WRITE,
		.ki_pos = 0,
		.ki_iter = tbuf_iter(t),
	};
	ssize_t res;

	img_setup(&im, 64 * KiB, BACKEND_OPEN_RDONLY | BACKEND_OPEN_GROWABLE);
	res = sync_rw(im.b, DIOLOOP_WRITE, t, 0);
	ck_assert_msg(res == -EROFS, "write through the core: expected -EROFS, got %zd",
		      res);
	/* The core is the one check; under it the fd is O_RDONLY. */
	res = raw_backend_ops.direct_IO_bvec(im.b, &iocb);
	ck_assert_msg(res < 0, "write through the op fails, got %zd", res);
	ck_assert_msg(backend_discard(im.b, 0, 4096) == -EROFS,
		      "discard: expected -EROFS");
	ck_assert_msg(backend_write_zeroes(im.b, 0, 4096) == -EROFS,
		      "write_zeroes: expected -EROFS");
	ck_assert_msg(backend_resize(im.b, 128 * KiB) == -EROFS,
		      "resize: expected -EROFS");
	res = sync_rw(im.b, DIOLOOP_READ, t, 0);
	ck_assert_msg(res == 4096, "reads work: expected 4096, got %zd", res);
	ck_assert_int_eq(backend_flush(im.b), 0);
	tbuf_free(t);
	img_teardown(&im);
}
END_TEST

/* ---- discard, write_zeroes, map, flush, resize ---- */

/* A 1 MiB image full of pattern bytes, opened. */
static unsigned char *img_filled(struct img *im)
{
	unsigned char *model = g_malloc(1 * MiB);
	struct test_rng rng;

	test_rng_init(&rng, 6);
	test_rng_fill(&rng, model, 1 * MiB);
	img_setup(im, 1 * MiB, ~0u);
	file_write(im->path, model, 1 * MiB, 0);
	im->b = open_raw(im->path, 0, NULL);
	return model;
}

START_TEST(test_raw_discard_leaves_hole)
{
	struct img im;
	unsigned char *model = img_filled(&im);
	unsigned char *back = g_malloc(1 * MiB);
	struct backend_extent ext;
	int fd;

	ck_assert_int_eq(backend_discard(im.b, 64 * KiB, 128 * KiB), 0);
	memset(model + 64 * KiB, 0, 128 * KiB);
	ck_assert_int_eq(backend_discard(im.b, 300000, 20000), 0);
	memset(model + 300000, 0, 20000);
	ck_assert_int_eq(backend_discard(im.b, 500001, 1000), 0);
	memset(model + 500001, 0, 1000);

	fd = open(im.path, O_RDONLY);
	ck_assert_msg(lseek(fd, 64 * KiB, SEEK_HOLE) == 64 * KiB,
		      "SEEK_HOLE finds the hole at 64 KiB");
	ck_assert_msg(lseek(fd, 64 * KiB, SEEK_DATA) == 192 * KiB,
		      "data resumes at 192 KiB");
	ck_assert_msg(lseek(fd, 300000, SEEK_HOLE) == 303104,
		      "the aligned middle of an unaligned discard is a hole");
	close(fd);
	ck_assert_int_eq(backend_map(im.b, 64 * KiB, 1 * MiB, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 128 * KiB,
		      "map: a 128 KiB hole at 64 KiB (got %s %llu)",
		      ext.hole ? "hole" : "data", (unsigned long long)ext.len);
	ck_assert_msg(backend_pread(im.b, back, 1 * MiB, 0) == (ssize_t)MiB &&
		      !memcmp(back, model, 1 * MiB),
		      "discarded ranges read as zeros, the rest is intact");
	check_file_matches(im.path, model, 1 * MiB);
	img_teardown(&im);
	g_free(model);
	g_free(back);
}
END_TEST

static void write_zeroes_check(struct img *im, unsigned char *model)
{
	unsigned char *back = g_malloc(1 * MiB);

	ck_assert_int_eq(backend_write_zeroes(im->b, 128 * KiB, 64 * KiB), 0);
	memset(model + 128 * KiB, 0, 64 * KiB);
	ck_assert_int_eq(backend_write_zeroes(im->b, 400007, 70001), 0);
	memset(model + 400007, 0, 70001);
	ck_assert_int_eq(backend_write_zeroes(im->b, 700000, 17), 0);
	memset(model + 700000, 0, 17);
	ck_assert_msg(backend_pread(im->b, back, 1 * MiB, 0) == (ssize_t)MiB &&
		      !memcmp(back, model, 1 * MiB),
		      "zeroed ranges read as zeros, the rest is intact");
	check_file_matches(im->path, model, 1 * MiB);
	g_free(back);
}

START_TEST(test_raw_write_zeroes_reads_zeros)
{
	struct img im;
	unsigned char *model = img_filled(&im);

	write_zeroes_check(&im, model);
	img_teardown(&im);
	g_free(model);
}
END_TEST

/* Holes zero-filled without I/O so far (engine statistics). */
static uint64_t holes_seen(struct backend *b)
{
	struct backend_info info;

	ck_assert_int_eq(backend_info(b, &info), 0);
	return info.engine.holes;
}

/*
 * A fully allocated image's reads skip the hole lookups; a discard, a
 * resize or an extending write can make a hole, and from then on reads
 * find holes again (zero-filled without I/O).
 */
START_TEST(test_raw_full_image_finds_the_holes_it_makes)
{
	struct img im;
	unsigned char *model = img_filled(&im);
	unsigned char *back = g_malloc(2 * MiB);
	struct tbuf *t;
	uint64_t h;

	ck_assert_msg(backend_pread(im.b, back, 1 * MiB, 0) == (ssize_t)MiB &&
		      !memcmp(back, model, 1 * MiB), "the image reads back");
	ck_assert_int_eq(holes_seen(im.b), 0);
	ck_assert_int_eq(backend_discard(im.b, 256 * KiB, 128 * KiB), 0);
	ck_assert_msg(backend_pread(im.b, back, 128 * KiB, 256 * KiB) ==
		      (ssize_t)(128 * KiB) && is_zero(back, 128 * KiB),
		      "the discarded range reads as zeros");
	h = holes_seen(im.b);
	ck_assert_msg(h > 0, "the read after a discard found its hole");
	img_teardown(&im);

	g_free(img_filled(&im));
	ck_assert_int_eq(backend_resize(im.b, 2 * MiB), 0);
	ck_assert_msg(backend_pread(im.b, back, 1 * MiB, 1 * MiB) ==
		      (ssize_t)MiB && is_zero(back, 1 * MiB),
		      "the grown range reads as zeros");
	ck_assert_msg(holes_seen(im.b) > 0,
		      "the read after a resize found the new hole");
	img_teardown(&im);

	img_setup(&im, 64 * KiB, ~0u);
	file_write(im.path, model, 64 * KiB, 0);
	im.b = open_raw(im.path, BACKEND_OPEN_GROWABLE, NULL);
	t = tbuf_new(4096, 7, NULL);
	ck_assert_int_eq(sync_rw(im.b, DIOLOOP_WRITE, t, 512 * KiB), 4096);
	ck_assert_msg(backend_pread(im.b, back, 448 * KiB, 64 * KiB) ==
		      (ssize_t)(448 * KiB) && is_zero(back, 448 * KiB),
		      "the gap an extending write left reads as zeros");
	ck_assert_msg(holes_seen(im.b) > 0,
		      "the read after an extending write found the gap");
	tbuf_free(t);
	img_teardown(&im);
	g_free(model);
	g_free(back);
}
END_TEST

START_TEST(test_raw_map_reports_data_and_holes)
{
	struct img im;
	unsigned char data[8192];
	struct backend_extent ext;

	memset(data, 9, sizeof(data));
	img_setup(&im, 2 * MiB, ~0u);
	file_write(im.path, data, 4096, 0);
	file_write(im.path, data, 8192, 1 * MiB);
	im.b = open_raw(im.path, 0, NULL);
	ck_assert_int_eq(backend_map(im.b, 0, 2 * MiB, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == 4096,
		      "data [0, 4 KiB) (got %s %llu)", ext.hole ? "hole" : "data",
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(im.b, 4096, 2 * MiB, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 1 * MiB - 4096,
		      "hole [4 KiB, 1 MiB) (got %s %llu)",
		      ext.hole ? "hole" : "data", (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(im.b, 1 * MiB, 2 * MiB, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == 8192,
		      "data [1 MiB, +8 KiB) (got %s %llu)",
		      ext.hole ? "hole" : "data", (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(im.b, 1 * MiB + 8192, 2 * MiB, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 1 * MiB - 8192,
		      "hole to the end (got %s %llu)",
		      ext.hole ? "hole" : "data", (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(im.b, 8192, 4096, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 4096, "clipped to len 4096 (got %llu)",
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(im.b, 512, 2 * MiB, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == 4096 - 512,
		      "data from an unaligned position to the block end (got %llu)",
		      (unsigned long long)ext.len);
	img_teardown(&im);
}
END_TEST

START_TEST(test_raw_flush_and_info)
{
	struct img im;
	unsigned char *model = img_filled(&im);
	struct backend_info info;

	ck_assert_int_eq(backend_pwrite(im.b, model, 4096, 8192), 4096);
	ck_assert_msg(backend_flush(im.b) == 0, "flush returns 0");
	ck_assert_int_eq(backend_info(im.b, &info), 0);
	ck_assert_msg(!strcmp(info.format, "raw") && info.size == 1 * MiB &&
		      info.allocated ==
		      (uint64_t)file_stat(im.path).st_blocks * 512 &&
		      info.allocated >= 1 * MiB,
		      "info: raw, 1 MiB, allocated = st_blocks * 512 (got %s %llu %llu)",
		      info.format, (unsigned long long)info.size,
		      (unsigned long long)info.allocated);
	img_teardown(&im);
	g_free(model);
}
END_TEST

START_TEST(test_raw_resize)
{
	struct img im;
	unsigned char *model = img_filled(&im);
	unsigned char back[4096];

	ck_assert_msg(backend_resize(im.b, 2 * MiB + 100) == -EINVAL,
		      "an unaligned size is refused with -EINVAL");
	ck_assert_int_eq(backend_resize(im.b, 2 * MiB), 0);
	ck_assert_msg(backend_get_size(im.b) == 2 * MiB &&
		      file_stat(im.path).st_size == 2 * MiB,
		      "grown to 2 MiB");
	ck_assert_msg(backend_pread(im.b, back, 4096, 1 * MiB + 4096) == 4096 &&
		      is_zero(back, 4096),
		      "the grown part reads as zeros");
	ck_assert_int_eq(backend_resize(im.b, 512 * KiB), 0);
	ck_assert_msg(backend_get_size(im.b) == 512 * KiB &&
		      file_stat(im.path).st_size == 512 * KiB,
		      "shrunk to 512 KiB");
	ck_assert_msg(backend_pread(im.b, back, 4096, 512 * KiB - 4096) == 4096 &&
		      !memcmp(back, model + 512 * KiB - 4096, 4096),
		      "data below the new size is intact");
	img_teardown(&im);
	g_free(model);
}
END_TEST

/* ---- a small host filesystem: tmpfs ---- */

struct small_fs {
	char *dir;
	char *mnt;
	bool mounted;
};

/* Mount an 8 MiB tmpfs under a new temporary directory; false (and a
 * SKIP message) when that is not allowed here. */
static bool small_fs_mount(struct small_fs *fs, const char *test)
{
	fs->dir = test_tmpdir();
	fs->mnt = g_build_filename(fs->dir, "mnt", NULL);
	ck_assert_msg(mkdir(fs->mnt, 0700) == 0, "mkdir %s", fs->mnt);
	fs->mounted = mount("tmpfs", fs->mnt, "tmpfs", 0, "size=8m") == 0;
	if (!fs->mounted)
		fprintf(stderr, "SKIP %s: cannot mount a tmpfs (%s); needs root\n",
			test, g_strerror(errno));
	return fs->mounted;
}

static void small_fs_umount(struct small_fs *fs)
{
	if (fs->mounted && umount2(fs->mnt, 0) < 0) {
		fprintf(stderr, "umount %s: %s; detaching\n", fs->mnt,
			g_strerror(errno));
		umount2(fs->mnt, MNT_DETACH);
	}
	test_rmdir_r(fs->dir);
	g_free(fs->dir);
	g_free(fs->mnt);
}

/* Child: fill the tmpfs through a growable image until -ENOSPC. */
static void enospc_child(void *p)
{
	const char *mnt = p;
	char *path = g_build_filename(mnt, "grow.img", NULL);
	char *record = orphan_record_path(path);
	const size_t chunk = 256 * KiB;
	struct backend_open_args args = {
		.path = path,
		.flags = BACKEND_OPEN_GROWABLE,
	};
	struct backend *b;
	struct test_rng rng;
	struct tbuf *t = tbuf_new(chunk, 0, NULL);
	unsigned char *back = g_malloc(chunk);
	uint64_t acked = 0, pos;
	struct stat st;
	ssize_t res;
	int fd;

	hooks_reset();
	fd = open(path, O_RDWR | O_CREAT, 0600);
	CHILD_CHECK(fd >= 0, "create %s", path);
	close(fd);
	CHILD_CHECK(backend_open("raw", &args, &b) == 0, "open %s", path);
	for (;;) {
		struct areq a = { .t = t };

		test_rng_init(&rng, 100 + acked / chunk);
		test_rng_fill(&rng, t->data, chunk);
		async_reset();
		areq_submit(b, &a, DIOLOOP_WRITE, acked);
		g_mutex_lock(&async_lock);
		while (async_done < 1)
			g_cond_wait(&async_cond, &async_lock);
		g_mutex_unlock(&async_lock);
		res = a.res;
		if (res != (ssize_t)chunk)
			break;
		acked += chunk;
		CHILD_CHECK(acked < 64 * MiB, "never ran out of space");
	}
	CHILD_CHECK(res == -ENOSPC, "the failing write returns -ENOSPC (got %zd)",
		    res);
	CHILD_CHECK(acked > 4 * MiB, "filled most of the 8 MiB (%llu acked)",
		    (unsigned long long)acked);
	CHILD_CHECK(atomic_load(&hook_counts[RAW_TEST_ENOSPC_RETRY]) == 1,
		    "one retry after a flush (got %d)",
		    atomic_load(&hook_counts[RAW_TEST_ENOSPC_RETRY]));
	res = backend_pwrite(b, t->data, chunk, acked);
	CHILD_CHECK(res == -ENOSPC, "a synchronous write fails too (got %zd)",
		    res);
	CHILD_CHECK(backend_get_size(b) == (int64_t)acked,
		    "size %lld is what was acknowledged (%llu)",
		    (long long)backend_get_size(b), (unsigned long long)acked);
	CHILD_CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == acked,
		    "the file did not grow past the acknowledged %llu (size %lld)",
		    (unsigned long long)acked, (long long)st.st_size);
	for (pos = 0; pos < acked; pos += chunk) {
		test_rng_init(&rng, 100 + pos / chunk);
		test_rng_fill(&rng, t->data, chunk);
		CHILD_CHECK(file_read(path, back, chunk, pos) == (ssize_t)chunk &&
			    !memcmp(back, t->data, chunk),
			    "acknowledged data at %llu is intact",
			    (unsigned long long)pos);
	}
	CHILD_CHECK(backend_flush(b) == 0, "flush after ENOSPC succeeds");
	CHILD_CHECK(!file_exists(record), "the orphan record is gone");
	backend_close(b);
	CHILD_CHECK(!file_exists(record), "no record after close");
	tbuf_free(t);
	g_free(back);
	g_free(record);
	g_free(path);
}

START_TEST(test_raw_enospc_on_small_host_fs)
{
	struct small_fs fs;
	int status;

	if (!small_fs_mount(&fs, "test_raw_enospc_on_small_host_fs")) {
		small_fs_umount(&fs);
		return;
	}
	status = run_child(enospc_child, fs.mnt, false);
	small_fs_umount(&fs);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the ENOSPC child passed (status 0x%x; see its message)",
		      status);
}
END_TEST

/* Child: write_zeroes on tmpfs, which has no FALLOC_FL_ZERO_RANGE. */
static void zeroes_fallback_child(void *p)
{
	const char *mnt = p;
	char *path = g_build_filename(mnt, "z.img", NULL);
	unsigned char *model = g_malloc(1 * MiB), *back = g_malloc(1 * MiB);
	struct backend_open_args args = { .path = path };
	struct backend *b;
	struct test_rng rng;
	int fd;

	test_rng_init(&rng, 7);
	test_rng_fill(&rng, model, 1 * MiB);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	CHILD_CHECK(fd >= 0 && pwrite(fd, model, 1 * MiB, 0) == (ssize_t)MiB,
		    "create %s", path);
	close(fd);
	CHILD_CHECK(backend_open("raw", &args, &b) == 0, "open %s", path);
	CHILD_CHECK(backend_write_zeroes(b, 4096, 64 * KiB) == 0 &&
		    backend_write_zeroes(b, 100001, 3333) == 0,
		    "write_zeroes falls back to zero pages");
	memset(model + 4096, 0, 64 * KiB);
	memset(model + 100001, 0, 3333);
	CHILD_CHECK(backend_discard(b, 512 * KiB, 256 * KiB) == 0,
		    "discard (PUNCH_HOLE) on tmpfs");
	memset(model + 512 * KiB, 0, 256 * KiB);
	CHILD_CHECK(file_read(path, back, 1 * MiB, 0) == (ssize_t)MiB &&
		    !memcmp(back, model, 1 * MiB),
		    "zeroed and discarded ranges read as zeros, the rest is intact");
	backend_close(b);
	g_free(model);
	g_free(back);
	g_free(path);
}

START_TEST(test_raw_write_zeroes_falls_back_without_zero_range)
{
	struct small_fs fs;
	int status;

	if (!small_fs_mount(&fs, "test_raw_write_zeroes_falls_back_without_zero_range")) {
		small_fs_umount(&fs);
		return;
	}
	status = run_child(zeroes_fallback_child, fs.mnt, false);
	small_fs_umount(&fs);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the write_zeroes child passed (status 0x%x; see its message)",
		      status);
}
END_TEST

static Suite *raw_suite(void)
{
	Suite *s = suite_create("raw");
	TCase *io = tcase_create("io");
	TCase *size = tcase_create("size");
	TCase *extend = tcase_create("extend");
	TCase *ops = tcase_create("ops");
	TCase *host = tcase_create("small_host_fs");

	tcase_set_timeout(io, 300);
	tcase_add_test(io, test_raw_limits_are_probed);
	tcase_add_test(io, test_raw_open_errors);
	tcase_add_test(io, test_raw_rw_aligned_sync);
	tcase_add_test(io, test_raw_rw_unaligned_sync);
	tcase_add_test(io, test_raw_rw_aligned_async);
	tcase_add_test(io, test_raw_rw_unaligned_async);
	tcase_add_test(io, test_raw_many_requests_in_flight);
	tcase_add_test(io, test_raw_shared_aio_context);
	tcase_add_test(io, test_raw_sync_request_on_completion_thread_is_edeadlk);
	suite_add_tcase(s, io);

	tcase_set_timeout(size, 300);
	tcase_add_test(size, test_raw_hole_reads_zeros_and_stays_sparse);
	tcase_add_test(size, test_raw_short_read_at_eof);
	tcase_add_test(size, test_raw_write_past_eof_is_enospc);
	tcase_add_test(size, test_raw_max_size_is_the_host_limit_and_checked_first);
	tcase_add_test(size, test_raw_unaligned_size_is_rounded_down);
	tcase_add_test(size, test_raw_rdonly_refuses_writes);
	suite_add_tcase(s, size);

	tcase_set_timeout(extend, 300);
	tcase_add_test(extend, test_raw_growable_write_extends);
	tcase_add_test(extend, test_raw_concurrent_extending_writes_share_one_record);
	tcase_add_test(extend, test_raw_sync_image_extension_is_durable_at_completion);
	tcase_add_test(extend, test_raw_flush_rewrites_record_while_extension_in_flight);
	tcase_add_test(extend, test_raw_extension_stress_with_concurrent_flush);
	tcase_add_test(extend, test_raw_extension_stress_sync_image);
	tcase_add_test(extend, test_raw_crash_after_orphan_record_is_durable);
	tcase_add_test(extend, test_raw_crash_before_extending_write_completes);
	tcase_add_test(extend, test_raw_torn_record_is_removed_without_truncating);
	tcase_add_test(extend, test_raw_record_on_readonly_open_limits_size);
	tcase_add_test(extend, test_raw_store_ignores_and_makes_no_orphan_record);
	suite_add_tcase(s, extend);

	tcase_set_timeout(ops, 300);
	tcase_add_test(ops, test_raw_discard_leaves_hole);
	tcase_add_test(ops, test_raw_write_zeroes_reads_zeros);
	tcase_add_test(ops, test_raw_map_reports_data_and_holes);
	tcase_add_test(ops, test_raw_full_image_finds_the_holes_it_makes);
	tcase_add_test(ops, test_raw_flush_and_info);
	tcase_add_test(ops, test_raw_resize);
	suite_add_tcase(s, ops);

	tcase_set_timeout(host, 300);
	tcase_add_test(host, test_raw_enospc_on_small_host_fs);
	tcase_add_test(host, test_raw_write_zeroes_falls_back_without_zero_range);
	suite_add_tcase(s, host);
	return s;
}

int main(void)
{
	return test_run_suite(raw_suite());
}
