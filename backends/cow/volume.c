/* SPDX-License-Identifier: MIT */
/*
 * Volumes of a cow container (FORMAT.md section 8): opening and closing
 * them over the table of open containers, listing, snapshots and clones,
 * deletion, and clone_range.
 *
 * Snapshots and deletions change the volume tree inside a commit's seal
 * (cow_commit_volop): a snapshot is taken under map_lock between two
 * installs, so it holds exactly the writes installed before it (every
 * write that completed before cow_snapshot was called), and it is durable
 * when the commit returns.  Both run with the table's lock held, so no
 * volume is opened or closed meanwhile (a deleted volume cannot be opened
 * halfway through its deletion).
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/aio.h"

#define COW_AIO_DEPTH 256

/* The containers open in this process; open and close of every volume
 * run under registry_lock. */
static GMutex registry_lock;
static GList *registry;			/* struct cow_container */

static struct cow_container *registry_find(dev_t dev, ino_t ino)
{
	GList *l;

	for (l = registry; l; l = l->next) {
		struct cow_container *c = l->data;

		if (c->lock_fd >= 0 && c->dev == dev && c->ino == ino)
			return c;
	}
	return NULL;
}

/* The open container behind a URL (a remote store), or NULL.
 * registry_lock. */
static struct cow_container *registry_find_url(const char *url)
{
	GList *l;

	for (l = registry; l; l = l->next) {
		struct cow_container *c = l->data;

		if (c->lock_fd < 0 && !strcmp(c->path, url))
			return c;
	}
	return NULL;
}

bool cow_volume_name_valid(const char *name)
{
	size_t i, n;

	if (!name)
		return false;
	n = strlen(name);
	if (n == 0 || n > COW_VOLUME_NAME_MAX)
		return false;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];

		/* Printable ASCII, or bytes of UTF-8 sequences. */
		if (ch == '/' || ch == '@' || ch < 0x20 || ch == 0x7f)
			return false;
	}
	return g_utf8_validate(name, (gssize)n, NULL);
}

const char *cow_volume_label(const struct cow_volume_entry *e)
{
	return e->name[0] ? e->name : "(default)";
}

struct cow_volume *cow_open_volume_by_id(struct cow_container *c, uint64_t id)
{
	guint i;

	for (i = 0; i < c->vols->len; i++) {
		struct cow_volume *v = c->vols->pdata[i];

		if (v->vol.id == id)
			return v;
	}
	return NULL;
}

/*
 * Call fn for every volume entry of the volume tree, in id order, until
 * it returns non-zero (returned).  map_lock held (dropped while pages are
 * read; loaded leaves stay).  -EIO for a page that cannot be read.
 */
typedef int (*volume_fn)(struct cow_container *c, struct cow_node *leaf,
			 const struct cow_volume_entry *e, void *opaque);

