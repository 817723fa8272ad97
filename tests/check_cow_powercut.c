/* SPDX-License-Identifier: MIT */
/*
 * Power cuts of the cow backend, simulated.  An I/O recorder (iorec.h)
 * logs every write, flush and size change the backend makes to its
 * container file while a seeded workload writes, discards, zeroes and
 * flushes; the workload logs into the same sequence when it starts an op
 * and when a flush returned.  Each cut point (a position in that log)
 * becomes a copy of the container as a power cut there could have left
 * it:
 *
 *   the image as formatted,
 *   + every write covered by a flush that completed before the cut (it
 *     completed before that flush began), in log order,
 *   + the writes no completed flush covers, each kept or dropped, in a
 *     random order, some torn (only some of their 512-byte sectors),
 *   size changes applied as logged.
 *
 * Each copy must pass cow_check() (data checksums included), open, and
 * read back every write acknowledged before the last flush that returned
 * before the cut.  A block that an op started after that flush touched
 * may hold any content the workload gave it since (COW: never a mix
 * within a block); every other block holds exactly the model's.
 *
 * Snapshots and clones (durable when cow_snapshot returns) must exist
 * from then on, holding exactly the volume as it was when taken, until a
 * deletion of them returned; a volume whose creation or deletion was in
 * progress at the cut may or may not exist; no other volume may.
 */
#include <stdatomic.h>
#include <sys/mman.h>
#include <xxhash.h>

#include "backends/aio.h"
#include "backends/cow/check.h"
#include "tests/cow_test.h"
#include "tests/iorec_log.h"

#define IMG_SIZE (8 * MiB)
#define IMG_BLOCKS (IMG_SIZE / COW_BLOCK_SIZE)
#define MAX_OP (192 * KiB)
#define SECTOR 512u
/* The workload stops when the log holds this much written data. */
#define LOG_DATA_SOFT_MAX (48 * MiB)

/* ---- the workload and its model ---- */

enum op_kind {
	OP_WRITE, OP_DISCARD, OP_ZEROES,
	/* Volumes: "snap<vol>", taken from the default volume.  They
	 * change no data of the default volume. */
	OP_SNAPSHOT, OP_CLONE, OP_DELETE,
};

struct op {
	uint8_t kind;		/* enum op_kind */
	uint32_t len;
	uint64_t pos;
	uint64_t seed;		/* of a write's data */
	uint32_t vol;		/* volume ops: the name's number */
};

#define MAX_SNAPSHOTS 4		/* live at once */

static bool op_is_data(const struct op *o)
{
	return o->kind <= OP_ZEROES;
}

static void snap_name(uint32_t vol, char name[16])
{
	snprintf(name, 16, "snap%u", vol);
}

struct scenario {
	const char *name;
	uint8_t csum_type;	/* 0: the default */
	unsigned int commit_ms;	/* background commits (0: on flush only) */
	unsigned int flush_pct;	/* chance of a flush after an op */
	unsigned int reopen_pct;/* chance of flush + close + reopen */
	unsigned int snap_pct;	/* chance of a snapshot, clone or delete */
	unsigned int nr_ops;	/* at most */
	unsigned int cuts;	/* cut points per workload */
};

static void op_data(const struct op *o, unsigned char *buf)
{
	struct test_rng rng = { o->seed };

	test_rng_fill(&rng, buf, o->len);
}

/* Apply o to a flat image. */
static void model_apply(unsigned char *m, const struct op *o,
			unsigned char *buf)
{
	if (!op_is_data(o))
		return;
	if (o->kind == OP_WRITE) {
		op_data(o, buf);
		memcpy(m + o->pos, buf, o->len);
	} else {
		memset(m + o->pos, 0, o->len);
	}
}

static struct op op_random(struct test_rng *rng)
{
	struct op o = { 0 };
	unsigned int k = (unsigned int)test_rng_range(rng, 0, 99);
	size_t len;

	o.kind = k < 76 ? OP_WRITE : k < 88 ? OP_DISCARD : OP_ZEROES;
	len = test_rng_next(rng) % 2 ?
		      (size_t)test_rng_range(rng, 1, 16 * KiB) :
		      (size_t)test_rng_range(rng, 1, MAX_OP);
	if (test_rng_next(rng) % 2)
		len = MIN((len + 4095) & ~(size_t)4095, MAX_OP);
	o.len = (uint32_t)len;
	o.pos = test_rng_range(rng, 0, IMG_SIZE - len);
	if (test_rng_next(rng) % 2)
		o.pos &= ~(uint64_t)4095;
	o.seed = test_rng_next(rng);
	return o;
}

