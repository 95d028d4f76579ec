// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The work request API of ibv_qp_ex (rdma/provider/ntrdma_wr.c): a QP made
// with ibv_create_qp_ex() and send_ops_flags posts through ibv_wr_start(),
// ibv_wr_<opcode>(), the setters and ibv_wr_complete(), as newer perftest
// and rdma-core's suite do. Between two QPs of one device (same-device
// loopback): both topologies.
#include <arpa/inet.h>

#include <thread>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

constexpr uint64_t kWrOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                            IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

class QpEx : public SameDevice {
  protected:
    // An RC QP of a_ with the WR API for @ops; nullptr and errno if refused.
    ibv_qp* CreateQpEx(uint64_t ops, uint32_t sge = 2, uint32_t inline_data = 64) {
        ibv_qp_init_attr_ex a{};
        a.qp_type = IBV_QPT_RC;
        a.send_cq = a_.scq;
        a.recv_cq = a_.rcq;
        a.cap.max_send_wr = a.cap.max_recv_wr = 16;
        a.cap.max_send_sge = a.cap.max_recv_sge = sge;
        a.cap.max_inline_data = inline_data;
        a.pd = a_.pd;
        a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        a.send_ops_flags = ops;
        ibv_qp* qp = ibv_create_qp_ex(a_.ctx, &a);
        if (qp) {
            qps_.push_back(qp);
        }
        return qp;
    }

    // @qp connected to a new QP of b_ (its peer, returned).
    ibv_qp* ConnectTo(ibv_qp* qp) {
        RcQpSpec qs;
        qs.send_cq = b_.scq;
        qs.recv_cq = b_.rcq;
        qs.max_send_sge = qs.max_recv_sge = 2;
        ibv_qp* peer = MakeRcQp(b_.pd, qs);
        EXPECT_NE(peer, nullptr);
        if (!peer) {
            return nullptr;
        }
        qps_.push_back(peer);
        RtrSpec r;
        r.dgid = a_.gid;  // our own: loopback
        r.max_dest_rd_atomic = 4;
        r.dest_qpn = peer->qp_num;
        EXPECT_EQ(QpToInit(qp, kQpRemoteAccess | IBV_ACCESS_REMOTE_ATOMIC), 0);
        EXPECT_EQ(QpToRtr(qp, r), 0);
        EXPECT_EQ(QpToRts(qp, 7, 4), 0);
        r.dest_qpn = qp->qp_num;
        EXPECT_EQ(QpToInit(peer, kQpRemoteAccess | IBV_ACCESS_REMOTE_ATOMIC), 0);
        EXPECT_EQ(QpToRtr(peer, r), 0);
        EXPECT_EQ(QpToRts(peer, 7, 4), 0);
        return peer;
    }
};

