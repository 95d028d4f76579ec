/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The private provider interface of libibverbs, rdma-core 44 to 56
 * (IBVERBS_PRIVATE_34): our own declarations of exactly what the ntrdma
 * provider uses.
 *
 * rdma-core does not install its provider header (libibverbs/driver.h), and
 * this interface may change with any rdma-core release: a provider is built
 * for the releases its header was checked against. Everything
 * release-specific lives in this file, so moving to another rdma-core means
 * checking these declarations against that release's libibverbs/driver.h
 * and kern-abi.h: a release with the same PABI widens NTR_RDMA_CORE_FIRST/
 * LAST below, a new PABI gets its own ntrdma_private_abi<PABI>.h (CMakeLists.txt
 * picks the header by the IBVERBS_PRIVATE_<PABI> the library defines);
 * nothing else in the provider should need to change.
 *
 * Layouts below were written from the rdma-core 44.0 sources (struct and
 * member order matter: libibverbs reads these structures) and checked
 * against 56.0 (Debian 13 has 56.1, still IBVERBS_PRIVATE_34 and
 * lib<name>-rdmav34.so): driver.h and kern-abi.h did not change in anything
 * declared here. 56 only added ibv_cmd_create_cq_ex2(), a driver-data
 * argument to ibv_cmd_reg_dmabuf_mr() (neither used here), ibv_wr_opcode_str()
 * and a new name for PROVIDER_DRIVER()'s constructor. Its public verbs.h grew
 * (ibv_qp_ex.wr_flush at the end, ibv_port_attr.active_speed_ex, FLUSH
 * opcodes and flags); those layouts come from the installed verbs.h, so a
 * provider binary still belongs to the release it was built against: built
 * on 44, verbs_qp.comp_mask sits at 352 bytes, on 56 at 360, under the same
 * PABI and file name. rdma-core 57 moved to IBVERBS_PRIVATE_57; 34.x and
 * 35.x, also PRIVATE_34, had fewer context operations.
 */
#ifndef NTRDMA_PRIVATE_ABI34_H
#define NTRDMA_PRIVATE_ABI34_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#ifndef container_of
#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* The provider ABI number: also the suffix of verbs_register_driver_NN. */
#define NTR_IBVERBS_PABI_VERSION 34
/* The rdma-core releases this file was checked against (CMakeLists.txt). */
#define NTR_RDMA_CORE_FIRST 44
#define NTR_RDMA_CORE_LAST 56

/* ---- device matching and the device object (driver.h) ---- */

struct ntr_list_node {		/* ccan/list.h struct list_node */
	struct ntr_list_node *next, *prev;
};

enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;
};

/*
 * Match by device name: libibverbs builds "rdma_device:N<ibdev name>" and
 * fnmatch()es it against modalias entries (driver.h VERBS_NAME_MATCH).
 */
#define NTR_VERBS_NAME_MATCH(name_prefix)                                      \
	{ .u.modalias = "rdma_device:*N" name_prefix "*",                      \
	  .kind = VERBS_MATCH_MODALIAS }

struct verbs_sysfs_dev {
	struct ntr_list_node entry;
	void *provider_data;
	const struct verbs_match_ent *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;
	struct timespec time_created;
};

struct verbs_device;

struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd, void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

