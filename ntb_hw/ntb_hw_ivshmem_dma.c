// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The emulated NTB's DMA engine: one DMA_MEMCPY channel per NTB port, as NTB
 * adapters pair with a DMA engine (Intel's with IOAT, Switchtec's with its
 * own). It stands for hardware, so its "device" is a high-priority worker:
 * descriptors run in submission order, each copy completes before the next
 * starts, and callbacks run in that order with bottom halves disabled, as
 * from a DMA engine's tasklet. A few KiB run on the issuing CPU, more on
 * another one (ivdma_cpu()): see doc/testbed.md.
 *
 * Bus addresses: the guest has no IOMMU, so a bus address is a physical
 * address: either inside the port's flat window (the peer's RAM, mapped here
 * once) or guest RAM (reached through its struct page). Anything else fails
 * the descriptor with DMA_TRANS_READ_FAILED / DMA_TRANS_WRITE_FAILED.
 *
 * For the selftests it can refuse work as a fixed-ring engine (IOAT) does
 * when its ring is full: fail_prep_every=N makes every Nth prep return NULL,
 * fail_submit_every=N every Nth submit return an error cookie (the
 * descriptor is then freed here; its callback never runs); `refused` counts
 * both. 0 (the default): never. stall=1 stops it as a hung engine: no
 * descriptor starts until stall=0 (terminate_all still drops them).
 *
 * A client must not call prep, submit, issue_pending or tx_status with
 * interrupts off: ioat and plx_dma take spin_lock_bh there (its unlock runs
 * softirqs), and their tx_status runs completion callbacks. This engine
 * needs neither, so it warns instead (ivdma_check_ctx()): a test run fails
 * on such a call.
 */

#include <linux/delay.h>
#include <linux/dmaengine.h>
#include <linux/highmem.h>
#include <linux/io.h>
#include <linux/list.h>
#include <linux/moduleparam.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "ntb_hw_ivshmem_dma.h"

static unsigned int fail_prep_every;
module_param(fail_prep_every, uint, 0644);
MODULE_PARM_DESC(fail_prep_every,
		 "Tests: the DMA engine refuses every Nth descriptor at prep, as a full ring does (default 0: never)");

static unsigned int fail_submit_every;
module_param(fail_submit_every, uint, 0644);
MODULE_PARM_DESC(fail_submit_every,
		 "Tests: the DMA engine refuses every Nth descriptor at submit (default 0: never)");

static bool stall;
module_param(stall, bool, 0644);
MODULE_PARM_DESC(stall,
		 "Tests: the DMA engine starts no descriptor while set, as a hung engine (default 0)");

/* How often a stalled worker looks again. */
#define IVDMA_STALL_POLL_MS	20
/* Copies of at most this many bytes run on the CPU that issued them. */
#define IVDMA_LOCAL_BYTES	(16 * 1024)

static atomic_t ivdma_preps, ivdma_submits, ivdma_refused;

/* A call that a real engine would run softirqs or callbacks in. */
static void ivdma_check_ctx(const char *what)
{
	WARN_ONCE(irqs_disabled() || in_hardirq(),
		  "ntb_hw_ivshmem: DMA %s called with interrupts off\n", what);
}

static int ivdma_refused_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%d\n", atomic_read(&ivdma_refused));
}

static const struct kernel_param_ops ivdma_refused_ops = {
	.get = ivdma_refused_get,
};
module_param_cb(refused, &ivdma_refused_ops, NULL, 0444);
MODULE_PARM_DESC(refused, "Descriptors refused by fail_prep_every/fail_submit_every");

/* This try (counted in @tries) is one the tests want refused. */
static bool ivdma_refuse(atomic_t *tries, unsigned int every)
{
	if (!every || (unsigned int)atomic_inc_return(tries) % every)
		return false;
	atomic_inc(&ivdma_refused);
	return true;
}

struct ivdma_desc {
	struct dma_async_tx_descriptor tx;
	struct list_head node;
	dma_addr_t dst, src;
	size_t len;
};

struct ivdma {
	struct dma_device dma;
	struct dma_chan chan;
	spinlock_t lock;		/* lists and cookies */
	struct list_head submitted;	/* not yet issued */
	size_t submitted_bytes;		/* their lengths added up */
	struct list_head issued;	/* for the worker, in order */
	struct work_struct work;
	struct workqueue_struct *wq;
	phys_addr_t win_phys;
	resource_size_t win_size;
	void __iomem *win;
};

#define to_ivdma(c) container_of(c, struct ivdma, chan)

/* Where bus address @a (for @len bytes) lives: the window or RAM. */
static void __iomem *ivdma_win(struct ivdma *d, dma_addr_t a, size_t len)
{
	if (a >= d->win_phys && len <= d->win_size &&
	    a - d->win_phys <= d->win_size - len)
		return d->win + (a - d->win_phys);
	return NULL;
}

static bool ivdma_is_ram(dma_addr_t a, size_t len)
{
	unsigned long pfn;

	for (pfn = PHYS_PFN(a); pfn <= PHYS_PFN(a + len - 1); pfn++)
		if (!pfn_valid(pfn))
			return false;
	return true;
}

