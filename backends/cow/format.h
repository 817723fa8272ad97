/* SPDX-License-Identifier: MIT */
/*
 * The cow image format, version 1 (backends/cow/FORMAT.md): constants,
 * the decoded forms of the on-disk structures, and their encode/decode
 * with checksums.  Nothing here does I/O except cow_format() and
 * cow_sb_read(); everything decodes from and encodes into caller buffers.
 *
 * Decoders never trust their input: every field is range-checked and a
 * failure returns -EUCLEAN with a one-line reason in the caller's buffer
 * (struct cow_err), so a corrupt image yields a message, never a crash.
 */
#ifndef DIOLOOP_COW_FORMAT_H
#define DIOLOOP_COW_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define COW_BLOCK_SHIFT 12
#define COW_BLOCK_SIZE ((size_t)1 << COW_BLOCK_SHIFT)

#define COW_MAGIC "DLOOPCOW"		/* 8 bytes, no NUL on disk */
#define COW_VERSION 1u
#define COW_SB_SIZE 512u		/* bytes of the block that count */
#define COW_SB_CSUM_OFF 508u
#define COW_NR_SLOTS 2u
#define COW_FIRST_BLOCK 2u		/* blocks 0, 1: superblock slots */
#define COW_MAX_HEIGHT 8u

#define COW_PAGE_MAGIC "DLMP"		/* 4 bytes */
#define COW_PAGE_HDR 64u
#define COW_INTERIOR_ENTRIES 168u	/* 24-byte {pbn, gen, used} */
#define COW_INTERIOR_ENTRY_SIZE 24u
#define COW_MAP_ENTRIES 252u		/* 16-byte {pbn, csum} */
#define COW_MAP_ENTRY_SIZE 16u
#define COW_RC_ENTRIES 1008u		/* u32 refcount */
#define COW_RC_ENTRY_SIZE 4u
#define COW_VOL_ENTRIES 31u		/* 128-byte volume entries */
#define COW_VOL_ENTRY_SIZE 128u
#define COW_VOL_NAME_MAX 39u		/* bytes, plus a NUL */

#define COW_VOL_READONLY (UINT64_C(1) << 0)

/* Feature bits known to this version: none yet. */
#define COW_INCOMPAT_KNOWN UINT64_C(0)
#define COW_RO_COMPAT_KNOWN UINT64_C(0)

enum cow_csum_type {
	COW_CSUM_CRC32C = 1,
	COW_CSUM_XXHASH64 = 2,
};

enum cow_tree_kind {
	COW_TREE_MAP = 1,
	COW_TREE_REFCOUNT = 2,
	COW_TREE_VOLUME = 3,
};

/* A one-line reason for a decode or open failure. */
struct cow_err {
	char msg[200];
};

/* A pointer to a tree's root page (also the shape of interior entries,
 * without height). */
struct cow_ptr {
	uint64_t pbn;		/* 0: empty */
	uint64_t gen;
	uint64_t used;		/* non-empty leaf entries below */
	uint8_t height;		/* roots only: levels, 1..COW_MAX_HEIGHT */
};

struct cow_sb {
	uint32_t version;
	uint32_t slot;
	uint64_t incompat, ro_compat, compat;
	uint64_t generation;
	uint8_t uuid[16];
	uint32_t block_size;
	uint8_t csum_type;		/* enum cow_csum_type */
	uint64_t first_block;
	uint64_t nr_blocks;
	uint64_t create_time, commit_time;
	uint64_t default_volume;
	uint64_t next_volume_id;
	struct cow_ptr refcount_root;
	struct cow_ptr volume_root;
};

struct cow_volume_entry {
	uint64_t id;			/* 0: free slot */
	uint64_t flags;			/* COW_VOL_* */
	uint64_t parent;
	uint64_t size;			/* bytes, multiple of COW_BLOCK_SIZE */
	struct cow_ptr map_root;
	uint64_t create_generation;
	uint64_t create_time;
	uint64_t last_snapshot_generation;
	char name[COW_VOL_NAME_MAX + 1];
};

