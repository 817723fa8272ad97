/* SPDX-License-Identifier: MIT */
/* The mount's state (set up, torn down), the attributes it answers, and
 * its rate-limited error log. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/aio.h"
#include "fusefs/fs.h"
#include "fusefs/migrate.h"
#include "fusefs/nodes.h"
#include "fusefs/remote.h"

#define DIOLOOP_LOG_INTERVAL_US (10 * G_USEC_PER_SEC)
/* Keys remembered by dioloop_fs_log_ratelimit: names come from SOURCE,
 * so their number is bounded here, not by what users create. */
#define DIOLOOP_LOG_KEYS_MAX 4096

int dioloop_node_stat(struct dioloop_fs *fs, struct dioloop_node *node,
		      struct stat *st)
{
	struct backend_info info;
	struct backend_times times;
	bool has_times = false;
	struct backend *b;
	struct stat img;
	int ret;

	b = dioloop_node_backend_get(node);
	if (!b)
		return -ENOENT;
	if (fs->remote) {
		/* The size and times the backend keeps: a GETATTR per stat
		 * would make every stat wait for the server (the timeout,
		 * when it is gone); the allocation is not known then. */
		int64_t size = backend_get_size(b);

		ret = size < 0 ? (int)size : 0;
		info.size = size < 0 ? 0 : (uint64_t)size;
		info.allocated = info.size;
		has_times = backend_times(b, &times) == 0;
	} else {
		ret = backend_info(b, &info);
	}
	dioloop_node_backend_put(node);
	if (ret < 0)
		return ret;
	memset(st, 0, sizeof(*st));
	/* The file served: its lock fd (a migration's destination after a
	 * switch), never a name looked up again. */
	if (node->lock && fstat(node->lock->fd, &img) == 0) {
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
		if (has_times) {
			st->st_atim = times.atime;
			st->st_mtim = times.mtime;
			st->st_ctim = times.ctime;
		}
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

/* Forget the keys last logged longer than the interval ago (they would
 * be logged again anyway).  fs->log_lock held. */
static void log_keys_prune(struct dioloop_fs *fs, gint64 now)
{
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, fs->logged);
	while (g_hash_table_iter_next(&it, NULL, &value))
		if (now - (gint64)GPOINTER_TO_SIZE(value) >=
		    DIOLOOP_LOG_INTERVAL_US)
			g_hash_table_iter_remove(&it);
}

bool dioloop_fs_log_ratelimit(struct dioloop_fs *fs, const char *key)
{
	gint64 now = g_get_monotonic_time();
	gpointer last;
	bool log;

	g_mutex_lock(&fs->log_lock);
	last = g_hash_table_lookup(fs->logged, key);
	log = !last || now - GPOINTER_TO_SIZE(last) >= DIOLOOP_LOG_INTERVAL_US;
	if (log && !last &&
	    g_hash_table_size(fs->logged) >= DIOLOOP_LOG_KEYS_MAX)
		log_keys_prune(fs, now);
	/* Still full of keys logged within the interval: log, without
	 * remembering (the log's own rate limit is bounded too). */
	if (log && (last ||
		    g_hash_table_size(fs->logged) < DIOLOOP_LOG_KEYS_MAX))
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

/* Release the source and mount point names, the source's fd and the
 * remote source: the first things dioloop_fs_init takes. */
static void dioloop_fs_free_source(struct dioloop_fs *fs)
{
	if (fs->source_fd >= 0)
		close(fs->source_fd);
	free(fs->source);
	free(fs->mountpoint);
	dioloop_remote_free(fs->remote);
}

/* Release the node and lock tables, the log's and the throttle group
 * (stopped, or never started). */
static void dioloop_fs_free_tables(struct dioloop_fs *fs)
{
	dioloop_throttle_group_destroy(&fs->throttle);
	g_hash_table_destroy(fs->by_name);
	g_hash_table_destroy(fs->by_ino);
	g_hash_table_destroy(fs->logged);
	g_hash_table_destroy(fs->image_locks);
	g_mutex_clear(&fs->lock);
	g_mutex_clear(&fs->log_lock);
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
	if (backend_is_url(source)) {
		ret = dioloop_remote_new(source, &fs->remote);
		if (ret < 0)
			return ret;
		fs->source = strdup(dioloop_remote_base(fs->remote));
	} else {
		fs->source = realpath(source, NULL);
	}
	if (!fs->source) {
		ret = -errno;
		goto out_free;
	}
	fs->mountpoint = realpath(mountpoint, NULL);
	if (!fs->mountpoint) {
		ret = -errno;
		goto out_free;
	}
	if (!fs->remote) {
		fs->source_fd = open(fs->source, O_RDONLY | O_DIRECTORY |
				     O_CLOEXEC);
		if (fs->source_fd < 0) {
			ret = -errno;
			goto out_free;
		}
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
	/* Runs for the large requests in flight at once, up to 64 (64 MiB
	 * of address space; memory only for runs in use). */
	ret = dioloop_run_pool_new(DIOLOOP_MAX_WRITE,
				   MIN(opts->queue_depth, 64u), &fs->runs);
	if (ret < 0)
		goto out_pool;
	ret = dioloop_aio_new(opts->queue_depth * 4, "dioloop-aio", &fs->aio);
	if (ret < 0)
		goto out_runs;
	ret = dioloop_throttle_group_start(&fs->throttle);
	if (ret < 0)
		goto out_aio;
	return 0;

out_aio:
	dioloop_aio_free(fs->aio);
out_runs:
	dioloop_run_pool_free(fs->runs);
out_pool:
	dioloop_page_pool_free(fs->pool);
out_tables:
	dioloop_fs_free_tables(fs);
out_free:
	dioloop_fs_free_source(fs);
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
	dioloop_migrations_free(fs);
	dioloop_aio_free(fs->aio);
	dioloop_run_pool_free(fs->runs);
	dioloop_page_pool_free(fs->pool);
	dioloop_fs_free_tables(fs);
	if (fs->opts.faults)
		g_ptr_array_free(fs->opts.faults, TRUE);
	dioloop_fs_free_source(fs);
}
