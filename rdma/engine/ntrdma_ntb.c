// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA link backend: a PCIe NTB, through the Linux NTB API. One
 * ntb_client; every NTB device it binds becomes one ntrdma device. It runs
 * on any NTB hardware driver that offers scratchpads, doorbell bits 0 and 1
 * and a memory window: the window is the link's map, its inbound
 * translation what the peer reaches of our memory.
 */

#include <linux/io.h>
#include <linux/module.h>
#include <linux/ntb.h>
#include <linux/pci.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "ntrdma_engine.h"
#include "ntrdma_link_ops.h"

static int flat_mw = -1;
module_param(flat_mw, int, 0444);
MODULE_PARM_DESC(flat_mw,
		 "Memory window to use (default -1: the largest): flat mode when it maps the peer's RAM at translation 0, windowed mode otherwise");

struct ntrdma_ntb {
	struct ntrdma_link link;
	struct ntb_dev *ntb;
	int mw;				/* the window, ours and the peer's */
	struct ntrdma_dev *ndev;	/* events go to it (events_on) */
};

static struct ntb_dev *to_ntb(struct ntrdma_link *link)
{
	return container_of(link, struct ntrdma_ntb, link)->ntb;
}

static int ntb_link_op_enable(struct ntrdma_link *link)
{
	return ntb_link_enable(to_ntb(link), NTB_SPEED_AUTO, NTB_WIDTH_AUTO);
}

static int ntb_link_op_disable(struct ntrdma_link *link)
{
	return ntb_link_disable(to_ntb(link));
}

static bool ntb_link_op_is_up(struct ntrdma_link *link)
{
	return ntb_link_is_up(to_ntb(link), NULL, NULL);
}

static u32 ntb_link_op_spad_read(struct ntrdma_link *link, unsigned int idx)
{
	return ntb_spad_read(to_ntb(link), idx);
}

static void ntb_link_op_peer_spad_write(struct ntrdma_link *link,
					unsigned int idx, u32 val)
{
	ntb_peer_spad_write(to_ntb(link), 0, idx, val);
}

static void ntb_link_op_peer_db_set(struct ntrdma_link *link, unsigned int bit)
{
	ntb_peer_db_set(to_ntb(link), BIT_ULL(bit));
}

static int ntb_link_op_rx_limits(struct ntrdma_link *link,
				 resource_size_t *align,
				 resource_size_t *size_align,
				 resource_size_t *size_max)
{
	struct ntrdma_ntb *nb = container_of(link, struct ntrdma_ntb, link);

	return ntb_mw_get_align(nb->ntb, 0, nb->mw, align, size_align,
				size_max);
}

static int ntb_link_op_rx_open(struct ntrdma_link *link, void *va,
			       dma_addr_t base, resource_size_t size)
{
	struct ntrdma_ntb *nb = container_of(link, struct ntrdma_ntb, link);

	return ntb_mw_set_trans(nb->ntb, 0, nb->mw, base, size);
}

static void ntb_link_op_rx_close(struct ntrdma_link *link)
{
	struct ntrdma_ntb *nb = container_of(link, struct ntrdma_ntb, link);

	ntb_mw_clear_trans(nb->ntb, 0, nb->mw);
}

static void ntrdma_ntb_link_event(void *ctx)
{
	struct ntrdma_ntb *nb = ctx;

	ntrdma_link_event(nb->ndev);
}

/* Clear a bit before the engine scans: a ring after the scan re-raises. */
static void ntrdma_ntb_db_take(struct ntrdma_ntb *nb, u64 db, unsigned int bit)
{
	if (!(db & BIT_ULL(bit)))
		return;
	ntb_db_clear(nb->ntb, BIT_ULL(bit));
	ntrdma_link_doorbell(nb->ndev, bit);
}

static void ntrdma_ntb_db_event(void *ctx, int vector)
{
	struct ntrdma_ntb *nb = ctx;
	u64 db = ntb_db_read(nb->ntb);

	ntrdma_ntb_db_take(nb, db, NTRDMA_DB_CTRL);
	ntrdma_ntb_db_take(nb, db, NTRDMA_DB_VDB);
}

static const struct ntb_ctx_ops ntrdma_ntb_ctx_ops = {
	.link_event	= ntrdma_ntb_link_event,
	.db_event	= ntrdma_ntb_db_event,
};

static int ntb_link_op_events_on(struct ntrdma_link *link,
				 struct ntrdma_dev *ndev)
{
	struct ntrdma_ntb *nb = container_of(link, struct ntrdma_ntb, link);
	u64 ours = BIT_ULL(NTRDMA_DB_VDB) | BIT_ULL(NTRDMA_DB_CTRL);
	int rc;

	nb->ndev = ndev;
	ntb_db_set_mask(nb->ntb, ntb_db_valid_mask(nb->ntb));
	rc = ntb_set_ctx(nb->ntb, nb, &ntrdma_ntb_ctx_ops);
	if (rc)
		return rc;
	ntb_db_clear(nb->ntb, ours);
	ntb_db_clear_mask(nb->ntb, ours);
	return 0;
}

