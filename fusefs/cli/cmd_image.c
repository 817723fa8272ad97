/* SPDX-License-Identifier: MIT */
/*
 * dioloop create / dioloop info: make and describe images.  A
 * command-line process: one thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <json-glib/json-glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/size.h"
#include "fusefs/cli/commands.h"
#include "fusefs/cli/control_client.h"

#define DIOLOOP_MAX_IMAGE_SIZE (UINT64_C(1) << 60)
#define DIOLOOP_DEFAULT_IMAGE_SIZE (UINT64_C(1) << 30)

/* Does ops (NULL: any registered backend) create images with checksum
 * csum?  *known: those it does, ", "-separated (g_free it). */
static bool checksum_known(const struct backend_ops *ops, const char *csum,
			   char **known)
{
	const char *const *names = backend_names();
	GString *list = g_string_new(NULL);
	bool found = false;
	size_t i, j;

	for (i = 0; names[i]; i++) {
		const struct backend_ops *o = backend_lookup(names[i]);

		if ((ops && o != ops) || !o->checksums)
			continue;
		for (j = 0; o->checksums[j]; j++) {
			found |= !strcmp(o->checksums[j], csum);
			g_string_append_printf(list, "%s%s", list->len ? ", " :
					       "", o->checksums[j]);
		}
	}
	*known = g_string_free(list, FALSE);
	return found;
}

bool dioloop_parse_checksum(const char *cmd, const char *csum)
{
	g_autofree char *known = NULL;

	if (checksum_known(NULL, csum, &known))
		return true;
	dioloop_err("%s: bad --csum '%s': known checksums: %s", cmd, csum,
		    known);
	return false;
}

bool dioloop_parse_format(const char *cmd, const char *format,
			  const char *csum)
{
	const struct backend_ops *ops;
	g_autofree char *known = NULL;

	if (format && strcmp(format, "raw") && strcmp(format, "cow")) {
		dioloop_err("%s: bad --format '%s': known formats: raw, cow", cmd,
			    format);
		return false;
	}
	if (!csum)
		return true;
	ops = backend_lookup(format ? format : "raw");
	if (!ops || !ops->checksums) {
		dioloop_err("%s: --csum '%s' needs --format cow (raw images "
			    "have no checksums)", cmd, csum);
		return false;
	}
	if (!checksum_known(ops, csum, &known)) {
		dioloop_err("%s: bad --csum '%s': known checksums: %s", cmd,
			    csum, known);
		return false;
	}
	return true;
}

uint32_t dioloop_create_align(const char *format)
{
	const struct backend_ops *ops = backend_lookup(format);

	return ops && ops->create_align ? ops->create_align : 1;
}

