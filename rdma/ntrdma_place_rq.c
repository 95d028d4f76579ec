// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: placed SENDs, receiving side. A user RC or UC QP with its
 * own RQ exports the RQ ring with the QP (ntrdma_place_export.c): the
 * peer, as requester, reads the posted receive WQEs, checks them against
 * our MR exports as it checks an rkey, writes the SEND's payload into the
 * receive buffer and the completion into the WQE's slot
 * (ntrdma_place_remote.c). No work runs here for it.
 *
 * What the peer writes besides: our struct ntrdma_wire_psend, one per
 * device. While a QP's RQ is shared (from its export until the peer
 * answered its withdrawal, or the session ended), the consumer index of
 * the RQ lives there, in rq_cons[]: the peer advances it for the WQEs it
 * completes, our data path for those it takes from the checked path. The
 * two never run at once: the peer places a SEND only when every earlier
 * message of its QP was answered, and ours take WQEs only for messages
 * that arrive after its placements, in the TQP's order. We read the index
 * as peer input, bounded by the posted receives (ntrdma_rq_sync()).
 *
 * A QP in ERR flushes its RQ only once the peer answered the withdrawal:
 * a flush beside a placement would complete a WQE twice. When the session
 * ends instead, the flush starts from where the peer left the index.
 *
 * Lifetime: the ring's pages hold a reference each and stay mapped until
 * the peer answered the withdrawal of the QP that owned them, or provably
 * left the session (a later one came up), or the device goes with the peer
 * quiet; until then they outlive the QP (exp->rq_held).
 *
 * Locks: a QP's sq_lock, then its rq_lock, then rq_held_lock.
 *
 * Kicks: the peer completes a receive and finds the CQ armed (the
 * provider's copy, cq_arm in the RQ's control block): it sets cq_kick[]
 * and rings. The doorbell's interrupt calls the handlers of those CQs still
 * armed.
 */

#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "ntrdma_ib.h"

#define PSEND_BYTES	PAGE_ALIGN(sizeof(struct ntrdma_wire_psend))
#define PSEND_ORDER	get_order(PSEND_BYTES)

/* An RQ ring mapped for the peer. */
struct ntrdma_rq_export {
	struct list_head link;		/* on rq_held, once its QP is gone */
	u32 session;			/* the last one exported in; 0: never */
	u32 qpn;			/* held: the withdrawal that frees it */
	u32 epoch;
	u32 npages;
	struct page **pages;		/* each holds a reference */
	dma_addr_t *dma;
	u64 *list;			/* the page addresses, for the peer */
	dma_addr_t list_dma;
};

static struct device *rq_dev(struct ntrdma_ib *nib)
{
	return ntrdma_dev_dma_device(nib->ndev);
}

static void rq_export_free(struct ntrdma_ib *nib, struct ntrdma_rq_export *x)
{
	struct device *dev = rq_dev(nib);
	u32 i;

	if (x->list_dma)
		dma_unmap_single(dev, x->list_dma, PAGE_SIZE, DMA_TO_DEVICE);
	if (x->list)
		free_page((unsigned long)x->list);
	for (i = 0; i < x->npages; i++) {
		if (x->dma[i])
			dma_unmap_page(dev, x->dma[i], PAGE_SIZE,
				       DMA_BIDIRECTIONAL);
		if (x->pages[i])
			put_page(x->pages[i]);
	}
	kvfree(x->dma);
	kvfree(x->pages);
	kfree(x);
}

/* Map @qp's RQ ring page by page, each page kept by a reference. */
static int rq_export_map(struct ntrdma_ib *nib, struct ntrdma_rq_export *x,
			 const struct ntrdma_ring *ring)
{
	struct device *dev = rq_dev(nib);
	u32 i;

	for (i = 0; i < x->npages; i++) {
		x->pages[i] = vmalloc_to_page(ring->buf + i * PAGE_SIZE);
		get_page(x->pages[i]);
		x->dma[i] = dma_map_page(dev, x->pages[i], 0, PAGE_SIZE,
					 DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dev, x->dma[i])) {
			x->dma[i] = 0;
			return -ENOMEM;
		}
		x->list[i] = x->dma[i];
	}
	x->list_dma = dma_map_single(dev, x->list, PAGE_SIZE, DMA_TO_DEVICE);
	if (dma_mapping_error(dev, x->list_dma)) {
		x->list_dma = 0;
		return -ENOMEM;
	}
	return 0;
}

