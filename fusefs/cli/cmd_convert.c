/* SPDX-License-Identifier: MIT */
/*
 * dioloop convert: copy an image (raw, cow, a cow volume IMAGE@VOLUME, or
 * anything backend_open serves) into a new image of either format.
 * Sparse: holes of the source (backend_map) and all-zero blocks are not
 * written, so they stay holes in the new image (like qemu-img convert).
 * Data moves in large aligned chunks through backend_pread/pwrite; the
 * new image is flushed at the end and removed again on failure or on
 * SIGINT/SIGTERM/SIGHUP (--keep-partial keeps it, said incomplete).  DST
 * is raw unless --format says otherwise or its name ends in ".cow"
 * (qemu-img's default).  A command-line process: one thread (and the
 * signal handler, which only sets a flag).
 */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/size.h"
#include "backends/sparse_copy.h"
#include "backends/volume.h"
#include "fusefs/cli/commands.h"
#include "fusefs/cli/control_client.h"
#include "fusefs/cli/progress.h"

#define CONVERT_CHUNK ((size_t)4 << 20)
#define CONVERT_ALIGN ((size_t)4096)

/* Set by the handler of SIGINT, SIGTERM and SIGHUP: stop copying. */
static volatile sig_atomic_t convert_interrupted;

static void on_interrupt(int sig)
{
	convert_interrupted = sig;
}

/* Catch the signals that would end the copy midway, so that the partial
 * DST is removed (or kept and said incomplete) on the way out. */
