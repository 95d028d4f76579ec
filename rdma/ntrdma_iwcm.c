// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA connection manager: the iw_cm verbs, so that rdma_cm (rping, qperf
 * -cm1, perftest -R, kernel ULPs) connects RC QPs over the NTB.
 *
 * rdma_cm accepts an InfiniBand-protocol port only behind an IPoIB
 * netdev, and ntr%d is Ethernet, so the port's core protocol is iWARP with
 * the iw_cm capability (ntrdma_ib.c; users still see an IB port), GID 1 the
 * netdev's MAC; rdma_cm resolves IP addresses to it. A QP that rdma_cm moves
 * to INIT follows the masks it uses for iWARP (ntrdma_qp.c), and this file
 * moves it to RTS once both ends agree. The tools that connect QPs
 * themselves (modify_qp with the peer's QPN) are not affected.
 *
 * The messages travel over the command channel: REQ (addresses, QPN,
 * IRD/ORD, private data) is answered at once by the peer (a listener took
 * it, or -ECONNREFUSED); the passive side's ACCEPT or REJECT follows later
 * as a request of its own; DISC ends an established connection. Every
 * message is checked before use (the peer is not trusted): lengths, address
 * family, connection ids, QP numbers.
 *
 * Lifetimes: a connection end (cep) holds a reference on its iw_cm_id while
 * it may still call it back. The iw_cm holds references on the QP
 * (iw_add_ref) while it may modify it; destroy_qp ends the connection and
 * waits for them. Every connect gets an answer (accept, reject, the timeout,
 * link loss or the QP's end): the 6.1 iw_cm BUG()s when a cm_id is
 * destroyed with its connect unanswered.
 *
 * Limits (the peer is not trusted): a request from the peer becomes a
 * record only while its listener has fewer than its backlog (what iw_cm
 * passes to create_listen) pending and the device fewer than
 * NTRDMA_CM_PENDING_MAX; any other is refused at once, and so is one the
 * iw_cm drops (its event queue full): the peer's connect fails as
 * REJECTED instead of waiting, and we keep nothing of it. A pending record
 * lives until the listener answers, or 2 x NTRDMA_CM_TIMEOUT_MS. Every
 * other record is one of our own connects or an accepted connection, and
 * takes one of our QPs.
 *
 * Locking: nib->cm_mutex serializes every state change; it is never held
 * across a command-channel call (the answer comes through the same work
 * that runs the peer's requests to us).
 */

#include <linux/inet.h>
#include <linux/inetdevice.h>
#include <linux/in6.h>
#include <linux/sched/signal.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <net/addrconf.h>
#include <rdma/iw_cm.h>

#include "ntrdma_ib.h"

#define NTRDMA_CM_TIMEOUT_MS	10000	/* a connect waits this long */
/*
 * Requests the peer (or our own loopback connects) can have waiting for an
 * answer of the listeners, all listeners of the device together; each
 * listener takes at most its backlog of them.
 */
#define NTRDMA_CM_PENDING_MAX	1024

enum ntrdma_cep_state {
	CEP_CONNECTING,		/* active: REQ sent, no answer yet */
	CEP_REQ_RCVD,		/* passive: listener told, no accept yet */
	CEP_ACCEPTING,		/* passive: ACCEPT on its way */
	CEP_ESTABLISHED,
	CEP_CLOSED,
};

struct ntrdma_cep {
	struct ntrdma_ib *nib;
	u32 id, peer_id, peer_qpn;
	enum ntrdma_cep_state state;
	struct iw_cm_id *cm_id;		/* referenced while set */
	struct ntrdma_qp *qp;		/* qp->cep points back */
	u8 ird, ord;
	struct sockaddr_storage laddr, raddr;
	bool notify_peer;		/* close: send DISC */
	bool disc_rcvd;			/* DISC came while ACCEPTING */
	bool loopback;			/* both ends are ours: no wire */
	bool pending;			/* counted in nib->cm_pending */
	struct ntrdma_cm_listener *listener;	/* counts it too, while set */
	struct work_struct close_work;
	struct delayed_work timeout;
	struct work_struct free_work;
};

/*
 * Where a message to the other end of a connection goes: our connection
 * id, the other end's, and the way (the wire, or our own handlers).
 */
struct cm_end {
	u32 id, peer_id;
	bool loopback;
	u32 ack_msn;		/* DISC: NTRDMA_CM_ACKED | our QP's next msn */
};

struct ntrdma_cm_listener {
	struct list_head list;
	struct iw_cm_id *cm_id;
	u32 backlog;			/* at most this many pending */
	u32 pending;			/* requests of it not answered yet */
};

static struct ntrdma_qp *cm_get_qp(struct ntrdma_ib *nib, u32 qpn)
{
	return xa_load(&nib->qp_xa, qpn);
}

/* ---- addresses ---- */

static int cm_wire_addrs(struct ntrdma_wire_cm *m,
			 const struct sockaddr_storage *l,
			 const struct sockaddr_storage *r)
{
	const struct sockaddr_in *l4 = (const void *)l, *r4 = (const void *)r;
	const struct sockaddr_in6 *l6 = (const void *)l, *r6 = (const void *)r;

	memset(m->saddr, 0, sizeof(m->saddr));
	memset(m->daddr, 0, sizeof(m->daddr));
	m->family = l->ss_family;
	if (l->ss_family == AF_INET && r->ss_family == AF_INET) {
		memcpy(m->saddr, &l4->sin_addr, 4);
		memcpy(m->daddr, &r4->sin_addr, 4);
		m->sport = l4->sin_port;
		m->dport = r4->sin_port;
		return 0;
	}
	if (l->ss_family == AF_INET6 && r->ss_family == AF_INET6) {
		memcpy(m->saddr, &l6->sin6_addr, 16);
		memcpy(m->daddr, &r6->sin6_addr, 16);
		m->sport = l6->sin6_port;
		m->dport = r6->sin6_port;
		return 0;
	}
	return -EAFNOSUPPORT;
}

/* The sockaddr for @addr:@port of the REQ's family. */
static void cm_sockaddr(struct sockaddr_storage *ss, u8 family,
			const u8 *addr, __be16 port)
{
	struct sockaddr_in *s4 = (void *)ss;
	struct sockaddr_in6 *s6 = (void *)ss;

	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, addr, 4);
		s4->sin_port = port;
	} else {
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, addr, 16);
		s6->sin6_port = port;
	}
}

