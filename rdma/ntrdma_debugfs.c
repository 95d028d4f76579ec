// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* /sys/kernel/debug/ntrdma/<dev>/info: link state and engine counters. */

#include <linux/debugfs.h>
#include <linux/jiffies.h>
#include <linux/seq_file.h>

#include "ntrdma.h"

static struct dentry *ntrdma_debugfs_root;

static int ntrdma_info_show(struct seq_file *s, void *unused)
{
	struct ntrdma_dev *ndev = s->private;
	struct ntrdma_stats *st = &ndev->stats;

	seq_printf(s, "link: %s\n", ntrdma_link_is_up(ndev) ? "up" : "down");
	seq_printf(s, "ntb_link: %s\n", READ_ONCE(ndev->hw_up) ? "up" : "down");
	seq_printf(s, "epoch: %08x\npeer_epoch: %08x\n", READ_ONCE(ndev->epoch),
		   READ_ONCE(ndev->peer_epoch));
	seq_printf(s, "flat_mw: %d\nflat_size: %pa\n", ndev->flat_mw,
		   &ndev->flat_size);
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
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ntrdma_info);

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
	debugfs_create_file("info", 0444, ndev->debugfs, ndev,
			    &ntrdma_info_fops);
}

void ntrdma_debugfs_del(struct ntrdma_dev *ndev)
{
	debugfs_remove_recursive(ndev->debugfs);
	ndev->debugfs = NULL;
}
