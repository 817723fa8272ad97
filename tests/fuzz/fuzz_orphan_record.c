/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: raw's orphan record (backends/raw/orphan.h) as a file
 * someone else may have written.  Each input is the record's bytes.
 *
 * 1. The format: when orphan_decode() takes the bytes, orphan_encode() of
 *    what it returned gives back exactly the same bytes.
 * 2. The file: the bytes become the sidecar (mode 0600, ours) of a
 *    64 KiB image and orphan_recover() runs on it, read-only and then
 *    read-write.  The image never grows; it shrinks only when the record
 *    decodes and names the image's dev:ino, and then to the recorded size
 *    exactly; a read-only open never changes it and limits what is served
 *    only under the same condition.
 * 3. The bound record: a record that decodes is written again for the
 *    image's own dev:ino (the fuzzer cannot guess it), so the truncating
 *    path runs on the fuzzer's sizes; the same record with mode 0644 (not
 *    ours) must change nothing.
 *
 * A broken property aborts with a message (a libFuzzer crash).  The image
 * and its sidecar live in a temporary directory, under /dev/shm when it is
 * usable (fsync costs nothing there), else under $TMPDIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/raw/orphan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IMAGE_SIZE (64 * 1024)
#define RECORD_MAX 4096		/* longer inputs: the format check only */

static char *dir, *img_path, *rec_path;
static int img_fd = -1;
static uint64_t img_dev, img_ino;
static bool verbose;			/* $DIOLOOP_FUZZ_VERBOSE */

static GLogWriterOutput log_discard(GLogLevelFlags level,
				    const GLogField *fields, gsize n_fields,
				    gpointer user_data)
{
	return G_LOG_WRITER_HANDLED;
}

static void cleanup(void)
{
	g_autofree char *tmp = g_strconcat(rec_path, ".tmp", NULL);

	unlink(tmp);
	unlink(rec_path);
	unlink(img_path);
	rmdir(dir);
}

/* A property does not hold: say which, and crash. */
G_GNUC_PRINTF(1, 2) G_GNUC_NORETURN
static void broken(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "fuzz_orphan_record: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	cleanup();		/* abort() skips atexit */
	abort();
}

/* A temporary directory under base, or NULL. */
static char *make_dir(const char *base)
{
	g_autofree char *tmpl = g_build_filename(base, "dioloop-fuzz-XXXXXX",
						 NULL);

	if (!g_mkdtemp(tmpl))
		return NULL;
	return g_steal_pointer(&tmpl);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct stat st;

	verbose = getenv("DIOLOOP_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		g_log_set_writer_func(log_discard, NULL, NULL);
	dir = make_dir("/dev/shm");
	if (!dir)
		dir = make_dir(g_get_tmp_dir());
	if (!dir) {
		perror("fuzz: mkdtemp");
		exit(1);
	}
	img_path = g_build_filename(dir, "img", NULL);
	rec_path = orphan_record_path(img_path);
	img_fd = open(img_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (img_fd < 0 || fstat(img_fd, &st) < 0) {
		perror("fuzz: create the image");
		exit(1);
	}
	img_dev = (uint64_t)st.st_dev;
	img_ino = (uint64_t)st.st_ino;
	atexit(cleanup);
	return 0;
}

/* Put the record file in place with mode, holding len bytes. */
static void write_record(const void *buf, size_t len, mode_t mode)
{
	int fd;

	unlink(rec_path);
	fd = open(rec_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0 || fchmod(fd, mode) < 0 ||
	    (len && write(fd, buf, len) != (ssize_t)len))
		broken("writing the record: %s", g_strerror(errno));
	close(fd);
}

static uint64_t image_size(void)
{
	struct stat st;

	if (fstat(img_fd, &st) < 0)
		broken("fstat of the image: %s", g_strerror(errno));
	return (uint64_t)st.st_size;
}

/*
 * Recover from the record file as it is now, read-only then read-write,
 * on a fresh IMAGE_SIZE image.  believed: the record decodes, is ours
 * and names the image, recorded its size.  Checks what each open did.
 */
static void recover_and_check(const char *what, bool believed,
			      uint64_t recorded)
{
	uint64_t expect = believed ? MIN(recorded, IMAGE_SIZE) : IMAGE_SIZE;
	uint64_t limit, after;
	struct orphan o;
	int ret;

	if (ftruncate(img_fd, IMAGE_SIZE) < 0)
		broken("sizing the image: %s", g_strerror(errno));
	ret = orphan_init(&o, img_path, NULL, img_fd);
	if (ret < 0)
		broken("orphan_init: %s", g_strerror(-ret));

	ret = orphan_recover(&o, img_fd, true, &limit);
	after = image_size();
	if (verbose)
		fprintf(stderr, "%s: read-only recover %d, limit %llu, size %llu\n",
			what, ret, (unsigned long long)limit,
			(unsigned long long)after);
	if (ret < 0)
		broken("%s: read-only recovery failed: %s", what,
		       g_strerror(-ret));
	if (after != IMAGE_SIZE)
		broken("%s: a read-only recovery changed the size to %llu",
		       what, (unsigned long long)after);
	if (limit != (expect < IMAGE_SIZE ? expect : UINT64_MAX))
		broken("%s: read-only limit %llu, expected %llu", what,
		       (unsigned long long)limit,
		       (unsigned long long)(expect < IMAGE_SIZE ? expect :
							      UINT64_MAX));
	if (access(rec_path, F_OK) < 0)
		broken("%s: a read-only recovery removed the record", what);

	ret = orphan_recover(&o, img_fd, false, &limit);
	after = image_size();
	if (verbose)
		fprintf(stderr, "%s: read-write recover %d, size %llu\n", what,
			ret, (unsigned long long)after);
	if (ret < 0)
		broken("%s: read-write recovery failed: %s", what,
		       g_strerror(-ret));
	if (after > IMAGE_SIZE)
		broken("%s: the image grew to %llu", what,
		       (unsigned long long)after);
	if (after != expect)
		broken("%s: size %llu after recovery, expected %llu (%s)",
		       what, (unsigned long long)after,
		       (unsigned long long)expect,
		       believed ? "a believed record" :
				  "a record that must not be believed");
	if (limit != UINT64_MAX)
		broken("%s: a read-write recovery limited the size", what);
	orphan_destroy(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char again[ORPHAN_RECORD_LEN];
	uint64_t rsize = 0, dev = 0, ino = 0;
	bool decoded;

	decoded = orphan_decode(data, size, &rsize, &dev, &ino) == 0;
	if (decoded) {
		if (size != ORPHAN_RECORD_LEN)
			broken("decoded %zu bytes as a record", size);
		orphan_encode(again, rsize, dev, ino);
		if (memcmp(again, data, ORPHAN_RECORD_LEN))
			broken("encode(decode(x)) != x");
	}
	if (size > RECORD_MAX)
		return 0;

	/* The bytes as they came: believed only if they name the image. */
	write_record(data, size, 0600);
	recover_and_check("as given", decoded && dev == img_dev &&
					      ino == img_ino, rsize);
	if (!decoded)
		return 0;

	/* The same size, bound to this image: ours, then not ours. */
	orphan_encode(again, rsize, img_dev, img_ino);
	write_record(again, sizeof(again), 0600);
	recover_and_check("bound", true, rsize);
	write_record(again, sizeof(again), 0644);
	recover_and_check("bound, mode 0644", false, rsize);
	unlink(rec_path);
	return 0;
}
