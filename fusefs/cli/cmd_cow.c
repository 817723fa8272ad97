/* SPDX-License-Identifier: MIT */
/*
 * dioloop check / scrub / snapshot / clone: the cow image tools.  Each
 * works offline on an image file or URL (opened here, under the image
 * lock the daemon takes, or an rbd image's exclusive lock, so never
 * behind a daemon's back) or, for an image that a
 * running mount serves (or one of its nodes), online through the mount's
 * ctl (control_client.h).  A command-line process: the main thread, plus one
 * thread that waits for an online scrub.
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/size.h"
#include "backends/volume.h"
#include "fusefs/cli/commands.h"
#include "fusefs/lograte.h"
#include "fusefs/cli/control_client.h"
#include "fusefs/cli/progress.h"

#define SCRUB_POLL_US (200 * 1000)

/* ---- shared ---- */

/* Resolve arg (IMAGE[@VOLUME] or a node), following a migrated image
 * to where it lives now, as info does: true, or false after a
 * message. */
static bool resolve(const char *cmd, const char *arg,
		    struct dioloop_image_ref *ref)
{
	g_autoptr(GError) error = NULL;

	if (dioloop_image_ref_resolve(arg, ref, &error) < 0) {
		dioloop_err("%s: %s", cmd, error->message);
		return false;
	}
	if (dioloop_image_ref_follow(cmd, arg, ref, NULL) < 0) {
		dioloop_image_ref_clear(ref);
		return false;
	}
	return true;
}

/* What lock_image holds: a local image's lock, or the open store of an
 * image at a URL. */
struct image_lock {
	int fd;				/* -1: none */
	struct backend *store;		/* NULL: none */
};

/*
 * An image at a URL, checked or scrubbed: the URL's store opened for
 * writing, as the daemon serving the image opens it, and held until the
 * command ends.  A store with a writers' lock takes it there (rbd: the
 * image's exclusive lock, which a daemon serving the image holds); one
 * without (nfs) only shows the image is there.  Nothing is written
 * through it.  A store that cannot be opened for writing here (no
 * permission; rbd: no exclusive-lock feature) cannot be served for
 * writing by a daemon either: the read goes on without it.  0 with
 * *store (NULL then), or -errno after a message.
 */
static int lock_url(const char *cmd, const char *url, struct backend **store)
{
	g_autoptr(GError) error = NULL;
	const struct backend_ops *ops = backend_for_url(url, &error);
	struct backend_open_args args = {
		.path = url,
		.flags = BACKEND_OPEN_STORE,
		.error = &error,
	};
	int ret;

	*store = NULL;
	if (!ops) {
		dioloop_err("%s: %s", cmd, error->message);
		return -EPROTONOSUPPORT;
	}
	ret = backend_open(ops->name, &args, store);
	if (ret == -EACCES || ret == -EROFS || ret == -EPERM ||
	    ret == -EOPNOTSUPP) {
		*store = NULL;
		return 0;
	}
	if (ret < 0) {
		*store = NULL;
		if (error)
			dioloop_err("%s: %s", cmd, error->message);
		else
			dioloop_err("%s: %s: %s", cmd, url, g_strerror(-ret));
	}
	return ret;
}

/*
 * Take the image lock of ref's image (a write lock unless readonly), as
 * the daemon does for every image it serves: 0 with *lock (unlock_image
 * lets go), or -errno after a message (-EBUSY: a daemon or another
 * process holds a conflicting lock).  An image at a URL: readonly, its
 * store's lock (lock_url); else nothing, as the open for writing that
 * follows takes the store's lock itself.
 */
static int lock_image(const char *cmd, const struct dioloop_image_ref *ref,
		      bool readonly, struct image_lock *lock)
{
	g_autofree char *holder = NULL;
	int ret;

	*lock = (struct image_lock){ .fd = -1 };
	if (ref->image && backend_is_url(ref->image))
		return readonly ? lock_url(cmd, ref->image, &lock->store) : 0;
	ret = dioloop_image_ref_lock(cmd, ref, readonly, &lock->fd, &holder);
	if (ret == -EBUSY)
		dioloop_err("%s: %s is in use by %s", cmd, ref->image, holder);
	else if (ret == -ENOENT)
		dioloop_err("%s: %s: %s", cmd, ref->image, g_strerror(-ret));
	return ret;
}

