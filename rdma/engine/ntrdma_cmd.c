// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA command channel: requests to the peer and their responses, for
 * creating and destroying the peer's mirrors of our resources (and later
 * connection messages).
 *
 * A request goes into slot seq % NTRDMA_CMD_RING of the peer's inbox, then
 * the request producer index, then the CMD doorbell. The peer handles
 * requests in order in process context (handlers may sleep) and answers each
 * in the same slot of our response ring, then our response producer index,
 * then our CMD doorbell. At most NTRDMA_CMD_RING requests are outstanding;
 * a caller waits for a free slot, then for its response, each bounded by its
 * timeout. When the link session ends, every waiting caller returns
 * -ENOLINK at once. A timed-out request keeps its slot until its response
 * arrives (and is ignored) or the session ends. An answered request keeps
 * its waiter until its caller took the outcome: a later request in the same
 * slot would reset the waiter under it.
 */

#include <linux/io.h>
#include <linux/jiffies.h>
#include <linux/nospec.h>
#include <linux/slab.h>

#include "ntrdma_priv.h"

static void cmd_vdb(struct ntrdma_dev *ndev, void *ctx);
static void cmd_work(struct work_struct *work);

static int cmd_echo(void *ctx, const void *req, u16 len, void *rsp,
		    u16 *rsp_len)
{
	*rsp_len = min_t(u16, len, NTRDMA_RSP_DATA);
	memcpy(rsp, req, *rsp_len);
	return 0;
}

/* Diagnostics: answer after a delay (bounded), to test timeouts. */
static int cmd_delay(void *ctx, const void *req, u16 len, void *rsp,
		     u16 *rsp_len)
{
	struct ntrdma_dev *ndev = ctx;
	u32 ms;

	if (len != sizeof(ms))
		return -EINVAL;
	memcpy(&ms, req, sizeof(ms));
	if (ms > NTRDMA_CMD_DELAY_MAX_MS)
		return -ERANGE;
	/*
	 * Cut short when the session ends: stop() waits for handlers. One
	 * tick more, as the current one is partly gone: at least @ms.
	 */
	wait_event_timeout(ndev->cmd.credit_wait, !READ_ONCE(ndev->cmd.active),
			   msecs_to_jiffies(ms) + 1);
	*rsp_len = 0;
	return 0;
}

int ntrdma_cmd_init(struct ntrdma_dev *ndev)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	int i;

	spin_lock_init(&c->lock);
	init_waitqueue_head(&c->credit_wait);
	INIT_WORK(&c->work, cmd_work);
	for (i = 0; i < NTRDMA_CMD_RING; i++)
		init_completion(&c->w[i].done);
	c->fn[NTRDMA_CMD_ECHO] = cmd_echo;
	c->fn[NTRDMA_CMD_DELAY] = cmd_delay;
	c->fn_ctx[NTRDMA_CMD_DELAY] = ndev;
	c->wq = alloc_workqueue("%s-cmd", WQ_MEM_RECLAIM | WQ_UNBOUND, 1,
				ndev->name);
	if (!c->wq)
		return -ENOMEM;
	if (ntrdma_vdb_register(ndev, NTRDMA_VDB_CMD, cmd_vdb, NULL, c)) {
		destroy_workqueue(c->wq);
		return -EBUSY;
	}
	return 0;
}

void ntrdma_cmd_fini(struct ntrdma_dev *ndev)
{
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_CMD);
	cancel_work_sync(&ndev->cmd.work);
	destroy_workqueue(ndev->cmd.wq);
}

/**
 * ntrdma_cmd_register() - handle the peer's requests of one op
 * @ndev: the device
 * @op: the op (enum ntrdma_cmd_op), below NTRDMA_CMD_OPS
 * @fn: the handler; runs in process context, one request at a time, in
 *	order; what it answers goes back to the peer
 * @ctx: handed to @fn
 *
 * Return: 0, -EINVAL for an op out of range, -EBUSY when it has a handler.
 */
