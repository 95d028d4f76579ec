// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: direct placement, exporting side. Our user MRs with
 * remote write access and our connected QPs are made known to the peer
 * (ntrdma_place_remote.c is the peer's side), so that its WRITEs land in the MR
 * pages without our CPU.
 *
 * What is exported: an MR's key, PD number, access, iova range and the DMA
 * addresses of its pages, mapped for the NTB's PCI device (IOVAs under an
 * IOMMU); never a kernel pointer. Only MRs a user registered for remote
 * write; only while the MR is registered.
 *
 * Revocation: an exported MR holds one extra reference (the export's).
 * dereg_mr asks the peer to revoke; the peer answers once no placement into
 * the pages is in flight, and the export's reference goes. When the session
 * ended first, the peer may not have noticed yet: the reference stays until
 * the peer provably stopped (it accepted a later session, which it does
 * only after its own end of the old one, or the device goes with the peer
 * quiet), so dereg returns with the pages pinned and the MR's last
 * reference frees it (the orphan rule of ntrdma_mr.c). An unanswered
 * revocation ends the session.
 *
 * QPs: a QP is exported when it enters RTR or RTS (or its access or
 * destination changes there) and withdrawn when it leaves them (modify_qp,
 * destroy, and whatever moves it to ERR: a QP in ERR executes
 * nothing). These go through an ordered work, never waiting in the
 * caller's context (but a destroy may wait for room: below); until a
 * withdrawal has reached the peer, its WRITEs through that QP still land
 * (in MRs that are exported: a matter of IB semantics for that short time,
 * not of memory safety).
 *
 * The queue is bounded: a QP has at most two messages waiting, a
 * withdrawal and the export after it. A newer export replaces the waiting
 * one (only the QP's last state matters to the peer); a withdrawal takes
 * the place of the first waiting message and drops the export after it
 * (the peer never saw that export, and the withdrawal's newer epoch covers
 * every READ sink made since). Withdrawals of destroyed QPs (one each at
 * most) wait on their own: a destroy that finds NTRDMA_EXPORT_ORPHANS of
 * them waits for room, so at most that many plus one per destroy under way
 * wait.
 */

#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "ntrdma_ib.h"

/* Withdrawals of destroyed QPs that may wait to be sent. */
#define NTRDMA_EXPORT_ORPHANS	1024

struct ntrdma_export {
	struct ntrdma_ib *nib;
	struct mutex lock;		/* exported MRs and their sessions */
	struct list_head mrs;		/* exported MRs (mr->export_link) */
	spinlock_t qp_lock;		/* qp_msgs, the counts, qp->export_msg */
	struct list_head qp_msgs;	/* QP exports to send, in order */
	u32 qp_pending;			/* messages on qp_msgs */
	u32 qp_orphans;			/* ...of destroyed QPs */
	wait_queue_head_t room_wq;	/* woken when an orphan went */
	struct workqueue_struct *wq;	/* ordered */
	struct work_struct qp_work;
	struct work_struct up_work;	/* a session came up */
	wait_queue_head_t up_wq;	/* woken when one did */
#ifdef NTRDMA_TEST_HOOKS
	/* the test flood's page list and its one page: kept to the end */
	u64 *test_list;
	dma_addr_t test_list_dma;
	dma_addr_t test_page_dma;
#endif
};

/*
 * A QP message waiting on qp_msgs. @qp: the QP whose export_msg[] names
 * it, NULL once that QP is destroyed (an orphan).
 */
struct ntrdma_qp_export_msg {
	struct list_head link;
	struct ntrdma_qp *qp;
	u32 session;
	struct ntrdma_wire_qp_export q;
};

static struct device *export_dev(struct ntrdma_ib *nib)
{
	return ntrdma_dev_dma_device(nib->ndev);
}

/*
 * The page the peer reads an export's page addresses from. Its address goes
 * to the peer in every MR_EXPORT chunk, and the peer may read it until it
 * answers, or until it has left the session: the page lives as long as the
 * MR (whose export reference outlives both), never as long as one call.
 */
static int export_list_alloc(struct device *dev, struct ntrdma_mr *mr)
{
	BUILD_BUG_ON(NTRDMA_EXPORT_CHUNK * sizeof(u64) > PAGE_SIZE);
	mr->export_list = (u64 *)__get_free_page(GFP_KERNEL);
	if (!mr->export_list)
		return -ENOMEM;
	mr->export_list_dma = dma_map_single(dev, mr->export_list, PAGE_SIZE,
					     DMA_TO_DEVICE);
	if (dma_mapping_error(dev, mr->export_list_dma)) {
		free_page((unsigned long)mr->export_list);
		mr->export_list = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void export_list_free(struct device *dev, struct ntrdma_mr *mr)
{
	dma_unmap_single(dev, mr->export_list_dma, PAGE_SIZE, DMA_TO_DEVICE);
	free_page((unsigned long)mr->export_list);
	mr->export_list = NULL;
}

static void export_unmap_pages(struct device *dev, dma_addr_t *dma, u32 n)
{
	while (n--)
		dma_unmap_page(dev, dma[n], PAGE_SIZE, DMA_BIDIRECTIONAL);
	kvfree(dma);
}

/* Map the MR's pages for the NTB device (what the peer's window reaches). */
static int export_map(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	struct device *dev = export_dev(nib);
	dma_addr_t *dma;
	u32 i;

	/* A mapping could bounce (swiotlb): the peer would write the copy. */
	if (dma_addressing_limited(dev))
		return -EOPNOTSUPP;
	dma = kvmalloc_array(mr->nupages, sizeof(*dma), NTRDMA_GFP_USER);
	if (!dma)
		return -ENOMEM;
	for (i = 0; i < mr->nupages; i++) {
		dma[i] = dma_map_page(dev, mr->upages[i], 0, PAGE_SIZE,
				      DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dev, dma[i]))
			goto err;
	}
	if (export_list_alloc(dev, mr))
		goto err;
	mr->export_dma = dma;
	return 0;
err:
	export_unmap_pages(dev, dma, i);
	return -ENOMEM;
}

/**
 * ntrdma_export_unmap() - undo the export mapping of an MR being freed
 * @mr: the MR (no export reference left: the peer reads none of it)
 */
void ntrdma_export_unmap(struct ntrdma_mr *mr)
{
	struct device *dev;

	if (!mr->export_dma)
		return;
	dev = export_dev(to_nib(mr->ibmr.device));
	export_list_free(dev, mr);
	export_unmap_pages(dev, mr->export_dma, mr->nupages);
	mr->export_dma = NULL;
}

/*
 * The DMA address of export page @j (NTRDMA_EXPORT_PAGE bytes, counted from
 * the one holding the MR's first byte) in our pages of PAGE_SIZE.
 */
static u64 export_page_dma(struct ntrdma_mr *mr, u64 j)
{
	u64 byte = rounddown(ib_umem_offset(mr->umem), NTRDMA_EXPORT_PAGE) +
		   j * NTRDMA_EXPORT_PAGE;

	return mr->export_dma[byte >> PAGE_SHIFT] + (byte & ~PAGE_MASK);
}

/*
 * Send the MR's export in chunks, into @session only; the page addresses
 * go through the MR's list page, rewritten only after the peer answered
 * the chunk before (or left the session of the one that failed).
 */
static int export_send(struct ntrdma_ib *nib, struct ntrdma_mr *mr,
		       u32 session)
{
	dma_addr_t list_dma = mr->export_list_dma;
	u64 *list = mr->export_list;
	struct ntrdma_wire_mr_export e = {
		.key = mr->key,
		.pd = to_npd(mr->ibmr.pd)->id,
		.access = mr->access & NTRDMA_EXPORT_ACCESS,
		.iova = mr->iova,
		.length = mr->length,
		.first_off = ib_umem_offset(mr->umem) % NTRDMA_EXPORT_PAGE,
		.list = list_dma,
	};
	struct device *dev = export_dev(nib);
	int rc = 0;
	u32 i;

	e.npages = ntrdma_export_npages(e.first_off, e.length);
	BUILD_BUG_ON(PAGE_SIZE % NTRDMA_EXPORT_PAGE);
	if (ntrdma_export_npages(ib_umem_offset(mr->umem), e.length) >
	    (u64)mr->nupages << (PAGE_SHIFT - ilog2(NTRDMA_EXPORT_PAGE)))
		return -EINVAL;
	for (e.first = 0; !rc && e.first < e.npages; e.first += e.count) {
		e.count = min(e.npages - e.first, NTRDMA_EXPORT_CHUNK);
		dma_sync_single_for_cpu(dev, list_dma, PAGE_SIZE,
					DMA_TO_DEVICE);
		for (i = 0; i < e.count; i++)
			list[i] = export_page_dma(mr, e.first + i);
		dma_sync_single_for_device(dev, list_dma, PAGE_SIZE,
					   DMA_TO_DEVICE);
		rc = ntrdma_cmd_call_in(nib->ndev, session,
					NTRDMA_CMD_MR_EXPORT, &e, sizeof(e),
					NTRDMA_CMD_TIMEOUT_MS, 0);
	}
	return rc;
}

/*
 * Export @mr in the running session @session: 0 when the peer has it. A
 * failed export may have reached the peer all the same (an answer lost to
 * a timeout, a signal or the session's end): it is recorded as @session's
 * either way, so that dereg revokes it or waits for the peer to leave.
 */
static int export_mr_locked(struct ntrdma_ib *nib, struct ntrdma_mr *mr,
			    u32 session)
{
	int rc;

	lockdep_assert_held(&nib->exp->lock);
	rc = mr->export_dma ? 0 : export_map(nib, mr);
	if (rc)
		return rc;
	rc = export_send(nib, mr, session);
	if (!mr->export_session) {
		refcount_inc(&mr->refs);	/* the export's */
		list_add_tail(&mr->export_link, &nib->exp->mrs);
	}
	mr->export_session = session;
	return rc;
}

/*
 * The running session, for an export or a drop. Read under the lock that
 * orders them: whoever holds it next reads this session or a later one, so
 * an MR's recorded session never goes back to one the peer already left
 * (dereg would then skip the revocation the later export needs).
 */
static u32 export_session_locked(struct ntrdma_ib *nib)
{
	lockdep_assert_held(&nib->exp->lock);
	return ntrdma_link_session(nib->ndev);
}

/* The export of @mr is over everywhere: its reference goes. */
static void export_drop(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	lockdep_assert_held(&nib->exp->lock);
	list_del(&mr->export_link);
	mr->export_session = 0;
	ntrdma_mr_put(mr);
}

/* Not in windowed mode: the peer's window reaches no page of ours. */
static bool export_wanted(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	return ntrdma_direct_placement && !ntrdma_dev_windowed(nib->ndev) &&
	       mr->kind == NTRDMA_MR_USER &&
	       (mr->access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ |
			      IB_ACCESS_LOCAL_WRITE));
}

/**
 * ntrdma_export_mr() - tell the peer about a registered MR
 * @nib: the verbs device
 * @mr: a user MR, published in the key table
 *
 * Process context. Nothing happens for an MR without remote write access,
 * without a session or with direct placement off; a failure only means the
 * peer's WRITEs to it take the checked path.
 */
void ntrdma_export_mr(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	u32 session;
	int rc;

	if (!export_wanted(nib, mr))
		return;
	ntrdma_fault_pause(nib->ndev, "export");
	mutex_lock(&nib->exp->lock);
	session = export_session_locked(nib);
	/* dereg may have unpublished it: an export would outlive it */
	if (session && xa_load(&nib->mr_xa, mr->index) == mr &&
	    mr->export_session != session) {
		rc = export_mr_locked(nib, mr, session);
		if (rc)
			ibdev_dbg(&nib->ibdev, "MR %u not exported (%d): the checked path serves it\n",
				  mr->index, rc);
	}
	mutex_unlock(&nib->exp->lock);
}

/* A session later than @session runs: the peer left @session. */
static bool export_peer_left(struct ntrdma_ib *nib, u32 session)
{
	u32 now = ntrdma_link_session(nib->ndev);

	return now && now != session;
}

/*
 * The session of @mr's export ended: a live peer leaves it (and stops
 * placing) within its heartbeat timeout of the end, then joins the next
 * session. Wait for that, bounded from the end (one bound for every MR
 * deregistered meanwhile, so a process exit does not wait per MR), so that
 * dereg returns with no placement in flight into the user's pages, not
 * only with the pages pinned. Signals do not cut it short: it is bounded.
 */
static void export_wait_peer_left(struct ntrdma_ib *nib, u32 session)
{
	struct ntrdma_export *exp = nib->exp;
	unsigned long until;
	long left;

	if (!session || session == ntrdma_link_session(nib->ndev))
		return;
	until = ntrdma_link_ended_at(nib->ndev) +
		ntrdma_link_leave_timeout(nib->ndev);
	left = (long)(until - jiffies);
	if (left > 0)
		wait_event_timeout(exp->up_wq, export_peer_left(nib, session),
				   left);
}

/*
 * A revocation of @session failed, so the session is over or ending (a
 * protocol error ends it): wait for its end (bounded: the link work sees
 * a protocol error at once), then for the peer to leave it.
 */
static void export_wait_ended(struct ntrdma_ib *nib, u32 session)
{
	unsigned long until = jiffies + ntrdma_link_leave_timeout(nib->ndev);

	while (ntrdma_link_session(nib->ndev) == session &&
	       time_before(jiffies, until))
		msleep(20);
	export_wait_peer_left(nib, session);
}

/**
 * ntrdma_export_wait_left() - wait (bounded) for the peer to leave @session
 * @nib: the verbs device
 * @session: a session that ended
 *
 * Process context; bounded by the time a live peer takes to leave an ended
 * session, counted from its end.
 *
 * Return: true when the peer provably left it (a later session runs).
 */
bool ntrdma_export_wait_left(struct ntrdma_ib *nib, u32 session)
{
	export_wait_peer_left(nib, session);
	return export_peer_left(nib, session);
}

/*
 * Revoke @mr's export (its session's): 0 once no placement of the peer can
 * reach the pages, -ENOLINK while that is not known yet (the session is
 * over or ending). Signals do not cut the call short, so that dereg never
 * returns while the peer may go on placing in a session that runs.
 */
static int export_revoke_locked(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	struct ntrdma_wire_mr_revoke r = { .key = mr->key };
	int rc;

	lockdep_assert_held(&nib->exp->lock);
	if (export_peer_left(nib, mr->export_session)) {
		export_drop(nib, mr);	/* as export_up_work() would */
		return 0;
	}
	if (mr->export_session != export_session_locked(nib))
		return -ENOLINK;
	rc = ntrdma_cmd_call_in(nib->ndev, mr->export_session,
				NTRDMA_CMD_MR_REVOKE, &r, sizeof(r),
				NTRDMA_CMD_TIMEOUT_MS, NTRDMA_CMD_NOINTR);
	if (!rc) {
		export_drop(nib, mr);
		return 0;
	}
	if (rc == -ETIMEDOUT)
		ntrdma_link_proto_error(nib->ndev, "an MR revocation went unanswered");
	return -ENOLINK;
}

/* After a failed revocation: the export is over if the peer left. */
static bool export_drop_if_left(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	bool left;

	mutex_lock(&nib->exp->lock);
	left = !mr->export_session ||
	       export_peer_left(nib, mr->export_session);
	if (mr->export_session && left)
		export_drop(nib, mr);
	mutex_unlock(&nib->exp->lock);
	return left;
}

/**
 * ntrdma_unexport_mr() - the peer stops placing into @mr
 * @nib: the verbs device
 * @mr: an MR being deregistered (already out of the key table)
 *
 * Process context; bounded by the command timeout, or when the export's
 * session has ended, by the time a live peer takes to leave it. Signals
 * do not cut it short (a dereg that returned early would leave the pages
 * reachable).
 *
 * Return: true when no placement of the peer can reach the pages any more
 * (never exported, revoked, or the peer left the export's session); false
 * when that is not known yet: the export's reference stays until the peer
 * provably left the session.
 */
bool ntrdma_unexport_mr(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	u32 session;
	int rc;

	export_wait_peer_left(nib, READ_ONCE(mr->export_session));
	mutex_lock(&nib->exp->lock);
	session = mr->export_session;
	rc = session ? export_revoke_locked(nib, mr) : 0;
	mutex_unlock(&nib->exp->lock);
	if (!rc)
		return true;
	export_wait_ended(nib, session);
	if (export_drop_if_left(nib, mr))
		return true;
	ibdev_info_ratelimited(&nib->ibdev, "dereg of MR %u: the peer may still place into it until it leaves the ended session: its pages stay pinned until then\n",
			       mr->index);
	return false;
}

/* ---- QPs ---- */

/*
 * A withdrawal the peer answered frees the READ sinks it covers; one it
 * left unanswered or refused (it could not stop placing) ends the session
 * (the sinks and the RQ stay the peer's until it left).
 */
static void export_qp_send(struct ntrdma_ib *nib, struct ntrdma_qp_export_msg *m)
{
	int rc;

	rc = ntrdma_cmd_call_in(nib->ndev, m->session, NTRDMA_CMD_QP_EXPORT,
				&m->q, sizeof(m->q), NTRDMA_CMD_TIMEOUT_MS, 0);
	if (m->q.up)
		return;
	if (!rc) {
		ntrdma_sink_withdrawn(nib, m->q.qpn, m->q.epoch, m->session);
		ntrdma_rq_withdrawn(nib, m->q.qpn, m->q.epoch);
	} else if (rc != -ENOLINK) {
		ntrdma_link_proto_error(nib->ndev,
					"a QP withdrawal went unanswered or failed");
	}
}

/* Take @m off the queue (and off its QP's waiting messages). */
static void export_qp_unlink(struct ntrdma_export *exp,
			     struct ntrdma_qp_export_msg *m)
{
	struct ntrdma_qp *qp = m->qp;

	lockdep_assert_held(&exp->qp_lock);
	list_del(&m->link);
	exp->qp_pending--;
	if (!qp) {
		exp->qp_orphans--;
		wake_up(&exp->room_wq);
	} else if (qp->export_msg[0] == m) {
		qp->export_msg[0] = qp->export_msg[1];
		qp->export_msg[1] = NULL;
	} else {
		qp->export_msg[1] = NULL;
	}
}

static void export_qp_work(struct work_struct *work)
{
	struct ntrdma_export *exp = container_of(work, struct ntrdma_export,
						 qp_work);
	struct ntrdma_qp_export_msg *m;

	for (;;) {
		spin_lock_irq(&exp->qp_lock);
		m = list_first_entry_or_null(&exp->qp_msgs,
					     struct ntrdma_qp_export_msg, link);
		if (m)
			export_qp_unlink(exp, m);
		spin_unlock_irq(&exp->qp_lock);
		if (!m)
			return;
		/* The peer forgot the QPs of an ended session. */
		if (m->session == ntrdma_link_session(exp->nib->ndev))
			export_qp_send(exp->nib, m);
		kfree(m);
	}
}

/*
 * Queue @q for @qp, merged with the QP's waiting messages: @m is a new
 * message, used if none of them can take @q. Return: what the caller
 * frees (@m unused, or a message the merge dropped), or NULL.
 */
static struct ntrdma_qp_export_msg *
export_qp_queue(struct ntrdma_export *exp, struct ntrdma_qp *qp,
		const struct ntrdma_wire_qp_export *q, u32 session,
		struct ntrdma_qp_export_msg *m)
{
	struct ntrdma_qp_export_msg **w = qp->export_msg;
	struct ntrdma_qp_export_msg *dropped = NULL, *to;

	lockdep_assert_held(&exp->qp_lock);
	if (q->up) {
		/* the last waiting one, if an export: it has nothing to keep */
		to = w[1] ?: w[0];
		if (to && !to->q.up)
			to = NULL;
	} else {
		/* the first: anything after it never reached the peer */
		to = w[0];
		dropped = w[1];
		if (dropped)
			export_qp_unlink(exp, dropped);
	}
	if (!to) {
		to = m;
		m = dropped;
		to->qp = qp;
		list_add_tail(&to->link, &exp->qp_msgs);
		exp->qp_pending++;
		w[w[0] ? 1 : 0] = to;
	} else if (dropped) {
		kfree(m);
		m = dropped;
	}
	to->session = session;
	to->q = *q;
	return m;
}

/*
 * What the peer's requester may place or pull through @qp. A UC QP takes
 * placed SENDs only: an RC QP of the peer connected to it by mistake must
 * read or write nothing through it (a UC responder serves no READ).
 */
static u32 export_qp_access(const struct ntrdma_qp *qp)
{
	if (qp->ibqp.qp_type != IB_QPT_RC)
		return 0;
	return qp->qp_access_flags & NTRDMA_EXPORT_ACCESS;
}

/**
 * ntrdma_export_qp() - tell the peer that @qp takes placements, or not
 * @qp: the QP (process context, its mutex held)
 * @up: RTR or RTS with its current attributes; false: no more
 *
 * Queued: sent in order from the export work, merged with the QP's
 * messages still waiting (at most two wait: see the top of this file).
 */
void ntrdma_export_qp(struct ntrdma_qp *qp, bool up)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_export *exp = nib->exp;
	struct ntrdma_wire_qp_export q = {
		.qpn = qp->ibqp.qp_num,
		.pd = to_npd(qp->ibqp.pd)->id,
		.access = export_qp_access(qp),
		.dest_qpn = qp->dest_qp_num,
		.up = up,
	};
	u32 session = ntrdma_link_session(nib->ndev);
	struct ntrdma_qp_export_msg *m;
	unsigned long flags;

	lockdep_assert_held(&qp->lock);
	if (!ntrdma_direct_placement || ntrdma_dev_windowed(nib->ndev) ||
	    !session || (!up && !qp->exported))
		return;
	/* A withdrawal cannot fail; without an export the checked path runs */
	m = kzalloc(sizeof(*m), up ? GFP_KERNEL : GFP_KERNEL | __GFP_NOFAIL);
	if (!m)
		return;
	/* A withdrawal starts an epoch: no READ sink is made in the old one. */
	spin_lock_irqsave(&qp->sq_lock, flags);
	if (!up)
		qp->export_epoch = atomic_inc_return(&nib->export_epoch);
	q.epoch = qp->export_epoch;
	WRITE_ONCE(qp->exported, up);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (up)
		ntrdma_rq_export_fill(qp, &q, session);
	else
		ntrdma_rq_withdrawing(qp, q.epoch);
	spin_lock_irq(&exp->qp_lock);
	m = export_qp_queue(exp, qp, &q, session, m);
	spin_unlock_irq(&exp->qp_lock);
	kfree(m);
	queue_work(exp->wq, &exp->qp_work);
}

/**
 * ntrdma_export_qp_destroy() - @qp is being destroyed: withdrawn for good
 * @qp: the QP (process context, its mutex not held)
 *
 * Its waiting messages go on without it (orphans). Waits while
 * NTRDMA_EXPORT_ORPHANS orphans wait, for the export work to send some
 * (bounded by the command timeout of each).
 */
void ntrdma_export_qp_destroy(struct ntrdma_qp *qp)
{
	struct ntrdma_export *exp = to_nib(qp->ibqp.device)->exp;
	u32 i;

	wait_event(exp->room_wq,
		   READ_ONCE(exp->qp_orphans) < NTRDMA_EXPORT_ORPHANS);
	mutex_lock(&qp->lock);
	ntrdma_export_qp(qp, false);	/* the peer stops placing through it */
	spin_lock_irq(&exp->qp_lock);
	for (i = 0; i < ARRAY_SIZE(qp->export_msg) && qp->export_msg[i]; i++) {
		qp->export_msg[i]->qp = NULL;
		qp->export_msg[i] = NULL;
		exp->qp_orphans++;
	}
	spin_unlock_irq(&exp->qp_lock);
	mutex_unlock(&qp->lock);
}

/**
 * ntrdma_export_qp_pending() - QP messages waiting to be sent
 * @nib: the verbs device
 *
 * Return: how many (debugfs info).
 */
u32 ntrdma_export_qp_pending(struct ntrdma_ib *nib)
{
	return READ_ONCE(nib->exp->qp_pending);
}

/**
 * ntrdma_export_pd_free() - a PD's number is about to be reused
 * @nib: the verbs device
 *
 * Process context. The withdrawals of the PD's QPs (all destroyed by now)
 * reach the peer first: at the peer, an MR of a new PD with the same
 * number must never meet a QP export of the old one. Bounded by the
 * command timeout of each withdrawal still queued.
 */
void ntrdma_export_pd_free(struct ntrdma_ib *nib)
{
	flush_work(&nib->exp->qp_work);
}

/* The QP entered ERR: unless it moved on since, it is withdrawn. */
static void export_qp_failed_work(struct work_struct *work)
{
	struct ntrdma_qp *qp = container_of(work, struct ntrdma_qp,
					    unexport_work);

	mutex_lock(&qp->lock);
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		ntrdma_export_qp(qp, false);
	mutex_unlock(&qp->lock);
}

/**
 * ntrdma_export_qp_init() - a new QP's part of the exports
 * @qp: the QP being created (destroy cancels its unexport_work)
 */
void ntrdma_export_qp_init(struct ntrdma_qp *qp)
{
	INIT_WORK(&qp->unexport_work, export_qp_failed_work);
	/* a QP number used before: its old READ_REQs name older epochs */
	qp->export_epoch = atomic_read(&to_nib(qp->ibqp.device)->export_epoch);
}

/**
 * ntrdma_export_qp_failed() - @qp entered ERR
 * @qp: the QP (any context; its sq_lock held)
 *
 * Whatever moved it (the data path, rdma_cm, modify_qp, link loss), a QP in
 * ERR executes nothing: the peer is told to stop placing through it, from a
 * work item (the export messages' order is kept; one that modify_qp or the
 * session's end already withdrew sends nothing).
 */
void ntrdma_export_qp_failed(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);

	if (READ_ONCE(qp->exported))
		queue_work(nib->exp->wq, &qp->unexport_work);
}

