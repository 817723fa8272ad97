/* SPDX-License-Identifier: MIT */
/*
 * Snapshots of rbd images as volumes (backends/volume.h): the image is the
 * default volume "", each rbd snapshot a read-only volume of its name,
 * served as node IMAGE@NAME.  snapshot is rbd_snap_create2, delete
 * rbd_snap_remove2; a snapshot volume is opened with rbd_open_read_only
 * at the snapshot (rbd.c).  A writable clone NAME is the image IMAGE@NAME
 * (an image name with '@' is never one of a URL, nor a node of a pool
 * listing), served as node IMAGE@NAME: rbd_clone3 of the protected
 * snapshot "@clone-NAME" taken for it (a clone of the image), or of the
 * existing snapshot SNAP, protected for it unless it was (a clone of
 * IMAGE@SNAP; its parent is SNAP, which cannot be deleted while the clone
 * exists; the protection is taken back with the last clone, if dioloop
 * set it).  Scrub
 * and check are not supported.
 *
 * Threads: every op runs on a worker or control thread and waits for the
 * cluster (bounded by the URL's timeout=).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "backends/rbd/rbd_int.h"

/* An error of the volume ops: the positive errno as the code. */
static int drbd_volume_error(GError **error, int err, const char *fmt, ...)
	G_GNUC_PRINTF(3, 4);

