/* SPDX-License-Identifier: MIT */
/*
 * The command line's side of nfs:// images: one line per failure.  The
 * nfs backend logs why a call failed (the server's answer, a bad URL);
 * the commands capture that line and print it as their one error line
 * instead of a second, vaguer one.  A command-line process: one thread.
 */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "backends/nfs/nfs.h"
#include "fusefs/cli/commands.h"
#include "fusefs/remote.h"

static char *captured;		/* the first warning since capture_begin */

/* Log handler while capturing: keep the first warning, drop the rest
 * (info and debug still shown with G_MESSAGES_DEBUG). */
static void capture_log(const char *domain, GLogLevelFlags level,
			const char *msg, gpointer cmd)
{
	const char *dbg = g_getenv("G_MESSAGES_DEBUG");

	if (level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG)) {
		if (dbg && dbg[0])
			dioloop_err("%s: %s", (const char *)cmd, msg);
		return;
	}
	if (!captured)
		captured = g_strdup(msg);
}

void dioloop_cli_capture_begin(const char *cmd)
{
	g_clear_pointer(&captured, g_free);
	g_log_set_default_handler(capture_log, (gpointer)cmd);
}

char *dioloop_cli_capture_end(const char *cmd, const char *fallback)
{
	char *msg = captured ? captured : g_strdup(fallback);

	captured = NULL;
	dioloop_cli_logs(cmd);
	return msg;
}

int dioloop_nfs_check_url(const char *cmd, const char *url, bool want_file,
			  char **why)
{
	int ret;

	dioloop_cli_capture_begin(cmd);
	ret = nfs_url_check(url, want_file);
	*why = dioloop_cli_capture_end(cmd, ret < 0 ? url : NULL);
	if (ret == 0)
		g_clear_pointer(why, g_free);
	return ret;
}

int dioloop_nfs_check_source(const char *url, char **why)
{
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	int ret;

	dioloop_cli_capture_begin("mount");
	ret = nfs_url_check(url, false);
	if (ret == 0)
		ret = nfs_list_images(url, names);
	*why = dioloop_cli_capture_end("mount", NULL);
	if (ret == 0)
		g_clear_pointer(why, g_free);
	else if (!*why)
		*why = g_strdup_printf("%s: %s", url, g_strerror(-ret));
	return ret;
}

int dioloop_nfs_image_create(const char *url, uint64_t size, char **why)
{
	int ret;

	dioloop_cli_capture_begin("create");
	ret = nfs_image_create(url, size, true);
	*why = dioloop_cli_capture_end("create", NULL);
	if (ret == 0) {
		g_clear_pointer(why, g_free);
	} else if (!*why) {
		*why = g_strdup_printf("%s: %s", url, g_strerror(-ret));
	} else if (ret == -EEXIST) {
		g_free(*why);
		*why = g_strdup_printf("%s: %s", url, g_strerror(EEXIST));
	}
	return ret;
}

int dioloop_nfs_image_remove(const char *url)
{
	g_autofree char *why = NULL;
	int ret;

	dioloop_cli_capture_begin("remove");
	ret = nfs_image_remove(url);
	why = dioloop_cli_capture_end("remove", NULL);
	if (ret < 0 && ret != -ENOENT)
		dioloop_err("%s", why ? why : g_strerror(-ret));
	return ret;
}