/* ---- sessions ---- */

/*
 * A session came up: the peer left every earlier one, so the exports of
 * those are over (their references go); then the MRs still registered are
 * exported into this one.
 */
static void export_up_work(struct work_struct *work)
{
	struct ntrdma_export *exp = container_of(work, struct ntrdma_export,
						 up_work);
	struct ntrdma_ib *nib = exp->nib;
	u32 session = ntrdma_link_session(nib->ndev);
	struct ntrdma_mr *mr, *tmp;
	unsigned long i;

	if (!session)
		return;
	ntrdma_sink_session_up(nib, session);
	ntrdma_rq_session_up(nib, session);
	/* dereg waits for this lock before it frees: the walk is safe */
	mutex_lock(&exp->lock);
	session = export_session_locked(nib);
	if (!session)
		goto out;
	list_for_each_entry_safe(mr, tmp, &exp->mrs, export_link)
		if (mr->export_session != session)
			export_drop(nib, mr);
	xa_for_each(&nib->mr_xa, i, mr)
		if (export_wanted(nib, mr) && mr->export_session != session &&
		    export_mr_locked(nib, mr, session))
			break;	/* the session ended meanwhile */
out:
	mutex_unlock(&exp->lock);
}

/**
 * ntrdma_export_link_up() - a session came up (process context)
 * @nib: the verbs device
 */
