// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA transport queue pairs (TQPs): the engine's reliable, in-order
 * message transport, shared by the faces.
 *
 * Receive: the owner posts buffers (DMA address + length of its own memory);
 * their descriptors go into the peer's inbox. The peer writes a message
 * straight into the next posted buffer through its flat window, then the
 * completion into our inbox, then our completion producer index, then rings
 * our RX doorbell. Nothing is copied on our side.
 * Send: the message (a list of page ranges) is written straight into the next
 * buffer the peer posted, by the CPU or by a DMA_MEMCPY channel. A sender
 * never writes a buffer that was not posted: with none posted, send returns
 * -ENOSPC after asking the peer for a TXWAKE doorbell.
 *
 * With DMA, data and completion go on one channel in order (staged under
 * the lock, handed over after it: ntrdma_xfer.c); the producer index and
 * the doorbell follow from the completion callback, which is also where
 * the sender learns that its buffers are free again (send_done). A message
 * of at most tx_copybreak bytes that finds no DMA copy of its TQP in
 * flight is copied by the CPU instead, as without a channel.
 *
 * Sessions: positions start at epoch ^ peer_epoch, so a descriptor, index or
 * completion left over from an earlier session fails the sequence checks.
 * When a session ends every send in flight completes with -ENOLINK.
 */

#include <linux/delay.h>
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "ntrdma_priv.h"

#define TQP_RING	NTRDMA_TQP_RING

/*
 * A DMA descriptor, its completion interrupt and callback cost more than a
 * CPU copy of a few hundred bytes (ntb_transport's copy_bytes makes the same
 * trade). A message this small goes by CPU when no earlier DMA copy of its
 * TQP is outstanding, so order within the TQP holds.
 */
static unsigned int tx_copybreak = 1024;
module_param(tx_copybreak, uint, 0644);
MODULE_PARM_DESC(tx_copybreak,
		 "With a DMA channel, send messages up to this many bytes by CPU copy when the queue has no DMA in flight (default 1024, 0: always DMA)");

static struct ntrdma_wire_tqp *tqp_own(struct ntrdma_tqp *tqp)
{
	return &tqp->ndev->inbox->tqp[tqp->id];
}

static void tqp_vdb_rx(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	WRITE_ONCE(tqp->rx_armed, false);
	tqp->ops->rx(tqp->ctx);
}

static void tqp_vdb_txwake(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	WRITE_ONCE(tqp->tx_waiting, false);
	tqp->ops->tx_space(tqp->ctx);
}

static bool tqp_recv_pending(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->active) &&
	       READ_ONCE(tqp_own(tqp)->cq_prod) != tqp->rx_cons;
}

/*
 * The heartbeat sweep's watch functions (ntrdma_vdb_sweep(), vdb_lock held;
 * the link work serializes them with start and stop). Lockless: a spurious
 * kick costs one look, a missed one waits a period. A receiver that sleeps
 * while completions wait missed its doorbell (the look it is woken for also
 * checks the producer, so a malformed one ends the session here too).
 */
static bool tqp_watch_rx(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	return READ_ONCE(tqp->rx_armed) && tqp_recv_pending(tqp);
}

/* A sender that asked for TXWAKE and has a buffer posted now. */
static bool tqp_watch_txwake(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	return READ_ONCE(tqp->active) && READ_ONCE(tqp->tx_waiting) &&
	       READ_ONCE(tqp_own(tqp)->post_prod) != READ_ONCE(tqp->tx_pos);
}

static void tqp_vdb_state(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	tqp->ops->peer_state(tqp->ctx);
}

static void tqp_vdb_kick(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *tqp = ctx;

	if (tqp->ops->kick)
		tqp->ops->kick(tqp->ctx);
}

static const ntrdma_vdb_fn tqp_vdb_fns[NTRDMA_TQP_VDBS] = {
	[NTRDMA_TQP_VDB_RX] = tqp_vdb_rx,
	[NTRDMA_TQP_VDB_TXWAKE] = tqp_vdb_txwake,
	[NTRDMA_TQP_VDB_STATE] = tqp_vdb_state,
	[NTRDMA_TQP_VDB_KICK] = tqp_vdb_kick,
};

static const ntrdma_vdb_watch_fn tqp_vdb_watch[NTRDMA_TQP_VDBS] = {
	[NTRDMA_TQP_VDB_RX] = tqp_watch_rx,
	[NTRDMA_TQP_VDB_TXWAKE] = tqp_watch_txwake,
};

static void tqp_free_stage(struct ntrdma_tqp *tqp)
{
	if (!tqp->stage)
		return;
	dma_unmap_single(tqp->ndev->dma_chan->device->dev, tqp->stage_dma,
			 TQP_RING * sizeof(*tqp->stage), DMA_TO_DEVICE);
	kfree(tqp->stage);
}

