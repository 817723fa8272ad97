/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (experimental, -o transport=uring): the kernel hands
 * requests to rings of entries the daemon registered on /dev/fuse, one
 * queue per possible CPU, and takes each reply with the entry's next fetch
 * (FUSE_IO_URING_CMD_COMMIT_AND_FETCH) instead of a read and a write on
 * /dev/fuse per request.
 *
 * libfuse 3.14 knows nothing of it, so its dispatch is kept: a request
 * from a ring is laid out as /dev/fuse would have given it and fed to
 * fuse_session_process_buf; its reply comes back through the session's
 * writev hook (session_io.c), which fills the ring entry instead of
 * writing /dev/fuse.  INIT, FORGET and INTERRUPT still come over
 * /dev/fuse, served by libfuse's loop as before; so does every request
 * until all queues are registered.
 *
 * One queue per possible CPU, each served by one thread of its own that
 * makes every io_uring submission of its ring (replies from other threads
 * are handed to it through an eventfd), so that the kernel's task work for
 * the ring always runs in that thread.
 */
#ifndef DIOLOOP_SESSION_URING_H
#define DIOLOOP_SESSION_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fuse_session;

/* Whether the kernel lets a daemon serve FUSE through io_uring (the fuse
 * module's enable_uring): 0, or -errno with *why saying why not, in a
 * few words. */
int dioloop_uring_allowed(const char **why);

/* Serve se through io_uring once INIT is answered: depth entries per
 * queue.  Call after dioloop_session_io_install, before the loop runs.
 * 0 or -errno. */
int dioloop_uring_enable(struct fuse_session *se, unsigned depth);

/* session_io.c: the flags2 bits to add to the INIT reply, given what the
 * kernel offered (flags | flags2 << 32).  The FUSE worker serving INIT. */
uint32_t dioloop_uring_init_flags2(uint64_t offered);

/* session_io.c: the INIT reply in iov was written: start the queues if
 * it said FUSE_OVER_IO_URING (else, or when they cannot be set up, log
 * why and leave every request on /dev/fuse).  The FUSE worker serving
 * INIT, once. */
void dioloop_uring_init_replied(const struct iovec *iov, int count);

/* The payload buffer of the ring request this thread is serving, lent
 * to its handler for the request's I/O (page-aligned, at least size
 * bytes): a write's payload is already there (the handler's buf, passed
 * as data), and a read that lands there (data NULL) is replied with no
 * copy.  NULL when the thread serves no ring request, the buffer is too
 * small, was lent already, or is not data.  Valid until the request is
 * replied to. */
void *dioloop_uring_lend_payload(const void *data, size_t size);

/* session_io.c: send the reply in iov through the ring entry of its
 * request.  False when the request did not come from a ring (write it to
 * /dev/fuse); true with *ret the bytes taken.  Any thread that replies. */
bool dioloop_uring_reply(const struct iovec *iov, int count, ssize_t *ret);

/* Stop the queues and free them.  After the session's loop returned and
 * every request was answered; the thread that ran the loop. */
void dioloop_uring_stop(void);

struct dioloop_uring_stats {
	bool enabled;		/* asked for (transport=uring) */
	bool active;		/* the kernel took the rings */
	unsigned queues;
	unsigned depth;		/* entries per queue */
	uint64_t requests;	/* requests served from a ring */
	uint64_t replies_handed;	/* replies another thread handed to
					 * a ring's thread (the rest were
					 * made on it) */
	uint64_t payloads_lent;		/* requests whose I/O used the ring's
					 * buffer (no copy) */
};

/* A snapshot of the counters.  Any thread. */
void dioloop_uring_get_stats(struct dioloop_uring_stats *st);

#endif
