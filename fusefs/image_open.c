/* SPDX-License-Identifier: MIT */
/* Which images of the source directory are served, and how a node's image
 * is opened: its lock, its backend, the fault filter the mount asks for. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/volume.h"
#include "fusefs/fs.h"
#include "fusefs/imagelock.h"
#include "fusefs/nodes.h"
#include "fusefs/redirect.h"
#include "fusefs/remote.h"
#include "fusefs/source.h"
#include "fusefs/spec.h"

bool dioloop_is_node_name(const char *name)
{
	return name[0] != '\0' && name[0] != '.' && !strchr(name, '/');
}

bool dioloop_is_image_name(const char *name)
{
	/* '@' names a volume (IMAGE@VOLUME): a file with one in its name
	 * could stand in for another image's snapshot, so it is no image. */
	return dioloop_is_node_name(name) && !strchr(name, '@');
}

/*
 * What name serves, if it may be served as an image: 0 (served filled;
 * for a remote source only its existence is known), -ENOENT, -EACCES for
 * a name that resolves outside the source (logged), or -errno.
 */
int dioloop_check_image(struct dioloop_fs *fs, const char *name,
			struct dioloop_served *served)
{
	memset(served, 0, sizeof(*served));
	served->fd = -1;
	if (!dioloop_is_image_name(name))
		return -ENOENT;
	if (fs->remote)		/* the server lists regular files only */
		return dioloop_remote_has(fs->remote, name) ? 0 : -ENOENT;
	return dioloop_source_resolve(fs, name, served);
}

bool dioloop_image_servable(struct dioloop_fs *fs, const char *name)
{
	struct dioloop_served served;
	int ret = dioloop_check_image(fs, name, &served);

	dioloop_served_clear(&served);
	return ret == 0;
}

/* Whether a lock taken for the image called owner (NULL: any name of
 * the file) may be shared by a node of image. */
static bool dioloop_image_lock_shares(const struct dioloop_image_lock *l,
				      const char *owner)
{
	if (!l->owner || !owner)
		return !l->owner && !owner;
	return !strcmp(l->owner, owner);
}

int dioloop_image_lock_get(struct dioloop_fs *fs, const char *name,
			   const char *owner, int fd_path,
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
	if (l && dioloop_image_lock_shares(l, owner))
		l->refs++;
	else if (l)
		holder = g_strdup_printf("this daemon, as the migration target of %s",
					 l->owner ? l->owner : "another image");
	g_mutex_unlock(&fs->lock);
	if (l && !holder) {
		*out = l;
		return 0;
	}
	ret = holder ? -EBUSY :
	      dioloop_image_lock(fd_path, name, readonly, &fd, &holder);
	g_mutex_lock(&fs->lock);
	/* An alias may have taken it meanwhile (then we conflicted with
	 * ourselves): share that one. */
	l = g_hash_table_lookup(fs->image_locks, key);
	if (l && dioloop_image_lock_shares(l, owner)) {
		l->refs++;
	} else if (l) {
		l = NULL;
		ret = -EBUSY;
	} else if (ret == 0) {
		l = g_new0(struct dioloop_image_lock, 1);
		l->key = g_steal_pointer(&key);
		l->fd = fd;
		l->refs = 1;
		l->owner = g_strdup(owner);
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
				  name, holder ? holder : "this daemon");
	}
	return ret;
}

/*
 * A remote image's entry in the lock table: no local lock (fd -1: the
 * server's locks are not ours to see), only the per-image state its nodes
 * share (a cow container's scrub).  Shared by name.  Cannot fail.
 */
