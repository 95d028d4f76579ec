// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA kernel verbs test: the ib_device as a kernel user (a ULP) sees it.
 *
 * Loaded with the names of two ib_devices whose QPs reach each other
 * (local=ntrdma0 peer=ntrdma1: the two ports of a loopback NTB), module
 * init connects one RC QP on each and runs the tests below, synchronously,
 * every wait bounded (KV_TIMEOUT). Each result goes to the kernel log as a
 * KTAP line ("ntrdma_kverbs: ok 3 frmr local invalidate"), with "#" lines
 * saying what was expected and what came; the summary ("pass=N fail=M") is
 * the read-only parameter /sys/module/ntrdma_kverbs_test/parameters/summary.
 * Everything is released before init returns 0; the caller then removes the
 * module (selftests/ntrdma_kverbs_test.sh).
 *
 * Side 0 (local) is the requester; side 1 (peer) owns the fast-registration
 * MR and posts REG_MR/LOCAL_INV on its own QP. Every test gets fresh PDs,
 * CQs and QPs: an access error leaves both QPs in ERR, and completions of
 * one test never reach the next one's (completion structures live until
 * the CQs are freed).
 */

#define pr_fmt(fmt) "ntrdma_kverbs: " fmt

#include <linux/completion.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

static char *local = "ntrdma0";
module_param(local, charp, 0444);
MODULE_PARM_DESC(local, "ib_device of the requester side (default ntrdma0)");

static char *peer = "ntrdma1";
module_param(peer, charp, 0444);
MODULE_PARM_DESC(peer, "ib_device of the responder side (default ntrdma1)");

static uint per_io_iters = 10000;
module_param(per_io_iters, uint, 0444);
MODULE_PARM_DESC(per_io_iters,
		 "I/Os of the per-I/O registration test (default 10000)");

static char summary[64] = "not run";
module_param_string(summary, summary, sizeof(summary), 0444);
MODULE_PARM_DESC(summary, "result of the run: pass=N fail=M (read only)");

#define KV_TIMEOUT_S	10
#define KV_TIMEOUT	(KV_TIMEOUT_S * HZ)
#define KV_CQE		128
#define KV_WR		32
#define KV_NCOMP	16
#define KV_NPAGES	4
#define KV_MR_PAGES	512	/* the largest FRMR a test registers */
#define KV_BUF_LEN	(KV_NPAGES * PAGE_SIZE)
#define KV_PSN0		0x1234
#define KV_PSN1		0x5678
#define KV_QP_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)
#define KV_MR_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_READ)

#define kv_diag(fmt, ...) pr_info("# " fmt "\n", ##__VA_ARGS__)

/* One work request's completion, filled by the CQ's poller (softirq). */
struct kv_comp {
	struct ib_cqe cqe;
	struct completion done;
	struct ib_wc wc;
};

struct kv_side {
	struct ib_device *dev;
	struct ib_pd *pd;
	unsigned int pd_flags;	/* ib_alloc_pd()'s */
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_qp *qp2;	/* a second connection, when a test needs it */
	void *buf;		/* KV_BUF_LEN bytes, pd->local_dma_lkey */
	u64 dma;
	bool mapped;
	atomic_t events;	/* QP async events */
	int last_event;
};

struct kv_ctx {
	struct kv_side s[2];
	/* Side 1's fast-registration MR over up to KV_MR_PAGES pages */
	struct ib_mr *mr;
	struct page *pages[KV_MR_PAGES];
	struct scatterlist sgl[KV_MR_PAGES];
	int npages;
	int nents;		/* mapped scatterlist entries, 0: not mapped */
	/* Side 0's large sink (a test's), freed after the QPs */
	void *big;
	u64 big_dma;
	size_t big_len;
	const char *skip;	/* why the test showed nothing (ok # SKIP) */
	bool irqs_off;		/* kv_send() posts with interrupts off */
	struct kv_comp comp[KV_NCOMP];
	int ncomp;
};

static void kv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kv_comp *c = container_of(wc->wr_cqe, struct kv_comp, cqe);

	c->wc = *wc;
	complete(&c->done);
}

/* A fresh completion structure of the test (they live as long as @x). */
static struct kv_comp *kv_comp(struct kv_ctx *x)
{
	struct kv_comp *c;

	if (WARN_ON_ONCE(x->ncomp >= KV_NCOMP))
		return NULL;
	c = &x->comp[x->ncomp++];
	c->cqe.done = kv_done;
	init_completion(&c->done);
	return c;
}

/* Wait for @c; 0 when it completed with @status (and @opcode on success). */
static int kv_expect(struct kv_comp *c, enum ib_wc_status status,
		     enum ib_wc_opcode opcode, const char *what)
{
	if (!wait_for_completion_timeout(&c->done, KV_TIMEOUT)) {
		kv_diag("%s: no completion in %d s", what, KV_TIMEOUT_S);
		return -ETIMEDOUT;
	}
	if (c->wc.status != status) {
		kv_diag("%s: status %s (%d), expected %s (%d)", what,
			ib_wc_status_msg(c->wc.status), c->wc.status,
			ib_wc_status_msg(status), status);
		return -EIO;
	}
	if (status == IB_WC_SUCCESS && c->wc.opcode != opcode) {
		kv_diag("%s: wc opcode %d, expected %d", what, c->wc.opcode,
			opcode);
		return -EIO;
	}
	return 0;
}

static int kv_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			const char *what)
{
	int rc = ib_post_send(qp, wr, NULL);

	if (rc)
		kv_diag("%s: ib_post_send: %d", what, rc);
	return rc;
}

/* As a ULP posting from its completion handler does, when @x says so. */
static int kv_post_send_as(struct kv_ctx *x, struct ib_qp *qp,
			   const struct ib_send_wr *wr, const char *what)
{
	unsigned long flags;
	int rc;

	if (!x->irqs_off)
		return kv_post_send(qp, wr, what);
	local_irq_save(flags);
	rc = ib_post_send(qp, wr, NULL);
	local_irq_restore(flags);
	if (rc)
		kv_diag("%s: ib_post_send with interrupts off: %d", what, rc);
	return rc;
}

static void kv_qp_event(struct ib_event *ev, void *ctx)
{
	struct kv_side *s = ctx;

	s->last_event = ev->event;
	atomic_inc(&s->events);
}

/* ---- data patterns ---- */

static u8 kv_byte(u8 seed, size_t off)
{
	return seed + off * 13 + (off >> 8);
}

static void kv_fill(void *p, size_t off, size_t len, u8 seed)
{
	u8 *b = p;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = kv_byte(seed, off + i);
}

/* 0 when @p holds the pattern @seed of offsets [off, off + len). */
static int kv_check(const void *p, size_t off, size_t len, u8 seed,
		    const char *what)
{
	const u8 *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		if (b[i] != kv_byte(seed, off + i)) {
			kv_diag("%s: byte %zu is 0x%02x, expected 0x%02x",
				what, off + i, b[i], kv_byte(seed, off + i));
			return -EIO;
		}
	}
	return 0;
}

/* The MR's pages as one buffer of KV_NPAGES pages. */
static void kv_pages_fill(struct kv_ctx *x, u8 seed)
{
	int i;

	for (i = 0; i < x->npages; i++)
		kv_fill(page_address(x->pages[i]), i * PAGE_SIZE, PAGE_SIZE,
			seed);
}