static int for_each_volume(struct cow_container *c, volume_fn fn,
			   void *opaque)
{
	struct cow_err err = { "" };
	uint64_t key = 1, found;
	struct cow_node *leaf;
	int ret;

	for (;;) {
		struct cow_volume_entry e;

		ret = cow_tree_seek_locked(&c->voltree, &c->map_lock, key,
					   c->voltree.key_limit, true, &found,
					   &err);
		if (ret < 0 || found >= c->voltree.key_limit)
			break;
		ret = cow_tree_find_locked(&c->voltree, &c->map_lock, found,
					   false, &leaf, &err);
		if (ret < 0)
			break;
		if (!leaf || cow_vol_get(leaf->page, cow_leaf_index(leaf, found),
					 &e, &err) < 0 || e.id != found) {
			/* The page was checked when loaded: a bug. */
			cow_bad(&err, "volume %llu vanished from its leaf",
				(unsigned long long)found);
			ret = -EUCLEAN;
			break;
		}
		ret = fn(c, leaf, &e, opaque);
		if (ret)
			return ret;
		key = found + 1;
	}
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

struct name_search {
	const char *name;
	uint64_t id;			/* or by id when name is NULL */
	struct cow_volume_entry e;
	struct cow_node *leaf;
};

static int match_name(struct cow_container *c, struct cow_node *leaf,
		      const struct cow_volume_entry *e, void *opaque)
{
	struct name_search *s = opaque;

	(void)c;
	if (s->name ? strcmp(e->name, s->name) != 0 : e->id != s->id)
		return 0;
	s->e = *e;
	s->leaf = leaf;
	return 1;
}

/* Find the volume called name ("": the default volume).  0, -ENOENT or
 * -EIO.  map_lock held (dropped while pages are read). */
static int find_volume(struct cow_container *c, const char *name,
		       struct name_search *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	if (name[0])
		s->name = name;
	else
		s->id = c->sb.default_volume;	/* never changes */
	ret = for_each_volume(c, match_name, s);
	if (ret < 0)
		return ret;
	return ret ? 0 : -ENOENT;
}

/* ---- open and close ---- */

/* Limits: everything the engine does is in whole 4 KiB blocks. */
static void set_limits(struct backend *b)
{
	b->limits = (struct backend_limits){
		.request_alignment = COW_BLOCK_SIZE,
		.mem_alignment = COW_BLOCK_SIZE,
		.block_size = COW_BLOCK_SIZE,
		.max_transfer = 1u << 20,
		.max_segs = 1024,
		.max_size = cow_max_volume_size(),
	};
}

/* Find v's entry by name and load its map root.  Registry lock held. */
static int volume_load(struct cow_container *c, struct cow_volume *v,
		       const char *name)
{
	struct cow_err err = { "" };
	struct name_search s;
	bool busy;
	int ret;

	g_mutex_lock(&c->map_lock);
	ret = find_volume(c, name, &s);
	busy = !ret && cow_open_volume_by_id(c, s.e.id);
	g_mutex_unlock(&c->map_lock);
	/* -ENOENT unsaid: the caller's to say (a lookup of a name that is
	 * not there is no event for the daemon's log). */
	if (ret < 0)
		return ret;
	if (busy) {
		g_warning("%s: volume %s is already open in this process",
			  c->meta.path, cow_volume_label(&s.e));
		return -EBUSY;
	}
	v->vol = s.e;
	cow_tree_init(&v->map, COW_TREE_MAP, &c->meta, v->vol.id,
		      v->vol.size >> COW_BLOCK_SHIFT);
	v->map.shared_gen = v->vol.last_snapshot_generation;
	ret = cow_tree_open(&v->map, &v->vol.map_root, &err);
	if (ret < 0) {
		g_warning("%s: volume %s: %s", c->meta.path,
			  cow_volume_label(&v->vol), err.msg);
		return ret;
	}
	atomic_init(&v->size, v->vol.size);
	return 0;
}

static void volume_free(struct cow_volume *v)
{
	dio_engine_clear(&v->dio);
	if (v->own_aio) {
		dioloop_aio_free(v->own_aio);
		v->b->aio = NULL;
	}
	cow_tree_destroy(&v->map);
	g_free(v);
}

/* Open a volume of the container at args->path, attaching to the
 * container when it is open already.  Control thread. */
int cow_open(struct backend *b, const struct backend_open_args *args)
{
	const char *name = args->volume ? args->volume : "";
	struct cow_volume *v = g_new0(struct cow_volume, 1);
	struct cow_container *c = NULL;
	bool fresh = false, locked_elsewhere = false;
	struct stat st;
	int ret;

	v->b = b;
	dio_engine_init(&v->dio);
	v->growable = args->flags & BACKEND_OPEN_GROWABLE;
	g_mutex_lock(&registry_lock);
	if (!cow_store_is_local(args))
		c = registry_find_url(args->path);
	else if ((args->file ? fstat(args->file->fd, &st) :
			       stat(args->path, &st)) == 0)
		c = registry_find(st.st_dev, st.st_ino);
	if (!c) {
		bool rdonly = (args->flags & BACKEND_OPEN_RDONLY) &&
			      !(args->flags & BACKEND_OPEN_CONTAINER_RW);

		c = g_new0(struct cow_container, 1);
		fresh = true;
		ret = cow_container_open(c, args, rdonly);
		if (ret == -EBUSY && !rdonly &&
		    !(args->flags & BACKEND_OPEN_CONTAINER_RW)) {
			/* Written by another process: a snapshot can still
			 * be read (it opens read-only whatever the flags).
			 * Not open's failure: the line is logged, as ever. */
			if (args->error && *args->error) {
				g_warning("%s", (*args->error)->message);
				g_clear_error(args->error);
			}
			cow_container_close(c);
			c = g_new0(struct cow_container, 1);
			ret = cow_container_open(c, args, true);
			locked_elsewhere = true;
		}
		if (ret < 0)
			goto out_fail;
	}
	v->c = c;
	ret = volume_load(c, v, name);
	if (ret < 0)
		goto out_fail;
	v->rdonly = (args->flags & BACKEND_OPEN_RDONLY) ||
		    (v->vol.flags & COW_VOL_READONLY);
	if (fresh && v->rdonly && !(args->flags & BACKEND_OPEN_CONTAINER_RW))
		cow_container_make_rdonly(c);
	if (!v->rdonly && locked_elsewhere) {
		g_warning("%s: the image is open for writing elsewhere",
			  c->meta.path);
		ret = -EBUSY;
		goto out_fail;
	}
	if (!v->rdonly && c->rdonly) {
		g_warning("%s: volume %s: cannot be written: the image is open read-only in this process (open its first read-only volume with BACKEND_OPEN_CONTAINER_RW)",
			  c->meta.path, cow_volume_label(&v->vol));
		ret = -EBUSY;
		goto out_fail;
	}
	if (!v->rdonly && atomic_load(&c->failed)) {
		g_warning("%s: a commit failed: the image is read-only until it is closed",
			  c->meta.path);
		ret = -EIO;
		goto out_fail;
	}
	if (fresh) {
		ret = cow_container_start(c);
		if (ret < 0)
			goto out_fail;
	}
	set_limits(b);
	if (!b->aio) {
		ret = dioloop_aio_new(COW_AIO_DEPTH, "cow-aio", &v->own_aio);
		if (ret < 0)
			goto out_fail;
		b->aio = v->own_aio;
	}
	g_mutex_lock(&c->map_lock);
	g_ptr_array_add(c->vols, v);
	g_mutex_unlock(&c->map_lock);
	c->users++;
	if (fresh)
		registry = g_list_prepend(registry, c);
	b->priv = v;
	g_mutex_unlock(&registry_lock);
	return 0;

out_fail:
	volume_free(v);
	if (fresh)
		cow_container_close(c);
	g_mutex_unlock(&registry_lock);
	return ret;
}

/* Commit the volume's changes and detach it; the last volume closes the
 * container.  Nothing is in flight.  Control thread. */
void cow_close(struct backend *b)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;

	g_mutex_lock(&registry_lock);
	if (--c->users == 0) {
		registry = g_list_remove(registry, c);
		cow_container_close(c);	/* commits v's changes too */
	} else {
		if (!v->rdonly && !atomic_load(&c->failed))
			cow_commit(c);
		g_mutex_lock(&c->map_lock);
		g_ptr_array_remove(c->vols, v);
		g_mutex_unlock(&c->map_lock);
	}
	volume_free(v);
	b->priv = NULL;
	g_mutex_unlock(&registry_lock);
}

