/* SPDX-License-Identifier: MIT */
/*
 * dioloop umount: flush every node, detach the loop devices backed by the
 * nodes, unmount.
 *
 * It acts only on what is its own.  The path must be the root of a mount
 * that /proc/self/mountinfo lists as fuse.dioloop, whose control
 * directory answers (.dioloop/stats.json reads as a snapshot); anything
 * else (a tmpfs, an ext4 mount, a plain directory) is refused before
 * anything is touched.  A loop device is ours when the file it is
 * attached to lives on the mount's own device (st_dev of a FUSE mount is
 * unique to it), as LOOP_GET_STATUS64 reports it: not when its path
 * merely starts with the mount point's.
 *
 * Order, so that a refusal leaves every loop device as it was: claim our
 * loop devices exclusively (a file system on one: refuse), flush the
 * nodes, then detach and unmount.
 *
 * Every step after the check goes through descriptors taken then, never
 * the path again: the directory holding the mount point, and the mount's
 * root opened without following a symlink and checked to be on the
 * mount's device.  Whoever may rename a directory on the path (a user's
 * home above a mount point) cannot make the flush open, nor the unmount
 * remove, anything else: root unmounts the name inside the held
 * directory, which cannot be renamed away while it is a mount point.
 *
 * Then wait for the daemon to exit: it closes its images and lets go of
 * their locks after the unmount, and a user who runs `dioloop check` or
 * mounts the images again right after `dioloop umount` must find them
 * free.  The daemon is named by its own statistics (pid) and held by a
 * pidfd taken while the mount still answers, so a recycled PID is never
 * waited for.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backends/backend.h"
#include "fusefs/cli/commands.h"
#include "fusefs/control.h"
#include "fusefs/loop.h"
#include "fusefs/mountinfo.h"

/* How long a detached loop device may take to let go of its node. */
#define UMOUNT_DETACH_TIMEOUT_MS 1000
/* How long the daemon may take to close its images after the unmount
 * before umount says so, and then before it stops waiting (a remote
 * image whose server is gone can hold the close up to its timeout). */
#define UMOUNT_EXIT_NOTICE_MS 10000
#define UMOUNT_EXIT_WAIT_MS 120000

/*
 * The topmost mount at path in /proc/self/mountinfo: its fstype and
 * source (g_free), device and owner (user_id=, or -1).  0, or -ENOENT
 * when path is no mount point.
 */
static int mountinfo_find(const char *path, char **fstype, char **source,
			  dev_t *dev, long long *owner)
{
	g_autoptr(GArray) mounts = dioloop_mountinfo_read();
	guint i;

	if (!mounts)
		return -EIO;
	/* Later lines are mounted on top of earlier ones: the last wins. */
	for (i = mounts->len; i-- > 0;) {
		const struct dioloop_mountinfo *m =
			&g_array_index(mounts, struct dioloop_mountinfo, i);

		if (strcmp(m->mountpoint, path))
			continue;
		*fstype = g_strdup(m->fstype);
		*source = g_strdup(m->source);
		*dev = m->dev;
		*owner = m->owner;
		return 0;
	}
	return -ENOENT;
}

/*
 * A pidfd for the daemon whose statistics are text, or -1 (then umount
 * does not wait).  The statistics are the mount's own to say, so they
 * are checked against what the kernel says: the process must exist here
 * with the start time they give (not a process of another pid namespace
 * or a later one with the number), and belong to the user the kernel
 * names as the mount's maker (owner; -1: not known).  The pidfd is taken
 * first, so the process checked is the one held.
 */
