/* SPDX-License-Identifier: MIT */
/*
 * Opening and closing a cow container and its default volume, and the
 * read epochs (cow_int.h).
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/aio.h"

#define COW_AIO_DEPTH 256

void (*cow_test_hook)(enum cow_test_point point);

void cow_test_point(enum cow_test_point point)
{
	if (cow_test_hook)
		cow_test_hook(point);
}

void cow_meta_error(struct cow_image *img, const struct cow_err *err)
{
	atomic_fetch_add(&img->meta_errors, 1);
	g_warning("%s: %s", img->meta.path, err->msg);
}

/* ---- read epochs ---- */

struct cow_epoch *cow_epoch_enter(struct cow_image *img)
{
	struct cow_epoch *e;

	g_mutex_lock(&img->epoch_lock);
	e = g_queue_peek_tail(&img->epochs);
	if (!e || e->epoch != img->epoch) {
		e = g_new0(struct cow_epoch, 1);
		e->epoch = img->epoch;
		g_queue_push_tail(&img->epochs, e);
	}
	e->count++;
	g_mutex_unlock(&img->epoch_lock);
	return e;
}

void cow_epoch_leave(struct cow_image *img, struct cow_epoch *e)
{
	g_mutex_lock(&img->epoch_lock);
	e->count--;
	while ((e = g_queue_peek_head(&img->epochs)) && e->count == 0)
		g_free(g_queue_pop_head(&img->epochs));
	g_mutex_unlock(&img->epoch_lock);
}

uint64_t cow_epoch_oldest(struct cow_image *img)
{
	struct cow_epoch *e;
	uint64_t oldest;

	g_mutex_lock(&img->epoch_lock);
	e = g_queue_peek_head(&img->epochs);
	oldest = e ? e->epoch : img->epoch;
	g_mutex_unlock(&img->epoch_lock);
	return oldest;
}

/* ---- open ---- */

/* Refuse hosts whose direct I/O needs more than 4 KiB alignment. */
static int check_dio_alignment(struct cow_image *img)
{
	struct statx stx;

	if (statx(img->meta.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) &&
	    (stx.stx_dio_offset_align > COW_BLOCK_SIZE ||
	     stx.stx_dio_mem_align > COW_BLOCK_SIZE)) {
		g_warning("%s: the host needs %u-byte aligned direct I/O; cow images need at most %zu",
			  img->meta.path, stx.stx_dio_offset_align,
			  COW_BLOCK_SIZE);
		return -EINVAL;
	}
	return 0;
}

/* Read the superblock and check it against the file. */
static int open_superblock(struct cow_image *img)
{
	struct cow_err err = { "" }, fallback;
	const char *path = img->meta.path;
	uint32_t slot;
	struct stat st;
	int ret;

	ret = cow_sb_read(img->meta.fd, &img->sb, &slot, &fallback, &err);
	if (ret < 0) {
		g_warning("%s: %s", path, err.msg);
		return ret;
	}
	if (fallback.msg[0])
		g_warning("%s: %s", path, fallback.msg);
	ret = cow_sb_check_features(&img->sb, img->rdonly, &err);
	if (ret < 0) {
		g_warning("%s: %s", path, err.msg);
		return ret;
	}
	if (fstat(img->meta.fd, &st) < 0)
		return -errno;
	img->file_blocks = (uint64_t)st.st_size >> COW_BLOCK_SHIFT;
	if (img->file_blocks < img->sb.nr_blocks) {
		g_warning("%s: truncated image: generation %llu uses %llu blocks (%llu bytes), the file has %lld bytes",
			  path, (unsigned long long)img->sb.generation,
			  (unsigned long long)img->sb.nr_blocks,
			  (unsigned long long)img->sb.nr_blocks << COW_BLOCK_SHIFT,
			  (long long)st.st_size);
		return -EUCLEAN;
	}
	memcpy(img->meta.uuid, img->sb.uuid, 16);
	img->meta.csum_type = img->sb.csum_type;
	img->meta.first_block = img->sb.first_block;
	atomic_init(&img->meta.nr_blocks, img->sb.nr_blocks);
	return 0;
}

/* Load the volume tree and the default volume's entry and map root. */
static int open_volume(struct cow_image *img)
{
	struct cow_err err = { "" };
	struct cow_node *leaf;
	int ret;

	cow_tree_init(&img->voltree, COW_TREE_VOLUME, &img->meta, 0,
		      img->sb.next_volume_id);
	ret = cow_tree_open(&img->voltree, &img->sb.volume_root, &err);
	if (ret < 0)
		goto out_err;
	g_mutex_lock(&img->map_lock);
	ret = cow_tree_find_locked(&img->voltree, &img->map_lock,
				   img->sb.default_volume, false, &leaf, &err);
	if (!ret && leaf)
		ret = cow_vol_get(leaf->page,
				  cow_leaf_index(leaf, img->sb.default_volume),
				  &img->vol, &err);
	g_mutex_unlock(&img->map_lock);
	if (ret < 0)
		goto out_err;
	if (!leaf || img->vol.id != img->sb.default_volume) {
		g_warning("%s: the default volume %llu is missing from the volume tree",
			  img->meta.path,
			  (unsigned long long)img->sb.default_volume);
		return -EUCLEAN;
	}
	if (!img->rdonly && (img->voltree.root->used != 1 ||
			     img->vol.last_snapshot_generation)) {
		g_warning("%s: the image has snapshots or clones, which this dioloop cannot write yet; open it read-only",
			  img->meta.path);
		return -EOPNOTSUPP;
	}
	cow_tree_init(&img->map, COW_TREE_MAP, &img->meta, img->vol.id,
		      img->vol.size >> COW_BLOCK_SHIFT);
	ret = cow_tree_open(&img->map, &img->vol.map_root, &err);
	if (ret < 0)
		goto out_err;
	atomic_init(&img->size, img->vol.size);
	return 0;

out_err:
	g_warning("%s: %s", img->meta.path, err.msg);
	return ret;
}