/* Does listener @id take a connection to @d? */
static bool cm_listen_match(const struct iw_cm_id *id,
			    const struct sockaddr_storage *d)
{
	const struct sockaddr_storage *l = &id->m_local_addr;
	const struct sockaddr_in *l4 = (const void *)l, *d4 = (const void *)d;
	const struct sockaddr_in6 *l6 = (const void *)l, *d6 = (const void *)d;

	/* An IPv6 wildcard that is not IPv6-only takes IPv4 too. */
	if (l->ss_family == AF_INET6 && d->ss_family == AF_INET &&
	    !id->afonly && ipv6_addr_any(&l6->sin6_addr))
		return l6->sin6_port == d4->sin_port;

	if (l->ss_family == AF_INET && d->ss_family == AF_INET)
		return l4->sin_port == d4->sin_port &&
		       (l4->sin_addr.s_addr == htonl(INADDR_ANY) ||
			l4->sin_addr.s_addr == d4->sin_addr.s_addr);
	if (l->ss_family == AF_INET6 && d->ss_family == AF_INET6)
		return l6->sin6_port == d6->sin6_port &&
		       (ipv6_addr_any(&l6->sin6_addr) ||
			ipv6_addr_equal(&l6->sin6_addr, &d6->sin6_addr));
	return false;
}

/*
 * Is @a an address of our own netdev? Then the connection is a loopback
 * one: both ends are QPs of this device (ntrdma_lo.c), and its messages
 * never cross the NTB.
 */
static bool cm_addr_is_ours(struct ntrdma_ib *nib,
			    const struct sockaddr_storage *a)
{
	struct net_device *nd = ntrdma_dev_netdev(nib->ndev);
	const struct sockaddr_in *a4 = (const void *)a;
	const struct sockaddr_in6 *a6 = (const void *)a;
	bool ours = false;

	if (!nd)
		return false;
	if (a->ss_family == AF_INET) {
		rcu_read_lock();
		ours = __ip_dev_find(dev_net(nd), a4->sin_addr.s_addr,
				     false) == nd;
		rcu_read_unlock();
	} else if (IS_ENABLED(CONFIG_IPV6) && a->ss_family == AF_INET6) {
		ours = ipv6_chk_addr(dev_net(nd), &a6->sin6_addr, nd, 0);
	}
	return ours;
}

/* ---- connection ends ---- */

static void cm_close_work(struct work_struct *work);
static void cm_timeout_work(struct work_struct *work);
static int cm_call(struct ntrdma_ib *nib, u16 op,
		   const struct ntrdma_wire_cm *m, bool loopback);

/* Once detached: no work of it runs any more, then it goes. */
static void cm_free_work(struct work_struct *work)
{
	struct ntrdma_cep *cep = container_of(work, struct ntrdma_cep,
					      free_work);

	cancel_work_sync(&cep->close_work);
	cancel_delayed_work_sync(&cep->timeout);
	kfree(cep);
}

static struct ntrdma_cep *cm_cep_alloc(struct ntrdma_ib *nib)
{
	struct ntrdma_cep *cep = kzalloc(sizeof(*cep), GFP_KERNEL);

	if (!cep)
		return NULL;
	cep->nib = nib;
	INIT_WORK(&cep->close_work, cm_close_work);
	INIT_DELAYED_WORK(&cep->timeout, cm_timeout_work);
	INIT_WORK(&cep->free_work, cm_free_work);
	if (xa_alloc_cyclic(&nib->cep_xa, &cep->id, cep,
			    XA_LIMIT(1, U32_MAX), &nib->cep_next,
			    GFP_KERNEL) < 0) {
		kfree(cep);
		return NULL;
	}
	return cep;
}

/*
 * An event to the iw_cm. Its ird/ord are the other end's IRD and ORD, as
 * cxgb4 and siw (at CONNECT_REQUEST) report them: rdma_cm hands them to the
 * ULP as initiator_depth = ev.ird and responder_resources = ev.ord, so a ULP
 * sees its own side, the IB CM's way: the READs it may have outstanding
 * (what the other end answers: our ORD) and the READs it must answer (our
 * IRD). At CONNECT_REQUEST they are the active side's offer (svcrdma and
 * nvmet-rdma take initiator_depth as the bound of their own); later, what
 * both ends accepted.
 */
