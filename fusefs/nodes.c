/* SPDX-License-Identifier: MIT */
/* The node table: which nodes exist, under which inode numbers, with which
 * open backend, and how long (lookups, handles, draining). */
#include <errno.h>
#include <string.h>

#include "backends/aio.h"
#include "backends/volume.h"
#include "fusefs/fs.h"
#include "fusefs/migrate.h"
#include "fusefs/nodes.h"
#include "fusefs/source.h"
#include "fusefs/spec.h"

/* Flush and close a node's backend. */
static void dioloop_node_close_backend(struct dioloop_node *node,
				       struct backend *b)
{
	int ret = backend_flush(b);

	if (ret < 0)
		g_warning("%s: flush at close: %s", node->name,
			  g_strerror(-ret));
	backend_close(b);
}

void dioloop_node_free(struct dioloop_fs *fs, struct dioloop_node *node)
{
	/* A request still ending (it replied, its handle was released,
	 * the image is gone) may not have counted itself out yet. */
	dioloop_node_drain_begin(node);
	dioloop_node_migration_free(node);
	if (node->b)
		dioloop_node_close_backend(node, node->b);
	/* Closed: now another daemon may have the image. */
	if (node->lock)
		dioloop_image_lock_put(fs, node->lock);
	dioloop_throttle_destroy(&node->throttle);
	g_mutex_clear(&node->io_lock);
	g_cond_clear(&node->io_cond);
	g_rw_lock_clear(&node->b_lock);
	g_free(node->name);
	g_free(node->image);
	g_free(node->volume);
	g_aligned_free(node);
}

/* Take a node out of the name table (its image is gone).  Lock held. */
static void dioloop_node_mark_gone(struct dioloop_fs *fs,
				   struct dioloop_node *node)
{
	if (node->gone)
		return;
	node->gone = true;
	g_hash_table_remove(fs->by_name, node->name);
}

/* Free a node nobody refers to any more.  Lock held; returns the node to
 * free outside the lock, or NULL. */
static struct dioloop_node *dioloop_node_unused(struct dioloop_fs *fs,
						struct dioloop_node *node)
{
	if (!node->gone || node->nlookup || node->open_count)
		return NULL;
	g_hash_table_remove(fs->by_ino, GUINT_TO_POINTER(node->ino));
	return node;
}

/*
 * Resolve a node name: an image file (volume NULL), or IMAGE@VOLUME for a
 * volume of the cow image IMAGE when no file has that name.  0 (src
 * filled, g_free *image and *volume) or -errno.
 */
static int dioloop_node_resolve(struct dioloop_fs *fs, const char *name,
				struct dioloop_node_src *src, char **image,
				char **volume)
{
	int ret = dioloop_check_image(fs, name, &src->served);

	*image = NULL;
	*volume = NULL;
	src->name = name;
	src->image = name;
	src->volume = NULL;
	src->snapshot = false;
	if (ret != -ENOENT || !dioloop_volume_split(name, image, volume))
		return ret;
	ret = dioloop_check_image(fs, *image, &src->served);
	if (ret < 0) {
		g_clear_pointer(image, g_free);
		g_clear_pointer(volume, g_free);
		return ret;
	}
	src->image = *image;
	src->volume = *volume;
	return 0;
}

/* Whether the volume src names exists (and is a snapshot): 0 or -ENOENT
 * (the image is not cow, or has no such volume). */
static int dioloop_volume_check(struct dioloop_fs *fs,
				struct dioloop_node_src *src)
{
	struct backend_volume_info v;
	int ret = dioloop_volumes_find(fs, src->image, src->volume, &v);

	if (ret == 0)
		src->snapshot = v.snapshot;
	return ret;
}

/* A new node for src over backend b (one lookup); fs->lock held. */
static struct dioloop_node *dioloop_node_new(struct dioloop_fs *fs,
					     const struct dioloop_node_src *src,
					     struct backend *b, bool readonly,
					     bool cow,
					     struct dioloop_image_lock *lock)
{
	/* Aligned for its counters' shards (fusefs/stats.h). */
	struct dioloop_node *node = g_aligned_alloc0(1, sizeof(*node),
						     _Alignof(struct dioloop_node));

