/* SPDX-License-Identifier: MIT */
/*
 * dioloop stats: a mount's statistics (MOUNTPOINT/.dioloop/stats.json) as
 * a table of totals, as JSON, as Prometheus text, or with --watch as
 * per-second rates between two snapshots, redrawn in place on a terminal
 * (stats_format.c formats).  A command-line process: one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fusefs/cli/commands.h"
#include "fusefs/cli/stats_format.h"
#include "fusefs/control.h"

/* Read and parse the snapshot: the root object (g_object_unref the
 * parser), or NULL with *err set. */
static JsonParser *stats_load(const char *path, char **text, GError **err)
{
	JsonParser *p;

	if (!g_file_get_contents(path, text, NULL, err))
		return NULL;
	p = json_parser_new();
	if (!json_parser_load_from_data(p, *text, -1, err) ||
	    !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(p))) {
		if (!*err)
			g_set_error(err, G_FILE_ERROR, G_FILE_ERROR_INVAL,
				    "not a JSON object");
		g_object_unref(p);
		return NULL;
	}
	return p;
}

/* Write the Prometheus text of root to path atomically (a temporary file
 * renamed over it, as node_exporter's textfile collector wants): 0, or
 * -errno after a message.  The temporary is a new file of a name nobody
 * can guess (PATH.XXXXXX, which the collector skips: not *.prom), made
 * with O_CREAT|O_EXCL|O_NOFOLLOW: a file or symlink planted in a
 * directory others can write is never opened, so root running this
 * cannot be made to overwrite another file.  rename replaces a symlink
 * at path itself, never its target. */
static int write_textfile(const char *path, JsonObject *root)
{
	g_autofree char *tmp = g_strdup_printf("%s.XXXXXX", path);
	int fd = g_mkstemp_full(tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	FILE *f;
	int err;

	if (fd < 0) {
		err = errno;
		dioloop_err("stats: %s: %s", path, g_strerror(err));
		return -err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = errno;
		close(fd);
		unlink(tmp);
		dioloop_err("stats: %s: %s", tmp, g_strerror(err));
		return -err;
	}
	stats_print_prometheus(f, root);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
		err = errno;
		fclose(f);
		unlink(tmp);
		dioloop_err("stats: %s: %s", tmp, g_strerror(err));
		return -err;
	}
	fclose(f);
	if (rename(tmp, path) < 0) {
		err = errno;
		unlink(tmp);
		dioloop_err("stats: %s: %s", path, g_strerror(err));
		return -err;
	}
	return 0;
}

/* The root object of a parsed snapshot. */
static JsonObject *root_of(JsonParser *p)
{
	return json_node_get_object(json_parser_get_root(p));
}

/* One report of a snapshot without --watch: 0 or -errno. */
static int print_once(JsonParser *p, const char *text, bool json,
		      bool prometheus, const char *textfile)
{
	if (textfile)
		return write_textfile(textfile, root_of(p));
	if (prometheus)
		stats_print_prometheus(stdout, root_of(p));
	else if (json)
		fputs(text, stdout);
	else
		stats_print_totals(root_of(p));
	return 0;
}

/* dioloop stats [--output=...] [--prometheus [--textfile FILE]]
 * [--watch ...] MOUNTPOINT */
