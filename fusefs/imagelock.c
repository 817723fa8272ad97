/* SPDX-License-Identifier: MIT */
/*
 * Image locks: an image is served by one daemon at a time.  Each served
 * image holds an OFD lock on the whole file (fcntl F_OFD_SETLK): a write
 * lock when the node is read-write, a read lock when it is read-only, so
 * several daemons may serve one image read-only but never one read-write
 * beside any other.  OFD locks belong to the open file description, so
 * they survive no crash (the kernel drops them with the last fd) and do
 * not vanish when some other fd of the same file is closed, as POSIX
 * locks would.
 *
 * Who holds it: OFD locks do not report their owner (F_OFD_GETLK gives
 * l_pid -1), so on a conflict we look through /proc for an fd on the
 * same inode whose fdinfo lists a lock; that names the process when it
 * is visible to us (same user or root), else the message says so.
 *
 * Threads: whoever opens a node (FUSE worker, worker pool, start-up);
 * the lock table itself is in nodes.c under fs->lock.
 */
#include "fusefs/imagelock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"

#define HOLDER_CMDLINE_MAX 240

/* True if /proc/PID/fdinfo/FD lists a lock taken through that fd. */
static bool fd_has_lock(const char *pid, const char *fd)
{
	g_autofree char *path = g_strdup_printf("/proc/%s/fdinfo/%s", pid, fd);
	g_autofree char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return false;
	return strstr(text, "\nlock:") != NULL;
}

/* "1234 (dioloop mount -f /src /mnt)": the command line, spaced. */
static char *describe_process(const char *pid)
{
	g_autofree char *path = g_strdup_printf("/proc/%s/cmdline", pid);
	g_autofree char *cmd = NULL;
	gsize len = 0, i;

	if (!g_file_get_contents(path, &cmd, &len, NULL) || !len)
		return g_strdup_printf("process %s", pid);
	for (i = 0; i + 1 < len; i++)
		if (cmd[i] == '\0')
			cmd[i] = ' ';
	if (len > HOLDER_CMDLINE_MAX)
		strcpy(cmd + HOLDER_CMDLINE_MAX - 3, "...");
	return g_strdup_printf("process %s (%s)", pid, cmd);
}

/* The process (other than us) holding a lock on the file st describes,
 * described for the user, or NULL. */
static char *find_holder(const struct stat *st)
{
	char self[24];
	struct dirent *pe;
	DIR *proc = opendir("/proc");
	char *found = NULL;

	if (!proc)
		return NULL;
	snprintf(self, sizeof(self), "%d", (int)getpid());
	while (!found && (pe = readdir(proc))) {
		g_autofree char *fddir = NULL;
		struct dirent *fe;
		DIR *fds;

		if (!g_ascii_isdigit(pe->d_name[0]) || !strcmp(pe->d_name, self))
			continue;
		fddir = g_strdup_printf("/proc/%s/fd", pe->d_name);
		fds = opendir(fddir);
		if (!fds)
			continue;	/* gone, or not ours to see */
		while ((fe = readdir(fds))) {
			g_autofree char *link = NULL;
			struct stat fst;

			if (!g_ascii_isdigit(fe->d_name[0]))
				continue;
			link = g_strdup_printf("%s/%s", fddir, fe->d_name);
			if (stat(link, &fst) < 0 || fst.st_dev != st->st_dev ||
			    fst.st_ino != st->st_ino)
				continue;
			if (fd_has_lock(pe->d_name, fe->d_name)) {
				found = describe_process(pe->d_name);
				break;
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return found;
}

/* Take the image's OFD lock (imagelock.h).  Whoever opens the node. */
int dioloop_image_lock(int path_fd, const char *name, bool *readonly,
		       int *fd_out, char **holder)
{
	struct flock fl = { .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	struct stat st;
	int fd = -1;

	*fd_out = -1;
	*holder = NULL;
	if (!*readonly) {
		fd = backend_reopen_fd(path_fd, O_RDWR);
		if (fd < 0 && fd != -EACCES && fd != -EROFS && fd != -EPERM)
			return fd;
		if (fd < 0)
			*readonly = true;	/* serve it read-only */
	}
	if (fd < 0) {
		fd = backend_reopen_fd(path_fd, O_RDONLY);
		if (fd < 0)
			return fd;
	}
	fl.l_type = *readonly ? F_RDLCK : F_WRLCK;
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
		*fd_out = fd;
		return 0;
	}
	if (errno == ENOLCK || errno == EINVAL || errno == EOPNOTSUPP) {
		/* A host file system without locks (some NFS or FUSE
		 * mounts): serve, but say what is not guaranteed. */
		g_warning("%s: cannot lock the image (%s): served without the "
			  "one-daemon-per-image check", name, g_strerror(errno));
		*fd_out = fd;
		return 0;
	}
	if (errno != EAGAIN && errno != EACCES) {
		int err = -errno;

		close(fd);
		return err;
	}
	if (fstat(fd, &st) == 0)
		*holder = find_holder(&st);
	if (!*holder)
		*holder = g_strdup("another process (not visible from here)");
	close(fd);
	return -EBUSY;
}

/* Take the lock of the image at path (a command on a local file). */
int dioloop_image_lock_path(const char *path, bool *readonly, int *fd_out,
			    char **holder)
{
	int fd = open(path, O_PATH | O_CLOEXEC), ret;

	*fd_out = -1;
	*holder = NULL;
	if (fd < 0)
		return -errno;
	ret = dioloop_image_lock(fd, path, readonly, fd_out, holder);
	close(fd);
	return ret;
}