/* ---- snapshots, clones, deletion ---- */

int cow_volop_prepare(struct cow_container *c, struct cow_volop *op)
{
	struct cow_err err = { "" };
	struct name_search s;
	int ret;

	ret = find_volume(c, op->name, &s);
	if (op->delete) {
		if (ret < 0)
			return ret;
		if (s.e.id == c->sb.default_volume ||
		    cow_open_volume_by_id(c, s.e.id))
			return -EBUSY;
		op->id = s.e.id;
		op->entry = s.e;
		op->leaf = s.leaf;
		return 0;
	}
	if (ret == 0)
		return -EEXIST;
	if (ret != -ENOENT)
		return ret;
	op->id = c->next_volume_id;
	if (cow_tree_grow(&c->voltree, op->id + 1) < 0)
		return -ENOSPC;
	c->voltree.key_limit = MAX(c->voltree.key_limit, op->id + 1);
	ret = cow_tree_find_locked(&c->voltree, &c->map_lock, op->id, true,
				   &op->leaf, &err);
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

void cow_volop_apply(struct cow_container *c, struct cow_volop *op,
		     uint64_t gen)
{
	unsigned int i = cow_leaf_index(op->leaf, op->id);
	struct cow_volume *src = op->src;
	struct cow_volume_entry e;
	struct cow_ptr root;

	if (op->delete) {
		memset(&e, 0, sizeof(e));
		cow_vol_set(op->leaf->page, i, &e);
		cow_tree_changed(&c->voltree, op->leaf, -1);
		root = op->entry.map_root;
		if (root.pbn)
			g_array_append_val(c->drops, ((struct cow_drop){
				.pbn = root.pbn, .gen = root.gen,
				.first_key = 0,
				.level = (uint8_t)(root.height - 1) }));
		return;
	}
	/* src's map is placed for gen: its root is final.  Every page of it
	 * is now shared, and written in a generation <= gen. */
	cow_tree_root_ptr(&src->map, &root);
	src->vol.last_snapshot_generation = gen;
	src->map.shared_gen = gen;
	src->entry_dirty = true;
	e = src->vol;
	e.id = op->id;
	e.flags = op->writable ? 0 : COW_VOL_READONLY;
	e.parent = src->vol.id;
	e.map_root = root;
	e.create_generation = gen;
	e.create_time = (uint64_t)time(NULL);
	e.last_snapshot_generation = gen;
	memset(e.name, 0, sizeof(e.name));
	g_strlcpy(e.name, op->name, sizeof(e.name));
	cow_vol_set(op->leaf->page, i, &e);
	cow_tree_changed(&c->voltree, op->leaf, +1);
	if (root.pbn)
		g_array_append_val(c->refops, ((struct cow_refop){ root.pbn, +1 }));
	c->next_volume_id = op->id + 1;
}

/* Commit op unless the container is read-only: 0 or -errno. */
static int volop_commit(struct cow_container *c, struct cow_volop *op)
{
	int ret;

	if (c->rdonly)
		return -EROFS;
	g_mutex_lock(&registry_lock);
	ret = cow_commit_volop(c, op);
	g_mutex_unlock(&registry_lock);
	return ret;
}

int cow_snapshot(struct backend *b, const char *name, bool writable)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	struct cow_volop op = { .src = v, .name = name, .writable = writable };

	if (!cow_volume_name_valid(name))
		return -EINVAL;
	return volop_commit(c, &op);
}

