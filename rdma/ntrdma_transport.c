// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the verbs transport. Every RC QP of the device talks
 * to its peer QP through one engine TQP (NTRDMA_TQP_VERBS), multiplexed by
 * the destination QP number in each segment's header (struct ntrdma_vx_hdr
 * in ntrdma_verbs_wire.h). Its functions and structures keep the short
 * prefix ntrdma_vx_ (verbs transport).
 *
 * Send: a segment is a header slot of the QP (header plus inline data), then
 * payload straight from the pages of the MRs the WQE named (zero copy on
 * the sending side); the TQP writes it into a buffer the peer posted. Every
 * MR a segment touches holds a reference until the TQP's send_done for that
 * segment, so no MR is unpinned under a copy.
 * Receive: NTRDMA_VX_RX_BUFS buffers of NTRDMA_VX_BUF bytes (windowed mode:
 * as many as NTRDMA_VX_WINDOW_SHARE percent of the window holds; allocated
 * at the first session) are posted to the peer. A work item polls them,
 * copies the header out of the buffer (the peer may still write it),
 * checks it, hands the segment to the QP
 * (ntrdma_resp.c as responder, ntrdma_comp.c as requester), which checks
 * keys, PD, access and ranges against its own tables before copying the
 * payload out, and posts the buffer again.
 * Adaptive polling (rx_poll_us): after a pass that received something the
 * work keeps polling the ring, queued again each pass, for rx_poll_us
 * before it asks the peer for a doorbell, while no other task wants the
 * CPU; a peer that answers within that time costs no interrupt on either
 * side (the peer rings only an armed ring). 0 turns it off.
 */

#include <linux/dma-mapping.h>
#include <linux/gfp.h>
#include <linux/sched/clock.h>
#include <linux/sched/stat.h>
#include <linux/slab.h>

#include "ntrdma_ib.h"

#define NTRDMA_VX_RX_BUFS	128
#define NTRDMA_VX_WINDOW_SHARE	30	/* percent of the window (windowed) */
#define NTRDMA_VX_BUDGET	64
#define NTRDMA_VX_NAKS		32	/* device-level NAKs in flight */

/* Off by default: it did not pay in the test bed (doc/verbs.md, adaptive polling). */
static unsigned int rx_poll_us;
module_param(rx_poll_us, uint, 0644);
MODULE_PARM_DESC(rx_poll_us,
		 "verbs face: after receiving, poll the receive ring this many us before waiting for a doorbell (default 0: off)");

struct ntrdma_vx {
	struct ntrdma_ib *nib;
	struct ntrdma_dev *ndev;
	struct ntrdma_tqp *tqp;
	struct workqueue_struct *wq;
	struct work_struct rx_work;
	struct work_struct wake_work;
	spinlock_t wait_lock;		/* tx_waiters */
	struct list_head tx_waiters;
	bool active;
	bool posted_ever;		/* the peer may have buffers of ours */
	/* NAKs for segments no QP of ours takes (the rx work sends them) */
	struct ntrdma_vx_hdr *naks;	/* one page */
	struct ntrdma_seg_meta nak_meta[NTRDMA_VX_NAKS];	/* .pool NULL */
	spinlock_t nak_lock;		/* nak_done */
	u32 nak_prod, nak_done;
	u64 last_rx_ns;			/* local_clock() of the last receive */
	bool polling;			/* this pass was queued by polling */
	/* receive buffers, allocated at the first session (its mode) */
	struct ntrdma_rxbuf buf[NTRDMA_VX_RX_BUFS];
	u16 nbufs;
	u16 at[NTRDMA_TQP_RING];	/* ring position -> buffer */
};

/* Send the NAK @nak to the peer; none when every NAK slot is in flight. */
static void vx_nak_tqp(struct ntrdma_vx *vx, const struct ntrdma_vx_hdr *nak)
{
	struct ntrdma_tqp_sge sg;
	struct ntrdma_vx_hdr *h;
	unsigned long flags;
	bool full;
	u32 i;

	spin_lock_irqsave(&vx->nak_lock, flags);
	full = vx->nak_prod - vx->nak_done >= NTRDMA_VX_NAKS;
	spin_unlock_irqrestore(&vx->nak_lock, flags);
	if (full)
		return;
	i = vx->nak_prod % NTRDMA_VX_NAKS;
	h = &vx->naks[i];
	*h = *nak;
	sg.page = virt_to_page(h);
	sg.off = offset_in_page(h);
	sg.len = sizeof(*h);
	/* Counted first: a CPU copy runs send_done inside the send. */
	vx->nak_prod++;
	if (ntrdma_tqp_send(vx->tqp, &sg, 1, sizeof(*h), 0, &vx->nak_meta[i],
			    true))
		vx->nak_prod--;
	else
		atomic64_inc(&vx->nib->hw[NTRDMA_HW_NAK_NO_QP_SENT]);
}

