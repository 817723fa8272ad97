/* SPDX-License-Identifier: MIT */
/* FUSE over io_uring (session_uring.h). */
#define FUSE_USE_VERSION 314

#include "fusefs/session_uring.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <glib.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backends/aio.h"
#include "fusefs/fuse_uring_abi.h"
#include "fusefs/session_io.h"

#define URING_PARAM "/sys/module/fuse/parameters/enable_uring"
#define URING_PAGE 4096u
/* The kernel's smallest payload buffer (FUSE_MIN_READ_BUFFER). */
#define URING_MIN_PAYLOAD 8192u
/* Room before the payload for the in-header and the op header, so that
 * a request is contiguous without copying its payload. */
#define URING_SLACK URING_PAGE
/* Most entries per queue. */
#define URING_MAX_DEPTH 256u
/* Requests of a batch whose backend I/O goes to the kernel in one
 * io_submit.  The first request of a batch waits for the others to be
 * read: with a whole batch (up to the queue depth) in one io_submit, 4k
 * random reads at QD32 did 45k IOPS, with 8 at a time 54k.  Measured
 * again side by side, 1, 2, 4 and 8 at a time gave the same IOPS within
 * the spread, and 8 the least daemon CPU per read (5.8-7.1 us against
 * 8.6-9.4 with one io_submit each; docs/targets.md). */
#define URING_SUBMIT_BATCH 8u
/* Room in a queue's own libaio context (the rest waits in its queue):
 * a few pieces per request, bounded, for io_setup takes from the
 * system-wide fs.aio-max-nr. */
#define URING_AIO_DEPTH(depth) MIN(4u * (depth), 1024u)
/* Shards of the table of requests in service, by FUSE unique: a reply
 * from any thread finds its entry under its shard's lock, which the
 * other queues' requests almost never take. */
#define URING_SHARDS 64u

_Static_assert(sizeof(struct fuse_in_header) +
		       DIOLOOP_FUSE_URING_OP_IN_OUT_SZ <= URING_SLACK,
	       "the slack holds the in-header and the op header");

struct uring_queue;

/* One ring entry: a request's buffers, from fetch to commit. */
struct uring_ent {
	struct uring_queue *q;
	struct dioloop_fuse_uring_req_header *hdr;	/* page-aligned */
	char *buf;			/* URING_SLACK + payload */
	char *payload;			/* buf + URING_SLACK */
	struct iovec iov[2];		/* REGISTER's: hdr, payload */
	uint32_t cmd;			/* the command to send next */
	uint64_t commit_id;		/* of the request being served */
	uint64_t unique;		/* its FUSE unique (the key of by_unique) */
	struct uring_ent *next;		/* on q->pending */
	bool dead;			/* the kernel let go of it */
	bool lent;			/* payload lent to the request's I/O */
};

struct uring_queue {
	unsigned qid;
	struct io_uring ring;
	bool ring_ready;
	int efd;			/* other threads' and libaio's wake-up */
	uint64_t efd_val;		/* its read's buffer (and CQE tag) */
	struct dioloop_aio *aio;	/* the thread's own libaio context */
	GThread *thread;
	GMutex lock;			/* pending */
	struct uring_ent *pending;	/* commands to submit */
	struct uring_ent *ents;
	unsigned live;			/* entries the kernel still holds */
	/* Counted by the queue's thread (handed: by the replying one);
	 * dioloop_uring_get_stats sums them. */
	_Alignas(64) _Atomic uint64_t requests;
	_Atomic uint64_t payloads_lent;
	_Atomic uint64_t replies_handed;
};

struct uring_shard {
	_Alignas(64) GMutex lock;
	GHashTable *by_unique;		/* &ent->unique -> ent in service */
};

/* One FUSE session per process (as session_io.c). */
static struct {
	struct fuse_session *se;
	int fd;				/* /dev/fuse */
	bool enabled;
	unsigned depth;
	size_t payload_sz;
	unsigned nr_queues;
	struct uring_queue *queues;
	_Atomic bool active;		/* set and cleared under every shard's
					 * lock */
	_Atomic bool stopping;
	struct uring_shard shards[URING_SHARDS];
	GMutex queues_lock;		/* queues, against a stats read */
} pool;

