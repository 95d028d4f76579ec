// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * /sys/kernel/debug/ntrdma/<dev>/info: link state and engine counters, then
 * the faces' own lines (struct ntrdma_face's show).
 * /sys/kernel/debug/ntrdma/<dev>/cmd: command channel diagnostics. Writing
 * "echo TEXT" or "delay MS [TIMEOUT_MS]" sends that request to the peer and
 * blocks until it is answered, fails or times out; reading shows the
 * outcomes of the last NTRDMA_CMD_LOG, oldest first, one per line:
 * "REQUEST: rc=N usecs=T data=TEXT".
 * Each face may add files of its own to the folder (struct ntrdma_face's
 * debugfs callback).
 */

#include <linux/debugfs.h>
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>

#include <linux/dmaengine.h>

#include "ntrdma_priv.h"

static struct dentry *ntrdma_debugfs_root;

static int ntrdma_info_show(struct seq_file *s, void *unused)
{
	struct ntrdma_dev *ndev = s->private;
	const struct ntrdma_link_ops *ops = ndev->link->ops;
	struct ntrdma_stats *st = &ndev->stats;

	seq_printf(s, "%s: %s\n", ops->kind, dev_name(ndev->link->parent));
	seq_printf(s, "link: %s\n", ntrdma_link_is_up(ndev) ? "up" : "down");
	seq_printf(s, "%s_link: %s\n", ops->kind,
		   READ_ONCE(ndev->hw_up) ? "up" : "down");
	seq_printf(s, "epoch: %08x\npeer_epoch: %08x\n", READ_ONCE(ndev->epoch),
		   READ_ONCE(ndev->peer_epoch));
	if (ops->show)
		ops->show(ndev->link, s);
	seq_printf(s, "flat_size: %pa\n", &ndev->link->map_size);
	seq_printf(s, "flat_refused: %d\n", READ_ONCE(ndev->flat_refused));
	seq_printf(s, "mode: %s\nwindow_size: %zu\n",
		   !READ_ONCE(ndev->mode_chosen) ? "none" :
		   ntrdma_dev_windowed(ndev) ? "windowed" : "flat",
		   ntrdma_dev_windowed(ndev) ? ndev->win.size : 0);
	seq_printf(s, "heartbeat_ms: %u\nheartbeat_timeout_ms: %u\n",
		   ntrdma_heartbeat_ms, ntrdma_heartbeat_timeout_ms);
	seq_printf(s, "link_up_events: %lld\n",
		   atomic64_read(&st->link_up_events));
	seq_printf(s, "link_down_events: %lld\n",
		   atomic64_read(&st->link_down_events));
	seq_printf(s, "hb_timeouts: %lld\n", atomic64_read(&st->hb_timeouts));
	seq_printf(s, "proto_errors: %lld\n", atomic64_read(&st->proto_errors));
	seq_printf(s, "vdb_rings: %lld\n", atomic64_read(&st->vdb_rings));
	seq_printf(s, "vdb_events: %lld\n", atomic64_read(&st->vdb_events));
	seq_printf(s, "sweep_kicks: %lld\n", atomic64_read(&st->sweep_kicks));
	seq_printf(s, "cmd_sent: %lld\n", atomic64_read(&st->cmd_sent));
	seq_printf(s, "cmd_handled: %lld\n", atomic64_read(&st->cmd_handled));
	seq_printf(s, "cmd_timeouts: %lld\n", atomic64_read(&st->cmd_timeouts));
	seq_printf(s, "faults_injected: %lld\n",
		   atomic64_read(&st->faults_injected));
	ntrdma_canary_show(s, ndev);
	seq_printf(s, "copy: %s\n",
		   ndev->dma_chan ? dma_chan_name(ndev->dma_chan) : "cpu");
	ntrdma_faces_show(ndev, s);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ntrdma_info);

/**
 * ntrdma_debugfs_line() - a command line written to a debugfs file
 * @ubuf: what the user wrote
 * @count: its length
 * @buf: where to copy it
 * @len: the size of @buf
 *
 * Process context (a debugfs write).
 *
 * Return: the line in @buf, trimmed; ERR_PTR(-EINVAL) when it does not
 * fit, ERR_PTR(-EFAULT) when it cannot be read.
 */
