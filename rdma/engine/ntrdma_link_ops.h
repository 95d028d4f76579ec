/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA engine: what it needs from a link, and what a link backend calls.
 *
 * A backend (the NTB one: ntrdma_ntb.c) finds a link, fills a struct
 * ntrdma_link and hands it to ntrdma_dev_add(). The engine drives the link
 * only through the ops below; the faces never see which backend they run
 * on. The protocol is "stores into the peer's inbox, then a doorbell":
 * a backend with a mapped window (@map) lets the engine store and copy
 * into it directly, as the NTB's memory window does.
 */
#ifndef NTRDMA_LINK_OPS_H
#define NTRDMA_LINK_OPS_H

#include <linux/sizes.h>
#include <linux/types.h>

struct device;
struct ntrdma_dev;
struct ntrdma_link;
struct seq_file;

/* The smallest window the engine runs in (inbox, a few buffers each). */
#define NTRDMA_WINDOW_MIN	SZ_1M
/* ...and the most windowed mode takes: both faces' rings; one order-10 block. */
#define NTRDMA_WINDOW_MAX	SZ_4M

/**
 * struct ntrdma_link_ops - what the engine asks of a link
 * @kind: the backend's name: debugfs info shows "KIND: PARENT" and
 *	"KIND_link: up|down"
 * @enable: bring the link up (process context)
 * @disable: take it down (process context)
 * @is_up: whether the link is up below the engine's session (any context)
 * @spad_read: one of our scratchpads, as the peer wrote it (link work)
 * @peer_spad_write: one of the peer's scratchpads (link work)
 * @peer_db_set: ring the peer's doorbell @bit (NTRDMA_DB_*), after every
 *	store the caller made before (any context)
 * @rx_limits: what an inbound translation may be: base alignment, size
 *	alignment, largest size (process context, link up)
 * @rx_open: let the peer's window reach our DMA addresses @base to
 *	@base + @size (0 and the largest size: all of our memory); @va is
 *	what the CPU sees there (NULL for all of our memory)
 * @rx_close: close the peer's window onto our memory
 * @events_on: deliver link events (ntrdma_link_event()) and doorbells
 *	(ntrdma_link_doorbell()) for @ndev from now on
 * @events_off: stop them; no handler runs once it returns
 * @show: optional: the backend's own "name: value" lines of debugfs info
 * @forward: optional: @len bytes at @off of @map were stored; carry them
 *	to the peer's window (any context, never sleeps, in the order of
 *	the calls). A link with @forward has no physical window (@map_phys
 *	0): @map is memory of ours that mirrors what we stored.
 */
struct ntrdma_link_ops {
	const char *kind;
	int (*enable)(struct ntrdma_link *link);
	int (*disable)(struct ntrdma_link *link);
	bool (*is_up)(struct ntrdma_link *link);
	u32 (*spad_read)(struct ntrdma_link *link, unsigned int idx);
	void (*peer_spad_write)(struct ntrdma_link *link, unsigned int idx,
				u32 val);
	void (*peer_db_set)(struct ntrdma_link *link, unsigned int bit);
	int (*rx_limits)(struct ntrdma_link *link, resource_size_t *align,
			 resource_size_t *size_align,
			 resource_size_t *size_max);
	int (*rx_open)(struct ntrdma_link *link, void *va, dma_addr_t base,
		       resource_size_t size);
	void (*rx_close)(struct ntrdma_link *link);
	int (*events_on)(struct ntrdma_link *link, struct ntrdma_dev *ndev);
	void (*events_off)(struct ntrdma_link *link);
	void (*show)(struct ntrdma_link *link, struct seq_file *s);
	void (*forward)(struct ntrdma_link *link, size_t off, size_t len);
};

/**
 * struct ntrdma_link - one link, filled by its backend
 * @ops: the backend's ops
 * @parent: the device the faces' devices hang below, and what logs name
 * @dma_dev: the device whose DMA addresses the peer's window reaches: it
 *	maps every buffer the peer writes
 * @port: this end's number on the link (for names stable across boots)
 * @map: the window onto the peer, mapped write-combined
 * @map_phys: its physical address (for a DMA channel's mapping)
 * @map_size: its size, at least NTRDMA_WINDOW_MIN
 */
struct ntrdma_link {
	const struct ntrdma_link_ops *ops;
	struct device *parent;
	struct device *dma_dev;
	int port;
	void __iomem *map;
	phys_addr_t map_phys;
	resource_size_t map_size;
};

/* The engine's entry points for backends (ntrdma_dev.c, ntrdma_link.c). */
struct ntrdma_dev *ntrdma_dev_add(struct ntrdma_link *link);
void ntrdma_dev_remove(struct ntrdma_dev *ndev);
void ntrdma_link_event(struct ntrdma_dev *ndev);
void ntrdma_link_doorbell(struct ntrdma_dev *ndev, unsigned int bit);
void ntrdma_link_landed(struct ntrdma_dev *ndev);

/* The backends: registered at module load, in this order. */
int ntrdma_ntb_register(void);
void ntrdma_ntb_unregister(void);
int ntrdma_tcp_register(void);
void ntrdma_tcp_unregister(void);

#endif /* NTRDMA_LINK_OPS_H */