static void op_run(struct backend *b, const struct op *o, unsigned char *buf)
{
	int ret;

	switch (o->kind) {
	case OP_WRITE:
		op_data(o, buf);
		ck_assert_msg(backend_pwrite(b, buf, o->len, o->pos) ==
				      (ssize_t)o->len,
			      "write of %u bytes at %llu", o->len,
			      (unsigned long long)o->pos);
		break;
	case OP_DISCARD:
		ret = backend_discard(b, o->pos, o->len);
		ck_assert_msg(ret == 0, "discard %u at %llu: expected 0, got %d",
			      o->len, (unsigned long long)o->pos, ret);
		break;
	default:
		ret = backend_write_zeroes(b, o->pos, o->len);
		ck_assert_msg(ret == 0,
			      "write_zeroes %u at %llu: expected 0, got %d",
			      o->len, (unsigned long long)o->pos, ret);
		break;
	}
}

/* One aio context for every open of a run: creating and destroying one
 * per open costs more than checking a cut. */
static struct dioloop_aio *run_aio;

static int open_volume(const char *path, const char *volume,
		       unsigned int flags, struct backend **out)
{
	struct backend_open_args args = { .path = path, .flags = flags,
					   .aio = run_aio, .volume = volume };

	return backend_open("cow", &args, out);
}

static int open_image(const char *path, unsigned int flags,
		      struct backend **out)
{
	return open_volume(path, NULL, flags, out);
}

static struct backend *open_recorded(struct recorder *r, const char *path,
				     const struct scenario *sc)
{
	struct backend *b;
	int ret;

	rec_forget_fds(r);
	ret = open_image(path, 0, &b);
	ck_assert_msg(ret == 0, "open %s: expected 0, got %d", path, ret);
	cow_set_commit_interval(b, sc->commit_ms);
	return b;
}

static void close_recorded(struct recorder *r, struct backend *b)
{
	backend_close(b);
	rec_forget_fds(r);
}

/*
 * A snapshot or clone of b (or, with MAX_SNAPSHOTS live, the deletion of
 * the oldest), as op number ops->len; durable when it returns.  False
 * when the backend has no snapshots.
 */
static bool volume_step(struct backend *b, struct recorder *r, GArray *ops,
			GArray *live, struct test_rng *rng)
{
	static uint32_t next_vol;
	struct op o = { 0 };
	char name[16];
	int ret;

	if (live->len >= MAX_SNAPSHOTS ||
	    (live->len && test_rng_range(rng, 0, 3) == 0)) {
		o.kind = OP_DELETE;
		o.vol = g_array_index(live, uint32_t, 0);
		g_array_remove_index(live, 0);
	} else {
		o.kind = test_rng_next(rng) % 2 ? OP_SNAPSHOT : OP_CLONE;
		o.vol = next_vol++;
	}
	snap_name(o.vol, name);
	rec_user(r, REC_OP_BEGIN, ops->len);
	if (o.kind == OP_DELETE)
		ret = cow_delete_volume(b, name);
	else
		ret = cow_snapshot(b, name, o.kind == OP_CLONE);
	if (ret == -EOPNOTSUPP)
		return false;
	ck_assert_msg(ret == 0, "%s %s: expected 0, got %d",
		      o.kind == OP_DELETE ? "delete" : "snapshot", name, ret);
	g_array_append_val(ops, o);
	if (o.kind != OP_DELETE)
		g_array_append_val(live, o.vol);
	rec_user(r, REC_USER_FLUSH, ops->len);
	return true;
}

/* Run sc's workload on path with r installed; the ops into ops. */
static void run_workload(const struct scenario *sc, const char *path,
			 struct recorder *r, GArray *ops, struct test_rng *rng)
{
	GArray *live = g_array_new(FALSE, FALSE, sizeof(uint32_t));
	unsigned char *buf = g_malloc(MAX_OP);
	bool snapshots = sc->snap_pct > 0;
	struct backend *b;
	unsigned int i;
	int ret;

