/* SPDX-License-Identifier: MIT */
/*
 * dioloop limit / dioloop fault: change a running mount through its
 * control file MOUNTPOINT/.dioloop/ctl (control.h).  Arguments are checked
 * here with the daemon's own parser first, so a mistake gets a one-line
 * message and exit status 2 before anything is sent.  A command-line
 * process: one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fusefs/commands.h"
#include "fusefs/control.h"
#include "fusefs/spec.h"

#define CTL_REPLY_MAX (64 * 1024)

/* What a MOUNTPOINT[/NODE] argument names. */
struct ctl_target {
	char *ctl;			/* MOUNTPOINT/.dioloop/ctl */
	char *node;			/* NULL: the mount itself */
};

/* Free what resolve_target filled in. */
static void ctl_target_clear(struct ctl_target *t)
{
	g_free(t->ctl);
	g_free(t->node);
}

/* The ctl file of a dioloop mount at dir, or NULL. */
static char *ctl_of(const char *dir)
{
	char *ctl = g_build_filename(dir, DIOLOOP_CTL_DIR, "ctl", NULL);
	struct stat st;

	if (stat(ctl, &st) == 0 && S_ISREG(st.st_mode))
		return ctl;
	g_free(ctl);
	return NULL;
}

/* Resolve arg to a mount or a node: true, or false after a message. */
static bool resolve_target(const char *cmd, const char *arg,
			   struct ctl_target *t)
{
	g_autofree char *real = realpath(arg, NULL);
	g_autofree char *dir = NULL;
	struct stat st;

	*t = (struct ctl_target){ 0 };
	if (!real || stat(real, &st) < 0) {
		dioloop_err("%s: %s: %s", cmd, arg, g_strerror(errno));
		return false;
	}
	if (S_ISDIR(st.st_mode)) {
		t->ctl = ctl_of(real);
	} else {
		dir = g_path_get_dirname(real);
		t->ctl = ctl_of(dir);
		if (t->ctl)
			t->node = g_path_get_basename(real);
	}
	if (!t->ctl) {
		dioloop_err("%s: %s is neither a dioloop mount point nor a node "
			    "in one", cmd, arg);
		return false;
	}
	return true;
}

/* Send one command line; 0 or -errno, the daemon's reply in reply. */
static int ctl_send(const char *ctl, const char *line, GString *reply)
{
	char buf[4096];
	ssize_t n;
	off_t off = 0;
	int fd = open(ctl, O_RDWR | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, line, strlen(line), 0) < 0)
		ret = -errno;
	while (reply->len < CTL_REPLY_MAX &&
	       (n = pread(fd, buf, sizeof(buf), off)) > 0) {
		g_string_append_len(reply, buf, n);
		off += n;
	}
	close(fd);
	return ret;
}

/* Send, print the reply; the exit status. */
static int ctl_run(const char *cmd, const struct ctl_target *t,
		   const char *line)
{
	g_autoptr(GString) reply = g_string_new(NULL);
	int ret = ctl_send(t->ctl, line, reply);

	if (ret < 0) {
		g_strchomp(reply->str);
		if (reply->str[0])
			dioloop_err("%s", reply->str);
		else
			dioloop_err("%s: %s: %s", cmd, t->ctl, g_strerror(-ret));
		return ret == -EINVAL ? DIOLOOP_EXIT_USAGE : DIOLOOP_EXIT_FAIL;
	}
	fputs(reply->str, stdout);
	return DIOLOOP_EXIT_OK;
}

