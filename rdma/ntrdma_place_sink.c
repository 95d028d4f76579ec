// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: READ sinks, the requester's side of a READ whose data
 * the responder writes straight into our destination pages, so that it
 * crosses the bridge once, as posted writes (ntrdma_push_read() in
 * ntrdma_place_remote.c is the responder's side).
 *
 * A READ_REQ names its sink: each piece of the destination SGEs (user MRs
 * only, whose pages our MR reference keeps pinned) mapped for the NTB
 * device when the READ is sent, as a DMA address (an IOVA under an IOMMU:
 * these pages become reachable for this READ only). The responder writes
 * there only while our QP is exported in the epoch the READ_REQ names,
 * under its place_lock, and answers READ_RESP with NTRDMA_VX_PLACED after
 * the data, in the verbs TQP's order.
 *
 * Lifetime: a sink (its mappings, its MR references) goes when its READ
 * was answered with all of its data, placed or sent. A READ that ended
 * otherwise (flushed, failed, timed out) may still be written: its sink is
 * held until the peer answered a withdrawal of the QP queued after the
 * sink was made (a withdrawal takes a new epoch from the device's counter:
 * READ_REQs of earlier epochs never match again, and the peer drops the QP
 * under place_lock before it answers), or until the peer provably left the
 * sink's session. Meanwhile the pages stay pinned (a dereg orphans the
 * MR): no byte of a late write lands in memory that was given back.
 */

#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include "ntrdma_ib.h"

/* Extents that fit in a segment's header slot beside the header. */
#define SINK_EXTENTS	((NTRDMA_SEG_SLOT - sizeof(struct ntrdma_vx_hdr)) / \
			 sizeof(struct ntrdma_vx_sink))

struct ntrdma_sink {
	struct list_head link;		/* on nib->sinks_held */
	u32 qpn;
	u32 epoch;			/* the QP's when the READ was sent */
	u32 session;
	u32 nmr;
	struct ntrdma_mr *mr[NTRDMA_MAX_SGE];	/* references */
	u32 n;
	struct ntrdma_vx_sink ext[SINK_EXTENTS];
};

static struct device *sink_dev(struct ntrdma_ib *nib)
{
	return ntrdma_dev_dma_device(nib->ndev);
}

/* Only a READ to an exported peer, into user MRs, without bouncing. */
static bool sink_wanted(struct ntrdma_ib *nib, struct ntrdma_qp *qp,
			const struct ntrdma_swqe *w)
{
	u32 i;

	if (!READ_ONCE(ntrdma_direct_placement) || qp->loopback ||
	    !READ_ONCE(qp->exported) || !w->len || !w->nsge ||
	    ntrdma_dev_windowed(nib->ndev) ||
	    dma_addressing_limited(sink_dev(nib)))
		return false;
	for (i = 0; i < w->nsge; i++)
		if (w->sge[i].mr->kind != NTRDMA_MR_USER)
			return false;
	return true;
}

static void sink_unmap(struct ntrdma_ib *nib, struct ntrdma_sink *s)
{
	struct device *dev = sink_dev(nib);

	while (s->n--)
		dma_unmap_page(dev, s->ext[s->n].addr, s->ext[s->n].len,
			       DMA_BIDIRECTIONAL);
	s->n = 0;
}

/* Map @sg's pieces as extents: 0, or -E2BIG / -ENOMEM / -EFAULT. */
static int sink_map_sge(struct ntrdma_ib *nib, struct ntrdma_sink *s,
			const struct ntrdma_rsge *sg)
{
	struct device *dev = sink_dev(nib);
	struct page *page;
	dma_addr_t dma;
	u32 done = 0, off;
	int got;

	while (done < sg->len) {
		if (s->n == SINK_EXTENTS)
			return -E2BIG;
		got = ntrdma_mr_range(sg->mr, sg->addr + done, sg->len - done,
				      &page, &off);
		if (got <= 0)
			return -EFAULT;
		dma = dma_map_page(dev, page, off, got, DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dev, dma))
			return -ENOMEM;
		s->ext[s->n].addr = dma;
		s->ext[s->n].len = got;
		s->n++;
		done += got;
	}
	return 0;
}

