/* SPDX-License-Identifier: MIT */
/*
 * How dioloop stats shows a mount's snapshot (MOUNTPOINT/.dioloop/stats.json,
 * parsed): the totals table, the live view of per-second rates, rates as
 * JSON, and the Prometheus text exposition format.  Human output fits 80
 * columns; JSON and Prometheus carry exact numbers.  A command-line
 * process: one thread.
 */
#ifndef DIOLOOP_CLI_STATS_FORMAT_H
#define DIOLOOP_CLI_STATS_FORMAT_H

#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdio.h>

/* What the live view shows. */
struct stats_view {
	bool tty;		/* redraw the screen in place */
	bool all;		/* also the idle nodes */
	int rows;		/* terminal height (tty), 0: unknown */
	const char *mountpoint;
	double interval;	/* seconds between reports */
};

/* The totals since the mount, one line per node (80 columns). */
void stats_print_totals(JsonObject *root);

/*
 * Per-second rates between two snapshots dt seconds apart, busy nodes
 * first, idle ones hidden unless v->all.  On a terminal the screen is
 * cleared and redrawn; otherwise each node's line starts with the time
 * and the header is printed once (first set).
 */
void stats_print_rates(JsonObject *prev, JsonObject *cur, double dt,
		       const struct stats_view *v, bool first);

/* The same rates as one line of JSON (exact numbers, stable keys). */
void stats_print_rates_json(JsonObject *prev, JsonObject *cur, double dt);

/* The snapshot in the Prometheus text exposition format (version 0.0.4):
 * counters, gauges and the latency histograms, labelled by node. */
void stats_print_prometheus(FILE *f, JsonObject *root);

#endif