int cow_delete_volume(struct backend *b, const char *name)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	struct cow_volop op = { .delete = true, .name = name };

	if (!name || !name[0])
		return -EBUSY;		/* the default volume */
	if (!cow_volume_name_valid(name))
		return -ENOENT;
	return volop_commit(c, &op);
}

static int list_one(struct cow_container *c, struct cow_node *leaf,
		    const struct cow_volume_entry *e, void *opaque)
{
	struct cow_volume *v = cow_open_volume_by_id(c, e->id);
	const struct cow_volume_entry *cur = v ? &v->vol : e;
	struct cow_volume_info info = {
		.id = e->id,
		.snapshot = cur->flags & COW_VOL_READONLY,
		.parent = cur->parent,
		.size = cur->size,
		.mapped_blocks = v ? v->map.root->used : e->map_root.used,
		.create_generation = cur->create_generation,
		.create_time = cur->create_time,
		.open = v != NULL,
	};

	(void)leaf;
	g_strlcpy(info.name, e->name, sizeof(info.name));
	g_array_append_val((GArray *)opaque, info);
	return 0;
}

int cow_list_volumes(struct backend *b, GArray *out)
{
	struct cow_container *c = ((struct cow_volume *)b->priv)->c;
	int ret;

	g_mutex_lock(&c->map_lock);
	ret = for_each_volume(c, list_one, out);
	g_mutex_unlock(&c->map_lock);
	return ret;
}

/* ---- clone_range ---- */

/*
 * Share blocks [s, s + n) of src as [d, d + n) of dst, n <= one leaf on
 * either side, and never past the leaves found.  map_lock held; both
 * leaves loaded (src's may be NULL: holes).  The source entries are read
 * first, so an overlapping range inside one volume is copied, not smeared.
 */
static void clone_chunk(struct cow_container *c, struct cow_volume *dst,
			struct cow_node *sleaf, struct cow_node *dleaf,
			uint64_t s, uint64_t d, unsigned int n)
{
	uint64_t pbn[COW_MAP_ENTRIES], csum[COW_MAP_ENTRIES];
	unsigned int k;

	for (k = 0; k < n; k++) {
		pbn[k] = csum[k] = 0;
		if (sleaf)
			cow_map_get(sleaf->page, cow_leaf_index(sleaf, s + k),
				    &pbn[k], &csum[k]);
	}
	for (k = 0; k < n; k++) {
		unsigned int i = cow_leaf_index(dleaf, d + k);
		uint64_t old, old_csum;

		cow_map_get(dleaf->page, i, &old, &old_csum);
		if (old == pbn[k])
			continue;
		cow_tree_will_change(&dst->map, dleaf);
		cow_map_set(dleaf->page, i, pbn[k], csum[k]);
		cow_tree_changed(&dst->map, dleaf, (old ? -1 : 0) + (pbn[k] ? 1 : 0));
		if (pbn[k])
			g_array_append_val(c->refops,
					   ((struct cow_refop){ pbn[k], +1 }));
		if (old)
			g_array_append_val(c->refops,
					   ((struct cow_refop){ old, -1 }));
		c->changes++;
	}
}

