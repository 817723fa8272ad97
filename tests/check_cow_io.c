/* SPDX-License-Identifier: MIT */
/*
 * The cow backend's I/O: round trips (aligned, unaligned, asynchronous,
 * both checksum types), holes, EOF rules, copy-on-write placement,
 * persistence across reopen, discard / write_zeroes / map, growable
 * volumes and resize, corrupt data blocks and metadata pages, and open
 * errors.
 */
#include <stdatomic.h>

#include "backends/aio.h"
#include "backends/cow/cow_int.h"
#include "tests/cow_test.h"

/* ---- round trips ---- */

static void round_trip(uint8_t csum_type, bool unaligned, unsigned int salt)
{
	char *path = cow_test_image(8 * MiB, csum_type);
	struct backend *b = cow_test_open(path, 0);
	size_t cap = 512 * KiB;
	unsigned char *data = g_malloc(cap), *back = g_malloc(cap);
	struct test_rng rng;
	unsigned int k;

	test_rng_init(&rng, salt);
	for (k = 0; k < test_iterations(60); k++) {
		size_t len = unaligned ? test_rng_range(&rng, 1, cap) :
			     test_rng_range(&rng, 1, cap / 4096) * 4096;
		uint64_t pos = unaligned ?
			test_rng_range(&rng, 0, 8 * MiB - len) :
			test_rng_range(&rng, 0, (8 * MiB - len) / 4096) * 4096;

		test_rng_fill(&rng, data, len);
		cow_test_write(b, data, len, pos, &rng);
		ck_assert_msg(cow_test_read(b, back, len, pos, &rng) ==
			      (ssize_t)len,
			      "read back %zu bytes at %llu", len,
			      (unsigned long long)pos);
		ck_assert_msg(memcmp(back, data, len) == 0,
			      "round trip %u: %zu bytes at %llu read back as written",
			      k, len, (unsigned long long)pos);
	}
	ck_assert_msg(cow_test_stats(b).csum_errors == 0,
		      "no checksum errors on a healthy image");
	backend_close(b);
	g_free(data);
	g_free(back);
	g_free(path);
}

START_TEST(test_cow_rw_aligned_round_trip)
{
	round_trip(COW_CSUM_CRC32C, false, 1);
}
END_TEST

START_TEST(test_cow_rw_unaligned_round_trip)
{
	round_trip(COW_CSUM_CRC32C, true, 2);
}
END_TEST

START_TEST(test_cow_rw_xxhash64_round_trip)
{
	round_trip(COW_CSUM_XXHASH64, true, 3);
}
END_TEST

START_TEST(test_cow_is_registered)
{
	const char *const *names = backend_names();
	bool found = false;
	int i;

	ck_assert_msg(backend_lookup("cow") == &cow_backend_ops,
		      "the registry hands out cow_backend_ops for \"cow\"");
	for (i = 0; names[i]; i++)
		found |= !strcmp(names[i], "cow");
	ck_assert_msg(found, "\"cow\" is among the backend names");
	ck_assert_msg(backend_ops_check(&cow_backend_ops) == 0,
		      "the table passes validation");
}
END_TEST

START_TEST(test_cow_new_image_reads_zeros_and_stores_nothing)
{
	char *path = cow_test_image(64 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *buf = g_malloc(MiB);
	struct backend_info info;
	struct cow_stats st;

	ck_assert_msg(backend_get_size(b) == (int64_t)(64 * MiB),
		      "the size is the one given at create (got %lld)",
		      (long long)backend_get_size(b));
	ck_assert_msg(cow_test_read(b, buf, MiB, 17 * MiB, NULL) ==
		      (ssize_t)MiB && cow_test_is_zero(buf, MiB),
		      "a never-written range reads as zeros");
	ck_assert_msg(backend_info(b, &info) == 0 &&
		      !strcmp(info.format, "cow") &&
		      info.size == 64 * MiB,
		      "info says cow and the size");
	st = cow_test_stats(b);
	ck_assert_msg(st.mapped_blocks == 0 && st.generation == 2,
		      "nothing mapped, generation 2: opening for writing committed once (got %llu mapped, gen %llu)",
		      (unsigned long long)st.mapped_blocks,
		      (unsigned long long)st.generation);
	ck_assert_msg(backend_info(b, &info) == 0 && info.engine.ios == 0,
		      "reading holes submitted no I/O (got %llu)",
		      (unsigned long long)info.engine.ios);
	backend_close(b);
	g_free(buf);
	g_free(path);
}
END_TEST

START_TEST(test_cow_eof_rules)
{
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char buf[8192];

	memset(buf, 0x11, sizeof(buf));
	ck_assert_msg(cow_test_read(b, buf, 8192, MiB - 4096, NULL) == 4096,
		      "a read across EOF is short");
	ck_assert_msg(cow_test_read(b, buf, 8192, MiB, NULL) == 0,
		      "a read at EOF returns 0");
	{
		struct cow_tbuf *t = cow_tbuf_new(8192, 0, NULL);

		ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, MiB - 4096) ==
			      -ENOSPC,
			      "a write across EOF fails whole with -ENOSPC");
		cow_tbuf_free(t);
	}
	ck_assert_msg(cow_test_stats(b).mapped_blocks == 0,
		      "the refused write stored nothing");
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- asynchronous requests ---- */

