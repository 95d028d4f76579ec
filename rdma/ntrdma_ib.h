/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA verbs face: the ib_device of one ntrdma device and its objects.
 * One concept per file: ntrdma_ib.c (device, ports, ucontext),
 * ntrdma_queue.c (rings mapped to userspace, mmap), ntrdma_mr.c (PD, MR,
 * keys), ntrdma_cq.c (CQ rings), ntrdma_qp.c (QPs).
 */
#ifndef NTRDMA_IB_H
#define NTRDMA_IB_H

#include <linux/completion.h>
#include <linux/idr.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/ntrdma-abi.h>

#include "ntrdma_engine.h"
#include "ntrdma_verbs_wire.h"

/*
 * A software device has no IEEE OUI of its own (rxe says 0xffffff, siw
 * "bmt"); ours spells "NTR". Never 0: rdma-core's suite takes 0 for "no
 * device data".
 */
#define NTRDMA_VENDOR_ID	0x4e5452
#define NTRDMA_VENDOR_PART_ID	1

/* Limits advertised in query_device and enforced exactly. */
#define NTRDMA_MAX_QP		4096
#define NTRDMA_MAX_QP_WR	4096
#define NTRDMA_MAX_CQ		4096
#define NTRDMA_MAX_CQE		(BIT(22) - 1)	/* as mlx5: rxm asks 65536+ */
#define NTRDMA_MAX_MR		16384
#define NTRDMA_MAX_PD		4096
#define NTRDMA_MAX_SRQ		1024
#define NTRDMA_MAX_SRQ_WR	4096
#define NTRDMA_MAX_MR_SIZE	BIT_ULL(40)
#define NTRDMA_MAX_RD_ATOM	16
#define NTRDMA_MAX_FRPL		512	/* fast-reg page list entries */
#define NTRDMA_GID_TBL_LEN	2	/* 0: fe80::EUI-64, 1: the MAC (rdma_cm) */
#define NTRDMA_FIRST_QPN	2	/* 0 and 1 are special in IB */

/*
 * Memory a user's call makes the kernel hold (rings, shadows, page lists):
 * charged to the caller's memory cgroup, and over its limit the call fails
 * with -ENOMEM instead of waking the OOM killer.
 */
#define NTRDMA_GFP_USER	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)
#define NTRDMA_ACK_MIN_MS	500	/* floor of the local ACK timeout */
#define NTRDMA_MR_IDLE_WAIT	(2 * HZ)	/* an invalidated MR's DMA copies */

struct dentry;
struct seq_file;
struct ntrdma_vx;
struct ntrdma_lo;
struct ntrdma_sink;
struct ntrdma_qp_export_msg;

/* Data path counters (rdma statistic: hw counters of port 1). */
enum ntrdma_hw_stat {
	NTRDMA_HW_TX_SEGS,
	NTRDMA_HW_TX_BYTES,
	NTRDMA_HW_RX_SEGS,
	NTRDMA_HW_RX_BYTES,
	NTRDMA_HW_RX_INVALID,		/* headers that failed the checks */
	NTRDMA_HW_RX_NO_QP,		/* for a QP that does not exist */
	NTRDMA_HW_RX_DROPPED,		/* out of order or wrong peer QP */
	NTRDMA_HW_RNR_NAK_SENT,
	NTRDMA_HW_RNR_NAK_RCVD,		/* each one is a retry */
	NTRDMA_HW_NAK_SENT,		/* access/request/operation errors */
	NTRDMA_HW_NAK_RCVD,
	NTRDMA_HW_LOCAL_ERR,		/* WQEs failing local checks */
	NTRDMA_HW_ACK_TIMEOUTS,		/* WQEs failed: no answer in time */
	NTRDMA_HW_NAK_NO_QP_SENT,	/* segments for no QP (or not ready) */
	NTRDMA_HW_PLACED_WRITES,	/* WRITEs placed into the peer's MR */
	NTRDMA_HW_PLACED_BYTES,
	NTRDMA_HW_PLACED_DMA_BYTES,	/* ...of them, by the DMA channel */
	NTRDMA_HW_PULLED_READS,		/* READs read from the peer's MR */
	NTRDMA_HW_PUSHED_READS,		/* READs the peer wrote into our sink */
	NTRDMA_HW_UD_DROPPED,		/* datagrams no receive took */
	NTRDMA_HW_RX_POLLED,		/* segments found by polling (rx_poll_us) */
	NTRDMA_HW_UC_DROPPED,		/* UC messages the responder refused */
	NTRDMA_HW_PLACED_SENDS,		/* SENDs placed into the peer's RQ */
	NTRDMA_HW_NSTATS
};

struct ntrdma_ib {
	struct ib_device ibdev;
	struct ntrdma_dev *ndev;
	struct ntrdma_vx *vx;		/* the data path (ntrdma_transport.c) */
	struct ntrdma_lo *lo;		/* same-device loopback (ntrdma_lo.c) */
	bool port_up;			/* the data path of a session runs */
	spinlock_t atomic_lock;		/* atomics executed for the peer */
	atomic64_t hw[NTRDMA_HW_NSTATS];

