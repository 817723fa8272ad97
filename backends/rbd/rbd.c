/* SPDX-License-Identifier: MIT */
/*
 * The rbd backend's ops table (rbd.h), and the synchronous helpers of the
 * registry: create, remove, check_url and list.
 *
 * Threads: open/close on the control thread; direct_IO_bvec anywhere
 * (it hands the request to librbd); flush, discard, write_zeroes, map,
 * resize and info on worker threads, which wait.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/iorec.h"
#include "backends/rbd/rbd_int.h"

/* The most map asks rbd_diff_iterate2 about at once (it stats each
 * object when the image has no fast-diff). */
#define DRBD_MAP_MAX ((uint64_t)1 << 30)

static void drbd_free(struct drbd *d)
{
	if (d->image)
		rbd_close(d->image);
	drbd_conn_put(d->conn);
	drbd_url_clear(&d->url);
	g_free(d->snap);
	g_free(d->clone);
	g_mutex_clear(&d->grow_lock);
	g_mutex_clear(&d->idle_lock);
	g_cond_clear(&d->idle_cond);
	g_free(d);
}

/* Take the image's exclusive lock for good, or say who has it. */
static int drbd_lock(struct drbd *d, GError **error)
{
	rbd_lock_mode_t mode;
	char *owners[8];
	size_t n = G_N_ELEMENTS(owners);
	g_autofree char *who = NULL;
	int r, o;

	r = rbd_lock_acquire(d->image, RBD_LOCK_MODE_EXCLUSIVE);
	if (r == 0)
		return 0;
	if (r == -EOPNOTSUPP || r == -EINVAL)
		return backend_set_error(error, -EOPNOTSUPP,
					 "%s: the image has no exclusive-lock feature (rbd feature enable %s/%s%s%s exclusive-lock): two writers could not be told apart",
					 d->url.url, d->url.pool, d->url.ns,
					 d->url.ns[0] ? "/" : "", d->url.image);
	o = rbd_lock_get_owners(d->image, &mode, owners, &n);
	if (o == 0 && n > 0) {
		GString *s = g_string_new(NULL);

		for (size_t i = 0; i < n; i++)
			g_string_append_printf(s, "%s%s", i ? ", " : "",
					       owners[i]);
		rbd_lock_get_owners_cleanup(owners, n);
		who = g_string_free(s, FALSE);
	}
	if (r == -EROFS || r == -EBUSY || who)
		return backend_set_error(error, -EBUSY,
					 "%s: in use: its exclusive lock is held by %s",
					 d->url.url, who ? who : "another client");
	return backend_set_error(error, drbd_errno(d, r, "lock"),
				 "%s: cannot take the exclusive lock: %s",
				 d->url.url, g_strerror(-r));
}

/* Open volume name of d's image: the clone IMAGE@NAME (an image of
 * that name, volume.c), else the snapshot NAME, read-only.  0 or
 * -errno. */
static int drbd_open_volume(struct drbd *d, const char *name)
{
	g_autofree char *clone = drbd_clone_image(d->url.image, name);
	int ret;

	ret = d->rdonly ?
		rbd_open_read_only(d->ioctx, clone, &d->image, NULL) :
		rbd_open(d->ioctx, clone, &d->image, NULL);
	if (ret == 0) {
		d->clone = g_steal_pointer(&clone);
		return 0;
	}
	if (ret != -ENOENT)
		return ret;
	d->snap = g_strdup(name);
	d->rdonly = true;
	return rbd_open_read_only(d->ioctx, d->url.image, &d->image, name);
}

/* Connect and open the image (read-only without the lock, else with
 * it).  Control thread. */
