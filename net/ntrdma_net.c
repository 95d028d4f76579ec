// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA Ethernet face: ntr%d, one netdev per ntrdma device.
 *
 * Receive: we post receive buffers to the peer (their DMA addresses go into
 * the peer's inbox); the peer writes each frame straight into one of them
 * through its flat window, then a completion into our inbox, then rings our
 * RX virtual doorbell. NAPI builds the skb around the buffer the peer wrote:
 * no copy on receive. An attached XDP program runs on a copy of the frame
 * (ntrdma_net_xdp.c).
 * Transmit: the frame (linear part and page fragments) is written straight
 * from the skb into the next buffer the peer posted: the only copy is the
 * transfer itself. A sender never writes a buffer the peer has not posted,
 * and waits (queue stopped, never drops) when none is posted.
 *
 * Ring positions of a session start at epoch ^ peer_epoch, so anything a peer
 * wrote in an earlier session fails the sequence checks.
 *
 * Queues: NTR_MAX_QUEUES transport queue pairs, each with its own NAPI
 * context, receive ring and transmit queue; ethtool -L sets how many are in
 * use (nq, 1 at first). Each side tells the other its count (in queue 0's
 * state word); both send on the smaller number. Only queues in use post
 * receive buffers; a queue taken out of use keeps receiving what the peer
 * sent before it knew, and its buffers go as they are used.
 */

#include <linux/dma-mapping.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/highmem.h>
#include <linux/if_vlan.h>
#include <linux/jhash.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/u64_stats_sync.h>
#include <linux/utsname.h>

#ifdef NTRDMA_PAGE_POOL_HELPERS
#include <net/page_pool/helpers.h>
#else
#include <net/page_pool.h>
#endif

#include "ntrdma_faces.h"
#include "ntrdma_net.h"

/* ethtool's rx-copybreak tunable: its default, and at most a whole frame */
#define NTR_RX_COPYBREAK	256

void ntr_count(struct ntr_counters *c, u64 *field, u64 n)
{
	u64_stats_update_begin(&c->syncp);
	*field += n;
	u64_stats_update_end(&c->syncp);
}

/* ---- receive ---- */

/* Flat mode: the buffer's page goes back to the queue's pool. */
static void ntr_flat_free(struct ntr_queue *q, struct ntr_rx_buf *b)
{
	page_pool_put_full_page(q->rx_pp, virt_to_head_page(b->rb.va), false);
}

static void ntr_free_buf(struct ntr_queue *q, struct ntr_rx_buf *b)
{
	q->net->rx_ops->free(q, b);
	b->rb.va = NULL;
	q->rx_owned--;
}

/* Test builds: the bytes of a buffer the peer may not write (its headroom
 * and what follows the posted length) are canaries while they are armed.
 */
static bool ntr_guard_fill(struct ntrdma_net *net, u8 *data)
{
	u32 end = NTR_HEADROOM + net->rx_buf_len;

	if (!net->rx_ops->guards)
		return false;
	return ntrdma_canary_fill(net->ndev, data, NTR_HEADROOM) &&
	       ntrdma_canary_fill(net->ndev, data + end, net->rx_alloc_len - end);
}

static void ntr_guard_check(struct ntrdma_net *net, struct ntr_rx_buf *b)
{
	u32 end = NTR_HEADROOM + net->rx_buf_len;

	if (!b->guarded)
		return;
	b->guarded = false;
	ntrdma_canary_check(net->ndev, b->rb.va, NTR_HEADROOM);
	ntrdma_canary_check(net->ndev, (u8 *)b->rb.va + end,
			    net->rx_alloc_len - end);
}

static int ntr_flat_alloc(struct ntr_queue *q, struct ntr_rx_buf *b,
			  gfp_t gfp)
{
	struct page *page = page_pool_alloc_pages(q->rx_pp, gfp | __GFP_NOWARN);

	if (!page)
		return -ENOMEM;
	b->rb.va = page_address(page);
	b->guarded = ntr_guard_fill(q->net, b->rb.va);
	b->rb.dma = page_pool_get_dma_addr(page) + NTR_HEADROOM;
	b->rb.addr = b->rb.dma;
	return 0;
}

static int ntr_post_one(struct ntr_queue *q, gfp_t gfp)
{
	struct ntrdma_net *net = q->net;
	struct ntr_rx_buf b;
	u32 pos;
	int rc;

	if (ntrdma_fault(net->ndev, NTRDMA_FAULT_RX_ALLOC))
		return -ENOMEM;
	rc = net->rx_ops->alloc(q, &b, gfp);
	if (rc)
		return rc;
	q->rx_owned++;
	rc = ntrdma_tqp_post_recv(q->tqp, b.rb.addr, net->rx_buf_len, &pos);
	if (rc) {
		ntr_free_buf(q, &b);
		return rc;
	}
	q->rx[ntrdma_ring_idx(pos, NTR_RING)] = b;
	return 0;
}

/* Session over: posted buffers go to quarantine (see struct ntrdma_net). */
static void ntr_quarantine_rx(struct ntr_queue *q)
{
	struct ntr_rx_buf *b;
	int i;

	for (i = 0; i < NTR_RING; i++) {
		b = &q->rx[i];
		if (!b->rb.va)
			continue;
		if (WARN_ON_ONCE(q->quar_count >= NTR_RING))
			break;
		q->quar[q->quar_count++] = *b;
		b->rb.va = NULL;
	}
}

static void ntr_free_quarantine(struct ntr_queue *q)
{
	struct ntr_rx_buf *b;

	while (q->quar_count) {
		b = &q->quar[--q->quar_count];
		ntr_guard_check(q->net, b);
		ntr_free_buf(q, b);
	}
}

/* Buffers all queues own (queues out of use may still hold some). */
static u32 ntr_rx_owned_all(struct ntrdma_net *net)
{
	u32 n = 0;
	int i;

	for (i = 0; i < NTR_MAX_QUEUES; i++)
		n += READ_ONCE(net->q[i].rx_owned);
	return n;
}

/* Room for @more buffers beyond those @q owns: only a queue in use posts;
 * in windowed mode a queue owns at most rx_bufs (its share of the queues
 * in use) and all queues together at most rx_bufs_face.
 */
static bool ntr_rx_room(struct ntr_queue *q, u32 more)
{
	struct ntrdma_net *net = q->net;
	u32 bufs = READ_ONCE(net->rx_bufs);

	if (q->idx >= READ_ONCE(net->nq))
		return false;
	if (bufs >= NTR_RING)
		return true;
	return q->rx_owned + more <= bufs &&
	       ntr_rx_owned_all(net) + more <= net->rx_bufs_face;
}

/* Post buffers up to a full ring and tell the peer. Receive must not die
 * of one failed allocation: refill otherwise runs only after a completion,
 * and with every buffer used none would come. So a short refill is retried
 * from NAPI, scheduled by a timer (NTR_REFILL_RETRY_MS), until it is whole.
 */
static void ntr_refill(struct ntr_queue *q, gfp_t gfp)
{
	q->refill_due = false;
	while (ntrdma_tqp_recv_room(q->tqp) && ntr_rx_room(q, 1)) {
		if (ntr_post_one(q, gfp)) {
			ntr_count(&q->rxc, &q->rxc.refill_fail, 1);
			q->refill_due = true;
			mod_timer(&q->refill_timer, jiffies +
				  msecs_to_jiffies(NTR_REFILL_RETRY_MS));
			break;
		}
	}
	/* Also publishes buffers posted again by the copybreak path. */
	ntrdma_tqp_post_commit(q->tqp);
}

static void ntr_refill_timer(struct timer_list *t)
{
	struct ntr_queue *q = from_timer(q, t, refill_timer);

	napi_schedule(&q->napi);	/* a no-op while NAPI is disabled */
}

/* Post a buffer again after its frame was copied out (copybreak). */
void ntr_repost(struct ntr_queue *q, struct ntr_rx_buf *b)
{
	struct ntr_rx_buf keep = *b;
	u32 pos;

	b->rb.va = NULL;
	if (!ntr_rx_room(q, 0)) {	/* a queue out of use, or over its share */
		ntr_free_buf(q, &keep);
		return;
	}
	keep.guarded = ntr_guard_fill(q->net, keep.rb.va);
	if (ntrdma_tqp_post_recv(q->tqp, keep.rb.addr, q->net->rx_buf_len, &pos)) {
		ntr_free_buf(q, &keep);
		return;
	}
	q->rx[ntrdma_ring_idx(pos, NTR_RING)] = keep;
}

/* The skb for a received frame: built around the buffer the peer wrote (no
 * copy), except for frames up to the rx-copybreak tunable's bytes
 * (ethtool --set-tunable DEV rx-copybreak N), which are copied into a
 * small skb while the buffer is posted again: an skb around a whole 64 KiB
 * buffer charges a socket 64 KiB per datagram (truesize), so small-datagram
 * streams would overflow receive buffers long before they fill with data.
 */
static void ntr_flat_copy(struct ntr_queue *q,
			  const struct ntrdma_tqp_rcomp *c,
			  struct ntr_rx_buf *b, void *dst)
{
	struct device *dev = ntrdma_dev_dma_device(q->net->ndev);

	dma_sync_single_for_cpu(dev, b->rb.dma, c->len, DMA_FROM_DEVICE);
	memcpy(dst, (u8 *)b->rb.va + NTR_HEADROOM, c->len);
	dma_sync_single_for_device(dev, b->rb.dma, c->len, DMA_FROM_DEVICE);
	ntr_repost(q, b);
}

/* An skb around a page of the queue's pool holding @len bytes past the
 * headroom. The page goes back to the pool when the skb is freed (at once
 * if there is no skb).
 */
static struct sk_buff *ntr_pool_skb(struct ntr_queue *q, struct page *page,
				    u32 len)
{
	struct sk_buff *skb;

	skb = build_skb(page_address(page), PAGE_SIZE << q->net->rx_order);
	if (!skb) {
		page_pool_put_full_page(q->rx_pp, page, true);
		return NULL;
	}
	skb_mark_for_recycle(skb);
	skb_reserve(skb, NTR_HEADROOM);
	skb_put(skb, len);
	return skb;
}

static struct sk_buff *ntr_flat_skb(struct ntr_queue *q,
				    const struct ntrdma_tqp_rcomp *c,
				    struct ntr_rx_buf *b)
{
	struct device *dev = ntrdma_dev_dma_device(q->net->ndev);
	struct page *page = virt_to_head_page(b->rb.va);
	struct sk_buff *skb;

	if (c->len <= READ_ONCE(q->net->rx_copybreak)) {
		skb = napi_alloc_skb(&q->napi, c->len);
		if (skb) {
			ntr_flat_copy(q, c, b, skb_put(skb, c->len));
			return skb;
		}
	}
	dma_sync_single_for_cpu(dev, b->rb.dma, c->len, DMA_FROM_DEVICE);
	b->rb.va = NULL;	/* the skb's now, or the pool's */
	q->rx_owned--;
	return ntr_pool_skb(q, page, c->len);
}

static const struct ntr_rx_ops ntr_rx_flat = {
	.alloc = ntr_flat_alloc,
	.free = ntr_flat_free,
	.copy = ntr_flat_copy,
	.skb = ntr_flat_skb,
	.guards = true,
};

/* Windowed mode: a piece of the window, the engine's. */
static int ntr_window_alloc(struct ntr_queue *q, struct ntr_rx_buf *b,
			    gfp_t gfp)
{
	b->guarded = false;
	return ntrdma_rxbuf_alloc(q->net->ndev, &b->rb, q->net->rx_buf_len,
				  gfp);
}

static void ntr_window_free(struct ntr_queue *q, struct ntr_rx_buf *b)
{
	ntrdma_rxbuf_free(q->net->ndev, &b->rb);
}

static void ntr_window_copy(struct ntr_queue *q,
			    const struct ntrdma_tqp_rcomp *c,
			    struct ntr_rx_buf *b, void *dst)
{
	ntrdma_rxbuf_for_cpu(q->net->ndev, &b->rb, c->len);
	memcpy(dst, b->rb.va, c->len);
	ntr_repost(q, b);
}

/* Every frame is copied out (as ntb_netdev does), its piece posted again.
 * A large frame goes into a page of the queue's pool (recycled, where a
 * fresh 64 KiB skb head would be allocated and zeroed per frame); one that
 * would fill under a quarter of such a page, into an skb of its size.
 */
static struct sk_buff *ntr_window_skb(struct ntr_queue *q,
				      const struct ntrdma_tqp_rcomp *c,
				      struct ntr_rx_buf *b)
{
	struct sk_buff *skb;
	struct page *page;

	if (c->len > (PAGE_SIZE << q->net->rx_order) / 4) {
		page = page_pool_dev_alloc_pages(q->rx_pp);
		if (page) {
			ntr_window_copy(q, c, b, page_address(page) + NTR_HEADROOM);
			return ntr_pool_skb(q, page, c->len);
		}
	}
	skb = napi_alloc_skb(&q->napi, c->len);
	if (skb)
		ntr_window_copy(q, c, b, skb_put(skb, c->len));
	else
		ntr_repost(q, b);
	return skb;
}

static const struct ntr_rx_ops ntr_rx_window = {
	.alloc = ntr_window_alloc,
	.free = ntr_window_free,
	.copy = ntr_window_copy,
	.skb = ntr_window_skb,
};

/* Buffers per queue: the queues in use share the face's part (windowed). */
static void ntr_rx_share(struct ntrdma_net *net)
{
	if (net->rx_ops)
		WRITE_ONCE(net->rx_bufs,
			   ntrdma_rxbuf_count(net->ndev, net->rx_buf_len,
					      NTR_WINDOW_SHARE / net->nq,
					      NTR_RING));
}

/* The engine's mode is known at the first session: buffers to match. */
static void ntr_rx_choose(struct ntrdma_net *net)
{
	if (net->rx_ops)
		return;
	if (ntrdma_dev_windowed(net->ndev))
		net->rx_ops = &ntr_rx_window;
	else
		net->rx_ops = &ntr_rx_flat;
	net->rx_bufs_face = ntrdma_rxbuf_count(net->ndev, net->rx_buf_len,
					       NTR_WINDOW_SHARE,
					       NTR_RING * NTR_MAX_QUEUES);
	ntr_rx_share(net);
}

/* A GSO frame's type must be what its headers say it is (IPv4 or IPv6,
 * behind any VLAN tags), as virtio_net ties its header to the packet.
 * Called on the whole frame, at least an Ethernet header long.
 */
static bool ntr_gso_type_ok(struct sk_buff *skb,
			    const struct ntrdma_net_meta *m)
{
	__be16 want, type = ((struct ethhdr *)skb->data)->h_proto;

	if (!(m->flags & (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6)))
		return true;
	want = htons(m->flags & NTRDMA_NET_GSO_TCPV6 ? ETH_P_IPV6 : ETH_P_IP);
	return __vlan_get_protocol(skb, type, NULL) == want;
}

/* The skb of a checked frame: XDP's verdict first, if a program is on. */
static struct sk_buff *ntr_rx_skb(struct ntr_queue *q,
				  const struct ntrdma_tqp_rcomp *c,
				  struct ntr_rx_buf *b,
				  const struct ntrdma_net_meta *m)
{
	struct sk_buff *skb = NULL;
	struct bpf_prog *prog;

	rcu_read_lock();
	prog = rcu_dereference(q->net->xdp_prog);
	if (prog)
		skb = ntr_xdp_rx(q, prog, c, b, m);
	rcu_read_unlock();
	if (prog)
		return skb;	/* or counted where XDP took it */
	skb = q->net->rx_ops->skb(q, c, b);
	if (!skb)
		ntr_count(&q->rxc, &q->rxc.dropped, 1);
	return skb;
}

static bool ntr_rx_one(struct ntr_queue *q,
		       const struct ntrdma_tqp_rcomp *c, struct ntr_rx_buf *b)
{
	struct ntrdma_net *net = q->net;
	struct ntrdma_net_meta m;
	struct sk_buff *skb;

	ntrdma_net_meta_unpack(c->meta, &m);
	if (ntrdma_net_check_meta(&m, c->len))
		return false;
	skb = ntr_rx_skb(q, c, b, &m);
	if (!skb)
		return true;

	if (m.flags & NTRDMA_NET_CSUM_OK) {
		if (m.csum_start || m.csum_offset) {
			/* Sender left the checksum to "hardware": finish it
			 * only if this frame leaves the host again.
			 */
			if (!skb_partial_csum_set(skb, m.csum_start,
						  m.csum_offset)) {
				ntr_count(&q->rxc, &q->rxc.errors, 1);
				kfree_skb(skb);
				return true;
			}
		} else {
			skb->ip_summed = CHECKSUM_UNNECESSARY;
		}
	}
	if (!ntr_gso_type_ok(skb, &m)) {
		ntr_count(&q->rxc, &q->rxc.proto_errors, 1);
		kfree_skb(skb);
		return true;
	}
	skb->protocol = eth_type_trans(skb, net->netdev);
	if (m.flags & (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6)) {
		skb_shinfo(skb)->gso_size = m.gso_size;
		skb_shinfo(skb)->gso_type = SKB_GSO_DODGY |
			(m.flags & NTRDMA_NET_GSO_TCPV6 ? SKB_GSO_TCPV6 :
			 SKB_GSO_TCPV4);
		skb_shinfo(skb)->gso_segs = 0;
	}
	u64_stats_update_begin(&q->rxc.syncp);
	q->rxc.packets++;
	q->rxc.bytes += c->len;
	u64_stats_update_end(&q->rxc.syncp);
	skb_record_rx_queue(skb, q->idx);
	napi_gro_receive(&q->napi, skb);
	return true;
}

static int ntr_poll(struct napi_struct *napi, int budget)
{
	struct ntr_queue *q = container_of(napi, struct ntr_queue, napi);
	struct ntrdma_tqp_rcomp c;
	struct ntr_rx_buf *b;
	int done = 0, rc = 0;

	/* netpoll asks with budget 0: no receive and no page_pool there. */
	if (!budget)
		return 0;
	while (done < budget) {
		rc = ntrdma_tqp_poll_recv(q->tqp, &c, q->net->rx_buf_len);
		if (rc <= 0) {
			if (rc)
				ntr_count(&q->rxc, &q->rxc.proto_errors, 1);
			break;
		}
		b = &q->rx[ntrdma_ring_idx(c.pos, NTR_RING)];
		done++;
		if (WARN_ON_ONCE(!b->rb.va))
			continue;
		ntr_guard_check(q->net, b);
		if (!netif_running(q->net->netdev)) {
			/* In flight when we closed: the interface is down. */
			ntr_free_buf(q, b);
			ntr_count(&q->rxc, &q->rxc.dropped_down, 1);
		} else if (!ntr_rx_one(q, &c, b)) {
			/* As virtio_net: a bad frame is dropped and counted. */
			ntr_free_buf(q, b);
			ntr_count(&q->rxc, &q->rxc.proto_errors, 1);
			netdev_dbg(q->net->netdev, "bad frame meta %#llx, %u bytes\n",
				   c.meta, c.len);
		}
	}
	ntr_xdp_poll_end(q);
	if (done || q->refill_due)
		ntr_refill(q, GFP_ATOMIC);
	/* A malformed completion is left where it is: the session ends
	 * (ntrdma_link_proto_error()), and polling it again would spin.
	 */
	if (rc < 0) {
		napi_complete_done(napi, done);
		return done;
	}
	/* Ask for a doorbell on the next completion, then re-check. */
	if (done < budget && napi_complete_done(napi, done) &&
	    ntrdma_tqp_recv_arm(q->tqp))
		napi_schedule(napi);
	return done;
}

static void ntr_tqp_rx(void *ctx)
{
	struct ntr_queue *q = ctx;

	napi_schedule(&q->napi);
}

/* Carrier: a session runs, we are up, and so is the peer's netdev, which
 * tells (queue 0's state word) how many queue pairs it has: both sides send
 * on the smaller number. Process context; under carrier_lock, so a session
 * that stopped (ntr_session_stop()) never sees its carrier turned back on.
 */
static void ntr_update_carrier(struct ntrdma_net *net)
{
	struct net_device *dev = net->netdev;
	u32 state = 0, peer;
	bool bad, xdp;

	mutex_lock(&net->carrier_lock);
	if (READ_ONCE(net->active) && netif_running(dev))
		state = ntrdma_tqp_peer_state(net->q[0].tqp);
	bad = ntrdma_net_state_unpack(state, NTR_MAX_QUEUES, &peer, &xdp);
	if (bad) {
		peer = 0;
		xdp = false;
	}
	WRITE_ONCE(net->peer_xdp, xdp);
	WRITE_ONCE(net->tx_nq, min_t(u32, peer, READ_ONCE(net->nq)));
	if (peer) {
		ntrdma_fault_pause(net->ndev, "carrier");
		if (!netif_carrier_ok(dev))
			netif_carrier_on(dev);
		netif_tx_wake_all_queues(dev);
	} else if (netif_carrier_ok(dev)) {
		netif_carrier_off(dev);
		netif_tx_stop_all_queues(dev);
	}
	mutex_unlock(&net->carrier_lock);
	if (bad)
		ntrdma_link_proto_error(net->ndev, "peer netdev state out of range");
}

static void ntr_carrier_work(struct work_struct *work)
{
	ntr_update_carrier(container_of(work, struct ntrdma_net, carrier_work));
}

/* The peer's state doorbell (any context): the carrier follows in a work. */
static void ntr_tqp_peer_state(void *ctx)
{
	struct ntr_queue *q = ctx;

	schedule_work(&q->net->carrier_work);
}

/* Tell the peer whether (and on how many queues) to send to us. */
void ntr_publish_open(struct ntrdma_net *net)
{
	bool open = netif_running(net->netdev);
	u32 q0 = net->nq;
	int i;

	if (!READ_ONCE(net->active))
		return;
	if (rcu_access_pointer(net->xdp_prog))
		q0 |= NTRDMA_NET_STATE_XDP;
	for (i = NTR_MAX_QUEUES - 1; i >= 0; i--)
		ntrdma_tqp_set_state(net->q[i].tqp, !open ? 0 :
				     i ? i < net->nq : q0);
}

static void ntr_tqp_tx_space(void *ctx)
{
	struct ntr_queue *q = ctx;
	struct net_device *dev = q->net->netdev;
	struct netdev_queue *txq = netdev_get_tx_queue(dev, q->idx);

	if (netif_tx_queue_stopped(txq) && netif_carrier_ok(dev)) {
		atomic64_inc(&q->tx_wakes);
		netif_tx_wake_queue(txq);
	}
}

/* ---- transmit ---- */

/* A send finished (any context but hard irq): BQL, counters, the skb. */
static void ntr_tqp_send_done(void *ctx, void *cookie, u32 len, int status)
{
	struct ntr_queue *q = ctx;
	struct sk_buff *skb = cookie;
	unsigned long flags;

	if ((unsigned long)cookie & NTR_XDP_TAG) {
		ntr_xdp_send_done(q, cookie, len, status);
		return;
	}
	spin_lock_irqsave(&q->bql_lock, flags);
	netdev_tx_completed_queue(netdev_get_tx_queue(q->net->netdev, q->idx),
				  1, len);
	spin_unlock_irqrestore(&q->bql_lock, flags);
	u64_stats_update_begin(&q->donec.syncp);
	if (!status) {
		q->donec.packets++;
		q->donec.bytes += len;
	} else if (status == -ENOLINK) {
		q->donec.dropped++;	/* the session ended first */
	} else {
		q->donec.errors++;
	}
	u64_stats_update_end(&q->donec.syncp);
	if (status)
		dev_kfree_skb_any(skb);
	else
		dev_consume_skb_any(skb);
}

static int ntr_skb_sges(struct sk_buff *skb, struct ntrdma_tqp_sge *sg)
{
	int i, n = 0;

	if (skb_headlen(skb)) {
		sg[n].page = virt_to_page(skb->data);
		sg[n].off = offset_in_page(skb->data);
		sg[n++].len = skb_headlen(skb);
	}
	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		const skb_frag_t *f = &skb_shinfo(skb)->frags[i];

		sg[n].page = skb_frag_page(f);
		sg[n].off = skb_frag_off(f);
		sg[n++].len = skb_frag_size(f);
	}
	return n;
}

