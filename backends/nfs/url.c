/* SPDX-License-Identifier: MIT */
/*
 * nfs:// URLs (see nfs.h for the form).  Our own pass checks the parts
 * and the options (an unknown option is an error: libnfs would ignore a
 * misspelt one silently) and takes out what libnfs 4.0 does not know
 * (HOST:PORT, timeout=, sync=); libnfs's parser (nfs_parse_url_full /
 * nfs_parse_url_dir) then splits server, directory and file and applies
 * its options to each context it is given.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nfs/nfs_int.h"
#include "backends/size.h"

/* Options passed through to libnfs, and ours. */
static const char *const dnfs_libnfs_opts[] = {
	"version", "uid", "gid", "nfsport", "mountport", "tcp-syncnt", "debug",
};

/* One line about a bad URL, into *error (or logged); returns -EINVAL. */
static int dnfs_url_bad(GError **error, const char *url, const char *why)
{
	return backend_set_error(error, -EINVAL, "%s: bad nfs URL: %s", url,
				 why);
}

/* Parse a decimal number in [lo, hi] (0 <= lo): digits only. */
static bool dnfs_parse_num(const char *s, long lo, long hi, long *out)
{
	uint64_t v;

	if (dioloop_parse_u64(s, (uint64_t)hi, &v) < 0 || v < (uint64_t)lo)
		return false;
	*out = (long)v;
	return true;
}

/* Check one option; append libnfs's to opts.  0 or -EINVAL (logged). */
static int dnfs_url_option(const char *url, const char *kv, struct dnfs_url *u,
			   GString *opts, bool *seen_nfsport, GError **error)
{
	const char *eq = strchr(kv, '=');
	g_autofree char *key = NULL;
	g_autofree char *msg = NULL;
	const char *val;
	long v;
	size_t i;

	if (!eq || eq == kv) {
		msg = g_strdup_printf("option \"%s\" is not KEY=VALUE", kv);
		return dnfs_url_bad(error, url, msg);
	}
	key = g_strndup(kv, (gsize)(eq - kv));
	val = eq + 1;
	if (!strcmp(key, "timeout")) {
		if (!dnfs_parse_num(val, 1, DNFS_MAX_TIMEOUT_S, &v)) {
			msg = g_strdup_printf("timeout=%s: seconds from 1 to %d expected",
					      val, DNFS_MAX_TIMEOUT_S);
			return dnfs_url_bad(error, url, msg);
		}
		u->timeout_s = (unsigned int)v;
		return 0;
	}
	if (!strcmp(key, "sync")) {
		if (!dnfs_parse_num(val, 0, 1, &v))
			return dnfs_url_bad(error, url, "sync= takes 0 or 1");
		u->sync = v;
		return 0;
	}
	if (!strcmp(key, "version")) {
		if (!strcmp(val, "4"))
			return dnfs_url_bad(error, url, "version=4 is not supported: libnfs 4.0 fails NFSv4 WRITEs (\"Failed to encode COMPOUND4args\") and this backend needs NFSv3 write verifiers; use version=3");
		if (strcmp(val, "3"))
			return dnfs_url_bad(error, url, "version= takes 3");
	} else if (!strcmp(key, "uid") || !strcmp(key, "gid")) {
		if (!dnfs_parse_num(val, 0, INT_MAX, &v)) {
			msg = g_strdup_printf("%s=%s: a number expected", key, val);
			return dnfs_url_bad(error, url, msg);
		}
	} else if (!strcmp(key, "nfsport") || !strcmp(key, "mountport")) {
		if (!dnfs_parse_num(val, 1, 65535, &v)) {
			msg = g_strdup_printf("%s=%s: a port number expected", key, val);
			return dnfs_url_bad(error, url, msg);
		}
		if (!strcmp(key, "nfsport")) {
			if (*seen_nfsport)
				return dnfs_url_bad(error, url, "the NFS port is given twice (HOST:PORT and nfsport=)");
			*seen_nfsport = true;
		}
	} else {
		for (i = 0; i < G_N_ELEMENTS(dnfs_libnfs_opts); i++)
			if (!strcmp(key, dnfs_libnfs_opts[i]))
				break;
		if (i == G_N_ELEMENTS(dnfs_libnfs_opts)) {
			msg = g_strdup_printf("unknown option \"%s\" (known: version, uid, gid, timeout, sync, nfsport, mountport, tcp-syncnt, debug)",
					      key);
			return dnfs_url_bad(error, url, msg);
		}
		if (!dnfs_parse_num(val, 0, INT_MAX, &v)) {
			msg = g_strdup_printf("%s=%s: a number expected", key, val);
			return dnfs_url_bad(error, url, msg);
		}
	}
	g_string_append_printf(opts, "%s%s=%s", opts->len ? "&" : "", key, val);
	return 0;
}

