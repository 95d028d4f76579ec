// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the requester side of an RC QP.
 *
 * Send WQEs are copied out of the SQ ring into a kernel shadow (swq) before
 * anything in them is used, then checked: opcode, SGE count, lengths, every
 * lkey against the QP's PD with the access the operation needs and the
 * address range (overflow-checked). Each WQE is one message with its own
 * msn; SEND and WRITE payloads go out in segments straight from the MR
 * pages; READ and atomics are requests the responder answers.
 *
 * Completions follow IB RC: in WQE order, a SEND/WRITE once acknowledged
 * (the responder placed it), a READ/atomic once its answer arrived. A NAK
 * completes its WQE with the responder's verdict and the QP enters ERR; an
 * RNR NAK rewinds to that WQE and retries after the responder's RNR timer,
 * rnr_retry times (7: for ever). The transport below is reliable and in
 * order and link loss flushes, so the only retries are IB's for a peer
 * that takes nothing: a NO_QP NAK (no such QP, or not in RTR/RTS yet) is
 * resent an ACK timeout later, and the local ACK timer fails the oldest
 * WQE with RETRY_EXC_ERR after retry_cnt periods without progress.
 */

#include <linux/jiffies.h>
#include <linux/timer.h>

#include "ntrdma_ib.h"

/* IB RNR timer encoding (min_rnr_timer) in microseconds. */
static const u32 ntrdma_rnr_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/* ---- transmit: WQEs into requests ---- */

static struct ntrdma_swqe *swqe(struct ntrdma_qp *qp, u32 idx)
{
	return &qp->swq[idx & (qp->sq.entries - 1)];
}

static bool is_rd_atomic(u32 opcode)
{
	return opcode == IB_WR_RDMA_READ ||
	       opcode == IB_WR_RDMA_READ_WITH_INV ||
	       opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IB_WR_ATOMIC_FETCH_AND_ADD;
}

static enum ib_wc_opcode wc_opcode(u32 opcode)
{
	switch (opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		return IB_WC_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_BIND_MW:
		return IB_WC_BIND_MW;
	default:
		return IB_WC_SEND;
	}
}

static void req_release(struct ntrdma_swqe *w)
{
	u32 i;

	for (i = 0; i < w->nsge; i++)
		ntrdma_mr_put(w->sge[i].mr);
	w->nsge = 0;
}

/*
 * A READ's sink goes with the READ: freed once all of its data arrived,
 * else held until the peer can no longer write it (ntrdma_place_sink.c).
 */
static void req_drop_sink(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	if (!w->sink)
		return;
	ntrdma_sink_release(to_nib(qp->ibqp.device), w->sink,
			    w->rcvd == w->len);
	w->sink = NULL;
}

/* Where the payload resumes after @n more bytes. */
static void sge_advance(const struct ntrdma_rsge *sg, u32 nsg, u32 *i,
			u32 *off, u32 n)
{
	while (n && *i < nsg) {
		u32 step = min(n, sg[*i].len - *off);

		*off += step;
		n -= step;
		if (*off == sg[*i].len) {
			(*i)++;
			*off = 0;
		}
	}
}

/*
 * Take the MRs of the WQE's SGEs, each with @access over its range, and
 * add up their lengths in @len: 0 or the completion status it fails with.
 */
static int req_take_sges(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
			 int access, u64 *len)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	const struct ntrdma_send_wqe *q = &w->w;
	struct ntrdma_mr *mr;
	u32 i;

	*len = 0;
	if (q->num_sge > qp->cap.max_send_sge)
		return IB_WC_LOC_LEN_ERR;
	for (i = 0; i < q->num_sge; i++) {
		const struct ntrdma_sge *s = &q->sge[i];

		if (!s->length)
			continue;
		*len += s->length;
		if (*len > NTRDMA_VX_MAX_MSG)
			return IB_WC_LOC_LEN_ERR;
		mr = ntrdma_mr_get(nib, s->lkey, qp->ibqp.pd, access);
		if (!mr)
			return IB_WC_LOC_PROT_ERR;
		w->sge[w->nsge].mr = mr;
		w->sge[w->nsge].addr = s->addr;
		w->sge[w->nsge].len = s->length;
		w->nsge++;
		if (ntrdma_mr_check(mr, s->addr, s->length))
			return IB_WC_LOC_PROT_ERR;
	}
	return 0;
}

/*
 * Check a WQE just copied out of the ring and take its local MRs. Returns
 * 0 or the completion status it fails with.
 */
