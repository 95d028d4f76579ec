// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ntb_hw_ivshmem: an NTB hardware driver for the emulated NTB built from QEMU
 * ivshmem PCI devices (1af4:1110). The device model is described in
 * ntb_hw/HARDWARE.md: one NTB port is one PCI slot whose function 0 is an
 * ivshmem-doorbell device (register file, MSI-X, doorbell register) and whose
 * functions 1-3 are ivshmem-plain memory windows.
 *
 * Everything the peer can write (its register block, our inbound register
 * block) is treated as untrusted: indices come from us, never from the peer.
 *
 * The module's files: this one (the NTB device: ntb_dev_ops, DMA mapping
 * ops, PCI probe; functions prefixed ivntb_), ntb_hw_ivshmem_dma.c (the
 * port's DMA engine, ivdma_) and ntb_hw_ivshmem_probe.c (the copy-rate
 * probe, ivprobe_).
 */

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/debugfs.h>
#include <linux/dma-map-ops.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/ntb.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include "ntb_hw_ivshmem_dma.h"
#include "ntb_hw_ivshmem_probe.h"

#define IVNTB_NAME		"ntb_hw_ivshmem"

#define IVSHMEM_VENDOR_ID	0x1af4
#define IVSHMEM_DEVICE_ID	0x1110

/* BAR0 registers of an ivshmem device */
#define IVSHMEM_REG_IVPOSITION	0x08
#define IVSHMEM_REG_DOORBELL	0x0c

/* The register file: one block per port */
#define IVNTB_BLOCK_SIZE	0x1000
#define IVNTB_MAGIC		0x4942544e	/* "NTBI" */
#define IVNTB_OFF_MAGIC		0x000
#define IVNTB_OFF_PRESENT	0x004
#define IVNTB_OFF_GENERATION	0x008
#define IVNTB_OFF_ENABLED	0x00c
#define IVNTB_OFF_DB		0x010
#define IVNTB_OFF_MSG_STS	0x018
#define IVNTB_OFF_MSG		0x020
#define IVNTB_OFF_SPAD		0x100
#define IVNTB_DRV_OFF_FIRST	IVNTB_OFF_ENABLED

#define IVNTB_PORTS		2
#define IVNTB_SPAD_COUNT	32
#define IVNTB_MSG_COUNT		4
#define IVNTB_DB_BITS		16
#define IVNTB_DB_VALID		GENMASK_ULL(IVNTB_DB_BITS - 1, 0)
#define IVNTB_DB_VECTORS	4
#define IVNTB_CTRL_VECTOR	0
#define IVNTB_NR_VECTORS	(1 + IVNTB_DB_VECTORS)
#define IVNTB_MSG_INBITS	GENMASK_ULL(IVNTB_MSG_COUNT - 1, 0)
/* status bit 4 + i: our last write to the peer's message i failed (full) */
#define IVNTB_MSG_OUTBITS	(IVNTB_MSG_INBITS << IVNTB_MSG_COUNT)
#define IVNTB_MSG_ALLBITS	(IVNTB_MSG_INBITS | IVNTB_MSG_OUTBITS)

#define IVNTB_FN_REGS		0
#define IVNTB_FN_AP_IN		1
#define IVNTB_FN_AP_OUT		2
#define IVNTB_FN_FLAT		3
#define IVNTB_NR_FN		4

#define IVNTB_AP_SLOTS		2
#define IVNTB_MW_FLAT		IVNTB_AP_SLOTS

static bool dma_engine = true;
module_param(dma_engine, bool, 0444);
MODULE_PARM_DESC(dma_engine,
		 "Offer a DMA_MEMCPY channel per port that copies to and from the flat window (default Y)");

static bool flat_window = true;
module_param(flat_window, bool, 0444);
MODULE_PARM_DESC(flat_window,
		 "Expose function 3 (flat window onto the peer's RAM) as the last memory window");

struct ivntb_dev;

struct ivntb_vec {
	struct ivntb_dev *iv;
	int index;		/* MSI-X vector of function 0 */
};

struct ivntb_dev {
	struct ntb_dev ntb;
	struct ivntb_vec vec[IVNTB_NR_VECTORS];
	struct pci_dev *fn[IVNTB_NR_FN];
	void __iomem *mmio;
	void *regs;
	void *lblk;		/* our block: the peer writes db, msg, spads */
	void *pblk;		/* the peer's block */
	int port;
	int peer_port;

	void *ap_virt;		/* inbound aperture, local view */
	phys_addr_t ap_phys;
	resource_size_t slot_size;
	phys_addr_t out_phys;	/* outbound aperture (peer's inbound) */
	phys_addr_t flat_phys;	/* flat window onto the peer's RAM */
	resource_size_t flat_size;
	int mw_count;

	spinlock_t lock;	/* slots, masks, link state */
	unsigned long slot_used;
	int slot_hint;
	u64 db_mask;
	u64 msg_mask;
	unsigned long msg_outsts;	/* IVNTB_MSG_OUTBITS, local */
	bool link_up;
	const struct dma_map_ops *saved_dma_ops;
	struct ivdma *dma;	/* the port's DMA engine, if offered */
	struct ivprobe *probe;	/* debugfs copy_probe */
};

static struct dentry *ivntb_debugfs;

#define ntb_ivntb(__ntb) container_of(__ntb, struct ivntb_dev, ntb)

static inline u32 *blk_u32(void *blk, unsigned int off)
{
	return (u32 *)((u8 *)blk + off);
}

