// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: direct placement, requester side. The peer exports
 * MRs (key, PD, access, iova range, the DMA addresses of their pages) and
 * QPs (PD, access, which of our QPs each talks to) over the command channel
 * (ntrdma_place_export.c is the exporting side); an RDMA WRITE whose every
 * check passes here is written straight into the target's pages through
 * the flat window, in the order of the verbs TQP, by its DMA channel or
 * our CPU (ntrdma_place.c): no receive buffer, no copy and no work on the
 * target. The peer's exports are remote MRs: the functions and structures
 * here keep the prefix ntrdma_rmr_.
 *
 * Everything the peer sends is checked first: sizes, counts, and every page
 * address against the window. A WRITE places only when the QP it goes to
 * is exported, connected to ours and allows remote writes, and the rkey
 * names an export of the same PD with remote write over the whole range;
 * anything else (an rkey not exported, a range error...) takes the checked
 * path through the target, which answers with the IB error a HCA gives.
 *
 * READs: a small one is read through the window by our CPU (read_pull_max);
 * as responder, a READ whose READ_REQ named a sink (ntrdma_place_sink.c) is
 * written straight into the requester's pages (channel or CPU), while the
 * requester's QP is exported in the epoch the READ_REQ names, then a
 * notice follows in the TQP's order; otherwise its data is sent.
 *
 * Revocation: an export leaves the tables under place_lock, and every
 * placement looks up and copies (or queues its copies on the DMA channel)
 * under place_lock, so once a handler has taken and dropped the lock no
 * placement into the revoked pages starts; once the channel's queued
 * placements are done too (ntrdma_vx_place_fence()), none is in flight,
 * and only then does it answer. The session ending clears all.
 */

#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/nospec.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "ntrdma_ib.h"

bool ntrdma_direct_placement = true;
module_param_named(direct_placement, ntrdma_direct_placement, bool, 0444);
MODULE_PARM_DESC(direct_placement,
		 "Export remote-write MRs to the peer and place RDMA WRITEs straight into the peer's (default 1; 0: every byte through the target's checked copy, for a peer kernel that is not trusted)");

/*
 * A READ is pulled through the window by our CPU only up to this size: on
 * hardware a read across the bridge is non-posted, one round trip per few
 * bytes, so a large READ is cheaper as the target's posted writes.
 */
static unsigned int read_pull_max = 512;
module_param(read_pull_max, uint, 0644);
MODULE_PARM_DESC(read_pull_max,
		 "With direct_placement, RDMA READs up to this many bytes are read by the requester straight from the peer's exported MR (default 512; 0: never)");

/*
 * What the peer's exports may cost us: at most one entry per key index of
 * the peer's key table (1..NTRDMA_MAX_MR, as ours), so the index holds no
 * more than NTRDMA_MAX_MR entries, and at most NTRDMA_IMPORT_BYTES of
 * records (each struct ntrdma_rmr with its page list: 8 bytes per page,
 * the 16 GiB of 4M pages at most). An export past either is refused
 * (-ENOSPC): its WRITEs take the checked path.
 */
#define NTRDMA_IMPORT_MRS	NTRDMA_MAX_MR
#define NTRDMA_IMPORT_BYTES	SZ_32M
#define NTRDMA_IMPORT_PAGES	(NTRDMA_IMPORT_BYTES / sizeof(u64))

struct ntrdma_rmr {
	u32 key;
	u32 pd;
	u32 access;
	u32 npages;
	u32 first_off;
	u32 filled;		/* pages listed so far; usable when all */
	u64 iova;
	u64 length;
	u64 page[];
};

struct ntrdma_rqp {
	u32 pd;
	u32 access;
	u32 dest_qpn;
	u32 epoch;		/* READ sinks of this epoch may be written */
	/* placed SENDs: the QP's RQ ring (rq_entries 0: none) */
	u32 qpn;
	u32 rq_entries;
	u32 rq_max_sge;
	u32 rq_npages;
	u32 rq_cq;
	u64 psend;
	u64 rq_page[];
};

/*
 * No placement that found @nib's old entry is still copying: none holds
 * place_lock, and the copies they queued on the DMA channel are done.
 * False when the channel did not finish them (ntrdma_vx_place_fence()).
 */
static bool rmr_drain(struct ntrdma_ib *nib)
{
	unsigned long flags;

	spin_lock_irqsave(&nib->place_lock, flags);
	spin_unlock_irqrestore(&nib->place_lock, flags);
	return ntrdma_vx_place_fence(nib);
}

static size_t rmr_size(u32 npages)
{
	struct ntrdma_rmr *rmr = NULL;

	return struct_size(rmr, page, npages);
}

static void rmr_free(struct ntrdma_ib *nib, struct ntrdma_rmr *rmr)
{
	lockdep_assert_held(&nib->rmr_lock);
	nib->rmr_count--;
	nib->rmr_bytes -= rmr_size(rmr->npages);
	kvfree(rmr);
}

/*
 * Room for a new entry of @npages at index @idx (rmr_lock): an index of
 * the peer's key table (1..NTRDMA_MAX_MR, as ours, so that the index stays
 * small), and within the caps; an entry the export replaces at @idx is
 * still counted, so the cap may be passed by one entry for a moment. A
 * refusal is said once in a while.
 */
