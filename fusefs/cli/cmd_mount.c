/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount: the checks while the terminal listens, then the FUSE
 * session (see mount.h for the other parts of the command).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fusefs/migrate.h"
#include "fusefs/cli/commands.h"
#include "fusefs/cli/mount.h"
#include "fusefs/fs.h"
#include "fusefs/mountinfo.h"
#include "fusefs/remote.h"
#include "fusefs/session_dev.h"
#include "fusefs/session_io.h"
#include "fusefs/session_uring.h"

#define DIOLOOP_DEFAULT_QUEUE_DEPTH 128
#define DIOLOOP_DEFAULT_THREADS 8

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

/*
 * Open (and lock) every image of the source, as dioloop_fs_open_all does:
 * false when SOURCE has images and not one of them can be served (each
 * lookup logged why).  Control thread, before the session.
 */
static bool open_all_images(struct dioloop_fs *fs, guint *nr_images)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	guint i, served = 0;

	*nr_images = 0;
	if (dioloop_fs_list_images(fs, names) < 0)
		return true;
	for (i = 0; i < names->len; i++) {
		struct dioloop_node *node;

		/* Errors are logged by the lookup, one line per image. */
		if (dioloop_node_lookup(fs, names->pdata[i], &node) == 0) {
			dioloop_node_forget(fs, node->ino, 1);
			served++;
		}
	}
	*nr_images = names->len;
	return names->len == 0 || served > 0;
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
	mount_block_signals(ms);
	mount_log_start(ms);
	mount_raise_nofile_limit();
	guint nr_images;

	ret = dioloop_fs_init(&ms->fs, source, mountpoint, &ms->fs.opts);
	if (ret < 0) {
		/* A remote source that failed here passed the check before
		 * the fork: it went away since (mount's status 2 still). */
		ret = backend_is_url(source) ? DIOLOOP_EXIT_USAGE :
						   DIOLOOP_EXIT_FAIL;
		dioloop_err("mount: %s: cannot serve it", source);
		if (ms->fs.opts.faults)
			g_ptr_array_free(ms->fs.opts.faults, TRUE);
		mount_report_status(ms, (unsigned char)ret);
		return ret;
	}
	/* Open (and lock) every image now, so that an image served by
	 * another daemon is reported while the terminal still listens; a
	 * mount that would serve nothing at all is no mount. */
	if (!open_all_images(&ms->fs, &nr_images)) {
		dioloop_err("mount: %s: none of its %u images can be served "
			    "(the lines above say why)", source, nr_images);
		ret = DIOLOOP_EXIT_FAIL;
		mount_report_status(ms, (unsigned char)ret);
		goto out_fs;
	}
	warn_unknown_fault_nodes(&ms->fs);
	/* I/O threads may be needed to clean the page cache; they need
	 * CAP_SYS_RESOURCE, which containers often withhold. */
	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0)
		g_info("PR_SET_IO_FLUSHER: %s (continuing without it)",
		       g_strerror(errno));

	fsname = g_strdup_printf(DIOLOOP_FSNAME_PREFIX "%s", ms->fs.source);
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
	dioloop_dev_workers_configure(ms->fs.opts.queue_depth);
	ret = dioloop_session_io_install(ms->fs.se);
	if (ret < 0) {
		dioloop_err("mount: cannot hook the FUSE session's I/O: %s",
			    g_strerror(-ret));
		ret = DIOLOOP_EXIT_FAIL;
		goto out_unmount;
	}
	if (ms->fs.opts.transport == DIOLOOP_TRANSPORT_URING) {
		ret = dioloop_uring_enable(ms->fs.se, ms->fs.opts.queue_depth);
		if (ret < 0) {
			dioloop_err("mount: transport=uring: %s",
				    g_strerror(-ret));
			ret = DIOLOOP_EXIT_FAIL;
			goto out_unmount;
		}
	}
	ret = dioloop_io_start(&ms->fs);
	if (ret < 0) {
		ret = DIOLOOP_EXIT_FAIL;
		goto out_unmount;
	}
	ms->loops = g_ptr_array_new_with_free_func(g_free);
	g_mutex_init(&ms->lock);
	sig_thread = g_thread_new("dioloop-signal", mount_signal_thread, ms);
	start_thread = g_thread_new("dioloop-start", mount_starter_thread, ms);

	cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, ms->fs.opts.threads);
	fuse_loop_cfg_set_idle_threads(cfg, ms->fs.opts.threads);
	/* Each worker reads its own clone of /dev/fuse (FUSE_DEV_IOC_CLONE)
	 * and replies through it: the workers do not queue on one file's
	 * wait queue and lock.  libfuse falls back to the one fd, saying so,
	 * where cloning fails. */
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	ret = fuse_session_loop_mt(ms->fs.se, cfg);
	fuse_loop_cfg_destroy(cfg);

	g_thread_join(start_thread);
	kill(getpid(), SIGUSR1);	/* end the signal thread (if idle) */
	g_thread_join(sig_thread);
	mount_detach_loops(ms);		/* unmounted from outside: too late
					 * for I/O, the kernel lets go lazily */
	mount_report_status(ms, ret == 0 ? 0 : 1);
	ret = ret == 0 ? DIOLOOP_EXIT_OK : DIOLOOP_EXIT_FAIL;

	/* Answer what is still in flight before the session goes: what
	 * waits for a limit goes now (the worker pool may wait on it). */
	dioloop_throttle_group_stop(&ms->fs.throttle);
	dioloop_migrations_stop(&ms->fs);
	dioloop_io_stop(&ms->fs);
	dioloop_fs_drain_all(&ms->fs);
	dioloop_uring_stop();		/* every request is answered */
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

