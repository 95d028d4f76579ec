// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libntrdma: the rdma-core userspace provider for NTRDMA verbs devices
 * (ntrdma%d). Control verbs go through ibv_cmd_*; queues are rings in kernel
 * memory mapped here (ntrdma-abi.h): poll_cq and post_recv run without system
 * calls, post_send writes WQEs into the mapped SQ and enters the kernel only
 * to ring the doorbell, req_notify_cq sets the CQ's arm word.
 *
 * Everything specific to one rdma-core release is in ntrdma_private_abi<PABI>.h
 * (the PABI of the libibverbs built against: CMakeLists.txt).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ntrdma.h"

static int ring_map(struct ntr_ring *r, struct ibv_context *ctx,
		    uint64_t offset, uint64_t size, uint32_t entries,
		    uint32_t stride)
{
	if (!entries || (entries & (entries - 1)) ||
	    size < NTRDMA_RING_CTL_SIZE + (uint64_t)entries * stride)
		return EINVAL;
	r->buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		      ctx->cmd_fd, offset);
	if (r->buf == MAP_FAILED) {
		r->buf = NULL;
		return errno;
	}
	r->size = size;
	r->entries = entries;
	r->stride = stride;
	return 0;
}

static void ring_unmap(struct ntr_ring *r)
{
	if (r->buf)
		munmap(r->buf, r->size);
	r->buf = NULL;
}

/* ---- device and port ---- */

static int ntr_query_device_ex(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);

	return ibv_cmd_query_device_any(context, input, attr, attr_size,
					&resp, &resp_size);
}

static int ntr_query_port(struct ibv_context *context, uint8_t port,
			  struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

/* ---- PD, MR ---- */

static struct ibv_pd *ntr_alloc_pd(struct ibv_context *context)
{
	struct ibv_alloc_pd cmd;
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_pd *pd;
	int rc;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	rc = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp,
			      sizeof(resp));
	if (rc) {
		free(pd);
		errno = rc;
		return NULL;
	}
	return pd;
}

static int ntr_dealloc_pd(struct ibv_pd *pd)
{
	int rc = ibv_cmd_dealloc_pd(pd);

	if (!rc)
		free(pd);
	return rc;
}

static struct ibv_mr *ntr_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access)
{
	struct ibv_reg_mr cmd;
	struct ib_uverbs_reg_mr_resp resp;
	struct verbs_mr *vmr;
	int rc;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	rc = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			    sizeof(cmd), &resp, sizeof(resp));
	if (rc) {
		free(vmr);
		errno = rc;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/* The kernel registers anew (new keys) and drops the old registration. */
static int ntr_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
				access, pd, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
}

static int ntr_dereg_mr(struct verbs_mr *vmr)
{
	int rc = ibv_cmd_dereg_mr(vmr);

	if (!rc)
		free(vmr);
	return rc;
}

/* ---- CQ ---- */

NTR_CMD(ntr_create_cq_resp, ib_uverbs_create_cq_resp,
	struct ntrdma_create_cq_resp drv);

/**
 * ntr_cq_create() - a CQ and its mapped ring
 * @context: the device context
 * @cqe: entries wanted
 * @channel: completion channel, or NULL
 * @comp_vector: completion vector
 *
 * Return: the CQ, or NULL with errno set.
 */
struct ntr_cq *ntr_cq_create(struct ibv_context *context, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ntr_create_cq_resp resp = {};
	struct ibv_create_cq cmd;
	struct ntr_cq *cq;
	int rc;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	rc = ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->vcq.cq,
			       &cmd, sizeof(cmd), &resp.ibv_cmd, sizeof(resp));
	if (rc)
		goto err_free;
	rc = ring_map(&cq->ring, context, resp.drv.ring_offset,
		      resp.drv.ring_size, resp.drv.entries,
		      sizeof(struct ntrdma_cqe));
	if (rc)
		goto err_destroy;
	return cq;

err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free:
	pthread_spin_destroy(&cq->lock);
	free(cq);
	errno = rc;
	return NULL;
}

static struct ibv_cq *ntr_create_cq(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector)
{
	struct ntr_cq *cq = ntr_cq_create(context, cqe, channel, comp_vector);

	return cq ? &cq->vcq.cq : NULL;
}

