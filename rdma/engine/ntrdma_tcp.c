// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA link backend: a TCP connection. The engine runs in windowed mode
 * over it, as over an NTB whose window cannot map all of our memory: the
 * peer reaches only our window buffer (inbox and posted receive buffers),
 * which the engine reads as hostile input. Our window onto the peer is a
 * mirror in our memory; each store into it is forwarded as a WRITE record
 * (ntrdma_tcp_wire.h), and the receiver applies it to its window buffer
 * once the record passed its checks. Scratchpad writes and doorbells are
 * records too; one TCP stream keeps them in the order they were made.
 *
 * A device per module parameter: tcp_listen=ADDR:PORT waits for a peer,
 * tcp_connect=ADDR:PORT dials one. A lost connection is a lost link: the
 * session ends, the connection is made again, and a new session starts.
 */

#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/vmalloc.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "ntrdma_engine.h"
#include "ntrdma_link_ops.h"
#include "ntrdma_tcp_wire.h"

static char *listen_spec;
module_param_named(tcp_listen, listen_spec, charp, 0444);
MODULE_PARM_DESC(tcp_listen,
		 "ADDR:PORT: an ntrdma device over TCP that waits for its peer there (IPv4)");

static char *connect_spec;
module_param_named(tcp_connect, connect_spec, charp, 0444);
MODULE_PARM_DESC(tcp_connect,
		 "ADDR:PORT: an ntrdma device over TCP that connects to its peer there (IPv4)");

/* Our records not yet on the socket: room for every store of a window. */
#define TCP_TX_RING		(2 * NTRDMA_WINDOW_MAX)
#define TCP_RETRY		(HZ / 5)
#define TCP_POLL		HZ	/* how often a blocked thread looks up */
#define TCP_DIAL_TIMEOUT	(3 * HZ)
#define TCP_HELLO_TIMEOUT	(5 * HZ)
#define TCP_USER_TIMEOUT_MS	10000	/* unacknowledged data: the peer is gone */
#define TCP_RX_BUDGET		1024	/* records before the thread lets others run */

struct ntrdma_tcp {
	struct ntrdma_link link;
	struct device *dev;		/* the faces' parent, maps our window */
	struct ntrdma_dev *ndev;
	struct sockaddr_in addr;
	bool listener;
	struct task_struct *task;	/* connects, then reads records */
	wait_queue_head_t wait;
	bool enabled;
	bool up;			/* the peer's HELLO arrived */
	bool down_seen;			/* the engine saw the link down */
	unsigned long hello_by;		/* jiffies: the peer's HELLO is late */
	u32 spad[NTRDMA_SPAD_COUNT];	/* what the peer wrote */

	/* our window buffer (rx_open), under rx_lock */
	struct mutex rx_lock;
	void *win;
	u32 win_size;
	u8 *rx_buf;			/* a WRITE's payload, before its check */

	/* records for the peer */
	struct socket *sock;		/* set and cleared by the task */
	spinlock_t tx_lock;		/* the ring, tx_on, tx_broken */
	u8 *tx_ring;
	u32 tx_head, tx_tail;		/* bytes queued, bytes sent */
	bool tx_on;			/* a connection takes records */
	bool tx_broken;			/* the ring overflowed */
	struct kthread_work tx_work;
	struct kthread_worker *tx;	/* sends: an interrupt's priority */

	atomic64_t connects, tx_bytes, rx_bytes, errors;
};

static struct ntrdma_tcp *ntrdma_tcp_dev[2];

static struct ntrdma_tcp *to_tcp(struct ntrdma_link *link)
{
	return container_of(link, struct ntrdma_tcp, link);
}

/* ---- sending ---- */

static u32 tx_room(struct ntrdma_tcp *t)
{
	return TCP_TX_RING - (t->tx_head - t->tx_tail);
}

static void tx_put(struct ntrdma_tcp *t, const void *src, u32 len)
{
	u32 at = t->tx_head % TCP_TX_RING;
	u32 first = min(len, TCP_TX_RING - at);

	memcpy(t->tx_ring + at, src, first);
	memcpy(t->tx_ring, src + first, len - first);
	t->tx_head += len;
}