	struct xarray mr_xa;		/* key index -> struct ntrdma_mr */
	u8 *mr_tag;			/* last tag used at each index */
	struct ntrdma_mr_reaper *mr_reaper;	/* MRs dereg gave up on */
	struct xarray qp_xa;		/* QP number -> struct ntrdma_qp */
	struct mutex qp_lock;		/* QP table walks vs. destroy */
	u32 qp_next;			/* cyclic QPN allocation */
	struct xarray cq_xa;		/* CQ id -> struct ntrdma_cq */
	u32 cq_next;
	atomic_t num_pd;
	struct ida pd_ida;		/* PD numbers (exports name them) */

	/*
	 * Direct placement: the peer's exports (ntrdma_place_remote.c) and ours
	 * (ntrdma_place_export.c). place_lock nests inside a QP's sq_lock.
	 */
	struct mutex rmr_lock;		/* export handlers vs. session end */
	spinlock_t place_lock;		/* placements vs. revocations */
	struct xarray rmr_xa;		/* key index -> the peer's MR */
	struct xarray rqp_xa;		/* peer QPN -> the peer's QP */
	u32 rqp_count;			/* its entries (rmr_lock) */
	u32 rmr_count;			/* rmr_xa's entries (rmr_lock) */
	u64 rmr_bytes;			/* and their size (rmr_lock) */
	struct ntrdma_export *exp;
	/*
	 * READ sinks the peer may still write (ntrdma_place_sink.c); sink_lock
	 * nests inside a QP's sq_lock, and nothing nests inside it.
	 */
	spinlock_t sink_lock;
	struct list_head sinks_held;
	atomic_t export_epoch;		/* QP withdrawals so far */
	/* placed SENDs, receiving side (ntrdma_place_rq.c) */
	struct ntrdma_wire_psend *psend;	/* what the peer writes */
	dma_addr_t psend_dma;
	spinlock_t rq_held_lock;	/* rq_held */
	struct list_head rq_held;	/* rings of destroyed QPs */
	atomic_t num_srq;

	/* connection manager (ntrdma_iwcm.c) */
	struct mutex cm_mutex;		/* every CM state change */
	struct list_head cm_listeners;
	struct xarray cep_xa;		/* connection id -> struct ntrdma_cep */
	u32 cep_next;
	u32 cm_pending;			/* requests no listener answered yet */
	struct workqueue_struct *cm_wq;
};

struct ntrdma_ucontext {
	struct ib_ucontext ibuc;
};

/* A kernel ring (CQ, SQ or RQ), shared with userspace when mapped. */
struct ntrdma_ring {
	void *buf;			/* vmalloc_user, ctl then slots */
	size_t size;			/* bytes, page aligned */
	u32 entries;			/* power of two */
	u32 stride;
	/*
	 * The kernel's own position: consumer of an SQ, RQ or SRQ, producer
	 * of a CQ. The mapped ctl block only mirrors it (a user can write
	 * there): the kernel never reads its own index back from the ring.
	 */
	u32 kpos;
	struct rdma_user_mmap_entry *mmap;	/* NULL for kernel users */
};

struct ntrdma_mmap_entry {
	struct rdma_user_mmap_entry rdma;
	void *buf;			/* freed with the last mapping */
};

struct ntrdma_pd {
	struct ib_pd ibpd;
	u32 id;				/* 1..NTRDMA_MAX_PD */
};

enum ntrdma_mr_kind {
	NTRDMA_MR_USER,			/* pinned user pages (ib_umem) */
	NTRDMA_MR_DMA,			/* kernel users: all kernel memory */
	NTRDMA_MR_FRMR,			/* fast registration (map_mr_sg) */
	NTRDMA_MR_MW,			/* a memory window (ntrdma_mw.c) */
};

struct ntrdma_mr {
	struct ib_mr ibmr;
	enum ntrdma_mr_kind kind;
	u32 index;
	int access;
	u64 iova;
	u64 length;
	struct ib_umem *umem;		/* NTRDMA_MR_USER */
	u64 *pages;			/* NTRDMA_MR_FRMR */
	struct page **upages;		/* NTRDMA_MR_USER: the pinned pages */
	u32 nupages;
	u32 max_pages;
	u32 npages;
	u32 key;			/* the active lkey == rkey */
	bool valid;			/* FRMR: between REG_MR and LOCAL_INV */
	bool mw_bind;			/* IB_ACCESS_MW_BIND */
	atomic_t mw_bound;		/* windows bound to it */
	atomic_t copying;		/* checked-path segments starting now */
	atomic_t segs;			/* segments on the DMA channel */
	/*
	 * Dereg or rereg is past its check for bound windows (set under the
	 * key table's lock, where binds count windows): no window binds.
	 */
	bool dying;
	/*
	 * NTRDMA_MR_MW (under the key table's lock): the window is
	 * [iova, iova + length) of @parent (a reference) with @access,
	 * valid while bound.
	 */
	struct ntrdma_mr *parent;
	u8 mw_type;
	u32 mw_qpn;			/* type 2: the QP it was bound through */
	refcount_t refs;		/* 1 while registered + data path */
	struct completion released;
	/* dereg stopped waiting: the last put frees it (ntrdma_mr.c) */
	spinlock_t orphan_lock;		/* orphan vs. the last put */
	bool orphan;
	struct ntrdma_mr_reaper *reaper;
	struct work_struct reap_work;
	/* exported for direct placement (ntrdma_place_export.c, its lock) */
	dma_addr_t *export_dma;		/* the pages, for the NTB device */
	/* a page of export_dma's entries the peer reads; lives with the MR */
	u64 *export_list;
	dma_addr_t export_list_dma;
	u32 export_session;		/* 0: not exported */
	struct list_head export_link;
};

