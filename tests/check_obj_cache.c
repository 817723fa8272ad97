/* SPDX-License-Identifier: MIT */
/* Per-thread object caches: reuse, the keep limit, objects put on other
 * threads, threads that end, and many threads at once. */
#include <check.h>
#include <glib.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "iter/obj_cache.h"
#include "tests/testutil.h"

struct obj {
	uint64_t owner;
	uint64_t seq;
	char payload[200];
	void *held;
};

static struct dioloop_obj_cache_stats stats_of(struct dioloop_obj_cache *c)
{
	struct dioloop_obj_cache_stats st;

	dioloop_obj_cache_get_stats(c, &st);
	return st;
}

static struct dioloop_obj_cache reuse_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 8);

START_TEST(test_obj_cache_same_thread_reuses)
{
	struct obj *first = dioloop_obj_get(&reuse_cache);
	int i;

	ck_assert_uint_eq((uintptr_t)first % alignof(max_align_t), 0);
	ck_assert_uint_eq(first->owner, 0);	/* from the heap: zeroed */
	dioloop_obj_put(&reuse_cache, first);
	for (i = 0; i < 10000; i++) {
		struct obj *o = dioloop_obj_get(&reuse_cache);

		ck_assert_ptr_eq(o, first);
		o->seq = (uint64_t)i;
		dioloop_obj_put(&reuse_cache, o);
	}
	ck_assert_uint_eq(stats_of(&reuse_cache).made, 1);
	ck_assert_uint_eq(stats_of(&reuse_cache).dropped, 0);
	ck_assert_uint_eq(stats_of(&reuse_cache).homes, 1);
}
END_TEST

static struct dioloop_obj_cache keep_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 4);

START_TEST(test_obj_cache_keeps_at_most_keep)
{
	struct obj *o[10];
	int i;

	for (i = 0; i < 10; i++)
		o[i] = dioloop_obj_get(&keep_cache);
	for (i = 0; i < 10; i++)
		dioloop_obj_put(&keep_cache, o[i]);
	ck_assert_uint_eq(stats_of(&keep_cache).made, 10);
	ck_assert_uint_eq(stats_of(&keep_cache).dropped, 6);
	for (i = 0; i < 4; i++)
		o[i] = dioloop_obj_get(&keep_cache);
	ck_assert_uint_eq(stats_of(&keep_cache).made, 10);
	o[4] = dioloop_obj_get(&keep_cache);
	ck_assert_uint_eq(stats_of(&keep_cache).made, 11);
	for (i = 0; i < 5; i++)
		dioloop_obj_put(&keep_cache, o[i]);
}
END_TEST

/* Objects made on this thread, put by another: they come home. */
static struct dioloop_obj_cache cross_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 256);

#define CROSS_N 100

static gpointer put_all_thread(gpointer data)
{
	struct obj **objs = data;
	int i;

	for (i = 0; i < CROSS_N; i++)
		dioloop_obj_put(&cross_cache, objs[i]);
	return NULL;
}

START_TEST(test_obj_cache_returned_objects_come_home)
{
	struct obj *objs[CROSS_N];
	int round, i;

	for (round = 0; round < 5; round++) {
		for (i = 0; i < CROSS_N; i++) {
			objs[i] = dioloop_obj_get(&cross_cache);
			objs[i]->seq = (uint64_t)i;
		}
		g_thread_join(g_thread_new("put", put_all_thread, objs));
	}
	/* Only the first round went to the heap; the putting threads
	 * (each a new one) kept nothing. */
	ck_assert_uint_eq(stats_of(&cross_cache).made, CROSS_N);
	ck_assert_uint_eq(stats_of(&cross_cache).dropped, 0);
}
END_TEST

/* Objects other threads return count against keep too. */
static struct dioloop_obj_cache returned_keep_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 4);

static gpointer put_ten_thread(gpointer data)
{
	struct obj **objs = data;
	int i;

	for (i = 0; i < 10; i++)
		dioloop_obj_put(&returned_keep_cache, objs[i]);
	return NULL;
}

