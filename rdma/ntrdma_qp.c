// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: queue pairs (RC, UC; UD for user QPs, ntrdma_ud.c).
 *
 * Objects and the state machine: every transition and attribute mask is
 * checked with ib_modify_qp_is_ok() as real HCAs do, then every attribute
 * value is range-checked. SQ and RQ are rings of fixed-size WQEs in
 * vmalloc_user memory that userspace maps (ntrdma-abi.h): the provider
 * writes WQEs and the producer index; the kernel will copy each WQE out
 * of the ring and validate it (keys, PD, access, lengths) before any data
 * moves (ntrdma_req.c and ntrdma_comp.c requester, ntrdma_resp.c
 * responder, over the verbs transport of ntrdma_transport.c). post_send
 * is the doorbell; it returns -EINVAL in RESET, INIT and RTR. Entering
 * ERR flushes every posted WQE to its CQ with IB_WC_WR_FLUSH_ERR (the one
 * that failed first with its own status), and work posted in ERR
 * completes at once the same way, as the IB spec demands.
 */

#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "ntrdma_ib.h"

/* Local write is meaningless for a QP; perftest sets it: accepted. */
#define NTRDMA_QP_ACCESS	(IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ | \
				 IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_LOCAL_WRITE)

static void ntrdma_qp_tx_work(struct work_struct *work);

static int ntrdma_check_cap(const struct ib_qp_cap *cap)
{
	if (cap->max_send_wr > NTRDMA_MAX_QP_WR ||
	    cap->max_recv_wr > NTRDMA_MAX_QP_WR ||
	    cap->max_send_sge > NTRDMA_MAX_SGE ||
	    cap->max_recv_sge > NTRDMA_MAX_SGE ||
	    cap->max_inline_data > NTRDMA_MAX_INLINE)
		return -EINVAL;
	return 0;
}

/* What create_qp refuses before anything is allocated. */
static int qp_check_create(const struct ib_qp_init_attr *attr,
			   struct ib_udata *udata)
{
	int rc;

	/* UD: address handles live in user space (the provider). */
	if (attr->qp_type != IB_QPT_RC && attr->qp_type != IB_QPT_UC &&
	    !(attr->qp_type == IB_QPT_UD && udata))
		return -EOPNOTSUPP;
	if (attr->qp_type == IB_QPT_UD &&
	    attr->cap.max_send_sge > NTRDMA_UD_MAX_SGE)
		return -EINVAL;
	if (attr->create_flags || attr->rwq_ind_tbl)
		return -EOPNOTSUPP;
	rc = ntrdma_check_cap(&attr->cap);
	if (rc)
		return rc;
	if (udata && udata->outlen < sizeof(struct ntrdma_create_qp_resp))
		return -EINVAL;
	return ntrdma_check_udata_in(udata);
}

/* A new QP's locks, works and state, in RESET. */
static void qp_init(struct ntrdma_qp *qp, const struct ib_qp_init_attr *attr,
		    bool user)
{
	mutex_init(&qp->lock);
	spin_lock_init(&qp->rq_lock);
	spin_lock_init(&qp->sq_lock);
	INIT_WORK(&qp->tx_work, ntrdma_qp_tx_work);
	ntrdma_export_qp_init(qp);
	INIT_LIST_HEAD(&qp->tx_wait);
	init_waitqueue_head(&qp->seg_wait);
	init_waitqueue_head(&qp->cm_wait);
	ntrdma_req_init(qp);
	qp->user = user;
	qp->state = IB_QPS_RESET;
	qp->sq_sig_type = attr->sq_sig_type;
	qp->port_num = 1;
	qp->path_mtu = IB_MTU_4096;
}

/* A user QP: its rings mapped and described to the provider. */
static int qp_map_user(struct ntrdma_qp *qp, struct ib_udata *udata)
{
	struct ntrdma_create_qp_resp resp = {};
	int rc;

	rc = ntrdma_ring_map(&qp->sq, udata, &resp.sq_offset);
	if (!rc)
		rc = ntrdma_ring_map(&qp->rq, udata, &resp.rq_offset);
	if (rc)
		return rc;
	resp.sq_size = qp->sq.size;
	resp.rq_size = qp->rq.size;
	resp.sq_entries = qp->sq.entries;
	resp.rq_entries = qp->rq.entries;
	resp.qp_num = qp->ibqp.qp_num;
	resp.flags = qp->rq_done ? NTRDMA_QP_RQ_DONE : 0;
	return ib_copy_to_udata(udata, &resp, sizeof(resp));
}

