/* SPDX-License-Identifier: MIT */
/* A recorder that logs every event to a file (iorec_file.h). */
#include "backends/iorec_file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct iorec_file {
	struct dioloop_iorec hook;	/* first member */
	GMutex lock;
	int fd;
	uint64_t seq;			/* by lock */
};

/* Write all of buf to the log; a failure is reported once. */
static void log_put(struct iorec_file *f, const void *buf, size_t len)
{
	static bool warned;
	const char *p = buf;

	while (len) {
		ssize_t n = write(f->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!warned)
				g_warning("I/O recorder: writing its log: %s",
					  n < 0 ? g_strerror(errno) : "short write");
			warned = true;
			return;
		}
		p += n;
		len -= (size_t)n;
	}
}

/* Log x (its file from fd, when fd >= 0) and its payload: the first
 * x->payload bytes of iov; its sequence number.  Keeps errno. */
static uint64_t log_rec(struct iorec_file *f, int fd,
			struct dioloop_iorec_file_rec *x,
			const struct iovec *iov, int iovcnt)
{
	size_t left = x->payload;
	int saved = errno;
	struct stat st;
	uint64_t seq;
	int i;

	if (fd >= 0 && fstat(fd, &st) == 0) {
		x->dev = st.st_dev;
		x->ino = st.st_ino;
	}
	g_mutex_lock(&f->lock);
	seq = x->seq = ++f->seq;
	x->time_us = (uint64_t)g_get_monotonic_time();
	log_put(f, x, sizeof(*x));
	for (i = 0; i < iovcnt && left; i++) {
		size_t n = MIN(left, iov[i].iov_len);

		log_put(f, iov[i].iov_base, n);
		left -= n;
	}
	g_mutex_unlock(&f->lock);
	errno = saved;
	return seq;
}

static void file_write(struct dioloop_iorec *h, int fd,
		       const struct iovec *iov, int iovcnt, uint64_t off,
		       ssize_t res)
{
	struct dioloop_iorec_file_rec x = { .kind = DIOLOOP_IOREC_FILE_WRITE,
					    .off = off };
	int saved = errno;

	if (res <= 0)
		return;
	x.dsync = (fcntl(fd, F_GETFL) & O_DSYNC) == O_DSYNC;
	errno = saved;
	/* The bytes written: the first res of the iovecs. */
	x.len = x.payload = (uint32_t)res;
	log_rec((struct iorec_file *)h, fd, &x, iov, iovcnt);
}

static uint64_t file_flush_begin(struct dioloop_iorec *h, int fd)
{
	struct dioloop_iorec_file_rec x = {
		.kind = DIOLOOP_IOREC_FILE_FLUSH_BEGIN };

	return log_rec((struct iorec_file *)h, fd, &x, NULL, 0);
}

static void file_flush_end(struct dioloop_iorec *h, int fd, uint64_t token,
			   int res)
{
	struct dioloop_iorec_file_rec x = {
		.kind = DIOLOOP_IOREC_FILE_FLUSH_END, .token = token,
		.res = res };

	log_rec((struct iorec_file *)h, fd, &x, NULL, 0);
}

static void file_truncate(struct dioloop_iorec *h, int fd, uint64_t size)
{
	struct dioloop_iorec_file_rec x = { .kind = DIOLOOP_IOREC_FILE_SIZE,
					    .off = size };

	log_rec((struct iorec_file *)h, fd, &x, NULL, 0);
}

static void file_fallocate(struct dioloop_iorec *h, int fd, int mode,
			   uint64_t off, uint64_t len)
{
	struct dioloop_iorec_file_rec x = { .kind = DIOLOOP_IOREC_FILE_ZERO,
					    .off = off, .len = len,
					    .res = mode };

	log_rec((struct iorec_file *)h, fd, &x, NULL, 0);
}

static void file_name(struct dioloop_iorec *h, int dirfd,
		      enum dioloop_iorec_name_op op, const char *name,
		      const char *new_name, int fd)
{
	struct dioloop_iorec_file_rec x = { 0 };
	struct iovec names[2] = {
		{ (void *)name, strlen(name) + 1 },
		{ (void *)new_name, new_name ? strlen(new_name) + 1 : 0 },
	};
	int saved = errno;
	struct stat st;

	x.kind = op == DIOLOOP_IOREC_CREATE ? DIOLOOP_IOREC_FILE_CREATE :
		 op == DIOLOOP_IOREC_UNLINK ? DIOLOOP_IOREC_FILE_UNLINK :
					      DIOLOOP_IOREC_FILE_RENAME;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		x.new_dev = st.st_dev;
		x.new_ino = st.st_ino;
	}
	errno = saved;
	x.payload = (uint32_t)(names[0].iov_len + names[1].iov_len);
	log_rec((struct iorec_file *)h, dirfd, &x, names, new_name ? 2 : 1);
}

int dioloop_iorec_file_open(const char *path)
{
	struct iorec_file *f;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	f = g_new0(struct iorec_file, 1);
	f->hook = (struct dioloop_iorec){ .write = file_write,
					  .flush_begin = file_flush_begin,
					  .flush_end = file_flush_end,
					  .truncate = file_truncate,
					  .fallocate = file_fallocate,
					  .name = file_name };
	g_mutex_init(&f->lock);
	f->fd = fd;
	atomic_store(&dioloop_iorec, &f->hook);
	return 0;
}