static int kv_pages_check(struct kv_ctx *x, size_t off, size_t len, u8 seed,
			  const char *what)
{
	size_t n;
	int i, rc;

	while (len) {
		i = off / PAGE_SIZE;
		n = min_t(size_t, len, PAGE_SIZE - off % PAGE_SIZE);
		rc = kv_check(page_address(x->pages[i]) + off % PAGE_SIZE, off,
			      n, seed, what);
		if (rc)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- set-up and tear-down ---- */

/* An RC QP of @s's PD and CQ in @qp. */
static int kv_qp_create(struct kv_side *s, struct ib_qp **qp)
{
	struct ib_qp_init_attr ia = {
		.event_handler = kv_qp_event,
		.qp_context = s,
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.cap = {
			.max_send_wr = KV_WR,
			.max_recv_wr = KV_WR,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
	};
	struct ib_qp *q = ib_create_qp(s->pd, &ia);

	if (IS_ERR(q)) {
		kv_diag("%s: ib_create_qp: %ld", dev_name(&s->dev->dev),
			PTR_ERR(q));
		return PTR_ERR(q);
	}
	*qp = q;
	return 0;
}

static int kv_side_init(struct kv_side *s)
{
	struct ib_pd *pd;
	struct ib_cq *cq;

	atomic_set(&s->events, 0);
	s->buf = kzalloc(KV_BUF_LEN, GFP_KERNEL);
	if (!s->buf)
		return -ENOMEM;
	s->dma = ib_dma_map_single(s->dev, s->buf, KV_BUF_LEN,
				   DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(s->dev, s->dma)) {
		kv_diag("%s: ib_dma_map_single failed", dev_name(&s->dev->dev));
		return -ENOMEM;
	}
	s->mapped = true;

	pd = ib_alloc_pd(s->dev, s->pd_flags);
	if (IS_ERR(pd)) {
		kv_diag("%s: ib_alloc_pd: %ld", dev_name(&s->dev->dev),
			PTR_ERR(pd));
		return PTR_ERR(pd);
	}
	s->pd = pd;
	cq = ib_alloc_cq(s->dev, NULL, KV_CQE, 0, IB_POLL_SOFTIRQ);
	if (IS_ERR(cq)) {
		kv_diag("%s: ib_alloc_cq: %ld", dev_name(&s->dev->dev),
			PTR_ERR(cq));
		return PTR_ERR(cq);
	}
	s->cq = cq;
	return kv_qp_create(s, &s->qp);
}

/* @s's @qp to RTS, connected to @o's @oqp (their PSNs @psn and @opsn). */
static int kv_side_connect(struct kv_side *s, struct ib_qp *qp,
			   struct kv_side *o, struct ib_qp *oqp, u32 psn,
			   u32 opsn)
{
	struct ib_port_attr pa;
	struct ib_qp_attr a;
	int rc;

	rc = ib_query_port(o->dev, 1, &pa);
	if (rc || pa.state != IB_PORT_ACTIVE) {
		kv_diag("%s port 1: rc %d state %d, expected ACTIVE",
			dev_name(&o->dev->dev), rc, rc ? -1 : pa.state);
		return rc ? rc : -ENOLINK;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = KV_QP_ACCESS;
	rc = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			  IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (rc) {
		kv_diag("QP %u to INIT: %d", qp->qp_num, rc);
		return rc;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_4096;
	a.dest_qp_num = oqp->qp_num;
	a.rq_psn = opsn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	/*
	 * The port connects rdma_cm through the iw_cm (its core protocol is
	 * iWARP, no IB address type); the address vector names the one peer
	 * either way. Anything else (RoCE, OPA) would be a wrong port.
	 */
	a.ah_attr.type = rdma_ah_find_type(s->dev, 1);
	if (a.ah_attr.type != RDMA_AH_ATTR_TYPE_IB &&
	    a.ah_attr.type != RDMA_AH_ATTR_TYPE_UNDEFINED) {
		kv_diag("%s: address type %d, expected IB (%d) or none (%d)",
			dev_name(&s->dev->dev), a.ah_attr.type,
			RDMA_AH_ATTR_TYPE_IB, RDMA_AH_ATTR_TYPE_UNDEFINED);
		return -EINVAL;
	}
	rdma_ah_set_dlid(&a.ah_attr, pa.lid);
	rdma_ah_set_sl(&a.ah_attr, 0);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rc = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			  IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			  IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (rc) {
		kv_diag("QP %u to RTR: %d", qp->qp_num, rc);
		return rc;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.sq_psn = psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	rc = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN |
			  IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			  IB_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		kv_diag("QP %u to RTS: %d", qp->qp_num, rc);
	return rc;
}

/* Both sides' PD, CQ, QP and buffer; the QPs connected (RTS). */
static int kv_setup(struct kv_ctx *x)
{
	int rc;

	rc = kv_side_init(&x->s[0]);
	if (!rc)
		rc = kv_side_init(&x->s[1]);
	if (!rc)
		rc = kv_side_connect(&x->s[0], x->s[0].qp, &x->s[1],
				     x->s[1].qp, KV_PSN0, KV_PSN1);
	if (!rc)
		rc = kv_side_connect(&x->s[1], x->s[1].qp, &x->s[0],
				     x->s[0].qp, KV_PSN1, KV_PSN0);
	return rc;
}

/* A second QP on each side (same PD and CQ), the two connected. */
static int kv_setup_qp2(struct kv_ctx *x)
{
	struct kv_side *a = &x->s[0], *b = &x->s[1];
	int rc;

	rc = kv_qp_create(a, &a->qp2);
	if (!rc)
		rc = kv_qp_create(b, &b->qp2);
	if (!rc)
		rc = kv_side_connect(a, a->qp2, b, b->qp2, KV_PSN0 + 1,
				     KV_PSN1 + 1);
	if (!rc)
		rc = kv_side_connect(b, b->qp2, a, a->qp2, KV_PSN1 + 1,
				     KV_PSN0 + 1);
	return rc;
}

/* Side 1's FRMR over @npages fresh pages, mapped (ib_map_mr_sg). */
static int kv_frmr_setup(struct kv_ctx *x, int npages)
{
	struct kv_side *s = &x->s[1];
	struct ib_mr *mr;
	int i, n;

	sg_init_table(x->sgl, npages);
	for (i = 0; i < npages; i++) {
		x->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!x->pages[i])
			return -ENOMEM;
		x->npages++;
		sg_set_page(&x->sgl[i], x->pages[i], PAGE_SIZE, 0);
	}
	n = ib_dma_map_sg(s->dev, x->sgl, npages, DMA_BIDIRECTIONAL);
	if (n <= 0) {
		kv_diag("ib_dma_map_sg: %d", n);
		return -ENOMEM;
	}
	x->nents = n;
	mr = ib_alloc_mr(s->pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(mr)) {
		kv_diag("ib_alloc_mr(MEM_REG, %d): %ld", npages, PTR_ERR(mr));
		return PTR_ERR(mr);
	}
	x->mr = mr;
	return 0;
}

/* (Re)map the MR over the scatterlist: the whole of it, page size. */
static int kv_frmr_map(struct kv_ctx *x)
{
	int n = ib_map_mr_sg(x->mr, x->sgl, x->nents, NULL, PAGE_SIZE);

	if (n != x->nents) {
		kv_diag("ib_map_mr_sg: %d, expected %d", n, x->nents);
		return n < 0 ? n : -EIO;
	}
	if (x->mr->length != (u64)x->npages * PAGE_SIZE) {
		kv_diag("MR length %llu after ib_map_mr_sg, expected %lu",
			x->mr->length, x->npages * PAGE_SIZE);
		return -EIO;
	}
	return 0;
}

/* A new key (low 8 bits; the index stays), then REG_MR on side 1's QP. */
static int kv_frmr_reg(struct kv_ctx *x, int access)
{
	struct kv_comp *c = kv_comp(x);
	struct ib_reg_wr wr = {};
	int rc;

	if (!c)
		return -ENOMEM;
	ib_update_fast_reg_key(x->mr, (u8)(x->mr->rkey + 1));
	wr.wr.wr_cqe = &c->cqe;
	wr.wr.opcode = IB_WR_REG_MR;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.mr = x->mr;
	wr.key = x->mr->rkey;
	wr.access = access;
	rc = kv_post_send(x->s[1].qp, &wr.wr, "REG_MR");
	if (!rc)
		rc = kv_expect(c, IB_WC_SUCCESS, IB_WC_REG_MR, "REG_MR");
	return rc;
}

static int kv_frmr_inv(struct kv_ctx *x)
{
	struct kv_comp *c = kv_comp(x);
	struct ib_send_wr wr = {};
	int rc;

	if (!c)
		return -ENOMEM;
	wr.wr_cqe = &c->cqe;
	wr.opcode = IB_WR_LOCAL_INV;
	wr.send_flags = IB_SEND_SIGNALED;
	wr.ex.invalidate_rkey = x->mr->rkey;
	rc = kv_post_send(x->s[1].qp, &wr, "LOCAL_INV");
	if (!rc)
		rc = kv_expect(c, IB_WC_SUCCESS, IB_WC_LOCAL_INV, "LOCAL_INV");
	return rc;
}

/*
 * The opening of the FRMR tests: both sides connected (kv_setup), then side
 * 1's FRMR over @npages fresh pages, mapped and registered with @access.
 */
static int kv_setup_frmr(struct kv_ctx *x, int npages, int access)
{
	int rc;

	rc = kv_setup(x);
	if (!rc)
		rc = kv_frmr_setup(x, npages);
	if (!rc)
		rc = kv_frmr_map(x);
	if (!rc)
		rc = kv_frmr_reg(x, access);
	return rc;
}

/*
 * Side 0 posts RDMA @op between [@off, @off + @len) of its buffer and
 * (@raddr, @rkey), completing in @c (@next chained after it); no wait.
 */
static int kv_rdma_post(struct kv_ctx *x, struct kv_comp *c,
			enum ib_wr_opcode op, size_t off, u32 len, u64 raddr,
			u32 rkey, struct ib_send_wr *next, const char *what)
{
	struct kv_side *s = &x->s[0];
	struct ib_sge sge;
	struct ib_rdma_wr wr = {};

	sge.addr = s->dma + off;
	sge.length = len;
	sge.lkey = s->pd->local_dma_lkey;
	wr.wr.wr_cqe = &c->cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = op;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.wr.next = next;
	wr.remote_addr = raddr;
	wr.rkey = rkey;
	ib_dma_sync_single_for_device(s->dev, s->dma, KV_BUF_LEN,
				      DMA_BIDIRECTIONAL);
	return kv_post_send(s->qp, &wr.wr, what);
}

/* kv_rdma_post, then wait for @status. */
static int kv_rdma(struct kv_ctx *x, enum ib_wr_opcode op, size_t off,
		   u32 len, u64 raddr, u32 rkey, enum ib_wc_status status,
		   const char *what)
{
	struct kv_side *s = &x->s[0];
	struct kv_comp *c = kv_comp(x);
	int rc;

	if (!c)
		return -ENOMEM;
	rc = kv_rdma_post(x, c, op, off, len, raddr, rkey, NULL, what);
	if (!rc)
		rc = kv_expect(c, status, op == IB_WR_RDMA_READ ?
			       IB_WC_RDMA_READ : IB_WC_RDMA_WRITE, what);
	ib_dma_sync_single_for_cpu(s->dev, s->dma, KV_BUF_LEN,
				   DMA_BIDIRECTIONAL);
	return rc;
}

/* Everything @x holds, whatever was set up; QPs first (they use the MR). */
static void kv_teardown(struct kv_ctx *x)
{
	struct kv_side *s;
	int i;

	for (i = 0; i < 2; i++) {
		if (x->s[i].qp2)
			ib_destroy_qp(x->s[i].qp2);
		if (x->s[i].qp)
			ib_destroy_qp(x->s[i].qp);
		x->s[i].qp = NULL;
		x->s[i].qp2 = NULL;
	}
	if (x->big_dma)
		ib_dma_unmap_single(x->s[0].dev, x->big_dma, x->big_len,
				    DMA_FROM_DEVICE);
	kfree(x->big);
	if (x->mr)
		ib_dereg_mr(x->mr);
	if (x->nents)
		ib_dma_unmap_sg(x->s[1].dev, x->sgl, x->npages,
				DMA_BIDIRECTIONAL);
	for (i = 0; i < x->npages; i++)
		__free_page(x->pages[i]);
	for (i = 0; i < 2; i++) {
		s = &x->s[i];
		if (s->cq)
			ib_free_cq(s->cq);
		if (s->pd)
			ib_dealloc_pd(s->pd);
		if (s->mapped)
			ib_dma_unmap_single(s->dev, s->dma, KV_BUF_LEN,
					    DMA_BIDIRECTIONAL);
		kfree(s->buf);
	}
}

/* ---- the tests ---- */

/* Side @side posts one receive of a page of its buffer, completing in @rcv. */
static int kv_recv_on(struct kv_ctx *x, int side, struct kv_comp *rcv)
{
	struct kv_side *s = &x->s[side];
	struct ib_sge rsge;
	struct ib_recv_wr rwr = {};
	int rc;

	rsge.addr = s->dma;
	rsge.length = PAGE_SIZE;
	rsge.lkey = s->pd->local_dma_lkey;
	rwr.wr_cqe = &rcv->cqe;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	rc = ib_post_recv(s->qp, &rwr, NULL);
	if (rc)
		kv_diag("ib_post_recv: %d", rc);
	return rc;
}

static int kv_recv(struct kv_ctx *x, struct kv_comp *rcv)
{
	return kv_recv_on(x, 1, rcv);
}

/*
 * Side 0 sends @len bytes of its buffer (@op: SEND, or SEND_WITH_INV of
 * @inv) into a receive side 1 posted, and waits for the send's success.
 */
static int kv_send(struct kv_ctx *x, enum ib_wr_opcode op, u32 inv, u32 len)
{
	struct kv_side *s0 = &x->s[0];
	struct kv_comp *sc = kv_comp(x);
	struct ib_sge ssge;
	struct ib_send_wr swr = {};
	int rc;

	if (!sc)
		return -ENOMEM;
	ssge.addr = s0->dma;
	ssge.length = len;
	ssge.lkey = s0->pd->local_dma_lkey;
	swr.wr_cqe = &sc->cqe;
	swr.sg_list = &ssge;
	swr.num_sge = 1;
	swr.opcode = op;
	swr.ex.invalidate_rkey = inv;
	swr.send_flags = IB_SEND_SIGNALED;
	ib_dma_sync_single_for_device(s0->dev, s0->dma, KV_BUF_LEN,
				      DMA_TO_DEVICE);
	rc = kv_post_send_as(x, s0->qp, &swr, "SEND");
	if (!rc)
		rc = kv_expect(sc, IB_WC_SUCCESS, IB_WC_SEND, "SEND");
	return rc;
}

/* a: SEND/RECV between kmalloc'd buffers with pd->local_dma_lkey. */
static int kv_test_send_recv(struct kv_ctx *x)
{
	struct kv_side *s1 = &x->s[1];
	struct kv_comp *rcv = kv_comp(x);
	const u32 len = 3000;	/* less than the receive buffer */
	int rc;

	rc = kv_setup(x);
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, len, 0x5a);
	rc = kv_recv(x, rcv);
	if (!rc)
		rc = kv_send(x, IB_WR_SEND, 0, len);
	if (!rc)
		rc = kv_expect(rcv, IB_WC_SUCCESS, IB_WC_RECV, "RECV");
	if (rc)
		return rc;
	if (rcv->wc.byte_len != len) {
		kv_diag("RECV: byte_len %u, expected %u", rcv->wc.byte_len,
			len);
		return -EIO;
	}
	if (rcv->wc.qp != s1->qp) {
		kv_diag("RECV: wc.qp is not the receiving QP");
		return -EIO;
	}
	ib_dma_sync_single_for_cpu(s1->dev, s1->dma, KV_BUF_LEN,
				   DMA_FROM_DEVICE);
	return kv_check(s1->buf, 0, len, 0x5a, "RECV data");
}

/*
 * l: the same SEND posted with interrupts off, as from a completion
 * handler. 3000 bytes go by the DMA channel (over tx_copybreak): the
 * engine must not call the DMA engine there (the emulated one warns).
 */
static int kv_test_send_irqs_off(struct kv_ctx *x)
{
	x->irqs_off = true;
	return kv_test_send_recv(x);
}

/* b: REG_MR, then the other side writes into the FRMR and reads it back. */
static int kv_test_frmr_rw(struct kv_ctx *x)
{
	const size_t total = KV_NPAGES * PAGE_SIZE;
	/* a READ that straddles the first page boundary */
	const size_t roff = PAGE_SIZE - 100;
	const u32 rlen = PAGE_SIZE + 300;
	int rc;

	rc = kv_setup_frmr(x, KV_NPAGES, KV_MR_ACCESS);
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, total, 0x11);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, total, x->mr->iova, x->mr->rkey,
		     IB_WC_SUCCESS, "RDMA WRITE");
	if (!rc)
		rc = kv_pages_check(x, 0, total, 0x11, "FRMR pages after WRITE");
	if (rc)
		return rc;
	/* The owner changes its pages; READ must see that, not our data. */
	kv_pages_fill(x, 0x77);
	memset(x->s[0].buf, 0, total);
	rc = kv_rdma(x, IB_WR_RDMA_READ, roff, rlen, x->mr->iova + roff,
		     x->mr->rkey, IB_WC_SUCCESS, "RDMA READ");
	if (!rc)
		rc = kv_check(x->s[0].buf + roff, roff, rlen, 0x77,
			      "RDMA READ data");
	return rc;
}

/* c: after LOCAL_INV the rkey is refused (and the pages stay unchanged). */
static int kv_test_frmr_inv(struct kv_ctx *x)
{
	int rc;

	rc = kv_setup_frmr(x, KV_NPAGES, KV_MR_ACCESS);
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x21);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_SUCCESS, "RDMA WRITE before LOCAL_INV");
	if (!rc)
		rc = kv_frmr_inv(x);
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x22);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_REM_ACCESS_ERR,
		     "RDMA WRITE after LOCAL_INV");
	if (!rc)
		rc = kv_pages_check(x, 0, PAGE_SIZE, 0x21,
				    "FRMR page after refused WRITE");
	return rc;
}

