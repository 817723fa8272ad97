/* SPDX-License-Identifier: MIT */
/*
 * Inside the nfs backend: one struct dnfs per open image.
 *
 * Threads.  Each image has one service thread that owns its libnfs
 * context (libnfs 4.0 contexts are not thread-safe) and everything marked
 * "service thread" below.  Other threads only queue work under d->lock
 * (requests from direct_IO_bvec, control operations from flush, resize,
 * info, close) and wake the service thread through d->efd; the service
 * thread polls that eventfd and the context's socket (nfs_get_fd,
 * nfs_which_events) and calls nfs_service.  Every libnfs callback and
 * every kiocb completion runs on the service thread.
 *
 * Requests.  direct_IO_bvec splits a request into pieces of at most
 * rsize/wsize bytes (struct dnfs_piece), writes with a copy of their data,
 * and queues it.  The service thread sends pieces as READ/WRITE RPCs (at
 * most DNFS_MAX_INFLIGHT at once), continues short transfers, and
 * completes the kiocb when its last piece ends (the first error wins).
 *
 * Unstable writes.  A WRITE answered UNSTABLE leaves its piece "retained"
 * (state DNFS_P_WRITTEN, on d->writes) with the verifier of the reply.  A
 * COMMIT round sends COMMIT and remembers done_mark, the number of WRITEs
 * answered so far; when the COMMIT returns verifier V:
 *   - every retained piece answered before the COMMIT with verifier V is
 *     durable: freed;
 *   - if any of them has another verifier, the server lost writes: nothing
 *     is freed, the backend stops sending new writes, waits for those in
 *     flight, and sends every retained write again in submission order
 *     (each after any earlier overlapping one has been answered), then
 *     COMMITs again.  Sending all of them in order keeps the newest data
 *     of any range last.
 * flush queues a DNFS_CTL_FLUSH with the last write sequence number given
 * out; it ends when no write piece of that number or lower is left on
 * d->writes (which is in sequence order), after as many rounds as needed.
 * Retained data is bounded: past DNFS_RETAIN_COMMIT bytes a background
 * COMMIT round starts, past DNFS_RETAIN_MAX new writes wait for it.
 *
 * Connection.  States CONNECTING (MOUNT, LOOKUP, GETATTR in flight),
 * READY, DOWN (waiting to try again).  Any RPC-level failure, a socket
 * error, a stale file handle, or no answer to anything in flight for
 * d->hang_us, tears the context down: the pieces in flight go back to the
 * front of the queue and a new context is made (backing off up to 1 s).
 * A request that has not finished d->timeout_us after it was queued fails
 * with -EIO, whatever the state; so does a control operation.
 */
#ifndef DIOLOOP_NFS_INT_H
#define DIOLOOP_NFS_INT_H

#include <errno.h>
#include <glib.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/backend.h"
#include "backends/nfs/nfs.h"

#define DNFS_DEFAULT_TIMEOUT_S 60
#define DNFS_MAX_TIMEOUT_S (24 * 3600)
#define DNFS_MAX_XFER ((uint32_t)1 << 20)	/* libnfs 4.0's largest PDU */
#define DNFS_MIN_XFER ((uint32_t)4096)
#define DNFS_MAX_INFLIGHT 64			/* RPCs per image */
#define DNFS_RETAIN_COMMIT ((uint64_t)64 << 20)
#define DNFS_RETAIN_MAX ((uint64_t)256 << 20)
#define DNFS_FHSIZE 64				/* NFS3_FHSIZE */

/* A parsed nfs:// URL. */
struct dnfs_url {
	char *url;		/* as given, for messages */
	char *libnfs_url;	/* what libnfs parses (options applied per
				 * context): HOST:PORT moved to nfsport= */
	char *server;		/* host name or address */
	char *dir;		/* directory mounted, "/..." */
	char *file;		/* file in it, "/NAME" (NULL for a dir URL) */
	unsigned int timeout_s;
	bool sync;
};

/* Parse url (want_file: it names a file, else a directory): 0, or
 * -EINVAL with one line that says why in *error (NULL: logged). */
int dnfs_url_parse(const char *url, bool want_file, struct dnfs_url *u,
		   GError **error);
void dnfs_url_clear(struct dnfs_url *u);
/* A new libnfs context with u's options (uid, gid, ports, ...) applied:
 * NULL with the line in *error (NULL: logged) when it cannot be made. */
struct nfs_context *dnfs_context_new(const struct dnfs_url *u,
				     GError **error);