/* dioloop limit MOUNTPOINT[/NODE] [KEY=VALUE...] */
int dioloop_cmd_limit(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	struct dioloop_limit_update u = { 0 };
	struct ctl_target t;
	GString *line;
	int i, ret;

	if (!dioloop_parse_args("limit", "MOUNTPOINT[/NODE] [KEY=VALUE...]",
				"Show or change the I/O limits of every node of "
				"a mount, or of one node, while it is mounted.\n"
				"Keys: iops, read_iops, write_iops (requests/s), "
				"bps, read_bps, write_bps (bytes/s, K/M/G "
				"suffixes), burst_ms; on the mount point also "
				"total_bps (shared by the busy nodes).  0 or off: "
				"no limit.", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc < 2) {
		dioloop_err("limit: expected MOUNTPOINT or MOUNTPOINT/NODE");
		return DIOLOOP_EXIT_USAGE;
	}
	for (i = 2; i < argc; i++) {
		g_autofree char *err = NULL;

		if (dioloop_limit_parse(argv[i], &u, &err) < 0) {
			dioloop_err("limit: %s", err);
			return DIOLOOP_EXIT_USAGE;
		}
	}
	if (!resolve_target("limit", argv[1], &t))
		return DIOLOOP_EXIT_USAGE;
	if (t.node && (u.mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS))) {
		dioloop_err("limit: total_bps is mount-wide: give the mount "
			    "point, not the node %s", t.node);
		ctl_target_clear(&t);
		return DIOLOOP_EXIT_USAGE;
	}
	line = g_string_new("limit ");
	if (t.node) {
		g_autofree char *q = g_shell_quote(t.node);

		g_string_append(line, q);
	} else {
		g_string_append(line, "'*'");
	}
	for (i = 2; i < argc; i++)
		g_string_append_printf(line, " %s", argv[i]);
	g_string_append_c(line, '\n');
	ret = ctl_run("limit", &t, line->str);
	g_string_free(line, TRUE);
	ctl_target_clear(&t);
	return ret;
}

/* dioloop fault MOUNTPOINT/NODE [RULE...|off] */
int dioloop_cmd_fault(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	g_autoptr(GPtrArray) words = g_ptr_array_new_with_free_func(g_free);
	g_autofree char *err = NULL, *q = NULL;
	struct fault_rule r;
	struct ctl_target t;
	GString *line;
	bool off;
	int i, ret;

	if (!dioloop_parse_args("fault", "MOUNTPOINT/NODE [RULE...|off]",
				"Inject errors or latency into a node's I/O, "
				"list the rules, or clear them ('off').\n"
				"A rule: ops (read, write, flush, discard, zero, "
				"all; joined with '+'; default read+write), then "
				"error=EIO|ENOSPC, rate=FRACTION|N%, nth=N, "
				"every=N, delay=N[us|ms|s], offset=BYTES "
				"length=BYTES, seed=N.", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc < 2) {
		dioloop_err("fault: expected MOUNTPOINT/NODE");
		return DIOLOOP_EXIT_USAGE;
	}
	/* Words may come as separate arguments or in one. */
	for (i = 2; i < argc; i++) {
		g_auto(GStrv) parts = g_strsplit_set(argv[i], " \t", -1);
		char **p;

		for (p = parts; *p; p++)
			if (**p)
				g_ptr_array_add(words, g_strdup(*p));
	}
	off = words->len == 1 && !strcmp(words->pdata[0], "off");
	if (words->len && !off &&
	    dioloop_fault_parse((char **)words->pdata, (int)words->len, &r,
				&err) < 0) {
		dioloop_err("fault: %s", err);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!resolve_target("fault", argv[1], &t))
		return DIOLOOP_EXIT_USAGE;
	if (!t.node) {
		dioloop_err("fault: %s is a mount point: give one of its nodes "
			    "(MOUNTPOINT/NODE)", argv[1]);
		ctl_target_clear(&t);
		return DIOLOOP_EXIT_USAGE;
	}
	q = g_shell_quote(t.node);
	line = g_string_new(NULL);
	g_string_append_printf(line, "fault %s", q);
	for (i = 0; i < (int)words->len; i++)
		g_string_append_printf(line, " %s",
				       (const char *)words->pdata[i]);
	g_string_append_c(line, '\n');
	ret = ctl_run("fault", &t, line->str);
	g_string_free(line, TRUE);
	ctl_target_clear(&t);
	return ret;
}
