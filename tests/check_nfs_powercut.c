/* SPDX-License-Identifier: MIT */
/*
 * Power cuts of the nfs backend, simulated from the server's view.  For
 * an NFS image a power cut is a server restart: the server keeps what it
 * answered FILE_SYNC (or DATA_SYNC), and the UNSTABLE writes that a
 * COMMIT sent after their answer returned with the same write verifier;
 * anything else it may have lost, kept, or kept in part.
 *
 * A recorder (iorec.h, remote events) logs what the backend heard from
 * the server: every WRITE answer (range, data, stable or not, verifier),
 * every COMMIT sent and answered (verifier), and the backend's flushes,
 * while a seeded workload runs batches of asynchronous writes (sizes from
 * a byte to more than one wsize, unaligned, overlapping earlier batches)
 * and flushes against a real server that is restarted once in the middle
 * (a new verifier: the backend must send its uncommitted writes again).
 * The workload logs into the same sequence when it starts a write and
 * when a flush returned.
 *
 * Each cut point (a position in that log) becomes the image as a server
 * crash there could have left it: the written ranges replayed in log
 * order from the zeros the image was created with, every durable one
 * whole, every other one dropped, applied, or torn at 512 bytes of the
 * file (random).  At each cut, every byte holds what the workload wrote
 * up to the last flush that returned before the cut (a model of the
 * writes), or what a write started after that flush gave it.
 *
 * The server tests need a server (tests/integration/test-powercut-nfs.sh
 * starts nfs-ganesha and sets DIOLOOP_NFS_URL, DIOLOOP_NFS_EXPORT and
 * DIOLOOP_NFS_CTL as for check_nfs); without one only the replay rules
 * are checked, on a made-up log.  DIOLOOP_POWERCUT_CUTS=N checks N cuts
 * (default 300, scaled by DIOLOOP_TEST_SCALE); DIOLOOP_TEST_SEED repeats
 * a run.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/iorec.h"
#include "backends/nfs/nfs.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define SECTOR 512u
#define IMG_SIZE (8 * MiB)
#define MAX_OP (1536 * KiB)	/* more than one wsize */
#define MAX_BATCH 6
#define IMG_NAME "powercut.img"

/* ---- the recorder ---- */

enum nrec_kind {
	NREC_WRITE,		/* the server took len bytes at off */
	NREC_COMMIT_SENT,
	NREC_COMMIT,		/* a COMMIT answered with verf */
	NREC_FLUSH_BEGIN,	/* the backend's flush rounds */
	NREC_FLUSH_END,
	NREC_OP_BEGIN,		/* the workload submits write number op */
	NREC_USER_FLUSH,	/* a flush returned 0 after writes [0, op) */
};

struct nrec {
	uint8_t kind;		/* enum nrec_kind */
	bool stable;
	int32_t res;
	uint32_t len;
	uint32_t op;
	uint64_t off;
	uint64_t verf;
	size_t data;		/* offset of the bytes in nrecorder.data */
};

struct nrecorder {
	struct dioloop_iorec hook;	/* first member */
	GMutex lock;
	GArray *recs;			/* struct nrec; by lock */
	GByteArray *data;		/* by lock */
	char *store;			/* the URL recorded */
};

static void nrec_append(struct nrecorder *r, const struct nrec *x)
{
	g_mutex_lock(&r->lock);
	g_array_append_val(r->recs, *x);
	g_mutex_unlock(&r->lock);
}

/* The hook: what the backend heard about r->store. */
static void nrec_remote(struct dioloop_iorec *h,
			const struct dioloop_iorec_remote *ev)
{
	struct nrecorder *r = (struct nrecorder *)h;
	struct nrec x = { .off = ev->off, .len = ev->len, .res = ev->res,
			  .stable = ev->stable };

	if (strcmp(ev->store, r->store))
		return;
	memcpy(&x.verf, ev->verf, sizeof(x.verf));
	switch (ev->kind) {
	case DIOLOOP_IOREC_REMOTE_WRITE:
		x.kind = NREC_WRITE;
		break;
	case DIOLOOP_IOREC_REMOTE_COMMIT_SENT:
		x.kind = NREC_COMMIT_SENT;
		break;
	case DIOLOOP_IOREC_REMOTE_COMMIT:
		x.kind = NREC_COMMIT;
		break;
	case DIOLOOP_IOREC_REMOTE_FLUSH_BEGIN:
		x.kind = NREC_FLUSH_BEGIN;
		break;
	default:
		x.kind = NREC_FLUSH_END;
		break;
	}
	g_mutex_lock(&r->lock);
	if (x.kind == NREC_WRITE) {
		x.data = r->data->len;
		g_byte_array_append(r->data, ev->data, ev->len);
	}
	g_array_append_val(r->recs, x);
	g_mutex_unlock(&r->lock);
}

