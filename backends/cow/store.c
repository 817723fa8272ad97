/* SPDX-License-Identifier: MIT */
/*
 * The store under a cow container (cow_int.h): the backend that holds its
 * bytes, as QEMU's qcow2 sits on its file, nfs or rbd child.  A local file
 * is raw opened with BACKEND_OPEN_STORE, a URL is the backend named by its
 * scheme; cow reaches either only through backend.h.
 *
 * Memory given to the store is the daemon's own (pool pages, the engine's
 * bounce buffers, metadata pages): it is described to the store as
 * bio_vecs, page by page, never copied.
 */
#include "backends/cow/cow_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Pages per synchronous store I/O (1 MiB). */
#define STORE_SYNC_PAGES 256u

/* The backend serving the container args names: the URL's protocol
 * backend, or raw for a local file.  NULL with the line in *error. */
static const struct backend_ops *store_type(const struct backend_open_args *args)
{
	if (!cow_store_is_local(args))
		return backend_for_url(args->path, args->error);
	return backend_lookup("raw");
}

int cow_store_open(const struct backend_open_args *args, bool rdonly,
		   struct backend **store)
{
	const struct backend_ops *ops = store_type(args);
	struct backend_open_args sa = {
		.path = args->path,
		.file = args->file,
		.flags = BACKEND_OPEN_STORE | (rdonly ? BACKEND_OPEN_RDONLY : 0),
		.aio = args->aio,
		.error = args->error,
	};

	if (!ops)
		return -EPROTONOSUPPORT;
	return backend_open(ops->name, &sa, store);
}

bool cow_store_is_local(const struct backend_open_args *args)
{
	return args->file || !backend_is_url(args->path);
}

/* Describe iov (n entries) as bio_vecs, split at page boundaries, into
 * *bv: inline (room for nr_inline) when they fit, else g_new'd.  The
 * number of bio_vecs. */
static unsigned int iov_to_bvec(const struct iovec *iov, int n,
				struct bio_vec *inline_bv,
				unsigned int nr_inline, struct bio_vec **bv)
{
	unsigned int nr = 0, cap = 0;
	int i;

	for (i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)iov[i].iov_base;

		cap += (unsigned int)(((a & (DIOLOOP_PAGE_SIZE - 1)) +
				       iov[i].iov_len + DIOLOOP_PAGE_SIZE - 1) /
				      DIOLOOP_PAGE_SIZE);
	}
	*bv = cap <= nr_inline ? inline_bv : g_new(struct bio_vec, cap);
	for (i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			size_t off = a & (DIOLOOP_PAGE_SIZE - 1);
			size_t len = MIN(left, DIOLOOP_PAGE_SIZE - off);

			(*bv)[nr++] = (struct bio_vec){
				.bv_page = (void *)(a - off),
				.bv_len = (unsigned int)len,
				.bv_offset = (unsigned int)off,
			};
			a += len;
			left -= len;
		}
	}
	return nr;
}

/* bio_vecs kept inside a store I/O: most I/Os are a few blocks. */
#define STORE_INLINE_BVECS 8u

/* One asynchronous store I/O. */
struct store_io {
	struct kiocb iocb;
	struct iov_iter iter;
	struct bio_vec *bv;		/* inline_bv, or g_new'd */
	struct bio_vec inline_bv[STORE_INLINE_BVECS];
	cow_store_done_t done;
	void *opaque;
};

/* The store finished an I/O (its completion thread, or inline). */
static void store_io_complete(struct kiocb *iocb, ssize_t res)
{
	struct store_io *sio = iocb->ki_private;
	cow_store_done_t done = sio->done;
	void *opaque = sio->opaque;

	if (sio->bv != sio->inline_bv)
		g_free(sio->bv);
	g_free(sio);
	done(opaque, res);
}

