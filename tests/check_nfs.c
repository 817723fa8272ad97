/* SPDX-License-Identifier: MIT */
/*
 * The nfs backend.  Without a server: URL checking (one error line each,
 * -EINVAL, no network).  With one (tests/integration/test-nfs-backend.sh
 * starts nfs-ganesha and sets the environment):
 *
 *   DIOLOOP_NFS_URL     nfs://127.0.0.1:PORT/DIR, an exported directory
 *   DIOLOOP_NFS_EXPORT  that directory on this machine: every check reads
 *                       the image file straight from it
 *   DIOLOOP_NFS_PORT    the NFS port
 *   DIOLOOP_NFS_CTL     a command + " restart|stop|start" that controls
 *                       the server
 *
 * data round trips (random, unaligned, many asynchronous requests in
 * flight, holes, EOF), sync writes, resize/info/discard, a server restart
 * in the middle of a write load (the verifier path: resends counted),
 * a server stopped longer than the timeout (EIO, no hang, close returns)
 * and the errors of a missing file, export or server.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/nfs/nfs.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* ---- log lines ---- */

static int warnings;

static void count_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer unused)
{
	if (level & G_LOG_LEVEL_WARNING)
		warnings++;
	fprintf(stderr, "log: %s\n", msg);
}

static void log_setup(void)
{
	warnings = 0;
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  count_log, NULL);
}

/* ---- the server ---- */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set", name);
	return v;
}

/* nfs://.../DIR/name */
static char *image_url(const char *name, const char *opts)
{
	return g_strdup_printf("%s/%s%s%s", env("DIOLOOP_NFS_URL"), name,
			       opts ? "?" : "", opts ? opts : "");
}

static char *export_path(const char *name)
{
	return g_build_filename(env("DIOLOOP_NFS_EXPORT"), name, NULL);
}

static void server_ctl(const char *what)
{
	g_autofree char *cmd = g_strdup_printf("%s %s", env("DIOLOOP_NFS_CTL"),
					       what);

	ck_assert_msg(system(cmd) == 0, "server %s failed", what);
}

static void server_setup(void)
{
	log_setup();
	server_ctl("start");	/* in case an earlier test left it stopped */
}

static void server_done(const char *name)
{
	printf("server test %s: ok\n", name);
	fflush(stdout);
}

/* A fresh image on the server (removed first), opened. */
static struct backend *make_open(const char *name, uint64_t size,
				 const char *opts, unsigned int flags)
{
	g_autofree char *path = export_path(name);
	g_autofree char *url = image_url(name, opts);
	struct backend_open_args a = { .path = url, .flags = flags };
	struct backend *b;
	int ret;

	unlink(path);
	ret = nfs_image_create(url, size, true);
	ck_assert_msg(ret == 0, "nfs_image_create %s: %s", url, g_strerror(-ret));
	ret = backend_open("nfs", &a, &b);
	ck_assert_msg(ret == 0, "open %s: %s", url, g_strerror(-ret));
	return b;
}

/* The image file as the server stores it. */
static char *disk_read(const char *name, size_t *len)
{
	g_autofree char *path = export_path(name);
	gchar *data;
	gsize n;

	ck_assert_msg(g_file_get_contents(path, &data, &n, NULL),
		      "read %s from the export", path);
	*len = n;
	return data;
}

static void expect_disk_equals(const char *name, const char *model,
			       size_t size)
{
	size_t n, i;
	g_autofree char *disk = disk_read(name, &n);

	ck_assert_msg(n == size, "%s on the server: expected %zu bytes, got %zu",
		      name, size, n);
	if (memcmp(disk, model, size)) {
		for (i = 0; i < size && disk[i] == model[i]; i++)
			;
		ck_abort_msg("%s on the server differs from what was written, first at byte %zu",
			     name, i);
	}
}

/* ---- asynchronous requests ---- */

struct aio_op {
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec *bvec;
	char *buf;		/* page-aligned, bvec over [off, off + len) */
	size_t len;
	ssize_t res;
	atomic_bool done;
};

static void aio_done(struct kiocb *iocb, ssize_t res)
{
	struct aio_op *op = iocb->ki_private;

	op->res = res;
	atomic_store(&op->done, true);
}

