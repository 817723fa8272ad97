/* SPDX-License-Identifier: MIT */
/*
 * Inside the cow backend: an open container (struct cow_container) and
 * the volumes of it that are open (struct cow_volume, the backend's priv),
 * shared by image.c (container open/close), volume.c (volume open/close,
 * snapshots, clones, deletion, clone_range), commit.c (transactions),
 * cow.c (the ops and the I/O path) and scrub.c.
 *
 * Containers opened in this process are kept in a table keyed by the
 * file's st_dev:st_ino (volume.c): opening a second volume of a container
 * attaches to the open one, which is closed (with a final commit) when its
 * last volume closes.  Open and close of every cow volume are serialized
 * by that table's lock.
 *
 * Locks, in the order they nest:
 *   registry_lock (volume.c) the table of containers; held by volume
 *                 open and close, snapshots and deletions.
 *   commit_lock   one commit at a time; protects sb, file_blocks.
 *   map_lock      the volume tree, the open volumes' list, entries and
 *                 block maps, the open transaction's refops, drops and
 *                 change count, next_volume_id.
 *   alloc_lock    inside struct cow_alloc (alloc.h).
 *   epoch_lock, inflight_lock   leaves; never held across another lock.
 *
 * Transactions: the open transaction is generation committed_gen + 1.
 * Mapping changes record their reference changes in refops; the commit
 * seals the transaction under map_lock (moving every open volume's dirty
 * map pages and the volume tree's to new blocks, taking refops and drops,
 * advancing the read epoch), then applies them and writes everything
 * without map_lock (commit.c).
 *
 * Shared pages (FORMAT.md section 8): a block-map page whose location has
 * a generation <= its volume's last_snapshot_generation may be referenced
 * by other volumes too.  The first change to such a leaf in a transaction
 * keeps a copy of its committed content (cow_tree_will_change); when the
 * commit moves the page it queues +1 for every child of that content and
 * a drop of the old location (-1, and when the count reaches 0, -1 for
 * its children, recursively).  No count is looked up at write time.
 *
 * Read epochs: every request enters the epoch of the open transaction
 * before looking anything up and leaves it when it ends.  A block unmapped
 * in generation g is reused only when no request of an epoch <= g is
 * still running (alloc.h's reuse rule gets the oldest epoch).
 */
#ifndef DIOLOOP_COW_INT_H
#define DIOLOOP_COW_INT_H

#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "backends/backend.h"
#include "backends/dio.h"
#include "backends/cow/alloc.h"
#include "backends/cow/cow.h"
#include "backends/cow/format.h"
#include "backends/cow/tree.h"

#define COW_DEFAULT_COMMIT_MS 5000u
/* A transaction this large (blocks changed) is committed at once, so that
 * the space it pins (freed blocks wait for the commit after next) stays
 * bounded under heavy overwriting.  Not with a commit interval of 0. */
#define COW_COMMIT_SOON_CHANGES ((uint64_t)16384)

/* Readers of one epoch. */
struct cow_epoch {
	uint64_t epoch;
	unsigned int count;		/* by epoch_lock */
};

/* A block-map page location released by a commit whose page may be
 * shared: -1 on pbn, and when its count reaches 0, -1 on each child,
 * recursively. */
struct cow_drop {
	uint64_t pbn, gen;		/* the page, as its parent points */
	uint64_t first_key;
	uint8_t level;
	uint8_t *page;			/* its content, or NULL: read it */
};

struct cow_volume;

/* One open container. */
struct cow_container {
	/* The table of open containers (volume.c); by its lock. */
	dev_t dev;
	ino_t ino;
	unsigned int users;		/* open volumes */

	struct cow_meta meta;		/* meta.store: the container's bytes */
	char *path;			/* meta.path */
	int lock_fd;			/* a local file: holds the writer's
					 * flock; else -1 */
	bool rdonly;
	bool opened;			/* open succeeded: close commits */

	GMutex commit_lock;
	struct cow_sb sb;		/* last durable; by commit_lock */
	uint64_t file_blocks;		/* file size known; by commit_lock */
	_Atomic uint64_t committed_gen;
	atomic_bool failed;		/* a commit failed: no more writes */

