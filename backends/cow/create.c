/* SPDX-License-Identifier: MIT */
/* The cow backend's probe and create, for the registry. */
#include <errno.h>

#include "backends/cow/cow.h"
#include "backends/cow/create.h"
#include "backends/cow/format.h"

const char *const cow_checksum_names[] = { "crc32c", "xxhash64", NULL };

int cow_probe(const struct backend_probe_args *p)
{
	return cow_is_image_fd(p->fd) ? 100 : 0;
}

int cow_create(const struct backend_create_args *a, GError **error)
{
	struct cow_format_opts opts = { .size = a->size };
	struct cow_err err = { "" };
	int ret;

	if (a->checksum) {
		opts.csum_type = cow_csum_parse(a->checksum);
		if (!opts.csum_type)
			return backend_set_error(error, -EINVAL,
						 "%s: unknown checksum '%s'",
						 a->path, a->checksum);
	}
	ret = cow_format(a->path, &opts, &err);
	if (ret < 0)
		backend_set_error(error, ret, "%s", err.msg[0] ? err.msg :
				  g_strerror(-ret));
	return ret;
}
