/* SPDX-License-Identifier: MIT */
/*
 * The "fault" filter (backends/filter_fault.h): the ops it changes ask its
 * rules whether to fail the op and how long to delay it, then go to the
 * backend below through the core wrappers; the core forwards the rest
 * (get_size, info and any op added later).
 *
 * Delayed asynchronous requests: a struct fault_req wraps the caller's
 * kiocb; the inner backend gets the wrapper's own kiocb (same iterator and
 * position, our callback).  When the inner result is known (inline or
 * through the callback) the wrapper goes on the delay queue, ordered by due
 * time, and the delay thread calls the caller's ki_complete once it is due,
 * then frees the wrapper.  So the caller's completion runs exactly once,
 * always on the delay thread, never on the submitting thread.
 *
 * Locking: f->lock guards the rules and counters (held only to decide, never
 * across an inner op).  f->delay_lock guards the delay queue and stopping.
 */
#include "backends/filter_fault.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

struct fault_rule_state {
	struct fault_rule rule;
	uint64_t seen;			/* matching ops so far */
	uint64_t rng;			/* splitmix64 state for fraction */
};

struct fault {
	struct backend *self;		/* the filter; its inner is below */

	GMutex lock;
	GArray *rules;			/* of fault_rule_state; by lock */
	struct fault_stats stats;	/* by lock, except ops: */
	_Atomic uint64_t ops[FAULT_KIND_NR];	/* ops seen (atomic: counted
						 * without the lock when there
						 * is no rule) */
	atomic_uint nr_rules;		/* rules->len, written under lock */

	GMutex delay_lock;
	GCond delay_cond;
	GQueue delayed;			/* fault_req, ascending due; by
					 * delay_lock */
	bool stopping;			/* by delay_lock */
	/* Started with the first rule that has a latency (before that rule
	 * is in rules, so any delayed request finds it running): a node
	 * without delay rules costs no thread.  Set under lock. */
	GThread *delay_thread;
};

/* An asynchronous request held back by latency: a read or write (orig),
 * or a blocking op run once due (op). */
struct fault_req {
	struct kiocb iocb;		/* what the inner backend sees */
	struct kiocb *orig;		/* the caller's, or NULL for op */
	struct fault_op *op;		/* the caller's, or NULL for orig */
	struct fault *f;
	unsigned int latency_us;
	ssize_t res;			/* the result to deliver */
	gint64 due;			/* monotonic time to deliver at */
	GList link;			/* in f->delayed */
};

/* What the rules decided for one op. */
struct fault_verdict {
	int error;			/* positive errno, 0 = pass */
	unsigned int latency_us;
};

/* The fault filter in b's stack, or NULL. */
static struct fault *fault_of(struct backend *b)
{
	struct backend *f = backend_find_filter(b, &fault_backend_ops);

	return f ? f->priv : NULL;
}

static uint64_t fault_rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* True if [pos, pos + len) touches the rule's range (or it has none). */
static bool fault_rule_touches(const struct fault_rule *r, uint64_t pos,
			       uint64_t len)
{
	uint64_t r_end, end;

	if (!r->range_len)
		return true;
	r_end = r->range_start + r->range_len;
	if (r_end < r->range_start)
		r_end = UINT64_MAX;
	end = pos + (len ? len : 1);
	if (end < pos)
		end = UINT64_MAX;
	return pos < r_end && r->range_start < end;
}

/* True if the rule picks this matching op (its seen already counts it). */
static bool fault_rule_picks(struct fault_rule_state *rs)
{
	const struct fault_rule *r = &rs->rule;
	bool picked = false;

	if (!r->nth && !r->every && r->fraction <= 0)
		return true;
	if (r->nth && rs->seen == r->nth)
		picked = true;
	if (r->every && rs->seen % r->every == 0)
		picked = true;
	if (r->fraction > 0) {
		double x = (double)(fault_rng_next(&rs->rng) >> 11) * 0x1.0p-53;

		if (x < r->fraction)
			picked = true;
	}
	return picked;
}