	atomic_store(&dioloop_iorec, &r->hook);
	b = open_recorded(r, path, sc);
	for (i = 0; i < sc->nr_ops && rec_data_len(r) < LOG_DATA_SOFT_MAX;
	     i++) {
		struct op o = op_random(rng);

		rec_user(r, REC_OP_BEGIN, ops->len);
		op_run(b, &o, buf);
		g_array_append_val(ops, o);
		if (test_rng_range(rng, 0, 99) < sc->flush_pct) {
			ret = backend_flush(b);
			ck_assert_msg(ret == 0, "flush: expected 0, got %d", ret);
			rec_user(r, REC_USER_FLUSH, ops->len);
		}
		if (test_rng_range(rng, 0, 99) < sc->reopen_pct) {
			ret = backend_flush(b);
			ck_assert_msg(ret == 0, "flush: expected 0, got %d", ret);
			rec_user(r, REC_USER_FLUSH, ops->len);
			close_recorded(r, b);
			b = open_recorded(r, path, sc);
		}
		if (snapshots && test_rng_range(rng, 0, 99) < sc->snap_pct &&
		    !volume_step(b, r, ops, live, rng)) {
			fprintf(stderr, "%s: cow_snapshot: not supported, no volume steps\n",
				sc->name);
			snapshots = false;
		}
		/* Let background commits interleave with the next ops. */
		if (sc->commit_ms && test_rng_range(rng, 0, 7) == 0)
			g_usleep(test_rng_range(rng, 0, 2 * sc->commit_ms) *
				 1000);
	}
	ret = backend_flush(b);
	ck_assert_msg(ret == 0, "final flush: expected 0, got %d", ret);
	rec_user(r, REC_USER_FLUSH, ops->len);
	close_recorded(r, b);
	atomic_store(&dioloop_iorec, NULL);
	g_array_free(live, TRUE);
	g_free(buf);
}

/* ---- building the image a cut leaves ---- */

/* A growing flat file image in memory. */
struct flat {
	unsigned char *mem;
	size_t cap, size;
};

static void flat_reserve(struct flat *f, size_t end)
{
	if (end <= f->cap)
		return;
	f->cap = MAX(end, f->cap * 2);
	f->mem = g_realloc(f->mem, f->cap);
	memset(f->mem + f->size, 0, f->cap - f->size);
}

static void flat_resize(struct flat *f, size_t size)
{
	flat_reserve(f, size);
	if (size < f->size)
		memset(f->mem + size, 0, f->size - size);
	f->size = size;
}

static void flat_write(struct flat *f, const void *buf, size_t len, size_t off)
{
	flat_reserve(f, off + len);
	memcpy(f->mem + off, buf, len);
	f->size = MAX(f->size, off + len);
}

static void flat_apply(struct flat *f, const struct recorder *r,
		       const struct rec *x)
{
	if (x->kind == REC_WRITE)
		flat_write(f, r->data->data + x->data, x->len, x->off);
	else if (x->kind == REC_SIZE)
		flat_resize(f, x->off);
}

static void flat_load(struct flat *f, const char *path)
{
	gchar *contents;
	gsize len;

	ck_assert_msg(g_file_get_contents(path, &contents, &len, NULL),
		      "read %s", path);
	flat_write(f, contents, len, 0);
	g_free(contents);
}

/* Write the uncovered write x into fd: whole, or torn. */
static void tail_write(int fd, const struct recorder *r, const struct rec *x,
		       struct test_rng *rng)
{
	const unsigned char *p = r->data->data + x->data;
	unsigned int nsect = x->len / SECTOR, s;
	unsigned int tear = (unsigned int)test_rng_range(rng, 0, 7);

	if (tear > 1 || nsect < 2) {
		ck_assert_msg(pwrite(fd, p, x->len, (off_t)x->off) ==
				      (ssize_t)x->len, "pwrite the copy");
		return;
	}
	/* Torn: a prefix of its sectors (0), or any of them (1). */
	nsect = tear == 0 ? (unsigned int)test_rng_range(rng, 0, nsect - 1) :
			    nsect;
	for (s = 0; s < nsect; s++) {
		if (tear == 1 && test_rng_next(rng) % 2)
			continue;
		ck_assert_msg(pwrite(fd, p + s * SECTOR, SECTOR,
				     (off_t)(x->off + s * SECTOR)) == SECTOR,
			      "pwrite the copy");
	}
}

/*
 * Where the cut images go: a memfd, opened by path through /proc/self/fd
 * (shmem takes O_DIRECT, and a cut costs no disk I/O), or else a file in
 * dir.  Its path; its descriptor in *fd.
 */