/* What we really provide (at least what was asked for). */
static void qp_set_caps(struct ntrdma_qp *qp, struct ib_qp_init_attr *attr)
{
	attr->cap.max_send_wr = qp->sq.entries;
	attr->cap.max_recv_wr = attr->srq ? 0 : qp->rq.entries;
	attr->cap.max_send_sge = attr->qp_type == IB_QPT_UD ?
				 NTRDMA_UD_MAX_SGE : NTRDMA_MAX_SGE;
	attr->cap.max_recv_sge = attr->srq ? 0 : NTRDMA_MAX_SGE;
	attr->cap.max_inline_data = NTRDMA_MAX_INLINE;
	qp->cap = attr->cap;
}

int ntrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		     struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibqp->device);
	struct ntrdma_qp *qp = to_nqp(ibqp);
	u32 sq_entries, rq_entries, qpn;
	int rc;

	rc = qp_check_create(attr, udata);
	if (rc)
		return rc;
	qp_init(qp, attr, !!udata);
	sq_entries = roundup_pow_of_two(max(attr->cap.max_send_wr, 1U));
	/* With an SRQ the RQ is unused (and its capabilities ignored). */
	rq_entries = attr->srq ? 1 :
		roundup_pow_of_two(max(attr->cap.max_recv_wr, 1U));

	rc = ntrdma_ring_alloc(&qp->sq, sq_entries,
			       sizeof(struct ntrdma_send_wqe));
	if (rc)
		goto err_destroy;
	rc = ntrdma_ring_alloc(&qp->rq, rq_entries,
			       sizeof(struct ntrdma_recv_wqe));
	if (rc)
		goto err_sq;
	rc = -ENOMEM;
	qp->swq = kvcalloc(sq_entries, sizeof(*qp->swq), NTRDMA_GFP_USER);
	if (!qp->swq)
		goto err_rq;
	rc = ntrdma_vx_pool_alloc(qp);
	if (rc)
		goto err_swq;
	/* Reserve a QP number; published below once the QP is complete. */
	rc = xa_alloc_cyclic(&nib->qp_xa, &qpn, NULL,
			     XA_LIMIT(NTRDMA_FIRST_QPN,
				      NTRDMA_FIRST_QPN + NTRDMA_MAX_QP - 1),
			     &nib->qp_next, GFP_KERNEL);
	if (rc < 0) {
		rc = rc == -EBUSY ? -ENOMEM : rc;
		goto err_pool;
	}
	ibqp->qp_num = qpn;
	qp->rq_done = udata && !attr->srq;
	rc = udata ? qp_map_user(qp, udata) : 0;
	if (rc)
		goto err_xa;
	qp_set_caps(qp, attr);
	xa_store(&nib->qp_xa, qpn, qp, GFP_KERNEL);
	return 0;

err_xa:
	xa_erase(&nib->qp_xa, qpn);
err_pool:
	ntrdma_vx_pool_release(qp);
err_swq:
	kvfree(qp->swq);
err_rq:
	ntrdma_ring_free(&qp->rq);
err_sq:
	ntrdma_ring_free(&qp->sq);
err_destroy:
	mutex_destroy(&qp->lock);
	return rc;
}

static void ntrdma_qp_reset_locked(struct ntrdma_qp *qp);

int ntrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibqp->device);
	struct ntrdma_qp *qp = to_nqp(ibqp);
	unsigned long flags;

	ntrdma_export_qp_destroy(qp);	/* the peer stops placing through it */
	ntrdma_rq_export_destroy(qp);
	/* The data path lets go of the QP (and of its MR references)... */
	spin_lock_irqsave(&qp->sq_lock, flags);
	if (ntrdma_qp_answers(qp->state))
		ntrdma_resp_tx_owed(qp);
	ntrdma_qp_reset_locked(qp);
	WRITE_ONCE(qp->state, IB_QPS_RESET);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	ntrdma_vx_flush_tx(qp);
	mutex_lock(&nib->qp_lock);	/* not while a table walk uses it */
	xa_erase(&nib->qp_xa, ibqp->qp_num);
	mutex_unlock(&nib->qp_lock);
	/* Its rdma_cm connection ends; the iw_cm lets go of it. */
	ntrdma_cm_qp_destroy(qp);
	/* ...no work, timer or wake-up can find it any more... */
	ntrdma_vx_qp_fini(qp);
	ntrdma_vx_flush_rx(nib);
	del_timer_sync(&qp->rnr_timer);
	del_timer_sync(&qp->ack_timer);
	/* ...and its segments still being copied finish, or outlive it. */
	ntrdma_vx_pool_release(qp);
	cancel_work_sync(&qp->tx_work);
	cancel_work_sync(&qp->unexport_work);
	kvfree(qp->swq);
	ntrdma_ring_free(&qp->rq);
	ntrdma_ring_free(&qp->sq);
	mutex_destroy(&qp->lock);
	return 0;
}

