// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA: RDMA and Ethernet over a PCIe Non-Transparent Bridge.
 *
 * One ntb_client; every NTB device it binds becomes one ntrdma device that
 * carries both faces over one engine. The engine talks to the hardware only
 * through the Linux NTB API (and dmaengine), so it runs unchanged on any NTB
 * hardware driver that offers scratchpads, doorbells and a memory window
 * that can translate to address 0 (the "flat" window onto the peer's memory).
 */

#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/idr.h>
#include <linux/io.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "ntrdma.h"

static int flat_mw = -1;
module_param(flat_mw, int, 0444);
MODULE_PARM_DESC(flat_mw,
		 "Memory window to use as the flat window onto the peer (default -1: the largest)");

static bool use_dma = true;
module_param(use_dma, bool, 0444);
MODULE_PARM_DESC(use_dma,
		 "Copy into the peer's memory with a DMA_MEMCPY channel when one exists (default Y), else with the CPU");

static DEFINE_IDA(ntrdma_ida);

/* A DMA_MEMCPY channel, preferably on the NTB's NUMA node. */
static bool ntrdma_dma_filter(struct dma_chan *chan, void *arg)
{
	struct ntrdma_dev *ndev = arg;
	int node = dev_to_node(&ndev->ntb->pdev->dev);

	return node == NUMA_NO_NODE ||
	       dev_to_node(chan->device->dev) == node;
}

static void ntrdma_dma_init(struct ntrdma_dev *ndev)
{
	struct dma_chan *chan;
	dma_cap_mask_t mask;

	if (!use_dma)
		return;
	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	chan = dma_request_channel(mask, ntrdma_dma_filter, ndev);
	if (!chan) {
		dev_info(&ndev->ntb->dev, "%s: no DMA_MEMCPY channel: CPU copy\n",
			 ndev->name);
		return;
	}
	ndev->flat_dma = dma_map_resource(chan->device->dev, ndev->flat_phys,
					  ndev->flat_size, DMA_BIDIRECTIONAL, 0);
	if (dma_mapping_error(chan->device->dev, ndev->flat_dma)) {
		dev_warn(&ndev->ntb->dev, "%s: %s cannot reach the window: CPU copy\n",
			 ndev->name, dma_chan_name(chan));
		dma_release_channel(chan);
		return;
	}
	ndev->dma_chan = chan;
	dev_info(&ndev->ntb->dev, "%s: copies by DMA channel %s\n", ndev->name,
		 dma_chan_name(chan));
}

static void ntrdma_dma_fini(struct ntrdma_dev *ndev)
{
	struct dma_chan *chan = ndev->dma_chan;

	if (!chan)
		return;
	dma_unmap_resource(chan->device->dev, ndev->flat_dma, ndev->flat_size,
			   DMA_BIDIRECTIONAL, 0);
	dma_release_channel(chan);
	ndev->dma_chan = NULL;
}

static void ntrdma_ctx_link_event(void *ctx)
{
	ntrdma_link_kick(ctx);
}

static void ntrdma_ctx_db_event(void *ctx, int vector)
{
	struct ntrdma_dev *ndev = ctx;
	u64 db = ntb_db_read(ndev->ntb);

	if (db & BIT_ULL(NTRDMA_DB_CTRL)) {
		ntb_db_clear(ndev->ntb, BIT_ULL(NTRDMA_DB_CTRL));
		ntrdma_link_kick(ndev);
	}
	if (db & BIT_ULL(NTRDMA_DB_VDB)) {
		/* Clear before scanning: a ring after the scan re-raises. */
		ntb_db_clear(ndev->ntb, BIT_ULL(NTRDMA_DB_VDB));
		ntrdma_vdb_event(ndev);
	}
}

static const struct ntb_ctx_ops ntrdma_ctx_ops = {
	.link_event	= ntrdma_ctx_link_event,
	.db_event	= ntrdma_ctx_db_event,
};

/* Choose the flat window: the requested one, else the largest. */
static int ntrdma_find_flat_mw(struct ntrdma_dev *ndev)
{
	resource_size_t size, best_size = 0;
	phys_addr_t base, best_base = 0;
	int i, n, best = -1;

	n = ntb_peer_mw_count(ndev->ntb);
	for (i = 0; i < n; i++) {
		if (flat_mw >= 0 && i != flat_mw)
			continue;
		if (ntb_peer_mw_get_addr(ndev->ntb, i, &base, &size))
			continue;
		if (size > best_size) {
			best = i;
			best_size = size;
			best_base = base;
		}
	}
	if (best < 0 || best_size < 2 * sizeof(struct ntrdma_inbox))
		return -ENODEV;
	ndev->flat_mw = best;
	ndev->flat_phys = best_base;
	ndev->flat_size = best_size;
	return 0;
}

static int ntrdma_check_hw(struct ntb_dev *ntb)
{
	if (ntb_spad_count(ntb) < NTRDMA_SPAD_COUNT) {
		dev_err(&ntb->dev, "ntrdma needs %d scratchpads, the NTB has %d\n",
			NTRDMA_SPAD_COUNT, ntb_spad_count(ntb));
		return -ENODEV;
	}
	if (!(ntb_db_valid_mask(ntb) & BIT_ULL(NTRDMA_DB_VDB)) ||
	    !(ntb_db_valid_mask(ntb) & BIT_ULL(NTRDMA_DB_CTRL))) {
		dev_err(&ntb->dev, "ntrdma needs doorbell bits 0 and 1\n");
		return -ENODEV;
	}
	if (ntb_peer_port_count(ntb) != 1) {
		dev_err(&ntb->dev, "ntrdma supports two-port NTBs only\n");
		return -ENODEV;
	}
	return 0;
}

static int ntrdma_probe(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntrdma_dev *ndev;
	int rc;

	rc = ntrdma_check_hw(ntb);
	if (rc)
		return rc;

	ndev = kzalloc(sizeof(*ndev), GFP_KERNEL);
	if (!ndev)
		return -ENOMEM;
	ndev->ntb = ntb;
	ndev->dma_dev = &ntb->pdev->dev;
	rc = ida_alloc(&ntrdma_ida, GFP_KERNEL);
	if (rc < 0)
		goto err_free;
	ndev->index = rc;
	snprintf(ndev->name, sizeof(ndev->name), "ntrdma%d", ndev->index);

	rc = ntrdma_find_flat_mw(ndev);
	if (rc) {
		dev_err(&ntb->dev, "%s: no memory window usable as a flat window\n",
			ndev->name);
		goto err_ida;
	}
	ndev->flat = ioremap_wc(ndev->flat_phys, ndev->flat_size);
	if (!ndev->flat) {
		rc = -ENOMEM;
		goto err_ida;
	}

	ndev->inbox_size = PAGE_ALIGN(sizeof(struct ntrdma_inbox));
	ndev->inbox = alloc_pages_exact(ndev->inbox_size,
					GFP_KERNEL | __GFP_ZERO);
	if (!ndev->inbox) {
		rc = -ENOMEM;
		goto err_unmap_flat;
	}
	ndev->inbox_dma = dma_map_single(ndev->dma_dev, ndev->inbox,
					 ndev->inbox_size, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(ndev->dma_dev, ndev->inbox_dma)) {
		rc = -EIO;
		goto err_free_inbox;
	}

	ntrdma_vdb_init(ndev);
	rc = ntrdma_link_init(ndev);
	if (rc)
		goto err_unmap_inbox;
	rc = ntrdma_cmd_init(ndev);
	if (rc)
		goto err_wq;
	ntrdma_dma_init(ndev);

	rc = ntrdma_net_add(ndev);
	if (rc)
		goto err_cmd;
	/* The verbs face is optional: without it Ethernet still runs. */
	rc = ntrdma_ib_add(ndev);
	if (rc)
		dev_warn(&ntb->dev, "%s: no verbs device: %d\n", ndev->name, rc);

	ntb_db_set_mask(ntb, ntb_db_valid_mask(ntb));
	rc = ntb_set_ctx(ntb, ndev, &ntrdma_ctx_ops);
	if (rc)
		goto err_net;
	ntb_db_clear(ntb, BIT_ULL(NTRDMA_DB_VDB) | BIT_ULL(NTRDMA_DB_CTRL));
	ntb_db_clear_mask(ntb, BIT_ULL(NTRDMA_DB_VDB) | BIT_ULL(NTRDMA_DB_CTRL));

	ntrdma_debugfs_add(ndev);
	ntrdma_link_start(ndev);
	dev_info(&ntb->dev, "%s: flat window MW%d, %pa bytes; inbox %zu bytes\n",
		 ndev->name, ndev->flat_mw, &ndev->flat_size, ndev->inbox_size);
	return 0;

err_net:
	ntrdma_ib_del(ndev);
	ntrdma_net_del(ndev, true);
err_cmd:
	ntrdma_dma_fini(ndev);
	ntrdma_cmd_fini(ndev);
err_wq:
	ntrdma_link_fini(ndev);
err_unmap_inbox:
	dma_unmap_single(ndev->dma_dev, ndev->inbox_dma, ndev->inbox_size,
			 DMA_BIDIRECTIONAL);
err_free_inbox:
	free_pages_exact(ndev->inbox, ndev->inbox_size);
err_unmap_flat:
	iounmap(ndev->flat);
err_ida:
	ida_free(&ntrdma_ida, ndev->index);
err_free:
	kfree(ndev);
	return rc;
}

static void ntrdma_remove(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntrdma_dev *ndev = ntb->ctx;

	ntrdma_debugfs_del(ndev);
	ndev->peer_quiet = ntrdma_link_stop(ndev);
	ntb_db_set_mask(ntb, ntb_db_valid_mask(ntb));
	ntb_clear_ctx(ntb);
	ntrdma_link_fini(ndev);
	ntb_mw_clear_trans(ntb, 0, ndev->flat_mw);
	ntrdma_ib_del(ndev);
	ntrdma_net_del(ndev, ndev->peer_quiet);
	ntrdma_dma_fini(ndev);
	ntrdma_cmd_fini(ndev);
	if (ndev->peer_quiet) {
		dma_unmap_single(ndev->dma_dev, ndev->inbox_dma,
				 ndev->inbox_size, DMA_BIDIRECTIONAL);
		free_pages_exact(ndev->inbox, ndev->inbox_size);
	}
	iounmap(ndev->flat);
	dev_info(&ntb->dev, "%s: removed\n", ndev->name);
	ida_free(&ntrdma_ida, ndev->index);
	kfree(ndev);
}

static struct ntb_client ntrdma_client = {
	.ops = {
		.probe = ntrdma_probe,
		.remove = ntrdma_remove,
	},
};

static int __init ntrdma_init(void)
{
	int rc;

	ntrdma_debugfs_init();
	rc = ntb_register_client(&ntrdma_client);
	if (rc)
		ntrdma_debugfs_exit();
	return rc;
}
module_init(ntrdma_init);

static void __exit ntrdma_exit(void)
{
	ntb_unregister_client(&ntrdma_client);
	ntrdma_debugfs_exit();
}
module_exit(ntrdma_exit);

MODULE_DESCRIPTION("NTRDMA: RDMA and Ethernet over PCIe NTB");
MODULE_AUTHOR("The NTRDMA authors");
MODULE_LICENSE("Dual BSD/GPL");