/*
 * Run the rules over one op of kind (with a byte range when ranged) and
 * count it.  Any thread.
 */
static struct fault_verdict fault_decide(struct fault *f,
					 enum fault_op_kind kind, bool ranged,
					 uint64_t pos, uint64_t len)
{
	struct fault_verdict v = { 0, 0 };
	guint i;

	atomic_fetch_add_explicit(&f->ops[kind], 1, memory_order_relaxed);
	/* No rule: pass through without the lock (a filter stacked by
	 * -o fault, or whose rules were turned off). */
	if (atomic_load_explicit(&f->nr_rules, memory_order_acquire) == 0)
		return v;
	g_mutex_lock(&f->lock);
	for (i = 0; i < f->rules->len; i++) {
		struct fault_rule_state *rs =
			&g_array_index(f->rules, struct fault_rule_state, i);
		const struct fault_rule *r = &rs->rule;

		if (!(r->ops & FAULT_OP(kind)))
			continue;
		if (ranged && !fault_rule_touches(r, pos, len))
			continue;
		rs->seen++;
		v.latency_us += r->latency_us;
		if (fault_rule_picks(rs) && r->error && !v.error)
			v.error = r->error;
	}
	if (v.error)
		f->stats.injected[kind]++;
	if (v.latency_us)
		f->stats.delayed[kind]++;
	g_mutex_unlock(&f->lock);
	return v;
}

/* b, or what is below it when b is a fault filter. */
static struct backend *fault_unwrap(struct backend *b)
{
	return b->ops == &fault_backend_ops ? b->inner : b;
}

/* Run a blocking op on the inner backend(s): its result.  Any
 * thread. */
static ssize_t fault_op_run_inner(struct fault *f, const struct fault_op *op)
{
	struct backend *inner = f->self->inner;

	switch (op->kind) {
	case FAULT_KIND_FLUSH:
		return backend_flush(inner);
	case FAULT_KIND_DISCARD:
		return backend_discard(inner, op->pos, op->len);
	case FAULT_KIND_WRITE_ZEROES:
		return backend_write_zeroes(inner, op->pos, op->len);
	case FAULT_KIND_CLONE_RANGE:
		return backend_clone_range(fault_unwrap(op->src), op->src_pos,
					   inner, op->pos, op->len);
	default:
		return -EINVAL;
	}
}

/* A delayed blocking op is due: run it (unless the rules failed it) and
 * call its done.  Delay thread. */
static void fault_op_finish(struct fault *f, struct fault_req *req)
{
	ssize_t ret = req->res < 0 ? req->res : fault_op_run_inner(f, req->op);

	req->op->done(req->op, ret);
}

/* Deliver due requests' completions until stopped with nothing left. */
static gpointer fault_delay_thread(gpointer data)
{
	struct fault *f = data;

	g_mutex_lock(&f->delay_lock);
	for (;;) {
		GList *head = g_queue_peek_head_link(&f->delayed);
		struct fault_req *req;
		struct kiocb *orig;

		if (!head) {
			if (f->stopping)
				break;
			g_cond_wait(&f->delay_cond, &f->delay_lock);
			continue;
		}
		req = head->data;
		if (req->due > g_get_monotonic_time()) {
			g_cond_wait_until(&f->delay_cond, &f->delay_lock,
					  req->due);
			continue;
		}
		g_queue_unlink(&f->delayed, head);
		g_mutex_unlock(&f->delay_lock);
		orig = req->orig;
		if (req->op)
			fault_op_finish(f, req);
		else
			orig->ki_complete(orig, req->res);
		g_free(req);
		g_mutex_lock(&f->delay_lock);
	}
	g_mutex_unlock(&f->delay_lock);
	return NULL;
}

