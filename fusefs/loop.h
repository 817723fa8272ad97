/* SPDX-License-Identifier: MIT */
/* Loop devices over nodes: attach with direct I/O, find, detach. */
#ifndef DIOLOOP_LOOP_H
#define DIOLOOP_LOOP_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Attach a free loop device to path with LO_FLAGS_DIRECT_IO (read-only if
 * asked) using LOOP_CONFIGURE; *dev gets "/dev/loopN" (g_free it).
 * *dio tells whether the kernel kept direct I/O on.  0 or -errno.
 */
int dioloop_loop_attach(const char *path, bool readonly, char **dev,
			bool *dio);
/* Detach dev (LOOP_CLR_FD) and wait up to timeout_ms for it to let go:
 * 0, -EBUSY if it is still attached (in use), or -errno. */
int dioloop_loop_detach(const char *dev, unsigned timeout_ms);
/* The device and inode of the file attached to dev (LOOP_GET_STATUS64):
 * 0, -ENXIO when none is attached, or -errno. */
int dioloop_loop_backing(const char *dev, dev_t *fsdev, ino_t *ino);

/*
 * Append to devs every loop device ("/dev/loopN", g_free) whose backing
 * file lives on the file system fsdev (a FUSE mount's st_dev is its own:
 * every file with it is a node or control file of that mount), and to
 * unknown a line for each bound device that could not be asked (needs
 * root).  0 or -errno.
 */
int dioloop_loops_backed_by(dev_t fsdev, GPtrArray *devs, GPtrArray *unknown);

/* A loop device opened exclusively, so that nothing mounts it meanwhile. */
struct dioloop_loop_claim {
	char *dev;			/* "/dev/loopN" */
	int fd;				/* O_EXCL, or -1 once detached */
	uint32_t flags;			/* lo_flags when claimed */
};

/*
 * Claim dev if it is still backed by a file on fsdev: 0; -EBUSY when a
 * file system (or another exclusive user) holds it; -ESTALE when it now
 * serves something else; or -errno.  Nothing is changed.
 */
int dioloop_loop_claim(const char *dev, dev_t fsdev,
		       struct dioloop_loop_claim *c);
/* Close a claim without detaching. */
void dioloop_loop_release(struct dioloop_loop_claim *c);
/*
 * Detach a claimed device (LOOP_CLR_FD, then our last close) and wait up
 * to timeout_ms for it to let go: 0, or -EBUSY when another process
 * still holds it open: it then stays attached with its flags as they
 * were (no autoclear left behind).  Releases the claim either way.
 */
int dioloop_loop_detach_claimed(struct dioloop_loop_claim *c,
				unsigned timeout_ms);

#endif
