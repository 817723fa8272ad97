/* SPDX-License-Identifier: MIT */
/*
 * iov_iter: property tests against a flat reference.
 *
 * Each iteration builds a random segmentation (struct layout): iovecs or
 * bio_vecs laid over an arena of memory with gaps between segments, plus a
 * map from each logical byte of the iterator to its arena offset.  `expect`
 * mirrors what the arena must hold; after every op the whole arena is
 * compared with it, so a write outside the op's range (into a gap, past
 * count, into another segment) fails the test.  A model (pos, end) tracks
 * where the iterator must be; check_state() compares the iterator's fields
 * and the current segment's remainder with it after every op.
 *
 * Loop tests run once per kind: _i == KIND_IOVEC or KIND_BVEC.
 */
#include <check.h>
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iter/iov_iter.h"
#include "tests/testutil.h"

enum { KIND_IOVEC, KIND_BVEC, NR_KINDS };

static const char *const kind_name[] = { "iovec", "bvec" };

struct layout {
	int kind;
	unsigned long nr_segs;
	struct iovec *iov;		/* KIND_IOVEC */
	struct bio_vec *bvec;		/* KIND_BVEC */
	void *vec_copy;			/* the array as built: never written */
	size_t vec_size;
	char *arena;			/* the segments' memory */
	size_t arena_len;
	char *expect;			/* what arena must hold */
	size_t total;			/* bytes in all segments */
	size_t *addr;			/* logical byte -> arena offset */
	unsigned long *seg_of;		/* logical byte -> segment index */
	size_t *seg_start;		/* segment -> first logical byte */
	size_t *seg_len;
};

/* Where the iterator must be: count == end - pos; nr_segs counts from the
 * current segment to seg_limit (the layout's segments). */
struct model {
	size_t pos;
	size_t end;
	unsigned long seg_limit;
};

/* ---- building layouts ---- */

/* g_memdup2() is newer than the glib 2.66 the build asks for. */
static void *memdup(const void *p, size_t len)
{
	return memcpy(g_malloc(len ? len : 1), p, len);
}

static void layout_finish(struct layout *l, struct test_rng *r,
			  const size_t *seg_off)
{
	size_t p = 0;
	unsigned long s;

	l->addr = g_new(size_t, l->total + 1);
	l->seg_of = g_new(unsigned long, l->total + 1);
	for (s = 0; s < l->nr_segs; s++) {
		size_t j;

		l->seg_start[s] = p;
		for (j = 0; j < l->seg_len[s]; j++, p++) {
			l->addr[p] = seg_off[s] + j;
			l->seg_of[p] = s;
		}
	}
	test_rng_fill(r, l->arena, l->arena_len);
	l->expect = memdup(l->arena, l->arena_len);
	l->vec_copy = memdup(l->iov ? (void *)l->iov : (void *)l->bvec,
				l->vec_size);
}

/*
 * Random iovecs: one segment, a few large ones, many tiny ones, or only
 * zero-length ones; zero-length segments anywhere, some with a NULL base.
 */
static void layout_build_iovec(struct layout *l, struct test_rng *r)
{
	unsigned mode = (unsigned)test_rng_range(r, 0, 9);
	size_t *seg_off, cursor;
	unsigned long s;

	if (mode == 0)
		l->nr_segs = 1;
	else if (mode <= 4)
		l->nr_segs = test_rng_range(r, 1, 8);
	else if (mode <= 8)
		l->nr_segs = test_rng_range(r, 16, 64);
	else
		l->nr_segs = test_rng_range(r, 1, 8);
	l->iov = g_new0(struct iovec, l->nr_segs);
	l->vec_size = l->nr_segs * sizeof(*l->iov);
	l->seg_start = g_new(size_t, l->nr_segs);
	l->seg_len = g_new(size_t, l->nr_segs);
	seg_off = g_new(size_t, l->nr_segs);
	cursor = test_rng_range(r, 0, 8);
	for (s = 0; s < l->nr_segs; s++) {
		size_t len;

		if (mode == 9 || test_rng_range(r, 0, 9) < 3)
			len = 0;
		else if (mode == 0)
			len = test_rng_range(r, 1, 8192);
		else if (mode <= 4)
			len = test_rng_range(r, 1, 2000);
		else
			len = test_rng_range(r, 1, 64);
		l->seg_len[s] = len;
		seg_off[s] = cursor;
		cursor += len + test_rng_range(r, 0, 8);
		l->total += len;
	}
	l->arena_len = cursor + 8;
	l->arena = g_malloc(l->arena_len);
	for (s = 0; s < l->nr_segs; s++) {
		l->iov[s].iov_len = l->seg_len[s];
		if (l->seg_len[s] || test_rng_range(r, 0, 1))
			l->iov[s].iov_base = l->arena + seg_off[s];
	}
	layout_finish(l, r, seg_off);
	g_free(seg_off);
}