void cow_store_submit(struct backend *store, bool write,
		      const struct iovec *iov, int n, uint64_t pos,
		      cow_store_done_t done, void *opaque)
{
	struct store_io *sio = g_new0(struct store_io, 1);
	unsigned int nr = iov_to_bvec(iov, n, sio->inline_bv,
				      STORE_INLINE_BVECS, &sio->bv);
	ssize_t res;

	sio->done = done;
	sio->opaque = opaque;
	iov_iter_init_bvec(&sio->iter, sio->bv, nr, bvec_length(sio->bv, nr),
			   0);
	sio->iocb = (struct kiocb){
		.ki_rw = write ? DIOLOOP_WRITE : DIOLOOP_READ,
		.ki_pos = pos,
		.ki_iter = &sio->iter,
		.ki_complete = store_io_complete,
		.ki_private = sio,
	};
	res = backend_direct_IO_bvec(store, &sio->iocb);
	if (res != -EIOCBQUEUED)
		store_io_complete(&sio->iocb, res);
}

ssize_t cow_store_rw(struct backend *store, bool write, void *buf,
		     size_t len, uint64_t pos)
{
	size_t done = 0;

	while (done < len) {
		size_t n = MIN(len - done,
			       (size_t)STORE_SYNC_PAGES * DIOLOOP_PAGE_SIZE);
		struct iovec iov = { (char *)buf + done, n };
		struct bio_vec *bv;
		unsigned int nr = iov_to_bvec(&iov, 1, NULL, 0, &bv);
		struct iov_iter iter;
		struct kiocb iocb = {
			.ki_rw = write ? DIOLOOP_WRITE : DIOLOOP_READ,
			.ki_pos = pos + done,
			.ki_iter = &iter,
		};
		ssize_t res;

		iov_iter_init_bvec(&iter, bv, nr, n, 0);
		res = backend_direct_IO_bvec(store, &iocb);
		g_free(bv);
		if (res < 0)
			return done ? (ssize_t)done : res;
		done += (size_t)res;
		if ((size_t)res < n) {
			/* Reads: the end of the store.  Writes are all or
			 * nothing (backend.h). */
			if (write)
				return -EIO;
			break;
		}
	}
	return (ssize_t)done;
}

int cow_store_write_iov(struct backend *store, const struct iovec *iov,
			int n, uint64_t pos)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n; i++) {
		/* Whole pages, one after the other in the store. */
		ssize_t res = cow_store_rw(store, true, iov[i].iov_base,
					   iov[i].iov_len, pos + len);

		if (res < 0)
			return (int)res;
		len += iov[i].iov_len;
	}
	return 0;
}

uint64_t cow_store_blocks(struct backend *store)
{
	int64_t size = backend_get_size(store);

	return size < 0 ? 0 : (uint64_t)size >> COW_BLOCK_SHIFT;
}

int cow_store_read_sb(struct backend *store, struct cow_sb *sb,
		      uint32_t *slot, struct cow_err *fallback,
		      struct cow_err *err)
{
	size_t len = COW_NR_SLOTS * COW_BLOCK_SIZE;
	uint8_t *buf;
	ssize_t got;
	int ret;

	if (posix_memalign((void **)&buf, COW_BLOCK_SIZE, len))
		return -ENOMEM;
	memset(buf, 0, len);
	got = cow_store_rw(store, false, buf, len, 0);
	if (got < 0) {
		fallback->msg[0] = '\0';
		cow_bad(err, "reading the superblocks: %s",
			g_strerror((int)-got));
		free(buf);
		return (int)got;
	}
	ret = cow_sb_choose(buf, (size_t)got, sb, slot, fallback, err);
	free(buf);
	return ret;
}

bool cow_is_image_url(const char *url)
{
	/* A probe is silent: why the URL cannot be opened is for the open
	 * that follows to say. */
	g_autoptr(GError) quiet = NULL;
	struct backend_open_args args = { .path = url, .error = &quiet };
	struct backend *store;
	uint8_t *buf;
	bool ret = false;

	if (cow_store_open(&args, true, &store) < 0)
		return false;
	if (posix_memalign((void **)&buf, COW_BLOCK_SIZE,
			   COW_NR_SLOTS * COW_BLOCK_SIZE) == 0) {
		ssize_t got = cow_store_rw(store, false, buf,
					   COW_NR_SLOTS * COW_BLOCK_SIZE, 0);

		ret = (got >= 16 && cow_sb_has_magic(buf)) ||
		      (got >= (ssize_t)COW_BLOCK_SIZE + 16 &&
		       cow_sb_has_magic(buf + COW_BLOCK_SIZE));
		free(buf);
	}
	backend_close(store);
	return ret;
}
