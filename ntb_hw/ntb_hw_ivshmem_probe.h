/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The emulated NTB's copy-rate probe (ntb_hw_ivshmem_probe.c): the link
 * limit make bench reads every byte rate against. Used by
 * ntb_hw_ivshmem_main.c.
 */
#ifndef NTB_HW_IVSHMEM_PROBE_H
#define NTB_HW_IVSHMEM_PROBE_H

#include <linux/device.h>
#include <linux/ntb.h>
#include <linux/types.h>

/* What the probe may use of one port. */
struct ivprobe_port {
	struct device *dev;		/* messages */
	struct ntb_dev *ntb;		/* no probe while a client is bound */
	void *ap_virt;			/* our inbound aperture, local view */
	phys_addr_t out_phys;		/* the peer's inbound aperture */
	resource_size_t slot_size;	/* one aperture slot (one MW) */
	resource_size_t desc_off;	/* our export descriptor, both views */
	phys_addr_t flat_phys;		/* flat window (0: none) */
	resource_size_t flat_size;
	/* true while the peer's link is enabled: a client may use its MWs */
	bool (*peer_active)(void *ctx);
	void *ctx;
};

struct ivprobe;

struct dentry *ivprobe_init_root(void);
struct ivprobe *ivprobe_create(const struct ivprobe_port *port,
			       struct dentry *root);
void ivprobe_destroy(struct ivprobe *p);

#endif /* NTB_HW_IVSHMEM_PROBE_H */
