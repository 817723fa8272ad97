/* SPDX-License-Identifier: MIT */
/*
 * Node ops that may block (fsync, fallocate, lseek, copy_file_range,
 * truncate, and calls from elsewhere in the daemon): they run on the
 * worker pools and answer from there.
 *
 * The ops that move or drop data (discard, write-zeroes, the copy behind
 * copy_file_range) ask the node's throttle as reads and writes do
 * (io.c), and wait the same way: in the node's queue, holding no thread,
 * going on on a worker thread when admitted.  A fault delay on a flush,
 * discard or write-zeroes waits in the fault filter's queue, not on a
 * thread.  fsyncs run on flush threads of their own and control commands
 * on control threads (control.c), so no number of waiting ops can keep
 * them from a thread.  Every request is counted in the node's statistics
 * just before its reply.
 */
#include <errno.h>
#include <linux/falloc.h>
#include <unistd.h>

#include "fusefs/fs.h"
#include "fusefs/migrate.h"

enum dioloop_work_kind {
	WORK_FSYNC,
	WORK_FALLOCATE,
	WORK_LSEEK,
	WORK_COPY,
	WORK_TRUNCATE,
	WORK_CALL,
};

/* Where a blocking op that had to wait goes on from. */
enum dioloop_work_stage {
	STAGE_START,		/* checks, then ask the throttle */
	STAGE_ADMITTED,		/* fallocate's op, copy's clone */
	STAGE_CLONED,		/* copy: the clone ended with clone_ret */
	STAGE_COPY_NEXT,	/* copy: ask to read the next chunk */
	STAGE_COPY_READ,	/* copy: read it */
	STAGE_COPY_WRITE,	/* copy: write what was read */
};

/*
 * A blocking op.  One that waits for its node's limits or for a fault
 * delay holds no thread: it waits in the throttle's queue (treq) or the
 * fault filter's (fop), as reads and writes do, and goes on from stage on
 * a worker thread (throttle) or finishes on the fault filter's delay
 * thread (fop).  Owned by whichever thread runs it; freed after the
 * reply.
 */
struct dioloop_work {
	enum dioloop_work_kind kind;
	fuse_req_t req;
	struct dioloop_fs *fs;
	struct dioloop_node *node, *out;
	int mode;		/* fallocate mode, lseek whence, setattr mask */
	off_t off, off_out;
	uint64_t len;
	uint64_t start;		/* arrival, ns (statistics) */
	struct stat attr;
	void (*fn)(void *arg);	/* WORK_CALL */
	void *arg;
	enum dioloop_work_stage stage;
	struct dioloop_throttle_req treq;	/* waiting for the limits */
	struct fault_op fop;	/* flush, discard, write-zeroes */
	bool clone;		/* copy: try the backend's clone first */
	ssize_t clone_ret;	/* copy: what the clone returned */
	uint64_t done;		/* copy: bytes copied */
	size_t chunk;		/* copy: bytes read, to write */
	void *buf;		/* copy: the chunk */
};

/* Queue w on pool.  The pools are exclusive (their threads start with
 * them), so a push never creates a thread: it cannot fail for want of
 * one, and w always runs. */
static void dioloop_push(GThreadPool *pool, struct dioloop_work *w)
{
	GError *err = NULL;

	if (!g_thread_pool_push(pool, w, &err)) {
		/* Queued all the same: a thread of the pool runs it. */
		g_warning("worker pool: %s", err->message);
		g_error_free(err);
	}
}

static void dioloop_queue_work(struct dioloop_work *w)
{
	dioloop_push(w->fs->workers, w);
}

/* Run fn(arg) on a thread of pool, a worker pool of fs. */
static void dioloop_call_on(GThreadPool *pool, struct dioloop_fs *fs,
			    void (*fn)(void *arg), void *arg)
{
	struct dioloop_work *w = g_new0(struct dioloop_work, 1);

	w->kind = WORK_CALL;
	w->fs = fs;
	w->fn = fn;
	w->arg = arg;
	dioloop_push(pool, w);
}

void dioloop_io_call(struct dioloop_fs *fs, void (*fn)(void *arg), void *arg)
{
	dioloop_call_on(fs->workers, fs, fn, arg);
}

void dioloop_ctl_call(struct dioloop_fs *fs, void (*fn)(void *arg), void *arg)
{
	dioloop_call_on(fs->controls, fs, fn, arg);
}