/* Values of the attributes in @mask, beyond what ib_modify_qp_is_ok() saw. */
static int ntrdma_check_qp_attr(struct ib_qp_attr *attr, int mask)
{
	if ((mask & IB_QP_PORT) && attr->port_num != 1)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index != 0)
		return -EINVAL;
	if ((mask & IB_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~NTRDMA_QP_ACCESS))
		return -EINVAL;
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > NTRDMA_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > NTRDMA_MAX_RD_ATOM)
		return -EINVAL;
	if ((mask & IB_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
		return -EINVAL;
	if ((mask & IB_QP_SQ_PSN) && attr->sq_psn > 0xffffff)
		return -EINVAL;
	if ((mask & IB_QP_RQ_PSN) && attr->rq_psn > 0xffffff)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_AV) && rdma_ah_get_port_num(&attr->ah_attr) > 1)
		return -EINVAL;
	/* No alternate path: one link, nothing to migrate to. */
	if (mask & (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE))
		return -EOPNOTSUPP;
	return 0;
}

/*
 * Complete every WQE still posted in @ring with IB_WC_WR_FLUSH_ERR into
 * @cq, oldest first (the QP entered ERR); the RQ's go where its receives
 * complete (ntrdma_qp_complete_recv()). Only the wr_id is read from the
 * ring; a user producer index that claims more than the ring holds flushes
 * nothing. Stops early if the CQ is full (overrun: ntrdma_cq_overrun()).
 */
static void ntrdma_ring_flush(struct ntrdma_qp *qp, struct ntrdma_ring *ring,
			      struct ib_cq *ibcq, enum ib_wc_opcode opcode)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(ring);
	struct ntrdma_cqe e = {
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = opcode,
		.qp_num = qp->ibqp.qp_num,
	};
	u32 prod, cons;

	/* acquire: the WQEs before the index that publishes them */
	prod = smp_load_acquire(&ctl->prod);
	cons = ring->kpos;
	if (prod - cons > ring->entries)
		prod = cons;
	for (; cons != prod; cons++) {
		/* Both kinds of WQE start with the wr_id. */
		e.wr_id = READ_ONCE(*(u64 *)ntrdma_ring_slot(ring, cons));
		if (ring == &qp->rq && qp->rq_done) {
			ntrdma_qp_complete_recv(qp, cons, &e, false);
			continue;
		}
		if (ntrdma_cq_post(to_ncq(ibcq), &e, false)) {
			ntrdma_cq_overrun(to_ncq(ibcq));
			break;
		}
	}
	ring->kpos = cons;
	/* release: done reading the slots before handing them back */
	smp_store_release(&ctl->cons, cons);
}

/* SQ WQEs the data path never fetched: flushed from the ring itself. */
static void ntrdma_sq_flush_ring(struct ntrdma_qp *qp)
{
	/* release: a provider that sees the flag rings; its doorbell sees ERR */
	smp_store_release(&ntrdma_ring_ctl(&qp->sq)->arm, NTRDMA_RING_FLUSH);
	smp_mb(); /* the flag before reading prod; pairs with the provider */
	ntrdma_ring_flush(qp, &qp->sq, qp->ibqp.send_cq, IB_WC_SEND);
	qp->sq_fetched = qp->sq.kpos;
	qp->sq_send = qp->sq_fetched;
}

/*
 * Flush the RQ (QP in ERR; sq_lock held). The provider sees the flag and rings the
 * POST_SEND doorbell for receives it posts from now on (ntrdma-abi.h).
 * SRQ WQEs are not this QP's to flush.
 */
