// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: same-device loopback. A QP whose address vector names
 * our own port (our LID, or one of our GIDs in the GRH) talks to another
 * QP of this device, as on every HCA: its segments never cross the NTB and
 * need no link. Each segment is copied into one of the device's loopback
 * buffers when it is sent (so its MRs and header slot are free at once,
 * as after a TQP's send_done) and a work item delivers the buffers in the
 * order they were sent to the receive path the TQP feeds
 * (ntrdma_vx_deliver()): the responder's and requester's checks all apply,
 * and the buffer is free again when the segment was taken. No free buffer:
 * -ENOSPC, and the sender waits for space as it does on the TQP.
 *
 * lo->lock is innermost: taken under a QP's sq_lock, nothing inside it.
 */

#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "ntrdma_ib.h"

#define NTRDMA_LO_BUFS		32
#define NTRDMA_LO_BUDGET	64

struct ntrdma_lo_buf {
	struct list_head link;	/* on free or queued */
	u32 len;
	void *data;		/* NTRDMA_VX_BUF bytes */
};

struct ntrdma_lo {
	struct ntrdma_ib *nib;
	struct workqueue_struct *wq;
	struct work_struct rx_work;
	spinlock_t lock;	/* free, queued */
	struct list_head free;
	struct list_head queued;	/* oldest first */
	struct ntrdma_lo_buf buf[NTRDMA_LO_BUFS];
};

/* The first buffer of @list (lo->free or lo->queued), taken off it. */
static struct ntrdma_lo_buf *lo_pop(struct ntrdma_lo *lo,
				    struct list_head *list)
{
	struct ntrdma_lo_buf *b;
	unsigned long flags;

	spin_lock_irqsave(&lo->lock, flags);
	b = list_first_entry_or_null(list, struct ntrdma_lo_buf, link);
	if (b)
		list_del(&b->link);
	spin_unlock_irqrestore(&lo->lock, flags);
	return b;
}

/* Put @b at the end of @list (lo->free or lo->queued). */
static void lo_push(struct ntrdma_lo *lo, struct ntrdma_lo_buf *b,
		    struct list_head *list)
{
	unsigned long flags;

	spin_lock_irqsave(&lo->lock, flags);
	list_add_tail(&b->link, list);
	spin_unlock_irqrestore(&lo->lock, flags);
}

/* Queue @b for delivery. */
static void lo_queue(struct ntrdma_lo *lo, struct ntrdma_lo_buf *b)
{
	lo_push(lo, b, &lo->queued);
	queue_work(lo->wq, &lo->rx_work);
}

/*
 * Copy up to @max bytes of @sg to @dst; a piece may span physically
 * contiguous pages (a header slot), so page by page.
 */
static u32 lo_copy_sge(void *dst, const struct ntrdma_tqp_sge *sg, u32 max)
{
	u32 len = min(sg->len, max), done, poff, chunk;
	struct page *p;

	for (done = 0; done < len; done += chunk) {
		p = sg->page + ((sg->off + done) >> PAGE_SHIFT);
		poff = (sg->off + done) & ~PAGE_MASK;
		chunk = min_t(u32, len - done, PAGE_SIZE - poff);
		memcpy_from_page(dst + done, p, poff, chunk);
	}
	return len;
}

/**
 * ntrdma_lo_send() - send one segment to a QP of this device
 * @lo: the device's loopback
 * @sg: the segment's pieces (header slot first)
 * @n: how many
 * @len: their total length, at most NTRDMA_VX_BUF
 *
 * Any context. The pieces are copied before this returns.
 *
 * Return: 0, -ENOSPC when every loopback buffer is queued, -EINVAL for a
 * segment longer than a buffer.
 */
int ntrdma_lo_send(struct ntrdma_lo *lo, const struct ntrdma_tqp_sge *sg,
		   int n, u32 len)
{
	struct ntrdma_lo_buf *b;
	u32 at = 0;
	int i;

	if (len > NTRDMA_VX_BUF)
		return -EINVAL;
	b = lo_pop(lo, &lo->free);
	if (!b)
		return -ENOSPC;
	for (i = 0; i < n && at < len; i++)
		at += lo_copy_sge(b->data + at, &sg[i], len - at);
	b->len = at;
	lo_queue(lo, b);
	return 0;
}

/**
 * ntrdma_lo_nak() - answer a loopback request no QP of ours takes
 * @lo: the device's loopback
 * @nak: the NAK's header (NTRDMA_VX_SYN_NO_QP)
 *
 * None sent when every buffer is queued: the requester's ACK timer retries.
 */
void ntrdma_lo_nak(struct ntrdma_lo *lo, const struct ntrdma_vx_hdr *nak)
{
	struct ntrdma_lo_buf *b = lo_pop(lo, &lo->free);

	if (!b)
		return;
	memcpy(b->data, nak, sizeof(*nak));
	b->len = sizeof(*nak);
	lo_queue(lo, b);
}

/**
 * ntrdma_lo_ready() - whether a loopback segment can be sent now
 * @lo: the device's loopback
 *
 * Return: true when a buffer is free.
 */
bool ntrdma_lo_ready(struct ntrdma_lo *lo)
{
	unsigned long flags;
	bool ready;

	spin_lock_irqsave(&lo->lock, flags);
	ready = !list_empty(&lo->free);
	spin_unlock_irqrestore(&lo->lock, flags);
	return ready;
}

/* Deliver queued segments in order; senders waiting for space go on. */
static void lo_rx_work(struct work_struct *work)
{
	struct ntrdma_lo *lo = container_of(work, struct ntrdma_lo, rx_work);
	struct ntrdma_qp *qp, *pending = NULL;
	struct ntrdma_lo_buf *b;
	int n;

	for (n = 0; n < NTRDMA_LO_BUDGET; n++) {
		b = lo_pop(lo, &lo->queued);
		if (!b)
			break;
		qp = ntrdma_vx_deliver(lo->nib, b->data, b->len, true);
		lo_push(lo, b, &lo->free);
		/* A QP's answers go out once it took its segments in a row. */
		if (pending && qp != pending)
			ntrdma_req_tx(pending);
		if (qp)
			pending = qp;
	}
	if (pending)
		ntrdma_req_tx(pending);
	if (n)
		ntrdma_vx_wake(lo->nib);
	if (n == NTRDMA_LO_BUDGET)
		queue_work(lo->wq, &lo->rx_work);
}

/**
 * ntrdma_lo_flush() - wait until the delivery work is not running
 * @lo: the device's loopback
 *
 * For destroy_qp: a QP out of the table is not used after this.
 */
void ntrdma_lo_flush(struct ntrdma_lo *lo)
{
	flush_work(&lo->rx_work);
}

static void lo_free_bufs(struct ntrdma_lo *lo)
{
	int i;

	for (i = 0; i < NTRDMA_LO_BUFS; i++)
		kvfree(lo->buf[i].data);
}

/**
 * ntrdma_lo_init() - give a verbs device its loopback
 * @nib: the device being added
 *
 * Return: 0 or -ENOMEM.
 */
int ntrdma_lo_init(struct ntrdma_ib *nib)
{
	struct ntrdma_lo *lo;
	int i;

	lo = kzalloc(sizeof(*lo), GFP_KERNEL);
	if (!lo)
		return -ENOMEM;
	lo->nib = nib;
	spin_lock_init(&lo->lock);
	INIT_LIST_HEAD(&lo->free);
	INIT_LIST_HEAD(&lo->queued);
	INIT_WORK(&lo->rx_work, lo_rx_work);
	for (i = 0; i < NTRDMA_LO_BUFS; i++) {
		lo->buf[i].data = kvmalloc(NTRDMA_VX_BUF, GFP_KERNEL);
		if (!lo->buf[i].data)
			goto err;
		list_add_tail(&lo->buf[i].link, &lo->free);
	}
	lo->wq = alloc_workqueue("%s_lo", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0,
				 ntrdma_dev_name(nib->ndev));
	if (!lo->wq)
		goto err;
	nib->lo = lo;
	return 0;
err:
	lo_free_bufs(lo);
	kfree(lo);
	return -ENOMEM;
}

/**
 * ntrdma_lo_fini() - the device is going (no QP is left)
 * @nib: the device
 */
void ntrdma_lo_fini(struct ntrdma_ib *nib)
{
	struct ntrdma_lo *lo = nib->lo;

	if (!lo)
		return;
	destroy_workqueue(lo->wq);	/* drains: segments for no QP */
	lo_free_bufs(lo);
	kfree(lo);
	nib->lo = NULL;
}
