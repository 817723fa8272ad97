/* SPDX-License-Identifier: MIT */
/*
 * The orphan record of a raw image (see orphan.h): its format, the
 * synchronous operations (recovery at open, update and removal at flush)
 * and the asynchronous ones (creation before an extending write, removal
 * after the last one on a sync image), which chain aio fdsync requests so
 * that they never block the thread that starts them.
 */
#include "backends/raw/orphan.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/iorec.h"
#include "backends/sidecar.h"

#define ORPHAN_MAGIC "DLORPHAN"
#define ORPHAN_VERSION 2u
#define ORPHAN_CRC_OFFSET 40

/* Steps of the asynchronous operations. */
enum orphan_step {
	ORPHAN_CREATE_SYNC_RECORD,	/* fdsync of the record file */
	ORPHAN_CREATE_SYNC_DIR,		/* fdsync of the directory */
	ORPHAN_REMOVE_SYNC_IMAGE,	/* fdsync of the image */
	ORPHAN_REMOVE_SYNC_DIR,		/* fdsync of the directory */
};

/* CRC-32 (IEEE, reflected; zlib's) of len bytes. */
static uint32_t orphan_crc32(const unsigned char *p, size_t len)
{
	return crc32_gzip_refl(0, p, len);
}

/* Little-endian 32-bit store and load. */
static void put_le32(unsigned char *p, uint32_t v)
{
	v = GUINT32_TO_LE(v);
	memcpy(p, &v, sizeof(v));
}

static uint32_t get_le32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return GUINT32_FROM_LE(v);
}

/* Path of the record for an image path. */
char *orphan_record_path(const char *image_path)
{
	char *dir = g_path_get_dirname(image_path);
	char *base = g_path_get_basename(image_path);
	char *name = g_strconcat(".", base, ORPHAN_RECORD_SUFFIX, NULL);
	char *path = g_build_filename(dir, name, NULL);

	g_free(dir);
	g_free(base);
	g_free(name);
	return path;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	v = GUINT64_TO_LE(v);
	memcpy(p, &v, sizeof(v));
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return GUINT64_FROM_LE(v);
}

/* Encode a record for size, bound to the image dev:ino. */
void orphan_encode(void *buf, uint64_t size, uint64_t dev, uint64_t ino)
{
	unsigned char *p = buf;

	memset(p, 0, ORPHAN_RECORD_LEN);
	memcpy(p, ORPHAN_MAGIC, 8);
	put_le32(p + 8, ORPHAN_VERSION);
	put_le32(p + 12, ORPHAN_RECORD_LEN);
	put_le64(p + 16, size);
	put_le64(p + 24, dev);
	put_le64(p + 32, ino);
	put_le32(p + ORPHAN_CRC_OFFSET, orphan_crc32(p, ORPHAN_CRC_OFFSET));
}

/* Decode a record: 0, or -EBADMSG when it is torn or not a record. */
int orphan_decode(const void *buf, size_t len, uint64_t *size, uint64_t *dev,
		  uint64_t *ino)
{
	const unsigned char *p = buf;

	if (len != ORPHAN_RECORD_LEN || memcmp(p, ORPHAN_MAGIC, 8) ||
	    get_le32(p + 8) != ORPHAN_VERSION ||
	    get_le32(p + 12) != ORPHAN_RECORD_LEN ||
	    get_le32(p + ORPHAN_CRC_OFFSET) !=
		    orphan_crc32(p, ORPHAN_CRC_OFFSET) ||
	    get_le32(p + ORPHAN_CRC_OFFSET + 4))
		return -EBADMSG;
	*size = get_le64(p + 16);
	*dev = get_le64(p + 24);
	*ino = get_le64(p + 32);
	return 0;
}

/* Set up for the image open as image_fd: its sidecars are in file's
 * directory, or image_path's when file is NULL.  Control thread. */
int orphan_init(struct orphan *o, const char *image_path,
		const struct backend_file *file, int image_fd)
{
	g_autofree char *dir = g_path_get_dirname(image_path);
	g_autofree char *base = g_path_get_basename(image_path);
	struct stat st;

	memset(o, 0, sizeof(*o));
	o->image = image_path;
	o->fd = -1;
	if (fstat(image_fd, &st) < 0)
		return -errno;
	o->dev = (uint64_t)st.st_dev;
	o->ino = (uint64_t)st.st_ino;
	if (file && file->dirfd >= 0)
		o->dirfd = fcntl(file->dirfd, F_DUPFD_CLOEXEC, 0);
	else
		o->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		int err = -errno;

		g_warning("%s: cannot open its directory: %s", image_path,
			  g_strerror(-err));
		return err;
	}
	o->name = g_strconcat(".", file && file->dirfd >= 0 ? file->name : base,
			      ORPHAN_RECORD_SUFFIX, NULL);
	o->tmp_name = g_strconcat(o->name, ".tmp", NULL);
	return 0;
}

/* Close the directory, free the names.  Control thread. */
void orphan_destroy(struct orphan *o)
{
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
	g_free(o->name);
	g_free(o->tmp_name);
	o->name = o->tmp_name = NULL;
}