/*
 * Random bio_vecs, each in its own page of the arena, pages in shuffled
 * order: single, a few with random offsets, many 1-byte ones, full pages.
 */
static void layout_build_bvec(struct layout *l, struct test_rng *r)
{
	unsigned mode = (unsigned)test_rng_range(r, 0, 3);
	size_t *seg_off;
	unsigned long s, *perm;
	void *mem;

	if (mode == 0)
		l->nr_segs = 1;
	else if (mode == 2)
		l->nr_segs = test_rng_range(r, 16, 48);
	else
		l->nr_segs = test_rng_range(r, 1, 8);
	l->bvec = g_new0(struct bio_vec, l->nr_segs);
	l->vec_size = l->nr_segs * sizeof(*l->bvec);
	l->seg_start = g_new(size_t, l->nr_segs);
	l->seg_len = g_new(size_t, l->nr_segs);
	seg_off = g_new(size_t, l->nr_segs);
	l->arena_len = l->nr_segs * DIOLOOP_PAGE_SIZE;
	ck_assert_msg(posix_memalign(&mem, DIOLOOP_PAGE_SIZE,
				     l->arena_len) == 0,
		      "expected posix_memalign to give the test arena");
	l->arena = mem;
	perm = g_new(unsigned long, l->nr_segs);
	for (s = 0; s < l->nr_segs; s++)
		perm[s] = s;
	for (s = l->nr_segs; s > 1; s--) {
		unsigned long k = test_rng_range(r, 0, s - 1), t = perm[k];

		perm[k] = perm[s - 1];
		perm[s - 1] = t;
	}
	for (s = 0; s < l->nr_segs; s++) {
		struct bio_vec *bv = &l->bvec[s];

		bv->bv_page = l->arena + perm[s] * DIOLOOP_PAGE_SIZE;
		if (mode == 2) {
			bv->bv_offset = test_rng_range(r, 0, 4095);
			bv->bv_len = 1;
		} else if (mode == 3) {
			bv->bv_offset = 0;
			bv->bv_len = DIOLOOP_PAGE_SIZE;
		} else {
			bv->bv_offset = test_rng_range(r, 0, 4095);
			bv->bv_len = test_rng_range(r, 1,
					DIOLOOP_PAGE_SIZE - bv->bv_offset);
		}
		l->seg_len[s] = bv->bv_len;
		seg_off[s] = perm[s] * DIOLOOP_PAGE_SIZE + bv->bv_offset;
		l->total += bv->bv_len;
	}
	g_free(perm);
	layout_finish(l, r, seg_off);
	g_free(seg_off);
}

static void layout_build(struct layout *l, int kind, struct test_rng *r)
{
	memset(l, 0, sizeof(*l));
	l->kind = kind;
	if (kind == KIND_IOVEC)
		layout_build_iovec(l, r);
	else
		layout_build_bvec(l, r);
}

static void layout_free(struct layout *l)
{
	g_free(l->iov);
	g_free(l->bvec);
	g_free(l->vec_copy);
	if (l->kind == KIND_BVEC)
		free(l->arena);
	else
		g_free(l->arena);
	g_free(l->expect);
	g_free(l->addr);
	g_free(l->seg_of);
	g_free(l->seg_start);
	g_free(l->seg_len);
}

/* Start an iterator somewhere: written bytes in, maybe ending early. */
static void layout_iter_init(struct layout *l, struct iov_iter *it,
			     struct model *m, struct test_rng *r)
{
	size_t written = 0, end = l->total;

	if (test_rng_range(r, 0, 9) < 3)
		end = test_rng_range(r, 0, l->total);
	if (test_rng_range(r, 0, 1))
		written = test_rng_range(r, 0, end);
	if (l->kind == KIND_IOVEC)
		iov_iter_init(it, l->iov, l->nr_segs, end, written);
	else
		iov_iter_init_bvec(it, l->bvec, l->nr_segs, end, written);
	m->pos = written;
	m->end = end;
	m->seg_limit = l->nr_segs;
}