static char *cut_target(const char *dir, int *fd)
{
	char *path;
	int probe;

	*fd = memfd_create("powercut", MFD_CLOEXEC);
	if (*fd >= 0) {
		path = g_strdup_printf("/proc/self/fd/%d", *fd);
		probe = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (probe >= 0) {
			close(probe);
			return path;
		}
		g_free(path);
		close(*fd);
	}
	path = g_build_filename(dir, "cut.cow", NULL);
	*fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(*fd >= 0, "create %s: %s", path, g_strerror(errno));
	return path;
}

/*
 * Write into fd the image the cut leaves: base (everything durable),
 * then recs [from, cut): size changes in order, writes kept or dropped,
 * shuffled, some torn.  How many writes were uncertain into *tail, how
 * many of them were kept into *kept.
 */
static void write_cut(int fd, const struct flat *base,
		      const struct recorder *r, guint from, guint cut,
		      struct test_rng *rng, guint *tail, guint *kept)
{
	GArray *w = g_array_new(FALSE, FALSE, sizeof(guint));
	guint i;

	ck_assert_msg(ftruncate(fd, 0) == 0, "empty the cut image");
	ck_assert_msg(pwrite(fd, base->mem, base->size, 0) ==
			      (ssize_t)base->size, "write the base of the copy");
	for (i = from; i < cut; i++) {
		const struct rec *x = &g_array_index(r->recs, struct rec, i);

		if (x->kind == REC_SIZE) {
			ck_assert_msg(ftruncate(fd, (off_t)x->off) == 0,
				      "ftruncate the copy");
		} else if (x->kind == REC_WRITE) {
			(*tail)++;
			if (test_rng_next(rng) % 4)
				g_array_append_val(w, i);
		}
	}
	*kept = w->len;
	for (i = w->len; i > 1; i--) {
		guint j = (guint)test_rng_range(rng, 0, i - 1);
		guint t = g_array_index(w, guint, i - 1);

		g_array_index(w, guint, i - 1) = g_array_index(w, guint, j);
		g_array_index(w, guint, j) = t;
	}
	for (i = 0; i < w->len; i++)
		tail_write(fd, r, &g_array_index(r->recs, struct rec,
						 g_array_index(w, guint, i)),
			   rng);
	g_array_free(w, TRUE);
}

/* ---- checking a cut ---- */

/* What a cut expects: the model after ops [0, flushed); the blocks that
 * ops [flushed, started) touched, with every content they may hold. */
struct expect {
	unsigned char *model;		/* after ops [0, model_ops) */
	guint model_ops;
	unsigned char *scratch;
	GArray *cand[IMG_BLOCKS];	/* uint64_t hashes; NULL: exact */
	unsigned char *buf;
};

static uint64_t block_hash(const unsigned char *blk)
{
	return XXH64(blk, COW_BLOCK_SIZE, 0);
}

static void expect_prepare(struct expect *e, GArray *ops, guint flushed,
			   guint started)
{
	guint i;
	uint64_t lbn;

	for (lbn = 0; lbn < IMG_BLOCKS; lbn++)
		if (e->cand[lbn])
			g_array_set_size(e->cand[lbn], 0);
	ck_assert_msg(flushed >= e->model_ops, "cuts are in order");
	for (; e->model_ops < flushed; e->model_ops++)
		model_apply(e->model, &g_array_index(ops, struct op,
						     e->model_ops), e->buf);
	if (started == flushed)
		return;
	memcpy(e->scratch, e->model, IMG_SIZE);
	for (i = flushed; i < started; i++) {
		const struct op *o = &g_array_index(ops, struct op, i);

		if (!op_is_data(o))
			continue;
		model_apply(e->scratch, o, e->buf);
		for (lbn = o->pos / COW_BLOCK_SIZE;
		     lbn <= (o->pos + o->len - 1) / COW_BLOCK_SIZE; lbn++) {
			uint64_t h;

			if (!e->cand[lbn])
				e->cand[lbn] = g_array_new(FALSE, FALSE,
							   sizeof(uint64_t));
			if (!e->cand[lbn]->len) {
				h = block_hash(e->model + lbn * COW_BLOCK_SIZE);
				g_array_append_val(e->cand[lbn], h);
			}
			h = block_hash(e->scratch + lbn * COW_BLOCK_SIZE);
			g_array_append_val(e->cand[lbn], h);
		}
	}
}

