// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA transport queue pairs (TQPs): the engine's reliable, in-order
 * message transport, shared by the Ethernet face and the verbs face.
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
 * With DMA, data and completion go on one channel in order; the producer
 * index and the doorbell follow from the completion callback, which is also
 * where the sender learns that its buffers are free again (send_done). A
 * message of at most tx_copybreak bytes that finds no DMA copy of its TQP in
 * flight is copied by the CPU instead, as without a channel.
 *
 * Sessions: positions start at epoch ^ peer_epoch, so a descriptor, index or
 * completion left over from an earlier session fails the sequence checks.
 * When a session ends every send in flight completes with -ENOLINK.
 */

#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/wait.h>

#include "ntrdma.h"

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

static struct ntrdma_wire_tqp __iomem *tqp_peer(struct ntrdma_tqp *qp)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(qp->ndev->pinbox);

	return pi ? &pi->tqp[qp->id] : NULL;
}

static struct ntrdma_wire_tqp *tqp_own(struct ntrdma_tqp *qp)
{
	return &qp->ndev->inbox->tqp[qp->id];
}

static void tqp_vdb_rx(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *qp = ctx;

	qp->ops->rx(qp->ctx);
}

static void tqp_vdb_txwake(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *qp = ctx;

	qp->ops->tx_space(qp->ctx);
}

static void tqp_vdb_state(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_tqp *qp = ctx;

	qp->ops->peer_state(qp->ctx);
}

static const ntrdma_vdb_fn tqp_vdb_fns[NTRDMA_TQP_VDBS] = {
	[NTRDMA_TQP_VDB_RX] = tqp_vdb_rx,
	[NTRDMA_TQP_VDB_TXWAKE] = tqp_vdb_txwake,
	[NTRDMA_TQP_VDB_STATE] = tqp_vdb_state,
};

static void tqp_free_stage(struct ntrdma_tqp *qp)
{
	if (!qp->stage)
		return;
	dma_unmap_single(qp->ndev->dma_chan->device->dev, qp->stage_dma,
			 TQP_RING * sizeof(*qp->stage), DMA_TO_DEVICE);
	kfree(qp->stage);
}

struct ntrdma_tqp *ntrdma_tqp_create(struct ntrdma_dev *ndev, int id,
				     const struct ntrdma_tqp_ops *ops,
				     void *ctx)
{
	struct ntrdma_tqp *qp;
	int i, rc;

	if (id < 0 || id >= NTRDMA_TQP_COUNT || ndev->tqp[id])
		return ERR_PTR(-EINVAL);
	qp = kzalloc(sizeof(*qp), GFP_KERNEL);
	if (!qp)
		return ERR_PTR(-ENOMEM);
	qp->ndev = ndev;
	qp->id = id;
	qp->ops = ops;
	qp->ctx = ctx;
	spin_lock_init(&qp->tx_lock);
	init_waitqueue_head(&qp->dma_wait);
	qp->slot = kvcalloc(TQP_RING, sizeof(*qp->slot), GFP_KERNEL);
	if (!qp->slot) {
		rc = -ENOMEM;
		goto err_free;
	}
	if (ndev->dma_chan) {
		struct device *dev = ndev->dma_chan->device->dev;

		qp->stage = kcalloc(TQP_RING, sizeof(*qp->stage), GFP_KERNEL);
		if (!qp->stage) {
			rc = -ENOMEM;
			goto err_slot;
		}
		qp->stage_dma = dma_map_single(dev, qp->stage,
					       TQP_RING * sizeof(*qp->stage),
					       DMA_TO_DEVICE);
		if (dma_mapping_error(dev, qp->stage_dma)) {
			kfree(qp->stage);
			rc = -EIO;
			goto err_slot;
		}
	}
	for (i = 0; i < NTRDMA_TQP_VDBS; i++) {
		rc = ntrdma_vdb_register(ndev, NTRDMA_VDB_TQP(id, i),
					 tqp_vdb_fns[i], qp);
		if (rc)
			goto err_vdb;
	}
	ndev->tqp[id] = qp;
	return qp;

err_vdb:
	while (i--)
		ntrdma_vdb_unregister(ndev, NTRDMA_VDB_TQP(id, i));
	tqp_free_stage(qp);
err_slot:
	kvfree(qp->slot);
err_free:
	kfree(qp);
	return ERR_PTR(rc);
}

/* After ntrdma_tqp_stop(): no handler runs once this returns. */
void ntrdma_tqp_destroy(struct ntrdma_tqp *qp)
{
	struct ntrdma_dev *ndev = qp->ndev;
	int i;

	for (i = 0; i < NTRDMA_TQP_VDBS; i++)
		ntrdma_vdb_unregister(ndev, NTRDMA_VDB_TQP(qp->id, i));
	ndev->tqp[qp->id] = NULL;
	tqp_free_stage(qp);
	kvfree(qp->slot);
	kfree(qp);
}

