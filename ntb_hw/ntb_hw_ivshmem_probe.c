// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ivprobe: the copy rate of the emulated NTB's windows, the link limit that
 * make bench reads every byte rate against.
 *
 * Usage (root, no NTB client bound on either port; debugfs):
 *   D=/sys/kernel/debug/ntb_hw_ivshmem
 *   echo window >$D/<port>/copy_probe     128 MiB into the peer's MW 0
 *   (module parameter copy_probe_mib: the MiB each command copies)
 *   echo export >$D/<peer>/copy_probe     the peer offers 4 MiB of its RAM
 *   echo flat >$D/<port>/copy_probe       128 MiB into it, flat window
 *   echo flat_dma >$D/<port>/copy_probe   the same by the port's DMA engine
 *   echo unexport >$D/<peer>/copy_probe
 *   cat $D/<port>/copy_probe   "copied N bytes in U usecs, R MBytes/s"
 *
 * Why not ntb_perf alone: QEMU TCG's softmmu TLB is direct-mapped (index =
 * page number modulo its size, which QEMU resizes as the guest runs).
 * ntb_perf copies from a kmalloc()ed buffer into an ioremap()ed window, both
 * aligned to 4 MiB, so source page i and window page i share one TLB entry
 * whenever the TLB is small: every load and store then swaps them through
 * the victim TLB, about 14x slower (seen: ~180 vs ~2500 MB/s, in phases
 * that follow the TLB's size, not the test). The probe keeps an odd page
 * distance between source and destination, which no power-of-two TLB maps
 * to one entry.
 *
 * The flat window reaches the peer's whole RAM, so the probe writes there
 * only into pages the peer exported: the peer publishes {magic, address,
 * size, cookie} at the start of its aperture's last slot; the copier checks
 * the cookie through the flat window first, and holds a busy word in that
 * descriptor while it writes; unexport withdraws the magic, waits (bounded)
 * for busy to clear and keeps the pages for ever if it does not.
 */

#include <linux/completion.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/mm.h>
#include <linux/moduleparam.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "ntb_hw_ivshmem_probe.h"

static unsigned int copy_probe_mib = 128;
module_param(copy_probe_mib, uint, 0644);
MODULE_PARM_DESC(copy_probe_mib,
		 "MiB each copy_probe command copies (1-4096, default 128)");

#define IVPROBE_CHUNK		(4UL << 20)
#define IVPROBE_MAGIC		0x45424f5250564900ULL	/* "\0IVPROBE" */
#define IVPROBE_UNEXPORT_MS	10000
#define IVPROBE_DMA_WAIT_MS	30000

/* At desc_off of the exporter's inbound aperture; the copier writes busy. */
struct ivprobe_desc {
	__le64 magic;
	__le64 addr;		/* peer-physical: offset in the flat window */
	__le64 size;
	__le64 cookie;		/* also the first 8 bytes of the pages */
	__le64 busy;
};

struct ivprobe {
	struct ivprobe_port port;
	struct dentry *dir;
	struct mutex lock;	/* one command at a time; result, target */
	struct page *target;	/* exported pages */
	u64 total;		/* bytes this command copies */
	char result[128];
};

static struct ivprobe_desc *ivprobe_local_desc(struct ivprobe *p)
{
	return (struct ivprobe_desc *)((u8 *)p->port.ap_virt +
				       p->port.desc_off);
}

/* An odd page distance: no direct-mapped TLB puts src and dst in one entry. */
static u8 *ivprobe_source(u8 *buf, void __iomem *dst)
{
	unsigned long dist = (unsigned long)buf - (unsigned long)dst;

	return (dist >> PAGE_SHIFT) & 1 ? buf : buf + PAGE_SIZE;
}

static void ivprobe_result(struct ivprobe *p, u64 done, ktime_t t0)
{
	s64 us = max_t(s64, ktime_us_delta(ktime_get(), t0), 1);

	snprintf(p->result, sizeof(p->result),
		 "copied %llu bytes in %lld usecs, %llu MBytes/s\n", done, us,
		 div64_u64(done, us));
}

static int ivprobe_copy(struct ivprobe *p, void __iomem *dst, size_t len)
{
	u64 done = 0;
	ktime_t t0;
	u8 *buf, *src;

	buf = vmalloc(len + PAGE_SIZE);
	if (!buf)
		return -ENOMEM;
	src = ivprobe_source(buf, dst);
	get_random_bytes(src, len);
	t0 = ktime_get();
	while (done < p->total) {
		memcpy_toio(dst, src, len);
		done += len;
		cond_resched();
	}
	ivprobe_result(p, done, t0);
	vfree(buf);
	return 0;
}

static int ivprobe_window(struct ivprobe *p)
{
	size_t len = min_t(size_t, p->port.slot_size, IVPROBE_CHUNK);
	void __iomem *dst;
	int rc;

	dst = ioremap_wc(p->port.out_phys, len);
	if (!dst)
		return -ENOMEM;
	rc = ivprobe_copy(p, dst, len);
	iounmap(dst);
	return rc;
}

/* The peer's descriptor, bounded; maps its pages through the flat window. */
static void __iomem *ivprobe_peer_target(struct ivprobe *p,
					 struct ivprobe_desc __iomem *desc,
					 phys_addr_t *bus)
{
	void __iomem *dst;
	u64 addr, size;

	if (readq(&desc->magic) != IVPROBE_MAGIC) {
		snprintf(p->result, sizeof(p->result),
			 "error: the peer exported nothing (echo export there)\n");
		return NULL;
	}
	rmb(); /* the fields the magic vouches for, after it */
	addr = readq(&desc->addr);
	size = readq(&desc->size);
	if (size != IVPROBE_CHUNK || !PAGE_ALIGNED(addr) ||
	    addr >= p->port.flat_size || size > p->port.flat_size - addr) {
		snprintf(p->result, sizeof(p->result),
			 "error: bad export %#llx+%#llx\n", addr, size);
		return NULL;
	}
	*bus = p->port.flat_phys + addr;
	dst = ioremap_wc(*bus, size);
	if (dst && readq(dst) != readq(&desc->cookie)) {
		snprintf(p->result, sizeof(p->result),
			 "error: the exported pages lack the cookie\n");
		iounmap(dst);
		return NULL;
	}
	return dst;
}

/* A copy into the peer's export: @dst its mapping, @bus its flat window address. */
typedef int (*ivprobe_copy_fn)(struct ivprobe *p, void __iomem *dst,
			       phys_addr_t bus);

static int ivprobe_cpu_flat(struct ivprobe *p, void __iomem *dst,
			    phys_addr_t bus)
{
	return ivprobe_copy(p, dst, IVPROBE_CHUNK);
}

struct ivprobe_dma_wait {
	struct completion done;
	atomic_t left;		/* descriptors not yet completed */
};

static void ivprobe_dma_done(void *arg)
{
	struct ivprobe_dma_wait *w = arg;

	if (atomic_dec_and_test(&w->left))
		complete(&w->done);
}

/* Submits @total bytes in descriptors of @len; returns bytes submitted. */
static u64 ivprobe_dma_submit(struct dma_chan *chan, dma_addr_t dst,
			      dma_addr_t src, size_t len, u64 total,
			      struct ivprobe_dma_wait *w)
{
	struct dma_async_tx_descriptor *tx;
	u64 done = 0;

	atomic_set(&w->left, 1);	/* ours, dropped after the last submit */
	while (done < total) {
		tx = dmaengine_prep_dma_memcpy(chan, dst, src, len,
					       DMA_PREP_INTERRUPT);
		if (!tx)
			break;
		tx->callback = ivprobe_dma_done;
		tx->callback_param = w;
		atomic_inc(&w->left);
		if (dma_submit_error(dmaengine_submit(tx))) {
			atomic_dec(&w->left);
			break;
		}
		done += len;
	}
	dma_async_issue_pending(chan);
	ivprobe_dma_done(w);
	return done;
}

/*
 * The port's DMA engine: RAM one page ahead of the window (the TLB, as for
 * the CPU copy), 4 MiB less that page per descriptor. Bounded wait; the
 * channel is quiesced before the source pages go back.
 */
static int ivprobe_dma_copy(struct ivprobe *p, struct dma_chan *chan,
			    dma_addr_t dst, struct page *src)
{
	struct device *dev = chan->device->dev;
	size_t len = IVPROBE_CHUNK - PAGE_SIZE;
	struct ivprobe_dma_wait w;
	dma_addr_t src_dma;
	ktime_t t0;
	u64 done;
	int rc = 0;

	src_dma = dma_map_page(dev, src, PAGE_SIZE, len, DMA_TO_DEVICE);
	if (dma_mapping_error(dev, src_dma))
		return -EIO;
	init_completion(&w.done);
	t0 = ktime_get();
	done = ivprobe_dma_submit(chan, dst, src_dma, len, p->total, &w);
	if (!wait_for_completion_timeout(&w.done,
					 msecs_to_jiffies(IVPROBE_DMA_WAIT_MS)))
		rc = -ETIMEDOUT;
	else if (done < p->total)
		rc = -EBUSY;	/* the engine refused work */
	else
		ivprobe_result(p, done, t0);
	dmaengine_terminate_sync(chan);
	dma_unmap_page(dev, src_dma, len, DMA_TO_DEVICE);
	return rc;
}

static bool ivprobe_dma_filter(struct dma_chan *chan, void *arg)
{
	return chan->device->dev == arg;
}

static int ivprobe_dma_flat(struct ivprobe *p, void __iomem *dst,
			    phys_addr_t bus)
{
	struct dma_chan *chan;
	dma_cap_mask_t mask;
	dma_addr_t dst_dma;
	struct page *src;
	int rc = -ENOMEM;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	chan = dma_request_channel(mask, ivprobe_dma_filter, p->port.dev);
	if (!chan)
		return -ENODEV;
	src = alloc_pages(GFP_KERNEL, get_order(IVPROBE_CHUNK));
	if (!src)
		goto out_chan;
	get_random_bytes(page_address(src), IVPROBE_CHUNK);
	dst_dma = dma_map_resource(chan->device->dev, bus, IVPROBE_CHUNK,
				   DMA_FROM_DEVICE, 0);
	rc = -EIO;
	if (!dma_mapping_error(chan->device->dev, dst_dma)) {
		rc = ivprobe_dma_copy(p, chan, dst_dma, src);
		dma_unmap_resource(chan->device->dev, dst_dma, IVPROBE_CHUNK,
				   DMA_FROM_DEVICE, 0);
	}
	__free_pages(src, get_order(IVPROBE_CHUNK));
out_chan:
	dma_release_channel(chan);
	return rc;
}

static int ivprobe_flat(struct ivprobe *p, ivprobe_copy_fn copy)
{
	struct ivprobe_desc __iomem *desc;
	void __iomem *dst = NULL;
	phys_addr_t bus;
	int rc = -EINVAL;

	if (!p->port.flat_phys)
		return -ENODEV;
	desc = ioremap(p->port.out_phys + p->port.desc_off, sizeof(*desc));
	if (!desc)
		return -ENOMEM;
	writeq(1, &desc->busy);
	mb(); /* busy is seen before we read magic (unexport: the reverse) */
	dst = ivprobe_peer_target(p, desc, &bus);
	if (dst) {
		u64 cookie = readq(dst);

		rc = copy(p, dst, bus);
		writeq(cookie, dst);
		iounmap(dst);
	}
	mb(); /* our writes are done before busy clears */
	writeq(0, &desc->busy);
	iounmap(desc);
	return rc;
}

static int ivprobe_export(struct ivprobe *p)
{
	struct ivprobe_desc *desc = ivprobe_local_desc(p);
	__le64 *first;
	u64 cookie;

	if (p->target)
		return 0;
	p->target = alloc_pages(GFP_KERNEL, get_order(IVPROBE_CHUNK));
	if (!p->target)
		return -ENOMEM;
	get_random_bytes(&cookie, sizeof(cookie));
	first = page_address(p->target);
	*first = cpu_to_le64(cookie);
	WRITE_ONCE(desc->busy, 0);
	WRITE_ONCE(desc->addr, cpu_to_le64(page_to_phys(p->target)));
	WRITE_ONCE(desc->size, cpu_to_le64(IVPROBE_CHUNK));
	WRITE_ONCE(desc->cookie, cpu_to_le64(cookie));
	smp_wmb(); /* the descriptor is whole before the magic says so */
	WRITE_ONCE(desc->magic, cpu_to_le64(IVPROBE_MAGIC));
	snprintf(p->result, sizeof(p->result), "exported %lu bytes\n",
		 IVPROBE_CHUNK);
	return 0;
}

static void ivprobe_unexport(struct ivprobe *p)
{
	struct ivprobe_desc *desc = ivprobe_local_desc(p);
	int waited = 0;

	if (!p->target)
		return;
	WRITE_ONCE(desc->magic, 0);
	smp_mb(); /* the withdrawal is seen before we look at busy */
	while (READ_ONCE(desc->busy) && waited < IVPROBE_UNEXPORT_MS) {
		msleep(20);
		waited += 20;
	}
	if (READ_ONCE(desc->busy))
		dev_warn(p->port.dev, "copy probe: the peer still writes the exported pages after %d ms: kept, never freed\n",
			 waited);
	else
		__free_pages(p->target, get_order(IVPROBE_CHUNK));
	p->target = NULL;
}

static int ivprobe_run(struct ivprobe *p, const char *cmd)
{
	if (p->port.ntb->dev.driver || p->port.peer_active(p->port.ctx))
		return -EBUSY;	/* a client owns the windows */
	p->total = (u64)clamp(READ_ONCE(copy_probe_mib), 1U, 4096U) << 20;
	if (sysfs_streq(cmd, "window"))
		return ivprobe_window(p);
	if (sysfs_streq(cmd, "flat"))
		return ivprobe_flat(p, ivprobe_cpu_flat);
	if (sysfs_streq(cmd, "flat_dma"))
		return ivprobe_flat(p, ivprobe_dma_flat);
	if (sysfs_streq(cmd, "export"))
		return ivprobe_export(p);
	if (sysfs_streq(cmd, "unexport")) {
		ivprobe_unexport(p);
		return 0;
	}
	return -EINVAL;
}

static ssize_t ivprobe_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	struct ivprobe *p = file->private_data;
	char cmd[16];
	int rc;

	if (count >= sizeof(cmd))
		return -EINVAL;
	if (copy_from_user(cmd, ubuf, count))
		return -EFAULT;
	cmd[count] = '\0';
	device_lock(&p->port.ntb->dev);	/* no client binds meanwhile */
	mutex_lock(&p->lock);
	p->result[0] = '\0';
	rc = ivprobe_run(p, cmd);
	mutex_unlock(&p->lock);
	device_unlock(&p->port.ntb->dev);
	return rc ? rc : count;
}

