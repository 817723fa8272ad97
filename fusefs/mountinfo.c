/* SPDX-License-Identifier: MIT */
/* Reading /proc/self/mountinfo (mountinfo.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "fusefs/mountinfo.h"

void dioloop_mountinfo_unescape(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
					(s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

bool dioloop_mountinfo_parse(const char *line, struct dioloop_mountinfo *m)
{
	g_auto(GStrv) f = g_strsplit(line, " ", -1);
	guint n = g_strv_length(f), sep;
	unsigned int maj, min;

	if (n < 7 || sscanf(f[2], "%u:%u", &maj, &min) != 2)
		return false;
	/* Optional tags end at the "-" before TYPE. */
	for (sep = 6; sep < n && strcmp(f[sep], "-"); sep++)
		;
	if (sep + 2 >= n)
		return false;
	dioloop_mountinfo_unescape(f[4]);
	dioloop_mountinfo_unescape(f[sep + 2]);
	m->dev = makedev(maj, min);
	m->mountpoint = g_strdup(f[4]);
	m->fstype = g_strdup(f[sep + 1]);
	m->source = g_strdup(f[sep + 2]);
	m->owner = -1;
	/* The kernel's super options: a FUSE mount names who made it. */
	if (sep + 3 < n) {
		g_auto(GStrv) opts = g_strsplit(f[sep + 3], ",", -1);
		guint i;

		for (i = 0; opts[i]; i++) {
			unsigned long long v;
			char end;

			if (sscanf(opts[i], "user_id=%llu%c", &v, &end) == 1 &&
			    v <= (unsigned long long)UINT32_MAX)
				m->owner = (long long)v;
		}
	}
	return true;
}

int dioloop_proc_start_ticks(pid_t pid, unsigned long long *ticks)
{
	g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
	g_autofree char *text = NULL;
	char *p;
	int field;

	if (!g_file_get_contents(path, &text, NULL, NULL))
		return -ESRCH;
	/* The name (field 2) is in parentheses and may hold anything:
	 * count the fields after its last ')'; each space found is the one
	 * before field + 1. */
	p = strrchr(text, ')');
	if (!p)
		return -EINVAL;
	for (field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	if (sscanf(p + 1, "%llu", ticks) != 1)
		return -EINVAL;
	return 0;
}

void dioloop_mountinfo_clear(struct dioloop_mountinfo *m)
{
	g_clear_pointer(&m->mountpoint, g_free);
	g_clear_pointer(&m->fstype, g_free);
	g_clear_pointer(&m->source, g_free);
}

static void mountinfo_clear_element(void *m)
{
	dioloop_mountinfo_clear(m);
}

GArray *dioloop_mountinfo_read(void)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	GArray *mounts;
	char **l;

	if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
		return NULL;
	mounts = g_array_new(FALSE, FALSE, sizeof(struct dioloop_mountinfo));
	g_array_set_clear_func(mounts, mountinfo_clear_element);
	lines = g_strsplit(text, "\n", -1);
	for (l = lines; *l; l++) {
		struct dioloop_mountinfo m;

		if (dioloop_mountinfo_parse(*l, &m))
			g_array_append_val(mounts, m);
	}
	return mounts;
}
