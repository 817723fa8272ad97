/* SPDX-License-Identifier: MIT */
/*
 * Transactions (FORMAT.md section 7): seal the open transaction, move
 * dirty pages to new blocks, apply reference changes, write the pages,
 * fdatasync, write the other superblock, fdatasync.  And the thread that
 * commits every few seconds.
 *
 * A failure after the seal leaves memory ahead of the disk, so the image
 * is marked failed: writes and flushes return -EIO until it is reopened,
 * and the disk keeps the last durable generation.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Blocks reserved for the map and volume pages of one commit. */
struct page_pool {
	GArray *ext;			/* struct cow_extent */
	guint idx;			/* next extent */
	uint64_t off;			/* next block in it */
	GArray *refops;			/* where references are queued */
};

static int pool_alloc_page(void *opaque, uint64_t *pbn)
{
	struct page_pool *p = opaque;
	struct cow_extent *e;

	if (p->idx >= p->ext->len)
		return -ENOSPC;	/* sized from nr_dirty: a bug */
	e = &g_array_index(p->ext, struct cow_extent, p->idx);
	*pbn = e->pbn + p->off;
	if (++p->off == e->len) {
		p->idx++;
		p->off = 0;
	}
	return 0;
}

static int pool_ref(void *opaque, uint64_t pbn, int delta)
{
	struct page_pool *p = opaque;
	struct cow_refop op = { pbn, delta };

	g_array_append_val(p->refops, op);
	return 0;
}

/* Return the pool's unused blocks. */
static void pool_release(struct cow_image *img, struct page_pool *p)
{
	guint i;

	for (i = p->idx; i < p->ext->len; i++) {
		struct cow_extent *e = &g_array_index(p->ext, struct cow_extent,
						      i);

		cow_alloc_unreserve(&img->alloc, e->pbn + (i == p->idx ? p->off : 0),
				    e->len - (i == p->idx ? p->off : 0));
	}
	g_array_set_size(p->ext, 0);
	p->idx = 0;
	p->off = 0;
}

/* Blocks in the pool not handed out yet. */
static uint64_t pool_left(const struct page_pool *p)
{
	uint64_t n = 0;
	guint i;

	for (i = p->idx; i < p->ext->len; i++)
		n += g_array_index(p->ext, struct cow_extent, i).len;
	return n - p->off;
}

/* Upper bound of the map and volume pages a seal writes.  map_lock. */
static uint64_t pages_needed(struct cow_image *img)
{
	/* The volume entry update dirties one path of the volume tree. */
	return img->map.nr_dirty + img->voltree.nr_dirty + img->voltree.height;
}

/* Put the volume entry (with its map's new root) into the volume tree.
 * map_lock held; the entry's leaf is loaded (open found it). */
static void update_volume_entry(struct cow_image *img)
{
	struct cow_load ld = { 0 };
	struct cow_node *leaf = NULL;

	cow_tree_root_ptr(&img->map, &img->vol.map_root);
	cow_tree_find(&img->voltree, img->vol.id, false, &ld, &leaf, NULL);
	g_assert(leaf);
	cow_vol_set(leaf->page, cow_leaf_index(leaf, img->vol.id), &img->vol);
	cow_tree_changed(&img->voltree, leaf, 0);
}

/*
 * Seal the open transaction gen: map and volume pages get new blocks from
 * pool and are encoded into out; the refops are taken; the epoch moves on.
 * map_lock held.  Returns the volume tree's root in *vroot.
 */
static int seal(struct cow_image *img, uint64_t gen, struct page_pool *pool,
		GArray *out, GArray **ops, struct cow_ptr *vroot)
{
	int ret;

	pool->refops = img->refops;
	ret = cow_tree_assign(&img->map, gen, pool_alloc_page, pool_ref, pool);
	if (ret < 0)
		return ret;
	cow_tree_write(&img->map, gen, out);
	update_volume_entry(img);
	ret = cow_tree_assign(&img->voltree, gen, pool_alloc_page, pool_ref,
			      pool);
	if (ret < 0)
		return ret;
	cow_tree_write(&img->voltree, gen, out);
	cow_tree_root_ptr(&img->voltree, vroot);
	*ops = img->refops;
	img->refops = g_array_new(FALSE, FALSE, sizeof(struct cow_refop));
	img->changes = 0;
	g_mutex_lock(&img->epoch_lock);
	img->epoch = gen + 1;
	g_mutex_unlock(&img->epoch_lock);
	return 0;
}

static gint wpage_cmp(gconstpointer a, gconstpointer b)
{
	const struct cow_wpage *x = a, *y = b;

	return x->pbn < y->pbn ? -1 : x->pbn > y->pbn;
}