/**
 * ntrdma_tqp_create() - create a transport queue pair
 * @ndev: the device
 * @id: which TQP (enum ntrdma_tqp_id): each id exists once per device
 * @ops: the user's callbacks
 * @ctx: handed to @ops
 *
 * The TQP is idle until ntrdma_tqp_start(). Process context.
 *
 * Return: the TQP, or an ERR_PTR (-EINVAL for a bad or taken id, -ENOMEM).
 */
struct ntrdma_tqp *ntrdma_tqp_create(struct ntrdma_dev *ndev,
				     enum ntrdma_tqp_id id,
				     const struct ntrdma_tqp_ops *ops,
				     void *ctx)
{
	struct ntrdma_tqp *tqp;
	int i, rc;

	if (id < 0 || id >= NTRDMA_TQP_COUNT || ndev->tqp[id])
		return ERR_PTR(-EINVAL);
	tqp = kzalloc(sizeof(*tqp), GFP_KERNEL);
	if (!tqp)
		return ERR_PTR(-ENOMEM);
	tqp->ndev = ndev;
	tqp->id = id;
	tqp->ops = ops;
	tqp->ctx = ctx;
	spin_lock_init(&tqp->tx_lock);
	init_waitqueue_head(&tqp->dma_wait);
	tqp->slot = kvcalloc(TQP_RING, sizeof(*tqp->slot), GFP_KERNEL);
	if (!tqp->slot) {
		rc = -ENOMEM;
		goto err_free;
	}
	if (ndev->dma_chan) {
		struct device *dev = ndev->dma_chan->device->dev;

		tqp->dma_dev = dev;
		tqp->stage = kcalloc(TQP_RING, sizeof(*tqp->stage), GFP_KERNEL);
		if (!tqp->stage) {
			rc = -ENOMEM;
			goto err_slot;
		}
		tqp->stage_dma = dma_map_single(dev, tqp->stage,
						TQP_RING * sizeof(*tqp->stage),
						DMA_TO_DEVICE);
		if (dma_mapping_error(dev, tqp->stage_dma)) {
			kfree(tqp->stage);
			tqp->stage = NULL;
			rc = -EIO;
			goto err_slot;
		}
		rc = ntrdma_place_init(tqp);
		if (!rc)
			rc = ntrdma_xfer_init(tqp);
		if (rc)
			goto err_stage;
	}
	for (i = 0; i < NTRDMA_TQP_VDBS; i++) {
		rc = ntrdma_vdb_register(ndev, NTRDMA_VDB_TQP(id, i),
					 tqp_vdb_fns[i], tqp_vdb_watch[i], tqp);
		if (rc)
			goto err_vdb;
	}
	ndev->tqp[id] = tqp;
	return tqp;

err_vdb:
	while (i--)
		ntrdma_vdb_unregister(ndev, NTRDMA_VDB_TQP(id, i));
err_stage:
	kvfree(tqp->xfer);
	kfree(tqp->plc);
	tqp_free_stage(tqp);
err_slot:
	kvfree(tqp->slot);
err_free:
	kfree(tqp);
	return ERR_PTR(rc);
}

/**
 * ntrdma_tqp_destroy() - free a stopped TQP
 * @tqp: the TQP, after ntrdma_tqp_stop() (or never started)
 *
 * No callback of it runs once this returns. Process context.
 */
void ntrdma_tqp_destroy(struct ntrdma_tqp *tqp)
{
	struct ntrdma_dev *ndev = tqp->ndev;
	unsigned long flags;
	int i;

	for (i = 0; i < NTRDMA_TQP_VDBS; i++)
		ntrdma_vdb_unregister(ndev, NTRDMA_VDB_TQP(tqp->id, i));
	ndev->tqp[tqp->id] = NULL;
	ntrdma_xfer_fini(tqp);
	/* A callback's last touch of the TQP is under tx_lock. */
	spin_lock_irqsave(&tqp->tx_lock, flags);
	tqp->orphan = atomic_read(&tqp->dma_inflight);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	if (tqp->orphan) {
		/* Late completions still find it (see tqp_abandon()). */
		dev_err(ndev->link->parent, "%s: TQP%d: DMA copies still pending: keeping its memory\n",
			ndev->name, tqp->id);
		return;
	}
	tqp_free_stage(tqp);
	kvfree(tqp->xfer);
	kfree(tqp->plc);
	kvfree(tqp->slot);
	kfree(tqp);
}

