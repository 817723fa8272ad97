/* SPDX-License-Identifier: MIT */
/*
 * Cached, copy-on-write radix trees (see tree.h for the rules).
 */
#include "backends/cow/tree.h"
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint8_t *cow_page_alloc(void)
{
	void *p;

	if (posix_memalign(&p, COW_BLOCK_SIZE, COW_BLOCK_SIZE))
		g_error("cow: out of memory for a page");
	memset(p, 0, COW_BLOCK_SIZE);
	return p;
}

/* Keys covered by each child of node (node->level >= 1). */
static uint64_t child_span(const struct cow_tree *t,
			   const struct cow_node *node)
{
	return cow_tree_span(t->kind, node->level - 1u);
}

static struct cow_node *node_new(struct cow_tree *t, uint8_t level,
				 uint64_t first_key, uint8_t *page)
{
	struct cow_node *n = g_new0(struct cow_node, 1);

	n->page = page ? page : cow_page_alloc();
	n->level = level;
	n->first_key = first_key;
	if (level > 0)
		n->child = g_new0(struct cow_node *, COW_INTERIOR_ENTRIES);
	t->nr_nodes++;
	return n;
}

static void node_free(struct cow_tree *t, struct cow_node *n)
{
	unsigned int i;

	if (!n)
		return;
	if (n->child) {
		for (i = 0; i < COW_INTERIOR_ENTRIES; i++)
			node_free(t, n->child[i]);
		g_free(n->child);
	}
	if (n->side && t->free_side)
		t->free_side(n->side);
	free(n->orig);
	free(n->page);
	g_free(n);
	t->nr_nodes--;
}

void cow_tree_init(struct cow_tree *t, enum cow_tree_kind kind,
		   const struct cow_meta *meta, uint64_t owner,
		   uint64_t key_limit)
{
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	t->meta = meta;
	t->owner = owner;
	t->key_limit = key_limit;
}

void cow_tree_destroy(struct cow_tree *t)
{
	node_free(t, t->root);
	t->root = NULL;
}

int cow_tree_read_page(const struct cow_meta *meta, struct cow_load *ld,
		       struct cow_err *err)
{
	ssize_t n;

	ld->page = cow_page_alloc();
	n = cow_store_rw(meta->store, false, ld->page, COW_BLOCK_SIZE,
			 ld->ptr.pbn << COW_BLOCK_SHIFT);
	if (n == (ssize_t)COW_BLOCK_SIZE)
		return 0;
	if (n < 0)
		cow_bad(err, "reading the page at block %llu: %s",
			(unsigned long long)ld->ptr.pbn, g_strerror((int)-n));
	else
		cow_bad(err, "truncated image: the page at block %llu is past the end of the file",
			(unsigned long long)ld->ptr.pbn);
	free(ld->page);
	ld->page = NULL;
	return n < 0 ? (int)n : -EUCLEAN;
}

/* ---- validating a loaded page's entries ---- */

static int check_interior(const struct cow_tree *t, const uint8_t *page,
			  const struct cow_load *ld, struct cow_err *err)
{
	uint64_t span = cow_tree_span(t->kind, ld->level - 1u), sum = 0;
	uint64_t nr_blocks = t->meta->nr_blocks;
	struct cow_ptr e;
	unsigned int i;

	for (i = 0; i < COW_INTERIOR_ENTRIES; i++) {
		cow_interior_get(page, i, &e);
		if (e.pbn == 0) {
			if (e.gen || e.used)
				return cow_bad(err, "%s page at block %llu: entry %u is absent but has generation or used",
					       cow_tree_name(t->kind),
					       (unsigned long long)ld->ptr.pbn, i);
			continue;
		}
		if (e.pbn < t->meta->first_block || e.pbn >= nr_blocks)
			return cow_bad(err, "%s page at block %llu: entry %u points outside the container (block %llu of %llu)",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i,
				       (unsigned long long)e.pbn,
				       (unsigned long long)nr_blocks);
		if (e.gen == 0 || e.gen > ld->ptr.gen)
			return cow_bad(err, "%s page at block %llu: entry %u has generation %llu, newer than the page's %llu",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i,
				       (unsigned long long)e.gen,
				       (unsigned long long)ld->ptr.gen);
		if (e.used == 0 || e.used > span)
			return cow_bad(err, "%s page at block %llu: entry %u claims %llu used entries (1..%llu allowed)",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i,
				       (unsigned long long)e.used,
				       (unsigned long long)span);
		if (ld->first_key + (uint64_t)i * span >= t->key_limit)
			return cow_bad(err, "%s page at block %llu: entry %u is past the end of the tree's keys",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i);
		sum += e.used;
	}
	if (sum != ld->ptr.used)
		return cow_bad(err, "%s page at block %llu: entries hold %llu used, its pointer says %llu",
			       cow_tree_name(t->kind),
			       (unsigned long long)ld->ptr.pbn,
			       (unsigned long long)sum,
			       (unsigned long long)ld->ptr.used);
	return 0;
}

