/* SPDX-License-Identifier: MIT */
/*
 * The libaio context and its completion thread, or its owner thread for a
 * reaped context.  See aio.h for the contract.  Locking: aio->lock
 * protects in_kernel, the pending queue, the refused list and stopping;
 * the counters in stats are atomics.
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
	bool own_efd;			/* efd is ours to close */
	GThread *thread;		/* NULL: reaped by its owner */
	GMutex lock;
	GCond idle;			/* in_flight reached 0 */
	unsigned int in_kernel;		/* io_submit'ed, not reaped; by lock */
	struct dioloop_aio_req *pending, *pending_tail;	/* by lock */
	struct dioloop_aio_req *refused;	/* by lock */
	bool stopping;			/* by lock */
	bool freeing;			/* free waits on idle; by lock */
	bool plugged;			/* owner's: hold submissions */
	atomic_uint_fast64_t submitted, completed, deferred, batches;
	atomic_int_fast64_t in_flight;	/* accepted, done not yet run */
	atomic_int_fast64_t carried;	/* in this context, done not yet run
					 * (whoever accepted them) */
};

/* The reaped context bound to this thread (dioloop_aio_bind_thread). */
static __thread struct dioloop_aio *bound_aio;
/* dioloop_thread_set_block_hook's. */
static __thread void (*block_hook)(void);

void dioloop_thread_set_block_hook(void (*hook)(void))
{
	block_hook = hook;
}

void dioloop_thread_may_block(void)
{
	if (block_hook)
		block_hook();
}

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

/* Accept n requests for owner (whose in_flight counts them) and carry
 * them in ctx. */
static void aio_submit_to(struct dioloop_aio *ctx, struct dioloop_aio *owner,
			  struct dioloop_aio_req **reqs, int n)
{
	struct dioloop_iorec *rec = dioloop_iorec_get();
	int done = 0, i;

	if (n <= 0)
		return;
	if (rec)
		aio_report_flushes(rec, reqs, n);
	for (i = 0; i < n; i++)
		reqs[i]->owner = owner;
	atomic_fetch_add(&owner->in_flight, n);
	atomic_fetch_add(&ctx->carried, n);
	g_mutex_lock(&ctx->lock);
	if (ctx->plugged) {
		/* Its owner submits them all at once at the unplug. */
		for (i = 0; i < n; i++)
			queue_append(&ctx->pending, &ctx->pending_tail, reqs[i]);
		g_mutex_unlock(&ctx->lock);
		return;
	}
	/* Requests already waiting for ring space go first. */
	if (!ctx->pending)
		done = aio_submit_locked(ctx, reqs, n);
	if (done < n) {
		for (i = done; i < n; i++)
			queue_append(&ctx->pending, &ctx->pending_tail, reqs[i]);
		atomic_fetch_add(&ctx->deferred, n - done);
		aio_kick(ctx);
	}
	g_mutex_unlock(&ctx->lock);
}

void dioloop_aio_submit(struct dioloop_aio *aio,
			struct dioloop_aio_req **reqs, int n)
{
	aio_submit_to(aio, aio, reqs, n);
}

void dioloop_aio_submit_here(struct dioloop_aio *aio,
			     struct dioloop_aio_req **reqs, int n)
{
	aio_submit_to(bound_aio ? bound_aio : aio, aio, reqs, n);
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

/*
 * One request of owner's fewer in flight.  The last one is taken off
 * under owner->lock: dioloop_aio_free checks the count under that lock,
 * so it cannot see zero, and free owner, while this thread (which may be
 * another context's, not one free joins) still touches it.
 */
static void aio_owner_put(struct dioloop_aio *owner)
{
	int_fast64_t v = atomic_load(&owner->in_flight);

	while (v > 1)
		if (atomic_compare_exchange_weak(&owner->in_flight, &v, v - 1))
			return;
	g_mutex_lock(&owner->lock);
	/* GLib's broadcast is a system call even with no waiter, and at
	 * queue depth 1 every request is the last. */
	if (atomic_fetch_sub(&owner->in_flight, 1) == 1 && owner->freeing)
		g_cond_broadcast(&owner->idle);
	g_mutex_unlock(&owner->lock);
}

static void aio_req_done(struct dioloop_aio *ctx, struct dioloop_aio_req *req,
			 long res)
{
	struct dioloop_iorec *rec = dioloop_iorec_get();
	struct dioloop_aio *owner = req->owner;

	if (rec)
		aio_report_done(rec, req, res);
	req->done(req, res);
	atomic_fetch_add(&ctx->completed, 1);
	atomic_fetch_sub(&ctx->carried, 1);
	aio_owner_put(owner);
}

/*
 * Reap what completed, waiting up to timeout for the first completion
 * (NULL: no wait); then submit what waited for ring space and finish the
 * refused requests.  Returns how many done callbacks ran.
 */
static int aio_reap(struct dioloop_aio *aio, struct timespec *timeout)
{
	struct io_event events[AIO_MAX_EVENTS];
	struct timespec zero = { 0, 0 };
	struct dioloop_aio_req *refused;
	int n, i, total = 0;
	long min_nr = timeout ? 1 : 0;

	do {
		n = io_getevents(aio->ctx, min_nr, AIO_MAX_EVENTS, events,
				 timeout ? timeout : &zero);
		min_nr = 0;
		timeout = NULL;
		if (n < 0 && n != -EINTR)
			g_error("aio: io_getevents: %s", g_strerror(-n));
		if (n > 0) {
			g_mutex_lock(&aio->lock);
			aio->in_kernel -= n;
			g_mutex_unlock(&aio->lock);
			total += n;
		}
		for (i = 0; i < n; i++)
			aio_req_done(aio, events[i].data,
				     (long)events[i].res);
	} while (n == AIO_MAX_EVENTS);

	g_mutex_lock(&aio->lock);
	refused = aio->refused;
	aio->refused = NULL;
	aio_drain_pending(aio);
	g_mutex_unlock(&aio->lock);

	while (refused) {
		struct dioloop_aio_req *next = refused->next;

		aio_req_done(aio, refused, refused->res);
		refused = next;
		total++;
	}
	return total;
}

static gpointer aio_thread(gpointer data)
{
	struct dioloop_aio *aio = data;

	for (;;) {
		uint64_t v;
		bool stop;

		if (read(aio->efd, &v, sizeof(v)) < 0 && errno != EINTR &&
		    errno != EAGAIN)
			g_error("aio: eventfd read: %s", g_strerror(errno));
		aio_reap(aio, NULL);
		g_mutex_lock(&aio->lock);
		stop = aio->stopping;
		g_mutex_unlock(&aio->lock);
		if (stop && atomic_load(&aio->in_flight) == 0 &&
		    atomic_load(&aio->carried) == 0)
			break;
	}
	return NULL;
}

/* A context of depth signalling efd (-1: one of its own).  0 or -errno. */
static int aio_setup(unsigned int depth, int efd, struct dioloop_aio **out)
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
		g_free(aio);
		return ret;
	}
	aio->efd = efd;
	if (efd < 0) {
		aio->efd = eventfd(0, EFD_CLOEXEC);
		if (aio->efd < 0) {
			ret = -errno;
			io_destroy(aio->ctx);
			g_free(aio);
			return ret;
		}
		aio->own_efd = true;
	}
	g_mutex_init(&aio->lock);
	g_cond_init(&aio->idle);
	*out = aio;
	return 0;
}