/* ---- checks ---- */

/* The logical bytes [pos, pos + n) as the arena must hold them. */
static void ref_slice(const struct layout *l, size_t pos, size_t n, char *out)
{
	size_t k;

	for (k = 0; k < n; k++)
		out[k] = l->expect[l->addr[pos + k]];
}

static void check_arena(const struct layout *l, const char *op)
{
	ck_assert_msg(memcmp(l->arena, l->expect, l->arena_len) == 0,
		      "%s %s: expected the arena to change only inside the "
		      "op's range", kind_name[l->kind], op);
	ck_assert_msg(memcmp(l->iov ? (void *)l->iov : (void *)l->bvec,
			     l->vec_copy, l->vec_size) == 0,
		      "%s %s: expected the segment array never written",
		      kind_name[l->kind], op);
}

/* Bytes left in the current segment, as get_iovecs describes it. */
static size_t cur_seg_left(const struct iov_iter *it)
{
	struct iovec v;
	size_t bytes = 0;

	iov_iter_get_iovecs(it, &v, 1, SIZE_MAX, &bytes);
	return bytes;
}

/* The iterator's fields against the model. */
static void check_state(const struct layout *l, const struct iov_iter *it,
			const struct model *m, const char *op)
{
	size_t count = m->end - m->pos;
	unsigned long seg;
	size_t seg_left;

	ck_assert_msg(it->ops == (l->kind == KIND_IOVEC ? &ii_iovec_ops :
							  &ii_bvec_ops),
		      "after %s: expected the %s ops table", op,
		      kind_name[l->kind]);
	ck_assert_msg(iov_iter_is_bvec(it) == (l->kind == KIND_BVEC),
		      "after %s: expected iov_iter_is_bvec() to match", op);
	ck_assert_msg(iov_iter_count(it) == count,
		      "%s after %s: expected count %zu, got %zu",
		      kind_name[l->kind], op, count, iov_iter_count(it));
	if (!count) {
		ck_assert_msg(cur_seg_left(it) == 0,
			      "after %s: expected no segment left at count 0",
			      op);
		return;
	}
	seg = l->seg_of[m->pos];
	seg_left = MIN(l->seg_start[seg] + l->seg_len[seg] - m->pos, count);
	if (l->kind == KIND_IOVEC)
		ck_assert_msg(it->data == &l->iov[seg],
			      "iovec after %s: expected data at segment %lu "
			      "(the non-empty one holding byte %zu), got %ld",
			      op, seg, m->pos,
			      (long)((const struct iovec *)it->data - l->iov));
	else
		ck_assert_msg(it->data == &l->bvec[seg] &&
			      iov_iter_bvec(it) == &l->bvec[seg],
			      "bvec after %s: expected data at segment %lu, "
			      "got %ld", op, seg,
			      (long)(iov_iter_bvec(it) - l->bvec));
	ck_assert_msg(it->iov_offset == m->pos - l->seg_start[seg],
		      "%s after %s: expected iov_offset %zu, got %zu",
		      kind_name[l->kind], op, m->pos - l->seg_start[seg],
		      it->iov_offset);
	ck_assert_msg(it->iov_offset < l->seg_len[seg],
		      "after %s: expected iov_offset inside the current "
		      "segment while count > 0", op);
	ck_assert_msg(it->nr_segs == m->seg_limit - seg,
		      "%s after %s: expected nr_segs %lu, got %lu",
		      kind_name[l->kind], op, m->seg_limit - seg,
		      it->nr_segs);
	ck_assert_msg(cur_seg_left(it) == seg_left,
		      "%s after %s: expected %zu bytes left in the current "
		      "segment (the reference segment's remainder), got %zu",
		      kind_name[l->kind], op, seg_left, cur_seg_left(it));
}

static void check_unchanged(const struct iov_iter *before,
			    const struct iov_iter *after, const char *op)
{
	ck_assert_msg(memcmp(before, after, sizeof(*before)) == 0,
		      "expected %s not to change the iterator", op);
}

/* A length in [0, max], favouring 0, 1 and max. */
static size_t pick_len(struct test_rng *r, size_t max)
{
	switch (test_rng_range(r, 0, 7)) {
	case 0:
		return 0;
	case 1:
		return max;
	case 2:
		return MIN((size_t)1, max);
	default:
		return test_rng_range(r, 0, max);
	}
}