static struct nrecorder *nrecorder_new(const char *store)
{
	struct nrecorder *r = g_new0(struct nrecorder, 1);

	r->hook.remote = nrec_remote;
	g_mutex_init(&r->lock);
	r->recs = g_array_new(FALSE, FALSE, sizeof(struct nrec));
	r->data = g_byte_array_new();
	r->store = g_strdup(store);
	return r;
}

static void nrecorder_free(struct nrecorder *r)
{
	g_array_free(r->recs, TRUE);
	g_byte_array_free(r->data, TRUE);
	g_mutex_clear(&r->lock);
	g_free(r->store);
	g_free(r);
}

static const struct nrec *nrec_at(const struct nrecorder *r, guint i)
{
	return &g_array_index(r->recs, struct nrec, i);
}

static guint nrec_count(const struct nrecorder *r, enum nrec_kind kind)
{
	guint i, n = 0;

	for (i = 0; i < r->recs->len; i++)
		n += nrec_at(r, i)->kind == kind;
	return n;
}

static guint nrec_stable_writes(const struct nrecorder *r)
{
	guint i, n = 0;

	for (i = 0; i < r->recs->len; i++)
		n += nrec_at(r, i)->kind == NREC_WRITE && nrec_at(r, i)->stable;
	return n;
}

/* ---- the replay ---- */

/*
 * For every record, the position from which it is durable (writes only;
 * G_MAXUINT: never): a stable write from its own answer, an unstable one
 * from the first answer to a COMMIT sent after its answer that carries
 * its verifier.  A COMMIT answer belongs to the last COMMIT sent before
 * it (the backend has one out at a time; one lost with its connection
 * has no answer).
 */
static guint *durable_points(const struct nrecorder *r)
{
	guint *at = g_new(guint, r->recs->len + 1);
	GArray *open = g_array_new(FALSE, FALSE, sizeof(guint));
	guint i, k, sent = G_MAXUINT;

	for (i = 0; i < r->recs->len; i++) {
		const struct nrec *x = nrec_at(r, i);

		at[i] = G_MAXUINT;
		if (x->kind == NREC_WRITE && x->stable) {
			at[i] = i;
		} else if (x->kind == NREC_WRITE) {
			g_array_append_val(open, i);
		} else if (x->kind == NREC_COMMIT_SENT) {
			sent = i;
		} else if (x->kind == NREC_COMMIT && sent != G_MAXUINT) {
			for (k = 0; k < open->len;) {
				guint w = g_array_index(open, guint, k);

				if (w < sent && nrec_at(r, w)->verf == x->verf) {
					at[w] = i;
					g_array_remove_index(open, k);
				} else {
					k++;
				}
			}
		}
	}
	g_array_free(open, TRUE);
	return at;
}

/* How a cut went, for messages. */
struct cut_info {
	guint cut, nr_recs;
	guint durable, uncertain, dropped, torn;
	guint flushed, started;		/* writes [0, flushed) flushed */
};

#define CUT_FMT "cut at %u of %u (%u writes durable, %u uncertain: %u dropped, %u torn; writes [0,%u) flushed, [%u,%u) after)"
#define CUT_ARGS(c) (c)->cut, (c)->nr_recs, (c)->durable, (c)->uncertain, \
	(c)->dropped, (c)->torn, (c)->flushed, (c)->flushed, (c)->started

/* Apply the part of write x inside [from, to) of the file. */
static void apply_part(unsigned char *img, const struct nrecorder *r,
		       const struct nrec *x, uint64_t from, uint64_t to)
{
	from = MAX(from, x->off);
	to = MIN(to, x->off + x->len);
	if (from < to)
		memcpy(img + from, r->data->data + x->data + (from - x->off),
		       to - from);
}

/*
 * From where each write no longer varies between cuts: once durable, or
 * once a later write that covers all of it is (it is then overwritten
 * in every replay: the resend of a write a restart lost, for one).
 */
