/* SPDX-License-Identifier: MIT */
/*
 * dioloop stats, the output side: the snapshot's numbers as tables,
 * rates, JSON rates and Prometheus text (stats_format.h).
 */
#include <glib.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/size.h"
#include "fusefs/cli/stats_format.h"
#include "fusefs/lograte.h"
#include "fusefs/stats.h"

/* The latency histograms of stats.json, in this order. */
static const char *const lat_ops[] = { "read", "write", "flush" };

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

/* The node names of a snapshot, sorted (g_list_free it). */
static GList *node_names(JsonObject *root)
{
	JsonObject *nodes = get_obj(root, "nodes");

	return g_list_sort(nodes ? json_object_get_members(nodes) : NULL,
			   (GCompareFunc)strcmp);
}

/* Bucket i of histogram op of node (0 when missing). */
static gint64 bucket(JsonObject *node, const char *op, guint i)
{
	JsonObject *h = get_obj(get_obj(node, "latency_us"), op);
	JsonArray *a;

	if (!h || !json_object_has_member(h, "buckets"))
		return 0;
	a = json_object_get_array_member(h, "buckets");
	return a && i < json_array_get_length(a) ?
		       json_array_get_int_element(a, i) : 0;
}

/* The q-quantile (0..1) of op's latencies in us between snapshots a (may
 * be NULL: since the mount) and b, as the upper bound of the bucket it
 * falls in (the lower bound for the last, open one); 0 without requests. */
static double quantile_us(JsonObject *a, JsonObject *b, const char *op,
			  double q)
{
	gint64 n = 0, want, seen = 0;
	guint i;

	for (i = 0; i < DIOLOOP_LAT_BUCKETS; i++)
		n += bucket(b, op, i) - bucket(a, op, i);
	if (n <= 0)
		return 0;
	want = (gint64)ceil(q * (double)n);
	for (i = 0; i < DIOLOOP_LAT_BUCKETS; i++) {
		seen += bucket(b, op, i) - bucket(a, op, i);
		if (seen >= want)
			break;
	}
	if (i >= DIOLOOP_LAT_BUCKETS - 1)
		return ldexp(1, DIOLOOP_LAT_BUCKETS - 1);
	return ldexp(1, (int)i + 1);
}

/* Mean latency of op in us over [a, b] (a may be NULL: since start). */
static double mean_us(JsonObject *a, JsonObject *b, const char *op)
{
	JsonObject *la = get_obj(get_obj(a, "latency_us"), op);
	JsonObject *lb = get_obj(get_obj(b, "latency_us"), op);
	gint64 n = get_int(lb, "count", NULL) - get_int(la, "count", NULL);
	gint64 sum = get_int(lb, "sum", NULL) - get_int(la, "sum", NULL);

	return n > 0 ? (double)sum / (double)n : 0;
}

/* A latency in at most 6 characters: "850us", "4.2ms", "120ms", "1.5s";
 * "-" for none. */
static const char *lat_str(double us, char *buf, size_t len)
{
	if (us <= 0)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%.0fus", us);
	else if (us < 10000)
		snprintf(buf, len, "%.1fms", us / 1000);
	else if (us < 1e6)
		snprintf(buf, len, "%.0fms", us / 1000);
	else
		snprintf(buf, len, "%.1fs", us / 1e6);
	return buf;
}

/* Bytes in at most 7 characters: "0", "512", "4.0K", "1023.9M". */
static const char *bytes_str(double v, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	int u = -1;

	if (v < 0)
		v = 0;
	while (v >= 1024 && u + 1 < (int)sizeof(units) - 1) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
	return buf;
}

/* A count in at most 6 characters: "123456", "1.2M", "12.3G". */
static const char *count_str(double v, char *buf, size_t len)
{
	if (v < 0)
		v = 0;
	if (v < 999999.5)
		snprintf(buf, len, "%.0f", v);
	else if (v < 999.95e6)
		snprintf(buf, len, "%.1fM", v / 1e6);
	else
		snprintf(buf, len, "%.1fG", v / 1e9);
	return buf;
}