/* Start of a link session (the link is up, ndev->pinbox is valid). */
void ntrdma_tqp_start(struct ntrdma_tqp *qp)
{
	struct ntrdma_dev *ndev = qp->ndev;
	struct ntrdma_wire_tqp *own = tqp_own(qp);
	u32 base = ndev->epoch ^ ndev->peer_epoch;
	unsigned long flags;

	spin_lock_irqsave(&qp->tx_lock, flags);
	qp->rx_post = base;
	qp->rx_cons = base;
	qp->rx_published = base;
	qp->tx_pos = base;
	qp->tx_done = base;
	qp->tx_published = base;
	/*
	 * The peer writes our completion producer only after we post, and
	 * asks for TXWAKE only after seeing a post: both start at base here.
	 */
	WRITE_ONCE(own->cq_prod, base);
	WRITE_ONCE(own->tx_event, base);
	/* The first completion of the session rings (before any post). */
	iowrite32(base, &tqp_peer(qp)->rx_event);
	WRITE_ONCE(qp->active, true);
	spin_unlock_irqrestore(&qp->tx_lock, flags);
}

static void tqp_unmap_slot(struct ntrdma_tqp *qp, struct ntrdma_tqp_slot *s)
{
	struct device *dev = qp->ndev->dma_chan->device->dev;
	int i;

	for (i = 0; i < s->nmap; i++)
		dma_unmap_page(dev, s->map[i], s->map_len[i], DMA_TO_DEVICE);
	s->nmap = 0;
}

/*
 * End of a session: no new sends; those still on the DMA channel finish
 * copying (we cannot recall them) and complete with -ENOLINK. May sleep.
 */
void ntrdma_tqp_stop(struct ntrdma_tqp *qp)
{
	struct ntrdma_tqp_slot *s;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&qp->tx_lock, flags);
	WRITE_ONCE(qp->active, false);
	spin_unlock_irqrestore(&qp->tx_lock, flags);
	if (!qp->ndev->dma_chan)
		return;
	if (!wait_event_timeout(qp->dma_wait, !atomic_read(&qp->dma_inflight),
				10 * HZ))
		dev_err(&qp->ndev->ntb->dev,
			"%s: TQP%d: %d DMA copies still pending after 10 s\n",
			qp->ndev->name, qp->id, atomic_read(&qp->dma_inflight));
	if (qp->broken) {
		/* Copies queued without a callback: wait them out. */
		dmaengine_terminate_sync(qp->ndev->dma_chan);
		for (i = 0; i < TQP_RING; i++) {
			s = &qp->slot[i];
			if (!s->orphan)
				continue;
			tqp_unmap_slot(qp, s);
			s->orphan = false;
			qp->ops->send_done(qp->ctx, s->cookie, s->len, -EIO);
			s->cookie = NULL;
		}
		qp->broken = false;
	}
}

/* ---- the peer's end ---- */

/* Our end's state word in the peer's region (0: closed); user-defined. */
void ntrdma_tqp_set_state(struct ntrdma_tqp *qp, u32 state)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);

	if (!READ_ONCE(qp->active) || !pt)
		return;
	iowrite32(state, &pt->peer_state);
	ntrdma_vdb_ring(qp->ndev, NTRDMA_VDB_TQP(qp->id, NTRDMA_TQP_VDB_STATE));
}

/* The peer's state word (unchecked: the user bounds it); 0 without session. */
u32 ntrdma_tqp_peer_state(struct ntrdma_tqp *qp)
{
	return READ_ONCE(qp->active) ? READ_ONCE(tqp_own(qp)->peer_state) : 0;
}

/* ---- receive ---- */

/* Post one receive buffer; returns its ring position in @pos. */
int ntrdma_tqp_post_recv(struct ntrdma_tqp *qp, dma_addr_t addr, u32 len,
			 u32 *pos)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);
	struct ntrdma_wire_rxd d;

	if (!READ_ONCE(qp->active) || !pt)
		return -ENOLINK;
	if ((u32)(qp->rx_post - qp->rx_cons) >= TQP_RING)
		return -ENOSPC;
	d.addr = addr;
	d.len = len;
	d.seq = qp->rx_post;
	memcpy_toio(&pt->rxd[ntrdma_ring_idx(d.seq, TQP_RING)], &d, sizeof(d));
	*pos = qp->rx_post++;
	return 0;
}

