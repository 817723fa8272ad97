/* SPDX-License-Identifier: MIT */
/*
 * The request fixup of the daemon's /dev/fuse hooks (fusefs/session_io.c):
 * FUSE_COPY_FILE_RANGE_64 becomes FUSE_COPY_FILE_RANGE with its length
 * clamped to what a 32-bit reply can say; every other request, and a
 * buffer too short to hold the request it claims, is left as it is.
 */
#include <check.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>

#include "fusefs/session_io.h"
#include "tests/testutil.h"

#define OP_COPY_64 53

struct copy_request {
	struct fuse_in_header in;
	struct fuse_copy_file_range_in arg;
};

static struct copy_request copy_request(uint32_t opcode, uint64_t len)
{
	struct copy_request r;

	memset(&r, 0, sizeof(r));
	r.in.len = sizeof(r);
	r.in.opcode = opcode;
	r.in.unique = 42;
	r.in.nodeid = 7;
	r.arg.fh_in = 1;
	r.arg.off_in = 4096;
	r.arg.nodeid_out = 8;
	r.arg.fh_out = 2;
	r.arg.off_out = 8192;
	r.arg.len = len;
	return r;
}

START_TEST(test_session_io_copy_64_becomes_copy)
{
	struct copy_request r = copy_request(OP_COPY_64, 1 << 20);
	struct copy_request want = copy_request(FUSE_COPY_FILE_RANGE, 1 << 20);

	dioloop_session_io_fixup(&r, sizeof(r));
	ck_assert_uint_eq(r.in.opcode, FUSE_COPY_FILE_RANGE);
	ck_assert_msg(memcmp(&r, &want, sizeof(r)) == 0,
		      "only the opcode changes");
}
END_TEST

START_TEST(test_session_io_copy_64_length_clamped)
{
	struct copy_request r = copy_request(OP_COPY_64, (uint64_t)5 << 30);

	dioloop_session_io_fixup(&r, sizeof(r));
	ck_assert_uint_eq(r.in.opcode, FUSE_COPY_FILE_RANGE);
	ck_assert_uint_eq(r.arg.len, 0xfffff000u);
	ck_assert_uint_eq(r.arg.off_in, 4096);
	ck_assert_uint_eq(r.arg.off_out, 8192);
}
END_TEST

START_TEST(test_session_io_other_requests_untouched)
{
	static const uint32_t ops[] = { FUSE_COPY_FILE_RANGE, FUSE_READ,
					FUSE_WRITE, FUSE_INIT, 54, 4096 };
	size_t i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct copy_request r = copy_request(ops[i], (uint64_t)5 << 30);
		struct copy_request want = r;

		dioloop_session_io_fixup(&r, sizeof(r));
		ck_assert_msg(memcmp(&r, &want, sizeof(r)) == 0,
			      "opcode %u changed", ops[i]);
	}
}
END_TEST

START_TEST(test_session_io_short_buffer_untouched)
{
	struct copy_request r = copy_request(OP_COPY_64, 1 << 20);
	struct copy_request want = r;

	/* Fewer bytes read than the request needs. */
	dioloop_session_io_fixup(&r, sizeof(r) - 1);
	ck_assert(memcmp(&r, &want, sizeof(r)) == 0);
	/* A header that claims less than the request needs. */
	r.in.len = sizeof(r.in) + 8;
	want = r;
	dioloop_session_io_fixup(&r, sizeof(r));
	ck_assert(memcmp(&r, &want, sizeof(r)) == 0);
	dioloop_session_io_fixup(&r, 0);
	ck_assert(memcmp(&r, &want, sizeof(r)) == 0);
}
END_TEST

static Suite *session_io_suite(void)
{
	Suite *s = suite_create("session_io");
	TCase *tc = tcase_create("fixup");

	tcase_add_test(tc, test_session_io_copy_64_becomes_copy);
	tcase_add_test(tc, test_session_io_copy_64_length_clamped);
	tcase_add_test(tc, test_session_io_other_requests_untouched);
	tcase_add_test(tc, test_session_io_short_buffer_untouched);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(session_io_suite());
}
