/* SPDX-License-Identifier: MIT */
/*
 * Power cuts of the raw backend, simulated.  A recorder (iorec_dir.h)
 * logs what the backend does to its image and around it while a seeded
 * workload writes (inside the size and past it: a growable image),
 * discards, zeroes, resizes, reopens and flushes: the image's writes,
 * punched and zeroed ranges, truncates and fdatasyncs, and the orphan
 * record's creates, writes, fsyncs, renames, unlinks and the directory
 * fsyncs.  Each cut point (a position in the log) becomes a copy of the
 * directory as a power cut there could have left it:
 *
 *   image: every write, zeroed range and size change covered by a
 *     completed fdatasync of the image (it began after them), in order,
 *     and every write to an O_DSYNC image (a sync one) when it completed;
 *     the rest kept or dropped, shuffled between size changes, some torn
 *     at 512 bytes; a dropped extending write may still have moved the
 *     size (metadata without data: the garbage the record exists for);
 *     size changes kept or dropped;
 *   names (the record, its temporary): a create, unlink or rename is
 *     durable once a directory fsync that began after it completed; the
 *     others each kept or dropped, in order;
 *   sidecar contents: durable once an fsync of that file that began
 *     after them completed; the others kept, dropped or left as zeros.
 *
 * The copy is opened read-write (orphan recovery runs) and must:
 *   - open, and leave no orphan record behind;
 *   - have a size no smaller than the one the last flush that returned
 *     before the cut made durable;
 *   - hold in every 512-byte sector below its size what the image held
 *     in that sector at some point since that flush, within the size it
 *     had then (rounded up to a 4 KiB block: the engine writes whole
 *     blocks at the end); a sector no op touched since that flush holds
 *     exactly what it held at the flush.  So flushed data reads back,
 *     and a size that covers data never written (or a failed extension's
 *     leftovers) fails.
 *
 * DIOLOOP_POWERCUT_CUTS=N checks N cuts per scenario instead of the
 * default (which DIOLOOP_TEST_SCALE scales); DIOLOOP_TEST_SEED repeats a
 * run.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "backends/aio.h"
#include "backends/backend.h"
#include "backends/raw/orphan.h"
#include "backends/raw/raw.h"
#include "tests/iorec_dir.h"
#include "tests/testutil.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define SECTOR 512u
#define BLOCK 4096u
#define IMG_START (512 * KiB)
#define IMG_MAX (3 * MiB)	/* sizes the workload grows to */
#define IMG_CAP (4 * MiB)	/* the model's buffers */
#define NR_SECTORS (IMG_CAP / SECTOR)
#define MAX_OP (96 * KiB)
#define IMG_NAME "disk.img"

/* ---- the workload and its model ---- */

enum op_kind {
	OP_WRITE, OP_DISCARD, OP_ZEROES, OP_RESIZE, OP_REOPEN,
	/* An extending write that fails part way (RLIMIT_FSIZE): the size
	 * stays, what it wrote past the size is truncated away. */
	OP_FAILED_EXTEND,
};

struct op {
	uint8_t kind;		/* enum op_kind */
	uint32_t len;
	uint64_t pos;		/* OP_RESIZE: the new size */
	uint64_t seed;		/* of a write's data */
	uint64_t size_after;	/* the visible size once it returned */
};

struct scenario {
	const char *name;
	unsigned int flush_pct;		/* chance of a flush after an op */
	unsigned int extend_pct;	/* of writes: past the size */
	unsigned int held_pct;		/* a flush while an extension runs */
	unsigned int fail_pct;		/* a failed extension */
	unsigned int resize_pct, reopen_pct;
	unsigned int discard_pct;	/* discard or write-zeroes */
	bool sync;			/* BACKEND_OPEN_SYNC: every op but a
					 * discard is durable when it returns */
	unsigned int nr_ops;
	unsigned int cuts;
};

/*
 * A power cut keeps the image's inode; a replay writes a new file.  The
 * orphan records of the replay are bound (dev:ino) to the image they were
 * written for: bind them to the replayed image, as they would still be to
 * the same inode after a real cut.  Records that do not decode stay as
 * they are (torn).
 */
