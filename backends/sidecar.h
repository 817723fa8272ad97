/* SPDX-License-Identifier: MIT */
/*
 * Sidecars: small files the daemon keeps beside an image (raw's orphan
 * record, the migration redirect) in a directory other users may write.
 *
 * Nothing found there is trusted.  A sidecar is created only where no
 * file is (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), so a planted symlink or
 * file is never written through; it is believed only when it is a regular
 * file with one link, owned by the daemon's effective uid, mode 0600
 * (sidecar_open_trusted); its content must then bind it to its image
 * (dev:ino), which the callers check.
 *
 * Errors: 0 or -errno; every function is synchronous and may block.
 */
#ifndef DIOLOOP_SIDECAR_H
#define DIOLOOP_SIDECAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <glib.h>

/* Create name in dirfd for writing; a file or link already there is
 * removed first (never followed, never written).  An fd, or -errno
 * (-EEXIST when something reappeared at once). */
int sidecar_create(int dirfd, const char *name);

/* A sidecar file of ours, known by its inode: all zero for none. */
struct sidecar_id {
	uint64_t dev, ino;
};
void sidecar_id_of(const struct stat *st, struct sidecar_id *id);

/* Remove name from dirfd.  When it is still the file ours names, that
 * file is emptied first, durably, so that another hard link to it (made
 * where fs.protected_hardlinks is off) never keeps an old record to put
 * back; any other file there is not touched, only its name goes.  0 or
 * -errno (-ENOENT: nothing there). */
int sidecar_remove(int dirfd, const char *name,
		   const struct sidecar_id *ours);

/* Open name in dirfd for reading if we may believe it: an fd; -ENOENT
 * when there is none; -EPERM when something else is there (*error says
 * what it is); or -errno.  *error (BACKEND_ERROR, the errno as its code)
 * is set on every failure. */
int sidecar_open_trusted(int dirfd, const char *name, GError **error);

/* Why st cannot be a sidecar of ours, or NULL when it can. */
const char *sidecar_untrusted_reason(const struct stat *st);

/* Replace name in dirfd by a file holding buf, atomically and durably:
 * write name.tmp (sidecar_create), fsync it, rename it over name, fsync
 * dirfd; the file replaced is emptied when it is the one *ours names (as
 * sidecar_remove), and *ours names the new one after.  ours may be NULL.
 * 0 or -errno (the temporary is removed). */
int sidecar_replace(int dirfd, const char *name, const void *buf,
		    size_t len, struct sidecar_id *ours);

/* Read up to len - 1 bytes of a trusted sidecar into buf, NUL-terminated:
 * bytes read, or -ENOENT, -EPERM (untrusted) or -errno with *error set
 * as by sidecar_open_trusted. */
ssize_t sidecar_read(int dirfd, const char *name, char *buf, size_t len,
		     GError **error);

#endif
