// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA Ethernet face: ntr%d, one netdev per ntrdma device.
 *
 * Receive: we post receive buffers to the peer (their DMA addresses go into
 * the peer's inbox); the peer writes each frame straight into one of them
 * through its flat window, then a completion into our inbox, then rings our
 * RX virtual doorbell. NAPI builds the skb around the buffer the peer wrote:
 * no copy on receive.
 * Transmit: the frame (linear part and page fragments) is written straight
 * from the skb into the next buffer the peer posted: the only copy is the
 * transfer itself. A sender never writes a buffer the peer has not posted,
 * and waits (queue stopped, never drops) when none is posted.
 *
 * Ring positions of a session start at epoch ^ peer_epoch, so anything a peer
 * wrote in an earlier session fails the sequence checks.
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

#include "../rdma/ntrdma.h"

#define NTR_RING		NTRDMA_NET_RING
#define NTR_MAX_FRAME		(65536 + VLAN_ETH_HLEN)
#define NTR_MAX_MTU		(NTR_MAX_FRAME - VLAN_ETH_HLEN)
#define NTR_DEFAULT_MTU		NTR_MAX_MTU
#define NTR_HEADROOM		(NET_SKB_PAD + NET_IP_ALIGN)
#define NTR_NAPI_WEIGHT		64

struct ntr_rx_buf {
	void *data;		/* kmalloc'ed, becomes the skb head */
	dma_addr_t dma;
};

struct ntr_counters {
	u64 rx_packets, rx_bytes, tx_packets, tx_bytes;
	u64 rx_dropped, tx_dropped, rx_errors, tx_errors;
	u64 tx_busy, tx_wakes, rx_refill_fail, proto_errors;
	u64 doorbells, rx_dropped_down;
	struct u64_stats_sync syncp;
};

struct ntrdma_net {
	struct ntrdma_dev *ndev;
	struct net_device *netdev;
	struct napi_struct napi;
	bool active;		/* a link session's datapath runs (rtnl) */

	/* receive: buffers we posted to the peer */
	struct ntr_rx_buf rx[NTR_RING];
	u32 rx_post;		/* next position to post */
	u32 rx_cons;		/* next completion to consume */
	u32 rx_buf_len;		/* bytes the peer may write per buffer */
	u32 rx_alloc_len;

	/* Buffers of an ended session: the peer may still write into them
	 * until it has left that session, which we know once it accepts our
	 * next one. Freed then, or at removal (the flat window's translation
	 * is cleared first).
	 */
	struct ntr_rx_buf quar[NTR_RING];
	u32 quar_count;

	/* transmit: the peer's posted buffers */
	u32 tx_pos;		/* next peer buffer to fill */
	u32 tx_published;	/* cq_prod last written to the peer */
	u32 rx_published;	/* post_prod last written to the peer */

	struct ntr_counters rxc;	/* updated in NAPI */
	struct ntr_counters txc;	/* updated under the tx lock */
};

static void ntr_count(struct ntr_counters *c, u64 *field, u64 n)
{
	u64_stats_update_begin(&c->syncp);
	*field += n;
	u64_stats_update_end(&c->syncp);
}

/* ---- receive ---- */

static int ntr_post_one(struct ntrdma_net *net, struct ntrdma_inbox __iomem *pi,
			gfp_t gfp)
{
	struct ntrdma_dev *ndev = net->ndev;
	u32 pos = net->rx_post, idx = ntrdma_ring_idx(pos, NTR_RING);
	struct ntr_rx_buf *b = &net->rx[idx];
	struct ntrdma_wire_rxd d;

	b->data = kmalloc(net->rx_alloc_len, gfp);
	if (!b->data)
		return -ENOMEM;
	b->dma = dma_map_single(ndev->dma_dev, (u8 *)b->data + NTR_HEADROOM,
				net->rx_buf_len, DMA_FROM_DEVICE);
	if (dma_mapping_error(ndev->dma_dev, b->dma)) {
		kfree(b->data);
		b->data = NULL;
		return -EIO;
	}
	d.addr = b->dma;
	d.len = net->rx_buf_len;
	d.seq = pos;
	memcpy_toio(&pi->net_rxd[idx], &d, sizeof(d));
	net->rx_post = pos + 1;
	return 0;
}

/* Session over: posted buffers go to quarantine (see struct ntrdma_net). */
static void ntr_quarantine_rx(struct ntrdma_net *net)
{
	struct ntr_rx_buf *b;
	u32 pos;

	for (pos = net->rx_cons; pos != net->rx_post; pos++) {
		b = &net->rx[ntrdma_ring_idx(pos, NTR_RING)];
		if (WARN_ON_ONCE(net->quar_count >= NTR_RING))
			break;
		net->quar[net->quar_count++] = *b;
		b->data = NULL;
	}
	net->rx_cons = net->rx_post;
}

static void ntr_free_quarantine(struct ntrdma_net *net)
{
	struct ntr_rx_buf *b;

	while (net->quar_count) {
		b = &net->quar[--net->quar_count];
		dma_unmap_single(net->ndev->dma_dev, b->dma, net->rx_buf_len,
				 DMA_FROM_DEVICE);
		kfree(b->data);
		b->data = NULL;
	}
}

/* Post buffers up to a full ring; tell the peer. Returns buffers posted. */
static int ntr_refill(struct ntrdma_net *net, gfp_t gfp)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(net->ndev->pinbox);
	int n = 0;

	if (!pi)
		return 0;
	while ((u32)(net->rx_post - net->rx_cons) < NTR_RING) {
		if (ntr_post_one(net, pi, gfp)) {
			ntr_count(&net->rxc, &net->rxc.rx_refill_fail, 1);
			break;
		}
		n++;
	}
	if (n) {
		u32 old = net->rx_published;

		wmb(); /* descriptors before the producer index */
		iowrite32(net->rx_post, &pi->net_post_prod);
		net->rx_published = net->rx_post;
		mb(); /* publish before reading the sender's wish */
		if (ntrdma_need_event(READ_ONCE(net->ndev->inbox->net_tx_event),
				      net->rx_post, old))
			ntrdma_vdb_ring(net->ndev, NTRDMA_VDB_NET_TXWAKE);
	}
	return n;
}

