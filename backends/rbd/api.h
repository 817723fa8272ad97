/* SPDX-License-Identifier: MIT */
/*
 * librados and librbd, loaded when the first rbd: URL is used.
 *
 * Linked the usual way, librbd comes with libceph-common, whose 130 MiB
 * of static data every process of dioloop would map, including the many
 * that never touch a Ceph cluster.  The dynamic linker took about 35 ms
 * of every process's start (`dioloop --version`: 54 ms, 19 ms without),
 * and a leak checker scans that data at every exit (0.6 s per process
 * under ASan).  So the backend calls librbd through the table below, filled by
 * drbd_api_load() from dlopen(): a machine without librbd1 runs every
 * other backend, and an rbd: URL there gets one line saying what is
 * missing.  A failed load stands for the life of the process: a daemon
 * started before librbd1 was installed is restarted to serve rbd.
 *
 * The macros at the end let the backend's code call rbd_open() and the
 * rest by their own names; the headers give each entry its exact type.
 */
#ifndef DIOLOOP_RBD_API_H
#define DIOLOOP_RBD_API_H

#include <glib.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

/* The sonames of Debian's librbd1 and librados2: Ceph's stable C ABI. */
#define DRBD_LIBRBD_SONAME "librbd.so.1"
#define DRBD_LIBRADOS_SONAME "librados.so.2"

/* Every librados and librbd function the backend calls. */
#define DRBD_API_FUNCTIONS(X) \
	X(rados_conf_parse_env) \
	X(rados_conf_read_file) \
	X(rados_conf_set) \
	X(rados_connect) \
	X(rados_create) \
	X(rados_ioctx_create) \
	X(rados_ioctx_destroy) \
	X(rados_ioctx_set_namespace) \
	X(rados_shutdown) \
	X(rbd_aio_create_completion) \
	X(rbd_aio_discard) \
	X(rbd_aio_flush) \
	X(rbd_aio_get_return_value) \
	X(rbd_aio_readv) \
	X(rbd_aio_release) \
	X(rbd_aio_write_zeroes) \
	X(rbd_aio_writev) \
	X(rbd_clone3) \
	X(rbd_close) \
	X(rbd_create) \
	X(rbd_diff_iterate2) \
	X(rbd_get_access_timestamp) \
	X(rbd_get_create_timestamp) \
	X(rbd_get_modify_timestamp) \
	X(rbd_get_parent) \
	X(rbd_get_size) \
	X(rbd_image_options_create) \
	X(rbd_image_options_destroy) \
	X(rbd_image_spec_list_cleanup) \
	X(rbd_linked_image_spec_cleanup) \
	X(rbd_linked_image_spec_list_cleanup) \
	X(rbd_list2) \
	X(rbd_list_children3) \
	X(rbd_lock_acquire) \
	X(rbd_lock_get_owners) \
	X(rbd_lock_get_owners_cleanup) \
	X(rbd_lock_release) \
	X(rbd_metadata_get) \
	X(rbd_metadata_remove) \
	X(rbd_metadata_set) \
	X(rbd_open) \
	X(rbd_open_read_only) \
	X(rbd_remove) \
	X(rbd_resize) \
	X(rbd_snap_create2) \
	X(rbd_snap_exists) \
	X(rbd_snap_get_timestamp) \
	X(rbd_snap_is_protected) \
	X(rbd_snap_list) \
	X(rbd_snap_list_end) \
	X(rbd_snap_protect) \
	X(rbd_snap_remove2) \
	X(rbd_snap_spec_cleanup) \
	X(rbd_snap_unprotect)

struct drbd_api {
#define DRBD_API_MEMBER(fn) __typeof__(fn) *fn;
	DRBD_API_FUNCTIONS(DRBD_API_MEMBER)
#undef DRBD_API_MEMBER
};

extern struct drbd_api drbd_api;

/*
 * Load librados and librbd once per process: 0, or -ELIBACC with the
 * line in *error (prefixed with what, e.g. the URL).  Thread-safe; the
 * first outcome stands.
 */
int drbd_api_load(const char *what, GError **error);