/* Queue req to complete with res after its latency.  Any thread. */
static void fault_delay(struct fault_req *req, ssize_t res)
{
	struct fault *f = req->f;
	GList *l;

	req->res = res;
	req->due = g_get_monotonic_time() + req->latency_us;
	req->link.data = req;
	g_mutex_lock(&f->delay_lock);
	/* Usually the latest due: look from the tail. */
	for (l = f->delayed.tail; l; l = l->prev)
		if (((struct fault_req *)l->data)->due <= req->due)
			break;
	if (l)
		g_queue_insert_after_link(&f->delayed, l, &req->link);
	else
		g_queue_push_head_link(&f->delayed, &req->link);
	g_cond_signal(&f->delay_cond);
	g_mutex_unlock(&f->delay_lock);
}

/* The inner backend finished a delayed request: hold it back.  Inner
 * completion thread. */
static void fault_inner_done(struct kiocb *iocb, ssize_t res)
{
	fault_delay(iocb->ki_private, res);
}

/* Open over b->inner (the core set it).  Control thread. */
static int fault_open(struct backend *b, const struct backend_open_args *args)
{
	struct fault *f;

	(void)args;
	f = g_new0(struct fault, 1);
	f->self = b;
	g_mutex_init(&f->lock);
	f->rules = g_array_new(FALSE, TRUE, sizeof(struct fault_rule_state));
	g_mutex_init(&f->delay_lock);
	g_cond_init(&f->delay_cond);
	g_queue_init(&f->delayed);
	b->priv = f;
	return 0;
}

/* Start the delay thread if it is not running: 0 or -EAGAIN (logged).
 * Under f->lock. */
static int fault_start_delay_thread(struct fault *f)
{
	GError *err = NULL;

	if (f->delay_thread)
		return 0;
	f->delay_thread = g_thread_try_new("fault-delay", fault_delay_thread,
					   f, &err);
	if (!f->delay_thread) {
		g_warning("fault: cannot start the delay thread: %s",
			  err->message);
		g_error_free(err);
		return -EAGAIN;
	}
	return 0;
}

/* Stop the delay thread (the core closes inner after).  Control thread,
 * nothing in flight. */
static void fault_close(struct backend *b)
{
	struct fault *f = b->priv;

	g_mutex_lock(&f->delay_lock);
	f->stopping = true;
	g_cond_signal(&f->delay_cond);
	g_mutex_unlock(&f->delay_lock);
	if (f->delay_thread)
		g_thread_join(f->delay_thread);
	g_assert(g_queue_is_empty(&f->delayed));
	g_array_free(f->rules, TRUE);
	g_mutex_clear(&f->lock);
	g_mutex_clear(&f->delay_lock);
	g_cond_clear(&f->delay_cond);
	g_free(f);
	b->priv = NULL;
}

/*
 * Forward a read or write, failing or delaying it as the rules say.  Any
 * thread; an asynchronous kiocb is never slept on.
 */
static ssize_t fault_direct_IO_bvec(struct backend *b, struct kiocb *iocb)
{
	struct fault *f = b->priv;
	enum fault_op_kind kind = iocb->ki_rw == DIOLOOP_WRITE ?
				  FAULT_KIND_WRITE : FAULT_KIND_READ;
	struct fault_verdict v = fault_decide(f, kind, true, iocb->ki_pos,
					      iov_iter_count(iocb->ki_iter));
	struct fault_req *req;
	ssize_t ret;

	if (!v.latency_us || is_sync_kiocb(iocb)) {
		if (v.latency_us)
			g_usleep(v.latency_us);
		if (v.error)
			return -v.error;
		return backend_direct_IO_bvec(b->inner, iocb);
	}

	req = g_new0(struct fault_req, 1);
	req->orig = iocb;
	req->f = f;
	req->latency_us = v.latency_us;
	if (v.error) {
		fault_delay(req, -v.error);
		return -EIOCBQUEUED;
	}
	req->iocb = *iocb;
	req->iocb.ki_complete = fault_inner_done;
	req->iocb.ki_private = req;
	ret = backend_direct_IO_bvec(b->inner, &req->iocb);
	/* On -EIOCBQUEUED req may already be on its way: hands off. */
	if (ret != -EIOCBQUEUED)
		fault_delay(req, ret);
	return -EIOCBQUEUED;
}

