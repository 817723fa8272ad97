/* SPDX-License-Identifier: MIT */
/*
 * The "mem" test-double backend (see mem.h).
 *
 * The image is a store of whole physical blocks, an anonymous mapping
 * (not heap: LeakSanitizer and valgrind would scan every byte of it at
 * each forked test's exit, and new pages come zeroed), plus a bitmap
 * with one bit per physical block: set = data, clear = hole.  Logical block
 * i lives at physical block i, or i ^ 1 with `fragment` (the store always
 * holds an even number of blocks so i ^ 1 exists).
 *
 * Invariants (under m->lock):
 *  - every store byte that is not logical data of the image reads zero:
 *    holes, and the tail past size, are zero in the store.  So marking a
 *    block written never exposes stale bytes.
 *  - cap_blocks is even and covers size rounded up to the block size; the
 *    engine never maps past that.
 *
 * Locking: m->lock is a GRWLock.  Readers: I/O (get_block and the memcpy
 * of each dio_io), map, peek, get_size.  Writers: anything that moves or
 * resizes the store (growth, resize) or zeroes ranges (discard,
 * write_zeroes).  Bits are atomics so readers may set them.  The lock is
 * never held across dio_io_complete(): completing may start the next phase
 * of a request, which calls get_block again.
 */
#include "backends/testing/mem.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/dio.h"
#include "backends/size.h"

#define MEM_DEFAULT_SIZE (UINT64_C(16) << 20)
#define MEM_DEFAULT_ALIGN 512u
#define MEM_DEFAULT_BLOCK 4096u
#define MEM_DEFAULT_MAX_SEGS 1024u
#define MEM_DEFAULT_MAX_TRANSFER (1u << 20)
#define MEM_MAX_SIZE (UINT64_C(1) << 40)	/* sanity bound for options */
#define MEM_ASYNC_THREADS 3

struct mem {
	GRWLock lock;
	char *store;			/* cap_blocks blocks; by lock */
	size_t store_bytes;		/* mapped (may exceed cap_blocks) */
	_Atomic uint64_t *bits;		/* one per physical block */
	uint64_t cap_blocks;		/* by lock */
	uint64_t size;			/* logical bytes; by lock */

	unsigned int blkbits;		/* log2 of block= */
	unsigned int alignbits;		/* log2 of align= */
	bool fragment;
	bool async;
	unsigned int delay_us;
	/* async: MEM_ASYNC_THREADS workers popping dio_io's off queue, so
	 * completions come in random order and race with submission; each
	 * worker stops at a mem_stop_marker and is joined at close. */
	GAsyncQueue *queue;
	GThread *workers[MEM_ASYNC_THREADS];

	GMutex stats_lock;
	struct mem_backend_stats stats;	/* by stats_lock */
	struct dio_engine dio;		/* the engine's locks and counters */
};

static uint64_t mem_phys_block(const struct mem *m, uint64_t lblock)
{
	return m->fragment ? lblock ^ 1 : lblock;
}

static bool mem_test_bit(struct mem *m, uint64_t pblock)
{
	return atomic_load(&m->bits[pblock / 64]) & (UINT64_C(1) << (pblock % 64));
}

static void mem_set_bit(struct mem *m, uint64_t pblock)
{
	atomic_fetch_or(&m->bits[pblock / 64], UINT64_C(1) << (pblock % 64));
}

static void mem_clear_bit(struct mem *m, uint64_t pblock)
{
	atomic_fetch_and(&m->bits[pblock / 64], ~(UINT64_C(1) << (pblock % 64)));
}

/* Blocks the store needs for size bytes: rounded up, and even. */
static uint64_t mem_blocks_for(const struct mem *m, uint64_t size)
{
	uint64_t blocks = (size + (UINT64_C(1) << m->blkbits) - 1) >> m->blkbits;

	return (blocks + 1) & ~UINT64_C(1);
}

/* Make the store hold at least blocks blocks (new ones zero, holes).
 * Write lock held.  0 or -ENOMEM. */
