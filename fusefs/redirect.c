/* SPDX-License-Identifier: MIT */
/* The redirect of a migrated image: its names and its format, parsed as
 * hostile (redirect.h).  Pure: the reading and writing is in source.c. */
#include "fusefs/redirect.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/backend.h"

#define REDIRECT_HEADER "dioloop-redirect 2"

char *dioloop_redirect_name(const char *image)
{
	return g_strdup_printf(".%s%s", image, DIOLOOP_REDIRECT_SUFFIX);
}

char *dioloop_redirected_name(const char *name)
{
	size_t n = strlen(name), s = strlen(DIOLOOP_REDIRECT_SUFFIX);

	if (n <= s + 1 || name[0] != '.' ||
	    strcmp(name + n - s, DIOLOOP_REDIRECT_SUFFIX))
		return NULL;
	return g_strndup(name + 1, n - s - 1);
}

/* "KEY DEV INO": 0 or -EBADMSG. */
static int parse_devino(const char *line, const char *key, uint64_t *dev,
			uint64_t *ino)
{
	size_t k = strlen(key);
	const char *p = line + k + 1;
	char *end;

	if (strncmp(line, key, k) || line[k] != ' ' || !g_ascii_isdigit(*p))
		return -EBADMSG;
	errno = 0;
	*dev = g_ascii_strtoull(p, &end, 10);
	if (errno || *end != ' ' || !g_ascii_isdigit(end[1]))
		return -EBADMSG;
	p = end + 1;
	*ino = g_ascii_strtoull(p, &end, 10);
	return errno || *end ? -EBADMSG : 0;
}

/* The path must be absolute and plain, or a URL a backend serves
 * (nfs://, rbd://), one line. */
static bool path_valid(const char *path)
{
	g_autoptr(GError) unknown = NULL;
	size_t i;

	if (path[0] != '/' && !backend_for_url(path, &unknown))
		return false;
	for (i = 0; path[i]; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return false;
	return i > 1;
}

/* An image name: a plain file name, not hidden, one line. */
static bool name_valid(const char *name)
{
	size_t i;

	if (!name[0] || name[0] == '.')
		return false;
	for (i = 0; name[i]; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f ||
		    name[i] == '/')
			return false;
	return true;
}

int dioloop_redirect_parse(const char *text, struct dioloop_redirect *r)
{
	g_auto(GStrv) lines = NULL;

	memset(r, 0, sizeof(*r));
	if (!g_str_has_suffix(text, "\n"))
		return -EBADMSG;
	lines = g_strsplit(text, "\n", -1);
	/* Five lines and the empty string after the last newline. */
	if (g_strv_length(lines) != 6 || lines[5][0] ||
	    strcmp(lines[0], REDIRECT_HEADER) ||
	    strncmp(lines[1], "name ", 5) || !name_valid(lines[1] + 5) ||
	    parse_devino(lines[2], "image", &r->image_dev, &r->image_ino) ||
	    parse_devino(lines[3], "target", &r->target_dev,
			 &r->target_ino) ||
	    strncmp(lines[4], "path ", 5) || !path_valid(lines[4] + 5))
		return -EBADMSG;
	/* A file target names its inode; a URL has none. */
	if ((lines[4][5] == '/') != (r->target_dev || r->target_ino))
		return -EBADMSG;
	r->name = g_strdup(lines[1] + 5);
	r->path = g_strdup(lines[4] + 5);
	return 0;
}

char *dioloop_redirect_format(const struct dioloop_redirect *r)
{
	return g_strdup_printf(REDIRECT_HEADER "\nname %s\nimage %" PRIu64
			       " %" PRIu64 "\ntarget %" PRIu64 " %" PRIu64
			       "\npath %s\n", r->name, r->image_dev,
			       r->image_ino, r->target_dev, r->target_ino,
			       r->path);
}

void dioloop_redirect_clear(struct dioloop_redirect *r)
{
	g_free(r->name);
	g_free(r->path);
	memset(r, 0, sizeof(*r));
}
