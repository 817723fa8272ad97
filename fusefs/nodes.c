/* SPDX-License-Identifier: MIT */
/* The node table: which images of the source directory are served, under
 * which inode numbers, with which open backend. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/aio.h"
#include "fusefs/fs.h"

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

static void dioloop_node_free(struct dioloop_node *node)
{
	if (node->b) {
		int ret = backend_flush(node->b);

		if (ret < 0)
			g_warning("%s: flush at close: %s", node->name,
				  g_strerror(-ret));
		backend_close(node->b);
	}
	g_mutex_clear(&node->io_lock);
	g_cond_clear(&node->io_cond);
	g_free(node->name);
	g_free(node);
}

/* Open the image's backend: read-write unless the mount or the image is
 * read-only. */
static int dioloop_open_backend(struct dioloop_fs *fs, const char *name,
				struct backend **b, bool *readonly)
{
	g_autofree char *path = g_build_filename(fs->source, name, NULL);
	struct backend_open_args args = { .path = path, .aio = fs->aio };
	int ret;

	struct stat st;

	/* The image's mode decides, for root too: a 0444 image is a
	 * read-only disk, as the node's mode shows. */
	*readonly = fs->opts.readonly ||
		    fstatat(fs->source_fd, name, &st, 0) < 0 ||
		    !(st.st_mode & 0222) ||
		    faccessat(fs->source_fd, name, W_OK, AT_EACCESS) < 0;
	args.flags = (*readonly ? BACKEND_OPEN_RDONLY : 0) |
		     (fs->opts.growable ? BACKEND_OPEN_GROWABLE : 0) |
		     (fs->opts.sync ? BACKEND_OPEN_SYNC : 0);
	ret = backend_open("raw", &args, b);
	if ((ret == -EACCES || ret == -EROFS || ret == -EPERM) && !*readonly) {
		*readonly = true;
		args.flags |= BACKEND_OPEN_RDONLY;
		ret = backend_open("raw", &args, b);
	}
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
			dioloop_node_free(drop);
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
	ret = dioloop_open_backend(fs, name, &b, &readonly);
	if (ret < 0) {
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
		*out = node;
		return 0;
	}
	node = g_new0(struct dioloop_node, 1);
	node->ino = fs->next_ino++;
	node->name = g_strdup(name);
	node->b = b;
	node->readonly = readonly;
	node->nlookup = 1;
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
		dioloop_node_free(drop);
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
		dioloop_node_free(drop);
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

void dioloop_fs_log_error(struct dioloop_fs *fs, struct dioloop_node *node,
			  const char *kind, int err)
{
	g_autofree char *key = g_strdup_printf("%s\n%s\n%d",
					       node ? node->name : "", kind,
					       err);
	gint64 now = g_get_monotonic_time();
	gpointer last;
	bool log;

	g_mutex_lock(&fs->log_lock);
	last = g_hash_table_lookup(fs->logged, key);
	log = !last || now - GPOINTER_TO_SIZE(last) >= DIOLOOP_LOG_INTERVAL_US;
	if (log)
		g_hash_table_insert(fs->logged, g_steal_pointer(&key),
				    GSIZE_TO_POINTER((gsize)now));
	g_mutex_unlock(&fs->log_lock);
	if (!log)
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
	fs->next_ino = FUSE_ROOT_ID + 1;
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
	return 0;

out_pool:
	dioloop_page_pool_free(fs->pool);
out_tables:
	g_hash_table_destroy(fs->by_name);
	g_hash_table_destroy(fs->by_ino);
	g_hash_table_destroy(fs->logged);
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
	g_hash_table_iter_init(&it, fs->by_ino);
	while (g_hash_table_iter_next(&it, NULL, &value))
		dioloop_node_free(value);
	g_hash_table_destroy(fs->by_name);
	g_hash_table_destroy(fs->by_ino);
	g_hash_table_destroy(fs->logged);
	dioloop_aio_free(fs->aio);
	dioloop_page_pool_free(fs->pool);
	g_mutex_clear(&fs->lock);
	g_mutex_clear(&fs->log_lock);
	close(fs->source_fd);
	free(fs->source);
	free(fs->mountpoint);
}
