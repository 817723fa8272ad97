/* SPDX-License-Identifier: MIT */
/*
 * A recorder for power-cut tests of a backend that keeps sidecar files
 * next to its image (raw's orphan record), on backends/iorec.h: one log,
 * in order, of
 *   - the image's writes (with a copy of their data), size changes,
 *     zeroed ranges (punch hole, zero range) and flushes,
 *   - its directory's fsyncs and name changes (create, unlink, rename),
 *   - the sidecars' writes and fsyncs,
 * each tagged with the file it concerns, and of the events a workload
 * adds (an op starts, a flush returned), all numbered from one sequence.
 * Files are told apart by device and inode; a sidecar gets a new number
 * each time its name is created afresh (inode numbers are reused).
 *
 * drec_load_file_log() builds the same log from the file a daemon wrote
 * (backends/iorec_file.h).  The second half replays a prefix of a log
 * into a copy of the directory as a power cut there could have left it
 * (drec_replay_*, drec_write_*): see check_raw_powercut.c for the rules.
 * Header-only like iorec_log.h.
 */
#ifndef DIOLOOP_TESTS_IOREC_DIR_H
#define DIOLOOP_TESTS_IOREC_DIR_H

#include <check.h>
#include <fcntl.h>
#include <glib.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/iorec.h"
#include "backends/iorec_file.h"
#include "tests/testutil.h"

/* The unit a disk writes atomically: a torn write keeps some of them. */
#define DREC_SECTOR 512u
/* Pieces of a copy's base left as holes when all zeros. */
#define DREC_PIECE ((size_t)64 * 1024)

enum drec_kind {
	DREC_WRITE,		/* len bytes at off, at data in the log */
	DREC_SIZE,		/* the file's size became off */
	DREC_ZERO,		/* [off, off + len) reads as zeros */
	DREC_FLUSH_BEGIN,
	DREC_FLUSH_END,		/* token: its begin's position + 1; res */
	DREC_CREATE,		/* name links file (created, or truncated) */
	DREC_UNLINK,		/* name */
	DREC_RENAME,		/* name becomes new_name */
	DREC_OP_BEGIN,		/* the workload starts op number op */
	DREC_USER_FLUSH,	/* backend_flush returned 0 after ops [0, op) */
};

/* File numbers: the image, its directory, then sidecars as created. */
#define DREC_IMAGE 0u
#define DREC_DIR 1u
#define DREC_NONE UINT16_MAX

struct drec {
	uint8_t kind;		/* enum drec_kind */
	uint8_t name, new_name;	/* indexes in drecorder.names */
	bool dsync;		/* a write durable when done (O_DSYNC) */
	uint16_t file;
	int32_t res;
	uint32_t op;
	uint32_t len;
	uint64_t off;
	uint64_t token;
	size_t data;		/* offset of the bytes in drecorder.data */
};

struct drec_file {
	dev_t dev;
	ino_t ino;
};

struct drecorder {
	struct dioloop_iorec hook;	/* first member */
	GMutex lock;
	GArray *recs;			/* struct drec; by lock */
	GByteArray *data;		/* by lock */
	GArray *files;			/* struct drec_file; by lock */
	GPtrArray *names;		/* char *; by lock */
	GArray *live;			/* uint16_t per name: its file now,
					 * or DREC_NONE; by lock */
};

/* Append x; its position (by lock). */
static inline uint64_t drec_append(struct drecorder *r, const struct drec *x)
{
	g_array_append_val(r->recs, *x);
	return r->recs->len - 1;
}

/* The file dev:ino is, DREC_NONE when not followed (by lock).  The
 * newest file with that inode: older ones were unlinked. */
static inline uint16_t drec_file_id(struct drecorder *r, dev_t dev, ino_t ino)
{
	guint i;

	for (i = r->files->len; i-- > 0;) {
		const struct drec_file *f = &g_array_index(r->files,
							   struct drec_file, i);

		if (f->dev == dev && f->ino == ino)
			return (uint16_t)i;
	}
	return DREC_NONE;
}

