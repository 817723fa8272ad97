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
 *    image back to it (orphan.h).
 *
 * The extension protocol of a growable image (ext, under ext.lock):
 *
 *   NONE      no record.  The first extending write (end > size) becomes
 *             the creator: the record, holding the current size, is
 *             written and synced through aio (CREATING), then the write
 *             is issued (LIVE).
 *   CREATING  extending writes that arrive wait (ext.waiters).
 *   LIVE      the record is durable; extending writes run and are counted
 *             in ext.inflight; concurrent ones share the record.
 *   BUSY      no extending write in flight and one thread works on the
 *             file size or the record: truncating after a failed
 *             extending write (ext4_truncate_failed_write), or removing
 *             the record.  Extending writes wait.
 *   DRAINING  sync images only: completed extending writes are parked
 *             until the last one in flight ends; new ones wait, so the
 *             drain ends.
 *
 * When the record goes away (one choice, for both durability and cost):
 *  - normal images: only at flush (and close).  flush does fdatasync(),
 *    then removes the record (unlink + fsync of the directory) when no
 *    extending write is in flight, or else rewrites it with the size from
 *    before the fdatasync (rename, atomic).  So a record on disk never
 *    holds less than the size of any flushed write: a record that was
 *    removed cannot come back and truncate flushed data, and records cost
 *    one create per flush interval instead of three syncs per write.
 *  - sync images (O_DSYNC, a write is durable when it completes): a
 *    completed extending write is acknowledged only after the record is
 *    gone (image fdsync, unlink, directory fdsync through aio), or a
 *    crash could truncate an acknowledged, durable write.
 *
 * -ENOSPC (from the host, or a short write, which the engine reports as
 * -ENOSPC) is retried once after an fdatasync, as ext4_should_retry_alloc
 * does; the fdatasync is an aio fdsync so that the retry can run from a
 * completion callback without blocking it.  Errors of that fdatasync are
 * kept and returned by the next flush, which would otherwise never see
 * them (errseq: each error is reported once per file).
 *
 * Threads: open/close on the control thread; direct_IO_bvec anywhere;
 * flush, discard, write_zeroes, resize, map, info on worker threads (see
 * backend.h).  Callbacks (write completions, record steps, range grants)
 * run on the aio completion thread and never block on I/O, except that
 * truncating after a failed extending write is an ftruncate() there
 * (rare; a metadata operation).
 */
#include "backends/raw/raw.h"

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

#define RAW_AIO_DEPTH 256
#define RAW_MAX_TRANSFER (1u << 20)
#define RAW_MAX_ALIGN (1u << 16)
#define RAW_ZERO_CHUNK ((size_t)1 << 20)

void (*raw_test_hook)(enum raw_test_point point);

enum raw_ext_state {
	EXT_NONE,
	EXT_CREATING,
	EXT_LIVE,
	EXT_BUSY,
	EXT_DRAINING,
};

struct raw_req;

struct raw_ext {
	GMutex lock;
	GCond cond;			/* state changes; sync callers' results */
	enum raw_ext_state state;	/* by lock */
	unsigned int inflight;		/* extending writes issued or being
					 * created for, not finished; by lock */
	uint64_t recorded;		/* size in the record; by lock */
	uint64_t create_size;		/* size the record being created holds */
	bool truncate_pending;		/* a failed extending write may have
					 * left blocks past size; by lock */
	struct raw_req *creator;	/* the write the record is created for */
	struct raw_req *waiters, **waiters_tail;	/* by lock */
	struct raw_req *parked;		/* sync images: done, not yet told */
};

struct raw {
	struct backend *b;
	int fd;
	bool rdonly, growable, sync;
	unsigned int ra;		/* request_alignment */
	unsigned int blkbits, dev_blkbits;
	uint64_t block_size;
	_Atomic uint64_t size;		/* visible size; stored under ext.lock
					 * once open */
	atomic_int wb_err;		/* a retry fdatasync's error, for flush */
	struct dioloop_aio *own_aio;	/* when the caller gave none */
	GMutex flush_lock;		/* one flush/resize works on the record
					 * at a time */
	struct orphan orphan;		/* record operations: under the ext
					 * state machine (CREATING, BUSY) */
	struct raw_ext ext;
};