static inline atomic64_t *blk_db(void *blk)
{
	return (atomic64_t *)((u8 *)blk + IVNTB_OFF_DB);
}

static inline atomic_t *blk_msg_sts(void *blk)
{
	return (atomic_t *)((u8 *)blk + IVNTB_OFF_MSG_STS);
}

static inline u32 blk_read(void *blk, unsigned int off)
{
	return READ_ONCE(*blk_u32(blk, off));
}

static inline void blk_write(void *blk, unsigned int off, u32 val)
{
	WRITE_ONCE(*blk_u32(blk, off), val);
}

static u64 ivntb_db_vector_bits(int vector)
{
	u64 mask = 0;
	int b;

	for (b = vector; b < IVNTB_DB_BITS; b += IVNTB_DB_VECTORS)
		mask |= BIT_ULL(b);
	return mask;
}

/* Raise MSI-X vector @vector of the peer port. */
static void ivntb_ring_peer(struct ivntb_dev *iv, int vector)
{
	iowrite32(((u32)iv->peer_port << 16) | (u32)vector,
		  iv->mmio + IVSHMEM_REG_DOORBELL);
}

/* ---- link ---- */

static bool ivntb_link_state(struct ivntb_dev *iv)
{
	return blk_read(iv->lblk, IVNTB_OFF_ENABLED) == 1 &&
	       blk_read(iv->pblk, IVNTB_OFF_MAGIC) == IVNTB_MAGIC &&
	       blk_read(iv->pblk, IVNTB_OFF_PRESENT) == 1 &&
	       blk_read(iv->pblk, IVNTB_OFF_ENABLED) == 1;
}

static void ivntb_link_check(struct ivntb_dev *iv)
{
	unsigned long flags;
	bool up, changed;

	spin_lock_irqsave(&iv->lock, flags);
	up = ivntb_link_state(iv);
	changed = up != iv->link_up;
	iv->link_up = up;
	spin_unlock_irqrestore(&iv->lock, flags);

	if (changed) {
		dev_info(&iv->fn[IVNTB_FN_REGS]->dev, "link %s (peer port %d, generation %u)\n",
			 up ? "up" : "down", iv->peer_port,
			 blk_read(iv->pblk, IVNTB_OFF_GENERATION));
		ntb_link_event(&iv->ntb);
	}
}

static u64 ivntb_link_is_up(struct ntb_dev *ntb, enum ntb_speed *speed,
			    enum ntb_width *width)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	/*
	 * Read the registers, not the state cached for link events: the
	 * doorbell vector may fire before the link-change vector, and a client
	 * must already see the link up when the peer's first doorbell arrives.
	 */
	bool up = ivntb_link_state(iv);

	if (speed)
		*speed = up ? NTB_SPEED_GEN3 : NTB_SPEED_NONE;
	if (width)
		*width = up ? NTB_WIDTH_8 : NTB_WIDTH_NONE;
	return up;
}

static int ivntb_link_enable(struct ntb_dev *ntb, enum ntb_speed max_speed,
			     enum ntb_width max_width)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);

	blk_write(iv->lblk, IVNTB_OFF_ENABLED, 1);
	smp_mb(); /* the enable is visible before the peer looks */
	ivntb_ring_peer(iv, IVNTB_CTRL_VECTOR);
	ivntb_link_check(iv);
	return 0;
}

static int ivntb_link_disable(struct ntb_dev *ntb)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);

	blk_write(iv->lblk, IVNTB_OFF_ENABLED, 0);
	smp_mb(); /* the disable is visible before the peer looks */
	ivntb_ring_peer(iv, IVNTB_CTRL_VECTOR);
	ivntb_link_check(iv);
	return 0;
}

/*
 * ---- ports ----
 *
 * A two-port NTB may leave its ports unnumbered (both 0), as the NTB API
 * allows. This one does: ntb_perf then uses MW 0 in both directions, which
 * matters here because it queries the alignment of one window and translates
 * another, and our inbound buffers are placed by the alignment query. The
 * ivshmem id (0 or 1) stays internal: it addresses the register file blocks.
 */

static int ivntb_port_number(struct ntb_dev *ntb)
{
	return 0;
}

static int ivntb_peer_port_count(struct ntb_dev *ntb)
{
	return 1;
}

static int ivntb_peer_port_number(struct ntb_dev *ntb, int pidx)
{
	if (pidx != 0)
		return -EINVAL;
	return 0;
}

static int ivntb_peer_port_idx(struct ntb_dev *ntb, int port)
{
	if (port != 0)
		return -EINVAL;
	return 0;
}

/* ---- memory windows ---- */

static int ivntb_mw_count(struct ntb_dev *ntb, int pidx)
{
	if (pidx != 0)
		return -EINVAL;
	return ntb_ivntb(ntb)->mw_count;
}

static int ivntb_peer_mw_count(struct ntb_dev *ntb)
{
	return ntb_ivntb(ntb)->mw_count;
}

