/* SPDX-License-Identifier: MIT */
/*
 * dioloop migrate: move a mounted node to another image (a path or an
 * nfs:// or rbd:// URL) while it stays in use.  The daemon does the work
 * (fusefs/migrate.c); this command starts it through the mount's control
 * file, draws its progress and turns Ctrl-C into a cancel.
 *
 *   migrate NODE DEST [format=F] [bps=N] [ignore_bad_blocks] [remove_source]
 *   migrate-status NODE     STATE key=value..., [message: ...], dest: ...
 *   migrate-cancel NODE
 */
#include <errno.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/size.h"
#include "fusefs/cli/commands.h"
#include "fusefs/cli/control_client.h"
#include "fusefs/cli/progress.h"

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

static bool state_is_final(const char *state)
{
	return !strcmp(state, "done") || !strcmp(state, "failed") ||
	       !strcmp(state, "cancelled") || !strcmp(state, "idle");
}

static int send_line(const char *ctl, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

/* Send a formatted command; 0 or -errno (message printed). */
static int send_line(const char *ctl, const char *fmt, ...)
{
	g_autoptr(GString) reply = g_string_new(NULL);
	g_autofree char *line = NULL;
	va_list ap;
	int ret;

	va_start(ap, fmt);
	line = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	ret = dioloop_ctl_send(ctl, line, reply);
	if (ret < 0)
		dioloop_err_reply("migrate", NULL, reply->str, ret);
	return ret;
}

static int get_status(const char *ctl, const char *qnode,
		      struct dioloop_migrate_status *st)
{
	g_autoptr(GString) reply = g_string_new(NULL);
	int ret = dioloop_migrate_status_get(ctl, qnode, st, reply);

	if (ret < 0)
		dioloop_err_reply("migrate", "migrate-status", reply->str, ret);
	return ret;
}

/* Follow a started migration to its end: the exit status. */
static int follow(const char *ctl, const char *qnode, const char *node,
		  bool force_bar)
{
	struct dioloop_progress bar;
	struct dioloop_migrate_status st;
	bool cancel_sent = false;
	char a[32];

	dioloop_progress_begin(&bar, "migrate", DIOLOOP_PROGRESS_BYTES, 0,
			       force_bar);
	for (;;) {
		if (interrupted && !cancel_sent) {
			cancel_sent = true;
			send_line(ctl, "migrate-cancel %s\n", qnode);
		}
		if (get_status(ctl, qnode, &st) < 0) {
			dioloop_progress_end(&bar, false);
			return DIOLOOP_EXIT_FAIL;
		}
		dioloop_progress_set_total(&bar, st.total);
		dioloop_progress_update(&bar, st.done);
		if (state_is_final(st.state))
			break;
		g_usleep(100000);
	}
	dioloop_progress_end(&bar, !strcmp(st.state, "done"));
	if (!strcmp(st.state, "done")) {
		printf("%s: switched to the destination (%s copied in %llu passes; %llu ranges retried)\n",
		       node, dioloop_format_size(st.done, a, sizeof(a)),
		       (unsigned long long)st.passes,
		       (unsigned long long)st.retried);
		if (st.bad)
			printf("%s: %llu unreadable source blocks were left as holes\n",
			       node, (unsigned long long)st.bad);
		return DIOLOOP_EXIT_OK;
	}
	/* "cancelled", not "cancelled: cancelled". */
	if (!strcmp(st.message, st.state))
		st.message[0] = '\0';
	dioloop_err("migrate: %s: %s%s%s; the node stays on its source", node,
		    st.state, st.message[0] ? ": " : "", st.message);
	return DIOLOOP_EXIT_FAIL;
}

/* --status: print where the node's migration is; the exit status. */
static int print_status(const char *ctl, const char *qnode, const char *node,
			bool json)
{
	struct dioloop_migrate_status st;
	char a[32], b[32], c[32], r[32];
	bool running;

	if (get_status(ctl, qnode, &st) < 0)
		return DIOLOOP_EXIT_FAIL;
	running = !strcmp(st.state, "copying") ||
		  !strcmp(st.state, "switching");
	if (json) {
		g_autoptr(JsonBuilder) jb = json_builder_new();
		g_autoptr(JsonGenerator) gen = json_generator_new();
		g_autoptr(JsonNode) root = NULL;
		g_autofree char *text = NULL;

		json_builder_begin_object(jb);
		json_builder_set_member_name(jb, "node");
		json_builder_add_string_value(jb, node);
		json_builder_set_member_name(jb, "state");
		json_builder_add_string_value(jb, !strcmp(st.state, "done") ?
					      "switched" : st.state);
		json_builder_set_member_name(jb, "running");
		json_builder_add_boolean_value(jb, running);
		if (st.dest[0]) {
			json_builder_set_member_name(jb, "dest");
			json_builder_add_string_value(jb, st.dest);
			json_builder_set_member_name(jb, "format");
			json_builder_add_string_value(jb, st.format);
#define U(k, v) do { json_builder_set_member_name(jb, k); \
		     json_builder_add_int_value(jb, (gint64)(v)); } while (0)
			U("copied", st.done);
			U("remaining", st.total > st.done ?
				       st.total - st.done : 0);
			U("dirty", st.dirty);
			U("pass", st.passes);
			U("rate_bps", st.rate);
			U("elapsed_ms", st.elapsed_ms);
			U("ranges_retried", st.retried);
			U("bad_blocks", st.bad);
#undef U
		}
		if (st.message[0]) {
			json_builder_set_member_name(jb, "message");
			json_builder_add_string_value(jb, st.message);
		}
		json_builder_end_object(jb);
		root = json_builder_get_root(jb);
		json_generator_set_root(gen, root);
		json_generator_set_pretty(gen, TRUE);
		text = json_generator_to_data(gen, NULL);
		printf("%s\n", text);
		return DIOLOOP_EXIT_OK;
	}
	if (!strcmp(st.state, "idle") || !st.dest[0]) {
		printf("%s: no migration is running\n", node);
	} else if (running) {
		printf("%s: migrating to %s (%s): %s, pass %llu, %s of %s copied (%.0f%%), %s left, %s/s\n",
		       node, st.dest, st.format, st.state,
		       (unsigned long long)st.passes,
		       dioloop_format_size(st.done, a, sizeof(a)),
		       dioloop_format_size(st.total, b, sizeof(b)),
		       st.total ? 100.0 * (double)st.done / (double)st.total :
				  0.0,
		       dioloop_format_size(st.total > st.done ?
					   st.total - st.done : 0, c,
					   sizeof(c)),
		       dioloop_format_size(st.rate, r, sizeof(r)));
	} else if (!strcmp(st.state, "done")) {
		printf("%s: switched to %s (%s): %s copied in %llu passes; no migration is running\n",
		       node, st.dest, st.format,
		       dioloop_format_size(st.done, a, sizeof(a)),
		       (unsigned long long)st.passes);
	} else {
		if (!strcmp(st.message, st.state))
			st.message[0] = '\0';
		printf("%s: the migration to %s %s%s%s; the node stays on its source; no migration is running\n",
		       node, st.dest, !strcmp(st.state, "cancelled") ?
		       "was cancelled" : st.state,
		       st.message[0] ? ": " : "", st.message);
	}
	return DIOLOOP_EXIT_OK;
}