/* Whether @qp takes request segments: RTR, RTS or SQD. */
static bool vx_qp_ready(struct ntrdma_qp *qp)
{
	return ntrdma_qp_answers(READ_ONCE(qp->state));
}

/*
 * A request segment for a QP we do not have, or one not in RTR/RTS: the
 * requester is told at once (NTRDMA_VX_SYN_NO_QP), the way the request
 * came, and retries as IB does after a dropped packet instead of waiting
 * out its timeout. One NAK per message (its first segment).
 */
static void vx_nak(struct ntrdma_ib *nib, const struct ntrdma_vx_hdr *req,
		   bool loopback)
{
	struct ntrdma_vx_hdr h = {
		.op = NTRDMA_VX_ACK,
		.syndrome = NTRDMA_VX_SYN_NO_QP,
		.src_qpn = req->dst_qpn,
		.dst_qpn = req->src_qpn,
		.msn = req->msn,
	};

	if (req->op == NTRDMA_VX_ACK || req->op == NTRDMA_VX_READ_RESP ||
	    req->op == NTRDMA_VX_ATOMIC_RESP || req->op == NTRDMA_VX_UD_SEND ||
	    !(req->flags & NTRDMA_VX_FIRST))
		return;
	if (loopback)
		ntrdma_lo_nak(nib->lo, &h);
	else
		vx_nak_tqp(nib->vx, &h);
}

/*
 * The QP numbered @qpn, if it takes segments that came the way this one
 * did: a loopback RC or UC QP only from the loopback, any other one only
 * from the peer; a UD QP from both.
 */
static struct ntrdma_qp *vx_dst_qp(struct ntrdma_ib *nib, u32 qpn,
				   bool loopback)
{
	struct ntrdma_qp *qp = xa_load(&nib->qp_xa, qpn);

	if (qp && ntrdma_qp_connected(qp) &&
	    READ_ONCE(qp->loopback) != loopback)
		return NULL;
	return qp;
}

/* A datagram, or a request for a UD QP: never answered. */
static void vx_deliver_ud(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
			  void *buf, u32 len)
{
	if (h->op != NTRDMA_VX_UD_SEND || qp->ibqp.qp_type != IB_QPT_UD) {
		ntrdma_hw_add(qp, NTRDMA_HW_RX_DROPPED, 1);
		return;
	}
	if (!vx_qp_ready(qp)) {
		ntrdma_hw_add(qp, NTRDMA_HW_UD_DROPPED, 1);
		return;
	}
	ntrdma_ud_rx(qp, h, buf + sizeof(*h), len - sizeof(*h));
}

/* A header that fails the checks: the peer's ends the session. */
static void vx_bad_hdr(struct ntrdma_ib *nib, bool loopback)
{
	atomic64_inc(&nib->hw[NTRDMA_HW_RX_INVALID]);
	if (loopback)
		ibdev_err_ratelimited(&nib->ibdev,
				      "invalid loopback segment dropped\n");
	else
		ntrdma_link_proto_error(nib->ndev, "invalid verbs segment");
}

/**
 * ntrdma_vx_deliver() - hand one received segment to its QP
 * @nib: the verbs device
 * @buf: the segment (header, then payload)
 * @len: its length
 * @loopback: it came from a QP of this device (ntrdma_lo.c), not the peer
 *
 * Process context, no lock held (the data path's work items).
 *
 * Return: the QP it went to, NULL if none took it.
 */
struct ntrdma_qp *ntrdma_vx_deliver(struct ntrdma_ib *nib, void *buf,
				    u32 len, bool loopback)
{
	struct ntrdma_vx_hdr h;
	struct ntrdma_qp *qp;

	atomic64_inc(&nib->hw[NTRDMA_HW_RX_SEGS]);
	atomic64_add(len, &nib->hw[NTRDMA_HW_RX_BYTES]);
	/* Copied out first: the peer can still write the buffer. */
	if (len >= sizeof(h))
		memcpy(&h, buf, sizeof(h));
	if (len < sizeof(h) || ntrdma_vx_check_hdr(&h, len)) {
		vx_bad_hdr(nib, loopback);
		return NULL;
	}
	/* Destroy removes a QP from the table, then waits for this work. */
	qp = vx_dst_qp(nib, h.dst_qpn, loopback);
	if (!qp) {
		atomic64_inc(&nib->hw[NTRDMA_HW_RX_NO_QP]);
		vx_nak(nib, &h, loopback);
		return NULL;
	}
	if (h.op == NTRDMA_VX_UD_SEND || qp->ibqp.qp_type == IB_QPT_UD) {
		vx_deliver_ud(qp, &h, buf, len);
		return qp;
	}
	switch (h.op) {
	case NTRDMA_VX_SEND:
	case NTRDMA_VX_WRITE:
	case NTRDMA_VX_READ_REQ:
	case NTRDMA_VX_ATOMIC_REQ:
		if (!vx_qp_ready(qp)) {
			ntrdma_hw_add(qp, NTRDMA_HW_RX_DROPPED, 1);
			vx_nak(nib, &h, loopback);
			return NULL;
		}
		ntrdma_resp_rx(qp, &h, buf + sizeof(h), len - sizeof(h));
		break;
	default:
		ntrdma_req_rx(qp, &h, buf + sizeof(h), len - sizeof(h));
		break;
	}
	return qp;
}

