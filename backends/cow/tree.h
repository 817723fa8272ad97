/* SPDX-License-Identifier: MIT */
/*
 * The in-memory side of the cow format's radix trees (FORMAT.md section
 * 5): pages are loaded on first use and cached as nodes; changes are made
 * in the cached pages and mark the path to the root dirty; a commit gives
 * every dirty node a new location (copy-on-write) and encodes the pages.
 *
 * Locking: a tree has no lock of its own.  Its owner's lock (the image's
 * map_lock for block maps and the volume tree, alloc_lock for the
 * refcount tree) is held around every call, except cow_tree_read_page().
 * Pages are never read with the lock held: a walk that needs a page
 * returns -EAGAIN and describes it in a struct cow_load; the caller drops
 * the lock, reads it (cow_tree_read_page), retakes the lock and walks
 * again with the page, which is attached only if the parent still points
 * at it.  cow_tree_find_locked() does this loop.
 *
 * Lifetime: nodes live until cow_tree_destroy (there is no eviction yet),
 * so a node pointer stays valid while the tree exists.  pins count users
 * that keep a node across lock drops (requests holding a leaf), for the
 * eviction to come.
 *
 * Invariants: a loaded node's parent is loaded; node->used is the number
 * of used leaf entries below it, in memory; every ancestor of a dirty
 * node is dirty; a node with pbn == 0 has never been written (or became
 * empty) and is "absent" on disk.
 */
#ifndef DIOLOOP_COW_TREE_H
#define DIOLOOP_COW_TREE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/cow/format.h"

/* What a tree's pages are checked against when loaded. */
struct backend;

struct cow_meta {
	struct backend *store;		/* the container's bytes (store.c) */
	const char *path;		/* for messages */
	uint8_t uuid[16];
	uint8_t csum_type;
	uint64_t first_block;
	_Atomic uint64_t nr_blocks;	/* referenced pbns are below it */
};

struct cow_node {
	struct cow_node *parent;
	struct cow_node **child;	/* interior: COW_INTERIOR_ENTRIES slots */
	uint8_t *page;			/* COW_BLOCK_SIZE, entries on-disk style */
	uint8_t *orig;			/* leaves that may be shared: the page
					 * as last written, kept by
					 * cow_tree_will_change; or NULL */
	void *side;			/* the owner's per-node data, or NULL */
	uint64_t first_key;
	uint64_t pbn, gen;		/* last location written (0: absent) */
	uint64_t used;			/* used leaf entries below, in memory */
	uint32_t nr_children;		/* loaded children */
	uint32_t pins;
	uint16_t slot;			/* index in the parent */
	uint8_t level;			/* 0: leaf */
	bool dirty;
};

struct cow_tree {
	enum cow_tree_kind kind;
	const struct cow_meta *meta;
	uint64_t owner;			/* page header owner field */
	uint64_t key_limit;		/* entries at keys >= it are empty */
	uint64_t shared_gen;		/* pages written in a generation <= it
					 * may be shared (block maps: the
					 * volume's last_snapshot_generation) */
	unsigned int height;
	struct cow_node *root;		/* always loaded once opened */
	size_t nr_nodes, nr_dirty;
	void (*free_side)(void *side);	/* frees node->side, or NULL */
};

/* A page a walk needs: read ptr.pbn into page, then walk again. */
struct cow_load {
	struct cow_ptr ptr;		/* expected pbn, gen, used */
	uint64_t first_key;
	uint8_t level;
	uint8_t *page;			/* filled by cow_tree_read_page */
};

/* A page image to write at commit. */
struct cow_wpage {
	uint64_t pbn;
	uint8_t *buf;			/* COW_BLOCK_SIZE, aligned */
};

/* Allocate a new location for a page; apply or queue a reference
 * change.  0 or -errno. */
typedef int (*cow_alloc_page_t)(void *opaque, uint64_t *pbn);
typedef int (*cow_ref_t)(void *opaque, uint64_t pbn, int delta);
/*
 * Release the old location of node n (level, first_key) that may be
 * shared (old_gen <= the tree's shared_gen), given the page's content as
 * last written (orig: its entries name its children).  0 or -errno.
 */
typedef int (*cow_release_t)(void *opaque, const struct cow_node *n,
			     uint64_t old_pbn, uint64_t old_gen,
			     const uint8_t *orig);

