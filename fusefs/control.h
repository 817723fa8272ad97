/* SPDX-License-Identifier: MIT */
/*
 * The control directory MOUNTPOINT/.dioloop, which readdir of the mount
 * does not list (it is not a node; dotfiles are never images):
 *
 *   stats.json  read-only: the mount's statistics as JSON, a snapshot
 *               taken when the file is opened (stats.h).
 *   ctl         commands: write one line, read the reply from the same
 *               open file.  A command that fails makes the write fail
 *               (EINVAL for a bad command, ENOENT for an unknown node)
 *               and leaves its one-line message as the reply.
 *
 * Commands (words as a POSIX shell splits them, so names may be quoted):
 *   limit NODE|* [KEY=VALUE...]   change limits (spec.h) of one node, or
 *                                 of the mount ('*': every node and the
 *                                 defaults, total_bps, burst_ms); reply:
 *                                 the limits now in force
 *   fault NODE [RULE...|off]      add a fault rule (spec.h) to a node, or
 *                                 clear them; reply: its rules and counts
 *
 * cow images (volumes.c: node IMAGE is the default volume, IMAGE@NAME
 * another one); on any other node these fail with EOPNOTSUPP:
 *   snapshot NODE NAME            freeze NODE (its I/O drained: every
 *                                 write acknowledged before is in) as the
 *                                 read-only volume NAME of its image;
 *                                 reply: the new node, IMAGE@NAME
 *   clone NODE NAME               the same, writable
 *   delete-volume IMAGE@NAME      close the node and delete the volume,
 *                                 freeing what no other volume shares
 *                                 (EBUSY while the node is open, has I/O
 *                                 in flight or a command on it; the
 *                                 default volume cannot be deleted);
 *                                 reply: "deleted IMAGE@NAME"
 *   scrub NODE                    verify every data block of every volume
 *                                 of NODE's image, to the end (EBUSY if
 *                                 one runs); reply: "scrubbed DONE
 *                                 blocks, BAD bad", then per bad block
 *                                 "bad VOLUME LBN PBN checksum|io"
 *                                 (VOLUME "-": the default volume)
 *   scrub-status NODE             "running DONE TOTAL BAD" or "idle"
 * stats.json shows a cow node's image, volume and its image's scrub.
 *
 * dioloop limit, dioloop fault and dioloop stats are the command-line
 * front ends.  Modes: the directory 0755, stats.json 0444, ctl 0600, all
 * owned by the user who mounted (with allow_other, the kernel checks
 * them; root passes anyway).
 *
 * Threads: the FUSE ops run on FUSE workers and hand anything that may
 * block (opening a node, building the snapshot) to the control pool.
 */
#ifndef DIOLOOP_CONTROL_H
#define DIOLOOP_CONTROL_H

#include "fusefs/fs.h"

#define DIOLOOP_CTL_DIR ".dioloop"

enum {
	DIOLOOP_CTL_DIR_INO = 2,
	DIOLOOP_STATS_INO = 3,
	DIOLOOP_CTL_FILE_INO = 4,
};

static inline bool dioloop_is_ctl_ino(fuse_ino_t ino)
{
	return ino >= DIOLOOP_CTL_DIR_INO && ino < DIOLOOP_FIRST_NODE_INO;
}

/* lookup of ".dioloop" in the root, or of a name in .dioloop. */
void dioloop_ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void dioloop_ctl_getattr(fuse_req_t req, fuse_ino_t ino);
/* Only truncation of ctl (a shell's "> ctl") is allowed. */
void dioloop_ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			 int to_set);
/* The names in .dioloop, for readdir (g_ptr_array_free them). */
GPtrArray *dioloop_ctl_names(void);
void dioloop_ctl_open(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi);
void dioloop_ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi);
void dioloop_ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		       size_t size, off_t off, struct fuse_file_info *fi);
void dioloop_ctl_release(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi);

/* Run one command line; 0 or -errno, with the reply (or the error's
 * message) appended to reply.  Control thread (it may open an image). */
int dioloop_ctl_exec(struct dioloop_fs *fs, const char *line, GString *reply);

#endif