static guint *settled_points(const struct nrecorder *r, const guint *at)
{
	guint *settled = g_new(guint, r->recs->len + 1);
	guint i, j;

	for (i = 0; i < r->recs->len; i++) {
		const struct nrec *x = nrec_at(r, i);

		settled[i] = at[i];
		if (x->kind != NREC_WRITE)
			continue;
		for (j = i + 1; j < r->recs->len; j++) {
			const struct nrec *y = nrec_at(r, j);

			if (y->kind == NREC_WRITE && y->off <= x->off &&
			    x->off + x->len <= y->off + y->len)
				settled[i] = MIN(settled[i], at[j]);
		}
	}
	return settled;
}

/* The cuts of one log.  Cuts in increasing order reuse base (what is
 * settled at a cut stays settled at every later one). */
struct replay {
	const struct nrecorder *r;
	guint *at;		/* durable_points() */
	guint *settled;		/* settled_points() */
	unsigned char *base;	/* the records [0, based), all settled at */
	guint base_cut;		/* the cut it was last extended for */
	guint based, base_writes;
};

static void replay_init(struct replay *rp, const struct nrecorder *r)
{
	guint i;

	rp->r = r;
	rp->at = durable_points(r);
	rp->settled = settled_points(r, rp->at);
	rp->base = g_malloc0(IMG_SIZE);
	rp->based = rp->base_writes = rp->base_cut = 0;
	for (i = 0; i < r->recs->len; i++) {
		const struct nrec *x = nrec_at(r, i);

		ck_assert_msg(x->kind != NREC_WRITE ||
				      x->off + x->len <= IMG_SIZE,
			      "a write answered at %llu+%u is inside the image",
			      (unsigned long long)x->off, x->len);
	}
}

static void replay_clear(struct replay *rp)
{
	g_free(rp->at);
	g_free(rp->settled);
	g_free(rp->base);
}

/*
 * The image a server crash at cut leaves, into img (IMG_SIZE bytes, the
 * image was created sparse): the writes before cut in log order, durable
 * ones whole, the others dropped, applied, or torn (each 512-byte sector
 * of the file they touch kept or not).
 */
static void replay_cut(struct replay *rp, unsigned char *img, guint cut,
		       struct test_rng *rng, struct cut_info *ci)
{
	const struct nrecorder *r = rp->r;
	guint i;

	if (cut < rp->base_cut) {
		memset(rp->base, 0, IMG_SIZE);
		rp->based = rp->base_writes = 0;
	}
	rp->base_cut = cut;
	for (; rp->based < cut; rp->based++) {
		const struct nrec *x = nrec_at(r, rp->based);

		if (x->kind != NREC_WRITE)
			continue;
		if (rp->settled[rp->based] >= cut)
			break;
		apply_part(rp->base, r, x, 0, IMG_SIZE);
		rp->base_writes++;
	}
	memcpy(img, rp->base, IMG_SIZE);
	ci->durable = rp->base_writes;
	for (i = rp->based; i < cut; i++) {
		const struct nrec *x = nrec_at(r, i);
		unsigned int how;
		uint64_t s;

		if (x->kind != NREC_WRITE)
			continue;
		if (rp->at[i] < cut) {
			ci->durable++;
			apply_part(img, r, x, 0, IMG_SIZE);
			continue;
		}
		ci->uncertain++;
		how = (unsigned int)test_rng_range(rng, 0, 7);
		if (how < 2) {
			ci->dropped++;
		} else if (how == 2) {
			ci->torn++;
			for (s = x->off / SECTOR * SECTOR; s < x->off + x->len;
			     s += SECTOR)
				if (test_rng_next(rng) % 2)
					apply_part(img, r, x, s, s + SECTOR);
		} else {
			apply_part(img, r, x, 0, IMG_SIZE);
		}
	}
}

/* ---- the workload and its model ---- */

struct op {
	uint64_t pos;
	uint32_t len;
	uint64_t seed;		/* of its data */
};

static void op_data(const struct op *o, unsigned char *buf)
{
	struct test_rng rng = { o->seed };

	test_rng_fill(&rng, buf, o->len);
}

