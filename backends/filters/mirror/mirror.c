/* SPDX-License-Identifier: MIT */
/*
 * Live migration (filter_mirror.h): a dirty bitmap of chunk ranges, a
 * copier that moves dirty ranges with migrate_range(), and the per-range
 * copy (docs/lineage.md patch 011's migratepage convention): copy data extents, skip
 * zero blocks and holes (discarding them on the destination when the
 * range is copied again).
 */
#include "backends/filter_mirror.h"
#include "backends/sparse_copy.h"
#include "backends/token_bucket.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 4096u
/* What the copy may save up while it waits for the source. */
#define MIRROR_BURST_MS 100u
#define WORD_BITS 64u

struct migration {
	struct backend *src, *dst;
	struct migrate_opts opts;
	uint64_t size;
	uint64_t chunk;			/* bytes a bit covers */
	uint64_t nr_chunks;
	_Atomic uint64_t *dirty;	/* one bit per chunk */
	_Atomic uint64_t nr_dirty;	/* bits set */
	uint8_t *retries;		/* -EAGAIN count per chunk; copier only */
	uint8_t *touched;		/* chunks written to dst; copier only */
	atomic_bool cancel;

	/* Copy rate (opts.bps); copier only. */
	struct dioloop_bucket rate;

	GMutex lock;			/* progress */
	struct migrate_progress prog;
};

/* Monotonic nanoseconds, for the rate bucket. */
static uint64_t mirror_now_ns(void)
{
	return (uint64_t)g_get_monotonic_time() * 1000u;
}

/* ---- the per-range copy ---- */

static int copy_data(struct backend *dst, struct backend *src, uint64_t pos,
		     uint64_t len, bool fresh)
{
	uint8_t *buf;
	uint64_t done = 0;
	int ret = 0;

	if (posix_memalign((void **)&buf, BLOCK, (size_t)MIGRATE_CHUNK))
		return -ENOMEM;
	while (done < len && !ret) {
		uint64_t n = MIN(len - done, MIGRATE_CHUNK);
		ssize_t r = backend_pread(src, buf, (size_t)n, pos + done);

		if (r < 0)
			ret = (int)r;
		else if ((uint64_t)r != n)
			ret = -EIO;	/* the source shrank */
		else
			ret = backend_write_sparse(dst, buf, pos + done, n,
						   fresh, NULL);
		done += n;
	}
	free(buf);
	return ret;
}

/* The default: follow src's map; holes are cleared on dst unless it is
 * known to read zeros there (fresh: nothing was copied there yet). */
static int migrate_copy_range(struct backend *dst, struct backend *src,
			      uint64_t pos, uint64_t len, bool fresh)
{
	uint64_t end = pos + len;

	while (pos < end) {
		struct backend_extent ext;
		int ret = backend_map(src, pos, end - pos, &ext);

		if (ret == -ENXIO)
			break;		/* past the source's end */
		if (ret < 0)
			return ret;
		if (ext.hole)
			ret = fresh ? 0 : backend_clear_range(dst, pos, ext.len);
		else
			ret = copy_data(dst, src, pos, ext.len, fresh);
		if (ret < 0)
			return ret;
		pos += ext.len;
	}
	return MIGRATEPAGE_SUCCESS;
}

/* One range of the migration's destination, told whether the
 * destination still reads zeros there: MIGRATEPAGE_SUCCESS, -EAGAIN or
 * -errno (docs/lineage.md patch 011's convention, counted as moved/retried/failed). */
static int migrate_range(struct migration *m, uint64_t pos, uint64_t len,
			 bool fresh)
{
	if (m->dst->flags & BACKEND_OPEN_RDONLY)
		return -EROFS;
	if (len == 0)
		return MIGRATEPAGE_SUCCESS;
	return migrate_copy_range(m->dst, m->src, pos, len, fresh);
}

/* ---- the dirty bitmap ---- */