void ntrdma_export_link_up(struct ntrdma_ib *nib)
{
	queue_work(nib->exp->wq, &nib->exp->up_work);
	wake_up_all(&nib->exp->up_wq);
}

#ifdef NTRDMA_TEST_HOOKS
/*
 * The test flood's list page, naming one page: itself (the exports name a
 * PD no QP has, so nothing is placed into it). The peer keeps the exports
 * until the session ends: the page stays until the device goes.
 */
static int export_test_page(struct ntrdma_ib *nib)
{
	struct ntrdma_export *exp = nib->exp;
	struct device *dev = export_dev(nib);
	u64 *list;
	dma_addr_t dma;

	lockdep_assert_held(&exp->lock);
	if (exp->test_list)
		return 0;
	list = (u64 *)get_zeroed_page(GFP_KERNEL);
	if (!list)
		return -ENOMEM;
	dma = dma_map_single(dev, list, PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dev, dma)) {
		free_page((unsigned long)list);
		return -ENOMEM;
	}
	dma_sync_single_for_cpu(dev, dma, PAGE_SIZE, DMA_BIDIRECTIONAL);
	list[0] = dma;
	dma_sync_single_for_device(dev, dma, PAGE_SIZE, DMA_BIDIRECTIONAL);
	exp->test_list = list;
	exp->test_list_dma = dma;
	return 0;
}