static struct op op_random(struct test_rng *rng)
{
	struct op o = { 0 };
	unsigned int k = (unsigned int)test_rng_range(rng, 0, 99);
	size_t len = k < 45 ? test_rng_range(rng, 1, 8 * KiB) :
		     k < 90 ? test_rng_range(rng, 1, 128 * KiB) :
			      test_rng_range(rng, 128 * KiB, MAX_OP);

	if (test_rng_next(rng) % 3 == 0)
		len = (len + SECTOR - 1) / SECTOR * SECTOR;
	o.len = (uint32_t)len;
	o.pos = test_rng_range(rng, 0, IMG_SIZE - len);
	if (test_rng_next(rng) % 3 == 0)
		o.pos &= ~(uint64_t)4095;
	o.seed = test_rng_next(rng);
	return o;
}

static bool ops_overlap(const struct op *a, const struct op *b)
{
	return a->pos < b->pos + b->len && b->pos < a->pos + a->len;
}

/* An asynchronous write of an op's data, in bio_vecs of a page. */
struct aio_op {
	struct op o;
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec *bvec;
	unsigned char *buf;
	ssize_t res;
	atomic_bool done;
};

static void aio_done(struct kiocb *iocb, ssize_t res)
{
	struct aio_op *a = iocb->ki_private;

	a->res = res;
	atomic_store(&a->done, true);
}

static void aio_submit(struct backend *b, struct aio_op *a,
		       const struct op *o)
{
	size_t pages = (o->len + 4095) / 4096, i;
	ssize_t r;

	memset(a, 0, sizeof(*a));
	a->o = *o;
	a->buf = aligned_alloc(4096, pages * 4096);
	a->bvec = g_new(struct bio_vec, pages);
	op_data(o, a->buf);
	for (i = 0; i < pages; i++)
		a->bvec[i] = (struct bio_vec){ a->buf + i * 4096,
					       (unsigned)MIN((size_t)4096,
							     o->len - i * 4096),
					       0 };
	iov_iter_init_bvec(&a->iter, a->bvec, pages, o->len, 0);
	a->iocb = (struct kiocb){ .ki_rw = DIOLOOP_WRITE, .ki_pos = o->pos,
				  .ki_iter = &a->iter,
				  .ki_complete = aio_done, .ki_private = a };
	r = backend_direct_IO_bvec(b, &a->iocb);
	if (r != -EIOCBQUEUED) {
		a->res = r;
		atomic_store(&a->done, true);
	}
}

static void aio_wait_free(struct aio_op *a)
{
	int64_t end = g_get_monotonic_time() + 120 * G_USEC_PER_SEC;

	while (!atomic_load(&a->done)) {
		ck_assert_msg(g_get_monotonic_time() < end,
			      "a write did not complete within 120 s");
		g_usleep(500);
	}
	ck_assert_msg(a->res == (ssize_t)a->o.len,
		      "write of %u bytes at %llu: expected %u, got %zd",
		      a->o.len, (unsigned long long)a->o.pos, a->o.len, a->res);
	free(a->buf);
	g_free(a->bvec);
}

/* ---- the server ---- */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set", name);
	return v;
}

static int server_ctl(const char *what)
{
	g_autofree char *cmd = g_strdup_printf("%s %s", env("DIOLOOP_NFS_CTL"),
					       what);

	return system(cmd);
}

struct restart {
	GThread *thread;
	atomic_bool done;
	int status;
};

static gpointer restart_thread(gpointer opaque)
{
	struct restart *rs = opaque;

	/* Down over a second: ganesha's write verifier is its start time
	 * in seconds. */
	rs->status = server_ctl("stop");
	g_usleep(G_USEC_PER_SEC * 5 / 4);
	if (rs->status == 0)
		rs->status = server_ctl("start");
	atomic_store(&rs->done, true);
	return NULL;
}

/* ---- the run ---- */

/* How many cuts: $DIOLOOP_POWERCUT_CUTS, or n scaled. */
static unsigned int nr_cuts(unsigned int n)
{
	const char *e = getenv("DIOLOOP_POWERCUT_CUTS");

	if (e && *e)
		return (unsigned int)MAX(strtoul(e, NULL, 10), 1ul);
	return test_iterations(n);
}

/* One batch of non-overlapping writes in flight at once, then maybe a
 * flush (never when no_flush). */
static void run_batch(struct backend *b, struct nrecorder *r, GArray *ops,
		      struct test_rng *rng, bool no_flush)
{
	struct aio_op a[MAX_BATCH];
	struct op batch[MAX_BATCH];
	unsigned int n = (unsigned int)test_rng_range(rng, 1, MAX_BATCH), i, j;
	unsigned int tries;
	int ret;

