/* SPDX-License-Identifier: MIT */
/* Per-node counters and the JSON snapshot of a mount (see stats.h). */
#include "fusefs/stats.h"

#include <json-glib/json-glib.h>
#include <string.h>
#include <unistd.h>

#include "backends/filter_fault.h"
#include "fusefs/fs.h"
#include "fusefs/migrate.h"
#include "fusefs/mountinfo.h"
#include "fusefs/session_dev.h"
#include "fusefs/session_uring.h"
#include "fusefs/spec.h"

#define MAX_LISTED_RULES 64

static const char *const op_names[DIOLOOP_OP_NR] = {
	[DIOLOOP_OP_READ] = "read",
	[DIOLOOP_OP_WRITE] = "write",
	[DIOLOOP_OP_FLUSH] = "flush",
	[DIOLOOP_OP_DISCARD] = "discard",
	[DIOLOOP_OP_WRITE_ZEROES] = "write_zeroes",
	[DIOLOOP_OP_COPY] = "copy",
};

static const char *const fault_kind_names[FAULT_KIND_NR] = {
	[FAULT_KIND_READ] = "read",
	[FAULT_KIND_WRITE] = "write",
	[FAULT_KIND_FLUSH] = "flush",
	[FAULT_KIND_DISCARD] = "discard",
	[FAULT_KIND_WRITE_ZEROES] = "write_zeroes",
	[FAULT_KIND_RESIZE] = "resize",
	[FAULT_KIND_MAP] = "map",
	[FAULT_KIND_CLONE_RANGE] = "clone_range",
};

/* The JSON name of an op.  Any thread. */
const char *dioloop_stat_op_name(enum dioloop_stat_op op)
{
	return op < DIOLOOP_OP_NR ? op_names[op] : "?";
}

/* floor(log2(us)), capped to the last bucket.  Any thread. */
unsigned int dioloop_lat_bucket(uint64_t us)
{
	unsigned int b = us ? (unsigned int)(63 - __builtin_clzll(us)) : 0;

	return MIN(b, DIOLOOP_LAT_BUCKETS - 1);
}

/* Monotonic nanoseconds. */
static uint64_t now_ns(void)
{
	return (uint64_t)g_get_monotonic_time() * 1000u;
}

/* This thread's shard: threads take them in turn. */
static struct dioloop_stats_shard *stats_shard(struct dioloop_node_stats *s)
{
	static _Atomic unsigned int next;
	static _Thread_local int mine = -1;

	if (G_UNLIKELY(mine < 0))
		mine = (int)(atomic_fetch_add_explicit(&next, 1,
						       memory_order_relaxed) %
			     DIOLOOP_STATS_SHARDS);
	return &s->shard[mine];
}

/* A request arrived.  The thread that took it. */
uint64_t dioloop_stats_begin(struct dioloop_node_stats *s)
{
	atomic_fetch_add_explicit(&stats_shard(s)->in_flight, 1,
				  memory_order_relaxed);
	return now_ns();
}

/* A request is about to be answered.  Whichever thread replies. */
void dioloop_stats_end(struct dioloop_node_stats *s, enum dioloop_stat_op op,
		       uint64_t bytes, int err, uint64_t start_ns)
{
	struct dioloop_stats_shard *sh = stats_shard(s);
	uint64_t us = (now_ns() - start_ns) / 1000u;

	atomic_fetch_add_explicit(&sh->ops[op], 1, memory_order_relaxed);
	if (err < 0)
		atomic_fetch_add_explicit(&s->errors[MIN(-err,
							 DIOLOOP_ERRNO_SLOTS - 1)],
					  1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&sh->bytes[op], bytes,
					  memory_order_relaxed);
	if (op < DIOLOOP_LAT_OPS) {
		atomic_fetch_add_explicit(&sh->lat[op][dioloop_lat_bucket(us)],
					  1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sh->lat_sum_us[op], us,
					  memory_order_relaxed);
	}
	atomic_fetch_sub_explicit(&sh->in_flight, 1, memory_order_relaxed);
}

