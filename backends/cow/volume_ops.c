/* SPDX-License-Identifier: MIT */
/*
 * cow's volume op set and counters (backends/volume.h): the cow calls of
 * cow.h and check.h behind the core's table, each with its message for a
 * person in a GError.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>

#include "backends/cow/check.h"

/* Set *error to msg, or to the errno's text when msg is NULL; ret. */
static int cow_volume_error(GError **error, int ret, const char *msg)
{
	g_set_error_literal(error, BACKEND_VOLUME_ERROR, -ret,
			    msg ? msg : g_strerror(-ret));
	return ret;
}

/* backend_volume_ops.list.  Worker thread. */
static int cow_vops_list(struct backend *b, GArray *out, GError **error)
{
	int ret = cow_list_volumes(b, out);

	return ret < 0 ? cow_volume_error(error, ret, NULL) : 0;
}

/* backend_volume_ops.snapshot.  Worker thread. */
static int cow_vops_snapshot(struct backend *b, const char *name,
			     bool writable, GError **error)
{
	g_autofree char *msg = NULL;
	int ret = cow_snapshot(b, name, writable);

	if (ret == 0)
		return 0;
	if (ret == -EEXIST)
		msg = g_strdup_printf("a volume named '%s' exists", name);
	return cow_volume_error(error, ret, msg);
}

/* backend_volume_ops.delete.  Worker thread. */
static int cow_vops_delete(struct backend *b, const char *name,
			   GError **error)
{
	g_autofree char *msg = NULL;
	int ret = cow_delete_volume(b, name);

	if (ret == 0)
		return 0;
	if (ret == -ENOENT)
		msg = g_strdup_printf("no volume named '%s'", name);
	else if (ret == -EBUSY)
		msg = g_strdup_printf("volume '%s' is in use or is the image "
				      "itself", name);
	return cow_volume_error(error, ret, msg);
}

/* backend_volume_ops.scrub.  Worker thread. */
static int cow_vops_scrub(struct backend *b, backend_scrub_progress_fn progress,
			  backend_scrub_bad_fn bad, void *opaque,
			  struct backend_scrub_progress *res, GError **error)
{
	int ret = cow_scrub(b, progress, bad, opaque, res);

	return ret < 0 ? cow_volume_error(error, ret, NULL) : 0;
}

/* The caller's report callback, and the last line it was given. */
struct cow_check_relay {
	backend_check_report_fn report;
	void *opaque;
	char *last;
};

/* Pass a problem line on, remembering it (a failure's reason). */
static void cow_check_relay(void *opaque, const char *msg)
{
	struct cow_check_relay *r = opaque;

	g_free(r->last);
	r->last = g_strdup(msg);
	if (r->report)
		r->report(r->opaque, msg);
}

/* backend_volume_ops.check: the reason of a failure is the last line
 * cow_check reported.  Any thread. */
static int cow_vops_check(const char *path, unsigned int flags,
			  struct backend_check_result *res,
			  backend_check_report_fn report, void *opaque,
			  GError **error)
{
	struct cow_check_relay r = { .report = report, .opaque = opaque };
	int ret = cow_check(path, flags, res, cow_check_relay, &r);

	if (ret < 0)
		cow_volume_error(error, ret, r.last);
	g_free(r.last);
	return ret;
}

/* backend_volume_ops.set_commit_interval.  Any thread. */
static int cow_vops_set_commit_interval(struct backend *b, unsigned int ms,
					GError **error)
{
	(void)error;
	cow_set_commit_interval(b, ms);
	return 0;
}

const struct backend_volume_ops cow_volume_ops = {
	.list = cow_vops_list,
	.snapshot = cow_vops_snapshot,
	.delete = cow_vops_delete,
	.scrub = cow_vops_scrub,
	.check = cow_vops_check,
	.set_commit_interval = cow_vops_set_commit_interval,
};

/* backend_ops.describe: the container's format, checksum, generation,
 * uuid, store size and blocks.  Any thread. */
int cow_describe(struct backend *b, struct backend_details *d)
{
	struct cow_volume *v = b->priv;
	struct cow_container *c = v->c;
	struct backend_info store;
	struct cow_stats st;
	const char *csum;
	int ret;

	cow_get_stats(b, &st);
	ret = backend_info(c->meta.store, &store);
	if (ret < 0)
		return ret;
	g_mutex_lock(&c->commit_lock);
	d->format_version = c->sb.version;
	memcpy(d->uuid, c->sb.uuid, sizeof(d->uuid));
	g_mutex_unlock(&c->commit_lock);
	d->has_uuid = true;
	csum = cow_csum_name(st.csum_type);
	g_strlcpy(d->checksum, csum ? csum : "?", sizeof(d->checksum));
	d->generation = st.generation;
	d->container_size = store.size;
	d->container_allocated = store.allocated;
	d->block_size = COW_BLOCK_SIZE;
	d->blocks = st.nr_blocks;
	d->used_blocks = st.used_blocks;
	d->pinned_blocks = st.pinned_blocks;
	return 0;
}

/* backend_ops.stats: the volume's counters (struct cow_stats).  Any
 * thread. */
int cow_stats(struct backend *b, backend_stat_fn emit, void *opaque)
{
	struct cow_stats st;

	cow_get_stats(b, &st);
	emit(opaque, "checksum_errors", st.csum_errors);
	emit(opaque, "meta_errors", st.meta_errors);
	emit(opaque, "generation", st.generation);
	emit(opaque, "commits", st.commits);
	emit(opaque, "mapped_blocks", st.mapped_blocks);
	emit(opaque, "nr_blocks", st.nr_blocks);
	emit(opaque, "used_blocks", st.used_blocks);
	emit(opaque, "pinned_blocks", st.pinned_blocks);
	emit(opaque, "failed", st.failed);
	return 0;
}
