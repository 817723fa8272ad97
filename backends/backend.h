/* SPDX-License-Identifier: MIT */
/*
 * The backend API: how the core reaches an image.
 *
 * A backend is one ops table (struct backend_ops) registered by name in
 * backends/registry.c and validated once there.  The registry chooses
 * the backend of an image by asking the tables (probe, protocol) and
 * creates images through them (create); it includes no backend's
 * header.  An open image is a
 * struct backend: the core owns it, the backend keeps its state in ->priv
 * and fills ->limits at open.
 *
 * Errors: every op returns 0 (or a byte count) on success and -errno on
 * failure; errno never crosses this interface.
 *
 * Threads and what the core guarantees, for every op:
 *  - open/close run on a control thread, never concurrently with any other
 *    op on the same backend; close runs only after every request completed.
 *  - direct_IO_bvec runs on any thread (a FUSE worker, a test thread, a
 *    completion thread); for an asynchronous kiocb it must not block on I/O
 *    (short lock holds are fine).  Many run concurrently.
 *  - flush, discard, write_zeroes, map, clone_range, info run on a core
 *    worker thread and may block; never on a completion thread.  They may
 *    run concurrently with each other and with direct_IO_bvec.
 *  - resize runs on a worker thread with no direct_IO_bvec in flight on
 *    the same backend (the core drains first).
 *  - Offsets and lengths given to discard, write_zeroes and clone_range are
 *    inside the image (end <= size); the core clamps before calling.
 *  - Nothing past limits.max_size reaches an op: a write's end, a new size
 *    and a clone's target end are <= max_size (the core answers -EFBIG,
 *    or -ENOSPC for a write to an image that is not growable), and no
 *    offset or length is above INT64_MAX (-EINVAL).
 *
 * A NULL optional op gets the core's default (backend_* wrappers below):
 *   flush        nothing is cached: 0
 *   discard      write_zeroes (discarded ranges read as zeros)
 *   write_zeroes writes zero pages through direct_IO_bvec
 *   resize       -EOPNOTSUPP
 *   map          the whole range is data
 *   clone_range  -EOPNOTSUPP (callers copy)
 *   info         format = ops->name, allocated = size
 *
 * Filters (ops->is_filter): a backend stacked on another one, b->inner,
 * which the core sets from args->inner at open and closes after the
 * filter's close (if open fails, inner stays the caller's).  A filter
 * implements only the ops it changes: every op it leaves NULL, required
 * ones included (open and close too), goes to b->inner through the core's
 * wrapper, so an op added later is never dropped by a filter that does
 * not know it.  Limits start as inner's (open may change them).
 */
#ifndef DIOLOOP_BACKEND_H
#define DIOLOOP_BACKEND_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "iter/iov_iter.h"
#include "backends/range_lock.h"
#include "backends/volume.h"

/* "Will complete through the callback" (the kernel's value). */
#ifndef EIOCBQUEUED
#define EIOCBQUEUED 529
#endif

enum { DIOLOOP_READ = 0, DIOLOOP_WRITE = 1 };

struct kiocb;
/* Called exactly once per request that returned -EIOCBQUEUED, with bytes
 * transferred or -errno; possibly on another thread, possibly before
 * direct_IO_bvec has returned to its caller. */
typedef void (*kiocb_complete_t)(struct kiocb *iocb, ssize_t res);

/*
 * One request.  The submitter owns it (and the iterator and pages behind
 * it) until the request completes: direct_IO_bvec returns something other
 * than -EIOCBQUEUED, or ki_complete is called.  The iterator is read, not
 * advanced.
 */
struct kiocb {
	int ki_rw;			/* DIOLOOP_READ or DIOLOOP_WRITE */
	uint64_t ki_pos;		/* byte offset in the image */
	struct iov_iter *ki_iter;	/* bio_vec kind, count > 0 */
	kiocb_complete_t ki_complete;	/* NULL: synchronous, wait inside */
	void *ki_private;		/* the submitter's */
};

static inline bool is_sync_kiocb(const struct kiocb *iocb)
{
	return iocb->ki_complete == NULL;
}

