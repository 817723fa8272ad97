/* SPDX-License-Identifier: MIT */
/*
 * The redirect format (fusefs/redirect.c) parsed as hostile text: the two
 * valid kinds (a file target with its dev:ino, a URL with 0 0) parse to
 * what they say and format back to the same text; every text with one
 * field off is refused and leaves nothing allocated; the names of
 * redirect files.
 */
#include <check.h>
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fusefs/redirect.h"
#include "tests/testutil.h"

#define FILE_TEXT "dioloop-redirect 2\nname a.img\nimage 2049 131\ntarget 2050 7\n" \
		  "path /srv/images/disk0.img\n"
#define URL_TEXT "dioloop-redirect 2\nname a.img\nimage 0 0\ntarget 0 0\n" \
		 "path nfs://127.0.0.1:2049/export/disk0.img?version=3\n"

START_TEST(test_redirect_parse_file_target)
{
	struct dioloop_redirect r;
	g_autofree char *text = NULL;

	ck_assert_int_eq(dioloop_redirect_parse(FILE_TEXT, &r), 0);
	ck_assert_msg(r.image_dev == 2049 && r.image_ino == 131 &&
		      r.target_dev == 2050 && r.target_ino == 7,
		      "image 2049:131, target 2050:7; got %llu:%llu, %llu:%llu",
		      (unsigned long long)r.image_dev,
		      (unsigned long long)r.image_ino,
		      (unsigned long long)r.target_dev,
		      (unsigned long long)r.target_ino);
	ck_assert_str_eq(r.path, "/srv/images/disk0.img");
	ck_assert_str_eq(r.name, "a.img");
	text = dioloop_redirect_format(&r);
	ck_assert_str_eq(text, FILE_TEXT);
	dioloop_redirect_clear(&r);
	ck_assert_ptr_null(r.path);
}
END_TEST

START_TEST(test_redirect_parse_url_target)
{
	struct dioloop_redirect r;
	g_autofree char *text = NULL;

	ck_assert_int_eq(dioloop_redirect_parse(URL_TEXT, &r), 0);
	ck_assert_msg(!r.image_dev && !r.image_ino && !r.target_dev &&
		      !r.target_ino, "a URL with 0 0 for both");
	ck_assert_str_eq(r.path,
			 "nfs://127.0.0.1:2049/export/disk0.img?version=3");
	text = dioloop_redirect_format(&r);
	ck_assert_str_eq(text, URL_TEXT);
	dioloop_redirect_clear(&r);

	/* The scheme in any case, as the nfs backend takes it. */
	ck_assert_int_eq(dioloop_redirect_parse(
		"dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 0 0\npath NFS://h/e/d\n",
		&r), 0);
	ck_assert_str_eq(r.path, "NFS://h/e/d");
	dioloop_redirect_clear(&r);
}
END_TEST

START_TEST(test_redirect_format_round_trips)
{
	const struct dioloop_redirect cases[] = {
		{ (char *)"a b \xc3\xa9.img", UINT64_MAX, UINT64_MAX,
		  UINT64_MAX, UINT64_MAX, (char *)"/a b/\xc3\xa9 x" },
		{ (char *)"x", 0, 0, 1, 0, (char *)"/x" },
		{ (char *)"i.img", 5, 6, 0, 0, (char *)"nfs://h/e/i.img" },
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_autofree char *text = dioloop_redirect_format(&cases[i]);
		struct dioloop_redirect r;

		ck_assert_msg(dioloop_redirect_parse(text, &r) == 0,
			      "formatted case %zu parses: %s", i, text);
		ck_assert_msg(r.image_dev == cases[i].image_dev &&
			      r.image_ino == cases[i].image_ino &&
			      r.target_dev == cases[i].target_dev &&
			      r.target_ino == cases[i].target_ino &&
			      !strcmp(r.path, cases[i].path),
			      "case %zu parses back to what was formatted", i);
		dioloop_redirect_clear(&r);
	}
}
END_TEST

