/* SPDX-License-Identifier: MIT */
/*
 * Live migration in the daemon (migrate.h): one job per node, running in
 * its own thread over the mirror filter (backends/filter_mirror.h).
 *
 * The job stacks the mirror on the node's image (below any other
 * filter) with the node drained; the mirror marks what requests change,
 * so the request path knows nothing of migration.  The switch and an
 * abandoned migration take the mirror out of the stack, drained again,
 * before the engine is freed.
 *
 * Lifetime: node->migration points to the node's last job, which is never
 * freed while the node lives: the node's next migration reuses it (after
 * joining its thread), and it is freed with the node.  Until then it
 * keeps the last result for migrate-status.  A job's thread is joined as soon as it ends (by
 * the work that drops the job's lookup of its node), so no ended thread
 * keeps its stack.
 */
#include "fusefs/migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/filter_mirror.h"
#include "backends/size.h"
#include "backends/volume.h"
#include "fusefs/redirect.h"
#include "fusefs/source.h"

enum job_state {
	JOB_COPYING,
	JOB_SWITCHING,
	JOB_DONE,
	JOB_FAILED,
	JOB_CANCELLED,
};

static const char *const state_names[] = {
	[JOB_COPYING] = "copying",
	[JOB_SWITCHING] = "switching",
	[JOB_DONE] = "done",
	[JOB_FAILED] = "failed",
	[JOB_CANCELLED] = "cancelled",
};

struct dioloop_migration {
	struct dioloop_fs *fs;
	struct dioloop_node *node;	/* looked up and ctl_begin'd */
	char *dest;
	char *format;			/* "raw" or "cow" */
	struct migrate_opts opts;
	bool remove_source;
	bool created;			/* we made dest: remove on failure */
	struct stat made;		/* dest as created (local files) */

	/* The engine while copying; cleared and freed under lock (the
	 * write path reads it lock-free: it is freed only after a drain). */
	struct migration *_Atomic engine;
	atomic_bool cancel;		/* asked before or while copying */
	/* The mirror filter over the source while it is in the node's
	 * stack (then until closed after the switch). */
	struct backend *mirror;
	struct backend *dst;
	/* The destination file's lock (local destinations), taken when it
	 * is created, before anything else can open it: owned by the job
	 * until the switch gives it to the node. */
	struct dioloop_image_lock *dest_lock;
	struct dioloop_image_lock *old_lock;	/* the source's, after it */
	GThread *thread;		/* by jobs_lock: until joined */
	unsigned int generation;	/* runs of this job: written under
					 * jobs_lock with no thread running */

	GMutex lock;			/* state, message, last, dest,
					 * format, started, ended */
	gint64 started, ended;		/* monotonic us; ended 0: running */
	enum job_state state;
	char *message;
	struct migrate_progress last;	/* progress when the engine ended */
};

/* Every job of this process, by jobs_lock: at most one per node, freed
 * with its node (dioloop_node_migration_free) or at the end
 * (dioloop_migrations_free), so a node's pointer to its job never
 * dangles. */
static GMutex jobs_lock;
static GPtrArray *jobs;

static struct dioloop_migration *node_job(struct dioloop_node *node)
{
	return atomic_load(&node->migration);
}

static bool job_running(struct dioloop_migration *job);

bool dioloop_node_migrating(struct dioloop_node *node)
{
	return job_running(node_job(node));
}

/* Bytes a second from bytes copied in elapsed us. */
static uint64_t job_rate(uint64_t done, gint64 elapsed)
{
	return elapsed > 0 ? (uint64_t)((double)done * G_USEC_PER_SEC /
					(double)elapsed) : 0;
}

bool dioloop_node_migration_view(struct dioloop_node *node,
				 struct dioloop_migration_view *v)
{
	struct dioloop_migration *job = node_job(node);
	struct migrate_progress p;
	struct migration *m;
	gint64 elapsed;
	bool running;