/* d: re-registered with a new key, the old rkey is refused. */
static int kv_test_frmr_stale(struct kv_ctx *x)
{
	u32 old;
	int rc;

	rc = kv_setup_frmr(x, KV_NPAGES, KV_MR_ACCESS);
	if (rc)
		return rc;
	old = x->mr->rkey;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x31);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova, old,
		     IB_WC_SUCCESS, "RDMA WRITE with the first key");
	/* As ULPs do: invalidate, map again, register with the next key. */
	if (!rc)
		rc = kv_frmr_inv(x);
	if (!rc)
		rc = kv_frmr_map(x);
	if (!rc)
		rc = kv_frmr_reg(x, KV_MR_ACCESS);
	if (rc)
		return rc;
	if (x->mr->rkey == old || x->mr->rkey >> 8 != old >> 8) {
		kv_diag("new rkey 0x%x, old 0x%x: expected the same index",
			x->mr->rkey, old);
		return -EIO;
	}
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x32);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_SUCCESS, "RDMA WRITE with the new key");
	if (!rc)
		rc = kv_pages_check(x, 0, PAGE_SIZE, 0x32,
				    "FRMR page after WRITE with the new key");
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x33);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova, old,
		     IB_WC_REM_ACCESS_ERR, "RDMA WRITE with the stale key");
	if (!rc)
		rc = kv_pages_check(x, 0, PAGE_SIZE, 0x32,
				    "FRMR page after refused WRITE");
	return rc;
}