static u64 ntr_skb_meta(struct sk_buff *skb)
{
	struct ntrdma_net_meta m = {};

	if (skb->ip_summed == CHECKSUM_PARTIAL) {
		m.flags |= NTRDMA_NET_CSUM_OK;
		m.csum_start = skb_checksum_start_offset(skb);
		m.csum_offset = skb->csum_offset;
	} else if (skb->ip_summed == CHECKSUM_UNNECESSARY) {
		m.flags |= NTRDMA_NET_CSUM_OK;
	}
	if (skb_is_gso(skb)) {
		/* TSO: the whole super-frame crosses; the receiver keeps it
		 * as one GSO skb (segmented only if it leaves that host).
		 */
		m.flags |= skb_shinfo(skb)->gso_type & SKB_GSO_TCPV6 ?
			   NTRDMA_NET_GSO_TCPV6 : NTRDMA_NET_GSO_TCPV4;
		m.gso_size = skb_shinfo(skb)->gso_size;
	}
	return ntrdma_net_meta_pack(&m);
}

static u16 ntr_select_queue(struct net_device *dev, struct sk_buff *skb,
			    struct net_device *sb_dev)
{
	struct ntrdma_net *net = netdev_priv(dev);
	u32 n = READ_ONCE(net->tx_nq);
	u16 q = netdev_pick_tx(dev, skb, sb_dev);

