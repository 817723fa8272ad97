/* SPDX-License-Identifier: MIT */
/*
 * The orphan record of a raw image: ext4's orphan list entry for a
 * size-extending direct write (seeds 009/010), kept in user space as a
 * small sidecar file next to the image.
 *
 *   <dir>/.<image>.dioloop-orphan        the record
 *   <dir>/.<image>.dioloop-orphan.tmp    a record being replaced (update)
 *
 * The names start with a dot, so a directory scan never takes them for
 * images.  A record holds the image's durable visible size ("i_disksize")
 * from before the extending writes it covers; while it exists on disk,
 * everything past that size is unflushed extension.  Opening an image with
 * a record left behind (a crash mid-extension) truncates the image back
 * to the recorded size and removes the record (orphan_recover).
 *
 * Format: 48 bytes, little endian: "DLORPHAN", u32 version (2), u32 length
 * (48), u64 size, u64 dev and u64 ino of the image it belongs to, u32
 * CRC-32 (IEEE) of the 40 bytes before it, u32 zero.
 *
 * The directory may be writable by others, so a record is believed only
 * when it is a sidecar of ours (backends/sidecar.h: regular, one link, the
 * daemon's uid, 0600) and names the dev:ino of the image open now; else it
 * is ignored with a log line and changes nothing.  It can only shrink the
 * image.  Version 1 records (no dev:ino) are ignored the same way.
 * A record that is short, or fails any check, is torn: it was being
 * written when the crash came, so no extending write had started yet.
 *
 * Threads: one struct orphan belongs to one open image; the caller (raw.c)
 * runs at most one operation on it at a time (its extension state machine
 * guarantees that), so nothing here locks.  The asynchronous operations
 * call done exactly once, on the aio completion thread or, when they fail
 * before any I/O, on the calling thread before returning.
 */
#ifndef DIOLOOP_RAW_ORPHAN_H
#define DIOLOOP_RAW_ORPHAN_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/aio.h"
#include "backends/backend.h"
#include "backends/sidecar.h"

#define ORPHAN_RECORD_SUFFIX ".dioloop-orphan"
#define ORPHAN_RECORD_LEN 48

typedef void (*orphan_done_t)(void *opaque, int err);

struct orphan {
	const char *image;	/* the image's path, for messages (not owned) */
	uint64_t dev, ino;	/* the image's: a record names them */
	struct sidecar_id rec;	/* the record file we wrote or believed:
				 * emptied when it goes (sidecar.h) */
	int dirfd;		/* the image's directory, O_RDONLY */
	char *name;		/* record name inside dirfd */
	char *tmp_name;		/* name used while replacing the record */
	bool present;		/* the record exists (as far as we know) */

	/* The asynchronous operation in progress, if any: */
	struct dioloop_aio_req req;
	struct dioloop_aio *aio;
	int step;
	int fd;			/* record being written, or the image */
	orphan_done_t done;
	void *opaque;
};

/* Path of the record for an image path (g_free it). */
char *orphan_record_path(const char *image_path);

/* Encode a record for size of the image dev:ino into buf
 * (ORPHAN_RECORD_LEN bytes). */
void orphan_encode(void *buf, uint64_t size, uint64_t dev, uint64_t ino);
/* Decode a record: 0 with *size, *dev, *ino; or -EBADMSG when torn. */
int orphan_decode(const void *buf, size_t len, uint64_t *size, uint64_t *dev,
		  uint64_t *ino);

/* Set up for the image open as image_fd (its dev:ino binds the record):
 * the record lives in file->dirfd, named after file->name, or beside
 * image_path when file is NULL.  0 or -errno. */
int orphan_init(struct orphan *o, const char *image_path,
		const struct backend_file *file, int image_fd);
void orphan_destroy(struct orphan *o);

/*
 * At open: deal with a record left by a crash.  Read-write: truncate the
 * image (image_fd) back to the recorded size when it is longer, make that
 * durable, remove the record, sync the directory.  Read-only: change
 * nothing; *limit gets the recorded size (the caller serves no more than
 * that).  A torn record is logged and removed (read-write) without
 * truncating.  *limit is UINT64_MAX when nothing limits the size.
 * 0 or -errno (the image must not be served then).  Blocks; control thread.
 */
int orphan_recover(struct orphan *o, int image_fd, bool rdonly,
		   uint64_t *limit);

/*
 * Create the record for size and make it durable: write it, fdsync it,
 * fdsync the directory, through aio; then done(opaque, 0 or -errno).  On
 * failure the record is removed again.  Never blocks on I/O.
 */
void orphan_create_async(struct orphan *o, struct dioloop_aio *aio,
			 uint64_t size, orphan_done_t done, void *opaque);

/*
 * Make the image durable (fdsync image_fd), then remove the record and
 * fdsync the directory, through aio; then done(opaque, 0 or -errno).
 * o->present says afterwards whether the record is still there.  Never
 * blocks on I/O (unlink is a metadata operation).
 */
void orphan_remove_async(struct orphan *o, struct dioloop_aio *aio,
			 int image_fd, orphan_done_t done, void *opaque);

/* Replace the record by one for size, atomically (write the temporary,
 * fsync, rename, fsync the directory).  0 or -errno.  Blocks. */
int orphan_update(struct orphan *o, uint64_t size);

/* Remove the record and fsync the directory.  0 or -errno (the record is
 * still there when unlink failed: see o->present).  Blocks. */
int orphan_remove(struct orphan *o);

#endif
