// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA engine: the memory the peer writes (our inbox and the receive
 * buffers faces post), in one of two modes chosen at the first NTB link-up
 * and kept for the device's life:
 *
 * - flat: our inbound window maps all of our RAM at translation 0, so a
 *   buffer is any kernel memory, mapped for the NTB's PCI device, and the
 *   peer is told its DMA address (an IOVA under an IOMMU);
 * - windowed: the NTB cannot do that (small or translated windows: most
 *   hardware). One coherent buffer on the NTB's PCI device, as large as the
 *   window allows, is set as the window's translation (as ntb_transport
 *   does); the inbox and every receive buffer are carved from it (a
 *   gen_pool), and the peer is told offsets in the window. The peer reaches
 *   nothing else of ours, so there is no direct placement in this mode.
 *
 * The writer does not care: it writes at (window base + what it was told)
 * either way. Both ends take the same window (the largest, or flat_mw) on a
 * symmetric NTB. Faces allocate through ntrdma_rxbuf_alloc(); the mode's
 * functions are set once (struct ntrdma_rxmem_ops), no test at each use.
 */

#include <linux/dma-mapping.h>
#include <linux/genalloc.h>
#include <linux/slab.h>

#include "ntrdma_priv.h"

/* Pool granule: receive buffers are 64 KiB or a few pages, the inbox too. */
#define NTRDMA_WINDOW_ORDER	PAGE_SHIFT

struct ntrdma_rxmem_ops {
	int (*alloc)(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b,
		     size_t len, gfp_t gfp);
	void (*free)(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b);
	void (*for_cpu)(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			size_t len);
	void (*for_peer)(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			 size_t len);
};

/* ---- flat mode: kernel memory, streaming DMA mappings ---- */

static int flat_alloc(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b,
		      size_t len, gfp_t gfp)
{
	b->va = kzalloc(len, gfp);
	if (!b->va)
		return -ENOMEM;
	b->dma = dma_map_single(ndev->link->dma_dev, b->va, len, DMA_FROM_DEVICE);
	if (dma_mapping_error(ndev->link->dma_dev, b->dma)) {
		kfree(b->va);
		b->va = NULL;
		return -EIO;
	}
	b->addr = b->dma;
	b->len = len;
	return 0;
}

static void flat_free(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b)
{
	dma_unmap_single(ndev->link->dma_dev, b->dma, b->len, DMA_FROM_DEVICE);
	kfree(b->va);
	b->va = NULL;
}

static void flat_for_cpu(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			 size_t len)
{
	dma_sync_single_for_cpu(ndev->link->dma_dev, b->dma, len, DMA_FROM_DEVICE);
}

static void flat_for_peer(struct ntrdma_dev *ndev,
			  const struct ntrdma_rxbuf *b, size_t len)
{
	dma_sync_single_for_device(ndev->link->dma_dev, b->dma, len,
				   DMA_FROM_DEVICE);
}

static const struct ntrdma_rxmem_ops ntrdma_rxmem_flat = {
	.alloc = flat_alloc,
	.free = flat_free,
	.for_cpu = flat_for_cpu,
	.for_peer = flat_for_peer,
};

/* ---- windowed mode: pieces of the coherent window buffer ---- */

static int window_alloc(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b,
			size_t len, gfp_t gfp)
{
	unsigned long va = gen_pool_alloc(ndev->win.pool, len);

	if (!va)
		return -ENOMEM;
	b->va = (void *)va;
	b->addr = gen_pool_virt_to_phys(ndev->win.pool, va);
	b->len = len;
	memset(b->va, 0, len);
	return 0;
}

static void window_free(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b)
{
	gen_pool_free(ndev->win.pool, (unsigned long)b->va, b->len);
	b->va = NULL;
}

/* Coherent memory: nothing to sync. */
static void window_sync(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			size_t len)
{
}

static const struct ntrdma_rxmem_ops ntrdma_rxmem_window = {
	.alloc = window_alloc,
	.free = window_free,
	.for_cpu = window_sync,
	.for_peer = window_sync,
};

/**
 * ntrdma_rxbuf_alloc() - a buffer for the peer to write, zeroed
 * @ndev: the device (its mode is decided: a session came up once)
 * @b: filled in: @va for us, @addr to post to the peer
 * @len: bytes
 * @gfp: allocation flags (GFP_ATOMIC from NAPI)
 *
 * Return: 0, -ENOMEM (windowed mode: the window is full), -EIO.
 */
