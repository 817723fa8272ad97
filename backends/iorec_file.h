/* SPDX-License-Identifier: MIT */
/*
 * A recorder (iorec.h) that appends every event to a file, for power-cut
 * tests of the whole daemon: `DIOLOOP_IOREC_LOG=FILE dioloop mount ...`
 * logs what every backend does to its files (tests/integration/
 * test-powercut-raw.sh replays it).  A test knob: it fstat()s each fd and
 * writes each event under one lock, and logs a copy of all written data.
 *
 * The file is a sequence of struct dioloop_iorec_file_rec, each followed
 * by payload bytes: the data of a write, or the name (and for a rename
 * the new name), each NUL-terminated, of a name change.  Native byte
 * order: it is read back on the machine that wrote it.
 */
#ifndef DIOLOOP_IOREC_FILE_H
#define DIOLOOP_IOREC_FILE_H

#include <stdint.h>

#include "backends/iorec.h"

enum dioloop_iorec_file_kind {
	DIOLOOP_IOREC_FILE_WRITE,	/* len bytes at off */
	DIOLOOP_IOREC_FILE_SIZE,	/* the size became off */
	DIOLOOP_IOREC_FILE_ZERO,	/* fallocate mode res over [off, +len) */
	DIOLOOP_IOREC_FILE_FLUSH_BEGIN,	/* token: its sequence number */
	DIOLOOP_IOREC_FILE_FLUSH_END,	/* token: its begin's; res */
	DIOLOOP_IOREC_FILE_CREATE,	/* in directory dev:ino; the new file
					 * is new_dev:new_ino */
	DIOLOOP_IOREC_FILE_UNLINK,
	DIOLOOP_IOREC_FILE_RENAME,
};

struct dioloop_iorec_file_rec {
	uint32_t kind;		/* enum dioloop_iorec_file_kind */
	int32_t res;
	uint64_t seq;		/* 1, 2, ... in the order logged */
	uint64_t time_us;	/* CLOCK_MONOTONIC, when logged */
	uint64_t dev, ino;	/* the file, or the directory of a name */
	uint64_t off, len;
	uint64_t token;
	uint64_t new_dev, new_ino;
	uint32_t dsync;		/* a write to an O_DSYNC file */
	uint32_t payload;	/* bytes that follow */
};

/* Install a recorder logging to path (created, appended to): 0 or
 * -errno.  Before any backend opens; it stays until the process ends. */
int dioloop_iorec_file_open(const char *path);

#endif
