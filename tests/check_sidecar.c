/* SPDX-License-Identifier: MIT */
/*
 * Sidecars (backends/sidecar.c) in a directory an attacker may write:
 * creation never writes through what was planted under the name (a
 * symlink to a file outside, a hard link to another file) and always
 * leaves mode 0600 whatever the umask; only a regular file with one link,
 * the daemon's uid and mode 0600 is believed (a symlink, a FIFO, a
 * directory, mode 0644, two links, another owner are refused, and a FIFO
 * does not hang the reader); a replacement leaves no temporary behind,
 * whether it worked or not.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/sidecar.h"
#include "tests/testutil.h"

#define NAME ".disk0.img.dioloop-orphan"
#define OUTSIDE_TEXT "root's secret, not to be written\n"

/* A sidecar directory, and a file outside it the attacker aims at. */
struct scene {
	char *dir, *outside_dir, *outside;
	int dirfd;
};

static void scene_init(struct scene *s)
{
	s->dir = test_tmpdir();
	s->outside_dir = test_tmpdir();
	s->outside = g_build_filename(s->outside_dir, "victim", NULL);
	ck_assert(g_file_set_contents(s->outside, OUTSIDE_TEXT, -1, NULL));
	ck_assert_int_eq(chmod(s->outside, 0600), 0);
	s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(s->dirfd, 0);
}

static void scene_destroy(struct scene *s)
{
	close(s->dirfd);
	test_rmdir_r(s->dir);
	test_rmdir_r(s->outside_dir);
	g_free(s->dir);
	g_free(s->outside_dir);
	g_free(s->outside);
}

/* The victim outside still holds exactly what it held. */
static void assert_outside_untouched(const struct scene *s)
{
	g_autofree char *text = NULL;
	struct stat st;

	ck_assert(g_file_get_contents(s->outside, &text, NULL, NULL));
	ck_assert_msg(!strcmp(text, OUTSIDE_TEXT),
		      "the file outside was written: \"%s\"", text);
	ck_assert_int_eq(stat(s->outside, &st), 0);
	ck_assert_msg((st.st_mode & 07777) == 0600,
		      "the file outside keeps mode 0600, has %o",
		      st.st_mode & 07777);
}

