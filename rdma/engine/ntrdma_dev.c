// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA engine: the device. Every link a backend adds (ntrdma_link_ops.h)
 * becomes one ntrdma device that carries every face over one engine. The
 * engine reaches the link only through its ops (and dmaengine for copies
 * into its window): flat mode when the window can translate to address 0
 * (a "flat" window onto the peer's memory), windowed mode otherwise
 * (ntrdma_rxmem.c).
 */

#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/slab.h>

#include "ntrdma_priv.h"

static bool use_dma = true;
module_param(use_dma, bool, 0444);
MODULE_PARM_DESC(use_dma,
		 "Copy into the peer's memory with a DMA_MEMCPY channel when one exists (default Y), else with the CPU");

static DEFINE_IDA(ntrdma_ida);

/**
 * ntrdma_dev_name() - the device's name ("ntrdma%d")
 * @ndev: the device
 *
 * Return: a string that lives as long as the device.
 */
const char *ntrdma_dev_name(struct ntrdma_dev *ndev)
{
	return ndev->name;
}

/**
 * ntrdma_dev_index() - the device's number (the %d of its name)
 * @ndev: the device
 *
 * Return: a number unique among the module's devices.
 */
int ntrdma_dev_index(struct ntrdma_dev *ndev)
{
	return ndev->index;
}

/**
 * ntrdma_dev_parent() - the device a face's devices hang below
 * @ndev: the device
 *
 * The link's device (the NTB device on an NTB): parent of the netdev and
 * the ib_device, and what the faces log with.
 *
 * Return: the parent device.
 */
struct device *ntrdma_dev_parent(struct ntrdma_dev *ndev)
{
	return ndev->link->parent;
}

/**
 * ntrdma_dev_port() - this end's number on the link
 * @ndev: the device
 *
 * With ntrdma_dev_parent()'s name, for names that stay the same across
 * boots (the netdev's MAC address).
 *
 * Return: the port number.
 */
int ntrdma_dev_port(struct ntrdma_dev *ndev)
{
	return ndev->link->port;
}

/**
 * ntrdma_dev_dma_device() - the device that maps buffers the peer writes
 * @ndev: the device
 *
 * A face maps every receive buffer it posts to a TQP with this device (on
 * an NTB its PCI function: its DMA addresses are what the peer's window
 * reaches).
 *
 * Return: the device for dma_map_*().
 */
struct device *ntrdma_dev_dma_device(struct ntrdma_dev *ndev)
{
	return ndev->link->dma_dev;
}

/**
 * ntrdma_dev_dma_copies() - whether sends are copied by a DMA channel
 * @ndev: the device
 *
 * Return: true with a DMA_MEMCPY channel, false when the CPU copies.
 */
bool ntrdma_dev_dma_copies(struct ntrdma_dev *ndev)
{
	return !!ndev->dma_chan;
}

/**
 * ntrdma_dev_peer_reach() - how far the flat window reaches
 * @ndev: the device
 *
 * Return: the bytes of the peer's DMA address space the flat window maps
 * (from address 0): where placements and peer reads may go; 0 in windowed
 * mode (the window maps only the peer's window buffer) and before a mode
 * is chosen.
 */
u64 ntrdma_dev_peer_reach(struct ntrdma_dev *ndev)
{
	return READ_ONCE(ndev->peer_reach);
}

/**
 * ntrdma_dev_peer_read() - read the peer's memory through the flat window
 * @ndev: the device
 * @addr: the peer's DMA address
 * @buf: where to
 * @len: bytes
 *
 * Process context; for rare bulk reads (an export's page list): a read
 * across the bridge is slow on hardware. The peer's data is not checked.
 *
 * Return: 0, -ENOLINK without a session, -EINVAL outside the window.
 */
int ntrdma_dev_peer_read(struct ntrdma_dev *ndev, u64 addr, void *buf,
			 size_t len)
{
	u64 end;

	if (check_add_overflow(addr, (u64)len, &end) ||
	    end > ntrdma_dev_peer_reach(ndev))
		return -EINVAL;
	if (!ntrdma_link_is_up(ndev))
		return -ENOLINK;
	memcpy_fromio(buf, ndev->link->map + addr, len);
	return 0;
}

/**
 * ntrdma_dev_peer_write() - write a few bytes into the peer's memory
 * @ndev: the device
 * @addr: the peer's DMA address (what the flat window reaches there)
 * @buf: what to write
 * @len: bytes
 *
 * Any context; by the CPU, in program order with the caller's other
 * writes through the window.
 *
 * Return: 0, -ENOLINK without a session (or once the peer told us it left
 * it), -EINVAL outside the window.
 */
int ntrdma_dev_peer_write(struct ntrdma_dev *ndev, u64 addr, const void *buf,
			  size_t len)
{
	u64 end;

	if (check_add_overflow(addr, (u64)len, &end) ||
	    end > ntrdma_dev_peer_reach(ndev))
		return -EINVAL;
	if (!ntrdma_link_is_up(ndev) || ntrdma_link_peer_gone(ndev))
		return -ENOLINK;
	ntrdma_peer_copy(ndev, ndev->link->map + addr, buf, len);
	return 0;
}

/**
 * ntrdma_dev_pull() - read pieces of the peer's memory into our pages
 * @ndev: the device
 * @pc: the pieces: @len bytes from the peer's DMA address @dst into @page
 *	at @off
 * @n: how many
 *
 * Any context but hard irq; the CPU reads across the bridge (slow on
 * hardware: for small reads only).
 *
 * Return: 0, -ENOLINK without a session (or the peer told us it left it),
 * -EINVAL outside the window.
 */
int ntrdma_dev_pull(struct ntrdma_dev *ndev, const struct ntrdma_tqp_piece *pc,
		    int n)
{
	u64 end;
	void *va;
	int i;

	for (i = 0; i < n; i++)
		if (check_add_overflow(pc[i].dst, (u64)pc[i].len, &end) ||
		    end > ntrdma_dev_peer_reach(ndev) ||
		    pc[i].off + pc[i].len > PAGE_SIZE)
			return -EINVAL;
	if (ntrdma_link_peer_gone(ndev))
		return -ENOLINK;	/* its pages may be given back */
	for (i = 0; i < n; i++) {
		va = kmap_local_page(pc[i].page);
		memcpy_fromio(va + pc[i].off, ndev->link->map + pc[i].dst,
			      pc[i].len);
		kunmap_local(va);
	}
	return 0;
}

/**
 * ntrdma_dev_set_netdev() - publish the device's network interface
 * @ndev: the device
 * @netdev: the interface, or NULL when it goes
 *
 * The face that owns the interface publishes it from its add callback and
 * withdraws it from its del callback; faces added after it (rdma_cm's
 * address resolution needs the interface) read it with ntrdma_dev_netdev().
 */
void ntrdma_dev_set_netdev(struct ntrdma_dev *ndev, struct net_device *netdev)
{
	WRITE_ONCE(ndev->netdev, netdev);
}

/**
 * ntrdma_dev_netdev() - the device's network interface
 * @ndev: the device
 *
 * Return: what ntrdma_dev_set_netdev() published, or NULL.
 */
struct net_device *ntrdma_dev_netdev(struct ntrdma_dev *ndev)
{
	return READ_ONCE(ndev->netdev);
}

/*
 * A DMA_MEMCPY channel, preferably on the link's NUMA node. Not idxd's: its
 * prep sleeps while its work queue is full, and sends flush their copies
 * from softirq context (ntrdma_xfer.c).
 */
static bool ntrdma_dma_filter(struct dma_chan *chan, void *arg)
{
	struct ntrdma_dev *ndev = arg;
	int node = dev_to_node(ndev->link->dma_dev);

	if (!strcmp(dev_driver_string(chan->device->dev), "idxd"))
		return false;
	return node == NUMA_NO_NODE ||
	       dev_to_node(chan->device->dev) == node;
}

static void ntrdma_dma_init(struct ntrdma_dev *ndev)
{
	struct dma_chan *chan;
	dma_cap_mask_t mask;

	if (!use_dma || !ndev->link->map_phys)
		return;		/* no window a channel can reach */
	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	chan = dma_request_channel(mask, ntrdma_dma_filter, ndev);
	if (!chan) {
		dev_info(ndev->link->parent, "%s: no DMA_MEMCPY channel: CPU copy\n",
			 ndev->name);
		return;
	}
	ndev->flat_dma = dma_map_resource(chan->device->dev,
					  ndev->link->map_phys,
					  ndev->link->map_size,
					  DMA_BIDIRECTIONAL, 0);
	if (dma_mapping_error(chan->device->dev, ndev->flat_dma)) {
		dev_warn(ndev->link->parent, "%s: %s cannot reach the window: CPU copy\n",
			 ndev->name, dma_chan_name(chan));
		dma_release_channel(chan);
		return;
	}
	ndev->dma_chan = chan;
	dev_info(ndev->link->parent, "%s: copies by DMA channel %s\n", ndev->name,
		 dma_chan_name(chan));
}

static void ntrdma_dma_fini(struct ntrdma_dev *ndev)
{
	struct dma_chan *chan = ndev->dma_chan;

	if (!chan)
		return;
	/*
	 * Copies a stop gave up on (tqp_abandon()) may still be queued. The
	 * channel is ours alone and every face is gone: drop them, and wait
	 * for a callback still running, before the window's mapping and our
	 * module's code go.
	 */
	dmaengine_terminate_sync(chan);
	dma_unmap_resource(chan->device->dev, ndev->flat_dma,
			   ndev->link->map_size, DMA_BIDIRECTIONAL, 0);
	dma_release_channel(chan);
	ndev->dma_chan = NULL;
}

/**
 * ntrdma_peer_forward() - carry stores into the window to the peer
 * @ndev: the device, on a link that forwards
 * @p: where in the window the stores went
 * @len: how many bytes
 *
 * Any context; called in the order of the stores.
 */
void ntrdma_peer_forward(struct ntrdma_dev *ndev, const void __iomem *p,
			 size_t len)
{
	struct ntrdma_link *link = ndev->link;

	link->ops->forward(link, p - link->map, len);
}

/**
 * ntrdma_link_landed() - the peer's stores so far are in our memory
 * @ndev: the device
 *
 * For a link that delivers the peer's stores in batches, after each: the
 * peer may have skipped a doorbell because our latest event index had not
 * reached it yet. Every queue looks for work, as the heartbeat's sweep
 * does. Same context as ntrdma_link_doorbell().
 */
void ntrdma_link_landed(struct ntrdma_dev *ndev)
{
	ntrdma_vdb_sweep(ndev);
}

/**
 * ntrdma_link_doorbell() - the peer rang one of our doorbells
 * @ndev: the device
 * @bit: which (NTRDMA_DB_*), cleared by the backend before the call
 *
 * Hard interrupt context, or a backend's thread with bottom halves off.
 */
void ntrdma_link_doorbell(struct ntrdma_dev *ndev, unsigned int bit)
{
	if (bit == NTRDMA_DB_CTRL)
		ntrdma_link_event(ndev);
	else if (bit == NTRDMA_DB_VDB)
		ntrdma_vdb_event(ndev);
}

static int ntrdma_dev_init(struct ntrdma_dev *ndev)
{
	int rc;

	rc = ntrdma_rxmem_init(ndev);
	if (rc)
		return rc;
	ntrdma_vdb_init(ndev);
	rc = ntrdma_link_init(ndev);
	if (rc)
		goto err_rxmem;
	rc = ntrdma_cmd_init(ndev);
	if (rc)
		goto err_link;
	ntrdma_dma_init(ndev);
	rc = ntrdma_faces_add(ndev);
	if (rc)
		goto err_cmd;
	rc = ndev->link->ops->events_on(ndev->link, ndev);
	if (rc)
		goto err_faces;
	return 0;

err_faces:
	ntrdma_faces_del(ndev, true);
err_cmd:
	ntrdma_dma_fini(ndev);
	ntrdma_cmd_fini(ndev);
err_link:
	ntrdma_link_fini(ndev);
err_rxmem:
	ntrdma_rxmem_fini(ndev, true);
	return rc;
}

/**
 * ntrdma_dev_add() - a new ntrdma device on a link
 * @link: what the backend found, filled in; it must outlive the device
 *
 * Process context. Adds every face, delivers the link's events and enables
 * the link: a session starts once the peer is there.
 *
 * Return: the device, or an ERR_PTR().
 */
struct ntrdma_dev *ntrdma_dev_add(struct ntrdma_link *link)
{
	struct ntrdma_dev *ndev;
	int rc;

	ndev = kzalloc(sizeof(*ndev), GFP_KERNEL);
	if (!ndev)
		return ERR_PTR(-ENOMEM);
	ndev->link = link;
	ndev->forward = !!link->ops->forward;
	rc = ida_alloc(&ntrdma_ida, GFP_KERNEL);
	if (rc < 0)
		goto err_free;
	ndev->index = rc;
	snprintf(ndev->name, sizeof(ndev->name), "ntrdma%d", ndev->index);
	rc = ntrdma_dev_init(ndev);
	if (rc)
		goto err_ida;
	ntrdma_debugfs_add(ndev);
	ntrdma_link_start(ndev);
	dev_info(link->parent, "%s: %s link; inbox %zu bytes\n", ndev->name,
		 link->ops->kind, ndev->inbox_size);
	return ndev;

err_ida:
	ida_free(&ntrdma_ida, ndev->index);
err_free:
	kfree(ndev);
	return ERR_PTR(rc);
}

/**
 * ntrdma_dev_remove() - remove an ntrdma device
 * @ndev: what ntrdma_dev_add() returned
 *
 * Process context. Ends the session and waits (bounded) until the peer
 * left it; memory the peer may still write is kept, never freed. The link
 * delivers no event once it returns.
 */
void ntrdma_dev_remove(struct ntrdma_dev *ndev)
{
	struct ntrdma_link *link = ndev->link;

	ntrdma_debugfs_del(ndev);
	ndev->peer_quiet = ntrdma_link_stop(ndev);
	link->ops->events_off(link);
	/* A forwarding link's peer writes only through the events' thread. */
	if (ndev->forward)
		ndev->peer_quiet = true;
	ntrdma_link_fini(ndev);
	link->ops->rx_close(link);
	ntrdma_faces_del(ndev, ndev->peer_quiet);
	ntrdma_dma_fini(ndev);
	ntrdma_cmd_fini(ndev);
	ntrdma_rxmem_fini(ndev, ndev->peer_quiet);
	dev_info(link->parent, "%s: removed\n", ndev->name);
	ida_free(&ntrdma_ida, ndev->index);
	kfree(ndev);
}

/**
 * ntrdma_engine_init() - start the engine with its faces
 * @faces: the faces every device carries, in the order they are added
 * @count: how many (at most NTRDMA_FACES_MAX)
 *
 * Registers the link backends: every link they find from then on becomes
 * an ntrdma device with these faces. @faces must outlive ntrdma_engine_exit().
 *
 * Return: 0 or a negative errno.
 */
int ntrdma_engine_init(const struct ntrdma_face *const *faces,
		       unsigned int count)
{
	int rc;

	if (count > NTRDMA_FACES_MAX)
		return -EINVAL;
	ntrdma_faces_set(faces, count);
	ntrdma_debugfs_init();
	rc = ntrdma_ntb_register();
	if (rc)
		goto err_debugfs;
	rc = ntrdma_tcp_register();
	if (rc)
		goto err_ntb;
	return 0;

err_ntb:
	ntrdma_ntb_unregister();
err_debugfs:
	ntrdma_debugfs_exit();
	return rc;
}

/**
 * ntrdma_engine_exit() - remove every device and stop the engine
 */
void ntrdma_engine_exit(void)
{
	ntrdma_tcp_unregister();
	ntrdma_ntb_unregister();
	ntrdma_debugfs_exit();
}