static void rebind_orphan_records(const char *dir, const char *image)
{
	struct stat st;
	const char *name;
	GDir *d = g_dir_open(dir, 0, NULL);

	ck_assert_msg(d != NULL, "open %s", dir);
	ck_assert_msg(stat(image, &st) == 0, "stat %s", image);
	while ((name = g_dir_read_name(d))) {
		char *path, *text = NULL;
		gsize len = 0;
		uint64_t size, dev, ino;

		if (!strstr(name, ORPHAN_RECORD_SUFFIX))
			continue;
		path = g_build_filename(dir, name, NULL);
		ck_assert_msg(g_file_get_contents(path, &text, &len, NULL),
			      "read %s", path);
		if (orphan_decode(text, len, &size, &dev, &ino) == 0) {
			orphan_encode(text, size, (uint64_t)st.st_dev,
				      (uint64_t)st.st_ino);
			ck_assert_msg(g_file_set_contents(path, text, (gssize)len,
							  NULL), "write %s", path);
			ck_assert_msg(chmod(path, 0600) == 0, "chmod %s", path);
		}
		g_free(text);
		g_free(path);
	}
	g_dir_close(d);
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static void op_data(const struct op *o, unsigned char *buf)
{
	struct test_rng rng = { o->seed };

	test_rng_fill(&rng, buf, o->len);
}

/* Apply o to a flat image m of size *size; the byte range whose content
 * or presence may have changed into [*lo, *hi). */
static void model_apply(unsigned char *m, uint64_t *size, const struct op *o,
			unsigned char *buf, uint64_t *lo, uint64_t *hi)
{
	uint64_t old = *size, new = o->size_after;

	*lo = MIN(old, new);
	*hi = MAX(round_up(old, BLOCK), round_up(new, BLOCK));
	switch (o->kind) {
	case OP_WRITE:
		op_data(o, buf);
		memcpy(m + o->pos, buf, o->len);
		break;
	case OP_DISCARD:
	case OP_ZEROES:
		memset(m + o->pos, 0, o->len);
		break;
	case OP_RESIZE:
		if (new < old)
			memset(m + new, 0, old - new);
		break;
	default:
		break;
	}
	if (o->kind <= OP_ZEROES) {
		*lo = MIN(*lo, o->pos);
		*hi = MAX(*hi, o->pos + o->len);
	}
	*size = new;
}

/* One aio context for every open of a run. */
static struct dioloop_aio *run_aio;
/* Open flags of the run's workload (a cut is opened without SYNC: that
 * changes no recovery). */
static unsigned int run_flags;

static int open_image(const char *path, struct backend **out)
{
	struct backend_open_args args = { .path = path,
					   .flags = BACKEND_OPEN_GROWABLE |
						    run_flags,
					   .aio = run_aio };

	return backend_open("raw", &args, out);
}

static struct backend *open_ok(const char *path)
{
	struct backend *b;
	int ret = open_image(path, &b);

	ck_assert_msg(ret == 0, "open %s: expected 0, got %d", path, ret);
	return b;
}

/* ---- holding an extending write after its I/O (raw_test_hook) ---- */

static GMutex gate_lock;
static GCond gate_cond;
static bool gate_armed, gate_arrived, gate_open;	/* by gate_lock */

static void gate_hook(enum raw_test_point point)
{
	if (point != RAW_TEST_EXTEND_DONE)
		return;
	g_mutex_lock(&gate_lock);
	if (gate_armed && !gate_arrived) {
		gate_arrived = true;
		g_cond_broadcast(&gate_cond);
		while (!gate_open)
			g_cond_wait(&gate_cond, &gate_lock);
	}
	g_mutex_unlock(&gate_lock);
}

struct held_write {
	struct backend *b;
	struct kiocb iocb;
	struct iov_iter it;
	struct bio_vec *bv;
	void *mem;
	ssize_t res;
	bool done;		/* by gate_lock */
};

static void held_complete(struct kiocb *iocb, ssize_t res)
{
	struct held_write *h = iocb->ki_private;

	g_mutex_lock(&gate_lock);
	h->res = res;
	h->done = true;
	g_cond_broadcast(&gate_cond);
	g_mutex_unlock(&gate_lock);
}

static gpointer held_submit(gpointer p)
{
	struct held_write *h = p;
	ssize_t ret = backend_direct_IO_bvec(h->b, &h->iocb);

	if (ret != -EIOCBQUEUED)
		held_complete(&h->iocb, ret);
	return NULL;
}

/* Wait on gate_cond until *flag (60 s at most). */
static bool gate_wait(bool *flag)
{
	gint64 deadline = g_get_monotonic_time() + 60 * G_TIME_SPAN_SECOND;

	while (!*flag)
		if (!g_cond_wait_until(&gate_cond, &gate_lock, deadline))
			break;
	return *flag;
}

/*
 * Op o (an extending write, number opno) asynchronously, held after its
 * I/O, before it completes, while a flush runs: the flush finds an
 * extension in flight and rewrites the record instead of removing it.
 */
static void run_held_write(struct backend *b, struct drecorder *r,
			   const struct op *o, uint32_t opno)
{
	struct held_write h = { .b = b };
	size_t pages = round_up(o->len, DIOLOOP_PAGE_SIZE) / DIOLOOP_PAGE_SIZE;
	GThread *t;
	size_t i;
	bool arrived, done;
	int ret;

	ck_assert_int_eq(posix_memalign(&h.mem, DIOLOOP_PAGE_SIZE,
					pages * DIOLOOP_PAGE_SIZE), 0);
	op_data(o, h.mem);
	h.bv = g_new0(struct bio_vec, pages);
	for (i = 0; i < pages; i++)
		h.bv[i] = (struct bio_vec){
			(char *)h.mem + i * DIOLOOP_PAGE_SIZE,
			(unsigned int)MIN(DIOLOOP_PAGE_SIZE,
					  o->len - i * DIOLOOP_PAGE_SIZE), 0 };
	iov_iter_init_bvec(&h.it, h.bv, pages, o->len, 0);
	h.iocb = (struct kiocb){ .ki_rw = DIOLOOP_WRITE, .ki_pos = o->pos,
				 .ki_iter = &h.it,
				 .ki_complete = held_complete,
				 .ki_private = &h };
	g_mutex_lock(&gate_lock);
	gate_armed = true;
	gate_arrived = gate_open = false;
	g_mutex_unlock(&gate_lock);
	/* From another thread: a write that completes inline holds that
	 * thread in the hook, not this one. */
	t = g_thread_new("held-write", held_submit, &h);
	g_mutex_lock(&gate_lock);
	arrived = gate_wait(&gate_arrived);
	g_mutex_unlock(&gate_lock);
	ck_assert_msg(arrived, "the extending write of %u bytes at %llu reached its completion within 60 s",
		      o->len, (unsigned long long)o->pos);
	ret = backend_flush(b);
	ck_assert_msg(ret == 0, "flush with an extension in flight: expected 0, got %d",
		      ret);
	drec_user(r, DREC_USER_FLUSH, opno);
	g_mutex_lock(&gate_lock);
	gate_open = true;
	gate_armed = false;
	g_cond_broadcast(&gate_cond);
	done = gate_wait(&h.done);
	g_mutex_unlock(&gate_lock);
	g_thread_join(t);
	ck_assert_msg(done && h.res == (ssize_t)o->len,
		      "the held write of %u bytes: expected it done, got %zd",
		      o->len, h.res);
	g_free(h.bv);
	free(h.mem);
}

/* Set the process's file size limit (RLIM_INFINITY: none). */
static void set_fsize_limit(rlim_t limit)
{
	struct rlimit rl;

	/* The soft limit only: lowering the hard one is for good. */
	ck_assert_msg(getrlimit(RLIMIT_FSIZE, &rl) == 0, "getrlimit FSIZE");
	rl.rlim_cur = MIN(limit, rl.rlim_max);
	ck_assert_msg(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit FSIZE: %s",
		      g_strerror(errno));
}

/* Run o (not a held one); its size_after is filled in. */
static void op_run(struct backend **bp, const char *path, struct op *o,
		   unsigned char *buf)
{
	struct backend *b = *bp;
	ssize_t n;
	int ret = 0;

	switch (o->kind) {
	case OP_WRITE:
		op_data(o, buf);
		n = backend_pwrite(b, buf, o->len, o->pos);
		ck_assert_msg(n == (ssize_t)o->len,
			      "write of %u bytes at %llu: expected %u, got %zd",
			      o->len, (unsigned long long)o->pos, o->len, n);
		break;
	case OP_FAILED_EXTEND:
		/* The host refuses what lies past half of it. */
		op_data(o, buf);
		set_fsize_limit(round_up(o->pos + o->len / 2, BLOCK));
		n = backend_pwrite(b, buf, o->len, o->pos);
		set_fsize_limit(RLIM_INFINITY);
		ck_assert_msg(n < 0, "write of %u bytes at %llu across the file size limit: expected an error, got %zd",
			      o->len, (unsigned long long)o->pos, n);
		break;
	case OP_DISCARD:
		ret = backend_discard(b, o->pos, o->len);
		break;
	case OP_ZEROES:
		ret = backend_write_zeroes(b, o->pos, o->len);
		break;
	case OP_RESIZE:
		ret = backend_resize(b, o->pos);
		break;
	case OP_REOPEN:
		backend_close(b);
		*bp = b = open_ok(path);
		break;
	}
	ck_assert_msg(ret == 0, "op %d (%u bytes at %llu): expected 0, got %d",
		      o->kind, o->len, (unsigned long long)o->pos, ret);
	o->size_after = (uint64_t)backend_get_size(b);
}

/* A random length, aligned half the time. */
static uint32_t random_len(struct test_rng *rng, uint64_t max)
{
	uint64_t len = test_rng_next(rng) % 2 ?
			       test_rng_range(rng, 1, 16 * KiB) :
			       test_rng_range(rng, 1, MAX_OP);

	if (test_rng_next(rng) % 2)
		len = round_up(len, BLOCK);
	return (uint32_t)MAX(MIN(len, max), 1);
}

/* An op for an image of size; held: run it with run_held_write. */
static struct op op_random(const struct scenario *sc, struct test_rng *rng,
			   uint64_t size, bool *held)
{
	struct op o = { .seed = test_rng_next(rng) };
	unsigned int k = (unsigned int)test_rng_range(rng, 0, 99);
	unsigned int reopen = sc->resize_pct + sc->reopen_pct;
	unsigned int fail = reopen + sc->fail_pct;
	bool extend;

	*held = false;
	if (k < sc->resize_pct) {
		o.kind = OP_RESIZE;
		o.pos = round_up(test_rng_range(rng, size / 2, size + 256 * KiB),
				 BLOCK);
		o.pos = MIN(MAX(o.pos, 64 * KiB), IMG_MAX);
		return o;
	}
	if (k < reopen) {
		o.kind = OP_REOPEN;
		return o;
	}
	if (k < fail && size + 2 * BLOCK < IMG_MAX) {
		o.kind = OP_FAILED_EXTEND;
		o.pos = round_up(size, BLOCK) +
			test_rng_range(rng, 0, 3) * SECTOR;
		/* One request: backend_pwrite splits at each MiB. */
		if (MiB - o.pos % MiB < 2 * BLOCK)
			o.pos = round_up(o.pos + 1, MiB);
		o.len = (uint32_t)test_rng_range(rng, 2 * BLOCK, MAX_OP);
		o.len = (uint32_t)MIN(o.len, MiB - o.pos % MiB);
		if (o.pos + o.len <= IMG_MAX)
			return o;
		o.len = 0;
	}
	o.pos = 0;
	if (k >= fail && k < fail + sc->discard_pct && size > 0) {
		o.kind = k < fail + sc->discard_pct / 2 ? OP_DISCARD : OP_ZEROES;
		o.len = random_len(rng, size);
		o.pos = test_rng_range(rng, 0, size - o.len);
		if (test_rng_next(rng) % 2)
			o.pos &= ~(uint64_t)(BLOCK - 1);
		return o;
	}
	o.kind = OP_WRITE;
	extend = test_rng_range(rng, 0, 99) < sc->extend_pct &&
		 size + BLOCK < IMG_MAX;
	if (extend) {
		/* Starting inside the size, at it, or past it. */
		uint64_t from = size > 8 * KiB ? size - 8 * KiB : 0;

		o.pos = test_rng_range(rng, from, size + 32 * KiB);
		o.pos = MIN(o.pos, IMG_MAX - BLOCK);
		o.len = random_len(rng, IMG_MAX - o.pos);
		if (o.pos + o.len <= size)
			o.len = (uint32_t)MIN(size + BLOCK - o.pos,
					      IMG_MAX - o.pos);
		*held = o.pos >= size && size + 4 * BLOCK < IMG_MAX &&
			test_rng_range(rng, 0, 99) < sc->held_pct;
	} else {
		o.len = random_len(rng, size);
		o.pos = test_rng_range(rng, 0, size - o.len);
		if (test_rng_next(rng) % 2)
			o.pos &= ~(uint64_t)(BLOCK - 1);
	}
	return o;
}

/* Run sc's workload on path with r installed; the ops into ops. */
static void run_workload(const struct scenario *sc, const char *path,
			 struct drecorder *r, GArray *ops, struct test_rng *rng)
{
	unsigned char *buf = g_malloc(MAX_OP);
	struct backend *b;
	unsigned int i;
	int ret;

	raw_test_hook = gate_hook;
	atomic_store(&dioloop_iorec, &r->hook);
	run_flags = sc->sync ? BACKEND_OPEN_SYNC : 0;
	b = open_ok(path);
	for (i = 0; i < sc->nr_ops; i++) {
		uint64_t size = (uint64_t)backend_get_size(b);
		bool held;
		struct op o = op_random(sc, rng, size, &held);

		drec_user(r, DREC_OP_BEGIN, ops->len);
		if (held) {
			/* The record must be live and behind the size for
			 * the flush to rewrite it: extend once first. */
			struct op first = o;

			first.len = (uint32_t)MIN(BLOCK, IMG_MAX - size);
			first.pos = size;
			op_run(&b, path, &first, buf);
			g_array_append_val(ops, first);
			o.pos = first.size_after;
			o.len = (uint32_t)MIN(o.len, IMG_MAX - o.pos);
			drec_user(r, DREC_OP_BEGIN, ops->len);
			run_held_write(b, r, &o, ops->len);
			o.size_after = (uint64_t)backend_get_size(b);
		} else {
			op_run(&b, path, &o, buf);
		}
		g_array_append_val(ops, o);
		if (sc->sync)
			drec_user(r, DREC_USER_FLUSH, ops->len);
		else if (test_rng_range(rng, 0, 99) < sc->flush_pct) {
			ret = backend_flush(b);
			ck_assert_msg(ret == 0, "flush: expected 0, got %d", ret);
			drec_user(r, DREC_USER_FLUSH, ops->len);
		}
	}
	ret = backend_flush(b);
	ck_assert_msg(ret == 0, "final flush: expected 0, got %d", ret);
	drec_user(r, DREC_USER_FLUSH, ops->len);
	backend_close(b);
	atomic_store(&dioloop_iorec, NULL);
	raw_test_hook = NULL;
	run_flags = 0;
	g_free(buf);
}

/* ---- checking a cut ---- */

/* What a cut allows: the model after ops [0, flushed); for each sector
 * that ops [flushed, started) touched, every content it had since. */
struct expect {
	unsigned char *model;		/* after ops [0, model_ops) */
	uint64_t model_size;
	uint64_t min_size;		/* of the sizes since then */
	guint model_ops;
	unsigned char *scratch;
	unsigned char *buf;
	uint8_t *touched;		/* per sector */
	GArray *cand[NR_SECTORS];	/* uint64_t hashes, if touched */
	GArray *touched_list;		/* guint sectors */
};

static uint64_t sector_hash(const unsigned char *p)
{
	return XXH64(p, SECTOR, 0);
}

/* Sector s may hold what m holds there (when within ext). */
static void cand_add(struct expect *e, guint s, const unsigned char *m,
		     uint64_t ext)
{
	uint64_t h;

	if ((uint64_t)s * SECTOR >= ext)
		return;
	if (!e->cand[s])
		e->cand[s] = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	h = sector_hash(m + (size_t)s * SECTOR);
	g_array_append_val(e->cand[s], h);
}

static void expect_prepare(struct expect *e, GArray *ops, guint flushed,
			   guint started)
{
	uint64_t lo, hi, size, ext_f;
	guint i, s;

	for (i = 0; i < e->touched_list->len; i++)
		e->touched[g_array_index(e->touched_list, guint, i)] = 0;
	g_array_set_size(e->touched_list, 0);
	ck_assert_msg(flushed >= e->model_ops, "cuts are in order");
	for (; e->model_ops < flushed; e->model_ops++)
		model_apply(e->model, &e->model_size,
			    &g_array_index(ops, struct op, e->model_ops),
			    e->buf, &lo, &hi);
	e->min_size = e->model_size;
	if (started <= flushed)
		return;
	ext_f = round_up(e->model_size, BLOCK);
	memcpy(e->scratch, e->model, IMG_CAP);
	size = e->model_size;
	for (i = flushed; i < started; i++) {
		model_apply(e->scratch, &size, &g_array_index(ops, struct op, i),
			    e->buf, &lo, &hi);
		for (s = (guint)(lo / SECTOR);
		     s < MIN((hi + SECTOR - 1) / SECTOR, NR_SECTORS); s++) {
			if (!e->touched[s]) {
				e->touched[s] = 1;
				g_array_append_val(e->touched_list, s);
				if (e->cand[s])
					g_array_set_size(e->cand[s], 0);
				cand_add(e, s, e->model, ext_f);
			}
			cand_add(e, s, e->scratch, round_up(size, BLOCK));
		}
		e->min_size = MIN(e->min_size, size);
	}
}

/* Whether sector s of the cut image (at got) is allowed. */
static bool sector_ok(const struct expect *e, guint s, const unsigned char *got)
{
	uint64_t h;
	guint k;

	if (!e->touched[s])
		return (uint64_t)s * SECTOR < round_up(e->model_size, BLOCK) &&
		       !memcmp(got, e->model + (size_t)s * SECTOR, SECTOR);
	h = sector_hash(got);
	for (k = 0; e->cand[s] && k < e->cand[s]->len; k++)
		if (g_array_index(e->cand[s], uint64_t, k) == h)
			return true;
	return false;
}

/* A cut's description for failure messages. */
struct cut_info {
	const char *scenario;
	guint cut, nr_recs, durable, sidecars;
	guint flushed, started;
	struct drec_tail_stats ts;
};

#define CUT_FMT "%s: cut at %u of %u (image durable up to record %u; %u image writes uncertain: %u kept, %u torn, %u moved the size only; %u sidecars; ops [0,%u) flushed, [%u,%u) uncertain)"
#define CUT_ARGS(c) (c)->scenario, (c)->cut, (c)->nr_recs, (c)->durable, \
	(c)->ts.uncertain, (c)->ts.kept, (c)->ts.torn, (c)->ts.size_only, \
	(c)->sidecars, (c)->flushed, (c)->flushed, (c)->started

static bool file_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* The last op of ops after which sector s held got, -1 if none: for
 * failure messages. */
static int sector_origin(GArray *ops, guint s, const unsigned char *got)
{
	unsigned char *m = g_malloc0(IMG_CAP), *buf = g_malloc(MAX_OP);
	uint64_t size = IMG_START, lo, hi;
	int found = -1;
	guint i;

	for (i = 0; i < ops->len; i++) {
		model_apply(m, &size, &g_array_index(ops, struct op, i), buf,
			    &lo, &hi);
		if (!memcmp(m + (size_t)s * SECTOR, got, SECTOR))
			found = (int)i;
	}
	g_free(m);
	g_free(buf);
	return found;
}

/* The recovered image at path: size, and every sector, read with plain
 * pread after the backend closed it (what a later open serves). */
static void check_cut(const char *path, const struct expect *e,
		      const struct cut_info *ci, GArray *ops)
{
	char *record = orphan_record_path(path);
	char *tmp = g_strconcat(record, ".tmp", NULL);
	unsigned char *back = g_malloc(IMG_CAP);
	struct backend *b;
	uint64_t size;
	ssize_t n;
	guint s;
	int ret, fd;

	ret = open_image(path, &b);
	ck_assert_msg(ret == 0, CUT_FMT ": open read-write: expected 0, got %d",
		      CUT_ARGS(ci), ret);
	ck_assert_msg(!file_exists(record) && !file_exists(tmp),
		      CUT_FMT ": recovery removed the orphan record",
		      CUT_ARGS(ci));
	size = (uint64_t)backend_get_size(b);
	ck_assert_msg(size >= e->min_size,
		      CUT_FMT ": size %llu: expected at least %llu (flushed %llu, and no resize since made it smaller)",
		      CUT_ARGS(ci), (unsigned long long)size,
		      (unsigned long long)e->min_size,
		      (unsigned long long)e->model_size);
	ck_assert_msg(size <= IMG_CAP,
		      CUT_FMT ": size %llu: expected at most %llu, more than the workload ever wrote",
		      CUT_ARGS(ci), (unsigned long long)size,
		      (unsigned long long)IMG_CAP);
	backend_close(b);
	/* Recovery made its result durable and a second open agrees. */
	ret = open_image(path, &b);
	ck_assert_msg(ret == 0 && (uint64_t)backend_get_size(b) == size,
		      CUT_FMT ": open again: expected 0 and size %llu, got %d and %lld",
		      CUT_ARGS(ci), (unsigned long long)size, ret,
		      ret ? -1LL : (long long)backend_get_size(b));
	backend_close(b);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s", path);
	n = pread(fd, back, size, 0);
	close(fd);
	ck_assert_msg(n == (ssize_t)size,
		      CUT_FMT ": read %llu bytes of the file: got %zd",
		      CUT_ARGS(ci), (unsigned long long)size, n);
	for (s = 0; (uint64_t)s * SECTOR < size; s++) {
		const unsigned char *got = back + (size_t)s * SECTOR;

		if (sector_ok(e, s, got))
			continue;
		ck_abort_msg(CUT_FMT ": size %llu (flushed %llu): sector %u (byte %llu, %s, last left there by op %d) holds %s",
			      CUT_ARGS(ci), (unsigned long long)size,
			      (unsigned long long)e->model_size, s,
			      (unsigned long long)s * SECTOR,
			      memcmp(got, drec_zero_sector, SECTOR) ? "data" : "zeros",
			      sector_origin(ops, s, got),
			      e->touched[s] ?
				      "none of the contents it had since the flush" :
			      (uint64_t)s * SECTOR < e->model_size ?
				      "something else than the flushed data" :
				      "something past every size the image had since the flush");
	}
	g_free(back);
	g_free(record);
	g_free(tmp);
}

static gint guint_cmp(gconstpointer a, gconstpointer b)
{
	guint x = *(const guint *)a, y = *(const guint *)b;

	return x < y ? -1 : x > y;
}

/* Cut points: positions just before the backend's records (or the end),
 * sorted. */
static GArray *pick_cuts(const struct drecorder *r, unsigned int n,
			 struct test_rng *rng)
{
	GArray *io = g_array_new(FALSE, FALSE, sizeof(guint));
	GArray *cuts = g_array_new(FALSE, FALSE, sizeof(guint));
	guint i;

	for (i = 0; i < r->recs->len; i++) {
		uint8_t k = g_array_index(r->recs, struct drec, i).kind;

		if (k != DREC_OP_BEGIN && k != DREC_USER_FLUSH)
			g_array_append_val(io, i);
	}
	g_array_append_val(io, r->recs->len);
	for (i = 0; i < n; i++) {
		guint c = g_array_index(io, guint,
					test_rng_range(rng, 0, io->len - 1));

		g_array_append_val(cuts, c);
	}
	g_array_sort(cuts, guint_cmp);
	g_array_free(io, TRUE);
	return cuts;
}

/* How many cuts per scenario: $DIOLOOP_POWERCUT_CUTS, or n scaled. */
static unsigned int nr_cuts(unsigned int n)
{
	const char *env = getenv("DIOLOOP_POWERCUT_CUTS");

	if (env && *env)
		return (unsigned int)MAX(strtoul(env, NULL, 10), 1ul);
	return test_iterations(n);
}

/* One workload of sc, then every cut point checked. */
static void powercut_run(const struct scenario *sc, uint64_t salt)
{
	char *dir = test_tmpdir();
	char *src_dir = g_build_filename(dir, "src", NULL);
	char *cut_dir = g_build_filename(dir, "cut", NULL);
	char *path = g_build_filename(src_dir, IMG_NAME, NULL);
	char *copy = g_build_filename(cut_dir, IMG_NAME, NULL);
	GArray *ops = g_array_new(FALSE, FALSE, sizeof(struct op));
	struct drec_replay rp = { 0 };
	struct expect e = { 0 };
	struct test_rng rng;
	struct drecorder *r;
	GArray *cuts;
	unsigned int k, with_record = 0;
	gint64 start;
	int fd;

	ck_assert_msg(mkdir(src_dir, 0700) == 0 && mkdir(cut_dir, 0700) == 0,
		      "mkdir in %s", dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0 && ftruncate(fd, IMG_START) == 0, "create %s",
		      path);
	close(fd);
	ck_assert_msg(dioloop_aio_new(64, "powercut-aio", &run_aio) == 0,
		      "create an aio context");
	r = drecorder_new(path);
	test_rng_init(&rng, salt);
	rp.r = r;
	drec_flat_load(&rp.base, path);
	start = g_get_monotonic_time();
	run_workload(sc, path, r, ops, &rng);
	drec_resolve_zero_edges(r, &rp.base);
	cuts = pick_cuts(r, nr_cuts(sc->cuts), &rng);
	rp.durable = g_new0(guint, r->files->len);
	fprintf(stderr, "%s: %u ops, %u records (%u image syncs, %u flushes, %u size changes; orphan record: %u creates, %u renames, %u unlinks, %u directory syncs), %.1f MiB written in %.1f s; %u cuts\n",
		sc->name, ops->len, r->recs->len,
		drec_count(r, DREC_FLUSH_END, DREC_IMAGE),
		drec_count(r, DREC_USER_FLUSH, DREC_NONE),
		drec_count(r, DREC_SIZE, DREC_IMAGE),
		drec_count(r, DREC_CREATE, DREC_NONE),
		drec_count(r, DREC_RENAME, DREC_NONE),
		drec_count(r, DREC_UNLINK, DREC_NONE),
		drec_count(r, DREC_FLUSH_END, DREC_DIR),
		r->data->len / (double)MiB,
		(g_get_monotonic_time() - start) / 1e6, cuts->len);
	ck_assert_msg(drec_count(r, DREC_CREATE, DREC_NONE) > 0,
		      "%s: the workload created an orphan record", sc->name);
	start = g_get_monotonic_time();

	e.model = g_malloc0(IMG_CAP);
	e.model_size = IMG_START;
	e.scratch = g_malloc(IMG_CAP);
	e.buf = g_malloc(MAX_OP);
	e.touched = g_malloc0(NR_SECTORS);
	e.touched_list = g_array_new(FALSE, FALSE, sizeof(guint));
	for (k = 0; k < cuts->len; k++) {
		guint cut = g_array_index(cuts, guint, k);
		struct cut_info ci = { 0 };

		drec_replay_advance(&rp, cut);
		drec_remove_sidecars(cut_dir, r);
		drec_write_image(copy, &rp, cut, &rng, &ci.ts);
		drec_write_sidecars(cut_dir, &rp, cut, &rng, &ci.sidecars);
		rebind_orphan_records(cut_dir, copy);
		expect_prepare(&e, ops, rp.flushed, rp.started);
		ci.scenario = sc->name;
		ci.cut = cut;
		ci.nr_recs = r->recs->len;
		ci.durable = rp.durable[DREC_IMAGE];
		ci.flushed = rp.flushed;
		ci.started = rp.started;
		with_record += ci.sidecars > 0;
		check_cut(copy, &e, &ci, ops);
	}
	fprintf(stderr, "%s: %u cuts checked in %.1f s, %u of them left an orphan record\n",
		sc->name, cuts->len, (g_get_monotonic_time() - start) / 1e6,
		with_record);

	for (k = 0; k < NR_SECTORS; k++)
		if (e.cand[k])
			g_array_free(e.cand[k], TRUE);
	g_array_free(e.touched_list, TRUE);
	g_free(e.touched);
	g_free(e.model);
	g_free(e.scratch);
	g_free(e.buf);
	g_free(rp.base.mem);
	g_free(rp.durable);
	dioloop_aio_free(run_aio);
	run_aio = NULL;
	g_array_free(cuts, TRUE);
	g_array_free(ops, TRUE);
	drecorder_free(r);
	test_rmdir_r(dir);
	g_free(copy);
	g_free(path);
	g_free(cut_dir);
	g_free(src_dir);
	g_free(dir);
}

START_TEST(test_raw_powercut_flushed_writes_survive)
{
	static const struct scenario sc = {
		.name = "flushes", .flush_pct = 12, .extend_pct = 15,
		.held_pct = 20, .fail_pct = 2, .resize_pct = 2,
		.reopen_pct = 2, .discard_pct = 20, .nr_ops = 400, .cuts = 250,
	};

	powercut_run(&sc, 1);
}
END_TEST

START_TEST(test_raw_powercut_growing_image)
{
	static const struct scenario sc = {
		.name = "growing", .flush_pct = 8, .extend_pct = 60,
		.held_pct = 25, .fail_pct = 5, .resize_pct = 2,
		.reopen_pct = 1, .discard_pct = 20, .nr_ops = 300, .cuts = 250,
	};

	powercut_run(&sc, 2);
}
END_TEST

/* O_DSYNC: an extending write is acknowledged only once the record that
 * would cut it off is gone. */
START_TEST(test_raw_powercut_sync_image)
{
	static const struct scenario sc = {
		.name = "sync", .sync = true, .extend_pct = 50, .held_pct = 10,
		.fail_pct = 4, .resize_pct = 2, .reopen_pct = 1,
		.nr_ops = 250, .cuts = 150,
	};

	powercut_run(&sc, 3);
}
END_TEST

/* n cut points among the records logged after time after (or the end),
 * sorted. */
static GArray *pick_cuts_after(GArray *times, uint64_t after, unsigned int n,
			       struct test_rng *rng)
{
	GArray *cuts = g_array_new(FALSE, FALSE, sizeof(guint));
	guint first = 0, i;

	while (first < times->len &&
	       g_array_index(times, uint64_t, first) <= after)
		first++;
	for (i = 0; i < n; i++) {
		guint c = (guint)test_rng_range(rng, first, times->len);

		g_array_append_val(cuts, c);
	}
	g_array_sort(cuts, guint_cmp);
	return cuts;
}

/*
 * The cuts of a log the daemon wrote (DIOLOOP_IOREC_LOG), for
 * tests/integration/test-powercut-raw.sh, which checks them (the inner
 * file system mounts, is clean, keeps its fsync'd files):
 *   DIOLOOP_POWERCUT_LOG    the log
 *   DIOLOOP_POWERCUT_IMAGE  the image it served (still there: its inode)
 *   DIOLOOP_POWERCUT_BASE   a copy of that image from before the log
 *   DIOLOOP_POWERCUT_OUT    where cut<k>/ (the directory a cut leaves)
 *                           and cut<k>.time (the time of the first record
 *                           the cut lost, microseconds of CLOCK_MONOTONIC,
 *                           or "end") go
 *   DIOLOOP_POWERCUT_CUTS   how many cuts
 *   DIOLOOP_POWERCUT_AFTER  cut only records logged after this time
 *   DIOLOOP_POWERCUT_TEAR   the unit a torn write keeps or loses whole,
 *                           in bytes (a power of two, 512 or more; 512
 *                           when unset)
 */
START_TEST(test_raw_powercut_replay_daemon_log)
{
	const char *image = getenv("DIOLOOP_POWERCUT_IMAGE");
	const char *out = getenv("DIOLOOP_POWERCUT_OUT");
	char *name = g_path_get_basename(image);
	GArray *times = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	struct drecorder *r = drecorder_new(image);
	struct drec_replay rp = { .r = r };
	const char *after_env = getenv("DIOLOOP_POWERCUT_AFTER");
	const char *tear_env = getenv("DIOLOOP_POWERCUT_TEAR");
	uint64_t after = after_env ? strtoull(after_env, NULL, 10) : 0;
	struct test_rng rng;
	GArray *cuts;
	guint k;

	ck_assert_msg(out && getenv("DIOLOOP_POWERCUT_BASE"),
		      "DIOLOOP_POWERCUT_OUT and _BASE are set");
	if (tear_env) {
		rp.tear = (uint32_t)strtoul(tear_env, NULL, 10);
		ck_assert_msg(rp.tear >= SECTOR && !(rp.tear & (rp.tear - 1)),
			      "DIOLOOP_POWERCUT_TEAR=%s is a power of two, 512 or more",
			      tear_env);
	}
	test_rng_init(&rng, 4);
	drec_load_file_log(r, getenv("DIOLOOP_POWERCUT_LOG"), times);
	rp.durable = g_new0(guint, r->files->len);
	drec_flat_load(&rp.base, getenv("DIOLOOP_POWERCUT_BASE"));
	drec_resolve_zero_edges(r, &rp.base);
	cuts = pick_cuts_after(times, after, nr_cuts(8), &rng);
	fprintf(stderr, "%u records (%u image writes, %u image syncs, %u orphan record creates); %u cuts; torn writes keep or lose whole %u-byte units\n",
		r->recs->len, drec_count(r, DREC_WRITE, DREC_IMAGE),
		drec_count(r, DREC_FLUSH_END, DREC_IMAGE),
		drec_count(r, DREC_CREATE, DREC_NONE), cuts->len,
		rp.tear ? rp.tear : SECTOR);
	for (k = 0; k < cuts->len; k++) {
		guint cut = g_array_index(cuts, guint, k);
		char *dir = g_strdup_printf("%s/cut%u", out, k);
		char *path = g_build_filename(dir, name, NULL);
		char *tfile = g_strdup_printf("%s.time", dir);
		char *t = cut < times->len ?
			g_strdup_printf("%llu\n", (unsigned long long)
					g_array_index(times, uint64_t, cut)) :
			g_strdup("end\n");
		struct drec_tail_stats ts = { 0 };
		guint sidecars;

		ck_assert_msg(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir,
			      g_strerror(errno));
		drec_replay_advance(&rp, cut);
		drec_write_image(path, &rp, cut, &rng, &ts);
		drec_write_sidecars(dir, &rp, cut, &rng, &sidecars);
		rebind_orphan_records(dir, path);
		ck_assert_msg(g_file_set_contents(tfile, t, -1, NULL), "write %s",
			      tfile);
		fprintf(stderr, "cut%u: at record %u of %u, image durable up to %u; %u image writes uncertain: %u kept, %u torn, %u moved the size only; %u sidecars\n",
			k, cut, r->recs->len, rp.durable[DREC_IMAGE],
			ts.uncertain, ts.kept, ts.torn, ts.size_only, sidecars);
		g_free(t);
		g_free(tfile);
		g_free(path);
		g_free(dir);
	}
	g_array_free(cuts, TRUE);
	g_free(rp.base.mem);
	g_free(rp.durable);
	drecorder_free(r);
	g_array_free(times, TRUE);
	g_free(name);
}
END_TEST

/* Recovery logs every truncation it makes: hundreds per run. */
static void quiet_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer data)
{
}

int main(void)
{
	Suite *s = suite_create("raw_powercut");
	TCase *tc = tcase_create("cuts");

	/* A failed extension crosses RLIMIT_FSIZE: an error, no signal. */
	signal(SIGXFSZ, SIG_IGN);
	if (!getenv("DIOLOOP_POWERCUT_VERBOSE"))
		g_log_set_handler(NULL, G_LOG_LEVEL_WARNING |
					G_LOG_LEVEL_MESSAGE, quiet_log, NULL);
	tcase_set_timeout(tc, 900);
	if (getenv("DIOLOOP_POWERCUT_LOG")) {
		/* Only the cuts of a daemon's log, for its script. */
		tcase_add_test(tc, test_raw_powercut_replay_daemon_log);
	} else {
		tcase_add_test(tc, test_raw_powercut_flushed_writes_survive);
		tcase_add_test(tc, test_raw_powercut_growing_image);
		tcase_add_test(tc, test_raw_powercut_sync_image);
	}
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