	GMutex map_lock;
	struct cow_tree voltree;	/* by map_lock */
	GPtrArray *vols;		/* open struct cow_volume; by map_lock */
	uint64_t next_volume_id;	/* by map_lock */
	GArray *refops;			/* struct cow_refop; by map_lock */
	GArray *drops;			/* struct cow_drop; by map_lock */
	uint64_t changes;		/* in the open transaction; by map_lock */

	struct cow_alloc alloc;

	GMutex epoch_lock;
	uint64_t epoch;			/* the open transaction; by epoch_lock */
	GQueue epochs;			/* struct cow_epoch, oldest first */

	GMutex inflight_lock;
	GHashTable *inflight;		/* pbn -> struct cow_inflight */

	/* The periodic committer (writable containers). */
	GThread *committer;
	GMutex committer_lock;
	GCond committer_cond;
	bool committer_stop;		/* by committer_lock */
	bool commit_soon;		/* by committer_lock */
	unsigned int commit_ms;		/* by committer_lock */

	_Atomic uint64_t commits;
	_Atomic uint64_t meta_errors;	/* data errors: v->checksum_errors */
};

/* One open volume: the backend's priv. */
struct cow_volume {
	struct cow_container *c;
	struct backend *b;
	bool rdonly;			/* a snapshot, or opened read-only */
	bool growable;
	struct dioloop_aio *own_aio;	/* when the caller gave none */

	struct cow_volume_entry vol;	/* by map_lock */
	struct cow_tree map;		/* its block map; by map_lock */
	bool entry_dirty;		/* vol changed (size, ...); by map_lock */
	_Atomic uint64_t size;		/* vol.size, readable without lock */
	/* Data blocks of this volume that failed verification and were
	 * returned as -EIO (reads and scrubs); reported by cow_stats. */
	_Atomic uint64_t checksum_errors;
	struct dio_engine dio;		/* the engine's locks and counters */
};

/* A block in flight: what a read expects, or where a write's checksum
 * goes.  By inflight_lock. */
struct cow_inflight {
	uint64_t pbn;			/* the key */
	uint64_t csum;
	uint64_t lbn;
	unsigned int users;
	struct cow_wblk *wblk;		/* writes: the request's record */
};

/* One block of a write request. */
struct cow_wblk {
	uint64_t pbn;			/* reserved block */
	uint64_t csum;			/* set at submission */
	bool registered;		/* in the inflight table */
	bool installed;			/* its mapping is in the map */
};

/* Call the test hook at point, if one is set. */
void cow_test_point(enum cow_test_point point);

/* image.c: containers */
/* Open the container at path and load its trees (no commit yet).  0 or
 * -errno (logged).  c is zeroed by the caller; cow_container_close
 * releases it whatever happened. */
int cow_container_open(struct cow_container *c,
		       const struct backend_open_args *args, bool rdonly);
/* A writable container starts: the opening commit, the committer.
 * Control thread. */
int cow_container_start(struct cow_container *c);
/* Give up writing before the start (the first volume is read-only). */
void cow_container_make_rdonly(struct cow_container *c);
/* Final commit (if writable and started) and release; frees c. */
void cow_container_close(struct cow_container *c);
struct cow_epoch *cow_epoch_enter(struct cow_container *c);
void cow_epoch_leave(struct cow_container *c, struct cow_epoch *e);
uint64_t cow_epoch_oldest(struct cow_container *c);
/* Log a metadata error (counted) for the container: "path: message". */
void cow_meta_error(struct cow_container *c, const struct cow_err *err);

/* store.c: the container's store (a backend opened with
 * BACKEND_OPEN_STORE); every I/O of the container goes through it. */
/* Open the store of the container args names (a local file: raw; a
 * URL: the backend of its scheme).  0 or -errno (logged). */
int cow_store_open(const struct backend_open_args *args, bool rdonly,
		   struct backend **store);
