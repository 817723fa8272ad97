/* SPDX-License-Identifier: MIT */
/*
 * dioloop-fsx: the PRNG, the model and the operations.  Each op picks its
 * ranges, runs one system call, checks the result against the model and
 * then updates the model.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/fsx/fsx.h"

/* ---- PRNG: splitmix64 seeding xoshiro256**, the same on every host ---- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void fsx_seed(struct fsx *x, uint64_t seed)
{
	unsigned int i;

	for (i = 0; i < 4; i++)
		x->rng[i] = splitmix64(&seed);
}

static uint64_t rotl64(uint64_t v, int k)
{
	return (v << k) | (v >> (64 - k));
}

static uint64_t rnd(struct fsx *x)
{
	uint64_t *s = x->rng;
	uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return r;
}

/* Uniform enough in [0, n); 0 when n is 0. */
static uint64_t rnd_below(struct fsx *x, uint64_t n)
{
	return n ? rnd(x) % n : 0;
}

/* len random bytes at p. */
static void fill_random(struct fsx *x, uint8_t *p, size_t len)
{
	uint64_t v;

	for (; len >= 8; p += 8, len -= 8) {
		v = rnd(x);
		memcpy(p, &v, 8);
	}
	if (len) {
		v = rnd(x);
		memcpy(p, &v, len);
	}
}

/* ---- the model ---- */

/* Resize the model; bytes past the old size read as zeros. */
static void model_resize(struct fsx_file *f, uint64_t size)
{
	if (size > f->alloc) {
		f->model = g_realloc(f->model, size);
		f->alloc = size;
	}
	if (size > f->size)
		memset(f->model + f->size, 0, size - f->size);
	f->size = size;
}

/* First offset in [start, end) where the model is not zero, or end. */
static uint64_t model_first_nonzero(const struct fsx_file *f, uint64_t start,
				    uint64_t end)
{
	static const uint8_t zeros[4096];
	uint64_t pos;

	for (pos = start; pos < end; pos += sizeof(zeros)) {
		size_t n = (size_t)MIN(end - pos, sizeof(zeros));

		if (memcmp(f->model + pos, zeros, n)) {
			while (!f->model[pos])
				pos++;
			return pos;
		}
	}
	return end;
}

/* The file's size from fstat: it must be the model's. */
static void check_size(struct fsx *x, struct fsx_file *f, const char *after)
{
	struct stat st;

	if (fstat(f->fd, &st) < 0)
		fsx_fail(x, "fstat %s: %s", f->name, strerror(errno));
	if ((uint64_t)st.st_size != f->size)
		fsx_fail(x, "%s has size 0x%" PRIx64 " after %s, expected 0x%"
			 PRIx64, f->name, (uint64_t)st.st_size, after,
			 f->size);
}

/*
 * After an op of a growable run reached end past the size: the file must
 * have grown to end, or up to a block past it (a node rounds its size up
 * to its sector size); the model follows, zeros past end.
 */
static void grew_to(struct fsx *x, struct fsx_file *f, uint64_t end)
{
	uint64_t top = (end + FSX_BLOCK - 1) / FSX_BLOCK * FSX_BLOCK;
	struct stat st;

	if (end <= f->size)
		return;
	if (!x->o.growable)
		fsx_fail(x, "%s: an op reached 0x%" PRIx64 ", past the size 0x%"
			 PRIx64 ", without -g", f->name, end, f->size);
	if (fstat(f->fd, &st) < 0)
		fsx_fail(x, "fstat %s: %s", f->name, strerror(errno));
	if ((uint64_t)st.st_size < end || (uint64_t)st.st_size > top)
		fsx_fail(x, "%s has size 0x%" PRIx64 " after growing to 0x%"
			 PRIx64 ", expected 0x%" PRIx64 "..0x%" PRIx64,
			 f->name, (uint64_t)st.st_size, end, end, top);
	model_resize(f, (uint64_t)st.st_size);
}