static int req_prepare(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	const struct ntrdma_send_wqe *q = &w->w;
	int access = 0, st;
	u64 len;

	w->nsge = 0;
	if (q->opcode == IB_WR_RDMA_READ_WITH_INV) {
		/* A READ whose sink MR is invalidated as it completes. */
		if (qp->user)
			return IB_WC_LOC_QP_OP_ERR;
		w->w.opcode = IB_WR_RDMA_READ;
		w->inv_local = true;
	}
	switch (q->opcode) {
	case IB_WR_REG_MR:
		/* Local operations, done in SQ order: REG_MR for kernel QPs,
		 * BIND_MW for user QPs, LOCAL_INV for both.
		 */
		if (qp->user)
			return IB_WC_LOC_QP_OP_ERR;
		fallthrough;
	case IB_WR_LOCAL_INV:
		w->len = 0;
		return 0;
	case IB_WR_BIND_MW:
		if (!qp->user)
			return IB_WC_LOC_QP_OP_ERR;
		w->len = 0;
		return 0;
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_SEND_WITH_INV:
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		break;
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		if (q->flags & IB_SEND_INLINE)
			return IB_WC_LOC_QP_OP_ERR;
		access = IB_ACCESS_LOCAL_WRITE;
		break;
	default:
		return IB_WC_LOC_QP_OP_ERR;
	}
	if (q->flags & IB_SEND_INLINE) {
		if (q->inline_len > qp->cap.max_inline_data ||
		    q->inline_len > NTRDMA_MAX_INLINE)
			return IB_WC_LOC_LEN_ERR;
		w->len = q->inline_len;
		return 0;
	}
	st = req_take_sges(qp, w, access, &len);
	if (st)
		return st;
	if ((q->opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
	     q->opcode == IB_WR_ATOMIC_FETCH_AND_ADD) && len < 8)
		return IB_WC_LOC_LEN_ERR;
	w->len = len;
	return 0;
}

/* req_prepare(), then a UD QP's own rules. */
static int req_prepare_qp(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int st = req_prepare(qp, w);

	if (!st && qp->ibqp.qp_type == IB_QPT_UD)
		st = ntrdma_ud_prepare(qp, w);
	return st;
}

/* READ_WITH_INV: its sink MR stops working once the data is in. */
static int req_invalidate_sink(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	if (ntrdma_mr_local_inv(to_nib(qp->ibqp.device), qp->ibqp.pd,
				w->w.imm_data))
		return IB_WC_LOC_QP_OP_ERR;
	return 0;
}

/*
 * @w ends with error @status: it completes in its turn and the QP enters
 * ERR then; meanwhile no later WQE starts (its effects would be seen at
 * the peer while it completes here flushed).
 */
static void req_error(struct ntrdma_qp *qp, struct ntrdma_swqe *w, int status)
{
	w->status = status;
	if (!qp->req_failed ||
	    ntrdma_vx_msn_diff(w->msn, qp->req_fail_msn) < 0)
		qp->req_fail_msn = w->msn;
	qp->req_failed = true;
}

/* @w comes after a WQE that ended in error: it does not start. */
static bool req_after_error(struct ntrdma_qp *qp, const struct ntrdma_swqe *w)
{
	return qp->req_failed &&
	       ntrdma_vx_msn_diff(w->msn, qp->req_fail_msn) > 0;
}

/*
 * A WQE placed by the DMA channel is complete once its copies are: then
 * its source pages may be reused (a failed copy fails it).
 */
static bool req_placed(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	if (!ntrdma_vx_pool_wait(qp, w->seg_end))
		return false;
	if (!w->status && ntrdma_vx_place_failed(qp))
		req_error(qp, w, IB_WC_GENERAL_ERR);
	w->placing = false;
	return true;
}

/* Complete finished WQEs in order; false if the QP entered ERR. */
static bool req_complete(struct ntrdma_qp *qp)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&qp->sq);
	u32 cons = qp->sq.kpos;
	struct ntrdma_cqe e = {};
	struct ntrdma_swqe *w;
	bool sig;
	int st;

	while (cons != qp->sq_fetched) {
		w = swqe(qp, cons);
		if (!w->done && (qp->ibqp.qp_type != IB_QPT_UD ||
				 !ntrdma_ud_wqe_done(qp, w)))
			break;
		if (w->placing && !req_placed(qp, w))
			break;
		st = w->status;
		if (!st && w->inv_local)
			st = req_invalidate_sink(qp, w);
		sig = qp->sq_sig_type == IB_SIGNAL_ALL_WR ||
		      (w->w.flags & IB_SEND_SIGNALED);
		req_release(w);
		req_drop_sink(qp, w);
		cons++;
		qp->sq.kpos = cons;
		/* release: the slot (already copied) goes back to the user */
		smp_store_release(&ctl->cons, cons);
		if (sig || st) {
			e.wr_id = w->w.wr_id;
			e.status = st;
			e.opcode = wc_opcode(w->w.opcode);
			e.byte_len = w->len;
			e.qp_num = qp->ibqp.qp_num;
			ntrdma_qp_complete(qp, qp->ibqp.send_cq, &e, false);
		}
		if (st) {
			ntrdma_qp_error(qp, IB_EVENT_QP_FATAL);
			return false;
		}
	}
	ntrdma_qp_sq_drained(qp);
	return true;
}