	node->ino = fs->next_ino++;
	node->name = g_strdup(src->name);
	node->image = g_strdup(src->image);
	node->volume = g_strdup(src->volume);
	node->b = b;
	node->cow = cow;
	node->readonly = readonly;
	node->lock = lock;
	node->dev = (uint64_t)src->served.st.st_dev;
	node->ino_served = (uint64_t)src->served.st.st_ino;
	node->nlookup = 1;
	g_rw_lock_init(&node->b_lock);
	dioloop_throttle_init(&node->throttle, &fs->throttle, &fs->limits);
	g_mutex_init(&node->io_lock);
	g_cond_init(&node->io_cond);
	g_hash_table_insert(fs->by_name, node->name, node);
	g_hash_table_insert(fs->by_ino, GUINT_TO_POINTER(node->ino), node);
	return node;
}

/* True if node serves another file than the one src resolved to (the
 * image was replaced under its name).  fs->lock held. */
static bool dioloop_node_replaced(struct dioloop_fs *fs,
				  const struct dioloop_node *node,
				  const struct dioloop_node_src *src)
{
	return !fs->remote && !node->switching &&
	       (node->dev != (uint64_t)src->served.st.st_dev ||
		node->ino_served != (uint64_t)src->served.st.st_ino);
}

void dioloop_node_switch_begin(struct dioloop_fs *fs,
			       struct dioloop_node *node)
{
	g_mutex_lock(&fs->lock);
	node->switching = true;
	g_mutex_unlock(&fs->lock);
}

void dioloop_node_switch_end(struct dioloop_fs *fs, struct dioloop_node *node)
{
	g_mutex_lock(&fs->lock);
	node->switching = false;
	g_mutex_unlock(&fs->lock);
}

/* The switches of the node called name so far (0 when none). */
static unsigned int dioloop_node_switches(struct dioloop_fs *fs,
					  const char *name)
{
	struct dioloop_node *node;
	unsigned int n;

	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_name, name);
	n = node ? node->switches : 0;
	g_mutex_unlock(&fs->lock);
	return n;
}

/* Take node out of the name table because its name serves another file
 * now; handles already open keep the old one.  fs->lock held; returns
 * the node to free outside the lock, or NULL. */
static struct dioloop_node *dioloop_node_retire(struct dioloop_fs *fs,
						struct dioloop_node *node)
{
	g_message("%s: the image was replaced: new opens serve the new file, open handles keep the old one",
		  node->name);
	dioloop_node_mark_gone(fs, node);
	return dioloop_node_unused(fs, node);
}

int dioloop_node_lookup(struct dioloop_fs *fs, const char *name,
			struct dioloop_node **out)
{
	g_autofree char *image = NULL, *volume = NULL;
	struct dioloop_node *node, *drop = NULL;
	struct dioloop_image_lock *lock = NULL;
	struct dioloop_node_src src;
	struct backend *b = NULL;
	bool readonly = false, cow = false;
	unsigned int switches, retries = 0;
	int ret;

again:
	switches = dioloop_node_switches(fs, name);
	ret = dioloop_node_resolve(fs, name, &src, &image, &volume);
	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_name, name);
	if (node && node->switches != switches && retries++ < 3) {
		/* Resolved across a migration's switch: again. */
		g_mutex_unlock(&fs->lock);
		dioloop_served_clear(&src.served);
		g_clear_pointer(&image, g_free);
		g_clear_pointer(&volume, g_free);
		goto again;
	}
	if (ret < 0) {
		if (node) {
			dioloop_node_mark_gone(fs, node);
			drop = dioloop_node_unused(fs, node);
		}
		g_mutex_unlock(&fs->lock);
		if (drop)
			dioloop_node_free(fs, drop);
		return ret == -EACCES ? -ENOENT : ret;
	}
	if (node && dioloop_node_replaced(fs, node, &src)) {
		drop = dioloop_node_retire(fs, node);
		node = NULL;
	}
	if (node) {
		node->nlookup++;
		g_mutex_unlock(&fs->lock);
		*out = node;
		goto out_clear;
	}
	g_mutex_unlock(&fs->lock);
	if (drop)
		dioloop_node_free(fs, drop);

	if (src.volume) {
		ret = dioloop_volume_check(fs, &src);
		if (ret < 0)
			goto out_clear;
	}
	/* Opening may recover a crashed extension: not under the lock. */
	ret = dioloop_open_backend(fs, &src, &b, &readonly, &cow, &lock);
	if (ret < 0) {
		if (ret != -EBUSY)	/* logged with its holder */
			dioloop_fs_log_error(fs, NULL, name, ret);
		goto out_clear;
	}
	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_name, name);
	if (node) {
		/* Another lookup won the race. */
		node->nlookup++;
		g_mutex_unlock(&fs->lock);
		backend_close(b);
		if (lock)
			dioloop_image_lock_put(fs, lock);
		*out = node;
		goto out_clear;
	}
	node = dioloop_node_new(fs, &src, b, readonly, cow, lock);
	g_mutex_unlock(&fs->lock);
	*out = node;
