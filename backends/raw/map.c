/* SPDX-License-Identifier: MIT */
/*
 * The raw backend's block mapping: the image is mapped 1:1 onto its file;
 * holes are found with SEEK_DATA/SEEK_HOLE and read as zeros without I/O.
 */
#include <errno.h>
#include <unistd.h>

#include "backends/raw/raw_int.h"

/* Remember one raw extent. */
static void raw_cache_set(struct raw_map_cache *c, uint64_t start,
			  uint64_t end, bool hole)
{
	*c = (struct raw_map_cache){ start, end, hole, true };
}

/*
 * Make c describe the raw extent that contains pos.  Crossing from a
 * cached extent into the next costs one lseek, a cold lookup at most two.
 * Without SEEK_DATA support the whole file is data.
 */
static void raw_lookup(struct raw *r, struct raw_map_cache *c, uint64_t pos)
{
	off_t d, h;

	if (c->valid && pos >= c->start && pos < c->end)
		return;
	if (c->valid && pos == c->end) {
		if (c->hole) {
			/* SEEK_DATA ended the hole here: data starts. */
			h = lseek(r->fd, (off_t)pos, SEEK_HOLE);
			if (h > (off_t)pos) {
				raw_cache_set(c, pos, (uint64_t)h, false);
				return;
			}
		} else {
			d = lseek(r->fd, (off_t)pos, SEEK_DATA);
			if (d > (off_t)pos) {
				raw_cache_set(c, pos, (uint64_t)d, true);
				return;
			}
			if (d < 0 && errno == ENXIO) {
				raw_cache_set(c, pos, UINT64_MAX, true);
				return;
			}
		}
		/* The file changed under the cache: look afresh. */
	}
	d = lseek(r->fd, (off_t)pos, SEEK_DATA);
	if (d < 0) {
		/* ENXIO: no data at or after pos. */
		raw_cache_set(c, pos, UINT64_MAX, errno == ENXIO);
		return;
	}
	if ((uint64_t)d > pos) {
		raw_cache_set(c, pos, (uint64_t)d, true);
		return;
	}
	h = lseek(r->fd, (off_t)pos, SEEK_HOLE);
	raw_cache_set(c, pos, h > (off_t)pos ? (uint64_t)h : UINT64_MAX,
		      false);
}

/*
 * The extent at pos up to limit as the engine and map() see it: raw
 * boundaries rounded to the block size, data outward and holes inward, so
 * a length is a multiple of the block size unless it ends at limit (the
 * engine's get_block contract).  A hole smaller than a block reads as
 * data (zeros from the file).
 */
void raw_extent(struct raw *r, struct raw_map_cache *c, uint64_t pos,
		uint64_t limit, bool *hole, uint64_t *len)
{
	uint64_t blk = r->block_size, cur = pos, e;

	raw_lookup(r, c, pos);
	if (c->hole) {
		e = round_down_u64(c->end, blk);
		if (e > pos || c->end >= limit) {
			*hole = true;
			*len = (e > pos && e < limit ? e : limit) - pos;
			return;
		}
		cur = c->end;
	}
	*hole = false;
	for (;;) {
		raw_lookup(r, c, cur);
		if (c->hole) {
			/* Only when the file changed under us. */
			break;
		}
		e = round_up_u64(c->end, blk);
		if (e >= limit)
			break;
		raw_lookup(r, c, c->end);
		if (!c->hole) {
			cur = c->start;
			continue;
		}
		if (round_down_u64(c->end, blk) > e) {
			*len = e - pos;
			return;
		}
		if (c->end >= limit)
			break;
		cur = c->end;
	}
	*len = limit - pos;
}

/*
 * Whether the file has no hole, as the lookups below would see it: the
 * first hole is its end.  Unwritten extents (fallocate) count as holes on
 * most file systems, and stay cheaper as holes (zero-filled without an
 * I/O round trip).  A file system without SEEK_HOLE is all data, as for
 * raw_lookup.  Open, before any I/O.
 */
bool raw_has_no_hole(int fd, uint64_t size)
{
	off_t h;

	if (size == 0)
		return false;
	h = lseek(fd, 0, SEEK_HOLE);
	return h < 0 ? errno == EINVAL : (uint64_t)h >= size;
}

/* A hole may exist from now on (a punch, a zeroed range, the size grown):
 * reads look for holes again.  Before the operation that makes it. */
void raw_holes_made(struct raw *r)
{
	if (atomic_load_explicit(&r->all_data, memory_order_relaxed))
		atomic_store(&r->all_data, false);
}

/*
 * get_block for the engine: direct mapping on the image fd.  Reads
 * (create == false, also the reads of a read-modify-write) report holes;
 * map_private is the request's struct raw_map_cache.  Submitting or
 * completion thread; lseek does not wait for data I/O.
 */
static int raw_get_block(struct backend *b, void *map_private, uint64_t pos,
			 uint64_t len, bool create, struct dio_map *map)
{
	struct raw *r = b->priv;

	map->fd = r->fd;
	map->phys = pos;
	/* A format's store: the format maps its own holes; no lseek.  Nor
	 * on a file without holes (the lseeks cost about 8% of the daemon's
	 * CPU on 4 KiB reads). */
	if (create || r->store ||
	    atomic_load_explicit(&r->all_data, memory_order_relaxed)) {
		map->len = len;
		map->hole = false;
		return 0;
	}
	raw_extent(r, map_private, pos, pos + len, &map->hole, &map->len);
	return 0;
}

/* The engine's parameters for a request of count bytes. */
void raw_dio_params(struct raw *r, struct dio_params *p, size_t count,
		    struct raw_map_cache *mc, unsigned int flags)
{
	*p = (struct dio_params){
		.engine = &r->dio,
		.count = count,
		.blkbits = r->blkbits,
		.dev_blkbits = r->dev_blkbits,
		.get_block = raw_get_block,
		.map_private = mc,
		.flags = flags,
	};
}

/* The data or hole extent at pos (pos < size, clipped to len).  Worker
 * thread. */
int raw_map(struct backend *b, uint64_t pos, uint64_t len,
	    struct backend_extent *ext)
{
	struct raw *r = b->priv;
	struct raw_map_cache c = { 0 };

	raw_extent(r, &c, pos, pos + len, &ext->hole, &ext->len);
	return 0;
}