static struct uring_shard *shard_of(uint64_t unique)
{
	/* Fibonacci hashing: uniques go up in steps of 2. */
	return &pool.shards[(unique * UINT64_C(0x9E3779B97F4A7C15)) >> 58];
}

_Static_assert(URING_SHARDS == 64u, "shard_of takes the top 6 bits");

/* Set pool.active under every shard's lock: once it is false no reply
 * finds an entry.  A reply that found one before is pushed before the
 * queues are freed: the unmount drains every node first, and a read or
 * write counts itself out of its node after its reply. */
static void pool_set_active(bool active)
{
	unsigned i;

	for (i = 0; i < URING_SHARDS; i++)
		g_mutex_lock(&pool.shards[i].lock);
	atomic_store(&pool.active, active);
	for (i = 0; i < URING_SHARDS; i++)
		g_mutex_unlock(&pool.shards[i].lock);
}

static __thread struct uring_queue *current_queue;
/* The entry whose request this thread's libfuse dispatch is handling. */
static __thread struct uring_ent *serving_ent;

int dioloop_uring_allowed(const char **why)
{
	struct io_uring_params params = { .flags = IORING_SETUP_SQE128 };
	g_autofree char *text = NULL;
	struct io_uring probe;

	if (!g_file_get_contents(URING_PARAM, &text, NULL, NULL)) {
		*why = "this kernel's fuse module has no io_uring support "
		       "(no " URING_PARAM ")";
		return -EOPNOTSUPP;
	}
	if (text[0] != 'Y' && text[0] != '1') {
		*why = "the fuse module's io_uring support is off (" URING_PARAM
		       " is N; set it to Y as root)";
		return -EPERM;
	}
	/* io_uring itself may be off (kernel.io_uring_disabled, a seccomp
	 * filter) or too old for 128-byte SQEs. */
	if (io_uring_queue_init_params(1, &probe, &params) < 0) {
		*why = "this process cannot set up an io_uring with 128-byte "
		       "SQEs (kernel.io_uring_disabled, or a seccomp filter?)";
		return -EPERM;
	}
	io_uring_queue_exit(&probe);
	*why = NULL;
	return 0;
}

int dioloop_uring_enable(struct fuse_session *se, unsigned depth)
{
	int fd = fuse_session_fd(se);

	if (fd < 0)
		return -EBADF;
	pool.se = se;
	pool.fd = fd;
	pool.depth = CLAMP(depth, 1u, URING_MAX_DEPTH);
	pool.enabled = true;
	for (unsigned i = 0; i < URING_SHARDS; i++) {
		g_mutex_init(&pool.shards[i].lock);
		pool.shards[i].by_unique = g_hash_table_new(g_int64_hash,
							    g_int64_equal);
	}
	return 0;
}

uint32_t dioloop_uring_init_flags2(uint64_t offered)
{
	if (!pool.enabled || !(offered & DIOLOOP_FUSE_OVER_IO_URING))
		return 0;
	return (uint32_t)(DIOLOOP_FUSE_OVER_IO_URING >> 32);
}

/* Prepare e's next command in a fresh SQE of q's ring (the ring's own
 * thread only). */
static void queue_prep(struct uring_queue *q, struct uring_ent *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct dioloop_fuse_uring_cmd_req *req;

	if (!sqe) {
		/* Never more commands than entries: only when the ring is
		 * full of unsubmitted ones. */
		io_uring_submit(&q->ring);
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe) {
			g_warning("uring queue %u: no free SQE", q->qid);
			return;
		}
	}
	memset(sqe, 0, 128);	/* IORING_SETUP_SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = pool.fd;
	sqe->cmd_op = e->cmd;
	req = (struct dioloop_fuse_uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)q->qid;
	if (e->cmd == DIOLOOP_FUSE_IO_URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)e->iov;
		sqe->len = 2;
	} else {
		req->commit_id = e->commit_id;
	}
	io_uring_sqe_set_data(sqe, e);
}

/* Read the eventfd through the ring: its completion wakes the thread. */
static void queue_arm_wakeup(struct uring_queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe)
		return;
	io_uring_prep_read(sqe, q->efd, &q->efd_val, sizeof(q->efd_val), 0);
	io_uring_sqe_set_data(sqe, &q->efd_val);
}

