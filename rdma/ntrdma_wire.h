/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA wire format: what one side writes into the other's memory, and the
 * pure checks applied to it before use. Self-contained C (no kernel headers)
 * so the userspace unit tests compile the very same code; the includer
 * provides the fixed-width types (u8/u16/u32/u64/s32).
 *
 * Every value read from the peer is hostile until one of the ntrdma_wire_*
 * checks below has accepted it.
 */
#ifndef NTRDMA_WIRE_H
#define NTRDMA_WIRE_H

#define NTRDMA_MAGIC		0x4e545244u	/* "NTRD" */
#define NTRDMA_VERSION		2u

/* Scratchpads used only for bootstrap (written by the peer into ours). */
enum ntrdma_spad {
	NTRDMA_SPAD_MAGIC = 0,	/* written last: the others are valid */
	NTRDMA_SPAD_VERSION,
	NTRDMA_SPAD_EPOCH,	/* the writer's session epoch, never 0 */
	NTRDMA_SPAD_INBOX_LO,	/* the writer's inbox: DMA address ... */
	NTRDMA_SPAD_INBOX_HI,
	NTRDMA_SPAD_INBOX_SIZE,	/* ... and size in bytes */
	NTRDMA_SPAD_ACK,	/* the reader's epoch the writer accepted */
	NTRDMA_SPAD_COUNT
};

/* Hardware doorbell bits: everything else is a virtual doorbell. */
#define NTRDMA_DB_VDB		0	/* some virtual doorbell changed */
#define NTRDMA_DB_CTRL		1	/* bootstrap state changed */

#define NTRDMA_VDB_COUNT	64

/*
 * Transport queue pairs (TQPs): reliable, in-order, one receive ring per
 * direction. The receiver posts buffers (rxd) into the sender's inbox; the
 * sender writes a message into the next posted buffer, then its completion
 * (cqe) into the receiver's inbox, then the completion producer index, then
 * rings the receiver's doorbell. Ring sizes are powers of two.
 */
#define NTRDMA_TQP_COUNT	8
#define NTRDMA_TQP_RING		256u
#define NTRDMA_TQP_NET		0	/* the Ethernet face's first queue pair */
#define NTRDMA_NET_QUEUES_MAX	4	/* TQPs NET .. NET + 3 */

/* Virtual doorbell numbers: the command channel, then three per TQP. */
#define NTRDMA_VDB_CMD		0	/* requests or responses arrived */
enum ntrdma_tqp_vdb {
	NTRDMA_TQP_VDB_RX,	/* new completions in our receive ring */
	NTRDMA_TQP_VDB_TXWAKE,	/* the peer posted receive buffers */
	NTRDMA_TQP_VDB_STATE,	/* the peer opened or closed its end */
	NTRDMA_TQP_VDBS
};

#define NTRDMA_VDB_TQP(qp, which)	(1 + NTRDMA_TQP_VDBS * (qp) + (which))

/* A receive buffer the peer posted, written into the sender's inbox. */
struct ntrdma_wire_rxd {
	u64 addr;		/* DMA address in the poster's memory */
	u32 len;		/* bytes the sender may write there */
	u32 seq;		/* post sequence number (== ring position) */
};

/* A completion the sender wrote into the receiver's inbox. */
struct ntrdma_wire_cqe {
	u32 len;		/* bytes written into the posted buffer */
	u32 seq;		/* the rxd seq this completes */
	u64 meta;		/* the TQP user's: checked by that user */
};

/* One TQP's part of an inbox (all of it written by the peer). */
struct ntrdma_wire_tqp {
	u32 post_prod;		/* rxd: buffers the peer posted for us */
	u32 peer_state;		/* the peer's end: 0 closed, else user-defined */
	u32 rx_event;		/* ring RX when our cq_prod passes this */
	u32 tx_event;		/* ring TXWAKE when our post_prod passes this */
	u32 cq_prod;		/* cqe: completions of the buffers we posted */
	u32 pad[11];
	struct ntrdma_wire_rxd rxd[NTRDMA_TQP_RING];
	struct ntrdma_wire_cqe cqe[NTRDMA_TQP_RING];
};

/*
 * Command channel: requests and responses, NTRDMA_CMD_RING outstanding at
 * most per direction. A request in slot seq % RING is answered in the same
 * slot of the requester's response ring, carrying the same seq.
 */