static int ntr_destroy_cq(struct ibv_cq *ibcq)
{
	struct ntr_cq *cq = to_cq(ibcq);
	int rc = ibv_cmd_destroy_cq(ibcq);

	if (rc)
		return rc;
	ring_unmap(&cq->ring);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/* The next entry of the CQ's own ring into @e (lock held). */
static bool cq_ring_take(struct ntr_cq *cq, struct ntrdma_cqe *e)
{
	struct ntrdma_ring_ctl *ctl = ring_ctl(&cq->ring);
	uint32_t prod = __atomic_load_n(&ctl->prod, __ATOMIC_ACQUIRE);
	uint32_t cons = ctl->cons;

	if (prod == cons || prod - cons > cq->ring.entries)
		return false;
	*e = *(const struct ntrdma_cqe *)ring_slot(&cq->ring, cons);
	__atomic_store_n(&ctl->cons, cons + 1, __ATOMIC_RELEASE);
	return true;
}

/*
 * The completion in @qp's next RQ slot, if it is there, into @e; not an
 * error while @errors_wait (see ntr_cq_take()).
 */
static bool rq_slot_take(struct ntr_qp *qp, struct ntrdma_cqe *e,
			 bool errors_wait)
{
	uint32_t idx = qp->rq_done;
	const struct ntrdma_recv_wqe *w;

	if (idx == __atomic_load_n(&ring_ctl(&qp->rq)->prod, __ATOMIC_ACQUIRE))
		return false;
	w = ring_slot(&qp->rq, idx);
	if (__atomic_load_n(&w->done.seq, __ATOMIC_ACQUIRE) != idx + 1)
		return false;
	if (errors_wait && w->done.status != IBV_WC_SUCCESS)
		return false;
	e->wr_id = qp->rq_wrid[idx & (qp->rq.entries - 1)];
	e->status = w->done.status;
	e->opcode = w->done.opcode;
	e->byte_len = w->done.byte_len;
	e->qp_num = qp->vqp.qp.qp_num;
	e->imm_data = w->done.imm_data;
	e->wc_flags = w->done.wc_flags;
	e->src_qp = w->done.src_qp;
	e->vendor_err = w->done.vendor_err;
	/* release: done reading the slot before post_recv may reuse it */
	__atomic_store_n(&qp->rq_done, idx + 1, __ATOMIC_RELEASE);
	return true;
}

/* The next completion in the RQ slots of @cq's QPs, round robin. */
static bool cq_rq_take(struct ntr_cq *cq, struct ntrdma_cqe *e,
		       bool errors_wait)
{
	struct ntr_qp *qp = cq->rq_next;

	if (!qp)
		return false;
	do {
		qp = qp->rq_nxt;
		if (rq_slot_take(qp, e, errors_wait)) {
			cq->rq_next = qp;
			return true;
		}
	} while (qp != cq->rq_next);
	return false;
}

/**
 * ntr_cq_take() - the next completion of @cq
 * @cq: the CQ (its lock held)
 * @e: where to
 *
 * The CQ's ring and its QPs' RQ slots take turns, but an RQ slot's error
 * or flush waits while the ring holds entries: a QP's send error comes
 * before the receive flushes it causes, as the kernel wrote them.
 *
 * Return: true when there was one.
 */
bool ntr_cq_take(struct ntr_cq *cq, struct ntrdma_cqe *e)
{
	struct ntrdma_ring_ctl *ctl = ring_ctl(&cq->ring);
	bool ring = __atomic_load_n(&ctl->prod, __ATOMIC_ACQUIRE) != ctl->cons;

	cq->rq_turn = !cq->rq_turn;
	if (cq->rq_turn)
		return cq_rq_take(cq, e, ring) || cq_ring_take(cq, e);
	return cq_ring_take(cq, e) || cq_rq_take(cq, e, false);
}

/* The QPs' copies of an arm word the kernel took: the peer stops kicking. */
static void cq_rq_disarm(struct ntr_cq *cq)
{
	struct ntr_qp *qp = cq->rq_next;

	if (!cq->rq_armed || ring_ctl(&cq->ring)->arm || !qp)
		return;
	do {
		__atomic_store_n(&ring_ctl(&qp->rq)->cq_arm, 0,
				 __ATOMIC_RELAXED);
		qp = qp->rq_nxt;
	} while (qp != cq->rq_next);
	cq->rq_armed = false;
}

static int ntr_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct ntr_cq *cq = to_cq(ibcq);
	struct ntrdma_cqe e;
	int n = 0;

	pthread_spin_lock(&cq->lock);
	cq_rq_disarm(cq);
	for (; n < ne && ntr_cq_take(cq, &e); n++) {
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = e.wr_id;
		wc[n].status = e.status;
		wc[n].opcode = e.opcode;
		wc[n].vendor_err = e.vendor_err;
		wc[n].byte_len = e.byte_len;
		wc[n].imm_data = e.imm_data;
		wc[n].qp_num = e.qp_num;
		wc[n].src_qp = e.src_qp;
		wc[n].wc_flags = e.wc_flags;
	}
	pthread_spin_unlock(&cq->lock);
	return n;
}