static int cm_event(struct ntrdma_cep *cep, struct iw_cm_id *cm_id,
		    enum iw_cm_event_type type, int status,
		    const void *pdata, u8 pdata_len)
{
	struct iw_cm_event ev = {
		.event = type,
		.status = status,
		.local_addr = cep->laddr,
		.remote_addr = cep->raddr,
		.private_data = (void *)pdata,
		.private_data_len = pdata_len,
		.ird = cep->ord,
		.ord = cep->ird,
	};

	/* Its id, not a pointer: accept/reject look it up again. */
	if (type == IW_CM_EVENT_CONNECT_REQUEST)
		ev.provider_data = (void *)(uintptr_t)cep->id;
	return cm_id->event_handler(cm_id, &ev);
}

/* @cep's request is answered, or goes: no longer counted (cm_mutex). */
static void cm_unpend(struct ntrdma_cep *cep)
{
	lockdep_assert_held(&cep->nib->cm_mutex);
	if (!cep->pending)
		return;
	cep->pending = false;
	cep->nib->cm_pending--;
	if (cep->listener)
		cep->listener->pending--;
	cep->listener = NULL;
}

/*
 * Forget @cep (cm_mutex held): off the QP (under sq_lock, so no QP state
 * change queues its close work after this) and the table, its cm_id
 * released; freed from a work item once its other works are done.
 */
static void cm_cep_detach(struct ntrdma_cep *cep)
{
	struct ntrdma_qp *qp = cep->qp;
	unsigned long flags;

	if (cep->state == CEP_CLOSED)
		return;
	cm_unpend(cep);
	cep->state = CEP_CLOSED;
	if (qp) {
		spin_lock_irqsave(&qp->sq_lock, flags);
		qp->cep = NULL;
		spin_unlock_irqrestore(&qp->sq_lock, flags);
		cep->qp = NULL;
	}
	xa_erase(&cep->nib->cep_xa, cep->id);
	if (cep->cm_id) {
		cep->cm_id->provider_data = NULL;
		cep->cm_id->rem_ref(cep->cm_id);
		cep->cm_id = NULL;
	}
	queue_work(cep->nib->cm_wq, &cep->free_work);
}

static void cm_qp_attach(struct ntrdma_qp *qp, struct ntrdma_cep *cep)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->cep = cep;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

/* An unanswered connect fails: CONNECT_REPLY with @status (cm_mutex). */
static void cm_connect_failed(struct ntrdma_cep *cep, int status,
			      const void *pdata, u8 pdata_len)
{
	struct iw_cm_id *cm_id = cep->cm_id;

	if (cm_id)
		cm_event(cep, cm_id, IW_CM_EVENT_CONNECT_REPLY, status,
			 pdata, pdata_len);
	cm_cep_detach(cep);
}

/* ---- active side ---- */

