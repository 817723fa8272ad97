/* SPDX-License-Identifier: MIT */
/*
 * The registry: every backend's ops table, listed once here and validated
 * once, on the first lookup (fio's check_engine_ops).  A table that fails
 * validation is logged and left out, so the core never sees it.
 */
#include "backends/backend.h"
#include "backends/cow/cow.h"

#include <errno.h>
#include <string.h>

extern const struct backend_ops raw_backend_ops;
extern const struct backend_ops fault_backend_ops;
extern const struct backend_ops cow_backend_ops;
extern const struct backend_ops nfs_backend_ops;

static const struct backend_ops *const backend_table[] = {
	&raw_backend_ops,
	&fault_backend_ops,
	&cow_backend_ops,
	&nfs_backend_ops,
};

#define BACKEND_TABLE_SIZE G_N_ELEMENTS(backend_table)

/* The tables that passed backend_ops_check, and their names; written once
 * inside g_once (and by backend_register_for_tests before a test's
 * threads start), read-only after. */
/* Room for the test doubles that tests register. */
#define BACKEND_TEST_SLOTS 4
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

/* The backend for an image path: "nfs" for an nfs:// URL, "cow" for a
 * file with a cow superblock, else "raw".  Any thread (reads the file's
 * first blocks). */
const char *backend_probe(const char *path)
{
	if (!g_ascii_strncasecmp(path, "nfs://", 6))
		return "nfs";
	if (cow_is_image(path))
		return "cow";
	return "raw";
}

/* backend_probe for open args: the file the caller opened, when given.
 * Any thread. */
const char *backend_probe_args(const struct backend_open_args *args)
{
	if (!args->file)
		return backend_probe(args->path);
	return cow_is_image_fd(args->file->fd) ? "cow" : "raw";
}
