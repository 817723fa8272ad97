/* SPDX-License-Identifier: MIT */
/*
 * The rbd backend's requests and its completion thread (rbd_int.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/aio.h"
#include "backends/iorec.h"
#include "backends/rbd/rbd_int.h"
#include "iter/obj_cache.h"

static const char *const drbd_op_names[] = {
	[DRBD_READ] = "read",
	[DRBD_WRITE] = "write",
	[DRBD_FLUSH] = "flush",
	[DRBD_DISCARD] = "discard",
	[DRBD_WRITE_ZEROES] = "write_zeroes",
};

int drbd_errno(struct drbd *d, int r, const char *what)
{
	if (r >= 0) {
		/* The cluster answers again. */
		if (atomic_load(&d->outage) &&
		    atomic_exchange(&d->outage, false))
			g_message("%s: the cluster answers again", d->url.url);
		return r;
	}
	/* ESHUTDOWN: this client was blocklisted (fenced: another client
	 * broke its lock).  It stays so until an operator lifts it. */
	if (r == -ESHUTDOWN) {
		atomic_store(&d->outage, true);
		/* One line per client: it fences every image open through
		 * it (conn.c). */
		if (drbd_conn_fenced(d->conn))
			g_warning("%s: %s: the cluster has blocklisted this client (another client took the image's lock, or an operator fenced it): failing requests with EIO, on every image of %s%s%s",
				  d->url.url, what, d->url.pool,
				  d->url.ns[0] ? "/" : "", d->url.ns);
		return -EIO;
	}
	if (r == -ETIMEDOUT || r == -ENOTCONN) {
		if (!atomic_exchange(&d->outage, true))
			g_warning("%s: %s: no answer from the cluster within %u s: failing requests with EIO until it answers",
				  d->url.url, what, d->url.timeout_s);
		return -EIO;
	}
	return r;
}

/* Requests kept per thread (iter/obj_cache.h): an I/O takes no heap
 * memory of the backend's. */
static struct dioloop_obj_cache drbd_reqs =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct drbd_req), 256);

static void drbd_req_free(struct drbd_req *req)
{
	if (req->waiter) {
		g_mutex_clear(&req->lock);
		g_cond_clear(&req->cond);
	}
	if (req->iov != req->inline_iov)
		g_free(req->iov);
	dioloop_obj_put(&drbd_reqs, req);
}

/* Tell the I/O recorder (power-cut tests) what the cluster took: a
 * completed write, not durable until a flush completes after it (the
 * client cache may hold it), or a completed rbd_aio_flush, which makes
 * durable every write completed before it was sent. */
static void drbd_req_record(const struct drbd_req *req)
{
	const struct drbd *d = req->d;
	g_autofree unsigned char *data = NULL;
	size_t done = 0;
	int i;

	if (req->op == DRBD_FLUSH) {
		dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_COMMIT, d->url.url, 0,
				     NULL, 0, false, NULL, 0);
		return;
	}
	if (req->op != DRBD_WRITE)
		return;
	data = g_malloc(req->count);
	for (i = 0; i < req->iovcnt; i++) {
		memcpy(data + done, req->iov[i].iov_base, req->iov[i].iov_len);
		done += req->iov[i].iov_len;
	}
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_WRITE, d->url.url, req->pos,
			     data, (uint32_t)req->count, false, NULL, 0);
}

/* One request fewer in flight; the last one wakes drbd_drain().  Nothing
 * of d is touched after the unlock: a drain may free it then. */
static void drbd_inflight_put(struct drbd *d)
{
	unsigned int v = atomic_load(&d->inflight);

	while (v > 1)
		if (atomic_compare_exchange_weak(&d->inflight, &v, v - 1))
			return;
	g_mutex_lock(&d->idle_lock);
	if (atomic_fetch_sub(&d->inflight, 1) == 1 && d->draining)
		g_cond_broadcast(&d->idle_cond);
	g_mutex_unlock(&d->idle_lock);
}

