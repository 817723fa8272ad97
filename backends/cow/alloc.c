/* SPDX-License-Identifier: MIT */
/*
 * Block allocation over the refcount tree (see alloc.h for the rules).
 *
 * Finding free blocks: next-fit from a cursor.  cow_tree_seek skips
 * subtrees whose counts are all non-zero (their "used" equals their
 * span); inside a leaf, blocks with count 0 that are neither busy nor
 * pinned are taken, in runs.  When a whole circle finds nothing,
 * scan_empty stops further scans until blocks become reusable again, and
 * the container grows at its end (nr_blocks) instead.
 */
#include "backends/cow/alloc.h"

#include "backends/cow/cow_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#define SIDE_WORDS ((COW_RC_ENTRIES + 63) / 64)

/* The busy and pinned bits of one refcount leaf's blocks. */
struct cow_rc_side {
	uint64_t busy[SIDE_WORDS];
	uint64_t pinned[SIDE_WORDS];
};

/* Blocks whose count dropped to 0 in one generation. */
struct cow_freed {
	uint64_t gen;
	GArray *pbns;			/* uint64_t */
};

static bool bit_test(const uint64_t *w, unsigned int i)
{
	return (w[i / 64] >> (i % 64)) & 1;
}

static void bit_set(uint64_t *w, unsigned int i)
{
	w[i / 64] |= UINT64_C(1) << (i % 64);
}

static void bit_clear(uint64_t *w, unsigned int i)
{
	w[i / 64] &= ~(UINT64_C(1) << (i % 64));
}

static struct cow_rc_side *side_of(struct cow_node *leaf)
{
	if (!leaf->side)
		leaf->side = g_new0(struct cow_rc_side, 1);
	return leaf->side;
}

int cow_alloc_open(struct cow_alloc *a, struct cow_meta *meta,
		   const struct cow_ptr *root, struct cow_err *err)
{
	memset(a, 0, sizeof(*a));
	g_mutex_init(&a->lock);
	a->meta = meta;
	cow_tree_init(&a->rc, COW_TREE_REFCOUNT, meta, 0, meta->nr_blocks);
	a->rc.free_side = g_free;
	a->cursor = meta->first_block;
	g_queue_init(&a->freed);
	a->file_blocks = cow_store_blocks(meta->store);
	return cow_tree_open(&a->rc, root, err);
}

static void freed_free(gpointer p)
{
	struct cow_freed *f = p;

	g_array_free(f->pbns, TRUE);
	g_free(f);
}

void cow_alloc_close(struct cow_alloc *a)
{
	cow_tree_destroy(&a->rc);
	g_queue_clear_full(&a->freed, freed_free);
	g_mutex_clear(&a->lock);
}

/* The loaded leaf holding pbn, or NULL when it is not in memory (then no
 * bit is set for pbn).  Never does I/O.  Lock held. */
static struct cow_node *leaf_cached(struct cow_alloc *a, uint64_t pbn)
{
	struct cow_load ld = { 0 };
	struct cow_node *leaf = NULL;

	if (pbn >= cow_tree_capacity(COW_TREE_REFCOUNT, a->rc.height))
		return NULL;
	if (cow_tree_find(&a->rc, pbn, false, &ld, &leaf, NULL) < 0)
		return NULL;
	return leaf;
}

/* Append [pbn, pbn + 1) to out, extending its last extent when adjacent
 * (only extents from index first on). */
static void extent_add(GArray *out, guint first, uint64_t pbn)
{
	struct cow_extent *last;

	if (out->len > first) {
		last = &g_array_index(out, struct cow_extent, out->len - 1);
		if (last->pbn + last->len == pbn) {
			last->len++;
			return;
		}
	}
	g_array_append_val(out, ((struct cow_extent){ pbn, 1 }));
}

/* Clear the busy bits of [pbn, pbn + len) that are set.  Lock held. */
static void unreserve_locked(struct cow_alloc *a, uint64_t pbn, uint64_t len)
{
	struct cow_node *leaf = NULL;
	uint64_t k;

	for (k = pbn; k < pbn + len; k++) {
		unsigned int i;

		if (!leaf || k - leaf->first_key >= COW_RC_ENTRIES)
			leaf = leaf_cached(a, k);
		if (!leaf || !leaf->side)
			continue;
		i = cow_leaf_index(leaf, k);
		if (bit_test(((struct cow_rc_side *)leaf->side)->busy, i)) {
			bit_clear(((struct cow_rc_side *)leaf->side)->busy, i);
			a->nr_busy--;
		}
	}
	a->scan_empty = false;
}

