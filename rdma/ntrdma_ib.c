// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * NTRDMA verbs face: one ib_device per ntrdma device (ntrdma%d), port 1
 * bound to the device's netdev (ntr%d), port state following the shared
 * link: PORT_ACTIVE once this face's data path for the session runs,
 * PORT_ERR as it ends.
 *
 * Node type and link layer: an InfiniBand CA whose port has an InfiniBand
 * link layer, not RoCE (and not iWARP as the earlier NTRDMA was). Why:
 *  - Our link is point to point and QPs are connected by telling each side
 *    the other's QP number: the IB model (modify_qp to RTR with dest_qp_num)
 *    that ibv_rc_pingpong, perftest and qperf use directly. On an iWARP
 *    device RTS is only reached through iw_cm (perftest forces rdma_cm on
 *    iWARP), so every tool would need a connection manager first.
 *  - On a RoCE port the RDMA core demands a GRH in every address vector;
 *    qperf (without -cm1) connects with a LID only, so it cannot run on a
 *    RoCE port without rdma_cm. An IB port takes both: a LID (ours is the
 *    device index + 1) or a GRH naming GID 0 (fe80::EUI-64 of ntr%d's
 *    MAC). The address vector itself selects nothing: there is one peer.
 * The port does NOT advertise the MAD, SMI, SA or CM capabilities (so
 * ib_mad, ib_umad, ib_sa and ib_cm leave it alone): there is no subnet
 * manager, the port is ACTIVE whenever the shared link is up. The netdev
 * tie (rdma link: netdev ntr%d) is kept for users.
 *
 * rdma_cm accepts an IB-protocol port only behind an IPoIB netdev, and
 * ntr%d is Ethernet; it also asks port 1 alone whether a device can
 * listen. So the port's core protocol is iWARP with the iw_cm capability
 * (connections through ntrdma_iwcm.c over the command channel), while what
 * users see stays InfiniBand: the link layer, the LID, GID 0. GID 1 holds
 * the netdev's MAC, the key by which rdma_cm finds an iWARP port.
 */

#include <linux/etherdevice.h>
#include <linux/seq_file.h>
#include <net/addrconf.h>
#include <rdma/ib_mad.h>
#include <rdma/iw_cm.h>

#include "ntrdma_faces.h"
#include "ntrdma_ib.h"

/* ---- ucontext ---- */

static int ntrdma_alloc_ucontext(struct ib_ucontext *ibuc,
				 struct ib_udata *udata)
{
	struct ntrdma_alloc_ucontext_resp resp = {
		.abi_version = NTRDMA_UVERBS_ABI_VERSION,
		.max_sge = NTRDMA_MAX_SGE,
		.max_inline = NTRDMA_MAX_INLINE,
		.ring_ctl_size = NTRDMA_RING_CTL_SIZE,
		.cqe_size = sizeof(struct ntrdma_cqe),
		.send_wqe_size = sizeof(struct ntrdma_send_wqe),
		.recv_wqe_size = sizeof(struct ntrdma_recv_wqe),
	};

	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	if (ntrdma_check_udata_in(udata))
		return -EOPNOTSUPP;
	return ib_copy_to_udata(udata, &resp, sizeof(resp));
}

static void ntrdma_dealloc_ucontext(struct ib_ucontext *ibuc)
{
}

/* Unload with users: the core zaps their mappings; nothing else to do. */
static void ntrdma_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* ---- device and port queries ---- */

