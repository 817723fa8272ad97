/* SPDX-License-Identifier: MIT */
/*
 * Requests, pieces and the READ/WRITE RPCs of the nfs backend (see
 * nfs_int.h; COMMIT and resends: commit.c; deadlines: deadline.c).
 * Everything here runs on the
 * service thread except dnfs_submit and dnfs_ctl_run, which only queue
 * under d->lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "backends/aio.h"
#include "backends/iorec.h"
#include "backends/nfs/nfs_int.h"

_Static_assert(NFS3_WRITEVERFSIZE == DIOLOOP_IOREC_VERF_SIZE,
	       "the recorder keeps a whole write verifier");

/* ---- submission (any thread) ---- */

ssize_t dnfs_submit(struct dnfs *d, struct kiocb *iocb)
{
	size_t count = iov_iter_count(iocb->ki_iter), off;
	uint64_t pos = iocb->ki_pos, size = atomic_load(&d->size);
	bool write = iocb->ki_rw == DIOLOOP_WRITE;
	bool sync_caller = is_sync_kiocb(iocb);
	struct iov_iter it = *iocb->ki_iter;
	struct dnfs_req *req;
	uint32_t xfer;
	ssize_t res;
	GList *l;

	if (count == 0)
		return 0;
	if (write) {
		if (pos > (uint64_t)INT64_MAX || count > (uint64_t)INT64_MAX - pos)
			return d->growable ? -EFBIG : -ENOSPC;
		/* Block-device semantics: all or nothing past the end. */
		if (!d->growable && pos + count > size)
			return -ENOSPC;
	} else {
		if (pos >= size)
			return 0;
		if (count > size - pos)
			count = (size_t)(size - pos);
	}
	/* It would wait for the thread it runs on. */
	if (sync_caller && dnfs_on_service_thread(d))
		return -EDEADLK;

	req = g_new0(struct dnfs_req, 1);
	req->d = d;
	req->iocb = iocb;
	req->write = write;
	req->count = count;
	req->end = pos + count;
	req->sync_caller = sync_caller;
	req->deadline_us = dnfs_now() + d->timeout_us;
	xfer = atomic_load(write ? &d->wsize : &d->rsize);
	for (off = 0; off < count; off += xfer) {
		struct dnfs_piece *p = g_new0(struct dnfs_piece, 1);

		p->d = d;
		p->req = req;
		p->write = write;
		p->pos = pos + off;
		p->len = (uint32_t)MIN((size_t)xfer, count - off);
		p->iter_off = off;
		p->qlink.data = p;
		p->wlink.data = p;
		if (write) {
			p->data = g_malloc(p->len);
			iov_iter_copy_to_buf(p->data, &it, p->len);
		}
		/* rlink: the request's unfinished pieces. */
		g_queue_push_tail(&req->pieces, p);
		req->pending++;
	}

	g_mutex_lock(&d->lock);
	if (write)
		for (l = req->pieces.head; l; l = l->next)
			((struct dnfs_piece *)l->data)->seq =
				atomic_fetch_add(&d->next_seq, 1) + 1;
	req->next = NULL;
	*d->sub_tail = req;
	d->sub_tail = &req->next;
	g_mutex_unlock(&d->lock);
	dnfs_wake(d);
	if (!sync_caller)
		return -EIOCBQUEUED;	/* req may be gone already */

	dioloop_thread_may_block();
	g_mutex_lock(&d->lock);
	while (!req->done)
		g_cond_wait(&d->cond, &d->lock);
	res = req->res;
	g_mutex_unlock(&d->lock);
	g_free(req);
	return res;
}

int dnfs_ctl_run(struct dnfs *d, struct dnfs_ctl *ctl)
{
	bool flush = ctl->kind == DNFS_CTL_FLUSH;
	int err;

	if (flush)
		dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_FLUSH_BEGIN, d->url.url,
				     0, NULL, 0, false, NULL, 0);
	ctl->link.data = ctl;
	ctl->deadline_us = dnfs_now() + d->timeout_us;
	g_mutex_lock(&d->lock);
	if (ctl->kind == DNFS_CTL_FLUSH)
		ctl->seq = atomic_load(&d->next_seq);
	ctl->next = NULL;
	*d->ctl_tail = ctl;
	d->ctl_tail = &ctl->next;
	g_mutex_unlock(&d->lock);
	dnfs_wake(d);
	dioloop_thread_may_block();
	g_mutex_lock(&d->lock);
	while (!ctl->done)
		g_cond_wait(&d->cond, &d->lock);
	err = ctl->err;
	g_mutex_unlock(&d->lock);
	if (flush)
		dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_FLUSH_END, d->url.url,
				     0, NULL, 0, false, NULL, err);
	return err;
}