/* Read a counter (relaxed: a snapshot need not be atomic as a whole). */
static uint64_t ld(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

/* The sum of one counter over the shards, given it in shard 0. */
static uint64_t shard_sum(_Atomic uint64_t *in_first)
{
	char *p = (char *)in_first;
	uint64_t sum = 0;
	int i;

	for (i = 0; i < DIOLOOP_STATS_SHARDS; i++)
		sum += ld((_Atomic uint64_t *)(void *)
			  (p + i * sizeof(struct dioloop_stats_shard)));
	return sum;
}

/* Sums over the shards (relaxed: a snapshot need not be atomic as a
 * whole). */
static uint64_t stats_ops(struct dioloop_node_stats *s,
			  enum dioloop_stat_op op)
{
	return shard_sum(&s->shard[0].ops[op]);
}

static uint64_t stats_bytes(struct dioloop_node_stats *s,
			    enum dioloop_stat_op op)
{
	return shard_sum(&s->shard[0].bytes[op]);
}

static uint64_t stats_in_flight(struct dioloop_node_stats *s)
{
	int64_t n = 0;
	int i;

	/* A request may arrive on one shard and end on another. */
	for (i = 0; i < DIOLOOP_STATS_SHARDS; i++)
		n += atomic_load_explicit(&s->shard[i].in_flight,
					  memory_order_relaxed);
	return (uint64_t)MAX(n, (int64_t)0);
}

/* Add "name": v to the open object. */
static void add_uint(JsonBuilder *jb, const char *name, uint64_t v)
{
	json_builder_set_member_name(jb, name);
	json_builder_add_int_value(jb, (gint64)MIN(v, (uint64_t)G_MAXINT64));
}

/* Add every limit key of l to the open object. */
static void add_limits(JsonBuilder *jb, const struct dioloop_limits *l)
{
	int k;

	for (k = 0; k < DIOLOOP_RATE_NR; k++)
		add_uint(jb, dioloop_limit_key_name(k), l->rate[k]);
	add_uint(jb, "burst_ms", l->burst_ms ? l->burst_ms :
					       DIOLOOP_DEFAULT_BURST_MS);
}

/* Add "errors" by errno name and "errors_total". */
static void add_errors(JsonBuilder *jb, struct dioloop_node_stats *s)
{
	uint64_t total = 0;
	char buf[16];
	int e;

	json_builder_set_member_name(jb, "errors");
	json_builder_begin_object(jb);
	for (e = 1; e < DIOLOOP_ERRNO_SLOTS; e++) {
		uint64_t n = ld(&s->errors[e]);

		if (!n)
			continue;
		total += n;
		add_uint(jb, e == DIOLOOP_ERRNO_SLOTS - 1 ? "other" :
			 dioloop_errno_name(e, buf, sizeof(buf)), n);
	}
	json_builder_end_object(jb);
	add_uint(jb, "errors_total", total);
}

/* Add the latency histograms. */
static void add_latency(JsonBuilder *jb, struct dioloop_node_stats *s)
{
	int op, i;

	json_builder_set_member_name(jb, "latency_us");
	json_builder_begin_object(jb);
	for (op = 0; op < DIOLOOP_LAT_OPS; op++) {
		uint64_t count = 0;

		json_builder_set_member_name(jb, op_names[op]);
		json_builder_begin_object(jb);
		json_builder_set_member_name(jb, "buckets");
		json_builder_begin_array(jb);
		for (i = 0; i < DIOLOOP_LAT_BUCKETS; i++) {
			uint64_t n = shard_sum(&s->shard[0].lat[op][i]);

			count += n;
			json_builder_add_int_value(jb, (gint64)n);
		}
		json_builder_end_array(jb);
		add_uint(jb, "count", count);
		add_uint(jb, "sum", shard_sum(&s->shard[0].lat_sum_us[op]));
		json_builder_end_object(jb);
	}
	json_builder_end_object(jb);
}

/* Add the names of the filters stacked on the node, top first. */
static void add_filters(JsonBuilder *jb, struct backend *b)
{
	json_builder_set_member_name(jb, "filters");
	json_builder_begin_array(jb);
	for (; b->ops->is_filter; b = b->inner)
		json_builder_add_string_value(jb, b->ops->name);
	json_builder_end_array(jb);
}

/* Add the fault filter's rules and counters. */
static void add_faults(JsonBuilder *jb, struct backend *b)
{
	struct fault_rule rules[MAX_LISTED_RULES];
	struct fault_stats fst;
	unsigned int n, i;
	int k;

	n = fault_backend_get_rules(b, rules, MAX_LISTED_RULES);
	fault_backend_get_stats(b, &fst);
	json_builder_set_member_name(jb, "faults");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "rules");
	json_builder_begin_array(jb);
	for (i = 0; i < n && i < MAX_LISTED_RULES; i++) {
		g_autofree char *text = dioloop_fault_format(&rules[i]);

		json_builder_add_string_value(jb, text);
	}
	json_builder_end_array(jb);
	json_builder_set_member_name(jb, "injected");
	json_builder_begin_object(jb);
	for (k = 0; k < FAULT_KIND_NR; k++)
		add_uint(jb, fault_kind_names[k], fst.injected[k]);
	json_builder_end_object(jb);
	json_builder_set_member_name(jb, "delayed");
	json_builder_begin_object(jb);
	for (k = 0; k < FAULT_KIND_NR; k++)
		add_uint(jb, fault_kind_names[k], fst.delayed[k]);
	json_builder_end_object(jb);
	json_builder_end_object(jb);
}

