/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NTRDMA engine: what a face may use.
 *
 * The engine owns one ntrdma device per link (an NTB device): the link (handshake,
 * heartbeat), the doorbells, the command channel and the transport queue
 * pairs (TQPs). It never names its faces: each face describes itself with a
 * struct ntrdma_face, the module lists them once (ntrdma_main.c), and the
 * engine reaches them through that table, as ntb_transport reaches its
 * clients through the handlers they register.
 *
 * Every function below is documented (kernel-doc) where it is defined.
 */
#ifndef NTRDMA_ENGINE_H
#define NTRDMA_ENGINE_H

#include <linux/sizes.h>
#include <linux/skbuff.h>
#include <linux/types.h>

#include "ntrdma_wire.h"

struct device;
struct net_device;
struct dentry;
struct ntrdma_dev;
struct ntrdma_tqp;
struct seq_file;

/* ---- faces (ntrdma_face.c) ---- */

/**
 * struct ntrdma_face - one face of an ntrdma device (Ethernet, verbs, ...)
 * @name: for messages
 * @optional: a failed @add leaves the device running without this face
 * @add: create the face on @ndev; *@priv is handed to the other callbacks
 * @del: remove it; @peer_quiet: the peer provably no longer writes into
 *	buffers the face posted, so they may be freed (else keep them)
 * @link_up: a session started (process context, link lock held)
 * @link_down: the session ended; no transfer of it writes our memory
 *	any more once every TQP of the face is stopped (same context)
 * @show: optional: the face's own "name: value" lines of debugfs info
 *	(process context; only between @add and @del)
 * @debugfs: optional: add the face's files to the device's debugfs folder
 *	@dir (after @add; they go with the folder, before @del)
 *
 * Faces are added in table order and deleted in reverse order.
 */
struct ntrdma_face {
	const char *name;
	bool optional;
	int (*add)(struct ntrdma_dev *ndev, void **priv);
	void (*del)(void *priv, bool peer_quiet);
	void (*link_up)(void *priv);
	void (*link_down)(void *priv);
	void (*show)(void *priv, struct seq_file *s);
	void (*debugfs)(void *priv, struct dentry *dir);
};

#define NTRDMA_FACES_MAX	4

int ntrdma_engine_init(const struct ntrdma_face *const *faces,
		       unsigned int count);
void ntrdma_engine_exit(void);

/* ---- the device (ntrdma_dev.c) ---- */

const char *ntrdma_dev_name(struct ntrdma_dev *ndev);
int ntrdma_dev_index(struct ntrdma_dev *ndev);
struct device *ntrdma_dev_parent(struct ntrdma_dev *ndev);
int ntrdma_dev_port(struct ntrdma_dev *ndev);
struct device *ntrdma_dev_dma_device(struct ntrdma_dev *ndev);
bool ntrdma_dev_dma_copies(struct ntrdma_dev *ndev);
int ntrdma_dev_peer_read(struct ntrdma_dev *ndev, u64 addr, void *buf,
			 size_t len);
int ntrdma_dev_peer_write(struct ntrdma_dev *ndev, u64 addr, const void *buf,
			  size_t len);
u64 ntrdma_dev_peer_reach(struct ntrdma_dev *ndev);
struct ntrdma_tqp_piece;
int ntrdma_dev_pull(struct ntrdma_dev *ndev, const struct ntrdma_tqp_piece *pc,
		    int n);
void ntrdma_dev_set_netdev(struct ntrdma_dev *ndev, struct net_device *netdev);
struct net_device *ntrdma_dev_netdev(struct ntrdma_dev *ndev);

/* ---- memory the peer writes (ntrdma_rxmem.c) ---- */

/**
 * struct ntrdma_rxbuf - a buffer a face posts for the peer to write
 * @va: where we read it
 * @addr: what the peer is told (ntrdma_tqp_post_recv())
 * @dma: flat mode: its streaming mapping
 * @len: its size
 */
struct ntrdma_rxbuf {
	void *va;
	u64 addr;
	dma_addr_t dma;
	size_t len;
};

int ntrdma_rxbuf_alloc(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b,
		       size_t len, gfp_t gfp);
