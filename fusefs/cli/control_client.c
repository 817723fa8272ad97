/* SPDX-License-Identifier: MIT */
/* Reaching a running mount from the command line (control_client.h). */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/sidecar.h"
#include "fusefs/cli/commands.h"
#include "fusefs/control.h"
#include "fusefs/cli/control_client.h"
#include "fusefs/imagelock.h"
#include "fusefs/mountinfo.h"
#include "fusefs/redirect.h"

#define CTL_REPLY_MAX (4 << 20)	/* a scrub lists every bad block */

void dioloop_ctl_target_clear(struct dioloop_ctl_target *t)
{
	g_free(t->ctl);
	g_free(t->node);
}

char *dioloop_ctl_of(const char *dir)
{
	char *ctl = g_build_filename(dir, DIOLOOP_CTL_DIR, "ctl", NULL);
	struct stat st;

	if (stat(ctl, &st) == 0 && S_ISREG(st.st_mode))
		return ctl;
	g_free(ctl);
	return NULL;
}

bool dioloop_ctl_resolve(const char *cmd, const char *arg,
			 struct dioloop_ctl_target *t)
{
	g_autofree char *real = realpath(arg, NULL);
	g_autofree char *dir = NULL;
	struct stat st;

	*t = (struct dioloop_ctl_target){ 0 };
	if (!real || stat(real, &st) < 0) {
		dioloop_err("%s: %s: %s", cmd, arg, g_strerror(errno));
		return false;
	}
	if (S_ISDIR(st.st_mode)) {
		t->ctl = dioloop_ctl_of(real);
	} else {
		dir = g_path_get_dirname(real);
		t->ctl = dioloop_ctl_of(dir);
		if (t->ctl)
			t->node = g_path_get_basename(real);
	}
	if (!t->ctl) {
		dioloop_err("%s: %s is neither a dioloop mount point nor a node "
			    "in one", cmd, arg);
		return false;
	}
	return true;
}

int dioloop_ctl_send(const char *ctl, const char *line, GString *reply)
{
	char buf[4096];
	ssize_t n;
	off_t off = 0;
	int fd = open(ctl, O_RDWR | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, line, strlen(line), 0) < 0)
		ret = -errno;
	while (reply->len < CTL_REPLY_MAX &&
	       (n = pread(fd, buf, sizeof(buf), off)) > 0) {
		g_string_append_len(reply, buf, n);
		off += n;
	}
	close(fd);
	return ret;
}

int dioloop_ctl_run(const char *cmd, const struct dioloop_ctl_target *t,
		    const char *line)
{
	g_autoptr(GString) reply = g_string_new(NULL);
	int ret = dioloop_ctl_send(t->ctl, line, reply);

	if (ret < 0) {
		g_strchomp(reply->str);
		if (reply->str[0])
			dioloop_err("%s", reply->str);
		else
			dioloop_err("%s: %s: %s", cmd, t->ctl, g_strerror(-ret));
		return ret == -EINVAL ? DIOLOOP_EXIT_USAGE : DIOLOOP_EXIT_FAIL;
	}
	fputs(reply->str, stdout);
	return DIOLOOP_EXIT_OK;
}

/* ---- migrate-status ---- */

static uint64_t field(const char *line, const char *key)
{
	g_autofree char *pat = g_strdup_printf(" %s=", key);
	const char *p = strstr(line, pat);

	return p ? g_ascii_strtoull(p + strlen(pat), NULL, 10) : 0;
}

