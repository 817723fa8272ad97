/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount / dioloop umount.
 *
 * mount goes to the background once the mount is ready (and, with --loop,
 * every loop device is attached), and its exit status says whether that
 * worked: the parent waits on a pipe for one status byte from the child.
 * Signals (TERM, INT, HUP) are taken by a thread with sigwait: it detaches
 * the loop devices while the FUSE loop still serves their I/O, then ends
 * the session.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "backends/size.h"
#include "fusefs/migrate.h"
#include "fusefs/cli/commands.h"
#include "fusefs/fs.h"
#include "fusefs/lograte.h"
#include "fusefs/loop.h"
#include "fusefs/remote.h"
#include "fusefs/session_io.h"
#include "fusefs/spec.h"

#define DIOLOOP_DEFAULT_QUEUE_DEPTH 128
#define DIOLOOP_DEFAULT_THREADS 8
/* The same log text at most once per 10 s; up to 4096 texts remembered. */
#define DIOLOOP_LOG_RATE_INTERVAL_US (10 * G_USEC_PER_SEC)
#define DIOLOOP_LOG_RATE_MAX_TEXTS 4096

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

/* Generic mount(8) options that fstab lines and mount.fuse3 pass along:
 * accepted and ignored (nodes are always nosuid and nodev). */
static const char *const ignored_mount_options[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "owner",
	"group", "nofail", "_netdev", "dev", "nodev", "suid", "nosuid",
	"exec", "noexec", "atime", "noatime", "relatime", "norelatime",
	"strictatime", "nostrictatime", "diratime", "nodiratime", "lazytime",
	"nolazytime", "async", "default_permissions",
};

/* True for an option meant for mount(8), systemd or other programs. */
static bool is_ignored_mount_option(const char *key, const char *val)
{
	size_t i;

	/* x-systemd.*, x-gvfs-*, comment=...: for other programs. */
	if (!strncmp(key, "x-", 2) || !strcmp(key, "comment"))
		return true;
	if (val)
		return false;
	for (i = 0; i < G_N_ELEMENTS(ignored_mount_options); i++)
		if (!strcmp(key, ignored_mount_options[i]))
			return true;
	return false;
}

/* Free one -o fault= rule (the array's free function). */
static void mount_fault_free(gpointer data)
{
	struct dioloop_mount_fault *mf = data;

	g_free(mf->node);
	g_free(mf);
}

/* -o fault=NODE:WORD:WORD...: false after a one-line message. */
static bool parse_mount_fault(const char *val, struct dioloop_mount_opts *o)
{
	g_auto(GStrv) parts = g_strsplit(val, ":", -1);
	struct dioloop_mount_fault *mf;
	g_autofree char *err = NULL;
	struct fault_rule r;

	if (!parts[0] || !*parts[0] || !parts[1]) {
		dioloop_err("mount: bad fault '%s': expected fault=NODE:RULE "
			    "(e.g. fault=disk0.img:write:error=EIO:rate=1%%; "
			    "NODE * is every node)", val);
		return false;
	}
	if (dioloop_fault_parse(parts + 1, (int)g_strv_length(parts + 1), &r,
				&err) < 0) {
		dioloop_err("mount: bad fault '%s': %s", val, err);
		return false;
	}
	mf = g_new0(struct dioloop_mount_fault, 1);
	mf->node = g_strdup(parts[0]);
	mf->rule = r;
	if (!o->faults)
		o->faults = g_ptr_array_new_with_free_func(mount_fault_free);
	g_ptr_array_add(o->faults, mf);
	return true;
}

/* A limit given at mount (iops=500, total_bps=1G, ...): false after a
 * one-line message. */
static bool parse_mount_limit(const char *key, const char *val,
			      struct dioloop_mount_opts *o)
{
	g_autofree char *word = g_strdup_printf("%s=%s", key, val ? val : "");
	struct dioloop_limit_update u = { 0 };
	g_autofree char *err = NULL;

