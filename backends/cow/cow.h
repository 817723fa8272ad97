/* SPDX-License-Identifier: MIT */
/*
 * The "cow" backend (btrfs-like): copy-on-write images with per-block
 * checksums, in the format of backends/cow/FORMAT.md.  Opened through
 * backend_open("cow", ...); the ops table is cow_backend_ops.  Images are
 * created with cow_format() (format.h).  Volumes, scrub, check and the
 * counters are reached through the table (backends/volume.h); what is
 * exported here is for the cow folder, the registry and tests:
 * recognising an image, its statistics, the commit interval, and test
 * hooks.
 */
#ifndef DIOLOOP_COW_H
#define DIOLOOP_COW_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "backends/backend.h"
#include "backends/volume.h"

extern const struct backend_ops cow_backend_ops;

/* True when path is a cow image (its superblock magic, either slot). */
bool cow_is_image(const char *path);
/* The same for an open file descriptor (O_PATH too). */
bool cow_is_image_fd(int fd);

struct cow_stats {
	uint64_t generation;		/* last durable commit */
	uint64_t size;			/* logical bytes of the volume */
	uint64_t mapped_blocks;		/* volume blocks that are not holes */
	uint64_t nr_blocks;		/* container blocks (its size / 4096) */
	uint64_t used_blocks;		/* container blocks referenced */
	uint64_t pinned_blocks;		/* freed, not reusable yet */
	uint64_t commits;		/* commits since open */
	uint64_t csum_errors;		/* data blocks of this volume that
					 * failed their check */
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

/* ---- volumes: snapshots and clones (FORMAT.md section 8) ----
 *
 * A cow backend serves one volume of a container: the default volume, or
 * the one backend_open_args.volume names.  Every volume of one container
 * opened in this process shares one container object (one file
 * descriptor, lock, allocator and committer): a commit writes every open
 * volume's changes in one transaction.  A volume that is a snapshot opens
 * read-only whatever the flags say.
 */

/* The core's volume types (backends/volume.h) under their cow names. */
#define COW_VOLUME_NAME_MAX BACKEND_VOLUME_NAME_MAX
#define cow_volume_info backend_volume_info
#define cow_scrub_progress backend_scrub_progress
#define cow_bad_block backend_bad_block
typedef backend_scrub_progress_fn cow_scrub_progress_t;
typedef backend_scrub_bad_fn cow_scrub_bad_t;

/* The volume op set of cow_backend_ops (volume_ops.c). */
extern const struct backend_volume_ops cow_volume_ops;

/* True when name is acceptable for a new volume. */
bool cow_volume_name_valid(const char *name);

/*
 * The volumes of b's container, in id order, appended to out (GArray of
 * struct cow_volume_info), as the open transaction sees them.  0 or
 * -errno.  Worker thread (may read volume pages).
 */
int cow_list_volumes(struct backend *b, GArray *out);

/*
 * Freeze b's volume as a new volume called name: a read-only snapshot
 * (writable false) or a writable clone.  The new volume holds exactly the
 * writes that completed before the call (point in time; writes racing
 * with the call land in one of the two states, never torn within a
 * block); it is durable when this returns.  Costs one volume entry: no
 * data or map page is copied.  0, -EEXIST (the name is taken), -EINVAL (a
 * bad name), -EROFS (container read-only), -ENOSPC, -EIO.  Worker thread.
 */
int cow_snapshot(struct backend *b, const char *name, bool writable);

/*
 * Delete the volume called name from b's container, freeing the blocks no
 * other volume references; durable when this returns.  0, -ENOENT,
 * -EBUSY (it is open, or it is the default volume), -EROFS, -EIO.
 * Worker thread.
 */
int cow_delete_volume(struct backend *b, const char *name);

/* ---- scrub: verify every data block of every volume ---- */

/*
 * Read and verify every mapped block of every volume of b's container
 * (a block shared by several volumes is read once and reported for
 * each), while the volumes stay in use: changes since the last commit are
 * seen, and no block is reused while being checked.  Bad blocks are also
 * counted in the checksum_errors of open volumes and logged.  0 when the
 * scrub ran to the end (res says what it found), -ECANCELED, or -errno.
 * Worker thread.  Callbacks may be NULL.
 */
int cow_scrub(struct backend *b, cow_scrub_progress_t progress,
	      cow_scrub_bad_t bad, void *opaque, struct cow_scrub_progress *res);

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
