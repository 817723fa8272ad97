/* SPDX-License-Identifier: MIT */
/*
 * The service thread of an nfs image: its libnfs context, the connection
 * chain (MOUNT -> LOOKUP/open -> GETATTR), tearing a failed context down
 * and reconnecting, and the poll loop (see nfs_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/nfs/nfs_int.h"

#define DNFS_BACKOFF_MIN_US (100 * 1000)
#define DNFS_BACKOFF_MAX_US (1000 * 1000)
#define DNFS_TICK_MS 100

/*
 * libnfs 4.0 returns its file handle as a struct nfs_fh that its public
 * headers leave opaque (nfs_get_fh() exists to pass it to the rpc_nfs3_*
 * calls).  Its layout, from libnfs-private.h; the length is checked.
 */
struct dnfs_libnfs_fh {
	int len;
	char *val;
};

static GPrivate dnfs_service_key;

void dnfs_wake(struct dnfs *d)
{
	uint64_t one = 1;

	if (write(d->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		g_warning("%s: eventfd write: %s", d->url.url, g_strerror(errno));
}

bool dnfs_on_service_thread(struct dnfs *d)
{
	return g_private_get(&dnfs_service_key) == d;
}

void dnfs_conn_broken(struct dnfs *d, const char *why)
{
	if (d->tearing_down || d->broken)
		return;
	d->broken = true;
	if (d->state == DNFS_READY && !d->outage_logged) {
		d->outage_logged = true;
		g_warning("%s: connection to the server lost (%s); reconnecting for up to %us",
			  d->url.url, why ? why : "unknown error",
			  d->url.timeout_s);
	}
}

/* Tell open how the first connection ended. */
static void dnfs_open_result(struct dnfs *d, int err)
{
	g_mutex_lock(&d->lock);
	d->opened = true;
	d->open_err = err;
	g_cond_broadcast(&d->cond);
	g_mutex_unlock(&d->lock);
}

/* A connection attempt failed at some step: log (the first failure of an
 * outage; every failure before the first success, which ends open) and
 * have the loop tear the context down. */
static void dnfs_attempt_failed(struct dnfs *d, int err, const char *what,
				const char *detail)
{
	if (d->broken || d->tearing_down)
		return;
	if (err >= 0)
		err = -EIO;
	if (!d->ever_ready) {
		char *msg = g_strdup_printf("%s: %s: %s", d->url.url, what,
					    detail && *detail ? detail :
					    g_strerror(-err));

		if (d->open_error_wanted) {
			g_mutex_lock(&d->lock);
			if (!d->open_msg)
				d->open_msg = g_steal_pointer(&msg);
			g_mutex_unlock(&d->lock);
		} else {
			g_warning("%s", msg);
		}
		g_free(msg);
		d->broken = true;
		d->state = DNFS_DOWN;
		dnfs_open_result(d, err);
		return;
	}
	if (!d->outage_logged) {
		d->outage_logged = true;
		g_warning("%s: reconnecting: %s: %s", d->url.url, what,
			  detail && *detail ? detail : g_strerror(-err));
	}
	d->broken = true;
}

static uint64_t ns_of(uint64_t sec, uint64_t nsec)
{
	return sec * 1000000000u + MIN(nsec, (uint64_t)999999999u);
}

void dnfs_keep_times(struct dnfs *d, uint64_t atime, uint64_t atime_ns,
		     uint64_t mtime, uint64_t mtime_ns, uint64_t ctime,
		     uint64_t ctime_ns)
{
	atomic_store(&d->atime_ns, ns_of(atime, atime_ns));
	atomic_store(&d->mtime_ns, ns_of(mtime, mtime_ns));
	atomic_store(&d->ctime_ns, ns_of(ctime, ctime_ns));
}

void dnfs_keep_post_op_times(struct dnfs *d, const post_op_attr *a)
{
	const fattr3 *f = &a->post_op_attr_u.attributes;

	if (a->attributes_follow)
		dnfs_keep_times(d, f->atime.seconds, f->atime.nseconds,
				f->mtime.seconds, f->mtime.nseconds,
				f->ctime.seconds, f->ctime.nseconds);
}

/* Last step: the file's attributes.  Service thread (libnfs callback). */
static void dnfs_stat_cb(int err, struct nfs_context *nfs, void *data,
			 void *priv)
{
	struct dnfs *d = priv;
	struct nfs_stat_64 *st = data;
	uint64_t rmax, wmax;

	if (d->tearing_down || nfs != d->nfs || d->state != DNFS_CONNECTING)
		return;
	if (err) {
		dnfs_attempt_failed(d, err, "GETATTR", data);
		return;
	}
	if ((st->nfs_mode & S_IFMT) != S_IFREG) {
		dnfs_attempt_failed(d, -EINVAL, d->url.file,
				    "not a regular file");
		return;
	}
	dnfs_keep_times(d, st->nfs_atime, st->nfs_atime_nsec, st->nfs_mtime,
			st->nfs_mtime_nsec, st->nfs_ctime, st->nfs_ctime_nsec);
	rmax = nfs_get_readmax(nfs);
	wmax = nfs_get_writemax(nfs);
	atomic_store(&d->rsize, (uint32_t)CLAMP(rmax, DNFS_MIN_XFER, DNFS_MAX_XFER));
	atomic_store(&d->wsize, (uint32_t)CLAMP(wmax, DNFS_MIN_XFER, DNFS_MAX_XFER));
	d->state = DNFS_READY;
	d->backoff_us = DNFS_BACKOFF_MIN_US;
	d->last_progress_us = dnfs_now();
	if (!d->ever_ready) {
		d->ever_ready = true;
		atomic_store(&d->size, st->nfs_size);
		dnfs_open_result(d, 0);
	} else {
		atomic_fetch_add(&d->stats.reconnects, 1);
		if (d->outage_logged)
			g_message("%s: reconnected", d->url.url);
	}
	d->outage_logged = false;
	dnfs_ready(d);
}

/* The file is open: keep its NFSv3 handle, ask for its attributes. */
static void dnfs_open_cb(int err, struct nfs_context *nfs, void *data,
			 void *priv)
{
	struct dnfs *d = priv;
	const struct dnfs_libnfs_fh *fh;

	if (d->tearing_down || nfs != d->nfs || d->state != DNFS_CONNECTING)
		return;
	if (err) {
		g_autofree char *what = g_strdup_printf("open %s%s", d->url.dir,
							d->url.file);

		dnfs_attempt_failed(d, err, what, data);
		return;
	}
	d->nfsfh = data;
	fh = (const struct dnfs_libnfs_fh *)nfs_get_fh(d->nfsfh);
	if (!fh || fh->len <= 0 || fh->len > DNFS_FHSIZE || !fh->val) {
		dnfs_attempt_failed(d, -EPROTO, "open",
				    "unexpected file handle from libnfs");
		return;
	}
	if (d->fh_len && (d->fh_len != (unsigned int)fh->len ||
			  memcmp(d->fh, fh->val, d->fh_len)))
		g_message("%s: the server gave a new file handle", d->url.url);
	memcpy(d->fh, fh->val, (size_t)fh->len);
	d->fh_len = (unsigned int)fh->len;
	if (nfs_fstat64_async(nfs, d->nfsfh, dnfs_stat_cb, d) < 0)
		dnfs_attempt_failed(d, -EIO, "GETATTR", nfs_get_error(nfs));
}

/* The directory is mounted: open the file in it. */
static void dnfs_mount_cb(int err, struct nfs_context *nfs, void *data,
			  void *priv)
{
	struct dnfs *d = priv;

	if (d->tearing_down || nfs != d->nfs || d->state != DNFS_CONNECTING)
		return;
	if (err) {
		g_autofree char *what = g_strdup_printf("mount %s:%s",
							d->url.server,
							d->url.dir);

		dnfs_attempt_failed(d, err, what, data);
		return;
	}
	if (nfs_open_async(nfs, d->url.file, d->rdonly ? O_RDONLY : O_RDWR,
			   dnfs_open_cb, d) < 0)
		dnfs_attempt_failed(d, -EIO, "open", nfs_get_error(nfs));
}

/* Start a connection on a new context. */
static void dnfs_connect_start(struct dnfs *d)
{
	g_assert(!d->nfs);
	d->gen++;
	d->state = DNFS_CONNECTING;
	d->connect_deadline_us = dnfs_now() + d->timeout_us;
	d->nfs = dnfs_context_new(&d->url, NULL);
	if (!d->nfs) {
		dnfs_attempt_failed(d, -ENOMEM, "connect", "no context");
		return;
	}
	if (nfs_mount_async(d->nfs, d->url.server, d->url.dir, dnfs_mount_cb,
			    d) < 0) {
		g_autofree char *what = g_strdup_printf("mount %s:%s",
							d->url.server,
							d->url.dir);

		dnfs_attempt_failed(d, -EIO, what, nfs_get_error(d->nfs));
	}
}

static void dnfs_close_cb(int err, struct nfs_context *nfs, void *data,
			  void *priv)
{
}

/* Destroy the context; what was in flight goes back to the queues. */
static void dnfs_teardown(struct dnfs *d)
{
	if (d->nfs) {
		d->tearing_down = true;
		/* NFSv3 close is local (frees the handle), no RPC. */
		if (d->nfsfh)
			nfs_close_async(d->nfs, d->nfsfh, dnfs_close_cb, NULL);
		nfs_destroy_context(d->nfs);
		d->tearing_down = false;
		d->nfs = NULL;
		d->nfsfh = NULL;
	}
	dnfs_requeue_inflight(d);
	d->broken = false;
	d->state = DNFS_DOWN;
	d->next_attempt_us = dnfs_now() + d->backoff_us;
	d->backoff_us = MIN(d->backoff_us * 2, DNFS_BACKOFF_MAX_US);
}

/* Poll the eventfd and the context's socket once; service what fired. */
static void dnfs_poll_once(struct dnfs *d, bool stop)
{
	struct pollfd fds[2] = { { .fd = d->efd, .events = POLLIN } };
	int nfds = 1, timeout = -1, ret;

	if (d->nfs) {
		fds[1].fd = nfs_get_fd(d->nfs);
		fds[1].events = (short)nfs_which_events(d->nfs);
		if (fds[1].fd >= 0)
			nfds = 2;
	}
	if (stop || d->state != DNFS_READY || dnfs_has_work(d))
		timeout = DNFS_TICK_MS;
	ret = poll(fds, (nfds_t)nfds, timeout);
	if (ret < 0) {
		if (errno != EINTR)
			g_warning("%s: poll: %s", d->url.url, g_strerror(errno));
		return;
	}
	if (fds[0].revents & POLLIN) {
		uint64_t v;

		if (read(d->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			g_warning("%s: eventfd read: %s", d->url.url,
				  g_strerror(errno));
	}
	if (nfds == 2 && fds[1].revents && d->nfs) {
		if (nfs_service(d->nfs, fds[1].revents) < 0) {
			const char *e = nfs_get_error(d->nfs);
			g_autofree char *why = g_strdup(e && *e ? e :
							"connection closed");

			if (d->state == DNFS_CONNECTING)
				dnfs_attempt_failed(d, -ECONNREFUSED, "connect",
						    why);
			else
				dnfs_conn_broken(d, why);
		}
	}
}

/* The service thread (see nfs_int.h). */
static gpointer dnfs_thread(gpointer opaque)
{
	struct dnfs *d = opaque;

	g_private_set(&dnfs_service_key, d);
	d->backoff_us = DNFS_BACKOFF_MIN_US;
	dnfs_connect_start(d);
	for (;;) {
		int64_t now;
		bool stop;

		g_mutex_lock(&d->lock);
		stop = d->stop;
		g_mutex_unlock(&d->lock);
		dnfs_take_submissions(d);
		if (d->broken)
			dnfs_teardown(d);
		/* close flushed first; what is left is given up. */
		if (stop)
			break;
		now = dnfs_now();
		if (d->state == DNFS_DOWN && d->ever_ready &&
		    now >= d->next_attempt_us && dnfs_has_work(d))
			dnfs_connect_start(d);
		else if (d->state == DNFS_CONNECTING &&
			 now > d->connect_deadline_us)
			dnfs_attempt_failed(d, -ETIMEDOUT, "connect",
					    "no answer from the server");
		if (d->state == DNFS_READY) {
			if (!g_queue_is_empty(&d->inflight) || d->commit_inflight ||
			    d->ctl_rpc) {
				if (now - d->last_progress_us > d->hang_us)
					dnfs_conn_broken(d, "no answer");
			}
			if (!d->broken)
				dnfs_issue(d);
		} else {
			/* A flush with no write left to COMMIT needs no
			 * server: it must not wait for one to come back. */
			dnfs_finish_flushes(d);
		}
		dnfs_check_deadlines(d, now, stop);
		if (d->broken)
			continue;
		dnfs_poll_once(d, stop);
	}
	d->broken = true;
	dnfs_teardown(d);
	return NULL;
}

int dnfs_service_start(struct dnfs *d)
{
	int err;

	d->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->efd < 0) {
		err = -errno;
		g_warning("%s: eventfd: %s", d->url.url, g_strerror(-err));
		return err;
	}
	d->thread = g_thread_new("nfs-io", dnfs_thread, d);
	g_mutex_lock(&d->lock);
	while (!d->opened)
		g_cond_wait(&d->cond, &d->lock);
	err = d->open_err;
	g_mutex_unlock(&d->lock);
	return err;
}

void dnfs_service_stop(struct dnfs *d)
{
	if (d->thread) {
		g_mutex_lock(&d->lock);
		d->stop = true;
		g_mutex_unlock(&d->lock);
		dnfs_wake(d);
		g_thread_join(d->thread);
		d->thread = NULL;
	}
	if (d->efd >= 0)
		close(d->efd);
	d->efd = -1;
}
