/* SPDX-License-Identifier: MIT */
/*
 * The cow backend's ops and its I/O path over the generic engine
 * (backends/dio.h).  Everything the engine does here is in whole 4 KiB
 * blocks: blkbits and dev_blkbits are both 12, so partial blocks go
 * through the engine's bounce buffer and read-modify-write.
 *
 * A request (struct cow_req):
 *  1. enters the read epoch, loads and pins the block-map leaves of its
 *     range (reading pages here, on the submitting thread), and for a
 *     write reserves one new block per logical block (alloc.h);
 *  2. get_block maps reads through the map (holes: zeros without I/O)
 *     and writes to the reserved blocks, registering every block in the
 *     inflight table (pbn -> expected checksum, or the write's record);
 *  3. submit_io (ours, so that we see the memory of every I/O): a write's
 *     checksums are computed over exactly the memory being written - the
 *     request's pool pages or the engine's bounce buffer, the daemon's own
 *     copy that nothing else changes (the article's stable pages) - then
 *     the I/Os go to the container's store (store.c);
 *  4. when an I/O completes, a read's blocks are verified (a mismatch
 *     fails the request with -EIO, is counted and logged with both
 *     addresses), a write's new mappings are installed in the map before
 *     the engine releases the block range, so a read-modify-write that
 *     waited for the range sees them;
 *  5. end_io gives back what was not used and leaves the epoch.
 * A write that fails may have installed some of its blocks (block-device
 * semantics: the range is undefined after a failed write).
 *
 * Threads: direct_IO_bvec on any thread (it may read map or refcount
 * pages: see cow_int.h); I/O completions on the store's completion thread
 * (no I/O there: the leaves are pinned and loaded); flush, discard,
 * write_zeroes, map, resize, info on worker threads.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/dio.h"
#include "backends/cow/create.h"

#define COW_MAX_RUN 256u		/* blocks per get_block answer */
#define COW_ZERO_CHUNK ((size_t)1 << 20)

struct cow_req {
	struct cow_volume *v;
	bool write;
	uint64_t first_lbn, nr_lbn;	/* whole blocks the engine touches */
	uint64_t first_leaf;		/* lbn / COW_MAP_ENTRIES of leaves[0] */
	unsigned int nr_leaves;
	struct cow_node **leaves;	/* pinned; NULL: absent (reads) */
	struct cow_epoch *epoch;
	GArray *ext;			/* writes: reserved extents */
	struct cow_wblk *wblk;		/* writes: [nr_lbn] */
	GArray *reads;			/* pbns registered by reads */
};

/* One I/O on its way through the store. */
struct cow_io {
	struct dio_io *io;
	struct cow_volume *v;
};

/* ---- the inflight table ---- */

/* Register a block a read expects to find with csum.  inflight_lock. */
static void inflight_read_add(struct cow_container *c, uint64_t pbn,
			      uint64_t lbn, uint64_t csum)
{
	struct cow_inflight *e = g_hash_table_lookup(c->inflight, &pbn);

	if (!e) {
		e = g_new0(struct cow_inflight, 1);
		e->pbn = pbn;
		e->csum = csum;
		e->lbn = lbn;
		g_hash_table_insert(c->inflight, &e->pbn, e);
	}
	e->users++;
}

/* Drop e when nothing uses it.  inflight_lock. */
static void inflight_put(struct cow_container *c, struct cow_inflight *e)
{
	if (e->users == 0 && !e->wblk)
		g_hash_table_remove(c->inflight, &e->pbn);
}

/* ---- preparing a request ---- */

static void req_free(struct cow_req *req)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	unsigned int i;

	if (req->reads) {
		g_mutex_lock(&c->inflight_lock);
		for (i = 0; i < req->reads->len; i++) {
			uint64_t pbn = g_array_index(req->reads, uint64_t, i);
			struct cow_inflight *e =
				g_hash_table_lookup(c->inflight, &pbn);

			e->users--;
			inflight_put(c, e);
		}
		g_mutex_unlock(&c->inflight_lock);
		g_array_free(req->reads, TRUE);
	}
	g_mutex_lock(&c->map_lock);
	for (i = 0; i < req->nr_leaves; i++)
		if (req->leaves[i])
			req->leaves[i]->pins--;
	g_mutex_unlock(&c->map_lock);
	if (req->ext)
		g_array_free(req->ext, TRUE);
	cow_epoch_leave(c, req->epoch);
	g_free(req->leaves);
	g_free(req->wblk);
	g_free(req);
}