char *ntrdma_debugfs_line(const char __user *ubuf, size_t count, char *buf,
			  size_t len)
{
	if (count >= len)
		return ERR_PTR(-EINVAL);
	if (copy_from_user(buf, ubuf, count))
		return ERR_PTR(-EFAULT);
	buf[count] = 0;
	return strim(buf);
}

static ssize_t ntrdma_cmd_write(struct file *f, const char __user *ubuf,
				size_t count, loff_t *ppos)
{
	struct ntrdma_dev *ndev = f->private_data;
	char buf[128], rsp[NTRDMA_RSP_DATA + 1] = "";
	unsigned int ms, timeout = NTRDMA_CMD_TIMEOUT_MS;
	u16 rlen = 0;
	ktime_t t0;
	int rc, n;
	char *line;
	u32 arg;

	line = ntrdma_debugfs_line(ubuf, count, buf, sizeof(buf));
	if (IS_ERR(line))
		return PTR_ERR(line);
	t0 = ktime_get();
	if (!strncmp(line, "echo ", 5)) {
		rc = ntrdma_cmd_call(ndev, NTRDMA_CMD_ECHO, line + 5,
				     strlen(line + 5), rsp, NTRDMA_RSP_DATA,
				     &rlen, timeout);
	} else {
		n = sscanf(line, "delay %u %u", &ms, &timeout);
		if (n < 1)
			return -EINVAL;
		arg = ms;
		rc = ntrdma_cmd_call(ndev, NTRDMA_CMD_DELAY, &arg, sizeof(arg),
				     NULL, 0, NULL, timeout);
	}
	rsp[rlen] = 0;
	mutex_lock(&ndev->dbg_lock);
	snprintf(ndev->cmd_log[ndev->cmd_logged++ % NTRDMA_CMD_LOG],
		 NTRDMA_CMD_LOG_LINE, "%s: rc=%d usecs=%lld data=%s", line, rc,
		 ktime_us_delta(ktime_get(), t0), rsp);
	mutex_unlock(&ndev->dbg_lock);
	return count;
}

static int ntrdma_cmd_show(struct seq_file *s, void *unused)
{
	struct ntrdma_dev *ndev = s->private;
	unsigned int i;

	mutex_lock(&ndev->dbg_lock);
	i = ndev->cmd_logged - min_t(unsigned int, ndev->cmd_logged,
				     NTRDMA_CMD_LOG);
	for (; i < ndev->cmd_logged; i++)
		seq_printf(s, "%s\n", ndev->cmd_log[i % NTRDMA_CMD_LOG]);
	mutex_unlock(&ndev->dbg_lock);
	return 0;
}

static int ntrdma_cmd_open(struct inode *inode, struct file *f)
{
	if (f->f_mode & FMODE_WRITE) {
		f->private_data = inode->i_private;
		return 0;
	}
	return single_open(f, ntrdma_cmd_show, inode->i_private);
}

static int ntrdma_cmd_release(struct inode *inode, struct file *f)
{
	if (f->f_mode & FMODE_WRITE)
		return 0;
	return single_release(inode, f);
}

static const struct file_operations ntrdma_cmd_fops = {
	.owner		= THIS_MODULE,
	.open		= ntrdma_cmd_open,
	.read		= seq_read,
	.write		= ntrdma_cmd_write,
	.llseek		= seq_lseek,
	.release	= ntrdma_cmd_release,
};

void ntrdma_debugfs_init(void)
{
	ntrdma_debugfs_root = debugfs_create_dir("ntrdma", NULL);
}

void ntrdma_debugfs_exit(void)
{
	debugfs_remove_recursive(ntrdma_debugfs_root);
}

void ntrdma_debugfs_add(struct ntrdma_dev *ndev)
{
	ndev->debugfs = debugfs_create_dir(ndev->name, ntrdma_debugfs_root);
	mutex_init(&ndev->dbg_lock);
	debugfs_create_file("info", 0444, ndev->debugfs, ndev,
			    &ntrdma_info_fops);
	debugfs_create_file("cmd", 0600, ndev->debugfs, ndev,
			    &ntrdma_cmd_fops);
	ntrdma_fault_debugfs_add(ndev);
	ntrdma_faces_debugfs(ndev, ndev->debugfs);
}

void ntrdma_debugfs_del(struct ntrdma_dev *ndev)
{
	debugfs_remove_recursive(ndev->debugfs);
	ndev->debugfs = NULL;
	ntrdma_canary_fini(ndev);
}