static bool chunk_test_and_clear(struct migration *m, uint64_t c)
{
	uint64_t bit = (uint64_t)1 << (c % WORD_BITS);
	uint64_t old = atomic_fetch_and(&m->dirty[c / WORD_BITS], ~bit);

	if (!(old & bit))
		return false;
	atomic_fetch_sub(&m->nr_dirty, 1);
	return true;
}

/* Set chunk c dirty: true if it was clean. */
static bool chunk_set(struct migration *m, uint64_t c)
{
	uint64_t bit = (uint64_t)1 << (c % WORD_BITS);
	uint64_t old = atomic_fetch_or(&m->dirty[c / WORD_BITS], bit);

	if (old & bit)
		return false;
	atomic_fetch_add(&m->nr_dirty, 1);
	return true;
}

static uint64_t chunk_len(struct migration *m, uint64_t c)
{
	uint64_t pos = c * m->chunk;

	return MIN(m->chunk, m->size - pos);
}

void migration_mark_dirty(struct migration *m, uint64_t pos, uint64_t len)
{
	uint64_t c, last, added = 0;

	if (!m || len == 0 || pos >= m->size)
		return;
	len = MIN(len, m->size - pos);
	last = (pos + len - 1) / m->chunk;
	for (c = pos / m->chunk; c <= last; c++)
		if (chunk_set(m, c))
			added += chunk_len(m, c);
	if (added) {
		g_mutex_lock(&m->lock);
		m->prog.total += added;
		g_mutex_unlock(&m->lock);
	}
}

/* ---- life cycle ---- */

int migration_new(struct backend *src, struct backend *dst,
		  const struct migrate_opts *opts, struct migration **out)
{
	int64_t ssize = backend_get_size(src), dsize = backend_get_size(dst);
	struct migration *m;

	*out = NULL;
	if (ssize < 0)
		return (int)ssize;
	if (dsize < 0)
		return (int)dsize;
	if (dsize < ssize)
		return -EINVAL;
	if (dst->flags & BACKEND_OPEN_RDONLY)
		return -EROFS;
	m = g_new0(struct migration, 1);
	m->src = src;
	m->dst = dst;
	if (opts)
		m->opts = *opts;
	if (!m->opts.max_passes)
		m->opts.max_passes = 30;
	if (!m->opts.max_retries)
		m->opts.max_retries = 10;
	m->size = (uint64_t)ssize;
	m->chunk = MIGRATE_CHUNK;
	while (m->size / m->chunk >= MIGRATE_MAX_CHUNKS)
		m->chunk <<= 1;
	m->nr_chunks = (m->size + m->chunk - 1) / m->chunk;
	m->dirty = g_try_new0(_Atomic uint64_t,
			      (m->nr_chunks + WORD_BITS - 1) / WORD_BITS + 1);
	m->retries = g_try_new0(uint8_t, m->nr_chunks + 1);
	m->touched = g_try_new0(uint8_t, m->nr_chunks + 1);
	if (!m->dirty || !m->retries || !m->touched) {
		g_free(m->dirty);
		g_free(m->retries);
		g_free(m->touched);
		g_free(m);
		return -ENOMEM;
	}
	g_mutex_init(&m->lock);
	m->prog.size = m->size;
	dioloop_bucket_set(&m->rate, m->opts.bps, MIRROR_BURST_MS,
			   mirror_now_ns());
	*out = m;
	return 0;
}

void migration_free(struct migration *m)
{
	if (!m)
		return;
	g_mutex_clear(&m->lock);
	g_free(m->retries);
	g_free(m->touched);
	g_free(m->dirty);
	g_free(m);
}

void migration_cancel(struct migration *m)
{
	atomic_store(&m->cancel, true);
}

bool migration_cancelled(struct migration *m)
{
	return atomic_load(&m->cancel);
}

void migration_get_progress(struct migration *m, struct migrate_progress *p)
{
	g_mutex_lock(&m->lock);
	*p = m->prog;
	g_mutex_unlock(&m->lock);
	p->dirty = 0;
	/* Approximate (the last chunk may be short): for display. */
	p->dirty = MIN(atomic_load(&m->nr_dirty) * m->chunk, m->size);
}

