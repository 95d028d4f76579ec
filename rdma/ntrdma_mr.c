// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: protection domains and memory regions.
 *
 * Keys: key = index << 8 | tag. The index (1..NTRDMA_MAX_MR) finds the MR
 * in an xarray; the 8-bit tag is random, never 0 (so index << 8 is never a
 * key) and never the tag the index had last time, so a stale or guessed key
 * of a reused index does not match.
 * lkey == rkey. No key, flag or opcode names a physical or DMA address:
 * user MRs are pinned user pages (ib_umem), the DMA MR exists for kernel
 * users only (ib_alloc_pd), and there is no reserved lkey.
 *
 * Lifetime: the data path takes a reference with ntrdma_mr_get() (which
 * checks key, PD and access) and drops it when the transfer using the MR
 * is complete; dereg_mr unpublishes the key, then waits for those
 * references before unpinning, at most NTRDMA_DEREG_WAIT_S: a WQE that
 * waits for a silent peer (timeout 0 retries for ever, as IB says) must not
 * hang dereg or process exit. Past that the MR is an orphan: dereg returns,
 * its pages stay pinned, and the last reference frees it from the device's
 * reaper work, never sooner.
 */

#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/nospec.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>
#include <linux/workqueue.h>

#include "ntrdma_ib.h"

#define NTRDMA_ACCESS_SUPPORTED	(IB_ACCESS_LOCAL_WRITE |	\
				 IB_ACCESS_REMOTE_WRITE |	\
				 IB_ACCESS_REMOTE_READ |	\
				 IB_ACCESS_REMOTE_ATOMIC)

#define NTRDMA_DEREG_WAIT_S	10

#ifdef NTRDMA_TEST_HOOKS
/*
 * Test builds: dereg_mr of an MR that takes windows sleeps this long once
 * it has decided to go on, so that a test can race a bind against it.
 */
static unsigned int dereg_delay_ms;
module_param(dereg_delay_ms, uint, 0644);
MODULE_PARM_DESC(dereg_delay_ms,
		 "Test builds: ms dereg of an MW_BIND MR sleeps past its bound-window check (at most 5000; default 0)");

static void ntrdma_dereg_test_delay(struct ntrdma_mr *mr)
{
	unsigned int ms = min(READ_ONCE(dereg_delay_ms), 5000u);

	if (mr->mw_bind && ms)
		msleep(ms);
}
#else
static inline void ntrdma_dereg_test_delay(struct ntrdma_mr *mr) {}
#endif

/* Frees the MRs dereg_mr gave up waiting for, once their last user is done;
 * apart from the device, which may go first (see ntrdma_mem_fini()).
 */
struct ntrdma_mr_reaper {
	struct workqueue_struct *wq;
	atomic_t orphans;
};

int ntrdma_mem_init(struct ntrdma_ib *nib)
{
	struct ntrdma_mr_reaper *r;

	/* IRQ-safe: kernel users post work (key lookups) from any context. */
	xa_init_flags(&nib->mr_xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
	nib->mr_tag = kcalloc(NTRDMA_MAX_MR + 1, sizeof(*nib->mr_tag),
			      GFP_KERNEL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (r)
		r->wq = alloc_workqueue("ntrdma_mr", WQ_UNBOUND, 0);
	if (!nib->mr_tag || !r || !r->wq) {
		kfree(r);
		kfree(nib->mr_tag);
		nib->mr_tag = NULL;
		return -ENOMEM;
	}
	nib->mr_reaper = r;
	return 0;
}

/* Orphans left: a bounded wait, then they and the reaper are kept. */
static void ntrdma_mr_reaper_fini(struct ntrdma_ib *nib)
{
	struct ntrdma_mr_reaper *r = nib->mr_reaper;

	nib->mr_reaper = NULL;
	if (!wait_var_event_timeout(&r->orphans, !atomic_read(&r->orphans),
				    NTRDMA_DEREG_WAIT_S * HZ)) {
		ibdev_err(&nib->ibdev, "%d deregistered MRs still in use: their pages stay pinned\n",
			  atomic_read(&r->orphans));
		return;
	}
	destroy_workqueue(r->wq);	/* the last reap has returned */
	kfree(r);
}

void ntrdma_mem_fini(struct ntrdma_ib *nib)
{
	WARN_ON(!xa_empty(&nib->mr_xa));
	xa_destroy(&nib->mr_xa);
	kfree(nib->mr_tag);
	nib->mr_tag = NULL;
	ntrdma_mr_reaper_fini(nib);
}

/* ---- PD ---- */

int ntrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibpd->device);
	int id;

	if (ntrdma_check_udata_in(udata))
		return -EOPNOTSUPP;
	/* Numbered: exports tell the peer which PD an MR or QP is of. */
	id = ida_alloc_range(&nib->pd_ida, 1, NTRDMA_MAX_PD, GFP_KERNEL);
	if (id < 0)
		return -ENOMEM;
	to_npd(ibpd)->id = id;
	atomic_inc(&nib->num_pd);
	return 0;
}

int ntrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibpd->device);

	ntrdma_export_pd_free(nib);
	ida_free(&nib->pd_ida, to_npd(ibpd)->id);
	atomic_dec(&nib->num_pd);
	return 0;
}

/* ---- MR ---- */

/* Optional bits (relaxed ordering...) are hints we may ignore. */
static int ntrdma_check_access(int access)
{
	access &= ~(IB_ACCESS_OPTIONAL | IB_ACCESS_MW_BIND);
	if (access & ~NTRDMA_ACCESS_SUPPORTED)
		return -EINVAL;
	/* Remote writers need local write, as the IB spec (and core) say. */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

static void ntrdma_mr_free(struct ntrdma_mr *mr)
{
	ntrdma_export_unmap(mr);
	ib_umem_release(mr->umem);
	kvfree(mr->upages);
	kfree(mr->pages);
	kfree(mr);
}

/* An orphan's last user is done (see ntrdma_mr_released()). */
static void ntrdma_mr_reap(struct work_struct *work)
{
	struct ntrdma_mr *mr = container_of(work, struct ntrdma_mr, reap_work);
	struct ntrdma_mr_reaper *r = mr->reaper;

	ntrdma_mr_free(mr);
	if (atomic_dec_and_test(&r->orphans))
		wake_up_var(&r->orphans);
}

/* A new MR object of @kind in @pd under @key (index << 8 | tag). */
static struct ntrdma_mr *ntrdma_mr_alloc(struct ntrdma_ib *nib,
					 struct ib_pd *pd,
					 enum ntrdma_mr_kind kind, int access,
					 u32 key)
{
	struct ntrdma_mr *mr;
	int rc;

	rc = ntrdma_check_access(access);
	if (rc)
		return ERR_PTR(rc);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->kind = kind;
	mr->index = key >> 8;
	mr->access = access & NTRDMA_ACCESS_SUPPORTED;
	mr->mw_bind = access & IB_ACCESS_MW_BIND;
	atomic_set(&mr->mw_bound, 0);
	/* Set before publishing (the core sets them again on return). */
	mr->ibmr.device = pd->device;
	mr->ibmr.pd = pd;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->key = key;
	/* A fast-reg MR is usable only once a REG_MR work request ran. */
	mr->valid = kind != NTRDMA_MR_FRMR;
	refcount_set(&mr->refs, 1);
	init_completion(&mr->released);
	spin_lock_init(&mr->orphan_lock);
	mr->reaper = nib->mr_reaper;
	INIT_WORK(&mr->reap_work, ntrdma_mr_reap);
	return mr;
}

/**
 * ntrdma_mr_new() - a new entry of the key table, not published yet
 * @nib: the device
 * @pd: its PD
 * @kind: what it is
 * @access: IB_ACCESS_* flags (checked)
 *
 * Return: the entry under a fresh key (a reserved index, a new tag), or an
 * ERR_PTR.
 */
struct ntrdma_mr *ntrdma_mr_new(struct ntrdma_ib *nib, struct ib_pd *pd,
				enum ntrdma_mr_kind kind, int access)
{
	struct ntrdma_mr *mr;
	u32 index;
	u8 tag;
	int rc;

	rc = ntrdma_check_access(access);
	if (rc)
		return ERR_PTR(rc);
	/* Reserve an index; the MR is published once it is complete. */
	rc = xa_alloc_irq(&nib->mr_xa, &index, NULL,
			  XA_LIMIT(1, NTRDMA_MAX_MR), GFP_KERNEL);
	if (rc)
		return ERR_PTR(rc == -EBUSY ? -ENOMEM : rc);
	do {
		tag = get_random_u32() & 0xff;
	} while (!tag || tag == nib->mr_tag[index]);
	nib->mr_tag[index] = tag;
	mr = ntrdma_mr_alloc(nib, pd, kind, access, index << 8 | tag);
	if (IS_ERR(mr))
		xa_erase_irq(&nib->mr_xa, index);
	return mr;
}

/**
 * ntrdma_mr_publish() - make a complete entry of ntrdma_mr_new() findable
 * @nib: the device
 * @mr: the entry (its index reserved)
 */
void ntrdma_mr_publish(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	/* The index is reserved: storing into it does not allocate. */
	xa_store_irq(&nib->mr_xa, mr->index, mr, GFP_KERNEL);
}

/* Undo ntrdma_mr_new() of an MR that was never published. */
static void ntrdma_mr_drop(struct ntrdma_ib *nib, struct ntrdma_mr *mr)
{
	xa_erase_irq(&nib->mr_xa, mr->index);
	kfree(mr);
}

/*
 * Data path: the MR of @key if it belongs to @pd and allows @access, with a
 * reference the caller drops with ntrdma_mr_put() once the transfer that
 * uses it has completed.
 */
/* @mr (the key table's lock held) for @pd and @access, with a reference. */
static bool ntrdma_mr_usable(struct ntrdma_mr *mr, struct ib_pd *pd,
			     int access)
{
	return mr->kind != NTRDMA_MR_MW && mr->valid && mr->ibmr.pd == pd &&
	       !(access & ~mr->access) && refcount_inc_not_zero(&mr->refs);
}

struct ntrdma_mr *ntrdma_mr_get(struct ntrdma_ib *nib, u32 key,
				struct ib_pd *pd, int access)
{
	struct ntrdma_mr *mr;
	unsigned long flags;

	xa_lock_irqsave(&nib->mr_xa, flags);
	mr = xa_load(&nib->mr_xa, key >> 8);
	if (mr && (mr->key != key || !ntrdma_mr_usable(mr, pd, access)))
		mr = NULL;
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	return mr;
}

/**
 * ntrdma_rkey_get() - the MR a remote access names, every check done
 * @qp: the responder's QP
 * @key: the rkey: an MR's, or a memory window's (ntrdma_mw.c)
 * @access: the IB_ACCESS_REMOTE_* bit the access needs
 * @addr: its first byte
 * @len: its bytes (inside the MR, and inside the window if one)
 *
 * Return: the MR with a reference (ntrdma_mr_put() when done), or NULL.
 */
struct ntrdma_mr *ntrdma_rkey_get(struct ntrdma_qp *qp, u32 key, int access,
				  u64 addr, u64 len)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct ntrdma_mr *mr;
	unsigned long flags;

	xa_lock_irqsave(&nib->mr_xa, flags);
	mr = xa_load(&nib->mr_xa, key >> 8);
	if (mr && mr->key != key)
		mr = NULL;
	else if (mr && mr->kind == NTRDMA_MR_MW)
		mr = ntrdma_mw_target(mr, qp, access, addr, len);
	else if (mr && !ntrdma_mr_usable(mr, qp->ibqp.pd, access))
		mr = NULL;
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	if (mr && ntrdma_mr_check(mr, addr, len)) {
		ntrdma_mr_put(mr);
		mr = NULL;
	}
	return mr;
}