/* Create NAME through sidecar_create and write text into it. */
static void create_and_write(const struct scene *s, const char *text)
{
	int fd = sidecar_create(s->dirfd, NAME);

	ck_assert_msg(fd >= 0, "sidecar_create: %s", g_strerror(-fd));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* NAME in the directory is a regular 0600 file of ours holding text. */
static void assert_sidecar_holds(const struct scene *s, const char *text)
{
	g_autofree char *path = g_build_filename(s->dir, NAME, NULL);
	g_autofree char *got = NULL;
	struct stat st;

	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_msg(S_ISREG(st.st_mode), "the sidecar is a regular file");
	ck_assert_msg(st.st_nlink == 1, "the sidecar has one link, has %lu",
		      (unsigned long)st.st_nlink);
	ck_assert_msg((st.st_mode & 07777) == 0600,
		      "the sidecar has mode 0600, has %o", st.st_mode & 07777);
	ck_assert(g_file_get_contents(path, &got, NULL, NULL));
	ck_assert_str_eq(got, text);
}

START_TEST(test_sidecar_create_removes_planted_symlink)
{
	g_autofree char *link = NULL;
	struct scene s;

	scene_init(&s);
	link = g_build_filename(s.dir, NAME, NULL);
	ck_assert_int_eq(symlink(s.outside, link), 0);
	create_and_write(&s, "ours\n");
	assert_sidecar_holds(&s, "ours\n");
	assert_outside_untouched(&s);
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_create_never_creates_a_dangling_target)
{
	g_autofree char *link = NULL, *target = NULL;
	struct scene s;

	scene_init(&s);
	link = g_build_filename(s.dir, NAME, NULL);
	target = g_build_filename(s.outside_dir, "created-through-a-link",
				  NULL);
	ck_assert_int_eq(symlink(target, link), 0);
	create_and_write(&s, "ours\n");
	assert_sidecar_holds(&s, "ours\n");
	ck_assert_msg(access(target, F_OK) < 0 && errno == ENOENT,
		      "nothing was created where the link pointed");
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_create_replaces_planted_file)
{
	g_autofree char *path = NULL;
	struct scene s;

	scene_init(&s);
	/* A planted regular file, 0644 and long. */
	path = g_build_filename(s.dir, NAME, NULL);
	ck_assert(g_file_set_contents(path, "planted, planted, planted\n", -1,
				      NULL));
	ck_assert_int_eq(chmod(path, 0644), 0);
	create_and_write(&s, "ours\n");
	assert_sidecar_holds(&s, "ours\n");

	/* A hard link to the victim (both directories are in one
	 * filesystem): the victim keeps its bytes. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(link(s.outside, path), 0);
	create_and_write(&s, "ours again\n");
	assert_sidecar_holds(&s, "ours again\n");
	assert_outside_untouched(&s);
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_create_mode_0600_under_any_umask)
{
	static const mode_t masks[] = { 077, 000, 0277, 0777 };
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(masks); i++) {
		g_autofree char *path = NULL;
		struct scene s;
		struct stat st;
		mode_t old;
		int fd;

		scene_init(&s);
		path = g_build_filename(s.dir, NAME, NULL);
		old = umask(masks[i]);
		fd = sidecar_create(s.dirfd, NAME);
		umask(old);
		ck_assert_msg(fd >= 0, "umask %03o: sidecar_create: %s",
			      masks[i], g_strerror(-fd));
		ck_assert_int_eq(fstat(fd, &st), 0);
		close(fd);
		ck_assert_msg((st.st_mode & 07777) == 0600,
			      "umask %03o: mode 0600, got %03o", masks[i],
			      st.st_mode & 07777);
		scene_destroy(&s);
	}
}
END_TEST

/* sidecar_open_trusted on NAME: the result, with *error. */
static int open_trusted(const struct scene *s, GError **error)
{
	int fd = sidecar_open_trusted(s->dirfd, NAME, error);

	if (fd >= 0)
		close(fd);
	return fd < 0 ? fd : 0;
}

/* A file of ours at NAME (0600, one link): the positive case. */
static char *plant_ours(const struct scene *s)
{
	char *path = g_build_filename(s->dir, NAME, NULL);

	ck_assert(g_file_set_contents(path, "x", -1, NULL));
	ck_assert_int_eq(chmod(path, 0600), 0);
	return path;
}

static void assert_refused(const struct scene *s, const char *what)
{
	g_autoptr(GError) error = NULL;
	int ret = open_trusted(s, &error);

	ck_assert_msg(ret == -EPERM, "%s: -EPERM, got %d", what, ret);
	ck_assert_msg(error != NULL && error->message[0] &&
		      error->code == EPERM,
		      "%s: a reason is given, with code EPERM", what);
}

START_TEST(test_sidecar_open_trusted_accepts_ours)
{
	g_autofree char *path = NULL;
	g_autoptr(GError) error = NULL;
	struct scene s;

	scene_init(&s);
	ck_assert_int_eq(open_trusted(&s, &error), -ENOENT);
	ck_assert_msg(error && error->code == ENOENT,
		      "a missing sidecar says ENOENT");
	g_clear_error(&error);
	path = plant_ours(&s);
	ck_assert_int_eq(open_trusted(&s, &error), 0);
	ck_assert_msg(error == NULL, "no error for a sidecar of ours");
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_open_trusted_rejects_symlink)
{
	g_autofree char *path = NULL;
	struct scene s;

	scene_init(&s);
	/* To a file that would pass every check itself. */
	path = g_build_filename(s.dir, NAME, NULL);
	ck_assert_int_eq(symlink(s.outside, path), 0);
	assert_refused(&s, "a symlink to a 0600 file of ours");
	scene_destroy(&s);
}
END_TEST

static void on_alarm(int sig)
{
	static const char msg[] = "sidecar_open_trusted hangs on a FIFO\n";

	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(3);
}

START_TEST(test_sidecar_open_trusted_rejects_fifo)
{
	g_autofree char *path = NULL;
	struct scene s;

	scene_init(&s);
	path = g_build_filename(s.dir, NAME, NULL);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	/* A blocking open of a FIFO with no writer never returns. */
	signal(SIGALRM, on_alarm);
	alarm(3);
	assert_refused(&s, "a FIFO");
	alarm(0);
	signal(SIGALRM, SIG_DFL);
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_open_trusted_rejects_directory)
{
	g_autofree char *path = NULL;
	struct scene s;

	scene_init(&s);
	path = g_build_filename(s.dir, NAME, NULL);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);
	assert_refused(&s, "a directory, mode 0600");
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_open_trusted_rejects_mode_0644)
{
	g_autofree char *path = NULL;
	struct scene s;

	scene_init(&s);
	path = plant_ours(&s);
	ck_assert_int_eq(chmod(path, 0644), 0);
	assert_refused(&s, "mode 0644");
	ck_assert_int_eq(chmod(path, 0400), 0);
	assert_refused(&s, "mode 0400");
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_open_trusted_rejects_two_links)
{
	g_autofree char *path = NULL, *other = NULL;
	struct scene s;

	scene_init(&s);
	path = plant_ours(&s);
	other = g_build_filename(s.dir, "other-name", NULL);
	ck_assert_int_eq(link(path, other), 0);
	assert_refused(&s, "a file with 2 hard links");
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_open_trusted_rejects_other_owner)
{
	g_autofree char *path = NULL;
	struct scene s;

	if (geteuid() != 0) {
		printf("test_sidecar_open_trusted_rejects_other_owner: skipped, "
		       "chown to uid 65534 needs root\n");
		return;
	}
	scene_init(&s);
	path = plant_ours(&s);
	ck_assert_int_eq(chown(path, 65534, 65534), 0);
	ck_assert_int_eq(chmod(path, 0600), 0);
	assert_refused(&s, "a 0600 file owned by uid 65534");
	scene_destroy(&s);
}
END_TEST

/* Names in the directory, sorted, joined by spaces. */
static char *dir_listing(const struct scene *s)
{
	g_autoptr(GDir) d = g_dir_open(s->dir, 0, NULL);
	g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
	const char *n;

	ck_assert_ptr_nonnull(d);
	while ((n = g_dir_read_name(d)))
		g_ptr_array_add(names, g_strdup(n));
	g_ptr_array_sort(names, (GCompareFunc)g_strcmp0);
	g_ptr_array_add(names, NULL);
	return g_strjoinv(" ", (char **)names->pdata);
}

START_TEST(test_sidecar_replace_leaves_no_tmp)
{
	g_autofree char *tmp = NULL, *list = NULL;
	struct scene s;

	scene_init(&s);
	/* A symlink planted as the temporary is removed, not followed. */
	tmp = g_build_filename(s.dir, NAME ".tmp", NULL);
	ck_assert_int_eq(symlink(s.outside, tmp), 0);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "first\n", 6, NULL), 0);
	assert_sidecar_holds(&s, "first\n");
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "second\n", 7, NULL), 0);
	assert_sidecar_holds(&s, "second\n");
	list = dir_listing(&s);
	ck_assert_str_eq(list, NAME);
	assert_outside_untouched(&s);
	scene_destroy(&s);
}
END_TEST

