/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpus of the cow fuzz target: small valid containers
 * (freshly formatted; with data, discards and several commits, so both
 * superblock slots hold different generations; a two-level block map; a
 * snapshot and a clone sharing pages with the volume written since),
 * each in the sparse input format of fuzz_image.h (all-zero blocks left
 * out).  Deterministic: the same seeds every run, apart from the uuid and
 * times cow_format puts in.
 *
 * Usage: make_corpus DIR
 */
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "backends/cow/cow.h"
#include "tests/fuzz/fuzz_image.h"

struct seed {
	const char *name;
	uint64_t size;			/* volume bytes */
	uint8_t csum_type;
	unsigned int commits;		/* rounds of writes + flush */
	unsigned int writes;		/* per round */
	bool discard;
	uint8_t flags;			/* fuzz input flags */
	bool volumes;			/* a snapshot and a clone after round 1 */
};

static const struct seed seeds[] = {
	{ .name = "empty-crc32c", .size = 1 << 20,
	  .csum_type = COW_CSUM_CRC32C },
	{ .name = "empty-xxhash-resealed", .size = 4 << 20,
	  .csum_type = COW_CSUM_XXHASH64, .flags = FUZZ_RESEAL },
	{ .name = "data-one-commit", .size = 1 << 20,
	  .csum_type = COW_CSUM_CRC32C, .commits = 1, .writes = 6,
	  .flags = FUZZ_RESEAL },
	{ .name = "data-commits-both-slots", .size = 1 << 20,
	  .csum_type = COW_CSUM_CRC32C, .commits = 3, .writes = 3,
	  .discard = true },
	{ .name = "data-commits-resealed", .size = 2 << 20,
	  .csum_type = COW_CSUM_XXHASH64, .commits = 4, .writes = 2,
	  .discard = true, .flags = FUZZ_RESEAL },
	{ .name = "two-level-map", .size = 8 << 20,
	  .csum_type = COW_CSUM_CRC32C, .commits = 2, .writes = 4,
	  .flags = FUZZ_RESEAL },
	{ .name = "snapshot-and-clone", .size = 1 << 20,
	  .csum_type = COW_CSUM_CRC32C, .commits = 3, .writes = 3,
	  .discard = true, .flags = FUZZ_RESEAL, .volumes = true },
};

static uint32_t rng = 12345;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static int fill(const char *path, const struct seed *sd)
{
	struct backend_open_args args = { .path = path };
	uint8_t buf[3 * COW_BLOCK_SIZE];
	struct backend *b;
	unsigned int c, w, i;
	int ret;

	ret = backend_open("cow", &args, &b);
	if (ret < 0)
		return ret;
	cow_set_commit_interval(b, 0);
	for (c = 0; c < sd->commits && !ret; c++) {
		for (w = 0; w < sd->writes && !ret; w++) {
			size_t len = 1 + next() % sizeof(buf);
			uint64_t pos = next() % (sd->size - len);

			for (i = 0; i < len; i++)
				buf[i] = (uint8_t)next();
			if (backend_pwrite(b, buf, len, pos) != (ssize_t)len)
				ret = -EIO;
		}
		if (!ret && sd->discard)
			ret = backend_discard(b, next() % (sd->size / 2),
					      2 * COW_BLOCK_SIZE);
		if (!ret)
			ret = backend_flush(b);
		if (!ret && sd->volumes && c == 0)
			ret = cow_snapshot(b, "snap", false);
		if (!ret && sd->volumes && c == 0)
			ret = cow_snapshot(b, "clone", true);
	}
	backend_close(b);
	return ret;
}

/* The container at path as a fuzz input in out. */
static int encode(const char *path, const char *out, uint8_t flags)
{
	uint8_t blk[COW_BLOCK_SIZE], zero[COW_BLOCK_SIZE] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	GByteArray *in = g_byte_array_new();
	uint64_t pbn, blocks;
	uint8_t hdr[FUZZ_HDR_SIZE];
	struct stat st;
	bool ok;

	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	blocks = (uint64_t)st.st_size / COW_BLOCK_SIZE;
	if (blocks > FUZZ_MAX_BLOCKS) {
		fprintf(stderr, "%s: %llu blocks: too big for a seed\n", path,
			(unsigned long long)blocks);
		close(fd);
		return -EFBIG;
	}
	hdr[0] = flags;
	hdr[1] = (uint8_t)blocks;
	hdr[2] = (uint8_t)(blocks >> 8);
	hdr[3] = 0;
	g_byte_array_append(in, hdr, sizeof(hdr));
	for (pbn = 0; pbn < blocks; pbn++) {
		uint8_t le[2] = { (uint8_t)pbn, (uint8_t)(pbn >> 8) };

		if (pread(fd, blk, sizeof(blk), (off_t)(pbn * COW_BLOCK_SIZE)) !=
		    (ssize_t)sizeof(blk))
			break;
		if (!memcmp(blk, zero, sizeof(blk)))
			continue;
		g_byte_array_append(in, le, 2);
		g_byte_array_append(in, blk, sizeof(blk));
	}
	close(fd);
	ok = g_file_set_contents(out, (const gchar *)in->data, in->len, NULL);
	g_byte_array_free(in, TRUE);
	return ok ? 0 : -EIO;
}

int main(int argc, char **argv)
{
	GError *err = NULL;
	char *tmp;
	size_t i;
	int ret = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	tmp = g_dir_make_tmp("dioloop-corpus-XXXXXX", &err);
	if (!tmp) {
		fprintf(stderr, "mkdtemp: %s\n", err->message);
		return 1;
	}
	g_mkdir_with_parents(argv[1], 0755);
	for (i = 0; i < G_N_ELEMENTS(seeds) && !ret; i++) {
		const struct seed *sd = &seeds[i];
		char *img = g_build_filename(tmp, "img.cow", NULL);
		char *out = g_build_filename(argv[1], sd->name, NULL);
		struct cow_format_opts o = { .size = sd->size,
					     .csum_type = sd->csum_type };
		struct cow_err cerr = { "" };

		ret = cow_format(img, &o, &cerr);
		if (ret < 0)
			fprintf(stderr, "%s: cow_format: %s\n", sd->name, cerr.msg);
		if (!ret) {
			ret = fill(img, sd);
			if (ret < 0)
				fprintf(stderr, "%s: writing: %s\n", sd->name,
					g_strerror(-ret));
		}
		if (!ret)
			ret = encode(img, out, sd->flags);
		unlink(img);
		g_free(img);
		g_free(out);
	}
	rmdir(tmp);
	g_free(tmp);
	return ret ? 1 : 0;
}
