/* SPDX-License-Identifier: MIT */
/*
 * Sparse writing, shared by the mirror filter's copy and dioloop convert:
 * all-zero blocks of a buffer are not written, so holes stay holes.
 */
#ifndef DIOLOOP_SPARSE_COPY_H
#define DIOLOOP_SPARSE_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

/* The block size zero runs are found in. */
#define SPARSE_BLOCK 4096u

/* Make [pos, pos + len) of dst read as zeros: discard, or write zeros
 * where the backend cannot deallocate (NFSv3).  0 or -errno. */
int backend_clear_range(struct backend *dst, uint64_t pos, uint64_t len);

/*
 * Write len bytes of buf to dst at pos, leaving out its whole blocks of
 * zeros (SPARSE_BLOCK, counted from buf): those are cleared on dst
 * (backend_clear_range) unless fresh says dst reads zeros there already.
 * 0 or -errno; *written (may be NULL) grows by the bytes written.
 * Worker thread.
 */
int backend_write_sparse(struct backend *dst, const uint8_t *buf,
			 uint64_t pos, uint64_t len, bool fresh,
			 uint64_t *written);

#endif