enum dnfs_state {
	DNFS_DOWN,
	DNFS_CONNECTING,
	DNFS_READY,
};

enum dnfs_piece_state {
	DNFS_P_QUEUED,		/* on d->pending or d->resend */
	DNFS_P_INFLIGHT,	/* an RPC is out */
	DNFS_P_WRITTEN,		/* answered UNSTABLE: retained */
};

struct dnfs;
struct dnfs_req;

/* One RPC's worth of a request (or a retained write).  Service thread
 * once queued. */
struct dnfs_piece {
	struct dnfs *d;
	struct dnfs_req *req;	/* NULL once the request no longer needs it
				 * (written, or the request gave up) */
	bool write;
	bool resending;		/* sent again after a verifier change */
	bool abandoned;		/* the request gave up: free at the end of
				 * the RPC in flight */
	enum dnfs_piece_state state;
	uint64_t pos;		/* image offset */
	uint32_t len;
	uint32_t done;		/* bytes answered so far (short transfers) */
	size_t iter_off;	/* reads: offset in the request's iterator */
	char *data;		/* writes: copy of the bytes */
	uint64_t seq;		/* writes: submission order */
	uint64_t done_seq;	/* writes: answer order (d->done_counter) */
	char verf[NFS3_WRITEVERFSIZE];
	bool verf_valid;	/* all answers carried the same verf */
	unsigned int gen;	/* d->gen when the RPC went out */
	int64_t sent_us;
	GList qlink;		/* d->pending, d->resend or d->inflight */
	GList wlink;		/* writes: d->writes (sequence order) */
};

/* A direct_IO_bvec request. */
struct dnfs_req {
	struct dnfs *d;
	struct kiocb *iocb;
	bool write;
	size_t count;		/* bytes the caller gets back on success */
	uint64_t end;		/* writes: pos + count */
	int64_t deadline_us;
	unsigned int pending;	/* pieces not finished; service thread */
	int err;		/* first error; service thread */
	GQueue pieces;		/* its unfinished pieces; service thread */
	struct dnfs_req *next;	/* d->sub_head list; by d->lock */
	GList link;		/* d->active; service thread */
	/* Synchronous callers: by d->lock. */
	bool sync_caller;
	bool done;
	ssize_t res;
};

enum dnfs_ctl_kind {
	DNFS_CTL_FLUSH,		/* commit writes up to seq */
	DNFS_CTL_GETATTR,	/* size and allocation from the server */
	DNFS_CTL_TRUNCATE,	/* SETATTR size */
};

/* A control operation from a worker thread; it waits for done. */
struct dnfs_ctl {
	enum dnfs_ctl_kind kind;
	uint64_t seq;		/* FLUSH: writes up to this one */
	uint64_t size;		/* TRUNCATE: new size; GETATTR: result */
	uint64_t used;		/* GETATTR: bytes allocated */
	int64_t deadline_us;
	bool inflight;		/* GETATTR/TRUNCATE: RPC out */
	unsigned int gen;
	int err;
	bool done;		/* by d->lock */
	struct dnfs_ctl *next;	/* submission list; by d->lock */
	GList link;		/* d->ctls; service thread */
};

struct dnfs;
/* Keep the times of attributes the server sent.  Service thread. */
void dnfs_keep_times(struct dnfs *d, uint64_t atime, uint64_t atime_ns,
		     uint64_t mtime, uint64_t mtime_ns, uint64_t ctime,
		     uint64_t ctime_ns);
/* The same from an NFSv3 post_op_attr, when it has attributes. */
void dnfs_keep_post_op_times(struct dnfs *d, const post_op_attr *a);

struct dnfs {
	struct backend *b;
	struct dnfs_url url;
	bool rdonly, growable, sync;
	int64_t timeout_us;
	int64_t hang_us;
	_Atomic uint64_t size;		/* visible size */
	/* The file's times as the server last told them (GETATTR, the
	 * attributes of READ and WRITE replies): ns since the epoch. */
	_Atomic uint64_t atime_ns, mtime_ns, ctime_ns;
	_Atomic uint32_t rsize, wsize;	/* split sizes (set when READY) */
	atomic_uint_least64_t next_seq;	/* write piece numbers; under lock */