/* ---- service thread: bookkeeping ---- */

void dnfs_take_submissions(struct dnfs *d)
{
	struct dnfs_req *req;
	struct dnfs_ctl *ctl;

	g_mutex_lock(&d->lock);
	req = d->sub_head;
	ctl = d->ctl_head;
	d->sub_head = NULL;
	d->sub_tail = &d->sub_head;
	d->ctl_head = NULL;
	d->ctl_tail = &d->ctl_head;
	g_mutex_unlock(&d->lock);
	while (req) {
		struct dnfs_req *next = req->next;
		GList *l;

		req->link.data = req;
		g_queue_push_tail_link(&d->active, &req->link);
		for (l = req->pieces.head; l; l = l->next) {
			struct dnfs_piece *p = l->data;

			p->state = DNFS_P_QUEUED;
			g_queue_push_tail_link(&d->pending, &p->qlink);
			if (p->write)
				g_queue_push_tail_link(&d->writes, &p->wlink);
		}
		req = next;
	}
	while (ctl) {
		struct dnfs_ctl *next = ctl->next;

		g_queue_push_tail_link(&d->ctls, &ctl->link);
		ctl = next;
	}
}

bool dnfs_has_work(struct dnfs *d)
{
	return !g_queue_is_empty(&d->active) || !g_queue_is_empty(&d->ctls) ||
	       d->retained || !g_queue_is_empty(&d->resend) ||
	       !g_queue_is_empty(&d->inflight);
}

void dnfs_set_retained(struct dnfs *d, int64_t delta)
{
	d->retained = (uint64_t)((int64_t)d->retained + delta);
	atomic_store(&d->stats.retained, d->retained);
}

/* Free a piece that is on no queue but d->writes. */
void dnfs_piece_free(struct dnfs *d, struct dnfs_piece *p)
{
	if (p->write)
		g_queue_unlink(&d->writes, &p->wlink);
	g_free(p->data);
	g_free(p);
}

/* Tell the caller: the request's last piece ended. */
void dnfs_req_complete(struct dnfs *d, struct dnfs_req *req)
{
	ssize_t res = req->err ? req->err : (ssize_t)req->count;
	struct kiocb *iocb = req->iocb;

	g_queue_unlink(&d->active, &req->link);
	if (res > 0 && req->write && d->growable) {
		uint64_t size = atomic_load(&d->size);

		while (size < req->end &&
		       !atomic_compare_exchange_weak(&d->size, &size, req->end))
			;
	}
	if (req->sync_caller) {
		g_mutex_lock(&d->lock);
		req->res = res;
		req->done = true;
		g_cond_broadcast(&d->cond);
		g_mutex_unlock(&d->lock);
	} else {
		g_free(req);
		iocb->ki_complete(iocb, res);
	}
}

/* One piece of req ended with err (0: fine); it leaves the request. */
static void dnfs_req_piece_done(struct dnfs *d, struct dnfs_piece *p, int err)
{
	struct dnfs_req *req = p->req;

	p->req = NULL;
	if (!req)
		return;
	g_queue_remove(&req->pieces, p);
	if (err && !req->err)
		req->err = err;
	if (--req->pending == 0)
		dnfs_req_complete(d, req);
}

/* A piece's RPC is over: off d->inflight. */
static void dnfs_piece_landed(struct dnfs *d, struct dnfs_piece *p)
{
	g_queue_unlink(&d->inflight, &p->qlink);
	p->state = DNFS_P_QUEUED;
	if (p->write && !p->resending)
		d->user_writes_inflight--;
	d->last_progress_us = dnfs_now();
}

/* Send the rest of a piece again, first (short transfer, or retry). */
static void dnfs_piece_requeue(struct dnfs *d, struct dnfs_piece *p)
{
	p->state = DNFS_P_QUEUED;
	if (p->resending)
		g_queue_push_head_link(&d->resend, &p->qlink);
	else
		g_queue_push_head_link(&d->pending, &p->qlink);
}

/* The piece failed for good (an NFS error): the request hears err. */
static void dnfs_piece_fail(struct dnfs *d, struct dnfs_piece *p, int err)
{
	if (p->resending) {
		/* A retained write that cannot be sent again: flushes will
		 * fail until it can; keep it. */
		p->state = DNFS_P_WRITTEN;
		p->verf_valid = false;
		p->resending = false;
		p->done_seq = ++d->done_counter;
		dnfs_set_retained(d, p->len);
		return;
	}
	dnfs_req_piece_done(d, p, err);
	dnfs_piece_free(d, p);
}