static struct ntrdma_rq_export *rq_export_new(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_rq_export *x;
	u32 n = qp->rq.size >> PAGE_SHIFT;

	BUILD_BUG_ON(sizeof(struct ntrdma_recv_wqe) != NTRDMA_RQ_STRIDE);
	BUILD_BUG_ON(offsetof(struct ntrdma_recv_wqe, done) !=
		     NTRDMA_RQ_DONE_OFF);
	BUILD_BUG_ON(PAGE_SIZE != NTRDMA_EXPORT_PAGE);
	if (n != ntrdma_rq_npages(qp->rq.entries) || n > PAGE_SIZE / 8)
		return NULL;
	x = kzalloc(sizeof(*x), NTRDMA_GFP_USER);
	if (!x)
		return NULL;
	x->npages = n;
	x->pages = kvcalloc(n, sizeof(*x->pages), NTRDMA_GFP_USER);
	x->dma = kvcalloc(n, sizeof(*x->dma), NTRDMA_GFP_USER);
	x->list = (u64 *)get_zeroed_page(NTRDMA_GFP_USER);
	if (!x->pages || !x->dma || !x->list ||
	    rq_export_map(nib, x, &qp->rq)) {
		rq_export_free(nib, x);
		return NULL;
	}
	return x;
}

/* The peer may place SENDs into @qp's RQ: a user RC or UC QP to the peer. */
static bool rq_takes_sends(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);

	return nib->psend && !ntrdma_dev_windowed(nib->ndev) && qp->rq_done &&
	       (qp->ibqp.qp_type == IB_QPT_RC ||
		qp->ibqp.qp_type == IB_QPT_UC) && !qp->loopback;
}

static u32 *rq_cons_word(struct ntrdma_qp *qp)
{
	struct ntrdma_wire_psend *ps = to_nib(qp->ibqp.device)->psend;

	return &ps->rq_cons[qp->ibqp.qp_num - NTRDMA_PSEND_QPN0];
}

/*
 * A QP reset while the peer may still place (its withdrawal unanswered):
 * the shared index goes half the index space away from the producer's,
 * so the peer finds nothing posted, whatever the user posts meanwhile.
 * Our own index holds until the answer.
 */
#define RQ_PARKED	0x80000000u

static void rq_unpark(struct ntrdma_qp *qp)
{
	qp->rq_parked = false;
	ntrdma_rq_publish(qp);
}

/**
 * ntrdma_rq_export_fill() - the RQ part of @qp's export
 * @qp: the QP (process context, its mutex held)
 * @q: its export, going into @session
 * @session: the running session
 *
 * From here on the RQ is shared: the peer may place into it until it
 * answers a withdrawal, and its consumer index lives in our psend area for
 * good (written now from ours the first time).
 */
void ntrdma_rq_export_fill(struct ntrdma_qp *qp, struct ntrdma_wire_qp_export *q,
			   u32 session)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	unsigned long flags;

	lockdep_assert_held(&qp->lock);
	if (!rq_takes_sends(qp))
		return;
	if (!qp->rq_exp)
		qp->rq_exp = rq_export_new(qp);
	if (!qp->rq_exp)
		return;
	q->rq_entries = qp->rq.entries;
	q->rq_max_sge = qp->cap.max_recv_sge;
	q->rq_npages = qp->rq_exp->npages;
	q->rq_cq = to_ncq(qp->ibqp.recv_cq)->id;
	q->rq_list = qp->rq_exp->list_dma;
	q->psend = nib->psend_dma;
	spin_lock_irqsave(&qp->rq_lock, flags);
	if (qp->rq_parked && qp->rq_session != session)
		rq_unpark(qp);	/* the peer left the session it placed in */
	if (!qp->rq_word)
		WRITE_ONCE(*rq_cons_word(qp), qp->rq.kpos);
	qp->rq_word = true;
	qp->rq_shared = true;
	if (!qp->rq_parked)
		qp->rq_unshare_epoch = 0;
	qp->rq_exp->session = session;
	qp->rq_session = session;
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/**
 * ntrdma_rq_withdrawing() - @qp's withdrawal of @epoch is queued
 * @qp: the QP (its mutex held)
 * @epoch: the withdrawal's epoch: its answer ends the sharing of the RQ
 */
void ntrdma_rq_withdrawing(struct ntrdma_qp *qp, u32 epoch)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->rq_lock, flags);
	if (qp->rq_shared)
		qp->rq_unshare_epoch = epoch;
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/**
 * ntrdma_rq_sync() - take the RQ's consumer index from the shared word
 * @qp: the QP (rq_lock held)
 *
 * Our own index is stale while the peer places: it only says where the
 * peer started. The shared one must lie among the posted receives (at
 * most the ring behind the producer index, never past it). Anything else
 * is the peer's error or the user's (who owns the producer index): the
 * index is not taken, the QP finds no receive posted, and no flush
 * completes anything.
 */
