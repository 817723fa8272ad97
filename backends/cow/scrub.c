/* SPDX-License-Identifier: MIT */
/*
 * Scrub: read and verify every data block of every volume of a cow
 * container while the volumes stay in use.
 *
 * Volumes are scrubbed one after the other, in batches of up to
 * SCRUB_BATCH mapped blocks.  Each batch enters a read epoch before it
 * looks anything up and leaves it once its blocks are read, so no block it
 * found mapped is reused meanwhile (cow_int.h).  Open volumes are read
 * through their live maps (changes since the last commit included);
 * volumes not open through their committed map roots, with a private
 * cache of their pages that is rebuilt when the root changed (the volume
 * was opened and written meanwhile) and given up when the volume is gone.
 * A block shared by several volumes is read once (a bitmap of verified
 * blocks) and reported for every volume that maps it with the checksum it
 * was found bad for.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCRUB_BATCH 256u		/* blocks: 1 MiB reads at most */
#define SCRUB_PROGRESS_EVERY 1000u

struct scrub_blk {
	uint64_t lbn, pbn, csum;
	int error;			/* 0, -EIO or -EBADMSG */
};

struct scrub {
	struct cow_container *c;
	cow_scrub_progress_t progress;
	cow_scrub_bad_t bad;
	void *opaque;
	struct cow_scrub_progress p;
	uint64_t last_report;
	uint64_t *seen;			/* bitmap: pbns read */
	uint64_t seen_bits;
	GHashTable *bad_pbns;		/* pbn -> struct scrub_blk found bad */
	uint8_t *buf;			/* SCRUB_BATCH blocks, aligned */
	struct scrub_blk blk[SCRUB_BATCH];
	unsigned int nr;
};

/* The volume being scrubbed. */
struct scrub_vol {
	uint64_t id;
	struct cow_volume_entry e;	/* as last seen */
	bool have_tree;
	struct cow_tree tree;		/* committed map, when not open */
	struct cow_ptr tree_root;
	GMutex tree_lock;
};

static bool seen_test(struct scrub *s, uint64_t pbn)
{
	return pbn < s->seen_bits && (s->seen[pbn / 64] >> (pbn % 64)) & 1;
}

static void seen_set(struct scrub *s, uint64_t pbn)
{
	if (pbn >= s->seen_bits) {
		uint64_t bits = MAX(pbn + 1, s->seen_bits * 2);
		size_t words = (size_t)((bits + 63) / 64);

		s->seen = g_realloc(s->seen, words * sizeof(uint64_t));
		memset(s->seen + (s->seen_bits + 63) / 64, 0,
		       (words - (s->seen_bits + 63) / 64) * sizeof(uint64_t));
		s->seen_bits = words * 64;
	}
	s->seen[pbn / 64] |= UINT64_C(1) << (pbn % 64);
}

/* Collect the ids and the total of mapped blocks.  map_lock held. */
static int collect_volumes(struct cow_container *c, GArray *ids,
			   uint64_t *total, struct cow_err *err)
{
	uint64_t key = 1, found;
	int ret;

	for (;;) {
		struct cow_volume_entry e;
		struct cow_node *leaf;

		ret = cow_tree_seek_locked(&c->voltree, &c->map_lock, key,
					   c->voltree.key_limit, true, &found,
					   err);
		if (ret < 0 || found >= c->voltree.key_limit)
			return ret;
		ret = cow_tree_find_locked(&c->voltree, &c->map_lock, found,
					   false, &leaf, err);
		if (ret < 0)
			return ret;
		if (leaf && cow_vol_get(leaf->page, cow_leaf_index(leaf, found),
					&e, err) == 0 && e.id == found) {
			/* An open volume: its map's count, else its entry's. */
			struct cow_volume *v = cow_open_volume_by_id(c, found);

			g_array_append_val(ids, found);
			*total += v ? v->map.root->used : e.map_root.used;
		}
		key = found + 1;
	}
}

/* The next mapped blocks of tree from *lbn into s->blk (lock is the
 * tree's owner lock, held). */
static int collect_blocks(struct scrub *s, struct cow_tree *t, GMutex *lock,
			  uint64_t *lbn, uint64_t end, struct cow_err *err)
{
	int ret = 0;

	s->nr = 0;
	while (s->nr < SCRUB_BATCH && *lbn < end) {
		struct cow_node *leaf;
		uint64_t found, stop, k;

		ret = cow_tree_seek_locked(t, lock, *lbn, end, true, &found,
					   err);
		if (ret < 0)
			return ret;
		if (found >= end) {
			*lbn = end;
			break;
		}
		ret = cow_tree_find_locked(t, lock, found, false, &leaf, err);
		if (ret < 0)
			return ret;
		if (!leaf) {
			*lbn = found + 1;
			continue;
		}
		stop = MIN(end, leaf->first_key + COW_MAP_ENTRIES);
		for (k = found; k < stop && s->nr < SCRUB_BATCH; k++) {
			struct scrub_blk *b = &s->blk[s->nr];

			cow_map_get(leaf->page, cow_leaf_index(leaf, k),
				    &b->pbn, &b->csum);
			if (!b->pbn)
				continue;
			b->lbn = k;
			b->error = 0;
			s->nr++;
		}
		*lbn = k;
	}
	return 0;
}