static bool ntr_rx_pending(struct ntrdma_net *net)
{
	return READ_ONCE(net->ndev->inbox->net_cq_prod) != net->rx_cons;
}

static void ntr_rx_one(struct ntrdma_net *net, const struct ntrdma_wire_cqe *c,
		       struct ntr_rx_buf *b)
{
	struct net_device *dev = net->netdev;
	struct sk_buff *skb;

	dma_unmap_single(net->ndev->dma_dev, b->dma, net->rx_buf_len,
			 DMA_FROM_DEVICE);
	skb = build_skb(b->data, 0);
	if (!skb) {
		kfree(b->data);
		b->data = NULL;
		ntr_count(&net->rxc, &net->rxc.rx_dropped, 1);
		return;
	}
	b->data = NULL;
	skb_reserve(skb, NTR_HEADROOM);
	skb_put(skb, c->len);

	if (c->flags & NTRDMA_CQE_CSUM_OK) {
		if (c->csum_start || c->csum_offset) {
			/* Sender left the checksum to "hardware": finish it
			 * only if this frame leaves the host again.
			 */
			if (!skb_partial_csum_set(skb, c->csum_start,
						  c->csum_offset)) {
				ntr_count(&net->rxc, &net->rxc.rx_errors, 1);
				kfree_skb(skb);
				return;
			}
		} else {
			skb->ip_summed = CHECKSUM_UNNECESSARY;
		}
	}
	if (c->flags & (NTRDMA_CQE_GSO_TCPV4 | NTRDMA_CQE_GSO_TCPV6)) {
		skb_shinfo(skb)->gso_size = c->gso_size;
		skb_shinfo(skb)->gso_type = SKB_GSO_DODGY |
			(c->flags & NTRDMA_CQE_GSO_TCPV6 ? SKB_GSO_TCPV6 :
			 SKB_GSO_TCPV4);
		skb_shinfo(skb)->gso_segs = 0;
	}
	skb->protocol = eth_type_trans(skb, dev);
	u64_stats_update_begin(&net->rxc.syncp);
	net->rxc.rx_packets++;
	net->rxc.rx_bytes += c->len;
	u64_stats_update_end(&net->rxc.syncp);
	napi_gro_receive(&net->napi, skb);
}