/* Hand e's next command to its queue's thread (any thread). */
static void queue_push(struct uring_queue *q, struct uring_ent *e)
{
	bool was_empty;

	g_mutex_lock(&q->lock);
	was_empty = !q->pending;
	e->next = q->pending;
	q->pending = e;
	g_mutex_unlock(&q->lock);
	if (current_queue != q)
		atomic_fetch_add_explicit(&q->replies_handed, 1,
					  memory_order_relaxed);
	if (was_empty && current_queue != q) {
		uint64_t one = 1;

		if (write(q->efd, &one, sizeof(one)) < 0)
			g_warning("uring queue %u: wake-up: %s", q->qid,
				  g_strerror(errno));
	}
}

/* Submit what was handed over (the queue's thread). */
static void queue_flush(struct uring_queue *q)
{
	struct uring_ent *e;

	g_mutex_lock(&q->lock);
	e = q->pending;
	q->pending = NULL;
	g_mutex_unlock(&q->lock);
	for (; e; e = e->next)
		queue_prep(q, e);
}

/* Answer the ring request in e with error, without libfuse. */
static void ent_reply_error(struct uring_ent *e, uint64_t unique, int error)
{
	struct fuse_out_header out = {
		.len = sizeof(out), .error = error, .unique = unique,
	};

	memcpy(e->hdr->in_out, &out, sizeof(out));
	e->hdr->ring_ent_in_out.payload_sz = 0;
	e->cmd = DIOLOOP_FUSE_IO_URING_CMD_COMMIT_AND_FETCH;
	queue_push(e->q, e);
}

/*
 * The request the kernel put in e: in-header, op header and payload made
 * contiguous (the headers go into the slack before the payload), as
 * /dev/fuse gives it, then libfuse's dispatch.  Its reply comes back in
 * dioloop_uring_reply, from this thread or any other.
 */
static void ent_serve(struct uring_ent *e)
{
	struct dioloop_fuse_uring_req_header *h = e->hdr;
	uint32_t payload_sz = h->ring_ent_in_out.payload_sz;
	struct fuse_in_header in;
	struct fuse_buf buf = { 0 };
	struct uring_shard *sh;
	size_t op_sz;
	char *start;

	memcpy(&in, h->in_out, sizeof(in));
	e->commit_id = h->ring_ent_in_out.commit_id;
	if (in.len < sizeof(in) + (size_t)payload_sz ||
	    in.len - sizeof(in) - payload_sz > sizeof(h->op_in) ||
	    payload_sz > pool.payload_sz) {
		g_warning("uring queue %u: malformed request (opcode %u, "
			  "len %u, payload %u)", e->q->qid, in.opcode, in.len,
			  payload_sz);
		ent_reply_error(e, in.unique, -EIO);
		return;
	}
	op_sz = in.len - sizeof(in) - payload_sz;
	start = e->payload - op_sz - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), h->op_in, op_sz);
	dioloop_session_io_fixup(start, in.len);

	e->unique = in.unique;
	sh = shard_of(e->unique);
	g_mutex_lock(&sh->lock);
	g_hash_table_insert(sh->by_unique, &e->unique, e);
	g_mutex_unlock(&sh->lock);
	atomic_fetch_add_explicit(&e->q->requests, 1, memory_order_relaxed);

	buf.mem = start;
	buf.size = in.len;
	e->lent = false;
	serving_ent = e;
	fuse_session_process_buf(pool.se, &buf);
	serving_ent = NULL;
}

void *dioloop_uring_lend_payload(const void *data, size_t size)
{
	struct uring_ent *e = serving_ent;

	if (!e || e->lent || size > pool.payload_sz ||
	    (data && data != e->payload))
		return NULL;
	e->lent = true;
	atomic_fetch_add_explicit(&e->q->payloads_lent, 1,
				  memory_order_relaxed);
	return e->payload;
}