/* A request over len bytes at pos, memory starting mem_off into its first
 * page (unaligned on purpose), in bio_vecs of at most one page. */
static void aio_prep(struct aio_op *op, int rw, uint64_t pos, size_t len,
		     size_t mem_off, bool async)
{
	size_t i = 0, done = 0, pages = (mem_off + len + 4095) / 4096;

	memset(op, 0, sizeof(*op));
	op->buf = aligned_alloc(4096, pages * 4096);
	op->bvec = g_new(struct bio_vec, pages);
	op->len = len;
	while (done < len) {
		size_t off = i == 0 ? mem_off : 0;
		size_t n = MIN(4096 - off, len - done);

		op->bvec[i] = (struct bio_vec){ op->buf + i * 4096, (unsigned)n,
						(unsigned)off };
		i++;
		done += n;
	}
	iov_iter_init_bvec(&op->iter, op->bvec, i, len, 0);
	op->iocb = (struct kiocb){ .ki_rw = rw, .ki_pos = pos,
				   .ki_iter = &op->iter,
				   .ki_complete = async ? aio_done : NULL,
				   .ki_private = op };
}

static void aio_fill(struct aio_op *op, const char *src)
{
	struct iov_iter it = op->iter;

	iov_iter_copy_from_buf(&it, src, op->len);
}

static void aio_copy_out(struct aio_op *op, char *dst, size_t n)
{
	struct iov_iter it = op->iter;

	iov_iter_copy_to_buf(dst, &it, n);
}

static void aio_free(struct aio_op *op)
{
	free(op->buf);
	g_free(op->bvec);
}

/* Submit; the result once complete (waits for asynchronous ones). */
static ssize_t aio_submit(struct backend *b, struct aio_op *op)
{
	ssize_t r = backend_direct_IO_bvec(b, &op->iocb);

	if (r != -EIOCBQUEUED) {
		op->res = r;
		atomic_store(&op->done, true);
	}
	return r;
}

static ssize_t aio_wait(struct aio_op *op, int seconds)
{
	int64_t end = g_get_monotonic_time() + (int64_t)seconds * G_USEC_PER_SEC;

	while (!atomic_load(&op->done)) {
		ck_assert_msg(g_get_monotonic_time() < end,
			      "request did not complete within %d s", seconds);
		g_usleep(1000);
	}
	return op->res;
}

/* ---- tests without a server ---- */

START_TEST(test_nfs_url_bad)
{
	static const char *const bad[] = {
		"nfs:/x/y/z.img",
		"nfs://",
		"nfs://host",
		"nfs://host/",
		"nfs://host/file.img",
		"nfs://host/dir/",
		"nfs://host:0/dir/f.img",
		"nfs://host:x/dir/f.img",
		"nfs://host:70000/dir/f.img",
		"nfs://host/dir/f.img?version=4",
		"nfs://host/dir/f.img?version=2",
		"nfs://host/dir/f.img?bogus=1",
		"nfs://host/dir/f.img?timeout=0",
		"nfs://host/dir/f.img?timeout=abc",
		"nfs://host/dir/f.img?sync=2",
		"nfs://host/dir/f.img?uid=abc",
		"nfs://host/dir/f.img?timeout=5&timeout=6",
		"nfs://host:2049/dir/f.img?nfsport=2049",
		"nfs://[::1]/dir/f.img",
		"nfs://host/dir/../f.img",
		"nfs://host//f.img",
		"nfs://host/dir/f.img?noequals",
	};
	size_t i;

	log_setup();
	for (i = 0; i < G_N_ELEMENTS(bad); i++) {
		struct backend_open_args a = { .path = bad[i] };
		struct backend *b = NULL;
		int before = warnings, ret;

		ret = backend_open("nfs", &a, &b);
		ck_assert_msg(ret == -EINVAL, "open %s: expected -EINVAL, got %d",
			      bad[i], ret);
		ck_assert_msg(warnings == before + 1,
			      "open %s: expected one log line, got %d", bad[i],
			      warnings - before);
		ret = nfs_image_create(bad[i], 4096, true);
		ck_assert_msg(ret == -EINVAL, "create %s: expected -EINVAL, got %d",
			      bad[i], ret);
	}
	ck_assert_str_eq(backend_probe("nfs://h/d/f.img"), "nfs");
	ck_assert_msg(backend_lookup("nfs") != NULL, "nfs is registered");
}
END_TEST

