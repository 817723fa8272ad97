/* SPDX-License-Identifier: MIT */
/*
 * Checking a cow image offline (FORMAT.md section 9): every page reachable
 * from the chosen superblock is read and verified, references are counted
 * and compared with the refcount tree.  Independent of the backend's
 * in-memory trees (it uses only format.h), so it can judge them.  The
 * image must not be open for writing meanwhile.
 *
 * Memory: 9 bytes per container block (a 1 TiB container needs 2.25 GiB).
 */
#ifndef DIOLOOP_COW_CHECK_H
#define DIOLOOP_COW_CHECK_H

#include <stdint.h>

struct cow_check_result {
	uint64_t generation;		/* the superblock checked */
	uint64_t nr_blocks;
	uint64_t used_blocks;		/* non-zero counts */
	uint64_t pages;			/* distinct metadata pages reachable */
	uint64_t data_blocks;		/* distinct data blocks referenced */
	uint64_t volumes;
	uint64_t errors;		/* problems found, leaks included */
	uint64_t leaked;		/* blocks counted more than referenced */
	uint64_t bad_data;		/* COW_CHECK_DATA: checksum mismatches */
};

enum cow_check_flags {
	/* Also read every referenced data block and verify its checksum
	 * (an offline scrub); each mismatch is a problem naming the
	 * volume, logical and physical block. */
	COW_CHECK_DATA = 1 << 0,
};

/* Receives each problem as one line (the first 100 at most). */
typedef void (*cow_check_report_t)(void *opaque, const char *msg);

/*
 * Check the image at path (flags: enum cow_check_flags).  0 when the
 * check ran (res->errors says whether the image is clean), or -errno when
 * it could not (-EINVAL: not a cow image; -EUCLEAN: no usable superblock;
 * -ENOMEM; -EIO), with the reason reported.  report may be NULL.
 */
int cow_check(const char *path, unsigned int flags,
	      struct cow_check_result *res, cow_check_report_t report,
	      void *opaque);

#endif
