/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libntrdma: the provider's objects and what its files share (ntrdma.c:
 * the verbs; ntrdma_wr.c: the work request API of ibv_qp_ex).
 */
#ifndef NTRDMA_PROVIDER_H
#define NTRDMA_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* ntrdma_private_abi<PABI>.h: CMakeLists.txt names the libibverbs' one. */
#ifndef NTR_PRIVATE_ABI_H
#error "NTR_PRIVATE_ABI_H is not set: build the provider with rdma/provider/CMakeLists.txt"
#endif
#include NTR_PRIVATE_ABI_H
#include <rdma/ntrdma-abi.h>

#define NTR_CMD(name, kcmd, drv)                                               \
	struct name {                                                          \
		struct kcmd ibv_cmd;                                           \
		drv;                                                           \
	}

struct ntr_device {
	struct verbs_device vdev;
};

struct ntr_context {
	struct verbs_context vctx;
	struct ntrdma_alloc_ucontext_resp caps;
};

struct ntr_ring {
	void *buf;
	size_t size;
	uint32_t entries;
	uint32_t stride;
};

struct ntr_qp;

struct ntr_cq {
	struct verbs_cq vcq;		/* vcq.cq; vcq.cq_ex when made _ex */
	struct ntr_ring ring;
	pthread_spinlock_t lock;
	/*
	 * The QPs whose receives complete in their RQ slots (under lock): a
	 * ring, polled from rq_next on, taking turns with the CQ's own ring.
	 */
	struct ntr_qp *rq_next;
	bool rq_turn;
	bool rq_armed;			/* their cq_arm words may be set */
	/* ibv_cq_ex polling (ntrdma_cq_ex.c), under lock */
	struct ntrdma_cqe ex_e;
	const struct ntrdma_cqe *ex_cur;
};

struct ntr_srq {
	struct ibv_srq ibsrq;
	struct ntr_ring ring;
	pthread_spinlock_t lock;
	uint32_t max_sge;
};

/*
 * An address handle (UD): the peer's QPs, or this device's when the GRH's
 * DGID is one of our GIDs (LIDs route nothing: one link, one peer).
 */
struct ntr_ah {
	struct ibv_ah ibah;
	bool loopback;
};

static inline struct ntr_ah *to_ah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct ntr_ah, ibah);
}

/* A work request being built through ibv_qp_ex (ntrdma_wr.c). */
struct ntr_wr_state {
	uint32_t start;			/* prod when ibv_wr_start() ran */
	uint32_t prod;			/* next free slot */
	struct ntrdma_send_wqe *cur;	/* the WQE the setters fill */
	int err;			/* first error: wr_complete says it */
};

struct ntr_qp {
	struct verbs_qp vqp;		/* vqp.qp; vqp.qp_ex with the WR API */
	struct ntr_ring sq;
	struct ntr_ring rq;
	pthread_spinlock_t sq_lock;
	pthread_spinlock_t rq_lock;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline;
	struct ntr_wr_state wr;		/* under sq_lock */
	/*
	 * NTRDMA_QP_RQ_DONE: the next RQ slot to complete (written under the
	 * CQ's lock, read by post_recv), and the QP's place in its CQ's ring
	 * of such QPs.
	 */
	struct ntr_cq *rcq;
	uint32_t rq_done;
	struct ntr_qp *rq_prev, *rq_nxt;
	/*
	 * NTRDMA_QP_RQ_DONE: each slot's wr_id, kept here: the ring is the
	 * peer's to write (placed SENDs), the wr_id only ours to return.
	 */
	uint64_t *rq_wrid;
};

static inline struct ntr_context *to_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct ntr_context, vctx.context);
}

static inline struct ntr_cq *to_cq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct ntr_cq, vcq.cq);
}

static inline struct ntr_srq *to_srq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct ntr_srq, ibsrq);
}

static inline struct ntr_qp *to_qp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct ntr_qp, vqp.qp);
}

static inline struct ntrdma_ring_ctl *ring_ctl(struct ntr_ring *r)
{
	return r->buf;
}

static inline void *ring_slot(struct ntr_ring *r, uint32_t idx)
{
	return (char *)r->buf + NTRDMA_RING_CTL_SIZE +
	       (size_t)(idx & (r->entries - 1)) * r->stride;
}

/* ntrdma.c */
int ntr_sq_publish(struct ntr_qp *qp, uint32_t start, uint32_t prod);
void ntr_set_ud_addr(struct ntrdma_send_wqe *wqe, struct ibv_ah *ah,
		     uint32_t remote_qpn, uint32_t remote_qkey);
void ntr_set_bind(struct ntrdma_send_wqe *wqe, struct ibv_mw *mw,
		  uint32_t rkey, const struct ibv_mw_bind_info *info);

/* ntrdma.c */
bool ntr_cq_take(struct ntr_cq *cq, struct ntrdma_cqe *e);
struct ntr_cq *ntr_cq_create(struct ibv_context *context, int cqe,
			     struct ibv_comp_channel *channel, int comp_vector);

/* ntrdma_cq_ex.c */
struct ibv_cq_ex *ntr_create_cq_ex(struct ibv_context *context,
				   struct ibv_cq_init_attr_ex *attr);

/* ntrdma_wr.c */
#define NTR_WR_OPS                                                             \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |       \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                   \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |         \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |         \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)
/* What a UC QP does not do: nothing is answered on it. */
#define NTR_UC_NO_OPS                                                          \
	(IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |         \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
void ntr_wr_init(struct ntr_qp *qp);

#endif /* NTRDMA_PROVIDER_H */
