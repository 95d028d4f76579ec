// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libntrdma: the work request API of ibv_qp_ex (ibv_wr_start(), ibv_wr_send(),
 * ibv_wr_set_sge(), ..., ibv_wr_complete()) for the operations NTR_WR_OPS
 * names. Each ibv_wr_<opcode>() starts a WQE in the next free slot of the
 * mapped SQ, the setters that follow fill its data, and ibv_wr_complete()
 * publishes every WQE built since ibv_wr_start() at once, with the doorbell
 * ntr_post_send() uses (the kernel copies and checks each WQE, as for
 * ibv_post_send()). The first error (a full SQ, too many SGEs, inline data
 * too long) is kept and returned by ibv_wr_complete(), which then publishes
 * nothing; ibv_wr_abort() drops the lot. sq_lock is held from start to
 * complete or abort, as for one ibv_post_send() call.
 */
#include <errno.h>
#include <string.h>

#include "ntrdma.h"

static struct ntr_qp *qpx_to_qp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct ntr_qp, vqp.qp_ex);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct ntr_qp *qp = qpx_to_qp(qpx);

	pthread_spin_lock(&qp->sq_lock);
	qp->wr.start = ring_ctl(&qp->sq)->prod;
	qp->wr.prod = qp->wr.start;
	qp->wr.cur = NULL;
	qp->wr.err = 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct ntr_qp *qp = qpx_to_qp(qpx);
	int rc = qp->wr.err;

	if (!rc)
		rc = ntr_sq_publish(qp, qp->wr.start, qp->wr.prod);
	pthread_spin_unlock(&qp->sq_lock);
	return rc;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	pthread_spin_unlock(&qpx_to_qp(qpx)->sq_lock);
}

/* A new WQE of @opcode in the next slot (NULL, and the error kept, if full). */
static struct ntrdma_send_wqe *wr_new(struct ibv_qp_ex *qpx, uint32_t opcode)
{
	struct ntr_qp *qp = qpx_to_qp(qpx);
	struct ntrdma_ring_ctl *ctl = ring_ctl(&qp->sq);
	struct ntrdma_send_wqe *wqe;

	qp->wr.cur = NULL;
	if (qp->wr.err)
		return NULL;
	if (qp->wr.prod - __atomic_load_n(&ctl->cons, __ATOMIC_ACQUIRE) >=
	    qp->sq.entries) {
		qp->wr.err = ENOMEM;
		return NULL;
	}
	wqe = ring_slot(&qp->sq, qp->wr.prod++);
	memset(wqe, 0, offsetof(struct ntrdma_send_wqe, sge));
	wqe->wr_id = qpx->wr_id;
	wqe->opcode = opcode;
	wqe->flags = qpx->wr_flags & ~IBV_SEND_INLINE;
	qp->wr.cur = wqe;
	return wqe;
}

/* A new WQE of @opcode that names remote memory (NULL as wr_new()). */
static struct ntrdma_send_wqe *wr_remote(struct ibv_qp_ex *qpx,
					 uint32_t opcode, uint32_t rkey,
					 uint64_t remote_addr)
{
	struct ntrdma_send_wqe *wqe = wr_new(qpx, opcode);

	if (wqe) {
		wqe->rkey = rkey;
		wqe->remote_addr = remote_addr;
	}
	return wqe;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	wr_new(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct ntrdma_send_wqe *wqe = wr_new(qpx, IBV_WR_SEND_WITH_IMM);

	if (wqe)
		wqe->imm_data = imm_data;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ntrdma_send_wqe *wqe = wr_new(qpx, IBV_WR_SEND_WITH_INV);

	if (wqe) {
		wqe->imm_data = invalidate_rkey;
		wqe->rkey = invalidate_rkey;
	}
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ntrdma_send_wqe *wqe = wr_new(qpx, IBV_WR_LOCAL_INV);

	if (wqe)
		wqe->rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct ntrdma_send_wqe *wqe = wr_new(qpx, IBV_WR_BIND_MW);

	if (wqe)
		ntr_set_bind(wqe, mw, rkey, info);
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr)
{
	wr_remote(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm_data)
{
	struct ntrdma_send_wqe *wqe;

	wqe = wr_remote(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr);
	if (wqe)
		wqe->imm_data = imm_data;
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr)
{
	wr_remote(qpx, IBV_WR_RDMA_READ, rkey, remote_addr);
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	struct ntrdma_send_wqe *wqe;

	wqe = wr_remote(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr);
	if (wqe) {
		wqe->compare_add = compare;
		wqe->swap = swap;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	struct ntrdma_send_wqe *wqe;

	wqe = wr_remote(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr);
	if (wqe)
		wqe->compare_add = add;
}

/* The WQE the setters fill, or NULL (no WQE started, or an error). */
static struct ntrdma_send_wqe *wr_cur(struct ntr_qp *qp)
{
	if (!qp->wr.cur && !qp->wr.err)
		qp->wr.err = EINVAL;	/* a setter before any ibv_wr_<op>() */
	return qp->wr.err ? NULL : qp->wr.cur;
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ntrdma_send_wqe *wqe = wr_cur(qpx_to_qp(qpx));

	if (wqe)
		ntr_set_ud_addr(wqe, ah, remote_qpn, remote_qkey);
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct ntr_qp *qp = qpx_to_qp(qpx);
	struct ntrdma_send_wqe *wqe = wr_cur(qp);
	size_t i;

	if (!wqe)
		return;
	if (num_sge > qp->max_send_sge) {
		qp->wr.err = EINVAL;
		return;
	}
	wqe->num_sge = num_sge;
	for (i = 0; i < num_sge; i++) {
		wqe->sge[i].addr = sg_list[i].addr;
		wqe->sge[i].length = sg_list[i].length;
		wqe->sge[i].lkey = sg_list[i].lkey;
	}
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(qpx, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct ntr_qp *qp = qpx_to_qp(qpx);
	struct ntrdma_send_wqe *wqe = wr_cur(qp);
	size_t i, len = 0;

	if (!wqe)
		return;
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->max_inline - len) {
			qp->wr.err = EINVAL;
			return;
		}
		memcpy(wqe->inline_data + len, buf_list[i].addr,
		       buf_list[i].length);
		len += buf_list[i].length;
	}
	wqe->flags |= IBV_SEND_INLINE;
	wqe->num_sge = 0;
	wqe->inline_len = len;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
			       size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

/**
 * ntr_wr_init() - give a QP created with send_ops_flags its WR API
 * @qp: the QP (vqp.comp_mask has VERBS_QP_EX)
 *
 * Operations outside NTR_WR_OPS stay NULL: create refused them.
 */
void ntr_wr_init(struct ntr_qp *qp)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;
	qpx->wr_send = wr_send;
	qpx->wr_send_imm = wr_send_imm;
	qpx->wr_send_inv = wr_send_inv;
	qpx->wr_local_inv = wr_local_inv;
	qpx->wr_bind_mw = wr_bind_mw;
	qpx->wr_rdma_write = wr_rdma_write;
	qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	qpx->wr_rdma_read = wr_rdma_read;
	qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
}