struct ntrdma_mw {
	struct ib_mw ibmw;
	struct ntrdma_mr *win;		/* its entry in the key table */
};

struct ntrdma_cq {
	struct ib_cq ibcq;
	u32 id;
	spinlock_t lock;		/* kernel-side consumers, notify */
	struct ntrdma_ring ring;
	bool user;
	bool overrun;			/* IB_EVENT_CQ_ERR raised (lock) */
};

struct ntrdma_srq {
	struct ib_srq ibsrq;
	spinlock_t lock;		/* kernel posts, limit */
	struct ntrdma_ring ring;
	u32 limit;			/* armed when non-zero */
	bool user;
};

/* A local SGE checked against its MR (which it holds a reference on). */
struct ntrdma_rsge {
	struct ntrdma_mr *mr;
	u64 addr;
	u32 len;
};

/* A send WQE the data path copied out of the SQ ring and checked. */
struct ntrdma_swqe {
	struct ntrdma_send_wqe w;
	struct ntrdma_rsge sge[NTRDMA_MAX_SGE];
	u32 nsge;
	u32 len;		/* message bytes */
	u32 msn;
	u32 sent;		/* payload bytes sent */
	u32 sge_i, sge_off;	/* where sending resumes */
	u32 rcvd;		/* READ: response bytes received */
	bool started;		/* its first segment went out */
	bool out;		/* all of it went out */
	bool done;		/* acknowledged / answered */
	bool direct;		/* WRITE placed: ntrdma_place_remote.c */
	bool placing;		/* ...by the DMA channel: done at seg_end */
	bool skipped;		/* its first segment says NTRDMA_VX_SKIPPED */
	u16 skip_lo;		/* ...and this (ntrdma_vx_hdr) */
	bool inv_local;		/* READ_WITH_INV: w.imm_data is the sink key */
	struct ntrdma_sink *sink;	/* READ: its pages, mapped for the peer */
	struct ntrdma_mr *inv_mr;	/* LOCAL_INV, BIND_MW: wait until idle */
	int status;		/* its completion status */
	u32 seg_end;		/* UD, placing: the pool's count once it left */
};

/* A receive WQE being filled (SEND, or WRITE with immediate). */
struct ntrdma_rwqe {
	u64 wr_id;
	u32 idx;		/* its index in the QP's own RQ */
	struct ntrdma_rsge sge[NTRDMA_MAX_SGE];
	u32 nsge;
	u32 cap;		/* bytes the SGEs hold */
};

/* Responder to requester: what is owed, in message order. */
enum ntrdma_rsp_kind {
	NTRDMA_RSP_ACK,
	NTRDMA_RSP_READ,
	NTRDMA_RSP_ATOMIC,
};

struct ntrdma_rsp {
	enum ntrdma_rsp_kind kind;
	u32 msn;
	u8 syndrome;
	u8 rnr_timer;
	struct ntrdma_mr *mr;	/* READ: the source (a reference) */
	u32 rkey;		/* ...checked again for each segment */
	u64 raddr;
	u32 total;
	u32 sent;
	u64 orig;		/* ATOMIC */
	/* READ: the requester's sink, to write into (NULL: send the data) */
	struct ntrdma_vx_sink *sink;
	u32 nsink;
	u32 epoch;		/* the requester QP's, from the READ_REQ */
};

#define NTRDMA_QP_RSP		64	/* > 2 * NTRDMA_MAX_RD_ATOM + 2 */
#define NTRDMA_QP_SEGS		32	/* segments in flight per QP */
#define NTRDMA_SEG_SLOT		512	/* header + inline data */
#define NTRDMA_SEG_WAIT_S	30	/* destroy waits for late DMA */

/*
 * A transmit pass of a QP runs under its sq_lock, interrupts off. It copies
 * at most about this many bytes by CPU (placements, pulls, segments), or
 * queues as many copies on the DMA channel as that budget buys at
 * NTRDMA_TX_DMA_COST each; then the QP's tx work takes the rest, in
 * another pass (as NAPI's budget).
 */
#define NTRDMA_TX_BUDGET	SZ_64K
#define NTRDMA_TX_DMA_COST	SZ_1K
#define NTRDMA_UD_MAX_SGE	8	/* a datagram in one segment */

