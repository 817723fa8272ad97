/* SPDX-License-Identifier: MIT */
/*
 * The "raw" backend (ext-like, seeds 009/010): a plain image file on the
 * host, opened O_DIRECT and driven through the dio engine over libaio.
 * The mapping is direct (image offset = file offset); holes are found with
 * SEEK_DATA/SEEK_HOLE and read as zeros without I/O.
 *
 * Sizes, as ext4's i_size / i_disksize:
 *  - r->size is the visible size (i_size): the file's size rounded down to
 *    request_alignment at open (a trailing partial sector is ignored, as
 *    the kernel loop driver does), advanced only when an extending write
 *    has completed, to round_up(end, request_alignment).  Reads clamp to
 *    it, so no one reads a region whose write has not completed.
 *  - the orphan record's size (ext.recorded) is the durable one
 *    (i_disksize): while the record exists on disk, recovery truncates the
 *    image back to it (orphan.h).  Writes, growth and the record: extend.c;
 *    the block mapping: map.c.
 *
 * Threads: open/close on the control thread; direct_IO_bvec anywhere;
 * flush, discard, write_zeroes, resize, map, info on worker threads (see
 * backend.h).  Callbacks (write completions, record steps, range grants)
 * run on the aio completion thread and never block on I/O, except that
 * truncating after a failed extending write is an ftruncate() there
 * (rare; a metadata operation).
 */
#include "backends/raw/raw_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/stat.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/dio.h"
#include "backends/iorec.h"
#include "backends/raw/orphan.h"
#include "backends/raw/create.h"
#include "iter/obj_cache.h"

#define RAW_AIO_DEPTH 256
#define RAW_MAX_TRANSFER (1u << 20)
#define RAW_MAX_ALIGN (1u << 16)

/* ---- reads ---- */

/* The map caches of asynchronous reads, kept per thread
 * (iter/obj_cache.h): a read takes no heap memory. */
static struct dioloop_obj_cache raw_map_caches =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct raw_map_cache), 256);

/* end_io of an asynchronous read: give its map cache back. */
static ssize_t raw_read_end_io(struct kiocb *iocb, void *priv, ssize_t res)
{
	dioloop_obj_put(&raw_map_caches, priv);
	return res;
}

/* A read: clamp to the visible size (0 at/after EOF, short across it). */
static ssize_t raw_read(struct backend *b, struct raw *r, struct kiocb *iocb)
{
	uint64_t size = atomic_load(&r->size), pos = iocb->ki_pos;
	size_t count = iov_iter_count(iocb->ki_iter);
	struct raw_map_cache stack_map = { 0 }, *mc = &stack_map;
	struct dio_params p;

	if (pos >= size)
		return 0;
	/* bio_vec iterators cannot be shortened: pass the count. */
	if (count > size - pos)
		count = (size_t)(size - pos);
	if (!is_sync_kiocb(iocb)) {
		mc = dioloop_obj_get(&raw_map_caches);
		*mc = (struct raw_map_cache){ 0 };
	}
	raw_dio_params(r, &p, count, mc, DIO_SKIP_HOLES);
	if (mc != &stack_map) {
		p.end_io = raw_read_end_io;
		p.end_io_private = mc;
	}
	return blockdev_direct_IO_bvec(b, iocb, &p);
}

/* Read or write (backend.h).  Any thread. */
static ssize_t raw_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	struct raw *r = b->priv;

	if (iov_iter_count(iocb->ki_iter) == 0)
		return 0;
	if (iocb->ki_rw == DIOLOOP_WRITE)
		return raw_write(b, r, iocb);
	return raw_read(b, r, iocb);
}

/* ---- open and close ---- */

/*
 * Direct-I/O alignment of the file: STATX_DIOALIGN when the host reports
 * it, else a probe (an O_DIRECT read of 512 bytes at 0 works: 512, else
 * 4096).  A file shorter than 512 bytes cannot be probed (reads past EOF
 * succeed before alignment is checked): 4096, the safe guess.
 */
