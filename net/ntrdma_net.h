/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA Ethernet face: what its files share (ntrdma_net.c: the netdev,
 * its rings and ethtool; ntrdma_net_xdp.c: XDP).
 */
#ifndef NTRDMA_NET_H
#define NTRDMA_NET_H

#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <linux/u64_stats_sync.h>
#include <net/xdp.h>

#include "ntrdma_engine.h"
#include "ntrdma_net_wire.h"

#ifndef NTRDMA_ETHTOOL_PUTS
/* Kernels before 6.8: ethtool_puts() as the kernel has it since. */
static inline void ethtool_puts(u8 **data, const char *str)
{
	strscpy(*data, str, ETH_GSTRING_LEN);
	*data += ETH_GSTRING_LEN;
}
#endif

#define NTR_RING		NTRDMA_TQP_RING
#define NTR_MAX_FRAME		(65536 + VLAN_ETH_HLEN)
#define NTR_MAX_MTU		(NTR_MAX_FRAME - VLAN_ETH_HLEN)
#define NTR_DEFAULT_MTU		NTR_MAX_MTU
#define NTR_HEADROOM		(NET_SKB_PAD + NET_IP_ALIGN)
#define NTR_NAPI_WEIGHT		64
#define NTR_REFILL_RETRY_MS	20
#define NTR_MAX_QUEUES		NTRDMA_NET_QUEUES_MAX
#define NTR_WINDOW_SHARE	60	/* percent of the window (windowed) */
#define NTR_RX_POOL		(NTR_RING / 2)	/* idle pages a queue's pool keeps */

/* rb.va: flat mode a page of the queue's rx_pp, the skb head to be
 * (rb.dma: past the headroom), windowed mode the piece of the window;
 * rb.addr: what the peer is told.
 */
struct ntr_rx_buf {
	struct ntrdma_rxbuf rb;
	bool guarded;		/* test builds: canary bytes around it */
};

struct ntr_queue;
struct ntrdma_tqp_rcomp;

/* Receive buffers of the engine's mode (chosen at the first session): flat
 * mode receives into pool pages that become skb heads (no copy), windowed
 * mode copies each frame out of its piece of the window and posts the
 * piece again.
 */
struct ntr_rx_ops {
	int (*alloc)(struct ntr_queue *q, struct ntr_rx_buf *b, gfp_t gfp);
	void (*free)(struct ntr_queue *q, struct ntr_rx_buf *b);
	/* the frame's bytes to @dst, then the buffer posted again */
	void (*copy)(struct ntr_queue *q, const struct ntrdma_tqp_rcomp *c,
		     struct ntr_rx_buf *b, void *dst);
	struct sk_buff *(*skb)(struct ntr_queue *q,
			       const struct ntrdma_tqp_rcomp *c,
			       struct ntr_rx_buf *b);
	bool guards;		/* test builds: canaries around buffers */
};

/* Each set has one writer: NAPI, the xmit path, or send completions. */
struct ntr_counters {
	u64 packets, bytes, dropped, errors;
	u64 busy, refill_fail, proto_errors, dropped_down;
	struct u64_stats_sync syncp;
};

/* What XDP did with received frames (ntrdma_net_xdp.c). */
enum ntr_xdp_stat {
	NTR_XDP_PASS,
	NTR_XDP_DROP,
	NTR_XDP_TX,
	NTR_XDP_REDIRECT,
	NTR_XDP_ABORTED,	/* XDP_ABORTED, unknown actions, failed TX or redirect */
	NTR_XDP_UNFIT,		/* a GSO frame, a partial checksum or too long */
	NTR_XDP_NSTATS
};

struct ntr_xdp_counters {
	u64 v[NTR_XDP_NSTATS];
	struct u64_stats_sync syncp;
};

struct ntrdma_net;

/* One queue pair of the netdev: a transport QP, NAPI, rings, counters. */
struct ntr_queue {
	struct ntrdma_net *net;
	int idx;
	struct ntrdma_tqp *tqp;
	struct napi_struct napi;

	/* receive: buffers we posted to the peer, by ring position */
	struct ntr_rx_buf rx[NTR_RING];
	struct page_pool *rx_pp;	/* receive pages (NAPI), see ntr_rx_pool_init() */

