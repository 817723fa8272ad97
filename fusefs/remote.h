/* SPDX-License-Identifier: MIT */
/*
 * A remote source: the images of a directory on an NFS server
 * (nfs://HOST[:PORT]/EXPORT/DIR[?options]) instead of a local directory.
 *
 * There is no directory fd to stat or watch: the set of images is a
 * cached listing (backend_list_url), refreshed when it is older than a few
 * seconds and, at most once a second, when a lookup misses it (an image
 * created on the server since).  Each image is opened by its URL, the
 * directory URL's path plus "/" NAME with the directory URL's options.
 * No symlink checks (the server resolves nothing for us: a listing holds
 * regular files only) and no local image lock.
 *
 * Threads: any (FUSE workers, control thread).  A refresh talks to the
 * server and blocks, at most the URL's timeout when the server is gone;
 * then the last listing stays in use.
 */
#ifndef DIOLOOP_REMOTE_H
#define DIOLOOP_REMOTE_H

#include <glib.h>
#include <stdbool.h>

struct dioloop_remote;

/* Check dir_url and list it once (the server answers, the directory
 * exists): 0, or -errno after logging why (one line). */
int dioloop_remote_new(const char *dir_url, struct dioloop_remote **out);
void dioloop_remote_free(struct dioloop_remote *r);
/* The URL without its options ("nfs://HOST[:PORT]/DIR"), for names. */
const char *dioloop_remote_base(const struct dioloop_remote *r);
/* Add the image names (g_free'd strings) to names and sort it: the
 * cached listing, refreshed first if it is older than a second (a
 * directory listing should show what is there). */
void dioloop_remote_names(struct dioloop_remote *r, GPtrArray *names);
/* True if name is an image of the directory (refreshing as above). */
bool dioloop_remote_has(struct dioloop_remote *r, const char *name);
/* The URL of image name (g_free it). */
char *dioloop_remote_image_url(const struct dioloop_remote *r,
			       const char *name);

#endif