static void catch_interrupts(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

struct convert {
	struct backend *src, *dst;
	uint64_t size;			/* bytes to copy */
	uint8_t *buf;			/* CONVERT_CHUNK, aligned */
	struct dioloop_progress bar;
	uint64_t written;		/* bytes written to dst */
	uint64_t copied;		/* bytes of src copied (or holes) */
};

/* Copy every data extent of src into dst: 0 or -errno, *what saying
 * which side failed. */
static int copy_data(struct convert *c, const char **what)
{
	struct backend_extent ext;
	uint64_t pos = 0, end;
	ssize_t n;
	int ret;

	while (pos < c->size) {
		size_t len;

		*what = "interrupted";
		if (convert_interrupted)
			return -EINTR;
		*what = "reading";
		/* Asked about the whole rest: a hole is skipped in one step
		 * however long (an empty 1 PiB image took 16 s of steps of
		 * a buffer's length); data goes a buffer at a time. */
		ret = backend_map(c->src, pos, c->size - pos, &ext);
		if (ret < 0)
			return ret;
		if (ext.hole) {
			pos += ext.len;
			c->copied = pos;
			dioloop_progress_update(&c->bar, pos);
			continue;
		}
		/* The whole extent, a buffer at a time, before asking the
		 * map again (a map can cost: rbd without fast-diff stats
		 * every object it covers). */
		for (end = pos + ext.len; pos < end;) {
			if (convert_interrupted) {
				*what = "interrupted";
				return -EINTR;
			}
			len = (size_t)MIN((uint64_t)CONVERT_CHUNK, end - pos);
			*what = "reading";
			n = backend_pread(c->src, c->buf, len, pos);
			if (n < 0)
				return (int)n;
			if ((size_t)n < len)
				return -EIO;	/* the source shrank */
			*what = "writing";
			/* dst is new: it reads zeros where nothing goes. */
			ret = backend_write_sparse(c->dst, c->buf, pos, len,
						   true, &c->written);
			if (ret < 0)
				return ret;
			pos += len;
			c->copied = pos;
			dioloop_progress_update(&c->bar, pos);
		}
	}
	*what = "flushing";
	return backend_flush(c->dst);
}

/*
 * Whether SRC may be read while its image lock is held by a writer: only
 * a snapshot volume, which nothing changes.  b: SRC opened read-only.
 */
static bool is_snapshot(struct backend *b, const char *volume)
{
	struct backend_volume_info v;

	return volume && volume[0] &&
	       backend_volume_lookup(b, volume, &v, NULL) == 0 && v.snapshot;
}

/* Open SRC read-only under a read lock (a cow snapshot also without
 * it): 0, or the exit status after a message. */
static int open_source(struct dioloop_image_ref *ref, struct backend **b,
		       const char **type, int *lock_fd)
{
	g_autoptr(GError) error = NULL;
	g_autofree char *holder = NULL;
	bool busy = false;
	int ret;

	ret = dioloop_image_ref_lock("convert", ref, true, lock_fd, &holder);
	if (ret == -EBUSY)
		busy = true;
	else if (ret < 0 && ret != -ENOENT)
		return DIOLOOP_EXIT_FAIL;
	ret = dioloop_image_ref_open(ref, BACKEND_OPEN_RDONLY, b, type, &error);
	if (ret < 0) {
		dioloop_err("convert: %s", error->message);
		return DIOLOOP_EXIT_FAIL;
	}
	if (busy && !is_snapshot(*b, ref->volume)) {
		const struct backend_ops *ops = backend_lookup(*type);

		/* Only a format with snapshots can offer one. */
		if (ops && ops->volumes)
			dioloop_err("convert: %s is in use by %s: unmount it, or "
				    "take a snapshot and convert "
				    "IMAGE@SNAPSHOT", ref->image, holder);
		else
			dioloop_err("convert: %s is in use by %s: unmount it "
				    "first (a %s image has no snapshots to "
				    "copy from)", ref->image, holder, *type);
		backend_close(*b);
		*b = NULL;
		return DIOLOOP_EXIT_FAIL;
	}
	return 0;
}

/* The part of a URL before its options. */
static char *url_without_options(const char *url)
{
	return g_strndup(url, strcspn(url, "?"));
}

/* Remove the image at the URL dst: 0 or -errno (printed, one line,
 * unless -ENOENT). */
static int remove_url_dst(const char *dst)
{
	g_autoptr(GError) error = NULL;
	int ret = backend_remove_url(dst, &error);

	if (ret < 0 && ret != -ENOENT)
		dioloop_err("%s", error->message);
	return ret;
}

/* Make way for a URL DST (no local image lock: the server's file is not
 * ours to lock): false after a message (*status: exit status). */
static bool prepare_url_dst(const char *dst,
			    const struct dioloop_image_ref *src, bool force,
			    int *status)
{
	g_autoptr(GError) error = NULL;
	g_autofree char *a = NULL, *b = NULL;

	if (backend_check_url(dst, true, &error) < 0) {
		dioloop_err("convert: %s", error->message);
		*status = DIOLOOP_EXIT_USAGE;
		return false;
	}
	a = url_without_options(dst);
	b = src->image ? url_without_options(src->image) : NULL;
	if (b && !strcmp(a, b)) {
		dioloop_err("convert: DST %s is the source image", dst);
		*status = DIOLOOP_EXIT_USAGE;
		return false;
	}
	/* Without --force the create below refuses an existing file. */
	if (force) {
		int ret = remove_url_dst(dst);

		if (ret < 0 && ret != -ENOENT)
			return false;
	}
	return true;
}

/* Make way for DST: false after a message (*status: exit status). */
/*
 * Open DST just created.  A local file by a descriptor that is still the
 * file created (made): whoever may write its directory could have put
 * a symlink or another file under the name meanwhile.  0 or -errno.
 */
static int open_dst(const char *dst, const char *type,
		    const struct stat *made, struct backend **b)
{
	struct backend_file file = { .dirfd = -1 };
	struct backend_open_args args = { .path = dst };
	struct stat st;
	int ret;

	if (backend_is_url(dst))
		return backend_open(backend_probe(dst), &args, b);
	file.fd = open(dst, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (file.fd < 0)
		return -errno;
	if (fstat(file.fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != made->st_dev || st.st_ino != made->st_ino) {
		close(file.fd);
		return -ESTALE;
	}
	args.file = &file;
	ret = backend_open(type, &args, b);
	close(file.fd);
	return ret;
}

static bool prepare_dst(const char *dst, const struct dioloop_image_ref *src,
			bool force, int *lock_fd, int *status)
{
	struct dioloop_image_ref dst_ref = { .image = (char *)dst };
	g_autofree char *holder = NULL;
	struct stat st, sst;
	int ret;

	*lock_fd = -1;
	*status = DIOLOOP_EXIT_FAIL;
	if (backend_is_url(dst))
		return prepare_url_dst(dst, src, force, status);
	if (lstat(dst, &st) < 0) {
		if (errno == ENOENT)
			return true;
		dioloop_err("convert: %s: %s", dst, g_strerror(errno));
		return false;
	}
	if (src->image && stat(src->image, &sst) == 0 && stat(dst, &st) == 0 &&
	    st.st_dev == sst.st_dev && st.st_ino == sst.st_ino) {
		dioloop_err("convert: DST %s is the source image", dst);
		*status = DIOLOOP_EXIT_USAGE;
		return false;
	}
	if (!force) {
		dioloop_err("convert: %s exists (--force replaces it)", dst);
		return false;
	}
	if (!S_ISREG(st.st_mode)) {
		dioloop_err("convert: %s is not a regular file", dst);
		return false;
	}
	ret = dioloop_image_ref_lock("convert", &dst_ref, false, lock_fd,
				     &holder);
	if (ret == -EBUSY || ret == -ENOENT)
		dioloop_err("convert: %s: %s", dst, ret == -EBUSY ?
			    "in use (by a mount?); not replaced" :
			    g_strerror(-ret));
	if (ret < 0)
		return false;
	if (unlink(dst) < 0) {
		dioloop_err("convert: %s: %s", dst, g_strerror(errno));
		return false;
	}
	return true;
}

int dioloop_cmd_convert(int argc, char **argv)
{
	gboolean progress = FALSE, force = FALSE, keep_partial = FALSE;
	g_autofree char *format = NULL, *csum = NULL;
	g_autoptr(GError) error = NULL;
	GOptionEntry entries[] = {
		{ "format", 0, 0, G_OPTION_ARG_STRING, &format,
		  "format of DST: raw or cow (default: raw, or cow when DST "
		  "ends in .cow)", "FORMAT" },
		{ "csum", 0, 0, G_OPTION_ARG_STRING, &csum,
		  "data checksum of a cow DST: crc32c (default) or xxhash64",
		  "TYPE" },
		{ "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
		  "draw the progress bar even when stderr is no terminal",
		  NULL },
		{ "force", 0, 0, G_OPTION_ARG_NONE, &force,
		  "replace DST if it exists", NULL },
		{ "keep-partial", 0, 0, G_OPTION_ARG_NONE, &keep_partial,
		  "keep an incomplete DST after an error or an interrupt "
		  "(it is removed otherwise)", NULL },
		{ NULL },
	};
	struct convert c = { 0 };
	struct dioloop_image_ref ref;
	const char *src_type, *dst_type, *what = "";
	int src_lock = -1, dst_lock = -1, ret, status = DIOLOOP_EXIT_FAIL;
	struct backend_create_args create = { 0 };
	struct stat made, src_st;
	bool created = false;
	uint32_t align;
	int64_t size;

	if (!dioloop_parse_args("convert", "SRC DST",
				"Copy the image SRC (raw, cow, or a cow volume "
				"IMAGE@VOLUME) into the new image DST, raw or "
				"cow; either may be an nfs:// or rbd:// URL (raw).  Sparse: holes and all-zero blocks are "
				"not written.  A progress bar when stderr is a "
				"terminal (or with -p).", entries, &argc, &argv))
		return DIOLOOP_EXIT_USAGE;
	if (argc != 3) {
		dioloop_err("convert: expected SRC and DST, got %d arguments",
			    argc - 1);
		return DIOLOOP_EXIT_USAGE;
	}
	if (!dioloop_parse_format("convert", format, NULL))
		return DIOLOOP_EXIT_USAGE;
	if (csum && !dioloop_parse_checksum("convert", csum))
		return DIOLOOP_EXIT_USAGE;
	dioloop_cli_logs("convert");
	if (dioloop_image_ref_resolve(argv[1], &ref, &error) < 0) {
		dioloop_err("convert: %s", error->message);
		return DIOLOOP_EXIT_USAGE;
	}
	/* A migrated image: copy what it holds now, at its destination. */
	if (dioloop_image_ref_follow("convert", argv[1], &ref, NULL) < 0) {
		dioloop_image_ref_clear(&ref);
		return DIOLOOP_EXIT_USAGE;
	}
	catch_interrupts();
	ret = open_source(&ref, &c.src, &src_type, &src_lock);
	if (ret) {
		status = ret;
		goto out;
	}
	/* qemu-img's default (raw), unless the name says cow. */
	dst_type = format ? format : g_str_has_suffix(argv[2], ".cow") ? "cow" :
				     "raw";
	if (backend_is_url(argv[2])) {
		/* Images on a protocol are raw, served by its backend. */
		if (backend_check_create(format, argv[2], &error) < 0) {
			dioloop_err("convert: %s", error->message);
			status = DIOLOOP_EXIT_USAGE;
			goto out;
		}
		dst_type = "raw";
	}
	if (csum && strcmp(dst_type, "cow")) {
		dioloop_err("convert: --csum '%s' needs a cow DST (--format "
			    "cow)", csum);
		status = DIOLOOP_EXIT_USAGE;
		goto out;
	}
	size = backend_get_size(c.src);
	if (size < 0) {
		dioloop_err("convert: %s: %s", argv[1], g_strerror((int)-size));
		goto out;
	}
	c.size = (uint64_t)size;
	if (!backend_is_url(argv[2]) &&
	    dioloop_path_symlinks_trusted(argv[2], &error) < 0) {
		dioloop_err("convert: %s", error->message);
		status = DIOLOOP_EXIT_USAGE;
		goto out;
	}
	if (!prepare_dst(argv[2], &ref, force, &dst_lock, &status))
		goto out;
	status = DIOLOOP_EXIT_FAIL;
	/* A format with blocks (not raw, which keeps any size) rounds up. */
	align = dioloop_create_align(dst_type);
	/* A copy is no more open than its source: a local source's
	 * permission bits (as cp gives them), 0600 for a remote one. */
	create.mode = (src_lock >= 0 && fstat(src_lock, &src_st) == 0) ||
			      (ref.image && !backend_is_url(ref.image) &&
			       stat(ref.image, &src_st) == 0) ?
			      (src_st.st_mode & 0666) | 0600 : 0600;
	create.created = &made;
	create.path = argv[2];
	create.size = c.size;
	create.checksum = csum;
	if (strcmp(dst_type, "raw") && (c.size == 0 || c.size % align)) {
		create.size = MAX(align, (c.size + align - 1) /
					 align * align);
		dioloop_err("convert: %s: %s images are whole %u KiB blocks: "
			    "%" PRIu64 " bytes (%" PRIu64 " zeros added)",
			    argv[2], dst_type, align / 1024, create.size,
			    create.size - c.size);
	}
	ret = backend_create(dst_type, &create, &error);
	if (ret < 0) {
		dioloop_err("convert: %s", error->message);
		goto out;
	}
	created = true;
	ret = open_dst(argv[2], dst_type, &made, &c.dst);
	if (ret == -ESTALE && !backend_is_url(argv[2])) {
		dioloop_err("convert: %s changed after it was created (another user may write its directory): not written",
			    argv[2]);
		created = false;	/* not ours to remove any more */
		goto out;
	}
	if (ret < 0) {
		dioloop_err("convert: %s: %s", argv[2], g_strerror(-ret));
		goto out;
	}
	if (posix_memalign((void **)&c.buf, CONVERT_ALIGN, CONVERT_CHUNK)) {
		dioloop_err("convert: out of memory");
		goto out;
	}
	dioloop_progress_begin(&c.bar, "convert", DIOLOOP_PROGRESS_BYTES,
			       c.size, progress);
	ret = copy_data(&c, &what);
	dioloop_progress_end(&c.bar, ret == 0);
	if (ret == -EINTR && convert_interrupted) {
		dioloop_err("convert: interrupted (%s)",
			    g_strsignal(convert_interrupted));
		status = 128 + convert_interrupted;
		goto out;
	}
	if (ret < 0) {
		dioloop_err("convert: %s %s: %s", what,
			    !strcmp(what, "reading") ? argv[1] : argv[2],
			    g_strerror(-ret));
		goto out;
	}
	status = DIOLOOP_EXIT_OK;
out:
	if (c.dst)
		backend_close(c.dst);
	if (c.src)
		backend_close(c.src);
	if (created && status != DIOLOOP_EXIT_OK && keep_partial) {
		char a[32], b[32];

		dioloop_err("convert: %s is incomplete: %s of %s copied "
			    "(--keep-partial kept it)", argv[2],
			    dioloop_format_size(c.copied, a, sizeof(a)),
			    dioloop_format_size(c.size, b, sizeof(b)));
	} else if (created && status != DIOLOOP_EXIT_OK) {
		if (backend_is_url(argv[2]))
			remove_url_dst(argv[2]);
		else
			unlink(argv[2]);
	}
	if (src_lock >= 0)
		close(src_lock);
	if (dst_lock >= 0)
		close(dst_lock);
	free(c.buf);
	dioloop_image_ref_clear(&ref);
	return status;
}