/* Limits are data, set by open (probed where the host can tell). */
struct backend_limits {
	uint32_t request_alignment;	/* offset/length granularity of I/O */
	uint32_t mem_alignment;		/* buffer address/length alignment */
	uint32_t block_size;		/* preferred I/O size (st_blksize) */
	uint32_t max_transfer;		/* largest single I/O in bytes */
	uint32_t max_segs;		/* most iovecs in one I/O */
	/* The largest size the image can have, and so the largest end of
	 * any write: what the format can address and its host can store,
	 * <= INT64_MAX.  Left 0 by open: the core sets INT64_MAX rounded
	 * down to request_alignment. */
	uint64_t max_size;
};

enum backend_open_flags {
	BACKEND_OPEN_RDONLY = 1 << 0,	/* refuse writes with -EROFS */
	BACKEND_OPEN_GROWABLE = 1 << 1,	/* writes past EOF extend the image */
	BACKEND_OPEN_SYNC = 1 << 2,	/* a write completes only when durable */
	/* A read-only volume of a container that may itself be written by
	 * other volumes opened in this process (cow: a snapshot node on a
	 * writable mount).  Without it, a read-only volume that is the first
	 * of its container opens the container read-only. */
	BACKEND_OPEN_CONTAINER_RW = 1 << 3,
};

/* Formats over stores: a format (cow) keeps its container on a store
 * backend opened with this flag. */
enum {
	/* The bytes of a container whose size and crash safety the format
	 * keeps itself: no image sidecars (raw: no orphan record).  Only
	 * resize changes the size; writes past it fail with -ENOSPC. */
	BACKEND_OPEN_STORE = 1 << 4,
};

struct dioloop_aio;
struct backend;

/*
 * An image file the caller opened and checked itself (the daemon opens
 * everything under SOURCE beneath its directory fd): the backend opens the
 * image through fd, never by path again, so a name swapped meanwhile
 * cannot make it open another file.  Its sidecars (raw's orphan record)
 * are name's, inside dirfd.
 */
struct backend_file {
	int fd;				/* the image: any access mode, O_PATH too */
	int dirfd;			/* the directory its sidecars live in */
	const char *name;		/* the image's name inside dirfd */
};

struct backend_open_args {
	const char *path;		/* the image (a file or URL); with file,
					 * only for messages */
	const struct backend_file *file;	/* NULL: open path */
	unsigned int flags;		/* enum backend_open_flags */
	struct dioloop_aio *aio;	/* I/O context to submit to */
	struct backend *inner;		/* stacked backends: the one below */
	/* Backends with several volumes per image (cow): the volume's name;
	 * NULL or "" for the image's default volume.  Others refuse a
	 * non-empty name with -ENOENT. */
	const char *volume;
	/* Probe/create block: where open puts its one line for a person when
	 * it fails (NULL: the backend logs it with g_warning). */
	GError **error;
};

/* ---- probe, protocol and create (the registry asks the tables) ---- */

/* What probe looks at: an image file, never a URL. */
struct backend_probe_args {
	const char *path;		/* the image's name, for messages */
	int fd;				/* the image, any access mode (O_PATH
					 * too): probe reads through a new open
					 * of the same inode; -1 for a URL (a
					 * format then reads path through the
					 * backend of its protocol) */
};

/* What create makes. */
struct backend_create_args {
	const char *path;		/* a new file (never replaced) or URL */
	uint64_t size;			/* logical bytes, a multiple of the
					 * backend's create_align */
	const char *checksum;		/* one of ops->checksums; NULL: the
					 * backend's default */
	/* Local files: the new file's mode before the umask (0: 0644),
	 * and where to put its stat, so that a later open by name can
	 * check that the name still leads to it (NULL: not wanted). */
	mode_t mode;
	struct stat *created;
};

/* The domain of the GErrors backends set; the code is a positive errno. */
#define BACKEND_ERROR backend_error_quark()
GQuark backend_error_quark(void);

/* One extent from map(): [pos, pos + len) is all data or all hole. */
struct backend_extent {
	uint64_t len;			/* > 0 */
	bool hole;			/* reads as zeros, stores nothing */
};

