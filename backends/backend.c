/* SPDX-License-Identifier: MIT */
/*
 * The core side of the backend API: open/close, and one wrapper per op
 * that checks what the core guarantees (read-only images, ranges inside
 * the image) and applies the documented default when the op is NULL.
 *
 * Range clamping: discard, write_zeroes, map and clone_range are clamped
 * here to the image's size, so backends see only end <= size (backend.h).
 * A range starting at or past the end is a no-op (0 bytes), except for
 * map, where it is -ENXIO (lseek's answer past EOF).
 *
 * Sizes: before anything changes, a write, a new size and a clone's
 * target are checked against limits.max_size (backend_check_range), and
 * every range against the largest off_t, so no sum below can overflow
 * and no backend is asked to reach a size it cannot hold.
 */
#include "backends/backend.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The largest piece the synchronous helpers (pread/pwrite, the default
 * write_zeroes) move with one direct_IO_bvec call; pieces never cross a
 * multiple of it, so an aligned request stays aligned piece by piece. */
#define BACKEND_CHUNK ((size_t)1 << 20)

/* limits->max_size as backend.h says: the backend's, at most INT64_MAX,
 * or by default INT64_MAX rounded down to request_alignment. */
static void backend_set_max_size(struct backend_limits *limits)
{
	uint64_t align = limits->request_alignment;

	if (limits->max_size && limits->max_size <= INT64_MAX)
		return;
	limits->max_size = INT64_MAX;
	if (align > 1 && !(align & (align - 1)))
		limits->max_size &= ~(align - 1);
}

/* Is [pos, pos + len) inside [0, max]?  0, -EINVAL or -EFBIG. */
static int backend_range_within(uint64_t pos, uint64_t len, uint64_t max)
{
	uint64_t end;

	if (pos > INT64_MAX || len > INT64_MAX)
		return -EINVAL;
	if (__builtin_add_overflow(pos, len, &end) || end > max)
		return -EFBIG;
	return 0;
}

int backend_check_range(const struct backend *b, uint64_t pos, uint64_t len)
{
	return backend_range_within(pos, len, b->limits.max_size);
}

int backend_check_write(const struct backend *b, uint64_t pos, uint64_t len)
{
	int ret = backend_check_range(b, pos, len);

	if (ret == -EFBIG && !(b->flags & BACKEND_OPEN_GROWABLE))
		ret = -ENOSPC;
	return ret;
}

G_DEFINE_QUARK(dioloop-backend-error-quark, backend_error)

int backend_set_error(GError **error, int err, const char *fmt, ...)
{
	g_autofree char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (error)
		g_propagate_error(error, g_error_new_literal(BACKEND_ERROR,
							     -err, msg));
	else
		g_warning("%s", msg);
	return err;
}

/* Open an image with the named backend.  Control thread. */
int backend_open(const char *type, const struct backend_open_args *args,
		 struct backend **out)
{
	const struct backend_ops *ops;

	*out = NULL;
	ops = type ? backend_lookup(type) : NULL;
	if (!ops)
		return -ENOENT;
	return backend_open_ops(ops, args, out);
}

/* Open an image with an ops table of the caller's.  Control thread. */
int backend_open_ops(const struct backend_ops *ops,
		     const struct backend_open_args *args,
		     struct backend **out)
{
	struct backend *b;
	int ret;

	*out = NULL;
	if (backend_ops_check(ops) < 0)
		return -EINVAL;
	if (ops->is_filter && !args->inner)
		return -EINVAL;
	b = g_new0(struct backend, 1);
	b->ops = ops;
	b->path = g_strdup(args->path);
	b->flags = args->flags;
	b->aio = args->aio;
	if (ops->is_filter) {
		b->inner = args->inner;
		b->limits = args->inner->limits;
	}
	ret = ops->open ? ops->open(b, args) : 0;
	if (ret < 0) {
		g_free(b->path);
		g_free(b);
		return ret;
	}
	backend_set_max_size(&b->limits);
	*out = b;
	return 0;
}

