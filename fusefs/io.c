/* SPDX-License-Identifier: MIT */
/*
 * Node I/O: FUSE reads and writes become kiocbs over pool pages, answered
 * from the completion thread; the ops that may block run on the worker
 * pool and answer from there.
 *
 * Every read and write passes one dispatch point, dioloop_io_submit():
 * there the node's throttle admits it or keeps it waiting (its pages
 * held, no thread held) until the timer thread dispatches it.  The
 * worker-pool ops that move or drop data (discard, write-zeroes, the
 * copy behind copy_file_range) ask the same throttle and wait on their
 * worker thread.  Every request is counted in the node's statistics just
 * before its reply.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/aio.h"
#include "fusefs/fs.h"
#include "fusefs/migrate.h"

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* One read or write in flight: its pages and the kernel's request. */
struct dioloop_io {
	struct kiocb iocb;
	struct iov_iter iter;
	struct dioloop_throttle_req treq;	/* while it waits to go */
	fuse_req_t req;
	struct dioloop_fs *fs;
	struct dioloop_node *node;
	uint64_t start;			/* arrival, ns (statistics) */
	unsigned int nr_pages;
	struct bio_vec bvec[];
};

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

/* Pages for size bytes as bio_vecs; waits for the pool when it is
 * exhausted (in-flight requests give pages back as they complete). */
static struct dioloop_io *dioloop_io_alloc(fuse_req_t req,
					   struct dioloop_node *node,
					   size_t size, uint64_t start)
{
	struct dioloop_fs *fs = fuse_req_userdata(req);
	unsigned int n = (unsigned int)((size + DIOLOOP_PAGE_SIZE - 1) /
					DIOLOOP_PAGE_SIZE);
	struct dioloop_io *io;
	void *pages[DIOLOOP_MAX_WRITE / DIOLOOP_PAGE_SIZE];
	unsigned int i;

	io = g_malloc(sizeof(*io) + n * sizeof(io->bvec[0]));
	io->req = req;
	io->fs = fs;
	io->node = node;
	io->start = start;
	io->nr_pages = n;
	if (dioloop_page_pool_get_many(fs->pool, pages, n) < 0)
		for (i = 0; i < n; i++)
			pages[i] = dioloop_page_pool_get_wait(fs->pool);
	for (i = 0; i < n; i++) {
		size_t left = size - (size_t)i * DIOLOOP_PAGE_SIZE;

		io->bvec[i] = (struct bio_vec){
			.bv_page = pages[i],
			.bv_len = (unsigned int)(left < DIOLOOP_PAGE_SIZE ?
						 left : DIOLOOP_PAGE_SIZE),
			.bv_offset = 0,
		};
	}
	iov_iter_init_bvec(&io->iter, io->bvec, n, size, 0);
	return io;
}

static void dioloop_io_free(struct dioloop_io *io)
{
	unsigned int i;

	for (i = 0; i < io->nr_pages; i++)
		dioloop_page_pool_put(io->fs->pool, io->bvec[i].bv_page);
	dioloop_node_io_end(io->node);
	g_free(io);
}

/* Completion of a read: reply with the pages.  Completion thread, the
 * fault layer's delay thread, or the thread that dispatched it (FUSE
 * worker or timer thread) when the backend finished inline. */
