/* SPDX-License-Identifier: MIT */
/*
 * The command-line side of a running mount: its control file
 * MOUNTPOINT/.dioloop/ctl (control.h), and where an image argument
 * points: a node of a mount, an image a mount serves (both: online, through
 * the mount's ctl), or an image nobody serves (offline, opened here).
 * A command-line process: one thread, except that dioloop_ctl_send may run
 * on several at once.
 */
#ifndef DIOLOOP_CTL_CLIENT_H
#define DIOLOOP_CTL_CLIENT_H

#include <glib.h>
#include <stdbool.h>

struct backend;

/* What a MOUNTPOINT[/NODE] argument names. */
struct dioloop_ctl_target {
	char *ctl;			/* MOUNTPOINT/.dioloop/ctl */
	char *node;			/* NULL: the mount itself */
};

/* Free what dioloop_ctl_resolve filled in. */
void dioloop_ctl_target_clear(struct dioloop_ctl_target *t);

/* The ctl file of a dioloop mount at dir, or NULL (g_free it). */
char *dioloop_ctl_of(const char *dir);

/* Resolve arg to a mount or a node: true, or false after a message. */
bool dioloop_ctl_resolve(const char *cmd, const char *arg,
			 struct dioloop_ctl_target *t);

/* Send one command line; 0 or -errno, the daemon's reply (or the error's
 * message) in reply.  Blocks until the daemon answers. */
int dioloop_ctl_send(const char *ctl, const char *line, GString *reply);

/* Send, print the reply; the exit status (2 when the daemon said EINVAL). */
int dioloop_ctl_run(const char *cmd, const struct dioloop_ctl_target *t,
		    const char *line);

/* A node's migrate-status reply (fusefs/migrate.h), parsed. */
struct dioloop_migrate_status {
	char state[16];			/* idle, copying, switching, done,
					 * failed, cancelled */
	uint64_t done, total, dirty, passes, retried, failed, bad;
	uint64_t rate, elapsed_ms;
	char message[512];		/* the "message:" line, if any */
	char format[16];		/* the "dest:" line: FORMAT PATH */
	char dest[4096];		/* "" when no migration ran */
};

/* Ask ctl for the migration of qnode (a shell-quoted node name): 0 with
 * *st, or -errno with the daemon's reply in reply. */
int dioloop_migrate_status_get(const char *ctl, const char *qnode,
			       struct dioloop_migrate_status *st,
			       GString *reply);

/*
 * An IMAGE[@VOLUME] argument, or a node path MOUNTPOINT/NODE, resolved.
 * Online (ctl set): a running mount serves the image, and commands go
 * through its ctl with node.  image is the file to open offline (NULL
 * when a node's mount does not say where its source is).
 */
struct dioloop_image_ref {
	char *image;			/* the image file, or a URL */
	char *volume;			/* NULL: the default volume */
	char *node;			/* the node name: IMAGE[@VOLUME] */
	char *ctl;			/* NULL: offline */
	char *mountpoint;		/* with ctl */
};

/* Resolve arg: 0, or -errno with a one-line reason in *error. */
int dioloop_image_ref_resolve(const char *arg, struct dioloop_image_ref *ref,
			      GError **error);
void dioloop_image_ref_clear(struct dioloop_image_ref *ref);

/*
 * Where ref's image lives when a migration switched it away: the path or
 * URL its redirect (fusefs/redirect.h) names, believed as the daemon
 * believes it (ours, written for this image, the image and the target
 * still the files it names); NULL when there is none (g_free it).
 */
char *dioloop_image_ref_redirect(const struct dioloop_image_ref *ref);

/*
 * Make ref name where its image lives now, for the commands that read
 * or change an image (info, check, scrub, snapshot, clone, convert): a
 * migrated image's redirect, believed as dioloop_image_ref_redirect
 * believes it, replaces ref->image with the destination (its path or
 * URL also in *migrated_to when that is not NULL; g_free it).  0, also
 * when there is nothing to follow; -ENOENT after a message "CMD: ARG:
 * ..." when arg names no file and no redirect is believed (a migrated
 * image removed, with a redirect that is not ours, is gone).
 */
int dioloop_image_ref_follow(const char *cmd, const char *arg,
			     struct dioloop_image_ref *ref,
			     char **migrated_to);

/*
 * Open ref's image offline (backend_probe chooses the backend; its name
 * in *type), volume included: 0, or -errno with a one-line reason in
 * *error.  A URL's backend line is that reason; a local image's is
 * logged first (g_warning) and the reason sums up.  flags: enum
 * backend_open_flags.
 */
/* Every symlink on path is root's, the caller's, or its target owner's:
 * 0, or -EPERM with *error (control_client.c). */
int dioloop_path_symlinks_trusted(const char *path, GError **error);

int dioloop_image_ref_open(const struct dioloop_image_ref *ref,
			   unsigned int flags, struct backend **b,
			   const char **type, GError **error);

/*
 * Take the image lock of ref's image, as the daemon does for every image
 * it serves (a write lock unless readonly): 0 with *lock_fd (close it to
 * let go; -1 for a URL, which has no local lock); -EBUSY with *holder
 * naming the process that holds it (g_free it); -ENOENT when the file is
 * missing; or another -errno after a message "CMD: IMAGE: reason".
 */
int dioloop_image_ref_lock(const char *cmd, const struct dioloop_image_ref *ref,
			   bool readonly, int *lock_fd, char **holder);

#endif