	return n > 1 ? q % n : 0;
}

static netdev_tx_t ntr_start_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct ntr_queue *q = &net->q[skb_get_queue_mapping(skb)];
	struct netdev_queue *txq = netdev_get_tx_queue(dev, q->idx);
	struct ntrdma_tqp_sge sg[NTRDMA_TQP_MAX_SGE];
	unsigned long flags;
	u32 len = skb->len;
	bool kick;
	int n, rc;

	if (!READ_ONCE(net->active) || q->idx >= READ_ONCE(net->tx_nq)) {
		/* Carrier just went off: the stack would drop it too. */
		ntr_count(&q->txc, &q->txc.dropped, 1);
		dev_kfree_skb_any(skb);
		ntrdma_tqp_send_flush(q->tqp);	/* what xmit_more held back */
		return NETDEV_TX_OK;
	}
	n = ntr_skb_sges(skb, sg);

	/* BQL counts it first: with the CPU, send_done runs inside send. */
	kick = __netdev_tx_sent_queue(txq, len, netdev_xmit_more());
	rc = ntrdma_tqp_send(q->tqp, sg, n, len, ntr_skb_meta(skb), skb, !kick);
	if (!rc)
		return NETDEV_TX_OK;

	spin_lock_irqsave(&q->bql_lock, flags);
	netdev_tx_completed_queue(txq, 1, len);
	spin_unlock_irqrestore(&q->bql_lock, flags);
	if (rc == -ENOSPC) {
		/* No buffer posted; TXWAKE was requested (send re-checked). */
		netif_tx_stop_queue(txq);
		ntr_count(&q->txc, &q->txc.busy, 1);
		ntrdma_tqp_send_flush(q->tqp);
		smp_mb(); /* stopped before re-checking for a racing post */
		if (ntrdma_tqp_send_ready(q->tqp))
			netif_tx_start_queue(txq);
		return NETDEV_TX_BUSY;
	}
	/* Never written outside what the peer posted. */
	ntr_count(&q->txc, &q->txc.errors, 1);
	if (rc == -EPROTO)
		ntr_count(&q->txc, &q->txc.proto_errors, 1);
	else if (rc == -EMSGSIZE)
		net_warn_ratelimited("%s: %u-byte frame larger than the peer's buffers: dropped\n",
				     dev->name, len);
	dev_kfree_skb_any(skb);
	ntrdma_tqp_send_flush(q->tqp);
	return NETDEV_TX_OK;
}