/* Queue one record; false when the ring is full (the connection ends). */
static bool tx_record(struct ntrdma_tcp *t, u8 type, u32 a, u32 b,
		      const void *payload, u32 len)
{
	struct ntrdma_tcp_hdr h = { .type = type, .a = a, .b = b, .len = len };
	u8 hdr[NTRDMA_TCP_HDR_LEN];

	lockdep_assert_held(&t->tx_lock);
	if (type == NTRDMA_TCP_HELLO)
		h.ver = NTRDMA_VERSION;
	if (tx_room(t) < sizeof(hdr) + len) {
		t->tx_broken = true;
		return false;
	}
	ntrdma_tcp_pack(&h, hdr);
	tx_put(t, hdr, sizeof(hdr));
	tx_put(t, payload, len);
	return true;
}

/* A record from any context; dropped while no connection takes them. */
static void tx_send(struct ntrdma_tcp *t, u8 type, u32 a, u32 b,
		    const void *payload, u32 len)
{
	unsigned long flags;

	spin_lock_irqsave(&t->tx_lock, flags);
	if (t->tx_on && !t->tx_broken)
		tx_record(t, type, a, b, payload, len);
	spin_unlock_irqrestore(&t->tx_lock, flags);
	kthread_queue_work(t->tx, &t->tx_work);
}

/* What the ring holds from tx_tail on, as one or two pieces. */
static int tx_pending(struct ntrdma_tcp *t, struct kvec *v)
{
	u32 len = t->tx_head - t->tx_tail, at = t->tx_tail % TCP_TX_RING;
	u32 first = min(len, TCP_TX_RING - at);

	v[0].iov_base = t->tx_ring + at;
	v[0].iov_len = first;
	v[1].iov_base = t->tx_ring;
	v[1].iov_len = len - first;
	return len;
}

/* The ring overflowed: end the connection now, not at the next poll. */
static void tcp_tx_broken(struct ntrdma_tcp *t)
{
	struct socket *sock = NULL;

	spin_lock_irq(&t->tx_lock);
	if (t->tx_on && t->tx_broken)
		sock = t->sock;	/* tcp_end() cancels us before it goes */
	spin_unlock_irq(&t->tx_lock);
	if (sock)
		kernel_sock_shutdown(sock, SHUT_RDWR);
}

static void tcp_tx_work(struct kthread_work *work)
{
	struct ntrdma_tcp *t = container_of(work, struct ntrdma_tcp, tx_work);
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	struct kvec v[2];
	int len, rc;

	for (;;) {
		spin_lock_irq(&t->tx_lock);
		len = t->tx_on && !t->tx_broken ? tx_pending(t, v) : 0;
		spin_unlock_irq(&t->tx_lock);
		if (!len)
			break;
		rc = kernel_sendmsg(t->sock, &msg, v, 2, len);
		if (rc <= 0)
			break;	/* the task sees the socket fail */
		atomic64_add(rc, &t->tx_bytes);
		spin_lock_irq(&t->tx_lock);
		t->tx_tail += rc;
		spin_unlock_irq(&t->tx_lock);
	}
	tcp_tx_broken(t);
}

/* ---- the link ops ---- */

static int tcp_op_enable(struct ntrdma_link *link)
{
	struct ntrdma_tcp *t = to_tcp(link);

	WRITE_ONCE(t->enabled, true);
	wake_up(&t->wait);
	return 0;
}

static int tcp_op_disable(struct ntrdma_link *link)
{
	struct ntrdma_tcp *t = to_tcp(link);

	WRITE_ONCE(t->enabled, false);
	wake_up(&t->wait);
	return 0;
}

/* A down the engine saw: only then may a new connection come up. */
static bool tcp_op_is_up(struct ntrdma_link *link)
{
	struct ntrdma_tcp *t = to_tcp(link);
	bool up = READ_ONCE(t->up);

	if (!up && !READ_ONCE(t->down_seen)) {
		WRITE_ONCE(t->down_seen, true);
		wake_up(&t->wait);
	}
	return up;
}