static int ivntb_mw_get_align(struct ntb_dev *ntb, int pidx, int widx,
			      resource_size_t *addr_align,
			      resource_size_t *size_align,
			      resource_size_t *size_max)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	unsigned long flags;

	if (pidx != 0 || widx < 0 || widx >= iv->mw_count)
		return -EINVAL;
	if (!ivntb_link_state(iv))
		return -ENOLINK;

	if (widx == IVNTB_MW_FLAT) {
		if (addr_align)
			*addr_align = PAGE_SIZE;
		if (size_align)
			*size_align = PAGE_SIZE;
		if (size_max)
			*size_max = iv->flat_size;
		return 0;
	}

	/* The next coherent allocation on this device serves this window. */
	spin_lock_irqsave(&iv->lock, flags);
	iv->slot_hint = widx;
	spin_unlock_irqrestore(&iv->lock, flags);

	if (addr_align)
		*addr_align = iv->slot_size;
	if (size_align)
		*size_align = PAGE_SIZE;
	if (size_max)
		*size_max = iv->slot_size;
	return 0;
}

static int ivntb_mw_set_trans(struct ntb_dev *ntb, int pidx, int widx,
			      dma_addr_t addr, resource_size_t size)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	dma_addr_t base;

	if (pidx != 0 || widx < 0 || widx >= iv->mw_count)
		return -EINVAL;

	if (widx == IVNTB_MW_FLAT) {
		if (addr != 0 || size == 0 || size > iv->flat_size) {
			dev_err(&ntb->dev,
				"MW%d is a flat window: translation must be 0 (got %pad size %pa)\n",
				widx, &addr, &size);
			return -EINVAL;
		}
	} else {
		base = iv->ap_phys + (dma_addr_t)widx * iv->slot_size;
		if (addr != base || size == 0 || size > iv->slot_size) {
			dev_err(&ntb->dev,
				"MW%d translation %pad size %pa outside its aperture slot %pad\n",
				widx, &addr, &size, &base);
			return -EINVAL;
		}
	}
	return 0;
}

static int ivntb_mw_clear_trans(struct ntb_dev *ntb, int pidx, int widx)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);

	/* Nothing to undo: the windows are fixed apertures. */
	if (pidx != 0 || widx < 0 || widx >= iv->mw_count)
		return -EINVAL;
	return 0;
}

static int ivntb_peer_mw_get_addr(struct ntb_dev *ntb, int widx,
				  phys_addr_t *base, resource_size_t *size)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);

	if (widx < 0 || widx >= iv->mw_count)
		return -EINVAL;

	if (widx == IVNTB_MW_FLAT) {
		if (base)
			*base = iv->flat_phys;
		if (size)
			*size = iv->flat_size;
	} else {
		if (base)
			*base = iv->out_phys + (phys_addr_t)widx * iv->slot_size;
		if (size)
			*size = iv->slot_size;
	}
	return 0;
}

/* ---- doorbells ---- */

static int ivntb_db_is_unsafe(struct ntb_dev *ntb)
{
	return 0;
}

static u64 ivntb_db_valid_mask(struct ntb_dev *ntb)
{
	return IVNTB_DB_VALID;
}

static int ivntb_db_vector_count(struct ntb_dev *ntb)
{
	return IVNTB_DB_VECTORS;
}

static u64 ivntb_db_vector_mask(struct ntb_dev *ntb, int db_vector)
{
	if (db_vector < 0 || db_vector >= IVNTB_DB_VECTORS)
		return 0;
	return ivntb_db_vector_bits(db_vector);
}

static u64 ivntb_db_read(struct ntb_dev *ntb)
{
	return (u64)atomic64_read(blk_db(ntb_ivntb(ntb)->lblk)) & IVNTB_DB_VALID;
}

static int ivntb_db_clear(struct ntb_dev *ntb, u64 db_bits)
{
	if (db_bits & ~IVNTB_DB_VALID)
		return -EINVAL;
	atomic64_andnot(db_bits, blk_db(ntb_ivntb(ntb)->lblk));
	return 0;
}

static u64 ivntb_db_read_mask(struct ntb_dev *ntb)
{
	return READ_ONCE(ntb_ivntb(ntb)->db_mask);
}

static int ivntb_db_set_mask(struct ntb_dev *ntb, u64 db_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	unsigned long flags;

	if (db_bits & ~IVNTB_DB_VALID)
		return -EINVAL;
	spin_lock_irqsave(&iv->lock, flags);
	iv->db_mask |= db_bits;
	spin_unlock_irqrestore(&iv->lock, flags);
	return 0;
}

/* Deliver db_event for every vector that has pending, unmasked bits. */
static void ivntb_db_deliver(struct ivntb_dev *iv, unsigned long vectors)
{
	u64 pending = ivntb_db_read(&iv->ntb) & ~READ_ONCE(iv->db_mask);
	int v;

	for_each_set_bit(v, &vectors, IVNTB_DB_VECTORS)
		if (pending & ivntb_db_vector_bits(v))
			ntb_db_event(&iv->ntb, v);
}

static int ivntb_db_clear_mask(struct ntb_dev *ntb, u64 db_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	unsigned long flags, vectors = 0;
	int v;

	if (db_bits & ~IVNTB_DB_VALID)
		return -EINVAL;
	spin_lock_irqsave(&iv->lock, flags);
	iv->db_mask &= ~db_bits;
	spin_unlock_irqrestore(&iv->lock, flags);

	/* A bit that arrived while masked must not be lost: re-raise it. */
	for (v = 0; v < IVNTB_DB_VECTORS; v++)
		if (db_bits & ivntb_db_vector_bits(v))
			vectors |= BIT(v);
	ivntb_db_deliver(iv, vectors);
	return 0;
}

