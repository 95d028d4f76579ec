/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA verbs face wire format: the segment header of every verbs message
 * (requests, ACKs/NAKs, READ and atomic answers), its pure check, and the
 * rdma_cm messages of the command channel. Self-contained C shared with
 * the unit tests; the includer provides the fixed-width types.
 */
#ifndef NTRDMA_VERBS_WIRE_H
#define NTRDMA_VERBS_WIRE_H

#include "ntrdma_wire.h"

/*
 * Verbs messages ride one TQP (NTRDMA_TQP_VERBS) as segments: a header
 * (struct ntrdma_vx_hdr), then for SEND/WRITE/READ_RESP the payload bytes
 * at @offset of the message.
 * Messages of one QP carry a message sequence number (msn, 24 bits, as a
 * PSN: the requester starts at sq_psn, the responder expects rq_psn).
 */
#define NTRDMA_VX_BUF		65536u	/* posted receive buffer */
#define NTRDMA_VX_MAX_MSG	0x80000000u	/* the port's max_msg_sz */
#define NTRDMA_VX_MSN_MASK	0xffffffu

enum ntrdma_vx_op {
	NTRDMA_VX_SEND = 1,	/* requester: payload into a receive */
	NTRDMA_VX_WRITE,	/* requester: payload at rkey/raddr */
	NTRDMA_VX_READ_REQ,	/* requester: total bytes at rkey/raddr */
	NTRDMA_VX_ATOMIC_REQ,	/* requester: 8 bytes at rkey/raddr */
	NTRDMA_VX_ACK,		/* responder: all up to msn done, or a NAK */
	NTRDMA_VX_READ_RESP,	/* responder: payload of a READ */
	NTRDMA_VX_ATOMIC_RESP,	/* responder: the original value */
	/*
	 * A UD datagram: one segment, the whole message, no msn, no answer.
	 * @rkey is the Q_Key, @cmp_add and @swap the sender's GID (raw bytes,
	 * for the receiver's GRH).
	 */
	NTRDMA_VX_UD_SEND,
	NTRDMA_VX_OP_MAX = NTRDMA_VX_UD_SEND,
};

#define NTRDMA_VX_UD_MAX	4096u	/* a datagram's bytes: the port MTU */

/*
 * A READ_REQ's payload, if any, is the READ's sink (the requester's
 * destination, direct placement): extents of DMA addresses of the
 * requester's NTB device, in message order; its @imm is then the requester
 * QP's export epoch (struct ntrdma_wire_qp_export). The responder writes
 * the data there itself and answers READ_RESP with NTRDMA_VX_PLACED.
 */
struct ntrdma_vx_sink {
	u64 addr;
	u32 len;
	u32 rsvd;
};

#define NTRDMA_VX_SINK_MAX	32u	/* extents a READ_REQ may carry */

enum {
	NTRDMA_VX_FIRST		= 1 << 0,
	NTRDMA_VX_LAST		= 1 << 1,
	NTRDMA_VX_IMM		= 1 << 2,	/* SEND/WRITE with immediate */
	NTRDMA_VX_SOLICITED	= 1 << 3,
	NTRDMA_VX_FADD		= 1 << 4,	/* ATOMIC_REQ: fetch-add */
	/*
	 * A request's first segment: the msns before it that the responder
	 * has not seen were WRITEs placed directly or local operations
	 * (REG_MR, LOCAL_INV) of the requester, which never reach it.
	 */
	NTRDMA_VX_SKIPPED	= 1 << 5,
	/*
	 * A WRITE with immediate whose payload the requester placed directly
	 * into the MR: one segment without payload, @total bytes written.
	 * A READ_RESP: the responder wrote all @total bytes into the sink the
	 * READ_REQ named; one segment without payload.
	 */
	NTRDMA_VX_PLACED	= 1 << 6,
	/*
	 * SEND with invalidate: @rkey names an MR of the responder (of the
	 * QP's PD, fast-registered) that stops working before the receive
	 * completes.
	 */
	NTRDMA_VX_INV		= 1 << 7,
	NTRDMA_VX_FLAGS		= 0xff,
};

/* ACK syndromes (what the requester's WQE completes with). */
enum ntrdma_vx_syn {
	NTRDMA_VX_SYN_OK = 0,
	NTRDMA_VX_SYN_RNR,		/* no receive: retry after @rnr_timer */
	NTRDMA_VX_SYN_ACCESS,		/* remote access error */
	NTRDMA_VX_SYN_INV_REQ,		/* invalid request (length...) */
	NTRDMA_VX_SYN_OP_ERR,		/* remote operational error */
	NTRDMA_VX_SYN_NO_QP,		/* no QP, or not in RTR/RTS: retry */
	NTRDMA_VX_SYN_MAX = NTRDMA_VX_SYN_NO_QP,
};

