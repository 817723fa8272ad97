/* SPDX-License-Identifier: MIT */
/*
 * The registry: every backend's ops table, listed once here and validated
 * once, on the first lookup (fio's check_engine_ops).  A table that fails
 * validation is logged and left out, so the core never sees it.
 */
#include "backends/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

extern const struct backend_ops raw_backend_ops;
extern const struct backend_ops fault_backend_ops;
extern const struct backend_ops cow_backend_ops;
extern const struct backend_ops nfs_backend_ops;
#ifdef DIOLOOP_HAVE_RBD
extern const struct backend_ops rbd_backend_ops;
#endif

static const struct backend_ops *const backend_table[] = {
	&raw_backend_ops,
	&fault_backend_ops,
	&cow_backend_ops,
	&nfs_backend_ops,
#ifdef DIOLOOP_HAVE_RBD
	&rbd_backend_ops,
#endif
};

#define BACKEND_TABLE_SIZE G_N_ELEMENTS(backend_table)

/* Room for the test doubles that tests register. */
#define BACKEND_TEST_SLOTS 4
/* The tables that passed backend_ops_check, and their names; written once
 * inside g_once (and by backend_register_for_tests before a test's
 * threads start), read-only after. */
static const struct backend_ops *valid_table[BACKEND_TABLE_SIZE +
					     BACKEND_TEST_SLOTS];
static const char *valid_names[BACKEND_TABLE_SIZE + BACKEND_TEST_SLOTS + 1];
static size_t nr_valid;

/* Validate an ops table: 0 or -EINVAL.  Any thread. */
int backend_ops_check(const struct backend_ops *ops)
{
	if (!ops || !ops->name || !ops->name[0])
		return -EINVAL;
	/* A filter forwards what it leaves NULL (backend.h). */
	if (ops->is_filter)
		return 0;
	if (!ops->open || !ops->close || !ops->get_size ||
	    !ops->direct_IO_bvec)
		return -EINVAL;
	if (ops->volumes && !backend_volume_ops_complete(ops->volumes))
		return -EINVAL;
	return 0;
}

/* Validate every table once (called through g_once). */
static gpointer backend_registry_init(gpointer unused)
{
	size_t i, j;

	for (i = 0; i < BACKEND_TABLE_SIZE; i++) {
		const struct backend_ops *ops = backend_table[i];
		bool dup = false;

		if (backend_ops_check(ops) < 0) {
			g_warning("backend table %zu (%s) is invalid: it needs a name and open, close, get_size and direct_IO_bvec; skipped",
				  i, ops->name ? ops->name : "unnamed");
			continue;
		}
		for (j = 0; j < nr_valid; j++)
			dup |= !strcmp(valid_names[j], ops->name);
		if (dup) {
			g_warning("backend \"%s\" is registered twice; the second is skipped",
				  ops->name);
			continue;
		}
		valid_table[nr_valid] = ops;
		valid_names[nr_valid] = ops->name;
		nr_valid++;
	}
	valid_names[nr_valid] = NULL;
	return NULL;
}

/* Make sure the tables were validated. */
static void backend_registry_once(void)
{
	static GOnce once = G_ONCE_INIT;

	g_once(&once, backend_registry_init, NULL);
}

/* Add a test double's table (tests only, before their threads start):
 * 0, -EINVAL for an invalid table, -EEXIST for a name taken, -ENOSPC. */
int backend_register_for_tests(const struct backend_ops *ops)
{
	size_t i;

	backend_registry_once();
	if (backend_ops_check(ops) < 0)
		return -EINVAL;
	for (i = 0; i < nr_valid; i++)
		if (!strcmp(valid_names[i], ops->name))
			return valid_table[i] == ops ? 0 : -EEXIST;
	if (nr_valid == G_N_ELEMENTS(valid_table))
		return -ENOSPC;
	valid_table[nr_valid] = ops;
	valid_names[nr_valid] = ops->name;
	nr_valid++;
	valid_names[nr_valid] = NULL;
	return 0;
}

/* The valid table named name, or NULL.  Any thread. */
const struct backend_ops *backend_lookup(const char *name)
{
	size_t i;

	if (!name)
		return NULL;
	backend_registry_once();
	for (i = 0; i < nr_valid; i++)
		if (!strcmp(valid_table[i]->name, name))
			return valid_table[i];
	return NULL;
}

/* Names of the valid tables, NULL-terminated.  Any thread. */
const char *const *backend_names(void)
{
	backend_registry_once();
	return valid_names;
}

bool backend_is_url(const char *s)
{
	const char *p;

	if (!s || !g_ascii_isalpha(s[0]))
		return false;
	for (p = s + 1; g_ascii_isalnum(*p) || strchr("+-.", *p); p++)
		if (!*p)
			return false;
	return g_str_has_prefix(p, "://");
}

/* The protocols the registry knows, ", "-separated (g_free it). */
static char *backend_protocol_list(void)
{
	GString *known = g_string_new(NULL);
	size_t i;

	for (i = 0; i < nr_valid; i++)
		if (valid_table[i]->protocol)
			g_string_append_printf(known, "%s%s", known->len ? ", " :
					       "", valid_table[i]->protocol);
	return g_string_free(known, FALSE);
}