static int ntrdma_query_device(struct ib_device *ibdev,
			       struct ib_device_attr *attr,
			       struct ib_udata *udata)
{
	if (udata->inlen || udata->outlen)
		return -EINVAL;

	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = NTRDMA_VERSION;
	attr->sys_image_guid = ibdev->node_guid;
	attr->max_mr_size = NTRDMA_MAX_MR_SIZE;
	attr->page_size_cap = PAGE_SIZE;
	attr->vendor_id = NTRDMA_VENDOR_ID;
	attr->vendor_part_id = NTRDMA_VENDOR_PART_ID;
	attr->hw_ver = 1;
	attr->max_qp = NTRDMA_MAX_QP;
	attr->max_qp_wr = NTRDMA_MAX_QP_WR;
	attr->device_cap_flags = IB_DEVICE_MEM_MGT_EXTENSIONS |
				 IB_DEVICE_MEM_WINDOW |
				 IB_DEVICE_MEM_WINDOW_TYPE_2B;
	attr->max_send_sge = NTRDMA_MAX_SGE;
	attr->max_recv_sge = NTRDMA_MAX_SGE;
	attr->max_sge_rd = NTRDMA_MAX_SGE;
	attr->max_cq = NTRDMA_MAX_CQ;
	attr->max_cqe = NTRDMA_MAX_CQE;
	attr->max_mr = NTRDMA_MAX_MR;
	attr->max_mw = NTRDMA_MAX_MR;	/* they share the key table */
	attr->max_pd = NTRDMA_MAX_PD;
	attr->max_qp_rd_atom = NTRDMA_MAX_RD_ATOM;
	attr->max_qp_init_rd_atom = NTRDMA_MAX_RD_ATOM;
	attr->max_res_rd_atom = NTRDMA_MAX_RD_ATOM * NTRDMA_MAX_QP;
	attr->max_srq = NTRDMA_MAX_SRQ;
	attr->max_srq_wr = NTRDMA_MAX_SRQ_WR;
	attr->max_srq_sge = NTRDMA_MAX_SGE;
	/* Atomics run on the responder's CPU under one device-wide lock:
	 * atomic among this device's atomics (no memory windows).
	 */
	attr->atomic_cap = IB_ATOMIC_HCA;
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = 15;
	attr->max_fast_reg_page_list_len = NTRDMA_MAX_FRPL;
	attr->max_pi_fast_reg_page_list_len = 0;
	return 0;
}

/* Our LID: the device index + 1 (nothing routes on it: one peer). */
static u16 ntrdma_ib_lid(struct ntrdma_ib *nib)
{
	return (ntrdma_dev_index(nib->ndev) & 0x3fff) + 1;
}

static int ntrdma_query_port(struct ib_device *ibdev, u32 port,
			     struct ib_port_attr *attr)
{
	struct ntrdma_ib *nib = to_nib(ibdev);
	bool up = READ_ONCE(nib->port_up);

	/* The core zeroed attr (or filled in the netdev's view: ours wins). */
	attr->state = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = up ? IB_PORT_PHYS_STATE_LINK_UP :
				IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = IB_MTU_4096;
	attr->gid_tbl_len = NTRDMA_GID_TBL_LEN;
	attr->port_cap_flags = 0;
	attr->lid = ntrdma_ib_lid(nib);
	attr->sm_lid = attr->lid;
	attr->lmc = 0;
	attr->max_msg_sz = 1U << 31;
	attr->pkey_tbl_len = 1;
	attr->active_width = IB_WIDTH_4X;
	attr->active_speed = IB_SPEED_EDR;
	return 0;
}

/**
 * ntrdma_ib_gid0() - the device's GID 0: link-local, from its node GUID
 * @ibdev: the device
 * @gid: filled in
 */
void ntrdma_ib_gid0(struct ib_device *ibdev, union ib_gid *gid)
{
	gid->global.subnet_prefix = cpu_to_be64(0xfe80000000000000ULL);
	gid->global.interface_id = ibdev->node_guid;
}

static int ntrdma_query_gid(struct ib_device *ibdev, u32 port, int index,
			    union ib_gid *gid)
{
	struct net_device *netdev;

	if (index >= NTRDMA_GID_TBL_LEN)
		return -EINVAL;
	memset(gid, 0, sizeof(*gid));
	if (index == 1) {
		/* iWARP style: the MAC (what rdma_cm looks an address up by). */
		netdev = ntrdma_dev_netdev(to_nib(ibdev)->ndev);
		if (netdev)
			memcpy(gid->raw, netdev->dev_addr, ETH_ALEN);
		return 0;
	}
	ntrdma_ib_gid0(ibdev, gid);
	return 0;
}

