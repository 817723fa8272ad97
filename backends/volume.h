/* SPDX-License-Identifier: MIT */
/*
 * Volumes, scrub, check and statistics: the optional capabilities of a
 * backend, reached through its ops table (backend_ops.volumes and
 * backend_ops.stats) so that the daemon and the command line never name
 * a concrete backend.  A backend whose table has no volume ops serves one
 * volume only: every backend_volume_* call answers -EOPNOTSUPP and says
 * so in *error.
 *
 * Errors: 0 or -errno, and for a person the message in *error (domain
 * BACKEND_VOLUME_ERROR, code the positive errno); error may be NULL.
 */
#ifndef DIOLOOP_VOLUME_H
#define DIOLOOP_VOLUME_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct backend;
struct backend_ops;

#define BACKEND_VOLUME_NAME_MAX 39	/* bytes, UTF-8, no '/', '@' or NUL */

/* The GError domain of the volume ops; the code is the positive errno. */
#define BACKEND_VOLUME_ERROR (backend_volume_error_quark())
GQuark backend_volume_error_quark(void);

struct backend_volume_info {
	uint64_t id;
	char name[BACKEND_VOLUME_NAME_MAX + 1];	/* "" for the default volume */
	bool snapshot;			/* read-only */
	uint64_t parent;		/* id it was taken from (0: none) */
	uint64_t size;			/* logical bytes */
	uint64_t mapped_blocks;		/* blocks that are not holes */
	uint64_t create_generation;
	uint64_t create_time;		/* Unix seconds */
	bool open;			/* open in this process */
};

struct backend_scrub_progress {
	uint64_t done;			/* mapped blocks verified so far */
	uint64_t total;			/* mapped blocks of every volume */
	uint64_t bad;			/* mismatches so far */
	uint32_t block_size;		/* bytes per block */
};

/* For a progress callback that limits a scrub to rate bytes/s (0: no
 * limit): sleeps until p's blocks, begun at start_us
 * (g_get_monotonic_time()), are due. */
void backend_scrub_pace(gint64 start_us, const struct backend_scrub_progress *p,
			uint64_t rate);

struct backend_bad_block {
	uint64_t volume_id;
	char volume[BACKEND_VOLUME_NAME_MAX + 1];
	uint64_t lbn, pbn;
	int error;			/* -EIO (read failed) or -EBADMSG
					 * (checksum mismatch) */
};

/* Called now and then with progress; return false to stop the scrub
 * (it then returns -ECANCELED). */
typedef bool (*backend_scrub_progress_fn)(void *opaque,
				const struct backend_scrub_progress *p);
/* Called once per bad block found. */
typedef void (*backend_scrub_bad_fn)(void *opaque,
				     const struct backend_bad_block *bad);

struct backend_check_result {
	uint64_t generation;		/* the superblock checked */
	uint64_t nr_blocks;
	uint64_t used_blocks;		/* non-zero counts */
	uint64_t pages;			/* distinct metadata pages reachable */
	uint64_t data_blocks;		/* distinct data blocks referenced */
	uint64_t volumes;
	uint64_t errors;		/* problems found, leaks included */
	uint64_t leaked;		/* blocks counted more than referenced */
	uint64_t bad_data;		/* BACKEND_CHECK_DATA: mismatches */
};

enum backend_check_flags {
	/* Also read every referenced data block and verify its checksum
	 * (an offline scrub); each mismatch is a problem. */
	BACKEND_CHECK_DATA = 1 << 0,
};

/* Receives each problem as one line (the first 100 at most). */
typedef void (*backend_check_report_fn)(void *opaque, const char *msg);

/*
 * What a container format tells of its image beyond backend_info
 * (backend_ops.describe; `dioloop info` prints it), as qemu-img info's
 * format-specific part.
 */
struct backend_details {
	uint32_t format_version;
	char checksum[16];		/* the data checksum's name; "" none */
	uint64_t generation;		/* the last durable commit */
	bool has_uuid;
	uint8_t uuid[16];
	uint64_t container_size;	/* bytes of the container on its store */
	uint64_t container_allocated;	/* bytes its store uses for it */
	uint32_t block_size;		/* the container's allocation unit */
	uint64_t blocks;		/* container blocks */
	uint64_t used_blocks;		/* referenced */
	uint64_t pinned_blocks;		/* freed, not reusable yet */
};

