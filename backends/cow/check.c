/* SPDX-License-Identifier: MIT */
/*
 * The offline checker (see check.h).  Walks each tree from its root,
 * reading pages with plain pread, verifying them with format.c, counting
 * every reference (a shared page or block is counted once per parent and
 * walked or read once), then compares the counts with the refcount
 * tree's.  Several volumes may share block-map pages (snapshots and
 * clones) and data blocks (clone_range): counts are references.  A
 * container on a URL (nfs://, rbd://) is read through its store
 * (store.c), as the backend reads it; a local file with pread.
 */
#include "backends/cow/check.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cow/cow.h"
#include "backends/cow/cow_int.h"
#include "backends/cow/format.h"

#define MAX_REPORTS 100

enum block_kind { KIND_NONE, KIND_RESERVED, KIND_PAGE, KIND_DATA };

struct checker {
	int fd;				/* a local file, else -1 */
	struct backend *store;		/* a URL's store, else NULL */
	struct cow_sb sb;
	uint64_t file_size;
	uint32_t *refs;			/* references found, per pbn */
	uint32_t *counts;		/* the refcount tree's, per pbn */
	uint8_t *kind;			/* enum block_kind, per pbn */
	GArray *volumes;		/* struct cow_volume_entry */
	GHashTable *map_pages;		/* pbn -> index + 1 in volumes of the
					 * first volume reaching it */
	unsigned int flags;		/* enum cow_check_flags */
	uint8_t *data;			/* COW_CHECK_DATA: a block buffer */
	struct cow_check_result *res;
	cow_check_report_t report;
	void *opaque;
};

static void problem(struct checker *c, const char *fmt, ...)
	G_GNUC_PRINTF(2, 3);