static int mem_grow_store(struct mem *m, uint64_t blocks)
{
	size_t old_words = (m->cap_blocks + 63) / 64;
	size_t new_words = (blocks + 63) / 64;
	uint64_t new_bytes = blocks << m->blkbits;
	char *store;
	_Atomic uint64_t *bits;

	if (blocks <= m->cap_blocks)
		return 0;
	if (new_bytes > SIZE_MAX)
		return -ENOMEM;
	if (m->store)
		store = mremap(m->store, m->store_bytes, (size_t)new_bytes,
			       MREMAP_MAYMOVE);
	else
		store = mmap(NULL, (size_t)new_bytes, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (store == MAP_FAILED)
		return -ENOMEM;
	m->store = store;	/* pages past cap_blocks were never written: zero */
	m->store_bytes = (size_t)new_bytes;
	bits = g_try_realloc(m->bits, new_words * sizeof(*bits));
	if (!bits)
		return -ENOMEM;	/* the bigger store is kept; harmless */
	m->bits = bits;
	memset((void *)(bits + old_words), 0,
	       (new_words - old_words) * sizeof(*bits));
	m->cap_blocks = blocks;
	return 0;
}

/*
 * Zero logical [pos, pos + len) in the store; blocks covered whole become
 * holes.  With fragment every block is done on its own.  Write lock held.
 */
static void mem_zero_range(struct mem *m, uint64_t pos, uint64_t len)
{
	uint64_t blk = UINT64_C(1) << m->blkbits;
	uint64_t end = pos + len;

	while (pos < end) {
		uint64_t lblock = pos >> m->blkbits;
		uint64_t off = pos & (blk - 1);
		uint64_t n = blk - off < end - pos ? blk - off : end - pos;
		uint64_t pblock = mem_phys_block(m, lblock);

		memset(m->store + (pblock << m->blkbits) + off, 0, (size_t)n);
		if (n == blk)
			mem_clear_bit(m, pblock);
		pos += n;
	}
}

struct mem_options {
	uint64_t size, align, block, max_segs, max_transfer, delay_us;
	bool async, fragment;
};

/* Parse one key[=value] option.  0 or -EINVAL. */
static int mem_parse_option(struct mem_options *o, const char *opt)
{
	const char *eq = strchr(opt, '=');
	const char *val = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);
	static const struct {
		const char *key;
		size_t off;
	} nums[] = {
		{ "size", offsetof(struct mem_options, size) },
		{ "align", offsetof(struct mem_options, align) },
		{ "block", offsetof(struct mem_options, block) },
		{ "max_segs", offsetof(struct mem_options, max_segs) },
		{ "max_transfer", offsetof(struct mem_options, max_transfer) },
		{ "delay_us", offsetof(struct mem_options, delay_us) },
	};
	size_t i;

	if (!val && !strcmp(opt, "async")) {
		o->async = true;
		return 0;
	}
	if (!val && !strcmp(opt, "fragment")) {
		o->fragment = true;
		return 0;
	}
	for (i = 0; i < G_N_ELEMENTS(nums); i++) {
		uint64_t *field = (uint64_t *)((char *)o + nums[i].off);

		if (strlen(nums[i].key) != klen ||
		    strncmp(opt, nums[i].key, klen))
			continue;
		return dioloop_parse_size(val, MEM_MAX_SIZE, field) < 0 ?
		       -EINVAL : 0;
	}
	return -EINVAL;
}

/* Parse and check args->path.  0 or -EINVAL (logged). */
static int mem_parse_options(const char *path, struct mem_options *o)
{
	gchar **opts;
	int ret = 0;
	size_t i;

	*o = (struct mem_options){
		.size = MEM_DEFAULT_SIZE,
		.align = MEM_DEFAULT_ALIGN,
		.block = MEM_DEFAULT_BLOCK,
		.max_segs = MEM_DEFAULT_MAX_SEGS,
		.max_transfer = MEM_DEFAULT_MAX_TRANSFER,
	};
	opts = g_strsplit(path ? path : "", ",", -1);
	for (i = 0; opts[i]; i++) {
		if (!opts[i][0])
			continue;
		ret = mem_parse_option(o, opts[i]);
		if (ret < 0) {
			g_warning("mem: bad option \"%s\" in \"%s\"", opts[i],
				  path);
			break;
		}
	}
	g_strfreev(opts);
	if (ret < 0)
		return ret;
	if (!o->align || (o->align & (o->align - 1)) || o->align > o->block ||
	    (o->block & (o->block - 1)) || o->block > (1u << 20)) {
		g_warning("mem: align=%llu and block=%llu must be powers of two, align <= block <= 1M",
			  (unsigned long long)o->align,
			  (unsigned long long)o->block);
		return -EINVAL;
	}
	if (!o->max_segs || o->max_segs > UINT32_MAX ||
	    o->max_transfer < DIOLOOP_PAGE_SIZE || o->max_transfer > UINT32_MAX ||
	    o->max_transfer % o->align || o->delay_us > 10000000) {
		g_warning("mem: need max_segs >= 1, max_transfer a multiple of align and >= %zu, delay_us <= 10s",
			  DIOLOOP_PAGE_SIZE);
		return -EINVAL;
	}
	return 0;
}