static int ivntb_peer_db_set(struct ntb_dev *ntb, u64 db_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	int v;

	if (db_bits & ~IVNTB_DB_VALID)
		return -EINVAL;
	atomic64_or(db_bits, blk_db(iv->pblk));
	for (v = 0; v < IVNTB_DB_VECTORS; v++)
		if (db_bits & ivntb_db_vector_bits(v))
			ivntb_ring_peer(iv, 1 + v);
	return 0;
}

static u64 ivntb_peer_db_read(struct ntb_dev *ntb)
{
	return (u64)atomic64_read(blk_db(ntb_ivntb(ntb)->pblk)) & IVNTB_DB_VALID;
}

/* ---- scratchpads ---- */

static int ivntb_spad_is_unsafe(struct ntb_dev *ntb)
{
	return 0;
}

static int ivntb_spad_count(struct ntb_dev *ntb)
{
	return IVNTB_SPAD_COUNT;
}

static u32 ivntb_spad_read(struct ntb_dev *ntb, int sidx)
{
	if (sidx < 0 || sidx >= IVNTB_SPAD_COUNT)
		return 0;
	return blk_read(ntb_ivntb(ntb)->lblk, IVNTB_OFF_SPAD + 4 * sidx);
}

static int ivntb_spad_write(struct ntb_dev *ntb, int sidx, u32 val)
{
	if (sidx < 0 || sidx >= IVNTB_SPAD_COUNT)
		return -EINVAL;
	blk_write(ntb_ivntb(ntb)->lblk, IVNTB_OFF_SPAD + 4 * sidx, val);
	return 0;
}

static u32 ivntb_peer_spad_read(struct ntb_dev *ntb, int pidx, int sidx)
{
	if (pidx != 0 || sidx < 0 || sidx >= IVNTB_SPAD_COUNT)
		return 0;
	return blk_read(ntb_ivntb(ntb)->pblk, IVNTB_OFF_SPAD + 4 * sidx);
}

static int ivntb_peer_spad_write(struct ntb_dev *ntb, int pidx, int sidx,
				 u32 val)
{
	if (pidx != 0 || sidx < 0 || sidx >= IVNTB_SPAD_COUNT)
		return -EINVAL;
	blk_write(ntb_ivntb(ntb)->pblk, IVNTB_OFF_SPAD + 4 * sidx, val);
	return 0;
}

/* ---- message registers ---- */

static int ivntb_msg_count(struct ntb_dev *ntb)
{
	return IVNTB_MSG_COUNT;
}

static u64 ivntb_msg_inbits(struct ntb_dev *ntb)
{
	return IVNTB_MSG_INBITS;
}

static u64 ivntb_msg_outbits(struct ntb_dev *ntb)
{
	return IVNTB_MSG_OUTBITS;
}

static u64 ivntb_msg_read_sts(struct ntb_dev *ntb)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);

	return ((u64)(u32)atomic_read(blk_msg_sts(iv->lblk)) &
		IVNTB_MSG_INBITS) | (READ_ONCE(iv->msg_outsts) &
				     IVNTB_MSG_OUTBITS);
}

static int ivntb_msg_clear_sts(struct ntb_dev *ntb, u64 sts_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	int i;

	/* Like a write-1-to-clear register: reserved bits are ignored. */
	atomic_andnot((int)(sts_bits & IVNTB_MSG_INBITS),
		      blk_msg_sts(iv->lblk));
	for (i = 0; i < IVNTB_MSG_COUNT; i++)
		if (sts_bits & BIT_ULL(IVNTB_MSG_COUNT + i))
			clear_bit(IVNTB_MSG_COUNT + i, &iv->msg_outsts);
	return 0;
}

static void ivntb_msg_deliver(struct ivntb_dev *iv)
{
	/* Only inbound messages raise the event; failures are polled. */
	if (ivntb_msg_read_sts(&iv->ntb) & IVNTB_MSG_INBITS &
	    ~READ_ONCE(iv->msg_mask))
		ntb_msg_event(&iv->ntb);
}

static int ivntb_msg_set_mask(struct ntb_dev *ntb, u64 mask_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	unsigned long flags;

	if (mask_bits & ~IVNTB_MSG_ALLBITS)
		return -EINVAL;
	spin_lock_irqsave(&iv->lock, flags);
	iv->msg_mask |= mask_bits;
	spin_unlock_irqrestore(&iv->lock, flags);
	return 0;
}

static int ivntb_msg_clear_mask(struct ntb_dev *ntb, u64 mask_bits)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	unsigned long flags;

	if (mask_bits & ~IVNTB_MSG_ALLBITS)
		return -EINVAL;
	spin_lock_irqsave(&iv->lock, flags);
	iv->msg_mask &= ~mask_bits;
	spin_unlock_irqrestore(&iv->lock, flags);
	ivntb_msg_deliver(iv);
	return 0;
}

static u32 ivntb_msg_read(struct ntb_dev *ntb, int *pidx, int midx)
{
	if (midx < 0 || midx >= IVNTB_MSG_COUNT)
		return ~0U;
	if (pidx)
		*pidx = 0;
	return blk_read(ntb_ivntb(ntb)->lblk, IVNTB_OFF_MSG + 4 * midx);
}