/* ---- datapath: one per link session (rtnl held) ---- */

/* Session over, NAPI off: frames the peer completed that NAPI did not take
 * are counted as dropped (the buffers themselves go to quarantine).
 */
static void ntr_drain_rx(struct ntr_queue *q)
{
	struct ntrdma_tqp_rcomp c;
	u32 n = 0;

	while (ntrdma_tqp_poll_recv(q->tqp, &c, q->net->rx_buf_len) > 0)
		n++;
	if (n)
		ntr_count(&q->rxc, &q->rxc.dropped_down, n);
}

static void ntr_session_start(struct ntrdma_net *net)
{
	struct ntr_queue *q;
	int i;

	if (net->active || !ntrdma_link_is_up(net->ndev))
		return;
	ntr_rx_choose(net);
	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		q = &net->q[i];
		/* The peer accepted this session: it left the previous one. */
		ntr_free_quarantine(q);
		ntrdma_tqp_start(q->tqp);
		netdev_tx_reset_queue(netdev_get_tx_queue(net->netdev, i));
	}
	WRITE_ONCE(net->active, true);
	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		ntr_refill(&net->q[i], GFP_KERNEL);
		napi_enable(&net->q[i].napi);
	}
	ntr_publish_open(net);
	ntr_update_carrier(net);
	for (i = 0; i < NTR_MAX_QUEUES; i++)
		napi_schedule(&net->q[i].napi);
}

