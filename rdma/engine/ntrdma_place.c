// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA direct placement: bytes written straight into the peer's memory
 * (an MR the peer exported, a READ sink it named), in the order of a TQP's
 * sends, by the TQP's DMA channel or by the CPU.
 *
 * With a channel, a placement of more than place_copybreak bytes, or one
 * that finds copies of its TQP still on the channel, is staged for it
 * (ntrdma_xfer.c): one copy per piece, each with a callback; the placement
 * completes (send_done with the user's cookie) when the last of its copies
 * has. Channels complete in order, so a later send of the TQP (which goes
 * on the channel while placements are pending) lands after the placed
 * bytes, and placements complete in the order they were queued. Without a channel, or
 * for a small placement with nothing pending, the CPU copies at once, at
 * most NTRDMA_TQP_PLACE_CPU bytes a call (interrupts are off).
 *
 * Revocation: ntrdma_tqp_place_fence() waits (bounded) until every
 * placement queued before it has completed. At a session's end the stop
 * waits for them like for sends; placements it gives up on keep the device
 * from accepting a new session until they are done: the peer takes our
 * next session as proof that nothing of ours still writes into the pages
 * it exported in the last one.
 */

#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/moduleparam.h>
#include <linux/overflow.h>
#include <linux/slab.h>

#include "ntrdma_priv.h"

#define PLC_RING	NTRDMA_TQP_PLC_RING

/*
 * Up to this a placement is copied by the CPU when nothing is pending: in
 * the test bed the channel (a worker on another vCPU) lost to the CPU at
 * every size make bench measures, 4 KiB to 64 KiB (doc/placement.md, who
 * copies). Larger ones go on the channel: a CPU copy of up to 112 KiB
 * under the TQP's lock, interrupts off, is too long a stall.
 */
static unsigned int place_copybreak = 65536;
module_param(place_copybreak, uint, 0644);
MODULE_PARM_DESC(place_copybreak,
		 "With a DMA channel, direct placements (RDMA WRITE, READ push) up to this many bytes are copied by the CPU when the queue has no DMA in flight (default 65536, 0: always DMA)");

/* How long a fence waits for the channel. */
#define PLACE_FENCE_WAIT	(10 * HZ)

/* With a channel: the placement records. Process context. */
int ntrdma_place_init(struct ntrdma_tqp *tqp)
{
	int i;

	tqp->plc = kcalloc(PLC_RING, sizeof(*tqp->plc), GFP_KERNEL);
	if (!tqp->plc)
		return -ENOMEM;
	for (i = 0; i < PLC_RING; i++)
		tqp->plc[i].tqp = tqp;
	return 0;
}

/* A session starts: nothing of the last one is pending (tqp_start). */
void ntrdma_place_start(struct ntrdma_tqp *tqp)
{
	lockdep_assert_held(&tqp->tx_lock);
	tqp->plc_pos = 0;
	tqp->plc_done = 0;
}

static void place_cpu(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_piece *pc,
		      int n)
{
	void *va;
	int i;

	for (i = 0; i < n; i++) {
		va = kmap_local_page(pc[i].page);
		ntrdma_peer_copy(tqp->ndev, tqp->ndev->link->map + pc[i].dst,
				 va + pc[i].off, pc[i].len);
		kunmap_local(va);
	}
}

/* The session runs and the peer has not told us it left. */
static bool place_may_write(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->active) && tqp_peer(tqp) &&
	       !ntrdma_link_peer_gone(tqp->ndev);
}

/*
 * An abandoned placement's last copy is done: the stop reported it, and
 * the device may be gone since (an orphan TQP): only the TQP's own state.
 */
static void place_forget(struct ntrdma_tqp *tqp, struct ntrdma_tqp_plc *p)
{
	lockdep_assert_held(&tqp->tx_lock);
	p->abandoned = false;
	ntrdma_tqp_unmap(tqp, &p->maps);
	ntrdma_tqp_abandoned_done(tqp);
}

/*
 * The placement's last copy is done: it is unmapped. Its cookie, for
 * send_done; NULL if the stop reported it.
 */
static void *place_finish(struct ntrdma_tqp *tqp, struct ntrdma_tqp_plc *p,
			  int *status)
{
	void *cookie = p->cookie;

	lockdep_assert_held(&tqp->tx_lock);
	if (p->abandoned) {
		place_forget(tqp, p);
		return NULL;
	}
	if (p->status)
		ntrdma_link_proto_error(tqp->ndev, "DMA placement failed");
	ntrdma_tqp_unmap(tqp, &p->maps);
	p->cookie = NULL;
	*status = p->status;
	return cookie;
}

/*
 * Counted done only after its send_done: until then later sends of the TQP
 * wait (copies pending), so none completes before a failure is known.
 * Whoever waited for the channel (dma_wake) goes on now.
 */