static int rmr_room(struct ntrdma_ib *nib, u32 idx, u32 npages)
{
	bool replaces = xa_load(&nib->rmr_xa, idx);

	lockdep_assert_held(&nib->rmr_lock);
	if (idx <= NTRDMA_IMPORT_MRS &&
	    (replaces || nib->rmr_count < NTRDMA_IMPORT_MRS) &&
	    nib->rmr_bytes + rmr_size(npages) <= NTRDMA_IMPORT_BYTES)
		return 0;
	ibdev_warn_ratelimited(&nib->ibdev,
			       "the peer's MR exports beyond our cap refused: key index %u, %u entries (max %u), %llu bytes (max %u)\n",
			       idx, nib->rmr_count, NTRDMA_IMPORT_MRS,
			       nib->rmr_bytes, NTRDMA_IMPORT_BYTES);
	return -ENOSPC;
}

/* The entry a chunk of export @e fills: a new one for its first chunk. */
static struct ntrdma_rmr *rmr_for_chunk(struct ntrdma_ib *nib,
					const struct ntrdma_wire_mr_export *e)
{
	struct ntrdma_rmr *rmr;
	int rc;

	if (e->first) {
		rmr = xa_load(&nib->rmr_xa, e->key >> 8);
		if (!rmr || rmr->key != e->key || rmr->npages != e->npages ||
		    rmr->filled != e->first)
			return ERR_PTR(-EINVAL);
		return rmr;
	}
	rc = rmr_room(nib, e->key >> 8, e->npages);
	if (rc)
		return ERR_PTR(rc);
	rmr = kvzalloc(rmr_size(e->npages), GFP_KERNEL);
	if (!rmr)
		return ERR_PTR(-ENOMEM);
	nib->rmr_count++;
	nib->rmr_bytes += rmr_size(e->npages);
	rmr->key = e->key;
	rmr->pd = e->pd;
	rmr->access = e->access;
	rmr->npages = e->npages;
	rmr->first_off = e->first_off;
	rmr->iova = e->iova;
	rmr->length = e->length;
	return rmr;
}

/* Read the chunk's page addresses into @rmr and check each. */
static int rmr_read_chunk(struct ntrdma_ib *nib, struct ntrdma_rmr *rmr,
			  const struct ntrdma_wire_mr_export *e)
{
	u64 reach = ntrdma_dev_peer_reach(nib->ndev);
	/* e->first < npages, checked: clamped under speculation too */
	u64 *list = &rmr->page[array_index_nospec(e->first, rmr->npages)];
	unsigned long flags;
	u32 i;
	int rc;

	rc = ntrdma_dev_peer_read(nib->ndev, e->list, list,
				  e->count * sizeof(u64));
	if (rc)
		return rc;
	for (i = 0; i < e->count; i++)
		if (ntrdma_wire_check_export_page(list[i], reach))
			return -EINVAL;
	spin_lock_irqsave(&nib->place_lock, flags);
	rmr->filled += e->count;
	spin_unlock_irqrestore(&nib->place_lock, flags);
	return 0;
}

/* NTRDMA_CMD_MR_EXPORT: one chunk of an MR the peer exports. */
static int rmr_export_chunk(struct ntrdma_ib *nib, const void *req, u16 len)
{
	struct ntrdma_wire_mr_export e;
	struct ntrdma_rmr *rmr, *old;
	int rc;

	if (len < sizeof(e))
		return -EINVAL;
	memcpy(&e, req, sizeof(e));
	if (ntrdma_wire_check_mr_export(&e, NTRDMA_IMPORT_PAGES))
		return -EINVAL;
	rmr = rmr_for_chunk(nib, &e);
	if (IS_ERR(rmr))
		return PTR_ERR(rmr);
	rc = rmr_read_chunk(nib, rmr, &e);
	if (e.first) {
		if (rc) {	/* the export stays unusable: take it out */
			xa_erase(&nib->rmr_xa, e.key >> 8);
			rmr_drain(nib);
			rmr_free(nib, rmr);
		}
		return rc;
	}
	if (!rc) {
		old = xa_store(&nib->rmr_xa, e.key >> 8, rmr, GFP_KERNEL);
		rc = xa_err(old);
	}
	if (rc) {
		rmr_free(nib, rmr);
		return rc;
	}
	if (old) {		/* an export of the same index it replaces */
		rmr_drain(nib);
		rmr_free(nib, old);
	}
	return 0;
}

/* NTRDMA_CMD_MR_REVOKE: answered once no placement into it is in flight. */
static int rmr_revoke(struct ntrdma_ib *nib, const void *req, u16 len)
{
	struct ntrdma_wire_mr_revoke r;
	struct ntrdma_rmr *rmr;
	bool drained;

	if (len < sizeof(r))
		return -EINVAL;
	memcpy(&r, req, sizeof(r));
	xa_lock(&nib->rmr_xa);
	rmr = xa_load(&nib->rmr_xa, r.key >> 8);
	if (rmr && rmr->key == r.key)
		__xa_erase(&nib->rmr_xa, r.key >> 8);
	else
		rmr = NULL;
	xa_unlock(&nib->rmr_xa);
	if (!rmr)
		return 0;
	/* copies the channel still makes: the peer keeps its pages on error */
	drained = rmr_drain(nib);
	rmr_free(nib, rmr);
	return drained ? 0 : -EIO;
}

/*
 * The RQ part of a QP export: the ring's page list, read through the
 * window and checked as an MR's, and where the peer's psend area is.
 * Without it (or when it does not check out) its SENDs take the checked
 * path.
 */