static void ntr_session_stop(struct ntrdma_net *net)
{
	int i;

	if (!net->active)
		return;
	mutex_lock(&net->carrier_lock);
	WRITE_ONCE(net->active, false);
	WRITE_ONCE(net->tx_nq, 0);
	netif_carrier_off(net->netdev);
	mutex_unlock(&net->carrier_lock);
	netif_tx_disable(net->netdev);
	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		napi_disable(&net->q[i].napi);
		del_timer_sync(&net->q[i].refill_timer);
		ntr_drain_rx(&net->q[i]);
		/* Sends in flight complete (-ENOLINK) before this returns. */
		ntrdma_tqp_stop(net->q[i].tqp);
		ntr_quarantine_rx(&net->q[i]);
	}
}

static void ntr_link_up(void *priv)
{
	struct ntrdma_net *net = priv;

	rtnl_lock();
	ntr_session_start(net);
	rtnl_unlock();
}

static void ntr_link_down(void *priv)
{
	struct ntrdma_net *net = priv;

	/* Carrier first: it needs no lock, and rtnl may be busy for long. */
	netif_carrier_off(net->netdev);
	rtnl_lock();
	ntr_session_stop(net);
	rtnl_unlock();
}

static int ntr_open(struct net_device *dev)
{
	struct ntrdma_net *net = netdev_priv(dev);

	ntr_publish_open(net);
	ntr_update_carrier(net);
	return 0;
}

static int ntr_close(struct net_device *dev)
{
	struct ntrdma_net *net = netdev_priv(dev);

	ntr_publish_open(net);	/* running is already clear: tells "closed" */
	netif_carrier_off(dev);
	netif_tx_disable(dev);
	return 0;
}