/* ---- picking ranges ---- */

/* An offset below limit (> 0): page or sector aligned, or not at all. */
static uint64_t pick_off(struct fsx *x, uint64_t limit)
{
	uint64_t off = rnd_below(x, limit);

	switch (rnd_below(x, 4)) {
	case 0:
		return off & ~(uint64_t)4095;
	case 1:
		return off & ~(uint64_t)511;
	default:
		return off;
	}
}

/* A length in [1, maxop]: tiny, about a page, page multiples, any. */
static uint64_t pick_len(struct fsx *x)
{
	uint64_t m = x->o.maxop;

	switch (rnd_below(x, 8)) {
	case 0:
		return 1 + rnd_below(x, MIN(m, 64));
	case 1:
	case 2:
		return 1 + rnd_below(x, MIN(m, 8192));
	case 3:
		if (m >= 4096)
			return 4096 * (1 + rnd_below(x, m / 4096));
		return m;
	default:
		return 1 + rnd_below(x, m);
	}
}

/* A range inside [0, limit) (limit > 0), at least one byte. */
static void pick_range(struct fsx *x, uint64_t limit, uint64_t *off,
		       uint64_t *len)
{
	uint64_t n;

	*off = pick_off(x, limit);
	n = pick_len(x);		/* not inside MIN(): it is a macro */
	*len = MIN(n, limit - *off);
}

/* A range that starts below the size and ends past it (size > 0); at most
 * 2 * maxop long. */
static void pick_eof_range(struct fsx *x, const struct fsx_file *f,
			   uint64_t *off, uint64_t *len)
{
	uint64_t back = 1 + rnd_below(x, MIN(f->size, x->o.maxop));

	*off = f->size - back;
	*len = back + 1 + rnd_below(x, x->o.maxop);
}

/* ---- the ops ---- */

/* pread len bytes at off through fd and check count and bytes. */
static void do_read(struct fsx *x, struct fsx_file *f, enum fsx_op op,
		    uint64_t off, uint64_t len)
{
	bool dio = op == OP_DIO_READ;
	uint8_t *buf = dio ? x->dio_buf : x->buf;
	struct fsx_log *l = fsx_log_op(x, op, f, off, len);
	uint64_t want = off >= f->size ? 0 : MIN(len, f->size - off);
	ssize_t r;

	r = pread(dio ? f->dio_fd : f->fd, buf, len, (off_t)off);
	fsx_log_done(l, r < 0 ? -errno : r);
	if (r < 0)
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64 ": %s",
			 fsx_op_names[op], f->name, off, len, strerror(errno));
	if ((uint64_t)r != want)
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64 " (size 0x%"
			 PRIx64 ") returned %zd, expected %" PRIu64 "%s",
			 fsx_op_names[op], f->name, off, len, f->size, r, want,
			 off >= f->size ? " (a read at or past EOF returns 0)" :
			 want < len ? " (a read across EOF is short)" : "");
	if (r > 0)
		fsx_check_data(x, f, off, buf, (size_t)r, fsx_op_names[op]);
}

/* A read inside the region (-g: possibly across EOF); 1 in 64 is empty. */
static void op_read(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;

	pick_range(x, fsx_region(x, f), &off, &len);
	if (x->o.growable)	/* reads may cross EOF; maxlen bounds them */
		len = pick_len(x);
	if (rnd_below(x, 64) == 0)
		len = 0;
	do_read(x, f, OP_READ, off, len);
}

/* A read at EOF, past it, or across it. */
static void op_read_eof(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len = pick_len(x);

	switch (rnd_below(x, 4)) {
	case 0:
		off = f->size;
		break;
	case 1:
		off = f->size + 1 + rnd_below(x, 1u << 20);
		break;
	default:
		if (f->size)
			pick_eof_range(x, f, &off, &len);
		else
			off = 0;
		break;
	}
	do_read(x, f, OP_READ_EOF, off, len);
}

