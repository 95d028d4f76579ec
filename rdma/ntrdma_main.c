// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA: RDMA and Ethernet over a PCIe Non-Transparent Bridge.
 *
 * The module: the one place that lists the faces. The engine (engine/)
 * binds every NTB device and carries these faces over it, in this order:
 * the Ethernet face first (the verbs face binds its port to its netdev),
 * then the verbs face, which is optional (CONFIG_NTRDMA_VERBS).
 */

#include <linux/kernel.h>
#include <linux/module.h>

#include "ntrdma_faces.h"

static const struct ntrdma_face *const ntrdma_faces[] = {
	&ntrdma_net_face,
#ifdef NTRDMA_VERBS
	&ntrdma_ib_face,
#endif
};

static int __init ntrdma_init(void)
{
	return ntrdma_engine_init(ntrdma_faces, ARRAY_SIZE(ntrdma_faces));
}
module_init(ntrdma_init);

static void __exit ntrdma_exit(void)
{
	ntrdma_engine_exit();
}
module_exit(ntrdma_exit);

MODULE_DESCRIPTION("NTRDMA: RDMA and Ethernet over PCIe NTB");
MODULE_AUTHOR("The NTRDMA authors");
MODULE_LICENSE("Dual BSD/GPL");
