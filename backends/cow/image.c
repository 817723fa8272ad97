/* SPDX-License-Identifier: MIT */
/*
 * Opening and closing a cow container, and the read epochs (cow_int.h).
 * Its volumes are opened and closed in volume.c.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

void (*cow_test_hook)(enum cow_test_point point);

void cow_test_point(enum cow_test_point point)
{
	if (cow_test_hook)
		cow_test_hook(point);
}

void cow_meta_error(struct cow_container *c, const struct cow_err *err)
{
	atomic_fetch_add(&c->meta_errors, 1);
	g_warning("%s: %s", c->meta.path, err->msg);
}

/* ---- read epochs ---- */

struct cow_epoch *cow_epoch_enter(struct cow_container *c)
{
	struct cow_epoch *e;

	g_mutex_lock(&c->epoch_lock);
	e = g_queue_peek_tail(&c->epochs);
	if (!e || e->epoch != c->epoch) {
		e = g_new0(struct cow_epoch, 1);
		e->epoch = c->epoch;
		g_queue_push_tail(&c->epochs, e);
	}
	e->count++;
	g_mutex_unlock(&c->epoch_lock);
	return e;
}

void cow_epoch_leave(struct cow_container *c, struct cow_epoch *e)
{
	g_mutex_lock(&c->epoch_lock);
	e->count--;
	while ((e = g_queue_peek_head(&c->epochs)) && e->count == 0)
		g_free(g_queue_pop_head(&c->epochs));
	g_mutex_unlock(&c->epoch_lock);
}

uint64_t cow_epoch_oldest(struct cow_container *c)
{
	struct cow_epoch *e;
	uint64_t oldest;

	g_mutex_lock(&c->epoch_lock);
	e = g_queue_peek_head(&c->epochs);
	oldest = e ? e->epoch : c->epoch;
	g_mutex_unlock(&c->epoch_lock);
	return oldest;
}

/* ---- open ---- */

/* Refuse hosts whose direct I/O needs more than 4 KiB alignment. */
static int check_dio_alignment(struct cow_container *c)
{
	struct statx stx;

	if (statx(c->meta.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) &&
	    (stx.stx_dio_offset_align > COW_BLOCK_SIZE ||
	     stx.stx_dio_mem_align > COW_BLOCK_SIZE)) {
		g_warning("%s: the host needs %u-byte aligned direct I/O; cow images need at most %zu",
			  c->meta.path, stx.stx_dio_offset_align,
			  COW_BLOCK_SIZE);
		return -EINVAL;
	}
	return 0;
}

/* Read the superblock and check it against the file: 0 or -errno with
 * the line in *error (NULL: logged). */
static int open_superblock(struct cow_container *c, GError **error)
{
	struct cow_err err = { "" }, fallback;
	const char *path = c->meta.path;
	uint32_t slot;
	struct stat st;
	int ret;

	ret = cow_sb_read(c->meta.fd, &c->sb, &slot, &fallback, &err);
	if (ret < 0)
		return backend_set_error(error, ret, "%s: %s", path, err.msg);
	if (fallback.msg[0])
		g_warning("%s: %s", path, fallback.msg);
	ret = cow_sb_check_features(&c->sb, c->rdonly, &err);
	if (ret < 0)
		return backend_set_error(error, ret, "%s: %s", path, err.msg);
	if (fstat(c->meta.fd, &st) < 0)
		return -errno;
	c->file_blocks = (uint64_t)st.st_size >> COW_BLOCK_SHIFT;
	if (c->file_blocks < c->sb.nr_blocks)
		return backend_set_error(error, -EUCLEAN,
					 "%s: truncated image: generation %llu uses %llu blocks (%llu bytes), the file has %lld bytes",
					 path, (unsigned long long)c->sb.generation,
					 (unsigned long long)c->sb.nr_blocks,
					 (unsigned long long)c->sb.nr_blocks << COW_BLOCK_SHIFT,
					 (long long)st.st_size);
	memcpy(c->meta.uuid, c->sb.uuid, 16);
	c->meta.csum_type = c->sb.csum_type;
	c->meta.first_block = c->sb.first_block;
	atomic_init(&c->meta.nr_blocks, c->sb.nr_blocks);
	return 0;
}

/* Load the volume tree (its root; leaves are read as volumes are looked
 * up): 0 or -errno with the line in *error (NULL: logged). */