static int vx_post(struct ntrdma_vx *vx, u16 i)
{
	u32 pos;
	int rc;

	ntrdma_rxbuf_for_peer(vx->ndev, &vx->buf[i], NTRDMA_VX_BUF);
	rc = ntrdma_tqp_post_recv(vx->tqp, vx->buf[i].addr, NTRDMA_VX_BUF, &pos);
	if (!rc)
		vx->at[ntrdma_ring_idx(pos, NTRDMA_TQP_RING)] = i;
	return rc;
}

/*
 * Within rx_poll_us of the last receive, and no other task wants this CPU
 * (the one that answers may be one, or a copy engine's worker): poll again
 * instead of arming.
 */
static bool vx_keep_polling(struct ntrdma_vx *vx, int received)
{
	u64 window = (u64)READ_ONCE(rx_poll_us) * NSEC_PER_USEC;
	u64 now;

	if (!window)
		return false;
	now = local_clock();
	if (received)
		vx->last_rx_ns = now;
	return now - vx->last_rx_ns < window && single_task_running();
}

/* After a pass that took @n segments: go on, poll again or arm the ring. */
static void vx_rx_next(struct ntrdma_vx *vx, int n, bool polled)
{
	if (polled && n)
		atomic64_add(n, &vx->nib->hw[NTRDMA_HW_RX_POLLED]);
	vx->polling = n < NTRDMA_VX_BUDGET && vx_keep_polling(vx, n);
	if (n == NTRDMA_VX_BUDGET || vx->polling ||
	    ntrdma_tqp_recv_arm(vx->tqp))
		queue_work(vx->wq, &vx->rx_work);
}

static void vx_rx_work(struct work_struct *work)
{
	struct ntrdma_vx *vx = container_of(work, struct ntrdma_vx, rx_work);
	struct ntrdma_qp *qp, *pending = NULL;
	struct ntrdma_tqp_rcomp c;
	bool polled = vx->polling;
	int n, rc;
	u16 i;

	vx->polling = false;
	if (!READ_ONCE(vx->active))
		return;
	ntrdma_fault_pause(vx->ndev, "vx_rx");
	for (n = 0; n < NTRDMA_VX_BUDGET; n++) {
		rc = ntrdma_tqp_poll_recv(vx->tqp, &c, NTRDMA_VX_BUF);
		if (rc <= 0)
			break;
		i = vx->at[ntrdma_ring_idx(c.pos, NTRDMA_TQP_RING)];
		ntrdma_rxbuf_for_cpu(vx->ndev, &vx->buf[i], c.len);
		qp = ntrdma_vx_deliver(vx->nib, vx->buf[i].va, c.len, false);
		/* Same buffer, next position: the ring never runs dry. */
		vx_post(vx, i);
		/*
		 * A QP's answers (merged ACKs) and further requests go out
		 * once it has taken the segments in a row that are its own.
		 */
		if (pending && qp != pending)
			ntrdma_req_tx(pending);
		if (qp)
			pending = qp;
	}
	ntrdma_tqp_post_commit(vx->tqp);
	if (pending)
		ntrdma_req_tx(pending);
	ntrdma_tqp_send_flush(vx->tqp);	/* NAKs of this pass */
	if (rc < 0)
		return;	/* protocol error: the link is going down */
	vx_rx_next(vx, n, polled);
}

/* Wait for the rx work (destroying QPs: it may be using one). */
void ntrdma_vx_flush_rx(struct ntrdma_ib *nib)
{
	flush_work(&nib->vx->rx_work);
	ntrdma_lo_flush(nib->lo);
	flush_work(&nib->vx->wake_work);
}

/* Room again for senders that found none (the loopback freed a buffer). */
void ntrdma_vx_wake(struct ntrdma_ib *nib)
{
	queue_work(nib->vx->wq, &nib->vx->wake_work);
}

static void vx_wake_work(struct work_struct *work)
{
	struct ntrdma_vx *vx = container_of(work, struct ntrdma_vx, wake_work);
	struct ntrdma_qp *qp, *tmp;
	unsigned long flags;
	LIST_HEAD(list);

	spin_lock_irqsave(&vx->wait_lock, flags);
	list_splice_init(&vx->tx_waiters, &list);
	list_for_each_entry_safe(qp, tmp, &list, tx_wait) {
		list_del_init(&qp->tx_wait);
		queue_work(vx->wq, &qp->tx_work);
	}
	spin_unlock_irqrestore(&vx->wait_lock, flags);
}