/*
 * Open the image args names.  Through args->file: a new open file
 * description of the very inode the caller checked (its /proc/self/fd
 * link; the dev:ino is compared, so nothing else can come back), with the
 * access mode and flags asked.  Without: path, as given (tools and tests
 * name their own files).
 */
int backend_open_image(const struct backend_open_args *args, int flags)
{
	int fd;

	if (!args->file) {
		fd = open(args->path, flags | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	return backend_reopen_fd(args->file->fd, flags);
}

int backend_reopen_fd(int fd, int flags)
{
	char link[sizeof("/proc/self/fd/") + 12];
	struct stat want, got;
	int nfd, err;

	if (fstat(fd, &want) < 0)
		return -errno;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	nfd = open(link, flags | O_CLOEXEC | O_NOCTTY);
	if (nfd < 0)
		return -errno;
	if (fstat(nfd, &got) < 0) {
		err = -errno;
		close(nfd);
		return err;
	}
	if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
		close(nfd);
		return -ESTALE;
	}
	return nfd;
}

/* Close an image; every request must have completed.  Control thread. */
void backend_close(struct backend *b)
{
	if (!b)
		return;
	if (b->ops->close)
		b->ops->close(b);
	backend_close(b->inner);
	g_free(b->path);
	g_free(b);
}

/* Logical size or -errno.  Any thread. */
int64_t backend_get_size(struct backend *b)
{
	if (!b->ops->get_size)
		return backend_get_size(b->inner);
	return b->ops->get_size(b);
}

/* Does the filter b leave op to its inner backend?  (A NULL op of a
 * backend that is not a filter gets the core's default instead.) */
#define backend_forwards(b, op) (!(b)->ops->op && (b)->ops->is_filter)

/* Checked entry to the op: any thread (see backend.h). */
ssize_t backend_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	int ret;

	if (iocb->ki_rw != DIOLOOP_READ && iocb->ki_rw != DIOLOOP_WRITE)
		return -EINVAL;
	/* The core's read-only check, one per entry point that changes the
	 * image: backends need none for BACKEND_OPEN_RDONLY (they check only
	 * read-only states of their own, e.g. a cow snapshot). */
	if (iocb->ki_rw == DIOLOOP_WRITE && (b->flags & BACKEND_OPEN_RDONLY))
		return -EROFS;
	if (!iocb->ki_iter || iov_iter_count(iocb->ki_iter) == 0)
		return 0;
	if (!iov_iter_is_bvec(iocb->ki_iter))
		return -EINVAL;
	if (iocb->ki_rw == DIOLOOP_WRITE) {
		ret = backend_check_write(b, iocb->ki_pos,
					  iov_iter_count(iocb->ki_iter));
		if (ret < 0)
			return ret;
	}
	if (backend_forwards(b, direct_IO_bvec))
		return backend_direct_IO_bvec(b->inner, iocb);
	return b->ops->direct_IO_bvec(b, iocb);
}

/* Make completed writes durable; worker thread. */
int backend_flush(struct backend *b)
{
	if (backend_forwards(b, flush))
		return backend_flush(b->inner);
	return b->ops->flush ? b->ops->flush(b) : 0;
}

/*
 * Clamp [pos, pos + *len) to the image: false when nothing is left (or
 * on error, then *err is set).
 */
static bool backend_clamp(struct backend *b, uint64_t pos, uint64_t *len,
			  int *err)
{
	int64_t size = backend_get_size(b);

	*err = 0;
	if (size < 0) {
		*err = (int)size;
		return false;
	}
	if (*len == 0 || pos >= (uint64_t)size)
		return false;
	if (*len > (uint64_t)size - pos)
		*len = (uint64_t)size - pos;
	return true;
}


/* Bytes of the next piece at pos: up to the next BACKEND_CHUNK multiple. */
static size_t backend_chunk(uint64_t pos, uint64_t left)
{
	uint64_t n = BACKEND_CHUNK - (pos & (BACKEND_CHUNK - 1));

	return (size_t)(n < left ? n : left);
}

