/* SPDX-License-Identifier: MIT */
/*
 * Encode, decode and validate the cow format's on-disk structures
 * (FORMAT.md), compute its checksums, and create new images.
 */
#include "backends/cow/format.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <isa-l/crc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

int cow_bad(struct cow_err *err, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return -EUCLEAN;
}

/* ---- checksums ---- */

uint32_t cow_crc32c(const void *buf, size_t len)
{
	return crc32_iscsi((unsigned char *)buf, (int)len, 0xFFFFFFFFu) ^
	       0xFFFFFFFFu;
}

uint64_t cow_csum_block(uint8_t csum_type, const void *block)
{
	if (csum_type == COW_CSUM_XXHASH64)
		return XXH64(block, COW_BLOCK_SIZE, 0);
	return cow_crc32c(block, COW_BLOCK_SIZE);
}

/* Streaming state for one block split across iovecs. */
struct csum_stream {
	uint8_t type;
	uint32_t crc;
	XXH64_state_t xxh;
};

static void csum_stream_start(struct csum_stream *s, uint8_t type)
{
	s->type = type;
	s->crc = 0xFFFFFFFFu;
	if (type == COW_CSUM_XXHASH64)
		XXH64_reset(&s->xxh, 0);
}

static void csum_stream_add(struct csum_stream *s, const void *p, size_t n)
{
	if (s->type == COW_CSUM_XXHASH64)
		XXH64_update(&s->xxh, p, n);
	else
		s->crc = crc32_iscsi((unsigned char *)p, (int)n, s->crc);
}

static uint64_t csum_stream_end(struct csum_stream *s)
{
	if (s->type == COW_CSUM_XXHASH64)
		return XXH64_digest(&s->xxh);
	return s->crc ^ 0xFFFFFFFFu;
}

