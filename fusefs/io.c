/* SPDX-License-Identifier: MIT */
/*
 * Node reads and writes: FUSE reads and writes become kiocbs over pool
 * pages (or a run, or a ring entry's payload buffer), answered from the
 * completion thread or the ring thread that reaps them.
 *
 * Every read and write passes one dispatch point, dioloop_io_submit():
 * there the node's throttle admits it or keeps it waiting (its pages
 * held, no thread held) until the timer thread dispatches it.  Every
 * request is counted in the node's statistics just before its reply.
 * The ops that may block run on the worker pools (io_work.c).
 */
#include <errno.h>

#include "backends/aio.h"
#include "iter/obj_cache.h"
#include "fusefs/fs.h"
#include "fusefs/session_uring.h"

/* One read or write in flight: its pages and the kernel's request. */
struct dioloop_io {
	struct kiocb iocb;
	struct iov_iter iter;
	struct dioloop_throttle_req treq;	/* while it waits to go */
	fuse_req_t req;
	struct dioloop_fs *fs;
	struct dioloop_node *node;
	uint64_t start;			/* arrival, ns (statistics) */
	bool lent;			/* pages are a ring's payload buffer */
	void *run;			/* or a run of fs->runs, or NULL */
	unsigned int nr_pages;
	struct bio_vec bvec[];
};

#define DIOLOOP_IO_MAX_PAGES (DIOLOOP_MAX_WRITE / DIOLOOP_PAGE_SIZE)
/* Requests larger than this take a run: past 32 pages a request's
 * segments start to count against what the disk merges. */
#define DIOLOOP_IO_RUN_MIN (32 * DIOLOOP_PAGE_SIZE)

/*
 * Request slots kept per thread (iter/obj_cache.h): a read or write takes
 * no heap memory and no shared lock for its slot.  Two sizes, so that a
 * small request does not hold room for a mebibyte's bio_vecs: up to
 * 64 KiB (0.4 KiB a slot; a thread keeps up to 256, more than the
 * deepest queue one thread serves), and up to DIOLOOP_MAX_WRITE (4.2 KiB;
 * a thread keeps 64).  So a thread keeps at most 380 KiB of slots.
 */
#define DIOLOOP_IO_SMALL_PAGES 16

static struct dioloop_obj_cache dioloop_io_small_slots = DIOLOOP_OBJ_CACHE_INIT(
	sizeof(struct dioloop_io) +
		DIOLOOP_IO_SMALL_PAGES * sizeof(struct bio_vec),
	256);
static struct dioloop_obj_cache dioloop_io_large_slots = DIOLOOP_OBJ_CACHE_INIT(
	sizeof(struct dioloop_io) +
		DIOLOOP_IO_MAX_PAGES * sizeof(struct bio_vec),
	64);

static struct dioloop_obj_cache *dioloop_io_slots(unsigned int nr_pages)
{
	return nr_pages <= DIOLOOP_IO_SMALL_PAGES ? &dioloop_io_small_slots :
						    &dioloop_io_large_slots;
}

/* Count a request answered without I/O and reply with err (-errno, or
 * 0: an empty read or write).  FUSE worker. */
static void dioloop_reply_early(fuse_req_t req, struct dioloop_node *node,
				enum dioloop_stat_op op, uint64_t start,
				int err)
{
	dioloop_stats_end(&node->stats, op, 0, err, start);
	if (err < 0)
		fuse_reply_err(req, -err);
	else if (op == DIOLOOP_OP_READ)
		fuse_reply_buf(req, NULL, 0);
	else
		fuse_reply_write(req, 0);
}

/* Pages for size bytes as bio_vecs: lent (a ring request's payload
 * buffer, page-aligned) or the pool's; waits for the pool when it is
 * exhausted (in-flight requests give pages back as they complete). */
