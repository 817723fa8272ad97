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
 *   fallocate (optional) a PUNCH_HOLE or ZERO_RANGE of fd that succeeded.
 *   name      (optional) a name in directory dirfd changed: a file was
 *             created (fd: the new file, open), unlinked, or renamed to
 *             new_name.  Sidecars such as raw's orphan record.
 *   remote    (optional) a remote store's view (nfs, rbd), see
 *             struct dioloop_iorec_remote: what the server answered to
 *             each WRITE and COMMIT, and the flushes around them.
 * Callbacks run on whatever thread did the I/O and must be thread-safe.
 *
 * The dioloop_iorec_<syscall>() wrappers below make the call and report
 * it, so that a call a build leaves out is also missing from the log.
 * They behave as the system call: 0 (or bytes), or -1 and errno, which
 * the hook leaves unchanged.  Synchronous calls only; aio reports its own
 * (aio.c).
 */
#ifndef DIOLOOP_IOREC_H
#define DIOLOOP_IOREC_H

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum dioloop_iorec_name_op {
	DIOLOOP_IOREC_CREATE,
	DIOLOOP_IOREC_UNLINK,
	DIOLOOP_IOREC_RENAME,
};

enum dioloop_iorec_remote_kind {
	DIOLOOP_IOREC_REMOTE_WRITE,	/* the server took len bytes at off */
	DIOLOOP_IOREC_REMOTE_COMMIT_SENT,
	DIOLOOP_IOREC_REMOTE_COMMIT,	/* a COMMIT answered OK, with verf */
	DIOLOOP_IOREC_REMOTE_FLUSH_BEGIN,
	DIOLOOP_IOREC_REMOTE_FLUSH_END,	/* res: 0 or -errno */
};

#define DIOLOOP_IOREC_VERF_SIZE 8

/*
 * One event of a remote store, named by store (its URL).  A WRITE is
 * reported when its answer arrives: stable when the server answered
 * FILE_SYNC or DATA_SYNC, else only durable once a COMMIT sent after the
 * answer returns the same verf (the server instance's write verifier).
 */
struct dioloop_iorec_remote {
	enum dioloop_iorec_remote_kind kind;
	const char *store;
	uint64_t off;
	uint32_t len;
	const void *data;
	bool stable;
	unsigned char verf[DIOLOOP_IOREC_VERF_SIZE];
	int res;
};

struct dioloop_iorec {
	void (*write)(struct dioloop_iorec *r, int fd, const struct iovec *iov,
		      int iovcnt, uint64_t off, ssize_t res);
	/* Returns a token passed back to flush_end. */
	uint64_t (*flush_begin)(struct dioloop_iorec *r, int fd);
	void (*flush_end)(struct dioloop_iorec *r, int fd, uint64_t token,
			  int res);
	void (*truncate)(struct dioloop_iorec *r, int fd, uint64_t size);
	/* Optional: NULL when the recorder does not follow them. */
	void (*fallocate)(struct dioloop_iorec *r, int fd, int mode,
			  uint64_t off, uint64_t len);
	void (*name)(struct dioloop_iorec *r, int dirfd,
		     enum dioloop_iorec_name_op op, const char *name,
		     const char *new_name, int fd);
	void (*remote)(struct dioloop_iorec *r,
		       const struct dioloop_iorec_remote *ev);
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

/* Report that name was created in dirfd; fd is the new file.  Call it
 * before the file is written: the recorder knows a sidecar from then. */
static inline void dioloop_iorec_created(int dirfd, const char *name, int fd)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	int saved = errno;

	if (r && r->name)
		r->name(r, dirfd, DIOLOOP_IOREC_CREATE, name, NULL, fd);
	errno = saved;
}

/* Report a remote store's event; verf may be NULL (no verifier). */
static inline void dioloop_iorec_remote(enum dioloop_iorec_remote_kind kind,
					const char *store, uint64_t off,
					const void *data, uint32_t len,
					bool stable, const void *verf, int res)
{
	struct dioloop_iorec *r = dioloop_iorec_get();

	if (r && r->remote) {
		struct dioloop_iorec_remote ev = {
			.kind = kind, .store = store, .off = off, .len = len,
			.data = data, .stable = stable, .res = res,
		};

		if (verf)
			memcpy(ev.verf, verf, sizeof(ev.verf));
		r->remote(r, &ev);
	}
}

/* fsync (data_only: fdatasync) of fd, reported as a flush. */
static inline int dioloop_iorec_sync(int fd, bool data_only)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	uint64_t token = r ? r->flush_begin(r, fd) : 0;
	int ret = data_only ? fdatasync(fd) : fsync(fd);
	int saved = errno;

	if (r)
		r->flush_end(r, fd, token, ret < 0 ? -saved : 0);
	errno = saved;
	return ret;
}

static inline int dioloop_iorec_fsync(int fd)
{
	return dioloop_iorec_sync(fd, false);
}

static inline int dioloop_iorec_fdatasync(int fd)
{
	return dioloop_iorec_sync(fd, true);
}

static inline ssize_t dioloop_iorec_pwrite(int fd, const void *buf,
					   size_t len, off_t off)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	ssize_t n = pwrite(fd, buf, len, off);
	int saved = errno;

	if (r) {
		struct iovec one = { (void *)buf, len };

		r->write(r, fd, &one, 1, (uint64_t)off, n < 0 ? -saved : n);
	}
	errno = saved;
	return n;
}

static inline int dioloop_iorec_ftruncate(int fd, off_t size)
{
	int ret = ftruncate(fd, size);
	int saved = errno;

	if (ret == 0)
		dioloop_iorec_truncate(fd, (uint64_t)size);
	errno = saved;
	return ret;
}

static inline int dioloop_iorec_fallocate(int fd, int mode, off_t off,
					  off_t len)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	int ret = fallocate(fd, mode, off, len);
	int saved = errno;

	if (ret == 0 && r && r->fallocate)
		r->fallocate(r, fd, mode, (uint64_t)off, (uint64_t)len);
	errno = saved;
	return ret;
}

static inline int dioloop_iorec_unlinkat(int dirfd, const char *name,
					 int flags)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	int ret = unlinkat(dirfd, name, flags);
	int saved = errno;

	if (ret == 0 && r && r->name)
		r->name(r, dirfd, DIOLOOP_IOREC_UNLINK, name, NULL, -1);
	errno = saved;
	return ret;
}

static inline int dioloop_iorec_renameat(int dirfd, const char *name,
					 int new_dirfd, const char *new_name)
{
	struct dioloop_iorec *r = dioloop_iorec_get();
	int ret = renameat(dirfd, name, new_dirfd, new_name);
	int saved = errno;

	/* Both names in one directory: the only renames the daemon makes. */
	if (ret == 0 && r && r->name)
		r->name(r, dirfd, DIOLOOP_IOREC_RENAME, name, new_name, -1);
	errno = saved;
	return ret;
}

#endif