/* ---- ops, each checked against the reference ---- */

static void op_copy_from_user(struct layout *l, struct iov_iter *it,
			      struct model *m, struct test_rng *r)
{
	size_t count = m->end - m->pos, n = pick_len(r, count);
	size_t off = test_rng_range(r, 0, 64), len = off + n + 64;
	char *dst = g_malloc(len), *orig = g_malloc(len);
	char *ref = g_malloc(n + 1);
	struct iov_iter before = *it;
	size_t ret;

	test_rng_fill(r, dst, len);
	memcpy(orig, dst, len);
	ret = iov_iter_copy_from_user(dst, it, off, n);
	ck_assert_msg(ret == n, "copy_from_user: expected %zu copied, got %zu",
		      n, ret);
	ref_slice(l, m->pos, n, ref);
	ck_assert_msg(memcmp(dst + off, ref, n) == 0,
		      "%s copy_from_user of %zu at %zu: expected the "
		      "reference slice", kind_name[l->kind], n, m->pos);
	ck_assert_msg(memcmp(dst, orig, off) == 0 &&
		      memcmp(dst + off + n, orig + off + n, 64) == 0,
		      "copy_from_user: expected the page outside [offset, "
		      "offset + bytes) untouched");
	check_unchanged(&before, it, "copy_from_user");
	check_arena(l, "copy_from_user");
	g_free(dst);
	g_free(orig);
	g_free(ref);
}

static void op_advance(struct layout *l, struct iov_iter *it,
		       struct model *m, struct test_rng *r)
{
	size_t n = pick_len(r, m->end - m->pos);

	iov_iter_advance(it, n);
	m->pos += n;
	check_state(l, it, m, "advance");
	check_arena(l, "advance");
}

/* iovec_merge_adjacent over what get_iovecs gave (n entries from logical
 * byte pos): the same bytes in order, no empty entry, and no two
 * neighbours left that are one run of memory. */
static void check_merged(const struct layout *l, const struct iovec *vecs,
			 int n, size_t pos)
{
	struct iovec *m = g_memdup2(vecs, sizeof(*vecs) * (size_t)MAX(n, 1));
	int k, merged = iovec_merge_adjacent(m, n);
	size_t p = pos;

	ck_assert_msg(merged >= 0 && merged <= n,
		      "merge: expected 0..%d entries, got %d", n, merged);
	ck_assert_msg((n == 0) == (merged == 0),
		      "merge: expected entries iff there were any");
	for (k = 0; k < merged; k++) {
		size_t j;

		ck_assert_msg(m[k].iov_len > 0, "merge: empty entry %d", k);
		for (j = 0; j < m[k].iov_len; j++)
			if ((char *)m[k].iov_base + j !=
			    l->arena + l->addr[p + j])
				break;
		ck_assert_msg(j == m[k].iov_len,
			      "%s merge: entry %d byte %zu does not address "
			      "logical byte %zu", kind_name[l->kind], k, j,
			      p + j);
		if (k > 0)
			ck_assert_msg((char *)m[k - 1].iov_base +
					      m[k - 1].iov_len !=
				      (char *)m[k].iov_base,
				      "%s merge: entries %d and %d left apart "
				      "though one run of memory",
				      kind_name[l->kind], k - 1, k);
		p += m[k].iov_len;
	}
	g_free(m);
}

static void op_get_iovecs(struct layout *l, struct iov_iter *it,
			  struct model *m, struct test_rng *r)
{
	size_t count = m->end - m->pos, max_bytes, bytes = 12345, sum = 0;
	int max_vecs = (int)test_rng_range(r, 1, l->nr_segs + 2), n, k;
	struct iovec *vecs = g_new(struct iovec, max_vecs + 1);
	struct iov_iter before = *it;
	size_t p = m->pos;