static void ntr_read(struct ntr_counters *c, struct ntr_counters *out)
{
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&c->syncp);
		out->packets = c->packets;
		out->bytes = c->bytes;
		out->dropped = c->dropped;
		out->errors = c->errors;
		out->busy = c->busy;
		out->refill_fail = c->refill_fail;
		out->proto_errors = c->proto_errors;
		out->dropped_down = c->dropped_down;
	} while (u64_stats_fetch_retry(&c->syncp, start));
}

/* The counter sets of all queues, added up. */
static void ntr_sum(struct ntrdma_net *net, struct ntr_counters *r,
		    struct ntr_counters *t, struct ntr_counters *d)
{
	struct ntr_counters one;
	int i, k;
	struct {
		size_t off;
		struct ntr_counters *sum;
	} sets[] = {
		{ offsetof(struct ntr_queue, rxc), r },
		{ offsetof(struct ntr_queue, txc), t },
		{ offsetof(struct ntr_queue, donec), d },
	};

	for (k = 0; k < ARRAY_SIZE(sets); k++) {
		memset(sets[k].sum, 0, sizeof(*sets[k].sum));
		for (i = 0; i < NTR_MAX_QUEUES; i++) {
			ntr_read((void *)((u8 *)&net->q[i] + sets[k].off), &one);
			sets[k].sum->packets += one.packets;
			sets[k].sum->bytes += one.bytes;
			sets[k].sum->dropped += one.dropped;
			sets[k].sum->errors += one.errors;
			sets[k].sum->busy += one.busy;
			sets[k].sum->refill_fail += one.refill_fail;
			sets[k].sum->proto_errors += one.proto_errors;
			sets[k].sum->dropped_down += one.dropped_down;
		}
	}
}

static void ntr_get_stats64(struct net_device *dev,
			    struct rtnl_link_stats64 *s)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct ntr_counters r, t, d;

	ntr_sum(net, &r, &t, &d);
	s->rx_packets = r.packets;
	s->rx_bytes = r.bytes;
	s->rx_dropped = r.dropped + r.dropped_down;
	s->rx_errors = r.errors + r.proto_errors;
	s->tx_packets = d.packets;
	s->tx_bytes = d.bytes;
	s->tx_dropped = t.dropped + d.dropped;
	s->tx_errors = t.errors + d.errors;
	ntr_xdp_tx_totals(net, &s->tx_packets, &s->tx_bytes, &s->tx_errors);
}

/* The peer runs XDP: it takes whole frames with complete checksums only. */
static netdev_features_t ntr_features_check(struct sk_buff *skb,
					    struct net_device *dev,
					    netdev_features_t features)
{
	struct ntrdma_net *net = netdev_priv(dev);

	features = vlan_features_check(skb, features);
	if (READ_ONCE(net->peer_xdp))
		features &= ~(NETIF_F_CSUM_MASK | NETIF_F_GSO_MASK);
	return features;
}

static int ntr_change_mtu(struct net_device *dev, int mtu)
{
	if (!ntr_xdp_mtu_ok(netdev_priv(dev), mtu))
		return -EINVAL;
	WRITE_ONCE(dev->mtu, mtu);
	return 0;
}

static const struct net_device_ops ntr_netdev_ops = {
	.ndo_open		= ntr_open,
	.ndo_stop		= ntr_close,
	.ndo_start_xmit		= ntr_start_xmit,
	.ndo_select_queue	= ntr_select_queue,
	.ndo_get_stats64	= ntr_get_stats64,
	.ndo_validate_addr	= eth_validate_addr,
	.ndo_set_mac_address	= eth_mac_addr,
	.ndo_features_check	= ntr_features_check,
	.ndo_change_mtu		= ntr_change_mtu,
	.ndo_bpf		= ntr_xdp_bpf,
	.ndo_xdp_xmit		= ntr_xdp_xmit,
};

/* ---- ethtool ---- */

static const char ntr_stat_names[][ETH_GSTRING_LEN] = {
	"rx_packets", "rx_bytes", "rx_dropped", "rx_errors",
	"rx_refill_fail", "rx_proto_errors", "rx_dropped_while_down",
	"tx_packets", "tx_bytes", "tx_dropped_link_end", "tx_errors_done",
	"tx_dropped_no_carrier", "tx_errors", "tx_busy", "tx_proto_errors",
	"tx_wakes", "tx_doorbells", "tx_dma",
};

/* Then each queue's own, as rxN_... and txN_... (ntr_queue_strings()). */
#define NTR_QUEUE_STATS	8

static void ntr_get_drvinfo(struct net_device *dev,
			    struct ethtool_drvinfo *info)
{
	struct ntrdma_net *net = netdev_priv(dev);

	strscpy(info->driver, "ntrdma", sizeof(info->driver));
	strscpy(info->bus_info, dev_name(ntrdma_dev_parent(net->ndev)),
		sizeof(info->bus_info));
}

static int ntr_get_sset_count(struct net_device *dev, int sset)
{
	struct ntrdma_net *net = netdev_priv(dev);

	if (sset != ETH_SS_STATS)
		return -EOPNOTSUPP;
	return ARRAY_SIZE(ntr_stat_names) + NTR_XDP_STATS +
	       net->nq * NTR_QUEUE_STATS;
}

static void ntr_queue_strings(u8 **p, int i)
{
	ethtool_sprintf(p, "rx%d_packets", i);
	ethtool_sprintf(p, "rx%d_bytes", i);
	ethtool_sprintf(p, "rx%d_dropped", i);
	ethtool_sprintf(p, "tx%d_packets", i);
	ethtool_sprintf(p, "tx%d_bytes", i);
	ethtool_sprintf(p, "tx%d_busy", i);
	ethtool_sprintf(p, "tx%d_wakes", i);
	ethtool_sprintf(p, "tx%d_doorbells", i);
}

static void ntr_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	struct ntrdma_net *net = netdev_priv(dev);
	int i;

	if (sset != ETH_SS_STATS)
		return;
	memcpy(data, ntr_stat_names, sizeof(ntr_stat_names));
	data += sizeof(ntr_stat_names);
	ntr_xdp_strings(&data);
	for (i = 0; i < net->nq; i++)
		ntr_queue_strings(&data, i);
}