/* Free receive slots (posted buffers are at most TQP_RING). */
u32 ntrdma_tqp_recv_room(struct ntrdma_tqp *qp)
{
	return TQP_RING - (u32)(qp->rx_post - qp->rx_cons);
}

/* Publish the buffers posted so far; wake the peer if it asked. */
void ntrdma_tqp_post_commit(struct ntrdma_tqp *qp)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);
	u32 old = qp->rx_published;

	if (!pt || old == qp->rx_post)
		return;
	wmb(); /* descriptors before the producer index */
	iowrite32(qp->rx_post, &pt->post_prod);
	qp->rx_published = qp->rx_post;
	mb(); /* publish before reading the sender's wish */
	if (ntrdma_need_event(READ_ONCE(tqp_own(qp)->tx_event), qp->rx_post,
			      old))
		ntrdma_vdb_ring(qp->ndev,
				NTRDMA_VDB_TQP(qp->id, NTRDMA_TQP_VDB_TXWAKE));
}

/*
 * The next receive completion: 1 and @c filled, 0 when none, -EPROTO when
 * the peer wrote something invalid (counted and logged; nothing consumed).
 */
int ntrdma_tqp_poll_recv(struct ntrdma_tqp *qp, struct ntrdma_tqp_rcomp *c,
			 u32 posted_len)
{
	struct ntrdma_wire_tqp *own = tqp_own(qp);
	struct ntrdma_wire_cqe cqe;
	u32 prod;

	if (!READ_ONCE(qp->active))
		return 0;
	prod = READ_ONCE(own->cq_prod);
	if (prod == qp->rx_cons)
		return 0;
	if (!ntrdma_ring_avail_ok(prod, qp->rx_cons, qp->rx_post - qp->rx_cons)) {
		ntrdma_link_proto_error(qp->ndev, "completion producer out of range");
		return -EPROTO;
	}
	rmb(); /* the producer index before the completion */
	memcpy(&cqe, &own->cqe[ntrdma_ring_idx(qp->rx_cons, TQP_RING)],
	       sizeof(cqe));
	if (ntrdma_wire_check_cqe(&cqe, qp->rx_cons, posted_len)) {
		ntrdma_link_proto_error(qp->ndev, "bad completion");
		return -EPROTO;
	}
	c->pos = qp->rx_cons++;
	c->len = cqe.len;
	c->meta = cqe.meta;
	return 1;
}

static bool tqp_recv_pending(struct ntrdma_tqp *qp)
{
	return READ_ONCE(qp->active) &&
	       READ_ONCE(tqp_own(qp)->cq_prod) != qp->rx_cons;
}

/* Ask for an RX doorbell on the next completion; true if one is here. */
bool ntrdma_tqp_recv_arm(struct ntrdma_tqp *qp)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);

	if (!READ_ONCE(qp->active) || !pt)
		return false;
	iowrite32(qp->rx_cons, &pt->rx_event);
	mb(); /* the request before the re-check */
	return tqp_recv_pending(qp);
}

/* ---- send ---- */

/* The next buffer the peer posted, checked; -ENOSPC if none yet. */
static int tqp_peer_buf(struct ntrdma_tqp *qp, struct ntrdma_wire_rxd *d)
{
	struct ntrdma_wire_tqp *own = tqp_own(qp);
	u32 prod = READ_ONCE(own->post_prod);

	if (prod == qp->tx_pos ||
	    !ntrdma_ring_avail_ok(prod, qp->tx_pos, TQP_RING))
		return -ENOSPC;
	rmb(); /* the producer index before the descriptor */
	memcpy(d, &own->rxd[ntrdma_ring_idx(qp->tx_pos, TQP_RING)], sizeof(*d));
	if (ntrdma_wire_check_rxd(d, qp->tx_pos, 1, U32_MAX,
				  qp->ndev->flat_size)) {
		ntrdma_link_proto_error(qp->ndev, "bad receive buffer");
		return -EPROTO;
	}
	return 0;
}

/* Publish completions up to @pos and ring the peer if it asked. */
static void tqp_publish(struct ntrdma_tqp *qp, u32 pos)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);
	u32 old = qp->tx_published;

	if (!pt || old == pos)
		return;
	wmb(); /* data and completions before the producer index */
	iowrite32(pos, &pt->cq_prod);
	qp->tx_published = pos;
	mb(); /* publish before reading the receiver's wish */
	if (ntrdma_need_event(READ_ONCE(tqp_own(qp)->rx_event), pos, old)) {
		ntrdma_vdb_ring(qp->ndev,
				NTRDMA_VDB_TQP(qp->id, NTRDMA_TQP_VDB_RX));
		qp->doorbells++;
	}
}