out_clear:
	dioloop_served_clear(&src.served);
	return ret;
}

int dioloop_node_check_current(struct dioloop_fs *fs,
			       struct dioloop_node *node)
{
	g_autofree char *image = NULL, *volume = NULL;
	struct dioloop_node *drop = NULL;
	struct dioloop_node_src src;
	unsigned int switches;
	bool replaced;

	if (fs->remote)
		return 0;
	g_mutex_lock(&fs->lock);
	switches = node->switches;
	g_mutex_unlock(&fs->lock);
	if (dioloop_node_resolve(fs, node->name, &src, &image, &volume) < 0)
		return 0;	/* gone: open handles and nodes live on */
	g_mutex_lock(&fs->lock);
	/* Resolved across a migration's switch: the node is current. */
	replaced = node->switches == switches &&
		   dioloop_node_replaced(fs, node, &src);
	if (replaced && !node->gone)
		drop = dioloop_node_retire(fs, node);
	g_mutex_unlock(&fs->lock);
	dioloop_served_clear(&src.served);
	if (drop)
		dioloop_node_free(fs, drop);
	return replaced ? -ESTALE : 0;
}

struct dioloop_node *dioloop_node_get(struct dioloop_fs *fs, fuse_ino_t ino)
{
	struct dioloop_node *node;

	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_ino, GUINT_TO_POINTER(ino));
	g_mutex_unlock(&fs->lock);
	return node;
}

void dioloop_node_forget(struct dioloop_fs *fs, fuse_ino_t ino, uint64_t n)
{
	struct dioloop_node *node, *drop = NULL;

	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_ino, GUINT_TO_POINTER(ino));
	if (node) {
		node->nlookup = node->nlookup > n ? node->nlookup - n : 0;
		drop = dioloop_node_unused(fs, node);
	}
	g_mutex_unlock(&fs->lock);
	if (drop)
		dioloop_node_free(fs, drop);
}

/* Count one more user in *users (a field of node) unless its volume was
 * deleted: 0 or -ENOENT. */
static int dioloop_node_hold(struct dioloop_fs *fs, struct dioloop_node *node,
			     unsigned int *users)
{
	int ret = 0;

	g_mutex_lock(&fs->lock);
	if (node->deleted)
		ret = -ENOENT;
	else
		(*users)++;
	g_mutex_unlock(&fs->lock);
	return ret;
}

int dioloop_node_open(struct dioloop_fs *fs, struct dioloop_node *node)
{
	return dioloop_node_hold(fs, node, &node->open_count);
}

void dioloop_node_release(struct dioloop_fs *fs, struct dioloop_node *node)
{
	struct dioloop_node *drop;

	g_mutex_lock(&fs->lock);
	node->open_count--;
	drop = dioloop_node_unused(fs, node);
	g_mutex_unlock(&fs->lock);
	if (drop)
		dioloop_node_free(fs, drop);
}