/* Load and pin the map leaves of the request's range (created empty for
 * writes).  May read pages. */
static int req_pin_leaves(struct cow_req *req)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	struct cow_err err = { "" };
	unsigned int i;
	int ret = 0;

	req->first_leaf = req->first_lbn / COW_MAP_ENTRIES;
	req->nr_leaves = (unsigned int)((req->first_lbn + req->nr_lbn - 1) /
					COW_MAP_ENTRIES - req->first_leaf + 1);
	req->leaves = g_new0(struct cow_node *, req->nr_leaves);
	g_mutex_lock(&c->map_lock);
	for (i = 0; i < req->nr_leaves && !ret; i++) {
		uint64_t key = (req->first_leaf + i) * COW_MAP_ENTRIES;

		ret = cow_tree_find_locked(&v->map, &c->map_lock, key,
					   req->write, &req->leaves[i], &err);
		if (!ret && req->leaves[i])
			req->leaves[i]->pins++;
	}
	g_mutex_unlock(&c->map_lock);
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

/* Reserve one new block per logical block of a write. */
static int req_reserve(struct cow_req *req)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	struct cow_err err = { "" };
	uint64_t k = 0, j;
	unsigned int i;
	int ret;

	req->ext = g_array_new(FALSE, FALSE, sizeof(struct cow_extent));
	ret = cow_alloc_reserve(&c->alloc, req->nr_lbn, req->ext, &err);
	if (ret < 0) {
		g_warning("%s: allocating %llu blocks: %s", c->meta.path,
			  (unsigned long long)req->nr_lbn,
			  err.msg[0] ? err.msg : g_strerror(-ret));
		return ret == -EUCLEAN ? -EIO : ret;
	}
	req->wblk = g_new0(struct cow_wblk, req->nr_lbn);
	for (i = 0; i < req->ext->len; i++) {
		struct cow_extent *e = &g_array_index(req->ext,
						      struct cow_extent, i);

		for (j = 0; j < e->len; j++)
			req->wblk[k++].pbn = e->pbn + j;
	}
	return 0;
}

/* Give back a write's blocks that were not installed and withdraw its
 * registrations. */
static void req_write_release(struct cow_req *req)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	uint64_t i;

	g_mutex_lock(&c->inflight_lock);
	for (i = 0; i < req->nr_lbn; i++) {
		struct cow_wblk *w = &req->wblk[i];
		struct cow_inflight *e;

		if (!w->registered)
			continue;
		e = g_hash_table_lookup(c->inflight, &w->pbn);
		e->wblk = NULL;
		inflight_put(c, e);
		w->registered = false;
	}
	g_mutex_unlock(&c->inflight_lock);
	for (i = 0; i < req->nr_lbn; i++)
		if (!req->wblk[i].installed)
			cow_alloc_unreserve(&c->alloc, req->wblk[i].pbn, 1);
}

/* ---- the engine's callbacks ---- */

/* The leaf of lbn pinned by the request (NULL: absent). */
static struct cow_node *req_leaf(struct cow_req *req, uint64_t lbn)
{
	return req->leaves[lbn / COW_MAP_ENTRIES - req->first_leaf];
}

/* Map a run of reads: holes, or data in consecutive blocks. */
static int get_block_read(struct cow_req *req, uint64_t lbn, uint64_t nb,
			  struct dio_map *map)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	uint64_t pbns[COW_MAX_RUN], csums[COW_MAX_RUN], first_pbn = 0, n;
	bool hole = true;

	nb = MIN(nb, COW_MAX_RUN);
	g_mutex_lock(&c->map_lock);
	for (n = 0; n < nb; n++) {
		struct cow_node *leaf = req_leaf(req, lbn + n);
		uint64_t pbn = 0, csum = 0;

		if (leaf)
			cow_map_get(leaf->page, cow_leaf_index(leaf, lbn + n),
				    &pbn, &csum);
		if (n == 0) {
			hole = pbn == 0;
			first_pbn = pbn;
		} else if (hole != (pbn == 0) ||
			   (!hole && pbn != first_pbn + n)) {
			break;
		}
		pbns[n] = pbn;
		csums[n] = csum;
	}
	g_mutex_unlock(&c->map_lock);
	map->len = n << COW_BLOCK_SHIFT;
	map->hole = hole;
	map->phys = first_pbn << COW_BLOCK_SHIFT;
	if (hole)
		return 0;
	if (!req->reads)
		req->reads = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	g_array_append_vals(req->reads, pbns, (guint)n);
	g_mutex_lock(&c->inflight_lock);
	for (uint64_t k = 0; k < n; k++)
		inflight_read_add(c, pbns[k], lbn + k, csums[k]);
	g_mutex_unlock(&c->inflight_lock);
	return 0;
}