static void export_test_page_free(struct ntrdma_ib *nib, bool peer_quiet)
{
	struct ntrdma_export *exp = nib->exp;

	if (!exp->test_list || !peer_quiet)
		return;		/* the peer may still read it: kept */
	dma_unmap_single(export_dev(nib), exp->test_list_dma, PAGE_SIZE,
			 DMA_BIDIRECTIONAL);
	free_page((unsigned long)exp->test_list);
	exp->test_list = NULL;
}

/**
 * ntrdma_export_test_flood() - test builds: one-page MR exports to the peer
 * @nib: the verbs device
 * @n: how many: key indices 1..@n (tag 1), PD U32_MAX
 * @f: their answers (refused: -ENOSPC)
 *
 * Return: 0, -EINTR on a fatal signal, -ENOMEM.
 */
int ntrdma_export_test_flood(struct ntrdma_ib *nib, u32 n,
			     struct ntrdma_flood *f)
{
	struct ntrdma_wire_mr_export e = {
		.pd = U32_MAX,
		.access = IB_ACCESS_REMOTE_WRITE,
		.length = NTRDMA_EXPORT_PAGE,
		.npages = 1,
		.count = 1,
	};
	u32 i;
	int rc;

	mutex_lock(&nib->exp->lock);
	rc = export_test_page(nib);
	e.list = nib->exp->test_list_dma;
	for (i = 1; !rc && i <= n && i < BIT(24); i++) {
		if (fatal_signal_pending(current)) {
			rc = -EINTR;
			break;
		}
		e.key = i << 8 | 1;
		e.iova = (u64)i << 32;
		ntrdma_flood_count(f, ntrdma_cmd_call(nib->ndev,
						      NTRDMA_CMD_MR_EXPORT,
						      &e, sizeof(e), NULL, 0,
						      NULL,
						      NTRDMA_CMD_TIMEOUT_MS),
				   -ENOSPC);
		if (f->last_rc == -ENOLINK)
			break;
		cond_resched();
	}
	mutex_unlock(&nib->exp->lock);
	return rc;
}
#else
static void export_test_page_free(struct ntrdma_ib *nib, bool peer_quiet) {}
#endif

