/* SPDX-License-Identifier: MIT */
/*
 * The dioloop subcommands.  Each takes the arguments after its name
 * (argv[0] is the command name) and returns the process exit status:
 * 0 success, 1 failure, 2 a bad argument (after a one-line message).
 */
#ifndef DIOLOOP_COMMANDS_H
#define DIOLOOP_COMMANDS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define DIOLOOP_EXIT_OK 0
#define DIOLOOP_EXIT_FAIL 1
#define DIOLOOP_EXIT_USAGE 2

int dioloop_cmd_create(int argc, char **argv);
int dioloop_cmd_info(int argc, char **argv);
int dioloop_cmd_mount(int argc, char **argv);
int dioloop_cmd_umount(int argc, char **argv);
int dioloop_cmd_limit(int argc, char **argv);
int dioloop_cmd_fault(int argc, char **argv);
int dioloop_cmd_stats(int argc, char **argv);
int dioloop_cmd_migrate(int argc, char **argv);
int dioloop_cmd_check(int argc, char **argv);
int dioloop_cmd_scrub(int argc, char **argv);
int dioloop_cmd_snapshot(int argc, char **argv);
int dioloop_cmd_clone(int argc, char **argv);
int dioloop_cmd_convert(int argc, char **argv);

/* Print "dioloop: <message>" to stderr; for one-line errors. */
void dioloop_err(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Parse argv with entries; on error print one line naming the bad
 * argument and return false. */
bool dioloop_parse_args(const char *cmd, const char *params,
			const char *summary, GOptionEntry *entries,
			int *argc, char ***argv);

/* Show the libraries' warnings as "dioloop: CMD: message" lines (info
 * and debug messages only with G_MESSAGES_DEBUG), for commands that open
 * images themselves. */
void dioloop_cli_logs(const char *cmd);

/* --format/--csum of create and convert: false after a one-line message.
 * *csum_type: 0 (the default) or enum cow_csum_type. */
bool dioloop_parse_format(const char *cmd, const char *format,
			  const char *csum, uint8_t *csum_type);

/* Create an image at path (never over an existing file): format "raw" or
 * "cow".  0, or -errno with a one-line reason in *why (g_free it). */
int dioloop_image_create(const char *path, const char *format,
			 uint8_t csum_type, uint64_t size, char **why);

/* nfs_errors.c: nfs:// images on the command line. */
/* Capture the libraries' warnings from here on instead of printing them;
 * end: the first one (or fallback, or NULL; g_free it), and the logs go
 * back to dioloop_cli_logs(cmd). */
void dioloop_cli_capture_begin(const char *cmd);
char *dioloop_cli_capture_end(const char *cmd, const char *fallback);
/* Check url's form (nfs_url_check): 0, or -EINVAL with the one-line
 * reason in *why (g_free it). */
int dioloop_nfs_check_url(const char *cmd, const char *url, bool want_file,
			  char **why);
/* Check an nfs:// mount source: the URL, and that the server lists the
 * directory.  0, or -errno with the one-line reason in *why (g_free
 * it). */
int dioloop_nfs_check_source(const char *url, char **why);
/* Create a sparse raw image at an nfs:// url: 0, or -errno with the
 * one-line reason in *why (g_free it). */
int dioloop_nfs_image_create(const char *url, uint64_t size, char **why);
/* Remove an image at an nfs:// url (after a failed convert): 0 or
 * -errno (printed, one line, unless -ENOENT). */
int dioloop_nfs_image_remove(const char *url);

#endif
