// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA Ethernet face: XDP in native mode (XDP_PASS, XDP_DROP, XDP_TX,
 * XDP_REDIRECT, and ndo_xdp_xmit as a redirect target).
 *
 * Receive: with a program attached, NAPI copies each frame out of the
 * buffer the peer wrote into a page of the queue's page_pool, posts the
 * buffer again, and runs the program on the copy, which the peer can no
 * longer change. XDP_PASS builds the skb around that page.
 * A frame must fit one page: while a program is attached the MTU is at
 * most NTR_XDP_MAX_MTU, and queue 0's state word asks the peer for whole
 * frames with complete checksums (it segments and checksums them itself,
 * see ntr_features_check()). A frame that does not fit (one sent before
 * the peer knew, or longer than our MTU from a peer with a larger one) is
 * dropped and counted as rx_xdp_unfit.
 * Transmit: XDP_TX frames go back on the queue they came in on, frames
 * redirected to us on the queue of the CPU's index. Their send cookie is
 * the xdp_frame tagged with NTR_XDP_TAG: send_done returns the frame to
 * its owner and leaves the skb path's byte queue limits alone.
 */

#include <linux/bpf.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#ifdef NTRDMA_PAGE_POOL_HELPERS
#include <net/page_pool/helpers.h>
#else
#include <net/page_pool.h>
#endif
#include <net/xdp.h>
#include <trace/events/xdp.h>

#include "ntrdma_net.h"

#define NTR_XDP_HEADROOM	XDP_PACKET_HEADROOM
#define NTR_XDP_MAX_FRAME	(PAGE_SIZE - NTR_XDP_HEADROOM - \
				 SKB_DATA_ALIGN(sizeof(struct skb_shared_info)))
#define NTR_XDP_MAX_MTU		(NTR_XDP_MAX_FRAME - VLAN_ETH_HLEN)
#define NTR_XDP_POOL		256	/* pages per queue's pool */

static void ntr_xdp_count(struct ntr_queue *q, enum ntr_xdp_stat s)
{
	u64_stats_update_begin(&q->xdpc.syncp);
	q->xdpc.v[s]++;
	u64_stats_update_end(&q->xdpc.syncp);
}

/**
 * ntr_xdp_queue_init() - the page pool and XDP receive queue of @q
 * @q: the queue; its NAPI context is added
 *
 * Return: 0 or a negative errno (nothing left to undo).
 */
int ntr_xdp_queue_init(struct ntr_queue *q)
{
	struct page_pool_params pp = {
		.pool_size = NTR_XDP_POOL,
		.nid = NUMA_NO_NODE,
		.dev = ntrdma_dev_dma_device(q->net->ndev),
	};
	int rc;

	u64_stats_init(&q->xdpc.syncp);
	q->xdp_pp = page_pool_create(&pp);
	if (IS_ERR(q->xdp_pp)) {
		rc = PTR_ERR(q->xdp_pp);
		q->xdp_pp = NULL;
		return rc;
	}
	rc = xdp_rxq_info_reg(&q->xdp_rxq, q->net->netdev, q->idx,
			      q->napi.napi_id);
	if (!rc)
		rc = xdp_rxq_info_reg_mem_model(&q->xdp_rxq, MEM_TYPE_PAGE_POOL,
						q->xdp_pp);
	if (rc)
		ntr_xdp_queue_fini(q);
	return rc;
}

/* NAPI deleted or never enabled: no frame of the pool is in NAPI's hands. */
void ntr_xdp_queue_fini(struct ntr_queue *q)
{
	if (xdp_rxq_info_is_reg(&q->xdp_rxq))
		xdp_rxq_info_unreg(&q->xdp_rxq);
	if (q->xdp_pp)
		page_pool_destroy(q->xdp_pp);
	q->xdp_pp = NULL;
}

