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
#include "tests/remote_powercut.h"
#include "tests/testutil.h"

#define IMG_NAME "powercut.img"

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