/**
 * ntrdma_tqp_start() - start a TQP for the session that just came up
 * @tqp: the TQP
 *
 * Call from the face's link_up callback (the peer's inbox is known then).
 * Ring positions start at the session's base, so nothing of an earlier
 * session passes the sequence checks.
 */
void ntrdma_tqp_start(struct ntrdma_tqp *tqp)
{
	struct ntrdma_dev *ndev = tqp->ndev;
	struct ntrdma_wire_tqp *own = tqp_own(tqp);
	u32 base = ndev->epoch ^ ndev->peer_epoch;
	unsigned long flags;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	if (tqp->abandoned) {
		/* Copies of an abandoned session still own slots. */
		spin_unlock_irqrestore(&tqp->tx_lock, flags);
		dev_err(ndev->link->parent, "%s: TQP%d: DMA copies of the last session still pending: not started\n",
			ndev->name, tqp->id);
		return;
	}
	tqp->rx_post = base;
	tqp->rx_cons = base;
	tqp->rx_published = base;
	tqp->tx_pos = base;
	tqp->tx_done = base;
	tqp->tx_published = base;
	ntrdma_place_start(tqp);
	tqp->dma_wake = false;
	tqp->tx_waiting = false;
	tqp->rx_armed = false;
	/*
	 * The peer writes our completion producer only after we post, and
	 * asks for TXWAKE only after seeing a post: both start at base here.
	 */
	WRITE_ONCE(own->cq_prod, base);
	WRITE_ONCE(own->tx_event, base);
	/* The first completion of the session rings (before any post). */
	ntrdma_peer_w32(tqp->ndev, base, &tqp_peer(tqp)->rx_event);
	WRITE_ONCE(tqp->active, true);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
}

/* Map @len bytes of @page from @off for the channel, kept in @m. */
int ntrdma_tqp_map(struct ntrdma_tqp *tqp, struct ntrdma_tqp_maps *m,
		   struct page *page, u32 off, u32 len, dma_addr_t *addr)
{
	*addr = dma_map_page(tqp->dma_dev, page, off, len, DMA_TO_DEVICE);
	if (dma_mapping_error(tqp->dma_dev, *addr))
		return -ENOMEM;
	m->addr[m->n] = *addr;
	m->len[m->n++] = len;
	return 0;
}

/* Undo every mapping kept in @m. */
void ntrdma_tqp_unmap(struct ntrdma_tqp *tqp, struct ntrdma_tqp_maps *m)
{
	int i;

	for (i = 0; i < m->n; i++)
		dma_unmap_page(tqp->dma_dev, m->addr[i], m->len[i],
			       DMA_TO_DEVICE);
	m->n = 0;
}

static void tqp_unmap_slot(struct ntrdma_tqp *tqp, struct ntrdma_tqp_slot *s)
{
	ntrdma_tqp_unmap(tqp, &s->maps);
}

/* A copy (a send's slot, a placement) the stop gives up on. */
void ntrdma_tqp_abandon_one(struct ntrdma_tqp *tqp)
{
	lockdep_assert_held(&tqp->tx_lock);
	tqp->abandoned++;
	atomic_inc(&tqp->ndev->copies_abandoned);
}

/* ...is done at last: the device may be gone (an orphan TQP). */
void ntrdma_tqp_abandoned_done(struct ntrdma_tqp *tqp)
{
	lockdep_assert_held(&tqp->tx_lock);
	tqp->abandoned--;
	if (!tqp->orphan)
		atomic_dec(&tqp->ndev->copies_abandoned);
}

/*
 * A DMA callback's last touch of @tqp: one copy fewer on the channel; the
 * last wakes a stop (@wake: wake a fence anyway). Under tx_lock, so that
 * ntrdma_tqp_destroy() never frees a TQP a callback still uses.
 */
void ntrdma_tqp_copy_retired(struct ntrdma_tqp *tqp, bool wake)
{
	unsigned long flags;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	if (atomic_dec_and_test(&tqp->dma_inflight) || wake)
		wake_up(&tqp->dma_wait);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
}

/* How long a stop waits for the channel to finish this TQP's copies. */
#define TQP_STOP_WAIT	(10 * HZ)

/*
 * The channel did not finish this TQP's copies in time. They read only
 * our pages and write only the peer's (whose session is over), so their
 * senders are told now (-EIO) and may free those pages: a late read of a
 * freed page harms nothing. What the channel itself still uses stays: the
 * mappings (until each late completion), the slots, the staged
 * completions and the TQP (ntrdma_tqp_destroy() keeps them), and the
 * device accepts no new session until they are done (copies_abandoned:
 * the peer takes one as proof that nothing of ours writes its pages).
 * Messages and placements still staged whole never reach the channel
 * (ntrdma_xfer_abandon()). Never terminate the channel here: it is shared, and other queues' copies
 * would be dropped unreported (ntrdma_dma_fini() does, once all are gone).
 */