struct backend_info {
	char format[16];		/* "raw", "cow", ... */
	uint64_t size;			/* logical bytes */
	uint64_t allocated;		/* bytes the image uses on its host */
	/* The dio engine's counters (backends/dio.h, struct dio_stats) of
	 * a backend that runs on the engine; zeros otherwise. */
	struct {
		uint64_t requests, ios, segs, holes, bounced, rmw;
	} engine;
};

/* An image's times as its host keeps them (a remote image's server). */
struct backend_times {
	struct timespec atime, mtime, ctime;
};

struct backend_ops {
	const char *name;

	/* Open args->path: fill b->priv and b->limits.  0 or -errno, with
	 * why in *args->error when given (else logged: backend_set_error).
	 * Required. */
	int (*open)(struct backend *b, const struct backend_open_args *args);
	/* Release everything open took.  Required. */
	void (*close)(struct backend *b);
	/* Logical size in bytes (>= 0) or -errno.  Required. */
	int64_t (*get_size)(struct backend *b);
	/*
	 * Read or write iocb->ki_iter at iocb->ki_pos.  Required.
	 * Reads at or past EOF return 0 bytes, reads crossing it are short;
	 * writes that reach past EOF fail whole with -ENOSPC (nothing is
	 * written) unless the image is growable;
	 * writes to a read-only image fail with -EROFS.  Any offset, length
	 * and page offset are accepted (unaligned ones are bounced).
	 * Returns bytes transferred, -errno, or -EIOCBQUEUED (only for an
	 * asynchronous kiocb): ki_complete will then be called exactly once.
	 */
	ssize_t (*direct_IO_bvec)(struct backend *b, struct kiocb *iocb);

	/* Make every write completed before the call durable.  Optional. */
	int (*flush)(struct backend *b);
	/* Deallocate; the range reads as zeros after.  Optional. */
	int (*discard)(struct backend *b, uint64_t pos, uint64_t len);
	/* Make the range read as zeros, cheaply if possible.  Optional. */
	int (*write_zeroes)(struct backend *b, uint64_t pos, uint64_t len);
	/* Change the logical size.  Optional. */
	int (*resize)(struct backend *b, uint64_t size);
	/* Describe the extent at pos (pos < size, len > 0, result clipped to
	 * len).  Optional. */
	int (*map)(struct backend *b, uint64_t pos, uint64_t len,
		   struct backend_extent *ext);
	/* Share or copy len bytes from src to dst: bytes done or -errno
	 * (-EOPNOTSUPP / -EXDEV: the core copies).  Optional. */
	ssize_t (*clone_range)(struct backend *src, uint64_t src_pos,
			       struct backend *dst, uint64_t dst_pos,
			       uint64_t len);
	/* Fill info.  Optional. */
	int (*info)(struct backend *b, struct backend_info *info);
	/* The image's times as its host last reported them, without asking
	 * again (a stat must not wait for a server): 0 or -errno.  Any
	 * thread; never blocks.  Optional: -EOPNOTSUPP (a local file's
	 * times are its descriptor's). */
	int (*times)(struct backend *b, struct backend_times *t);

	/* Volumes, scrub, check and stats (backends/volume.h). */
	/* The volume op set; NULL: the image has one volume only. */
	const struct backend_volume_ops *volumes;
	/* Emit the backend's own counters (cow: checksum_errors), each
	 * once, as key and value.  0 or -errno.  Any thread.  Optional. */
	int (*stats)(struct backend *b, backend_stat_fn emit, void *opaque);
	/* Fill what a container format tells of its image beyond info
	 * (struct backend_details, backends/volume.h; `dioloop info`).  0
	 * or -errno.  Any thread.  Optional: -EOPNOTSUPP. */
	int (*describe)(struct backend *b, struct backend_details *d);
	/* ---- probe, protocol and create (registry.c) ---- */
	/* The URL scheme this backend serves ("nfs" for nfs://...); NULL:
	 * it serves files.  A URL goes to its protocol's backend. */
	const char *protocol;
	/* How sure the backend is that the file is its image: 0 (not
	 * mine) up to 100.  The highest score wins.  Optional: never. */
	int (*probe)(const struct backend_probe_args *p);
	/* Make a new image (never over an existing one): 0 or -errno with
	 * the one line for a person in *error.  Optional: -EOPNOTSUPP. */
	int (*create)(const struct backend_create_args *a, GError **error);
	/* A container format whose images may live on a protocol's store
	 * (cow on nfs:// or rbd://): create is given the URL, makes the
	 * store's image (backend_create of a raw image there) and writes
	 * the format into it, removing it again when that fails. */
	bool on_stores;
	/* A created image's size must be a multiple of this (0: 1). */
	uint32_t create_align;
	/* Data checksums create accepts, NULL-terminated; NULL: none. */
	const char *const *checksums;
	/* Protocols: remove the image at url (undoing a create): 0 or
	 * -errno with the line in *error. */
	int (*remove)(const char *url, GError **error);
	/* Protocols: check a URL's form without reaching the server:
	 * want_file, an image URL; else a directory URL.  0 or -EINVAL with
	 * what is wrong in *error. */
	int (*check_url)(const char *url, bool want_file, GError **error);
	/* Protocols: append to names (g_free'd) the image names of the
	 * directory url, sorted.  0 or -errno with the line in *error. */
	int (*list)(const char *dir_url, GPtrArray *names, GError **error);

