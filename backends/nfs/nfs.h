/* SPDX-License-Identifier: MIT */
/*
 * The "nfs" backend (NFS-like): an image file on an NFS server, reached
 * with libnfs's asynchronous API, no kernel NFS client and no mount.
 *
 * URL:  nfs://HOST[:PORT]/DIR.../FILE[?OPTION=VALUE&...]
 *
 *   The directory part of the path (everything before the last '/') is
 *   mounted with the MOUNT protocol and FILE is opened in it: the server
 *   must export that directory or one of its ancestors (nfs-ganesha and
 *   the Linux server both let a client mount a subdirectory of an export).
 *   For NFSv3 the path is the server's real path of the export, not an
 *   NFSv4 pseudo path.  PORT is the NFS port (the same as nfsport=); the
 *   MOUNT port comes from the server's portmapper unless mountport= says.
 *
 *   Options:  version=3       the protocol (the default; see below for 4)
 *             uid=N, gid=N    credentials sent to the server (AUTH_SYS)
 *             timeout=S       how long requests wait for an unreachable
 *                             server before failing with EIO (default 60)
 *             sync=0|1        1: FILE_SYNC writes (as BACKEND_OPEN_SYNC)
 *             nfsport=N, mountport=N, tcp-syncnt=N, debug=N  (libnfs's)
 *
 *   version=4 is refused: libnfs 4.0 (Debian 12) reads over NFSv4 but
 *   fails every NFSv4 WRITE ("ZDR error: Failed to encode COMPOUND4args"),
 *   and this backend needs NFSv3's WRITE/COMMIT write verifier anyway.
 *
 * Semantics (see nfs_int.h for how):
 *  - byte granular: any offset, length and memory alignment; requests are
 *    split into READ/WRITE RPCs of the server's rsize/wsize, many in
 *    flight; holes read as zeros (the server's doing); reads stop at EOF.
 *  - writes are UNSTABLE and kept (a copy) until a COMMIT returns the
 *    write verifier their WRITEs returned; a changed verifier (the server
 *    restarted and may have lost them) makes flush send them again before
 *    it reports success.  sync=1 writes FILE_SYNC instead.
 *  - a lost server: requests wait while the backend reconnects (new
 *    context, MOUNT, LOOKUP of the file), then fail with -EIO once they
 *    have waited timeout seconds; close returns within about that time.
 *  - discard: -EOPNOTSUPP (NFSv3 cannot deallocate, and writing zeros over
 *    the network instead would make a discard of a whole image cost as
 *    much as writing it); write_zeroes writes zeros (the core's default);
 *    map: all data (NFSv3 has no SEEK_DATA).
 */
#ifndef DIOLOOP_NFS_H
#define DIOLOOP_NFS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct backend;

extern const struct backend_ops nfs_backend_ops;

/* Counters of one open nfs image (monotonic). */
struct nfs_backend_stats {
	uint64_t rpcs;			/* READ/WRITE/COMMIT RPCs sent */
	uint64_t commits;		/* COMMITs answered */
	uint64_t reconnects;		/* connections made after the first */
	uint64_t verifier_changes;	/* COMMITs that found a new verifier */
	uint64_t resent_writes;		/* WRITEs sent again for that */
	uint64_t resent_bytes;
	uint64_t timeouts;		/* requests failed after timeout */
	uint64_t retained_bytes;	/* now: written, not yet committed */
};

/* Fill stats for b, an image opened with the nfs backend.  Any thread. */
void nfs_backend_get_stats(struct backend *b, struct nfs_backend_stats *stats);

/*
 * Create the image file named by url with size bytes (O_EXCL: -EEXIST if
 * it exists).  sparse_ok: a sparse file (truncate); otherwise zeros are
 * written over the whole size.  The file is committed before this
 * returns.  0 or -errno (logged, one line).
 */
int nfs_image_create(const char *url, uint64_t size, bool sparse_ok);

/* Remove the image file named by url.  0 or -errno (logged, one line). */
int nfs_image_remove(const char *url);

/*
 * Check the form of url without reaching the server: want_file, an image
 * URL (nfs://HOST/DIR/FILE); else a directory URL.  0 or -EINVAL (logged,
 * one line saying what is wrong).
 */
int nfs_url_check(const char *url, bool want_file);

/*
 * Append to names (g_free'd strings) the image names in the directory
 * url (nfs://HOST[:PORT]/DIR[?options]): regular files whose names do not
 * start with '.', sorted.  0 or -errno (logged, one line).
 */
int nfs_list_images(const char *dir_url, GPtrArray *names);

#endif
