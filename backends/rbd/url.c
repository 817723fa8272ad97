/* SPDX-License-Identifier: MIT */
/* rbd:// URLs (rbd.h) and connecting to the cluster they name. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/rbd/rbd_int.h"

void drbd_url_clear(struct drbd_url *u)
{
	g_free(u->url);
	g_free(u->pool);
	g_free(u->ns);
	g_free(u->image);
	g_free(u->conf);
	g_free(u->id);
	g_free(u->keyring);
	memset(u, 0, sizeof(*u));
}

/* A pool, namespace or image name: non-empty, no '@' (snapshots), no
 * control characters ('/' was split on already). */
static bool drbd_name_ok(const char *s)
{
	const char *p;

	if (!s || !*s)
		return false;
	for (p = s; *p; p++)
		if (*p == '@' || g_ascii_iscntrl(*p))
			return false;
	return true;
}

/* Apply one OPTION=VALUE: 0 or -EINVAL with the line in *error. */
static int drbd_url_option(struct drbd_url *u, const char *opt,
			   GError **error)
{
	const char *eq = strchr(opt, '=');
	g_autofree char *key = NULL;
	const char *val;

	if (!eq || eq == opt || !eq[1])
		return backend_set_error(error, -EINVAL,
					 "%s: option \"%s\" is not NAME=VALUE",
					 u->url, opt);
	key = g_strndup(opt, (gsize)(eq - opt));
	val = eq + 1;
	if (!strcmp(key, "conf")) {
		g_free(u->conf);
		u->conf = g_strdup(val);
	} else if (!strcmp(key, "id")) {
		if (g_str_has_prefix(val, "client."))
			val += strlen("client.");
		g_free(u->id);
		u->id = g_strdup(val);
	} else if (!strcmp(key, "keyring")) {
		g_free(u->keyring);
		u->keyring = g_strdup(val);
	} else if (!strcmp(key, "timeout")) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(val, &end, 10);
		if (errno || *end || val[0] == '-' || v == 0 ||
		    v > DRBD_MAX_TIMEOUT_S)
			return backend_set_error(error, -EINVAL,
						 "%s: timeout=%s: want seconds, 1 to %d",
						 u->url, val, DRBD_MAX_TIMEOUT_S);
		u->timeout_s = (unsigned int)v;
	} else {
		return backend_set_error(error, -EINVAL,
					 "%s: unknown option \"%s\" (known: conf, id, keyring, timeout)",
					 u->url, key);
	}
	return 0;
}

int drbd_url_parse(const char *url, bool want_image, struct drbd_url *u,
		   GError **error)
{
	g_auto(GStrv) parts = NULL;
	g_autofree char *path = NULL;
	const char *rest, *q;
	guint n;
	int ret;

	memset(u, 0, sizeof(*u));
	u->url = g_strdup(url);
	u->timeout_s = DRBD_DEFAULT_TIMEOUT_S;
	if (!url || g_ascii_strncasecmp(url, "rbd://", 6)) {
		ret = backend_set_error(error, -EINVAL,
					"%s: not an rbd:// URL", url ? url : "(null)");
		goto fail;
	}
	rest = url + 6;
	q = strchr(rest, '?');
	path = q ? g_strndup(rest, (gsize)(q - rest)) : g_strdup(rest);
	parts = g_strsplit(path, "/", -1);
	n = g_strv_length(parts);
	/* A trailing '/' on a pool URL is harmless. */
	if (!want_image && n > 1 && !parts[n - 1][0]) {
		g_free(parts[n - 1]);
		parts[n - 1] = NULL;
		n--;
	}
	for (guint i = 0; i < n; i++)
		if (!drbd_name_ok(parts[i])) {
			ret = backend_set_error(error, -EINVAL,
						"%s: bad name \"%s\" (empty, or with '@' or a control character)",
						url, parts[i]);
			goto fail;
		}
	if (want_image ? (n < 2 || n > 3) : (n < 1 || n > 2)) {
		ret = backend_set_error(error, -EINVAL,
					want_image ?
					"%s: want rbd://POOL[/NAMESPACE]/IMAGE" :
					"%s: want rbd://POOL[/NAMESPACE]", url);
		goto fail;
	}
	u->pool = g_strdup(parts[0]);
	if (want_image) {
		u->ns = g_strdup(n == 3 ? parts[1] : "");
		u->image = g_strdup(parts[n - 1]);
	} else {
		u->ns = g_strdup(n == 2 ? parts[1] : "");
	}
	if (q && q[1]) {
		g_auto(GStrv) opts = g_strsplit(q + 1, "&", -1);

		for (guint i = 0; opts[i]; i++) {
			if (!opts[i][0])
				continue;
			ret = drbd_url_option(u, opts[i], error);
			if (ret < 0)
				goto fail;
		}
	}
	return 0;
fail:
	drbd_url_clear(u);
	return ret;
}

