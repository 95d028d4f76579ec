/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA engine: one ntrdma device per NTB device, shared by the Ethernet and
 * verbs faces. Internal API between the engine files and the faces.
 */
#ifndef NTRDMA_H
#define NTRDMA_H

#include <linux/atomic.h>
#include <linux/mutex.h>
#include <linux/ntb.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "ntrdma_wire.h"

struct ntrdma_dev;
struct ntrdma_net;

/* A virtual doorbell handler: runs in hard interrupt context. */
typedef void (*ntrdma_vdb_fn)(struct ntrdma_dev *ndev, void *ctx);

struct ntrdma_vdb_slot {
	ntrdma_vdb_fn fn;
	void *ctx;
	u32 seen;
};

enum ntrdma_link_state {
	NTRDMA_LINK_DOWN = 0,	/* no hardware link or no handshake */
	NTRDMA_LINK_UP,		/* handshake done, heartbeat alive */
};

struct ntrdma_stats {
	atomic64_t link_up_events;
	atomic64_t link_down_events;
	atomic64_t hb_timeouts;
	atomic64_t proto_errors;
	atomic64_t vdb_rings;
	atomic64_t vdb_events;
};

struct ntrdma_dev {
	struct ntb_dev *ntb;
	struct device *dma_dev;		/* maps buffers the peer writes */
	int index;			/* ntrdma%d */
	char name[16];

	/* flat window onto the peer's memory */
	int flat_mw;
	phys_addr_t flat_phys;
	resource_size_t flat_size;
	void __iomem *flat;
	bool flat_trans;		/* inbound translation set */

	/* our inbox (written by the peer) */
	struct ntrdma_inbox *inbox;
	dma_addr_t inbox_dma;
	size_t inbox_size;

	/* the peer's inbox, through the flat window */
	struct ntrdma_inbox __iomem *pinbox;

	/* link */
	struct mutex link_lock;		/* state transitions */
	enum ntrdma_link_state state;
	bool hw_up;
	u32 epoch;			/* ours, this session */
	u32 peer_epoch;			/* accepted peer session, 0 if none */
	u32 hb_seq;			/* our heartbeat counter */
	u32 hb_seen;			/* last peer heartbeat seen */
	unsigned long hb_seen_at;	/* jiffies */
	struct delayed_work link_work;
	struct workqueue_struct *wq;
	bool stopping;

	/* virtual doorbells */
	spinlock_t vdb_lock;		/* the slot table */
	struct ntrdma_vdb_slot vdb[NTRDMA_VDB_COUNT];
	u32 vdb_out[NTRDMA_VDB_COUNT];	/* what we last wrote to the peer */
	spinlock_t vdb_out_lock;	/* vdb_out and its ordering */

	struct ntrdma_stats stats;
	struct dentry *debugfs;

	/* faces */
	struct ntrdma_net *net;
};

/* link.c */
int ntrdma_link_init(struct ntrdma_dev *ndev);
void ntrdma_link_start(struct ntrdma_dev *ndev);
void ntrdma_link_stop(struct ntrdma_dev *ndev);
void ntrdma_link_fini(struct ntrdma_dev *ndev);
void ntrdma_link_kick(struct ntrdma_dev *ndev);
void ntrdma_link_proto_error(struct ntrdma_dev *ndev, const char *what);
bool ntrdma_link_is_up(struct ntrdma_dev *ndev);
extern unsigned int ntrdma_heartbeat_ms;
extern unsigned int ntrdma_heartbeat_timeout_ms;

/* vdb.c */
void ntrdma_vdb_init(struct ntrdma_dev *ndev);
int ntrdma_vdb_register(struct ntrdma_dev *ndev, int idx, ntrdma_vdb_fn fn,
			void *ctx);
void ntrdma_vdb_unregister(struct ntrdma_dev *ndev, int idx);
void ntrdma_vdb_ring(struct ntrdma_dev *ndev, int idx);
void ntrdma_vdb_event(struct ntrdma_dev *ndev);
void ntrdma_vdb_reset(struct ntrdma_dev *ndev);

/* debugfs.c */
void ntrdma_debugfs_init(void);
void ntrdma_debugfs_exit(void);
void ntrdma_debugfs_add(struct ntrdma_dev *ndev);
void ntrdma_debugfs_del(struct ntrdma_dev *ndev);

/* net face (net/ntrdma_net.c) */
int ntrdma_net_add(struct ntrdma_dev *ndev);
void ntrdma_net_del(struct ntrdma_dev *ndev);
void ntrdma_net_link_up(struct ntrdma_dev *ndev);
void ntrdma_net_link_down(struct ntrdma_dev *ndev);

#endif /* NTRDMA_H */
