/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA wire format: what one side writes into the other's memory, and the
 * pure checks applied to it before use. Self-contained C (no kernel headers)
 * so the userspace unit tests compile the very same code; the includer
 * provides the fixed-width types (u8/u16/u32/u64) and __le* as plain ints.
 *
 * Every value read from the peer is hostile until one of the ntrdma_wire_*
 * checks below has accepted it.
 */
#ifndef NTRDMA_WIRE_H
#define NTRDMA_WIRE_H

#define NTRDMA_MAGIC		0x4e545244u	/* "NTRD" */
#define NTRDMA_VERSION		1u

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

/* Virtual doorbell numbers. */
#define NTRDMA_VDB_NET_RX	0	/* new completions in our net RX ring */
#define NTRDMA_VDB_NET_TXWAKE	1	/* the peer posted net receive buffers */
#define NTRDMA_VDB_NET_STATE	2	/* the peer's netdev opened or closed */

/* The net queue pair: ring sizes are powers of two. */
#define NTRDMA_NET_RING		256u

/* A receive buffer the peer posted, written into the sender's inbox. */
struct ntrdma_wire_rxd {
	u64 addr;		/* DMA address in the poster's memory */
	u32 len;		/* bytes the sender may write there */
	u32 seq;		/* post sequence number (== ring position) */
};

#define NTRDMA_CQE_CSUM_OK	0x1u	/* data verified/complete: skip csum */
#define NTRDMA_CQE_GSO_TCPV4	0x2u
#define NTRDMA_CQE_GSO_TCPV6	0x4u
#define NTRDMA_CQE_FLAGS	0x7u

/* A completion the sender wrote into the receiver's inbox. */
struct ntrdma_wire_cqe {
	u32 len;		/* bytes written into the posted buffer */
	u32 seq;		/* the rxd seq this completes */
	u16 flags;
	u16 gso_size;
	u16 csum_start;		/* for CHECKSUM_PARTIAL GSO frames */
	u16 csum_offset;
};

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
	/* net QP: buffers the peer posted for our transmissions */
	u32 net_post_prod;
	u32 net_peer_open;	/* the peer's netdev is up: send to it */
	u32 net_rx_event;	/* ring NET_RX when our cq_prod passes this */
	u32 net_tx_event;	/* ring TXWAKE when our post_prod passes this */
	u32 pad1[12];
	struct ntrdma_wire_rxd net_rxd[NTRDMA_NET_RING];
	/* net QP: completions for the buffers we posted to the peer */
	u32 net_cq_prod;
	u32 pad2[15];
	struct ntrdma_wire_cqe net_cqe[NTRDMA_NET_RING];
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
	if (c->flags & ~NTRDMA_CQE_FLAGS)
		return -3;
	if ((c->flags & NTRDMA_CQE_GSO_TCPV4) &&
	    (c->flags & NTRDMA_CQE_GSO_TCPV6))
		return -4;
	/* A GSO frame carries a TCP checksum left to finish. */
	if ((c->flags & (NTRDMA_CQE_GSO_TCPV4 | NTRDMA_CQE_GSO_TCPV6)) &&
	    (!c->gso_size || !(c->flags & NTRDMA_CQE_CSUM_OK) ||
	     !c->csum_start || (u32)c->csum_start + c->csum_offset + 2 > c->len))
		return -4;
	return 0;
}

#endif /* NTRDMA_WIRE_H */
