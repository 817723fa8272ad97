/* SPDX-License-Identifier: MIT */
/*
 * Volumes of cow images as nodes.  A cow image IMAGE serves its default
 * volume as node IMAGE and each other volume (snapshot or clone) as node
 * IMAGE@VOLUME; volume names never hold '@' or '/', so the last '@' of a
 * node name splits it.  A file called IMAGE@VOLUME in the source
 * directory wins over a volume of that name (it is served as itself).
 *
 * The volume list comes from the image's default-volume node: every
 * image of the source directory is opened at mount (and at its first
 * lookup), so the container is normally open in this daemon already and
 * listing costs no I/O beyond the volume pages.
 */
#include <errno.h>
#include <string.h>

#include "backends/volume.h"
#include "fusefs/fs.h"

bool dioloop_volume_split(const char *name, char **image, char **volume)
{
	const char *at = strrchr(name, '@');

	if (!at || at == name || at[1] == '\0' ||
	    strlen(at + 1) > BACKEND_VOLUME_NAME_MAX)
		return false;
	*image = g_strndup(name, (gsize)(at - name));
	if (!dioloop_is_image_name(*image)) {
		g_clear_pointer(image, g_free);
		return false;
	}
	*volume = g_strdup(at + 1);
	return true;
}

struct backend *dioloop_node_volume_backend(struct backend *b)
{
	while (b && !backend_has_volumes(b))
		b = b->ops->is_filter ? b->inner : NULL;
	return b;
}

int dioloop_volumes_list(struct dioloop_fs *fs, const char *image,
			 GArray **out)
{
	struct dioloop_node *node;
	struct backend *b, *vb;
	GArray *vols;
	int ret;

	*out = NULL;
	ret = dioloop_node_lookup(fs, image, &node);
	if (ret < 0)
		return ret;
	if (!node->cow || node->volume) {
		dioloop_node_forget(fs, node->ino, 1);
		return -EOPNOTSUPP;
	}
	b = dioloop_node_backend_get(node);
	if (!b) {
		dioloop_node_forget(fs, node->ino, 1);
		return -ENOENT;
	}
	vols = g_array_new(FALSE, TRUE, sizeof(struct backend_volume_info));
	vb = dioloop_node_volume_backend(b);
	ret = vb ? backend_volume_list(vb, vols, NULL) : -EOPNOTSUPP;
	dioloop_node_backend_put(node);
	dioloop_node_forget(fs, node->ino, 1);
	if (ret < 0) {
		g_array_unref(vols);
		return ret;
	}
	*out = vols;
	return 0;
}

int dioloop_volumes_find(struct dioloop_fs *fs, const char *image,
			 const char *volume, struct backend_volume_info *info)
{
	struct dioloop_node *node;
	struct backend *b, *vb;
	int ret;

	ret = dioloop_node_lookup(fs, image, &node);
	if (ret < 0)
		return ret;
	b = node->volume ? NULL : dioloop_node_backend_get(node);
	vb = b ? dioloop_node_volume_backend(b) : NULL;
	ret = vb ? backend_volume_lookup(vb, volume, info, NULL) : -ENOENT;
	if (b)
		dioloop_node_backend_put(node);
	dioloop_node_forget(fs, node->ino, 1);
	return ret == -EOPNOTSUPP ? -ENOENT : ret;
}

void dioloop_volumes_add_names(struct dioloop_fs *fs, GPtrArray *names)
{
	g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
	guint n = names->len, i, j;

	for (i = 0; i < n; i++)
		g_hash_table_add(seen, names->pdata[i]);
	for (i = 0; i < n; i++) {
		const char *image = names->pdata[i];
		GArray *vols;

		/* Not a cow image (or not servable): no volumes. */
		if (dioloop_volumes_list(fs, image, &vols) < 0)
			continue;
		for (j = 0; j < vols->len; j++) {
			struct backend_volume_info *v =
				&g_array_index(vols, struct backend_volume_info, j);
			char *name;

			if (!v->name[0])
				continue;	/* the default: node IMAGE */
			name = g_strdup_printf("%s@%s", image, v->name);
			if (g_hash_table_contains(seen, name)) {
				g_free(name);
				continue;
			}
			g_ptr_array_add(names, name);
			g_hash_table_add(seen, name);
		}
		g_array_unref(vols);
	}
}