void ntrdma_rq_sync(struct ntrdma_qp *qp)
{
	u32 c, prod;

	lockdep_assert_held(&qp->rq_lock);
	if (!qp->rq_word || qp->rq_parked)
		return;
	c = READ_ONCE(*rq_cons_word(qp));
	/* acquire: the user's WQEs before the index that publishes them */
	prod = smp_load_acquire(&ntrdma_ring_ctl(&qp->rq)->prod);
	if (prod - c > qp->rq.entries) {
		ibdev_warn_ratelimited(qp->ibqp.device,
				       "qp %u: placed receive index %u outside the posted receives (%u)\n",
				       qp->ibqp.qp_num, c, prod);
		qp->rq.kpos = prod + 1;
		return;
	}
	qp->rq.kpos = c;
}

/**
 * ntrdma_rq_publish() - the RQ's consumer index moved: share it
 * @qp: the QP (rq_lock held)
 */
void ntrdma_rq_publish(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->rq_lock);
	if (qp->rq_word && !qp->rq_parked)
		WRITE_ONCE(*rq_cons_word(qp), qp->rq.kpos);
}

/**
 * ntrdma_rq_reset() - @qp's RQ went back to index 0 (RESET)
 * @qp: the QP (rq_lock held)
 *
 * While the peer may still place, the receives posted from now on are not
 * for its old connection: the shared index is parked until its answer.
 */
void ntrdma_rq_reset(struct ntrdma_qp *qp)
{
	lockdep_assert_held(&qp->rq_lock);
	if (qp->rq_word && qp->rq_shared) {
		WRITE_ONCE(*rq_cons_word(qp), qp->rq.kpos + RQ_PARKED);
		qp->rq_parked = true;
		return;
	}
	ntrdma_rq_publish(qp);
}

/**
 * ntrdma_rq_flush_later() - must @qp's RQ flush wait for the peer?
 * @qp: the QP in ERR (rq_lock held)
 *
 * Return: true while the peer may still place into the RQ in the running
 * session: its withdrawal's answer flushes it (ntrdma_rq_withdrawn()).
 */
bool ntrdma_rq_flush_later(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);

	lockdep_assert_held(&qp->rq_lock);
	return qp->rq_shared &&
	       qp->rq_session == ntrdma_link_session(nib->ndev);
}