static void sink_take_mrs(struct ntrdma_sink *s, const struct ntrdma_swqe *w)
{
	u32 i;

	for (i = 0; i < w->nsge; i++) {
		if (s->nmr && s->mr[s->nmr - 1] == w->sge[i].mr)
			continue;
		refcount_inc(&w->sge[i].mr->refs);
		s->mr[s->nmr++] = w->sge[i].mr;
	}
}

/**
 * ntrdma_sink_build() - the sink of a READ about to be sent
 * @qp: the requester QP (sq_lock held)
 * @w: its READ WQE, its destination SGEs checked and taken
 *
 * Return: the sink, or NULL when the READ's data is to be sent to us
 * instead (direct placement off, a loopback or unexported QP, memory that
 * is not a user MR's, more pieces than a READ_REQ lists, no memory).
 */
struct ntrdma_sink *ntrdma_sink_build(struct ntrdma_qp *qp,
				      const struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_sink *s;
	u32 i;

	lockdep_assert_held(&qp->sq_lock);
	BUILD_BUG_ON(SINK_EXTENTS > NTRDMA_VX_SINK_MAX);
	if (!sink_wanted(nib, qp, w))
		return NULL;
	s = kzalloc(sizeof(*s), GFP_ATOMIC | __GFP_NOWARN);
	if (!s)
		return NULL;
	s->qpn = qp->ibqp.qp_num;
	s->epoch = qp->export_epoch;
	s->session = ntrdma_link_session(nib->ndev);
	for (i = 0; i < w->nsge; i++) {
		if (sink_map_sge(nib, s, &w->sge[i])) {
			sink_unmap(nib, s);
			kfree(s);
			return NULL;
		}
	}
	sink_take_mrs(s, w);
	return s;
}

/**
 * ntrdma_sink_wire() - what a READ_REQ carries of its sink
 * @s: the sink
 * @len: set to the payload's bytes
 * @epoch: set to the epoch the READ_REQ names
 *
 * Return: the payload (the extents).
 */
const void *ntrdma_sink_wire(const struct ntrdma_sink *s, u32 *len,
			     u32 *epoch)
{
	*len = s->n * sizeof(s->ext[0]);
	*epoch = s->epoch;
	return s->ext;
}

static void sink_free(struct ntrdma_ib *nib, struct ntrdma_sink *s)
{
	sink_unmap(nib, s);
	while (s->nmr--)
		ntrdma_mr_put(s->mr[s->nmr]);
	kfree(s);
}

/**
 * ntrdma_sink_release() - a READ with a sink is over
 * @nib: the device
 * @s: its sink
 * @answered: all of its data arrived (nothing more is written there)
 *
 * Any context. An unanswered READ's sink is held (see above).
 */
void ntrdma_sink_release(struct ntrdma_ib *nib, struct ntrdma_sink *s,
			 bool answered)
{
	unsigned long flags;

	if (answered) {
		sink_free(nib, s);
		return;
	}
	spin_lock_irqsave(&nib->sink_lock, flags);
	list_add_tail(&s->link, &nib->sinks_held);
	spin_unlock_irqrestore(&nib->sink_lock, flags);
}

/* Free the held sinks @gone selects. */
static void sink_free_held(struct ntrdma_ib *nib,
			   bool (*gone)(const struct ntrdma_sink *s, u32 a,
					u32 b, u32 c),
			   u32 a, u32 b, u32 c)
{
	struct ntrdma_sink *s, *tmp;
	unsigned long flags;
	LIST_HEAD(free);

	spin_lock_irqsave(&nib->sink_lock, flags);
	list_for_each_entry_safe(s, tmp, &nib->sinks_held, link)
		if (gone(s, a, b, c))
			list_move(&s->link, &free);
	spin_unlock_irqrestore(&nib->sink_lock, flags);
	list_for_each_entry_safe(s, tmp, &free, link)
		sink_free(nib, s);
}