#define NTRDMA_CMD_RING		16u
#define NTRDMA_CMD_DATA		248u
#define NTRDMA_RSP_DATA		52u

struct ntrdma_wire_cmd {
	u32 seq;
	u16 op;
	u16 len;		/* bytes of data used */
	u8 data[NTRDMA_CMD_DATA];
};

struct ntrdma_wire_rsp {
	u32 seq;
	s32 status;		/* 0 or a negative errno */
	u16 len;
	u16 pad;
	u8 data[NTRDMA_RSP_DATA];
};

/* Net face: what it keeps in a completion's meta word. */
#define NTRDMA_NET_CSUM_OK	0x1u	/* data verified/complete: skip csum */
#define NTRDMA_NET_GSO_TCPV4	0x2u
#define NTRDMA_NET_GSO_TCPV6	0x4u
#define NTRDMA_NET_FLAGS	0x7u

struct ntrdma_net_meta {
	u16 flags;
	u16 gso_size;
	u16 csum_start;		/* for CHECKSUM_PARTIAL frames */
	u16 csum_offset;
};

static inline u64 ntrdma_net_meta_pack(const struct ntrdma_net_meta *m)
{
	return (u64)m->flags | (u64)m->gso_size << 16 |
	       (u64)m->csum_start << 32 | (u64)m->csum_offset << 48;
}

static inline void ntrdma_net_meta_unpack(u64 v, struct ntrdma_net_meta *m)
{
	m->flags = (u16)v;
	m->gso_size = (u16)(v >> 16);
	m->csum_start = (u16)(v >> 32);
	m->csum_offset = (u16)(v >> 48);
}

/*
 * The inbox: one per side, in that side's own memory, written only by the
 * peer (through its flat window) and read only by its owner.
 */
struct ntrdma_inbox {
	u32 magic;
	u32 epoch;		/* the writer's epoch, for stale-write checks */
	u32 hb_seq;		/* heartbeat counter */
	u32 pad0;
	u32 vdb[NTRDMA_VDB_COUNT];
	u32 cmd_prod;		/* requests the peer wrote into cmd[] */
	u32 rsp_prod;		/* responses the peer wrote into rsp[] */
	u32 pad1[10];
	struct ntrdma_wire_cmd cmd[NTRDMA_CMD_RING];
	struct ntrdma_wire_rsp rsp[NTRDMA_CMD_RING];
	struct ntrdma_wire_tqp tqp[NTRDMA_TQP_COUNT];
};

/* ---- pure checks, shared with the unit tests ---- */

/* Ring distance prod - cons in u32 arithmetic is valid when <= size. */
static inline int ntrdma_ring_avail_ok(u32 prod, u32 cons, u32 size)
{
	return (u32)(prod - cons) <= size;
}

static inline u32 ntrdma_ring_idx(u32 pos, u32 size)
{
	return pos & (size - 1);
}

/*
 * Event index (as virtio's): the other side asked to be woken once our
 * producer passes @event; we moved it from @old to @new. True when the move
 * crossed the event, i.e. event lies in [old, new).
 */
static inline int ntrdma_need_event(u32 event, u32 new_pos, u32 old)
{
	return (u32)(new_pos - event - 1) < (u32)(new_pos - old);
}

/* The bootstrap block the peer wrote; 0 when usable. */
static inline int ntrdma_wire_check_boot(u32 magic, u32 version, u32 epoch,
					 u64 inbox, u32 size, u64 window)
{
	if (magic != NTRDMA_MAGIC)
		return -1;
	if (version != NTRDMA_VERSION)
		return -2;
	if (!epoch)
		return -3;
	if (size < sizeof(struct ntrdma_inbox) || inbox > window ||
	    size > window - inbox)
		return -4;
	return 0;
}

/* A posted receive buffer, with the peer's window of size @window. */
static inline int ntrdma_wire_check_rxd(const struct ntrdma_wire_rxd *d,
					u32 expect_seq, u32 min_len,
					u32 max_len, u64 window)
{
	if (d->seq != expect_seq)
		return -1;
	if (d->len < min_len || d->len > max_len)
		return -2;
	if (d->addr > window || d->len > window - d->addr)
		return -3;
	return 0;
}

