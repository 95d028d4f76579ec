// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: /sys/kernel/debug/ntrdma/<dev>/verbs, what the peer
 * holds of our memory. Reading shows
 *   cm_records N         rdma_cm connection records (every state)
 *   cm_pending N         ...of them, requests no listener answered yet
 *   rmr_entries N        the peer's MR exports we keep
 *   rmr_bytes N          their records and page lists
 *   rqp_entries N        the peer's QP exports we keep
 *
 * Test builds (CONFIG_NTRDMA_TEST_HOOKS) take requests that make this side
 * a peer flooding the other side, each blocking until every command was
 * answered (or the session ended):
 *   cm_req N PORT ADDR   N connection requests (CM_REQ) to IPv4 ADDR:PORT,
 *                        each with a connection id of its own
 *   mr_export N          N one-page MR exports, key indices 1..N, of a PD
 *                        no QP has (nothing is ever placed into them)
 * and reading then shows the answers of the last one:
 *   flood: sent=N ok=N refused=N failed=N last_rc=RC
 */

#include <linux/debugfs.h>
#include <linux/inet.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>

#include "ntrdma_ib.h"

#ifdef NTRDMA_TEST_HOOKS
static DEFINE_MUTEX(ib_flood_lock);	/* one flood at a time, its result */
static struct ntrdma_flood ib_flood;

/**
 * ntrdma_flood_count() - count one answer of a test flood
 * @f: the flood's tally
 * @rc: the command's answer
 * @refusal: the answer that says the peer refused it at its limit
 */
void ntrdma_flood_count(struct ntrdma_flood *f, int rc, int refusal)
{
	f->sent++;
	if (!rc)
		f->ok++;
	else if (rc == refusal)
		f->refused++;
	else
		f->failed++;
	if (rc)
		f->last_rc = rc;
}

static void ib_flood_show(struct seq_file *s)
{
	mutex_lock(&ib_flood_lock);
	seq_printf(s, "flood: sent=%u ok=%u refused=%u failed=%u last_rc=%d\n",
		   ib_flood.sent, ib_flood.ok, ib_flood.refused,
		   ib_flood.failed, ib_flood.last_rc);
	mutex_unlock(&ib_flood_lock);
}

static int ib_flood_run(struct ntrdma_ib *nib, const char *buf)
{
	char addr[16];
	u16 port;
	__be32 a;
	u32 n;
	int rc = -EINVAL;

	mutex_lock(&ib_flood_lock);
	memset(&ib_flood, 0, sizeof(ib_flood));
	if (sscanf(buf, "cm_req %u %hu %15s", &n, &port, addr) == 3) {
		if (in4_pton(addr, -1, (u8 *)&a, -1, NULL))
			rc = ntrdma_cm_test_flood(nib, n, a, htons(port),
						  &ib_flood);
	} else if (sscanf(buf, "mr_export %u", &n) == 1) {
		rc = ntrdma_export_test_flood(nib, n, &ib_flood);
	}
	mutex_unlock(&ib_flood_lock);
	return rc;
}

static ssize_t ib_debugfs_write(struct file *f, const char __user *ubuf,
				size_t count, loff_t *ppos)
{
	struct ntrdma_ib *nib = file_inode(f)->i_private;
	char buf[64], *line;
	int rc;

	line = ntrdma_debugfs_line(ubuf, count, buf, sizeof(buf));
	if (IS_ERR(line))
		return PTR_ERR(line);
	rc = ib_flood_run(nib, line);
	return rc ? rc : count;
}

#define IB_DEBUGFS_MODE	0600
#else
static void ib_flood_show(struct seq_file *s) { }
#define ib_debugfs_write	NULL
#define IB_DEBUGFS_MODE	0400
#endif

static int ib_debugfs_show(struct seq_file *s, void *unused)
{
	struct ntrdma_ib *nib = s->private;

	ntrdma_cm_show(s, nib);
	ntrdma_rmr_show(s, nib);
	ib_flood_show(s);
	return 0;
}

static int ib_debugfs_open(struct inode *inode, struct file *f)
{
	return single_open(f, ib_debugfs_show, inode->i_private);
}

static const struct file_operations ib_debugfs_fops = {
	.owner		= THIS_MODULE,
	.open		= ib_debugfs_open,
	.read		= seq_read,
	.write		= ib_debugfs_write,
	.llseek		= seq_lseek,
	.release	= single_release,
};

/**
 * ntrdma_ib_debugfs() - the verbs face's debugfs file
 * @priv: the verbs device (the face's private data)
 * @dir: the device's debugfs folder (the engine removes it)
 */
void ntrdma_ib_debugfs(void *priv, struct dentry *dir)
{
	debugfs_create_file("verbs", IB_DEBUGFS_MODE, dir, priv,
			    &ib_debugfs_fops);
}