/* One leaf entry's range checks: NULL or what is wrong. */
static const char *leaf_entry_problem(const struct cow_tree *t,
				      const uint8_t *page, unsigned int i,
				      uint64_t key, uint64_t page_gen,
				      struct cow_err *verr)
{
	uint64_t nr_blocks = t->meta->nr_blocks, pbn, csum;
	struct cow_volume_entry v;

	switch (t->kind) {
	case COW_TREE_MAP:
		cow_map_get(page, i, &pbn, &csum);
		if (pbn == 0)
			return csum ? "a hole with a checksum" : NULL;
		if (pbn < t->meta->first_block || pbn >= nr_blocks)
			return "a data block outside the container";
		if (t->meta->csum_type == COW_CSUM_CRC32C && csum >> 32)
			return "a crc32c checksum wider than 32 bits";
		return NULL;
	case COW_TREE_REFCOUNT:
		return NULL;
	case COW_TREE_VOLUME:
		if (cow_vol_get(page, i, &v, verr) < 0)
			return verr->msg;
		if (v.id == 0)
			return NULL;
		if (v.id != key)
			return "a volume whose id is not its key";
		if (v.map_root.pbn &&
		    (v.map_root.pbn < t->meta->first_block ||
		     v.map_root.pbn >= nr_blocks))
			return "a map root outside the container";
		if (v.map_root.gen > page_gen)
			return "a map root newer than the page";
		return NULL;
	}
	return "an unknown tree";
}

static int check_leaf(const struct cow_tree *t, const uint8_t *page,
		      const struct cow_load *ld, struct cow_err *err)
{
	unsigned int i, n = cow_tree_entries(t->kind, 0);
	struct cow_err verr;
	uint64_t used = 0;
	size_t k;

	for (i = 0; i < n; i++) {
		uint64_t key = ld->first_key + i;
		const char *why = leaf_entry_problem(t, page, i, key,
						     ld->ptr.gen, &verr);

		if (why)
			return cow_bad(err, "%s page at block %llu: entry %u (key %llu): %s",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i,
				       (unsigned long long)key, why);
		if (!cow_leaf_entry_used(t->kind, page, i))
			continue;
		if (key >= t->key_limit)
			return cow_bad(err, "%s page at block %llu: entry %u (key %llu) is used past the end (%llu)",
				       cow_tree_name(t->kind),
				       (unsigned long long)ld->ptr.pbn, i,
				       (unsigned long long)key,
				       (unsigned long long)t->key_limit);
		used++;
	}
	/* Volume leaves leave the end of the page unused: zeros. */
	if (t->kind == COW_TREE_VOLUME)
		for (k = COW_PAGE_HDR + (size_t)n * COW_VOL_ENTRY_SIZE;
		     k < COW_BLOCK_SIZE; k++)
			if (page[k])
				return cow_bad(err, "%s page at block %llu: its unused tail is not zero",
					       cow_tree_name(t->kind),
					       (unsigned long long)ld->ptr.pbn);
	if (used != ld->ptr.used)
		return cow_bad(err, "%s page at block %llu: %llu entries are used, its pointer says %llu",
			       cow_tree_name(t->kind),
			       (unsigned long long)ld->ptr.pbn,
			       (unsigned long long)used,
			       (unsigned long long)ld->ptr.used);
	return 0;
}

/* Verify a page read for ld: header, then entries. */
static int check_page(const struct cow_tree *t, const struct cow_load *ld,
		      struct cow_err *err)
{
	struct cow_page_hdr want = {
		.tree = (uint8_t)t->kind,
		.level = ld->level,
		.nr_entries = (uint16_t)cow_tree_entries(t->kind, ld->level),
		.generation = ld->ptr.gen,
		.pbn = ld->ptr.pbn,
		.first_key = ld->first_key,
	};
	int ret;