static void dioloop_read_done(struct kiocb *iocb, ssize_t res)
{
	struct dioloop_io *io = container_of(iocb, struct dioloop_io, iocb);
	struct iovec iov[DIOLOOP_MAX_WRITE / DIOLOOP_PAGE_SIZE];
	size_t left;
	int n = 0;

	dioloop_stats_end(&io->node->stats, DIOLOOP_OP_READ,
			  res > 0 ? (uint64_t)res : 0, res < 0 ? (int)res : 0,
			  io->start);
	if (res < 0) {
		dioloop_fs_log_error(io->fs, io->node, "read", (int)res);
		fuse_reply_err(io->req, (int)-res);
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

/* Completion of a write.  Completion thread, the fault layer's delay
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
		dioloop_node_changed(io->node, io->iocb.ki_pos, (uint64_t)res);
		fuse_reply_write(io->req, (size_t)res);
	}
	dioloop_io_free(io);
}

/* Hand the request to the backend.  The thread that admitted it: a FUSE
 * worker, or the throttle's timer thread. */
static void dioloop_io_dispatch(struct dioloop_io *io)
{
	ssize_t ret = backend_direct_IO_bvec(io->node->b, &io->iocb);

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
	dioloop_io_submit(dioloop_io_alloc(req, node, size, start),
			  DIOLOOP_READ, off, dioloop_read_done);
}

void dioloop_do_write(fuse_req_t req, struct dioloop_node *node,
		      const char *buf, size_t size, off_t off)
{
	uint64_t start = dioloop_stats_begin(&node->stats);
	struct iovec src = { (void *)buf, size };
	struct dioloop_io *io;
	struct iov_iter it;
	unsigned int i;

	if (node->readonly) {
		dioloop_reply_early(req, node, DIOLOOP_OP_WRITE, start, -EROFS);
		return;
	}
	if (off < 0 || size > DIOLOOP_MAX_WRITE) {
		dioloop_reply_early(req, node, DIOLOOP_OP_WRITE, start, -EINVAL);
		return;
	}
	if (size == 0) {
		dioloop_reply_early(req, node, DIOLOOP_OP_WRITE, start, 0);
		return;
	}
	/* The kernel's buffer is the worker's: copy the payload once into
	 * pages the request owns until it completes. */
	io = dioloop_io_alloc(req, node, size, start);
	iov_iter_init(&it, &src, 1, size, 0);
	for (i = 0; i < io->nr_pages; i++) {
		iov_iter_copy_from_user(io->bvec[i].bv_page, &it, 0,
					io->bvec[i].bv_len);
		iov_iter_advance(&it, io->bvec[i].bv_len);
	}
	dioloop_io_submit(io, DIOLOOP_WRITE, off, dioloop_write_done);
}

/* ---- blocking ops, run on the worker pool ---- */

enum dioloop_work_kind {
	WORK_FSYNC,
	WORK_FALLOCATE,
	WORK_LSEEK,
	WORK_COPY,
	WORK_TRUNCATE,
	WORK_CALL,
};

struct dioloop_work {
	enum dioloop_work_kind kind;
	fuse_req_t req;
	struct dioloop_node *node, *out;
	int mode;		/* fallocate mode, lseek whence, setattr mask */
	off_t off, off_out;
	uint64_t len;
	uint64_t start;		/* arrival, ns (statistics) */
	struct stat attr;
	void (*fn)(void *arg);	/* WORK_CALL */
	void *arg;
};

static void dioloop_queue_work(struct dioloop_work *w)
{
	struct dioloop_fs *fs = fuse_req_userdata(w->req);

	g_thread_pool_push(fs->workers, w, NULL);
}

void dioloop_io_call(struct dioloop_fs *fs, void (*fn)(void *arg), void *arg)
{
	struct dioloop_work *w = g_new0(struct dioloop_work, 1);

	w->kind = WORK_CALL;
	w->fn = fn;
	w->arg = arg;
	g_thread_pool_push(fs->workers, w, NULL);
}

static void dioloop_reply_status(struct dioloop_work *w, const char *kind,
				 int ret)
{
	struct dioloop_fs *fs = fuse_req_userdata(w->req);

	if (ret < 0 && ret != -EOPNOTSUPP && ret != -ENXIO)
		dioloop_fs_log_error(fs, w->node, kind, ret);
	fuse_reply_err(w->req, ret < 0 ? -ret : 0);
}

/* fallocate: mode 0 preallocates (a no-op inside the node, growth of a
 * growable one), PUNCH_HOLE|KEEP_SIZE discards, ZERO_RANGE zeroes. */
static int dioloop_fallocate(struct dioloop_node *node, int mode, uint64_t off,
			     uint64_t len)
{
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	int64_t size = backend_get_size(node->b);
	uint64_t end = off + len;
	int ret = 0;

	if (size < 0)
		return (int)size;
	if (node->readonly)
		return -EROFS;
	if (len == 0 || end < off)
		return -EINVAL;
	mode &= ~FALLOC_FL_KEEP_SIZE;
	if (mode != 0 && mode != FALLOC_FL_PUNCH_HOLE &&
	    mode != FALLOC_FL_ZERO_RANGE)
		return -EOPNOTSUPP;
	if (mode == FALLOC_FL_PUNCH_HOLE && !keep)
		return -EOPNOTSUPP;
	if (end > (uint64_t)size && !keep) {
		if (!(node->b->flags & BACKEND_OPEN_GROWABLE))
			return -ENOSPC;
		if (dioloop_node_migrating(node))
			return -EBUSY;
		dioloop_node_drain_begin(node);
		ret = backend_resize(node->b, end);
		dioloop_node_drain_end(node);
		if (ret < 0)
			return ret;
		size = (int64_t)end;
	}
	if (off >= (uint64_t)size)
		return 0;
	if (end > (uint64_t)size)
		len = (uint64_t)size - off;
	if (mode == FALLOC_FL_PUNCH_HOLE || mode == FALLOC_FL_ZERO_RANGE)
		/* One write op, no bytes: nothing goes through us. */
		dioloop_throttle_wait(&node->throttle, DIOLOOP_WRITE, 0);
	if (mode != FALLOC_FL_PUNCH_HOLE && mode != FALLOC_FL_ZERO_RANGE)
		return 0;
	/* In flight like a write: a drain (resize, the switch of a
	 * migration) waits for it, and it for the drain. */
	dioloop_node_io_begin(node);
	if (mode == FALLOC_FL_PUNCH_HOLE)
		ret = backend_discard(node->b, off, len);
	else
		ret = backend_write_zeroes(node->b, off, len);
	if (ret == 0)
		dioloop_node_changed(node, off, len);
	dioloop_node_io_end(node);
	return ret;
}

/* SEEK_DATA / SEEK_HOLE from the backend's extent map. */
static int dioloop_lseek(struct dioloop_node *node, int whence, uint64_t off,
			 uint64_t *result)
{
	int64_t size = backend_get_size(node->b);
	struct backend_extent ext;
	int ret;

	if (size < 0)
		return (int)size;
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (off >= (uint64_t)size)
		return -ENXIO;
	while (off < (uint64_t)size) {
		ret = backend_map(node->b, off, (uint64_t)size - off, &ext);
		if (ret < 0)
			return ret;
		if (ext.hole == (whence == SEEK_HOLE)) {
			*result = off;
			return 0;
		}
		off += ext.len;
	}
	/* No data after off: ENXIO; the end of the node is a hole. */
	if (whence == SEEK_DATA)
		return -ENXIO;
	*result = (uint64_t)size;
	return 0;
}

/* copy_file_range: the backend's clone when it has one (it may share
 * only whole blocks), the rest a copy through a buffer.  Bytes copied or
 * -errno. */
static ssize_t dioloop_copy(struct dioloop_node *in, uint64_t off_in,
			    struct dioloop_node *out, uint64_t off_out,
			    uint64_t len)
{
	int64_t size_in = backend_get_size(in->b), size_out;
	uint64_t done = 0;
	ssize_t ret = 0;
	void *buf;

	if (size_in < 0)
		return size_in;
	if (out->readonly)
		return -EROFS;
	if (off_in >= (uint64_t)size_in)
		return 0;
	len = MIN(len, (uint64_t)size_in - off_in);
	/* All of the target range is checked before any of it is
	 * written. */
	ret = backend_check_write(out->b, off_out, len);
	if (ret < 0)
		return ret;
	size_out = backend_get_size(out->b);
	/* A clone stays inside the target (the core clamps it there); what
	 * reaches past its end is a write: the copy says ENOSPC, or grows a
	 * growable node. */
	if (size_out >= 0 && off_out <= (uint64_t)size_out &&
	    len <= (uint64_t)size_out - off_out) {
		dioloop_throttle_wait(&out->throttle, DIOLOOP_WRITE, 0);
		ret = backend_clone_range(in->b, off_in, out->b, off_out, len);
		if (ret < 0 && ret != -EOPNOTSUPP && ret != -EXDEV) {
			/* It may have changed part of the range. */
			dioloop_node_changed(out, off_out, len);
			return ret;
		}
		/* A clone may stop short (cow: whole blocks only): the
		 * rest is copied. */
		if (ret > 0)
			done = (uint64_t)MIN((uint64_t)ret, len);
		dioloop_node_changed(out, off_out, done);
		if (done == len)
			return (ssize_t)done;
	}
	buf = g_malloc(DIOLOOP_MAX_WRITE);
	while (done < len) {
		size_t n = (size_t)MIN(len - done, DIOLOOP_MAX_WRITE);

		/* The copy is I/O of both nodes: each pays its limits. */
		dioloop_throttle_wait(&in->throttle, DIOLOOP_READ, n);
		ret = backend_pread(in->b, buf, n, off_in + done);
		if (ret <= 0)
			break;
		dioloop_throttle_wait(&out->throttle, DIOLOOP_WRITE,
				      (uint64_t)ret);
		ret = backend_pwrite(out->b, buf, (size_t)ret, off_out + done);
		if (ret <= 0)
			break;
		dioloop_node_changed(out, off_out + done, (uint64_t)ret);
		done += (uint64_t)ret;
	}
	g_free(buf);
	return done ? (ssize_t)done : ret;
}

/* In flight on two nodes (a copy), taken in inode order so that two
 * drains cannot wait for each other through two copies. */
static void dioloop_io_begin_pair(struct dioloop_node *a,
				  struct dioloop_node *b)
{
	if (a == b) {
		dioloop_node_io_begin(a);
		return;
	}
	dioloop_node_io_begin(a->ino < b->ino ? a : b);
	dioloop_node_io_begin(a->ino < b->ino ? b : a);
}

static void dioloop_io_end_pair(struct dioloop_node *a, struct dioloop_node *b)
{
	dioloop_node_io_end(a);
	if (a != b)
		dioloop_node_io_end(b);
}

static void dioloop_work_run(gpointer data, gpointer user)
{
	struct dioloop_work *w = data;
	struct dioloop_fs *fs = user;
	uint64_t pos = 0;
	ssize_t n;
	int ret;

	switch (w->kind) {
	case WORK_CALL:
		w->fn(w->arg);
		break;
	case WORK_FSYNC:
		dioloop_node_io_begin(w->node);
		ret = backend_flush(w->node->b);
		dioloop_node_io_end(w->node);
		dioloop_stats_end(&w->node->stats, DIOLOOP_OP_FLUSH, 0, ret,
				  w->start);
		dioloop_reply_status(w, "flush", ret);
		break;
	case WORK_FALLOCATE:
		ret = dioloop_fallocate(w->node, w->mode, (uint64_t)w->off,
					w->len);
		if (w->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
			dioloop_stats_end(&w->node->stats,
					  (w->mode & FALLOC_FL_PUNCH_HOLE) ?
					  DIOLOOP_OP_DISCARD :
					  DIOLOOP_OP_WRITE_ZEROES,
					  w->len, ret, w->start);
		dioloop_reply_status(w, "fallocate", ret);
		break;
	case WORK_LSEEK:
		dioloop_node_io_begin(w->node);
		ret = dioloop_lseek(w->node, w->mode, (uint64_t)w->off, &pos);
		dioloop_node_io_end(w->node);
		if (ret < 0)
			dioloop_reply_status(w, "lseek", ret);
		else
			fuse_reply_lseek(w->req, (off_t)pos);
		break;
	case WORK_COPY:
		dioloop_io_begin_pair(w->node, w->out);
		n = dioloop_copy(w->node, (uint64_t)w->off, w->out,
				 (uint64_t)w->off_out, w->len);
		dioloop_io_end_pair(w->node, w->out);
		dioloop_stats_end(&w->out->stats, DIOLOOP_OP_COPY,
				  n > 0 ? (uint64_t)n : 0, n < 0 ? (int)n : 0,
				  w->start);
		if (n < 0)
			dioloop_reply_status(w, "copy_file_range", (int)n);
		else
			fuse_reply_write(w->req, (size_t)n);
		break;
	case WORK_TRUNCATE:
		ret = dioloop_truncate_check(w->node, w->off);
		if (ret == 0 && dioloop_node_migrating(w->node))
			ret = -EBUSY;
		if (ret == 0) {
			dioloop_node_drain_begin(w->node);
			ret = backend_resize(w->node->b, (uint64_t)w->off);
			dioloop_node_drain_end(w->node);
		}
		if (ret == 0)
			ret = dioloop_node_stat(fs, w->node, &w->attr);
		if (ret < 0)
			dioloop_reply_status(w, "truncate", ret);
		else
			fuse_reply_attr(w->req, &w->attr, 0);
		break;
	}
	g_free(w);
}

static struct dioloop_work *dioloop_work_new(enum dioloop_work_kind kind,
					     fuse_req_t req,
					     struct dioloop_node *node)
{
	struct dioloop_work *w = g_new0(struct dioloop_work, 1);

	w->kind = kind;
	w->req = req;
	w->node = node;
	return w;
}

void dioloop_do_fsync(fuse_req_t req, struct dioloop_node *node)
{
	struct dioloop_work *w = dioloop_work_new(WORK_FSYNC, req, node);

	w->start = dioloop_stats_begin(&node->stats);
	dioloop_queue_work(w);
}

void dioloop_do_fallocate(fuse_req_t req, struct dioloop_node *node, int mode,
			  off_t off, off_t len)
{
	struct dioloop_work *w;

	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Past the largest off_t: the kernel's answer for a file. */
	if (len > INT64_MAX - off) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	w = dioloop_work_new(WORK_FALLOCATE, req, node);
	w->mode = mode;
	w->off = off;
	w->len = (uint64_t)len;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		w->start = dioloop_stats_begin(&node->stats);
	dioloop_queue_work(w);
}

void dioloop_do_lseek(fuse_req_t req, struct dioloop_node *node, off_t off,
		      int whence)
{
	struct dioloop_work *w;

	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	w = dioloop_work_new(WORK_LSEEK, req, node);
	w->mode = whence;
	w->off = off;
	dioloop_queue_work(w);
}

void dioloop_do_copy_file_range(fuse_req_t req, struct dioloop_node *in,
				off_t off_in, struct dioloop_node *out,
				off_t off_out, size_t len)
{
	struct dioloop_work *w;

	if (off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	w = dioloop_work_new(WORK_COPY, req, in);
	w->start = dioloop_stats_begin(&out->stats);
	w->out = out;
	w->off = off_in;
	w->off_out = off_out;
	w->len = len;
	dioloop_queue_work(w);
}

int dioloop_truncate_check(struct dioloop_node *node, off_t size)
{
	if (size < 0)
		return -EINVAL;
	if (node->readonly)
		return -EROFS;
	if (!(node->b->flags & BACKEND_OPEN_GROWABLE))
		return -EPERM;
	return backend_check_range(node->b, 0, (uint64_t)size);
}

void dioloop_do_truncate(fuse_req_t req, struct dioloop_node *node,
			 off_t size, struct stat *attr, int to_set)
{
	struct dioloop_work *w;
	int ret = dioloop_truncate_check(node, size);

	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	w = dioloop_work_new(WORK_TRUNCATE, req, node);
	w->off = size;
	w->mode = to_set;
	dioloop_queue_work(w);
}

void dioloop_io_long_begin(struct dioloop_fs *fs)
{
	g_mutex_lock(&fs->workers_lock);
	fs->long_jobs++;
	g_thread_pool_set_max_threads(fs->workers,
				      (gint)(fs->worker_threads + fs->long_jobs),
				      NULL);
	g_mutex_unlock(&fs->workers_lock);
}

void dioloop_io_long_end(struct dioloop_fs *fs)
{
	g_mutex_lock(&fs->workers_lock);
	fs->long_jobs--;
	g_thread_pool_set_max_threads(fs->workers,
				      (gint)(fs->worker_threads + fs->long_jobs),
				      NULL);
	g_mutex_unlock(&fs->workers_lock);
}

int dioloop_io_start(struct dioloop_fs *fs)
{
	GError *err = NULL;

	g_mutex_init(&fs->workers_lock);
	fs->worker_threads = MAX(4u, fs->opts.threads);
	fs->long_jobs = 0;
	fs->workers = g_thread_pool_new(dioloop_work_run, fs,
					(gint)fs->worker_threads, FALSE, &err);
	if (!fs->workers) {
		g_warning("worker threads: %s", err->message);
		g_error_free(err);
		return -EAGAIN;
	}
	return 0;
}

void dioloop_io_stop(struct dioloop_fs *fs)
{
	if (!fs->workers)
		return;
	g_thread_pool_free(fs->workers, FALSE, TRUE);
	fs->workers = NULL;
	g_mutex_clear(&fs->workers_lock);
}