struct backend *dioloop_node_backend_get(struct dioloop_node *node)
{
	g_rw_lock_reader_lock(&node->b_lock);
	if (node->b)
		return node->b;
	g_rw_lock_reader_unlock(&node->b_lock);
	return NULL;
}

void dioloop_node_backend_put(struct dioloop_node *node)
{
	g_rw_lock_reader_unlock(&node->b_lock);
}

int dioloop_node_ctl_begin(struct dioloop_fs *fs, struct dioloop_node *node)
{
	return dioloop_node_hold(fs, node, &node->ctl_users);
}

void dioloop_node_ctl_end(struct dioloop_fs *fs, struct dioloop_node *node)
{
	g_mutex_lock(&fs->lock);
	node->ctl_users--;
	g_mutex_unlock(&fs->lock);
}

int dioloop_node_close_volume(struct dioloop_fs *fs, struct dioloop_node *node)
{
	struct backend *b;
	bool busy;

	g_mutex_lock(&fs->lock);
	busy = atomic_load(&node->in_flight) || atomic_load(&node->draining);
	if (busy || node->open_count || node->ctl_users || !node->volume) {
		g_mutex_unlock(&fs->lock);
		return -EBUSY;
	}
	/* No file handle: no I/O can start; no new handle from here. */
	node->deleted = true;
	dioloop_node_mark_gone(fs, node);
	g_mutex_unlock(&fs->lock);
	g_rw_lock_writer_lock(&node->b_lock);
	b = node->b;
	node->b = NULL;
	g_rw_lock_writer_unlock(&node->b_lock);
	if (b)
		dioloop_node_close_backend(node, b);
	return 0;
}

/*
 * A request counts itself in in_flight, then looks at draining; a drainer
 * sets draining, then looks at in_flight (all sequentially consistent):
 * at least one of them sees the other.  The request that sees draining
 * takes itself back and waits.  The last request out takes in_flight to
 * 0 under io_lock and broadcasts there: its wake-up cannot come between
 * a drainer's look and its wait, and a drainer that sees 0 under the lock
 * knows that no request will touch the node again (dioloop_node_free
 * relies on it).  Only the last one takes the lock.
 */