static int ivntb_peer_msg_write(struct ntb_dev *ntb, int pidx, int midx,
				u32 msg)
{
	struct ivntb_dev *iv = ntb_ivntb(ntb);
	atomic_t *sts = blk_msg_sts(iv->pblk);

	if (pidx != 0 || midx < 0 || midx >= IVNTB_MSG_COUNT)
		return -EINVAL;
	/*
	 * The peer has not consumed the previous message: never overwrite;
	 * report the failure in our outbound status bit, as hardware does
	 * (ntb_perf retries on it).
	 */
	if (atomic_read(sts) & BIT(midx)) {
		set_bit(IVNTB_MSG_COUNT + midx, &iv->msg_outsts);
		return -EBUSY;
	}
	blk_write(iv->pblk, IVNTB_OFF_MSG + 4 * midx, msg);
	smp_mb__before_atomic(); /* the message before its status bit */
	atomic_or(BIT(midx), sts);
	ivntb_ring_peer(iv, IVNTB_CTRL_VECTOR);
	return 0;
}

static const struct ntb_dev_ops ivntb_ops = {
	.port_number		= ivntb_port_number,
	.peer_port_count	= ivntb_peer_port_count,
	.peer_port_number	= ivntb_peer_port_number,
	.peer_port_idx		= ivntb_peer_port_idx,
	.link_is_up		= ivntb_link_is_up,
	.link_enable		= ivntb_link_enable,
	.link_disable		= ivntb_link_disable,
	.mw_count		= ivntb_mw_count,
	.mw_get_align		= ivntb_mw_get_align,
	.mw_set_trans		= ivntb_mw_set_trans,
	.mw_clear_trans		= ivntb_mw_clear_trans,
	.peer_mw_count		= ivntb_peer_mw_count,
	.peer_mw_get_addr	= ivntb_peer_mw_get_addr,
	.db_is_unsafe		= ivntb_db_is_unsafe,
	.db_valid_mask		= ivntb_db_valid_mask,
	.db_vector_count	= ivntb_db_vector_count,
	.db_vector_mask		= ivntb_db_vector_mask,
	.db_read		= ivntb_db_read,
	.db_clear		= ivntb_db_clear,
	.db_read_mask		= ivntb_db_read_mask,
	.db_set_mask		= ivntb_db_set_mask,
	.db_clear_mask		= ivntb_db_clear_mask,
	.peer_db_read		= ivntb_peer_db_read,
	.peer_db_set		= ivntb_peer_db_set,
	.spad_is_unsafe		= ivntb_spad_is_unsafe,
	.spad_count		= ivntb_spad_count,
	.spad_read		= ivntb_spad_read,
	.spad_write		= ivntb_spad_write,
	.peer_spad_read		= ivntb_peer_spad_read,
	.peer_spad_write	= ivntb_peer_spad_write,
	.msg_count		= ivntb_msg_count,
	.msg_inbits		= ivntb_msg_inbits,
	.msg_outbits		= ivntb_msg_outbits,
	.msg_read_sts		= ivntb_msg_read_sts,
	.msg_clear_sts		= ivntb_msg_clear_sts,
	.msg_set_mask		= ivntb_msg_set_mask,
	.msg_clear_mask		= ivntb_msg_clear_mask,
	.msg_read		= ivntb_msg_read,
	.peer_msg_write		= ivntb_peer_msg_write,
};

/*
 * ---- coherent memory of the NTB function: the inbound aperture ----
 *
 * NTB clients allocate their inbound buffers with dma_alloc_coherent() on
 * ntb->pdev. On this hardware the peer's outbound window for MW i is fixed to
 * slot i of our inbound aperture, so those allocations are served from the
 * aperture. Streaming mappings are identity (no IOMMU behind the emulator).
 */

static struct ivntb_dev *dev_ivntb(struct device *dev)
{
	return pci_get_drvdata(to_pci_dev(dev));
}

static void *ivntb_dma_alloc(struct device *dev, size_t size,
			     dma_addr_t *dma_handle, gfp_t gfp,
			     unsigned long attrs)
{
	struct ivntb_dev *iv = dev_ivntb(dev);
	unsigned long flags;
	int slot = -1;
	void *va;

	if (!iv || !size || size > iv->slot_size)
		return NULL;

	spin_lock_irqsave(&iv->lock, flags);
	if (iv->slot_hint >= 0 && !test_bit(iv->slot_hint, &iv->slot_used))
		slot = iv->slot_hint;
	else
		slot = find_first_zero_bit(&iv->slot_used, IVNTB_AP_SLOTS);
	if (slot < IVNTB_AP_SLOTS)
		__set_bit(slot, &iv->slot_used);
	iv->slot_hint = -1;
	spin_unlock_irqrestore(&iv->lock, flags);

	if (slot >= IVNTB_AP_SLOTS) {
		dev_warn(dev, "inbound aperture exhausted (%zu bytes asked)\n",
			 size);
		return NULL;
	}

	va = (u8 *)iv->ap_virt + slot * iv->slot_size;
	memset(va, 0, size);
	*dma_handle = iv->ap_phys + (dma_addr_t)slot * iv->slot_size;
	return va;
}

static void ivntb_dma_free(struct device *dev, size_t size, void *vaddr,
			   dma_addr_t dma_handle, unsigned long attrs)
{
	struct ivntb_dev *iv = dev_ivntb(dev);
	unsigned long flags;
	u64 off;

	if (!iv || dma_handle < iv->ap_phys)
		goto bad;
	off = dma_handle - iv->ap_phys;
	if (off % iv->slot_size || off / iv->slot_size >= IVNTB_AP_SLOTS)
		goto bad;

	spin_lock_irqsave(&iv->lock, flags);
	__clear_bit(off / iv->slot_size, &iv->slot_used);
	spin_unlock_irqrestore(&iv->lock, flags);
	return;
bad:
	dev_err(dev, "free of %pad: not an aperture slot\n", &dma_handle);
}