/* log2 of a power of two. */
static unsigned int mem_log2(uint64_t v)
{
	unsigned int n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

static gpointer mem_worker(gpointer data);
static void mem_stop_workers(struct mem *m);

/* Free what open set up (the workers are stopped). */
static void mem_free(struct mem *m)
{
	if (m->store)
		munmap(m->store, m->store_bytes);
	g_free(m->bits);
	g_rw_lock_clear(&m->lock);
	g_mutex_clear(&m->stats_lock);
	dio_engine_clear(&m->dio);
	g_free(m);
}

/* Open: parse the options, allocate the store.  Control thread. */
static int mem_open(struct backend *b, const struct backend_open_args *args)
{
	struct mem_options o;
	struct mem *m;
	int ret;

	ret = mem_parse_options(args->path, &o);
	if (ret < 0)
		return ret;
	m = g_new0(struct mem, 1);
	dio_engine_init(&m->dio);
	g_rw_lock_init(&m->lock);
	g_mutex_init(&m->stats_lock);
	m->blkbits = mem_log2(o.block);
	m->alignbits = mem_log2(o.align);
	m->fragment = o.fragment;
	m->async = o.async;
	m->delay_us = (unsigned int)o.delay_us;
	m->size = o.size;
	/* At least two blocks, so i ^ 1 exists even for size=0. */
	ret = mem_grow_store(m, o.size ? mem_blocks_for(m, o.size) : 2);
	if (ret < 0) {
		g_warning("mem: cannot allocate %llu bytes",
			  (unsigned long long)o.size);
		goto out_free;
	}
	if (m->async) {
		int i;

		m->queue = g_async_queue_new();
		for (i = 0; i < MEM_ASYNC_THREADS; i++) {
			GError *err = NULL;

			m->workers[i] = g_thread_try_new("mem-io", mem_worker,
							 m, &err);
			if (!m->workers[i]) {
				g_warning("mem: no worker thread: %s",
					  err->message);
				g_error_free(err);
				ret = -EAGAIN;
				goto out_stop_workers;
			}
		}
	}
	b->limits = (struct backend_limits){
		.request_alignment = (uint32_t)o.align,
		.mem_alignment = (uint32_t)o.align,
		.block_size = (uint32_t)o.block,
		.max_transfer = (uint32_t)o.max_transfer,
		.max_segs = (uint32_t)o.max_segs,
	};
	b->priv = m;
	return 0;

out_stop_workers:
	mem_stop_workers(m);
out_free:
	mem_free(m);
	return ret;
}

/* Close: no request is in flight.  Control thread. */
static void mem_close(struct backend *b)
{
	struct mem *m = b->priv;

	mem_stop_workers(m);
	mem_free(m);
	b->priv = NULL;
}

/* Logical size.  Any thread. */
static int64_t mem_get_size(struct backend *b)
{
	struct mem *m = b->priv;
	uint64_t size;

	g_rw_lock_reader_lock(&m->lock);
	size = m->size;
	g_rw_lock_reader_unlock(&m->lock);
	return (int64_t)size;
}

/*
 * The engine's get_block: identity (or i ^ 1) mapping.  Without create a
 * run of blocks with the same written state is one extent; with create the
 * blocks become data.  Any thread, never blocks beyond the read lock.
 */
static int mem_get_block(struct backend *b, void *map_private, uint64_t pos,
			 uint64_t len, bool create, struct dio_map *map)
{
	struct mem *m = b->priv;
	uint64_t blk = UINT64_C(1) << m->blkbits;
	uint64_t lblock = pos >> m->blkbits, off = pos & (blk - 1);
	uint64_t end = pos + len, run = blk - off;
	bool written;

	g_rw_lock_reader_lock(&m->lock);
	g_assert(mem_blocks_for(m, end) <= m->cap_blocks);
	written = mem_test_bit(m, mem_phys_block(m, lblock));
	if (create)
		mem_set_bit(m, mem_phys_block(m, lblock));
	/* fragment: neighbours are never physically adjacent, one block. */
	while (!m->fragment && pos + run < end) {
		uint64_t next = (pos + run) >> m->blkbits;

		if (create)
			mem_set_bit(m, next);
		else if (mem_test_bit(m, next) != written)
			break;
		run += blk;
	}
	g_rw_lock_reader_unlock(&m->lock);

	map->phys = (mem_phys_block(m, lblock) << m->blkbits) + off;
	map->len = run < len ? run : len;
	map->hole = !create && !written;
	map->fd = -1;
	return 0;
}

/* Move one I/O's bytes between its iovecs and the store.  Read lock
 * taken here; the caller completes the I/O after. */
static void mem_do_io(struct mem *m, struct dio_io *io)
{
	char *p;
	int i;

	g_rw_lock_reader_lock(&m->lock);
	g_assert(io->phys + io->len <= m->cap_blocks << m->blkbits);
	p = m->store + io->phys;
	for (i = 0; i < io->nr_iov; i++) {
		const struct iovec *v = &io->iov[i];

		if (io->write)
			memcpy(p, v->iov_base, v->iov_len);
		else
			memcpy(v->iov_base, p, v->iov_len);
		p += v->iov_len;
	}
	if (io->write) {
		/* The data is in: whatever a racing discard did, the
		 * blocks hold data now (keeps the zero invariant). */
		uint64_t blk;

		for (blk = io->phys >> m->blkbits;
		     blk < (io->phys + io->len + (UINT64_C(1) << m->blkbits) - 1) >>
			   m->blkbits;
		     blk++)
			mem_set_bit(m, blk);
	}
	g_rw_lock_reader_unlock(&m->lock);
}

/* Queued to tell one worker to exit. */
static char mem_stop_marker;

/* An async worker: pop an I/O, wait delay_us, do it, complete it. */
static gpointer mem_worker(gpointer data)
{
	struct mem *m = data;

	for (;;) {
		struct dio_io *io = g_async_queue_pop(m->queue);
		size_t len;

		if (io == (void *)&mem_stop_marker)
			break;
		len = io->len;
		if (m->delay_us)
			g_usleep(m->delay_us);
		mem_do_io(m, io);
		dio_io_complete(io, (long)len);
	}
	return NULL;
}

/* Stop and join the workers that were started; free the queue.  Control
 * thread, nothing in flight. */
static void mem_stop_workers(struct mem *m)
{
	int i;

	if (!m->queue)
		return;
	for (i = 0; i < MEM_ASYNC_THREADS; i++)
		if (m->workers[i])
			g_async_queue_push(m->queue, &mem_stop_marker);
	for (i = 0; i < MEM_ASYNC_THREADS; i++)
		if (m->workers[i])
			g_thread_join(m->workers[i]);
	g_async_queue_unref(m->queue);
	m->queue = NULL;
}

/*
 * The engine's submit_io: count, then carry out each I/O inline (sync) or
 * hand it to the workers (async).  Submitting thread.  An I/O handed over may
 * complete, and its request be freed, at once: read it before.
 */
static void mem_submit_io(struct backend *b, struct dio_io **ios, int n)
{
	struct mem *m = b->priv;
	struct mem_backend_stats *st = &m->stats;
	int i;

	g_mutex_lock(&m->stats_lock);
	st->submits++;
	for (i = 0; i < n; i++) {
		const struct dio_io *io = ios[i];

		st->ios++;
		st->iovs += (uint64_t)io->nr_iov;
		if (io->nr_iov > 1)
			st->multi_iov_ios++;
		if ((uint64_t)io->nr_iov > st->max_nr_iov)
			st->max_nr_iov = (uint64_t)io->nr_iov;
		if (io->len > st->max_io_len)
			st->max_io_len = io->len;
		if (io->write) {
			st->write_ios++;
			st->bytes_written += io->len;
		} else {
			st->read_ios++;
			st->bytes_read += io->len;
		}
	}
	g_mutex_unlock(&m->stats_lock);

	for (i = 0; i < n; i++) {
		struct dio_io *io = ios[i];

		if (m->async) {
			g_async_queue_push(m->queue, io);
			continue;
		}
		if (m->delay_us)
			g_usleep(m->delay_us);
		mem_do_io(m, io);
		dio_io_complete(io, (long)io->len);
	}
}

/* Let a write end at end: 0, -ENOSPC, or grow a growable image. */
static int mem_reserve(struct backend *b, struct mem *m, uint64_t end)
{
	int ret = 0;

	g_rw_lock_reader_lock(&m->lock);
	if (end <= m->size) {
		g_rw_lock_reader_unlock(&m->lock);
		return 0;
	}
	g_rw_lock_reader_unlock(&m->lock);
	if (!(b->flags & BACKEND_OPEN_GROWABLE))
		return -ENOSPC;
	if (end > MEM_MAX_SIZE)
		return -EFBIG;
	g_rw_lock_writer_lock(&m->lock);
	if (end > m->size) {
		ret = mem_grow_store(m, mem_blocks_for(m, end));
		if (!ret)
			m->size = end;
	}
	g_rw_lock_writer_unlock(&m->lock);
	return ret;
}

/* Read or write through the engine.  Any thread. */
static ssize_t mem_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	struct mem *m = b->priv;
	size_t count = iov_iter_count(iocb->ki_iter);
	uint64_t pos = iocb->ki_pos;
	struct dio_params p = {
		.engine = &m->dio,
		.blkbits = m->blkbits,
		.dev_blkbits = m->alignbits,
		.get_block = mem_get_block,
		.submit_io = mem_submit_io,
		.flags = DIO_SKIP_HOLES,
	};

	if (iocb->ki_rw == DIOLOOP_WRITE) {
		int ret;

		if (b->flags & BACKEND_OPEN_RDONLY)
			return -EROFS;
		if (pos > MEM_MAX_SIZE || count > MEM_MAX_SIZE - pos)
			return b->flags & BACKEND_OPEN_GROWABLE ? -EFBIG :
								  -ENOSPC;
		ret = mem_reserve(b, m, pos + count);
		if (ret < 0)
			return ret;
	} else {
		uint64_t size = (uint64_t)mem_get_size(b);

		if (pos >= size)
			return 0;
		if (count > size - pos)
			count = (size_t)(size - pos);
	}
	p.count = count;
	return blockdev_direct_IO_bvec(b, iocb, &p);
}

