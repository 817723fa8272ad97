/* SPDX-License-Identifier: MIT */
/*
 * The cow backend's volumes against in-memory models: a seeded random
 * sequence of writes, discards, clone_ranges, snapshots, clones,
 * deletions, commits, opens, closes and reopens across the volumes of one
 * container, every volume compared with its model, and the offline
 * checker run after every commit: no problem, and reference counts exactly
 * the references (section 8's arithmetic: shared pages copied by one
 * volume, then by the other, deleted under each other...).
 */
#include "backends/cow/check.h"
#include "tests/cow_test.h"

/* A 3-level map (more than 42,336 blocks), written in three zones so
 * that leaves and interior pages are shared and copied again and again. */
#define VM_BLOCKS ((uint64_t)52000)
#define VM_MAX_VOLS 8
#define VM_CHUNK 256u

static const struct { uint64_t first, len; } zones[] = {
	{ 0, 600 }, { 42100, 500 }, { 51700, 300 },
};

struct vm_vol {
	bool exists;
	char name[COW_VOLUME_NAME_MAX + 1];	/* "" for the default */
	bool snapshot;
	struct backend *b;			/* NULL: closed */
	uint64_t *model;			/* word per block, 0: hole */
};

struct vm {
	char *path;
	struct vm_vol vol[VM_MAX_VOLS];
	struct test_rng rng;
	unsigned int next_name, checks, counts[16];
	uint32_t next_tag;
};

static void report_line(void *opaque, const char *msg)
{
	(void)opaque;
	fprintf(stderr, "cow_check: %s\n", msg);
}

/* A block written by write number tag at lbn: the word (tag, lbn)
 * repeated; clone_range moves it elsewhere unchanged. */
static uint64_t block_word(uint32_t tag, uint64_t lbn)
{
	return (uint64_t)tag << 40 | lbn;
}

static void fill_block(uint8_t *blk, uint64_t w)
{
	unsigned int i;

	for (i = 0; i < 4096 / 8; i++)
		memcpy(blk + i * 8, &w, 8);
}

/* Any open volume (to reach the container). */
static struct backend *any_open(struct vm *m)
{
	unsigned int i;

	for (i = 0; i < VM_MAX_VOLS; i++)
		if (m->vol[i].b)
			return m->vol[i].b;
	return NULL;
}

static void vm_check(struct vm *m, const char *when, unsigned int step)
{
	struct backend *b = any_open(m);
	struct cow_check_result r;
	unsigned int i, nvol = 0;
	int ret = cow_check(m->path, m->checks % 8 ? 0 : COW_CHECK_DATA, &r,
			    report_line, NULL);

	m->checks++;
	ck_assert_msg(ret == 0 && r.errors == 0,
		      "step %u, %s: the image is consistent with exact counts (ret %d, %llu problems, %llu leaked)",
		      step, when, ret, (unsigned long long)r.errors,
		      (unsigned long long)r.leaked);
	for (i = 0; i < VM_MAX_VOLS; i++)
		nvol += m->vol[i].exists;
	ck_assert_msg(r.volumes == nvol, "step %u: %u volumes (checker: %llu)",
		      step, nvol, (unsigned long long)r.volumes);
	if (b)
		ck_assert_msg(cow_test_stats(b).used_blocks == r.used_blocks,
			      "step %u: the backend and the checker agree on blocks in use (%llu, %llu)",
			      step,
			      (unsigned long long)cow_test_stats(b).used_blocks,
			      (unsigned long long)r.used_blocks);
}

/* Compare blocks [first, first + n) of volume v with its model. */
static void vm_verify(struct vm *m, unsigned int v, uint64_t first,
		      uint64_t n, unsigned int step)
{
	uint8_t *buf = g_malloc(VM_CHUNK * 4096), want[4096];
	struct vm_vol *vol = &m->vol[v];
	uint64_t done = 0;

	while (done < n) {
		uint64_t k = MIN(n - done, VM_CHUNK), i;

		ck_assert_msg(cow_test_read(vol->b, buf, k * 4096,
					    (first + done) * 4096, NULL) ==
			      (ssize_t)(k * 4096), "step %u: read", step);
		for (i = 0; i < k; i++) {
			uint64_t lbn = first + done + i;
			uint64_t w = vol->model[lbn];

			fill_block(want, w);
			ck_assert_msg(memcmp(buf + i * 4096, want, 4096) == 0,
				      "step %u: volume \"%s\" block %llu matches its model (write %llu of block %llu)",
				      step, vol->name, (unsigned long long)lbn,
				      (unsigned long long)(w >> 40),
				      (unsigned long long)(w & 0xffffffffffULL));
		}
		done += k;
	}
	g_free(buf);
}

static void vm_verify_all(struct vm *m, unsigned int v, unsigned int step)
{
	unsigned int z;

	for (z = 0; z < G_N_ELEMENTS(zones); z++)
		vm_verify(m, v, zones[z].first, zones[z].len, step);
}

