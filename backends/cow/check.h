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

#include "backends/volume.h"

/* The core's check types (backends/volume.h) under their cow names. */
#define cow_check_result backend_check_result
#define COW_CHECK_DATA BACKEND_CHECK_DATA
typedef backend_check_report_fn cow_check_report_t;

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
