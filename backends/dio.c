/* SPDX-License-Identifier: MIT */
/*
 * The generic direct-I/O engine (see dio.h for what it does).
 *
 * A request (struct dio) runs as one or two phases.  A phase is a set of
 * I/Os over one block-aligned byte range and one bio_vec memory iterator:
 *
 *   aligned read           READ(user memory)
 *   aligned write          lock shared -> WRITE(user memory)
 *   bounced read           READ(bounce) -> copy out
 *   bounced write          lock shared -> copy in -> WRITE(bounce)
 *   read-modify-write      lock exclusive -> READ(head/tail blocks of the
 *                          bounce) -> copy in -> WRITE(bounce)
 *
 * References (dio->refcount, atomic): one for the submitter, held until
 * dio_post_submission(), and one for the operation, dropped when its last
 * phase ends.  Whoever drops the last one finishes the request: inline in
 * the submitter (returning the result) or through ki_complete (then the
 * submitter returned -EIOCBQUEUED).  Each phase counts its I/Os plus one
 * for the thread starting it (phase_pending, atomic), raised before the
 * first I/O is submitted, so a phase can never end while it is still being
 * submitted.
 */
#include "backends/dio.h"

#include <errno.h>
#include <glib.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "iter/obj_cache.h"

#define DIO_DEFAULT_MAX_TRANSFER (1u << 20)
#define DIO_DEFAULT_MAX_SEGS 1024u

enum dio_step {
	DIO_STEP_READ_USER,	/* read straight into the caller's pages */
	DIO_STEP_WRITE_USER,	/* write straight from the caller's pages */
	DIO_STEP_READ_BOUNCE,	/* read whole blocks into the bounce */
	DIO_STEP_RMW_READ,	/* read the partial head/tail blocks */
	DIO_STEP_WRITE_BOUNCE,	/* write the bounce */
};

struct dio {
	struct backend *b;
	struct kiocb *iocb;
	struct dio_params p;		/* the caller's parameters */
	struct iov_iter user;		/* copy of iocb->ki_iter, not advanced */
	int rw;
	uint64_t pos;			/* request range */
	size_t count;
	unsigned int blkbits;		/* block size the request runs at */
	bool is_async;

	atomic_int refcount;
	atomic_int phase_pending;
	atomic_int error;		/* first error wins; 0 = none */
	enum dio_step step;

	/* Bounce buffer over [bpos, bpos + blen), whole blocks. */
	void *bounce;
	uint64_t bpos;
	size_t blen;
	struct bio_vec *bounce_bvec;

	struct range_lock rl;
	bool locked;

	/* The current phase's I/Os; iovecs indexed until submission. */
	struct dio_io *ios;
	int nr_ios, cap_ios;
	struct iovec *iovs;
	int nr_iovs, cap_iovs;
	int *io_first_iov;		/* per I/O: index of its first iovec */
	int cap_first_iov;

	/* Synchronous callers sleep here until the operation ends. */
	GMutex wait_lock;
	GCond wait_cond;
	bool op_done;			/* protected by wait_lock */
};

static void dio_phase_start(struct dio *dio);

bool dio_aligned(uint64_t offset, unsigned int *blkbits,
		 unsigned int dev_blkbits)
{
	uint64_t mask = (UINT64_C(1) << *blkbits) - 1;

	if (offset & mask) {
		*blkbits = dev_blkbits;
		mask = (UINT64_C(1) << *blkbits) - 1;
		return !(offset & mask);
	}
	return true;
}

static void dio_set_error(struct dio *dio, int err)
{
	int expected = 0;

	atomic_compare_exchange_strong(&dio->error, &expected, err);
}

/* Requests kept per thread (iter/obj_cache.h), up to 128, each with the
 * I/O arrays it last grew: an aligned request takes no heap memory.
 * Arrays past these sizes (a request split into many I/Os, a mebibyte
 * over more than 256 separate pages) are not kept, so a kept request
 * holds at most 6.7 KiB, and a thread at most 850 KiB. */
#define DIO_KEEP_IOS 16
#define DIO_KEEP_IOVS 256

static void dio_drop_arrays(void *obj)
{
	struct dio *dio = obj;

	g_free(dio->ios);
	g_free(dio->iovs);
	g_free(dio->io_first_iov);
}

