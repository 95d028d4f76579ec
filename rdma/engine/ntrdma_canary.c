// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA engine: canaries for the selftests (CONFIG_NTRDMA_TEST_HOOKS; never
 * in a module built for use). They show that nothing, however malformed the
 * peer's messages, makes a byte land outside the buffers this side posted:
 *
 * - guard bytes: a face fills the bytes of a receive buffer's allocation
 *   that the peer may not write (ntrdma_canary_fill(), before posting) and
 *   checks them when the buffer comes back (ntrdma_canary_check());
 * - canary pages: pages no one posted or registered, filled when armed and
 *   scanned whenever debugfs info is read.
 *
 * Armed by debugfs inject "canary N" (N pages; 0 disarms and frees them);
 * "canary_poke" changes one canary byte, to show that a change is seen.
 * info reports canary_checks (guard checks done), canary_guard_bytes and
 * canary_page_bytes (bytes found changed).
 */

#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "ntrdma_priv.h"

#define NTRDMA_CANARY_BYTE	0x5c
#define NTRDMA_CANARY_MAX_PAGES	4096

/* Bytes of @p[0..@len) that are not the canary byte. */
static u64 canary_changed(const u8 *p, size_t len)
{
	const u8 *end = p + len;
	u64 n = 0;

	while ((p = memchr_inv(p, NTRDMA_CANARY_BYTE, end - p))) {
		n++;
		p++;
	}
	return n;
}

/**
 * ntrdma_canary_fill() - fill bytes the peer may not write, if armed
 * @ndev: the device
 * @p: the first such byte
 * @len: how many
 *
 * Return: true when filled: the caller checks them later.
 */
bool ntrdma_canary_fill(struct ntrdma_dev *ndev, void *p, size_t len)
{
	if (!READ_ONCE(ndev->canary_on))
		return false;
	memset(p, NTRDMA_CANARY_BYTE, len);
	return true;
}

/**
 * ntrdma_canary_check() - count changed guard bytes
 * @ndev: the device
 * @p: bytes that ntrdma_canary_fill() filled
 * @len: how many
 *
 * A change is counted (info's canary_guard_bytes) and logged, ratelimited.
 */
void ntrdma_canary_check(struct ntrdma_dev *ndev, const void *p, size_t len)
{
	u64 n;

	atomic64_inc(&ndev->stats.canary_checks);
	n = canary_changed(p, len);
	if (!n)
		return;
	atomic64_add(n, &ndev->stats.canary_guard_bytes);
	dev_err_ratelimited(ndev->link->parent, "%s: %llu guard bytes next to a posted buffer changed\n",
			    ndev->name, n);
}

static void canary_free_pages(struct ntrdma_dev *ndev)
{
	while (ndev->canary_npages)
		__free_page(ndev->canary_pages[--ndev->canary_npages]);
	kfree(ndev->canary_pages);
	ndev->canary_pages = NULL;
}

/* Arm with @n canary pages (0: disarm). Under dbg_lock. */
static int canary_arm(struct ntrdma_dev *ndev, unsigned int n)
{
	struct page *page;

	lockdep_assert_held(&ndev->dbg_lock);
	WRITE_ONCE(ndev->canary_on, false);
	canary_free_pages(ndev);
	if (!n)
		return 0;
	n = min_t(unsigned int, n, NTRDMA_CANARY_MAX_PAGES);
	ndev->canary_pages = kcalloc(n, sizeof(*ndev->canary_pages),
				     GFP_KERNEL);
	if (!ndev->canary_pages)
		return -ENOMEM;
	while (ndev->canary_npages < n) {
		page = alloc_page(GFP_KERNEL);
		if (!page) {
			canary_free_pages(ndev);
			return -ENOMEM;
		}
		memset(page_address(page), NTRDMA_CANARY_BYTE, PAGE_SIZE);
		ndev->canary_pages[ndev->canary_npages++] = page;
	}
	WRITE_ONCE(ndev->canary_on, true);
	return 0;
}

/**
 * ntrdma_canary_run() - debugfs inject's canary commands
 * @ndev: the device
 * @buf: the command
 *
 * Return: 0, -ENOENT when @buf is no canary command, or an error.
 */
int ntrdma_canary_run(struct ntrdma_dev *ndev, const char *buf)
{
	unsigned int n;
	int rc = -ENOENT;

	mutex_lock(&ndev->dbg_lock);
	if (sscanf(buf, "canary %u", &n) == 1) {
		rc = canary_arm(ndev, n);
	} else if (!strcmp(buf, "canary_poke")) {
		rc = ndev->canary_npages ? 0 : -ENODATA;
		if (!rc)
			*(u8 *)page_address(ndev->canary_pages[0]) ^= 0xff;
	}
	mutex_unlock(&ndev->dbg_lock);
	return rc;
}

/**
 * ntrdma_canary_show() - the canary lines of debugfs info
 * @s: the info file
 * @ndev: the device
 *
 * Scans the canary pages now.
 */
void ntrdma_canary_show(struct seq_file *s, struct ntrdma_dev *ndev)
{
	u64 changed = 0;
	unsigned int i;

	mutex_lock(&ndev->dbg_lock);
	for (i = 0; i < ndev->canary_npages; i++)
		changed += canary_changed(page_address(ndev->canary_pages[i]),
					  PAGE_SIZE);
	seq_printf(s, "canary_pages: %u\ncanary_page_bytes: %llu\n",
		   ndev->canary_npages, changed);
	mutex_unlock(&ndev->dbg_lock);
	seq_printf(s, "canary_checks: %lld\ncanary_guard_bytes: %lld\n",
		   atomic64_read(&ndev->stats.canary_checks),
		   atomic64_read(&ndev->stats.canary_guard_bytes));
}

/**
 * ntrdma_canary_fini() - free the canary pages (device removal)
 * @ndev: the device
 */
void ntrdma_canary_fini(struct ntrdma_dev *ndev)
{
	mutex_lock(&ndev->dbg_lock);
	WRITE_ONCE(ndev->canary_on, false);
	canary_free_pages(ndev);
	mutex_unlock(&ndev->dbg_lock);
}