int ntrdma_cmd_register(struct ntrdma_dev *ndev, u16 op, ntrdma_cmd_fn fn,
			void *ctx)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	unsigned long flags;
	int rc = 0;

	if (op >= NTRDMA_CMD_OPS)
		return -EINVAL;
	spin_lock_irqsave(&c->lock, flags);
	if (c->fn[op]) {
		rc = -EBUSY;
	} else {
		c->fn[op] = fn;
		c->fn_ctx[op] = ctx;
	}
	spin_unlock_irqrestore(&c->lock, flags);
	return rc;
}

/**
 * ntrdma_cmd_unregister() - stop handling an op
 * @ndev: the device
 * @op: what ntrdma_cmd_register() took
 *
 * Once it returns the handler is not running and will not run again; the
 * peer's later requests of @op are answered -EOPNOTSUPP. Sleeps.
 */
void ntrdma_cmd_unregister(struct ntrdma_dev *ndev, u16 op)
{
	unsigned long flags;

	if (op >= NTRDMA_CMD_OPS)
		return;
	spin_lock_irqsave(&ndev->cmd.lock, flags);
	ndev->cmd.fn[op] = NULL;
	spin_unlock_irqrestore(&ndev->cmd.lock, flags);
	flush_work(&ndev->cmd.work);
}

/* Link up: a new session. */
void ntrdma_cmd_start(struct ntrdma_dev *ndev)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	u32 base = ndev->epoch ^ ndev->peer_epoch;
	unsigned long flags;

	lockdep_assert_held(&ndev->link_lock);
	spin_lock_irqsave(&c->lock, flags);
	c->req_pos = base;
	c->rsp_cons = base;
	c->req_cons = base;
	/* The peer answers only requests of this session. */
	WRITE_ONCE(ndev->inbox->rsp_prod, base);
	c->active = true;
	spin_unlock_irqrestore(&c->lock, flags);
	/* A request may have come before we were up. */
	queue_work(c->wq, &c->work);
}

/* Link down: every waiting caller returns -ENOLINK (may sleep). */
void ntrdma_cmd_stop(struct ntrdma_dev *ndev)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	struct ntrdma_cmd_waiter *w;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&c->lock, flags);
	c->active = false;
	for (i = 0; i < NTRDMA_CMD_RING; i++) {
		w = &c->w[i];
		if (!w->busy)
			continue;
		w->busy = false;
		if (w->held) {	/* its caller still waits */
			w->status = -ENOLINK;
			complete(&w->done);
		}
	}
	spin_unlock_irqrestore(&c->lock, flags);
	wake_up_all(&c->credit_wait);
	cancel_work_sync(&c->work);
}

/* Responses (hard interrupt context): complete the waiting callers. */
static void cmd_responses(struct ntrdma_dev *ndev)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	struct ntrdma_wire_rsp r;
	struct ntrdma_cmd_waiter *w;
	unsigned long flags;
	u32 prod, idx;

	spin_lock_irqsave(&c->lock, flags);
	if (!c->active)
		goto out;
	prod = READ_ONCE(ndev->inbox->rsp_prod);
	if (!ntrdma_ring_avail_ok(prod, c->rsp_cons, c->req_pos - c->rsp_cons)) {
		ntrdma_link_proto_error(ndev, "command response index out of range");
		goto out;
	}
	rmb(); /* the producer index before the responses */
	while (c->rsp_cons != prod) {
		idx = ntrdma_ring_idx(c->rsp_cons, NTRDMA_CMD_RING);
		memcpy(&r, &ndev->inbox->rsp[idx], sizeof(r));
		if (ntrdma_wire_check_rsp(&r, c->rsp_cons)) {
			ntrdma_link_proto_error(ndev, "bad command response");
			break;
		}
		w = &c->w[idx];
		c->rsp_cons++;
		if (!w->busy)
			continue;
		w->busy = false;
		if (!w->held)	/* its caller gave up waiting */
			continue;
		w->status = r.status;
		w->rsp_len = min_t(u16, r.len, w->rsp_cap);
		memcpy(w->rsp, r.data, w->rsp_len);
		complete(&w->done);
	}
	wake_up_all(&c->credit_wait);
