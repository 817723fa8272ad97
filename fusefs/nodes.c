/* SPDX-License-Identifier: MIT */
/* The node table: which images of the source directory are served, under
 * which inode numbers, with which open backend. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/aio.h"
#include "fusefs/fs.h"
#include "fusefs/imagelock.h"
#include "fusefs/spec.h"

#define DIOLOOP_LOG_INTERVAL_US (10 * G_USEC_PER_SEC)

bool dioloop_is_image_name(const char *name)
{
	return name[0] != '\0' && name[0] != '.' && !strchr(name, '/');
}

bool dioloop_resolves_inside(struct dioloop_fs *fs, const char *name)
{
	g_autofree char *path = g_build_filename(fs->source, name, NULL);
	char *real = realpath(path, NULL);
	size_t n = strlen(fs->source);
	bool inside = real && strncmp(real, fs->source, n) == 0 &&
		      real[n] == '/';

	free(real);
	return inside;
}

/*
 * Check that name is an image we may serve: a regular file, or a symlink
 * that resolves to one inside the source directory.  0, -ENOENT, or
 * -EACCES for a symlink that leaves the source (logged).
 */
static int dioloop_check_image(struct dioloop_fs *fs, const char *name,
			       struct stat *st)
{
	struct stat lst;

	if (!dioloop_is_image_name(name))
		return -ENOENT;
	if (fstatat(fs->source_fd, name, &lst, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISLNK(lst.st_mode) && !dioloop_resolves_inside(fs, name)) {
		dioloop_fs_log_error(fs, NULL, name, -EACCES);
		return -EACCES;
	}
	if (fstatat(fs->source_fd, name, st, 0) < 0)
		return -errno;
	return S_ISREG(st->st_mode) ? 0 : -ENOENT;
}

/*
 * The image's lock, shared with the other nodes on the same file (a
 * symlink alias), or taken now.  0, -EBUSY when another process serves
 * the image (logged, naming it), or -errno.  Not under fs->lock.
 */
static int dioloop_image_lock_get(struct dioloop_fs *fs, const char *name,
				  const struct stat *st, bool *readonly,
				  struct dioloop_image_lock **out)
{
	g_autofree char *key = g_strdup_printf("%ju:%ju", (uintmax_t)st->st_dev,
					       (uintmax_t)st->st_ino);
	g_autofree char *holder = NULL;
	struct dioloop_image_lock *l;
	int fd = -1, ret;

	g_mutex_lock(&fs->lock);
	l = g_hash_table_lookup(fs->image_locks, key);
	if (l)
		l->refs++;
	g_mutex_unlock(&fs->lock);
	if (l) {
		*out = l;
		return 0;
	}
	ret = dioloop_image_lock(fs->source_fd, name, readonly, &fd, &holder);
	g_mutex_lock(&fs->lock);
	/* An alias may have taken it meanwhile (then we conflicted with
	 * ourselves): share that one. */
	l = g_hash_table_lookup(fs->image_locks, key);
	if (l) {
		l->refs++;
	} else if (ret == 0) {
		l = g_new0(struct dioloop_image_lock, 1);
		l->key = g_steal_pointer(&key);
		l->fd = fd;
		l->refs = 1;
		g_hash_table_insert(fs->image_locks, l->key, l);
		fd = -1;
	}
	g_mutex_unlock(&fs->lock);
	if (fd >= 0)
		close(fd);
	if (l) {
		*out = l;
		return 0;
	}
	if (ret == -EBUSY) {
		g_autofree char *lkey = g_strdup_printf("busy\n%s", name);

		if (dioloop_fs_log_ratelimit(fs, lkey))
			g_warning("%s: not served: the image is in use by %s",
				  name, holder);
	}
	return ret;
}

/* Drop a node's reference to its image lock. */
static void dioloop_image_lock_put(struct dioloop_fs *fs,
				   struct dioloop_image_lock *l)
{
	bool last;

	/* Closed under the lock: a lookup that misses the table right
	 * after must not find the old lock still held by us. */
	g_mutex_lock(&fs->lock);
	last = --l->refs == 0;
	if (last) {
		g_hash_table_remove(fs->image_locks, l->key);
		close(l->fd);
	}
	g_mutex_unlock(&fs->lock);
	if (!last)
		return;
	g_free(l->key);
	g_free(l);
}

static void dioloop_node_free(struct dioloop_fs *fs, struct dioloop_node *node)
{
	if (node->b) {
		int ret = backend_flush(node->b);

		if (ret < 0)
			g_warning("%s: flush at close: %s", node->name,
				  g_strerror(-ret));
		backend_close(node->b);
	}
	/* Closed: now another daemon may have the image. */
	if (node->lock)
		dioloop_image_lock_put(fs, node->lock);
	dioloop_throttle_destroy(&node->throttle);
	g_mutex_clear(&node->io_lock);
	g_cond_clear(&node->io_cond);
	g_free(node->name);
	g_free(node);
}

/* Add the -o fault= rules meant for name to the fault layer b. */
static void dioloop_apply_mount_faults(struct dioloop_fs *fs, const char *name,
				       struct backend *b)
{
	guint i;

