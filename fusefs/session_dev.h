/* SPDX-License-Identifier: MIT */
/*
 * FUSE workers that reap their own backend completions (the /dev/fuse
 * transport).
 *
 * Each FUSE worker thread gets, on its first read of /dev/fuse, a libaio
 * context of its own (backends/aio.h, reaped) and an epoll set holding its
 * /dev/fuse fd and that context's eventfd.  It waits in the epoll set for
 * either: a request (read and returned to libfuse's dispatch) or its own
 * backend completions (reaped on the spot: their replies go out from this
 * thread).  So the reads and writes a worker starts complete on it, not on
 * the completion thread: a request costs one thread's wake-ups, with its
 * data warm in that thread's cache, not a hand-over to a second thread.
 *
 * The /dev/fuse fd is in the set with EPOLLEXCLUSIVE: a new request wakes
 * one waiting worker, not all of them (a worker that is busy when it comes
 * is passed over, and finds it at its next wait if nobody took it).  The
 * fd is made non-blocking; a worker that finds nothing to read waits again.
 *
 * Only one idle worker waits on /dev/fuse while another is about to come
 * back for the next request (it serves a read or a write, which never
 * waits for I/O): the others stand by, waiting on their own completions
 * and on being called.  So at low depth the next request is found by the
 * worker that served the last one, and the client's submission wakes
 * nobody.  A worker calls one standing by when it takes a request that
 * may take long (a lookup on a slow remote), when it is about to sleep in
 * one it serves (a range lock, a cow page read from a remote store:
 * dioloop_thread_may_block), when it ends, and when it finds requests
 * already queued, up to two readers per CPU.
 *
 * libfuse cancels idle workers when the session ends, in their read.  A
 * worker can be cancelled only while it waits in the epoll set, never
 * while it runs a completion; when it exits (cancelled or not), it reaps
 * every completion it still carries before its context goes.
 *
 * Where a worker cannot have a context (fs.aio-max-nr reached), it reads
 * as before and its requests complete on the backend's completion thread.
 */
#ifndef DIOLOOP_SESSION_DEV_H
#define DIOLOOP_SESSION_DEV_H

#include <stdint.h>
#include <sys/types.h>

/* Room in each worker's own libaio context (the rest waits in its queue
 * until the worker reaps).  Call before the loop runs. */
void dioloop_dev_workers_configure(unsigned int aio_depth);

/* Read one request from fd (a worker's /dev/fuse fd) into buf, reaping
 * this thread's backend completions while it waits.  As read(2): bytes,
 * or -1 with errno (ENODEV: the mount is gone).  FUSE worker. */
ssize_t dioloop_dev_read(int fd, void *buf, size_t len);

struct dioloop_dev_stats {
	uint64_t workers;	/* workers that reap their own completions */
	uint64_t reaped;	/* backend completions run by those workers */
};

void dioloop_dev_get_stats(struct dioloop_dev_stats *st);

#endif