struct areq {
	struct kiocb iocb;
	struct cow_tbuf *t;
	ssize_t res;
	atomic_int calls;
};

static GMutex async_lock;
static GCond async_cond;
static int async_pending;

static void areq_done(struct kiocb *iocb, ssize_t res)
{
	struct areq *a = iocb->ki_private;

	a->res = res;
	atomic_fetch_add(&a->calls, 1);
	g_mutex_lock(&async_lock);
	async_pending--;
	g_cond_broadcast(&async_cond);
	g_mutex_unlock(&async_lock);
}

/* Submit an asynchronous request; it completes through areq_done. */
static void areq_submit(struct backend *b, struct areq *a, int rw,
			uint64_t pos)
{
	ssize_t ret;

	a->iocb = (struct kiocb){ .ki_rw = rw, .ki_pos = pos,
				  .ki_iter = cow_tbuf_iter(a->t),
				  .ki_complete = areq_done, .ki_private = a };
	g_mutex_lock(&async_lock);
	async_pending++;
	g_mutex_unlock(&async_lock);
	ret = backend_direct_IO_bvec(b, &a->iocb);
	if (ret != -EIOCBQUEUED)
		areq_done(&a->iocb, ret);
}

static void areq_wait_all(void)
{
	g_mutex_lock(&async_lock);
	while (async_pending)
		g_cond_wait(&async_cond, &async_lock);
	g_mutex_unlock(&async_lock);
}