/* Queue @q's counters in ntr_queue_strings() order; the next slot. */
static u64 *ntr_queue_stats(struct ntr_queue *q, u64 *data)
{
	struct ntr_counters r, t, d;

	ntr_read(&q->rxc, &r);
	ntr_read(&q->txc, &t);
	ntr_read(&q->donec, &d);
	*data++ = r.packets;
	*data++ = r.bytes;
	*data++ = r.dropped;
	*data++ = d.packets;
	*data++ = d.bytes;
	*data++ = t.busy;
	*data++ = atomic64_read(&q->tx_wakes);
	*data++ = ntrdma_tqp_doorbells(q->tqp);
	return data;
}

static void ntr_get_ethtool_stats(struct net_device *dev,
				  struct ethtool_stats *stats, u64 *data)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct ntr_counters r, t, d;
	u64 wakes = 0, doorbells = 0;
	int i;

	ntr_sum(net, &r, &t, &d);
	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		wakes += atomic64_read(&net->q[i].tx_wakes);
		doorbells += ntrdma_tqp_doorbells(net->q[i].tqp);
	}
	*data++ = r.packets;
	*data++ = r.bytes;
	*data++ = r.dropped;
	*data++ = r.errors;
	*data++ = r.refill_fail;
	*data++ = r.proto_errors;
	*data++ = r.dropped_down;
	*data++ = d.packets;
	*data++ = d.bytes;
	*data++ = d.dropped;
	*data++ = d.errors;
	*data++ = t.dropped;
	*data++ = t.errors;
	*data++ = t.busy;
	*data++ = t.proto_errors;
	*data++ = wakes;
	*data++ = doorbells;
	*data++ = ntrdma_dev_dma_copies(net->ndev) ? 1 : 0;
	data = ntr_xdp_stats(net, data);
	for (i = 0; i < net->nq; i++)
		data = ntr_queue_stats(&net->q[i], data);
}

static void ntr_get_channels(struct net_device *dev,
			     struct ethtool_channels *ch)
{
	struct ntrdma_net *net = netdev_priv(dev);

	ch->max_combined = NTR_MAX_QUEUES;
	ch->combined_count = net->nq;
}

/* ethtool -L combined N (rtnl): a queue taken into use posts its buffers
 * before the peer hears of it; one taken out of use stops posting.
 */
static int ntr_set_channels(struct net_device *dev,
			    struct ethtool_channels *ch)
{
	struct ntrdma_net *net = netdev_priv(dev);
	u32 n = ch->combined_count;
	int i, rc;

	if (!n || n > NTR_MAX_QUEUES || ch->rx_count || ch->tx_count ||
	    ch->other_count)
		return -EINVAL;
	rc = netif_set_real_num_queues(dev, n, n);
	if (rc)
		return rc;
	WRITE_ONCE(net->nq, n);
	ntr_rx_share(net);
	for (i = 0; i < n && READ_ONCE(net->active); i++) {
		napi_disable(&net->q[i].napi);	/* refill is NAPI's */
		ntr_refill(&net->q[i], GFP_KERNEL);
		napi_enable(&net->q[i].napi);
		/* a doorbell that came while NAPI was off scheduled nothing */
		napi_schedule(&net->q[i].napi);
	}
	ntr_publish_open(net);
	ntr_update_carrier(net);
	return 0;
}

static int ntr_get_tunable(struct net_device *dev,
			   const struct ethtool_tunable *t, void *data)
{
	struct ntrdma_net *net = netdev_priv(dev);

	if (t->id != ETHTOOL_RX_COPYBREAK)
		return -EOPNOTSUPP;
	*(u32 *)data = READ_ONCE(net->rx_copybreak);
	return 0;
}

/* rx-copybreak: 0 (never copy) up to the largest frame (always copy). */
static int ntr_set_tunable(struct net_device *dev,
			   const struct ethtool_tunable *t, const void *data)
{
	struct ntrdma_net *net = netdev_priv(dev);
	u32 v = *(const u32 *)data;

	if (t->id != ETHTOOL_RX_COPYBREAK)
		return -EOPNOTSUPP;
	if (v > NTR_MAX_FRAME)
		return -EINVAL;
	WRITE_ONCE(net->rx_copybreak, v);
	return 0;
}

static const struct ethtool_ops ntr_ethtool_ops = {
	.get_drvinfo		= ntr_get_drvinfo,
	.get_link		= ethtool_op_get_link,
	.get_sset_count		= ntr_get_sset_count,
	.get_strings		= ntr_get_strings,
	.get_ethtool_stats	= ntr_get_ethtool_stats,
	.get_channels		= ntr_get_channels,
	.set_channels		= ntr_set_channels,
	.get_tunable		= ntr_get_tunable,
	.set_tunable		= ntr_set_tunable,
};

/* ---- add/remove ---- */

/* A stable locally administered MAC: host name, link device and port. */
static void ntr_set_mac(struct ntrdma_net *net)
{
	const char *link = dev_name(ntrdma_dev_parent(net->ndev));
	const char *node = utsname()->nodename;
	u8 mac[ETH_ALEN];
	u32 h;

	h = jhash(node, strnlen(node, __NEW_UTS_LEN), 0);
	h = jhash(link, strlen(link), h);
	h = jhash_1word(ntrdma_dev_port(net->ndev), h);
	mac[0] = 0x02;	/* locally administered, unicast */
	mac[1] = 0x4e;	/* 'N' */
	mac[2] = h >> 24;
	mac[3] = h >> 16;
	mac[4] = h >> 8;
	mac[5] = h;
	eth_hw_addr_set(net->netdev, mac);
}

static const struct ntrdma_tqp_ops ntr_tqp_ops = {
	.rx		= ntr_tqp_rx,
	.tx_space	= ntr_tqp_tx_space,
	.peer_state	= ntr_tqp_peer_state,
	.send_done	= ntr_tqp_send_done,
};

/* The queue's pool: flat mode's receive buffers, windowed mode's copies of
 * large frames. Its pages are recycled when the stack frees their skbs: no
 * allocation, zeroing or mapping per frame.
 */