struct ntrdma_vx_hdr {
	u8 op;
	u8 flags;
	union {
		struct {
			u8 syndrome;	/* ACK */
			u8 rnr_timer;	/* ACK with SYN_RNR: IB encoding 0..31 */
		};
		/*
		 * A request's first segment with NTRDMA_VX_SKIPPED: the low
		 * 16 bits of the first msn skipped (a requester has fewer
		 * WQEs outstanding than that: they name it).
		 */
		u16 skip_lo;
	};
	u32 src_qpn;
	u32 dst_qpn;
	u32 msn;
	u32 offset;		/* of this segment's payload in the message */
	u32 total;		/* message bytes */
	u32 rkey;
	u32 imm;		/* big endian, as posted (READ_REQ: below) */
	u64 raddr;		/* remote address of the message's byte 0 */
	u64 cmp_add;		/* ATOMIC_REQ; ATOMIC_RESP: original value */
	u64 swap;
};

/*
 * A verbs segment of @len bytes (header included): 0 when its header is
 * consistent with its length (keys, addresses and QPs are checked by the
 * verbs face against its own tables).
 */
static inline int ntrdma_vx_check_hdr(const struct ntrdma_vx_hdr *h, u32 len)
{
	u32 pay;

	if (len < sizeof(*h))
		return -1;
	pay = len - sizeof(*h);
	if (h->op < NTRDMA_VX_SEND || h->op > NTRDMA_VX_OP_MAX)
		return -2;
	if (h->flags & ~NTRDMA_VX_FLAGS)
		return -3;
	if (h->msn & ~NTRDMA_VX_MSN_MASK || h->src_qpn > 0xffffff ||
	    h->dst_qpn > 0xffffff)
		return -4;
	if (h->total > NTRDMA_VX_MAX_MSG)
		return -5;
	if ((h->flags & NTRDMA_VX_SKIPPED) &&
	    (!(h->flags & NTRDMA_VX_FIRST) || h->op == NTRDMA_VX_ACK ||
	     h->op == NTRDMA_VX_READ_RESP || h->op == NTRDMA_VX_ATOMIC_RESP))
		return -3;
	if ((h->flags & NTRDMA_VX_INV) &&
	    (h->op != NTRDMA_VX_SEND || (h->flags & NTRDMA_VX_IMM)))
		return -3;
	if ((h->flags & NTRDMA_VX_PLACED) && h->op == NTRDMA_VX_READ_RESP)
		return pay || h->offset || !h->total ? -9 : 0;
	if (h->flags & NTRDMA_VX_PLACED) {
		if (h->op != NTRDMA_VX_WRITE || pay || h->offset ||
		    (h->flags & (NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_IMM)) !=
		    (NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_IMM))
			return -9;
		return 0;
	}
	switch (h->op) {
	case NTRDMA_VX_SEND:
	case NTRDMA_VX_WRITE:
		if (h->offset > h->total || pay > h->total - h->offset)
			return -6;
		if (!!(h->flags & NTRDMA_VX_FIRST) != !h->offset)
			return -7;
		if (!!(h->flags & NTRDMA_VX_LAST) !=
		    (h->offset + pay == h->total))
			return -7;
		return 0;
	case NTRDMA_VX_READ_RESP:
		if (h->offset > h->total || pay > h->total - h->offset ||
		    (!pay && h->total))
			return -6;
		return 0;
	case NTRDMA_VX_ACK:
		if (h->syndrome > NTRDMA_VX_SYN_MAX || h->rnr_timer > 31)
			return -8;
		return pay ? -6 : 0;
	case NTRDMA_VX_UD_SEND:
		if (h->flags & ~(NTRDMA_VX_FIRST | NTRDMA_VX_LAST |
				 NTRDMA_VX_IMM | NTRDMA_VX_SOLICITED) ||
		    !(h->flags & NTRDMA_VX_FIRST) || !(h->flags & NTRDMA_VX_LAST))
			return -3;
		if (h->offset || h->msn || pay != h->total ||
		    h->total > NTRDMA_VX_UD_MAX)
			return -6;
		return 0;
	case NTRDMA_VX_ATOMIC_REQ:
	case NTRDMA_VX_ATOMIC_RESP:
		if (h->total != 8)
			return -6;
		return pay ? -6 : 0;
	default: /* READ_REQ */
		if (pay % sizeof(struct ntrdma_vx_sink) ||
		    pay > NTRDMA_VX_SINK_MAX * sizeof(struct ntrdma_vx_sink) ||
		    (pay && !h->total))
			return -6;
		return 0;
	}
}