/* A frame the program can take: linear, whole, its checksum complete. */
static bool ntr_xdp_fits(const struct ntrdma_tqp_rcomp *c,
			 const struct ntrdma_net_meta *m)
{
	return !(m->flags & (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6)) &&
	       !m->csum_start && !m->csum_offset && c->len <= NTR_XDP_MAX_FRAME;
}

static struct xdp_frame *ntr_xdp_frame(void *cookie)
{
	return (void *)((unsigned long)cookie & ~NTR_XDP_TAG);
}

/* One frame on @q's transport queue; send_done returns it. */
static int ntr_xdp_send(struct ntr_queue *q, struct xdp_frame *f, bool more)
{
	struct ntrdma_tqp_sge sg = {
		.page = virt_to_page(f->data),
		.off = offset_in_page(f->data),
		.len = f->len,
	};

	return ntrdma_tqp_send(q->tqp, &sg, 1, f->len, 0,
			       (void *)((unsigned long)f | NTR_XDP_TAG), more);
}

/**
 * ntr_xdp_send_done() - an XDP send of @q finished (send_done)
 * @q: the queue it went out on
 * @cookie: the tagged frame
 * @len: its length
 * @status: 0 or the send's error
 *
 * Any context but hard irq; several CPUs may send on one queue, so the
 * counters are atomic. The frame goes back to its owner.
 */
void ntr_xdp_send_done(struct ntr_queue *q, void *cookie, u32 len,
		       int status)
{
	if (status) {
		atomic64_inc(&q->xdp_done_errors);
	} else {
		atomic64_inc(&q->xdp_done);
		atomic64_add(len, &q->xdp_done_bytes);
	}
	xdp_return_frame(ntr_xdp_frame(cookie));
}

/* XDP_TX: back to the peer on the queue it came in on (or one both have). */
static bool ntr_xdp_tx(struct ntr_queue *q, struct xdp_buff *xdp)
{
	u32 nq = READ_ONCE(q->net->tx_nq);
	struct xdp_frame *f;

	if (!nq)
		return false;
	f = xdp_convert_buff_to_frame(xdp);
	return f && !ntr_xdp_send(&q->net->q[q->idx % nq], f, false);
}

static struct sk_buff *ntr_xdp_pass(struct ntr_queue *q, struct xdp_buff *xdp,
				    struct page *page)
{
	struct sk_buff *skb = build_skb(xdp->data_hard_start, PAGE_SIZE);

	if (!skb) {
		page_pool_recycle_direct(q->xdp_pp, page);
		ntr_count(&q->rxc, &q->rxc.dropped, 1);
		return NULL;
	}
	skb_mark_for_recycle(skb);
	skb_reserve(skb, xdp->data - xdp->data_hard_start);
	skb_put(skb, xdp->data_end - xdp->data);
	ntr_xdp_count(q, NTR_XDP_PASS);
	return skb;
}

/* Every action but XDP_PASS: the page is sent, redirected or recycled. */
static void ntr_xdp_act(struct ntr_queue *q, struct bpf_prog *prog,
			struct xdp_buff *xdp, struct page *page, u32 act)
{
	struct net_device *dev = q->net->netdev;

	switch (act) {
	case XDP_TX:
		if (ntr_xdp_tx(q, xdp)) {
			ntr_xdp_count(q, NTR_XDP_TX);
			return;
		}
		break;
	case XDP_REDIRECT:
		if (!xdp_do_redirect(dev, xdp, prog)) {
			q->xdp_flush = true;
			ntr_xdp_count(q, NTR_XDP_REDIRECT);
			return;
		}
		break;
	case XDP_DROP:
		page_pool_recycle_direct(q->xdp_pp, page);
		ntr_xdp_count(q, NTR_XDP_DROP);
		return;
	default:
		bpf_warn_invalid_xdp_action(dev, prog, act);
		fallthrough;
	case XDP_ABORTED:
		break;
	}
	trace_xdp_exception(dev, prog, act);
	page_pool_recycle_direct(q->xdp_pp, page);
	ntr_xdp_count(q, NTR_XDP_ABORTED);
}

