/* SPDX-License-Identifier: MIT */
/*
 * The libaio context and its completion thread.  See aio.h for the
 * contract.  Locking: aio->lock protects in_kernel, the pending queue, the
 * refused list and stopping; the counters in stats are atomics.
 */
#include "backends/aio.h"

#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backends/iorec.h"

#define AIO_MAX_EVENTS 128

struct dioloop_aio {
	io_context_t ctx;
	unsigned int depth;
	int efd;			/* signalled by the kernel and by kicks */
	GThread *thread;
	GMutex lock;
	GCond idle;			/* in_flight reached 0 */
	unsigned int in_kernel;		/* io_submit'ed, not reaped; by lock */
	struct dioloop_aio_req *pending, *pending_tail;	/* by lock */
	struct dioloop_aio_req *refused;	/* by lock */
	bool stopping;			/* by lock */
	atomic_uint_fast64_t submitted, completed, deferred, batches;
	atomic_int_fast64_t in_flight;	/* accepted, done not yet run */
};

/* Wake the completion thread (it also wakes for kernel completions). */
static void aio_kick(struct dioloop_aio *aio)
{
	uint64_t one = 1;

	while (write(aio->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void queue_append(struct dioloop_aio_req **head,
			 struct dioloop_aio_req **tail,
			 struct dioloop_aio_req *req)
{
	req->next = NULL;
	if (*tail)
		(*tail)->next = req;
	else
		*head = req;
	*tail = req;
}

/*
 * Hand reqs to the kernel as far as ring space allows.  Returns how many
 * from the front were dealt with (submitted, or refused and put on the
 * refused list); the rest must be queued by the caller.
 * Called with aio->lock held; drops it around io_submit.
 */
static int aio_submit_locked(struct dioloop_aio *aio,
			     struct dioloop_aio_req **reqs, int n)
{
	struct iocb *iocbs[AIO_MAX_EVENTS];
	int done = 0;

	while (done < n) {
		unsigned int room = aio->depth - aio->in_kernel;
		int k = n - done, i, ret;

		if (room == 0)
			break;
		if ((unsigned int)k > room)
			k = (int)room;
		if (k > AIO_MAX_EVENTS)
			k = AIO_MAX_EVENTS;
		for (i = 0; i < k; i++) {
			iocbs[i] = &reqs[done + i]->iocb;
			io_set_eventfd(iocbs[i], aio->efd);
		}
		aio->in_kernel += k;
		g_mutex_unlock(&aio->lock);
		ret = io_submit(aio->ctx, k, iocbs);
		g_mutex_lock(&aio->lock);
		if (ret > 0) {
			aio->in_kernel -= k - ret;
			done += ret;
			atomic_fetch_add(&aio->submitted, ret);
			atomic_fetch_add(&aio->batches, 1);
			continue;
		}
		aio->in_kernel -= k;
		if (ret == -EAGAIN || ret == 0)
			break;
		/* The first request was refused outright (bad fd, bad
		 * arguments): fail it through the completion thread. */
		reqs[done]->res = ret;
		reqs[done]->next = aio->refused;
		aio->refused = reqs[done];
		done++;
		aio_kick(aio);
	}
	return done;
}

/* The recorder's token of each flush in flight (request -> guint64),
 * made only once a recorder is installed, so that the test hook adds
 * nothing to a request or a context.  By iorec_tokens_lock. */
static GMutex iorec_tokens_lock;
static GHashTable *iorec_tokens;

/* Tell the recorder about the flushes among reqs (they cover the writes
 * it has seen complete so far). */
static void aio_report_flushes(struct dioloop_iorec *r,
			       struct dioloop_aio_req **reqs, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct iocb *cb = &reqs[i]->iocb;
		guint64 *token;

		if (cb->aio_lio_opcode != IO_CMD_FDSYNC &&
		    cb->aio_lio_opcode != IO_CMD_FSYNC)
			continue;
		token = g_new(guint64, 1);
		*token = r->flush_begin(r, cb->aio_fildes);
		g_mutex_lock(&iorec_tokens_lock);
		if (!iorec_tokens)
			iorec_tokens = g_hash_table_new_full(g_direct_hash,
							     g_direct_equal,
							     NULL, g_free);
		g_hash_table_insert(iorec_tokens, reqs[i], token);
		g_mutex_unlock(&iorec_tokens_lock);
	}
}

/* The recorder's token of the flush req (0 if it was submitted before the
 * recorder was installed), forgotten. */
static uint64_t aio_take_token(struct dioloop_aio_req *req)
{
	guint64 *token = NULL;
	uint64_t ret = 0;

	g_mutex_lock(&iorec_tokens_lock);
	if (iorec_tokens)
		token = g_hash_table_lookup(iorec_tokens, req);
	if (token) {
		ret = *token;
		g_hash_table_remove(iorec_tokens, req);
	}
	g_mutex_unlock(&iorec_tokens_lock);
	return ret;
}

/* Tell the recorder a write or flush finished with res, before its
 * submitter learns it. */
static void aio_report_done(struct dioloop_iorec *r,
			    struct dioloop_aio_req *req, long res)
{
	struct iocb *cb = &req->iocb;
	struct iovec one;

	switch (cb->aio_lio_opcode) {
	case IO_CMD_PWRITE:
		one = (struct iovec){ cb->u.c.buf, cb->u.c.nbytes };
		r->write(r, cb->aio_fildes, &one, 1, (uint64_t)cb->u.c.offset,
			 res);
		break;
	case IO_CMD_PWRITEV:
		r->write(r, cb->aio_fildes, cb->u.v.vec, (int)cb->u.v.nr,
			 (uint64_t)cb->u.v.offset, res);
		break;
	case IO_CMD_FSYNC:
	case IO_CMD_FDSYNC:
		r->flush_end(r, cb->aio_fildes, aio_take_token(req),
			     (int)res);
		break;
	default:
		break;
	}
}

void dioloop_aio_submit(struct dioloop_aio *aio,
			struct dioloop_aio_req **reqs, int n)
{
	struct dioloop_iorec *rec = dioloop_iorec_get();
	int done = 0, i;

	if (n <= 0)
		return;
	if (rec)
		aio_report_flushes(rec, reqs, n);
	atomic_fetch_add(&aio->in_flight, n);
	g_mutex_lock(&aio->lock);
	/* Requests already waiting for ring space go first. */
	if (!aio->pending)
		done = aio_submit_locked(aio, reqs, n);
	if (done < n) {
		for (i = done; i < n; i++)
			queue_append(&aio->pending, &aio->pending_tail, reqs[i]);
		atomic_fetch_add(&aio->deferred, n - done);
		aio_kick(aio);
	}
	g_mutex_unlock(&aio->lock);
}

/*
 * Submit what waited for ring space, oldest first; what still does not fit
 * goes back to the front of the queue.  Completion thread, lock held.
 */
static void aio_drain_pending(struct dioloop_aio *aio)
{
	while (aio->pending && aio->in_kernel < aio->depth) {
		struct dioloop_aio_req *batch[AIO_MAX_EVENTS];
		int n = 0, done, i;

		while (aio->pending && n < AIO_MAX_EVENTS) {
			batch[n++] = aio->pending;
			aio->pending = aio->pending->next;
		}
		if (!aio->pending)
			aio->pending_tail = NULL;
		done = aio_submit_locked(aio, batch, n);
		for (i = n - 1; i >= done; i--) {
			if (!aio->pending)
				aio->pending_tail = batch[i];
			batch[i]->next = aio->pending;
			aio->pending = batch[i];
		}
		if (done < n)
			break;
	}
}

static void aio_req_done(struct dioloop_aio *aio, struct dioloop_aio_req *req,
			 long res)
{
	struct dioloop_iorec *rec = dioloop_iorec_get();

	if (rec)
		aio_report_done(rec, req, res);
	req->done(req, res);
	atomic_fetch_add(&aio->completed, 1);
	if (atomic_fetch_sub(&aio->in_flight, 1) == 1) {
		g_mutex_lock(&aio->lock);
		g_cond_broadcast(&aio->idle);
		g_mutex_unlock(&aio->lock);
	}
}

static gpointer aio_thread(gpointer data)
{
	struct dioloop_aio *aio = data;
	struct io_event events[AIO_MAX_EVENTS];
	struct timespec zero = { 0, 0 };

	for (;;) {
		struct dioloop_aio_req *refused;
		uint64_t v;
		int n, i;
		bool stop;

		if (read(aio->efd, &v, sizeof(v)) < 0 && errno != EINTR &&
		    errno != EAGAIN)
			g_error("aio: eventfd read: %s", g_strerror(errno));

		do {
			n = io_getevents(aio->ctx, 0, AIO_MAX_EVENTS, events,
					 &zero);
			if (n < 0 && n != -EINTR)
				g_error("aio: io_getevents: %s",
					g_strerror(-n));
			if (n > 0) {
				g_mutex_lock(&aio->lock);
				aio->in_kernel -= n;
				g_mutex_unlock(&aio->lock);
			}
			for (i = 0; i < n; i++)
				aio_req_done(aio, events[i].data,
					     (long)events[i].res);
		} while (n == AIO_MAX_EVENTS);

		g_mutex_lock(&aio->lock);
		refused = aio->refused;
		aio->refused = NULL;
		aio_drain_pending(aio);
		stop = aio->stopping;
		g_mutex_unlock(&aio->lock);

		while (refused) {
			struct dioloop_aio_req *next = refused->next;

			aio_req_done(aio, refused, refused->res);
			refused = next;
		}
		if (stop && atomic_load(&aio->in_flight) == 0)
			break;
	}
	return NULL;
}

int dioloop_aio_new(unsigned int depth, const char *name,
		    struct dioloop_aio **out)
{
	struct dioloop_aio *aio;
	int ret;

	if (depth == 0)
		return -EINVAL;
	aio = g_new0(struct dioloop_aio, 1);
	aio->depth = depth;
	ret = io_setup(depth, &aio->ctx);
	if (ret < 0) {
		g_warning("aio: io_setup(%u): %s", depth, g_strerror(-ret));
		goto out_free;
	}
	aio->efd = eventfd(0, EFD_CLOEXEC);
	if (aio->efd < 0) {
		ret = -errno;
		goto out_destroy;
	}
	g_mutex_init(&aio->lock);
	g_cond_init(&aio->idle);
	aio->thread = g_thread_new(name ? name : "dioloop-aio", aio_thread,
				   aio);
	*out = aio;
	return 0;

out_destroy:
	io_destroy(aio->ctx);
out_free:
	g_free(aio);
	return ret;
}

void dioloop_aio_free(struct dioloop_aio *aio)
{
	if (!aio)
		return;
	g_mutex_lock(&aio->lock);
	while (atomic_load(&aio->in_flight) != 0)
		g_cond_wait(&aio->idle, &aio->lock);
	aio->stopping = true;
	g_mutex_unlock(&aio->lock);
	aio_kick(aio);
	g_thread_join(aio->thread);
	close(aio->efd);
	io_destroy(aio->ctx);
	g_mutex_clear(&aio->lock);
	g_cond_clear(&aio->idle);
	g_free(aio);
}

void dioloop_aio_prep_rw(struct dioloop_aio_req *req, bool write, int fd,
			 const struct iovec *iov, int nr_iov, off_t offset,
			 dioloop_aio_done_t done)
{
	if (write)
		io_prep_pwritev(&req->iocb, fd, iov, nr_iov, offset);
	else
		io_prep_preadv(&req->iocb, fd, iov, nr_iov, offset);
	req->iocb.data = req;
	req->done = done;
	req->next = NULL;
	req->res = 0;
}

void dioloop_aio_prep_fdsync(struct dioloop_aio_req *req, int fd,
			     dioloop_aio_done_t done)
{
	io_prep_fdsync(&req->iocb, fd);
	req->iocb.data = req;
	req->done = done;
	req->next = NULL;
	req->res = 0;
}

bool dioloop_aio_on_completion_thread(struct dioloop_aio *aio)
{
	return g_thread_self() == aio->thread;
}

void dioloop_aio_get_stats(struct dioloop_aio *aio,
			   struct dioloop_aio_stats *stats)
{
	stats->submitted = atomic_load(&aio->submitted);
	stats->completed = atomic_load(&aio->completed);
	stats->deferred = atomic_load(&aio->deferred);
	stats->batches = atomic_load(&aio->batches);
	stats->in_flight = (uint64_t)atomic_load(&aio->in_flight);
}
