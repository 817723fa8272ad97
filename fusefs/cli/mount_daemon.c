/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount goes to the background once the mount is ready (and, with
 * --loop, every loop device is attached), and its exit status says
 * whether that worked: the parent waits on a pipe for one status byte
 * from the child.  The daemon's log goes to stderr until then, to syslog
 * after; the same text at most once per interval.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/resource.h>
#include <syslog.h>
#include <unistd.h>

#include "fusefs/cli/commands.h"
#include "fusefs/cli/mount.h"
#include "fusefs/lograte.h"

/* The same log text at most once per 10 s; up to 4096 texts remembered. */
#define DIOLOOP_LOG_RATE_INTERVAL_US (10 * G_USEC_PER_SEC)
#define DIOLOOP_LOG_RATE_MAX_TEXTS 4096

static void detach_to_background(void);

/* Tell the waiting parent how the start went (once); after a success the
 * daemon lets go of the terminal. */
void mount_report_status(struct mount_state *ms, unsigned char status)
{
	if (ms->status_fd < 0)
		return;
	if (write(ms->status_fd, &status, 1) != 1)
		g_warning("could not report start-up status: %s",
			  g_strerror(errno));
	close(ms->status_fd);
	ms->status_fd = -1;
	if (status == 0)
		detach_to_background();
}

/* The daemon's log, whichever way it goes: the same text at most once
 * per interval (users may make the daemon fail at will).  Lives until
 * exit: the log handlers may run until then. */
static struct dioloop_lograte log_rate;

/* message, or NULL when it was logged too recently; with a note of what
 * was dropped (g_free it). */
static char *log_rate_limited(const gchar *message)
{
	uint64_t repeats, others;
	GString *line;

	if (!dioloop_lograte_admit(&log_rate, message,
				   g_get_monotonic_time(), &repeats, &others))
		return NULL;
	{
		g_autofree char *text = dioloop_escape_controls(message);

		line = g_string_new(text);
	}
	if (repeats)
		g_string_append_printf(line, " (and %" PRIu64 " more times "
					"since it was last logged)", repeats);
	if (others)
		g_string_append_printf(line, " (%" PRIu64 " other messages "
					"dropped: too many different ones)",
				       others);
	return g_string_free(line, FALSE);
}

/* Foreground (and a background daemon until it lets go of the
 * terminal): one line per event on stderr, "dioloop[PID]: message". */
static void log_to_stderr(const gchar *domain, GLogLevelFlags level,
			  const gchar *message, gpointer data)
{
	const struct dioloop_mount_opts *o = data;
	g_autofree char *line = NULL;

	if ((level & G_LOG_LEVEL_DEBUG) ||
	    ((level & G_LOG_LEVEL_INFO) && !o->debug))
		return;
	line = log_rate_limited(message);
	if (line)
		fprintf(stderr, "dioloop[%d]: %s\n", (int)getpid(), line);
}

/* Background: stdio to /dev/null, log to syslog. */
static void log_to_syslog(const gchar *domain, GLogLevelFlags level,
			  const gchar *message, gpointer data)
{
	g_autofree char *line = NULL;
	int prio = LOG_INFO;

	if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL))
		prio = LOG_ERR;
	else if (level & G_LOG_LEVEL_WARNING)
		prio = LOG_WARNING;
	else if (level & G_LOG_LEVEL_DEBUG)
		return;
	line = log_rate_limited(message);
	if (line)
		syslog(prio, "%s", line);
}

/* Let go of the terminal: stdio to /dev/null, the log to syslog. */
static void detach_to_background(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	openlog("dioloop", LOG_PID, LOG_DAEMON);
	g_log_set_default_handler(log_to_syslog, NULL);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
}

/*
 * Raise the soft limit on open files to the hard limit: each image costs
 * a few fds (README, "Security model"), and the usual soft limit of 1024
 * would refuse images past a few hundred with EMFILE.
 */
void mount_raise_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		g_warning("getrlimit(RLIMIT_NOFILE): %s", g_strerror(errno));
		return;
	}
	if (rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		g_warning("raising the open file limit to %llu: %s",
			  (unsigned long long)rl.rlim_max, g_strerror(errno));
}

/* Log to stderr (rate-limited) until the daemon lets go of the terminal. */
void mount_log_start(struct mount_state *ms)
{
	dioloop_lograte_init(&log_rate, DIOLOOP_LOG_RATE_INTERVAL_US,
			     DIOLOOP_LOG_RATE_MAX_TEXTS);
	g_log_set_default_handler(log_to_stderr, &ms->fs.opts);
}

/* Fork; the parent waits for the child's start-up status. */
bool mount_daemonize(struct mount_state *ms, int *status)
{
	int pipefd[2];
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		dioloop_err("mount: pipe: %s", g_strerror(errno));
		*status = DIOLOOP_EXIT_FAIL;
		return false;
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		dioloop_err("mount: fork: %s", g_strerror(errno));
		*status = DIOLOOP_EXIT_FAIL;
		return false;
	}
	if (pid > 0) {
		unsigned char st = 1;

		close(pipefd[1]);
		if (read(pipefd[0], &st, 1) != 1)
			st = 1;
		*status = st;
		return false;
	}
	close(pipefd[0]);
	ms->status_fd = pipefd[1];
	setsid();
	return true;
}