/* Handle an RPC that did not get an NFS answer: back to the queue, and
 * the connection is done for. */
static void dnfs_rpc_lost(struct dnfs *d, struct dnfs_piece *p, int status,
			  void *data)
{
	if (p->abandoned) {
		dnfs_piece_free(d, p);
	} else {
		dnfs_piece_requeue(d, p);
	}
	if (!d->tearing_down)
		dnfs_conn_broken(d, status == RPC_STATUS_ERROR && data ?
					    (const char *)data :
					    status == RPC_STATUS_TIMEOUT ? "timeout" :
									   "cancelled");
}

/* True for NFS answers that mean "this connection/handle is no good". */
bool dnfs_status_reconnects(int status)
{
	return status == NFS3ERR_STALE || status == NFS3ERR_BADHANDLE;
}

/* ---- replies ---- */

/*
 * The part of a READ or WRITE reply that is the same for both: false
 * when the piece was dealt with here (a stale reply, a lost RPC, an
 * abandoned piece); else true, with the piece no longer in flight.
 */
static bool dnfs_reply_arrived(struct dnfs *d, struct dnfs_piece *p,
			       int status, void *data)
{
	if (p->state != DNFS_P_INFLIGHT || p->gen != d->gen)
		return false;
	dnfs_piece_landed(d, p);
	if (status != RPC_STATUS_SUCCESS) {
		dnfs_rpc_lost(d, p, status, data);
		return false;
	}
	if (p->abandoned) {
		dnfs_piece_free(d, p);
		return false;
	}
	return true;
}

/* A reply's NFS status: true for NFS3_OK; else the piece is requeued
 * (reconnecting when the status asks for it) or failed, and false. */
static bool dnfs_reply_ok(struct dnfs *d, struct dnfs_piece *p,
			  nfsstat3 st, const char *op)
{
	if (st == NFS3_OK)
		return true;
	if (dnfs_status_reconnects(st)) {
		dnfs_piece_requeue(d, p);
		dnfs_conn_broken(d, nfsstat3_to_str(st));
	} else if (st == NFS3ERR_JUKEBOX) {
		dnfs_piece_requeue(d, p);
	} else {
		g_warning("%s: %s at %llu: %s", d->url.url, op,
			  (unsigned long long)(p->pos + p->done),
			  nfsstat3_to_str(st));
		dnfs_piece_fail(d, p, dnfs_errno(st));
	}
	return false;
}

/* ---- READ ---- */

static void dnfs_read_cb(struct rpc_context *rpc, int status, void *data,
			 void *priv)
{
	struct dnfs_piece *p = priv;
	struct dnfs *d = p->d;
	READ3res *res = data;
	struct iov_iter it;
	uint32_t n, want = p->len - p->done;

	if (!dnfs_reply_arrived(d, p, status, data) ||
	    !dnfs_reply_ok(d, p, res->status, "READ"))
		return;
	dnfs_keep_post_op_times(d, &res->READ3res_u.resok.file_attributes);
	n = MIN(res->READ3res_u.resok.count, res->READ3res_u.resok.data.data_len);
	n = MIN(n, want);
	it = *p->req->iocb->ki_iter;
	iov_iter_advance(&it, p->iter_off + p->done);
	iov_iter_copy_from_buf(&it, res->READ3res_u.resok.data.data_val, n);
	p->done += n;
	if (p->done < p->len) {
		if (res->READ3res_u.resok.eof) {
			/* Past the server's end of file: zeros. */
			iov_iter_zero(&it, p->len - p->done);
		} else if (n == 0) {
			g_warning("%s: READ at %llu: empty answer before EOF",
				  d->url.url,
				  (unsigned long long)(p->pos + p->done));
			dnfs_piece_fail(d, p, -EIO);
			return;
		} else {
			dnfs_piece_requeue(d, p);
			return;
		}
	}
	dnfs_req_piece_done(d, p, 0);
	dnfs_piece_free(d, p);
}

/* ---- WRITE ---- */

