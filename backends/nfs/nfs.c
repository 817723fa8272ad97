/* SPDX-License-Identifier: MIT */
/*
 * The nfs backend's ops table, and the synchronous helpers for the
 * command line and the daemon: creating an image and listing a remote
 * directory (see nfs.h).
 *
 * Threads: open/close on the control thread; direct_IO_bvec anywhere
 * (it queues to the image's service thread); flush, resize, info on
 * worker threads, which wait for the service thread (nfs_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/nfs/nfs_int.h"

#define DNFS_ZERO_CHUNK ((size_t)1 << 20)

static void dnfs_free(struct dnfs *d)
{
	dnfs_url_clear(&d->url);
	g_free(d->open_msg);
	g_mutex_clear(&d->lock);
	g_cond_clear(&d->cond);
	g_free(d);
}

/* Open the image at args->path (an nfs:// URL): connect, mount, look the
 * file up.  Control thread; waits up to the URL's timeout. */
static int dnfs_open(struct backend *b, const struct backend_open_args *args)
{
	struct dnfs *d;
	int ret;

	if (args->volume && args->volume[0])
		return backend_set_error(args->error, -ENOENT,
					 "%s: nfs images have no volume \"%s\"",
					 args->path, args->volume);
	d = g_new0(struct dnfs, 1);
	ret = dnfs_url_parse(args->path, true, &d->url, args->error);
	if (ret < 0) {
		g_free(d);
		return ret;
	}
	d->b = b;
	d->efd = -1;
	d->rdonly = args->flags & BACKEND_OPEN_RDONLY;
	d->growable = args->flags & BACKEND_OPEN_GROWABLE;
	d->sync = (args->flags & BACKEND_OPEN_SYNC) || d->url.sync;
	d->timeout_us = (int64_t)d->url.timeout_s * G_USEC_PER_SEC;
	d->hang_us = MAX(d->timeout_us / 2, 2 * G_USEC_PER_SEC);
	g_mutex_init(&d->lock);
	g_cond_init(&d->cond);
	d->sub_tail = &d->sub_head;
	d->ctl_tail = &d->ctl_head;
	atomic_init(&d->size, 0);
	atomic_init(&d->rsize, DNFS_MIN_XFER);
	atomic_init(&d->wsize, DNFS_MIN_XFER);
	atomic_init(&d->next_seq, 0);
	d->open_error_wanted = args->error != NULL;
	ret = dnfs_service_start(d);
	if (ret < 0) {
		if (d->open_msg)
			g_set_error_literal(args->error, BACKEND_ERROR, -ret,
					    d->open_msg);
		dnfs_service_stop(d);
		dnfs_free_pieces(d);
		dnfs_free(d);
		return ret;
	}
	b->priv = d;
	b->limits = (struct backend_limits){
		.request_alignment = 1,
		.mem_alignment = 1,
		.block_size = 4096,
		.max_transfer = 4 * DNFS_MAX_XFER,
		.max_segs = IOV_MAX,
		/* Byte-granular: the largest NFSv3 offset we can send (an
		 * off_t); a server with less answers EFBIG itself. */
		.max_size = INT64_MAX,
	};
	return 0;
}

/* Commit what is left, stop the service thread.  Nothing is in flight.
 * Control thread; returns within about the URL's timeout. */
static void dnfs_close(struct backend *b)
{
	struct dnfs *d = b->priv;
	struct dnfs_ctl ctl = { .kind = DNFS_CTL_FLUSH };
	int err;

	if (!d->rdonly) {
		err = dnfs_ctl_run(d, &ctl);
		if (err < 0)
			g_warning("%s: commit at close: %s; %llu bytes written since the last flush may be lost",
				  d->url.url, g_strerror(-err),
				  (unsigned long long)atomic_load(&d->stats.retained));
	}
	dnfs_service_stop(d);
	dnfs_free_pieces(d);
	b->priv = NULL;
	dnfs_free(d);
}

/* Visible size.  Any thread. */
static int64_t dnfs_get_size(struct backend *b)
{
	struct dnfs *d = b->priv;

	return (int64_t)atomic_load(&d->size);
}

/* Read or write (backend.h).  Any thread. */
static ssize_t dnfs_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	return dnfs_submit(b->priv, iocb);
}

/* COMMIT every write completed before the call, sending again what a
 * restarted server lost.  Worker thread. */
static int dnfs_flush(struct backend *b)
{
	struct dnfs *d = b->priv;
	struct dnfs_ctl ctl = { .kind = DNFS_CTL_FLUSH };

	if (d->rdonly)
		return 0;
	return dnfs_ctl_run(d, &ctl);
}

/* NFSv3 cannot deallocate (nfs.h says why not zeros).  Worker thread. */
static int dnfs_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	return -EOPNOTSUPP;
}

