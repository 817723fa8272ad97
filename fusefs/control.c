/* SPDX-License-Identifier: MIT */
/* The control directory: stats.json and the ctl file (see control.h). */
#include "fusefs/control.h"
#include "fusefs/migrate.h"
#include "fusefs/session_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/volume.h"
#include "fusefs/spec.h"

#define CTL_MAX_COMMAND 4096
#define CTL_MAX_RULES 64

/* An open control file: what reads return. */
struct dioloop_ctl_file {
	GMutex lock;
	GString *out;		/* the snapshot, or the last reply; by lock */
};

/* The mount a request is for. */
static struct dioloop_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* An open control file with nothing to read yet. */
static struct dioloop_ctl_file *ctl_file_new(void)
{
	struct dioloop_ctl_file *f = g_new0(struct dioloop_ctl_file, 1);

	g_mutex_init(&f->lock);
	f->out = g_string_new(NULL);
	return f;
}

/* Free an open control file (no request uses it any more). */
static void ctl_file_free(struct dioloop_ctl_file *f)
{
	g_string_free(f->out, TRUE);
	g_mutex_clear(&f->lock);
	g_free(f);
}

/* Attributes of a control inode: owned by the mounting user. */
static void ctl_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = DIOLOOP_BLOCK_SIZE;
	clock_gettime(CLOCK_REALTIME, &st->st_mtim);
	st->st_atim = st->st_ctim = st->st_mtim;
	switch (ino) {
	case DIOLOOP_CTL_DIR_INO:
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		break;
	case DIOLOOP_STATS_INO:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		break;
	default:
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		/* A command fits: the kernel sends writes inside the size in
		 * parallel (one past it would hold the inode lock until its
		 * reply, and a long command would hold back every other). */
		st->st_size = CTL_MAX_COMMAND;
		break;
	}
}

/* Lookup in the root (.dioloop) or in .dioloop.  FUSE worker. */
void dioloop_ctl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino = 0;

	if (parent == FUSE_ROOT_ID && !strcmp(name, DIOLOOP_CTL_DIR))
		ino = DIOLOOP_CTL_DIR_INO;
	else if (parent == DIOLOOP_CTL_DIR_INO && !strcmp(name, "stats.json"))
		ino = DIOLOOP_STATS_INO;
	else if (parent == DIOLOOP_CTL_DIR_INO && !strcmp(name, "ctl"))
		ino = DIOLOOP_CTL_FILE_INO;
	if (!ino) {
		fuse_reply_err(req, parent == DIOLOOP_CTL_DIR_INO ? ENOENT :
								    ENOTDIR);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	ctl_stat(ino, &e.attr);
	e.entry_timeout = 1.0;
	fuse_reply_entry(req, &e);
}

