/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The emulated NTB's DMA engine (ivdma.c), used by ivntb.c. */
#ifndef IVDMA_H
#define IVDMA_H

#include <linux/device.h>
#include <linux/types.h>

struct ivdma;

struct ivdma *ivdma_create(struct device *dev, phys_addr_t win_phys,
			   resource_size_t win_size);
void ivdma_destroy(struct ivdma *d);

#endif /* IVDMA_H */
