/* SPDX-License-Identifier: MIT */
/*
 * Deadlines of the nfs backend: a request or control operation that gets
 * no answer from the server within the mount's timeout fails with -EIO;
 * its RPCs in flight end unheard.  Service thread.
 */
#include <errno.h>

#include "backends/nfs/nfs_int.h"

#define DNFS_DEADLINE_SCAN_US (100 * 1000)

/* Give up on a request: -EIO now; its RPCs in flight end unheard. */
static void dnfs_req_timeout(struct dnfs *d, struct dnfs_req *req)
{
	GList *l;

	atomic_fetch_add(&d->stats.timeouts, 1);
	while ((l = req->pieces.head)) {
		struct dnfs_piece *p = l->data;

		g_queue_delete_link(&req->pieces, l);
		p->req = NULL;
		req->pending--;
		if (p->state == DNFS_P_INFLIGHT) {
			p->abandoned = true;
		} else {
			g_queue_unlink(&d->pending, &p->qlink);
			dnfs_piece_free(d, p);
		}
	}
	if (!req->err)
		req->err = -EIO;
	g_assert(req->pending == 0);
	dnfs_req_complete(d, req);
}

void dnfs_check_deadlines(struct dnfs *d, int64_t now, bool force)
{
	unsigned int failed = 0;
	GList *l;

	if (!force && now - d->last_deadline_scan_us < DNFS_DEADLINE_SCAN_US)
		return;
	d->last_deadline_scan_us = now;
	l = d->active.head;
	while (l) {
		struct dnfs_req *req = l->data;

		l = l->next;
		if (force || now >= req->deadline_us) {
			dnfs_req_timeout(d, req);
			failed++;
		}
	}
	l = d->ctls.head;
	while (l) {
		struct dnfs_ctl *ctl = l->data;

		l = l->next;
		if (force || now >= ctl->deadline_us) {
			ctl->inflight = false;
			dnfs_ctl_done(d, ctl, -EIO);
			failed++;
		}
	}
	if (failed)
		g_warning("%s: %u requests failed with EIO: no answer from the server within %us",
			  d->url.url, failed, d->url.timeout_s);
}