/* One synchronous direct_IO_bvec of buf (page aligned, len <= CHUNK). */
static ssize_t backend_sync_io(struct backend *b, int rw, char *buf,
			       size_t len, uint64_t pos)
{
	struct bio_vec bvec[BACKEND_CHUNK / DIOLOOP_PAGE_SIZE];
	struct iov_iter iter;
	struct kiocb iocb = {
		.ki_rw = rw,
		.ki_pos = pos,
		.ki_iter = &iter,
		.ki_complete = NULL,
	};
	unsigned long nr = bvec_fill_pages(bvec, NULL, buf, len);

	iov_iter_init_bvec(&iter, bvec, nr, len, 0);
	return backend_direct_IO_bvec(b, &iocb);
}

/*
 * Default write_zeroes: write a zeroed, page-aligned buffer over the range
 * piece by piece, synchronously.  Worker thread.
 */
int backend_write_zero_pages(struct backend *b, uint64_t pos, uint64_t len)
{
	size_t buf_len = len < BACKEND_CHUNK ? (size_t)len : BACKEND_CHUNK;
	void *zeros;
	int ret = 0;

	buf_len = (buf_len + DIOLOOP_PAGE_SIZE - 1) & ~(DIOLOOP_PAGE_SIZE - 1);
	if (posix_memalign(&zeros, DIOLOOP_PAGE_SIZE, buf_len))
		return -ENOMEM;
	memset(zeros, 0, buf_len);
	while (len) {
		size_t n = backend_chunk(pos, len);
		ssize_t res = backend_sync_io(b, DIOLOOP_WRITE, zeros, n, pos);

		if (res < 0) {
			ret = (int)res;
			break;
		}
		if ((size_t)res != n) {
			/* direct_IO_bvec writes all or fails. */
			ret = -EIO;
			break;
		}
		pos += n;
		len -= n;
	}
	free(zeros);
	return ret;
}

/*
 * discard (or, !discard, write_zeroes) over a range: checked, forwarded
 * by a filter without the op, clamped to the size, then the op or its
 * default (discard: write_zeroes; write_zeroes: zeroed pages).  Worker
 * thread.
 */
static int backend_zero_range(struct backend *b, uint64_t pos, uint64_t len,
			      bool discard)
{
	int (*op)(struct backend *b, uint64_t pos, uint64_t len) =
		discard ? b->ops->discard : b->ops->write_zeroes;
	int err;

	if (b->flags & BACKEND_OPEN_RDONLY)
		return -EROFS;
	/* Clamped to the size below, so only the off_t range applies. */
	err = backend_range_within(pos, len, INT64_MAX);
	if (err < 0)
		return err;
	if (!op && b->ops->is_filter)
		return backend_zero_range(b->inner, pos, len, discard);
	if (!backend_clamp(b, pos, &len, &err))
		return err;
	if (op)
		return op(b, pos, len);
	return discard ? backend_write_zeroes(b, pos, len) :
			 backend_write_zero_pages(b, pos, len);
}

/* Deallocate a range; it reads as zeros after.  Worker thread. */
int backend_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	return backend_zero_range(b, pos, len, true);
}

/* Make a range read as zeros.  Worker thread. */
int backend_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	return backend_zero_range(b, pos, len, false);
}

/* Change the logical size.  Worker thread, no direct I/O in flight. */
int backend_resize(struct backend *b, uint64_t size)
{
	int ret;

	if (backend_forwards(b, resize))
		return backend_resize(b->inner, size);
	if (!b->ops->resize)
		return -EOPNOTSUPP;
	if (b->flags & BACKEND_OPEN_RDONLY)
		return -EROFS;
	ret = backend_check_range(b, 0, size);
	if (ret < 0)
		return ret;
	return b->ops->resize(b, size);
}

/*
 * Describe the extent at pos, clipped to len and the image: 0, -ENXIO at
 * or past the end, -EINVAL for len 0.  Worker thread.
 */
