/* SPDX-License-Identifier: MIT */
/*
 * Sparse writing (backends/sparse_copy.h) over the "mem" test double:
 * whole zero blocks stay holes on a fresh destination and are cleared on
 * one that had data; a short zero tail is data.
 */
#include <check.h>
#include <string.h>

#include "backends/sparse_copy.h"
#include "backends/testing/mem.h"
#include "tests/testutil.h"

#define BLK SPARSE_BLOCK

static struct backend *open_mem(void)
{
	struct backend_open_args args = { .path = "size=1M" };
	struct backend *b = NULL;

	ck_assert_int_eq(backend_open("mem", &args, &b), 0);
	return b;
}

START_TEST(test_sparse_copy_fresh_keeps_holes)
{
	struct backend *dst = open_mem();
	uint8_t *buf = g_malloc0(4 * BLK);
	uint64_t written = 0;

	/* data, zero, zero, data */
	memset(buf, 0x33, BLK);
	memset(buf + 3 * BLK, 0x22, BLK);
	ck_assert_int_eq(backend_write_sparse(dst, buf, 0, 4 * BLK, true,
					      &written), 0);
	ck_assert_msg(written == 2 * BLK, "two data blocks written, got %llu",
		      (unsigned long long)written);
	ck_assert(mem_backend_block_written(dst, 0));
	ck_assert_msg(!mem_backend_block_written(dst, BLK) &&
		      !mem_backend_block_written(dst, 2 * BLK),
		      "zero blocks stay holes on a fresh destination");
	ck_assert(mem_backend_block_written(dst, 3 * BLK));
	backend_close(dst);
	g_free(buf);
}
END_TEST

START_TEST(test_sparse_copy_clears_old_data)
{
	struct backend *dst = open_mem();
	uint8_t *buf = g_malloc(2 * BLK), *back = g_malloc(2 * BLK);

	memset(buf, 0x44, 2 * BLK);
	ck_assert_int_eq(backend_pwrite(dst, buf, 2 * BLK, 0), 2 * BLK);
	memset(buf, 0, BLK);
	ck_assert_int_eq(backend_write_sparse(dst, buf, 0, 2 * BLK, false,
					      NULL), 0);
	ck_assert_msg(!mem_backend_block_written(dst, 0),
		      "a zero block over old data is cleared");
	ck_assert_int_eq(mem_backend_peek(dst, 0, back, 2 * BLK), 0);
	ck_assert_msg(!memcmp(buf, back, 2 * BLK), "dst reads what buf holds");
	/* A short tail of zeros is written as data. */
	ck_assert_int_eq(backend_write_sparse(dst, buf, 8 * BLK, 100, true,
					      NULL), 0);
	ck_assert(mem_backend_block_written(dst, 8 * BLK));
	backend_close(dst);
	g_free(buf);
	g_free(back);
}
END_TEST

static Suite *sparse_copy_suite(void)
{
	Suite *s = suite_create("sparse_copy");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_sparse_copy_fresh_keeps_holes);
	tcase_add_test(tc, test_sparse_copy_clears_old_data);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(sparse_copy_suite());
}
