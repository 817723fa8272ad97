/* SPDX-License-Identifier: MIT */
/*
 * The I/O recorder: a test hook that sees every write a backend makes to
 * its host file and every flush, in the order they complete.  Power-cut
 * tests install one, run a workload, and replay prefixes of the log into
 * copies of the image (dropping or reordering what no flush covered).
 *
 * NULL in production: every hook below is one atomic load and a branch.
 *
 * What is reported, and when:
 *   write     after a write to fd completed (res: bytes or -errno), before
 *             its submitter is told; iov holds the data written.
 *   flush     fdatasync/fsync of fd (also through aio): flush_begin when
 *             it is issued (the writes reported before it are the ones it
 *             covers), flush_end when it returned res (0 or -errno).
 *   truncate  ftruncate/fallocate that changed fd's size to size.
 * Callbacks run on whatever thread did the I/O and must be thread-safe.
 */
#ifndef DIOLOOP_IOREC_H
#define DIOLOOP_IOREC_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct dioloop_iorec {
	void (*write)(struct dioloop_iorec *r, int fd, const struct iovec *iov,
		      int iovcnt, uint64_t off, ssize_t res);
	/* Returns a token passed back to flush_end. */
	uint64_t (*flush_begin)(struct dioloop_iorec *r, int fd);
	void (*flush_end)(struct dioloop_iorec *r, int fd, uint64_t token,
			  int res);
	void (*truncate)(struct dioloop_iorec *r, int fd, uint64_t size);
};

/* The installed recorder, or NULL.  Set it before opening the backend. */
extern struct dioloop_iorec *_Atomic dioloop_iorec;

static inline struct dioloop_iorec *dioloop_iorec_get(void)
{
	return atomic_load_explicit(&dioloop_iorec, memory_order_acquire);
}

static inline void dioloop_iorec_write(int fd, const struct iovec *iov,
				       int iovcnt, uint64_t off, ssize_t res)
{
	struct dioloop_iorec *r = dioloop_iorec_get();

	if (r)
		r->write(r, fd, iov, iovcnt, off, res);
}

static inline uint64_t dioloop_iorec_flush_begin(int fd)
{
	struct dioloop_iorec *r = dioloop_iorec_get();

	return r ? r->flush_begin(r, fd) : 0;
}

static inline void dioloop_iorec_flush_end(int fd, uint64_t token, int res)
{
	struct dioloop_iorec *r = dioloop_iorec_get();

	if (r)
		r->flush_end(r, fd, token, res);
}

static inline void dioloop_iorec_truncate(int fd, uint64_t size)
{
	struct dioloop_iorec *r = dioloop_iorec_get();

	if (r)
		r->truncate(r, fd, size);
}

#endif