/*
 * One raw extent of the file found by lseek, cached per request
 * (map_private) so that a request costs one lseek per data/hole
 * transition, not one per block.
 */
struct raw_map_cache {
	uint64_t start, end;		/* [start, end) */
	bool hole;
	bool valid;
};

/*
 * A write in flight.  The engine runs `inner` (always asynchronous, its
 * ki_complete is ours); the caller's kiocb hears the result once, from
 * raw_deliver().  Synchronous callers sleep on ext.cond until delivered.
 */
struct raw_req {
	struct kiocb inner;
	struct kiocb *orig;
	struct raw *r;
	struct raw_map_cache map;	/* read-modify-write reads */
	struct dioloop_aio_req flush;	/* the fdsync before the retry */
	size_t count;
	uint64_t end;
	ssize_t res;			/* parked or delivered result */
	bool sync_caller;
	bool extending;			/* counted in ext.inflight */
	bool retried;
	bool delivered;			/* sync callers; by ext.lock */
	struct raw_req *next;		/* waiters or parked; by ext.lock */
};

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static void raw_write_start(struct raw_req *req);

/* Round down to a power of two. */
static uint64_t round_down_u64(uint64_t v, uint64_t a)
{
	return v & ~(a - 1);
}

/* Round up, saturating at the largest multiple of a. */
static uint64_t round_up_u64(uint64_t v, uint64_t a)
{
	if (v > UINT64_MAX - (a - 1))
		return round_down_u64(UINT64_MAX, a);
	return round_down_u64(v + a - 1, a);
}

/* Call the test hook, if any, at a named point. */
static void raw_test_point(enum raw_test_point point)
{
	if (raw_test_hook)
		raw_test_hook(point);
}

/* ---- block mapping: SEEK_DATA / SEEK_HOLE ---- */

/* Remember one raw extent. */
static void raw_cache_set(struct raw_map_cache *c, uint64_t start,
			  uint64_t end, bool hole)
{
	*c = (struct raw_map_cache){ start, end, hole, true };
}

/*
 * Make c describe the raw extent that contains pos.  Crossing from a
 * cached extent into the next costs one lseek, a cold lookup at most two.
 * Without SEEK_DATA support the whole file is data.
 */
static void raw_lookup(struct raw *r, struct raw_map_cache *c, uint64_t pos)
{
	off_t d, h;

	if (c->valid && pos >= c->start && pos < c->end)
		return;
	if (c->valid && pos == c->end) {
		if (c->hole) {
			/* SEEK_DATA ended the hole here: data starts. */
			h = lseek(r->fd, (off_t)pos, SEEK_HOLE);
			if (h > (off_t)pos) {
				raw_cache_set(c, pos, (uint64_t)h, false);
				return;
			}
		} else {
			d = lseek(r->fd, (off_t)pos, SEEK_DATA);
			if (d > (off_t)pos) {
				raw_cache_set(c, pos, (uint64_t)d, true);
				return;
			}
			if (d < 0 && errno == ENXIO) {
				raw_cache_set(c, pos, UINT64_MAX, true);
				return;
			}
		}
		/* The file changed under the cache: look afresh. */
	}
	d = lseek(r->fd, (off_t)pos, SEEK_DATA);
	if (d < 0) {
		/* ENXIO: no data at or after pos. */
		raw_cache_set(c, pos, UINT64_MAX, errno == ENXIO);
		return;
	}
	if ((uint64_t)d > pos) {
		raw_cache_set(c, pos, (uint64_t)d, true);
		return;
	}
	h = lseek(r->fd, (off_t)pos, SEEK_HOLE);
	raw_cache_set(c, pos, h > (off_t)pos ? (uint64_t)h : UINT64_MAX,
		      false);
}