int ntrdma_iw_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param)
{
	struct ntrdma_ib *nib = to_nib(cm_id->device);
	struct ntrdma_wire_cm *m;
	struct ntrdma_cep *cep;
	struct ntrdma_qp *qp;
	bool loopback;
	int rc;

	if (param->private_data_len > NTRDMA_CM_PDATA_MAX)
		return -EINVAL;
	m = kzalloc(NTRDMA_CMD_DATA, GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	rc = cm_wire_addrs(m, &cm_id->m_local_addr, &cm_id->m_remote_addr);
	if (rc)
		goto out_free;

	mutex_lock(&nib->cm_mutex);
	qp = cm_get_qp(nib, param->qpn);
	rc = -EINVAL;
	if (!qp || qp->cep ||
	    (qp->state != IB_QPS_INIT && qp->state != IB_QPS_RTR))
		goto out_unlock;
	rc = -ENOMEM;
	cep = cm_cep_alloc(nib);
	if (!cep)
		goto out_unlock;
	cep->state = CEP_CONNECTING;
	cep->qp = qp;
	cm_qp_attach(qp, cep);
	cep->laddr = cm_id->m_local_addr;
	cep->raddr = cm_id->m_remote_addr;
	cep->loopback = cm_addr_is_ours(nib, &cm_id->m_remote_addr);
	loopback = cep->loopback;
	cep->ird = min_t(u32, param->ird, NTRDMA_MAX_RD_ATOM);
	cep->ord = min_t(u32, param->ord, NTRDMA_MAX_RD_ATOM);
	cm_id->add_ref(cm_id);
	cep->cm_id = cm_id;
	cm_id->provider_data = (void *)(uintptr_t)cep->id;
	m->cep = cep->id;
	m->qpn = qp->ibqp.qp_num;
	m->ird = cep->ird;
	m->ord = cep->ord;
	m->pdata_len = param->private_data_len;
	if (m->pdata_len)
		memcpy(m->pdata, param->private_data, m->pdata_len);
	mutex_unlock(&nib->cm_mutex);

	rc = cm_call(nib, NTRDMA_CMD_CM_REQ, m, loopback);

	/* Looked up again: an answer or link loss may have ended it. */
	mutex_lock(&nib->cm_mutex);
	cep = xa_load(&nib->cep_xa, m->cep);
	if (!cep) {
		rc = 0;		/* CONNECT_REPLY was sent */
	} else if (rc == -ECONNREFUSED && cep->state == CEP_CONNECTING) {
		/* Nobody listens there: REJECTED, as the peer would say. */
		cm_connect_failed(cep, rc, NULL, 0);
		rc = 0;
	} else if (rc) {
		/* No connect event follows a failed iw_connect. */
		if (cep->state == CEP_CONNECTING) {
			cm_cep_detach(cep);
			goto out_unlock;
		}
		/* Answered already (an ACCEPT raced a lost reply): as is. */
		rc = 0;
	} else if (cep->state == CEP_CONNECTING) {
		queue_delayed_work(nib->cm_wq, &cep->timeout,
				   msecs_to_jiffies(NTRDMA_CM_TIMEOUT_MS));
	}
out_unlock:
	mutex_unlock(&nib->cm_mutex);
out_free:
	kfree(m);
	return rc;
}

static void cm_timeout_work(struct work_struct *work)
{
	struct ntrdma_cep *cep = container_of(to_delayed_work(work),
					      struct ntrdma_cep, timeout);
	struct ntrdma_ib *nib = cep->nib;

	/*
	 * A late ACCEPT finds no connection: the peer's accept fails. A
	 * request nobody accepted or rejected (its peer gave up long ago, or
	 * the iw_cm dropped it with a listener going away) is forgotten: a
	 * late accept fails.
	 */
	mutex_lock(&nib->cm_mutex);
	if (cep->state == CEP_CONNECTING) {
		ibdev_info(&nib->ibdev, "connect: no answer in %u ms\n",
			   NTRDMA_CM_TIMEOUT_MS);
		cm_connect_failed(cep, -ETIMEDOUT, NULL, 0);
	} else if (cep->state == CEP_REQ_RCVD) {
		cm_cep_detach(cep);
	}
	mutex_unlock(&nib->cm_mutex);
}

/*
 * The start of every CM message handler: the message checked (length,
 * private data, QPN range) before any use.
 */
static int cm_msg(const void *req, u16 len, u16 *rsp_len,
		  const struct ntrdma_wire_cm **msg)
{
	const struct ntrdma_wire_cm *m = req;

	*rsp_len = 0;
	if (len < sizeof(*m) || m->pdata_len > NTRDMA_CM_PDATA_MAX ||
	    len != sizeof(*m) + m->pdata_len || m->qpn > 0xffffff)
		return -EINVAL;
	*msg = m;
	return 0;
}

/*
 * The cep @id, as the other end named it: ours, in @state, and reached the
 * way it connected (the peer cannot name a loopback connection's end).
 */
static struct ntrdma_cep *cm_find(struct ntrdma_ib *nib, u32 id, u32 peer_id,
				  enum ntrdma_cep_state state, bool loopback)
{
	struct ntrdma_cep *cep = xa_load(&nib->cep_xa, id);

	if (!cep || cep->state != state || cep->loopback != loopback)
		return NULL;
	if (state != CEP_CONNECTING && cep->peer_id != peer_id)
		return NULL;
	return cep;
}

static int cm_accept(struct ntrdma_ib *nib, const struct ntrdma_wire_cm *m,
		     bool loopback)
{
	struct ntrdma_cep *cep;
	int rc;

	mutex_lock(&nib->cm_mutex);
	cep = cm_find(nib, m->peer_cep, m->cep, CEP_CONNECTING, loopback);
	rc = -ECONNRESET;
	if (!cep || !cep->qp)
		goto out;
	cep->peer_id = m->cep;
	cep->peer_qpn = m->qpn;
	cep->ird = min(cep->ird, m->ord);
	cep->ord = min(cep->ord, m->ird);
	rc = ntrdma_qp_cm_connect(cep->qp, m->qpn, cep->ird, cep->ord,
				  loopback);
	if (rc) {
		cm_connect_failed(cep, rc, NULL, 0);
		goto out;
	}
	cep->state = CEP_ESTABLISHED;
	cep->notify_peer = true;
	cancel_delayed_work(&cep->timeout);
	cm_event(cep, cep->cm_id, IW_CM_EVENT_CONNECT_REPLY, 0, m->pdata,
		 m->pdata_len);
out:
	mutex_unlock(&nib->cm_mutex);
	return rc;
}

static int cm_reject(struct ntrdma_ib *nib, const struct ntrdma_wire_cm *m,
		     bool loopback)
{
	struct ntrdma_cep *cep;

	mutex_lock(&nib->cm_mutex);
	cep = cm_find(nib, m->peer_cep, m->cep, CEP_CONNECTING, loopback);
	if (cep)
		cm_connect_failed(cep, -ECONNREFUSED, m->pdata, m->pdata_len);
	mutex_unlock(&nib->cm_mutex);
	return 0;
}

/* ---- passive side ---- */

/*
 * Room for one more request at listener @l (cm_mutex): within its backlog
 * and the device's cap. Else it is refused at once, so that a peer cannot
 * make us keep records beyond them (each would wait for its timeout).
 */
static bool cm_req_room(struct ntrdma_ib *nib, struct ntrdma_cm_listener *l)
{
	lockdep_assert_held(&nib->cm_mutex);
	if (l->pending < l->backlog && nib->cm_pending < NTRDMA_CM_PENDING_MAX)
		return true;
	ibdev_info_ratelimited(&nib->ibdev,
			       "connection request refused: %u of backlog %u pending at its listener, %u of %u at the device\n",
			       l->pending, l->backlog, nib->cm_pending,
			       NTRDMA_CM_PENDING_MAX);
	return false;
}

/* A new passive record for request @m at listener @l (cm_mutex). */
static struct ntrdma_cep *cm_req_cep(struct ntrdma_ib *nib,
				     struct ntrdma_cm_listener *l,
				     const struct ntrdma_wire_cm *m,
				     bool loopback)
{
	struct ntrdma_cep *cep = cm_cep_alloc(nib);

	if (!cep)
		return NULL;
	cep->state = CEP_REQ_RCVD;
	cep->loopback = loopback;
	cep->peer_id = m->cep;
	cep->peer_qpn = m->qpn;
	cep->ird = min_t(u8, m->ord, NTRDMA_MAX_RD_ATOM);
	cep->ord = min_t(u8, m->ird, NTRDMA_MAX_RD_ATOM);
	cep->pending = true;
	cep->listener = l;
	nib->cm_pending++;
	l->pending++;
	return cep;
}

/*
 * A connection request: a listener takes it (0), or it is refused at once
 * (-ECONNREFUSED: no listener, no room, or the iw_cm dropped it).
 */
static int cm_req(struct ntrdma_ib *nib, const struct ntrdma_wire_cm *m,
		  bool loopback)
{
	struct ntrdma_cm_listener *l;
	struct sockaddr_storage d, s;
	struct ntrdma_cep *cep;
	int rc;

	if (m->family != AF_INET && m->family != AF_INET6)
		return -EINVAL;
	rc = -ECONNREFUSED;
	cm_sockaddr(&d, m->family, m->daddr, m->dport);
	cm_sockaddr(&s, m->family, m->saddr, m->sport);
	mutex_lock(&nib->cm_mutex);
	list_for_each_entry(l, &nib->cm_listeners, list) {
		if (!cm_listen_match(l->cm_id, &d))
			continue;
		if (!cm_req_room(nib, l))
			break;
		rc = -ENOMEM;
		cep = cm_req_cep(nib, l, m, loopback);
		if (!cep)
			break;
		cep->laddr = d;
		cep->raddr = s;
		/* The iw_cm makes a cm_id for it, provider_data = its id. */
		rc = cm_event(cep, l->cm_id, IW_CM_EVENT_CONNECT_REQUEST, 0,
			      m->pdata, m->pdata_len);
		if (rc) {	/* its backlog is full: it never answers */
			cm_cep_detach(cep);
			rc = -ECONNREFUSED;
			break;
		}
		queue_delayed_work(nib->cm_wq, &cep->timeout,
				   msecs_to_jiffies(2 * NTRDMA_CM_TIMEOUT_MS));
		break;
	}
	mutex_unlock(&nib->cm_mutex);
	return rc;
}

/* The passive cep of @cm_id in @state (cm_mutex held). */
static struct ntrdma_cep *cm_of(struct iw_cm_id *cm_id,
				enum ntrdma_cep_state state)
{
	u32 id = (uintptr_t)cm_id->provider_data;
	struct ntrdma_cep *cep;

	cep = id ? xa_load(&to_nib(cm_id->device)->cep_xa, id) : NULL;
	if (!cep || cep->state != state)
		return NULL;
	return cep;
}

static int cm_send_answer(struct ntrdma_ib *nib, u16 op,
			  const struct cm_end *to, u32 qpn, u8 ird, u8 ord,
			  const void *pdata, u8 pdata_len)
{
	struct ntrdma_wire_cm *m = kzalloc(NTRDMA_CMD_DATA, GFP_KERNEL);
	int rc;

	if (!m)
		return -ENOMEM;
	m->cep = to->id;
	m->peer_cep = to->peer_id;
	m->qpn = qpn;
	m->ack_msn = to->ack_msn;
	m->ird = ird;
	m->ord = ord;
	m->pdata_len = pdata_len;
	if (pdata_len)
		memcpy(m->pdata, pdata, pdata_len);
	rc = cm_call(nib, op, m, to->loopback);
	kfree(m);
	return rc;
}

int ntrdma_iw_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *param)
{
	struct ntrdma_ib *nib = to_nib(cm_id->device);
	struct ntrdma_cep *cep;
	struct ntrdma_qp *qp;
	struct cm_end to;
	u32 qpn;
	u8 ird, ord;
	int rc;

	if (param->private_data_len > NTRDMA_CM_PDATA_MAX)
		return -EINVAL;
	mutex_lock(&nib->cm_mutex);
	cep = cm_of(cm_id, CEP_REQ_RCVD);
	qp = cm_get_qp(nib, param->qpn);
	rc = -EINVAL;
	if (!cep || !qp || qp->cep)
		goto out_unlock;
	cep->ird = min_t(u32, cep->ird, param->ird);
	cep->ord = min_t(u32, cep->ord, param->ord);
	rc = ntrdma_qp_cm_connect(qp, cep->peer_qpn, cep->ird, cep->ord,
				  cep->loopback);
	if (rc)
		goto out_unlock;
	cm_unpend(cep);		/* bound by the QP from now on */
	cep->qp = qp;
	cm_qp_attach(qp, cep);
	cm_id->add_ref(cm_id);
	cep->cm_id = cm_id;
	cep->state = CEP_ACCEPTING;
	cep->notify_peer = true;
	/* What the answer needs, read while the cep cannot go away. */
	to = (struct cm_end){ cep->id, cep->peer_id, cep->loopback };
	qpn = qp->ibqp.qp_num;
	ird = cep->ird;
	ord = cep->ord;
	mutex_unlock(&nib->cm_mutex);

	rc = cm_send_answer(nib, NTRDMA_CMD_CM_ACCEPT, &to, qpn, ird, ord,
			    param->private_data, param->private_data_len);
	ntrdma_fault_pause(nib->ndev, "accept");

	mutex_lock(&nib->cm_mutex);
	cep = xa_load(&nib->cep_xa, to.id);
	if (!cep || cep->state != CEP_ACCEPTING) {
		/* The QP ended meanwhile: the accept fails. */
		rc = -ECONNRESET;
		goto out_unlock;
	}
	if (rc) {
		/* No ESTABLISHED follows a failed accept: iw_cm cleans up. */
		cm_cep_detach(cep);
		goto out_unlock;
	}
	cep->state = CEP_ESTABLISHED;
	cm_event(cep, cm_id, IW_CM_EVENT_ESTABLISHED, 0, NULL, 0);
	/* The other end left before our accept heard back: it closes now. */
	if (cep->disc_rcvd)
		ntrdma_qp_cm_disconnected(cep->qp);
out_unlock:
	mutex_unlock(&nib->cm_mutex);
	return rc;
}