/* One segment in flight: what its send_done releases. */
struct ntrdma_seg_meta {
	struct ntrdma_seg_pool *pool;	/* NULL: a device NAK slot */
	bool placement;			/* a direct placement, not a segment */
	u32 nmr;
	struct ntrdma_mr *mr[NTRDMA_MAX_SGE + 1];
};

/*
 * A QP's segment slots and their accounting, apart from the QP: when
 * destroy gives up waiting for a late DMA, the QP goes and the pool stays
 * until its last send_done, which frees it (qp NULL: detached).
 */
struct ntrdma_seg_pool {
	spinlock_t lock;		/* done, blocked, dying, qp */
	struct ntrdma_qp *qp;
	u32 prod;			/* under the QP's sq_lock */
	u32 done;
	bool blocked;			/* a sender waits for a free slot */
	bool dying;			/* destroy: no more wake-ups */
	bool place_failed;		/* a placement's copy failed */
	void *slots;			/* NTRDMA_QP_SEGS header slots */
	struct ntrdma_seg_meta meta[NTRDMA_QP_SEGS];
};

struct ntrdma_qp {
	struct ib_qp ibqp;
	struct mutex lock;		/* attributes and state */
	spinlock_t rq_lock;		/* RQ posts and flushes */
	spinlock_t sq_lock;		/* SQ posts and flushes */
	enum ib_qp_state state;
	struct ntrdma_ring sq;
	struct ntrdma_ring rq;
	bool user;
	bool rq_done;			/* receives complete in RQ slots */
	/*
	 * Placed SENDs (ntrdma_place_rq.c), under rq_lock: the RQ's consumer
	 * index lives in the psend area (for good, once exported), and the
	 * peer may place into it until it answers the withdrawal of
	 * rq_unshare_epoch. Parked: reset under a placing peer, the shared
	 * index shows it nothing posted until that answer.
	 */
	struct ntrdma_rq_export *rq_exp;	/* under the QP's mutex */
	bool rq_word;
	bool rq_shared;
	bool rq_parked;
	u32 rq_session;			/* the last exported in */
	u32 rq_unshare_epoch;
	struct ib_qp_cap cap;
	enum ib_sig_type sq_sig_type;

	/* attributes set by modify_qp, reported by query_qp */
	u32 dest_qp_num;
	u32 sq_psn;
	u32 rq_psn;
	int qp_access_flags;
	enum ib_mtu path_mtu;
	u16 pkey_index;
	u8 port_num;
	u8 max_rd_atomic;
	u8 max_dest_rd_atomic;
	u8 min_rnr_timer;
	u8 timeout;
	u8 retry_cnt;
	u8 rnr_retry;
	u32 qkey;			/* UD */
	struct rdma_ah_attr ah_attr;
	/*
	 * The AV names our own port: the dest QP is ours (ntrdma_lo.c). UD:
	 * the way the segments in flight went (each WQE names its own).
	 */
	bool loopback;

	/*
	 * Data path (ntrdma_req.c and ntrdma_comp.c requester,
	 * ntrdma_resp.c responder), all under sq_lock.
	 */
	struct ntrdma_swqe *swq;	/* shadow of the SQ ring */
	u32 place_scan;			/* WQEs before it are done */
	bool req_skipped;		/* msns the responder will not see */
	u32 req_skip_from;		/* ...from this one on */
	bool req_failed;		/* a WQE ended in error: none after */
	u32 req_fail_msn;		/* ...it starts (the first such) */
	u32 sq_fetched;			/* WQEs copied into swq */
	u32 sq_send;			/* the WQE being sent */
	u32 req_msn;			/* msn of the next fetched WQE */
	u32 rd_out;			/* READ/ATOMIC awaiting answers */
	u8 rnr_left;
	bool rnr_wait;			/* RNR timer running */
	struct timer_list rnr_timer;
	/*
	 * Local ACK timeout: with WQEs outstanding, every timeout period
	 * without progress (an answer, a segment sent) costs a retry; the
	 * oldest WQE fails with RETRY_EXC_ERR once retry_cnt are spent.
	 */
	struct timer_list ack_timer;
	u8 retry_left;
	u8 no_qp_left;			/* NO_QP resends: only answers restore */
	u32 ack_progress, ack_seen;
	struct work_struct tx_work;
	/* exported to the peer (ntrdma_place_export.c; under lock) */
	bool exported;
	u32 export_epoch;		/* withdrawals queued (under sq_lock too) */
	/* its messages waiting to be sent, in order (the export's qp_lock) */
	struct ntrdma_qp_export_msg *export_msg[2];
	struct work_struct unexport_work;	/* it entered ERR */
	struct list_head tx_wait;	/* on vx->tx_waiters */
	bool tx_wait_place;		/* a placement waits (sq_lock) */
	int tx_budget;			/* this transmit pass's (sq_lock) */
	bool cq_overrun;		/* a completion was lost: to ERR */
	bool sqd_notify;		/* SQD: SQ_DRAINED still owed */