START_TEST(test_nfs_url_dir_bad)
{
	GPtrArray *names = g_ptr_array_new_with_free_func(g_free);

	log_setup();
	ck_assert_int_eq(nfs_list_images("nfs://host", names), -EINVAL);
	ck_assert_int_eq(nfs_list_images("nfs://host/", names), -EINVAL);
	ck_assert_int_eq(nfs_list_images("http://host/dir", names), -EINVAL);
	ck_assert_int_eq(warnings, 3);
	ck_assert_uint_eq(names->len, 0);
	g_ptr_array_free(names, TRUE);
}
END_TEST

/* ---- tests with a server ---- */

/* Many asynchronous requests, random unaligned offsets/lengths/memory,
 * non-overlapping within a batch; the model is checked against the file
 * on the server and against reads through the backend. */
START_TEST(test_nfs_random_io)
{
	const size_t size = 48 * MiB, slots = 24, slot = size / slots;
	struct test_rng rng;
	struct backend *b;
	char *model = g_malloc0(size), *tmp = g_malloc(4 * MiB);
	struct aio_op *ops = g_new0(struct aio_op, slots);
	unsigned int round, rounds = test_iterations(12);
	size_t i;

	server_setup();
	test_rng_init(&rng, 1);
	b = make_open("random.img", size, NULL, 0);
	ck_assert_int_eq(b->limits.request_alignment, 1);
	for (round = 0; round < rounds; round++) {
		for (i = 0; i < slots; i++) {
			bool write = round < 2 || test_rng_range(&rng, 0, 2) != 0;
			size_t len = test_rng_range(&rng, 1, MIN(slot, 3 * MiB));
			uint64_t pos = i * slot + test_rng_range(&rng, 0, slot - len);

			aio_prep(&ops[i], write ? DIOLOOP_WRITE : DIOLOOP_READ, pos,
				 len, test_rng_range(&rng, 0, 4095), true);
			if (write) {
				test_rng_fill(&rng, model + pos, len);
				aio_fill(&ops[i], model + pos);
			}
			ck_assert_int_eq(aio_submit(b, &ops[i]), -EIOCBQUEUED);
		}
		for (i = 0; i < slots; i++) {
			ssize_t r = aio_wait(&ops[i], 60);

			ck_assert_msg(r == (ssize_t)ops[i].len,
				      "round %u op %zu: expected %zu, got %zd",
				      round, i, ops[i].len, r);
			if (ops[i].iocb.ki_rw == DIOLOOP_READ) {
				aio_copy_out(&ops[i], tmp, ops[i].len);
				ck_assert_msg(!memcmp(tmp, model + ops[i].iocb.ki_pos,
						      ops[i].len),
					      "round %u: read at %llu differs", round,
					      (unsigned long long)ops[i].iocb.ki_pos);
			}
			aio_free(&ops[i]);
		}
	}
	ck_assert_int_eq(backend_flush(b), 0);
	expect_disk_equals("random.img", model, size);
	/* Synchronous whole-image read through the backend too. */
	for (i = 0; i < size; i += 4 * MiB) {
		ck_assert_int_eq(backend_pread(b, tmp, 4 * MiB, i), (ssize_t)(4 * MiB));
		ck_assert_msg(!memcmp(tmp, model + i, 4 * MiB), "read at %zu differs", i);
	}
	backend_close(b);
	g_free(ops);
	g_free(model);
	g_free(tmp);
	server_done("random_io");
}
END_TEST

/* Holes read as zeros, data written on the server's disk is read back,
 * reads stop at EOF, writes past it fail whole unless growable. */