int ntrdma_iw_reject(struct iw_cm_id *cm_id, const void *pdata, u8 pdata_len)
{
	struct ntrdma_ib *nib = to_nib(cm_id->device);
	struct ntrdma_cep *cep;
	struct cm_end to;

	if (pdata_len > NTRDMA_CM_PDATA_MAX)
		pdata_len = NTRDMA_CM_PDATA_MAX;
	mutex_lock(&nib->cm_mutex);
	cep = cm_of(cm_id, CEP_REQ_RCVD);
	if (!cep) {
		mutex_unlock(&nib->cm_mutex);
		return -EINVAL;
	}
	to = (struct cm_end){ cep->id, cep->peer_id, cep->loopback };
	cm_cep_detach(cep);
	mutex_unlock(&nib->cm_mutex);
	/* Best effort: a peer that is gone has failed its connect anyway. */
	cm_send_answer(nib, NTRDMA_CMD_CM_REJECT, &to, 0, 0, 0, pdata,
		       pdata_len);
	return 0;
}

int ntrdma_iw_create_listen(struct iw_cm_id *cm_id, int backlog)
{
	struct ntrdma_ib *nib = to_nib(cm_id->device);
	struct ntrdma_cm_listener *l;

	if (cm_id->m_local_addr.ss_family != AF_INET &&
	    cm_id->m_local_addr.ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		return -ENOMEM;
	cm_id->add_ref(cm_id);
	l->cm_id = cm_id;
	/* the iw_cm's work entries for its events: no more can be told */
	l->backlog = clamp(backlog, 1, NTRDMA_CM_PENDING_MAX);
	mutex_lock(&nib->cm_mutex);
	list_add_tail(&l->list, &nib->cm_listeners);
	mutex_unlock(&nib->cm_mutex);
	return 0;
}

int ntrdma_iw_destroy_listen(struct iw_cm_id *cm_id)
{
	struct ntrdma_ib *nib = to_nib(cm_id->device);
	struct ntrdma_cm_listener *l, *found = NULL;
	struct ntrdma_cep *cep;
	unsigned long id;

	mutex_lock(&nib->cm_mutex);
	list_for_each_entry(l, &nib->cm_listeners, list) {
		if (l->cm_id == cm_id) {
			list_del(&l->list);
			found = l;
			break;
		}
	}
	/* its requests still pending count for the device only */
	xa_for_each(&nib->cep_xa, id, cep)
		if (found && cep->listener == found)
			cep->listener = NULL;
	mutex_unlock(&nib->cm_mutex);
	if (!found)
		return -EINVAL;
	cm_id->rem_ref(cm_id);
	kfree(found);
	return 0;
}

/* ---- the end of a connection ---- */

/*
 * An established or accepting @cep ends (cm_mutex held): the caller sends
 * DISC to the peer if it does not know yet. CLOSE only follows an
 * established connection (the iw_cm BUG()s otherwise); an accept in flight
 * fails instead.
 */
static void cm_close_locked(struct ntrdma_cep *cep, struct cm_end *disc)
{
	if (cep->notify_peer)
		*disc = (struct cm_end){ cep->id, cep->peer_id,
					  cep->loopback };
	if (cep->notify_peer && cep->qp)
		disc->ack_msn = NTRDMA_CM_ACKED |
				ntrdma_resp_next_msn(cep->qp);
	if (cep->cm_id && cep->state == CEP_ESTABLISHED)
		cm_event(cep, cep->cm_id, IW_CM_EVENT_CLOSE, 0, NULL, 0);
	cm_cep_detach(cep);
}

static void cm_close_work(struct work_struct *work)
{
	struct ntrdma_cep *cep = container_of(work, struct ntrdma_cep,
					      close_work);
	struct ntrdma_ib *nib = cep->nib;
	struct cm_end disc = {};

	mutex_lock(&nib->cm_mutex);
	if (cep->state == CEP_ESTABLISHED || cep->state == CEP_ACCEPTING)
		cm_close_locked(cep, &disc);
	mutex_unlock(&nib->cm_mutex);
	/* @cep may be gone now (its free work runs after this one). */
	if (disc.id)
		cm_send_answer(nib, NTRDMA_CMD_CM_DISC, &disc, 0, 0, 0, NULL,
			       0);
}

static int cm_disc(struct ntrdma_ib *nib, const struct ntrdma_wire_cm *m,
		   bool loopback)
{
	struct ntrdma_cep *cep;

	mutex_lock(&nib->cm_mutex);
	cep = cm_find(nib, m->peer_cep, m->cep, CEP_ESTABLISHED, loopback);
	if (cep) {
		cep->notify_peer = false;	/* it knows */
		/*
		 * What the peer executed completes first (its ACKs may still
		 * be on the data path), then the QP flushes; its move to ERR
		 * closes the connection.
		 */
		if (cep->qp && (m->ack_msn & NTRDMA_CM_ACKED))
			ntrdma_req_peer_acked(cep->qp, m->ack_msn);
		if (cep->qp)
			ntrdma_qp_cm_disconnected(cep->qp);
	}
	/*
	 * The other end saw our ACCEPT and left before its answer reached
	 * our accept: remembered, the close follows ESTABLISHED there.
	 */
	cep = cep ? NULL : cm_find(nib, m->peer_cep, m->cep, CEP_ACCEPTING,
				   loopback);
	if (cep) {
		cep->notify_peer = false;
		cep->disc_rcvd = true;
	}
	mutex_unlock(&nib->cm_mutex);
	return 0;
}

/*
 * @qp left the connected states (ERR, SQD, RESET), sq_lock held, any
 * context: its connection, if any, ends from a work item.
 */
void ntrdma_cm_qp_down(struct ntrdma_qp *qp)
{
	struct ntrdma_cep *cep = qp->cep;

	if (cep)
		queue_work(cep->nib->cm_wq, &cep->close_work);
}

/*
 * destroy_qp: end the QP's connection now and wait until the iw_cm has let
 * go of the QP. Process context.
 */
void ntrdma_cm_qp_destroy(struct ntrdma_qp *qp)
{
	struct ntrdma_ib *nib = to_nib(qp->ibqp.device);
	struct cm_end disc = {};
	struct ntrdma_cep *cep;

	mutex_lock(&nib->cm_mutex);
	cep = qp->cep;
	if (cep && cep->state == CEP_CONNECTING)
		cm_connect_failed(cep, -ECONNRESET, NULL, 0);
	else if (cep)
		cm_close_locked(cep, &disc);
	mutex_unlock(&nib->cm_mutex);
	if (disc.id)
		cm_send_answer(nib, NTRDMA_CMD_CM_DISC, &disc, 0, 0, 0, NULL,
			       0);
	wait_event(qp->cm_wait, !atomic_read(&qp->iw_refs));
}

/* Link loss: every connect to the peer still waiting fails (established
 * ones close through their QPs going to ERR); loopback ones go on.
 */
void ntrdma_cm_link_down(struct ntrdma_ib *nib)
{
	struct ntrdma_cep *cep;
	unsigned long id;

	mutex_lock(&nib->cm_mutex);
	xa_for_each(&nib->cep_xa, id, cep) {
		if (cep->state == CEP_CONNECTING && !cep->loopback)
			cm_connect_failed(cep, -ECONNRESET, NULL, 0);
	}
	mutex_unlock(&nib->cm_mutex);
}

/* ---- QP references for the iw_cm ---- */

void ntrdma_iw_add_ref(struct ib_qp *ibqp)
{
	atomic_inc(&to_nqp(ibqp)->iw_refs);
}

void ntrdma_iw_rem_ref(struct ib_qp *ibqp)
{
	struct ntrdma_qp *qp = to_nqp(ibqp);

	if (atomic_dec_and_test(&qp->iw_refs))
		wake_up(&qp->cm_wait);
}

struct ib_qp *ntrdma_iw_get_qp(struct ib_device *ibdev, int qpn)
{
	struct ntrdma_qp *qp = cm_get_qp(to_nib(ibdev), qpn);

	return qp ? &qp->ibqp : NULL;
}

/* ---- the messages' ways: the command channel, or straight to us ---- */

/* A message from the peer (command channel): checked, then handled. */
#define CM_WIRE_FN(name)						\
static int name##_fn(void *ctx, const void *req, u16 len, void *rsp,	\
		     u16 *rsp_len)					\
{									\
	const struct ntrdma_wire_cm *m;					\
	int rc = cm_msg(req, len, rsp_len, &m);				\
									\
	return rc ? rc : name(ctx, m, false);				\
}