struct kv_drain {
	struct work_struct work;
	struct ib_qp *qp;
	struct completion done;
};

static void kv_drain_fn(struct work_struct *work)
{
	struct kv_drain *d = container_of(work, struct kv_drain, work);

	ib_drain_qp(d->qp);
	complete(&d->done);
}

/*
 * ib_drain_qp() has no timeout of its own: run it in a work item and wait
 * for it bounded, so that a hang is reported before we wait for good.
 */
static int kv_drain_bounded(struct ib_qp *qp, const char *what)
{
	struct kv_drain d;
	int rc = 0;

	INIT_WORK_ONSTACK(&d.work, kv_drain_fn);
	d.qp = qp;
	init_completion(&d.done);
	queue_work(system_unbound_wq, &d.work);
	if (!wait_for_completion_timeout(&d.done, KV_TIMEOUT)) {
		kv_diag("%s: ib_drain_qp did not return in %d s", what,
			KV_TIMEOUT_S);
		rc = -ETIMEDOUT;
	}
	flush_work(&d.work);
	destroy_work_on_stack(&d.work);
	return rc;
}

#define KV_DRAIN_SENDS	4
#define KV_DRAIN_RECVS	6
#define KV_DRAIN_LEN	256

/*
 * e: with sends and receives outstanding, ib_drain_qp() returns on both
 * sides and everything posted before it has completed (success or flush)
 * by then; received data is right.
 */
