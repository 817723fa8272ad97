/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of /dev/fuse.  Requests are read and replies written
 * through libfuse's custom I/O hooks (fuse_session_custom_io), so that the
 * daemon can take requests newer than its libfuse knows in the shape of an
 * older request it does know, and reply with what libfuse cannot say.
 *
 * Today: FUSE_COPY_FILE_RANGE_64 (kernel 6.18+).  libfuse 3.14 answers it
 * ENOSYS; two such copies in flight at once then race in the kernel, the
 * later ENOSYS turns copy_file_range off for the whole mount, and every
 * copy after that falls back to a splice through the page cache, with its
 * folios locked while the reads wait in the node's throttle.  Taken as
 * FUSE_COPY_FILE_RANGE, it is never answered ENOSYS.
 *
 * And libfuse 3.14's INIT reply cannot say FUSE_DIRECT_IO_ALLOW_MMAP
 * (7.39): without it, MAP_SHARED of a node (a direct-I/O file) fails with
 * ENODEV, where a block device maps shared.  The reply is extended with it
 * when the kernel offers it.
 */
#ifndef DIOLOOP_SESSION_IO_H
#define DIOLOOP_SESSION_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

struct fuse_session;
struct fuse_file_info;
typedef struct fuse_req *fuse_req_t;

/* Read and write the session's requests through the hooks below.  Call
 * after fuse_session_mount.  0 or -errno. */
int dioloop_session_io_install(struct fuse_session *se);

/* Rewrite the request in buf (len bytes, as read from /dev/fuse) into a
 * shape libfuse knows, when it has one; leave anything else alone.  Any
 * thread (each request buffer is its reader's). */
void dioloop_session_io_fixup(void *buf, size_t len);

/* Extend the reply in iov (as libfuse is about to write it) where the
 * daemon says more than libfuse can: today the INIT reply's flags2.  True
 * when iov is the INIT reply.  Any thread. */
bool dioloop_session_io_fixup_reply(struct iovec *iov, int count);

/* fuse_reply_open with FOPEN_PARALLEL_DIRECT_WRITES added to a direct-I/O
 * open (protocol 7.36, which libfuse 3.14 cannot say): nodes, and the
 * control file, so that one long command does not hold the others back.
 * As fuse_reply_open: 0, or -errno (-ENOENT: the opener was interrupted).
 * FUSE worker. */
int dioloop_reply_open(fuse_req_t req, const struct fuse_file_info *fi);

#endif