CM_WIRE_FN(cm_req)
CM_WIRE_FN(cm_accept)
CM_WIRE_FN(cm_reject)
CM_WIRE_FN(cm_disc)

/* Each message: its handler, and its checking entry from the wire. */
static const struct {
	u16 op;
	int (*handle)(struct ntrdma_ib *nib, const struct ntrdma_wire_cm *m,
		      bool loopback);
	ntrdma_cmd_fn wire;
} cm_ops[] = {
	{ NTRDMA_CMD_CM_REQ, cm_req, cm_req_fn },
	{ NTRDMA_CMD_CM_ACCEPT, cm_accept, cm_accept_fn },
	{ NTRDMA_CMD_CM_REJECT, cm_reject, cm_reject_fn },
	{ NTRDMA_CMD_CM_DISC, cm_disc, cm_disc_fn },
};

/*
 * Send @m (op @op) to the other end: the peer through the command channel
 * (no cm_mutex held: the answer comes through the work that runs the
 * peer's requests), or, for a loopback connection, our own handler.
 */
static int cm_call(struct ntrdma_ib *nib, u16 op,
		   const struct ntrdma_wire_cm *m, bool loopback)
{
	int i;

	if (!loopback)
		return ntrdma_cmd_call(nib->ndev, op, m,
				       sizeof(*m) + m->pdata_len, NULL, 0,
				       NULL, NTRDMA_CMD_TIMEOUT_MS);
	for (i = 0; i < ARRAY_SIZE(cm_ops); i++)
		if (cm_ops[i].op == op)
			return cm_ops[i].handle(nib, m, true);
	return -EINVAL;
}

