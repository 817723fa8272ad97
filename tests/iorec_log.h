/* SPDX-License-Identifier: MIT */
/*
 * A recorder for power-cut tests (backends/iorec.h): one log, in order, of
 * every write (with a copy of its data), flush and size change that a
 * backend makes to one file, identified by device and inode, and of the
 * events a workload adds (an op starts, a flush returned), all numbered
 * from one sequence.  Replaying prefixes of it rebuilds what the file could
 * hold after a power cut.  Header-only like cow_test.h.
 */
#ifndef DIOLOOP_TESTS_IOREC_LOG_H
#define DIOLOOP_TESTS_IOREC_LOG_H

#include <check.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/iorec.h"

#define IOREC_LOG_FD_CACHE 1024

enum rec_kind {
	REC_WRITE,		/* len bytes at off, at data in the log */
	REC_SIZE,		/* the file's size became off */
	REC_FLUSH_BEGIN,
	REC_FLUSH_END,		/* token: its begin's position + 1; res */
	REC_OP_BEGIN,		/* the workload starts op number op */
	REC_USER_FLUSH,		/* backend_flush returned 0 after ops [0, op) */
};

struct rec {
	uint8_t kind;		/* enum rec_kind */
	int32_t res;
	uint32_t op;
	uint32_t len;
	uint64_t off;
	uint64_t token;
	size_t data;		/* offset of the bytes in recorder.data */
};

struct recorder {
	struct dioloop_iorec hook;	/* first member */
	GMutex lock;
	GArray *recs;			/* struct rec; by lock */
	GByteArray *data;		/* by lock */
	dev_t dev;			/* the recorded file */
	ino_t ino;
	uint8_t fd_kind[IOREC_LOG_FD_CACHE];	/* 0 unknown, 1 the file, 2 other;
					 * by lock */
};

/* Append r; its position (by lock). */
static inline uint64_t rec_append(struct recorder *r, const struct rec *x)
{
	g_array_append_val(r->recs, *x);
	return r->recs->len - 1;
}

/* Whether fd is the container (by lock).  Cached per fd: the test
 * forgets the cache whenever it opens or closes a backend. */
static inline bool rec_is_container(struct recorder *r, int fd)
{
	struct stat st;
	bool is;

	if (fd >= 0 && fd < IOREC_LOG_FD_CACHE && r->fd_kind[fd])
		return r->fd_kind[fd] == 1;
	is = fstat(fd, &st) == 0 && st.st_dev == r->dev && st.st_ino == r->ino;
	if (fd >= 0 && fd < IOREC_LOG_FD_CACHE)
		r->fd_kind[fd] = is ? 1 : 2;
	return is;
}

static inline void rec_forget_fds(struct recorder *r)
{
	g_mutex_lock(&r->lock);
	memset(r->fd_kind, 0, sizeof(r->fd_kind));
	g_mutex_unlock(&r->lock);
}

static inline void rec_write(struct dioloop_iorec *h, int fd, const struct iovec *iov,
		      int iovcnt, uint64_t off, ssize_t res)
{
	struct recorder *r = (struct recorder *)h;
	struct rec x = { .kind = REC_WRITE, .off = off };
	size_t left = res > 0 ? (size_t)res : 0;
	int i;

	if (res <= 0)
		return;
	g_mutex_lock(&r->lock);
	if (rec_is_container(r, fd)) {
		x.data = r->data->len;
		x.len = (uint32_t)left;
		for (i = 0; i < iovcnt && left; i++) {
			size_t n = MIN(left, iov[i].iov_len);

			g_byte_array_append(r->data, iov[i].iov_base, (guint)n);
			left -= n;
		}
		rec_append(r, &x);
	}
	g_mutex_unlock(&r->lock);
}

static inline uint64_t rec_flush_begin(struct dioloop_iorec *h, int fd)
{
	struct recorder *r = (struct recorder *)h;
	struct rec x = { .kind = REC_FLUSH_BEGIN };
	uint64_t token = 0;

	g_mutex_lock(&r->lock);
	if (rec_is_container(r, fd))
		token = rec_append(r, &x) + 1;
	g_mutex_unlock(&r->lock);
	return token;
}

static inline void rec_flush_end(struct dioloop_iorec *h, int fd, uint64_t token,
			  int res)
{
	struct recorder *r = (struct recorder *)h;
	struct rec x = { .kind = REC_FLUSH_END, .token = token, .res = res };

	if (!token)
		return;
	g_mutex_lock(&r->lock);
	rec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

static inline void rec_truncate(struct dioloop_iorec *h, int fd, uint64_t size)
{
	struct recorder *r = (struct recorder *)h;
	struct rec x = { .kind = REC_SIZE, .off = size };

	g_mutex_lock(&r->lock);
	if (rec_is_container(r, fd))
		rec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

/* A workload event: kind REC_OP_BEGIN or REC_USER_FLUSH. */
static inline void rec_user(struct recorder *r, enum rec_kind kind, uint32_t op)
{
	struct rec x = { .kind = (uint8_t)kind, .op = op };

	g_mutex_lock(&r->lock);
	rec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

static inline size_t rec_data_len(struct recorder *r)
{
	size_t n;

	g_mutex_lock(&r->lock);
	n = r->data->len;
	g_mutex_unlock(&r->lock);
	return n;
}

static inline struct recorder *recorder_new(const char *path)
{
	struct recorder *r = g_new0(struct recorder, 1);
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "stat %s", path);
	r->hook = (struct dioloop_iorec){ .write = rec_write,
					  .flush_begin = rec_flush_begin,
					  .flush_end = rec_flush_end,
					  .truncate = rec_truncate };
	g_mutex_init(&r->lock);
	r->recs = g_array_new(FALSE, FALSE, sizeof(struct rec));
	r->data = g_byte_array_new();
	r->dev = st.st_dev;
	r->ino = st.st_ino;
	return r;
}

static inline void recorder_free(struct recorder *r)
{
	g_array_free(r->recs, TRUE);
	g_byte_array_free(r->data, TRUE);
	g_mutex_clear(&r->lock);
	g_free(r);
}

static inline unsigned int rec_count(const struct recorder *r, enum rec_kind kind)
{
	unsigned int n = 0;
	guint i;

	for (i = 0; i < r->recs->len; i++)
		n += g_array_index(r->recs, struct rec, i).kind == kind;
	return n;
}

#endif
