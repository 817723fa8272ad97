/* SPDX-License-Identifier: MIT */
/*
 * The volume op set and the stats op through the core (backends/volume.h):
 * a cow image's volumes listed, snapshotted, cloned, looked up and deleted
 * through backend_volume_*, each refusal with its -errno and message; a
 * backend without volumes (raw) answering -EOPNOTSUPP with a message that
 * says why; the counters a backend reports through backend_stats; and the
 * registry's check that a volume op set is complete.
 */
#include "tests/cow_test.h"
#include "backends/volume.h"

#define IMG_SIZE (1 * MiB)

/* A raw image of IMG_SIZE bytes in a fresh directory (g_free it). */
static char *raw_image(void)
{
	g_autofree char *dir = test_tmpdir();
	char *path = g_build_filename(dir, "img.raw", NULL);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);

	ck_assert_msg(fd >= 0, "create %s", path);
	ck_assert_msg(ftruncate(fd, IMG_SIZE) == 0, "size %s", path);
	close(fd);
	return path;
}

/* The volumes of b, through the table. */
static GArray *list(struct backend *b)
{
	GArray *vols = g_array_new(FALSE, TRUE,
				   sizeof(struct backend_volume_info));
	g_autoptr(GError) error = NULL;
	int ret = backend_volume_list(b, vols, &error);

	ck_assert_msg(ret == 0 && !error, "list: expected 0, got %d (%s)", ret,
		      error ? error->message : "");
	return vols;
}

/* Assert ret is want and error holds msg (domain and code too). */
static void expect_error(const char *what, int ret, int want,
			 const GError *error, const char *msg)
{
	ck_assert_msg(ret == want, "%s: expected %d, got %d", what, want, ret);
	ck_assert_msg(error != NULL, "%s: a message for a person", what);
	ck_assert_msg(error->domain == BACKEND_VOLUME_ERROR &&
		      error->code == -want,
		      "%s: the volume error domain with code %d (got %d)",
		      what, -want, error->code);
	ck_assert_msg(strstr(error->message, msg),
		      "%s: message '%s' says '%s'", what, error->message, msg);
}

START_TEST(test_volume_cow_list_snapshot_clone_delete)
{
	g_autofree char *path = cow_test_image(IMG_SIZE, 0);
	struct backend *b = cow_test_open(path, 0);
	struct backend_volume_info v;
	struct backend_check_result res;
	GError *error = NULL;
	GArray *vols;
	int ret;

	ck_assert_msg(backend_has_volumes(b), "cow has the volume op set");
	vols = list(b);
	ck_assert_msg(vols->len == 1, "a new image has one volume (%u)",
		      vols->len);
	ck_assert_str_eq(g_array_index(vols, struct backend_volume_info, 0).name,
			 "");
	g_array_unref(vols);

	ck_assert_int_eq(backend_volume_snapshot(b, "s1", NULL), 0);
	ck_assert_int_eq(backend_volume_clone(b, "c1", NULL), 0);
	vols = list(b);
	ck_assert_msg(vols->len == 3, "default, s1 and c1 (%u)", vols->len);
	g_array_unref(vols);
	ck_assert_int_eq(backend_volume_lookup(b, "s1", &v, NULL), 0);
	ck_assert_msg(v.snapshot, "s1 is a read-only snapshot");
	ck_assert_int_eq(backend_volume_lookup(b, "c1", &v, NULL), 0);
	ck_assert_msg(!v.snapshot, "c1 is a writable clone");

	ret = backend_volume_snapshot(b, "s1", &error);
	expect_error("snapshot s1 again", ret, -EEXIST, error,
		     "a volume named 's1' exists");
	g_clear_error(&error);
	ret = backend_volume_delete(b, "", &error);
	expect_error("delete the default volume", ret, -EBUSY, error,
		     "is in use or is the image itself");
	g_clear_error(&error);

	ck_assert_int_eq(backend_volume_delete(b, "c1", NULL), 0);
	ret = backend_volume_lookup(b, "c1", &v, &error);
	expect_error("look c1 up after its deletion", ret, -ENOENT, error,
		     "no volume named 'c1'");
	g_clear_error(&error);
	ret = backend_volume_delete(b, "c1", &error);
	expect_error("delete c1 twice", ret, -ENOENT, error,
		     "no volume named 'c1'");
	g_clear_error(&error);
	ck_assert_int_eq(backend_volume_set_commit_interval(b, 0, NULL), 0);
	backend_close(b);

	ret = backend_volume_check(backend_lookup("cow"), path, 0, &res, NULL,
				   NULL, &error);
	ck_assert_msg(ret == 0 && !error, "check ran: %d", ret);
	ck_assert_msg(res.errors == 0 && res.volumes == 2,
		      "clean, two volumes (%llu errors, %llu volumes)",
		      (unsigned long long)res.errors,
		      (unsigned long long)res.volumes);
}
END_TEST