/* Texts with one thing wrong, each refused (one loop test each). */
static const struct {
	const char *what, *text;
} corrupt[] = {
	{ "old header", "dioloop-redirect 1\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "header with a trailing space",
	  "dioloop-redirect 2 \nname a.img\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "missing name line", "dioloop-redirect 2\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "empty name", "dioloop-redirect 2\nname \nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "hidden name", "dioloop-redirect 2\nname .a.img\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "name with a slash", "dioloop-redirect 2\nname d/a.img\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "name with a tab", "dioloop-redirect 2\nname a\tb\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "name key misspelt", "dioloop-redirect 2\nnmae a.img\nimage 1 2\ntarget 3 4\npath /x/y\n" },
	{ "missing target line", "dioloop-redirect 2\nname a.img\nimage 1 2\npath /x/y\n" },
	{ "missing image line", "dioloop-redirect 2\nname a.img\ntarget 3 4\npath /x/y\n" },
	{ "missing path line", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\n" },
	{ "extra line",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x/y\nmore\n" },
	{ "extra empty line",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x/y\n\n" },
	{ "lines swapped",
	  "dioloop-redirect 2\nname a.img\ntarget 3 4\nimage 1 2\npath /x/y\n" },
	{ "non-numeric dev", "dioloop-redirect 2\nname a.img\nimage x 2\ntarget 3 4\npath /x/y\n" },
	{ "non-numeric ino", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 y\npath /x/y\n" },
	{ "signed dev", "dioloop-redirect 2\nname a.img\nimage -1 2\ntarget 3 4\npath /x/y\n" },
	{ "plus sign", "dioloop-redirect 2\nname a.img\nimage 1 +2\ntarget 3 4\npath /x/y\n" },
	{ "hex dev", "dioloop-redirect 2\nname a.img\nimage 0x1 2\ntarget 3 4\npath /x/y\n" },
	{ "dev past 2^64",
	  "dioloop-redirect 2\nname a.img\nimage 18446744073709551616 2\ntarget 3 4\npath /x/y\n" },
	{ "ino past 2^64",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 18446744073709551616\npath /x/y\n" },
	{ "one number", "dioloop-redirect 2\nname a.img\nimage 1\ntarget 3 4\npath /x/y\n" },
	{ "three numbers", "dioloop-redirect 2\nname a.img\nimage 1 2 3\ntarget 3 4\npath /x/y\n" },
	{ "trailing space after ino",
	  "dioloop-redirect 2\nname a.img\nimage 1 2 \ntarget 3 4\npath /x/y\n" },
	{ "two spaces between numbers",
	  "dioloop-redirect 2\nname a.img\nimage 1  2\ntarget 3 4\npath /x/y\n" },
	{ "space after the key twice",
	  "dioloop-redirect 2\nname a.img\nimage  1 2\ntarget 3 4\npath /x/y\n" },
	{ "key without a space", "dioloop-redirect 2\nname a.img\nimage1 2\ntarget 3 4\npath /x/y\n" },
	{ "path key misspelt", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npaht /x/y\n" },
	{ "path key without a space",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npathx/x/y\n" },
	{ "relative path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath x/y\n" },
	{ "dot-relative path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath ./x\n" },
	{ "empty path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath \n" },
	{ "path /", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /\n" },
	{ "path with a space before it",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath  /x\n" },
	{ "tab in path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x\ty\n" },
	{ "carriage return in path",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x/y\r\n" },
	{ "DEL in path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x\x7fy\n" },
	{ "escape in path", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x\x1b[0m\n" },
	{ "other URL scheme",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 0 0\npath http://h/e\n" },
	{ "URL with a target dev:ino",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath nfs://h/e/d\n" },
	{ "URL with a target ino only",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 0 4\npath nfs://h/e/d\n" },
	{ "file path with target 0 0",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 0 0\npath /x/y\n" },
	{ "no final newline", "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x/y" },
	{ "text after the last newline",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x/y\nmore" },
	{ "CRLF line ends",
	  "dioloop-redirect 2\r\nimage 1 2\r\ntarget 3 4\r\npath /x/y\r\n" },
	{ "empty", "" },
	{ "newline only", "\n" },
	/* What the parser sees of a file with a NUL in its path line: the
	 * text ends without a newline. */
	{ "cut at a NUL in the path",
	  "dioloop-redirect 2\nname a.img\nimage 1 2\ntarget 3 4\npath /x\0/y\n" },
};

START_TEST(test_redirect_rejects_one_field_off)
{
	struct dioloop_redirect r;
	int ret;

	ret = dioloop_redirect_parse(corrupt[_i].text, &r);
	ck_assert_msg(ret == -EBADMSG, "%s: -EBADMSG, got %d (path %s)",
		      corrupt[_i].what, ret, r.path ? r.path : "none");
	ck_assert_msg(r.path == NULL, "%s: nothing allocated after a refusal",
		      corrupt[_i].what);
}
END_TEST

/* The parser sees a C string: what follows a NUL is the caller's (its
 * byte count) to refuse.  Valid text with a NUL and junk after it parses
 * as the text before the NUL. */
START_TEST(test_redirect_parse_stops_at_nul)
{
	static const char text[] = FILE_TEXT "\0junk\n";
	struct dioloop_redirect r;

	ck_assert_uint_gt(sizeof(text) - 1, strlen(text));
	ck_assert_int_eq(dioloop_redirect_parse(text, &r), 0);
	ck_assert_str_eq(r.path, "/srv/images/disk0.img");
	dioloop_redirect_clear(&r);
}
END_TEST

START_TEST(test_redirect_names)
{
	g_autofree char *name = dioloop_redirect_name("disk0.img");
	g_autofree char *back = dioloop_redirected_name(name);
	g_autofree char *dot = dioloop_redirected_name(".x" DIOLOOP_REDIRECT_SUFFIX);

	ck_assert_str_eq(name, ".disk0.img" DIOLOOP_REDIRECT_SUFFIX);
	ck_assert_str_eq(back, "disk0.img");
	ck_assert_str_eq(dot, "x");
	ck_assert_ptr_null(dioloop_redirected_name("disk0.img"));
	ck_assert_ptr_null(dioloop_redirected_name("." DIOLOOP_REDIRECT_SUFFIX));
	ck_assert_ptr_null(dioloop_redirected_name("x" DIOLOOP_REDIRECT_SUFFIX));
	ck_assert_ptr_null(dioloop_redirected_name(".x" DIOLOOP_REDIRECT_SUFFIX ".tmp"));
}
END_TEST

static Suite *redirect_suite(void)
{
	Suite *s = suite_create("redirect");
	TCase *tc;

	tc = tcase_create("valid");
	tcase_add_test(tc, test_redirect_parse_file_target);
	tcase_add_test(tc, test_redirect_parse_url_target);
	tcase_add_test(tc, test_redirect_format_round_trips);
	tcase_add_test(tc, test_redirect_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile");
	tcase_add_loop_test(tc, test_redirect_rejects_one_field_off, 0,
			    (int)G_N_ELEMENTS(corrupt));
	tcase_add_test(tc, test_redirect_parse_stops_at_nul);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(redirect_suite());
}