/* The send or placement of @qp would go now. */
static bool vx_space_now(struct ntrdma_vx *vx, struct ntrdma_qp *qp,
			 bool placing)
{
	if (qp->loopback)
		return ntrdma_lo_ready(to_nib(qp->ibqp.device)->lo);
	if (placing && ntrdma_tqp_place_ready(vx->tqp))
		return true;
	return ntrdma_tqp_send_ready(vx->tqp);
}

/*
 * The TQP had no peer buffer for @qp, or its placement waits for the DMA
 * channel: run its tx work on the next post or channel completion.
 */
void ntrdma_vx_wait_space(struct ntrdma_qp *qp)
{
	struct ntrdma_vx *vx = to_nib(qp->ibqp.device)->vx;
	bool placing = qp->tx_wait_place;
	unsigned long flags;

	lockdep_assert_held(&qp->sq_lock);
	qp->tx_wait_place = false;
	spin_lock_irqsave(&vx->wait_lock, flags);
	if (list_empty(&qp->tx_wait))
		list_add_tail(&qp->tx_wait, &vx->tx_waiters);
	spin_unlock_irqrestore(&vx->wait_lock, flags);
	/* A post or completion may have come before we were on the list. */
	if (vx_space_now(vx, qp, placing))
		queue_work(vx->wq, &vx->wake_work);
}

/* Publish the segments sent with ntrdma_vx_send(). */
void ntrdma_vx_flush_tx(struct ntrdma_qp *qp)
{
	/* each loopback segment was queued as it was sent */
	if (READ_ONCE(qp->loopback) && ntrdma_qp_connected(qp))
		return;
	ntrdma_tqp_send_flush(to_nib(qp->ibqp.device)->vx->tqp);
}

static void vx_tqp_send_done(void *ctx, void *cookie, u32 len, int status);

/*
 * The next segment slot of @qp, its MR references none yet; NULL (and the
 * next send_done kicks the QP) when every slot is in flight.
 */
static struct ntrdma_seg_meta *vx_meta_take(struct ntrdma_qp *qp)
{
	struct ntrdma_seg_pool *pool = qp->seg_pool;
	struct ntrdma_seg_meta *m;
	unsigned long flags;

	lockdep_assert_held(&qp->sq_lock);
	spin_lock_irqsave(&pool->lock, flags);
	if ((u32)(pool->prod - pool->done) >= NTRDMA_QP_SEGS) {
		pool->blocked = true;	/* the next send_done kicks us */
		spin_unlock_irqrestore(&pool->lock, flags);
		return NULL;
	}
	spin_unlock_irqrestore(&pool->lock, flags);
	m = &pool->meta[pool->prod % NTRDMA_QP_SEGS];
	m->nmr = 0;
	m->placement = false;
	return m;
}

/*
 * Hold @mr (consecutive repeats once) in @m until its send_done; counted in
 * @mr->segs meanwhile (ntrdma_mr_idle()).
 */
static void vx_meta_hold(struct ntrdma_seg_meta *m, struct ntrdma_mr *mr)
{
	if (m->nmr && m->mr[m->nmr - 1] == mr)
		return;
	refcount_inc(&mr->refs);
	atomic_inc(&mr->segs);
	m->mr[m->nmr++] = mr;
}

static void vx_meta_drop(struct ntrdma_seg_meta *m)
{
	u32 i;

	for (i = 0; i < m->nmr; i++) {
		if (atomic_dec_and_test(&m->mr[i]->segs))
			wake_up_var(&m->mr[i]->segs);	/* ntrdma_mr_wait_idle() */
		ntrdma_mr_put(m->mr[i]);
	}
	m->nmr = 0;
}

/**
 * ntrdma_vx_charge() - this transmit pass of @qp copied bytes
 * @qp: the QP (sq_lock held)
 * @len: how many
 * @dma: queued on the DMA channel (a fixed cost), not copied by the CPU
 */
void ntrdma_vx_charge(struct ntrdma_qp *qp, u32 len, bool dma)
{
	lockdep_assert_held(&qp->sq_lock);
	qp->tx_budget -= dma ? NTRDMA_TX_DMA_COST : len;
}

/**
 * ntrdma_vx_tx_spent() - this transmit pass of @qp used its budget
 * @qp: the QP (sq_lock held)
 *
 * ntrdma_req_tx() gives each pass NTRDMA_TX_BUDGET; the copies of
 * ntrdma_vx_send() and ntrdma_vx_place() (and pulls) use it up. A pass
 * that has none left stops and queues the QP's tx work for the rest.
 *
 * Return: true once it has none left.
 */
bool ntrdma_vx_tx_spent(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	return qp->tx_budget <= 0;
}