START_TEST(test_cow_many_async_requests_in_flight)
{
	enum { N = 64 };
	char *path = cow_test_image(16 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	struct areq *a = g_new0(struct areq, N);
	unsigned char *back = g_malloc(64 * KiB);
	struct test_rng rng;
	int i;

	test_rng_init(&rng, 10);
	/* N writes to distinct 64 KiB slots, some unaligned inside. */
	for (i = 0; i < N; i++) {
		size_t len = i % 3 ? 64 * KiB : 64 * KiB - 1000;

		a[i].t = cow_tbuf_new(len, (size_t)(i % 4) * 512, &rng);
		test_rng_fill(&rng, a[i].t->data, len);
		areq_submit(b, &a[i], DIOLOOP_WRITE,
			    (uint64_t)i * 128 * KiB + (i % 3 ? 0 : 500));
	}
	areq_wait_all();
	for (i = 0; i < N; i++) {
		ck_assert_msg(atomic_load(&a[i].calls) == 1,
			      "write %d completed exactly once", i);
		ck_assert_msg(a[i].res == (ssize_t)a[i].t->len,
			      "write %d: expected %zu, got %zd", i,
			      a[i].t->len, a[i].res);
	}
	ck_assert_msg(backend_flush(b) == 0, "flush");
	for (i = 0; i < N; i++) {
		size_t len = a[i].t->len;

		ck_assert_msg(cow_test_read(b, back, len,
					    (uint64_t)i * 128 * KiB +
					    (i % 3 ? 0 : 500), &rng) ==
			      (ssize_t)len &&
			      memcmp(back, a[i].t->data, len) == 0,
			      "write %d reads back", i);
		cow_tbuf_free(a[i].t);
	}
	backend_close(b);
	g_free(a);
	g_free(back);
	g_free(path);
}
END_TEST

/* Partial writes to different bytes of one block, all at once: the
 * read-modify-writes must not lose each other's bytes. */
START_TEST(test_cow_concurrent_partial_writes_to_one_block_all_survive)
{
	enum { N = 8 };
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	struct areq a[N];
	unsigned char back[4096];
	unsigned int round, i;

	memset(a, 0, sizeof(a));
	for (round = 0; round < test_iterations(40); round++) {
		for (i = 0; i < N; i++) {
			a[i].t = cow_tbuf_new(512, 0, NULL);
			memset(a[i].t->data, (int)(round * N + i + 1), 512);
			atomic_store(&a[i].calls, 0);
			areq_submit(b, &a[i], DIOLOOP_WRITE, 8192 + i * 512);
		}
		areq_wait_all();
		ck_assert_msg(cow_test_read(b, back, 4096, 8192, NULL) == 4096,
			      "read the block");
		for (i = 0; i < N; i++) {
			ck_assert_msg(a[i].res == 512, "write %u succeeded", i);
			ck_assert_msg(back[i * 512] == (unsigned char)(round * N + i + 1) &&
				      back[i * 512 + 511] == (unsigned char)(round * N + i + 1),
				      "round %u: sector %u holds its own write", round, i);
			cow_tbuf_free(a[i].t);
		}
	}
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- copy-on-write placement and persistence ---- */

START_TEST(test_cow_overwrite_goes_to_a_new_block)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char data[4096], back[4096];
	uint64_t p1, p2, c1, c2;

	memset(data, 1, sizeof(data));
	cow_test_write(b, data, 4096, 40960, NULL);
	ck_assert_msg(cow_map_block(b, 10, &p1, &c1) == 0 && p1 != 0,
		      "block 10 is mapped after the write");
	ck_assert_msg(c1 == cow_csum_block(COW_CSUM_CRC32C, data),
		      "its checksum is crc32c of the data written");
	memset(data, 2, sizeof(data));
	cow_test_write(b, data, 4096, 40960, NULL);
	ck_assert_msg(cow_map_block(b, 10, &p2, &c2) == 0 && p2 != 0 &&
		      p2 != p1,
		      "an overwrite goes to a new block (%llu, then %llu)",
		      (unsigned long long)p1, (unsigned long long)p2);
	ck_assert_msg(cow_test_read(b, back, 4096, 40960, NULL) == 4096 &&
		      back[0] == 2 && back[4095] == 2,
		      "the overwrite is what reads back");
	backend_close(b);
	g_free(path);
}
END_TEST

START_TEST(test_cow_flushed_data_survives_reopen)
{
	char *path = cow_test_image(32 * MiB, COW_CSUM_XXHASH64);
	struct backend *b = cow_test_open(path, 0);
	size_t len = 3 * MiB + 1234;
	unsigned char *data = g_malloc(len), *back = g_malloc(len);
	struct test_rng rng;
	struct cow_stats st;
	int round;

	test_rng_init(&rng, 20);
	for (round = 0; round < 3; round++) {
		uint64_t pos = (uint64_t)round * 7 * MiB + 333;
		uint64_t gen = cow_test_stats(b).generation;

		test_rng_fill(&rng, data, len);
		cow_test_write(b, data, len, pos, &rng);
		ck_assert_msg(backend_flush(b) == 0, "flush %d", round);
		st = cow_test_stats(b);
		ck_assert_msg(st.generation == gen + 1,
			      "a flush commits one generation (%llu -> %llu)",
			      (unsigned long long)gen,
			      (unsigned long long)st.generation);
		backend_close(b);
		b = cow_test_open(path, BACKEND_OPEN_RDONLY);
		ck_assert_msg(cow_test_stats(b).generation == gen + 1,
			      "a read-only open commits nothing");
		backend_close(b);
		b = cow_test_open(path, 0);
		ck_assert_msg(cow_test_stats(b).generation == gen + 2,
			      "a read-write open commits once");
		ck_assert_msg(cow_test_read(b, back, len, pos, &rng) ==
			      (ssize_t)len && memcmp(back, data, len) == 0,
			      "round %d: the flushed data reads back after reopen",
			      round);
	}
	{
		uint64_t gen = cow_test_stats(b).generation;

		ck_assert_msg(backend_flush(b) == 0 &&
			      cow_test_stats(b).generation == gen,
			      "a flush with nothing changed commits nothing");
	}
	backend_close(b);
	g_free(data);
	g_free(back);
	g_free(path);
}
END_TEST

START_TEST(test_cow_periodic_commit_without_flush)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char data[4096];
	uint64_t gen = cow_test_stats(b).generation;
	int waited;

	memset(data, 3, sizeof(data));
	cow_set_commit_interval(b, 50);
	cow_test_write(b, data, 4096, 0, NULL);
	for (waited = 0; waited < 10000 &&
	     cow_test_stats(b).generation == gen; waited += 10)
		usleep(10000);
	ck_assert_msg(cow_test_stats(b).generation == gen + 1,
		      "with a 50 ms interval the write was committed without a flush (generation %llu -> %llu)",
		      (unsigned long long)gen,
		      (unsigned long long)cow_test_stats(b).generation);
	usleep(200000);
	ck_assert_msg(cow_test_stats(b).generation == gen + 1,
		      "nothing changed since: no more commits");
	backend_close(b);
	g_free(path);
}
END_TEST