static int kv_test_drain(struct kv_ctx *x)
{
	struct kv_side *s0 = &x->s[0], *s1 = &x->s[1];
	struct kv_comp *sc[KV_DRAIN_SENDS], *rcv[KV_DRAIN_RECVS];
	struct ib_send_wr swr;
	struct ib_recv_wr rwr;
	struct ib_sge sge;
	int i, rc, nsent = 0, nrecv = 0;
	enum ib_wc_status st;

	rc = kv_setup(x);
	if (rc)
		return rc;
	for (i = 0; i < KV_DRAIN_RECVS; i++) {
		rcv[i] = kv_comp(x);
		if (!rcv[i])
			return -ENOMEM;
		memset(&rwr, 0, sizeof(rwr));
		sge.addr = s1->dma + i * KV_DRAIN_LEN;
		sge.length = KV_DRAIN_LEN;
		sge.lkey = s1->pd->local_dma_lkey;
		rwr.wr_cqe = &rcv[i]->cqe;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		rc = ib_post_recv(s1->qp, &rwr, NULL);
		if (rc) {
			kv_diag("ib_post_recv %d: %d", i, rc);
			return rc;
		}
	}
	kv_fill(s0->buf, 0, KV_DRAIN_SENDS * KV_DRAIN_LEN, 0x41);
	ib_dma_sync_single_for_device(s0->dev, s0->dma, KV_BUF_LEN,
				      DMA_TO_DEVICE);
	for (i = 0; i < KV_DRAIN_SENDS; i++) {
		sc[i] = kv_comp(x);
		if (!sc[i])
			return -ENOMEM;
		memset(&swr, 0, sizeof(swr));
		sge.addr = s0->dma + i * KV_DRAIN_LEN;
		sge.length = KV_DRAIN_LEN;
		sge.lkey = s0->pd->local_dma_lkey;
		swr.wr_cqe = &sc[i]->cqe;
		swr.sg_list = &sge;
		swr.num_sge = 1;
		swr.opcode = IB_WR_SEND;
		swr.send_flags = IB_SEND_SIGNALED;
		rc = kv_post_send(s0->qp, &swr, "SEND");
		if (rc)
			return rc;
	}
	rc = kv_drain_bounded(s0->qp, "requester");
	if (rc)
		return rc;
	for (i = 0; i < KV_DRAIN_SENDS; i++) {
		if (!completion_done(&sc[i]->done)) {
			kv_diag("SEND %d not completed when ib_drain_qp returned",
				i);
			return -EIO;
		}
		st = sc[i]->wc.status;
		if (st != IB_WC_SUCCESS && st != IB_WC_WR_FLUSH_ERR) {
			kv_diag("SEND %d: status %s", i, ib_wc_status_msg(st));
			return -EIO;
		}
		nsent += st == IB_WC_SUCCESS;
	}
	rc = kv_drain_bounded(s1->qp, "responder");
	if (rc)
		return rc;
	ib_dma_sync_single_for_cpu(s1->dev, s1->dma, KV_BUF_LEN,
				   DMA_FROM_DEVICE);
	for (i = 0; i < KV_DRAIN_RECVS; i++) {
		if (!completion_done(&rcv[i]->done)) {
			kv_diag("RECV %d not completed when ib_drain_qp returned",
				i);
			return -EIO;
		}
		st = rcv[i]->wc.status;
		if (st == IB_WC_WR_FLUSH_ERR)
			continue;
		if (st != IB_WC_SUCCESS || i >= KV_DRAIN_SENDS ||
		    rcv[i]->wc.opcode != IB_WC_RECV ||
		    rcv[i]->wc.byte_len != KV_DRAIN_LEN) {
			kv_diag("RECV %d: status %s opcode %d byte_len %u", i,
				ib_wc_status_msg(st), rcv[i]->wc.opcode,
				rcv[i]->wc.byte_len);
			return -EIO;
		}
		rc = kv_check(s1->buf + i * KV_DRAIN_LEN, i * KV_DRAIN_LEN,
			      KV_DRAIN_LEN, 0x41, "RECV data");
		if (rc)
			return rc;
		nrecv++;
	}
	kv_diag("drain: %d of %d sends acknowledged, %d of %d receives filled",
		nsent, KV_DRAIN_SENDS, nrecv, KV_DRAIN_RECVS);
	/* An acknowledged SEND was placed. */
	if (nrecv < nsent) {
		kv_diag("%d SENDs acknowledged but only %d received", nsent,
			nrecv);
		return -EIO;
	}
	return 0;
}

static int kv_atomic(struct kv_ctx *x, enum ib_wr_opcode op, u64 raddr,
		     u64 cmp_add, u64 swap, const char *what)
{
	struct kv_side *s = &x->s[0];
	struct kv_comp *c = kv_comp(x);
	struct ib_atomic_wr wr = {};
	struct ib_sge sge;
	int rc;

	if (!c)
		return -ENOMEM;
	/* the original value lands in the first 8 bytes of our buffer */
	*(u64 *)s->buf = 0;
	sge.addr = s->dma;
	sge.length = sizeof(u64);
	sge.lkey = s->pd->local_dma_lkey;
	wr.wr.wr_cqe = &c->cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = op;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.remote_addr = raddr;
	wr.rkey = x->mr->rkey;
	wr.compare_add = cmp_add;
	wr.swap = swap;
	ib_dma_sync_single_for_device(s->dev, s->dma, KV_BUF_LEN,
				      DMA_BIDIRECTIONAL);
	rc = kv_post_send(s->qp, &wr.wr, what);
	if (!rc)
		rc = kv_expect(c, IB_WC_SUCCESS,
			       op == IB_WR_ATOMIC_FETCH_AND_ADD ?
			       IB_WC_FETCH_ADD : IB_WC_COMP_SWAP, what);
	ib_dma_sync_single_for_cpu(s->dev, s->dma, KV_BUF_LEN,
				   DMA_BIDIRECTIONAL);
	return rc;
}

/* Compare what the atomic returned and what the target holds now. */
static int kv_atomic_check(struct kv_ctx *x, u64 *target, u64 orig, u64 now,
			   const char *what)
{
	u64 got = *(u64 *)x->s[0].buf;

	if (got != orig || READ_ONCE(*target) != now) {
		kv_diag("%s: returned 0x%llx (expected 0x%llx), target 0x%llx (expected 0x%llx)",
			what, got, orig, READ_ONCE(*target), now);
		return -EIO;
	}
	return 0;
}

/* f: FETCH_AND_ADD and CMP_AND_SWP on an 8-byte target in an FRMR page. */
static int kv_test_atomics(struct kv_ctx *x)
{
	const u64 v0 = 0x1122334455667700ULL, add = 0x11, swap = 0xfeedULL;
	const size_t toff = 64;
	u64 *target, raddr;
	int rc;

	rc = kv_setup_frmr(x, 1, KV_MR_ACCESS | IB_ACCESS_REMOTE_ATOMIC);
	if (rc)
		return rc;
	target = page_address(x->pages[0]) + toff;
	WRITE_ONCE(*target, v0);
	raddr = x->mr->iova + toff;

	rc = kv_atomic(x, IB_WR_ATOMIC_FETCH_AND_ADD, raddr, add, 0,
		       "FETCH_AND_ADD");
	if (!rc)
		rc = kv_atomic_check(x, target, v0, v0 + add, "FETCH_AND_ADD");
	if (!rc)
		rc = kv_atomic(x, IB_WR_ATOMIC_CMP_AND_SWP, raddr, v0 + add,
			       swap, "CMP_AND_SWP (equal)");
	if (!rc)
		rc = kv_atomic_check(x, target, v0 + add, swap,
				     "CMP_AND_SWP (equal)");
	if (!rc)
		rc = kv_atomic(x, IB_WR_ATOMIC_CMP_AND_SWP, raddr, v0, 1,
			       "CMP_AND_SWP (different)");
	if (!rc)
		rc = kv_atomic_check(x, target, swap, swap,
				     "CMP_AND_SWP (different)");
	return rc;
}