void stats_print_totals(JsonObject *root)
{
	JsonObject *nodes = get_obj(root, "nodes");
	GList *names = node_names(root), *l;
	char c[3][16], rb[16], wb[16], rl[16], wl[16], th[16];

	printf("%-14s %6s %6s %6s %7s %7s %6s %6s %6s %6s\n", "NODE", "READS",
	       "WRITES", "FLUSH", "READ", "WRITTEN", "ERRORS", "R_LAT",
	       "W_LAT", "THROTL");
	for (l = names; l; l = l->next) {
		JsonObject *n = get_obj(nodes, l->data);
		g_autofree char *shown = dioloop_escape_controls(l->data);

		snprintf(th, sizeof(th), "%.1fs",
			 (double)get_int(n, "throttle", "throttled_us") / 1e6);
		printf("%-14s %6s %6s %6s %7s %7s %6" G_GINT64_FORMAT
		       " %6s %6s %6s\n", shown,
		       count_str((double)get_int(n, "ops", "read"), c[0], 16),
		       count_str((double)get_int(n, "ops", "write"), c[1], 16),
		       count_str((double)get_int(n, "ops", "flush"), c[2], 16),
		       bytes_str((double)get_int(n, "bytes", "read"), rb, 16),
		       bytes_str((double)get_int(n, "bytes", "write"), wb, 16),
		       get_int(n, "errors_total", NULL),
		       lat_str(mean_us(NULL, n, "read"), rl, sizeof(rl)),
		       lat_str(mean_us(NULL, n, "write"), wl, sizeof(wl)), th);
	}
	g_list_free(names);
}

/* One node's rates between two snapshots. */
struct node_rates {
	const char *name;
	double r_ops, w_ops, f_ops, r_bytes, w_bytes, errors;
	double throttled;		/* fraction of the interval */
	double r_p50, r_p99, w_p50, w_p99;	/* us */
	gint64 in_flight, queued;
	JsonObject *scrub;		/* the running scrub, or NULL */
	JsonObject *migration;		/* the running migration, or NULL */
	double busy;			/* what sorts busy nodes first */
};

static void node_rates_get(JsonObject *o, JsonObject *n, double dt,
			   struct node_rates *r)
{
#define RATE(a, b) ((double)(get_int(n, a, b) - get_int(o, a, b)) / dt)
	r->r_ops = RATE("ops", "read");
	r->w_ops = RATE("ops", "write");
	r->f_ops = RATE("ops", "flush");
	r->r_bytes = RATE("bytes", "read");
	r->w_bytes = RATE("bytes", "write");
	r->errors = RATE("errors_total", NULL);
	r->throttled = RATE("throttle", "throttled_us") / 1e6;
#undef RATE
	r->r_p50 = quantile_us(o, n, "read", 0.5);
	r->r_p99 = quantile_us(o, n, "read", 0.99);
	r->w_p50 = quantile_us(o, n, "write", 0.5);
	r->w_p99 = quantile_us(o, n, "write", 0.99);
	r->in_flight = get_int(n, "in_flight", NULL);
	r->queued = get_int(n, "throttle", "queued");
	r->scrub = get_obj(n, "scrub");
	if (r->scrub && !json_object_get_boolean_member_with_default(
				r->scrub, "running", FALSE))
		r->scrub = NULL;
	r->migration = get_obj(n, "migration");
	r->busy = r->r_ops + r->w_ops + r->f_ops + r->errors +
		  (double)(r->in_flight + r->queued) + (r->scrub ? 1 : 0) +
		  (r->migration ? 1 : 0);
}

/* The line under a node whose image is being scrubbed: its progress,
 * cut to 80 columns (prefix: the time, or nothing). */
static void print_scrub(const char *prefix, JsonObject *sc)
{
	gint64 done = get_int(sc, "done", NULL);
	gint64 total = get_int(sc, "total", NULL);
	char line[4200];

	snprintf(line, sizeof(line), "%s  scrub %.0f%%: %" G_GINT64_FORMAT
		 " of %" G_GINT64_FORMAT " blocks, %" G_GINT64_FORMAT " bad",
		 prefix, total ? 100.0 * (double)done / (double)total : 0.0,
		 done, total, get_int(sc, "bad", NULL));
	printf("%.80s\n", line);
}