/* The fixed header of a metadata page. */
struct cow_page_hdr {
	uint8_t tree;			/* enum cow_tree_kind */
	uint8_t level;
	uint16_t nr_entries;
	uint64_t generation;
	uint64_t pbn;
	uint64_t first_key;
	uint64_t owner;
	uint8_t uuid[16];
};

/* ---- little-endian helpers ---- */

static inline uint64_t cow_get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint32_t cow_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline void cow_put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline void cow_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* ---- checksums ---- */

/* Standard CRC-32C of len bytes (libisal). */
uint32_t cow_crc32c(const void *buf, size_t len);
/* The data checksum of one 4096-byte block in memory. */
uint64_t cow_csum_block(uint8_t csum_type, const void *block);
/*
 * Data checksums of nr_blocks consecutive blocks held by iov (which may
 * split blocks anywhere) into out[]; the iovecs hold at least
 * nr_blocks * 4096 bytes.
 */
void cow_csum_iov(uint8_t csum_type, const struct iovec *iov, int nr_iov,
		  size_t nr_blocks, uint64_t *out);
/* The name of a checksum type ("crc32c", "xxhash64") or NULL. */
const char *cow_csum_name(uint8_t csum_type);
/* The type named name, or 0. */
uint8_t cow_csum_parse(const char *name);

/* ---- trees: shape ---- */

/* Entries in a page of kind at level. */
unsigned int cow_tree_entries(enum cow_tree_kind kind, unsigned int level);
/* Keys covered by one page of kind at level (saturates at UINT64_MAX). */
uint64_t cow_tree_span(enum cow_tree_kind kind, unsigned int level);
/* Keys covered by a tree of kind and height. */
static inline uint64_t cow_tree_capacity(enum cow_tree_kind kind,
					 unsigned int height)
{
	return cow_tree_span(kind, height - 1);
}
/* The least height (1..COW_MAX_HEIGHT) covering nr_keys keys, or 0. */
unsigned int cow_tree_height_for(enum cow_tree_kind kind, uint64_t nr_keys);
const char *cow_tree_name(enum cow_tree_kind kind);
/* The largest volume size: a multiple of COW_BLOCK_SIZE, <= INT64_MAX
 * (an off_t), whose blocks a map of COW_MAX_HEIGHT covers. */
uint64_t cow_max_volume_size(void);

/* ---- superblock ---- */

/* Encode sb into a COW_BLOCK_SIZE buffer (zeros after COW_SB_SIZE). */
void cow_sb_encode(const struct cow_sb *sb, uint8_t *block);
/*
 * Decode and validate the superblock in block, read from slot: 0, or
 * -EUCLEAN (why in err; bad magic says "no cow magic").  Feature bits are
 * not judged here (cow_sb_check_features).
 */
int cow_sb_decode(const uint8_t *block, uint32_t slot, struct cow_sb *sb,
		  struct cow_err *err);
/* 0; -EOPNOTSUPP for unknown incompat bits; -EROFS for unknown ro_compat
 * bits unless rdonly.  Why in err. */
int cow_sb_check_features(const struct cow_sb *sb, bool rdonly,
			  struct cow_err *err);
/* True when block starts with the cow magic (either slot's block). */
bool cow_sb_has_magic(const uint8_t *block);

/*
 * Read both superblock slots of fd (O_DIRECT is fine) and choose one
 * (FORMAT.md section 3): 0 with *sb and *slot, or -errno with the reason
 * in err (-EINVAL: not a cow image; -EUCLEAN: both copies bad; -EIO).
 * When one copy is bad and the other used, *fallback says why.
 */
int cow_sb_read(int fd, struct cow_sb *sb, uint32_t *slot,
		struct cow_err *fallback, struct cow_err *err);
/* cow_sb_read over buf, the first got bytes of the image (got <=
 * COW_NR_SLOTS * COW_BLOCK_SIZE; the rest of buf zeroed). */
int cow_sb_choose(const uint8_t *buf, size_t got, struct cow_sb *sb,
		  uint32_t *slot, struct cow_err *fallback,
		  struct cow_err *err);

/* ---- metadata pages ---- */

/* Write hdr into page and seal it with its checksum (entries already in
 * place). */
