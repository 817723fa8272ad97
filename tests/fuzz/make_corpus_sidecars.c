/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpora of fuzz_orphan_record and fuzz_redirect: a few
 * valid sidecars made by the real encoders (orphan_encode,
 * dioloop_redirect_format) and near-valid ones (one field or one byte
 * off).  Deterministic.
 *
 * Usage: make_corpus_sidecars ORPHAN_DIR REDIRECT_DIR
 */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/raw/orphan.h"
#include "fusefs/redirect.h"

static void put(const char *dir, const char *name, const void *buf,
		size_t len)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	GError *err = NULL;

	if (!g_file_set_contents(path, buf, (gssize)len, &err)) {
		fprintf(stderr, "make_corpus_sidecars: %s\n", err->message);
		exit(1);
	}
}

static void orphan_seeds(const char *dir)
{
	static const struct {
		const char *name;
		uint64_t size;
	} sizes[] = {
		{ "size-0", 0 },
		{ "size-4096", 4096 },
		{ "size-65535", 65535 },
		{ "size-65536", 65536 },
		{ "size-int64-max-plus-1", (uint64_t)INT64_MAX + 1 },
		{ "size-uint64-max", UINT64_MAX },
	};
	unsigned char buf[ORPHAN_RECORD_LEN + 1];
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
		orphan_encode(buf, sizes[i].size, 2049, 12345);
		put(dir, sizes[i].name, buf, ORPHAN_RECORD_LEN);
	}
	orphan_encode(buf, 4096, 2049, 12345);
	put(dir, "short", buf, ORPHAN_RECORD_LEN - 1);
	buf[ORPHAN_RECORD_LEN] = 0;
	put(dir, "one-byte-more", buf, ORPHAN_RECORD_LEN + 1);
	buf[20] ^= 1;			/* the size, under an old checksum */
	put(dir, "bad-checksum", buf, ORPHAN_RECORD_LEN);
	/* Version 1: 32 bytes, no dev:ino. */
	orphan_encode(buf, 4096, 0, 0);
	buf[8] = 1;
	buf[12] = 32;
	put(dir, "version-1", buf, 32);
}

static void redirect_seeds(const char *dir)
{
	static const struct {
		const char *name;
		struct dioloop_redirect r;
	} valid[] = {
		{ "file", { "disk0.img", 2049, 131, 2050, 7, "/srv/images/disk0.img" } },
		{ "url", { "disk0.img", 2049, 131, 0, 0, "nfs://127.0.0.1:2049/export/disk0.img?version=3" } },
		{ "url-upper-case", { "d", 0, 0, 0, 0, "NFS://h/e/d" } },
		{ "file-max-numbers", { "a b \xc3\xa9.img", UINT64_MAX, UINT64_MAX, UINT64_MAX,
					UINT64_MAX, "/a b/\xc3\xa9" } },
	};
	static const struct {
		const char *name, *text;
	} near[] = {
		{ "file-zero-target",
		  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 0 0\npath /x/y\n" },
		{ "url-with-target",
		  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath nfs://h/e\n" },
		{ "no-final-newline",
		  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x" },
		{ "version-1", "dioloop-redirect 1\n/x/y\n" },
		{ "number-overflow",
		  "dioloop-redirect 2\nname a.img\nimage 18446744073709551616 2\ntarget 3 4\npath /x\n" },
		{ "relative-path",
		  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath x/y\n" },
		{ "tab-in-path",
		  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x\ty\n" },
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(valid); i++) {
		g_autofree char *text = dioloop_redirect_format(&valid[i].r);

		put(dir, valid[i].name, text, strlen(text));
	}
	for (i = 0; i < G_N_ELEMENTS(near); i++)
		put(dir, near[i].name, near[i].text, strlen(near[i].text));
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: make_corpus_sidecars ORPHAN_DIR REDIRECT_DIR\n");
		return 2;
	}
	orphan_seeds(argv[1]);
	redirect_seeds(argv[2]);
	return 0;
}