static struct dioloop_obj_cache dio_cache =
	DIOLOOP_OBJ_CACHE_INIT_DROP(sizeof(struct dio), 128, dio_drop_arrays);

/* A zeroed dio, with the arrays its slot kept. */
static struct dio *dio_alloc(void)
{
	struct dio *dio = dioloop_obj_get(&dio_cache);
	struct dio_io *ios = dio->ios;
	struct iovec *iovs = dio->iovs;
	int *first_iov = dio->io_first_iov;
	int cap_ios = dio->cap_ios, cap_iovs = dio->cap_iovs;
	int cap_first_iov = dio->cap_first_iov;

	memset(dio, 0, sizeof(*dio));
	dio->ios = ios;
	dio->cap_ios = cap_ios;
	dio->iovs = iovs;
	dio->cap_iovs = cap_iovs;
	dio->io_first_iov = first_iov;
	dio->cap_first_iov = cap_first_iov;
	return dio;
}

static void dio_free(struct dio *dio)
{
	if (!dio->is_async) {
		g_mutex_clear(&dio->wait_lock);
		g_cond_clear(&dio->wait_cond);
	}
	free(dio->bounce);
	g_free(dio->bounce_bvec);
	if (dio->cap_ios > DIO_KEEP_IOS || dio->cap_first_iov > DIO_KEEP_IOS) {
		g_clear_pointer(&dio->ios, g_free);
		g_clear_pointer(&dio->io_first_iov, g_free);
		dio->cap_ios = dio->cap_first_iov = 0;
	}
	if (dio->cap_iovs > DIO_KEEP_IOVS) {
		g_clear_pointer(&dio->iovs, g_free);
		dio->cap_iovs = 0;
	}
	dioloop_obj_put(&dio_cache, dio);
}

/* The request's result, after end_io; frees the dio. */
static ssize_t dio_complete(struct dio *dio)
{
	int err = atomic_load(&dio->error);
	ssize_t res = err ? err : (ssize_t)dio->count;

	if (dio->p.end_io)
		res = dio->p.end_io(dio->iocb, dio->p.end_io_private, res);
	/* A write holds its blocks through end_io, so a backend can record
	 * its new mappings there before an overlapping read-modify-write
	 * may read them. */
	if (dio->locked) {
		dio->locked = false;
		range_lock_release(&dio->p.engine->range_locks, &dio->rl);
	}
	dio_free(dio);
	return res;
}

/* Drop a reference; the last one out finishes through ki_complete (the
 * submitter's own drop is in dio_post_submission). */
static void dio_put_operation(struct dio *dio)
{
	int old = atomic_fetch_sub(&dio->refcount, 1);

	if (old == 1) {
		struct kiocb *iocb = dio->iocb;
		ssize_t res = dio_complete(dio);

		iocb->ki_complete(iocb, res);
	} else if (old == 2 && !dio->is_async) {
		/* Only the sleeping submitter's reference is left.  After
		 * the unlock the submitter may free the dio at once. */
		g_mutex_lock(&dio->wait_lock);
		dio->op_done = true;
		g_cond_signal(&dio->wait_cond);
		g_mutex_unlock(&dio->wait_lock);
	}
}

/* The phase's I/Os are all done: go on to the next step or end. */
static void dio_phase_end(struct dio *dio)
{
	size_t off;

	if (atomic_load(&dio->error)) {
		dio_put_operation(dio);
		return;
	}
	switch (dio->step) {
	case DIO_STEP_READ_BOUNCE:
		/* The caller's iterator copy is ours to advance. */
		iov_iter_copy_from_buf(&dio->user,
				       (char *)dio->bounce + (dio->pos - dio->bpos),
				       dio->count);
		break;
	case DIO_STEP_RMW_READ:
		off = dio->pos - dio->bpos;
		iov_iter_copy_to_buf((char *)dio->bounce + off, &dio->user,
				     dio->count);
		dio->step = DIO_STEP_WRITE_BOUNCE;
		dio_phase_start(dio);
		return;
	default:
		break;
	}
	dio_put_operation(dio);
}

static void dio_phase_put(struct dio *dio)
{
	if (atomic_fetch_sub(&dio->phase_pending, 1) == 1)
		dio_phase_end(dio);
}