static void problem(struct checker *c, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	c->res->errors++;
	if (!c->report || c->res->errors > MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->report(c->opaque, msg);
}

/* Count a reference to pbn as kind; true the first time pbn is seen. */
static bool ref_block(struct checker *c, uint64_t pbn, enum block_kind kind,
		      const char *what)
{
	if (pbn < c->sb.first_block || pbn >= c->sb.nr_blocks) {
		problem(c, "%s: block %llu is outside the container (%llu blocks)",
			what, (unsigned long long)pbn,
			(unsigned long long)c->sb.nr_blocks);
		return false;
	}
	if (c->kind[pbn] != KIND_NONE && c->kind[pbn] != kind)
		problem(c, "%s: block %llu is used both as a %s and as a %s",
			what, (unsigned long long)pbn,
			c->kind[pbn] == KIND_PAGE ? "metadata page" : "data block",
			kind == KIND_PAGE ? "metadata page" : "data block");
	c->kind[pbn] = (uint8_t)kind;
	if (c->refs[pbn] < UINT32_MAX)
		c->refs[pbn]++;
	return c->refs[pbn] == 1;
}

/* Read one block: 0, or a problem. */
static int read_block(struct checker *c, uint64_t pbn, uint8_t *buf,
		      const char *what)
{
	ssize_t n;

	if (c->store) {
		n = cow_store_rw(c->store, false, buf, COW_BLOCK_SIZE,
				 pbn << COW_BLOCK_SHIFT);
	} else {
		n = pread(c->fd, buf, COW_BLOCK_SIZE,
			  (off_t)(pbn << COW_BLOCK_SHIFT));
		if (n < 0)
			n = -errno;
	}
	if (n == (ssize_t)COW_BLOCK_SIZE)
		return 0;
	if (n < 0)
		problem(c, "%s at block %llu: read error: %s", what,
			(unsigned long long)pbn, g_strerror((int)-n));
	else
		problem(c, "%s at block %llu: past the end of the file",
			what, (unsigned long long)pbn);
	return -EIO;
}

/* Read data block pbn and compare its checksum with csum. */
static void verify_data(struct checker *c, uint64_t pbn, uint64_t csum,
			const char *what)
{
	uint64_t got;

	if (read_block(c, pbn, c->data, what) < 0) {
		c->res->bad_data++;
		return;
	}
	got = cow_csum_block(c->sb.csum_type, c->data);
	if (got == csum)
		return;
	c->res->bad_data++;
	problem(c, "%s (physical block %llu): checksum mismatch (expected %016llx, read %016llx)",
		what, (unsigned long long)pbn, (unsigned long long)csum,
		(unsigned long long)got);
}

struct walk {
	enum cow_tree_kind tree;
	uint64_t owner;
	uint64_t key_limit;
	const char *name;
	guint vol_index;		/* block maps: the volume's */
};

/*
 * A block-map page reached from a second parent: sharing is allowed only
 * for pages written no later than the last snapshot of every volume that
 * reaches them (a writer copies such pages before changing them; a newer
 * page shared would be changed under the other volume).
 */
static void check_shared_page(struct checker *c, const struct walk *w,
			      const struct cow_ptr *ptr)
{
	const struct cow_volume_entry *me, *first;
	gpointer idx;

	if (ptr->pbn < c->sb.first_block || ptr->pbn >= c->sb.nr_blocks ||
	    c->kind[ptr->pbn] != KIND_PAGE)
		return;
	idx = g_hash_table_lookup(c->map_pages, GSIZE_TO_POINTER(ptr->pbn));
	if (!idx)
		return;
	me = &g_array_index(c->volumes, struct cow_volume_entry,
			    w->vol_index);
	first = &g_array_index(c->volumes, struct cow_volume_entry,
			       GPOINTER_TO_UINT(idx) - 1);
	if (ptr->gen > me->last_snapshot_generation ||
	    ptr->gen > first->last_snapshot_generation)
		problem(c, "block-map page at block %llu (generation %llu) is shared by volumes %llu and %llu, but is newer than the last snapshot of %llu (%llu)",
			(unsigned long long)ptr->pbn,
			(unsigned long long)ptr->gen,
			(unsigned long long)first->id,
			(unsigned long long)me->id,
			(unsigned long long)(ptr->gen > me->last_snapshot_generation ?
					     me->id : first->id),
			(unsigned long long)(ptr->gen > me->last_snapshot_generation ?
					     me->last_snapshot_generation :
					     first->last_snapshot_generation));
}

static void check_leaf(struct checker *c, const struct walk *w,
		       const uint8_t *page, uint64_t pbn, uint64_t first_key,
		       uint64_t page_gen, uint64_t want_used)
{
	unsigned int i, n = cow_tree_entries(w->tree, 0);
	struct cow_volume_entry v;
	struct cow_err err;
	uint64_t used = 0, dpbn, csum;
	char what[96];

	for (i = 0; i < n; i++) {
		uint64_t key = first_key + i;

		if (!cow_leaf_entry_used(w->tree, page, i))
			goto next;
		used++;
		if (key >= w->key_limit) {
			problem(c, "%s leaf at block %llu: entry for key %llu is past the end (%llu)",
				w->name, (unsigned long long)pbn,
				(unsigned long long)key,
				(unsigned long long)w->key_limit);
			continue;
		}
		switch (w->tree) {
		case COW_TREE_MAP:
			cow_map_get(page, i, &dpbn, &csum);
			snprintf(what, sizeof(what), "volume %llu block %llu",
				 (unsigned long long)w->owner,
				 (unsigned long long)key);
			if (ref_block(c, dpbn, KIND_DATA, what)) {
				c->res->data_blocks++;
				if (c->flags & COW_CHECK_DATA)
					verify_data(c, dpbn, csum, what);
			}
			if (c->sb.csum_type == COW_CSUM_CRC32C && csum >> 32)
				problem(c, "%s: crc32c checksum wider than 32 bits",
					what);
			break;
		case COW_TREE_REFCOUNT:
			c->counts[key] = cow_rc_get(page, i);
			break;
		case COW_TREE_VOLUME:
			if (cow_vol_get(page, i, &v, &err) < 0)
				problem(c, "volume leaf at block %llu: %s",
					(unsigned long long)pbn, err.msg);
			else if (v.id != key)
				problem(c, "volume leaf at block %llu: volume %llu in the slot of %llu",
					(unsigned long long)pbn,
					(unsigned long long)v.id,
					(unsigned long long)key);
			else
				g_array_append_val(c->volumes, v);
			break;
		}
		continue;
next:
		if (w->tree == COW_TREE_MAP) {
			cow_map_get(page, i, &dpbn, &csum);
			if (csum)
				problem(c, "%s leaf at block %llu: hole %llu has a checksum",
					w->name, (unsigned long long)pbn,
					(unsigned long long)key);
		} else if (w->tree == COW_TREE_VOLUME &&
			   cow_vol_get(page, i, &v, &err) < 0) {
			problem(c, "volume leaf at block %llu: %s",
				(unsigned long long)pbn, err.msg);
		}
	}
	(void)page_gen;
	if (used != want_used)
		problem(c, "%s leaf at block %llu: %llu entries used, its pointer says %llu",
			w->name, (unsigned long long)pbn,
			(unsigned long long)used,
			(unsigned long long)want_used);
}

/* Walk the subtree ptr points to (a page at level, covering first_key). */
static void walk_page(struct checker *c, const struct walk *w,
		      const struct cow_ptr *ptr, unsigned int level,
		      uint64_t first_key)
{
	struct cow_page_hdr want = {
		.tree = (uint8_t)w->tree,
		.level = (uint8_t)level,
		.nr_entries = (uint16_t)cow_tree_entries(w->tree, level),
		.generation = ptr->gen,
		.pbn = ptr->pbn,
		.first_key = first_key,
	};
	uint64_t span, sum = 0;
	struct cow_err err;
	struct cow_ptr e;
	uint8_t *page;
	unsigned int i;

	if (!ref_block(c, ptr->pbn, KIND_PAGE, w->name)) {
		/* Seen (shared) or out of range. */
		if (w->tree == COW_TREE_MAP)
			check_shared_page(c, w, ptr);
		return;
	}
	if (w->tree == COW_TREE_MAP)
		g_hash_table_insert(c->map_pages, GSIZE_TO_POINTER(ptr->pbn),
				    GUINT_TO_POINTER(w->vol_index + 1));
	c->res->pages++;
	page = g_malloc(COW_BLOCK_SIZE);
	if (read_block(c, ptr->pbn, page, w->name) < 0)
		goto out;
	memcpy(want.uuid, c->sb.uuid, 16);
	if (cow_page_verify(page, &want, &err) < 0) {
		problem(c, "%s", err.msg);
		goto out;
	}
	if (level == 0) {
		check_leaf(c, w, page, ptr->pbn, first_key, ptr->gen,
			   ptr->used);
		goto out;
	}
	span = cow_tree_span(w->tree, level - 1);
	for (i = 0; i < COW_INTERIOR_ENTRIES; i++) {
		uint64_t child_first = first_key + (uint64_t)i * span;

		cow_interior_get(page, i, &e);
		if (e.pbn == 0) {
			if (e.gen || e.used)
				problem(c, "%s page at block %llu: absent entry %u has generation or used",
					w->name, (unsigned long long)ptr->pbn,
					i);
			continue;
		}
		if (child_first >= w->key_limit)
			problem(c, "%s page at block %llu: entry %u is past the end of the keys",
				w->name, (unsigned long long)ptr->pbn, i);
		if (e.gen == 0 || e.gen > ptr->gen)
			problem(c, "%s page at block %llu: entry %u has generation %llu, newer than its page's %llu",
				w->name, (unsigned long long)ptr->pbn, i,
				(unsigned long long)e.gen,
				(unsigned long long)ptr->gen);
		if (e.used == 0 || e.used > span)
			problem(c, "%s page at block %llu: entry %u claims %llu used",
				w->name, (unsigned long long)ptr->pbn, i,
				(unsigned long long)e.used);
		sum += e.used;
		walk_page(c, w, &e, level - 1, child_first);
	}
	if (sum != ptr->used)
		problem(c, "%s page at block %llu: entries hold %llu used, its pointer says %llu",
			w->name, (unsigned long long)ptr->pbn,
			(unsigned long long)sum,
			(unsigned long long)ptr->used);
out:
	g_free(page);
}

static void walk_tree(struct checker *c, const struct walk *w,
		      const struct cow_ptr *root)
{
	if (root->pbn == 0) {
		if (root->used)
			problem(c, "%s: empty root claims %llu used", w->name,
				(unsigned long long)root->used);
		return;
	}
	walk_page(c, w, root, root->height - 1u, 0);
}

/* Compare references with counts. */
static void compare_counts(struct checker *c)
{
	uint64_t pbn;

	for (pbn = 0; pbn < c->sb.nr_blocks; pbn++) {
		uint32_t want = c->refs[pbn], have = c->counts[pbn];

		if (have)
			c->res->used_blocks++;
		if (have == want)
			continue;
		if (have > want) {
			c->res->leaked++;
			problem(c, "block %llu: count %u, but %u references (leaked)",
				(unsigned long long)pbn, have, want);
		} else {
			problem(c, "block %llu: count %u, but %u references",
				(unsigned long long)pbn, have, want);
		}
	}
	if (c->res->used_blocks != c->sb.refcount_root.used)
		problem(c, "refcount root says %llu blocks are used, the leaves say %llu",
			(unsigned long long)c->sb.refcount_root.used,
			(unsigned long long)c->res->used_blocks);
}

static void check_volumes(struct checker *c)
{
	bool have_default = false;
	guint i, j;

	c->res->volumes = c->volumes->len;
	for (i = 0; i < c->volumes->len; i++) {
		struct cow_volume_entry *v =
			&g_array_index(c->volumes, struct cow_volume_entry, i);
		char name[64];
		struct walk w = {
			.tree = COW_TREE_MAP,
			.owner = v->id,
			.key_limit = v->size >> COW_BLOCK_SHIFT,
			.name = name,
			.vol_index = i,
		};

		snprintf(name, sizeof(name), "volume %llu block map",
			 (unsigned long long)v->id);
		have_default |= v->id == c->sb.default_volume;
		if (v->last_snapshot_generation > c->sb.generation ||
		    v->create_generation > c->sb.generation)
			problem(c, "volume %llu: created or snapshotted in a generation after the superblock's",
				(unsigned long long)v->id);
		if (v->id != c->sb.default_volume &&
		    !cow_volume_name_valid(v->name))
			problem(c, "volume %llu: invalid name \"%s\"",
				(unsigned long long)v->id, v->name);
		for (j = 0; j < i; j++)
			if (!strcmp(g_array_index(c->volumes,
						  struct cow_volume_entry,
						  j).name, v->name))
				problem(c, "volumes %llu and %llu have the same name \"%s\"",
					(unsigned long long)g_array_index(
						c->volumes,
						struct cow_volume_entry, j).id,
					(unsigned long long)v->id, v->name);
		if (v->id >= c->sb.next_volume_id)
			problem(c, "volume %llu: id not below next_volume_id %llu",
				(unsigned long long)v->id,
				(unsigned long long)c->sb.next_volume_id);
		if (v->map_root.gen > c->sb.generation)
			problem(c, "volume %llu: map root newer than the superblock",
				(unsigned long long)v->id);
		walk_tree(c, &w, &v->map_root);
	}
	if (!have_default)
		problem(c, "the default volume %llu does not exist",
			(unsigned long long)c->sb.default_volume);
}

/* Open the container at path for reading: a local file (c->fd) or a
 * URL's store (c->store).  0, or -errno with the reason in err. */
static int open_container(struct checker *c, const char *path,
			  struct cow_err *err)
{
	g_autoptr(GError) error = NULL;
	struct backend_open_args args = { .path = path, .error = &error };
	int ret;

	if (!backend_is_url(path)) {
		c->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (c->fd >= 0)
			return 0;
		snprintf(err->msg, sizeof(err->msg), "open: %s",
			 g_strerror(errno));
		return -errno;
	}
	ret = cow_store_open(&args, true, &c->store);
	if (ret < 0)
		snprintf(err->msg, sizeof(err->msg), "open: %s",
			 error ? error->message : g_strerror(-ret));
	return ret;
}

/* The size of the container in bytes, or -1 when it cannot tell. */
static int64_t container_size(const struct checker *c)
{
	struct stat st;

	if (c->store)
		return backend_get_size(c->store);
	return fstat(c->fd, &st) == 0 ? (int64_t)st.st_size : -1;
}

int cow_check(const char *path, unsigned int flags,
	      struct cow_check_result *res, cow_check_report_t report,
	      void *opaque)
{
	struct checker c = { .fd = -1, .res = res, .report = report,
			     .opaque = opaque, .flags = flags };
	struct cow_err err = { "" }, fallback;
	struct walk w;
	int64_t size;
	uint32_t slot;
	int ret;

	memset(res, 0, sizeof(*res));
	ret = open_container(&c, path, &err);
	if (ret < 0) {
		if (report)
			report(opaque, err.msg);
		return ret;
	}
	if (c.store)
		ret = cow_store_read_sb(c.store, &c.sb, &slot, &fallback, &err);
	else
		ret = cow_sb_read(c.fd, &c.sb, &slot, &fallback, &err);
	if (ret < 0) {
		if (report)
			report(opaque, err.msg);
		goto out;
	}
	if (fallback.msg[0])
		problem(&c, "%s", fallback.msg);
	if (cow_sb_check_features(&c.sb, true, &err) < 0)
		problem(&c, "%s", err.msg);
	res->generation = c.sb.generation;
	res->nr_blocks = c.sb.nr_blocks;
	size = container_size(&c);
	if (size >= 0 && (uint64_t)size < c.sb.nr_blocks << COW_BLOCK_SHIFT) {
		problem(&c, "truncated image: %llu blocks in use, the file has %lld bytes",
			(unsigned long long)c.sb.nr_blocks, (long long)size);
		/* Counting needs memory for every block the superblock
		 * claims, which the file does not back: stop here. */
		ret = 0;
		goto out;
	}
	c.refs = g_try_new0(uint32_t, c.sb.nr_blocks);
	c.counts = g_try_new0(uint32_t, c.sb.nr_blocks);
	c.kind = g_try_new0(uint8_t, c.sb.nr_blocks);
	if (!c.refs || !c.counts || !c.kind) {
		ret = -ENOMEM;
		if (report)
			report(opaque, "not enough memory to check this image");
		goto out;
	}
	c.volumes = g_array_new(FALSE, FALSE, sizeof(struct cow_volume_entry));
	c.map_pages = g_hash_table_new(g_direct_hash, g_direct_equal);
	c.data = g_malloc(COW_BLOCK_SIZE);
	for (slot = 0; slot < COW_FIRST_BLOCK; slot++) {
		c.refs[slot] = 1;
		c.kind[slot] = KIND_RESERVED;
	}
	w = (struct walk){ COW_TREE_REFCOUNT, 0, c.sb.nr_blocks,
			   "refcount tree", 0 };
	walk_tree(&c, &w, &c.sb.refcount_root);
	w = (struct walk){ COW_TREE_VOLUME, 0, c.sb.next_volume_id,
			   "volume tree", 0 };
	walk_tree(&c, &w, &c.sb.volume_root);
	check_volumes(&c);
	compare_counts(&c);
	ret = 0;
out:
	if (c.volumes)
		g_array_free(c.volumes, TRUE);
	if (c.map_pages)
		g_hash_table_destroy(c.map_pages);
	g_free(c.refs);
	g_free(c.counts);
	g_free(c.kind);
	g_free(c.data);
	if (c.store)
		backend_close(c.store);
	if (c.fd >= 0)
		close(c.fd);
	return ret;
}