	/* Buffers of an ended session: the peer may still write into them
	 * until it has left that session, which we know once it accepts our
	 * next one. Freed then, or at removal once the peer has left.
	 */
	struct ntr_rx_buf quar[NTR_RING];
	u32 quar_count;
	/* buffers allocated and neither freed nor handed to an skb (posted
	 * or quarantined); windowed mode keeps it under rx_bufs
	 */
	u32 rx_owned;

	/* a refill came up short: NAPI retries it when the timer fires */
	bool refill_due;
	struct timer_list refill_timer;

	spinlock_t bql_lock;	/* netdev_tx_completed_queue() callers */

	struct ntr_counters rxc;	/* NAPI */
	struct ntr_counters txc;	/* xmit, under the tx queue lock */
	struct ntr_counters donec;	/* send completions */
	atomic64_t tx_wakes;

	/* XDP: frames are copied into pages of this pool for the program */
	struct page_pool *xdp_pp;
	struct xdp_rxq_info xdp_rxq;
	bool xdp_flush;			/* NAPI redirected frames this poll */
	struct ntr_xdp_counters xdpc;	/* NAPI */
	atomic64_t xdp_xmit, xdp_xmit_errors;	/* ndo_xdp_xmit, any CPU */
	/* XDP frames sent (XDP_TX, ndo_xdp_xmit): send_done, any CPU */
	atomic64_t xdp_done, xdp_done_bytes, xdp_done_errors;
};

struct ntrdma_net {
	struct ntrdma_dev *ndev;
	struct net_device *netdev;
	bool active;		/* a link session's datapath runs (rtnl) */
	struct mutex carrier_lock;	/* active off vs. the carrier's update */
	struct work_struct carrier_work;	/* the peer's netdev state changed */
	u32 rx_buf_len;		/* bytes the peer may write per buffer */
	u32 rx_alloc_len;
	unsigned int rx_order;	/* pages of the queues' rx_pp are this order */
	const struct ntr_rx_ops *rx_ops;	/* set at the first session */
	u32 rx_bufs;		/* posted per queue, at most */
	u32 rx_bufs_face;	/* owned by all queues, at most (windowed) */
	u32 rx_copybreak;	/* ethtool's rx-copybreak tunable */
	int nq;			/* our queue pairs */
	u32 tx_nq;		/* queues both sides have: 0 while closed */
	struct ntr_queue *q;
	struct bpf_prog __rcu *xdp_prog;	/* rtnl */
	bool peer_xdp;		/* the peer runs XDP: no GSO, checksums done */
};

/* ntrdma_net.c */
void ntr_count(struct ntr_counters *c, u64 *field, u64 n);
void ntr_repost(struct ntr_queue *q, struct ntr_rx_buf *b);
void ntr_publish_open(struct ntrdma_net *net);

/* ntrdma_net_xdp.c */
#define NTR_XDP_TAG	1UL	/* a send cookie that is an xdp_frame */
int ntr_xdp_queue_init(struct ntr_queue *q);
void ntr_xdp_queue_fini(struct ntr_queue *q);
struct sk_buff *ntr_xdp_rx(struct ntr_queue *q, struct bpf_prog *prog,
			   const struct ntrdma_tqp_rcomp *c,
			   struct ntr_rx_buf *b,
			   const struct ntrdma_net_meta *m);
void ntr_xdp_poll_end(struct ntr_queue *q);
void ntr_xdp_send_done(struct ntr_queue *q, void *cookie, u32 len,
		       int status);
int ntr_xdp_bpf(struct net_device *dev, struct netdev_bpf *bpf);
int ntr_xdp_xmit(struct net_device *dev, int n, struct xdp_frame **frames,
		 u32 flags);
void ntr_xdp_tx_totals(struct ntrdma_net *net, u64 *packets, u64 *bytes,
		       u64 *errors);
bool ntr_xdp_mtu_ok(struct ntrdma_net *net, int mtu);
void ntr_xdp_features(struct net_device *dev);
#define NTR_XDP_STATS	(NTR_XDP_NSTATS + 2)
void ntr_xdp_strings(u8 **p);
u64 *ntr_xdp_stats(struct ntrdma_net *net, u64 *data);

#endif /* NTRDMA_NET_H */