static void tqp_abandon(struct ntrdma_tqp *tqp)
{
	struct ntrdma_tqp_slot *s;
	unsigned long flags;
	void *cookie;
	u32 len;
	int i;

	dev_err(tqp->ndev->link->parent,
		"%s: TQP%d: %d DMA copies still pending after %u s: reported as failed, their mappings kept\n",
		tqp->ndev->name, tqp->id, atomic_read(&tqp->dma_inflight),
		TQP_STOP_WAIT / HZ);
	for (i = 0; i < TQP_RING; i++) {
		s = &tqp->slot[i];
		spin_lock_irqsave(&tqp->tx_lock, flags);
		cookie = s->cookie;
		len = s->len;
		if (cookie) {
			s->cookie = NULL;
			s->abandoned = true;
			ntrdma_tqp_abandon_one(tqp);
		}
		spin_unlock_irqrestore(&tqp->tx_lock, flags);
		if (cookie)
			tqp->ops->send_done(tqp->ctx, cookie, len, -EIO);
	}
	ntrdma_place_abandon(tqp);
	ntrdma_xfer_abandon(tqp);
	/* Senders were told; late completions wake nobody (a face may go). */
	spin_lock_irqsave(&tqp->tx_lock, flags);
	tqp->dma_wake = false;
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	wake_up(&tqp->dma_wait);	/* a fence stops waiting */
}

/**
 * ntrdma_tqp_stop() - end a TQP's session
 * @tqp: the TQP
 *
 * No new sends; those still on the DMA channel finish copying (they cannot
 * be recalled) and complete with -ENOLINK. Call from the face's link_down
 * callback. May sleep.
 */
void ntrdma_tqp_stop(struct ntrdma_tqp *tqp)
{
	unsigned long flags;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	WRITE_ONCE(tqp->active, false);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	if (!tqp->ndev->dma_chan)
		return;
	ntrdma_xfer_flush(tqp);
	if (!wait_event_timeout(tqp->dma_wait, !atomic_read(&tqp->dma_inflight),
				TQP_STOP_WAIT))
		tqp_abandon(tqp);
}

/* ---- the peer's end ---- */

/**
 * ntrdma_tqp_set_state() - publish our end's state word to the peer
 * @tqp: the TQP
 * @state: 0 for closed, else the user's meaning
 *
 * The peer's peer_state callback runs. Nothing happens without a session.
 */
void ntrdma_tqp_set_state(struct ntrdma_tqp *tqp, u32 state)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);

	if (!READ_ONCE(tqp->active) || !pt)
		return;
	ntrdma_peer_w32(tqp->ndev, state, &pt->peer_state);
	ntrdma_vdb_ring(tqp->ndev, NTRDMA_VDB_TQP(tqp->id, NTRDMA_TQP_VDB_STATE));
}

/**
 * ntrdma_tqp_kick() - ring the peer's kick doorbell of @tqp
 * @tqp: the TQP
 *
 * For what was written straight into the peer's memory (a placement) that
 * its user watches: its kick callback runs. Nothing happens without a
 * session. Any context.
 */
void ntrdma_tqp_kick(struct ntrdma_tqp *tqp)
{
	if (READ_ONCE(tqp->active) && tqp_peer(tqp))
		ntrdma_vdb_ring(tqp->ndev,
				NTRDMA_VDB_TQP(tqp->id, NTRDMA_TQP_VDB_KICK));
}

/**
 * ntrdma_tqp_peer_state() - the peer's state word
 * @tqp: the TQP
 *
 * Return: what the peer published (unchecked: the user bounds it), or 0
 * without a session.
 */
u32 ntrdma_tqp_peer_state(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->active) ? READ_ONCE(tqp_own(tqp)->peer_state) : 0;
}

/* ---- receive ---- */

/**
 * ntrdma_tqp_post_recv() - post one receive buffer to the peer
 * @tqp: the TQP
 * @addr: the buffer's DMA address (mapped with ntrdma_dev_dma_device())
 * @len: bytes the peer may write there
 * @pos: its ring position, which the completion names
 *
 * The peer sees it after ntrdma_tqp_post_commit(). The owner serializes
 * posting, polling and arming of one TQP.
 *
 * Return: 0, -ENOSPC when NTRDMA_TQP_RING buffers are posted, -ENOLINK
 * without a session.
 */
