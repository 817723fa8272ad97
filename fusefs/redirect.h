/* SPDX-License-Identifier: MIT */
/*
 * The redirect of a migrated image: .IMAGE.dioloop-redirect in the source
 * directory says "IMAGE now lives at PATH".  A node whose image has one
 * serves PATH, also after a restart and when IMAGE itself was removed.
 *
 * The source directory may be writable by others, so a redirect is
 * believed only when it is a sidecar of ours (backends/sidecar.h) and its
 * content holds together:
 *
 *   dioloop-redirect 2
 *   name IMAGE         the image it was written for: a redirect renamed
 *                      to another image's name is not believed
 *   image DEV INO      the file under IMAGE's name when it was written
 *                      (0 0: none); a different file there now makes the
 *                      redirect stale (ignored: the new file is served)
 *   target DEV INO     the file the migration created (0 0: a URL); the
 *                      file at PATH must still be that one
 *   path PATH          an absolute path or a URL (nfs://, rbd://)
 *
 * Anything else is ignored with one log line and changes nothing.
 */
#ifndef DIOLOOP_FUSEFS_REDIRECT_H
#define DIOLOOP_FUSEFS_REDIRECT_H

#include <stdbool.h>
#include <stdint.h>

#define DIOLOOP_REDIRECT_SUFFIX ".dioloop-redirect"
#define DIOLOOP_REDIRECT_MAX 4096	/* bytes in a redirect file */

struct dioloop_fs;

struct dioloop_redirect {
	char *name;			/* g_free'd by dioloop_redirect_clear */
	uint64_t image_dev, image_ino;
	uint64_t target_dev, target_ino;
	char *path;			/* g_free'd by dioloop_redirect_clear */
};

/* Parse a redirect's text: 0, or -EBADMSG (anything not exactly the
 * format above).  Pure: no I/O. */
int dioloop_redirect_parse(const char *text, struct dioloop_redirect *r);
/* The text of r (g_free it). */
char *dioloop_redirect_format(const struct dioloop_redirect *r);
void dioloop_redirect_clear(struct dioloop_redirect *r);

/* The name of image's redirect file (g_free it). */
char *dioloop_redirect_name(const char *image);

/* source.c: read image's redirect: 0 (r filled), -ENOENT when there is none, or
 * -EPERM / -EBADMSG for one we must not believe (logged, rate-limited). */
int dioloop_redirect_read(struct dioloop_fs *fs, const char *image,
			  struct dioloop_redirect *r);
/* Make r image's redirect, durably (sidecar_replace).  0 or -errno. */
int dioloop_redirect_write(struct dioloop_fs *fs, const char *image,
			   const struct dioloop_redirect *r);

/* IMAGE when name is a redirect's file name (.IMAGE.dioloop-redirect),
 * else NULL; g_free it. */
char *dioloop_redirected_name(const char *name);

#endif
