/* SPDX-License-Identifier: MIT */
/*
 * dioloop stats: a mount's statistics (MOUNTPOINT/.dioloop/stats.json) as
 * a table of totals, as JSON, or with --watch as per-second rates between
 * two snapshots.  A command-line process: one thread.
 */
#include <errno.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/size.h"
#include "fusefs/cli/commands.h"
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

/* obj.a.b as an integer, 0 when missing. */
static gint64 get_int(JsonObject *obj, const char *a, const char *b)
{
	JsonNode *n;

	if (!obj || !json_object_has_member(obj, a))
		return 0;
	n = json_object_get_member(obj, a);
	if (b) {
		if (!JSON_NODE_HOLDS_OBJECT(n))
			return 0;
		obj = json_node_get_object(n);
		if (!json_object_has_member(obj, b))
			return 0;
		n = json_object_get_member(obj, b);
	}
	return JSON_NODE_HOLDS_VALUE(n) ? json_node_get_int(n) : 0;
}

/* obj.name as an object, NULL when missing. */
static JsonObject *get_obj(JsonObject *obj, const char *name)
{
	JsonNode *n;

	if (!obj || !json_object_has_member(obj, name))
		return NULL;
	n = json_object_get_member(obj, name);
	return JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
}

/* The "nodes" object of a snapshot. */
static JsonObject *nodes_of(JsonParser *p)
{
	return get_obj(json_node_get_object(json_parser_get_root(p)), "nodes");
}

/* Sum of obj.faults.injected.*. */
static gint64 injected(JsonObject *node)
{
	JsonObject *inj = get_obj(get_obj(node, "faults"), "injected");
	GList *members, *l;
	gint64 sum = 0;

	if (!inj)
		return 0;
	members = json_object_get_members(inj);
	for (l = members; l; l = l->next)
		sum += get_int(inj, l->data, NULL);
	g_list_free(members);
	return sum;
}

/* Mean latency of op in us over [a, b] (a may be NULL: since start). */
static double mean_latency(JsonObject *a, JsonObject *b, const char *op)
{
	JsonObject *la = get_obj(get_obj(a, "latency_us"), op);
	JsonObject *lb = get_obj(get_obj(b, "latency_us"), op);
	gint64 n = get_int(lb, "count", NULL) - get_int(la, "count", NULL);
	gint64 sum = get_int(lb, "sum", NULL) - get_int(la, "sum", NULL);

	return n > 0 ? (double)sum / (double)n : 0;
}

static const char *size_str(double bytes, char *buf, unsigned len)
{
	return dioloop_format_size((uint64_t)(bytes < 0 ? 0 : bytes), buf, len);
}

/* The totals since the mount, one line per node. */
static void print_table(JsonParser *p)
{
	JsonObject *nodes = nodes_of(p);
	GList *names = nodes ? json_object_get_members(nodes) : NULL, *l;
	char rb[32], wb[32];

	names = g_list_sort(names, (GCompareFunc)strcmp);
	printf("%-20s %9s %9s %8s %11s %11s %7s %6s %6s %10s %9s %9s %7s\n",
	       "NODE", "READS", "WRITES", "FLUSHES", "READ", "WRITTEN",
	       "ERRORS", "INFL", "QUEUED", "THROTTLED", "R_LAT_US", "W_LAT_US",
	       "FAULTS");
	for (l = names; l; l = l->next) {
		JsonObject *n = get_obj(nodes, l->data);

		printf("%-20s %9" G_GINT64_FORMAT " %9" G_GINT64_FORMAT
		       " %8" G_GINT64_FORMAT " %11s %11s %7" G_GINT64_FORMAT
		       " %6" G_GINT64_FORMAT " %6" G_GINT64_FORMAT " %9.1fs"
		       " %9.0f %9.0f %7" G_GINT64_FORMAT "\n",
		       (const char *)l->data, get_int(n, "ops", "read"),
		       get_int(n, "ops", "write"), get_int(n, "ops", "flush"),
		       size_str((double)get_int(n, "bytes", "read"), rb,
				sizeof(rb)),
		       size_str((double)get_int(n, "bytes", "write"), wb,
				sizeof(wb)),
		       get_int(n, "errors_total", NULL),
		       get_int(n, "in_flight", NULL),
		       get_int(n, "throttle", "queued"),
		       (double)get_int(n, "throttle", "throttled_us") / 1e6,
		       mean_latency(NULL, n, "read"),
		       mean_latency(NULL, n, "write"), injected(n));
	}
	g_list_free(names);
}

/* Rates per second between two snapshots dt seconds apart. */
static void print_rates(JsonParser *prev, JsonParser *cur, double dt)
{
	JsonObject *nodes = nodes_of(cur), *old = nodes_of(prev);
	GList *names = nodes ? json_object_get_members(nodes) : NULL, *l;
	GDateTime *now = g_date_time_new_now_local();
	g_autofree char *when = g_date_time_format(now, "%H:%M:%S");
	char rb[32], wb[32];

	g_date_time_unref(now);
	names = g_list_sort(names, (GCompareFunc)strcmp);
	printf("%-20s %8s %8s %8s %11s %11s %6s %6s %6s %9s %9s %9s  %s\n",
	       "NODE", "R/S", "W/S", "FLUSH/S", "READ/S", "WRITE/S", "ERR/S",
	       "INFL", "QUEUED", "THROTL/S", "R_LAT_US", "W_LAT_US", when);
	for (l = names; l; l = l->next) {
		JsonObject *n = get_obj(nodes, l->data);
		JsonObject *o = get_obj(old, l->data);

#define RATE(a, b) ((double)(get_int(n, a, b) - get_int(o, a, b)) / dt)
		printf("%-20s %8.0f %8.0f %8.0f %9s/s %9s/s %6.0f %6" G_GINT64_FORMAT
		       " %6" G_GINT64_FORMAT " %9.0f %9.0f %9.0f\n",
		       (const char *)l->data, RATE("ops", "read"),
		       RATE("ops", "write"), RATE("ops", "flush"),
		       size_str(RATE("bytes", "read"), rb, sizeof(rb)),
		       size_str(RATE("bytes", "write"), wb, sizeof(wb)),
		       RATE("errors_total", NULL),
		       get_int(n, "in_flight", NULL),
		       get_int(n, "throttle", "queued"),
		       RATE("throttle", "throttled"),
		       mean_latency(o, n, "read"), mean_latency(o, n, "write"));
#undef RATE
	}
	g_list_free(names);
	fflush(stdout);
}

/* One line of compact JSON: the snapshot in --watch --json. */
static void print_json_line(JsonParser *p)
{
	g_autofree char *text = json_to_string(json_parser_get_root(p), FALSE);

	printf("%s\n", text);
	fflush(stdout);
}

/* dioloop stats [--json] [--watch ...] MOUNTPOINT */
int dioloop_cmd_stats(int argc, char **argv)
{
	gboolean json_flag = FALSE, watch = FALSE;
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
		{ "watch", 'w', 0, G_OPTION_ARG_NONE, &watch,
		  "print per-second rates every interval until interrupted",
		  NULL },
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
	if (!watch) {
		if (json)
			fputs(text, stdout);
		else
			print_table(prev);
		g_object_unref(prev);
		return DIOLOOP_EXIT_OK;
	}
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
		if (json)
			print_json_line(cur);
		else
			print_rates(prev, cur,
				    (double)(t_cur - t_prev) / G_USEC_PER_SEC);
		g_object_unref(prev);
		prev = cur;
		t_prev = t_cur;
		reports++;
	}
	g_object_unref(prev);
	return DIOLOOP_EXIT_OK;
}