int ntrdma_tqp_post_recv(struct ntrdma_tqp *tqp, dma_addr_t addr, u32 len,
			 u32 *pos)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);
	struct ntrdma_wire_rxd d;

	if (!READ_ONCE(tqp->active) || !pt)
		return -ENOLINK;
	if ((u32)(tqp->rx_post - tqp->rx_cons) >= TQP_RING)
		return -ENOSPC;
	d.addr = addr;
	d.len = len;
	d.seq = tqp->rx_post;
	ntrdma_peer_copy(tqp->ndev, &pt->rxd[ntrdma_ring_idx(d.seq, TQP_RING)],
			 &d, sizeof(d));
	*pos = tqp->rx_post++;
	return 0;
}

/**
 * ntrdma_tqp_recv_room() - how many more buffers may be posted
 * @tqp: the TQP
 *
 * Return: free receive slots (at most NTRDMA_TQP_RING are posted).
 */
u32 ntrdma_tqp_recv_room(struct ntrdma_tqp *tqp)
{
	return TQP_RING - (u32)(tqp->rx_post - tqp->rx_cons);
}

/**
 * ntrdma_tqp_post_commit() - publish the buffers posted so far
 * @tqp: the TQP
 *
 * Rings the peer's TXWAKE doorbell if it waits for a buffer.
 */
void ntrdma_tqp_post_commit(struct ntrdma_tqp *tqp)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);
	u32 old = tqp->rx_published;

	if (!pt || old == tqp->rx_post)
		return;
	wmb(); /* descriptors before the producer index */
	ntrdma_peer_w32(tqp->ndev, tqp->rx_post, &pt->post_prod);
	tqp->rx_published = tqp->rx_post;
	mb(); /* publish before reading the sender's wish */
	if (ntrdma_need_event(READ_ONCE(tqp_own(tqp)->tx_event), tqp->rx_post,
			      old))
		ntrdma_vdb_ring(tqp->ndev,
				NTRDMA_VDB_TQP(tqp->id, NTRDMA_TQP_VDB_TXWAKE));
}

/**
 * ntrdma_tqp_poll_recv() - take the next receive completion
 * @tqp: the TQP
 * @c: filled with the buffer's ring position, the length and meta word
 * @posted_len: the length of the buffers this user posts (the bound the
 *	peer's length is checked against)
 *
 * Return: 1 with @c filled, 0 when none is there, -EPROTO when the peer
 * wrote something invalid (counted and logged; nothing is consumed).
 */
int ntrdma_tqp_poll_recv(struct ntrdma_tqp *tqp, struct ntrdma_tqp_rcomp *c,
			 u32 posted_len)
{
	struct ntrdma_wire_tqp *own = tqp_own(tqp);
	struct ntrdma_wire_cqe cqe;
	u32 prod;

	if (!READ_ONCE(tqp->active))
		return 0;
	prod = READ_ONCE(own->cq_prod);
	if (prod == tqp->rx_cons)
		return 0;
	if (!ntrdma_ring_avail_ok(prod, tqp->rx_cons, tqp->rx_post - tqp->rx_cons)) {
		ntrdma_link_proto_error(tqp->ndev, "completion producer out of range");
		return -EPROTO;
	}
	rmb(); /* the producer index before the completion */
	memcpy(&cqe, &own->cqe[ntrdma_ring_idx(tqp->rx_cons, TQP_RING)],
	       sizeof(cqe));
	if (ntrdma_wire_check_cqe(&cqe, tqp->rx_cons, posted_len)) {
		ntrdma_link_proto_error(tqp->ndev, "bad completion");
		return -EPROTO;
	}
	c->pos = tqp->rx_cons++;
	c->len = cqe.len;
	c->meta = cqe.meta;
	return 1;
}

/**
 * ntrdma_tqp_recv_arm() - ask for an RX doorbell on the next completion
 * @tqp: the TQP
 *
 * Return: true when a completion is already there (poll again, as NAPI
 * does after napi_complete_done()).
 */
bool ntrdma_tqp_recv_arm(struct ntrdma_tqp *tqp)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);

	if (!READ_ONCE(tqp->active) || !pt)
		return false;
	WRITE_ONCE(tqp->rx_armed, true);
	ntrdma_peer_w32(tqp->ndev, tqp->rx_cons, &pt->rx_event);
	mb(); /* the request before the re-check */
	if (!tqp_recv_pending(tqp))
		return false;
	WRITE_ONCE(tqp->rx_armed, false);	/* the owner polls on */
	return true;
}

/* ---- send ---- */

/*
 * The peer's receive ring holds TQP_RING buffers, and it takes one back
 * only from a completion we published: it posts at most TQP_RING past
 * tx_published. A producer index behind tx_pos or beyond that is a
 * protocol error. As tx_published <= tx_done, a send at tx_pos below that
 * index finds its slot free: the copy that used it before is done.
 */