static struct ntrdma_rqp *rqp_new(struct ntrdma_ib *nib,
				  const struct ntrdma_wire_qp_export *q)
{
	u64 reach = ntrdma_dev_peer_reach(nib->ndev), end;
	u32 n = q->rq_entries ? q->rq_npages : 0, i;
	struct ntrdma_rqp *rqp;

	rqp = kzalloc(struct_size(rqp, rq_page, n), GFP_KERNEL);
	if (!rqp || !n)
		return rqp;
	if (ntrdma_dev_peer_read(nib->ndev, q->rq_list, rqp->rq_page,
				 n * sizeof(u64)))
		return rqp;
	for (i = 0; i < n; i++)
		if (ntrdma_wire_check_export_page(rqp->rq_page[i], reach))
			return rqp;
	if (check_add_overflow(q->psend, (u64)sizeof(struct ntrdma_wire_psend),
			       &end) || end > reach)
		return rqp;
	rqp->qpn = q->qpn;
	rqp->rq_max_sge = q->rq_max_sge;
	rqp->rq_npages = n;
	rqp->rq_cq = q->rq_cq;
	rqp->psend = q->psend;
	rqp->rq_entries = q->rq_entries;
	return rqp;
}

/* NTRDMA_CMD_QP_EXPORT: a QP of the peer takes placements, or no more. */
static int rqp_export(struct ntrdma_ib *nib, const void *req, u16 len)
{
	struct ntrdma_wire_qp_export q;
	struct ntrdma_rqp *rqp = NULL, *old;
	bool drained;

	lockdep_assert_held(&nib->rmr_lock);
	if (len < sizeof(q))
		return -EINVAL;
	memcpy(&q, req, sizeof(q));
	if (ntrdma_wire_check_qp_export(&q))
		return -EINVAL;
	if (q.up) {
		/* no more entries than the peer can have QPs */
		if (nib->rqp_count >= NTRDMA_MAX_QP &&
		    !xa_load(&nib->rqp_xa, q.qpn))
			return -ENOSPC;
		rqp = rqp_new(nib, &q);
		if (!rqp)
			return -ENOMEM;
		rqp->pd = q.pd;
		rqp->access = q.access;
		rqp->dest_qpn = q.dest_qpn;
		rqp->epoch = q.epoch;
		old = xa_store(&nib->rqp_xa, q.qpn, rqp, GFP_KERNEL);
		if (xa_is_err(old)) {
			kfree(rqp);
			return xa_err(old);
		}
	} else {
		old = xa_erase(&nib->rqp_xa, q.qpn);
	}
	if (!old) {
		if (rqp)
			nib->rqp_count++;	/* a new entry */
		return 0;
	}
	if (!rqp)
		nib->rqp_count--;	/* an entry gone */
	drained = rmr_drain(nib);
	kfree(old);
	return drained ? 0 : -EIO;
}

/*
 * Every handler runs under rmr_lock and only while the session runs: the
 * session's end clears the tables under the same lock once the link is
 * down, so nothing of an ended session is left behind by a handler that
 * ran beside it.
 */
static int rmr_handle(struct ntrdma_ib *nib, u16 op, const void *req, u16 len)
{
	int rc = -ENOLINK;

	if (op == NTRDMA_CMD_QP_EXPORT)
		ntrdma_fault_pause(nib->ndev, "qp_export");
	mutex_lock(&nib->rmr_lock);
	if (ntrdma_link_is_up(nib->ndev)) {
		if (op == NTRDMA_CMD_MR_EXPORT)
			rc = rmr_export_chunk(nib, req, len);
		else if (op == NTRDMA_CMD_MR_REVOKE)
			rc = rmr_revoke(nib, req, len);
		else
			rc = rqp_export(nib, req, len);
	}
	mutex_unlock(&nib->rmr_lock);
	return rc;
}

static int rmr_export_fn(void *ctx, const void *req, u16 len, void *rsp,
			 u16 *rsp_len)
{
	return rmr_handle(ctx, NTRDMA_CMD_MR_EXPORT, req, len);
}

static int rmr_revoke_fn(void *ctx, const void *req, u16 len, void *rsp,
			 u16 *rsp_len)
{
	return rmr_handle(ctx, NTRDMA_CMD_MR_REVOKE, req, len);
}

static int rqp_export_fn(void *ctx, const void *req, u16 len, void *rsp,
			 u16 *rsp_len)
{
	return rmr_handle(ctx, NTRDMA_CMD_QP_EXPORT, req, len);
}

static const struct {
	u16 op;
	ntrdma_cmd_fn fn;
} rmr_ops[] = {
	{ NTRDMA_CMD_MR_EXPORT, rmr_export_fn },
	{ NTRDMA_CMD_MR_REVOKE, rmr_revoke_fn },
	{ NTRDMA_CMD_QP_EXPORT, rqp_export_fn },
};

/**
 * ntrdma_rmr_init() - take the peer's exports from now on
 * @nib: the verbs device being added
 *
 * Return: 0 or the command channel's error.
 */
int ntrdma_rmr_init(struct ntrdma_ib *nib)
{
	int i, rc;

	mutex_init(&nib->rmr_lock);
	spin_lock_init(&nib->place_lock);
	xa_init(&nib->rmr_xa);
	xa_init(&nib->rqp_xa);
	nib->rmr_count = 0;
	nib->rmr_bytes = 0;
	for (i = 0; i < ARRAY_SIZE(rmr_ops); i++) {
		rc = ntrdma_cmd_register(nib->ndev, rmr_ops[i].op,
					 rmr_ops[i].fn, nib);
		if (rc) {
			while (i--)
				ntrdma_cmd_unregister(nib->ndev, rmr_ops[i].op);
			return rc;
		}
	}
	return 0;
}

