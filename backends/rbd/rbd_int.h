/* SPDX-License-Identifier: MIT */
/*
 * Inside the rbd backend: one struct drbd per open image.
 *
 * Threads.  Requests (struct drbd_req) are submitted on any thread with a
 * completion whose argument is the request; librbd signals the image's
 * eventfd when one ends, and the image's completion thread reaps it
 * (rbd_poll_io_events), completes the kiocb or wakes a synchronous
 * caller, and frees the request.  Every kiocb completion runs on that
 * thread.  Worker-thread operations (flush, discard, write_zeroes) go
 * the same way and wait.
 */
#ifndef DIOLOOP_RBD_INT_H
#define DIOLOOP_RBD_INT_H

#include <glib.h>
#include <rados/librados.h>
#include <rbd/librbd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "backends/backend.h"
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

struct drbd {
	struct backend *b;
	struct drbd_url url;
	rados_t cluster;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	char *snap;			/* a snapshot volume's name */
	char *clone;			/* a clone volume's image name */
	bool rdonly, growable;
	_Atomic uint64_t size;
	GMutex grow_lock;		/* growable writes past EOF */

	int efd;			/* librbd's completion eventfd */
	GThread *thread;		/* the completion thread */
	atomic_bool stop;
	atomic_bool outage;		/* a timeout logged, no success since */
	atomic_uint inflight;
};

enum drbd_op {
	DRBD_READ,
	DRBD_WRITE,
	DRBD_FLUSH,
	DRBD_DISCARD,
	DRBD_WRITE_ZEROES,
};

/* One request in flight. */
struct drbd_req {
	struct drbd *d;
	enum drbd_op op;
	struct kiocb *iocb;		/* NULL for a waiting caller */
	size_t count;			/* bytes a success reports */
	uint64_t pos;			/* where a read or write starts */
	struct iovec *iov;		/* kept alive until completion */
	int iovcnt;
	rbd_completion_t c;
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
int drbd_events_start(struct drbd *d);
void drbd_events_stop(struct drbd *d);
ssize_t drbd_submit_io(struct drbd *d, struct kiocb *iocb);
/* flush, discard, write_zeroes: wait for the result. */
int drbd_run_sync(struct drbd *d, enum drbd_op op, uint64_t pos,
		  uint64_t len);
/* A librbd/librados result as the backend's -errno (ETIMEDOUT: EIO). */
int drbd_errno(struct drbd *d, int r, const char *what);

#endif