static bool tqp_post_prod_ok(struct ntrdma_tqp *tqp, u32 prod)
{
	return ntrdma_ring_avail_ok(prod, tqp->tx_pos, TQP_RING) &&
	       ntrdma_ring_avail_ok(prod, tqp->tx_published, TQP_RING);
}

/* The next buffer the peer posted, checked; -ENOSPC if none yet. */
static int tqp_peer_buf(struct ntrdma_tqp *tqp, struct ntrdma_wire_rxd *d)
{
	struct ntrdma_wire_tqp *own = tqp_own(tqp);
	u32 prod = READ_ONCE(own->post_prod);

	lockdep_assert_held(&tqp->tx_lock);
	if (prod == tqp->tx_pos)
		return -ENOSPC;
	if (!tqp_post_prod_ok(tqp, prod)) {
		ntrdma_link_proto_error(tqp->ndev, "posted buffer index out of range");
		return -EPROTO;
	}
	rmb(); /* the producer index before the descriptor */
	memcpy(d, &own->rxd[ntrdma_ring_idx(tqp->tx_pos, TQP_RING)], sizeof(*d));
	if (ntrdma_wire_check_rxd(d, tqp->tx_pos, 1, U32_MAX,
				  tqp->ndev->link->map_size)) {
		ntrdma_link_proto_error(tqp->ndev, "bad receive buffer");
		return -EPROTO;
	}
	return 0;
}

/* Publish completions up to @pos and ring the peer if it asked. */
static void tqp_publish(struct ntrdma_tqp *tqp, u32 pos)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);
	u32 old = tqp->tx_published;

	lockdep_assert_held(&tqp->tx_lock);
	if (!pt || old == pos)
		return;
	wmb(); /* data and completions before the producer index */
	ntrdma_peer_w32(tqp->ndev, pos, &pt->cq_prod);
	tqp->tx_published = pos;
	mb(); /* publish before reading the receiver's wish */
	if (ntrdma_need_event(READ_ONCE(tqp_own(tqp)->rx_event), pos, old)) {
		ntrdma_vdb_ring(tqp->ndev,
				NTRDMA_VDB_TQP(tqp->id, NTRDMA_TQP_VDB_RX));
		tqp->doorbells++;
	}
}

/*
 * Is a posted buffer there? If not, ask for TXWAKE and look again (a post
 * may have raced the request).
 */
static int tqp_wait_buf(struct ntrdma_tqp *tqp, struct ntrdma_wire_rxd *d)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(tqp);
	int rc;

	lockdep_assert_held(&tqp->tx_lock);
	rc = tqp_peer_buf(tqp, d);
	if (rc != -ENOSPC)
		return rc;
	ntrdma_peer_w32(tqp->ndev, tqp->tx_pos, &pt->tx_event);
	mb(); /* ask before re-checking for a concurrent post */
	rc = tqp_peer_buf(tqp, d);
	if (rc == -ENOSPC)
		WRITE_ONCE(tqp->tx_waiting, true);
	return rc;
}

static void tqp_cpu_copy(struct ntrdma_dev *ndev, void __iomem *dst,
			 const struct ntrdma_tqp_sge *sg, int nsge)
{
	u32 off = 0, done, poff, chunk;
	struct page *p;
	void *va;
	int i;

	for (i = 0; i < nsge; i++) {
		for (done = 0; done < sg[i].len; done += chunk) {
			p = sg[i].page + ((sg[i].off + done) >> PAGE_SHIFT);
			poff = (sg[i].off + done) & ~PAGE_MASK;
			chunk = min_t(u32, sg[i].len - done, PAGE_SIZE - poff);
			va = kmap_local_page(p);
			memcpy_toio(dst + off, va + poff, chunk);
			kunmap_local(va);
			off += chunk;
		}
	}
	ntrdma_peer_stored(ndev, dst, off);
}