/* The file fd is open on, DREC_NONE when not followed (by lock). */
static inline uint16_t drec_file_of(struct drecorder *r, int fd)
{
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return DREC_NONE;
	return drec_file_id(r, st.st_dev, st.st_ino);
}

/* Index of name in names, added when new (by lock). */
static inline uint8_t drec_name(struct drecorder *r, const char *name)
{
	uint16_t none = DREC_NONE;
	guint i;

	for (i = 0; i < r->names->len; i++)
		if (!strcmp(g_ptr_array_index(r->names, i), name))
			return (uint8_t)i;
	ck_assert_msg(r->names->len < UINT8_MAX, "at most 255 names");
	g_ptr_array_add(r->names, g_strdup(name));
	g_array_append_val(r->live, none);
	return (uint8_t)(r->names->len - 1);
}

/* Hooks (iorec.h): each logs what concerns a followed file. */

/* A completed write, with a copy of its data. */
static inline void drec_write(struct dioloop_iorec *h, int fd,
			      const struct iovec *iov, int iovcnt,
			      uint64_t off, ssize_t res)
{
	struct drecorder *r = (struct drecorder *)h;
	struct drec x = { .kind = DREC_WRITE, .off = off };
	size_t left = res > 0 ? (size_t)res : 0;
	int i;

	if (res <= 0)
		return;
	g_mutex_lock(&r->lock);
	x.file = drec_file_of(r, fd);
	if (x.file != DREC_NONE) {
		x.dsync = (fcntl(fd, F_GETFL) & O_DSYNC) == O_DSYNC;
		x.data = r->data->len;
		x.len = (uint32_t)left;
		for (i = 0; i < iovcnt && left; i++) {
			size_t n = MIN(left, iov[i].iov_len);

			g_byte_array_append(r->data, iov[i].iov_base, (guint)n);
			left -= n;
		}
		drec_append(r, &x);
	}
	g_mutex_unlock(&r->lock);
}

/* A sync issued: its token is its position + 1. */
static inline uint64_t drec_flush_begin(struct dioloop_iorec *h, int fd)
{
	struct drecorder *r = (struct drecorder *)h;
	struct drec x = { .kind = DREC_FLUSH_BEGIN };
	uint64_t token = 0;

	g_mutex_lock(&r->lock);
	x.file = drec_file_of(r, fd);
	if (x.file != DREC_NONE)
		token = drec_append(r, &x) + 1;
	g_mutex_unlock(&r->lock);
	return token;
}