/* fsync the directory: 0 or -errno. */
static int orphan_sync_dir(struct orphan *o)
{
	if (dioloop_iorec_fsync(o->dirfd) < 0) {
		int err = -errno;

		g_warning("%s: fsync of its directory: %s", o->image,
			  g_strerror(-err));
		return err;
	}
	return 0;
}

/* Write a record for size into name (created anew: whatever was there
 * is removed, never written through); the open fd is returned in *fdp,
 * not synced.  0 or -errno. */
static int orphan_write(struct orphan *o, const char *name, uint64_t size,
			int *fdp)
{
	unsigned char buf[ORPHAN_RECORD_LEN];
	ssize_t n;
	int fd, err;

	struct stat st;

	fd = sidecar_create(o->dirfd, name);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) == 0)
		sidecar_id_of(&st, &o->rec);
	orphan_encode(buf, size, o->dev, o->ino);
	do {
		n = dioloop_iorec_pwrite(fd, buf, sizeof(buf), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(buf)) {
		err = n < 0 ? -errno : -ENOSPC;
		close(fd);
		sidecar_remove(o->dirfd, name, &o->rec);
		memset(&o->rec, 0, sizeof(o->rec));
		return err;
	}
	*fdp = fd;
	return 0;
}

/* Read and decode the record: 0, -ENOENT (none, or one we must not
 * believe: logged), -EBADMSG (torn), or another -errno. */