/*
 * Is a posted buffer there? If not, ask for TXWAKE and look again (a post
 * may have raced the request). Caller holds tx_lock.
 */
static int tqp_wait_buf(struct ntrdma_tqp *qp, struct ntrdma_wire_rxd *d)
{
	struct ntrdma_wire_tqp __iomem *pt = tqp_peer(qp);
	int rc = tqp_peer_buf(qp, d);

	if (rc != -ENOSPC)
		return rc;
	iowrite32(qp->tx_pos, &pt->tx_event);
	mb(); /* ask before re-checking for a concurrent post */
	return tqp_peer_buf(qp, d);
}

static void tqp_cpu_copy(void __iomem *dst, const struct ntrdma_tqp_sge *sg,
			 int nsge)
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
}

static void tqp_dma_done(void *arg, const struct dmaengine_result *res)
{
	struct ntrdma_tqp_slot *s = arg;
	struct ntrdma_tqp *qp = s->qp;
	int status = 0;
	unsigned long flags;
	void *cookie;
	u32 len;

	if (res && res->result != DMA_TRANS_NOERROR)
		status = -EIO;
	spin_lock_irqsave(&qp->tx_lock, flags);
	tqp_unmap_slot(qp, s);
	cookie = s->cookie;
	len = s->len;
	s->cookie = NULL;
	/* Completions arrive in order on one channel. */
	qp->tx_done++;
	if (!READ_ONCE(qp->active))
		status = -ENOLINK;
	else if (status)
		ntrdma_link_proto_error(qp->ndev, "DMA copy failed");
	else
		tqp_publish(qp, qp->tx_done);
	spin_unlock_irqrestore(&qp->tx_lock, flags);

	qp->ops->send_done(qp->ctx, cookie, len, status);
	if (atomic_dec_and_test(&qp->dma_inflight))
		wake_up(&qp->dma_wait);
}

/* Where completion @seq of this TQP lives in the peer's memory. */
static dma_addr_t tqp_peer_cqe_dma(struct ntrdma_tqp *qp, u32 seq)
{
	return qp->ndev->flat_dma + qp->ndev->pinbox_off +
	       offsetof(struct ntrdma_inbox, tqp) +
	       qp->id * sizeof(struct ntrdma_wire_tqp) +
	       offsetof(struct ntrdma_wire_tqp, cqe) +
	       ntrdma_ring_idx(seq, TQP_RING) * sizeof(struct ntrdma_wire_cqe);
}

/*
 * Queue the copies of one message and its completion on the channel.
 * 0: queued, the callback follows. -ENOMEM: nothing queued. 1: some copies
 * were queued and then the channel refused one: the slot is orphaned (its
 * pages stay mapped and its cookie held until ntrdma_tqp_stop()).
 */
static int tqp_dma_copy(struct ntrdma_tqp *qp, struct ntrdma_tqp_slot *s,
			dma_addr_t dst, const struct ntrdma_tqp_sge *sg,
			int nsge, const struct ntrdma_wire_cqe *c)
{
	struct dma_chan *chan = qp->ndev->dma_chan;
	struct device *dev = chan->device->dev;
	struct dma_async_tx_descriptor *tx;
	u32 idx = ntrdma_ring_idx(c->seq, TQP_RING);
	int i, queued = 0;
	dma_addr_t src;

	for (i = 0; i < nsge; i++) {
		src = dma_map_page(dev, sg[i].page, sg[i].off, sg[i].len,
				   DMA_TO_DEVICE);
		if (dma_mapping_error(dev, src))
			goto err;
		s->map[s->nmap] = src;
		s->map_len[s->nmap++] = sg[i].len;
		tx = dmaengine_prep_dma_memcpy(chan, dst, src, sg[i].len, 0);
		if (!tx || dma_submit_error(dmaengine_submit(tx)))
			goto err;
		queued++;
		dst += sg[i].len;
	}
	qp->stage[idx] = *c;
	dma_sync_single_for_device(dev, qp->stage_dma + idx * sizeof(*c),
				   sizeof(*c), DMA_TO_DEVICE);
	tx = dmaengine_prep_dma_memcpy(chan, tqp_peer_cqe_dma(qp, c->seq),
				       qp->stage_dma + idx * sizeof(*c),
				       sizeof(*c), DMA_PREP_INTERRUPT);
	if (!tx)
		goto err;
	tx->callback_result = tqp_dma_done;
	tx->callback_param = s;
	atomic_inc(&qp->dma_inflight);
	if (dma_submit_error(dmaengine_submit(tx))) {
		atomic_dec(&qp->dma_inflight);
		goto err;
	}
	return 0;
err:
	if (!queued) {
		tqp_unmap_slot(qp, s);
		return -ENOMEM;
	}
	s->orphan = true;
	qp->broken = true;
	return 1;
}