struct verbs_device {
	struct ibv_device device; /* must be first */
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct ntr_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

/* A QP that may carry the work request API (ibv_qp_ex). */
enum {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,	/* ibv_qp_to_qp_ex() returns qp_ex */
};

struct verbs_xrcd;

struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

/* A CQ that may carry the polling API of ibv_cq_ex. */
struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

/*
 * The context operations, in rdma-core 44's order. verbs_set_ops() copies
 * them by member, so the layout must match exactly; slots the provider
 * does not implement keep a generic type (all are function pointers).
 */
typedef void (*ntr_unused_op)(void);

struct verbs_context_ops {
	ntr_unused_op advise_mr;
	ntr_unused_op alloc_dm;
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	ntr_unused_op alloc_null_mr;
	ntr_unused_op alloc_parent_domain;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	ntr_unused_op alloc_td;
	ntr_unused_op async_event;
	ntr_unused_op attach_counters_point_flow;
	ntr_unused_op attach_mcast;
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	ntr_unused_op close_xrcd;
	ntr_unused_op cq_event;
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	ntr_unused_op create_counters;
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *attr);
	ntr_unused_op create_flow;
	ntr_unused_op create_flow_action_esp;
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	ntr_unused_op create_rwq_ind_table;
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	ntr_unused_op create_srq_ex;
	ntr_unused_op create_wq;
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	ntr_unused_op dealloc_td;
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	ntr_unused_op destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	ntr_unused_op destroy_flow;
	ntr_unused_op destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	ntr_unused_op destroy_rwq_ind_table;
	int (*destroy_srq)(struct ibv_srq *srq);
	ntr_unused_op destroy_wq;
	ntr_unused_op detach_mcast;
	void (*free_context)(struct ibv_context *context);
	ntr_unused_op free_dm;
	ntr_unused_op get_srq_num;
	ntr_unused_op import_dm;
	ntr_unused_op import_mr;
	ntr_unused_op import_pd;
	ntr_unused_op modify_cq;
	ntr_unused_op modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	ntr_unused_op modify_qp_rate_limit;
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			  int attr_mask);
	ntr_unused_op modify_wq;
	ntr_unused_op open_qp;
	ntr_unused_op open_xrcd;
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	ntr_unused_op post_srq_ops;
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	ntr_unused_op query_ece;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	ntr_unused_op query_qp_data_in_order;
	ntr_unused_op query_rt_values;
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	ntr_unused_op read_counters;
	ntr_unused_op reg_dm_mr;
	ntr_unused_op reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access);
	ntr_unused_op resize_cq;
	ntr_unused_op set_ece;
	ntr_unused_op unimport_dm;
	ntr_unused_op unimport_mr;
	ntr_unused_op unimport_pd;
};

_Static_assert(sizeof(struct verbs_context_ops) == 76 * sizeof(void *),
	       "rdma-core 44 to 56 have 76 context operations");

/* ---- command buffers (kern-abi.h): header + kernel payload ---- */

#define NTR_DECLARE_CMD(name, kabi)                                            \
	struct name {                                                          \
		struct ib_uverbs_cmd_hdr hdr;                                  \
		struct kabi core_payload;                                      \
	}

NTR_DECLARE_CMD(ibv_get_context, ib_uverbs_get_context);
NTR_DECLARE_CMD(ibv_query_port, ib_uverbs_query_port);
NTR_DECLARE_CMD(ibv_alloc_pd, ib_uverbs_alloc_pd);
NTR_DECLARE_CMD(ibv_alloc_mw, ib_uverbs_alloc_mw);
NTR_DECLARE_CMD(ibv_reg_mr, ib_uverbs_reg_mr);
NTR_DECLARE_CMD(ibv_rereg_mr, ib_uverbs_rereg_mr);
NTR_DECLARE_CMD(ibv_create_cq, ib_uverbs_create_cq);
NTR_DECLARE_CMD(ibv_create_qp, ib_uverbs_create_qp);
NTR_DECLARE_CMD(ibv_modify_qp, ib_uverbs_modify_qp);
NTR_DECLARE_CMD(ibv_query_qp, ib_uverbs_query_qp);
NTR_DECLARE_CMD(ibv_create_srq, ib_uverbs_create_srq);
NTR_DECLARE_CMD(ibv_modify_srq, ib_uverbs_modify_srq);
NTR_DECLARE_CMD(ibv_query_srq, ib_uverbs_query_srq);

/* ---- functions exported by libibverbs under IBVERBS_PRIVATE_34 ---- */

void verbs_register_driver_34(const struct verbs_device_ops *ops);

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);

int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_sz);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);

/* driver.h PROVIDER_DRIVER(): register the provider when it is dlopen()ed */
#define NTR_PROVIDER_DRIVER(ops)                                               \
	static __attribute__((constructor)) void ntr_register_driver(void)    \
	{                                                                      \
		verbs_register_driver_34(&(ops));                              \
	}

#endif /* NTRDMA_PRIVATE_ABI34_H */