void dio_io_complete(struct dio_io *io, long res)
{
	struct dio *dio = io->dio;

	if (res < 0) {
		dio_set_error(dio, (int)res);
	} else if ((size_t)res < io->len) {
		if (io->write) {
			/* The host took part of a write: on a local
			 * filesystem only a full disk does that. */
			dio_set_error(dio, -ENOSPC);
		} else {
			/* Short read: past the host file's end, zeros. */
			size_t skip = (size_t)res;
			int i;

			for (i = 0; i < io->nr_iov; i++) {
				struct iovec *v = &io->iov[i];

				if (skip >= v->iov_len) {
					skip -= v->iov_len;
					continue;
				}
				memset((char *)v->iov_base + skip, 0,
				       v->iov_len - skip);
				skip = 0;
			}
		}
	}
	dio_phase_put(dio);
}

static void dio_aio_done(struct dioloop_aio_req *req, long res)
{
	dio_io_complete(container_of(req, struct dio_io, aio), res);
}

static void *dio_grow(void *array, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return array;
	*cap = *cap ? *cap * 2 : 8;
	if (*cap < need)
		*cap = need;
	return g_realloc_n(array, (gsize)*cap, elem);
}

/* Append memory [addr, addr + len) at phys on fd to the phase's I/Os,
 * extending the last I/O when the target and memory line up. */
static void dio_add_piece(struct dio *dio, int fd, uint64_t phys, char *addr,
			  size_t len)
{
	const struct backend_limits *lim = &dio->b->limits;
	size_t max_transfer = lim->max_transfer ? lim->max_transfer :
						  DIO_DEFAULT_MAX_TRANSFER;
	unsigned int max_segs = lim->max_segs ? lim->max_segs :
						DIO_DEFAULT_MAX_SEGS;
	struct dio_io *io = dio->nr_ios ? &dio->ios[dio->nr_ios - 1] : NULL;

	if (io && io->fd == fd && io->phys + io->len == phys &&
	    io->len + len <= max_transfer) {
		struct iovec *last = &dio->iovs[dio->nr_iovs - 1];

		if ((char *)last->iov_base + last->iov_len == addr) {
			last->iov_len += len;
			io->len += len;
			return;
		}
		if ((unsigned int)io->nr_iov < max_segs) {
			dio->iovs = dio_grow(dio->iovs, &dio->cap_iovs,
					     dio->nr_iovs + 1,
					     sizeof(*dio->iovs));
			dio->iovs[dio->nr_iovs++] = (struct iovec){ addr, len };
			io->nr_iov++;
			io->len += len;
			return;
		}
	}
	dio->ios = dio_grow(dio->ios, &dio->cap_ios, dio->nr_ios + 1,
			    sizeof(*dio->ios));
	dio->io_first_iov = dio_grow(dio->io_first_iov, &dio->cap_first_iov,
				     dio->nr_ios + 1, sizeof(int));
	io = &dio->ios[dio->nr_ios];
	memset(io, 0, sizeof(*io));
	io->dio = dio;
	io->write = dio->step == DIO_STEP_WRITE_USER ||
		    dio->step == DIO_STEP_WRITE_BOUNCE;
	io->fd = fd;
	io->phys = phys;
	io->len = len;
	io->nr_iov = 1;
	dio->io_first_iov[dio->nr_ios++] = dio->nr_iovs;
	dio->iovs = dio_grow(dio->iovs, &dio->cap_iovs, dio->nr_iovs + 1,
			     sizeof(*dio->iovs));
	dio->iovs[dio->nr_iovs++] = (struct iovec){ addr, len };
}

/*
 * Build the I/Os for [pos, pos + len) (block aligned) over memory mem
 * (bio_vec kind, not advanced): map through get_block, zero-fill holes on
 * reads, coalesce.  0 or -errno.
 */
