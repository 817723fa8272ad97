/* SPDX-License-Identifier: MIT */
/*
 * The FUSE side of dioloop: one mount serves the images of a source
 * directory as block nodes.
 *
 * Threads:
 *  - FUSE workers (libfuse's multi-threaded loop) run every request
 *    handler.  They never wait for image I/O: reads and writes become
 *    kiocbs over pool pages, and each worker reaps the libaio
 *    completions of those it started and answers them (session_dev.h);
 *    ops that may block (fallocate, lseek, copy_file_range, truncate)
 *    are handed to the worker pool, fsync to the flush pool, control
 *    commands to the control pool.
 *  - The aio completion thread (backends/aio.c) completes the reads and
 *    writes that no worker carries (dispatched by the throttle's timer or
 *    a pool thread, or a worker without a context of its own) and sends
 *    their replies.
 *  - Worker-pool threads run the blocking ops and reply.  An op that
 *    waits for its node's limits or a fault delay waits in a queue, not
 *    on a thread (io_work.c), so no pool thread ever sleeps on a limit.
 *  - Flush-pool threads run fsync; control-pool threads run control
 *    commands: separate threads, which the worker pool's load never
 *    takes away.  Every pool starts its threads with it (exclusive), so
 *    no request ever waits for a thread to be created.
 *  - The throttle's timer thread (throttle.h) dispatches the reads and
 *    writes that had to wait for their node's limits.
 *
 * Lifetime: a node lives in the table while the kernel holds lookups on
 * it, a file handle refers to it, or its image exists; its backend stays
 * open from the first lookup until the node is dropped.  fuse_req_t
 * handles are valid until one reply function is called on them.
 */
#ifndef DIOLOOP_FS_H
#define DIOLOOP_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "backends/filter_fault.h"
#include "fusefs/stats.h"
#include "fusefs/throttle.h"
#include "iter/page_pool.h"
#include "iter/run_pool.h"

#define DIOLOOP_BLOCK_SIZE 4096
#define DIOLOOP_MAX_WRITE (1u << 20)
#define DIOLOOP_FLUSH_THREADS 2u	/* the flush pool */
#define DIOLOOP_CONTROL_THREADS 2u	/* the control pool, plus one per
					 * long control job */

/* -o transport=: how requests come from the kernel. */
enum dioloop_transport {
	DIOLOOP_TRANSPORT_DEV,		/* read and write /dev/fuse */
	DIOLOOP_TRANSPORT_URING,	/* FUSE over io_uring (session_uring.h) */
	DIOLOOP_TRANSPORT_AUTO,		/* uring when the kernel allows it */
};

struct dioloop_mount_opts {
	bool readonly;		/* -o ro */
	bool allow_other;	/* -o allow_other */
	bool growable;		/* -o growable */
	bool cache;		/* -o cache: kernel page cache, no direct I/O */
	bool sync;		/* -o sync: writes durable when acknowledged */
	int commit_ms;		/* -o commit=SECONDS: cow commit interval;
				 * -1: the backend's default */
	unsigned threads;	/* -o threads=N: FUSE worker threads */
	unsigned queue_depth;	/* -o queue_depth=N: requests in flight */
	unsigned max_write;	/* -o max_write=BYTES */
	bool debug;		/* -d: libfuse debug output */
	struct dioloop_limits limits;	/* -o iops=...: every node's */
	uint64_t total_bps;	/* -o total_bps: shared by the busy nodes */
	GPtrArray *faults;	/* -o fault=: struct dioloop_mount_fault */
	bool fault_all;		/* -o fault: the fault filter on every node */
	enum dioloop_transport transport;	/* -o transport= */
};

/* A fault rule given at mount, for the node called node ("*": all). */
struct dioloop_mount_fault {
	char *node;
	struct fault_rule rule;
};

/* An image's OFD lock and its container-wide state, shared by the nodes
 * that serve the same file (a symlink alias and its target, the volumes
 * of a cow image). */
struct dioloop_image_lock {
	char *key;			/* "dev:ino" */
	int fd;				/* holds the lock; the file served */
	/* A migration's destination belongs to the image called owner:
	 * only its nodes share the lock (no other name may serve the file);
	 * NULL: every name of the file shares it (symlink aliases). */
	char *owner;
	unsigned int refs;		/* by fs->lock */
	/* cow: the scrub running over the container, by fs->lock */
	bool scrubbing;
	uint64_t scrub_done, scrub_total, scrub_bad;
};

/*
 * A node serves one image, or one volume of a cow image: node IMAGE is
 * the image's default volume, IMAGE@VOLUME another volume (volumes.c).
 */