/*
 * A READ_REQ's sink of @n extents for @total bytes: 0 when every extent is
 * non-empty and inside a window of @reach bytes and they add up to @total.
 */
static inline int ntrdma_vx_check_sink(const struct ntrdma_vx_sink *s, u32 n,
				       u32 total, u64 reach)
{
	u64 sum = 0;
	u32 i;

	if (!n || n > NTRDMA_VX_SINK_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		if (!s[i].len || s[i].rsvd || s[i].addr >= reach ||
		    s[i].len > reach - s[i].addr)
			return -2;
		sum += s[i].len;
	}
	return sum == total ? 0 : -3;
}

/* Serial-number order of 24-bit msns: a - b as a signed distance. */
static inline int ntrdma_vx_msn_diff(u32 a, u32 b)
{
	return (int)((a - b) << 8) >> 8;
}

/*
 * rdma_cm messages (command ops NTRDMA_CMD_CM_*): the command's data is
 * this header, then pdata_len bytes of private data.
 */
struct ntrdma_wire_cm {
	u32 cep;		/* the sender's connection id */
	u32 peer_cep;		/* the receiver's (0 in REQ) */
	u32 qpn;		/* the sender's QP */
	/*
	 * DISC: NTRDMA_CM_ACKED | the msn the sender's QP expects next as
	 * responder. Every SEND and WRITE before it was executed there; the
	 * ACKs saying so travel on the data path, which DISC may overtake.
	 */
	u32 ack_msn;
	u8 ird, ord;
	u8 family;		/* AF_INET or AF_INET6 (REQ) */
	u8 pdata_len;
	__be16 sport, dport;	/* the sender's port, the one it asks for */
	u8 saddr[16], daddr[16];
	u8 pdata[];
};

/*
 * Direct placement: what an exporter tells its peer (commands
 * NTRDMA_CMD_MR_EXPORT, _MR_REVOKE, _QP_EXPORT) so that the peer, as
 * requester, writes WRITE payloads straight into the exported pages.
 * Pages are NTRDMA_EXPORT_PAGE bytes; their addresses are DMA addresses of
 * the exporter's NTB device (what the peer's flat window reaches). A long
 * page list goes in chunks: the command names where in the exporter's
 * memory the chunk's @count u64 addresses are, and the peer reads them
 * through its window.
 */
#define NTRDMA_EXPORT_PAGE	4096u
#define NTRDMA_EXPORT_CHUNK	512u	/* page addresses per command */
/* IB_ACCESS_LOCAL_WRITE (placed SENDs), IB_ACCESS_REMOTE_{WRITE,READ,ATOMIC} */
#define NTRDMA_EXPORT_ACCESS	0x0fu

struct ntrdma_wire_mr_export {
	u32 key;
	u32 pd;			/* the exporter's PD number */
	u32 access;		/* NTRDMA_EXPORT_ACCESS bits */
	u32 npages;		/* pages of the whole MR */
	u64 iova;
	u64 length;
	u32 first_off;		/* of byte @iova in page 0 */
	u32 first;		/* the page this chunk lists first */
	u32 count;		/* pages it lists */
	u32 rsvd;
	u64 list;		/* DMA address of the chunk's page addresses */
};

struct ntrdma_wire_mr_revoke {
	u32 key;
};

struct ntrdma_wire_qp_export {
	u32 qpn;		/* the exporter's QP */
	u32 pd;			/* its PD number */
	u32 access;		/* its qp_access_flags (NTRDMA_EXPORT_ACCESS) */
	u32 dest_qpn;		/* the peer's QP it is connected to */
	u32 up;			/* 1: takes placements now; 0: no more */
	/*
	 * How many times the QP was withdrawn before: a READ_REQ's sink is
	 * written only while the QP is up in the epoch the READ_REQ names.
	 */
	u32 epoch;
	/*
	 * Placed SENDs: the QP's RQ ring (struct ntrdma_ring_ctl, then
	 * @rq_entries receive WQEs of NTRDMA_RQ_STRIDE bytes) in @rq_npages
	 * pages listed at @rq_list, and the exporter's struct
	 * ntrdma_wire_psend at @psend. @rq_entries 0: the QP takes none.
	 */
	u32 rq_entries;
	u32 rq_max_sge;
	u32 rq_npages;
	u32 rq_cq;		/* the receive CQ's id: cq_kick[] index */
	u64 rq_list;
	u64 psend;
};