void cow_page_seal(uint8_t *page, const struct cow_page_hdr *hdr);
/*
 * Check a page read through a pointer: magic, checksum, and that the
 * header matches want (tree, level, nr_entries, generation, pbn,
 * first_key, uuid; owner is not judged).  0 or -EUCLEAN with why.
 */
int cow_page_verify(const uint8_t *page, const struct cow_page_hdr *want,
		    struct cow_err *err);

/* Interior entry i of page. */
static inline void cow_interior_get(const uint8_t *page, unsigned int i,
				    struct cow_ptr *p)
{
	const uint8_t *e = page + COW_PAGE_HDR + i * COW_INTERIOR_ENTRY_SIZE;

	p->pbn = cow_get_le64(e);
	p->gen = cow_get_le64(e + 8);
	p->used = cow_get_le64(e + 16);
	p->height = 0;
}

static inline void cow_interior_set(uint8_t *page, unsigned int i,
				    const struct cow_ptr *p)
{
	uint8_t *e = page + COW_PAGE_HDR + i * COW_INTERIOR_ENTRY_SIZE;

	cow_put_le64(e, p->pbn);
	cow_put_le64(e + 8, p->gen);
	cow_put_le64(e + 16, p->used);
}

/* Block-map leaf entry i. */
static inline void cow_map_get(const uint8_t *page, unsigned int i,
			       uint64_t *pbn, uint64_t *csum)
{
	const uint8_t *e = page + COW_PAGE_HDR + i * COW_MAP_ENTRY_SIZE;

	*pbn = cow_get_le64(e);
	*csum = cow_get_le64(e + 8);
}

static inline void cow_map_set(uint8_t *page, unsigned int i, uint64_t pbn,
			       uint64_t csum)
{
	uint8_t *e = page + COW_PAGE_HDR + i * COW_MAP_ENTRY_SIZE;

	cow_put_le64(e, pbn);
	cow_put_le64(e + 8, csum);
}

/* Refcount leaf entry i. */
static inline uint32_t cow_rc_get(const uint8_t *page, unsigned int i)
{
	return cow_get_le32(page + COW_PAGE_HDR + i * COW_RC_ENTRY_SIZE);
}

static inline void cow_rc_set(uint8_t *page, unsigned int i, uint32_t v)
{
	cow_put_le32(page + COW_PAGE_HDR + i * COW_RC_ENTRY_SIZE, v);
}

/* Volume leaf entry i: decode (0 or -EUCLEAN for a malformed entry) and
 * encode. */
int cow_vol_get(const uint8_t *page, unsigned int i,
		struct cow_volume_entry *v, struct cow_err *err);
void cow_vol_set(uint8_t *page, unsigned int i,
		 const struct cow_volume_entry *v);

/* Whether entry i of a leaf of kind is non-empty (counts in "used"). */
bool cow_leaf_entry_used(enum cow_tree_kind kind, const uint8_t *page,
			 unsigned int i);

/* ---- creating an image ---- */

struct cow_format_opts {
	uint64_t size;			/* logical bytes, multiple of 4096 */
	uint8_t csum_type;		/* 0: crc32c */
	/* cow_format: the new file's mode before the umask (0: 0644), and
	 * where to put its stat (NULL: not wanted). */
	mode_t mode;
	struct stat *created;
};

/* The blocks a new image is made of: both superblocks, the volume
 * leaf and the refcount leaf. */
#define COW_FORMAT_BLOCKS 4u

/*
 * Encode a new image into buf (COW_FORMAT_BLOCKS blocks): generation 1 in
 * both slots, one empty default volume of opts->size bytes.  0, or
 * -EINVAL (a bad size or checksum) / -errno with a message in err.
 */
int cow_format_encode(const struct cow_format_opts *opts, uint8_t *buf,
		      struct cow_err *err);

/*
 * Create a new cow image at path (refuses an existing file: -EEXIST):
 * generation 1 in both slots, one empty default volume of opts->size
 * bytes.  The file is durable when this returns 0; on error nothing is
 * left behind.  -errno with a message in err.
 */
int cow_format(const char *path, const struct cow_format_opts *opts,
	       struct cow_err *err);

/* printf into err; returns -EUCLEAN (for "return cow_bad(...)"). */
int cow_bad(struct cow_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