static int dio_build(struct dio *dio, uint64_t pos, size_t len,
		     const struct iov_iter *mem)
{
	struct backend *b = dio->b;
	struct dio_stats *stats = &dio->p.engine->stats;
	bool create = dio->step == DIO_STEP_WRITE_USER ||
		      dio->step == DIO_STEP_WRITE_BOUNCE;
	uint64_t end = pos + len, map_pos = 0;
	struct dio_map map = { 0 };
	bool have_map = false;
	struct iov_iter it = *mem;

	while (pos < end) {
		const struct bio_vec *bv = iov_iter_bvec(&it);
		size_t seg = bv->bv_len - it.iov_offset;
		char *addr = (char *)bv->bv_page + bv->bv_offset +
			     it.iov_offset;

		if (seg > end - pos)
			seg = end - pos;
		iov_iter_advance(&it, seg);
		while (seg) {
			size_t n;

			if (!have_map || pos >= map_pos + map.len) {
				int ret = dio->p.get_block(b, dio->p.map_private,
							   pos, end - pos,
							   create, &map);

				if (ret < 0)
					return ret;
				if (map.len == 0 || (create && map.hole)) {
					g_warning("%s: get_block returned a %s at %llu",
						  b->path ? b->path : b->ops->name,
						  map.len ? "hole for a write" :
							    "zero-length map",
						  (unsigned long long)pos);
					return -EIO;
				}
				map_pos = pos;
				have_map = true;
				/* Without DIO_SKIP_HOLES a hole is read from
				 * the target like data. */
				if (map.hole && !(dio->p.flags & DIO_SKIP_HOLES))
					map.hole = false;
				if (map.hole)
					atomic_fetch_add(&stats->holes, 1);
			}
			n = map_pos + map.len - pos;
			if (n > seg)
				n = seg;
			if (map.hole)
				memset(addr, 0, n);
			else
				dio_add_piece(dio, map.fd,
					      map.phys + (pos - map_pos), addr,
					      n);
			pos += n;
			addr += n;
			seg -= n;
		}
	}
	return 0;
}

/* Submit the built I/Os of the phase. */
static void dio_submit(struct dio *dio)
{
	struct backend *b = dio->b;
	int i, n = dio->nr_ios;

	atomic_fetch_add(&dio->p.engine->stats.ios, n);
	atomic_fetch_add(&dio->p.engine->stats.segs, dio->nr_iovs);
	for (i = 0; i < n; i++)
		dio->ios[i].iov = &dio->iovs[dio->io_first_iov[i]];
	if (dio->p.submit_io) {
		struct dio_io **ios = g_newa(struct dio_io *, n);

		for (i = 0; i < n; i++)
			ios[i] = &dio->ios[i];
		dio->p.submit_io(b, ios, n);
	} else {
		struct dioloop_aio_req **reqs = g_newa(struct dioloop_aio_req *, n);

		for (i = 0; i < n; i++) {
			struct dio_io *io = &dio->ios[i];

			dioloop_aio_prep_rw(&io->aio, io->write, io->fd,
					    io->iov, io->nr_iov,
					    (off_t)io->phys, dio_aio_done);
			reqs[i] = &io->aio;
		}
		/* Nobody waits for an asynchronous one: its completions
		 * can run on this thread, if it reaps a context of its own. */
		if (dio->is_async)
			dioloop_aio_submit_here(b->aio, reqs, n);
		else
			dioloop_aio_submit(b->aio, reqs, n);
	}
}

/* The bounce's memory as a bio_vec iterator over [pos, pos + len). */
static void dio_bounce_iter(struct dio *dio, struct iov_iter *it, uint64_t pos,
			    size_t len)
{
	size_t nr = (dio->blen + DIOLOOP_PAGE_SIZE - 1) >> DIOLOOP_PAGE_SHIFT;

	iov_iter_init_bvec(it, dio->bounce_bvec, nr, dio->blen, pos - dio->bpos);
	it->count = len;
}

/*
 * Start the current step's phase: build its I/Os and submit them.  Runs on
 * the submitter, or on the thread that granted the range or ended the
 * previous phase.
 */
