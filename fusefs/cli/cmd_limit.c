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

#include "fusefs/cli/commands.h"
#include "fusefs/control.h"
#include "fusefs/cli/control_client.h"
#include "fusefs/spec.h"

/* dioloop limit MOUNTPOINT[/NODE] [KEY=VALUE...] */
int dioloop_cmd_limit(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	struct dioloop_limit_update u = { 0 };
	struct dioloop_ctl_target t;
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
	if (!dioloop_ctl_resolve("limit", argv[1], &t))
		return DIOLOOP_EXIT_USAGE;
	if (t.node && (u.mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS))) {
		dioloop_err("limit: total_bps is mount-wide: give the mount "
			    "point, not the node %s", t.node);
		dioloop_ctl_target_clear(&t);
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
	ret = dioloop_ctl_run("limit", &t, line->str);
	g_string_free(line, TRUE);
	dioloop_ctl_target_clear(&t);
	return ret;
}

/* dioloop fault MOUNTPOINT/NODE [RULE...|off] */
int dioloop_cmd_fault(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	g_autoptr(GPtrArray) words = g_ptr_array_new_with_free_func(g_free);
	g_autofree char *err = NULL, *q = NULL;
	struct fault_rule r;
	struct dioloop_ctl_target t;
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
	if (!dioloop_ctl_resolve("fault", argv[1], &t))
		return DIOLOOP_EXIT_USAGE;
	if (!t.node) {
		dioloop_err("fault: %s is a mount point: give one of its nodes "
			    "(MOUNTPOINT/NODE)", argv[1]);
		dioloop_ctl_target_clear(&t);
		return DIOLOOP_EXIT_USAGE;
	}
	q = g_shell_quote(t.node);
	line = g_string_new(NULL);
	g_string_append_printf(line, "fault %s", q);
	for (i = 0; i < (int)words->len; i++)
		g_string_append_printf(line, " %s",
				       (const char *)words->pdata[i]);
	g_string_append_c(line, '\n');
	ret = dioloop_ctl_run("fault", &t, line->str);
	g_string_free(line, TRUE);
	dioloop_ctl_target_clear(&t);
	return ret;
}