static int drbd_open(struct backend *b, const struct backend_open_args *args)
{
	struct drbd *d;
	uint64_t size;
	bool renewed = false;
	int ret;

	d = g_new0(struct drbd, 1);
	g_mutex_init(&d->grow_lock);
	g_mutex_init(&d->idle_lock);
	g_cond_init(&d->idle_cond);
	ret = drbd_url_parse(args->path, true, &d->url, args->error);
	if (ret < 0) {
		drbd_free(d);
		return ret;
	}
	d->b = b;
	d->rdonly = args->flags & BACKEND_OPEN_RDONLY;
	d->growable = args->flags & BACKEND_OPEN_GROWABLE;
	ret = drbd_conn_get(&d->url, &d->conn, args->error);
	if (ret < 0)
		goto fail;
	do {
		/* Again from the start after a renewal (a volume's open
		 * may have set these). */
		g_clear_pointer(&d->snap, g_free);
		g_clear_pointer(&d->clone, g_free);
		d->rdonly = args->flags & BACKEND_OPEN_RDONLY;
		d->ioctx = drbd_conn_ioctx(d->conn);
		if (args->volume && args->volume[0])
			ret = drbd_open_volume(d, args->volume);
		else if (d->rdonly)
			ret = rbd_open_read_only(d->ioctx, d->url.image,
						 &d->image, NULL);
		else
			ret = rbd_open(d->ioctx, d->url.image, &d->image,
				       NULL);
	} while (drbd_conn_renew(&d->url, &d->conn, ret, &renewed,
				 args->error));
	if (!d->conn)
		goto fail;
	if (ret < 0) {
		d->image = NULL;
		if (args->volume && args->volume[0])
			backend_set_error(args->error, ret,
					  "%s: volume %s (a snapshot or clone): %s",
					  d->url.url, args->volume,
					  g_strerror(-ret));
		else
			backend_set_error(args->error, ret, "%s: image %s: %s",
					  d->url.url, d->url.image,
					  g_strerror(-ret));
		goto fail;
	}
	if (!d->rdonly) {
		ret = drbd_lock(d, args->error);
		if (ret < 0)
			goto fail;
	}
	ret = rbd_get_size(d->image, &size);
	if (ret < 0) {
		backend_set_error(args->error, ret, "%s: size: %s", d->url.url,
				  g_strerror(-ret));
		goto fail;
	}
	atomic_store(&d->size, size);
	b->priv = d;
	b->limits = (struct backend_limits){
		.request_alignment = 1,
		.mem_alignment = 1,
		.block_size = 4096,
		.max_transfer = 32u << 20,
		.max_segs = IOV_MAX,
		.max_size = INT64_MAX,
	};
	return 0;
fail:
	drbd_free(d);
	return ret;
}

/* Flush what is left; nothing is in flight from the core.  Control
 * thread. */
static void drbd_close(struct backend *b)
{
	struct drbd *d = b->priv;
	int ret;

	if (!d->rdonly) {
		ret = drbd_run_sync(d, DRBD_FLUSH, 0, 0);
		if (ret < 0)
			g_warning("%s: flush at close: %s; writes since the last flush may be lost",
				  d->url.url, g_strerror(-ret));
		rbd_lock_release(d->image);
	}
	drbd_drain(d);
	b->priv = NULL;
	drbd_free(d);
}

/* The size as this process last set or read it.  Any thread. */
static int64_t drbd_get_size(struct backend *b)
{
	struct drbd *d = b->priv;

	return (int64_t)atomic_load(&d->size);
}

/* Read or write (backend.h).  Any thread; never waits for an
 * asynchronous kiocb. */
static ssize_t drbd_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	return drbd_submit_io(b->priv, iocb);
}

/* rbd_aio_flush: every write completed before is durable.  Worker thread. */
static int drbd_flush(struct backend *b)
{
	struct drbd *d = b->priv;

	int ret;

	if (d->rdonly)
		return 0;
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_FLUSH_BEGIN, d->url.url, 0,
			     NULL, 0, false, NULL, 0);
	ret = drbd_run_sync(d, DRBD_FLUSH, 0, 0);
	dioloop_iorec_remote(DIOLOOP_IOREC_REMOTE_FLUSH_END, d->url.url, 0,
			     NULL, 0, false, NULL, ret);
	return ret;
}

/* rbd_aio_write_zeroes.  Worker thread. */
static int drbd_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	struct drbd *d = b->priv;
	uint64_t done = 0;
	int ret = 0;

	/* size_t length; keep each call well inside it anyway. */
	while (done < len && ret == 0) {
		uint64_t n = MIN(len - done, DRBD_MAP_MAX);

		ret = drbd_run_sync(d, DRBD_WRITE_ZEROES, pos + done, n);
		done += n;
	}
	return ret;
}

/*
 * Discard as rbd_aio_write_zeroes: rbd_aio_discard leaves the parts of the
 * range that are not aligned to rbd_discard_granularity_bytes (64 KiB by
 * default, 4 KiB at least) as they were, so a hole punched at 0x1481
 * would read back old data up to the next 64 KiB.  write_zeroes
 * deallocates the whole objects of the range as discard does and writes
 * zeros over the rest.  Worker thread.
 */
