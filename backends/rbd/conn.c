/* SPDX-License-Identifier: MIT */
/*
 * The librados clients of the process (rbd_int.h): one per cluster, user,
 * pool and namespace, shared by every image open through it, as the
 * kernel's rbd driver shares one by default.  A client costs about 16
 * threads, a dozen file descriptors and 2 MiB (a pool of 40 images: 619
 * threads, 503 descriptors and 154 MiB with a client each; 34, 34 and
 * 76 MiB shared).
 *
 * The price of sharing: a cluster that blocklists the client (an
 * operator fencing this machine, or another client breaking one image's
 * lock) fences every image open through it, not only one.  A fenced
 * client leaves the table, so that an image opened later (once the
 * operator lifts the blocklist) gets a new one.
 */
#include <errno.h>
#include <string.h>

#include "backends/rbd/rbd_int.h"

struct drbd_conn {
	char *key;
	rados_t cluster;
	rados_ioctx_t ioctx;
	unsigned int refs;	/* all below under conns_lock */
	bool listed;		/* in conns: not fenced */
	bool fenced;
};

static GMutex conns_lock;
static GHashTable *conns;	/* key -> struct drbd_conn */

/* Each part with its length: no two URLs' parts run together into one
 * key, whatever their characters. */
static char *conn_key(const struct drbd_url *u)
{
	const char *parts[] = { u->conf ? u->conf : "", u->id ? u->id : "",
				u->keyring ? u->keyring : "", u->pool, u->ns };
	GString *s = g_string_new(NULL);
	size_t i;

	g_string_append_printf(s, "%u", u->timeout_s);
	for (i = 0; i < G_N_ELEMENTS(parts); i++)
		g_string_append_printf(s, " %zu:%s", strlen(parts[i]),
				       parts[i]);
	return g_string_free(s, FALSE);
}

static void conn_free(struct drbd_conn *c)
{
	drbd_disconnect(c->cluster, c->ioctx);
	g_free(c->key);
	g_free(c);
}

int drbd_conn_get(const struct drbd_url *u, struct drbd_conn **out,
		  GError **error)
{
	g_autofree char *key = conn_key(u);
	struct drbd_conn *c, *fresh;
	int r;

	g_mutex_lock(&conns_lock);
	if (!conns)
		conns = g_hash_table_new(g_str_hash, g_str_equal);
	c = g_hash_table_lookup(conns, key);
	if (c)
		c->refs++;
	g_mutex_unlock(&conns_lock);
	if (c) {
		*out = c;
		return 0;
	}
	/* Connecting may take up to timeout=: not under the lock, which
	 * other clusters' images need meanwhile. */
	fresh = g_new0(struct drbd_conn, 1);
	r = drbd_connect(u, &fresh->cluster, &fresh->ioctx, error);
	if (r < 0) {
		g_free(fresh);
		return r;
	}
	g_mutex_lock(&conns_lock);
	c = g_hash_table_lookup(conns, key);
	if (c) {
		c->refs++;	/* another thread connected first */
	} else {
		c = fresh;
		c->key = g_steal_pointer(&key);
		c->refs = 1;
		c->listed = true;
		g_hash_table_insert(conns, c->key, c);
		fresh = NULL;
	}
	g_mutex_unlock(&conns_lock);
	if (fresh)
		conn_free(fresh);
	*out = c;
	return 0;
}

rados_ioctx_t drbd_conn_ioctx(const struct drbd_conn *c)
{
	return c->ioctx;
}

void drbd_conn_put(struct drbd_conn *c)
{
	if (!c)
		return;
	g_mutex_lock(&conns_lock);
	if (--c->refs) {
		g_mutex_unlock(&conns_lock);
		return;
	}
	if (c->listed)
		g_hash_table_remove(conns, c->key);
	g_mutex_unlock(&conns_lock);
	conn_free(c);
}

bool drbd_conn_fenced(struct drbd_conn *c)
{
	bool first;

	g_mutex_lock(&conns_lock);
	if (c->listed) {
		g_hash_table_remove(conns, c->key);
		c->listed = false;
	}
	first = !c->fenced;
	c->fenced = true;
	g_mutex_unlock(&conns_lock);
	return first;
}

bool drbd_conn_renew(const struct drbd_url *u, struct drbd_conn **c, int r,
		     bool *renewed, GError **error)
{
	if (r != -ESHUTDOWN || *renewed)
		return false;
	*renewed = true;
	if (drbd_conn_fenced(*c))
		g_warning("%s: the cluster has blocklisted this client (another client took an image's lock, or an operator fenced it): images opened from now on get a new client; requests of those open through it fail with EIO",
			  u->url);
	drbd_conn_put(*c);
	*c = NULL;
	return drbd_conn_get(u, c, error) == 0;
}
