/* SPDX-License-Identifier: MIT */
/* Loop devices over nodes: attach with direct I/O, find, detach. */
#ifndef DIOLOOP_LOOP_H
#define DIOLOOP_LOOP_H

#include <glib.h>
#include <stdbool.h>

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
/* Loop devices whose backing file lies under dir: a NULL-terminated
 * array of "/dev/loopN" (g_strfreev it). */
char **dioloop_loops_under(const char *dir);

#endif