static void raw_probe_alignment(struct raw *r, const struct stat *st,
				unsigned int *offset_align,
				unsigned int *mem_align)
{
	struct statx stx;
	void *buf;

	if (statx(r->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align &&
	    stx.stx_dio_mem_align) {
		*offset_align = stx.stx_dio_offset_align;
		*mem_align = stx.stx_dio_mem_align;
		return;
	}
	*offset_align = *mem_align = 4096;
	if (st->st_size < 512 || posix_memalign(&buf, 4096, 4096))
		return;
	if (pread(r->fd, buf, 512, 0) >= 0)
		*offset_align = *mem_align = 512;
	else if (errno != EINVAL)
		g_warning("%s: probing direct-I/O alignment: %s; assuming 4096",
			  r->b->path, g_strerror(errno));
	free(buf);
}

/*
 * The host file system's largest file size (s_maxbytes: 16 TiB on ext4
 * with 4 KiB blocks, 8 EiB on xfs): the largest offset lseek(SEEK_SET)
 * accepts, found by bisection without changing the file.  INT64_MAX when
 * lseek refuses even 0 (then the host's own EFBIG still applies).
 */
static uint64_t raw_probe_max_file_size(int fd)
{
	uint64_t lo = 0, hi = INT64_MAX;

	if (lseek(fd, 0, SEEK_SET) < 0)
		return INT64_MAX;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;

		if (lseek(fd, (off_t)mid, SEEK_SET) >= 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	lseek(fd, 0, SEEK_SET);
	return lo;
}

/* Fill b->limits and the engine's block sizes. */
static int raw_set_limits(struct raw *r, const struct stat *st)
{
	struct backend_limits *lim = &r->b->limits;
	unsigned int off, mem, align;

	raw_probe_alignment(r, st, &off, &mem);
	/* The engine checks one alignment for offsets, lengths and memory:
	 * the stricter of the two (512 at least, a sector). */
	align = MAX(MAX(off, mem), 512u);
	if (align & (align - 1) || align > RAW_MAX_ALIGN) {
		g_warning("%s: unsupported direct-I/O alignment %u (offset %u, memory %u)",
			  r->b->path, align, off, mem);
		return -EINVAL;
	}
	r->ra = align;
	r->dev_blkbits = (unsigned int)g_bit_nth_lsf(align, -1);
	r->blkbits = MAX(DIOLOOP_PAGE_SHIFT, r->dev_blkbits);
	r->block_size = UINT64_C(1) << r->blkbits;
	*lim = (struct backend_limits){
		.request_alignment = align,
		.mem_alignment = MAX(mem, 1u),
		.block_size = (uint32_t)r->block_size,
		.max_transfer = RAW_MAX_TRANSFER,
		.max_segs = IOV_MAX,
		/* Whole blocks: the engine may write the last one whole. */
		.max_size = round_down_u64(raw_probe_max_file_size(r->fd),
					   r->block_size),
	};
	return 0;
}

/* Free what open set up (any part of it). */
static void raw_free(struct raw *r)
{
	if (r->orphan.name)
		orphan_destroy(&r->orphan);
	if (r->fd >= 0)
		close(r->fd);
	dio_engine_clear(&r->dio);
	g_mutex_clear(&r->flush_lock);
	g_mutex_clear(&r->ext.lock);
	g_cond_clear(&r->ext.cond);
	g_free(r);
}

/* Open the image, recover an interrupted extension, probe limits.
 * Control thread. */
static int raw_open(struct backend *b, const struct backend_open_args *args)
{
	struct raw *r = g_new0(struct raw, 1);
	int flags = O_DIRECT | O_CLOEXEC;
	uint64_t limit, size, file_size;
	struct stat st;
	int ret;

	r->b = b;
	r->rdonly = args->flags & BACKEND_OPEN_RDONLY;
	r->growable = args->flags & BACKEND_OPEN_GROWABLE;
	r->sync = args->flags & BACKEND_OPEN_SYNC;
	r->store = args->flags & BACKEND_OPEN_STORE;
	dio_engine_init(&r->dio);
	g_mutex_init(&r->flush_lock);
	g_mutex_init(&r->ext.lock);
	g_cond_init(&r->ext.cond);
	r->ext.waiters_tail = &r->ext.waiters;
	r->orphan.dirfd = -1;
	b->priv = r;

	flags |= r->rdonly ? O_RDONLY : O_RDWR;
	if (r->sync)
		flags |= O_DSYNC;
	r->fd = backend_open_image(args, flags);
	if (r->fd < 0) {
		ret = backend_set_error(args->error, r->fd, "%s: open%s: %s",
					args->path, r->fd == -EINVAL ?
					" (O_DIRECT unsupported here?)" : "",
					g_strerror(-r->fd));
		goto out_free;
	}
	if (fstat(r->fd, &st) < 0) {
		ret = -errno;
		goto out_free;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = backend_set_error(args->error, -EINVAL,
					"%s: not a regular file", args->path);
		goto out_free;
	}
	ret = raw_set_limits(r, &st);
	if (ret < 0)
		goto out_free;
	/* A format's store: the format keeps the size (backend.h). */
	limit = UINT64_MAX;
	if (!r->store) {
		ret = orphan_init(&r->orphan, b->path, args->file, r->fd);
		if (ret < 0)
			goto out_free;
		ret = orphan_recover(&r->orphan, r->fd, r->rdonly, &limit);
		if (ret < 0)
			goto out_free;
	}
	if (fstat(r->fd, &st) < 0) {
		ret = -errno;
		goto out_free;
	}
	file_size = MIN((uint64_t)st.st_size, limit);
	size = round_down_u64(file_size, r->ra);
	if (size != file_size)
		g_warning("%s: size %llu is not a multiple of %u: the last %llu bytes are ignored",
			  args->path, (unsigned long long)file_size, r->ra,
			  (unsigned long long)(file_size - size));
	atomic_init(&r->size, size);
	atomic_init(&r->all_data, !r->store && raw_has_no_hole(r->fd, size));
	atomic_init(&r->wb_err, 0);

	if (!b->aio) {
		ret = dioloop_aio_new(RAW_AIO_DEPTH, "raw-aio", &r->own_aio);
		if (ret < 0)
			goto out_free;
		b->aio = r->own_aio;
	}
	return 0;

out_free:
	b->priv = NULL;
	raw_free(r);
	return ret;
}

/* Release the image; nothing is in flight.  A record left from writes
 * since the last flush is removed after an fdatasync.  Control thread. */
static void raw_close(struct backend *b)
{
	struct raw *r = b->priv;

	g_assert(r->ext.inflight == 0 && r->ext.waiters == NULL);
	if (r->orphan.present && !r->rdonly) {
		if (dioloop_iorec_fdatasync(r->fd) < 0)
			g_warning("%s: fdatasync at close: %s; keeping the orphan record",
				  b->path, g_strerror(errno));
		else
			orphan_remove(&r->orphan);
	}
	if (r->own_aio) {
		dioloop_aio_free(r->own_aio);
		b->aio = NULL;
	}
	b->priv = NULL;
	raw_free(r);
}

/* Visible size.  Any thread. */
static int64_t raw_get_size(struct backend *b)
{
	struct raw *r = b->priv;

	return (int64_t)atomic_load(&r->size);
}

/* ---- flush, discard, write_zeroes, info ---- */

/*
 * Make every completed write durable: fdatasync() on this worker thread
 * (it may block; IOCB_CMD_FDSYNC would only move the same vfs_fsync to a
 * kernel workqueue and make us wait for it), then settle the record.
 */
static int raw_flush(struct backend *b)
{
	struct raw *r = b->priv;
	uint64_t size;
	int ret = 0, err;

	g_mutex_lock(&r->flush_lock);
	size = atomic_load(&r->size);
	if (dioloop_iorec_fdatasync(r->fd) < 0)
		ret = -errno;
	else if (!r->sync && !r->rdonly)
		ret = raw_flush_record(r, size);
	err = atomic_exchange(&r->wb_err, 0);
	g_mutex_unlock(&r->flush_lock);
	return ret ? ret : err;
}

/* fallocate() over a range held exclusively against the engine's
 * read-modify-writes (which would write back stale bytes).  0 or
 * -errno. */
static int raw_fallocate_locked(struct raw *r, int mode, uint64_t pos,
				uint64_t len)
{
	struct range_lock rl;
	int ret = 0;

	range_lock_init(&rl, round_down_u64(pos, r->ra),
			round_up_u64(pos + len, r->ra), true, NULL);
	range_lock_acquire_wait(&r->dio.range_locks, &rl);
	raw_holes_made(r);
	if (dioloop_iorec_fallocate(r->fd, mode, (off_t)pos, (off_t)len) < 0)
		ret = -errno;
	range_lock_release(&r->dio.range_locks, &rl);
	return ret;
}

/* Make a range read as zeros: ZERO_RANGE, or zero pages where the host
 * cannot.  Worker thread; the core clamped the range to the size. */
static int raw_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	struct raw *r = b->priv;
	int ret;

	ret = raw_fallocate_locked(r, FALLOC_FL_ZERO_RANGE |
				      FALLOC_FL_KEEP_SIZE, pos, len);
	if (ret == -EOPNOTSUPP || ret == -EINVAL)
		ret = backend_write_zero_pages(b, pos, len);
	return ret;
}

/*
 * Deallocate: punch the block-aligned part (it becomes a hole, SEEK_HOLE
 * finds it); write zeros over an unaligned head and tail.  Worker
 * thread; the core clamped the range to the size.
 */
static int raw_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	struct raw *r = b->priv;
	uint64_t end = pos + len;
	uint64_t astart = round_up_u64(pos, r->block_size);
	uint64_t aend = round_down_u64(end, r->block_size);
	int ret;

	if (astart >= aend)
		return backend_write_zero_pages(b, pos, len);
	if (pos < astart) {
		ret = backend_write_zero_pages(b, pos, astart - pos);
		if (ret < 0)
			return ret;
	}
	if (aend < end) {
		ret = backend_write_zero_pages(b, aend, end - aend);
		if (ret < 0)
			return ret;
	}
	ret = raw_fallocate_locked(r, FALLOC_FL_PUNCH_HOLE |
				      FALLOC_FL_KEEP_SIZE, astart,
				   aend - astart);
	if (ret == -EOPNOTSUPP)
		ret = raw_write_zeroes(b, astart, aend - astart);
	return ret;
}

/* Format, size and host allocation.  Worker thread. */
static int raw_info(struct backend *b, struct backend_info *info)
{
	struct raw *r = b->priv;
	struct stat st;

	if (fstat(r->fd, &st) < 0)
		return -errno;
	g_strlcpy(info->format, "raw", sizeof(info->format));
	info->size = atomic_load(&r->size);
	info->allocated = (uint64_t)st.st_blocks * 512;
	dio_engine_get_stats(&r->dio, info);
	return 0;
}

const struct backend_ops raw_backend_ops = {
	.name = "raw",
	.open = raw_open,
	.close = raw_close,
	.get_size = raw_get_size,
	.direct_IO_bvec = raw_direct_IO_bvec,
	.flush = raw_flush,
	.discard = raw_discard,
	.write_zeroes = raw_write_zeroes,
	.resize = raw_resize,
	.map = raw_map,
	.info = raw_info,
	.probe = raw_probe,
	.create = raw_create,
	.create_align = 512,
};