void cow_alloc_unreserve(struct cow_alloc *a, uint64_t pbn, uint64_t len)
{
	g_mutex_lock(&a->lock);
	unreserve_locked(a, pbn, len);
	g_mutex_unlock(&a->lock);
}

/*
 * Take free blocks below nr_blocks, next-fit from the cursor, until
 * *remaining is 0 or a full circle found no more.  Lock held (dropped
 * while pages are read).
 */
static int scan_free(struct cow_alloc *a, uint64_t *remaining, GArray *out,
		     guint first, struct cow_err *err)
{
	uint64_t start = a->cursor, pos = start;
	bool wrapped = false, took = false;
	int ret;

	if (start < a->meta->first_block || start >= a->meta->nr_blocks)
		start = pos = a->meta->first_block;
	while (*remaining) {
		uint64_t end = wrapped ? start : a->meta->nr_blocks, found, k;
		struct cow_node *leaf;
		struct cow_rc_side *side;

		if (pos >= end) {
			if (wrapped)
				break;
			wrapped = true;
			pos = a->meta->first_block;
			continue;
		}
		ret = cow_tree_seek_locked(&a->rc, &a->lock, pos, end, false,
					   &found, err);
		if (ret < 0)
			return ret;
		if (found >= end) {
			pos = end;
			continue;
		}
		ret = cow_tree_find_locked(&a->rc, &a->lock, found, true,
					   &leaf, err);
		if (ret < 0)
			return ret;
		side = side_of(leaf);
		end = MIN(end, leaf->first_key + COW_RC_ENTRIES);
		end = MIN(end, a->meta->nr_blocks);
		for (k = found; k < end && *remaining; k++) {
			unsigned int i = cow_leaf_index(leaf, k);

			if (cow_rc_get(leaf->page, i) ||
			    bit_test(side->busy, i) ||
			    bit_test(side->pinned, i))
				continue;
			bit_set(side->busy, i);
			a->nr_busy++;
			extent_add(out, first, k);
			(*remaining)--;
			took = true;
		}
		pos = k;
		a->cursor = k;
	}
	if (*remaining && !took)
		a->scan_empty = true;
	return 0;
}

/*
 * Make the store cover at least nr blocks, and a good deal more, so that
 * the store is resized once per chunk rather than per write (a resize of
 * a raw store is an ftruncate and an fdatasync).  Writes never reach past
 * the store's size (BACKEND_OPEN_STORE).  0 or -errno.  Lock held.
 */
static int preallocate(struct cow_alloc *a, uint64_t nr)
{
	uint64_t chunk = MAX(nr / 8, COW_PREALLOC_MIN);
	uint64_t end = nr + MIN(chunk, COW_PREALLOC_MAX);
	int ret;

	a->file_blocks = MAX(a->file_blocks, cow_store_blocks(a->meta->store));
	if (a->file_blocks >= nr)
		return 0;
	ret = backend_resize(a->meta->store, end << COW_BLOCK_SHIFT);
	if (ret < 0)
		return ret;
	a->file_blocks = end;
	return 0;
}

/* Grow the container by n blocks at its end, marked busy.  Lock held
 * (dropped while pages are read). */
static int take_tail(struct cow_alloc *a, uint64_t n, GArray *out,
		     struct cow_err *err)
{
	uint64_t pbn = a->meta->nr_blocks, k;
	struct cow_node *leaf = NULL;
	int ret;

	if (pbn + n < pbn || cow_tree_grow(&a->rc, pbn + n) < 0) {
		cow_bad(err, "the container cannot grow past %llu blocks",
			(unsigned long long)pbn);
		return -ENOSPC;
	}
	if (pbn + n > a->file_blocks) {
		ret = preallocate(a, pbn + n);
		if (ret < 0) {
			cow_bad(err, "growing the container to %llu blocks: %s",
				(unsigned long long)(pbn + n),
				g_strerror(-ret));
			return ret;
		}
	}
	a->meta->nr_blocks = pbn + n;
	a->rc.key_limit = pbn + n;
	g_array_append_val(out, ((struct cow_extent){ pbn, n }));
	for (k = pbn; k < pbn + n; k++) {
		unsigned int i;

		if (!leaf || k - leaf->first_key >= COW_RC_ENTRIES) {
			ret = cow_tree_find_locked(&a->rc, &a->lock, k, true,
						   &leaf, err);
			if (ret < 0)
				return ret;
		}
		i = cow_leaf_index(leaf, k);
		bit_set(side_of(leaf)->busy, i);
		a->nr_busy++;
	}
	return 0;
}