static void dio_phase_start(struct dio *dio)
{
	size_t blk = (size_t)1 << dio->blkbits;
	struct iov_iter mem;
	int ret = 0;

	atomic_store(&dio->phase_pending, 1);
	dio->nr_ios = 0;
	dio->nr_iovs = 0;
	switch (dio->step) {
	case DIO_STEP_READ_USER:
	case DIO_STEP_WRITE_USER:
		ret = dio_build(dio, dio->pos, dio->count, &dio->user);
		break;
	case DIO_STEP_READ_BOUNCE:
	case DIO_STEP_WRITE_BOUNCE:
		dio_bounce_iter(dio, &mem, dio->bpos, dio->blen);
		ret = dio_build(dio, dio->bpos, dio->blen, &mem);
		break;
	case DIO_STEP_RMW_READ: {
		uint64_t end = dio->pos + dio->count;
		uint64_t head = dio->bpos, tail = dio->bpos + dio->blen - blk;
		bool need_head = dio->pos != head;
		bool need_tail = end != tail + blk;

		/* Read only the blocks the write covers in part; the I/Os
		 * of both are built before either is submitted. */
		if (need_head && need_tail && head + blk >= tail) {
			dio_bounce_iter(dio, &mem, head, tail + blk - head);
			ret = dio_build(dio, head, tail + blk - head, &mem);
			break;
		}
		if (need_head) {
			dio_bounce_iter(dio, &mem, head, blk);
			ret = dio_build(dio, head, blk, &mem);
		}
		if (!ret && need_tail) {
			dio_bounce_iter(dio, &mem, tail, blk);
			ret = dio_build(dio, tail, blk, &mem);
		}
		break;
	}
	}
	if (ret < 0) {
		dio_set_error(dio, ret);
	} else if (dio->nr_ios) {
		atomic_fetch_add(&dio->phase_pending, dio->nr_ios);
		dio_submit(dio);
	}
	dio_phase_put(dio);
}

/* The range lock was granted on a completion thread: start now. */
static void dio_range_granted(struct range_lock *rl)
{
	struct dio *dio = container_of(rl, struct dio, rl);

	dio_phase_start(dio);
}

/*
 * Start the operation: writes take their block range first (exclusive for
 * read-modify-write), then the first phase runs here or on the thread that
 * grants the range.
 */
static void dio_operation_start(struct dio *dio)
{
	bool is_write = dio->rw == DIOLOOP_WRITE;

	if (!is_write) {
		dio_phase_start(dio);
		return;
	}
	if (dio->bounce) {
		range_lock_init(&dio->rl, dio->bpos, dio->bpos + dio->blen,
				dio->step == DIO_STEP_RMW_READ,
				dio_range_granted);
	} else {
		range_lock_init(&dio->rl, dio->pos, dio->pos + dio->count,
				false, dio_range_granted);
	}
	dio->locked = true;
	if (range_lock_acquire(&dio->p.engine->range_locks, &dio->rl))
		dio_phase_start(dio);
}

/* Set up the bounce buffer over whole blocks around the request. */
static int dio_setup_bounce(struct dio *dio)
{
	uint64_t blk = UINT64_C(1) << dio->blkbits;
	size_t pages;

	dio->bpos = dio->pos & ~(blk - 1);
	dio->blen = (size_t)(((dio->pos + dio->count + blk - 1) & ~(blk - 1)) -
			     dio->bpos);
	pages = (dio->blen + DIOLOOP_PAGE_SIZE - 1) >> DIOLOOP_PAGE_SHIFT;
	if (posix_memalign(&dio->bounce, DIOLOOP_PAGE_SIZE,
			   pages << DIOLOOP_PAGE_SHIFT))
		return -ENOMEM;
	dio->bounce_bvec = g_new(struct bio_vec, pages);
	bvec_fill_pages(dio->bounce_bvec, NULL, dio->bounce, dio->blen);
	return 0;
}

/*
 * True if the request can go straight to the caller's pages: offset,
 * length and every bio_vec piece aligned (docs/lineage.md patch 006: fs block size, else
 * the logical block size; *blkbits says which).
 */
static bool dio_request_aligned(const struct iov_iter *iter, uint64_t pos,
				size_t count, unsigned int *blkbits,
				unsigned int dev_blkbits)
{
	struct iov_iter it = *iter;

	if (!dio_aligned(pos, blkbits, dev_blkbits) ||
	    !dio_aligned(count, blkbits, dev_blkbits))
		return false;
	while (count) {
		const struct bio_vec *bv = iov_iter_bvec(&it);
		size_t off = bv->bv_offset + it.iov_offset;
		size_t len = bv->bv_len - it.iov_offset;

		if (len > count)
			len = count;
		if (!dio_aligned(off | len, blkbits, dev_blkbits))
			return false;
		iov_iter_advance(&it, len);
		count -= len;
	}
	return true;
}

/*
 * The one place a submission finishes (docs/lineage.md patch 007's dio_post_submission):
 * asynchronous callers get -EIOCBQUEUED unless everything is already done;
 * synchronous ones wait.  Whoever drops the last reference completes.
 */