static struct dioloop_io *dioloop_io_alloc(fuse_req_t req,
					   struct dioloop_node *node,
					   size_t size, uint64_t start,
					   void *lent)
{
	struct dioloop_fs *fs = fuse_req_userdata(req);
	unsigned int n = (unsigned int)((size + DIOLOOP_PAGE_SIZE - 1) /
					DIOLOOP_PAGE_SIZE);
	struct dioloop_io *io;
	void *pages[DIOLOOP_IO_MAX_PAGES];

	g_assert(n <= DIOLOOP_IO_MAX_PAGES);
	io = dioloop_obj_get(dioloop_io_slots(n));
	io->req = req;
	io->fs = fs;
	io->node = node;
	io->start = start;
	io->nr_pages = n;
	io->lent = lent != NULL;
	io->run = NULL;
	/* A large request in one piece of memory, so that it reaches the
	 * disk whole (iter/run_pool.h); pool pages when every run is out. */
	if (!lent && size > DIOLOOP_IO_RUN_MIN && fs->runs)
		lent = io->run = dioloop_run_pool_get(fs->runs);
	if (lent) {
		bvec_fill_pages(io->bvec, NULL, lent, size);
		iov_iter_init_bvec(&io->iter, io->bvec, n, size, 0);
		return io;
	}
	/* All n at once, never some while waiting for the rest: workers
	 * holding parts of requests could hold the whole pool between them.
	 * A thread that reaps its own completions gets the pages they give
	 * back by reaping them, not by sleeping. */
	while (dioloop_page_pool_get_many(fs->pool, pages, n) < 0) {
		dioloop_thread_may_block();
		if (dioloop_aio_reap_bound(1000) >= 0)
			continue;
		dioloop_page_pool_get_many_wait(fs->pool, pages, n);
		break;
	}
	bvec_fill_pages(io->bvec, pages, NULL, size);
	iov_iter_init_bvec(&io->iter, io->bvec, n, size, 0);
	return io;
}

/* After the reply: the request counts itself out of its node last, so
 * that a drain (and the unmount's) waits for its reply too. */
static void dioloop_io_free(struct dioloop_io *io)
{
	void *pages[DIOLOOP_IO_MAX_PAGES];
	unsigned int i;

	if (io->run) {
		dioloop_run_pool_put(io->fs->runs, io->run);
	} else if (!io->lent) {
		for (i = 0; i < io->nr_pages; i++)
			pages[i] = io->bvec[i].bv_page;
		dioloop_page_pool_put_many(io->fs->pool, pages, io->nr_pages);
	}
	dioloop_node_io_end(io->node);
	dioloop_obj_put(dioloop_io_slots(io->nr_pages), io);
}

/* Completion of a read: reply with the pages.  Completion thread, the
 * fault filter's delay thread, or the thread that dispatched it (FUSE
 * worker or timer thread) when the backend finished inline. */
static void dioloop_read_done(struct kiocb *iocb, ssize_t res)
{
	struct dioloop_io *io = container_of(iocb, struct dioloop_io, iocb);
	struct iovec iov[DIOLOOP_IO_MAX_PAGES];
	size_t left;
	int n = 0;

	dioloop_stats_end(&io->node->stats, DIOLOOP_OP_READ,
			  res > 0 ? (uint64_t)res : 0, res < 0 ? (int)res : 0,
			  io->start);
	if (res < 0) {
		dioloop_fs_log_error(io->fs, io->node, "read", (int)res);
		fuse_reply_err(io->req, (int)-res);
	} else if (io->lent || io->run || io->nr_pages == 1) {
		/* One piece of memory (a ring's payload buffer or a run):
		 * libfuse sends it as it is, where fuse_reply_iov would
		 * allocate. */
		fuse_reply_buf(io->req, io->bvec[0].bv_page, (size_t)res);
	} else {
		for (left = (size_t)res; left; n++) {
			size_t len = MIN(left, io->bvec[n].bv_len);

			iov[n] = (struct iovec){ io->bvec[n].bv_page, len };
			left -= len;
		}
		fuse_reply_iov(io->req, iov, n);
	}
	dioloop_io_free(io);
}

/* Completion of a write.  Completion thread, the fault filter's delay
 * thread, or the thread that dispatched it when it finished inline. */
static void dioloop_write_done(struct kiocb *iocb, ssize_t res)
{
	struct dioloop_io *io = container_of(iocb, struct dioloop_io, iocb);

	dioloop_stats_end(&io->node->stats, DIOLOOP_OP_WRITE,
			  res > 0 ? (uint64_t)res : 0, res < 0 ? (int)res : 0,
			  io->start);
	if (res < 0) {
		dioloop_fs_log_error(io->fs, io->node, "write", (int)res);
		fuse_reply_err(io->req, (int)-res);
	} else {
		fuse_reply_write(io->req, (size_t)res);
	}
	dioloop_io_free(io);
}

/* Carry only the first count bytes of the request's pages. */
static void dioloop_io_truncate(struct dioloop_io *io, size_t count)
{
	unsigned int n = 0;
	size_t covered = 0;

	while (covered < count)
		covered += io->bvec[n++].bv_len;
	iov_iter_init_bvec(&io->iter, io->bvec, n, count, 0);
}

/* Hand the request to the backend.  The thread that admitted it: a FUSE
 * worker, or the throttle's timer thread. */
