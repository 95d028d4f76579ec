// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: UD QPs (user QPs only: address handles live in the
 * provider, which marks each send WQE with the way it goes).
 *
 * A datagram is one segment (NTRDMA_VX_UD_SEND) of at most the port MTU
 * (NTRDMA_VX_UD_MAX bytes) to the QP the WQE names: the peer's through the
 * verbs TQP, or one of this device's through the loopback when the address
 * handle's GID is ours. No msn, no answer, no retry: a datagram for a QP
 * that does not take it (none, not in RTR/RTS, another Q_Key, no receive
 * posted) is dropped and counted (ud_dropped, rx_dropped), as a wire drops
 * it. The send WQE completes once its segment has left our memory (the
 * TQP's send_done or the loopback's copy), so its buffer is the user's
 * again; a datagram sent while the link is down is lost, and completes.
 * A QP's segments complete in order only on one way: a WQE that goes the
 * other way than the segments in flight waits until they have all left.
 *
 * The receiver writes a 40-byte GRH (the sender's GID 0 as SGID, ours as
 * DGID) before the payload, as every HCA does for a global route:
 * ibv_init_ah_from_wc() answers through it.
 */

#include "ntrdma_ib.h"

#define NTRDMA_UD_GRH_NEXT_HDR	0x1b	/* IB: a BTH follows */

/* The Q_Key a datagram carries: the QP's own when the WQE's has bit 31. */
static u32 ud_qkey(struct ntrdma_qp *qp, u32 wqe_qkey)
{
	return wqe_qkey & 0x80000000u ? qp->qkey : wqe_qkey;
}

/**
 * ntrdma_ud_prepare() - the UD rules for a send WQE just copied out
 * @qp: a UD QP
 * @w: its WQE (lengths summed, MRs checked)
 *
 * Return: 0, or the completion status it fails with.
 */
int ntrdma_ud_prepare(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	const struct ntrdma_send_wqe *q = &w->w;

	if (q->opcode != IB_WR_SEND && q->opcode != IB_WR_SEND_WITH_IMM)
		return IB_WC_LOC_QP_OP_ERR;
	if (q->remote_qpn > 0xffffff || q->ud_flags & ~NTRDMA_UD_LOOPBACK)
		return IB_WC_LOC_QP_OP_ERR;
	if (w->len > NTRDMA_VX_UD_MAX)
		return IB_WC_LOC_LEN_ERR;
	return 0;
}

/*
 * The way @w goes: the same as the segments in flight, or any once they
 * all left (false: not yet; the last of them kicks the QP).
 */
static bool ud_route(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	bool lo = w->w.ud_flags & NTRDMA_UD_LOOPBACK;

	if (lo == READ_ONCE(qp->loopback))
		return true;
	if (!ntrdma_vx_pool_wait(qp, qp->seg_pool->prod))
		return false;
	WRITE_ONCE(qp->loopback, lo);
	return true;
}

static void ud_hdr(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
		   struct ntrdma_vx_hdr *h)
{
	union ib_gid gid;

	memset(h, 0, sizeof(*h));
	h->op = NTRDMA_VX_UD_SEND;
	h->flags = NTRDMA_VX_FIRST | NTRDMA_VX_LAST;
	if (w->w.opcode == IB_WR_SEND_WITH_IMM)
		h->flags |= NTRDMA_VX_IMM;
	if (w->w.flags & IB_SEND_SOLICITED)
		h->flags |= NTRDMA_VX_SOLICITED;
	h->src_qpn = qp->ibqp.qp_num;
	h->dst_qpn = w->w.remote_qpn;
	h->total = w->len;
	h->rkey = ud_qkey(qp, w->w.rkey);
	h->imm = w->w.imm_data;
	ntrdma_ib_gid0(qp->ibqp.device, &gid);
	memcpy(&h->cmp_add, gid.raw, 8);
	memcpy(&h->swap, gid.raw + 8, 8);
}

/**
 * ntrdma_ud_send_wqe() - send the datagram of a UD send WQE
 * @qp: the QP (sq_lock held)
 * @w: the WQE at sq_send, prepared
 *
 * At most NTRDMA_UD_MAX_SGE SGEs of at most NTRDMA_VX_UD_MAX bytes in all
 * span at most 2 * NTRDMA_UD_MAX_SGE pages: one segment always takes it.
 *
 * Return: 0 when it went out (or was lost with the link), else
 * ntrdma_vx_send()'s error (-EBUSY also while the other way is busy).
 */