/**
 * ntrdma_rmr_clear() - forget every export of the peer
 * @nib: the verbs device
 *
 * At the end of a session (the link is down, the verbs TQP stopped: no
 * placement runs, and a handler running beside this finds the link down
 * under rmr_lock) and at removal.
 */
void ntrdma_rmr_clear(struct ntrdma_ib *nib)
{
	struct ntrdma_rmr *rmr;
	struct ntrdma_rqp *rqp;
	unsigned long i;

	mutex_lock(&nib->rmr_lock);
	xa_for_each(&nib->rmr_xa, i, rmr) {
		xa_erase(&nib->rmr_xa, i);
		rmr_drain(nib);
		rmr_free(nib, rmr);
	}
	xa_for_each(&nib->rqp_xa, i, rqp) {
		xa_erase(&nib->rqp_xa, i);
		rmr_drain(nib);
		kfree(rqp);
	}
	nib->rqp_count = 0;
	mutex_unlock(&nib->rmr_lock);
}

/**
 * ntrdma_rmr_show() - the peer's exports we keep, for debugfs verbs
 * @s: the file
 * @nib: the verbs device
 */
void ntrdma_rmr_show(struct seq_file *s, struct ntrdma_ib *nib)
{
	mutex_lock(&nib->rmr_lock);
	seq_printf(s, "rmr_entries: %u\nrmr_bytes: %llu\nrqp_entries: %u\n",
		   nib->rmr_count, nib->rmr_bytes, nib->rqp_count);
	mutex_unlock(&nib->rmr_lock);
	seq_printf(s, "rmr_entries_max: %u\nrmr_bytes_max: %u\n",
		   NTRDMA_IMPORT_MRS, NTRDMA_IMPORT_BYTES);
}

/**
 * ntrdma_rmr_fini() - no more exports: handlers gone, tables freed
 * @nib: the verbs device being removed (its session is over)
 */
void ntrdma_rmr_fini(struct ntrdma_ib *nib)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(rmr_ops); i++)
		ntrdma_cmd_unregister(nib->ndev, rmr_ops[i].op);
	ntrdma_rmr_clear(nib);
	xa_destroy(&nib->rmr_xa);
	xa_destroy(&nib->rqp_xa);
}

/* ---- placement ---- */

/*
 * The export @w may be placed into (or read from): the destination QP is
 * exported, connected to @qp and allows @access (remote write or read),
 * and the rkey names an export of its PD with @access over the whole
 * range. NULL otherwise.
 */
static struct ntrdma_rmr *place_target(struct ntrdma_ib *nib,
				       struct ntrdma_qp *qp,
				       const struct ntrdma_swqe *w, int access)
{
	struct ntrdma_rmr *rmr;
	struct ntrdma_rqp *rqp;
	u64 end, mr_end;

	lockdep_assert_held(&nib->place_lock);
	rqp = xa_load(&nib->rqp_xa, qp->dest_qp_num);
	if (!rqp || rqp->dest_qpn != qp->ibqp.qp_num || !(rqp->access & access))
		return NULL;
	rmr = xa_load(&nib->rmr_xa, w->w.rkey >> 8);
	if (!rmr || rmr->key != w->w.rkey || rmr->filled != rmr->npages ||
	    rmr->pd != rqp->pd || !(rmr->access & access))
		return NULL;
	if (check_add_overflow(w->w.remote_addr, (u64)w->len, &end) ||
	    check_add_overflow(rmr->iova, rmr->length, &mr_end) ||
	    w->w.remote_addr < rmr->iova || end > mr_end)
		return NULL;
	return rmr;
}

/* Where a placement stands in its WQE's payload. */
struct place_cur {
	u32 sent;
	u32 sge_i;
	u32 sge_off;
};

/* Where the payload continues (at @c): at most @max bytes. */
static int place_src(const struct ntrdma_swqe *w, const struct place_cur *c,
		     u32 max, struct page **page, u32 *off)
{
	const struct ntrdma_rsge *sg;
	const u8 *p;

	if (w->w.flags & IB_SEND_INLINE) {
		p = w->w.inline_data + c->sent;
		*page = is_vmalloc_addr(p) ? vmalloc_to_page(p) :
					     virt_to_page(p);
		*off = offset_in_page(p);
		return min_t(u32, max, PAGE_SIZE - *off);
	}
	if (c->sge_i >= w->nsge)
		return -EFAULT;
	sg = &w->sge[c->sge_i];
	return ntrdma_mr_range(sg->mr, sg->addr + c->sge_off,
			       min(max, sg->len - c->sge_off), page, off);
}

static void place_advance(const struct ntrdma_swqe *w, struct place_cur *c,
			  u32 n)
{
	c->sent += n;
	if (w->w.flags & IB_SEND_INLINE)
		return;
	c->sge_off += n;
	if (c->sge_off == w->sge[c->sge_i].len) {
		c->sge_i++;
		c->sge_off = 0;
	}
}

/* Where @w's placement stands. */
static void place_cursor(const struct ntrdma_swqe *w, struct place_cur *c)
{
	c->sent = w->sent;
	c->sge_i = w->sge_i;
	c->sge_off = w->sge_off;
}

/*
 * @w's placement went on by @n of the pieces @pc built from its cursor:
 * by @c when that was all of them (@built), else piece by piece.
 */
static void place_took(struct ntrdma_swqe *w, struct place_cur *c,
		       const struct ntrdma_tqp_piece *pc, int n, int built)
{
	int i;

	if (n < built) {
		place_cursor(w, c);
		for (i = 0; i < n; i++)
			place_advance(w, c, pc[i].len);
	}
	w->sent = c->sent;
	w->sge_i = c->sge_i;
	w->sge_off = c->sge_off;
}