int dioloop_aio_new(unsigned int depth, const char *name,
		    struct dioloop_aio **out)
{
	int ret = aio_setup(depth, -1, out);

	if (ret == 0)
		(*out)->thread = g_thread_new(name ? name : "dioloop-aio",
					      aio_thread, *out);
	return ret;
}

int dioloop_aio_new_reaped(unsigned int depth, int efd,
			   struct dioloop_aio **out)
{
	if (efd < 0)
		return -EBADF;
	return aio_setup(depth, efd, out);
}

void dioloop_aio_free(struct dioloop_aio *aio)
{
	if (!aio)
		return;
	if (!aio->thread) {
		/* Reaped by its owner, which is the caller: reap until it
		 * carries nothing. */
		struct timespec tick = { 0, 10 * 1000 * 1000 };

		while (atomic_load(&aio->carried) != 0)
			aio_reap(aio, &tick);
		if (bound_aio == aio)
			bound_aio = NULL;
	} else {
		g_mutex_lock(&aio->lock);
		aio->freeing = true;
		while (atomic_load(&aio->in_flight) != 0)
			dioloop_aio_cond_wait(&aio->idle, &aio->lock);
		aio->stopping = true;
		g_mutex_unlock(&aio->lock);
		aio_kick(aio);
		g_thread_join(aio->thread);
	}
	if (aio->own_efd)
		close(aio->efd);
	io_destroy(aio->ctx);
	g_mutex_clear(&aio->lock);
	g_cond_clear(&aio->idle);
	g_free(aio);
}

int dioloop_aio_reap(struct dioloop_aio *aio, int64_t timeout_us)
{
	struct timespec t;

	if (timeout_us <= 0)
		return aio_reap(aio, NULL);
	t.tv_sec = (time_t)(timeout_us / 1000000);
	t.tv_nsec = (long)(timeout_us % 1000000) * 1000;
	return aio_reap(aio, &t);
}

void dioloop_aio_plug(void)
{
	if (bound_aio)
		bound_aio->plugged = true;
}

void dioloop_aio_unplug(void)
{
	struct dioloop_aio *aio = bound_aio;

	if (!aio || !aio->plugged)
		return;
	g_mutex_lock(&aio->lock);
	aio->plugged = false;
	aio_drain_pending(aio);
	g_mutex_unlock(&aio->lock);
}

void dioloop_aio_bind_thread(struct dioloop_aio *aio)
{
	bound_aio = aio;
}

bool dioloop_aio_thread_bound(void)
{
	return bound_aio != NULL;
}

int dioloop_aio_reap_bound(int64_t timeout_us)
{
	if (!bound_aio || atomic_load(&bound_aio->carried) == 0)
		return -1;
	dioloop_aio_unplug();	/* what it waits for may be held */
	return dioloop_aio_reap(bound_aio, timeout_us);
}

void dioloop_aio_cond_wait(GCond *cond, GMutex *mutex)
{
	struct dioloop_aio *mine = bound_aio;

	dioloop_thread_may_block();
	/* Only this thread gives its context requests: carrying none now,
	 * it carries none until it wakes. */
	if (!mine || atomic_load(&mine->carried) == 0) {
		g_cond_wait(cond, mutex);
		return;
	}
	g_mutex_unlock(mutex);
	dioloop_aio_unplug();	/* what it waits for may be held */
	dioloop_aio_reap(mine, 1000);
	g_mutex_lock(mutex);
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
	return aio->thread ? g_thread_self() == aio->thread : bound_aio == aio;
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
