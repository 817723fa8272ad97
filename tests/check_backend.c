/* SPDX-License-Identifier: MIT */
/*
 * The core's backend layer: registry, ops validation, the defaults of
 * optional ops, backend_pread/pwrite at any offset and length, read-only
 * and EOF rules; and the "mem" test double those are checked on (mapping,
 * holes, coalescing limits, asynchronous completion).
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/testing/mem.h"
#include "tests/testutil.h"

static struct backend *open_mem(const char *opts, unsigned int flags)
{
	struct backend_open_args args = { .path = opts, .flags = flags };
	struct backend *b = NULL;
	int ret = backend_open("mem", &args, &b);

	ck_assert_msg(ret == 0 && b, "open mem \"%s\": expected 0, got %d",
		      opts, ret);
	return b;
}

START_TEST(test_backend_registry_lookup)
{
	const char *const *names = backend_names();
	bool mem = false, fault = false;
	const struct backend_ops *ops;
	size_t i;

	ops = backend_lookup("mem");
	ck_assert_msg(ops && !strcmp(ops->name, "mem"), "\"mem\" is registered");
	ops = backend_lookup("raw");
	ck_assert_msg(ops && !strcmp(ops->name, "raw"), "\"raw\" is registered");
	ops = backend_lookup("fault");
	ck_assert_msg(ops && !strcmp(ops->name, "fault"),
		      "\"fault\" is registered");
	ck_assert_msg(backend_lookup("no-such-backend") == NULL,
		      "an unknown name gives NULL");
	ck_assert_msg(backend_lookup("") == NULL, "the empty name gives NULL");
	ck_assert_msg(backend_lookup(NULL) == NULL, "NULL gives NULL");
	for (i = 0; names[i]; i++) {
		mem |= !strcmp(names[i], "mem");
		fault |= !strcmp(names[i], "fault");
		ck_assert_msg(backend_lookup(names[i]) != NULL,
			      "every listed name (%s) can be looked up",
			      names[i]);
	}
	ck_assert_msg(mem && fault, "backend_names lists mem and fault");
}
END_TEST

/* A filter that implements nothing: every op, including those the core
 * requires of a backend, must reach the backend below. */
static const struct backend_ops empty_filter_ops = {
	.name = "empty-filter",
	.is_filter = true,
};

/* Counts the ops it implements, to show the core calls them and not
 * inner's when the filter has them. */
static atomic_int counting_flushes;

/* flush of the counting filter: count, then pass down. */
static int counting_flush(struct backend *b)
{
	atomic_fetch_add(&counting_flushes, 1);
	return backend_flush(b->inner);
}

static const struct backend_ops counting_filter_ops = {
	.name = "counting-filter",
	.is_filter = true,
	.flush = counting_flush,
};

static struct backend *open_filter(const struct backend_ops *ops,
				   struct backend *inner)
{
	struct backend_open_args args = { .path = "filter", .inner = inner,
					  .flags = inner->flags };
	struct backend *f = NULL;
	int ret = backend_open_ops(ops, &args, &f);

	ck_assert_msg(ret == 0 && f, "open %s: expected 0, got %d", ops->name,
		      ret);
	ck_assert_msg(f->inner == inner, "the core sets the filter's inner");
	return f;
}