START_TEST(test_sidecar_replace_leaves_no_tmp_on_write_failure)
{
	g_autofree char *list = NULL;
	char big[4096];
	struct rlimit old, small = { 16, 16 };
	struct scene s;
	int ret;

	scene_init(&s);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "first\n", 6, NULL), 0);
	/* Writes past 16 bytes fail (EFBIG, or a short write). */
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
	small.rlim_max = old.rlim_max;
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
	ret = sidecar_replace(s.dirfd, NAME, big, sizeof(big), NULL);
	setrlimit(RLIMIT_FSIZE, &old);
	signal(SIGXFSZ, SIG_DFL);
	ck_assert_msg(ret < 0, "a replacement that cannot be written fails, "
		      "got %d", ret);
	list = dir_listing(&s);
	ck_assert_str_eq(list, NAME);
	assert_sidecar_holds(&s, "first\n");
	scene_destroy(&s);
}
END_TEST

/* A hard link kept aside to a sidecar of ours holds nothing once the
 * sidecar is replaced or removed: it cannot be put back as an old one. */
START_TEST(test_sidecar_replace_and_remove_void_ours)
{
	g_autofree char *path = NULL, *kept = NULL, *text = NULL;
	struct sidecar_id ours = { 0 };
	struct scene s;
	gsize len = 1;

	scene_init(&s);
	path = g_build_filename(s.dir, NAME, NULL);
	kept = g_build_filename(s.outside_dir, "kept", NULL);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "first\n", 6, &ours), 0);
	ck_assert_msg(ours.ino != 0, "replace names the new sidecar");
	ck_assert_int_eq(link(path, kept), 0);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "second\n", 7, &ours), 0);
	assert_sidecar_holds(&s, "second\n");
	ck_assert(g_file_get_contents(kept, &text, &len, NULL));
	ck_assert_msg(len == 0, "the replaced sidecar, kept by a link, is "
		      "empty; holds \"%s\"", text);
	g_clear_pointer(&text, g_free);
	ck_assert_int_eq(unlink(kept), 0);
	ck_assert_int_eq(link(path, kept), 0);
	ck_assert_int_eq(sidecar_remove(s.dirfd, NAME, &ours), 0);
	ck_assert(g_file_get_contents(kept, &text, &len, NULL));
	ck_assert_msg(len == 0, "the removed sidecar, kept by a link, is "
		      "empty; holds \"%s\"", text);
	scene_destroy(&s);
}
END_TEST