	for (i = 0; i < n; i++) {
		bool clash = true;

		for (tries = 0; clash && tries < 20; tries++) {
			batch[i] = op_random(rng);
			clash = false;
			for (j = 0; j < i; j++)
				clash |= ops_overlap(&batch[i], &batch[j]);
		}
		if (clash)
			break;	/* no room left: send the ones that fit */
	}
	n = i;
	for (i = 0; i < n; i++) {
		nrec_append(r, &(struct nrec){ .kind = NREC_OP_BEGIN,
					       .op = ops->len });
		g_array_append_val(ops, batch[i]);
		aio_submit(b, &a[i], &batch[i]);
	}
	for (i = 0; i < n; i++)
		aio_wait_free(&a[i]);
	if (!no_flush && test_rng_range(rng, 0, 99) < 25) {
		ret = backend_flush(b);
		ck_assert_msg(ret == 0, "flush: expected 0, got %d", ret);
		nrec_append(r, &(struct nrec){ .kind = NREC_USER_FLUSH,
					       .op = ops->len });
	}
}

/*
 * The workload on a fresh image: batches, the server restarted in the
 * middle (writes in flight and uncommitted ones retained), a final
 * flush; the file on the server must then hold every write.
 */
static void run_workload(const char *url, const char *path,
			 struct nrecorder *r, GArray *ops, struct test_rng *rng,
			 struct nfs_backend_stats *stp)
{
	struct backend_open_args args = { .path = url };
	struct restart rs = { 0 };
	struct nfs_backend_stats st;
	unsigned char *model = g_malloc0(IMG_SIZE), *buf = g_malloc(MAX_OP);
	unsigned int i, before = 40, after = 40;
	gchar *disk;
	gsize n;
	struct backend *b;
	int ret;

	unlink(path);
	ret = nfs_image_create(url, IMG_SIZE, true);
	ck_assert_msg(ret == 0, "create %s: %s", url, g_strerror(-ret));
	atomic_store(&dioloop_iorec, &r->hook);
	ret = backend_open("nfs", &args, &b);
	ck_assert_msg(ret == 0, "open %s: %s", url, g_strerror(-ret));
	for (i = 0; i < before; i++)
		run_batch(b, r, ops, rng, i == before - 1);
	/*
	 * The last batch's writes are retained, uncommitted; more go out
	 * during the restart, with no flush (its COMMIT could still reach
	 * the old server): the first COMMIT after it must see a new
	 * verifier.  A few batches only: the cuts replay every write
	 * since the last flush.
	 */
	rs.thread = g_thread_new("restart", restart_thread, &rs);
	for (i = 0; i < 10 && !atomic_load(&rs.done); i++)
		run_batch(b, r, ops, rng, true);
	g_thread_join(rs.thread);
	ck_assert_msg(rs.status == 0, "server restart failed: %d", rs.status);
	for (i = 0; i < after; i++)
		run_batch(b, r, ops, rng, false);
	ret = backend_flush(b);
	ck_assert_msg(ret == 0, "final flush: expected 0, got %d", ret);
	nrec_append(r, &(struct nrec){ .kind = NREC_USER_FLUSH,
				       .op = ops->len });
	nfs_backend_get_stats(b, &st);
	*stp = st;
	backend_close(b);
	atomic_store(&dioloop_iorec, NULL);
	fprintf(stderr, "workload: %u writes, %u records (%u WRITE answers, %u stable; %u COMMITs answered; %u flushes, %u flush rounds), %.1f MiB; reconnects %llu, verifier changes %llu, resent %llu writes\n",
		ops->len, r->recs->len, nrec_count(r, NREC_WRITE),
		nrec_stable_writes(r), nrec_count(r, NREC_COMMIT),
		nrec_count(r, NREC_USER_FLUSH), nrec_count(r, NREC_FLUSH_END),
		r->data->len / (double)MiB, (unsigned long long)st.reconnects,
		(unsigned long long)st.verifier_changes,
		(unsigned long long)st.resent_writes);

