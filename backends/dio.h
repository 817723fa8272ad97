/* SPDX-License-Identifier: MIT */
/*
 * The generic direct-I/O engine: a user-space blockdev_direct_IO_bvec
 * (seeds 006-008).  A backend's direct_IO_bvec describes its image with a
 * get_block callback and calls blockdev_direct_IO_bvec(); the engine
 *
 *  - checks alignment with dio_aligned() (fs block size first, then the
 *    device's logical block size, docs/lineage.md patch 006) for the offset, the length and
 *    every bio_vec's bv_offset and bv_len;
 *  - aligned: walks the bio_vecs, maps blocks through get_block (holes read
 *    as zeros without I/O when DIO_SKIP_HOLES; writes map with create),
 *    coalesces physically contiguous pieces into one I/O with several
 *    iovecs (up to max_segs / max_transfer), and submits them in one batch;
 *  - unaligned: goes through a bounce buffer covering whole blocks; a write
 *    that covers part of a block reads that block first (read-modify-
 *    write).  Every write holds its block range in the engine's
 *    range_locks (struct dio_engine) from
 *    before its first I/O until its last completes: exclusive for RMW,
 *    shared otherwise, so an RMW never interleaves with another write to
 *    the same blocks;
 *  - finishes in one place, dio_post_submission() style: the first error
 *    wins, a reference count (submitter + one per I/O, raised before the
 *    I/O is submitted) makes completion run exactly once, end_io runs
 *    before the caller hears of the result.
 */
#ifndef DIOLOOP_DIO_H
#define DIOLOOP_DIO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backends/aio.h"
#include "backends/backend.h"
#include "backends/range_lock.h"

/* Engine counters per image. */
struct dio_stats {
	_Atomic uint64_t requests;	/* requests through the engine */
	_Atomic uint64_t ios;		/* I/Os submitted (one iocb each) */
	_Atomic uint64_t segs;		/* iovecs across those I/Os */
	_Atomic uint64_t holes;		/* hole extents zero-filled, no I/O */
	_Atomic uint64_t bounced;	/* requests through bounce buffers */
	_Atomic uint64_t rmw;		/* ... that needed read-modify-write */
};

/*
 * The engine's state for one image.  A backend that runs on the engine
 * embeds one in its private state, sets it up at open, passes it in
 * every dio_params, and takes its range_locks around any other change of
 * the same blocks (fallocate, clone) so that it never races an RMW.
 */
struct dio_engine {
	struct range_lock_tree range_locks;	/* writes' block ranges */
	struct dio_stats stats;
};

/* Set up e (at open). */
void dio_engine_init(struct dio_engine *e);
/* Release e (at close; nothing in flight). */
void dio_engine_clear(struct dio_engine *e);
/* Copy e's counters into info->engine (for a backend's info op). */
void dio_engine_get_stats(struct dio_engine *e, struct backend_info *info);

/* What get_block found at a position. */
struct dio_map {
	uint64_t phys;		/* byte offset on the target (DIO_MAPPED) */
	uint64_t len;		/* bytes covered from the asked position, > 0,
				 * a multiple of the block size unless it ends
				 * the request */
	bool hole;		/* read: zeros, no I/O (only without create) */
	int fd;			/* target of the default libaio submission */
};

/*
 * Map [pos, pos + len) of the image; pos and len are block aligned.  With
 * create (writes) the result is never a hole.  A write's map_private must
 * also serve create == false lookups: the read half of a read-modify-write
 * maps the partial blocks without creating them.  Called in ascending pos
 * order within a phase, on the submitting thread or, for a write whose
 * range was busy or for the write half of a read-modify-write, on the
 * thread that completed the earlier I/O (a completion thread): it must not
 * block for long.  Writes call it while holding their block range.
 * 0 or -errno.
 */
typedef int (*get_block_t)(struct backend *b, void *map_private,
			   uint64_t pos, uint64_t len, bool create,
			   struct dio_map *map);

/* One I/O the engine built: len bytes at phys on fd, through iov. */
struct dio;
struct dio_io {
	struct dioloop_aio_req aio;	/* used by the default submission */
	struct dio *dio;
	bool write;
	int fd;
	uint64_t phys;
	size_t len;
	int nr_iov;
	struct iovec *iov;
};

/*
 * Submit n I/Os; each must end with exactly one dio_io_complete() call,
 * on any thread, possibly before submit_io returns.  NULL means libaio on
 * io->fd through b->aio.
 */
typedef void (*dio_submit_t)(struct backend *b, struct dio_io **ios, int n);
/* Report an I/O's result: bytes done or -errno. */
void dio_io_complete(struct dio_io *io, long res);

/* Runs exactly once per call with count > 0 (also when the call fails
 * before any I/O), when all I/O of the request is done and before the
 * result goes to the caller; returns the (possibly changed) result.  Runs
 * on the submitting thread or a completion thread.  A write still holds
 * its block range while end_io runs: mappings recorded there are seen by
 * any overlapping write that comes after.  end_io must not wait for
 * another request on the same blocks. */
typedef ssize_t (*dio_iodone_t)(struct kiocb *iocb, void *end_io_private,
				ssize_t res);

enum dio_flags {
	/* Reads of holes: zeros without I/O.  Without it a hole is read
	 * from map.fd at map.phys like data. */
	DIO_SKIP_HOLES = 1 << 0,
};

struct dio_params {
	struct dio_engine *engine;	/* the image's engine state */
	size_t count;			/* bytes to transfer, <= iter count */
	unsigned int blkbits;		/* log2 of the fs block size */
	unsigned int dev_blkbits;	/* log2 of the logical block size:
					 * the least alignment direct I/O
					 * accepts, for offsets, lengths and
					 * memory alike (so it must be at
					 * least limits.mem_alignment) */
	get_block_t get_block;
	void *map_private;
	dio_submit_t submit_io;		/* NULL: libaio via b->aio */
	dio_iodone_t end_io;		/* NULL: none */
	void *end_io_private;
	unsigned int flags;		/* enum dio_flags */
};

/*
 * True if offset is aligned to *blkbits, or else to dev_blkbits; in the
 * second case *blkbits becomes dev_blkbits (docs/lineage.md patch 006's convention).
 */
bool dio_aligned(uint64_t offset, unsigned int *blkbits,
		 unsigned int dev_blkbits);

/*
 * Do iocb's I/O on the image as described by p.  Returns bytes transferred
 * or -errno when finished inline; -EIOCBQUEUED (asynchronous kiocb only)
 * when iocb->ki_complete will be called.  count == 0 returns 0.  The
 * caller's iterator is not advanced.  A synchronous kiocb on a completion
 * thread of b->aio fails with -EDEADLK.
 */
ssize_t blockdev_direct_IO_bvec(struct backend *b, struct kiocb *iocb,
				const struct dio_params *p);

#endif
