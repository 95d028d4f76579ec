// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: the rings shared with userspace (as rxe_queue.c in
 * rxe): the SQ, RQ, SRQ and CQ rings (struct ntrdma_ring; their layout, a
 * control block then the slots, is ntrdma-abi.h's), allocated zeroed with
 * vmalloc and charged to the creating task's memory cgroup, offered to the
 * user as rdma_user_mmap entries and mapped by ntrdma_mmap(). Once
 * offered, a ring's memory belongs to its mmap entry and goes when the
 * entry is removed and unmapped. The control block and the slots:
 * ntrdma_ring_ctl() and ntrdma_ring_slot() in ntrdma_ib.h.
 */

#include <linux/mm.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "ntrdma_ib.h"

int ntrdma_ring_alloc(struct ntrdma_ring *ring, u32 entries, u32 stride)
{
	size_t size;

	if (!entries || !is_power_of_2(entries))
		return -EINVAL;
	size = PAGE_ALIGN(NTRDMA_RING_CTL_SIZE + (size_t)entries * stride);
	ring->buf = __vmalloc(size, NTRDMA_GFP_USER | __GFP_ZERO);
	if (!ring->buf)
		return -ENOMEM;
	ring->size = size;
	ring->entries = entries;
	ring->stride = stride;
	ring->mmap = NULL;
	return 0;
}

/*
 * Offer the ring to the user: from now on the mmap entry owns the memory
 * (freed in ntrdma_mmap_free() when the entry is removed and unmapped).
 */
int ntrdma_ring_map(struct ntrdma_ring *ring, struct ib_udata *udata,
		    u64 *offset)
{
	struct ntrdma_ucontext *uc = rdma_udata_to_drv_context(udata,
			struct ntrdma_ucontext, ibuc);
	struct ntrdma_mmap_entry *e;
	int rc;

	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	e->buf = ring->buf;
	rc = rdma_user_mmap_entry_insert(&uc->ibuc, &e->rdma, ring->size);
	if (rc) {
		kfree(e);
		return rc;
	}
	ring->mmap = &e->rdma;
	*offset = rdma_user_mmap_get_offset(&e->rdma);
	return 0;
}

void ntrdma_ring_free(struct ntrdma_ring *ring)
{
	if (ring->mmap)
		rdma_user_mmap_entry_remove(ring->mmap);	/* frees later */
	else
		vfree(ring->buf);
	ring->buf = NULL;
	ring->mmap = NULL;
}

void ntrdma_mmap_free(struct rdma_user_mmap_entry *rdma)
{
	struct ntrdma_mmap_entry *e =
		container_of(rdma, struct ntrdma_mmap_entry, rdma);

	vfree(e->buf);
	kfree(e);
}

/* The ring's pages, one by one, as remap_vmalloc_range() maps them. */
static int ntrdma_mmap_pages(struct vm_area_struct *vma, void *buf)
{
	unsigned long off, len = vma->vm_end - vma->vm_start;
	int rc;

	for (off = 0; off < len; off += PAGE_SIZE) {
		rc = vm_insert_page(vma, vma->vm_start + off,
				    vmalloc_to_page(buf + off));
		if (rc)
			return rc;
	}
#ifdef NTRDMA_VM_FLAGS_SET
	vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
#else
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
#endif
	return 0;
}

int ntrdma_mmap(struct ib_ucontext *ibuc, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma;
	struct ntrdma_mmap_entry *e;
	int rc;

	rdma = rdma_user_mmap_entry_get(ibuc, vma);
	if (!rdma)
		return -EINVAL;
	e = container_of(rdma, struct ntrdma_mmap_entry, rdma);
	if (vma->vm_end - vma->vm_start != rdma->npages << PAGE_SHIFT)
		rc = -EINVAL;
	else
		rc = ntrdma_mmap_pages(vma, e->buf);
	rdma_user_mmap_entry_put(rdma);
	return rc;
}