/* Commit, then SETATTR the size.  Worker thread, nothing in flight. */
static int dnfs_resize(struct backend *b, uint64_t size)
{
	struct dnfs *d = b->priv;
	struct dnfs_ctl flush = { .kind = DNFS_CTL_FLUSH };
	struct dnfs_ctl trunc = { .kind = DNFS_CTL_TRUNCATE, .size = size };
	int ret;

	if (size > (uint64_t)INT64_MAX)
		return -EFBIG;
	ret = dnfs_ctl_run(d, &flush);
	if (ret < 0)
		return ret;
	ret = dnfs_ctl_run(d, &trunc);
	if (ret == 0)
		atomic_store(&d->size, size);
	return ret;
}

/* Size, and the server's allocation (GETATTR).  Worker thread. */
static void ts_of(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* The times the server sent last: at open, GETATTR, READ, WRITE. */
static int dnfs_times(struct backend *b, struct backend_times *t)
{
	struct dnfs *d = b->priv;

	ts_of(atomic_load(&d->atime_ns), &t->atime);
	ts_of(atomic_load(&d->mtime_ns), &t->mtime);
	ts_of(atomic_load(&d->ctime_ns), &t->ctime);
	return 0;
}

static int dnfs_info(struct backend *b, struct backend_info *info)
{
	struct dnfs *d = b->priv;
	struct dnfs_ctl ctl = { .kind = DNFS_CTL_GETATTR };
	int ret;

	ret = dnfs_ctl_run(d, &ctl);
	if (ret < 0)
		return ret;
	g_strlcpy(info->format, "nfs", sizeof(info->format));
	info->size = atomic_load(&d->size);
	info->allocated = ctl.used;
	return 0;
}

void nfs_backend_get_stats(struct backend *b, struct nfs_backend_stats *s)
{
	struct dnfs *d = b->priv;

	*s = (struct nfs_backend_stats){
		.rpcs = atomic_load(&d->stats.rpcs),
		.commits = atomic_load(&d->stats.commits),
		.reconnects = atomic_load(&d->stats.reconnects),
		.verifier_changes = atomic_load(&d->stats.verifier_changes),
		.resent_writes = atomic_load(&d->stats.resent_writes),
		.resent_bytes = atomic_load(&d->stats.resent_bytes),
		.timeouts = atomic_load(&d->stats.timeouts),
		.retained_bytes = atomic_load(&d->stats.retained),
	};
}

/* ---- synchronous helpers ---- */

/* A context for u, mounted on u->dir with the sync API's timeout set.
 * NULL with the line in *error (NULL: logged); *err gets -errno. */
static struct nfs_context *dnfs_sync_mount(const struct dnfs_url *u, int *err,
					   GError **error)
{
	struct nfs_context *nfs = dnfs_context_new(u, error);
	int ret;

	if (!nfs) {
		*err = -ENOMEM;
		return NULL;
	}
	nfs_set_timeout(nfs, (int)MIN((uint64_t)u->timeout_s * 1000, INT_MAX));
	ret = nfs_mount(nfs, u->server, u->dir);
	if (ret < 0) {
		backend_set_error(error, ret, "%s: mount %s:%s: %s", u->url,
				  u->server, u->dir, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		*err = ret;
		return NULL;
	}
	return nfs;
}

/* nfs_image_create with the line in *error (NULL: logged). */
static int dnfs_image_create(const char *url, uint64_t size, bool sparse_ok,
			     GError **error)
{
	struct dnfs_url u;
	struct nfs_context *nfs;
	struct nfsfh *fh = NULL;
	const char *step;
	int ret;

	ret = dnfs_url_parse(url, true, &u, error);
	if (ret < 0)
		return ret;
	if (size > (uint64_t)INT64_MAX) {
		dnfs_url_clear(&u);
		return backend_set_error(error, -EFBIG,
					 "%s: size %llu is too large", url,
					 (unsigned long long)size);
	}
	nfs = dnfs_sync_mount(&u, &ret, error);
	if (!nfs) {
		dnfs_url_clear(&u);
		return ret;
	}
	step = "create";
	ret = nfs_create(nfs, u.file, O_CREAT | O_EXCL | O_RDWR, 0644, &fh);
	if (ret < 0)
		goto out;
	step = "truncate";
	ret = nfs_ftruncate(nfs, fh, size);
	if (ret == 0 && !sparse_ok) {
		char *zeros = g_malloc0(DNFS_ZERO_CHUNK);
		uint64_t pos = 0;

		step = "write";
		while (pos < size && ret >= 0) {
			uint64_t n = MIN(size - pos, (uint64_t)DNFS_ZERO_CHUNK);

			ret = nfs_pwrite(nfs, fh, pos, n, zeros);
			if (ret == 0)
				ret = -EIO;
			if (ret > 0)
				pos += (uint64_t)ret;
		}
		if (ret > 0)
			ret = 0;
		g_free(zeros);
	}
	if (ret == 0) {
		step = "commit";
		ret = nfs_fsync(nfs, fh);
	}
out:
	if (ret < 0)
		backend_set_error(error, ret, "%s: %s: %s", url, step,
				  nfs_get_error(nfs));
	if (fh)
		nfs_close(nfs, fh);
	if (ret < 0 && fh)
		nfs_unlink(nfs, u.file);
	nfs_destroy_context(nfs);
	dnfs_url_clear(&u);
	return ret < 0 ? ret : 0;
}

int nfs_image_create(const char *url, uint64_t size, bool sparse_ok)
{
	return dnfs_image_create(url, size, sparse_ok, NULL);
}

/* The ops table's create: a sparse image. */
static int dnfs_create(const struct backend_create_args *a, GError **error)
{
	g_autoptr(GError) local = NULL;
	int ret;

	if (a->checksum)
		return backend_set_error(error, -EINVAL,
					 "%s: nfs images have no checksums",
					 a->path);
	ret = dnfs_image_create(a->path, a->size, true, error ? &local : NULL);
	if (ret < 0 && error) {
		/* The server's words for an existing file say less than
		 * errno's. */
		if (ret == -EEXIST)
			backend_set_error(error, ret, "%s: %s", a->path,
					  g_strerror(EEXIST));
		else
			g_propagate_error(error, g_steal_pointer(&local));
	}
	return ret;
}

/* nfs_image_remove with the line in *error (NULL: logged). */
static int dnfs_remove(const char *url, GError **error)
{
	struct dnfs_url u;
	struct nfs_context *nfs;
	int ret;

	ret = dnfs_url_parse(url, true, &u, error);
	if (ret < 0)
		return ret;
	nfs = dnfs_sync_mount(&u, &ret, error);
	if (nfs) {
		ret = nfs_unlink(nfs, u.file);
		if (ret < 0)
			backend_set_error(error, ret, "%s: remove: %s", url,
					  nfs_get_error(nfs));
		nfs_destroy_context(nfs);
	}
	dnfs_url_clear(&u);
	return ret;
}

int nfs_image_remove(const char *url)
{
	return dnfs_remove(url, NULL);
}

/* nfs_url_check with the line in *error (NULL: logged). */
static int dnfs_check_url(const char *url, bool want_file, GError **error)
{
	struct dnfs_url u;
	int ret = dnfs_url_parse(url, want_file, &u, error);

	if (ret == 0)
		dnfs_url_clear(&u);
	return ret;
}

int nfs_url_check(const char *url, bool want_file)
{
	return dnfs_check_url(url, want_file, NULL);
}

static gint dnfs_name_cmp(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* nfs_list_images with the line in *error (NULL: logged). */
static int dnfs_list(const char *dir_url, GPtrArray *names, GError **error)
{
	struct dnfs_url u;
	struct nfs_context *nfs;
	struct nfsdir *dir;
	struct nfsdirent *de;
	GPtrArray *found;
	int ret;

	ret = dnfs_url_parse(dir_url, false, &u, error);
	if (ret < 0)
		return ret;
	nfs = dnfs_sync_mount(&u, &ret, error);
	if (!nfs) {
		dnfs_url_clear(&u);
		return ret;
	}
	ret = nfs_opendir(nfs, "/", &dir);
	if (ret < 0) {
		backend_set_error(error, ret, "%s: list %s: %s", dir_url, u.dir,
				  nfs_get_error(nfs));
		goto out;
	}
	found = g_ptr_array_new();
	while ((de = nfs_readdir(nfs, dir))) {
		if (de->name[0] == '\0' || de->name[0] == '.' ||
		    de->type != NF3REG)
			continue;
		g_ptr_array_add(found, g_strdup(de->name));
	}
	nfs_closedir(nfs, dir);
	g_ptr_array_sort(found, dnfs_name_cmp);
	for (guint i = 0; i < found->len; i++)
		g_ptr_array_add(names, found->pdata[i]);
	g_ptr_array_free(found, TRUE);
out:
	nfs_destroy_context(nfs);
	dnfs_url_clear(&u);
	return ret;
}

int nfs_list_images(const char *dir_url, GPtrArray *names)
{
	return dnfs_list(dir_url, names, NULL);
}

const struct backend_ops nfs_backend_ops = {
	.name = "nfs",
	.open = dnfs_open,
	.close = dnfs_close,
	.get_size = dnfs_get_size,
	.direct_IO_bvec = dnfs_direct_IO_bvec,
	.flush = dnfs_flush,
	.discard = dnfs_discard,
	.resize = dnfs_resize,
	.info = dnfs_info,
	.times = dnfs_times,
	.protocol = "nfs",
	.create = dnfs_create,
	.create_align = 1,
	.remove = dnfs_remove,
	.check_url = dnfs_check_url,
	.list = dnfs_list,
};
