/* SPDX-License-Identifier: MIT */
/* Parsing and formatting of limits and fault rules (see spec.h). */
#include "fusefs/spec.h"

#include <errno.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/size.h"

#define FAULT_MAX_DELAY_US (60u * 1000 * 1000)

static const char *const limit_names[DIOLOOP_LIMIT_KEY_NR] = {
	[DIOLOOP_RATE_IOPS] = "iops",
	[DIOLOOP_RATE_READ_IOPS] = "read_iops",
	[DIOLOOP_RATE_WRITE_IOPS] = "write_iops",
	[DIOLOOP_RATE_BPS] = "bps",
	[DIOLOOP_RATE_READ_BPS] = "read_bps",
	[DIOLOOP_RATE_WRITE_BPS] = "write_bps",
	[DIOLOOP_LIMIT_BURST_MS] = "burst_ms",
	[DIOLOOP_LIMIT_TOTAL_BPS] = "total_bps",
};

/* The user's name of limit key k.  Any thread. */
const char *dioloop_limit_key_name(int k)
{
	return k >= 0 && k < DIOLOOP_LIMIT_KEY_NR ? limit_names[k] : "?";
}

/* The limit key called name, or -1.  Any thread. */
int dioloop_limit_key(const char *name)
{
	int k;

	for (k = 0; k < DIOLOOP_LIMIT_KEY_NR; k++)
		if (!strcmp(name, limit_names[k]))
			return k;
	return -1;
}

/* True for the limits given in bytes (size suffixes allowed). */
static bool is_bytes_key(int k)
{
	return k == DIOLOOP_RATE_BPS || k == DIOLOOP_RATE_READ_BPS ||
	       k == DIOLOOP_RATE_WRITE_BPS || k == DIOLOOP_LIMIT_TOTAL_BPS;
}

/* Parse one KEY=VALUE limit (spec.h).  Any thread. */
int dioloop_limit_parse(const char *word, struct dioloop_limit_update *u,
			char **err)
{
	const char *eq = strchr(word, '=');
	g_autofree char *key = NULL;
	const char *val;
	uint64_t v = 0;
	int k, ret;

	*err = NULL;
	if (!eq) {
		*err = g_strdup_printf("'%s': expected KEY=VALUE", word);
		return -EINVAL;
	}
	key = g_strndup(word, (gsize)(eq - word));
	val = eq + 1;
	k = dioloop_limit_key(key);
	if (k < 0) {
		*err = g_strdup_printf("unknown limit '%s' (iops, read_iops, "
				       "write_iops, bps, read_bps, write_bps, "
				       "burst_ms, total_bps)", key);
		return -EINVAL;
	}
	if (k != DIOLOOP_LIMIT_BURST_MS &&
	    (!strcmp(val, "off") || !strcmp(val, "none"))) {
		ret = 0;
	} else if (k == DIOLOOP_LIMIT_BURST_MS) {
		ret = dioloop_parse_u64(val, DIOLOOP_MAX_BURST_MS, &v);
		if (ret == 0 && v == 0)
			ret = -ERANGE;
	} else if (is_bytes_key(k)) {
		ret = dioloop_parse_size(val, UINT64_C(1) << 50, &v);
	} else {
		ret = dioloop_parse_u64(val, UINT64_C(1) << 40, &v);
	}
	if (ret < 0) {
		*err = g_strdup_printf("bad value '%s' for %s: expected %s", val,
				       key,
				       k == DIOLOOP_LIMIT_BURST_MS ?
				       "milliseconds from 1 to 60000" :
				       is_bytes_key(k) ?
				       "bytes per second (K, M, G, T suffixes), "
				       "or 0 for no limit" :
				       "requests per second, or 0 for no limit");
		return -EINVAL;
	}
	u->mask |= 1u << k;
	u->value[k] = v;
	return 0;
}

/* Apply the per-node keys of u to l.  Any thread. */
void dioloop_limits_update(struct dioloop_limits *l,
			   const struct dioloop_limit_update *u)
{
	int k;

	for (k = 0; k < DIOLOOP_RATE_NR; k++)
		if (u->mask & (1u << k))
			l->rate[k] = u->value[k];
	if (u->mask & (1u << DIOLOOP_LIMIT_BURST_MS))
		l->burst_ms = (uint32_t)u->value[DIOLOOP_LIMIT_BURST_MS];
}

/* Limits as KEY=VALUE words.  Any thread. */
char *dioloop_limits_format(const struct dioloop_limits *l)
{
	GString *s = g_string_new(NULL);
	int k;

	for (k = 0; k < DIOLOOP_RATE_NR; k++)
		g_string_append_printf(s, "%s=%llu ", limit_names[k],
				       (unsigned long long)l->rate[k]);
	g_string_append_printf(s, "burst_ms=%u",
			       l->burst_ms ? l->burst_ms :
					     DIOLOOP_DEFAULT_BURST_MS);
	return g_string_free(s, FALSE);
}