bool dioloop_uring_reply(const struct iovec *iov, int count, ssize_t *ret)
{
	struct fuse_out_header out;
	struct uring_shard *sh;
	struct uring_ent *e;
	size_t total = 0, len = 0, skip = sizeof(out);
	int i;

	if (!atomic_load(&pool.active) || count < 1 ||
	    iov[0].iov_len < sizeof(out))
		return false;
	memcpy(&out, iov[0].iov_base, sizeof(out));
	if (!out.unique)		/* a notification */
		return false;
	sh = shard_of(out.unique);
	g_mutex_lock(&sh->lock);
	e = atomic_load(&pool.active) ?
		    g_hash_table_lookup(sh->by_unique, &out.unique) : NULL;
	if (e)
		g_hash_table_remove(sh->by_unique, &out.unique);
	g_mutex_unlock(&sh->lock);
	if (!e)
		return false;

	/* Everything after the out-header is the payload. */
	for (i = 0; i < count; i++) {
		size_t n = iov[i].iov_len, off = MIN(skip, n);

		total += n;
		skip -= off;
		n -= off;
		if (!n)
			continue;
		if (len + n > pool.payload_sz) {
			out.error = -EIO;
			len = 0;
			break;
		}
		/* A read into the lent payload is in place already. */
		if ((const char *)iov[i].iov_base + off != e->payload + len)
			memcpy(e->payload + len,
			       (const char *)iov[i].iov_base + off, n);
		len += n;
	}
	if (out.error)
		len = 0;
	out.len = (uint32_t)(sizeof(out) + len);
	memcpy(e->hdr->in_out, &out, sizeof(out));
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)len;
	e->cmd = DIOLOOP_FUSE_IO_URING_CMD_COMMIT_AND_FETCH;
	queue_push(e->q, e);
	*ret = (ssize_t)total;
	return true;
}

/* One completion of q's ring (the queue's thread). */
static void queue_complete(struct uring_queue *q, struct io_uring_cqe *cqe)
{
	void *data = io_uring_cqe_get_data(cqe);
	struct uring_ent *e = data;

	if (data == &q->efd_val) {
		if (!atomic_load(&pool.stopping))
			queue_arm_wakeup(q);
		return;
	}
	if (!e)
		return;
	if (cqe->res == 0) {
		ent_serve(e);
		return;
	}
	if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
		queue_prep(q, e);	/* again, as it was */
		return;
	}
	/* -ENOTCONN, -ECONNABORTED: the mount went away. */
	if (cqe->res != -ENOTCONN && cqe->res != -ECONNABORTED &&
	    !atomic_load(&pool.stopping))
		g_warning("uring queue %u: %s failed: %s", q->qid,
			  e->cmd == DIOLOOP_FUSE_IO_URING_CMD_REGISTER ?
				  "register" : "commit",
			  g_strerror(-cqe->res));
	if (!e->dead) {
		e->dead = true;
		q->live--;
	}
}

/*
 * The queue's own libaio context, signalling q->efd: the backend I/O this
 * thread starts completes on this thread, which replies into its ring at
 * once, instead of a completion thread handing each reply over.  Without
 * one (fs.aio-max-nr reached) replies are handed over as before.
 */
static void queue_bind_aio(struct uring_queue *q)
{
	int ret = dioloop_aio_new_reaped(URING_AIO_DEPTH(pool.depth), q->efd,
					 &q->aio);

	if (ret < 0) {
		g_warning("uring queue %u: no libaio context of its own (%s); "
			  "its replies go through the completion thread",
			  q->qid, g_strerror(-ret));
		q->aio = NULL;
		return;
	}
	dioloop_aio_bind_thread(q->aio);
}