/* A file that is not the sidecar we know (a hard link to a file of ours
 * elsewhere) loses only its name, never its content. */
START_TEST(test_sidecar_remove_leaves_others_alone)
{
	g_autofree char *path = NULL;
	struct sidecar_id ours = { 0 };
	struct scene s;

	scene_init(&s);
	path = g_build_filename(s.dir, NAME, NULL);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "first\n", 6, &ours), 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(link(s.outside, path), 0);
	ck_assert_int_eq(sidecar_remove(s.dirfd, NAME, &ours), 0);
	assert_outside_untouched(&s);
	ck_assert_int_eq(link(s.outside, path), 0);
	ck_assert_int_eq(sidecar_replace(s.dirfd, NAME, "second\n", 7, &ours), 0);
	assert_outside_untouched(&s);
	scene_destroy(&s);
}
END_TEST

static Suite *sidecar_suite(void)
{
	Suite *s = suite_create("sidecar");
	TCase *tc;

	tc = tcase_create("create");
	tcase_add_test(tc, test_sidecar_create_removes_planted_symlink);
	tcase_add_test(tc, test_sidecar_create_never_creates_a_dangling_target);
	tcase_add_test(tc, test_sidecar_create_replaces_planted_file);
	tcase_add_test(tc, test_sidecar_create_mode_0600_under_any_umask);
	suite_add_tcase(s, tc);

	tc = tcase_create("open_trusted");
	tcase_add_test(tc, test_sidecar_open_trusted_accepts_ours);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_symlink);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_fifo);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_directory);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_mode_0644);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_two_links);
	tcase_add_test(tc, test_sidecar_open_trusted_rejects_other_owner);
	suite_add_tcase(s, tc);

	tc = tcase_create("replace");
	tcase_add_test(tc, test_sidecar_replace_leaves_no_tmp);
	tcase_add_test(tc, test_sidecar_replace_leaves_no_tmp_on_write_failure);
	tcase_add_test(tc, test_sidecar_replace_and_remove_void_ours);
	tcase_add_test(tc, test_sidecar_remove_leaves_others_alone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(sidecar_suite());
}