static int drbd_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	return drbd_write_zeroes(b, pos, len);
}

/* rbd_resize.  Worker thread, nothing in flight. */
static int drbd_resize(struct backend *b, uint64_t size)
{
	struct drbd *d = b->priv;
	int ret;

	if (size > (uint64_t)INT64_MAX)
		return -EFBIG;
	g_mutex_lock(&d->grow_lock);
	ret = drbd_errno(d, rbd_resize(d->image, size), "resize");
	if (ret == 0)
		atomic_store(&d->size, size);
	g_mutex_unlock(&d->grow_lock);
	return ret;
}

struct drbd_map_state {
	uint64_t pos, end;	/* asked about */
	uint64_t data_start, data_end;	/* first data run found */
	bool found;
};

/* rbd_diff_iterate2's callback: keep the first run of data (merging
 * adjacent extents), stop at the first gap after it. */
static int drbd_map_cb(uint64_t off, size_t len, int exists, void *arg)
{
	struct drbd_map_state *s = arg;

	if (!exists || len == 0)
		return 0;
	if (!s->found) {
		s->found = true;
		s->data_start = off;
		s->data_end = off + len;
		return 0;
	}
	if (off <= s->data_end) {
		s->data_end = MAX(s->data_end, off + len);
		return 0;
	}
	return -ECANCELED;	/* enough: a hole follows the run */
}

/* The extent at pos from rbd_diff_iterate2 (at most DRBD_MAP_MAX).
 * Worker thread. */
static int drbd_map(struct backend *b, uint64_t pos, uint64_t len,
		    struct backend_extent *ext)
{
	struct drbd *d = b->priv;
	struct drbd_map_state s = { .pos = pos };
	int r;

	len = MIN(len, DRBD_MAP_MAX);
	s.end = pos + len;
	r = rbd_diff_iterate2(d->image, NULL, pos, len, 1, 0, drbd_map_cb, &s);
	if (r < 0 && r != -ECANCELED)
		return drbd_errno(d, r, "map");
	if (!s.found || s.data_start >= s.end) {
		ext->hole = true;
		ext->len = len;
	} else if (s.data_start > pos) {
		ext->hole = true;
		ext->len = s.data_start - pos;
	} else {
		ext->hole = false;
		ext->len = MIN(s.data_end, s.end) - pos;
	}
	return 0;
}

static int drbd_used_cb(uint64_t off, size_t len, int exists, void *arg)
{
	if (exists)
		*(uint64_t *)arg += len;
	return 0;
}

/* Size and the whole objects in use.  Worker thread. */
static int drbd_info(struct backend *b, struct backend_info *info)
{
	struct drbd *d = b->priv;
	uint64_t used = 0;
	int r;

	/* Whole objects: cheap with fast-diff, an estimate of the space. */
	r = rbd_diff_iterate2(d->image, NULL, 0, atomic_load(&d->size), 1, 1,
			      drbd_used_cb, &used);
	if (r < 0)
		return drbd_errno(d, r, "info");
	g_strlcpy(info->format, "rbd", sizeof(info->format));
	info->size = atomic_load(&d->size);
	info->allocated = MIN(used, info->size);
	return 0;
}

/* The image's times from its header, as librbd keeps them in memory
 * (creation; modify and access, which the cluster updates at most once a
 * rbd_mtime_update_interval): rbd has no ctime, the modify time stands
 * for it.  Any thread; never waits for the cluster. */
static int drbd_times(struct backend *b, struct backend_times *t)
{
	struct drbd *d = b->priv;
	struct timespec created = { 0 }, modified = { 0 }, accessed = { 0 };

	if (rbd_get_create_timestamp(d->image, &created) < 0)
		return -EOPNOTSUPP;
	if (rbd_get_modify_timestamp(d->image, &modified) < 0 ||
	    modified.tv_sec == 0)
		modified = created;
	if (rbd_get_access_timestamp(d->image, &accessed) < 0 ||
	    accessed.tv_sec == 0)
		accessed = modified;
	t->atime = accessed;
	t->mtime = modified;
	t->ctime = modified;
	return 0;
}

/* ---- synchronous helpers ---- */