const struct backend_ops *backend_for_url(const char *url, GError **error)
{
	g_autofree char *known = NULL;
	size_t len, i;

	backend_registry_once();
	if (!backend_is_url(url)) {
		backend_set_error(error, -EINVAL, "%s: not a URL (SCHEME://...)",
				  url ? url : "(null)");
		return NULL;
	}
	len = strcspn(url, ":");
	for (i = 0; i < nr_valid; i++) {
		const char *proto = valid_table[i]->protocol;

		if (proto && strlen(proto) == len &&
		    !g_ascii_strncasecmp(url, proto, len))
			return valid_table[i];
	}
	known = backend_protocol_list();
	backend_set_error(error, -EPROTONOSUPPORT,
			  "%s: unknown protocol '%.*s' (known: %s)", url,
			  (int)len, url, known[0] ? known : "none");
	return NULL;
}

/* The valid table with the highest probe score for the file fd (-1: the
 * URL path); NULL when none answers. */
static const char *backend_probe_best(const char *path, int fd)
{
	struct backend_probe_args p = { .path = path, .fd = fd };
	const char *best = NULL;
	int best_score = 0;
	size_t i;

	backend_registry_once();
	for (i = 0; i < nr_valid; i++) {
		int score;

		if (!valid_table[i]->probe)
			continue;
		score = valid_table[i]->probe(&p);
		if (score > best_score) {
			best_score = score;
			best = valid_table[i]->name;
		}
	}
	return best;
}

/* The backend for an image path (backend.h).  Any thread (reads the
 * file's first blocks; a URL's through its protocol's backend). */
const char *backend_probe(const char *path)
{
	const struct backend_ops *ops;
	const char *type;
	int fd;

	if (backend_is_url(path)) {
		g_autoptr(GError) unknown = NULL;

		ops = backend_for_url(path, &unknown);
		if (!ops)
			return NULL;
		/* A format kept on the protocol's store (cow on NFS), else
		 * the protocol's own image. */
		type = backend_probe_best(path, -1);
		return type ? type : ops->name;
	}
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return "raw";
	type = backend_probe_best(path, fd);
	close(fd);
	return type ? type : "raw";
}

/* backend_probe for open args: the file the caller opened, when given.
 * Any thread. */
const char *backend_probe_args(const struct backend_open_args *args)
{
	const char *type;

	if (!args->file)
		return backend_probe(args->path);
	type = backend_probe_best(args->path, args->file->fd);
	return type ? type : "raw";
}

int backend_check_url(const char *url, bool want_file, GError **error)
{
	const struct backend_ops *ops = backend_for_url(url, error);

	if (!ops)
		return backend_is_url(url) ? -EPROTONOSUPPORT : -EINVAL;
	if (!ops->check_url)
		return 0;
	return ops->check_url(url, want_file, error);
}

int backend_list_url(const char *dir_url, GPtrArray *names, GError **error)
{
	const struct backend_ops *ops = backend_for_url(dir_url, error);

	if (!ops)
		return backend_is_url(dir_url) ? -EPROTONOSUPPORT : -EINVAL;
	if (!ops->list)
		return backend_set_error(error, -EOPNOTSUPP,
					 "%s: %s cannot list a directory",
					 dir_url, ops->name);
	return ops->list(dir_url, names, error);
}

/* The table that creates images of format type at path, after the
 * checks of backend_check_create; NULL with the line in *error and the
 * -errno in *err. */
static const struct backend_ops *backend_creator(const char *type,
						 const char *path, int *err,
						 GError **error)
{
	const struct backend_ops *ops;

	if (backend_is_url(path)) {
		ops = backend_for_url(path, error);
		if (!ops) {
			*err = -EPROTONOSUPPORT;
			return NULL;
		}
		/* raw maps 1:1, so a raw image on a protocol is the
		 * protocol's own file; a container format keeps its image
		 * on the protocol's store, which create makes first. */
		if (type && strcmp(type, "raw") && strcmp(type, ops->name)) {
			const struct backend_ops *fmt = backend_lookup(type);

			if (!fmt || !fmt->on_stores || !ops->create ||
			    !ops->remove) {
				*err = backend_set_error(error, -EOPNOTSUPP,
							 "%s: %s images on %s:// are not supported",
							 path, type,
							 ops->protocol);
				return NULL;
			}
			ops = fmt;
		}
	} else {
		ops = backend_lookup(type ? type : "raw");
		if (!ops) {
			*err = backend_set_error(error, -ENOENT,
						 "%s: unknown format '%s'",
						 path, type);
			return NULL;
		}
	}
	if (!ops->create) {
		*err = backend_set_error(error, -EOPNOTSUPP,
					 "%s: %s images cannot be created",
					 path, ops->name);
		return NULL;
	}
	return ops;
}

int backend_check_create(const char *type, const char *path, GError **error)
{
	int err = 0;

	return backend_creator(type, path, &err, error) ? 0 : err;
}

int backend_create(const char *type, const struct backend_create_args *a,
		   GError **error)
{
	const struct backend_ops *ops;
	int err = 0;

	ops = backend_creator(type, a->path, &err, error);
	if (!ops)
		return err;
	return ops->create(a, error);
}

int backend_remove_url(const char *url, GError **error)
{
	const struct backend_ops *ops = backend_for_url(url, error);

	if (!ops)
		return backend_is_url(url) ? -EPROTONOSUPPORT : -EINVAL;
	if (!ops->remove)
		return backend_set_error(error, -EOPNOTSUPP,
					 "%s: %s cannot remove images", url,
					 ops->name);
	return ops->remove(url, error);
}