int ntrdma_ud_send_wqe(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_vx_hdr h;
	int n;

	lockdep_assert_held(&qp->sq_lock);
	if (!ud_route(qp, w))
		return -EBUSY;
	ud_hdr(qp, w, &h);
	if (w->w.flags & IB_SEND_INLINE)
		n = ntrdma_vx_send(qp, &h, w->w.inline_data, w->len, NULL, 0,
				   0, 0);
	else
		n = ntrdma_vx_send(qp, &h, NULL, 0, w->sge, w->nsge, 0,
				   w->len);
	if (n == -ENOLINK || n == -EPROTO) {
		/* no peer: lost, as on a wire without a receiver */
		ntrdma_hw_add(qp, NTRDMA_HW_UD_DROPPED, 1);
		w->done = true;
		return 0;
	}
	if (n < 0)
		return n;
	w->seg_end = qp->seg_pool->prod;
	return 0;
}

/**
 * ntrdma_ud_wqe_done() - whether a UD send WQE that went out is complete
 * @qp: the QP (sq_lock held)
 * @w: the WQE
 *
 * Return: true once its segment left our memory (then @w is done).
 */
bool ntrdma_ud_wqe_done(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	if (w->done)
		return true;
	if (!w->out || !ntrdma_vx_pool_wait(qp, w->seg_end))
		return false;
	w->done = true;
	return true;
}

/* ---- receive ---- */

/* The GRH, then the payload, into the receive WQE: 0 or a status. */
static int ud_place(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		    const void *payload, u32 len)
{
	struct ib_grh grh = {
		.version_tclass_flow = cpu_to_be32(6 << 28),
		.paylen = cpu_to_be16(h->total),
		.next_hdr = NTRDMA_UD_GRH_NEXT_HDR,
		.hop_limit = 1,
	};

	if (sizeof(grh) + h->total > qp->rcv.cap)
		return IB_WC_LOC_LEN_ERR;
	memcpy(grh.sgid.raw, &h->cmp_add, 8);
	memcpy(grh.sgid.raw + 8, &h->swap, 8);
	ntrdma_ib_gid0(qp->ibqp.device, &grh.dgid);
	if (ntrdma_rsge_scatter(qp->rcv.sge, qp->rcv.nsge, 0, &grh,
				sizeof(grh)) ||
	    ntrdma_rsge_scatter(qp->rcv.sge, qp->rcv.nsge, sizeof(grh),
				payload, len))
		return IB_WC_LOC_PROT_ERR;
	return 0;
}

static void ud_complete(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
			int status)
{
	struct ntrdma_cqe e = {
		.wr_id = qp->rcv.wr_id,
		.status = status,
		.opcode = IB_WC_RECV,
		.byte_len = status ? 0 : sizeof(struct ib_grh) + h->total,
		.qp_num = qp->ibqp.qp_num,
		.src_qp = h->src_qpn,
		.wc_flags = NTRDMA_WC_GRH,
	};

	if (h->flags & NTRDMA_VX_IMM) {
		e.imm_data = h->imm;
		e.wc_flags |= NTRDMA_WC_WITH_IMM;
	}
	ntrdma_qp_complete_recv(qp, qp->rcv.idx, &e,
				h->flags & NTRDMA_VX_SOLICITED);
}

/**
 * ntrdma_ud_rx() - a datagram for a UD QP (the data path's rx work)
 * @qp: the QP, in RTR, RTS or SQD
 * @h: its header, checked (ntrdma_vx_check_hdr(): @len == h->total)
 * @payload: the payload (in a buffer the sender may still write)
 * @len: its bytes
 *
 * Another Q_Key, or no receive posted: dropped. A receive too small for
 * the GRH and the payload completes with IB_WC_LOC_LEN_ERR; the QP stays.
 */
void ntrdma_ud_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		  const void *payload, u32 len)
{
	unsigned long flags;
	int st;

	spin_lock_irqsave(&qp->sq_lock, flags);
	/* the state again, under the lock: ERR or destroy may have come */
	if ((qp->state != IB_QPS_RTR && qp->state != IB_QPS_RTS &&
	     qp->state != IB_QPS_SQD) || h->rkey != qp->qkey) {
		ntrdma_hw_add(qp, NTRDMA_HW_UD_DROPPED, 1);
		goto out;
	}
	st = ntrdma_resp_take_wqe(qp);
	if (st == -EAGAIN) {
		ntrdma_hw_add(qp, NTRDMA_HW_UD_DROPPED, 1);
		goto out;
	}
	if (!st)
		st = ud_place(qp, h, payload, len);
	qp->rx_msgs++;
	ud_complete(qp, h, st);
	ntrdma_resp_release_rcv(qp);
out:
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}
