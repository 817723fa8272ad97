/* SPDX-License-Identifier: MIT */
/*
 * Limits and fault rules as users write them: in mount options
 * (-o iops=500,fault=disk0.img:write:error=EIO), on the dioloop limit and
 * dioloop fault command lines and in the control file.  One parser for
 * all of them, so the command line and the daemon agree on what is
 * valid.  Pure (GLib only); errors come back as -EINVAL with a one-line
 * message for the user.
 */
#ifndef DIOLOOP_SPEC_H
#define DIOLOOP_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/filter_fault.h"
#include "fusefs/throttle.h"

/* Limit keys: the rates first (enum dioloop_rate_key), then these. */
enum {
	DIOLOOP_LIMIT_BURST_MS = DIOLOOP_RATE_NR,	/* burst_ms */
	DIOLOOP_LIMIT_TOTAL_BPS,	/* total_bps: mount-wide, shared */
	DIOLOOP_LIMIT_KEY_NR
};

/* Some limits to change: value[k] is set when bit k of mask is. */
struct dioloop_limit_update {
	unsigned int mask;
	uint64_t value[DIOLOOP_LIMIT_KEY_NR];
};

/* The name of limit key k ("iops", "read_bps", "total_bps", ...). */
const char *dioloop_limit_key_name(int k);
/* The key named name, or -1. */
int dioloop_limit_key(const char *name);
/*
 * Parse one "key=value" into u.  Rates: a count per second (bps keys take
 * K/M/G/T suffixes, powers of 1024); 0, "off" or "none" mean no limit.
 * burst_ms: 1..60000.  0, or -EINVAL with *err set (g_free it).
 */
int dioloop_limit_parse(const char *word, struct dioloop_limit_update *u,
			char **err);
/* Apply the per-node keys of u to l (total_bps is the group's). */
void dioloop_limits_update(struct dioloop_limits *l,
			   const struct dioloop_limit_update *u);
/* "iops=500 read_iops=0 ... burst_ms=100" (g_free it). */
char *dioloop_limits_format(const struct dioloop_limits *l);

/*
 * Parse a fault rule from words: op kinds (read, write, flush, discard,
 * zero, all, or several joined with '+'; default read+write), then
 * error=EIO|ENOSPC, rate=FRACTION|PERCENT%, nth=N, every=N,
 * delay=N[us|ms|s] (plain N: ms), offset=BYTES, length=BYTES, seed=N.
 * No error= and no delay=: error=EIO.  0, or -EINVAL with *err set.
 */
int dioloop_fault_parse(char *const *words, int n, struct fault_rule *r,
			char **err);
/* The rule in the words the parser takes (g_free it). */
char *dioloop_fault_format(const struct fault_rule *r);

/* "EIO" for EIO (positive errno); "E<n>" when it has no name. */
const char *dioloop_errno_name(int err, char *buf, unsigned len);

#endif