/**
 * ntrdma_vx_place() - direct placement for @qp, in the verbs TQP's order
 * @qp: the QP (sq_lock held; ntrdma_place_remote.c)
 * @pc: the pieces
 * @n: how many; set to how many were placed when the CPU copied (the
 *	first ones, at most NTRDMA_TQP_PLACE_CPU bytes: ntrdma_tqp_place())
 * @mr: the MRs whose pages @pc reads: the DMA channel may copy, holding
 *	them in a segment slot of @qp until it is done
 * @nmr: how many (0: the CPU copies now: pages the caller keeps only
 *	until this returns)
 *
 * The copy counts against the pass's budget (ntrdma_vx_tx_spent()).
 *
 * Return: 0 when the first *@n pieces are written; 1 when all of them are
 * on the DMA channel, written once the QP's segment count passes the value
 * it has now (ntrdma_vx_pool_wait()); -EBUSY when every segment slot is in
 * flight (send_done kicks the QP); or ntrdma_tqp_place()'s error.
 */
int ntrdma_vx_place(struct ntrdma_qp *qp, const struct ntrdma_tqp_piece *pc,
		    int *n, struct ntrdma_mr *const *mr, int nmr)
{
	struct ntrdma_vx *vx = to_nib(qp->ibqp.device)->vx;
	struct ntrdma_seg_meta *m = NULL;
	u32 bytes = 0;
	int i, rc;

	if (nmr) {
		m = vx_meta_take(qp);
		if (!m)
			return -EBUSY;
		for (i = 0; i < nmr; i++)
			vx_meta_hold(m, mr[i]);
		m->placement = true;
		m->pool = qp->seg_pool;
		qp->seg_pool->prod++;
	}
	rc = ntrdma_tqp_place(vx->tqp, pc, n, m);
	if (rc == -ENOSPC)
		qp->tx_wait_place = true;	/* for ntrdma_vx_wait_space() */
	if (m && rc == 0) {
		vx_tqp_send_done(vx, m, 0, 0);	/* the CPU copied it */
	} else if (m && rc < 0) {
		qp->seg_pool->prod--;
		vx_meta_drop(m);
	}
	if (rc < 0)
		return rc;
	for (i = 0; i < *n; i++)
		bytes += pc[i].len;
	ntrdma_vx_charge(qp, bytes, rc == 1);
	ntrdma_hw_add(qp, NTRDMA_HW_PLACED_BYTES, bytes);
	if (rc == 1)
		ntrdma_hw_add(qp, NTRDMA_HW_PLACED_DMA_BYTES, bytes);
	return rc;
}

/**
 * ntrdma_vx_place_fence() - wait for the placements on the DMA channel
 * @nib: the verbs device
 *
 * Process context, bounded (ntrdma_tqp_place_fence()).
 *
 * Return: true when every placement started before is written.
 */
bool ntrdma_vx_place_fence(struct ntrdma_ib *nib)
{
	return ntrdma_tqp_place_fence(nib->vx->tqp);
}

/* Placements still on the DMA channel (a CPU read would pass them). */
bool ntrdma_vx_place_busy(struct ntrdma_ib *nib)
{
	return ntrdma_tqp_place_busy(nib->vx->tqp);
}

/* Ring the peer's kick doorbell: receives it completes (placed SENDs). */
void ntrdma_vx_kick_peer(struct ntrdma_ib *nib)
{
	ntrdma_tqp_kick(nib->vx->tqp);
}

/**
 * ntrdma_vx_place_failed() - a placement of @qp on the channel failed
 * @qp: the QP (sq_lock held)
 *
 * Its WQE must not complete as a success (the session is ending).
 *
 * Return: true once one has.
 */
bool ntrdma_vx_place_failed(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	return READ_ONCE(qp->seg_pool->place_failed);
}

/* Run @qp's transmit side from the work queue. */
void ntrdma_vx_kick(struct ntrdma_qp *qp)
{
	queue_work(to_nib(qp->ibqp.device)->vx->wq, &qp->tx_work);
}

/* Remove @qp from the waiters (destroy). */
static void vx_unwait(struct ntrdma_vx *vx, struct ntrdma_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&vx->wait_lock, flags);
	list_del_init(&qp->tx_wait);
	spin_unlock_irqrestore(&vx->wait_lock, flags);
}

void ntrdma_vx_qp_fini(struct ntrdma_qp *qp)
{
	vx_unwait(to_nib(qp->ibqp.device)->vx, qp);
}

static void vx_tqp_rx(void *ctx)
{
	struct ntrdma_vx *vx = ctx;

	queue_work(vx->wq, &vx->rx_work);
}

static void vx_tqp_tx_space(void *ctx)
{
	struct ntrdma_vx *vx = ctx;

	queue_work(vx->wq, &vx->wake_work);
}

static void vx_tqp_peer_state(void *ctx)
{
}