void cow_tree_init(struct cow_tree *t, enum cow_tree_kind kind,
		   const struct cow_meta *meta, uint64_t owner,
		   uint64_t key_limit);
/*
 * Set the root from a committed pointer; root->pbn != 0 reads the root
 * page (no lock needed: before the tree is shared).  0 or -errno (-EUCLEAN
 * for a corrupt page, -EIO, why in err).
 */
int cow_tree_open(struct cow_tree *t, const struct cow_ptr *root,
		  struct cow_err *err);
void cow_tree_destroy(struct cow_tree *t);

/* An aligned, zeroed page buffer. */
uint8_t *cow_page_alloc(void);

/*
 * Read the page ld describes into ld->page (allocated here): 0, or -EIO /
 * -EUCLEAN (a short read: the page is past the end of the file) with err.
 * Call without the owner's lock.
 */
int cow_tree_read_page(const struct cow_meta *meta, struct cow_load *ld,
		       struct cow_err *err);

/*
 * Walk to the leaf holding key (< capacity).  0 with *leaf (NULL when the
 * subtree is absent and !create: every entry there is empty); -EAGAIN with
 * ld describing a page to load; -EUCLEAN for a corrupt page (why in err).
 * ld->page, when set, is consumed (attached or freed).
 */
int cow_tree_find(struct cow_tree *t, uint64_t key, bool create,
		  struct cow_load *ld, struct cow_node **leaf,
		  struct cow_err *err);
/* cow_tree_find with the load loop: lock is the owner's lock, held on
 * entry and exit (dropped around reads). */
int cow_tree_find_locked(struct cow_tree *t, GMutex *lock, uint64_t key,
			 bool create, struct cow_node **leaf,
			 struct cow_err *err);

/*
 * The first key in [key, end) whose leaf entry is used (want_used) or
 * unused, skipping subtrees by their used counts: 0 with *found (end when
 * there is none), -EAGAIN with ld, or -EUCLEAN.
 */
int cow_tree_seek(struct cow_tree *t, uint64_t key, uint64_t end,
		  bool want_used, struct cow_load *ld, uint64_t *found,
		  struct cow_err *err);
int cow_tree_seek_locked(struct cow_tree *t, GMutex *lock, uint64_t key,
			 uint64_t end, bool want_used, uint64_t *found,
			 struct cow_err *err);

/* A leaf entry is about to change: when its page may be shared (written
 * in a generation <= shared_gen), keep a copy of the content as last
 * written, once per transaction.  Call before changing entries of a
 * tree that has a shared_gen. */
void cow_tree_will_change(struct cow_tree *t, struct cow_node *leaf);

/* A leaf entry changed; used_delta is -1, 0 or +1: update used counts
 * and mark the path dirty. */
void cow_tree_changed(struct cow_tree *t, struct cow_node *leaf,
		      int used_delta);

/* Raise the height to cover at least nr_keys keys (new roots on top).
 * 0 or -EFBIG. */
int cow_tree_grow(struct cow_tree *t, uint64_t nr_keys);

/* Entry index of key in a leaf. */
static inline unsigned int cow_leaf_index(const struct cow_node *leaf,
					  uint64_t key)
{
	return (unsigned int)(key - leaf->first_key);
}

/* The root pointer as it will be after cow_tree_write (or as last
 * written when clean). */
void cow_tree_root_ptr(const struct cow_tree *t, struct cow_ptr *p);

/*
 * Give every dirty, non-empty node a new location for generation gen
 * (copy-on-write: the old location gets ref(-1), the new one ref(+1));
 * dirty nodes that became empty lose their location (ref(-1)).  With
 * release set, an old location written in a generation <= shared_gen is
 * given to release instead of ref(-1).  Nodes already placed for gen keep
 * theirs.  Repeats until no node needs one (allocation may dirty more
 * nodes of this very tree: the refcount tree).  0 or the first -errno of
 * alloc_page, ref or release.
 */
int cow_tree_assign(struct cow_tree *t, uint64_t gen,
		    cow_alloc_page_t alloc_page, cow_ref_t ref,
		    cow_release_t release, void *opaque);
/* Encode every dirty node (all placed for gen) into page images appended
 * to out (a GArray of struct cow_wpage) and mark the tree clean. */
void cow_tree_write(struct cow_tree *t, uint64_t gen, GArray *out);

#endif