static bool sink_withdrawn(const struct ntrdma_sink *s, u32 qpn, u32 epoch,
			   u32 session)
{
	return s->qpn == qpn && s->session == session &&
	       (s32)(s->epoch - epoch) < 0;
}

/**
 * ntrdma_sink_withdrawn() - the peer answered a withdrawal of a QP
 * @nib: the device
 * @qpn: the QP
 * @epoch: the withdrawal's epoch
 * @session: the session it was answered in
 *
 * The sinks of that QP's READs sent before the withdrawal are free.
 */
void ntrdma_sink_withdrawn(struct ntrdma_ib *nib, u32 qpn, u32 epoch,
			   u32 session)
{
	sink_free_held(nib, sink_withdrawn, qpn, epoch, session);
}

static bool sink_other_session(const struct ntrdma_sink *s, u32 session,
			       u32 b, u32 c)
{
	return s->session != session;
}

/**
 * ntrdma_sink_session_up() - session @session came up
 * @nib: the device
 * @session: the new session (the peer left every earlier one)
 */
void ntrdma_sink_session_up(struct ntrdma_ib *nib, u32 session)
{
	sink_free_held(nib, sink_other_session, session, 0, 0);
}

/* The ended session of a sink held with @mr, or 0. */
static u32 sink_ended_session(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	u32 now = ntrdma_link_session(nib->ndev), found = 0, i;
	struct ntrdma_sink *s;
	unsigned long flags;

	spin_lock_irqsave(&nib->sink_lock, flags);
	list_for_each_entry(s, &nib->sinks_held, link) {
		for (i = 0; i < s->nmr && !found; i++)
			if (s->mr[i] == mr && s->session != now)
				found = s->session;
	}
	spin_unlock_irqrestore(&nib->sink_lock, flags);
	return found;
}

/**
 * ntrdma_sink_mr_quiet() - may dereg wait for @mr's held sinks to go?
 * @nib: the device
 * @mr: an MR being deregistered
 *
 * Process context, bounded. A sink of the running session goes when the
 * peer answers the withdrawal (or its silence ends the session); one of an
 * ended session goes when the peer provably left it: waited for here as
 * dereg waits for exports, from the session's end.
 *
 * Return: false when the peer may still write a sink held with @mr: then
 * dereg does not wait, and the MR stays (an orphan) until it let go.
 */
bool ntrdma_sink_mr_quiet(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	u32 session = sink_ended_session(nib, mr);

	return !session || ntrdma_export_wait_left(nib, session);
}

static bool sink_any(const struct ntrdma_sink *s, u32 a, u32 b, u32 c)
{
	return true;
}

/**
 * ntrdma_sink_init() - no sink is held yet
 * @nib: the device being added
 */
void ntrdma_sink_init(struct ntrdma_ib *nib)
{
	spin_lock_init(&nib->sink_lock);
	INIT_LIST_HEAD(&nib->sinks_held);
	atomic_set(&nib->export_epoch, 0);
}

/**
 * ntrdma_sink_fini() - the device goes (no QP is left)
 * @nib: the device
 * @peer_quiet: the peer provably no longer writes our memory (else the
 *	sinks still held stay, their pages pinned, as orphan MRs do)
 */
void ntrdma_sink_fini(struct ntrdma_ib *nib, bool peer_quiet)
{
	if (peer_quiet)
		sink_free_held(nib, sink_any, 0, 0, 0);
	if (!list_empty(&nib->sinks_held))
		ibdev_warn(&nib->ibdev, "the peer may still write the sinks of unanswered READs: their pages stay pinned\n");
}