void ntrdma_rxbuf_free(struct ntrdma_dev *ndev, struct ntrdma_rxbuf *b);
void ntrdma_rxbuf_for_cpu(struct ntrdma_dev *ndev, const struct ntrdma_rxbuf *b,
			  size_t len);
void ntrdma_rxbuf_for_peer(struct ntrdma_dev *ndev,
			   const struct ntrdma_rxbuf *b, size_t len);
bool ntrdma_dev_windowed(struct ntrdma_dev *ndev);
unsigned int ntrdma_rxbuf_count(struct ntrdma_dev *ndev, size_t len,
				unsigned int share, unsigned int flat_count);

/* ---- link (ntrdma_link.c) ---- */

bool ntrdma_link_is_up(struct ntrdma_dev *ndev);
u32 ntrdma_link_session(struct ntrdma_dev *ndev);
bool ntrdma_link_peer_gone(struct ntrdma_dev *ndev);
unsigned long ntrdma_link_ended_at(struct ntrdma_dev *ndev);
unsigned long ntrdma_link_leave_timeout(struct ntrdma_dev *ndev);
void ntrdma_link_proto_error(struct ntrdma_dev *ndev, const char *what);

/* ---- command channel (ntrdma_cmd.c) ---- */

#define NTRDMA_CMD_TIMEOUT_MS	5000	/* what callers normally allow */
#define NTRDMA_CMD_NOINTR	BIT(0)	/* signals do not cut the waits short */

/* A request handler: process context; returns 0 or a negative errno. */
typedef int (*ntrdma_cmd_fn)(void *ctx, const void *req, u16 len, void *rsp,
			     u16 *rsp_len);

int ntrdma_cmd_register(struct ntrdma_dev *ndev, u16 op, ntrdma_cmd_fn fn,
			void *ctx);
void ntrdma_cmd_unregister(struct ntrdma_dev *ndev, u16 op);
int ntrdma_cmd_call(struct ntrdma_dev *ndev, u16 op, const void *req, u16 len,
		    void *rsp, u16 rsp_cap, u16 *rsp_len,
		    unsigned int timeout_ms);
int ntrdma_cmd_call_in(struct ntrdma_dev *ndev, u32 session, u16 op,
		       const void *req, u16 len, unsigned int timeout_ms,
		       unsigned int flags);

/* ---- transport queue pairs (ntrdma_tqp.c) ---- */

#define NTRDMA_TQP_MAX_SGE	(MAX_SKB_FRAGS + 1)

/**
 * struct ntrdma_tqp_ops - callbacks of a TQP's user
 * @rx: completions to poll (hard irq)
 * @tx_space: a send may find room again: the peer posted buffers (hard
 *	irq), or the DMA channel completed a copy after a send found it full
 *	(softirq, or the context of a flush: some engines complete from
 *	issue_pending; never with the TQP's locks held)
 * @peer_state: the peer's end changed (hard irq)
 * @kick: optional: the peer placed something straight into memory the
 *	user watches and rang for it (ntrdma_tqp_kick(); hard irq)
 * @send_done: a send's pages may be reused; @status 0, -ENOLINK (the
 *	session ended first: not delivered) or -EIO. Any context but hard irq.
 *	Also for a placement that went on the DMA channel (ntrdma_tqp_place()
 *	returned 1): 0 once its bytes are written, or -EIO.
 */
struct ntrdma_tqp_ops {
	void (*rx)(void *ctx);
	void (*tx_space)(void *ctx);
	void (*peer_state)(void *ctx);
	void (*kick)(void *ctx);
	void (*send_done)(void *ctx, void *cookie, u32 len, int status);
};

/* A physically contiguous range of bytes starting at @page + @off. */
struct ntrdma_tqp_sge {
	struct page *page;
	u32 off;
	u32 len;
};

/* Direct placement: @len bytes of @page from @off to the peer's @dst. */
struct ntrdma_tqp_piece {
	u64 dst;
	struct page *page;
	u32 off;
	u32 len;
};

/* A received message: ring position of its buffer, length, meta word. */
struct ntrdma_tqp_rcomp {
	u32 pos;
	u32 len;
	u64 meta;
};