int dioloop_cmd_stats(int argc, char **argv)
{
	gboolean json_flag = FALSE, watch = FALSE, all = FALSE;
	gboolean prometheus = FALSE;
	g_autofree char *textfile = NULL;
	struct stats_view view = { 0 };
	struct winsize ws;
	g_autofree char *output = NULL;
	gdouble interval = 1.0;
	gint count = 0;
	bool json;
	GOptionEntry entries[] = {
		{ "output", 0, 0, G_OPTION_ARG_STRING, &output,
		  "json (the JSON snapshot; with --watch one line per "
		  "interval) or human (default)", "FORMAT" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &json_flag,
		  "the same as --output=json", NULL },
		{ "prometheus", 0, 0, G_OPTION_ARG_NONE, &prometheus,
		  "print the Prometheus text exposition format", NULL },
		{ "textfile", 0, 0, G_OPTION_ARG_FILENAME, &textfile,
		  "with --prometheus: write FILE atomically instead (for "
		  "node_exporter's textfile collector; every interval with "
		  "--watch)", "FILE" },
		{ "watch", 'w', 0, G_OPTION_ARG_NONE, &watch,
		  "per-second rates every interval until interrupted, busy "
		  "nodes first, redrawn in place on a terminal", NULL },
		{ "all", 'a', 0, G_OPTION_ARG_NONE, &all,
		  "with --watch: also the idle nodes", NULL },
		{ "interval", 'i', 0, G_OPTION_ARG_DOUBLE, &interval,
		  "seconds between reports with --watch (default 1)", "SECONDS" },
		{ "count", 'c', 0, G_OPTION_ARG_INT, &count,
		  "stop after N reports with --watch", "N" },
		{ NULL },
	};
	g_autofree char *path = NULL, *text = NULL;
	JsonParser *prev, *cur;
	GError *err = NULL;
	gint64 t_prev, t_cur;
	int reports = 0;

	if (!dioloop_parse_args("stats", "MOUNTPOINT",
				"Show the statistics of every node of a "
				"dioloop mount: totals since it was mounted, "
				"or rates with --watch.", entries, &argc,
				&argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("stats: expected one MOUNTPOINT, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!dioloop_parse_output("stats", output, json_flag, &json))
		return DIOLOOP_EXIT_USAGE;
	if (!watch && count) {
		dioloop_err("stats: --count needs --watch");
		return DIOLOOP_EXIT_USAGE;
	}
	if (textfile && !prometheus) {
		dioloop_err("stats: --textfile needs --prometheus");
		return DIOLOOP_EXIT_USAGE;
	}
	if (prometheus && json) {
		dioloop_err("stats: --prometheus and --output=json disagree");
		return DIOLOOP_EXIT_USAGE;
	}
	if (!(interval >= 0.05 && interval <= 3600) || count < 0) {
		dioloop_err("stats: --interval must be 0.05 to 3600 seconds and "
			    "--count not negative");
		return DIOLOOP_EXIT_USAGE;
	}
	path = g_build_filename(argv[1], DIOLOOP_CTL_DIR, "stats.json", NULL);
	prev = stats_load(path, &text, &err);
	if (!prev) {
		struct stat st;

		if (stat(argv[1], &st) < 0 || !S_ISDIR(st.st_mode) ||
		    g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
			dioloop_err("stats: %s is not a dioloop mount point",
				    argv[1]);
			g_error_free(err);
			return DIOLOOP_EXIT_USAGE;
		}
		dioloop_err("stats: %s: %s", path, err->message);
		g_error_free(err);
		return DIOLOOP_EXIT_FAIL;
	}
	t_prev = g_get_monotonic_time();
	if (!watch || prometheus) {
		int ret = print_once(prev, text, json, prometheus, textfile);

		if (ret < 0 || !watch) {
			g_object_unref(prev);
			return ret < 0 ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
		}
	}
	view.tty = isatty(STDOUT_FILENO);
	view.all = all;
	view.mountpoint = argv[1];
	view.interval = interval;
	if (view.tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
		view.rows = ws.ws_row;
	while (!count || reports < count) {
		g_usleep((gulong)(interval * G_USEC_PER_SEC));
		g_clear_pointer(&text, g_free);
		cur = stats_load(path, &text, &err);
		if (!cur) {
			dioloop_err("stats: %s: %s", path, err->message);
			g_error_free(err);
			g_object_unref(prev);
			return DIOLOOP_EXIT_FAIL;
		}
		t_cur = g_get_monotonic_time();
		if (prometheus) {
			if (print_once(cur, text, false, true, textfile) < 0) {
				g_object_unref(cur);
				g_object_unref(prev);
				return DIOLOOP_EXIT_FAIL;
			}
		} else if (json)
			stats_print_rates_json(root_of(prev), root_of(cur),
					       (double)(t_cur - t_prev) /
					       G_USEC_PER_SEC);
		else
			stats_print_rates(root_of(prev), root_of(cur),
					  (double)(t_cur - t_prev) /
					  G_USEC_PER_SEC, &view, reports == 0);
		g_object_unref(prev);
		prev = cur;
		t_prev = t_cur;
		reports++;
	}
	g_object_unref(prev);
	return DIOLOOP_EXIT_OK;
}