/**
 * ntrdma_export_init() - the exporting side of a verbs device
 * @nib: the device being added
 *
 * Return: 0 or -ENOMEM.
 */
int ntrdma_export_init(struct ntrdma_ib *nib)
{
	struct ntrdma_export *exp;

	exp = kzalloc(sizeof(*exp), GFP_KERNEL);
	if (!exp)
		return -ENOMEM;
	/*
	 * Reclaim-safe: dealloc_pd and destroy_qp flush its works, and
	 * storage ULPs call them from WQ_MEM_RECLAIM workers (xprtrdma from
	 * the iw_cm's, on a disconnect).
	 */
	exp->wq = alloc_ordered_workqueue("%s_exp", WQ_MEM_RECLAIM,
					  ntrdma_dev_name(nib->ndev));
	if (!exp->wq) {
		kfree(exp);
		return -ENOMEM;
	}
	exp->nib = nib;
	mutex_init(&exp->lock);
	INIT_LIST_HEAD(&exp->mrs);
	spin_lock_init(&exp->qp_lock);
	INIT_LIST_HEAD(&exp->qp_msgs);
	init_waitqueue_head(&exp->room_wq);
	INIT_WORK(&exp->qp_work, export_qp_work);
	INIT_WORK(&exp->up_work, export_up_work);
	init_waitqueue_head(&exp->up_wq);
	ntrdma_sink_init(nib);
	ntrdma_rq_export_init(nib);
	nib->exp = exp;
	return 0;
}