int dioloop_cmd_create(int argc, char **argv)
{
	g_autofree char *size_arg = NULL, *format = NULL, *csum = NULL;
	g_autoptr(GError) error = NULL;
	GOptionEntry entries[] = {
		{ "size", 's', 0, G_OPTION_ARG_STRING, &size_arg,
		  "logical size, with K/M/G/T suffixes, fractions allowed "
		  "(1.5G; default 1G); a "
		  "multiple of 512 (raw) or 4096 (cow)", "SIZE" },
		{ "format", 0, 0, G_OPTION_ARG_STRING, &format,
		  "image format: raw (default) or cow", "FORMAT" },
		{ "csum", 0, 0, G_OPTION_ARG_STRING, &csum,
		  "cow data checksum: crc32c (default) or xxhash64", "TYPE" },
		{ NULL },
	};
	struct backend_create_args args = {
		.size = DIOLOOP_DEFAULT_IMAGE_SIZE,
	};
	const char *type;
	uint32_t align;
	int ret;

	if (!dioloop_parse_args("create", "PATH",
				"Create an image (sparse: it takes no space "
				"until written): raw, a plain file, or cow, a "
				"copy-on-write image with data checksums and "
				"snapshots.  PATH may be a URL, "
				"nfs://HOST[:PORT]/EXPORT/DIR/NAME.img[?OPTIONS] "
				"or rbd://POOL[/NAMESPACE]/IMAGE[?OPTIONS]: the "
				"file or rbd image is made there (never over an "
				"existing one) and holds either format.", entries,
				&argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("create: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!dioloop_parse_format("create", format, csum))
		return DIOLOOP_EXIT_USAGE;
	type = format ? format : "raw";
	args.path = argv[1];
	args.checksum = csum;
	/* A URL's protocol, its form, and whether the format can live
	 * there: a usage error before anything is made. */
	if (backend_check_create(type, argv[1], &error) < 0 ||
	    (backend_is_url(argv[1]) &&
	     backend_check_url(argv[1], true, &error) < 0)) {
		dioloop_err("create: %s", error->message);
		return DIOLOOP_EXIT_USAGE;
	}
	if (size_arg) {
		bool named = strcmp(type, "raw") != 0;

		align = dioloop_create_align(type);
		ret = dioloop_parse_size(size_arg, DIOLOOP_MAX_IMAGE_SIZE,
					 &args.size);
		if (ret < 0 || args.size % align || args.size == 0) {
			g_autofree char *not_multiple =
				g_strdup_printf("not a multiple of %u bytes",
						align);
			g_autofree char *which =
				g_strdup_printf(" (%s images)", type);

			dioloop_err("create: bad --size '%s': %s%s", size_arg,
				    ret == -ERANGE ? "too large (at most 1 EiB)" :
				    ret < 0 ? "expected a number with an "
					      "optional K/M/G/T/P/E suffix "
					      "(1.5G)" :
				    args.size == 0 ? "must not be 0" :
						     not_multiple,
				    ret == 0 && args.size && named ? which : "");
			return DIOLOOP_EXIT_USAGE;
		}
	}
	ret = backend_create(type, &args, &error);
	if (ret < 0) {
		dioloop_err("create: %s", error->message);
		/* PATH's folder does not exist: the argument is wrong. */
		return ret == -ENOENT || ret == -ENOTDIR ? DIOLOOP_EXIT_USAGE :
							   DIOLOOP_EXIT_FAIL;
	}
	return DIOLOOP_EXIT_OK;
}

/* ---- info ---- */

/* What info knows about an image beyond backend_info: its format's
 * details and volumes (a container format's; none for raw). */
struct image_details {
	struct backend_details d;
	GArray *volumes;		/* struct backend_volume_info */
	char *base;			/* the image's file name */
};

/* A volume's kind as info shows it. */
static const char *volume_kind(const struct backend_volume_info *v)
{
	return !v->name[0] ? "default" : v->snapshot ? "snapshot" : "clone";
}

/* The node name of volume v of the image called base: BASE[@NAME]. */
static const char *volume_node(const char *base,
			       const struct backend_volume_info *v, char *buf,
			       size_t len)
{
	snprintf(buf, len, "%s%s%s", base, v->name[0] ? "@" : "", v->name);
	return buf;
}

/* The node name of the volume with id; NULL for none, "#ID" once
 * deleted. */
static const char *volume_parent(GArray *vols, const char *base, uint64_t id,
				 char *buf, size_t len)
{
	guint i;

	if (!id)
		return NULL;
	for (i = 0; i < vols->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(vols, struct backend_volume_info, i);

		if (v->id == id)
			return volume_node(base, v, buf, len);
	}
	snprintf(buf, len, "#%" PRIu64, id);
	return buf;
}

/* Unix seconds as local "YYYY-MM-DD HH:MM:SS". */
static const char *format_time(uint64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm) || !strftime(buf, len, "%F %T", &tm))
		snprintf(buf, len, "%" PRIu64, t);
	return buf;
}

/* Collect the details of the open backend b of path: 1 when its format
 * has some, 0 when it has none (raw), or -errno with the line in
 * *error. */
static int image_details_get(struct backend *b, const char *path,
			     struct image_details *d, GError **error)
{
	int ret = backend_describe(b, &d->d);

	if (ret == -EOPNOTSUPP)
		return 0;
	if (ret < 0)
		return backend_set_error(error, ret, "%s: %s", path,
					 g_strerror(-ret));
	d->base = g_path_get_basename(path);
	if (backend_is_url(path))
		d->base[strcspn(d->base, "?")] = '\0';	/* the URL's options */
	d->volumes = g_array_new(FALSE, TRUE, sizeof(struct backend_volume_info));
	ret = backend_volume_list(b, d->volumes, error);
	return ret < 0 ? ret : 1;
}

/* The uuid as 36 hex characters and dashes. */
static void format_uuid(const uint8_t *u, char *buf)
{
	int i, n = 0;

	for (i = 0; i < 16; i++) {
		n += sprintf(buf + n, "%02x", u[i]);
		if (i == 3 || i == 5 || i == 7 || i == 9)
			buf[n++] = '-';
	}
	buf[n] = '\0';
}

static void print_details_text(const struct image_details *id)
{
	const struct backend_details *d = &id->d;
	char s1[32], s2[32], when[32], uuid[40];
	char parent[PATH_MAX], node[PATH_MAX];
	guint i;

	printf("version:    %u\n", d->format_version);
	printf("checksum:   %s\n", d->checksum);
	printf("generation: %" PRIu64 "\n", d->generation);
	if (d->has_uuid) {
		format_uuid(d->uuid, uuid);
		printf("uuid:       %s\n", uuid);
	}
	printf("container:  %" PRIu64 " bytes (%s), %s on the host\n",
	       d->container_size,
	       dioloop_format_size(d->container_size, s1, sizeof(s1)),
	       dioloop_format_size(d->container_allocated, s2, sizeof(s2)));
	printf("blocks:     %" PRIu64 " of %u KiB: %" PRIu64 " used, %" PRIu64
	       " free, %" PRIu64 " pinned\n", d->blocks, d->block_size / 1024,
	       d->used_blocks, d->blocks - MIN(d->blocks, d->used_blocks),
	       d->pinned_blocks);
	printf("volumes:    %u\n", id->volumes->len);
	printf("  %-24s %-8s %10s %10s %-24s %s\n", "NODE", "TYPE", "SIZE",
	       "MAPPED", "PARENT", "CREATED");
	for (i = 0; i < id->volumes->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(id->volumes, struct backend_volume_info, i);
		const char *p = volume_parent(id->volumes, id->base, v->parent,
					      parent, sizeof(parent));

		printf("  %-24s %-8s %10s %10s %-24s %s\n",
		       volume_node(id->base, v, node, sizeof(node)),
		       volume_kind(v),
		       dioloop_format_size(v->size, s1, sizeof(s1)),
		       dioloop_format_size(v->mapped_blocks * d->block_size,
					   s2, sizeof(s2)),
		       p ? p : "-",
		       format_time(v->create_time, when, sizeof(when)));
	}
}

/* Add the details to the JSON object being built. */
static void add_details_json(JsonBuilder *jb, const struct image_details *id,
			     const char *volume)
{
	const struct backend_details *d = &id->d;
	char parent[PATH_MAX], node[PATH_MAX], uuid[40];
	guint i;

	json_builder_set_member_name(jb, "format_version");
	json_builder_add_int_value(jb, d->format_version);
	json_builder_set_member_name(jb, "checksum");
	json_builder_add_string_value(jb, d->checksum);
	json_builder_set_member_name(jb, "generation");
	json_builder_add_int_value(jb, (gint64)d->generation);
	if (d->has_uuid) {
		format_uuid(d->uuid, uuid);
		json_builder_set_member_name(jb, "uuid");
		json_builder_add_string_value(jb, uuid);
	}
	json_builder_set_member_name(jb, "volume");
	json_builder_add_string_value(jb, volume ? volume : "");
	json_builder_set_member_name(jb, "container");
	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "file_size");
	json_builder_add_int_value(jb, (gint64)d->container_size);
	json_builder_set_member_name(jb, "host_allocated");
	json_builder_add_int_value(jb, (gint64)d->container_allocated);
	json_builder_set_member_name(jb, "block_size");
	json_builder_add_int_value(jb, d->block_size);
	json_builder_set_member_name(jb, "blocks");
	json_builder_add_int_value(jb, (gint64)d->blocks);
	json_builder_set_member_name(jb, "used_blocks");
	json_builder_add_int_value(jb, (gint64)d->used_blocks);
	json_builder_set_member_name(jb, "free_blocks");
	json_builder_add_int_value(jb, (gint64)(d->blocks -
				   MIN(d->blocks, d->used_blocks)));
	json_builder_set_member_name(jb, "pinned_blocks");
	json_builder_add_int_value(jb, (gint64)d->pinned_blocks);
	json_builder_end_object(jb);
	json_builder_set_member_name(jb, "volumes");
	json_builder_begin_array(jb);
	for (i = 0; i < id->volumes->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(id->volumes, struct backend_volume_info, i);
		const char *p;

		json_builder_begin_object(jb);
		json_builder_set_member_name(jb, "id");
		json_builder_add_int_value(jb, (gint64)v->id);
		json_builder_set_member_name(jb, "name");
		json_builder_add_string_value(jb, v->name);
		json_builder_set_member_name(jb, "type");
		json_builder_add_string_value(jb, volume_kind(v));
		json_builder_set_member_name(jb, "size");
		json_builder_add_int_value(jb, (gint64)v->size);
		json_builder_set_member_name(jb, "mapped_blocks");
		json_builder_add_int_value(jb, (gint64)v->mapped_blocks);
		json_builder_set_member_name(jb, "node");
		json_builder_add_string_value(jb, volume_node(id->base, v, node,
							      sizeof(node)));
		json_builder_set_member_name(jb, "parent");
		p = volume_parent(id->volumes, id->base, v->parent, parent,
				  sizeof(parent));
		if (p)
			json_builder_add_string_value(jb, p);
		else
			json_builder_add_null_value(jb);
		json_builder_set_member_name(jb, "create_generation");
		json_builder_add_int_value(jb, (gint64)v->create_generation);
		json_builder_set_member_name(jb, "created");
		json_builder_add_int_value(jb, (gint64)v->create_time);
		json_builder_end_object(jb);
	}
	json_builder_end_array(jb);
}

