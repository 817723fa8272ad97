/* SPDX-License-Identifier: MIT */
/*
 * /proc/self/mountinfo as the commands read it (fusefs/mountinfo.c): the
 * octal escapes the kernel writes for space, tab, newline and backslash,
 * escapes that are not whole kept as they are, and the fields of a line.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fusefs/mountinfo.h"
#include "tests/testutil.h"

/* s unescaped (a copy). */
static char *unescaped(const char *s)
{
	char *copy = g_strdup(s);

	dioloop_mountinfo_unescape(copy);
	return copy;
}

#define ck_unescape(in, want)						\
	do {								\
		g_autofree char *got_ = unescaped(in);			\
		ck_assert_msg(!strcmp(got_, want),			\
			      "unescape(\"%s\"): want \"%s\", got \"%s\"", \
			      in, want, got_);				\
	} while (0)

START_TEST(test_mountinfo_unescape_octal)
{
	ck_unescape("/mnt/my\\040disk", "/mnt/my disk");
	ck_unescape("a\\011b", "a\tb");
	ck_unescape("a\\012b", "a\nb");
	ck_unescape("a\\134b", "a\\b");
	/* Next to each other, at both ends. */
	ck_unescape("\\040\\040x\\134\\134", "  x\\\\");
	/* An escaped backslash followed by digits is not a second escape. */
	ck_unescape("\\134040", "\\040");
	ck_unescape("/plain/path", "/plain/path");
}
END_TEST

START_TEST(test_mountinfo_unescape_malformed_kept)
{
	/* Truncated at the end of the string. */
	ck_unescape("x\\", "x\\");
	ck_unescape("x\\0", "x\\0");
	ck_unescape("x\\04", "x\\04");
	/* Not octal digits, or a first digit past 3 (more than a byte). */
	ck_unescape("x\\08y", "x\\08y");
	ck_unescape("x\\0a0y", "x\\0a0y");
	ck_unescape("x\\400y", "x\\400y");
	ck_unescape("x\\abcy", "x\\abcy");
	/* A malformed escape does not eat a good one after it. */
	ck_unescape("\\9\\040", "\\9 ");
}
END_TEST

START_TEST(test_mountinfo_unescape_empty)
{
	ck_unescape("", "");
}
END_TEST

START_TEST(test_mountinfo_parse_fields)
{
	struct dioloop_mountinfo m = { 0 };

	ck_assert_msg(dioloop_mountinfo_parse(
			      "36 35 0:42 / /mnt/my\\040blk rw,nosuid shared:1 "
			      "master:2 - fuse.dioloop dioloop:/srv/my\\040images "
			      "rw,user_id=0",
			      &m),
		      "a line with two optional tags parses");
	ck_assert_uint_eq(major(m.dev), 0);
	ck_assert_uint_eq(minor(m.dev), 42);
	ck_assert_str_eq(m.mountpoint, "/mnt/my blk");
	ck_assert_str_eq(m.fstype, "fuse.dioloop");
	ck_assert_str_eq(m.source, "dioloop:/srv/my images");
	ck_assert_int_eq(m.owner, 0);
	dioloop_mountinfo_clear(&m);
	ck_assert_ptr_null(m.mountpoint);

	ck_assert(dioloop_mountinfo_parse(
		"36 35 0:42 / /mnt rw - fuse.dioloop src "
		"rw,user_id=1000,group_id=1000,allow_other", &m));
	ck_assert_int_eq(m.owner, 1000);
	dioloop_mountinfo_clear(&m);
	ck_assert(dioloop_mountinfo_parse(
		"36 35 0:42 / /mnt rw - fuse.dioloop src rw,user_id=12x", &m));
	ck_assert_msg(m.owner == -1, "a malformed user_id names no owner");
	dioloop_mountinfo_clear(&m);

	ck_assert_msg(dioloop_mountinfo_parse(
			      "25 1 8:1 / / rw - ext4 /dev/sda1 rw", &m),
		      "a line without optional tags parses");
	ck_assert_uint_eq(major(m.dev), 8);
	ck_assert_str_eq(m.mountpoint, "/");
	ck_assert_str_eq(m.fstype, "ext4");
	ck_assert_msg(m.owner == -1, "no user_id: no owner");
	dioloop_mountinfo_clear(&m);
}
END_TEST