/* pwrite random (1 in 16: zero) bytes; the model takes them. */
static void do_write(struct fsx *x, struct fsx_file *f, enum fsx_op op,
		     uint64_t off, uint64_t len)
{
	bool dio = op == OP_DIO_WRITE;
	uint8_t *buf = dio ? x->dio_buf : x->buf;
	struct fsx_log *l;
	ssize_t r;

	if (rnd_below(x, 16) == 0)
		memset(buf, 0, len);
	else
		fill_random(x, buf, len);
	l = fsx_log_op(x, op, f, off, len);
	l->zeros = len && !buf[0] && !memcmp(buf, buf + 1, len - 1);
	r = pwrite(dio ? f->dio_fd : f->fd, buf, len, (off_t)off);
	fsx_log_done(l, r < 0 ? -errno : r);
	if (r < 0)
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64 ": %s",
			 fsx_op_names[op], f->name, off, len, strerror(errno));
	if ((uint64_t)r != len)
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64
			 " was short: %zd bytes", fsx_op_names[op], f->name, off,
			 len, r);
	if (len)	/* writing nothing grows nothing */
		grew_to(x, f, off + len);
	memcpy(f->model + off, buf, len);
}

/* A write inside the region; 1 in 100 is empty. */
static void op_write(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;

	pick_range(x, fsx_region(x, f), &off, &len);
	if (rnd_below(x, 100) == 0)
		len = 0;
	do_write(x, f, OP_WRITE, off, len);
}

/*
 * -B, block semantics: a write reaching past the end of a fixed-size node
 * fails with ENOSPC and writes nothing (the FUSE kernel splits writes
 * longer than max_write, so a long one may instead stop short, before the
 * end); the size does not change.
 */
static void op_write_eof(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;
	struct fsx_log *l;
	ssize_t r;

	if (rnd_below(x, 3) == 0 || !f->size) {
		off = f->size + rnd_below(x, 8192);
		len = pick_len(x);
	} else {
		pick_eof_range(x, f, &off, &len);
	}
	len = MIN(len, x->o.maxop);
	if (off + len <= f->size)
		len = f->size - off + 1;
	fill_random(x, x->buf, len);
	l = fsx_log_op(x, OP_WRITE_EOF, f, off, len);
	r = pwrite(f->fd, x->buf, len, (off_t)off);
	fsx_log_done(l, r < 0 ? -errno : r);
	if (r < 0 && errno != ENOSPC)
		fsx_fail(x, "write_eof %s 0x%" PRIx64 " len 0x%" PRIx64
			 ": %s, expected ENOSPC", f->name, off, len,
			 strerror(errno));
	if (r >= 0 && (r == 0 || off + (uint64_t)r > f->size))
		fsx_fail(x, "write_eof %s 0x%" PRIx64 " len 0x%" PRIx64
			 " past the size 0x%" PRIx64 " returned %zd, expected "
			 "ENOSPC", f->name, off, len, f->size, r);
	if (r > 0)
		memcpy(f->model + off, x->buf, (size_t)r);
	check_size(x, f, "a write past EOF");
}

/* fallocate mode 0 inside the file: preallocation, the bytes stay. */
static void op_alloc(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;
	struct fsx_log *l;
	int r;

	pick_range(x, MIN(fsx_region(x, f), f->size), &off, &len);
	l = fsx_log_op(x, OP_ALLOC, f, off, len);
	r = fallocate(f->fd, 0, (off_t)off, (off_t)len);
	fsx_log_done(l, r < 0 ? -errno : 0);
	if (r < 0)
		fsx_fail(x, "allocate %s 0x%" PRIx64 " len 0x%" PRIx64 ": %s",
			 f->name, off, len, strerror(errno));
}