static gpointer queue_thread(gpointer data)
{
	struct uring_queue *q = data;
	unsigned i;

	current_queue = q;
	queue_bind_aio(q);
	queue_arm_wakeup(q);
	for (i = 0; i < pool.depth; i++)
		queue_prep(q, &q->ents[i]);
	while (!atomic_load(&pool.stopping) && q->live) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		queue_flush(q);
		ret = io_uring_submit_and_wait(&q->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN &&
		    ret != -EBUSY) {
			g_warning("uring queue %u: %s", q->qid,
				  g_strerror(-ret));
			break;
		}
		/* The backend I/O of this batch of requests goes to the
		 * kernel in one io_submit per URING_SUBMIT_BATCH requests. */
		dioloop_aio_plug();
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			queue_complete(q, cqe);
			if (++seen % URING_SUBMIT_BATCH == 0) {
				dioloop_aio_unplug();
				dioloop_aio_plug();
			}
		}
		io_uring_cq_advance(&q->ring, seen);
		/* Backend completions (the eventfd read above woke us, or
		 * they came meanwhile): their replies go out at the top. */
		if (q->aio)
			dioloop_aio_reap(q->aio, 0);
		dioloop_aio_unplug();
	}
	/* What this thread started ends here (it reaps its own). */
	if (q->aio)
		dioloop_aio_free(q->aio);
	q->aio = NULL;
	return NULL;
}

/* Buffers and ring of one queue.  0 or -errno. */
static int queue_init(struct uring_queue *q, unsigned qid)
{
	struct io_uring_params params = { 0 };
	unsigned i;
	int ret;

	q->qid = qid;
	q->efd = -1;
	g_mutex_init(&q->lock);
	q->ents = g_new0(struct uring_ent, pool.depth);
	for (i = 0; i < pool.depth; i++) {
		struct uring_ent *e = &q->ents[i];

		e->q = q;
		e->hdr = aligned_alloc(URING_PAGE, URING_PAGE);
		e->buf = aligned_alloc(URING_PAGE,
				       URING_SLACK + pool.payload_sz);
		if (!e->hdr || !e->buf)
			return -ENOMEM;
		memset(e->hdr, 0, URING_PAGE);
		e->payload = e->buf + URING_SLACK;
		e->iov[0].iov_base = e->hdr;
		e->iov[0].iov_len = sizeof(*e->hdr);
		e->iov[1].iov_base = e->payload;
		e->iov[1].iov_len = pool.payload_sz;
		e->cmd = DIOLOOP_FUSE_IO_URING_CMD_REGISTER;
	}
	q->live = pool.depth;
	q->efd = eventfd(0, EFD_CLOEXEC);
	if (q->efd < 0)
		return -errno;
	/* Every entry's command and the wake-up read; completions for all
	 * of them, twice over. */
	params.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE;
	params.cq_entries = 2 * (pool.depth + 1);
	/* A request or a completion for this queue is posted by the task
	 * that made it, as task work for this thread: cooperatively, it is
	 * run when this thread next enters the kernel (the loop always
	 * does) or wakes it if it sleeps, with no interrupt (an IPI, costly
	 * in a VM) while it runs.  Measured: 4k QD32 reads +46%, writes
	 * +27% (docs/bench.md). */
	params.flags |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	ret = io_uring_queue_init_params(pool.depth + 1, &q->ring, &params);
	if (ret == -EINVAL) {	/* a kernel without them */
		params.flags &= ~(IORING_SETUP_COOP_TASKRUN |
				  IORING_SETUP_TASKRUN_FLAG);
		ret = io_uring_queue_init_params(pool.depth + 1, &q->ring,
						 &params);
	}
	if (ret < 0)
		return ret;
	q->ring_ready = true;
	return 0;
}

static void queue_free(struct uring_queue *q)
{
	unsigned i;

	if (q->ring_ready)
		io_uring_queue_exit(&q->ring);
	if (q->efd >= 0)
		close(q->efd);
	for (i = 0; q->ents && i < pool.depth; i++) {
		free(q->ents[i].hdr);
		free(q->ents[i].buf);
	}
	g_free(q->ents);
	g_mutex_clear(&q->lock);
}

