/* SPDX-License-Identifier: MIT */
/*
 * The "cow" backend (btrfs-like): copy-on-write images with per-block
 * checksums, in the format of backends/cow/FORMAT.md.  Opened through
 * backend_open("cow", ...); the ops table is cow_backend_ops.  Images are
 * created with cow_format() (format.h).  Exported here: recognising an
 * image, its statistics, the commit interval, and test hooks.
 */
#ifndef DIOLOOP_COW_H
#define DIOLOOP_COW_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"

extern const struct backend_ops cow_backend_ops;

/* True when path is a cow image (its superblock magic, either slot). */
bool cow_is_image(const char *path);

struct cow_stats {
	uint64_t generation;		/* last durable commit */
	uint64_t size;			/* logical bytes of the volume */
	uint64_t mapped_blocks;		/* volume blocks that are not holes */
	uint64_t nr_blocks;		/* container blocks (its size / 4096) */
	uint64_t used_blocks;		/* container blocks referenced */
	uint64_t pinned_blocks;		/* freed, not reusable yet */
	uint64_t commits;		/* commits since open */
	uint64_t csum_errors;		/* data blocks that failed their check
					 * (also in b->checksum_errors) */
	uint64_t meta_errors;		/* metadata pages that failed theirs */
	uint8_t csum_type;		/* enum cow_csum_type */
	bool failed;			/* a commit failed: read-only until reopened */
};

/* Fill st for an open cow backend.  Any thread. */
void cow_get_stats(struct backend *b, struct cow_stats *st);

/* Where logical block lbn of the volume is: *pbn (0: a hole) and its
 * checksum.  0 or -EIO.  Worker thread (may read map pages). */
int cow_map_block(struct backend *b, uint64_t lbn, uint64_t *pbn,
		  uint64_t *csum);

/* Commit every ms milliseconds when something changed (0: only on
 * flush and close).  Default 5000.  Any thread. */
void cow_set_commit_interval(struct backend *b, unsigned int ms);

/* Named points of the I/O path and the commit, for crash tests. */
enum cow_test_point {
	/* A data write's I/O completed; its mapping is not installed. */
	COW_TEST_DATA_WRITTEN,
	/* A commit sealed the transaction; nothing written yet. */
	COW_TEST_SEALED,
	/* The commit's metadata pages are written, not yet synced. */
	COW_TEST_META_WRITTEN,
	/* ... and synced; the superblock is not written yet. */
	COW_TEST_META_DURABLE,
	/* The superblock is written, not yet synced. */
	COW_TEST_SB_WRITTEN,
	/* The commit is durable. */
	COW_TEST_COMMITTED,
	COW_TEST_NR_POINTS
};

/*
 * Called at each point when set (NULL in production), on whatever thread
 * reaches it (the aio completion thread for COW_TEST_DATA_WRITTEN).  A
 * test typically SIGKILLs a forked child from it.  Set it before opening.
 */
extern void (*cow_test_hook)(enum cow_test_point point);

#endif