/* Does args name a local file (which can be locked and stat'ed)? */
bool cow_store_is_local(const struct backend_open_args *args);
/* An asynchronous store I/O ended: bytes or -errno.  Any thread. */
typedef void (*cow_store_done_t)(void *opaque, ssize_t res);
/* Read or write iov (n entries, whole blocks) at pos on the store; done
 * is called exactly once, possibly before this returns. */
void cow_store_submit(struct backend *store, bool write,
		      const struct iovec *iov, int n, uint64_t pos,
		      cow_store_done_t done, void *opaque);
/* Synchronous read or write of buf: bytes (short only for a read at the
 * end) or -errno.  Not on a completion thread. */
ssize_t cow_store_rw(struct backend *store, bool write, void *buf,
		     size_t len, uint64_t pos);
/* Write all of iov (n entries of whole blocks) at pos: 0 or -errno. */
int cow_store_write_iov(struct backend *store, const struct iovec *iov,
			int n, uint64_t pos);
/* The store's size in whole blocks (0 when it cannot tell). */
uint64_t cow_store_blocks(struct backend *store);
/* cow_sb_read through the store. */
int cow_store_read_sb(struct backend *store, struct cow_sb *sb,
		      uint32_t *slot, struct cow_err *fallback,
		      struct cow_err *err);

/* commit.c */
/* Commit the open transaction if anything changed: 0 or -errno (the
 * container is failed after an error).  Worker thread. */
int cow_commit(struct cow_container *c);

/* A change of the volume tree made atomically with a commit (volume.c). */
struct cow_volop {
	bool delete;			/* else: a snapshot or clone of src */
	struct cow_volume *src;
	const char *name;		/* the new or the deleted volume */
	bool writable;			/* a clone, not a snapshot */
	/* Set by cow_volop_prepare. */
	uint64_t id;
	struct cow_node *leaf;		/* the volume tree leaf of id */
	struct cow_volume_entry entry;	/* delete: the victim's entry */
};
/* Commit, carrying out op in the seal (under map_lock, so a snapshot
 * holds exactly the writes installed before it).  0 or -errno: op's own
 * refusals (-EEXIST, -ENOENT, -EBUSY ...) leave the transaction open. */
int cow_commit_volop(struct cow_container *c, struct cow_volop *op);
/* Opening for writing: commit generation g+1 with the same roots (only
 * a superblock), retiring the older copy, so that blocks free on disk are
 * reusable at once (FORMAT.md section 7).  Control thread. */
int cow_commit_open(struct cow_container *c);
/* Start the periodic committer: 0, or -EAGAIN when no thread can be
 * made (logged). */
int cow_committer_start(struct cow_container *c);
/* The open transaction is large: ask the committer to commit now.  Any
 * thread; takes committer_lock only. */
void cow_committer_kick(struct cow_container *c);
void cow_committer_stop(struct cow_container *c);
void cow_drops_free(GArray *drops);

/* volume.c */
/* Check op and load what its seal needs (map_lock held; dropped while
 * pages are read).  0 or -errno. */
int cow_volop_prepare(struct cow_container *c, struct cow_volop *op);
/* Carry op out in the seal of gen: map_lock held, no I/O, no failure;
 * after the volumes' maps were placed for gen. */
void cow_volop_apply(struct cow_container *c, struct cow_volop *op,
		     uint64_t gen);
/* The volume's name for messages. */
const char *cow_volume_label(const struct cow_volume_entry *e);
/* The open volume with id, or NULL.  map_lock held. */
struct cow_volume *cow_open_volume_by_id(struct cow_container *c, uint64_t id);
/* The backend ops of volumes (cow.c) that volume.c provides. */
int cow_open(struct backend *b, const struct backend_open_args *args);
void cow_close(struct backend *b);
ssize_t cow_clone_range(struct backend *src, uint64_t src_pos,
			struct backend *dst, uint64_t dst_pos, uint64_t len);
/* backend_ops.stats of cow (volume_ops.c). */
int cow_stats(struct backend *b, backend_stat_fn emit, void *opaque);
int cow_describe(struct backend *b, struct backend_details *d);

#endif