/* A sync returned res. */
static inline void drec_flush_end(struct dioloop_iorec *h, int fd,
				  uint64_t token, int res)
{
	struct drecorder *r = (struct drecorder *)h;
	struct drec x = { .kind = DREC_FLUSH_END, .token = token, .res = res };

	if (!token)
		return;
	g_mutex_lock(&r->lock);
	x.file = g_array_index(r->recs, struct drec, token - 1).file;
	drec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

/* The size became size. */
static inline void drec_truncate(struct dioloop_iorec *h, int fd,
				 uint64_t size)
{
	struct drecorder *r = (struct drecorder *)h;
	struct drec x = { .kind = DREC_SIZE, .off = size };

	g_mutex_lock(&r->lock);
	x.file = drec_file_of(r, fd);
	if (x.file != DREC_NONE)
		drec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

/* PUNCH_HOLE or ZERO_RANGE, both with KEEP_SIZE: the only modes a
 * backend uses on its image (a size change is reported as truncate). */
static inline void drec_fallocate(struct dioloop_iorec *h, int fd, int mode,
				  uint64_t off, uint64_t len)
{
	struct drecorder *r = (struct drecorder *)h;
	struct drec x = { .kind = DREC_ZERO, .off = off, .len = (uint32_t)len };

	ck_assert_msg(mode & FALLOC_FL_KEEP_SIZE &&
			      mode & (FALLOC_FL_PUNCH_HOLE |
				      FALLOC_FL_ZERO_RANGE) &&
			      len <= UINT32_MAX,
		      "fallocate mode %#x of %llu bytes: not followed", mode,
		      (unsigned long long)len);
	g_mutex_lock(&r->lock);
	x.file = drec_file_of(r, fd);
	if (x.file != DREC_NONE)
		drec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

/* A name of the image's directory changed. */
/* Log a name change of the directory; a created file is new (by
 * lock). */
static inline void drec_name_change(struct drecorder *r,
				    enum dioloop_iorec_name_op op,
				    const char *name, const char *new_name,
				    dev_t new_dev, ino_t new_ino)
{
	struct drec x = { 0 };
	uint16_t *live;

	x.name = drec_name(r, name);
	live = &g_array_index(r->live, uint16_t, x.name);
	switch (op) {
	case DIOLOOP_IOREC_CREATE:
		x.kind = DREC_CREATE;
		if (*live == DREC_NONE) {
			struct drec_file f = { new_dev, new_ino };

			g_array_append_val(r->files, f);
			*live = (uint16_t)(r->files->len - 1);
		}
		x.file = *live;
		break;
	case DIOLOOP_IOREC_UNLINK:
		x.kind = DREC_UNLINK;
		x.file = *live;
		*live = DREC_NONE;
		break;
	case DIOLOOP_IOREC_RENAME:
		x.kind = DREC_RENAME;
		x.new_name = drec_name(r, new_name);
		/* names may have moved: look again */
		x.file = g_array_index(r->live, uint16_t, x.name);
		g_array_index(r->live, uint16_t, x.new_name) = x.file;
		g_array_index(r->live, uint16_t, x.name) = DREC_NONE;
		break;
	}
	drec_append(r, &x);
}

static inline void drec_name_op(struct dioloop_iorec *h, int dirfd,
				enum dioloop_iorec_name_op op,
				const char *name, const char *new_name,
				int fd)
{
	struct drecorder *r = (struct drecorder *)h;
	struct stat st = { 0 };

	g_mutex_lock(&r->lock);
	if (drec_file_of(r, dirfd) == DREC_DIR) {
		ck_assert_msg(op != DIOLOOP_IOREC_CREATE || fstat(fd, &st) == 0,
			      "fstat a new sidecar");
		drec_name_change(r, op, name, new_name, st.st_dev, st.st_ino);
	}
	g_mutex_unlock(&r->lock);
}

/*
 * Fill r from a log an iorec_file.h recorder wrote (a daemon's): the
 * records of r's image, its directory and the sidecars created there, in
 * order; times gets each record's time (uint64_t, microseconds of
 * CLOCK_MONOTONIC).  r must be new (no recorder installed).
 */
static inline void drec_load_file_log(struct drecorder *r, const char *log,
				      GArray *times)
{
	GArray *begun = g_array_new(FALSE, TRUE, sizeof(guint));
	struct dioloop_iorec_file_rec h;
	gchar *buf;
	gsize len, pos = 0;
	guint i;

	ck_assert_msg(g_file_get_contents(log, &buf, &len, NULL), "read %s",
		      log);
	while (pos + sizeof(h) <= len) {
		const char *p = buf + pos + sizeof(h);
		struct drec x = { .file = DREC_NONE };
		guint before = r->recs->len;

		memcpy(&h, buf + pos, sizeof(h));
		pos += sizeof(h) + h.payload;
		ck_assert_msg(pos <= len, "%s: record %llu is whole", log,
			      (unsigned long long)h.seq);
		x.file = drec_file_id(r, (dev_t)h.dev, (ino_t)h.ino);
		switch (h.kind) {
		case DIOLOOP_IOREC_FILE_WRITE:
		case DIOLOOP_IOREC_FILE_SIZE:
		case DIOLOOP_IOREC_FILE_ZERO:
			if (x.file == DREC_NONE)
				break;
			x.kind = h.kind == DIOLOOP_IOREC_FILE_WRITE ? DREC_WRITE :
				 h.kind == DIOLOOP_IOREC_FILE_SIZE ? DREC_SIZE :
								     DREC_ZERO;
			x.off = h.off;
			x.len = (uint32_t)h.len;
			x.dsync = h.dsync;
			x.data = r->data->len;
			if (x.kind == DREC_WRITE)
				g_byte_array_append(r->data, (const guint8 *)p,
						    h.payload);
			drec_append(r, &x);
			break;
		case DIOLOOP_IOREC_FILE_FLUSH_BEGIN:
			if (x.file == DREC_NONE)
				break;
			x.kind = DREC_FLUSH_BEGIN;
			if (begun->len <= h.seq)
				g_array_set_size(begun, (guint)h.seq + 1);
			g_array_index(begun, guint, h.seq) = drec_append(r, &x) + 1;
			break;
		case DIOLOOP_IOREC_FILE_FLUSH_END:
			if (h.token >= begun->len ||
			    !g_array_index(begun, guint, h.token))
				break;
			x.kind = DREC_FLUSH_END;
			x.token = g_array_index(begun, guint, h.token);
			x.res = h.res;
			x.file = g_array_index(r->recs, struct drec,
					       x.token - 1).file;
			drec_append(r, &x);
			break;
		default:
			if (x.file != DREC_DIR)
				break;
			drec_name_change(r,
				h.kind == DIOLOOP_IOREC_FILE_CREATE ?
					DIOLOOP_IOREC_CREATE :
				h.kind == DIOLOOP_IOREC_FILE_UNLINK ?
					DIOLOOP_IOREC_UNLINK :
					DIOLOOP_IOREC_RENAME,
				p, h.kind == DIOLOOP_IOREC_FILE_RENAME ?
					   p + strlen(p) + 1 : NULL,
				(dev_t)h.new_dev, (ino_t)h.new_ino);
			break;
		}
		for (i = before; i < r->recs->len; i++)
			g_array_append_val(times, h.time_us);
	}
	ck_assert_msg(pos == len, "%s: ends with a whole record", log);
	g_array_free(begun, TRUE);
	g_free(buf);
}

/* A workload event: kind DREC_OP_BEGIN or DREC_USER_FLUSH. */
static inline void drec_user(struct drecorder *r, enum drec_kind kind,
			     uint32_t op)
{
	struct drec x = { .kind = (uint8_t)kind, .op = op,
			  .file = DREC_NONE };

	g_mutex_lock(&r->lock);
	drec_append(r, &x);
	g_mutex_unlock(&r->lock);
}

/* A recorder for the image at path (and its directory). */
static inline struct drecorder *drecorder_new(const char *path)
{
	struct drecorder *r = g_new0(struct drecorder, 1);
	char *dir = g_path_get_dirname(path);
	struct drec_file f;
	struct stat st;

	r->hook = (struct dioloop_iorec){ .write = drec_write,
					  .flush_begin = drec_flush_begin,
					  .flush_end = drec_flush_end,
					  .truncate = drec_truncate,
					  .fallocate = drec_fallocate,
					  .name = drec_name_op };
	g_mutex_init(&r->lock);
	r->recs = g_array_new(FALSE, FALSE, sizeof(struct drec));
	r->data = g_byte_array_new();
	r->files = g_array_new(FALSE, FALSE, sizeof(struct drec_file));
	r->names = g_ptr_array_new_with_free_func(g_free);
	r->live = g_array_new(FALSE, FALSE, sizeof(uint16_t));
	ck_assert_msg(stat(path, &st) == 0, "stat %s", path);
	f = (struct drec_file){ st.st_dev, st.st_ino };
	g_array_append_val(r->files, f);
	ck_assert_msg(stat(dir, &st) == 0, "stat %s", dir);
	f = (struct drec_file){ st.st_dev, st.st_ino };
	g_array_append_val(r->files, f);
	g_free(dir);
	return r;
}

/* Free r (uninstall it first). */
static inline void drecorder_free(struct drecorder *r)
{
	g_array_free(r->recs, TRUE);
	g_byte_array_free(r->data, TRUE);
	g_array_free(r->files, TRUE);
	g_ptr_array_free(r->names, TRUE);
	g_array_free(r->live, TRUE);
	g_mutex_clear(&r->lock);
	g_free(r);
}

/* How many records of kind (about file, or any: DREC_NONE). */
static inline unsigned int drec_count(const struct drecorder *r,
				      enum drec_kind kind, uint16_t file)
{
	unsigned int n = 0;
	guint i;

	for (i = 0; i < r->recs->len; i++) {
		const struct drec *x = &g_array_index(r->recs, struct drec, i);

		n += x->kind == kind && (file == DREC_NONE || x->file == file);
	}
	return n;
}

/* ---- replaying a log: the directory a power cut leaves ---- */

/* A growing flat file image in memory. */
struct drec_flat {
	unsigned char *mem;
	size_t cap, size;
};

/* Room for end bytes, zero filled. */
static inline void drec_flat_reserve(struct drec_flat *f, size_t end)
{
	if (end <= f->cap)
		return;
	f->cap = MAX(end, f->cap * 2);
	f->mem = g_realloc(f->mem, f->cap);
	memset(f->mem + f->size, 0, f->cap - f->size);
}

/* Truncate or extend with zeros, as ftruncate. */
static inline void drec_flat_resize(struct drec_flat *f, size_t size)
{
	drec_flat_reserve(f, size);
	if (size < f->size)
		memset(f->mem + size, 0, f->size - size);
	f->size = size;
}

/* Apply an image record to f. */
static inline void drec_flat_apply(struct drec_flat *f,
				   const struct drecorder *r,
				   const struct drec *x)
{
	if (x->kind == DREC_WRITE) {
		drec_flat_reserve(f, x->off + x->len);
		memcpy(f->mem + x->off, r->data->data + x->data, x->len);
		f->size = MAX(f->size, x->off + x->len);
	} else if (x->kind == DREC_ZERO && x->off < f->size) {
		memset(f->mem + x->off, 0, MIN(x->len, f->size - x->off));
	} else if (x->kind == DREC_SIZE) {
		drec_flat_resize(f, x->off);
	}
}

/* f holds the file at path. */
static inline void drec_flat_load(struct drec_flat *f, const char *path)
{
	gchar *contents;
	gsize len;

	ck_assert_msg(g_file_get_contents(path, &contents, &len, NULL),
		      "read %s", path);
	drec_flat_resize(f, len);
	memcpy(f->mem, contents, len);
	g_free(contents);
}

static const unsigned char drec_zero_sector[DREC_SECTOR];

/* Sectors x covers (writes are whole sectors; a zeroed range may end
 * inside one: its edges). */
static inline uint32_t drec_sectors(const struct drec *x)
{
	return (uint32_t)((x->off + x->len + DREC_SECTOR - 1) / DREC_SECTOR -
			  x->off / DREC_SECTOR);
}

/* Write the s-th sector x covers into fd, whole, as x left it (a
 * sector is atomic), clipped to fsize for a zeroed range. */
static inline void drec_put_sector(int fd, const struct drecorder *r,
				   const struct drec *x, uint32_t s,
				   uint64_t fsize)
{
	uint64_t off = (x->off / DREC_SECTOR + s) * DREC_SECTOR;
	uint32_t n = DREC_SECTOR;
	const unsigned char *p = drec_zero_sector;

	if (x->kind == DREC_WRITE) {
		p = r->data->data + x->data + (off - x->off);
	} else {
		if (off >= fsize)
			return;
		n = (uint32_t)MIN(n, fsize - off);
		if (off < x->off)
			p = r->data->data + x->data;
		else if (off + DREC_SECTOR > x->off + x->len)
			p = r->data->data + x->data + DREC_SECTOR;
	}
	ck_assert_msg(pwrite(fd, p, n, (off_t)off) == (ssize_t)n,
		      "pwrite the copy");
}

/*
 * The workload's image, replayed in log order from its first contents:
 * gives each zeroed range the contents of its edge sectors just after it
 * (two sectors appended to the log's data), as a zeroed range that ends
 * inside a sector rewrites that whole sector.  Image writes are whole
 * sectors.
 */
static inline void drec_resolve_zero_edges(struct drecorder *r,
					   const struct drec_flat *first)
{
	struct drec_flat live = { 0 };
	guint i;

	drec_flat_resize(&live, first->size);
	memcpy(live.mem, first->mem, first->size);
	for (i = 0; i < r->recs->len; i++) {
		struct drec *x = &g_array_index(r->recs, struct drec, i);
		uint64_t a, z;

		if (x->file != DREC_IMAGE)
			continue;
		ck_assert_msg(x->kind != DREC_WRITE ||
				      (x->off % DREC_SECTOR == 0 && x->len % DREC_SECTOR == 0),
			      "image write [%llu, +%u) is whole sectors",
			      (unsigned long long)x->off, x->len);
		drec_flat_apply(&live, r, x);
		if (x->kind != DREC_ZERO)
			continue;
		a = x->off / DREC_SECTOR * DREC_SECTOR;
		z = (x->off + x->len - 1) / DREC_SECTOR * DREC_SECTOR;
		drec_flat_reserve(&live, z + DREC_SECTOR);
		x->data = r->data->len;
		g_byte_array_append(r->data, live.mem + a, DREC_SECTOR);
		g_byte_array_append(r->data, live.mem + z, DREC_SECTOR);
	}
	g_free(live.mem);
}

/* What the tail of a cut did, for messages. */
struct drec_tail_stats {
	guint uncertain, kept, torn, size_only;
};

/* Apply the uncovered image writes and zeroed ranges seg to fd: shuffled,
 * each dropped, torn or whole; a dropped or torn extending write may
 * still have moved the size. */
static inline void drec_apply_segment(int fd, const struct drecorder *r,
				      GArray *seg, uint64_t *fsize,
				      uint32_t tear, struct test_rng *rng,
				      struct drec_tail_stats *ts)
{
	guint i, j, loose = 0;

	/* Durable writes (O_DSYNC) last, in their order: the others are
	 * shuffled before them. */
	for (i = 0; i < seg->len; i++) {
		guint t = g_array_index(seg, guint, i);

		if (g_array_index(r->recs, struct drec, t).dsync)
			continue;
		memmove(&g_array_index(seg, guint, loose + 1),
			&g_array_index(seg, guint, loose),
			(i - loose) * sizeof(guint));
		g_array_index(seg, guint, loose++) = t;
	}
	for (i = loose; i > 1; i--) {
		guint t = g_array_index(seg, guint, i - 1);

		j = (guint)test_rng_range(rng, 0, i - 1);
		g_array_index(seg, guint, i - 1) = g_array_index(seg, guint, j);
		g_array_index(seg, guint, j) = t;
	}
	for (i = 0; i < seg->len; i++) {
		const struct drec *x = &g_array_index(
			r->recs, struct drec, g_array_index(seg, guint, i));
		uint32_t nsect = drec_sectors(x), s;
		uint64_t end = x->off + x->len;
		unsigned int how = x->dsync ? 7 :
				   (unsigned int)test_rng_range(rng, 0, 7);
		bool extends = x->kind == DREC_WRITE && end > *fsize;

		ts->uncertain++;
		if (how >= 3) {
			for (s = 0; s < nsect; s++)
				drec_put_sector(fd, r, x, s, *fsize);
			ts->kept++;
		} else if (how == 2) {
			/* Each aligned unit of tear bytes whole or not at
			 * all. */
			bool keep = false;

			for (s = 0; s < nsect; s++) {
				uint64_t at = (x->off / DREC_SECTOR + s) *
					      DREC_SECTOR;

				if (s == 0 || at % tear == 0)
					keep = test_rng_next(rng) % 2;
				if (keep)
					drec_put_sector(fd, r, x, s, *fsize);
			}
			ts->torn++;
		}
		if (extends && how <= 2 && test_rng_next(rng) % 2) {
			ck_assert_msg(ftruncate(fd, (off_t)end) == 0,
				      "extend the copy");
			ts->size_only++;
		}
		if (x->kind == DREC_WRITE) {
			struct stat st;

			ck_assert_msg(fstat(fd, &st) == 0, "fstat the copy");
			*fsize = (uint64_t)st.st_size;
		}
	}
	g_array_set_size(seg, 0);
}

/* The log's state at a cut: what the records before it made durable,
 * and what the workload was told. */
struct drec_replay {
	struct drecorder *r;
	guint scanned;		/* records before it are counted */
	guint *durable;		/* per file: its records before this are
				 * covered by a completed sync of it */
	guint based;		/* image records before it are in base */
	struct drec_flat base;
	guint flushed, started;	/* ops [0, flushed) flushed */
	uint32_t tear;		/* a torn write keeps or loses whole
				 * aligned units of this many bytes (a
				 * multiple of DREC_SECTOR); 0: one sector */
};

/* Move rp to cut: count the records before it, extend the base. */
static inline void drec_replay_advance(struct drec_replay *rp, guint cut)
{
	const struct drecorder *r = rp->r;

	for (; rp->scanned < cut; rp->scanned++) {
		const struct drec *x = &g_array_index(r->recs, struct drec,
						      rp->scanned);

		if (x->kind == DREC_FLUSH_END && x->res == 0 &&
		    x->file != DREC_NONE)
			rp->durable[x->file] = MAX(rp->durable[x->file],
						   (guint)x->token - 1);
		else if (x->kind == DREC_USER_FLUSH)
			rp->flushed = x->op;
		else if (x->kind == DREC_OP_BEGIN)
			rp->started = x->op + 1;
	}
	for (; rp->based < rp->durable[DREC_IMAGE]; rp->based++) {
		const struct drec *x = &g_array_index(r->recs, struct drec,
						      rp->based);

		if (x->file == DREC_IMAGE)
			drec_flat_apply(&rp->base, r, x);
	}
}

/* Write the image a cut leaves at path. */
static inline void drec_write_image(const char *path, struct drec_replay *rp,
				    guint cut, struct test_rng *rng,
				    struct drec_tail_stats *ts)
{
	const struct drecorder *r = rp->r;
	GArray *seg = g_array_new(FALSE, FALSE, sizeof(guint));
	uint64_t fsize = rp->base.size;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t at;
	guint i;

	ck_assert_msg(fd >= 0, "create %s: %s", path, g_strerror(errno));
	ck_assert_msg(ftruncate(fd, (off_t)rp->base.size) == 0,
		      "size the copy");
	/* The base, sparse: pieces of zeros stay holes. */
	for (at = 0; at < rp->base.size; at += DREC_PIECE) {
		size_t n = MIN(DREC_PIECE, rp->base.size - at);
		const unsigned char *p = rp->base.mem + at;

		if (p[0] == 0 && !memcmp(p, p + 1, n - 1))
			continue;
		ck_assert_msg(pwrite(fd, p, n, (off_t)at) == (ssize_t)n,
			      "write the base of the copy");
	}
	for (i = rp->durable[DREC_IMAGE]; i <= cut; i++) {
		const struct drec *x = i < cut ?
			&g_array_index(r->recs, struct drec, i) : NULL;

		if (x && (x->file != DREC_IMAGE ||
			  (x->kind != DREC_WRITE && x->kind != DREC_ZERO &&
			   x->kind != DREC_SIZE)))
			continue;
		if (x && x->kind != DREC_SIZE) {
			g_array_append_val(seg, i);
			continue;
		}
		drec_apply_segment(fd, r, seg, &fsize,
				   rp->tear ? rp->tear : DREC_SECTOR, rng, ts);
		if (x && test_rng_next(rng) % 2) {
			ck_assert_msg(ftruncate(fd, (off_t)x->off) == 0,
				      "ftruncate the copy");
			fsize = x->off;
		}
	}
	close(fd);
	g_array_free(seg, TRUE);
}

/* Write the sidecars a cut leaves into dir: the names as their
 * directory's syncs (and luck) left them, each file's contents as its
 * own syncs (and luck) left them.  How many into *nr. */
static inline void drec_write_sidecars(const char *dir, struct drec_replay *rp,
				       guint cut, struct test_rng *rng,
				       guint *nr)
{
	const struct drecorder *r = rp->r;
	guint nfiles = r->files->len, nnames = r->names->len, i;
	GByteArray **content = g_new0(GByteArray *, nfiles);
	uint16_t *live = g_new(uint16_t, nnames);

	for (i = 0; i < nnames; i++)
		live[i] = DREC_NONE;
	for (i = 2; i < nfiles; i++)
		content[i] = g_byte_array_new();
	for (i = 0; i < cut; i++) {
		const struct drec *x = &g_array_index(r->recs, struct drec, i);
		bool names = x->kind == DREC_CREATE || x->kind == DREC_UNLINK ||
			     x->kind == DREC_RENAME;
		bool data = x->file != DREC_NONE && x->file >= 2 &&
			    (x->kind == DREC_CREATE || x->kind == DREC_WRITE ||
			     x->kind == DREC_SIZE);

		if (names && (i < rp->durable[DREC_DIR] ||
			      test_rng_range(rng, 0, 3))) {
			if (x->kind == DREC_RENAME) {
				live[x->new_name] = x->file;
				live[x->name] = DREC_NONE;
			} else {
				live[x->name] = x->kind == DREC_CREATE ?
							x->file : DREC_NONE;
			}
		}
		if (data) {
			GByteArray *c = content[x->file];
			unsigned int how = i < rp->durable[x->file] ? 0 :
				(unsigned int)test_rng_range(rng, 0, 2);
			uint64_t end = x->off + x->len;

			if (how == 1)
				continue;	/* dropped */
			if (x->kind != DREC_WRITE) {
				g_byte_array_set_size(c, x->kind == DREC_SIZE ?
							(guint)x->off : 0);
				continue;
			}
			if (c->len < end) {
				guint old = c->len;

				g_byte_array_set_size(c, (guint)end);
				memset(c->data + old, 0, end - old);
			}
			if (how == 0)	/* else: the size, not the data */
				memcpy(c->data + x->off,
				       r->data->data + x->data, x->len);
		}
	}
	*nr = 0;
	for (i = 0; i < nnames; i++) {
		char *path;

		if (live[i] == DREC_NONE)
			continue;
		path = g_build_filename(dir, g_ptr_array_index(r->names, i),
					NULL);
		ck_assert_msg(g_file_set_contents(path,
						  (const char *)content[live[i]]->data,
						  content[live[i]]->len, NULL),
			      "write %s", path);
		ck_assert_msg(chmod(path, 0600) == 0, "chmod %s", path);
		g_free(path);
		(*nr)++;
	}
	for (i = 2; i < nfiles; i++)
		g_byte_array_free(content[i], TRUE);
	g_free(content);
	g_free(live);
}

/* Remove the sidecars (any name the log knows) from dir. */
static inline void drec_remove_sidecars(const char *dir,
					const struct drecorder *r)
{
	guint i;

	for (i = 0; i < r->names->len; i++) {
		char *path = g_build_filename(dir,
					      g_ptr_array_index(r->names, i),
					      NULL);

		ck_assert_msg(unlink(path) == 0 || errno == ENOENT,
			      "remove %s: %s", path, g_strerror(errno));
		g_free(path);
	}
}

#endif