static dma_addr_t ivntb_dma_map_page(struct device *dev, struct page *page,
				     unsigned long offset, size_t size,
				     enum dma_data_direction dir,
				     unsigned long attrs)
{
	return page_to_phys(page) + offset;
}

static void ivntb_dma_unmap_page(struct device *dev, dma_addr_t dma_handle,
				 size_t size, enum dma_data_direction dir,
				 unsigned long attrs)
{
}

static int ivntb_dma_map_sg(struct device *dev, struct scatterlist *sgl,
			    int nents, enum dma_data_direction dir,
			    unsigned long attrs)
{
	struct scatterlist *sg;
	int i;

	for_each_sg(sgl, sg, nents, i) {
		sg->dma_address = sg_phys(sg);
		sg_dma_len(sg) = sg->length;
	}
	return nents;
}

static void ivntb_dma_unmap_sg(struct device *dev, struct scatterlist *sgl,
			       int nents, enum dma_data_direction dir,
			       unsigned long attrs)
{
}

static dma_addr_t ivntb_dma_map_resource(struct device *dev,
					 phys_addr_t phys_addr, size_t size,
					 enum dma_data_direction dir,
					 unsigned long attrs)
{
	return phys_addr;
}

static int ivntb_dma_supported(struct device *dev, u64 mask)
{
	return 1;
}

static const struct dma_map_ops ivntb_dma_ops = {
	.alloc		= ivntb_dma_alloc,
	.free		= ivntb_dma_free,
	.map_page	= ivntb_dma_map_page,
	.unmap_page	= ivntb_dma_unmap_page,
	.map_sg		= ivntb_dma_map_sg,
	.unmap_sg	= ivntb_dma_unmap_sg,
	.map_resource	= ivntb_dma_map_resource,
	.dma_supported	= ivntb_dma_supported,
};

/* ---- interrupts ---- */

static irqreturn_t ivntb_ctrl_isr(int irq, void *data)
{
	struct ivntb_vec *vec = data;
	struct ivntb_dev *iv = vec->iv;

	ivntb_link_check(iv);
	ivntb_msg_deliver(iv);
	return IRQ_HANDLED;
}

static irqreturn_t ivntb_db_isr(int irq, void *data)
{
	struct ivntb_vec *vec = data;

	/* vectors 1..4 of the function are doorbell groups 0..3 */
	ivntb_db_deliver(vec->iv, BIT(vec->index - 1));
	return IRQ_HANDLED;
}

static void ivntb_free_irqs(struct ivntb_dev *iv, int n)
{
	struct pci_dev *pdev = iv->fn[IVNTB_FN_REGS];

	while (n-- > 0)
		free_irq(pci_irq_vector(pdev, n), &iv->vec[n]);
	pci_free_irq_vectors(pdev);
}

static int ivntb_setup_irqs(struct ivntb_dev *iv)
{
	struct pci_dev *pdev = iv->fn[IVNTB_FN_REGS];
	int i, rc;

	rc = pci_alloc_irq_vectors(pdev, IVNTB_NR_VECTORS, IVNTB_NR_VECTORS,
				   PCI_IRQ_MSIX);
	if (rc < 0) {
		dev_err(&pdev->dev, "need %d MSI-X vectors: %d\n",
			IVNTB_NR_VECTORS, rc);
		return rc;
	}
	for (i = 0; i < IVNTB_NR_VECTORS; i++) {
		iv->vec[i].iv = iv;
		iv->vec[i].index = i;
		rc = request_irq(pci_irq_vector(pdev, i),
				 i == IVNTB_CTRL_VECTOR ? ivntb_ctrl_isr :
				 ivntb_db_isr, 0, IVNTB_NAME, &iv->vec[i]);
		if (rc) {
			dev_err(&pdev->dev, "request_irq %d: %d\n", i, rc);
			ivntb_free_irqs(iv, i);
			return rc;
		}
	}
	return 0;
}

/* ---- PCI functions ---- */

static void ivntb_put_fns(struct ivntb_dev *iv)
{
	int f;

	for (f = IVNTB_FN_AP_IN; f < IVNTB_NR_FN; f++) {
		if (!iv->fn[f])
			continue;
		pci_release_region(iv->fn[f], 2);
		pci_disable_device(iv->fn[f]);
		pci_dev_put(iv->fn[f]);
		iv->fn[f] = NULL;
	}
}

static int ivntb_get_fn(struct ivntb_dev *iv, int f, bool optional)
{
	struct pci_dev *pdev = iv->fn[IVNTB_FN_REGS];
	struct pci_dev *fn;
	int rc;

	fn = pci_get_slot(pdev->bus, PCI_DEVFN(PCI_SLOT(pdev->devfn), f));
	if (!fn || fn->vendor != IVSHMEM_VENDOR_ID ||
	    fn->device != IVSHMEM_DEVICE_ID ||
	    !(pci_resource_flags(fn, 2) & IORESOURCE_MEM)) {
		pci_dev_put(fn);
		if (optional)
			return 0;
		dev_err(&pdev->dev, "function %d (ivshmem-plain window) missing\n",
			f);
		return -ENODEV;
	}
	rc = pci_enable_device(fn);
	if (rc)
		goto err_put;
	rc = pci_request_region(fn, 2, IVNTB_NAME);
	if (rc)
		goto err_disable;
	iv->fn[f] = fn;
	return 0;

err_disable:
	pci_disable_device(fn);
err_put:
	pci_dev_put(fn);
	dev_err(&pdev->dev, "function %d: %d\n", f, rc);
	return rc;
}

