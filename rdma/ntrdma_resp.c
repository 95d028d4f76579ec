// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the responder side of an RC or UC QP.
 *
 * Segments from the peer's requester arrive in the verbs transport's rx
 * work. Messages are taken strictly in msn order; anything else (the rest
 * of a message we refused with RNR, what the requester had sent after it)
 * is dropped: the requester sends it again. Before any byte is placed:
 *  - SEND (and WRITE with immediate) take the next receive WQE of the RQ or
 *    SRQ, copied out of its ring, and check every SGE's lkey against the
 *    QP's PD with local write access and its range; none posted: RNR NAK.
 *  - WRITE, READ and atomics check the rkey (index and tag), the MR's PD
 *    against the QP's, the MR's and the QP's remote access flags and
 *    [raddr, raddr + length) inside the MR without overflow; atomics need
 *    8-byte alignment. A violation answers a NAK (remote access error or
 *    invalid request) and the QP enters ERR once the NAK is out.
 * Answers (ACKs, READ data, atomic results) leave in message order from the
 * QP's response queue; consecutive ACKs merge into one.
 * A UC QP takes SENDs and WRITEs only and never NAKs: what an RC QP refuses
 * it drops whole (IB UC), completing a receive WQE it took in error, and
 * stays as it is; the message's msn is acknowledged after its last segment
 * (our requester completes a message once acknowledged; UC has no retries,
 * so the sender sees it complete as sent).
 */

#include <linux/highmem.h>

#include "ntrdma_ib.h"

/* ---- receive: the requester's requests ---- */

/**
 * ntrdma_resp_release_rcv() - let go of the message being received
 * @qp: the QP (sq_lock held)
 *
 * The receive WQE's and the WRITE target's MR references go.
 */
void ntrdma_resp_release_rcv(struct ntrdma_qp *qp)
{
	u32 i;

	for (i = 0; i < qp->rcv.nsge; i++)
		ntrdma_mr_put(qp->rcv.sge[i].mr);
	qp->rcv.nsge = 0;
	qp->rcv_wqe = false;
	if (qp->wr_mr) {
		ntrdma_mr_put(qp->wr_mr);
		qp->wr_mr = NULL;
	}
	qp->rcv_busy = false;
}

/*
 * A new answer at the tail of the response queue; NULL (and the QP fails)
 * if the queue is full, which only a requester ignoring its limits makes.
 */
static struct ntrdma_rsp *resp_new(struct ntrdma_qp *qp,
				   enum ntrdma_rsp_kind kind, u32 msn)
{
	struct ntrdma_rsp *r;

	if ((u32)(qp->rsp_tail - qp->rsp_head) >= NTRDMA_QP_RSP) {
		qp->resp_fatal = true;
		return NULL;
	}
	r = &qp->rsp[qp->rsp_tail++ % NTRDMA_QP_RSP];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->msn = msn;
	return r;
}

static void resp_ack(struct ntrdma_qp *qp, u32 msn)
{
	struct ntrdma_rsp *r;

	if (qp->rsp_tail != qp->rsp_head) {
		r = &qp->rsp[(qp->rsp_tail - 1) % NTRDMA_QP_RSP];
		if (r->kind == NTRDMA_RSP_ACK &&
		    r->syndrome == NTRDMA_VX_SYN_OK) {
			r->msn = msn;	/* one ACK covers both */
			return;
		}
	}
	resp_new(qp, NTRDMA_RSP_ACK, msn);
}

/* A fatal NAK is queued: the QP enters ERR (event @ev) once it is sent. */
static void resp_fatal_nak(struct ntrdma_qp *qp, enum ib_event_type ev)
{
	qp->resp_fatal = true;
	qp->resp_event = ev;
	ntrdma_hw_add(qp, NTRDMA_HW_NAK_SENT, 1);
}

/*
 * UC: the segments of the message being dropped (the one at resp_msn) go,
 * its last one acknowledges it; false for any other segment.
 */
static bool resp_uc_skip(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	if (h->msn != qp->resp_msn)
		return false;
	if (h->flags & NTRDMA_VX_LAST) {
		qp->uc_drop = false;
		resp_ack(qp, h->msn);
		qp->resp_msn = (qp->resp_msn + 1) & NTRDMA_VX_MSN_MASK;
	}
	return true;
}

