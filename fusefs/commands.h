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

/* Print "dioloop: <message>" to stderr; for one-line errors. */
void dioloop_err(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Parse argv with entries; on error print one line naming the bad
 * argument and return false. */
bool dioloop_parse_args(const char *cmd, const char *params,
			const char *summary, GOptionEntry *entries,
			int *argc, char ***argv);

#endif