static int ntr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct ntr_cq *cq = to_cq(ibcq);
	uint32_t arm = solicited_only ? NTRDMA_CQ_ARM_SOLICITED :
					NTRDMA_CQ_ARM_NEXT;
	struct ntr_qp *qp;

	pthread_spin_lock(&cq->lock);
	__atomic_store_n(&ring_ctl(&cq->ring)->arm, arm, __ATOMIC_SEQ_CST);
	/* The copies the peer reads before it places into an RQ slot. */
	qp = cq->rq_next;
	if (qp) {
		do {
			__atomic_store_n(&ring_ctl(&qp->rq)->cq_arm, arm,
					 __ATOMIC_SEQ_CST);
			qp = qp->rq_nxt;
		} while (qp != cq->rq_next);
		cq->rq_armed = true;
	}
	pthread_spin_unlock(&cq->lock);
	/*
	 * The arm before any later read of prod (the poll that catches a
	 * completion posted meanwhile): the kernel stores prod, then reads
	 * arm. A seq_cst store alone does not order a later acquire load.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/* @qp's receives complete in its RQ slots: @cq polls them. */
static void cq_rq_add(struct ntr_cq *cq, struct ntr_qp *qp)
{
	uint32_t arm;

	pthread_spin_lock(&cq->lock);
	qp->rcq = cq;
	if (!cq->rq_next) {
		qp->rq_prev = qp;
		qp->rq_nxt = qp;
	} else {
		qp->rq_nxt = cq->rq_next->rq_nxt;
		qp->rq_prev = cq->rq_next;
		qp->rq_nxt->rq_prev = qp;
		cq->rq_next->rq_nxt = qp;
	}
	cq->rq_next = qp;
	/* armed before the QP existed: the peer must kick for it too */
	arm = __atomic_load_n(&ring_ctl(&cq->ring)->arm, __ATOMIC_ACQUIRE);
	if (arm) {
		__atomic_store_n(&ring_ctl(&qp->rq)->cq_arm, arm,
				 __ATOMIC_SEQ_CST);
		cq->rq_armed = true;
	}
	pthread_spin_unlock(&cq->lock);
}

static void cq_rq_del(struct ntr_qp *qp)
{
	struct ntr_cq *cq = qp->rcq;

	if (!cq)
		return;
	pthread_spin_lock(&cq->lock);
	if (qp->rq_nxt == qp) {
		cq->rq_next = NULL;
	} else {
		qp->rq_prev->rq_nxt = qp->rq_nxt;
		qp->rq_nxt->rq_prev = qp->rq_prev;
		if (cq->rq_next == qp)
			cq->rq_next = qp->rq_prev;
	}
	qp->rcq = NULL;
	pthread_spin_unlock(&cq->lock);
}

/* ---- QP ---- */

NTR_CMD(ntr_create_qp_resp, ib_uverbs_create_qp_resp,
	struct ntrdma_create_qp_resp drv);

/* The rings of a QP the kernel created (its answer @r); granted @cap. */
static int ntr_qp_map(struct ntr_qp *qp, struct ibv_context *ctx,
		      const struct ntrdma_create_qp_resp *r,
		      const struct ibv_qp_cap *cap, struct ibv_cq *recv_cq)
{
	int rc;

	rc = ring_map(&qp->sq, ctx, r->sq_offset, r->sq_size, r->sq_entries,
		      sizeof(struct ntrdma_send_wqe));
	if (rc)
		return rc;
	rc = ring_map(&qp->rq, ctx, r->rq_offset, r->rq_size, r->rq_entries,
		      sizeof(struct ntrdma_recv_wqe));
	if (rc) {
		ring_unmap(&qp->sq);
		return rc;
	}
	qp->max_send_sge = cap->max_send_sge;
	qp->max_recv_sge = cap->max_recv_sge;
	qp->max_inline = cap->max_inline_data;
	if ((r->flags & NTRDMA_QP_RQ_DONE) && recv_cq) {
		qp->rq_wrid = calloc(qp->rq.entries, sizeof(*qp->rq_wrid));
		if (!qp->rq_wrid) {
			ring_unmap(&qp->rq);
			ring_unmap(&qp->sq);
			return ENOMEM;
		}
		cq_rq_add(to_cq(recv_cq), qp);
	}
	return 0;
}

