/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA engine, private: the device, its link state, doorbell table,
 * command ring and TQPs, and the calls between the engine's own files.
 * Faces include ntrdma_engine.h only.
 *
 * Lock order (outermost first), the one place it is written:
 *   link_lock (mutex: session start and end; the faces' link_up and
 *             link_down callbacks run under it)
 *     -> the faces' own locks -> cmd.lock
 *   a TQP's tx_lock -> vdb_out_lock (a send publishes and rings)
 *   vdb_lock -> what a doorbell handler or a TQP's rx, tx_space and
 *               peer_state callbacks take (hard irq; they only schedule)
 * Every spinlock of the engine is taken with interrupts off.
 */
#ifndef NTRDMA_PRIV_H
#define NTRDMA_PRIV_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/dmaengine.h>
#include <linux/skbuff.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/mutex.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/types.h>
#include <linux/workqueue.h>

#include "ntrdma_engine.h"
#include "ntrdma_link_ops.h"

struct dma_chan;

/* A virtual doorbell handler: runs in hard interrupt context. */
typedef void (*ntrdma_vdb_fn)(struct ntrdma_dev *ndev, void *ctx);
/* Whether work waits that no doorbell announced (the heartbeat sweep). */
typedef bool (*ntrdma_vdb_watch_fn)(struct ntrdma_dev *ndev, void *ctx);

struct ntrdma_vdb_slot {
	ntrdma_vdb_fn fn;
	ntrdma_vdb_watch_fn watch;	/* optional */
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
	atomic64_t sweep_kicks;		/* handlers the heartbeat sweep ran */
	atomic64_t cmd_sent;
	atomic64_t cmd_handled;
	atomic64_t cmd_timeouts;
	atomic64_t faults_injected;	/* test builds only */
	atomic64_t canary_checks;	/* test builds only */
	atomic64_t canary_guard_bytes;	/* test builds only */
};

/* ---- command channel (cmd.c) ---- */

#define NTRDMA_CMD_DELAY_MAX_MS	5000

/* debugfs cmd: the outcomes it shows, the room for one */
#define NTRDMA_CMD_LOG		16
#define NTRDMA_CMD_LOG_LINE	224

struct ntrdma_cmd_waiter {
	struct completion done;
	int status;
	void *rsp;
	u16 rsp_cap;
	u16 rsp_len;
	bool busy;		/* request sent, no answer yet */
	bool held;		/* its caller waits, or has not taken the outcome */
};

struct ntrdma_cmd {
	spinlock_t lock;	/* positions, waiters, handler table */
	bool active;		/* a session runs */
	u32 req_pos;		/* our next request */
	u32 rsp_cons;		/* the answer we expect next */
	u32 req_cons;		/* the peer's next request to handle */
	wait_queue_head_t credit_wait;
	struct ntrdma_cmd_waiter w[NTRDMA_CMD_RING];
	ntrdma_cmd_fn fn[NTRDMA_CMD_OPS];
	void *fn_ctx[NTRDMA_CMD_OPS];
	struct work_struct work;
	struct workqueue_struct *wq;
};

/* ---- transport queue pairs (tqp.c) ---- */

/* Source pages of one message or placement, mapped for the channel. */
struct ntrdma_tqp_maps {
	int n;
	dma_addr_t addr[NTRDMA_TQP_MAX_SGE];
	u32 len[NTRDMA_TQP_MAX_SGE];
};

struct ntrdma_tqp_slot {
	struct ntrdma_tqp *tqp;
	void *cookie;
	u32 len;
	bool abandoned;		/* reported at stop; its DMA still runs */
	struct ntrdma_tqp_maps maps;
};

/*
 * Copies staged for the channel at once, per TQP (ntrdma_xfer.c): room for
 * a few dozen messages of NTRDMA_TQP_MAX_SGE pieces; a sender that finds
 * none waits for a completion, as for a full channel.
 */
#define NTRDMA_TQP_XFER_RING	1024

/* One staged copy. */
struct ntrdma_tqp_xfer {
	dma_addr_t dst;
	dma_addr_t src;
	u32 len;
	bool first;		/* of its message or placement */
	dma_async_tx_callback_result cb;
	void *param;
};

/* Placements on the channel at once, per TQP (they complete in order). */
#define NTRDMA_TQP_PLC_RING	64