void ntrdma_rq_flush(struct ntrdma_qp *qp)
{
	unsigned long flags;

	if (qp->ibqp.srq)
		return;
	/* release: after ERR, as for the SQ */
	smp_store_release(&ntrdma_ring_ctl(&qp->rq)->arm, NTRDMA_RING_FLUSH);
	smp_mb(); /* the flag before reading prod; pairs with the provider */
	spin_lock_irqsave(&qp->rq_lock, flags);
	/* the peer may still place: its answer to the withdrawal flushes */
	if (!ntrdma_rq_flush_later(qp)) {
		ntrdma_rq_sync(qp);
		ntrdma_ring_flush(qp, &qp->rq, qp->ibqp.recv_cq, IB_WC_RECV);
		ntrdma_rq_publish(qp);
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/* An affiliated asynchronous event of @qp, to its handler (any context). */
static void ntrdma_qp_event(struct ntrdma_qp *qp, enum ib_event_type type)
{
	struct ib_event e = {
		.device = qp->ibqp.device,
		.event = type,
		.element.qp = &qp->ibqp,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&e, qp->ibqp.qp_context);
}

/*
 * The QP enters ERR: everything posted completes (flush errors, the WQE
 * that failed with its own status first), then the async event @ev if
 * @event. From the data path or modify_qp.
 */
static void ntrdma_qp_error_ev(struct ntrdma_qp *qp, bool event,
			       enum ib_event_type ev)
{
	lockdep_assert_held(&qp->sq_lock);
	WRITE_ONCE(qp->state, IB_QPS_ERR);
	qp->sqd_notify = false;
	ntrdma_cm_qp_down(qp);
	ntrdma_req_flush(qp, true);
	ntrdma_sq_flush_ring(qp);
	ntrdma_resp_flush(qp, true);
	ntrdma_rq_flush(qp);
	ntrdma_export_qp_failed(qp);	/* ERR executes nothing */
	if (event)
		ntrdma_qp_event(qp, ev);
	/* With an SRQ: no receive WQE of it will be taken any more. */
	if (qp->ibqp.srq)
		ntrdma_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/*
 * SQD with asynchronous notification: once every WQE that went out has
 * completed, IB_EVENT_SQ_DRAINED (once). From modify_qp and the requester.
 */
void ntrdma_qp_sq_drained(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	if (!qp->sqd_notify || qp->state != IB_QPS_SQD ||
	    qp->sq.kpos != qp->sq_send ||
	    ntrdma_req_in_progress(qp))
		return;
	qp->sqd_notify = false;
	ntrdma_qp_event(qp, IB_EVENT_SQ_DRAINED);
}

/* The data path found an error (QP affiliated): ERR with event @ev. */
void ntrdma_qp_error(struct ntrdma_qp *qp, enum ib_event_type ev)
{
	if (qp->state != IB_QPS_ERR)
		ntrdma_qp_error_ev(qp, true, ev);
}

/* Add a completion; a full CQ is an overrun: CQ error, the QP fails. */
void ntrdma_qp_complete(struct ntrdma_qp *qp, struct ib_cq *ibcq,
			const struct ntrdma_cqe *e, bool solicited)
{
	if (!ntrdma_cq_post(to_ncq(ibcq), e, solicited))
		return;
	ntrdma_cq_overrun(to_ncq(ibcq));
	if (!qp->cq_overrun) {
		qp->cq_overrun = true;
		ntrdma_vx_kick(qp);	/* enters ERR from the tx work */
	}
}

/**
 * ntrdma_qp_complete_recv() - complete receive WQE @idx of @qp
 * @qp: the QP
 * @idx: the WQE's index in its RQ (unused with an SRQ)
 * @e: the completion
 * @solicited: the message asked for a solicited event
 *
 * Any context. A user QP's own RQ takes its receives' completions in their
 * slots (struct ntrdma_recv_done), where the peer writes those of the
 * SENDs it places: the provider polls them there. Other receives (an SRQ's,
 * a kernel QP's) go to the CQ's ring.
 */
void ntrdma_qp_complete_recv(struct ntrdma_qp *qp, u32 idx,
			     const struct ntrdma_cqe *e, bool solicited)
{
	struct ntrdma_recv_done *d;

	if (!qp->rq_done) {
		ntrdma_qp_complete(qp, qp->ibqp.recv_cq, e, solicited);
		return;
	}
	d = &((struct ntrdma_recv_wqe *)ntrdma_ring_slot(&qp->rq, idx))->done;
	WRITE_ONCE(d->status, e->status);
	WRITE_ONCE(d->opcode, e->opcode);
	WRITE_ONCE(d->byte_len, e->byte_len);
	WRITE_ONCE(d->imm_data, e->imm_data);
	WRITE_ONCE(d->wc_flags, e->wc_flags);
	WRITE_ONCE(d->src_qp, e->src_qp);
	WRITE_ONCE(d->vendor_err, e->vendor_err);
	/* release: the completion before the index that publishes it */
	smp_store_release(&d->seq, idx + 1);
	ntrdma_cq_event(to_ncq(qp->ibqp.recv_cq), e->status == IB_WC_SUCCESS,
			solicited);
}

static void ntrdma_qp_tx_work(struct work_struct *work)
{
	struct ntrdma_qp *qp = container_of(work, struct ntrdma_qp, tx_work);
	unsigned long flags;

	if (READ_ONCE(qp->cq_overrun)) {
		spin_lock_irqsave(&qp->sq_lock, flags);
		if (qp->state != IB_QPS_RESET)
			ntrdma_qp_error(qp, IB_EVENT_QP_FATAL);
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		return;
	}
	ntrdma_req_tx(qp);
}

static void ntrdma_ring_reset(struct ntrdma_ring *ring)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(ring);

	WRITE_ONCE(ctl->prod, 0);
	WRITE_ONCE(ctl->cons, 0);
	WRITE_ONCE(ctl->arm, 0);
	ring->kpos = 0;
}

/* To RESET: posted work is discarded without completions. */
static void ntrdma_qp_reset_locked(struct ntrdma_qp *qp)
{
	ntrdma_req_flush(qp, false);
	ntrdma_resp_flush(qp, false);
	ntrdma_ring_reset(&qp->sq);
	ntrdma_ring_reset(&qp->rq);
	spin_lock(&qp->rq_lock);
	ntrdma_rq_reset(qp);
	spin_unlock(&qp->rq_lock);
	qp->sq_fetched = 0;
	qp->sq_send = 0;
	qp->rsp_head = 0;
	qp->rsp_tail = 0;
	qp->cq_overrun = false;
	qp->resp_fatal = false;
}

/*
 * What rdma_cm does to a QP it connects (the iWARP rules of the iw_cm,
 * where the connection manager, not modify_qp, connects the QP): RESET->
 * INIT with exactly the state, port and access (no P_Key), then INIT->INIT
 * and INIT->RTR with access, and the port alone without a state (rdma_cm's
 * "RTS" step); ntrdma_qp_cm_connect() makes it RTS. The steps after INIT
 * are taken by any RC QP, however it reached INIT: a user's own QP that it
 * moves with rdma_init_qp_attr()'s attributes before rdma_accept() (the QP
 * has no destination until rdma_cm connects it). Everything else: the IB
 * rules.
 */
static bool ntrdma_cm_modify_ok(struct ntrdma_qp *qp, enum ib_qp_state cur,
				enum ib_qp_state next, struct ib_qp_attr *attr,
				int mask)
{
	const int cm_init = IB_QP_STATE | IB_QP_PORT | IB_QP_ACCESS_FLAGS;

	if (qp->ibqp.qp_type != IB_QPT_RC)
		return false;
	if (cur == IB_QPS_RESET)
		return next == IB_QPS_INIT && mask == cm_init;
	if (mask & ~(cm_init | IB_QP_CUR_STATE))
		return false;
	if (!(mask & IB_QP_STATE))
		return true;	/* attributes only: port (checked), access */
	return cur == IB_QPS_INIT &&
	       (next == IB_QPS_INIT || next == IB_QPS_RTR);
}

/*
 * Direct placement: the peer learns that the QP takes placements (entering
 * RTR/RTS, or new access or destination there) or no longer does.
 */
static void ntrdma_qp_export_state(struct ntrdma_qp *qp, enum ib_qp_state cur,
				   enum ib_qp_state next, int mask)
{
	bool changed = !ntrdma_qp_answers(cur) ||
		       (mask & (IB_QP_ACCESS_FLAGS | IB_QP_DEST_QPN));

	/* UD takes no placements, UC only SENDs (no WRITE: see req_place) */
	if (qp->ibqp.qp_type != IB_QPT_RC && qp->ibqp.qp_type != IB_QPT_UC)
		return;
	/* A loopback QP takes nothing from the peer. */
	if (ntrdma_qp_answers(next) && !qp->loopback && changed)
		ntrdma_export_qp(qp, true);
	else if (!ntrdma_qp_answers(next) || qp->loopback)
		ntrdma_export_qp(qp, false);
}

/* The attributes @mask names, checked already, into @qp. */
static void qp_apply_attr(struct ntrdma_qp *qp, const struct ib_qp_attr *attr,
			  int mask)
{
	lockdep_assert_held(&qp->lock);
	if (mask & IB_QP_ACCESS_FLAGS)
		qp->qp_access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX)
		qp->pkey_index = attr->pkey_index;
	if (mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IB_QP_PORT)
		qp->port_num = attr->port_num;
	if (mask & IB_QP_AV) {
		/* Kept as a plain copy: no reference on the SGID entry. */
		qp->ah_attr = attr->ah_attr;
		qp->ah_attr.grh.sgid_attr = NULL;
		WRITE_ONCE(qp->loopback,
			   ntrdma_ib_av_is_local(qp->ibqp.device,
						 &attr->ah_attr));
	}
	if (mask & IB_QP_PATH_MTU)
		qp->path_mtu = attr->path_mtu;
	if (mask & IB_QP_DEST_QPN)
		qp->dest_qp_num = attr->dest_qp_num;
	if (mask & IB_QP_RQ_PSN)
		qp->rq_psn = attr->rq_psn;
	if (mask & IB_QP_SQ_PSN)
		qp->sq_psn = attr->sq_psn;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		qp->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		qp->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		qp->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_TIMEOUT)
		qp->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		qp->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
}