	memcpy(want.uuid, t->meta->uuid, 16);
	ret = cow_page_verify(ld->page, &want, err);
	if (ret < 0)
		return ret;
	if (ld->ptr.used == 0)
		return cow_bad(err, "%s page at block %llu: stored although empty",
			       cow_tree_name(t->kind),
			       (unsigned long long)ld->ptr.pbn);
	if (ld->level > 0)
		return check_interior(t, ld->page, ld, err);
	return check_leaf(t, ld->page, ld, err);
}

/* A node for a checked page (ownership of ld->page passes to it). */
static struct cow_node *node_from_load(struct cow_tree *t,
				       struct cow_load *ld)
{
	struct cow_node *n = node_new(t, ld->level, ld->first_key, ld->page);

	ld->page = NULL;
	n->pbn = ld->ptr.pbn;
	n->gen = ld->ptr.gen;
	n->used = ld->ptr.used;
	return n;
}

int cow_tree_open(struct cow_tree *t, const struct cow_ptr *root,
		  struct cow_err *err)
{
	struct cow_load ld = {
		.ptr = *root,
		.first_key = 0,
		.level = (uint8_t)(root->height - 1),
	};
	int ret;

	t->height = root->height;
	if (root->pbn == 0) {
		t->root = node_new(t, ld.level, 0, NULL);
		return 0;
	}
	ret = cow_tree_read_page(t->meta, &ld, err);
	if (ret < 0)
		return ret;
	ret = check_page(t, &ld, err);
	if (ret < 0) {
		free(ld.page);
		return ret;
	}
	t->root = node_from_load(t, &ld);
	return 0;
}

/* Hang child c into slot s of parent. */
static void link_child(struct cow_node *parent, unsigned int s,
		       struct cow_node *c)
{
	c->parent = parent;
	c->slot = (uint16_t)s;
	parent->child[s] = c;
	parent->nr_children++;
}

/*
 * Child s of node: loaded, attached from ld->page, created empty (create),
 * or NULL when absent.  -EAGAIN with ld filled when it must be read.
 */
static int get_child(struct cow_tree *t, struct cow_node *node,
		     unsigned int s, bool create, struct cow_load *ld,
		     struct cow_node **out, struct cow_err *err)
{
	uint64_t first = node->first_key + (uint64_t)s * child_span(t, node);
	uint8_t level = (uint8_t)(node->level - 1);
	struct cow_ptr e;
	int ret;

	*out = node->child[s];
	if (*out)
		return 0;
	cow_interior_get(node->page, s, &e);
	if (e.pbn == 0) {
		if (create) {
			*out = node_new(t, level, first, NULL);
			link_child(node, s, *out);
		}
		return 0;
	}
	if (ld->page && ld->ptr.pbn == e.pbn && ld->ptr.gen == e.gen &&
	    ld->ptr.used == e.used && ld->level == level &&
	    ld->first_key == first) {
		ret = check_page(t, ld, err);
		if (ret < 0) {
			free(ld->page);
			ld->page = NULL;
			return ret;
		}
		*out = node_from_load(t, ld);
		link_child(node, s, *out);
		return 0;
	}
	free(ld->page);
	*ld = (struct cow_load){ .ptr = e, .first_key = first,
				 .level = level };
	return -EAGAIN;
}

int cow_tree_find(struct cow_tree *t, uint64_t key, bool create,
		  struct cow_load *ld, struct cow_node **leaf,
		  struct cow_err *err)
{
	struct cow_node *node = t->root, *c;
	int ret = 0;

	*leaf = NULL;
	if (key >= cow_tree_capacity(t->kind, t->height)) {
		ret = cow_bad(err, "%s: key %llu is past the tree (height %u)",
			      cow_tree_name(t->kind), (unsigned long long)key,
			      t->height);
		goto out;
	}
	while (node->level > 0) {
		unsigned int s = (unsigned int)((key - node->first_key) /
						child_span(t, node));

		ret = get_child(t, node, s, create, ld, &c, err);
		if (ret == -EAGAIN)
			return ret;
		if (ret < 0 || !c)
			goto out;
		node = c;
	}
	*leaf = node;
out:
	free(ld->page);
	ld->page = NULL;
	return ret;
}

int cow_tree_find_locked(struct cow_tree *t, GMutex *lock, uint64_t key,
			 bool create, struct cow_node **leaf,
			 struct cow_err *err)
{
	struct cow_load ld = { 0 };
	int ret;

	for (;;) {
		ret = cow_tree_find(t, key, create, &ld, leaf, err);
		if (ret != -EAGAIN)
			return ret;
		g_mutex_unlock(lock);
		ret = cow_tree_read_page(t->meta, &ld, err);
		g_mutex_lock(lock);
		if (ret < 0)
			return ret;
	}
}