/*
 * The window address of the export page holding byte @pos of @rmr (counted
 * from its first page): inside it, as place_target() checked the range
 * against the peer's iova and length; the index is clamped to the page
 * list under speculation too.
 */
static u64 rmr_page(const struct ntrdma_rmr *rmr, u64 pos)
{
	return rmr->page[array_index_nospec(pos / NTRDMA_EXPORT_PAGE,
					    (u64)rmr->npages)];
}

/*
 * Up to NTRDMA_TQP_MAX_SGE pieces of @w's payload from @c into @rmr,
 * advancing @c; the count (negative: a source address without a page).
 */
static int place_pieces(const struct ntrdma_rmr *rmr,
			const struct ntrdma_swqe *w, struct place_cur *c,
			struct ntrdma_tqp_piece *pc)
{
	u64 pos;
	u32 dmax;
	int n = 0, got;

	while (c->sent < w->len && n < NTRDMA_TQP_MAX_SGE) {
		pos = rmr->first_off + (w->w.remote_addr + c->sent - rmr->iova);
		dmax = NTRDMA_EXPORT_PAGE - pos % NTRDMA_EXPORT_PAGE;
		got = place_src(w, c, min(dmax, w->len - c->sent),
				&pc[n].page, &pc[n].off);
		if (got <= 0)
			return -EFAULT;
		pc[n].dst = rmr_page(rmr, pos) + pos % NTRDMA_EXPORT_PAGE;
		pc[n].len = got;
		place_advance(w, c, got);
		n++;
	}
	return n;
}

/*
 * Place *@n pieces of @w (its payload up to @c): by the CPU now (only the
 * first ones, then *@n says how many), or on the DMA channel holding the
 * source MRs (those of the SGEs the pieces came from), and then @w
 * completes once the QP's segment count passes w->seg_end (ntrdma_comp.c).
 * 0 or the error of ntrdma_vx_place().
 */
static int place_chunk(struct ntrdma_qp *qp, struct ntrdma_swqe *w,
		       const struct place_cur *c,
		       const struct ntrdma_tqp_piece *pc, int *n)
{
	struct ntrdma_mr *mr[NTRDMA_MAX_SGE];
	u32 i, nmr = 0, end = c->sge_off ? c->sge_i + 1 : c->sge_i;
	int rc;

	if (!(w->w.flags & IB_SEND_INLINE))
		for (i = w->sge_i; i < end && i < w->nsge; i++)
			mr[nmr++] = w->sge[i].mr;
	rc = ntrdma_vx_place(qp, pc, n, mr, nmr);
	if (rc == 1) {
		w->placing = true;
		w->seg_end = qp->seg_pool->prod;
		rc = 0;
	}
	return rc;
}

/**
 * ntrdma_place_write() - place an RDMA WRITE straight into the target MR
 * @qp: the requester QP (sq_lock held)
 * @w: its WRITE WQE, checked locally; w->sent bytes placed already
 *
 * Each chunk counts against the transmit pass's budget; once it is spent
 * the rest waits for the next pass.
 *
 * Return: 0 when all of it is placed (the WQE is complete, or with
 * w->placing once its copies on the DMA channel are); -EAGAIN when it
 * cannot go this way (nothing placed: the checked path takes it); -ENOSPC
 * when the TQP must first finish DMA copies, -EBUSY when the QP's segment
 * slots are all in flight (w->sent says how far it got; tx_space or
 * send_done follows); -EINPROGRESS when the pass's budget is spent (the
 * caller queues the next pass); -EACCES when the export went away after
 * part of it was placed; -EFAULT, -ENOLINK.
 */
int ntrdma_place_write(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_tqp_piece pc[NTRDMA_TQP_MAX_SGE];
	struct place_cur c;
	struct ntrdma_rmr *rmr;
	unsigned long flags;
	int n, built, rc = 0;

	lockdep_assert_held(&qp->sq_lock);
	/* The peer's exports are for QPs connected to the peer. */
	if (!READ_ONCE(ntrdma_direct_placement) || qp->loopback)
		return -EAGAIN;
	spin_lock_irqsave(&nib->place_lock, flags);
	rmr = place_target(nib, qp, w, IB_ACCESS_REMOTE_WRITE);
	if (!rmr)
		rc = w->direct ? -EACCES : -EAGAIN;
	while (!rc && w->sent < w->len) {
		if (ntrdma_vx_tx_spent(qp)) {
			rc = -EINPROGRESS;
			break;
		}
		place_cursor(w, &c);
		n = place_pieces(rmr, w, &c, pc);
		built = n;
		rc = n < 0 ? n : place_chunk(qp, w, &c, pc, &n);
		if (rc)
			break;
		w->direct = true;
		place_took(w, &c, pc, n, built);
	}
	spin_unlock_irqrestore(&nib->place_lock, flags);
	return rc;
}

/* ---- placed SENDs ---- */

/* The window address of byte @off of the peer's RQ ring (inside it). */
static u64 rq_addr(const struct ntrdma_rqp *rqp, u64 off)
{
	return rqp->rq_page[array_index_nospec(off / NTRDMA_EXPORT_PAGE,
					       (u64)rqp->rq_npages)] +
	       off % NTRDMA_EXPORT_PAGE;
}