static int open_voltree(struct cow_container *c, GError **error)
{
	struct cow_err err = { "" };
	int ret;

	c->next_volume_id = c->sb.next_volume_id;
	cow_tree_init(&c->voltree, COW_TREE_VOLUME, &c->meta, 0,
		      c->sb.next_volume_id);
	ret = cow_tree_open(&c->voltree, &c->sb.volume_root, &err);
	if (ret < 0)
		backend_set_error(error, ret, "%s: %s", c->meta.path, err.msg);
	return ret;
}

int cow_container_open(struct cow_container *c,
		       const struct backend_open_args *args, bool rdonly)
{
	const char *path = args->path;
	struct cow_err err = { "" };
	int flags = O_DIRECT | O_CLOEXEC, ret;
	struct stat st;

	c->rdonly = rdonly;
	c->path = g_strdup(path);
	c->meta.path = c->path;
	c->meta.fd = -1;
	g_mutex_init(&c->commit_lock);
	g_mutex_init(&c->map_lock);
	g_mutex_init(&c->epoch_lock);
	g_mutex_init(&c->inflight_lock);
	g_mutex_init(&c->committer_lock);
	g_cond_init(&c->committer_cond);
	g_queue_init(&c->epochs);
	c->vols = g_ptr_array_new();
	c->refops = g_array_new(FALSE, FALSE, sizeof(struct cow_refop));
	c->drops = g_array_new(FALSE, FALSE, sizeof(struct cow_drop));
	c->inflight = g_hash_table_new_full(g_int64_hash, g_int64_equal,
					    NULL, g_free);
	c->commit_ms = COW_DEFAULT_COMMIT_MS;

	flags |= c->rdonly ? O_RDONLY : O_RDWR;
	c->meta.fd = backend_open_image(args, flags);
	if (c->meta.fd < 0)
		return backend_set_error(args->error, c->meta.fd, "%s: open%s: %s",
					 path, c->meta.fd == -EINVAL ?
					 " (O_DIRECT unsupported here?)" : "",
					 g_strerror(-c->meta.fd));
	if (fstat(c->meta.fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return backend_set_error(args->error, -EINVAL,
					 "%s: not a regular file", path);
	c->dev = st.st_dev;
	c->ino = st.st_ino;
	/* One writer per container: two would allocate the same blocks. */
	if (!c->rdonly && flock(c->meta.fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		return backend_set_error(args->error, ret, "%s: %s", path,
					 ret == -EBUSY ? "the image is open for writing elsewhere" :
					 g_strerror(-ret));
	}
	ret = check_dio_alignment(c);
	if (ret < 0)
		return ret;
	ret = open_superblock(c, args->error);
	if (ret < 0)
		return ret;
	ret = cow_alloc_open(&c->alloc, &c->meta, &c->sb.refcount_root,
			     &err);
	if (ret < 0)
		return backend_set_error(args->error, ret, "%s: %s",
					 c->meta.path, err.msg);
	ret = open_voltree(c, args->error);
	if (ret < 0)
		return ret;
	atomic_init(&c->committed_gen, c->sb.generation);
	c->epoch = c->sb.generation + 1;
	return 0;
}

void cow_container_make_rdonly(struct cow_container *c)
{
	if (c->rdonly)
		return;
	flock(c->meta.fd, LOCK_UN);
	c->rdonly = true;
}

int cow_container_start(struct cow_container *c)
{
	int ret;

	if (!c->rdonly) {
		ret = cow_commit_open(c);
		if (ret < 0)
			return ret;
		ret = cow_committer_start(c);
		if (ret < 0)
			return ret;
	}
	c->opened = true;
	return 0;
}

void cow_container_close(struct cow_container *c)
{
	cow_committer_stop(c);
	if (c->opened && !c->rdonly && !atomic_load(&c->failed))
		cow_commit(c);
	cow_tree_destroy(&c->voltree);
	if (c->alloc.meta)
		cow_alloc_close(&c->alloc);
	if (c->meta.fd >= 0)
		close(c->meta.fd);
	g_ptr_array_free(c->vols, TRUE);
	g_array_free(c->refops, TRUE);
	cow_drops_free(c->drops);
	g_hash_table_destroy(c->inflight);
	g_queue_clear_full(&c->epochs, g_free);
	g_mutex_clear(&c->commit_lock);
	g_mutex_clear(&c->map_lock);
	g_mutex_clear(&c->epoch_lock);
	g_mutex_clear(&c->inflight_lock);
	g_mutex_clear(&c->committer_lock);
	g_cond_clear(&c->committer_cond);
	g_free(c->path);
	g_free(c);
}