/* Refuse message @msn; fatal ones put the QP in ERR once sent. UC drops it. */
static void resp_nak(struct ntrdma_qp *qp, u32 msn, u8 syn,
		     enum ib_event_type ev)
{
	struct ntrdma_rsp *r;

	if (qp->ibqp.qp_type == IB_QPT_UC) {
		ntrdma_hw_add(qp, NTRDMA_HW_UC_DROPPED, 1);
		qp->uc_drop = true;
		return;
	}
	if (syn != NTRDMA_VX_SYN_RNR) {
		resp_fatal_nak(qp, ev);
	} else {
		qp->rnr_naks++;
		ntrdma_hw_add(qp, NTRDMA_HW_RNR_NAK_SENT, 1);
	}
	r = resp_new(qp, NTRDMA_RSP_ACK, msn);
	if (!r)
		return;
	r->syndrome = syn;
	r->rnr_timer = qp->min_rnr_timer;
}

/* Complete the receive WQE in qp->rcv. */
static void resp_complete_rcv(struct ntrdma_qp *qp,
			      const struct ntrdma_vx_hdr *h, int status)
{
	struct ntrdma_cqe e = {
		.wr_id = qp->rcv.wr_id,
		.status = status,
		.opcode = h->op == NTRDMA_VX_WRITE ? IB_WC_RECV_RDMA_WITH_IMM :
						     IB_WC_RECV,
		.byte_len = status ? 0 : h->total,
		.qp_num = qp->ibqp.qp_num,
		.src_qp = qp->dest_qp_num,
	};

	if (h->flags & NTRDMA_VX_IMM) {
		e.imm_data = h->imm;
		e.wc_flags = NTRDMA_WC_WITH_IMM;
	}
	if ((h->flags & NTRDMA_VX_INV) && !status) {
		e.imm_data = h->rkey;	/* ex.invalidate_rkey */
		e.wc_flags = NTRDMA_WC_WITH_INV;
	}
	ntrdma_qp_complete_recv(qp, qp->rcv.idx, &e,
				h->flags & NTRDMA_VX_SOLICITED);
}

/**
 * ntrdma_resp_take_wqe() - take the next receive WQE (RQ or SRQ) into qp->rcv
 * @qp: the QP (sq_lock held)
 *
 * Every SGE is checked (lkey, PD, local write, range) and holds its MR.
 *
 * Return: 0, -EAGAIN when none is posted, or a completion status when it
 * is unusable (it is consumed; ntrdma_resp_release_rcv() lets go of it).
 */
int ntrdma_resp_take_wqe(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_srq *srq = qp->ibqp.srq ? to_nsrq(qp->ibqp.srq) : NULL;
	struct ntrdma_ring *ring = srq ? &srq->ring : &qp->rq;
	spinlock_t *lock = srq ? &srq->lock : &qp->rq_lock;
	u32 max_sge = srq ? NTRDMA_MAX_SGE : qp->cap.max_recv_sge;
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(ring);
	struct ntrdma_recv_wqe wqe;
	bool limit = false;
	u32 prod, cons, i;
	u64 cap = 0;

	spin_lock(lock);
	if (!srq)
		ntrdma_rq_sync(qp);
	/* acquire: the WQEs before the index that publishes them */
	prod = smp_load_acquire(&ctl->prod);
	cons = ring->kpos;
	if (prod == cons || (u32)(prod - cons) > ring->entries) {
		spin_unlock(lock);
		return -EAGAIN;
	}
	memcpy(&wqe, ntrdma_ring_slot(ring, cons), sizeof(wqe));
	ring->kpos = cons + 1;
	if (!srq)
		ntrdma_rq_publish(qp);
	/* release: done reading the slot before handing it back */
	smp_store_release(&ctl->cons, cons + 1);
	if (srq && srq->limit && (u32)(prod - cons - 1) < srq->limit) {
		srq->limit = 0;
		limit = true;
	}
	spin_unlock(lock);
	if (limit && qp->ibqp.srq->event_handler) {
		struct ib_event ev = {
			.device = qp->ibqp.device,
			.event = IB_EVENT_SRQ_LIMIT_REACHED,
			.element.srq = qp->ibqp.srq,
		};

		qp->ibqp.srq->event_handler(&ev, qp->ibqp.srq->srq_context);
	}

	qp->rcv.wr_id = wqe.wr_id;
	qp->rcv.idx = cons;
	qp->rcv.nsge = 0;
	qp->rcv_wqe = true;
	if (wqe.num_sge > max_sge)
		return IB_WC_LOC_LEN_ERR;
	for (i = 0; i < wqe.num_sge; i++) {
		const struct ntrdma_sge *s = &wqe.sge[i];
		struct ntrdma_mr *mr;

		if (!s->length)
			continue;
		mr = ntrdma_mr_get(nib, s->lkey, qp->ibqp.pd,
				   IB_ACCESS_LOCAL_WRITE);
		if (!mr)
			return IB_WC_LOC_PROT_ERR;
		qp->rcv.sge[qp->rcv.nsge].mr = mr;
		qp->rcv.sge[qp->rcv.nsge].addr = s->addr;
		qp->rcv.sge[qp->rcv.nsge].len = s->length;
		qp->rcv.nsge++;
		if (ntrdma_mr_check(mr, s->addr, s->length))
			return IB_WC_LOC_PROT_ERR;
		cap += s->length;
	}
	qp->rcv.cap = min_t(u64, cap, NTRDMA_VX_MAX_MSG);
	return 0;
}