	if (dioloop_limit_parse(word, &u, &err) < 0) {
		dioloop_err("mount: %s", err);
		return false;
	}
	dioloop_limits_update(&o->limits, &u);
	if (u.mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS))
		o->total_bps = u.value[DIOLOOP_LIMIT_TOTAL_BPS];
	return true;
}

/* Parse -o options into opts; false after a one-line message. */
static bool parse_mount_options(const char *list, struct dioloop_mount_opts *o)
{
	g_auto(GStrv) items = g_strsplit(list, ",", -1);
	char **it;

	for (it = items; *it; it++) {
		char *key = *it, *val = strchr(key, '=');
		uint64_t v = 0;
		int ret = 0;

		if (val)
			*val++ = '\0';
		if (!*key || is_ignored_mount_option(key, val))
			continue;
		if (dioloop_limit_key(key) >= 0) {
			if (!parse_mount_limit(key, val, o))
				return false;
		} else if (!strcmp(key, "fault") && val) {
			if (!parse_mount_fault(val, o))
				return false;
		} else if (!strcmp(key, "fault") && !val) {
			o->fault_all = true;
		} else if (!strcmp(key, "ro") && !val)
			o->readonly = true;
		else if (!strcmp(key, "rw") && !val)
			o->readonly = false;
		else if (!strcmp(key, "allow_other") && !val)
			o->allow_other = true;
		else if (!strcmp(key, "growable") && !val)
			o->growable = true;
		else if (!strcmp(key, "cache") && !val)
			o->cache = true;
		else if (!strcmp(key, "sync") && !val)
			o->sync = true;
		else if (!strcmp(key, "commit") && val) {
			double s;

			if (dioloop_parse_decimal(val, 3600, &s, NULL) < 0) {
				dioloop_err("mount: bad commit '%s': seconds "
					    "from 0 (only on flush) to 3600",
					    val);
				return false;
			}
			o->commit_ms = (int)(s * 1000 + 0.5);
		}
		else if ((!strcmp(key, "threads") || !strcmp(key, "queue_depth") ||
			  !strcmp(key, "max_write")) && val) {
			ret = dioloop_parse_size(val, UINT32_MAX, &v);
			if (ret < 0 || v == 0) {
				dioloop_err("mount: bad value '%s' for option '%s'",
					    val, key);
				return false;
			}
			if (!strcmp(key, "threads"))
				o->threads = (unsigned)MIN(v, 1024);
			else if (!strcmp(key, "queue_depth"))
				o->queue_depth = (unsigned)MIN(v, 4096);
			else if (v > DIOLOOP_MAX_WRITE || v < DIOLOOP_PAGE_SIZE ||
				 v % DIOLOOP_PAGE_SIZE) {
				dioloop_err("mount: bad max_write '%s': a multiple "
					    "of 4K from 4K to 1M", val);
				return false;
			} else {
				o->max_write = (unsigned)v;
			}
		} else {
			dioloop_err("mount: unknown option '%s%s%s' (see "
				    "'dioloop mount --help')", key,
				    val ? "=" : "", val ? val : "");
			return false;
		}
	}
	return true;
}

static void detach_to_background(void);

/* Say so when a -o fault= rule names no image of the source (it applies
 * if one of that name appears later).  Control thread. */
static void warn_unknown_fault_nodes(struct dioloop_fs *fs)
{
	guint i;

	for (i = 0; fs->opts.faults && i < fs->opts.faults->len; i++) {
		struct dioloop_mount_fault *mf = fs->opts.faults->pdata[i];
		struct stat st;

		if (strcmp(mf->node, "*") &&
		    (fs->remote ? !dioloop_remote_has(fs->remote, mf->node) :
				  fstatat(fs->source_fd, mf->node, &st, 0) < 0))
			g_warning("%s: fault rule for an image that is not in "
				  "%s (yet)", mf->node, fs->source);
	}
}