/* The peer completed receives into CQs it found armed (placed SENDs). */
static void vx_tqp_kick(void *ctx)
{
	struct ntrdma_vx *vx = ctx;

	ntrdma_rq_kicked(vx->nib);
}

static void vx_pool_free(struct ntrdma_seg_pool *pool)
{
	kfree(pool->slots);
	kfree(pool);
}

/*
 * A segment left our memory (or the session ended first). The count, the
 * blocked flag and the wake-up change under the pool's lock, so neither a
 * sender that found every slot busy nor destroy (which waits for the count
 * under the same lock, then lets go of the QP) can miss or outlive it. A
 * pool its QP left behind is freed by its last send_done.
 */
static void vx_tqp_send_done(void *ctx, void *cookie, u32 len, int status)
{
	struct ntrdma_seg_meta *m = cookie;
	struct ntrdma_seg_pool *pool = m->pool;
	struct ntrdma_vx *vx = ctx;
	struct ntrdma_qp *qp;
	unsigned long flags;
	bool orphan_idle;

	if (!pool) {	/* a NAK slot */
		spin_lock_irqsave(&vx->nak_lock, flags);
		vx->nak_done++;
		spin_unlock_irqrestore(&vx->nak_lock, flags);
		return;
	}

	vx_meta_drop(m);
	spin_lock_irqsave(&pool->lock, flags);
	if (status && m->placement)
		pool->place_failed = true;
	pool->done++;
	qp = pool->qp;
	if (qp && pool->blocked && !pool->dying) {
		pool->blocked = false;
		ntrdma_vx_kick(qp);
	}
	if (qp)
		wake_up(&qp->seg_wait);
	orphan_idle = !qp && pool->done == pool->prod;
	spin_unlock_irqrestore(&pool->lock, flags);
	if (orphan_idle)
		vx_pool_free(pool);
}

/* Destroy: no segment of @qp is in flight any more (its QP is in RESET). */
static bool vx_segs_idle(struct ntrdma_qp *qp)
{
	struct ntrdma_seg_pool *pool = qp->seg_pool;
	unsigned long flags;
	bool idle;

	spin_lock_irqsave(&pool->lock, flags);
	pool->dying = true;
	idle = pool->done == pool->prod;
	spin_unlock_irqrestore(&pool->lock, flags);
	return idle;
}

/**
 * ntrdma_vx_pool_alloc() - give @qp its segment slots
 * @qp: a QP being created
 *
 * Return: 0, or -ENOMEM.
 */
int ntrdma_vx_pool_alloc(struct ntrdma_qp *qp)
{
	struct ntrdma_seg_pool *pool;

	pool = kzalloc(sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return -ENOMEM;
	/* kmalloc: physically contiguous, so the TQP can take its pages. */
	pool->slots = kzalloc(NTRDMA_QP_SEGS * NTRDMA_SEG_SLOT, GFP_KERNEL);
	if (!pool->slots) {
		kfree(pool);
		return -ENOMEM;
	}
	spin_lock_init(&pool->lock);
	pool->qp = qp;
	qp->seg_pool = pool;
	return 0;
}

/**
 * ntrdma_vx_pool_wait() - whether @qp's segments up to a count have left
 * @qp: the QP (its sq_lock held)
 * @mark: a value the pool's produced count had (after a segment was sent)
 *
 * Segments complete in the order they were sent, on one way (the TQP or
 * the loopback): every segment counted before @mark has left our memory
 * once the completed count reaches it. If not yet, the next send_done
 * kicks the QP's transmit work.
 *
 * Return: true when they all have.
 */
bool ntrdma_vx_pool_wait(struct ntrdma_qp *qp, u32 mark)
{
	struct ntrdma_seg_pool *pool = qp->seg_pool;
	unsigned long flags;
	bool done;

	lockdep_assert_held(&qp->sq_lock);
	spin_lock_irqsave(&pool->lock, flags);
	done = (int)(pool->done - mark) >= 0;
	if (!done)
		pool->blocked = true;
	spin_unlock_irqrestore(&pool->lock, flags);
	return done;
}

/**
 * ntrdma_vx_pool_release() - let go of @qp's segment slots
 * @qp: a QP being destroyed, in RESET, that no sender can reach any more
 *
 * Waits up to NTRDMA_SEG_WAIT_S for the QP's segments still being copied
 * (the session ending completes them all). A DMA later than that keeps
 * the slots and the MRs it reads: the pool outlives the QP and its last
 * send_done frees it.
 */
void ntrdma_vx_pool_release(struct ntrdma_qp *qp)
{
	struct ntrdma_seg_pool *pool = qp->seg_pool;
	unsigned long flags;
	bool idle;

	if (!wait_event_timeout(qp->seg_wait, vx_segs_idle(qp),
				NTRDMA_SEG_WAIT_S * HZ))
		ibdev_err(qp->ibqp.device,
			  "QP %u: segments still in flight after %d s: their slots stay until the DMA completes\n",
			  qp->ibqp.qp_num, NTRDMA_SEG_WAIT_S);
	spin_lock_irqsave(&pool->lock, flags);
	pool->qp = NULL;
	idle = pool->done == pool->prod;
	spin_unlock_irqrestore(&pool->lock, flags);
	if (idle)
		vx_pool_free(pool);
	qp->seg_pool = NULL;
}

static const struct ntrdma_tqp_ops vx_tqp_ops = {
	.rx		= vx_tqp_rx,
	.tx_space	= vx_tqp_tx_space,
	.peer_state	= vx_tqp_peer_state,
	.kick		= vx_tqp_kick,
	.send_done	= vx_tqp_send_done,
};

/*
 * The segment's way out: the TQP to the peer (published by
 * ntrdma_vx_flush_tx(), which every sender calls), or a copy for a QP of
 * this device, after which its slot and MRs are free at once.
 */
static int vx_send_segment(struct ntrdma_qp *qp,
			   const struct ntrdma_tqp_sge *tsg, int n, u32 len,
			   struct ntrdma_seg_meta *m)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	int rc;

	if (!qp->loopback)
		return ntrdma_tqp_send(nib->vx->tqp, tsg, n, len, 0, m, true);
	rc = ntrdma_lo_send(nib->lo, tsg, n, len);
	if (!rc)
		vx_tqp_send_done(nib->vx, m, len, 0);
	return rc;
}