/* Limits: everything the engine does is in whole 4 KiB blocks. */
static void set_limits(struct cow_image *img)
{
	img->b->limits = (struct backend_limits){
		.request_alignment = COW_BLOCK_SIZE,
		.mem_alignment = COW_BLOCK_SIZE,
		.block_size = COW_BLOCK_SIZE,
		.max_transfer = 1u << 20,
		.max_segs = 1024,
	};
}

int cow_image_open(struct cow_image *img, const struct backend_open_args *args)
{
	struct backend *b = img->b;
	struct cow_err err = { "" };
	int flags = O_DIRECT | O_CLOEXEC, ret;
	struct stat st;

	img->rdonly = args->flags & BACKEND_OPEN_RDONLY;
	img->growable = args->flags & BACKEND_OPEN_GROWABLE;
	img->meta.path = b->path;
	img->meta.fd = -1;
	g_mutex_init(&img->commit_lock);
	g_mutex_init(&img->map_lock);
	g_mutex_init(&img->epoch_lock);
	g_mutex_init(&img->inflight_lock);
	g_mutex_init(&img->committer_lock);
	g_cond_init(&img->committer_cond);
	g_queue_init(&img->epochs);
	img->refops = g_array_new(FALSE, FALSE, sizeof(struct cow_refop));
	img->inflight = g_hash_table_new_full(g_int64_hash, g_int64_equal,
					      NULL, g_free);
	img->commit_ms = COW_DEFAULT_COMMIT_MS;

	flags |= img->rdonly ? O_RDONLY : O_RDWR;
	img->meta.fd = open(args->path, flags);
	if (img->meta.fd < 0) {
		ret = -errno;
		g_warning("%s: open%s: %s", args->path,
			  ret == -EINVAL ? " (O_DIRECT unsupported here?)" : "",
			  g_strerror(-ret));
		return ret;
	}
	if (fstat(img->meta.fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		g_warning("%s: not a regular file", args->path);
		return -EINVAL;
	}
	/* One writer per container: two would allocate the same blocks. */
	if (!img->rdonly && flock(img->meta.fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		g_warning("%s: %s", args->path,
			  ret == -EBUSY ? "the image is open for writing elsewhere" :
					  g_strerror(-ret));
		return ret;
	}
	ret = check_dio_alignment(img);
	if (ret < 0)
		return ret;
	ret = open_superblock(img);
	if (ret < 0)
		return ret;
	ret = cow_alloc_open(&img->alloc, &img->meta, &img->sb.refcount_root,
			     &err);
	if (ret < 0) {
		g_warning("%s: %s", img->meta.path, err.msg);
		return ret;
	}
	ret = open_volume(img);
	if (ret < 0)
		return ret;
	atomic_init(&img->committed_gen, img->sb.generation);
	img->epoch = img->sb.generation + 1;
	set_limits(img);
	if (!b->aio) {
		ret = dioloop_aio_new(COW_AIO_DEPTH, "cow-aio", &img->own_aio);
		if (ret < 0)
			return ret;
		b->aio = img->own_aio;
	}
	if (!img->rdonly) {
		ret = cow_commit_open(img);
		if (ret < 0)
			return ret;
		cow_committer_start(img);
	}
	img->opened = true;
	return 0;
}

void cow_image_close(struct cow_image *img)
{
	cow_committer_stop(img);
	if (img->opened && !img->rdonly && !atomic_load(&img->failed))
		cow_commit(img);
	if (img->own_aio) {
		dioloop_aio_free(img->own_aio);
		img->b->aio = NULL;
	}
	cow_tree_destroy(&img->map);
	cow_tree_destroy(&img->voltree);
	if (img->alloc.meta)
		cow_alloc_close(&img->alloc);
	if (img->meta.fd >= 0)
		close(img->meta.fd);
	g_array_free(img->refops, TRUE);
	g_hash_table_destroy(img->inflight);
	g_queue_clear_full(&img->epochs, g_free);
	g_mutex_clear(&img->commit_lock);
	g_mutex_clear(&img->map_lock);
	g_mutex_clear(&img->epoch_lock);
	g_mutex_clear(&img->inflight_lock);
	g_mutex_clear(&img->committer_lock);
	g_cond_clear(&img->committer_cond);
}
