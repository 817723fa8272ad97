/* SPDX-License-Identifier: MIT */
/*
 * A progress bar on stderr for long commands (scrub, convert):
 *
 *   scrub  [##########..........]  48.2%  1.1 GiB/s  ETA 0:07
 *
 * one line redrawn with \r at most ten times a second, ended by a newline
 * when done.  It is drawn when stderr is a terminal, or when forced (-p);
 * otherwise nothing is printed until dioloop_progress_end(), which prints
 * one plain summary line.  A command-line process: one thread uses a bar.
 */
#ifndef DIOLOOP_PROGRESS_H
#define DIOLOOP_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

enum dioloop_progress_unit {
	DIOLOOP_PROGRESS_BYTES,		/* rates as "12.5 MiB/s" */
	DIOLOOP_PROGRESS_BLOCKS,	/* rates as "3.2k blocks/s" */
};

struct dioloop_progress {
	const char *label;		/* "scrub", "convert": not copied */
	enum dioloop_progress_unit unit;
	bool draw;			/* a terminal, or forced */
	uint64_t total, done;
	int64_t start_us, last_draw_us;
	int width;			/* terminal columns */
	int last_len;			/* characters of the last line drawn */
};

/* Start a bar of total units (it may change: dioloop_progress_set_total).
 * force: draw even when stderr is no terminal. */
void dioloop_progress_begin(struct dioloop_progress *p, const char *label,
			    enum dioloop_progress_unit unit, uint64_t total,
			    bool force);

void dioloop_progress_set_total(struct dioloop_progress *p, uint64_t total);

/* done units so far: redraws when the last draw is 100 ms old. */
void dioloop_progress_update(struct dioloop_progress *p, uint64_t done);

/* The last line: the bar as it ended and a newline when drawing; else one
 * summary line ("convert: 1.0 GiB in 2.5 s (409.6 MiB/s)").  ok false:
 * the command failed or stopped, said so instead of a rate. */
void dioloop_progress_end(struct dioloop_progress *p, bool ok);

#endif