/* The line under a migrating node: its phase and progress, cut to 80
 * columns with the rest of the row (prefix: the time, or nothing). */
static void print_migration(const char *prefix, JsonObject *m)
{
	gint64 done = get_int(m, "copied", NULL);
	gint64 left = get_int(m, "remaining", NULL);
	const char *phase = json_object_get_string_member_with_default(
		m, "phase", "?");
	const char *dest = json_object_get_string_member_with_default(
		m, "dest", "?");
	char d[16], l[16], r[16], line[4200];
	g_autofree char *shown_dest = dioloop_escape_controls(dest);

	snprintf(line, sizeof(line), "%s  migration %s %.0f%% pass %"
		 G_GINT64_FORMAT ": %s copied, %s left, %s/s -> %s", prefix,
		 phase, done + left ? 100.0 * (double)done /
					 (double)(done + left) : 0.0,
		 get_int(m, "pass", NULL), bytes_str((double)done, d, 16),
		 bytes_str((double)left, l, 16),
		 bytes_str((double)get_int(m, "rate_bps", NULL), r, 16),
		 shown_dest);
	printf("%.80s\n", line);
}

static gint by_busy(gconstpointer a, gconstpointer b)
{
	const struct node_rates *x = a, *y = b;

	if (x->busy != y->busy)
		return x->busy < y->busy ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* The rates of every node of cur, busiest first. */
static GArray *all_rates(JsonObject *prev, JsonObject *cur, double dt)
{
	JsonObject *nodes = get_obj(cur, "nodes"), *old = get_obj(prev, "nodes");
	GArray *rates = g_array_new(FALSE, TRUE, sizeof(struct node_rates));
	GList *names = node_names(cur), *l;

	for (l = names; l; l = l->next) {
		struct node_rates r = { .name = l->data };

		node_rates_get(get_obj(old, l->data), get_obj(nodes, l->data),
			       dt, &r);
		g_array_append_val(rates, r);
	}
	g_list_free(names);
	g_array_sort(rates, by_busy);
	return rates;
}

void stats_print_rates(JsonObject *prev, JsonObject *cur, double dt,
		       const struct stats_view *v, bool first)
{
	g_autoptr(GDateTime) now = g_date_time_new_now_local();
	g_autofree char *when = g_date_time_format(now, "%H:%M:%S");
	GArray *rates = all_rates(prev, cur, dt);
	int name_w = v->tty ? 16 : 11, shown = 0, idle = 0;
	char c[2][16], rb[16], wb[16], rl[16], wl[16], title[4200];
	guint i;

	if (v->tty) {
		for (i = 0; i < rates->len; i++)
			idle += g_array_index(rates, struct node_rates, i).busy
				== 0;
		/* The mount point last: a long one is what gets cut. */
		snprintf(title, sizeof(title), "dioloop stats  %s  every %.1f s"
			 "%s  %s", when, v->interval,
			 idle && !v->all ? "  (idle nodes hidden: --all)" : "",
			 v->mountpoint);
		/* Home, clear: the view is redrawn in place, like top. */
		printf("\033[H\033[2J%.80s\n", title);
	}
	if (v->tty || first)
		printf("%s%-*s %6s %6s %7s %7s %6s %6s %4s %4s %3s\n",
		       v->tty ? "" : "TIME     ", name_w, "NODE", "R/S", "W/S",
		       "READ/S", "WRITE/S", "R_P99", "W_P99", "THR%", "ERR",
		       "QD");
	for (i = 0; i < rates->len; i++) {
		struct node_rates *r = &g_array_index(rates, struct node_rates,
						      i);
		char name[64];
		g_autofree char *label = dioloop_escape_controls(r->name);

		if (!v->all && r->busy == 0)
			continue;
		if (v->tty && v->rows > 3 && shown >= v->rows - 3)
			break;
		/* A long name keeps its start and its end. */
		if ((int)strlen(label) > name_w)
			snprintf(name, sizeof(name), "%.*s~%s", name_w / 2 - 1,
				 label, label + strlen(label) -
					  (name_w - name_w / 2));
		else
			snprintf(name, sizeof(name), "%s", label);
		printf("%s%s%-*s %6s %6s %7s %7s %6s %6s %4.0f %4.0f %3" G_GINT64_FORMAT
		       "\n", v->tty ? "" : when, v->tty ? "" : " ", name_w,
		       name, count_str(r->r_ops, c[0], 16),
		       count_str(r->w_ops, c[1], 16),
		       bytes_str(r->r_bytes, rb, 16),
		       bytes_str(r->w_bytes, wb, 16),
		       lat_str(r->r_p99, rl, sizeof(rl)),
		       lat_str(r->w_p99, wl, sizeof(wl)),
		       MIN(r->throttled * 100, 999), MIN(r->errors, 9999),
		       MIN(r->in_flight + r->queued, 999));
		shown++;
		if ((r->migration || r->scrub) &&
		    !(v->tty && v->rows > 3 && shown >= v->rows - 3)) {
			g_autofree char *pre = g_strdup_printf(
				"%s%s", v->tty ? "" : when, v->tty ? "" : " ");

			if (r->migration) {
				print_migration(pre, r->migration);
				shown++;
			}
			if (r->scrub &&
			    !(v->tty && v->rows > 3 && shown >= v->rows - 3)) {
				print_scrub(pre, r->scrub);
				shown++;
			}
		}
	}
	g_array_free(rates, TRUE);
	fflush(stdout);
}

void stats_print_rates_json(JsonObject *prev, JsonObject *cur, double dt)
{
	g_autoptr(JsonBuilder) jb = json_builder_new();
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) root = NULL;
	g_autofree char *text = NULL;
	GArray *rates = all_rates(prev, cur, dt);
	guint i;

	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "time");
	json_builder_add_double_value(jb, (double)g_get_real_time() / 1e6);
	json_builder_set_member_name(jb, "interval_s");
	json_builder_add_double_value(jb, dt);
	json_builder_set_member_name(jb, "nodes");
	json_builder_begin_object(jb);
	for (i = 0; i < rates->len; i++) {
		struct node_rates *r = &g_array_index(rates, struct node_rates,
						      i);

		json_builder_set_member_name(jb, r->name);
		json_builder_begin_object(jb);
#define D(k, v) do { json_builder_set_member_name(jb, k); \
		     json_builder_add_double_value(jb, v); } while (0)
