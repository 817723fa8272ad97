/* SPDX-License-Identifier: MIT */
/*
 * The raw backend's writes, growth and orphan record (ext4's, seeds
 * 009/010).
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
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "backends/iorec.h"
#include "backends/raw/raw_int.h"
#include "iter/obj_cache.h"

void (*raw_test_hook)(enum raw_test_point point);

static void raw_write_start(struct raw_req *req);

/* Call the test hook, if any, at a named point. */
static void raw_test_point(enum raw_test_point point)
{
	if (raw_test_hook)
		raw_test_hook(point);
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

/* Write requests, kept per thread (iter/obj_cache.h): a write takes no
 * heap memory. */
static struct dioloop_obj_cache raw_reqs =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct raw_req), 256);

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

		dioloop_obj_put(&raw_reqs, req);
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
	/* Past the end: what lies between the size and the write is a hole. */
	raw_holes_made(r);
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
ssize_t raw_write(struct backend *b, struct raw *r, struct kiocb *iocb)
{
	size_t count = iov_iter_count(iocb->ki_iter);
	uint64_t pos = iocb->ki_pos;
	struct raw_req *req;
	ssize_t res;

	if (pos > (uint64_t)INT64_MAX || count > (uint64_t)INT64_MAX - pos)
		return r->growable ? -EFBIG : -ENOSPC;
	/* Block-device semantics: all or nothing past the end. */
	if (!r->growable && pos + count > atomic_load(&r->size))
		return -ENOSPC;
	/* It would wait for the thread it runs on. */
	if (is_sync_kiocb(iocb) && dioloop_aio_on_completion_thread(b->aio))
		return -EDEADLK;

	req = dioloop_obj_get(&raw_reqs);
	*req = (struct raw_req){ 0 };
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
		dioloop_aio_cond_wait(&r->ext.cond, &r->ext.lock);
	res = req->res;
	g_mutex_unlock(&r->ext.lock);
	dioloop_obj_put(&raw_reqs, req);
	return res;
}


/*
 * Normal images, after the fdatasync: remove the record when no extending
 * write is in flight, else rewrite it with size (taken before the
 * fdatasync, so it covers every write completed before the flush).
 * Worker thread, flush_lock held.
 */
int raw_flush_record(struct raw *r, uint64_t size)
{
	struct raw_ext *x = &r->ext;
	struct raw_req *waiters;
	int err;

	g_mutex_lock(&x->lock);
	/* A truncation after a failed write: let it end first. */
	while (x->state == EXT_BUSY)
		dioloop_aio_cond_wait(&x->cond, &x->lock);
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

/* Set the file's size: a store that grows gets the new range allocated
 * (writes into it need no allocation, and the host runs them
 * concurrently), sparse where the host cannot.  0, or -1 with errno. */
static int raw_set_file_size(struct raw *r, uint64_t new_size)
{
	uint64_t size = atomic_load(&r->size);

	if (new_size > size)
		raw_holes_made(r);
	if (r->store && new_size > size &&
	    fallocate(r->fd, 0, (off_t)size, (off_t)(new_size - size)) == 0) {
		dioloop_iorec_truncate(r->fd, new_size);
		return 0;
	}
	return dioloop_iorec_ftruncate(r->fd, (off_t)new_size);
}

/*
 * Change the size (a multiple of request_alignment): ftruncate, made
 * durable, and the record removed (everything before is now durable).
 * Worker thread, nothing in flight (the core drains).
 */
int raw_resize(struct backend *b, uint64_t new_size)
{
	struct raw *r = b->priv;
	struct raw_ext *x = &r->ext;
	int ret = 0;

	if (new_size % r->ra)
		return -EINVAL;
	g_mutex_lock(&r->flush_lock);
	if (raw_set_file_size(r, new_size) < 0 ||
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