/*
 * The extent at pos up to limit as the engine and map() see it: raw
 * boundaries rounded to the block size, data outward and holes inward, so
 * a length is a multiple of the block size unless it ends at limit (the
 * engine's get_block contract).  A hole smaller than a block reads as
 * data (zeros from the file).
 */
static void raw_extent(struct raw *r, struct raw_map_cache *c, uint64_t pos,
		       uint64_t limit, bool *hole, uint64_t *len)
{
	uint64_t blk = r->block_size, cur = pos, e;

	raw_lookup(r, c, pos);
	if (c->hole) {
		e = round_down_u64(c->end, blk);
		if (e > pos || c->end >= limit) {
			*hole = true;
			*len = (e > pos && e < limit ? e : limit) - pos;
			return;
		}
		cur = c->end;
	}
	*hole = false;
	for (;;) {
		raw_lookup(r, c, cur);
		if (c->hole) {
			/* Only when the file changed under us. */
			break;
		}
		e = round_up_u64(c->end, blk);
		if (e >= limit)
			break;
		raw_lookup(r, c, c->end);
		if (!c->hole) {
			cur = c->start;
			continue;
		}
		if (round_down_u64(c->end, blk) > e) {
			*len = e - pos;
			return;
		}
		if (c->end >= limit)
			break;
		cur = c->end;
	}
	*len = limit - pos;
}

/*
 * get_block for the engine: direct mapping on the image fd.  Reads
 * (create == false, also the reads of a read-modify-write) report holes;
 * map_private is the request's struct raw_map_cache.  Submitting or
 * completion thread; lseek does not wait for data I/O.
 */
static int raw_get_block(struct backend *b, void *map_private, uint64_t pos,
			 uint64_t len, bool create, struct dio_map *map)
{
	struct raw *r = b->priv;

	map->fd = r->fd;
	map->phys = pos;
	if (create) {
		map->len = len;
		map->hole = false;
		return 0;
	}
	raw_extent(r, map_private, pos, pos + len, &map->hole, &map->len);
	return 0;
}

/* The engine's parameters for a request of count bytes. */
static void raw_dio_params(struct raw *r, struct dio_params *p, size_t count,
			   struct raw_map_cache *mc, unsigned int flags)
{
	*p = (struct dio_params){
		.count = count,
		.blkbits = r->blkbits,
		.dev_blkbits = r->dev_blkbits,
		.get_block = raw_get_block,
		.map_private = mc,
		.flags = flags,
	};
}

/* ---- reads ---- */

/* end_io of an asynchronous read: free its map cache. */
static ssize_t raw_read_end_io(struct kiocb *iocb, void *priv, ssize_t res)
{
	g_free(priv);
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
	if (!is_sync_kiocb(iocb))
		mc = g_new0(struct raw_map_cache, 1);
	raw_dio_params(r, &p, count, mc, DIO_SKIP_HOLES);
	if (mc != &stack_map) {
		p.end_io = raw_read_end_io;
		p.end_io_private = mc;
	}
	return blockdev_direct_IO_bvec(b, iocb, &p);
}

/* ---- writes and the extension protocol ---- */

/* Change state and wake whoever waits for it.  ext.lock held. */
static void raw_ext_set_state(struct raw_ext *x, enum raw_ext_state state)
{
	x->state = state;
	g_cond_broadcast(&x->cond);
}

/* Detach the waiting writes.  ext.lock held. */
static struct raw_req *raw_take_waiters(struct raw_ext *x)
{
	struct raw_req *w = x->waiters;

	x->waiters = NULL;
	x->waiters_tail = &x->waiters;
	return w;
}

/* Start writes that waited for the record (they queue again if needed). */
static void raw_restart(struct raw_req *list)
{
	while (list) {
		struct raw_req *next = list->next;

		list->next = NULL;
		raw_write_start(list);
		list = next;
	}
}

/* Tell the caller: wake a synchronous one, or call ki_complete.  The last
 * thing done with req (and, for the last request, with the backend). */
