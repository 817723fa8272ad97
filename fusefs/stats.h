/* SPDX-License-Identifier: MIT */
/*
 * Per-node statistics: ops and bytes by type, requests in flight, errors
 * by errno, and log2 latency histograms for read, write and flush.  The
 * counters are atomics bumped on the I/O path (any thread, no lock); the
 * JSON snapshot (MOUNTPOINT/.dioloop/stats.json) is built on a worker
 * thread from them and from the throttle, the fault filter and the
 * backend.
 *
 * A request is counted when it is answered, just before the reply, so a
 * caller that reads the statistics after its request returned sees it.
 * Latency runs from the request's arrival in the daemon to its reply:
 * what the caller waited, time spent throttled included (which is also
 * counted on its own).
 */
#ifndef DIOLOOP_STATS_H
#define DIOLOOP_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

enum dioloop_stat_op {
	DIOLOOP_OP_READ,
	DIOLOOP_OP_WRITE,
	DIOLOOP_OP_FLUSH,
	DIOLOOP_OP_DISCARD,
	DIOLOOP_OP_WRITE_ZEROES,
	DIOLOOP_OP_COPY,		/* copy_file_range, counted on the target */
	DIOLOOP_OP_NR
};

/* Ops with a latency histogram: read, write, flush (the first three). */
#define DIOLOOP_LAT_OPS 3
/* Bucket i counts latencies in [2^i, 2^(i+1)) microseconds (bucket 0
 * also those under 1 us); the last bucket everything above. */
#define DIOLOOP_LAT_BUCKETS 32
/* errors[e] counts errno e; errno values at or above this share the
 * last slot. */
#define DIOLOOP_ERRNO_SLOTS 134

/* Shards of a node's counters: each thread counts in its own (threads
 * take them in turn), so that threads serving one node do not pass its
 * counters' cache lines back and forth; a reader sums them. */
#define DIOLOOP_STATS_SHARDS 8

struct dioloop_stats_shard {
	_Alignas(64) _Atomic uint64_t ops[DIOLOOP_OP_NR];
	_Atomic uint64_t bytes[DIOLOOP_OP_NR];	/* of successful requests */
	_Atomic int64_t in_flight;	/* arrived here less answered here */
	_Atomic uint64_t lat[DIOLOOP_LAT_OPS][DIOLOOP_LAT_BUCKETS];
	_Atomic uint64_t lat_sum_us[DIOLOOP_LAT_OPS];
};

struct dioloop_node_stats {
	struct dioloop_stats_shard shard[DIOLOOP_STATS_SHARDS];
	/* Errors are rare: one set. */
	_Atomic uint64_t errors[DIOLOOP_ERRNO_SLOTS];
};

/* Names used in the JSON and by dioloop stats ("read", ...). */
const char *dioloop_stat_op_name(enum dioloop_stat_op op);
/* The histogram bucket of a latency in microseconds. */
unsigned int dioloop_lat_bucket(uint64_t us);

/* A request arrived: count it in flight; returns its start time (ns).
 * Any thread. */
uint64_t dioloop_stats_begin(struct dioloop_node_stats *s);
/* It is answered: bytes on success, or err (-errno) on failure.  Any
 * thread; call before replying. */
void dioloop_stats_end(struct dioloop_node_stats *s, enum dioloop_stat_op op,
		       uint64_t bytes, int err, uint64_t start_ns);

struct dioloop_fs;
/* The JSON snapshot of the mount (g_free it).  Worker thread. */
char *dioloop_stats_json(struct dioloop_fs *fs, size_t *len);

#endif
