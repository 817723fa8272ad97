/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations.  All run on FUSE worker threads; the
 * ones that touch image data hand off to io.c or io_work.c and return at
 * once, the ones on the control directory (.dioloop) to control.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fusefs/migrate.h"
#include "fusefs/control.h"
#include "fusefs/fs.h"
#include "fusefs/session_io.h"
#include "fusefs/remote.h"

#define DIOLOOP_ENTRY_TIMEOUT 1.0
#define DIOLOOP_UNKNOWN_INO 0xffffffffu

static struct dioloop_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct dioloop_node *node_of(struct fuse_file_info *fi)
{
	return (struct dioloop_node *)(uintptr_t)fi->fh;
}

static void dioloop_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct dioloop_fs *fs = userdata;

	conn->max_write = fs->opts.max_write;
	/* The kernel's default of 12 background requests is what caps
	 * asynchronous direct I/O on FUSE; let the queue fill. */
	conn->max_background = fs->opts.queue_depth;
	conn->congestion_threshold = fs->opts.queue_depth * 3 / 4;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE |
				  FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
				  FUSE_CAP_SPLICE_MOVE);
	if (fs->opts.cache && (conn->capable & FUSE_CAP_AUTO_INVAL_DATA))
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
}

static void dioloop_op_destroy(void *userdata)
{
	dioloop_fs_flush_all(userdata);
}

static void fill_entry(struct fuse_entry_param *e, const struct stat *st)
{
	memset(e, 0, sizeof(*e));
	e->ino = st->st_ino;
	e->attr = *st;
	e->attr_timeout = 0;
	e->entry_timeout = DIOLOOP_ENTRY_TIMEOUT;
}

static void dioloop_op_lookup(fuse_req_t req, fuse_ino_t parent,
			      const char *name)
{
	struct dioloop_fs *fs = fs_of(req);
	struct dioloop_node *node;
	struct fuse_entry_param e;
	struct stat st;
	int ret;

	if ((parent == FUSE_ROOT_ID && !strcmp(name, DIOLOOP_CTL_DIR)) ||
	    dioloop_is_ctl_ino(parent)) {
		dioloop_ctl_lookup(req, parent, name);
		return;
	}
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	ret = dioloop_node_lookup(fs, name, &node);
	if (ret == 0) {
		ret = dioloop_node_stat(fs, node, &st);
		if (ret < 0)
			dioloop_node_forget(fs, node->ino, 1);
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	fill_entry(&e, &st);
	fuse_reply_entry(req, &e);
}

static void dioloop_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	if (ino != FUSE_ROOT_ID)
		dioloop_node_forget(fs_of(req), ino, n);
	fuse_reply_none(req);
}

static void dioloop_op_forget_multi(fuse_req_t req, size_t count,
				    struct fuse_forget_data *forgets)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (forgets[i].ino != FUSE_ROOT_ID)
			dioloop_node_forget(fs_of(req), forgets[i].ino,
					    forgets[i].nlookup);
	fuse_reply_none(req);
}

/* Reply with a node's attributes (never cached: sizes can change). */
static void reply_node_attr(fuse_req_t req, struct dioloop_fs *fs,
			    struct dioloop_node *node)
{
	struct stat st;
	int ret = dioloop_node_stat(fs, node, &st);

	if (ret < 0)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, 0);
}

static void dioloop_op_getattr(fuse_req_t req, fuse_ino_t ino,
			       struct fuse_file_info *fi)
{
	struct dioloop_fs *fs = fs_of(req);
	struct dioloop_node *node;
	struct stat st;

	if (ino == FUSE_ROOT_ID) {
		dioloop_root_stat(fs, &st);
		fuse_reply_attr(req, &st, DIOLOOP_ENTRY_TIMEOUT);
		return;
	}
	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_getattr(req, ino);
		return;
	}
	node = dioloop_node_get(fs, ino);
	if (!node) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	reply_node_attr(req, fs, node);
}