/* The WQE at @idx fails with @status; an outstanding READ/atomic ends. */
static void req_fail(struct ntrdma_qp *qp, u32 idx, int status)
{
	struct ntrdma_swqe *w = swqe(qp, idx);

	if (is_rd_atomic(w->w.opcode) && w->started && !w->done)
		qp->rd_out--;
	req_error(qp, w, status);
	w->done = true;
	ibdev_info_ratelimited(qp->ibqp.device,
			       "QP %u: WQE %u (opcode %d) failed: %s\n",
			       qp->ibqp.qp_num, idx, w->w.opcode,
			       ib_wc_status_msg(status));
}

/*
 * The local ACK timeout: 4.096 us * 2^timeout as IB encodes it, at least
 * NTRDMA_ACK_MIN_MS (the spec's value is a minimum; the emulated link's
 * software path alone can take milliseconds).
 */
static unsigned long req_ack_period(struct ntrdma_qp *qp)
{
	return max(nsecs_to_jiffies(4096ULL << qp->timeout),
		   msecs_to_jiffies(NTRDMA_ACK_MIN_MS));
}

/* With WQEs outstanding and a timeout set, the ACK timer runs. */
static void req_arm_ack(struct ntrdma_qp *qp)
{
	if (qp->timeout && qp->sq.kpos != qp->sq_fetched &&
	    !timer_pending(&qp->ack_timer)) {
		qp->ack_seen = qp->ack_progress;
		mod_timer(&qp->ack_timer, jiffies + req_ack_period(qp));
	}
}

/*
 * A timeout period passed: progress since the last one restores the retry
 * count; none costs a retry; with none left the oldest WQE fails with
 * RETRY_EXC_ERR (the QP then enters ERR and flushes the rest). A period
 * spent in a deliberate wait (RNR, NO_QP retry) counts neither way.
 */
