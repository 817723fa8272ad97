/* SPDX-License-Identifier: MIT */
/*
 * Inside the rbd backend: one struct drbd per open image.
 *
 * Threads.  Requests (struct drbd_req) are submitted on any thread with a
 * completion whose argument is the request.  librbd calls drbd_complete()
 * on its API strand (one librbd thread at a time per image) when one
 * ends, and that call completes the kiocb (the FUSE reply goes out from
 * there) or wakes a synchronous caller, and frees the request.  No thread
 * of ours sits between: an eventfd and a reaping thread cost a wakeup and
 * a context switch per completion batch, about a quarter of the daemon's
 * CPU per 4k request.  A completion that librbd delivers while the same
 * thread is still inside an rbd_aio_* call is held and run after that
 * call returns, so no caller is re-entered: librbd runs a completion
 * inline when it fails a request before queueing it and the caller is on
 * its strand (a request submitted from a completion).  Ceph 16 returns
 * such failures from the call instead (EROFS, seen by check_rbd), so the
 * hold is a guard against other versions, not a path seen in tests.  Worker-thread operations (flush,
 * discard, write_zeroes) go the same way and wait; nothing waits on
 * librbd's strand itself.
 */
#ifndef DIOLOOP_RBD_INT_H
#define DIOLOOP_RBD_INT_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "backends/backend.h"
#include "backends/rbd/api.h"
#include "backends/rbd/rbd.h"

#define DRBD_DEFAULT_TIMEOUT_S 60
#define DRBD_MAX_TIMEOUT_S (24 * 3600)

/* A parsed rbd:// URL. */
struct drbd_url {
	char *url;		/* as given, for messages */
	char *pool;
	char *ns;		/* "" for the default namespace */
	char *image;		/* NULL for a pool URL */
	char *conf;		/* NULL: $CEPH_CONF / librados's default */
	char *id;		/* NULL: admin / $CEPH_ARGS */
	char *keyring;		/* NULL: the conf's */
	unsigned int timeout_s;
};

/* url.c */
int drbd_url_parse(const char *url, bool want_image, struct drbd_url *u,
		   GError **error);
void drbd_url_clear(struct drbd_url *u);
/* Connect to u's cluster and open an I/O context on its pool and
 * namespace: 0, or -errno with the line in *error. */
int drbd_connect(const struct drbd_url *u, rados_t *cluster,
		 rados_ioctx_t *ioctx, GError **error);
void drbd_disconnect(rados_t cluster, rados_ioctx_t ioctx);

/* conn.c: the process's librados clients, shared by cluster, user, pool
 * and namespace.  Not from librados's own threads (put may shut a client
 * down). */
struct drbd_conn;
/* A client for u (an existing one, or connected now): 0, or -errno with
 * the line in *error. */
int drbd_conn_get(const struct drbd_url *u, struct drbd_conn **out,
		  GError **error);
void drbd_conn_put(struct drbd_conn *c);
/* Its I/O context on u's pool and namespace. */
rados_ioctx_t drbd_conn_ioctx(const struct drbd_conn *c);
/* The cluster blocklisted c: later gets connect afresh.  True the first
 * time (for one log line per client).  Any thread. */
bool drbd_conn_fenced(struct drbd_conn *c);
/* r, from a call on *c, says the cluster fenced *c (ESHUTDOWN) and no
 * renewal was made yet: *c is put and a new client got in its place
 * (true: call again), for an image opened after a fence that no request
 * noticed.  false: keep r (after a failed renewal, *c is NULL and *error
 * says why). */
bool drbd_conn_renew(const struct drbd_url *u, struct drbd_conn **c, int r,
		     bool *renewed, GError **error);

struct drbd {
	struct backend *b;
	struct drbd_url url;
	struct drbd_conn *conn;		/* shared with other images */
	rados_ioctx_t ioctx;		/* conn's */
	rbd_image_t image;
	char *snap;			/* a snapshot volume's name */
	char *clone;			/* a clone volume's image name */
	bool rdonly, growable;
	_Atomic uint64_t size;
	GMutex grow_lock;		/* growable writes past EOF */

	atomic_bool outage;		/* a timeout logged, no success since */
	GMutex idle_lock;
	GCond idle_cond;		/* inflight fell to 0 while draining */
	/* Requests in flight: raised and lowered without the lock, but
	 * the last decrement (to 0) is made under it, so that a drain
	 * that sees 0 under the lock knows nobody touches d any more. */
	atomic_uint inflight;
	bool draining;			/* by idle_lock */
};

enum drbd_op {
	DRBD_READ,
	DRBD_WRITE,
	DRBD_FLUSH,
	DRBD_DISCARD,
	DRBD_WRITE_ZEROES,
};

/* One request in flight. */
/* A request's iovecs held in the request itself: a 64 KiB request over
 * separate pages, or anything in one piece, needs no array of its own. */
#define DRBD_INLINE_IOVS 16

struct drbd_req {
	struct drbd *d;
	enum drbd_op op;
	struct kiocb *iocb;		/* NULL for a waiting caller */
	size_t count;			/* bytes a success reports */
	uint64_t pos;			/* where a read or write starts */
	struct iovec *iov;		/* kept alive until completion:
					 * inline_iov, or g_new'd */
	int iovcnt;
	struct iovec inline_iov[DRBD_INLINE_IOVS];
	rbd_completion_t c;
	struct drbd_req *held;		/* drbd_complete()'s list of held ones */
	ssize_t rbd_res;		/* librbd's result, while held */
	/* A caller waits (iocb NULL or synchronous): decided before the
	 * request starts, since an asynchronous kiocb may be completed and
	 * gone before librbd's call returns. */
	bool waiter;
	GMutex lock;
	GCond cond;
	bool done;
	ssize_t res;
};

/* volume.c: snapshots as volumes. */
extern const struct backend_volume_ops drbd_volume_ops;
/* The name of the image that is clone volume name of image: IMAGE@NAME
 * (an '@' no image name of a URL has); g_free it. */
char *drbd_clone_image(const char *image, const char *name);

/* io.c */
/* Wait until librbd holds no request of d's. */
void drbd_drain(struct drbd *d);
ssize_t drbd_submit_io(struct drbd *d, struct kiocb *iocb);
/* flush, discard, write_zeroes: wait for the result. */
int drbd_run_sync(struct drbd *d, enum drbd_op op, uint64_t pos,
		  uint64_t len);
/* A librbd/librados result as the backend's -errno (ETIMEDOUT: EIO). */
int drbd_errno(struct drbd *d, int r, const char *what);

#endif