/**
 * ntrdma_ib_av_is_local() - whether an address vector names our own port
 * @ibdev: the device
 * @ah: the address vector (modify_qp to RTR)
 *
 * The RDMA core passes no LID to a port whose core protocol is iWARP
 * (rdma_ah_set_dlid() keeps it for IB and OPA address types only), so
 * only a GRH can name our port: its DGID is one of our (non-zero) GIDs.
 * Every other address vector names the peer.
 *
 * Return: true for a QP of this device as the destination.
 */
bool ntrdma_ib_av_is_local(struct ib_device *ibdev,
			   const struct rdma_ah_attr *ah)
{
	const union ib_gid *dgid;
	union ib_gid gid;
	int i;

	if (!(rdma_ah_get_ah_flags(ah) & IB_AH_GRH))
		return false;
	dgid = &rdma_ah_read_grh(ah)->dgid;
	for (i = 0; i < NTRDMA_GID_TBL_LEN; i++) {
		if (ntrdma_query_gid(ibdev, 1, i, &gid) ||
		    !memchr_inv(&gid, 0, sizeof(gid)))
			continue;
		if (!memcmp(&gid, dgid, sizeof(gid)))
			return true;
	}
	return false;
}

static int ntrdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			     u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static int ntrdma_get_port_immutable(struct ib_device *ibdev, u32 port,
				     struct ib_port_immutable *immutable)
{
	struct ib_port_attr attr = {};
	int rc;

	/* ib_query_port() needs the protocol this decides. */
	rc = ntrdma_query_port(ibdev, port, &attr);
	if (rc)
		return rc;
	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	/* iw_cm for rdma_cm; no MAD/SMI/SA (no subnet manager; see top). */
	immutable->core_cap_flags = RDMA_CORE_PORT_IWARP;
	immutable->max_mad_size = 0;
	return 0;
}

static enum rdma_link_layer ntrdma_get_link_layer(struct ib_device *ibdev,
						  u32 port)
{
	return IB_LINK_LAYER_INFINIBAND;
}

static void ntrdma_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u", NTRDMA_VERSION);
}

/* ---- hardware counters (rdma statistic) ---- */

static const struct rdma_stat_desc ntrdma_hw_desc[NTRDMA_HW_NSTATS] = {
	[NTRDMA_HW_TX_SEGS] = { .name = "tx_segments" },
	[NTRDMA_HW_TX_BYTES] = { .name = "tx_bytes" },
	[NTRDMA_HW_RX_SEGS] = { .name = "rx_segments" },
	[NTRDMA_HW_RX_BYTES] = { .name = "rx_bytes" },
	[NTRDMA_HW_RX_INVALID] = { .name = "rx_invalid" },
	[NTRDMA_HW_RX_NO_QP] = { .name = "rx_no_qp" },
	[NTRDMA_HW_RX_DROPPED] = { .name = "rx_dropped" },
	[NTRDMA_HW_RNR_NAK_SENT] = { .name = "rnr_nak_sent" },
	[NTRDMA_HW_RNR_NAK_RCVD] = { .name = "rnr_retries" },
	[NTRDMA_HW_NAK_SENT] = { .name = "nak_sent" },
	[NTRDMA_HW_NAK_RCVD] = { .name = "nak_received" },
	[NTRDMA_HW_LOCAL_ERR] = { .name = "local_errors" },
	[NTRDMA_HW_ACK_TIMEOUTS] = { .name = "ack_timeouts" },
	[NTRDMA_HW_NAK_NO_QP_SENT] = { .name = "nak_no_qp_sent" },
	[NTRDMA_HW_PLACED_WRITES] = { .name = "placed_writes" },
	[NTRDMA_HW_PLACED_BYTES] = { .name = "placed_bytes" },
	[NTRDMA_HW_PLACED_DMA_BYTES] = { .name = "placed_dma_bytes" },
	[NTRDMA_HW_PULLED_READS] = { .name = "pulled_reads" },
	[NTRDMA_HW_PUSHED_READS] = { .name = "pushed_reads" },
	[NTRDMA_HW_UD_DROPPED] = { .name = "ud_dropped" },
	[NTRDMA_HW_RX_POLLED] = { .name = "rx_polled" },
	[NTRDMA_HW_UC_DROPPED] = { .name = "uc_dropped" },
	[NTRDMA_HW_PLACED_SENDS] = { .name = "placed_sends" },
};

