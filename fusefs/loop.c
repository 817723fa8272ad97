/* SPDX-License-Identifier: MIT */
#include "fusefs/loop.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define LOOP_ATTACH_TRIES 8

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

int dioloop_loop_detach(const char *dev, unsigned timeout_ms)
{
	const char *name = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	unsigned waited = 0;
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
	for (;;) {
		g_autofree char *backing = loop_sysfs(name, "backing_file");

		if (!backing)
			return 0;
		if (waited >= timeout_ms)
			return -EBUSY;
		g_usleep(20 * 1000);
		waited += 20;
	}
}

char **dioloop_loops_under(const char *dir)
{
	GPtrArray *out = g_ptr_array_new();
	char *real = realpath(dir, NULL);
	g_autofree char *prefix = g_strconcat(real ? real : dir, "/", NULL);
	GDir *sys = g_dir_open("/sys/block", 0, NULL);
	const char *name;

	free(real);
	while (sys && (name = g_dir_read_name(sys))) {
		g_autofree char *backing = NULL;

		if (strncmp(name, "loop", 4) != 0)
			continue;
		backing = loop_sysfs(name, "backing_file");
		if (backing && g_str_has_prefix(backing, prefix))
			g_ptr_array_add(out, g_strdup_printf("/dev/%s", name));
	}
	if (sys)
		g_dir_close(sys);
	g_ptr_array_add(out, NULL);
	return (char **)g_ptr_array_free(out, FALSE);
}
