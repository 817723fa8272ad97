/* SPDX-License-Identifier: MIT */
#include "fusefs/lograte.h"

#include <string.h>

struct lograte_entry {
	gint64 last;			/* when it was last let through */
	uint64_t dropped;		/* copies dropped since */
};

void dioloop_lograte_init(struct dioloop_lograte *r, gint64 interval_us,
			  guint max_entries)
{
	g_mutex_init(&r->lock);
	r->seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					g_free);
	r->interval_us = interval_us;
	r->max_entries = max_entries;
	r->overflow = 0;
}

void dioloop_lograte_destroy(struct dioloop_lograte *r)
{
	g_hash_table_destroy(r->seen);
	g_mutex_clear(&r->lock);
}

/* Forget texts not logged within the interval (they would be let through
 * anyway).  Under r->lock. */
static void lograte_prune(struct dioloop_lograte *r, gint64 now)
{
	GHashTableIter it;
	gpointer value;

	g_hash_table_iter_init(&it, r->seen);
	while (g_hash_table_iter_next(&it, NULL, &value)) {
		const struct lograte_entry *e = value;

		if (now - e->last >= r->interval_us)
			g_hash_table_iter_remove(&it);
	}
}

bool dioloop_lograte_admit(struct dioloop_lograte *r, const char *msg,
			   gint64 now, uint64_t *repeats, uint64_t *others)
{
	struct lograte_entry *e;
	bool admit = true;

	*repeats = 0;
	*others = 0;
	g_mutex_lock(&r->lock);
	e = g_hash_table_lookup(r->seen, msg);
	if (e && now - e->last < r->interval_us) {
		e->dropped++;
		admit = false;
	} else if (e) {
		*repeats = e->dropped;
		e->dropped = 0;
		e->last = now;
	} else {
		if (g_hash_table_size(r->seen) >= r->max_entries)
			lograte_prune(r, now);
		if (g_hash_table_size(r->seen) >= r->max_entries) {
			r->overflow++;
			admit = false;
		} else {
			e = g_new0(struct lograte_entry, 1);
			e->last = now;
			g_hash_table_insert(r->seen, g_strdup(msg), e);
		}
	}
	if (admit) {
		*others = r->overflow;
		r->overflow = 0;
	}
	g_mutex_unlock(&r->lock);
	return admit;
}

char *dioloop_escape_controls(const char *s)
{
	GString *out = g_string_sized_new(strlen(s));

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f) {
			g_string_append_printf(out, "\\x%02x", c);
		} else if (c == 0xc2 && (unsigned char)s[1] >= 0x80 &&
			   (unsigned char)s[1] <= 0x9f) {
			/* A C1 control in UTF-8 (U+009B starts a sequence
			 * on some terminals). */
			g_string_append_printf(out, "\\xc2\\x%02x",
					       (unsigned char)s[1]);
			s++;
		} else if (c == '\\') {
			g_string_append(out, "\\\\");
		} else {
			g_string_append_c(out, (char)c);
		}
	}
	return g_string_free(out, FALSE);
}