static int ntr_poll(struct napi_struct *napi, int budget)
{
	struct ntrdma_net *net = container_of(napi, struct ntrdma_net, napi);
	struct ntrdma_inbox *in = net->ndev->inbox;
	struct ntrdma_wire_cqe c;
	struct ntr_rx_buf *b;
	int done = 0;
	u32 prod, idx;

	prod = READ_ONCE(in->net_cq_prod);
	if (!ntrdma_ring_avail_ok(prod, net->rx_cons,
				  net->rx_post - net->rx_cons)) {
		/* Stale or hostile producer: take nothing from it. */
		ntr_count(&net->rxc, &net->rxc.proto_errors, 1);
		prod = net->rx_cons;
	}
	rmb(); /* the producer index before the completions */

	while (done < budget && net->rx_cons != prod) {
		idx = ntrdma_ring_idx(net->rx_cons, NTR_RING);
		memcpy(&c, &in->net_cqe[idx], sizeof(c));
		if (ntrdma_wire_check_cqe(&c, net->rx_cons, net->rx_buf_len)) {
			ntr_count(&net->rxc, &net->rxc.proto_errors, 1);
			ntrdma_link_proto_error(net->ndev, "bad net completion");
			break;
		}
		b = &net->rx[idx];
		if (netif_running(net->netdev)) {
			ntr_rx_one(net, &c, b);
		} else {
			/* In flight when we closed: the interface is down. */
			dma_unmap_single(net->ndev->dma_dev, b->dma,
					 net->rx_buf_len, DMA_FROM_DEVICE);
			kfree(b->data);
			b->data = NULL;
			ntr_count(&net->rxc, &net->rxc.rx_dropped_down, 1);
		}
		net->rx_cons++;
		done++;
	}
	if (done)
		ntr_refill(net, GFP_ATOMIC);

	if (done < budget && napi_complete_done(napi, done)) {
		struct ntrdma_inbox __iomem *pi = READ_ONCE(net->ndev->pinbox);

		/* Ask for a doorbell on the next completion, then re-check. */
		if (pi)
			iowrite32(net->rx_cons, &pi->net_rx_event);
		mb(); /* the request before the re-check */
		if (ntr_rx_pending(net))
			napi_schedule(napi);
	}
	return done;
}

static void ntr_vdb_rx(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_net *net = ctx;

	napi_schedule(&net->napi);
}

/* Carrier: a session runs, we are up, and so is the peer's netdev. */
static void ntr_update_carrier(struct ntrdma_net *net)
{
	struct net_device *dev = net->netdev;

	if (READ_ONCE(net->active) && netif_running(dev) &&
	    READ_ONCE(net->ndev->inbox->net_peer_open) == 1) {
		if (!netif_carrier_ok(dev))
			netif_carrier_on(dev);
		netif_wake_queue(dev);
	} else if (netif_carrier_ok(dev)) {
		netif_carrier_off(dev);
		netif_stop_queue(dev);
	}
}

static void ntr_vdb_state(struct ntrdma_dev *ndev, void *ctx)
{
	ntr_update_carrier(ctx);
}

/* Tell the peer whether to send to us. */
static void ntr_publish_open(struct ntrdma_net *net)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(net->ndev->pinbox);

	if (!READ_ONCE(net->active) || !pi)
		return;
	iowrite32(netif_running(net->netdev) ? 1 : 0, &pi->net_peer_open);
	ntrdma_vdb_ring(net->ndev, NTRDMA_VDB_NET_STATE);
}