/* -o transport=uring or auto against what the kernel allows: auto
 * becomes uring or dev; false after a one-line message when uring was
 * asked for and cannot be. */
static bool resolve_transport(struct dioloop_mount_opts *o)
{
	const char *why;

	if (o->transport == DIOLOOP_TRANSPORT_DEV)
		return true;
	if (dioloop_uring_allowed(&why) == 0) {
		o->transport = DIOLOOP_TRANSPORT_URING;
		return true;
	}
	if (o->transport == DIOLOOP_TRANSPORT_AUTO) {
		o->transport = DIOLOOP_TRANSPORT_DEV;
		return true;
	}
	dioloop_err("mount: transport=uring: %s", why);
	return false;
}

/* Free a mount_state whose fs was never initialised (or is destroyed,
 * which freed the fault rules: then they are NULL). */
static void mount_state_free(struct mount_state *ms)
{
	if (ms->fs.opts.faults)
		g_ptr_array_free(ms->fs.opts.faults, TRUE);
	g_free(ms);
}

/* Take "nonempty" out of the -o list *list (mount's own, as in fuse 2
 * and mount(8)): true when it was there. */
static bool take_nonempty(char **list)
{
	g_auto(GStrv) items = g_strsplit(*list, ",", -1);
	GString *rest = g_string_new(NULL);
	bool found = false;
	char **it;

	for (it = items; *it; it++) {
		if (!strcmp(*it, "nonempty")) {
			found = true;
			continue;
		}
		g_string_append_printf(rest, "%s%s", rest->len ? "," : "", *it);
	}
	g_free(*list);
	*list = g_string_free(rest, FALSE);
	return found;
}

/* Whether the directory path has an entry (a mount there would hide
 * it); false when it cannot be read (the mount will say why). */
static bool dir_has_entries(const char *path)
{
	g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);

	return dir && g_dir_read_name(dir) != NULL;
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
	bool nonempty = false;
	GOptionEntry entries[] = {
		{ "foreground", 'f', 0, G_OPTION_ARG_NONE, &foreground,
		  "stay in the foreground", NULL },
		{ "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opts,
		  "mount options: ro, allow_other, nonempty, growable, cache, sync, "
		  "commit=SECONDS, threads=N, queue_depth=N, max_write=BYTES, limits (iops=N, "
		  "read_iops=N, write_iops=N, bps=N, read_bps=N, write_bps=N, "
		  "burst_ms=N, total_bps=N), fault and fault=NODE:RULE, "
		  "transport=dev|uring|auto", "OPTS" },
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
	int ret;

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
		.transport = DIOLOOP_TRANSPORT_AUTO,
	};
	dioloop_limits_init(&ms->fs.opts.limits);
	for (o = opts; o && *o; o++)
		nonempty |= take_nonempty(o);
	for (o = opts; o && *o; o++)
		if (!mount_parse_options(*o, &ms->fs.opts)) {
			mount_state_free(ms);
			return DIOLOOP_EXIT_USAGE;
		}
	if (!resolve_transport(&ms->fs.opts)) {
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
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
		return DIOLOOP_EXIT_USAGE;
	}
	if (stat(argv[2], &st) < 0 || !S_ISDIR(st.st_mode)) {
		dioloop_err("mount: MOUNTPOINT %s: %s", argv[2],
			    access(argv[2], F_OK) < 0 ? g_strerror(errno) :
			    "not a directory");
		mount_state_free(ms);
		return DIOLOOP_EXIT_USAGE;
	}
	if (is_mount_point(argv[2])) {
		dioloop_err("mount: MOUNTPOINT %s is already in use (a file "
			    "system is mounted there)", argv[2]);
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	if (!nonempty && dir_has_entries(argv[2])) {
		dioloop_err("mount: MOUNTPOINT %s is not empty: the mount would "
			    "hide its files (use an empty directory, or -o "
			    "nonempty)", argv[2]);
		mount_state_free(ms);
		return DIOLOOP_EXIT_FAIL;
	}
	ms->attach_loops = loop;
	ms->foreground = foreground || debug;
	if (!ms->foreground && !mount_daemonize(ms, &ret)) {
		mount_state_free(ms);
		return ret;
	}
	ret = run_mount(ms, argv[1], argv[2]);
	g_free(ms);
	return ret;
}
