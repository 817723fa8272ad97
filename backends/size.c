/* SPDX-License-Identifier: MIT */
#include "backends/size.h"

#include <errno.h>
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

int dioloop_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	unsigned int shift = 0;
	const char *end;
	uint64_t v;
	int ret = parse_digits(s, &end, &v);

	if (ret < 0)
		return ret;
	switch (g_ascii_toupper(*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
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
	if (*end)
		return -EINVAL;
	if (v > (max >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

const char *dioloop_format_size(uint64_t bytes, char *buf, unsigned len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
					     "PiB", "EiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < G_N_ELEMENTS(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