/* Reserve n blocks.  Lock held. */
static int reserve_locked(struct cow_alloc *a, uint64_t n, GArray *out,
			  struct cow_err *err)
{
	guint first = out->len, i;
	uint64_t remaining = n;
	int ret = 0;

	if (a->reuse_allowed && !a->scan_empty)
		ret = scan_free(a, &remaining, out, first, err);
	if (!ret && remaining)
		ret = take_tail(a, remaining, out, err);
	if (ret < 0) {
		for (i = first; i < out->len; i++) {
			struct cow_extent *e =
				&g_array_index(out, struct cow_extent, i);

			unreserve_locked(a, e->pbn, e->len);
		}
		g_array_set_size(out, first);
	}
	return ret;
}

int cow_alloc_reserve(struct cow_alloc *a, uint64_t n, GArray *out,
		      struct cow_err *err)
{
	int ret;

	g_mutex_lock(&a->lock);
	ret = reserve_locked(a, n, out, err);
	g_mutex_unlock(&a->lock);
	return ret;
}

/* Remember that pbn's count reached 0 in gen. */
static void freed_add(struct cow_alloc *a, uint64_t gen, uint64_t pbn)
{
	struct cow_freed *f = g_queue_peek_tail(&a->freed);

	if (!f || f->gen != gen) {
		f = g_new0(struct cow_freed, 1);
		f->gen = gen;
		f->pbns = g_array_new(FALSE, FALSE, sizeof(uint64_t));
		g_queue_push_tail(&a->freed, f);
	}
	g_array_append_val(f->pbns, pbn);
}

/* Change pbn's count by delta in gen.  Lock held (dropped while pages
 * are read). */
static int rc_change(struct cow_alloc *a, uint64_t pbn, int delta,
		     uint64_t gen, struct cow_err *err)
{
	struct cow_node *leaf;
	struct cow_rc_side *side;
	unsigned int i;
	uint32_t v;
	int ret;

	if (pbn < a->meta->first_block || pbn >= a->meta->nr_blocks)
		return cow_bad(err, "reference %+d to block %llu, outside the container (%llu blocks)",
			       delta, (unsigned long long)pbn,
			       (unsigned long long)a->meta->nr_blocks);
	ret = cow_tree_find_locked(&a->rc, &a->lock, pbn, true, &leaf, err);
	if (ret < 0)
		return ret;
	i = cow_leaf_index(leaf, pbn);
	v = cow_rc_get(leaf->page, i);
	side = side_of(leaf);
	if (delta > 0) {
		if (v == UINT32_MAX)
			return cow_bad(err, "block %llu has too many references",
				       (unsigned long long)pbn);
		if (bit_test(side->busy, i)) {
			bit_clear(side->busy, i);
			a->nr_busy--;
		}
		cow_rc_set(leaf->page, i, v + 1);
		cow_tree_changed(&a->rc, leaf, v == 0 ? 1 : 0);
		return 0;
	}
	if (v == 0)
		return cow_bad(err, "the reference count of block %llu would drop below zero",
			       (unsigned long long)pbn);
	cow_rc_set(leaf->page, i, v - 1);
	cow_tree_changed(&a->rc, leaf, v == 1 ? -1 : 0);
	if (v == 1) {
		bit_set(side->pinned, i);
		a->nr_pinned++;
		freed_add(a, gen, pbn);
	}
	return 0;
}

int cow_alloc_apply(struct cow_alloc *a, const struct cow_refop *ops,
		    size_t n, uint64_t gen, struct cow_err *err)
{
	int pass, ret = 0;
	size_t i;

	g_mutex_lock(&a->lock);
	for (pass = 0; pass < 2 && !ret; pass++)
		for (i = 0; i < n && !ret; i++)
			if ((ops[i].delta > 0) == (pass == 0))
				ret = rc_change(a, ops[i].pbn, ops[i].delta,
						gen, err);
	g_mutex_unlock(&a->lock);
	return ret;
}

int cow_alloc_put(struct cow_alloc *a, uint64_t pbn, uint64_t gen,
		  bool *freed, struct cow_err *err)
{
	struct cow_node *leaf;
	int ret;

	*freed = false;
	g_mutex_lock(&a->lock);
	ret = rc_change(a, pbn, -1, gen, err);
	if (!ret) {
		ret = cow_tree_find_locked(&a->rc, &a->lock, pbn, false, &leaf,
					   err);
		if (!ret && leaf)
			*freed = cow_rc_get(leaf->page,
					    cow_leaf_index(leaf, pbn)) == 0;
	}
	g_mutex_unlock(&a->lock);
	return ret;
}