/*
 * @qp goes from @cur to @next, each side's state reset as it starts; false
 * when the data path failed it meanwhile and @next is neither RESET nor
 * ERR: it stays in ERR.
 */
static bool qp_enter_state(struct ntrdma_qp *qp, enum ib_qp_state cur,
			   enum ib_qp_state next,
			   const struct ib_qp_attr *attr, int mask)
{
	lockdep_assert_held(&qp->sq_lock);
	if (qp->state != cur && next != IB_QPS_RESET && next != IB_QPS_ERR)
		return false;
	if ((next == IB_QPS_RESET || next == IB_QPS_ERR) &&
	    ntrdma_qp_answers(qp->state))
		ntrdma_resp_tx_owed(qp);
	if (next == IB_QPS_RESET && cur != IB_QPS_RESET)
		ntrdma_qp_reset_locked(qp);
	if (next == IB_QPS_RTR && cur != IB_QPS_RTR)
		ntrdma_resp_reset(qp);
	if (next == IB_QPS_RTS && cur == IB_QPS_RTR)
		ntrdma_req_reset(qp);
	if (next == IB_QPS_ERR && qp->state != IB_QPS_ERR)
		ntrdma_qp_error_ev(qp, false, 0);
	if (next == IB_QPS_SQD || next == IB_QPS_RESET)
		ntrdma_cm_qp_down(qp);	/* rdma_cm: the connection ends */
	WRITE_ONCE(qp->state, next);
	if (next == IB_QPS_SQD && cur == IB_QPS_RTS) {
		qp->sqd_notify = (mask & IB_QP_EN_SQD_ASYNC_NOTIFY) &&
				 attr->en_sqd_async_notify;
		ntrdma_qp_sq_drained(qp);
	}
	return true;
}

int ntrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int mask, struct ib_udata *udata)
{
	struct ntrdma_qp *qp = to_nqp(ibqp);
	enum ib_qp_state cur, next;
	unsigned long flags;
	bool entered;
	int rc;

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;
	rc = ntrdma_check_udata_in(udata);
	if (rc)
		return rc;

	mutex_lock(&qp->lock);
	cur = qp->state;
	rc = -EINVAL;
	if ((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != cur)
		goto out;
	next = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask) &&
	    !ntrdma_cm_modify_ok(qp, cur, next, attr, mask))
		goto out;
	rc = ntrdma_check_qp_attr(attr, mask);
	if (rc)
		goto out;
	qp_apply_attr(qp, attr, mask);
	spin_lock_irqsave(&qp->sq_lock, flags);
	entered = qp_enter_state(qp, cur, next, attr, mask);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	ntrdma_vx_flush_tx(qp);	/* the answers owed, if any */
	if (!entered)
		goto out;	/* 0: the data path's ERR (and its event) stands */
	ntrdma_qp_export_state(qp, cur, next, mask);
	/* Work posted before RTS, or answers owed since RTR. */
	if (next == IB_QPS_RTS)
		ntrdma_req_tx(qp);
out:
	mutex_unlock(&qp->lock);
	return rc;
}

/*
 * rdma_cm connected @qp (INIT/RTR/RTS, nothing sent yet) to the QP
 * @peer_qpn, the peer's or (@loopback) one of this device: RTS, both
 * message sequences from 0. @ird and @ord are what both ends accepted: we
 * answer @ird reads/atomics, we issue @ord (the other end answers at least
 * that many). The data path lets one through at 0, on both sides alike,
 * so the floor of 1 keeps our ORD within the other end's IRD.
 */
int ntrdma_qp_cm_connect(struct ntrdma_qp *qp, u32 peer_qpn, u8 ird, u8 ord,
			 bool loopback)
{
	unsigned long flags;
	int rc = -EINVAL;

	if (peer_qpn > 0xffffff)
		return -EINVAL;
	mutex_lock(&qp->lock);
	if ((qp->state != IB_QPS_INIT && qp->state != IB_QPS_RTR &&
	     qp->state != IB_QPS_RTS))
		goto out;
	qp->dest_qp_num = peer_qpn;
	WRITE_ONCE(qp->loopback, loopback);
	/* What rdma_cm grants a QP with responder resources (the MRs'
	 * own access flags still decide): the active side was made INIT
	 * with none.
	 */
	qp->qp_access_flags |= IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ |
			       IB_ACCESS_REMOTE_ATOMIC;
	qp->sq_psn = 0;
	qp->rq_psn = 0;
	qp->path_mtu = IB_MTU_4096;
	qp->max_rd_atomic = clamp_t(u8, ord, 1, NTRDMA_MAX_RD_ATOM);
	qp->max_dest_rd_atomic = clamp_t(u8, ird, 1, NTRDMA_MAX_RD_ATOM);
	qp->min_rnr_timer = 12;		/* 0.64 ms */
	qp->timeout = 14;
	qp->retry_cnt = 7;
	qp->rnr_retry = 7;		/* as iWARP: wait for receives */
	spin_lock_irqsave(&qp->sq_lock, flags);
	ntrdma_resp_reset(qp);
	ntrdma_req_reset(qp);
	WRITE_ONCE(qp->state, IB_QPS_RTS);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	rc = 0;
	ntrdma_export_qp(qp, !loopback);
	ntrdma_req_tx(qp);
out:
	mutex_unlock(&qp->lock);
	return rc;
}

/* The peer ended the rdma_cm connection: ERR, flushed (cm_mutex held). */
void ntrdma_qp_cm_disconnected(struct ntrdma_qp *qp)
{
	mutex_lock(&qp->lock);
	spin_lock_irq(&qp->sq_lock);
	if (qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET)
		ntrdma_qp_error_ev(qp, false, 0);
	spin_unlock_irq(&qp->sq_lock);
	mutex_unlock(&qp->lock);
}