int backend_map(struct backend *b, uint64_t pos, uint64_t len,
		struct backend_extent *ext)
{
	int64_t size;
	uint64_t want;
	int ret;

	if (backend_forwards(b, map))
		return backend_map(b->inner, pos, len, ext);
	size = backend_get_size(b);
	if (size < 0)
		return (int)size;
	if (len == 0)
		return -EINVAL;
	if (pos >= (uint64_t)size)
		return -ENXIO;
	want = (uint64_t)size - pos < len ? (uint64_t)size - pos : len;
	if (!b->ops->map) {
		ext->len = want;
		ext->hole = false;
		return 0;
	}
	ret = b->ops->map(b, pos, want, ext);
	if (ret < 0)
		return ret;
	if (ext->len == 0) {
		g_warning("%s: map returned an empty extent at %llu",
			  b->path ? b->path : b->ops->name,
			  (unsigned long long)pos);
		return -EIO;
	}
	if (ext->len > want)
		ext->len = want;
	return 0;
}

/*
 * Share or copy len bytes from src to dst (same backend type): bytes done
 * or -errno; -EOPNOTSUPP / -EXDEV mean the caller copies.  Worker thread.
 */
ssize_t backend_clone_range(struct backend *src, uint64_t src_pos,
			    struct backend *dst, uint64_t dst_pos,
			    uint64_t len)
{
	int err;

	if (backend_forwards(src, clone_range))
		return backend_clone_range(src->inner, src_pos, dst, dst_pos,
					   len);
	if (backend_forwards(dst, clone_range))
		return backend_clone_range(src, src_pos, dst->inner, dst_pos,
					   len);
	/* A filter that implements clone_range is asked whichever side it
	 * is on (the destination's first): it unwraps the other side. */
	if (dst->ops->is_filter && dst->ops->clone_range)
		return dst->ops->clone_range(src, src_pos, dst, dst_pos, len);
	if (!src->ops->clone_range)
		return -EOPNOTSUPP;
	if (src->ops != dst->ops && !src->ops->is_filter)
		return -EXDEV;
	if (dst->flags & BACKEND_OPEN_RDONLY)
		return -EROFS;
	/* Nonsense in the source is -EINVAL; a target past its largest
	 * size -EFBIG, even where the clamp would shorten it. */
	if (backend_range_within(src_pos, len, INT64_MAX) < 0)
		return -EINVAL;
	err = backend_check_range(dst, dst_pos, len);
	if (err < 0)
		return err;
	if (!backend_clamp(src, src_pos, &len, &err) ||
	    !backend_clamp(dst, dst_pos, &len, &err))
		return err;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	return src->ops->clone_range(src, src_pos, dst, dst_pos, len);
}

/* Describe the image.  Worker thread. */
int backend_info(struct backend *b, struct backend_info *info)
{
	int64_t size;

	if (backend_forwards(b, info))
		return backend_info(b->inner, info);
	memset(info, 0, sizeof(*info));
	if (b->ops->info)
		return b->ops->info(b, info);
	size = backend_get_size(b);
	if (size < 0)
		return (int)size;
	g_strlcpy(info->format, b->ops->name, sizeof(info->format));
	info->size = (uint64_t)size;
	info->allocated = (uint64_t)size;
	return 0;
}

int backend_times(struct backend *b, struct backend_times *t)
{
	if (backend_forwards(b, times))
		return backend_times(b->inner, t);
	memset(t, 0, sizeof(*t));
	return b->ops->times ? b->ops->times(b, t) : -EOPNOTSUPP;
}

struct backend *backend_below_filters(struct backend *b)
{
	while (b->ops->is_filter)
		b = b->inner;
	return b;
}

struct backend *backend_find_filter(struct backend *b,
				    const struct backend_ops *ops)
{
	for (; b; b = b->ops->is_filter ? b->inner : NULL)
		if (b->ops == ops)
			return b;
	return NULL;
}

void backend_stack_replace(struct backend **top, struct backend *old,
			   struct backend *new)
{
	struct backend *b;