	memset(v, 0, sizeof(*v));
	if (!job)
		return false;
	g_mutex_lock(&job->lock);
	running = job->state == JOB_COPYING || job->state == JOB_SWITCHING;
	if (running) {
		m = atomic_load(&job->engine);
		if (m)
			migration_get_progress(m, &p);
		else
			p = job->last;
		elapsed = g_get_monotonic_time() - job->started;
		v->phase = state_names[job->state];
		v->dest = g_strdup(job->dest);
		v->format = g_strdup(job->format);
		v->done = p.done;
		v->remaining = p.total > p.done ? p.total - p.done : 0;
		/* Before the engine exists: the whole image is ahead. */
		if (!m && !p.total)
			v->remaining = p.size;
		v->dirty = p.dirty;
		v->pass = p.passes ? p.passes : 1;
		v->rate = (double)job_rate(p.done, elapsed);
		v->elapsed_s = (double)elapsed / G_USEC_PER_SEC;
	}
	g_mutex_unlock(&job->lock);
	return running;
}

void dioloop_migration_view_clear(struct dioloop_migration_view *v)
{
	g_free(v->dest);
	g_free(v->format);
	memset(v, 0, sizeof(*v));
}

/* ---- the job ---- */

static void job_set(struct dioloop_migration *job, enum job_state state,
		    const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static void job_set(struct dioloop_migration *job, enum job_state state,
		    const char *fmt, ...)
{
	va_list ap;

	g_mutex_lock(&job->lock);
	job->state = state;
	if (state != JOB_COPYING && state != JOB_SWITCHING)
		job->ended = g_get_monotonic_time();
	if (fmt) {
		g_free(job->message);
		va_start(ap, fmt);
		job->message = g_strdup_vprintf(fmt, ap);
		va_end(ap);
	}
	g_mutex_unlock(&job->lock);
}

/* Fail a step of the job with err: 0 or -errno, *error saying why. */
static int job_fail(GError **error, int err, const char *fmt, ...)
	G_GNUC_PRINTF(3, 4);

static int job_fail(GError **error, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	g_propagate_error(error, g_error_new_valist(G_FILE_ERROR,
			  g_file_error_from_errno(-err), fmt, ap));
	va_end(ap);
	return err;
}

/* Create the destination with the node's size: 0 or -errno (*error). */
static int create_dest(struct dioloop_migration *job, uint64_t size,
		       GError **error)
{
	/* 0600 until the lock and the node's owner and mode are on it: no
	 * other user opens it meanwhile. */
	struct backend_create_args a = { .path = job->dest, .size = size,
					 .mode = 0600, .created = &job->made };
	g_autoptr(GError) created = NULL;
	int ret;

	ret = backend_create(job->format, &a, &created);
	if (ret == 0)
		return 0;
	if (backend_is_url(job->dest))
		return job_fail(error, ret, "creating %s: %s", job->dest,
				ret == -EEXIST ? "it exists" :
				g_strerror(-ret));
	if (!strcmp(job->format, "raw"))
		return job_fail(error, ret, "%s", g_strerror(-ret));
	return job_fail(error, ret, "%s", created->message);
}

/* The destination serves the node after the switch, and a node's mode
 * and owner are its file's: give it those of the file served now, so a
 * migration opens an image up to nobody and takes it from nobody. */
static int dest_take_owner(struct dioloop_migration *job)
{
	struct dioloop_image_lock *src = job->node->lock;
	int fd = job->dest_lock->fd;
	struct stat st;

	if (!src)
		return 0;	/* a remote source: 0600, the daemon's */
	if (fstat(src->fd, &st) < 0)
		return -errno;
	/* chown first: it clears set-id bits that chmod then sets. */
	if (fchown(fd, st.st_uid, st.st_gid) < 0 ||
	    fchmod(fd, st.st_mode & 07777) < 0)
		return -errno;
	return 0;
}

/* Lock the destination just created, as the node's image's: no other
 * name (a path inside the source, another daemon) may serve it.  Its
 * name must still lead to the file created: whoever may write its
 * directory could have put another there (and kept it open).  0 or
 * -errno (*error). */
static int lock_dest(struct dioloop_migration *job, GError **error)
{
	bool readonly = false;
	struct stat st;
	int fd, ret;

	if (backend_is_url(job->dest))
		return 0;
	fd = open(job->dest, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		ret = -errno;
	else
		ret = S_ISREG(st.st_mode) && st.st_dev == job->made.st_dev &&
		      st.st_ino == job->made.st_ino ? 0 : -ESTALE;
	if (ret < 0) {
		if (fd >= 0)
			close(fd);
		return job_fail(error, ret,
				"%s changed after it was created: %s",
				job->dest, g_strerror(-ret));
	}
	ret = dioloop_image_lock_get(job->fs, job->node->image,
				     job->node->image, fd, &st, &readonly,
				     &job->dest_lock);
	close(fd);
	if (ret == 0 && readonly) {
		dioloop_image_lock_put(job->fs, job->dest_lock);
		job->dest_lock = NULL;
		ret = -EACCES;
	}
	if (ret < 0)
		return job_fail(error, ret, "locking %s: %s", job->dest,
				g_strerror(-ret));
	ret = dest_take_owner(job);
	if (ret < 0)
		return job_fail(error, ret,
				"giving %s the image's owner and mode: %s",
				job->dest, g_strerror(-ret));
	return 0;
}

/* The redirect that makes the switch to job's destination durable. */
static int job_redirect_write(struct dioloop_migration *job)
{
	struct dioloop_redirect r = { .name = job->node->image,
				      .path = job->dest };
	struct stat st;
	int fd;

	/* The file under the image's name now, if any: a redirect stands
	 * only as long as that file does. */
	fd = dioloop_source_open_image(job->fs, job->node->image, &st);
	if (fd >= 0) {
		r.image_dev = (uint64_t)st.st_dev;
		r.image_ino = (uint64_t)st.st_ino;
		close(fd);
	}
	if (job->dest_lock) {
		if (fstat(job->dest_lock->fd, &st) < 0)
			return -errno;
		r.target_dev = (uint64_t)st.st_dev;
		r.target_ino = (uint64_t)st.st_ino;
	}
	return dioloop_redirect_write(job->fs, job->node->image, &r);
}

/* Put the mirror into the node's stack, on the image under any other
 * filter, with the node drained. */
static void job_mirror_insert(struct dioloop_migration *job)
{
	struct dioloop_node *node = job->node;

	dioloop_node_drain_begin(node);
	g_rw_lock_writer_lock(&node->b_lock);
	mirror_filter_insert(&node->b, job->mirror);
	g_rw_lock_writer_unlock(&node->b_lock);
	dioloop_node_drain_end(node);
}

/* Stop using the engine: clear the pointer, take the mirror out of the
 * node's stack (drained: no completion still uses it), keep the final
 * progress, free both. */
static void job_engine_free(struct dioloop_migration *job)
{
	struct dioloop_node *node = job->node;
	struct migration *m;

	g_mutex_lock(&job->lock);
	m = atomic_exchange(&job->engine, NULL);
	if (m)
		migration_get_progress(m, &job->last);
	g_mutex_unlock(&job->lock);
	if (job->mirror) {
		dioloop_node_drain_begin(node);
		g_rw_lock_writer_lock(&node->b_lock);
		if (job->mirror->inner)
			mirror_filter_remove(&node->b, job->mirror);
		g_rw_lock_writer_unlock(&node->b_lock);
		dioloop_node_drain_end(node);
		backend_close(job->mirror);
		job->mirror = NULL;
	}
	migration_free(m);
}

/* The switch: with the node drained.  0 or -errno (*error). */
static int job_switch(struct dioloop_migration *job, struct migration *m,
		      GError **error)
{
	struct dioloop_node *node = job->node;
	struct migrate_progress p;
	struct backend *old;
	int64_t size = backend_get_size(node->b);
	int ret;

	migration_get_progress(m, &p);
	if (size < 0 || (uint64_t)size != p.size)
		return job_fail(error, -EBUSY,
				"the node was resized meanwhile");
	ret = migration_finish(m);
	if (ret < 0)
		return job_fail(error, ret, "finishing the copy: %s",
				g_strerror(-ret));
	ret = job_redirect_write(job);
	if (ret < 0)
		return job_fail(error, ret, "recording the switch: %s",
				g_strerror(-ret));
	/* Users of the backend outside requests (stat, stats, control
	 * commands) hold b_lock: none sees the swap half done.  The
	 * destination takes the mirror's place in the stack. */
	g_rw_lock_writer_lock(&node->b_lock);
	ret = mirror_filter_switch(&node->b, job->mirror, &old);
	if (ret == 0)
		node->cow = backend_has_volumes(job->dst);
	g_rw_lock_writer_unlock(&node->b_lock);
	if (ret < 0)
		return job_fail(error, ret, "the copy did not finish");
	/* The lock follows the data: the node holds the destination's
	 * now; the source's goes when the old backend is closed. */
	g_mutex_lock(&job->fs->lock);
	node->switches++;
	job->old_lock = node->lock;
	node->lock = job->dest_lock;
	job->dest_lock = NULL;
	node->dev = 0;
	node->ino_served = 0;
	if (node->lock) {
		struct stat st;

		if (fstat(node->lock->fd, &st) == 0) {
			node->dev = (uint64_t)st.st_dev;
			node->ino_served = (uint64_t)st.st_ino;
		}
	}
	g_mutex_unlock(&job->fs->lock);
	job->dst = old;			/* closed by the job's end */
	/* From here on the node is the destination's; the engine must
	 * not be reached by its completions any more (none runs: the node
	 * is drained). */
	g_mutex_lock(&job->lock);
	migration_get_progress(m, &job->last);
	atomic_store(&job->engine, NULL);
	g_mutex_unlock(&job->lock);
	return 0;
}

/* The end of a job's run, after its thread: join it, drop the lookup. */
struct job_forget {
	struct dioloop_fs *fs;
	fuse_ino_t ino;
	struct dioloop_migration *job;	/* lives while the lookup is
					 * held */
	unsigned int generation;	/* the run whose thread to join */
};

static struct job_forget *job_forget_new(struct dioloop_migration *job)
{
	struct job_forget *f = g_new(struct job_forget, 1);

	f->fs = job->fs;
	f->ino = job->node->ino;
	f->job = job;
	/* Without jobs_lock: the job's thread calls this, and generation
	 * changes only after that thread was joined (under jobs_lock). */
	f->generation = job->generation;
	return f;
}

/* Join the thread of job's run generation unless someone else (the next
 * run, the unmount) took it already.  Not from that thread. */
static void job_reap(struct dioloop_migration *job, unsigned int generation)
{
	GThread *t = NULL;

	g_mutex_lock(&jobs_lock);
	if (job->generation == generation)
		t = g_steal_pointer(&job->thread);
	g_mutex_unlock(&jobs_lock);
	if (t)
		g_thread_join(t);
}

/* Reap the ended job's thread, then drop its lookup of its node, which
 * may free the node and the job with it.  Worker pool. */
static void job_forget_node(void *arg)
{
	struct job_forget *f = arg;

	job_reap(f->job, f->generation);
	dioloop_node_forget(f->fs, f->ino, 1);
	g_free(f);
}

static gpointer job_thread(gpointer opaque)
{
	struct dioloop_migration *job = opaque;
	struct dioloop_node *node = job->node;
	/* The destination serves the node after the switch: the mount's
	 * flags apply to it as they did to the source. */
	struct backend_file file = { .dirfd = -1 };
	struct backend_open_args args = {
		.path = job->dest,
		.aio = job->fs->aio,
		.flags = (job->fs->opts.growable ? BACKEND_OPEN_GROWABLE : 0) |
			 (job->fs->opts.sync ? BACKEND_OPEN_SYNC : 0),
	};
	g_autoptr(GError) error = NULL;
	struct migration *m = NULL;
	int64_t size = backend_get_size(node->b);
	int ret;

	if (size < 0) {
		ret = job_fail(&error, (int)size, "%s", g_strerror((int)-size));
		goto fail;
	}
	ret = create_dest(job, (uint64_t)size, &error);
	if (ret < 0)
		goto fail;
	job->created = true;
	ret = lock_dest(job, &error);
	if (ret == -ESTALE)
		job->created = false;	/* what is there now is not ours */
	if (ret < 0)
		goto fail;
	if (job->dest_lock) {
		file.fd = job->dest_lock->fd;
		args.file = &file;
	}
	if (atomic_load(&job->cancel)) {
		ret = -ECANCELED;
		goto fail;
	}
	ret = backend_open(job->format, &args, &job->dst);
	if (ret < 0) {
		job_fail(&error, ret, "opening %s: %s", job->dest,
			 g_strerror(-ret));
		goto fail;
	}
	if (backend_has_volumes(job->dst) && job->fs->opts.commit_ms >= 0)
		backend_volume_set_commit_interval(
			job->dst, (unsigned int)job->fs->opts.commit_ms, NULL);
	ret = migration_new(backend_below_filters(node->b), job->dst,
			    &job->opts, &m);
	if (ret < 0) {
		job_fail(&error, ret, "%s", g_strerror(-ret));
		goto fail;
	}
	ret = mirror_filter_open(m, &job->mirror);
	if (ret < 0) {
		job_fail(&error, ret, "stacking the mirror: %s",
			 g_strerror(-ret));
		goto fail;
	}
	job_mirror_insert(job);
	g_mutex_lock(&job->lock);
	atomic_store(&job->engine, m);
	/* A cancel that came before the engine existed. */
	if (atomic_load(&job->cancel))
		migration_cancel(m);
	g_mutex_unlock(&job->lock);
	g_message("%s: migrating to %s (%s)", node->name, job->dest,
		  job->format);
	ret = migration_copy(m);
	if (ret == 0) {
		job_set(job, JOB_SWITCHING, NULL);
		dioloop_node_drain_begin(node);
		/* From the redirect's write to the node's new identity, a
		 * lookup must not take the node for a replaced one. */
		dioloop_node_switch_begin(job->fs, node);
		ret = migration_cancelled(m) ? -ECANCELED :
					       job_switch(job, m, &error);
		dioloop_node_switch_end(job->fs, node);
		dioloop_node_drain_end(node);
	}
	if (ret < 0) {
		struct migrate_progress p;

		migration_get_progress(m, &p);
		if (!error && p.error)
			job_fail(&error, ret, "%s at byte %llu",
				 g_strerror(-p.error),
				 (unsigned long long)p.error_pos);
		goto fail;
	}
	backend_close(job->mirror);	/* out of the stack: holds nothing */
	job->mirror = NULL;
	migration_free(m);
	backend_close(job->dst);	/* the old source */
	job->dst = NULL;
	if (job->old_lock)
		dioloop_image_lock_put(job->fs, job->old_lock);
	job->old_lock = NULL;
	if (job->remove_source && unlinkat(job->fs->source_fd, node->image,
					   0) < 0)
		g_warning("%s: removing the source after the switch: %s",
			  node->name, g_strerror(errno));
	g_message("%s: switched to %s", node->name, job->dest);
	job_set(job, JOB_DONE, NULL);
	goto out;

fail:
	if (m) {
		job_engine_free(job);	/* frees m */
		m = NULL;
	}
	if (job->dst) {
		backend_close(job->dst);
		job->dst = NULL;
	}
	if (job->dest_lock)
		dioloop_image_lock_put(job->fs, job->dest_lock);
	job->dest_lock = NULL;
	if (job->created && backend_is_url(job->dest))
		backend_remove_url(job->dest, NULL);
	else if (job->created)
		unlink(job->dest);
	if (ret == -ECANCELED) {
		g_message("%s: migration to %s cancelled; the node stays on its source",
			  node->name, job->dest);
		job_set(job, JOB_CANCELLED, "cancelled");
	} else {
		g_warning("%s: migration to %s failed: %s; the node stays on its source",
			  node->name, job->dest,
			  error ? error->message : g_strerror(-ret));
		job_set(job, JOB_FAILED, "%s",
			error ? error->message : g_strerror(-ret));
	}
out:
	dioloop_node_ctl_end(job->fs, node);
	/* Not from this thread: the call joins it, and dropping the last
	 * reference frees the node and this job with it. */
	dioloop_io_call(job->fs, job_forget_node, job_forget_new(job));
	return NULL;
}

static void job_free(struct dioloop_migration *job)
{
	if (!job)
		return;
	if (job->thread)
		g_thread_join(job->thread);
	g_mutex_clear(&job->lock);
	g_free(job->message);
	g_free(job->dest);
	g_free(job->format);
	g_free(job);
}

/* ---- control commands ---- */

/* A node for a migrate command: looked up (the caller forgets it). */
static int migrate_node(struct dioloop_fs *fs, const char *cmd,
			const char *name, struct dioloop_node **node,
			GString *reply)
{
	int ret = dioloop_node_lookup(fs, name, node);

	if (ret < 0) {
		g_string_append_printf(reply, "%s: no node '%s'\n", cmd, name);
		return ret;
	}
	return 0;
}

/* Ask a job to stop: before its engine exists or while it copies. */
static void job_cancel(struct dioloop_migration *job)
{
	struct migration *m;

	atomic_store(&job->cancel, true);
	g_mutex_lock(&job->lock);
	m = atomic_load(&job->engine);
	if (m)
		migration_cancel(m);
	g_mutex_unlock(&job->lock);
}

static bool job_running(struct dioloop_migration *job)
{
	bool running;

	if (!job)
		return false;
	g_mutex_lock(&job->lock);
	running = job->state == JOB_COPYING || job->state == JOB_SWITCHING;
	g_mutex_unlock(&job->lock);
	return running;
}

/*
 * Make old (a node's ended job) run again as job (a new, unshared job
 * for the same node), which is freed: old's thread is joined, its last
 * result dropped.  Returns old.  jobs_lock held.
 */
static struct dioloop_migration *job_reuse(struct dioloop_migration *old,
					   struct dioloop_migration *job)
{
	GThread *t = g_steal_pointer(&old->thread);

	/* It ended (not running): what is left of it takes no lock we
	 * hold.  Its own reap finds the generation changed. */
	if (t)
		g_thread_join(t);
	old->generation++;
	g_mutex_lock(&old->lock);
	g_free(old->dest);
	g_free(old->format);
	g_free(old->message);
	old->dest = g_steal_pointer(&job->dest);
	old->format = g_steal_pointer(&job->format);
	old->message = NULL;
	old->opts = job->opts;
	old->remove_source = job->remove_source;
	old->created = false;
	atomic_store(&old->cancel, false);
	old->dst = NULL;
	old->state = JOB_COPYING;
	old->started = job->started;
	old->ended = 0;
	memset(&old->last, 0, sizeof(old->last));
	g_mutex_unlock(&old->lock);
	job_free(job);
	return old;
}

/* The source's format when none is asked for: cow for a cow image, raw
 * for the rest (an rbd image has volumes, its snapshots, but is raw
 * bytes). */
static const char *migrate_default_format(struct dioloop_node *node)
{
	struct backend *b, *vb;
	const char *format = "raw";

	if (!node->cow)
		return format;
	b = dioloop_node_backend_get(node);
	vb = b ? dioloop_node_volume_backend(b) : NULL;
	if (vb && !vb->ops->protocol)
		format = "cow";
	if (b)
		dioloop_node_backend_put(node);
	return format;
}

int dioloop_ctl_migrate(struct dioloop_fs *fs, int argc, char **argv,
			GString *reply)
{
	struct dioloop_migration *job, *old;
	GError *err = NULL;
	struct dioloop_node *node;
	struct stat st;
	int ret;

	if (argc < 2) {
		g_string_append(reply, "migrate: expected a node and a destination\n");
		return -EINVAL;
	}
	/* The switch records a redirect next to the image: a local source
	 * directory's business. */
	if (fs->remote) {
		g_string_append(reply, "migrate: not on a mount of a URL source (nfs://, rbd://)\n");
		return -EOPNOTSUPP;
	}
	job = g_new0(struct dioloop_migration, 1);
	g_mutex_init(&job->lock);
	job->fs = fs;
	job->dest = g_strdup(argv[1]);
	ret = dioloop_migrate_parse_opts(argc - 2, argv + 2, &job->format,
					    &job->opts, &job->remove_source,
					    reply);
	if (ret < 0)
		goto err_job;
	if (backend_is_url(job->dest)) {
		if (backend_check_url(job->dest, true, NULL) < 0) {
			g_string_append_printf(reply, "migrate: bad URL %s\n",
					       job->dest);
			ret = -EINVAL;
			goto err_job;
		}
		if (job->format && strcmp(job->format, "raw")) {
			g_string_append(reply, "migrate: a URL destination (nfs://, rbd://) holds a raw image (format=cow needs a local path)\n");
			ret = -EINVAL;
			goto err_job;
		}
		/* A raw image on a protocol is its backend's file. */
		g_free(job->format);
		job->format = g_strdup(backend_probe(job->dest));
	} else if (!g_path_is_absolute(job->dest)) {
		g_string_append(reply, "migrate: the destination must be an absolute path\n");
		ret = -EINVAL;
		goto err_job;
	}
	if (!backend_is_url(job->dest) && lstat(job->dest, &st) == 0) {
		g_string_append_printf(reply, "migrate: %s exists; give a new path\n",
				       job->dest);
		ret = -EEXIST;
		goto err_job;
	}
	if (job->remove_source && backend_is_url(job->dest)) {
		g_string_append(reply, "migrate: remove_source needs a local destination (the source stays)\n");
		ret = -EOPNOTSUPP;
		goto err_job;
	}
	ret = migrate_node(fs, "migrate", argv[0], &node, reply);
	if (ret < 0)
		goto err_job;
	if (node->volume) {
		g_string_append_printf(reply, "migrate: '%s' is a volume of a cow image; migrate the image's node\n",
				       node->name);
		ret = -EOPNOTSUPP;
		goto err_node;
	}
	if (node->readonly) {
		g_string_append_printf(reply, "migrate: '%s' is read-only\n",
				       node->name);
		ret = -EROFS;
		goto err_node;
	}
	if (!job->format)
		job->format = g_strdup(migrate_default_format(node));
	ret = dioloop_migrate_check_node(fs, node, reply);
	if (ret < 0)
		goto err_node;
	ret = dioloop_node_ctl_begin(fs, node);
	if (ret < 0) {
		g_string_append_printf(reply, "migrate: node '%s' was deleted\n",
				       node->name);
		goto err_node;
	}
	g_mutex_lock(&jobs_lock);
	old = node_job(node);
	if (job_running(old)) {
		g_autofree char *busy_with = NULL;

		g_mutex_lock(&old->lock);
		busy_with = g_strdup(old->dest);
		g_mutex_unlock(&old->lock);
		g_mutex_unlock(&jobs_lock);
		dioloop_node_ctl_end(fs, node);
		g_string_append_printf(reply, "migrate: a migration to %s is running on '%s' (dioloop migrate --status, --cancel)\n",
				       busy_with, node->name);
		ret = -EBUSY;
		goto err_node;
	}
	job->node = node;
	job->state = JOB_COPYING;
	job->started = g_get_monotonic_time();
	if (old) {
		/* The write path may still hold the node's pointer to its
		 * job: the job is reused, never freed while the node lives. */
		job = job_reuse(old, job);
	} else {
		if (!jobs)
			jobs = g_ptr_array_new();
		g_ptr_array_add(jobs, job);
		atomic_store(&node->migration, job);
	}
	job->thread = g_thread_try_new("migrate", job_thread, job, &err);
	if (!job->thread) {
		job_set(job, JOB_FAILED, "cannot start its thread: %s",
			err->message);
		g_mutex_unlock(&jobs_lock);
		g_string_append_printf(reply, "migrate: cannot start a thread for '%s': %s\n",
				       node->name, err->message);
		g_error_free(err);
		dioloop_node_ctl_end(fs, node);
		dioloop_node_forget(fs, node->ino, 1);
		return -EAGAIN;
	}
	g_mutex_unlock(&jobs_lock);
	g_string_append_printf(reply, "started %s -> %s\n", node->name,
			       job->dest);
	/* The job keeps the lookup until its thread ends. */
	return 0;

err_node:
	dioloop_node_forget(fs, node->ino, 1);
err_job:
	job_free(job);
	return ret;
}

/* The node a command that takes one node name acts on: 0 (*node holds
 * one lookup) or -errno after a reply. */
static int migrate_one_node(struct dioloop_fs *fs, const char *cmd, int argc,
			    char **argv, struct dioloop_node **node,
			    GString *reply)
{
	if (argc != 1) {
		g_string_append_printf(reply, "%s: expected a node\n", cmd);
		return -EINVAL;
	}
	return migrate_node(fs, cmd, argv[0], node, reply);
}

int dioloop_ctl_migrate_status(struct dioloop_fs *fs, int argc, char **argv,
			       GString *reply)
{
	struct dioloop_migration *job;
	struct dioloop_node *node;
	struct migrate_progress p;
	struct migration *m;
	gint64 elapsed;
	int ret;

	ret = migrate_one_node(fs, "migrate-status", argc, argv, &node, reply);
	if (ret < 0)
		return ret;
	g_mutex_lock(&jobs_lock);
	job = node_job(node);
	if (!job) {
		g_string_append(reply, "idle\n");
		goto out;
	}
	g_mutex_lock(&job->lock);
	m = atomic_load(&job->engine);
	if (m)
		migration_get_progress(m, &p);
	else
		p = job->last;
	elapsed = (job->ended ? job->ended : g_get_monotonic_time()) -
		  job->started;
	g_string_append_printf(reply, "%s done=%llu total=%llu dirty=%llu passes=%u retried=%llu failed=%llu bad=%llu rate=%llu elapsed_ms=%lld\n",
			       state_names[job->state],
			       (unsigned long long)p.done,
			       (unsigned long long)p.total,
			       (unsigned long long)p.dirty, p.passes,
			       (unsigned long long)p.ranges_retried,
			       (unsigned long long)p.ranges_failed,
			       (unsigned long long)p.bad_blocks,
			       (unsigned long long)job_rate(p.done, elapsed),
			       (long long)(elapsed / 1000));
	if (job->message && (job->state == JOB_FAILED ||
			     job->state == JOB_CANCELLED))
		g_string_append_printf(reply, "message: %s\n", job->message);
	g_string_append_printf(reply, "dest: %s %s\n", job->format,
			       job->dest);
	g_mutex_unlock(&job->lock);
out:
	g_mutex_unlock(&jobs_lock);
	dioloop_node_forget(fs, node->ino, 1);
	return 0;
}

int dioloop_ctl_migrate_cancel(struct dioloop_fs *fs, int argc, char **argv,
			       GString *reply)
{
	struct dioloop_migration *job;
	struct dioloop_node *node;
	int ret;

	ret = migrate_one_node(fs, "migrate-cancel", argc, argv, &node, reply);
	if (ret < 0)
		return ret;
	g_mutex_lock(&jobs_lock);
	job = node_job(node);
	if (job_running(job)) {
		job_cancel(job);
		g_string_append_printf(reply, "cancelling %s\n", node->name);
	} else {
		g_string_append_printf(reply, "migrate-cancel: no migration of '%s' is running\n",
				       node->name);
		ret = -EINVAL;
	}
	g_mutex_unlock(&jobs_lock);
	dioloop_node_forget(fs, node->ino, 1);
	return ret;
}

void dioloop_migrations_stop(struct dioloop_fs *fs)
{
	GPtrArray *threads = g_ptr_array_new();
	guint i;

	g_mutex_lock(&jobs_lock);
	for (i = 0; jobs && i < jobs->len; i++) {
		struct dioloop_migration *job = jobs->pdata[i];

		if (job->fs != fs)
			continue;
		job_cancel(job);
		if (job->thread)
			g_ptr_array_add(threads, g_steal_pointer(&job->thread));
	}
	g_mutex_unlock(&jobs_lock);
	/* Outside the lock: a job's thread takes it to end. */
	for (i = 0; i < threads->len; i++)
		g_thread_join(threads->pdata[i]);
	g_ptr_array_free(threads, TRUE);
}

void dioloop_migrations_free(struct dioloop_fs *fs)
{
	GPtrArray *mine = g_ptr_array_new();
	guint i;

	g_mutex_lock(&jobs_lock);
	for (i = 0; jobs && i < jobs->len;) {
		if (((struct dioloop_migration *)jobs->pdata[i])->fs == fs)
			g_ptr_array_add(mine, g_ptr_array_steal_index(jobs, i));
		else
			i++;
	}
	g_mutex_unlock(&jobs_lock);
	for (i = 0; i < mine->len; i++)
		job_free(mine->pdata[i]);
	g_ptr_array_free(mine, TRUE);
}

void dioloop_node_migration_free(struct dioloop_node *node)
{
	struct dioloop_migration *job;

	/* The node goes: no request reaches its job any more.  A job
	 * whose thread is still being joined (the unmount stopping it) is
	 * left to dioloop_migrations_free. */
	g_mutex_lock(&jobs_lock);
	job = atomic_exchange(&node->migration, NULL);
	if (job && !job->thread && !job_running(job))
		g_ptr_array_remove_fast(jobs, job);
	else
		job = NULL;
	g_mutex_unlock(&jobs_lock);
	job_free(job);
}
