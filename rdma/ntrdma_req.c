// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the requester side of an RC QP, sending (as rxe_req.c
 * in rxe): WQEs fetched from the SQ, checked and sent as segments and
 * requests. The answers and the completions are ntrdma_comp.c's.
 *
 * Send WQEs are copied out of the SQ ring into a kernel shadow (swq) before
 * anything in them is used, then checked: opcode, SGE count, lengths, every
 * lkey against the QP's PD with the access the operation needs and the
 * address range (overflow-checked). Each WQE is one message with its own
 * msn; SEND and WRITE payloads go out in segments straight from the MR
 * pages; READ and atomics are requests the responder answers.
 */

#include "ntrdma_ib.h"

/* ---- transmit: WQEs into requests ---- */

void req_release(struct ntrdma_swqe *w)
{
	u32 i;

	for (i = 0; i < w->nsge; i++)
		ntrdma_mr_put(w->sge[i].mr);
	w->nsge = 0;
	if (w->inv_mr)
		ntrdma_mr_put(w->inv_mr);
	w->inv_mr = NULL;
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

/* req_prepare(), then a UD or UC QP's own rules. */
static int req_prepare_qp(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int st = req_prepare(qp, w);

	if (!st && qp->ibqp.qp_type == IB_QPT_UD)
		st = ntrdma_ud_prepare(qp, w);
	/* UC: SENDs, WRITEs and local operations; nothing answered. */
	if (!st && qp->ibqp.qp_type == IB_QPT_UC && is_rd_atomic(w->w.opcode))
		st = IB_WC_LOC_QP_OP_ERR;
	return st;
}

/*
 * @w ends with error @status: it completes in its turn and the QP enters
 * ERR then; meanwhile no later WQE starts (its effects would be seen at
 * the peer while it completes here flushed).
 */
void req_error(struct ntrdma_qp *qp, struct ntrdma_swqe *w, int status)
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
 * RC only: a placement fails the sender on a bad key, where UC's responder
 * drops the message and the sender completes it as sent.
 */
static int req_place(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int rc;

	if (w->direct && w->sent == w->len)
		return 0;
	if (!w->direct && (!w->len || !req_all_done(qp) ||
			   qp->ibqp.qp_type != IB_QPT_RC))
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

/*
 * A SEND placed straight into the responder's receive WQE, which the
 * requester completed there itself: done, the responder never hears of it.
 * Only when every earlier WQE is done (the responder took their receives)
 * and nothing of it went the checked way.
 */
static int req_send_placed(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	int rc;

	if (w->sent || !req_all_done(qp))
		return -EAGAIN;
	rc = ntrdma_place_send(qp, w);
	if (rc)
		return rc;
	ntrdma_hw_add(qp, NTRDMA_HW_PLACED_SENDS, 1);
	w->done = true;
	req_skip(qp, w);
	return 0;
}

/*
 * LOCAL_INV of @key, or READ_WITH_INV's of its sink: the key stops working
 * at once; the WQE completes once no segment through it is copied any more
 * (those on the DMA channel finish first: -EINPROGRESS, the next pass
 * looks again). Else its status.
 */
int req_invalidate(struct ntrdma_qp *qp, struct ntrdma_swqe *w, u32 key)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);

	if (!w->inv_mr &&
	    ntrdma_mr_invalidate(nib, qp->ibqp.pd, key, &w->inv_mr))
		return IB_WC_LOC_QP_OP_ERR;
	if (w->inv_mr && !ntrdma_mr_idle(w->inv_mr))
		return -EINPROGRESS;
	return 0;
}

/*
 * BIND_MW: the window takes its new binding at once; the WQE completes
 * once no segment through the old one is copied any more (-EINPROGRESS
 * meanwhile, as for LOCAL_INV). Else its status.
 */
static int req_bind_mw(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	if (!w->inv_mr && ntrdma_mw_bind(qp, &w->w, &w->inv_mr))
		return IB_WC_MW_BIND_ERR;
	if (w->inv_mr && !ntrdma_mr_idle(w->inv_mr))
		return -EINPROGRESS;
	return 0;
}

/*
 * REG_MR, LOCAL_INV, BIND_MW: done now, in SQ order; never sent. 0, or
 * -EINPROGRESS when a LOCAL_INV or BIND_MW waits for the copies under way.
 */
static int req_local_op(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	int rc;

	if (w->w.opcode == IB_WR_REG_MR) {
		if (ntrdma_mr_fast_reg(nib, (struct ntrdma_mr *)(uintptr_t)
				       w->w.remote_addr, qp->ibqp.pd,
				       w->w.rkey, (int)w->w.compare_add))
			req_error(qp, w, IB_WC_LOC_QP_OP_ERR);
		goto done;
	}
	if (w->w.opcode == IB_WR_BIND_MW)
		rc = req_bind_mw(qp, w);
	else
		rc = req_invalidate(qp, w, w->w.rkey);
	if (rc == -EINPROGRESS)
		return rc;
	if (rc)
		req_error(qp, w, rc);
done:
	w->done = true;
	req_skip(qp, w);
	return 0;
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
		return req_local_op(qp, w);
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
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		return req_send_placed(qp, w);
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
		if (w->sent < w->len && ntrdma_vx_tx_spent(qp))
			return -EINPROGRESS;	/* the next pass goes on */
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
	 * skips the doorbell while a WQE is outstanding (ntrdma-abi.h).
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
 * outstanding (ntrdma-abi.h): the kernel must look at prod again after it
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
 * limit is reached, an RNR wait runs or the pass's budget is spent (the
 * tx work makes the next pass: interrupts are off under sq_lock).
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
		if (ntrdma_vx_tx_spent(qp)) {
			ntrdma_vx_kick(qp);
			break;
		}
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
		if (rc == -EINPROGRESS) {
			ntrdma_vx_kick(qp);	/* the budget: the rest later */
			break;
		}
		if (rc == -ENOLINK) {
			/* The flush of a session's end follows, or the data
			 * path of one that began starts and wakes us.
			 */
			ntrdma_vx_wait_space(qp);
			break;
		}
		if (rc) {
			/* -EPROTO: the link-down flush follows. */
			if (rc != -EPROTO) {
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
 * Transmit for @qp: responses owed first, then requests, in a pass of at
 * most NTRDMA_TX_BUDGET (the tx work makes the next); the segments are
 * published (doorbell, DMA issue) once, at the end.
 */
void ntrdma_req_tx(struct ntrdma_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->tx_budget = NTRDMA_TX_BUDGET;
	if ((qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS ||
	     qp->state == IB_QPS_SQD || qp->resp_fatal) &&
	    !ntrdma_resp_tx(qp))
		req_tx(qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	ntrdma_vx_flush_tx(qp);
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