/* The migration running on ref's node, if a mount serves it: true with
 * *st filled. */
static bool running_migration(const struct dioloop_image_ref *ref,
			      struct dioloop_migrate_status *st)
{
	g_autoptr(GString) reply = NULL;
	g_autofree char *qnode = NULL;

	if (!ref->ctl || !ref->node)
		return false;
	reply = g_string_new(NULL);
	qnode = g_shell_quote(ref->node);
	if (dioloop_migrate_status_get(ref->ctl, qnode, st, reply) < 0)
		return false;
	return st->dest[0] && (!strcmp(st->state, "copying") ||
			       !strcmp(st->state, "switching"));
}

/* Print info as JSON (the format's details when d). */
static void print_json(const char *path, const struct backend_info *info,
		       const struct image_details *d, const char *volume,
		       const char *migrated_to, const char *protocol,
		       const struct dioloop_migrate_status *mig)
{
	g_autoptr(JsonBuilder) jb = json_builder_new();
	g_autoptr(JsonGenerator) gen = json_generator_new();
	g_autoptr(JsonNode) root = NULL;
	g_autofree char *text = NULL;

	json_builder_begin_object(jb);
	json_builder_set_member_name(jb, "path");
	json_builder_add_string_value(jb, path);
	json_builder_set_member_name(jb, "format");
	json_builder_add_string_value(jb, info->format);
	if (protocol) {
		/* Where the image is: "format" stays what the bytes are. */
		json_builder_set_member_name(jb, "protocol");
		json_builder_add_string_value(jb, protocol);
	}
	json_builder_set_member_name(jb, "size");
	json_builder_add_int_value(jb, (gint64)info->size);
	json_builder_set_member_name(jb, "allocated");
	json_builder_add_int_value(jb, (gint64)info->allocated);
	if (migrated_to) {
		/* The data lives there: format, size and the rest are
		 * the destination's. */
		json_builder_set_member_name(jb, "migrated_to");
		json_builder_begin_object(jb);
		json_builder_set_member_name(jb, "path");
		json_builder_add_string_value(jb, migrated_to);
		json_builder_set_member_name(jb, "format");
		json_builder_add_string_value(jb, info->format);
		if (protocol) {
			json_builder_set_member_name(jb, "protocol");
			json_builder_add_string_value(jb, protocol);
		}
		json_builder_end_object(jb);
	}
	if (mig) {
		json_builder_set_member_name(jb, "migrating");
		json_builder_begin_object(jb);
		json_builder_set_member_name(jb, "dest");
		json_builder_add_string_value(jb, mig->dest);
		json_builder_set_member_name(jb, "format");
		json_builder_add_string_value(jb, mig->format);
		json_builder_set_member_name(jb, "phase");
		json_builder_add_string_value(jb, mig->state);
		json_builder_set_member_name(jb, "copied");
		json_builder_add_int_value(jb, (gint64)mig->done);
		json_builder_set_member_name(jb, "remaining");
		json_builder_add_int_value(jb, (gint64)(mig->total > mig->done ?
						mig->total - mig->done : 0));
		json_builder_end_object(jb);
	}
	if (d)
		add_details_json(jb, d, volume);
	json_builder_end_object(jb);
	root = json_builder_get_root(jb);
	json_generator_set_root(gen, root);
	/* One style for every format: qemu-img's, pretty-printed. */
	json_generator_set_pretty(gen, TRUE);
	text = json_generator_to_data(gen, NULL);
	printf("%s\n", text);
}