/* One counter of a backend (backend_ops.stats). */
typedef void (*backend_stat_fn)(void *opaque, const char *key,
				uint64_t value);

/*
 * The volume op set.  b is an open backend of the table (any volume of
 * its image); every op may block (a worker or control thread, never a
 * completion thread).  All ops are required when the set is given.
 */
struct backend_volume_ops {
	/* Append the volumes of b's image, in id order, to out (GArray of
	 * struct backend_volume_info). */
	int (*list)(struct backend *b, GArray *out, GError **error);
	/* Freeze b's volume as a new volume name: read-only (writable
	 * false) or a writable clone; point in time, durable on return.
	 * -EEXIST, -EINVAL (a bad name), -EROFS, -ENOSPC, -EIO. */
	int (*snapshot)(struct backend *b, const char *name, bool writable,
			GError **error);
	/* Delete the volume name of b's image, freeing what nothing else
	 * uses.  -ENOENT, -EBUSY (open, or the default volume), -EROFS. */
	int (*delete)(struct backend *b, const char *name, GError **error);
	/* Read and verify every data block of every volume of b's image
	 * while in use; 0 when it ran to the end (res: what it found),
	 * -ECANCELED, or -errno.  Callbacks may be NULL. */
	int (*scrub)(struct backend *b, backend_scrub_progress_fn progress,
		     backend_scrub_bad_fn bad, void *opaque,
		     struct backend_scrub_progress *res, GError **error);
	/* Check the unopened image at path (flags: enum
	 * backend_check_flags): 0 when the check ran (res->errors says
	 * whether it is clean), -errno when it could not.  report may be
	 * NULL. */
	int (*check)(const char *path, unsigned int flags,
		     struct backend_check_result *res,
		     backend_check_report_fn report, void *opaque,
		     GError **error);
	/* Make b's writes durable every ms milliseconds when something
	 * changed (0: only on flush and close). */
	int (*set_commit_interval)(struct backend *b, unsigned int ms,
				   GError **error);
};

/* Whether every op of the set is there (the registry's check). */
bool backend_volume_ops_complete(const struct backend_volume_ops *v);
/* Whether b's table has the volume op set. */
bool backend_has_volumes(const struct backend *b);

/* The core's entry points (struct backend_volume_ops). */
int backend_volume_list(struct backend *b, GArray *out, GError **error);
int backend_volume_snapshot(struct backend *b, const char *name,
			    GError **error);
int backend_volume_clone(struct backend *b, const char *name,
			 GError **error);
int backend_volume_delete(struct backend *b, const char *name,
			  GError **error);
int backend_volume_scrub(struct backend *b, backend_scrub_progress_fn progress,
			 backend_scrub_bad_fn bad, void *opaque,
			 struct backend_scrub_progress *res, GError **error);
int backend_volume_check(const struct backend_ops *ops, const char *path,
			 unsigned int flags, struct backend_check_result *res,
			 backend_check_report_fn report, void *opaque,
			 GError **error);
int backend_volume_set_commit_interval(struct backend *b, unsigned int ms,
				       GError **error);

/*
 * The volume of b's image called name ("" the default one) into *info:
 * 0, -ENOENT (no such volume, after a message), -EOPNOTSUPP (one volume
 * only) or -errno.  info may be NULL.
 */
int backend_volume_lookup(struct backend *b, const char *name,
			  struct backend_volume_info *info, GError **error);

/* Emit b's own counters (backend_ops.stats; none without the op): 0 or
 * -errno.  Any thread. */
int backend_stats(struct backend *b, backend_stat_fn emit, void *opaque);

/* Fill d (backend_ops.describe, through filters): 0, -EOPNOTSUPP for a
 * backend that tells nothing more than backend_info, or -errno.  Any
 * thread. */
int backend_describe(struct backend *b, struct backend_details *d);

#endif
