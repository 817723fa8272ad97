/* SPDX-License-Identifier: MIT */
/* Image locks: one daemon serves an image at a time (see imagelock.c). */
#ifndef DIOLOOP_IMAGELOCK_H
#define DIOLOOP_IMAGELOCK_H

#include <stdbool.h>

/*
 * Take the OFD lock of the image open as path_fd (O_PATH is enough; the
 * lock is taken on a new open of that inode; name is for messages): a
 * write lock,
 * or a read lock when *readonly (set to true when the image cannot be
 * opened for writing).  0 with *fd holding the lock (close it to let
 * go); -EBUSY when another open file holds a conflicting lock, with
 * *holder naming it (g_free it); or -errno.
 */
int dioloop_image_lock(int path_fd, const char *name, bool *readonly, int *fd,
		       char **holder);

/* The same for the image at path (commands on files they were named). */
int dioloop_image_lock_path(const char *path, bool *readonly, int *fd,
			    char **holder);
#endif