#define I(k, v) do { json_builder_set_member_name(jb, k); \
		     json_builder_add_int_value(jb, v); } while (0)
		D("read_ops_per_s", r->r_ops);
		D("write_ops_per_s", r->w_ops);
		D("flush_ops_per_s", r->f_ops);
		D("read_bytes_per_s", r->r_bytes);
		D("write_bytes_per_s", r->w_bytes);
		D("errors_per_s", r->errors);
		D("throttled_fraction", r->throttled);
		D("read_latency_p50_us", r->r_p50);
		D("read_latency_p99_us", r->r_p99);
		D("write_latency_p50_us", r->w_p50);
		D("write_latency_p99_us", r->w_p99);
		I("in_flight", r->in_flight);
		I("queued", r->queued);
#undef D
#undef I
		if (r->migration) {
			/* As stats.json has it: its rate is already one. */
			JsonNode *m = json_node_alloc();

			json_node_init_object(m, r->migration);
			json_builder_set_member_name(jb, "migration");
			json_builder_add_value(jb, m);
		}
		json_builder_end_object(jb);
	}
	json_builder_end_object(jb);
	json_builder_end_object(jb);
	g_array_free(rates, TRUE);
	root = json_builder_get_root(jb);
	json_generator_set_root(gen, root);
	text = json_generator_to_data(gen, NULL);
	printf("%s\n", text);
	fflush(stdout);
}

/* ---- Prometheus */