/* The commit's callbacks for moving refcount pages. */
struct rc_commit {
	struct cow_alloc *a;
	uint64_t gen;
	struct cow_err *err;
};

static int rc_alloc_page(void *opaque, uint64_t *pbn)
{
	struct rc_commit *c = opaque;
	GArray *one = g_array_new(FALSE, FALSE, sizeof(struct cow_extent));
	int ret = reserve_locked(c->a, 1, one, c->err);

	if (!ret)
		*pbn = g_array_index(one, struct cow_extent, 0).pbn;
	g_array_free(one, TRUE);
	return ret;
}

static int rc_ref(void *opaque, uint64_t pbn, int delta)
{
	struct rc_commit *c = opaque;

	return rc_change(c->a, pbn, delta, c->gen, c->err);
}

int cow_alloc_commit(struct cow_alloc *a, uint64_t gen, GArray *out,
		     struct cow_ptr *root, uint64_t *nr_blocks,
		     struct cow_err *err)
{
	struct rc_commit c = { a, gen, err };
	int ret;

	g_mutex_lock(&a->lock);
	ret = cow_tree_assign(&a->rc, gen, rc_alloc_page, rc_ref, NULL, &c);
	if (!ret) {
		cow_tree_write(&a->rc, gen, out);
		cow_tree_root_ptr(&a->rc, root);
		*nr_blocks = a->meta->nr_blocks;
	}
	g_mutex_unlock(&a->lock);
	return ret;
}

void cow_alloc_durable(struct cow_alloc *a, uint64_t durable_gen,
		       uint64_t oldest_reader)
{
	struct cow_freed *f;
	guint i;

	g_mutex_lock(&a->lock);
	if (!a->reuse_allowed) {
		a->reuse_allowed = true;
		a->scan_empty = false;
	}
	while ((f = g_queue_peek_head(&a->freed)) &&
	       f->gen + 1 <= durable_gen && f->gen < oldest_reader) {
		for (i = 0; i < f->pbns->len; i++) {
			uint64_t pbn = g_array_index(f->pbns, uint64_t, i);
			struct cow_node *leaf = leaf_cached(a, pbn);
			unsigned int k;

			/* Pinned leaves stay loaded (no eviction). */
			g_assert(leaf && leaf->side);
			k = cow_leaf_index(leaf, pbn);
			if (bit_test(((struct cow_rc_side *)leaf->side)->pinned,
				     k)) {
				bit_clear(((struct cow_rc_side *)leaf->side)->pinned,
					  k);
				a->nr_pinned--;
			}
		}
		freed_free(g_queue_pop_head(&a->freed));
		a->scan_empty = false;
	}
	g_mutex_unlock(&a->lock);
}

void cow_alloc_get_stats(struct cow_alloc *a, struct cow_alloc_stats *st)
{
	g_mutex_lock(&a->lock);
	st->nr_blocks = a->meta->nr_blocks;
	st->used = a->rc.root->used;
	st->busy = a->nr_busy;
	st->pinned = a->nr_pinned;
	g_mutex_unlock(&a->lock);
}

int64_t cow_alloc_refcount(struct cow_alloc *a, uint64_t pbn)
{
	struct cow_node *leaf = NULL;
	struct cow_err err;
	int64_t ret = 0;

	g_mutex_lock(&a->lock);
	if (pbn < cow_tree_capacity(COW_TREE_REFCOUNT, a->rc.height)) {
		ret = cow_tree_find_locked(&a->rc, &a->lock, pbn, false, &leaf,
					   &err);
		if (!ret && leaf)
			ret = cow_rc_get(leaf->page, cow_leaf_index(leaf, pbn));
	}
	g_mutex_unlock(&a->lock);
	return ret;
}

/* Whether pbn has the bit at offset (0: busy, 1: pinned) set. */
static bool side_bit(struct cow_alloc *a, uint64_t pbn, bool pinned)
{
	struct cow_node *leaf;
	bool set = false;

	g_mutex_lock(&a->lock);
	leaf = leaf_cached(a, pbn);
	if (leaf && leaf->side) {
		struct cow_rc_side *s = leaf->side;

		set = bit_test(pinned ? s->pinned : s->busy,
			       cow_leaf_index(leaf, pbn));
	}
	g_mutex_unlock(&a->lock);
	return set;
}

bool cow_alloc_is_busy(struct cow_alloc *a, uint64_t pbn)
{
	return side_bit(a, pbn, false);
}

bool cow_alloc_is_pinned(struct cow_alloc *a, uint64_t pbn)
{
	return side_bit(a, pbn, true);
}