START_TEST(test_nfs_holes_eof)
{
	const size_t size = 8 * MiB + 123;
	g_autofree char *path = export_path("eof.img");
	char *buf = g_malloc(2 * MiB), *pat = g_malloc(MiB);
	struct backend *b;
	size_t i;
	int fd;

	server_setup();
	b = make_open("eof.img", size, NULL, 0);
	ck_assert_int_eq(backend_get_size(b), (int64_t)size);
	memset(buf, 0xaa, MiB);
	ck_assert_int_eq(backend_pread(b, buf, MiB, 3 * MiB + 7), (ssize_t)MiB);
	for (i = 0; i < MiB; i++)
		ck_assert_msg(buf[i] == 0, "hole byte %zu reads %d", i, buf[i]);
	/* Written behind the backend's back, straight on the server. */
	memset(pat, 0x5c, MiB);
	fd = open(path, O_WRONLY);
	ck_assert_msg(fd >= 0, "open %s", path);
	ck_assert_int_eq(pwrite(fd, pat, 1000, 5 * MiB + 1), 1000);
	close(fd);
	ck_assert_int_eq(backend_pread(b, buf, 1002, 5 * MiB), 1002);
	ck_assert_int_eq(buf[0], 0);
	ck_assert_int_eq(buf[1], 0x5c);
	ck_assert_int_eq(buf[1000], 0x5c);
	ck_assert_int_eq(buf[1001], 0);
	/* EOF: short across, 0 at and after. */
	ck_assert_int_eq(backend_pread(b, buf, 4096, size - 100), 100);
	ck_assert_int_eq(backend_pread(b, buf, 4096, size), 0);
	ck_assert_int_eq(backend_pread(b, buf, 1, size + MiB), 0);
	/* Past EOF: all or nothing. */
	ck_assert_int_eq(backend_pwrite(b, pat, 200, size - 100), -ENOSPC);
	ck_assert_int_eq(backend_pwrite(b, pat, 100, size - 100), 100);
	ck_assert_int_eq(backend_flush(b), 0);
	backend_close(b);

	/* Growable: the write extends the image. */
	{
		g_autofree char *url = image_url("eof.img", NULL);
		struct backend_open_args a = { .path = url,
					       .flags = BACKEND_OPEN_GROWABLE };
		struct stat st;

		ck_assert_int_eq(backend_open("nfs", &a, &b), 0);
		ck_assert_int_eq(backend_pwrite(b, pat, MiB, size + 10), (ssize_t)MiB);
		ck_assert_int_eq(backend_get_size(b), (int64_t)(size + 10 + MiB));
		ck_assert_int_eq(backend_flush(b), 0);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_size, (off_t)(size + 10 + MiB));
		backend_close(b);
	}
	g_free(buf);
	g_free(pat);
	server_done("holes_eof");
}
END_TEST

/* sync=1: nothing is retained; read-only refuses writes; resize, info,
 * discard, write_zeroes, map; creating twice; listing. */