static u32 tcp_op_spad_read(struct ntrdma_link *link, unsigned int idx)
{
	struct ntrdma_tcp *t = to_tcp(link);

	return idx < NTRDMA_SPAD_COUNT ? READ_ONCE(t->spad[idx]) : 0;
}

static void tcp_op_peer_spad_write(struct ntrdma_link *link, unsigned int idx,
				   u32 val)
{
	tx_send(to_tcp(link), NTRDMA_TCP_SPAD, idx, val, NULL, 0);
}

static void tcp_op_peer_db_set(struct ntrdma_link *link, unsigned int bit)
{
	tx_send(to_tcp(link), NTRDMA_TCP_DB, bit, 0, NULL, 0);
}

static int tcp_op_rx_limits(struct ntrdma_link *link, resource_size_t *align,
			    resource_size_t *size_align,
			    resource_size_t *size_max)
{
	*align = 0;
	*size_align = 0;
	*size_max = NTRDMA_WINDOW_MAX;
	return 0;
}

/* Only a window buffer: the peer never reaches the rest of our memory. */
static int tcp_op_rx_open(struct ntrdma_link *link, void *va, dma_addr_t base,
			  resource_size_t size)
{
	struct ntrdma_tcp *t = to_tcp(link);

	if (!va || size > NTRDMA_WINDOW_MAX)
		return -EINVAL;
	mutex_lock(&t->rx_lock);
	t->win = va;
	t->win_size = size;
	mutex_unlock(&t->rx_lock);
	return 0;
}

static void tcp_op_rx_close(struct ntrdma_link *link)
{
	struct ntrdma_tcp *t = to_tcp(link);

	mutex_lock(&t->rx_lock);
	t->win = NULL;
	t->win_size = 0;
	mutex_unlock(&t->rx_lock);
}

static void tcp_op_forward(struct ntrdma_link *link, size_t off, size_t len)
{
	struct ntrdma_tcp *t = to_tcp(link);
	const u8 *src = (const u8 __force *)link->map + off;
	unsigned long flags;
	u32 n;

	spin_lock_irqsave(&t->tx_lock, flags);
	for (; len && t->tx_on && !t->tx_broken; off += n, len -= n) {
		n = min_t(size_t, len, NTRDMA_TCP_WRITE_MAX);
		tx_record(t, NTRDMA_TCP_WRITE, off, 0, src, n);
		src += n;
	}
	spin_unlock_irqrestore(&t->tx_lock, flags);
	kthread_queue_work(t->tx, &t->tx_work);
}

static int tcp_task(void *arg);

static int tcp_op_events_on(struct ntrdma_link *link, struct ntrdma_dev *ndev)
{
	struct ntrdma_tcp *t = to_tcp(link);
	struct task_struct *task;

	t->ndev = ndev;
	task = kthread_run(tcp_task, t, "%s_tcp", ntrdma_dev_name(ndev));
	if (IS_ERR(task))
		return PTR_ERR(task);
	sched_set_fifo_low(task);
	t->task = task;
	return 0;
}

static void tcp_op_events_off(struct ntrdma_link *link)
{
	struct ntrdma_tcp *t = to_tcp(link);

	kthread_stop(t->task);
	t->task = NULL;
}

static void tcp_op_show(struct ntrdma_link *link, struct seq_file *s)
{
	struct ntrdma_tcp *t = to_tcp(link);

	seq_printf(s, "tcp_%s: %pISpc\n", t->listener ? "listen" : "connect",
		   &t->addr);
	seq_printf(s, "tcp_connects: %lld\ntcp_errors: %lld\n",
		   atomic64_read(&t->connects), atomic64_read(&t->errors));
	seq_printf(s, "tcp_tx_bytes: %lld\ntcp_rx_bytes: %lld\n",
		   atomic64_read(&t->tx_bytes), atomic64_read(&t->rx_bytes));
}