struct dioloop_migration;

struct dioloop_node {
	fuse_ino_t ino;
	char *name;			/* node name: IMAGE or IMAGE@VOLUME */
	char *image;			/* file name in the source directory */
	char *volume;			/* cow volume; NULL: the default one */
	/* The image's backend, with the fault filter (filter_fault.h) on
	 * top when a rule asked for it; open while
	 * the node exists, except after delete-volume closed it (NULL).
	 * File handles and the read/write path use it without b_lock (a
	 * node with file handles is never closed); anyone else holds b_lock
	 * for reading (dioloop_node_backend_get). */
	struct backend *b;
	GRWLock b_lock;
	bool cow;			/* a cow image's volume */
	bool readonly;			/* image or mount read-only, or a
					 * snapshot */
	struct dioloop_image_lock *lock;	/* the image's, shared */
	/* The file served (dev:ino; 0:0 for a URL): when the name resolves
	 * to another, the image was replaced.  By fs->lock. */
	uint64_t dev, ino_served;
	unsigned int switches;		/* migrations switched; by fs->lock */
	bool switching;			/* one is switching; by fs->lock */
	struct dioloop_throttle throttle;	/* its own lock: the group's */
	struct dioloop_node_stats stats;	/* atomics */
	/* protected by fs->lock: */
	uint64_t nlookup;		/* kernel references */
	unsigned int open_count;	/* file handles */
	unsigned int ctl_users;		/* control commands using b */
	bool gone;			/* image left the source directory */
	bool deleted;			/* its volume was deleted: b closed */
	/* The node's last live migration (fusefs/migrate.h), or NULL. */
	struct dioloop_migration *_Atomic migration;
	/* Draining (resize, snapshot, migration switch): a request in
	 * flight counts itself without a lock; a drainer sets draining and
	 * waits under io_lock for in_flight to reach 0 (nodes.c). */
	GMutex io_lock;
	GCond io_cond;
	_Atomic int64_t in_flight;
	_Atomic bool draining;
};

struct dioloop_remote;

struct dioloop_fs {
	struct fuse_session *se;
	char *source;			/* absolute, resolved; a remote source:
					 * its URL without options */
	char *mountpoint;
	int source_fd;			/* O_DIRECTORY of source; -1 remote */
	/* An nfs:// source (remote.h): images listed and opened through the
	 * server, no local image locks; NULL for a local directory. */
	struct dioloop_remote *remote;
	struct dioloop_mount_opts opts;
	struct dioloop_page_pool *pool;
	struct dioloop_run_pool *runs;	/* large requests' buffers */
	struct dioloop_aio *aio;
	GThreadPool *workers;		/* blocking ops */
	GThreadPool *flushers;		/* fsync */
	GThreadPool *controls;		/* control commands */
	GMutex workers_lock;		/* long_jobs and the control pool's
					 * size */
	unsigned int worker_threads;	/* the pool's size for short ops */
	unsigned int long_jobs;		/* long control jobs (scrub) running */

	GMutex lock;			/* the node table */
	GHashTable *by_name;		/* char * -> node */
	GHashTable *by_ino;		/* fuse_ino_t -> node */
	fuse_ino_t next_ino;

	/* Rate-limited error log: "node\0kind" -> last time logged. */
	GMutex log_lock;
	GHashTable *logged;

	struct dioloop_throttle_group throttle;	/* every node's */
	struct dioloop_limits limits;	/* given to new nodes; by lock */
	GHashTable *image_locks;	/* "dev:ino" -> struct
					 * dioloop_image_lock; by lock */
	gint64 started;			/* monotonic us */
};

/* Inode numbers below this are the control files (control.h). */
#define DIOLOOP_FIRST_NODE_INO 16

/* The node table: nodes.c (lookup, lifetime, draining), image_open.c
 * (which images are served, image locks), fs.c (the mount's state,
 * attributes, the error log). */
int dioloop_fs_init(struct dioloop_fs *fs, const char *source,
		    const char *mountpoint,
		    const struct dioloop_mount_opts *opts);
void dioloop_fs_destroy(struct dioloop_fs *fs);
/* Look up (and open) the image called name: a referenced node (the
 * caller owns one lookup) or -errno. */
int dioloop_node_lookup(struct dioloop_fs *fs, const char *name,
			struct dioloop_node **out);