int ntrdma_rxbuf_alloc(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b,
		       size_t len, gfp_t gfp)
{
	return ndev->rxmem->alloc(ndev, b, len, gfp);
}

/**
 * ntrdma_rxbuf_free() - give back a buffer the peer no longer writes
 * @ndev: the device
 * @b: from ntrdma_rxbuf_alloc()
 */
void ntrdma_rxbuf_free(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b)
{
	if (b->va)
		ndev->rxmem->free(ndev, b);
}

/**
 * ntrdma_rxbuf_for_cpu() - the peer wrote @len bytes: make them ours to read
 * @ndev: the device
 * @b: the buffer
 * @len: bytes from its start
 */
void ntrdma_rxbuf_for_cpu(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			  size_t len)
{
	ndev->rxmem->for_cpu(ndev, b, len);
}

/**
 * ntrdma_rxbuf_for_peer() - hand @len bytes back before posting again
 * @ndev: the device
 * @b: the buffer
 * @len: bytes from its start
 */
void ntrdma_rxbuf_for_peer(struct ntrdma_dev *ndev,
			   const struct ntrdma_rxbuf *b, size_t len)
{
	ndev->rxmem->for_peer(ndev, b, len);
}

/**
 * ntrdma_dev_windowed() - whether the peer reaches only our window buffer
 * @ndev: the device
 *
 * Decided at the first NTB link-up; false before.
 *
 * Return: true in windowed mode (no direct placement, smaller rings).
 */
bool ntrdma_dev_windowed(struct ntrdma_dev *ndev)
{
	return READ_ONCE(ndev->rxmem) == &ntrdma_rxmem_window;
}

/**
 * ntrdma_rxmem_init() - flat mode until a mode is chosen; the boot inbox
 * @ndev: the device being probed
 *
 * Return: 0 or -ENOMEM/-EIO.
 */
int ntrdma_rxmem_init(struct ntrdma_dev *ndev)
{
	ndev->rxmem = &ntrdma_rxmem_flat;
	ndev->inbox_size = PAGE_ALIGN(sizeof(struct ntrdma_inbox));
	ndev->inbox = alloc_pages_exact(ndev->inbox_size,
					GFP_KERNEL | __GFP_ZERO);
	if (!ndev->inbox)
		return -ENOMEM;
	ndev->inbox_dma = dma_map_single(ndev->link->dma_dev, ndev->inbox,
					 ndev->inbox_size, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(ndev->link->dma_dev, ndev->inbox_dma)) {
		free_pages_exact(ndev->inbox, ndev->inbox_size);
		return -EIO;
	}
	ndev->boot_inbox = ndev->inbox;
	ndev->boot_inbox_dma = ndev->inbox_dma;
	return 0;
}

/* Flat mode holds: translation 0 was accepted. */
void ntrdma_rxmem_flat_chosen(struct ntrdma_dev *ndev)
{
	ndev->mode_chosen = true;
	ndev->peer_reach = ndev->link->map_size;
}

/*
 * The inbox moves into the window (its first pages): the peer learns its
 * offset at the publication that follows. The boot inbox stays allocated
 * until removal (a reader may hold its address); it is never published.
 */
static int window_move_inbox(struct ntrdma_dev *ndev)
{
	struct ntrdma_rxbuf b;
	int rc;

	rc = window_alloc(ndev, &b, ndev->inbox_size, GFP_KERNEL);
	if (rc)
		return rc;
	WRITE_ONCE(ndev->inbox, b.va);
	ndev->inbox_dma = b.addr;
	return 0;
}

/**
 * ntrdma_window_setup() - choose windowed mode: the window buffer and pool
 * @ndev: the device, its link up (for the rx_limits op)
 *
 * Link work. Allocates a coherent buffer on the NTB's PCI device as large
 * as the window (size_max; at most NTRDMA_WINDOW_MAX, the largest block the
 * page allocator gives without CMA), a pool over it, and moves the inbox
 * into it.
 *
 * Return: 0, or an error: the device cannot run on this NTB.
 */