static const struct ntrdma_link_ops ntrdma_tcp_ops = {
	.kind		= "tcp",
	.enable		= tcp_op_enable,
	.disable	= tcp_op_disable,
	.is_up		= tcp_op_is_up,
	.spad_read	= tcp_op_spad_read,
	.peer_spad_write = tcp_op_peer_spad_write,
	.peer_db_set	= tcp_op_peer_db_set,
	.rx_limits	= tcp_op_rx_limits,
	.rx_open	= tcp_op_rx_open,
	.rx_close	= tcp_op_rx_close,
	.events_on	= tcp_op_events_on,
	.events_off	= tcp_op_events_off,
	.show		= tcp_op_show,
	.forward	= tcp_op_forward,
};

/* ---- receiving ---- */

/* Whether the task should drop the connection it has. */
static bool tcp_should_end(struct ntrdma_tcp *t)
{
	return kthread_should_stop() || !READ_ONCE(t->enabled) ||
	       READ_ONCE(t->tx_broken);
}

/* All @len bytes, or an error: the peer closed, or we end. */
static int tcp_recv(struct ntrdma_tcp *t, void *buf, u32 len)
{
	struct msghdr msg = {};
	struct kvec v;
	u32 got = 0;
	int rc;

	while (got < len) {
		v.iov_base = buf + got;
		v.iov_len = len - got;
		rc = kernel_recvmsg(t->sock, &msg, &v, 1, v.iov_len,
				    MSG_WAITALL);
		if (rc == -EAGAIN && !READ_ONCE(t->up) &&
		    time_after(jiffies, t->hello_by))
			return -ETIMEDOUT;	/* a silent peer holds no slot */
		if (rc == -EAGAIN && !tcp_should_end(t))
			continue;
		if (rc <= 0)
			return rc ?: -ECONNRESET;
		got += rc;
	}
	atomic64_add(len, &t->rx_bytes);
	return 0;
}

/* The engine's doorbell handlers run with bottom halves off. */
static void tcp_doorbell(struct ntrdma_tcp *t, unsigned int bit)
{
	local_bh_disable();
	ntrdma_link_doorbell(t->ndev, bit);
	local_bh_enable();
}

/*
 * The peer's stores so far have landed. A doorbell it did not ring, because
 * the event index it read was older than the one we sent, is not lost:
 * every queue looks for work now.
 */
static void tcp_landed(struct ntrdma_tcp *t)
{
	local_bh_disable();
	ntrdma_link_landed(t->ndev);
	local_bh_enable();
}

/* Small stores of words stay whole, as an NTB writes them; the rest is data. */
static void tcp_store(void *dst, const void *src, u32 len)
{
	u32 i;

	if ((((unsigned long)dst | len) & 3) || len > 256) {
		memcpy(dst, src, len);
		return;
	}
	for (i = 0; i < len; i += 4)
		WRITE_ONCE(*(u32 *)(dst + i), *(const u32 *)(src + i));
}

/* A record that failed a check: said once in a while, and it ends. */
static int tcp_malformed(struct ntrdma_tcp *t, const struct ntrdma_tcp_hdr *h,
			 int why)
{
	atomic64_inc(&t->errors);
	dev_err_ratelimited(t->dev, "%s: malformed record (type %u, a %#x, len %u: %d): closing the connection\n",
			    ntrdma_dev_name(t->ndev), h->type, h->a, h->len,
			    why);
	return -EPROTO;
}

/* A WRITE into a closed window is of a session we left: it is dropped. */
static int tcp_apply_write(struct ntrdma_tcp *t, const struct ntrdma_tcp_hdr *h)
{
	int rc = tcp_recv(t, t->rx_buf, h->len);

	if (rc)
		return rc;
	mutex_lock(&t->rx_lock);
	if (t->win) {
		rc = ntrdma_tcp_check_write(h, t->win_size);
		if (!rc)
			tcp_store(t->win + h->a, t->rx_buf, h->len);
	}
	mutex_unlock(&t->rx_lock);
	if (rc)
		return tcp_malformed(t, h, rc);
	smp_wmb(); /* the store before anything a later record announces */
	return rc;
}