/* The first block of b that holds what it may not; -1 when none. */
static int64_t expect_mismatch(const struct expect *e, struct backend *b)
{
	unsigned char *back = g_malloc(MiB);
	uint64_t pos, lbn;
	int64_t bad = -1;

	for (pos = 0; pos < IMG_SIZE && bad < 0; pos += MiB) {
		ck_assert_msg(backend_pread(b, back, MiB, pos) == (ssize_t)MiB,
			      "read 1 MiB at %llu of the cut image",
			      (unsigned long long)pos);
		for (lbn = pos / COW_BLOCK_SIZE;
		     lbn < (pos + MiB) / COW_BLOCK_SIZE && bad < 0; lbn++) {
			const unsigned char *got =
				back + (lbn * COW_BLOCK_SIZE - pos);
			GArray *c = e->cand[lbn];
			bool ok = false;
			guint k;

			if (!c || !c->len) {
				ok = !memcmp(got, e->model + lbn * COW_BLOCK_SIZE,
					     COW_BLOCK_SIZE);
			} else {
				uint64_t h = block_hash(got);

				for (k = 0; k < c->len && !ok; k++)
					ok = g_array_index(c, uint64_t, k) == h;
			}
			if (!ok)
				bad = (int64_t)lbn;
		}
	}
	g_free(back);
	return bad;
}

static void report_line(void *opaque, const char *msg)
{
	GString *s = opaque;

	if (s->len < 600)
		g_string_append_printf(s, "\n  %s", msg);
}

/* A cut's description for failure messages. */
struct cut_info {
	const char *scenario;
	guint cut, nr_recs, durable, tail, kept;
	guint flushed, started;
};

#define CUT_FMT "%s: cut at %u of %u (durable up to %u, %u writes uncertain, %u kept; ops [0,%u) flushed, [%u,%u) uncertain)"
#define CUT_ARGS(c) (c)->scenario, (c)->cut, (c)->nr_recs, (c)->durable, \
	(c)->tail, (c)->kept, (c)->flushed, (c)->flushed, (c)->started

/* A snapshot or clone the workload took: when, and what it holds. */
struct snap {
	uint32_t vol;
	bool clone;
	guint created;			/* its op */
	guint deleted;			/* its deletion's op, or G_MAXUINT */
	uint64_t hash[IMG_BLOCKS];	/* of each block when taken */
};

/* The snapshots of ops (struct snap *), from one replay of the ops. */
static GPtrArray *snaps_of(GArray *ops)
{
	GPtrArray *snaps = g_ptr_array_new_with_free_func(g_free);
	unsigned char *m = g_malloc0(IMG_SIZE), *buf = g_malloc(MAX_OP);
	guint i, k;

	for (i = 0; i < ops->len; i++) {
		const struct op *o = &g_array_index(ops, struct op, i);
		struct snap *sn;

		if (op_is_data(o)) {
			model_apply(m, o, buf);
		} else if (o->kind == OP_DELETE) {
			for (k = 0; k < snaps->len; k++) {
				sn = g_ptr_array_index(snaps, k);
				if (sn->vol == o->vol)
					sn->deleted = i;
			}
		} else {
			sn = g_new0(struct snap, 1);
			sn->vol = o->vol;
			sn->clone = o->kind == OP_CLONE;
			sn->created = i;
			sn->deleted = G_MAXUINT;
			for (k = 0; k < IMG_BLOCKS; k++)
				sn->hash[k] = block_hash(m + (size_t)k *
							 COW_BLOCK_SIZE);
			g_ptr_array_add(snaps, sn);
		}
	}
	g_free(m);
	g_free(buf);
	return snaps;
}

static const struct snap *snap_find(GPtrArray *snaps, const char *name)
{
	char n[16];
	guint k;

	for (k = 0; k < snaps->len; k++) {
		const struct snap *sn = g_ptr_array_index(snaps, k);

		snap_name(sn->vol, n);
		if (!strcmp(n, name))
			return sn;
	}
	return NULL;
}