/* Deallocate: the range becomes holes (zeros).  Worker thread. */
static int mem_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	struct mem *m = b->priv;

	g_rw_lock_writer_lock(&m->lock);
	g_assert(pos + len <= m->size);
	mem_zero_range(m, pos, len);
	g_rw_lock_writer_unlock(&m->lock);
	return 0;
}

/* Change the size; what is cut off reads as zeros if it grows back.
 * Worker thread, no direct I/O in flight. */
static int mem_resize(struct backend *b, uint64_t size)
{
	struct mem *m = b->priv;
	int ret = 0;

	if (size > MEM_MAX_SIZE)
		return -EFBIG;
	g_rw_lock_writer_lock(&m->lock);
	if (size < m->size) {
		mem_zero_range(m, size, m->size - size);
	} else {
		ret = mem_grow_store(m, mem_blocks_for(m, size));
	}
	if (!ret)
		m->size = size;
	g_rw_lock_writer_unlock(&m->lock);
	return ret;
}

/* The extent at pos from the bitmap.  Worker thread. */
static int mem_map(struct backend *b, uint64_t pos, uint64_t len,
		   struct backend_extent *ext)
{
	struct mem *m = b->priv;
	uint64_t blk = UINT64_C(1) << m->blkbits;
	uint64_t lblock = pos >> m->blkbits;
	uint64_t run = blk - (pos & (blk - 1));
	bool written;

