// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libntrdma: extended CQs (ibv_create_cq_ex) and their polling API
 * (ibv_start_poll(), ibv_next_poll(), ibv_end_poll(), ibv_wc_read_*()) over
 * the same mapped CQ ring as ibv_poll_cq(). ibv_start_poll() takes the
 * CQ's lock and holds it until ibv_end_poll() (or returns ENOENT with it
 * released, as the API says); each poll takes the next completion
 * (ntr_cq_take(): the CQ's ring or an RQ slot) into a copy the readers
 * read. The standard wc_flags are served (SLID, SL and
 * DLID path bits read 0: one point-to-point link); completion timestamps
 * and the other extensions are refused with EOPNOTSUPP.
 */
#include <errno.h>

#include "ntrdma.h"

#define NTR_CQ_EX_FLAGS IBV_WC_STANDARD_FLAGS

static struct ntr_cq *to_cq_ex(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct ntr_cq, vcq.cq_ex);
}

/* Take the next completion into the CQ's public fields: 0 or ENOENT. */
static int cq_ex_load(struct ntr_cq *cq)
{
	if (!ntr_cq_take(cq, &cq->ex_e)) {
		cq->ex_cur = NULL;
		return ENOENT;
	}
	cq->ex_cur = &cq->ex_e;
	cq->vcq.cq_ex.wr_id = cq->ex_cur->wr_id;
	cq->vcq.cq_ex.status = cq->ex_cur->status;
	return 0;
}

static int cq_ex_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct ntr_cq *cq = to_cq_ex(cqx);
	int rc;

	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	rc = cq_ex_load(cq);
	if (rc)
		pthread_spin_unlock(&cq->lock);
	return rc;
}

static int cq_ex_next_poll(struct ibv_cq_ex *cqx)
{
	return cq_ex_load(to_cq_ex(cqx));
}

static void cq_ex_end_poll(struct ibv_cq_ex *cqx)
{
	struct ntr_cq *cq = to_cq_ex(cqx);

	cq->ex_cur = NULL;
	pthread_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode cq_ex_read_opcode(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->opcode;
}

static uint32_t cq_ex_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->vendor_err;
}

static uint32_t cq_ex_read_byte_len(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->byte_len;
}

static __be32 cq_ex_read_imm_data(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->imm_data;
}

static uint32_t cq_ex_read_qp_num(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->qp_num;
}

static uint32_t cq_ex_read_src_qp(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->src_qp;
}

static unsigned int cq_ex_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return to_cq_ex(cqx)->ex_cur->wc_flags;
}

static uint32_t cq_ex_read_slid(struct ibv_cq_ex *cqx)
{
	(void)cqx;
	return 0;
}

static uint8_t cq_ex_read_u8_zero(struct ibv_cq_ex *cqx)
{
	(void)cqx;
	return 0;
}

static void cq_ex_set_ops(struct ibv_cq_ex *cqx)
{
	cqx->start_poll = cq_ex_start_poll;
	cqx->next_poll = cq_ex_next_poll;
	cqx->end_poll = cq_ex_end_poll;
	cqx->read_opcode = cq_ex_read_opcode;
	cqx->read_vendor_err = cq_ex_read_vendor_err;
	cqx->read_byte_len = cq_ex_read_byte_len;
	cqx->read_imm_data = cq_ex_read_imm_data;
	cqx->read_qp_num = cq_ex_read_qp_num;
	cqx->read_src_qp = cq_ex_read_src_qp;
	cqx->read_wc_flags = cq_ex_read_wc_flags;
	cqx->read_slid = cq_ex_read_slid;
	cqx->read_sl = cq_ex_read_u8_zero;
	cqx->read_dlid_path_bits = cq_ex_read_u8_zero;
}

/**
 * ntr_create_cq_ex() - ibv_create_cq_ex()
 * @context: the device context
 * @attr: what the user asks for
 *
 * Return: the CQ, or NULL with errno EOPNOTSUPP for anything beyond the
 * standard wc_flags (and the single-threaded hint), or create's error.
 */
struct ibv_cq_ex *ntr_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr)
{
	struct ntr_cq *cq;

	if ((attr->wc_flags & ~(uint64_t)NTR_CQ_EX_FLAGS) ||
	    (attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = ntr_cq_create(context, attr->cqe, attr->channel,
			   attr->comp_vector);
	if (!cq)
		return NULL;
	cq_ex_set_ops(&cq->vcq.cq_ex);
	return &cq->vcq.cq_ex;
}