	switch (test_rng_range(r, 0, 3)) {
	case 0:
		max_bytes = SIZE_MAX;
		break;
	case 1:
		max_bytes = count + test_rng_range(r, 0, 100);
		break;
	default:
		max_bytes = pick_len(r, count);
		break;
	}
	vecs[max_vecs].iov_base = vecs;	/* sentinel */
	vecs[max_vecs].iov_len = 777;
	n = iov_iter_get_iovecs(it, vecs, max_vecs, max_bytes, &bytes);
	ck_assert_msg(n >= 0 && n <= max_vecs,
		      "get_iovecs: expected 0..%d vecs, got %d", max_vecs, n);
	ck_assert_msg(vecs[max_vecs].iov_base == vecs &&
		      vecs[max_vecs].iov_len == 777,
		      "get_iovecs: expected nothing written past max_vecs");
	for (k = 0; k < n; k++) {
		size_t j;

		ck_assert_msg(vecs[k].iov_len > 0,
			      "get_iovecs: expected no zero-length entry "
			      "(entry %d)", k);
		ck_assert_msg(p + vecs[k].iov_len <= m->end,
			      "get_iovecs: expected entries within count");
		for (j = 0; j < vecs[k].iov_len; j++)
			if ((char *)vecs[k].iov_base + j !=
			    l->arena + l->addr[p + j])
				break;
		ck_assert_msg(j == vecs[k].iov_len,
			      "%s get_iovecs: expected entry %d byte %zu to "
			      "address logical byte %zu", kind_name[l->kind],
			      k, j, p + j);
		p += vecs[k].iov_len;
		sum += vecs[k].iov_len;
	}
	ck_assert_msg(bytes == sum, "get_iovecs: expected *bytes %zu (sum of "
		      "entries), got %zu", sum, bytes);
	ck_assert_msg(sum <= MIN(max_bytes, count),
		      "get_iovecs: expected at most min(max_bytes, count)");
	ck_assert_msg(sum == MIN(max_bytes, count) || n == max_vecs,
		      "%s get_iovecs: expected min(max_bytes, count) = %zu "
		      "bytes unless max_vecs ran out, got %zu in %d vecs",
		      kind_name[l->kind], MIN(max_bytes, count), sum, n);
	check_unchanged(&before, it, "get_iovecs");
	check_merged(l, vecs, n, m->pos);
	g_free(vecs);
}

static void op_copy_to_buf(struct layout *l, struct iov_iter *it,
			   struct model *m, struct test_rng *r)
{
	size_t count = m->end - m->pos, n = pick_len(r, count + 10);
	size_t want = MIN(n, count), ret;
	char *buf = g_malloc(n + 16), *ref = g_malloc(want + 1);

	memset(buf, 0xa5, n + 16);
	ret = iov_iter_copy_to_buf(buf, it, n);
	ck_assert_msg(ret == want, "copy_to_buf: expected min(bytes, count) "
		      "= %zu, got %zu", want, ret);
	ref_slice(l, m->pos, want, ref);
	ck_assert_msg(memcmp(buf, ref, want) == 0,
		      "%s copy_to_buf of %zu at %zu: expected the reference "
		      "slice", kind_name[l->kind], want, m->pos);
	ck_assert_msg(buf[want] == (char)0xa5,
		      "copy_to_buf: expected nothing written past the copy");
	m->pos += want;
	check_state(l, it, m, "copy_to_buf");
	check_arena(l, "copy_to_buf");
	g_free(buf);
	g_free(ref);
}

/* copy_from_buf, or iov_iter_zero when zero. */
static void op_fill(struct layout *l, struct iov_iter *it, struct model *m,
		    struct test_rng *r, bool zero)
{
	size_t count = m->end - m->pos, n = pick_len(r, count + 10);
	size_t want = MIN(n, count), ret, k;
	char *buf = g_malloc0(n + 1);

	if (!zero)
		test_rng_fill(r, buf, n + 1);
	ret = zero ? iov_iter_zero(it, n) : iov_iter_copy_from_buf(it, buf, n);
	ck_assert_msg(ret == want, "%s: expected min(bytes, count) = %zu, "
		      "got %zu", zero ? "zero" : "copy_from_buf", want, ret);
	for (k = 0; k < want; k++)
		l->expect[l->addr[m->pos + k]] = buf[k];
	m->pos += want;
	check_arena(l, zero ? "zero" : "copy_from_buf");
	check_state(l, it, m, zero ? "zero" : "copy_from_buf");
	g_free(buf);
}

static void op_copy_from_buf(struct layout *l, struct iov_iter *it,
			     struct model *m, struct test_rng *r)
{
	op_fill(l, it, m, r, false);
}

static void op_zero(struct layout *l, struct iov_iter *it, struct model *m,
		    struct test_rng *r)
{
	op_fill(l, it, m, r, true);
}

typedef void (*iter_op_t)(struct layout *, struct iov_iter *, struct model *,
			  struct test_rng *);