START_TEST(test_backend_filter_forwards_null_ops)
{
	struct backend *mem = open_mem("size=1M", BACKEND_OPEN_GROWABLE);
	struct backend *f = open_filter(&empty_filter_ops, mem);
	struct backend *g = open_filter(&counting_filter_ops, f);
	char buf[8192], back[8192];
	struct backend_extent ext;
	struct backend_info info;

	memset(buf, 0xa5, sizeof(buf));
	ck_assert_int_eq(backend_get_size(g), 1 << 20);
	ck_assert_msg(g->limits.request_alignment ==
		      mem->limits.request_alignment,
		      "a filter starts with inner's limits");
	ck_assert_int_eq(backend_pwrite(g, buf, sizeof(buf), 4096),
			 (ssize_t)sizeof(buf));
	ck_assert_int_eq(mem_backend_peek(mem, 4096, back, sizeof(back)), 0);
	ck_assert_msg(!memcmp(buf, back, sizeof(buf)),
		      "a write through two filters lands in mem");
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(backend_pread(g, back, sizeof(back), 4096),
			 (ssize_t)sizeof(back));
	ck_assert_msg(!memcmp(buf, back, sizeof(buf)), "reads come back");
	ck_assert_int_eq(backend_info(g, &info), 0);
	ck_assert_str_eq(info.format, "mem");
	ck_assert_int_eq(backend_map(g, 0, 1 << 20, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 4096,
		      "map comes from mem: a 4096-byte hole, got %s %llu",
		      ext.hole ? "hole" : "data",
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_discard(g, 4096, 4096), 0);
	ck_assert_msg(!mem_backend_block_written(mem, 4096),
		      "discard reaches mem");
	ck_assert_int_eq(backend_write_zeroes(g, 8192, 4096), 0);
	ck_assert_msg(!mem_backend_block_written(mem, 8192),
		      "write_zeroes reaches mem");
	ck_assert_int_eq(backend_resize(g, 2 << 20), 0);
	ck_assert_int_eq(backend_get_size(mem), 2 << 20);
	atomic_store(&counting_flushes, 0);
	ck_assert_int_eq(backend_flush(g), 0);
	ck_assert_int_eq(atomic_load(&counting_flushes), 1);
	ck_assert_msg(backend_below_filters(g) == mem,
		      "below both filters is mem");
	ck_assert_msg(backend_find_filter(g, &empty_filter_ops) == f,
		      "the empty filter is found in the stack");
	/* Closing the top closes the whole stack (ASan: no leak). */
	backend_close(g);
}
END_TEST

START_TEST(test_backend_filter_needs_inner)
{
	struct backend_open_args args = { .path = "filter" };
	struct backend *f = (struct backend *)&args;

	ck_assert_int_eq(backend_open_ops(&empty_filter_ops, &args, &f),
			 -EINVAL);
	ck_assert_msg(f == NULL, "a failed open leaves NULL");
}
END_TEST

START_TEST(test_backend_filter_swap_inner)
{
	struct backend *a = open_mem("size=1M", 0);
	struct backend *b = open_mem("size=2M,align=4096", 0);
	struct backend *f = open_filter(&empty_filter_ops, a);

	ck_assert_msg(backend_filter_swap_inner(f, b) == a,
		      "the swap returns the old inner");
	ck_assert_int_eq(backend_get_size(f), 2 << 20);
	ck_assert_int_eq(f->limits.request_alignment, 4096);
	backend_close(a);
	backend_close(f);
}
END_TEST

START_TEST(test_backend_open_unknown_is_enoent)
{
	struct backend_open_args args = { .path = "x" };
	struct backend *b = (struct backend *)&args;
	int ret = backend_open("no-such-backend", &args, &b);

	ck_assert_msg(ret == -ENOENT && b == NULL,
		      "unknown backend: expected -ENOENT and NULL, got %d", ret);
}
END_TEST

START_TEST(test_backend_open_failure_returns_backend_error)
{
	struct backend_open_args args = { .path = "size=12Q" };
	struct backend *b = (struct backend *)&args;
	int ret = backend_open("mem", &args, &b);

	ck_assert_msg(ret == -EINVAL && b == NULL,
		      "bad mem options: expected -EINVAL and NULL, got %d", ret);
	args.path = "align=3";
	ck_assert_int_eq(backend_open("mem", &args, &b), -EINVAL);
	args.path = "block=512,align=4096";
	ck_assert_int_eq(backend_open("mem", &args, &b), -EINVAL);
	args.path = "bogus";
	ck_assert_int_eq(backend_open("mem", &args, &b), -EINVAL);
	args.path = "max_transfer=1000";
	ck_assert_int_eq(backend_open("mem", &args, &b), -EINVAL);
}
END_TEST

/* A table with only the required ops, over a mem backend held in priv:
 * the core's defaults do the rest. */
static int minimal_open(struct backend *b, const struct backend_open_args *a)
{
	b->priv = a->inner;
	b->limits = a->inner->limits;
	return 0;
}

static void minimal_close(struct backend *b)
{
	backend_close(b->priv);
}

static int64_t minimal_get_size(struct backend *b)
{
	return backend_get_size(b->priv);
}

static ssize_t minimal_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	return backend_direct_IO_bvec(b->priv, iocb);
}

static const struct backend_ops minimal_ops = {
	.name = "minimal",
	.open = minimal_open,
	.close = minimal_close,
	.get_size = minimal_get_size,
	.direct_IO_bvec = minimal_direct_IO_bvec,
};

/* Build a backend on minimal_ops by hand (it is not registered). */
static struct backend *open_minimal(const char *mem_opts,
				    struct backend **mem_out)
{
	struct backend_open_args args = { .inner = open_mem(mem_opts, 0) };
	struct backend *b = g_new0(struct backend, 1);

	ck_assert_int_eq(backend_ops_check(&minimal_ops), 0);
	b->ops = &minimal_ops;
	ck_assert_int_eq(minimal_ops.open(b, &args), 0);
	*mem_out = args.inner;
	return b;
}

START_TEST(test_backend_ops_check_rejects_incomplete)
{
	struct backend_ops ops = minimal_ops;

	ck_assert_int_eq(backend_ops_check(&ops), 0);
	ops.direct_IO_bvec = NULL;
	ck_assert_msg(backend_ops_check(&ops) == -EINVAL,
		      "a table without direct_IO_bvec is refused");
	ops = minimal_ops;
	ops.get_size = NULL;
	ck_assert_int_eq(backend_ops_check(&ops), -EINVAL);
	ops = minimal_ops;
	ops.open = NULL;
	ck_assert_int_eq(backend_ops_check(&ops), -EINVAL);
	ops = minimal_ops;
	ops.close = NULL;
	ck_assert_int_eq(backend_ops_check(&ops), -EINVAL);
	ops = minimal_ops;
	ops.name = "";
	ck_assert_msg(backend_ops_check(&ops) == -EINVAL,
		      "an empty name is refused");
	ops.name = NULL;
	ck_assert_int_eq(backend_ops_check(&ops), -EINVAL);
	ck_assert_int_eq(backend_ops_check(NULL), -EINVAL);
}
END_TEST

static void fill_pattern(char *buf, size_t len, uint64_t pos)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (char)((pos + i) * 7 + ((pos + i) >> 9));
}