static void ntr_vdb_txwake(struct ntrdma_dev *ndev, void *ctx)
{
	struct ntrdma_net *net = ctx;

	if (netif_queue_stopped(net->netdev) && netif_carrier_ok(net->netdev)) {
		ntr_count(&net->txc, &net->txc.tx_wakes, 1);
		netif_wake_queue(net->netdev);
	}
}

/* ---- transmit ---- */

/* Is a posted peer buffer available? Fills @d when it is. */
static bool ntr_tx_buf(struct ntrdma_net *net, struct ntrdma_wire_rxd *d)
{
	struct ntrdma_inbox *in = net->ndev->inbox;
	u32 prod = READ_ONCE(in->net_post_prod);

	if (prod == net->tx_pos ||
	    !ntrdma_ring_avail_ok(prod, net->tx_pos, NTR_RING))
		return false;
	rmb(); /* the producer index before the descriptor */
	memcpy(d, &in->net_rxd[ntrdma_ring_idx(net->tx_pos, NTR_RING)],
	       sizeof(*d));
	return d->seq == net->tx_pos;
}

static void ntr_tx_copy(void __iomem *dst, struct sk_buff *skb)
{
	unsigned int off = skb_headlen(skb);
	int i;

	memcpy_toio(dst, skb->data, off);
	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		const skb_frag_t *f = &skb_shinfo(skb)->frags[i];
		u32 len = skb_frag_size(f), done = 0, poff, chunk;
		struct page *p;
		void *va;

		while (done < len) {
			p = skb_frag_page(f) +
			    ((skb_frag_off(f) + done) >> PAGE_SHIFT);
			poff = (skb_frag_off(f) + done) & ~PAGE_MASK;
			chunk = min_t(u32, len - done, PAGE_SIZE - poff);
			va = kmap_local_page(p);
			memcpy_toio(dst + off, va + poff, chunk);
			kunmap_local(va);
			off += chunk;
			done += chunk;
		}
	}
}

static void ntr_tx_kick(struct ntrdma_net *net)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(net->ndev->pinbox);

	u32 old = net->tx_published;

	if (!pi || old == net->tx_pos)
		return;
	wmb(); /* data and completions before the producer index */
	iowrite32(net->tx_pos, &pi->net_cq_prod);
	net->tx_published = net->tx_pos;
	mb(); /* publish before reading the receiver's wish */
	if (ntrdma_need_event(READ_ONCE(net->ndev->inbox->net_rx_event),
			      net->tx_pos, old)) {
		ntrdma_vdb_ring(net->ndev, NTRDMA_VDB_NET_RX);
		ntr_count(&net->txc, &net->txc.doorbells, 1);
	}
}

