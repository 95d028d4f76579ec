// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: completion queues.
 *
 * A CQ is a ring of struct ntrdma_cqe in vmalloc_user memory (see
 * ntrdma-abi.h); userspace maps it and polls without system calls. The
 * engine produces with ntrdma_cq_post(); kernel consumers poll with
 * ntrdma_poll_cq() under a spinlock (never sleeping). Arming is a flag word
 * in the ring (NTRDMA_CQ_ARM_NEXT / _SOLICITED) that the user or
 * req_notify_cq sets and the producer consumes atomically (xchg) when it
 * decides to call the completion handler.
 */

#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "ntrdma_ib.h"

static int ntrdma_cq_create(struct ib_cq *ibcq,
			    const struct ib_cq_init_attr *attr,
			    struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibcq->device);
	struct ntrdma_cq *cq = to_ncq(ibcq);
	struct ntrdma_create_cq_resp resp = {};
	u32 entries;
	int rc;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > NTRDMA_MAX_CQE)
		return -EINVAL;
	if (attr->comp_vector >= ibcq->device->num_comp_vectors)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	rc = ntrdma_check_udata_in(udata);
	if (rc)
		return rc;

	spin_lock_init(&cq->lock);
	cq->user = !!udata;
	entries = roundup_pow_of_two(attr->cqe);
	rc = ntrdma_ring_alloc(&cq->ring, entries, sizeof(struct ntrdma_cqe));
	if (rc)
		return rc;
	rc = xa_alloc_cyclic_irq(&nib->cq_xa, &cq->id, cq,
				 XA_LIMIT(1, NTRDMA_MAX_CQ), &nib->cq_next,
				 GFP_KERNEL);
	if (rc < 0) {
		rc = rc == -EBUSY ? -ENOMEM : rc;
		goto err_ring;
	}
	if (udata) {
		rc = ntrdma_ring_map(&cq->ring, udata, &resp.ring_offset);
		if (rc)
			goto err_xa;
		resp.ring_size = cq->ring.size;
		resp.entries = entries;
		resp.cq_id = cq->id;
		rc = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (rc)
			goto err_xa;
	}
	ibcq->cqe = entries;
	return 0;

err_xa:
	xa_erase_irq(&nib->cq_xa, cq->id);
err_ring:
	ntrdma_ring_free(&cq->ring);
	return rc;
}

/*
 * The core's entry point: since 6.11 it passes the uverbs attribute bundle
 * (NULL from kernel verbs) instead of the udata; Kbuild finds which one the
 * headers declare (NTRDMA_CQ_ATTRS).
 */
#ifdef NTRDMA_CQ_ATTRS
int ntrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct uverbs_attr_bundle *attrs)
{
	return ntrdma_cq_create(ibcq, attr, attrs ? &attrs->driver_udata : NULL);
}
#else
int ntrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata)
{
	return ntrdma_cq_create(ibcq, attr, udata);
}
#endif

int ntrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct ntrdma_cq *cq = to_ncq(ibcq);

	xa_erase_irq(&to_nib(ibcq->device)->cq_xa, cq->id);
	ntrdma_ring_free(&cq->ring);
	return 0;
}

/* The ring's flags (ibv_wc's values) as the kernel's ib_wc has them. */
static int ntrdma_wc_flags(u32 f)
{
	return (f & NTRDMA_WC_GRH ? IB_WC_GRH : 0) |
	       (f & NTRDMA_WC_WITH_IMM ? IB_WC_WITH_IMM : 0) |
	       (f & NTRDMA_WC_WITH_INV ? IB_WC_WITH_INVALIDATE : 0);
}

static void ntrdma_cqe_to_wc(struct ntrdma_ib *nib, const struct ntrdma_cqe *e,
			     struct ib_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = e->wr_id;
	wc->status = e->status;
	wc->opcode = e->opcode;
	wc->byte_len = e->byte_len;
	wc->ex.imm_data = (__force __be32)e->imm_data;
	wc->wc_flags = ntrdma_wc_flags(e->wc_flags);
	wc->src_qp = e->src_qp;
	wc->vendor_err = e->vendor_err;
	wc->port_num = 1;
	/* The engine destroys a QP only after flushing its completions. */
	wc->qp = xa_load(&nib->qp_xa, e->qp_num);
}

/*
 * Kernel poll. Kernel CQs only in practice (the uverbs POLL_CQ command is
 * not enabled), but the consumer index is checked as if a user wrote it.
 */
int ntrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct ntrdma_ib *nib = to_nib(ibcq->device);
	struct ntrdma_cq *cq = to_ncq(ibcq);
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&cq->ring);
	struct ntrdma_cqe e;
	unsigned long flags;
	u32 prod, cons;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	prod = cq->ring.kpos;	/* entries written under the same lock */
	cons = READ_ONCE(ctl->cons);
	if (prod - cons > cq->ring.entries) {
		n = -EINVAL;	/* a user broke its consumer index */
		goto out;
	}
	while (n < num_entries && cons != prod) {
		memcpy(&e, ntrdma_ring_slot(&cq->ring, cons), sizeof(e));
		ntrdma_cqe_to_wc(nib, &e, &wc[n]);
		n++;
		cons++;
	}
	/* release: done reading the slots before handing them back */
	smp_store_release(&ctl->cons, cons);
out:
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int ntrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct ntrdma_cq *cq = to_ncq(ibcq);
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&cq->ring);
	u32 arm, prod;

	arm = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		NTRDMA_CQ_ARM_SOLICITED : NTRDMA_CQ_ARM_NEXT;
	/* Ordered before the check below: a racing producer sees the arm. */
	smp_store_mb(ctl->arm, arm);
	/* acquire: pairs with the producer's release of prod */
	prod = smp_load_acquire(&ctl->prod);
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) &&
	    prod != READ_ONCE(ctl->cons))
		return 1;
	return 0;
}

/**
 * ntrdma_cq_overrun() - a completion did not fit into @cq
 * @cq: the CQ ntrdma_cq_post() found full
 *
 * Any context. A CQ that overran is in error for good (its content is
 * undefined; the consumer destroys it): IB_EVENT_CQ_ERR goes out at its
 * first overrun only. Later ones raise nothing: each event is memory
 * queued for the consumer, and a flush that keeps finding the CQ full
 * (every doorbell of a QP in ERR tries the same WQE again) would queue
 * one per system call, without limit.
 */
void ntrdma_cq_overrun(struct ntrdma_cq *cq)
{
	struct ib_cq *ibcq = &cq->ibcq;
	struct ib_event ev = {
		.device = ibcq->device,
		.event = IB_EVENT_CQ_ERR,
		.element.cq = ibcq,
	};
	unsigned long flags;
	bool first;

	spin_lock_irqsave(&cq->lock, flags);
	first = !cq->overrun;
	cq->overrun = true;
	spin_unlock_irqrestore(&cq->lock, flags);
	if (first && ibcq->event_handler)
		ibcq->event_handler(&ev, ibcq->cq_context);
}

/**
 * ntrdma_cq_event() - a completion was added to @cq (or to an RQ slot of one
 *	of its QPs): call its handler if it was armed for this kind
 * @cq: the CQ
 * @success: the completion's status is IB_WC_SUCCESS
 * @solicited: the message asked for a solicited event
 *
 * Any context; after the completion is published.
 */
void ntrdma_cq_event(struct ntrdma_cq *cq, bool success, bool solicited)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&cq->ring);
	u32 arm;

	smp_mb(); /* prod before reading arm; pairs with req_notify_cq */
	arm = READ_ONCE(ctl->arm);
	if (!arm || (arm == NTRDMA_CQ_ARM_SOLICITED && !solicited && success))
		return;
	if (cmpxchg(&ctl->arm, arm, 0) == arm && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/*
 * Engine API: add one completion. Returns -ENOSPC when the CQ is full (the
 * caller then calls ntrdma_cq_overrun()). Calls the completion handler when
 * the CQ was armed for this kind of completion. Any context.
 */
int ntrdma_cq_post(struct ntrdma_cq *cq, const struct ntrdma_cqe *e,
		   bool solicited)
{
	struct ntrdma_ring_ctl *ctl = ntrdma_ring_ctl(&cq->ring);
	unsigned long flags;
	u32 prod;

	spin_lock_irqsave(&cq->lock, flags);
	prod = cq->ring.kpos;
	/* The user's consumer index: untrusted, a bad one reads as full. */
	if (prod - READ_ONCE(ctl->cons) >= cq->ring.entries) {
		spin_unlock_irqrestore(&cq->lock, flags);
		return -ENOSPC;
	}
	memcpy(ntrdma_ring_slot(&cq->ring, prod), e, sizeof(*e));
	cq->ring.kpos = prod + 1;
	/* release: the entry before the index that publishes it */
	smp_store_release(&ctl->prod, prod + 1);
	spin_unlock_irqrestore(&cq->lock, flags);
	ntrdma_cq_event(cq, e->status == IB_WC_SUCCESS, solicited);
	return 0;
}
