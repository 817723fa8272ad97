/* SPDX-License-Identifier: MIT */
/*
 * The checks and options of the migrate control command (migrate.h):
 * what a node must be to be migrated, and the options after DEST.
 */
#include "fusefs/migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/filter_mirror.h"
#include "backends/size.h"
#include "backends/volume.h"

/*
 * What a migration cannot take: a cow image with other volumes (only the
 * node's own volume would move, and the others would be cut off from
 * it), an image served under several names (a symlink alias would keep
 * writing the source), a node a control command is using (a scrub or a
 * snapshot over the backend the switch replaces).  0 or -errno with the
 * reason in reply.
 */
int dioloop_migrate_check_node(struct dioloop_fs *fs, struct dioloop_node *node,
			       GString *reply)
{
	struct dioloop_migration_view mv;
	struct stat lst;
	bool aliased, busy, scrubbing;

	/* A running migration holds the node as a control command does:
	 * name it. */
	if (dioloop_node_migration_view(node, &mv)) {
		g_string_append_printf(reply, "migrate: a migration to %s is running on '%s' (dioloop migrate --status, --cancel)\n",
				       mv.dest, node->name);
		dioloop_migration_view_clear(&mv);
		return -EBUSY;
	}
	if (node->cow) {
		struct backend *b = dioloop_node_backend_get(node);
		GArray *vols = g_array_new(FALSE, TRUE,
					   sizeof(struct backend_volume_info));
		int ret = b ? backend_volume_list(
					dioloop_node_volume_backend(b),
					vols, NULL) : -ENOENT;
		guint n = vols->len;

		if (b)
			dioloop_node_backend_put(node);
		g_array_free(vols, TRUE);
		if (ret < 0) {
			g_string_append_printf(reply, "migrate: '%s': listing its volumes: %s\n",
					       node->name, g_strerror(-ret));
			return ret;
		}
		if (n > 1) {
			g_string_append_printf(reply, "migrate: '%s' has snapshots or clones; a migration moves one volume: delete them, or convert a snapshot instead\n",
					       node->name);
			return -EOPNOTSUPP;
		}
	}
	g_mutex_lock(&fs->lock);
	aliased = node->lock && node->lock->refs > 1;
	busy = node->ctl_users > 0;
	scrubbing = node->lock && node->lock->scrubbing;
	g_mutex_unlock(&fs->lock);
	if (aliased || (fstatat(fs->source_fd, node->image, &lst,
				AT_SYMLINK_NOFOLLOW) == 0 &&
			S_ISLNK(lst.st_mode))) {
		g_string_append_printf(reply, "migrate: '%s' is served under more than one name (a symlink); migrate the image by its own name with no alias in use\n",
				       node->name);
		return -EBUSY;
	}
	if (scrubbing) {
		g_string_append_printf(reply, "migrate: a scrub is running on '%s'; try again when it ended\n",
				       node->name);
		return -EBUSY;
	}
	if (busy) {
		g_string_append_printf(reply, "migrate: a control command (scrub, snapshot) is using '%s'; try again when it ended\n",
				       node->name);
		return -EBUSY;
	}
	return 0;
}

int dioloop_migrate_parse_opts(int argc, char **argv, char **format,
			       struct migrate_opts *opts, bool *remove_source,
			       GString *reply)
{
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (g_str_has_prefix(a, "format=")) {
			g_free(*format);
			*format = g_strdup(a + 7);
			if (strcmp(*format, "raw") &&
			    strcmp(*format, "cow")) {
				g_string_append_printf(reply, "migrate: unknown format '%s'\n",
						       *format);
				return -EINVAL;
			}
		} else if (g_str_has_prefix(a, "bps=")) {
			if (dioloop_parse_u64(a + 4, UINT64_MAX,
					      &opts->bps) < 0) {
				g_string_append_printf(reply, "migrate: bad %s\n",
						       a);
				return -EINVAL;
			}
		} else if (!strcmp(a, "ignore_bad_blocks")) {
			opts->ignore_bad_blocks = true;
		} else if (!strcmp(a, "remove_source")) {
			*remove_source = true;
		} else {
			g_string_append_printf(reply, "migrate: unknown option '%s'\n",
					       a);
			return -EINVAL;
		}
	}
	return 0;
}