/*
 * What the peer writes when it places a SEND (one per device, at the
 * psend address of every QP export). rq_cons[qpn - NTRDMA_PSEND_QPN0]: the
 * next receive WQE of that QP, advanced by whichever side consumed one.
 * cq_kick[id] (and cq_kick_sol[id] for a solicited message), then kick:
 * CQs armed when the peer completed a receive into them; the kick
 * doorbell follows.
 */
#define NTRDMA_PSEND_QPN0	2u
#define NTRDMA_PSEND_QPS	4096u
#define NTRDMA_PSEND_CQS	4097u
#define NTRDMA_RQ_STRIDE	304u	/* sizeof(struct ntrdma_recv_wqe) */
#define NTRDMA_RQ_DONE_OFF	272u	/* ...and of its struct ntrdma_recv_done */
#define NTRDMA_RQ_MAX_ENTRIES	4096u
#define NTRDMA_RQ_MAX_SGE	16u

struct ntrdma_wire_psend {
	u32 kick;
	u32 rsvd[15];
	u8 cq_kick[NTRDMA_PSEND_CQS];
	u8 cq_kick_sol[NTRDMA_PSEND_CQS];
	u8 pad[2];
	u32 rq_cons[NTRDMA_PSEND_QPS];
};

/* The pages of an RQ ring of @entries WQEs. */
static inline u32 ntrdma_rq_npages(u32 entries)
{
	return (256u + entries * NTRDMA_RQ_STRIDE + NTRDMA_EXPORT_PAGE - 1) /
	       NTRDMA_EXPORT_PAGE;
}

/* The pages an MR of @length bytes starting @first_off into a page spans. */
static inline u64 ntrdma_export_npages(u64 first_off, u64 length)
{
	return (first_off + length + NTRDMA_EXPORT_PAGE - 1) /
	       NTRDMA_EXPORT_PAGE;
}

/* 0 when an export chunk is consistent (page addresses checked apart). */
static inline int ntrdma_wire_check_mr_export(const struct ntrdma_wire_mr_export *e,
					      u32 max_pages)
{
	if (!e->key || !e->length || e->first_off >= NTRDMA_EXPORT_PAGE ||
	    e->access & ~NTRDMA_EXPORT_ACCESS || e->rsvd)
		return -1;
	if (e->iova + e->length < e->iova || e->length > (1ull << 40))
		return -2;
	if (e->npages > max_pages ||
	    e->npages != ntrdma_export_npages(e->first_off, e->length))
		return -3;
	if (!e->count || e->count > NTRDMA_EXPORT_CHUNK ||
	    e->first >= e->npages || e->count > e->npages - e->first)
		return -4;
	if (e->list % 8)
		return -5;
	return 0;
}

/* 0 when a page address lies in a window of @reach bytes, aligned. */
static inline int ntrdma_wire_check_export_page(u64 addr, u64 reach)
{
	if (addr % NTRDMA_EXPORT_PAGE || addr >= reach ||
	    reach - addr < NTRDMA_EXPORT_PAGE)
		return -1;
	return 0;
}

static inline int ntrdma_wire_check_qp_export(const struct ntrdma_wire_qp_export *q)
{
	if (q->qpn > 0xffffff || q->dest_qpn > 0xffffff || q->up > 1 ||
	    q->access & ~NTRDMA_EXPORT_ACCESS)
		return -1;
	if (!q->rq_entries)
		return 0;
	if (q->rq_entries > NTRDMA_RQ_MAX_ENTRIES ||
	    (q->rq_entries & (q->rq_entries - 1)) ||
	    q->rq_max_sge > NTRDMA_RQ_MAX_SGE ||
	    q->rq_npages != ntrdma_rq_npages(q->rq_entries) ||
	    !q->rq_cq || q->rq_cq >= NTRDMA_PSEND_CQS ||
	    q->qpn < NTRDMA_PSEND_QPN0 ||
	    q->qpn - NTRDMA_PSEND_QPN0 >= NTRDMA_PSEND_QPS ||
	    q->rq_list % NTRDMA_EXPORT_PAGE || q->psend % NTRDMA_EXPORT_PAGE)
		return -2;
	return 0;
}

#define NTRDMA_CM_ACKED		0x80000000u
#define NTRDMA_CM_PDATA_MAX	(NTRDMA_CMD_DATA - sizeof(struct ntrdma_wire_cm))

#endif /* NTRDMA_VERBS_WIRE_H */