int dioloop_cmd_info(int argc, char **argv)
{
	gboolean json_flag = FALSE;
	g_autofree char *output = NULL;
	GOptionEntry entries[] = {
		{ "output", 0, 0, G_OPTION_ARG_STRING, &output,
		  "json (one JSON object, keys in docs/cli.md) or human "
		  "(default)", "FORMAT" },
		{ "json", 0, 0, G_OPTION_ARG_NONE, &json_flag,
		  "the same as --output=json", NULL },
		{ NULL },
	};
	bool json;
	struct dioloop_image_ref ref;
	g_autofree char *migrated_to = NULL, *protocol = NULL;
	g_autofree char *shown_format = NULL;
	struct dioloop_migrate_status mig;
	bool migrating = false;
	struct image_details d = { 0 };
	g_autoptr(GError) error = NULL;
	struct backend_info info;
	const char *type;
	struct backend *b;
	char s1[32], s2[32];
	bool details = false;
	int ret;

	if (!dioloop_parse_args("info", "PATH",
				"Show an image's format, logical size and the "
				"bytes it uses on its host; for a cow image "
				"also its checksum, generation, block use and "
				"volumes.  PATH may be IMAGE@VOLUME, a node "
				"of a mount (read-only: works while mounted) or "
				"an nfs:// URL.",
				entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("info: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!dioloop_parse_output("info", output, json_flag, &json))
		return DIOLOOP_EXIT_USAGE;
	dioloop_cli_logs("info");
	ret = dioloop_image_ref_resolve(argv[1], &ref, &error);
	if (ret < 0) {
		dioloop_err("info: %s", error->message);
		return DIOLOOP_EXIT_USAGE;
	}
	if (backend_is_url(argv[1]) &&
	    backend_check_url(ref.image, true, &error) < 0) {
		dioloop_err("info: %s", error->message);
		dioloop_image_ref_clear(&ref);
		return DIOLOOP_EXIT_USAGE;
	}
	/* A migrated image: the data lives at the destination, and that
	 * is what the node serves. */
	if (dioloop_image_ref_follow("info", argv[1], &ref, &migrated_to) < 0) {
		dioloop_image_ref_clear(&ref);
		return DIOLOOP_EXIT_USAGE;
	}
	ret = dioloop_image_ref_open(&ref, BACKEND_OPEN_RDONLY, &b, &type,
				     &error);
	if (ret < 0) {
		dioloop_err("info: %s", error->message);
		dioloop_image_ref_clear(&ref);
		return DIOLOOP_EXIT_FAIL;
	}
	ret = backend_info(b, &info);
	if (ret < 0) {
		backend_close(b);
		dioloop_err("info: %s: %s", argv[1], g_strerror(-ret));
		goto out;
	}
	/* An image on a protocol (nfs://): the protocol's backend serves
	 * a raw image; a container format says its own name. */
	if (backend_is_url(ref.image)) {
		protocol = g_strndup(ref.image, strcspn(ref.image, ":"));
		if (!strcmp(info.format, protocol))
			g_strlcpy(info.format, "raw", sizeof(info.format));
		shown_format = g_strdup_printf("%s on %s", info.format,
					       protocol);
	} else {
		shown_format = g_strdup(info.format);
	}
	ret = image_details_get(b, ref.image, &d, &error);
	backend_close(b);
	if (ret < 0) {
		dioloop_err("info: %s", error->message);
		goto out;
	}
	details = ret > 0;
	migrating = running_migration(&ref, &mig);
	if (json) {
		print_json(argv[1], &info, details ? &d : NULL, ref.volume,
			   migrated_to, protocol, migrating ? &mig : NULL);
	} else {
		/* Without details: the lines as they always were; with
		 * them: more, aligned. */
		int w = details ? 12 : 11;

		printf("%-*s%s\n%-*s%s\n%-*s%" PRIu64 " (%s)\n%-*s%" PRIu64
		       " (%s)\n", w, "path:", argv[1], w, "format:",
		       shown_format, w, "size:", info.size,
		       dioloop_format_size(info.size, s1, sizeof(s1)),
		       w, "allocated:", info.allocated,
		       dioloop_format_size(info.allocated, s2, sizeof(s2)));
		if (ref.volume)
			printf("%-*s%s\n", w, "volume:", ref.volume);
		if (migrated_to)
			printf("%-*sto %s (%s)\n", w,
			       "migrated:", migrated_to, shown_format);
		if (migrating)
			printf("%-*sto %s (%s): %s, %.0f%% copied\n", w,
			       "migrating:", mig.dest, mig.format, mig.state,
			       mig.total ? 100.0 * (double)mig.done /
					   (double)mig.total : 0.0);
		if (details)
			print_details_text(&d);
	}
out:
	if (d.volumes)
		g_array_free(d.volumes, TRUE);
	g_free(d.base);
	dioloop_image_ref_clear(&ref);
	return ret < 0 ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
}