	/* Submission, any thread -> service thread. */
	GMutex lock;
	GCond cond;			/* sync requests, controls, open */
	struct dnfs_req *sub_head, **sub_tail;		/* by lock */
	struct dnfs_ctl *ctl_head, **ctl_tail;		/* by lock */
	bool stop;					/* by lock */
	bool opened;			/* first connection ended; by lock */
	int open_err;			/* its result; by lock */
	/* open's caller wants the first failure's line here instead of the
	 * log (backend_open_args.error); set before the service starts. */
	bool open_error_wanted;
	char *open_msg;			/* that line; by lock */
	int efd;			/* eventfd: wake the service thread */
	GThread *thread;

	/* Service thread only. */
	struct nfs_context *nfs;
	struct nfsfh *nfsfh;
	char fh[DNFS_FHSIZE];		/* the file's NFSv3 handle */
	unsigned int fh_len;
	enum dnfs_state state;
	bool broken;			/* a callback saw the context fail */
	bool tearing_down;		/* inside nfs_destroy_context */
	bool ever_ready;
	bool outage_logged;
	unsigned int gen;		/* contexts made so far */
	int64_t next_attempt_us;
	int64_t backoff_us;
	int64_t connect_deadline_us;
	int64_t last_progress_us;	/* last answer, or first send */
	GQueue pending;			/* pieces to send, in order */
	GQueue resend;			/* retained writes to send again */
	GQueue inflight;		/* pieces with an RPC out */
	GQueue writes;			/* write pieces alive, seq order */
	GQueue active;			/* requests not finished */
	GQueue ctls;			/* control operations not finished */
	unsigned int user_writes_inflight;
	uint64_t retained;		/* bytes in DNFS_P_WRITTEN */
	uint64_t done_counter;		/* WRITE answers so far */
	char verf[NFS3_WRITEVERFSIZE];	/* the last verifier seen */
	bool verf_known;
	bool ctl_rpc;			/* a GETATTR/SETATTR is out */
	bool commit_inflight;
	unsigned int commit_gen;
	uint64_t commit_mark;
	bool commit_wanted;		/* background round */
	bool quiesce;			/* a verifier changed: resending */
	int64_t last_deadline_scan_us;

	struct {
		_Atomic uint64_t rpcs, commits, reconnects, verifier_changes,
			resent_writes, resent_bytes, timeouts, retained;
	} stats;
};

/* conn.c: the service thread. */
int dnfs_service_start(struct dnfs *d);
void dnfs_service_stop(struct dnfs *d);
void dnfs_wake(struct dnfs *d);
bool dnfs_on_service_thread(struct dnfs *d);
/* Mark the context failed (from a callback; torn down after). */
void dnfs_conn_broken(struct dnfs *d, const char *why);

/* io.c: pieces, requests, commits (service thread unless said). */
ssize_t dnfs_submit(struct dnfs *d, struct kiocb *iocb);	/* any */
int dnfs_ctl_run(struct dnfs *d, struct dnfs_ctl *ctl);	/* worker */
void dnfs_take_submissions(struct dnfs *d);
void dnfs_issue(struct dnfs *d);
/* End the flushes that wait for no write any more (any state). */
void dnfs_finish_flushes(struct dnfs *d);
void dnfs_requeue_inflight(struct dnfs *d);
void dnfs_check_deadlines(struct dnfs *d, int64_t now, bool force);
void dnfs_fail_all(struct dnfs *d, int err);
void dnfs_ready(struct dnfs *d);
bool dnfs_has_work(struct dnfs *d);
void dnfs_free_pieces(struct dnfs *d);
/* io.c, for commit.c and deadline.c (service thread). */
void dnfs_set_retained(struct dnfs *d, int64_t delta);
void dnfs_piece_free(struct dnfs *d, struct dnfs_piece *p);
void dnfs_req_complete(struct dnfs *d, struct dnfs_req *req);
bool dnfs_status_reconnects(int status);
void dnfs_ctl_done(struct dnfs *d, struct dnfs_ctl *ctl, int err);
void dnfs_send(struct dnfs *d, struct dnfs_piece *p, GQueue *from);

/* commit.c: COMMIT rounds and resends after a verifier change. */
void dnfs_issue_resends(struct dnfs *d);
void dnfs_maybe_commit(struct dnfs *d);

/* Monotonic time in microseconds. */
static inline int64_t dnfs_now(void)
{
	return g_get_monotonic_time();
}

/* The RPC context of the connection. */
static inline struct rpc_context *dnfs_rpc(struct dnfs *d)
{
	return nfs_get_rpc_context(d->nfs);
}

/* An NFSv3 status as -errno. */
static inline int dnfs_errno(int status)
{
	int err = nfsstat3_to_errno(status);

	if (err > 0)
		err = -err;
	return err ? err : -EIO;
}

#endif
