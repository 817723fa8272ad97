/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount --loop: one loop device with direct I/O per node,
 * attached while the FUSE loop serves the opens, detached before the
 * mount goes (only those still ours).
 */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fusefs/cli/mount.h"
#include "fusefs/loop.h"

/* Detach every loop device we attached; the FUSE loop must be serving. */
void mount_detach_loops(struct mount_state *ms)
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

/* With --loop: attach one loop device per node and print it.  Runs while
 * the FUSE loop serves the opens.  Then reports readiness. */
gpointer mount_starter_thread(gpointer data)
{
	struct mount_state *ms = data;
	GDir *dir;
	const char *name;
	int failed = 0;

	if (!ms->attach_loops) {
		mount_report_status(ms, 0);
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
		mount_report_status(ms, 1);
		mount_stop(ms);
		return NULL;
	}
	mount_report_status(ms, 0);
	return NULL;
}
