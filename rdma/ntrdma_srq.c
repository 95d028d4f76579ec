// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: shared receive queues (basic SRQs).
 *
 * An SRQ is a ring of struct ntrdma_recv_wqe like a QP's RQ (ntrdma-abi.h):
 * the provider writes WQEs and the producer index, the engine will consume
 * them for every QP attached to the SRQ, copying each WQE out of the ring
 * and validating it before use. The limit (IB_SRQ_LIMIT) arms one
 * IB_EVENT_SRQ_LIMIT_REACHED, raised by the consumer when fewer than
 * srq_limit WQEs remain posted; resizing (IB_SRQ_MAX_WR) is not supported.
 */

#include <rdma/uverbs_ioctl.h>

#include "ntrdma_ib.h"

int ntrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibsrq->device);
	struct ntrdma_srq *srq = to_nsrq(ibsrq);
	struct ntrdma_create_srq_resp resp = {};
	struct ib_srq_attr *attr = &init->attr;
	u32 entries;
	int rc;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!attr->max_wr || attr->max_wr > NTRDMA_MAX_SRQ_WR ||
	    attr->max_sge > NTRDMA_MAX_SGE || attr->srq_limit >= attr->max_wr)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	rc = ntrdma_check_udata_in(udata);
	if (rc)
		return rc;
	if (atomic_inc_return(&nib->num_srq) > NTRDMA_MAX_SRQ) {
		rc = -ENOMEM;
		goto err_count;
	}

	spin_lock_init(&srq->lock);
	srq->user = !!udata;
	srq->limit = attr->srq_limit;
	entries = roundup_pow_of_two(attr->max_wr);
	rc = ntrdma_ring_alloc(&srq->ring, entries,
			       sizeof(struct ntrdma_recv_wqe));
	if (rc)
		goto err_count;
	if (udata) {
		rc = ntrdma_ring_map(&srq->ring, udata, &resp.ring_offset);
		if (rc)
			goto err_ring;
		resp.ring_size = srq->ring.size;
		resp.entries = entries;
		rc = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (rc)
			goto err_ring;
	}
	attr->max_wr = entries;
	attr->max_sge = NTRDMA_MAX_SGE;
	return 0;

err_ring:
	ntrdma_ring_free(&srq->ring);
err_count:
	atomic_dec(&nib->num_srq);
	return rc;
}

int ntrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct ntrdma_srq *srq = to_nsrq(ibsrq);
	unsigned long flags;
	int rc;

	rc = ntrdma_check_udata_in(udata);
	if (rc)
		return rc;
	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	/* No resizing (IB_DEVICE_SRQ_RESIZE is not advertised). */
	if (mask & IB_SRQ_MAX_WR)
		return -EINVAL;
	if (mask & IB_SRQ_LIMIT) {
		if (attr->srq_limit >= srq->ring.entries)
			return -EINVAL;
		spin_lock_irqsave(&srq->lock, flags);
		srq->limit = attr->srq_limit;
		spin_unlock_irqrestore(&srq->lock, flags);
	}
	return 0;
}

int ntrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct ntrdma_srq *srq = to_nsrq(ibsrq);

	attr->max_wr = srq->ring.entries;
	attr->max_sge = NTRDMA_MAX_SGE;
	attr->srq_limit = READ_ONCE(srq->limit);
	return 0;
}

int ntrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct ntrdma_srq *srq = to_nsrq(ibsrq);

	ntrdma_ring_free(&srq->ring);
	atomic_dec(&to_nib(ibsrq->device)->num_srq);
	return 0;
}

/* Kernel SRQs: queue receive WQEs (user SRQs write their mapped ring). */
int ntrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	struct ntrdma_srq *srq = to_nsrq(ibsrq);

	if (srq->user) {
		*bad_wr = wr;
		return -EINVAL;
	}
	return ntrdma_ring_post_recv(&srq->ring, &srq->lock, NTRDMA_MAX_SGE,
				     wr, bad_wr);
}