#ifndef DRBD_API_DEFINE
#define rados_conf_parse_env (drbd_api.rados_conf_parse_env)
#define rados_conf_read_file (drbd_api.rados_conf_read_file)
#define rados_conf_set (drbd_api.rados_conf_set)
#define rados_connect (drbd_api.rados_connect)
#define rados_create (drbd_api.rados_create)
#define rados_ioctx_create (drbd_api.rados_ioctx_create)
#define rados_ioctx_destroy (drbd_api.rados_ioctx_destroy)
#define rados_ioctx_set_namespace (drbd_api.rados_ioctx_set_namespace)
#define rados_shutdown (drbd_api.rados_shutdown)
#define rbd_aio_create_completion (drbd_api.rbd_aio_create_completion)
#define rbd_aio_discard (drbd_api.rbd_aio_discard)
#define rbd_aio_flush (drbd_api.rbd_aio_flush)
#define rbd_aio_get_return_value (drbd_api.rbd_aio_get_return_value)
#define rbd_aio_readv (drbd_api.rbd_aio_readv)
#define rbd_aio_release (drbd_api.rbd_aio_release)
#define rbd_aio_write_zeroes (drbd_api.rbd_aio_write_zeroes)
#define rbd_aio_writev (drbd_api.rbd_aio_writev)
#define rbd_clone3 (drbd_api.rbd_clone3)
#define rbd_close (drbd_api.rbd_close)
#define rbd_create (drbd_api.rbd_create)
#define rbd_diff_iterate2 (drbd_api.rbd_diff_iterate2)
#define rbd_get_access_timestamp (drbd_api.rbd_get_access_timestamp)
#define rbd_get_create_timestamp (drbd_api.rbd_get_create_timestamp)
#define rbd_get_modify_timestamp (drbd_api.rbd_get_modify_timestamp)
#define rbd_get_parent (drbd_api.rbd_get_parent)
#define rbd_get_size (drbd_api.rbd_get_size)
#define rbd_image_options_create (drbd_api.rbd_image_options_create)
#define rbd_image_options_destroy (drbd_api.rbd_image_options_destroy)
#define rbd_image_spec_list_cleanup (drbd_api.rbd_image_spec_list_cleanup)
#define rbd_linked_image_spec_cleanup (drbd_api.rbd_linked_image_spec_cleanup)
#define rbd_linked_image_spec_list_cleanup (drbd_api.rbd_linked_image_spec_list_cleanup)
#define rbd_list2 (drbd_api.rbd_list2)
#define rbd_list_children3 (drbd_api.rbd_list_children3)
#define rbd_lock_acquire (drbd_api.rbd_lock_acquire)
#define rbd_lock_get_owners (drbd_api.rbd_lock_get_owners)
#define rbd_lock_get_owners_cleanup (drbd_api.rbd_lock_get_owners_cleanup)
#define rbd_lock_release (drbd_api.rbd_lock_release)
#define rbd_metadata_get (drbd_api.rbd_metadata_get)
#define rbd_metadata_remove (drbd_api.rbd_metadata_remove)
#define rbd_metadata_set (drbd_api.rbd_metadata_set)
#define rbd_open (drbd_api.rbd_open)
#define rbd_open_read_only (drbd_api.rbd_open_read_only)
#define rbd_remove (drbd_api.rbd_remove)
#define rbd_resize (drbd_api.rbd_resize)
#define rbd_snap_create2 (drbd_api.rbd_snap_create2)
#define rbd_snap_exists (drbd_api.rbd_snap_exists)
#define rbd_snap_get_timestamp (drbd_api.rbd_snap_get_timestamp)
#define rbd_snap_is_protected (drbd_api.rbd_snap_is_protected)
#define rbd_snap_list (drbd_api.rbd_snap_list)
#define rbd_snap_list_end (drbd_api.rbd_snap_list_end)
#define rbd_snap_protect (drbd_api.rbd_snap_protect)
#define rbd_snap_remove2 (drbd_api.rbd_snap_remove2)
#define rbd_snap_spec_cleanup (drbd_api.rbd_snap_spec_cleanup)
#define rbd_snap_unprotect (drbd_api.rbd_snap_unprotect)
#endif

#endif