/* Map a run of writes onto the reserved blocks. */
static int get_block_write(struct cow_req *req, uint64_t lbn, uint64_t nb,
			   struct dio_map *map)
{
	struct cow_volume *v = req->v;
	struct cow_container *c = v->c;
	struct cow_wblk *w = &req->wblk[lbn - req->first_lbn];
	uint64_t n;

	for (n = 1; n < MIN(nb, COW_MAX_RUN); n++)
		if (w[n].pbn != w[0].pbn + n)
			break;
	g_mutex_lock(&c->inflight_lock);
	for (uint64_t k = 0; k < n; k++) {
		struct cow_inflight *e = g_new0(struct cow_inflight, 1);

		e->pbn = w[k].pbn;
		e->lbn = lbn + k;
		e->wblk = &w[k];
		g_assert(!g_hash_table_contains(c->inflight, &e->pbn));
		g_hash_table_insert(c->inflight, &e->pbn, e);
		w[k].registered = true;
	}
	g_mutex_unlock(&c->inflight_lock);
	map->phys = w[0].pbn << COW_BLOCK_SHIFT;
	map->len = n << COW_BLOCK_SHIFT;
	map->hole = false;
	return 0;
}

/* get_block for the engine (dio.h): submitting or completion thread. */
static int cow_get_block(struct backend *b, void *map_private, uint64_t pos,
			 uint64_t len, bool create, struct dio_map *map)
{
	struct cow_req *req = map_private;
	uint64_t lbn = pos >> COW_BLOCK_SHIFT;
	uint64_t nb = (len + COW_BLOCK_SIZE - 1) >> COW_BLOCK_SHIFT;

	g_assert(!(pos & (COW_BLOCK_SIZE - 1)) && lbn >= req->first_lbn &&
		 lbn + nb <= req->first_lbn + req->nr_lbn);
	map->fd = -1;			/* our submit_io: the store */
	if (create)
		return get_block_write(req, lbn, nb, map);
	return get_block_read(req, lbn, nb, map);
}

/* Check a read I/O's blocks against what the map said: 0 or -EIO. */
static long verify_read(struct cow_volume *v, struct dio_io *io)
{
	struct cow_container *c = v->c;
	uint64_t nb = io->len >> COW_BLOCK_SHIFT, pbn = io->phys >> COW_BLOCK_SHIFT;
	uint64_t *got = g_new(uint64_t, nb);
	long res = 0;

	cow_csum_iov(c->meta.csum_type, io->iov, io->nr_iov, nb, got);
	g_mutex_lock(&c->inflight_lock);
	for (uint64_t k = 0; k < nb; k++) {
		uint64_t key = pbn + k;
		struct cow_inflight *e = g_hash_table_lookup(c->inflight,
							     &key);

		if (e && e->csum == got[k])
			continue;
		atomic_fetch_add(&v->checksum_errors, 1);
		g_warning("%s: volume %s: checksum mismatch in logical block %llu (byte %llu), physical block %llu: expected %016llx, read %016llx",
			  c->meta.path, cow_volume_label(&v->vol),
			  (unsigned long long)(e ? e->lbn : 0),
			  (unsigned long long)(e ? e->lbn << COW_BLOCK_SHIFT : 0),
			  (unsigned long long)key,
			  (unsigned long long)(e ? e->csum : 0),
			  (unsigned long long)got[k]);
		res = -EIO;
	}
	g_mutex_unlock(&c->inflight_lock);
	g_free(got);
	return res;
}

/* Install a completed write I/O's blocks in the map.  Completion
 * thread: the leaves are pinned, nothing is read. */