/**
 * ntr_xdp_rx() - run the attached program on one received frame (NAPI)
 * @q: the queue
 * @prog: its program (under rcu_read_lock())
 * @c: the frame's completion
 * @b: the buffer the peer wrote it into; posted again here
 * @m: its checked meta word
 *
 * Return: the skb of an XDP_PASS frame, else NULL (the frame is consumed
 * and counted).
 */
struct sk_buff *ntr_xdp_rx(struct ntr_queue *q, struct bpf_prog *prog,
			   const struct ntrdma_tqp_rcomp *c,
			   struct ntr_rx_buf *b,
			   const struct ntrdma_net_meta *m)
{
	struct xdp_buff xdp;
	struct page *page;
	u32 act;

	if (!ntr_xdp_fits(c, m)) {
		ntr_repost(q, b);
		ntr_xdp_count(q, NTR_XDP_UNFIT);
		return NULL;
	}
	page = page_pool_dev_alloc_pages(q->xdp_pp);
	if (!page) {
		ntr_repost(q, b);
		ntr_count(&q->rxc, &q->rxc.dropped, 1);
		return NULL;
	}
	q->net->rx_ops->copy(q, c, b, page_address(page) + NTR_XDP_HEADROOM);
	xdp_init_buff(&xdp, PAGE_SIZE, &q->xdp_rxq);
	xdp_prepare_buff(&xdp, page_address(page), NTR_XDP_HEADROOM, c->len,
			 false);
	act = bpf_prog_run_xdp(prog, &xdp);
	if (act == XDP_PASS)
		return ntr_xdp_pass(q, &xdp, page);
	ntr_xdp_act(q, prog, &xdp, page, act);
	return NULL;
}

/* End of a NAPI poll: frames redirected during it go out. */
void ntr_xdp_poll_end(struct ntr_queue *q)
{
	if (!q->xdp_flush)
		return;
	q->xdp_flush = false;
	xdp_do_flush();
}

/**
 * ntr_xdp_xmit() - ndo_xdp_xmit: frames redirected to this netdev
 * @dev: the netdev
 * @n: how many frames
 * @frames: the frames
 * @flags: XDP_XMIT_FLUSH or 0 (the doorbell goes at the end either way)
 *
 * Return: how many were sent (the caller returns the others), or a
 * negative errno when none can be.
 */
int ntr_xdp_xmit(struct net_device *dev, int n, struct xdp_frame **frames,
		 u32 flags)
{
	struct ntrdma_net *net = netdev_priv(dev);
	u32 nq = READ_ONCE(net->tx_nq);
	struct ntr_queue *q;
	int i;

	if (flags & ~XDP_XMIT_FLAGS_MASK)
		return -EINVAL;
	if (!READ_ONCE(net->active) || !nq)
		return -ENETDOWN;
	q = &net->q[smp_processor_id() % nq];
	for (i = 0; i < n; i++)
		if (xdp_frame_has_frags(frames[i]) ||	/* one buffer only */
		    ntr_xdp_send(q, frames[i], true))
			break;
	ntrdma_tqp_send_flush(q->tqp);
	atomic64_add(i, &q->xdp_xmit);
	atomic64_add(n - i, &q->xdp_xmit_errors);
	return i;
}

/* XDP frames sent, their bytes and failed sends, all queues (stats64). */
void ntr_xdp_tx_totals(struct ntrdma_net *net, u64 *packets, u64 *bytes,
		       u64 *errors)
{
	int i;

	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		*packets += atomic64_read(&net->q[i].xdp_done);
		*bytes += atomic64_read(&net->q[i].xdp_done_bytes);
		*errors += atomic64_read(&net->q[i].xdp_done_errors);
	}
}

/* MTU @mtu allowed with the program attached, if any (rtnl). */
bool ntr_xdp_mtu_ok(struct ntrdma_net *net, int mtu)
{
	if (!rtnl_dereference(net->xdp_prog) || mtu <= NTR_XDP_MAX_MTU)
		return true;
	netdev_warn(net->netdev, "MTU %d is too large with XDP: at most %lu\n",
		    mtu, NTR_XDP_MAX_MTU);
	return false;
}

