/* SPDX-License-Identifier: MIT */
/*
 * The source directory as hostile ground: every file the daemon opens
 * under SOURCE is opened here, once, beneath the directory's fd, so that
 * no symlink, rename or mount meanwhile can make it open a file outside.
 * Checks (type, owner, mode, dev:ino) are then made on the open fd.
 *
 * With openat2 (Linux 5.6+): RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS.
 * An entry that is a symlink is followed one level, to a target beneath
 * SOURCE (an absolute one only under SOURCE's own path), and only when
 * the link belongs to the daemon's user, SOURCE's owner or the target's
 * owner (as fs.protected_symlinks), so that nobody reaches through a
 * directory closed to them.  Without openat2, symlinks are refused.  A
 * file with several hard links is refused when others may write SOURCE
 * (a link made while fs.protected_hardlinks was off could bring in any
 * file of the file system).
 */
#ifndef DIOLOOP_SOURCE_H
#define DIOLOOP_SOURCE_H

#include <sys/stat.h>

struct dioloop_fs;

/* Open name as an image: O_PATH beneath SOURCE, a regular file.  An fd
 * with *st filled, -ENOENT when it is not a regular file, -EACCES when
 * it is refused (logged, rate-limited), or -errno. */
int dioloop_source_open_image(struct dioloop_fs *fs, const char *name,
			      struct stat *st);

/* What a name of the source directory serves: the image file under the
 * name, or the destination a migration moved it to (redirect.h). */
struct dioloop_served {
	int fd;				/* O_PATH of the file; -1: a URL */
	struct stat st;			/* fstat(fd); zero for a URL */
	char *target;			/* the migration's destination, or
					 * NULL: the image itself */
};

/* Resolve name: 0 (s filled: dioloop_served_clear it), -ENOENT, -EACCES
 * (leaves SOURCE) or -errno. */
int dioloop_source_resolve(struct dioloop_fs *fs, const char *name,
			   struct dioloop_served *s);
void dioloop_served_clear(struct dioloop_served *s);

#endif
