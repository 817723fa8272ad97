/* SPDX-License-Identifier: MIT */
/*
 * The registry's choice of backend: a file goes to the highest probe
 * score (cow's superblock beats raw's "any regular file"), a URL to the
 * backend of its scheme, an unknown scheme to a clear error; create goes
 * through the same choice; open puts its one line in args->error.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "tests/testutil.h"

#define MiB ((uint64_t)1024 * 1024)

static int warnings;

/* Count warnings: a line that went to *error must not be logged too. */
static void count_log(const gchar *domain, GLogLevelFlags level,
		      const gchar *msg, gpointer unused)
{
	if (level & G_LOG_LEVEL_WARNING)
		warnings++;
}

static void log_setup(void)
{
	warnings = 0;
	g_log_set_handler(NULL, G_LOG_LEVEL_WARNING, count_log, NULL);
}

START_TEST(test_registry_is_url)
{
	static const char *const urls[] = {
		"nfs://h/d/f.img", "NFS://h/d/f.img", "rbd://pool/img",
		"x+y.z-w://h",
	};
	static const char *const not_urls[] = {
		"a.img", "/tmp/a:b", "c:/x", "1nfs://h/d", "nfs:/h/d", "://h",
		"dir/nfs://h", "",
	};
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(urls); i++)
		ck_assert_msg(backend_is_url(urls[i]), "%s is a URL", urls[i]);
	for (i = 0; i < G_N_ELEMENTS(not_urls); i++)
		ck_assert_msg(!backend_is_url(not_urls[i]),
			      "'%s' is not a URL", not_urls[i]);
	ck_assert_msg(!backend_is_url(NULL), "NULL is not a URL");
}
END_TEST

START_TEST(test_registry_url_goes_to_its_protocol)
{
	const struct backend_ops *ops;

	ck_assert_str_eq(backend_probe("nfs://h/d/f.img"), "nfs");
	ck_assert_str_eq(backend_probe("NFS://h/d/f.img"), "nfs");
	ops = backend_for_url("nfs://h/d/f.img", NULL);
	ck_assert_msg(ops && !strcmp(ops->name, "nfs") && ops->protocol &&
		      !strcmp(ops->protocol, "nfs"),
		      "nfs:// is served by the nfs backend");
}
END_TEST

START_TEST(test_registry_unknown_scheme_is_a_clear_error)
{
	struct backend_create_args a = { .path = "iscsi://host/iqn/0",
					 .size = MiB };
	g_autoptr(GError) error = NULL;

	ck_assert_msg(backend_probe("iscsi://host/iqn/0") == NULL,
		      "no backend probes an unknown scheme (not raw)");
	ck_assert_msg(backend_for_url("iscsi://host/iqn/0", &error) == NULL,
		      "no backend for iscsi://");
	ck_assert_msg(error && error->code == EPROTONOSUPPORT,
		      "error code EPROTONOSUPPORT");
	ck_assert_msg(strstr(error->message, "unknown protocol 'iscsi'") &&
		      strstr(error->message, "known: nfs"),
		      "the message names the scheme and the known ones: %s",
		      error->message);
	g_clear_error(&error);
	ck_assert_int_eq(backend_create("raw", &a, &error), -EPROTONOSUPPORT);
	ck_assert_msg(error && strstr(error->message, "unknown protocol"),
		      "create says why");
	g_clear_error(&error);
	ck_assert_int_eq(backend_check_url("iscsi://host/iqn/0", true, &error),
			 -EPROTONOSUPPORT);
	g_clear_error(&error);
}
END_TEST