	u32 resp_msn;			/* next msn the responder expects */
	bool rcv_busy;			/* a SEND/WRITE is in progress */
	u8 rcv_op;
	struct ntrdma_rwqe rcv;
	bool rcv_wqe;			/* rcv holds a receive WQE */
	bool uc_drop;			/* UC: resp_msn's message dropped */
	struct ntrdma_mr *wr_mr;	/* WRITE target */
	u64 wr_raddr;			/* its checked start... */
	u32 wr_rkey;			/* ...the key checked each segment */
	u32 rcv_total;			/* ...and length (from FIRST) */
	u32 rcv_len;
	struct ntrdma_rsp rsp[NTRDMA_QP_RSP];
	u32 rsp_head, rsp_tail;
	bool resp_fatal;		/* to ERR once the NAK is out */
	int resp_event;			/* async event for that */

	struct ntrdma_seg_pool *seg_pool;
	wait_queue_head_t seg_wait;

	/* statistics */
	u64 tx_msgs, rx_msgs, rnr_naks;

	/* rdma_cm (ntrdma_iwcm.c): the connection, under sq_lock */
	struct ntrdma_cep *cep;
	atomic_t iw_refs;		/* the iw_cm's references */
	wait_queue_head_t cm_wait;
};

static inline struct ntrdma_ib *to_nib(struct ib_device *ibdev)
{
	return container_of(ibdev, struct ntrdma_ib, ibdev);
}

static inline struct ntrdma_pd *to_npd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct ntrdma_pd, ibpd);
}

static inline struct ntrdma_mr *to_nmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct ntrdma_mr, ibmr);
}

static inline struct ntrdma_cq *to_ncq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct ntrdma_cq, ibcq);
}

static inline struct ntrdma_srq *to_nsrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct ntrdma_srq, ibsrq);
}

static inline struct ntrdma_qp *to_nqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct ntrdma_qp, ibqp);
}

/*
 * Driver-specific input from userspace: this ABI version defines none, so
 * anything but zeros is a request we do not understand.
 */
static inline int ntrdma_check_udata_in(struct ib_udata *udata)
{
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	return 0;
}

static inline void ntrdma_hw_add(struct ntrdma_qp *qp, enum ntrdma_hw_stat i,
				 u64 n)
{
	atomic64_add(n, &to_nib(qp->ibqp.device)->hw[i]);
}

/* ntrdma_ib.c: ports */
bool ntrdma_ib_av_is_local(struct ib_device *ibdev,
			   const struct rdma_ah_attr *ah);
void ntrdma_ib_gid0(struct ib_device *ibdev, union ib_gid *gid);

/* ntrdma_mr.c: data path access to MR pages */
int ntrdma_mr_check(struct ntrdma_mr *mr, u64 addr, u64 len);
bool ntrdma_rkey_enter(struct ntrdma_ib *nib, struct ntrdma_mr *mr, u32 key);
void ntrdma_rkey_leave(struct ntrdma_mr *mr);
int ntrdma_rkey_copy(struct ntrdma_qp *qp, struct ntrdma_mr *mr, u32 key,
		     u64 addr, void *buf, u32 len);
void ntrdma_mr_quiesce(struct ntrdma_mr *mr);
bool ntrdma_mr_idle(struct ntrdma_mr *mr);
bool ntrdma_mr_wait_idle(struct ntrdma_mr *mr);
int ntrdma_mr_copy(struct ntrdma_mr *mr, u64 addr, void *buf, u32 len,
		   bool to_mr);
int ntrdma_mr_range(struct ntrdma_mr *mr, u64 addr, u32 len,
		    struct page **page, u32 *off);
int ntrdma_rsge_scatter(const struct ntrdma_rsge *sg, u32 nsg, u32 off,
			const void *buf, u32 len);

/* ntrdma_transport.c: the verbs transport over the engine */
int ntrdma_vx_init(struct ntrdma_ib *nib);
void ntrdma_vx_fini(struct ntrdma_ib *nib, bool free_posted);
void ntrdma_vx_start(struct ntrdma_ib *nib);
void ntrdma_vx_stop(struct ntrdma_ib *nib);
int ntrdma_vx_send(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		   const void *inl, u32 inl_len, const struct ntrdma_rsge *sg,
		   int nsg, u32 sg_skip, u32 len);
void ntrdma_vx_wait_space(struct ntrdma_qp *qp);
void ntrdma_vx_flush_rx(struct ntrdma_ib *nib);
void ntrdma_vx_kick(struct ntrdma_qp *qp);
void ntrdma_vx_flush_tx(struct ntrdma_qp *qp);
int ntrdma_vx_place(struct ntrdma_qp *qp, const struct ntrdma_tqp_piece *pc,
		    int *n, struct ntrdma_mr *const *mr, int nmr);