static void parse_status(const char *reply, struct dioloop_migrate_status *st)
{
	g_auto(GStrv) lines = g_strsplit(reply, "\n", -1);
	guint i;

	memset(st, 0, sizeof(*st));
	if (!lines[0])
		return;
	sscanf(lines[0], "%15s", st->state);
	st->done = field(lines[0], "done");
	st->total = field(lines[0], "total");
	st->dirty = field(lines[0], "dirty");
	st->passes = field(lines[0], "passes");
	st->retried = field(lines[0], "retried");
	st->failed = field(lines[0], "failed");
	st->bad = field(lines[0], "bad");
	st->rate = field(lines[0], "rate");
	st->elapsed_ms = field(lines[0], "elapsed_ms");
	for (i = 1; lines[i]; i++) {
		const char *sp;

		if (g_str_has_prefix(lines[i], "message: "))
			g_strlcpy(st->message, lines[i] + 9,
				  sizeof(st->message));
		else if (g_str_has_prefix(lines[i], "dest: ") &&
			 (sp = strchr(lines[i] + 6, ' '))) {
			g_strlcpy(st->format, lines[i] + 6,
				  MIN(sizeof(st->format),
				      (size_t)(sp - lines[i] - 6) + 1));
			g_strlcpy(st->dest, sp + 1, sizeof(st->dest));
		}
	}
}


int dioloop_migrate_status_get(const char *ctl, const char *qnode,
			       struct dioloop_migrate_status *st,
			       GString *reply)
{
	g_autofree char *line = g_strdup_printf("migrate-status %s\n", qnode);
	int ret = dioloop_ctl_send(ctl, line, reply);

	if (ret < 0)
		return ret;
	parse_status(reply->str, st);
	return 0;
}

/* ---- which mount serves an image ---- */

/*
 * Look through the dioloop mounts: the one mounted at mountpoint (when not
 * NULL; its source in *source), or the one serving source (its mount
 * point in *mountpoint_out).  True when found.
 */
static bool find_dioloop_mount(const char *mountpoint, const char *source,
			       char **source_out, char **mountpoint_out)
{
	g_autoptr(GArray) mounts = dioloop_mountinfo_read();
	guint i;

	for (i = 0; mounts && i < mounts->len; i++) {
		const struct dioloop_mountinfo *m =
			&g_array_index(mounts, struct dioloop_mountinfo, i);
		const char *src = m->source;

		if (strcmp(m->fstype, DIOLOOP_FSTYPE) ||
		    !g_str_has_prefix(src, DIOLOOP_FSNAME_PREFIX))
			continue;
		src += strlen(DIOLOOP_FSNAME_PREFIX);
		if (mountpoint && !strcmp(m->mountpoint, mountpoint)) {
			*source_out = g_strdup(src);
			return true;
		}
		if (source && !strcmp(src, source)) {
			g_autofree char *ctl = dioloop_ctl_of(m->mountpoint);

			if (!ctl)
				continue;	/* not ours to see, or stale */
			*mountpoint_out = g_strdup(m->mountpoint);
			return true;
		}
	}
	return false;
}

void dioloop_image_ref_clear(struct dioloop_image_ref *ref)
{
	g_free(ref->image);
	g_free(ref->volume);
	g_free(ref->node);
	g_free(ref->ctl);
	g_free(ref->mountpoint);
	*ref = (struct dioloop_image_ref){ 0 };
}

/* True when image (a path) has a redirect file beside it: a migrated
 * image, which may have been removed after the switch. */
static bool has_redirect(const char *image)
{
	g_autofree char *dir = g_path_get_dirname(image);
	g_autofree char *base = g_path_get_basename(image);
	g_autofree char *name = dioloop_redirect_name(base);
	g_autofree char *path = g_build_filename(dir, name, NULL);
	struct stat st;

	return lstat(path, &st) == 0;
}