static void dioloop_reply_status(struct dioloop_work *w, const char *kind,
				 int ret)
{
	if (ret < 0 && ret != -EOPNOTSUPP && ret != -ENXIO)
		dioloop_fs_log_error(w->fs, w->node, kind, ret);
	fuse_reply_err(w->req, ret < 0 ? -ret : 0);
}

/* Its throttle let a waiting op go: on with it on a worker thread.
 * Timer thread (or whoever stops the throttle). */
static void dioloop_work_throttled(struct dioloop_throttle_req *treq)
{
	dioloop_queue_work(container_of(treq, struct dioloop_work, treq));
}

/*
 * Ask t to admit w's next step (dir, bytes), which goes on at stage
 * next: true when it may go on now; false when it waits in t's queue,
 * holding no thread, and comes back on a worker thread at next.
 */
static bool dioloop_work_admit(struct dioloop_work *w,
			       struct dioloop_throttle *t, int dir,
			       uint64_t bytes, enum dioloop_work_stage next)
{
	w->stage = next;
	w->treq = (struct dioloop_throttle_req){
		.dir = dir,
		.bytes = bytes,
		.dispatch = dioloop_work_throttled,
	};
	return dioloop_throttle_submit(t, &w->treq);
}

/* Run fop (flush, discard, write-zeroes, clone from fop->src) on node's
 * backend, with no thread waiting out a fault delay: its result, or
 * -EIOCBQUEUED (then fop->done is called from the fault filter's delay
 * thread). */
static ssize_t dioloop_node_blocking_op(struct dioloop_node *node,
					struct fault_op *fop)
{
	if (fault_filter_present(node->b))
		return fault_backend_submit_op(node->b, fop);
	switch (fop->kind) {
	case FAULT_KIND_FLUSH:
		return backend_flush(node->b);
	case FAULT_KIND_DISCARD:
		return backend_discard(node->b, fop->pos, fop->len);
	case FAULT_KIND_CLONE_RANGE:
		return backend_clone_range(fop->src, fop->src_pos, node->b,
					   fop->pos, fop->len);
	default:
		return backend_write_zeroes(node->b, fop->pos, fop->len);
	}
}

/* ---- fsync ---- */

/* The flush ended: count, reply, free.  Flush thread or delay thread. */
static void dioloop_fsync_finish(struct dioloop_work *w, int ret)
{
	dioloop_node_io_end(w->node);
	dioloop_stats_end(&w->node->stats, DIOLOOP_OP_FLUSH, 0, ret, w->start);
	dioloop_reply_status(w, "flush", ret);
	g_free(w);
}

static void dioloop_fsync_op_done(struct fault_op *fop, ssize_t ret)
{
	dioloop_fsync_finish(container_of(fop, struct dioloop_work, fop),
			     (int)ret);
}

/* fsync.  Flush thread: fsyncs have threads of their own, which
 * throttled or delayed ops never hold. */
static void dioloop_work_fsync(struct dioloop_work *w)
{
	ssize_t ret;

	dioloop_node_io_begin(w->node);
	w->fop = (struct fault_op){ .kind = FAULT_KIND_FLUSH,
				    .done = dioloop_fsync_op_done };
	ret = dioloop_node_blocking_op(w->node, &w->fop);
	if (ret != -EIOCBQUEUED)
		dioloop_fsync_finish(w, (int)ret);
}

/* ---- fallocate ---- */

/*
 * fallocate's checks: mode 0 preallocates (a no-op inside the node,
 * growth of a growable one), PUNCH_HOLE|KEEP_SIZE discards, ZERO_RANGE
 * zeroes.  1 with *len clamped to the node when a discard or write-zeroes
 * is left to run, 0 when done, or -errno.  Worker thread.
 */
static int dioloop_fallocate_prepare(struct dioloop_node *node, int mode,
				     uint64_t off, uint64_t *len)
{
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	int64_t size = backend_get_size(node->b);
	uint64_t end = off + *len;
	int ret;

	if (size < 0)
		return (int)size;
	if (*len == 0 || end < off)
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
	if (mode == 0 || off >= (uint64_t)size)
		return 0;
	if (end > (uint64_t)size)
		*len = (uint64_t)size - off;
	return 1;
}