/* Load the leaves of s in src and d in dst (created), and return them
 * with no lock dropped in between.  map_lock held.  0 or -errno. */
static int clone_leaves(struct cow_container *c, struct cow_volume *src,
			struct cow_volume *dst, uint64_t s, uint64_t d,
			struct cow_node **sleaf, struct cow_node **dleaf)
{
	struct cow_err err = { "" };
	struct cow_load ld = { 0 };
	int ret;

	for (;;) {
		ret = cow_tree_find_locked(&src->map, &c->map_lock, s, false,
					   sleaf, &err);
		if (!ret)
			ret = cow_tree_find_locked(&dst->map, &c->map_lock, d,
						   true, dleaf, &err);
		if (ret < 0)
			break;
		/* The second search may have dropped the lock: look again
		 * without dropping it (loaded nodes stay loaded). */
		ret = cow_tree_find(&src->map, s, false, &ld, sleaf, &err);
		if (ret == -EAGAIN) {
			free(ld.page);
			ld.page = NULL;
			continue;
		}
		break;
	}
	if (ret < 0) {
		cow_meta_error(c, &err);
		return -EIO;
	}
	return 0;
}

/*
 * clone_range between volumes of one container: whole 4 KiB blocks are
 * shared (the new mapping takes a reference on the data block, with the
 * same checksum).  Unaligned offsets: -EOPNOTSUPP (the core copies); a
 * length that is not a multiple of 4096 clones the whole blocks and
 * returns their bytes.  Worker thread.
 */
ssize_t cow_clone_range(struct backend *src_b, uint64_t src_pos,
			struct backend *dst_b, uint64_t dst_pos, uint64_t len)
{
	struct cow_volume *src = src_b->priv, *dst = dst_b->priv;
	struct cow_container *c = dst->c;
	uint64_t n = len >> COW_BLOCK_SHIFT, s0, d0, done = 0, changes;
	struct range_lock rl;
	bool backward;
	int ret = 0;

	if (src->c != dst->c)
		return -EXDEV;
	if (dst->rdonly)
		return -EROFS;
	if (atomic_load(&c->failed))
		return -EIO;
	if (((src_pos | dst_pos) & (COW_BLOCK_SIZE - 1)) || n == 0)
		return -EOPNOTSUPP;
	s0 = src_pos >> COW_BLOCK_SHIFT;
	d0 = dst_pos >> COW_BLOCK_SHIFT;
	/* Like memmove: inside one volume, copy from the end when the
	 * target overlaps the source from above. */
	backward = src == dst && d0 > s0 && d0 < s0 + n;
	/* Writes in flight to the target finish (and install) first. */
	range_lock_init(&rl, dst_pos, dst_pos + (n << COW_BLOCK_SHIFT), true,
			NULL);
	range_lock_acquire_wait(&dst->dio.range_locks, &rl);
	g_mutex_lock(&c->map_lock);
	while (done < n) {
		uint64_t left = n - done, s, d, k;
		struct cow_node *sleaf, *dleaf;

		if (backward) {
			/* The last blocks still to do, within one leaf on
			 * each side. */
			s = s0 + left - 1;
			d = d0 + left - 1;
			k = MIN(left, MIN(s % COW_MAP_ENTRIES,
					  d % COW_MAP_ENTRIES) + 1);
			s -= k - 1;
			d -= k - 1;
		} else {
			s = s0 + done;
			d = d0 + done;
			k = MIN(left, MIN(COW_MAP_ENTRIES - s % COW_MAP_ENTRIES,
					  COW_MAP_ENTRIES - d % COW_MAP_ENTRIES));
		}
		ret = clone_leaves(c, src, dst, s, d, &sleaf, &dleaf);
		if (ret < 0)
			break;
		clone_chunk(c, dst, sleaf, dleaf, s, d, (unsigned int)k);
		done += k;
		/* Let completions in between leaves. */
		g_mutex_unlock(&c->map_lock);
		g_mutex_lock(&c->map_lock);
	}
	changes = c->changes;
	g_mutex_unlock(&c->map_lock);
	range_lock_release(&dst->dio.range_locks, &rl);
	if (changes >= COW_COMMIT_SOON_CHANGES)
		cow_committer_kick(c);
	if (ret < 0)
		return ret;
	return (ssize_t)(n << COW_BLOCK_SHIFT);
}
