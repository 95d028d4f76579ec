/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * NTRDMA verbs user ABI: shared by the kernel driver (rdma/ntrdma_*.c) and
 * the userspace provider (rdma/provider/). Fixed-width types only; every
 * structure is padded to a multiple of 8 bytes. It lives where it would
 * upstream (include/uapi/rdma/, as rdma_user_rxe.h and siw-abi.h do); both
 * sides include it as <rdma/ntrdma-abi.h>.
 *
 * Queues live in kernel memory that the provider maps (mmap of the uverbs
 * file at the offset returned in the create response). A ring is a control
 * block (struct ntrdma_ring_ctl, NTRDMA_RING_CTL_SIZE bytes) followed by
 * `entries` slots of `stride` bytes; `entries` is a power of two and the
 * indexes are free-running 32-bit counters (slot = index & (entries - 1)).
 *
 *   CQ: the kernel produces (prod), the user consumes (cons). The user arms
 *       the CQ by writing NTRDMA_CQ_ARM_* into `arm`.
 *   SQ, RQ: the user produces (prod), the kernel consumes (cons). The kernel
 *       never trusts prod: it checks prod - cons <= entries and copies every
 *       WQE out of the ring before validating and using it.
 *   SQ, RQ: the kernel sets `arm` to NTRDMA_RING_FLUSH when the QP enters
 *       ERR; work posted after that is flushed by the next POST_SEND
 *       doorbell, which the provider rings when it sees the flag.
 *   RQ of a user QP (NTRDMA_QP_RQ_DONE): a receive completes in its own
 *       slot (struct ntrdma_recv_done), written by the kernel or, for a
 *       SEND the peer placed, by the peer; the provider polls the slots
 *       of a CQ's QPs beside its ring, and the slots stay the user's until
 *       it polled them. `cq_arm` is the provider's copy of the CQ's arm
 *       word, which the peer reads.
 *   SQ doorbell: needed only when no earlier WQE is still outstanding
 *       (cons == the producer index before this post) or the flag is set:
 *       while a WQE is outstanding, the kernel looks at prod again when it
 *       completes (both sides order their index store before the other
 *       index's load with a full barrier).
 */
#ifndef NTRDMA_ABI_H
#define NTRDMA_ABI_H

#include <linux/types.h>

#define NTRDMA_UVERBS_ABI_VERSION	2

#define NTRDMA_MAX_SGE		16
#define NTRDMA_MAX_INLINE	256	/* NTRDMA_MAX_SGE * sizeof(sge) */

struct ntrdma_ring_ctl {
	__u32 prod;		/* written by the producer only */
	__u32 pad0[15];
	__u32 cons;		/* written by the consumer only */
	__u32 pad1[15];
	__u32 arm;		/* CQ: NTRDMA_CQ_ARM_*, by the user; RQ: flag */
	__u32 pad2[15];
	__u32 cq_arm;		/* RQ: its CQ's arm word, by the user */
	__u32 pad3[15];
};

#define NTRDMA_RING_CTL_SIZE	256

#define NTRDMA_RING_FLUSH	1	/* SQ/RQ arm word: the QP is in ERR */

enum {
	NTRDMA_CQ_ARM_NEXT	= 1 << 0,	/* next completion */
	NTRDMA_CQ_ARM_SOLICITED	= 1 << 1,	/* next solicited completion */
};

struct ntrdma_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/*
 * A completion's flags, as ibv_wc has them. The kernel's IB_WC_* differ
 * (IB_WC_WITH_INVALIDATE is IBV_WC_IP_CSUM_OK's bit).
 */
enum ntrdma_wc_flags {
	NTRDMA_WC_GRH		= 1 << 0,	/* IBV_WC_GRH */
	NTRDMA_WC_WITH_IMM	= 1 << 1,	/* IBV_WC_WITH_IMM */
	NTRDMA_WC_WITH_INV	= 1 << 3,	/* IBV_WC_WITH_INV */
};

/* A completion, as ibv_wc carries it (opcode and status: IBV_WC_* values). */
struct ntrdma_cqe {
	__aligned_u64 wr_id;
	__u32 status;
	__u32 opcode;
	__u32 byte_len;
	__u32 qp_num;
	__u32 imm_data;		/* big endian, as on the wire */
	__u32 wc_flags;		/* NTRDMA_WC_*: the IBV_WC_* values */
	__u32 src_qp;
	__u32 vendor_err;
};

/*
 * Send WQE: opcode is an IBV_WR_* value, flags IBV_SEND_* values.
 * LOCAL_INV and SEND_WITH_INV: rkey (and imm_data) the key to invalidate.
 * BIND_MW: rkey the window's current key (its index names it), imm_data
 * the key it takes, remote_addr and compare_add the range (length 0:
 * unbind), swap the MR's lkey (low 32 bits) and the access granted
 * (IBV_ACCESS_*, high 32 bits).
 */
struct ntrdma_send_wqe {
	__aligned_u64 wr_id;
	__u32 opcode;
	__u32 flags;
	__u32 num_sge;		/* or, with IBV_SEND_INLINE, 0 */
	__u32 inline_len;	/* bytes of inline data in sge[] */
	__u32 imm_data;		/* big endian; or invalidate rkey */
	__u32 rkey;		/* UD: the remote Q_Key */
	__aligned_u64 remote_addr;
	__aligned_u64 compare_add;
	__aligned_u64 swap;
	__u32 remote_qpn;	/* UD: the destination QP */
	__u32 ud_flags;		/* UD: NTRDMA_UD_* */
	union {
		struct ntrdma_sge sge[NTRDMA_MAX_SGE];
		__u8 inline_data[NTRDMA_MAX_INLINE];
	};
};

/*
 * UD send WQEs: the address handle lives in the provider; it names a QP of
 * this device (the GRH's DGID is one of our GIDs) or of the peer.
 */
#define NTRDMA_UD_LOOPBACK	1

/*
 * A receive's completion in its RQ slot (NTRDMA_QP_RQ_DONE): as struct
 * ntrdma_cqe without what the provider knows (wr_id, qp_num). `seq` is
 * written last: the WQE's index + 1. The provider writes the index itself
 * when it posts, so a slot completed in an earlier lap never matches.
 */
struct ntrdma_recv_done {
	__u32 status;
	__u32 opcode;
	__u32 byte_len;
	__u32 imm_data;		/* big endian */
	__u32 wc_flags;
	__u32 src_qp;
	__u32 vendor_err;
	__u32 seq;
};

struct ntrdma_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;
	__u32 reserved;
	struct ntrdma_sge sge[NTRDMA_MAX_SGE];
	struct ntrdma_recv_done done;
};

struct ntrdma_alloc_ucontext_resp {
	__u32 abi_version;
	__u32 max_sge;
	__u32 max_inline;
	__u32 ring_ctl_size;
	__u32 cqe_size;
	__u32 send_wqe_size;
	__u32 recv_wqe_size;
	__u32 reserved;
};

struct ntrdma_create_cq_resp {
	__aligned_u64 ring_offset;	/* mmap offset */
	__aligned_u64 ring_size;	/* bytes to map */
	__u32 entries;
	__u32 cq_id;
};

struct ntrdma_create_srq_resp {
	__aligned_u64 ring_offset;
	__aligned_u64 ring_size;
	__u32 entries;
	__u32 reserved;
};

#define NTRDMA_QP_RQ_DONE	1	/* receives complete in their RQ slots */

struct ntrdma_create_qp_resp {
	__aligned_u64 sq_offset;
	__aligned_u64 sq_size;
	__aligned_u64 rq_offset;
	__aligned_u64 rq_size;
	__u32 sq_entries;
	__u32 rq_entries;
	__u32 qp_num;
	__u32 flags;		/* NTRDMA_QP_* */
};

#endif /* NTRDMA_ABI_H */