static void install_write(struct cow_volume *v, struct dio_io *io)
{
	struct cow_container *c = v->c;
	uint64_t nb = io->len >> COW_BLOCK_SHIFT, pbn = io->phys >> COW_BLOCK_SHIFT;
	struct cow_inflight **e = g_new(struct cow_inflight *, nb);
	uint64_t k, changes;

	g_mutex_lock(&c->inflight_lock);
	for (k = 0; k < nb; k++) {
		uint64_t key = pbn + k;

		e[k] = g_hash_table_lookup(c->inflight, &key);
		g_assert(e[k] && e[k]->wblk);
	}
	g_mutex_unlock(&c->inflight_lock);

	g_mutex_lock(&c->map_lock);
	for (k = 0; k < nb; k++) {
		struct cow_wblk *w = e[k]->wblk;
		struct cow_load ld = { 0 };
		struct cow_node *leaf = NULL;
		struct cow_refop op;
		uint64_t old, old_csum;
		unsigned int i;

		cow_tree_find(&v->map, e[k]->lbn, false, &ld, &leaf, NULL);
		g_assert(leaf && leaf->pins);
		i = cow_leaf_index(leaf, e[k]->lbn);
		cow_map_get(leaf->page, i, &old, &old_csum);
		cow_tree_will_change(&v->map, leaf);
		cow_map_set(leaf->page, i, w->pbn, w->csum);
		cow_tree_changed(&v->map, leaf, old ? 0 : 1);
		op = (struct cow_refop){ w->pbn, +1 };
		g_array_append_val(c->refops, op);
		if (old) {
			op = (struct cow_refop){ old, -1 };
			g_array_append_val(c->refops, op);
		}
		c->changes++;
		w->installed = true;
	}
	changes = c->changes;
	g_mutex_unlock(&c->map_lock);
	g_free(e);
	if (changes >= COW_COMMIT_SOON_CHANGES)
		cow_committer_kick(c);
}

/* An I/O completed (the store's completion thread, or inline). */
static void cow_io_done(void *opaque, ssize_t res)
{
	struct cow_io *ci = opaque;
	struct dio_io *io = ci->io;
	struct cow_volume *v = ci->v;
	struct cow_container *c = v->c;

	g_free(ci);
	if (res == (long)io->len) {
		if (!io->write) {
			res = verify_read(v, io);
			if (!res)
				res = (long)io->len;
		} else {
			cow_test_point(COW_TEST_DATA_WRITTEN);
			install_write(v, io);
		}
	} else if (res >= 0 && !io->write) {
		atomic_fetch_add(&v->checksum_errors, 1);
		g_warning("%s: truncated image: data block %llu is past the end of the file",
			  c->meta.path,
			  (unsigned long long)((io->phys + (uint64_t)res) >>
					       COW_BLOCK_SHIFT));
		res = -EIO;
	}
	dio_io_complete(io, res);
}

/* submit_io for the engine: checksum writes, then the store. */
static void cow_submit_io(struct backend *b, struct dio_io **ios, int n)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	int i;

	for (i = 0; i < n; i++) {
		struct dio_io *io = ios[i];
		struct cow_io *ci = g_new0(struct cow_io, 1);

		if (io->write) {
			uint64_t nb = io->len >> COW_BLOCK_SHIFT;
			uint64_t pbn = io->phys >> COW_BLOCK_SHIFT;
			uint64_t *csum = g_new(uint64_t, nb);

			cow_csum_iov(c->meta.csum_type, io->iov, io->nr_iov,
				     nb, csum);
			g_mutex_lock(&c->inflight_lock);
			for (uint64_t k = 0; k < nb; k++) {
				uint64_t key = pbn + k;
				struct cow_inflight *e =
					g_hash_table_lookup(c->inflight, &key);

				e->csum = csum[k];
				e->wblk->csum = csum[k];
			}
			g_mutex_unlock(&c->inflight_lock);
			g_free(csum);
		}
		ci->io = io;
		ci->v = v;
		cow_store_submit(c->meta.store, io->write, io->iov, io->nr_iov,
				 io->phys, cow_io_done, ci);
	}
}

/* end_io for the engine: release what the request held. */
static ssize_t cow_end_io(struct kiocb *iocb, void *priv, ssize_t res)
{
	struct cow_req *req = priv;

	if (req->write)
		req_write_release(req);
	req_free(req);
	return res;
}