/* PUNCH_HOLE or ZERO_RANGE with KEEP_SIZE; 1 in 8 crosses EOF. */
static void op_fallocate(struct fsx *x, struct fsx_file *f, enum fsx_op op)
{
	int mode = (op == OP_PUNCH ? FALLOC_FL_PUNCH_HOLE :
		    FALLOC_FL_ZERO_RANGE) | FALLOC_FL_KEEP_SIZE;
	bool eof = f->size && rnd_below(x, 8) == 0;
	uint64_t off, len;
	struct fsx_log *l;
	int r;

	if (eof)
		pick_eof_range(x, f, &off, &len);
	else
		pick_range(x, fsx_region(x, f), &off, &len);
	l = fsx_log_op(x, op, f, off, len);
	r = fallocate(f->fd, mode, (off_t)off, (off_t)len);
	fsx_log_done(l, r < 0 ? -errno : 0);
	if (r < 0)
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64 ": %s%s",
			 fsx_op_names[op], f->name, off, len, strerror(errno),
			 errno == EOPNOTSUPP ? (op == OP_PUNCH ?
			 " (-H skips punch_hole)" : " (-Z skips zero_range)") :
			 "");
	if (off < f->size)
		memset(f->model + off, 0, MIN(len, f->size - off));
	if (eof)
		check_size(x, f, fsx_op_names[op]);
}

/* fsync or fdatasync: 0, and the size unchanged. */
static void op_sync(struct fsx *x, struct fsx_file *f, enum fsx_op op)
{
	struct fsx_log *l = fsx_log_op(x, op, f, 0, 0);
	int r = op == OP_FSYNC ? fsync(f->fd) : fdatasync(f->fd);

	fsx_log_done(l, r < 0 ? -errno : 0);
	if (r < 0)
		fsx_fail(x, "%s %s: %s", fsx_op_names[op], f->name,
			 strerror(errno));
	check_size(x, f, fsx_op_names[op]);
}

/*
 * copy_file_range from src to dst: within one file the ranges do not
 * overlap.  1 in 8 starts near the end of src and must come back short,
 * at EOF.  In bounds, the whole length is copied.
 */
static void op_copy(struct fsx *x, struct fsx_file *f)
{
	struct fsx_file *src = f, *dst = f;
	uint64_t off_in, off_out, len, want, lim_out;
	bool below, above;
	off64_t in, out;
	struct fsx_log *l;
	ssize_t r;

	if (x->nr_files == 2 && rnd_below(x, 3)) {
		src = &x->files[rnd_below(x, 2)];
		dst = &x->files[src == &x->files[0]];
	}
	if (!src->size || fsx_region(x, dst) < 2)
		return;
	len = pick_len(x);
	if (rnd_below(x, 8) == 0)
		pick_eof_range(x, src, &off_in, &len);
	else
		off_in = pick_off(x, MIN(fsx_region(x, src), src->size));
	want = MIN(len, src->size - off_in);
	lim_out = fsx_region(x, dst);
	if (src != dst) {
		if (want > lim_out)
			want = len = lim_out;
		off_out = pick_off(x, lim_out - want + 1);
	} else {
		/* Two disjoint ranges of want bytes below lim_out. */
		if (want > lim_out / 2)
			want = len = lim_out / 2;
		if (off_in + want > lim_out) {
			off_in = lim_out - want;
			len = want;
		}
		below = off_in >= want;
		above = off_in + 2 * want <= lim_out;
		if (!below && !above) {
			off_in = 0;
			len = want;
			above = true;
		}
		if (below && (!above || rnd_below(x, 2)))
			off_out = pick_off(x, off_in - want + 1);
		else
			off_out = off_in + want +
				  rnd_below(x, lim_out - 2 * want - off_in + 1);
	}
	l = fsx_log_op(x, OP_COPY, src, off_in, len);
	l->file2 = fsx_file_index(x, dst);
	l->off2 = off_out;
	in = (off64_t)off_in;
	out = (off64_t)off_out;
	r = copy_file_range(src->fd, &in, dst->fd, &out, len, 0);
	fsx_log_done(l, r < 0 ? -errno : r);
	if (r < 0)
		fsx_fail(x, "copy_range %s 0x%" PRIx64 " -> %s 0x%" PRIx64
			 " len 0x%" PRIx64 ": %s%s", src->name, off_in,
			 dst->name, off_out, len, strerror(errno),
			 errno == EOPNOTSUPP || errno == EXDEV ?
			 " (-C skips copy_range)" : "");
	if ((uint64_t)r != want)
		fsx_fail(x, "copy_range %s 0x%" PRIx64 " -> %s 0x%" PRIx64
			 " len 0x%" PRIx64 " (%s size 0x%" PRIx64
			 ") returned %zd, expected %" PRIu64, src->name,
			 off_in, dst->name, off_out, len, src->name,
			 src->size, r, want);
	if (want)
		grew_to(x, dst, off_out + want);
	memmove(dst->model + off_out, src->model + off_in, want);
}