static void req_ack_expired(struct timer_list *t)
{
	struct ntrdma_qp *qp = from_timer(qp, t, ack_timer);
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	if ((qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) ||
	    qp->sq.kpos == qp->sq_fetched)
		goto out;
	if (qp->rnr_wait) {
		/* waiting on purpose (RNR, or a NO_QP retry): no verdict */
	} else if (qp->ack_progress != qp->ack_seen) {
		qp->retry_left = qp->retry_cnt;
	} else if (qp->retry_left) {
		qp->retry_left--;
	} else {
		ntrdma_hw_add(qp, NTRDMA_HW_ACK_TIMEOUTS, 1);
		req_fail(qp, qp->sq.kpos, IB_WC_RETRY_EXC_ERR);
		if (!req_complete(qp))
			goto out;
	}
	req_arm_ack(qp);
out:
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

/* Every WQE before sq_send is done (acknowledged, answered or placed). */
static bool req_all_done(struct ntrdma_qp *qp)
{
	u32 i = qp->place_scan;

	if ((u32)(i - qp->sq.kpos) > (u32)(qp->sq_send - qp->sq.kpos))
		i = qp->sq.kpos;
	while (i != qp->sq_send && swqe(qp, i)->done)
		i++;
	qp->place_scan = i;
	return i == qp->sq_send;
}

/*
 * A WRITE's payload placed straight into the target MR
 * (ntrdma_place_remote.c), in the TQP's order; only when every earlier WQE
 * is done, so the target has executed them all (IB RC order). 0: placed
 * (now or before); 1: failed half-way (the WQE completes with the error);
 * -EAGAIN: the checked path takes it; else the caller comes back later.
 */
static int req_place(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int rc;

	if (w->direct && w->sent == w->len)
		return 0;
	if (!w->direct && (!w->len || !req_all_done(qp)))
		return -EAGAIN;
	rc = ntrdma_place_write(qp, w);
	if (rc == -EACCES || rc == -EFAULT) {
		/* its export went away half-way: as a remote access error */
		req_error(qp, w, rc == -EACCES ? IB_WC_REM_ACCESS_ERR :
						 IB_WC_LOC_PROT_ERR);
		w->done = true;
		return 1;
	}
	if (!rc)
		ntrdma_hw_add(qp, NTRDMA_HW_PLACED_WRITES, 1);
	return rc;
}

/*
 * @w's msn never reaches the responder (a placed WRITE, a pulled READ, a
 * local operation): the next request's first segment says where the run
 * of such msns began, and the responder moves past them only from there.
 */
static void req_skip(struct ntrdma_qp *qp, const struct ntrdma_swqe *w)
{
	if (!qp->req_skipped)
		qp->req_skip_from = w->msn;
	qp->req_skipped = true;
}

/* A plain WRITE, placed, is complete: the responder never hears of it. */
static int req_write(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int rc = req_place(qp, w);

	if (!rc) {
		w->done = true;
		req_skip(qp, w);
	}
	return rc == 1 ? 0 : rc;
}

/* REG_MR, LOCAL_INV, BIND_MW: done now, in SQ order; never sent. */
static void req_local_op(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	int rc;

	if (w->w.opcode == IB_WR_BIND_MW) {
		if (ntrdma_mw_bind(qp, &w->w))
			req_error(qp, w, IB_WC_MW_BIND_ERR);
		goto done;
	}
	if (w->w.opcode == IB_WR_REG_MR)
		rc = ntrdma_mr_fast_reg(nib, (struct ntrdma_mr *)(uintptr_t)
					w->w.remote_addr, qp->ibqp.pd,
					w->w.rkey, (int)w->w.compare_add);
	else
		rc = ntrdma_mr_local_inv(nib, qp->ibqp.pd, w->w.rkey);
	if (rc)
		req_error(qp, w, IB_WC_LOC_QP_OP_ERR);
done:
	w->done = true;
	req_skip(qp, w);
}

/*
 * The flags of a message's first segment: FIRST, and SKIPPED (for good,
 * resends included) when msns before it never reach the responder.
 */
static u8 req_first_flags(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	/* not a resend from before the run (a rewind) */
	if (qp->req_skipped &&
	    ntrdma_vx_msn_diff(w->msn, qp->req_skip_from) > 0) {
		w->skipped = true;
		w->skip_lo = qp->req_skip_from;
		qp->req_skipped = false;
	}
	return NTRDMA_VX_FIRST | (w->skipped ? NTRDMA_VX_SKIPPED : 0);
}

/*
 * A small READ read straight from the target MR (ntrdma_place_remote.c),
 * when every earlier WQE is done (so the target executed the WRITEs before
 * it): then it is complete. -EAGAIN: the checked path takes it.
 */
static int req_pull(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int rc;

	if (!req_all_done(qp))
		return -EAGAIN;
	rc = ntrdma_pull_read(qp, w);
	if (rc == -EFAULT) {
		req_error(qp, w, IB_WC_LOC_PROT_ERR);
		rc = 0;
	}
	if (!rc) {
		w->rcvd = w->len;
		w->done = true;
		qp->rd_out--;
		req_skip(qp, w);
		ntrdma_hw_add(qp, NTRDMA_HW_PULLED_READS, 1);
	}
	return rc;
}

/*
 * What a WQE does without a message of its own: local operations, WRITEs
 * placed and small READs pulled directly. -EAGAIN: the message path takes
 * it (a WRITE_WITH_IMM placed here still sends its notice); else what
 * req_send_wqe() returns.
 */
static int req_direct(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int n;

	switch (w->w.opcode) {
	case IB_WR_REG_MR:
	case IB_WR_LOCAL_INV:
	case IB_WR_BIND_MW:
		req_local_op(qp, w);
		return 0;
	case IB_WR_RDMA_WRITE:
		return req_write(qp, w);
	case IB_WR_RDMA_WRITE_WITH_IMM:
		/* placed, the responder still takes a receive: a notice */
		n = req_place(qp, w);
		if (n == 1)
			return 0;
		return n ? n : -EAGAIN;
	case IB_WR_RDMA_READ:
		return req_pull(qp, w);
	default:
		return -EAGAIN;
	}
}

/*
 * A READ or atomic request: one segment, whose payload is the READ's sink
 * when the responder is to write the data straight into our pages (a
 * resent READ names the sink it named first: it may have been written).
 */
static int req_send_request(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
			    struct ntrdma_vx_hdr *h, u8 first)
{
	const void *sink = NULL;
	u32 sink_len = 0;

	switch (w->w.opcode) {
	case IB_WR_RDMA_READ:
		h->op = NTRDMA_VX_READ_REQ;
		if (!w->sink)
			w->sink = ntrdma_sink_build(qp, w);
		if (w->sink)
			sink = ntrdma_sink_wire(w->sink, &sink_len, &h->imm);
		break;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		h->flags = NTRDMA_VX_FADD;
		fallthrough;
	default:
		h->op = NTRDMA_VX_ATOMIC_REQ;
		h->total = 8;
		h->cmp_add = w->w.compare_add;
		h->swap = w->w.swap;
		break;
	}
	h->flags |= first | NTRDMA_VX_LAST;
	return ntrdma_vx_send(qp, h, sink, sink_len, NULL, 0, 0, 0) < 0 ?
	       -EAGAIN : 0;
}

/* The flags a SEND or WRITE carries in every segment. */
static void req_payload_flags(const struct ntrdma_swqe *w,
			      struct ntrdma_vx_hdr *h)
{
	if (w->w.opcode == IB_WR_SEND_WITH_IMM ||
	    w->w.opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		h->flags |= NTRDMA_VX_IMM;
	if (w->w.opcode == IB_WR_SEND_WITH_INV) {
		h->flags |= NTRDMA_VX_INV;
		h->rkey = w->w.imm_data;
	}
	if (w->w.flags & IB_SEND_SOLICITED)
		h->flags |= NTRDMA_VX_SOLICITED;
}

/* A SEND's or WRITE's segments from w->sent on: 0 when all are out. */
static int req_send_payload(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
			    struct ntrdma_vx_hdr *h, u8 first)
{
	u32 want;
	int n;

	if (w->direct) {	/* WRITE_WITH_IMM placed: its notice alone */
		h->flags |= first | NTRDMA_VX_LAST | NTRDMA_VX_PLACED;
		n = ntrdma_vx_send(qp, h, NULL, 0, NULL, 0, 0, 0);
		return n < 0 ? n : 0;
	}
	if (w->w.flags & IB_SEND_INLINE) {
		h->flags |= first;
		n = ntrdma_vx_send(qp, h, w->w.inline_data, w->len, NULL, 0,
				   0, 0);
		return n < 0 ? n : 0;
	}
	do {
		h->offset = w->sent;
		h->flags &= ~(NTRDMA_VX_FIRST | NTRDMA_VX_LAST |
			      NTRDMA_VX_SKIPPED);
		if (!w->sent)
			h->flags |= first;
		want = min_t(u32, w->len - w->sent,
			     NTRDMA_VX_BUF - sizeof(*h));
		n = ntrdma_vx_send(qp, h, NULL, 0, &w->sge[w->sge_i],
				   w->nsge - w->sge_i, w->sge_off, want);
		if (n < 0)
			return n;
		if (!n && want)
			return -EFAULT;
		w->sent += n;
		sge_advance(w->sge, w->nsge, &w->sge_i, &w->sge_off, n);
	} while (w->sent < w->len);
	return 0;
}

/* Send what the WQE at sq_send still has to send: 0 when all of it. */
static int req_send_wqe(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_vx_hdr h = {
		.src_qpn = qp->ibqp.qp_num,
		.dst_qpn = qp->dest_qp_num,
		.msn = w->msn,
		.total = w->len,
		.rkey = w->w.rkey,
		.imm = w->w.imm_data,
		.raddr = w->w.remote_addr,
	};
	u8 first;
	int n;

	if (qp->ibqp.qp_type == IB_QPT_UD)
		return ntrdma_ud_send_wqe(qp, w);
	n = req_direct(qp, w);
	if (n != -EAGAIN)
		return n;
	first = req_first_flags(qp, w);
	if (first & NTRDMA_VX_SKIPPED)
		h.skip_lo = w->skip_lo;
	switch (w->w.opcode) {
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return req_send_request(qp, w, &h, first);
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		h.op = NTRDMA_VX_WRITE;
		break;
	default:
		h.op = NTRDMA_VX_SEND;
		break;
	}
	req_payload_flags(w, &h);
	return req_send_payload(qp, w, &h, first);
}

/* Copy new WQEs out of the ring; -EINVAL if the user index is broken. */
static int req_fetch(struct ntrdma_qp *qp, u32 *prod_out)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&qp->sq);
	struct ntrdma_swqe *w;
	u32 prod;

	/*
	 * Our cons store (req_complete) before this prod load: the provider
	 * skips the doorbell while a WQE is outstanding (ntrdma_abi.h).
	 */
	smp_mb();
	/* acquire: the WQEs before the index that publishes them */
	prod = smp_load_acquire(&ctl->prod);

	if ((u32)(prod - qp->sq.kpos) > qp->sq.entries ||
	    (u32)(prod - qp->sq_fetched) > qp->sq.entries)
		return -EINVAL;
	while (qp->sq_fetched != prod) {
		w = swqe(qp, qp->sq_fetched);
		memset(w, 0, sizeof(*w));
		memcpy(&w->w, ntrdma_ring_slot(&qp->sq, qp->sq_fetched),
		       sizeof(w->w));
		w->msn = qp->req_msn;
		qp->req_msn = (qp->req_msn + 1) & NTRDMA_VX_MSN_MASK;
		qp->sq_fetched++;
	}
	*prod_out = prod;
	return 0;
}