/* Tell the waiting parent how the start went (once); after a success the
 * daemon lets go of the terminal. */
static void report_status(struct mount_state *ms, unsigned char status)
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
	line = g_string_new(message);
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

/* Detach every loop device we attached; the FUSE loop must be serving. */
static void detach_loops(struct mount_state *ms)
{
	guint i;

	g_mutex_lock(&ms->lock);
	for (i = 0; ms->loops && i < ms->loops->len; i++) {
		const char *dev = ms->loops->pdata[i];
		dev_t d;
		ino_t ino;
		int ret;

		/* Detached by dioloop umount, and perhaps attached to
		 * another file since: no longer ours. */
		ret = dioloop_loop_backing(dev, &d, &ino);
		if (ret == -ENXIO || (ret == 0 && d != ms->nodes_dev))
			continue;
		ret = dioloop_loop_detach(dev, 5000);

		if (ret < 0)
			g_warning("%s: detach: %s", dev,
				  ret == -EBUSY ? "still in use (mounted?); it "
				  "will detach when closed" : g_strerror(-ret));
	}
	if (ms->loops)
		g_ptr_array_set_size(ms->loops, 0);
	g_mutex_unlock(&ms->lock);
}

/* Unmount path: a plain unmount, lazily if something still holds it (the
 * connection then ends when the last user lets go).  As a user through
 * fusermount3. */
static void unmount_path(const char *path)
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
static void stop_mount(struct mount_state *ms)
{
	g_mutex_lock(&ms->lock);
	if (ms->stopping) {
		g_mutex_unlock(&ms->lock);
		return;
	}
	ms->stopping = true;
	g_mutex_unlock(&ms->lock);
	/* A running migration stops first: its node stays on its source. */
	dioloop_migrations_stop(&ms->fs);
	detach_loops(ms);
	dioloop_fs_flush_all(&ms->fs);
	/* Unmount without closing the session's fd (fuse_session_unmount
	 * would, under the workers' feet): the kernel ends the connection
	 * once the mount is gone and the FUSE loop returns by itself. */
	unmount_path(ms->fs.mountpoint);
}

static gpointer signal_thread(gpointer data)
{
	struct mount_state *ms = data;
	int sig;

	for (;;) {
		if (sigwait(&ms->signals, &sig) != 0)
			continue;
		if (sig == SIGUSR1)	/* the session ended by itself */
			return NULL;
		g_message("signal %d: unmounting %s", sig, ms->fs.mountpoint);
		stop_mount(ms);
		return NULL;
	}
}

/* With --loop: attach one loop device per node and print it.  Runs while
 * the FUSE loop serves the opens.  Then reports readiness. */
static gpointer starter_thread(gpointer data)
{
	struct mount_state *ms = data;
	GDir *dir;
	const char *name;
	int failed = 0;

	if (!ms->attach_loops) {
		report_status(ms, 0);
		return NULL;
	}
	dir = g_dir_open(ms->fs.mountpoint, 0, NULL);
	while (dir && (name = g_dir_read_name(dir))) {
		g_autofree char *path = g_build_filename(ms->fs.mountpoint, name,
							 NULL);
		g_autofree char *dev = NULL;
		struct stat st;
		bool dio = false;
		int ret;

		if (stat(path, &st) < 0)
			continue;
		ret = dioloop_loop_attach(path, !(st.st_mode & 0222),
					  &dev, &dio);
		if (ret < 0) {
			g_printerr("dioloop: mount: %s: cannot attach a loop "
				   "device: %s\n", name, g_strerror(-ret));
			failed++;
			continue;
		}
		if (!dio)
			g_warning("%s: the kernel did not enable direct I/O on %s",
				  name, dev);
		g_mutex_lock(&ms->lock);
		ms->nodes_dev = st.st_dev;
		g_ptr_array_add(ms->loops, g_strdup(dev));
		g_mutex_unlock(&ms->lock);
		printf("%s %s\n", name, dev);
		fflush(stdout);
	}
	if (dir)
		g_dir_close(dir);
	else
		failed++;
	if (failed) {
		report_status(ms, 1);
		stop_mount(ms);
		return NULL;
	}
	report_status(ms, 0);
	return NULL;
}