/*
 * Send one message of @len bytes (the sum of @sg) with the user's @meta.
 * Returns 0 when it is on its way (send_done reports when the pages may be
 * reused: at once with the CPU, from the DMA callback otherwise), -ENOSPC
 * when no buffer is posted (a TXWAKE follows the next post), -EMSGSIZE when
 * the posted buffer is too small, -ENOLINK without a session, -EPROTO when
 * the peer's descriptor is invalid. With @more, the producer index and the
 * doorbell wait for a later send or ntrdma_tqp_send_flush().
 */
int ntrdma_tqp_send(struct ntrdma_tqp *qp, const struct ntrdma_tqp_sge *sg,
		    int nsge, u32 len, u64 meta, void *cookie, bool more)
{
	struct ntrdma_dev *ndev = qp->ndev;
	struct ntrdma_wire_tqp __iomem *pt;
	struct ntrdma_wire_cqe c;
	struct ntrdma_wire_rxd d;
	struct ntrdma_tqp_slot *s;
	unsigned long flags;
	int rc;

	if (nsge < 1 || nsge > NTRDMA_TQP_MAX_SGE)
		return -EINVAL;
	spin_lock_irqsave(&qp->tx_lock, flags);
	pt = tqp_peer(qp);
	if (!READ_ONCE(qp->active) || !pt) {
		rc = -ENOLINK;
		goto out;
	}
	if (qp->broken) {
		rc = -EIO;
		goto out;
	}
	rc = tqp_wait_buf(qp, &d);
	if (rc)
		goto out;
	if (d.len < len) {
		rc = -EMSGSIZE;
		goto out;
	}
	c.len = len;
	c.seq = qp->tx_pos;
	c.meta = meta;
	s = &qp->slot[ntrdma_ring_idx(qp->tx_pos, TQP_RING)];
	if (ndev->dma_chan && (len > READ_ONCE(tx_copybreak) ||
			       qp->tx_done != qp->tx_pos)) {
		s->qp = qp;
		s->cookie = cookie;
		s->len = len;
		rc = tqp_dma_copy(qp, s, ndev->flat_dma + d.addr, sg, nsge, &c);
		if (rc < 0)
			goto out;
		if (rc) {
			/* Held until stop: report it then, as sent-and-lost. */
			ntrdma_link_proto_error(ndev, "DMA channel refused a copy");
			rc = 0;
			goto out;
		}
		qp->tx_pos++;
		if (!more)
			dma_async_issue_pending(ndev->dma_chan);
		spin_unlock_irqrestore(&qp->tx_lock, flags);
		return 0;
	}
	tqp_cpu_copy(ndev->flat + d.addr, sg, nsge);
	memcpy_toio(&pt->cqe[ntrdma_ring_idx(c.seq, TQP_RING)], &c, sizeof(c));
	qp->tx_pos++;
	qp->tx_done = qp->tx_pos;
	if (!more)
		tqp_publish(qp, qp->tx_pos);
	spin_unlock_irqrestore(&qp->tx_lock, flags);
	qp->ops->send_done(qp->ctx, cookie, len, 0);
	return 0;
out:
	spin_unlock_irqrestore(&qp->tx_lock, flags);
	return rc;
}

/*
 * Start the DMA queue and publish what the CPU copied with @more (copies
 * finished in order up to tx_done: the DMA callbacks publish the rest).
 */
void ntrdma_tqp_send_flush(struct ntrdma_tqp *qp)
{
	unsigned long flags;

	if (qp->ndev->dma_chan)
		dma_async_issue_pending(qp->ndev->dma_chan);
	spin_lock_irqsave(&qp->tx_lock, flags);
	if (READ_ONCE(qp->active))
		tqp_publish(qp, qp->tx_done);
	spin_unlock_irqrestore(&qp->tx_lock, flags);
}

/* A posted peer buffer is there (for a sender deciding to stop its queue). */
bool ntrdma_tqp_send_ready(struct ntrdma_tqp *qp)
{
	struct ntrdma_wire_tqp *own = tqp_own(qp);
	u32 prod = READ_ONCE(own->post_prod);

	return READ_ONCE(qp->active) && prod != qp->tx_pos &&
	       ntrdma_ring_avail_ok(prod, qp->tx_pos, TQP_RING);
}

u64 ntrdma_tqp_doorbells(struct ntrdma_tqp *qp)
{
	return READ_ONCE(qp->doorbells);
}