/* ---- fault rules ---- */

static const struct {
	const char *name;
	unsigned int ops;
} fault_kinds[] = {
	{ "read", FAULT_OP_READ },
	{ "write", FAULT_OP_WRITE },
	{ "flush", FAULT_OP_FLUSH },
	{ "discard", FAULT_OP_DISCARD },
	{ "zero", FAULT_OP_WRITE_ZEROES },
	{ "all", FAULT_OP_READ | FAULT_OP_WRITE | FAULT_OP_FLUSH |
		 FAULT_OP_DISCARD | FAULT_OP_WRITE_ZEROES },
};

static const struct {
	const char *name;
	int err;
} fault_errors[] = {
	{ "EIO", EIO },
	{ "ENOSPC", ENOSPC },
};

/* "read+write" into op bits: 0 or -EINVAL. */
static int parse_kinds(const char *s, unsigned int *ops)
{
	g_auto(GStrv) parts = g_strsplit(s, "+", -1);
	char **p;
	size_t i;

	*ops = 0;
	for (p = parts; *p; p++) {
		for (i = 0; i < G_N_ELEMENTS(fault_kinds); i++)
			if (!strcmp(*p, fault_kinds[i].name))
				break;
		if (i == G_N_ELEMENTS(fault_kinds))
			return -EINVAL;
		*ops |= fault_kinds[i].ops;
	}
	return *ops ? 0 : -EINVAL;
}

/* "10ms", "500us", "2s", "20" (ms) into microseconds: 0 or -EINVAL. */
static int parse_delay(const char *s, unsigned int *us)
{
	double mult = 1000, v;
	const char *end;

	if (dioloop_parse_decimal(s, G_MAXDOUBLE, &v, &end) < 0)
		return -EINVAL;
	if (!strcmp(end, "us"))
		mult = 1;
	else if (!strcmp(end, "ms") || !*end)
		mult = 1000;
	else if (!strcmp(end, "s"))
		mult = 1e6;
	else
		return -EINVAL;
	v *= mult;
	if (!isfinite(v) || v < 0 || v > FAULT_MAX_DELAY_US)
		return -EINVAL;
	*us = (unsigned int)llround(v);
	return 0;
}

/* "0.25" or "25%" into a fraction in [0, 1]: 0 or -EINVAL. */
static int parse_rate(const char *s, double *out)
{
	const char *end;
	double v;

	if (dioloop_parse_decimal(s, G_MAXDOUBLE, &v, &end) < 0)
		return -EINVAL;
	if (!strcmp(end, "%"))
		v /= 100;
	else if (*end)
		return -EINVAL;
	if (!isfinite(v) || v <= 0 || v > 1)
		return -EINVAL;
	*out = v;
	return 0;
}

/* One key=value of a fault rule into r: 0, or -EINVAL with *err. */
static int fault_parse_kv(const char *key, const char *val,
			  struct fault_rule *r, bool *have_error, char **err)
{
	uint64_t v;
	size_t i;

	if (!strcmp(key, "op") || !strcmp(key, "ops")) {
		if (parse_kinds(val, &r->ops) == 0)
			return 0;
		*err = g_strdup_printf("bad op '%s': expected read, write, "
				       "flush, discard, zero or all, joined "
				       "with '+'", val);
		return -EINVAL;
	}
	if (!strcmp(key, "error")) {
		for (i = 0; i < G_N_ELEMENTS(fault_errors); i++)
			if (!g_ascii_strcasecmp(val, fault_errors[i].name)) {
				r->error = fault_errors[i].err;
				*have_error = true;
				return 0;
			}
		*err = g_strdup_printf("bad error '%s': expected EIO or ENOSPC",
				       val);
		return -EINVAL;
	}
	if (!strcmp(key, "rate")) {
		if (parse_rate(val, &r->fraction) == 0)
			return 0;
		*err = g_strdup_printf("bad rate '%s': expected a fraction "
				       "above 0, up to 1, or a percentage", val);
		return -EINVAL;
	}
	if (!strcmp(key, "delay")) {
		if (parse_delay(val, &r->latency_us) == 0)
			return 0;
		*err = g_strdup_printf("bad delay '%s': expected a time up to "
				       "60s with us, ms or s", val);
		return -EINVAL;
	}
	if (!strcmp(key, "nth") || !strcmp(key, "every") ||
	    !strcmp(key, "seed")) {
		if (dioloop_parse_u64(val, UINT64_MAX, &v) < 0 ||
		    (v == 0 && strcmp(key, "seed"))) {
			*err = g_strdup_printf("bad %s '%s': expected a "
					       "positive number", key, val);
			return -EINVAL;
		}
		if (!strcmp(key, "nth"))
			r->nth = v;
		else if (!strcmp(key, "every"))
			r->every = v;
		else
			r->seed = v;
		return 0;
	}
	if (!strcmp(key, "offset") || !strcmp(key, "length")) {
		if (dioloop_parse_size(val, UINT64_MAX >> 1, &v) < 0 ||
		    (v == 0 && !strcmp(key, "length"))) {
			*err = g_strdup_printf("bad %s '%s': expected bytes (K, "
					       "M, G, T suffixes)", key, val);
			return -EINVAL;
		}
		if (!strcmp(key, "offset"))
			r->range_start = v;
		else
			r->range_len = v;
		return 0;
	}
	*err = g_strdup_printf("unknown fault setting '%s' (error, rate, nth, "
			       "every, delay, offset, length, seed)", key);
	return -EINVAL;
}