/* Add the dio engine's counters of the image's backend (from its info;
 * zeros for a backend that does not run on the engine). */
static void add_engine(JsonBuilder *jb, const struct backend_info *info)
{
	json_builder_set_member_name(jb, "engine");
	json_builder_begin_object(jb);
	add_uint(jb, "requests", info->engine.requests);
	add_uint(jb, "ios", info->engine.ios);
	add_uint(jb, "segs", info->engine.segs);
	add_uint(jb, "holes", info->engine.holes);
	add_uint(jb, "bounced", info->engine.bounced);
	add_uint(jb, "rmw", info->engine.rmw);
	json_builder_end_object(jb);
}

/* The counters the backends of a node's stack emit (backend_stats). */
struct backend_counters {
	GPtrArray *keys;		/* char *, in the order emitted */
	GArray *values;			/* uint64_t, one per key */
};

/* Keep one emitted counter (backend_stat_fn). */
static void collect_counter(void *opaque, const char *key, uint64_t value)
{
	struct backend_counters *bc = opaque;

	g_ptr_array_add(bc->keys, g_strdup(key));
	g_array_append_val(bc->values, value);
}

/* The sum of the counters called key (0: none emitted). */
static uint64_t counter_sum(const struct backend_counters *bc,
			    const char *key)
{
	uint64_t sum = 0;
	guint i;

	for (i = 0; i < bc->keys->len; i++)
		if (!strcmp(bc->keys->pdata[i], key))
			sum += g_array_index(bc->values, uint64_t, i);
	return sum;
}

/* "checksum_errors" (0 when no backend counts them), then "backend":
 * every counter the stack emitted, as it came. */
static void add_backend_counters(JsonBuilder *jb, struct backend *b)
{
	struct backend_counters bc = {
		.keys = g_ptr_array_new_with_free_func(g_free),
		.values = g_array_new(FALSE, FALSE, sizeof(uint64_t)),
	};
	guint i;

	/* Filters without counters of their own forward to the backend
	 * below (backend_stats), so the top of the stack reports it all. */
	backend_stats(b, collect_counter, &bc);
	add_uint(jb, "checksum_errors", counter_sum(&bc, "checksum_errors"));
	if (bc.keys->len) {
		json_builder_set_member_name(jb, "backend");
		json_builder_begin_object(jb);
		for (i = 0; i < bc.keys->len; i++)
			add_uint(jb, bc.keys->pdata[i],
				 g_array_index(bc.values, uint64_t, i));
		json_builder_end_object(jb);
	}
	g_ptr_array_unref(bc.keys);
	g_array_unref(bc.values);
}

/* A cow node's container: its scrub, when one runs or ran. */
static void add_scrub(JsonBuilder *jb, struct dioloop_fs *fs,
		      struct dioloop_node *node)
{
	struct dioloop_image_lock *l = node->lock;
	uint64_t done, total, bad;
	bool running;