/*
 * g: the access flags come from the REG_MR: registered for remote read
 * only, READ works and WRITE is refused (the page unchanged).
 */
static int kv_test_frmr_access(struct kv_ctx *x)
{
	int rc;

	rc = kv_setup_frmr(x, 1, IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_READ);
	if (rc)
		return rc;
	kv_pages_fill(x, 0x51);
	memset(x->s[0].buf, 0, PAGE_SIZE);
	rc = kv_rdma(x, IB_WR_RDMA_READ, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_SUCCESS, "RDMA READ (remote read)");
	if (!rc)
		rc = kv_check(x->s[0].buf, 0, PAGE_SIZE, 0x51,
			      "RDMA READ data");
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x52);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_REM_ACCESS_ERR,
		     "RDMA WRITE (no remote write)");
	if (!rc)
		rc = kv_pages_check(x, 0, PAGE_SIZE, 0x51,
				    "FRMR page after refused WRITE");
	return rc;
}

/*
 * h: the registration's range: a WRITE that ends one byte past the mapped
 * pages is refused, nothing of it written.
 */
static int kv_test_frmr_bounds(struct kv_ctx *x)
{
	const size_t total = 2 * PAGE_SIZE;
	int rc;

	rc = kv_setup_frmr(x, 2, KV_MR_ACCESS);
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, total, 0x61);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, total, x->mr->iova, x->mr->rkey,
		     IB_WC_SUCCESS, "RDMA WRITE of the whole MR");
	if (!rc)
		rc = kv_pages_check(x, 0, total, 0x61, "FRMR pages");
	if (rc)
		return rc;
	kv_fill(x->s[0].buf, 0, total, 0x62);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, 101, x->mr->iova + total - 100,
		     x->mr->rkey, IB_WC_REM_ACCESS_ERR,
		     "RDMA WRITE one byte past the MR");
	if (!rc)
		rc = kv_pages_check(x, 0, total, 0x61,
				    "FRMR pages after refused WRITE");
	return rc;
}

/*
 * i: SEND_WITH_INV naming side 1's FRMR: the receive says so
 * (IB_WC_WITH_INVALIDATE, the key), and the key is refused afterwards,
 * the page unchanged (nvmet-rdma answers every registered I/O this way).
 */
static int kv_test_send_inv(struct kv_ctx *x)
{
	struct kv_comp *rcv = kv_comp(x);
	int rc;

	rc = kv_setup_frmr(x, 1, KV_MR_ACCESS);
	if (!rc)
		rc = kv_recv(x, rcv);
	if (!rc)
		rc = kv_send(x, IB_WR_SEND_WITH_INV, x->mr->rkey, 64);
	if (!rc)
		rc = kv_expect(rcv, IB_WC_SUCCESS, IB_WC_RECV, "RECV");
	if (rc)
		return rc;
	if (!(rcv->wc.wc_flags & IB_WC_WITH_INVALIDATE) ||
	    rcv->wc.ex.invalidate_rkey != x->mr->rkey) {
		kv_diag("RECV: wc_flags %#x, invalidate_rkey %#x, expected %#x",
			rcv->wc.wc_flags, rcv->wc.ex.invalidate_rkey,
			x->mr->rkey);
		return -EIO;
	}
	kv_pages_fill(x, 0x71);
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, 0x72);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova,
		     x->mr->rkey, IB_WC_REM_ACCESS_ERR,
		     "RDMA WRITE after SEND_WITH_INV");
	if (!rc)
		rc = kv_pages_check(x, 0, PAGE_SIZE, 0x71,
				    "FRMR page after refused WRITE");
	return rc;
}

/* ---- j: registration per I/O, as NVMe-oF and NFS/RDMA do ---- */

/* What side 1 tells side 0 of its MR, in a SEND (a ULP's command). */
struct kv_io_msg {
	__le64 iova;
	__le32 rkey;
	__le32 len;
};

/* The per-I/O test's completions, reused by every I/O (they live in x). */
enum { IO_REG, IO_ADV, IO_ADV_RCV, IO_WRITE, IO_INV, IO_INV_RCV, IO_NCOMP };
struct kv_io {
	struct kv_comp *c[IO_NCOMP];
};

/*
 * Side 1 maps its FRMR with the next key and posts REG_MR and the SEND of
 * that key in one chain, without waiting: the registration must take effect
 * at side 0's peer (us) before side 0 can see the SEND.
 */
static int kv_io_advertise(struct kv_ctx *x, struct kv_io *io)
{
	struct kv_side *s1 = &x->s[1];
	struct kv_io_msg *m = s1->buf + PAGE_SIZE;
	struct ib_reg_wr reg = {};
	struct ib_send_wr send = {};
	struct ib_sge sge;
	int rc;

	rc = kv_frmr_map(x);
	if (rc)
		return rc;
	ib_update_fast_reg_key(x->mr, (u8)(x->mr->rkey + 1));
	reg.wr.wr_cqe = &io->c[IO_REG]->cqe;
	reg.wr.opcode = IB_WR_REG_MR;
	reg.wr.send_flags = IB_SEND_SIGNALED;
	reg.wr.next = &send;
	reg.mr = x->mr;
	reg.key = x->mr->rkey;
	reg.access = KV_MR_ACCESS;
	m->iova = cpu_to_le64(x->mr->iova);
	m->rkey = cpu_to_le32(x->mr->rkey);
	m->len = cpu_to_le32(x->mr->length);
	sge.addr = s1->dma + PAGE_SIZE;
	sge.length = sizeof(*m);
	sge.lkey = s1->pd->local_dma_lkey;
	send.wr_cqe = &io->c[IO_ADV]->cqe;
	send.sg_list = &sge;
	send.num_sge = 1;
	send.opcode = IB_WR_SEND;
	send.send_flags = IB_SEND_SIGNALED;
	ib_dma_sync_single_for_device(s1->dev, s1->dma, KV_BUF_LEN,
				      DMA_BIDIRECTIONAL);
	return kv_post_send(s1->qp, &reg.wr, "REG_MR + SEND of the key");
}

/*
 * Side 0 takes the key from the SEND it received, WRITEs @seed's pattern
 * over the whole MR and answers with SEND_WITH_INV of the key, posted
 * together as nvmet-rdma does: the answer must not be seen before the data.
 */
static int kv_io_place(struct kv_ctx *x, struct kv_io *io, u8 seed, u32 *rkey)
{
	struct kv_side *s0 = &x->s[0];
	struct ib_send_wr inv = {};
	struct ib_sge sge;
	struct kv_io_msg m;
	int rc;

	rc = kv_expect(io->c[IO_ADV_RCV], IB_WC_SUCCESS, IB_WC_RECV, "RECV of the key");
	if (rc)
		return rc;
	ib_dma_sync_single_for_cpu(s0->dev, s0->dma, KV_BUF_LEN,
				   DMA_BIDIRECTIONAL);
	memcpy(&m, s0->buf, sizeof(m));
	*rkey = le32_to_cpu(m.rkey);
	if (le32_to_cpu(m.len) != KV_BUF_LEN || *rkey != x->mr->rkey) {
		kv_diag("advertised rkey %#x len %u, MR rkey %#x", *rkey,
			le32_to_cpu(m.len), x->mr->rkey);
		return -EIO;
	}
	kv_fill(s0->buf, 0, KV_BUF_LEN, seed);
	sge.addr = s0->dma;
	sge.length = 16;
	sge.lkey = s0->pd->local_dma_lkey;
	inv.wr_cqe = &io->c[IO_INV]->cqe;
	inv.sg_list = &sge;
	inv.num_sge = 1;
	inv.opcode = IB_WR_SEND_WITH_INV;
	inv.ex.invalidate_rkey = *rkey;
	inv.send_flags = IB_SEND_SIGNALED;
	return kv_rdma_post(x, io->c[IO_WRITE], IB_WR_RDMA_WRITE, 0, KV_BUF_LEN,
			    le64_to_cpu(m.iova), *rkey, &inv,
			    "WRITE + SEND_WITH_INV");
}

