/* SPDX-License-Identifier: MIT */
/*
 * iov_iter over iovecs and bio_vecs (seeds 002-005).
 *
 * Every walk below is bounded by i->count, never by nr_segs: count is what
 * the caller promised, and after a shorten the iovec array may hold more.
 * Copies call memcpy once per segment.
 *
 * Normalisation: whenever count > 0, data points at a segment with bytes
 * left past iov_offset.  ii_*_advance() keeps that true by stepping over
 * exhausted segments and, for iovecs, zero-length ones, so the other ops can
 * trust the current segment.  When count reaches 0 the position may be past
 * the last segment (data one past the array, nr_segs 0) or inside one; no op
 * looks at it then.
 *
 * Departures from the seeds, on purpose:
 *  - iov_iter_init()'s count is the whole length and written bytes of it are
 *    already done, so the iterator starts with count - written left (the
 *    kernel passed the remainder and added written back).
 *  - The bvec advance also decrements nr_segs (the seed forgot to).
 */
#include "iter/iov_iter.h"

#include <string.h>

#include <glib.h>

/* ---- iovec: caller memory, zero-length segments allowed ---- */

/*
 * Copy bytes from the iovecs starting base bytes into *iov to vaddr.
 * Zero-length segments cost no memcpy (their iov_base may be NULL, so no
 * pointer is formed from it).
 */
static void iovec_copy(char *vaddr, const struct iovec *iov, size_t base,
		       size_t bytes)
{
	while (bytes) {
		size_t copy = MIN(bytes, iov->iov_len - base);

		if (copy) {
			char *buf = (char *)iov->iov_base + base;

			memcpy(vaddr, buf, copy);
			vaddr += copy;
			bytes -= copy;
		}
		base = 0;
		iov++;
	}
}

/* Copy bytes from the iovecs into page + offset. */
static size_t ii_iovec_copy_from_user(void *page, const struct iov_iter *i,
				      size_t offset, size_t bytes)
{
	g_assert(bytes <= i->count);
	iovec_copy((char *)page + offset, i->data, i->iov_offset, bytes);
	return bytes;
}

/*
 * Move forward by bytes, then step over exhausted and zero-length segments
 * while count > 0 (docs/lineage.md patch 003's loop, which also skips zero-length iovecs).
 */
static void ii_iovec_advance(struct iov_iter *i, size_t bytes)
{
	const struct iovec *iov = i->data;
	unsigned long nr_segs = i->nr_segs;
	size_t base = i->iov_offset;

	g_assert(bytes <= i->count);
	while (bytes || (i->count && base == iov->iov_len)) {
		size_t copy;

		g_assert(nr_segs > 0);
		copy = MIN(bytes, iov->iov_len - base);
		i->count -= copy;
		bytes -= copy;
		base += copy;
		if (base == iov->iov_len) {
			iov++;
			nr_segs--;
			base = 0;
		}
	}
	i->data = iov;
	i->nr_segs = nr_segs;
	i->iov_offset = base;
}

/* Describe up to max_bytes from the position, skipping empty segments. */
static int ii_iovec_get_iovecs(const struct iov_iter *i, struct iovec *vecs,
			       int max_vecs, size_t max_bytes, size_t *bytes)
{
	const struct iovec *iov = i->data;
	size_t base = i->iov_offset, left = MIN(max_bytes, i->count);
	int n = 0;

	*bytes = 0;
	for (; left && n < max_vecs; iov++, base = 0) {
		size_t len = MIN(left, iov->iov_len - base);

		if (!len)
			continue;
		vecs[n].iov_base = (char *)iov->iov_base + base;
		vecs[n].iov_len = len;
		n++;
		*bytes += len;
		left -= len;
	}
	return n;
}

const struct iov_iter_ops ii_iovec_ops = {
	.ii_copy_from_user = ii_iovec_copy_from_user,
	.ii_advance = ii_iovec_advance,
	.ii_get_iovecs = ii_iovec_get_iovecs,
};

/* ---- bio_vec: pool pages, never zero length ---- */

/* The address of byte off of bvec's memory. */
static inline char *bvec_addr(const struct bio_vec *bvec, size_t off)
{
	return (char *)bvec->bv_page + bvec->bv_offset + off;
}

/* Copy bytes from the bio_vecs to page + page_offset (docs/lineage.md patch 004's
 * bvec_copy_tofrom_page(), in the one direction used). */
static size_t bvec_copy_to_page(const struct iov_iter *i, void *page,
				size_t page_offset, size_t bytes)
{
	const struct bio_vec *bvec = i->data;
	size_t bvec_offset = i->iov_offset;
	char *vaddr = (char *)page + page_offset;
	size_t remaining = bytes;

	g_assert(bytes <= i->count);
	while (remaining) {
		size_t copy;

		g_assert(bvec_offset < bvec->bv_len);
		copy = MIN(remaining, bvec->bv_len - bvec_offset);
		memcpy(vaddr, bvec_addr(bvec, bvec_offset), copy);
		remaining -= copy;
		vaddr += copy;
		bvec_offset = 0;
		bvec++;
	}
	return bytes;
}

/* Copy bytes from the bio_vecs into page + offset. */
static size_t ii_bvec_copy_from_user(void *page, const struct iov_iter *i,
				     size_t offset, size_t bytes)
{
	return bvec_copy_to_page(i, page, offset, bytes);
}

/* Move forward by bytes; a bio_vec is never empty, so stepping past the
 * exhausted ones is all the normalisation needed. */