static struct rdma_hw_stats *ntrdma_alloc_hw_port_stats(struct ib_device *ibdev,
							u32 port)
{
	return rdma_alloc_hw_stats_struct(ntrdma_hw_desc, NTRDMA_HW_NSTATS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int ntrdma_get_hw_stats(struct ib_device *ibdev,
			       struct rdma_hw_stats *stats, u32 port, int index)
{
	struct ntrdma_ib *nib = to_nib(ibdev);
	int i;

	for (i = 0; i < NTRDMA_HW_NSTATS; i++)
		stats->value[i] = atomic64_read(&nib->hw[i]);
	return NTRDMA_HW_NSTATS;
}

static const struct ib_device_ops ntrdma_ib_ops = {
	.owner = THIS_MODULE,
	.uverbs_abi_ver = NTRDMA_UVERBS_ABI_VERSION,
	.driver_id = RDMA_DRIVER_UNKNOWN,

	.alloc_hw_port_stats = ntrdma_alloc_hw_port_stats,
	.alloc_mr = ntrdma_alloc_mr,
	.alloc_mw = ntrdma_alloc_mw,
	.alloc_pd = ntrdma_alloc_pd,
	.alloc_ucontext = ntrdma_alloc_ucontext,
	.create_cq = ntrdma_create_cq,
	.create_qp = ntrdma_create_qp,
	.create_srq = ntrdma_create_srq,
	.dealloc_pd = ntrdma_dealloc_pd,
	.dealloc_ucontext = ntrdma_dealloc_ucontext,
	.dealloc_mw = ntrdma_dealloc_mw,
	.dereg_mr = ntrdma_dereg_mr,
	.destroy_cq = ntrdma_destroy_cq,
	.destroy_qp = ntrdma_destroy_qp,
	.destroy_srq = ntrdma_destroy_srq,
	.disassociate_ucontext = ntrdma_disassociate_ucontext,
	.get_dev_fw_str = ntrdma_get_dev_fw_str,
	.get_dma_mr = ntrdma_get_dma_mr,
	.get_hw_stats = ntrdma_get_hw_stats,
	.get_link_layer = ntrdma_get_link_layer,
	.get_port_immutable = ntrdma_get_port_immutable,
	.iw_accept = ntrdma_iw_accept,
	.iw_add_ref = ntrdma_iw_add_ref,
	.iw_connect = ntrdma_iw_connect,
	.iw_create_listen = ntrdma_iw_create_listen,
	.iw_destroy_listen = ntrdma_iw_destroy_listen,
	.iw_get_qp = ntrdma_iw_get_qp,
	.iw_reject = ntrdma_iw_reject,
	.iw_rem_ref = ntrdma_iw_rem_ref,
	.map_mr_sg = ntrdma_map_mr_sg,
	.mmap = ntrdma_mmap,
	.mmap_free = ntrdma_mmap_free,
	.modify_qp = ntrdma_modify_qp,
	.modify_srq = ntrdma_modify_srq,
	.poll_cq = ntrdma_poll_cq,
	.post_recv = ntrdma_post_recv,
	.post_send = ntrdma_post_send,
	.post_srq_recv = ntrdma_post_srq_recv,
	.query_device = ntrdma_query_device,
	.query_gid = ntrdma_query_gid,
	.query_pkey = ntrdma_query_pkey,
	.query_port = ntrdma_query_port,
	.query_qp = ntrdma_query_qp,
	.query_srq = ntrdma_query_srq,
	.reg_user_mr = ntrdma_reg_user_mr,
	.rereg_user_mr = ntrdma_rereg_user_mr,
	.req_notify_cq = ntrdma_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_cq, ntrdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, ntrdma_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, ntrdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, ntrdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, ntrdma_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, ntrdma_ucontext, ibuc),
};

/* ---- registration ---- */

/* A new verbs device's tables, empty. */
static struct ntrdma_ib *ntrdma_nib_alloc(struct ntrdma_dev *ndev)
{
	struct ntrdma_ib *nib = ib_alloc_device(ntrdma_ib, ibdev);

	if (!nib)
		return NULL;
	nib->ndev = ndev;
	xa_init_flags(&nib->qp_xa, XA_FLAGS_ALLOC);
	mutex_init(&nib->qp_lock);
	/* irq-safe: placed SENDs' kicks look CQs up in hard irq */
	xa_init_flags(&nib->cq_xa, XA_FLAGS_ALLOC | XA_FLAGS_LOCK_IRQ);
	atomic_set(&nib->num_pd, 0);
	ida_init(&nib->pd_ida);
	atomic_set(&nib->num_srq, 0);
	spin_lock_init(&nib->atomic_lock);
	return nib;
}

static void ntrdma_nib_free(struct ntrdma_ib *nib)
{
	xa_destroy(&nib->qp_xa);
	xa_destroy(&nib->cq_xa);
	mutex_destroy(&nib->qp_lock);
	ida_destroy(&nib->pd_ida);
	ib_dealloc_device(&nib->ibdev);
}

/* The device's parts: keys, transport, loopback, exports, imports, cm. */
static int ntrdma_nib_parts_init(struct ntrdma_ib *nib)
{
	int rc;

	rc = ntrdma_mem_init(nib);
	if (rc)
		return rc;
	rc = ntrdma_vx_init(nib);
	if (rc)
		goto err_mem;
	rc = ntrdma_lo_init(nib);
	if (rc)
		goto err_vx;
	rc = ntrdma_export_init(nib);
	if (rc)
		goto err_lo;
	rc = ntrdma_rmr_init(nib);
	if (rc)
		goto err_export;
	rc = ntrdma_cm_init(nib);
	if (rc)
		goto err_rmr;
	return 0;

err_rmr:
	ntrdma_rmr_fini(nib);
err_export:
	ntrdma_export_fini(nib, true);
err_lo:
	ntrdma_lo_fini(nib);
err_vx:
	ntrdma_vx_fini(nib, true);	/* nothing was posted yet */
err_mem:
	ntrdma_mem_fini(nib);
	return rc;
}

/*
 * The parts go, the transport before the imports it places through. The
 * session is over; the peer left it unless @peer_quiet says not.
 */
static void ntrdma_nib_parts_fini(struct ntrdma_ib *nib, bool peer_quiet)
{
	ntrdma_cm_fini(nib);
	ntrdma_lo_fini(nib);
	ntrdma_vx_fini(nib, peer_quiet);
	ntrdma_rmr_fini(nib);
	ntrdma_export_fini(nib, peer_quiet);
	ntrdma_mem_fini(nib);
}

/* What the RDMA core publishes of the device, before it is registered. */
static void ntrdma_nib_describe(struct ntrdma_ib *nib,
				struct net_device *netdev)
{
	struct ib_device *ibdev = &nib->ibdev;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = num_online_cpus();
	ibdev->dev.parent = ntrdma_dev_parent(nib->ndev);
	strscpy(ibdev->node_desc, "NTRDMA (PCIe NTB)", sizeof(ibdev->node_desc));
	addrconf_addr_eui48((unsigned char *)&ibdev->node_guid,
			    netdev->dev_addr);
	ib_set_device_ops(ibdev, &ntrdma_ib_ops);
	/*
	 * Of the data path commands only POST_SEND, the doorbell: receives,
	 * polls and arming happen on the mapped rings (the core leaves
	 * POST_RECV, POLL_CQ and REQ_NOTIFY_CQ disabled).
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND);
	strscpy(ibdev->iw_ifname, netdev_name(netdev), sizeof(ibdev->iw_ifname));
	ibdev->iw_driver_flags = IW_F_NO_PORT_MAP;
}

static int ntrdma_ib_add(struct ntrdma_dev *ndev, void **priv)
{
	struct net_device *netdev = ntrdma_dev_netdev(ndev);
	struct ntrdma_ib *nib;
	int rc;

	if (!netdev)
		return -ENODEV;
	nib = ntrdma_nib_alloc(ndev);
	if (!nib)
		return -ENOMEM;
	rc = ntrdma_nib_parts_init(nib);
	if (rc)
		goto err_free;
	ntrdma_nib_describe(nib, netdev);
	rc = ib_device_set_netdev(&nib->ibdev, netdev, 1);
	if (rc)
		goto err_parts;
	/* No DMA device: the core uses virtual addresses (as rxe and siw). */
	rc = ib_register_device(&nib->ibdev, "ntrdma%d", NULL);
	if (rc)
		goto err_parts;
	*priv = nib;
	dev_info(ntrdma_dev_parent(ndev), "%s: verbs device %s on %s\n",
		 ntrdma_dev_name(ndev), dev_name(&nib->ibdev.dev),
		 netdev_name(netdev));
	return 0;

err_parts:
	ntrdma_nib_parts_fini(nib, true);	/* nothing was posted yet */
err_free:
	ntrdma_nib_free(nib);
	return rc;
}

/*
 * Before the netdev goes (the faces go in reverse order): the ib_device
 * holds a reference to it.
 */
static void ntrdma_ib_del(void *priv, bool peer_quiet)
{
	struct ntrdma_ib *nib = priv;

	ib_unregister_device(&nib->ibdev);	/* waits for/evicts users */
	WARN_ON(!xa_empty(&nib->qp_xa) || !xa_empty(&nib->cq_xa));
	ntrdma_nib_parts_fini(nib, peer_quiet);
	ntrdma_nib_free(nib);
}

static void ntrdma_ib_port_event(struct ntrdma_ib *nib,
				 enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &nib->ibdev,
		.event = type,
		.element.port_num = 1,
	};

	ib_dispatch_event(&ev);
}

