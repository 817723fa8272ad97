/* SPDX-License-Identifier: MIT */
/* Byte sizes as users write them. */
#ifndef DIOLOOP_SIZE_H
#define DIOLOOP_SIZE_H

#include <stdint.h>

/*
 * Parse a size: decimal digits with an optional K, M, G or T suffix
 * (powers of 1024, either case, an optional trailing "iB" or "B").
 * 0, or -EINVAL for anything else and -ERANGE above max.
 */
int dioloop_parse_size(const char *s, uint64_t max, uint64_t *out);

/* Format bytes as "1.5 GiB" (or "512 B") into buf. */
const char *dioloop_format_size(uint64_t bytes, char *buf, unsigned len);

#endif