void dnfs_url_clear(struct dnfs_url *u)
{
	g_free(u->url);
	g_free(u->libnfs_url);
	g_free(u->server);
	g_free(u->dir);
	g_free(u->file);
	memset(u, 0, sizeof(*u));
}

int dnfs_url_parse(const char *url, bool want_file, struct dnfs_url *u,
		   GError **error)
{
	const char *p, *slash, *q;
	g_autofree char *host = NULL;
	g_autofree char *path = NULL;
	g_autoptr(GString) opts = g_string_new(NULL);
	bool seen_nfsport = false;
	struct nfs_context *nfs;
	struct nfs_url *nu;
	char *colon;
	int ret;

	memset(u, 0, sizeof(*u));
	u->timeout_s = DNFS_DEFAULT_TIMEOUT_S;
	if (!url || g_ascii_strncasecmp(url, "nfs://", 6))
		return dnfs_url_bad(error, url ? url : "(null)", "it must start with nfs://");
	p = url + 6;
	slash = strchr(p, '/');
	q = strchr(p, '?');
	if (!slash || (q && q < slash))
		return dnfs_url_bad(error, url, want_file ? "expected nfs://HOST/DIR/FILE" :
						    "expected nfs://HOST/DIR");
	host = g_strndup(p, (gsize)(slash - p));
	if (!host[0])
		return dnfs_url_bad(error, url, "no server name");
	if (host[0] == '[' || strchr(host, '@'))
		return dnfs_url_bad(error, url, "IPv6 literals and user@ are not supported; use a host name or IPv4 address");
	colon = strchr(host, ':');
	if (colon) {
		long port;

		*colon = '\0';
		if (!host[0] || !dnfs_parse_num(colon + 1, 1, 65535, &port))
			return dnfs_url_bad(error, url, "HOST:PORT needs a port from 1 to 65535");
		g_string_append_printf(opts, "nfsport=%ld", port);
		seen_nfsport = true;
	}
	path = g_strndup(slash, q ? (gsize)(q - slash) : strlen(slash));
	if (strstr(path, "//") || strstr(path, "/../") ||
	    g_str_has_suffix(path, "/.."))
		return dnfs_url_bad(error, url, "empty or \"..\" path components");
	if (want_file) {
		const char *last = strrchr(path, '/');

		if (last == path || !last[1])
			return dnfs_url_bad(error, url, "expected nfs://HOST/DIR/FILE (a directory and a file name)");
	} else if (!path[1]) {
		return dnfs_url_bad(error, url, "expected nfs://HOST/DIR (no directory)");
	}
	if (q) {
		g_auto(GStrv) kvs = g_strsplit(q + 1, "&", -1);
		GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal,
							   g_free, NULL);
		size_t i;

		ret = 0;
		for (i = 0; kvs[i] && !ret; i++) {
			char *key = g_strndup(kvs[i], strcspn(kvs[i], "="));

			if (!kvs[i][0]) {
				ret = dnfs_url_bad(error, url, "empty option");
				g_free(key);
			} else if (g_hash_table_contains(seen, key)) {
				g_autofree char *msg =
					g_strdup_printf("option \"%s\" given twice", key);
				ret = dnfs_url_bad(error, url, msg);
				g_free(key);
			} else {
				g_hash_table_add(seen, key);
				ret = dnfs_url_option(url, kvs[i], u, opts,
						      &seen_nfsport, error);
			}
		}
		g_hash_table_destroy(seen);
		if (ret)
			return ret;
	}
	u->url = g_strdup(url);
	u->libnfs_url = g_strdup_printf("nfs://%s%s%s%s", host, path,
					opts->len ? "?" : "", opts->str);

	/* libnfs's own split of what we checked. */
	nfs = nfs_init_context();
	if (!nfs) {
		dnfs_url_clear(u);
		return backend_set_error(error, -ENOMEM,
					 "%s: cannot make an NFS context", url);
	}
	nu = want_file ? nfs_parse_url_full(nfs, u->libnfs_url) :
			 nfs_parse_url_dir(nfs, u->libnfs_url);
	if (!nu || !nu->server || !nu->path || (want_file && !nu->file)) {
		g_autofree char *msg = g_strdup_printf("libnfs cannot parse it: %s",
						       nfs_get_error(nfs));

		if (nu)
			nfs_destroy_url(nu);
		nfs_destroy_context(nfs);
		dnfs_url_clear(u);
		return dnfs_url_bad(error, url, msg);
	}
	u->server = g_strdup(nu->server);
	u->dir = g_strdup(nu->path[0] ? nu->path : "/");
	u->file = want_file ? g_strdup(nu->file) : NULL;
	nfs_destroy_url(nu);
	nfs_destroy_context(nfs);
	return 0;
}