START_TEST(test_cow_large_transaction_commits_early)
{
	char *path = cow_test_image(128 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *data = g_malloc0(MiB);
	uint64_t gen = cow_test_stats(b).generation;
	int i, waited;

	/* An hour: only the size of the transaction can trigger it. */
	cow_set_commit_interval(b, 3600 * 1000);
	for (i = 0; i < 80; i++)
		cow_test_write(b, data, MiB, (uint64_t)i * MiB, NULL);
	for (waited = 0; waited < 10000 &&
	     cow_test_stats(b).generation == gen; waited += 10)
		usleep(10000);
	ck_assert_msg(cow_test_stats(b).generation > gen,
		      "80 MiB of changes committed without flush or timer (generation %llu)",
		      (unsigned long long)cow_test_stats(b).generation);
	backend_close(b);
	g_free(data);
	g_free(path);
}
END_TEST

START_TEST(test_cow_interval_zero_commits_only_on_flush)
{
	char *path = cow_test_image(128 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);	/* interval 0 */
	unsigned char *data = g_malloc0(MiB);
	uint64_t gen = cow_test_stats(b).generation;
	int i;

	for (i = 0; i < 80; i++)
		cow_test_write(b, data, MiB, (uint64_t)i * MiB, NULL);
	usleep(300000);
	ck_assert_msg(cow_test_stats(b).generation == gen,
		      "with interval 0 nothing commits by itself");
	ck_assert_msg(backend_flush(b) == 0 &&
		      cow_test_stats(b).generation == gen + 1,
		      "flush commits");
	backend_close(b);
	g_free(data);
	g_free(path);
}
END_TEST

/* At the hook point, the container's descriptor becomes /dev/full: the
 * superblock write fails with ENOSPC. */
static int fail_fd = -1;

static void fail_commit_hook(enum cow_test_point point)
{
	if (point == COW_TEST_META_DURABLE && fail_fd >= 0) {
		int full = open("/dev/full", O_WRONLY);

		ck_assert_msg(full >= 0, "open /dev/full");
		dup2(full, fail_fd);
		close(full);
		fail_fd = -1;
	}
}

/* The descriptor of this process open read-write on path, or -1. */
static int writable_fd_of(const char *path)
{
	g_autofree char *want = realpath(path, NULL);
	GDir *dir = g_dir_open("/proc/self/fd", 0, NULL);
	const char *name;
	int found = -1;

	while (dir && want && (name = g_dir_read_name(dir))) {
		g_autofree char *link = g_strdup_printf("/proc/self/fd/%s", name);
		g_autofree char *info = g_strdup_printf("/proc/self/fdinfo/%s",
							name);
		g_autofree char *target = g_file_read_link(link, NULL);
		g_autofree char *text = NULL;
		const char *flags;

		if (!target || strcmp(target, want) ||
		    !g_file_get_contents(info, &text, NULL, NULL))
			continue;
		flags = strstr(text, "flags:");
		if (flags && (strtoul(flags + 6, NULL, 8) & O_ACCMODE) == O_RDWR)
			found = atoi(name);
	}
	if (dir)
		g_dir_close(dir);
	return found;
}

START_TEST(test_cow_failed_commit_stops_writes_and_keeps_last_generation)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char a[4096], c[4096], back[4096];
	uint64_t gen;

	memset(a, 0xa, sizeof(a));
	cow_test_write(b, a, 4096, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush a");
	gen = cow_test_stats(b).generation;
	memset(c, 0xc, sizeof(c));
	cow_test_write(b, c, 4096, 0, NULL);
	/* White box: the store's descriptor (the one open for writing). */
	fail_fd = writable_fd_of(path);
	ck_assert_msg(fail_fd >= 0, "found the store's descriptor");
	cow_test_hook = fail_commit_hook;
	ck_assert_msg(backend_flush(b) == -EIO,
		      "a commit whose superblock write fails reports -EIO");
	cow_test_hook = NULL;
	ck_assert_msg(cow_test_stats(b).failed,
		      "the image is marked failed");
	{
		struct cow_tbuf *t = cow_tbuf_new(4096, 0, NULL);

		ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, 8192) == -EIO,
			      "writes after a failed commit: -EIO");
		cow_tbuf_free(t);
	}
	ck_assert_msg(backend_flush(b) == -EIO, "flushes too");
	backend_close(b);
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	ck_assert_msg(cow_test_stats(b).generation == gen,
		      "reopened at the last durable generation %llu (got %llu)",
		      (unsigned long long)gen,
		      (unsigned long long)cow_test_stats(b).generation);
	ck_assert_msg(cow_test_read(b, back, 4096, 0, NULL) == 4096 &&
		      back[0] == 0xa, "with its data");
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- discard, write_zeroes, map ---- */