/*
 * -B: copy_file_range from src (in bounds) to a range of FILE that crosses
 * its end: like a write past EOF, ENOSPC or a copy that stops short of the
 * end (the daemon copies piece by piece); the size does not change.
 */
static void op_copy_eof(struct fsx *x, struct fsx_file *src)
{
	struct fsx_file *dst = &x->files[0];
	uint64_t off_in, off_out, len;
	off64_t in, out;
	struct fsx_log *l;
	ssize_t r;

	pick_eof_range(x, dst, &off_out, &len);
	if (len > src->size)
		return;
	off_in = rnd_below(x, src->size - len + 1);
	if (src == dst && off_in + len > off_out)
		return;		/* would overlap */
	l = fsx_log_op(x, OP_COPY_EOF, src, off_in, len);
	l->file2 = 0;
	l->off2 = off_out;
	in = (off64_t)off_in;
	out = (off64_t)off_out;
	r = copy_file_range(src->fd, &in, dst->fd, &out, len, 0);
	fsx_log_done(l, r < 0 ? -errno : r);
	if (r < 0 && errno != ENOSPC)
		fsx_fail(x, "copy_eof %s 0x%" PRIx64 " -> FILE 0x%" PRIx64
			 " len 0x%" PRIx64 ": %s, expected ENOSPC", src->name,
			 off_in, off_out, len, strerror(errno));
	if (r >= 0 && (r == 0 || off_out + (uint64_t)r > dst->size))
		fsx_fail(x, "copy_eof %s 0x%" PRIx64 " -> FILE 0x%" PRIx64
			 " len 0x%" PRIx64 " past the size 0x%" PRIx64
			 " returned %zd, expected ENOSPC", src->name, off_in,
			 off_out, len, dst->size, r);
	if (r > 0)
		memmove(dst->model + off_out, src->model + off_in, (size_t)r);
	check_size(x, dst, "a copy past EOF");
}

/*
 * SEEK_DATA and SEEK_HOLE at off.  A file system may report data where
 * the file reads as zeros (never reporting a hole is valid), but a hole
 * must read as zeros.  So, for off < size:
 *  - SEEK_DATA(off) is d with off <= d < size, or ENXIO; the model is zero
 *    over [off, d) (over [off, size) for ENXIO).  In particular SEEK_DATA
 *    at a non-zero byte returns off itself.
 *  - SEEK_HOLE(off) is h with off <= h <= size (the end of the file is a
 *    hole, so never ENXIO).
 *  - Both read one map: off is in a hole for SEEK_DATA (d > off, or ENXIO)
 *    exactly when SEEK_HOLE(off) == off.
 *  - A hole that SEEK_HOLE finds at off < h < size is checked from h the
 *    same way (follow): SEEK_DATA(h) must skip it, the model is zero there.
 * For off >= size both fail with ENXIO.  Nothing is checked about where
 * data is reported: zeros may be data.
 */
