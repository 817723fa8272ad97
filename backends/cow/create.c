/* SPDX-License-Identifier: MIT */
/* The cow backend's probe and create, for the registry. */
#include <errno.h>
#include <stdlib.h>

#include "backends/cow/cow.h"
#include "backends/cow/cow_int.h"
#include "backends/cow/create.h"
#include "backends/cow/format.h"

const char *const cow_checksum_names[] = { "crc32c", "xxhash64", NULL };

int cow_probe(const struct backend_probe_args *p)
{
	if (p->fd < 0)
		return cow_is_image_url(p->path) ? 100 : 0;
	return cow_is_image_fd(p->fd) ? 100 : 0;
}

/* Write the encoded blocks buf into the store's new image at url and
 * flush them.  0 or -errno with the line in *error. */
static int cow_store_write_new(const char *url, const uint8_t *buf,
			       size_t len, GError **error)
{
	struct backend_open_args args = { .path = url, .error = error };
	struct backend *store;
	ssize_t done;
	int ret;

	ret = cow_store_open(&args, false, &store);
	if (ret < 0)
		return ret;
	done = cow_store_rw(store, true, (void *)buf, len, 0);
	ret = done < 0 ? (int)done : 0;
	if (ret == 0)
		ret = backend_flush(store);
	backend_close(store);
	if (ret < 0)
		backend_set_error(error, ret, "%s: writing the cow format: %s",
				  url, g_strerror(-ret));
	return ret;
}

/*
 * A new image on a protocol's store (cow on rbd:// or nfs://): the
 * store's own image (made as a raw one there is, never over an existing
 * one) of the container's first blocks, which are then written and
 * flushed through the store.  Anything failing after the store's image
 * exists removes it again.  0 or -errno with the line in *error.
 */
static int cow_create_on_store(const char *url,
			       const struct cow_format_opts *opts,
			       GError **error)
{
	size_t len = COW_FORMAT_BLOCKS * COW_BLOCK_SIZE;
	struct backend_create_args store_args = { .path = url, .size = len };
	g_autoptr(GError) undo = NULL;
	struct cow_err err = { "" };
	uint8_t *buf;
	int ret;

	if (posix_memalign((void **)&buf, COW_BLOCK_SIZE, len))
		return backend_set_error(error, -ENOMEM, "%s: %s", url,
					 g_strerror(ENOMEM));
	ret = cow_format_encode(opts, buf, &err);
	if (ret < 0) {
		backend_set_error(error, ret, "%s: %s", url, err.msg);
		goto out;
	}
	ret = backend_create("raw", &store_args, error);
	if (ret < 0)
		goto out;
	ret = cow_store_write_new(url, buf, len, error);
	if (ret < 0 && backend_remove_url(url, &undo) < 0)
		g_warning("%s: the half-made image is left: %s", url,
			  undo->message);
out:
	free(buf);
	return ret;
}

int cow_create(const struct backend_create_args *a, GError **error)
{
	struct cow_format_opts opts = { .size = a->size, .mode = a->mode,
					.created = a->created };
	struct cow_err err = { "" };
	int ret;

	if (a->checksum) {
		opts.csum_type = cow_csum_parse(a->checksum);
		if (!opts.csum_type)
			return backend_set_error(error, -EINVAL,
						 "%s: unknown checksum '%s'",
						 a->path, a->checksum);
	}
	if (backend_is_url(a->path))
		return cow_create_on_store(a->path, &opts, error);
	ret = cow_format(a->path, &opts, &err);
	if (ret < 0)
		backend_set_error(error, ret, "%s", err.msg[0] ? err.msg :
				  g_strerror(-ret));
	return ret;
}
