/* SPDX-License-Identifier: MIT */
/*
 * The fuzz input: a cow container described sparsely, so that mutations
 * land on metadata instead of on megabytes of zeros.
 *
 *   header   4 bytes
 *     [0]    flags: FUZZ_RESEAL = recompute the checksum of every block
 *            that looks like a superblock or a metadata page before use,
 *            so that mutations get past the checksums and reach the
 *            parsers behind them
 *     [1..2] file size in blocks (LE); 0: up to the last record's block
 *     [3]    bytes cut off the end of the file, times 16 (a torn tail)
 *   records  FUZZ_REC_SIZE bytes each, the last one zero-padded
 *     [0..1] pbn (LE), modulo FUZZ_MAX_BLOCKS
 *     [2..]  the 4096 bytes of that block
 *
 * The file is all zeros except the records, applied in order (a later
 * record for the same pbn wins).  Header-only: the fuzz target and the
 * seed generator share it.
 */
#ifndef DIOLOOP_FUZZ_IMAGE_H
#define DIOLOOP_FUZZ_IMAGE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "backends/cow/format.h"

#define FUZZ_HDR_SIZE 4u
#define FUZZ_REC_SIZE (2u + (unsigned int)COW_BLOCK_SIZE)
#define FUZZ_MAX_BLOCKS 8192u		/* files up to 32 MiB (sparse) */
#define FUZZ_RESEAL 0x01u

/* Records in an input of size bytes (a partial last one counts). */
static inline size_t fuzz_nr_records(size_t size)
{
	if (size <= FUZZ_HDR_SIZE)
		return 0;
	return (size - FUZZ_HDR_SIZE + FUZZ_REC_SIZE - 1) / FUZZ_REC_SIZE;
}

/* Fix the checksum of blk when it looks like a superblock or a page. */
static inline void fuzz_reseal(uint8_t *blk)
{
	if (!memcmp(blk, COW_MAGIC, 8)) {
		cow_put_le32(blk + COW_SB_CSUM_OFF,
			     cow_crc32c(blk, COW_SB_CSUM_OFF));
	} else if (!memcmp(blk, COW_PAGE_MAGIC, 4)) {
		memset(blk + 8, 0, 4);
		cow_put_le32(blk + 8, cow_crc32c(blk, COW_BLOCK_SIZE));
	}
}

/*
 * Write the container that data describes into fd (replacing what it
 * held).  0 or -errno.
 */
static inline int fuzz_image_write(int fd, const uint8_t *data, size_t size)
{
	uint8_t blk[COW_BLOCK_SIZE];
	size_t nr = fuzz_nr_records(size), i;
	uint64_t blocks = 0, bytes;
	uint8_t flags = 0;
	bool auto_size;

	if (ftruncate(fd, 0) < 0)
		return -errno;
	if (size >= FUZZ_HDR_SIZE) {
		flags = data[0];
		blocks = (uint64_t)data[1] | (uint64_t)data[2] << 8;
	}
	auto_size = blocks == 0;
	if (blocks > FUZZ_MAX_BLOCKS)
		blocks = FUZZ_MAX_BLOCKS;
	for (i = 0; i < nr; i++) {
		const uint8_t *rec = data + FUZZ_HDR_SIZE + i * FUZZ_REC_SIZE;
		size_t len = size - (size_t)(rec - data);
		uint64_t pbn;

		if (len > FUZZ_REC_SIZE)
			len = FUZZ_REC_SIZE;
		pbn = (uint64_t)rec[0];
		if (len > 1)
			pbn |= (uint64_t)rec[1] << 8;
		pbn %= FUZZ_MAX_BLOCKS;
		memset(blk, 0, sizeof(blk));
		if (len > 2)
			memcpy(blk, rec + 2, len - 2);
		if (flags & FUZZ_RESEAL)
			fuzz_reseal(blk);
		if (pwrite(fd, blk, sizeof(blk), (off_t)(pbn * COW_BLOCK_SIZE)) !=
		    (ssize_t)sizeof(blk))
			return -EIO;
		if (auto_size && pbn + 1 > blocks)
			blocks = pbn + 1;
	}
	bytes = blocks * COW_BLOCK_SIZE;
	if (size >= FUZZ_HDR_SIZE) {
		uint64_t cut = (uint64_t)data[3] * 16;

		bytes = bytes > cut ? bytes - cut : 0;
	}
	return ftruncate(fd, (off_t)bytes) < 0 ? -errno : 0;
}

#endif