/**
 * ntrdma_export_fini() - the device goes (every MR is deregistered)
 * @nib: the device
 * @peer_quiet: the peer provably no longer writes our memory: the exports
 *	left are over (else their MRs stay pinned, as orphans)
 */
void ntrdma_export_fini(struct ntrdma_ib *nib, bool peer_quiet)
{
	struct ntrdma_export *exp = nib->exp;
	struct ntrdma_qp_export_msg *m, *mt;
	struct ntrdma_mr *mr, *tmp;

	destroy_workqueue(exp->wq);
	list_for_each_entry_safe(m, mt, &exp->qp_msgs, link)
		kfree(m);
	ntrdma_sink_fini(nib, peer_quiet);
	ntrdma_rq_export_fini(nib, peer_quiet);
	export_test_page_free(nib, peer_quiet);
	mutex_lock(&exp->lock);
	list_for_each_entry_safe(mr, tmp, &exp->mrs, export_link) {
		if (peer_quiet)
			export_drop(nib, mr);
	}
	if (!list_empty(&exp->mrs))
		ibdev_warn(&nib->ibdev, "the peer may still place into deregistered MRs: their pages stay pinned\n");
	mutex_unlock(&exp->lock);
	nib->exp = NULL;
	/* Orphans still on the list keep nothing of @exp but this. */
	if (list_empty(&exp->mrs))
		kfree(exp);
}