START_TEST(test_volume_check_failure_says_why)
{
	g_autofree char *path = raw_image();
	struct backend_check_result res;
	g_autoptr(GError) error = NULL;
	int ret;

	/* A file that is no cow image, checked as one. */
	ret = backend_volume_check(backend_lookup("cow"), path, 0, &res, NULL,
				   NULL, &error);
	ck_assert_msg(ret < 0, "checking a non-cow file fails (%d)", ret);
	ck_assert_msg(error && error->message[0] &&
		      strcmp(error->message, g_strerror(-ret)),
		      "the message is the checker's reason, not only '%s' "
		      "(got '%s')", g_strerror(-ret),
		      error ? error->message : "");
}
END_TEST

START_TEST(test_volume_raw_answers_eopnotsupp)
{
	g_autofree char *path = raw_image();
	struct backend_open_args args = { .path = path };
	struct backend_scrub_progress sp;
	struct backend_check_result res;
	GError *error = NULL;
	struct backend *b = NULL;
	GArray *vols = g_array_new(FALSE, TRUE,
				   sizeof(struct backend_volume_info));
	int ret;

	ck_assert_int_eq(backend_open("raw", &args, &b), 0);
	ck_assert_msg(!backend_has_volumes(b), "raw has one volume only");
	ret = backend_volume_list(b, vols, &error);
	expect_error("list", ret, -EOPNOTSUPP, error,
		     "a raw image has one volume only");
	ck_assert_msg(strstr(error->message, path), "the message names %s",
		      path);
	g_clear_error(&error);
	ret = backend_volume_snapshot(b, "s1", &error);
	expect_error("snapshot", ret, -EOPNOTSUPP, error, "one volume only");
	g_clear_error(&error);
	ret = backend_volume_clone(b, "c1", &error);
	expect_error("clone", ret, -EOPNOTSUPP, error, "one volume only");
	g_clear_error(&error);
	ret = backend_volume_delete(b, "s1", &error);
	expect_error("delete", ret, -EOPNOTSUPP, error, "one volume only");
	g_clear_error(&error);
	ret = backend_volume_scrub(b, NULL, NULL, NULL, &sp, &error);
	expect_error("scrub", ret, -EOPNOTSUPP, error, "one volume only");
	g_clear_error(&error);
	ret = backend_volume_lookup(b, "s1", NULL, &error);
	expect_error("lookup", ret, -EOPNOTSUPP, error, "one volume only");
	g_clear_error(&error);
	ret = backend_volume_set_commit_interval(b, 0, &error);
	expect_error("commit interval", ret, -EOPNOTSUPP, error,
		     "one volume only");
	g_clear_error(&error);
	ret = backend_volume_check(b->ops, path, 0, &res, NULL, NULL, &error);
	expect_error("check", ret, -EOPNOTSUPP, error,
		     "a raw image has no metadata to check");
	g_clear_error(&error);
	ck_assert_msg(vols->len == 0, "nothing listed");
	g_array_unref(vols);
	backend_close(b);
}
END_TEST

/* Counters as emitted: key=value lines. */
static void collect(void *opaque, const char *key, uint64_t value)
{
	g_string_append_printf(opaque, "%s=%llu\n", key,
			       (unsigned long long)value);
}