/* ---- copying ---- */

/* Sleep so that the copy stays within opts.bps (cancel checked). */
static void throttle(struct migration *m, uint64_t bytes)
{
	dioloop_bucket_refill(&m->rate, mirror_now_ns());
	dioloop_bucket_charge(&m->rate, (double)bytes);
	for (;;) {
		uint64_t wait_ns;

		dioloop_bucket_refill(&m->rate, mirror_now_ns());
		wait_ns = dioloop_bucket_wait(&m->rate);
		if (!wait_ns || atomic_load(&m->cancel))
			return;
		g_usleep((gulong)MIN(wait_ns / 1000 + 1, (uint64_t)100000));
	}
}

/*
 * A read error in the source with ignore_bad_blocks: copy the chunk block
 * by block, leaving unreadable blocks as holes on the destination.
 */
static int copy_around_bad(struct migration *m, uint64_t pos, uint64_t len)
{
	uint64_t off;
	int ret;

	for (off = 0; off < len; off += BLOCK) {
		uint64_t n = MIN((uint64_t)BLOCK, len - off);

		ret = migrate_range(m, pos + off, n, false);
		if (ret == -EIO || ret == -EBADMSG) {
			g_warning("%s: unreadable block at byte %llu left as a hole on the destination",
				  m->src->path ? m->src->path : "source",
				  (unsigned long long)(pos + off));
			ret = backend_clear_range(m->dst, pos + off, n);
			g_mutex_lock(&m->lock);
			m->prog.bad_blocks++;
			g_mutex_unlock(&m->lock);
		}
		if (ret < 0)
			return ret;
	}
	return MIGRATEPAGE_SUCCESS;
}

/* The first source block of [pos, pos + len) that cannot be read. */
static uint64_t find_bad_block(struct migration *m, uint64_t pos,
			       uint64_t len)
{
	uint8_t *blk;
	uint64_t off;

	if (posix_memalign((void **)&blk, BLOCK, BLOCK))
		return pos;
	for (off = 0; off < len; off += BLOCK)
		if (backend_pread(m->src, blk, (size_t)MIN((uint64_t)BLOCK,
							   len - off),
				  pos + off) < 0)
			break;
	free(blk);
	return off < len ? pos + off : pos;
}

static void record_failure(struct migration *m, int err, uint64_t pos)
{
	g_mutex_lock(&m->lock);
	m->prog.ranges_failed++;
	if (!m->prog.error) {
		m->prog.error = err;
		m->prog.error_pos = pos;
	}
	g_mutex_unlock(&m->lock);
	g_warning("%s: migration failed at byte %llu: %s",
		  m->src->path ? m->src->path : "source",
		  (unsigned long long)pos, g_strerror(-err));
}

int migration_pass(struct migration *m)
{
	uint64_t c, not_moved = 0;

	g_mutex_lock(&m->lock);
	m->prog.passes++;
	g_mutex_unlock(&m->lock);
	for (c = 0; c < m->nr_chunks; c++) {
		uint64_t pos = c * m->chunk, len = chunk_len(m, c);
		int ret;

		if (atomic_load(&m->cancel))
			return -ECANCELED;
		/* Clear first: a write completing from now on sets it
		 * again, and the chunk is copied once more. */
		if (!chunk_test_and_clear(m, c))
			continue;
		ret = migrate_range(m, pos, len, !m->touched[c]);
		m->touched[c] = 1;	/* even a failed try may have written */
		if ((ret == -EIO || ret == -EBADMSG) &&
		    m->opts.ignore_bad_blocks)
			ret = copy_around_bad(m, pos, len);
		if (ret == -EAGAIN && ++m->retries[c] <= m->opts.max_retries) {
			chunk_set(m, c);
			not_moved++;
			g_mutex_lock(&m->lock);
			m->prog.ranges_retried++;
			g_mutex_unlock(&m->lock);
			continue;
		}
		if (ret < 0) {
			chunk_set(m, c);	/* not on the destination */
			if (ret == -EIO || ret == -EBADMSG)
				pos = find_bad_block(m, pos, len);
			record_failure(m, ret, pos);
			return ret;
		}
		m->retries[c] = 0;
		g_mutex_lock(&m->lock);
		m->prog.ranges_ok++;
		m->prog.done += len;
		g_mutex_unlock(&m->lock);
		throttle(m, len);
	}
	return (int)MIN(not_moved, (uint64_t)INT32_MAX);
}