static struct ntr_qp *ntr_qp_alloc(void)
{
	struct ntr_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return qp;
}

static void ntr_qp_free(struct ntr_qp *qp)
{
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp->rq_wrid);
	free(qp);
}

static struct ibv_qp *ntr_create_qp(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr)
{
	struct ntr_create_qp_resp resp = {};
	struct ibv_create_qp cmd;
	struct ntr_qp *qp;
	int rc;

	qp = ntr_qp_alloc();
	if (!qp)
		return NULL;
	rc = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd),
			       &resp.ibv_cmd, sizeof(resp));
	if (rc)
		goto err_free;
	/* ibv_cmd_create_qp wrote the granted capabilities into attr. */
	rc = ntr_qp_map(qp, pd->context, &resp.drv, &attr->cap,
			attr->recv_cq);
	if (rc) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		goto err_free;
	}
	return &qp->vqp.qp;

err_free:
	ntr_qp_free(qp);
	errno = rc;
	return NULL;
}

/*
 * ibv_create_qp_ex(): with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS the QP carries
 * the work request API (ibv_qp_ex, ntrdma_wr.c) for the operations
 * NTR_WR_OPS names; anything else the device does not do: EOPNOTSUPP.
 */
static struct ibv_qp *ntr_create_qp_ex(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr)
{
	const uint32_t known = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	bool wr_api = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	struct ntr_create_qp_resp resp = {};
	struct ibv_create_qp cmd;
	struct ntr_qp *qp;
	int rc = EOPNOTSUPP;

	if ((attr->comp_mask & ~known) ||
	    (wr_api && (attr->send_ops_flags & ~(uint64_t)NTR_WR_OPS)) ||
	    (wr_api && attr->qp_type == IBV_QPT_UC &&
	     (attr->send_ops_flags & NTR_UC_NO_OPS)))
		goto err;
	rc = ENOMEM;
	qp = ntr_qp_alloc();
	if (!qp)
		goto err;
	rc = ibv_cmd_create_qp_ex(context, &qp->vqp, attr, &cmd, sizeof(cmd),
				  &resp.ibv_cmd, sizeof(resp));
	if (!rc)
		rc = ntr_qp_map(qp, context, &resp.drv, &attr->cap,
				attr->recv_cq);
	if (rc) {
		if (qp->vqp.qp.context)
			ibv_cmd_destroy_qp(&qp->vqp.qp);
		ntr_qp_free(qp);
		goto err;
	}
	if (wr_api) {
		qp->vqp.comp_mask |= VERBS_QP_EX;
		ntr_wr_init(qp);
	}
	return &qp->vqp.qp;
err:
	errno = rc;
	return NULL;
}

static int ntr_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

/*
 * Remove the completions of QP @qpn that @ibcq still holds unpolled (the
 * QP went to RESET, as HCAs do): the entries of other QPs move up towards
 * the producer, in order, and the consumer index passes the gap. Only
 * [cons, prod) is touched, all of it ours; the kernel appends beyond.
 */
static void ntr_cq_clean(struct ibv_cq *ibcq, uint32_t qpn)
{
	struct ntr_cq *cq = to_cq(ibcq);
	struct ntrdma_ring_ctl *ctl = ring_ctl(&cq->ring);
	struct ntrdma_cqe *e;
	uint32_t prod, cons, i, dst;

	pthread_spin_lock(&cq->lock);
	prod = __atomic_load_n(&ctl->prod, __ATOMIC_ACQUIRE);
	cons = ctl->cons;
	if (prod - cons <= cq->ring.entries) {
		for (i = prod, dst = prod; i != cons;) {
			e = ring_slot(&cq->ring, --i);
			if (e->qp_num == qpn)
				continue;
			if (--dst != i)
				memcpy(ring_slot(&cq->ring, dst), e, sizeof(*e));
		}
		__atomic_store_n(&ctl->cons, dst, __ATOMIC_RELEASE);
	}
	pthread_spin_unlock(&cq->lock);
}