static int tcp_apply(struct ntrdma_tcp *t, const struct ntrdma_tcp_hdr *h)
{
	switch (h->type) {
	case NTRDMA_TCP_HELLO:
		WRITE_ONCE(t->up, true);
		ntrdma_link_event(t->ndev);
		return 0;
	case NTRDMA_TCP_SPAD:
		WRITE_ONCE(t->spad[h->a], h->b);
		return 0;
	case NTRDMA_TCP_DB:
		tcp_doorbell(t, h->a);
		return 0;
	}
	return tcp_apply_write(t, h);
}

/* Read and apply records until the connection ends. */
static void tcp_read_records(struct ntrdma_tcp *t)
{
	u8 buf[NTRDMA_TCP_HDR_LEN];
	struct ntrdma_tcp_hdr h;
	bool first = true, landed = false;
	unsigned int n = 0;
	int rc;

	while (!tcp_should_end(t)) {
		if (landed && !tcp_inq(t->sock->sk)) {
			tcp_landed(t);
			landed = false;
			/* The sender's next records must not wait for an ACK. */
			tcp_sock_set_quickack(t->sock->sk, 1);
		}
		if (++n % TCP_RX_BUDGET == 0)
			usleep_range(50, 100);	/* a flood pins no CPU */
		rc = tcp_recv(t, buf, sizeof(buf));
		if (rc)
			break;
		ntrdma_tcp_unpack(buf, &h);
		rc = ntrdma_tcp_check_hdr(&h, first);
		if (rc)
			rc = tcp_malformed(t, &h, rc);
		else
			rc = tcp_apply(t, &h);
		if (rc)
			break;
		landed |= h.type == NTRDMA_TCP_WRITE;
		first = false;
	}
}

/* ---- the connection ---- */

static struct socket *tcp_socket(struct ntrdma_tcp *t)
{
	struct socket *sock;

	if (sock_create_kern(&init_net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			     &sock))
		return NULL;
	sock->sk->sk_rcvtimeo = TCP_POLL;
	sock->sk->sk_sndtimeo = TCP_POLL;
	return sock;
}

static struct socket *tcp_dial(struct ntrdma_tcp *t)
{
	struct socket *sock = tcp_socket(t);

	if (sock)
		sock->sk->sk_sndtimeo = TCP_DIAL_TIMEOUT;
	if (sock && kernel_connect(sock, (struct sockaddr *)&t->addr,
				   sizeof(t->addr), 0)) {
		sock_release(sock);
		sock = NULL;
	}
	return sock;
}

static struct socket *tcp_accept(struct ntrdma_tcp *t, struct socket **lsock)
{
	struct socket *sock;
	int rc;

	if (!*lsock) {
		*lsock = tcp_socket(t);
		if (!*lsock)
			return NULL;
		sock_set_reuseaddr((*lsock)->sk);
		rc = kernel_bind(*lsock, (struct sockaddr *)&t->addr,
				 sizeof(t->addr));
		if (!rc)
			rc = kernel_listen(*lsock, 1);
		if (rc) {
			dev_warn_ratelimited(t->dev, "cannot listen on %pISpc (%d): trying again\n",
					     &t->addr, rc);
			sock_release(*lsock);
			*lsock = NULL;
			return NULL;
		}
	}
	if (kernel_accept(*lsock, &sock, 0))
		return NULL;
	sock->sk->sk_rcvtimeo = TCP_POLL;
	return sock;
}

/*
 * Room for a window's worth of records each way: a sender that waits for
 * buffer space waits for an ACK, which the receiver may delay.
 */
static void tcp_set_buffers(struct sock *sk)
{
	lock_sock(sk);
	sk->sk_userlocks |= SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK;
	WRITE_ONCE(sk->sk_sndbuf, TCP_TX_RING);
	WRITE_ONCE(sk->sk_rcvbuf, TCP_TX_RING);
	release_sock(sk);
}

