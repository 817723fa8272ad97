/* SPDX-License-Identifier: MIT */
/* The daemon's side of /dev/fuse (session_io.h). */
#define FUSE_USE_VERSION 314

#include "fusefs/session_io.h"

#include <endian.h>
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Not in the kernel headers this builds against (linux/fuse.h of Debian 12 is 7.38). */
#define DIOLOOP_FUSE_COPY_FILE_RANGE_64 53
/* The most the 32-bit reply of FUSE_COPY_FILE_RANGE can say, in whole
 * pages: the kernel's own limit for that request. */
#define DIOLOOP_COPY_RANGE_MAX 0xfffff000u

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

void dioloop_session_io_fixup(void *buf, size_t len)
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

/* libfuse's read of one request, then the fixup.  errno is read's. */
static ssize_t session_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	if (n > 0)
		dioloop_session_io_fixup(buf, (size_t)n);
	return n;
}

static ssize_t session_writev(int fd, struct iovec *iov, int count,
			      void *userdata)
{
	return writev(fd, iov, count);
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