/* DEST as the daemon must see it: a URL, or an absolute path. */
static char *absolute_dest(const char *dest)
{
	g_autofree char *cwd = NULL;

	if (backend_is_url(dest) || g_path_is_absolute(dest))
		return g_strdup(dest);
	cwd = g_get_current_dir();
	return g_canonicalize_filename(dest, cwd);
}

int dioloop_cmd_migrate(int argc, char **argv)
{
	g_autofree char *format = NULL, *bps_arg = NULL, *dest = NULL;
	g_autofree char *qnode = NULL, *qdest = NULL;
	gboolean cancel = FALSE, remove_source = FALSE, ignore_bad = FALSE;
	gboolean progress = FALSE, detach = FALSE, status = FALSE;
	gboolean json_flag = FALSE;
	g_autofree char *output = NULL;
	bool json = false;
	GOptionEntry entries[] = {
		{ "format", 0, 0, G_OPTION_ARG_STRING, &format,
		  "destination format: raw or cow (default: the source's)",
		  "FORMAT" },
		{ "bps", 0, 0, G_OPTION_ARG_STRING, &bps_arg,
		  "copy at most RATE bytes per second (suffix K, M, G)",
		  "RATE" },
		{ "remove-source", 0, 0, G_OPTION_ARG_NONE, &remove_source,
		  "delete the source image after the switch", NULL },
		{ "ignore-bad-blocks", 0, 0, G_OPTION_ARG_NONE, &ignore_bad,
		  "leave unreadable source blocks as holes instead of stopping",
		  NULL },
		{ "cancel", 0, 0, G_OPTION_ARG_NONE, &cancel,
		  "cancel the node's running migration", NULL },
		{ "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
		  "draw the progress bar even when stderr is no terminal",
		  NULL },
		{ "detach", 0, 0, G_OPTION_ARG_NONE, &detach,
		  "start the migration and return at once", NULL },
		{ "status", 0, 0, G_OPTION_ARG_NONE, &status,
		  "say how the node's migration is going (or how the last "
		  "one ended)", NULL },
		{ "output", 0, 0, G_OPTION_ARG_STRING, &output,
		  "with --status: json or human (default)", "FORMAT" },
		{ "json", 0, 0, G_OPTION_ARG_NONE, &json_flag,
		  "the same as --output=json", NULL },
		{ NULL }
	};
	struct dioloop_ctl_target t = { 0 };
	struct sigaction sa = { .sa_handler = on_interrupt };
	uint64_t bps = 0;
	GString *line;
	int ret;

	if (!dioloop_parse_args("migrate", "MOUNTPOINT/NODE [DESTINATION]",
				"Move a mounted node to another image (a path or "
				"an nfs:// or rbd:// URL) while it stays in use.", entries,
				&argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (cancel && status) {
		dioloop_err("migrate: --cancel and --status exclude each other");
		return DIOLOOP_EXIT_USAGE;
	}
	if ((output || json_flag) && !status) {
		dioloop_err("migrate: --output and --json go with --status");
		return DIOLOOP_EXIT_USAGE;
	}
	if (argc != (cancel || status ? 2 : 3)) {
		dioloop_err(cancel ? "migrate: --cancel takes MOUNTPOINT/NODE" :
			    status ? "migrate: --status takes MOUNTPOINT/NODE" :
				     "migrate: expected MOUNTPOINT/NODE DESTINATION");
		return DIOLOOP_EXIT_USAGE;
	}
	if (status && !dioloop_parse_output("migrate", output, json_flag,
					    &json))
		return DIOLOOP_EXIT_USAGE;
	if (format && strcmp(format, "raw") && strcmp(format, "cow")) {
		dioloop_err("migrate: unknown format '%s' (raw or cow)", format);
		return DIOLOOP_EXIT_USAGE;
	}
	if (bps_arg && (dioloop_parse_size(bps_arg, UINT64_MAX, &bps) < 0 ||
			bps == 0)) {
		dioloop_err("migrate: bad --bps '%s'", bps_arg);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!dioloop_ctl_resolve("migrate", argv[1], &t))
		return DIOLOOP_EXIT_USAGE;
	if (!t.node) {
		dioloop_err("migrate: %s is a mount point: give one of its nodes (MOUNTPOINT/NODE)",
			    argv[1]);
		dioloop_ctl_target_clear(&t);
		return DIOLOOP_EXIT_USAGE;
	}
	qnode = g_shell_quote(t.node);
	if (status) {
		ret = print_status(t.ctl, qnode, t.node, json);
		dioloop_ctl_target_clear(&t);
		return ret;
	}
	if (cancel) {
		ret = send_line(t.ctl, "migrate-cancel %s\n", qnode);
		dioloop_ctl_target_clear(&t);
		return ret < 0 ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
	}
	dest = absolute_dest(argv[2]);
	qdest = g_shell_quote(dest);
	line = g_string_new(NULL);
	g_string_append_printf(line, "migrate %s %s", qnode, qdest);
	if (format)
		g_string_append_printf(line, " format=%s", format);
	if (bps)
		g_string_append_printf(line, " bps=%llu",
				       (unsigned long long)bps);
	if (ignore_bad)
		g_string_append(line, " ignore_bad_blocks");
	if (remove_source)
		g_string_append(line, " remove_source");
	g_string_append_c(line, '\n');
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = send_line(t.ctl, "%s", line->str);
	g_string_free(line, TRUE);
	if (ret < 0)
		ret = ret == -EINVAL ? DIOLOOP_EXIT_USAGE : DIOLOOP_EXIT_FAIL;
	else if (detach)
		ret = DIOLOOP_EXIT_OK;
	else
		ret = follow(t.ctl, qnode, t.node, progress);
	dioloop_ctl_target_clear(&t);
	return ret;
}