START_TEST(test_backend_defaults_of_optional_ops)
{
	struct backend *mem, *b = open_minimal("size=4M", &mem);
	size_t size = 4 << 20, i;
	char *want = g_malloc(size), *got = g_malloc(size);
	uint64_t zpos = 3 * 4096 + 100, zlen = (5 << 19) + 333;
	uint64_t dpos = (3 << 20) + 512, dlen = 8192;
	struct backend_extent ext;
	struct backend_info info;

	fill_pattern(want, size, 0);
	ck_assert_int_eq(backend_pwrite(b, want, size, 0), (ssize_t)size);
	ck_assert_msg(backend_flush(b) == 0, "default flush: 0");

	/* write_zeroes: unaligned, across the 1 MiB pieces. */
	ck_assert_int_eq(backend_write_zeroes(b, zpos, zlen), 0);
	memset(want + zpos, 0, zlen);
	/* discard: falls back to write_zeroes. */
	ck_assert_int_eq(backend_discard(b, dpos, dlen), 0);
	memset(want + dpos, 0, dlen);
	/* Ranges past the end are clamped. */
	ck_assert_int_eq(backend_discard(b, size - 1000, 5000), 0);
	memset(want + size - 1000, 0, 1000);
	ck_assert_int_eq(backend_discard(b, size + 4096, 4096), 0);

	ck_assert_int_eq(backend_pread(b, got, size, 0), (ssize_t)size);
	for (i = 0; i < size && got[i] == want[i]; i++)
		;
	ck_assert_msg(i == size, "default write_zeroes/discard: zeros "
		      "exactly in the ranges; first difference at %zu", i);
	ck_assert_int_eq(mem_backend_peek(mem, 0, got, size), 0);
	ck_assert_msg(!memcmp(got, want, size),
		      "mem's store agrees with what reads returned");

	ck_assert_int_eq(backend_map(b, 4096, size, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == size - 4096,
		      "default map: all data to the end (got hole=%d len=%llu)",
		      ext.hole, (unsigned long long)ext.len);
	ck_assert_int_eq(backend_map(b, 0, 100, &ext), 0);
	ck_assert_msg(ext.len == 100, "map is clipped to len");
	ck_assert_int_eq(backend_map(b, size, 100, &ext), -ENXIO);
	ck_assert_int_eq(backend_map(b, 0, 0, &ext), -EINVAL);

	ck_assert_msg(backend_resize(b, 8 << 20) == -EOPNOTSUPP,
		      "default resize: -EOPNOTSUPP");
	ck_assert_msg(backend_clone_range(b, 0, b, 4096, 4096) == -EOPNOTSUPP,
		      "default clone_range: -EOPNOTSUPP");
	ck_assert_int_eq(backend_info(b, &info), 0);
	ck_assert_str_eq(info.format, "minimal");
	ck_assert_msg(info.size == size && info.allocated == size,
		      "default info: size and allocated = %zu", size);
	backend_close(b);
	g_free(want);
	g_free(got);
}
END_TEST

/* Random pwrite/pread at odd offsets and lengths against a model. */
static void check_pread_pwrite(const char *opts, unsigned int iterations)
{
	struct backend *b = open_mem(opts, 0);
	size_t size = (size_t)backend_get_size(b);
	char *model = g_malloc0(size), *buf = g_malloc(size), *peek;
	struct test_rng rng;
	unsigned int i, n = test_iterations(iterations);

	test_rng_init(&rng, (uint64_t)g_str_hash(opts));
	peek = g_malloc(size);
	for (i = 0; i < n; i++) {
		uint64_t pos = test_rng_range(&rng, 0, size - 1);
		size_t max = size - pos, len;
		ssize_t ret;

		/* Mostly small, sometimes past a 1 MiB piece. */
		len = (size_t)test_rng_range(&rng, 1, max < 9000 ? max : 9000);
		if (i % 16 == 0)
			len = (size_t)test_rng_range(&rng, 1, max);
		if (i % 3) {
			test_rng_fill(&rng, buf, len);
			ret = backend_pwrite(b, buf, len, pos);
			ck_assert_msg(ret == (ssize_t)len,
				      "%s: pwrite %zu at %llu: expected %zu, got %zd",
				      opts, len, (unsigned long long)pos, len,
				      ret);
			memcpy(model + pos, buf, len);
		} else {
			ret = backend_pread(b, buf, len, pos);
			ck_assert_msg(ret == (ssize_t)len &&
				      !memcmp(buf, model + pos, len),
				      "%s: pread %zu at %llu returns what was written (ret %zd)",
				      opts, len, (unsigned long long)pos, ret);
		}
	}
	ck_assert_int_eq(mem_backend_peek(b, 0, peek, size), 0);
	ck_assert_msg(!memcmp(peek, model, size),
		      "%s: the store holds the model's content", opts);
	backend_close(b);
	g_free(model);
	g_free(buf);
	g_free(peek);
}

START_TEST(test_backend_pread_pwrite_any_offset)
{
	check_pread_pwrite("size=3M", 600);
	check_pread_pwrite("size=3M,align=4096", 300);
	check_pread_pwrite("size=3M,fragment,max_segs=3,max_transfer=8192",
			   300);
	check_pread_pwrite("size=2M,async,fragment,block=8192", 300);
	check_pread_pwrite("size=1000001,align=512,block=1024", 300);
}
END_TEST

START_TEST(test_backend_eof_rules)
{
	struct backend *b = open_mem("size=10000", 0);
	struct backend *g = open_mem("size=10000", BACKEND_OPEN_GROWABLE);
	char buf[8192], want[8192];
	ssize_t ret;

	memset(want, 'e', sizeof(want));
	ck_assert_int_eq(backend_pwrite(b, want, 10000 - 8192, 8192),
			 10000 - 8192);
	ret = backend_pread(b, buf, sizeof(buf), 8192);
	ck_assert_msg(ret == 10000 - 8192,
		      "a read crossing EOF is short: expected %d, got %zd",
		      10000 - 8192, ret);
	ck_assert_msg(!memcmp(buf, want, (size_t)ret), "short read's data");
	ck_assert_msg(backend_pread(b, buf, 100, 10000) == 0,
		      "a read at EOF returns 0");
	ck_assert_msg(backend_pread(b, buf, 100, 1 << 20) == 0,
		      "a read past EOF returns 0");
	ret = backend_pwrite(b, want, 100, 9950);
	ck_assert_msg(ret == -ENOSPC,
		      "a write crossing EOF: expected -ENOSPC, got %zd", ret);
	ck_assert_int_eq(backend_get_size(b), 10000);

	ret = backend_pwrite(g, want, 5000, 9950);
	ck_assert_msg(ret == 5000, "growable: the write extends, got %zd", ret);
	ck_assert_int_eq(backend_get_size(g), 14950);
	ck_assert_int_eq(backend_pread(g, buf, 5000, 9950), 5000);
	ck_assert_msg(!memcmp(buf, want, 5000), "the extension reads back");
	backend_close(b);
	backend_close(g);
}
END_TEST

START_TEST(test_backend_rdonly_refuses_writes)
{
	struct backend *b = open_mem("size=1M", BACKEND_OPEN_RDONLY);
	char buf[4096] = { 0 };

	ck_assert_msg(backend_pwrite(b, buf, 4096, 0) == -EROFS,
		      "pwrite on a read-only image: -EROFS");
	ck_assert_msg(backend_pwrite(b, buf, 17, 3) == -EROFS,
		      "unaligned pwrite on a read-only image: -EROFS");
	ck_assert_int_eq(backend_discard(b, 0, 4096), -EROFS);
	ck_assert_int_eq(backend_write_zeroes(b, 0, 4096), -EROFS);
	ck_assert_int_eq(backend_resize(b, 4096), -EROFS);
	ck_assert_msg(backend_pread(b, buf, 4096, 0) == 4096,
		      "reads still work");
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);
}
END_TEST

