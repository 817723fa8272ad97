/* SPDX-License-Identifier: MIT */
/* FUSE workers that reap their own backend completions (session_dev.h). */
#include "fusefs/session_dev.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <linux/fuse.h>
#include <string.h>
#include <unistd.h>

#include "backends/aio.h"

enum { DEV_EV_FUSE, DEV_EV_AIO, DEV_EV_STANDBY };

struct dev_worker {
	int fd;				/* its /dev/fuse fd (non-blocking) */
	int ep_read;			/* fd (exclusive), efd, standby */
	int ep_standby;			/* efd, standby */
	int efd;			/* signalled by its libaio context */
	bool counted;			/* in dev_readers */
	struct dioloop_aio *aio;
	_Atomic uint64_t reaped;	/* written by its thread only */
};

/*
 * Who waits on /dev/fuse.  A worker that runs and will be back to read
 * soon (it serves a read or a write, which never waits for I/O) is
 * counted in dev_readers.  A worker that goes to wait while another is
 * counted waits on its own completions only (standby): the one that comes
 * back will find the next request itself, with nobody woken for it, and
 * the client's submission does not pay for a wake-up.  The last worker to
 * go to wait waits on /dev/fuse.  A counted worker wakes a standby one
 * (dev_standby_efd, exclusive: one at a time) when it stops counting
 * while others stand by (a request that may take long: a lookup, a
 * readdir, a control file's; a sleep inside a read or write, which
 * dioloop_thread_may_block reports; or its thread ends), and when it found
 * requests already queued while fewer than dev_readers_wanted read, so
 * that under load several workers read at once.  At QD1 this spared the
 * client's submission a wake-up (fio's submission latency 12-13 µs
 * against 18-21) and the worker a sleep: 92-99 µs per 4k read against
 * 99-111 with every idle worker waiting on /dev/fuse (docs/bench.md).
 */
static atomic_int dev_readers;
static atomic_int dev_standbys;
static int dev_standby_efd = -1;
static unsigned int dev_readers_wanted = 4;
static pthread_once_t dev_standby_once = PTHREAD_ONCE_INIT;

static unsigned int dev_aio_depth = 128;
static pthread_key_t dev_key;
static pthread_once_t dev_key_once = PTHREAD_ONCE_INIT;
static __thread struct dev_worker *dev_self;
static __thread bool dev_self_failed;	/* no context: read as before */

/* The live workers, for the stats; what ended workers reaped.  Taken when
 * a worker starts or ends and when the stats are read, never per request. */
static GMutex dev_lock;
static GPtrArray *dev_live;
static uint64_t dev_reaped_retired;

void dioloop_dev_workers_configure(unsigned int aio_depth)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	dev_aio_depth = CLAMP(aio_depth, 16u, 1024u);
	/* Two readers per CPU under load: 4k writes at QD32 on 2 CPUs did
	 * 59.5k IOPS on average with 2, 65.7k with 4, 65.0k with every
	 * worker reading (docs/bench.md). */
	dev_readers_wanted = cpus > 0 ? (unsigned int)MIN(2 * cpus, 64) : 2u;
}

static void dev_wake_standby(void)
{
	if (atomic_load(&dev_standbys) > 0)
		eventfd_write(dev_standby_efd, 1);
}

/* This worker no longer counts as coming back to read soon. */
static void dev_uncount(struct dev_worker *w)
{
	if (!w->counted)
		return;
	w->counted = false;
	if (atomic_fetch_sub(&dev_readers, 1) == 1)
		dev_wake_standby();
}

static void dev_count(struct dev_worker *w)
{
	if (w->counted)
		return;
	w->counted = true;
	atomic_fetch_add(&dev_readers, 1);
}

/* This worker is about to sleep in what it serves (a lock, a synchronous
 * request, pages): another reads meanwhile. */
static void dev_block_hook(void)
{
	if (dev_self)
		dev_uncount(dev_self);
}

/* The worker's thread ends (libfuse cancelled it, or the session ended):
 * what it started completes here, then its context goes. */