/* A new connection takes records: HELLO first. */
static void tcp_start(struct ntrdma_tcp *t, struct socket *sock)
{
	tcp_sock_set_nodelay(sock->sk);
	tcp_set_buffers(sock->sk);
	tcp_sock_set_user_timeout(sock->sk, TCP_USER_TIMEOUT_MS);
	sock_set_keepalive(sock->sk);
	tcp_sock_set_keepidle(sock->sk, 5);
	tcp_sock_set_keepintvl(sock->sk, 1);
	tcp_sock_set_keepcnt(sock->sk, 5);
	t->hello_by = jiffies + TCP_HELLO_TIMEOUT;
	sock->sk->sk_sndtimeo = MAX_SCHEDULE_TIMEOUT;
	sock->sk->sk_allocation = GFP_NOIO;
	sock->sk->sk_use_task_frag = false;
	t->sock = sock;
	spin_lock_irq(&t->tx_lock);
	t->tx_head = 0;
	t->tx_tail = 0;
	t->tx_broken = false;
	t->tx_on = true;
	tx_record(t, NTRDMA_TCP_HELLO, NTRDMA_MAGIC,
		  sizeof(struct ntrdma_inbox), NULL, 0);
	spin_unlock_irq(&t->tx_lock);
	kthread_queue_work(t->tx, &t->tx_work);
	atomic64_inc(&t->connects);
}

/* The connection is gone: so is the link, and what the peer published. */
static void tcp_end(struct ntrdma_tcp *t)
{
	spin_lock_irq(&t->tx_lock);
	if (t->tx_broken)
		dev_err(t->dev, "%s: %u bytes of records not sent: closing the connection\n",
			ntrdma_dev_name(t->ndev), t->tx_head - t->tx_tail);
	t->tx_on = false;
	spin_unlock_irq(&t->tx_lock);
	kernel_sock_shutdown(t->sock, SHUT_RDWR);
	kthread_cancel_work_sync(&t->tx_work);
	sock_release(t->sock);
	t->sock = NULL;
	WRITE_ONCE(t->down_seen, false);
	WRITE_ONCE(t->up, false);
	memset(t->spad, 0, sizeof(t->spad));
	ntrdma_link_event(t->ndev);
}

/*
 * The next connection comes up only once the engine saw this one go: it
 * then publishes its session again, into the peer's fresh scratchpads.
 */
static void tcp_wait_down_seen(struct ntrdma_tcp *t)
{
	while (!kthread_should_stop() && !READ_ONCE(t->down_seen))
		wait_event_interruptible_timeout(t->wait,
						 READ_ONCE(t->down_seen) ||
						 kthread_should_stop(),
						 TCP_POLL);
	schedule_timeout_interruptible(TCP_RETRY);
}

static int tcp_task(void *arg)
{
	struct ntrdma_tcp *t = arg;
	struct socket *lsock = NULL, *sock;

	while (!kthread_should_stop()) {
		wait_event_interruptible_timeout(t->wait,
						 READ_ONCE(t->enabled) ||
						 kthread_should_stop(),
						 TCP_POLL);
		if (!READ_ONCE(t->enabled))
			continue;
		sock = t->listener ? tcp_accept(t, &lsock) : tcp_dial(t);
		if (!sock) {
			schedule_timeout_interruptible(TCP_RETRY);
			continue;
		}
		tcp_start(t, sock);
		tcp_read_records(t);
		tcp_end(t);
		tcp_wait_down_seen(t);
	}
	if (lsock)
		sock_release(lsock);
	return 0;
}

/* ---- devices ---- */

static int tcp_parse(struct ntrdma_tcp *t, const char *spec)
{
	const char *colon = strrchr(spec, ':');
	u16 port;

	if (!colon || kstrtou16(colon + 1, 10, &port) || !port ||
	    !in4_pton(spec, colon - spec, (u8 *)&t->addr.sin_addr.s_addr, -1,
		      NULL))
		return -EINVAL;
	t->addr.sin_family = AF_INET;
	t->addr.sin_port = htons(port);
	return 0;
}

static void tcp_free(struct ntrdma_tcp *t)
{
	if (t->tx)
		kthread_destroy_worker(t->tx);
	vfree(t->tx_ring);
	kfree(t->rx_buf);
	vfree((void __force *)t->link.map);
	if (t->dev)
		root_device_unregister(t->dev);
	kfree(t);
}