out:
	spin_unlock_irqrestore(&c->lock, flags);
}

static void cmd_vdb(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_cmd *c = ctx;

	cmd_responses(ndev);
	queue_work(c->wq, &c->work);
}

/* The handler of the peer's op @op and its context in @ctx; NULL if none. */
static ntrdma_cmd_fn cmd_handler(struct ntrdma_cmd *c, u16 op, void **ctx)
{
	lockdep_assert_held(&c->lock);
	*ctx = NULL;
	if (op >= NTRDMA_CMD_OPS)
		return NULL;
	/* the peer's number: no load past the tables under speculation */
	op = array_index_nospec(op, NTRDMA_CMD_OPS);
	*ctx = c->fn_ctx[op];
	return c->fn[op];
}

/* Requests from the peer, in order, in process context. */
static void cmd_work(struct work_struct *work)
{
	struct ntrdma_cmd *c = container_of(work, struct ntrdma_cmd, work);
	struct ntrdma_dev *ndev = container_of(c, struct ntrdma_dev, cmd);
	struct ntrdma_inbox __iomem *pi;
	struct ntrdma_wire_cmd *req;
	struct ntrdma_wire_rsp rsp;
	unsigned long flags;
	ntrdma_cmd_fn fn;
	void *fn_ctx;
	u32 prod, cons;
	u16 rlen;

	req = kmalloc(sizeof(*req), GFP_KERNEL);
	if (!req) {
		queue_work(c->wq, &c->work);	/* try again */
		return;
	}
	for (;;) {
		spin_lock_irqsave(&c->lock, flags);
		pi = READ_ONCE(ndev->pinbox);
		cons = c->req_cons;
		if (!c->active || !pi) {
			spin_unlock_irqrestore(&c->lock, flags);
			break;
		}
		spin_unlock_irqrestore(&c->lock, flags);

		prod = READ_ONCE(ndev->inbox->cmd_prod);
		if (prod == cons)
			break;
		if (!ntrdma_ring_avail_ok(prod, cons, NTRDMA_CMD_RING)) {
			/* 0: the peer has not sent in this session yet. */
			if (prod)
				ntrdma_link_proto_error(ndev, "command index out of range");
			break;
		}
		rmb(); /* the producer index before the request */
		memcpy(req, &ndev->inbox->cmd[ntrdma_ring_idx(cons,
							      NTRDMA_CMD_RING)],
		       sizeof(*req));
		if (ntrdma_wire_check_cmd(req, cons)) {
			ntrdma_link_proto_error(ndev, "bad command");
			break;
		}
		memset(&rsp, 0, sizeof(rsp));
		rsp.seq = cons;
		rlen = 0;
		spin_lock_irqsave(&c->lock, flags);
		fn = cmd_handler(c, req->op, &fn_ctx);
		spin_unlock_irqrestore(&c->lock, flags);
		if (fn) {
			rsp.status = fn(fn_ctx, req->data, req->len, rsp.data,
					&rlen);
			if (rsp.status > 0 || rsp.status < -4095)
				rsp.status = -EIO;
			rsp.len = min_t(u16, rlen, NTRDMA_RSP_DATA);
		} else {
			rsp.status = -EOPNOTSUPP;
		}
		atomic64_inc(&ndev->stats.cmd_handled);

		spin_lock_irqsave(&c->lock, flags);
		/* The session may have ended while the handler ran. */
		if (c->active && c->req_cons == cons && ndev->pinbox == pi) {
			ntrdma_peer_copy(ndev,
					 &pi->rsp[ntrdma_ring_idx(cons,
							NTRDMA_CMD_RING)],
					 &rsp, sizeof(rsp));
			c->req_cons = cons + 1;
			wmb(); /* the response before its index */
			ntrdma_peer_w32(ndev, cons + 1, &pi->rsp_prod);
		}
		spin_unlock_irqrestore(&c->lock, flags);
		ntrdma_vdb_ring(ndev, NTRDMA_VDB_CMD);
	}
	kfree(req);
}

