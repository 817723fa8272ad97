/* SPDX-License-Identifier: MIT */
/*
 * The core's entry points to the optional volume op set and the stats op
 * (volume.h): call the backend's op, or answer -EOPNOTSUPP with a message
 * when its table has none.
 */
#include "backends/volume.h"

#include <errno.h>
#include <string.h>

#include "backends/backend.h"

G_DEFINE_QUARK(dioloop-backend-volume-error, backend_volume_error)

bool backend_volume_ops_complete(const struct backend_volume_ops *v)
{
	return v->list && v->snapshot && v->delete && v->scrub && v->check &&
	       v->set_commit_interval;
}

/* The backend of b's stack that answers its volume ops: b, or the first
 * one below b's filters with a volume op set (filters forward them). */
static struct backend *volume_target(struct backend *b)
{
	while (!b->ops->volumes && b->ops->is_filter)
		b = b->inner;
	return b;
}

bool backend_has_volumes(const struct backend *b)
{
	return volume_target((struct backend *)b)->ops->volumes != NULL;
}

/* -EOPNOTSUPP, saying that b's format has one volume only. */
static int no_volumes(const struct backend *b, GError **error)
{
	g_set_error(error, BACKEND_VOLUME_ERROR, EOPNOTSUPP,
		    "%s: a %s image has one volume only (volumes, snapshots "
		    "and scrub need the cow format)", b->path ? b->path : "",
		    b->ops->name);
	return -EOPNOTSUPP;
}

int backend_volume_list(struct backend *b, GArray *out, GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->list(b, out, error);
}

int backend_volume_snapshot(struct backend *b, const char *name,
			    GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->snapshot(b, name, false, error);
}

int backend_volume_clone(struct backend *b, const char *name, GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->snapshot(b, name, true, error);
}

int backend_volume_delete(struct backend *b, const char *name, GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->delete(b, name, error);
}

void backend_scrub_pace(gint64 start_us, const struct backend_scrub_progress *p,
			uint64_t rate)
{
	gint64 due, now;

	if (!rate)
		return;
	due = start_us + (gint64)((double)p->done * p->block_size * 1e6 /
				  (double)rate);
	now = g_get_monotonic_time();
	if (due > now)
		g_usleep((gulong)(due - now));
}

int backend_volume_scrub(struct backend *b, backend_scrub_progress_fn progress,
			 backend_scrub_bad_fn bad, void *opaque,
			 struct backend_scrub_progress *res, GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->scrub(b, progress, bad, opaque, res, error);
}

int backend_volume_check(const struct backend_ops *ops, const char *path,
			 unsigned int flags, struct backend_check_result *res,
			 backend_check_report_fn report, void *opaque,
			 GError **error)
{
	if (!ops->volumes) {
		g_set_error(error, BACKEND_VOLUME_ERROR, EOPNOTSUPP,
			    "%s: a %s image has no metadata to check", path,
			    ops->name);
		return -EOPNOTSUPP;
	}
	return ops->volumes->check(path, flags, res, report, opaque, error);
}

int backend_volume_set_commit_interval(struct backend *b, unsigned int ms,
				       GError **error)
{
	b = volume_target(b);
	if (!b->ops->volumes)
		return no_volumes(b, error);
	return b->ops->volumes->set_commit_interval(b, ms, error);
}

int backend_volume_lookup(struct backend *b, const char *name,
			  struct backend_volume_info *info, GError **error)
{
	GArray *vols = g_array_new(FALSE, TRUE,
				   sizeof(struct backend_volume_info));
	int ret = backend_volume_list(b, vols, error);
	guint i;

	if (ret < 0)
		goto out;
	ret = -ENOENT;
	for (i = 0; i < vols->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(vols, struct backend_volume_info, i);

		if (!strcmp(v->name, name ? name : "")) {
			if (info)
				*info = *v;
			ret = 0;
			break;
		}
	}
	if (ret == -ENOENT)
		g_set_error(error, BACKEND_VOLUME_ERROR, ENOENT,
			    "no volume named '%s'", name ? name : "");
out:
	g_array_unref(vols);
	return ret;
}

int backend_stats(struct backend *b, backend_stat_fn emit, void *opaque)
{
	while (!b->ops->stats && b->ops->is_filter)
		b = b->inner;
	if (!b->ops->stats)
		return 0;
	return b->ops->stats(b, emit, opaque);
}

int backend_describe(struct backend *b, struct backend_details *d)
{
	memset(d, 0, sizeof(*d));
	while (!b->ops->describe && b->ops->is_filter)
		b = b->inner;
	if (!b->ops->describe)
		return -EOPNOTSUPP;
	return b->ops->describe(b, d);
}