static void tqp_dma_done(void *arg, const struct dmaengine_result *res)
{
	struct ntrdma_tqp_slot *s = arg;
	struct ntrdma_tqp *tqp = s->tqp;
	int status = 0;
	unsigned long flags;
	void *cookie;
	bool wake;
	u32 len;

	if (res && res->result != DMA_TRANS_NOERROR)
		status = -EIO;
	spin_lock_irqsave(&tqp->tx_lock, flags);
	tqp_unmap_slot(tqp, s);
	if (s->abandoned) {
		/* Reported at stop already: only its mappings were left. */
		s->abandoned = false;
		ntrdma_tqp_abandoned_done(tqp);
		spin_unlock_irqrestore(&tqp->tx_lock, flags);
		ntrdma_tqp_copy_retired(tqp, false);
		return;
	}
	cookie = s->cookie;
	len = s->len;
	s->cookie = NULL;
	/* Completions arrive in order on one channel. */
	tqp->tx_done++;
	if (!READ_ONCE(tqp->active))
		status = -ENOLINK;
	else if (status)
		ntrdma_link_proto_error(tqp->ndev, "DMA copy failed");
	else
		tqp_publish(tqp, tqp->tx_done);
	wake = tqp->dma_wake;
	tqp->dma_wake = false;
	spin_unlock_irqrestore(&tqp->tx_lock, flags);

	tqp->ops->send_done(tqp->ctx, cookie, len, status);
	if (wake)
		tqp->ops->tx_space(tqp->ctx);
	ntrdma_tqp_copy_retired(tqp, false);
}

/* Where completion @seq of this TQP lives in the peer's memory. */
static dma_addr_t tqp_peer_cqe_dma(struct ntrdma_tqp *tqp, u32 seq)
{
	return tqp->ndev->flat_dma + tqp->ndev->pinbox_off +
	       offsetof(struct ntrdma_inbox, tqp) +
	       tqp->id * sizeof(struct ntrdma_wire_tqp) +
	       offsetof(struct ntrdma_wire_tqp, cqe) +
	       ntrdma_ring_idx(seq, TQP_RING) * sizeof(struct ntrdma_wire_cqe);
}

/* Stage the completion of the message in @s, with the DMA callback. */
static void tqp_dma_cqe(struct ntrdma_tqp *tqp, struct ntrdma_tqp_slot *s,
			const struct ntrdma_wire_cqe *c)
{
	u32 idx = ntrdma_ring_idx(c->seq, TQP_RING);
	dma_addr_t src = tqp->stage_dma + idx * sizeof(*c);

	tqp->stage[idx] = *c;
	dma_sync_single_for_device(tqp->dma_dev, src, sizeof(*c),
				   DMA_TO_DEVICE);
	ntrdma_xfer_stage(tqp, tqp_peer_cqe_dma(tqp, c->seq), src, sizeof(*c),
			  false, tqp_dma_done, s);
}

/*
 * Stage the copies of one message (to @off in the flat window) and its
 * completion for the channel: 0, or -ENOMEM with nothing staged (no room,
 * or a page that would not map).
 */
static int tqp_dma_copy(struct ntrdma_tqp *tqp, struct ntrdma_tqp_slot *s,
			u64 off, const struct ntrdma_tqp_sge *sg, int nsge,
			const struct ntrdma_wire_cqe *c)
{
	dma_addr_t src[NTRDMA_TQP_MAX_SGE];
	int i;

	if (ntrdma_xfer_room(tqp) < nsge + 1)
		return -ENOMEM;
	for (i = 0; i < nsge; i++) {
		if (ntrdma_tqp_map(tqp, &s->maps, sg[i].page, sg[i].off,
				   sg[i].len, &src[i])) {
			tqp_unmap_slot(tqp, s);
			return -ENOMEM;
		}
	}
	for (i = 0; i < nsge; i++) {
		ntrdma_xfer_stage(tqp, tqp->ndev->flat_dma + off, src[i],
				  sg[i].len, !i, NULL, NULL);
		off += sg[i].len;
	}
	tqp_dma_cqe(tqp, s, c);
	return 0;
}

/**
 * ntrdma_tqp_send() - send one message into the next buffer the peer posted
 * @tqp: the TQP
 * @sg: the message's page ranges
 * @nsge: how many (at most NTRDMA_TQP_MAX_SGE)
 * @len: the message's length (the sum of @sg)
 * @meta: the user's word, delivered with the completion
 * @cookie: handed to send_done
 * @more: more sends follow: the DMA copies, the producer index and the
 *	doorbell wait for a later send or ntrdma_tqp_send_flush()
 *
 * Any context but hard irq. send_done reports when the pages may be reused:
 * at once with the CPU copy, from the DMA callback otherwise. A caller
 * that holds a lock with interrupts off passes @more and calls
 * ntrdma_tqp_send_flush() after dropping it, also after an error: the DMA
 * engine is called there (ntrdma_xfer.c).
 *
 * Return: 0 when it is on its way, -ENOSPC when no buffer is posted or
 * it waits for this TQP's copies on the DMA channel (tx_space follows the
 * next post or the next DMA completion), -EMSGSIZE when the posted buffer is too
 * small, -ENOLINK without a session, -EPROTO when the peer's descriptor is
 * invalid.
 */