static void seek_check(struct fsx *x, struct fsx_file *f, uint64_t off,
		       bool follow)
{
	struct fsx_log *l = fsx_log_op(x, OP_SEEK, f, off, 0);
	off_t d, h;
	int derr, herr;
	uint64_t dend, nz;

	errno = 0;
	d = lseek(f->fd, (off_t)off, SEEK_DATA);
	derr = errno;
	errno = 0;
	h = lseek(f->fd, (off_t)off, SEEK_HOLE);
	herr = errno;
	l->res = d < 0 ? -derr : d;
	l->res2 = h < 0 ? -herr : h;
	l->done = true;
	if (off >= f->size) {
		if (d >= 0 || derr != ENXIO || h >= 0 || herr != ENXIO)
			fsx_fail(x, "seek %s 0x%" PRIx64 " at or past the size "
				 "0x%" PRIx64 ": SEEK_DATA and SEEK_HOLE must "
				 "fail with ENXIO", f->name, off, f->size);
		return;
	}
	if ((d < 0 && derr != ENXIO) || (d >= 0 &&
	    ((uint64_t)d < off || (uint64_t)d >= f->size)))
		fsx_fail(x, "SEEK_DATA %s 0x%" PRIx64 " (size 0x%" PRIx64
			 "): expected ENXIO or an offset in [0x%" PRIx64
			 ", 0x%" PRIx64 ")", f->name, off, f->size, off,
			 f->size);
	if (h < 0 || (uint64_t)h < off || (uint64_t)h > f->size)
		fsx_fail(x, "SEEK_HOLE %s 0x%" PRIx64 " (size 0x%" PRIx64
			 "): expected an offset in [0x%" PRIx64 ", 0x%" PRIx64
			 "] (the end is a hole)", f->name, off, f->size, off,
			 f->size);
	dend = d < 0 ? f->size : (uint64_t)d;
	nz = model_first_nonzero(f, off, dend);
	if (nz < dend)
		fsx_fail(x, "SEEK_DATA %s 0x%" PRIx64 " skipped to 0x%" PRIx64
			 " over data: the model has 0x%02x at 0x%" PRIx64,
			 f->name, off, dend, f->model[nz], nz);
	if ((dend > off) != ((uint64_t)h == off))
		fsx_fail(x, "seek %s 0x%" PRIx64 ": SEEK_DATA says %s, "
			 "SEEK_HOLE says %s", f->name, off,
			 dend > off ? "hole" : "data",
			 (uint64_t)h == off ? "hole" : "data");
	if (follow && (uint64_t)h > off && (uint64_t)h < f->size)
		seek_check(x, f, (uint64_t)h, false);
}

/* seek_check at EOF or past it, at a page boundary, or anywhere. */
static void op_seek(struct fsx *x, struct fsx_file *f)
{
	uint64_t off;

	switch (rnd_below(x, 8)) {
	case 0:
		off = f->size + rnd_below(x, 2) * rnd_below(x, 1u << 20);
		break;
	case 1:
	case 2:
		off = rnd_below(x, f->size) & ~(uint64_t)4095;
		break;
	default:
		off = rnd_below(x, f->size);
		break;
	}
	seek_check(x, f, off, true);
}

/* -a: FSX_DIO_ALIGN-aligned offset and length through the O_DIRECT fd. */
static void op_dio(struct fsx *x, struct fsx_file *f, enum fsx_op op)
{
	uint64_t lim = op == OP_DIO_READ ? MIN(fsx_region(x, f), f->size) :
					   fsx_region(x, f);
	uint64_t blocks = lim / FSX_DIO_ALIGN, off, len;

	if (!blocks)
		return;
	off = rnd_below(x, blocks);
	len = 1 + rnd_below(x, MIN(blocks - off,
				   MAX(x->o.maxop / FSX_DIO_ALIGN, 1)));
	off *= FSX_DIO_ALIGN;
	len *= FSX_DIO_ALIGN;
	if (op == OP_DIO_READ)
		do_read(x, f, op, off, len);
	else
		do_write(x, f, op, off, len);
}