START_TEST(test_cow_discard_makes_holes_and_frees_blocks)
{
	char *path = cow_test_image(16 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *data = g_malloc(4 * MiB), *back = g_malloc(4 * MiB);
	struct cow_stats before, after;
	uint64_t pbn, csum;
	struct test_rng rng;

	test_rng_init(&rng, 30);
	test_rng_fill(&rng, data, 4 * MiB);
	cow_test_write(b, data, 4 * MiB, 2 * MiB, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	before = cow_test_stats(b);
	ck_assert_msg(before.mapped_blocks == 1024,
		      "4 MiB written: 1024 blocks mapped (got %llu)",
		      (unsigned long long)before.mapped_blocks);
	/* Discard 1 MiB + 1000 bytes into the middle, unaligned ends. */
	ck_assert_msg(backend_discard(b, 3 * MiB + 100, MiB + 1000) == 0,
		      "discard");
	memset(data + MiB + 100, 0, MiB + 1000);
	ck_assert_msg(cow_test_read(b, back, 4 * MiB, 2 * MiB, NULL) ==
		      (ssize_t)(4 * MiB) && memcmp(back, data, 4 * MiB) == 0,
		      "the discarded range reads as zeros, the rest intact");
	ck_assert_msg(cow_map_block(b, (3 * MiB + 4096) / 4096, &pbn, &csum) ==
		      0 && pbn == 0 && csum == 0,
		      "a whole discarded block is a hole");
	ck_assert_msg(backend_flush(b) == 0, "flush after discard");
	after = cow_test_stats(b);
	ck_assert_msg(after.mapped_blocks == 1024 - 255 + 0,
		      "255 whole blocks became holes (mapped %llu)",
		      (unsigned long long)after.mapped_blocks);
	ck_assert_msg(after.used_blocks < before.used_blocks - 200,
		      "the container uses fewer blocks after discard (%llu -> %llu)",
		      (unsigned long long)before.used_blocks,
		      (unsigned long long)after.used_blocks);
	backend_close(b);
	b = cow_test_open(path, 0);
	ck_assert_msg(cow_test_read(b, back, 4 * MiB, 2 * MiB, NULL) ==
		      (ssize_t)(4 * MiB) && memcmp(back, data, 4 * MiB) == 0,
		      "after reopen too");
	backend_close(b);
	g_free(data);
	g_free(back);
	g_free(path);
}
END_TEST

START_TEST(test_cow_write_zeroes_stores_holes_and_map_reports_them)
{
	char *path = cow_test_image(8 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *data = g_malloc(MiB), *back = g_malloc(MiB);
	struct backend_extent ext;

	memset(data, 0xab, MiB);
	cow_test_write(b, data, MiB, MiB, NULL);
	ck_assert_msg(backend_write_zeroes(b, MiB + 64 * KiB, 128 * KiB) == 0,
		      "write_zeroes");
	ck_assert_msg(cow_test_read(b, back, MiB, MiB, NULL) == (ssize_t)MiB,
		      "read");
	ck_assert_msg(cow_test_is_zero(back + 64 * KiB, 128 * KiB) &&
		      back[64 * KiB - 1] == 0xab && back[192 * KiB] == 0xab,
		      "exactly the zeroed range reads as zeros");
	ck_assert_msg(cow_test_stats(b).mapped_blocks == 256 - 32,
		      "the zeroed blocks store nothing");
	ck_assert_msg(backend_map(b, 0, 8 * MiB, &ext) == 0 && ext.hole &&
		      ext.len == MiB,
		      "map: a hole up to 1 MiB (len %llu)",
		      (unsigned long long)ext.len);
	ck_assert_msg(backend_map(b, MiB, 8 * MiB, &ext) == 0 && !ext.hole &&
		      ext.len == 64 * KiB, "map: 64 KiB of data");
	ck_assert_msg(backend_map(b, MiB + 64 * KiB, 8 * MiB, &ext) == 0 &&
		      ext.hole && ext.len == 128 * KiB,
		      "map: the zeroed 128 KiB are a hole");
	ck_assert_msg(backend_map(b, MiB + 192 * KiB, 8 * MiB, &ext) == 0 &&
		      !ext.hole && ext.len == MiB - 192 * KiB,
		      "map: data to the end of the write");
	ck_assert_msg(backend_map(b, 2 * MiB, 8 * MiB, &ext) == 0 &&
		      ext.hole && ext.len == 6 * MiB,
		      "map: a hole to the end of the image");
	ck_assert_msg(backend_map(b, MiB + 100, 50, &ext) == 0 && !ext.hole &&
		      ext.len == 50, "map: clipped to len");
	backend_close(b);
	g_free(data);
	g_free(back);
	g_free(path);
}
END_TEST

START_TEST(test_cow_growable_write_extends_and_resize)
{
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, BACKEND_OPEN_GROWABLE);
	unsigned char data[8192], back[8192];

	memset(data, 7, sizeof(data));
	cow_test_write(b, data, 8192, 300 * MiB + 10, NULL);
	ck_assert_msg(backend_get_size(b) == (int64_t)(300 * MiB + 12288),
		      "a growable volume grows to the block after the write (got %lld)",
		      (long long)backend_get_size(b));
	ck_assert_msg(backend_flush(b) == 0, "flush");
	backend_close(b);
	b = cow_test_open(path, 0);
	ck_assert_msg(backend_get_size(b) == (int64_t)(300 * MiB + 12288),
		      "the new size is committed");
	ck_assert_msg(cow_test_read(b, back, 8192, 300 * MiB + 10, NULL) ==
		      8192 && memcmp(back, data, 8192) == 0,
		      "the data past the old end reads back");
	ck_assert_msg(backend_resize(b, 300 * MiB + 4096) == 0,
		      "shrink to cut the write in half");
	ck_assert_msg(backend_resize(b, 300 * MiB + 12288) == 0,
		      "grow again");
	ck_assert_msg(cow_test_read(b, back, 8192, 300 * MiB + 10, NULL) ==
		      8192, "read");
	ck_assert_msg(memcmp(back, data, 4086) == 0 &&
		      cow_test_is_zero(back + 4086, 8192 - 4086),
		      "what the shrink cut off reads as zeros after growing back");
	ck_assert_msg(backend_resize(b, 1000) == -EINVAL,
		      "sizes must be block multiples");
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- corruption ---- */

START_TEST(test_cow_corrupt_data_block_reads_eio_and_is_counted)
{
	char *path = cow_test_image(4 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char *data = g_malloc(64 * KiB), *back = g_malloc(64 * KiB);
	uint64_t pbn, csum;
	struct cow_stats st;

	memset(data, 0x3c, 64 * KiB);
	cow_test_write(b, data, 64 * KiB, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	ck_assert_msg(cow_map_block(b, 5, &pbn, &csum) == 0 && pbn,
		      "block 5 is mapped");
	cow_test_file_xor(path, pbn * 4096 + 100, 0x01);
	ck_assert_msg(cow_test_read(b, back, 64 * KiB, 0, NULL) == -EIO,
		      "a read covering the corrupt block fails with -EIO");
	ck_assert_msg(cow_test_read(b, back, 4096, 5 * 4096 + 10, NULL) ==
		      -EIO,
		      "an unaligned read inside it too (through the bounce)");
	ck_assert_msg(cow_test_read(b, back, 5 * 4096, 0, NULL) ==
		      5 * 4096 && memcmp(back, data, 5 * 4096) == 0,
		      "the blocks before it read fine");
	ck_assert_msg(cow_test_read(b, back, 10 * 4096, 6 * 4096, NULL) ==
		      10 * 4096 && memcmp(back, data, 10 * 4096) == 0,
		      "the blocks after it read fine");
	st = cow_test_stats(b);
	ck_assert_msg(st.csum_errors == 2,
		      "two failed reads of the block were counted (got %llu)",
		      (unsigned long long)st.csum_errors);
	{
		/* A partial write over it cannot merge with garbage. */
		struct cow_tbuf *t = cow_tbuf_new(100, 0, NULL);

		ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, 5 * 4096 + 7) ==
			      -EIO,
			      "a read-modify-write of a corrupt block fails");
		cow_tbuf_free(t);
	}
	/* A full overwrite replaces it. */
	cow_test_write(b, data, 4096, 5 * 4096, NULL);
	ck_assert_msg(cow_test_read(b, back, 64 * KiB, 0, NULL) ==
		      (ssize_t)(64 * KiB) && memcmp(back, data, 64 * KiB) == 0,
		      "after a whole-block overwrite everything reads");
	backend_close(b);
	g_free(data);
	g_free(back);
	g_free(path);
}
END_TEST

/* Offset of the map page (the volume's map root) on disk: found as the
 * parent of a data block is not exported, so search the file for it. */
static uint64_t find_map_page(const char *path)
{
	uint64_t size = cow_test_file_size(path), off;
	int fd = open(path, O_RDONLY);
	unsigned char page[4096];

	ck_assert_msg(fd >= 0, "open");
	/* The newest map leaf: search from the end. */
	for (off = size - 4096; off >= 2 * 4096; off -= 4096) {
		ck_assert_msg(pread(fd, page, 4096, (off_t)off) == 4096,
			      "pread");
		if (!memcmp(page, "DLMP", 4) && page[4] == COW_TREE_MAP &&
		    page[5] == 0)
			break;
	}
	close(fd);
	ck_assert_msg(off >= 2 * 4096, "a map leaf exists in the file");
	return off;
}

START_TEST(test_cow_corrupt_metadata_page_is_an_error_not_a_crash)
{
	/* 512 KiB: 128 blocks, a map of height 1 whose root is its leaf. */
	char *path = cow_test_image(512 * KiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char data[8192];
	uint64_t off;

	memset(data, 9, sizeof(data));
	cow_test_write(b, data, 8192, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	backend_close(b);
	off = find_map_page(path);
	cow_test_file_xor(path, off + 2000, 0x80);
	/* The map root is read at open: the open fails with a reason. */
	ck_assert_msg(cow_test_try_open(path, 0, &b) == -EUCLEAN,
		      "an image whose map root is corrupt does not open");
	g_free(path);
}
END_TEST

START_TEST(test_cow_corrupt_map_leaf_fails_reads_there_only)
{
	char *path = cow_test_image(64 * MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char data[4096], back[4096];
	uint64_t off;

	memset(data, 9, sizeof(data));
	cow_test_write(b, data, 4096, 0, NULL);
	cow_test_write(b, data, 4096, 40 * MiB, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush");
	backend_close(b);
	off = find_map_page(path);	/* one of the two leaves */
	cow_test_file_xor(path, off + 100, 0x80);
	b = cow_test_open(path, 0);
	{
		ssize_t r0 = cow_test_read(b, back, 4096, 0, NULL);
		ssize_t r1 = cow_test_read(b, back, 4096, 40 * MiB, NULL);

		ck_assert_msg((r0 == -EIO) != (r1 == -EIO),
			      "exactly one of the two leaves fails (%zd, %zd)",
			      r0, r1);
		ck_assert_msg(r0 == 4096 || r1 == 4096,
			      "the other reads fine");
	}
	ck_assert_msg(cow_test_stats(b).meta_errors >= 1,
		      "the bad page is counted");
	backend_close(b);
	g_free(path);
}
END_TEST

START_TEST(test_cow_open_errors_are_clear)
{
	char *path = cow_test_image(MiB, 0);
	char *dir = g_path_get_dirname(path);
	char *other = g_build_filename(dir, "plain", NULL);
	struct backend *b;
	int fd;

	fd = open(other, O_RDWR | O_CREAT, 0600);
	ck_assert_msg(fd >= 0 && ftruncate(fd, MiB) == 0, "plain file");
	close(fd);
	ck_assert_msg(!cow_is_image(other) && cow_is_image(path),
		      "cow_is_image tells a cow image from a plain file");
	ck_assert_msg(cow_test_try_open(other, 0, &b) == -EINVAL,
		      "a plain file is not a cow image: -EINVAL");
	ck_assert_msg(cow_test_try_open(dir, 0, &b) < 0,
		      "a directory does not open");
	/* Truncated: the superblock says 4 blocks, the file has 3. */
	ck_assert_msg(truncate(path, 3 * 4096) == 0, "truncate");
	ck_assert_msg(cow_test_try_open(path, 0, &b) == -EUCLEAN,
		      "a truncated image is refused with -EUCLEAN");
	ck_assert_msg(truncate(path, 4096 + 10) == 0, "truncate more");
	ck_assert_msg(cow_test_try_open(path, 0, &b) == -EUCLEAN,
		      "an image cut inside its superblocks is refused");
	g_free(other);
	g_free(dir);
	g_free(path);
}
END_TEST

START_TEST(test_cow_corrupt_superblock_falls_back_to_the_other_copy)
{
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, 0);
	unsigned char a[4096], c[4096], back[4096];
	uint64_t gen_a, gen_c;

	memset(a, 0xa, sizeof(a));
	cow_test_write(b, a, 4096, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush: a is committed");
	gen_a = cow_test_stats(b).generation;
	memset(c, 0xc, sizeof(c));
	cow_test_write(b, c, 4096, 0, NULL);
	ck_assert_msg(backend_flush(b) == 0, "flush: c replaces a");
	gen_c = cow_test_stats(b).generation;
	ck_assert_msg(gen_c == gen_a + 1, "one generation apart");
	backend_close(b);
	/* Break the newest copy. */
	cow_test_file_xor(path, (gen_c % 2) * 4096 + 200, 0x40);
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	ck_assert_msg(cow_test_stats(b).generation == gen_a,
		      "the image opens at generation %llu from the other copy (got %llu)",
		      (unsigned long long)gen_a,
		      (unsigned long long)cow_test_stats(b).generation);
	ck_assert_msg(cow_test_read(b, back, 4096, 0, NULL) == 4096 &&
		      back[0] == 0xa && back[4095] == 0xa,
		      "that generation's data is intact (the reuse rule kept it)");
	backend_close(b);
	/* A writable open goes on from there and overwrites the bad copy. */
	b = cow_test_open(path, 0);
	ck_assert_msg(cow_test_stats(b).generation == gen_a + 1,
		      "a writable open commits generation %llu over the bad copy",
		      (unsigned long long)gen_a + 1);
	ck_assert_msg(cow_test_read(b, back, 4096, 0, NULL) == 4096 &&
		      back[0] == 0xa, "and reads generation %llu's data",
		      (unsigned long long)gen_a);
	backend_close(b);
	/* Both copies bad: a clear refusal. */
	cow_test_file_xor(path, 0 * 4096 + 300, 0x40);
	cow_test_file_xor(path, 1 * 4096 + 300, 0x40);
	ck_assert_msg(cow_test_try_open(path, 0, &b) == -EUCLEAN,
		      "both superblocks bad: -EUCLEAN");
	g_free(path);
}
END_TEST

START_TEST(test_cow_rdonly_open_refuses_writes)
{
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	unsigned char buf[4096] = { 1 };
	struct cow_tbuf *t = cow_tbuf_new(4096, 0, NULL);

	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, 0) == -EROFS,
		      "writes to a read-only image: -EROFS");
	ck_assert_msg(backend_discard(b, 0, 4096) == -EROFS,
		      "discard too");
	ck_assert_msg(backend_flush(b) == 0, "flush is a no-op");
	ck_assert_msg(cow_test_read(b, buf, 4096, 0, NULL) == 4096 &&
		      cow_test_is_zero(buf, 4096), "reads work");
	cow_tbuf_free(t);
	backend_close(b);
	g_free(path);
}
END_TEST

/* ---- sizes ---- */

#define OFF_MAX ((uint64_t)INT64_MAX)

/* A write of t at pos straight to cow's op, past the core's checks. */
static ssize_t cow_op_write(struct backend *b, struct cow_tbuf *t,
			    uint64_t pos)
{
	struct kiocb iocb = { .ki_rw = DIOLOOP_WRITE, .ki_pos = pos,
			      .ki_iter = cow_tbuf_iter(t) };

	return b->ops->direct_IO_bvec(b, &iocb);
}

START_TEST(test_cow_growable_volume_never_grows_past_its_largest_size)
{
	const uint64_t max = OFF_MAX & ~(uint64_t)(COW_BLOCK_SIZE - 1);
	char *path = cow_test_image(MiB, 0);
	struct backend *b = cow_test_open(path, BACKEND_OPEN_GROWABLE);
	struct cow_tbuf *t = cow_tbuf_new(4096, 0, NULL), *one;
	unsigned char back[4096];
	struct backend_info info;

	one = cow_tbuf_new(1, 0, NULL);
	ck_assert_msg(b->limits.max_size == max,
		      "max_size: INT64_MAX rounded down to 4096 (got %llu)",
		      (unsigned long long)b->limits.max_size);
	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, OFF_MAX - 4096) ==
		      -EFBIG, "write ending at INT64_MAX: -EFBIG");
	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, one, OFF_MAX - 1) ==
		      -EFBIG, "1 byte at INT64_MAX - 1: -EFBIG");
	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, one, OFF_MAX - 2) ==
		      -EFBIG, "1 byte ending at INT64_MAX - 1: -EFBIG");
	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, OFF_MAX - 1) == -EFBIG,
		      "write across 2^63: -EFBIG");
	ck_assert_msg(backend_resize(b, OFF_MAX) == -EFBIG,
		      "resize to INT64_MAX: -EFBIG");
	ck_assert_msg(backend_resize(b, max + 4096) == -EINVAL,
		      "resize to 2^63: -EINVAL");
	/* Defence in depth: the op itself, without the core's checks. */
	ck_assert_msg(cow_op_write(b, t, OFF_MAX - 4096) == -EFBIG,
		      "cow's write op, ending at INT64_MAX: -EFBIG");
	ck_assert_msg(b->ops->resize(b, max + 4096) == -EFBIG,
		      "cow's resize op, to 2^63: -EFBIG");
	ck_assert_msg(backend_get_size(b) == (int64_t)MiB,
		      "the size is unchanged (got %lld)",
		      (long long)backend_get_size(b));

	/* The largest size itself is fine, and opens again. */
	memset(t->data, 0x3c, 4096);
	ck_assert_msg(cow_test_rw(b, DIOLOOP_WRITE, t, max - 4096) == 4096,
		      "write ending at the largest size");
	ck_assert_msg(backend_get_size(b) == (int64_t)max, "size is max");
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);
	b = cow_test_open(path, 0);
	ck_assert_int_eq(backend_info(b, &info), 0);
	ck_assert_msg(info.size == max, "reopened: size %llu (got %llu)",
		      (unsigned long long)max, (unsigned long long)info.size);
	ck_assert_msg(cow_test_read(b, back, 4096, max - 4096, NULL) == 4096 &&
		      memcmp(back, t->data, 4096) == 0,
		      "reopened: the last block reads back");
	cow_tbuf_free(t);
	cow_tbuf_free(one);
	backend_close(b);
	g_free(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_io");
	TCase *rw = tcase_create("rw");
	TCase *persist = tcase_create("persist");
	TCase *ops = tcase_create("ops");
	TCase *corrupt = tcase_create("corrupt");

	tcase_set_timeout(rw, 300);
	tcase_add_test(rw, test_cow_is_registered);
	tcase_add_test(rw, test_cow_rw_aligned_round_trip);
	tcase_add_test(rw, test_cow_rw_unaligned_round_trip);
	tcase_add_test(rw, test_cow_rw_xxhash64_round_trip);
	tcase_add_test(rw, test_cow_new_image_reads_zeros_and_stores_nothing);
	tcase_add_test(rw, test_cow_eof_rules);
	tcase_add_test(rw, test_cow_many_async_requests_in_flight);
	tcase_add_test(rw, test_cow_concurrent_partial_writes_to_one_block_all_survive);
	tcase_add_test(rw, test_cow_rdonly_open_refuses_writes);
	suite_add_tcase(s, rw);

	tcase_set_timeout(persist, 300);
	tcase_add_test(persist, test_cow_overwrite_goes_to_a_new_block);
	tcase_add_test(persist, test_cow_flushed_data_survives_reopen);
	tcase_add_test(persist, test_cow_periodic_commit_without_flush);
	tcase_add_test(persist, test_cow_large_transaction_commits_early);
	tcase_add_test(persist, test_cow_interval_zero_commits_only_on_flush);
	tcase_add_test(persist, test_cow_failed_commit_stops_writes_and_keeps_last_generation);
	suite_add_tcase(s, persist);

	tcase_set_timeout(ops, 300);
	tcase_add_test(ops, test_cow_discard_makes_holes_and_frees_blocks);
	tcase_add_test(ops, test_cow_write_zeroes_stores_holes_and_map_reports_them);
	tcase_add_test(ops, test_cow_growable_write_extends_and_resize);
	tcase_add_test(ops, test_cow_growable_volume_never_grows_past_its_largest_size);
	suite_add_tcase(s, ops);

	tcase_set_timeout(corrupt, 300);
	tcase_add_test(corrupt, test_cow_corrupt_data_block_reads_eio_and_is_counted);
	tcase_add_test(corrupt, test_cow_corrupt_metadata_page_is_an_error_not_a_crash);
	tcase_add_test(corrupt, test_cow_corrupt_map_leaf_fails_reads_there_only);
	tcase_add_test(corrupt, test_cow_open_errors_are_clear);
	tcase_add_test(corrupt, test_cow_corrupt_superblock_falls_back_to_the_other_copy);
	suite_add_tcase(s, corrupt);

	return test_run_suite(s);
}
