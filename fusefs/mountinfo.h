/* SPDX-License-Identifier: MIT */
/*
 * The mounts the kernel lists in /proc/self/mountinfo, for the commands
 * that must find a dioloop mount (umount, the control client).  A line:
 *   ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - TYPE SOURCE SUPER
 * with space, tab, newline and backslash in paths written as octal escapes
 * (\040, \011, \012, \134).
 */
#ifndef DIOLOOP_MOUNTINFO_H
#define DIOLOOP_MOUNTINFO_H

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

/* A dioloop mount: its type, and the prefix of its source, which is
 * "dioloop:" and the SOURCE it serves (cmd_mount.c's fsname). */
#define DIOLOOP_FSTYPE "fuse.dioloop"
#define DIOLOOP_FSNAME_PREFIX "dioloop:"

struct dioloop_mountinfo {
	dev_t dev;			/* MAJ:MIN */
	char *mountpoint;		/* unescaped */
	char *fstype;
	char *source;			/* unescaped */
	long long owner;		/* user_id= of a FUSE mount, or -1 */
};

/* The start time of process pid, in clock ticks since boot (field 22 of
 * /proc/PID/stat): with the pid, it names one process for as long as the
 * machine runs.  0, or -errno. */
int dioloop_proc_start_ticks(pid_t pid, unsigned long long *ticks);

/* Undo mountinfo's octal escapes (\040 for a space, ...) in place: a
 * backslash and three octal digits, the first 0-3, become that byte;
 * anything else (a truncated or malformed escape) is kept as it is. */
void dioloop_mountinfo_unescape(char *s);

/* Parse one mountinfo line into m (dioloop_mountinfo_clear it): false,
 * m untouched, when the line has not that shape. */
bool dioloop_mountinfo_parse(const char *line, struct dioloop_mountinfo *m);
void dioloop_mountinfo_clear(struct dioloop_mountinfo *m);

/* The mounts of /proc/self/mountinfo in its order (a later one is
 * mounted on top of an earlier one at the same place), lines of another
 * shape skipped: a GArray of struct dioloop_mountinfo that clears its
 * elements (g_array_unref), or NULL when the file cannot be read. */
GArray *dioloop_mountinfo_read(void);

#endif