/* ---- direct_IO_bvec ---- */

/* Extend a growable volume to cover end.  0, -EFBIG past the largest
 * size (a size no open could accept is never stored), or -errno. */
static int cow_grow(struct cow_volume *v, uint64_t end)
{
	struct cow_container *c = v->c;
	uint64_t size;
	int ret = 0;

	if (end > cow_max_volume_size())
		return -EFBIG;
	size = (end + COW_BLOCK_SIZE - 1) & ~(uint64_t)(COW_BLOCK_SIZE - 1);

	g_mutex_lock(&c->map_lock);
	if (size > v->vol.size) {
		ret = cow_tree_grow(&v->map, size >> COW_BLOCK_SHIFT);
		if (!ret) {
			v->vol.size = size;
			v->map.key_limit = size >> COW_BLOCK_SHIFT;
			atomic_store(&v->size, size);
			v->entry_dirty = true;
			c->changes++;
		}
	}
	g_mutex_unlock(&c->map_lock);
	return ret;
}

/* Read or write (backend.h): checks, then the engine.  Any thread; may
 * read metadata pages that are not cached yet. */
static ssize_t cow_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	size_t count = iov_iter_count(iocb->ki_iter);
	uint64_t pos = iocb->ki_pos, size = atomic_load(&v->size);
	bool write = iocb->ki_rw == DIOLOOP_WRITE;
	struct cow_req *req;
	struct dio_params p;
	int ret;

	if (count == 0)
		return 0;
	if (!write) {
		if (pos >= size)
			return 0;
		count = (size_t)MIN((uint64_t)count, size - pos);
	} else {
		if (v->rdonly)
			return -EROFS;
		if (atomic_load(&c->failed))
			return -EIO;
		if (pos > (uint64_t)INT64_MAX ||
		    count > (uint64_t)INT64_MAX - pos)
			return v->growable ? -EFBIG : -ENOSPC;
		if (pos + count > size) {
			if (!v->growable)
				return -ENOSPC;
			ret = cow_grow(v, pos + count);
			if (ret < 0)
				return ret;
		}
	}
	req = g_new0(struct cow_req, 1);
	req->v = v;
	req->write = write;
	req->first_lbn = pos >> COW_BLOCK_SHIFT;
	req->nr_lbn = ((pos + count + COW_BLOCK_SIZE - 1) >> COW_BLOCK_SHIFT) -
		      req->first_lbn;
	req->epoch = cow_epoch_enter(c);
	ret = req_pin_leaves(req);
	if (!ret && write)
		ret = req_reserve(req);
	if (ret < 0) {
		req_free(req);
		return ret;
	}
	p = (struct dio_params){
		.engine = &v->dio,
		.count = count,
		.blkbits = COW_BLOCK_SHIFT,
		.dev_blkbits = COW_BLOCK_SHIFT,
		.get_block = cow_get_block,
		.map_private = req,
		.submit_io = cow_submit_io,
		.end_io = cow_end_io,
		.end_io_private = req,
		.flags = DIO_SKIP_HOLES,
	};
	return blockdev_direct_IO_bvec(b, iocb, &p);
}

/* ---- flush, discard, write_zeroes, map, resize, info ---- */

/* Commit the open transaction: every write completed before is durable
 * after.  Worker thread. */
static int cow_flush(struct backend *b)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;

	if (v->rdonly)
		return 0;
	return cow_commit(c);
}

/* Make whole blocks [lbn, end) holes, under the range held exclusively.
 * Worker thread. */