/* Run a blocking op on b, a stack without a fault filter. */
static ssize_t fault_op_run_on(struct backend *b, const struct fault_op *op)
{
	switch (op->kind) {
	case FAULT_KIND_FLUSH:
		return backend_flush(b);
	case FAULT_KIND_DISCARD:
		return backend_discard(b, op->pos, op->len);
	case FAULT_KIND_WRITE_ZEROES:
		return backend_write_zeroes(b, op->pos, op->len);
	case FAULT_KIND_CLONE_RANGE:
		return backend_clone_range(op->src, op->src_pos, b, op->pos,
					   op->len);
	default:
		return -EINVAL;
	}
}

/* Run or delay a blocking op (filter_fault.h).  Any thread; never sleeps. */
ssize_t fault_backend_submit_op(struct backend *b, struct fault_op *op)
{
	struct fault *f = fault_of(b);
	struct fault_verdict v;
	struct fault_req *req;

	if (op->kind != FAULT_KIND_FLUSH && op->kind != FAULT_KIND_DISCARD &&
	    op->kind != FAULT_KIND_WRITE_ZEROES &&
	    op->kind != FAULT_KIND_CLONE_RANGE)
		return -EINVAL;
	if (!f)
		return fault_op_run_on(b, op);
	v = fault_decide(f, op->kind, op->kind != FAULT_KIND_FLUSH, op->pos,
			 op->len);
	if (!v.latency_us)
		return v.error ? -v.error : fault_op_run_inner(f, op);
	req = g_new0(struct fault_req, 1);
	req->op = op;
	req->f = f;
	req->latency_us = v.latency_us;
	fault_delay(req, v.error ? -v.error : 0);
	return -EIOCBQUEUED;
}

/* Apply a verdict to a blocking op: sleep, then 0 or -error.  Worker
 * thread. */
static int fault_verdict_block(struct fault_verdict v)
{
	if (v.latency_us)
		g_usleep(v.latency_us);
	return v.error ? -v.error : 0;
}

/* Forward flush.  Worker thread. */
static int fault_flush(struct backend *b)
{
	struct fault *f = b->priv;
	int ret = fault_verdict_block(fault_decide(f, FAULT_KIND_FLUSH, false,
						   0, 0));

	return ret ? ret : backend_flush(b->inner);
}

/* Forward discard.  Worker thread. */
static int fault_discard(struct backend *b, uint64_t pos, uint64_t len)
{
	struct fault *f = b->priv;
	int ret = fault_verdict_block(fault_decide(f, FAULT_KIND_DISCARD, true,
						   pos, len));

	return ret ? ret : backend_discard(b->inner, pos, len);
}

/* Forward write_zeroes.  Worker thread. */
static int fault_write_zeroes(struct backend *b, uint64_t pos, uint64_t len)
{
	struct fault *f = b->priv;
	int ret = fault_verdict_block(fault_decide(f, FAULT_KIND_WRITE_ZEROES,
						   true, pos, len));

	return ret ? ret : backend_write_zeroes(b->inner, pos, len);
}

/* Forward resize.  Worker thread, no direct I/O in flight. */
static int fault_resize(struct backend *b, uint64_t size)
{
	struct fault *f = b->priv;
	int ret = fault_verdict_block(fault_decide(f, FAULT_KIND_RESIZE, false,
						   0, 0));

	return ret ? ret : backend_resize(b->inner, size);
}

/* Forward map.  Worker thread. */
static int fault_map(struct backend *b, uint64_t pos, uint64_t len,
		     struct backend_extent *ext)
{
	struct fault *f = b->priv;
	int ret = fault_verdict_block(fault_decide(f, FAULT_KIND_MAP, true,
						   pos, len));

	return ret ? ret : backend_map(b->inner, pos, len, ext);
}

/* Forward clone_range with the fault filter on either side (or both)
 * unwrapped; a fault destination's rules decide.  Worker thread. */