int ntrdma_tqp_send(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_sge *sg,
		    int nsge, u32 len, u64 meta, void *cookie, bool more)
{
	struct ntrdma_dev *ndev = tqp->ndev;
	struct ntrdma_wire_tqp __iomem *pt;
	struct ntrdma_wire_cqe c;
	struct ntrdma_wire_rxd d;
	struct ntrdma_tqp_slot *s;
	unsigned long flags;
	int rc;

	if (nsge < 1 || nsge > NTRDMA_TQP_MAX_SGE)
		return -EINVAL;
	spin_lock_irqsave(&tqp->tx_lock, flags);
	pt = tqp_peer(tqp);
	if (!READ_ONCE(tqp->active) || !pt) {
		rc = -ENOLINK;
		goto out;
	}
	/*
	 * A slot is reused only once the copy that used it is done (which
	 * tqp_post_prod_ok() already implies).
	 */
	if ((u32)(tqp->tx_pos - tqp->tx_done) >= TQP_RING) {
		tqp->dma_wake = true;
		rc = -ENOSPC;
		goto out;
	}
	rc = tqp_wait_buf(tqp, &d);
	if (rc)
		goto out;
	if (d.len < len) {
		rc = -EMSGSIZE;
		goto out;
	}
	c.len = len;
	c.seq = tqp->tx_pos;
	c.meta = meta;
	s = &tqp->slot[ntrdma_ring_idx(tqp->tx_pos, TQP_RING)];
	if (ndev->dma_chan && (len > READ_ONCE(tx_copybreak) ||
			       tqp_copies_pending(tqp))) {
		s->tqp = tqp;
		s->cookie = cookie;
		s->len = len;
		rc = tqp_dma_copy(tqp, s, d.addr, sg, nsge, &c);
		if (!rc) {
			tqp->tx_pos++;
			spin_unlock_irqrestore(&tqp->tx_lock, flags);
			if (!more)
				ntrdma_xfer_flush(tqp);
			return 0;
		}
		/* Not on the channel: tqp_abandon() must not report it. */
		s->cookie = NULL;
		/*
		 * No room among the staged copies, or a page that would not
		 * map: not an error. With none of this TQP's copies in flight
		 * the CPU copies it, in order; else the sender waits for the
		 * next completion (tx_space), which frees room.
		 */
		if (tqp_copies_pending(tqp)) {
			tqp->dma_wake = true;
			rc = -ENOSPC;
			goto out;
		}
	}
	tqp_cpu_copy(ndev, ndev->link->map + d.addr, sg, nsge);
	ntrdma_peer_copy(ndev, &pt->cqe[ntrdma_ring_idx(c.seq, TQP_RING)], &c,
			 sizeof(c));
	tqp->tx_pos++;
	tqp->tx_done = tqp->tx_pos;
	if (!more)
		tqp_publish(tqp, tqp->tx_pos);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	tqp->ops->send_done(tqp->ctx, cookie, len, 0);
	return 0;
out:
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	return rc;
}

/**
 * ntrdma_tqp_send_flush() - let sends and placements made with @more go
 * @tqp: the TQP
 *
 * Hands the staged copies to the DMA channel and publishes what the CPU
 * copied (copies finished in order up to tx_done: the DMA callbacks
 * publish the rest). Call it with none of the locks held under which
 * they were made.
 */
void ntrdma_tqp_send_flush(struct ntrdma_tqp *tqp)
{
	unsigned long flags;

	ntrdma_xfer_flush(tqp);
	spin_lock_irqsave(&tqp->tx_lock, flags);
	if (READ_ONCE(tqp->active))
		tqp_publish(tqp, tqp->tx_done);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
}

/**
 * ntrdma_tqp_send_ready() - whether a send would find room
 * @tqp: the TQP
 *
 * For a sender deciding to stop its queue (it asks for TXWAKE first).
 *
 * Return: true when the peer has a buffer posted and no send waits for
 * the DMA channel to make room (its tx_space callback follows then).
 */
bool ntrdma_tqp_send_ready(struct ntrdma_tqp *tqp)
{
	struct ntrdma_wire_tqp *own = tqp_own(tqp);
	u32 prod = READ_ONCE(own->post_prod);

	return READ_ONCE(tqp->active) && !READ_ONCE(tqp->dma_wake) &&
	       prod != tqp->tx_pos &&
	       ntrdma_ring_avail_ok(prod, tqp->tx_pos, TQP_RING);
}

/**
 * ntrdma_tqp_doorbells() - RX doorbells this TQP rang at the peer
 * @tqp: the TQP
 *
 * Return: the count since creation (a statistic).
 */
u64 ntrdma_tqp_doorbells(struct ntrdma_tqp *tqp)
{
	return READ_ONCE(tqp->doorbells);
}