static void drbd_inflight_get(struct drbd *d)
{
	atomic_fetch_add(&d->inflight, 1);
}

/* A request ended with librbd's result r.  librbd's strand (or the
 * submitter, when librbd refused it). */
static void drbd_req_end(struct drbd_req *req, ssize_t r)
{
	struct drbd *d = req->d;
	ssize_t res;

	res = drbd_errno(d, (int)MAX(MIN(r, 0), INT_MIN),
			 drbd_op_names[req->op]);
	if (res == 0)
		res = (ssize_t)req->count;
	if (res >= 0 && dioloop_iorec_get())
		drbd_req_record(req);
	if (!req->waiter) {
		struct kiocb *iocb = req->iocb;

		drbd_req_free(req);
		iocb->ki_complete(iocb, res);
		drbd_inflight_put(d);
		return;
	}
	drbd_inflight_put(d);
	g_mutex_lock(&req->lock);
	req->res = res;
	req->done = true;
	g_cond_signal(&req->cond);
	g_mutex_unlock(&req->lock);
}

/*
 * This thread is inside an rbd_aio_* call (drbd_start), and the requests
 * librbd completed during it, held until the call returns: librbd runs a
 * completion inline when it fails a request at once on the strand the
 * caller already runs on (a request submitted from a completion), and the
 * caller may hold a lock its completion takes.
 */
static _Thread_local bool drbd_submitting;
static _Thread_local struct drbd_req *drbd_held;

/* librbd's completion callback: on librbd's API strand. */
static void drbd_complete(rbd_completion_t c, void *arg)
{
	struct drbd_req *req = arg;
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	if (drbd_submitting) {
		req->rbd_res = r;
		req->held = drbd_held;
		drbd_held = req;
		return;
	}
	drbd_req_end(req, r);
}

/* Run what drbd_complete() held during this thread's rbd_aio_* call. */
static void drbd_run_held(void)
{
	while (drbd_held) {
		struct drbd_req *req = drbd_held;

		drbd_held = req->held;
		drbd_req_end(req, req->rbd_res);
	}
}

void drbd_drain(struct drbd *d)
{
	g_mutex_lock(&d->idle_lock);
	d->draining = true;
	while (atomic_load(&d->inflight))
		g_cond_wait(&d->idle_cond, &d->idle_lock);
	g_mutex_unlock(&d->idle_lock);
}

static struct drbd_req *drbd_req_new(struct drbd *d, enum drbd_op op,
				     struct kiocb *iocb)
{
	struct drbd_req *req = dioloop_obj_get(&drbd_reqs);

	memset(req, 0, sizeof(*req));
	req->d = d;
	req->op = op;
	req->iocb = iocb;
	req->waiter = !iocb || is_sync_kiocb(iocb);
	if (req->waiter) {
		g_mutex_init(&req->lock);
		g_cond_init(&req->cond);
	}
	return req;
}

/* Hand req to librbd.  0, or -errno (req is freed then). */
static int drbd_start(struct drbd *d, struct drbd_req *req, uint64_t pos,
		      uint64_t len)
{
	const char *what = drbd_op_names[req->op];
	int r;

	bool nested = drbd_submitting;

	r = rbd_aio_create_completion(req, drbd_complete, &req->c);
	if (r < 0) {
		drbd_req_free(req);
		return r;
	}
	drbd_inflight_get(d);
	drbd_submitting = true;
	switch (req->op) {
	case DRBD_READ:
		r = rbd_aio_readv(d->image, req->iov, req->iovcnt, pos, req->c);
		break;
	case DRBD_WRITE:
		r = rbd_aio_writev(d->image, req->iov, req->iovcnt, pos, req->c);
		break;
	case DRBD_FLUSH:
		dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_COMMIT_SENT,
				     d->url.url, 0, NULL, 0, false, NULL, 0);
		r = rbd_aio_flush(d->image, req->c);
		break;
	case DRBD_DISCARD:
		r = rbd_aio_discard(d->image, pos, len, req->c);
		break;
	case DRBD_WRITE_ZEROES:
		r = rbd_aio_write_zeroes(d->image, pos, (size_t)len, req->c, 0,
					 0);
		break;
	default:
		r = -EINVAL;
	}
	drbd_submitting = nested;
	if (r < 0) {
		rbd_aio_release(req->c);
		drbd_req_free(req);
		drbd_inflight_put(d);
		r = drbd_errno(d, r, what);
	}
	if (!nested)
		drbd_run_held();
	return r < 0 ? r : 0;
}