/* The peer answered the withdrawal of @epoch: @qp's RQ is ours again. */
static void rq_unshare(struct ntrdma_qp *qp, u32 epoch)
{
	unsigned long flags;
	bool flush;

	spin_lock_irqsave(&qp->sq_lock, flags);
	spin_lock(&qp->rq_lock);
	flush = qp->rq_shared && qp->rq_unshare_epoch == epoch;
	if (flush && qp->rq_parked) {
		rq_unpark(qp);
		/* exported again meanwhile: the peer places from here on */
		flush = !READ_ONCE(qp->exported);
	}
	if (flush)
		qp->rq_shared = false;
	spin_unlock(&qp->rq_lock);
	if (flush && qp->state == IB_QPS_ERR)
		ntrdma_rq_flush(qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

/**
 * ntrdma_rq_withdrawn() - the peer answered a QP withdrawal
 * @nib: the verbs device
 * @qpn: the QP
 * @epoch: the withdrawal's epoch
 *
 * Process context (the export work). The ring of a destroyed QP goes; a
 * live QP's RQ is flushed now if it waited for this.
 */
void ntrdma_rq_withdrawn(struct ntrdma_ib *nib, u32 qpn, u32 epoch)
{
	struct ntrdma_rq_export *x, *tmp;
	struct ntrdma_qp *qp;
	LIST_HEAD(done);

	mutex_lock(&nib->qp_lock);	/* destroy erases it under this */
	qp = xa_load(&nib->qp_xa, qpn);
	if (qp)
		rq_unshare(qp, epoch);
	mutex_unlock(&nib->qp_lock);
	/* after: a destroy that saw the RQ shared has held its ring by now */
	spin_lock_irq(&nib->rq_held_lock);
	list_for_each_entry_safe(x, tmp, &nib->rq_held, link)
		if (x->qpn == qpn && x->epoch == epoch)
			list_move(&x->link, &done);
	spin_unlock_irq(&nib->rq_held_lock);
	list_for_each_entry_safe(x, tmp, &done, link)
		rq_export_free(nib, x);
}

/**
 * ntrdma_rq_export_destroy() - @qp goes: its ring outlives it if needed
 * @qp: the QP, withdrawn (ntrdma_export_qp_destroy())
 */
void ntrdma_rq_export_destroy(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_rq_export *x = qp->rq_exp;
	bool shared;

	if (!x)
		return;
	qp->rq_exp = NULL;
	/*
	 * Under rq_lock, as rq_unshare(): either the answer came first and
	 * the ring goes now, or it is held before the answer's walk.
	 */
	spin_lock_irq(&qp->rq_lock);
	shared = x->session && qp->rq_shared;
	if (shared) {
		x->qpn = qp->ibqp.qp_num;
		x->epoch = qp->rq_unshare_epoch;
		spin_lock(&nib->rq_held_lock);
		list_add_tail(&x->link, &nib->rq_held);
		spin_unlock(&nib->rq_held_lock);
	}
	spin_unlock_irq(&qp->rq_lock);
	if (!shared)
		rq_export_free(nib, x);
}

/**
 * ntrdma_rq_session_up() - @session came up: the peer left every earlier one
 * @nib: the verbs device
 * @session: the running session
 *
 * Process context. The rings held for those go.
 */
void ntrdma_rq_session_up(struct ntrdma_ib *nib, u32 session)
{
	struct ntrdma_rq_export *x, *tmp;
	LIST_HEAD(done);

	spin_lock_irq(&nib->rq_held_lock);
	list_for_each_entry_safe(x, tmp, &nib->rq_held, link)
		if (x->session != session)
			list_move(&x->link, &done);
	spin_unlock_irq(&nib->rq_held_lock);
	list_for_each_entry_safe(x, tmp, &done, link)
		rq_export_free(nib, x);
}

/**
 * ntrdma_rq_kicked() - the peer rang the kick doorbell
 * @nib: the verbs device
 *
 * Hard irq. The CQs the peer flagged that are still armed call their
 * handlers (a user's: the uverbs event queue, irq-safe; kernel QPs take
 * no placed SENDs). cq_xa's lock is irq-safe: destroy_cq erases under it.
 */
void ntrdma_rq_kicked(struct ntrdma_ib *nib)
{
	struct ntrdma_wire_psend *ps = nib->psend;
	struct ntrdma_cq *cq;
	unsigned long flags;
	bool any, sol;
	u32 id;

	if (!ps || !xchg(&ps->kick, 0))
		return;
	xa_lock_irqsave(&nib->cq_xa, flags);
	for (id = 1; id < NTRDMA_PSEND_CQS; id++) {
		any = READ_ONCE(ps->cq_kick[id]) && xchg(&ps->cq_kick[id], 0);
		sol = READ_ONCE(ps->cq_kick_sol[id]) &&
		      xchg(&ps->cq_kick_sol[id], 0);
		if (!any && !sol)
			continue;
		cq = xa_load(&nib->cq_xa, id);
		if (cq)
			ntrdma_cq_event(cq, true, sol);
	}
	xa_unlock_irqrestore(&nib->cq_xa, flags);
}

/**
 * ntrdma_rq_export_init() - the psend area of a verbs device
 * @nib: the device being added
 *
 * Without it (direct placement off, no coherent memory for the NTB
 * device) SENDs take the checked path, as in windowed mode.
 */
void ntrdma_rq_export_init(struct ntrdma_ib *nib)
{
	struct device *dev = rq_dev(nib);
	struct ntrdma_wire_psend *ps;

	INIT_LIST_HEAD(&nib->rq_held);
	spin_lock_init(&nib->rq_held_lock);
	if (!ntrdma_direct_placement || dma_addressing_limited(dev))
		return;
	/* Our RAM, which the peer's window reaches (not a coherent pool). */
	ps = (void *)__get_free_pages(GFP_KERNEL | __GFP_ZERO, PSEND_ORDER);
	if (!ps)
		return;
	nib->psend_dma = dma_map_single(dev, ps, PSEND_BYTES,
					DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dev, nib->psend_dma)) {
		free_pages((unsigned long)ps, PSEND_ORDER);
		return;
	}
	nib->psend = ps;
}

/**
 * ntrdma_rq_export_fini() - the device goes
 * @nib: the device
 * @peer_quiet: the peer provably no longer writes our memory (else what
 *	it may still write stays allocated)
 */
void ntrdma_rq_export_fini(struct ntrdma_ib *nib, bool peer_quiet)
{
	struct ntrdma_rq_export *x, *tmp;

	if (!peer_quiet) {
		if (nib->psend)
			ibdev_warn(&nib->ibdev, "the peer may still place SENDs: their rings stay allocated\n");
		return;
	}
	list_for_each_entry_safe(x, tmp, &nib->rq_held, link)
		rq_export_free(nib, x);
	if (nib->psend) {
		dma_unmap_single(rq_dev(nib), nib->psend_dma, PSEND_BYTES,
				 DMA_BIDIRECTIONAL);
		free_pages((unsigned long)nib->psend, PSEND_ORDER);
	}
	nib->psend = NULL;
}