/* Copy @len bytes at @off of the peer's RQ ring to (@rd) or from @buf. */
static int rq_io(struct ntrdma_ib *nib, const struct ntrdma_rqp *rqp, u64 off,
		 void *buf, u32 len, bool rd)
{
	u32 n;
	int rc;

	if (off + len > (u64)rqp->rq_npages * NTRDMA_EXPORT_PAGE)
		return -EINVAL;
	for (; len; off += n, buf += n, len -= n) {
		n = min_t(u32, len, NTRDMA_EXPORT_PAGE - off % NTRDMA_EXPORT_PAGE);
		rc = rd ? ntrdma_dev_peer_read(nib->ndev, rq_addr(rqp, off),
					       buf, n) :
			  ntrdma_dev_peer_write(nib->ndev, rq_addr(rqp, off),
						buf, n);
		if (rc)
			return rc;
	}
	return 0;
}

static u64 rq_slot(const struct ntrdma_rqp *rqp, u32 idx)
{
	return NTRDMA_RING_CTL_SIZE +
	       (u64)(idx & (rqp->rq_entries - 1)) * NTRDMA_RQ_STRIDE;
}

static u64 psend_cons(const struct ntrdma_rqp *rqp)
{
	return rqp->psend + offsetof(struct ntrdma_wire_psend, rq_cons) +
	       (rqp->qpn - NTRDMA_PSEND_QPN0) * sizeof(u32);
}

/*
 * The peer's next posted receive WQE of @rqp, at *@idx: its user wrote it
 * (and the producer index), so it is only read here, checked below. -EAGAIN
 * when none is posted or the indexes do not add up: the checked path then
 * answers (RNR, or the error).
 */
static int rq_take(struct ntrdma_ib *nib, const struct ntrdma_rqp *rqp,
		   struct ntrdma_recv_wqe *wqe, u32 *idx)
{
	u32 prod, cons;

	if (ntrdma_dev_peer_read(nib->ndev, psend_cons(rqp), &cons,
				 sizeof(cons)) ||
	    rq_io(nib, rqp, offsetof(struct ntrdma_ring_ctl, prod), &prod,
		  sizeof(prod), true))
		return -EAGAIN;
	if (prod == cons || prod - cons > rqp->rq_entries)
		return -EAGAIN;
	if (rq_io(nib, rqp, rq_slot(rqp, cons), wqe,
		  offsetof(struct ntrdma_recv_wqe, done), true))
		return -EAGAIN;
	if (wqe->num_sge > rqp->rq_max_sge)
		return -EAGAIN;
	*idx = cons;
	return 0;
}

/* The export an SGE of a receive WQE names: of the QP's PD, local write. */
static const struct ntrdma_rmr *rq_sge_target(struct ntrdma_ib *nib,
					      const struct ntrdma_rqp *rqp,
					      const struct ntrdma_sge *sg)
{
	const struct ntrdma_rmr *rmr;
	u64 end, mr_end;

	rmr = xa_load(&nib->rmr_xa, sg->lkey >> 8);
	if (!rmr || rmr->key != sg->lkey || rmr->filled != rmr->npages ||
	    rmr->pd != rqp->pd || !(rmr->access & IB_ACCESS_LOCAL_WRITE))
		return NULL;
	if (check_add_overflow(sg->addr, (u64)sg->length, &end) ||
	    check_add_overflow(rmr->iova, rmr->length, &mr_end) ||
	    sg->addr < rmr->iova || end > mr_end)
		return NULL;
	return rmr;
}

/*
 * The pieces that write @w's payload into the receive buffers @wqe names:
 * their count, or -EAGAIN when an SGE does not check out, the payload
 * does not fit or needs more pieces than one copy takes.
 */
static int send_pieces(struct ntrdma_ib *nib, const struct ntrdma_rqp *rqp,
		       const struct ntrdma_swqe *w,
		       const struct ntrdma_recv_wqe *wqe,
		       struct ntrdma_tqp_piece *pc)
{
	const struct ntrdma_rmr *rmr = NULL;
	struct place_cur c = {};
	u32 j = 0, doff = 0, dmax;
	int n = 0, got;
	u64 pos;

	while (c.sent < w->len) {
		while (j < wqe->num_sge && doff == wqe->sge[j].length) {
			j++;
			doff = 0;
			rmr = NULL;
		}
		if (j == wqe->num_sge || n == NTRDMA_TQP_MAX_SGE)
			return -EAGAIN;
		if (!rmr)
			rmr = rq_sge_target(nib, rqp, &wqe->sge[j]);
		if (!rmr)
			return -EAGAIN;
		pos = rmr->first_off + (wqe->sge[j].addr + doff - rmr->iova);
		dmax = min_t(u32, NTRDMA_EXPORT_PAGE - pos % NTRDMA_EXPORT_PAGE,
			     wqe->sge[j].length - doff);
		got = place_src(w, &c, min(dmax, w->len - c.sent),
				&pc[n].page, &pc[n].off);
		if (got <= 0)
			return -EAGAIN;
		pc[n].dst = rmr_page(rmr, pos) + pos % NTRDMA_EXPORT_PAGE;
		pc[n].len = got;
		place_advance(w, &c, got);
		doff += got;
		n++;
	}
	return n;
}

/*
 * The receive WQE @idx is complete: its completion into its slot, the
 * index last, then the consumer index; a kick if its CQ is armed for it.
 */