/*
 * The property driver: test_iterations(3000) random layouts, each started
 * at a random point and put through up to 16 ops drawn from ops[]
 * (interleaved with advances so every op runs at random positions).
 */
static void run_random(int kind, const iter_op_t *ops, size_t nr_ops,
		       uint64_t salt)
{
	unsigned iters = test_iterations(3000), n;
	struct test_rng r;

	test_rng_init(&r, salt * NR_KINDS + kind);
	for (n = 0; n < iters; n++) {
		unsigned steps = (unsigned)test_rng_range(&r, 1, 16), k;
		struct iov_iter it;
		struct layout l;
		struct model m;

		layout_build(&l, kind, &r);
		layout_iter_init(&l, &it, &m, &r);
		check_state(&l, &it, &m, "init");
		for (k = 0; k < steps; k++) {
			if (test_rng_range(&r, 0, 2) == 0)
				op_advance(&l, &it, &m, &r);
			ops[test_rng_range(&r, 0, nr_ops - 1)](&l, &it, &m,
							       &r);
		}
		layout_free(&l);
	}
}

#define RUN_RANDOM(kind, salt, ...)					\
	do {								\
		static const iter_op_t ops_[] = { __VA_ARGS__ };	\
		run_random(kind, ops_, G_N_ELEMENTS(ops_), salt);	\
	} while (0)

/* ---- property tests ---- */

START_TEST(test_iter_copy_from_user)
{
	RUN_RANDOM(_i, 1, op_copy_from_user);
}
END_TEST

START_TEST(test_iter_advance)
{
	RUN_RANDOM(_i, 3, op_advance);
}
END_TEST

START_TEST(test_iter_get_iovecs)
{
	RUN_RANDOM(_i, 4, op_get_iovecs);
}
END_TEST

START_TEST(test_iter_copy_to_buf)
{
	RUN_RANDOM(_i, 7, op_copy_to_buf);
}
END_TEST

START_TEST(test_iter_copy_from_buf)
{
	RUN_RANDOM(_i, 8, op_copy_from_buf);
}
END_TEST

START_TEST(test_iter_zero)
{
	RUN_RANDOM(_i, 9, op_zero);
}
END_TEST

START_TEST(test_iter_all_ops_interleaved)
{
	RUN_RANDOM(_i, 10, op_copy_from_user, op_advance, op_get_iovecs,
		   op_copy_to_buf, op_copy_from_buf, op_zero);
}
END_TEST

/* ---- edge cases ---- */

/* Every op on an iterator with count 0 is a no-op returning 0. */
static void check_empty(struct iov_iter *it, const char *what)
{
	struct iov_iter before = *it;
	struct iovec v[2];
	size_t bytes = 99;
	char buf[8] = { 0 };

	ck_assert_msg(iov_iter_count(it) == 0, "%s: expected count 0", what);
	ck_assert_msg(cur_seg_left(it) == 0,
		      "%s: expected no segment left", what);
	ck_assert_msg(iov_iter_get_iovecs(it, v, 2, SIZE_MAX, &bytes) == 0 &&
		      bytes == 0,
		      "%s: expected get_iovecs to fill nothing", what);
	ck_assert_msg(iov_iter_copy_from_user(buf, it, 0, 0) == 0,
		      "%s: expected a zero-byte copy to copy 0", what);
	iov_iter_advance(it, 0);
	ck_assert_msg(iov_iter_copy_to_buf(buf, it, sizeof(buf)) == 0 &&
		      iov_iter_copy_from_buf(it, buf, sizeof(buf)) == 0 &&
		      iov_iter_zero(it, sizeof(buf)) == 0,
		      "%s: expected flat helpers to move 0 bytes", what);
	check_unchanged(&before, it, what);
}

START_TEST(test_iter_count_zero)
{
	char mem[16];
	struct iovec iov[2] = { { mem, 8 }, { mem + 8, 8 } };
	struct bio_vec bv = { NULL, 16, 0 };
	struct iov_iter it;
	void *page;

	iov_iter_init(&it, NULL, 0, 0, 0);
	check_empty(&it, "iovec with no segments");
	iov_iter_init(&it, iov, 2, 0, 0);
	check_empty(&it, "iovec with count 0 over 16 bytes");
	ck_assert_msg(posix_memalign(&page, DIOLOOP_PAGE_SIZE,
				     DIOLOOP_PAGE_SIZE) == 0,
		      "expected an aligned page");
	bv.bv_page = page;
	iov_iter_init_bvec(&it, &bv, 1, 0, 0);
	check_empty(&it, "bvec with count 0");
	iov_iter_init_bvec(&it, NULL, 0, 0, 0);
	check_empty(&it, "bvec with no segments");
	free(page);
}
END_TEST