static int punch_blocks(struct cow_volume *v, uint64_t lbn, uint64_t end)
{
	struct cow_container *c = v->c;
	struct cow_err err = { "" };
	int ret = 0;

	g_mutex_lock(&c->map_lock);
	while (lbn < end) {
		struct cow_node *leaf;
		uint64_t found, stop;

		ret = cow_tree_seek_locked(&v->map, &c->map_lock, lbn, end,
					   true, &found, &err);
		if (ret < 0 || found >= end)
			break;
		ret = cow_tree_find_locked(&v->map, &c->map_lock, found,
					   false, &leaf, &err);
		if (ret < 0)
			break;
		stop = MIN(end, leaf->first_key + COW_MAP_ENTRIES);
		for (lbn = found; lbn < stop; lbn++) {
			unsigned int i = cow_leaf_index(leaf, lbn);
			uint64_t pbn, csum;
			struct cow_refop op;

			cow_map_get(leaf->page, i, &pbn, &csum);
			if (!pbn)
				continue;
			cow_tree_will_change(&v->map, leaf);
			cow_map_set(leaf->page, i, 0, 0);
			cow_tree_changed(&v->map, leaf, -1);
			op = (struct cow_refop){ pbn, -1 };
			g_array_append_val(c->refops, op);
			c->changes++;
		}
		/* Let completions in between leaves. */
		g_mutex_unlock(&c->map_lock);
		g_mutex_lock(&c->map_lock);
	}
	g_mutex_unlock(&c->map_lock);
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

/* Holes for the whole blocks of [pos, pos + len), zeros written for the
 * partial ones.  Worker thread; the core clamped the range. */
static int cow_punch(struct backend *b, uint64_t pos, uint64_t len)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	uint64_t end = pos + len;
	uint64_t a = (pos + COW_BLOCK_SIZE - 1) >> COW_BLOCK_SHIFT;
	uint64_t z = end >> COW_BLOCK_SHIFT;
	struct range_lock rl;
	int ret;

	if (v->rdonly)
		return -EROFS;
	if (atomic_load(&c->failed))
		return -EIO;
	if (a >= z)
		return backend_write_zero_pages(b, pos, len);
	if (pos < a << COW_BLOCK_SHIFT) {
		ret = backend_write_zero_pages(b, pos,
					       (a << COW_BLOCK_SHIFT) - pos);
		if (ret < 0)
			return ret;
	}
	if (end > z << COW_BLOCK_SHIFT) {
		ret = backend_write_zero_pages(b, z << COW_BLOCK_SHIFT,
					       end - (z << COW_BLOCK_SHIFT));
		if (ret < 0)
			return ret;
	}
	/* Writes in flight on the range finish (and install) first; a
	 * read-modify-write never sees a half-punched range. */
	range_lock_init(&rl, a << COW_BLOCK_SHIFT, z << COW_BLOCK_SHIFT, true,
			NULL);
	range_lock_acquire_wait(&v->dio.range_locks, &rl);
	ret = punch_blocks(v, a, z);
	range_lock_release(&v->dio.range_locks, &rl);
	return ret;
}

/* The data or hole extent at pos.  Worker thread. */
static int cow_map(struct backend *b, uint64_t pos, uint64_t len,
		   struct backend_extent *ext)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	uint64_t lbn = pos >> COW_BLOCK_SHIFT;
	uint64_t end = (pos + len + COW_BLOCK_SIZE - 1) >> COW_BLOCK_SHIFT;
	struct cow_err err = { "" };
	struct cow_node *leaf;
	uint64_t pbn = 0, csum, next;
	int ret;

	g_mutex_lock(&c->map_lock);
	ret = cow_tree_find_locked(&v->map, &c->map_lock, lbn, false,
				   &leaf, &err);
	if (!ret && leaf)
		cow_map_get(leaf->page, cow_leaf_index(leaf, lbn), &pbn, &csum);
	if (!ret)
		ret = cow_tree_seek_locked(&v->map, &c->map_lock, lbn + 1,
					   end, pbn == 0, &next, &err);
	g_mutex_unlock(&c->map_lock);
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	ext->hole = pbn == 0;
	ext->len = MIN(next << COW_BLOCK_SHIFT, pos + len) - pos;
	return 0;
}

/* Change the volume's size (a multiple of 4096); shrinking frees what is
 * past the end.  Worker thread, nothing in flight. */
static int cow_resize(struct backend *b, uint64_t size)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	uint64_t old = atomic_load(&v->size);
	int ret;

	if (v->rdonly)
		return -EROFS;
	if (size % COW_BLOCK_SIZE)
		return -EINVAL;
	if (size >= old)
		return cow_grow(v, size);
	ret = punch_blocks(v, size >> COW_BLOCK_SHIFT, old >> COW_BLOCK_SHIFT);
	if (ret < 0)
		return ret;
	g_mutex_lock(&c->map_lock);
	v->vol.size = size;
	v->map.key_limit = size >> COW_BLOCK_SHIFT;
	atomic_store(&v->size, size);
	v->entry_dirty = true;
	c->changes++;
	g_mutex_unlock(&c->map_lock);
	return 0;
}

