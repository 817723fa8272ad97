/* SPDX-License-Identifier: MIT */
/*
 * The raw backend's private state, shared by its files: raw.c (open,
 * close, reads, flush, discard, info), map.c (SEEK_DATA/SEEK_HOLE
 * mapping) and extend.c (writes, growth and the orphan record).
 */
#ifndef DIOLOOP_RAW_INT_H
#define DIOLOOP_RAW_INT_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/dio.h"
#include "backends/raw/orphan.h"
#include "backends/raw/raw.h"

enum raw_ext_state {
	EXT_NONE,
	EXT_CREATING,
	EXT_LIVE,
	EXT_BUSY,
	EXT_DRAINING,
};

struct raw_req;

struct raw_ext {
	GMutex lock;
	GCond cond;			/* state changes; sync callers' results */
	enum raw_ext_state state;	/* by lock */
	unsigned int inflight;		/* extending writes issued or being
					 * created for, not finished; by lock */
	uint64_t recorded;		/* size in the record; by lock */
	uint64_t create_size;		/* size the record being created holds */
	bool truncate_pending;		/* a failed extending write may have
					 * left blocks past size; by lock */
	struct raw_req *creator;	/* the write the record is created for */
	struct raw_req *waiters, **waiters_tail;	/* by lock */
	struct raw_req *parked;		/* sync images: done, not yet told */
};

struct raw {
	struct backend *b;
	int fd;
	bool rdonly, growable, sync;
	bool store;			/* BACKEND_OPEN_STORE (backend.h) */
	unsigned int ra;		/* request_alignment */
	unsigned int blkbits, dev_blkbits;
	uint64_t block_size;
	_Atomic uint64_t size;		/* visible size; stored under ext.lock
					 * once open */
	atomic_bool all_data;		/* no hole at open and none made since
					 * (map.c): reads skip the lseeks */
	atomic_int wb_err;		/* a retry fdatasync's error, for flush */
	struct dioloop_aio *own_aio;	/* when the caller gave none */
	GMutex flush_lock;		/* one flush/resize works on the record
					 * at a time */
	struct orphan orphan;		/* record operations: under the ext
					 * state machine (CREATING, BUSY) */
	struct raw_ext ext;
	struct dio_engine dio;		/* the engine's locks and counters */
};

/*
 * One raw extent of the file found by lseek, cached per request
 * (map_private) so that a request costs one lseek per data/hole
 * transition, not one per block.
 */
struct raw_map_cache {
	uint64_t start, end;		/* [start, end) */
	bool hole;
	bool valid;
};

/*
 * A write in flight.  The engine runs `inner` (always asynchronous, its
 * ki_complete is ours); the caller's kiocb hears the result once, from
 * raw_deliver().  Synchronous callers sleep on ext.cond until delivered.
 */
struct raw_req {
	struct kiocb inner;
	struct kiocb *orig;
	struct raw *r;
	struct raw_map_cache map;	/* read-modify-write reads */
	struct dioloop_aio_req flush;	/* the fdsync before the retry */
	size_t count;
	uint64_t end;
	ssize_t res;			/* parked or delivered result */
	bool sync_caller;
	bool extending;			/* counted in ext.inflight */
	bool retried;
	bool delivered;			/* sync callers; by ext.lock */
	struct raw_req *next;		/* waiters or parked; by ext.lock */
};

/* Round down to a power of two. */
static inline uint64_t round_down_u64(uint64_t v, uint64_t a)
{
	return v & ~(a - 1);
}

/* Round up, saturating at the largest multiple of a. */
static inline uint64_t round_up_u64(uint64_t v, uint64_t a)
{
	if (v > UINT64_MAX - (a - 1))
		return round_down_u64(UINT64_MAX, a);
	return round_down_u64(v + a - 1, a);
}

/* map.c */
bool raw_has_no_hole(int fd, uint64_t size);
void raw_holes_made(struct raw *r);
void raw_extent(struct raw *r, struct raw_map_cache *c, uint64_t pos,
		uint64_t limit, bool *hole, uint64_t *len);
void raw_dio_params(struct raw *r, struct dio_params *p, size_t count,
		    struct raw_map_cache *mc, unsigned int flags);
int raw_map(struct backend *b, uint64_t pos, uint64_t len,
	    struct backend_extent *ext);

/* extend.c */
ssize_t raw_write(struct backend *b, struct raw *r, struct kiocb *iocb);
int raw_flush_record(struct raw *r, uint64_t size);
int raw_resize(struct backend *b, uint64_t new_size);

#endif