	g_rw_lock_reader_lock(&m->lock);
	written = mem_test_bit(m, mem_phys_block(m, lblock));
	while (run < len &&
	       mem_test_bit(m, mem_phys_block(m, ++lblock)) == written)
		run += blk;
	g_rw_lock_reader_unlock(&m->lock);
	ext->len = run < len ? run : len;
	ext->hole = !written;
	return 0;
}

/* Format, size and the bytes of written blocks.  Worker thread. */
static int mem_info(struct backend *b, struct backend_info *info)
{
	struct mem *m = b->priv;
	uint64_t i, n = 0;

	g_rw_lock_reader_lock(&m->lock);
	for (i = 0; i < (m->cap_blocks + 63) / 64; i++)
		n += (uint64_t)__builtin_popcountll(atomic_load(&m->bits[i]));
	g_strlcpy(info->format, "mem", sizeof(info->format));
	info->size = m->size;
	info->allocated = n << m->blkbits;
	g_rw_lock_reader_unlock(&m->lock);
	dio_engine_get_stats(&m->dio, info);
	return 0;
}

const struct backend_ops mem_backend_ops = {
	.name = "mem",
	.open = mem_open,
	.close = mem_close,
	.get_size = mem_get_size,
	.direct_IO_bvec = mem_direct_IO_bvec,
	.discard = mem_discard,
	.write_zeroes = mem_discard,
	.resize = mem_resize,
	.map = mem_map,
	.info = mem_info,
};