/* Format, logical size, and the container blocks in use.  Worker
 * thread. */
static int cow_info(struct backend *b, struct backend_info *info)
{
	struct cow_stats st;

	cow_get_stats(b, &st);
	g_strlcpy(info->format, "cow", sizeof(info->format));
	info->size = st.size;
	info->allocated = st.used_blocks << COW_BLOCK_SHIFT;
	dio_engine_get_stats(&((struct cow_volume *)b->priv)->dio, info);
	return 0;
}

/* The container's times, as its store keeps them (a remote store: the
 * server's).  Any thread; never blocks. */
static int cow_times(struct backend *b, struct backend_times *t)
{
	struct cow_volume *v = b->priv;

	return backend_times(v->c->meta.store, t);
}

/* A snapshot of the counters.  Any thread. */
void cow_get_stats(struct backend *b, struct cow_stats *st)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	struct cow_alloc_stats as;

	memset(st, 0, sizeof(*st));
	cow_alloc_get_stats(&c->alloc, &as);
	st->generation = atomic_load(&c->committed_gen);
	st->size = atomic_load(&v->size);
	g_mutex_lock(&c->map_lock);
	st->mapped_blocks = v->map.root->used;
	g_mutex_unlock(&c->map_lock);
	st->nr_blocks = as.nr_blocks;
	st->used_blocks = as.used;
	st->pinned_blocks = as.pinned;
	st->commits = atomic_load(&c->commits);
	st->csum_errors = atomic_load(&v->checksum_errors);
	st->meta_errors = atomic_load(&c->meta_errors);
	st->csum_type = c->meta.csum_type;
	st->failed = atomic_load(&c->failed);
}

/* Look lbn up in the map (cow.h).  Worker thread. */
int cow_map_block(struct backend *b, uint64_t lbn, uint64_t *pbn,
		  uint64_t *csum)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	struct cow_err err = { "" };
	struct cow_node *leaf = NULL;
	int ret = 0;

	*pbn = *csum = 0;
	g_mutex_lock(&c->map_lock);
	if (lbn < v->map.key_limit)
		ret = cow_tree_find_locked(&v->map, &c->map_lock, lbn,
					   false, &leaf, &err);
	if (!ret && leaf)
		cow_map_get(leaf->page, cow_leaf_index(leaf, lbn), pbn, csum);
	g_mutex_unlock(&c->map_lock);
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

/* ---- size, recognising images ---- */

/* The volume's logical size.  Any thread. */
static int64_t cow_get_size(struct backend *b)
{
	struct cow_volume *v = b->priv;

	return (int64_t)atomic_load(&v->size);
}

/* Recognise a cow image by either superblock's magic.  Any thread. */
bool cow_is_image(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ret;

	if (fd < 0)
		return false;
	ret = cow_is_image_fd(fd);
	close(fd);
	return ret;
}

/* The same for an open file (O_PATH too: read through a new open of
 * the same inode).  Any thread. */
bool cow_is_image_fd(int fd)
{
	char link[sizeof("/proc/self/fd/") + 12];
	uint8_t buf[2][16];
	bool ret = false;
	int rfd;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	rfd = open(link, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (rfd < 0)
		return false;
	if (pread(rfd, buf[0], 16, 0) == 16 && cow_sb_has_magic(buf[0]))
		ret = true;
	else if (pread(rfd, buf[1], 16, COW_BLOCK_SIZE) == 16 &&
		 cow_sb_has_magic(buf[1]))
		ret = true;
	close(rfd);
	return ret;
}

const struct backend_ops cow_backend_ops = {
	.name = "cow",
	.open = cow_open,
	.close = cow_close,
	.get_size = cow_get_size,
	.direct_IO_bvec = cow_direct_IO_bvec,
	.flush = cow_flush,
	.discard = cow_punch,
	.write_zeroes = cow_punch,
	.resize = cow_resize,
	.map = cow_map,
	.clone_range = cow_clone_range,
	.info = cow_info,
	.times = cow_times,
	.volumes = &cow_volume_ops,
	.stats = cow_stats,
	.describe = cow_describe,
	.probe = cow_probe,
	.create = cow_create,
	.on_stores = true,
	.create_align = COW_BLOCK_SIZE,
	.checksums = cow_checksum_names,
};