void ntrdma_mr_put(struct ntrdma_mr *mr)
{
	unsigned long flags;
	bool orphan;

	if (!refcount_dec_and_test(&mr->refs))
		return;
	spin_lock_irqsave(&mr->orphan_lock, flags);
	orphan = mr->orphan;
	if (!orphan)
		complete(&mr->released);	/* dereg may free it now */
	spin_unlock_irqrestore(&mr->orphan_lock, flags);
	if (orphan)
		queue_work(mr->reaper->wq, &mr->reap_work);
}

/*
 * IB_WR_REG_MR (kernel QPs, in SQ order): the fast-reg MR @mr of @pd takes
 * @key (its index unchanged: only the tag byte may differ, as
 * ib_update_fast_reg_key() makes it) and @access, over the pages
 * map_mr_sg gave it. 0 or -EINVAL.
 */
int ntrdma_mr_fast_reg(struct ntrdma_ib *nib, struct ntrdma_mr *mr,
		       struct ib_pd *pd, u32 key, int access)
{
	unsigned long flags;

	if (mr->kind != NTRDMA_MR_FRMR || mr->ibmr.pd != pd ||
	    (key >> 8) != mr->index || ntrdma_check_access(access))
		return -EINVAL;
	xa_lock_irqsave(&nib->mr_xa, flags);
	mr->key = key;
	mr->access = access & NTRDMA_ACCESS_SUPPORTED;
	mr->valid = true;
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	return 0;
}