static int drbd_volume_error(GError **error, int err, const char *fmt, ...)
{
	va_list ap;

	if (error && !*error) {
		va_start(ap, fmt);
		*error = g_error_new_valist(BACKEND_VOLUME_ERROR, -err, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* The image's snapshots (rbd_snap_list, grown until they fit): their
 * count, or -errno.  *snaps is freed with drbd_snaps_free. */
static int drbd_snaps_get(rbd_image_t image, rbd_snap_info_t **snaps)
{
	int max = 16, n;

	for (;;) {
		*snaps = g_new0(rbd_snap_info_t, max);
		n = rbd_snap_list(image, *snaps, &max);
		if (n != -ERANGE)
			break;
		g_free(*snaps);
	}
	if (n < 0) {
		g_free(*snaps);
		*snaps = NULL;
	}
	return n;
}

static void drbd_snaps_free(rbd_snap_info_t *snaps)
{
	if (!snaps)
		return;
	rbd_snap_list_end(snaps);
	g_free(snaps);
}

/* librbd calls the progress callback it is given, NULL too. */
static int drbd_no_progress(uint64_t done, uint64_t total, void *arg)
{
	(void)done;
	(void)total;
	(void)arg;
	return 0;
}

/* The snapshot a clone volume was made from: "@clone-NAME" ('@': no
 * volume name has one, so it never shows as a snapshot volume). */
#define DRBD_CLONE_SNAP "@clone-"

char *drbd_clone_image(const char *image, const char *name)
{
	return g_strdup_printf("%s@%s", image, name);
}

static char *drbd_clone_snap(const char *name)
{
	return g_strdup_printf(DRBD_CLONE_SNAP "%s", name);
}

/* The image's own handle for the volume ops: d's when d is the image,
 * else (d is a volume) a new read-only one in *own.  0 or -errno. */
static int drbd_head(struct drbd *d, rbd_image_t *head, rbd_image_t *own)
{
	*own = NULL;
	if (!d->snap && !d->clone) {
		*head = d->image;
		return 0;
	}
	int r = rbd_open_read_only(d->ioctx, d->url.image, own, NULL);

	*head = *own;
	return r;
}

/* The volume ops that change the image need its writable handle. */
static int drbd_writable_head(struct drbd *d, GError **error)
{
	if (d->snap || d->clone)
		return drbd_volume_error(error, -EOPNOTSUPP,
					 "%s: snapshots and clones are made and deleted through the image itself, not through its volume %s",
					 d->url.url, d->snap ? d->snap : d->clone);
	if (d->rdonly)
		return drbd_volume_error(error, -EROFS,
					 "%s is open read-only", d->url.url);
	return 0;
}

/* The id of the clone volume that is the rbd image of id image_id (a hex
 * string): its low 62 bits with bit 62 set, so it is no snapshot's id
 * (those count up from 1) and stays positive as a signed 64-bit one. */
static uint64_t drbd_child_volume_id(const char *image_id)
{
	uint64_t low = g_ascii_strtoull(image_id, NULL, 16) &
		       ((UINT64_C(1) << 62) - 1);

	return low | (UINT64_C(1) << 62);
}

/* Whether the rbd image spec is a clone volume of d's image: IMAGE@NAME in
 * its pool and namespace; *name then points at NAME in it. */
static bool drbd_is_clone_volume(struct drbd *d,
				 const rbd_linked_image_spec_t *s,
				 const char **name)
{
	size_t n = strlen(d->url.image);

	if (s->trash || strcmp(s->pool_name, d->url.pool) ||
	    strcmp(s->pool_namespace ? s->pool_namespace : "", d->url.ns) ||
	    strncmp(s->image_name, d->url.image, n) || s->image_name[n] != '@')
		return false;
	*name = s->image_name + n + 1;
	return (*name)[0] && strlen(*name) <= BACKEND_VOLUME_NAME_MAX &&
	       !strpbrk(*name, "/@");
}

/* Append the clone volumes made of snapshot snap to out, with snap as
 * their parent.  Only a protected snapshot is asked (a clone of IMAGE@SNAP
 * protects it), so listing an image whose snapshots have no clones opens
 * nothing. */
static void drbd_list_snap_clones(struct drbd *d, rbd_image_t head,
				  const rbd_snap_info_t *snap, GArray *out)
{
	rbd_linked_image_spec_t *kids = NULL;
	struct backend_volume_info v;
	rbd_image_t at;
	size_t max = 8, i;
	int prot = 0, r;

	if (rbd_snap_is_protected(head, snap->name, &prot) < 0 || !prot)
		return;
	if (rbd_open_read_only(d->ioctx, d->url.image, &at, snap->name) < 0)
		return;
	for (;;) {
		kids = g_new0(rbd_linked_image_spec_t, max);
		r = rbd_list_children3(at, kids, &max);
		if (r != -ERANGE)
			break;
		g_free(kids);
	}
	for (i = 0; r >= 0 && i < max; i++) {
		const char *name;

		if (!drbd_is_clone_volume(d, &kids[i], &name))
			continue;
		memset(&v, 0, sizeof(v));
		v.id = drbd_child_volume_id(kids[i].image_id);
		g_strlcpy(v.name, name, sizeof(v.name));
		v.parent = snap->id;
		v.size = snap->size;
		v.open = d->clone && !strcmp(d->clone, kids[i].image_name);
		g_array_append_val(out, v);
	}
	if (r >= 0)
		rbd_linked_image_spec_list_cleanup(kids, max);
	g_free(kids);
	rbd_close(at);
}

/* backend_volume_ops.list: the image, then its snapshots and clones in
 * id order (a clone of the image has its snapshot's id; the clones of a
 * snapshot follow it). */
static int drbd_vops_list(struct backend *b, GArray *out, GError **error)
{
	struct drbd *d = b->priv;
	struct backend_volume_info v;
	rbd_image_t head, own;
	rbd_snap_info_t *snaps = NULL;
	uint64_t size = 0;
	int n, i;

	n = drbd_head(d, &head, &own);
	if (n == 0) {
		n = drbd_snaps_get(head, &snaps);
		if (n >= 0 && rbd_get_size(head, &size) < 0)
			size = 0;
	}
	if (n < 0) {
		if (own)
			rbd_close(own);
		return drbd_volume_error(error, drbd_errno(d, n, "snapshots"),
					 "%s: listing snapshots: %s",
					 d->url.url, g_strerror(-n));
	}
	memset(&v, 0, sizeof(v));
	v.size = size;
	v.open = !d->snap && !d->clone;
	g_array_append_val(out, v);
	for (i = 0; i < n; i++) {
		const char *name = snaps[i].name;
		bool clone = g_str_has_prefix(name, DRBD_CLONE_SNAP);
		struct timespec ts = { 0 };

		if (clone)
			name += strlen(DRBD_CLONE_SNAP);
		/* Names no volume may have (made with the rbd tool) cannot
		 * be nodes: left out. */
		if (!name[0] || strlen(name) > BACKEND_VOLUME_NAME_MAX ||
		    strpbrk(name, "/@"))
			continue;
		memset(&v, 0, sizeof(v));
		v.id = snaps[i].id;
		g_strlcpy(v.name, name, sizeof(v.name));
		v.snapshot = !clone;
		v.size = snaps[i].size;
		if (rbd_snap_get_timestamp(head, snaps[i].id, &ts) == 0)
			v.create_time = (uint64_t)ts.tv_sec;
		v.open = clone ? d->clone && !strcmp(d->clone + strlen(d->url.image) + 1, name) :
				 d->snap && !strcmp(d->snap, name);
		g_array_append_val(out, v);
		if (!clone)
			drbd_list_snap_clones(d, head, &snaps[i], out);
	}
	drbd_snaps_free(snaps);
	if (own)
		rbd_close(own);
	return 0;
}

/* Whether the image has a snapshot called name. */
static bool drbd_snap_exists(struct drbd *d, const char *name)
{
	bool exists = false;

	return rbd_snap_exists(d->image, name, &exists) == 0 && exists;
}

/* A writable clone NAME: the snapshot "@clone-NAME", protected (clone v1
 * needs it), and rbd_clone3 of it into the image IMAGE@NAME with the
 * cluster's default features.  Undone on failure. */
static int drbd_clone(struct drbd *d, const char *name, GError **error)
{
	g_autofree char *snap = drbd_clone_snap(name);
	g_autofree char *image = drbd_clone_image(d->url.image, name);
	rbd_image_options_t opts;
	const char *what = "snapshot";
	int r;

	r = rbd_snap_create2(d->image, snap, 0, drbd_no_progress, NULL);
	if (r == 0) {
		what = "protect";
		r = rbd_snap_protect(d->image, snap);
		if (r == 0) {
			what = "clone";
			rbd_image_options_create(&opts);
			r = rbd_clone3(d->ioctx, d->url.image, snap, d->ioctx,
				       image, opts);
			rbd_image_options_destroy(opts);
			if (r < 0)
				rbd_snap_unprotect(d->image, snap);
		}
		if (r < 0)
			rbd_snap_remove2(d->image, snap, 0, drbd_no_progress,
					 NULL);
	}
	if (r < 0)
		return drbd_volume_error(error, drbd_errno(d, r, what),
					 "%s: clone %s (%s): %s", d->url.url,
					 name, what, g_strerror(-r));
	return 0;
}

/*
 * The image metadata key that says dioloop protected snapshot snap for a
 * clone of it (drbd_clone_snapshot): deleting the last such clone takes
 * that protection back, and only that one.  A snapshot its operator
 * protected stays protected.
 */
static char *drbd_protected_key(const char *snap)
{
	return g_strconcat("dioloop.protected-for-clone.", snap, NULL);
}

/* Whether image's metadata has key (set by dioloop). */
static bool drbd_has_metadata(rbd_image_t image, const char *key)
{
	char value[16];
	size_t len = sizeof(value);
	int r = rbd_metadata_get(image, key, value, &len);

	return r == 0 || r == -ERANGE;
}

/* Whether the image IMAGE@NAME (a clone volume) exists. */
static bool drbd_clone_image_exists(struct drbd *d, const char *name)
{
	g_autofree char *image = drbd_clone_image(d->url.image, name);
	rbd_image_t h;

	if (rbd_open_read_only(d->ioctx, image, &h, NULL) < 0)
		return false;
	rbd_close(h);
	return true;
}

/* Whether the image has a volume called name: a snapshot, or a clone of
 * the image or of a snapshot. */
static bool drbd_volume_exists(struct drbd *d, const char *name)
{
	g_autofree char *base = drbd_clone_snap(name);

	return drbd_snap_exists(d, name) || drbd_snap_exists(d, base) ||
	       drbd_clone_image_exists(d, name);
}

/*
 * A writable clone NAME of d, the snapshot volume SNAP: rbd_clone3 of
 * the snapshot into the image IMAGE@NAME with the cluster's default
 * features.  The snapshot is protected first when it is not (clone
 * format v1 needs it; with v2 an unprotected parent could be removed
 * into the trash while clones use it, and deleting a snapshot others
 * were made from is refused, as for cow).  The protection goes through a
 * writable handle of the image opened for it: librbd forwards it to the
 * client holding the image's exclusive lock (a daemon serving the
 * image), or takes the lock until the handle closes.  Undone on
 * failure.
 */
static int drbd_clone_snapshot(struct drbd *d, const char *name,
			       GError **error)
{
	g_autofree char *image = drbd_clone_image(d->url.image, name);
	g_autofree char *key = drbd_protected_key(d->snap);
	rbd_image_options_t opts;
	const char *what = "open";
	rbd_image_t head;
	int prot = 0, r;

	r = rbd_open(d->ioctx, d->url.image, &head, NULL);
	if (r == 0) {
		what = "protect";
		r = rbd_snap_is_protected(head, d->snap, &prot);
		if (r == 0 && !prot) {
			r = rbd_snap_protect(head, d->snap);
			if (r == 0) {
				what = "metadata";
				r = rbd_metadata_set(head, key, "1");
				if (r < 0)
					rbd_snap_unprotect(head, d->snap);
			}
		}
		if (r == 0) {
			what = "clone";
			rbd_image_options_create(&opts);
			r = rbd_clone3(d->ioctx, d->url.image, d->snap,
				       d->ioctx, image, opts);
			rbd_image_options_destroy(opts);
			if (r < 0 && !prot &&
			    rbd_snap_unprotect(head, d->snap) == 0)
				rbd_metadata_remove(head, key);
		}
		rbd_close(head);
	}
	if (r < 0)
		return drbd_volume_error(error, drbd_errno(d, r, what),
					 "%s: clone %s of snapshot %s (%s): %s",
					 d->url.url, name, d->snap, what,
					 g_strerror(-r));
	return 0;
}

/* backend_volume_ops.snapshot: rbd_snap_create2 of the image (the core
 * has drained the node: every acknowledged write is in; librbd flushes
 * its cache first), or a writable clone of the image (drbd_clone) or of
 * the snapshot volume b is (drbd_clone_snapshot). */
static int drbd_vops_snapshot(struct backend *b, const char *name,
			      bool writable, GError **error)
{
	struct drbd *d = b->priv;
	int r;

	if (!name[0] || strlen(name) > BACKEND_VOLUME_NAME_MAX ||
	    strpbrk(name, "/@"))
		return drbd_volume_error(error, -EINVAL,
					 "bad volume name '%s'", name);
	if (!(writable && d->snap)) {
		r = drbd_writable_head(d, error);
		if (r < 0)
			return r;
	}
	if (drbd_volume_exists(d, name))
		return drbd_volume_error(error, -EEXIST,
					 "a volume named '%s' exists", name);
	if (writable && d->snap)
		return drbd_clone_snapshot(d, name, error);
	if (writable)
		return drbd_clone(d, name, error);
	r = rbd_snap_create2(d->image, name, 0, drbd_no_progress, NULL);
	if (r < 0)
		return drbd_volume_error(error, drbd_errno(d, r, "snapshot"),
					 "%s: snapshot %s: %s", d->url.url,
					 name, g_strerror(-r));
	return 0;
}

/* Delete clone name: its image (EBUSY while anyone has it open), then
 * its snapshot. */
static int drbd_delete_clone(struct drbd *d, const char *name,
			     GError **error)
{
	g_autofree char *snap = drbd_clone_snap(name);
	g_autofree char *image = drbd_clone_image(d->url.image, name);
	int r;

	r = rbd_remove(d->ioctx, image);
	if (r == -EBUSY)
		return drbd_volume_error(error, -EBUSY,
					 "clone '%s' is in use (open by a client of the cluster)",
					 name);
	if (r < 0 && r != -ENOENT)
		return drbd_volume_error(error, drbd_errno(d, r, "delete"),
					 "%s: remove clone image %s: %s",
					 d->url.url, image, g_strerror(-r));
	r = rbd_snap_unprotect(d->image, snap);
	if (r < 0 && r != -EINVAL)	/* EINVAL: not protected */
		return drbd_volume_error(error, drbd_errno(d, r, "delete"),
					 "%s: unprotect snapshot %s: %s",
					 d->url.url, snap, g_strerror(-r));
	r = rbd_snap_remove2(d->image, snap, 0, drbd_no_progress, NULL);
	if (r < 0)
		return drbd_volume_error(error, drbd_errno(d, r, "delete"),
					 "%s: remove snapshot %s: %s",
					 d->url.url, snap, g_strerror(-r));
	return 0;
}

/* Delete clone name of a snapshot: its image (EBUSY while anyone has it
 * open), then the snapshot's protection when no clone of it is left and
 * dioloop protected it (drbd_protected_key). */
static int drbd_delete_snap_clone(struct drbd *d, const char *name,
				  GError **error)
{
	g_autofree char *image = drbd_clone_image(d->url.image, name);
	rbd_linked_image_spec_t parent = { 0 };
	rbd_snap_spec_t snap = { 0 };
	rbd_image_t h;
	bool has_parent = false;
	int r;

	r = rbd_open_read_only(d->ioctx, image, &h, NULL);
	if (r == 0) {
		has_parent = rbd_get_parent(h, &parent, &snap) == 0;
		rbd_close(h);
	}
	r = rbd_remove(d->ioctx, image);
	if (r == -EBUSY)
		r = drbd_volume_error(error, -EBUSY,
				      "clone '%s' is in use (open by a client of the cluster)",
				      name);
	else if (r < 0)
		r = drbd_volume_error(error, drbd_errno(d, r, "delete"),
				      "%s: remove clone image %s: %s",
				      d->url.url, image, g_strerror(-r));
	/* Unprotect fails with EBUSY while other clones of it are left:
	 * it then stays protected. */
	else if (has_parent && !strcmp(parent.image_name, d->url.image)) {
		g_autofree char *key = drbd_protected_key(snap.name);

		if (drbd_has_metadata(d->image, key) &&
		    rbd_snap_unprotect(d->image, snap.name) == 0)
			rbd_metadata_remove(d->image, key);
	}
	if (has_parent) {
		rbd_linked_image_spec_cleanup(&parent);
		rbd_snap_spec_cleanup(&snap);
	}
	return r;
}

/* backend_volume_ops.delete: a snapshot (rbd_snap_remove2; a protected
 * one, one with clones, stays: EBUSY) or a clone. */
static int drbd_vops_delete(struct backend *b, const char *name,
			    GError **error)
{
	struct drbd *d = b->priv;
	g_autofree char *base = NULL;
	int r;

	if (!name || !name[0])
		return drbd_volume_error(error, -EBUSY,
					 "the default volume is the image itself");
	r = drbd_writable_head(d, error);
	if (r < 0)
		return r;
	base = drbd_clone_snap(name);
	if (!strpbrk(name, "/@") && drbd_snap_exists(d, name)) {
		g_autofree char *key = drbd_protected_key(name);

		r = rbd_snap_remove2(d->image, name, 0, drbd_no_progress,
				     NULL);
		if (r == -EBUSY)
			return drbd_volume_error(error, -EBUSY,
						 "snapshot '%s' is protected or has clones (rbd snap unprotect, rbd flatten)",
						 name);
		if (r < 0)
			return drbd_volume_error(error,
						 drbd_errno(d, r, "delete"),
						 "%s: remove snapshot %s: %s",
						 d->url.url, name,
						 g_strerror(-r));
		/* A stale mark would let a later snapshot of this name lose
		 * its operator's protection (drbd_protected_key). */
		rbd_metadata_remove(d->image, key);
		return 0;
	}
	if (drbd_snap_exists(d, base))
		return drbd_delete_clone(d, name, error);
	if (!strpbrk(name, "/@") && drbd_clone_image_exists(d, name))
		return drbd_delete_snap_clone(d, name, error);
	return drbd_volume_error(error, -ENOENT, "no volume named '%s'",
				 name);
}

static int drbd_vops_scrub(struct backend *b,
			   backend_scrub_progress_fn progress,
			   backend_scrub_bad_fn bad, void *opaque,
			   struct backend_scrub_progress *res, GError **error)
{
	struct drbd *d = b->priv;

	(void)progress;
	(void)bad;
	(void)opaque;
	(void)res;
	return drbd_volume_error(error, -EOPNOTSUPP,
				 "%s: rbd images have no checksums to scrub (ceph osd deep-scrub checks the cluster's copies)",
				 d->url.url);
}

static int drbd_vops_check(const char *path, unsigned int flags,
			   struct backend_check_result *res,
			   backend_check_report_fn report, void *opaque,
			   GError **error)
{
	(void)flags;
	(void)res;
	(void)report;
	(void)opaque;
	return drbd_volume_error(error, -EOPNOTSUPP,
				 "%s: rbd images have no metadata of dioloop's to check",
				 path);
}

/* Nothing to commit: durability is the flush's. */
static int drbd_vops_set_commit_interval(struct backend *b, unsigned int ms,
					 GError **error)
{
	(void)b;
	(void)ms;
	(void)error;
	return 0;
}

const struct backend_volume_ops drbd_volume_ops = {
	.list = drbd_vops_list,
	.snapshot = drbd_vops_snapshot,
	.delete = drbd_vops_delete,
	.scrub = drbd_vops_scrub,
	.check = drbd_vops_check,
	.set_commit_interval = drbd_vops_set_commit_interval,
};