START_TEST(test_registry_probe_takes_the_highest_score)
{
	g_autofree char *dir = test_tmpdir();
	g_autofree char *raw = g_build_filename(dir, "r.img", NULL);
	g_autofree char *cow = g_build_filename(dir, "c.img", NULL);
	struct backend_create_args a = { .size = 4 * MiB };
	struct backend_file file;
	struct backend_open_args args = { .file = &file };
	g_autoptr(GError) error = NULL;
	int fd;

	a.path = raw;
	ck_assert_msg(backend_create("raw", &a, &error) == 0, "create raw: %s",
		      error ? error->message : "");
	a.path = cow;
	a.checksum = "xxhash64";
	ck_assert_msg(backend_create("cow", &a, &error) == 0, "create cow: %s",
		      error ? error->message : "");
	/* raw answers 1 for both files; cow's 100 wins on its own. */
	ck_assert_str_eq(backend_probe(raw), "raw");
	ck_assert_str_eq(backend_probe(cow), "cow");
	/* The same through an fd the caller opened (O_PATH). */
	fd = open(cow, O_PATH | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	file = (struct backend_file){ .fd = fd, .dirfd = AT_FDCWD,
				      .name = cow };
	args.path = cow;
	ck_assert_str_eq(backend_probe_args(&args), "cow");
	close(fd);
	/* A directory: nobody answers, raw is the fallback. */
	ck_assert_str_eq(backend_probe(dir), "raw");
	test_rmdir_r(dir);
}
END_TEST

START_TEST(test_registry_create_checks_format_and_size)
{
	g_autofree char *dir = test_tmpdir();
	g_autofree char *path = g_build_filename(dir, "x.img", NULL);
	struct backend_create_args a = { .path = path, .size = MiB };
	g_autoptr(GError) error = NULL;
	struct stat st;

	log_setup();
	ck_assert_int_eq(backend_create("raw", &a, &error), 0);
	ck_assert_msg(stat(path, &st) == 0 && (uint64_t)st.st_size == MiB,
		      "a raw image of 1 MiB");
	ck_assert_int_eq(backend_create("raw", &a, &error), -EEXIST);
	ck_assert_msg(error && strstr(error->message, path),
		      "an existing file is refused, naming it");
	g_clear_error(&error);
	a.checksum = "nosuch";
	unlink(path);
	ck_assert_int_eq(backend_create("cow", &a, &error), -EINVAL);
	g_clear_error(&error);
	a.checksum = NULL;
	a.path = "nfs://h/d/x.img";
	/* A format that keeps no images on stores cannot live there; cow
	 * can (made on the server, then formatted). */
	ck_assert_int_eq(backend_create("fault", &a, &error), -EOPNOTSUPP);
	ck_assert_str_eq(error->message, "nfs://h/d/x.img: fault images on "
			 "nfs:// are not supported");
	g_clear_error(&error);
	ck_assert_int_eq(backend_check_create("nosuch", "nfs://h/d/x.img",
					      &error), -EOPNOTSUPP);
	g_clear_error(&error);
	ck_assert_int_eq(backend_check_create("cow", "nfs://h/d/x.img", &error),
			 0);
	ck_assert_int_eq(backend_check_create("raw", "nfs://h/d/x.img", NULL),
			 0);
	ck_assert_int_eq(backend_check_url("nfs://h/x.img", true, &error),
			 -EINVAL);
	ck_assert_msg(error && strstr(error->message, "bad nfs URL"),
		      "the protocol checks the URL's form");
	g_clear_error(&error);
	ck_assert_int_eq(backend_lookup("cow")->create_align, 4096);
	ck_assert_int_eq(warnings, 0);
	test_rmdir_r(dir);
}
END_TEST

START_TEST(test_registry_open_error_goes_to_the_caller)
{
	g_autofree char *dir = test_tmpdir();
	g_autofree char *path = g_build_filename(dir, "missing.img", NULL);
	g_autoptr(GError) error = NULL;
	struct backend_open_args args = { .path = path, .error = &error };
	struct backend *b = NULL;
	static const char *const types[] = { "raw", "cow" };
	size_t i;

	log_setup();
	for (i = 0; i < G_N_ELEMENTS(types); i++) {
		ck_assert_int_eq(backend_open(types[i], &args, &b), -ENOENT);
		ck_assert_msg(error && strstr(error->message, path) &&
			      strstr(error->message, "open"),
			      "%s: the one line is the caller's", types[i]);
		ck_assert_int_eq(error->code, ENOENT);
		g_clear_error(&error);
	}
	args.path = "nfs://h/d/";
	ck_assert_int_eq(backend_open("nfs", &args, &b), -EINVAL);
	ck_assert_msg(error && strstr(error->message, "bad nfs URL"),
		      "nfs: the URL's fault is the caller's line");
	ck_assert_msg(warnings == 0, "nothing logged: %d warnings", warnings);
	test_rmdir_r(dir);
}
END_TEST

static Suite *registry_suite(void)
{
	Suite *s = suite_create("registry");
	TCase *tc = tcase_create("choice");

	tcase_add_test(tc, test_registry_is_url);
	tcase_add_test(tc, test_registry_url_goes_to_its_protocol);
	tcase_add_test(tc, test_registry_unknown_scheme_is_a_clear_error);
	tcase_add_test(tc, test_registry_probe_takes_the_highest_score);
	tcase_add_test(tc, test_registry_create_checks_format_and_size);
	tcase_add_test(tc, test_registry_open_error_goes_to_the_caller);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(registry_suite());
}