static int send_complete(struct ntrdma_ib *nib, struct ntrdma_qp *qp,
			 const struct ntrdma_rqp *rqp,
			 const struct ntrdma_swqe *w, u32 idx)
{
	bool sol = w->w.flags & IB_SEND_SOLICITED;
	struct ntrdma_recv_done d = {
		.opcode = IB_WC_RECV,
		.byte_len = w->len,
		.src_qp = qp->ibqp.qp_num,
	};
	u64 slot = rq_slot(rqp, idx) + NTRDMA_RQ_DONE_OFF, kick;
	u32 next = idx + 1, arm, ring = 1;
	u8 one = 1;
	int rc;

	if (w->w.opcode == IB_WR_SEND_WITH_IMM) {
		d.imm_data = w->w.imm_data;
		d.wc_flags = NTRDMA_WC_WITH_IMM;
	}
	rc = rq_io(nib, rqp, slot, &d, offsetof(typeof(d), seq), false);
	wmb(); /* the completion before the index that publishes it */
	rc = rc ?: rq_io(nib, rqp, slot + offsetof(typeof(d), seq), &next,
			 sizeof(next), false);
	rc = rc ?: ntrdma_dev_peer_write(nib->ndev, psend_cons(rqp), &next,
					 sizeof(next));
	mb(); /* the index before reading the arm word; pairs with the user */
	rc = rc ?: rq_io(nib, rqp, offsetof(struct ntrdma_ring_ctl, cq_arm),
			 &arm, sizeof(arm), true);
	if (rc || !arm || (arm == NTRDMA_CQ_ARM_SOLICITED && !sol))
		return rc ? -ENOLINK : 0;
	kick = rqp->psend + rqp->rq_cq +
	       (sol ? offsetof(struct ntrdma_wire_psend, cq_kick_sol) :
		      offsetof(struct ntrdma_wire_psend, cq_kick));
	rc = ntrdma_dev_peer_write(nib->ndev, kick, &one, sizeof(one));
	wmb(); /* the CQ's flag before the one that says to look */
	rc = rc ?: ntrdma_dev_peer_write(nib->ndev, rqp->psend, &ring,
					 sizeof(ring));
	if (rc)
		return -ENOLINK;
	ntrdma_vx_kick_peer(nib);
	return 0;
}

/**
 * ntrdma_place_send() - place a SEND straight into the peer's receive WQE
 * @qp: the requester QP (sq_lock held), every earlier WQE done
 * @w: its SEND or SEND_WITH_IMM WQE, checked locally, nothing sent yet
 *
 * Only a payload the CPU copies at once (at most NTRDMA_TQP_PLACE_CPU
 * bytes, nothing of the TQP on the DMA channel), into a WQE whose every
 * SGE names an export of the QP's PD with local write.
 *
 * Return: 0 when the SEND is complete (the peer's receive completed);
 * -EAGAIN when it takes the checked path (no receive posted, an SGE that
 * does not check out: the responder answers); -EINPROGRESS when the pass's
 * budget is spent; -ENOLINK when the session ended.
 */
int ntrdma_place_send(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_tqp_piece pc[NTRDMA_TQP_MAX_SGE];
	struct ntrdma_recv_wqe wqe;
	const struct ntrdma_rqp *rqp;
	unsigned long flags;
	int n = 0, placed, rc;
	u32 idx;

	lockdep_assert_held(&qp->sq_lock);
	if (!READ_ONCE(ntrdma_direct_placement) || qp->loopback ||
	    w->len > NTRDMA_TQP_PLACE_CPU || ntrdma_vx_place_busy(nib))
		return -EAGAIN;
	if (ntrdma_vx_tx_spent(qp))
		return -EINPROGRESS;
	spin_lock_irqsave(&nib->place_lock, flags);
	rqp = xa_load(&nib->rqp_xa, qp->dest_qp_num);
	rc = -EAGAIN;
	if (!rqp || rqp->dest_qpn != qp->ibqp.qp_num || !rqp->rq_entries)
		goto out;
	rc = rq_take(nib, rqp, &wqe, &idx);
	if (!rc && w->len)
		n = send_pieces(nib, rqp, w, &wqe, pc);
	if (n < 0)
		rc = n;
	if (rc)
		goto out;
	placed = n;
	rc = n ? ntrdma_vx_place(qp, pc, &placed, NULL, 0) : 0;
	if (rc == -ENOSPC)
		qp->tx_wait_place = false;	/* the checked path goes instead */
	/*
	 * A receive buffer is the responder's until its WQE completes: bytes
	 * placed into it before the checked path took over are overwritten.
	 */
	if (rc || placed != n) {
		rc = rc == -ENOLINK ? rc : -EAGAIN;
		goto out;
	}
	rc = send_complete(nib, qp, rqp, w, idx);
out:
	spin_unlock_irqrestore(&nib->place_lock, flags);
	return rc;
}

/**
 * ntrdma_pull_read() - an RDMA READ read straight from the target MR
 * @qp: the requester QP (sq_lock held)
 * @w: its READ WQE, checked locally (destination SGEs with local write)
 *
 * Only a READ of at most read_pull_max bytes; the whole of it, now.
 *
 * Return: 0 when its data is in the destination (the WQE is complete);
 * -EAGAIN when it cannot go this way (the checked path takes it);
 * -EINPROGRESS when the transmit pass's budget is spent (the caller queues
 * the next pass); -EFAULT, -ENOLINK.
 */
