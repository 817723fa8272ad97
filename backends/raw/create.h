/* SPDX-License-Identifier: MIT */
/* The raw backend's probe and create (the registry reaches them through
 * raw_backend_ops only). */
#ifndef DIOLOOP_RAW_CREATE_H
#define DIOLOOP_RAW_CREATE_H

#include "backends/backend.h"

/* 1 for any regular file (the fallback format), else 0. */
int raw_probe(const struct backend_probe_args *p);
/* A new sparse file of a->size bytes, durable on return: 0 or -errno with
 * "PATH: reason" in *error. */
int raw_create(const struct backend_create_args *a, GError **error);

#endif