static void dioloop_io_dispatch(struct dioloop_io *io)
{
	ssize_t ret;

	/* A block device's rule: a write that starts inside and ends past
	 * the end writes up to the end (a short write); one that starts at
	 * or past it fails with ENOSPC (the backend's).  The size holds
	 * still: a resize drains the requests in flight first. */
	if (io->iocb.ki_rw == DIOLOOP_WRITE && !io->fs->opts.growable) {
		int64_t size = backend_get_size(io->node->b);
		uint64_t pos = io->iocb.ki_pos;
		size_t count = iov_iter_count(&io->iter);

		if (size >= 0 && pos < (uint64_t)size &&
		    count > (uint64_t)size - pos)
			dioloop_io_truncate(io, (size_t)((uint64_t)size - pos));
	}
	ret = backend_direct_IO_bvec(io->node->b, &io->iocb);

	if (ret != -EIOCBQUEUED)
		io->iocb.ki_complete(&io->iocb, ret);
}

/* Its turn came after waiting for the node's limits.  Timer thread. */
static void dioloop_io_throttled(struct dioloop_throttle_req *treq)
{
	dioloop_io_dispatch(container_of(treq, struct dioloop_io, treq));
}

/* The dispatch point: throttle, then the backend.  FUSE worker; never
 * waits for the limits (a request over them waits in the queue). */
static void dioloop_io_submit(struct dioloop_io *io, int rw, off_t off,
			      kiocb_complete_t done)
{
	io->iocb = (struct kiocb){
		.ki_rw = rw,
		.ki_pos = (uint64_t)off,
		.ki_iter = &io->iter,
		.ki_complete = done,
		.ki_private = io,
	};
	io->treq = (struct dioloop_throttle_req){
		.dir = rw,
		.bytes = iov_iter_count(&io->iter),
		.dispatch = dioloop_io_throttled,
	};
	/* In flight from here: a resize drains waiting requests too. */
	dioloop_node_io_begin(io->node);
	if (dioloop_throttle_submit(&io->node->throttle, &io->treq))
		dioloop_io_dispatch(io);
}

void dioloop_do_read(fuse_req_t req, struct dioloop_node *node, size_t size,
		     off_t off)
{
	uint64_t start = dioloop_stats_begin(&node->stats);

	if (off < 0 || size > DIOLOOP_MAX_WRITE) {
		dioloop_reply_early(req, node, DIOLOOP_OP_READ, start, -EINVAL);
		return;
	}
	if (size == 0) {
		dioloop_reply_early(req, node, DIOLOOP_OP_READ, start, 0);
		return;
	}
	/* Over io_uring the read lands in the reply's own buffer. */
	dioloop_io_submit(dioloop_io_alloc(req, node, size, start,
					   dioloop_uring_lend_payload(NULL, size)),
			  DIOLOOP_READ, off, dioloop_read_done);
}

void dioloop_do_write(fuse_req_t req, struct dioloop_node *node,
		      const char *buf, size_t size, off_t off)
{
	uint64_t start = dioloop_stats_begin(&node->stats);
	struct iovec src = { (void *)buf, size };
	struct dioloop_io *io;
	void *lent;
	struct iov_iter it;
	unsigned int i;

	/* Read-only: refused at open (ops.c) and by the core. */
	if (off < 0 || size > DIOLOOP_MAX_WRITE) {
		dioloop_reply_early(req, node, DIOLOOP_OP_WRITE, start, -EINVAL);
		return;
	}
	if (size == 0) {
		dioloop_reply_early(req, node, DIOLOOP_OP_WRITE, start, 0);
		return;
	}
	/* Over io_uring the payload stays in the ring's buffer, which the
	 * request owns until it is replied to: no copy. */
	lent = dioloop_uring_lend_payload(buf, size);
	if (lent) {
		io = dioloop_io_alloc(req, node, size, start, lent);
		dioloop_io_submit(io, DIOLOOP_WRITE, off, dioloop_write_done);
		return;
	}
	/* The kernel's buffer is the worker's: copy the payload once into
	 * pages the request owns until it completes. */
	io = dioloop_io_alloc(req, node, size, start, NULL);
	iov_iter_init(&it, &src, 1, size, 0);
	for (i = 0; i < io->nr_pages; i++) {
		iov_iter_copy_from_user(io->bvec[i].bv_page, &it, 0,
					io->bvec[i].bv_len);
		iov_iter_advance(&it, io->bvec[i].bv_len);
	}
	dioloop_io_submit(io, DIOLOOP_WRITE, off, dioloop_write_done);
}