/* -g: ftruncate to a multiple of FSX_BLOCK up to -l. */
static void op_truncate(struct fsx *x, struct fsx_file *f)
{
	uint64_t size = rnd_below(x, x->o.maxlen / FSX_BLOCK + 1) * FSX_BLOCK;
	struct fsx_log *l = fsx_log_op(x, OP_TRUNCATE, f, size, 0);
	int r = ftruncate(f->fd, (off_t)size);

	fsx_log_done(l, r < 0 ? -errno : 0);
	if (r < 0)
		fsx_fail(x, "truncate %s to 0x%" PRIx64 ": %s", f->name, size,
			 strerror(errno));
	model_resize(f, size);
	check_size(x, f, "truncate");
}

/* ---- mapped reads and writes (-m) ---- */

/* A MAP_SHARED mapping of [off, off + len) of f: the page-aligned start
 * goes to *base and *map_len; the caller's bytes are at the returned
 * pointer.  Fails the run when mmap does. */
static uint8_t *map_range(struct fsx *x, struct fsx_file *f, enum fsx_op op,
			  uint64_t off, uint64_t len, void **base,
			  size_t *map_len, struct fsx_log *l)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = off & ~(page - 1);
	int prot = PROT_READ | (op == OP_MAP_WRITE ? PROT_WRITE : 0);
	void *p;

	*map_len = (size_t)(off + len - start);
	p = mmap(NULL, *map_len, prot, MAP_SHARED, f->fd, (off_t)start);
	if (p == MAP_FAILED) {
		fsx_log_done(l, -errno);
		fsx_fail(x, "%s %s 0x%" PRIx64 " len 0x%" PRIx64
			 ": mmap MAP_SHARED: %s%s", fsx_op_names[op], f->name,
			 off, len, strerror(errno),
			 op == OP_MAP_READ ? " (-R skips map_read)" :
			 " (-W skips map_write)");
	}
	*base = p;
	return (uint8_t *)p + (off - start);
}

/* Read a range inside the size through a shared mapping and check it. */
static void op_map_read(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;
	struct fsx_log *l;
	size_t map_len;
	uint8_t *p;
	void *base;

	if (!f->size)
		return;
	pick_range(x, MIN(fsx_region(x, f), f->size), &off, &len);
	l = fsx_log_op(x, OP_MAP_READ, f, off, len);
	p = map_range(x, f, OP_MAP_READ, off, len, &base, &map_len, l);
	memcpy(x->buf, p, len);
	if (munmap(base, map_len) < 0)
		fsx_fail(x, "munmap: %s", strerror(errno));
	fsx_log_done(l, (int64_t)len);
	fsx_check_data(x, f, off, x->buf, (size_t)len, "map_read");
}

/*
 * Store random (1 in 16: zero) bytes into a range inside the size through
 * a shared mapping, then msync(MS_SYNC) it: the bytes are the file's from
 * then on, for every way of reading it (pread, O_DIRECT, a new mapping).
 */
static void op_map_write(struct fsx *x, struct fsx_file *f)
{
	uint64_t off, len;
	struct fsx_log *l;
	size_t map_len;
	uint8_t *p;
	void *base;

	if (!f->size)
		return;
	pick_range(x, MIN(fsx_region(x, f), f->size), &off, &len);
	if (rnd_below(x, 16) == 0)
		memset(x->buf, 0, len);
	else
		fill_random(x, x->buf, len);
	l = fsx_log_op(x, OP_MAP_WRITE, f, off, len);
	l->zeros = !x->buf[0] && !memcmp(x->buf, x->buf + 1, len - 1);
	p = map_range(x, f, OP_MAP_WRITE, off, len, &base, &map_len, l);
	memcpy(p, x->buf, len);
	if (msync(base, map_len, MS_SYNC) < 0) {
		fsx_log_done(l, -errno);
		fsx_fail(x, "map_write %s 0x%" PRIx64 " len 0x%" PRIx64
			 ": msync: %s", f->name, off, len, strerror(errno));
	}
	if (munmap(base, map_len) < 0)
		fsx_fail(x, "munmap: %s", strerror(errno));
	fsx_log_done(l, (int64_t)len);
	memcpy(f->model + off, x->buf, len);
}