static void raw_deliver(struct raw_req *req, ssize_t res)
{
	struct raw *r = req->r;

	if (req->sync_caller) {
		g_mutex_lock(&r->ext.lock);
		req->res = res;
		req->delivered = true;
		g_cond_broadcast(&r->ext.cond);
		g_mutex_unlock(&r->ext.lock);
	} else {
		struct kiocb *orig = req->orig;

		g_free(req);
		orig->ki_complete(orig, res);
	}
}

static void raw_write_io_done(struct raw_req *req, ssize_t res);

/* The engine finished the inner kiocb.  Any thread. */
static void raw_inner_complete(struct kiocb *iocb, ssize_t res)
{
	raw_write_io_done(iocb->ki_private, res);
}

/* Hand the write to the engine (again, for the retry). */
static void raw_write_issue(struct raw_req *req)
{
	struct raw *r = req->r;
	struct dio_params p;
	ssize_t ret;

	/* The read half of a read-modify-write looks for holes afresh. */
	memset(&req->map, 0, sizeof(req->map));
	raw_dio_params(r, &p, req->count, &req->map, 0);
	ret = blockdev_direct_IO_bvec(r->b, &req->inner, &p);
	if (ret != -EIOCBQUEUED)
		raw_write_io_done(req, ret);
}

/* The fdsync before the -ENOSPC retry is done: retry.  Completion
 * thread. */
static void raw_retry_flushed(struct dioloop_aio_req *areq, long res)
{
	struct raw_req *req = container_of(areq, struct raw_req, flush);

	if (res < 0) {
		int expected = 0;

		atomic_compare_exchange_strong(&req->r->wb_err, &expected,
					       (int)res);
		g_warning("%s: fdatasync before an ENOSPC retry: %s",
			  req->r->b->path, g_strerror((int)-res));
	}
	raw_write_issue(req);
}

/* After the record is gone (sync images): tell the parked writes.
 * Completion thread. */
static void raw_orphan_removed(void *opaque, int err)
{
	struct raw *r = opaque;
	struct raw_ext *x = &r->ext;
	struct raw_req *parked, *waiters;

	g_mutex_lock(&x->lock);
	raw_ext_set_state(x, r->orphan.present ? EXT_LIVE : EXT_NONE);
	parked = x->parked;
	x->parked = NULL;
	waiters = raw_take_waiters(x);
	g_mutex_unlock(&x->lock);
	raw_restart(waiters);
	while (parked) {
		struct raw_req *next = parked->next;

		/* Durable data, but a record that may survive a crash and
		 * cut it off: the write is not safely done. */
		raw_deliver(parked, err < 0 && parked->res >= 0 ? err :
							       parked->res);
		parked = next;
	}
}

/*
 * No extending write is in flight and the state is BUSY: truncate what a
 * failed extending write may have left past the visible size, then (sync
 * images) remove the record, or (normal images) go back to LIVE.
 */
static void raw_ext_finish(struct raw *r)
{
	struct raw_ext *x = &r->ext;
	struct raw_req *waiters;
	bool truncate;

	g_mutex_lock(&x->lock);
	truncate = x->truncate_pending;
	x->truncate_pending = false;
	g_mutex_unlock(&x->lock);
	if (truncate) {
		uint64_t size = atomic_load(&r->size);

		if (dioloop_iorec_ftruncate(r->fd, (off_t)size) < 0)
			g_warning("%s: truncating back to %llu after a failed extending write: %s",
				  r->b->path, (unsigned long long)size,
				  g_strerror(errno));
	}
	if (r->sync) {
		orphan_remove_async(&r->orphan, r->b->aio, r->fd,
				    raw_orphan_removed, r);
		return;
	}
	g_mutex_lock(&x->lock);
	raw_ext_set_state(x, EXT_LIVE);
	waiters = raw_take_waiters(x);
	g_mutex_unlock(&x->lock);
	raw_restart(waiters);
}