START_TEST(test_obj_cache_returned_objects_count_against_keep)
{
	struct obj *objs[10];
	int i;

	for (i = 0; i < 10; i++)
		objs[i] = dioloop_obj_get(&returned_keep_cache);
	g_thread_join(g_thread_new("put", put_ten_thread, objs));
	for (i = 0; i < 4; i++)
		objs[i] = dioloop_obj_get(&returned_keep_cache);
	ck_assert_uint_eq(stats_of(&returned_keep_cache).made, 10);
	ck_assert_uint_eq(stats_of(&returned_keep_cache).dropped, 6);
	objs[4] = dioloop_obj_get(&returned_keep_cache);
	ck_assert_uint_eq(stats_of(&returned_keep_cache).made, 11);
	for (i = 0; i < 5; i++)
		dioloop_obj_put(&returned_keep_cache, objs[i]);
}
END_TEST

/* A thread that ends gives its free objects back; its home goes to the
 * next thread, with what comes back to it after. */
static struct dioloop_obj_cache exit_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 16);

static struct obj *held;	/* made by a thread that then ends */

static gpointer get_put_thread(gpointer data)
{
	struct obj *o[5];
	int i;

	(void)data;
	for (i = 0; i < 5; i++)
		o[i] = dioloop_obj_get(&exit_cache);
	for (i = 0; i < 4; i++)
		dioloop_obj_put(&exit_cache, o[i]);
	held = o[4];
	return NULL;
}

static gpointer get_one_thread(gpointer data)
{
	struct obj *o = dioloop_obj_get(&exit_cache);

	*(struct obj **)data = o;
	dioloop_obj_put(&exit_cache, o);
	return NULL;
}

START_TEST(test_obj_cache_thread_exit)
{
	struct obj *got = NULL;

	g_thread_join(g_thread_new("gp", get_put_thread, NULL));
	ck_assert_uint_eq(stats_of(&exit_cache).made, 5);
	ck_assert_uint_eq(stats_of(&exit_cache).dropped, 4);
	/* Put here, after its thread ended: it goes to the idle home. */
	dioloop_obj_put(&exit_cache, held);
	g_thread_join(g_thread_new("one", get_one_thread, &got));
	ck_assert_ptr_eq(got, held);
	ck_assert_uint_eq(stats_of(&exit_cache).made, 5);
	ck_assert_uint_eq(stats_of(&exit_cache).homes, 1);
}
END_TEST

/* Objects that hold memory of their own: it is freed with them, when a
 * thread keeps too many and when a thread ends (else LeakSanitizer and
 * valgrind say so). */
static atomic_int drops;

static void obj_drop_payload(void *obj)
{
	g_free(((struct obj *)obj)->held);
	atomic_fetch_add(&drops, 1);
}

static struct dioloop_obj_cache drop_cache =
	DIOLOOP_OBJ_CACHE_INIT_DROP(sizeof(struct obj), 2, obj_drop_payload);

static gpointer hold_thread(gpointer data)
{
	struct obj *o[5];
	int i;

	(void)data;
	for (i = 0; i < 5; i++) {
		o[i] = dioloop_obj_get(&drop_cache);
		if (!o[i]->held)
			o[i]->held = g_malloc(100);
	}
	for (i = 0; i < 5; i++)
		dioloop_obj_put(&drop_cache, o[i]);
	ck_assert_int_eq(atomic_load(&drops), 3);
	return NULL;
}

START_TEST(test_obj_cache_drop_frees_what_objects_hold)
{
	g_thread_join(g_thread_new("hold", hold_thread, NULL));
	ck_assert_int_eq(atomic_load(&drops), 5);
	ck_assert_uint_eq(stats_of(&drop_cache).dropped, 5);
}
END_TEST

/*
 * Many makers hand objects to many putters through a queue, as FUSE
 * threads hand requests to completion threads.  Each object carries its
 * maker and a sequence number that must come through intact, and at most
 * MAKER_INFLIGHT per maker are out at once, so the heap is asked for no
 * more than that per maker however long it runs.
 */
static struct dioloop_obj_cache stress_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 64);

#define MAKERS 4
#define PUTTERS 3
#define MAKER_INFLIGHT 32

struct maker {
	int id;
	int count;
	GAsyncQueue *to_putters;
	GAsyncQueue *tokens;	/* MAKER_INFLIGHT tokens: one per object out */
};

