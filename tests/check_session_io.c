/* SPDX-License-Identifier: MIT */
/*
 * The request fixup of the daemon's /dev/fuse hooks (fusefs/session_io.c):
 * FUSE_COPY_FILE_RANGE_64 becomes FUSE_COPY_FILE_RANGE with its length
 * clamped to what a 32-bit reply can say; every other request, and a
 * buffer too short to hold the request it claims, is left as it is.  The
 * INIT reply gains FUSE_DIRECT_IO_ALLOW_MMAP once, only when the kernel
 * offered it and the reply is a successful extended one.
 */
#include <check.h>
#include <errno.h>
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

#define ALLOW_MMAP_FLAGS2 (1u << 4)	/* FUSE_DIRECT_IO_ALLOW_MMAP >> 32 */

struct init_request {
	struct fuse_in_header in;
	struct fuse_init_in arg;
};

/* The kernel's INIT request, offering flags2 (with FUSE_INIT_EXT). */
static void see_init(uint64_t unique, uint32_t flags2)
{
	struct init_request r;

	memset(&r, 0, sizeof(r));
	r.in.len = sizeof(r);
	r.in.opcode = FUSE_INIT;
	r.in.unique = unique;
	r.arg.major = 7;
	r.arg.minor = 45;
	r.arg.flags = FUSE_INIT_EXT;
	r.arg.flags2 = flags2;
	dioloop_session_io_fixup(&r, sizeof(r));
}

/* libfuse's reply to request unique (error, flags), through the reply
 * fixup: the flags2 that goes out. */
static uint32_t reply_flags2(uint64_t unique, int32_t error, uint32_t flags)
{
	struct fuse_out_header out = { .len = sizeof(out), .error = error,
				       .unique = unique };
	struct fuse_init_out arg;
	struct iovec iov[2] = { { &out, sizeof(out) }, { &arg, sizeof(arg) } };

	memset(&arg, 0, sizeof(arg));
	arg.major = 7;
	arg.minor = 38;
	arg.flags = flags;
	arg.flags2 = 1;		/* what libfuse said stays */
	dioloop_session_io_fixup_reply(iov, 2);
	ck_assert_uint_eq(arg.flags2 & 1, 1);
	return arg.flags2;
}

START_TEST(test_session_io_init_reply_allows_mmap)
{
	see_init(100, ALLOW_MMAP_FLAGS2);
	/* Another request's reply is not the INIT reply. */
	ck_assert_uint_eq(reply_flags2(99, 0, FUSE_INIT_EXT), 1);
	ck_assert_uint_eq(reply_flags2(100, 0, FUSE_INIT_EXT),
			  1 | ALLOW_MMAP_FLAGS2);
	/* Once only. */
	ck_assert_uint_eq(reply_flags2(100, 0, FUSE_INIT_EXT), 1);
}
END_TEST

START_TEST(test_session_io_init_reply_only_what_is_offered)
{
	/* A kernel that does not offer it. */
	see_init(200, 0);
	ck_assert_uint_eq(reply_flags2(200, 0, FUSE_INIT_EXT), 1);
	/* A reply without FUSE_INIT_EXT has no flags2 to extend. */
	see_init(201, ALLOW_MMAP_FLAGS2);
	ck_assert_uint_eq(reply_flags2(201, 0, 0), 1);
	/* An INIT that failed. */
	see_init(202, ALLOW_MMAP_FLAGS2);
	ck_assert_uint_eq(reply_flags2(202, -EPROTO, FUSE_INIT_EXT), 1);
}
END_TEST

#define OVER_IO_URING_FLAGS2 (1u << 9)	/* FUSE_OVER_IO_URING >> 32 */

START_TEST(test_session_io_init_reply_no_uring_unless_asked)
{
	/* The kernel offers io_uring; the mount did not ask for it
	 * (transport=dev, the default): the reply must not take it. */
	see_init(300, ALLOW_MMAP_FLAGS2 | OVER_IO_URING_FLAGS2);
	ck_assert_uint_eq(reply_flags2(300, 0, FUSE_INIT_EXT),
			  1 | ALLOW_MMAP_FLAGS2);
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
	tc = tcase_create("init");
	tcase_add_test(tc, test_session_io_init_reply_allows_mmap);
	tcase_add_test(tc, test_session_io_init_reply_only_what_is_offered);
	tcase_add_test(tc, test_session_io_init_reply_no_uring_unless_asked);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(session_io_suite());
}
