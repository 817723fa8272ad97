/* SPDX-License-Identifier: MIT */
/*
 * COMMIT and the write-verifier rules of the nfs backend (see
 * nfs_int.h): writes stay retained until a COMMIT whose verifier matches
 * theirs; a changed verifier (a server restart) sends every retained
 * write again, in order, before the next COMMIT.  Service thread.
 */
#include <string.h>

#include "backends/iorec.h"
#include "backends/nfs/nfs_int.h"

/* Fail every flush waiting with err. */
static void dnfs_fail_flushes(struct dnfs *d, int err)
{
	GList *l = d->ctls.head;

	while (l) {
		struct dnfs_ctl *ctl = l->data;

		l = l->next;
		if (ctl->kind == DNFS_CTL_FLUSH)
			dnfs_ctl_done(d, ctl, err);
	}
}

static gint dnfs_seq_cmp(gconstpointer a, gconstpointer b, gpointer unused)
{
	const struct dnfs_piece *pa = a, *pb = b;

	return pa->seq < pb->seq ? -1 : pa->seq > pb->seq;
}

/* The verifier changed: send every retained write again, in order. */
static void dnfs_start_resend(struct dnfs *d)
{
	uint64_t n = 0, bytes = 0;
	GList *l;

	atomic_fetch_add(&d->stats.verifier_changes, 1);
	d->quiesce = true;
	for (l = d->writes.head; l; l = l->next) {
		struct dnfs_piece *p = l->data;

		if (p->state != DNFS_P_WRITTEN)
			continue;
		p->state = DNFS_P_QUEUED;
		p->resending = true;
		p->done = 0;
		dnfs_set_retained(d, -(int64_t)p->len);
		g_queue_push_tail_link(&d->resend, &p->qlink);
		n++;
		bytes += p->len;
	}
	g_warning("%s: the server's write verifier changed (it restarted?): sending %llu uncommitted writes (%llu bytes) again",
		  d->url.url, (unsigned long long)n, (unsigned long long)bytes);
}

static void dnfs_commit_cb(struct rpc_context *rpc, int status, void *data,
			   void *priv)
{
	struct dnfs *d = priv;
	COMMIT3res *res = data;
	const char *verf;
	bool mismatch = false;
	GList *l;

	if (!d->commit_inflight || d->commit_gen != d->gen)
		return;
	d->commit_inflight = false;
	d->last_progress_us = dnfs_now();
	if (status != RPC_STATUS_SUCCESS) {
		if (!d->tearing_down)
			dnfs_conn_broken(d, status == RPC_STATUS_ERROR && data ?
					 (const char *)data : "COMMIT lost");
		return;
	}
	if (res->status != NFS3_OK) {
		if (dnfs_status_reconnects(res->status)) {
			dnfs_conn_broken(d, nfsstat3_to_str(res->status));
		} else if (res->status != NFS3ERR_JUKEBOX) {
			g_warning("%s: COMMIT: %s", d->url.url,
				  nfsstat3_to_str(res->status));
			dnfs_fail_flushes(d, dnfs_errno(res->status));
		}
		return;
	}
	atomic_fetch_add(&d->stats.commits, 1);
	verf = res->COMMIT3res_u.resok.verf;
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_COMMIT, d->url.url, 0, NULL,
			     0, false, verf, 0);
	for (l = d->writes.head; l && !mismatch; l = l->next) {
		struct dnfs_piece *p = l->data;

		if (p->state == DNFS_P_WRITTEN && p->done_seq <= d->commit_mark)
			mismatch = !p->verf_valid ||
				   memcmp(p->verf, verf, sizeof(p->verf));
	}
	memcpy(d->verf, verf, sizeof(d->verf));
	d->verf_known = true;
	if (mismatch) {
		dnfs_start_resend(d);
		return;
	}
	l = d->writes.head;
	while (l) {
		struct dnfs_piece *p = l->data;

		l = l->next;
		if (p->state == DNFS_P_WRITTEN && p->done_seq <= d->commit_mark) {
			dnfs_set_retained(d, -(int64_t)p->len);
			dnfs_piece_free(d, p);
		}
	}
}

/* True if a resent write in flight overlaps p. */
static bool dnfs_resend_overlaps(struct dnfs *d, const struct dnfs_piece *p)
{
	GList *l;

	for (l = d->inflight.head; l; l = l->next) {
		const struct dnfs_piece *q = l->data;

		if (q->write && q->resending && q->pos < p->pos + p->len &&
		    p->pos < q->pos + q->len)
			return true;
	}
	return false;
}

/* Send resends: only once no new write is in flight, in sequence order,
 * each after any overlapping earlier one was answered. */
void dnfs_issue_resends(struct dnfs *d)
{
	GList *l;
	bool any = false;

	if (d->user_writes_inflight || d->commit_inflight)
		return;
	for (l = d->inflight.head; l; l = l->next)
		any |= ((struct dnfs_piece *)l->data)->resending;
	if (!any)
		g_queue_sort(&d->resend, dnfs_seq_cmp, NULL);
	while (!g_queue_is_empty(&d->resend) && !d->broken &&
	       g_queue_get_length(&d->inflight) < DNFS_MAX_INFLIGHT) {
		struct dnfs_piece *p = d->resend.head->data;

		if (dnfs_resend_overlaps(d, p))
			return;
		dnfs_send(d, p, &d->resend);
	}
	if (g_queue_is_empty(&d->resend)) {
		for (l = d->inflight.head; l; l = l->next)
			if (((struct dnfs_piece *)l->data)->resending)
				return;
		/* All sent again and answered: COMMIT them. */
		d->quiesce = false;
		d->commit_wanted = true;
	}
}

/* Flushes whose writes are all committed (or failed) are done. */
void dnfs_finish_flushes(struct dnfs *d)
{
	const struct dnfs_piece *head = d->writes.head ? d->writes.head->data :
							 NULL;
	GList *l = d->ctls.head;

	while (l) {
		struct dnfs_ctl *ctl = l->data;

		l = l->next;
		if (ctl->kind == DNFS_CTL_FLUSH && (!head || head->seq > ctl->seq))
			dnfs_ctl_done(d, ctl, 0);
	}
}

/* Start a COMMIT round when one is due and something is retained. */
void dnfs_maybe_commit(struct dnfs *d)
{
	bool flush = false;
	GList *l;
	COMMIT3args a = { .file = { .data = { d->fh_len, d->fh } } };

	if (d->commit_inflight || d->quiesce)
		return;
	for (l = d->ctls.head; l && !flush; l = l->next)
		flush = ((struct dnfs_ctl *)l->data)->kind == DNFS_CTL_FLUSH;
	if (!flush && !d->commit_wanted && d->retained < DNFS_RETAIN_COMMIT)
		return;
	d->commit_wanted = false;
	if (!d->retained)
		return;
	if (g_queue_is_empty(&d->inflight))
		d->last_progress_us = dnfs_now();
	d->commit_inflight = true;
	d->commit_gen = d->gen;
	d->commit_mark = d->done_counter;
	atomic_fetch_add(&d->stats.rpcs, 1);
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_COMMIT_SENT, d->url.url, 0,
			     NULL, 0, false, NULL, 0);
	if (rpc_nfs3_commit_async(dnfs_rpc(d), dnfs_commit_cb, &a, d) < 0) {
		d->commit_inflight = false;
		dnfs_conn_broken(d, rpc_get_error(dnfs_rpc(d)));
	}
}
