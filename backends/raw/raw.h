/* SPDX-License-Identifier: MIT */
/*
 * The "raw" backend: plain image files on the host, O_DIRECT + libaio,
 * direct-mapped, with ext4's size-extension protocol for growable images
 * (orphan.h).  Opened through backend_open("raw", ...); the ops table is
 * raw_backend_ops.  Only test hooks are exported here.
 */
#ifndef DIOLOOP_RAW_H
#define DIOLOOP_RAW_H

#include "backends/backend.h"

extern const struct backend_ops raw_backend_ops;

/* Named points of the extension protocol, for crash and retry tests. */
enum raw_test_point {
	/* The orphan record is durable; no extending write issued yet. */
	RAW_TEST_ORPHAN_DURABLE,
	/* An extending write's I/O completed; the visible size has not been
	 * advanced and the record is still there. */
	RAW_TEST_EXTEND_DONE,
	/* A write failed with -ENOSPC; the flush before its one retry is
	 * about to be submitted. */
	RAW_TEST_ENOSPC_RETRY,
};

/*
 * Called at each point when set (NULL in production).  Runs on whatever
 * thread reaches the point, the aio completion thread included; a test
 * typically SIGKILLs a forked child from it.  Set it before opening.
 */
extern void (*raw_test_hook)(enum raw_test_point point);

#endif