/*
 * The next batch of volume sv from *lbn: 1 with s->blk filled (maybe
 * empty only at the end), 0 when the volume is done or gone, -errno.
 * Called inside the batch's epoch.
 */
static int next_batch(struct scrub *s, struct scrub_vol *sv, uint64_t *lbn)
{
	struct cow_container *c = s->c;
	struct cow_err err = { "" };
	struct cow_volume *v;
	uint64_t end;
	int ret;

	g_mutex_lock(&c->map_lock);
	v = cow_open_volume_by_id(c, sv->id);
	if (v) {
		sv->e = v->vol;
		end = v->map.key_limit;
		ret = collect_blocks(s, &v->map, &c->map_lock, lbn, end, &err);
		g_mutex_unlock(&c->map_lock);
		goto out;
	}
	{
		struct cow_node *leaf = NULL;

		ret = cow_tree_find_locked(&c->voltree, &c->map_lock, sv->id,
					   false, &leaf, &err);
		if (!ret && leaf)
			ret = cow_vol_get(leaf->page,
					  cow_leaf_index(leaf, sv->id), &sv->e,
					  &err);
		if (!ret && (!leaf || sv->e.id != sv->id))
			ret = 1;	/* deleted */
	}
	g_mutex_unlock(&c->map_lock);
	if (ret)
		return ret < 0 ? -EIO : 0;
	/* The entry exists in this epoch: its pages and blocks stay. */
	if (sv->have_tree && memcmp(&sv->tree_root, &sv->e.map_root,
				    sizeof(sv->tree_root))) {
		cow_tree_destroy(&sv->tree);
		sv->have_tree = false;
	}
	if (!sv->have_tree) {
		cow_tree_init(&sv->tree, COW_TREE_MAP, &c->meta, sv->id,
			      sv->e.size >> COW_BLOCK_SHIFT);
		sv->tree_root = sv->e.map_root;
		ret = cow_tree_open(&sv->tree, &sv->tree_root, &err);
		if (ret < 0) {
			cow_tree_destroy(&sv->tree);
			goto out;
		}
		sv->have_tree = true;
	}
	end = sv->tree.key_limit;
	g_mutex_lock(&sv->tree_lock);
	ret = collect_blocks(s, &sv->tree, &sv->tree_lock, lbn, end, &err);
	g_mutex_unlock(&sv->tree_lock);
out:
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return s->nr || *lbn < end ? 1 : 0;
}

static gint blk_by_pbn(const void *a, const void *b)
{
	const struct scrub_blk *x = a, *y = b;

	return x->pbn < y->pbn ? -1 : x->pbn > y->pbn;
}

/* Read and verify [i, j) of s->blk (consecutive pbns, none seen). */
static void read_run(struct scrub *s, unsigned int i, unsigned int j)
{
	struct cow_container *c = s->c;
	size_t len = (size_t)(j - i) << COW_BLOCK_SHIFT, got = 0;
	uint64_t off = s->blk[i].pbn << COW_BLOCK_SHIFT;
	unsigned int k;
	ssize_t n;

	n = cow_store_rw(c->meta.store, false, s->buf, len, off);
	got = n < 0 ? 0 : (size_t)n;
	for (k = i; k < j; k++) {
		struct scrub_blk *b = &s->blk[k];
		size_t at = (size_t)(k - i) << COW_BLOCK_SHIFT;

		if (at + COW_BLOCK_SIZE > got)
			b->error = -EIO;
		else if (cow_csum_block(c->meta.csum_type, s->buf + at) !=
			 b->csum)
			b->error = -EBADMSG;
	}
}

/* Count and report one bad block of volume sv. */
static void report_bad(struct scrub *s, struct scrub_vol *sv,
		       const struct scrub_blk *b)
{
	struct cow_container *c = s->c;
	struct cow_bad_block bad = {
		.volume_id = sv->id,
		.lbn = b->lbn,
		.pbn = b->pbn,
		.error = b->error,
	};
	struct cow_volume *v;

	g_strlcpy(bad.volume, sv->e.name, sizeof(bad.volume));
	s->p.bad++;
	g_mutex_lock(&c->map_lock);
	v = cow_open_volume_by_id(c, sv->id);
	if (v)
		atomic_fetch_add(&v->checksum_errors, 1);
	g_mutex_unlock(&c->map_lock);
	g_warning("%s: volume %s lbn %llu pbn %llu: %s", c->meta.path,
		  cow_volume_label(&sv->e), (unsigned long long)b->lbn,
		  (unsigned long long)b->pbn,
		  b->error == -EBADMSG ? "checksum mismatch" : "read error");
	if (s->bad)
		s->bad(s->opaque, &bad);
}

