/* SPDX-License-Identifier: MIT */
/*
 * Power cuts of the rbd backend, simulated from the cluster's view
 * (tests/remote_powercut.h).  librbd completes a write once the cluster
 * or its client cache took it; only a completed rbd_aio_flush makes
 * durable every write completed before the flush was sent.  The backend
 * reports that to the I/O recorder as an unstable WRITE per completed
 * write and a COMMIT per completed flush (one cluster, so one verifier):
 * a cut keeps the writes a COMMIT covers and drops, keeps or tears the
 * others.  Every byte must then hold what the workload wrote up to its
 * last returned flush, or what a later write gave it: a flush that does
 * not reach rbd_aio_flush loses flushed writes in some cut.
 *
 * Needs the rbd backend and a cluster (the rbd_cluster CTest fixture sets
 * DIOLOOP_RBD_CLUSTER, as for check_rbd); else it skips (exit status 77)
 * and says why.  DIOLOOP_POWERCUT_CUTS=N checks N cuts (default 300,
 * scaled by DIOLOOP_TEST_SCALE); DIOLOOP_TEST_SEED repeats a run.
 */
#include "tests/remote_powercut.h"

/* The workload on a fresh image in the cluster: batches of writes with
 * flushes now and then, a final flush; the image must then hold every
 * write, read back through a new open. */
static void run_workload(const char *url, struct nrecorder *r, GArray *ops,
			 struct test_rng *rng)
{
	struct backend_create_args c = { .path = url, .size = IMG_SIZE };
	struct backend_open_args args = { .path = url };
	g_autoptr(GError) error = NULL;
	unsigned char *model = g_malloc0(IMG_SIZE), *buf = g_malloc(MAX_OP);
	unsigned char *disk = g_malloc(IMG_SIZE);
	struct backend *b;
	unsigned int i;
	int ret;

	ret = backend_create(NULL, &c, &error);
	ck_assert_msg(ret == 0, "create %s: %s", url,
		      error ? error->message : g_strerror(-ret));
	atomic_store(&dioloop_iorec, &r->hook);
	ret = backend_open("rbd", &args, &b);
	ck_assert_msg(ret == 0, "open %s: %s", url, g_strerror(-ret));
	for (i = 0; i < 80; i++)
		run_batch(b, r, ops, rng, false);
	ret = backend_flush(b);
	ck_assert_msg(ret == 0, "final flush: expected 0, got %d", ret);
	nrec_append(r, &(struct nrec){ .kind = NREC_USER_FLUSH,
				       .op = ops->len });
	backend_close(b);
	atomic_store(&dioloop_iorec, NULL);
	fprintf(stderr, "workload: %u writes, %u records (%u WRITE completions, %u stable; %u flushes completed by the cluster; %u flushes returned), %.1f MiB\n",
		ops->len, r->recs->len, nrec_count(r, NREC_WRITE),
		nrec_stable_writes(r), nrec_count(r, NREC_COMMIT),
		nrec_count(r, NREC_USER_FLUSH), r->data->len / (double)MiB);

	for (i = 0; i < ops->len; i++) {
		const struct op *o = &g_array_index(ops, struct op, i);

		op_data(o, buf);
		memcpy(model + o->pos, buf, o->len);
	}
	ret = backend_open("rbd", &args, &b);
	ck_assert_msg(ret == 0, "open %s again: %s", url, g_strerror(-ret));
	ck_assert_int_eq(backend_pread(b, disk, IMG_SIZE, 0), (ssize_t)IMG_SIZE);
	backend_close(b);
	ck_assert_msg(!memcmp(disk, model, IMG_SIZE),
		      "the image holds every write after the final flush");
	g_free(disk);
	g_free(model);
	g_free(buf);
}

START_TEST(test_rbd_powercut_flushed_writes_survive)
{
	g_autofree char *url = g_strdup_printf("rbd://rbd/powercut-%ld",
					       (long)getpid());
	struct nrecorder *r = nrecorder_new(url);
	GArray *ops = g_array_new(FALSE, FALSE, sizeof(struct op));
	struct test_rng rng;

	test_rng_init(&rng, 3);
	run_workload(url, r, ops, &rng);
	ck_assert_msg(nrec_count(r, NREC_COMMIT) >= 1,
		      "the cluster completed at least one flush");
	check_cuts(r, ops, nr_cuts(300), &rng);
	ck_assert_int_eq(backend_remove_url(url, NULL), 0);
	g_array_free(ops, TRUE);
	nrecorder_free(r);
}
END_TEST

int main(void)
{
	const char *dir = getenv("DIOLOOP_RBD_CLUSTER");
	g_autofree char *conf = NULL;
	Suite *s;
	TCase *tc;

	if (!backend_lookup("rbd")) {
		printf("SKIP: the rbd backend is not built (no librbd-dev/librados-dev)\n");
		return 77;
	}
	if (dir && *dir)
		conf = g_build_filename(dir, "ceph.conf", NULL);
	if (!conf || access(conf, R_OK) != 0) {
		printf("SKIP: no cluster: DIOLOOP_RBD_CLUSTER%s (ctest sets it through the rbd_cluster fixture)\n",
		       conf ? " has no ceph.conf" : " is not set");
		return 77;
	}
	setenv("CEPH_CONF", conf, 1);
	s = suite_create("rbd_powercut");
	tc = tcase_create("cuts");
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE,
			  quiet_log, NULL);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_rbd_powercut_flushed_writes_survive);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
