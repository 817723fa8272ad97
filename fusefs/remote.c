/* SPDX-License-Identifier: MIT */
/* A remote source: the cached listing of a directory on an NFS server or
 * of a pool (or namespace) in a Ceph cluster, through the URL's backend
 * (remote.h). */
#include <errno.h>
#include <string.h>

#include "backends/backend.h"
#include "fusefs/fs.h"
#include "fusefs/remote.h"

/* A listing older than this is refreshed before a lookup trusts it. */
#define REMOTE_STALE_US (3 * G_USEC_PER_SEC)
/* A lookup miss or a directory listing refreshes at most this often. */
#define REMOTE_MISS_US (1 * G_USEC_PER_SEC)

struct dioloop_remote {
	char *url;			/* the directory URL as given */
	char *base;			/* without "?options" */
	const char *query;		/* "?options" or "", in url */
	GMutex refresh_lock;		/* one refresh at a time */
	GMutex lock;			/* the fields below */
	GHashTable *names;		/* image name set */
	gint64 attempted;		/* last refresh tried, monotonic us */
};

/* List the directory into a new set: 0 or -errno (logged). */
static int remote_list(struct dioloop_remote *r, GHashTable **out)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	GHashTable *set;
	guint i;
	int ret;

	ret = backend_list_url(r->url, names, NULL);
	if (ret < 0)
		return ret;
	set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
	/* Names no image may have (an rbd clone volume's IMAGE@NAME is
	 * served as a volume of IMAGE) are not nodes of their own. */
	for (i = 0; i < names->len; i++)
		if (dioloop_is_image_name(names->pdata[i]))
			g_hash_table_add(set, g_strdup(names->pdata[i]));
	*out = set;
	return 0;
}

/* Refresh the listing unless another thread did in the last min_age us.
 * On failure the last listing stays. */
static void remote_refresh(struct dioloop_remote *r, gint64 min_age)
{
	GHashTable *set = NULL;
	gint64 now;

	g_mutex_lock(&r->refresh_lock);
	now = g_get_monotonic_time();
	g_mutex_lock(&r->lock);
	if (now - r->attempted < min_age) {
		g_mutex_unlock(&r->lock);
		g_mutex_unlock(&r->refresh_lock);
		return;
	}
	r->attempted = now;
	g_mutex_unlock(&r->lock);
	remote_list(r, &set);
	/* Counted from the end: a server that does not answer made this
	 * take its timeout, and the next try waits as long as after a
	 * quick one. */
	g_mutex_lock(&r->lock);
	if (set) {
		g_hash_table_destroy(r->names);
		r->names = set;
	}
	r->attempted = g_get_monotonic_time();
	g_mutex_unlock(&r->lock);
	g_mutex_unlock(&r->refresh_lock);
}

int dioloop_remote_new(const char *dir_url, struct dioloop_remote **out)
{
	struct dioloop_remote *r;
	int ret;

	ret = backend_check_url(dir_url, false, NULL);
	if (ret < 0)
		return ret;
	r = g_new0(struct dioloop_remote, 1);
	r->url = g_strdup(dir_url);
	r->query = r->url + strcspn(r->url, "?");
	r->base = g_strndup(r->url, (gsize)(r->query - r->url));
	/* nfs://HOST/DIR/ names the same directory as nfs://HOST/DIR. */
	while (g_str_has_suffix(r->base, "/"))
		r->base[strlen(r->base) - 1] = '\0';
	g_mutex_init(&r->refresh_lock);
	g_mutex_init(&r->lock);
	r->attempted = g_get_monotonic_time();
	ret = remote_list(r, &r->names);
	if (ret < 0) {
		dioloop_remote_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

void dioloop_remote_free(struct dioloop_remote *r)
{
	if (!r)
		return;
	if (r->names)
		g_hash_table_destroy(r->names);
	g_mutex_clear(&r->lock);
	g_mutex_clear(&r->refresh_lock);
	g_free(r->base);
	g_free(r->url);
	g_free(r);
}

const char *dioloop_remote_base(const struct dioloop_remote *r)
{
	return r->base;
}

static gint name_cmp(gconstpointer a, gconstpointer b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void dioloop_remote_names(struct dioloop_remote *r, GPtrArray *names)
{
	GHashTableIter it;
	gpointer key;

	remote_refresh(r, REMOTE_MISS_US);
	g_mutex_lock(&r->lock);
	g_hash_table_iter_init(&it, r->names);
	while (g_hash_table_iter_next(&it, &key, NULL))
		g_ptr_array_add(names, g_strdup(key));
	g_mutex_unlock(&r->lock);
	g_ptr_array_sort(names, name_cmp);
}

bool dioloop_remote_has(struct dioloop_remote *r, const char *name)
{
	gint64 age;
	bool has;

	g_mutex_lock(&r->lock);
	has = g_hash_table_contains(r->names, name);
	age = g_get_monotonic_time() - r->attempted;
	g_mutex_unlock(&r->lock);
	if (has && age < REMOTE_STALE_US)
		return true;
	remote_refresh(r, has ? REMOTE_STALE_US : REMOTE_MISS_US);
	g_mutex_lock(&r->lock);
	has = g_hash_table_contains(r->names, name);
	g_mutex_unlock(&r->lock);
	return has;
}

char *dioloop_remote_image_url(const struct dioloop_remote *r,
			       const char *name)
{
	return g_strdup_printf("%s/%s%s", r->base, name, r->query);
}
