/* SPDX-License-Identifier: MIT */
/* librados and librbd through dlopen(): see api.h. */
#define DRBD_API_DEFINE
#include "backends/rbd/api.h"

#include <dlfcn.h>
#include <errno.h>

#include "backends/backend.h"

struct drbd_api drbd_api;

static GOnce load_once = G_ONCE_INIT;
static char *load_failure;	/* NULL once loaded */

/*
 * Open soname for good (librados does not expect to be unloaded), its
 * symbols global as when linked: Ceph's plugins (compressors, crypto)
 * are loaded later and expect libceph-common's symbols in the global
 * scope.
 */
static void *api_open(const char *soname)
{
	void *handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);

	if (!handle)
		load_failure = g_strdup_printf("cannot load %s (install "
					       "librbd1 and librados2): %s",
					       soname, dlerror());
	return handle;
}

static gpointer api_load(gpointer unused)
{
	void *rados, *rbd;

	(void)unused;
	/* librbd first: it brings librados, and on a machine with neither
	 * the line names the one the user asked for. */
	rbd = api_open(DRBD_LIBRBD_SONAME);
	if (!rbd)
		return NULL;
	rados = api_open(DRBD_LIBRADOS_SONAME);
	if (!rados)
		return NULL;
	/* Each name from the library that defines it. */
#define DRBD_API_RESOLVE(fn)                                                  \
	if (!load_failure) {                                                  \
		drbd_api.fn = (__typeof__(fn) *)dlsym(                        \
			g_str_has_prefix(#fn, "rados_") ? rados : rbd, #fn);  \
		if (!drbd_api.fn)                                             \
			load_failure = g_strdup_printf(                       \
				"%s has no %s: librbd1 too old?",             \
				g_str_has_prefix(#fn, "rados_") ?             \
					DRBD_LIBRADOS_SONAME :                \
					DRBD_LIBRBD_SONAME,                   \
				#fn);                                         \
	}
	DRBD_API_FUNCTIONS(DRBD_API_RESOLVE)
#undef DRBD_API_RESOLVE
	return NULL;
}

int drbd_api_load(const char *what, GError **error)
{
	g_once(&load_once, api_load, NULL);
	if (load_failure)
		return backend_set_error(error, -ELIBACC, "%s: %s", what,
					 load_failure);
	return 0;
}