/*
 * The provider rings no doorbell for a WQE it posts while an earlier one is
 * outstanding (ntrdma_abi.h): the kernel must look at prod again after it
 * completed WQEs. One posted after this pass's fetch, but seen by the
 * provider before our cons store, would wait for no one: run again.
 */
static void req_look_again(struct ntrdma_qp *qp)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&qp->sq);

	if (qp->state != IB_QPS_RTS)
		return;
	smp_mb(); /* our cons store (req_complete) before the prod load */
	if (READ_ONCE(ctl->prod) != qp->sq_fetched)
		ntrdma_vx_kick(qp);
}

/*
 * Requester transmit: start and continue WQEs in order until the SQ is
 * empty, the transport is full (waits for its wake-up), the READ/atomic
 * limit is reached or an RNR wait runs.
 */
static void req_tx(struct ntrdma_qp *qp)
{
	struct ntrdma_swqe *w;
	u32 prod, limit;
	int rc;

	lockdep_assert_held(&qp->sq_lock);
	if ((qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) ||
	    qp->rnr_wait)
		return;
	/* SQD: a WQE in progress finishes, no new one starts. */
	if (qp->state == IB_QPS_RTS && req_fetch(qp, &prod)) {
		ibdev_warn_ratelimited(qp->ibqp.device,
				       "QP %u: send queue index out of range\n",
				       qp->ibqp.qp_num);
		ntrdma_qp_error(qp, IB_EVENT_QP_FATAL);
		return;
	}
	limit = max_t(u32, qp->max_rd_atomic, 1);
	while (qp->sq_send != qp->sq_fetched) {
		w = swqe(qp, qp->sq_send);
		if (w->done) {
			/* ran before a rewind: a local operation, an error */
			qp->sq_send++;
			continue;
		}
		if (!w->started) {
			if (qp->state == IB_QPS_SQD || req_after_error(qp, w))
				break;
			if (is_rd_atomic(w->w.opcode) && qp->rd_out >= limit)
				break;
			rc = req_prepare_qp(qp, w);
			if (rc) {
				ntrdma_hw_add(qp, NTRDMA_HW_LOCAL_ERR, 1);
				/* Completes in order, then the QP fails. */
				req_error(qp, w, rc);
				w->out = true;
				w->done = true;
				qp->sq_send++;
				break;
			}
			w->started = true;
			if (is_rd_atomic(w->w.opcode))
				qp->rd_out++;
		}
		rc = req_send_wqe(qp, w);
		if (!rc)
			qp->ack_progress++;
		if (rc == -ENOSPC || rc == -EAGAIN) {
			ntrdma_vx_wait_space(qp);
			break;
		}
		if (rc == -EBUSY)
			break;	/* send_done kicks us */
		if (rc) {
			/* -ENOLINK, -EPROTO: the link-down flush follows. */
			if (rc != -ENOLINK && rc != -EPROTO) {
				req_error(qp, w, IB_WC_LOC_PROT_ERR);
				w->out = true;
				w->done = true;
				qp->sq_send++;
			}
			break;
		}
		w->out = true;
		qp->sq_send++;
		/*
		 * Its segments hold their own MR references until copied;
		 * a retry takes new ones. Only READ and atomics keep theirs
		 * for the answer.
		 */
		if (!is_rd_atomic(w->w.opcode))
			req_release(w);
	}
	if (req_complete(qp))
		req_arm_ack(qp);
	req_look_again(qp);
}