void ntrdma_vx_charge(struct ntrdma_qp *qp, u32 len, bool dma);
bool ntrdma_vx_tx_spent(struct ntrdma_qp *qp);
bool ntrdma_vx_place_fence(struct ntrdma_ib *nib);
bool ntrdma_vx_place_busy(struct ntrdma_ib *nib);
void ntrdma_vx_kick_peer(struct ntrdma_ib *nib);
bool ntrdma_vx_place_failed(struct ntrdma_qp *qp);
void ntrdma_vx_qp_fini(struct ntrdma_qp *qp);
void ntrdma_vx_wake(struct ntrdma_ib *nib);
struct ntrdma_qp *ntrdma_vx_deliver(struct ntrdma_ib *nib, void *buf,
				    u32 len, bool loopback);

/* ntrdma_lo.c: same-device loopback */
int ntrdma_lo_init(struct ntrdma_ib *nib);
void ntrdma_lo_fini(struct ntrdma_ib *nib);
int ntrdma_lo_send(struct ntrdma_lo *lo, const struct ntrdma_tqp_sge *sg,
		   int n, u32 len);
void ntrdma_lo_nak(struct ntrdma_lo *lo, const struct ntrdma_vx_hdr *nak);
bool ntrdma_lo_ready(struct ntrdma_lo *lo);
void ntrdma_lo_flush(struct ntrdma_lo *lo);
int ntrdma_vx_pool_alloc(struct ntrdma_qp *qp);
void ntrdma_vx_pool_release(struct ntrdma_qp *qp);
bool ntrdma_vx_pool_wait(struct ntrdma_qp *qp, u32 mark);