/* A placement on the DMA channel (ntrdma_place.c). */
struct ntrdma_tqp_plc {
	struct ntrdma_tqp *tqp;
	void *cookie;		/* for send_done; NULL once reported */
	u32 len;
	u16 pending;		/* its copies on the channel, not yet done */
	bool abandoned;		/* reported at stop; its DMA still runs */
	int status;
	struct ntrdma_tqp_maps maps;
};

struct ntrdma_tqp {
	struct ntrdma_dev *ndev;
	int id;
	const struct ntrdma_tqp_ops *ops;
	void *ctx;
	bool active;

	/* receive (the owner serializes these) */
	u32 rx_post, rx_cons, rx_published;

	/* send */
	spinlock_t tx_lock;	/* send positions and publication */
	u32 tx_pos;		/* next peer buffer to fill */
	u32 tx_done;		/* copies finished up to here */
	u32 tx_published;	/* cq_prod last written to the peer */
	bool dma_wake;		/* a sender waits for a DMA completion */
	bool tx_waiting;	/* a sender asked for TXWAKE */
	bool rx_armed;		/* the receiver asked for RX and sleeps */
	u64 doorbells;
	struct ntrdma_tqp_plc *plc;	/* placements on the channel */
	u32 plc_pos;		/* placements queued (under tx_lock) */
	u32 plc_done;		/* ...and completed, in order */
	struct ntrdma_tqp_xfer *xfer;	/* copies staged for the channel */
	u32 xfer_prod;		/* staged (under tx_lock) */
	u32 xfer_cons;		/* handed over (by the flusher) */
	unsigned long xfer_busy;	/* a flusher runs */
	dma_cookie_t xfer_last;		/* handed over last (the flusher) */
	unsigned long xfer_refused_at;	/* jiffies | 1: refusals since */
	struct delayed_work xfer_work;	/* a flush where the caller can't */
	struct ntrdma_tqp_slot *slot;
	struct ntrdma_wire_cqe *stage;	/* completions the DMA copies */
	dma_addr_t stage_dma;
	atomic_t dma_inflight;		/* changed under tx_lock (destroy) */
	wait_queue_head_t dma_wait;
	struct device *dma_dev;		/* the channel's, for late unmaps */
	u32 abandoned;		/* copies a stop gave up on (tx_lock) */
	bool orphan;		/* destroyed, kept for them: no ndev, ops */
};

/* Windowed mode: the one buffer our inbound window translates to. */
struct ntrdma_window {
	void *va;
	dma_addr_t dma;
	size_t size;
	struct gen_pool *pool;		/* its pieces, by window offset */
};

struct ntrdma_rxmem_ops;

struct ntrdma_dev {
	struct ntrdma_link *link;	/* its ops, the window onto the peer */
	bool forward;			/* the link forwards window stores */
	int index;			/* ntrdma%d */
	char name[16];

	/* the link's window onto the peer's memory */
	bool flat_trans;		/* inbound translation set */
	bool flat_refused;		/* the NTB refused translation 0 */

	/* what the peer may write of ours, flat or windowed (ntrdma_rxmem.c) */
	const struct ntrdma_rxmem_ops *rxmem;
	bool mode_chosen;		/* at the first NTB link-up */
	u64 peer_reach;			/* of the peer's memory: 0 windowed */
	struct ntrdma_window win;

	/* our inbox (written by the peer) */
	struct ntrdma_inbox *inbox;
	dma_addr_t inbox_dma;		/* what the peer is told */
	size_t inbox_size;
	struct ntrdma_inbox *boot_inbox; /* flat-mode inbox from probe */
	dma_addr_t boot_inbox_dma;

	/* the peer's inbox, through the link's window */
	struct ntrdma_inbox __iomem *pinbox;
	u64 pinbox_off;			/* its offset in the window */

	/* copies into the window: a DMA_MEMCPY channel, or the CPU */
	struct dma_chan *dma_chan;
	dma_addr_t flat_dma;		/* the flat window, for the channel */

	/* link */
	struct mutex link_lock;		/* state transitions */
	enum ntrdma_link_state state;
	bool hw_up;
	u32 epoch;			/* ours, this session */
	u32 peer_epoch;			/* accepted peer session, 0 if none */
	u32 session;			/* sessions up so far (1, 2, ...) */
	unsigned long ended_at;		/* jiffies: the last session's end */
	u32 hb_seq;			/* our heartbeat counter */
	u32 hb_seen;			/* last peer heartbeat seen */
	unsigned long hb_seen_at;	/* jiffies */
	unsigned int hb_misses;		/* checks in a row without a beat */
	struct delayed_work link_work;
	struct timer_list hb_timer;
	struct workqueue_struct *wq;
	wait_queue_head_t ctrl_wait;	/* control doorbells and link events */
	bool stopping;
	atomic_t proto_fault;		/* a face saw a malformed message */
	bool peer_quiet;		/* unload: the peer no longer writes */
	atomic_t copies_abandoned;	/* of every TQP: no session until 0 */