/* Mode, owner and times go to the image file; size resizes the node. */
static void dioloop_op_setattr(fuse_req_t req, fuse_ino_t ino,
			       struct stat *attr, int to_set,
			       struct fuse_file_info *fi)
{
	struct dioloop_fs *fs = fs_of(req);
	struct dioloop_node *node = dioloop_node_get(fs, ino);
	int ret = 0;

	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_setattr(req, ino, attr, to_set);
		return;
	}
	if (!node) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EPERM : ENOENT);
		return;
	}
	/* A volume's mode, owner and times are its image's: change them on
	 * the image's node. */
	if (node->volume && (to_set & ~FUSE_SET_ATTR_SIZE)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* A remote image's mode, owner and times are the server's. */
	if (fs->remote && (to_set & ~FUSE_SET_ATTR_SIZE)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* On the file served, through its open fd: a name looked up again
	 * could be a symlink to anything by now. */
	if ((to_set & ~FUSE_SET_ATTR_SIZE) && !node->lock) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* A size that cannot be set changes nothing else either. */
	if (to_set & FUSE_SET_ATTR_SIZE) {
		ret = dioloop_truncate_check(node, attr->st_size);
		if (ret < 0) {
			fuse_reply_err(req, -ret);
			return;
		}
	}
	if ((to_set & FUSE_SET_ATTR_MODE) &&
	    fchmod(node->lock->fd, attr->st_mode & 07777) < 0)
		ret = -errno;
	if (!ret && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    fchown(node->lock->fd,
		   (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
		   (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1) < 0)
		ret = -errno;
	if (!ret && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
					  { .tv_nsec = UTIME_OMIT } };

		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			ts[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			ts[1] = attr->st_mtim;
		if (futimens(node->lock->fd, ts) < 0)
			ret = -errno;
	}
	if (ret < 0) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		dioloop_do_truncate(req, node, attr->st_size, attr, to_set);
		return;
	}
	reply_node_attr(req, fs, node);
}

/* A directory listing: the image names, snapshotted at opendir. */
static void dioloop_op_opendir(fuse_req_t req, fuse_ino_t ino,
			       struct fuse_file_info *fi)
{
	struct dioloop_fs *fs = fs_of(req);
	GPtrArray *names;
	int ret;

	if (ino == DIOLOOP_CTL_DIR_INO) {
		fi->fh = (uint64_t)(uintptr_t)dioloop_ctl_names();
		fuse_reply_open(req, fi);
		return;
	}
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	names = g_ptr_array_new_with_free_func(g_free);
	ret = dioloop_fs_list_images(fs, names);
	if (ret < 0) {
		g_ptr_array_free(names, TRUE);
		fuse_reply_err(req, -ret);
		return;
	}
	/* And the other volumes of images that have them (local or remote),
	 * as IMAGE@VOLUME. */
	dioloop_volumes_add_names(fs, names);
	fi->fh = (uint64_t)(uintptr_t)names;
	fuse_reply_open(req, fi);
}

static void dioloop_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			       off_t off, struct fuse_file_info *fi)
{
	GPtrArray *names = (GPtrArray *)(uintptr_t)fi->fh;
	char *buf = g_malloc(size);
	size_t used = 0;
	off_t i;

	for (i = off; i < (off_t)names->len + 2; i++) {
		/* Inode numbers come with lookup; readdir's must not be 0
		 * (libc hides those entries). */
		struct stat st = { .st_mode = S_IFREG,
				   .st_ino = DIOLOOP_UNKNOWN_INO };
		const char *name;
		size_t n;

		if (i == 0 || i == 1) {
			name = i == 0 ? "." : "..";
			st.st_mode = S_IFDIR;
			st.st_ino = FUSE_ROOT_ID;
		} else {
			name = names->pdata[i - 2];
		}
		n = fuse_add_direntry(req, buf + used, size - used, name, &st,
				      i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	g_free(buf);
}

static void dioloop_op_releasedir(fuse_req_t req, fuse_ino_t ino,
				  struct fuse_file_info *fi)
{
	g_ptr_array_free((GPtrArray *)(uintptr_t)fi->fh, TRUE);
	fuse_reply_err(req, 0);
}

static void dioloop_op_open(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_file_info *fi)
{
	struct dioloop_fs *fs = fs_of(req);
	struct dioloop_node *node = dioloop_node_get(fs, ino);

	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_open(req, ino, fi);
		return;
	}
	if (!node) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	/* The name serves another file now: the kernel looks it up again
	 * (ESTALE makes it retry with a fresh lookup). */
	if (dioloop_node_check_current(fs, node) < 0) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	/* The daemon's read-only check: a read-only node is never open for
	 * writing, so no write, fallocate or copy reaches it through FUSE
	 * (truncate by path: dioloop_truncate_check).  The core checks
	 * again for every backend (backend.c). */
	if (node->readonly && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->direct_io = !fs->opts.cache;
	fi->keep_cache = fs->opts.cache;
	fi->noflush = 1;
	fi->fh = (uint64_t)(uintptr_t)node;
	if (dioloop_node_open(fs, node) < 0) {
		fuse_reply_err(req, ENOENT);	/* its volume was deleted */
		return;
	}
	if (dioloop_reply_open(req, fi) == -ENOENT)
		dioloop_node_release(fs, node);	/* the opener was interrupted */
}

static void dioloop_op_release(fuse_req_t req, fuse_ino_t ino,
			       struct fuse_file_info *fi)
{
	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_release(req, ino, fi);
		return;
	}
	dioloop_node_release(fs_of(req), node_of(fi));
	fuse_reply_err(req, 0);
}

static void dioloop_op_read(fuse_req_t req, fuse_ino_t ino, size_t size,
			    off_t off, struct fuse_file_info *fi)
{
	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_read(req, ino, size, off, fi);
		return;
	}
	dioloop_do_read(req, node_of(fi), size, off);
}

static void dioloop_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
			     size_t size, off_t off, struct fuse_file_info *fi)
{
	if (dioloop_is_ctl_ino(ino)) {
		dioloop_ctl_write(req, ino, buf, size, off, fi);
		return;
	}
	dioloop_do_write(req, node_of(fi), buf, size, off);
}

