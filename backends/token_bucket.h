/* SPDX-License-Identifier: MIT */
/*
 * One token bucket, shared by the daemon's throttle (fusefs/throttle.c)
 * and the mirror filter's copy rate.
 *
 * A bucket holds up to capacity tokens (rate x burst_ms, at least one)
 * and gains rate tokens per second.  Whoever takes tokens takes its whole
 * cost, which may leave the bucket in debt; it has tokens again after
 * dioloop_bucket_wait nanoseconds.  Times are monotonic nanoseconds given
 * by the caller (tests drive a fake clock).  No locking: the owner's.
 */
#ifndef DIOLOOP_TOKEN_BUCKET_H
#define DIOLOOP_TOKEN_BUCKET_H

#include <stdint.h>

struct dioloop_bucket {
	double rate;			/* tokens per second, 0 = unlimited */
	double capacity;		/* the most tokens saved up */
	double tokens;			/* may be < 0: the debt of a request
					 * admitted with too few */
	uint64_t stamp;			/* ns: tokens are as of this time */
};

/* Add the tokens earned since the last refill, up to capacity. */
void dioloop_bucket_refill(struct dioloop_bucket *b, uint64_t now);
/* Nanoseconds until the bucket has tokens again (0: it has some now, or
 * it has no limit). */
uint64_t dioloop_bucket_wait(const struct dioloop_bucket *b);
/* Take cost tokens (into debt if need be). */
void dioloop_bucket_charge(struct dioloop_bucket *b, double cost);
/*
 * New rate (0: no limit) and burst, as of now.  A bucket that had no
 * limit starts full; one that had a limit keeps its tokens (clamped to
 * the new capacity) but not its debt: a new limit takes effect at once.
 */
void dioloop_bucket_set(struct dioloop_bucket *b, uint64_t rate,
			uint32_t burst_ms, uint64_t now);

#endif
