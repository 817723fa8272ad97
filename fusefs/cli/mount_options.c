/* SPDX-License-Identifier: MIT */
/*
 * dioloop mount's -o options: the daemon's options, the limits, fault
 * rules, and the generic mount(8) options that are accepted and ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/size.h"
#include "fusefs/cli/commands.h"
#include "fusefs/cli/mount.h"
#include "fusefs/spec.h"

/* Generic mount(8) options that fstab lines and mount.fuse3 pass along:
 * accepted and ignored (nodes are always nosuid and nodev). */
static const char *const ignored_mount_options[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "owner",
	"group", "nofail", "_netdev", "dev", "nodev", "suid", "nosuid",
	"exec", "noexec", "atime", "noatime", "relatime", "norelatime",
	"strictatime", "nostrictatime", "diratime", "nodiratime", "lazytime",
	"nolazytime", "async", "default_permissions",
};

/* True for an option meant for mount(8), systemd or other programs. */
static bool is_ignored_mount_option(const char *key, const char *val)
{
	size_t i;

	/* x-systemd.*, x-gvfs-*, comment=...: for other programs. */
	if (!strncmp(key, "x-", 2) || !strcmp(key, "comment"))
		return true;
	if (val)
		return false;
	for (i = 0; i < G_N_ELEMENTS(ignored_mount_options); i++)
		if (!strcmp(key, ignored_mount_options[i]))
			return true;
	return false;
}

/* Free one -o fault= rule (the array's free function). */
static void mount_fault_free(gpointer data)
{
	struct dioloop_mount_fault *mf = data;

	g_free(mf->node);
	g_free(mf);
}

/* -o fault=NODE:WORD:WORD...: false after a one-line message. */
static bool parse_mount_fault(const char *val, struct dioloop_mount_opts *o)
{
	g_auto(GStrv) parts = g_strsplit(val, ":", -1);
	struct dioloop_mount_fault *mf;
	g_autofree char *err = NULL;
	struct fault_rule r;

	if (!parts[0] || !*parts[0] || !parts[1]) {
		dioloop_err("mount: bad fault '%s': expected fault=NODE:RULE "
			    "(e.g. fault=disk0.img:write:error=EIO:rate=1%%; "
			    "NODE * is every node)", val);
		return false;
	}
	if (dioloop_fault_parse(parts + 1, (int)g_strv_length(parts + 1), &r,
				&err) < 0) {
		dioloop_err("mount: bad fault '%s': %s", val, err);
		return false;
	}
	mf = g_new0(struct dioloop_mount_fault, 1);
	mf->node = g_strdup(parts[0]);
	mf->rule = r;
	if (!o->faults)
		o->faults = g_ptr_array_new_with_free_func(mount_fault_free);
	g_ptr_array_add(o->faults, mf);
	return true;
}

/* A limit given at mount (iops=500, total_bps=1G, ...): false after a
 * one-line message. */
static bool parse_mount_limit(const char *key, const char *val,
			      struct dioloop_mount_opts *o)
{
	g_autofree char *word = g_strdup_printf("%s=%s", key, val ? val : "");
	struct dioloop_limit_update u = { 0 };
	g_autofree char *err = NULL;

	if (dioloop_limit_parse(word, &u, &err) < 0) {
		dioloop_err("mount: %s", err);
		return false;
	}
	dioloop_limits_update(&o->limits, &u);
	if (u.mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS))
		o->total_bps = u.value[DIOLOOP_LIMIT_TOTAL_BPS];
	return true;
}

/* Parse -o options into opts; false after a one-line message. */
bool mount_parse_options(const char *list, struct dioloop_mount_opts *o)
{
	g_auto(GStrv) items = g_strsplit(list, ",", -1);
	char **it;

	for (it = items; *it; it++) {
		char *key = *it, *val = strchr(key, '=');
		uint64_t v = 0;
		int ret = 0;

		if (val)
			*val++ = '\0';
		if (!*key || is_ignored_mount_option(key, val))
			continue;
		if (dioloop_limit_key(key) >= 0) {
			if (!parse_mount_limit(key, val, o))
				return false;
		} else if (!strcmp(key, "fault") && val) {
			if (!parse_mount_fault(val, o))
				return false;
		} else if (!strcmp(key, "fault") && !val) {
			o->fault_all = true;
		} else if (!strcmp(key, "ro") && !val)
			o->readonly = true;
		else if (!strcmp(key, "rw") && !val)
			o->readonly = false;
		else if (!strcmp(key, "allow_other") && !val)
			o->allow_other = true;
		else if (!strcmp(key, "growable") && !val)
			o->growable = true;
		else if (!strcmp(key, "cache") && !val)
			o->cache = true;
		else if (!strcmp(key, "sync") && !val)
			o->sync = true;
		else if (!strcmp(key, "transport") && val) {
			if (!strcmp(val, "dev"))
				o->transport = DIOLOOP_TRANSPORT_DEV;
			else if (!strcmp(val, "uring"))
				o->transport = DIOLOOP_TRANSPORT_URING;
			else if (!strcmp(val, "auto"))
				o->transport = DIOLOOP_TRANSPORT_AUTO;
			else {
				dioloop_err("mount: bad transport '%s': dev, "
					    "uring or auto", val);
				return false;
			}
		}
		else if (!strcmp(key, "commit") && val) {
			double s;

			if (dioloop_parse_decimal(val, 3600, &s, NULL) < 0) {
				dioloop_err("mount: bad commit '%s': seconds "
					    "from 0 (only on flush) to 3600",
					    val);
				return false;
			}
			o->commit_ms = (int)(s * 1000 + 0.5);
			/* Not rounded to 0, which means the opposite. */
			if (s > 0 && o->commit_ms == 0) {
				dioloop_err("mount: bad commit '%s': the "
					    "shortest interval is 0.001 s (0: "
					    "only on flush)", val);
				return false;
			}
		}
		else if ((!strcmp(key, "threads") || !strcmp(key, "queue_depth") ||
			  !strcmp(key, "max_write")) && val) {
			ret = dioloop_parse_size(val, UINT32_MAX, &v);
			if (ret < 0 || v == 0) {
				dioloop_err("mount: bad value '%s' for option '%s'",
					    val, key);
				return false;
			}
			/* Past the most, refused rather than cut down
			 * without a word. */
			if (!strcmp(key, "threads") && v > 1024) {
				dioloop_err("mount: bad threads '%s': 1 to 1024",
					    val);
				return false;
			} else if (!strcmp(key, "threads")) {
				o->threads = (unsigned)v;
			} else if (!strcmp(key, "queue_depth") && v > 4096) {
				dioloop_err("mount: bad queue_depth '%s': 1 to "
					    "4096", val);
				return false;
			} else if (!strcmp(key, "queue_depth")) {
				o->queue_depth = (unsigned)v;
			} else if (v > DIOLOOP_MAX_WRITE || v < DIOLOOP_PAGE_SIZE ||
				 v % DIOLOOP_PAGE_SIZE) {
				dioloop_err("mount: bad max_write '%s': a multiple "
					    "of 4K from 4K to 1M", val);
				return false;
			} else {
				o->max_write = (unsigned)v;
			}
		} else {
			dioloop_err("mount: unknown option '%s%s%s' (see "
				    "'dioloop mount --help')", key,
				    val ? "=" : "", val ? val : "");
			return false;
		}
	}
	return true;
}