/* Copy between RAM and the window (or RAM and RAM), page by page. */
static enum dmaengine_tx_result ivdma_copy(struct ivdma *d,
					   struct ivdma_desc *desc)
{
	void __iomem *wdst = ivdma_win(d, desc->dst, desc->len);
	void __iomem *wsrc = ivdma_win(d, desc->src, desc->len);
	size_t done, chunk, off;
	phys_addr_t ram;
	void *va;

	if (!desc->len)
		return DMA_TRANS_NOERROR;
	if (wdst && wsrc) {
		/* Window to window: through a bounce in RAM is not worth it. */
		return DMA_TRANS_READ_FAILED;
	}
	if (!wsrc && !ivdma_is_ram(desc->src, desc->len))
		return DMA_TRANS_READ_FAILED;
	if (!wdst && !ivdma_is_ram(desc->dst, desc->len))
		return DMA_TRANS_WRITE_FAILED;

	for (done = 0; done < desc->len; done += chunk) {
		ram = (wdst ? desc->src : desc->dst) + done;
		off = offset_in_page(ram);
		chunk = min_t(size_t, desc->len - done, PAGE_SIZE - off);
		va = kmap_local_page(pfn_to_page(PHYS_PFN(ram)));
		if (wdst)
			memcpy_toio(wdst + done, va + off, chunk);
		else if (wsrc)
			memcpy_fromio(va + off, wsrc + done, chunk);
		else
			memcpy(va + off,
			       phys_to_virt(desc->src + done), chunk);
		kunmap_local(va);
		cond_resched();
	}
	return DMA_TRANS_NOERROR;
}

static void ivdma_work(struct work_struct *work)
{
	struct ivdma *d = container_of(work, struct ivdma, work);
	struct dmaengine_result res = { .residue = 0 };
	struct ivdma_desc *desc;
	unsigned long flags;

	for (;;) {
		spin_lock_irqsave(&d->lock, flags);
		desc = list_first_entry_or_null(&d->issued, struct ivdma_desc,
						node);
		if (desc && READ_ONCE(stall)) {
			spin_unlock_irqrestore(&d->lock, flags);
			msleep(IVDMA_STALL_POLL_MS);
			continue;
		}
		if (desc)
			list_del(&desc->node);
		spin_unlock_irqrestore(&d->lock, flags);
		if (!desc)
			return;

		res.result = ivdma_copy(d, desc);
		wmb(); /* the copy lands before its completion is seen */
		spin_lock_irqsave(&d->lock, flags);
		d->chan.completed_cookie = desc->tx.cookie;
		spin_unlock_irqrestore(&d->lock, flags);

		local_bh_disable();
		if (desc->tx.callback_result)
			desc->tx.callback_result(desc->tx.callback_param, &res);
		else if (desc->tx.callback)
			desc->tx.callback(desc->tx.callback_param);
		local_bh_enable();
		kfree(desc);
	}
}

static dma_cookie_t ivdma_submit(struct dma_async_tx_descriptor *tx)
{
	struct ivdma *d = to_ivdma(tx->chan);
	struct ivdma_desc *desc = container_of(tx, struct ivdma_desc, tx);
	unsigned long flags;
	dma_cookie_t cookie;

	ivdma_check_ctx("submit");
	if (ivdma_refuse(&ivdma_submits, READ_ONCE(fail_submit_every))) {
		kfree(desc);
		return -ENOSPC;
	}
	spin_lock_irqsave(&d->lock, flags);
	cookie = d->chan.cookie + 1;
	if (cookie < DMA_MIN_COOKIE)
		cookie = DMA_MIN_COOKIE;
	d->chan.cookie = cookie;
	tx->cookie = cookie;
	list_add_tail(&desc->node, &d->submitted);
	d->submitted_bytes += desc->len;
	spin_unlock_irqrestore(&d->lock, flags);
	return cookie;
}

static struct dma_async_tx_descriptor *
ivdma_prep_memcpy(struct dma_chan *chan, dma_addr_t dst, dma_addr_t src,
		  size_t len, unsigned long flags)
{
	struct ivdma_desc *desc;

	ivdma_check_ctx("prep");
	if (ivdma_refuse(&ivdma_preps, READ_ONCE(fail_prep_every)))
		return NULL;
	desc = kzalloc(sizeof(*desc), GFP_NOWAIT);
	if (!desc)
		return NULL;
	dma_async_tx_descriptor_init(&desc->tx, chan);
	desc->tx.tx_submit = ivdma_submit;
	desc->tx.flags = flags;
	desc->dst = dst;
	desc->src = src;
	desc->len = len;
	return &desc->tx;
}

/*
 * Where the copies run: a few KiB on this CPU, right after the issuer (in
 * the test bed waking another vCPU can cost milliseconds when the host's
 * cores are busy); more on another CPU, in parallel with the issuer.
 */
