/* SPDX-License-Identifier: MIT */
/*
 * An asynchronous I/O context: one libaio io_context, an eventfd that the
 * kernel signals on each completion, and one completion thread that reaps
 * events with io_getevents() and calls each request's done callback.
 *
 * Submission never blocks and never fails for lack of ring space: what
 * io_submit() cannot take now (-EAGAIN, or a short count) is queued and
 * submitted by the completion thread as soon as events free ring slots.
 * So it is safe to submit from the completion thread itself (a callback
 * that starts the next phase of a request).
 *
 * Lifetime: a struct dioloop_aio_req belongs to its submitter until done is
 * called; done is called exactly once, on the completion thread, with the
 * kernel's result (bytes transferred, or -errno).  After done returns the
 * context no longer touches the request.
 *
 * A reaped context has no completion thread: the kernel signals an eventfd
 * its owner thread watches (a FUSE ring's thread polls it in its ring),
 * and the owner calls dioloop_aio_reap, so a request costs that thread one
 * wake-up, not a hand-over to another thread and back.  The owner binds it
 * to itself; then dioloop_aio_submit_here from that thread carries the
 * requests in it, whichever context they are submitted through (that one
 * still counts them: its dioloop_aio_free waits for them).  A bound thread
 * must never sleep on something only its own completions would end: it
 * waits with dioloop_aio_cond_wait, which reaps meanwhile.
 */
#ifndef DIOLOOP_AIO_H
#define DIOLOOP_AIO_H

#include <glib.h>
#include <libaio.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct dioloop_aio;
struct dioloop_aio_req;

typedef void (*dioloop_aio_done_t)(struct dioloop_aio_req *req, long res);

struct dioloop_aio_req {
	struct iocb iocb;		/* filled by dioloop_aio_prep_*() */
	dioloop_aio_done_t done;
	/* private to the context: */
	struct dioloop_aio *owner;	/* submitted through (counts it) */
	struct dioloop_aio_req *next;	/* queue link */
	long res;			/* result of a request io_submit refused */
};

struct dioloop_aio_stats {
	uint64_t submitted;	/* requests accepted by io_submit */
	uint64_t completed;	/* done callbacks run */
	uint64_t deferred;	/* requests that waited for ring space */
	uint64_t in_flight;	/* submitted and not yet completed */
	uint64_t batches;	/* io_submit calls that took >= 1 request */
};

/* Create a context with room for depth requests in the kernel at once and
 * start its completion thread named name.  0 or -errno. */
int dioloop_aio_new(unsigned int depth, const char *name,
		    struct dioloop_aio **out);
/* A context with no thread of its own: the kernel signals efd (the
 * caller's; not closed by free) on each completion; reap it with
 * dioloop_aio_reap on the thread that binds it.  0 or -errno. */
int dioloop_aio_new_reaped(unsigned int depth, int efd,
			   struct dioloop_aio **out);
/* Wait for every submitted request to complete, stop the thread, free.
 * A reaped context: called by its owner thread, which it unbinds. */
void dioloop_aio_free(struct dioloop_aio *aio);

/* Run the done callbacks of what completed in a reaped context, waiting
 * up to timeout_us (0: not at all) for the first.  Returns how many ran.
 * Its owner thread only. */
int dioloop_aio_reap(struct dioloop_aio *aio, int64_t timeout_us);
/* Carry this thread's dioloop_aio_submit_here requests in aio (a reaped
 * context), or no longer (NULL). */
void dioloop_aio_bind_thread(struct dioloop_aio *aio);
/* Hold this thread's submissions to its bound context (if any) until
 * dioloop_aio_unplug, which hands them to the kernel in as few io_submit
 * calls as fit: a batch of requests costs the disk one notification, not
 * one each.  A bound thread plugs only around work it does not wait in. */
void dioloop_aio_plug(void);
void dioloop_aio_unplug(void);
/* This thread is about to sleep until other threads' work wakes it (a
 * lock, a synchronous request, pages): it calls the hook its owner set,
 * if any (a FUSE worker then hands the reading of /dev/fuse on to another
 * worker, fusefs/session_dev.h).  Cheap when there is none. */
void dioloop_thread_may_block(void);
void dioloop_thread_set_block_hook(void (*hook)(void));
/* True when this thread has a reaped context bound. */
bool dioloop_aio_thread_bound(void);
/* dioloop_aio_reap of this thread's bound context; -1 when it has none or
 * it carries nothing (then only other threads can end a wait). */
int dioloop_aio_reap_bound(int64_t timeout_us);
/* g_cond_wait, except that a bound thread reaps its context meanwhile
 * (what it waits for may be one of its own completions).  As with
 * g_cond_wait, the caller re-checks its condition in a loop. */
void dioloop_aio_cond_wait(GCond *cond, GMutex *mutex);

/* Prepare a vectored read/write (preadv/pwritev) or fdatasync request. */
void dioloop_aio_prep_rw(struct dioloop_aio_req *req, bool write, int fd,
			 const struct iovec *iov, int nr_iov, off_t offset,
			 dioloop_aio_done_t done);
void dioloop_aio_prep_fdsync(struct dioloop_aio_req *req, int fd,
			     dioloop_aio_done_t done);

/* Submit n prepared requests in as few io_submit calls as the ring allows.
 * Always takes all of them: each one's done will be called exactly once
 * (with -errno if the kernel refused it outright). */
void dioloop_aio_submit(struct dioloop_aio *aio,
			struct dioloop_aio_req **reqs, int n);
/* The same, carried by this thread's bound context if it has one (for
 * requests whose submitter does not wait for them: their done runs on this
 * thread, at its next reap). */
void dioloop_aio_submit_here(struct dioloop_aio *aio,
			     struct dioloop_aio_req **reqs, int n);

/* True when the calling thread runs this context's done callbacks (its
 * completion thread, or the owner a reaped context is bound to). */
bool dioloop_aio_on_completion_thread(struct dioloop_aio *aio);

void dioloop_aio_get_stats(struct dioloop_aio *aio,
			   struct dioloop_aio_stats *stats);

#endif
