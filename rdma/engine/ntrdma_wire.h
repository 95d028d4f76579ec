/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA engine wire format: what one side's engine writes into the other's
 * memory (scratchpads, inbox, doorbells, TQP descriptors and completions,
 * command slots), the numbering the faces share (TQP ids, command ops), and
 * the pure checks applied to it before use. The faces' own formats live
 * beside them: net/ntrdma_net_wire.h, rdma/ntrdma_verbs_wire.h.
 * Self-contained C (no kernel headers) so the userspace unit tests compile
 * the very same code; the includer provides the fixed-width types
 * (u8/u16/u32/u64/s32).
 *
 * Every value read from the peer is hostile until one of the ntrdma_wire_*
 * checks below has accepted it.
 */
#ifndef NTRDMA_WIRE_H
#define NTRDMA_WIRE_H

#define NTRDMA_MAGIC		0x4e545244u	/* "NTRD" */
#define NTRDMA_VERSION		4u

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
#define NTRDMA_TQP_RING		256u
#define NTRDMA_NET_QUEUES_MAX	4

/* Which TQP carries what: each face owns its own ids. */
enum ntrdma_tqp_id {
	NTRDMA_TQP_NET = 0,	/* Ethernet: NET .. NET + NET_QUEUES_MAX - 1 */
	NTRDMA_TQP_VERBS = 7,	/* verbs: every QP's segments */
	NTRDMA_TQP_COUNT
};

/* Virtual doorbell numbers: the command channel, then four per TQP. */
#define NTRDMA_VDB_CMD		0	/* requests or responses arrived */
enum ntrdma_tqp_vdb {
	NTRDMA_TQP_VDB_RX,	/* new completions in our receive ring */
	NTRDMA_TQP_VDB_TXWAKE,	/* the peer posted receive buffers */
	NTRDMA_TQP_VDB_STATE,	/* the peer opened or closed its end */
	NTRDMA_TQP_VDB_KICK,	/* the peer wrote what the TQP's user watches */
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

/* Command ops: the engine's diagnostics, then each face's. */
enum ntrdma_cmd_op {
	NTRDMA_CMD_ECHO = 1,	/* diagnostics: answer the data */
	NTRDMA_CMD_DELAY = 2,	/* diagnostics: answer after u32 ms */
	NTRDMA_CMD_CM_REQ = 8,	/* verbs rdma_cm: connect */
	NTRDMA_CMD_CM_ACCEPT,
	NTRDMA_CMD_CM_REJECT,
	NTRDMA_CMD_CM_DISC,
	NTRDMA_CMD_MR_EXPORT,	/* verbs direct placement: an MR we export */
	NTRDMA_CMD_MR_REVOKE,	/* ...no longer (answered once quiesced) */
	NTRDMA_CMD_QP_EXPORT,	/* ...a QP that takes placements, or not */
	NTRDMA_CMD_OPS = 32
};

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

/*
 * The inbox: one per side, in that side's own memory, written only by the
 * peer (through its flat window) and read only by its owner.
 */
struct ntrdma_inbox {
	u32 magic;
	u32 epoch;		/* the writer's epoch, for stale-write checks */
	u32 hb_seq;		/* heartbeat counter */
	u32 left;		/* the writer's epoch once it left the session */
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

#endif /* NTRDMA_WIRE_H */
