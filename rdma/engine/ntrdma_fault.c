// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA engine: fault injection for the selftests (CONFIG_NTRDMA_TEST_HOOKS;
 * never in a module built for use). It makes this side a misbehaving peer:
 * it writes what a broken or hostile peer kernel could write into the other
 * side's inbox, so the other side's checks and recovery can be shown.
 *
 * /sys/kernel/debug/ntrdma/<dev>/inject (root, write only):
 *   cqe TQP            a completion the peer must reject (length 0) in the
 *                      next slot of TQP's receive ring at the peer, published
 *   cq_prod TQP VALUE  the peer's completion producer index of TQP := VALUE
 *   post_prod TQP N    our receive buffers of TQP, as the peer sees them,
 *                      := N past the last completion the peer published to
 *                      us, the positions beyond what we posted filled with
 *                      well-formed descriptors (our last buffer again):
 *                      with N > NTRDMA_TQP_RING more than our ring holds,
 *                      posted ahead of the peer's copies still in flight
 *   rx_event TQP VALUE our wish for an RX doorbell, in the peer's inbox,
 *                      := VALUE (a wrong event index: the peer does not
 *                      ring our next receive; no doorbell rung)
 *   fail SITE N        from now on fail every Nth try at SITE (rx_alloc:
 *                      a face's receive buffer allocation; dma_prep: the
 *                      engine's DMA descriptors, the first of a message;
 *                      dma_prep_mid: the later ones), 0 to stop; counted in
 *                      info's faults_injected (works without a session)
 *   fuzz N SEED        N random 32-bit words into the peer's inbox, half
 *                      of them into ring indices and state words, the rest
 *                      anywhere (completions, command and response slots,
 *                      doorbell counters), then every doorbell rung
 *   canary N           arm the canaries with N pages (0: disarm), see
 *                      ntrdma_canary.c; canary_poke changes one byte
 *   link_off, link_on  disable / enable this port's NTB link (a link loss
 *                      both sides see, the devices staying: a cable pulled
 *                      and put back); work without a session
 *   link_deaf MS       for MS ms (at most 10000) our link work ignores the
 *                      peer: a slow peer, late to see a session end
 *                      (heartbeat, epoch and link checks all wait)
 *   pause MS [AT]      the next ntrdma_fault_pause() named AT (default
 *                      "export") sleeps MS ms (at most 10000): a race
 *                      window held open. The verbs face's names: export
 *                      (an MR export starts), accept (an rdma_cm accept
 *                      heard back from the other end), qp_export (the
 *                      peer's QP export or withdrawal, before it is
 *                      applied), vx_rx (a receive pass of the verbs
 *                      transport, before it takes anything); the Ethernet
 *                      face's: carrier (the carrier work saw the peer's
 *                      netdev up, under its lock); the engine's:
 *                      cmd_answer (a command's caller woke, before it
 *                      takes the answer)
 *   proto_error        this side ends the session as on a protocol error
 *                      of the peer (counted): an end at a known moment,
 *                      where a malformed index the peer's own traffic
 *                      soon overwrites may go unseen
 * The others fail with -ENOLINK without a session. The fuzzer leaves alone the
 * receive buffer descriptors in the peer's inbox: they name OUR memory
 * (buffers we posted), and a hostile peer corrupts only itself there.
 */

#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/io.h>
#include <linux/nospec.h>
#include <linux/prandom.h>
#include <linux/uaccess.h>

#include "ntrdma_priv.h"

/* The TQP a request names (a number the user wrote), or NULL. */
static struct ntrdma_tqp *fault_tqp(struct ntrdma_dev *ndev, unsigned int id)
{
	if (id >= NTRDMA_TQP_COUNT)
		return NULL;
	return ndev->tqp[array_index_nospec(id, NTRDMA_TQP_COUNT)];
}