static ssize_t fault_clone_range(struct backend *src, uint64_t src_pos,
				 struct backend *dst, uint64_t dst_pos,
				 uint64_t len)
{
	int ret = 0;

	if (dst->ops == &fault_backend_ops)
		ret = fault_verdict_block(fault_decide(dst->priv,
						       FAULT_KIND_CLONE_RANGE,
						       true, dst_pos, len));
	if (ret)
		return ret;
	return backend_clone_range(fault_unwrap(src), src_pos,
				   fault_unwrap(dst), dst_pos, len);
}

const struct backend_ops fault_backend_ops = {
	.name = "fault",
	.is_filter = true,
	.open = fault_open,
	.close = fault_close,
	.direct_IO_bvec = fault_direct_IO_bvec,
	.flush = fault_flush,
	.discard = fault_discard,
	.write_zeroes = fault_write_zeroes,
	.resize = fault_resize,
	.map = fault_map,
	.clone_range = fault_clone_range,
};

int fault_filter_stack(struct backend *inner, struct backend **out)
{
	struct backend_open_args args = {
		.path = inner->path,
		.flags = inner->flags,
		.aio = inner->aio,
		.inner = inner,
	};

	return backend_open("fault", &args, out);
}

bool fault_filter_present(struct backend *b)
{
	return fault_of(b) != NULL;
}

int fault_backend_add_rule(struct backend *b, const struct fault_rule *r)
{
	struct fault *f = b ? fault_of(b) : NULL;
	struct fault_rule_state rs = { .rule = *r };

	if (!f)
		return -EINVAL;
	if (!r->ops || (r->ops & ~(unsigned int)FAULT_OP_ALL) ||
	    r->error < 0 || r->error > 4095 ||
	    isnan(r->fraction) || r->fraction < 0 || r->fraction > 1 ||
	    (!r->error && !r->latency_us))
		return -EINVAL;
	rs.rng = r->seed ? r->seed : 0x5eed5eed5eed5eedULL;
	g_mutex_lock(&f->lock);
	if (r->latency_us && fault_start_delay_thread(f) < 0) {
		g_mutex_unlock(&f->lock);
		return -EAGAIN;
	}
	g_array_append_val(f->rules, rs);
	atomic_store_explicit(&f->nr_rules, f->rules->len,
			      memory_order_release);
	g_mutex_unlock(&f->lock);
	return 0;
}

void fault_backend_clear(struct backend *b)
{
	struct fault *f = fault_of(b);

	if (!f)
		return;
	g_mutex_lock(&f->lock);
	g_array_set_size(f->rules, 0);
	atomic_store_explicit(&f->nr_rules, 0, memory_order_release);
	g_mutex_unlock(&f->lock);
}

unsigned int fault_backend_get_rules(struct backend *b,
				     struct fault_rule *rules,
				     unsigned int max)
{
	struct fault *f = fault_of(b);
	unsigned int i, n;

	if (!f)
		return 0;
	g_mutex_lock(&f->lock);
	n = f->rules->len;
	for (i = 0; i < n && i < max; i++)
		rules[i] = g_array_index(f->rules, struct fault_rule_state,
					 i).rule;
	g_mutex_unlock(&f->lock);
	return n;
}

void fault_backend_get_stats(struct backend *b, struct fault_stats *st)
{
	struct fault *f = fault_of(b);
	int k;

	memset(st, 0, sizeof(*st));
	if (!f)
		return;
	g_mutex_lock(&f->lock);
	*st = f->stats;
	g_mutex_unlock(&f->lock);
	for (k = 0; k < FAULT_KIND_NR; k++)
		st->ops[k] = atomic_load_explicit(&f->ops[k],
						  memory_order_relaxed);
}

void fault_backend_reset_stats(struct backend *b)
{
	struct fault *f = fault_of(b);
	int k;

	if (!f)
		return;
	g_mutex_lock(&f->lock);
	memset(&f->stats, 0, sizeof(f->stats));
	g_mutex_unlock(&f->lock);
	for (k = 0; k < FAULT_KIND_NR; k++)
		atomic_store_explicit(&f->ops[k], 0, memory_order_relaxed);
}
