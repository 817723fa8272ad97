/* SPDX-License-Identifier: MIT */
/*
 * Power cuts of a remote store (nfs, rbd), simulated from what the store
 * told the backend: shared by check_nfs_powercut and check_rbd_powercut.
 *
 * A recorder (iorec.h, remote events) logs what the backend heard from
 * the store: every WRITE answer (range, data, stable or not, verifier),
 * every COMMIT sent and answered (verifier), and the backend's flushes,
 * while a seeded workload runs batches of asynchronous writes (sizes from
 * a byte to more than one wsize, unaligned, overlapping earlier batches)
 * and flushes.  The workload logs into the same sequence when it starts a
 * write and when a flush returned.
 *
 * Each cut point (a position in that log) becomes the image as a crash of
 * the store there could have left it: the written ranges replayed in log
 * order from the zeros the image was created with, every durable one
 * whole, every other one dropped, applied, or torn at 512 bytes of the
 * file (random).  At each cut, every byte holds what the workload wrote
 * up to the last flush that returned before the cut (a model of the
 * writes), or what a write started after that flush gave it.
 *
 * Include once, from the test's own file.
 */
#ifndef DIOLOOP_TESTS_REMOTE_POWERCUT_H
#define DIOLOOP_TESTS_REMOTE_POWERCUT_H

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
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define SECTOR 512u
#define IMG_SIZE (8 * MiB)
#define MAX_OP (1536 * KiB)	/* more than one wsize */
#define MAX_BATCH 6

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


static void quiet_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer data)
{
	if (getenv("DIOLOOP_POWERCUT_VERBOSE"))
		fprintf(stderr, "log: %s\n", msg);
}

#endif