START_TEST(test_nfs_ops)
{
	g_autofree char *path = export_path("ops.img");
	g_autofree char *url = image_url("ops.img", NULL);
	char *buf = g_malloc(MiB);
	struct nfs_backend_stats st;
	struct backend_info info;
	struct backend_extent ext;
	struct backend *b;
	struct stat sb;
	GPtrArray *names;
	bool found = false;
	size_t i;

	server_setup();
	b = make_open("ops.img", 4 * MiB, "sync=1", 0);
	memset(buf, 0x33, MiB);
	ck_assert_int_eq(backend_pwrite(b, buf, MiB, 1), (ssize_t)MiB);
	nfs_backend_get_stats(b, &st);
	ck_assert_msg(st.retained_bytes == 0, "sync=1 retained %llu bytes",
		      (unsigned long long)st.retained_bytes);
	ck_assert_int_eq(backend_info(b, &info), 0);
	ck_assert_str_eq(info.format, "nfs");
	ck_assert_int_eq(info.size, 4 * MiB);
	ck_assert_int_eq(backend_resize(b, 6 * MiB), 0);
	ck_assert_int_eq(backend_get_size(b), (int64_t)(6 * MiB));
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_int_eq(sb.st_size, (off_t)(6 * MiB));
	ck_assert_int_eq(backend_discard(b, 0, 4096), -EOPNOTSUPP);
	ck_assert_int_eq(backend_write_zeroes(b, 100, 1000), 0);
	ck_assert_int_eq(backend_pread(b, buf, 2000, 0), 2000);
	ck_assert_int_eq(buf[0], 0);
	ck_assert_int_eq(buf[99], 0x33);
	ck_assert_int_eq(buf[100], 0);
	ck_assert_int_eq(buf[1099], 0);
	ck_assert_int_eq(buf[1100], 0x33);
	ck_assert_int_eq(backend_map(b, 0, MiB, &ext), 0);
	ck_assert_msg(!ext.hole && ext.len == MiB, "map: all data");
	backend_close(b);

	/* Read-only. */
	{
		struct backend_open_args a = { .path = url,
					       .flags = BACKEND_OPEN_RDONLY };

		ck_assert_int_eq(backend_open("nfs", &a, &b), 0);
		ck_assert_int_eq(backend_pwrite(b, buf, 10, 0), -EROFS);
		ck_assert_int_eq(backend_pread(b, buf, 10, 1100), 10);
		for (i = 0; i < 10; i++)
			ck_assert_int_eq(buf[i], 0x33);
		backend_close(b);
	}
	/* Create refuses an existing file, once logged. */
	ck_assert_int_eq(nfs_image_create(url, MiB, true), -EEXIST);
	/* Non-sparse create writes zeros. */
	{
		g_autofree char *p2 = export_path("full.img");
		g_autofree char *u2 = image_url("full.img", NULL);

		unlink(p2);
		ck_assert_int_eq(nfs_image_create(u2, 3 * MiB + 5, false), 0);
		ck_assert_int_eq(stat(p2, &sb), 0);
		ck_assert_int_eq(sb.st_size, (off_t)(3 * MiB + 5));
		ck_assert_msg(sb.st_blocks * 512 >= (blkcnt_t)(3 * MiB),
			      "non-sparse create: %lld bytes allocated",
			      (long long)sb.st_blocks * 512);
	}
	names = g_ptr_array_new_with_free_func(g_free);
	ck_assert_int_eq(nfs_list_images(env("DIOLOOP_NFS_URL"), names), 0);
	for (i = 0; i < names->len; i++)
		found |= !strcmp(names->pdata[i], "ops.img");
	ck_assert_msg(found, "ops.img listed among %u names", names->len);
	g_ptr_array_free(names, TRUE);
	g_free(buf);
	server_done("ops");
}
END_TEST

/* Sizes at INT64_MAX - 1, INT64_MAX and across 2^63: what is past the
 * largest size never reaches the server, and the image keeps its size. */
START_TEST(test_nfs_sizes_past_the_largest_are_refused)
{
	const uint64_t off_max = INT64_MAX;
	g_autofree char *path = export_path("sizes.img");
	char buf[4096] = { 0x5a };
	struct backend *b;
	struct stat sb;

	server_setup();
	b = make_open("sizes.img", MiB, NULL, BACKEND_OPEN_GROWABLE);
	ck_assert_msg(b->limits.max_size == off_max,
		      "max_size: INT64_MAX (got %llu)",
		      (unsigned long long)b->limits.max_size);
	ck_assert_msg(backend_pwrite(b, buf, 4096, off_max - 1) == -EFBIG,
		      "write from INT64_MAX - 1 across 2^63: -EFBIG");
	ck_assert_msg(backend_pwrite(b, buf, 1, off_max) == -EFBIG,
		      "1 byte at INT64_MAX (ending at 2^63): -EFBIG");
	ck_assert_msg(backend_pwrite(b, buf, 4096, off_max + 1) == -EINVAL,
		      "write at 2^63: -EINVAL");
	ck_assert_msg(backend_write_zeroes(b, off_max - 1, 4096) == -EFBIG,
		      "write_zeroes across 2^63: -EFBIG");
	ck_assert_msg(backend_resize(b, off_max + 1) == -EINVAL,
		      "resize to 2^63: -EINVAL");
	ck_assert_msg(backend_resize(b, UINT64_MAX) == -EINVAL,
		      "resize to 2^64 - 1: -EINVAL");
	ck_assert_int_eq(backend_flush(b), 0);
	ck_assert_msg(backend_get_size(b) == (int64_t)MiB,
		      "the image keeps its size (got %lld)",
		      (long long)backend_get_size(b));
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert_msg(sb.st_size == (off_t)MiB,
		      "the file on the server keeps its size (got %lld)",
		      (long long)sb.st_size);
	backend_close(b);
	server_done("sizes");
}
END_TEST