/* The node with this inode number, or NULL. */
struct dioloop_node *dioloop_node_get(struct dioloop_fs *fs, fuse_ino_t ino);
/* Drop n kernel lookups. */
void dioloop_node_forget(struct dioloop_fs *fs, fuse_ino_t ino, uint64_t n);
/* Attributes of a node / of the root directory. */
int dioloop_node_stat(struct dioloop_fs *fs, struct dioloop_node *node,
		      struct stat *st);
void dioloop_root_stat(struct dioloop_fs *fs, struct stat *st);
/* True if name in the source directory may be served as an image. */
bool dioloop_is_image_name(const char *name);
/* True if name may name a node: an image, or IMAGE@VOLUME. */
bool dioloop_is_node_name(const char *name);
/* True if name serves an image now (it is listed). */
bool dioloop_image_servable(struct dioloop_fs *fs, const char *name);
/* Add the names of the images served now to names (the one policy for
 * readdir and the opens at mount: redirects of migrated images
 * included).  0 or -errno. */
int dioloop_fs_list_images(struct dioloop_fs *fs, GPtrArray *names);
/* Before an open of node: 0, or -ESTALE when its name serves another
 * file now (the node is retired; the kernel looks the name up again). */
int dioloop_node_check_current(struct dioloop_fs *fs,
			       struct dioloop_node *node);
/*
 * The image lock of the file open as fd_path (O_PATH) with stat st, for
 * the image called name: shared with the other nodes on the same file (a
 * symlink alias), or taken now.  owner: the image whose migration
 * destination this is (only its nodes share it), or NULL.  0, -EBUSY
 * when another process (or another image's migration) has the file
 * (logged, naming it), or -errno.  Not under fs->lock.
 */
int dioloop_image_lock_get(struct dioloop_fs *fs, const char *name,
			   const char *owner, int fd_path,
			   const struct stat *st, bool *readonly,
			   struct dioloop_image_lock **out);
/* Around a migration's switch of node to another file (fusefs/migrate.c):
 * lookups meanwhile do not retire it as replaced. */
void dioloop_node_switch_begin(struct dioloop_fs *fs,
			       struct dioloop_node *node);
void dioloop_node_switch_end(struct dioloop_fs *fs, struct dioloop_node *node);
/* Drop a reference to an image lock. */
void dioloop_image_lock_put(struct dioloop_fs *fs,
			    struct dioloop_image_lock *l);
/* Open/close file-handle accounting: open is -ENOENT for a node whose
 * volume was deleted. */
int dioloop_node_open(struct dioloop_fs *fs, struct dioloop_node *node);
void dioloop_node_release(struct dioloop_fs *fs, struct dioloop_node *node);
/* Wait until no node has I/O in flight (shutdown). */
void dioloop_fs_drain_all(struct dioloop_fs *fs);
/* Flush every node's backend (unmount, shutdown). */
void dioloop_fs_flush_all(struct dioloop_fs *fs);
/* Log err for node, at most once per node and kind every 10 s. */
void dioloop_fs_log_error(struct dioloop_fs *fs, struct dioloop_node *node,
			  const char *kind, int err);
/* True if the event called key may be logged now (at most once every
 * 10 s per key). */
bool dioloop_fs_log_ratelimit(struct dioloop_fs *fs, const char *key);
/* Open every image of the source directory now (at mount: refusals are
 * reported while the terminal still listens).  Control thread. */
void dioloop_fs_open_all(struct dioloop_fs *fs);
/* The nodes in the table (not gone), each held by one lookup until
 * dioloop_fs_nodes_unref. */
GPtrArray *dioloop_fs_nodes_ref(struct dioloop_fs *fs);
void dioloop_fs_nodes_unref(struct dioloop_fs *fs, GPtrArray *nodes);
/* Change limits: the mount's defaults and every node (node NULL), or one
 * node.  Only the keys in u change.  Any thread. */
struct dioloop_limit_update;
int dioloop_fs_set_limits(struct dioloop_fs *fs, struct dioloop_node *node,
			  const struct dioloop_limit_update *u);

/* The node's backend for a user without a file handle (stat, stats,
 * control commands), held until dioloop_node_backend_put; NULL when its
 * volume was deleted (then no put). */
struct backend *dioloop_node_backend_get(struct dioloop_node *node);
void dioloop_node_backend_put(struct dioloop_node *node);
/* A control command starts/stops using the node's backend for long (a
 * snapshot, a scrub): -ENOENT if deleted; delete-volume says EBUSY
 * meanwhile. */
int dioloop_node_ctl_begin(struct dioloop_fs *fs, struct dioloop_node *node);
void dioloop_node_ctl_end(struct dioloop_fs *fs, struct dioloop_node *node);
/* Close the backend of a volume node (not the default volume) so that
 * its volume can be deleted, and take the node out of the table: 0 or
 * -EBUSY (file handles, I/O in flight, a control command on it). */