/* Seek inside node from key: 1 found, 0 none in node, or -errno. */
static int seek_node(struct cow_tree *t, struct cow_node *node, uint64_t key,
		     uint64_t end, bool want_used, struct cow_load *ld,
		     uint64_t *found, struct cow_err *err)
{
	uint64_t span, first;
	unsigned int s, i, n;
	int ret;

	if (node->level == 0) {
		n = cow_tree_entries(t->kind, 0);
		for (i = cow_leaf_index(node, key);
		     i < n && node->first_key + i < end; i++) {
			if (cow_leaf_entry_used(t->kind, node->page, i) ==
			    want_used) {
				*found = node->first_key + i;
				return 1;
			}
		}
		return 0;
	}
	span = child_span(t, node);
	for (s = (unsigned int)((key - node->first_key) / span);
	     s < COW_INTERIOR_ENTRIES; s++) {
		struct cow_node *c = node->child[s];
		uint64_t used, from;
		bool absent;

		first = node->first_key + (uint64_t)s * span;
		if (first >= end)
			return 0;
		from = MAX(key, first);
		if (c) {
			used = c->used;
			absent = false;
		} else {
			struct cow_ptr e;

			cow_interior_get(node->page, s, &e);
			used = e.used;
			absent = e.pbn == 0;
		}
		if (want_used && used == 0)
			continue;
		if (!want_used && used >= span)
			continue;
		if (!want_used && (absent || used == 0)) {
			*found = from;
			return 1;
		}
		ret = get_child(t, node, s, false, ld, &c, err);
		if (ret < 0)
			return ret;
		ret = seek_node(t, c, from, end, want_used, ld, found, err);
		if (ret)
			return ret;
	}
	return 0;
}

int cow_tree_seek(struct cow_tree *t, uint64_t key, uint64_t end,
		  bool want_used, struct cow_load *ld, uint64_t *found,
		  struct cow_err *err)
{
	uint64_t cap = cow_tree_capacity(t->kind, t->height);
	int ret = 0;

	*found = end;
	if (key < MIN(end, cap)) {
		ret = seek_node(t, t->root, key, MIN(end, cap), want_used, ld,
				found, err);
		if (ret == -EAGAIN)
			return ret;
	}
	/* Keys past the tree are all unused. */
	if (ret == 0 && !want_used && end > cap)
		*found = MAX(key, cap);
	free(ld->page);
	ld->page = NULL;
	return ret < 0 ? ret : 0;
}

int cow_tree_seek_locked(struct cow_tree *t, GMutex *lock, uint64_t key,
			 uint64_t end, bool want_used, uint64_t *found,
			 struct cow_err *err)
{
	struct cow_load ld = { 0 };
	int ret;

	for (;;) {
		ret = cow_tree_seek(t, key, end, want_used, &ld, found, err);
		if (ret != -EAGAIN)
			return ret;
		g_mutex_unlock(lock);
		ret = cow_tree_read_page(t->meta, &ld, err);
		g_mutex_lock(lock);
		if (ret < 0)
			return ret;
	}
}

void cow_tree_will_change(struct cow_tree *t, struct cow_node *leaf)
{
	if (leaf->orig || !leaf->pbn || leaf->gen > t->shared_gen)
		return;
	leaf->orig = cow_page_alloc();
	memcpy(leaf->orig, leaf->page, COW_BLOCK_SIZE);
}

void cow_tree_changed(struct cow_tree *t, struct cow_node *leaf,
		      int used_delta)
{
	struct cow_node *n;

	for (n = leaf; n; n = n->parent) {
		n->used = (uint64_t)((int64_t)n->used + used_delta);
		if (!n->dirty) {
			n->dirty = true;
			t->nr_dirty++;
		} else if (used_delta == 0) {
			break;	/* ancestors of a dirty node are dirty */
		}
	}
}

int cow_tree_grow(struct cow_tree *t, uint64_t nr_keys)
{
	while (cow_tree_capacity(t->kind, t->height) < nr_keys) {
		struct cow_node *old = t->root, *root;

		if (t->height >= COW_MAX_HEIGHT)
			return -EFBIG;
		root = node_new(t, (uint8_t)t->height, 0, NULL);
		link_child(root, 0, old);
		root->used = old->used;
		root->dirty = true;
		t->nr_dirty++;
		t->root = root;
		t->height++;
	}
	return 0;
}

