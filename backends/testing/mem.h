/* SPDX-License-Identifier: MIT */
/*
 * "mem": an in-memory test-double backend that runs the real direct-I/O
 * engine (backends/dio.c) over a private store, so the engine, the core
 * and stacked backends can be tested without files or libaio.
 *
 * Opened with backend_open("mem", args): args->path is an option string,
 * comma separated, every option optional:
 *
 *   size=N          logical size (suffix K, M, G, T: powers of 1024); 16M
 *   align=N         request_alignment and mem_alignment, a power of two; 512
 *   block=N         block size (a power of two >= align); 4096
 *   async           complete I/Os from 3 worker threads (random order,
 *                   racing with submission); default: inline, synchronous
 *   delay_us=N      each I/O waits this long before it is done; 0
 *   fragment        logical block i lives at physical block i ^ 1, so no
 *                   two logically adjacent blocks are physically adjacent
 *   max_segs=N      limits.max_segs; 1024
 *   max_transfer=N  limits.max_transfer; 1M
 *
 * Blocks never written (or discarded, zeroed, cut by a resize) are holes:
 * reads of them are zero-filled by the engine without I/O, and map()
 * reports them.  Writes past EOF fail with -ENOSPC unless the image was
 * opened BACKEND_OPEN_GROWABLE.  flush is a no-op; clone_range is not
 * provided (the core's default).
 *
 * Threads: every op may run concurrently with direct I/O (one GRWLock
 * guards the store); the functions below may be called from any thread.
 * With `async`, completions run on mem's workers, which close joins:
 * never close from a completion callback.
 */
#ifndef DIOLOOP_TESTING_MEM_H
#define DIOLOOP_TESTING_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"

extern const struct backend_ops mem_backend_ops;

/* What the store saw, counted in submit_io (the engine's own counters are
 * in backend_info's engine). */
struct mem_backend_stats {
	uint64_t submits;	/* submit_io calls */
	uint64_t ios;		/* struct dio_io's carried out */
	uint64_t iovs;		/* iovecs across those I/Os */
	uint64_t multi_iov_ios;	/* I/Os with more than one iovec */
	uint64_t max_nr_iov;	/* most iovecs in one I/O */
	uint64_t max_io_len;	/* largest I/O in bytes */
	uint64_t read_ios, write_ios;
	uint64_t bytes_read, bytes_written;
};

/* A snapshot of the counters; b must be a "mem" backend. */
void mem_backend_get_stats(struct backend *b, struct mem_backend_stats *st);
void mem_backend_reset_stats(struct backend *b);

/*
 * Read [pos, pos + len) of the image's logical content straight from the
 * store, bypassing the engine (holes read as zeros): 0, or -EINVAL when b
 * is not a "mem" backend or the range passes the end of the image.
 */
int mem_backend_peek(struct backend *b, uint64_t pos, void *buf, size_t len);
/* Write logical content straight into the store (blocks become data):
 * test setup that does not depend on the engine.  Same errors as peek. */
int mem_backend_poke(struct backend *b, uint64_t pos, const void *buf,
		     size_t len);
/* True if the block holding pos has been written (is not a hole). */
bool mem_backend_block_written(struct backend *b, uint64_t pos);

#endif
