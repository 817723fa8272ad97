/* SPDX-License-Identifier: MIT */
#include "backends/size.h"

#include <errno.h>
#include <stdbool.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

/* Leading decimal digits of s into *out, *end after them: 0, -EINVAL when
 * s does not start with a digit, -ERANGE past UINT64_MAX. */
static int parse_digits(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !g_ascii_isdigit(*s))
		return -EINVAL;
	for (; g_ascii_isdigit(*s); s++) {
		unsigned int d = (unsigned int)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*end = s;
	*out = v;
	return 0;
}

int dioloop_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	const char *end;
	uint64_t v;
	int ret = parse_digits(s, &end, &v);

	if (ret < 0)
		return ret;
	if (*end)
		return -EINVAL;
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int dioloop_parse_decimal(const char *s, double max, double *out,
			  const char **end)
{
	g_autofree char *num = NULL;
	const char *p = s;
	double v;

	if (!s || !(g_ascii_isdigit(*p) ||
		    (*p == '.' && g_ascii_isdigit(p[1]))))
		return -EINVAL;
	while (g_ascii_isdigit(*p))
		p++;
	if (*p == '.' && g_ascii_isdigit(p[1]))
		for (p++; g_ascii_isdigit(*p); p++)
			;
	if (!end && *p)
		return -EINVAL;
	/* strtod sees only the digits and point scanned, never a sign, an
	 * exponent, hex or inf that may follow. */
	num = g_strndup(s, (gsize)(p - s));
	v = g_ascii_strtod(num, NULL);
	if (!(v <= max))
		return -ERANGE;
	if (end)
		*end = p;
	*out = v;
	return 0;
}

/*
 * The fraction .DIGITS (frac over 10^n, frac < 10^n) times 2^shift,
 * rounded to the nearest integer: a long division one bit at a time, so
 * exact for any shift without a wider type.
 */
static uint64_t scale_fraction(uint64_t frac, uint64_t pow10, unsigned shift)
{
	uint64_t q = 0, r = frac;
	unsigned i;

	for (i = 0; i < shift; i++) {
		r *= 2;
		q = q * 2 + (r >= pow10);
		if (r >= pow10)
			r -= pow10;
	}
	return q + (r * 2 >= pow10);
}

int dioloop_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v, frac = 0, pow10 = 1, whole;
	unsigned int shift = 0;
	const char *end;
	bool point = false;
	int ret;

	if (s && *s == '.' && g_ascii_isdigit(s[1])) {
		v = 0;
		end = s;
	} else {
		ret = parse_digits(s, &end, &v);
		if (ret < 0)
			return ret;
	}
	if (*end == '.' && g_ascii_isdigit(end[1])) {
		point = true;
		for (end++; g_ascii_isdigit(*end); end++) {
			if (pow10 >= UINT64_C(100000000000000000))
				continue;	/* digits past 1e-18 */
			frac = frac * 10 + (uint64_t)(*end - '0');
			pow10 *= 10;
		}
	}
	switch (g_ascii_toupper(*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case 'P': shift = 50; break;
	case 'E': shift = 60; break;
	default: break;
	}
	if (shift) {
		end++;
		if (g_ascii_strcasecmp(end, "iB") == 0 ||
		    g_ascii_strcasecmp(end, "B") == 0)
			end += strlen(end);
	} else if (g_ascii_strcasecmp(end, "B") == 0) {
		end++;
	}
	/* A fraction of a byte means nothing: "1.5" needs a unit. */
	if (*end || (point && !shift))
		return -EINVAL;
	if (v > (max >> shift))
		return -ERANGE;
	whole = v << shift;
	frac = scale_fraction(frac, pow10, shift);
	if (frac > max - whole)
		return -ERANGE;
	*out = whole + frac;
	return 0;
}

const char *dioloop_format_size(uint64_t bytes, char *buf, unsigned len)
{
	g_autofree char *s = g_format_size_full(bytes, G_FORMAT_SIZE_IEC_UNITS);
	char *nbsp;

	/* GLib puts a no-break space (U+00A0) before the unit; a plain one
	 * keeps the output ASCII for scripts and grep. */
	while ((nbsp = strstr(s, "\xc2\xa0"))) {
		*nbsp = ' ';
		memmove(nbsp + 1, nbsp + 2, strlen(nbsp + 2) + 1);
	}
	g_strlcpy(buf, s, len);
	return buf;
}
