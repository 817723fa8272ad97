/* SPDX-License-Identifier: MIT */
/* The cow backend's probe and create (the registry reaches them through
 * cow_backend_ops only). */
#ifndef DIOLOOP_COW_CREATE_H
#define DIOLOOP_COW_CREATE_H

#include "backends/backend.h"

/* 100 for a file with a cow superblock (either copy), else 0. */
int cow_probe(const struct backend_probe_args *p);
/* cow_format with a->size and a->checksum, or for a URL the image made on
 * its protocol's store and the format written into it: 0 or -errno with
 * the line in *error. */
int cow_create(const struct backend_create_args *a, GError **error);
/* The checksums cow_create accepts, NULL-terminated. */
extern const char *const cow_checksum_names[];

#endif