static int ntr_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask)
{
	struct ibv_modify_qp cmd = {};
	int rc;

	/* The kernel resets both rings' indexes on the way to RESET. */
	rc = ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
	if (!rc && (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) {
		if (to_qp(qp)->rcq) {
			pthread_spin_lock(&to_qp(qp)->rcq->lock);
			to_qp(qp)->rq_done = 0;
			pthread_spin_unlock(&to_qp(qp)->rcq->lock);
		}
		ntr_cq_clean(qp->send_cq, qp->qp_num);
		if (qp->recv_cq && qp->recv_cq != qp->send_cq)
			ntr_cq_clean(qp->recv_cq, qp->qp_num);
	}
	return rc;
}

static int ntr_destroy_qp(struct ibv_qp *ibqp)
{
	struct ntr_qp *qp = to_qp(ibqp);
	int rc = ibv_cmd_destroy_qp(ibqp);

	if (rc)
		return rc;
	cq_rq_del(qp);
	ring_unmap(&qp->sq);
	ring_unmap(&qp->rq);
	ntr_qp_free(qp);
	return 0;
}

/*
 * Write receive WQEs into an RQ or SRQ ring; no system call. @done: the
 * QP's next slot to complete (NTRDMA_QP_RQ_DONE), else NULL: the kernel's
 * consumer index says which slots are free.
 */
static int ring_post_recv(struct ntr_ring *ring, pthread_spinlock_t *lock,
			  uint32_t max_sge, const uint32_t *done,
			  uint64_t *wrid, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr)
{
	struct ntrdma_ring_ctl *ctl = ring_ctl(ring);
	const uint32_t *free_from = done ? done : &ctl->cons;
	struct ntrdma_recv_wqe *wqe;
	uint32_t prod;
	int i, rc = 0;

	pthread_spin_lock(lock);
	prod = ctl->prod;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge) {
			rc = EINVAL;
			break;
		}
		if (prod - __atomic_load_n(free_from, __ATOMIC_ACQUIRE) >=
		    ring->entries) {
			rc = ENOMEM;
			break;
		}
		wqe = ring_slot(ring, prod);
		wqe->wr_id = wr->wr_id;
		if (wrid)
			wrid[prod & (ring->entries - 1)] = wr->wr_id;
		wqe->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			wqe->sge[i].addr = wr->sg_list[i].addr;
			wqe->sge[i].length = wr->sg_list[i].length;
			wqe->sge[i].lkey = wr->sg_list[i].lkey;
		}
		wqe->done.seq = prod;	/* not complete: never prod + 1 */
		prod++;
	}
	__atomic_store_n(&ctl->prod, prod, __ATOMIC_RELEASE);
	pthread_spin_unlock(lock);
	if (rc)
		*bad_wr = wr;
	return rc;
}

static int ntr_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct ntr_qp *qp = to_qp(ibqp);
	struct ibv_send_wr *dummy;
	int rc;

	/*
	 * Receives go to the SRQ; none in RESET (libibverbs keeps the state
	 * its modify_qp set, and only that leads to RESET).
	 */
	if (ibqp->srq || ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	rc = ring_post_recv(&qp->rq, &qp->rq_lock, qp->max_recv_sge,
			    qp->rcq ? &qp->rq_done : NULL, qp->rq_wrid, wr,
			    bad_wr);
	/* The QP is in ERR: the kernel flushes what we posted (ntrdma-abi.h). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ring_ctl(&qp->rq)->arm, __ATOMIC_ACQUIRE) ==
	    NTRDMA_RING_FLUSH)
		ibv_cmd_post_send(ibqp, NULL, &dummy);
	return rc;
}

static int ntr_build_send_wqe(struct ntr_qp *qp, struct ntrdma_send_wqe *wqe,
			      const struct ibv_send_wr *wr)
{
	uint32_t len = 0;
	int i;

	memset(wqe, 0, offsetof(struct ntrdma_send_wqe, sge));
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->flags = wr->send_flags;
	wqe->imm_data = wr->imm_data;
	if (wr->num_sge < 0)
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD && wr->opcode != IBV_WR_SEND &&
	    wr->opcode != IBV_WR_SEND_WITH_IMM)
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UC &&
	    (wr->opcode == IBV_WR_RDMA_READ ||
	     wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
		return EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > qp->max_inline - len)
				return EINVAL;
			memcpy(wqe->inline_data + len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		wqe->inline_len = len;
	} else {
		if ((uint32_t)wr->num_sge > qp->max_send_sge)
			return EINVAL;
		wqe->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++) {
			wqe->sge[i].addr = wr->sg_list[i].addr;
			wqe->sge[i].length = wr->sg_list[i].length;
			wqe->sge[i].lkey = wr->sg_list[i].lkey;
		}
	}
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wqe->remote_addr = wr->wr.rdma.remote_addr;
		wqe->rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wqe->remote_addr = wr->wr.atomic.remote_addr;
		wqe->rkey = wr->wr.atomic.rkey;
		wqe->compare_add = wr->wr.atomic.compare_add;
		wqe->swap = wr->wr.atomic.swap;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		/* the rkey to invalidate (a union with imm_data) */
		wqe->rkey = wr->invalidate_rkey;
		break;
	case IBV_WR_BIND_MW:
		if (!wr->bind_mw.mw)
			return EINVAL;
		ntr_set_bind(wqe, wr->bind_mw.mw, wr->bind_mw.rkey,
			     &wr->bind_mw.bind_info);
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		if (qp->vqp.qp.qp_type != IBV_QPT_UD)
			break;
		if (!wr->wr.ud.ah)
			return EINVAL;
		ntr_set_ud_addr(wqe, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
				wr->wr.ud.remote_qkey);
		break;
	default:
		return EINVAL;
	}
	return 0;
}

