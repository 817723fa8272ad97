/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the cow test suites (tests/check_cow_*.c): images,
 * opening them, request buffers seen through bio_vecs, a flat reference
 * model, forking children to crash.  Header-only (static inline) because
 * each suite is one executable built from its own file and testutil.c.
 */
#ifndef DIOLOOP_TESTS_COW_TEST_H
#define DIOLOOP_TESTS_COW_TEST_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cow/cow.h"
#include "backends/cow/format.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* A new image in a fresh directory: its path (g_free it). */
static inline char *cow_test_image(uint64_t size, uint8_t csum_type)
{
	char *dir = test_tmpdir();
	char *path = g_build_filename(dir, "img.cow", NULL);
	struct cow_format_opts o = { .size = size, .csum_type = csum_type };
	struct cow_err err = { "" };
	int ret = cow_format(path, &o, &err);

	ck_assert_msg(ret == 0, "cow_format %s: expected 0, got %d (%s)", path,
		      ret, err.msg);
	g_free(dir);
	return path;
}

/* Open path as a cow image through the registry: 0 or -errno. */
static inline int cow_test_try_open(const char *path, unsigned int flags,
				    struct backend **out)
{
	struct backend_open_args args = { .path = path, .flags = flags };

	return backend_open("cow", &args, out);
}

static inline struct backend *cow_test_open(const char *path,
					    unsigned int flags)
{
	struct backend *b = NULL;
	int ret = cow_test_try_open(path, flags, &b);

	ck_assert_msg(ret == 0 && b, "open cow image %s: expected 0, got %d",
		      path, ret);
	cow_set_commit_interval(b, 0);
	return b;
}

static inline bool cow_test_is_zero(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* Raw access to the container file, bypassing the backend. */
static inline void cow_test_file_xor(const char *path, uint64_t off,
				     uint8_t x)
{
	int fd = open(path, O_RDWR);
	uint8_t c;

	ck_assert_msg(fd >= 0 && pread(fd, &c, 1, (off_t)off) == 1,
		      "read byte %llu of %s", (unsigned long long)off, path);
	c ^= x;
	ck_assert_msg(pwrite(fd, &c, 1, (off_t)off) == 1, "write byte");
	close(fd);
}

static inline uint64_t cow_test_file_size(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "stat %s", path);
	return (uint64_t)st.st_size;
}

/* ---- request memory: pages cut into bio_vecs ---- */

struct cow_tbuf {
	char *mem;
	char *data;		/* mem + off: len bytes */
	size_t len;
	struct bio_vec *bv;
	unsigned long nr;
	struct iov_iter it;
};

/* len bytes starting off bytes into the first page; with rng, pages are
 * also cut in two at random points. */
static inline struct cow_tbuf *cow_tbuf_new(size_t len, size_t off,
					    struct test_rng *rng)
{
	struct cow_tbuf *t = g_new0(struct cow_tbuf, 1);
	size_t total = off + len, pos = off, pages;

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

static inline void cow_tbuf_free(struct cow_tbuf *t)
{
	free(t->mem);
	g_free(t->bv);
	g_free(t);
}

static inline struct iov_iter *cow_tbuf_iter(struct cow_tbuf *t)
{
	iov_iter_init_bvec(&t->it, t->bv, t->nr, t->len, 0);
	return &t->it;
}

/* One synchronous request through the core's entry point. */
static inline ssize_t cow_test_rw(struct backend *b, int rw,
				  struct cow_tbuf *t, uint64_t pos)
{
	struct kiocb iocb = {
		.ki_rw = rw,
		.ki_pos = pos,
		.ki_iter = cow_tbuf_iter(t),
	};

	return backend_direct_IO_bvec(b, &iocb);
}

/* Write len bytes of buf at pos through random bio_vec cuts; all or an
 * assertion. */
static inline void cow_test_write(struct backend *b, const void *buf,
				  size_t len, uint64_t pos,
				  struct test_rng *rng)
{
	struct cow_tbuf *t = cow_tbuf_new(len, rng ? test_rng_range(rng, 0, 3) * 512 : 0,
					  rng);
	ssize_t n;

	memcpy(t->data, buf, len);
	n = cow_test_rw(b, DIOLOOP_WRITE, t, pos);
	ck_assert_msg(n == (ssize_t)len,
		      "write of %zu bytes at %llu: expected %zu, got %zd",
		      len, (unsigned long long)pos, len, n);
	cow_tbuf_free(t);
}

/* Read len bytes at pos into buf: the result of the request. */
static inline ssize_t cow_test_read(struct backend *b, void *buf, size_t len,
				    uint64_t pos, struct test_rng *rng)
{
	struct cow_tbuf *t = cow_tbuf_new(len, rng ? test_rng_range(rng, 0, 3) * 512 : 0,
					  rng);
	ssize_t n = cow_test_rw(b, DIOLOOP_READ, t, pos);

	if (n > 0)
		memcpy(buf, t->data, (size_t)n);
	cow_tbuf_free(t);
	return n;
}

static inline struct cow_stats cow_test_stats(struct backend *b)
{
	struct cow_stats st;

	cow_get_stats(b, &st);
	return st;
}

/* ---- crashing children ---- */

/*
 * Run fn(arg) in a forked child; returns its wait status.  With
 * kill_fd_out, the child gets a pipe end in *kill_fd_out through which
 * writing one byte asks the parent for a SIGKILL from outside (valgrind
 * would run its exit checks on a kill of oneself).
 */
static inline int cow_test_run_child(void (*fn)(void *, int), void *arg)
{
	int pfd[2], status = 0;
	struct pollfd p;
	pid_t pid, w;
	char c;

	ck_assert_msg(pipe(pfd) == 0, "pipe: %s", g_strerror(errno));
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", g_strerror(errno));
	if (pid == 0) {
		close(pfd[0]);
		fn(arg, pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	p = (struct pollfd){ .fd = pfd[0], .events = POLLIN };
	/* EOF (the child exited) or a request; 300 s at most. */
	if (poll(&p, 1, 300000) == 1 && read(pfd[0], &c, 1) == 1)
		kill(pid, SIGKILL);
	close(pfd[0]);
	do {
		w = waitpid(pid, &status, 0);
	} while (w < 0 && errno == EINTR);
	ck_assert_msg(w == pid, "waitpid: %s", g_strerror(errno));
	return status;
}

/* In a child: ask the parent to kill us, and wait for it. */
static inline void cow_test_die(int kill_fd)
{
	if (kill_fd >= 0 && write(kill_fd, "k", 1) == 1)
		for (;;)
			pause();
	raise(SIGKILL);
}

#define COW_CHILD_CHECK(cond, ...)                                     \
	do {                                                           \
		if (!(cond)) {                                         \
			fprintf(stderr, "child: " __VA_ARGS__);        \
			fprintf(stderr, "\n");                         \
			_exit(1);                                      \
		}                                                      \
	} while (0)

#endif