/* The next request's slot: free at the peer, its waiter's caller gone. */
static bool cmd_slot_free(struct ntrdma_cmd *c)
{
	u32 pos = READ_ONCE(c->req_pos);

	return (u32)(pos - READ_ONCE(c->rsp_cons)) < NTRDMA_CMD_RING &&
	       !READ_ONCE(c->w[ntrdma_ring_idx(pos, NTRDMA_CMD_RING)].held);
}

static bool cmd_room(struct ntrdma_cmd *c)
{
	return !READ_ONCE(c->active) || cmd_slot_free(c);
}

/* A free slot, or the deadline passed (-ETIMEDOUT) or a signal (-EINTR). */
static int cmd_wait_room(struct ntrdma_cmd *c, unsigned long deadline,
			 bool intr)
{
	long left = (long)deadline - (long)jiffies;

	if (left <= 0)
		return -ETIMEDOUT;
	if (intr)
		left = wait_event_interruptible_timeout(c->credit_wait,
							cmd_room(c), left);
	else
		left = wait_event_timeout(c->credit_wait, cmd_room(c), left);
	if (left > 0)
		return 0;
	return left < 0 ? -EINTR : -ETIMEDOUT;
}

/* The answer: > 0 when it came, 0 after the deadline, < 0 on a signal. */
static long cmd_wait_answer(struct ntrdma_cmd_waiter *w,
			    unsigned long deadline, bool intr)
{
	long left = max((long)deadline - (long)jiffies, 1L);

	if (intr)
		return wait_for_completion_interruptible_timeout(&w->done,
								 left);
	return wait_for_completion_timeout(&w->done, left);
}

/*
 * ntrdma_cmd_call(), into session @session only when it is not 0; @intr:
 * a signal cuts the waits short.
 */
static int cmd_call(struct ntrdma_dev *ndev, u32 session, u16 op,
		    const void *req, u16 len, void *rsp, u16 rsp_cap,
		    u16 *rsp_len, unsigned int timeout_ms, bool intr)
{
	struct ntrdma_cmd *c = &ndev->cmd;
	/* The current tick is partly gone: one more waits >= @timeout_ms. */
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms) + 1;
	struct ntrdma_inbox __iomem *pi;
	struct ntrdma_cmd_waiter *w;
	struct ntrdma_wire_cmd *m;
	unsigned long flags;
	long left;
	int rc;
	u32 seq;

	if (len > NTRDMA_CMD_DATA || (rsp_cap && !rsp))
		return -EINVAL;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->op = op;
	m->len = len;
	memcpy(m->data, req, len);

	/* A free slot: fewer than RING requests unanswered. */
	for (;;) {
		spin_lock_irqsave(&c->lock, flags);
		/* While active, ndev->session is the running session. */
		if (!c->active ||
		    (session && READ_ONCE(ndev->session) != session)) {
			rc = -ENOLINK;
			goto out_unlock;
		}
		/* Slots below rsp_cons are answered or cleared by stop. */
		if (cmd_slot_free(c))
			break;
		spin_unlock_irqrestore(&c->lock, flags);
		rc = cmd_wait_room(c, deadline, intr);
		if (rc) {
			kfree(m);
			return rc;
		}
	}
	pi = ndev->pinbox;
	seq = c->req_pos++;
	w = &c->w[ntrdma_ring_idx(seq, NTRDMA_CMD_RING)];
	w->busy = true;
	WRITE_ONCE(w->held, true);
	w->rsp = rsp;
	w->rsp_cap = rsp_cap;
	w->rsp_len = 0;
	reinit_completion(&w->done);
	m->seq = seq;
	ntrdma_peer_copy(ndev, &pi->cmd[ntrdma_ring_idx(seq, NTRDMA_CMD_RING)],
			 m, sizeof(*m));
	wmb(); /* the request before its index */
	ntrdma_peer_w32(ndev, seq + 1, &pi->cmd_prod);
	spin_unlock_irqrestore(&c->lock, flags);
	kfree(m);
	atomic64_inc(&ndev->stats.cmd_sent);
	ntrdma_vdb_ring(ndev, NTRDMA_VDB_CMD);

	left = cmd_wait_answer(w, deadline, intr);
	ntrdma_fault_pause(ndev, "cmd_answer");
	spin_lock_irqsave(&c->lock, flags);
	if (left > 0 || completion_done(&w->done)) {
		rc = w->status;
		if (rsp_len)
			*rsp_len = w->rsp_len;
	} else {
		/* Its slot stays taken until an answer or the session end. */
		rc = left < 0 ? -EINTR : -ETIMEDOUT;
		atomic64_inc(&ndev->stats.cmd_timeouts);
	}
	WRITE_ONCE(w->held, false);
	spin_unlock_irqrestore(&c->lock, flags);
	wake_up_all(&c->credit_wait);
	return rc;