/* Attributes of a control inode.  FUSE worker. */
void dioloop_ctl_getattr(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;

	if (ino > DIOLOOP_CTL_FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	ctl_stat(ino, &st);
	fuse_reply_attr(req, &st, 0);
}

/* Truncation of ctl to 0 (O_TRUNC); nothing else.  FUSE worker. */
void dioloop_ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			 int to_set)
{
	struct stat st;

	if (ino != DIOLOOP_CTL_FILE_INO || to_set != FUSE_SET_ATTR_SIZE ||
	    attr->st_size != 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	ctl_stat(ino, &st);
	fuse_reply_attr(req, &st, 0);
}

GPtrArray *dioloop_ctl_names(void)
{
	GPtrArray *names = g_ptr_array_new_with_free_func(g_free);

	g_ptr_array_add(names, g_strdup("ctl"));
	g_ptr_array_add(names, g_strdup("stats.json"));
	return names;
}

/* Opening stats.json: the snapshot, built on the control pool. */
struct stats_open {
	fuse_req_t req;
	struct fuse_file_info fi;	/* a copy: the caller's is gone */
	struct dioloop_fs *fs;
};

/* Build the snapshot and answer the open.  Control thread. */
static void stats_open_run(void *arg)
{
	struct stats_open *so = arg;
	struct dioloop_ctl_file *f = ctl_file_new();
	size_t len;
	char *json = dioloop_stats_json(so->fs, &len);

	g_string_append_len(f->out, json, (gssize)len);
	g_free(json);
	so->fi.fh = (uint64_t)(uintptr_t)f;
	if (fuse_reply_open(so->req, &so->fi) == -ENOENT)
		ctl_file_free(f);	/* the opener was interrupted */
	g_free(so);
}

/* Open stats.json (snapshot built on the control pool) or ctl.
 * FUSE worker. */
void dioloop_ctl_open(fuse_req_t req, fuse_ino_t ino,
		      struct fuse_file_info *fi)
{
	struct dioloop_ctl_file *f;
	struct stats_open *so;

	if (ino == DIOLOOP_CTL_DIR_INO) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (ino != DIOLOOP_STATS_INO && ino != DIOLOOP_CTL_FILE_INO) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Reads come to us whatever the size says. */
	fi->direct_io = 1;
	fi->keep_cache = 0;
	fi->noflush = 1;
	if (ino == DIOLOOP_STATS_INO) {
		if ((fi->flags & O_ACCMODE) != O_RDONLY) {
			fuse_reply_err(req, EACCES);
			return;
		}
		so = g_new0(struct stats_open, 1);
		so->req = req;
		so->fi = *fi;
		so->fs = fs_of(req);
		dioloop_ctl_call(so->fs, stats_open_run, so);
		return;
	}
	/* Commands act as the daemon's user: only it (or root) may give
	 * them, whatever the mount's permission options. */
	if (fuse_req_ctx(req)->uid != 0 && fuse_req_ctx(req)->uid != getuid()) {
		fuse_reply_err(req, EACCES);
		return;
	}
	f = ctl_file_new();
	fi->fh = (uint64_t)(uintptr_t)f;
	/* Parallel writes: a long command (a scrub) holds no other back. */
	if (dioloop_reply_open(req, fi) == -ENOENT)
		ctl_file_free(f);
}

/* Read the snapshot or the last reply.  FUSE worker. */
void dioloop_ctl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct dioloop_ctl_file *f = (void *)(uintptr_t)fi->fh;
	g_autofree char *buf = NULL;
	size_t n = 0;

	/* Copy, then reply without the lock: once the reply is out, the
	 * reader may close the file and its release free f. */
	g_mutex_lock(&f->lock);
	if (off >= 0 && (size_t)off < f->out->len) {
		n = MIN(size, f->out->len - (size_t)off);
		buf = g_memdup2(f->out->str + off, n);
	}
	g_mutex_unlock(&f->lock);
	fuse_reply_buf(req, buf, n);
}

/* A command written to ctl, run on the control pool. */
struct ctl_job {
	fuse_req_t req;
	struct dioloop_fs *fs;
	struct dioloop_ctl_file *f;
	char *text;
	size_t size;
};

/* Run each line of the job; the first failure ends it.  Control thread. */
static void ctl_job_run(void *arg)
{
	struct ctl_job *job = arg;
	g_auto(GStrv) lines = g_strsplit(job->text, "\n", -1);
	GString *reply = g_string_new(NULL);
	char **l;
	int ret = 0;

	for (l = lines; *l && ret == 0; l++) {
		g_strstrip(*l);
		if (**l)
			ret = dioloop_ctl_exec(job->fs, *l, reply);
	}
	g_mutex_lock(&job->f->lock);
	g_string_free(job->f->out, TRUE);
	job->f->out = reply;
	g_mutex_unlock(&job->f->lock);
	if (ret < 0)
		fuse_reply_err(job->req, -ret);
	else
		fuse_reply_write(job->req, job->size);
	g_free(job->text);
	g_free(job);
}

/* A command for ctl: run on the control pool, which replies.  FUSE
 * worker. */