/* The remote MR of a WRITE/READ/atomic, every check done; NULL if none. */
static struct ntrdma_mr *resp_rkey(struct ntrdma_qp *qp,
				   const struct ntrdma_vx_hdr *h, int access)
{
	if (!(qp->qp_access_flags & access))
		return NULL;
	return ntrdma_rkey_get(qp, h->rkey, access, h->raddr, h->total);
}

static void resp_atomic(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_rsp *r;
	struct ntrdma_mr *mr;
	struct page *page;
	u64 *p, orig;
	u32 off;

	if (h->raddr & 7) {
		resp_nak(qp, h->msn, NTRDMA_VX_SYN_INV_REQ,
			 IB_EVENT_QP_REQ_ERR);
		return;
	}
	mr = resp_rkey(qp, h, IB_ACCESS_REMOTE_ATOMIC);
	if (!mr || ntrdma_mr_range(mr, h->raddr, 8, &page, &off) != 8) {
		if (mr)
			ntrdma_mr_put(mr);
		resp_nak(qp, h->msn, NTRDMA_VX_SYN_ACCESS,
			 IB_EVENT_QP_ACCESS_ERR);
		return;
	}
	r = resp_new(qp, NTRDMA_RSP_ATOMIC, h->msn);
	if (!r) {
		ntrdma_mr_put(mr);
		return;
	}
	p = kmap_local_page(page) + off;
	spin_lock(&nib->atomic_lock);
	orig = *p;
	if (h->flags & NTRDMA_VX_FADD)
		*p = orig + h->cmp_add;
	else if (orig == h->cmp_add)
		*p = h->swap;
	spin_unlock(&nib->atomic_lock);
	kunmap_local(p);
	ntrdma_mr_put(mr);
	r->orig = orig;
	qp->resp_msn = (qp->resp_msn + 1) & NTRDMA_VX_MSN_MASK;
}

static u32 resp_rd_pending(struct ntrdma_qp *qp)
{
	u32 i, n = 0;

	for (i = qp->rsp_head; i != qp->rsp_tail; i++)
		if (qp->rsp[i % NTRDMA_QP_RSP].kind != NTRDMA_RSP_ACK)
			n++;
	return n;
}

/*
 * A copy of the sink a READ_REQ names in @payload, checked: NULL when it
 * names none or there is no memory (the data is sent then), an ERR_PTR
 * when it names memory outside our window.
 */
static struct ntrdma_vx_sink *resp_take_sink(struct ntrdma_qp *qp,
					     const struct ntrdma_vx_hdr *h,
					     const void *payload, u32 len)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_vx_sink *sink;

	if (!len)
		return NULL;
	sink = kmemdup(payload, len, GFP_ATOMIC | __GFP_NOWARN);
	if (!sink)
		return NULL;
	if (ntrdma_vx_check_sink(sink, len / sizeof(*sink), h->total,
				 ntrdma_dev_peer_reach(nib->ndev))) {
		kfree(sink);
		ibdev_warn_ratelimited(&nib->ibdev, "QP %u: the peer named a READ sink outside the window\n",
				       qp->ibqp.qp_num);
		return ERR_PTR(-EINVAL);
	}
	return sink;
}

