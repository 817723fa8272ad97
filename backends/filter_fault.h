/* SPDX-License-Identifier: MIT */
/*
 * The fault filter's interface (implemented in backends/filters/fault/):
 * a filter that injects errors and latency by rule into the ops it
 * changes; the core forwards the rest (backend.h, filters).
 *
 * Stack it with fault_filter_stack, or backend_open("fault", args) with
 * args->inner = the backend to wrap (args->path is only a label).  On
 * success the filter owns inner (the core closes it after the filter); if
 * open fails, inner still belongs to the caller.
 *
 * The functions below take any backend stack: they act on the first fault
 * filter in it (backend_find_filter); on a stack without one, adding a
 * rule is -EINVAL, and there are no rules, no counters and nothing to
 * clear.
 *
 * A rule matches an op when the op's kind is in rule->ops and, for ops
 * with a byte range (read, write, discard, write_zeroes, map, clone_range),
 * the range touches [range_start, range_start + range_len) (range_len 0:
 * anywhere; ops without a range, such as flush or resize, ignore it).
 *
 * Of the matching ops, a rule fails (returns -error) those picked by its
 * triggers: the nth one (nth), every kth one (every), a random fraction
 * (fraction, from the rule's own PRNG seeded with seed); any trigger that
 * is set may pick an op; a rule with no trigger set picks every matching
 * op.  latency_us is added to every matching op, picked or not.  Rules are
 * checked in the order added: the first rule that picks an op gives the
 * error, latencies of all matching rules add up.
 *
 * Latency: a synchronous caller sleeps; an asynchronous kiocb is never
 * blocked on: its completion (or the injected error, or a result the inner
 * backend returned inline) is delivered later by the fault backend's delay
 * thread, and direct_IO_bvec returns -EIOCBQUEUED.  Without latency an
 * injected error is returned inline (no callback).  The blocking ops
 * (flush, discard, write_zeroes, clone_range) sleep out their latency
 * when called
 * through the ops table; fault_backend_submit_op runs them with no thread
 * waiting: the delay thread runs the op once it is due.
 *
 * Threads: rules may be added, cleared and counters read from any thread
 * while I/O runs (one mutex; with no rule set, ops pass without taking it,
 * so the layer costs next to nothing when it injects nothing).  Delayed completions run on the delay
 * thread, which close joins: never close from a completion callback.
 */
#ifndef DIOLOOP_FILTER_FAULT_H
#define DIOLOOP_FILTER_FAULT_H

#include <stdint.h>

#include "backends/backend.h"

extern const struct backend_ops fault_backend_ops;

/* Open a fault filter (no rule yet) over inner: 0 or -errno.  On success
 * *out owns inner.  Control thread. */
int fault_filter_stack(struct backend *inner, struct backend **out);
/* Is a fault filter stacked in b? */
bool fault_filter_present(struct backend *b);

/* Kinds of op a rule can match; FAULT_OP(kind) is its bit in rule->ops. */
enum fault_op_kind {
	FAULT_KIND_READ,
	FAULT_KIND_WRITE,
	FAULT_KIND_FLUSH,
	FAULT_KIND_DISCARD,
	FAULT_KIND_WRITE_ZEROES,
	FAULT_KIND_RESIZE,
	FAULT_KIND_MAP,
	FAULT_KIND_CLONE_RANGE,	/* matched on the destination's range */
	FAULT_KIND_NR
};

#define FAULT_OP(kind) (1u << (kind))

enum {
	FAULT_OP_READ = FAULT_OP(FAULT_KIND_READ),
	FAULT_OP_WRITE = FAULT_OP(FAULT_KIND_WRITE),
	FAULT_OP_FLUSH = FAULT_OP(FAULT_KIND_FLUSH),
	FAULT_OP_DISCARD = FAULT_OP(FAULT_KIND_DISCARD),
	FAULT_OP_WRITE_ZEROES = FAULT_OP(FAULT_KIND_WRITE_ZEROES),
	FAULT_OP_RESIZE = FAULT_OP(FAULT_KIND_RESIZE),
	FAULT_OP_MAP = FAULT_OP(FAULT_KIND_MAP),
	FAULT_OP_CLONE_RANGE = FAULT_OP(FAULT_KIND_CLONE_RANGE),
	FAULT_OP_ALL = FAULT_OP(FAULT_KIND_NR) - 1,
};

struct fault_rule {
	unsigned int ops;	/* FAULT_OP_* bits, != 0 */
	uint64_t nth;		/* pick the nth matching op (1-based); 0 off */
	uint64_t every;		/* pick every kth matching op; 0 off */
	double fraction;	/* pick this fraction, 0..1; 0 off */
	uint64_t seed;		/* PRNG seed for fraction */
	uint64_t range_start;	/* only ops touching this byte range... */
	uint64_t range_len;	/* ...; 0 = any */
	int error;		/* positive errno for picked ops; 0 none */
	unsigned int latency_us;	/* added to every matching op */
};

struct fault_stats {
	uint64_t ops[FAULT_KIND_NR];		/* ops seen */
	uint64_t injected[FAULT_KIND_NR];	/* ops failed by a rule */
	uint64_t delayed[FAULT_KIND_NR];	/* ops given latency */
};

/* A blocking op submitted through fault_backend_submit_op. */
struct fault_op {
	enum fault_op_kind kind;	/* FLUSH, DISCARD, WRITE_ZEROES or
					 * CLONE_RANGE */
	uint64_t pos, len;		/* its range (not for FLUSH); for
					 * CLONE_RANGE the destination's */
	struct backend *src;		/* CLONE_RANGE: the source, a fault
					 * backend too */
	uint64_t src_pos;		/* CLONE_RANGE */
	/* Called once, from the delay thread, with the op's result (0 or,
	 * for CLONE_RANGE, bytes; or -errno), for an op that submit
	 * delayed (it returned -EIOCBQUEUED). */
	void (*done)(struct fault_op *op, ssize_t ret);
};

/*
 * Run op on b (the destination for CLONE_RANGE) as the rules of its fault
 * filter say: without latency (or without a fault filter), at once,
 * returning the op's result; with latency, return -EIOCBQUEUED and let
 * the delay thread run the op once it is due (or fail it) and call
 * op->done.  No thread waits out the latency.  -EINVAL for another kind.
 * Any thread.
 */
ssize_t fault_backend_submit_op(struct backend *b, struct fault_op *op);

/* Add a rule (copied): 0, -EINVAL for a rule that names no op, has an
 * error that is not a positive errno, a fraction outside [0, 1] or does
 * nothing (no error and no latency), -EAGAIN when the thread that
 * delivers delayed completions (started by the first rule with a
 * latency) cannot be started. */
int fault_backend_add_rule(struct backend *b, const struct fault_rule *r);
/* Remove every rule; later ops pass straight through.  Counters stay. */
void fault_backend_clear(struct backend *b);
/* Copy up to max rules, in order, into rules; returns how many there
 * are (may exceed max). */
unsigned int fault_backend_get_rules(struct backend *b,
				     struct fault_rule *rules,
				     unsigned int max);
/* A snapshot of the counters / zero them. */
void fault_backend_get_stats(struct backend *b, struct fault_stats *st);
void fault_backend_reset_stats(struct backend *b);

#endif