static void vm_open(struct vm *m, unsigned int v)
{
	struct backend_open_args args = {
		.path = m->path,
		.volume = m->vol[v].name,
		/* A snapshot may be the first volume of the container. */
		.flags = BACKEND_OPEN_CONTAINER_RW,
	};
	int ret = backend_open("cow", &args, &m->vol[v].b);

	ck_assert_msg(ret == 0, "open volume \"%s\": %d", m->vol[v].name,
		      ret);
	cow_set_commit_interval(m->vol[v].b, 0);
}

static void vm_close(struct vm *m, unsigned int v)
{
	backend_close(m->vol[v].b);
	m->vol[v].b = NULL;
}

/* A random existing volume (open: 1 must be open, 0 must be closed,
 * -1 either; writable: must not be a snapshot), or -1. */
static int pick(struct vm *m, int open, bool writable)
{
	unsigned int cand[VM_MAX_VOLS], n = 0, i;

	for (i = 0; i < VM_MAX_VOLS; i++) {
		struct vm_vol *v = &m->vol[i];

		if (!v->exists || (open == 1 && !v->b) || (open == 0 && v->b) ||
		    (writable && v->snapshot))
			continue;
		cand[n++] = i;
	}
	return n ? (int)cand[test_rng_range(&m->rng, 0, n - 1)] : -1;
}

/* A random run of blocks inside a zone. */
static void pick_run(struct vm *m, uint64_t max, uint64_t *first,
		     uint64_t *n)
{
	unsigned int z = (unsigned int)test_rng_range(&m->rng, 0,
						      G_N_ELEMENTS(zones) - 1);

	*n = test_rng_range(&m->rng, 1, MIN(max, zones[z].len));
	*first = zones[z].first + test_rng_range(&m->rng, 0,
						 zones[z].len - *n);
}

enum vm_op { VM_WRITE, VM_DISCARD, VM_CLONE_RANGE, VM_SNAPSHOT,
	     VM_DELETE, VM_OPEN, VM_CLOSE, VM_COMMIT, VM_REOPEN, VM_READ,
	     VM_NR };

static void vm_step(struct vm *m, unsigned int step)
{
	uint64_t r = test_rng_range(&m->rng, 0, 99), first, n, i;
	enum vm_op op = r < 34 ? VM_WRITE : r < 40 ? VM_DISCARD :
			r < 47 ? VM_CLONE_RANGE : r < 55 ? VM_SNAPSHOT :
			r < 61 ? VM_DELETE : r < 67 ? VM_OPEN :
			r < 73 ? VM_CLOSE : r < 87 ? VM_COMMIT :
			r < 89 ? VM_REOPEN : VM_READ;
	int v = -1, w;

	switch (op) {
	case VM_WRITE: {
		uint8_t *buf;

		v = pick(m, 1, true);
		if (v < 0)
			return;
		pick_run(m, 24, &first, &n);
		buf = g_malloc(n * 4096);
		m->next_tag++;
		for (i = 0; i < n; i++) {
			uint64_t word = block_word(m->next_tag, first + i);

			fill_block(buf + i * 4096, word);
			m->vol[v].model[first + i] = word;
		}
		cow_test_write(m->vol[v].b, buf, n * 4096, first * 4096,
			       &m->rng);
		g_free(buf);
		break;
	}
	case VM_DISCARD:
		v = pick(m, 1, true);
		if (v < 0)
			return;
		pick_run(m, 64, &first, &n);
		ck_assert_msg(backend_discard(m->vol[v].b, first * 4096,
					      n * 4096) == 0,
			      "step %u: discard", step);
		for (i = 0; i < n; i++)
			m->vol[v].model[first + i] = 0;
		break;
	case VM_CLONE_RANGE: {
		uint64_t from, k, *tmp;

		v = pick(m, 1, true);
		w = pick(m, 1, false);
		if (v < 0 || w < 0)
			return;
		pick_run(m, 128, &first, &n);
		pick_run(m, n, &from, &k);
		n = k;	/* both runs inside zones */
		ck_assert_msg(backend_clone_range(m->vol[w].b, from * 4096,
						  m->vol[v].b, first * 4096,
						  n * 4096) ==
			      (ssize_t)(n * 4096), "step %u: clone_range",
			      step);
		tmp = g_memdup2(m->vol[w].model + from, n * sizeof(uint64_t));
		for (i = 0; i < n; i++)
			m->vol[v].model[first + i] = tmp[i];
		g_free(tmp);
		break;
	}
	case VM_SNAPSHOT: {
		int slot = -1;

		v = pick(m, 1, false);
		for (i = 0; i < VM_MAX_VOLS && slot < 0; i++)
			if (!m->vol[i].exists)
				slot = (int)i;
		if (v < 0 || slot < 0)
			return;
		snprintf(m->vol[slot].name, sizeof(m->vol[slot].name), "v%u",
			 m->next_name++);
		m->vol[slot].snapshot = test_rng_range(&m->rng, 0, 1);
		ck_assert_msg(cow_snapshot(m->vol[v].b, m->vol[slot].name,
					   !m->vol[slot].snapshot) == 0,
			      "step %u: snapshot of \"%s\" as \"%s\"", step,
			      m->vol[v].name, m->vol[slot].name);
		m->vol[slot].exists = true;
		memcpy(m->vol[slot].model, m->vol[v].model,
		       VM_BLOCKS * sizeof(uint64_t));
		vm_check(m, "after a snapshot", step);
		break;
	}
	case VM_DELETE:
		v = pick(m, 0, false);
		if (v <= 0 || !any_open(m))
			return;		/* the default volume stays */
		ck_assert_msg(cow_delete_volume(any_open(m), m->vol[v].name) == 0,
			      "step %u: delete \"%s\"", step, m->vol[v].name);
		m->vol[v].exists = false;
		vm_check(m, "after a deletion", step);
		break;
	case VM_OPEN:
		v = pick(m, 0, false);
		if (v < 0)
			return;
		vm_open(m, (unsigned int)v);
		if (test_rng_range(&m->rng, 0, 3) == 0)
			vm_verify_all(m, (unsigned int)v, step);
		break;
	case VM_CLOSE:
		v = pick(m, 1, false);
		if (v < 0)
			return;
		vm_close(m, (unsigned int)v);
		if (!any_open(m))
			vm_check(m, "all closed", step);
		break;
	case VM_COMMIT:
		if (!any_open(m))
			return;
		ck_assert_msg(backend_flush(any_open(m)) == 0,
			      "step %u: commit", step);
		vm_check(m, "after a commit", step);
		break;
	case VM_REOPEN:
		for (i = 0; i < VM_MAX_VOLS; i++)
			if (m->vol[i].b)
				vm_close(m, (unsigned int)i);
		vm_check(m, "closed for a reopen", step);
		for (i = 0; i < VM_MAX_VOLS; i++)
			if (m->vol[i].exists &&
			    (i == 0 || test_rng_range(&m->rng, 0, 1))) {
				vm_open(m, (unsigned int)i);
				vm_verify_all(m, (unsigned int)i, step);
			}
		break;
	case VM_READ:
		v = pick(m, 1, false);
		if (v < 0)
			return;
		pick_run(m, 200, &first, &n);
		vm_verify(m, (unsigned int)v, first, n, step);
		break;
	case VM_NR:
		break;
	}
	m->counts[op]++;
}

