/* SPDX-License-Identifier: MIT */
/* dioloop: serve a directory of disk images as block nodes. */
#include <glib.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/iorec_file.h"
#include "fusefs/lograte.h"
#include "fusefs/cli/commands.h"

#ifndef DIOLOOP_VERSION
#define DIOLOOP_VERSION "unknown"
#endif

struct command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{ "mount", "serve a directory of images as block nodes", dioloop_cmd_mount },
	{ "umount", "flush, detach loop devices and unmount", dioloop_cmd_umount },
	{ "create", "create an image", dioloop_cmd_create },
	{ "info", "show an image's format, size, allocation and volumes", dioloop_cmd_info },
	{ "check", "verify a cow image's metadata", dioloop_cmd_check },
	{ "scrub", "verify every data checksum of a cow image", dioloop_cmd_scrub },
	{ "snapshot", "take (or delete) a snapshot of a cow image", dioloop_cmd_snapshot },
	{ "clone", "make a writable clone of a cow image or snapshot", dioloop_cmd_clone },
	{ "convert", "copy an image into a new one, raw or cow", dioloop_cmd_convert },
	{ "limit", "show or change I/O limits of a mount or a node", dioloop_cmd_limit },
	{ "fault", "inject errors and latency into a node, or stop", dioloop_cmd_fault },
	{ "stats", "show a mount's statistics", dioloop_cmd_stats },
	{ "migrate", "move a mounted node to another image while in use", dioloop_cmd_migrate },
};

/*
 * mount.fuse3 (mount -t fuse.dioloop, /etc/fstab, systemd) runs
 * "dioloop SOURCE MOUNTPOINT -o OPTS": true if argv looks like that (the
 * first word is no command but a path or an nfs:// URL).
 */
static bool is_mount_helper_call(int argc, char **argv)
{
	struct stat st;

	if (argc < 3 || argv[1][0] == '-')
		return false;
	return strchr(argv[1], '/') || (stat(argv[1], &st) == 0 &&
					 S_ISDIR(st.st_mode));
}

void dioloop_err(const char *fmt, ...)
{
	g_autofree char *msg = NULL, *line = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	/* Names from images and servers: one line, no terminal codes. */
	line = dioloop_escape_controls(msg);
	fprintf(stderr, "dioloop: %s\n", line);
}

/* s without a leading "prefix: ", or NULL. */
static const char *skip_prefix(const char *s, const char *prefix)
{
	size_t n = prefix ? strlen(prefix) : 0;

	if (!n || strncmp(s, prefix, n) || strncmp(s + n, ": ", 2))
		return NULL;
	return s + n + 2;
}

void dioloop_err_reply(const char *cmd, const char *word, const char *reply,
		       int err)
{
	g_autofree char *msg = g_strstrip(g_strdup(reply ? reply : ""));
	const char *m = msg, *next;

	if (!msg[0]) {
		dioloop_err("%s: %s", cmd, g_strerror(-err));
		return;
	}
	while ((next = skip_prefix(m, word)) || (next = skip_prefix(m, cmd)))
		m = next;
	dioloop_err("%s: %s", cmd, m);
}

bool dioloop_parse_output(const char *cmd, const char *output, bool json_flag,
			  bool *json)
{
	*json = json_flag;
	if (!output)
		return true;
	if (!strcmp(output, "json") || !strcmp(output, "human")) {
		if (json_flag && strcmp(output, "json")) {
			dioloop_err("%s: --json and --output=%s disagree", cmd,
				    output);
			return false;
		}
		*json = !strcmp(output, "json");
		return true;
	}
	dioloop_err("%s: bad --output '%s': expected json or human", cmd,
		    output);
	return false;
}

/* Log handler of dioloop_cli_logs: one "dioloop: CMD: message" line. */
static void cli_log(const char *domain, GLogLevelFlags level,
		    const char *msg, gpointer cmd)
{
	if (level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG)) {
		const char *dbg = g_getenv("G_MESSAGES_DEBUG");

		if (!dbg || !dbg[0])
			return;
	}
	dioloop_err("%s: %s", (const char *)cmd, msg);
}

void dioloop_cli_logs(const char *cmd)
{
	g_log_set_default_handler(cli_log, (gpointer)cmd);
}

bool dioloop_parse_args(const char *cmd, const char *params,
			const char *summary, GOptionEntry *entries,
			int *argc, char ***argv)
{
	g_autofree char *prog = g_strdup_printf("dioloop %s", cmd);
	GOptionContext *ctx = g_option_context_new(params);
	GError *err = NULL;
	bool ok;

	g_set_prgname(prog);
	g_option_context_set_summary(ctx, summary);
	g_option_context_add_main_entries(ctx, entries, NULL);
	ok = g_option_context_parse(ctx, argc, argv, &err);
	if (!ok) {
		dioloop_err("%s: %s (see 'dioloop %s --help')", cmd,
			    err->message, cmd);
		g_error_free(err);
	}
	g_option_context_free(ctx);
	return ok;
}

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "Usage: dioloop [--version] [--help] COMMAND [ARGS...]\n\n"
		     "Serve a directory of disk images as block nodes.\n\n"
		     "Commands:\n");
	for (i = 0; i < G_N_ELEMENTS(commands); i++)
		fprintf(out, "  %-10s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(out, "\n'dioloop COMMAND --help' describes a command.\n");
}

int main(int argc, char **argv)
{
	const char *iorec_log = g_getenv("DIOLOOP_IOREC_LOG");
	size_t i;

	/* A test knob (power-cut tests): log what backends do to files. */
	if (iorec_log && *iorec_log && dioloop_iorec_file_open(iorec_log) < 0) {
		dioloop_err("DIOLOOP_IOREC_LOG=%s: cannot open it", iorec_log);
		return DIOLOOP_EXIT_USAGE;
	}
	if (argc < 2) {
		usage(stderr);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return DIOLOOP_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("dioloop %s\n", DIOLOOP_VERSION);
		return DIOLOOP_EXIT_OK;
	}
	for (i = 0; i < G_N_ELEMENTS(commands); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	if (is_mount_helper_call(argc, argv)) {
		static char mount_name[] = "mount";

		/* As "dioloop mount SOURCE MOUNTPOINT -o OPTS". */
		argv[0] = mount_name;
		return dioloop_cmd_mount(argc, argv);
	}
	dioloop_err("unknown command '%s' (see 'dioloop --help')", argv[1]);
	return DIOLOOP_EXIT_USAGE;
}