int dioloop_node_close_volume(struct dioloop_fs *fs, struct dioloop_node *node);

/* volumes.c: cow volumes as nodes IMAGE@VOLUME. */
/* Split a node name IMAGE@VOLUME at its last '@': false when name has no
 * such form (no '@', or an empty or bad part). */
bool dioloop_volume_split(const char *name, char **image, char **volume);
/* The volumes of a cow image (GArray of struct backend_volume_info, free
 * with g_array_unref): 0, -EOPNOTSUPP (not a cow image) or -errno.
 * Worker or FUSE thread (may open the image). */
int dioloop_volumes_list(struct dioloop_fs *fs, const char *image,
			 GArray **out);
/* Append IMAGE@VOLUME for every named volume of the cow images in names
 * (which holds image names) that is not already in names. */
void dioloop_volumes_add_names(struct dioloop_fs *fs, GPtrArray *names);
/* The backend of a node's stack that has the volume op set (b: the
 * node's), walking down its filters; NULL: the image has one volume. */
struct backend *dioloop_node_volume_backend(struct backend *b);
/* Whether image has a volume called volume, and what it is (*info may
 * be NULL): 0, -ENOENT (no such volume, or the image has one volume
 * only) or -errno. */
int dioloop_volumes_find(struct dioloop_fs *fs, const char *image,
			 const char *volume, struct backend_volume_info *info);

/* I/O admission: hold off while a resize drains the node.  No lock but
 * for the last request out, or while it drains.  A read or write ends
 * (io_end) after its reply, so that draining waits for replies too;
 * dioloop_node_free drains first, for its handle may be released once
 * the kernel has the reply. */
void dioloop_node_io_begin(struct dioloop_node *node);
void dioloop_node_io_end(struct dioloop_node *node);
void dioloop_node_drain_begin(struct dioloop_node *node);
void dioloop_node_drain_end(struct dioloop_node *node);
/* Stack the fault filter on the node unless it has one: drains the node;
 * the caller holds no b_lock.  0 or -errno. */
int dioloop_node_stack_fault(struct dioloop_node *node);

/* ops.c */
extern const struct fuse_lowlevel_ops dioloop_fuse_ops;

/* io.c (the read/write path) and io_work.c (the blocking ops), called
 * from ops.c. */
void dioloop_do_read(fuse_req_t req, struct dioloop_node *node, size_t size,
		     off_t off);
void dioloop_do_write(fuse_req_t req, struct dioloop_node *node,
		      const char *buf, size_t size, off_t off);
void dioloop_do_fsync(fuse_req_t req, struct dioloop_node *node);
void dioloop_do_fallocate(fuse_req_t req, struct dioloop_node *node, int mode,
			  off_t off, off_t len);
void dioloop_do_lseek(fuse_req_t req, struct dioloop_node *node, off_t off,
		      int whence);
void dioloop_do_copy_file_range(fuse_req_t req, struct dioloop_node *in,
				off_t off_in, struct dioloop_node *out,
				off_t off_out, size_t len);
void dioloop_do_truncate(fuse_req_t req, struct dioloop_node *node,
			 off_t size, struct stat *attr, int to_set);
/* May node be truncated to size?  0, or the error a truncate gives for
 * it (-EINVAL, -EROFS, -EPERM, -EFBIG), known before anything changes. */
int dioloop_truncate_check(struct dioloop_node *node, off_t size);
/* Start the worker, flush and control pools (0 or -EAGAIN when their
 * threads cannot be created) / stop them after their queued work. */
int dioloop_io_start(struct dioloop_fs *fs);
void dioloop_io_stop(struct dioloop_fs *fs);
/* Run fn(arg) on the worker pool (work that may block on I/O). */
void dioloop_io_call(struct dioloop_fs *fs, void (*fn)(void *arg),
		     void *arg);
/* Run fn(arg) on the control pool (a control command). */
void dioloop_ctl_call(struct dioloop_fs *fs, void (*fn)(void *arg),
		      void *arg);
/* A control command that may run for long (a scrub) begins/ends: the
 * control pool grows by one thread meanwhile, so that the other control
 * commands keep theirs.  begin: 0 or -EAGAIN (no thread could be
 * created: do not run the job).  Control thread. */
int dioloop_io_long_begin(struct dioloop_fs *fs);
void dioloop_io_long_end(struct dioloop_fs *fs);

#endif