/* Every completion of one I/O, then the data side 1 received. */
static int kv_io_finish(struct kv_ctx *x, struct kv_io *io, u8 seed, u32 rkey)
{
	struct kv_comp *r = io->c[IO_INV_RCV];
	int rc;

	rc = kv_expect(io->c[IO_REG], IB_WC_SUCCESS, IB_WC_REG_MR, "REG_MR");
	if (!rc)
		rc = kv_expect(io->c[IO_ADV], IB_WC_SUCCESS, IB_WC_SEND, "SEND key");
	if (!rc)
		rc = kv_expect(io->c[IO_WRITE], IB_WC_SUCCESS, IB_WC_RDMA_WRITE,
			       "WRITE");
	if (!rc)
		rc = kv_expect(io->c[IO_INV], IB_WC_SUCCESS, IB_WC_SEND, "SEND_INV");
	if (!rc)
		rc = kv_expect(r, IB_WC_SUCCESS, IB_WC_RECV, "RECV of the inv");
	if (rc)
		return rc;
	if (!(r->wc.wc_flags & IB_WC_WITH_INVALIDATE) ||
	    r->wc.ex.invalidate_rkey != rkey) {
		kv_diag("RECV: wc_flags %#x, invalidate_rkey %#x, expected %#x",
			r->wc.wc_flags, r->wc.ex.invalidate_rkey, rkey);
		return -EIO;
	}
	/* The SEND came after the WRITE: its data is there, all of it. */
	return kv_pages_check(x, 0, KV_BUF_LEN, seed, "MR pages at the RECV");
}

static int kv_io_one(struct kv_ctx *x, struct kv_io *io, u8 seed, u32 *rkey)
{
	int i, rc;

	for (i = 0; i < IO_NCOMP; i++)
		reinit_completion(&io->c[i]->done);
	rc = kv_recv_on(x, 0, io->c[IO_ADV_RCV]);
	if (!rc)
		rc = kv_recv_on(x, 1, io->c[IO_INV_RCV]);
	if (!rc)
		rc = kv_io_advertise(x, io);
	if (!rc)
		rc = kv_io_place(x, io, seed, rkey);
	if (!rc)
		rc = kv_io_finish(x, io, seed, *rkey);
	return rc;
}

/*
 * j: per_io_iters I/Os, each registering the MR with a new key, sending
 * the key, WRITE + SEND_WITH_INV from the other side, data checked at the
 * RECV; then the last key is refused and the pages stay as they were.
 */
static int kv_test_per_io(struct kv_ctx *x)
{
	struct kv_io io;
	unsigned long t0 = jiffies;
	u32 n, rkey = 0;
	int i, rc;

	rc = kv_setup(x);
	if (!rc)
		rc = kv_frmr_setup(x, KV_NPAGES);
	for (i = 0; !rc && i < IO_NCOMP; i++) {
		io.c[i] = kv_comp(x);
		rc = io.c[i] ? 0 : -ENOMEM;
	}
	for (n = 0; !rc && n < per_io_iters; n++)
		rc = kv_io_one(x, &io, (u8)n, &rkey);
	kv_diag("%u of %u I/Os in %u ms", n - !!rc, per_io_iters,
		jiffies_to_msecs(jiffies - t0));
	if (rc || !n)
		return rc;
	kv_fill(x->s[0].buf, 0, PAGE_SIZE, (u8)n);
	rc = kv_rdma(x, IB_WR_RDMA_WRITE, 0, PAGE_SIZE, x->mr->iova, rkey,
		     IB_WC_REM_ACCESS_ERR, "RDMA WRITE with the invalidated key");
	if (!rc)
		rc = kv_pages_check(x, 0, KV_BUF_LEN, (u8)(n - 1),
				    "MR pages after the refused WRITE");
	return rc;
}

/* ---- k: READ_WITH_INV while the peer reads the same MR ---- */

#define KV_RI_READS	8	/* side 0's READs of the whole MR */
#define KV_RI_OLD	0xa5	/* the MR's bytes until READ_WITH_INV completed */
#define KV_RI_NEW	0x5a	/* ...and after */

/*
 * Every byte of side 1's FRMR pages set to @v, the last page first: a READ
 * answer's segments read the MR forwards, so one still queued meets the
 * new bytes however far the copies got.
 */
static void kv_pages_set(struct kv_ctx *x, u8 v)
{
	int i;

	for (i = x->npages - 1; i >= 0; i--)
		memset(page_address(x->pages[i]), v, PAGE_SIZE);
}

/* Side 0's sink of @len bytes (x->big), zeroed and mapped. */
static int kv_big_sink(struct kv_ctx *x, size_t len)
{
	struct kv_side *s = &x->s[0];
	u64 dma;

	x->big = kzalloc(len, GFP_KERNEL);
	if (!x->big)
		return -ENOMEM;
	dma = ib_dma_map_single(s->dev, x->big, len, DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(s->dev, dma)) {
		kv_diag("ib_dma_map_single of %zu bytes failed", len);
		return -ENOMEM;
	}
	x->big_dma = dma;
	x->big_len = len;
	return 0;
}