struct nfs_context *dnfs_context_new(const struct dnfs_url *u, GError **error)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *nu;

	if (!nfs) {
		backend_set_error(error, -ENOMEM,
				  "%s: cannot make an NFS context", u->url);
		return NULL;
	}
	/* Parsing applies the URL's options to this context. */
	nu = nfs_parse_url_incomplete(nfs, u->libnfs_url);
	if (!nu) {
		backend_set_error(error, -EINVAL, "%s: %s", u->url,
				  nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_destroy_url(nu);
	/* We reconnect ourselves: a failure must reach us. */
	nfs_set_autoreconnect(nfs, 0);
	/* A new connection's XIDs must not repeat an old one's (the server's
	 * duplicate request cache). */
	rpc_set_next_xid(nfs_get_rpc_context(nfs), g_random_int());
	return nfs;
}

const char *dnfs_nfsstat_str(int status)
{
	switch (status) {
	case NFS3_OK: return "NFS3_OK";
	case NFS3ERR_PERM: return "NFS3ERR_PERM";
	case NFS3ERR_NOENT: return "NFS3ERR_NOENT";
	case NFS3ERR_IO: return "NFS3ERR_IO";
	case NFS3ERR_ACCES: return "NFS3ERR_ACCES";
	case NFS3ERR_EXIST: return "NFS3ERR_EXIST";
	case NFS3ERR_ISDIR: return "NFS3ERR_ISDIR";
	case NFS3ERR_INVAL: return "NFS3ERR_INVAL";
	case NFS3ERR_FBIG: return "NFS3ERR_FBIG";
	case NFS3ERR_NOSPC: return "NFS3ERR_NOSPC";
	case NFS3ERR_ROFS: return "NFS3ERR_ROFS";
	case NFS3ERR_DQUOT: return "NFS3ERR_DQUOT";
	case NFS3ERR_STALE: return "NFS3ERR_STALE";
	case NFS3ERR_BADHANDLE: return "NFS3ERR_BADHANDLE";
	case NFS3ERR_SERVERFAULT: return "NFS3ERR_SERVERFAULT";
	case NFS3ERR_JUKEBOX: return "NFS3ERR_JUKEBOX";
	default: return "NFS3ERR_?";
	}
}