/* The first block of volume name that differs from sn; -1 when none. */
static int64_t snap_mismatch(const char *path, const char *name,
			     const struct snap *sn)
{
	unsigned char *back = g_malloc(MiB);
	struct backend *b;
	uint64_t pos, lbn;
	int64_t bad = -1;
	int ret = open_volume(path, name, BACKEND_OPEN_RDONLY, &b);

	ck_assert_msg(ret == 0, "open volume %s read-only: expected 0, got %d",
		      name, ret);
	for (pos = 0; pos < IMG_SIZE && bad < 0; pos += MiB) {
		ck_assert_msg(backend_pread(b, back, MiB, pos) == (ssize_t)MiB,
			      "read 1 MiB at %llu of volume %s",
			      (unsigned long long)pos, name);
		for (lbn = pos / COW_BLOCK_SIZE;
		     lbn < (pos + MiB) / COW_BLOCK_SIZE && bad < 0; lbn++)
			if (block_hash(back + (lbn * COW_BLOCK_SIZE - pos)) !=
			    sn->hash[lbn])
				bad = (int64_t)lbn;
	}
	backend_close(b);
	g_free(back);
	return bad;
}

/* The volumes a cut left: the ones that must exist do, hold what they
 * held when taken; none that may not exist does. */
static void check_snapshots(const char *path, GPtrArray *snaps,
			    const struct cut_info *ci)
{
	GArray *vols = g_array_new(FALSE, FALSE,
				   sizeof(struct cow_volume_info));
	struct backend *b;
	char name[16];
	guint k, v;
	int ret;

	ret = open_image(path, BACKEND_OPEN_RDONLY, &b);
	ck_assert_msg(ret == 0, CUT_FMT ": open read-only: expected 0, got %d",
		      CUT_ARGS(ci), ret);
	ret = cow_list_volumes(b, vols);
	ck_assert_msg(ret == 0, CUT_FMT ": list volumes: expected 0, got %d",
		      CUT_ARGS(ci), ret);
	backend_close(b);
	for (v = 0; v < vols->len; v++) {
		const char *n = g_array_index(vols, struct cow_volume_info,
					      v).name;

		ck_assert_msg(!n[0] || snap_find(snaps, n),
			      CUT_FMT ": volume \"%s\" was never created",
			      CUT_ARGS(ci), n);
	}
	for (k = 0; k < snaps->len; k++) {
		const struct snap *sn = g_ptr_array_index(snaps, k);
		bool must = sn->created < ci->flushed &&
			    !(sn->deleted < ci->started);
		bool must_not = sn->created >= ci->started ||
				sn->deleted < ci->flushed;
		const struct cow_volume_info *info = NULL;
		int64_t bad;

		snap_name(sn->vol, name);
		for (v = 0; v < vols->len; v++)
			if (!strcmp(g_array_index(vols, struct cow_volume_info,
						  v).name, name))
				info = &g_array_index(vols,
						      struct cow_volume_info, v);
		ck_assert_msg(info || !must,
			      CUT_FMT ": %s (taken by op %u) exists",
			      CUT_ARGS(ci), name, sn->created);
		ck_assert_msg(!info || !must_not,
			      CUT_FMT ": %s (taken by op %u, deleted by op %d) does not exist",
			      CUT_ARGS(ci), name, sn->created,
			      sn->deleted == G_MAXUINT ? -1 : (int)sn->deleted);
		if (!info)
			continue;
		ck_assert_msg(info->snapshot == !sn->clone,
			      CUT_FMT ": %s is a %s", CUT_ARGS(ci), name,
			      sn->clone ? "clone" : "snapshot");
		bad = snap_mismatch(path, name, sn);
		ck_assert_msg(bad < 0,
			      CUT_FMT ": block %lld of %s (taken by op %u) holds what the volume held then",
			      CUT_ARGS(ci), (long long)bad, name, sn->created);
	}
	g_array_free(vols, TRUE);
}

static void check_cut(const char *path, const struct expect *e,
		      const struct cut_info *ci, bool reopen_rw,
		      struct test_rng *rng)
{
	struct cow_check_result res = { 0 };
	GString *msgs = g_string_new("");
	struct backend *b = NULL;
	int64_t bad;
	int ret;

	ret = cow_check(path, COW_CHECK_DATA, &res, report_line, msgs);
	ck_assert_msg(ret == 0 && res.errors == 0,
		      CUT_FMT ": cow_check: expected 0 and no problems, got %d and %llu problems (%llu leaked):%s",
		      CUT_ARGS(ci), ret, (unsigned long long)res.errors,
		      (unsigned long long)res.leaked, msgs->str);
	g_string_free(msgs, TRUE);

