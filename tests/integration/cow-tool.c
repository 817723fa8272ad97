/* SPDX-License-Identifier: MIT */
/*
 * dioloop-cow-tool: what the cow integration tests need from the cow
 * library directly, independent of the daemon and the command line:
 *
 *   dioloop-cow-tool create PATH SIZE [crc32c|xxhash64]   a new image
 *   dioloop-cow-tool check PATH [data]     exit 0 clean, 1 errors, 2 could not
 *   dioloop-cow-tool pbn PATH VOLUME LBN   the physical block of a logical
 *                                          block ("-": the default volume;
 *                                          0: a hole), from the last commit
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cow/check.h"
#include "backends/cow/cow.h"
#include "backends/cow/format.h"
#include "backends/size.h"

static int usage(void)
{
	fprintf(stderr, "usage: dioloop-cow-tool create PATH SIZE [CSUM]\n"
			"       dioloop-cow-tool check PATH [data]\n"
			"       dioloop-cow-tool pbn PATH VOLUME LBN\n");
	return 2;
}

static int cmd_create(int argc, char **argv)
{
	struct cow_format_opts o = { 0 };
	struct cow_err err = { "" };
	int ret;

	if (argc < 2 || dioloop_parse_size(argv[1], UINT64_MAX, &o.size) < 0)
		return usage();
	if (argc > 2) {
		o.csum_type = cow_csum_parse(argv[2]);
		if (!o.csum_type) {
			fprintf(stderr, "unknown checksum '%s'\n", argv[2]);
			return 2;
		}
	}
	ret = cow_format(argv[0], &o, &err);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", argv[0], err.msg[0] ? err.msg :
			g_strerror(-ret));
		return 1;
	}
	return 0;
}

static void report(void *opaque, const char *msg)
{
	printf("%s\n", msg);
}

static int cmd_check(int argc, char **argv)
{
	struct cow_check_result res = { 0 };
	unsigned int flags = argc > 1 && !strcmp(argv[1], "data") ?
			     COW_CHECK_DATA : 0;
	int ret;

	if (argc < 1)
		return usage();
	ret = cow_check(argv[0], flags, &res, report, NULL);
	if (ret < 0) {
		fprintf(stderr, "%s: cannot check: %s\n", argv[0],
			g_strerror(-ret));
		return 2;
	}
	printf("%s: %llu volumes, %llu data blocks, %llu errors\n", argv[0],
	       (unsigned long long)res.volumes,
	       (unsigned long long)res.data_blocks,
	       (unsigned long long)res.errors);
	return res.errors ? 1 : 0;
}

static int cmd_pbn(int argc, char **argv)
{
	struct backend_open_args args = { .flags = BACKEND_OPEN_RDONLY };
	struct backend *b;
	uint64_t lbn, pbn = 0, csum = 0;
	int ret;

	if (argc < 3)
		return usage();
	args.path = argv[0];
	args.volume = strcmp(argv[1], "-") ? argv[1] : NULL;
	lbn = strtoull(argv[2], NULL, 0);
	ret = backend_open("cow", &args, &b);
	if (ret < 0) {
		fprintf(stderr, "%s: open: %s\n", argv[0], g_strerror(-ret));
		return 1;
	}
	ret = cow_map_block(b, lbn, &pbn, &csum);
	backend_close(b);
	if (ret < 0) {
		fprintf(stderr, "%s: block %llu: %s\n", argv[0],
			(unsigned long long)lbn, g_strerror(-ret));
		return 1;
	}
	printf("%llu\n", (unsigned long long)pbn);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "create"))
		return cmd_create(argc - 2, argv + 2);
	if (!strcmp(argv[1], "check"))
		return cmd_check(argc - 2, argv + 2);
	if (!strcmp(argv[1], "pbn"))
		return cmd_pbn(argc - 2, argv + 2);
	return usage();
}
