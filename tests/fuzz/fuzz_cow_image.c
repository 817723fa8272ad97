/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: open and check arbitrary cow containers.  Each input
 * (fuzz_image.h: a sparse list of 4 KiB blocks) becomes a container file;
 * cow_check() runs on it (data checksums included), then the cow backend
 * opens it read-only and reads and maps a few blocks of its default volume
 * and of the other volumes it lists.  Errors are fine;
 * crashes, sanitizer reports, leaks and hangs are findings.
 *
 * The container lives in a memfd opened through /proc/self/fd (O_DIRECT
 * works on shmem), or, where that fails, in a file under $TMPDIR.
 *
 * The custom mutator keeps the record structure: it mutates inside one
 * block (mostly its first 512 bytes: a superblock, or a page header and
 * its first entries), pokes 8-byte fields with boundary values, moves,
 * copies or drops records, and edits the header.
 */
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "backends/aio.h"
#include "backends/backend.h"
#include "backends/cow/check.h"
#include "backends/cow/cow.h"
#include "tests/fuzz/fuzz_image.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed);

static int img_fd = -1;
static char *img_path, *img_dir;
static struct dioloop_aio *aio;
static bool verbose;			/* $DIOLOOP_FUZZ_VERBOSE: say what
					 * each input did, log everything */

static void report_line(void *opaque, const char *msg)
{
	fprintf(stderr, "cow_check: %s\n", msg);
}

static GLogWriterOutput log_discard(GLogLevelFlags level,
				    const GLogField *fields, gsize n_fields,
				    gpointer user_data)
{
	return G_LOG_WRITER_HANDLED;
}

static void cleanup(void)
{
	if (img_dir) {
		unlink(img_path);
		rmdir(img_dir);
	}
}