	/* virtual doorbells */
	spinlock_t vdb_lock;		/* the slot table */
	struct ntrdma_vdb_slot vdb[NTRDMA_VDB_COUNT];
	u32 vdb_out[NTRDMA_VDB_COUNT];	/* what we last wrote to the peer */
	spinlock_t vdb_out_lock;	/* vdb_out and its ordering */

	struct ntrdma_cmd cmd;
	struct ntrdma_tqp *tqp[NTRDMA_TQP_COUNT];

	struct ntrdma_stats stats;
	/* fault injection (test builds): fail every Nth try at a site */
	unsigned int fault_every[NTRDMA_FAULT_SITES];
	atomic_t fault_tries[NTRDMA_FAULT_SITES];
	unsigned long deaf_until;	/* jiffies: the link work ignores the peer */
	unsigned int pause_ms;		/* the next ntrdma_fault_pause() sleeps */
	char pause_at[16];		/* ...of this name */
	/* canaries (test builds): armed, and the pages (under dbg_lock) */
	bool canary_on;
	struct page **canary_pages;
	unsigned int canary_npages;
	struct dentry *debugfs;
	struct mutex dbg_lock;		/* cmd_log, cmd_logged */
	char cmd_log[NTRDMA_CMD_LOG][NTRDMA_CMD_LOG_LINE];
	unsigned int cmd_logged;	/* outcomes so far */

	/* faces: what each face's add returned, and the netdev one of them
	 * published for the others (read without a lock: it changes only
	 * while the faces after its publisher are not added)
	 */
	void *face_priv[NTRDMA_FACES_MAX];
	struct net_device *netdev;
};

/*
 * Stores into the peer through the link's window. A link that forwards
 * (ntrdma_link_ops.h) carries each store to the peer after it lands in the
 * window, in the order of the calls.
 */
void ntrdma_peer_forward(struct ntrdma_dev *ndev, const void __iomem *p,
			 size_t len);

static inline void ntrdma_peer_stored(struct ntrdma_dev *ndev,
				      const void __iomem *p, size_t len)
{
	if (unlikely(ndev->forward))
		ntrdma_peer_forward(ndev, p, len);
}

static inline void ntrdma_peer_w32(struct ntrdma_dev *ndev, u32 v,
				   u32 __iomem *p)
{
	iowrite32(v, p);
	ntrdma_peer_stored(ndev, p, sizeof(v));
}

static inline void ntrdma_peer_copy(struct ntrdma_dev *ndev, void __iomem *dst,
				    const void *src, size_t len)
{
	memcpy_toio(dst, src, len);
	ntrdma_peer_stored(ndev, dst, len);
}

static inline struct ntrdma_wire_tqp __iomem *tqp_peer(struct ntrdma_tqp *tqp)
{
	struct ntrdma_inbox __iomem *pi = READ_ONCE(tqp->ndev->pinbox);

	return pi ? &pi->tqp[tqp->id] : NULL;
}

/* Copies of @tqp still on the channel: a CPU copy now would pass them. */
static inline bool tqp_copies_pending(struct ntrdma_tqp *tqp)
{
	lockdep_assert_held(&tqp->tx_lock);
	return tqp->tx_done != tqp->tx_pos || tqp->plc_done != tqp->plc_pos;
}

/* tqp.c: the channel's mappings of source pages */
int ntrdma_tqp_map(struct ntrdma_tqp *tqp, struct ntrdma_tqp_maps *m,
		   struct page *page, u32 off, u32 len, dma_addr_t *addr);
void ntrdma_tqp_unmap(struct ntrdma_tqp *tqp, struct ntrdma_tqp_maps *m);
void ntrdma_tqp_abandon_one(struct ntrdma_tqp *tqp);
void ntrdma_tqp_abandoned_done(struct ntrdma_tqp *tqp);
void ntrdma_tqp_copy_retired(struct ntrdma_tqp *tqp, bool wake);

/* place.c */
int ntrdma_place_init(struct ntrdma_tqp *tqp);
void ntrdma_place_start(struct ntrdma_tqp *tqp);
void ntrdma_place_abandon(struct ntrdma_tqp *tqp);