static void vm_run(uint8_t csum_type, unsigned int steps, uint64_t salt)
{
	struct vm m = { 0 };
	unsigned int i, k;

	m.path = cow_test_image(VM_BLOCKS * 4096, csum_type);
	test_rng_init(&m.rng, salt);
	for (i = 0; i < VM_MAX_VOLS; i++)
		m.vol[i].model = g_new0(uint64_t, VM_BLOCKS);
	m.vol[0].exists = true;
	vm_open(&m, 0);
	for (k = 0; k < steps; k++)
		vm_step(&m, k);
	for (i = 0; i < VM_MAX_VOLS; i++) {
		if (!m.vol[i].exists)
			continue;
		if (!m.vol[i].b)
			vm_open(&m, i);
		vm_verify_all(&m, i, steps);
	}
	for (i = 0; i < VM_MAX_VOLS; i++)
		if (m.vol[i].b)
			vm_close(&m, i);
	vm_check(&m, "at the end", steps);
	fprintf(stderr, "volume model: %u writes, %u discards, %u clone_ranges, %u snapshots, %u deletions, %u opens, %u closes, %u commits, %u reopens, %u reads, %u checks\n",
		m.counts[VM_WRITE], m.counts[VM_DISCARD],
		m.counts[VM_CLONE_RANGE], m.counts[VM_SNAPSHOT],
		m.counts[VM_DELETE], m.counts[VM_OPEN], m.counts[VM_CLOSE],
		m.counts[VM_COMMIT], m.counts[VM_REOPEN], m.counts[VM_READ],
		m.checks);
	ck_assert_msg(m.counts[VM_SNAPSHOT] > 5 && m.counts[VM_DELETE] > 2,
		      "the sequence snapshotted and deleted");
	for (i = 0; i < VM_MAX_VOLS; i++)
		g_free(m.vol[i].model);
	g_free(m.path);
}

/* Sequences are scaled down under valgrind, but never below 400 steps:
 * shorter ones may never delete a volume, which the run asserts. */
START_TEST(test_cow_volumes_match_their_models_crc32c)
{
	vm_run(COW_CSUM_CRC32C, MAX(test_iterations(2000), 400u), 101);
}
END_TEST

START_TEST(test_cow_volumes_match_their_models_xxhash64)
{
	vm_run(COW_CSUM_XXHASH64, MAX(test_iterations(1400), 400u), 202);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cow_volmodel");
	TCase *model = tcase_create("model");

	tcase_set_timeout(model, 900);
	tcase_add_test(model, test_cow_volumes_match_their_models_crc32c);
	tcase_add_test(model, test_cow_volumes_match_their_models_xxhash64);
	suite_add_tcase(s, model);
	return test_run_suite(s);
}