/* A zero-length completion, published, in the peer's next slot. */
static int fault_cqe(struct ntrdma_dev *ndev, struct ntrdma_tqp *tqp,
		     struct ntrdma_inbox __iomem *pi)
{
	struct ntrdma_wire_tqp __iomem *pt = &pi->tqp[tqp->id];
	struct ntrdma_wire_cqe c = {};
	unsigned long flags;

	spin_lock_irqsave(&tqp->tx_lock, flags);
	c.seq = tqp->tx_published;
	ntrdma_peer_copy(ndev, &pt->cqe[ntrdma_ring_idx(c.seq, NTRDMA_TQP_RING)],
			 &c, sizeof(c));
	wmb(); /* the completion before its producer index */
	ntrdma_peer_w32(ndev, c.seq + 1, &pt->cq_prod);
	spin_unlock_irqrestore(&tqp->tx_lock, flags);
	return 0;
}

/*
 * Post up to @n past our cq_prod (what the peer published): descriptors
 * for the positions from rx_post on, each naming our last posted buffer.
 * Reads the owner's positions unserialized: the test runs no receives of
 * its own on @tqp meanwhile (the peer's copies are held on its channel).
 */
static int fault_post_prod(struct ntrdma_dev *ndev, struct ntrdma_tqp *tqp,
			   struct ntrdma_inbox __iomem *pi, u32 n)
{
	struct ntrdma_wire_tqp __iomem *pt = &pi->tqp[tqp->id];
	u32 post = READ_ONCE(tqp->rx_post);
	u32 prod = READ_ONCE(ndev->inbox->tqp[tqp->id].cq_prod) + n;
	struct ntrdma_wire_rxd d;

	if (n > 2 * NTRDMA_TQP_RING)
		return -EINVAL;
	memcpy_fromio(&d, &pt->rxd[ntrdma_ring_idx(post - 1, NTRDMA_TQP_RING)],
		      sizeof(d));
	if (d.seq != post - 1)
		return -EAGAIN;		/* nothing posted yet */
	for (; (s32)(prod - post) > 0; post++) {
		d.seq = post;
		ntrdma_peer_copy(ndev,
				 &pt->rxd[ntrdma_ring_idx(post, NTRDMA_TQP_RING)],
				 &d, sizeof(d));
	}
	wmb(); /* the descriptors before the producer index */
	ntrdma_peer_w32(ndev, prod, &pt->post_prod);
	return 0;
}

static void fault_ring_all(struct ntrdma_dev *ndev)
{
	int i;

	for (i = 0; i < NTRDMA_VDB_COUNT; i++)
		ntrdma_vdb_ring(ndev, i);
}

/* Whether the fuzzer may write the inbox word at byte offset @off. */
static bool fault_fuzz_ok(size_t off)
{
	size_t rxd0 = offsetof(struct ntrdma_inbox, tqp[0].rxd);
	size_t rxd_len = sizeof(((struct ntrdma_wire_tqp *)0)->rxd);
	size_t stride = sizeof(struct ntrdma_wire_tqp);

	/* magic, epoch, heartbeat: the session itself */
	if (off < offsetof(struct ntrdma_inbox, vdb))
		return false;
	return off < rxd0 || (off - rxd0) % stride >= rxd_len;
}

/*
 * A word to fuzz: half the time one of the ring indices and state words
 * (a TQP's first five, the command producers), else anywhere.
 */
static u32 fault_fuzz_word(struct rnd_state *rnd)
{
	u32 r = prandom_u32_state(rnd);
	u32 tqp0 = offsetof(struct ntrdma_inbox, tqp) / 4;

	if (r & 1)
		return prandom_u32_state(rnd) % (sizeof(struct ntrdma_inbox) / 4);
	r >>= 1;
	if (r % (NTRDMA_TQP_COUNT + 1) == NTRDMA_TQP_COUNT)
		return offsetof(struct ntrdma_inbox, cmd_prod) / 4 + (r & 1);
	return tqp0 + (r % (NTRDMA_TQP_COUNT + 1)) *
		sizeof(struct ntrdma_wire_tqp) / 4 + (r >> 8) % 5;
}

