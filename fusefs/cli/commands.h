/* SPDX-License-Identifier: MIT */
/*
 * The dioloop subcommands.  Each takes the arguments after its name
 * (argv[0] is the command name) and returns the process exit status,
 * the same rule for every command (docs/cli.md):
 *   0  done;
 *   1  understood but failed (I/O error, image in use, corrupt metadata,
 *      the daemon refused);
 *   2  the command line is wrong: an unknown option, a wrong number of
 *      arguments, a value that does not parse, or a path argument that
 *      does not exist (or is no mount point where one is needed).
 * Every error is printed once, as one "dioloop: CMD: ..." line.
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

/* Print a daemon's error reply (or, when it is empty, strerror(-err))
 * as one "dioloop: CMD: ..." line: a leading "WORD: " (the control word
 * sent, e.g. "delete-volume") or "CMD: " is dropped, so the message
 * names the command the user typed, once. */
void dioloop_err_reply(const char *cmd, const char *word, const char *reply,
		       int err);

/* --output=FORMAT (json or human) and --json: true with *json set, or
 * false after a message (a usage error). */
bool dioloop_parse_output(const char *cmd, const char *output, bool json_flag,
			  bool *json);

/* Show the libraries' warnings as "dioloop: CMD: message" lines (info
 * and debug messages only with G_MESSAGES_DEBUG), for commands that open
 * images themselves. */
void dioloop_cli_logs(const char *cmd);

/* --format/--csum of create and convert: false after a one-line message.
 * A checksum needs a format whose backend has checksums. */
bool dioloop_parse_format(const char *cmd, const char *format,
			  const char *csum);
/* Is csum a checksum some backend creates?  False after a message. */
bool dioloop_parse_checksum(const char *cmd, const char *csum);
/* The multiple a new image of format must have as its size. */
uint32_t dioloop_create_align(const char *format);

#endif
