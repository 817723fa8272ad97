/* SPDX-License-Identifier: MIT */
#include "fusefs/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define LOOP_ATTACH_TRIES 8

/* The st_dev of a file from the kernel's encoding of lo_device
 * (huge_encode_dev: minor bits 0-7 and 20-31, major bits 8-19). */
static dev_t loop_decode_dev(uint64_t v)
{
	return makedev((unsigned)((v & 0xfff00) >> 8),
		       (unsigned)((v & 0xff) | ((v >> 12) & 0xfff00)));
}

/* Read /sys/block/NAME/loop/ATTR without its newline; NULL if absent. */
static char *loop_sysfs(const char *name, const char *attr)
{
	g_autofree char *path = g_strdup_printf("/sys/block/%s/loop/%s", name,
						attr);
	char *text = NULL;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return NULL;
	g_strchomp(text);
	return text;
}

int dioloop_loop_attach(const char *path, bool readonly, char **dev,
			bool *dio)
{
	int ctl, ffd, ret = -EBUSY, tries;

	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	ffd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_DIRECT | O_CLOEXEC);
	if (ffd < 0) {
		ret = -errno;
		close(ctl);
		return ret;
	}
	/* Another process may take the free device between GET_FREE and
	 * CONFIGURE: try the next one. */
	for (tries = 0; tries < LOOP_ATTACH_TRIES && ret == -EBUSY; tries++) {
		struct loop_config cfg;
		char name[32];
		int n, lfd;

		n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			ret = -errno;
			break;
		}
		snprintf(name, sizeof(name), "/dev/loop%d", n);
		lfd = open(name, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (lfd < 0) {
			ret = -errno;
			if (ret == -ENOENT || ret == -ENXIO)
				ret = -EBUSY;
			continue;
		}
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned int)ffd;
		cfg.info.lo_flags = LO_FLAGS_DIRECT_IO |
				    (readonly ? LO_FLAGS_READ_ONLY : 0);
		g_strlcpy((char *)cfg.info.lo_file_name, path, LO_NAME_SIZE);
		ret = ioctl(lfd, LOOP_CONFIGURE, &cfg) < 0 ? -errno : 0;
		close(lfd);
		if (ret == 0) {
			g_autofree char *d = loop_sysfs(name + 5, "dio");

			*dev = g_strdup(name);
			*dio = d && d[0] == '1';
		}
	}
	close(ffd);
	close(ctl);
	return ret;
}

/* Wait until loop device name has let go of its file: 0, or -EBUSY
 * after timeout_ms. */
static int loop_wait_detached(const char *name, unsigned timeout_ms)
{
	unsigned waited = 0;

	for (;;) {
		g_autofree char *backing = loop_sysfs(name, "backing_file");

		if (!backing)
			return 0;
		if (waited >= timeout_ms)
			return -EBUSY;
		g_usleep(10 * 1000);
		waited += 10;
	}
}

int dioloop_loop_detach(const char *dev, unsigned timeout_ms)
{
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	int fd, ret = 0;

	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_CLR_FD, 0) < 0 && errno != ENXIO)
		ret = -errno;
	close(fd);
	if (ret < 0)
		return ret;
	/* While something else holds the device the kernel only marks it
	 * for detach at last close. */
	return loop_wait_detached(name, timeout_ms);
}

int dioloop_loop_backing(const char *dev, dev_t *fsdev, ino_t *ino)
{
	struct loop_info64 info;
	int fd, ret = 0;

	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
		ret = -errno;
	close(fd);
	if (ret < 0)
		return ret;
	*fsdev = loop_decode_dev(info.lo_device);
	*ino = (ino_t)info.lo_inode;
	return 0;
}

int dioloop_loops_backed_by(dev_t fsdev, GPtrArray *devs, GPtrArray *unknown)
{
	GDir *sys = g_dir_open("/sys/block", 0, NULL);
	const char *name;

	if (!sys)
		return -errno;
	while ((name = g_dir_read_name(sys))) {
		g_autofree char *dev = NULL, *backing = NULL;
		dev_t d;
		ino_t ino;
		int ret;

		if (strncmp(name, "loop", 4) != 0)
			continue;
		/* Unbound devices have no loop/ attributes: skip them
		 * without opening them. */
		backing = loop_sysfs(name, "backing_file");
		if (!backing)
			continue;
		dev = g_strdup_printf("/dev/%s", name);
		ret = dioloop_loop_backing(dev, &d, &ino);
		if (ret == 0 && d == fsdev)
			g_ptr_array_add(devs, g_steal_pointer(&dev));
		else if (ret < 0 && ret != -ENXIO && ret != -ENOENT)
			g_ptr_array_add(unknown, g_strdup_printf(
				"%s (%s): %s", dev, backing,
				g_strerror(-ret)));
	}
	g_dir_close(sys);
	return 0;
}

int dioloop_loop_claim(const char *dev, dev_t fsdev,
		       struct dioloop_loop_claim *c)
{
	struct loop_info64 info;
	int fd, ret;

	/* O_EXCL on a block device fails with EBUSY while a file system,
	 * a device mapper target or another exclusive opener holds it, and
	 * keeps new ones away until released. */
	fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* Rebound to another file since it was found: not ours. */
	if (loop_decode_dev(info.lo_device) != fsdev) {
		close(fd);
		return -ESTALE;
	}
	c->dev = g_strdup(dev);
	c->fd = fd;
	c->flags = info.lo_flags;
	return 0;
}

void dioloop_loop_release(struct dioloop_loop_claim *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	g_clear_pointer(&c->dev, g_free);
}

/* Put back dev's LO_FLAGS_AUTOCLEAR as it was before LOOP_CLR_FD set it:
 * 0 or -errno. */
static int loop_restore_autoclear(const char *dev, uint32_t flags)
{
	struct loop_info64 info;
	int fd, ret = 0;

	if (flags & LO_FLAGS_AUTOCLEAR)
		return 0;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_GET_STATUS64, &info) < 0) {
		ret = -errno;
	} else {
		info.lo_flags &= ~(uint32_t)LO_FLAGS_AUTOCLEAR;
		if (ioctl(fd, LOOP_SET_STATUS64, &info) < 0)
			ret = -errno;
	}
	close(fd);
	/* Detached meanwhile (the last other user closed it): done. */
	return ret == -ENXIO ? 0 : ret;
}

int dioloop_loop_detach_claimed(struct dioloop_loop_claim *c,
				unsigned timeout_ms)
{
	const char *name = strrchr(c->dev, '/') + 1;
	int ret = 0;

	if (ioctl(c->fd, LOOP_CLR_FD, 0) < 0 && errno != ENXIO)
		ret = -errno;
	/* The kernel lets go of the file at the last close, which is ours
	 * unless another process holds the device open. */
	close(c->fd);
	c->fd = -1;
	if (ret < 0)
		return ret;
	if (loop_wait_detached(name, timeout_ms) == 0)
		return 0;
	/* Still open elsewhere: leave it attached as it was, not marked to
	 * detach whenever that user closes it. */
	ret = loop_restore_autoclear(c->dev, c->flags);
	if (ret < 0)
		g_warning("%s: cannot clear the autoclear flag again: %s",
			  c->dev, g_strerror(-ret));
	return -EBUSY;
}