static void resp_read(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		      const void *payload, u32 len)
{
	struct ntrdma_vx_sink *sink;
	struct ntrdma_rsp *r;
	struct ntrdma_mr *mr;

	if (resp_rd_pending(qp) >= max_t(u32, qp->max_dest_rd_atomic, 1)) {
		resp_nak(qp, h->msn, NTRDMA_VX_SYN_INV_REQ,
			 IB_EVENT_QP_REQ_ERR);
		return;
	}
	sink = resp_take_sink(qp, h, payload, len);
	if (IS_ERR(sink)) {
		resp_nak(qp, h->msn, NTRDMA_VX_SYN_INV_REQ,
			 IB_EVENT_QP_REQ_ERR);
		return;
	}
	/* a zero-length READ names no memory (IBA C9-88) */
	mr = h->total ? resp_rkey(qp, h, IB_ACCESS_REMOTE_READ) : NULL;
	if (!mr && h->total) {
		kfree(sink);
		resp_nak(qp, h->msn, NTRDMA_VX_SYN_ACCESS,
			 IB_EVENT_QP_ACCESS_ERR);
		return;
	}
	r = resp_new(qp, NTRDMA_RSP_READ, h->msn);
	if (!r) {
		kfree(sink);
		ntrdma_mr_put(mr);
		return;
	}
	r->mr = mr;
	r->rkey = h->rkey;
	r->raddr = h->raddr;
	r->total = h->total;
	r->sink = sink;
	r->nsink = len / sizeof(*sink);
	r->epoch = h->imm;
	qp->resp_msn = (qp->resp_msn + 1) & NTRDMA_VX_MSN_MASK;
}

static bool resp_needs_wqe(const struct ntrdma_vx_hdr *h)
{
	return h->op == NTRDMA_VX_SEND || (h->flags & NTRDMA_VX_IMM);
}

/*
 * A message's first segment while it is being received: the requester
 * sends it again from its start (a rewind). The receive WQE it took stays
 * for it (it was consumed: dropping it would lose it without a
 * completion); anything else is a broken requester: the WQE completes in
 * error and the QP fails. 0 to go on with the message.
 */
static int resp_restart(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	if (qp->wr_mr) {
		ntrdma_mr_put(qp->wr_mr);
		qp->wr_mr = NULL;
	}
	qp->rcv_busy = false;
	if (!qp->rcv_wqe || (h->op == qp->rcv_op && resp_needs_wqe(h)))
		return 0;
	resp_complete_rcv(qp, h, IB_WC_REM_INV_REQ_ERR);
	ntrdma_resp_release_rcv(qp);
	resp_nak(qp, h->msn, NTRDMA_VX_SYN_INV_REQ, IB_EVENT_QP_REQ_ERR);
	return -EINVAL;
}

/*
 * A WRITE whose key stopped naming its MR while it came in: the rest is
 * refused (a remote access error), as a key that named nothing would be.
 */
static void resp_refuse(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	if (qp->rcv_wqe)
		resp_complete_rcv(qp, h, IB_WC_REM_ACCESS_ERR);
	ntrdma_resp_release_rcv(qp);
	resp_nak(qp, h->msn, NTRDMA_VX_SYN_ACCESS, IB_EVENT_QP_ACCESS_ERR);
}

/* First segment of a SEND or WRITE: 0 to go on, else it was answered. */
static int resp_first(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	bool need_wqe = resp_needs_wqe(h);
	int st;

	if (h->op == NTRDMA_VX_WRITE && h->total) {
		/*
		 * Checked before a receive WQE is consumed for an immediate.
		 * A zero-length WRITE names no memory: its rkey and address
		 * are not looked at (IBA C9-88; rsockets sends its control
		 * messages so, with whatever key its stack held).
		 */
		qp->wr_mr = resp_rkey(qp, h, IB_ACCESS_REMOTE_WRITE);
		if (!qp->wr_mr) {
			resp_nak(qp, h->msn, NTRDMA_VX_SYN_ACCESS,
				 IB_EVENT_QP_ACCESS_ERR);
			return -EACCES;
		}
	}
	if (need_wqe) {
		/* a restarted message keeps the WQE it took */
		st = qp->rcv_wqe ? 0 : ntrdma_resp_take_wqe(qp);
		if (st == -EAGAIN) {
			ntrdma_resp_release_rcv(qp);
			resp_nak(qp, h->msn, NTRDMA_VX_SYN_RNR, 0);
			return st;
		}
		if (!st && h->op == NTRDMA_VX_SEND && h->total > qp->rcv.cap)
			st = IB_WC_LOC_LEN_ERR;
		if (st) {
			resp_complete_rcv(qp, h, st);
			ntrdma_resp_release_rcv(qp);
			resp_nak(qp, h->msn, st == IB_WC_LOC_LEN_ERR ?
				 NTRDMA_VX_SYN_INV_REQ : NTRDMA_VX_SYN_OP_ERR,
				 IB_EVENT_QP_REQ_ERR);
			return -EINVAL;
		}
	}
	qp->rcv_busy = true;
	qp->rcv_op = h->op;
	qp->rcv_len = 0;
	/* What was checked: later segments must not name anything else. */
	qp->rcv_total = h->total;
	qp->wr_raddr = h->raddr;
	qp->wr_rkey = h->rkey;
	return 0;
}