struct ntrdma_tqp *ntrdma_tqp_create(struct ntrdma_dev *ndev,
				     enum ntrdma_tqp_id id,
				     const struct ntrdma_tqp_ops *ops,
				     void *ctx);
void ntrdma_tqp_destroy(struct ntrdma_tqp *tqp);
void ntrdma_tqp_start(struct ntrdma_tqp *tqp);
void ntrdma_tqp_stop(struct ntrdma_tqp *tqp);
void ntrdma_tqp_set_state(struct ntrdma_tqp *tqp, u32 state);
u32 ntrdma_tqp_peer_state(struct ntrdma_tqp *tqp);
void ntrdma_tqp_kick(struct ntrdma_tqp *tqp);
int ntrdma_tqp_post_recv(struct ntrdma_tqp *tqp, dma_addr_t addr, u32 len,
			 u32 *pos);
u32 ntrdma_tqp_recv_room(struct ntrdma_tqp *tqp);
void ntrdma_tqp_post_commit(struct ntrdma_tqp *tqp);
int ntrdma_tqp_poll_recv(struct ntrdma_tqp *tqp, struct ntrdma_tqp_rcomp *c,
			 u32 posted_len);
bool ntrdma_tqp_recv_arm(struct ntrdma_tqp *tqp);
int ntrdma_tqp_send(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_sge *sg,
		    int nsge, u32 len, u64 meta, void *cookie, bool more);
void ntrdma_tqp_send_flush(struct ntrdma_tqp *tqp);
bool ntrdma_tqp_send_ready(struct ntrdma_tqp *tqp);
u64 ntrdma_tqp_doorbells(struct ntrdma_tqp *tqp);

/* ---- direct placement (ntrdma_place.c) ---- */

/*
 * A placement the CPU copies writes at most this much per call: it runs
 * under the TQP's lock (and its callers' locks) with interrupts off.
 */
#define NTRDMA_TQP_PLACE_CPU	SZ_16K

int ntrdma_tqp_place(struct ntrdma_tqp *tqp, const struct ntrdma_tqp_piece *pc,
		     int *n, void *cookie);
bool ntrdma_tqp_place_busy(struct ntrdma_tqp *tqp);
bool ntrdma_tqp_place_ready(struct ntrdma_tqp *tqp);
bool ntrdma_tqp_place_fence(struct ntrdma_tqp *tqp);

/* ---- fault injection for the selftests (ntrdma_fault.c) ---- */

enum ntrdma_fault_site {
	NTRDMA_FAULT_RX_ALLOC,	/* a face allocating a receive buffer */
	NTRDMA_FAULT_DMA_PREP,	/* the engine preparing a DMA copy */
	NTRDMA_FAULT_DMA_PREP_MID, /* ...after others of the same message */
	NTRDMA_FAULT_SITES
};

/* ntrdma_debugfs.c: a command line written to a debugfs file */
char *ntrdma_debugfs_line(const char __user *ubuf, size_t count, char *buf,
			  size_t len);

#ifdef NTRDMA_TEST_HOOKS
bool ntrdma_fault(struct ntrdma_dev *ndev, enum ntrdma_fault_site site);
bool ntrdma_fault_deaf(struct ntrdma_dev *ndev);
void ntrdma_fault_pause(struct ntrdma_dev *ndev, const char *at);
/* ntrdma_canary.c: guard bytes around what a face posts */
bool ntrdma_canary_fill(struct ntrdma_dev *ndev, void *p, size_t len);
void ntrdma_canary_check(struct ntrdma_dev *ndev, const void *p, size_t len);
#else
/* Built for use: nothing is ever injected, nothing guarded. */
static inline bool ntrdma_fault(struct ntrdma_dev *ndev,
				enum ntrdma_fault_site site)
{
	return false;
}

static inline bool ntrdma_fault_deaf(struct ntrdma_dev *ndev)
{
	return false;
}

static inline void ntrdma_fault_pause(struct ntrdma_dev *ndev,
				      const char *at)
{
}

static inline bool ntrdma_canary_fill(struct ntrdma_dev *ndev, void *p,
				      size_t len)
{
	return false;
}

static inline void ntrdma_canary_check(struct ntrdma_dev *ndev,
				       const void *p, size_t len)
{
}
#endif

#endif /* NTRDMA_ENGINE_H */