/**
 * ntrdma_mr_invalidate() - LOCAL_INV or SEND_WITH_INV of @key
 * @nib: the device
 * @pd: the PD of the QP invalidating it
 * @key: a fast-reg MR's key (kernel QPs) or a bound type 2 window's
 * @target: set to the MR whose access through @key stops (a reference)
 *
 * Any context. The key stops working at once; accesses already under way
 * finish: ntrdma_mr_idle() says when none is left.
 *
 * Return: 0 or -EINVAL.
 */
int ntrdma_mr_invalidate(struct ntrdma_ib *nib, struct ib_pd *pd, u32 key,
			 struct ntrdma_mr **target)
{
	struct ntrdma_mr *mr;
	unsigned long flags;
	int rc = -EINVAL;

	*target = NULL;
	xa_lock_irqsave(&nib->mr_xa, flags);
	mr = xa_load(&nib->mr_xa, key >> 8);
	if (mr && mr->kind == NTRDMA_MR_FRMR && mr->key == key &&
	    mr->ibmr.pd == pd && refcount_inc_not_zero(&mr->refs)) {
		mr->valid = false;
		*target = mr;
		rc = 0;
	} else if (mr && mr->kind == NTRDMA_MR_MW) {
		rc = ntrdma_mw_invalidate(mr, pd, key, target);
	}
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	return rc;
}

/* @key names @mr still (the key table's lock held): the MR or a window. */
static bool ntrdma_rkey_names(struct ntrdma_ib *nib, u32 key,
			      struct ntrdma_mr *mr)
{
	struct ntrdma_mr *ent = xa_load(&nib->mr_xa, key >> 8);

	lockdep_assert_held(&nib->mr_xa.xa_lock);
	if (!ent || ent->key != key)
		return false;
	if (ent->kind == NTRDMA_MR_MW)
		return ent->valid && ent->parent == mr;
	return ent == mr && mr->valid;
}

/**
 * ntrdma_rkey_enter() - one segment of a remote access to @mr starts
 * @nib: the device
 * @mr: the MR ntrdma_rkey_get() gave for @key at the message's start
 * @key: the rkey the message names
 *
 * Any context. The key is checked again for each segment: once an
 * invalidation of @key returned (ntrdma_mr_quiesce()), no later segment
 * starts. A segment that started is counted until ntrdma_rkey_leave();
 * one queued on the DMA channel stays counted in @mr->segs until copied.
 *
 * Return: true when @key still names @mr (ntrdma_rkey_leave() follows),
 * false when it was invalidated, unbound or deregistered.
 */
bool ntrdma_rkey_enter(struct ntrdma_ib *nib, struct ntrdma_mr *mr, u32 key)
{
	unsigned long flags;
	bool ok;

	atomic_inc(&mr->copying);
	smp_mb__after_atomic();	/* counted before the key is looked at */
	xa_lock_irqsave(&nib->mr_xa, flags);
	ok = ntrdma_rkey_names(nib, key, mr);
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	if (!ok)
		ntrdma_rkey_leave(mr);
	return ok;
}

/* The segment ntrdma_rkey_enter() let start is copied or queued. */
void ntrdma_rkey_leave(struct ntrdma_mr *mr)
{
	smp_mb__before_atomic();	/* the bytes before the count */
	atomic_dec(&mr->copying);
}