	/* An image reached by URL from a local source (a migration's
	 * destination) keeps no scrub state. */
	if (!l)
		return;
	g_mutex_lock(&fs->lock);
	running = l->scrubbing;
	done = l->scrub_done;
	total = l->scrub_total;
	bad = l->scrub_bad;
	g_mutex_unlock(&fs->lock);
	json_builder_set_member_name(jb, "scrub");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "running");
	json_builder_add_boolean_value(jb, running);
	add_uint(jb, "done", done);
	add_uint(jb, "total", total);
	add_uint(jb, "bad", bad);
	json_builder_end_object(jb);
}

/* The node's running migration, if any. */
static void add_migration(JsonBuilder *jb, struct dioloop_node *node)
{
	struct dioloop_migration_view v;

	if (!dioloop_node_migration_view(node, &v))
		return;
	json_builder_set_member_name(jb, "migration");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "phase");
	json_builder_add_string_value(jb, v.phase);
	json_builder_set_member_name(jb, "dest");
	json_builder_add_string_value(jb, v.dest);
	json_builder_set_member_name(jb, "format");
	json_builder_add_string_value(jb, v.format);
	add_uint(jb, "copied", v.done);
	add_uint(jb, "remaining", v.remaining);
	add_uint(jb, "dirty", v.dirty);
	add_uint(jb, "pass", v.pass);
	add_uint(jb, "rate_bps", (uint64_t)v.rate);
	json_builder_set_member_name(jb, "elapsed_s");
	json_builder_add_double_value(jb, v.elapsed_s);
	json_builder_end_object(jb);
	dioloop_migration_view_clear(&v);
}

/* One node's object.  Worker thread (backend_info may block). */
static void add_node(JsonBuilder *jb, struct dioloop_fs *fs,
		     struct dioloop_node *node)
{
	struct dioloop_node_stats *s = &node->stats;
	struct backend *b = dioloop_node_backend_get(node);
	struct dioloop_throttle_stats ts;
	struct dioloop_limits limits;
	struct backend_info info;
	int op;

	if (!b)
		return;		/* its volume was just deleted */
	json_builder_set_member_name(jb, node->name);
	json_builder_begin_object(jb);
	if (node->cow) {
		json_builder_set_member_name(jb, "image");
		json_builder_add_string_value(jb, node->image);
		json_builder_set_member_name(jb, "volume");
		json_builder_add_string_value(jb, node->volume ? node->volume :
								 "");
	}
	if (backend_info(b, &info) == 0) {
		json_builder_set_member_name(jb, "format");
		json_builder_add_string_value(jb, info.format);
		add_uint(jb, "size", info.size);
		add_uint(jb, "allocated", info.allocated);
	}
	json_builder_set_member_name(jb, "readonly");
	json_builder_add_boolean_value(jb, node->readonly);
	json_builder_set_member_name(jb, "ops");
	json_builder_begin_object(jb);
	for (op = 0; op < DIOLOOP_OP_NR; op++)
		add_uint(jb, op_names[op], stats_ops(s, op));
	json_builder_end_object(jb);
	json_builder_set_member_name(jb, "bytes");
	json_builder_begin_object(jb);
	for (op = 0; op < DIOLOOP_OP_NR; op++)
		add_uint(jb, op_names[op], stats_bytes(s, op));
	json_builder_end_object(jb);
	add_uint(jb, "in_flight", stats_in_flight(s));
	add_errors(jb, s);
	add_backend_counters(jb, b);
	if (node->cow)
		add_scrub(jb, fs, node);
	add_migration(jb, node);

	dioloop_throttle_get_limits(&node->throttle, &limits);
	dioloop_throttle_get_stats(&node->throttle, &ts);
	json_builder_set_member_name(jb, "throttle");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "limits");
	json_builder_begin_object(jb);
	add_limits(jb, &limits);
	json_builder_end_object(jb);
	add_uint(jb, "queued", ts.queued);
	add_uint(jb, "throttled", ts.throttled);
	add_uint(jb, "throttled_us", ts.throttled_ns / 1000u);
	json_builder_end_object(jb);

	add_latency(jb, s);
	add_filters(jb, b);
	if (fault_filter_present(b))
		add_faults(jb, b);
	add_engine(jb, &info);
	json_builder_end_object(jb);
	dioloop_node_backend_put(node);
}