/* ---- debugfs ---- */

/**
 * ntrdma_cm_show() - the connection records, for debugfs verbs
 * @s: the file
 * @nib: the verbs device
 */
void ntrdma_cm_show(struct seq_file *s, struct ntrdma_ib *nib)
{
	struct ntrdma_cep *cep;
	unsigned long id;
	u32 all = 0, pending = 0;

	mutex_lock(&nib->cm_mutex);
	xa_for_each(&nib->cep_xa, id, cep) {
		all++;
		if (cep->state == CEP_REQ_RCVD)
			pending++;
	}
	mutex_unlock(&nib->cm_mutex);
	seq_printf(s, "cm_records: %u\ncm_pending: %u\ncm_pending_max: %u\n",
		   all, pending, NTRDMA_CM_PENDING_MAX);
}

#ifdef NTRDMA_TEST_HOOKS
/**
 * ntrdma_cm_test_flood() - test builds: connection requests to the peer
 * @nib: the verbs device
 * @n: how many
 * @addr: the IPv4 address they ask for
 * @port: and the port
 * @f: their answers (refused: -ECONNREFUSED)
 *
 * Each has a connection id of its own that names no record of ours: the
 * peer's later answers to it find nothing here. One at a time, as a
 * flooding peer's kernel would send them.
 *
 * Return: 0, -EINTR on a fatal signal, -ENOMEM.
 */