static void dev_worker_exit(void *data)
{
	struct dev_worker *w = data;

	dev_self = NULL;
	dev_uncount(w);			/* another worker reads instead */
	dioloop_aio_free(w->aio);	/* reaps until it carries nothing */
	close(w->ep_read);
	close(w->ep_standby);
	close(w->efd);
	g_mutex_lock(&dev_lock);
	g_ptr_array_remove_fast(dev_live, w);
	dev_reaped_retired += atomic_load(&w->reaped);
	g_mutex_unlock(&dev_lock);
	g_free(w);
}

static void dev_standby_init(void)
{
	dev_standby_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (dev_standby_efd < 0)
		g_error("session: eventfd: %s", g_strerror(errno));
}

static void dev_key_init(void)
{
	if (pthread_key_create(&dev_key, dev_worker_exit) != 0)
		g_error("session: pthread_key_create failed");
}

static int epoll_add(int epfd, int fd, uint32_t events, uint32_t tag)
{
	struct epoll_event ev = { .events = events, .data.u32 = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* This thread's context, epoll set and non-blocking fd.  0 or -errno. */
static int dev_worker_setup(int fd)
{
	struct dev_worker *w = g_new0(struct dev_worker, 1);
	int flags, ret;

	w->ep_read = w->ep_standby = w->efd = -1;
	pthread_once(&dev_standby_once, dev_standby_init);
	w->fd = fd;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->ep_read = epoll_create1(EPOLL_CLOEXEC);
	w->ep_standby = epoll_create1(EPOLL_CLOEXEC);
	if (w->efd < 0 || w->ep_read < 0 || w->ep_standby < 0) {
		ret = -errno;
		goto fail;
	}
	/* The eventfds edge-triggered: never read, each signal is one edge
	 * (reaping takes whatever completed by then).  The standby eventfd
	 * exclusive: a signal wakes one standing-by worker. */
	ret = epoll_add(w->ep_read, fd, EPOLLIN | EPOLLEXCLUSIVE, DEV_EV_FUSE);
	if (ret == 0)
		ret = epoll_add(w->ep_read, w->efd, EPOLLIN | EPOLLET, DEV_EV_AIO);
	if (ret == 0)
		ret = epoll_add(w->ep_standby, w->efd, EPOLLIN | EPOLLET,
				DEV_EV_AIO);
	if (ret == 0)
		ret = epoll_add(w->ep_standby, dev_standby_efd,
				EPOLLIN | EPOLLET | EPOLLEXCLUSIVE,
				DEV_EV_STANDBY);
	if (ret < 0)
		goto fail;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		ret = -errno;
		goto fail;
	}
	ret = dioloop_aio_new_reaped(dev_aio_depth, w->efd, &w->aio);
	if (ret < 0)
		goto fail;
	pthread_once(&dev_key_once, dev_key_init);
	g_mutex_lock(&dev_lock);
	if (!dev_live)
		dev_live = g_ptr_array_new();
	g_ptr_array_add(dev_live, w);
	g_mutex_unlock(&dev_lock);
	dioloop_aio_bind_thread(w->aio);
	dioloop_thread_set_block_hook(dev_block_hook);
	dev_self = w;
	pthread_setspecific(dev_key, w);
	return 0;
fail:
	if (w->ep_read >= 0)
		close(w->ep_read);
	if (w->ep_standby >= 0)
		close(w->ep_standby);
	if (w->efd >= 0)
		close(w->efd);
	g_free(w);
	return ret;
}

/* A read that waits, whether fd blocks or not (another worker may have
 * made it non-blocking where /dev/fuse could not be cloned). */
static ssize_t dev_read_plain(int fd, void *buf, size_t len)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n = read(fd, buf, len);

		if (n >= 0 || errno != EAGAIN)
			return n;
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

/* True for a request whose handler never waits long on a FUSE worker
 * (reads and writes go to the backend asynchronously; fsync goes to the
 * flush pool).  Anything else may wait on a remote backend or a lock. */
static bool dev_request_is_quick(const void *buf, size_t n)
{
	struct fuse_in_header in;

	if (n < sizeof(in))
		return true;	/* not a FUSE request: nothing to judge */
	memcpy(&in, buf, sizeof(in));
	switch (in.opcode) {
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_FSYNC:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return true;
	default:
		return false;
	}
}

/* Cancelled while standing by: no longer counted as such. */
static void dev_standby_cancelled(void *data)
{
	(void)data;
	atomic_fetch_sub(&dev_standbys, 1);
}

/* Wait on /dev/fuse, or stand by (see dev_readers).  As epoll_wait. */
static int dev_worker_wait(struct dev_worker *w, struct epoll_event *ev,
			   int max)
{
	bool standby;
	int k, err;

	w->counted = false;
	standby = atomic_fetch_sub(&dev_readers, 1) > 1;
	if (standby)
		atomic_fetch_add(&dev_standbys, 1);
	/* A worker that stopped counting between our look and the standby
	 * count's rise found no standby to wake: look again. */
	if (standby && atomic_load(&dev_readers) == 0) {
		atomic_fetch_sub(&dev_standbys, 1);
		standby = false;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	if (standby) {
		pthread_cleanup_push(dev_standby_cancelled, NULL);
		k = epoll_wait(w->ep_standby, ev, max, -1);
		err = errno;
		pthread_cleanup_pop(0);
	} else {
		k = epoll_wait(w->ep_read, ev, max, -1);
		err = errno;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	if (standby)
		atomic_fetch_sub(&dev_standbys, 1);
	dev_count(w);
	errno = err;
	return k;
}

/* Wait for a request, reaping this worker's completions meanwhile.  It
 * can be cancelled only inside epoll_wait. */
static ssize_t dev_worker_read(struct dev_worker *w, void *buf, size_t len)
{
	bool try_read = true;	/* first see whether one is waiting */
	bool queued = true;	/* it was there without waiting */
	int old, err;
	ssize_t n;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	dev_count(w);
	for (;;) {
		struct epoll_event ev[3];
		int i, k;

		if (try_read) {
			n = read(w->fd, buf, len);
			if (n >= 0 || errno != EAGAIN)
				break;
		}
		queued = false;
		k = dev_worker_wait(w, ev, G_N_ELEMENTS(ev));
		if (k < 0 && errno != EINTR) {
			n = -1;
			break;
		}
		try_read = false;
		for (i = 0; i < k; i++) {
			if (ev[i].data.u32 != DEV_EV_AIO) {
				try_read = true;	/* a request, or our turn */
				continue;
			}
			atomic_store_explicit(&w->reaped,
					      atomic_load_explicit(&w->reaped,
								   memory_order_relaxed) +
						      (uint64_t)dioloop_aio_reap(w->aio, 0),
					      memory_order_relaxed);
		}
	}
	err = errno;
	if (n > 0) {
		/* Requests were queued: more readers, up to the CPUs. */
		if (queued && atomic_load(&dev_readers) <
				      (int)dev_readers_wanted)
			dev_wake_standby();
		if (!dev_request_is_quick(buf, (size_t)n))
			dev_uncount(w);
	}
	pthread_setcancelstate(old, NULL);
	errno = err;
	return n;
}

ssize_t dioloop_dev_read(int fd, void *buf, size_t len)
{
	if (!dev_self && !dev_self_failed) {
		int ret = dev_worker_setup(fd);

		if (ret < 0) {
			dev_self_failed = true;
			g_warning("FUSE worker: no libaio context of its own "
				  "(%s); its replies go through the completion "
				  "thread", g_strerror(-ret));
		}
	}
	if (dev_self && dev_self->fd == fd)
		return dev_worker_read(dev_self, buf, len);
	return dev_read_plain(fd, buf, len);
}

void dioloop_dev_get_stats(struct dioloop_dev_stats *st)
{
	guint i;

	g_mutex_lock(&dev_lock);
	st->workers = dev_live ? dev_live->len : 0;
	st->reaped = dev_reaped_retired;
	for (i = 0; dev_live && i < dev_live->len; i++) {
		struct dev_worker *w = dev_live->pdata[i];

		st->reaped += atomic_load_explicit(&w->reaped,
						   memory_order_relaxed);
	}
	g_mutex_unlock(&dev_lock);
}
