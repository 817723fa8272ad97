/* SPDX-License-Identifier: MIT */
/* Sparse writing (sparse_copy.h). */
#include "backends/sparse_copy.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

/* True for a whole block of zeros at p (n bytes: a shorter one is data). */
static bool block_is_zero(const uint8_t *p, uint64_t n)
{
	static const uint8_t zero[SPARSE_BLOCK];

	return n == SPARSE_BLOCK && !memcmp(p, zero, SPARSE_BLOCK);
}

int backend_clear_range(struct backend *dst, uint64_t pos, uint64_t len)
{
	int ret = backend_discard(dst, pos, len);

	if (ret == -EOPNOTSUPP)
		ret = backend_write_zeroes(dst, pos, len);
	return ret;
}

int backend_write_sparse(struct backend *dst, const uint8_t *buf,
			 uint64_t pos, uint64_t len, bool fresh,
			 uint64_t *written)
{
	uint64_t i = 0;

	while (i < len) {
		uint64_t n = MIN((uint64_t)SPARSE_BLOCK, len - i);
		bool zero = block_is_zero(buf + i, n);
		uint64_t j = i + n;
		ssize_t w;

		/* Extend the run while blocks keep the same kind. */
		while (j < len) {
			uint64_t m = MIN((uint64_t)SPARSE_BLOCK, len - j);

			if (block_is_zero(buf + j, m) != zero)
				break;
			j += m;
		}
		if (zero) {
			int ret = fresh ? 0 :
				  backend_clear_range(dst, pos + i, j - i);

			if (ret < 0)
				return ret;
		} else {
			w = backend_pwrite(dst, buf + i, (size_t)(j - i),
					   pos + i);
			if (w < 0)
				return (int)w;
			if ((uint64_t)w != j - i)
				return -EIO;
			if (written)
				*written += j - i;
		}
		i = j;
	}
	return 0;
}