/* Set a librados option: 0 or -errno with the line in *error. */
static int drbd_conf_set(rados_t c, const struct drbd_url *u,
			 const char *key, const char *val, GError **error)
{
	int r = rados_conf_set(c, key, val);

	if (r < 0)
		return backend_set_error(error, r, "%s: %s=%s: %s", u->url, key,
					 val, g_strerror(-r));
	return 0;
}

int drbd_connect(const struct drbd_url *u, rados_t *cluster,
		 rados_ioctx_t *ioctx, GError **error)
{
	g_autofree char *timeout = g_strdup_printf("%u", u->timeout_s);
	rados_t c = NULL;
	rados_ioctx_t io = NULL;
	int r;

	r = drbd_api_load(u->url, error);
	if (r < 0)
		return r;
	r = rados_create(&c, u->id);
	if (r < 0)
		return backend_set_error(error, r, "%s: rados_create: %s",
					 u->url, g_strerror(-r));
	/* No conf= and no $CEPH_CONF: librados's search path; a missing
	 * file then is not an error by itself (connecting says more). */
	r = rados_conf_read_file(c, u->conf);
	if (r < 0 && (u->conf || getenv("CEPH_CONF"))) {
		backend_set_error(error, r, "%s: cannot read %s: %s", u->url,
				  u->conf ? u->conf : getenv("CEPH_CONF"),
				  g_strerror(-r));
		goto fail;
	}
	r = rados_conf_parse_env(c, NULL);
	if (r < 0) {
		backend_set_error(error, r, "%s: $CEPH_ARGS: %s", u->url,
				  g_strerror(-r));
		goto fail;
	}
	if (u->keyring &&
	    (r = drbd_conf_set(c, u, "keyring", u->keyring, error)) < 0)
		goto fail;
	/* A cluster that does not answer: connecting and every request
	 * give up after timeout= (ETIMEDOUT, reported as EIO). */
	/* No librbd cache: when its writeback fails (the cluster gone for
	 * longer than timeout=), the write is dropped and a later flush
	 * still returns 0 (seen with Ceph 16.2): an fsync would report lost
	 * data durable.  Without it each write completes when the OSDs have
	 * it, and fails with EIO when they do not answer. */
	if ((r = drbd_conf_set(c, u, "rbd_cache", "false", error)) < 0)
		goto fail;
	/* librbd copies each write's buffer (its default, set here so that
	 * a configuration file cannot turn it off).  Sending from the
	 * caller's buffer saved 11-17% of the daemon's CPU per 1 MiB write,
	 * but librbd then holds a write's completion until the messenger
	 * lets go of the buffer: with the OSD gone, a write hung for over
	 * 60 s, where with the copy it fails with EIO after timeout=. */
	if ((r = drbd_conf_set(c, u, "rbd_disable_zero_copy_writes", "true",
			       error)) < 0)
		goto fail;
	if ((r = drbd_conf_set(c, u, "client_mount_timeout", timeout, error)) < 0 ||
	    (r = drbd_conf_set(c, u, "rados_osd_op_timeout", timeout, error)) < 0 ||
	    (r = drbd_conf_set(c, u, "rados_mon_op_timeout", timeout, error)) < 0)
		goto fail;
	r = rados_connect(c);
	if (r < 0) {
		backend_set_error(error, r, "%s: cannot connect to the cluster%s%s: %s",
				  u->url, u->conf ? " of " : "",
				  u->conf ? u->conf : "", g_strerror(-r));
		goto fail;
	}
	r = rados_ioctx_create(c, u->pool, &io);
	if (r < 0) {
		backend_set_error(error, r, "%s: pool %s: %s", u->url, u->pool,
				  g_strerror(-r));
		goto fail;
	}
	rados_ioctx_set_namespace(io, u->ns);
	*cluster = c;
	*ioctx = io;
	return 0;
fail:
	rados_shutdown(c);
	return r;
}

void drbd_disconnect(rados_t cluster, rados_ioctx_t ioctx)
{
	if (ioctx)
		rados_ioctx_destroy(ioctx);
	if (cluster)
		rados_shutdown(cluster);
}