START_TEST(test_iter_all_zero_length_iovecs)
{
	char mem[4];
	struct iovec iov[5] = {
		{ NULL, 0 }, { mem, 0 }, { NULL, 0 }, { mem + 1, 0 },
		{ NULL, 0 },
	};
	struct iov_iter it;

	iov_iter_init(&it, iov, 5, 0, 0);
	check_empty(&it, "five zero-length iovecs");
}
END_TEST

/* Leading, middle and trailing zero-length iovecs around two bytes. */
START_TEST(test_iter_zero_length_iovecs_skipped)
{
	char a = 'a', b = 'b', out[2] = { 0 };
	struct iovec iov[6] = {
		{ NULL, 0 }, { &a, 0 }, { &a, 1 }, { NULL, 0 }, { &b, 1 },
		{ NULL, 0 },
	};
	struct iov_iter it;
	struct iovec v[4];
	size_t bytes;

	iov_iter_init(&it, iov, 6, 2, 0);
	ck_assert_msg(it.data == &iov[2] && it.nr_segs == 4 &&
		      it.iov_offset == 0,
		      "expected init to skip the leading zero-length iovecs");
	ck_assert_msg(cur_seg_left(&it) == 1,
		      "expected 1 byte left in the current segment (the "
		      "first non-empty one)");
	ck_assert_msg(iov_iter_get_iovecs(&it, v, 4, SIZE_MAX, &bytes) == 2 &&
		      bytes == 2 && v[0].iov_base == &a &&
		      v[1].iov_base == &b,
		      "expected get_iovecs to give {a, 1}, {b, 1}");
	iov_iter_advance(&it, 1);
	ck_assert_msg(it.data == &iov[4] && it.nr_segs == 2,
		      "expected advance past 'a' to land on 'b', skipping "
		      "the zero-length iovec between");
	iov_iter_advance(&it, 0);
	ck_assert_msg(it.data == &iov[4],
		      "expected advance by 0 to stay put");
	ck_assert_msg(iov_iter_copy_to_buf(out, &it, 2) == 1 && out[0] == 'b',
		      "expected copy_to_buf to return the 1 byte left");
	ck_assert_msg(iov_iter_count(&it) == 0 && it.nr_segs == 1 &&
		      it.data == &iov[5],
		      "expected the end after the last non-empty segment "
		      "(only the trailing zero-length one left)");
	check_empty(&it, "iterator at its end");
}
END_TEST

/* Advance by 0 anywhere leaves the iterator byte-identical. */
START_TEST(test_iter_advance_zero)
{
	struct test_rng r;
	unsigned n, iters = test_iterations(1000);

	test_rng_init(&r, 100 + _i);
	for (n = 0; n < iters; n++) {
		struct iov_iter it, before;
		struct layout l;
		struct model m;

		layout_build(&l, _i, &r);
		layout_iter_init(&l, &it, &m, &r);
		iov_iter_advance(&it, test_rng_range(&r, 0, m.end - m.pos));
		before = it;
		iov_iter_advance(&it, 0);
		check_unchanged(&before, &it, "advance by 0");
		layout_free(&l);
	}
}
END_TEST

/* Advance to exactly the end, in one step or from a random point. */
START_TEST(test_iter_advance_to_end)
{
	struct test_rng r;
	unsigned n, iters = test_iterations(1000);

	test_rng_init(&r, 200 + _i);
	for (n = 0; n < iters; n++) {
		struct iov_iter it;
		struct layout l;
		struct model m;
		size_t step;

		layout_build(&l, _i, &r);
		layout_iter_init(&l, &it, &m, &r);
		step = test_rng_range(&r, 0, m.end - m.pos);
		iov_iter_advance(&it, step);
		iov_iter_advance(&it, m.end - m.pos - step);
		check_empty(&it, "iterator advanced to its end");
		if (m.end == l.total && m.end > m.pos) {
			unsigned long trailing = 0, s;

			for (s = l.nr_segs; s > 0 && !l.seg_len[s - 1]; s--)
				trailing++;
			ck_assert_msg(it.nr_segs == trailing &&
				      it.iov_offset == 0,
				      "%s at the array's end: expected nr_segs "
				      "%lu (trailing empty segments), got %lu",
				      kind_name[_i], trailing, it.nr_segs);
		}
		layout_free(&l);
	}
}
END_TEST