static bool place_counted(struct ntrdma_tqp *tqp)
{
	unsigned long flags;
	bool wake;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	tqp->plc_done++;
	wake = tqp->dma_wake;
	tqp->dma_wake = false;
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	return wake;
}

static void place_dma_done(void *arg, const struct dmaengine_result *res)
{
	struct ntrdma_tqp_plc *p = arg;
	struct ntrdma_tqp *tqp = p->tqp;
	void *cookie = NULL;
	unsigned long flags;
	int status = 0;
	bool last;
	u32 len;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	if (res && res->result != DMA_TRANS_NOERROR)
		p->status = -EIO;
	len = p->len;
	last = !--p->pending;
	if (last)
		cookie = place_finish(tqp, p, &status);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	if (cookie) {
		tqp->ops->send_done(tqp->ctx, cookie, len, status);
		if (place_counted(tqp))
			tqp->ops->tx_space(tqp->ctx);
	}
	/* the last copy wakes a stop; the last of a placement, a fence */
	ntrdma_tqp_copy_retired(tqp, last);
}

/*
 * Stage the placement for the channel: 1, or -ENOMEM with nothing staged
 * (no room, or a page that would not map). The caller's flush hands it
 * over (ntrdma_tqp_send_flush()).
 */
static int place_dma(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_piece *pc,
		     int n, u32 len, void *cookie)
{
	struct ntrdma_tqp_plc *p = &tqp->plc[tqp->plc_pos % PLC_RING];
	dma_addr_t src[NTRDMA_TQP_MAX_SGE];
	int i;

	lockdep_assert_held(&tqp->tx_lock);
	if (ntrdma_xfer_room(tqp) < n)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (ntrdma_tqp_map(tqp, &p->maps, pc[i].page, pc[i].off,
				   pc[i].len, &src[i])) {
			ntrdma_tqp_unmap(tqp, &p->maps);
			return -ENOMEM;
		}
	}
	p->status = 0;
	p->pending = n;
	p->cookie = cookie;
	p->len = len;
	for (i = 0; i < n; i++)
		ntrdma_xfer_stage(tqp, tqp->ndev->flat_dma + pc[i].dst, src[i],
				  pc[i].len, !i, place_dma_done, p);
	tqp->plc_pos++;
	return 1;
}

/*
 * Every piece lies in what the window reaches of the peer's memory (none
 * in windowed mode; sums overflow-checked). Its byte count in @len.
 */
static bool place_reach(struct ntrdma_tqp *tqp,
			const struct ntrdma_tqp_piece *pc, int n, u32 *len)
{
	u64 end, reach = ntrdma_dev_peer_reach(tqp->ndev);
	int i;

	*len = 0;
	for (i = 0; i < n; i++) {
		if (check_add_overflow(pc[i].dst, (u64)pc[i].len, &end) ||
		    end > reach || pc[i].off + pc[i].len > PAGE_SIZE)
			return false;
		*len += pc[i].len;
	}
	return true;
}

/* By the channel: the user can wait for it, and it is large or must be. */
static bool place_on_channel(struct ntrdma_tqp *tqp, u32 len, void *cookie)
{
	lockdep_assert_held(&tqp->tx_lock);
	return cookie && tqp->plc &&
	       (len > READ_ONCE(place_copybreak) || tqp_copies_pending(tqp)) &&
	       tqp->plc_pos - tqp->plc_done < PLC_RING;
}

/*
 * How many of the @n pieces @pc one CPU copy takes: the first, and those
 * after it while they add up to at most NTRDMA_TQP_PLACE_CPU bytes.
 */
static int place_cpu_count(const struct ntrdma_tqp_piece *pc, int n)
{
	u32 len = pc[0].len;
	int i;

	for (i = 1; i < n && len + pc[i].len <= NTRDMA_TQP_PLACE_CPU; i++)
		len += pc[i].len;
	return i;
}

/**
 * ntrdma_tqp_place() - write bytes straight into the peer's memory, in order
 * @tqp: the TQP whose order the writes keep
 * @pc: the pieces: @len bytes of @page from @off each, to the peer's DMA
 *	address @dst (what the flat window reaches there)
 * @n: how many (at most NTRDMA_TQP_MAX_SGE); when the CPU copies, set to
 *	how many it wrote: the first ones, up to NTRDMA_TQP_PLACE_CPU bytes
 *	(at least one piece; a piece is at most a page)
 * @cookie: for send_done when the copy goes on the DMA channel; NULL: the
 *	CPU copies (pages the caller cannot keep until send_done)
 *
 * After every earlier send and placement of @tqp, before any later one.
 * What goes on the channel waits for the caller's ntrdma_tqp_send_flush(),
 * made with none of its locks held (as for a send with @more).
 * The pages stay the caller's until the placement is done: at once when
 * this returns 0, at send_done(@cookie) when it returns 1. A CPU copy
 * behind copies still on the channel waits for them: -ENOSPC, and
 * tx_space follows. Any context but hard irq.
 *
 * Return: 0 once the first *@n pieces are written (the caller places the
 * rest with another call), 1 when all of them are staged for the channel,
 * -ENOSPC (see above), -ENOLINK without a session or once the peer told us
 * it left it (it may give its pages back right after), -EINVAL for a piece
 * outside the window.
 */