	/* Everything flushed is on the server now. */
	for (i = 0; i < ops->len; i++) {
		const struct op *o = &g_array_index(ops, struct op, i);

		op_data(o, buf);
		memcpy(model + o->pos, buf, o->len);
	}
	ck_assert_msg(g_file_get_contents(path, &disk, &n, NULL),
		      "read %s from the export", path);
	ck_assert_msg(n == IMG_SIZE && !memcmp(disk, model, IMG_SIZE),
		      "the file on the server holds every write after the final flush");
	g_free(disk);
	g_free(model);
	g_free(buf);
}

#define CHUNK 4096u
#define NR_CHUNKS (IMG_SIZE / CHUNK)

/* What a cut expects: the model after writes [0, model_ops). */
struct expect {
	unsigned char *model;
	guint model_ops;
	unsigned char *buf;
	bool *ok;			/* per byte, in chunks that differ */
	bool differs[NR_CHUNKS];
};

/* The first byte of img that holds neither the flushed model's value
 * nor one that a write of [flushed, started) gave it; -1 when none. */
static int64_t cut_mismatch(struct expect *e, const unsigned char *img,
			    GArray *ops, guint flushed, guint started)
{
	bool any = false;
	size_t i, c;
	guint k;

	for (; e->model_ops < flushed; e->model_ops++) {
		const struct op *o = &g_array_index(ops, struct op,
						     e->model_ops);

		op_data(o, e->buf);
		memcpy(e->model + o->pos, e->buf, o->len);
	}
	for (c = 0; c < NR_CHUNKS; c++) {
		e->differs[c] = memcmp(img + c * CHUNK, e->model + c * CHUNK,
				       CHUNK) != 0;
		any |= e->differs[c];
		for (i = c * CHUNK; e->differs[c] && i < (c + 1) * CHUNK; i++)
			e->ok[i] = img[i] == e->model[i];
	}
	if (!any)
		return -1;
	for (k = flushed; k < started; k++) {
		const struct op *o = &g_array_index(ops, struct op, k);

		op_data(o, e->buf);
		for (i = 0; i < o->len; i++)
			if (e->differs[(o->pos + i) / CHUNK])
				e->ok[o->pos + i] |= img[o->pos + i] == e->buf[i];
	}
	for (c = 0; c < NR_CHUNKS; c++)
		for (i = c * CHUNK; e->differs[c] && i < (c + 1) * CHUNK; i++)
			if (!e->ok[i])
				return (int64_t)i;
	return -1;
}

static gint guint_cmp(gconstpointer a, gconstpointer b)
{
	guint x = *(const guint *)a, y = *(const guint *)b;

	return x < y ? -1 : x > y;
}

/* n cut points, sorted: positions just before a record the backend
 * logged, or the end. */
static GArray *pick_cuts(const struct nrecorder *r, unsigned int n,
			 struct test_rng *rng)
{
	GArray *io = g_array_new(FALSE, FALSE, sizeof(guint));
	GArray *cuts = g_array_new(FALSE, FALSE, sizeof(guint));
	guint i;

	for (i = 0; i < r->recs->len; i++)
		if (nrec_at(r, i)->kind < NREC_OP_BEGIN)
			g_array_append_val(io, i);
	g_array_append_val(io, r->recs->len);
	for (i = 0; i < n; i++)
		g_array_append_val(cuts, g_array_index(io, guint,
				   test_rng_range(rng, 0, io->len - 1)));
	g_array_sort(cuts, guint_cmp);
	g_array_free(io, TRUE);
	return cuts;
}

