// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: memory windows (type 1 and type 2B, user QPs).
 *
 * A window is an entry of the key table (an ntrdma_mr of kind
 * NTRDMA_MR_MW, its own index) that, while bound, names a range of an MR
 * registered with IB_ACCESS_MW_BIND and the remote access it grants. It is
 * bound, rebound and (type 1, length 0) unbound by a BIND_MW work request
 * in SQ order; a type 2 window is invalidated by LOCAL_INV or a peer's
 * SEND_WITH_INV naming its key. Everything about a window changes under the
 * key table's lock, where remote accesses look it up: a remote access
 * through it checks key, validity, the window's access and range, its PD
 * and (type 2) the QP it was bound through, then holds the MR itself,
 * never the window, so unbinding and freeing a window waits for nothing.
 * A bound window holds a reference on its MR; the MR cannot be
 * deregistered (-EBUSY) while a window is bound to it. Dereg (and rereg)
 * checks for bound windows and marks the MR dying in one step under the
 * key table's lock, where a bind checks its MR and counts its window: a
 * bind to a dying MR fails as a bind to an invalid one does, so no window
 * outlives its MR's dereg.
 */

#include <linux/slab.h>

#include "ntrdma_ib.h"

#define NTRDMA_MW_ACCESS	(IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
				 IB_ACCESS_REMOTE_ATOMIC)

static inline struct ntrdma_mw *to_nmw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct ntrdma_mw, ibmw);
}

int ntrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibmw->device);
	struct ntrdma_mr *win;

	if (ntrdma_check_udata_in(udata))
		return -EOPNOTSUPP;
	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	win = ntrdma_mr_new(nib, ibmw->pd, NTRDMA_MR_MW, 0);
	if (IS_ERR(win))
		return PTR_ERR(win);
	win->valid = false;	/* unbound */
	win->mw_type = ibmw->type;
	ibmw->rkey = win->key;
	to_nmw(ibmw)->win = win;
	ntrdma_mr_publish(nib, win);
	return 0;
}

/* The window no longer names anything; its MR, for the caller to put. */
static struct ntrdma_mr *mw_detach(struct ntrdma_ib *nib, struct ntrdma_mr *win)
{
	struct ntrdma_mr *parent = win->parent;

	lockdep_assert_held(&nib->mr_xa.xa_lock);
	win->valid = false;
	win->parent = NULL;
	if (parent)
		atomic_dec(&parent->mw_bound);
	return parent;
}

int ntrdma_dealloc_mw(struct ib_mw *ibmw)
{
	struct ntrdma_ib *nib = to_nib(ibmw->device);
	struct ntrdma_mr *win = to_nmw(ibmw)->win, *parent;
	unsigned long flags;

	xa_lock_irqsave(&nib->mr_xa, flags);
	__xa_erase(&nib->mr_xa, win->index);
	parent = mw_detach(nib, win);
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	if (parent) {
		/* No copy through it reads the pages once this returns. */
		if (!ntrdma_mr_wait_idle(parent))
			ibdev_warn(ibmw->device, "window %#x freed, its DMA copies not done\n",
				   win->key);
		ntrdma_mr_put(parent);
	}
	/* Not while the export walk of the key table looks at it. */
	ntrdma_unexport_mr(nib, win);
	kfree(win);
	return 0;
}

/*
 * The MR a bind names, if it may be bound: MW_BIND access, the range
 * inside it, local write for remote writers. NULL otherwise.
 */
static struct ntrdma_mr *mw_bind_mr(struct ntrdma_qp *qp, u32 lkey, u64 addr,
				    u64 len, int access)
{
	struct ntrdma_mr *mr;

	mr = ntrdma_mr_get(to_nib(qp->ibqp.device), lkey, qp->ibqp.pd, 0);
	if (!mr)
		return NULL;
	if (!mr->mw_bind || mr->kind != NTRDMA_MR_USER ||
	    ntrdma_mr_check(mr, addr, len) ||
	    ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	     !(mr->access & IB_ACCESS_LOCAL_WRITE))) {
		ntrdma_mr_put(mr);
		return NULL;
	}
	return mr;
}

/* The window a bind names (by index, in the QP's PD) may take @new_key. */
static bool mw_bind_ok(struct ntrdma_mr *win, struct ntrdma_qp *qp,
		       u32 new_key, bool unbind)
{
	if (!win || win->kind != NTRDMA_MR_MW || win->ibmr.pd != qp->ibqp.pd ||
	    (new_key >> 8) != win->index)
		return false;
	/* Type 2: only a free window is bound, never to nothing. */
	return win->mw_type == IB_MW_TYPE_1 || (!win->valid && !unbind);
}