void cow_tree_root_ptr(const struct cow_tree *t, struct cow_ptr *p)
{
	const struct cow_node *r = t->root;

	*p = (struct cow_ptr){ 0, 0, 0, (uint8_t)t->height };
	if (r->used && r->pbn) {
		p->pbn = r->pbn;
		p->gen = r->gen;
		p->used = r->used;
	}
}

/* ---- commit ---- */

/* Collect the dirty nodes below n that need a location or lose one. */
static void collect(struct cow_node *n, uint64_t gen, GPtrArray *out)
{
	unsigned int s;

	if (!n->dirty)
		return;
	if (n->child)
		for (s = 0; s < COW_INTERIOR_ENTRIES; s++)
			if (n->child[s])
				collect(n->child[s], gen, out);
	if ((n->used && n->gen != gen) || (!n->used && n->pbn))
		g_ptr_array_add(out, n);
}

/*
 * Release n's old location.  Interior pages still hold their entries as
 * last written (cow_tree_write refreshes them only for the new location);
 * leaves that may be shared kept theirs in orig.
 */
static int release_old(struct cow_tree *t, struct cow_node *n, uint64_t old,
		       uint64_t old_gen, cow_ref_t ref, cow_release_t release,
		       void *opaque)
{
	int ret;

	if (release && old_gen <= t->shared_gen) {
		g_assert(n->level > 0 || n->orig);
		ret = release(opaque, n, old, old_gen,
			      n->level > 0 ? n->page : n->orig);
	} else {
		ret = ref(opaque, old, -1);
	}
	free(n->orig);
	n->orig = NULL;
	return ret;
}

int cow_tree_assign(struct cow_tree *t, uint64_t gen,
		    cow_alloc_page_t alloc_page, cow_ref_t ref,
		    cow_release_t release, void *opaque)
{
	GPtrArray *todo = g_ptr_array_new();
	int ret = 0;
	guint i;

	for (;;) {
		g_ptr_array_set_size(todo, 0);
		collect(t->root, gen, todo);
		if (todo->len == 0)
			break;
		for (i = 0; i < todo->len; i++) {
			struct cow_node *n = todo->pdata[i];
			uint64_t old = n->pbn, old_gen = n->gen, pbn;

			if (!n->used) {
				/* Empty: stored as absent, the old location
				 * (of any generation) is released. */
				n->pbn = 0;
				n->gen = 0;
				ret = release_old(t, n, old, old_gen, ref,
						  release, opaque);
				if (ret < 0)
					goto out;
				continue;
			}
			if (n->gen == gen)
				continue;	/* placed meanwhile */
			ret = alloc_page(opaque, &pbn);
			if (ret < 0)
				goto out;
			n->pbn = pbn;
			n->gen = gen;
			ret = ref(opaque, pbn, +1);
			if (!ret && old)
				ret = release_old(t, n, old, old_gen, ref,
						  release, opaque);
			if (ret < 0)
				goto out;
		}
	}
out:
	g_ptr_array_free(todo, TRUE);
	return ret;
}

static void write_node(struct cow_tree *t, struct cow_node *n, uint64_t gen,
		       GArray *out)
{
	struct cow_page_hdr hdr;
	struct cow_wpage w;
	unsigned int s;

	if (!n->dirty)
		return;
	if (n->child) {
		for (s = 0; s < COW_INTERIOR_ENTRIES; s++) {
			struct cow_node *c = n->child[s];
			struct cow_ptr p = { 0 };

			if (!c)
				continue;
			write_node(t, c, gen, out);
			if (c->used)
				p = (struct cow_ptr){ c->pbn, c->gen, c->used, 0 };
			cow_interior_set(n->page, s, &p);
		}
	}
	n->dirty = false;
	t->nr_dirty--;
	if (!n->used)
		return;
	g_assert(n->gen == gen && n->pbn);
	hdr = (struct cow_page_hdr){
		.tree = (uint8_t)t->kind,
		.level = n->level,
		.nr_entries = (uint16_t)cow_tree_entries(t->kind, n->level),
		.generation = gen,
		.pbn = n->pbn,
		.first_key = n->first_key,
		.owner = t->owner,
	};
	memcpy(hdr.uuid, t->meta->uuid, 16);
	w.pbn = n->pbn;
	w.buf = cow_page_alloc();
	memcpy(w.buf, n->page, COW_BLOCK_SIZE);
	cow_page_seal(w.buf, &hdr);
	g_array_append_val(out, w);
}

void cow_tree_write(struct cow_tree *t, uint64_t gen, GArray *out)
{
	write_node(t, t->root, gen, out);
}