/* xfer.c: copies staged under tx_lock, handed to the channel after it */
int ntrdma_xfer_init(struct ntrdma_tqp *tqp);
void ntrdma_xfer_fini(struct ntrdma_tqp *tqp);
u32 ntrdma_xfer_room(struct ntrdma_tqp *tqp);
void ntrdma_xfer_stage(struct ntrdma_tqp *tqp, dma_addr_t dst, dma_addr_t src,
		       u32 len, bool first, dma_async_tx_callback_result cb,
		       void *param);
void ntrdma_xfer_flush(struct ntrdma_tqp *tqp);
void ntrdma_xfer_abandon(struct ntrdma_tqp *tqp);

/* link.c */
int ntrdma_link_init(struct ntrdma_dev *ndev);
void ntrdma_link_start(struct ntrdma_dev *ndev);
bool ntrdma_link_stop(struct ntrdma_dev *ndev);
void ntrdma_link_fini(struct ntrdma_dev *ndev);
extern unsigned int ntrdma_heartbeat_ms;
extern unsigned int ntrdma_heartbeat_timeout_ms;

/* vdb.c */
void ntrdma_vdb_init(struct ntrdma_dev *ndev);
int ntrdma_vdb_register(struct ntrdma_dev *ndev, int idx, ntrdma_vdb_fn fn,
			ntrdma_vdb_watch_fn watch, void *ctx);
void ntrdma_vdb_unregister(struct ntrdma_dev *ndev, int idx);
void ntrdma_vdb_ring(struct ntrdma_dev *ndev, int idx);
void ntrdma_vdb_event(struct ntrdma_dev *ndev);
void ntrdma_vdb_reset(struct ntrdma_dev *ndev);
void ntrdma_vdb_sweep(struct ntrdma_dev *ndev);

/* cmd.c */
int ntrdma_cmd_init(struct ntrdma_dev *ndev);
void ntrdma_cmd_fini(struct ntrdma_dev *ndev);
void ntrdma_cmd_start(struct ntrdma_dev *ndev);
void ntrdma_cmd_stop(struct ntrdma_dev *ndev);

/* debugfs.c */
void ntrdma_debugfs_init(void);
void ntrdma_debugfs_exit(void);
void ntrdma_debugfs_add(struct ntrdma_dev *ndev);
void ntrdma_debugfs_del(struct ntrdma_dev *ndev);

/* rxmem.c: the memory the peer writes, flat or windowed */
extern bool ntrdma_force_windowed;
int ntrdma_rxmem_init(struct ntrdma_dev *ndev);
void ntrdma_rxmem_flat_chosen(struct ntrdma_dev *ndev);
int ntrdma_window_setup(struct ntrdma_dev *ndev);
int ntrdma_window_trans(struct ntrdma_dev *ndev);
void ntrdma_rxmem_fini(struct ntrdma_dev *ndev, bool peer_quiet);

/* fault.c: the selftests' fault injection (CONFIG_NTRDMA_TEST_HOOKS) */
#ifdef NTRDMA_TEST_HOOKS
void ntrdma_fault_debugfs_add(struct ntrdma_dev *ndev);
#else
static inline void ntrdma_fault_debugfs_add(struct ntrdma_dev *ndev) { }
#endif

/* canary.c: the selftests' canaries (CONFIG_NTRDMA_TEST_HOOKS) */
struct seq_file;
#ifdef NTRDMA_TEST_HOOKS
int ntrdma_canary_run(struct ntrdma_dev *ndev, const char *buf);
void ntrdma_canary_show(struct seq_file *s, struct ntrdma_dev *ndev);
void ntrdma_canary_fini(struct ntrdma_dev *ndev);
#else
static inline void ntrdma_canary_show(struct seq_file *s,
				      struct ntrdma_dev *ndev) { }
static inline void ntrdma_canary_fini(struct ntrdma_dev *ndev) { }
#endif

/* face.c */
void ntrdma_faces_set(const struct ntrdma_face *const *faces,
		      unsigned int count);
int ntrdma_faces_add(struct ntrdma_dev *ndev);
void ntrdma_faces_del(struct ntrdma_dev *ndev, bool peer_quiet);
void ntrdma_faces_link(struct ntrdma_dev *ndev, bool up);
void ntrdma_faces_show(struct ntrdma_dev *ndev, struct seq_file *s);
void ntrdma_faces_debugfs(struct ntrdma_dev *ndev, struct dentry *dir);

#endif /* NTRDMA_PRIV_H */