/* The receive in qp->rcv is still ours to complete (sq_lock held). */
static bool resp_rcv_live(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	return qp->rcv_busy && ntrdma_qp_answers(qp->state);
}

/*
 * The segments of @mr on the DMA channel (READ answers) are copied before
 * the receive that invalidated it completes: then its user may reuse the
 * pages. sq_lock is dropped for the wait (the data path's work, no other
 * lock held); -ENOLINK when the receive was flushed meanwhile, -EIO when
 * the channel did not copy them in time.
 */
static int resp_wait_idle(struct ntrdma_qp *qp, struct ntrdma_mr *mr,
			  unsigned long *flags)
{
	bool idle;

	if (ntrdma_mr_idle(mr))
		return 0;
	spin_unlock_irqrestore(&qp->sq_lock, *flags);
	idle = ntrdma_mr_wait_idle(mr);
	spin_lock_irqsave(&qp->sq_lock, *flags);
	if (!resp_rcv_live(qp))
		return -ENOLINK;
	if (idle)
		return 0;
	ibdev_warn_ratelimited(qp->ibqp.device,
			       "QP %u: key %#x invalidated, its DMA copies not done\n",
			       qp->ibqp.qp_num, mr->key);
	return -EIO;
}

/*
 * SEND with invalidate, all of it in: the MR it names (ours, of the QP's
 * PD, fast-registered, or a window) stops working, and no copy through it
 * runs, before its receive completes; an MR that cannot be invalidated
 * fails the receive and the QP (invalid request). 0, -ENOLINK (flushed
 * meanwhile), or -EINVAL (the receive failed).
 */
static int resp_invalidate(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
			   unsigned long *flags)
{
	struct ntrdma_mr *target;
	int rc = ntrdma_mr_invalidate(to_nib(qp->ibqp.device), qp->ibqp.pd,
				      h->rkey, &target);

	if (target) {
		rc = resp_wait_idle(qp, target, flags);
		ntrdma_mr_put(target);
		if (rc == -ENOLINK)
			return rc;
	}
	if (!rc)
		return 0;
	resp_complete_rcv(qp, h, rc == -EIO ? IB_WC_LOC_QP_OP_ERR :
					      IB_WC_REM_INV_REQ_ERR);
	ntrdma_resp_release_rcv(qp);
	resp_nak(qp, h->msn, rc == -EIO ? NTRDMA_VX_SYN_OP_ERR :
					  NTRDMA_VX_SYN_INV_REQ,
		 rc == -EIO ? IB_EVENT_QP_FATAL : IB_EVENT_QP_REQ_ERR);
	return -EINVAL;
}

/*
 * The segment's msn is the one expected; or, on a message's first segment
 * flagged NTRDMA_VX_SKIPPED, a later one: the messages between were WRITEs
 * the requester placed directly or its local operations, never sent here.
 * Only when the run of skipped msns starts at the one expected: else a
 * message before the run is still to come (NAKed, to be sent again).
 */
static bool resp_msn_ok(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	if (h->msn == qp->resp_msn)
		return true;
	if (!(h->flags & NTRDMA_VX_SKIPPED) || qp->rcv_busy ||
	    ntrdma_vx_msn_diff(h->msn, qp->resp_msn) <= 0 ||
	    h->skip_lo != (u16)qp->resp_msn)
		return false;
	qp->resp_msn = h->msn;
	return true;
}