/**
 * ntrdma_rkey_copy() - one segment of a remote WRITE into @mr
 * @qp: the responder's QP
 * @mr: the MR ntrdma_rkey_get() gave for @key at the message's start
 * @key: the rkey the message names
 * @addr: where in @mr
 * @buf: the bytes
 * @len: how many
 *
 * Any context (one segment): see ntrdma_rkey_enter().
 *
 * Return: 0, -EACCES when @key no longer names @mr (invalidated, unbound,
 * deregistered), or ntrdma_mr_copy()'s error.
 */
int ntrdma_rkey_copy(struct ntrdma_qp *qp, struct ntrdma_mr *mr, u32 key,
		     u64 addr, void *buf, u32 len)
{
	int rc;

	if (!ntrdma_rkey_enter(to_nib(qp->ibqp.device), mr, key))
		return -EACCES;
	rc = ntrdma_mr_copy(mr, addr, buf, len, true);
	ntrdma_rkey_leave(mr);
	return rc;
}

/**
 * ntrdma_mr_quiesce() - wait for the CPU copies through @mr under way
 * @mr: an MR whose key, or a window onto it, was just invalidated
 *
 * Any context: a copy is one segment, made under its QP's lock with
 * interrupts off, so the wait is short. A copy that starts later sees the
 * invalidation (ntrdma_rkey_enter()). Segments on the DMA channel are not
 * waited for: ntrdma_mr_idle() tells when they are copied.
 */
void ntrdma_mr_quiesce(struct ntrdma_mr *mr)
{
	smp_mb();	/* the invalidation before the count */
	while (atomic_read(&mr->copying))
		cpu_relax();
}

/**
 * ntrdma_mr_idle() - no copy from or into @mr is under way
 * @mr: an MR whose key, or a window onto it, was invalidated
 *
 * Any context. The CPU copies are waited for (ntrdma_mr_quiesce()); the
 * segments that read or write its pages on the DMA channel are not: the
 * caller looks again later (the session's end completes them all).
 *
 * Return: true when none is left.
 */
bool ntrdma_mr_idle(struct ntrdma_mr *mr)
{
	ntrdma_mr_quiesce(mr);
	return !atomic_read(&mr->segs);
}

/**
 * ntrdma_mr_wait_idle() - wait until no copy from or into @mr is under way
 * @mr: an MR whose key, or a window onto it, was invalidated
 *
 * Process context, no lock held. The DMA channel copies a segment in far
 * less than NTRDMA_MR_IDLE_WAIT; one that takes longer is a failed channel.
 *
 * Return: true when none is left, false after NTRDMA_MR_IDLE_WAIT.
 */
bool ntrdma_mr_wait_idle(struct ntrdma_mr *mr)
{
	might_sleep();
	return wait_var_event_timeout(&mr->segs, ntrdma_mr_idle(mr),
				      NTRDMA_MR_IDLE_WAIT) > 0;
}

struct ib_mr *ntrdma_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct ntrdma_ib *nib = to_nib(ibpd->device);
	struct ntrdma_mr *mr;

	/* Kernel users only: uverbs has no way to ask for this. */
	mr = ntrdma_mr_new(nib, ibpd, NTRDMA_MR_DMA, access);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->length = U64_MAX;
	ntrdma_mr_publish(nib, mr);
	return &mr->ibmr;
}

/* The data path's index of a user MR's pinned pages. */
static int ntrdma_mr_pages(struct ntrdma_mr *mr)
{
	struct sg_page_iter it;
	size_t n = ib_umem_num_pages(mr->umem);
	u32 i = 0;

	if (n > U32_MAX)
		return -ENOMEM;
	mr->upages = kvmalloc_array(n, sizeof(*mr->upages), NTRDMA_GFP_USER);
	if (!mr->upages)
		return -ENOMEM;
	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &it, 0) {
		if (i >= n)
			break;
		mr->upages[i++] = sg_page_iter_page(&it);
	}
	mr->nupages = i;
	return 0;
}

/*
 * [@addr, @addr + @len) lies inside the MR (iova space; all sums checked
 * for overflow). -EACCES otherwise.
 */