/*
 * Link down: connected QPs to ERR, flushed, with IB_EVENT_QP_FATAL; a QP
 * in ERR already flushes what waited for the peer (ntrdma_rq_flush()).
 */
void ntrdma_qps_link_down(struct ntrdma_ib *nib)
{
	struct ntrdma_qp *qp;
	unsigned long index;
	struct ib_event ev;
	bool fatal;

	mutex_lock(&nib->qp_lock);
	xa_for_each(&nib->qp_xa, index, qp) {
		mutex_lock(&qp->lock);
		/* A loopback QP never needed the link. */
		fatal = ntrdma_qp_connected(qp) && !qp->loopback &&
			(qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS ||
			 qp->state == IB_QPS_SQD || qp->state == IB_QPS_SQE);
		spin_lock_irq(&qp->sq_lock);
		if (fatal)
			ntrdma_qp_error_ev(qp, false, 0);
		else if (qp->state == IB_QPS_ERR)
			ntrdma_rq_flush(qp);	/* one the peer's answer owed */
		spin_unlock_irq(&qp->sq_lock);
		mutex_unlock(&qp->lock);
		if (fatal && qp->ibqp.event_handler) {
			ev.device = qp->ibqp.device;
			ev.event = IB_EVENT_QP_FATAL;
			ev.element.qp = &qp->ibqp;
			qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
		}
	}
	mutex_unlock(&nib->qp_lock);
}

int ntrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init_attr)
{
	struct ntrdma_qp *qp = to_nqp(ibqp);

	memset(attr, 0, sizeof(*attr));
	memset(init_attr, 0, sizeof(*init_attr));
	mutex_lock(&qp->lock);
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->path_mtu = qp->path_mtu;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qp_access_flags = qp->qp_access_flags;
	attr->pkey_index = qp->pkey_index;
	attr->qkey = qp->qkey;
	attr->port_num = qp->port_num;
	attr->dest_qp_num = qp->dest_qp_num;
	attr->sq_psn = qp->sq_psn;
	attr->rq_psn = qp->rq_psn;
	attr->max_rd_atomic = qp->max_rd_atomic;
	attr->max_dest_rd_atomic = qp->max_dest_rd_atomic;
	attr->min_rnr_timer = qp->min_rnr_timer;
	attr->timeout = qp->timeout;
	attr->retry_cnt = qp->retry_cnt;
	attr->rnr_retry = qp->rnr_retry;
	attr->ah_attr = qp->ah_attr;	/* callers take no SGID reference */
	attr->cap = qp->cap;
	mutex_unlock(&qp->lock);

	init_attr->event_handler = ibqp->event_handler;
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->cap = qp->cap;
	init_attr->sq_sig_type = qp->sq_sig_type;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->port_num = 1;
	return 0;
}

/* A kernel WR as a ring WQE (the same checks follow as for user WQEs). */
static int ntrdma_kern_wqe(struct ntrdma_qp *qp, struct ntrdma_send_wqe *wqe,
			   const struct ib_send_wr *wr)
{
	u32 len = 0;
	int i;

	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge)
		return -EINVAL;
	memset(wqe, 0, offsetof(struct ntrdma_send_wqe, sge));
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->flags = wr->send_flags;
	switch (wr->opcode) {
	case IB_WR_SEND_WITH_IMM:
		wqe->imm_data = (__force u32)wr->ex.imm_data;
		break;
	case IB_WR_SEND_WITH_INV:
		wqe->imm_data = wr->ex.invalidate_rkey;
		break;
	case IB_WR_SEND:
		break;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		wqe->imm_data = (__force u32)wr->ex.imm_data;
		fallthrough;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_READ:
	case IB_WR_RDMA_READ_WITH_INV:
		/*
		 * The sink MR, as iWARP HCAs take it (siw, cxgb4): rdma_rw
		 * sets ex.invalidate_rkey before it bumps the MR's key.
		 */
		if (wr->opcode == IB_WR_RDMA_READ_WITH_INV && wr->num_sge)
			wqe->imm_data = wr->sg_list[0].lkey;
		wqe->remote_addr = rdma_wr(wr)->remote_addr;
		wqe->rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		wqe->remote_addr = atomic_wr(wr)->remote_addr;
		wqe->rkey = atomic_wr(wr)->rkey;
		wqe->compare_add = atomic_wr(wr)->compare_add;
		wqe->swap = atomic_wr(wr)->swap;
		break;
	case IB_WR_REG_MR:
		/* Kernel QPs only: their ring is not mapped to a user. */
		wqe->remote_addr = (uintptr_t)reg_wr(wr)->mr;
		wqe->rkey = reg_wr(wr)->key;
		wqe->compare_add = reg_wr(wr)->access;
		return 0;
	case IB_WR_LOCAL_INV:
		wqe->rkey = wr->ex.invalidate_rkey;
		return 0;
	default:
		/* memory windows...: not on this device. */
		return -EOPNOTSUPP;
	}
	if (wr->send_flags & IB_SEND_INLINE) {
		/* Kernel users' addresses are kernel virtual addresses. */
		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > NTRDMA_MAX_INLINE - len)
				return -EINVAL;
			memcpy(wqe->inline_data + len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		wqe->inline_len = len;
		return 0;
	}
	wqe->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		wqe->sge[i].addr = wr->sg_list[i].addr;
		wqe->sge[i].length = wr->sg_list[i].length;
		wqe->sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

