/* SPDX-License-Identifier: MIT */
#include "backends/size.h"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

int dioloop_parse_size(const char *s, uint64_t max, uint64_t *out)
{
	unsigned int shift = 0;
	guint64 v;
	char *end;

	if (!s || !g_ascii_isdigit(*s))
		return -EINVAL;
	errno = 0;
	v = g_ascii_strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
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
