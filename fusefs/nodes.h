/* SPDX-License-Identifier: MIT */
/*
 * Inside the node table: what its three files share.  nodes.c keeps the
 * table (lookup, lifetime, draining), image_open.c decides which images
 * are served and opens them, fs.c sets the mount's state up and answers
 * attributes.  The rest of the daemon uses fs.h.
 */
#ifndef DIOLOOP_NODES_H
#define DIOLOOP_NODES_H

#include <stdbool.h>

#include "fusefs/fs.h"
#include "fusefs/source.h"

/* What a node opens: an image file, or a volume of a cow image. */
struct dioloop_node_src {
	const char *name;		/* the node's name */
	const char *image;		/* the file in the source directory */
	const char *volume;		/* NULL: the image's default volume */
	bool snapshot;			/* a read-only volume */
	struct dioloop_served served;	/* what image serves (local) */
};

/* What name serves, if it may be served as an image: 0 (served
 * filled), -ENOENT, -EACCES (outside the source) or -errno. */
int dioloop_check_image(struct dioloop_fs *fs, const char *name,
			struct dioloop_served *served);

/* Lock src's image and open its backend (image_open.c says how): 0
 * (*b, *readonly, *cow and *lock set) or -errno.  Not under fs->lock. */
int dioloop_open_backend(struct dioloop_fs *fs,
			 const struct dioloop_node_src *src,
			 struct backend **b, bool *readonly, bool *cow,
			 struct dioloop_image_lock **lock);

/* Close a node's backend, drop its image lock and free it: the node is
 * out of both tables.  Not under fs->lock. */
void dioloop_node_free(struct dioloop_fs *fs, struct dioloop_node *node);

#endif
