/* SPDX-License-Identifier: MIT */
/*
 * Transactions (FORMAT.md section 7): seal the open transaction, move
 * dirty pages to new blocks, apply reference changes, write the pages,
 * flush the store, write the other superblock, flush the store.  And the
 * thread that commits every few seconds.
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Blocks reserved for the map and volume pages of one commit. */
struct page_pool {
	GArray *ext;			/* struct cow_extent */
	guint idx;			/* next extent */
	uint64_t off;			/* next block in it */
	GArray *refops;			/* where references are queued */
	GArray *drops;			/* where shared releases are queued */
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

/*
 * A block-map page that may be shared leaves its old location: both the
 * new copy and the old page (if other volumes still reference it) hold
 * references to its children, so +1 for each child of its content as last
 * written, then a drop of the old location (applied after every +1:
 * -1, and at 0, -1 for each child).  For a page no other volume
 * references, the drop frees it and gives the +1s back: the same counts
 * as a plain move.
 */
static int pool_release_shared(void *opaque, const struct cow_node *n,
			       uint64_t old_pbn, uint64_t old_gen,
			       const uint8_t *orig)
{
	struct page_pool *p = opaque;
	struct cow_drop d = {
		.pbn = old_pbn,
		.gen = old_gen,
		.first_key = n->first_key,
		.level = n->level,
		.page = cow_page_alloc(),
	};
	unsigned int i;

	memcpy(d.page, orig, COW_BLOCK_SIZE);
	for (i = 0; i < cow_tree_entries(COW_TREE_MAP, n->level); i++) {
		struct cow_ptr e;
		uint64_t csum;

		if (n->level > 0)
			cow_interior_get(orig, i, &e);
		else
			cow_map_get(orig, i, &e.pbn, &csum);
		if (e.pbn)
			pool_ref(p, e.pbn, +1);
	}
	g_array_append_val(p->drops, d);
	return 0;
}

/* Return the pool's unused blocks. */
static void pool_release(struct cow_container *c, struct page_pool *p)
{
	guint i;

	for (i = p->idx; i < p->ext->len; i++) {
		struct cow_extent *e = &g_array_index(p->ext, struct cow_extent,
						      i);

		cow_alloc_unreserve(&c->alloc, e->pbn + (i == p->idx ? p->off : 0),
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
static uint64_t pages_needed(struct cow_container *c)
{
	uint64_t n = c->voltree.nr_dirty;
	guint i;

	for (i = 0; i < c->vols->len; i++)
		n += ((struct cow_volume *)c->vols->pdata[i])->map.nr_dirty;
	/* Each volume entry updated (and a new one) dirties one path of
	 * the volume tree. */
	return n + (uint64_t)c->voltree.height * (c->vols->len + 2);
}

/* Put v's entry (with its map's new root) into the volume tree.
 * map_lock held; the entry's leaf is loaded (open found it). */
static void update_volume_entry(struct cow_container *c, struct cow_volume *v)
{
	struct cow_load ld = { 0 };
	struct cow_node *leaf = NULL;

	cow_tree_root_ptr(&v->map, &v->vol.map_root);
	cow_tree_find(&c->voltree, v->vol.id, false, &ld, &leaf, NULL);
	g_assert(leaf);
	cow_vol_set(leaf->page, cow_leaf_index(leaf, v->vol.id), &v->vol);
	cow_tree_changed(&c->voltree, leaf, 0);
	v->entry_dirty = false;
}

/* What a seal hands to the rest of the commit. */
struct sealed {
	GArray *ops;			/* struct cow_refop */
	GArray *drops;			/* struct cow_drop */
	struct cow_ptr vroot;		/* the volume tree's root */
	uint64_t next_volume_id;
};

/*
 * Seal the open transaction gen: every open volume's map pages and the
 * volume pages get new blocks from pool and are encoded into out; op (a
 * snapshot or a deletion) is carried out; the refops and drops are taken;
 * the epoch moves on.  map_lock held.
 */
static int seal(struct cow_container *c, uint64_t gen, struct page_pool *pool,
		GArray *out, struct cow_volop *op, struct sealed *sd)
{
	guint i;
	int ret;

	pool->refops = c->refops;
	pool->drops = c->drops;
	for (i = 0; i < c->vols->len; i++) {
		struct cow_volume *v = c->vols->pdata[i];

		if (!v->map.nr_dirty)
			continue;
		v->entry_dirty = true;
		ret = cow_tree_assign(&v->map, gen, pool_alloc_page, pool_ref,
				      pool_release_shared, pool);
		if (ret < 0)
			return ret;
		cow_tree_write(&v->map, gen, out);
	}
	if (op)
		cow_volop_apply(c, op, gen);
	for (i = 0; i < c->vols->len; i++) {
		struct cow_volume *v = c->vols->pdata[i];

		if (v->entry_dirty)
			update_volume_entry(c, v);
	}
	ret = cow_tree_assign(&c->voltree, gen, pool_alloc_page, pool_ref,
			      NULL, pool);
	if (ret < 0)
		return ret;
	cow_tree_write(&c->voltree, gen, out);
	cow_tree_root_ptr(&c->voltree, &sd->vroot);
	sd->next_volume_id = c->next_volume_id;
	sd->ops = c->refops;
	sd->drops = c->drops;
	c->refops = g_array_new(FALSE, FALSE, sizeof(struct cow_refop));
	c->drops = g_array_new(FALSE, FALSE, sizeof(struct cow_drop));
	c->changes = 0;
	g_mutex_lock(&c->epoch_lock);
	c->epoch = gen + 1;
	g_mutex_unlock(&c->epoch_lock);
	return 0;
}

void cow_drops_free(GArray *drops)
{
	guint i;

	if (!drops)
		return;
	for (i = 0; i < drops->len; i++)
		free(g_array_index(drops, struct cow_drop, i).page);
	g_array_free(drops, TRUE);
}

/* The references of a page read for a drop are in range (what loading a
 * page checks): -EUCLEAN otherwise, so that the page is reported and its
 * subtree left counted, never a count pushed below what it holds. */
static int drop_check_entries(struct cow_container *c,
			      const struct cow_drop *d, const uint8_t *page,
			      struct cow_err *err)
{
	uint64_t nr = atomic_load(&c->meta.nr_blocks);
	unsigned int k;

	for (k = 0; k < cow_tree_entries(COW_TREE_MAP, d->level); k++) {
		struct cow_ptr e = { 0 };
		uint64_t csum;

		if (d->level == 0)
			cow_map_get(page, k, &e.pbn, &csum);
		else
			cow_interior_get(page, k, &e);
		if (!e.pbn)
			continue;
		if (e.pbn < c->meta.first_block || e.pbn >= nr)
			return cow_bad(err, "block-map page at block %llu: entry %u points to block %llu, outside the container",
				       (unsigned long long)d->pbn, k,
				       (unsigned long long)e.pbn);
		if (d->level && e.gen > d->gen)
			return cow_bad(err, "block-map page at block %llu: entry %u is newer than the page",
				       (unsigned long long)d->pbn, k);
	}
	return 0;
}

/* Read the block-map page d names (it is intact: the last durable state
 * references it, and blocks freed now are reused only after the next
 * commit).  0 or -errno with why. */
static int drop_read_page(struct cow_container *c, struct cow_drop *d,
			  struct cow_err *err)
{
	struct cow_page_hdr want = {
		.tree = COW_TREE_MAP,
		.level = d->level,
		.nr_entries = (uint16_t)cow_tree_entries(COW_TREE_MAP,
							 d->level),
		.generation = d->gen,
		.pbn = d->pbn,
		.first_key = d->first_key,
	};
	struct cow_load ld = { .ptr = { d->pbn, d->gen, 0, 0 },
			       .first_key = d->first_key, .level = d->level };
	int ret;

	memcpy(want.uuid, c->meta.uuid, 16);
	ret = cow_tree_read_page(&c->meta, &ld, err);
	if (ret < 0)
		return ret;
	ret = cow_page_verify(ld.page, &want, err);
	if (ret == 0)
		ret = drop_check_entries(c, d, ld.page, err);
	if (ret < 0) {
		free(ld.page);
		return ret;
	}
	d->page = ld.page;
	return 0;
}

/*
 * Apply the drops of transaction gen (after every +1): -1 on each page,
 * and for a page whose count reached 0, -1 on its children, recursively.
 * A page that cannot be read is reported and its subtree left counted (a
 * leak, never a count too low).  Commit thread, no map_lock.
 */
static int apply_drops(struct cow_container *c, GArray *drops, uint64_t gen,
		       struct cow_err *err)
{
	GArray *todo = g_array_new(FALSE, FALSE, sizeof(struct cow_drop));
	int ret = 0;
	guint i;

	/* Take over the pages: todo owns them from here. */
	g_array_append_vals(todo, drops->data, drops->len);
	for (i = 0; i < drops->len; i++)
		g_array_index(drops, struct cow_drop, i).page = NULL;
	while (todo->len && !ret) {
		struct cow_drop d = g_array_index(todo, struct cow_drop,
						  todo->len - 1);
		uint64_t span;
		unsigned int k;
		bool freed;

		g_array_set_size(todo, todo->len - 1);
		ret = cow_alloc_put(&c->alloc, d.pbn, gen, &freed, err);
		if (ret < 0 || !freed)
			goto next;
		if (!d.page) {
			struct cow_err why = { "" };

			if (drop_read_page(c, &d, &why) < 0) {
				atomic_fetch_add(&c->meta_errors, 1);
				g_warning("%s: freeing a block-map page: %s; the blocks it references stay allocated",
					  c->meta.path, why.msg);
				goto next;
			}
		}
		span = cow_tree_span(COW_TREE_MAP, d.level ? d.level - 1u : 0);
		for (k = 0; k < cow_tree_entries(COW_TREE_MAP, d.level) && !ret;
		     k++) {
			struct cow_ptr e;
			uint64_t csum;

			if (d.level == 0) {
				cow_map_get(d.page, k, &e.pbn, &csum);
				if (e.pbn)
					ret = cow_alloc_put(&c->alloc, e.pbn,
							    gen, &freed, err);
				continue;
			}
			cow_interior_get(d.page, k, &e);
			if (!e.pbn)
				continue;
			g_array_append_val(todo, ((struct cow_drop){
				.pbn = e.pbn, .gen = e.gen,
				.first_key = d.first_key + k * span,
				.level = (uint8_t)(d.level - 1) }));
		}
next:
		free(d.page);
	}
	for (i = 0; i < todo->len; i++)
		free(g_array_index(todo, struct cow_drop, i).page);
	g_array_free(todo, TRUE);
	return ret;
}

static gint wpage_cmp(gconstpointer a, gconstpointer b)
{
	const struct cow_wpage *x = a, *y = b;

	return x->pbn < y->pbn ? -1 : x->pbn > y->pbn;
}

/* Write the pages, sorted, in runs of adjacent blocks. */
static int write_pages(struct cow_container *c, GArray *pages)
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
		ret = cow_store_write_iov(c->meta.store, iov, n,
					  w->pbn << COW_BLOCK_SHIFT);
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

/* Make the store at least nr_blocks long (unreferenced tail blocks may
 * never have been written).  commit_lock held. */
static int cover_file(struct cow_container *c, uint64_t nr_blocks)
{
	int ret;

	if (c->file_blocks >= nr_blocks)
		return 0;
	/* Preallocation (alloc.c) may have made it longer: never shrink. */
	c->file_blocks = cow_store_blocks(c->meta.store);
	if (c->file_blocks >= nr_blocks)
		return 0;
	ret = backend_resize(c->meta.store, nr_blocks << COW_BLOCK_SHIFT);
	if (ret < 0)
		return ret;
	c->file_blocks = nr_blocks;
	return 0;
}

static int sync_file(struct cow_container *c)
{
	return backend_flush(c->meta.store);
}

/* Write sb into its slot (generation % 2). */
static int write_superblock(struct cow_container *c, const struct cow_sb *sb)
{
	uint8_t *blk = cow_page_alloc();
	struct iovec iov = { blk, COW_BLOCK_SIZE };
	int ret;

	cow_sb_encode(sb, blk);
	ret = cow_store_write_iov(c->meta.store, &iov, 1,
				  (uint64_t)sb->slot << COW_BLOCK_SHIFT);
	free(blk);
	return ret;
}

/* Everything after the seal: refcounts, pages, superblock.  commit_lock
 * held. */
static int commit_sealed(struct cow_container *c, uint64_t gen, GArray *pages,
			 struct sealed *sd)
{
	struct cow_err err = { "" };
	struct cow_sb sb = c->sb;
	int ret;

	ret = cow_alloc_apply(&c->alloc, (struct cow_refop *)sd->ops->data,
			      sd->ops->len, gen, &err);
	if (!ret)
		ret = apply_drops(c, sd->drops, gen, &err);
	if (!ret)
		ret = cow_alloc_commit(&c->alloc, gen, pages,
				       &sb.refcount_root, &sb.nr_blocks, &err);
	if (ret < 0) {
		g_warning("%s: commit of generation %llu: %s", c->meta.path,
			  (unsigned long long)gen, err.msg);
		return ret;
	}
	sb.generation = gen;
	sb.slot = (uint32_t)(gen % COW_NR_SLOTS);
	sb.volume_root = sd->vroot;
	sb.next_volume_id = sd->next_volume_id;
	sb.commit_time = (uint64_t)time(NULL);
	cow_test_point(COW_TEST_SEALED);
	ret = cover_file(c, sb.nr_blocks);
	if (!ret)
		ret = write_pages(c, pages);
	if (!ret) {
		cow_test_point(COW_TEST_META_WRITTEN);
		ret = sync_file(c);
	}
	if (!ret) {
		cow_test_point(COW_TEST_META_DURABLE);
		ret = write_superblock(c, &sb);
	}
	if (!ret) {
		cow_test_point(COW_TEST_SB_WRITTEN);
		ret = sync_file(c);
	}
	if (ret < 0) {
		g_warning("%s: commit of generation %llu failed: %s; the image keeps generation %llu and refuses writes until reopened",
			  c->meta.path, (unsigned long long)gen,
			  g_strerror(-ret),
			  (unsigned long long)c->sb.generation);
		return ret;
	}
	c->sb = sb;
	atomic_store(&c->committed_gen, gen);
	atomic_fetch_add(&c->commits, 1);
	cow_test_point(COW_TEST_COMMITTED);
	return 0;
}

int cow_commit_open(struct cow_container *c)
{
	struct cow_sb sb = c->sb;
	int ret;

	sb.generation++;
	sb.slot = (uint32_t)(sb.generation % COW_NR_SLOTS);
	sb.commit_time = (uint64_t)time(NULL);
	ret = write_superblock(c, &sb);
	if (!ret)
		ret = sync_file(c);
	if (ret < 0) {
		g_warning("%s: writing the superblock at open: %s",
			  c->meta.path, g_strerror(-ret));
		return ret;
	}
	c->sb = sb;
	atomic_store(&c->committed_gen, sb.generation);
	c->epoch = sb.generation + 1;
	cow_alloc_durable(&c->alloc, sb.generation, c->epoch);
	return 0;
}

int cow_commit_volop(struct cow_container *c, struct cow_volop *op)
{
	struct page_pool pool = { 0 };
	struct sealed sd = { 0 };
	struct cow_err err = { "" };
	uint64_t gen, need;
	bool sealing = false;
	GArray *pages;
	int ret = 0;

	g_mutex_lock(&c->commit_lock);
	if (atomic_load(&c->failed)) {
		g_mutex_unlock(&c->commit_lock);
		return -EIO;
	}
	gen = atomic_load(&c->committed_gen) + 1;
	pool.ext = g_array_new(FALSE, FALSE, sizeof(struct cow_extent));
	pages = g_array_new(FALSE, FALSE, sizeof(struct cow_wpage));
	g_mutex_lock(&c->map_lock);
	/* The operation loads what it needs and checks it first: the seal
	 * cannot fail on its account (nothing else changes the volume tree
	 * while commit_lock is held). */
	if (op) {
		ret = cow_volop_prepare(c, op);
		if (ret < 0) {
			g_mutex_unlock(&c->map_lock);
			goto out;
		}
		c->changes++;
	}
	/* Reserve blocks for the map and volume pages first: the seal runs
	 * under map_lock and must not read refcount pages. */
	while (c->changes && (need = pages_needed(c)) > pool_left(&pool)) {
		g_mutex_unlock(&c->map_lock);
		ret = cow_alloc_reserve(&c->alloc, need - pool_left(&pool),
					pool.ext, &err);
		g_mutex_lock(&c->map_lock);
		if (ret < 0)
			break;
	}
	if (!ret && c->changes) {
		sealing = true;
		ret = seal(c, gen, &pool, pages, op, &sd);
	}
	g_mutex_unlock(&c->map_lock);
	pool_release(c, &pool);
	if (ret < 0 && !sealing) {
		/* Nothing was sealed: the open transaction stays. */
		g_warning("%s: commit: reserving blocks: %s", c->meta.path,
			  err.msg[0] ? err.msg : g_strerror(-ret));
		goto out;
	}
	if (!sealing)
		goto out;	/* nothing changed */
	if (!ret)
		ret = commit_sealed(c, gen, pages, &sd);
	if (ret < 0) {
		atomic_store(&c->failed, true);
		ret = -EIO;
		goto out;
	}
	cow_alloc_durable(&c->alloc, gen, cow_epoch_oldest(c));
out:
	if (sd.ops)
		g_array_free(sd.ops, TRUE);
	cow_drops_free(sd.drops);
	free_pages(pages);
	g_array_free(pool.ext, TRUE);
	g_mutex_unlock(&c->commit_lock);
	return ret;
}

int cow_commit(struct cow_container *c)
{
	return cow_commit_volop(c, NULL);
}

/* ---- the periodic committer ---- */

static gpointer committer_main(gpointer opaque)
{
	struct cow_container *c = opaque;

	g_mutex_lock(&c->committer_lock);
	while (!c->committer_stop) {
		unsigned int ms = c->commit_ms;

		if (ms == 0)
			g_cond_wait(&c->committer_cond, &c->committer_lock);
		else if (!c->commit_soon)
			g_cond_wait_until(&c->committer_cond,
					  &c->committer_lock,
					  g_get_monotonic_time() +
					  (gint64)ms * 1000);
		if (c->committer_stop || ms == 0 || c->commit_ms != ms)
			continue;
		c->commit_soon = false;
		g_mutex_unlock(&c->committer_lock);
		cow_commit(c);
		g_mutex_lock(&c->committer_lock);
	}
	g_mutex_unlock(&c->committer_lock);
	return NULL;
}

int cow_committer_start(struct cow_container *c)
{
	GError *gerr = NULL;

	/* A thread limit reached (any user can add images) refuses this
	 * image; g_thread_new would abort the daemon. */
	c->committer = g_thread_try_new("cow-commit", committer_main, c,
					&gerr);
	if (!c->committer) {
		g_warning("%s: cannot start its committer thread: %s",
			  c->path, gerr->message);
		g_error_free(gerr);
		return -EAGAIN;
	}
	return 0;
}

void cow_committer_kick(struct cow_container *c)
{
	g_mutex_lock(&c->committer_lock);
	if (!c->commit_soon && c->commit_ms) {
		c->commit_soon = true;
		g_cond_broadcast(&c->committer_cond);
	}
	g_mutex_unlock(&c->committer_lock);
}

void cow_committer_stop(struct cow_container *c)
{
	if (!c->committer)
		return;
	g_mutex_lock(&c->committer_lock);
	c->committer_stop = true;
	g_cond_broadcast(&c->committer_cond);
	g_mutex_unlock(&c->committer_lock);
	g_thread_join(c->committer);
	c->committer = NULL;
}

void cow_set_commit_interval(struct backend *b, unsigned int ms)
{
	struct cow_container *c = ((struct cow_volume *)b->priv)->c;

	g_mutex_lock(&c->committer_lock);
	c->commit_ms = ms;
	g_cond_broadcast(&c->committer_cond);
	g_mutex_unlock(&c->committer_lock);
}