static void dioloop_op_flush(fuse_req_t req, fuse_ino_t ino,
			     struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void dioloop_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			     struct fuse_file_info *fi)
{
	if (dioloop_is_ctl_ino(ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	dioloop_do_fsync(req, node_of(fi));
}

static void dioloop_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
				 off_t off, off_t len,
				 struct fuse_file_info *fi)
{
	if (dioloop_is_ctl_ino(ino)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	dioloop_do_fallocate(req, node_of(fi), mode, off, len);
}

static void dioloop_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off,
			     int whence, struct fuse_file_info *fi)
{
	/* Never ENOSYS: the kernel would stop asking for every file. */
	if (dioloop_is_ctl_ino(ino)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	dioloop_do_lseek(req, node_of(fi), off, whence);
}

static void dioloop_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in,
				       off_t off_in,
				       struct fuse_file_info *fi_in,
				       fuse_ino_t ino_out, off_t off_out,
				       struct fuse_file_info *fi_out,
				       size_t len, int flags)
{
	if (flags || dioloop_is_ctl_ino(ino_in) || dioloop_is_ctl_ino(ino_out)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	dioloop_do_copy_file_range(req, node_of(fi_in), off_in,
				   node_of(fi_out), off_out, len);
}

/* Space as the host file system that holds the images sees it, in 4 KiB
 * blocks. */
static void dioloop_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct dioloop_fs *fs = fs_of(req);
	struct statvfs sv, out;

	if (fs->remote) {
		/* The server's space is not asked for: none shown. */
		memset(&out, 0, sizeof(out));
		out.f_bsize = DIOLOOP_BLOCK_SIZE;
		out.f_frsize = DIOLOOP_BLOCK_SIZE;
		out.f_namemax = 255;
		fuse_reply_statfs(req, &out);
		return;
	}
	if (fstatvfs(fs->source_fd, &sv) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	memset(&out, 0, sizeof(out));
	out.f_bsize = DIOLOOP_BLOCK_SIZE;
	out.f_frsize = DIOLOOP_BLOCK_SIZE;
	out.f_blocks = sv.f_blocks * sv.f_frsize / DIOLOOP_BLOCK_SIZE;
	out.f_bfree = sv.f_bfree * sv.f_frsize / DIOLOOP_BLOCK_SIZE;
	out.f_bavail = sv.f_bavail * sv.f_frsize / DIOLOOP_BLOCK_SIZE;
	out.f_files = sv.f_files;
	out.f_ffree = sv.f_ffree;
	out.f_favail = sv.f_favail;
	out.f_namemax = 255;
	fuse_reply_statfs(req, &out);
}

/* The set of nodes is the source directory's: no creating or removing
 * through the mount. */
static void dioloop_op_mknod(fuse_req_t req, fuse_ino_t parent,
			     const char *name, mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EPERM);
}

static void dioloop_op_mkdir(fuse_req_t req, fuse_ino_t parent,
			     const char *name, mode_t mode)
{
	fuse_reply_err(req, EPERM);
}

static void dioloop_op_unlink(fuse_req_t req, fuse_ino_t parent,
			      const char *name)
{
	fuse_reply_err(req, EPERM);
}

static void dioloop_op_rename(fuse_req_t req, fuse_ino_t parent,
			      const char *name, fuse_ino_t newparent,
			      const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EPERM);
}

static void dioloop_op_create(fuse_req_t req, fuse_ino_t parent,
			      const char *name, mode_t mode,
			      struct fuse_file_info *fi)
{
	fuse_reply_err(req, EPERM);
}

const struct fuse_lowlevel_ops dioloop_fuse_ops = {
	.init = dioloop_op_init,
	.destroy = dioloop_op_destroy,
	.lookup = dioloop_op_lookup,
	.forget = dioloop_op_forget,
	.forget_multi = dioloop_op_forget_multi,
	.getattr = dioloop_op_getattr,
	.setattr = dioloop_op_setattr,
	.mknod = dioloop_op_mknod,
	.mkdir = dioloop_op_mkdir,
	.unlink = dioloop_op_unlink,
	.rmdir = dioloop_op_unlink,
	.rename = dioloop_op_rename,
	.create = dioloop_op_create,
	.opendir = dioloop_op_opendir,
	.readdir = dioloop_op_readdir,
	.releasedir = dioloop_op_releasedir,
	.open = dioloop_op_open,
	.release = dioloop_op_release,
	.read = dioloop_op_read,
	.write = dioloop_op_write,
	.flush = dioloop_op_flush,
	.fsync = dioloop_op_fsync,
	.fallocate = dioloop_op_fallocate,
	.lseek = dioloop_op_lseek,
	.copy_file_range = dioloop_op_copy_file_range,
	.statfs = dioloop_op_statfs,
};