/* -X: flip one model byte of FILE; the next op reads it back. */
void fsx_inject(struct fsx *x)
{
	struct fsx_file *f = &x->files[0];
	uint64_t pos = pick_off(x, f->size);

	fsx_log_op(x, OP_INJECT, f, pos, 1);
	f->model[pos] ^= 0x5a;
	x->inject_pos = pos;
	x->inject_next = true;
}

/* A short read around the byte -X flipped: it must fail. */
static void inject_read(struct fsx *x)
{
	uint64_t pos = x->inject_pos, back = rnd_below(x, 64);

	back = MIN(pos, back);
	x->inject_next = false;
	do_read(x, &x->files[0], OP_READ, pos - back,
		back + 1 + rnd_below(x, 64));
}

/* A random op by the weights in x->weights. */
static enum fsx_op pick_op(struct fsx *x)
{
	unsigned int total = 0, i;
	uint64_t r;

	for (i = 0; i < NR_OPS; i++)
		total += x->weights[i];
	r = rnd_below(x, total);
	for (i = 0; i < NR_OPS; i++) {
		if (r < x->weights[i])
			break;
		r -= x->weights[i];
	}
	return (enum fsx_op)i;
}

void fsx_run_op(struct fsx *x)
{
	struct fsx_file *f = &x->files[0];
	enum fsx_op op;

	if (x->inject_next) {
		inject_read(x);
		return;
	}
	op = pick_op(x);
	/* 1 in 5 ops goes to FILE2, so that copies from it vary. */
	if (x->nr_files == 2 && rnd_below(x, 5) == 0)
		f = &x->files[1];
	switch (op) {
	case OP_READ:
		op_read(x, f);
		break;
	case OP_READ_EOF:
		op_read_eof(x, f);
		break;
	case OP_WRITE:
		op_write(x, f);
		break;
	case OP_WRITE_EOF:
		op_write_eof(x, f);
		break;
	case OP_PUNCH:
	case OP_ZERO:
		op_fallocate(x, f, op);
		break;
	case OP_ALLOC:
		op_alloc(x, f);
		break;
	case OP_FSYNC:
	case OP_FDATASYNC:
		op_sync(x, f, op);
		break;
	case OP_COPY:
		op_copy(x, f);
		break;
	case OP_COPY_EOF:
		op_copy_eof(x, f);
		break;
	case OP_SEEK:
		op_seek(x, f);
		break;
	case OP_DIO_READ:
	case OP_DIO_WRITE:
		op_dio(x, f, op);
		break;
	case OP_TRUNCATE:
		op_truncate(x, f);
		break;
	case OP_MAP_READ:
		op_map_read(x, f);
		break;
	case OP_MAP_WRITE:
		op_map_write(x, f);
		break;
	default:
		g_assert_not_reached();
	}
}

/* The whole file against the model, and a read at EOF. */
void fsx_verify_file(struct fsx *x, struct fsx_file *f)
{
	uint64_t pos = 0;

	check_size(x, f, "the run");
	do {
		uint64_t n = MIN((uint64_t)FSX_CHUNK, f->size - pos);
		struct fsx_log *l = fsx_log_op(x, OP_VERIFY, f, pos, n);
		ssize_t r = pread(f->fd, x->buf, n, (off_t)pos);

		fsx_log_done(l, r < 0 ? -errno : r);
		if (r < 0 || (uint64_t)r != n)
			fsx_fail(x, "verify %s 0x%" PRIx64 " len 0x%" PRIx64
				 ": %s", f->name, pos, n,
				 r < 0 ? strerror(errno) : "short read");
		fsx_check_data(x, f, pos, x->buf, n, "verify");
		pos += n;
	} while (pos < f->size);
	do_read(x, f, OP_READ_EOF, f->size, 4096);
}