static void ntb_link_op_events_off(struct ntrdma_link *link)
{
	struct ntb_dev *ntb = to_ntb(link);

	ntb_db_set_mask(ntb, ntb_db_valid_mask(ntb));
	ntb_clear_ctx(ntb);
}

static void ntb_link_op_show(struct ntrdma_link *link, struct seq_file *s)
{
	seq_printf(s, "flat_mw: %d\n",
		   container_of(link, struct ntrdma_ntb, link)->mw);
}

static const struct ntrdma_link_ops ntrdma_ntb_ops = {
	.kind		= "ntb",
	.enable		= ntb_link_op_enable,
	.disable	= ntb_link_op_disable,
	.is_up		= ntb_link_op_is_up,
	.spad_read	= ntb_link_op_spad_read,
	.peer_spad_write = ntb_link_op_peer_spad_write,
	.peer_db_set	= ntb_link_op_peer_db_set,
	.rx_limits	= ntb_link_op_rx_limits,
	.rx_open	= ntb_link_op_rx_open,
	.rx_close	= ntb_link_op_rx_close,
	.events_on	= ntb_link_op_events_on,
	.events_off	= ntb_link_op_events_off,
	.show		= ntb_link_op_show,
};

/* Choose the window: the requested one, else the largest. */
static int ntrdma_ntb_find_mw(struct ntrdma_ntb *nb)
{
	resource_size_t size, best_size = 0;
	phys_addr_t base, best_base = 0;
	int i, n, best = -1;

	n = ntb_peer_mw_count(nb->ntb);
	for (i = 0; i < n; i++) {
		if (flat_mw >= 0 && i != flat_mw)
			continue;
		if (ntb_peer_mw_get_addr(nb->ntb, i, &base, &size))
			continue;
		if (size > best_size) {
			best = i;
			best_size = size;
			best_base = base;
		}
	}
	if (best < 0 || best_size < NTRDMA_WINDOW_MIN) {
		dev_err(&nb->ntb->dev,
			"no usable memory window: %d peer MWs, the largest (flat_mw=%d) %pa bytes; ntrdma needs one of at least %u bytes\n",
			n, flat_mw, &best_size, NTRDMA_WINDOW_MIN);
		return -ENODEV;
	}
	nb->mw = best;
	nb->link.map_phys = best_base;
	nb->link.map_size = best_size;
	return 0;
}

static int ntrdma_ntb_check(struct ntb_dev *ntb)
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

static int ntrdma_ntb_probe(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntrdma_ntb *nb;
	struct ntrdma_dev *ndev;
	int rc;

	rc = ntrdma_ntb_check(ntb);
	if (rc)
		return rc;
	nb = kzalloc(sizeof(*nb), GFP_KERNEL);
	if (!nb)
		return -ENOMEM;
	nb->ntb = ntb;
	nb->link.ops = &ntrdma_ntb_ops;
	nb->link.parent = &ntb->dev;
	nb->link.dma_dev = &ntb->pdev->dev;
	nb->link.port = ntb_port_number(ntb);
	rc = ntrdma_ntb_find_mw(nb);
	if (rc)
		goto err_free;
	nb->link.map = ioremap_wc(nb->link.map_phys, nb->link.map_size);
	if (!nb->link.map) {
		rc = -ENOMEM;
		goto err_free;
	}
	ndev = ntrdma_dev_add(&nb->link);
	if (IS_ERR(ndev)) {
		rc = PTR_ERR(ndev);
		goto err_unmap;
	}
	dev_info(&ntb->dev, "%s: MW%d, %pa bytes; flat or windowed mode at link-up\n",
		 ntrdma_dev_name(ndev), nb->mw, &nb->link.map_size);
	return 0;

err_unmap:
	iounmap(nb->link.map);
err_free:
	kfree(nb);
	return rc;
}

static void ntrdma_ntb_remove(struct ntb_client *client, struct ntb_dev *ntb)
{
	struct ntrdma_ntb *nb = ntb->ctx;

	ntrdma_dev_remove(nb->ndev);
	iounmap(nb->link.map);
	kfree(nb);
}

static struct ntb_client ntrdma_ntb_client = {
	.ops = {
		.probe = ntrdma_ntb_probe,
		.remove = ntrdma_ntb_remove,
	},
};

/**
 * ntrdma_ntb_register() - bind every NTB device, now and later
 *
 * Return: 0 or a negative errno.
 */
int ntrdma_ntb_register(void)
{
	return ntb_register_client(&ntrdma_ntb_client);
}

/**
 * ntrdma_ntb_unregister() - remove every ntrdma device on an NTB
 */
void ntrdma_ntb_unregister(void)
{
	ntb_unregister_client(&ntrdma_ntb_client);
}