char *dioloop_image_ref_redirect(const struct dioloop_image_ref *ref)
{
	g_autofree char *dir = NULL, *base = NULL, *name = NULL;
	char buf[DIOLOOP_REDIRECT_MAX + 1];
	struct dioloop_redirect r;
	struct stat st;
	char *dest = NULL;
	ssize_t n;
	int dirfd;

	if (!ref->image || backend_is_url(ref->image))
		return NULL;
	dir = g_path_get_dirname(ref->image);
	base = g_path_get_basename(ref->image);
	name = dioloop_redirect_name(base);
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return NULL;
	n = sidecar_read(dirfd, name, buf, sizeof(buf), NULL);
	if (n <= 0 || (size_t)n >= DIOLOOP_REDIRECT_MAX ||
	    strlen(buf) != (size_t)n || dioloop_redirect_parse(buf, &r) < 0) {
		close(dirfd);
		return NULL;
	}
	/* As the daemon: for this image, which is still the file
	 * migrated (or gone), to a target that is still the file made. */
	if (strcmp(r.name, base))
		goto out;
	if (fstatat(dirfd, base, &st, 0) == 0 &&
	    ((uint64_t)st.st_dev != r.image_dev ||
	     (uint64_t)st.st_ino != r.image_ino))
		goto out;
	if ((r.target_dev || r.target_ino) &&
	    (lstat(r.path, &st) < 0 || !S_ISREG(st.st_mode) ||
	     (uint64_t)st.st_dev != r.target_dev ||
	     (uint64_t)st.st_ino != r.target_ino))
		goto out;
	dest = g_steal_pointer(&r.path);
out:
	dioloop_redirect_clear(&r);
	close(dirfd);
	return dest;
}

int dioloop_image_ref_follow(const char *cmd, const char *arg,
			     struct dioloop_image_ref *ref,
			     char **migrated_to)
{
	char *dest = dioloop_image_ref_redirect(ref);

	if (migrated_to)
		*migrated_to = NULL;
	if (dest) {
		g_free(ref->image);
		ref->image = g_strdup(dest);
		if (migrated_to)
			*migrated_to = dest;
		else
			g_free(dest);
		return 0;
	}
	if (!ref->volume && !backend_is_url(arg) && access(arg, F_OK) < 0 &&
	    errno == ENOENT) {
		/* Only a redirect we do not believe is left of it. */
		dioloop_err("%s: %s: %s", cmd, arg, g_strerror(ENOENT));
		return -ENOENT;
	}
	return 0;
}

/* A node of a mount at dir: online; the image in the mount's source. */
static void resolve_node(const char *dir, const char *name, char *ctl,
			 struct dioloop_image_ref *ref)
{
	g_autofree char *source = NULL, *path = NULL;
	const char *at;
	struct stat st;

	ref->ctl = ctl;
	ref->mountpoint = g_strdup(dir);
	ref->node = g_strdup(name);
	if (!find_dioloop_mount(dir, NULL, &source, NULL))
		return;
	path = g_build_filename(source, name, NULL);
	/* A migrated image: maybe removed after the switch. */
	if (stat(path, &st) == 0 || has_redirect(path)) {
		ref->image = g_steal_pointer(&path);
		return;
	}
	at = strrchr(name, '@');
	if (!at)
		return;
	g_free(path);
	path = g_strndup(name, at - name);
	ref->image = g_build_filename(source, path, NULL);
	ref->volume = g_strdup(at + 1);
}

/* An existing file real (absolute_path): a node, or an image file. */
static void resolve_existing(const char *real, struct dioloop_image_ref *ref)
{
	g_autofree char *dir = g_path_get_dirname(real);
	g_autofree char *name = g_path_get_basename(real);
	char *ctl = dioloop_ctl_of(dir), *mnt = NULL;

	if (ctl) {
		resolve_node(dir, name, ctl, ref);
		return;
	}
	ref->image = g_strdup(real);
	ref->node = g_steal_pointer(&name);
	if (find_dioloop_mount(NULL, dir, NULL, &mnt)) {
		ref->mountpoint = mnt;
		ref->ctl = dioloop_ctl_of(mnt);
	}
}

/* The absolute path of the existing file p, with its directory resolved
 * but not its own name (an image may be a symlink in a mount's source,
 * served under its own name); NULL with errno when p does not exist. */