static void dnfs_write_cb(struct rpc_context *rpc, int status, void *data,
			  void *priv)
{
	struct dnfs_piece *p = priv;
	struct dnfs *d = p->d;
	WRITE3res *res = data;
	WRITE3resok *ok;
	bool was_resend;

	if (!dnfs_reply_arrived(d, p, status, data) ||
	    !dnfs_reply_ok(d, p, res->status, "WRITE"))
		return;
	ok = &res->WRITE3res_u.resok;
	dnfs_keep_post_op_times(d, &ok->file_wcc.after);
	if (ok->count == 0 || ok->count > p->len - p->done) {
		g_warning("%s: WRITE at %llu: the server took %u bytes",
			  d->url.url, (unsigned long long)(p->pos + p->done),
			  ok->count);
		dnfs_piece_fail(d, p, -EIO);
		return;
	}
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_WRITE, d->url.url,
			     p->pos + p->done, p->data + p->done, ok->count,
			     ok->committed != UNSTABLE, ok->verf, 0);
	if (p->done == 0) {
		memcpy(p->verf, ok->verf, sizeof(p->verf));
		p->verf_valid = true;
	} else if (memcmp(p->verf, ok->verf, sizeof(p->verf))) {
		p->verf_valid = false;
	}
	/* A new verifier: check the older writes soon. */
	if (d->verf_known && memcmp(d->verf, ok->verf, sizeof(d->verf)))
		d->commit_wanted = true;
	memcpy(d->verf, ok->verf, sizeof(d->verf));
	d->verf_known = true;
	p->done += ok->count;
	if (p->done < p->len) {
		dnfs_piece_requeue(d, p);
		return;
	}
	was_resend = p->resending;
	p->resending = false;
	p->done = 0;
	if (ok->committed != UNSTABLE && !d->quiesce && !was_resend &&
	    p->verf_valid) {
		/* FILE_SYNC (or DATA_SYNC): durable now. */
		dnfs_req_piece_done(d, p, 0);
		dnfs_piece_free(d, p);
		return;
	}
	p->done_seq = ++d->done_counter;
	if (d->quiesce && !was_resend) {
		/* A new write answered while resending may be older than
		 * what is being sent again: it goes again too, in order. */
		p->resending = true;
		g_queue_push_tail_link(&d->resend, &p->qlink);
	} else {
		p->state = DNFS_P_WRITTEN;
		dnfs_set_retained(d, p->len);
	}
	dnfs_req_piece_done(d, p, 0);
}

/* ---- GETATTR / SETATTR for info and resize ---- */

static struct dnfs_ctl *dnfs_ctl_inflight(struct dnfs *d)
{
	GList *l;

	for (l = d->ctls.head; l; l = l->next) {
		struct dnfs_ctl *ctl = l->data;

		if (ctl->inflight && ctl->gen == d->gen)
			return ctl;
	}
	return NULL;
}

void dnfs_ctl_done(struct dnfs *d, struct dnfs_ctl *ctl, int err)
{
	g_queue_unlink(&d->ctls, &ctl->link);
	g_mutex_lock(&d->lock);
	ctl->err = err;
	ctl->done = true;
	g_cond_broadcast(&d->cond);
	g_mutex_unlock(&d->lock);
}

static void dnfs_ctl_cb(int err, struct nfs_context *nfs, void *data,
			void *priv)
{
	struct dnfs *d = priv;
	struct dnfs_ctl *ctl;

	if (d->tearing_down || nfs != d->nfs)
		return;
	d->ctl_rpc = false;
	ctl = dnfs_ctl_inflight(d);
	if (!ctl)
		return;
	ctl->inflight = false;
	d->last_progress_us = dnfs_now();
	if (err == -EAGAIN || err == -ESTALE || err == -ECONNRESET ||
	    err == -EPIPE || err == -ENOTCONN) {
		dnfs_conn_broken(d, data);
		return;
	}
	if (err) {
		g_warning("%s: %s: %s", d->url.url,
			  ctl->kind == DNFS_CTL_GETATTR ? "GETATTR" : "SETATTR",
			  data ? (const char *)data : g_strerror(-err));
		dnfs_ctl_done(d, ctl, err < 0 ? err : -EIO);
		return;
	}
	if (ctl->kind == DNFS_CTL_GETATTR) {
		const struct nfs_stat_64 *st = data;

		ctl->size = st->nfs_size;
		ctl->used = st->nfs_used;
		dnfs_keep_times(d, st->nfs_atime, st->nfs_atime_nsec,
				st->nfs_mtime, st->nfs_mtime_nsec,
				st->nfs_ctime, st->nfs_ctime_nsec);
	}
	dnfs_ctl_done(d, ctl, 0);
}

/* ---- sending ---- */