/**
 * ntr_xdp_bpf() - ndo_bpf: attach or detach a program (rtnl)
 * @dev: the netdev
 * @bpf: the command; only XDP_SETUP_PROG
 *
 * The program takes effect at the next frame of every queue; the peer is
 * told at once to send whole frames (or, detached, that it may send GSO
 * frames again).
 *
 * Return: 0, -EINVAL for other commands or an MTU above NTR_XDP_MAX_MTU.
 */
int ntr_xdp_bpf(struct net_device *dev, struct netdev_bpf *bpf)
{
	struct ntrdma_net *net = netdev_priv(dev);
	struct bpf_prog *old;

	if (bpf->command != XDP_SETUP_PROG)
		return -EINVAL;
	if (bpf->prog && dev->mtu > NTR_XDP_MAX_MTU) {
		NL_SET_ERR_MSG_MOD(bpf->extack,
				   "MTU too large for XDP: at most 3502 with 4 KiB pages");
		netdev_warn(dev, "XDP needs an MTU of at most %lu (now %u)\n",
			    NTR_XDP_MAX_MTU, dev->mtu);
		return -EINVAL;
	}
	old = rtnl_dereference(net->xdp_prog);
	rcu_assign_pointer(net->xdp_prog, bpf->prog);
	if (old)
		bpf_prog_put(old);
	if (!old != !bpf->prog)
		ntr_publish_open(net);
	return 0;
}

/* What the kernel may ask of us (kernels that list XDP features). */
void ntr_xdp_features(struct net_device *dev)
{
#ifdef NTRDMA_XDP_FEATURES
	xdp_set_features_flag(dev, NETDEV_XDP_ACT_BASIC |
			      NETDEV_XDP_ACT_REDIRECT |
			      NETDEV_XDP_ACT_NDO_XMIT);
#endif
}

/* ethtool -S names, in ntr_xdp_stats() order. */
void ntr_xdp_strings(u8 **p)
{
	static const char * const names[] = {
		[NTR_XDP_PASS] = "rx_xdp_pass",
		[NTR_XDP_DROP] = "rx_xdp_drop",
		[NTR_XDP_TX] = "rx_xdp_tx",
		[NTR_XDP_REDIRECT] = "rx_xdp_redirect",
		[NTR_XDP_ABORTED] = "rx_xdp_aborted",
		[NTR_XDP_UNFIT] = "rx_xdp_unfit",
	};
	int i;

	for (i = 0; i < NTR_XDP_NSTATS; i++)
		ethtool_puts(p, names[i]);
	ethtool_puts(p, "tx_xdp_xmit");
	ethtool_puts(p, "tx_xdp_xmit_errors");
}

/* The XDP counters of all queues added up; the next slot of @data. */
u64 *ntr_xdp_stats(struct ntrdma_net *net, u64 *data)
{
	u64 sum[NTR_XDP_STATS] = {};
	struct ntr_queue *q;
	unsigned int start;
	int i, k;

	for (i = 0; i < NTR_MAX_QUEUES; i++) {
		q = &net->q[i];
		do {
			start = u64_stats_fetch_begin(&q->xdpc.syncp);
			for (k = 0; k < NTR_XDP_NSTATS; k++)
				data[k] = q->xdpc.v[k];
		} while (u64_stats_fetch_retry(&q->xdpc.syncp, start));
		for (k = 0; k < NTR_XDP_NSTATS; k++)
			sum[k] += data[k];
		sum[NTR_XDP_NSTATS] += atomic64_read(&q->xdp_xmit);
		sum[NTR_XDP_NSTATS + 1] += atomic64_read(&q->xdp_xmit_errors);
	}
	memcpy(data, sum, sizeof(sum));
	return data + NTR_XDP_STATS;
}
