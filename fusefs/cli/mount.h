/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount, split by concern: cmd_mount.c (the command and the
 * session), mount_options.c (-o parsing), mount_daemon.c (going to the
 * background, the log, the start-up status), mount_signals.c (signals and
 * stopping), mount_loops.c (--loop attach and detach).
 */
#ifndef DIOLOOP_CLI_MOUNT_H
#define DIOLOOP_CLI_MOUNT_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fusefs/fs.h"

struct mount_state {
	struct dioloop_fs fs;
	bool foreground;
	bool attach_loops;
	int status_fd;			/* to the waiting parent, or -1 */
	GPtrArray *loops;		/* "/dev/loopN" we attached */
	dev_t nodes_dev;		/* st_dev of the nodes (the mount's) */
	GMutex lock;			/* loops, stopping */
	bool stopping;
	sigset_t signals;
};

/* mount_options.c: one -o list into o; false after a one-line message. */
bool mount_parse_options(const char *list, struct dioloop_mount_opts *o);

/* mount_daemon.c */
/* Log to stderr (rate-limited) until the daemon lets go of the terminal. */
void mount_log_start(struct mount_state *ms);
/* Tell the waiting parent how the start went (once); after a success the
 * daemon lets go of the terminal. */
void mount_report_status(struct mount_state *ms, unsigned char status);
/* Raise the soft limit on open files to the hard limit. */
void mount_raise_nofile_limit(void);
/* Fork: the parent waits for the child's start-up status and returns
 * false with it in *status; the child returns true and reports later. */
bool mount_daemonize(struct mount_state *ms, int *status);

/* mount_signals.c */
/* Route TERM, INT, HUP and USR1 to the signal thread only (call before
 * any thread exists); ignore SIGPIPE. */
void mount_block_signals(struct mount_state *ms);
/* Waits for a signal and stops the mount (USR1: just returns). */
gpointer mount_signal_thread(gpointer data);
/* Stop serving: loops first, then the mount (the FUSE loop returns). */
void mount_stop(struct mount_state *ms);

/* mount_loops.c */
/* Attach a loop device per node (--loop), then report readiness. */
gpointer mount_starter_thread(gpointer data);
/* Detach every loop device we attached; the FUSE loop must be serving. */
void mount_detach_loops(struct mount_state *ms);

#endif