static void unlock_image(struct image_lock *lock)
{
	if (lock->fd >= 0)
		close(lock->fd);
	if (lock->store)
		backend_close(lock->store);
	*lock = (struct image_lock){ .fd = -1 };
}

static bool has_volumes(const char *type);

/* A command on the whole container (check, scrub) named IMAGE@VOLUME:
 * that volume must exist all the same, or a typo would pass for clean.
 * true, or false after the one line. */
static bool named_volume_exists(const char *cmd,
				const struct dioloop_image_ref *ref,
				const char *type)
{
	g_autoptr(GError) error = NULL;
	const char *t;
	struct backend *b;

	if (!ref->volume || !ref->volume[0])
		return true;
	if (!has_volumes(type)) {
		dioloop_err("%s: %s is a %s image: it has no volume '%s'", cmd,
			    ref->image, type, ref->volume);
		return false;
	}
	if (dioloop_image_ref_open(ref, BACKEND_OPEN_RDONLY, &b, &t,
				   &error) < 0) {
		dioloop_err("%s: %s", cmd, error->message);
		return false;
	}
	backend_close(b);
	return true;
}

/* Whether the backend called type has volumes, snapshots, scrub and
 * check (backends/volume.h). */
static bool has_volumes(const char *type)
{
	const struct backend_ops *ops = backend_lookup(type);

	return ops && ops->volumes;
}

/* Whether the image at url can be opened (read-only): true, or false
 * after a message with the store's reason. */
static bool url_image_exists(const char *cmd, const char *url)
{
	g_autoptr(GError) error = NULL;
	const struct backend_ops *ops = backend_for_url(url, &error);
	struct backend_open_args args = {
		.path = url,
		.flags = BACKEND_OPEN_STORE | BACKEND_OPEN_RDONLY,
		.error = &error,
	};
	struct backend *b;
	int ret = ops ? backend_open(ops->name, &args, &b) : -EPROTONOSUPPORT;

	if (ret == 0) {
		backend_close(b);
		return true;
	}
	if (error)
		dioloop_err("%s: %s", cmd, error->message);
	else
		dioloop_err("%s: %s: %s", cmd, url, g_strerror(-ret));
	return false;
}

/* The backend that would open ref's image ("cow", "raw", "rbd"), or
 * NULL after a message when the image cannot be read. */
static const char *probe_image(const char *cmd,
			       const struct dioloop_image_ref *ref)
{
	struct stat st;

	if (!ref->image) {
		dioloop_err("%s: %s: cannot tell which image the node is", cmd,
			    ref->node);
		return NULL;
	}
	if (!backend_is_url(ref->image)) {
		if (stat(ref->image, &st) < 0 || access(ref->image, R_OK) < 0) {
			dioloop_err("%s: %s: %s", cmd, ref->image,
				    g_strerror(errno));
			return NULL;
		}
		if (!S_ISREG(st.st_mode)) {
			dioloop_err("%s: %s: not an image file", cmd,
				    ref->image);
			return NULL;
		}
	}
	return backend_probe(ref->image);
}

/*
 * The format check and scrub see in ref's image ("cow", "raw"), or NULL
 * after a message when the image cannot be read.  An image at a URL
 * that holds no format of its own is the protocol's raw image (as info
 * says: raw on rbd), with nothing of dioloop's to check.
 */
static const char *probe_format(const char *cmd,
				const struct dioloop_image_ref *ref)
{
	const char *type = probe_image(cmd, ref);
	const struct backend_ops *proto;

	if (!type || !backend_is_url(ref->image))
		return type;
	proto = backend_for_url(ref->image, NULL);
	if (!proto || strcmp(type, proto->name))
		return type;
	/* The probe is silent: a raw image, or none at all. */
	return url_image_exists(cmd, ref->image) ? "raw" : NULL;
}

/* Send "WORD NODE [ARG]" to ref's mount; 0 with the reply, or -errno
 * after a message (the daemon's own when it gave one). */