/* The snapshot of the mount (stats.h).  Worker thread. */
/* How requests come from the kernel: "dev", or "uring" with its queues
 * and the requests its rings carried; and how many backend completions
 * the FUSE workers reaped themselves. */
static void add_transport(JsonBuilder *jb)
{
	struct dioloop_uring_stats st;
	struct dioloop_dev_stats dev;

	dioloop_uring_get_stats(&st);
	dioloop_dev_get_stats(&dev);
	json_builder_set_member_name(jb, "transport");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "name");
	json_builder_add_string_value(jb, st.active ? "uring" : "dev");
	if (st.enabled) {
		add_uint(jb, "uring_queues", st.queues);
		add_uint(jb, "uring_depth", st.depth);
		add_uint(jb, "uring_requests", st.requests);
		add_uint(jb, "uring_replies_handed", st.replies_handed);
		add_uint(jb, "uring_payloads_lent", st.payloads_lent);
	}
	add_uint(jb, "dev_workers_reaping", dev.workers);
	add_uint(jb, "dev_completions_reaped", dev.reaped);
	json_builder_end_object(jb);
}

/* The runs of large requests (iter/run_pool.h): how many there are, how
 * many are out and were at most, and the large requests that found one
 * and that found none (they used pool pages). */
static void add_runs(JsonBuilder *jb, struct dioloop_fs *fs)
{
	struct dioloop_run_pool_stats st;

	if (!fs->runs)
		return;
	dioloop_run_pool_get_stats(fs->runs, &st);
	json_builder_set_member_name(jb, "large_request_runs");
	json_builder_begin_object(jb);
	add_uint(jb, "runs", st.runs);
	add_uint(jb, "in_use", st.in_use);
	add_uint(jb, "high_water", st.high_water);
	add_uint(jb, "taken", st.taken);
	add_uint(jb, "missed", st.missed);
	json_builder_end_object(jb);
}

char *dioloop_stats_json(struct dioloop_fs *fs, size_t *len)
{
	g_autoptr(JsonBuilder) jb = json_builder_new();
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) root = NULL;
	struct dioloop_limits defaults;
	GPtrArray *nodes;
	unsigned long long start;
	gsize n;
	char *text;
	guint i;

	g_mutex_lock(&fs->lock);
	defaults = fs->limits;
	g_mutex_unlock(&fs->lock);

	json_builder_begin_object(jb);
	add_uint(jb, "version", 1);
	add_uint(jb, "pid", (uint64_t)getpid());
	/* With pid, names this process, not a later one with its number
	 * (dioloop umount waits for it). */
	if (dioloop_proc_start_ticks(getpid(), &start) == 0)
		add_uint(jb, "pid_start", start);
	json_builder_set_member_name(jb, "source");
	json_builder_add_string_value(jb, fs->source);
	json_builder_set_member_name(jb, "mountpoint");
	json_builder_add_string_value(jb, fs->mountpoint);
	json_builder_set_member_name(jb, "uptime_s");
	json_builder_add_double_value(jb, (double)(g_get_monotonic_time() -
						   fs->started) / G_USEC_PER_SEC);
	add_transport(jb);
	add_runs(jb, fs);
	json_builder_set_member_name(jb, "limits");
	json_builder_begin_object(jb);
	add_uint(jb, "total_bps", dioloop_throttle_group_total(&fs->throttle));
	add_limits(jb, &defaults);
	json_builder_end_object(jb);

	json_builder_set_member_name(jb, "nodes");
	json_builder_begin_object(jb);
	nodes = dioloop_fs_nodes_ref(fs);
	for (i = 0; i < nodes->len; i++)
		add_node(jb, fs, nodes->pdata[i]);
	dioloop_fs_nodes_unref(fs, nodes);
	json_builder_end_object(jb);
	json_builder_end_object(jb);

	root = json_builder_get_root(jb);
	json_generator_set_root(gen, root);
	json_generator_set_pretty(gen, TRUE);
	text = json_generator_to_data(gen, &n);
	/* A trailing newline, as text files have. */
	text = g_realloc(text, n + 2);
	text[n] = '\n';
	text[n + 1] = '\0';
	*len = n + 1;
	return text;
}