out_unlock:
	spin_unlock_irqrestore(&c->lock, flags);
	kfree(m);
	return rc;
}

/**
 * ntrdma_cmd_call() - send a request to the peer and wait for its answer
 * @ndev: the device
 * @op: the request's op (enum ntrdma_cmd_op)
 * @req: the request's data
 * @len: its length, at most NTRDMA_CMD_DATA
 * @rsp: where the answer's data goes (may be NULL with @rsp_cap 0)
 * @rsp_cap: room at @rsp
 * @rsp_len: set to the answer's length when not NULL
 * @timeout_ms: how long to wait for the answer
 *
 * Process context; sleeps interruptibly.
 *
 * Return: the peer handler's status (0 or a negative errno), -ENOLINK when
 * there is no session or it ends before the answer, -ETIMEDOUT after
 * @timeout_ms, -EINTR on a signal, -EINVAL for bad arguments.
 */
int ntrdma_cmd_call(struct ntrdma_dev *ndev, u16 op, const void *req, u16 len,
		    void *rsp, u16 rsp_cap, u16 *rsp_len,
		    unsigned int timeout_ms)
{
	return cmd_call(ndev, 0, op, req, len, rsp, rsp_cap, rsp_len,
			timeout_ms, true);
}

/**
 * ntrdma_cmd_call_in() - ntrdma_cmd_call() into one session only
 * @ndev: the device
 * @session: the session (ntrdma_link_session()) the request must go to
 * @op: the request's op
 * @req: the request's data
 * @len: its length, at most NTRDMA_CMD_DATA
 * @timeout_ms: how long to wait for the answer (which has no data)
 * @flags: NTRDMA_CMD_NOINTR: signals do not cut the waits short (for a
 *	request that must reach the peer, a revocation: the wait is bounded
 *	by @timeout_ms all the same)
 *
 * For a request whose effect at the peer the caller records per session
 * (an export): it is never delivered into a later session than @session.
 *
 * Return: as ntrdma_cmd_call(); -ENOLINK also when another session runs;
 * never -EINTR with NTRDMA_CMD_NOINTR.
 */
int ntrdma_cmd_call_in(struct ntrdma_dev *ndev, u32 session, u16 op,
		       const void *req, u16 len, unsigned int timeout_ms,
		       unsigned int flags)
{
	if (!session)
		return -ENOLINK;
	return cmd_call(ndev, session, op, req, len, NULL, 0, NULL,
			timeout_ms, !(flags & NTRDMA_CMD_NOINTR));
}