static int daemon_pidfd(const char *text, long long owner)
{
	g_autoptr(JsonParser) p = json_parser_new();
	g_autofree char *proc = NULL;
	unsigned long long ticks;
	JsonObject *root;
	gint64 pid, start;
	struct stat st;
	int fd;

	if (!json_parser_load_from_data(p, text, -1, NULL) ||
	    !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p)))
		return -1;
	root = json_node_get_object(json_parser_get_root(p));
	pid = json_object_get_int_member_with_default(root, "pid", 0);
	start = json_object_get_int_member_with_default(root, "pid_start", -1);
	if (pid <= 0 || pid > INT32_MAX || start < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (fd < 0)
		return -1;
	proc = g_strdup_printf("/proc/%d", (int)pid);
	if (dioloop_proc_start_ticks((pid_t)pid, &ticks) < 0 ||
	    ticks != (unsigned long long)start || stat(proc, &st) < 0 ||
	    (owner >= 0 && (long long)st.st_uid != owner)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the FUSE connection of the mount on dev still lives after the
 * unmount, so that its daemon serves on: another mount of it here (a
 * bind mount), or its directory under the fuse control file system
 * (/sys/fs/fuse/connections/N, where that is mounted: it also sees a
 * copy in another mount namespace). */
static bool connection_lives(dev_t dev)
{
	g_autofree char *path = g_strdup_printf(
		"/sys/fs/fuse/connections/%u", minor(dev));
	g_autoptr(GArray) mounts = dioloop_mountinfo_read();
	guint i;

	if (access(path, F_OK) == 0)
		return true;
	for (i = 0; mounts && i < mounts->len; i++)
		if (g_array_index(mounts, struct dioloop_mountinfo, i).dev ==
		    dev)
			return true;
	return false;
}

/* The mount's statistics snapshot, read through its root mfd (g_free),
 * or NULL with *err. */
static char *read_stats_at(int mfd, int *err)
{
	GString *s = g_string_new(NULL);
	char buf[4096];
	ssize_t n;
	int fd = openat(mfd, DIOLOOP_CTL_DIR "/stats.json",
			O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		*err = errno;
		g_string_free(s, TRUE);
		return NULL;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0 && s->len < (1u << 24))
		g_string_append_len(s, buf, n);
	*err = n < 0 ? errno : 0;
	close(fd);
	if (n < 0) {
		g_string_free(s, TRUE);
		return NULL;
	}
	return g_string_free(s, FALSE);
}

/*
 * Check that real is a dioloop mount: the topmost mount there is
 * fuse.dioloop, it is what path resolves to (same device), and its
 * statistics file answers.  Sets *dev, *remote (a URL source, such as
 * nfs:// or rbd://: its images live on a server) and *pidfd (the daemon
 * serving it, or -1); true, or false after a one-line message.  Changes
 * nothing.
 */
static bool is_dioloop_mount(const char *arg, const char *real, int mfd,
			     dev_t *dev, bool *remote, int *pidfd)
{
	g_autofree char *fstype = NULL, *source = NULL;
	g_autofree char *text = NULL;
	long long owner = -1;
	struct stat st;
	int err = 0;

	if (mountinfo_find(real, &fstype, &source, dev, &owner) < 0) {
		dioloop_err("umount: %s is not a mount point: refusing to "
			    "touch it", arg);
		return false;
	}
	if (strcmp(fstype, DIOLOOP_FSTYPE)) {
		dioloop_err("umount: %s is a %s mount, not a dioloop mount: "
			    "refusing to touch it", arg, fstype);
		return false;
	}
	if (mfd < 0 || fstat(mfd, &st) < 0) {
		dioloop_err("umount: %s: the dioloop mount there does not "
			    "answer (%s): refusing to touch it", arg,
			    g_strerror(mfd < 0 ? -mfd : errno));
		return false;
	}
	if (st.st_dev != *dev) {
		dioloop_err("umount: %s is not the root of the dioloop mount "
			    "there: refusing to touch it", arg);
		return false;
	}
	/* stats.json, not ctl: a read-only mount cannot open ctl for
	 * writing, and reading the snapshot asks the daemon. */
	text = read_stats_at(mfd, &err);
	if (!text || text[0] != '{') {
		dioloop_err("umount: %s: its control file does not answer "
			    "(%s): not a dioloop mount, refusing to touch it",
			    arg, err ? g_strerror(err) : "no statistics");
		return false;
	}
	*remote = g_str_has_prefix(source, DIOLOOP_FSNAME_PREFIX) &&
		  backend_is_url(source + strlen(DIOLOOP_FSNAME_PREFIX));
	*pidfd = daemon_pidfd(text, owner);
	return true;
}

/* Wait for the daemon of an unmounted mount (on dev) to exit (pidfd
 * readable), saying so once on a terminal if it takes long.  false when
 * it has not after UMOUNT_EXIT_WAIT_MS: the unmount itself is done
 * either way.  A connection that lives on elsewhere keeps its daemon:
 * nothing to wait for. */
static bool wait_daemon_exit(const char *arg, int pidfd, dev_t dev)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	int waited = 0, r;

	if (pidfd < 0)
		return true;
	if (connection_lives(dev)) {
		dioloop_err("umount: %s: unmounted here; the mount lives on "
			    "elsewhere (a bind mount or another mount "
			    "namespace), and its daemon serves it there", arg);
		return true;
	}
	while (waited < UMOUNT_EXIT_WAIT_MS) {
		r = poll(&p, 1, UMOUNT_EXIT_NOTICE_MS);
		if (r > 0 || (r < 0 && errno != EINTR))
			return true;
		if (r < 0)
			continue;
		/* A progress note, for a person at a terminal only: a
		 * script's stderr carries errors alone. */
		if (waited == 0 && isatty(STDERR_FILENO))
			dioloop_err("umount: %s: unmounted; waiting for its "
				    "daemon to close the images", arg);
		waited += UMOUNT_EXIT_NOTICE_MS;
	}
	dioloop_err("umount: %s: unmounted, but its daemon is still closing "
		    "the images after %d s", arg, UMOUNT_EXIT_WAIT_MS / 1000);
	return false;
}

/* Close every claim, detaching nothing, and empty the array. */
static void claims_release(GArray *claims)
{
	guint i;

	for (i = 0; i < claims->len; i++)
		dioloop_loop_release(&g_array_index(
			claims, struct dioloop_loop_claim, i));
	g_array_set_size(claims, 0);
}

/* Release every claim and free the array. */
static void claims_free(GArray *claims)
{
	claims_release(claims);
	g_array_free(claims, TRUE);
}

/*
 * Claim every loop device backed by a node of the mount on dev.  true
 * with claims filled in, or false after a message, nothing claimed and
 * nothing changed.
 */
static bool claim_our_loops(const char *real, dev_t dev, GArray *claims)
{
	g_autofree char *inside = g_strdup_printf("(%s/", real);
	g_autoptr(GPtrArray) devs = g_ptr_array_new_with_free_func(g_free);
	g_autoptr(GPtrArray) unknown = g_ptr_array_new_with_free_func(g_free);
	guint i;
	int ret, refused = 0;

	ret = dioloop_loops_backed_by(dev, devs, unknown);
	if (ret < 0) {
		dioloop_err("umount: %s: cannot list loop devices: %s", real,
			    g_strerror(-ret));
		return false;
	}
	/* Without root the loop devices cannot be asked, nor detached: one
	 * that names a path in the mount may hold a node. */
	for (i = 0; i < unknown->len; i++) {
		const char *u = unknown->pdata[i];

		if (geteuid() != 0 && strstr(u, inside)) {
			dioloop_err("umount: %s: may hold a node; only root can "
				    "check and detach it", u);
			refused++;
		}
	}
	for (i = 0; !refused && i < devs->len; i++) {
		struct dioloop_loop_claim c = { .fd = -1 };

		ret = dioloop_loop_claim(devs->pdata[i], dev, &c);
		if (ret == -ESTALE || ret == -ENXIO)
			continue;	/* detached or rebound meanwhile */
		if (ret < 0) {
			dioloop_err("umount: %s: %s", (char *)devs->pdata[i],
				    ret == -EBUSY ? "in use (is a file system "
				    "on it mounted?)" : g_strerror(-ret));
			refused++;
			continue;
		}
		g_array_append_val(claims, c);
	}
	if (!refused)
		return true;
	claims_release(claims);
	return false;
}

/*
 * fsync every node that opens: the number that failed to flush.  A node
 * that cannot be opened (another daemon serves its image, a broken
 * image: EUCLEAN, EIO) has nothing of ours to flush and does not stop
 * the unmount.  A remote node (nfs://, rbd://: any URL source) whose
 * flush fails, its server gone or refusing this client, counts in *lost
 * instead: the unmount goes on, as retrying would not help.
 */
static int flush_nodes(const char *real, int mfd, bool remote, int *lost)
{
	int dfd = openat(mfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	int failed = 0;

	if (!dir && dfd >= 0)
		close(dfd);
	while (dir && (de = readdir(dir))) {
		const char *name = de->d_name;
		g_autofree char *path = NULL;
		int fd;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		path = g_build_filename(real, name, NULL);
		fd = openat(mfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0) {
			if (errno != EBUSY && errno != ENOENT)
				dioloop_err("umount: %s: not flushed: cannot "
					    "open it (%s); unmounting anyway",
					    path, g_strerror(errno));
			continue;
		}
		if (fsync(fd) < 0) {
			int e = errno;

			if (remote) {
				dioloop_err("umount: %s: flush: %s (a remote "
					    "image whose server does not take "
					    "it: unmounting anyway; writes not "
					    "on the server yet are lost)", path,
					    g_strerror(e));
				(*lost)++;
			} else {
				dioloop_err("umount: %s: flush: %s", path,
					    g_strerror(e));
				failed++;
			}
		}
		close(fd);
	}
	if (dir)
		closedir(dir);
	return failed;
}

/* Detach every claimed device: the number that would not let go. */
static int detach_claimed(GArray *claims)
{
	guint i;
	int failed = 0;

	for (i = 0; i < claims->len; i++) {
		struct dioloop_loop_claim *c =
			&g_array_index(claims, struct dioloop_loop_claim, i);
		g_autofree char *dev = g_strdup(c->dev);
		int ret = dioloop_loop_detach_claimed(c,
						      UMOUNT_DETACH_TIMEOUT_MS);

		if (ret < 0) {
			dioloop_err("umount: %s: %s", dev,
				    ret == -EBUSY ? "still open in another "
				    "process: left attached" : g_strerror(-ret));
			failed++;
		}
	}
	return failed;
}

static bool fusermount_unmount(const char *real);

/*
 * Unmount the mount named base in the directory pfd holds, if it is
 * still the mount on dev: true, or false after a message.  Root does it
 * itself, in that directory and without following a symlink; others ask
 * fusermount3, which unmounts only a mount of theirs.
 */
static bool unmount_at(const char *real, int pfd, const char *base, dev_t dev)
{
	struct stat st;
	int cwd, ret = 0, err = 0;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    st.st_dev != dev) {
		dioloop_err("umount: %s is no longer the dioloop mount: not "
			    "unmounted", real);
		return false;
	}
	if (geteuid() != 0)
		return fusermount_unmount(real);
	cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fchdir(pfd) < 0 || umount2(base, UMOUNT_NOFOLLOW) < 0) {
		err = errno;
		ret = -1;
	}
	if (cwd >= 0) {
		if (fchdir(cwd) < 0)
			err = err ? err : errno;
		close(cwd);
	}
	if (ret < 0) {
		dioloop_err("umount: %s: %s", real, g_strerror(err));
		return false;
	}
	return true;
}