START_TEST(test_backend_mem_holes_map_info)
{
	struct backend *b = open_mem("size=1M", 0);
	struct backend_extent ext;
	struct backend_info info;
	char buf[8192];

	ck_assert_int_eq(backend_map(b, 0, 1 << 20, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 1 << 20,
		      "a fresh image is one hole");
	memset(buf, 'd', sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b, buf, 10, 8192 + 5), 10);
	ck_assert_int_eq(backend_map(b, 0, 1 << 20, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 8192, "hole before the write");
	ck_assert_int_eq(backend_map(b, 8192 + 100, 1 << 20, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == 4096 - 100,
		      "data to the end of the written block (len %llu)",
		      (unsigned long long)ext.len);
	ck_assert_int_eq(backend_info(b, &info), 0);
	ck_assert_msg(!strcmp(info.format, "mem") && info.size == 1 << 20 &&
		      info.allocated == 4096,
		      "info: mem, 1 MiB, one block allocated (got %s %llu %llu)",
		      info.format, (unsigned long long)info.size,
		      (unsigned long long)info.allocated);
	ck_assert_int_eq(backend_pread(b, buf, sizeof(buf), 8192), 8192);
	ck_assert_msg(buf[0] == 0 && buf[5] == 'd' && buf[14] == 'd' &&
		      buf[15] == 0 && buf[4096] == 0,
		      "the block reads as zeros around the written bytes");
	ck_assert_int_eq(backend_discard(b, 8192, 4096), 0);
	ck_assert_int_eq(backend_map(b, 0, 1 << 20, &ext), 0);
	ck_assert_msg(ext.hole && ext.len == 1 << 20,
		      "discard makes the block a hole again");
	ck_assert_int_eq(backend_resize(b, 4096 + 10), 0);
	ck_assert_int_eq(backend_get_size(b), 4096 + 10);
	backend_close(b);
}
END_TEST

START_TEST(test_backend_mem_resize_cuts_and_zeroes)
{
	struct backend *b = open_mem("size=64K", 0);
	char buf[16384], zero[16384] = { 0 };

	memset(buf, 'r', sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b, buf, sizeof(buf), 0), sizeof(buf));
	ck_assert_int_eq(backend_resize(b, 5000), 0);
	ck_assert_int_eq(backend_pread(b, buf, sizeof(buf), 0), 5000);
	ck_assert_int_eq(backend_resize(b, 16384), 0);
	ck_assert_int_eq(backend_pread(b, buf, sizeof(buf), 0), sizeof(buf));
	ck_assert_msg(buf[4999] == 'r' && !memcmp(buf + 5000, zero,
						  sizeof(buf) - 5000),
		      "what a shrink cut off reads as zeros after growing back");
	backend_close(b);
}
END_TEST

START_TEST(test_backend_mem_coalescing_limits)
{
	struct backend *b = open_mem("size=1M", 0);
	struct backend *fr = open_mem("size=1M,fragment", 0);
	struct backend *lim = open_mem("size=1M,max_transfer=16384", 0);
	static char buf[65536];
	struct mem_backend_stats st;

	memset(buf, 'c', sizeof(buf));
	ck_assert_int_eq(backend_pwrite(b, buf, sizeof(buf), 0), sizeof(buf));
	mem_backend_get_stats(b, &st);
	ck_assert_msg(st.ios == 1 && st.max_io_len == sizeof(buf),
		      "identity map: 64 KiB aligned write is one I/O (got %llu)",
		      (unsigned long long)st.ios);

	ck_assert_int_eq(backend_pwrite(fr, buf, sizeof(buf), 0), sizeof(buf));
	mem_backend_get_stats(fr, &st);
	ck_assert_msg(st.ios == 16 && st.max_io_len == 4096,
		      "fragment: no two blocks adjacent, 16 I/Os (got %llu)",
		      (unsigned long long)st.ios);
	ck_assert_msg(mem_backend_block_written(fr, 4096) &&
		      !mem_backend_block_written(fr, 65536),
		      "fragment: written blocks tracked logically");
	mem_backend_reset_stats(fr);
	ck_assert_int_eq(backend_pread(fr, buf, sizeof(buf), 0), sizeof(buf));
	mem_backend_get_stats(fr, &st);
	ck_assert_msg(st.read_ios == 16 && buf[0] == 'c' && buf[65535] == 'c',
		      "fragment: reads come back through the permutation");

	ck_assert_int_eq(backend_pwrite(lim, buf, sizeof(buf), 0), sizeof(buf));
	mem_backend_get_stats(lim, &st);
	ck_assert_msg(st.ios == 4 && st.max_io_len <= 16384,
		      "max_transfer 16 KiB: 4 I/Os of <= 16 KiB (got %llu, max %llu)",
		      (unsigned long long)st.ios,
		      (unsigned long long)st.max_io_len);
	backend_close(b);
	backend_close(fr);
	backend_close(lim);
}
END_TEST

START_TEST(test_backend_mem_scattered_pages_respect_max_segs)
{
	struct backend *b = open_mem("size=1M,max_segs=3", 0);
	enum { PAGES = 8 };
	char *mem;
	struct bio_vec bv[PAGES];
	struct iov_iter iter;
	struct kiocb iocb = { .ki_rw = DIOLOOP_WRITE, .ki_pos = 0,
			      .ki_iter = &iter };
	struct mem_backend_stats st;
	char got[PAGES * 4096];
	unsigned int i;
	ssize_t ret;

	/* Every other page: pieces adjacent on the image, not in memory. */
	ck_assert_int_eq(posix_memalign((void **)&mem, 4096, 2 * PAGES * 4096),
			 0);
	for (i = 0; i < PAGES; i++) {
		memset(mem + 2 * i * 4096, 'a' + (int)i, 4096);
		bv[i] = (struct bio_vec){ mem + 2 * i * 4096, 4096, 0 };
	}
	iov_iter_init_bvec(&iter, bv, PAGES, PAGES * 4096, 0);
	ret = backend_direct_IO_bvec(b, &iocb);
	ck_assert_msg(ret == PAGES * 4096, "write: expected %d, got %zd",
		      PAGES * 4096, ret);
	mem_backend_get_stats(b, &st);
	ck_assert_msg(st.max_nr_iov <= 3 && st.multi_iov_ios > 0 &&
		      st.iovs == PAGES,
		      "8 scattered pages: I/Os of at most 3 iovecs, some "
		      "coalesced (max %llu, multi %llu, iovs %llu)",
		      (unsigned long long)st.max_nr_iov,
		      (unsigned long long)st.multi_iov_ios,
		      (unsigned long long)st.iovs);
	ck_assert_int_eq(mem_backend_peek(b, 0, got, sizeof(got)), 0);
	for (i = 0; i < PAGES; i++)
		ck_assert_msg(got[i * 4096] == 'a' + (int)i &&
			      got[i * 4096 + 4095] == 'a' + (int)i,
			      "page %u landed in block %u", i, i);
	free(mem);
	backend_close(b);
}
END_TEST

struct async_count {
	atomic_int done;
	atomic_int bad;
};

struct async_req {
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec bv;
	struct async_count *count;
	size_t want;
};

static void count_done(struct kiocb *iocb, ssize_t res)
{
	struct async_req *r = iocb->ki_private;

	if (res != (ssize_t)r->want)
		atomic_fetch_add(&r->count->bad, 1);
	atomic_fetch_add(&r->count->done, 1);
}

START_TEST(test_backend_mem_async_many_in_flight)
{
	enum { N = 64 };
	struct backend *b = open_mem("size=1M,async,delay_us=200", 0);
	struct async_count count = { 0 };
	struct async_req *reqs = g_new0(struct async_req, N);
	char *pages;
	unsigned int i, queued = 0;
	char got[4096];

	ck_assert_int_eq(posix_memalign((void **)&pages, 4096, N * 4096), 0);
	for (i = 0; i < N; i++) {
		struct async_req *r = &reqs[i];
		ssize_t ret;

		memset(pages + i * 4096, 'A' + (int)(i % 26), 4096);
		/* Odd ones are unaligned (bounced / read-modify-write). */
		r->want = i % 2 ? 1000 : 4096;
		r->bv = (struct bio_vec){ pages + i * 4096,
					  (unsigned int)r->want, 0 };
		iov_iter_init_bvec(&r->iter, &r->bv, 1, r->want, 0);
		r->count = &count;
		r->iocb = (struct kiocb){ .ki_rw = DIOLOOP_WRITE,
					  .ki_pos = (uint64_t)i * 4096 +
						    (i % 2 ? 100 : 0),
					  .ki_iter = &r->iter,
					  .ki_complete = count_done,
					  .ki_private = r };
		ret = backend_direct_IO_bvec(b, &r->iocb);
		if (ret == -EIOCBQUEUED)
			queued++;
		else
			ck_assert_msg(ret == (ssize_t)r->want,
				      "inline result: expected %zu, got %zd",
				      r->want, ret);
	}
	for (i = 0; i < 10000 && atomic_load(&count.done) < (int)queued; i++)
		g_usleep(1000);
	ck_assert_msg(atomic_load(&count.done) == (int)queued &&
		      atomic_load(&count.bad) == 0,
		      "%u queued writes completed once each with full counts "
		      "(done %d, bad %d)", queued, atomic_load(&count.done),
		      atomic_load(&count.bad));
	ck_assert_msg(queued > 0, "an async mem queues requests");
	for (i = 0; i < N; i++) {
		size_t off = i % 2 ? 100 : 0;

		ck_assert_int_eq(mem_backend_peek(b, (uint64_t)i * 4096, got,
						  sizeof(got)), 0);
		ck_assert_msg(got[off] == 'A' + (int)(i % 26) &&
			      got[off + reqs[i].want - 1] == 'A' + (int)(i % 26),
			      "write %u landed", i);
		if (i % 2)
			ck_assert_msg(got[0] == 0 && got[1100] == 0,
				      "write %u left the rest of the block zero",
				      i);
	}
	free(pages);
	g_free(reqs);
	backend_close(b);
}
END_TEST

START_TEST(test_backend_peek_poke_bounds)
{
	struct backend *b = open_mem("size=8192,fragment", 0);
	char buf[100] = "hello", got[100];

	ck_assert_int_eq(mem_backend_poke(b, 4090, buf, 10), 0);
	ck_assert_int_eq(backend_pread(b, got, 10, 4090), 10);
	ck_assert_msg(!memcmp(got, buf, 10), "poke is seen by pread");
	ck_assert_int_eq(mem_backend_peek(b, 8190, got, 3), -EINVAL);
	ck_assert_int_eq(mem_backend_poke(b, 9000, buf, 1), -EINVAL);
	backend_close(b);
}
END_TEST

/* ---- sizes: the core checks every range before the op sees it ---- */

#define SPY_SIZE (UINT64_C(1) << 20)
#define OFF_MAX ((uint64_t)INT64_MAX)

/* A backend whose ops only count their calls and succeed, so that a
 * range reaching one of them is seen to have passed the core. */
struct spy {
	unsigned int calls;
	uint64_t last_pos, last_len;
};

static int spy_open(struct backend *b, const struct backend_open_args *a)
{
	(void)a;
	b->priv = g_new0(struct spy, 1);
	return 0;
}

static void spy_close(struct backend *b)
{
	g_free(b->priv);
}

static int64_t spy_get_size(struct backend *b)
{
	(void)b;
	return (int64_t)SPY_SIZE;
}

static void spy_saw(struct backend *b, uint64_t pos, uint64_t len)
{
	struct spy *s = b->priv;

	s->calls++;
	s->last_pos = pos;
	s->last_len = len;
}

static ssize_t spy_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	spy_saw(b, iocb->ki_pos, iov_iter_count(iocb->ki_iter));
	return (ssize_t)iov_iter_count(iocb->ki_iter);
}