	ret = open_image(path, BACKEND_OPEN_RDONLY, &b);
	ck_assert_msg(ret == 0, CUT_FMT ": open read-only: expected 0, got %d",
		      CUT_ARGS(ci), ret);
	bad = expect_mismatch(e, b);
	ck_assert_msg(bad < 0,
		      CUT_FMT ": block %lld holds %s",
		      CUT_ARGS(ci), (long long)bad,
		      e->cand[bad] && e->cand[bad]->len ?
			      "none of the contents the ops since the flush gave it" :
			      "something else than the last flushed write");
	ck_assert_msg(cow_test_stats(b).csum_errors == 0,
		      CUT_FMT ": no checksum errors", CUT_ARGS(ci));
	backend_close(b);
	if (!reopen_rw)
		return;

	/* The recovered image keeps working. */
	{
		unsigned char *blk = g_malloc(COW_BLOCK_SIZE);
		uint64_t pos = test_rng_range(rng, 0, IMG_BLOCKS - 1) *
			       COW_BLOCK_SIZE;

		ret = open_image(path, 0, &b);
		ck_assert_msg(ret == 0, CUT_FMT ": open read-write: expected 0, got %d",
			      CUT_ARGS(ci), ret);
		cow_set_commit_interval(b, 0);
		test_rng_fill(rng, blk, COW_BLOCK_SIZE);
		ck_assert_msg(backend_pwrite(b, blk, COW_BLOCK_SIZE, pos) ==
				      (ssize_t)COW_BLOCK_SIZE,
			      CUT_FMT ": write after recovery", CUT_ARGS(ci));
		ck_assert_msg(backend_flush(b) == 0,
			      CUT_FMT ": flush after recovery", CUT_ARGS(ci));
		backend_close(b);
		msgs = g_string_new("");
		ret = cow_check(path, COW_CHECK_DATA, &res, report_line, msgs);
		ck_assert_msg(ret == 0 && res.errors == 0,
			      CUT_FMT ": cow_check after writing to the recovered image: %d, %llu problems:%s",
			      CUT_ARGS(ci), ret,
			      (unsigned long long)res.errors, msgs->str);
		g_string_free(msgs, TRUE);
		g_free(blk);
	}
}

static gint guint_cmp(gconstpointer a, gconstpointer b)
{
	guint x = *(const guint *)a, y = *(const guint *)b;

	return x < y ? -1 : x > y;
}

/* Cut points: positions just before I/O records (or the end), sorted. */
static GArray *pick_cuts(const struct recorder *r, unsigned int n,
			 struct test_rng *rng)
{
	GArray *io = g_array_new(FALSE, FALSE, sizeof(guint));
	GArray *cuts = g_array_new(FALSE, FALSE, sizeof(guint));
	guint i;