/* ntrdma_place_remote.c: direct placement, requester side */
extern bool ntrdma_direct_placement;
int ntrdma_rmr_init(struct ntrdma_ib *nib);
void ntrdma_rmr_clear(struct ntrdma_ib *nib);
void ntrdma_rmr_fini(struct ntrdma_ib *nib);
void ntrdma_rmr_show(struct seq_file *s, struct ntrdma_ib *nib);
int ntrdma_place_write(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
int ntrdma_place_send(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
int ntrdma_pull_read(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
int ntrdma_push_read(struct ntrdma_qp *qp, struct ntrdma_rsp *r);

/* ntrdma_place_sink.c: READ sinks the peer writes */
void ntrdma_sink_init(struct ntrdma_ib *nib);
struct ntrdma_sink *ntrdma_sink_build(struct ntrdma_qp *qp,
				      const struct ntrdma_swqe *w);
const void *ntrdma_sink_wire(const struct ntrdma_sink *s, u32 *len,
			     u32 *epoch);
void ntrdma_sink_release(struct ntrdma_ib *nib, struct ntrdma_sink *s,
			 bool answered);
void ntrdma_sink_withdrawn(struct ntrdma_ib *nib, u32 qpn, u32 epoch,
			   u32 session);
bool ntrdma_sink_mr_quiet(struct ntrdma_ib *nib, struct ntrdma_mr *mr);
void ntrdma_sink_session_up(struct ntrdma_ib *nib, u32 session);
void ntrdma_sink_fini(struct ntrdma_ib *nib, bool peer_quiet);

/* ntrdma_place_rq.c: placed SENDs, receiving side */
struct ntrdma_wire_qp_export;
void ntrdma_rq_export_init(struct ntrdma_ib *nib);
void ntrdma_rq_export_fini(struct ntrdma_ib *nib, bool peer_quiet);
void ntrdma_rq_export_fill(struct ntrdma_qp *qp, struct ntrdma_wire_qp_export *q,
			   u32 session);
void ntrdma_rq_withdrawing(struct ntrdma_qp *qp, u32 epoch);
void ntrdma_rq_withdrawn(struct ntrdma_ib *nib, u32 qpn, u32 epoch);
void ntrdma_rq_sync(struct ntrdma_qp *qp);
void ntrdma_rq_publish(struct ntrdma_qp *qp);
bool ntrdma_rq_flush_later(struct ntrdma_qp *qp);
void ntrdma_rq_reset(struct ntrdma_qp *qp);
void ntrdma_rq_export_destroy(struct ntrdma_qp *qp);
void ntrdma_rq_session_up(struct ntrdma_ib *nib, u32 session);
void ntrdma_rq_kicked(struct ntrdma_ib *nib);

/* ntrdma_place_export.c: direct placement, exporting side */
int ntrdma_export_init(struct ntrdma_ib *nib);
void ntrdma_export_fini(struct ntrdma_ib *nib, bool peer_quiet);
void ntrdma_export_mr(struct ntrdma_ib *nib, struct ntrdma_mr *mr);
bool ntrdma_unexport_mr(struct ntrdma_ib *nib, struct ntrdma_mr *mr);
bool ntrdma_export_wait_left(struct ntrdma_ib *nib, u32 session);
void ntrdma_export_unmap(struct ntrdma_mr *mr);
void ntrdma_export_pd_free(struct ntrdma_ib *nib);
void ntrdma_export_qp(struct ntrdma_qp *qp, bool up);
void ntrdma_export_qp_destroy(struct ntrdma_qp *qp);
u32 ntrdma_export_qp_pending(struct ntrdma_ib *nib);
void ntrdma_export_qp_init(struct ntrdma_qp *qp);
void ntrdma_export_qp_failed(struct ntrdma_qp *qp);
void ntrdma_export_link_up(struct ntrdma_ib *nib);

/* ntrdma_req.c: requester, sending */
void ntrdma_req_reset(struct ntrdma_qp *qp);
void ntrdma_req_tx(struct ntrdma_qp *qp);
bool ntrdma_req_in_progress(struct ntrdma_qp *qp);
void req_release(struct ntrdma_swqe *w);
void req_error(struct ntrdma_qp *qp, struct ntrdma_swqe *w, int status);
int req_invalidate(struct ntrdma_qp *qp, struct ntrdma_swqe *w, u32 key);

/* Shared with ntrdma_comp.c, inline: both files call them in loops. */
/* RC or UC: connected to one QP, its messages in msn order. */
static inline bool ntrdma_qp_connected(const struct ntrdma_qp *qp)
{
	return qp->ibqp.qp_type == IB_QPT_RC || qp->ibqp.qp_type == IB_QPT_UC;
}

/* In @state a QP's responder takes the peer's requests and answers. */
static inline bool ntrdma_qp_answers(enum ib_qp_state state)
{
	return state == IB_QPS_RTR || state == IB_QPS_RTS ||
	       state == IB_QPS_SQD;
}

static inline struct ntrdma_swqe *swqe(struct ntrdma_qp *qp, u32 idx)
{
	return &qp->swq[idx & (qp->sq.entries - 1)];
}

static inline bool is_rd_atomic(u32 opcode)
{
	return opcode == IB_WR_RDMA_READ ||
	       opcode == IB_WR_RDMA_READ_WITH_INV ||
	       opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IB_WR_ATOMIC_FETCH_AND_ADD;
}

/* ntrdma_comp.c: requester, answers and completions */
void ntrdma_req_init(struct ntrdma_qp *qp);
void ntrdma_req_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		   const void *payload, u32 len);
void ntrdma_req_flush(struct ntrdma_qp *qp, bool post);
void ntrdma_req_peer_acked(struct ntrdma_qp *qp, u32 msn);
bool req_complete(struct ntrdma_qp *qp);
void req_arm_ack(struct ntrdma_qp *qp);

/* ntrdma_ud.c: UD datagrams */
int ntrdma_ud_prepare(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
int ntrdma_ud_send_wqe(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
bool ntrdma_ud_wqe_done(struct ntrdma_qp *qp, struct ntrdma_swqe *w);
void ntrdma_ud_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		  const void *payload, u32 len);

/* ntrdma_resp.c: responder */
int ntrdma_resp_take_wqe(struct ntrdma_qp *qp);
void ntrdma_resp_release_rcv(struct ntrdma_qp *qp);
void ntrdma_resp_reset(struct ntrdma_qp *qp);
void ntrdma_resp_rx(struct ntrdma_qp *qp, const struct ntrdma_vx_hdr *h,
		    const void *payload, u32 len);
int ntrdma_resp_tx(struct ntrdma_qp *qp);
void ntrdma_resp_flush(struct ntrdma_qp *qp, bool post);
void ntrdma_resp_tx_owed(struct ntrdma_qp *qp);
u32 ntrdma_resp_next_msn(struct ntrdma_qp *qp);

/* ntrdma_qp.c: for the data path */
void ntrdma_qp_error(struct ntrdma_qp *qp, enum ib_event_type ev);
void ntrdma_qp_sq_drained(struct ntrdma_qp *qp);
void ntrdma_rq_flush(struct ntrdma_qp *qp);
void ntrdma_qp_complete_recv(struct ntrdma_qp *qp, u32 idx,
			     const struct ntrdma_cqe *e, bool solicited);
void ntrdma_qp_complete(struct ntrdma_qp *qp, struct ib_cq *ibcq,
			const struct ntrdma_cqe *e, bool solicited);

/* ntrdma_queue.c: rings shared with userspace */
int ntrdma_ring_alloc(struct ntrdma_ring *ring, u32 entries, u32 stride);
int ntrdma_ring_map(struct ntrdma_ring *ring, struct ib_udata *udata,
		    u64 *offset);
void ntrdma_ring_free(struct ntrdma_ring *ring);
void ntrdma_mmap_free(struct rdma_user_mmap_entry *rdma);
int ntrdma_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma);

static inline struct ntrdma_ring_ctl *ntrdma_ring_ctl(struct ntrdma_ring *r)
{
	return r->buf;
}

static inline void *ntrdma_ring_slot(struct ntrdma_ring *r, u32 idx)
{
	return r->buf + NTRDMA_RING_CTL_SIZE +
		(size_t)(idx & (r->entries - 1)) * r->stride;
}

/* ntrdma_mr.c */
int ntrdma_mem_init(struct ntrdma_ib *nib);
void ntrdma_mem_fini(struct ntrdma_ib *nib);
int ntrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int ntrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
struct ib_mr *ntrdma_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *ntrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 iova, int access, struct ib_udata *udata);
struct ib_mr *ntrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			      u32 max_num_sg);
int ntrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		     unsigned int *sg_offset);
struct ib_mr *ntrdma_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				   u64 length, u64 iova, int access,
				   struct ib_pd *pd, struct ib_udata *udata);
int ntrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ntrdma_mr *ntrdma_mr_get(struct ntrdma_ib *nib, u32 key,
				struct ib_pd *pd, int access);
void ntrdma_mr_put(struct ntrdma_mr *mr);
int ntrdma_mr_fast_reg(struct ntrdma_ib *nib, struct ntrdma_mr *mr,
		       struct ib_pd *pd, u32 key, int access);
int ntrdma_mr_invalidate(struct ntrdma_ib *nib, struct ib_pd *pd, u32 key,
			 struct ntrdma_mr **target);
struct ntrdma_mr *ntrdma_mr_new(struct ntrdma_ib *nib, struct ib_pd *pd,
				enum ntrdma_mr_kind kind, int access);
void ntrdma_mr_publish(struct ntrdma_ib *nib, struct ntrdma_mr *mr);
struct ntrdma_mr *ntrdma_rkey_get(struct ntrdma_qp *qp, u32 key, int access,
				  u64 addr, u64 len);

/* ntrdma_mw.c: memory windows */
int ntrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int ntrdma_dealloc_mw(struct ib_mw *ibmw);
int ntrdma_mw_bind(struct ntrdma_qp *qp, const struct ntrdma_send_wqe *q,
		   struct ntrdma_mr **prev);
int ntrdma_mw_invalidate(struct ntrdma_mr *win, struct ib_pd *pd, u32 key,
			 struct ntrdma_mr **parent);
struct ntrdma_mr *ntrdma_mw_target(struct ntrdma_mr *win, struct ntrdma_qp *qp,
				   int access, u64 addr, u64 len);

/* ntrdma_cq.c */
#ifdef NTRDMA_CQ_ATTRS
struct uverbs_attr_bundle;
int ntrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct uverbs_attr_bundle *attrs);
#else
int ntrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata);
#endif
int ntrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int ntrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int ntrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void ntrdma_cq_overrun(struct ntrdma_cq *cq);
void ntrdma_cq_event(struct ntrdma_cq *cq, bool success, bool solicited);
int ntrdma_cq_post(struct ntrdma_cq *cq, const struct ntrdma_cqe *e,
		   bool solicited);

/* ntrdma_qp.c */
int ntrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		     struct ib_udata *udata);
int ntrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int mask, struct ib_udata *udata);
int ntrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_qp_init_attr *init_attr);
int ntrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int ntrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int ntrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
void ntrdma_qps_link_down(struct ntrdma_ib *nib);
int ntrdma_ring_post_recv(struct ntrdma_ring *ring, spinlock_t *lock,
			  u32 max_sge, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr);

int ntrdma_qp_cm_connect(struct ntrdma_qp *qp, u32 peer_qpn, u8 ird, u8 ord,
			 bool loopback);
void ntrdma_qp_cm_disconnected(struct ntrdma_qp *qp);

/* ntrdma_iwcm.c: connection manager (iw_cm verbs) */
struct iw_cm_id;
struct iw_cm_conn_param;
int ntrdma_cm_init(struct ntrdma_ib *nib);
void ntrdma_cm_fini(struct ntrdma_ib *nib);
void ntrdma_cm_link_down(struct ntrdma_ib *nib);
void ntrdma_cm_qp_down(struct ntrdma_qp *qp);
void ntrdma_cm_qp_destroy(struct ntrdma_qp *qp);
int ntrdma_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param);
int ntrdma_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param);
int ntrdma_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 pdata_len);
int ntrdma_iw_create_listen(struct iw_cm_id *cm_id, int backlog);
int ntrdma_iw_destroy_listen(struct iw_cm_id *cm_id);
void ntrdma_iw_add_ref(struct ib_qp *ibqp);
void ntrdma_iw_rem_ref(struct ib_qp *ibqp);
struct ib_qp *ntrdma_iw_get_qp(struct ib_device *ibdev, int qpn);
void ntrdma_cm_show(struct seq_file *s, struct ntrdma_ib *nib);

/* ntrdma_ib_debugfs.c: debugfs ntrdma/<dev>/verbs */
void ntrdma_ib_debugfs(void *priv, struct dentry *dir);

#ifdef NTRDMA_TEST_HOOKS
/* What a test flood of commands to the peer got back (debugfs verbs). */
struct ntrdma_flood {
	u32 sent, ok, refused, failed;
	int last_rc;		/* the last answer that was not 0 */
};

void ntrdma_flood_count(struct ntrdma_flood *f, int rc, int refusal);
int ntrdma_cm_test_flood(struct ntrdma_ib *nib, u32 n, __be32 addr,
			 __be16 port, struct ntrdma_flood *f);
int ntrdma_export_test_flood(struct ntrdma_ib *nib, u32 n,
			     struct ntrdma_flood *f);
#endif

/* ntrdma_srq.c */
int ntrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata);
int ntrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask mask, struct ib_udata *udata);
int ntrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int ntrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int ntrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);

#endif /* NTRDMA_IB_H */