/* Every cut of r checked against ops. */
static void check_cuts(const struct nrecorder *r, GArray *ops,
		       unsigned int n, struct test_rng *rng)
{
	struct replay rp;
	GArray *cuts = pick_cuts(r, n, rng);
	unsigned char *img = g_malloc(IMG_SIZE);
	struct expect e = { .model = g_malloc0(IMG_SIZE),
			    .buf = g_malloc(MAX_OP),
			    .ok = g_malloc(IMG_SIZE * sizeof(bool)) };
	guint k, scanned = 0, flushed = 0, started = 0, uncertain = 0;
	gint64 t0 = g_get_monotonic_time();

	replay_init(&rp, r);
	for (k = 0; k < cuts->len; k++) {
		guint cut = g_array_index(cuts, guint, k);
		struct cut_info ci = { .cut = cut, .nr_recs = r->recs->len };
		int64_t bad;

		for (; scanned < cut; scanned++) {
			const struct nrec *x = nrec_at(r, scanned);

			if (x->kind == NREC_USER_FLUSH)
				flushed = x->op;
			else if (x->kind == NREC_OP_BEGIN)
				started = x->op + 1;
		}
		replay_cut(&rp, img, cut, rng, &ci);
		ci.flushed = flushed;
		ci.started = started;
		uncertain += ci.uncertain;
		bad = cut_mismatch(&e, img, ops, flushed, started);
		if (bad >= 0) {
			const struct op *o = NULL;
			guint w;

			/* The last flushed write of that byte, for the
			 * message. */
			for (w = flushed; w-- > 0;) {
				o = &g_array_index(ops, struct op, w);
				if (o->pos <= (uint64_t)bad &&
				    (uint64_t)bad < o->pos + o->len)
					break;
				o = NULL;
			}
			ck_abort_msg(CUT_FMT ": byte %lld holds %u, not %u (%s) nor any value a later write gave it",
				     CUT_ARGS(&ci), (long long)bad, img[bad],
				     e.model[bad],
				     o ? "what a flushed write put there" :
					 "the zero it was created with");
		}
	}
	fprintf(stderr, "%u cuts checked in %.1f s (%u uncertain writes replayed)\n",
		cuts->len, (g_get_monotonic_time() - t0) / 1e6, uncertain);
	g_array_free(cuts, TRUE);
	replay_clear(&rp);
	g_free(img);
	g_free(e.model);
	g_free(e.buf);
	g_free(e.ok);
}

/* ---- tests ---- */

static void fake_write(struct nrecorder *r, uint64_t off, uint32_t len,
		       unsigned char fill, bool stable, uint64_t verf)
{
	unsigned char data[8192];
	struct dioloop_iorec_remote ev = {
		.kind = DIOLOOP_IOREC_REMOTE_WRITE, .store = r->store,
		.off = off, .len = len, .data = data, .stable = stable,
	};

	memset(data, fill, sizeof(data));
	memcpy(ev.verf, &verf, sizeof(verf));
	r->hook.remote(&r->hook, &ev);
}

static void fake_event(struct nrecorder *r, enum dioloop_iorec_remote_kind kind,
		       uint64_t verf)
{
	struct dioloop_iorec_remote ev = { .kind = kind, .store = r->store };

	memcpy(ev.verf, &verf, sizeof(verf));
	r->hook.remote(&r->hook, &ev);
}

/* The replay rules on a made-up log: stable writes are durable at once,
 * unstable ones only after a COMMIT sent after their answer returns
 * their verifier; the others are sometimes lost, sometimes kept, unless
 * a durable later write covers them. */
START_TEST(test_nfs_powercut_durability_rules)
{
	struct nrecorder *r = nrecorder_new("nfs://h/d/x.img");
	struct dioloop_iorec_remote other = {
		.kind = DIOLOOP_IOREC_REMOTE_COMMIT, .store = "nfs://h/d/y.img",
	};
	unsigned char *img = g_malloc(IMG_SIZE);
	struct replay rp;
	struct test_rng rng;
	guint i, end;
	bool seen_lost = false, seen_kept = false;

	test_rng_init(&rng, 1);
	fake_write(r, 0, 4096, 1, false, 7);		/* 0: committed */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT_SENT, 0);	/* 1 */
	fake_write(r, 4096, 4096, 2, false, 7);		/* 2: after the send */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT, 7);	/* 3 */
	fake_write(r, 8192, 1000, 3, true, 7);		/* 4: stable */
	fake_write(r, 12288, 4096, 4, false, 7);	/* 5: server restarted */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT_SENT, 0);	/* 6 */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT, 9);	/* 7: new verifier */
	fake_write(r, 12188, 4196, 5, false, 9);	/* 8: covers 5 */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT_SENT, 0);	/* 9 */
	fake_event(r, DIOLOOP_IOREC_REMOTE_COMMIT, 9);	/* 10 */
	r->hook.remote(&r->hook, &other);		/* not this image */
	ck_assert_uint_eq(r->recs->len, 11);
	replay_init(&rp, r);
	ck_assert_uint_eq(rp.at[0], 3);
	ck_assert_uint_eq(rp.at[2], G_MAXUINT);
	ck_assert_uint_eq(rp.at[4], 4);
	ck_assert_uint_eq(rp.at[5], G_MAXUINT);
	ck_assert_uint_eq(rp.at[8], 10);
	ck_assert_uint_eq(rp.settled[5], 10);
	ck_assert_uint_eq(rp.settled[2], G_MAXUINT);
	end = r->recs->len;
	/* Until both outcomes were seen (each has odds above 1/4). */
	for (i = 0; i < 1000 && (i < 8 || !seen_lost || !seen_kept); i++) {
		struct cut_info ci = { 0 };

		replay_cut(&rp, img, end, &rng, &ci);
		ck_assert_uint_eq(ci.durable, 3);
		ck_assert_uint_eq(ci.uncertain, 2);
		ck_assert_msg(img[0] == 1 && img[4095] == 1 &&
			      img[8192] == 3 && img[9191] == 3 &&
			      img[9192] == 0 && img[12188] == 5 &&
			      img[16383] == 5,
			      "durable writes are whole");
		/* Before the resend was committed: write 5 may be lost. */
		memset(&ci, 0, sizeof(ci));
		replay_cut(&rp, img, 8, &rng, &ci);
		ck_assert_uint_eq(ci.durable, 2);
		ck_assert_uint_eq(ci.uncertain, 2);
		seen_lost |= img[12288 + 4095] == 0;
		seen_kept |= img[12288 + 4095] == 4;
		/* Before the COMMIT answer: write 0 is not durable. */
		memset(&ci, 0, sizeof(ci));
		replay_cut(&rp, img, 3, &rng, &ci);
		ck_assert_uint_eq(ci.durable, 0);
	}
	ck_assert_msg(seen_lost && seen_kept,
		      "an uncommitted write is sometimes lost, sometimes kept");
	replay_clear(&rp);
	g_free(img);
	nrecorder_free(r);
}
END_TEST

