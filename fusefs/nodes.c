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
#include "backends/volume.h"
#include "fusefs/fs.h"
#include "fusefs/imagelock.h"
#include "fusefs/remote.h"
#include "fusefs/migrate.h"
#include "fusefs/source.h"
#include "fusefs/spec.h"

#define DIOLOOP_LOG_INTERVAL_US (10 * G_USEC_PER_SEC)
/* Keys remembered by dioloop_fs_log_ratelimit: names come from SOURCE,
 * so their number is bounded here, not by what users create. */
#define DIOLOOP_LOG_KEYS_MAX 4096

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
static int dioloop_check_image(struct dioloop_fs *fs, const char *name,
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

static void dioloop_node_free(struct dioloop_fs *fs, struct dioloop_node *node)
{
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
	g_free(node);
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

/* What a node opens: an image file, or a volume of a cow image. */
struct dioloop_node_src {
	const char *name;		/* the node's name */
	const char *image;		/* the file in the source directory */
	const char *volume;		/* NULL: the image's default volume */
	bool snapshot;			/* a read-only volume */
	struct dioloop_served served;	/* what image serves (local) */
};

/*
 * Lock the image and open it: its backend by magic (raw or cow; a
 * volume: cow), read-write unless the mount or the image is read-only
 * or the volume is a snapshot, with the fault filter on top only when the
 * mount asks for it (dioloop_mount_wants_fault; a rule added at run time
 * stacks it then, dioloop_node_stack_fault).
 */
static int dioloop_open_backend(struct dioloop_fs *fs,
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
	struct dioloop_node *node = g_new0(struct dioloop_node, 1);

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

int dioloop_node_open(struct dioloop_fs *fs, struct dioloop_node *node)
{
	int ret = 0;

	g_mutex_lock(&fs->lock);
	if (node->deleted)
		ret = -ENOENT;
	else
		node->open_count++;
	g_mutex_unlock(&fs->lock);
	return ret;
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
	struct backend *b;
	struct stat img;
	int ret;

	b = dioloop_node_backend_get(node);
	if (!b)
		return -ENOENT;
	if (fs->remote) {
		/* The size the backend keeps: a GETATTR per stat would make
		 * every stat wait for the server (the timeout, when it is
		 * gone); the allocation is not known then. */
		int64_t size = backend_get_size(b);

		ret = size < 0 ? (int)size : 0;
		info.size = size < 0 ? 0 : (uint64_t)size;
		info.allocated = info.size;
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
	int ret = 0;

	g_mutex_lock(&fs->lock);
	if (node->deleted)
		ret = -ENOENT;
	else
		node->ctl_users++;
	g_mutex_unlock(&fs->lock);
	return ret;
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
	g_mutex_lock(&node->io_lock);
	busy = node->in_flight || node->draining;
	g_mutex_unlock(&node->io_lock);
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
	if (fs->source_fd >= 0)
		close(fs->source_fd);
out_free:
	free(fs->source);
	free(fs->mountpoint);
	dioloop_remote_free(fs->remote);
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
	if (fs->source_fd >= 0)
		close(fs->source_fd);
	free(fs->source);
	free(fs->mountpoint);
	dioloop_remote_free(fs->remote);
}