static gpointer maker_thread(gpointer data)
{
	struct maker *m = data;
	int i;

	for (i = 0; i < m->count; i++) {
		struct obj *o;

		g_async_queue_pop(m->tokens);
		o = dioloop_obj_get(&stress_cache);
		o->owner = (uint64_t)m->id + 1;
		o->seq = (uint64_t)i;
		memset(o->payload, (char)(i + m->id), sizeof(o->payload));
		g_async_queue_push(m->to_putters, o);
	}
	return NULL;
}

static char putters_stop;	/* the queue's end marker, once per putter */

struct putter {
	GAsyncQueue *from_makers;
	struct maker *makers;
	uint64_t bad;
};

static gpointer putter_thread(gpointer data)
{
	struct putter *p = data;
	struct obj *o;

	while ((o = g_async_queue_pop(p->from_makers)) != (void *)&putters_stop) {
		struct maker *m = &p->makers[o->owner - 1];
		char want = (char)(o->seq + (uint64_t)m->id);
		size_t k;

		for (k = 0; k < sizeof(o->payload); k++)
			if (o->payload[k] != want)
				p->bad++;
		o->owner = 0;
		dioloop_obj_put(&stress_cache, o);
		g_async_queue_push(m->tokens, GINT_TO_POINTER(1));
	}
	return NULL;
}

START_TEST(test_obj_cache_many_threads)
{
	struct maker makers[MAKERS];
	struct putter putters[PUTTERS];
	GThread *mt[MAKERS], *pt[PUTTERS];
	GAsyncQueue *q = g_async_queue_new();
	int count = (int)test_iterations(20000);
	uint64_t bad = 0;
	int i, k;

	for (i = 0; i < MAKERS; i++) {
		makers[i] = (struct maker){ .id = i, .count = count,
					    .to_putters = q,
					    .tokens = g_async_queue_new() };
		for (k = 0; k < MAKER_INFLIGHT; k++)
			g_async_queue_push(makers[i].tokens,
					   GINT_TO_POINTER(1));
	}
	for (i = 0; i < PUTTERS; i++) {
		putters[i] = (struct putter){ .from_makers = q,
					      .makers = makers };
		pt[i] = g_thread_new("putter", putter_thread, &putters[i]);
	}
	for (i = 0; i < MAKERS; i++)
		mt[i] = g_thread_new("maker", maker_thread, &makers[i]);
	for (i = 0; i < MAKERS; i++)
		g_thread_join(mt[i]);
	for (i = 0; i < PUTTERS; i++)
		g_async_queue_push(q, &putters_stop);
	for (i = 0; i < PUTTERS; i++) {
		g_thread_join(pt[i]);
		bad += putters[i].bad;
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_le(stats_of(&stress_cache).made,
			  MAKERS * MAKER_INFLIGHT);
	for (i = 0; i < MAKERS; i++)
		g_async_queue_unref(makers[i].tokens);
	g_async_queue_unref(q);
}
END_TEST

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan a free object is poisoned: a use after put ends the process
 * as a use after free would. */
static struct dioloop_obj_cache poison_cache =
	DIOLOOP_OBJ_CACHE_INIT(sizeof(struct obj), 4);

START_TEST(test_obj_cache_use_after_put_is_caught)
{
	struct obj *o = dioloop_obj_get(&poison_cache);
	volatile uint64_t *seq = &o->seq;

	dioloop_obj_put(&poison_cache, o);
	*seq = 1;	/* ASan reports this and exits with status 1 */
}
END_TEST
#endif

static Suite *obj_cache_suite(void)
{
	Suite *s = suite_create("obj_cache");
	TCase *tc;

	tc = tcase_create("one thread");
	tcase_add_test(tc, test_obj_cache_same_thread_reuses);
	tcase_add_test(tc, test_obj_cache_keeps_at_most_keep);
#if defined(__SANITIZE_ADDRESS__)
	tcase_add_exit_test(tc, test_obj_cache_use_after_put_is_caught, 1);
#endif
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_obj_cache_returned_objects_come_home);
	tcase_add_test(tc, test_obj_cache_returned_objects_count_against_keep);
	tcase_add_test(tc, test_obj_cache_thread_exit);
	tcase_add_test(tc, test_obj_cache_drop_frees_what_objects_hold);
	tcase_add_test(tc, test_obj_cache_many_threads);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(obj_cache_suite());
}
