/* SPDX-License-Identifier: MIT */
/*
 * The "rbd" backend: an image in a Ceph cluster, reached with librbd's
 * asynchronous API (no kernel rbd client, no mapping).
 *
 * URL:  rbd://POOL[/NAMESPACE]/IMAGE[?OPTION=VALUE&...]
 *       rbd://POOL[/NAMESPACE][?...]  a whole pool (or namespace) as a
 *                                     SOURCE: every image is a node
 *
 *   Options:  conf=PATH     the cluster's ceph.conf (default: $CEPH_CONF,
 *                           then librados's search path)
 *             id=USER       the cephx user without "client." (default:
 *                           admin, or --id in $CEPH_ARGS)
 *             keyring=PATH  its keyring (default: the conf's)
 *             timeout=S     how long a request waits for an unreachable
 *                           cluster before failing with EIO (default 60;
 *                           also bounds connecting)
 *   $CEPH_ARGS is applied as the rbd tool applies it.  The scheme is
 *   "rbd://" and not QEMU's "rbd:" because a URL is SCHEME://... in the
 *   whole tree (backend_is_url): a file named "rbd:x" in a SOURCE stays a
 *   file.
 *
 * Semantics:
 *  - byte granular; each request is one rbd_aio_readv/rbd_aio_writev
 *    whose iovec array lives in the request until it completes (librbd
 *    keeps the pointer, not a copy).  librbd's completion callback (on
 *    its per-image strand) completes the kiocbs (rbd_int.h).
 *  - librbd's cache is off (url.c: its writeback dropped writes that
 *    timed out, and the next flush returned 0): a write completes when
 *    the OSDs have it.  flush is rbd_aio_flush.  discard is write_zeroes
 *    (rbd.c: rbd_aio_discard skips unaligned parts).  write_zeroes and
 *    resize are librbd's; map reports holes from rbd_diff_iterate2.
 *  - a writable open takes the image's exclusive lock for good
 *    (rbd_lock_acquire): a second writer anywhere is refused with EBUSY
 *    and a line naming the holder.  A holder that crashed keeps the lock
 *    until the OSDs drop its watch (osd_client_watch_timeout, 30 s by
 *    default); librbd then breaks it.
 *  - a request the cluster does not answer within timeout= fails with
 *    EIO (librados's rados_osd_op_timeout), with one log line per outage.
 *  - volumes (volume.c): rbd snapshots are read-only volumes, a clone
 *    NAME the image IMAGE@NAME (rbd_clone3 of a protected snapshot).
 */
#ifndef DIOLOOP_RBD_H
#define DIOLOOP_RBD_H

extern const struct backend_ops rbd_backend_ops;

#endif
