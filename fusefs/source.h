/* SPDX-License-Identifier: MIT */
/*
 * The source directory as hostile ground: every file the daemon opens
 * under SOURCE is opened here, once, beneath the directory's fd, so that
 * no symlink, rename or mount meanwhile can make it open a file outside.
 * Checks (type, owner, mode, dev:ino) are then made on the open fd.
 *
 * With openat2 (Linux 5.6+): RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS.
 * Symlinks that stay inside SOURCE work; an absolute symlink is followed
 * only when its target is under SOURCE's own path (the rest of the path
 * is then resolved beneath SOURCE again).  Without openat2, symlinks are
 * not followed at all (O_NOFOLLOW): they are refused.
 */
#ifndef DIOLOOP_SOURCE_H
#define DIOLOOP_SOURCE_H

#include <sys/stat.h>

struct dioloop_fs;

/* Open the entry name of the source directory with open(2) flags
 * (O_CLOEXEC added): an fd, -EACCES when it resolves outside SOURCE
 * (logged, rate-limited), or -errno. */
int dioloop_source_open(struct dioloop_fs *fs, const char *name, int flags);

/* Open name as an image: O_PATH beneath SOURCE, a regular file.  An fd
 * with *st filled, -ENOENT when it is not a regular file, or as
 * dioloop_source_open. */
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