void dnfs_send(struct dnfs *d, struct dnfs_piece *p, GQueue *from)
{
	uint32_t want = p->len - p->done;
	int64_t now = dnfs_now();
	int rc;

	want = MIN(want, atomic_load(p->write ? &d->wsize : &d->rsize));
	g_queue_unlink(from, &p->qlink);
	if (g_queue_is_empty(&d->inflight) && !d->commit_inflight)
		d->last_progress_us = now;
	g_queue_push_tail_link(&d->inflight, &p->qlink);
	p->state = DNFS_P_INFLIGHT;
	p->gen = d->gen;
	p->sent_us = now;
	atomic_fetch_add(&d->stats.rpcs, 1);
	if (p->write) {
		WRITE3args a = {
			.file = { .data = { d->fh_len, d->fh } },
			.offset = p->pos + p->done,
			.count = want,
			.stable = d->sync ? FILE_SYNC : UNSTABLE,
			.data = { want, p->data + p->done },
		};

		if (p->resending) {
			if (p->done == 0) {
				atomic_fetch_add(&d->stats.resent_writes, 1);
				atomic_fetch_add(&d->stats.resent_bytes, p->len);
			}
		} else {
			d->user_writes_inflight++;
		}
		rc = rpc_nfs3_write_async(dnfs_rpc(d), dnfs_write_cb, &a, p);
	} else {
		READ3args a = {
			.file = { .data = { d->fh_len, d->fh } },
			.offset = p->pos + p->done,
			.count = want,
		};

		rc = rpc_nfs3_read_async(dnfs_rpc(d), dnfs_read_cb, &a, p);
	}
	/* Not queued: the loop tears down and the piece goes back. */
	if (rc < 0)
		dnfs_conn_broken(d, rpc_get_error(dnfs_rpc(d)));
}

/* GETATTR / SETATTR, one at a time. */
static void dnfs_issue_ctls(struct dnfs *d)
{
	GList *l;
	int rc;

	if (d->ctl_rpc)
		return;
	for (l = d->ctls.head; l; l = l->next) {
		struct dnfs_ctl *ctl = l->data;

		if (ctl->kind == DNFS_CTL_FLUSH)
			continue;
		ctl->inflight = true;
		ctl->gen = d->gen;
		if (g_queue_is_empty(&d->inflight))
			d->last_progress_us = dnfs_now();
		if (ctl->kind == DNFS_CTL_GETATTR)
			rc = nfs_fstat64_async(d->nfs, d->nfsfh, dnfs_ctl_cb, d);
		else
			rc = nfs_ftruncate_async(d->nfs, d->nfsfh, ctl->size,
						 dnfs_ctl_cb, d);
		if (rc < 0) {
			ctl->inflight = false;
			dnfs_conn_broken(d, nfs_get_error(d->nfs));
		} else {
			d->ctl_rpc = true;
		}
		return;
	}
}

void dnfs_issue(struct dnfs *d)
{
	if (d->quiesce)
		dnfs_issue_resends(d);
	while (!g_queue_is_empty(&d->pending) && !d->broken &&
	       g_queue_get_length(&d->inflight) < DNFS_MAX_INFLIGHT) {
		struct dnfs_piece *p = d->pending.head->data;

		if (p->write && (d->quiesce || d->retained >= DNFS_RETAIN_MAX)) {
			d->commit_wanted = true;
			break;
		}
		dnfs_send(d, p, &d->pending);
	}
	if (!d->broken)
		dnfs_maybe_commit(d);
	dnfs_finish_flushes(d);
	if (!d->broken)
		dnfs_issue_ctls(d);
}

void dnfs_ready(struct dnfs *d)
{
	/* Writes retained across the outage: see whether the verifier
	 * still holds, now rather than at the next flush. */
	if (d->retained || !g_queue_is_empty(&d->resend))
		d->commit_wanted = true;
}

void dnfs_requeue_inflight(struct dnfs *d)
{
	GList *l;

	/* Back to the front, in their order. */
	while ((l = d->inflight.tail)) {
		struct dnfs_piece *p = l->data;

		dnfs_piece_landed(d, p);
		if (p->abandoned)
			dnfs_piece_free(d, p);
		else
			dnfs_piece_requeue(d, p);
	}
	d->commit_inflight = false;
	d->ctl_rpc = false;
	for (l = d->ctls.head; l; l = l->next)
		((struct dnfs_ctl *)l->data)->inflight = false;
}

void dnfs_free_pieces(struct dnfs *d)
{
	GList *l;

	g_assert(g_queue_is_empty(&d->inflight));
	while ((l = d->pending.head)) {
		g_queue_unlink(&d->pending, l);
		dnfs_piece_free(d, l->data);
	}
	while ((l = d->resend.head)) {
		g_queue_unlink(&d->resend, l);
		dnfs_piece_free(d, l->data);
	}
	while ((l = d->writes.head))
		dnfs_piece_free(d, l->data);
	d->retained = 0;
}
