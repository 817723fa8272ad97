/* SPDX-License-Identifier: MIT */
/*
 * iov_iter: one iterator over request memory, in two kinds behind an ops
 * table (seeds 002-005):
 *
 *  - iovec:   caller-supplied memory (struct iovec); zero-length segments are
 *             allowed and skipped.
 *  - bio_vec: pool pages ({bv_page, bv_len, bv_offset}); a bio_vec is never
 *             zero length and never crosses its page (bv_offset + bv_len <=
 *             DIOLOOP_PAGE_SIZE).  The pages are owned by whoever built the
 *             array and stay valid until that owner puts them back.
 *
 * Invariants (hold after every call):
 *  - count is the number of bytes left; ops never touch memory past it.
 *  - data points at the current segment, iov_offset is the position inside
 *    it (always < that segment's length unless count == 0), nr_segs counts
 *    the current segment and those after it.
 *
 * The copy ops do not advance the iterator; call iov_iter_advance() after.
 * Threads: an iov_iter is not locked; one thread uses it at a time.
 */
#ifndef DIOLOOP_IOV_ITER_H
#define DIOLOOP_IOV_ITER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#define DIOLOOP_PAGE_SHIFT 12
#define DIOLOOP_PAGE_SIZE ((size_t)1 << DIOLOOP_PAGE_SHIFT)

/* The structure that holds member at ptr (the kernel's container_of). */
#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* One piece of a page: the memory bv_page + bv_offset, bv_len bytes long. */
struct bio_vec {
	void *bv_page;		/* page address, DIOLOOP_PAGE_SIZE aligned */
	unsigned int bv_len;	/* > 0 */
	unsigned int bv_offset;	/* bv_offset + bv_len <= DIOLOOP_PAGE_SIZE */
};

struct iov_iter;

struct iov_iter_ops {
	/* Copy bytes from the iterator's memory into page + offset; returns the
	 * number copied (== bytes; bytes <= count is the caller's duty). */
	size_t (*ii_copy_from_user)(void *page, const struct iov_iter *i,
				    size_t offset, size_t bytes);
	/* Move the position forward by bytes (<= count). */
	void (*ii_advance)(struct iov_iter *i, size_t bytes);
	/* Describe up to max_bytes from the position as at most max_vecs
	 * iovecs (zero-length segments skipped, no advance).  Returns the
	 * number of iovecs filled; *bytes gets their total length. */
	int (*ii_get_iovecs)(const struct iov_iter *i, struct iovec *vecs,
			     int max_vecs, size_t max_bytes, size_t *bytes);
};

struct iov_iter {
	const struct iov_iter_ops *ops;
	const void *data;	/* current struct iovec * or struct bio_vec * */
	unsigned long nr_segs;	/* segments from data on */
	size_t iov_offset;	/* position inside *data */
	size_t count;		/* bytes left */
};

extern const struct iov_iter_ops ii_iovec_ops;
extern const struct iov_iter_ops ii_bvec_ops;

/* Start an iterator over nr_segs iovecs holding count bytes, the first
 * written of which are already done (skipped). */
void iov_iter_init(struct iov_iter *i, const struct iovec *iov,
		   unsigned long nr_segs, size_t count, size_t written);
/* Same over bio_vecs. */
void iov_iter_init_bvec(struct iov_iter *i, const struct bio_vec *bvec,
			unsigned long nr_segs, size_t count, size_t written);

static inline bool iov_iter_is_bvec(const struct iov_iter *i)
{
	return i->ops == &ii_bvec_ops;
}

/* The current bio_vec of a bvec iterator (the one iov_offset is inside). */
static inline const struct bio_vec *iov_iter_bvec(const struct iov_iter *i)
{
	return i->data;
}

static inline size_t iov_iter_count(const struct iov_iter *i)
{
	return i->count;
}

static inline size_t iov_iter_copy_from_user(void *page,
		const struct iov_iter *i, size_t offset, size_t bytes)
{
	return i->ops->ii_copy_from_user(page, i, offset, bytes);
}

static inline void iov_iter_advance(struct iov_iter *i, size_t bytes)
{
	i->ops->ii_advance(i, bytes);
}

static inline int iov_iter_get_iovecs(const struct iov_iter *i,
		struct iovec *vecs, int max_vecs, size_t max_bytes,
		size_t *bytes)
{
	return i->ops->ii_get_iovecs(i, vecs, max_vecs, max_bytes, bytes);
}

/* Copy bytes between the iterator and a flat buffer, advancing it; these
 * walk the iterator one segment at a time.  Return the bytes moved
 * (min(bytes, count)). */
size_t iov_iter_copy_to_buf(void *buf, struct iov_iter *i, size_t bytes);
size_t iov_iter_copy_from_buf(struct iov_iter *i, const void *buf,
			      size_t bytes);
/* Fill the next bytes of the iterator with zeros, advancing it. */
size_t iov_iter_zero(struct iov_iter *i, size_t bytes);

/* Describe len bytes of whole pages as bio_vecs, each page from offset 0
 * and the last one shorter: page i is pages[i], or buf + i pages when
 * pages is NULL (a page-aligned buffer).  Returns how many were filled
 * (bvec has room for that many: len rounded up to pages). */
unsigned long bvec_fill_pages(struct bio_vec *bvec, void *const *pages,
			      void *buf, size_t len);

/* Join neighbours of vecs[0..n) that are one run of memory (a page-
 * aligned buffer described page by page) and drop empty ones, in place:
 * the same bytes in the same order in fewer entries.  Returns the new
 * count.  A store that pays per segment (librbd builds a buffer list of
 * them) gets a 1 MiB buffer as one entry instead of 256. */
int iovec_merge_adjacent(struct iovec *vecs, int n);

/* Total length of an array of bio_vecs (bio.h's bvec_length()). */
size_t bvec_length(const struct bio_vec *bvec, unsigned long nr_segs);

#endif
