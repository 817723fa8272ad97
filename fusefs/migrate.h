/* SPDX-License-Identifier: MIT */
/*
 * Live migration of a node to another image, in the daemon: the control
 * commands behind `dioloop migrate`, the write path's dirty marking, and
 * the redirect that makes a switch outlive the daemon.
 *
 *   migrate NODE DEST [format=raw|cow] [bps=N] [ignore_bad_blocks]
 *           [remove_source]
 *       create DEST (a path that must not exist, or an nfs:// URL) with
 *       the node's size, start copying in a thread of its own; reply
 *       "started NODE -> DEST".  EBUSY while one runs on the node.
 *   migrate-status NODE
 *       "STATE done=N total=N dirty=N passes=N retried=N failed=N bad=N
 *       rate=N elapsed_ms=N" with STATE idle, copying, switching, done,
 *       failed or cancelled (rate: bytes copied a second on average),
 *       then "message: TEXT" after a failure, then "dest: FORMAT DEST"
 *       (the destination of the last migration; none when idle).
 *   migrate-cancel NODE
 *       stop a running migration; the node stays on its source.
 *
 * The switch: drain the node (no request in flight, none admitted), copy
 * what is still dirty, flush the destination, make the redirect durable,
 * put the destination in the mirror filter's place (under the node's
 * other filters), admit requests again.
 * The redirect is the file .IMAGE.dioloop-redirect in the source
 * directory, holding the destination; a node whose image has one serves
 * the destination (also after a restart, and when the image itself was
 * removed with remove_source).  Until the redirect is durable the source
 * is the node's image: a failure, a cancel or a crash leaves it there,
 * whole (the migration never writes the source).
 */
#ifndef DIOLOOP_FUSEFS_MIGRATE_H
#define DIOLOOP_FUSEFS_MIGRATE_H

#include <glib.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fusefs/fs.h"

#include "fusefs/redirect.h"

int dioloop_ctl_migrate(struct dioloop_fs *fs, int argc, char **argv,
			GString *reply);
int dioloop_ctl_migrate_status(struct dioloop_fs *fs, int argc, char **argv,
			       GString *reply);
int dioloop_ctl_migrate_cancel(struct dioloop_fs *fs, int argc, char **argv,
			       GString *reply);

/* migrate_checks.c: what a node must be to be migrated (0, or -errno
 * with the reason in reply), and the options after DEST (format=,
 * bps=, ignore_bad_blocks, remove_source: 0 or -EINVAL after a reply). */
struct migrate_opts;
int dioloop_migrate_check_node(struct dioloop_fs *fs,
			       struct dioloop_node *node, GString *reply);
int dioloop_migrate_parse_opts(int argc, char **argv, char **format,
			       struct migrate_opts *opts, bool *remove_source,
			       GString *reply);

/* True while a migration of node runs (a resize must wait: EBUSY). */
bool dioloop_node_migrating(struct dioloop_node *node);

/* A node's running migration as the stats and messages show it. */
struct dioloop_migration_view {
	const char *phase;		/* "copying" or "switching" */
	char *dest;			/* g_free'd by ..._view_clear */
	char *format;			/* the destination's: raw or cow */
	uint64_t done, remaining, dirty;	/* bytes */
	unsigned int pass;		/* the pass running: 1 first */
	double rate;			/* bytes copied a second, on average */
	double elapsed_s;
};
/* Fill *v and return true while a migration of node runs; false (v
 * zeroed) when none does.  Any thread holding the node. */
bool dioloop_node_migration_view(struct dioloop_node *node,
				 struct dioloop_migration_view *v);
void dioloop_migration_view_clear(struct dioloop_migration_view *v);

/* Cancel every running migration and wait for them (unmount). */
void dioloop_migrations_stop(struct dioloop_fs *fs);
/* Free every job of fs (at the end: no request runs any more). */
void dioloop_migrations_free(struct dioloop_fs *fs);
/* The node is freed: forget its last job (freed with the others). */
void dioloop_node_migration_free(struct dioloop_node *node);

#endif