static netdev_tx_t ntr_start_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct ntrdma_dev *ndev = net->ndev;
	struct ntrdma_inbox __iomem *pi = READ_ONCE(ndev->pinbox);
	struct ntrdma_wire_rxd d;
	struct ntrdma_wire_cqe c = {};
	int rc;

	if (!READ_ONCE(net->active) || !pi ||
	    READ_ONCE(ndev->inbox->net_peer_open) != 1) {
		/* Carrier just went off: the stack would drop it too. */
		ntr_count(&net->txc, &net->txc.tx_dropped, 1);
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}

	if (!ntr_tx_buf(net, &d)) {
		netif_stop_queue(dev);
		/* Ask for TXWAKE when the peer posts buffer tx_pos. */
		iowrite32(net->tx_pos, &pi->net_tx_event);
		mb(); /* stop and ask before re-checking for a concurrent post */
		if (!ntr_tx_buf(net, &d)) {
			ntr_count(&net->txc, &net->txc.tx_busy, 1);
			ntr_tx_kick(net);
			return NETDEV_TX_BUSY;
		}
		netif_start_queue(dev);
	}

	rc = ntrdma_wire_check_rxd(&d, net->tx_pos, 1, NTR_MAX_FRAME,
				   ndev->flat_size);
	if (rc || d.len < skb->len) {
		/* Never write outside what the peer posted. */
		ntr_count(&net->txc, &net->txc.tx_errors, 1);
		if (rc) {
			ntr_count(&net->txc, &net->txc.proto_errors, 1);
			ntrdma_link_proto_error(ndev, "bad net receive buffer");
		} else {
			net_warn_ratelimited("%s: %u-byte frame, peer buffers hold %u: dropped\n",
					     dev->name, skb->len, d.len);
		}
		dev_kfree_skb_any(skb);
		return NETDEV_TX_OK;
	}

	ntr_tx_copy(ndev->flat + d.addr, skb);

	c.len = skb->len;
	c.seq = net->tx_pos;
	if (skb->ip_summed == CHECKSUM_PARTIAL) {
		c.flags |= NTRDMA_CQE_CSUM_OK;
		c.csum_start = skb_checksum_start_offset(skb);
		c.csum_offset = skb->csum_offset;
	} else if (skb->ip_summed == CHECKSUM_UNNECESSARY) {
		c.flags |= NTRDMA_CQE_CSUM_OK;
	}
	if (skb_is_gso(skb)) {
		/* TSO: the whole super-frame crosses; the receiver keeps it
		 * as one GSO skb (segmented only if it leaves that host).
		 */
		c.flags |= skb_shinfo(skb)->gso_type & SKB_GSO_TCPV6 ?
			   NTRDMA_CQE_GSO_TCPV6 : NTRDMA_CQE_GSO_TCPV4;
		c.gso_size = skb_shinfo(skb)->gso_size;
	}
	memcpy_toio(&pi->net_cqe[ntrdma_ring_idx(net->tx_pos, NTR_RING)], &c,
		    sizeof(c));
	net->tx_pos++;

	u64_stats_update_begin(&net->txc.syncp);
	net->txc.tx_packets++;
	net->txc.tx_bytes += skb->len;
	u64_stats_update_end(&net->txc.syncp);
	dev_consume_skb_any(skb);

	if (!netdev_xmit_more() || netif_queue_stopped(dev))
		ntr_tx_kick(net);
	return NETDEV_TX_OK;
}

/* ---- datapath: one per link session (rtnl held) ---- */

static void ntr_session_start(struct ntrdma_net *net)
{
	struct ntrdma_dev *ndev = net->ndev;
	u32 base = ndev->epoch ^ ndev->peer_epoch;

	if (net->active || !ntrdma_link_is_up(ndev))
		return;
	/* The peer accepted this session: it left the previous one. */
	ntr_free_quarantine(net);
	net->rx_post = base;
	net->rx_cons = base;
	net->tx_pos = base;
	net->tx_published = base;
	net->rx_published = base;
	/* Our completion producer starts at base before the peer can see a
	 * buffer of this session; its post producer is the peer's to set.
	 */
	WRITE_ONCE(ndev->inbox->net_cq_prod, base);
	WRITE_ONCE(ndev->inbox->net_tx_event, base);
	/* The first completion of the session rings (before any post). */
	iowrite32(base, &ndev->pinbox->net_rx_event);
	WRITE_ONCE(net->active, true);
	ntr_refill(net, GFP_KERNEL);
	napi_enable(&net->napi);
	ntr_publish_open(net);
	ntr_update_carrier(net);
	napi_schedule(&net->napi);
}

static void ntr_session_stop(struct ntrdma_net *net)
{
	if (!net->active)
		return;
	WRITE_ONCE(net->active, false);
	netif_carrier_off(net->netdev);
	netif_tx_disable(net->netdev);
	napi_disable(&net->napi);
	ntr_quarantine_rx(net);
}

void ntrdma_net_link_up(struct ntrdma_dev *ndev)
{
	if (!ndev->net)
		return;
	rtnl_lock();
	ntr_session_start(ndev->net);
	rtnl_unlock();
}