/* Random words at random 4-byte offsets of the peer's inbox. */
static int fault_fuzz(struct ntrdma_dev *ndev, struct ntrdma_inbox __iomem *pi,
		      u32 n, u64 seed)
{
	struct rnd_state rnd;
	u32 i, off;

	prandom_seed_state(&rnd, seed);
	for (i = 0; i < n; i++) {
		off = fault_fuzz_word(&rnd);
		if (fault_fuzz_ok(off * 4))
			ntrdma_peer_w32(ndev, prandom_u32_state(&rnd),
					(u32 __iomem *)pi + off);
	}
	fault_ring_all(ndev);
	return 0;
}

static const char *const fault_sites[NTRDMA_FAULT_SITES] = {
	[NTRDMA_FAULT_RX_ALLOC] = "rx_alloc",
	[NTRDMA_FAULT_DMA_PREP] = "dma_prep",
	[NTRDMA_FAULT_DMA_PREP_MID] = "dma_prep_mid",
};

/**
 * ntrdma_fault() - whether to fail this try at a fault site (test builds)
 * @ndev: the device
 * @site: where the caller is about to allocate or prepare something
 *
 * Return: true every Nth call once debugfs "fail SITE N" set N; the
 * caller then fails as if the allocation or preparation had.
 */
bool ntrdma_fault(struct ntrdma_dev *ndev, enum ntrdma_fault_site site)
{
	unsigned int every = READ_ONCE(ndev->fault_every[site]);

	if (!every || atomic_inc_return(&ndev->fault_tries[site]) % every)
		return false;
	atomic64_inc(&ndev->stats.faults_injected);
	return true;
}

/**
 * ntrdma_fault_deaf() - whether the link work ignores the peer now
 * @ndev: the device
 *
 * Return: true until the time debugfs "link_deaf MS" set has passed.
 */
bool ntrdma_fault_deaf(struct ntrdma_dev *ndev)
{
	unsigned long until = READ_ONCE(ndev->deaf_until);

	return until && time_before(jiffies, until);
}

/* The time "pause MS AT" armed for @at, disarmed; 0 if none. */
static unsigned int fault_pause_take(struct ntrdma_dev *ndev, const char *at)
{
	/* armed: pause_at was written before (fault_pause_set()) */
	unsigned int ms = smp_load_acquire(&ndev->pause_ms);

	if (!ms || strncmp(at, ndev->pause_at, sizeof(ndev->pause_at)))
		return 0;
	return cmpxchg(&ndev->pause_ms, ms, 0) == ms ? ms : 0;
}

/**
 * ntrdma_fault_pause() - sleep once, for the time debugfs "pause MS AT" set
 * @ndev: the device
 * @at: the name of this place, AT in the inject command
 *
 * Process context. A face calls it where a test needs a race window held
 * open (the verbs face: as an MR export starts, before its lock).
 */
void ntrdma_fault_pause(struct ntrdma_dev *ndev, const char *at)
{
	unsigned int ms = fault_pause_take(ndev, at);

	if (ms)
		msleep(ms);
}

/* "pause MS [AT]": the name first, then the time that arms it. */
static void fault_pause_set(struct ntrdma_dev *ndev, unsigned int ms,
			    const char *at)
{
	WRITE_ONCE(ndev->pause_ms, 0);
	strscpy(ndev->pause_at, at, sizeof(ndev->pause_at));
	/* the name before the time that arms it (fault_pause_take()) */
	smp_store_release(&ndev->pause_ms, min(ms, 10000U));
}

static int fault_set(struct ntrdma_dev *ndev, const char *name,
		     unsigned int every)
{
	int i;

	for (i = 0; i < NTRDMA_FAULT_SITES; i++) {
		if (strcmp(name, fault_sites[i]))
			continue;
		atomic_set(&ndev->fault_tries[i], 0);
		WRITE_ONCE(ndev->fault_every[i], every);
		return 0;
	}
	return -ENOENT;
}