/* s as a label value: backslash, double quote and newline escaped. */
static char *label(const char *s)
{
	GString *out = g_string_new(NULL);

	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			g_string_append_c(out, '\\');
		if (*s == '\n') {
			g_string_append(out, "\\n");
			continue;
		}
		g_string_append_c(out, *s);
	}
	return g_string_free(out, FALSE);
}

/* "# HELP" and "# TYPE" of a metric. */
static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample per node of the value node.a.b (b may be NULL); usec: it
 * is in microseconds, shown in seconds. */
static void per_node(FILE *f, JsonObject *root, const char *name,
		     const char *a, const char *b, bool usec)
{
	JsonObject *nodes = get_obj(root, "nodes");
	GList *names = node_names(root), *l;

	for (l = names; l; l = l->next) {
		g_autofree char *node = label(l->data);
		gint64 v = get_int(get_obj(nodes, l->data), a, b);

		/* Exact integers; microseconds as seconds with six places. */
		if (usec)
			fprintf(f, "%s{node=\"%s\"} %" G_GINT64_FORMAT ".%06"
				G_GINT64_FORMAT "\n", name, node, v / 1000000,
				v % 1000000);
		else
			fprintf(f, "%s{node=\"%s\"} %" G_GINT64_FORMAT "\n",
				name, node, v);
	}
	g_list_free(names);
}

/* One sample per node and member of node.a (ops, bytes). */
static void per_node_op(FILE *f, JsonObject *root, const char *name,
			const char *a)
{
	JsonObject *nodes = get_obj(root, "nodes");
	GList *names = node_names(root), *l, *ops, *o;

	for (l = names; l; l = l->next) {
		JsonObject *obj = get_obj(get_obj(nodes, l->data), a);
		g_autofree char *node = label(l->data);

		ops = obj ? g_list_sort(json_object_get_members(obj),
					(GCompareFunc)strcmp) : NULL;
		for (o = ops; o; o = o->next)
			fprintf(f, "%s{node=\"%s\",op=\"%s\"} %" G_GINT64_FORMAT
				"\n", name, node, (const char *)o->data,
				get_int(obj, o->data, NULL));
		g_list_free(ops);
	}
	g_list_free(names);
}

/* The latency histograms: bucket i counts [2^i, 2^(i+1)) us, so its
 * upper bound le is 2^(i+1) us; the last one is open (+Inf). */
static void latency_histograms(FILE *f, JsonObject *root)
{
	JsonObject *nodes = get_obj(root, "nodes");
	GList *names = node_names(root), *l;
	size_t k;
	guint i;

	family(f, "dioloop_request_latency_seconds", "histogram",
	       "Time from a request's arrival to its reply, by node and op.");
	for (l = names; l; l = l->next) {
		JsonObject *n = get_obj(nodes, l->data);
		g_autofree char *node = label(l->data);

		for (k = 0; k < G_N_ELEMENTS(lat_ops); k++) {
			JsonObject *h = get_obj(get_obj(n, "latency_us"),
						lat_ops[k]);
			gint64 cum = 0;

			for (i = 0; i + 1 < DIOLOOP_LAT_BUCKETS; i++) {
				cum += bucket(n, lat_ops[k], i);
				fprintf(f, "dioloop_request_latency_seconds_bucket"
					"{node=\"%s\",op=\"%s\",le=\"%.9g\"} %"
					G_GINT64_FORMAT "\n", node, lat_ops[k],
					ldexp(1, (int)i + 1) / 1e6, cum);
			}
			fprintf(f, "dioloop_request_latency_seconds_bucket"
				"{node=\"%s\",op=\"%s\",le=\"+Inf\"} %"
				G_GINT64_FORMAT "\n", node, lat_ops[k],
				get_int(h, "count", NULL));
			fprintf(f, "dioloop_request_latency_seconds_sum"
				"{node=\"%s\",op=\"%s\"} %" G_GINT64_FORMAT
				".%06" G_GINT64_FORMAT "\n", node, lat_ops[k],
				get_int(h, "sum", NULL) / 1000000,
				get_int(h, "sum", NULL) % 1000000);
			fprintf(f, "dioloop_request_latency_seconds_count"
				"{node=\"%s\",op=\"%s\"} %" G_GINT64_FORMAT
				"\n", node, lat_ops[k],
				get_int(h, "count", NULL));
		}
	}
	g_list_free(names);
}

