// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Virtual doorbells: many logical doorbells on one hardware doorbell bit.
 * Ringing doorbell i writes the next value of sequence word i into the peer's
 * inbox and then raises the hardware bit. The receiver, on the hardware
 * doorbell, clears the bit first and then scans the words it has handlers
 * for: every word that changed since it last looked runs its handler once.
 * A doorbell is therefore "look at your rings", never a count, which also
 * matches how hardware doorbells (and eventfd-backed interrupts) coalesce.
 */

#include <linux/io.h>

#include "ntrdma_priv.h"

void ntrdma_vdb_init(struct ntrdma_dev *ndev)
{
	spin_lock_init(&ndev->vdb_lock);
	spin_lock_init(&ndev->vdb_out_lock);
}

/*
 * At link up: both sides count from the session's base (epoch ^ peer_epoch,
 * the same number on both). Not from zero, nor from what the inbox holds:
 * the peer's old session may still have rung into our inbox after we
 * zeroed it (until it noticed our new epoch), and a word it left there equal
 * to the value of the new session's first ring would hide that ring, and
 * with it a receive queue for good (its owner re-arms only when it runs).
 * A stale word now differs from ours: it costs one spurious look.
 */
void ntrdma_vdb_reset(struct ntrdma_dev *ndev)
{
	u32 base = ndev->epoch ^ ndev->peer_epoch;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&ndev->vdb_lock, flags);
	for (i = 0; i < NTRDMA_VDB_COUNT; i++)
		ndev->vdb[i].seen = base;
	spin_unlock_irqrestore(&ndev->vdb_lock, flags);

	spin_lock_irqsave(&ndev->vdb_out_lock, flags);
	for (i = 0; i < NTRDMA_VDB_COUNT; i++)
		ndev->vdb_out[i] = base;
	spin_unlock_irqrestore(&ndev->vdb_out_lock, flags);
}

int ntrdma_vdb_register(struct ntrdma_dev *ndev, int idx, ntrdma_vdb_fn fn,
			ntrdma_vdb_watch_fn watch, void *ctx)
{
	unsigned long flags;
	int rc = 0;

	if (idx < 0 || idx >= NTRDMA_VDB_COUNT || !fn)
		return -EINVAL;
	spin_lock_irqsave(&ndev->vdb_lock, flags);
	if (ndev->vdb[idx].fn) {
		rc = -EBUSY;
	} else {
		ndev->vdb[idx].fn = fn;
		ndev->vdb[idx].watch = watch;
		ndev->vdb[idx].ctx = ctx;
		ndev->vdb[idx].seen = READ_ONCE(ndev->inbox->vdb[idx]);
	}
	spin_unlock_irqrestore(&ndev->vdb_lock, flags);
	return rc;
}

void ntrdma_vdb_unregister(struct ntrdma_dev *ndev, int idx)
{
	unsigned long flags;

	if (idx < 0 || idx >= NTRDMA_VDB_COUNT)
		return;
	spin_lock_irqsave(&ndev->vdb_lock, flags);
	ndev->vdb[idx].fn = NULL;
	ndev->vdb[idx].watch = NULL;
	ndev->vdb[idx].ctx = NULL;
	spin_unlock_irqrestore(&ndev->vdb_lock, flags);
}

/*
 * Ring the peer's doorbell @idx. Everything written to the peer before this
 * call is visible to it before the doorbell word changes.
 */
void ntrdma_vdb_ring(struct ntrdma_dev *ndev, int idx)
{
	struct ntrdma_inbox __iomem *pinbox = READ_ONCE(ndev->pinbox);
	unsigned long flags;

	if (idx < 0 || idx >= NTRDMA_VDB_COUNT || !pinbox ||
	    !ntrdma_link_is_up(ndev))
		return;
	spin_lock_irqsave(&ndev->vdb_out_lock, flags);
	wmb(); /* the data before the doorbell word */
	ntrdma_peer_w32(ndev, ++ndev->vdb_out[idx], &pinbox->vdb[idx]);
	spin_unlock_irqrestore(&ndev->vdb_out_lock, flags);
	wmb(); /* the doorbell word before the interrupt */
	ndev->link->ops->peer_db_set(ndev->link, NTRDMA_DB_VDB);
	atomic64_inc(&ndev->stats.vdb_rings);
}

/*
 * Hardware doorbell NTRDMA_DB_VDB fired (interrupt context). Handlers run
 * under vdb_lock, so once ntrdma_vdb_unregister() returns its handler is not
 * running and will not run again; handlers must only schedule work.
 */
void ntrdma_vdb_event(struct ntrdma_dev *ndev)
{
	struct ntrdma_vdb_slot *s;
	unsigned long flags;
	int i;
	u32 v;

	atomic64_inc(&ndev->stats.vdb_events);
	spin_lock_irqsave(&ndev->vdb_lock, flags);
	for (i = 0; i < NTRDMA_VDB_COUNT; i++) {
		s = &ndev->vdb[i];
		v = READ_ONCE(ndev->inbox->vdb[i]);
		if (!s->fn || v == s->seen)
			continue;
		s->seen = v;
		s->fn(ndev, s->ctx);
	}
	spin_unlock_irqrestore(&ndev->vdb_lock, flags);
}

/*
 * The heartbeat's look at every ring (link work, each period while the
 * session runs). A doorbell the peer did not ring, because the event index
 * it read was wrong (a hostile or broken peer; a lost race on a real
 * bridge), would leave a queue asleep for good: each slot whose watch
 * function sees work waiting runs its handler now. Counted in
 * sweep_kicks.
 */
void ntrdma_vdb_sweep(struct ntrdma_dev *ndev)
{
	struct ntrdma_vdb_slot *s;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&ndev->vdb_lock, flags);
	for (i = 0; i < NTRDMA_VDB_COUNT; i++) {
		s = &ndev->vdb[i];
		if (!s->fn || !s->watch || !s->watch(ndev, s->ctx))
			continue;
		atomic64_inc(&ndev->stats.sweep_kicks);
		s->fn(ndev, s->ctx);
	}
	spin_unlock_irqrestore(&ndev->vdb_lock, flags);
}