/* The requests that name a TQP; -ENOENT when @buf is none of them. */
static int fault_run_tqp(struct ntrdma_dev *ndev,
			 struct ntrdma_inbox __iomem *pi, const char *buf)
{
	struct ntrdma_tqp *tqp;
	unsigned int id;
	u32 value;
	int rc;

	if (sscanf(buf, "rx_event %u %u", &id, &value) == 2) {
		/* no doorbell: the peer must not look before it sends */
		tqp = fault_tqp(ndev, id);
		if (!tqp)
			return -ENODEV;
		ntrdma_peer_w32(ndev, value, &pi->tqp[tqp->id].rx_event);
		return 0;
	}
	if (sscanf(buf, "cq_prod %u %u", &id, &value) == 2) {
		tqp = fault_tqp(ndev, id);
		if (!tqp)
			return -ENODEV;
		ntrdma_peer_w32(ndev, value, &pi->tqp[tqp->id].cq_prod);
	} else if (sscanf(buf, "post_prod %u %u", &id, &value) == 2) {
		tqp = fault_tqp(ndev, id);
		if (!tqp)
			return -ENODEV;
		rc = fault_post_prod(ndev, tqp, pi, value);
		if (rc)
			return rc;
	} else if (sscanf(buf, "cqe %u", &id) == 1) {
		tqp = fault_tqp(ndev, id);
		if (!tqp)
			return -ENODEV;
		fault_cqe(ndev, tqp, pi);
	} else {
		return -ENOENT;
	}
	fault_ring_all(ndev);
	return 0;
}

static int fault_run(struct ntrdma_dev *ndev, const char *buf)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(ndev->pinbox);
	char name[16];
	u64 seed;
	u32 n;
	int rc;

	if (sscanf(buf, "fail %15s %u", name, &n) == 2)
		return fault_set(ndev, name, n);
	if (sscanf(buf, "link_deaf %u", &n) == 1) {
		WRITE_ONCE(ndev->deaf_until,
			   jiffies + msecs_to_jiffies(min(n, 10000U)) ?: 1);
		return 0;
	}
	rc = sscanf(buf, "pause %u %15s", &n, name);
	if (rc >= 1) {
		fault_pause_set(ndev, n, rc == 2 ? name : "export");
		return 0;
	}
	if (!strcmp(buf, "link_off"))
		return ndev->link->ops->disable(ndev->link);
	if (!strcmp(buf, "link_on"))
		return ndev->link->ops->enable(ndev->link);
	rc = ntrdma_canary_run(ndev, buf);
	if (rc != -ENOENT)
		return rc;
	if (!ntrdma_link_is_up(ndev) || !pi)
		return -ENOLINK;
	if (!strcmp(buf, "proto_error")) {
		ntrdma_link_proto_error(ndev, "injected by the test hook");
		return 0;
	}
	if (sscanf(buf, "fuzz %u %llu", &n, &seed) == 2)
		return fault_fuzz(ndev, pi, min_t(u32, n, 1U << 20), seed);
	rc = fault_run_tqp(ndev, pi, buf);
	return rc == -ENOENT ? -EINVAL : rc;
}

static ssize_t fault_write(struct file *f, const char __user *ubuf,
			   size_t count, loff_t *ppos)
{
	char buf[64], *line;
	int rc;

	line = ntrdma_debugfs_line(ubuf, count, buf, sizeof(buf));
	if (IS_ERR(line))
		return PTR_ERR(line);
	rc = fault_run(f->private_data, line);
	return rc ? rc : count;
}

static const struct file_operations fault_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.write	= fault_write,
};

void ntrdma_fault_debugfs_add(struct ntrdma_dev *ndev)
{
	debugfs_create_file("inject", 0200, ndev->debugfs, ndev, &fault_fops);
}