/* fusermount3 -u real: true, or false after a message. */
static bool fusermount_unmount(const char *real)
{
	char *argv[] = { "fusermount3", "-u", (char *)real, NULL };
	GError *err = NULL;
	int status = 0;

	if (!g_spawn_sync(NULL, argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
			  NULL, NULL, &status, &err)) {
		dioloop_err("umount: fusermount3: %s", err->message);
		g_error_free(err);
		return false;
	}
	if (!g_spawn_check_wait_status(status, NULL)) {
		dioloop_err("umount: %s: fusermount3 -u failed", real);
		return false;
	}
	return true;
}

/* Claim, flush, detach, unmount (closing mfd, the mount's root): an exit
 * status; *unmounted tells whether the unmount itself was done. */
static int umount_mount(const char *real, int pfd, const char *base, int mfd,
			dev_t dev, bool remote, bool *unmounted)
{
	int lost = 0;
	GArray *claims;
	int ret;

	claims = g_array_new(FALSE, TRUE, sizeof(struct dioloop_loop_claim));
	if (!claim_our_loops(real, dev, claims)) {
		close(mfd);
		claims_free(claims);
		return DIOLOOP_EXIT_FAIL;
	}
	/* Make every node durable before the daemon goes away; a failure
	 * leaves the loop devices attached, as they were.  Then let go of
	 * the mount's root, which would keep it busy. */
	ret = flush_nodes(real, mfd, remote, &lost);
	close(mfd);
	if (ret) {
		claims_free(claims);
		return DIOLOOP_EXIT_FAIL;
	}
	ret = detach_claimed(claims);
	claims_free(claims);
	if (ret)
		return DIOLOOP_EXIT_FAIL;
	if (!unmount_at(real, pfd, base, dev))
		return DIOLOOP_EXIT_FAIL;
	*unmounted = true;
	return lost ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
}