/* Writes and flushes across a server restart, recorded; then every cut
 * keeps what the flushes before it promised. */
START_TEST(test_nfs_powercut_flushed_writes_survive)
{
	g_autofree char *url = g_strdup_printf("%s/%s", env("DIOLOOP_NFS_URL"),
					       IMG_NAME);
	g_autofree char *path = g_build_filename(env("DIOLOOP_NFS_EXPORT"),
						 IMG_NAME, NULL);
	struct nrecorder *r = nrecorder_new(url);
	GArray *ops = g_array_new(FALSE, FALSE, sizeof(struct op));
	GHashTable *verfs = g_hash_table_new(g_int64_hash, g_int64_equal);
	struct nfs_backend_stats st;
	struct test_rng rng;
	guint i;

	ck_assert_msg(server_ctl("start") == 0, "start the server");
	test_rng_init(&rng, 2);
	run_workload(url, path, r, ops, &rng, &st);
	for (i = 0; i < r->recs->len; i++)
		if (nrec_at(r, i)->kind == NREC_WRITE ||
		    nrec_at(r, i)->kind == NREC_COMMIT)
			g_hash_table_add(verfs, &((struct nrec *)nrec_at(r, i))->verf);
	ck_assert_msg(g_hash_table_size(verfs) >= 2,
		      "the restart gave the server a new write verifier (answers carried %u)",
		      g_hash_table_size(verfs));
	check_cuts(r, ops, nr_cuts(300), &rng);
	/* Last: the cuts are what must catch a backend that skips this. */
	ck_assert_msg(st.verifier_changes >= 1 && st.resent_writes >= 1,
		      "the backend saw the new verifier (%llu times) and sent its uncommitted writes again (%llu)",
		      (unsigned long long)st.verifier_changes,
		      (unsigned long long)st.resent_writes);
	g_hash_table_destroy(verfs);
	g_array_free(ops, TRUE);
	nrecorder_free(r);
	unlink(path);
}
END_TEST

static void quiet_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer data)
{
	if (getenv("DIOLOOP_POWERCUT_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

int main(void)
{
	Suite *s = suite_create("nfs_powercut");
	TCase *tc = tcase_create("cuts");
	const char *url = getenv("DIOLOOP_NFS_URL");

	/* The restart logs a line per reconnect attempt. */
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  quiet_log, NULL);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_nfs_powercut_durability_rules);
	if (url && *url)
		tcase_add_test(tc, test_nfs_powercut_flushed_writes_survive);
	else
		printf("DIOLOOP_NFS_URL is not set: the server test is left to tests/integration/test-powercut-nfs.sh\n");
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
