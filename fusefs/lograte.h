/* SPDX-License-Identifier: MIT */
/*
 * A rate limit on repeated log messages: the same text is logged at most
 * once per interval, and the next copy let through says how many were
 * dropped.  Anyone who can make the daemon fail (a corrupt image reopened
 * at every lookup by an allow_other user) cannot flood the log, and the
 * table of recent messages is bounded.  Any thread (one mutex).
 */
#ifndef DIOLOOP_LOGRATE_H
#define DIOLOOP_LOGRATE_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct dioloop_lograte {
	GMutex lock;
	GHashTable *seen;		/* text -> lograte_entry; by lock */
	gint64 interval_us;
	guint max_entries;
	uint64_t overflow;		/* texts dropped while full; by lock */
};

/* s with each control byte (below 0x20, 0x7f, and the C1 controls
 * U+0080 to U+009F of UTF-8) written as \xNN, and
 * a backslash as \\: a name an image's owner chose (a newline, an
 * escape sequence) cannot forge a log line or drive a terminal.  g_free
 * it. */
char *dioloop_escape_controls(const char *s);

void dioloop_lograte_init(struct dioloop_lograte *r, gint64 interval_us,
			  guint max_entries);
void dioloop_lograte_destroy(struct dioloop_lograte *r);

/*
 * May msg be logged at now (monotonic microseconds)?  When it may,
 * *repeats gets how many copies of it were dropped since it was last
 * logged and *others how many other messages were dropped because the
 * table was full (both reset).
 */
bool dioloop_lograte_admit(struct dioloop_lograte *r, const char *msg,
			   gint64 now, uint64_t *repeats, uint64_t *others);

#endif
