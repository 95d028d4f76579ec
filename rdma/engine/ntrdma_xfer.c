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

#include <linux/dmaengine.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "ntrdma_priv.h"

#define XFER_RING	NTRDMA_TQP_XFER_RING
#define XFER_BUSY	0	/* bit of xfer_busy: a flusher runs */

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
	if (dma_submit_error(dmaengine_submit(tx)))
		return -ENOMEM;
	return 0;
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
			refused = true;
			break;
		}
		/* the entry is read: the stager may reuse it */
		smp_store_release(&tqp->xfer_cons, ++cons);
		n++;
	}
	if (n)
		dma_async_issue_pending(tqp->ndev->dma_chan);
	return refused;
}

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
	bool refused;

	if (!tqp->xfer)
		return;
	if (irqs_disabled() || in_hardirq()) {
		queue_delayed_work(system_highpri_wq, &tqp->xfer_work, 0);
		return;
	}
	do {
		/* A flusher that runs sees what we staged (it re-checks). */
		if (test_and_set_bit_lock(XFER_BUSY, &tqp->xfer_busy))
			return;
		refused = xfer_drain(tqp);
		clear_bit_unlock(XFER_BUSY, &tqp->xfer_busy);
		smp_mb__after_atomic(); /* released before the re-check */
	} while (!refused && smp_load_acquire(&tqp->xfer_prod) !=
		 READ_ONCE(tqp->xfer_cons));
	if (refused)
		queue_delayed_work(system_highpri_wq, &tqp->xfer_work, 1);
}

/**
 * ntrdma_xfer_kick() - make sure staged copies get flushed
 * @tqp: the TQP
 *
 * For a sender that returns -ENOSPC to a caller that may not flush: the
 * completion it waits for needs its copies on the channel. Any context.
 */
void ntrdma_xfer_kick(struct ntrdma_tqp *tqp)
{
	if (tqp->xfer && READ_ONCE(tqp->xfer_prod) != READ_ONCE(tqp->xfer_cons))
		queue_delayed_work(system_highpri_wq, &tqp->xfer_work, 0);
}
