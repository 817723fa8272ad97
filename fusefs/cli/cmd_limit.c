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
#include "backends/size.h"

/* The rate keys (every key but burst_ms) set to off: "limit X off". */
static const char *const all_off[] = {
	"iops=off", "read_iops=off", "write_iops=off", "bps=off",
	"read_bps=off", "write_bps=off",
};

/* A byte rate as the command takes it: "off", the largest K/M/G/T/P
 * suffix that divides it exactly ("1536K"), or bytes. */
static void append_bytes(GString *out, uint64_t v)
{
	static const char suffix[] = "KMGTP";
	int i;

	if (!v) {
		g_string_append(out, "off");
		return;
	}
	for (i = (int)sizeof(suffix) - 2; i >= 0; i--) {
		uint64_t unit = UINT64_C(1) << (10 * (i + 1));

		if (v % unit == 0) {
			g_string_append_printf(out, "%llu%c",
					       (unsigned long long)(v / unit),
					       suffix[i]);
			return;
		}
	}
	g_string_append_printf(out, "%llu", (unsigned long long)v);
}

/*
 * The daemon's "KEY=N ..." line as people read it and the command takes
 * it back: 0 is "off", byte rates get a suffix (bps=1M).  Words that are
 * not KEY=N pass unchanged.
 */
static char *limits_human(const char *reply)
{
	g_auto(GStrv) words = g_strsplit_set(reply, " \n", -1);
	GString *out = g_string_new(NULL);
	char **w;

	for (w = words; *w; w++) {
		const char *eq = strchr(*w, '=');
		g_autofree char *key = NULL;
		uint64_t v;

		if (!**w)
			continue;
		if (out->len)
			g_string_append_c(out, ' ');
		key = eq ? g_strndup(*w, (gsize)(eq - *w)) : NULL;
		if (!key || dioloop_parse_u64(eq + 1, UINT64_MAX, &v) < 0 ||
		    !strcmp(key, "burst_ms")) {
			g_string_append(out, *w);
			continue;
		}
		g_string_append_printf(out, "%s=", key);
		if (g_str_has_suffix(key, "bps"))
			append_bytes(out, v);
		else if (v)
			g_string_append_printf(out, "%llu",
					       (unsigned long long)v);
		else
			g_string_append(out, "off");
	}
	g_string_append_c(out, '\n');
	return g_string_free(out, FALSE);
}

/* dioloop limit MOUNTPOINT[/NODE] [KEY=VALUE...|off] */
int dioloop_cmd_limit(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	struct dioloop_limit_update u = { 0 };
	g_autoptr(GPtrArray) words = g_ptr_array_new();
	g_autoptr(GString) reply = g_string_new(NULL);
	g_autofree char *shown = NULL;
	struct dioloop_ctl_target t;
	GString *line;
	guint i;
	int ret;

	if (!dioloop_parse_args("limit", "MOUNTPOINT[/NODE] [KEY=VALUE...|off]",
				"Show or change the I/O limits of every node of "
				"a mount, or of one node, while it is mounted.\n"
				"Keys: iops, read_iops, write_iops (requests/s), "
				"bps, read_bps, write_bps (bytes/s, K/M/G "
				"suffixes, fractions: 1.5M), burst_ms; on the "
				"mount point also total_bps (shared by the busy "
				"nodes).  0 or off: no limit; a lone 'off' lifts "
				"every limit.", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc < 2) {
		dioloop_err("limit: expected MOUNTPOINT or MOUNTPOINT/NODE");
		return DIOLOOP_EXIT_USAGE;
	}
	for (i = 2; i < (guint)argc; i++) {
		if (!strcmp(argv[i], "off")) {
			size_t k;

			for (k = 0; k < G_N_ELEMENTS(all_off); k++)
				g_ptr_array_add(words, (char *)all_off[k]);
		} else {
			g_ptr_array_add(words, argv[i]);
		}
	}
	for (i = 0; i < words->len; i++) {
		g_autofree char *err = NULL;

		if (dioloop_limit_parse(words->pdata[i], &u, &err) < 0) {
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
	/* "off" on the mount point lifts the shared limit too. */
	if (!t.node)
		for (i = 2; i < (guint)argc; i++)
			if (!strcmp(argv[i], "off"))
				g_ptr_array_add(words, "total_bps=off");
	line = g_string_new("limit ");
	if (t.node) {
		g_autofree char *q = g_shell_quote(t.node);

		g_string_append(line, q);
	} else {
		g_string_append(line, "'*'");
	}
	for (i = 0; i < words->len; i++)
		g_string_append_printf(line, " %s",
				       (const char *)words->pdata[i]);
	g_string_append_c(line, '\n');
	ret = dioloop_ctl_send(t.ctl, line->str, reply);
	g_string_free(line, TRUE);
	dioloop_ctl_target_clear(&t);
	if (ret < 0) {
		dioloop_err_reply("limit", "limit", reply->str, ret);
		return ret == -EINVAL ? DIOLOOP_EXIT_USAGE : DIOLOOP_EXIT_FAIL;
	}
	shown = limits_human(reply->str);
	fputs(shown, stdout);
	return DIOLOOP_EXIT_OK;
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