int ntrdma_pull_read(struct ntrdma_qp *qp, struct ntrdma_swqe *w)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_tqp_piece pc[NTRDMA_TQP_MAX_SGE];
	struct place_cur c = {};
	struct ntrdma_rmr *rmr;
	unsigned long flags;
	int n, rc = 0;

	lockdep_assert_held(&qp->sq_lock);
	if (!READ_ONCE(ntrdma_direct_placement) || qp->loopback ||
	    w->len > READ_ONCE(read_pull_max) || !w->len)
		return -EAGAIN;
	/* an earlier WRITE's bytes still on the channel: READ behind them */
	if (ntrdma_vx_place_busy(nib))
		return -EAGAIN;
	if (ntrdma_vx_tx_spent(qp))
		return -EINPROGRESS;
	spin_lock_irqsave(&nib->place_lock, flags);
	rmr = place_target(nib, qp, w, IB_ACCESS_REMOTE_READ);
	if (!rmr)
		rc = -EAGAIN;
	while (!rc && c.sent < w->len) {
		n = place_pieces(rmr, w, &c, pc);
		rc = n < 0 ? n : ntrdma_dev_pull(nib->ndev, pc, n);
	}
	spin_unlock_irqrestore(&nib->place_lock, flags);
	if (!rc)
		ntrdma_vx_charge(qp, w->len, false);
	return rc;
}

/* The bytes of the first @n pieces of @pc. */
static u32 place_bytes(const struct ntrdma_tqp_piece *pc, int n)
{
	u32 len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += pc[i].len;
	return len;
}

/*
 * The requester QP of @qp is exported, connected to @qp, in the epoch
 * @epoch its READ_REQ named: its sink may be written.
 */
static bool push_allowed(struct ntrdma_ib *nib, struct ntrdma_qp *qp,
			 u32 epoch)
{
	struct ntrdma_rqp *rqp;

	lockdep_assert_held(&nib->place_lock);
	rqp = xa_load(&nib->rqp_xa, qp->dest_qp_num);
	return rqp && rqp->dest_qpn == qp->ibqp.qp_num && rqp->epoch == epoch;
}

/*
 * Up to NTRDMA_TQP_MAX_SGE pieces of @r's data from byte @pos of the
 * message on: from the MR's pages to the sink's extents. The count, its
 * bytes in @bytes (negative: a source address without a page).
 */
static int push_pieces(const struct ntrdma_rsp *r, u32 pos,
		       struct ntrdma_tqp_piece *pc, u32 *bytes)
{
	u32 i = 0, skip = pos, want;
	int n = 0, got;

	*bytes = 0;
	while (i < r->nsink && skip >= r->sink[i].len)
		skip -= r->sink[i++].len;
	while (pos < r->total && i < r->nsink && n < NTRDMA_TQP_MAX_SGE) {
		want = min(r->sink[i].len - skip, r->total - pos);
		got = ntrdma_mr_range(r->mr, r->raddr + pos, want, &pc[n].page,
				      &pc[n].off);
		if (got <= 0)
			return -EFAULT;
		pc[n].dst = r->sink[i].addr + skip;
		pc[n].len = got;
		pos += got;
		*bytes += got;
		skip += got;
		if (skip == r->sink[i].len) {
			i++;
			skip = 0;
		}
		n++;
	}
	return n;
}

/**
 * ntrdma_push_read() - write a READ's data straight into the requester's
 * sink
 * @qp: the responder QP (sq_lock held)
 * @r: its READ answer, with the sink its READ_REQ named (checked against
 *	the window); r->sent bytes written already
 *
 * The CPU or the DMA channel copies (ntrdma_vx_place(): in the verbs TQP's
 * order, before the notice that follows), started under place_lock: a
 * withdrawal of the requester's QP, taken under the same lock, is answered
 * only once none is in flight (ntrdma_vx_place_fence()).
 *
 * Each chunk counts against the transmit pass's budget; once it is spent
 * the rest waits for the next pass.
 *
 * Return: 0 when all of it is written; -EAGAIN when it cannot go this way
 * (the requester's QP is not exported in the READ_REQ's epoch: the data is
 * sent instead); -ENOSPC (the TQP first finishes DMA copies; tx_space
 * follows), -EBUSY (the QP's segment slots are all in flight; send_done
 * follows); -EINPROGRESS (the pass's budget is spent: the caller queues
 * the next pass); -EACCES (the READ's key was invalidated meanwhile: no
 * later chunk starts); -EFAULT, -ENOLINK, -EINVAL.
 */
int ntrdma_push_read(struct ntrdma_qp *qp, struct ntrdma_rsp *r)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_tqp_piece pc[NTRDMA_TQP_MAX_SGE];
	unsigned long flags;
	u32 bytes;
	int n, built, rc = 0;

	lockdep_assert_held(&qp->sq_lock);
	if (!READ_ONCE(ntrdma_direct_placement) || qp->loopback)
		return -EAGAIN;
	spin_lock_irqsave(&nib->place_lock, flags);
	if (!push_allowed(nib, qp, r->epoch))
		rc = -EAGAIN;
	while (!rc && r->sent < r->total) {
		if (ntrdma_vx_tx_spent(qp)) {
			rc = -EINPROGRESS;
			break;
		}
		if (!ntrdma_rkey_enter(nib, r->mr, r->rkey)) {
			rc = -EACCES;	/* its key was invalidated */
			break;
		}
		n = push_pieces(r, r->sent, pc, &bytes);
		built = n;
		if (!n)
			rc = -EINVAL;	/* the extents end early: checked */
		else
			rc = n < 0 ? n : ntrdma_vx_place(qp, pc, &n, &r->mr, 1);
		ntrdma_rkey_leave(r->mr);
		if (rc == 1)
			rc = 0;	/* on the channel; the notice goes behind */
		if (!rc)
			r->sent += n < built ? place_bytes(pc, n) : bytes;
	}
	spin_unlock_irqrestore(&nib->place_lock, flags);
	return rc;
}