START_TEST(test_volume_stats_report_checksum_errors)
{
	g_autofree char *path = cow_test_image(IMG_SIZE, 0);
	g_autofree char *rpath = raw_image();
	struct backend_open_args args = { .path = rpath };
	g_autoptr(GString) out = g_string_new(NULL);
	uint8_t blk[4096];
	uint64_t pbn, csum;
	struct backend *b;

	memset(blk, 0x5a, sizeof(blk));
	b = cow_test_open(path, 0);
	cow_test_write(b, blk, sizeof(blk), 0, NULL);
	ck_assert_int_eq(backend_flush(b), 0);
	ck_assert_msg(cow_map_block(b, 0, &pbn, &csum) == 0 && pbn,
		      "block 0 is mapped");
	ck_assert_int_eq(backend_stats(b, collect, out), 0);
	ck_assert_msg(strstr(out->str, "checksum_errors=0\n"),
		      "no checksum error yet: %s", out->str);
	backend_close(b);

	cow_test_file_xor(path, pbn * 4096 + 100, 0x01);
	b = cow_test_open(path, BACKEND_OPEN_RDONLY);
	ck_assert_msg(cow_test_read(b, blk, sizeof(blk), 0, NULL) == -EIO,
		      "the damaged block reads as EIO");
	g_string_truncate(out, 0);
	ck_assert_int_eq(backend_stats(b, collect, out), 0);
	ck_assert_msg(strstr(out->str, "checksum_errors=1\n"),
		      "one checksum error reported: %s", out->str);
	backend_close(b);

	ck_assert_int_eq(backend_open("raw", &args, &b), 0);
	g_string_truncate(out, 0);
	ck_assert_int_eq(backend_stats(b, collect, out), 0);
	ck_assert_msg(out->len == 0, "raw counts nothing of its own: %s",
		      out->str);
	backend_close(b);
}
END_TEST

/* A volume op that should never be called. */
/* describe: a cow image tells its format, checksum, uuid, store size
 * and blocks; raw tells nothing more than backend_info. */
START_TEST(test_volume_describe_cow_and_raw)
{
	g_autofree char *path = cow_test_image(IMG_SIZE, 0);
	g_autofree char *raw_path = raw_image();
	struct backend *b = cow_test_open(path, 0);
	struct backend_details d;
	struct backend *r;
	struct stat st;
	static const uint8_t zero[16];

	ck_assert_int_eq(backend_describe(b, &d), 0);
	ck_assert_uint_eq(d.format_version, 1);
	ck_assert_str_eq(d.checksum, "crc32c");
	ck_assert_msg(d.has_uuid && memcmp(d.uuid, zero, 16) != 0,
		      "a cow image has a uuid");
	ck_assert_uint_eq(d.block_size, 4096);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(d.container_size, (uint64_t)st.st_size);
	ck_assert_uint_eq(d.blocks, (uint64_t)st.st_size / 4096);
	ck_assert_msg(d.used_blocks > 0 && d.used_blocks <= d.blocks,
		      "used blocks %llu of %llu", (unsigned long long)d.used_blocks,
		      (unsigned long long)d.blocks);
	backend_close(b);

	ck_assert_int_eq(backend_open("raw", &(struct backend_open_args){
					      .path = raw_path }, &r), 0);
	ck_assert_int_eq(backend_describe(r, &d), -EOPNOTSUPP);
	backend_close(r);
}
END_TEST

static int never_list(struct backend *b, GArray *out, GError **error)
{
	(void)b;
	(void)out;
	(void)error;
	ck_abort_msg("an incomplete table was used");
	return -EIO;
}

START_TEST(test_volume_incomplete_op_set_is_refused)
{
	const struct backend_ops *raw = backend_lookup("raw");
	struct backend_volume_ops vops = { .list = never_list };
	struct backend_ops ops = *raw;

	ops.volumes = &vops;
	ck_assert_msg(backend_ops_check(&ops) == -EINVAL,
		      "a volume op set without snapshot, delete, scrub, check "
		      "and commit interval is refused");
	ck_assert_msg(backend_ops_check(backend_lookup("cow")) == 0,
		      "cow's table passes");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume");
	TCase *ops = tcase_create("ops");
	TCase *stats = tcase_create("stats");

	tcase_set_timeout(ops, 60);
	tcase_add_test(ops, test_volume_cow_list_snapshot_clone_delete);
	tcase_add_test(ops, test_volume_check_failure_says_why);
	tcase_add_test(ops, test_volume_raw_answers_eopnotsupp);
	tcase_add_test(ops, test_volume_describe_cow_and_raw);
	tcase_add_test(ops, test_volume_incomplete_op_set_is_refused);
	suite_add_tcase(s, ops);
	tcase_add_test(stats, test_volume_stats_report_checksum_errors);
	suite_add_tcase(s, stats);
	return test_run_suite(s);
}