/*
 * Transmit for @qp: responses owed first, then requests; the segments are
 * published (doorbell, DMA issue) once, at the end.
 */
void ntrdma_req_tx(struct ntrdma_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	if ((qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS ||
	     qp->state == IB_QPS_SQD || qp->resp_fatal) &&
	    !ntrdma_resp_tx(qp))
		req_tx(qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	ntrdma_vx_flush_tx(qp);
}

static void req_rnr_expired(struct timer_list *t)
{
	struct ntrdma_qp *qp = from_timer(qp, t, rnr_timer);

	WRITE_ONCE(qp->rnr_wait, false);
	ntrdma_vx_kick(qp);
}

/* RTS entered (or RESET): the requester starts from sq_psn. */
void ntrdma_req_reset(struct ntrdma_qp *qp)
{
	qp->req_msn = qp->sq_psn & NTRDMA_VX_MSN_MASK;
	qp->req_skipped = false;
	qp->req_failed = false;
	qp->place_scan = qp->sq.kpos;
	qp->retry_left = qp->retry_cnt;
	qp->no_qp_left = qp->retry_cnt;
	qp->rnr_left = qp->rnr_retry;
	qp->rnr_wait = false;
	qp->rd_out = 0;
	if (qp->seg_pool)
		WRITE_ONCE(qp->seg_pool->place_failed, false);
}

/* A WQE has started to go out but not all of it has (SQD waits for it). */
bool ntrdma_req_in_progress(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	return qp->sq_send != qp->sq_fetched &&
	       swqe(qp, qp->sq_send)->started;
}

void ntrdma_req_init(struct ntrdma_qp *qp)
{
	timer_setup(&qp->rnr_timer, req_rnr_expired, 0);
	timer_setup(&qp->ack_timer, req_ack_expired, 0);
}

/* ---- receive: the responder's answers ---- */

/* SEND/WRITE WQEs before @end are acknowledged by a later answer. */
static void req_ack_before(struct ntrdma_qp *qp, u32 end)
{
	struct ntrdma_swqe *w;
	u32 i;

	for (i = qp->sq.kpos; i != end; i++) {
		w = swqe(qp, i);
		if (w->out && !is_rd_atomic(w->w.opcode))
			w->done = true;
	}
}

/* Send the WQE at @idx (and all after it) again after @delay jiffies. */
static void req_rewind(struct ntrdma_qp *qp, u32 idx, unsigned long delay)
{
	struct ntrdma_swqe *w;
	u32 i;

	for (i = idx; i != qp->sq_fetched; i++) {
		w = swqe(qp, i);
		/* a local operation ran once: not again */
		if (!w->started || w->done)
			continue;
		if (is_rd_atomic(w->w.opcode) && !w->done)
			qp->rd_out--;
		w->started = false;
		w->out = false;
		w->sent = 0;
		w->sge_i = 0;
		w->sge_off = 0;
		w->rcvd = 0;
		req_release(w);
	}
	qp->sq_send = idx;
	qp->rnr_wait = true;
	mod_timer(&qp->rnr_timer, jiffies + max(1UL, delay));
}

/* An RNR NAK for the WQE at @idx: rnr_retry times (7: for ever) again. */
static void req_rnr(struct ntrdma_qp *qp, u32 idx, u8 timer)
{
	qp->rnr_naks++;
	if (qp->rnr_retry != 7) {
		if (!qp->rnr_left) {
			req_fail(qp, idx, IB_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		qp->rnr_left--;
	}
	req_rewind(qp, idx, usecs_to_jiffies(ntrdma_rnr_us[timer & 31]));
}

/*
 * The peer has no QP to take the WQE at @idx (none with that number, or
 * not in RTR/RTS yet): as a packet IB drops, it is sent again after the
 * ACK timeout, and fails with RETRY_EXC_ERR once retry_cnt retries are
 * spent (timeout 0: retried for ever, as IB does).
 */
static void req_no_qp(struct ntrdma_qp *qp, u32 idx)
{
	if (qp->timeout) {
		if (!qp->no_qp_left) {
			req_fail(qp, idx, IB_WC_RETRY_EXC_ERR);
			return;
		}
		qp->no_qp_left--;
	}
	req_rewind(qp, idx, req_ack_period(qp));
}

static int syn_status(u8 syn)
{
	switch (syn) {
	case NTRDMA_VX_SYN_ACCESS:
		return IB_WC_REM_ACCESS_ERR;
	case NTRDMA_VX_SYN_INV_REQ:
		return IB_WC_REM_INV_REQ_ERR;
	default:
		return IB_WC_REM_OP_ERR;
	}
}

/*
 * An answer from the responder (ACK/NAK, READ or atomic response), in the
 * rx work. Everything in it is checked against our own WQEs first.
 */
/*
 * The index of the WQE @h answers, or -1: only a WQE that went out (at
 * least started) and is not done yet can be answered.
 */
static s64 req_rx_wqe(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	struct ntrdma_swqe *w;
	u32 cons = qp->sq.kpos;
	int d;

	if ((qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) ||
	    h->src_qpn != qp->dest_qp_num || cons == qp->sq_fetched)
		return -1;
	d = ntrdma_vx_msn_diff(h->msn, swqe(qp, cons)->msn);
	if (d < 0 || (u32)d >= (u32)(qp->sq_send - cons) + 1 ||
	    (u32)d >= (u32)(qp->sq_fetched - cons))
		return -1;
	w = swqe(qp, cons + d);
	if (!w->started || w->done)
		return -1;
	return cons + d;
}

/* An ACK or NAK for the WQE at @idx: 0, or -EINVAL to drop it. */
static int req_rx_ack(struct ntrdma_qp *qp, struct ntrdma_swqe *w, u32 idx,
		      const struct ntrdma_vx_hdr *h)
{
	if (h->syndrome == NTRDMA_VX_SYN_OK) {
		if (!w->out || is_rd_atomic(w->w.opcode))
			return -EINVAL;
		req_ack_before(qp, idx + 1);
		qp->rnr_left = qp->rnr_retry;
		return 0;
	}
	ntrdma_hw_add(qp, h->syndrome == NTRDMA_VX_SYN_RNR ?
		      NTRDMA_HW_RNR_NAK_RCVD : NTRDMA_HW_NAK_RCVD, 1);
	req_ack_before(qp, idx);
	if (h->syndrome == NTRDMA_VX_SYN_RNR)
		req_rnr(qp, idx, h->rnr_timer);
	else if (h->syndrome == NTRDMA_VX_SYN_NO_QP)
		req_no_qp(qp, idx);
	else
		req_fail(qp, idx, syn_status(h->syndrome));
	return 0;
}

/* A READ's data, in order, into its SGEs: 0, or -EINVAL to drop it. */
static int req_rx_read_resp(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
			    u32 idx, const struct ntrdma_vx_hdr *h,
			    const void *payload, u32 len)
{
	if (w->w.opcode != IB_WR_RDMA_READ || h->total != w->len ||
	    h->offset != w->rcvd)
		return -EINVAL;
	if (h->flags & NTRDMA_VX_PLACED) {
		/* all of it is in the sink we named, before this notice */
		if (!w->sink || w->rcvd)
			return -EINVAL;
		req_ack_before(qp, idx);
		w->rcvd = w->len;
		w->done = true;
		qp->rd_out--;
		ntrdma_hw_add(qp, NTRDMA_HW_PUSHED_READS, 1);
		return 0;
	}
	req_ack_before(qp, idx);
	if (ntrdma_rsge_scatter(w->sge, w->nsge, h->offset, payload, len)) {
		req_error(qp, w, IB_WC_LOC_PROT_ERR);
		w->done = true;
		qp->rd_out--;
		return 0;
	}
	w->rcvd += len;
	if (w->rcvd == w->len) {
		w->done = true;
		qp->rd_out--;
	}
	return 0;
}

/* An atomic's original value: 0, or -EINVAL to drop it. */
static int req_rx_atomic_resp(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
			      u32 idx, const struct ntrdma_vx_hdr *h)
{
	if (w->w.opcode != IB_WR_ATOMIC_CMP_AND_SWP &&
	    w->w.opcode != IB_WR_ATOMIC_FETCH_AND_ADD)
		return -EINVAL;
	req_ack_before(qp, idx);
	if (ntrdma_rsge_scatter(w->sge, w->nsge, 0, &h->cmp_add, 8))
		req_error(qp, w, IB_WC_LOC_PROT_ERR);
	w->done = true;
	qp->rd_out--;
	return 0;
}

void ntrdma_req_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		   const void *payload, u32 len)
{
	struct ntrdma_swqe *w;
	unsigned long flags;
	s64 idx;
	int rc;

	spin_lock_irqsave(&qp->sq_lock, flags);
	idx = req_rx_wqe(qp, h);
	if (idx < 0)
		goto drop;
	w = swqe(qp, idx);
	qp->rx_msgs++;
	qp->ack_progress++;
	if (h->op != NTRDMA_VX_ACK || h->syndrome != NTRDMA_VX_SYN_NO_QP)
		qp->no_qp_left = qp->retry_cnt;	/* the peer QP answers */
	switch (h->op) {
	case NTRDMA_VX_ACK:
		rc = req_rx_ack(qp, w, idx, h);
		break;
	case NTRDMA_VX_READ_RESP:
		rc = req_rx_read_resp(qp, w, idx, h, payload, len);
		break;
	case NTRDMA_VX_ATOMIC_RESP:
		rc = req_rx_atomic_resp(qp, w, idx, h);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc)
		goto drop;
	/*
	 * More requests leave at the end of the receive pass
	 * (ntrdma_transport.c).
	 */
	req_complete(qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return;
drop:
	ntrdma_hw_add(qp, NTRDMA_HW_RX_DROPPED, 1);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

/*
 * The QP entered ERR (or RESET with @post false): every WQE the data path
 * holds completes, its own error status or IB_WC_WR_FLUSH_ERR, oldest
 * first; its MR references go. The ring's unfetched WQEs are flushed by the
 * caller.
 */
void ntrdma_req_flush(struct ntrdma_qp *qp, bool post)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&qp->sq);
	struct ntrdma_cqe e = {};
	struct ntrdma_swqe *w;
	u32 cons = qp->sq.kpos;

	lockdep_assert_held(&qp->sq_lock);
	for (; cons != qp->sq_fetched; cons++) {
		w = swqe(qp, cons);
		req_release(w);
		req_drop_sink(qp, w);
		if (!post)
			continue;
		e.wr_id = w->w.wr_id;
		e.status = w->done && w->status ? w->status : IB_WC_WR_FLUSH_ERR;
		e.opcode = wc_opcode(w->w.opcode);
		e.byte_len = 0;
		e.qp_num = qp->ibqp.qp_num;
		ntrdma_qp_complete(qp, qp->ibqp.send_cq, &e, false);
	}
	qp->sq.kpos = cons;
	/* release: the slots (already copied) go back to the user */
	smp_store_release(&ctl->cons, cons);
	qp->sq_send = qp->sq_fetched;
	qp->rd_out = 0;
	qp->rnr_wait = false;
}