/* The segment is for this QP, in order, and still to be taken. */
static bool resp_takes(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h)
{
	if (!ntrdma_qp_answers(qp->state) || qp->resp_fatal ||
	    h->src_qpn != qp->dest_qp_num || qp->uc_drop ||
	    !resp_msn_ok(qp, h))
		return false;
	/* UC: nothing to answer with (a requester of ours never asks) */
	return qp->ibqp.qp_type != IB_QPT_UC ||
	       (h->op != NTRDMA_VX_READ_REQ && h->op != NTRDMA_VX_ATOMIC_REQ);
}

/* A request segment from the peer's requester (rx work). */
void ntrdma_resp_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		    const void *payload, u32 len)
{
	unsigned long flags;
	int rc = 0;

	spin_lock_irqsave(&qp->sq_lock, flags);
	if (qp->uc_drop && ntrdma_qp_answers(qp->state) &&
	    h->src_qpn == qp->dest_qp_num && resp_uc_skip(qp, h))
		goto out;
	if (!resp_takes(qp, h)) {
		ntrdma_hw_add(qp, NTRDMA_HW_RX_DROPPED, 1);
		goto out;
	}
	qp->rx_msgs++;
	switch (h->op) {
	case NTRDMA_VX_READ_REQ:
		if (!qp->rcv_busy)
			resp_read(qp, h, payload, len);
		goto kick;
	case NTRDMA_VX_ATOMIC_REQ:
		if (!qp->rcv_busy)
			resp_atomic(qp, h);
		goto kick;
	}

	if (h->flags & NTRDMA_VX_FIRST) {
		if (qp->rcv_busy && resp_restart(qp, h))
			goto kick;
		if (resp_first(qp, h))
			goto kick;
	} else if (!qp->rcv_busy || qp->rcv_op != h->op ||
		   h->offset != qp->rcv_len || h->total != qp->rcv_total ||
		   (h->op == NTRDMA_VX_WRITE && h->raddr != qp->wr_raddr)) {
		/* the rest of a refused message */
		ntrdma_hw_add(qp, NTRDMA_HW_RX_DROPPED, 1);
		goto out;
	}
	if (len) {
		if (h->op == NTRDMA_VX_WRITE)
			rc = ntrdma_rkey_copy(qp, qp->wr_mr, qp->wr_rkey,
					      qp->wr_raddr + h->offset,
					      (void *)payload, len);
		else
			rc = ntrdma_rsge_scatter(qp->rcv.sge, qp->rcv.nsge,
						 h->offset, payload, len);
		if (rc == -EACCES) {
			/* its key was invalidated while it came in */
			resp_refuse(qp, h);
			goto kick;
		}
		if (rc) {
			/* An MR address without a page (kernel users). */
			if (qp->rcv_wqe)
				resp_complete_rcv(qp, h, IB_WC_LOC_PROT_ERR);
			ntrdma_resp_release_rcv(qp);
			resp_nak(qp, h->msn, NTRDMA_VX_SYN_OP_ERR,
				 IB_EVENT_QP_FATAL);
			goto kick;
		}
	}
	qp->rcv_len += len;
	if (!(h->flags & NTRDMA_VX_LAST))
		goto out;
	if ((h->flags & NTRDMA_VX_INV) && resp_invalidate(qp, h, &flags))
		goto kick;
	if (qp->rcv_wqe)
		resp_complete_rcv(qp, h, IB_WC_SUCCESS);
	ntrdma_resp_release_rcv(qp);
	resp_ack(qp, h->msn);
	qp->resp_msn = (qp->resp_msn + 1) & NTRDMA_VX_MSN_MASK;
kick:
	/* A UC message dropped at its last segment is acknowledged now. */
	if (qp->uc_drop)
		resp_uc_skip(qp, h);
	/*
	 * The answers leave at the end of the receive pass
	 * (ntrdma_transport.c).
	 */
out:
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

/* ---- transmit: the answers ---- */

/*
 * A READ written straight into the requester's sink, then its notice: 0
 * when both are done; -EAGAIN when the data is to be sent instead.
 */
static int resp_push_read(struct ntrdma_qp *qp, struct ntrdma_rsp *r,
			  struct ntrdma_vx_hdr *h)
{
	int n;

	if (r->sent < r->total) {
		n = ntrdma_push_read(qp, r);
		if (n == -EINVAL)
			return -EAGAIN;	/* the TQP's own window check */
		if (n)
			return n;
	}
	h->flags = NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_PLACED;
	h->offset = 0;
	n = ntrdma_vx_send(qp, h, NULL, 0, NULL, 0, 0, 0);
	return n < 0 ? n : 0;
}

/*
 * A READ's data from r->sent on: 0 when all of it is out, else negative
 * (-EACCES: its key stopped naming its MR on the way).
 */
static int resp_send_read(struct ntrdma_qp *qp, struct ntrdma_rsp *r,
			  struct ntrdma_vx_hdr *h)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_rsge sg;
	int n;

	h->op = NTRDMA_VX_READ_RESP;
	h->total = r->total;
	if (r->sink) {
		n = resp_push_read(qp, r, h);
		if (n != -EAGAIN)
			return n;
		/* from r->sent on: a requester that withdrew drops the rest */
		kfree(r->sink);
		r->sink = NULL;
	}
	if (!r->total) {	/* zero-length: no MR, one empty segment */
		h->offset = 0;
		n = ntrdma_vx_send(qp, h, NULL, 0, NULL, 0, 0, 0);
		return n < 0 ? n : 0;
	}
	do {
		h->offset = r->sent;
		sg.mr = r->mr;
		sg.addr = r->raddr + r->sent;
		sg.len = r->total - r->sent;
		if (!ntrdma_rkey_enter(nib, r->mr, r->rkey))
			return -EACCES;	/* its key was invalidated */
		n = ntrdma_vx_send(qp, h, NULL, 0, &sg, 1, 0,
				   min_t(u32, sg.len,
					 NTRDMA_VX_BUF - sizeof(*h)));
		ntrdma_rkey_leave(r->mr);
		if (n < 0)
			return n;
		if (!n && r->sent < r->total)
			return -EFAULT;
		r->sent += n;
		if (r->sent < r->total && ntrdma_vx_tx_spent(qp))
			return -EINPROGRESS;	/* the next pass goes on */
	} while (r->sent < r->total);
	return 0;
}