static struct dioloop_image_lock *dioloop_remote_lock_get(struct dioloop_fs *fs,
							 const char *name)
{
	g_autofree char *key = g_strdup_printf("remote:%s", name);
	struct dioloop_image_lock *l;

	g_mutex_lock(&fs->lock);
	l = g_hash_table_lookup(fs->image_locks, key);
	if (l) {
		l->refs++;
	} else {
		l = g_new0(struct dioloop_image_lock, 1);
		l->key = g_steal_pointer(&key);
		l->fd = -1;
		l->refs = 1;
		g_hash_table_insert(fs->image_locks, l->key, l);
	}
	g_mutex_unlock(&fs->lock);
	return l;
}

void dioloop_image_lock_put(struct dioloop_fs *fs,
			    struct dioloop_image_lock *l)
{
	bool last;

	/* Closed under the lock: a lookup that misses the table right
	 * after must not find the old lock still held by us. */
	g_mutex_lock(&fs->lock);
	last = --l->refs == 0;
	if (last) {
		g_hash_table_remove(fs->image_locks, l->key);
		if (l->fd >= 0)
			close(l->fd);
	}
	g_mutex_unlock(&fs->lock);
	if (!last)
		return;
	g_free(l->key);
	g_free(l->owner);
	g_free(l);
}

/* Does the mount ask for the fault filter on the node called name: a
 * -o fault=... rule for it, or -o fault for every node? */
static bool dioloop_mount_wants_fault(struct dioloop_fs *fs, const char *name)
{
	guint i;

	if (fs->opts.fault_all)
		return true;
	for (i = 0; fs->opts.faults && i < fs->opts.faults->len; i++) {
		struct dioloop_mount_fault *mf = fs->opts.faults->pdata[i];

		if (!strcmp(mf->node, "*") || !strcmp(mf->node, name))
			return true;
	}
	return false;
}

/* Add the -o fault= rules meant for name to the fault filter in b. */
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
 * Lock the image and open it: its backend by magic (raw or cow; a
 * volume: cow), read-write unless the mount or the image is read-only
 * or the volume is a snapshot, with the fault filter on top only when the
 * mount asks for it (dioloop_mount_wants_fault; a rule added at run time
 * stacks it then, dioloop_node_stack_fault).
 */
int dioloop_open_backend(struct dioloop_fs *fs,
			 const struct dioloop_node_src *src,
				struct backend **b, bool *readonly, bool *cow,
				struct dioloop_image_lock **lock)
{
	const struct dioloop_served *served = &src->served;
	/* A remote image: its URL.  A migrated image: its destination, for
	 * its volumes too.  Else the image, opened once beneath SOURCE
	 * (the path is for messages). */
	g_autofree char *path = fs->remote ?
		dioloop_remote_image_url(fs->remote, src->image) :
		served->target ? g_strdup(served->target) :
		g_build_filename(fs->source, src->image, NULL);
	struct backend_file file = {
		.dirfd = served->target ? -1 : fs->source_fd,
		.name = src->image,
	};
	struct backend_open_args args = { .path = path, .aio = fs->aio,
					  .volume = src->volume };
	struct backend *image = NULL;
	const char *type;
	int ret;