static char *absolute_path(const char *p)
{
	g_autofree char *dir = NULL, *base = NULL, *real_dir = NULL;
	struct stat st;

	if (lstat(p, &st) < 0)
		return NULL;
	if (S_ISDIR(st.st_mode))
		return realpath(p, NULL);
	dir = g_path_get_dirname(p);
	base = g_path_get_basename(p);
	real_dir = realpath(dir, NULL);
	if (!real_dir)
		return NULL;
	return g_build_filename(real_dir, base, NULL);
}

/*
 * Another user's symlink is not followed to a file of someone else's
 * (root's links are): like the kernel's rule for sticky directories
 * (fs.protected_symlinks), for every symlink on path, wherever it lives.
 * A user who can write a shared SOURCE must not make a command of
 * root's (convert, snapshot, check) reach a file of root's outside it.
 * The path is checked as it is now: a link swapped between this check
 * and the open is not caught (the daemon's own opens resolve inside
 * SOURCE, race-free).  0, or -EPERM with *error.
 */
int dioloop_path_symlinks_trusted(const char *path, GError **error)
{
	g_autofree char *prefix = g_strdup(path);
	size_t i, n = strlen(prefix);

	for (i = 1; i <= n; i++) {
		struct stat link, target;
		char c = prefix[i];

		if (c != '/' && c != '\0')
			continue;
		prefix[i] = '\0';
		if (lstat(prefix, &link) < 0) {
			prefix[i] = c;
			return 0;	/* the rest does not exist */
		}
		if (S_ISLNK(link.st_mode) && link.st_uid != 0 &&
		    link.st_uid != geteuid() && stat(prefix, &target) == 0 &&
		    link.st_uid != target.st_uid) {
			g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_PERM,
				    "%s%s%s is a symlink of user %u to a file of user %u: not followed (another user's link)",
				    c ? path : "", c ? ": " : "", prefix,
				    (unsigned int)link.st_uid,
				    (unsigned int)target.st_uid);
			return -EPERM;
		}
		prefix[i] = c;
	}
	return 0;
}

int dioloop_image_ref_resolve(const char *arg, struct dioloop_image_ref *ref,
			      GError **error)
{
	g_autofree char *real = NULL, *left = NULL, *left_real = NULL;
	g_autofree char *base = NULL;
	const char *slash = strrchr(arg, '/');
	const char *at = strrchr(slash ? slash : arg, '@');
	int err;

	*ref = (struct dioloop_image_ref){ 0 };
	if (backend_is_url(arg)) {
		/* A URL: served by its backend, never by a mount here.  Its
		 * options (after '?') may hold '/' and '@' (conf=/etc/...).
		 * The volume is "@NAME" at the end of the path before them
		 * (IMAGE@NAME?OPTS), or at the very end (IMAGE?OPTS@NAME,
		 * NAME without '/', '=' or '&'); the options stay with the
		 * image. */
		g_autofree char *path = g_strndup(arg, strcspn(arg, "?"));
		const char *query = arg + strlen(path);
		const char *last = strrchr(path, '/');
		const char *vol = strrchr(last ? last : path, '@');
		const char *tail = *query ? strrchr(query, '@') : NULL;

		if (vol) {
			ref->image = g_strdup_printf("%.*s%s", (int)(vol - path),
						     path, query);
			ref->volume = g_strdup(vol + 1);
		} else if (tail && tail[1] && !tail[strcspn(tail, "/=&")]) {
			ref->image = g_strndup(arg, tail - arg);
			ref->volume = g_strdup(tail + 1);
		} else {
			ref->image = g_strdup(arg);
		}
		/* The node name: the image's, without the URL's options. */
		ref->node = vol ? g_path_get_basename(path) :
			      g_strdup_printf("%s%s%s", last ? last + 1 : path,
					      ref->volume ? "@" : "",
					      ref->volume ? ref->volume : "");
		return 0;
	}
	if ((err = dioloop_path_symlinks_trusted(arg, error)) < 0)
		return err;
	real = absolute_path(arg);
	if (!real && errno == ENOENT && has_redirect(arg)) {
		/* An image migrated away and removed: its redirect stays. */
		g_autofree char *d = g_path_get_dirname(arg);
		g_autofree char *rd = realpath(d, NULL);

		base = g_path_get_basename(arg);
		if (rd)
			real = g_build_filename(rd, base, NULL);
		g_clear_pointer(&base, g_free);
		errno = ENOENT;
	}
	if (real) {
		resolve_existing(real, ref);
		return 0;
	}
	err = errno;
	if (at && at[1]) {
		left = g_strndup(arg, at - arg);
		if (dioloop_path_symlinks_trusted(left, error) < 0)
			return -EPERM;
		left_real = absolute_path(left);
	}
	if (!left_real) {
		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
			    "%s: %s", arg, g_strerror(err));
		return -err;
	}
	/* IMAGE@VOLUME, IMAGE an image file or a node. */
	resolve_existing(left_real, ref);
	if (ref->volume) {
		g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOENT,
			    "%s: no such node", arg);
		dioloop_image_ref_clear(ref);
		return -ENOENT;
	}
	ref->volume = g_strdup(at + 1);
	g_free(ref->node);
	base = g_path_get_basename(left_real);
	ref->node = g_strdup_printf("%s@%s", base, at + 1);
	return 0;
}