	/* ---- filters (stacking) ---- */
	/* Stacked on b->inner: NULL ops forward there (see above). */
	bool is_filter;
};

/* The per-range copy's success (docs/lineage.md patch 011's migratepage: a named code,
 * -EAGAIN for a transient failure, negative errno else). */
#define MIGRATEPAGE_SUCCESS 0

/* An open image.  Fields above priv are the core's; the backend sets
 * limits in open and may read the rest. */
struct backend {
	const struct backend_ops *ops;
	char *path;
	unsigned int flags;		/* enum backend_open_flags */
	struct dioloop_aio *aio;
	struct backend_limits limits;
	void *priv;			/* the backend's */
	/* ---- filters ---- */
	/* The backend below a filter (owned: closed after it); NULL for a
	 * backend that is not a filter.  Changed only by
	 * backend_filter_swap_inner. */
	struct backend *inner;
};

/* The registry: NULL when unknown.  Tables are validated once. */
const struct backend_ops *backend_lookup(const char *name);
/* Names of the registered backends, NULL-terminated. */
const char *const *backend_names(void);
/* The backend that serves path: a URL's protocol backend (NULL for a
 * scheme no backend serves), else the file's highest probe score ("raw"
 * when none answers, or the file cannot be opened). */
const char *backend_probe(const char *path);
/* The same for the image args names (args->file when set, else path). */
const char *backend_probe_args(const struct backend_open_args *args);
/* True when s is a URL, SCHEME://...: a letter, then letters, digits,
 * '+', '-' or '.' up to "://".  The one URL test of the tree. */
bool backend_is_url(const char *s);
/* The backend whose protocol is url's scheme; NULL with "URL: unknown
 * protocol 'X' (known: ...)" in *error (-EPROTONOSUPPORT). */
const struct backend_ops *backend_for_url(const char *url, GError **error);
/* Check a URL's form through its protocol backend: 0 or -errno with the
 * line in *error (an unknown scheme too). */
int backend_check_url(const char *url, bool want_file, GError **error);
/* List the images of a directory URL (backend_ops.list): 0 or -errno with
 * the line in *error. */
int backend_list_url(const char *dir_url, GPtrArray *names, GError **error);
/* Create an image of format type at a->path: a URL goes to its protocol
 * backend (type NULL or "raw": a raw image there), or to a format that
 * keeps its images on stores (ops.on_stores: cow), which makes the
 * protocol's image and writes itself into it; another format cannot live
 * on a protocol: -EOPNOTSUPP.  0 or -errno with the one line in *error. */
int backend_create(const char *type, const struct backend_create_args *a,
		   GError **error);
/* What backend_create checks before it makes anything: a URL's protocol
 * and whether format type can live there, else that type is known (not
 * the URL's form: backend_check_url).  0 or -errno with the line in
 * *error. */
int backend_check_create(const char *type, const char *path, GError **error);
/* Remove a URL's image (backend_ops.remove): 0 or -errno with the line in
 * *error. */
int backend_remove_url(const char *url, GError **error);
/* A failure's one line for a person: into *error (code -err) when the
 * caller passed error, else logged with g_warning.  Returns err (a
 * -errno), for "return backend_set_error(...)".  Any thread. */