int ntrdma_cm_test_flood(struct ntrdma_ib *nib, u32 n, __be32 addr,
			 __be16 port, struct ntrdma_flood *f)
{
	struct ntrdma_wire_cm *m = kzalloc(sizeof(*m), GFP_KERNEL);
	u32 i;
	int rc = 0;

	if (!m)
		return -ENOMEM;
	m->family = AF_INET;
	m->dport = port;
	m->sport = htons(40000);
	memcpy(m->daddr, &addr, 4);
	memcpy(m->saddr, &addr, 4);
	m->saddr[3] ^= 0xff;
	for (i = 0; i < n; i++) {
		if (fatal_signal_pending(current)) {
			rc = -EINTR;
			break;
		}
		m->cep = BIT(31) | i;
		m->qpn = 0x800000 | (i & 0x7fffff);
		ntrdma_flood_count(f, ntrdma_cmd_call(nib->ndev,
						      NTRDMA_CMD_CM_REQ, m,
						      sizeof(*m), NULL, 0,
						      NULL,
						      NTRDMA_CMD_TIMEOUT_MS),
				   -ECONNREFUSED);
		if (f->last_rc == -ENOLINK)
			break;
		cond_resched();
	}
	kfree(m);
	return rc;
}
#endif

/* ---- set-up ---- */

int ntrdma_cm_init(struct ntrdma_ib *nib)
{
	int i, rc;

	mutex_init(&nib->cm_mutex);
	INIT_LIST_HEAD(&nib->cm_listeners);
	xa_init_flags(&nib->cep_xa, XA_FLAGS_ALLOC1);
	nib->cm_wq = alloc_workqueue("ntrdma_cm", 0, 0);
	if (!nib->cm_wq)
		return -ENOMEM;
	for (i = 0; i < ARRAY_SIZE(cm_ops); i++) {
		rc = ntrdma_cmd_register(nib->ndev, cm_ops[i].op,
					 cm_ops[i].wire, nib);
		if (rc) {
			while (i--)
				ntrdma_cmd_unregister(nib->ndev,
						      cm_ops[i].op);
			destroy_workqueue(nib->cm_wq);
			return rc;
		}
	}
	return 0;
}

/*
 * After ib_unregister_device(): no cm_id or QP is left, so no listener
 * either; a request nobody answered may be (the iw_cm drops one that meets
 * a listener going away).
 */
void ntrdma_cm_fini(struct ntrdma_ib *nib)
{
	struct ntrdma_cep *cep;
	unsigned long id;
	int i;

	for (i = 0; i < ARRAY_SIZE(cm_ops); i++)
		ntrdma_cmd_unregister(nib->ndev, cm_ops[i].op);
	mutex_lock(&nib->cm_mutex);
	xa_for_each(&nib->cep_xa, id, cep)
		cm_cep_detach(cep);
	mutex_unlock(&nib->cm_mutex);
	destroy_workqueue(nib->cm_wq);	/* drains the free works */
	WARN_ON(!list_empty(&nib->cm_listeners));
	xa_destroy(&nib->cep_xa);
	mutex_destroy(&nib->cm_mutex);
}