/**
 * ntr_set_ud_addr() - address a UD send WQE
 * @wqe: the WQE
 * @ah: the address handle (ours)
 * @remote_qpn: the destination QP
 * @remote_qkey: its Q_Key (bit 31 set: the QP's own, the kernel decides)
 */
void ntr_set_ud_addr(struct ntrdma_send_wqe *wqe, struct ibv_ah *ah,
		     uint32_t remote_qpn, uint32_t remote_qkey)
{
	wqe->remote_qpn = remote_qpn;
	wqe->rkey = remote_qkey;
	wqe->ud_flags = to_ah(ah)->loopback ? NTRDMA_UD_LOOPBACK : 0;
}

/**
 * ntr_set_bind() - a BIND_MW WQE (ntrdma-abi.h: how the kernel reads it)
 * @wqe: the WQE
 * @mw: the window (its current key names it)
 * @rkey: the key it takes
 * @info: the MR, range and access (no MR: unbind, type 1)
 */
void ntr_set_bind(struct ntrdma_send_wqe *wqe, struct ibv_mw *mw,
		  uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	wqe->rkey = mw->rkey;
	wqe->imm_data = rkey;
	wqe->remote_addr = info->addr;
	wqe->compare_add = info->mr ? info->length : 0;
	wqe->swap = (uint64_t)info->mw_access_flags << 32 |
		    (info->mr ? info->mr->lkey : 0);
}

/* ---- MW ---- */

static int ntr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);

static struct ibv_mw *ntr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw;
	int rc;

	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	rc = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			      sizeof(resp));
	if (rc) {
		free(mw);
		errno = rc;
		return NULL;
	}
	return mw;
}

static int ntr_dealloc_mw(struct ibv_mw *mw)
{
	int rc = ibv_cmd_dealloc_mw(mw);

	if (!rc)
		free(mw);
	return rc;
}

/*
 * ibv_bind_mw() (type 1): a BIND_MW work request in the SQ; the window's
 * key changes (its tag) at once here, in the kernel when the WQE runs.
 */
static int ntr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr = {
		.wr_id = bind->wr_id,
		.opcode = IBV_WR_BIND_MW,
		.send_flags = bind->send_flags,
	};
	struct ibv_send_wr *bad;
	int rc;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	rc = ntr_post_send(qp, &wr, &bad);
	if (!rc)
		mw->rkey = wr.bind_mw.rkey;
	return rc;
}

/* ---- AH (UD) ---- */

/* Whether @gid is one of the (non-zero) GIDs of @port. */
static bool ntr_gid_is_ours(struct ibv_context *ctx, uint8_t port,
			    const union ibv_gid *gid)
{
	static const union ibv_gid zero;
	union ibv_gid own;
	int i;

	for (i = 0; !ibv_query_gid(ctx, port, i, &own); i++)
		if (memcmp(&own, &zero, sizeof(own)) &&
		    !memcmp(&own, gid, sizeof(own)))
			return true;
	return false;
}

static struct ibv_ah *ntr_create_ah(struct ibv_pd *pd,
				    struct ibv_ah_attr *attr)
{
	struct ntr_ah *ah;