static int ivntb_map_windows(struct ivntb_dev *iv)
{
	struct device *dev = &iv->fn[IVNTB_FN_REGS]->dev;
	resource_size_t in_size, out_size;
	int rc;

	rc = ivntb_get_fn(iv, IVNTB_FN_AP_IN, false);
	if (!rc)
		rc = ivntb_get_fn(iv, IVNTB_FN_AP_OUT, false);
	if (!rc && flat_window)
		rc = ivntb_get_fn(iv, IVNTB_FN_FLAT, true);
	if (rc)
		return rc;

	in_size = pci_resource_len(iv->fn[IVNTB_FN_AP_IN], 2);
	out_size = pci_resource_len(iv->fn[IVNTB_FN_AP_OUT], 2);
	if (in_size != out_size || in_size < IVNTB_AP_SLOTS * PAGE_SIZE) {
		dev_err(dev, "aperture sizes differ or too small: in %pa out %pa\n",
			&in_size, &out_size);
		return -EINVAL;
	}
	iv->slot_size = in_size / IVNTB_AP_SLOTS;
	iv->ap_phys = pci_resource_start(iv->fn[IVNTB_FN_AP_IN], 2);
	iv->out_phys = pci_resource_start(iv->fn[IVNTB_FN_AP_OUT], 2);
	iv->ap_virt = memremap(iv->ap_phys, in_size, MEMREMAP_WB);
	if (!iv->ap_virt)
		return -ENOMEM;

	iv->mw_count = IVNTB_AP_SLOTS;
	if (iv->fn[IVNTB_FN_FLAT]) {
		iv->flat_phys = pci_resource_start(iv->fn[IVNTB_FN_FLAT], 2);
		iv->flat_size = pci_resource_len(iv->fn[IVNTB_FN_FLAT], 2);
		iv->mw_count++;
	}
	dev_info(dev, "port %d: %d MWs, aperture slots %pa bytes, flat window %pa bytes\n",
		 iv->port, iv->mw_count, &iv->slot_size, &iv->flat_size);
	return 0;
}

static bool ivntb_peer_active(void *ctx)
{
	struct ivntb_dev *iv = ctx;

	return blk_read(iv->pblk, IVNTB_OFF_ENABLED) != 0;
}

/* The copy-rate probe (ntb_hw_ivshmem_probe.c); the port works without it. */
static void ivntb_add_probe(struct ivntb_dev *iv)
{
	struct ivprobe_port port = {
		.dev = &iv->fn[IVNTB_FN_REGS]->dev,
		.ntb = &iv->ntb,
		.ap_virt = iv->ap_virt,
		.out_phys = iv->out_phys,
		.slot_size = iv->slot_size,
		.desc_off = (IVNTB_AP_SLOTS - 1) * iv->slot_size,
		.flat_phys = iv->flat_phys,
		.flat_size = iv->flat_size,
		.peer_active = ivntb_peer_active,
		.ctx = iv,
	};

	iv->probe = ivprobe_create(&port, ivntb_debugfs);
}

/*
 * BAR 0 (ivshmem's registers: our port number) and the shared register
 * file in BAR 2, checked and our block reset. Undone by ivntb_unmap_regs().
 */
static int ivntb_map_regs(struct ivntb_dev *iv, struct pci_dev *pdev)
{
	resource_size_t regs_len = pci_resource_len(pdev, 2);
	int rc = -ENODEV;
	u32 pos;

	iv->mmio = pci_iomap(pdev, 0, 0);
	if (!iv->mmio)
		return -ENOMEM;
	pos = ioread32(iv->mmio + IVSHMEM_REG_IVPOSITION);
	if (pos >= IVNTB_PORTS || regs_len < IVNTB_PORTS * IVNTB_BLOCK_SIZE) {
		dev_err(&pdev->dev, "not an NTB port: id %u, register file %pa bytes\n",
			pos, &regs_len);
		goto err_unmap;
	}
	iv->port = pos;
	iv->peer_port = pos ^ 1;
	iv->regs = memremap(pci_resource_start(pdev, 2),
			    IVNTB_PORTS * IVNTB_BLOCK_SIZE, MEMREMAP_WB);
	if (!iv->regs) {
		rc = -ENOMEM;
		goto err_unmap;
	}
	iv->lblk = (u8 *)iv->regs + iv->port * IVNTB_BLOCK_SIZE;
	iv->pblk = (u8 *)iv->regs + iv->peer_port * IVNTB_BLOCK_SIZE;
	if (blk_read(iv->lblk, IVNTB_OFF_MAGIC) != IVNTB_MAGIC) {
		dev_err(&pdev->dev, "register file not initialised by the ivshmem server\n");
		memunmap(iv->regs);
		goto err_unmap;
	}
	/* Function reset: link disabled, no doorbells, messages or spads. */
	memset((u8 *)iv->lblk + IVNTB_DRV_OFF_FIRST, 0,
	       IVNTB_BLOCK_SIZE - IVNTB_DRV_OFF_FIRST);
	return 0;

err_unmap:
	pci_iounmap(pdev, iv->mmio);
	return rc;
}