/* Verify the batch in s->blk for volume sv. */
static void verify_batch(struct scrub *s, struct scrub_vol *sv)
{
	unsigned int i, j, nr = 0;

	/* Blocks already read: their verdict again; the others to read,
	 * in runs of consecutive pbns. */
	qsort(s->blk, s->nr, sizeof(s->blk[0]), blk_by_pbn);
	for (i = 0; i < s->nr; i++) {
		struct scrub_blk *b = &s->blk[i];

		if (seen_test(s, b->pbn)) {
			struct scrub_blk *was = g_hash_table_lookup(
				s->bad_pbns, GSIZE_TO_POINTER(b->pbn));

			if (!was)
				continue;	/* verified */
			/* Found bad for the same content: bad here too.  A
			 * new checksum: the block was reused, read again. */
			if (was->csum == b->csum) {
				b->error = was->error;
				report_bad(s, sv, b);
				continue;
			}
			b->error = 0;
		}
		s->blk[nr++] = *b;
	}
	for (i = 0; i < nr; i = j) {
		for (j = i + 1; j < nr && s->blk[j].pbn == s->blk[j - 1].pbn + 1;
		     j++)
			;
		read_run(s, i, j);
	}
	for (i = 0; i < nr; i++) {
		struct scrub_blk *b = &s->blk[i];

		seen_set(s, b->pbn);
		if (!b->error)
			continue;
		g_hash_table_replace(s->bad_pbns, GSIZE_TO_POINTER(b->pbn),
				     g_memdup2(b, sizeof(*b)));
		report_bad(s, sv, b);
	}
}

/* Scrub one volume.  0, -ECANCELED or -errno. */
static int scrub_volume(struct scrub *s, uint64_t id)
{
	struct scrub_vol sv = { .id = id };
	uint64_t lbn = 0;
	int ret;

	g_mutex_init(&sv.tree_lock);
	for (;;) {
		struct cow_epoch *ep = cow_epoch_enter(s->c);
		unsigned int nr;

		ret = next_batch(s, &sv, &lbn);
		nr = ret > 0 ? s->nr : 0;
		if (nr)
			verify_batch(s, &sv);
		cow_epoch_leave(s->c, ep);
		if (ret <= 0)
			break;
		s->p.done += nr;
		if (s->progress &&
		    s->p.done - s->last_report >= SCRUB_PROGRESS_EVERY) {
			s->last_report = s->p.done;
			if (!s->progress(s->opaque, &s->p)) {
				ret = -ECANCELED;
				break;
			}
		}
	}
	if (sv.have_tree)
		cow_tree_destroy(&sv.tree);
	g_mutex_clear(&sv.tree_lock);
	return ret;
}

int cow_scrub(struct backend *b, cow_scrub_progress_t progress,
	      cow_scrub_bad_t bad, void *opaque, struct cow_scrub_progress *res)
{
	struct cow_container *c = ((struct cow_volume *)b->priv)->c;
	struct scrub *s = g_new0(struct scrub, 1);
	GArray *ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	struct cow_err err = { "" };
	guint i;
	int ret;

	s->c = c;
	s->p.block_size = COW_BLOCK_SIZE;
	s->progress = progress;
	s->bad = bad;
	s->opaque = opaque;
	s->bad_pbns = g_hash_table_new_full(g_direct_hash, g_direct_equal,
					    NULL, g_free);
	if (posix_memalign((void **)&s->buf, COW_BLOCK_SIZE,
			   (size_t)SCRUB_BATCH << COW_BLOCK_SHIFT))
		g_error("cow: out of memory for the scrub buffer");
	s->seen_bits = (atomic_load(&c->meta.nr_blocks) + 63) / 64 * 64;
	s->seen = g_new0(uint64_t, s->seen_bits / 64 + 1);
	g_mutex_lock(&c->map_lock);
	ret = collect_volumes(c, ids, &s->p.total, &err);
	g_mutex_unlock(&c->map_lock);
	if (ret < 0) {
		cow_meta_error(c, &err);
		ret = -EIO;
	}
	for (i = 0; i < ids->len && !ret; i++)
		ret = scrub_volume(s, g_array_index(ids, uint64_t, i));
	if (!ret && progress)
		progress(opaque, &s->p);
	if (res)
		*res = s->p;
	g_array_free(ids, TRUE);
	g_hash_table_destroy(s->bad_pbns);
	free(s->buf);
	g_free(s->seen);
	g_free(s);
	return ret;
}