	for (i = 0; fs->opts.faults && i < fs->opts.faults->len; i++) {
		struct dioloop_mount_fault *mf = fs->opts.faults->pdata[i];
		g_autofree char *text = NULL;

		if (strcmp(mf->node, "*") && strcmp(mf->node, name))
			continue;
		if (fault_backend_add_rule(b, &mf->rule) < 0)
			continue;	/* validated when parsed */
		text = dioloop_fault_format(&mf->rule);
		g_message("%s: fault rule: %s", name, text);
	}
}

/*
 * Lock the image and open it: the image's backend, read-write unless the
 * mount or the image is read-only, with the fault layer on top (it
 * passes everything through until a rule is added).
 */
static int dioloop_open_backend(struct dioloop_fs *fs, const char *name,
				const struct stat *img, struct backend **b,
				bool *readonly, struct dioloop_image_lock **lock)
{
	g_autofree char *path = g_build_filename(fs->source, name, NULL);
	struct backend_open_args args = { .path = path, .aio = fs->aio };
	struct backend *image = NULL;
	int ret;

	/* The image's mode decides, for root too: a 0444 image is a
	 * read-only disk, as the node's mode shows. */
	*readonly = fs->opts.readonly || !(img->st_mode & 0222) ||
		    faccessat(fs->source_fd, name, W_OK, AT_EACCESS) < 0;
	/* Before opening: opening may write (recovering an extension). */
	ret = dioloop_image_lock_get(fs, name, img, readonly, lock);
	if (ret < 0)
		return ret;
	args.flags = (*readonly ? BACKEND_OPEN_RDONLY : 0) |
		     (fs->opts.growable ? BACKEND_OPEN_GROWABLE : 0) |
		     (fs->opts.sync ? BACKEND_OPEN_SYNC : 0);
	ret = backend_open("raw", &args, &image);
	if ((ret == -EACCES || ret == -EROFS || ret == -EPERM) && !*readonly) {
		*readonly = true;
		args.flags |= BACKEND_OPEN_RDONLY;
		ret = backend_open("raw", &args, &image);
	}
	if (ret < 0)
		goto out_put_lock;
	args.inner = image;
	ret = backend_open("fault", &args, b);
	if (ret < 0) {
		backend_close(image);
		goto out_put_lock;
	}
	dioloop_apply_mount_faults(fs, name, *b);
	return 0;

out_put_lock:
	dioloop_image_lock_put(fs, *lock);
	*lock = NULL;
	return ret;
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

int dioloop_node_lookup(struct dioloop_fs *fs, const char *name,
			struct dioloop_node **out)
{
	struct dioloop_node *node, *drop = NULL;
	struct dioloop_image_lock *lock = NULL;
	struct backend *b = NULL;
	bool readonly = false;
	struct stat st;
	int ret;

	ret = dioloop_check_image(fs, name, &st);
	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_name, name);
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
	if (node) {
		node->nlookup++;
		g_mutex_unlock(&fs->lock);
		*out = node;
		return 0;
	}
	g_mutex_unlock(&fs->lock);

	/* Opening may recover a crashed extension: not under the lock. */
	ret = dioloop_open_backend(fs, name, &st, &b, &readonly, &lock);
	if (ret < 0) {
		if (ret != -EBUSY)	/* logged with its holder */
			dioloop_fs_log_error(fs, NULL, name, ret);
		return ret;
	}
	g_mutex_lock(&fs->lock);
	node = g_hash_table_lookup(fs->by_name, name);
	if (node) {
		/* Another lookup won the race. */
		node->nlookup++;
		g_mutex_unlock(&fs->lock);
		backend_close(b);
		dioloop_image_lock_put(fs, lock);
		*out = node;
		return 0;
	}
	node = g_new0(struct dioloop_node, 1);
	node->ino = fs->next_ino++;
	node->name = g_strdup(name);
	node->b = b;
	node->readonly = readonly;
	node->lock = lock;
	node->nlookup = 1;
	dioloop_throttle_init(&node->throttle, &fs->throttle, &fs->limits);
	g_mutex_init(&node->io_lock);
	g_cond_init(&node->io_cond);
	g_hash_table_insert(fs->by_name, node->name, node);
	g_hash_table_insert(fs->by_ino, GUINT_TO_POINTER(node->ino), node);
	g_mutex_unlock(&fs->lock);
	*out = node;
	return 0;
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

void dioloop_node_open(struct dioloop_fs *fs, struct dioloop_node *node)
{
	g_mutex_lock(&fs->lock);
	node->open_count++;
	g_mutex_unlock(&fs->lock);
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

int dioloop_node_stat(struct dioloop_fs *fs, struct dioloop_node *node,
		      struct stat *st)
{
	struct backend_info info;
	struct stat img;
	int ret;

	ret = backend_info(node->b, &info);
	if (ret < 0)
		return ret;
	memset(st, 0, sizeof(*st));
	if (fstatat(fs->source_fd, node->name, &img, 0) == 0) {
		st->st_mode = img.st_mode & 07777;
		st->st_uid = img.st_uid;
		st->st_gid = img.st_gid;
		st->st_atim = img.st_atim;
		st->st_mtim = img.st_mtim;
		st->st_ctim = img.st_ctim;
	} else {
		st->st_mode = 0600;
		st->st_uid = getuid();
		st->st_gid = getgid();
	}
	if (node->readonly)
		st->st_mode &= ~(mode_t)0222;
	st->st_mode |= S_IFREG;
	st->st_ino = node->ino;
	st->st_nlink = 1;
	st->st_size = (off_t)info.size;
	st->st_blksize = DIOLOOP_BLOCK_SIZE;
	st->st_blocks = (blkcnt_t)((info.allocated + 511) / 512);
	return 0;
}

void dioloop_root_stat(struct dioloop_fs *fs, struct stat *st)
{
	struct stat src;

	memset(st, 0, sizeof(*st));
	if (fstat(fs->source_fd, &src) == 0) {
		st->st_uid = src.st_uid;
		st->st_gid = src.st_gid;
		st->st_atim = src.st_atim;
		st->st_mtim = src.st_mtim;
		st->st_ctim = src.st_ctim;
	}
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	st->st_blksize = DIOLOOP_BLOCK_SIZE;
}

bool dioloop_fs_log_ratelimit(struct dioloop_fs *fs, const char *key)
{
	gint64 now = g_get_monotonic_time();
	gpointer last;
	bool log;

	g_mutex_lock(&fs->log_lock);
	last = g_hash_table_lookup(fs->logged, key);
	log = !last || now - GPOINTER_TO_SIZE(last) >= DIOLOOP_LOG_INTERVAL_US;
	if (log)
		g_hash_table_insert(fs->logged, g_strdup(key),
				    GSIZE_TO_POINTER((gsize)now));
	g_mutex_unlock(&fs->log_lock);
	return log;
}

void dioloop_fs_log_error(struct dioloop_fs *fs, struct dioloop_node *node,
			  const char *kind, int err)
{
	g_autofree char *key = g_strdup_printf("%s\n%s\n%d",
					       node ? node->name : "", kind,
					       err);

	if (!dioloop_fs_log_ratelimit(fs, key))
		return;
	if (node)
		g_warning("%s: %s: %s", node->name, kind, g_strerror(-err));
	else if (err == -EACCES)
		g_warning("%s: refused: a symlink that leaves the source "
			  "directory", kind);
	else
		g_warning("%s: %s", kind, g_strerror(-err));
}

void dioloop_node_io_begin(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	while (node->draining)
		g_cond_wait(&node->io_cond, &node->io_lock);
	node->in_flight++;
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_io_end(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	if (--node->in_flight == 0 && node->draining)
		g_cond_broadcast(&node->io_cond);
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_drain_begin(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	while (node->draining)
		g_cond_wait(&node->io_cond, &node->io_lock);
	node->draining = true;
	while (node->in_flight)
		g_cond_wait(&node->io_cond, &node->io_lock);
	g_mutex_unlock(&node->io_lock);
}

void dioloop_node_drain_end(struct dioloop_node *node)
{
	g_mutex_lock(&node->io_lock);
	node->draining = false;
	g_cond_broadcast(&node->io_cond);
	g_mutex_unlock(&node->io_lock);
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

void dioloop_fs_open_all(struct dioloop_fs *fs)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	struct dirent *de;
	DIR *dir;
	guint i;
	int fd;

	fd = openat(fs->source_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(dir)))
		if (dioloop_is_image_name(de->d_name))
			g_ptr_array_add(names, g_strdup(de->d_name));
	closedir(dir);
	for (i = 0; i < names->len; i++) {
		struct dioloop_node *node;

		/* Errors are logged by the lookup. */
		if (dioloop_node_lookup(fs, names->pdata[i], &node) == 0)
			dioloop_node_forget(fs, node->ino, 1);
	}
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
		int ret = backend_flush(node->b);

		if (ret < 0)
			dioloop_fs_log_error(fs, node, "flush", ret);
	}
	g_ptr_array_free(nodes, TRUE);
}

int dioloop_fs_init(struct dioloop_fs *fs, const char *source,
		    const char *mountpoint,
		    const struct dioloop_mount_opts *opts)
{
	struct dioloop_mount_opts o = *opts;	/* opts may point into fs */
	size_t pages;
	int ret;

	memset(fs, 0, sizeof(*fs));
	fs->source_fd = -1;
	fs->opts = o;
	opts = &fs->opts;
	fs->source = realpath(source, NULL);
	if (!fs->source)
		return -errno;
	fs->mountpoint = realpath(mountpoint, NULL);
	if (!fs->mountpoint) {
		ret = -errno;
		goto out_free;
	}
	fs->source_fd = open(fs->source, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->source_fd < 0) {
		ret = -errno;
		goto out_free;
	}
	g_mutex_init(&fs->lock);
	g_mutex_init(&fs->log_lock);
	fs->by_name = g_hash_table_new(g_str_hash, g_str_equal);
	fs->by_ino = g_hash_table_new(g_direct_hash, g_direct_equal);
	fs->logged = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					   NULL);
	fs->image_locks = g_hash_table_new(g_str_hash, g_str_equal);
	fs->next_ino = DIOLOOP_FIRST_NODE_INO;
	fs->started = g_get_monotonic_time();
	fs->limits = opts->limits;
	dioloop_throttle_group_init(&fs->throttle, NULL, NULL);
	dioloop_throttle_group_set_total(&fs->throttle, opts->total_bps,
					 opts->limits.burst_ms);
	/* Room for every request in flight at the largest size, plus the
	 * same again for requests waiting for a worker: the pool must never
	 * be what stops a write the kernel needs to make progress. */
	pages = (size_t)opts->queue_depth * (opts->max_write / DIOLOOP_PAGE_SIZE);
	ret = dioloop_page_pool_new(pages / 4, pages * 2, &fs->pool);
	if (ret < 0)
		goto out_tables;
	ret = dioloop_aio_new(opts->queue_depth * 4, "dioloop-aio", &fs->aio);
	if (ret < 0)
		goto out_pool;
	ret = dioloop_throttle_group_start(&fs->throttle);
	if (ret < 0)
		goto out_aio;
	return 0;

out_aio:
	dioloop_aio_free(fs->aio);
out_pool:
	dioloop_page_pool_free(fs->pool);
out_tables:
	dioloop_throttle_group_destroy(&fs->throttle);
	g_hash_table_destroy(fs->by_name);
	g_hash_table_destroy(fs->by_ino);
	g_hash_table_destroy(fs->logged);
	g_hash_table_destroy(fs->image_locks);
	g_mutex_clear(&fs->lock);
	g_mutex_clear(&fs->log_lock);
	close(fs->source_fd);
out_free:
	free(fs->source);
	free(fs->mountpoint);
	return ret;
}

void dioloop_fs_destroy(struct dioloop_fs *fs)
{
	GHashTableIter it;
	gpointer value;

	/* Every request has been answered: close the images. */
	dioloop_throttle_group_stop(&fs->throttle);
	g_hash_table_iter_init(&it, fs->by_ino);
	while (g_hash_table_iter_next(&it, NULL, &value))
		dioloop_node_free(fs, value);
	dioloop_throttle_group_destroy(&fs->throttle);
	g_hash_table_destroy(fs->by_name);
	g_hash_table_destroy(fs->by_ino);
	g_hash_table_destroy(fs->logged);
	g_hash_table_destroy(fs->image_locks);
	if (fs->opts.faults)
		g_ptr_array_free(fs->opts.faults, TRUE);
	dioloop_aio_free(fs->aio);
	dioloop_page_pool_free(fs->pool);
	g_mutex_clear(&fs->lock);
	g_mutex_clear(&fs->log_lock);
	close(fs->source_fd);
	free(fs->source);
	free(fs->mountpoint);
}