static int tcp_alloc_dev(struct ntrdma_tcp *t, int idx)
{
	char name[16];

	snprintf(name, sizeof(name), "ntrdma_tcp%d", idx);
	t->dev = root_device_register(name);
	if (IS_ERR(t->dev)) {
		int rc = PTR_ERR(t->dev);

		t->dev = NULL;
		return rc;
	}
	/* Windowed mode maps our window buffer and receive buffers. */
	t->dev->dma_mask = &t->dev->coherent_dma_mask;
	return dma_set_mask_and_coherent(t->dev, DMA_BIT_MASK(64));
}

static int tcp_alloc(struct ntrdma_tcp *t, int idx)
{
	void *map;
	int rc;

	rc = tcp_alloc_dev(t, idx);
	if (rc)
		return rc;
	map = vzalloc(NTRDMA_WINDOW_MAX);
	t->tx_ring = vmalloc(TCP_TX_RING);
	t->rx_buf = kmalloc(NTRDMA_TCP_WRITE_MAX, GFP_KERNEL);
	t->link.map = (void __iomem __force *)map;
	if (!map || !t->tx_ring || !t->rx_buf)
		return -ENOMEM;
	t->tx = kthread_create_worker(0, "ntrdma_tcp%d_tx", idx);
	if (IS_ERR(t->tx)) {
		rc = PTR_ERR(t->tx);
		t->tx = NULL;
		return rc;
	}
	/* An NTB moves our stores at once: no task of ours may wait for CPU. */
	sched_set_fifo_low(t->tx->task);
	t->link.ops = &ntrdma_tcp_ops;
	t->link.parent = t->dev;
	t->link.dma_dev = t->dev;
	t->link.port = t->listener ? 0 : 1;
	t->link.map_size = NTRDMA_WINDOW_MAX;
	return 0;
}

static struct ntrdma_tcp *tcp_new(const char *spec, bool listener, int idx)
{
	struct ntrdma_tcp *t = kzalloc(sizeof(*t), GFP_KERNEL);
	int rc;

	if (!t)
		return ERR_PTR(-ENOMEM);
	t->listener = listener;
	init_waitqueue_head(&t->wait);
	mutex_init(&t->rx_lock);
	spin_lock_init(&t->tx_lock);
	kthread_init_work(&t->tx_work, tcp_tx_work);
	rc = tcp_parse(t, spec);
	if (rc) {
		pr_err("ntrdma: tcp_%s=%s: not ADDR:PORT (IPv4)\n",
		       listener ? "listen" : "connect", spec);
		kfree(t);
		return ERR_PTR(rc);
	}
	rc = tcp_alloc(t, idx);
	if (rc) {
		tcp_free(t);
		return ERR_PTR(rc);
	}
	return t;
}

static int tcp_add(const char *spec, bool listener, int idx)
{
	struct ntrdma_tcp *t;
	struct ntrdma_dev *ndev;

	if (!spec || !*spec)
		return 0;
	t = tcp_new(spec, listener, idx);
	if (IS_ERR(t))
		return PTR_ERR(t);
	ndev = ntrdma_dev_add(&t->link);
	if (IS_ERR(ndev)) {
		tcp_free(t);
		return PTR_ERR(ndev);
	}
	dev_info(t->dev, "%s: TCP, %s %pISpc\n", ntrdma_dev_name(ndev),
		 listener ? "listening on" : "connecting to", &t->addr);
	ntrdma_tcp_dev[idx] = t;
	return 0;
}

/**
 * ntrdma_tcp_register() - add the devices the module parameters name
 *
 * Return: 0 or a negative errno.
 */
int ntrdma_tcp_register(void)
{
	int rc;

	rc = tcp_add(listen_spec, true, 0);
	if (!rc)
		rc = tcp_add(connect_spec, false, 1);
	if (rc)
		ntrdma_tcp_unregister();
	return rc;
}

/**
 * ntrdma_tcp_unregister() - remove every ntrdma device over TCP
 */
void ntrdma_tcp_unregister(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(ntrdma_tcp_dev); i++) {
		if (!ntrdma_tcp_dev[i])
			continue;
		ntrdma_dev_remove(ntrdma_tcp_dev[i]->ndev);
		tcp_free(ntrdma_tcp_dev[i]);
		ntrdma_tcp_dev[i] = NULL;
	}
}