static int ivdma_cpu(size_t bytes)
{
	int cpu = raw_smp_processor_id();
	int other;

	if (bytes <= IVDMA_LOCAL_BYTES)
		return cpu;
	other = cpumask_any_but(cpu_online_mask, cpu);
	return other < nr_cpu_ids ? other : cpu;
}

static void ivdma_issue_pending(struct dma_chan *chan)
{
	struct ivdma *d = to_ivdma(chan);
	unsigned long flags;
	size_t bytes;
	bool any;

	ivdma_check_ctx("issue_pending");
	spin_lock_irqsave(&d->lock, flags);
	any = !list_empty(&d->submitted);
	bytes = d->submitted_bytes;
	d->submitted_bytes = 0;
	list_splice_tail_init(&d->submitted, &d->issued);
	spin_unlock_irqrestore(&d->lock, flags);
	if (any)
		queue_work_on(ivdma_cpu(bytes), d->wq, &d->work);
}

static enum dma_status ivdma_tx_status(struct dma_chan *chan,
				       dma_cookie_t cookie,
				       struct dma_tx_state *state)
{
	struct ivdma *d = to_ivdma(chan);
	dma_cookie_t last, used;
	unsigned long flags;

	ivdma_check_ctx("tx_status");
	spin_lock_irqsave(&d->lock, flags);
	last = chan->completed_cookie;
	used = chan->cookie;
	spin_unlock_irqrestore(&d->lock, flags);
	dma_set_tx_state(state, last, used, 0);
	return dma_async_is_complete(cookie, last, used);
}

/* Drop what has not started (no callbacks); the running copy finishes. */
static int ivdma_terminate_all(struct dma_chan *chan)
{
	struct ivdma *d = to_ivdma(chan);
	struct ivdma_desc *desc, *tmp;
	unsigned long flags;
	LIST_HEAD(drop);

	spin_lock_irqsave(&d->lock, flags);
	list_splice_tail_init(&d->submitted, &drop);
	d->submitted_bytes = 0;
	list_splice_tail_init(&d->issued, &drop);
	if (!list_empty(&drop))
		chan->completed_cookie = chan->cookie;
	spin_unlock_irqrestore(&d->lock, flags);
	list_for_each_entry_safe(desc, tmp, &drop, node)
		kfree(desc);
	return 0;
}

static void ivdma_synchronize(struct dma_chan *chan)
{
	flush_work(&to_ivdma(chan)->work);
}

static int ivdma_alloc_chan_resources(struct dma_chan *chan)
{
	chan->cookie = DMA_MIN_COOKIE;
	chan->completed_cookie = DMA_MIN_COOKIE;
	return 1;
}

static void ivdma_free_chan_resources(struct dma_chan *chan)
{
	ivdma_terminate_all(chan);
	ivdma_synchronize(chan);
}

struct ivdma *ivdma_create(struct device *dev, phys_addr_t win_phys,
			   resource_size_t win_size)
{
	struct ivdma *d;
	int rc;

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return ERR_PTR(-ENOMEM);
	spin_lock_init(&d->lock);
	INIT_LIST_HEAD(&d->submitted);
	INIT_LIST_HEAD(&d->issued);
	INIT_WORK(&d->work, ivdma_work);
	d->win_phys = win_phys;
	d->win_size = win_size;
	d->win = ioremap_wc(win_phys, win_size);
	if (!d->win) {
		rc = -ENOMEM;
		goto err_free;
	}
	d->wq = alloc_workqueue("ivdma/%s", WQ_HIGHPRI |
				WQ_MEM_RECLAIM, 1, dev_name(dev));
	if (!d->wq) {
		rc = -ENOMEM;
		goto err_unmap;
	}

	dma_cap_set(DMA_MEMCPY, d->dma.cap_mask);
	d->dma.dev = dev;
	d->dma.copy_align = DMAENGINE_ALIGN_1_BYTE;
	d->dma.device_alloc_chan_resources = ivdma_alloc_chan_resources;
	d->dma.device_free_chan_resources = ivdma_free_chan_resources;
	d->dma.device_prep_dma_memcpy = ivdma_prep_memcpy;
	d->dma.device_issue_pending = ivdma_issue_pending;
	d->dma.device_tx_status = ivdma_tx_status;
	d->dma.device_terminate_all = ivdma_terminate_all;
	d->dma.device_synchronize = ivdma_synchronize;
	INIT_LIST_HEAD(&d->dma.channels);
	d->chan.device = &d->dma;
	list_add_tail(&d->chan.device_node, &d->dma.channels);
	rc = dma_async_device_register(&d->dma);
	if (rc)
		goto err_wq;
	return d;

err_wq:
	destroy_workqueue(d->wq);
err_unmap:
	iounmap(d->win);
err_free:
	kfree(d);
	return ERR_PTR(rc);
}

/* After every client released the channel (the NTB device is gone). */
void ivdma_destroy(struct ivdma *d)
{
	dma_async_device_unregister(&d->dma);
	ivdma_terminate_all(&d->chan);
	destroy_workqueue(d->wq);
	iounmap(d->win);
	kfree(d);
}