void dioloop_ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		       size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ctl_job *job;

	if (ino != DIOLOOP_CTL_FILE_INO) {
		fuse_reply_err(req, EBADF);
		return;
	}
	if (size > CTL_MAX_COMMAND || memchr(buf, '\0', size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	job = g_new0(struct ctl_job, 1);
	job->req = req;
	job->fs = fs_of(req);
	job->f = (void *)(uintptr_t)fi->fh;
	/* The buffer is the FUSE worker's: copy it. */
	job->text = g_strndup(buf, size);
	job->size = size;
	dioloop_ctl_call(job->fs, ctl_job_run, job);
}

/* Close a control file.  FUSE worker. */
void dioloop_ctl_release(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	ctl_file_free((void *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* ---- commands ---- */

/* Look up the node a command names: a referenced node or -errno with
 * the reason in reply. */
static int ctl_node(struct dioloop_fs *fs, const char *cmd, const char *name,
		    struct dioloop_node **node, GString *reply)
{
	int ret = dioloop_is_node_name(name) ?
		  dioloop_node_lookup(fs, name, node) : -ENOENT;

	if (ret < 0)
		g_string_append_printf(reply, "%s: no node '%s' in %s: %s\n",
				       cmd, name, fs->mountpoint,
				       ret == -ENOENT ? "no such image" :
				       g_strerror(-ret));
	return ret;
}

/* limit NODE|* [KEY=VALUE...] */
static int ctl_limit(struct dioloop_fs *fs, int argc, char **argv,
		     GString *reply)
{
	struct dioloop_limit_update u = { 0 };
	g_autofree char *given = NULL, *now = NULL;
	struct dioloop_node *node = NULL;
	struct dioloop_limits l;
	int i, ret;

	if (argc < 1) {
		g_string_append(reply, "limit: expected a node name or '*'\n");
		return -EINVAL;
	}
	for (i = 1; i < argc; i++) {
		g_autofree char *err = NULL;

		if (dioloop_limit_parse(argv[i], &u, &err) < 0) {
			g_string_append_printf(reply, "limit: %s\n", err);
			return -EINVAL;
		}
	}
	given = g_strjoinv(" ", argv + 1);
	if (!strcmp(argv[0], "*")) {
		dioloop_fs_set_limits(fs, NULL, &u);
		if (u.mask)
			g_message("limits for every node: %s", given);
		g_mutex_lock(&fs->lock);
		l = fs->limits;
		g_mutex_unlock(&fs->lock);
		now = dioloop_limits_format(&l);
		g_string_append_printf(reply, "total_bps=%llu %s\n",
				       (unsigned long long)
				       dioloop_throttle_group_total(&fs->throttle),
				       now);
		return 0;
	}
	if (u.mask & (1u << DIOLOOP_LIMIT_TOTAL_BPS)) {
		g_string_append(reply, "limit: total_bps is mount-wide: set it "
				       "on the mount point, not on a node\n");
		return -EINVAL;
	}
	ret = ctl_node(fs, "limit", argv[0], &node, reply);
	if (ret < 0)
		return ret;
	dioloop_fs_set_limits(fs, node, &u);
	if (u.mask)
		g_message("%s: limits: %s", node->name, given);
	dioloop_throttle_get_limits(&node->throttle, &l);
	now = dioloop_limits_format(&l);
	g_string_append_printf(reply, "%s\n", now);
	dioloop_node_forget(fs, node->ino, 1);
	return 0;
}

/* The rules of a node's fault filter and what they did, for the reply. */
static void ctl_fault_list(struct backend *b, GString *reply)
{
	struct fault_rule rules[CTL_MAX_RULES];
	struct fault_stats st;
	unsigned int n, i;

	n = fault_backend_get_rules(b, rules, CTL_MAX_RULES);
	fault_backend_get_stats(b, &st);
	if (!n)
		g_string_append(reply, "no fault rules\n");
	for (i = 0; i < n && i < CTL_MAX_RULES; i++) {
		g_autofree char *text = dioloop_fault_format(&rules[i]);

		g_string_append_printf(reply, "rule %u: %s\n", i + 1, text);
	}
	g_string_append_printf(reply, "injected: read=%llu write=%llu "
			       "flush=%llu discard=%llu zero=%llu\n",
			       (unsigned long long)st.injected[FAULT_KIND_READ],
			       (unsigned long long)st.injected[FAULT_KIND_WRITE],
			       (unsigned long long)st.injected[FAULT_KIND_FLUSH],
			       (unsigned long long)st.injected[FAULT_KIND_DISCARD],
			       (unsigned long long)
			       st.injected[FAULT_KIND_WRITE_ZEROES]);
}

/* fault NODE [RULE...|off] */
static int ctl_fault(struct dioloop_fs *fs, int argc, char **argv,
		     GString *reply)
{
	struct dioloop_node *node;
	struct backend *b;
	struct fault_rule r;
	g_autofree char *err = NULL, *text = NULL;
	int ret;

	if (argc < 1) {
		g_string_append(reply, "fault: expected a node name\n");
		return -EINVAL;
	}
	if (argc > 1 && strcmp(argv[1], "off") &&
	    dioloop_fault_parse(argv + 1, argc - 1, &r, &err) < 0) {
		g_string_append_printf(reply, "fault: %s\n", err);
		return -EINVAL;
	}
	if (argc > 2 && !strcmp(argv[1], "off")) {
		g_string_append(reply, "fault: 'off' takes nothing after it\n");
		return -EINVAL;
	}
	ret = ctl_node(fs, "fault", argv[0], &node, reply);
	if (ret < 0)
		return ret;
	/* The first rule stacks the filter (under a drain); "off" and a
	 * listing leave the stack as it is. */
	if (argc > 1 && strcmp(argv[1], "off")) {
		ret = dioloop_node_stack_fault(node);
		if (ret < 0) {
			g_string_append_printf(reply, "fault: cannot stack the "
					       "fault filter on '%s': %s\n",
					       argv[0], g_strerror(-ret));
			dioloop_node_forget(fs, node->ino, 1);
			return ret;
		}
	}
	b = dioloop_node_backend_get(node);
	if (!b) {
		g_string_append_printf(reply, "fault: node '%s' was deleted\n",
				       argv[0]);
		dioloop_node_forget(fs, node->ino, 1);
		return -ENOENT;
	}
	if (argc > 1 && !strcmp(argv[1], "off")) {
		fault_backend_clear(b);
		g_message("%s: fault rules cleared", node->name);
	} else if (argc > 1) {
		ret = fault_backend_add_rule(b, &r);
		text = dioloop_fault_format(&r);
		if (ret < 0)
			g_string_append_printf(reply, "fault: rule '%s' refused: "
					       "%s\n", text, g_strerror(-ret));
		else
			g_message("%s: fault rule: %s", node->name, text);
	}
	if (ret == 0)
		ctl_fault_list(b, reply);
	dioloop_node_backend_put(node);
	dioloop_node_forget(fs, node->ino, 1);
	return ret;
}

/* ---- cow volumes and scrub ---- */

/* The cow node a command names, held for the command (ctl_begin): 0 or
 * -errno with the reason in reply (EOPNOTSUPP: not a cow image). */
static int ctl_cow_node(struct dioloop_fs *fs, const char *cmd,
			const char *name, struct dioloop_node **node,
			GString *reply)
{
	struct dioloop_migration_view mv;
	int ret = ctl_node(fs, cmd, name, node, reply);

	if (ret < 0)
		return ret;
	if (dioloop_node_migration_view(*node, &mv)) {
		g_string_append_printf(reply, "%s: a migration to %s is "
				       "running on '%s'; try again when it "
				       "ended (dioloop migrate --status)\n",
				       cmd, mv.dest, name);
		dioloop_migration_view_clear(&mv);
		ret = -EBUSY;
	} else if (!(*node)->cow) {
		g_string_append_printf(reply, "%s: '%s' is not a cow image "
				       "(volumes, snapshots and scrub need "
				       "the cow format)\n", cmd, name);
		ret = -EOPNOTSUPP;
	} else if (dioloop_node_ctl_begin(fs, *node) < 0) {
		g_string_append_printf(reply, "%s: node '%s' was deleted\n",
				       cmd, name);
		ret = -ENOENT;
	}
	if (ret < 0)
		dioloop_node_forget(fs, (*node)->ino, 1);
	return ret;
}

/* Done with a node from ctl_cow_node. */
static void ctl_cow_node_put(struct dioloop_fs *fs, struct dioloop_node *node)
{
	dioloop_node_ctl_end(fs, node);
	dioloop_node_forget(fs, node->ino, 1);
}

/* snapshot NODE NAME / clone NODE NAME: a point-in-time volume of NODE's
 * container, read-only or writable; reply: its node name. */
static int ctl_snapshot(struct dioloop_fs *fs, int argc, char **argv,
			bool writable, GString *reply)
{
	const char *cmd = writable ? "clone" : "snapshot";
	g_autoptr(GError) error = NULL;
	struct dioloop_node *node;
	struct backend *vb;
	int ret;

	if (argc != 2) {
		g_string_append_printf(reply, "%s: expected a node name and "
				       "a new volume name\n", cmd);
		return -EINVAL;
	}
	if (!argv[1][0] || strchr(argv[1], '@') || strchr(argv[1], '/') ||
	    strlen(argv[1]) > BACKEND_VOLUME_NAME_MAX) {
		g_string_append_printf(reply, "%s: bad volume name '%s': 1 to "
				       "%d bytes, no '@' or '/'\n", cmd,
				       argv[1], BACKEND_VOLUME_NAME_MAX);
		return -EINVAL;
	}
	ret = ctl_cow_node(fs, cmd, argv[0], &node, reply);
	if (ret < 0)
		return ret;
	/* Point in time: every write the node acknowledged is in, none is
	 * half-way through the backend. */
	dioloop_node_drain_begin(node);
	vb = dioloop_node_volume_backend(node->b);
	ret = writable ? backend_volume_clone(vb, argv[1], &error) :
			 backend_volume_snapshot(vb, argv[1], &error);
	dioloop_node_drain_end(node);
	if (ret == 0) {
		g_string_append_printf(reply, "%s@%s\n", node->image, argv[1]);
		g_message("%s: %s %s@%s", node->name, cmd, node->image,
			  argv[1]);
	} else {
		g_string_append_printf(reply, "%s: %s@%s: %s\n", cmd,
				       node->image, argv[1],
				       ret == -EEXIST ? "the name is taken" :
				       ret == -EINVAL ? "bad volume name" :
				       ret == -EROFS ? "the image is read-only" :
				       error->message);
	}
	ctl_cow_node_put(fs, node);
	return ret;
}

/*
 * Whether other volumes of image were made from its volume name (a
 * clone of a snapshot): then the delete is refused, naming them, as the
 * command line does for an image it reads itself (an image on a URL
 * source it cannot see from the node).  An image whose volumes cannot be
 * listed is left to the delete to report.
 */
static bool ctl_volume_has_users(struct dioloop_fs *fs, const char *image,
				 const char *name, GString *reply)
{
	g_autoptr(GString) users = g_string_new(NULL);
	GArray *vols = NULL;
	uint64_t id = 0;
	guint i, n = 0;

	if (dioloop_volumes_list(fs, image, &vols) < 0)
		return false;
	for (i = 0; i < vols->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(vols, struct backend_volume_info, i);

		if (!strcmp(v->name, name))
			id = v->id;
	}
	for (i = 0; id && i < vols->len; i++) {
		const struct backend_volume_info *v =
			&g_array_index(vols, struct backend_volume_info, i);

		if (v->parent == id)
			g_string_append_printf(users, "%s%s%s%s",
					       n++ ? ", " : "", image,
					       v->name[0] ? "@" : "", v->name);
	}
	g_array_unref(vols);
	if (n)
		g_string_append_printf(reply, "delete-volume: cannot delete "
				       "%s@%s: %s made from it (%s); delete "
				       "%s first, or convert it to an image "
				       "of its own\n", image, name, n == 1 ?
				       "another volume was" :
				       "other volumes were", users->str,
				       n == 1 ? "it" : "them");
	return n > 0;
}

/* delete-volume IMAGE@NAME: close the node, delete its volume. */
static int ctl_delete_volume(struct dioloop_fs *fs, int argc, char **argv,
			     GString *reply)
{
	bool scrubbing;
	struct dioloop_node *node, *img;
	g_autoptr(GError) error = NULL;
	struct backend *b;
	g_autofree char *volume = NULL, *image = NULL;
	int ret;

	if (argc != 1) {
		g_string_append(reply, "delete-volume: expected one node "
				       "name, IMAGE@VOLUME\n");
		return -EINVAL;
	}
	ret = ctl_node(fs, "delete-volume", argv[0], &node, reply);
	if (ret < 0)
		return ret;
	if (!node->cow || !node->volume) {
		g_string_append_printf(reply, "delete-volume: '%s' is %s\n",
				       argv[0], node->cow ?
				       "the image's default volume: remove "
				       "the image file instead" :
				       "not a volume of a cow image");
		dioloop_node_forget(fs, node->ino, 1);
		return node->cow ? -EBUSY : -EOPNOTSUPP;
	}
	volume = g_strdup(node->volume);
	image = g_strdup(node->image);	/* the node may go with its lookup */
	if (ctl_volume_has_users(fs, image, volume, reply)) {
		dioloop_node_forget(fs, node->ino, 1);
		return -EBUSY;
	}
	/* A scrub of the container reads every volume's map: closing one
	 * under it would pull its pages away. */
	g_mutex_lock(&fs->lock);
	scrubbing = node->lock && node->lock->scrubbing;
	g_mutex_unlock(&fs->lock);
	ret = scrubbing ? -EBUSY : dioloop_node_close_volume(fs, node);
	if (ret == 0)
		ret = ctl_node(fs, "delete-volume", node->image, &img, reply);
	dioloop_node_forget(fs, node->ino, 1);
	if (ret == -EBUSY && scrubbing) {
		g_string_append_printf(reply, "delete-volume: a scrub of %s "
				       "is running; try again when it "
				       "ended\n", image);
		return ret;
	}
	if (ret == -EBUSY) {
		g_string_append_printf(reply, "delete-volume: '%s' is in use "
				       "(open, I/O or a command on it)\n",
				       argv[0]);
		return ret;
	}
	if (ret < 0)
		return ret;
	b = dioloop_node_backend_get(img);
	ret = b ? backend_volume_delete(dioloop_node_volume_backend(b), volume,
					&error) : -ENOENT;
	if (b)
		dioloop_node_backend_put(img);
	dioloop_node_forget(fs, img->ino, 1);
	if (ret < 0) {
		g_string_append_printf(reply, "delete-volume: %s: %s\n",
				       argv[0], error ? error->message :
				       g_strerror(-ret));
		return ret;
	}
	g_message("%s: volume deleted", argv[0]);
	/* The kernel may still hold the name: let it go now. */
	if (fs->se)
		fuse_lowlevel_notify_inval_entry(fs->se, FUSE_ROOT_ID, argv[0],
						 strlen(argv[0]));
	g_string_append_printf(reply, "deleted %s\n", argv[0]);
	return 0;
}

/* A scrub in progress: where its findings go. */
struct ctl_scrub {
	struct dioloop_fs *fs;
	struct dioloop_image_lock *l;
	GString *bad;
	gint64 start_us;
	uint64_t rate;			/* bytes/s; 0: no limit */
};

/* Publish progress for scrub-status and stats.json.  Control thread. */
static bool ctl_scrub_progress(void *opaque,
			       const struct backend_scrub_progress *p)
{
	struct ctl_scrub *sc = opaque;

	g_mutex_lock(&sc->fs->lock);
	sc->l->scrub_done = p->done;
	sc->l->scrub_total = p->total;
	sc->l->scrub_bad = p->bad;
	g_mutex_unlock(&sc->fs->lock);
	backend_scrub_pace(sc->start_us, p, sc->rate);
	return true;
}

/* One bad block: a line of the reply.  Control thread. */
static void ctl_scrub_bad(void *opaque, const struct backend_bad_block *bad)
{
	struct ctl_scrub *sc = opaque;

	g_string_append_printf(sc->bad, "bad %s %llu %llu %s\n",
			       bad->volume[0] ? bad->volume : "-",
			       (unsigned long long)bad->lbn,
			       (unsigned long long)bad->pbn,
			       bad->error == -EBADMSG ? "checksum" : "io");
}

/* scrub NODE [rate=BYTES]: verify every data block of the node's
 * container, to the end, at most BYTES per second; reply: a summary line,
 * then one line per bad block. */
static int ctl_scrub(struct dioloop_fs *fs, int argc, char **argv,
		     GString *reply)
{
	struct backend_scrub_progress res = { 0 };
	g_autoptr(GError) error = NULL;
	struct dioloop_node *node;
	struct ctl_scrub sc = { .fs = fs };
	struct dioloop_image_lock unshared = { .fd = -1 };
	bool busy;
	int ret;

	if (argc == 2) {
		bool ok = !strncmp(argv[1], "rate=", 5);
		char *end = NULL;

		errno = 0;
		if (ok)
			sc.rate = g_ascii_strtoull(argv[1] + 5, &end, 10);
		if (!ok || errno || *end || end == argv[1] + 5) {
			g_string_append_printf(reply, "scrub: bad argument "
					       "\"%s\" (want rate=BYTES)\n",
					       argv[1]);
			return -EINVAL;
		}
	}
	if (argc < 1 || argc > 2) {
		g_string_append(reply, "scrub: expected one node name\n");
		return -EINVAL;
	}
	ret = ctl_cow_node(fs, "scrub", argv[0], &node, reply);
	if (ret < 0)
		return ret;
	/* An image reached by URL from a local source (a migration's
	 * destination) has no shared entry: its state lives here. */
	sc.l = node->lock ? node->lock : &unshared;
	g_mutex_lock(&fs->lock);
	busy = sc.l->scrubbing;
	if (!busy) {
		sc.l->scrubbing = true;
		sc.l->scrub_done = sc.l->scrub_total = sc.l->scrub_bad = 0;
	}
	g_mutex_unlock(&fs->lock);
	if (busy) {
		g_string_append_printf(reply, "scrub: a scrub of %s is "
				       "already running\n", node->image);
		ctl_cow_node_put(fs, node);
		return -EBUSY;
	}
	sc.bad = g_string_new(NULL);
	/* It may take long: the control pool gets a thread for the other
	 * commands meanwhile, or the scrub does not start. */
	ret = dioloop_io_long_begin(fs);
	if (ret == 0) {
		g_message("%s: scrub started", node->image);
		sc.start_us = g_get_monotonic_time();
		ret = backend_volume_scrub(
			dioloop_node_volume_backend(node->b),
			ctl_scrub_progress, ctl_scrub_bad, &sc, &res, &error);
		dioloop_io_long_end(fs);
	}
	g_mutex_lock(&fs->lock);
	sc.l->scrubbing = false;
	if (ret == 0) {
		sc.l->scrub_done = res.done;
		sc.l->scrub_total = res.total;
		sc.l->scrub_bad = res.bad;
	}
	g_mutex_unlock(&fs->lock);
	if (ret == 0) {
		g_message("%s: scrub: %llu blocks, %llu bad", node->image,
			  (unsigned long long)res.done,
			  (unsigned long long)res.bad);
		g_string_append_printf(reply, "scrubbed %llu blocks, %llu "
				       "bad\n", (unsigned long long)res.done,
				       (unsigned long long)res.bad);
		g_string_append_len(reply, sc.bad->str, (gssize)sc.bad->len);
	} else {
		g_string_append_printf(reply, "scrub: %s: %s\n", argv[0],
				       error ? error->message :
					       g_strerror(-ret));
	}
	g_string_free(sc.bad, TRUE);
	ctl_cow_node_put(fs, node);
	return ret;
}

/* scrub-status NODE: "running DONE TOTAL BAD" or "idle". */
static int ctl_scrub_status(struct dioloop_fs *fs, int argc, char **argv,
			    GString *reply)
{
	struct dioloop_node *node;
	struct dioloop_image_lock *l;
	int ret;

	if (argc != 1) {
		g_string_append(reply, "scrub-status: expected one node "
				       "name\n");
		return -EINVAL;
	}
	ret = ctl_cow_node(fs, "scrub-status", argv[0], &node, reply);
	if (ret < 0)
		return ret;
	l = node->lock;
	g_mutex_lock(&fs->lock);
	if (l && l->scrubbing)
		g_string_append_printf(reply, "running %llu %llu %llu\n",
				       (unsigned long long)l->scrub_done,
				       (unsigned long long)l->scrub_total,
				       (unsigned long long)l->scrub_bad);
	else
		g_string_append(reply, "idle\n");
	g_mutex_unlock(&fs->lock);
	ctl_cow_node_put(fs, node);
	return 0;
}

/* Run one command line (control.h).  Control thread. */
int dioloop_ctl_exec(struct dioloop_fs *fs, const char *line, GString *reply)
{
	g_auto(GStrv) argv = NULL;
	GError *err = NULL;
	int argc;

	if (!g_shell_parse_argv(line, &argc, &argv, &err)) {
		g_string_append_printf(reply, "cannot parse '%s': %s\n", line,
				       err->message);
		g_error_free(err);
		return -EINVAL;
	}
	if (!strcmp(argv[0], "limit"))
		return ctl_limit(fs, argc - 1, argv + 1, reply);
	if (!strcmp(argv[0], "fault"))
		return ctl_fault(fs, argc - 1, argv + 1, reply);
	if (!strcmp(argv[0], "snapshot") || !strcmp(argv[0], "clone"))
		return ctl_snapshot(fs, argc - 1, argv + 1,
				    !strcmp(argv[0], "clone"), reply);
	if (!strcmp(argv[0], "delete-volume"))
		return ctl_delete_volume(fs, argc - 1, argv + 1, reply);
	if (!strcmp(argv[0], "scrub"))
		return ctl_scrub(fs, argc - 1, argv + 1, reply);
	if (!strcmp(argv[0], "migrate"))
		return dioloop_ctl_migrate(fs, argc - 1, argv + 1, reply);
	if (!strcmp(argv[0], "migrate-status"))
		return dioloop_ctl_migrate_status(fs, argc - 1, argv + 1,
						  reply);
	if (!strcmp(argv[0], "migrate-cancel"))
		return dioloop_ctl_migrate_cancel(fs, argc - 1, argv + 1,
						  reply);
	if (!strcmp(argv[0], "scrub-status"))
		return ctl_scrub_status(fs, argc - 1, argv + 1, reply);
	g_string_append_printf(reply, "unknown command '%s' (limit, fault, "
			       "snapshot, clone, delete-volume, scrub, "
			       "scrub-status, migrate, migrate-status, "
			       "migrate-cancel)\n", argv[0]);
	return -EINVAL;
}