static int orphan_read(struct orphan *o, uint64_t *size)
{
	unsigned char buf[ORPHAN_RECORD_LEN + 1];
	g_autoptr(GError) error = NULL;
	uint64_t dev, ino;
	struct stat st;
	ssize_t n;
	int fd, err = 0;

	fd = sidecar_open_trusted(o->dirfd, o->name, &error);
	if (fd == -EPERM) {
		g_warning("%s: orphan record %s ignored: %s", o->image,
			  o->name, error->message);
		return -ENOENT;
	}
	if (fd < 0)
		return fd;
	do {
		n = pread(fd, buf, sizeof(buf), 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		err = -errno;
	else
		err = orphan_decode(buf, (size_t)n, size, &dev, &ino);
	/* Ours (torn, or for this image): voided when it goes. */
	if ((err == -EBADMSG || (err == 0 && dev == o->dev &&
				 ino == o->ino)) && fstat(fd, &st) == 0)
		sidecar_id_of(&st, &o->rec);
	close(fd);
	if (err == 0 && (dev != o->dev || ino != o->ino)) {
		g_warning("%s: orphan record %s ignored: it belongs to another file (%llu:%llu)",
			  o->image, o->name, (unsigned long long)dev,
			  (unsigned long long)ino);
		return -ENOENT;
	}
	return err;
}

/* Recover from a record left by a crash.  Control thread, blocks. */
int orphan_recover(struct orphan *o, int image_fd, bool rdonly,
		   uint64_t *limit)
{
	struct stat st;
	uint64_t size;
	int err;

	*limit = UINT64_MAX;
	/* A replacement that never got renamed: the old record (if any)
	 * still holds, the temporary is garbage. */
	if (!rdonly && dioloop_iorec_unlinkat(o->dirfd, o->tmp_name, 0) == 0)
		g_message("%s: removed a half-written orphan record %s",
			  o->image, o->tmp_name);
	err = orphan_read(o, &size);
	if (err == -ENOENT)
		return 0;
	o->present = true;
	if (err == -EBADMSG) {
		/* Torn: the crash came while the record itself was being
		 * written, before any extending write was started. */
		g_warning("%s: orphan record %s is torn (the crash came before any size-extending write started): %s",
			  o->image, o->name,
			  rdonly ? "ignored (read-only open)" :
				   "removing it, the image keeps its size");
		return rdonly ? 0 : orphan_remove(o);
	}
	if (err < 0) {
		g_warning("%s: cannot read orphan record %s: %s", o->image,
			  o->name, g_strerror(-err));
		return err;
	}
	if (fstat(image_fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size <= size) {
		g_message("%s: orphan record %s: size %llu is within the recorded %llu, nothing to truncate",
			  o->image, o->name, (unsigned long long)st.st_size,
			  (unsigned long long)size);
		return rdonly ? 0 : orphan_remove(o);
	}
	if (rdonly) {
		g_warning("%s: crashed during a size extension: serving only the recorded %llu of %llu bytes (read-only open; open read-write to truncate)",
			  o->image, (unsigned long long)size,
			  (unsigned long long)st.st_size);
		*limit = size;
		return 0;
	}
	g_warning("%s: crashed during a size extension: truncating from %llu back to the recorded %llu bytes",
		  o->image, (unsigned long long)st.st_size,
		  (unsigned long long)size);
	if (dioloop_iorec_ftruncate(image_fd, (off_t)size) < 0 ||
	    dioloop_iorec_fsync(image_fd) < 0) {
		err = -errno;
		g_warning("%s: truncating to %llu: %s", o->image,
			  (unsigned long long)size, g_strerror(-err));
		return err;
	}
	return orphan_remove(o);
}

/* Replace the record by one for size, atomically.  Blocks. */
int orphan_update(struct orphan *o, uint64_t size)
{
	unsigned char buf[ORPHAN_RECORD_LEN];
	int err;

	orphan_encode(buf, size, o->dev, o->ino);
	err = sidecar_replace(o->dirfd, o->name, buf, sizeof(buf), &o->rec);
	if (err < 0) {
		g_warning("%s: updating orphan record %s to %llu: %s",
			  o->image, o->name, (unsigned long long)size,
			  g_strerror(-err));
		return err;
	}
	o->present = true;
	return 0;
}

/* Remove the record and fsync the directory.  Blocks. */
int orphan_remove(struct orphan *o)
{
	int err = sidecar_remove(o->dirfd, o->name, &o->rec);

	if (err < 0 && err != -ENOENT) {
		g_warning("%s: removing orphan record %s: %s", o->image,
			  o->name, g_strerror(-err));
		return err;
	}
	o->present = false;
	memset(&o->rec, 0, sizeof(o->rec));
	return orphan_sync_dir(o);
}

/* End an asynchronous operation. */
static void orphan_async_end(struct orphan *o, int err)
{
	orphan_done_t done = o->done;

	o->done = NULL;
	done(o->opaque, err);
}

/* One fdsync of an asynchronous operation finished: take the next step.
 * Completion thread. */
static void orphan_async_step(struct dioloop_aio_req *req, long res)
{
	struct orphan *o = (struct orphan *)((char *)req -
					     offsetof(struct orphan, req));
	struct dioloop_aio_req *next = &o->req;
	int err = (int)res;

	if (res > 0)
		err = 0;
	switch (o->step) {
	case ORPHAN_CREATE_SYNC_RECORD:
		if (err < 0) {
			close(o->fd);
			o->fd = -1;
			sidecar_remove(o->dirfd, o->name, &o->rec);
			memset(&o->rec, 0, sizeof(o->rec));
			o->present = false;
			break;
		}
		o->step = ORPHAN_CREATE_SYNC_DIR;
		dioloop_aio_prep_fdsync(&o->req, o->dirfd, orphan_async_step);
		dioloop_aio_submit(o->aio, &next, 1);
		return;
	case ORPHAN_CREATE_SYNC_DIR:
		close(o->fd);
		o->fd = -1;
		if (err < 0) {
			sidecar_remove(o->dirfd, o->name, &o->rec);
			memset(&o->rec, 0, sizeof(o->rec));
			o->present = false;
		}
		break;
	case ORPHAN_REMOVE_SYNC_IMAGE:
		if (err < 0)
			break;
		err = sidecar_remove(o->dirfd, o->name, &o->rec);
		if (err < 0 && err != -ENOENT)
			break;
		err = 0;
		memset(&o->rec, 0, sizeof(o->rec));
		o->present = false;
		o->step = ORPHAN_REMOVE_SYNC_DIR;
		dioloop_aio_prep_fdsync(&o->req, o->dirfd, orphan_async_step);
		dioloop_aio_submit(o->aio, &next, 1);
		return;
	case ORPHAN_REMOVE_SYNC_DIR:
		break;
	}
	if (err < 0)
		g_warning("%s: orphan record %s: %s failed: %s", o->image,
			  o->name,
			  o->step <= ORPHAN_CREATE_SYNC_DIR ? "creation" :
							      "removal",
			  g_strerror(-err));
	orphan_async_end(o, err);
}

/* Create the record and make it durable, through aio.  Any thread. */
void orphan_create_async(struct orphan *o, struct dioloop_aio *aio,
			 uint64_t size, orphan_done_t done, void *opaque)
{
	struct dioloop_aio_req *req = &o->req;
	int err;

	g_assert(o->done == NULL);
	o->aio = aio;
	o->done = done;
	o->opaque = opaque;
	/* A buffered write of 32 bytes: page cache only, no I/O wait. */
	err = orphan_write(o, o->name, size, &o->fd);
	if (err < 0) {
		g_warning("%s: writing orphan record %s: %s", o->image,
			  o->name, g_strerror(-err));
		orphan_async_end(o, err);
		return;
	}
	o->present = true;
	o->step = ORPHAN_CREATE_SYNC_RECORD;
	dioloop_aio_prep_fdsync(&o->req, o->fd, orphan_async_step);
	dioloop_aio_submit(aio, &req, 1);
}

/* Sync the image, remove the record, sync the directory, through aio.
 * Any thread. */
void orphan_remove_async(struct orphan *o, struct dioloop_aio *aio,
			 int image_fd, orphan_done_t done, void *opaque)
{
	struct dioloop_aio_req *req = &o->req;

	g_assert(o->done == NULL);
	o->aio = aio;
	o->done = done;
	o->opaque = opaque;
	o->step = ORPHAN_REMOVE_SYNC_IMAGE;
	dioloop_aio_prep_fdsync(&o->req, image_fd, orphan_async_step);
	dioloop_aio_submit(aio, &req, 1);
}