int ntrdma_window_setup(struct ntrdma_dev *ndev)
{
	resource_size_t align, size_align, size_max = 0;
	struct ntrdma_window *w = &ndev->win;
	int rc;

	rc = ndev->link->ops->rx_limits(ndev->link, &align, &size_align,
					&size_max);
	if (rc)
		return rc;
	size_max = min3(size_max, ndev->link->map_size,
			(resource_size_t)NTRDMA_WINDOW_MAX);
	if (size_max < NTRDMA_WINDOW_MIN ||
	    (size_align && !IS_ALIGNED(size_max, size_align)))
		return -ENOSPC;
	w->va = dma_alloc_coherent(ndev->link->dma_dev, size_max, &w->dma, GFP_KERNEL);
	if (!w->va)
		return -ENOMEM;
	if (align && !IS_ALIGNED(w->dma, align)) {
		rc = -EINVAL;
		goto err_free;
	}
	w->size = size_max;
	w->pool = gen_pool_create(NTRDMA_WINDOW_ORDER, dev_to_node(ndev->link->dma_dev));
	if (!w->pool) {
		rc = -ENOMEM;
		goto err_free;
	}
	/* the pool's "physical" address: the offset the peer writes at */
	rc = gen_pool_add_virt(w->pool, (unsigned long)w->va, 0, w->size, -1);
	if (!rc)
		rc = window_move_inbox(ndev);
	if (rc)
		goto err_pool;
	WRITE_ONCE(ndev->rxmem, &ntrdma_rxmem_window);
	ndev->mode_chosen = true;
	ndev->peer_reach = 0;
	return 0;

err_pool:
	gen_pool_destroy(w->pool);
	w->pool = NULL;
err_free:
	dma_free_coherent(ndev->link->dma_dev, size_max, w->va, w->dma);
	w->va = NULL;
	return rc;
}

/**
 * ntrdma_window_trans() - set the window's translation to our buffer
 * @ndev: the device, in windowed mode
 *
 * Return: what the link's rx_open op returns.
 */
int ntrdma_window_trans(struct ntrdma_dev *ndev)
{
	return ndev->link->ops->rx_open(ndev->link, ndev->win.va,
					ndev->win.dma, ndev->win.size);
}

/* Windowed mode: the inbox back to the pool, then the whole, if all is. */
static void window_fini(struct ntrdma_dev *ndev)
{
	struct ntrdma_window *w = &ndev->win;

	gen_pool_free(w->pool, (unsigned long)ndev->inbox, ndev->inbox_size);
	if (gen_pool_avail(w->pool) != gen_pool_size(w->pool)) {
		dev_warn(ndev->link->parent, "%s: a face still holds window buffers: keeping the window's %zu bytes\n",
			 ndev->name, w->size);
		return;
	}
	gen_pool_destroy(w->pool);
	dma_free_coherent(ndev->link->dma_dev, w->size, w->va, w->dma);
}

/**
 * ntrdma_rxmem_fini() - the device goes; its faces have gone
 * @ndev: the device
 * @peer_quiet: the peer provably no longer writes our memory: free what it
 *	could write (else it is kept: never reused while a peer may write)
 *
 * The boot inbox of windowed mode was never published: it is freed.
 */
void ntrdma_rxmem_fini(struct ntrdma_dev *ndev, bool peer_quiet)
{
	bool windowed = ntrdma_dev_windowed(ndev);

	if (windowed || peer_quiet) {
		dma_unmap_single(ndev->link->dma_dev, ndev->boot_inbox_dma,
				 ndev->inbox_size, DMA_BIDIRECTIONAL);
		free_pages_exact(ndev->boot_inbox, ndev->inbox_size);
	}
	if (windowed && peer_quiet)
		window_fini(ndev);
	else if (windowed)
		dev_warn(ndev->link->parent, "%s: the peer may still write our window buffer: keeping its %zu bytes\n",
			 ndev->name, ndev->win.size);
}

/**
 * ntrdma_rxbuf_count() - how many receive buffers of @len a face posts
 * @ndev: the device (its mode chosen: call from link_up)
 * @len: bytes each
 * @share: the percentage of the window the face may fill (windowed mode)
 * @flat_count: the face's count in flat mode, the most in either
 *
 * Return: @flat_count in flat mode; in windowed mode what @share percent
 * of the window (less the inbox) holds, at most @flat_count.
 */
unsigned int ntrdma_rxbuf_count(struct ntrdma_dev *ndev, size_t len,
				unsigned int share, unsigned int flat_count)
{
	size_t room;

	if (!ntrdma_dev_windowed(ndev))
		return flat_count;
	room = (ndev->win.size - ndev->inbox_size) / 100 * share;
	return min_t(size_t, flat_count, room / PAGE_ALIGN(len));
}