/* Count and reply to a fallocate, free it.  Any thread that ends it. */
static void dioloop_fallocate_reply(struct dioloop_work *w, int ret)
{
	if (w->mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		dioloop_stats_end(&w->node->stats,
				  (w->mode & FALLOC_FL_PUNCH_HOLE) ?
				  DIOLOOP_OP_DISCARD : DIOLOOP_OP_WRITE_ZEROES,
				  w->len, ret, w->start);
	dioloop_reply_status(w, "fallocate", ret);
	g_free(w);
}

/* The discard or write-zeroes ended.  Worker or delay thread. */
static void dioloop_fallocate_finish(struct dioloop_work *w, int ret)
{
	dioloop_node_io_end(w->node);
	dioloop_fallocate_reply(w, ret);
}

static void dioloop_fallocate_op_done(struct fault_op *fop, ssize_t ret)
{
	dioloop_fallocate_finish(container_of(fop, struct dioloop_work, fop),
				 (int)ret);
}

/* fallocate, from w->stage.  Worker thread. */
static void dioloop_work_fallocate(struct dioloop_work *w)
{
	uint64_t len = w->len;
	ssize_t n;
	int ret;

	if (w->stage == STAGE_START) {
		ret = dioloop_fallocate_prepare(w->node, w->mode,
						(uint64_t)w->off, &len);
		if (ret <= 0) {
			dioloop_fallocate_reply(w, ret);
			return;
		}
		w->fop = (struct fault_op){
			.kind = (w->mode & FALLOC_FL_PUNCH_HOLE) ?
				FAULT_KIND_DISCARD : FAULT_KIND_WRITE_ZEROES,
			.pos = (uint64_t)w->off,
			.len = len,
			.done = dioloop_fallocate_op_done,
		};
		/* In flight like a write from here, waiting included: a
		 * drain (resize, the switch of a migration) waits for it,
		 * and it for the drain.  One write op, no bytes: nothing
		 * goes through us. */
		dioloop_node_io_begin(w->node);
		if (!dioloop_work_admit(w, &w->node->throttle, DIOLOOP_WRITE, 0,
					STAGE_ADMITTED))
			return;
	}
	n = dioloop_node_blocking_op(w->node, &w->fop);
	if (n != -EIOCBQUEUED)
		dioloop_fallocate_finish(w, (int)n);
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

/* ---- copy_file_range ---- */

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

/* The copy's checks: w->len clamped to the source, w->clone set.  1 to
 * go on, 0 when there is nothing to copy, or -errno. */
static int dioloop_copy_prepare(struct dioloop_work *w)
{
	struct dioloop_node *in = w->node, *out = w->out;
	uint64_t off_in = (uint64_t)w->off, off_out = (uint64_t)w->off_out;
	int64_t size_in = backend_get_size(in->b), size_out;
	int ret;

	if (size_in < 0)
		return (int)size_in;
	if (off_in >= (uint64_t)size_in)
		return 0;
	w->len = MIN(w->len, (uint64_t)size_in - off_in);
	/* All of the target range is checked before any of it is
	 * written. */
	ret = backend_check_write(out->b, off_out, w->len);
	if (ret < 0)
		return ret;
	size_out = backend_get_size(out->b);
	/* A clone stays inside the target (the core clamps it there); what
	 * reaches past its end is a write: the copy says ENOSPC, or grows a
	 * growable node. */
	w->clone = size_out >= 0 && off_out <= (uint64_t)size_out &&
		   w->len <= (uint64_t)size_out - off_out;
	return 1;
}

/* The clone ended with ret: 0 to copy the rest, or -errno. */
static int dioloop_copy_cloned(struct dioloop_work *w, ssize_t ret)
{
	if (ret < 0 && ret != -EOPNOTSUPP && ret != -EXDEV)
		return (int)ret;
	/* A clone may stop short (cow: whole blocks only): the rest is
	 * copied. */
	if (ret > 0)
		w->done = MIN((uint64_t)ret, w->len);
	return 0;
}

/* The copy ended with ret (the last step's result): count, reply,
 * free.  Worker thread. */
static void dioloop_copy_finish(struct dioloop_work *w, ssize_t ret)
{
	ssize_t n = w->done ? (ssize_t)w->done : ret;

	g_free(w->buf);
	dioloop_io_end_pair(w->node, w->out);
	dioloop_stats_end(&w->out->stats, DIOLOOP_OP_COPY,
			  n > 0 ? (uint64_t)n : 0, n < 0 ? (int)n : 0,
			  w->start);
	if (n < 0)
		dioloop_reply_status(w, "copy_file_range", (int)n);
	else
		fuse_reply_write(w->req, (size_t)n);
	g_free(w);
}

/* A delayed clone ended: on with the copy on a worker thread.  Delay
 * thread. */
static void dioloop_copy_clone_done(struct fault_op *fop, ssize_t ret)
{
	struct dioloop_work *w = container_of(fop, struct dioloop_work, fop);

	w->clone_ret = ret;
	dioloop_queue_work(w);
}

/*
 * copy_file_range: the backend's clone when it has one, the rest a copy
 * through a buffer, each step paying its node's limits (the copy is I/O
 * of both nodes).  Returns when a step must wait (it comes back at
 * w->stage) or after the reply.  Worker thread.
 */
static void dioloop_work_copy(struct dioloop_work *w)
{
	struct dioloop_node *in = w->node, *out = w->out;
	ssize_t ret = 0;
	size_t n;

	for (;;) {
		switch (w->stage) {
		case STAGE_START:
			dioloop_io_begin_pair(in, out);
			ret = dioloop_copy_prepare(w);
			if (ret <= 0)
				goto out;
			if (!w->clone)
				w->stage = STAGE_COPY_NEXT;
			else if (!dioloop_work_admit(w, &out->throttle,
						     DIOLOOP_WRITE, 0,
						     STAGE_ADMITTED))
				return;
			break;
		case STAGE_ADMITTED:
			/* The backend's clone (it may share only whole
			 * blocks); a fault delay waits without us. */
			w->fop = (struct fault_op){
				.kind = FAULT_KIND_CLONE_RANGE,
				.src = in->b,
				.src_pos = (uint64_t)w->off,
				.pos = (uint64_t)w->off_out,
				.len = w->len,
				.done = dioloop_copy_clone_done,
			};
			w->stage = STAGE_CLONED;
			w->clone_ret = dioloop_node_blocking_op(out, &w->fop);
			if (w->clone_ret == -EIOCBQUEUED)
				return;
			break;
		case STAGE_CLONED:
			ret = dioloop_copy_cloned(w, w->clone_ret);
			if (ret < 0)
				goto out;
			w->stage = STAGE_COPY_NEXT;
			break;
		case STAGE_COPY_NEXT:
			if (w->done == w->len)
				goto out;
			n = (size_t)MIN(w->len - w->done, DIOLOOP_MAX_WRITE);
			if (!w->buf)
				w->buf = g_malloc(DIOLOOP_MAX_WRITE);
			if (!dioloop_work_admit(w, &in->throttle, DIOLOOP_READ,
						n, STAGE_COPY_READ))
				return;
			break;
		case STAGE_COPY_READ:
			n = (size_t)MIN(w->len - w->done, DIOLOOP_MAX_WRITE);
			ret = backend_pread(in->b, w->buf, n,
					    (uint64_t)w->off + w->done);
			if (ret <= 0)
				goto out;
			w->chunk = (size_t)ret;
			if (!dioloop_work_admit(w, &out->throttle,
						DIOLOOP_WRITE, w->chunk,
						STAGE_COPY_WRITE))
				return;
			break;
		case STAGE_COPY_WRITE:
			ret = backend_pwrite(out->b, w->buf, w->chunk,
					     (uint64_t)w->off_out + w->done);
			if (ret <= 0)
				goto out;
			w->done += (uint64_t)ret;
			w->stage = STAGE_COPY_NEXT;
			break;
		}
	}
out:
	dioloop_copy_finish(w, ret);
}

/* ---- the rest ---- */

/* truncate: only a growable node changes size.  Worker thread. */
static void dioloop_work_truncate(struct dioloop_work *w)
{
	int ret = dioloop_truncate_check(w->node, w->off);

	if (ret == 0 && dioloop_node_migrating(w->node))
		ret = -EBUSY;
	if (ret == 0) {
		dioloop_node_drain_begin(w->node);
		ret = backend_resize(w->node->b, (uint64_t)w->off);
		dioloop_node_drain_end(w->node);
	}
	if (ret == 0)
		ret = dioloop_node_stat(w->fs, w->node, &w->attr);
	if (ret < 0)
		dioloop_reply_status(w, "truncate", ret);
	else
		fuse_reply_attr(w->req, &w->attr, 0);
	g_free(w);
}

/* Run a blocking op (or a call) from its stage.  A thread of one of the
 * pools. */
static void dioloop_work_run(gpointer data, gpointer user)
{
	struct dioloop_work *w = data;
	uint64_t pos = 0;
	int ret;

	switch (w->kind) {
	case WORK_CALL:
		w->fn(w->arg);
		g_free(w);
		break;
	case WORK_FSYNC:
		dioloop_work_fsync(w);
		break;
	case WORK_FALLOCATE:
		dioloop_work_fallocate(w);
		break;
	case WORK_LSEEK:
		dioloop_node_io_begin(w->node);
		ret = dioloop_lseek(w->node, w->mode, (uint64_t)w->off, &pos);
		dioloop_node_io_end(w->node);
		if (ret < 0)
			dioloop_reply_status(w, "lseek", ret);
		else
			fuse_reply_lseek(w->req, (off_t)pos);
		g_free(w);
		break;
	case WORK_COPY:
		dioloop_work_copy(w);
		break;
	case WORK_TRUNCATE:
		dioloop_work_truncate(w);
		break;
	}
}

static struct dioloop_work *dioloop_work_new(enum dioloop_work_kind kind,
					     fuse_req_t req,
					     struct dioloop_node *node)
{
	struct dioloop_work *w = g_new0(struct dioloop_work, 1);

	w->kind = kind;
	w->req = req;
	w->fs = fuse_req_userdata(req);
	w->node = node;
	return w;
}

void dioloop_do_fsync(fuse_req_t req, struct dioloop_node *node)
{
	struct dioloop_work *w = dioloop_work_new(WORK_FSYNC, req, node);

	w->start = dioloop_stats_begin(&node->stats);
	dioloop_push(w->fs->flushers, w);
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
	/* Read-only check of the daemon for a truncate without an open
	 * (setattr by path); the core checks again. */
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

int dioloop_io_long_begin(struct dioloop_fs *fs)
{
	GError *err = NULL;
	int ret = 0;

	g_mutex_lock(&fs->workers_lock);
	fs->long_jobs++;
	if (!g_thread_pool_set_max_threads(fs->controls,
					   (gint)(DIOLOOP_CONTROL_THREADS +
						  fs->long_jobs), &err)) {
		g_warning("control threads: %s", err->message);
		g_error_free(err);
		fs->long_jobs--;
		g_thread_pool_set_max_threads(fs->controls,
					      (gint)(DIOLOOP_CONTROL_THREADS +
						     fs->long_jobs), NULL);
		ret = -EAGAIN;
	}
	g_mutex_unlock(&fs->workers_lock);
	return ret;
}

void dioloop_io_long_end(struct dioloop_fs *fs)
{
	g_mutex_lock(&fs->workers_lock);
	fs->long_jobs--;
	g_thread_pool_set_max_threads(fs->controls,
				      (gint)(DIOLOOP_CONTROL_THREADS +
					     fs->long_jobs), NULL);
	g_mutex_unlock(&fs->workers_lock);
}

/* An exclusive pool of n threads running the work items, or NULL with
 * the reason logged. */
static GThreadPool *dioloop_pool_new(struct dioloop_fs *fs, const char *what,
				     unsigned int n)
{
	GError *err = NULL;
	GThreadPool *pool = g_thread_pool_new(dioloop_work_run, fs, (gint)n,
					      TRUE, &err);

	if (!pool) {
		g_warning("%s threads: %s", what, err->message);
		g_error_free(err);
	}
	return pool;
}

/* Free a pool after its queued work ran. */
static void dioloop_pool_free(GThreadPool **pool)
{
	if (*pool)
		g_thread_pool_free(*pool, FALSE, TRUE);
	*pool = NULL;
}

int dioloop_io_start(struct dioloop_fs *fs)
{
	g_mutex_init(&fs->workers_lock);
	fs->worker_threads = MAX(4u, fs->opts.threads);
	fs->long_jobs = 0;
	fs->workers = dioloop_pool_new(fs, "worker", fs->worker_threads);
	fs->flushers = dioloop_pool_new(fs, "flush", DIOLOOP_FLUSH_THREADS);
	fs->controls = dioloop_pool_new(fs, "control",
					DIOLOOP_CONTROL_THREADS);
	if (!fs->workers || !fs->flushers || !fs->controls) {
		dioloop_io_stop(fs);
		return -EAGAIN;
	}
	return 0;
}

void dioloop_io_stop(struct dioloop_fs *fs)
{
	if (!fs->workers && !fs->flushers && !fs->controls)
		return;
	/* Control work may queue blocking ops, not the other way round. */
	dioloop_pool_free(&fs->controls);
	dioloop_pool_free(&fs->workers);
	dioloop_pool_free(&fs->flushers);
	g_mutex_clear(&fs->workers_lock);
}