/*
 * Send one segment of @qp: header @h (whose LAST flag this sets), @inl_len
 * bytes of inline data, then up to @len payload bytes taken from the SGE
 * list @sg (starting @sg_skip bytes into sg[0]). Returns the payload bytes
 * taken (fewer than @len when the TQP's gather list is full), -EBUSY when
 * the QP's segment slots are all in flight, -ENOSPC when the peer has no
 * buffer posted, -EFAULT for an MR address without a page, or the TQP's
 * error. The copy counts against the pass's budget (ntrdma_vx_tx_spent()).
 */
int ntrdma_vx_send(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		   const void *inl, u32 inl_len, const struct ntrdma_rsge *sg,
		   int nsg, u32 sg_skip, u32 len)
{
	struct ntrdma_seg_pool *pool = qp->seg_pool;
	struct ntrdma_tqp_sge tsg[NTRDMA_TQP_MAX_SGE];
	struct ntrdma_seg_meta *m;
	struct ntrdma_vx_hdr *slot;
	u32 idx, taken = 0, off, n_hdr;
	struct page *page;
	int n = 1, i = 0, got, rc;
	bool dma;
	u64 addr;

	m = vx_meta_take(qp);
	if (!m)
		return -EBUSY;
	idx = pool->prod % NTRDMA_QP_SEGS;
	slot = pool->slots + idx * NTRDMA_SEG_SLOT;
	n_hdr = sizeof(*h) + inl_len;
	tsg[0].page = virt_to_page(slot);
	tsg[0].off = offset_in_page(slot);
	tsg[0].len = n_hdr;

	while (taken < len && i < nsg && n < NTRDMA_TQP_MAX_SGE) {
		if (sg_skip >= sg[i].len) {
			sg_skip -= sg[i].len;
			i++;
			continue;
		}
		addr = sg[i].addr + sg_skip;
		got = ntrdma_mr_range(sg[i].mr, addr,
				      min(len - taken, sg[i].len - sg_skip),
				      &page, &off);
		if (got <= 0) {
			rc = -EFAULT;
			goto undo;
		}
		tsg[n].page = page;
		tsg[n].off = off;
		tsg[n].len = got;
		n++;
		vx_meta_hold(m, sg[i].mr);
		taken += got;
		sg_skip += got;
	}

	memcpy(slot, h, sizeof(*h));
	if (inl_len)
		memcpy((u8 *)slot + sizeof(*h), inl, inl_len);
	if ((h->op == NTRDMA_VX_SEND || h->op == NTRDMA_VX_WRITE) &&
	    h->offset + inl_len + taken == h->total)
		slot->flags |= NTRDMA_VX_LAST;
	m->pool = pool;
	pool->prod++;
	rc = vx_send_segment(qp, tsg, n, n_hdr + taken, m);
	if (rc) {
		pool->prod--;
		goto undo;
	}
	qp->tx_msgs++;
	dma = !qp->loopback &&
	      ntrdma_dev_dma_copies(to_nib(qp->ibqp.device)->ndev);
	ntrdma_vx_charge(qp, n_hdr + taken, dma);
	ntrdma_hw_add(qp, NTRDMA_HW_TX_SEGS, 1);
	ntrdma_hw_add(qp, NTRDMA_HW_TX_BYTES, n_hdr + taken);
	return taken;
undo:
	vx_meta_drop(m);
	return rc;
}

/* ---- sessions ---- */