/* Parse a fault rule from its words (spec.h).  Any thread. */
int dioloop_fault_parse(char *const *words, int n, struct fault_rule *r,
			char **err)
{
	bool have_error = false, have_kind = false, have_offset = false;
	bool have_delay = false;
	int i;

	*err = NULL;
	*r = (struct fault_rule){ .ops = FAULT_OP_READ | FAULT_OP_WRITE };
	for (i = 0; i < n; i++) {
		const char *w = words[i], *eq = strchr(w, '=');
		g_autofree char *key = NULL;

		if (!*w)
			continue;
		if (!eq) {
			if (parse_kinds(w, &r->ops) < 0) {
				*err = g_strdup_printf("unknown fault word '%s' "
						       "(an op such as write, "
						       "or KEY=VALUE)", w);
				return -EINVAL;
			}
			if (have_kind) {
				*err = g_strdup_printf("ops given twice ('%s')",
						       w);
				return -EINVAL;
			}
			have_kind = true;
			continue;
		}
		key = g_strndup(w, (gsize)(eq - w));
		if (fault_parse_kv(key, eq + 1, r, &have_error, err) < 0)
			return -EINVAL;
		have_offset |= !strcmp(key, "offset");
		have_delay |= !strcmp(key, "delay");
	}
	if (have_offset && !r->range_len) {
		*err = g_strdup("offset= needs length= (the byte range to fail)");
		return -EINVAL;
	}
	/* Neither: fail with EIO.  A delay, even of 0, fails nothing. */
	if (!have_error && !have_delay)
		r->error = EIO;
	return 0;
}

/* A rule in the words its parser takes.  Any thread. */
char *dioloop_fault_format(const struct fault_rule *r)
{
	GString *s = g_string_new(NULL);
	char num[G_ASCII_DTOSTR_BUF_SIZE];
	size_t i;
	bool first = true;

	for (i = 0; i < G_N_ELEMENTS(fault_kinds); i++)
		if (fault_kinds[i].ops == r->ops) {
			g_string_append(s, fault_kinds[i].name);
			break;
		}
	if (i == G_N_ELEMENTS(fault_kinds)) {
		for (i = 0; i + 1 < G_N_ELEMENTS(fault_kinds); i++) {
			if (!(r->ops & fault_kinds[i].ops))
				continue;
			g_string_append_printf(s, "%s%s", first ? "" : "+",
					       fault_kinds[i].name);
			first = false;
		}
	}
	for (i = 0; i < G_N_ELEMENTS(fault_errors); i++)
		if (r->error == fault_errors[i].err)
			g_string_append_printf(s, " error=%s",
					       fault_errors[i].name);
	if (r->fraction > 0)
		g_string_append_printf(s, " rate=%s",
				       g_ascii_formatd(num, sizeof(num), "%g",
						       r->fraction));
	if (r->nth)
		g_string_append_printf(s, " nth=%llu",
				       (unsigned long long)r->nth);
	if (r->every)
		g_string_append_printf(s, " every=%llu",
				       (unsigned long long)r->every);
	if (r->latency_us % 1000000 == 0 && r->latency_us)
		g_string_append_printf(s, " delay=%us", r->latency_us / 1000000);
	else if (r->latency_us % 1000 == 0 && r->latency_us)
		g_string_append_printf(s, " delay=%ums", r->latency_us / 1000);
	else if (r->latency_us || !r->error)	/* delay=0: a delay rule */
		g_string_append_printf(s, " delay=%uus", r->latency_us);
	if (r->range_len)
		g_string_append_printf(s, " offset=%llu length=%llu",
				       (unsigned long long)r->range_start,
				       (unsigned long long)r->range_len);
	if (r->seed)
		g_string_append_printf(s, " seed=%llu",
				       (unsigned long long)r->seed);
	return g_string_free(s, FALSE);
}

/* The symbolic name of a positive errno.  Any thread. */
const char *dioloop_errno_name(int err, char *buf, unsigned len)
{
	const char *name = err > 0 ? strerrorname_np(err) : NULL;

	if (name)
		return name;
	snprintf(buf, len, "E%d", err);
	return buf;
}