/* A completion for the buffer of @posted_len bytes we posted as @seq. */
static inline int ntrdma_wire_check_cqe(const struct ntrdma_wire_cqe *c,
					u32 expect_seq, u32 posted_len)
{
	if (c->seq != expect_seq)
		return -1;
	if (!c->len || c->len > posted_len)
		return -2;
	return 0;
}

/* The net face's meta word of a frame of @len bytes. */
static inline int ntrdma_net_check_meta(const struct ntrdma_net_meta *m,
					u32 len)
{
	u32 gso = m->flags & (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6);

	if (m->flags & ~NTRDMA_NET_FLAGS)
		return -3;
	if (gso == (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6))
		return -4;
	/* A GSO frame carries a TCP checksum left to finish. */
	if (gso && (!m->gso_size || !(m->flags & NTRDMA_NET_CSUM_OK) ||
		    !m->csum_start))
		return -4;
	if ((m->csum_start || m->csum_offset) &&
	    (u32)m->csum_start + m->csum_offset + 2 > len)
		return -4;
	return 0;
}

/*
 * A command the peer wrote into slot @expect_seq % RING: 0 when its header
 * is usable (the op itself is checked by its handler).
 */
static inline int ntrdma_wire_check_cmd(const struct ntrdma_wire_cmd *c,
					u32 expect_seq)
{
	if (c->seq != expect_seq)
		return -1;
	if (c->len > NTRDMA_CMD_DATA)
		return -2;
	return 0;
}

/* A response to our request @expect_seq. */
static inline int ntrdma_wire_check_rsp(const struct ntrdma_wire_rsp *r,
					u32 expect_seq)
{
	if (r->seq != expect_seq)
		return -1;
	if (r->len > NTRDMA_RSP_DATA)
		return -2;
	if (r->status > 0 || r->status < -4095)
		return -3;
	return 0;
}

/*
 * Verbs face: its messages ride one TQP (NTRDMA_TQP_VERBS). Every message
 * is one segment of a verbs message: a header (struct ntrdma_vx_hdr), then
 * for SEND/WRITE/READ_RESP the payload bytes at @offset of the message.
 * Messages of one QP carry a message sequence number (msn, 24 bits, as a
 * PSN: the requester starts at sq_psn, the responder expects rq_psn).
 */
#define NTRDMA_TQP_VERBS	7
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
	NTRDMA_VX_OP_MAX = NTRDMA_VX_ATOMIC_RESP,
};

enum {
	NTRDMA_VX_FIRST		= 1 << 0,
	NTRDMA_VX_LAST		= 1 << 1,
	NTRDMA_VX_IMM		= 1 << 2,	/* SEND/WRITE with immediate */
	NTRDMA_VX_SOLICITED	= 1 << 3,
	NTRDMA_VX_FADD		= 1 << 4,	/* ATOMIC_REQ: fetch-add */
	NTRDMA_VX_FLAGS		= 0x1f,
};

/* ACK syndromes (what the requester's WQE completes with). */
enum ntrdma_vx_syn {
	NTRDMA_VX_SYN_OK = 0,
	NTRDMA_VX_SYN_RNR,		/* no receive: retry after @rnr_timer */
	NTRDMA_VX_SYN_ACCESS,		/* remote access error */
	NTRDMA_VX_SYN_INV_REQ,		/* invalid request (length...) */
	NTRDMA_VX_SYN_OP_ERR,		/* remote operational error */
	NTRDMA_VX_SYN_MAX = NTRDMA_VX_SYN_OP_ERR,
};

struct ntrdma_vx_hdr {
	u8 op;
	u8 flags;
	u8 syndrome;		/* ACK */
	u8 rnr_timer;		/* ACK with SYN_RNR: IB encoding 0..31 */
	u32 src_qpn;
	u32 dst_qpn;
	u32 msn;
	u32 offset;		/* of this segment's payload in the message */
	u32 total;		/* message bytes */
	u32 rkey;
	u32 imm;		/* big endian, as posted */
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
	case NTRDMA_VX_ATOMIC_REQ:
	case NTRDMA_VX_ATOMIC_RESP:
		if (h->total != 8)
			return -6;
		return pay ? -6 : 0;
	default: /* READ_REQ */
		return pay ? -6 : 0;
	}
}

/* Serial-number order of 24-bit msns: a - b as a signed distance. */
static inline int ntrdma_vx_msn_diff(u32 a, u32 b)
{
	return (int)((a - b) << 8) >> 8;
}

#endif /* NTRDMA_WIRE_H */