	for (i = 0; i < r->recs->len; i++) {
		uint8_t k = g_array_index(r->recs, struct rec, i).kind;

		if (k != REC_OP_BEGIN && k != REC_USER_FLUSH)
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

/* One workload of sc, then every cut point checked. */
static void powercut_run(const struct scenario *sc, uint64_t salt)
{
	char *path = cow_test_image(IMG_SIZE, sc->csum_type);
	char *dir = g_path_get_dirname(path);
	int copy_fd;
	char *copy = cut_target(dir, &copy_fd);
	struct recorder *r = recorder_new(path);
	GArray *ops = g_array_new(FALSE, FALSE, sizeof(struct op));
	struct flat base = { 0 };
	struct expect e = { 0 };
	struct test_rng rng;
	guint based = 0, scanned = 0, durable = 0, flushed = 0, started = 0;
	GPtrArray *snaps;
	GArray *cuts;
	unsigned int k;
	uint64_t lbn;
	gint64 start;

	ck_assert_msg(dioloop_aio_new(64, "powercut-aio", &run_aio) == 0,
		      "create an aio context");
	test_rng_init(&rng, salt);
	flat_load(&base, path);
	start = g_get_monotonic_time();
	run_workload(sc, path, r, ops, &rng);
	cuts = pick_cuts(r, test_iterations(sc->cuts), &rng);
	fprintf(stderr, "%s: %u ops, %u records (%u syncs, %u flushes), %.1f MiB written in %.1f s; %u cuts\n",
		sc->name, ops->len, r->recs->len, rec_count(r, REC_FLUSH_END),
		rec_count(r, REC_USER_FLUSH), r->data->len / (double)MiB,
		(g_get_monotonic_time() - start) / 1e6, cuts->len);
	start = g_get_monotonic_time();

	snaps = snaps_of(ops);
	e.model = g_malloc0(IMG_SIZE);
	e.scratch = g_malloc(IMG_SIZE);
	e.buf = g_malloc(MAX_OP);
	for (k = 0; k < cuts->len; k++) {
		guint cut = g_array_index(cuts, guint, k);
		struct cut_info ci;
		guint tail = 0, kept = 0;

		/* What the records before the cut make durable, and what
		 * the workload was told. */
		for (; scanned < cut; scanned++) {
			const struct rec *x = &g_array_index(r->recs, struct rec,
							      scanned);

			if (x->kind == REC_FLUSH_END && x->res == 0)
				durable = MAX(durable, (guint)x->token - 1);
			else if (x->kind == REC_USER_FLUSH)
				flushed = x->op;
			else if (x->kind == REC_OP_BEGIN)
				started = x->op + 1;
		}
		for (; based < durable; based++)
			flat_apply(&base, r, &g_array_index(r->recs, struct rec,
							    based));
		write_cut(copy_fd, &base, r, durable, cut, &rng, &tail, &kept);
		expect_prepare(&e, ops, flushed, started);
		ci = (struct cut_info){ sc->name, cut, r->recs->len, durable,
					tail, kept, flushed, started };
		if (snaps->len)
			check_snapshots(copy, snaps, &ci);
		check_cut(copy, &e, &ci, k % 10 == 9, &rng);
	}

	fprintf(stderr, "%s: %u cuts checked in %.1f s\n", sc->name, cuts->len,
		(g_get_monotonic_time() - start) / 1e6);
	for (lbn = 0; lbn < IMG_BLOCKS; lbn++)
		if (e.cand[lbn])
			g_array_free(e.cand[lbn], TRUE);
	dioloop_aio_free(run_aio);
	run_aio = NULL;
	g_free(e.model);
	g_free(e.scratch);
	g_free(e.buf);
	g_free(base.mem);
	g_ptr_array_free(snaps, TRUE);
	g_array_free(cuts, TRUE);
	g_array_free(ops, TRUE);
	recorder_free(r);
	close(copy_fd);
	if (g_str_has_prefix(copy, dir))	/* not the memfd */
		unlink(copy);
	unlink(path);
	rmdir(dir);
	g_free(copy);
	g_free(dir);
	g_free(path);
}

static void powercut_scenario(const struct scenario *sc, uint64_t salt,
			      unsigned int runs)
{
	unsigned int i;

	for (i = 0; i < runs; i++)
		powercut_run(sc, salt * 1000 + i);
}

START_TEST(test_cow_powercut_flushed_writes_survive)
{
	static const struct scenario sc = {
		.name = "flushes", .commit_ms = 0, .flush_pct = 12,
		.nr_ops = 300, .cuts = 300,
	};

	powercut_scenario(&sc, 1, 2);
}
END_TEST

START_TEST(test_cow_powercut_background_commits)
{
	static const struct scenario sc = {
		.name = "background commits", .csum_type = COW_CSUM_XXHASH64,
		.commit_ms = 3, .flush_pct = 4, .snap_pct = 2, .nr_ops = 300,
		.cuts = 300,
	};

	powercut_scenario(&sc, 2, 2);
}
END_TEST

START_TEST(test_cow_powercut_reopen)
{
	static const struct scenario sc = {
		.name = "reopen", .commit_ms = 0, .flush_pct = 8,
		.reopen_pct = 4, .snap_pct = 2, .nr_ops = 250, .cuts = 300,
	};

	powercut_scenario(&sc, 3, 2);
}
END_TEST

START_TEST(test_cow_powercut_snapshots)
{
	static const struct scenario sc = {
		.name = "snapshots", .commit_ms = 5, .flush_pct = 5,
		.snap_pct = 8, .nr_ops = 250, .cuts = 300,
	};

	powercut_scenario(&sc, 4, 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_powercut");
	TCase *tc = tcase_create("cuts");

	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_cow_powercut_flushed_writes_survive);
	tcase_add_test(tc, test_cow_powercut_background_commits);
	tcase_add_test(tc, test_cow_powercut_reopen);
	tcase_add_test(tc, test_cow_powercut_snapshots);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
