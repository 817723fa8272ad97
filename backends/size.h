/* SPDX-License-Identifier: MIT */
/*
 * Numbers and byte sizes as users write them, parsed strictly: decimal
 * digits only, no sign (a '-' never wraps around), no spaces, nothing
 * after them but what the format allows, no overflow.  Every number from
 * a command line, a mount option, a ctl command or a URL goes through
 * these.
 */
#ifndef DIOLOOP_SIZE_H
#define DIOLOOP_SIZE_H

#include <stdint.h>

/*
 * Parse a size: a decimal number with an optional K, M, G, T, P or E
 * suffix (powers of 1024, either case, an optional trailing "iB" or "B":
 * 1K = 1KB = 1KiB = 1024, as qemu-img reads them).  With a suffix the
 * number may have a fraction ("1.5G"), rounded to the nearest byte.
 * 0, or -EINVAL for anything else and -ERANGE above max.
 */
int dioloop_parse_size(const char *s, uint64_t max, uint64_t *out);

/* A plain decimal number up to max: 0, -EINVAL, or -ERANGE. */
int dioloop_parse_u64(const char *s, uint64_t max, uint64_t *out);

/*
 * A decimal number with an optional fraction ("5", "0.25", ".5"; no sign,
 * exponent, hex, inf or nan) up to max.  With end, *end is set after it
 * (a unit may follow); without, nothing may follow.  0, -EINVAL, -ERANGE.
 */
int dioloop_parse_decimal(const char *s, double max, double *out,
			  const char **end);

/* g_format_size_full() in IEC units ("1.5 GiB", "512 bytes") into buf,
 * for callers that keep it on the stack. */
const char *dioloop_format_size(uint64_t bytes, char *buf, unsigned len);

#endif
