/* SPDX-License-Identifier: MIT */
/*
 * Inside the cow backend: one open container and its default volume
 * (struct cow_image), shared by image.c (open/close), commit.c
 * (transactions), cow.c (the ops and the I/O path).
 *
 * Locks, in the order they nest:
 *   commit_lock   one commit at a time; protects sb, file_blocks.
 *   map_lock      the volume tree, the open volume's entry and block map,
 *                 the open transaction's refops and change count.
 *   alloc_lock    inside struct cow_alloc (alloc.h).
 *   epoch_lock, inflight_lock   leaves; never held across another lock.
 *
 * Transactions: the open transaction is generation committed_gen + 1.
 * Mapping changes record their reference changes in refops; the commit
 * seals the transaction under map_lock (moving dirty map and volume pages
 * to new blocks, taking refops, advancing the read epoch), then applies
 * the refops and writes everything without map_lock (commit.c).
 *
 * Read epochs: every request enters the epoch of the open transaction
 * before looking anything up and leaves it when it ends.  A block unmapped
 * in generation g is reused only when no request of an epoch <= g is
 * still running (alloc.h's reuse rule gets the oldest epoch).
 */
#ifndef DIOLOOP_COW_INT_H
#define DIOLOOP_COW_INT_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/cow/alloc.h"
#include "backends/cow/cow.h"
#include "backends/cow/format.h"
#include "backends/cow/tree.h"

#define COW_DEFAULT_COMMIT_MS 5000u
/* A transaction this large (blocks changed) is committed at once, so that
 * the space it pins (freed blocks wait for the commit after next) stays
 * bounded under heavy overwriting.  Not with a commit interval of 0. */
#define COW_COMMIT_SOON_CHANGES ((uint64_t)16384)

/* Readers of one epoch. */
struct cow_epoch {
	uint64_t epoch;
	unsigned int count;		/* by epoch_lock */
};

struct cow_image {
	struct backend *b;
	struct cow_meta meta;
	bool rdonly;
	bool growable;
	bool opened;			/* open succeeded: close commits */
	struct dioloop_aio *own_aio;	/* when the caller gave none */

	GMutex commit_lock;
	struct cow_sb sb;		/* last durable; by commit_lock */
	uint64_t file_blocks;		/* file size known; by commit_lock */
	_Atomic uint64_t committed_gen;
	atomic_bool failed;		/* a commit failed: no more writes */

	GMutex map_lock;
	struct cow_tree voltree;	/* by map_lock */
	struct cow_volume_entry vol;	/* the open volume; by map_lock */
	struct cow_tree map;		/* its block map; by map_lock */
	GArray *refops;			/* struct cow_refop; by map_lock */
	uint64_t changes;		/* in the open transaction; by map_lock */
	_Atomic uint64_t size;		/* vol.size, readable without lock */

	struct cow_alloc alloc;

	GMutex epoch_lock;
	uint64_t epoch;			/* the open transaction; by epoch_lock */
	GQueue epochs;			/* struct cow_epoch, oldest first */

	GMutex inflight_lock;
	GHashTable *inflight;		/* pbn -> struct cow_inflight */

	/* The periodic committer. */
	GThread *committer;
	GMutex committer_lock;
	GCond committer_cond;
	bool committer_stop;		/* by committer_lock */
	bool commit_soon;		/* by committer_lock */
	unsigned int commit_ms;		/* by committer_lock */

	_Atomic uint64_t commits;
	_Atomic uint64_t meta_errors;	/* data errors: b->checksum_errors */
};

/* A block in flight: what a read expects, or where a write's checksum
 * goes.  By inflight_lock. */
struct cow_inflight {
	uint64_t pbn;			/* the key */
	uint64_t csum;
	uint64_t lbn;
	unsigned int users;
	struct cow_wblk *wblk;		/* writes: the request's record */
};

/* One block of a write request. */
struct cow_wblk {
	uint64_t pbn;			/* reserved block */
	uint64_t csum;			/* set at submission */
	bool registered;		/* in the inflight table */
	bool installed;			/* its mapping is in the map */
};

/* Call the test hook at point, if one is set. */
void cow_test_point(enum cow_test_point point);

/* image.c */
int cow_image_open(struct cow_image *img, const struct backend_open_args *args);
void cow_image_close(struct cow_image *img);
struct cow_epoch *cow_epoch_enter(struct cow_image *img);
void cow_epoch_leave(struct cow_image *img, struct cow_epoch *e);
uint64_t cow_epoch_oldest(struct cow_image *img);
/* Log a metadata error (counted) for the image: "path: message". */
void cow_meta_error(struct cow_image *img, const struct cow_err *err);

/* commit.c */
/* Commit the open transaction if anything changed: 0 or -errno (the
 * image is failed after an error).  Worker thread. */
int cow_commit(struct cow_image *img);
/* Opening for writing: commit generation g+1 with the same roots (only
 * a superblock), retiring the older copy, so that blocks free on disk are
 * reusable at once (FORMAT.md section 7).  Control thread. */
int cow_commit_open(struct cow_image *img);
void cow_committer_start(struct cow_image *img);
/* The open transaction is large: ask the committer to commit now.  Any
 * thread; takes committer_lock only. */
void cow_committer_kick(struct cow_image *img);
void cow_committer_stop(struct cow_image *img);

#endif