/*
 * The receive buffers, once: at the first session, when the engine knows
 * where the peer may write (windowed mode has room for fewer).
 */
static void vx_alloc_bufs(struct ntrdma_vx *vx)
{
	unsigned int n = ntrdma_rxbuf_count(vx->ndev, NTRDMA_VX_BUF,
					    NTRDMA_VX_WINDOW_SHARE,
					    NTRDMA_VX_RX_BUFS);

	while (vx->nbufs < n &&
	       !ntrdma_rxbuf_alloc(vx->ndev, &vx->buf[vx->nbufs],
				   NTRDMA_VX_BUF, GFP_KERNEL))
		vx->nbufs++;
	if (vx->nbufs < n)
		dev_warn(ntrdma_dev_parent(vx->ndev), "%s: verbs: %u of %u receive buffers\n",
			 ntrdma_dev_name(vx->ndev), vx->nbufs, n);
}

void ntrdma_vx_start(struct ntrdma_ib *nib)
{
	struct ntrdma_vx *vx = nib->vx;
	u16 i;

	if (!vx->nbufs)
		vx_alloc_bufs(vx);
	ntrdma_tqp_start(vx->tqp);
	for (i = 0; i < vx->nbufs; i++)
		if (vx_post(vx, i))
			break;
	ntrdma_tqp_post_commit(vx->tqp);
	vx->posted_ever = true;
	WRITE_ONCE(vx->active, true);
	queue_work(vx->wq, &vx->rx_work);
	queue_work(vx->wq, &vx->wake_work);	/* sends that found none */
}

/*
 * Session over: nothing more is received; sends in flight complete (their
 * send_done runs) before this returns. The buffers stay allocated: the
 * next session posts them again once the peer accepted it (so it left this
 * one), and freeing them waits for that too (ntrdma_vx_fini).
 */
void ntrdma_vx_stop(struct ntrdma_ib *nib)
{
	struct ntrdma_vx *vx = nib->vx;

	WRITE_ONCE(vx->active, false);
	cancel_work_sync(&vx->rx_work);
	ntrdma_tqp_stop(vx->tqp);
	flush_work(&vx->wake_work);
}

int ntrdma_vx_init(struct ntrdma_ib *nib)
{
	struct ntrdma_dev *ndev = nib->ndev;
	struct ntrdma_vx *vx;
	int rc;

	vx = kzalloc(sizeof(*vx), GFP_KERNEL);
	if (!vx)
		return -ENOMEM;
	vx->nib = nib;
	vx->ndev = ndev;
	INIT_WORK(&vx->rx_work, vx_rx_work);
	INIT_WORK(&vx->wake_work, vx_wake_work);
	spin_lock_init(&vx->wait_lock);
	spin_lock_init(&vx->nak_lock);
	INIT_LIST_HEAD(&vx->tx_waiters);
	BUILD_BUG_ON(NTRDMA_VX_NAKS * sizeof(struct ntrdma_vx_hdr) > PAGE_SIZE);
	vx->naks = (void *)get_zeroed_page(GFP_KERNEL);
	if (!vx->naks) {
		rc = -ENOMEM;
		goto err_free;
	}
	vx->wq = alloc_workqueue("%s_vx", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0,
				 ntrdma_dev_name(ndev));
	if (!vx->wq) {
		rc = -ENOMEM;
		goto err_naks;
	}
	vx->tqp = ntrdma_tqp_create(ndev, NTRDMA_TQP_VERBS, &vx_tqp_ops, vx);
	if (IS_ERR(vx->tqp)) {
		rc = PTR_ERR(vx->tqp);
		goto err_wq;
	}
	nib->vx = vx;
	return 0;

err_wq:
	destroy_workqueue(vx->wq);
err_naks:
	free_page((unsigned long)vx->naks);
err_free:
	kfree(vx);
	return rc;
}

/*
 * Device going away (the session is stopped). The receive buffers are freed
 * only if the peer provably no longer writes them (@free_posted); otherwise
 * they are kept, as the Ethernet face keeps its own.
 */
void ntrdma_vx_fini(struct ntrdma_ib *nib, bool free_posted)
{
	struct ntrdma_vx *vx = nib->vx;
	int i;

	if (!vx)
		return;
	ntrdma_tqp_destroy(vx->tqp);	/* no send_done runs after it */
	destroy_workqueue(vx->wq);
	free_page((unsigned long)vx->naks);
	if (vx->posted_ever && !free_posted) {
		dev_warn(ntrdma_dev_parent(vx->ndev),
			 "%s: verbs: the peer may still write our %u receive buffers: keeping the memory\n",
			 ntrdma_dev_name(vx->ndev), vx->nbufs);
	} else {
		for (i = 0; i < vx->nbufs; i++)
			ntrdma_rxbuf_free(vx->ndev, &vx->buf[i]);
	}
	nib->vx = NULL;
	kfree(vx);
}