/* An answer is out (or dropped): its MR reference and sink go. */
static void resp_drop(struct ntrdma_rsp *r)
{
	if (r->mr)
		ntrdma_mr_put(r->mr);
	r->mr = NULL;
	kfree(r->sink);
	r->sink = NULL;
}

/*
 * An answer whose data the responder could not read (its MR has no page
 * there: a DMA or fast-reg MR of memory we cannot map) becomes a remote
 * operational error NAK; the QP enters ERR once it is sent.
 */
static void resp_fault(struct ntrdma_qp *qp, struct ntrdma_rsp *r)
{
	r->kind = NTRDMA_RSP_ACK;
	r->syndrome = NTRDMA_VX_SYN_OP_ERR;
	resp_fatal_nak(qp, IB_EVENT_QP_FATAL);
}

/*
 * A READ whose key was invalidated while its data went out: the rest is
 * refused with a remote access error NAK, as a key naming nothing would be.
 */
static void resp_revoked(struct ntrdma_qp *qp, struct ntrdma_rsp *r)
{
	r->kind = NTRDMA_RSP_ACK;
	r->syndrome = NTRDMA_VX_SYN_ACCESS;
	resp_fatal_nak(qp, IB_EVENT_QP_ACCESS_ERR);
}

static void resp_hdr(struct ntrdma_qp *qp, const struct ntrdma_rsp *r,
		     struct ntrdma_vx_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->src_qpn = qp->ibqp.qp_num;
	h->dst_qpn = qp->dest_qp_num;
	h->msn = r->msn;
}

/* An ACK (or NAK) or an atomic's answer: one segment without payload. */
static bool resp_is_short(const struct ntrdma_rsp *r)
{
	return r->kind == NTRDMA_RSP_ACK || r->kind == NTRDMA_RSP_ATOMIC;
}

static int resp_send_short(struct ntrdma_qp *qp, const struct ntrdma_rsp *r,
			   struct ntrdma_vx_hdr *h)
{
	if (r->kind == NTRDMA_RSP_ACK) {
		h->op = NTRDMA_VX_ACK;
		h->syndrome = r->syndrome;
		h->rnr_timer = r->rnr_timer;
	} else {
		h->op = NTRDMA_VX_ATOMIC_RESP;
		h->total = 8;
		h->cmp_add = r->orig;
	}
	return ntrdma_vx_send(qp, h, NULL, 0, NULL, 0, 0, 0);
}

/**
 * ntrdma_resp_next_msn() - the msn the responder expects next
 * @qp: a QP leaving its connection
 *
 * Every SEND and WRITE before it was executed (a DISC tells the peer).
 *
 * Return: the msn.
 */