/* Mark every chunk the source has data in dirty. */
static int mark_allocated(struct migration *m)
{
	uint64_t pos = 0;

	while (pos < m->size) {
		struct backend_extent ext;
		int ret = backend_map(m->src, pos, m->size - pos, &ext);

		if (ret == -ENXIO)
			break;
		if (ret < 0)
			return ret;
		if (!ext.hole)
			migration_mark_dirty(m, pos, ext.len);
		pos += ext.len;
	}
	return 0;
}

int migration_copy(struct migration *m)
{
	unsigned int pass;
	int ret = mark_allocated(m);

	if (ret < 0) {
		record_failure(m, ret, 0);
		return ret;
	}
	for (pass = 0; pass < m->opts.max_passes; pass++) {
		ret = migration_pass(m);
		if (ret < 0)
			return ret;
		if (atomic_load(&m->nr_dirty) <= MIGRATE_CONVERGED_CHUNKS &&
		    ret == 0)
			return 0;
		if (ret > 0)	/* back off before retrying */
			g_usleep(20000);
	}
	return 0;
}

int migration_finish(struct migration *m)
{
	unsigned int tries = 0;
	int ret;

	/* The image waits for this copy: no rate limit now. */
	m->opts.bps = 0;
	dioloop_bucket_set(&m->rate, 0, MIRROR_BURST_MS, mirror_now_ns());
	/* Nothing writes the source now: a few passes empty the bitmap
	 * (more only while ranges ask for a retry). */
	do {
		ret = migration_pass(m);
		if (ret > 0)
			g_usleep(20000);
	} while (ret > 0 && ++tries < m->opts.max_retries + 2);
	if (ret > 0)
		ret = -EAGAIN;
	if (ret == 0)
		ret = backend_flush(m->dst);
	if (ret < 0) {
		if (ret != -ECANCELED && !m->prog.error)
			record_failure(m, ret, 0);
		return ret;
	}
	g_mutex_lock(&m->lock);
	m->prog.finished = true;
	g_mutex_unlock(&m->lock);
	return 0;
}

/* ---- the filter: dirty marks on the way down, and the switch ---- */

/* An asynchronous write on its way to the source: marked dirty when it
 * completes, before the caller hears of it. */
struct mirror_req {
	struct kiocb iocb;		/* what the source sees */
	struct kiocb *orig;		/* the caller's */
	struct migration *m;
};

/* The source finished a write: mark what it changed, then complete.
 * Source completion thread. */
static void mirror_write_done(struct kiocb *iocb, ssize_t res)
{
	struct mirror_req *req = iocb->ki_private;
	struct kiocb *orig = req->orig;

	if (res > 0)
		migration_mark_dirty(req->m, orig->ki_pos, (uint64_t)res);
	g_free(req);
	orig->ki_complete(orig, res);
}

/* Reads pass; a write is marked dirty once it changed the source.  Any
 * thread; never blocks on I/O. */
static ssize_t mirror_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	struct migration *m = b->priv;
	struct mirror_req *req;
	ssize_t ret;

	if (iocb->ki_rw != DIOLOOP_WRITE)
		return backend_direct_IO_bvec(b->inner, iocb);
	if (is_sync_kiocb(iocb)) {
		ret = backend_direct_IO_bvec(b->inner, iocb);
		if (ret > 0)
			migration_mark_dirty(m, iocb->ki_pos, (uint64_t)ret);
		return ret;
	}
	req = g_new(struct mirror_req, 1);
	req->orig = iocb;
	req->m = m;
	req->iocb = *iocb;
	req->iocb.ki_complete = mirror_write_done;
	req->iocb.ki_private = req;
	ret = backend_direct_IO_bvec(b->inner, &req->iocb);
	if (ret == -EIOCBQUEUED)
		return ret;	/* req is the completion's now */
	g_free(req);
	if (ret > 0)
		migration_mark_dirty(m, iocb->ki_pos, (uint64_t)ret);
	return ret;
}

