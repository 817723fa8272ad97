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
#include <unistd.h>

#include "backends/aio.h"

enum { DEV_EV_FUSE, DEV_EV_AIO };

struct dev_worker {
	int fd;				/* its /dev/fuse fd (non-blocking) */
	int epfd;			/* fd (exclusive) and efd */
	int efd;			/* signalled by its libaio context */
	struct dioloop_aio *aio;
	_Atomic uint64_t reaped;	/* written by its thread only */
};

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
	dev_aio_depth = CLAMP(aio_depth, 16u, 1024u);
}

/* The worker's thread ends (libfuse cancelled it, or the session ended):
 * what it started completes here, then its context goes. */
static void dev_worker_exit(void *data)
{
	struct dev_worker *w = data;

	dev_self = NULL;
	dioloop_aio_free(w->aio);	/* reaps until it carries nothing */
	close(w->epfd);
	close(w->efd);
	g_mutex_lock(&dev_lock);
	g_ptr_array_remove_fast(dev_live, w);
	dev_reaped_retired += atomic_load(&w->reaped);
	g_mutex_unlock(&dev_lock);
	g_free(w);
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

	w->fd = fd;
	w->epfd = w->efd = -1;
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->efd < 0 || w->epfd < 0) {
		ret = -errno;
		goto fail;
	}
	/* The eventfd edge-triggered: never read, each completion's signal
	 * is one edge, and reaping takes whatever completed by then. */
	ret = epoll_add(w->epfd, fd, EPOLLIN | EPOLLEXCLUSIVE, DEV_EV_FUSE);
	if (ret == 0)
		ret = epoll_add(w->epfd, w->efd, EPOLLIN | EPOLLET, DEV_EV_AIO);
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
	dev_self = w;
	pthread_setspecific(dev_key, w);
	return 0;
fail:
	if (w->epfd >= 0)
		close(w->epfd);
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

/* Wait for a request, reaping this worker's completions meanwhile.  It
 * can be cancelled only inside epoll_wait. */
static ssize_t dev_worker_read(struct dev_worker *w, void *buf, size_t len)
{
	bool try_read = true;	/* first see whether one is waiting */
	int old, err;
	ssize_t n;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	for (;;) {
		struct epoll_event ev[2];
		int i, k;

		if (try_read) {
			n = read(w->fd, buf, len);
			if (n >= 0 || errno != EAGAIN)
				break;
		}
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		k = epoll_wait(w->epfd, ev, G_N_ELEMENTS(ev), -1);
		err = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (k < 0 && err != EINTR) {
			errno = err;
			n = -1;
			break;
		}
		try_read = false;
		for (i = 0; i < k; i++) {
			if (ev[i].data.u32 == DEV_EV_FUSE) {
				try_read = true;
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