int dioloop_image_ref_open(const struct dioloop_image_ref *ref,
			   unsigned int flags, struct backend **b,
			   const char **type, GError **error)
{
	g_autoptr(GError) reason = NULL;
	struct backend_open_args args = {
		.path = ref->image,
		.flags = flags,
		.volume = ref->volume,
		.error = &reason,
	};
	bool no_volume;
	int ret;

	*type = "raw";
	if (!ref->image)
		return backend_set_error(error, -ENOENT,
					 "%s: cannot tell which image the node is (its mount's source is not visible here)",
					 ref->node);
	*type = backend_probe(ref->image);
	if (!*type) {
		*type = "raw";
		backend_for_url(ref->image, error);
		return -EPROTONOSUPPORT;
	}
	ret = backend_open(*type, &args, b);
	if (ret < 0 && reason && backend_is_url(ref->image)) {
		/* The server's answer or the URL's fault: the one line. */
		g_propagate_error(error, g_steal_pointer(&reason));
		return ret;
	}
	/* A local image: the backend's line first, as a warning, then the
	 * summary below; a missing volume, the summary alone (one line). */
	no_volume = ret == -ENOENT && ref->volume && ref->volume[0] &&
		    access(ref->image, F_OK) == 0;
	if (reason && !no_volume)
		g_warning("%s", reason->message);
	if (no_volume) {
		if (strcmp(*type, "cow"))
			backend_set_error(error, ret, "%s is a %s image: it has no volume '%s'",
					  ref->image, *type, ref->volume);
		else
			backend_set_error(error, ret, "%s: no volume '%s'",
					  ref->image, ref->volume);
	} else if (ret == -EBUSY) {
		backend_set_error(error, ret, "%s: in use (open for writing by another process)",
				  ref->image);
	} else if (ret < 0) {
		backend_set_error(error, ret, "%s: %s", ref->image,
				  g_strerror(-ret));
	}
	return ret;
}

int dioloop_image_ref_lock(const char *cmd, const struct dioloop_image_ref *ref,
			   bool readonly, int *lock_fd, char **holder)
{
	int ret;

	*lock_fd = -1;
	*holder = NULL;
	if (!ref->image || backend_is_url(ref->image))
		return 0;
	ret = dioloop_image_lock_path(ref->image, &readonly, lock_fd, holder);
	if (ret < 0 && ret != -EBUSY && ret != -ENOENT)
		dioloop_err("%s: %s: %s", cmd, ref->image, g_strerror(-ret));
	return ret;
}