void ntrdma_net_link_down(struct ntrdma_dev *ndev)
{
	if (!ndev->net)
		return;
	/* Carrier first: it needs no lock, and rtnl may be busy for long. */
	netif_carrier_off(ndev->net->netdev);
	rtnl_lock();
	ntr_session_stop(ndev->net);
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

static void ntr_get_stats64(struct net_device *dev,
			    struct rtnl_link_stats64 *s)
{
	struct ntrdma_net *net = netdev_priv(dev);
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&net->rxc.syncp);
		s->rx_packets = net->rxc.rx_packets;
		s->rx_bytes = net->rxc.rx_bytes;
		s->rx_dropped = net->rxc.rx_dropped;
		s->rx_errors = net->rxc.rx_errors;
	} while (u64_stats_fetch_retry(&net->rxc.syncp, start));
	do {
		start = u64_stats_fetch_begin(&net->txc.syncp);
		s->tx_packets = net->txc.tx_packets;
		s->tx_bytes = net->txc.tx_bytes;
		s->tx_dropped = net->txc.tx_dropped;
		s->tx_errors = net->txc.tx_errors;
	} while (u64_stats_fetch_retry(&net->txc.syncp, start));
}

static const struct net_device_ops ntr_netdev_ops = {
	.ndo_open		= ntr_open,
	.ndo_stop		= ntr_close,
	.ndo_start_xmit		= ntr_start_xmit,
	.ndo_get_stats64	= ntr_get_stats64,
	.ndo_validate_addr	= eth_validate_addr,
	.ndo_set_mac_address	= eth_mac_addr,
};

/* ---- ethtool ---- */

static const char ntr_stat_names[][ETH_GSTRING_LEN] = {
	"rx_packets", "rx_bytes", "rx_dropped", "rx_errors",
	"rx_refill_fail", "rx_proto_errors", "rx_dropped_while_down",
	"tx_packets", "tx_bytes", "tx_dropped", "tx_errors",
	"tx_busy", "tx_wakes", "tx_doorbells", "tx_proto_errors",
};

static void ntr_get_drvinfo(struct net_device *dev,
			    struct ethtool_drvinfo *info)
{
	struct ntrdma_net *net = netdev_priv(dev);

	strscpy(info->driver, "ntrdma", sizeof(info->driver));
	strscpy(info->bus_info, dev_name(&net->ndev->ntb->dev),
		sizeof(info->bus_info));
}

static int ntr_get_sset_count(struct net_device *dev, int sset)
{
	return sset == ETH_SS_STATS ? ARRAY_SIZE(ntr_stat_names) : -EOPNOTSUPP;
}

static void ntr_get_strings(struct net_device *dev, u32 sset, u8 *data)
{
	if (sset == ETH_SS_STATS)
		memcpy(data, ntr_stat_names, sizeof(ntr_stat_names));
}

static void ntr_get_ethtool_stats(struct net_device *dev,
				  struct ethtool_stats *stats, u64 *data)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct ntr_counters *r = &net->rxc, *t = &net->txc;
	unsigned int start;

	do {
		start = u64_stats_fetch_begin(&r->syncp);
		data[0] = r->rx_packets;
		data[1] = r->rx_bytes;
		data[2] = r->rx_dropped;
		data[3] = r->rx_errors;
		data[4] = r->rx_refill_fail;
		data[5] = r->proto_errors;
		data[6] = r->rx_dropped_down;
	} while (u64_stats_fetch_retry(&r->syncp, start));
	do {
		start = u64_stats_fetch_begin(&t->syncp);
		data[7] = t->tx_packets;
		data[8] = t->tx_bytes;
		data[9] = t->tx_dropped;
		data[10] = t->tx_errors;
		data[11] = t->tx_busy;
		data[12] = t->tx_wakes;
		data[13] = t->doorbells;
		data[14] = t->proto_errors;
	} while (u64_stats_fetch_retry(&t->syncp, start));
}

static void ntr_get_channels(struct net_device *dev,
			     struct ethtool_channels *ch)
{
	ch->max_combined = 1;
	ch->combined_count = 1;
}

static const struct ethtool_ops ntr_ethtool_ops = {
	.get_drvinfo		= ntr_get_drvinfo,
	.get_link		= ethtool_op_get_link,
	.get_sset_count		= ntr_get_sset_count,
	.get_strings		= ntr_get_strings,
	.get_ethtool_stats	= ntr_get_ethtool_stats,
	.get_channels		= ntr_get_channels,
};