static int spy_range(struct backend *b, uint64_t pos, uint64_t len)
{
	spy_saw(b, pos, len);
	return 0;
}

static int spy_resize(struct backend *b, uint64_t size)
{
	spy_saw(b, 0, size);
	return 0;
}

static ssize_t spy_clone_range(struct backend *src, uint64_t src_pos,
			       struct backend *dst, uint64_t dst_pos,
			       uint64_t len)
{
	(void)src;
	(void)src_pos;
	spy_saw(dst, dst_pos, len);
	return (ssize_t)len;
}

static const struct backend_ops spy_ops = {
	.name = "spy",
	.open = spy_open,
	.close = spy_close,
	.get_size = spy_get_size,
	.direct_IO_bvec = spy_direct_IO_bvec,
	.discard = spy_range,
	.write_zeroes = spy_range,
	.resize = spy_resize,
	.clone_range = spy_clone_range,
};

/* A spy backend built by hand (it is not registered), with the largest
 * size max_size. */
static struct backend *open_spy(uint64_t max_size, unsigned int flags)
{
	struct backend_open_args args = { .path = "spy" };
	struct backend *b = g_new0(struct backend, 1);

	ck_assert_int_eq(backend_ops_check(&spy_ops), 0);
	b->ops = &spy_ops;
	b->flags = flags;
	ck_assert_int_eq(spy_ops.open(b, &args), 0);
	b->limits = (struct backend_limits){
		.request_alignment = 1,
		.mem_alignment = 1,
		.block_size = 4096,
		.max_transfer = 1 << 20,
		.max_segs = 1024,
		.max_size = max_size,
	};
	return b;
}