static ssize_t ivprobe_read(struct file *file, char __user *ubuf,
			    size_t count, loff_t *ppos)
{
	struct ivprobe *p = file->private_data;
	char buf[sizeof(p->result)];

	mutex_lock(&p->lock);
	strscpy(buf, p->result, sizeof(buf));
	mutex_unlock(&p->lock);
	return simple_read_from_buffer(ubuf, count, ppos, buf, strlen(buf));
}

static const struct file_operations ivprobe_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ivprobe_read,
	.write = ivprobe_write,
	.llseek = default_llseek,
};

/**
 * ivprobe_init_root() - the module's debugfs directory
 *
 * Return: the directory (an error pointer is fine: debugfs calls take it).
 */
struct dentry *ivprobe_init_root(void)
{
	return debugfs_create_dir(KBUILD_MODNAME, NULL);
}

/**
 * ivprobe_create() - the copy probe of one port
 * @port: what the probe may use (copied)
 * @root: ivprobe_init_root()'s directory
 *
 * Return: the probe, or NULL without memory (the port works without it).
 */
struct ivprobe *ivprobe_create(const struct ivprobe_port *port,
			       struct dentry *root)
{
	struct ivprobe *p = kzalloc(sizeof(*p), GFP_KERNEL);

	if (!p)
		return NULL;
	p->port = *port;
	mutex_init(&p->lock);
	p->dir = debugfs_create_dir(dev_name(port->dev), root);
	debugfs_create_file("copy_probe", 0600, p->dir, p, &ivprobe_fops);
	return p;
}

/**
 * ivprobe_destroy() - remove the probe; withdraws an export first
 * @p: the probe (NULL is fine)
 */
void ivprobe_destroy(struct ivprobe *p)
{
	if (!p)
		return;
	debugfs_remove_recursive(p->dir);
	mutex_lock(&p->lock);
	ivprobe_unexport(p);
	mutex_unlock(&p->lock);
	kfree(p);
}