/* A new image with the cluster's default features.  Any thread. */
static int drbd_create(const struct backend_create_args *a, GError **error)
{
	struct drbd_url u;
	struct drbd_conn *c = NULL;
	int order = 0, r;

	if (a->checksum)
		return backend_set_error(error, -EINVAL,
					 "%s: rbd images have no checksums",
					 a->path);
	r = drbd_url_parse(a->path, true, &u, error);
	if (r < 0)
		return r;
	if (a->size > (uint64_t)INT64_MAX) {
		r = backend_set_error(error, -EFBIG, "%s: size %llu is too large",
				      a->path, (unsigned long long)a->size);
		goto out;
	}
	r = drbd_conn_get(&u, &c, error);
	if (r < 0)
		goto out;
	/* Default features: exclusive-lock (drbd_lock needs it), object-map
	 * and fast-diff (cheap map and info) among them. */
	r = rbd_create(drbd_conn_ioctx(c), u.image, a->size, &order);
	if (r < 0)
		backend_set_error(error, r, "%s: create: %s", a->path,
				  g_strerror(-r));
	drbd_conn_put(c);
out:
	drbd_url_clear(&u);
	return r;
}

/* rbd_remove.  Any thread. */
static int drbd_remove(const char *url, GError **error)
{
	struct drbd_url u;
	struct drbd_conn *c = NULL;
	int r;

	r = drbd_url_parse(url, true, &u, error);
	if (r < 0)
		return r;
	r = drbd_conn_get(&u, &c, error);
	if (r == 0) {
		r = rbd_remove(drbd_conn_ioctx(c), u.image);
		if (r < 0)
			backend_set_error(error, r, "%s: remove: %s", url,
					  g_strerror(-r));
		drbd_conn_put(c);
	}
	drbd_url_clear(&u);
	return r;
}

/* The URL's form, without reaching the cluster. */
static int drbd_check_url(const char *url, bool want_file, GError **error)
{
	struct drbd_url u;
	int r = drbd_url_parse(url, want_file, &u, error);

	if (r == 0)
		drbd_url_clear(&u);
	return r;
}

static gint drbd_name_cmp(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The image names of a pool or namespace, sorted.  Any thread. */
static int drbd_list(const char *dir_url, GPtrArray *names, GError **error)
{
	struct drbd_url u;
	struct drbd_conn *c = NULL;
	rbd_image_spec_t *specs = NULL;
	size_t max = 64, i;
	GPtrArray *found;
	bool renewed = false;
	int r;

	r = drbd_url_parse(dir_url, false, &u, error);
	if (r < 0)
		return r;
	r = drbd_conn_get(&u, &c, error);
	if (r < 0)
		goto out;
	for (;;) {
		specs = g_new0(rbd_image_spec_t, max);
		r = rbd_list2(drbd_conn_ioctx(c), specs, &max);
		if (r != -ERANGE &&
		    !drbd_conn_renew(&u, &c, r, &renewed, error))
			break;
		g_free(specs);
		specs = NULL;
	}
	if (!c) {		/* the renewal failed: *error says why */
		g_free(specs);
		r = -EIO;
		goto out;
	}
	if (r < 0) {
		backend_set_error(error, r, "%s: list: %s", dir_url,
				  g_strerror(-r));
	} else {
		found = g_ptr_array_new();
		for (i = 0; i < max; i++)
			g_ptr_array_add(found, g_strdup(specs[i].name));
		rbd_image_spec_list_cleanup(specs, max);
		g_ptr_array_sort(found, drbd_name_cmp);
		for (i = 0; i < found->len; i++)
			g_ptr_array_add(names, found->pdata[i]);
		g_ptr_array_free(found, TRUE);
		r = 0;
	}
	g_free(specs);
	drbd_conn_put(c);
out:
	drbd_url_clear(&u);
	return r;
}

const struct backend_ops rbd_backend_ops = {
	.name = "rbd",
	.open = drbd_open,
	.close = drbd_close,
	.get_size = drbd_get_size,
	.direct_IO_bvec = drbd_direct_IO_bvec,
	.flush = drbd_flush,
	.discard = drbd_discard,
	.write_zeroes = drbd_write_zeroes,
	.resize = drbd_resize,
	.map = drbd_map,
	.info = drbd_info,
	.times = drbd_times,
	.volumes = &drbd_volume_ops,
	.protocol = "rbd",
	.create = drbd_create,
	.create_align = 1,
	.remove = drbd_remove,
	.check_url = drbd_check_url,
	.list = drbd_list,
};
