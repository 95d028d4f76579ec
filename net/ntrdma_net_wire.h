/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA Ethernet face wire format: the meta word each frame's TQP
 * completion carries (checksum and GSO state), and its pure check. Like the
 * engine's wire header it is self-contained C that the unit tests compile;
 * the includer provides the fixed-width types.
 */
#ifndef NTRDMA_NET_WIRE_H
#define NTRDMA_NET_WIRE_H

/* What the Ethernet face keeps in a TQP completion's meta word. */
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

#define NTRDMA_NET_MIN_FRAME	14u	/* an Ethernet header */
#define NTRDMA_NET_TCP_CSUM	16u	/* offsetof(struct tcphdr, check) */
#define NTRDMA_NET_TCP_HLEN	20u	/* the smallest TCP header */

/* The meta word of a frame of @len bytes, checked as virtio_net checks its
 * header: 0 when usable, -5 for a runt (no Ethernet header), -3 for unknown
 * flags, -4 when the checksum or GSO fields do not fit the frame (a GSO
 * frame must name a whole TCP header, its checksum field where TCP has it).
 */
static inline int ntrdma_net_check_meta(const struct ntrdma_net_meta *m,
					u32 len)
{
	u32 gso = m->flags & (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6);

	if (len < NTRDMA_NET_MIN_FRAME)
		return -5;
	if (m->flags & ~NTRDMA_NET_FLAGS)
		return -3;
	if (gso == (NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6))
		return -4;
	/* A GSO frame carries a TCP checksum left to finish. */
	if (gso && (!m->gso_size || !(m->flags & NTRDMA_NET_CSUM_OK) ||
		    m->csum_start < NTRDMA_NET_MIN_FRAME ||
		    m->csum_offset != NTRDMA_NET_TCP_CSUM ||
		    (u32)m->csum_start + NTRDMA_NET_TCP_HLEN > len))
		return -4;
	if ((m->csum_start || m->csum_offset) &&
	    (u32)m->csum_start + m->csum_offset + 2 > len)
		return -4;
	return 0;
}

/* Queue 0's state word (the TQP's, 0 while closed): the sender's queue
 * count and what it asks of the other side. Every other queue's is 1 while
 * open.
 */
#define NTRDMA_NET_STATE_QUEUES	0xffu
#define NTRDMA_NET_STATE_XDP	0x100u	/* whole frames, checksums complete */

/* Queue 0's state word @state split: 0 when usable, -3 for unknown flags
 * or more than @max_queues queues.
 */
static inline int ntrdma_net_state_unpack(u32 state, u32 max_queues,
					  u32 *queues, bool *xdp)
{
	*queues = state & NTRDMA_NET_STATE_QUEUES;
	*xdp = state & NTRDMA_NET_STATE_XDP;
	if (state & ~(NTRDMA_NET_STATE_QUEUES | NTRDMA_NET_STATE_XDP) ||
	    *queues > max_queues)
		return -3;
	return 0;
}

#endif /* NTRDMA_NET_WIRE_H */