void cow_csum_iov(uint8_t csum_type, const struct iovec *iov, int nr_iov,
		  size_t nr_blocks, uint64_t *out)
{
	size_t blk = 0, in_blk = 0, off = 0;
	struct csum_stream s;
	int i = 0;

	while (blk < nr_blocks && i < nr_iov) {
		const uint8_t *p = (const uint8_t *)iov[i].iov_base + off;
		size_t left = iov[i].iov_len - off;
		size_t n;

		if (in_blk == 0 && left >= COW_BLOCK_SIZE) {
			/* The common case: a whole block in one piece. */
			out[blk++] = cow_csum_block(csum_type, p);
			off += COW_BLOCK_SIZE;
		} else {
			if (in_blk == 0)
				csum_stream_start(&s, csum_type);
			n = MIN(left, COW_BLOCK_SIZE - in_blk);
			csum_stream_add(&s, p, n);
			in_blk += n;
			off += n;
			if (in_blk == COW_BLOCK_SIZE) {
				out[blk++] = csum_stream_end(&s);
				in_blk = 0;
			}
		}
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
}

const char *cow_csum_name(uint8_t csum_type)
{
	switch (csum_type) {
	case COW_CSUM_CRC32C:
		return "crc32c";
	case COW_CSUM_XXHASH64:
		return "xxhash64";
	default:
		return NULL;
	}
}

uint8_t cow_csum_parse(const char *name)
{
	if (!name)
		return 0;
	if (!strcmp(name, "crc32c"))
		return COW_CSUM_CRC32C;
	if (!strcmp(name, "xxhash64"))
		return COW_CSUM_XXHASH64;
	return 0;
}

/* ---- tree shape ---- */

unsigned int cow_tree_entries(enum cow_tree_kind kind, unsigned int level)
{
	if (level > 0)
		return COW_INTERIOR_ENTRIES;
	switch (kind) {
	case COW_TREE_MAP:
		return COW_MAP_ENTRIES;
	case COW_TREE_REFCOUNT:
		return COW_RC_ENTRIES;
	case COW_TREE_VOLUME:
		return COW_VOL_ENTRIES;
	}
	return 0;
}

uint64_t cow_tree_span(enum cow_tree_kind kind, unsigned int level)
{
	uint64_t span = cow_tree_entries(kind, 0);
	unsigned int l;

	for (l = 0; l < level; l++) {
		if (span > UINT64_MAX / COW_INTERIOR_ENTRIES)
			return UINT64_MAX;
		span *= COW_INTERIOR_ENTRIES;
	}
	return span;
}

uint64_t cow_max_volume_size(void)
{
	uint64_t blocks = (uint64_t)INT64_MAX / COW_BLOCK_SIZE;
	uint64_t cap = cow_tree_capacity(COW_TREE_MAP, COW_MAX_HEIGHT);

	return MIN(blocks, cap) * COW_BLOCK_SIZE;
}

unsigned int cow_tree_height_for(enum cow_tree_kind kind, uint64_t nr_keys)
{
	unsigned int h;

	for (h = 1; h <= COW_MAX_HEIGHT; h++)
		if (cow_tree_capacity(kind, h) >= nr_keys)
			return h;
	return 0;
}

const char *cow_tree_name(enum cow_tree_kind kind)
{
	switch (kind) {
	case COW_TREE_MAP:
		return "block map";
	case COW_TREE_REFCOUNT:
		return "refcount tree";
	case COW_TREE_VOLUME:
		return "volume tree";
	}
	return "unknown tree";
}

/* ---- superblock ---- */

#define SB_OFF_MAGIC 0
#define SB_OFF_VERSION 8
#define SB_OFF_SLOT 12
#define SB_OFF_INCOMPAT 16
#define SB_OFF_RO_COMPAT 24
#define SB_OFF_COMPAT 32
#define SB_OFF_GENERATION 40
#define SB_OFF_UUID 48
#define SB_OFF_BLOCK_SIZE 64
#define SB_OFF_CSUM_TYPE 68
#define SB_OFF_FIRST_BLOCK 72
#define SB_OFF_NR_BLOCKS 80
#define SB_OFF_CREATE_TIME 88
#define SB_OFF_COMMIT_TIME 96
#define SB_OFF_DEFAULT_VOLUME 104
#define SB_OFF_NEXT_VOLUME_ID 112
#define SB_OFF_REFCOUNT_ROOT 120
#define SB_OFF_VOLUME_ROOT 152
#define SB_OFF_RESERVED 184

/* A 32-byte root pointer. */
static void ptr_encode(uint8_t *p, const struct cow_ptr *ptr)
{
	memset(p, 0, 32);
	cow_put_le64(p, ptr->pbn);
	cow_put_le64(p + 8, ptr->gen);
	cow_put_le64(p + 16, ptr->used);
	p[24] = ptr->height;
}

static bool ptr_decode(const uint8_t *p, struct cow_ptr *ptr)
{
	int i;

	ptr->pbn = cow_get_le64(p);
	ptr->gen = cow_get_le64(p + 8);
	ptr->used = cow_get_le64(p + 16);
	ptr->height = p[24];
	for (i = 25; i < 32; i++)
		if (p[i])
			return false;
	return true;
}

/* Range checks of a root pointer: NULL, or what is wrong. */
static const char *root_problem(enum cow_tree_kind kind,
				const struct cow_ptr *p, uint64_t generation,
				uint64_t first_block, uint64_t nr_blocks)
{
	if (p->height < 1 || p->height > COW_MAX_HEIGHT)
		return "height out of range";
	if (p->pbn == 0)
		return p->gen || p->used ? "empty root with generation or used" :
					   NULL;
	if (p->pbn < first_block || p->pbn >= nr_blocks)
		return "root page outside the container";
	if (p->gen == 0 || p->gen > generation)
		return "root generation newer than the superblock";
	if (p->used > cow_tree_capacity(kind, p->height))
		return "used count larger than the tree";
	return NULL;
}

void cow_sb_encode(const struct cow_sb *sb, uint8_t *block)
{
	memset(block, 0, COW_BLOCK_SIZE);
	memcpy(block + SB_OFF_MAGIC, COW_MAGIC, 8);
	cow_put_le32(block + SB_OFF_VERSION, sb->version);
	cow_put_le32(block + SB_OFF_SLOT, sb->slot);
	cow_put_le64(block + SB_OFF_INCOMPAT, sb->incompat);
	cow_put_le64(block + SB_OFF_RO_COMPAT, sb->ro_compat);
	cow_put_le64(block + SB_OFF_COMPAT, sb->compat);
	cow_put_le64(block + SB_OFF_GENERATION, sb->generation);
	memcpy(block + SB_OFF_UUID, sb->uuid, 16);
	cow_put_le32(block + SB_OFF_BLOCK_SIZE, sb->block_size);
	block[SB_OFF_CSUM_TYPE] = sb->csum_type;
	cow_put_le64(block + SB_OFF_FIRST_BLOCK, sb->first_block);
	cow_put_le64(block + SB_OFF_NR_BLOCKS, sb->nr_blocks);
	cow_put_le64(block + SB_OFF_CREATE_TIME, sb->create_time);
	cow_put_le64(block + SB_OFF_COMMIT_TIME, sb->commit_time);
	cow_put_le64(block + SB_OFF_DEFAULT_VOLUME, sb->default_volume);
	cow_put_le64(block + SB_OFF_NEXT_VOLUME_ID, sb->next_volume_id);
	ptr_encode(block + SB_OFF_REFCOUNT_ROOT, &sb->refcount_root);
	ptr_encode(block + SB_OFF_VOLUME_ROOT, &sb->volume_root);
	cow_put_le32(block + COW_SB_CSUM_OFF,
		     cow_crc32c(block, COW_SB_CSUM_OFF));
}

bool cow_sb_has_magic(const uint8_t *block)
{
	return memcmp(block, COW_MAGIC, 8) == 0;
}

int cow_sb_decode(const uint8_t *block, uint32_t slot, struct cow_sb *sb,
		  struct cow_err *err)
{
	uint32_t stored, computed;
	const char *why;
	size_t i;

	memset(sb, 0, sizeof(*sb));
	if (!cow_sb_has_magic(block))
		return cow_bad(err, "no cow magic");
	stored = cow_get_le32(block + COW_SB_CSUM_OFF);
	computed = cow_crc32c(block, COW_SB_CSUM_OFF);
	if (stored != computed)
		return cow_bad(err, "bad checksum (stored 0x%08x, computed 0x%08x)",
			       stored, computed);
	sb->version = cow_get_le32(block + SB_OFF_VERSION);
	if (sb->version != COW_VERSION)
		return cow_bad(err, "format version %u (this dioloop reads version %u)",
			       sb->version, COW_VERSION);
	sb->slot = cow_get_le32(block + SB_OFF_SLOT);
	if (sb->slot != slot)
		return cow_bad(err, "written for slot %u, found in slot %u",
			       sb->slot, slot);
	sb->incompat = cow_get_le64(block + SB_OFF_INCOMPAT);
	sb->ro_compat = cow_get_le64(block + SB_OFF_RO_COMPAT);
	sb->compat = cow_get_le64(block + SB_OFF_COMPAT);
	sb->generation = cow_get_le64(block + SB_OFF_GENERATION);
	memcpy(sb->uuid, block + SB_OFF_UUID, 16);
	sb->block_size = cow_get_le32(block + SB_OFF_BLOCK_SIZE);
	sb->csum_type = block[SB_OFF_CSUM_TYPE];
	sb->first_block = cow_get_le64(block + SB_OFF_FIRST_BLOCK);
	sb->nr_blocks = cow_get_le64(block + SB_OFF_NR_BLOCKS);
	sb->create_time = cow_get_le64(block + SB_OFF_CREATE_TIME);
	sb->commit_time = cow_get_le64(block + SB_OFF_COMMIT_TIME);
	sb->default_volume = cow_get_le64(block + SB_OFF_DEFAULT_VOLUME);
	sb->next_volume_id = cow_get_le64(block + SB_OFF_NEXT_VOLUME_ID);
	if (!ptr_decode(block + SB_OFF_REFCOUNT_ROOT, &sb->refcount_root) ||
	    !ptr_decode(block + SB_OFF_VOLUME_ROOT, &sb->volume_root))
		return cow_bad(err, "reserved bytes of a root pointer are not zero");
	for (i = SB_OFF_CSUM_TYPE + 1; i < SB_OFF_FIRST_BLOCK; i++)
		if (block[i])
			return cow_bad(err, "reserved byte %zu is not zero", i);
	for (i = SB_OFF_RESERVED; i < COW_SB_CSUM_OFF; i++)
		if (block[i])
			return cow_bad(err, "reserved byte %zu is not zero", i);

	if (sb->block_size != COW_BLOCK_SIZE)
		return cow_bad(err, "block size %u (only %zu is supported)",
			       sb->block_size, COW_BLOCK_SIZE);
	if (!cow_csum_name(sb->csum_type))
		return cow_bad(err, "unknown checksum type %u", sb->csum_type);
	if (sb->first_block != COW_FIRST_BLOCK)
		return cow_bad(err, "first block %llu (expected %u)",
			       (unsigned long long)sb->first_block,
			       COW_FIRST_BLOCK);
	if (sb->generation == 0)
		return cow_bad(err, "generation 0");
	if (sb->nr_blocks < sb->first_block ||
	    sb->nr_blocks > (UINT64_MAX >> COW_BLOCK_SHIFT))
		return cow_bad(err, "container size of %llu blocks is out of range",
			       (unsigned long long)sb->nr_blocks);
	why = root_problem(COW_TREE_REFCOUNT, &sb->refcount_root,
			   sb->generation, sb->first_block, sb->nr_blocks);
	if (!why && sb->refcount_root.pbn == 0)
		why = "empty (the superblock slots are always counted)";
	if (!why && sb->refcount_root.used > sb->nr_blocks)
		why = "more used blocks than the container has";
	if (!why && cow_tree_capacity(COW_TREE_REFCOUNT,
				      sb->refcount_root.height) <
		    sb->nr_blocks)
		why = "too low for the container's size";
	if (why)
		return cow_bad(err, "refcount root: %s", why);
	why = root_problem(COW_TREE_VOLUME, &sb->volume_root, sb->generation,
			   sb->first_block, sb->nr_blocks);
	if (!why && sb->volume_root.pbn == 0)
		why = "empty (the default volume must exist)";
	if (why)
		return cow_bad(err, "volume root: %s", why);
	if (sb->default_volume == 0 ||
	    sb->default_volume >= sb->next_volume_id ||
	    sb->default_volume >= cow_tree_capacity(COW_TREE_VOLUME,
						    sb->volume_root.height))
		return cow_bad(err, "default volume id %llu is out of range",
			       (unsigned long long)sb->default_volume);
	return 0;
}

int cow_sb_check_features(const struct cow_sb *sb, bool rdonly,
			  struct cow_err *err)
{
	uint64_t unknown = sb->incompat & ~COW_INCOMPAT_KNOWN;

	if (unknown) {
		cow_bad(err, "unknown incompatible features 0x%llx: this dioloop cannot open the image",
			(unsigned long long)unknown);
		return -EOPNOTSUPP;
	}
	unknown = sb->ro_compat & ~COW_RO_COMPAT_KNOWN;
	if (unknown && !rdonly) {
		cow_bad(err, "unknown read-only-compatible features 0x%llx: the image can only be opened read-only",
			(unsigned long long)unknown);
		return -EROFS;
	}
	return 0;
}

int cow_sb_read(int fd, struct cow_sb *sb, uint32_t *slot,
		struct cow_err *fallback, struct cow_err *err)
{
	size_t len = COW_NR_SLOTS * COW_BLOCK_SIZE, got = 0;
	uint8_t *buf;
	int ret;

	if (posix_memalign((void **)&buf, COW_BLOCK_SIZE, len))
		return -ENOMEM;
	memset(buf, 0, len);
	while (got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			fallback->msg[0] = '\0';
			cow_bad(err, "reading the superblocks: %s",
				g_strerror(errno));
			free(buf);
			return ret;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	ret = cow_sb_choose(buf, got, sb, slot, fallback, err);
	free(buf);
	return ret;
}

int cow_sb_choose(const uint8_t *buf, size_t got, struct cow_sb *sb,
		  uint32_t *slot, struct cow_err *fallback,
		  struct cow_err *err)
{
	struct cow_sb cand[COW_NR_SLOTS];
	struct cow_err why[COW_NR_SLOTS];
	bool ok[COW_NR_SLOTS], magic = false;
	uint32_t s, pick;
	int ret = 0;

	fallback->msg[0] = '\0';
	for (s = 0; s < COW_NR_SLOTS; s++) {
		const uint8_t *blk = buf + s * COW_BLOCK_SIZE;

		magic |= cow_sb_has_magic(blk);
		ok[s] = cow_sb_decode(blk, s, &cand[s], &why[s]) == 0;
		if (!ok[s] && got < (s + 1) * COW_BLOCK_SIZE)
			cow_bad(&why[s], "missing (the file is %zu bytes)",
				got);
	}
	if (!magic) {
		ret = -EINVAL;
		cow_bad(err, "not a cow image (no %s magic in either superblock)",
			COW_MAGIC);
		goto out;
	}
	if (!ok[0] && !ok[1]) {
		ret = -EUCLEAN;
		cow_bad(err, "both superblock copies are bad: copy 0: %s; copy 1: %s",
			why[0].msg, why[1].msg);
		goto out;
	}
	if (ok[0] && ok[1] && memcmp(cand[0].uuid, cand[1].uuid, 16)) {
		/* Two images' superblocks: trust the newer, say so. */
		pick = cand[1].generation > cand[0].generation;
		ok[!pick] = false;
		cow_bad(&why[!pick], "belongs to another image (uuid differs)");
	}
	if (ok[0] && ok[1])
		pick = cand[1].generation > cand[0].generation;
	else
		pick = ok[1];
	if (!ok[!pick])
		snprintf(fallback->msg, sizeof(fallback->msg),
			 "superblock copy %u is bad (%.120s); using copy %u (generation %llu)",
			 !pick, why[!pick].msg, pick,
			 (unsigned long long)cand[pick].generation);
	*sb = cand[pick];
	*slot = pick;
out:
	return ret;
}

/* ---- metadata pages ---- */

#define PG_OFF_MAGIC 0
#define PG_OFF_TREE 4
#define PG_OFF_LEVEL 5
#define PG_OFF_NR 6
#define PG_OFF_CSUM 8
#define PG_OFF_RESERVED 12
#define PG_OFF_GEN 16
#define PG_OFF_PBN 24
#define PG_OFF_FIRST_KEY 32
#define PG_OFF_OWNER 40
#define PG_OFF_UUID 48

/* crc32c of the page with its checksum field taken as zero. */
static uint32_t page_csum(const uint8_t *page)
{
	static const uint8_t zero[4];
	uint32_t crc = 0xFFFFFFFFu;

	crc = crc32_iscsi((unsigned char *)page, PG_OFF_CSUM, crc);
	crc = crc32_iscsi((unsigned char *)zero, 4, crc);
	crc = crc32_iscsi((unsigned char *)page + PG_OFF_CSUM + 4,
			  (int)(COW_BLOCK_SIZE - PG_OFF_CSUM - 4), crc);
	return crc ^ 0xFFFFFFFFu;
}

void cow_page_seal(uint8_t *page, const struct cow_page_hdr *hdr)
{
	memset(page, 0, COW_PAGE_HDR);
	memcpy(page + PG_OFF_MAGIC, COW_PAGE_MAGIC, 4);
	page[PG_OFF_TREE] = hdr->tree;
	page[PG_OFF_LEVEL] = hdr->level;
	page[PG_OFF_NR] = (uint8_t)hdr->nr_entries;
	page[PG_OFF_NR + 1] = (uint8_t)(hdr->nr_entries >> 8);
	cow_put_le64(page + PG_OFF_GEN, hdr->generation);
	cow_put_le64(page + PG_OFF_PBN, hdr->pbn);
	cow_put_le64(page + PG_OFF_FIRST_KEY, hdr->first_key);
	cow_put_le64(page + PG_OFF_OWNER, hdr->owner);
	memcpy(page + PG_OFF_UUID, hdr->uuid, 16);
	cow_put_le32(page + PG_OFF_CSUM, page_csum(page));
}

int cow_page_verify(const uint8_t *page, const struct cow_page_hdr *want,
		    struct cow_err *err)
{
	const char *tree = cow_tree_name((enum cow_tree_kind)want->tree);
	unsigned long long pbn = (unsigned long long)want->pbn;
	uint32_t stored, computed;
	uint16_t nr;
	uint64_t v;

	if (memcmp(page + PG_OFF_MAGIC, COW_PAGE_MAGIC, 4))
		return cow_bad(err, "%s page at block %llu: not a metadata page (bad magic)",
			       tree, pbn);
	stored = cow_get_le32(page + PG_OFF_CSUM);
	computed = page_csum(page);
	if (stored != computed)
		return cow_bad(err, "%s page at block %llu: bad checksum (stored 0x%08x, computed 0x%08x)",
			       tree, pbn, stored, computed);
	if (page[PG_OFF_TREE] != want->tree)
		return cow_bad(err, "%s page at block %llu: belongs to tree type %u",
			       tree, pbn, page[PG_OFF_TREE]);
	if (page[PG_OFF_LEVEL] != want->level)
		return cow_bad(err, "%s page at block %llu: level %u, expected %u",
			       tree, pbn, page[PG_OFF_LEVEL], want->level);
	nr = (uint16_t)(page[PG_OFF_NR] | page[PG_OFF_NR + 1] << 8);
	if (nr != want->nr_entries)
		return cow_bad(err, "%s page at block %llu: %u entries, expected %u",
			       tree, pbn, nr, want->nr_entries);
	if (cow_get_le32(page + PG_OFF_RESERVED))
		return cow_bad(err, "%s page at block %llu: reserved header bytes are not zero",
			       tree, pbn);
	v = cow_get_le64(page + PG_OFF_PBN);
	if (v != want->pbn)
		return cow_bad(err, "%s page at block %llu: written for block %llu (misdirected write)",
			       tree, pbn, (unsigned long long)v);
	v = cow_get_le64(page + PG_OFF_GEN);
	if (v != want->generation)
		return cow_bad(err, "%s page at block %llu: generation %llu, expected %llu (stale or lost write)",
			       tree, pbn, (unsigned long long)v,
			       (unsigned long long)want->generation);
	v = cow_get_le64(page + PG_OFF_FIRST_KEY);
	if (v != want->first_key)
		return cow_bad(err, "%s page at block %llu: covers keys from %llu, expected %llu",
			       tree, pbn, (unsigned long long)v,
			       (unsigned long long)want->first_key);
	if (memcmp(page + PG_OFF_UUID, want->uuid, 16))
		return cow_bad(err, "%s page at block %llu: belongs to another image (uuid differs)",
			       tree, pbn);
	return 0;
}

/* ---- volume entries ---- */

#define VOL_OFF_ID 0
#define VOL_OFF_FLAGS 8
#define VOL_OFF_PARENT 16
#define VOL_OFF_SIZE 24
#define VOL_OFF_ROOT 32
#define VOL_OFF_CREATE_GEN 64
#define VOL_OFF_CREATE_TIME 72
#define VOL_OFF_SNAP_GEN 80
#define VOL_OFF_NAME 88

int cow_vol_get(const uint8_t *page, unsigned int i,
		struct cow_volume_entry *v, struct cow_err *err)
{
	const uint8_t *e = page + COW_PAGE_HDR + i * COW_VOL_ENTRY_SIZE;
	size_t n, k;

	memset(v, 0, sizeof(*v));
	v->id = cow_get_le64(e + VOL_OFF_ID);
	if (v->id == 0) {
		for (k = 0; k < COW_VOL_ENTRY_SIZE; k++)
			if (e[k])
				return cow_bad(err, "free volume slot %u is not zero",
					       i);
		return 0;
	}
	v->flags = cow_get_le64(e + VOL_OFF_FLAGS);
	v->parent = cow_get_le64(e + VOL_OFF_PARENT);
	v->size = cow_get_le64(e + VOL_OFF_SIZE);
	if (!ptr_decode(e + VOL_OFF_ROOT, &v->map_root))
		return cow_bad(err, "volume %llu: reserved bytes of its map root are not zero",
			       (unsigned long long)v->id);
	v->create_generation = cow_get_le64(e + VOL_OFF_CREATE_GEN);
	v->create_time = cow_get_le64(e + VOL_OFF_CREATE_TIME);
	v->last_snapshot_generation = cow_get_le64(e + VOL_OFF_SNAP_GEN);
	n = strnlen((const char *)e + VOL_OFF_NAME, COW_VOL_NAME_MAX + 1);
	if (n > COW_VOL_NAME_MAX)
		return cow_bad(err, "volume %llu: name is not NUL-terminated",
			       (unsigned long long)v->id);
	for (k = n; k <= COW_VOL_NAME_MAX; k++)
		if (e[VOL_OFF_NAME + k])
			return cow_bad(err, "volume %llu: bytes after its name are not zero",
				       (unsigned long long)v->id);
	memcpy(v->name, e + VOL_OFF_NAME, n);
	if (v->flags & ~COW_VOL_READONLY)
		return cow_bad(err, "volume %llu: unknown flags 0x%llx",
			       (unsigned long long)v->id,
			       (unsigned long long)v->flags);
	if (v->size % COW_BLOCK_SIZE || v->size > cow_max_volume_size())
		return cow_bad(err, "volume %llu: size %llu is not a multiple of %zu up to %llu",
			       (unsigned long long)v->id,
			       (unsigned long long)v->size, COW_BLOCK_SIZE,
			       (unsigned long long)cow_max_volume_size());
	if (v->map_root.height < 1 || v->map_root.height > COW_MAX_HEIGHT ||
	    cow_tree_capacity(COW_TREE_MAP, v->map_root.height) <
		    v->size / COW_BLOCK_SIZE)
		return cow_bad(err, "volume %llu: map height %u does not cover its size",
			       (unsigned long long)v->id, v->map_root.height);
	if (v->map_root.pbn == 0 && (v->map_root.gen || v->map_root.used))
		return cow_bad(err, "volume %llu: empty map root with generation or used",
			       (unsigned long long)v->id);
	if (v->map_root.used > v->size / COW_BLOCK_SIZE)
		return cow_bad(err, "volume %llu: more mapped blocks (%llu) than its size",
			       (unsigned long long)v->id,
			       (unsigned long long)v->map_root.used);
	return 0;
}

void cow_vol_set(uint8_t *page, unsigned int i,
		 const struct cow_volume_entry *v)
{
	uint8_t *e = page + COW_PAGE_HDR + i * COW_VOL_ENTRY_SIZE;

	memset(e, 0, COW_VOL_ENTRY_SIZE);
	if (v->id == 0)
		return;
	cow_put_le64(e + VOL_OFF_ID, v->id);
	cow_put_le64(e + VOL_OFF_FLAGS, v->flags);
	cow_put_le64(e + VOL_OFF_PARENT, v->parent);
	cow_put_le64(e + VOL_OFF_SIZE, v->size);
	ptr_encode(e + VOL_OFF_ROOT, &v->map_root);
	cow_put_le64(e + VOL_OFF_CREATE_GEN, v->create_generation);
	cow_put_le64(e + VOL_OFF_CREATE_TIME, v->create_time);
	cow_put_le64(e + VOL_OFF_SNAP_GEN, v->last_snapshot_generation);
	memcpy(e + VOL_OFF_NAME, v->name,
	       strnlen(v->name, COW_VOL_NAME_MAX));
}

bool cow_leaf_entry_used(enum cow_tree_kind kind, const uint8_t *page,
			 unsigned int i)
{
	switch (kind) {
	case COW_TREE_MAP:
		return cow_get_le64(page + COW_PAGE_HDR +
				    i * COW_MAP_ENTRY_SIZE) != 0;
	case COW_TREE_REFCOUNT:
		return cow_rc_get(page, i) != 0;
	case COW_TREE_VOLUME:
		return cow_get_le64(page + COW_PAGE_HDR +
				    i * COW_VOL_ENTRY_SIZE) != 0;
	}
	return false;
}

/* ---- creating an image ---- */

/* pwrite all of buf at off: 0 or -errno. */
static int write_all(int fd, const void *buf, size_t len, off_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf = (const uint8_t *)buf + n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* fsync the directory holding path, so the new name is durable. */
static int sync_parent_dir(const char *path)
{
	char *dir = g_path_get_dirname(path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;

	if (fd < 0 || fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	g_free(dir);
	return ret;
}

int cow_format_encode(const struct cow_format_opts *opts, uint8_t *buf,
		      struct cow_err *err)
{
	enum { VOL_PBN = 2, RC_PBN = 3 };
	uint8_t csum_type = opts->csum_type ? opts->csum_type :
					      COW_CSUM_CRC32C;
	uint64_t nblocks = opts->size / COW_BLOCK_SIZE;
	unsigned int map_height = cow_tree_height_for(COW_TREE_MAP, nblocks);
	struct cow_volume_entry vol = { 0 };
	struct cow_page_hdr hdr = { 0 };
	struct cow_sb sb = { 0 };
	uint32_t s;
	int ret;

	if (opts->size == 0 || opts->size % COW_BLOCK_SIZE ||
	    opts->size > cow_max_volume_size() || map_height == 0) {
		cow_bad(err, "size %llu: must be a non-zero multiple of %zu",
			(unsigned long long)opts->size, COW_BLOCK_SIZE);
		return -EINVAL;
	}
	if (!cow_csum_name(csum_type)) {
		cow_bad(err, "unknown checksum type %u", csum_type);
		return -EINVAL;
	}
	sb.version = COW_VERSION;
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid)) {
		ret = -errno;
		cow_bad(err, "getrandom: %s", g_strerror(errno));
		return ret;
	}
	sb.generation = 1;
	sb.block_size = COW_BLOCK_SIZE;
	sb.csum_type = csum_type;
	sb.first_block = COW_FIRST_BLOCK;
	sb.nr_blocks = COW_FORMAT_BLOCKS;
	sb.create_time = sb.commit_time = (uint64_t)time(NULL);
	sb.default_volume = 1;
	sb.next_volume_id = 2;
	sb.refcount_root = (struct cow_ptr){ RC_PBN, 1, COW_FORMAT_BLOCKS, 1 };
	sb.volume_root = (struct cow_ptr){ VOL_PBN, 1, 1, 1 };

	memset(buf, 0, COW_FORMAT_BLOCKS * COW_BLOCK_SIZE);
	for (s = 0; s < COW_NR_SLOTS; s++) {
		sb.slot = s;
		cow_sb_encode(&sb, buf + s * COW_BLOCK_SIZE);
	}
	/* The volume tree: one leaf holding the default volume. */
	vol.id = 1;
	vol.size = opts->size;
	vol.map_root = (struct cow_ptr){ 0, 0, 0, (uint8_t)map_height };
	vol.create_generation = 1;
	vol.create_time = sb.create_time;
	cow_vol_set(buf + VOL_PBN * COW_BLOCK_SIZE, 1, &vol);
	hdr = (struct cow_page_hdr){ .tree = COW_TREE_VOLUME, .level = 0,
				     .nr_entries = COW_VOL_ENTRIES,
				     .generation = 1, .pbn = VOL_PBN };
	memcpy(hdr.uuid, sb.uuid, 16);
	cow_page_seal(buf + VOL_PBN * COW_BLOCK_SIZE, &hdr);
	/* The refcount tree: one leaf; every block so far is used once. */
	for (s = 0; s < COW_FORMAT_BLOCKS; s++)
		cow_rc_set(buf + RC_PBN * COW_BLOCK_SIZE, s, 1);
	hdr.tree = COW_TREE_REFCOUNT;
	hdr.nr_entries = COW_RC_ENTRIES;
	hdr.pbn = RC_PBN;
	cow_page_seal(buf + RC_PBN * COW_BLOCK_SIZE, &hdr);
	return 0;
}

int cow_format(const char *path, const struct cow_format_opts *opts,
	       struct cow_err *err)
{
	uint8_t *buf = g_malloc0(COW_FORMAT_BLOCKS * COW_BLOCK_SIZE);
	int fd, ret;

	ret = cow_format_encode(opts, buf, err);
	if (ret < 0) {
		g_free(buf);
		return ret;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  opts->mode ? opts->mode : 0644);
	if (fd < 0) {
		ret = -errno;
		cow_bad(err, "create %s: %s", path, g_strerror(errno));
		g_free(buf);
		return ret;
	}
	ret = write_all(fd, buf, COW_FORMAT_BLOCKS * COW_BLOCK_SIZE, 0);
	if (!ret && (fsync(fd) < 0 ||
		     (opts->created && fstat(fd, opts->created) < 0)))
		ret = -errno;
	if (!ret)
		ret = sync_parent_dir(path);
	g_free(buf);
	close(fd);
	if (ret) {
		cow_bad(err, "writing %s: %s", path, g_strerror(-ret));
		unlink(path);
	}
	return ret;
}