static unsigned int spy_calls(struct backend *b)
{
	return ((struct spy *)b->priv)->calls;
}

/* One synchronous write of len bytes (<= 8192) at pos through the core. */
static ssize_t spy_write(struct backend *b, uint64_t pos, size_t len)
{
	static char page[2][4096];
	struct bio_vec bv[2] = {
		{ .bv_page = page[0], .bv_len = 4096, .bv_offset = 0 },
		{ .bv_page = page[1], .bv_len = 4096, .bv_offset = 0 },
	};
	struct iov_iter iter;
	struct kiocb iocb = { .ki_rw = DIOLOOP_WRITE, .ki_pos = pos,
			      .ki_iter = &iter };

	if (len <= 4096)
		bv[0].bv_len = (unsigned int)len;
	else
		bv[1].bv_len = (unsigned int)(len - 4096);
	iov_iter_init_bvec(&iter, bv, len <= 4096 ? 1 : 2, len, 0);
	return backend_direct_IO_bvec(b, &iocb);
}

/* Expect op's result want and whether the backend's op was reached. */
#define EXPECT_OP(b, what, call, want, reached) do { \
	unsigned int before_ = spy_calls(b); \
	long long got_ = (long long)(call); \
	ck_assert_msg(got_ == (long long)(want), \
		      "%s: expected %lld, got %lld", what, \
		      (long long)(want), got_); \
	ck_assert_msg((spy_calls(b) != before_) == (reached), \
		      "%s: the backend's op %s", what, \
		      (reached) ? "is called" : "is not called"); \
} while (0)