static int online(const char *cmd, const struct dioloop_image_ref *ref,
		  const char *word, const char *node, const char *arg,
		  GString *reply)
{
	g_autofree char *qn = g_shell_quote(node);
	g_autofree char *qa = arg ? g_shell_quote(arg) : NULL;
	g_autofree char *line = g_strdup_printf("%s %s%s%s\n", word, qn,
						qa ? " " : "", qa ? qa : "");
	int ret = dioloop_ctl_send(ref->ctl, line, reply);

	if (ret < 0) {
		g_strchomp(reply->str);
		if (reply->str[0])
			dioloop_err_reply(cmd, word, reply->str, ret);
		else
			dioloop_err("%s: %s (mounted at %s): %s", cmd, node,
				    ref->mountpoint, g_strerror(-ret));
	}
	return ret;
}

/* The exit status for what online() returned: the daemon refuses bad
 * arguments with EINVAL. */
static int online_status(int ret)
{
	return ret == -EINVAL ? DIOLOOP_EXIT_USAGE :
	       ret < 0 ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
}

/* ---- check ---- */

/* Collect a problem line (backend_check_report_fn). */
static void check_report(void *opaque, const char *msg)
{
	g_ptr_array_add(opaque, g_strdup(msg));
}

int dioloop_cmd_check(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };
	g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);
	struct dioloop_image_ref ref;
	struct backend_check_result res;
	g_autoptr(GError) error = NULL;
	struct image_lock lock = { .fd = -1 };
	const char *type;
	int ret, status = DIOLOOP_EXIT_USAGE;
	guint i;

	if (!dioloop_parse_args("check", "PATH",
				"Verify all metadata of a cow image (both "
				"superblocks, every metadata page, the reference "
				"counts): the problems one per line, then a "
				"summary.  Exit status 0: clean; 1: errors found; "
				"2: could not check.  The image must not be "
				"mounted.", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("check: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	dioloop_cli_logs("check");
	if (!resolve("check", argv[1], &ref))
		return DIOLOOP_EXIT_USAGE;
	type = probe_format("check", &ref);
	if (!type)
		goto out;
	if (!named_volume_exists("check", &ref, type)) {
		status = DIOLOOP_EXIT_FAIL;
		goto out;
	}
	if (!has_volumes(type)) {
		printf("%s: a %s image: no metadata to check\n", argv[1], type);
		status = DIOLOOP_EXIT_OK;
		goto out;
	}
	if (ref.ctl) {
		dioloop_err("check: %s is served by the mount at %s: unmount it "
			    "first (scrub works while mounted)", ref.image,
			    ref.mountpoint);
		goto out;
	}
	if (lock_image("check", &ref, true, &lock) < 0)
		goto out;
	ret = backend_volume_check(backend_lookup(type), ref.image, 0, &res,
				   check_report, lines, &error);
	if (ret < 0) {
		dioloop_err("check: %s: cannot check: %s", ref.image,
			    error->message);
		goto out;
	}
	/* A problem line may quote what the image holds (a volume's name):
	 * no control byte reaches the terminal. */
	for (i = 0; i < lines->len; i++) {
		g_autofree char *line = dioloop_escape_controls(lines->pdata[i]);

		printf("%s: %s\n", argv[1], line);
	}
	if (res.errors > lines->len)
		printf("%s: ... and %" PRIu64 " more problems\n", argv[1],
		       res.errors - lines->len);
	printf("%s: generation %" PRIu64 ", %" PRIu64 " volume%s, %" PRIu64
	       " metadata pages, %" PRIu64 " data blocks, %" PRIu64 " of %"
	       PRIu64 " blocks used: ", argv[1], res.generation, res.volumes,
	       res.volumes == 1 ? "" : "s", res.pages, res.data_blocks,
	       res.used_blocks, res.nr_blocks);
	if (res.errors)
		printf("%" PRIu64 " errors (%" PRIu64 " leaked blocks)\n",
		       res.errors, res.leaked);
	else
		printf("clean\n");
	status = res.errors ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
out:
	unlock_image(&lock);
	dioloop_image_ref_clear(&ref);
	return status;
}

/* ---- scrub ---- */

struct scrub_state {
	struct dioloop_progress bar;
	GString *bad;			/* "bad block: ..." lines */
	uint64_t nr_bad;
	gint64 start_us;
	uint64_t rate;			/* --rate, bytes/s; 0: no limit */
};

/* The bad-block line for volume (the default: "-"). */
static void add_bad(struct scrub_state *s, const char *volume, uint64_t lbn,
		    uint64_t pbn, bool csum)
{
	g_string_append_printf(s->bad, "bad block: volume %s lbn %" PRIu64
			       " pbn %" PRIu64 " (%s)\n",
			       volume && volume[0] ? volume : "-", lbn, pbn,
			       csum ? "checksum mismatch" : "read error");
	s->nr_bad++;
}

static bool scrub_progress(void *opaque,
			   const struct backend_scrub_progress *p)
{
	struct scrub_state *s = opaque;

	dioloop_progress_set_total(&s->bar, p->total);
	dioloop_progress_update(&s->bar, p->done);
	backend_scrub_pace(s->start_us, p, s->rate);
	return true;
}

static void scrub_bad(void *opaque, const struct backend_bad_block *bad)
{
	add_bad(opaque, bad->volume, bad->lbn, bad->pbn,
		bad->error == -EBADMSG);
}

/* Scrub ref's image here: the exit status. */
static int scrub_offline(const char *arg, struct dioloop_image_ref *ref,
			 bool force, uint64_t rate)
{
	struct scrub_state s = { .bad = g_string_new(NULL), .rate = rate };
	struct dioloop_image_ref whole = { .image = ref->image };
	struct backend_scrub_progress res = { 0 };
	g_autoptr(GError) error = NULL;
	g_autoptr(GError) open_error = NULL;
	struct image_lock lock;
	int ret, status = DIOLOOP_EXIT_USAGE;
	const char *type;
	struct backend *b;

	if (lock_image("scrub", ref, true, &lock) < 0)
		goto out;
	/* The whole container, whatever volume was named. */
	ret = dioloop_image_ref_open(&whole, BACKEND_OPEN_RDONLY, &b, &type,
				     &open_error);
	if (ret < 0) {
		dioloop_err("scrub: %s", open_error->message);
		goto out;
	}
	dioloop_progress_begin(&s.bar, "scrub", DIOLOOP_PROGRESS_BLOCKS, 0,
			       force);
	s.start_us = g_get_monotonic_time();
	ret = backend_volume_scrub(b, scrub_progress, scrub_bad, &s, &res,
				   &error);
	s.bar.done = res.done;
	dioloop_progress_end(&s.bar, ret == 0);
	backend_close(b);
	fputs(s.bad->str, stdout);
	if (ret < 0) {
		dioloop_err("scrub: %s: %s", ref->image, error->message);
		goto out;
	}
	printf("%s: scrubbed %" PRIu64 " blocks, %" PRIu64 " bad\n",
	       arg, res.done, res.bad);
	status = res.bad || s.nr_bad ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
out:
	unlock_image(&lock);
	g_string_free(s.bad, TRUE);
	return status;
}

/* An online scrub in progress: the thread that sent "scrub NODE". */
struct scrub_call {
	const char *ctl;
	char *line;
	GString *reply;
	int ret;
	gint done;			/* atomic: the reply is in */
};

static gpointer scrub_thread(gpointer opaque)
{
	struct scrub_call *c = opaque;

	c->ret = dioloop_ctl_send(c->ctl, c->line, c->reply);
	g_atomic_int_set(&c->done, 1);
	return NULL;
}

/* Poll "scrub-status NODE" into the bar until the scrub call returns. */
static void scrub_poll(struct dioloop_image_ref *ref, struct scrub_call *c,
		       struct dioloop_progress *bar)
{
	g_autofree char *q = g_shell_quote(ref->node);
	g_autofree char *line = g_strdup_printf("scrub-status %s\n", q);
	g_autoptr(GString) reply = g_string_new(NULL);
	uint64_t done, total, bad;

	while (!g_atomic_int_get(&c->done)) {
		g_usleep(SCRUB_POLL_US);
		g_string_truncate(reply, 0);
		if (dioloop_ctl_send(ref->ctl, line, reply) < 0)
			continue;
		if (sscanf(reply->str, "running %" SCNu64 " %" SCNu64 " %"
			   SCNu64, &done, &total, &bad) == 3) {
			dioloop_progress_set_total(bar, total);
			dioloop_progress_update(bar, done);
		}
	}
}

/* Scrub through the mount serving ref: the exit status. */
static int scrub_online(const char *arg, struct dioloop_image_ref *ref,
			bool force, uint64_t rate)
{
	g_autofree char *q = g_shell_quote(ref->node);
	struct scrub_call c = { .ctl = ref->ctl, .reply = g_string_new(NULL) };
	struct scrub_state s = { .bad = g_string_new(NULL) };
	uint64_t done = 0, bad = 0, lbn, pbn;
	char vol[BACKEND_VOLUME_NAME_MAX + 2], kind[16];
	int status = DIOLOOP_EXIT_USAGE;
	g_auto(GStrv) lines = NULL;
	GThread *t;
	char **l;

	c.line = rate ? g_strdup_printf("scrub %s rate=%" PRIu64 "\n", q, rate) :
			g_strdup_printf("scrub %s\n", q);
	dioloop_progress_begin(&s.bar, "scrub", DIOLOOP_PROGRESS_BLOCKS, 0,
			       force);
	t = g_thread_new("scrub", scrub_thread, &c);
	scrub_poll(ref, &c, &s.bar);
	g_thread_join(t);
	lines = g_strsplit(c.reply->str, "\n", -1);
	if (c.ret == 0 && lines[0] &&
	    sscanf(lines[0], "scrubbed %" SCNu64 " blocks, %" SCNu64 " bad",
		   &done, &bad) == 2)
		s.bar.done = done;
	dioloop_progress_end(&s.bar, c.ret == 0);
	if (c.ret < 0) {
		g_strchomp(c.reply->str);
		if (c.reply->str[0])
			dioloop_err_reply("scrub", "scrub", c.reply->str,
					  c.ret);
		else
			dioloop_err("scrub: %s (mounted at %s): %s", ref->node,
				    ref->mountpoint, g_strerror(-c.ret));
		goto out;
	}
	if (!lines[0] || !g_str_has_prefix(lines[0], "scrubbed ")) {
		dioloop_err("scrub: unexpected reply from the mount at %s: %s",
			    ref->mountpoint, lines[0] ? lines[0] : "");
		goto out;
	}
	for (l = lines + 1; *l; l++)
		if (sscanf(*l, "bad %40s %" SCNu64 " %" SCNu64 " %15s", vol,
			   &lbn, &pbn, kind) == 4)
			add_bad(&s, vol, lbn, pbn, !strcmp(kind, "checksum"));
	fputs(s.bad->str, stdout);
	printf("%s: scrubbed %" PRIu64 " blocks, %" PRIu64 " bad\n",
	       arg, done, bad);
	status = bad || s.nr_bad ? DIOLOOP_EXIT_FAIL : DIOLOOP_EXIT_OK;
out:
	g_free(c.line);
	g_string_free(c.reply, TRUE);
	g_string_free(s.bad, TRUE);
	return status;
}

int dioloop_cmd_scrub(int argc, char **argv)
{
	gboolean progress = FALSE;
	g_autofree char *rate_arg = NULL;
	GOptionEntry entries[] = {
		{ "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
		  "draw the progress bar even when stderr is no terminal",
		  NULL },
		{ "rate", 'r', 0, G_OPTION_ARG_STRING, &rate_arg,
		  "read at most RATE bytes per second (K/M/G suffixes: 64M), "
		  "to leave the disk to the image's users", "RATE" },
		{ NULL },
	};
	struct dioloop_image_ref ref;
	int status = DIOLOOP_EXIT_USAGE;
	uint64_t rate = 0;
	const char *type;

	if (!dioloop_parse_args("scrub", "PATH",
				"Read every data block of every volume of a cow "
				"image and verify its checksum; list the bad "
				"ones.  Works on an unused image and, through "
				"its mount, on a mounted one (PATH: the image or "
				"its node).  Exit status 0: clean; 1: bad blocks "
				"found; 2: could not scrub.", entries, &argc,
				&argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 2) {
		dioloop_err("scrub: expected one PATH, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (rate_arg && (dioloop_parse_size(rate_arg, UINT64_MAX / 2, &rate) < 0 ||
			 rate == 0)) {
		dioloop_err("scrub: bad --rate '%s': expected bytes per second, "
			    "more than 0, with an optional K/M/G/T suffix (64M)",
			    rate_arg);
		return DIOLOOP_EXIT_USAGE;
	}
	dioloop_cli_logs("scrub");
	if (!resolve("scrub", argv[1], &ref))
		return DIOLOOP_EXIT_USAGE;
	if (ref.ctl) {
		status = scrub_online(argv[1], &ref, progress, rate);
		goto out;
	}
	type = probe_format("scrub", &ref);
	if (!type)
		goto out;
	if (!named_volume_exists("scrub", &ref, type)) {
		status = DIOLOOP_EXIT_FAIL;
		goto out;
	}
	if (!has_volumes(type)) {
		printf("%s: a %s image: no checksums to verify\n", argv[1],
		       type);
		status = DIOLOOP_EXIT_OK;
		goto out;
	}
	status = scrub_offline(argv[1], &ref, progress, rate);
out:
	dioloop_image_ref_clear(&ref);
	return status;
}

/* ---- snapshot, clone ---- */

/* A new volume name: true, or false after a one-line message. */
static bool check_volume_name(const char *cmd, const char *name)
{
	const char *why = NULL;

	if (!name[0])
		why = "empty";
	else if (strlen(name) > BACKEND_VOLUME_NAME_MAX)
		why = "longer than 39 bytes";
	else if (strpbrk(name, "/@"))
		why = "it must not contain '/' or '@'";
	else if (!g_utf8_validate(name, -1, NULL))
		why = "not UTF-8";
	if (why)
		dioloop_err("%s: bad NAME '%s': %s", cmd, name, why);
	return !why;
}

/* The exit status for a volume operation's error, after a message. */
static int volume_error(const char *cmd, const char *image, const char *name,
			int err, const GError *error)
{
	if (err == -EINVAL) {
		dioloop_err("%s: bad NAME '%s'", cmd, name);
		return DIOLOOP_EXIT_USAGE;
	}
	dioloop_err("%s: %s: %s", cmd, image, error->message);
	return DIOLOOP_EXIT_FAIL;
}

/*
 * Offline: open ref's volume (container writable), then make a volume
 * name from it (writable: a clone) or delete the volume name.  The exit
 * status.
 */
static int volume_offline(const char *cmd, struct dioloop_image_ref *ref,
			  const char *name, bool del, bool writable)
{
	g_autoptr(GError) open_error = NULL, error = NULL;
	g_autofree char *base = NULL;
	struct image_lock lock = { .fd = -1 };
	int ret, status = DIOLOOP_EXIT_FAIL;
	const char *type = probe_image(cmd, ref);
	struct backend *b;

	if (!type)
		return DIOLOOP_EXIT_FAIL;
	if (!has_volumes(type)) {
		dioloop_err("%s: %s is a %s image: snapshots and clones need a "
			    "cow image (dioloop convert --format cow)", cmd,
			    ref->image, type);
		return DIOLOOP_EXIT_FAIL;
	}
	if (lock_image(cmd, ref, false, &lock) < 0)
		return DIOLOOP_EXIT_FAIL;
	ret = dioloop_image_ref_open(ref, BACKEND_OPEN_CONTAINER_RW, &b, &type,
				     &open_error);
	if (ret < 0) {
		dioloop_err("%s: %s", cmd, open_error->message);
		goto out;
	}
	if (del)
		ret = backend_volume_delete(b, name, &error);
	else if (writable)
		ret = backend_volume_clone(b, name, &error);
	else
		ret = backend_volume_snapshot(b, name, &error);
	backend_close(b);
	if (ret < 0) {
		status = volume_error(cmd, ref->image, name, ret, error);
		goto out;
	}
	base = g_path_get_basename(ref->image);
	if (backend_is_url(ref->image))
		base[strcspn(base, "?")] = '\0';	/* the URL's options */
	printf(del ? "deleted %s@%s\n" : "%s@%s\n", base, name);
	status = DIOLOOP_EXIT_OK;
out:
	unlock_image(&lock);
	return status;
}

/*
 * Refuse to delete volume name of ref's image while other volumes were
 * made from it (their lineage would name a volume that is gone): true
 * when the delete may go on, false after a message saying which volumes
 * depend on it.  Reads the volume list read-only (as info does, also
 * while a mount serves the image); an image that cannot be read is left
 * to the delete to report.
 */
static bool may_delete_volume(const char *cmd,
			      const struct dioloop_image_ref *ref,
			      const char *name)
{
	struct dioloop_image_ref whole = { .image = ref->image,
					   .node = ref->node };
	g_autoptr(GError) error = NULL;
	g_autoptr(GString) users = g_string_new(NULL);
	g_autofree char *base = NULL;
	GArray *vols;
	const char *type;
	struct backend *b;
	uint64_t id = 0;
	guint i, n = 0;

	if (!ref->image ||
	    dioloop_image_ref_open(&whole, BACKEND_OPEN_RDONLY, &b, &type,
				   &error) < 0)
		return true;
	vols = g_array_new(FALSE, TRUE, sizeof(struct backend_volume_info));
	if (backend_volume_list(b, vols, NULL) == 0) {
		for (i = 0; i < vols->len; i++) {
			const struct backend_volume_info *v = &g_array_index(
				vols, struct backend_volume_info, i);

			if (!strcmp(v->name, name))
				id = v->id;
		}
		base = g_path_get_basename(ref->image);
		for (i = 0; id && i < vols->len; i++) {
			const struct backend_volume_info *v = &g_array_index(
				vols, struct backend_volume_info, i);

			if (v->parent != id)
				continue;
			g_string_append_printf(users, "%s%s%s%s",
					       n++ ? ", " : "", base,
					       v->name[0] ? "@" : "", v->name);
		}
	}
	g_array_free(vols, TRUE);
	backend_close(b);
	if (!n)
		return true;
	dioloop_err("%s: cannot delete %s@%s: %s made from it (%s); delete "
		    "%s first, or convert it to an image of its own", cmd,
		    base, name, n == 1 ? "another volume was" :
		    "other volumes were", users->str, n == 1 ? "it" : "them");
	return false;
}

/* snapshot and clone: resolve, then online or offline.  The exit status. */
static int volume_cmd(const char *cmd, const char *image_arg,
		      const char *name, bool del, bool writable)
{
	g_autoptr(GString) reply = g_string_new(NULL);
	g_autofree char *node = NULL;
	struct dioloop_image_ref ref;
	int status;

	if (!check_volume_name(cmd, name))
		return DIOLOOP_EXIT_USAGE;
	if (!resolve(cmd, image_arg, &ref))
		return DIOLOOP_EXIT_USAGE;
	if (del && ref.volume) {
		dioloop_err("snapshot: --delete takes the IMAGE and the NAME of "
			    "its volume, not '%s'", image_arg);
		status = DIOLOOP_EXIT_USAGE;
	} else if (del && !may_delete_volume(cmd, &ref, name)) {
		status = DIOLOOP_EXIT_FAIL;
	} else if (!ref.ctl) {
		status = volume_offline(cmd, &ref, name, del, writable);
	} else if (del) {
		node = g_strdup_printf("%s@%s", ref.node, name);
		status = online_status(online(cmd, &ref, "delete-volume", node,
					      NULL, reply));
	} else {
		status = online_status(online(cmd, &ref,
					      writable ? "clone" : "snapshot",
					      ref.node, name, reply));
	}
	if (ref.ctl && status == DIOLOOP_EXIT_OK)
		fputs(reply->str, stdout);
	dioloop_image_ref_clear(&ref);
	return status;
}

int dioloop_cmd_snapshot(int argc, char **argv)
{
	gboolean del = FALSE;
	GOptionEntry entries[] = {
		{ "delete", 0, 0, G_OPTION_ARG_NONE, &del,
		  "delete the snapshot (or clone) NAME instead, freeing the "
		  "blocks nothing else uses", NULL },
		{ NULL },
	};

	if (!dioloop_parse_args("snapshot", "IMAGE NAME",
				"Freeze a cow image's current state as the "
				"read-only volume NAME, served as node "
				"IMAGE@NAME; prints that name.  IMAGE may be a "
				"node of a mount (or an image a mount serves): "
				"the snapshot is then taken by the daemon, "
				"crash-consistent while the node is written.",
				entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 3) {
		dioloop_err("snapshot: expected IMAGE and NAME, got %d "
			    "arguments", argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	dioloop_cli_logs("snapshot");
	return volume_cmd("snapshot", argv[1], argv[2], del, false);
}

int dioloop_cmd_clone(int argc, char **argv)
{
	GOptionEntry entries[] = { { NULL } };

	if (!dioloop_parse_args("clone", "IMAGE[@SNAPSHOT] NAME",
				"Make a writable volume NAME of a cow image from "
				"its current state or from one of its snapshots, "
				"served as node IMAGE@NAME; prints that name.  "
				"Blocks are shared until written.", entries,
				&argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 3) {
		dioloop_err("clone: expected IMAGE[@SNAPSHOT] and NAME, got %d "
			    "arguments", argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	dioloop_cli_logs("clone");
	return volume_cmd("clone", argv[1], argv[2], false, true);
}