int ntrdma_tqp_place(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_piece *pc,
		     int *n, void *cookie)
{
	unsigned long flags;
	int rc = -ENOSPC;
	u32 len;

	if (*n < 1 || *n > NTRDMA_TQP_MAX_SGE ||
	    !place_reach(tqp, pc, *n, &len))
		return -EINVAL;
	spin_lock_irqsave(&tqp->tx_lock, flags);
	if (!place_may_write(tqp)) {
		rc = -ENOLINK;
		goto out;
	}
	if (place_on_channel(tqp, len, cookie))
		rc = place_dma(tqp, pc, *n, len, cookie);
	if (rc == 1)
		goto out;
	if (tqp_copies_pending(tqp)) {
		tqp->dma_wake = true;	/* after the copies in flight */
		rc = -ENOSPC;
		goto out;
	}
	*n = place_cpu_count(pc, *n);
	place_cpu(tqp, pc, *n);
	rc = 0;
out:
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	return rc;
}

/**
 * ntrdma_tqp_place_busy() - placements of @tqp still on the channel
 * @tqp: the TQP
 *
 * A CPU read of what they write would see old bytes until they are done.
 *
 * Return: true while any is.
 */
bool ntrdma_tqp_place_busy(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->plc_done) != READ_ONCE(tqp->plc_pos);
}

static bool place_done_to(struct ntrdma_tqp *tqp, u32 mark)
{
	return (int)(READ_ONCE(tqp->plc_done) - mark) >= 0;
}

/**
 * ntrdma_tqp_place_fence() - wait for the placements queued so far
 * @tqp: the TQP
 *
 * For a revocation: once this returns true, no placement that was queued
 * before the call still writes. A session ending meanwhile does not make
 * them done: the stop waits for them too, and one it gives up on never
 * counts as done. Process context; bounded (10 s, or until such a stop).
 * The caller keeps the session's counters (no restart) while it waits.
 *
 * Return: true when they are done, false when the channel did not finish
 * them in time (the pages must then stay out of reuse).
 */
bool ntrdma_tqp_place_fence(struct ntrdma_tqp *tqp)
{
	unsigned long flags;
	u32 mark;

	if (!tqp->plc)
		return true;
	spin_lock_irqsave(&tqp->tx_lock, flags);
	mark = tqp->plc_pos;
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	if (place_done_to(tqp, mark))
		return true;
	ntrdma_xfer_flush(tqp);
	wait_event_timeout(tqp->dma_wait, place_done_to(tqp, mark) ||
			   READ_ONCE(tqp->abandoned), PLACE_FENCE_WAIT);
	if (place_done_to(tqp, mark))
		return true;
	dev_err(tqp->ndev->link->parent, "%s: TQP%d: placements still on the DMA channel (%s)\n",
		tqp->ndev->name, tqp->id,
		READ_ONCE(tqp->abandoned) ? "the stop gave up on them" :
					    "after 10 s");
	return false;
}

/**
 * ntrdma_tqp_place_ready() - would a placement go now
 * @tqp: the TQP
 *
 * For a placement that got -ENOSPC: once this is true, its tx_space has
 * come (or will not be needed). Placements need no peer buffer, so
 * ntrdma_tqp_send_ready() is the wrong test for them.
 *
 * Return: true while the session runs and nothing waits for the channel.
 */
bool ntrdma_tqp_place_ready(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->active) && !READ_ONCE(tqp->dma_wake);
}

/*
 * The stop gave up on the channel (tqp_abandon()): placements still on it
 * are reported failed now; their mappings stay until each late completion,
 * and until the last of them the device accepts no new session.
 */
void ntrdma_place_abandon(struct ntrdma_tqp *tqp)
{
	struct ntrdma_tqp_plc *p;
	unsigned long flags;
	void *cookie;
	u32 len;
	int i;

	for (i = 0; tqp->plc && i < PLC_RING; i++) {
		p = &tqp->plc[i];
		spin_lock_irqsave(&tqp->tx_lock, flags);
		cookie = p->cookie;
		len = p->len;
		if (cookie && p->pending) {
			p->cookie = NULL;
			p->abandoned = true;
			ntrdma_tqp_abandon_one(tqp);
		} else {
			cookie = NULL;
		}
		spin_unlock_irqrestore(&tqp->tx_lock, flags);
		if (cookie)
			tqp->ops->send_done(tqp->ctx, cookie, len, -EIO);
	}
}