/* A missing file, export or server: the errno and one log line each. */
START_TEST(test_nfs_errors)
{
	g_autofree char *missing_file = image_url("no-such.img", NULL);
	g_autofree char *missing_export = g_strdup_printf(
		"nfs://127.0.0.1:%s/no/such/export/f.img", env("DIOLOOP_NFS_PORT"));
	g_autofree char *dead_port = NULL;
	struct backend_open_args a = { 0 };
	struct backend *b;
	int64_t t0;
	int ret, before;

	server_setup();
	{
		/* The URL's path with a port nothing listens on. */
		const char *base = env("DIOLOOP_NFS_URL");
		const char *path = strchr(base + 6, '/');

		dead_port = g_strdup_printf("nfs://127.0.0.1:1%s/f.img?mountport=1&timeout=5",
					    path);
	}
	before = warnings;
	a.path = missing_file;
	ret = backend_open("nfs", &a, &b);
	ck_assert_msg(ret == -ENOENT, "missing file: expected -ENOENT, got %d", ret);
	ck_assert_int_eq(warnings, before + 1);

	before = warnings;
	a.path = missing_export;
	ret = backend_open("nfs", &a, &b);
	ck_assert_msg(ret == -ENOENT || ret == -EACCES,
		      "missing export: expected -ENOENT or -EACCES, got %d (%s)",
		      ret, g_strerror(-ret));
	ck_assert_int_eq(warnings, before + 1);

	before = warnings;
	a.path = dead_port;
	t0 = g_get_monotonic_time();
	ret = backend_open("nfs", &a, &b);
	ck_assert_msg(ret < 0, "no server: expected an error, got %d", ret);
	ck_assert_msg(g_get_monotonic_time() - t0 < 10 * G_USEC_PER_SEC,
		      "no server: open took more than 10 s");
	ck_assert_int_eq(warnings, before + 1);
	server_done("errors");
}
END_TEST

struct load {
	struct backend *b;
	char *model;
	size_t size;
	atomic_bool stop;
	atomic_uint writes;
	int err;
};

/* Sequential-ish writes of random data until told to stop. */
static gpointer load_thread(gpointer opaque)
{
	struct load *l = opaque;
	struct test_rng rng;
	uint64_t pos = 0;

	test_rng_init(&rng, 7);
	while (!atomic_load(&l->stop)) {
		size_t len = test_rng_range(&rng, 1, 512 * KiB);
		ssize_t r;

		if (pos + len > l->size)
			pos = test_rng_range(&rng, 0, 4096);
		test_rng_fill(&rng, l->model + pos, len);
		r = backend_pwrite(l->b, l->model + pos, len, pos);
		if (r != (ssize_t)len) {
			l->err = r < 0 ? (int)r : -EIO;
			break;
		}
		atomic_fetch_add(&l->writes, 1);
		pos += len + test_rng_range(&rng, 0, 3000);
	}
	return NULL;
}

/* Restart ganesha during a write load: the COMMIT after it returns a new
 * verifier, the uncommitted writes are sent again, and after flush every
 * byte is on the server. */
START_TEST(test_nfs_restart_resend)
{
	const size_t size = 40 * MiB;
	struct load l = { .size = size };
	struct nfs_backend_stats st;
	GThread *t;
	unsigned int w;

	server_setup();
	l.model = g_malloc0(size);
	l.b = make_open("restart.img", size, "timeout=60", 0);
	t = g_thread_new("load", load_thread, &l);
	while (atomic_load(&l.writes) < 30 && !l.err)
		g_usleep(1000);
	server_ctl("restart");
	w = atomic_load(&l.writes);
	while (atomic_load(&l.writes) < w + 30 && !l.err)
		g_usleep(1000);
	atomic_store(&l.stop, true);
	g_thread_join(t);
	ck_assert_msg(l.err == 0, "writes across the restart: %s", g_strerror(-l.err));
	ck_assert_int_eq(backend_flush(l.b), 0);
	nfs_backend_get_stats(l.b, &st);
	printf("restart: %u writes, reconnects %llu, verifier changes %llu, resent %llu writes (%llu bytes)\n",
	       atomic_load(&l.writes), (unsigned long long)st.reconnects,
	       (unsigned long long)st.verifier_changes,
	       (unsigned long long)st.resent_writes,
	       (unsigned long long)st.resent_bytes);
	ck_assert_msg(st.reconnects >= 1, "expected a reconnect");
	ck_assert_msg(st.verifier_changes >= 1, "expected the verifier to change");
	ck_assert_msg(st.resent_writes >= 1, "expected writes sent again");
	ck_assert_uint_eq(st.retained_bytes, 0);
	expect_disk_equals("restart.img", l.model, size);
	backend_close(l.b);
	g_free(l.model);
	server_done("restart_resend");
}
END_TEST