int dioloop_cmd_umount(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	g_autofree char *real = NULL, *parent = NULL, *base = NULL;
	bool remote = false, unmounted = false;
	int ret, pidfd = -1, pfd, mfd;
	dev_t dev = 0;

	if (!dioloop_parse_args("umount", "MOUNTPOINT",
				"Flush every node, detach its loop devices and "
				"unmount.  Only a dioloop mount.", entries,
				&argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("umount: expected one MOUNTPOINT, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	real = realpath(argv[1], NULL);
	if (!real) {
		dioloop_err("umount: %s: %s", argv[1], g_strerror(errno));
		return DIOLOOP_EXIT_USAGE;
	}
	/* From here on, the directory that holds the mount point and the
	 * mount's root: not the path, whose directories may be renamed. */
	parent = g_path_get_dirname(real);
	base = g_path_get_basename(real);
	pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		mfd = -errno;
	else if (!strcmp(real, "/"))
		mfd = -EINVAL;
	else if ((mfd = openat(pfd, base, O_RDONLY | O_DIRECTORY |
				O_NOFOLLOW | O_CLOEXEC)) < 0)
		mfd = -errno;
	if (!is_dioloop_mount(argv[1], real, mfd, &dev, &remote, &pidfd)) {
		if (mfd >= 0)
			close(mfd);
		if (pfd >= 0)
			close(pfd);
		return DIOLOOP_EXIT_USAGE;
	}
	ret = umount_mount(real, pfd, base, mfd, dev, remote, &unmounted);
	close(pfd);
	if (unmounted && !wait_daemon_exit(argv[1], pidfd, dev))
		ret = DIOLOOP_EXIT_FAIL;
	if (pidfd >= 0)
		close(pidfd);
	return ret;
}