/* Kernel QPs: queue WRs into the SQ ring. */
static int ntrdma_post_send_kern(struct ntrdma_qp *qp,
				 const struct ib_send_wr *wr,
				 const struct ib_send_wr **bad_wr)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&qp->sq);
	unsigned long flags;
	u32 prod;
	int rc = 0;

	spin_lock_irqsave(&qp->sq_lock, flags);
	prod = ctl->prod;
	for (; wr; wr = wr->next) {
		if (prod - READ_ONCE(ctl->cons) >= qp->sq.entries) {
			rc = -ENOMEM;
			break;
		}
		rc = ntrdma_kern_wqe(qp, ntrdma_ring_slot(&qp->sq, prod), wr);
		if (rc)
			break;
		prod++;
	}
	/* release: the WQEs before the index that publishes them */
	smp_store_release(&ctl->prod, prod);
	if (qp->state == IB_QPS_ERR)
		ntrdma_sq_flush_ring(qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (rc)
		*bad_wr = wr;
	return rc;
}

/*
 * User QPs post into their mapped SQ and call this with no WR as the
 * doorbell; kernel QPs pass WRs. In ERR both complete at once, flushed
 * (which also lets ib_drain_qp() work). RESET, INIT and RTR refuse work
 * (-EINVAL, nothing consumed); SQD and SQE queue it.
 */
int ntrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct ntrdma_qp *qp = to_nqp(ibqp);
	enum ib_qp_state state = READ_ONCE(qp->state);
	unsigned long flags;
	int rc = 0;

	if (state == IB_QPS_RESET || state == IB_QPS_INIT ||
	    state == IB_QPS_RTR) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (!qp->user) {
		rc = ntrdma_post_send_kern(qp, wr, bad_wr);
	} else if (wr) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (state == IB_QPS_ERR) {
		spin_lock_irqsave(&qp->sq_lock, flags);
		if (qp->state == IB_QPS_ERR) {
			ntrdma_sq_flush_ring(qp);
			/* also the provider's doorbell for late receives */
			ntrdma_rq_flush(qp);
		}
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		return rc;
	}
	ntrdma_req_tx(qp);
	return rc;
}

/* Queue receive WQEs into an RQ or SRQ ring (kernel users). */
int ntrdma_ring_post_recv(struct ntrdma_ring *ring, spinlock_t *lock,
			  u32 max_sge, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(ring);
	struct ntrdma_recv_wqe *wqe;
	unsigned long flags;
	u32 prod;
	int i, rc = 0;

	/* Kernel users post from any context: a spinlock, no allocation. */
	spin_lock_irqsave(lock, flags);
	prod = ctl->prod;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > max_sge) {
			rc = -EINVAL;
			break;
		}
		if (prod - READ_ONCE(ctl->cons) >= ring->entries) {
			rc = -ENOMEM;
			break;
		}
		wqe = ntrdma_ring_slot(ring, prod);
		wqe->wr_id = wr->wr_id;
		wqe->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			wqe->sge[i].addr = wr->sg_list[i].addr;
			wqe->sge[i].length = wr->sg_list[i].length;
			wqe->sge[i].lkey = wr->sg_list[i].lkey;
		}
		prod++;
	}
	/* release: the WQEs before the index that publishes them */
	smp_store_release(&ctl->prod, prod);
	spin_unlock_irqrestore(lock, flags);
	if (rc)
		*bad_wr = wr;
	return rc;
}

/* Kernel QPs: queue receive WQEs (user QPs write their mapped RQ). */
int ntrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	struct ntrdma_qp *qp = to_nqp(ibqp);

	unsigned long flags;
	int rc;

	if (qp->user || ibqp->srq || READ_ONCE(qp->state) == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}
	rc = ntrdma_ring_post_recv(&qp->rq, &qp->rq_lock,
				   qp->cap.max_recv_sge, wr, bad_wr);
	/* In ERR, receives complete at once, flushed. */
	if (READ_ONCE(qp->state) == IB_QPS_ERR) {
		spin_lock_irqsave(&qp->rq_lock, flags);
		ntrdma_ring_flush(qp, &qp->rq, ibqp->recv_cq, IB_WC_RECV);
		spin_unlock_irqrestore(&qp->rq_lock, flags);
	}
	return rc;
}