	if (attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->loopback = attr->is_global &&
		       ntr_gid_is_ours(pd->context, 1, &attr->grh.dgid);
	return &ah->ibah;
}

static int ntr_destroy_ah(struct ibv_ah *ibah)
{
	free(to_ah(ibah));
	return 0;
}

/**
 * ntr_sq_publish() - hand the WQEs [@start, @prod) to the kernel
 * @qp: the QP (sq_lock held)
 * @start: the producer index before them
 * @prod: after them
 *
 * One system call as the doorbell, only when needed (ntrdma-abi.h).
 *
 * Return: 0, or the doorbell's error (then nothing was consumed and the
 * producer index is back at @start).
 */
int ntr_sq_publish(struct ntr_qp *qp, uint32_t start, uint32_t prod)
{
	struct ntrdma_ring_ctl *ctl = ring_ctl(&qp->sq);
	struct ibv_send_wr *dummy;
	int db;

	if (prod == start)
		return 0;
	__atomic_store_n(&ctl->prod, prod, __ATOMIC_RELEASE);
	/*
	 * While an earlier WQE is outstanding the kernel looks at prod again
	 * when it completes: no system call.
	 */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ctl->cons, __ATOMIC_ACQUIRE) != start &&
	    __atomic_load_n(&ctl->arm, __ATOMIC_ACQUIRE) != NTRDMA_RING_FLUSH)
		return 0;
	db = ibv_cmd_post_send(&qp->vqp.qp, NULL, &dummy);
	if (db)	/* refused (QP not ready to send): nothing consumed */
		__atomic_store_n(&ctl->prod, start, __ATOMIC_RELEASE);
	return db;
}

/*
 * Write the WQEs into the mapped SQ, then one system call as the doorbell.
 * The kernel copies and checks every WQE before using it.
 */
static int ntr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr)
{
	struct ntr_qp *qp = to_qp(ibqp);
	struct ntrdma_ring_ctl *ctl = ring_ctl(&qp->sq);
	struct ibv_send_wr *first = wr;
	uint32_t start, prod;
	int rc = 0, db;

	pthread_spin_lock(&qp->sq_lock);
	start = prod = ctl->prod;
	for (; wr; wr = wr->next) {
		if (prod - __atomic_load_n(&ctl->cons, __ATOMIC_ACQUIRE) >=
		    qp->sq.entries) {
			rc = ENOMEM;
			break;
		}
		rc = ntr_build_send_wqe(qp, ring_slot(&qp->sq, prod), wr);
		if (rc)
			break;
		prod++;
	}
	db = ntr_sq_publish(qp, start, prod);
	if (db) {
		rc = db;
		wr = first;
	}
	pthread_spin_unlock(&qp->sq_lock);
	if (rc)
		*bad_wr = wr;
	return rc;
}

/* ---- SRQ ---- */

NTR_CMD(ntr_create_srq_resp, ib_uverbs_create_srq_resp,
	struct ntrdma_create_srq_resp drv);

static struct ibv_srq *ntr_create_srq(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr)
{
	struct ntr_create_srq_resp resp = {};
	struct ibv_create_srq cmd;
	struct ntr_srq *srq;
	int rc;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	rc = ibv_cmd_create_srq(pd, &srq->ibsrq, attr, &cmd, sizeof(cmd),
				&resp.ibv_cmd, sizeof(resp));
	if (rc)
		goto err_free;
	rc = ring_map(&srq->ring, pd->context, resp.drv.ring_offset,
		      resp.drv.ring_size, resp.drv.entries,
		      sizeof(struct ntrdma_recv_wqe));
	if (rc)
		goto err_destroy;
	srq->max_sge = attr->attr.max_sge;
	return &srq->ibsrq;

err_destroy:
	ibv_cmd_destroy_srq(&srq->ibsrq);
err_free:
	pthread_spin_destroy(&srq->lock);
	free(srq);
	errno = rc;
	return NULL;
}

static int ntr_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			  int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int ntr_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int ntr_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ntr_srq *srq = to_srq(ibsrq);
	int rc = ibv_cmd_destroy_srq(ibsrq);

	if (rc)
		return rc;
	ring_unmap(&srq->ring);
	pthread_spin_destroy(&srq->lock);
	free(srq);
	return 0;
}

static int ntr_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr)
{
	struct ntr_srq *srq = to_srq(ibsrq);

	return ring_post_recv(&srq->ring, &srq->lock, srq->max_sge, NULL, NULL,
			      wr, bad_wr);
}

