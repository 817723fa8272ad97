/* SPDX-License-Identifier: MIT */
/*
 * Signals (TERM, INT, HUP) are taken by a thread with sigwait: it detaches
 * the loop devices while the FUSE loop still serves their I/O, then ends
 * the session by unmounting.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include "fusefs/cli/mount.h"
#include "fusefs/migrate.h"

/* Unmount path: a plain unmount, lazily if something still holds it (the
 * connection then ends when the last user lets go).  As a user through
 * fusermount3. */
static void mount_unmount_path(const char *path)
{
	char *argv[] = { "fusermount3", "-u", "-q", (char *)path, NULL };
	char *lazy_argv[] = { "fusermount3", "-u", "-z", "-q", (char *)path,
			      NULL };
	int status = 0;

	if (geteuid() == 0) {
		if (umount2(path, 0) == 0 || errno == EINVAL)
			return;
		if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL)
			g_warning("%s: unmount: %s", path, g_strerror(errno));
		return;
	}
	if (g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH |
			 G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
			 NULL, NULL, NULL, NULL, &status, NULL) &&
	    g_spawn_check_wait_status(status, NULL))
		return;
	if (!g_spawn_sync(NULL, lazy_argv, NULL, G_SPAWN_SEARCH_PATH, NULL,
			  NULL, NULL, NULL, &status, NULL) ||
	    !g_spawn_check_wait_status(status, NULL))
		g_warning("%s: fusermount3 -u -z failed", path);
}

/* Stop serving: loops first, then the mount (the FUSE loop then returns). */
void mount_stop(struct mount_state *ms)
{
	g_mutex_lock(&ms->lock);
	if (ms->stopping) {
		g_mutex_unlock(&ms->lock);
		return;
	}
	ms->stopping = true;
	g_mutex_unlock(&ms->lock);
	/* What waits for a limit goes now, and the limits end: a request
	 * held for hours by a small bps= would otherwise keep the daemon
	 * (and its image locks) alive that long after the unmount, the
	 * kernel keeping the connection until the request is answered.
	 * First: stopping a migration drains its node's requests. */
	dioloop_throttle_group_stop(&ms->fs.throttle);
	/* A running migration stops: its node stays on its source. */
	dioloop_migrations_stop(&ms->fs);
	mount_detach_loops(ms);
	dioloop_fs_flush_all(&ms->fs);
	/* Unmount without closing the session's fd (fuse_session_unmount
	 * would, under the workers' feet): the kernel ends the connection
	 * once the mount is gone and the FUSE loop returns by itself. */
	mount_unmount_path(ms->fs.mountpoint);
}

/* Wait for a signal and stop the mount (USR1: the session ended). */
gpointer mount_signal_thread(gpointer data)
{
	struct mount_state *ms = data;
	int sig;

	for (;;) {
		if (sigwait(&ms->signals, &sig) != 0)
			continue;
		if (sig == SIGUSR1)	/* the session ended by itself */
			return NULL;
		g_message("signal %d: unmounting %s", sig, ms->fs.mountpoint);
		mount_stop(ms);
		return NULL;
	}
}

/* Signals go to the signal thread only. */
void mount_block_signals(struct mount_state *ms)
{
	sigemptyset(&ms->signals);
	sigaddset(&ms->signals, SIGTERM);
	sigaddset(&ms->signals, SIGINT);
	sigaddset(&ms->signals, SIGHUP);
	sigaddset(&ms->signals, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &ms->signals, NULL);
	signal(SIGPIPE, SIG_IGN);
}
