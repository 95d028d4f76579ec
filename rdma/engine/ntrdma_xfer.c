// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA staged DMA copies: how a TQP hands its copies to the channel.
 *
 * Sends and placements decide their copies under the TQP's tx_lock, with
 * interrupts off, often under a QP's lock too. The dmaengine calls cannot
 * run there: ioat and plx_dma take spin_lock_bh in prep and drop it in
 * submit, which runs softirqs inside our section with interrupts off; their
 * tx_status and ptdma's run completion callbacks, which take tx_lock; idxd
 * may sleep. So a copy is only staged under the lock (an entry in the
 * TQP's ring: addresses, length, callback) and handed to the channel by
 * ntrdma_xfer_flush() after the caller dropped its locks, or by a work
 * item when the caller runs with interrupts off.
 *
 * One flusher at a time per TQP hands the entries over in ring order, so
 * the channel sees them in the order they were staged and completes them
 * in that order. An entry the channel refuses (a full ring) stays at the
 * head and is retried from the work item a jiffy later.
 */

#include <linux/delay.h>
#include <linux/dmaengine.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "ntrdma_priv.h"

#define XFER_RING	NTRDMA_TQP_XFER_RING
#define XFER_BUSY	0	/* bit of xfer_busy: a flusher runs */
/* A channel that took nothing for this long ends the session. */
#define XFER_REFUSED_MAX	(2 * HZ)

static void xfer_work(struct work_struct *work)
{
	struct ntrdma_tqp *tqp = container_of(to_delayed_work(work),
					      struct ntrdma_tqp, xfer_work);

	ntrdma_xfer_flush(tqp);
}

/* With a channel: the staging ring. Process context. */
int ntrdma_xfer_init(struct ntrdma_tqp *tqp)
{
	INIT_DELAYED_WORK(&tqp->xfer_work, xfer_work);
	tqp->xfer = kvcalloc(XFER_RING, sizeof(*tqp->xfer), GFP_KERNEL);
	return tqp->xfer ? 0 : -ENOMEM;
}

/* No flush runs or follows once this returns (the TQP is destroyed). */
void ntrdma_xfer_fini(struct ntrdma_tqp *tqp)
{
	if (tqp->xfer)
		cancel_delayed_work_sync(&tqp->xfer_work);
}

/* The entries of @tqp's ring still free for staging (under tx_lock). */
u32 ntrdma_xfer_room(struct ntrdma_tqp *tqp)
{
	lockdep_assert_held(&tqp->tx_lock);
	/* pairs with the flusher's release: it is done reading those */
	return XFER_RING - (tqp->xfer_prod - smp_load_acquire(&tqp->xfer_cons));
}

/**
 * ntrdma_xfer_stage() - stage one copy for the channel
 * @tqp: the TQP whose order it keeps
 * @dst: where it writes (the channel's address of the peer's memory)
 * @src: what it reads (mapped for the channel)
 * @len: bytes
 * @first: the first copy of its message or placement (fault injection)
 * @cb: called when it is done (counted in dma_inflight); NULL for a copy
 *	whose completion a later entry of the same message reports
 * @param: for @cb
 *
 * Under tx_lock, after ntrdma_xfer_room() said there is room. The channel
 * sees it at the next ntrdma_xfer_flush().
 */
void ntrdma_xfer_stage(struct ntrdma_tqp *tqp, dma_addr_t dst, dma_addr_t src,
		       u32 len, bool first, dma_async_tx_callback_result cb,
		       void *param)
{
	struct ntrdma_tqp_xfer *x = &tqp->xfer[tqp->xfer_prod % XFER_RING];

	lockdep_assert_held(&tqp->tx_lock);
	x->dst = dst;
	x->src = src;
	x->len = len;
	x->first = first;
	x->cb = cb;
	x->param = param;
	if (cb)
		atomic_inc(&tqp->dma_inflight);
	/* the entry before the index the flusher reads */
	smp_store_release(&tqp->xfer_prod, tqp->xfer_prod + 1);
}

/* Hand one entry to the channel: 0, or -ENOMEM when it refused it. */
static int xfer_submit(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_xfer *x)
{
	struct dma_chan *chan = tqp->ndev->dma_chan;
	struct dma_async_tx_descriptor *tx;
	dma_cookie_t cookie;

	/* Test builds: the channel's ring is full. */
	if (ntrdma_fault(tqp->ndev, x->first ? NTRDMA_FAULT_DMA_PREP :
			 NTRDMA_FAULT_DMA_PREP_MID))
		return -ENOMEM;
	tx = dmaengine_prep_dma_memcpy(chan, x->dst, x->src, x->len,
				       x->cb ? DMA_PREP_INTERRUPT : 0);
	if (!tx)
		return -ENOMEM;
	tx->callback_result = x->cb;
	tx->callback_param = x->param;
	cookie = dmaengine_submit(tx);
	if (dma_submit_error(cookie))
		return -ENOMEM;
	tqp->xfer_last = cookie;
	return 0;
}

/*
 * The channel refused the head entry. A full ring frees room as its copies
 * complete; one that takes nothing for XFER_REFUSED_MAX is broken: the
 * session ends, and its stop drops what stays staged.
 */
static void xfer_refused(struct ntrdma_tqp *tqp)
{
	if (!tqp->xfer_refused_at) {
		tqp->xfer_refused_at = jiffies | 1;
		return;
	}
	if (time_after(jiffies, tqp->xfer_refused_at + XFER_REFUSED_MAX))
		ntrdma_link_proto_error(tqp->ndev,
					"the DMA channel took no copy for 2 s");
}

/* The flusher: every staged entry in order. True when the channel refused. */
static bool xfer_drain(struct ntrdma_tqp *tqp)
{
	/* pairs with the stager's release: the entries before the index */
	u32 prod = smp_load_acquire(&tqp->xfer_prod);
	u32 cons = tqp->xfer_cons, n = 0;
	bool refused = false;

	while (cons != prod) {
		if (xfer_submit(tqp, &tqp->xfer[cons % XFER_RING])) {
			xfer_refused(tqp);
			refused = true;
			break;
		}
		tqp->xfer_refused_at = 0;
		/* the entry is read: the stager may reuse it */
		smp_store_release(&tqp->xfer_cons, ++cons);
		n++;
	}
	if (n)
		dma_async_issue_pending(tqp->ndev->dma_chan);
	return refused;
}

/* Rounds of one flush call before the rest goes to the work item. */
#define XFER_ROUNDS	4

/**
 * ntrdma_xfer_flush() - hand the staged copies of @tqp to the channel
 * @tqp: the TQP
 *
 * Call after dropping every lock that was held while staging. With
 * interrupts off (a ULP posting from a completion handler, netpoll) a
 * work item does it instead. Any context.
 */
void ntrdma_xfer_flush(struct ntrdma_tqp *tqp)
{
	bool refused = false;
	int round;

	if (!tqp->xfer)
		return;
	if (irqs_disabled() || in_hardirq()) {
		queue_delayed_work(system_highpri_wq, &tqp->xfer_work, 0);
		return;
	}
	for (round = 0; round < XFER_ROUNDS; round++) {
		/*
		 * What we staged before the flag test: a flusher that holds
		 * the flag sees it at its re-check (pairs with the barrier
		 * after its clear_bit_unlock()).
		 */
		smp_mb();
		if (test_and_set_bit_lock(XFER_BUSY, &tqp->xfer_busy))
			return;
		/* not preempted while others wait for the flag */
		local_bh_disable();
		refused = xfer_drain(tqp);
		local_bh_enable();
		clear_bit_unlock(XFER_BUSY, &tqp->xfer_busy);
		smp_mb__after_atomic(); /* released before the re-check */
		if (refused || smp_load_acquire(&tqp->xfer_prod) ==
		    READ_ONCE(tqp->xfer_cons))
			break;
	}
	if (refused || round == XFER_ROUNDS)
		queue_delayed_work(system_highpri_wq, &tqp->xfer_work,
				   refused ? 1 : 0);
}

/* Take the flusher's flag from process context (a flusher holds it briefly). */
static void xfer_hold(struct ntrdma_tqp *tqp)
{
	while (test_and_set_bit_lock(XFER_BUSY, &tqp->xfer_busy))
		usleep_range(100, 200);
}

/*
 * The first staged entry whose copy may be dropped: the head, once the
 * channel finished what it took; else the first that begins a message or
 * placement (the head's one is partly on the channel, its sources in use).
 */
static u32 xfer_drop_from(struct ntrdma_tqp *tqp, u32 prod)
{
	struct dma_chan *chan = tqp->ndev->dma_chan;
	u32 at = tqp->xfer_cons;

	if (!tqp->xfer_last ||
	    dma_async_is_tx_complete(chan, tqp->xfer_last, NULL, NULL) !=
	    DMA_IN_PROGRESS)
		return at;
	while (at != prod && !tqp->xfer[at % XFER_RING].first)
		at++;
	return at;
}

/**
 * ntrdma_xfer_abandon() - drop the staged copies of a stop that gave up
 * @tqp: the TQP, inactive, its senders told (tqp_abandon())
 *
 * Staged copies are dropped: their callbacks run now, with
 * DMA_TRANS_ABORTED, so their mappings go and the abandoned count comes
 * down. A message or placement the channel took in part and still runs
 * stays staged: its sources must stay mapped until the channel is done
 * with the part it has. Process context, no lock held (a real engine's
 * tx_status may run callbacks).
 */
void ntrdma_xfer_abandon(struct ntrdma_tqp *tqp)
{
	struct dmaengine_result res = { .result = DMA_TRANS_ABORTED };
	struct ntrdma_tqp_xfer *x;
	unsigned long flags;
	u32 prod, at, from;

	if (!tqp->xfer)
		return;
	xfer_hold(tqp);
	/* pairs with the stager's release, as in xfer_drain() */
	prod = smp_load_acquire(&tqp->xfer_prod);
	from = xfer_drop_from(tqp, prod);
	for (at = from; at != prod; at++) {
		x = &tqp->xfer[at % XFER_RING];
		if (x->cb)
			x->cb(x->param, &res);
	}
	tqp->xfer_refused_at = 0;	/* the next session's own count */
	spin_lock_irqsave(&tqp->tx_lock, flags);
	tqp->xfer_prod = from;	/* inactive: nobody stages meanwhile */
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	clear_bit_unlock(XFER_BUSY, &tqp->xfer_busy);
}