static void ivntb_unmap_regs(struct ivntb_dev *iv, struct pci_dev *pdev)
{
	memunmap(iv->regs);
	pci_iounmap(pdev, iv->mmio);
}

/* The port's DMA engine (part of function 0: it shares its identity map). */
static void ivntb_add_dma(struct ivntb_dev *iv, struct pci_dev *pdev)
{
	if (!dma_engine || !iv->fn[IVNTB_FN_FLAT])
		return;
	iv->dma = ivdma_create(&pdev->dev, iv->flat_phys, iv->flat_size);
	if (IS_ERR(iv->dma)) {
		dev_warn(&pdev->dev, "no DMA engine: %ld\n", PTR_ERR(iv->dma));
		iv->dma = NULL;
	}
}

static int ivntb_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct ivntb_dev *iv;
	int rc;

	/* Only function 0 with MSI-X (ivshmem-doorbell) is an NTB port. */
	if (PCI_FUNC(pdev->devfn) != IVNTB_FN_REGS || !pdev->msix_cap)
		return -ENODEV;

	iv = kzalloc(sizeof(*iv), GFP_KERNEL);
	if (!iv)
		return -ENOMEM;
	spin_lock_init(&iv->lock);
	iv->slot_hint = -1;
	iv->fn[IVNTB_FN_REGS] = pdev;

	rc = pci_enable_device(pdev);
	if (rc)
		goto err_free;
	rc = pci_request_regions(pdev, IVNTB_NAME);
	if (rc)
		goto err_disable;
	pci_set_master(pdev);
	rc = ivntb_map_regs(iv, pdev);
	if (rc)
		goto err_release;
	rc = ivntb_map_windows(iv);
	if (rc)
		goto err_put_fns;

	pci_set_drvdata(pdev, iv);
	rc = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (rc)
		goto err_unmap_ap;
	iv->saved_dma_ops = get_dma_ops(&pdev->dev);
	set_dma_ops(&pdev->dev, &ivntb_dma_ops);

	rc = ivntb_setup_irqs(iv);
	if (rc)
		goto err_dma_ops;
	ivntb_add_dma(iv, pdev);

	iv->ntb.pdev = pdev;
	iv->ntb.topo = NTB_TOPO_CROSSLINK;
	iv->ntb.ops = &ivntb_ops;
	rc = ntb_register_device(&iv->ntb);
	if (rc)
		goto err_irqs;

	ivntb_link_check(iv);
	ivntb_add_probe(iv);
	return 0;

err_irqs:
	if (iv->dma)
		ivdma_destroy(iv->dma);
	ivntb_free_irqs(iv, IVNTB_NR_VECTORS);
err_dma_ops:
	set_dma_ops(&pdev->dev, iv->saved_dma_ops);
err_unmap_ap:
	pci_set_drvdata(pdev, NULL);
	memunmap(iv->ap_virt);
err_put_fns:
	ivntb_put_fns(iv);
	ivntb_unmap_regs(iv, pdev);
err_release:
	pci_clear_master(pdev);
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_free:
	kfree(iv);
	return rc;
}

static void ivntb_remove(struct pci_dev *pdev)
{
	struct ivntb_dev *iv = pci_get_drvdata(pdev);

	ivprobe_destroy(iv->probe);
	ntb_unregister_device(&iv->ntb);
	if (iv->dma)
		ivdma_destroy(iv->dma);

	/* The port goes away: tell the peer. */
	blk_write(iv->lblk, IVNTB_OFF_ENABLED, 0);
	smp_mb(); /* the disable is visible before the peer looks */
	ivntb_ring_peer(iv, IVNTB_CTRL_VECTOR);

	ivntb_free_irqs(iv, IVNTB_NR_VECTORS);
	if (iv->slot_used)
		dev_warn(&pdev->dev, "aperture slots still allocated: %#lx\n",
			 iv->slot_used);
	set_dma_ops(&pdev->dev, iv->saved_dma_ops);
	pci_set_drvdata(pdev, NULL);
	memunmap(iv->ap_virt);
	ivntb_put_fns(iv);
	ivntb_unmap_regs(iv, pdev);
	pci_clear_master(pdev);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	kfree(iv);
}

static const struct pci_device_id ivntb_pci_tbl[] = {
	{ PCI_DEVICE(IVSHMEM_VENDOR_ID, IVSHMEM_DEVICE_ID) },
	{ 0 }
};
MODULE_DEVICE_TABLE(pci, ivntb_pci_tbl);

static struct pci_driver ivntb_pci_driver = {
	.name		= IVNTB_NAME,
	.id_table	= ivntb_pci_tbl,
	.probe		= ivntb_probe,
	.remove		= ivntb_remove,
};

static int __init ivntb_init(void)
{
	int rc;

	ivntb_debugfs = ivprobe_init_root();
	rc = pci_register_driver(&ivntb_pci_driver);
	if (rc)
		debugfs_remove_recursive(ivntb_debugfs);
	return rc;
}
module_init(ivntb_init);

static void __exit ivntb_exit(void)
{
	pci_unregister_driver(&ivntb_pci_driver);
	debugfs_remove_recursive(ivntb_debugfs);
}
module_exit(ivntb_exit);

MODULE_DESCRIPTION("NTB hardware driver for the QEMU ivshmem emulated NTB");
MODULE_AUTHOR("The NTRDMA authors");
MODULE_LICENSE("Dual BSD/GPL");