/* Discard on the source, then mark the range.  Worker thread. */
static int mirror_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	int ret = backend_discard(b->inner, pos, len);

	if (ret == 0)
		migration_mark_dirty(b->priv, pos, len);
	return ret;
}

/* Zero on the source, then mark the range.  Worker thread. */
static int mirror_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	int ret = backend_write_zeroes(b->inner, pos, len);

	if (ret == 0)
		migration_mark_dirty(b->priv, pos, len);
	return ret;
}

/* Resize the source and mark what changed (a cut reads as zeros after;
 * the owner refuses to switch on a size the copy was not made for).
 * Worker thread, nothing in flight. */
static int mirror_resize(struct backend *b, uint64_t size)
{
	int64_t old = backend_get_size(b->inner);
	int ret = backend_resize(b->inner, size);

	if (ret == 0 && old >= 0 && (uint64_t)old != size)
		migration_mark_dirty(b->priv, MIN((uint64_t)old, size),
				     (uint64_t)llabs((long long)size - old));
	return ret;
}

/* b, or the source below it when b is a mirror. */
static struct backend *mirror_unwrap(struct backend *b)
{
	return b->ops == &mirror_backend_ops ? b->inner : b;
}

/* Clone with a mirror on either side unwrapped; a mirror destination
 * marks what was cloned into it.  Worker thread. */
static ssize_t mirror_clone_range(struct backend *src, uint64_t src_pos,
				  struct backend *dst, uint64_t dst_pos,
				  uint64_t len)
{
	ssize_t ret = backend_clone_range(mirror_unwrap(src), src_pos,
					  mirror_unwrap(dst), dst_pos, len);

	if (dst->ops != &mirror_backend_ops)
		return ret;
	if (ret > 0)
		migration_mark_dirty(dst->priv, dst_pos, (uint64_t)ret);
	else if (ret < 0 && ret != -EOPNOTSUPP && ret != -EXDEV)
		/* It may have changed part of the range. */
		migration_mark_dirty(dst->priv, dst_pos, len);
	return ret;
}

/* get_size, flush, map, info: the core forwards them to the source. */
const struct backend_ops mirror_backend_ops = {
	.name = "mirror",
	.is_filter = true,
	.direct_IO_bvec = mirror_direct_IO_bvec,
	.discard = mirror_discard,
	.write_zeroes = mirror_write_zeroes,
	.resize = mirror_resize,
	.clone_range = mirror_clone_range,
};

int mirror_filter_open(struct migration *m, struct backend **out)
{
	struct backend_open_args args = {
		.path = m->src->path,
		.flags = m->src->flags,
		.aio = m->src->aio,
		.inner = m->src,
	};
	int ret = backend_open_ops(&mirror_backend_ops, &args, out);

	if (ret == 0)
		(*out)->priv = m;
	return ret;
}

void mirror_filter_insert(struct backend **top, struct backend *mirror)
{
	backend_stack_replace(top, mirror->inner, mirror);
}

void mirror_filter_remove(struct backend **top, struct backend *mirror)
{
	backend_stack_replace(top, mirror, mirror->inner);
	mirror->inner = NULL;
}

int mirror_filter_switch(struct backend **top, struct backend *mirror,
			 struct backend **old)
{
	struct migration *m = mirror->priv;
	struct migrate_progress p;

	migration_get_progress(m, &p);
	if (!p.finished)
		return -EINVAL;
	*old = mirror->inner;
	backend_stack_replace(top, mirror, m->dst);
	mirror->inner = NULL;
	return 0;
}