static int ntr_rx_pool_init(struct ntr_queue *q)
{
	struct ntrdma_net *net = q->net;
	struct page_pool_params pp = {
		.flags = PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV,
		.order = net->rx_order,
		.pool_size = NTR_RX_POOL,
		.nid = NUMA_NO_NODE,
		.dev = ntrdma_dev_dma_device(net->ndev),
		.dma_dir = DMA_FROM_DEVICE,
		.offset = NTR_HEADROOM,
		.max_len = net->rx_buf_len,
	};

	q->rx_pp = page_pool_create(&pp);
	if (IS_ERR(q->rx_pp)) {
		int rc = PTR_ERR(q->rx_pp);

		q->rx_pp = NULL;
		return rc;
	}
	return 0;
}

/* Flat mode's buffers kept at removal (the peer may still write them) are
 * pool pages: they keep the pool. Windowed mode's are pieces of the window.
 */
static void ntr_rx_pool_fini(struct ntr_queue *q)
{
	bool kept = q->quar_count && q->net->rx_ops == &ntr_rx_flat;

	if (q->rx_pp && !kept)
		page_pool_destroy(q->rx_pp);
	q->rx_pp = NULL;
}

static void ntr_queues_fini(struct ntrdma_net *net, int n)
{
	while (n--) {
		del_timer_sync(&net->q[n].refill_timer);
		ntrdma_tqp_destroy(net->q[n].tqp);
		ntr_rx_pool_fini(&net->q[n]);
		ntr_xdp_queue_fini(&net->q[n]);
		netif_napi_del(&net->q[n].napi);
	}
}

static int ntr_queues_init(struct ntrdma_net *net)
{
	struct ntr_queue *q;
	int i, rc;

	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		q = &net->q[i];
		q->net = net;
		q->idx = i;
		spin_lock_init(&q->bql_lock);
		u64_stats_init(&q->rxc.syncp);
		u64_stats_init(&q->txc.syncp);
		u64_stats_init(&q->donec.syncp);
		atomic64_set(&q->tx_wakes, 0);
		netif_napi_add_weight(net->netdev, &q->napi, ntr_poll,
				      NTR_NAPI_WEIGHT);
		timer_setup(&q->refill_timer, ntr_refill_timer, 0);
		rc = ntr_xdp_queue_init(q);
		if (rc)
			goto err;
		rc = ntr_rx_pool_init(q);
		if (rc) {
			ntr_xdp_queue_fini(q);
			goto err;
		}
		q->tqp = ntrdma_tqp_create(net->ndev, NTRDMA_TQP_NET + i,
					   &ntr_tqp_ops, q);
		if (IS_ERR(q->tqp)) {
			rc = PTR_ERR(q->tqp);
			ntr_rx_pool_fini(q);
			ntr_xdp_queue_fini(q);
			goto err;
		}
	}
	return 0;

err:
	netif_napi_del(&q->napi);
	ntr_queues_fini(net, i);
	return rc;
}

static int ntr_add(struct ntrdma_dev *ndev, void **priv)
{
	struct net_device *dev;
	struct ntrdma_net *net;
	int rc;

	dev = alloc_netdev_mqs(sizeof(*net), "ntr%d", NET_NAME_ENUM,
			       ether_setup, NTR_MAX_QUEUES, NTR_MAX_QUEUES);
	if (!dev)
		return -ENOMEM;
	net = netdev_priv(dev);
	net->ndev = ndev;
	mutex_init(&net->carrier_lock);
	INIT_WORK(&net->carrier_work, ntr_carrier_work);
	net->netdev = dev;
	net->nq = 1;
	net->rx_buf_len = NTR_MAX_FRAME;
	net->rx_copybreak = NTR_RX_COPYBREAK;
	net->rx_alloc_len = SKB_DATA_ALIGN(NTR_HEADROOM + net->rx_buf_len) +
			    SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	net->rx_order = get_order(net->rx_alloc_len);
	net->q = kvcalloc(NTR_MAX_QUEUES, sizeof(*net->q), GFP_KERNEL);
	if (!net->q) {
		rc = -ENOMEM;
		goto err_free;
	}

	SET_NETDEV_DEV(dev, ntrdma_dev_parent(ndev));
	dev->netdev_ops = &ntr_netdev_ops;
	dev->ethtool_ops = &ntr_ethtool_ops;
	dev->min_mtu = ETH_MIN_MTU;
	dev->max_mtu = NTR_MAX_MTU;
	dev->mtu = NTR_DEFAULT_MTU;
	dev->hw_features = NETIF_F_SG | NETIF_F_HW_CSUM | NETIF_F_HIGHDMA |
			   NETIF_F_RXCSUM | NETIF_F_TSO | NETIF_F_TSO6;
	dev->features = dev->hw_features;
	dev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	ntr_xdp_features(dev);
	ntr_set_mac(net);
	netif_carrier_off(dev);

	rc = netif_set_real_num_queues(dev, 1, 1);
	if (rc)
		goto err_q;
	rc = ntr_queues_init(net);
	if (rc)
		goto err_q;
	rc = register_netdev(dev);
	if (rc)
		goto err_queues;
	/* The verbs face binds its port to this netdev (rdma_cm). */
	ntrdma_dev_set_netdev(ndev, dev);
	*priv = net;
	return 0;

err_queues:
	ntr_queues_fini(net, NTR_MAX_QUEUES);
err_q:
	kvfree(net->q);
err_free:
	free_netdev(dev);
	return rc;
}

/* After the link session ended (ntrdma_link_stop()). Posted buffers are
 * kept (leaked), with their pool, unless @peer_quiet: the peer may still
 * write into them.
 */
static void ntr_del(void *priv, bool peer_quiet)
{
	struct ntrdma_net *net = priv;
	int i;

	ntrdma_dev_set_netdev(net->ndev, NULL);
	unregister_netdev(net->netdev);
	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		ntr_quarantine_rx(&net->q[i]);
		if (peer_quiet)
			ntr_free_quarantine(&net->q[i]);
	}
	ntr_queues_fini(net, NTR_MAX_QUEUES);
	/* No doorbell queues it any more; with no session it reads no queue. */
	cancel_work_sync(&net->carrier_work);
	kvfree(net->q);
	free_netdev(net->netdev);
}

/* The Ethernet face, as the module lists it (ntrdma_main.c). */
const struct ntrdma_face ntrdma_net_face = {
	.name		= "Ethernet",
	.add		= ntr_add,
	.del		= ntr_del,
	.link_up	= ntr_link_up,
	.link_down	= ntr_link_down,
};