void dioloop_node_io_begin(struct dioloop_node *node)
{
	atomic_fetch_add(&node->in_flight, 1);
	if (!atomic_load(&node->draining))
		return;
	dioloop_node_io_end(node);
	g_mutex_lock(&node->io_lock);
	while (atomic_load(&node->draining))
		dioloop_aio_cond_wait(&node->io_cond, &node->io_lock);
	atomic_fetch_add(&node->in_flight, 1);
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_io_end(struct dioloop_node *node)
{
	int64_t n = atomic_load(&node->in_flight);

	while (n > 1)
		if (atomic_compare_exchange_weak(&node->in_flight, &n, n - 1))
			return;
	g_mutex_lock(&node->io_lock);
	if (atomic_fetch_sub(&node->in_flight, 1) == 1 &&
	    atomic_load(&node->draining))
		g_cond_broadcast(&node->io_cond);
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_drain_begin(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	while (atomic_load(&node->draining))
		dioloop_aio_cond_wait(&node->io_cond, &node->io_lock);
	atomic_store(&node->draining, true);
	while (atomic_load(&node->in_flight))
		dioloop_aio_cond_wait(&node->io_cond, &node->io_lock);
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_drain_end(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	atomic_store(&node->draining, false);
	g_cond_broadcast(&node->io_cond);
	g_mutex_unlock(&node->io_lock);
}

/*
 * Stack the fault filter on the node's backend, with no request in
 * flight (drained) and no b_lock reader.  The old top stays open below the
 * filter, so a stale pointer read without b_lock still reaches the image.
 */
int dioloop_node_stack_fault(struct dioloop_node *node)
{
	struct backend *f;
	int ret = 0;

	dioloop_node_drain_begin(node);
	g_rw_lock_writer_lock(&node->b_lock);
	if (!node->b)
		ret = -ENOENT;
	else if (!fault_filter_present(node->b)) {
		ret = fault_filter_stack(node->b, &f);
		if (ret == 0)
			node->b = f;
	}
	g_rw_lock_writer_unlock(&node->b_lock);
	dioloop_node_drain_end(node);
	return ret;
}

/* The nodes in the table, referenced by the array (not by the kernel). */
static GPtrArray *dioloop_fs_nodes(struct dioloop_fs *fs)
{
	GPtrArray *nodes = g_ptr_array_new();
	GHashTableIter it;
	gpointer value;

	g_mutex_lock(&fs->lock);
	g_hash_table_iter_init(&it, fs->by_ino);
	while (g_hash_table_iter_next(&it, NULL, &value))
		g_ptr_array_add(nodes, value);
	g_mutex_unlock(&fs->lock);
	return nodes;
}

GPtrArray *dioloop_fs_nodes_ref(struct dioloop_fs *fs)
{
	GPtrArray *nodes = g_ptr_array_new();
	GHashTableIter it;
	gpointer value;

	g_mutex_lock(&fs->lock);
	g_hash_table_iter_init(&it, fs->by_ino);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		struct dioloop_node *node = value;

		if (node->gone)
			continue;
		node->nlookup++;
		g_ptr_array_add(nodes, node);
	}
	g_mutex_unlock(&fs->lock);
	return nodes;
}

void dioloop_fs_nodes_unref(struct dioloop_fs *fs, GPtrArray *nodes)
{
	guint i;

	for (i = 0; i < nodes->len; i++) {
		struct dioloop_node *node = nodes->pdata[i];

		dioloop_node_forget(fs, node->ino, 1);
	}
	g_ptr_array_free(nodes, TRUE);
}

int dioloop_fs_set_limits(struct dioloop_fs *fs, struct dioloop_node *node,
			  const struct dioloop_limit_update *u)
{
	struct dioloop_limits l;
	GPtrArray *nodes;
	uint64_t total;
	uint32_t burst;
	guint i;

	if (node) {
		dioloop_throttle_get_limits(&node->throttle, &l);
		dioloop_limits_update(&l, u);
		dioloop_throttle_set_limits(&node->throttle, &l);
		return 0;
	}
	g_mutex_lock(&fs->lock);
	dioloop_limits_update(&fs->limits, u);
	burst = fs->limits.burst_ms;
	g_mutex_unlock(&fs->lock);
	if (u->mask & ((1u << DIOLOOP_LIMIT_TOTAL_BPS) |
		       (1u << DIOLOOP_LIMIT_BURST_MS))) {
		total = (u->mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS)) ?
			u->value[DIOLOOP_LIMIT_TOTAL_BPS] :
			dioloop_throttle_group_total(&fs->throttle);
		dioloop_throttle_group_set_total(&fs->throttle, total, burst);
	}
	/* A node made meanwhile got the new defaults already: applying the
	 * same keys again changes nothing. */
	nodes = dioloop_fs_nodes_ref(fs);
	for (i = 0; i < nodes->len; i++)
		dioloop_fs_set_limits(fs, nodes->pdata[i], u);
	dioloop_fs_nodes_unref(fs, nodes);
	return 0;
}

void dioloop_fs_drain_all(struct dioloop_fs *fs)
{
	GPtrArray *nodes = dioloop_fs_nodes(fs);
	guint i;

	for (i = 0; i < nodes->len; i++) {
		dioloop_node_drain_begin(nodes->pdata[i]);
		dioloop_node_drain_end(nodes->pdata[i]);
	}
	g_ptr_array_free(nodes, TRUE);
}

void dioloop_fs_flush_all(struct dioloop_fs *fs)
{
	GPtrArray *nodes = dioloop_fs_nodes(fs);
	guint i;

	for (i = 0; i < nodes->len; i++) {
		struct dioloop_node *node = nodes->pdata[i];
		struct backend *b = dioloop_node_backend_get(node);
		int ret;

		if (!b)
			continue;
		ret = backend_flush(b);
		dioloop_node_backend_put(node);
		if (ret < 0)
			dioloop_fs_log_error(fs, node, "flush", ret);
	}
	g_ptr_array_free(nodes, TRUE);
}