	if (*top == old) {
		*top = new;
		return;
	}
	for (b = *top; b->ops->is_filter; b = b->inner) {
		if (b->inner == old) {
			b->inner = new;
			b->limits = new->limits;
			return;
		}
	}
	g_assert_not_reached();
}

struct backend *backend_filter_swap_inner(struct backend *b,
					  struct backend *inner)
{
	struct backend *old = b->inner;

	g_assert(b->ops->is_filter);
	b->inner = inner;
	b->limits = inner->limits;
	return old;
}

/* Each thread's bounce buffer for backend_rw_buf, BACKEND_CHUNK bytes,
 * kept from call to call: tools and tests call it in loops, and a fresh
 * mebibyte each time costs its page faults every time. */
static GPrivate rw_bounce_key = G_PRIVATE_INIT(free);
static __thread bool rw_bounce_busy;	/* a call on this thread has it */

/* This thread's bounce buffer, or a new one if a call further up the
 * stack (a format reading its store) holds it.  NULL: out of memory. */
static void *rw_bounce_get(bool *mine)
{
	void *bounce = g_private_get(&rw_bounce_key);

	*mine = !rw_bounce_busy;
	if (*mine && bounce) {
		rw_bounce_busy = true;
		return bounce;
	}
	if (posix_memalign(&bounce, DIOLOOP_PAGE_SIZE, BACKEND_CHUNK))
		return NULL;
	if (*mine) {
		g_private_set(&rw_bounce_key, bounce);
		rw_bounce_busy = true;
	}
	return bounce;
}

static void rw_bounce_put(void *bounce, bool mine)
{
	if (mine)
		rw_bounce_busy = false;
	else
		free(bounce);
}

/*
 * Synchronous read or write of a flat buffer through page-aligned bounce
 * pages, piece by piece.  Like pread/pwrite: the bytes done, or -errno if
 * the first piece failed; a read stops at EOF.
 */
static ssize_t backend_rw_buf(struct backend *b, int rw, void *buf,
			      size_t len, uint64_t pos)
{
	size_t done = 0;
	void *bounce;
	bool mine;
	ssize_t ret = 0;

	if (len == 0)
		return 0;
	if (len > SSIZE_MAX || pos > INT64_MAX)
		return -EINVAL;
	/* A write is checked whole, before its first piece goes. */
	if (rw == DIOLOOP_WRITE)
		ret = backend_check_write(b, pos, len);
	else if (len > INT64_MAX - pos)
		ret = -EINVAL;
	if (ret < 0)
		return ret;
	bounce = rw_bounce_get(&mine);
	if (!bounce)
		return -ENOMEM;
	while (done < len) {
		size_t n = backend_chunk(pos + done, len - done);

		if (rw == DIOLOOP_WRITE)
			memcpy(bounce, (const char *)buf + done, n);
		ret = backend_sync_io(b, rw, bounce, n, pos + done);
		if (ret < 0)
			break;
		if (rw == DIOLOOP_READ)
			memcpy((char *)buf + done, bounce, (size_t)ret);
		done += (size_t)ret;
		if ((size_t)ret < n) {
			/* Reads: EOF.  Writes: direct_IO_bvec writes all or
			 * fails, so this is the backend's bug. */
			if (rw == DIOLOOP_WRITE)
				ret = -EIO;
			break;
		}
	}
	rw_bounce_put(bounce, mine);
	if (done)
		return (ssize_t)done;
	return ret < 0 ? ret : 0;
}

/* Synchronous read for tools and tests; any thread but a completion one. */
ssize_t backend_pread(struct backend *b, void *buf, size_t len, uint64_t pos)
{
	return backend_rw_buf(b, DIOLOOP_READ, buf, len, pos);
}

/* Synchronous write for tools and tests; any thread but a completion one. */
ssize_t backend_pwrite(struct backend *b, const void *buf, size_t len,
		       uint64_t pos)
{
	return backend_rw_buf(b, DIOLOOP_WRITE, (void *)buf, len, pos);
}