/* The start time of a process, read past a name that holds ") " and
 * spaces: this thread's own, named so, against its task's stat read by
 * hand from the end (starttime is field 22, the 31st from the end of a
 * 52-field line). */
START_TEST(test_proc_start_ticks)
{
	unsigned long long mine = 0, again = 0, by_hand = 0;
	g_autofree char *text = NULL;
	g_auto(GStrv) f = NULL;
	guint n;

	ck_assert_int_eq(prctl(PR_SET_NAME, "a) b 3 (c", 0, 0, 0), 0);
	ck_assert_int_eq(dioloop_proc_start_ticks(getpid(), &mine), 0);
	ck_assert_int_eq(dioloop_proc_start_ticks(getpid(), &again), 0);
	ck_assert(mine == again && mine > 0);
	ck_assert(g_file_get_contents("/proc/self/stat", &text, NULL, NULL));
	f = g_strsplit(g_strchomp(text), " ", -1);
	n = g_strv_length(f);
	ck_assert_uint_ge(n, 52);
	ck_assert_int_eq(sscanf(f[n - 31], "%llu", &by_hand), 1);
	ck_assert_msg(mine == by_hand, "start %llu, by hand %llu", mine,
		      by_hand);
	ck_assert_int_eq(dioloop_proc_start_ticks(0, &mine), -ESRCH);
}
END_TEST

START_TEST(test_mountinfo_parse_refuses_other_shapes)
{
	struct dioloop_mountinfo m = { 0 };

	ck_assert_msg(!dioloop_mountinfo_parse("", &m), "empty line");
	ck_assert_msg(!dioloop_mountinfo_parse("36 35 0:42 / /mnt rw", &m),
		      "too few fields");
	ck_assert_msg(!dioloop_mountinfo_parse(
			      "36 35 0:42 / /mnt rw shared:1 fuse src rw", &m),
		      "no separator");
	ck_assert_msg(!dioloop_mountinfo_parse(
			      "36 35 0:42 / /mnt rw - fuse", &m),
		      "separator without a source");
	ck_assert_msg(!dioloop_mountinfo_parse(
			      "36 35 zero / /mnt rw - fuse src rw", &m),
		      "no MAJ:MIN");
	ck_assert_ptr_null(m.mountpoint);
}
END_TEST

START_TEST(test_mountinfo_read_lists_root)
{
	g_autoptr(GArray) mounts = dioloop_mountinfo_read();
	bool root = false;
	guint i;

	ck_assert_ptr_nonnull(mounts);
	for (i = 0; i < mounts->len; i++)
		root |= !strcmp(g_array_index(mounts, struct dioloop_mountinfo,
					      i).mountpoint, "/");
	ck_assert_msg(root, "/ is among the %u mounts", mounts->len);
}
END_TEST

static Suite *mountinfo_suite(void)
{
	Suite *s = suite_create("mountinfo");
	TCase *tc = tcase_create("unescape");

	tcase_add_test(tc, test_mountinfo_unescape_octal);
	tcase_add_test(tc, test_mountinfo_unescape_malformed_kept);
	tcase_add_test(tc, test_mountinfo_unescape_empty);
	suite_add_tcase(s, tc);
	tc = tcase_create("parse");
	tcase_add_test(tc, test_mountinfo_parse_fields);
	tcase_add_test(tc, test_mountinfo_parse_refuses_other_shapes);
	tcase_add_test(tc, test_mountinfo_read_lists_root);
	tcase_add_test(tc, test_proc_start_ticks);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(mountinfo_suite());
}