/* An extending write ended (after its retry, if any).  Any thread. */
static void raw_extend_done(struct raw_req *req, ssize_t res)
{
	struct raw *r = req->r;
	struct raw_ext *x = &r->ext;
	bool finish = false, park = r->sync;

	if (res >= 0)
		raw_test_point(RAW_TEST_EXTEND_DONE);
	g_mutex_lock(&x->lock);
	if (res == (ssize_t)req->count) {
		/* i_size moves only now that the data is there. */
		uint64_t end = round_up_u64(req->end, r->ra);

		if (end > atomic_load(&r->size))
			atomic_store(&r->size, end);
	} else {
		x->truncate_pending = true;
	}
	req->extending = false;
	x->inflight--;
	if (park) {
		req->res = res;
		req->next = x->parked;
		x->parked = req;
	}
	if (x->inflight == 0 && (x->truncate_pending || r->sync)) {
		raw_ext_set_state(x, EXT_BUSY);
		finish = true;
	} else if (r->sync && x->state == EXT_LIVE) {
		raw_ext_set_state(x, EXT_DRAINING);
	}
	g_mutex_unlock(&x->lock);
	/* Finish before telling the caller: it may close the image. */
	if (finish)
		raw_ext_finish(r);
	if (!park)
		raw_deliver(req, res);
}

/* The engine's result for a write, inline or from raw_inner_complete. */
static void raw_write_io_done(struct raw_req *req, ssize_t res)
{
	struct raw *r = req->r;

	if (res == -ENOSPC && !req->retried) {
		struct dioloop_aio_req *areq = &req->flush;

		/* ext4_should_retry_alloc: once, after a flush that may
		 * give back space the host holds for unwritten data. */
		req->retried = true;
		raw_test_point(RAW_TEST_ENOSPC_RETRY);
		dioloop_aio_prep_fdsync(areq, r->fd, raw_retry_flushed);
		dioloop_aio_submit(r->b->aio, &areq, 1);
		return;
	}
	if (req->extending)
		raw_extend_done(req, res);
	else
		raw_deliver(req, res);
}

/* The record for the creator's write is durable (or failed).  Completion
 * thread, or the creator's thread when it failed at once. */
static void raw_orphan_created(void *opaque, int err)
{
	struct raw *r = opaque;
	struct raw_ext *x = &r->ext;
	struct raw_req *creator, *waiters;

	if (!err)
		raw_test_point(RAW_TEST_ORPHAN_DURABLE);
	g_mutex_lock(&x->lock);
	creator = x->creator;
	x->creator = NULL;
	if (!err) {
		x->recorded = x->create_size;
		raw_ext_set_state(x, EXT_LIVE);
	} else {
		creator->extending = false;
		x->inflight--;
		raw_ext_set_state(x, EXT_NONE);
	}
	waiters = raw_take_waiters(x);
	g_mutex_unlock(&x->lock);
	if (!err)
		raw_write_issue(creator);
	raw_restart(waiters);
	if (err)
		raw_deliver(creator, err);
}

/*
 * Admit a write: one within the visible size goes straight to the engine;
 * an extending one runs under the record (creating it first), or waits
 * while the record or the size is being worked on.
 */
static void raw_write_start(struct raw_req *req)
{
	struct raw *r = req->r;
	struct raw_ext *x = &r->ext;
	uint64_t size;

	g_mutex_lock(&x->lock);
	size = atomic_load(&r->size);
	if (req->end <= size) {
		g_mutex_unlock(&x->lock);
		raw_write_issue(req);
		return;
	}
	switch (x->state) {
	case EXT_LIVE:
		x->inflight++;
		req->extending = true;
		g_mutex_unlock(&x->lock);
		raw_write_issue(req);
		return;
	case EXT_NONE:
		x->inflight++;
		req->extending = true;
		x->creator = req;
		x->create_size = size;
		raw_ext_set_state(x, EXT_CREATING);
		g_mutex_unlock(&x->lock);
		orphan_create_async(&r->orphan, r->b->aio, size,
				    raw_orphan_created, r);
		return;
	default:
		*x->waiters_tail = req;
		x->waiters_tail = &req->next;
		g_mutex_unlock(&x->lock);
		return;
	}
}

