/* SPDX-License-Identifier: MIT */
/* One token bucket (token_bucket.h). */
#include "backends/token_bucket.h"

#include <glib.h>
#include <math.h>
#include <stdbool.h>

#define NSEC_PER_SEC 1000000000.0

void dioloop_bucket_refill(struct dioloop_bucket *b, uint64_t now)
{
	if (b->rate <= 0 || now <= b->stamp) {
		if (now > b->stamp)
			b->stamp = now;
		return;
	}
	b->tokens += b->rate * (double)(now - b->stamp) / NSEC_PER_SEC;
	if (b->tokens > b->capacity)
		b->tokens = b->capacity;
	b->stamp = now;
}

uint64_t dioloop_bucket_wait(const struct dioloop_bucket *b)
{
	if (b->rate <= 0 || b->tokens > 0)
		return 0;
	return (uint64_t)ceil(-b->tokens * NSEC_PER_SEC / b->rate) + 1;
}

void dioloop_bucket_charge(struct dioloop_bucket *b, double cost)
{
	if (b->rate > 0)
		b->tokens -= cost;
}

void dioloop_bucket_set(struct dioloop_bucket *b, uint64_t rate,
			uint32_t burst_ms, uint64_t now)
{
	bool was_limited = b->rate > 0;

	dioloop_bucket_refill(b, now);
	b->rate = (double)rate;
	b->capacity = MAX(b->rate * burst_ms / 1000.0, 1.0);
	b->stamp = now;
	if (!rate)
		b->tokens = 0;
	else if (!was_limited)
		b->tokens = b->capacity;
	else
		b->tokens = CLAMP(b->tokens, 0.0, b->capacity);
}