/* ---- context and device ---- */

static void ntr_free_context(struct ibv_context *ibctx);

static const struct verbs_context_ops ntr_ctx_ops = {
	.alloc_mw = ntr_alloc_mw,
	.alloc_pd = ntr_alloc_pd,
	.bind_mw = ntr_bind_mw,
	.create_ah = ntr_create_ah,
	.create_cq = ntr_create_cq,
	.create_cq_ex = ntr_create_cq_ex,
	.create_qp = ntr_create_qp,
	.create_qp_ex = ntr_create_qp_ex,
	.create_srq = ntr_create_srq,
	.dealloc_mw = ntr_dealloc_mw,
	.dealloc_pd = ntr_dealloc_pd,
	.dereg_mr = ntr_dereg_mr,
	.destroy_ah = ntr_destroy_ah,
	.destroy_cq = ntr_destroy_cq,
	.destroy_qp = ntr_destroy_qp,
	.destroy_srq = ntr_destroy_srq,
	.free_context = ntr_free_context,
	.modify_qp = ntr_modify_qp,
	.modify_srq = ntr_modify_srq,
	.poll_cq = ntr_poll_cq,
	.post_recv = ntr_post_recv,
	.post_send = ntr_post_send,
	.post_srq_recv = ntr_post_srq_recv,
	.query_device_ex = ntr_query_device_ex,
	.query_port = ntr_query_port,
	.query_qp = ntr_query_qp,
	.query_srq = ntr_query_srq,
	.reg_mr = ntr_reg_mr,
	.req_notify_cq = ntr_req_notify_cq,
	.rereg_mr = ntr_rereg_mr,
};

NTR_CMD(ntr_get_context_resp, ib_uverbs_get_context_resp,
	struct ntrdma_alloc_ucontext_resp drv);

static struct verbs_context *ntr_alloc_context(struct ibv_device *ibdev,
					       int cmd_fd, void *private_data)
{
	struct ntr_get_context_resp resp = {};
	struct ibv_get_context cmd;
	struct ntr_context *ctx;

	(void)private_data;
	ctx = _verbs_init_and_alloc_context(ibdev, cmd_fd, sizeof(*ctx),
					    &((struct ntr_context *)NULL)->vctx,
					    0 /* RDMA_DRIVER_UNKNOWN */);
	if (!ctx)
		return NULL;
	if (ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp.ibv_cmd,
				sizeof(resp)))
		goto err;
	/* Refuse a kernel whose rings we would misread. */
	if (resp.drv.abi_version != NTRDMA_UVERBS_ABI_VERSION ||
	    resp.drv.ring_ctl_size != NTRDMA_RING_CTL_SIZE ||
	    resp.drv.cqe_size != sizeof(struct ntrdma_cqe) ||
	    resp.drv.send_wqe_size != sizeof(struct ntrdma_send_wqe) ||
	    resp.drv.recv_wqe_size != sizeof(struct ntrdma_recv_wqe)) {
		errno = EPROTO;
		goto err;
	}
	ctx->caps = resp.drv;
	verbs_set_ops(&ctx->vctx, &ntr_ctx_ops);
	return &ctx->vctx;

err:
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	return NULL;
}

static void ntr_free_context(struct ibv_context *ibctx)
{
	struct ntr_context *ctx = to_ctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static struct verbs_device *ntr_alloc_device(struct verbs_sysfs_dev *sysfs)
{
	struct ntr_device *dev;

	(void)sysfs;
	dev = calloc(1, sizeof(*dev));
	return dev ? &dev->vdev : NULL;
}

static void ntr_uninit_device(struct verbs_device *vdev)
{
	free(container_of(vdev, struct ntr_device, vdev));
}

/* An out-of-tree kernel driver has no RDMA_DRIVER_* id: match by name. */
static const struct verbs_match_ent ntr_match_table[] = {
	NTR_VERBS_NAME_MATCH("ntrdma"),
	{},
};

static const struct verbs_device_ops ntr_dev_ops = {
	.name = "ntrdma",
	.match_min_abi_version = NTRDMA_UVERBS_ABI_VERSION,
	.match_max_abi_version = NTRDMA_UVERBS_ABI_VERSION,
	.match_table = ntr_match_table,
	.alloc_device = ntr_alloc_device,
	.uninit_device = ntr_uninit_device,
	.alloc_context = ntr_alloc_context,
};

NTR_PROVIDER_DRIVER(ntr_dev_ops)
