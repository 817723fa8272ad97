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

static int openat2_beneath(int dirfd, const char *path, int flags,
			   unsigned long long resolve)
{
	/* openat2 refuses O_PATH with flags other than O_CLOEXEC and
	 * O_NOFOLLOW. */
	int extra = (flags & O_PATH) ? O_CLOEXEC : O_CLOEXEC | O_NOCTTY;
	struct open_how how = {
		.flags = (unsigned long long)(flags | extra),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | resolve,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/* Refuse name (logged, rate-limited): -EACCES. */
static int source_refuse(struct dioloop_fs *fs, const char *name,
			 const char *why)
{
	g_autofree char *key = g_strdup_printf("refused\n%s\n%s", name, why);

	if (dioloop_fs_log_ratelimit(fs, key))
		g_warning("%s: refused: %s", name, why);
	return -EACCES;
}

/*
 * Follow the symlink open as lfd (an entry of SOURCE): its target must
 * resolve beneath SOURCE with no further symlink (an absolute target
 * only under SOURCE's own path).  An O_PATH fd, -ENOENT (dangling), or
 * -EACCES (logged).
 */
static int source_follow_link(struct dioloop_fs *fs, const char *name,
			      int lfd)
{
	char target[PATH_MAX];
	const char *rel = target;
	size_t n = strlen(fs->source);
	ssize_t len;
	int fd;

	len = readlinkat(lfd, "", target, sizeof(target) - 1);
	if (len <= 0)
		return -ENOENT;
	target[len] = '\0';
	if (target[0] == '/') {
		if (strncmp(target, fs->source, n) || target[n] != '/')
			return source_refuse(fs, name,
					     "a symlink that leaves the source directory");
		rel = target + n + 1;
	}
	fd = openat2_beneath(fs->source_fd, rel, O_PATH, RESOLVE_NO_SYMLINKS);
	if (fd == -EXDEV)
		return source_refuse(fs, name,
				     "a symlink that leaves the source directory");
	if (fd == -ELOOP)
		return source_refuse(fs, name,
				     "a symlink to a symlink (followed one level only)");
	return fd;
}

/* Whether a file of SOURCE with several hard links may be served: where
 * others may write SOURCE, a link could bring in any file of the same
 * file system (when fs.protected_hardlinks is off, or was when the link
 * was made), so only where SOURCE is the daemon's user's alone. */
static bool source_hardlinks_safe(struct dioloop_fs *fs)
{
	struct stat src;

	return fstat(fs->source_fd, &src) == 0 && src.st_uid == geteuid() &&
	       !(src.st_mode & 022);
}

int dioloop_source_open_image(struct dioloop_fs *fs, const char *name,
			      struct stat *st)
{
	struct stat lst, src;
	int lfd, fd, err;

	/* The entry itself, never followed. */
	lfd = openat2_beneath(fs->source_fd, name, O_PATH | O_NOFOLLOW, 0);
	if (lfd == -ENOSYS) {
		/* No openat2 (Linux < 5.6): a symlink is refused below. */
		lfd = openat(fs->source_fd, name,
			     O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (lfd < 0)
			return -errno;
		if (fstat(lfd, &lst) == 0 && S_ISLNK(lst.st_mode)) {
			close(lfd);
			return source_refuse(fs, name,
					     "a symlink (not followed without openat2)");
		}
	}
	if (lfd < 0)
		return lfd;
	if (fstat(lfd, &lst) < 0) {
		err = -errno;
		close(lfd);
		return err;
	}
	if (!S_ISLNK(lst.st_mode)) {
		fd = lfd;
		*st = lst;
	} else {
		fd = source_follow_link(fs, name, lfd);
		close(lfd);
		if (fd < 0)
			return fd;
		if (fstat(fd, st) < 0) {
			err = -errno;
			close(fd);
			return err;
		}
		/* As fs.protected_symlinks: a link is followed when it is
		 * ours, SOURCE's owner's, or its target's owner's, so that
		 * nobody reaches through a directory closed to them. */
		if (lst.st_uid != geteuid() && lst.st_uid != st->st_uid &&
		    (fstat(fs->source_fd, &src) < 0 ||
		     lst.st_uid != src.st_uid)) {
			close(fd);
			return source_refuse(fs, name,
					     "a symlink to a file of another owner");
		}
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -ENOENT;
	}
	if (st->st_nlink > 1 && !source_hardlinks_safe(fs)) {
		close(fd);
		return source_refuse(fs, name,
				     "a file with several hard links, in a source directory others may write");
	}
	return fd;
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
	g_autoptr(GError) error = NULL;
	ssize_t n;
	int ret;

	memset(r, 0, sizeof(*r));
	n = sidecar_read(fs->source_fd, name, buf, sizeof(buf), &error);
	if (n == -ENOENT)
		return -ENOENT;
	if (n < 0)
		ret = (int)n;
	else if ((size_t)n >= DIOLOOP_REDIRECT_MAX || strlen(buf) != (size_t)n)
		ret = -EBADMSG;		/* too long, or a NUL inside */
	else
		ret = dioloop_redirect_parse(buf, r);
	if (ret == 0 && strcmp(r->name, image)) {
		g_set_error_literal(&error, G_FILE_ERROR, G_FILE_ERROR_PERM,
				    "it was written for another image");
		dioloop_redirect_clear(r);
		ret = -EPERM;
	}
	if (ret == 0)
		return 0;
	key = g_strdup_printf("redirect\n%s", image);
	if (dioloop_fs_log_ratelimit(fs, key))
		g_warning("%s: redirect %s ignored: %s", image, name,
			  error ? error->message : ret == -EBADMSG ?
			  "not a redirect this daemon wrote" :
			  g_strerror(-ret));
	return ret == -ENOENT ? -EPERM : ret;
}

/*
 * The redirect of image now in place, if it is one of ours (its owner and
 * mode ours, written for image; another hard link to it allowed): it is
 * emptied when replaced, so a link kept aside cannot bring it back.
 */
static void redirect_ours(struct dioloop_fs *fs, const char *image,
			  const char *name, struct sidecar_id *ours)
{
	char buf[DIOLOOP_REDIRECT_MAX + 1];
	struct dioloop_redirect r;
	struct stat st;
	ssize_t n;
	int fd = openat(fs->source_fd, name, O_RDONLY | O_NOFOLLOW |
			O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_uid == geteuid() && (st.st_mode & 07777) == 0600 &&
	    (n = pread(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = '\0';
		if (dioloop_redirect_parse(buf, &r) == 0) {
			if (!strcmp(r.name, image))
				sidecar_id_of(&st, ours);
			dioloop_redirect_clear(&r);
		}
	}
	close(fd);
}

int dioloop_redirect_write(struct dioloop_fs *fs, const char *image,
			   const struct dioloop_redirect *r)
{
	g_autofree char *name = dioloop_redirect_name(image);
	g_autofree char *text = dioloop_redirect_format(r);
	struct sidecar_id ours = { 0 };

	redirect_ours(fs, image, name, &ours);
	return sidecar_replace(fs->source_fd, name, text, strlen(text),
			       &ours);
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
	dioloop_redirect_clear(&r);
	return 0;

serve_image:
	if (fd < 0)
		return -ENOENT;
	s->fd = fd;
	s->st = img;
	return 0;
}