// Five WQEs of five opcodes built with the WR API and published by one
// ibv_wr_complete(): they complete in order, and the data is where IB
// says it goes.
TEST_F(QpEx, EveryOpcodeThroughTheWrApi) {
    ibv_qp* qp = CreateQpEx(kWrOps);
    ASSERT_NE(qp, nullptr) << "ibv_create_qp_ex: " << std::strerror(errno);
    ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
    ASSERT_NE(qpx, nullptr);
    ibv_qp* peer = ConnectTo(qp);
    Buf* src = Reg(a_, 8192, kRemoteAll);
    Buf* dst = Reg(b_, 8192, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 8192, 11);
    uint64_t counter = 5;
    std::memcpy(dst->p(4096), &counter, 8);
    ASSERT_EQ(PostRecv(peer, 1, {dst->sge(0, 1024)}), 0);
    ASSERT_EQ(PostRecv(peer, 2, {dst->sge(1024, 64)}), 0);

    ibv_wr_start(qpx);
    qpx->wr_flags = IBV_SEND_SIGNALED;
    qpx->wr_id = 1;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(0), 1024);
    qpx->wr_id = 2;
    ibv_wr_rdma_write(qpx, dst->mr->rkey, dst->addr(2048));
    ibv_sge two[2] = {src->sge(2048, 512), src->sge(2560, 512)};
    ibv_wr_set_sge_list(qpx, 2, two);
    qpx->wr_id = 3;
    ibv_wr_rdma_read(qpx, dst->mr->rkey, dst->addr(2048));
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(6144), 1024);
    qpx->wr_id = 4;
    ibv_wr_atomic_fetch_add(qpx, dst->mr->rkey, dst->addr(4096), 3);
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(5120), 8);
    qpx->wr_id = 5;
    ibv_wr_send_imm(qpx, htonl(77));
    ibv_wr_set_inline_data(qpx, src->p(3072), 48);
    ASSERT_EQ(ibv_wr_complete(qpx), 0);

    std::vector<ibv_wc> wc = PollCq(a_.scq, 5);
    ASSERT_EQ(wc.size(), 5u);
    const ibv_wc_opcode want[5] = {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
                                   IBV_WC_FETCH_ADD, IBV_WC_SEND};
    for (size_t i = 0; i < 5; i++) {
        EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS) << WcStr(wc[i]);
        EXPECT_EQ(wc[i].wr_id, i + 1);
        EXPECT_EQ(wc[i].opcode, want[i]) << WcStr(wc[i]);
    }
    wc = PollCq(b_.rcq, 2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].byte_len, 1024u);
    EXPECT_EQ(wc[1].byte_len, 48u);
    EXPECT_TRUE(wc[1].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc[1].imm_data), 77u);
    EXPECT_EQ(FirstDiff(src->p(0), dst->p(0), 1024), -1) << "SEND";
    EXPECT_EQ(FirstDiff(src->p(2048), dst->p(2048), 1024), -1) << "WRITE of two SGEs";
    EXPECT_EQ(FirstDiff(src->p(2048), src->p(6144), 1024), -1) << "READ back";
    EXPECT_EQ(FirstDiff(src->p(3072), dst->p(1024), 48), -1) << "inline SEND";
    uint64_t old = 0;
    std::memcpy(&old, src->p(5120), 8);
    std::memcpy(&counter, dst->p(4096), 8);
    EXPECT_EQ(old, 5u);
    EXPECT_EQ(counter, 8u);
}

// A mistake in the batch (more SGEs than the QP was granted) fails
// ibv_wr_complete() with EINVAL and publishes none of it; ibv_wr_abort()
// drops a batch; the QP works afterwards.
TEST_F(QpEx, BadBatchAndAbortPublishNothing) {
    ibv_qp* qp = CreateQpEx(kWrOps, 1);
    ASSERT_NE(qp, nullptr) << "ibv_create_qp_ex: " << std::strerror(errno);
    ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp);
    ASSERT_NE(qpx, nullptr);
    ibv_qp* peer = ConnectTo(qp);
    Buf* src = Reg(a_, 64, kLocal);
    Buf* dst = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(PostRecv(peer, 1, {dst->sge(0, 64)}), 0);

    ibv_wr_start(qpx);
    qpx->wr_flags = IBV_SEND_SIGNALED;
    qpx->wr_id = 1;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(0), 8);
    qpx->wr_id = 2;
    ibv_wr_send(qpx);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), 0);
    std::vector<ibv_sge> too_many(init.cap.max_send_sge + 1, src->sge(0, 1));
    ibv_wr_set_sge_list(qpx, too_many.size(), too_many.data());
    EXPECT_EQ(ibv_wr_complete(qpx), EINVAL) << too_many.size() << " SGEs";

    ibv_wr_start(qpx);
    qpx->wr_id = 3;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(0), 8);
    ibv_wr_abort(qpx);
    EXPECT_TRUE(PollCq(a_.scq, 1, 300).empty()) << "a refused or aborted WQE was sent";

    ibv_wr_start(qpx);
    qpx->wr_flags = IBV_SEND_SIGNALED;
    qpx->wr_id = 4;
    ibv_wr_send(qpx);
    ibv_wr_set_sge(qpx, src->mr->lkey, src->addr(0), 16);
    ASSERT_EQ(ibv_wr_complete(qpx), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 4u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].byte_len, 16u);
}

// Operations the device does not do are refused at create, as the suite
// expects (EOPNOTSUPP: it skips), and a QP made without send_ops_flags
// has no WR API.
TEST_F(QpEx, UnsupportedOperationsRefusedAtCreate) {
    errno = 0;
    EXPECT_EQ(CreateQpEx(kWrOps | IBV_QP_EX_WITH_TSO), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    ibv_qp* plain = CreateQp(a_);
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ(ibv_qp_to_qp_ex(plain), nullptr);
}

}  // namespace
}  // namespace ntv