/* Wait for a started request of a waiting caller: its result. */
static ssize_t drbd_wait(struct drbd_req *req)
{
	ssize_t res;

	dioloop_thread_may_block();
	g_mutex_lock(&req->lock);
	while (!req->done)
		g_cond_wait(&req->cond, &req->lock);
	res = req->res;
	g_mutex_unlock(&req->lock);
	drbd_req_free(req);
	return res;
}

/* Writes past EOF of a growable image: grow first (rare; one at a time).
 * 0 or -errno. */
static int drbd_grow_for(struct drbd *d, uint64_t end)
{
	int r = 0;

	g_mutex_lock(&d->grow_lock);
	if (end > atomic_load(&d->size)) {
		r = rbd_resize(d->image, end);
		if (r == 0)
			atomic_store(&d->size, end);
		else
			r = drbd_errno(d, r, "resize");
	}
	g_mutex_unlock(&d->grow_lock);
	return r;
}

ssize_t drbd_submit_io(struct drbd *d, struct kiocb *iocb)
{
	struct iov_iter *it = iocb->ki_iter;
	bool write = iocb->ki_rw == DIOLOOP_WRITE;
	uint64_t pos = iocb->ki_pos, size = atomic_load(&d->size);
	size_t count = iov_iter_count(it), got = 0;
	struct drbd_req *req;
	bool waiter = is_sync_kiocb(iocb);
	int nr, ret;

	if (write) {
		if (pos + count > size) {
			if (!d->growable)
				return -ENOSPC;
			ret = drbd_grow_for(d, pos + count);
			if (ret < 0)
				return ret;
		}
	} else {
		if (pos >= size)
			return 0;
		count = (size_t)MIN((uint64_t)count, size - pos);
	}
	req = drbd_req_new(d, write ? DRBD_WRITE : DRBD_READ, iocb);
	/* The array must outlive the call: librbd reads it later. */
	nr = (int)MIN(it->nr_segs, (unsigned long)IOV_MAX);
	req->iov = nr <= DRBD_INLINE_IOVS ? req->inline_iov :
					    g_new(struct iovec, nr);
	req->iovcnt = iov_iter_get_iovecs(it, req->iov, nr, count, &got);
	if (got != count) {
		drbd_req_free(req);
		return -EINVAL;
	}
	/* librbd pays per entry (a buffer list of them): a page-aligned
	 * buffer, such as an io_uring request's payload, goes as one. */
	req->iovcnt = iovec_merge_adjacent(req->iov, req->iovcnt);
	req->count = count;
	req->pos = pos;
	/* From here an asynchronous request may complete (and iocb and req
	 * be gone) at any moment: only the local waiter is read. */
	ret = drbd_start(d, req, pos, count);
	if (ret < 0)
		return ret;
	if (!waiter)
		return -EIOCBQUEUED;
	return drbd_wait(req);
}

int drbd_run_sync(struct drbd *d, enum drbd_op op, uint64_t pos,
		  uint64_t len)
{
	struct drbd_req *req = drbd_req_new(d, op, NULL);
	ssize_t ret;

	ret = drbd_start(d, req, pos, len);
	if (ret < 0)
		return (int)ret;
	ret = drbd_wait(req);
	return ret < 0 ? (int)ret : 0;
}