static void ii_bvec_advance(struct iov_iter *i, size_t bytes)
{
	const struct bio_vec *bvec = i->data;
	unsigned long nr_segs = i->nr_segs;
	size_t offset = i->iov_offset;

	g_assert(bytes <= i->count);
	while (bytes) {
		size_t delta;

		g_assert(nr_segs > 0 && offset < bvec->bv_len);
		delta = MIN(bytes, bvec->bv_len - offset);
		offset += delta;
		i->count -= delta;
		bytes -= delta;
		if (offset == bvec->bv_len) {
			bvec++;
			nr_segs--;
			offset = 0;
		}
	}
	i->data = bvec;
	i->nr_segs = nr_segs;
	i->iov_offset = offset;
}

/* Describe up to max_bytes from the position as page-address iovecs. */
static int ii_bvec_get_iovecs(const struct iov_iter *i, struct iovec *vecs,
			      int max_vecs, size_t max_bytes, size_t *bytes)
{
	const struct bio_vec *bvec = i->data;
	size_t offset = i->iov_offset, left = MIN(max_bytes, i->count);
	int n = 0;

	*bytes = 0;
	for (; left && n < max_vecs; bvec++, offset = 0) {
		size_t len = MIN(left, bvec->bv_len - offset);

		vecs[n].iov_base = bvec_addr(bvec, offset);
		vecs[n].iov_len = len;
		n++;
		*bytes += len;
		left -= len;
	}
	return n;
}

const struct iov_iter_ops ii_bvec_ops = {
	.ii_copy_from_user = ii_bvec_copy_from_user,
	.ii_advance = ii_bvec_advance,
	.ii_get_iovecs = ii_bvec_get_iovecs,
};

/* ---- common ---- */

void iov_iter_init(struct iov_iter *i, const struct iovec *iov,
		   unsigned long nr_segs, size_t count, size_t written)
{
	g_assert(written <= count);
	i->ops = &ii_iovec_ops;
	i->data = iov;
	i->nr_segs = nr_segs;
	i->iov_offset = 0;
	i->count = count;
	/* Even with written == 0: skips leading zero-length iovecs. */
	iov_iter_advance(i, written);
}

void iov_iter_init_bvec(struct iov_iter *i, const struct bio_vec *bvec,
			unsigned long nr_segs, size_t count, size_t written)
{
	g_assert(written <= count);
	i->ops = &ii_bvec_ops;
	i->data = bvec;
	i->nr_segs = nr_segs;
	i->iov_offset = 0;
	i->count = count;
	iov_iter_advance(i, written);
}

/* The current segment's memory, at most bytes of it (bytes <= count, > 0). */
static struct iovec iov_iter_cur_seg(const struct iov_iter *i, size_t bytes)
{
	struct iovec v;
	size_t len;
	int n = iov_iter_get_iovecs(i, &v, 1, bytes, &len);

	g_assert(n == 1 && len > 0);
	return v;
}

size_t iov_iter_copy_to_buf(void *buf, struct iov_iter *i, size_t bytes)
{
	char *p = buf;
	size_t done = 0;

	bytes = MIN(bytes, i->count);
	while (done < bytes) {
		struct iovec v = iov_iter_cur_seg(i, bytes - done);

		memcpy(p + done, v.iov_base, v.iov_len);
		iov_iter_advance(i, v.iov_len);
		done += v.iov_len;
	}
	return done;
}

size_t iov_iter_copy_from_buf(struct iov_iter *i, const void *buf,
			      size_t bytes)
{
	const char *p = buf;
	size_t done = 0;

	bytes = MIN(bytes, i->count);
	while (done < bytes) {
		struct iovec v = iov_iter_cur_seg(i, bytes - done);

		memcpy(v.iov_base, p + done, v.iov_len);
		iov_iter_advance(i, v.iov_len);
		done += v.iov_len;
	}
	return done;
}

size_t iov_iter_zero(struct iov_iter *i, size_t bytes)
{
	size_t done = 0;

	bytes = MIN(bytes, i->count);
	while (done < bytes) {
		struct iovec v = iov_iter_cur_seg(i, bytes - done);

		memset(v.iov_base, 0, v.iov_len);
		iov_iter_advance(i, v.iov_len);
		done += v.iov_len;
	}
	return done;
}

unsigned long bvec_fill_pages(struct bio_vec *bvec, void *const *pages,
			      void *buf, size_t len)
{
	unsigned long n = 0;

	while (len) {
		size_t l = len < DIOLOOP_PAGE_SIZE ? len : DIOLOOP_PAGE_SIZE;

		bvec[n] = (struct bio_vec){
			.bv_page = pages ? pages[n] :
					   (char *)buf + n * DIOLOOP_PAGE_SIZE,
			.bv_len = (unsigned int)l,
			.bv_offset = 0,
		};
		n++;
		len -= l;
	}
	return n;
}

size_t bvec_length(const struct bio_vec *bvec, unsigned long nr_segs)
{
	size_t len = 0;

	while (nr_segs--)
		len += (bvec++)->bv_len;
	return len;
}

int iovec_merge_adjacent(struct iovec *vecs, int n)
{
	int out = 0, k;

	for (k = 0; k < n; k++) {
		if (vecs[k].iov_len == 0)
			continue;
		if (out > 0 && (char *)vecs[out - 1].iov_base +
				       vecs[out - 1].iov_len ==
			       (char *)vecs[k].iov_base) {
			vecs[out - 1].iov_len += vecs[k].iov_len;
			continue;
		}
		vecs[out++] = vecs[k];
	}
	return out;
}