int ntrdma_mr_check(struct ntrdma_mr *mr, u64 addr, u64 len)
{
	u64 end, mr_end;

	if (check_add_overflow(addr, len, &end))
		return -EACCES;
	if (mr->kind == NTRDMA_MR_DMA)
		return 0;
	if (mr->kind == NTRDMA_MR_FRMR) {
		if (check_add_overflow(mr->ibmr.iova, mr->ibmr.length, &mr_end) ||
		    addr < mr->ibmr.iova || end > mr_end)
			return -EACCES;
		return 0;
	}
	if (check_add_overflow(mr->iova, mr->length, &mr_end) ||
	    addr < mr->iova || end > mr_end)
		return -EACCES;
	return 0;
}

/*
 * The page and offset of byte @addr of the MR (already range-checked) and
 * how many bytes from there, at most @len, lie in that page. Negative
 * when the address has no page (a DMA or fast-reg MR address that is not
 * kernel memory): the data path fails the WQE, it never guesses.
 */
int ntrdma_mr_range(struct ntrdma_mr *mr, u64 addr, u32 len,
		    struct page **page, u32 *off)
{
	u64 pos, va, ps, i;

	/* @addr is the user's or the peer's: each index below is clamped. */
	switch (mr->kind) {
	case NTRDMA_MR_USER:
		pos = ib_umem_offset(mr->umem) + (addr - mr->iova);
		if ((pos >> PAGE_SHIFT) >= mr->nupages)
			return -EFAULT;
		i = array_index_nospec(pos >> PAGE_SHIFT, (u64)mr->nupages);
		*page = mr->upages[i];
		*off = pos & ~PAGE_MASK;
		break;
	case NTRDMA_MR_DMA:
		va = addr;
		goto kva;
	case NTRDMA_MR_FRMR:
		ps = mr->ibmr.page_size;
		if (!ps || !is_power_of_2(ps))
			return -EFAULT;
		pos = (addr - mr->ibmr.iova) + (mr->ibmr.iova & (ps - 1));
		if (pos / ps >= mr->npages)
			return -EFAULT;
		i = array_index_nospec(pos / ps, (u64)mr->npages);
		va = mr->pages[i] + (pos & (ps - 1));
		len = min_t(u64, len, ps - (pos & (ps - 1)));
		goto kva;
	default:
		return -EFAULT;
	}
	return min_t(u32, len, PAGE_SIZE - *off);
kva:
	if (!virt_addr_valid((void *)(uintptr_t)va))
		return -EFAULT;
	*page = virt_to_page((void *)(uintptr_t)va);
	*off = offset_in_page(va);
	return min_t(u32, len, PAGE_SIZE - *off);
}

/* Copy @len bytes between @buf and the MR at @addr (range-checked). */
int ntrdma_mr_copy(struct ntrdma_mr *mr, u64 addr, void *buf, u32 len,
		   bool to_mr)
{
	struct page *page;
	u32 off;
	void *va;
	int n;

	while (len) {
		n = ntrdma_mr_range(mr, addr, len, &page, &off);
		if (n <= 0)
			return -EFAULT;
		va = kmap_local_page(page);
		if (to_mr)
			memcpy(va + off, buf, n);
		else
			memcpy(buf, va + off, n);
		kunmap_local(va);
		addr += n;
		buf += n;
		len -= n;
	}
	return 0;
}

/*
 * Scatter @len bytes into the checked SGE list @sg, starting @off bytes
 * into it; -EFAULT if they do not fit or an address has no page.
 */
int ntrdma_rsge_scatter(const struct ntrdma_rsge *sg, u32 nsg, u32 off,
			const void *buf, u32 len)
{
	u32 i, n;

	for (i = 0; i < nsg && len; i++) {
		if (off >= sg[i].len) {
			off -= sg[i].len;
			continue;
		}
		n = min(len, sg[i].len - off);
		if (ntrdma_mr_copy(sg[i].mr, sg[i].addr + off, (void *)buf, n,
				   true))
			return -EFAULT;
		buf += n;
		len -= n;
		off = 0;
	}
	return len ? -EFAULT : 0;
}

/* The user range of a registration: checked, as reg_mr takes it. */
static int ntrdma_user_range_ok(u64 start, u64 length, u64 iova,
				struct ib_udata *udata)
{
	u64 end;