	*lock = NULL;
	if (served->fd < 0) {
		/* A URL: the server's permissions decide (the open below
		 * falls back to read-only on EACCES); a local lock cannot
		 * see other machines. */
		*readonly = fs->opts.readonly;
	} else {
		/* The served file's mode decides, for root too: a 0444
		 * image is a read-only disk, as the node's mode shows. */
		*readonly = fs->opts.readonly || !(served->st.st_mode & 0222);
		/* Before opening: opening may write (recovering an
		 * extension).  The volumes of one image share its lock
		 * (same dev:ino); a migration's destination belongs to its
		 * image's name alone. */
		ret = dioloop_image_lock_get(fs, src->image,
					     served->target ? src->image : NULL,
					     served->fd, &served->st, readonly,
					     lock);
		if (ret < 0)
			return ret;
		file.fd = (*lock)->fd;
		args.file = &file;
	}
	/* By content, for a volume too: its image is one whose backend has
	 * volumes (dioloop_volume_check found the volume there); a URL's
	 * format is read through its protocol's backend. */
	type = backend_probe_args(&args);
	args.flags = (*readonly ? BACKEND_OPEN_RDONLY : 0) |
		     (fs->opts.growable ? BACKEND_OPEN_GROWABLE : 0) |
		     (fs->opts.sync ? BACKEND_OPEN_SYNC : 0);
	/* A snapshot on a writable image: the node is read-only, the
	 * container stays writable for the other volumes. */
	if (src->snapshot && !*readonly)
		args.flags |= BACKEND_OPEN_RDONLY | BACKEND_OPEN_CONTAINER_RW;
	ret = backend_open(type, &args, &image);
	if ((ret == -EACCES || ret == -EROFS || ret == -EPERM) && !*readonly) {
		*readonly = true;
		args.flags &= ~(unsigned int)BACKEND_OPEN_CONTAINER_RW;
		args.flags |= BACKEND_OPEN_RDONLY;
		ret = backend_open(type, &args, &image);
	}
	if (ret < 0)
		goto out_put_lock;
	if (src->snapshot || (image->flags & BACKEND_OPEN_RDONLY))
		*readonly = true;
	*cow = backend_has_volumes(image);
	/* A remote image with volumes: its nodes share a lock entry,
	 * without a lock (a local lock cannot see other machines); the
	 * scrub state of its container lives there. */
	if (fs->remote && *cow)
		*lock = dioloop_remote_lock_get(fs, src->image);
	if (*cow && fs->opts.commit_ms >= 0)
		backend_volume_set_commit_interval(
			image, (unsigned int)fs->opts.commit_ms, NULL);
	if (!dioloop_mount_wants_fault(fs, src->name)) {
		*b = image;
		return 0;
	}
	ret = fault_filter_stack(image, b);
	if (ret < 0) {
		backend_close(image);
		goto out_put_lock;
	}
	dioloop_apply_mount_faults(fs, src->name, *b);
	return 0;

out_put_lock:
	if (*lock)
		dioloop_image_lock_put(fs, *lock);
	*lock = NULL;
	return ret;
}

/*
 * The image a source directory entry stands for, if it is served now:
 * the entry itself, as the lookup would serve it (a regular file reached
 * beneath the source), or, for the redirect of an image migrated away
 * with remove_source, that image.  NULL otherwise; g_free it.
 */
static char *dioloop_source_entry_image(struct dioloop_fs *fs,
					const char *entry)
{
	g_autofree char *moved = dioloop_redirected_name(entry);
	struct stat st;

	if (moved && dioloop_is_image_name(moved) &&
	    fstatat(fs->source_fd, moved, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno == ENOENT)
		return dioloop_image_servable(fs, moved) ?
			       g_steal_pointer(&moved) : NULL;
	return dioloop_image_servable(fs, entry) ? g_strdup(entry) : NULL;
}

/* Add the image names of the local source directory to names. */
static int dioloop_fs_list_source(struct dioloop_fs *fs, GPtrArray *names)
{
	struct dirent *de;
	DIR *dir;
	int fd;

	fd = openat(fs->source_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(dir))) {
		char *image = dioloop_source_entry_image(fs, de->d_name);

		if (image)
			g_ptr_array_add(names, image);
	}
	closedir(dir);
	return 0;
}

int dioloop_fs_list_images(struct dioloop_fs *fs, GPtrArray *names)
{
	if (fs->remote) {
		dioloop_remote_names(fs->remote, names);
		return 0;
	}
	return dioloop_fs_list_source(fs, names);
}

void dioloop_fs_open_all(struct dioloop_fs *fs)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	guint i;

	if (dioloop_fs_list_images(fs, names) < 0)
		return;
	for (i = 0; i < names->len; i++) {
		struct dioloop_node *node;

		/* Errors are logged by the lookup. */
		if (dioloop_node_lookup(fs, names->pdata[i], &node) == 0)
			dioloop_node_forget(fs, node->ino, 1);
	}
}
