/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the redirect format (fusefs/redirect.h) parsed as
 * hostile text.  Each input, NUL-terminated (the parser sees it up to its
 * first NUL, as it sees a file's bytes from sidecar_read), goes to
 * dioloop_redirect_parse().  When it parses:
 *
 *   - the path is absolute or a URL of a backend that serves URLs
 *     (nfs:// or rbd://, any case), longer than "/",
 *     with no control character (below 0x20, or 0x7f);
 *   - a file path names a target dev:ino, a URL has 0 0;
 *   - format(parse(x)) parses to the same struct, and formatting that
 *     gives the same text again (the format is canonical);
 *   - the input was exactly five lines, each ended by a newline.
 *
 * When it does not, nothing is left allocated in the struct.  A broken
 * property aborts with a message (a libFuzzer crash).
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusefs/redirect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property does not hold: say which, and crash. */
G_GNUC_PRINTF(2, 3) G_GNUC_NORETURN
static void broken(const char *text, const char *fmt, ...)
{
	g_autofree char *shown = g_strescape(text, NULL);
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz_redirect: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n  input: \"%s\"\n", shown);
	va_end(ap);
	abort();
}

/* What the path of a parsed redirect must be. */
static void check_path(const char *text, const struct dioloop_redirect *r)
{
	const char *p = r->path;
	bool url;
	size_t i;

	if (!p)
		broken(text, "parsed with no path");
	url = g_ascii_strncasecmp(p, "nfs://", 6) == 0 ||
	      g_ascii_strncasecmp(p, "rbd://", 6) == 0;
	if (p[0] != '/' && !url)
		broken(text, "path \"%s\" is neither absolute nor nfs:// or rbd://",
		       p);
	for (i = 0; p[i]; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
			broken(text, "control character 0x%02x in the path",
			       (unsigned char)p[i]);
	if (i < 2)
		broken(text, "path \"%s\" too short", p);
	if (url == (r->target_dev || r->target_ino))
		broken(text, "%s with target %llu %llu",
		       url ? "a URL" : "a file path",
		       (unsigned long long)r->target_dev,
		       (unsigned long long)r->target_ino);
}

static bool same(const struct dioloop_redirect *a,
		 const struct dioloop_redirect *b)
{
	return a->image_dev == b->image_dev && a->image_ino == b->image_ino &&
	       a->target_dev == b->target_dev &&
	       a->target_ino == b->target_ino && !strcmp(a->path, b->path) &&
	       !strcmp(a->name, b->name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dioloop_redirect r, again;
	g_autofree char *text = g_malloc(size + 1);
	g_autofree char *formatted = NULL, *reformatted = NULL;
	const char *p;
	int lines = 0;

	memcpy(text, data, size);
	text[size] = '\0';
	if (dioloop_redirect_parse(text, &r) < 0) {
		if (r.path || r.name)
			broken(text, "rejected, but left a string allocated");
		return 0;
	}
	check_path(text, &r);
	for (p = text; *p; p++)
		lines += *p == '\n';
	if (lines != 5 || p == text || p[-1] != '\n')
		broken(text, "parsed text of %d lines%s", lines,
		       p > text && p[-1] == '\n' ? "" :
						   " without a final newline");

	formatted = dioloop_redirect_format(&r);
	if (dioloop_redirect_parse(formatted, &again) < 0)
		broken(text, "its formatted text does not parse: \"%s\"",
		       formatted);
	if (!same(&r, &again))
		broken(text, "parses to another struct after formatting");
	reformatted = dioloop_redirect_format(&again);
	if (strcmp(formatted, reformatted))
		broken(text, "formatting is not canonical");
	dioloop_redirect_clear(&again);
	dioloop_redirect_clear(&r);
	return 0;
}