/* pwritev all of iov at off: 0 or -errno (a short write is -ENOSPC). */
static int pwritev_all(int fd, struct iovec *iov, int n, off_t off)
{
	while (n > 0) {
		ssize_t w = pwritev(fd, iov, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -ENOSPC;
		off += w;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Write the pages, sorted, in runs of adjacent blocks. */
static int write_pages(struct cow_image *img, GArray *pages)
{
	struct iovec *iov = g_new(struct iovec, MIN(pages->len, IOV_MAX) + 1);
	guint i = 0, j;
	int ret = 0;

	g_array_sort(pages, wpage_cmp);
	while (i < pages->len && !ret) {
		struct cow_wpage *w = &g_array_index(pages, struct cow_wpage, i);
		int n = 0;

		for (j = i; j < pages->len && n < IOV_MAX; j++, n++) {
			struct cow_wpage *x = &g_array_index(pages,
							     struct cow_wpage, j);

			if (x->pbn != w->pbn + (uint64_t)n)
				break;
			iov[n] = (struct iovec){ x->buf, COW_BLOCK_SIZE };
		}
		ret = pwritev_all(img->meta.fd, iov, n,
				  (off_t)(w->pbn << COW_BLOCK_SHIFT));
		i = j;
	}
	g_free(iov);
	return ret;
}

static void free_pages(GArray *pages)
{
	guint i;

	for (i = 0; i < pages->len; i++)
		free(g_array_index(pages, struct cow_wpage, i).buf);
	g_array_free(pages, TRUE);
}

/* Make the file at least nr_blocks long (unreferenced tail blocks may
 * never have been written).  commit_lock held. */
static int cover_file(struct cow_image *img, uint64_t nr_blocks)
{
	struct stat st;

	if (img->file_blocks >= nr_blocks)
		return 0;
	/* Preallocation (alloc.c) may have made it longer: never shrink. */
	if (fstat(img->meta.fd, &st) < 0)
		return -errno;
	img->file_blocks = (uint64_t)st.st_size >> COW_BLOCK_SHIFT;
	if (img->file_blocks >= nr_blocks)
		return 0;
	if (ftruncate(img->meta.fd, (off_t)(nr_blocks << COW_BLOCK_SHIFT)) < 0)
		return -errno;
	img->file_blocks = nr_blocks;
	return 0;
}

static int sync_file(struct cow_image *img)
{
	return fdatasync(img->meta.fd) < 0 ? -errno : 0;
}

/* Write sb into its slot (generation % 2). */
static int write_superblock(struct cow_image *img, const struct cow_sb *sb)
{
	uint8_t *blk = cow_page_alloc();
	struct iovec iov = { blk, COW_BLOCK_SIZE };
	int ret;

	cow_sb_encode(sb, blk);
	ret = pwritev_all(img->meta.fd, &iov, 1,
			  (off_t)((uint64_t)sb->slot << COW_BLOCK_SHIFT));
	free(blk);
	return ret;
}

/* Everything after the seal: refcounts, pages, superblock.  commit_lock
 * held. */
static int commit_sealed(struct cow_image *img, uint64_t gen, GArray *pages,
			 GArray *ops, const struct cow_ptr *vroot)
{
	struct cow_err err = { "" };
	struct cow_sb sb = img->sb;
	int ret;

	ret = cow_alloc_apply(&img->alloc, (struct cow_refop *)ops->data,
			      ops->len, gen, &err);
	if (!ret)
		ret = cow_alloc_commit(&img->alloc, gen, pages,
				       &sb.refcount_root, &sb.nr_blocks, &err);
	if (ret < 0) {
		g_warning("%s: commit of generation %llu: %s", img->meta.path,
			  (unsigned long long)gen, err.msg);
		return ret;
	}
	sb.generation = gen;
	sb.slot = (uint32_t)(gen % COW_NR_SLOTS);
	sb.volume_root = *vroot;
	sb.commit_time = (uint64_t)time(NULL);
	cow_test_point(COW_TEST_SEALED);
	ret = cover_file(img, sb.nr_blocks);
	if (!ret)
		ret = write_pages(img, pages);
	if (!ret) {
		cow_test_point(COW_TEST_META_WRITTEN);
		ret = sync_file(img);
	}
	if (!ret) {
		cow_test_point(COW_TEST_META_DURABLE);
		ret = write_superblock(img, &sb);
	}
	if (!ret) {
		cow_test_point(COW_TEST_SB_WRITTEN);
		ret = sync_file(img);
	}
	if (ret < 0) {
		g_warning("%s: commit of generation %llu failed: %s; the image keeps generation %llu and refuses writes until reopened",
			  img->meta.path, (unsigned long long)gen,
			  g_strerror(-ret),
			  (unsigned long long)img->sb.generation);
		return ret;
	}
	img->sb = sb;
	atomic_store(&img->committed_gen, gen);
	atomic_fetch_add(&img->commits, 1);
	cow_test_point(COW_TEST_COMMITTED);
	return 0;
}

int cow_commit_open(struct cow_image *img)
{
	struct cow_sb sb = img->sb;
	int ret;

	sb.generation++;
	sb.slot = (uint32_t)(sb.generation % COW_NR_SLOTS);
	sb.commit_time = (uint64_t)time(NULL);
	ret = write_superblock(img, &sb);
	if (!ret)
		ret = sync_file(img);
	if (ret < 0) {
		g_warning("%s: writing the superblock at open: %s",
			  img->meta.path, g_strerror(-ret));
		return ret;
	}
	img->sb = sb;
	atomic_store(&img->committed_gen, sb.generation);
	img->epoch = sb.generation + 1;
	cow_alloc_durable(&img->alloc, sb.generation, img->epoch);
	return 0;
}

int cow_commit(struct cow_image *img)
{
	struct page_pool pool = { 0 };
	GArray *pages, *ops = NULL;
	struct cow_err err = { "" };
	struct cow_ptr vroot;
	uint64_t gen, need;
	bool sealing = false;
	int ret = 0;

	g_mutex_lock(&img->commit_lock);
	if (atomic_load(&img->failed)) {
		g_mutex_unlock(&img->commit_lock);
		return -EIO;
	}
	gen = atomic_load(&img->committed_gen) + 1;
	pool.ext = g_array_new(FALSE, FALSE, sizeof(struct cow_extent));
	pages = g_array_new(FALSE, FALSE, sizeof(struct cow_wpage));
	/* Reserve blocks for the map and volume pages first: the seal runs
	 * under map_lock and must not read refcount pages. */
	g_mutex_lock(&img->map_lock);
	while (img->changes && (need = pages_needed(img)) > pool_left(&pool)) {
		g_mutex_unlock(&img->map_lock);
		ret = cow_alloc_reserve(&img->alloc, need - pool_left(&pool),
					pool.ext, &err);
		g_mutex_lock(&img->map_lock);
		if (ret < 0)
			break;
	}
	if (!ret && img->changes) {
		sealing = true;
		ret = seal(img, gen, &pool, pages, &ops, &vroot);
	}
	g_mutex_unlock(&img->map_lock);
	pool_release(img, &pool);
	if (ret < 0 && !sealing) {
		/* Nothing was sealed: the open transaction stays. */
		g_warning("%s: commit: reserving blocks: %s", img->meta.path,
			  err.msg[0] ? err.msg : g_strerror(-ret));
		goto out;
	}
	if (!sealing)
		goto out;	/* nothing changed */
	if (!ret)
		ret = commit_sealed(img, gen, pages, ops, &vroot);
	if (ret < 0) {
		atomic_store(&img->failed, true);
		ret = -EIO;
		goto out;
	}
	cow_alloc_durable(&img->alloc, gen, cow_epoch_oldest(img));
out:
	if (ops)
		g_array_free(ops, TRUE);
	free_pages(pages);
	g_array_free(pool.ext, TRUE);
	g_mutex_unlock(&img->commit_lock);
	return ret;
}

/* ---- the periodic committer ---- */

static gpointer committer_main(gpointer opaque)
{
	struct cow_image *img = opaque;

	g_mutex_lock(&img->committer_lock);
	while (!img->committer_stop) {
		unsigned int ms = img->commit_ms;

		if (ms == 0)
			g_cond_wait(&img->committer_cond, &img->committer_lock);
		else if (!img->commit_soon)
			g_cond_wait_until(&img->committer_cond,
					  &img->committer_lock,
					  g_get_monotonic_time() +
					  (gint64)ms * 1000);
		if (img->committer_stop || ms == 0 || img->commit_ms != ms)
			continue;
		img->commit_soon = false;
		g_mutex_unlock(&img->committer_lock);
		cow_commit(img);
		g_mutex_lock(&img->committer_lock);
	}
	g_mutex_unlock(&img->committer_lock);
	return NULL;
}

void cow_committer_start(struct cow_image *img)
{
	img->committer = g_thread_new("cow-commit", committer_main, img);
}

void cow_committer_kick(struct cow_image *img)
{
	g_mutex_lock(&img->committer_lock);
	if (!img->commit_soon && img->commit_ms) {
		img->commit_soon = true;
		g_cond_broadcast(&img->committer_cond);
	}
	g_mutex_unlock(&img->committer_lock);
}

void cow_committer_stop(struct cow_image *img)
{
	if (!img->committer)
		return;
	g_mutex_lock(&img->committer_lock);
	img->committer_stop = true;
	g_cond_broadcast(&img->committer_cond);
	g_mutex_unlock(&img->committer_lock);
	g_thread_join(img->committer);
	img->committer = NULL;
}

void cow_set_commit_interval(struct backend *b, unsigned int ms)
{
	struct cow_image *img = b->priv;

	g_mutex_lock(&img->committer_lock);
	img->commit_ms = ms;
	g_cond_broadcast(&img->committer_cond);
	g_mutex_unlock(&img->committer_lock);
}
