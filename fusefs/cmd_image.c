/* SPDX-License-Identifier: MIT */
/* dioloop create / dioloop info: make and describe images. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/size.h"
#include "fusefs/commands.h"

#define DIOLOOP_MAX_IMAGE_SIZE (UINT64_C(1) << 60)
#define DIOLOOP_DEFAULT_IMAGE_SIZE (UINT64_C(1) << 30)

/* Create a sparse raw image of size bytes; refuses to overwrite. */
static int create_raw(const char *path, uint64_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 || fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (ret < 0)
		unlink(path);
	return ret;
}

int dioloop_cmd_create(int argc, char **argv)
{
	g_autofree char *size_arg = NULL, *format = NULL;
	GOptionEntry entries[] = {
		{ "size", 's', 0, G_OPTION_ARG_STRING, &size_arg,
		  "logical size, with K/M/G/T suffixes (default 1G); a "
		  "multiple of 512", "SIZE" },
		{ "format", 'f', 0, G_OPTION_ARG_STRING, &format,
		  "image format: raw (default)", "FORMAT" },
		{ NULL },
	};
	uint64_t size = DIOLOOP_DEFAULT_IMAGE_SIZE;
	int ret;

	if (!dioloop_parse_args("create", "PATH",
				"Create an image (sparse: it takes no space "
				"until written).", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("create: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (size_arg) {
		ret = dioloop_parse_size(size_arg, DIOLOOP_MAX_IMAGE_SIZE,
					 &size);
		if (ret < 0 || size % 512) {
			dioloop_err("create: bad --size '%s': %s", size_arg,
				    ret == -ERANGE ? "too large (at most 1 EiB)" :
				    ret < 0 ? "expected a number with an "
					      "optional K/M/G/T suffix" :
					      "not a multiple of 512 bytes");
			return DIOLOOP_EXIT_USAGE;
		}
	}
	if (format && strcmp(format, "raw") != 0) {
		dioloop_err("create: bad --format '%s': known formats: raw",
			    format);
		return DIOLOOP_EXIT_USAGE;
	}
	ret = create_raw(argv[1], size);
	if (ret < 0) {
		dioloop_err("create: %s: %s", argv[1], g_strerror(-ret));
		return DIOLOOP_EXIT_FAIL;
	}
	return DIOLOOP_EXIT_OK;
}

int dioloop_cmd_info(int argc, char **argv)
{
	gboolean json = FALSE;
	GOptionEntry entries[] = {
		{ "json", 0, 0, G_OPTION_ARG_NONE, &json,
		  "print one JSON object", NULL },
		{ NULL },
	};
	struct backend_open_args args = { 0 };
	struct backend_info info;
	struct backend *b;
	char s1[32], s2[32];
	int ret;

	if (!dioloop_parse_args("info", "PATH",
				"Show an image's format, logical size and the "
				"bytes it uses on its host.", entries, &argc,
				&argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("info: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	args.path = argv[1];
	args.flags = BACKEND_OPEN_RDONLY;
	ret = backend_open("raw", &args, &b);
	if (ret < 0) {
		dioloop_err("info: %s: %s", argv[1], g_strerror(-ret));
		return DIOLOOP_EXIT_FAIL;
	}
	ret = backend_info(b, &info);
	backend_close(b);
	if (ret < 0) {
		dioloop_err("info: %s: %s", argv[1], g_strerror(-ret));
		return DIOLOOP_EXIT_FAIL;
	}
	if (json) {
		g_autofree char *esc = g_strescape(argv[1], NULL);

		printf("{\"path\": \"%s\", \"format\": \"%s\", \"size\": %" PRIu64
		       ", \"allocated\": %" PRIu64 "}\n", esc, info.format,
		       info.size, info.allocated);
	} else {
		printf("path:      %s\nformat:    %s\nsize:      %" PRIu64
		       " (%s)\nallocated: %" PRIu64 " (%s)\n", argv[1],
		       info.format, info.size,
		       dioloop_format_size(info.size, s1, sizeof(s1)),
		       info.allocated,
		       dioloop_format_size(info.allocated, s2, sizeof(s2)));
	}
	return DIOLOOP_EXIT_OK;
}