/* Writes at INT64_MAX - 1, INT64_MAX and across 2^63 against a largest
 * size of max (INT64_MAX, or a multiple of 4096 below it). */
static void check_write_bounds(uint64_t max)
{
	struct backend *b = open_spy(max, BACKEND_OPEN_GROWABLE);
	struct backend *fixed = open_spy(max, 0);
	bool all = max == OFF_MAX;
	char *big = g_malloc0(2 << 20);

	EXPECT_OP(b, "write ending at max", spy_write(b, max - 4096, 4096),
		  4096, true);
	EXPECT_OP(b, "write ending at INT64_MAX - 1",
		  spy_write(b, OFF_MAX - 4097, 4096), all ? 4096 : -EFBIG, all);
	EXPECT_OP(b, "1 byte at INT64_MAX - 1 (ending at INT64_MAX)",
		  spy_write(b, OFF_MAX - 1, 1), all ? 1 : -EFBIG, all);
	EXPECT_OP(b, "write ending at INT64_MAX",
		  spy_write(b, OFF_MAX - 4096, 4096), all ? 4096 : -EFBIG,
		  all);
	EXPECT_OP(b, "write from INT64_MAX - 1 across 2^63",
		  spy_write(b, OFF_MAX - 1, 4096), -EFBIG, false);
	EXPECT_OP(b, "1 byte at INT64_MAX (ending at 2^63)",
		  spy_write(b, OFF_MAX, 1), -EFBIG, false);
	EXPECT_OP(b, "write 1 byte past max", spy_write(b, max - 4095, 4096),
		  -EFBIG, false);
	EXPECT_OP(b, "write at 2^63 (a negative off_t)",
		  spy_write(b, OFF_MAX + 1, 4096), -EINVAL, false);
	EXPECT_OP(b, "write whose end wraps 2^64",
		  spy_write(b, UINT64_MAX - 100, 8192), -EINVAL, false);
	EXPECT_OP(b, "pwrite of 2 MiB whose second MiB is past max: "
		  "refused whole", backend_pwrite(b, big, 2 << 20,
						  max - (1 << 20)),
		  -EFBIG, false);
	EXPECT_OP(fixed, "not growable: write across 2^63",
		  spy_write(fixed, OFF_MAX - 1, 4096), -ENOSPC, false);
	EXPECT_OP(fixed, "not growable: write at 2^63",
		  spy_write(fixed, OFF_MAX + 1, 4096), -EINVAL, false);
	backend_close(b);
	backend_close(fixed);
	g_free(big);
}

START_TEST(test_backend_write_past_max_size_is_refused)
{
	check_write_bounds(OFF_MAX);
	check_write_bounds(OFF_MAX & ~UINT64_C(4095));
	check_write_bounds(UINT64_C(16) << 40);
}
END_TEST

/* Sizes at INT64_MAX - 1, INT64_MAX and past 2^63 against max. */
static void check_resize_bounds(uint64_t max)
{
	struct backend *b = open_spy(max, BACKEND_OPEN_GROWABLE);
	bool all = max == OFF_MAX;

	EXPECT_OP(b, "resize to max", backend_resize(b, max), 0, true);
	EXPECT_OP(b, "resize to INT64_MAX - 1", backend_resize(b, OFF_MAX - 1),
		  all ? 0 : -EFBIG, all);
	EXPECT_OP(b, "resize to INT64_MAX", backend_resize(b, OFF_MAX),
		  all ? 0 : -EFBIG, all);
	EXPECT_OP(b, "resize to max + 1", backend_resize(b, max + 1),
		  max + 1 > OFF_MAX ? -EINVAL : -EFBIG, false);
	EXPECT_OP(b, "resize to 2^63", backend_resize(b, OFF_MAX + 1),
		  -EINVAL, false);
	EXPECT_OP(b, "resize to 2^64 - 1", backend_resize(b, UINT64_MAX),
		  -EINVAL, false);
	backend_close(b);
}

START_TEST(test_backend_resize_past_max_size_is_refused)
{
	check_resize_bounds(OFF_MAX);
	check_resize_bounds(OFF_MAX & ~UINT64_C(4095));
}
END_TEST

/* Discard and write-zeroes never grow the image (they are clamped to
 * its size), but a range past the largest off_t is refused, never
 * wrapped. */
