/* SPDX-License-Identifier: MIT */
/* Sidecar files beside images, created and read as hostile (sidecar.h). */
#include "backends/sidecar.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/iorec.h"

#define SIDECAR_MODE 0600

/* Empty the file open as fd, durably. */
static void sidecar_void_fd(int fd)
{
	if (dioloop_iorec_ftruncate(fd, 0) == 0)
		dioloop_iorec_fsync(fd);
}

/* Open name in dirfd to void it later: an fd when it is the file ours
 * names, else -1. */
static int sidecar_open_ours(int dirfd, const char *name,
			     const struct sidecar_id *ours)
{
	struct stat st;
	int fd;

	if (!ours || (!ours->dev && !ours->ino))
		return -1;
	fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC | O_NOCTTY);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
			(uint64_t)st.st_dev != ours->dev ||
			(uint64_t)st.st_ino != ours->ino)) {
		close(fd);
		return -1;
	}
	return fd;
}

void sidecar_id_of(const struct stat *st, struct sidecar_id *id)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
}

int sidecar_remove(int dirfd, const char *name, const struct sidecar_id *ours)
{
	int fd = sidecar_open_ours(dirfd, name, ours);

	if (fd >= 0) {
		sidecar_void_fd(fd);
		close(fd);
	}
	if (dioloop_iorec_unlinkat(dirfd, name, 0) < 0)
		return -errno;
	return 0;
}

int sidecar_create(int dirfd, const char *name)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
		    O_NOCTTY;
	int fd;

	fd = openat(dirfd, name, flags, SIDECAR_MODE);
	if (fd < 0 && errno == EEXIST) {
		/* Ours left by a crash, or planted: the entry goes (a
		 * symlink is removed, not followed), nothing is written. */
		/* Not ours to void: only the name goes. */
		if (dioloop_iorec_unlinkat(dirfd, name, 0) < 0 &&
		    errno != ENOENT)
			return -errno;
		fd = openat(dirfd, name, flags, SIDECAR_MODE);
	}
	if (fd < 0)
		return -errno;
	/* A power-cut recorder sees the new file before it is written. */
	dioloop_iorec_created(dirfd, name, fd);
	/* The umask may have taken bits away; the mode is part of what
	 * makes a sidecar ours. */
	if (fchmod(fd, SIDECAR_MODE) < 0) {
		int err = -errno;

		close(fd);
		dioloop_iorec_unlinkat(dirfd, name, 0);
		return err;
	}
	return fd;
}

const char *sidecar_untrusted_reason(const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return "not a regular file";
	if (st->st_uid != geteuid())
		return "not owned by the daemon's user";
	if ((st->st_mode & 07777) != SIDECAR_MODE)
		return "its mode is not 0600";
	if (st->st_nlink != 1)
		return "it has other hard links";
	return NULL;
}

/* Fail with err, *error saying why (its text, or err's). */
static int sidecar_fail(GError **error, int err, const char *why)
{
	g_set_error_literal(error, BACKEND_ERROR, -err,
			    why ? why : g_strerror(-err));
	return err;
}

int sidecar_open_trusted(int dirfd, const char *name, GError **error)
{
	const char *why;
	struct stat st;
	int fd;

	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ELOOP)
			return sidecar_fail(error, -EPERM, "a symlink");
		return sidecar_fail(error, -errno, NULL);
	}
	if (fstat(fd, &st) < 0) {
		int err = -errno;

		close(fd);
		return sidecar_fail(error, err, NULL);
	}
	why = sidecar_untrusted_reason(&st);
	if (why) {
		close(fd);
		return sidecar_fail(error, -EPERM, why);
	}
	return fd;
}

ssize_t sidecar_read(int dirfd, const char *name, char *buf, size_t len,
		     GError **error)
{
	ssize_t n;
	int fd = sidecar_open_trusted(dirfd, name, error);

	if (fd < 0)
		return fd;
	do {
		n = pread(fd, buf, len - 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		n = sidecar_fail(error, -errno, NULL);
	else
		buf[n] = '\0';
	close(fd);
	return n;
}

int sidecar_replace(int dirfd, const char *name, const void *buf,
		    size_t len, struct sidecar_id *ours)
{
	struct stat st;
	g_autofree char *tmp = g_strdup_printf("%s.tmp", name);
	ssize_t n;
	int fd, old, err = 0;

	fd = sidecar_create(dirfd, tmp);
	if (fd < 0)
		return fd;
	do {
		n = dioloop_iorec_pwrite(fd, buf, len, 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)len)
		err = n < 0 ? -errno : -ENOSPC;
	else if (dioloop_iorec_fsync(fd) < 0 || fstat(fd, &st) < 0)
		err = -errno;
	close(fd);
	/* The file the rename replaces, if ours: voided once replaced. */
	old = err ? -1 : sidecar_open_ours(dirfd, name, ours);
	if (!err && dioloop_iorec_renameat(dirfd, tmp, dirfd, name) < 0)
		err = -errno;
	if (!err && dioloop_iorec_fsync(dirfd) < 0)
		err = -errno;
	if (old >= 0) {
		if (!err)
			sidecar_void_fd(old);
		close(old);
	}
	if (err) {
		dioloop_iorec_unlinkat(dirfd, tmp, 0);
		return err;
	}
	if (ours)
		sidecar_id_of(&st, ours);
	return 0;
}