/**
 * ntrdma_mw_bind() - run a BIND_MW work request (SQ order)
 * @qp: the user QP it was posted to (sq_lock held)
 * @q: the WQE: @rkey the window's key (its index names it), @imm_data the
 *	new key, @remote_addr and @compare_add the range, @swap the MR's
 *	lkey (low 32 bits) and the access granted (high 32 bits)
 * @prev: set to the MR the window was bound to (a reference), if any: the
 *	bind completes once that is idle (ntrdma_mr_idle())
 *
 * Return: 0, or -EINVAL (the WQE completes with IB_WC_MW_BIND_ERR).
 */
int ntrdma_mw_bind(struct ntrdma_qp *qp, const struct ntrdma_send_wqe *q,
		   struct ntrdma_mr **prev)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	int access = upper_32_bits(q->swap);
	u64 addr = q->remote_addr, len = q->compare_add;
	struct ntrdma_mr *mr = NULL, *win, *old = NULL;
	unsigned long flags;
	int rc = -EINVAL;

	/* Local write means nothing for a window (callers set it). */
	if (access & ~(NTRDMA_MW_ACCESS | IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;	/* zero-based windows: not on this device */
	access &= NTRDMA_MW_ACCESS;
	if (len) {
		mr = mw_bind_mr(qp, lower_32_bits(q->swap), addr, len, access);
		if (!mr)
			return -EINVAL;
	}
	xa_lock_irqsave(&nib->mr_xa, flags);
	win = xa_load(&nib->mr_xa, q->rkey >> 8);
	/* Dereg or rereg of the MR decided to go on: it takes no window. */
	if ((!mr || !mr->dying) && mw_bind_ok(win, qp, q->imm_data, !len)) {
		old = mw_detach(nib, win);
		win->key = q->imm_data;
		if (mr) {
			win->parent = mr;	/* the reference moves */
			atomic_inc(&mr->mw_bound);
			win->iova = addr;
			win->length = len;
			win->access = access;
			win->mw_qpn = qp->ibqp.qp_num;
			win->valid = true;
			mr = NULL;
		}
		rc = 0;
	}
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	*prev = old;	/* the old binding grants nothing */
	if (mr)
		ntrdma_mr_put(mr);
	return rc;
}

/**
 * ntrdma_mw_invalidate() - LOCAL_INV or SEND_WITH_INV of a window's key
 * @win: the key table's entry of the key's index (the table's lock held)
 * @pd: the PD of the QP invalidating it
 * @key: the key
 * @parent: set to the MR it was bound to, for the caller to put
 *
 * Return: 0, or -EINVAL (not a bound type 2 window of @pd with @key).
 */
int ntrdma_mw_invalidate(struct ntrdma_mr *win, struct ib_pd *pd, u32 key,
			 struct ntrdma_mr **parent)
{
	struct ntrdma_ib *nib = to_nib(pd->device);

	if (win->mw_type != IB_MW_TYPE_2 || win->key != key ||
	    win->ibmr.pd != pd || !win->valid)
		return -EINVAL;
	*parent = mw_detach(nib, win);
	return 0;
}

/**
 * ntrdma_mw_target() - the MR behind a window, for a remote access
 * @win: the window whose key the access named (the table's lock held)
 * @qp: the responder's QP
 * @access: the IB_ACCESS_REMOTE_* bit it needs
 * @addr: its first byte
 * @len: its bytes
 *
 * Return: the MR with a reference (ntrdma_mr_put() when done), or NULL.
 */
struct ntrdma_mr *ntrdma_mw_target(struct ntrdma_mr *win, struct ntrdma_qp *qp,
				   int access, u64 addr, u64 len)
{
	struct ntrdma_mr *mr = win->parent;
	u64 end, win_end;

	lockdep_assert_held(&to_nib(qp->ibqp.device)->mr_xa.xa_lock);
	if (!win->valid || !mr || (access & ~win->access) ||
	    win->ibmr.pd != qp->ibqp.pd ||
	    (win->mw_type == IB_MW_TYPE_2 && win->mw_qpn != qp->ibqp.qp_num))
		return NULL;
	if (check_add_overflow(addr, len, &end) ||
	    check_add_overflow(win->iova, win->length, &win_end) ||
	    addr < win->iova || end > win_end)
		return NULL;
	return refcount_inc_not_zero(&mr->refs) ? mr : NULL;
}
