/* SPDX-License-Identifier: MIT */
/* Opening files beneath the source directory (source.h). */
#include "fusefs/source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/sidecar.h"
#include "fusefs/fs.h"
#include "fusefs/redirect.h"

/* Hops through absolute symlinks to paths under SOURCE. */
#define SOURCE_MAX_ABSOLUTE_HOPS 8

static int openat2_beneath(int dirfd, const char *path, int flags)
{
	/* openat2 refuses O_PATH with flags other than O_CLOEXEC. */
	int extra = (flags & O_PATH) ? O_CLOEXEC : O_CLOEXEC | O_NOCTTY;
	struct open_how how = {
		.flags = (unsigned long long)(flags | extra),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/*
 * The part of an absolute symlink's target below SOURCE, for the entry
 * path: a new string, or NULL when path is no such link.
 */
static char *source_absolute_link(struct dioloop_fs *fs, const char *path)
{
	char target[PATH_MAX];
	size_t n = strlen(fs->source);
	ssize_t len;

	len = readlinkat(fs->source_fd, path, target, sizeof(target) - 1);
	if (len <= 0)
		return NULL;
	target[len] = '\0';
	if (target[0] != '/' || strncmp(target, fs->source, n) ||
	    target[n] != '/')
		return NULL;
	return g_strdup(target + n + 1);
}

int dioloop_source_open(struct dioloop_fs *fs, const char *name, int flags)
{
	g_autofree char *path = g_strdup(name);
	char *inside;
	int fd, hops;

	for (hops = 0;; hops++) {
		fd = openat2_beneath(fs->source_fd, path, flags);
		if (fd == -ENOSYS) {
			/* No openat2: no symlinks. */
			fd = openat(fs->source_fd, path,
				    flags | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				return fd;
			fd = -errno;
			break;
		}
		if (fd != -EXDEV || hops == SOURCE_MAX_ABSOLUTE_HOPS)
			break;
		/* An absolute symlink: followed only to a path under the
		 * source's own, resolved beneath it again. */
		inside = source_absolute_link(fs, path);
		if (!inside)
			break;
		g_free(path);
		path = inside;
	}
	/* EXDEV: out of SOURCE; ELOOP: a magic link, a loop, or (without
	 * openat2) any symlink. */
	if (fd == -EXDEV || fd == -ELOOP) {
		dioloop_fs_log_error(fs, NULL, name, -EACCES);
		return -EACCES;
	}
	return fd;
}

int dioloop_source_open_image(struct dioloop_fs *fs, const char *name,
			      struct stat *st)
{
	int fd = dioloop_source_open(fs, name, O_PATH);
	int err;

	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0)
		err = -errno;
	else if (!S_ISREG(st->st_mode))
		err = -ENOENT;
	else
		return fd;
	close(fd);
	return err;
}

void dioloop_served_clear(struct dioloop_served *s)
{
	if (s->fd >= 0)
		close(s->fd);
	g_free(s->target);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

int dioloop_redirect_read(struct dioloop_fs *fs, const char *image,
			  struct dioloop_redirect *r)
{
	g_autofree char *name = dioloop_redirect_name(image);
	g_autofree char *key = NULL;
	char buf[DIOLOOP_REDIRECT_MAX + 1];
	const char *why = NULL;
	ssize_t n;
	int ret;

	memset(r, 0, sizeof(*r));
	n = sidecar_read(fs->source_fd, name, buf, sizeof(buf), &why);
	if (n == -ENOENT)
		return -ENOENT;
	if (n < 0)
		ret = (int)n;
	else if ((size_t)n >= DIOLOOP_REDIRECT_MAX || strlen(buf) != (size_t)n)
		ret = -EBADMSG;		/* too long, or a NUL inside */
	else
		ret = dioloop_redirect_parse(buf, r);
	if (ret == 0)
		return 0;
	key = g_strdup_printf("redirect\n%s", image);
	if (dioloop_fs_log_ratelimit(fs, key))
		g_warning("%s: redirect %s ignored: %s", image, name,
			  why ? why : ret == -EBADMSG ?
			  "not a redirect this daemon wrote" :
			  g_strerror(-ret));
	return ret == -ENOENT ? -EPERM : ret;
}

int dioloop_redirect_write(struct dioloop_fs *fs, const char *image,
			   const struct dioloop_redirect *r)
{
	g_autofree char *name = dioloop_redirect_name(image);
	g_autofree char *text = dioloop_redirect_format(r);

	return sidecar_replace(fs->source_fd, name, text, strlen(text));
}

/* Log, at most every 10 s per image and kind, why a redirect is not
 * followed. */
static void log_redirect(struct dioloop_fs *fs, const char *image,
			 const char *kind, const char *msg)
{
	g_autofree char *key = g_strdup_printf("%s\n%s", kind, image);

	if (dioloop_fs_log_ratelimit(fs, key))
		g_warning("%s: %s", image, msg);
}

/* Open a redirect's file target: it must still be the file the
 * migration created.  An O_PATH fd with *st, or -ENOENT (logged). */
static int open_target(struct dioloop_fs *fs, const char *image,
		       const struct dioloop_redirect *r, struct stat *st)
{
	int fd = open(r->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0 && fstat(fd, st) == 0 && S_ISREG(st->st_mode) &&
	    (uint64_t)st->st_dev == r->target_dev &&
	    (uint64_t)st->st_ino == r->target_ino)
		return fd;
	if (fd >= 0)
		close(fd);
	{
		g_autofree char *msg = g_strdup_printf(
			"migrated to %s, which is not the file the migration "
			"created any more: not served", r->path);

		log_redirect(fs, image, "target", msg);
	}
	return -ENOENT;
}

int dioloop_source_resolve(struct dioloop_fs *fs, const char *name,
			   struct dioloop_served *s)
{
	struct dioloop_redirect r;
	struct stat img;
	int fd, ret;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	fd = dioloop_source_open_image(fs, name, &img);
	if (fd < 0 && fd != -ENOENT)
		return fd;
	if (dioloop_redirect_read(fs, name, &r) < 0)
		goto serve_image;
	if (fd >= 0 && ((uint64_t)img.st_dev != r.image_dev ||
			(uint64_t)img.st_ino != r.image_ino)) {
		/* The image was replaced after the migration: the new file
		 * is the image now. */
		log_redirect(fs, name, "stale",
			     "the image is not the file that was migrated: its redirect is ignored");
		dioloop_redirect_clear(&r);
		goto serve_image;
	}
	if (fd >= 0)
		close(fd);
	if (r.target_dev || r.target_ino) {
		ret = open_target(fs, name, &r, &s->st);
		if (ret < 0) {
			dioloop_redirect_clear(&r);
			return ret;
		}
		s->fd = ret;
	}
	s->target = g_steal_pointer(&r.path);
	return 0;

serve_image:
	if (fd < 0)
		return -ENOENT;
	s->fd = fd;
	s->st = img;
	return 0;
}