void dioloop_uring_init_replied(const struct iovec *iov, int count)
{
	struct fuse_init_out init;
	size_t max_pages_sz;
	long cpus;
	unsigned i;
	int ret = 0;

	if (!pool.enabled || pool.queues || count < 2 ||
	    iov[1].iov_len < sizeof(init))
		return;
	memcpy(&init, iov[1].iov_base, sizeof(init));
	if (!(init.flags & FUSE_INIT_EXT) ||
	    !(init.flags2 & (uint32_t)(DIOLOOP_FUSE_OVER_IO_URING >> 32))) {
		g_warning("transport: the kernel did not offer io_uring at "
			  "INIT; serving through /dev/fuse");
		return;
	}
	/* The kernel wants room for its largest request or reply: the
	 * larger of max_write and max_pages pages. */
	max_pages_sz = (size_t)MAX(init.max_pages, 32u) * URING_PAGE;
	pool.payload_sz = MAX(MAX((size_t)URING_MIN_PAYLOAD,
				  (size_t)init.max_write), max_pages_sz);
	pool.payload_sz = (pool.payload_sz + URING_PAGE - 1) &
			  ~(size_t)(URING_PAGE - 1);
	/* One queue per possible CPU: the kernel's qid is the CPU a
	 * request is sent from. */
	cpus = sysconf(_SC_NPROCESSORS_CONF);
	pool.nr_queues = cpus > 0 ? (unsigned)cpus : 1;
	/* Aligned for the counters' own cache line. */
	pool.queues = g_aligned_alloc0(pool.nr_queues,
				       sizeof(struct uring_queue),
				       _Alignof(struct uring_queue));
	for (i = 0; i < pool.nr_queues && ret == 0; i++)
		ret = queue_init(&pool.queues[i], i);
	if (ret < 0) {
		g_warning("transport: cannot set up the io_uring queues: %s; "
			  "serving through /dev/fuse", g_strerror(-ret));
		g_mutex_lock(&pool.queues_lock);
		for (i = 0; i < pool.nr_queues; i++)
			queue_free(&pool.queues[i]);
		g_clear_pointer(&pool.queues, g_aligned_free);
		g_mutex_unlock(&pool.queues_lock);
		return;
	}
	pool_set_active(true);
	for (i = 0; i < pool.nr_queues; i++) {
		char name[16];

		g_snprintf(name, sizeof(name), "dioloop-ring%u", i);
		pool.queues[i].thread = g_thread_new(name, queue_thread,
						     &pool.queues[i]);
	}
	g_message("transport: uring (%u queues of %u entries, %zu KiB "
		  "payload buffers)", pool.nr_queues, pool.depth,
		  pool.payload_sz / 1024);
}

void dioloop_uring_stop(void)
{
	unsigned i;

	if (!pool.queues)
		return;
	atomic_store(&pool.stopping, true);
	pool_set_active(false);
	for (i = 0; i < pool.nr_queues; i++) {
		uint64_t one = 1;

		if (write(pool.queues[i].efd, &one, sizeof(one)) < 0)
			g_warning("uring queue %u: wake-up: %s", i,
				  g_strerror(errno));
	}
	for (i = 0; i < pool.nr_queues; i++)
		if (pool.queues[i].thread)
			g_thread_join(pool.queues[i].thread);
	g_mutex_lock(&pool.queues_lock);
	for (i = 0; i < pool.nr_queues; i++)
		queue_free(&pool.queues[i]);
	g_clear_pointer(&pool.queues, g_aligned_free);
	g_mutex_unlock(&pool.queues_lock);
	for (i = 0; i < URING_SHARDS; i++)
		g_clear_pointer(&pool.shards[i].by_unique,
				g_hash_table_destroy);
}

void dioloop_uring_get_stats(struct dioloop_uring_stats *st)
{
	unsigned i;

	st->enabled = pool.enabled;
	st->active = atomic_load(&pool.active);
	st->queues = st->active ? pool.nr_queues : 0;
	st->depth = pool.depth;
	st->requests = st->replies_handed = st->payloads_lent = 0;
	g_mutex_lock(&pool.queues_lock);
	for (i = 0; pool.queues && i < pool.nr_queues; i++) {
		struct uring_queue *q = &pool.queues[i];

		st->requests += atomic_load_explicit(&q->requests,
						     memory_order_relaxed);
		st->replies_handed += atomic_load_explicit(&q->replies_handed,
							   memory_order_relaxed);
		st->payloads_lent += atomic_load_explicit(&q->payloads_lent,
							  memory_order_relaxed);
	}
	g_mutex_unlock(&pool.queues_lock);
}