/* ---- add/remove ---- */

/* A stable locally administered MAC: host name, NTB device and port. */
static void ntr_set_mac(struct ntrdma_net *net)
{
	struct ntb_dev *ntb = net->ndev->ntb;
	const char *node = utsname()->nodename;
	u8 mac[ETH_ALEN];
	u32 h;

	h = jhash(node, strnlen(node, __NEW_UTS_LEN), 0);
	h = jhash(dev_name(&ntb->dev), strlen(dev_name(&ntb->dev)), h);
	h = jhash_1word(ntb_port_number(ntb), h);
	mac[0] = 0x02;	/* locally administered, unicast */
	mac[1] = 0x4e;	/* 'N' */
	mac[2] = h >> 24;
	mac[3] = h >> 16;
	mac[4] = h >> 8;
	mac[5] = h;
	eth_hw_addr_set(net->netdev, mac);
}

int ntrdma_net_add(struct ntrdma_dev *ndev)
{
	struct net_device *dev;
	struct ntrdma_net *net;
	int rc;

	dev = alloc_netdev(sizeof(*net), "ntr%d", NET_NAME_ENUM, ether_setup);
	if (!dev)
		return -ENOMEM;
	net = netdev_priv(dev);
	net->ndev = ndev;
	net->netdev = dev;
	net->rx_buf_len = NTR_MAX_FRAME;
	net->rx_alloc_len = SKB_DATA_ALIGN(NTR_HEADROOM + net->rx_buf_len) +
			    SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	u64_stats_init(&net->rxc.syncp);
	u64_stats_init(&net->txc.syncp);

	SET_NETDEV_DEV(dev, &ndev->ntb->dev);
	dev->netdev_ops = &ntr_netdev_ops;
	dev->ethtool_ops = &ntr_ethtool_ops;
	dev->min_mtu = ETH_MIN_MTU;
	dev->max_mtu = NTR_MAX_MTU;
	dev->mtu = NTR_DEFAULT_MTU;
	dev->hw_features = NETIF_F_SG | NETIF_F_HW_CSUM | NETIF_F_HIGHDMA |
			   NETIF_F_RXCSUM | NETIF_F_TSO | NETIF_F_TSO6;
	dev->features = dev->hw_features;
	dev->priv_flags |= IFF_LIVE_ADDR_CHANGE;
	ntr_set_mac(net);
	netif_napi_add_weight(dev, &net->napi, ntr_poll, NTR_NAPI_WEIGHT);
	netif_carrier_off(dev);

	ndev->net = net;
	rc = ntrdma_vdb_register(ndev, NTRDMA_VDB_NET_RX, ntr_vdb_rx, net);
	if (!rc)
		rc = ntrdma_vdb_register(ndev, NTRDMA_VDB_NET_TXWAKE,
					 ntr_vdb_txwake, net);
	if (!rc)
		rc = ntrdma_vdb_register(ndev, NTRDMA_VDB_NET_STATE,
					 ntr_vdb_state, net);
	if (rc)
		goto err;
	rc = register_netdev(dev);
	if (rc)
		goto err;
	return 0;

err:
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_RX);
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_TXWAKE);
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_STATE);
	ndev->net = NULL;
	netif_napi_del(&net->napi);
	free_netdev(dev);
	return rc;
}

void ntrdma_net_del(struct ntrdma_dev *ndev)
{
	struct ntrdma_net *net = ndev->net;

	if (!net)
		return;
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_RX);
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_TXWAKE);
	ntrdma_vdb_unregister(ndev, NTRDMA_VDB_NET_STATE);
	unregister_netdev(net->netdev);
	ndev->net = NULL;
	/* The session ended and the window translation is gone. */
	ntr_quarantine_rx(net);
	ntr_free_quarantine(net);
	netif_napi_del(&net->napi);
	free_netdev(net->netdev);
}