/* The running migrations' gauges, by node: only when one runs. */
static void migrations(FILE *f, JsonObject *root)
{
	static const struct {
		const char *name, *key, *help;
	} g[] = {
		{ "dioloop_migration_copied_bytes", "copied",
		  "Bytes a running migration copied, by node." },
		{ "dioloop_migration_remaining_bytes", "remaining",
		  "Bytes a running migration has still to copy, by node." },
		{ "dioloop_migration_pass", "pass",
		  "The pass a running migration is in (1: the first), by node." },
		{ "dioloop_migration_rate_bytes_per_second", "rate_bps",
		  "Bytes a running migration copies a second on average, by node." },
	};
	JsonObject *nodes = get_obj(root, "nodes");
	GList *names = node_names(root), *l;
	bool any = false;
	guint i;

	for (l = names; l && !any; l = l->next)
		any = get_obj(get_obj(nodes, l->data), "migration") != NULL;
	for (i = 0; any && i < G_N_ELEMENTS(g); i++) {
		family(f, g[i].name, "gauge", g[i].help);
		for (l = names; l; l = l->next) {
			JsonObject *m = get_obj(get_obj(nodes, l->data),
						"migration");
			g_autofree char *node = NULL;

			if (!m)
				continue;
			node = label(l->data);
			fprintf(f, "%s{node=\"%s\"} %" G_GINT64_FORMAT "\n",
				g[i].name, node, get_int(m, g[i].key, NULL));
		}
	}
	g_list_free(names);
}

void stats_print_prometheus(FILE *f, JsonObject *root)
{
	JsonNode *up = json_object_get_member(root, "uptime_s");

	family(f, "dioloop_uptime_seconds", "gauge",
	       "Seconds since the mount started.");
	fprintf(f, "dioloop_uptime_seconds %.6f\n",
		up && JSON_NODE_HOLDS_VALUE(up) ? json_node_get_double(up) : 0);
	family(f, "dioloop_requests_total", "counter",
	       "Requests completed, by node and op.");
	per_node_op(f, root, "dioloop_requests_total", "ops");
	family(f, "dioloop_bytes_total", "counter",
	       "Bytes moved by completed requests, by node and op.");
	per_node_op(f, root, "dioloop_bytes_total", "bytes");
	family(f, "dioloop_errors_total", "counter",
	       "Requests that failed, by node.");
	per_node(f, root, "dioloop_errors_total", "errors_total", NULL, false);
	family(f, "dioloop_requests_in_flight", "gauge",
		"Requests being served, by node.");
	per_node(f, root, "dioloop_requests_in_flight", "in_flight", NULL, false);
	family(f, "dioloop_throttle_queued", "gauge",
	       "Requests waiting for an I/O limit, by node.");
	per_node(f, root, "dioloop_throttle_queued", "throttle", "queued", false);
	family(f, "dioloop_throttled_requests_total", "counter",
	       "Requests that waited for an I/O limit, by node.");
	per_node(f, root, "dioloop_throttled_requests_total", "throttle",
		 "throttled", false);
	family(f, "dioloop_throttled_seconds_total", "counter",
	       "Time requests waited for an I/O limit, by node.");
	per_node(f, root, "dioloop_throttled_seconds_total", "throttle",
		 "throttled_us", true);
	family(f, "dioloop_size_bytes", "gauge", "Logical size, by node.");
	per_node(f, root, "dioloop_size_bytes", "size", NULL, false);
	family(f, "dioloop_allocated_bytes", "gauge",
	       "Bytes the image uses on its host, by node.");
	per_node(f, root, "dioloop_allocated_bytes", "allocated", NULL, false);
	migrations(f, root);
	latency_histograms(f, root);
}