/* init's written: count is the whole, written of it skipped. */
START_TEST(test_iter_init_written)
{
	struct test_rng r;
	unsigned n, iters = test_iterations(1000);

	test_rng_init(&r, 300 + _i);
	for (n = 0; n < iters; n++) {
		struct iov_iter it;
		struct layout l;
		struct model m;

		layout_build(&l, _i, &r);
		m.end = l.total;
		m.pos = test_rng_range(&r, 0, l.total);
		m.seg_limit = l.nr_segs;
		if (_i == KIND_IOVEC)
			iov_iter_init(&it, l.iov, l.nr_segs, l.total, m.pos);
		else
			iov_iter_init_bvec(&it, l.bvec, l.nr_segs, l.total,
					   m.pos);
		check_state(&l, &it, &m, "init with written");
		op_copy_to_buf(&l, &it, &m, &r);
		layout_free(&l);
	}
}
END_TEST

/* bvec_fill_pages: whole pages, the last one shorter, from a buffer or
 * from a page array. */
START_TEST(test_iter_bvec_fill_pages)
{
	struct bio_vec bvec[3];
	void *pages[3] = { (void *)0x10000, (void *)0x30000, (void *)0x20000 };
	char *buf = (char *)0x40000;
	size_t len = 2 * DIOLOOP_PAGE_SIZE + 100;

	ck_assert_uint_eq(bvec_fill_pages(bvec, NULL, buf, len), 3);
	ck_assert_ptr_eq(bvec[1].bv_page, buf + DIOLOOP_PAGE_SIZE);
	ck_assert_uint_eq(bvec[1].bv_len, DIOLOOP_PAGE_SIZE);
	ck_assert_uint_eq(bvec[2].bv_len, 100);
	ck_assert_uint_eq(bvec[2].bv_offset, 0);
	ck_assert_uint_eq(bvec_length(bvec, 3), len);
	ck_assert_uint_eq(bvec_fill_pages(bvec, pages, NULL,
					  DIOLOOP_PAGE_SIZE + 1), 2);
	ck_assert_ptr_eq(bvec[0].bv_page, pages[0]);
	ck_assert_ptr_eq(bvec[1].bv_page, pages[1]);
	ck_assert_uint_eq(bvec[1].bv_len, 1);
	ck_assert_uint_eq(bvec_fill_pages(bvec, NULL, buf, 0), 0);
}
END_TEST

static Suite *iter_suite(void)
{
	Suite *s = suite_create("iter");
	TCase *tc;

	tc = tcase_create("copy");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_iter_copy_from_user, 0, NR_KINDS);
	suite_add_tcase(s, tc);

	tc = tcase_create("advance");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_iter_advance, 0, NR_KINDS);
	tcase_add_loop_test(tc, test_iter_advance_zero, 0, NR_KINDS);
	tcase_add_loop_test(tc, test_iter_advance_to_end, 0, NR_KINDS);
	tcase_add_loop_test(tc, test_iter_init_written, 0, NR_KINDS);
	suite_add_tcase(s, tc);

	tc = tcase_create("get_iovecs");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_iter_get_iovecs, 0, NR_KINDS);
	suite_add_tcase(s, tc);

	tc = tcase_create("fill_pages");
	tcase_add_test(tc, test_iter_bvec_fill_pages);
	suite_add_tcase(s, tc);

	tc = tcase_create("flat");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_iter_copy_to_buf, 0, NR_KINDS);
	tcase_add_loop_test(tc, test_iter_copy_from_buf, 0, NR_KINDS);
	tcase_add_loop_test(tc, test_iter_zero, 0, NR_KINDS);
	suite_add_tcase(s, tc);

	tc = tcase_create("mixed");
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_iter_all_ops_interleaved, 0, NR_KINDS);
	suite_add_tcase(s, tc);

	tc = tcase_create("edges");
	tcase_add_test(tc, test_iter_count_zero);
	tcase_add_test(tc, test_iter_all_zero_length_iovecs);
	tcase_add_test(tc, test_iter_zero_length_iovecs_skipped);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(iter_suite());
}
