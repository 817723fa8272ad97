/* SPDX-License-Identifier: MIT */
/* The daemon's side of /dev/fuse (session_io.h). */
#define FUSE_USE_VERSION 314

#include "fusefs/session_io.h"
#include "fusefs/session_dev.h"
#include "fusefs/session_uring.h"

#include <endian.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Not in the kernel headers this builds against (linux/fuse.h of Debian 12 is 7.38). */
#define DIOLOOP_FUSE_COPY_FILE_RANGE_64 53
/* The most the 32-bit reply of FUSE_COPY_FILE_RANGE can say, in whole
 * pages: the kernel's own limit for that request. */
#define DIOLOOP_COPY_RANGE_MAX 0xfffff000u
/* INIT flag (in flags2): shared mmap of FOPEN_DIRECT_IO files (7.39). */
#define DIOLOOP_FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)

/*
 * FUSE_COPY_FILE_RANGE_64 carries the same fuse_copy_file_range_in as
 * FUSE_COPY_FILE_RANGE; only the reply differs: a uint64_t bytes_copied
 * instead of fuse_write_out {uint32_t size; uint32_t padding}.  libfuse's
 * fuse_reply_write zeroes the padding, so on a little-endian machine the
 * two replies are the same eight bytes, as long as the count fits in 32
 * bits (the length is clamped for that; the kernel takes a short copy).
 */
#if __BYTE_ORDER != __LITTLE_ENDIAN
#error "session_io.c answers FUSE_COPY_FILE_RANGE_64 as fuse_write_out: little-endian only"
#endif

/* FUSE_COPY_FILE_RANGE_64 in buf becomes FUSE_COPY_FILE_RANGE. */
static void copy_range_64_fixup(void *buf, size_t len)
{
	struct fuse_in_header in;
	struct fuse_copy_file_range_in arg;
	char *p = buf;

	if (len < sizeof(in) + sizeof(arg))
		return;
	memcpy(&in, p, sizeof(in));
	if (in.opcode != DIOLOOP_FUSE_COPY_FILE_RANGE_64 ||
	    in.len < sizeof(in) + sizeof(arg))
		return;
	in.opcode = FUSE_COPY_FILE_RANGE;
	memcpy(p, &in, sizeof(in));
	memcpy(&arg, p + sizeof(in), sizeof(arg));
	if (arg.len > DIOLOOP_COPY_RANGE_MAX) {
		arg.len = DIOLOOP_COPY_RANGE_MAX;
		memcpy(p + sizeof(in), &arg, sizeof(arg));
	}
}

/*
 * The INIT handshake, seen from both sides: the kernel's INIT request
 * (its unique id and what it offers) as it is read, so that libfuse's
 * reply to it can be told apart and extended.  One FUSE session per
 * process; INIT comes once, before any other request.
 */
static _Atomic uint64_t init_unique;	/* 0: no INIT seen yet */
static _Atomic uint64_t init_offered;	/* flags | flags2 << 32 */

void dioloop_session_io_fixup(void *buf, size_t len)
{
	struct fuse_in_header in;

	if (len < sizeof(in))
		return;
	memcpy(&in, buf, sizeof(in));
	if (in.opcode == FUSE_INIT &&
	    len >= sizeof(in) + sizeof(struct fuse_init_in)) {
		struct fuse_init_in init;

		memcpy(&init, (char *)buf + sizeof(in), sizeof(init));
		atomic_store(&init_offered,
			     init.flags & FUSE_INIT_EXT ?
			     (uint64_t)init.flags | (uint64_t)init.flags2 << 32 :
			     (uint64_t)init.flags);
		atomic_store(&init_unique, in.unique);
		return;
	}
	copy_range_64_fixup(buf, len);
}

bool dioloop_session_io_fixup_reply(struct iovec *iov, int count)
{
	struct fuse_out_header out;
	struct fuse_init_out init;
	uint64_t offered = atomic_load(&init_offered);
	uint64_t unique = atomic_load(&init_unique);

	if (!unique || count < 2 || iov[0].iov_len < sizeof(out) ||
	    iov[1].iov_len < sizeof(init))
		return false;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	if (out.unique != unique || out.error)
		return false;
	atomic_store(&init_unique, 0);
	memcpy(&init, iov[1].iov_base, sizeof(init));
	/* Shared mmap of direct-I/O files (a block device maps shared):
	 * only when the kernel offers it, in the extended flags it offers
	 * them in. */
	if ((offered & DIOLOOP_FUSE_DIRECT_IO_ALLOW_MMAP) &&
	    (init.flags & FUSE_INIT_EXT)) {
		init.flags2 |= (uint32_t)(DIOLOOP_FUSE_DIRECT_IO_ALLOW_MMAP >> 32);
		memcpy(iov[1].iov_base, &init, sizeof(init));
	}
	/* FUSE over io_uring, when the mount asked for it (-o transport). */
	if (init.flags & FUSE_INIT_EXT) {
		init.flags2 |= dioloop_uring_init_flags2(offered);
		memcpy(iov[1].iov_base, &init, sizeof(init));
	}
	return true;
}

/* libfuse's read of one request (the worker reaps its own completions
 * while it waits: session_dev.h), then the fixup.  errno is read's. */
static ssize_t session_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = dioloop_dev_read(fd, buf, len);

	if (n > 0)
		dioloop_session_io_fixup(buf, (size_t)n);
	return n;
}

/* libfuse's write of one reply, after the reply fixup; the reply to a
 * request that came from an io_uring ring goes back through its entry. */
static ssize_t session_writev(int fd, struct iovec *iov, int count,
			      void *userdata)
{
	bool init;
	ssize_t n;

	if (dioloop_uring_reply(iov, count, &n))
		return n;
	init = dioloop_session_io_fixup_reply(iov, count);
	n = writev(fd, iov, count);
	/* The rings are registered once the kernel took the INIT reply. */
	if (init && n >= 0)
		dioloop_uring_init_replied(iov, count);
	return n;
}

int dioloop_session_io_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = session_read,
		.writev = session_writev,
	};
	int fd = fuse_session_fd(se);

	if (fd < 0)
		return -EBADF;
	return fuse_session_custom_io(se, &io, fd);
}

#ifndef FOPEN_PARALLEL_DIRECT_WRITES
#define FOPEN_PARALLEL_DIRECT_WRITES (1 << 6)	/* protocol 7.36 */
#endif

/*
 * fuse_reply_open, saying also what libfuse 3.14 cannot:
 * FOPEN_PARALLEL_DIRECT_WRITES on a direct-I/O open.  Without it the
 * kernel sends one direct write of a file at a time (each holds the inode
 * lock exclusively until its reply), so several synchronous writers of a
 * node (processes, psync jobs, a VM's vCPUs) queue behind each other, where
 * a block device serves them in parallel.  With it, writes that do not
 * extend the file take the lock shared; overlapping ones are still ordered
 * by the backends' range locks.  A kernel older than 7.36 ignores the flag.
 * The reply is libfuse's own fuse_open_out, built the way fill_open does.
 */
int dioloop_reply_open(fuse_req_t req, const struct fuse_file_info *fi)
{
	struct fuse_open_out arg = { .fh = fi->fh };

	if (fi->direct_io)
		arg.open_flags |= FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES;
	if (fi->keep_cache)
		arg.open_flags |= FOPEN_KEEP_CACHE;
	if (fi->nonseekable)
		arg.open_flags |= FOPEN_NONSEEKABLE;
	if (fi->noflush)
		arg.open_flags |= FOPEN_NOFLUSH;
	return fuse_reply_buf(req, (const char *)&arg, sizeof(arg));
}
