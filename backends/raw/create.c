/* SPDX-License-Identifier: MIT */
/* The raw backend's probe and create: a raw image is a plain file. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/raw/create.h"

int raw_probe(const struct backend_probe_args *p)
{
	struct stat st;

	return p->fd >= 0 && fstat(p->fd, &st) == 0 && S_ISREG(st.st_mode) ? 1 : 0;
}

int raw_create(const struct backend_create_args *a, GError **error)
{
	int fd, ret = 0;

	if (a->checksum)
		return backend_set_error(error, -EINVAL,
					 "%s: raw images have no checksums",
					 a->path);
	if (a->size > (uint64_t)INT64_MAX)
		return backend_set_error(error, -EFBIG, "%s: %s", a->path,
					 g_strerror(EFBIG));
	/* O_EXCL never follows a symlink; O_NOFOLLOW says so. */
	fd = open(a->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  a->mode ? a->mode : 0644);
	if (fd < 0)
		return backend_set_error(error, -errno, "%s: %s", a->path,
					 g_strerror(errno));
	if (ftruncate(fd, (off_t)a->size) < 0 || fsync(fd) < 0 ||
	    (a->created && fstat(fd, a->created) < 0))
		ret = -errno;
	close(fd);
	if (ret < 0) {
		unlink(a->path);
		return backend_set_error(error, ret, "%s: %s", a->path,
					 g_strerror(-ret));
	}
	return 0;
}