/*
 * Raise the soft limit on open files to the hard limit: each image costs
 * a few fds (README, "Security model"), and the usual soft limit of 1024
 * would refuse images past a few hundred with EMFILE.
 */
static void raise_nofile_limit(void)
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

static int run_mount(struct mount_state *ms, const char *source,
		     const char *mountpoint)
{
	g_autofree char *fsname = NULL, *optstr = NULL;
	struct fuse_loop_config *cfg;
	GThread *sig_thread, *start_thread;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	int ret;

	/* Signals go to the signal thread only: block them before any
	 * thread exists. */
	sigemptyset(&ms->signals);
	sigaddset(&ms->signals, SIGTERM);
	sigaddset(&ms->signals, SIGINT);
	sigaddset(&ms->signals, SIGHUP);
	sigaddset(&ms->signals, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &ms->signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	dioloop_lograte_init(&log_rate, DIOLOOP_LOG_RATE_INTERVAL_US,
			     DIOLOOP_LOG_RATE_MAX_TEXTS);
	g_log_set_default_handler(log_to_stderr, &ms->fs.opts);
	raise_nofile_limit();
	ret = dioloop_fs_init(&ms->fs, source, mountpoint, &ms->fs.opts);
	if (ret < 0) {
		/* A remote source that failed here passed the check before
		 * the fork: it went away since (mount's status 2 still). */
		ret = backend_is_url(source) ? DIOLOOP_EXIT_USAGE :
						   DIOLOOP_EXIT_FAIL;
		dioloop_err("mount: %s: cannot serve it", source);
		if (ms->fs.opts.faults)
			g_ptr_array_free(ms->fs.opts.faults, TRUE);
		report_status(ms, (unsigned char)ret);
		return ret;
	}
	/* Open (and lock) every image now, so that an image served by
	 * another daemon is reported while the terminal still listens. */
	dioloop_fs_open_all(&ms->fs);
	warn_unknown_fault_nodes(&ms->fs);
	/* I/O threads may be needed to clean the page cache; they need
	 * CAP_SYS_RESOURCE, which containers often withhold. */
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0)
		g_info("PR_SET_IO_FLUSHER: %s (continuing without it)",
		       g_strerror(errno));

	fsname = g_strdup_printf("dioloop:%s", ms->fs.source);
	optstr = g_strdup_printf("fsname=%s,subtype=dioloop%s%s", fsname,
				 ms->fs.opts.allow_other ?
					 ",allow_other,default_permissions" : "",
				 ms->fs.opts.readonly ? ",ro" : "");
	fuse_opt_add_arg(&args, "dioloop");
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, optstr);
	if (ms->fs.opts.debug)
		fuse_opt_add_arg(&args, "-d");
	ms->fs.se = fuse_session_new(&args, &dioloop_fuse_ops,
				     sizeof(dioloop_fuse_ops), &ms->fs);
	fuse_opt_free_args(&args);
	if (!ms->fs.se) {
		dioloop_err("mount: cannot start a FUSE session");
		ret = DIOLOOP_EXIT_FAIL;
		goto out_fs;
	}
	if (fuse_session_mount(ms->fs.se, mountpoint) != 0) {
		dioloop_err("mount: cannot mount on %s (does it exist, is it "
			    "a directory, is it already in use?)", mountpoint);
		ret = DIOLOOP_EXIT_FAIL;
		goto out_session;
	}
	ret = dioloop_session_io_install(ms->fs.se);
	if (ret < 0) {
		dioloop_err("mount: cannot hook the FUSE session's I/O: %s",
			    g_strerror(-ret));
		ret = DIOLOOP_EXIT_FAIL;
		goto out_unmount;
	}
	ret = dioloop_io_start(&ms->fs);
	if (ret < 0) {
		ret = DIOLOOP_EXIT_FAIL;
		goto out_unmount;
	}
	ms->loops = g_ptr_array_new_with_free_func(g_free);
	g_mutex_init(&ms->lock);
	sig_thread = g_thread_new("dioloop-signal", signal_thread, ms);
	start_thread = g_thread_new("dioloop-start", starter_thread, ms);

	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, ms->fs.opts.threads);
	fuse_loop_cfg_set_idle_threads(cfg, ms->fs.opts.threads);
	ret = fuse_session_loop_mt(ms->fs.se, cfg);
	fuse_loop_cfg_destroy(cfg);

	g_thread_join(start_thread);
	kill(getpid(), SIGUSR1);	/* end the signal thread (if idle) */
	g_thread_join(sig_thread);
	detach_loops(ms);		/* unmounted from outside: too late
					 * for I/O, the kernel lets go lazily */
	report_status(ms, ret == 0 ? 0 : 1);
	ret = ret == 0 ? DIOLOOP_EXIT_OK : DIOLOOP_EXIT_FAIL;

	/* Answer what is still in flight before the session goes: what
	 * waits for a limit goes now (the worker pool may wait on it). */
	dioloop_throttle_group_stop(&ms->fs.throttle);
	dioloop_migrations_stop(&ms->fs);
	dioloop_io_stop(&ms->fs);
	dioloop_fs_drain_all(&ms->fs);
	g_ptr_array_free(ms->loops, TRUE);
	g_mutex_clear(&ms->lock);