	if (!udata)
		return -EINVAL;
	if (ntrdma_check_udata_in(udata))
		return -EOPNOTSUPP;
	if (!length || length > NTRDMA_MAX_MR_SIZE ||
	    check_add_overflow(start, length, &end) ||
	    check_add_overflow(iova, length, &end))
		return -EINVAL;
	return 0;
}

/* Pin the user pages of @mr (fails for unmapped addresses). */
static int ntrdma_mr_pin(struct ntrdma_mr *mr, u64 start, u64 length,
			 u64 iova, int access)
{
	struct ib_umem *umem;

	umem = ib_umem_get(mr->ibmr.device, start, length, access);
	if (IS_ERR(umem))
		return PTR_ERR(umem);
	mr->umem = umem;
	mr->iova = iova;
	mr->length = length;
	if (ntrdma_mr_pages(mr)) {
		ib_umem_release(umem);
		mr->umem = NULL;
		return -ENOMEM;
	}
	return 0;
}

struct ib_mr *ntrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 iova, int access, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibpd->device);
	struct ntrdma_mr *mr;
	int rc;

	rc = ntrdma_user_range_ok(start, length, iova, udata);
	if (rc)
		return ERR_PTR(rc);
	mr = ntrdma_mr_new(nib, ibpd, NTRDMA_MR_USER, access);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	rc = ntrdma_mr_pin(mr, start, length, iova, access);
	if (rc) {
		ntrdma_mr_drop(nib, mr);
		return ERR_PTR(rc);
	}
	ntrdma_mr_publish(nib, mr);
	ntrdma_export_mr(nib, mr);
	return &mr->ibmr;
}

/*
 * The point of no return of dereg (@next NULL) and rereg (@next takes
 * @mr's place in the key table): -EBUSY while a window is bound to @mr
 * (unbind it first). Else @mr is dying, so no bind counts a window on it
 * any more (ntrdma_mw_bind() checks under the same lock), and its key
 * leaves the table, unless a rereg put its successor there (same key).
 */
static int ntrdma_mr_retire(struct ntrdma_ib *nib, struct ntrdma_mr *mr,
			    struct ntrdma_mr *next)
{
	unsigned long flags;
	int rc = 0;

	xa_lock_irqsave(&nib->mr_xa, flags);
	if (atomic_read(&mr->mw_bound)) {
		rc = -EBUSY;
	} else {
		mr->dying = true;
		/* The index is taken: storing into it allocates nothing. */
		if (next)
			__xa_store(&nib->mr_xa, next->index, next, GFP_ATOMIC);
		else
			__xa_cmpxchg(&nib->mr_xa, mr->index, mr, NULL,
				     GFP_ATOMIC);
	}
	xa_unlock_irqrestore(&nib->mr_xa, flags);
	return rc;
}

/**
 * ntrdma_rereg_user_mr() - ibv_rereg_mr(): a new MR in the old one's place
 * @ibmr: the user MR
 * @flags: IB_MR_REREG_TRANS, _PD, _ACCESS: what changes
 * @start: new user address (TRANS)
 * @length: new length (TRANS)
 * @iova: new I/O virtual address (TRANS)
 * @access: new access flags (ACCESS)
 * @pd: the PD, new or the MR's own
 * @udata: the user's call
 *
 * Every change gives a new MR object under the same keys (as HCAs keep
 * them: users go on with the keys they exchanged), checked and pinned as
 * ibv_reg_mr() does, that takes the old one's place in the key table at
 * once: from then on the keys reach the new translation, PD and access
 * only. The RDMA core then deregisters the old object, which revokes its
 * export and waits for its users as dereg does (its erase of the key's
 * slot finds the new MR there and leaves it). The new MR is not exported:
 * the peer's WRITEs to it take the checked path (an export now could
 * reach the peer before the old one's revocation, which names the same
 * key).
 *
 * Return: the new MR, or an ERR_PTR (the old MR is untouched).
 */