void mem_backend_get_stats(struct backend *b, struct mem_backend_stats *st)
{
	struct mem *m = b->priv;

	g_assert(b->ops == &mem_backend_ops);
	g_mutex_lock(&m->stats_lock);
	*st = m->stats;
	g_mutex_unlock(&m->stats_lock);
}

void mem_backend_reset_stats(struct backend *b)
{
	struct mem *m = b->priv;

	g_assert(b->ops == &mem_backend_ops);
	g_mutex_lock(&m->stats_lock);
	memset(&m->stats, 0, sizeof(m->stats));
	g_mutex_unlock(&m->stats_lock);
}

/* Copy between buf and logical [pos, pos + len) of the store.  0 or
 * -EINVAL. */
static int mem_copy(struct backend *b, uint64_t pos, void *buf, size_t len,
		    bool to_store)
{
	struct mem *m;
	uint64_t blk;
	char *p = buf;
	int ret = 0;

	if (!b || b->ops != &mem_backend_ops)
		return -EINVAL;
	m = b->priv;
	blk = UINT64_C(1) << m->blkbits;
	if (to_store)
		g_rw_lock_writer_lock(&m->lock);
	else
		g_rw_lock_reader_lock(&m->lock);
	if (pos > m->size || len > m->size - pos) {
		ret = -EINVAL;
		goto out_unlock;
	}
	while (len) {
		uint64_t off = pos & (blk - 1);
		size_t n = (size_t)(blk - off < len ? blk - off : len);
		uint64_t pblock = mem_phys_block(m, pos >> m->blkbits);
		char *s = m->store + (pblock << m->blkbits) + off;

		if (to_store) {
			memcpy(s, p, n);
			mem_set_bit(m, pblock);
		} else {
			memcpy(p, s, n);
		}
		p += n;
		pos += n;
		len -= n;
	}
out_unlock:
	if (to_store)
		g_rw_lock_writer_unlock(&m->lock);
	else
		g_rw_lock_reader_unlock(&m->lock);
	return ret;
}

int mem_backend_peek(struct backend *b, uint64_t pos, void *buf, size_t len)
{
	return mem_copy(b, pos, buf, len, false);
}

int mem_backend_poke(struct backend *b, uint64_t pos, const void *buf,
		     size_t len)
{
	return mem_copy(b, pos, (void *)buf, len, true);
}

bool mem_backend_block_written(struct backend *b, uint64_t pos)
{
	struct mem *m = b->priv;
	bool written = false;

	g_assert(b->ops == &mem_backend_ops);
	g_rw_lock_reader_lock(&m->lock);
	if ((pos >> m->blkbits) < m->cap_blocks)
		written = mem_test_bit(m, mem_phys_block(m, pos >> m->blkbits));
	g_rw_lock_reader_unlock(&m->lock);
	return written;
}