int backend_set_error(GError **error, int err, const char *fmt, ...)
	G_GNUC_PRINTF(3, 4);
/* Open the image args names with open(2) flags: through args->file (the
 * same inode, checked by dev:ino) or by path.  An fd or -errno. */
int backend_open_image(const struct backend_open_args *args, int flags);
/* A new open file description of the inode fd refers to (fd may be
 * O_PATH), with open(2) flags: an fd, or -errno (-ESTALE if it were not
 * the same inode). */
int backend_reopen_fd(int fd, int flags);
/* Register a test double's ops table (the production table lists none):
 * tests only, before they start threads.  0 or -errno. */
int backend_register_for_tests(const struct backend_ops *ops);
/* Validate an ops table (required ops, sane name): 0 or -EINVAL. */
int backend_ops_check(const struct backend_ops *ops);

/* Open an image with the named backend: 0 or -errno (-ENOENT for an
 * unknown backend name). */
int backend_open(const char *type, const struct backend_open_args *args,
		 struct backend **out);
/* The same with an ops table that need not be registered (a filter of
 * the caller's, a test double): -EINVAL for a table that fails
 * backend_ops_check. */
int backend_open_ops(const struct backend_ops *ops,
		     const struct backend_open_args *args,
		     struct backend **out);
void backend_close(struct backend *b);

/* Can [pos, pos + len) be written, as a write or a new size (pos 0, len
 * the size)?  0; -EINVAL for pos or len above INT64_MAX (a negative
 * off_t); -EFBIG when the end is past b->limits.max_size.  Never
 * overflows.  Any thread. */
int backend_check_range(const struct backend *b, uint64_t pos, uint64_t len);
/* backend_check_range for a write of len bytes at pos: past the end of an
 * image that cannot grow, -ENOSPC (a block device's answer) instead of
 * -EFBIG. */
int backend_check_write(const struct backend *b, uint64_t pos, uint64_t len);

/* The core's entry points: call the op or apply the documented default. */
int64_t backend_get_size(struct backend *b);
ssize_t backend_direct_IO_bvec(struct backend *b, struct kiocb *iocb);
int backend_flush(struct backend *b);
int backend_discard(struct backend *b, uint64_t pos, uint64_t len);
int backend_write_zeroes(struct backend *b, uint64_t pos, uint64_t len);
/* Write zero pages over the range through direct_IO_bvec, synchronously:
 * the default write_zeroes, and the fallback of a backend's own
 * write_zeroes or discard where the host cannot.  Worker thread. */
int backend_write_zero_pages(struct backend *b, uint64_t pos, uint64_t len);
int backend_resize(struct backend *b, uint64_t size);
int backend_map(struct backend *b, uint64_t pos, uint64_t len,
		struct backend_extent *ext);
ssize_t backend_clone_range(struct backend *src, uint64_t src_pos,
			    struct backend *dst, uint64_t dst_pos,
			    uint64_t len);
int backend_info(struct backend *b, struct backend_info *info);
int backend_times(struct backend *b, struct backend_times *t);

/* The backend under every filter stacked on b (b itself if no filter). */
struct backend *backend_below_filters(struct backend *b);
/* The first filter in b's stack (b included) with these ops, or NULL. */
struct backend *backend_find_filter(struct backend *b,
				    const struct backend_ops *ops);
/* In the stack *top, make whatever points to old (*top itself, or a
 * filter's inner) point to new instead; that filter's limits become
 * new's.  Only with no request in flight on the stack (drained). */
void backend_stack_replace(struct backend **top, struct backend *old,
			   struct backend *new);
/* Put inner under the filter b in place of its inner backend, which is
 * returned (the caller owns it now); b's limits become inner's.  Only with
 * no request in flight on b and none starting (the owner drained it). */
struct backend *backend_filter_swap_inner(struct backend *b,
					  struct backend *inner);

/* Synchronous read/write of a flat buffer through direct_IO_bvec (pool-free
 * bounce pages inside): bytes or -errno.  For tools and tests. */
ssize_t backend_pread(struct backend *b, void *buf, size_t len, uint64_t pos);
ssize_t backend_pwrite(struct backend *b, const void *buf, size_t len,
		       uint64_t pos);

#endif