/* A write: checks, then the request runs asynchronously inside; a
 * synchronous caller sleeps until it is delivered. */
static ssize_t raw_write(struct backend *b, struct raw *r, struct kiocb *iocb)
{
	size_t count = iov_iter_count(iocb->ki_iter);
	uint64_t pos = iocb->ki_pos;
	struct raw_req *req;
	ssize_t res;

	if (r->rdonly)
		return -EROFS;
	if (pos > (uint64_t)INT64_MAX || count > (uint64_t)INT64_MAX - pos)
		return r->growable ? -EFBIG : -ENOSPC;
	/* Block-device semantics: all or nothing past the end. */
	if (!r->growable && pos + count > atomic_load(&r->size))
		return -ENOSPC;
	/* It would wait for the thread it runs on. */
	if (is_sync_kiocb(iocb) && dioloop_aio_on_completion_thread(b->aio))
		return -EDEADLK;

	req = g_new0(struct raw_req, 1);
	req->r = r;
	req->orig = iocb;
	req->count = count;
	req->end = pos + count;
	req->sync_caller = is_sync_kiocb(iocb);
	req->inner = (struct kiocb){
		.ki_rw = DIOLOOP_WRITE,
		.ki_pos = pos,
		.ki_iter = iocb->ki_iter,
		.ki_complete = raw_inner_complete,
		.ki_private = req,
	};
	if (!req->sync_caller) {
		raw_write_start(req);
		return -EIOCBQUEUED;	/* req may be gone already */
	}
	raw_write_start(req);
	g_mutex_lock(&r->ext.lock);
	while (!req->delivered)
		g_cond_wait(&r->ext.cond, &r->ext.lock);
	res = req->res;
	g_mutex_unlock(&r->ext.lock);
	g_free(req);
	return res;
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
	ret = orphan_init(&r->orphan, b->path, args->file, r->fd);
	if (ret < 0)
		goto out_free;
	ret = orphan_recover(&r->orphan, r->fd, r->rdonly, &limit);
	if (ret < 0)
		goto out_free;
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

/* ---- flush, discard, write_zeroes, resize, map, info ---- */

/*
 * Normal images, after the fdatasync: remove the record when no extending
 * write is in flight, else rewrite it with size (taken before the
 * fdatasync, so it covers every write completed before the flush).
 * Worker thread, flush_lock held.
 */
static int raw_flush_record(struct raw *r, uint64_t size)
{
	struct raw_ext *x = &r->ext;
	struct raw_req *waiters;
	int err;

	g_mutex_lock(&x->lock);
	/* A truncation after a failed write: let it end first. */
	while (x->state == EXT_BUSY)
		g_cond_wait(&x->cond, &x->lock);
	if (x->state != EXT_LIVE) {
		/* NONE, or CREATING a record that holds the current size. */
		g_mutex_unlock(&x->lock);
		return 0;
	}
	if (x->inflight == 0) {
		raw_ext_set_state(x, EXT_BUSY);
		g_mutex_unlock(&x->lock);
		err = orphan_remove(&r->orphan);
		g_mutex_lock(&x->lock);
		raw_ext_set_state(x, r->orphan.present ? EXT_LIVE : EXT_NONE);
		waiters = raw_take_waiters(x);
		g_mutex_unlock(&x->lock);
		raw_restart(waiters);
		return err;
	}
	if (size <= x->recorded) {
		g_mutex_unlock(&x->lock);
		return 0;
	}
	g_mutex_unlock(&x->lock);
	/* LIVE stays: writes may extend meanwhile, any record with a size
	 * <= theirs protects them. */
	err = orphan_update(&r->orphan, size);
	if (!err) {
		g_mutex_lock(&x->lock);
		if (size > x->recorded)
			x->recorded = size;
		g_mutex_unlock(&x->lock);
	}
	return err;
}

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

/* Write zeros over [pos, pos + len) through the engine.  Worker thread. */
static int raw_write_zero_pages(struct backend *b, uint64_t pos, uint64_t len)
{
	size_t buf_len = (size_t)MIN(len, (uint64_t)RAW_ZERO_CHUNK);
	void *zeros = g_malloc0(buf_len);
	int ret = 0;

	while (len && !ret) {
		size_t n = (size_t)MIN(len, (uint64_t)buf_len);
		ssize_t res = backend_pwrite(b, zeros, n, pos);

		if (res != (ssize_t)n)
			ret = res < 0 ? (int)res : -EIO;
		pos += n;
		len -= n;
	}
	g_free(zeros);
	return ret;
}

/* fallocate() over a range held exclusively against the engine's
 * read-modify-writes (which would write back stale bytes).  0 or
 * -errno. */
static int raw_fallocate_locked(struct raw *r, int mode, uint64_t pos,
				uint64_t len)
{
	struct backend *b = r->b;
	struct range_lock rl;
	int ret = 0;

	range_lock_init(&rl, round_down_u64(pos, r->ra),
			round_up_u64(pos + len, r->ra), true, NULL);
	range_lock_acquire_wait(&b->range_locks, &rl);
	if (dioloop_iorec_fallocate(r->fd, mode, (off_t)pos, (off_t)len) < 0)
		ret = -errno;
	range_lock_release(&b->range_locks, &rl);
	return ret;
}

/* Make a range read as zeros: ZERO_RANGE, or zero pages where the host
 * cannot.  Worker thread; the core clamped the range to the size. */
static int raw_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	struct raw *r = b->priv;
	int ret;

	if (r->rdonly)
		return -EROFS;
	ret = raw_fallocate_locked(r, FALLOC_FL_ZERO_RANGE |
				      FALLOC_FL_KEEP_SIZE, pos, len);
	if (ret == -EOPNOTSUPP || ret == -EINVAL)
		ret = raw_write_zero_pages(b, pos, len);
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

	if (r->rdonly)
		return -EROFS;
	if (astart >= aend)
		return raw_write_zero_pages(b, pos, len);
	if (pos < astart) {
		ret = raw_write_zero_pages(b, pos, astart - pos);
		if (ret < 0)
			return ret;
	}
	if (aend < end) {
		ret = raw_write_zero_pages(b, aend, end - aend);
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

/*
 * Change the size (a multiple of request_alignment): ftruncate, made
 * durable, and the record removed (everything before is now durable).
 * Worker thread, nothing in flight (the core drains).
 */
static int raw_resize(struct backend *b, uint64_t new_size)
{
	struct raw *r = b->priv;
	struct raw_ext *x = &r->ext;
	int ret = 0;

	if (r->rdonly)
		return -EROFS;
	if (new_size % r->ra)
		return -EINVAL;
	g_mutex_lock(&r->flush_lock);
	if (dioloop_iorec_ftruncate(r->fd, (off_t)new_size) < 0 ||
	    dioloop_iorec_fdatasync(r->fd) < 0) {
		ret = -errno;
		goto out;
	}
	if (r->orphan.present)
		ret = orphan_remove(&r->orphan);
	g_mutex_lock(&x->lock);
	g_assert(x->inflight == 0);
	atomic_store(&r->size, new_size);
	raw_ext_set_state(x, r->orphan.present ? EXT_LIVE : EXT_NONE);
	x->recorded = MIN(x->recorded, new_size);
	g_mutex_unlock(&x->lock);
out:
	g_mutex_unlock(&r->flush_lock);
	return ret;
}

/* The data or hole extent at pos (pos < size, clipped to len).  Worker
 * thread. */
static int raw_map(struct backend *b, uint64_t pos, uint64_t len,
		   struct backend_extent *ext)
{
	struct raw *r = b->priv;
	struct raw_map_cache c = { 0 };

	raw_extent(r, &c, pos, pos + len, &ext->hole, &ext->len);
	return 0;
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