out_unmount:
	fuse_session_unmount(ms->fs.se);
out_session:
	fuse_session_destroy(ms->fs.se);
out_fs:
	dioloop_fs_destroy(&ms->fs);
	return ret;
}

/* Free a mount_state whose fs was never initialised (or is destroyed,
 * which freed the fault rules: then they are NULL). */
static void mount_state_free(struct mount_state *ms)
{
	if (ms->fs.opts.faults)
		g_ptr_array_free(ms->fs.opts.faults, TRUE);
	g_free(ms);
}

/* True if /etc/fuse.conf lets users mount with allow_other. */
static bool user_allow_other(void)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	char **l;

	if (!g_file_get_contents("/etc/fuse.conf", &text, NULL, NULL))
		return false;
	lines = g_strsplit(text, "\n", -1);
	for (l = lines; *l; l++)
		if (!strcmp(g_strstrip(*l), "user_allow_other"))
			return true;
	return false;
}

/* True if something is mounted on path (mounting on top would hide it). */
static bool is_mount_point(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, STATX_BASIC_STATS,
		  &stx) < 0)
		return false;
	return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

int dioloop_cmd_mount(int argc, char **argv)
{
	g_auto(GStrv) opts = NULL;
	gboolean foreground = FALSE, loop = FALSE, debug = FALSE;
	GOptionEntry entries[] = {
		{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &foreground,
		  "stay in the foreground", NULL },
		{ "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opts,
		  "mount options: ro, allow_other, growable, cache, sync, "
		  "commit=SECONDS, threads=N, queue_depth=N, max_write=BYTES, limits (iops=N, "
		  "read_iops=N, write_iops=N, bps=N, read_bps=N, write_bps=N, "
		  "burst_ms=N, total_bps=N), fault and fault=NODE:RULE", "OPTS" },
		{ "loop", 0, 0, G_OPTION_ARG_NONE, &loop,
		  "attach a loop device with direct I/O to every node and "
		  "print 'NAME /dev/loopN' for each", NULL },
		{ "debug", 'd', 0, G_OPTION_ARG_NONE, &debug,
		  "print every FUSE request (implies -f)", NULL },
		{ NULL },
	};
	struct mount_state *ms;
	struct stat st;
	char **o;
	int pipefd[2], ret;
	pid_t pid;

	if (!dioloop_parse_args("mount", "SOURCE MOUNTPOINT",
				"Serve every image in the directory SOURCE as a "
				"block node under MOUNTPOINT.  SOURCE may be "
				"nfs://HOST[:PORT]/EXPORT/DIR[?OPTIONS], a "
				"directory on an NFS server.", entries, &argc,
				&argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 3) {
		dioloop_err("mount: expected SOURCE and MOUNTPOINT, got %d "
			    "arguments", argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	ms = g_new0(struct mount_state, 1);
	ms->status_fd = -1;
	ms->fs.opts = (struct dioloop_mount_opts){
		.threads = DIOLOOP_DEFAULT_THREADS,
		.queue_depth = DIOLOOP_DEFAULT_QUEUE_DEPTH,
		.max_write = DIOLOOP_MAX_WRITE,
		.commit_ms = -1,
		.debug = debug,
	};
	dioloop_limits_init(&ms->fs.opts.limits);
	for (o = opts; o && *o; o++)
		if (!parse_mount_options(*o, &ms->fs.opts)) {
			mount_state_free(ms);
			return DIOLOOP_EXIT_USAGE;
		}
	if (loop && geteuid() != 0) {
		dioloop_err("mount: --loop needs root (loop devices); mount "
			    "without it and attach with losetup as root");
		mount_state_free(ms);
		return DIOLOOP_EXIT_USAGE;
	}
	if (ms->fs.opts.allow_other && geteuid() != 0 &&
	    !user_allow_other()) {
		dioloop_err("mount: allow_other: only root may use it unless "
			    "/etc/fuse.conf has the line 'user_allow_other'");
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	if (backend_is_url(argv[1])) {
		g_autoptr(GPtrArray) names =
			g_ptr_array_new_with_free_func(g_free);
		g_autoptr(GError) error = NULL;

		/* The URL, the server, the export and the directory: one
		 * line and status 2 while the terminal listens. */
		if (backend_check_url(argv[1], false, &error) < 0 ||
		    backend_list_url(argv[1], names, &error) < 0) {
			dioloop_err("mount: %s", error->message);
			mount_state_free(ms);
			return DIOLOOP_EXIT_USAGE;
		}
	} else if (stat(argv[1], &st) < 0 || !S_ISDIR(st.st_mode)) {
		dioloop_err("mount: SOURCE %s: %s", argv[1],
			    access(argv[1], F_OK) < 0 ? g_strerror(errno) :
			    "not a directory");
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	if (stat(argv[2], &st) < 0 || !S_ISDIR(st.st_mode)) {
		dioloop_err("mount: MOUNTPOINT %s: %s", argv[2],
			    access(argv[2], F_OK) < 0 ? g_strerror(errno) :
			    "not a directory");
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	if (is_mount_point(argv[2])) {
		dioloop_err("mount: MOUNTPOINT %s is already in use (a file "
			    "system is mounted there)", argv[2]);
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	ms->attach_loops = loop;
	ms->foreground = foreground || debug;
	if (!ms->foreground) {
		if (pipe2(pipefd, O_CLOEXEC) < 0) {
			dioloop_err("mount: pipe: %s", g_strerror(errno));
			mount_state_free(ms);
			return DIOLOOP_EXIT_FAIL;
		}
		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			dioloop_err("mount: fork: %s", g_strerror(errno));
			mount_state_free(ms);
			return DIOLOOP_EXIT_FAIL;
		}
		if (pid > 0) {
			unsigned char status = 1;

			close(pipefd[1]);
			if (read(pipefd[0], &status, 1) != 1)
				status = 1;
			mount_state_free(ms);
			return status;
		}
		close(pipefd[0]);
		ms->status_fd = pipefd[1];
		setsid();
	}
	ret = run_mount(ms, argv[1], argv[2]);
	g_free(ms);
	return ret;
}
