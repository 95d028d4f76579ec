// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the requester side of an RC QP, completing (as
 * rxe_comp.c in rxe): the responder's answers (ACK/NAK, READ and atomic
 * responses), the ACK timer, the RNR and NO_QP rewinds and retries, and
 * the completion of send WQEs in order. ntrdma_req.c sends the WQEs.
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

/* ---- completion: WQEs done in order, the ACK and RNR timers ---- */

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
bool req_complete(struct ntrdma_qp *qp)
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
		/* READ_WITH_INV: its sink MR stops working once the data is in */
		if (!st && w->inv_local) {
			st = req_invalidate(qp, w, w->w.imm_data);
			if (st == -EINPROGRESS) {
				ntrdma_vx_kick(qp);	/* copies through it go on */
				break;
			}
		}
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
void req_arm_ack(struct ntrdma_qp *qp)
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

static void req_rnr_expired(struct timer_list *t)
{
	struct ntrdma_qp *qp = from_timer(qp, t, rnr_timer);

	WRITE_ONCE(qp->rnr_wait, false);
	ntrdma_vx_kick(qp);
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

/**
 * ntrdma_req_peer_acked() - what the peer's DISC says it executed
 * @qp: the QP whose peer ends the connection (before its flush)
 * @msn: the msn the peer's responder expects next
 *
 * The peer's ACKs travel on the data path; its DISC, on the command
 * channel, may come first. The SENDs and WRITEs before @msn complete as
 * those ACKs would have completed them. READs and atomics still need their
 * answers; the flush that follows takes what is left.
 */
void ntrdma_req_peer_acked(struct ntrdma_qp *qp, u32 msn)
{
	unsigned long flags;
	u32 cons, n;
	int d;

	spin_lock_irqsave(&qp->sq_lock, flags);
	cons = qp->sq.kpos;
	if ((qp->state != IB_QPS_RTS && qp->state != IB_QPS_SQD) ||
	    cons == qp->sq_fetched)
		goto out;
	d = ntrdma_vx_msn_diff(msn & NTRDMA_VX_MSN_MASK, swqe(qp, cons)->msn);
	if (d <= 0)
		goto out;
	/* only WQEs that went out; the peer's figure is bounded by them */
	n = min3((u32)d, qp->sq_send - cons + 1, qp->sq_fetched - cons);
	req_ack_before(qp, cons + n);
	req_complete(qp);
out:
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