/* Stop the server longer than timeout=5: requests fail with EIO in about
 * that time, flush too, close returns; started again, I/O works. */
START_TEST(test_nfs_server_gone)
{
	char *buf = g_malloc(MiB);
	struct aio_op op;
	struct nfs_backend_stats st;
	struct backend *b;
	int64_t t0, dt;
	ssize_t r;

	server_setup();
	b = make_open("gone.img", 8 * MiB, "timeout=5", 0);
	memset(buf, 0x77, MiB);
	ck_assert_int_eq(backend_pwrite(b, buf, MiB, 0), (ssize_t)MiB);
	server_ctl("stop");

	t0 = g_get_monotonic_time();
	aio_prep(&op, DIOLOOP_WRITE, 3 * MiB + 5, 100 * KiB, 17, true);
	aio_fill(&op, buf);
	ck_assert_int_eq(aio_submit(b, &op), -EIOCBQUEUED);
	r = backend_pread(b, buf, 4096, 0);
	ck_assert_msg(r == -EIO, "read with the server gone: expected -EIO, got %zd", r);
	ck_assert_int_eq(aio_wait(&op, 30), -EIO);
	aio_free(&op);
	dt = g_get_monotonic_time() - t0;
	ck_assert_msg(dt >= 4 * G_USEC_PER_SEC && dt < 12 * G_USEC_PER_SEC,
		      "EIO after %.1f s, expected about 5", dt / 1e6);
	ck_assert_int_eq(backend_flush(b), -EIO);
	nfs_backend_get_stats(b, &st);
	ck_assert_msg(st.timeouts >= 2, "timeouts counted: %llu",
		      (unsigned long long)st.timeouts);

	/* Back: the retained write is committed, new I/O works. */
	server_ctl("start");
	ck_assert_int_eq(backend_pread(b, buf, 4096, 0), 4096);
	ck_assert_int_eq(buf[0], 0x77);
	ck_assert_int_eq(backend_flush(b), 0);

	/* Gone again with unflushed writes: close returns in time. */
	ck_assert_int_eq(backend_pwrite(b, buf, 4096, 4096), 4096);
	server_ctl("stop");
	t0 = g_get_monotonic_time();
	backend_close(b);
	dt = g_get_monotonic_time() - t0;
	ck_assert_msg(dt < 12 * G_USEC_PER_SEC, "close took %.1f s", dt / 1e6);
	server_ctl("start");
	g_free(buf);
	server_done("server_gone");
}
END_TEST

static Suite *nfs_suite(void)
{
	Suite *s = suite_create("nfs");
	TCase *tc = tcase_create("url");
	const char *url = getenv("DIOLOOP_NFS_URL");

	tcase_add_test(tc, test_nfs_url_bad);
	tcase_add_test(tc, test_nfs_url_dir_bad);
	suite_add_tcase(s, tc);
	if (url && *url) {
		tc = tcase_create("server");
		tcase_set_timeout(tc, 180);
		tcase_add_test(tc, test_nfs_random_io);
		tcase_add_test(tc, test_nfs_holes_eof);
		tcase_add_test(tc, test_nfs_ops);
		tcase_add_test(tc, test_nfs_sizes_past_the_largest_are_refused);
		tcase_add_test(tc, test_nfs_errors);
		tcase_add_test(tc, test_nfs_restart_resend);
		tcase_add_test(tc, test_nfs_server_gone);
		suite_add_tcase(s, tc);
	} else {
		printf("DIOLOOP_NFS_URL is not set: server tests are left to tests/integration/test-nfs-backend.sh\n");
	}
	return s;
}

int main(void)
{
	return test_run_suite(nfs_suite());
}