static void ntrdma_ib_link_up(void *priv)
{
	struct ntrdma_ib *nib = priv;

	ntrdma_vx_start(nib);
	ntrdma_export_link_up(nib);
	/* Not before: a send in between would find no data path. */
	WRITE_ONCE(nib->port_up, true);
	ntrdma_ib_port_event(nib, IB_EVENT_PORT_ACTIVE);
}

/*
 * The session with the peer ended: the port goes down, and connected QPs
 * (their peer QPs belong to the old session and are gone) go to ERR.
 */
static void ntrdma_ib_link_down(void *priv)
{
	struct ntrdma_ib *nib = priv;

	WRITE_ONCE(nib->port_up, false);
	ntrdma_ib_port_event(nib, IB_EVENT_PORT_ERR);
	/* Sends in flight complete before the QPs are flushed. */
	ntrdma_vx_stop(nib);
	ntrdma_rmr_clear(nib);	/* no placement runs: the TQP stopped */
	ntrdma_qps_link_down(nib);
	ntrdma_cm_link_down(nib);
}

/* The verbs face's lines of debugfs info. */
static void ntrdma_ib_show(void *priv, struct seq_file *s)
{
	struct ntrdma_ib *nib = priv;

	seq_printf(s, "qp_exports_pending: %u\n",
		   ntrdma_export_qp_pending(nib));
}

/* The verbs face, as the module lists it (ntrdma_main.c). */
const struct ntrdma_face ntrdma_ib_face = {
	.name		= "verbs",
	.optional	= true,	/* without it Ethernet still runs */
	.add		= ntrdma_ib_add,
	.del		= ntrdma_ib_del,
	.link_up	= ntrdma_ib_link_up,
	.link_down	= ntrdma_ib_link_down,
	.show		= ntrdma_ib_show,
	.debugfs	= ntrdma_ib_debugfs,
};