/* A memfd the backend can open with O_DIRECT, or NULL. */
static char *memfd_path(int *fd_out)
{
	int fd = memfd_create("fuzz-cow", MFD_CLOEXEC), probe;
	char *path;

	if (fd < 0)
		return NULL;
	path = g_strdup_printf("/proc/self/fd/%d", fd);
	probe = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (probe < 0) {
		g_free(path);
		close(fd);
		return NULL;
	}
	close(probe);
	*fd_out = fd;
	return path;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	GError *err = NULL;
	int ret;

	verbose = getenv("DIOLOOP_FUZZ_VERBOSE") != NULL;
	if (!verbose)
		g_log_set_writer_func(log_discard, NULL, NULL);
	img_path = memfd_path(&img_fd);
	if (!img_path) {
		img_dir = g_dir_make_tmp("dioloop-fuzz-XXXXXX", &err);
		if (!img_dir) {
			fprintf(stderr, "fuzz: mkdtemp: %s\n", err->message);
			exit(1);
		}
		img_path = g_build_filename(img_dir, "img.cow", NULL);
		img_fd = open(img_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (img_fd < 0) {
			perror("fuzz: create the image file");
			exit(1);
		}
		atexit(cleanup);
	}
	ret = dioloop_aio_new(16, "fuzz-aio", &aio);
	if (ret < 0) {
		fprintf(stderr, "fuzz: aio: %s\n", g_strerror(-ret));
		exit(1);
	}
	return 0;
}

/* Read and map a few blocks of an open volume. */
static void poke_volume(struct backend *b, const uint8_t *data, size_t size)
{
	int64_t vsize = backend_get_size(b);
	uint64_t nblocks, lbn, pbn, csum, pos[4], off;
	struct backend_extent ext;
	uint8_t *buf;
	unsigned int i;

	if (vsize <= 0)
		return;
	nblocks = ((uint64_t)vsize + COW_BLOCK_SIZE - 1) / COW_BLOCK_SIZE;
	/* Block 0, the last block, and two picked by the input's tail. */
	pos[0] = 0;
	pos[1] = (nblocks - 1) * COW_BLOCK_SIZE;
	lbn = size >= 8 ? cow_get_le32(data + size - 8) : 1;
	pos[2] = (lbn % nblocks) * COW_BLOCK_SIZE;
	lbn = size >= 4 ? cow_get_le32(data + size - 4) : 2;
	pos[3] = (lbn % nblocks) * COW_BLOCK_SIZE + 100;
	buf = g_malloc(2 * COW_BLOCK_SIZE);
	for (i = 0; i < 4; i++) {
		backend_pread(b, buf, i == 3 ? COW_BLOCK_SIZE + 1000 :
					      COW_BLOCK_SIZE, pos[i]);
		cow_map_block(b, pos[i] / COW_BLOCK_SIZE, &pbn, &csum);
	}
	/* The first few extents. */
	for (i = 0, off = 0; i < 4 && off < (uint64_t)vsize; i++) {
		if (backend_map(b, off, (uint64_t)vsize - off, &ext) < 0 ||
		    ext.len == 0)
			break;
		off += ext.len;
	}
	g_free(buf);
}

/* Open the other volumes b's container lists (a few) and poke them. */
static void poke_other_volumes(struct backend *b, const uint8_t *data,
			       size_t size)
{
	GArray *vols = g_array_new(FALSE, FALSE,
				   sizeof(struct cow_volume_info));
	guint i;

	if (cow_list_volumes(b, vols) == 0) {
		for (i = 0; i < vols->len && i < 4; i++) {
			const struct cow_volume_info *v =
				&g_array_index(vols, struct cow_volume_info, i);
			struct backend_open_args args = {
				.path = img_path, .aio = aio, .volume = v->name,
				.flags = BACKEND_OPEN_RDONLY,
			};
			struct backend *vb;

			if (!v->name[0] || backend_open("cow", &args, &vb) < 0)
				continue;
			poke_volume(vb, data, size);
			backend_close(vb);
		}
	}
	g_array_free(vols, TRUE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct backend_open_args args = { .path = img_path,
					   .flags = BACKEND_OPEN_RDONLY,
					   .aio = aio };
	struct cow_check_result res;
	struct backend *b = NULL;
	int ret;

	if (fuzz_image_write(img_fd, data, size) < 0)
		return 0;
	ret = cow_check(img_path, COW_CHECK_DATA, &res,
			verbose ? report_line : NULL, NULL);
	if (verbose)
		fprintf(stderr, "cow_check: %d, generation %llu, %llu problems\n",
			ret, (unsigned long long)res.generation,
			(unsigned long long)res.errors);
	ret = backend_open("cow", &args, &b);
	if (verbose)
		fprintf(stderr, "open: %d\n", ret);
	if (ret == 0) {
		struct cow_stats st;

		cow_get_stats(b, &st);
		poke_volume(b, data, size);
		poke_other_volumes(b, data, size);
		cow_get_stats(b, &st);
		if (verbose)
			fprintf(stderr, "read: %llu checksum errors\n",
				(unsigned long long)st.csum_errors);
		backend_close(b);
	}
	return 0;
}

/* ---- the mutator ---- */

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* A boundary value for an 8-byte field. */
static uint64_t interesting(uint32_t *s)
{
	static const uint64_t v[] = {
		0, 1, 2, 3, 7, 8, 31, 167, 168, 251, 252, 253, 1007, 1008,
		4096, 0xffffffffu, 0x100000000ull, UINT64_MAX, UINT64_MAX - 1,
		(uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1,
	};
	uint32_t k = rnd(s) % (G_N_ELEMENTS(v) + 3);

	if (k < G_N_ELEMENTS(v))
		return v[k];
	return rnd(s) % 64;		/* a small pbn, count or height */
}

/* Mutate len bytes at p in place with libFuzzer's own mutations. */
static void mutate_window(uint8_t *p, size_t len)
{
	uint8_t tmp[512];
	size_t n;

	memcpy(tmp, p, len);
	n = LLVMFuzzerMutate(tmp, len, len);
	memcpy(p, tmp, MIN(n, len));
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	uint32_t s = seed | 1;
	size_t nr = fuzz_nr_records(size), rec, off;
	uint8_t *r;

	if (size < FUZZ_HDR_SIZE + FUZZ_REC_SIZE) {
		/* Too short to hold a block: libFuzzer's way. */
		return LLVMFuzzerMutate(data, size, max_size);
	}
	/* Whole records only from here on. */
	nr = (size - FUZZ_HDR_SIZE) / FUZZ_REC_SIZE;
	size = FUZZ_HDR_SIZE + nr * FUZZ_REC_SIZE;
	rec = rnd(&s) % nr;
	r = data + FUZZ_HDR_SIZE + rec * FUZZ_REC_SIZE;
	switch (rnd(&s) % 16) {
	case 0: case 1: case 2: case 3: case 4: case 5:
		/* Inside the block's first 512 bytes. */
		off = rnd(&s) % 8 * 64;
		mutate_window(r + 2 + off, MIN(512 - off, 128));
		break;
	case 6: case 7:
		/* Anywhere in the block. */
		off = rnd(&s) % (COW_BLOCK_SIZE / 64) * 64;
		mutate_window(r + 2 + off, MIN(COW_BLOCK_SIZE - off, 256));
		break;
	case 8: case 9: case 10:
		/* An aligned 8-byte field (header or entry) of the block. */
		off = rnd(&s) % 2 ? rnd(&s) % 64 * 8 :
				    rnd(&s) % (COW_BLOCK_SIZE / 8) * 8;
		cow_put_le64(r + 2 + off, interesting(&s));
		break;
	case 11:
		/* Another pbn for the block. */
		r[0] = (uint8_t)(rnd(&s) % 2 ? r[0] + 1 : rnd(&s) % 64);
		r[1] = 0;
		break;
	case 12:
		/* Copy a record to another pbn. */
		if (size + FUZZ_REC_SIZE <= max_size) {
			memcpy(data + size, r, FUZZ_REC_SIZE);
			data[size] = (uint8_t)(rnd(&s) % 64);
			data[size + 1] = 0;
			size += FUZZ_REC_SIZE;
		}
		break;
	case 13:
		/* Drop a record. */
		if (nr > 1) {
			memmove(r, r + FUZZ_REC_SIZE,
				size - (size_t)(r - data) - FUZZ_REC_SIZE);
			size -= FUZZ_REC_SIZE;
		}
		break;
	case 14:
		/* The header: reseal, file size, torn tail. */
		switch (rnd(&s) % 4) {
		case 0:
			data[0] ^= FUZZ_RESEAL;
			break;
		case 1:
			data[3] = (uint8_t)(rnd(&s) % 2 ? 0 : rnd(&s));
			break;
		default:
			data[1] = (uint8_t)rnd(&s);
			data[2] = rnd(&s) % 4 ? 0 : (uint8_t)rnd(&s);
			break;
		}
		break;
	default:
		/* One byte of the superblock-sized head, flipped. */
		r[2 + rnd(&s) % COW_SB_SIZE] ^= (uint8_t)(1u << rnd(&s) % 8);
		break;
	}
	return size;
}