/* Side 0 posts KV_RI_READS READs of all of side 1's MR into x->big. */
static int kv_ri_reads(struct kv_ctx *x, struct kv_comp **rd)
{
	struct kv_side *s = &x->s[0];
	struct ib_sge sge = {
		.addr = x->big_dma,
		.length = x->big_len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {};
	int i, rc;

	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = IB_WR_RDMA_READ;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.remote_addr = x->mr->iova;
	wr.rkey = x->mr->rkey;
	for (i = 0; i < KV_RI_READS; i++) {
		rd[i] = kv_comp(x);
		if (!rd[i])
			return -ENOMEM;
		wr.wr.wr_cqe = &rd[i]->cqe;
		rc = kv_post_send(s->qp, &wr.wr, "RDMA READ of the MR");
		if (rc)
			return rc;
	}
	return 0;
}

/* Until the sink's first byte is @v: the READs are under way. */
static int kv_await_first_byte(struct kv_ctx *x, u8 v)
{
	unsigned long end = jiffies + KV_TIMEOUT;

	while (READ_ONCE(*(u8 *)x->big) != v) {
		if (time_after(jiffies, end)) {
			kv_diag("the READs' first bytes did not land in %d s",
				KV_TIMEOUT_S);
			return -ETIMEDOUT;
		}
		usleep_range(50, 100);
	}
	return 0;
}

/*
 * Side 1's second QP reads 8 bytes of side 0's buffer into its FRMR with
 * READ_WITH_INV (the sink's key, sg_list[0].lkey, is invalidated), waited
 * for.
 */
static int kv_ri_read_inv(struct kv_ctx *x)
{
	struct kv_comp *c = kv_comp(x);
	struct ib_sge sge = {
		.addr = x->mr->iova,
		.length = 8,
		.lkey = x->mr->lkey,
	};
	struct ib_rdma_wr wr = {};
	int rc;

	if (!c)
		return -ENOMEM;
	wr.wr.wr_cqe = &c->cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = IB_WR_RDMA_READ_WITH_INV;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.wr.ex.invalidate_rkey = x->mr->rkey;
	wr.remote_addr = x->s[0].dma;
	wr.rkey = x->s[0].pd->unsafe_global_rkey;
	rc = kv_post_send(x->s[1].qp2, &wr.wr, "READ_WITH_INV");
	if (!rc)
		rc = kv_expect(c, IB_WC_SUCCESS, IB_WC_RDMA_READ,
			       "READ_WITH_INV");
	return rc;
}

/*
 * The READs' ends: how many succeeded; the first to fail must report a
 * remote access error (the key went away), the rest are flushed.
 */
static int kv_ri_reads_end(struct kv_ctx *x, struct kv_comp **rd, int *ok)
{
	int i;

	*ok = 0;
	for (i = 0; i < KV_RI_READS; i++) {
		if (!wait_for_completion_timeout(&rd[i]->done, KV_TIMEOUT)) {
			kv_diag("READ %d: no completion in %d s", i,
				KV_TIMEOUT_S);
			return -ETIMEDOUT;
		}
		if (rd[i]->wc.status == IB_WC_SUCCESS && *ok == i)
			(*ok)++;
	}
	if (*ok < KV_RI_READS &&
	    rd[*ok]->wc.status != IB_WC_REM_ACCESS_ERR) {
		kv_diag("READ %d: status %s, expected %s", *ok,
			ib_wc_status_msg(rd[*ok]->wc.status),
			ib_wc_status_msg(IB_WC_REM_ACCESS_ERR));
		return -EIO;
	}
	return 0;
}

/*
 * Side 0 reads side 1's FRMR (KV_RI_OLD) KV_RI_READS times, on the DMA
 * channel; meanwhile side 1 completes a READ_WITH_INV into the same MR on
 * another connection, then sets the MR's bytes to KV_RI_NEW. Once the
 * READ_WITH_INV completed nothing reads the MR: no KV_RI_NEW byte reaches
 * side 0, whose READ then under way fails with a remote access error.
 */
static int kv_test_read_inv(struct kv_ctx *x)
{
	struct kv_comp *rd[KV_RI_READS];
	int rc, ok, npages;
	size_t i, fresh = 0;

	npages = min_t(int, KV_MR_PAGES,
		       x->s[1].dev->attrs.max_fast_reg_page_list_len);
	x->s[0].pd_flags = IB_PD_UNSAFE_GLOBAL_RKEY;
	rc = kv_setup_frmr(x, npages, KV_MR_ACCESS);
	if (!rc)
		rc = kv_setup_qp2(x);
	if (!rc)
		rc = kv_big_sink(x, (size_t)npages * PAGE_SIZE);
	if (rc)
		return rc;
	kv_pages_set(x, KV_RI_OLD);
	memset(x->s[0].buf, KV_RI_OLD, KV_BUF_LEN);
	rc = kv_ri_reads(x, rd);
	if (!rc)
		rc = kv_await_first_byte(x, KV_RI_OLD);
	if (!rc)
		rc = kv_ri_read_inv(x);
	if (rc)
		return rc;
	kv_pages_set(x, KV_RI_NEW);
	rc = kv_ri_reads_end(x, rd, &ok);
	if (rc)
		return rc;
	msleep(200);
	ib_dma_sync_single_for_cpu(x->s[0].dev, x->big_dma, x->big_len,
				   DMA_FROM_DEVICE);
	for (i = 0; i < x->big_len; i++)
		fresh += ((u8 *)x->big)[i] == KV_RI_NEW;
	kv_diag("%d of %d READs of %zu bytes done before READ_WITH_INV completed",
		ok, KV_RI_READS, x->big_len);
	if (fresh) {
		kv_diag("%zu bytes read after READ_WITH_INV completed", fresh);
		return -EIO;
	}
	if (ok == KV_RI_READS)
		x->skip = "every READ was done before READ_WITH_INV completed: nothing shown";
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(struct kv_ctx *x);
} kv_tests[] = {
	{ "send recv local_dma_lkey", kv_test_send_recv },
	{ "frmr rdma write read", kv_test_frmr_rw },
	{ "frmr local invalidate", kv_test_frmr_inv },
	{ "frmr stale rkey refused", kv_test_frmr_stale },
	{ "drain qp", kv_test_drain },
	{ "atomics fetch-add cmp-swap", kv_test_atomics },
	{ "frmr access from reg_wr", kv_test_frmr_access },
	{ "frmr bounds", kv_test_frmr_bounds },
	{ "send with invalidate", kv_test_send_inv },
	{ "frmr per i/o", kv_test_per_io },
	{ "read with invalidate under a read", kv_test_read_inv },
	{ "send posted with interrupts off", kv_test_send_irqs_off },
};

static int __init kv_init(void)
{
	struct ib_device *dev[2];
	struct kv_ctx *x;
	int i, rc, pass = 0, fail = 0;

	dev[0] = ib_device_get_by_name(local, RDMA_DRIVER_UNKNOWN);
	dev[1] = ib_device_get_by_name(peer, RDMA_DRIVER_UNKNOWN);
	pr_info("TAP version 13\n");
	pr_info("1..%zu\n", ARRAY_SIZE(kv_tests));
	kv_diag("requester %s, responder %s", local, peer);
	for (i = 0; i < ARRAY_SIZE(kv_tests); i++) {
		const char *skip = NULL;

		x = kzalloc(sizeof(*x), GFP_KERNEL);
		if (!dev[0] || !dev[1]) {
			kv_diag("ib_device %s not found", dev[0] ? peer : local);
			rc = -ENODEV;
		} else if (!x) {
			rc = -ENOMEM;
		} else {
			x->s[0].dev = dev[0];
			x->s[1].dev = dev[1];
			rc = kv_tests[i].fn(x);
			kv_teardown(x);
			skip = x->skip;
		}
		kfree(x);
		if (rc) {
			fail++;
			kv_diag("%s: error %d", kv_tests[i].name, rc);
			pr_info("not ok %d %s\n", i + 1, kv_tests[i].name);
		} else if (skip) {
			pr_info("ok %d %s # SKIP %s\n", i + 1, kv_tests[i].name,
				skip);
		} else {
			pass++;
			pr_info("ok %d %s\n", i + 1, kv_tests[i].name);
		}
	}
	snprintf(summary, sizeof(summary), "pass=%d fail=%d", pass, fail);
	kv_diag("%s", summary);
	for (i = 0; i < 2; i++)
		if (dev[i])
			ib_device_put(dev[i]);
	return 0;
}

static void __exit kv_exit(void)
{
}

module_init(kv_init);
module_exit(kv_exit);

MODULE_DESCRIPTION("NTRDMA kernel verbs test (ULP view of the ib_device)");
MODULE_LICENSE("Dual BSD/GPL");