struct ib_mr *ntrdma_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				   u64 length, u64 iova, int access,
				   struct ib_pd *pd, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibmr->device);
	struct ntrdma_mr *old = to_nmr(ibmr), *mr;
	int rc;

	if (old->kind != NTRDMA_MR_USER)
		return ERR_PTR(-EINVAL);
	if (atomic_read(&old->mw_bound))
		return ERR_PTR(-EBUSY);	/* early: ntrdma_mr_retire() decides */
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = old->umem->address;
		length = old->umem->length;
		iova = old->iova;
	}
	if (!(flags & IB_MR_REREG_ACCESS))
		access = old->access | (old->mw_bind ? IB_ACCESS_MW_BIND : 0);
	rc = ntrdma_user_range_ok(start, length, iova, udata);
	if (rc)
		return ERR_PTR(rc);
	mr = ntrdma_mr_alloc(nib, pd, NTRDMA_MR_USER, access, old->key);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	rc = ntrdma_mr_pin(mr, start, length, iova, access);
	if (!rc)
		rc = ntrdma_mr_retire(nib, old, mr);
	if (rc) {
		ntrdma_mr_free(mr);
		return ERR_PTR(rc);
	}
	return &mr->ibmr;
}

struct ib_mr *ntrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			      u32 max_num_sg)
{
	struct ntrdma_ib *nib = to_nib(ibpd->device);
	struct ntrdma_mr *mr;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > NTRDMA_MAX_FRPL)
		return ERR_PTR(-EINVAL);
	/* Access comes with the registration WR; none until then. */
	mr = ntrdma_mr_new(nib, ibpd, NTRDMA_MR_FRMR, 0);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->pages = kcalloc(max_num_sg, sizeof(*mr->pages), GFP_KERNEL);
	if (!mr->pages) {
		ntrdma_mr_drop(nib, mr);
		return ERR_PTR(-ENOMEM);
	}
	mr->max_pages = max_num_sg;
	ntrdma_mr_publish(nib, mr);
	return &mr->ibmr;
}

static int ntrdma_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct ntrdma_mr *mr = to_nmr(ibmr);

	if (mr->npages >= mr->max_pages)
		return -ENOMEM;
	mr->pages[mr->npages++] = addr;
	return 0;
}

int ntrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		     unsigned int *sg_offset)
{
	struct ntrdma_mr *mr = to_nmr(ibmr);

	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, ntrdma_set_page);
}

/*
 * Wait (bounded) for the transfers still using @mr: true when they are done.
 * Else @mr becomes an orphan that its last ntrdma_mr_put() hands to the
 * reaper; the caller must not touch it any more.
 */
static bool ntrdma_mr_released(struct ntrdma_mr *mr, unsigned int wait_s)
{
	struct ib_device *ibdev = mr->ibmr.device;
	u32 index = mr->index, refs;
	unsigned long flags;
	bool done;

	done = wait_for_completion_timeout(&mr->released, wait_s * HZ);
	/* Also waits for a last put still inside its locked section. */
	spin_lock_irqsave(&mr->orphan_lock, flags);
	if (!done)
		done = try_wait_for_completion(&mr->released);
	refs = refcount_read(&mr->refs);
	if (!done) {
		mr->orphan = true;
		atomic_inc(&mr->reaper->orphans);
	}
	spin_unlock_irqrestore(&mr->orphan_lock, flags);
	if (!done)
		ibdev_warn(ibdev, "dereg of MR %u: %u references still held after %u s: it returns, the pages stay pinned until they are dropped\n",
			   index, refs, wait_s);
	return done;
}

int ntrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct ntrdma_ib *nib = to_nib(ibmr->device);
	struct ntrdma_mr *mr = to_nmr(ibmr);
	bool revoked;
	int rc;

	rc = ntrdma_mr_retire(nib, mr, NULL);
	if (rc)
		return rc;
	ntrdma_dereg_test_delay(mr);
	/*
	 * No new users (the key is out of the table); the peer stops placing
	 * into it, and writing the sinks of our READs held with it (else it
	 * is not worth waiting: those references stay until the peer
	 * provably left the session); the transfers still using it finish.
	 */
	revoked = ntrdma_unexport_mr(nib, mr) && ntrdma_sink_mr_quiet(nib, mr);
	ntrdma_mr_put(mr);
	if (ntrdma_mr_released(mr, revoked ? NTRDMA_DEREG_WAIT_S : 0))
		ntrdma_mr_free(mr);
	return 0;
}