u32 ntrdma_resp_next_msn(struct ntrdma_qp *qp)
{
	unsigned long flags;
	u32 msn;

	spin_lock_irqsave(&qp->sq_lock, flags);
	msn = qp->resp_msn;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return msn;
}

/**
 * ntrdma_resp_tx_owed() - the short answers owed go out, if they fit now
 * @qp: a QP its user takes out of RTR, RTS or SQD (its sq_lock held; the
 *	caller publishes with ntrdma_vx_flush_tx() after unlocking)
 *
 * The user may have polled a receive whose ACK is still queued (answers
 * leave at the end of a receive pass): its sender must not fail for want
 * of that ACK. What does not fit now is dropped by the flush that follows.
 */
void ntrdma_resp_tx_owed(struct ntrdma_qp *qp)
{
	struct ntrdma_vx_hdr h;
	struct ntrdma_rsp *r;

	lockdep_assert_held(&qp->sq_lock);
	while (qp->rsp_head != qp->rsp_tail) {
		r = &qp->rsp[qp->rsp_head % NTRDMA_QP_RSP];
		if (!resp_is_short(r))
			return;
		resp_hdr(qp, r, &h);
		if (resp_send_short(qp, r, &h) < 0)
			return;
		resp_drop(r);
		qp->rsp_head++;
	}
}

/*
 * Send what the responder owes, in order: 0 when all went out, negative
 * when the transport is full (the QP waits for its wake-up) or the pass's
 * budget is spent (the tx work makes the next pass). A fatal NAK puts the
 * QP in ERR once sent.
 */
int ntrdma_resp_tx(struct ntrdma_qp *qp)
{
	struct ntrdma_vx_hdr h;
	struct ntrdma_rsp *r;
	int n;

	lockdep_assert_held(&qp->sq_lock);
	while (qp->rsp_head != qp->rsp_tail) {
		if (ntrdma_vx_tx_spent(qp)) {
			ntrdma_vx_kick(qp);
			return -EINPROGRESS;
		}
		r = &qp->rsp[qp->rsp_head % NTRDMA_QP_RSP];
		resp_hdr(qp, r, &h);
		if (resp_is_short(r))
			n = resp_send_short(qp, r, &h);
		else
			n = resp_send_read(qp, r, &h);
		if (n == -ENOSPC) {
			ntrdma_vx_wait_space(qp);
			return n;
		}
		if (n == -EBUSY)
			return n;	/* send_done kicks us */
		if (n == -EINPROGRESS) {
			ntrdma_vx_kick(qp);	/* the budget: the rest later */
			return n;
		}
		if (n < 0 && n != -EFAULT && n != -EACCES)
			return n;	/* link gone: the flush follows */
		resp_drop(r);
		if (n == -EACCES) {
			resp_revoked(qp, r);	/* sent next, in its place */
			continue;
		}
		if (n == -EFAULT && r->kind != NTRDMA_RSP_ACK) {
			resp_fault(qp, r);	/* sent next, in its place */
			continue;
		}
		qp->rsp_head++;
	}
	if (qp->resp_fatal) {
		qp->resp_fatal = false;
		ntrdma_qp_error(qp, qp->resp_event ? qp->resp_event :
				IB_EVENT_QP_FATAL);
		return -EIO;
	}
	return 0;
}

/* RTR entered: the responder expects rq_psn first. */
void ntrdma_resp_reset(struct ntrdma_qp *qp)
{
	qp->resp_msn = qp->rq_psn & NTRDMA_VX_MSN_MASK;
	qp->resp_fatal = false;
	qp->uc_drop = false;
	qp->resp_event = 0;
}

/*
 * ERR (or RESET, @post false): a receive being filled completes flushed,
 * answers not sent yet are dropped with their MR references.
 */
void ntrdma_resp_flush(struct ntrdma_qp *qp, bool post)
{
	struct ntrdma_cqe e = {
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp_num = qp->ibqp.qp_num,
	};

	lockdep_assert_held(&qp->sq_lock);
	if (qp->rcv_wqe && post) {
		e.wr_id = qp->rcv.wr_id;
		ntrdma_qp_complete_recv(qp, qp->rcv.idx, &e, false);
	}
	ntrdma_resp_release_rcv(qp);
	for (; qp->rsp_head != qp->rsp_tail; qp->rsp_head++)
		resp_drop(&qp->rsp[qp->rsp_head % NTRDMA_QP_RSP]);
}