static ssize_t dio_post_submission(struct dio *dio)
{
	if (!dio->is_async) {
		g_mutex_lock(&dio->wait_lock);
		while (!dio->op_done)
			dioloop_aio_cond_wait(&dio->wait_cond, &dio->wait_lock);
		g_mutex_unlock(&dio->wait_lock);
		g_assert(atomic_load(&dio->refcount) == 1);
		return dio_complete(dio);
	}
	if (atomic_fetch_sub(&dio->refcount, 1) == 1)
		return dio_complete(dio);
	return -EIOCBQUEUED;
}

ssize_t blockdev_direct_IO_bvec(struct backend *b, struct kiocb *iocb,
				const struct dio_params *p)
{
	struct dio *dio;
	unsigned int blkbits = p->blkbits;
	bool aligned;
	int ret;

	if (p->count == 0)
		return 0;
	ret = 0;
	if (!iov_iter_is_bvec(iocb->ki_iter) ||
	    p->count > iov_iter_count(iocb->ki_iter) ||
	    p->dev_blkbits > p->blkbits || !p->get_block || !p->engine ||
	    (!p->submit_io && !b->aio))
		ret = -EINVAL;
	/* Waiting here would wait for this very thread. */
	else if (is_sync_kiocb(iocb) && b->aio &&
		 dioloop_aio_on_completion_thread(b->aio))
		ret = -EDEADLK;
	if (ret < 0)
		return p->end_io ? p->end_io(iocb, p->end_io_private, ret) : ret;

	aligned = dio_request_aligned(iocb->ki_iter, iocb->ki_pos, p->count,
				      &blkbits, p->dev_blkbits);
	dio = dio_alloc();
	dio->b = b;
	dio->iocb = iocb;
	dio->p = *p;
	dio->user = *iocb->ki_iter;
	dio->rw = iocb->ki_rw;
	dio->pos = iocb->ki_pos;
	dio->count = p->count;
	dio->blkbits = blkbits;
	dio->is_async = !is_sync_kiocb(iocb);
	atomic_init(&dio->refcount, 2);
	atomic_init(&dio->phase_pending, 0);
	atomic_init(&dio->error, 0);
	if (!dio->is_async) {
		g_mutex_init(&dio->wait_lock);
		g_cond_init(&dio->wait_cond);
	}
	atomic_fetch_add(&p->engine->stats.requests, 1);

	if (aligned) {
		dio->step = dio->rw == DIOLOOP_WRITE ? DIO_STEP_WRITE_USER :
						       DIO_STEP_READ_USER;
	} else {
		uint64_t mask = (UINT64_C(1) << blkbits) - 1;
		bool partial = (dio->pos & mask) || (dio->count & mask);

		/* Not aligned even to the logical block size: bounce at
		 * that size (dio_aligned left blkbits there). */
		ret = dio_setup_bounce(dio);
		if (ret < 0) {
			dio_set_error(dio, ret);
			return dio_complete(dio);
		}
		atomic_fetch_add(&p->engine->stats.bounced, 1);
		if (dio->rw == DIOLOOP_READ) {
			dio->step = DIO_STEP_READ_BOUNCE;
		} else if (partial) {
			dio->step = DIO_STEP_RMW_READ;
			atomic_fetch_add(&p->engine->stats.rmw, 1);
		} else {
			iov_iter_copy_to_buf((char *)dio->bounce +
					     (dio->pos - dio->bpos),
					     &dio->user, dio->count);
			dio->step = DIO_STEP_WRITE_BOUNCE;
		}
	}
	dio_operation_start(dio);
	return dio_post_submission(dio);
}

void dio_engine_init(struct dio_engine *e)
{
	memset(e, 0, sizeof(*e));
	range_lock_tree_init(&e->range_locks);
}

void dio_engine_clear(struct dio_engine *e)
{
	range_lock_tree_clear(&e->range_locks);
}

void dio_engine_get_stats(struct dio_engine *e, struct backend_info *info)
{
	struct dio_stats *d = &e->stats;

	info->engine.requests = atomic_load(&d->requests);
	info->engine.ios = atomic_load(&d->ios);
	info->engine.segs = atomic_load(&d->segs);
	info->engine.holes = atomic_load(&d->holes);
	info->engine.bounced = atomic_load(&d->bounced);
	info->engine.rmw = atomic_load(&d->rmw);
}
