/* SPDX-License-Identifier: MIT */
/*
 * Live migration of an image in use from one backend to another, block
 * range by block range (QEMU's blockdev-mirror; the kernel's
 * migrate_pages() for the counting).
 *
 * The image keeps serving requests from the source.  The copier moves
 * every allocated range (its per-range copy); the mirror filter on the
 * source marks every range a request changes dirty (migration_mark_dirty,
 * after the change completed on the source), so a range written during
 * its copy is copied again.  Passes repeat until little is dirty; then the owner quiesces
 * the image (no request in flight, none admitted), calls
 * migration_finish, which copies the rest and flushes the destination,
 * and switches to the destination before admitting requests again.
 *
 * The source is never written by the migration, so a migration that
 * fails, is cancelled, or dies with the process leaves the image whole on
 * its source.
 *
 * Counting, as migrate_pages() does: a pass returns how many ranges it
 * could not move (failed, or -EAGAIN: to retry); retried ranges stay
 * dirty for the next pass; a range that fails for good stops the
 * migration with its first error and position.
 *
 * The destination must read as zeros where the source has holes at the
 * start (a new image): ranges that are holes and never written are not
 * touched.
 *
 * Threads: migration_copy and migration_finish on one worker thread;
 * mark_dirty, cancel and get_progress from any thread.
 */
#ifndef DIOLOOP_FILTER_MIRROR_H
#define DIOLOOP_FILTER_MIRROR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"

/* Dirty-tracking granularity (and the copy's unit): doubled for images
 * of more than MIGRATE_MAX_CHUNKS of it, so that the bookkeeping (a bit
 * and two bytes a chunk) stays under about 34 MiB whatever the size. */
#define MIGRATE_CHUNK ((uint64_t)1 << 20)
#define MIGRATE_MAX_CHUNKS ((uint64_t)1 << 24)
/* Dirty chunks left at which the copy stops and the owner quiesces. */
#define MIGRATE_CONVERGED_CHUNKS 8

struct migrate_opts {
	uint64_t bps;			/* copy rate limit in bytes/s; 0: none */
	bool ignore_bad_blocks;		/* unreadable source blocks become
					 * holes (counted) instead of failing */
	unsigned int max_passes;	/* online passes before the owner
					 * must quiesce anyway; 0: 30 */
	unsigned int max_retries;	/* -EAGAIN per range before it
					 * counts as failed; 0: 10 */
};

struct migrate_progress {
	uint64_t size;			/* the image's logical size */
	uint64_t total;			/* bytes to copy so far (first pass
					 * plus every re-dirtied range) */
	uint64_t done;			/* bytes copied */
	uint64_t dirty;			/* bytes waiting to be (re)copied */
	unsigned int passes;
	uint64_t ranges_ok;		/* MIGRATEPAGE_SUCCESS */
	uint64_t ranges_retried;	/* -EAGAIN, copied again later */
	uint64_t ranges_failed;		/* failed for good */
	uint64_t bad_blocks;		/* skipped with ignore_bad_blocks */
	int error;			/* first failure, or 0 */
	uint64_t error_pos;		/* where */
	bool finished;			/* migration_finish succeeded */
};

struct migration;

/* Start tracking src -> dst (same logical size needed: dst at least as
 * large).  0 or -errno (-EINVAL for a smaller dst). */
int migration_new(struct backend *src, struct backend *dst,
		  const struct migrate_opts *opts, struct migration **out);
void migration_free(struct migration *m);

/* [pos, pos + len) changed on the source.  Any thread; lock-free. */
void migration_mark_dirty(struct migration *m, uint64_t pos, uint64_t len);

/*
 * One pass over the dirty ranges: 0 when every range moved, > 0 the
 * number of ranges not moved (retried ones stay dirty), -ECANCELED, or
 * the -errno of a range that failed for good (progress says where).
 */
int migration_pass(struct migration *m);

/*
 * Mark what the source has allocated dirty, then run passes until at
 * most MIGRATE_CONVERGED_CHUNKS chunks are dirty or max_passes ran: 0 (quiesce
 * and finish now), -ECANCELED or -errno.
 */
int migration_copy(struct migration *m);

/* With the image quiesced: copy what is dirty and flush the destination.
 * 0 (switch now) or -errno (stay on the source). */
int migration_finish(struct migration *m);

/* Ask a running copy to stop at the next range: it returns -ECANCELED. */
void migration_cancel(struct migration *m);
bool migration_cancelled(struct migration *m);

void migration_get_progress(struct migration *m, struct migrate_progress *p);

/*
 * The mirror filter: stacked on the migration's source, it marks dirty
 * every range a write, discard, write_zeroes, resize or clone changes as
 * it passes down (after the source completed it), so its owner need not.
 * It owns the switch.  Its owner stacks, removes and switches it with the
 * image drained (no request in flight, none starting) and closes it after
 * it left the stack (then it holds nothing: its engine stays the owner's,
 * freed after the filter).
 */
extern const struct backend_ops mirror_backend_ops;

/* Open a mirror filter over m's source: 0 or -errno.  Control thread. */
int mirror_filter_open(struct migration *m, struct backend **out);
/* Put mirror into the stack *top in place of its source (drained). */
void mirror_filter_insert(struct backend **top, struct backend *mirror);
/* Take mirror out of the stack *top, its source back in its place
 * (drained): the migration is abandoned. */
void mirror_filter_remove(struct backend **top, struct backend *mirror);
/* The switch (drained, after migration_finish): the destination takes
 * the mirror's place in the stack *top; *old is the source, the
 * caller's to close.  0, or -EINVAL when the copy has not finished. */
int mirror_filter_switch(struct backend **top, struct backend *mirror,
			 struct backend **old);

#endif
