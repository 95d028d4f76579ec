/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The emulated NTB's DMA engine (ntb_hw_ivshmem_dma.c), used by
 * ntb_hw_ivshmem_main.c.
 */
#ifndef NTB_HW_IVSHMEM_DMA_H
#define NTB_HW_IVSHMEM_DMA_H

#include <linux/device.h>
#include <linux/types.h>

struct ivdma;

struct ivdma *ivdma_create(struct device *dev, phys_addr_t win_phys,
			   resource_size_t win_size);
void ivdma_destroy(struct ivdma *d);

#endif /* NTB_HW_IVSHMEM_DMA_H */