static void check_zero_range_bounds(const char *name,
				    int (*op)(struct backend *, uint64_t,
					      uint64_t))
{
	struct backend *b = open_spy(OFF_MAX & ~UINT64_C(4095),
				     BACKEND_OPEN_GROWABLE);
	struct spy *s = b->priv;
	char what[128];

#define WHAT(fmt) (snprintf(what, sizeof(what), "%s " fmt, name), what)
	EXPECT_OP(b, WHAT("of 1 byte at INT64_MAX - 1"),
		  op(b, OFF_MAX - 1, 1), 0, false);
	EXPECT_OP(b, WHAT("ending at INT64_MAX"), op(b, OFF_MAX - 4096, 4096),
		  0, false);
	EXPECT_OP(b, WHAT("from INT64_MAX - 1 across 2^63"),
		  op(b, OFF_MAX - 1, 2), -EFBIG, false);
	EXPECT_OP(b, WHAT("from 4 KiB before the end across 2^63"),
		  op(b, SPY_SIZE - 4096, OFF_MAX), -EFBIG, false);
	EXPECT_OP(b, WHAT("at 2^63"), op(b, OFF_MAX + 1, 4096), -EINVAL,
		  false);
	EXPECT_OP(b, WHAT("whose end wraps 2^64"),
		  op(b, UINT64_MAX - 100, 4096), -EINVAL, false);
	EXPECT_OP(b, WHAT("of 2^64 - 1 bytes"), op(b, 4096, UINT64_MAX),
		  -EINVAL, false);
	EXPECT_OP(b, WHAT("of 2^62 bytes from 4 KiB before the end"),
		  op(b, SPY_SIZE - 4096, UINT64_C(1) << 62), 0, true);
	ck_assert_msg(s->last_pos == SPY_SIZE - 4096 && s->last_len == 4096,
		      "%s: clamped to the end (got %llu+%llu)", name,
		      (unsigned long long)s->last_pos,
		      (unsigned long long)s->last_len);
#undef WHAT
	backend_close(b);
}

START_TEST(test_backend_discard_and_write_zeroes_ranges_are_checked)
{
	check_zero_range_bounds("discard", backend_discard);
	check_zero_range_bounds("write_zeroes", backend_write_zeroes);
}
END_TEST

START_TEST(test_backend_clone_range_past_max_size_is_refused)
{
	uint64_t max = OFF_MAX & ~UINT64_C(4095);
	struct backend *src = open_spy(OFF_MAX, 0);
	struct backend *dst = open_spy(max, BACKEND_OPEN_GROWABLE);

	EXPECT_OP(dst, "clone inside the target",
		  backend_clone_range(src, 0, dst, 4096, 4096), 4096, true);
	EXPECT_OP(dst, "clone ending at INT64_MAX",
		  backend_clone_range(src, 0, dst, OFF_MAX - 4096, 4096),
		  -EFBIG, false);
	EXPECT_OP(dst, "clone from INT64_MAX - 1 across 2^63",
		  backend_clone_range(src, 0, dst, OFF_MAX - 1, 4096), -EFBIG,
		  false);
	EXPECT_OP(dst, "clone to 2^63",
		  backend_clone_range(src, 0, dst, OFF_MAX + 1, 4096),
		  -EINVAL, false);
	EXPECT_OP(dst, "clone from a source range across 2^63",
		  backend_clone_range(src, OFF_MAX - 1, dst, 0, 4096),
		  -EINVAL, false);
	EXPECT_OP(dst, "clone from a source range that wraps 2^64",
		  backend_clone_range(src, UINT64_MAX - 100, dst, 0, 4096),
		  -EINVAL, false);
	backend_close(src);
	backend_close(dst);
}
END_TEST

START_TEST(test_backend_default_max_size_follows_alignment)
{
	struct backend *b = open_mem("size=1M,align=4096", 0);

	ck_assert_msg(b->limits.max_size == (OFF_MAX & ~UINT64_C(4095)),
		      "align=4096: max_size is INT64_MAX rounded down to 4096 (got %llu)",
		      (unsigned long long)b->limits.max_size);
	backend_close(b);
	b = open_mem("size=1M,align=512", 0);
	ck_assert_msg(b->limits.max_size == (OFF_MAX & ~UINT64_C(511)),
		      "align=512: max_size is INT64_MAX rounded down to 512 (got %llu)",
		      (unsigned long long)b->limits.max_size);
	backend_close(b);
}
END_TEST

static Suite *backend_suite(void)
{
	Suite *s = suite_create("backend");
	TCase *core = tcase_create("core");
	TCase *mem = tcase_create("mem");

	tcase_set_timeout(core, 300);
	tcase_add_test(core, test_backend_registry_lookup);
	tcase_add_test(core, test_backend_open_unknown_is_enoent);
	tcase_add_test(core, test_backend_filter_forwards_null_ops);
	tcase_add_test(core, test_backend_filter_needs_inner);
	tcase_add_test(core, test_backend_filter_swap_inner);
	tcase_add_test(core, test_backend_open_failure_returns_backend_error);
	tcase_add_test(core, test_backend_ops_check_rejects_incomplete);
	tcase_add_test(core, test_backend_defaults_of_optional_ops);
	tcase_add_test(core, test_backend_pread_pwrite_any_offset);
	tcase_add_test(core, test_backend_eof_rules);
	tcase_add_test(core, test_backend_rdonly_refuses_writes);
	tcase_add_test(core, test_backend_write_past_max_size_is_refused);
	tcase_add_test(core, test_backend_resize_past_max_size_is_refused);
	tcase_add_test(core,
		       test_backend_discard_and_write_zeroes_ranges_are_checked);
	tcase_add_test(core, test_backend_clone_range_past_max_size_is_refused);
	tcase_add_test(core, test_backend_default_max_size_follows_alignment);
	suite_add_tcase(s, core);

	tcase_set_timeout(mem, 300);
	tcase_add_test(mem, test_backend_mem_holes_map_info);
	tcase_add_test(mem, test_backend_mem_resize_cuts_and_zeroes);
	tcase_add_test(mem, test_backend_mem_coalescing_limits);
	tcase_add_test(mem, test_backend_mem_scattered_pages_respect_max_segs);
	tcase_add_test(mem, test_backend_mem_async_many_in_flight);
	tcase_add_test(mem, test_backend_peek_poke_bounds);
	suite_add_tcase(s, mem);
	return s;
}

int main(void)
{
	return test_run_suite(backend_suite());
}
