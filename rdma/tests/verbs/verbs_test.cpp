// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Verbs conformance tests for an NTRDMA device, through libibverbs and the
// ntrdma provider. Needs a device: run inside the test bed by
// selftests/ntrdma_ib_test.sh (NTRDMA_IBDEV names the device, default
// ntrdma0). Not part of ctest on the build host.
//
// The DataPath tests move data between two devices: NTRDMA_IBDEV is the
// requester, NTRDMA_PEER_IBDEV the responder (both ends of a loopback NTB
// in one guest; they may name the same device, e.g. rxe0, to check the
// tests against another RDMA implementation). Address vectors carry the
// peer's LID and a GRH; NTRDMA_GID_INDEX (default 0) picks the GID both
// sides use (rxe on lo: 1, ::ffff:127.0.0.1).

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "verbs_datapath.hpp"
#include "verbs_util.hpp"

namespace {

using namespace ntv;  // NOLINT(google-build-using-namespace)

class Verbs : public ::testing::Test {
  protected:
    void SetUp() override {
        ctx_ = OpenDevice(DeviceName());
        ASSERT_NE(ctx_, nullptr) << "cannot open " << DeviceName() << ": " << std::strerror(errno);
        ASSERT_EQ(ibv_query_device(ctx_, &dev_), 0);
        pd_ = ibv_alloc_pd(ctx_);
        ASSERT_NE(pd_, nullptr) << std::strerror(errno);
        cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
        ASSERT_NE(cq_, nullptr) << std::strerror(errno);
    }

    void TearDown() override {
        for (ibv_qp* qp : qps_) {
            EXPECT_EQ(ibv_destroy_qp(qp), 0);
        }
        if (cq_) {
            EXPECT_EQ(ibv_destroy_cq(cq_), 0);
        }
        if (pd_) {
            EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
        }
        if (ctx_) {
            EXPECT_EQ(ibv_close_device(ctx_), 0);
        }
    }

    // An RC QP on pd_, destroyed in TearDown unless DestroyQp'd. The CQs
    // default to cq_.
    ibv_qp* CreateRcQp(RcQpSpec s) {
        s.send_cq = s.send_cq ? s.send_cq : cq_;
        s.recv_cq = s.recv_cq ? s.recv_cq : cq_;
        ibv_qp* qp = MakeRcQp(pd_, s);
        if (qp) {
            qps_.push_back(qp);
        }
        return qp;
    }

    ibv_qp* CreateRcQp(uint32_t wr = 16, uint32_t sge = 1) {
        RcQpSpec s;
        s.max_send_wr = s.max_recv_wr = wr;
        s.max_send_sge = s.max_recv_sge = sge;
        return CreateRcQp(s);
    }

    // Destroy a QP made by CreateRcQp (the rest go in TearDown).
    int DestroyQp(ibv_qp* qp) {
        std::erase(qps_, qp);
        return ibv_destroy_qp(qp);
    }

    ibv_qp_state State(ibv_qp* qp) { return QpState(qp); }

    int ToInit(ibv_qp* qp) { return QpToInit(qp); }

    // RTR with a RoCE address vector: our own GID as destination.
    int ToRtr(ibv_qp* qp, uint32_t dest_qpn, int mask_drop = 0) {
        RtrSpec s;
        s.dest_qpn = dest_qpn;
        s.mask_drop = mask_drop;
        ibv_port_attr p{};
        EXPECT_EQ(ibv_query_port(ctx_, 1, &p), 0);
        s.dlid = p.lid;
        EXPECT_EQ(ibv_query_gid(ctx_, 1, GidIndex(), &s.dgid), 0);
        return QpToRtr(qp, s);
    }

    int ToRts(ibv_qp* qp) { return QpToRts(qp); }

    ibv_context* ctx_ = nullptr;
    ibv_device_attr dev_{};
    ibv_pd* pd_ = nullptr;
    ibv_cq* cq_ = nullptr;
    std::vector<ibv_qp*> qps_;
};

// ---- device and port ----

TEST_F(Verbs, QueryDeviceAdvertisesUsableLimits) {
    EXPECT_GE(dev_.max_qp, 1);
    EXPECT_GE(dev_.max_qp_wr, 256);
    EXPECT_GE(dev_.max_cqe, 256);
    EXPECT_GE(dev_.max_sge, 16);
    EXPECT_GE(dev_.max_mr, 1);
    EXPECT_GE(dev_.max_pd, 1);
    EXPECT_EQ(dev_.phys_port_cnt, 1);
    EXPECT_NE(dev_.node_guid, 0u);
}

// An InfiniBand port without a subnet manager: a LID of its own, GID 0 =
// fe80::node GUID (so LID-only and GRH address vectors both work).
TEST_F(Verbs, QueryPortLinkLayerLidAndGid) {
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_INFINIBAND);
    EXPECT_NE(p.lid, 0);
    EXPECT_GE(p.gid_tbl_len, 1);
    EXPECT_EQ(p.pkey_tbl_len, 1);
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
    EXPECT_EQ(gid.global.subnet_prefix, htobe64(0xfe80000000000000ull));
    EXPECT_EQ(gid.global.interface_id, dev_.node_guid);
    uint16_t pkey = 0;
    ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
    EXPECT_EQ(pkey, 0xffff);
    EXPECT_NE(ibv_query_port(ctx_, 2, &p), 0);
}

// GID 1 holds the netdev's MAC: rdma_cm finds the device by it (the port
// connects through the iw_cm, see ntrdma_iwcm.c).
TEST_F(Verbs, GidOneIsTheMacForRdmaCm) {
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.gid_tbl_len, 2);
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 1, &gid), 0);
    bool mac_set = false;
    for (int i = 0; i < 6; i++) mac_set |= gid.raw[i] != 0;
    EXPECT_TRUE(mac_set);
    for (int i = 6; i < 16; i++) EXPECT_EQ(gid.raw[i], 0) << "byte " << i;
}

// ---- PD and MR ----

TEST_F(Verbs, PdCreateDestroy) {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd, nullptr);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(Verbs, MrRegisterAndDeregister) {
    std::vector<char> buf(1 << 16);
    ibv_mr* mr =
        ibv_reg_mr(pd_, buf.data(), buf.size(),
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    EXPECT_EQ(mr->lkey, mr->rkey);
    EXPECT_NE(mr->lkey, 0u);
    EXPECT_EQ(mr->length, buf.size());
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(Verbs, MrRemoteWriteWithoutLocalWriteRejected) {
    std::vector<char> buf(4096);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_REMOTE_ATOMIC), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST_F(Verbs, MrZeroBasedRejectedMwBindTaken) {
    std::vector<char> buf(4096);
    // MW_BIND (memory windows, mw_test.cpp) is taken; zero-based MRs are not.
    ibv_mr* mr =
        ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(
        ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED),
        nullptr);
}

TEST_F(Verbs, MrOfUnmappedAddressFails) {
    const size_t len = 4 * 4096;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(munmap(p, len), 0);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, p, len, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_NE(errno, 0);
}

TEST_F(Verbs, MrZeroLengthFails) {
    char c;
    EXPECT_EQ(ibv_reg_mr(pd_, &c, 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
}

TEST_F(Verbs, MrKeysOfSuccessiveMrsAtTheSameIndexDiffer) {
    std::vector<char> buf(4096);
    uint32_t prev = 0;
    std::set<uint32_t> seen;
    for (int i = 0; i < 32; i++) {
        ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(mr, nullptr);
        if (i > 0) {
            EXPECT_EQ(mr->lkey >> 8, prev >> 8) << "index reused (lowest free)";
            EXPECT_NE(mr->lkey, prev) << "same key after dereg/reg at index " << (prev >> 8);
        }
        prev = mr->lkey;
        seen.insert(mr->lkey);
        ASSERT_EQ(ibv_dereg_mr(mr), 0);
    }
    // Random tags: many distinct keys, not a counter with a few values.
    EXPECT_GE(seen.size(), 16u);
}

// ---- CQ ----

TEST_F(Verbs, CqCreatePollEmptyAndDestroy) {
    ibv_cq* cq = ibv_create_cq(ctx_, 100, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    EXPECT_GE(cq->cqe, 100);
    ibv_wc wc[4];
    EXPECT_EQ(ibv_poll_cq(cq, 4, wc), 0);
    EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
    EXPECT_EQ(ibv_req_notify_cq(cq, 1), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(Verbs, CqMaxCqeHonouredExactly) {
    ibv_cq* cq = ibv_create_cq(ctx_, dev_.max_cqe, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << "cqe = max_cqe must work";
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    errno = 0;
    EXPECT_EQ(ibv_create_cq(ctx_, dev_.max_cqe + 1, nullptr, nullptr, 0), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_create_cq(ctx_, 0, nullptr, nullptr, 0), nullptr);
}

TEST_F(Verbs, CqCompletionVectorsAndChannel) {
    ASSERT_GE(ctx_->num_comp_vectors, 1);
    ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
    ASSERT_NE(ch, nullptr);
    ibv_cq* cq = ibv_create_cq(ctx_, 16, nullptr, ch, ctx_->num_comp_vectors - 1);
    ASSERT_NE(cq, nullptr);
    EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_create_cq(ctx_, 16, nullptr, ch, ctx_->num_comp_vectors), nullptr);
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// ---- QP ----

TEST_F(Verbs, QpCreateDestroy) {
    ibv_qp* qp = CreateRcQp();
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    EXPECT_GE(qp->qp_num, 2u);
    EXPECT_EQ(State(qp), IBV_QPS_RESET);
    EXPECT_EQ(DestroyQp(qp), 0);
}

TEST_F(Verbs, QpMaxWrAndSgeHonouredExactly) {
    ibv_qp* qp = CreateRcQp(dev_.max_qp_wr, dev_.max_sge);
    ASSERT_NE(qp, nullptr) << "max_qp_wr / max_sge must work";
    EXPECT_EQ(DestroyQp(qp), 0);
    errno = 0;
    EXPECT_EQ(CreateRcQp(dev_.max_qp_wr + 1, 1), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(CreateRcQp(16, dev_.max_sge + 1), nullptr);
}

TEST_F(Verbs, QpTypesOtherThanRcAndUdRejected) {
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    for (ibv_qp_type t : {IBV_QPT_UC, IBV_QPT_RAW_PACKET}) {
        a.qp_type = t;
        errno = 0;
        ibv_qp* qp = ibv_create_qp(pd_, &a);
        EXPECT_EQ(qp, nullptr) << "QP type " << t;
        EXPECT_NE(errno, 0);
        if (qp) {
            ibv_destroy_qp(qp);
        }
    }
}

TEST_F(Verbs, QpInvalidTransitionsRejected) {
    ibv_qp* qp = CreateRcQp();
    ASSERT_NE(qp, nullptr);
    // RESET -> RTS
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
    EXPECT_EQ(ToRts(qp), EINVAL);
    // RESET -> INIT without the required attributes
    a.qp_state = IBV_QPS_INIT;
    EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
    EXPECT_EQ(State(qp), IBV_QPS_RESET);
    ASSERT_EQ(ToInit(qp), 0);
    EXPECT_EQ(State(qp), IBV_QPS_INIT);
    // INIT -> RTS
    EXPECT_EQ(ToRts(qp), EINVAL);
    // INIT -> RTR without dest_qp_num
    EXPECT_EQ(ToRtr(qp, qp->qp_num, IBV_QP_DEST_QPN), EINVAL);
    // An attribute not allowed in this transition (SQ_PSN belongs to RTS)
    ibv_qp_attr b{};
    b.qp_state = IBV_QPS_INIT;
    b.sq_psn = 1;
    EXPECT_EQ(ibv_modify_qp(qp, &b, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
    EXPECT_EQ(State(qp), IBV_QPS_INIT);
    EXPECT_EQ(DestroyQp(qp), 0);
}

TEST_F(Verbs, QpBadAttributeValuesRejected) {
    ibv_qp* qp = CreateRcQp();
    ASSERT_NE(qp, nullptr);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 2;  // no such port
    EXPECT_NE(
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        0);
    a.port_num = 1;
    a.pkey_index = 1;  // one P_Key only
    EXPECT_NE(
        ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
        0);
    EXPECT_EQ(State(qp), IBV_QPS_RESET);
    EXPECT_EQ(DestroyQp(qp), 0);
}

// A QP moved to RESET takes its unpolled completions out of its CQs (as
// HCAs do: a QP restarted from ERR must not find its old flushes), and
// leaves those of other QPs on the same CQ in order.
TEST_F(Verbs, ResetRemovesTheQpsUnpolledCompletions) {
    ibv_qp* a = CreateRcQp();
    ibv_qp* b = CreateRcQp();
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    std::vector<char> buf(256);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    for (ibv_qp* qp : {a, b, a}) {
        ASSERT_EQ(ToInit(qp), 0);
        ASSERT_EQ(PostRecv(qp, qp == a ? 1 : 2, {sge}), 0);
    }
    ASSERT_EQ(QpToState(a, IBV_QPS_ERR), 0);
    ASSERT_EQ(QpToState(b, IBV_QPS_ERR), 0);
    ASSERT_EQ(QpToState(a, IBV_QPS_RESET), 0);
    std::vector<ibv_wc> wc = PollCq(cq_, 4, 300);
    ASSERT_EQ(wc.size(), 1u) << "the flushes of the QP in RESET are still there";
    EXPECT_EQ(wc[0].qp_num, b->qp_num);
    EXPECT_EQ(wc[0].wr_id, 2u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(Verbs, QpValidResetInitRtrRts) {
    ibv_qp* a = CreateRcQp();
    ibv_qp* b = CreateRcQp();
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(ToInit(a), 0);
    ASSERT_EQ(ToRtr(a, b->qp_num), 0);
    EXPECT_EQ(State(a), IBV_QPS_RTR);
    ASSERT_EQ(ToRts(a), 0);
    EXPECT_EQ(State(a), IBV_QPS_RTS);

    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(a, &attr, IBV_QP_DEST_QPN | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT, &init), 0);
    EXPECT_EQ(attr.dest_qp_num, b->qp_num);
    EXPECT_EQ(attr.path_mtu, IBV_MTU_1024);
    EXPECT_EQ(attr.timeout, 14);
    EXPECT_EQ(attr.retry_cnt, 7);
    EXPECT_GE(init.cap.max_send_wr, 16u);

    // RTS -> ERR -> RESET -> INIT again
    ibv_qp_attr e{};
    e.qp_state = IBV_QPS_ERR;
    EXPECT_EQ(ibv_modify_qp(a, &e, IBV_QP_STATE), 0);
    e.qp_state = IBV_QPS_RESET;
    EXPECT_EQ(ibv_modify_qp(a, &e, IBV_QP_STATE), 0);
    EXPECT_EQ(ToInit(a), 0);
    EXPECT_EQ(DestroyQp(a), 0);
    EXPECT_EQ(DestroyQp(b), 0);
}

TEST_F(Verbs, QpPostRecvUntilFull) {
    ibv_qp* qp = CreateRcQp(4, 1);
    ASSERT_NE(qp, nullptr);
    ASSERT_EQ(ToInit(qp), 0);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), 0);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    for (uint32_t i = 0; i < init.cap.max_recv_wr; i++) {
        wr.wr_id = i;
        ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0) << i;
    }
    EXPECT_EQ(ibv_post_recv(qp, &wr, &bad), ENOMEM);
    EXPECT_EQ(bad, &wr);
    // Too many SGEs for the QP
    std::vector<ibv_sge> many(init.cap.max_recv_sge + 1, sge);
    ibv_recv_wr big{};
    big.sg_list = many.data();
    big.num_sge = static_cast<int>(many.size());
    EXPECT_EQ(ibv_post_recv(qp, &big, &bad), EINVAL);
    EXPECT_EQ(DestroyQp(qp), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// Entering ERR completes every posted receive with a flush error, through
// the CQ ring the provider polls, and an armed CQ raises a channel event.
TEST_F(Verbs, ErrFlushesPostedWorkWithEvent) {
    ibv_comp_channel* ch = ibv_create_comp_channel(ctx_);
    ASSERT_NE(ch, nullptr);
    ibv_cq* rcq = ibv_create_cq(ctx_, 16, nullptr, ch, 0);
    ASSERT_NE(rcq, nullptr);
    RcQpSpec a;
    a.recv_cq = rcq;
    a.max_send_wr = 4;
    a.max_recv_wr = 8;
    ibv_qp* qp = CreateRcQp(a);
    ASSERT_NE(qp, nullptr);
    ASSERT_EQ(ToInit(qp), 0);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    for (uint64_t id = 100; id < 103; id++) {
        ibv_recv_wr wr{};
        wr.wr_id = id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
    }
    ibv_wc wc[8];
    EXPECT_EQ(ibv_poll_cq(rcq, 8, wc), 0);
    ASSERT_EQ(ibv_req_notify_cq(rcq, 0), 0);

    ibv_qp_attr e{};
    e.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(qp, &e, IBV_QP_STATE), 0);

    pollfd pfd{ch->fd, POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "no completion event";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, rcq);
    ibv_ack_cq_events(rcq, 1);

    ASSERT_EQ(ibv_poll_cq(rcq, 8, wc), 3);
    for (int i = 0; i < 3; i++) {
        EXPECT_EQ(wc[i].wr_id, 100u + i);
        EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(wc[i].qp_num, qp->qp_num);
    }
    EXPECT_EQ(ibv_poll_cq(rcq, 8, wc), 0);
    // Not re-armed: no second event.
    EXPECT_EQ(poll(&pfd, 1, 200), 0);

    // Sends posted in ERR complete at once, flushed (to the send CQ).
    ibv_send_wr swr{};
    swr.wr_id = 200;
    swr.sg_list = &sge;
    swr.num_sge = 1;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    ibv_send_wr* sbad = nullptr;
    ASSERT_EQ(ibv_post_send(qp, &swr, &sbad), 0);
    ASSERT_EQ(ibv_poll_cq(cq_, 8, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 200u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);

    // Receives posted in ERR complete at once too, flushed (to the recv CQ).
    ibv_recv_wr rwr{};
    rwr.wr_id = 300;
    rwr.sg_list = &sge;
    rwr.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
    ASSERT_EQ(ibv_poll_cq(rcq, 8, wc), 1) << "a receive posted in ERR was not flushed";
    EXPECT_EQ(wc[0].wr_id, 300u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);

    EXPECT_EQ(DestroyQp(qp), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_cq(rcq), 0);
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// ---- SRQ ----

TEST_F(Verbs, SrqCreateQueryModifyDestroy) {
    ASSERT_GE(dev_.max_srq, 1);
    ibv_srq_init_attr init{};
    init.attr.max_wr = 64;
    init.attr.max_sge = 2;
    ibv_srq* srq = ibv_create_srq(pd_, &init);
    ASSERT_NE(srq, nullptr) << std::strerror(errno);
    EXPECT_GE(init.attr.max_wr, 64u);
    EXPECT_GE(init.attr.max_sge, 2u);
    ibv_srq_attr a{};
    ASSERT_EQ(ibv_query_srq(srq, &a), 0);
    EXPECT_EQ(a.max_wr, init.attr.max_wr);
    EXPECT_EQ(a.srq_limit, 0u);
    a.srq_limit = 10;
    EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
    ibv_srq_attr q{};
    ASSERT_EQ(ibv_query_srq(srq, &q), 0);
    EXPECT_EQ(q.srq_limit, 10u);
    a.srq_limit = init.attr.max_wr;  // must be below max_wr
    EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
    a.max_wr = 2 * init.attr.max_wr;  // no resizing
    EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(Verbs, SrqLimitsHonouredExactly) {
    ibv_srq_init_attr init{};
    init.attr.max_wr = dev_.max_srq_wr;
    init.attr.max_sge = dev_.max_srq_sge;
    ibv_srq* srq = ibv_create_srq(pd_, &init);
    ASSERT_NE(srq, nullptr) << "max_srq_wr / max_srq_sge must work";
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
    init.attr.max_wr = dev_.max_srq_wr + 1;
    init.attr.max_sge = 1;
    EXPECT_EQ(ibv_create_srq(pd_, &init), nullptr);
    init.attr.max_wr = 16;
    init.attr.max_sge = dev_.max_srq_sge + 1;
    EXPECT_EQ(ibv_create_srq(pd_, &init), nullptr);
    init.attr.max_sge = 1;
    init.attr.srq_limit = 16;  // not below max_wr
    EXPECT_EQ(ibv_create_srq(pd_, &init), nullptr);
}

TEST_F(Verbs, SrqPostRecvUntilFullAndQpWithSrq) {
    ibv_srq_init_attr init{};
    init.attr.max_wr = 8;
    init.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(pd_, &init);
    ASSERT_NE(srq, nullptr);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    ibv_recv_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    for (uint32_t i = 0; i < init.attr.max_wr; i++) {
        ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0) << i;
    }
    EXPECT_EQ(ibv_post_srq_recv(srq, &wr, &bad), ENOMEM);

    RcQpSpec a;
    a.srq = srq;
    a.max_send_wr = 4;
    ibv_qp* qp = CreateRcQp(a);
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    // Receives of a QP with an SRQ go to the SRQ.
    EXPECT_EQ(ibv_post_recv(qp, &wr, &bad), EINVAL);
    // The SRQ is in use.
    EXPECT_NE(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(DestroyQp(qp), 0);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ---- async events ----

// Wait up to ms for an async event of the given type; acks everything read.
bool WaitAsyncEvent(ibv_context* ctx, ibv_event_type type, int ms, void* element = nullptr) {
    for (int waited = 0; waited < ms; waited += 100) {
        pollfd pfd{ctx->async_fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) != 1) {
            continue;
        }
        ibv_async_event ev{};
        if (ibv_get_async_event(ctx, &ev)) {
            return false;
        }
        bool match = ev.event_type == type && (!element || ev.element.qp == element);
        ibv_ack_async_event(&ev);
        if (match) {
            return true;
        }
    }
    return false;
}

// modify_qp refuses every transition the RC state machine does not have
// (the old NTRDMA accepted any: its defect 11; see also
// QpInvalidTransitionsRejected), and a refused one leaves the state alone.
TEST_F(Verbs, OldNtrdmaDefect11InvalidTransitionsFromEveryState) {
    ibv_qp* qp = CreateRcQp();
    ASSERT_NE(qp, nullptr);
    auto refused = [&](ibv_qp_state from, ibv_qp_state to) {
        ibv_qp_state before = State(qp);
        EXPECT_EQ(before, from);
        int rc = 0;
        switch (to) {
            case IBV_QPS_INIT:
                rc = ToInit(qp);
                break;
            case IBV_QPS_RTR:
                rc = ToRtr(qp, qp->qp_num);
                break;
            case IBV_QPS_RTS:
                rc = ToRts(qp);
                break;
            default:
                rc = QpToState(qp, to);
        }
        EXPECT_NE(rc, 0) << "transition " << from << " -> " << to << " accepted";
        EXPECT_EQ(State(qp), from) << "after refused " << from << " -> " << to;
    };
    refused(IBV_QPS_RESET, IBV_QPS_RTR);
    refused(IBV_QPS_RESET, IBV_QPS_RTS);
    refused(IBV_QPS_RESET, IBV_QPS_SQD);
    ASSERT_EQ(ToInit(qp), 0);
    refused(IBV_QPS_INIT, IBV_QPS_RTS);
    refused(IBV_QPS_INIT, IBV_QPS_SQD);
    ASSERT_EQ(ToRtr(qp, qp->qp_num), 0);
    refused(IBV_QPS_RTR, IBV_QPS_INIT);
    refused(IBV_QPS_RTR, IBV_QPS_SQD);
    ASSERT_EQ(ToRts(qp), 0);
    refused(IBV_QPS_RTS, IBV_QPS_INIT);
    refused(IBV_QPS_RTS, IBV_QPS_RTR);
    ASSERT_EQ(QpToState(qp, IBV_QPS_ERR), 0);
    refused(IBV_QPS_ERR, IBV_QPS_INIT);
    refused(IBV_QPS_ERR, IBV_QPS_RTR);
    refused(IBV_QPS_ERR, IBV_QPS_RTS);
    EXPECT_EQ(QpToState(qp, IBV_QPS_RESET), 0);
    EXPECT_EQ(State(qp), IBV_QPS_RESET);
}

// =====================================================================
// Data path: requester on NTRDMA_IBDEV, responder on NTRDMA_PEER_IBDEV.
// =====================================================================

// ---- SEND / RECV ----

TEST_F(DataPath, SendRecvSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    uint64_t id = 10;
    for (uint32_t len : {1u, 4096u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(a_, len, kLocal);
        Buf* dst = Reg(b_, len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len);
        std::memset(dst->p(), 0xEE, len + 64);
        ASSERT_EQ(PostRecv(c.b, id, {dst->sge(0, len + 64)}), 0);
        Wr w;
        w.wr_id = id + 1;
        w.sge = {src->sge(0, len)};
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u) << "no requester completion";
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
        EXPECT_EQ(s[0].wr_id, id + 1);
        EXPECT_EQ(s[0].qp_num, c.a->qp_num);
        std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
        ASSERT_EQ(r.size(), 1u) << "no responder completion";
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(r[0].wr_id, id);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(r[0].qp_num, c.b->qp_num);
        EXPECT_EQ(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
        if (IsNtrdma(b_.ctx)) {  // IB defines src_qp for UD only; ntrdma gives it for RC too
            EXPECT_EQ(r[0].src_qp, c.a->qp_num);
        }
        EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
        for (size_t i = len; i < len + 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "written past the message at " << i;
        }
        id += 2;
    }
}

TEST_F(DataPath, SendWithImm) {
    Conn c = Connect();
    Buf* src = Reg(a_, 100, kLocal);
    Buf* dst = Reg(b_, 128, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 100, 7);
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 128)}), 0);
    Wr w;
    w.op = IBV_WR_SEND_WITH_IMM;
    w.imm = htonl(0x12345678);
    w.sge = {src->sge(0, 100)};
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
    EXPECT_NE(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(r[0].imm_data, htonl(0x12345678));
    EXPECT_EQ(r[0].byte_len, 100u);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 100), -1);
}

// ---- RDMA WRITE ----

TEST_F(DataPath, RdmaWriteSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {1u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(a_, len, kLocal);
        Buf* dst = Reg(b_, len + 128, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len + 1);
        std::memset(dst->p(), 0xEE, len + 128);
        // One receive posted: a WRITE must not consume it.
        Buf* rbuf = Reg(b_, 64, kLocal);
        ASSERT_FALSE(HasFailure());
        ASSERT_EQ(PostRecv(c.b, 77, {rbuf->sge(0, 64)}), 0);
        Wr w;
        w.op = IBV_WR_RDMA_WRITE;
        w.wr_id = len;
        w.sge = {src->sge(0, len)};
        w.raddr = dst->addr(64);
        w.rkey = dst->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(s[0].wr_id, len);
        EXPECT_EQ(FirstDiff(src->p(), dst->p(64), len), -1);
        for (size_t i = 0; i < 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "written before the target at " << i;
            ASSERT_EQ(dst->p(64 + len)[i], 0xEE) << "written past the target at " << i;
        }
        EXPECT_EQ(Drain(b_.rcq, 50).size(), 0u) << "a WRITE consumed a receive";
        // Leave the receive for the next round; flush it at the end.
    }
    ASSERT_EQ(QpToState(c.b, IBV_QPS_ERR), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 3);
    EXPECT_EQ(r.size(), 3u);
    for (auto& wc : r) {
        EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << "a receive was consumed: " << WcStr(wc);
    }
}

TEST_F(DataPath, RdmaWriteWithImm) {
    Conn c = Connect();
    const uint32_t len = 8192;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    Buf* rbuf = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len, 3);
    std::memset(rbuf->p(), 0xEE, 64);
    ASSERT_EQ(PostRecv(c.b, 5, {rbuf->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c.b, 6, {rbuf->sge(0, 64)}), 0);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm = htonl(0xCAFEF00D);
    w.sge = {src->sge(0, len)};
    w.raddr = dst->addr();
    w.rkey = dst->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u) << "WRITE_WITH_IMM consumed no receive";
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[0].wr_id, 5u);
    EXPECT_EQ(r[0].byte_len, len);
    EXPECT_NE(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(r[0].imm_data, htonl(0xCAFEF00D));
    EXPECT_EQ(r[0].qp_num, c.b->qp_num);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
    for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(rbuf->p()[i], 0xEE) << "the receive buffer was written";
    }
    EXPECT_EQ(Drain(b_.rcq, 50).size(), 0u) << "more than one receive consumed";
}

// ---- RDMA READ ----

TEST_F(DataPath, RdmaReadSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {8u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(b_, len, kRemoteAll);
        Buf* dst = Reg(a_, len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len + 2);
        std::memset(dst->p(), 0xEE, len + 64);
        Wr w;
        w.op = IBV_WR_RDMA_READ;
        w.wr_id = len;
        w.sge = {dst->sge(0, len)};
        w.raddr = src->addr();
        w.rkey = src->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(s[0].wr_id, len);
        EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
        for (size_t i = len; i < len + 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "read past the local SGE at " << i;
        }
    }
}

// ---- atomics ----

TEST_F(DataPath, Atomics) {
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(a_.dev.atomic_cap, IBV_ATOMIC_HCA);
    } else if (a_.dev.atomic_cap == IBV_ATOMIC_NONE) {
        GTEST_SKIP() << a_.name << " has no atomics (atomic_cap NONE)";
    }
    Conn c = Connect();
    Buf* tgt = Reg(b_, 64, kRemoteAll);
    Buf* res = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    uint64_t* t = reinterpret_cast<uint64_t*>(tgt->p(8));
    uint64_t* r = reinterpret_cast<uint64_t*>(res->p(0));
    auto run = [&](Wr w, ibv_wc_opcode op) {
        w.sge = {res->sge(0, 8)};
        w.raddr = tgt->addr(8);
        w.rkey = tgt->mr->rkey;
        *r = 0xDEADDEADDEADDEADull;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, op);
    };
    // Compare and swap, matching.
    *t = 0x1122334455667788ull;
    Wr cas;
    cas.op = IBV_WR_ATOMIC_CMP_AND_SWP;
    cas.compare_add = 0x1122334455667788ull;
    cas.swap = 0xA5A5A5A5F0F0F0F0ull;
    ASSERT_NO_FATAL_FAILURE(run(cas, IBV_WC_COMP_SWAP));
    EXPECT_EQ(*r, 0x1122334455667788ull) << "original value not returned";
    EXPECT_EQ(*t, 0xA5A5A5A5F0F0F0F0ull) << "matching CAS did not swap";
    // Compare and swap, not matching: target unchanged, current value back.
    cas.compare_add = 0x1ull;
    cas.swap = 0x2ull;
    ASSERT_NO_FATAL_FAILURE(run(cas, IBV_WC_COMP_SWAP));
    EXPECT_EQ(*r, 0xA5A5A5A5F0F0F0F0ull);
    EXPECT_EQ(*t, 0xA5A5A5A5F0F0F0F0ull) << "mismatching CAS swapped";
    // Fetch and add (with a carry across 32 bits).
    *t = 0x00000001FFFFFFFFull;
    Wr faa;
    faa.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
    faa.compare_add = 0x10;
    ASSERT_NO_FATAL_FAILURE(run(faa, IBV_WC_FETCH_ADD));
    EXPECT_EQ(*r, 0x00000001FFFFFFFFull);
    EXPECT_EQ(*t, 0x000000020000000Full);
    // Neighbours untouched.
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p(0)), 0u);
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p(16)), 0u);
}

// ---- inline ----

TEST_F(DataPath, InlineSendAndWrite) {
    ConnSpec cs;
    cs.inline_data = 256;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(c.cap_a.max_inline_data, 256u);
    }
    const uint32_t max = std::min<uint32_t>(c.cap_a.max_inline_data, 256);
    ASSERT_GE(max, 64u);
    Buf* dst = Reg(b_, 512, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {64u, max}) {
        SCOPED_TRACE("len " + std::to_string(len));
        // Not registered: inline data needs no lkey.
        std::vector<uint8_t> src(len), want(len);
        Fill(src.data(), len, len + 9);
        want = src;
        std::memset(dst->p(), 0, 512);
        ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 512)}), 0);
        Wr w;
        w.flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
        w.sge = {ibv_sge{reinterpret_cast<uintptr_t>(src.data()), len, 0}};
        ASSERT_EQ(Post(c.a, w), 0);
        std::memset(src.data(), 0x11, len);  // the WR owns a copy now
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(FirstDiff(want.data(), dst->p(), len), -1) << "inline SEND";

        Fill(src.data(), len, len + 10);
        want = src;
        w.op = IBV_WR_RDMA_WRITE;
        w.raddr = dst->addr(256);
        w.rkey = dst->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::memset(src.data(), 0x22, len);
        s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(FirstDiff(want.data(), dst->p(256), len), -1) << "inline WRITE";
    }
}

// ---- scatter / gather ----

class MultiSge : public DataPath {
  protected:
    // n SGEs of different sizes over two MRs (alternating) on side s.
    std::vector<ibv_sge> Sges(Side& s, const std::vector<uint32_t>& sizes, int access,
                              std::vector<Buf*>* bufs) {
        size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
        Buf* m0 = Reg(s, total + 64 * sizes.size(), access);
        Buf* m1 = Reg(s, total + 64 * sizes.size(), access);
        bufs->assign({m0, m1});
        std::vector<ibv_sge> out;
        if (!m0->mr || !m1->mr) {
            return out;
        }
        size_t off = 8;
        for (size_t i = 0; i < sizes.size(); i++) {
            out.push_back((i % 2 ? m1 : m0)->sge(off, sizes[i]));
            off += sizes[i] + 40;  // gaps that must stay untouched
        }
        return out;
    }

    static std::vector<uint8_t> Gather(const std::vector<ibv_sge>& sg) {
        std::vector<uint8_t> out;
        for (const ibv_sge& s : sg) {
            auto* p = reinterpret_cast<const uint8_t*>(s.addr);
            out.insert(out.end(), p, p + s.length);
        }
        return out;
    }

    static void FillSges(const std::vector<ibv_sge>& sg, uint32_t seed) {
        for (const ibv_sge& s : sg) {
            Fill(reinterpret_cast<uint8_t*>(s.addr), s.length, seed++);
        }
    }

    uint32_t N() { return static_cast<uint32_t>(std::min({a_.dev.max_sge, b_.dev.max_sge, 16})); }
};

TEST_F(MultiSge, SendGatherRecvScatter) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> ssz, rsz;
    for (uint32_t i = 0; i < n; i++) {
        ssz.push_back(1 + i * 97);
    }
    size_t total = std::accumulate(ssz.begin(), ssz.end(), size_t{0});
    for (uint32_t i = 0; i < n; i++) {  // other sizes, same total
        rsz.push_back(static_cast<uint32_t>(i + 1 < n ? total / n - 7 + i : 0));
    }
    rsz.back() = static_cast<uint32_t>(total - std::accumulate(rsz.begin(), rsz.end() - 1, 0u));
    std::vector<Buf*> sb, rb;
    std::vector<ibv_sge> s = Sges(a_, ssz, kLocal, &sb);
    std::vector<ibv_sge> r = Sges(b_, rsz, kLocal, &rb);
    ASSERT_FALSE(HasFailure());
    FillSges(s, 100);
    std::vector<uint8_t> r0 = rb[0]->mem, r1 = rb[1]->mem;
    ASSERT_EQ(PostRecv(c.b, 1, r), 0);
    Wr w;
    w.sge = s;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    std::vector<ibv_wc> rw = PollCq(b_.rcq, 1);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS) << WcStr(rw[0]);
    EXPECT_EQ(rw[0].byte_len, total);
    EXPECT_TRUE(Gather(s) == Gather(r)) << "scattered data differs";
    // The gaps between the receive SGEs are untouched.
    std::vector<uint8_t> got = Gather(r);
    for (const ibv_sge& g : r) {
        std::memset(reinterpret_cast<void*>(g.addr), 0, g.length);
    }
    EXPECT_TRUE(rb[0]->mem == r0 && rb[1]->mem == r1) << "written outside the SGEs";
}

TEST_F(MultiSge, WriteGather) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> ssz;
    for (uint32_t i = 0; i < n; i++) {
        ssz.push_back(4096 - i * 200 + (i % 3));
    }
    size_t total = std::accumulate(ssz.begin(), ssz.end(), size_t{0});
    std::vector<Buf*> sb;
    std::vector<ibv_sge> s = Sges(a_, ssz, kLocal, &sb);
    Buf* dst = Reg(b_, total + 16, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    FillSges(s, 200);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.sge = s;
    w.raddr = dst->addr(8);
    w.rkey = dst->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    std::vector<uint8_t> want = Gather(s);
    EXPECT_EQ(FirstDiff(want.data(), dst->p(8), total), -1);
    EXPECT_EQ(dst->p()[7], 0);
    EXPECT_EQ(dst->p()[8 + total], 0);
}

TEST_F(MultiSge, ReadScatter) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> dsz;
    for (uint32_t i = 0; i < n; i++) {
        dsz.push_back(1 + i * 311);
    }
    size_t total = std::accumulate(dsz.begin(), dsz.end(), size_t{0});
    std::vector<Buf*> db;
    std::vector<ibv_sge> d = Sges(a_, dsz, kLocal, &db);
    Buf* src = Reg(b_, total, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), total, 300);
    std::vector<uint8_t> d0 = db[0]->mem, d1 = db[1]->mem;
    Wr w;
    w.op = IBV_WR_RDMA_READ;
    w.sge = d;
    w.raddr = src->addr();
    w.rkey = src->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    EXPECT_EQ(sw[0].opcode, IBV_WC_RDMA_READ);
    std::vector<uint8_t> got = Gather(d);
    EXPECT_EQ(FirstDiff(got.data(), src->p(), total), -1);
    for (const ibv_sge& g : d) {
        std::memset(reinterpret_cast<void*>(g.addr), 0, g.length);
    }
    EXPECT_TRUE(db[0]->mem == d0 && db[1]->mem == d1) << "written outside the SGEs";
}

// ---- SRQ ----

TEST_F(DataPath, SrqReceivesInOrder) {
    ibv_srq* srq = CreateSrq(b_, 16, 1);
    ASSERT_NE(srq, nullptr);
    ConnSpec cs;
    cs.srq_b = srq;
    Conn c = Connect(cs);
    const int n = 8;
    Buf* src = Reg(a_, 256 * n, kLocal);
    Buf* dst = Reg(b_, 256 * n, kLocal);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(c.b->srq, srq);
    Fill(src->p(), 256 * n, 400);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(PostSrqRecv(srq, 1000 + i, {dst->sge(256 * i, 256)}), 0);
    }
    for (int i = 0; i < n; i++) {
        Wr w;
        w.wr_id = i;
        w.sge = {src->sge(256 * i, 100 + i)};
        ASSERT_EQ(Post(c.a, w), 0);
    }
    std::vector<ibv_wc> sw = PollCq(a_.scq, n);
    ASSERT_EQ(sw.size(), static_cast<size_t>(n));
    std::vector<ibv_wc> rw = PollCq(b_.rcq, n);
    ASSERT_EQ(rw.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(sw[i].status, IBV_WC_SUCCESS) << WcStr(sw[i]);
        EXPECT_EQ(sw[i].wr_id, static_cast<uint64_t>(i));
        EXPECT_EQ(rw[i].status, IBV_WC_SUCCESS) << WcStr(rw[i]);
        EXPECT_EQ(rw[i].wr_id, 1000u + i) << "SRQ receives out of order";
        EXPECT_EQ(rw[i].byte_len, 100u + i);
        EXPECT_EQ(rw[i].qp_num, c.b->qp_num);
        EXPECT_EQ(FirstDiff(src->p(256 * i), dst->p(256 * i), 100 + i), -1) << "message " << i;
    }
}

// ---- unsignalled work requests and ordering ----

// N unsignalled WRITEs (a large one, then small ones over its start), then a
// signalled SEND: one requester completion, and when the receive completes
// every WRITE is visible, in order (old NTRDMA defect 13: an unsignalled
// WRITE fast path overtook earlier WRs).
TEST_F(DataPath, UnsignalledWritesThenSignalledSend) {
    Conn c = Connect();  // sq_sig_all = 0
    const size_t big = 1 << 20, piece = 4096;
    const int npieces = 16;
    Buf* src = Reg(a_, big + piece * npieces, kLocal);
    Buf* dst = Reg(b_, big, kRemoteAll);
    Buf* msg = Reg(a_, 16, kLocal);
    Buf* rbuf = Reg(b_, 16, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), big + piece * npieces, 500);
    ASSERT_EQ(PostRecv(c.b, 9, {rbuf->sge(0, 16)}), 0);
    std::vector<Wr> ws;
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.flags = 0;
    w.rkey = dst->mr->rkey;
    w.wr_id = 100;
    w.sge = {src->sge(0, big)};
    w.raddr = dst->addr();
    ws.push_back(w);
    for (int i = 0; i < npieces; i++) {
        w.wr_id = 101 + i;
        w.sge = {src->sge(big + piece * i, piece)};
        w.raddr = dst->addr(piece * i);
        ws.push_back(w);
    }
    // Posted one by one, as an application does.
    for (const Wr& x : ws) {
        ASSERT_EQ(Post(c.a, x), 0);
    }
    Wr send;
    send.wr_id = 200;
    send.sge = {msg->sge(0, 16)};
    ASSERT_EQ(Post(c.a, send), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    // Visible now, without waiting further.
    std::vector<uint8_t> want(src->p(), src->p(big));
    for (int i = 0; i < npieces; i++) {
        std::memcpy(want.data() + piece * i, src->p(big + piece * i), piece);
    }
    long d = FirstDiff(want.data(), dst->p(), big);
    EXPECT_EQ(d, -1) << "at the SEND's receive, WRITE data "
                     << (d >= 0 && d < static_cast<long>(piece * npieces)
                             ? "of a later small WRITE was overwritten by the earlier large one"
                             : "is missing");
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].wr_id, 200u) << "an unsignalled WR completed";
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(Drain(a_.scq, 200).size(), 0u) << "more than one requester completion";
}

// Defect 13 from the requester's side: a large signalled WRITE, unsignalled
// small WRITEs over its start, then a READ of the region returns the final
// bytes, and the two completions come in posting order.
TEST_F(DataPath, OldNtrdmaDefect13UnsignalledWriteDoesNotOvertake) {
    Conn c = Connect();
    const size_t big = 256 * 1024, piece = 1024;
    const int npieces = 32;
    Buf* src = Reg(a_, big + piece * npieces, kLocal);
    Buf* back = Reg(a_, big, kLocal);
    Buf* dst = Reg(b_, big, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), big + piece * npieces, 600);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.rkey = dst->mr->rkey;
    w.wr_id = 1;
    w.sge = {src->sge(0, big)};
    w.raddr = dst->addr();
    ASSERT_EQ(Post(c.a, w), 0);
    w.flags = 0;
    for (int i = 0; i < npieces; i++) {
        w.wr_id = 10 + i;
        w.sge = {src->sge(big + piece * i, piece)};
        w.raddr = dst->addr(piece * i);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    Wr rd;
    rd.op = IBV_WR_RDMA_READ;
    rd.wr_id = 2;
    rd.sge = {back->sge(0, big)};
    rd.raddr = dst->addr();
    rd.rkey = dst->mr->rkey;
    ASSERT_EQ(Post(c.a, rd), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].wr_id, 1u);
    EXPECT_EQ(s[1].wr_id, 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    std::vector<uint8_t> want(src->p(), src->p(big));
    for (int i = 0; i < npieces; i++) {
        std::memcpy(want.data() + piece * i, src->p(big + piece * i), piece);
    }
    EXPECT_EQ(FirstDiff(want.data(), back->p(), big), -1) << "READ saw WRITEs out of order";
    EXPECT_EQ(FirstDiff(want.data(), dst->p(), big), -1) << "target bytes out of order";
}

// ---- completion events ----

// Wait for a completion event on ch within ms; acks it. True if one came.
bool WaitCqEvent(ibv_comp_channel* ch, ibv_cq* cq, int ms) {
    pollfd pfd{ch->fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) != 1) {
        return false;
    }
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) {
        return false;
    }
    EXPECT_EQ(ev_cq, cq);
    ibv_ack_cq_events(ev_cq, 1);
    return true;
}

class Events : public DataPath {
  protected:
    void Prepare() {
        ch_ = CreateChannel(b_);
        ASSERT_NE(ch_, nullptr);
        rcq_ = CreateCq(b_, 16, ch_);
        ASSERT_NE(rcq_, nullptr);
        ConnSpec cs;
        cs.rcq_b = rcq_;
        c_ = Connect(cs);
        msg_ = Reg(a_, 8, kLocal);
        rbuf_ = Reg(b_, 8 * 8, kLocal);
        ASSERT_FALSE(HasFailure());
        for (int i = 0; i < 8; i++) {
            ASSERT_EQ(PostRecv(c_.b, i, {rbuf_->sge(8 * i, 8)}), 0);
        }
    }

    // A SEND; waits for its receive completion (polled, not by event).
    void Send(unsigned flags) {
        Wr w;
        w.flags = IBV_SEND_SIGNALED | flags;
        w.sge = {msg_->sge(0, 8)};
        ASSERT_EQ(Post(c_.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        std::vector<ibv_wc> r = PollCq(rcq_, 1);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    }

    ibv_comp_channel* ch_ = nullptr;
    ibv_cq* rcq_ = nullptr;
    Conn c_;
    Buf* msg_ = nullptr;
    Buf* rbuf_ = nullptr;
};

// Armed for solicited completions only: an unsolicited SEND raises no
// event, a solicited one does.
TEST_F(Events, SolicitedOnlyEvent) {
    ASSERT_NO_FATAL_FAILURE(Prepare());
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 1), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 300)) << "event for an unsolicited completion";
    ASSERT_NO_FATAL_FAILURE(Send(IBV_SEND_SOLICITED));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "no event for a solicited completion";
}

// The old NTRDMA's req_notify_cq ignored its flags (defect 8): next
// completion (0) must fire on an unsolicited SEND, solicited-only must not,
// and an unarmed CQ raises nothing.
TEST_F(Events, OldNtrdmaDefect8NotifyFlagsHonoured) {
    ASSERT_NO_FATAL_FAILURE(Prepare());
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 200)) << "event on an unarmed CQ";
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 0), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "armed for any completion: no event";
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 1), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 300)) << "armed solicited-only: unsolicited raised one";
    ASSERT_NO_FATAL_FAILURE(Send(IBV_SEND_SOLICITED));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "armed solicited-only: solicited raised none";
}

// ---- error paths ----

TEST_F(DataPath, ErrBadLkeyOnSend) {
    Conn c = Connect();
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w;
    w.wr_id = 5;
    w.sge = {ibv_sge{src->addr(), 64, src->mr->lkey ^ 0x5a5a00}};
    Wr next;
    next.wr_id = 6;
    next.sge = {src->sge(0, 64)};
    ASSERT_EQ(PostChain(c.a, {w, next}), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5, 1));
}

TEST_F(DataPath, ErrSgeBeyondMr) {
    for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        Conn c = Connect();
        Buf* local = Reg(a_, 4096, kLocal);
        Buf* remote = Reg(b_, 8192, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        ASSERT_EQ(PostRecv(c.b, 1, {remote->sge(0, 8192)}), 0);
        Wr w;
        w.op = op;
        w.wr_id = 5;
        w.sge = {local->sge(4096 - 100, 200)};  // 100 bytes past the end
        w.raddr = remote->addr();
        w.rkey = remote->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5));
    }
}

TEST_F(DataPath, ErrLkeyOfOtherPd) {
    Conn c = Connect();
    ibv_pd* other = AllocPd(a_);
    ASSERT_NE(other, nullptr);
    Buf* src = Reg(a_, 64, kLocal, other);
    ASSERT_FALSE(HasFailure());
    Wr w;
    w.wr_id = 5;
    w.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5));
}

TEST_F(DataPath, ErrBadRkey) {
    for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        Conn c = Connect();
        Buf* local = Reg(a_, 64, kLocal);
        Buf* remote = Reg(b_, 64, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        Wr w;
        w.op = op;
        w.wr_id = 5;
        w.sge = {local->sge(0, 64)};
        w.raddr = remote->addr();
        w.rkey = remote->mr->rkey ^ 0x100;  // another index
        Wr next = w;
        next.wr_id = 6;
        next.rkey = remote->mr->rkey;
        ASSERT_EQ(PostChain(c.a, {w, next}), 0);
        ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5, 1));
    }
}

TEST_F(DataPath, ErrRemoteRangeOverflow) {
    struct Case {
        ibv_wr_opcode op;
        bool wrap;  // remote_addr near 2^64, else just past the MR's end
    };
    for (Case k : {Case{IBV_WR_RDMA_WRITE, true}, Case{IBV_WR_RDMA_WRITE, false},
                   Case{IBV_WR_RDMA_READ, true}, Case{IBV_WR_RDMA_READ, false}}) {
        SCOPED_TRACE(std::string(k.op == IBV_WR_RDMA_WRITE ? "WRITE" : "READ") +
                     (k.wrap ? " wrapping 2^64" : " past the end"));
        Conn c = Connect();
        Buf* local = Reg(a_, 64, kLocal);
        Buf* remote = Reg(b_, 4096, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        Wr w;
        w.op = k.op;
        w.wr_id = 5;
        w.sge = {local->sge(0, 64)};
        w.raddr = k.wrap ? ~uint64_t{0} - 15 : remote->addr(4096 - 63);
        w.rkey = remote->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5));
    }
}

TEST_F(DataPath, ErrMrWithoutRemoteAccess) {
    struct Case {
        ibv_wr_opcode op;
        int access;  // the MR lacks the right the operation needs
    };
    std::vector<Case> cases = {
        {IBV_WR_RDMA_WRITE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ},
        {IBV_WR_RDMA_WRITE_WITH_IMM, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ},
        {IBV_WR_RDMA_READ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE}};
    if (a_.dev.atomic_cap != IBV_ATOMIC_NONE) {
        cases.push_back({IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_ACCESS_LOCAL_WRITE |
                                                          IBV_ACCESS_REMOTE_WRITE |
                                                          IBV_ACCESS_REMOTE_READ});
    } else {
        std::cout << "[ NOTE     ] " << a_.name << ": atomic_cap NONE, atomic case left out\n";
    }
    for (const Case& k : cases) {
        SCOPED_TRACE("opcode " + std::to_string(k.op));
        Conn c = Connect();
        Buf* local = Reg(a_, 64, kLocal);
        Buf* remote = Reg(b_, 64, k.access);
        Buf* rbuf = Reg(b_, 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(remote->p(), 64, 1);
        std::vector<uint8_t> before = remote->mem;
        ASSERT_EQ(PostRecv(c.b, 1, {rbuf->sge(0, 64)}), 0);
        Wr w;
        w.op = k.op;
        w.wr_id = 5;
        w.sge = {local->sge(0, k.op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 64)};
        w.raddr = remote->addr();
        w.rkey = remote->mr->rkey;
        w.compare_add = 1;
        ASSERT_EQ(Post(c.a, w), 0);
        ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5));
        EXPECT_TRUE(remote->mem == before) << "target written without the right";
    }
}

TEST_F(DataPath, ErrRkeyOfMrInOtherPd) {
    Conn c = Connect();
    ibv_pd* other = AllocPd(b_);
    ASSERT_NE(other, nullptr);
    Buf* local = Reg(a_, 64, kLocal);
    Buf* remote = Reg(b_, 64, kRemoteAll, other);
    ASSERT_FALSE(HasFailure());
    Wr w = WriteWr(5, local->sge(0, 64), remote);
    Fill(local->p(), 64, 2);
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5));
    EXPECT_EQ(FirstDiff(std::vector<uint8_t>(64, 0).data(), remote->p(), 64), -1)
        << "an MR of another PD was written";
}

TEST_F(DataPath, ErrRkeyOfDeregisteredMr) {
    Conn c = Connect();
    Buf* local = Reg(a_, 64, kLocal);
    Buf* remote = Reg(b_, 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    const uint32_t rkey = remote->mr->rkey;
    ASSERT_EQ(Dereg(remote), 0);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.wr_id = 5;
    w.sge = {local->sge(0, 64)};
    Fill(local->p(), 64, 3);
    w.raddr = remote->addr();
    w.rkey = rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5));
    EXPECT_EQ(FirstDiff(std::vector<uint8_t>(64, 0).data(), remote->p(), 64), -1)
        << "a deregistered MR was written";
}

TEST_F(DataPath, ErrRecvBufferTooSmall) {
    Conn c = Connect();
    Buf* src = Reg(a_, 64, kLocal);
    Buf* dst = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 16)}), 0);
    Wr w;
    w.wr_id = 5;
    w.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(StatusMatches(b_.ctx, r[0].status, IBV_WC_LOC_LEN_ERR)) << WcStr(r[0]);
    EXPECT_EQ(r[0].wr_id, 1u);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_INV_REQ_ERR, 5));
    EXPECT_TRUE(WaitQpState(c.b, IBV_QPS_ERR)) << "responder state " << QpState(c.b);
}

// ibv_post_send before RTS is refused: EINVAL and no completion.
TEST_F(DataPath, ErrPostSendBeforeRts) {
    RcQpSpec qs;
    qs.send_cq = a_.scq;
    qs.recv_cq = a_.rcq;
    ibv_qp* qp = MakeRcQp(a_.pd, qs);
    ASSERT_NE(qp, nullptr);
    qps_.push_back(qp);
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    auto refused = [&](const char* st) {
        Wr w;
        w.sge = {src->sge(0, 64)};
        int rc = Post(qp, w);
        if (IsNtrdma(a_.ctx)) {
            EXPECT_EQ(rc, EINVAL) << "post_send in " << st;
        } else {
            EXPECT_NE(rc, 0) << "post_send in " << st;
        }
    };
    refused("RESET");
    ASSERT_EQ(QpToInit(qp), 0);
    refused("INIT");
    RtrSpec r;
    r.dest_qpn = qp->qp_num;
    r.dgid = a_.gid;
    r.dlid = a_.lid;
    ASSERT_EQ(QpToRtr(qp, r), 0);
    refused("RTR");
    EXPECT_EQ(Drain(a_.scq, 200).size(), 0u) << "a refused WR completed";
}

// A CQ overflow raises IBV_EVENT_CQ_ERR (an async event), and nothing
// crashes.
TEST_F(DataPath, ErrCqOverflowRaisesCqErr) {
    ibv_cq* small = CreateCq(a_, 4);
    ASSERT_NE(small, nullptr);
    const int cqe = small->cqe;
    ConnSpec cs;
    cs.scq_a = small;
    cs.wr = static_cast<uint32_t>(cqe) + 8;
    Conn c = Connect(cs);
    Buf* src = Reg(a_, 8, kLocal);
    Buf* dst = Reg(b_, 8, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    int fl = fcntl(a_.ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(a_.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
    for (int i = 0; i < cqe + 4; i++) {
        Wr w = WriteWr(i, src->sge(0, 8), dst);
        ASSERT_EQ(Post(c.a, w), 0) << i;
    }
    bool got = false;
    const auto deadline = Clock::now() + milliseconds(5000);
    while (!got && Clock::now() < deadline) {
        pollfd pfd{a_.ctx->async_fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) != 1) {
            continue;
        }
        ibv_async_event ev{};
        while (ibv_get_async_event(a_.ctx, &ev) == 0) {
            if (ev.event_type == IBV_EVENT_CQ_ERR) {
                EXPECT_EQ(ev.element.cq, small);
                got = true;
            }
            ibv_ack_async_event(&ev);
        }
    }
    EXPECT_TRUE(got) << "no IBV_EVENT_CQ_ERR after " << cqe + 4 << " completions into a CQ of "
                     << cqe;
    // The CQ still polls without crashing (its content is undefined now).
    ibv_wc wc[64];
    EXPECT_GE(ibv_poll_cq(small, 64, wc), 0);
}

// ---- RNR ----

TEST_F(DataPath, RnrRetryUntilReceivePosted) {
    ConnSpec cs;
    cs.rnr_retry = 7;  // infinite
    cs.min_rnr_timer = 1;
    Conn c = Connect(cs);
    Buf* src = Reg(a_, 64, kLocal);
    Buf* dst = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 64, 11);
    Wr w;
    w.wr_id = 5;
    w.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(c.a, w), 0);
    EXPECT_EQ(Drain(a_.scq, 200).size(), 0u) << "completed with no receive posted";
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 64)}), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u) << "the SEND never completed after the receive came";
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64), -1);
}

TEST_F(DataPath, RnrRetryExceeded) {
    ConnSpec cs;
    cs.rnr_retry = 0;
    cs.min_rnr_timer = 1;
    Conn c = Connect(cs);
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w;
    w.wr_id = 5;
    w.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_RNR_RETRY_EXC_ERR, 5));
}

// A SEND that fails here (an lkey nobody registered) behind one waiting for
// a receive (RNR NAKs): the SEND after it never reaches the peer. The
// requester completes the first, then the error, and flushes the last.
TEST_F(DataPath, NothingAfterALocalErrorReachesThePeer) {
    Conn c = Connect();
    Buf* src = Reg(a_, 192, kLocal);
    Buf* dst = Reg(b_, 192, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 192, 5);
    Wr first;
    first.wr_id = 1;
    first.sge = {src->sge(0, 64)};
    Wr bad = first;
    bad.wr_id = 2;
    bad.sge = {src->sge(64, 64)};
    bad.sge[0].lkey ^= 0x80;  // another tag: no such key
    Wr last = first;
    last.wr_id = 3;
    last.sge = {src->sge(128, 64)};
    ASSERT_EQ(PostChain(c.a, {first, bad, last}), 0);
    EXPECT_EQ(Drain(a_.scq, 200).size(), 0u) << "completed with no receive posted";
    for (uint64_t i = 0; i < 3; i++) {
        ASSERT_EQ(PostRecv(c.b, 11 + i, {dst->sge(64 * i, 64)}), 0);
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_LOC_PROT_ERR) << WcStr(s[1]);
    EXPECT_EQ(s[2].status, IBV_WC_WR_FLUSH_ERR) << WcStr(s[2]);
    std::vector<ibv_wc> r = Drain(b_.rcq, 500);
    ASSERT_EQ(r.size(), 1u) << "a SEND after the failed one reached the peer";
    EXPECT_EQ(r[0].wr_id, 11u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64), -1);
}

// ---- the local ACK timeout and peers that take nothing ----

class AckTimeout : public DataPath {
  protected:
    // A requester QP on a_ and a responder QP on b_, both in RESET.
    void MakePair() {
        RcQpSpec q;
        q.send_cq = a_.scq;
        q.recv_cq = a_.rcq;
        a_qp_ = MakeRcQp(a_.pd, q);
        q.send_cq = b_.scq;
        q.recv_cq = b_.rcq;
        b_qp_ = MakeRcQp(b_.pd, q);
        ASSERT_NE(a_qp_, nullptr) << std::strerror(errno);
        ASSERT_NE(b_qp_, nullptr) << std::strerror(errno);
        qps_.push_back(a_qp_);
        qps_.push_back(b_qp_);
        ASSERT_EQ(QpToInit(a_qp_), 0);
        ASSERT_EQ(QpToInit(b_qp_), 0);
    }

    // The requester's one WR completes with @want within @ms; returns the
    // time it took.
    long ExpectStatus(ibv_wc_status want, int ms) {
        const auto t0 = Clock::now();
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1, ms);
        const long took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
        EXPECT_EQ(wc.size(), 1u) << "no completion within " << ms << " ms";
        if (!wc.empty()) {
            EXPECT_EQ(wc[0].status, want) << WcStr(wc[0]);
        }
        return took;
    }

    // RESET/INIT -> RTR toward @dest_qpn of @peer, expecting @rq_psn.
    static int ToRtr(ibv_qp* qp, const Side& peer, uint32_t dest_qpn, uint32_t rq_psn = 0) {
        RtrSpec r;
        r.dest_qpn = dest_qpn;
        r.dgid = peer.gid;
        r.dlid = peer.lid;
        r.rq_psn = rq_psn;
        return QpToRtr(qp, r);
    }

    // RTR -> RTS with the default timeout (67 ms: the driver's floor,
    // 500 ms, applies) and @retry_cnt, starting at @sq_psn.
    static int ToRts(ibv_qp* qp, uint8_t retry_cnt, uint32_t sq_psn = 0) {
        RtsSpec t;
        t.retry_cnt = retry_cnt;
        t.sq_psn = sq_psn;
        return QpToRts(qp, t);
    }

    // Connect the pair with the requester sending PSNs from 1000 while the
    // responder expects 0: it drops every segment and says nothing.
    void ConnectSilent(RtsSpec requester) {
        requester.sq_psn = 1000;
        ASSERT_EQ(ToRtr(a_qp_, b_, b_qp_->qp_num), 0);
        ASSERT_EQ(QpToRts(a_qp_, requester), 0);
        ASSERT_EQ(ToRtr(b_qp_, a_, a_qp_->qp_num), 0);
        ASSERT_EQ(ToRts(b_qp_, 1), 0);
    }

    // A 4 KiB READ of @remote into @local.
    static Wr ReadWr(uint64_t wr_id, const Buf* local, const Buf* remote) {
        Wr w;
        w.op = IBV_WR_RDMA_READ;
        w.wr_id = wr_id;
        w.sge = {local->sge(0, 4096)};
        w.raddr = remote->addr();
        w.rkey = remote->mr->rkey;
        return w;
    }

    ibv_qp* a_qp_ = nullptr;
    ibv_qp* b_qp_ = nullptr;
};

// A WRITE to a QP number the peer does not have fails with RETRY_EXC_ERR
// (the peer answers NO_QP at once, counted; the requester retries
// retry_cnt times, an ACK timeout apart). The source MR of a second WRITE
// behind it, deregistered while both are outstanding, deregisters once they
// failed: nothing waits for an answer that never comes (no task in D state).
TEST_F(AckTimeout, WriteToMissingPeerQpFailsRetryExceeded) {
    ASSERT_NO_FATAL_FAILURE(MakePair());
    Buf* src = Reg(a_, 64 << 10, kLocal);
    Buf* src2 = Reg(a_, 64 << 10, kLocal);
    Buf* dst = Reg(b_, 64 << 10, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    const long long naks = HwCounter(b_.name, "nak_no_qp_sent");
    ASSERT_GE(naks, 0);
    ASSERT_EQ(ToRtr(a_qp_, b_, 0xfffff0), 0);  // no QP of the peer has this number
    ASSERT_EQ(ToRts(a_qp_, 1), 0);
    const auto t0 = Clock::now();
    ASSERT_EQ(PostChain(a_qp_, {WriteWr(1, src->sge(0, 64 << 10), dst),
                                WriteWr(2, src2->sge(0, 64 << 10), dst)}),
              0);
    EXPECT_EQ(Dereg(src2), 0);
    const long dereg_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::vector<ibv_wc> wc = PollCq(a_.scq, 2, 20000);
    const long took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::cout << "[ NOTE     ] dereg returned after " << dereg_ms << " ms, completions after "
              << took << " ms\n";
    ASSERT_EQ(wc.size(), 2u) << "the WRITEs did not both complete within 20 s";
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << WcStr(wc[0]);
    // The second fails too: flushed, or its MR went away under it.
    EXPECT_NE(wc[1].status, IBV_WC_SUCCESS) << WcStr(wc[1]);
    EXPECT_LT(dereg_ms, 12000) << "dereg waited past its 10 s bound";
    EXPECT_TRUE(WaitQpState(a_qp_, IBV_QPS_ERR));
    std::this_thread::sleep_for(milliseconds(50));  // the core caches counters
    EXPECT_GT(HwCounter(b_.name, "nak_no_qp_sent"), naks) << "the peer sent no NO_QP NAK";
}

// A responder QP that exists but has not reached RTR yet takes nothing:
// the requester retries, and its SEND lands once the responder is ready
// (the usual race of two sides moving their QPs, which IB retries cover).
TEST_F(AckTimeout, SendToPeerQpNotYetReadyIsRetried) {
    ASSERT_NO_FATAL_FAILURE(MakePair());
    Buf* src = Reg(a_, 256, kLocal);
    Buf* dst = Reg(b_, 256, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 256, 9);
    ASSERT_EQ(ToRtr(a_qp_, b_, b_qp_->qp_num), 0);
    ASSERT_EQ(ToRts(a_qp_, 7), 0);
    Wr w;
    w.wr_id = 2;
    w.sge = {src->sge(0, 256)};
    ASSERT_EQ(Post(a_qp_, w), 0);  // the responder is still in INIT
    std::this_thread::sleep_for(milliseconds(300));
    ASSERT_EQ(PostRecv(b_qp_, 3, {dst->sge(0, 256)}), 0);
    ASSERT_EQ(ToRtr(b_qp_, a_, a_qp_->qp_num), 0);
    ExpectStatus(IBV_WC_SUCCESS, 20000);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1, 5000);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 256), -1);
}

// A responder that takes nothing and says nothing (here: it expects
// another PSN, so it drops every segment as out of order): after
// (retry_cnt + 1) ACK timeouts without progress the WQE fails with
// RETRY_EXC_ERR, and the MRs it used deregister at once.
TEST_F(AckTimeout, SilentResponderFailsRetryExceeded) {
    ASSERT_NO_FATAL_FAILURE(MakePair());
    Buf* src = Reg(a_, 4096, kLocal);
    Buf* dst = Reg(b_, 4096, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    RtsSpec t;
    t.retry_cnt = 1;
    ASSERT_NO_FATAL_FAILURE(ConnectSilent(t));
    ASSERT_EQ(Post(a_qp_, ReadWr(4, src, dst)), 0);
    const long took = ExpectStatus(IBV_WC_RETRY_EXC_ERR, 20000);
    std::cout << "[ NOTE     ] RETRY_EXC_ERR after " << took << " ms\n";
    EXPECT_GE(took, 900) << "failed before two ACK timeouts (500 ms floor) passed";
    const auto t0 = Clock::now();
    EXPECT_EQ(Dereg(src), 0);
    EXPECT_EQ(Dereg(dst), 0);
    EXPECT_LT(std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count(), 1000);
}

// ACK timeout 0 means "wait for ever" in IB: a READ to a responder that
// never answers holds its destination MR for good. Deregistering that MR
// still returns, within the driver's bound (10 s), instead of leaving the
// process in D state; the READ's pages stay pinned until the QP lets go of
// it (here: the flush when the QP enters ERR), never freed under it.
TEST_F(AckTimeout, DeregUnderEndlessReadReturnsInBoundedTime) {
    ASSERT_NO_FATAL_FAILURE(MakePair());
    Buf* dst = Reg(a_, 4096, kLocal);
    Buf* src = Reg(b_, 4096, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    RtsSpec t;
    t.timeout = 0;
    ASSERT_NO_FATAL_FAILURE(ConnectSilent(t));
    ASSERT_EQ(Post(a_qp_, ReadWr(6, dst, src)), 0);
    EXPECT_TRUE(PollCq(a_.scq, 1, 1000).empty()) << "the READ completed: no endless wait";
    const auto t0 = Clock::now();
    EXPECT_EQ(Dereg(dst), 0);
    const long took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::cout << "[ NOTE     ] dereg returned after " << took << " ms\n";
    EXPECT_LT(took, 15000);
    ASSERT_EQ(QpToState(a_qp_, IBV_QPS_ERR), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 1, 5000);
    ASSERT_EQ(wc.size(), 1u) << "the READ was not flushed";
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR) << WcStr(wc[0]);
}

// ---- affiliated asynchronous events of the QP life cycle ----

// RTS -> SQD with asynchronous notification: once the WQEs that went out
// have completed, IBV_EVENT_SQ_DRAINED; the QP returns to RTS and works.
TEST_F(DataPath, SqdDeliversSqDrained) {
    Conn c = Connect();
    Buf* src = Reg(a_, 64 << 10, kLocal);
    Buf* dst = Reg(b_, 64 << 10, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < 4; i++) {
        Wr w = WriteWr(i, src->sge(0, 64 << 10), dst);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_SQD;
    a.en_sqd_async_notify = 1;
    ASSERT_EQ(ibv_modify_qp(c.a, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
    EXPECT_TRUE(WaitAsyncEvent(a_.ctx, IBV_EVENT_SQ_DRAINED, 10000, c.a))
        << "no IBV_EVENT_SQ_DRAINED";
    // Drained: what was in progress completed; nothing new starts in SQD.
    std::vector<ibv_wc> wc = PollCq(a_.scq, 4, 500);
    const size_t before_rts = wc.size();
    for (const ibv_wc& w : wc) {
        EXPECT_EQ(w.status, IBV_WC_SUCCESS) << WcStr(w);
    }
    a = {};
    a.qp_state = IBV_QPS_RTS;
    ASSERT_EQ(ibv_modify_qp(c.a, &a, IBV_QP_STATE), 0);
    Wr w = WriteWr(9, src->sge(0, 64), dst);
    ASSERT_EQ(Post(c.a, w), 0);
    // Back in RTS: the rest of the posted WRITEs and the new one, in order.
    wc = PollCq(a_.scq, 5 - before_rts);
    ASSERT_EQ(wc.size(), 5 - before_rts) << before_rts << " completed in SQD";
    for (const ibv_wc& x : wc) {
        EXPECT_EQ(x.status, IBV_WC_SUCCESS) << WcStr(x);
    }
    EXPECT_EQ(wc.back().wr_id, 9u);
}

// A QP on an SRQ entering ERR: IBV_EVENT_QP_LAST_WQE_REACHED (no receive
// WQE of the SRQ will be taken by it any more), as kernel ULPs expect.
TEST_F(DataPath, SrqQpToErrDeliversLastWqeReached) {
    ibv_srq* srq = CreateSrq(b_, 16, 1);
    ASSERT_NE(srq, nullptr);
    ConnSpec cs;
    cs.srq_b = srq;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(QpToState(c.b, IBV_QPS_ERR), 0);
    EXPECT_TRUE(WaitAsyncEvent(b_.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, 5000, c.b))
        << "no IBV_EVENT_QP_LAST_WQE_REACHED";
}

// ---- limits ----

TEST_F(DataPath, LimitsHonouredExactly) {
    const uint32_t nsge = static_cast<uint32_t>(std::min(a_.dev.max_sge, 16));
    ConnSpec cs;
    cs.sge = nsge;
    cs.inline_data = 256;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    const uint32_t max_sge = c.cap_a.max_send_sge;
    const uint32_t max_inline = c.cap_a.max_inline_data;
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(max_sge, 16u);
        EXPECT_EQ(max_inline, 256u);
    }
    Buf* src = Reg(a_, 64 * (max_sge + 2) + max_inline + 1, kLocal);
    Buf* dst = Reg(b_, 64 * (max_sge + 2) + max_inline + 1, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w;
    for (uint32_t i = 0; i < max_sge + 1; i++) {
        w.sge.push_back(src->sge(64 * i, 64));
    }
    EXPECT_NE(Post(c.a, w), 0) << max_sge + 1 << " SGEs on a QP of " << max_sge;
    w.sge.pop_back();
    Wr in;
    in.flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    in.sge = {ibv_sge{src->addr(), max_inline + 1, 0}};
    EXPECT_NE(Post(c.a, in), 0) << max_inline + 1 << " inline bytes on a QP of " << max_inline;
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a refused WR completed";
    // Exactly at the limits works.
    Fill(src->p(), 64 * (max_sge + 2) + max_inline + 1, 12);
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 64 * max_sge)}), 0);
    ASSERT_EQ(PostRecv(c.b, 2, {dst->sge(0, max_inline)}), 0);
    ASSERT_EQ(Post(c.a, w), 0);
    in.sge[0].length = max_inline;
    ASSERT_EQ(Post(c.a, in), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 2);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].byte_len, 64 * max_sge);
    EXPECT_EQ(r[1].byte_len, max_inline);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), max_inline), -1);
}

// ---- bursts ----

// A burst deeper than one message at a time: 256 SENDs of 4 KiB posted
// back to back complete in order on both sides, each in its own receive.
TEST_F(DataPath, SendBurstInOrder) {
    const int n = 256;
    const uint32_t len = 4096;
    ConnSpec cs;
    cs.wr = n;
    Conn c = Connect(cs);
    Buf* src = Reg(a_, size_t{len} * n, kLocal);
    Buf* dst = Reg(b_, size_t{len} * n, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), size_t{len} * n, 700);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(PostRecv(c.b, i, {dst->sge(size_t{len} * i, len)}), 0) << i;
    }
    for (int i = 0; i < n; i++) {
        Wr w;
        w.wr_id = i;
        w.sge = {src->sge(size_t{len} * i, len)};
        ASSERT_EQ(Post(c.a, w), 0) << i;
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    std::vector<ibv_wc> r = PollCq(b_.rcq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n));
    ASSERT_EQ(r.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        ASSERT_EQ(s[i].wr_id, static_cast<uint64_t>(i)) << "requester completions out of order";
        ASSERT_EQ(r[i].status, IBV_WC_SUCCESS) << WcStr(r[i]);
        ASSERT_EQ(r[i].wr_id, static_cast<uint64_t>(i)) << "receives out of order";
        ASSERT_EQ(r[i].byte_len, len);
    }
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), size_t{len} * n), -1);
}

// Several READs outstanding at once (up to max_rd_atomic, then queued):
// all complete, in posting order, each with its own data.
TEST_F(DataPath, ManyOutstandingReadsInOrder) {
    const int n = 24;
    const uint32_t len = 65536;
    Conn c = Connect();
    Buf* src = Reg(b_, size_t{len} * n, kRemoteAll);
    Buf* dst = Reg(a_, size_t{len} * n, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), size_t{len} * n, 800);
    std::vector<Wr> ws;
    for (int i = 0; i < n; i++) {
        Wr w;
        w.op = IBV_WR_RDMA_READ;
        w.wr_id = i;
        w.sge = {dst->sge(size_t{len} * (n - 1 - i), len)};  // reversed placement
        w.raddr = src->addr(size_t{len} * i);
        w.rkey = src->mr->rkey;
        ws.push_back(w);
    }
    ASSERT_EQ(PostChain(c.a, ws), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, static_cast<uint64_t>(i)) << "READ completions out of order";
        EXPECT_EQ(s[i].opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(FirstDiff(src->p(size_t{len} * i), dst->p(size_t{len} * (n - 1 - i)), len), -1)
            << "READ " << i;
    }
}

// Fetch-and-add from two QPs (on two connections) onto one counter,
// interleaved: every add lands once and every returned value is distinct.
TEST_F(DataPath, AtomicsFromTwoQpsAreAtomic) {
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(a_.dev.atomic_cap, IBV_ATOMIC_HCA);
    } else if (a_.dev.atomic_cap == IBV_ATOMIC_NONE) {
        GTEST_SKIP() << a_.name << " has no atomics (atomic_cap NONE)";
    }
    const int n = 64;  // per QP
    ConnSpec cs;
    cs.wr = n;
    Conn c1 = Connect(cs);
    Conn c2 = Connect(cs);
    Buf* tgt = Reg(b_, 8, kRemoteAll);
    Buf* res = Reg(a_, 8 * 2 * n, kLocal);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < n; i++) {
        for (int q = 0; q < 2; q++) {
            Wr w;
            w.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
            w.wr_id = q * n + i;
            w.sge = {res->sge(8 * (q * n + i), 8)};
            w.raddr = tgt->addr();
            w.rkey = tgt->mr->rkey;
            w.compare_add = 1;
            ASSERT_EQ(Post(q ? c2.a : c1.a, w), 0);
        }
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, 2 * n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(2 * n));
    for (const ibv_wc& wc : s) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p()), static_cast<uint64_t>(2 * n)) << "adds lost";
    std::set<uint64_t> seen;
    for (int i = 0; i < 2 * n; i++) {
        seen.insert(reinterpret_cast<uint64_t*>(res->p())[i]);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(2 * n)) << "two adds saw the same value";
    EXPECT_EQ(*seen.rbegin(), static_cast<uint64_t>(2 * n - 1));
}

// A chain whose k-th WR is invalid (more SGEs than the QP has) is refused
// there: ibv_post_send returns an error, bad_wr points at that WR, the WRs
// before it run and none from it on.
TEST_F(DataPath, PostSendChainStopsAtBadWr) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    const uint32_t max_sge = c.cap_a.max_send_sge;
    Buf* src = Reg(a_, 64 * std::max(8u, max_sge + 1), kLocal);
    Buf* dst = Reg(b_, 64 * 8, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 900);
    std::vector<Wr> ws;
    for (int i = 0; i < 6; i++) {
        Wr w;
        w.op = IBV_WR_RDMA_WRITE;
        w.wr_id = i;
        w.sge = {src->sge(64 * i, 64)};
        w.raddr = dst->addr(64 * i);
        w.rkey = dst->mr->rkey;
        ws.push_back(w);
    }
    ws[3].sge.clear();
    for (uint32_t i = 0; i < max_sge + 1; i++) {
        ws[3].sge.push_back(src->sge(64 * i, 1));
    }
    size_t nbad = 0;
    int rc = PostChain(c.a, ws, &nbad);
    EXPECT_NE(rc, 0) << "a chain with an invalid WR was accepted";
    EXPECT_EQ(nbad, 3u) << "bad_wr does not point at the invalid WR";
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, i);
    }
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a WR at or after the invalid one ran";
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64 * 3), -1);
    for (size_t i = 64 * 3; i < 64 * 8; i++) {
        ASSERT_EQ(dst->p()[i], 0) << "a WR at or after the invalid one wrote at " << i;
    }
}

// Odd addresses and lengths across page boundaries, on both ends: SEND,
// WRITE and READ each move exactly the bytes asked for.
TEST_F(DataPath, UnalignedAcrossPages) {
    Conn c = Connect();
    const uint32_t len = 3 * 4096 + 5;
    const size_t soff = 4093, doff = 1;
    Buf* src = Reg(a_, soff + len + 64, kLocal);
    Buf* back = Reg(a_, soff + len + 64, kLocal);
    Buf* dst = Reg(b_, doff + len + 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 1100);
    for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        std::memset(dst->p(), 0xEE, dst->mem.size());
        if (op == IBV_WR_RDMA_READ) {
            Fill(dst->p(doff), len, 1101);
        }
        std::memset(back->p(), 0xEE, back->mem.size());
        if (op == IBV_WR_SEND) {
            ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(doff, len)}), 0);
        }
        Wr w;
        w.op = op;
        w.sge = {op == IBV_WR_RDMA_READ ? back->sge(soff, len) : src->sge(soff, len)};
        w.raddr = dst->addr(doff);
        w.rkey = dst->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        if (op == IBV_WR_SEND) {
            std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
            ASSERT_EQ(r.size(), 1u);
            EXPECT_EQ(r[0].byte_len, len);
        }
        if (op == IBV_WR_RDMA_READ) {
            EXPECT_EQ(FirstDiff(dst->p(doff), back->p(soff), len), -1);
            EXPECT_EQ(back->p()[soff - 1], 0xEE);
            EXPECT_EQ(back->p()[soff + len], 0xEE);
        } else {
            EXPECT_EQ(FirstDiff(src->p(soff), dst->p(doff), len), -1);
            EXPECT_EQ(dst->p()[0], 0xEE);
            EXPECT_EQ(dst->p()[doff + len], 0xEE);
        }
    }
}

// Several connections at once, their SENDs interleaved, all into one
// responder CQ: every message reaches its own QP, in order per QP.
TEST_F(DataPath, ManyQpsInterleaved) {
    const int nq = 8, nm = 16;
    const uint32_t len = 2048;
    std::vector<Conn> cs;
    for (int q = 0; q < nq; q++) {
        cs.push_back(Connect());
    }
    Buf* src = Reg(a_, size_t{len} * nq * nm, kLocal);
    Buf* dst = Reg(b_, size_t{len} * nq * nm, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 1200);
    auto slot = [&](int q, int m) { return size_t{len} * (q * nm + m); };
    for (int q = 0; q < nq; q++) {
        for (int m = 0; m < nm; m++) {
            ASSERT_EQ(PostRecv(cs[q].b, q * nm + m, {dst->sge(slot(q, m), len)}), 0);
        }
    }
    for (int m = 0; m < nm; m++) {
        for (int q = 0; q < nq; q++) {
            Wr w;
            w.wr_id = q * nm + m;
            w.sge = {src->sge(slot(q, m), len - m)};
            ASSERT_EQ(Post(cs[q].a, w), 0);
        }
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, nq * nm, 20000);
    std::vector<ibv_wc> r = PollCq(b_.rcq, nq * nm, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(nq * nm));
    ASSERT_EQ(r.size(), static_cast<size_t>(nq * nm));
    std::vector<int> next(nq, 0);
    for (const ibv_wc& wc : r) {
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
        int q = static_cast<int>(wc.wr_id) / nm, m = static_cast<int>(wc.wr_id) % nm;
        ASSERT_LT(q, nq);
        EXPECT_EQ(wc.qp_num, cs[q].b->qp_num) << "receive completed on the wrong QP";
        EXPECT_EQ(m, next[q]++) << "out of order on QP " << q;
        EXPECT_EQ(wc.byte_len, len - m);
        EXPECT_EQ(FirstDiff(src->p(slot(q, m)), dst->p(slot(q, m)), len - m), -1)
            << "QP " << q << " message " << m;
    }
    for (const ibv_wc& wc : s) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
}

// Zero-length messages are valid: a SEND and a WRITE_WITH_IMM of no bytes
// each complete a receive with byte_len 0 (the immediate delivered), and a
// zero-length WRITE completes without touching the target.
TEST_F(DataPath, ZeroLengthMessages) {
    Conn c = Connect();
    Buf* rbuf = Reg(b_, 64, kLocal);
    Buf* tgt = Reg(b_, 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    std::memset(rbuf->p(), 0xEE, 64);
    std::memset(tgt->p(), 0xEE, 64);
    ASSERT_EQ(PostRecv(c.b, 1, {rbuf->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c.b, 2, {rbuf->sge(0, 64)}), 0);
    Wr send;
    send.wr_id = 11;
    Wr write;
    write.op = IBV_WR_RDMA_WRITE;
    write.wr_id = 12;
    write.raddr = tgt->addr();
    write.rkey = tgt->mr->rkey;
    Wr wimm = write;
    wimm.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    wimm.wr_id = 13;
    wimm.imm = htonl(77);
    ASSERT_EQ(PostChain(c.a, {send, write, wimm}), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, 11 + i);
    }
    std::vector<ibv_wc> r = PollCq(b_.rcq, 2);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
    EXPECT_EQ(r[0].byte_len, 0u);
    EXPECT_EQ(r[1].status, IBV_WC_SUCCESS) << WcStr(r[1]);
    EXPECT_EQ(r[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[1].byte_len, 0u);
    EXPECT_EQ(r[1].imm_data, htonl(77));
    for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(rbuf->p()[i], 0xEE) << "zero-length message wrote at " << i;
        ASSERT_EQ(tgt->p()[i], 0xEE) << "zero-length WRITE wrote at " << i;
    }
}

// Destroying both QPs while large WRITEs are in flight returns promptly,
// and the target MR can be deregistered right after (no reference left
// behind, no hang, no oops).
TEST_F(DataPath, DestroyQpsWithWorkInFlight) {
    Conn c = Connect();
    const size_t len = 1 << 20;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < 8; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    const long ms = DestroyAndDereg(c, {dst, src});
    EXPECT_LT(ms, 10000) << "destroy/dereg with work in flight took " << ms << " ms";
    // The device still works.
    Conn d = Connect();
    Buf* s2 = Reg(a_, 64, kLocal);
    Buf* d2 = Reg(b_, 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(s2->p(), 64, 1000);
    Wr w = WriteWr(99, s2->sge(0, 64), d2);
    ASSERT_EQ(Post(d.a, w), 0);
    std::vector<ibv_wc> s;
    for (const ibv_wc& wc : PollCq(a_.scq, 100, 2000)) {
        if (wc.qp_num == d.a->qp_num) {
            s.push_back(wc);
        }
    }
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(FirstDiff(s2->p(), d2->p(), 64), -1);
}

// A hostile user writes the ring indices the kernel owns (SQ/SRQ consumer,
// CQ producer) and the ones it reads (SQ/SRQ producer) of one connection's
// mapped rings (its responder takes receives from an SRQ) while WRITEs and
// SENDs are in flight. The kernel keeps its own positions: nothing is wiped
// or completed twice, no MR reference leaks (dereg and destroy return at
// once), and another connection of the same process keeps working.
TEST_F(DataPath, UserScribbledRingIndicesHarmOnlyTheirQp) {
    Conn bystander = Connect();
    const std::set<uintptr_t> before = UverbsMappings();
    ConnSpec spec;
    spec.scq_a = CreateCq(a_, 64);
    spec.rcq_b = CreateCq(b_, 64);
    spec.srq_b = CreateSrq(b_, 64, 1);
    Conn victim = Connect(spec);
    const size_t len = 256 << 10;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll | IBV_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(HasFailure());
    std::vector<uintptr_t> rings;
    for (uintptr_t m : UverbsMappings()) {
        if (!before.count(m)) {
            rings.push_back(m);
        }
    }
    // SQ and RQ of each QP, two CQs, the SRQ
    ASSERT_GE(rings.size(), 5u) << "the new connection's rings are not mapped";
    for (int i = 0; i < 8; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(victim.a, w), 0);
        ASSERT_EQ(PostSrqRecv(spec.srq_b, i, {dst->sge(i * 64, 64)}), 0);
    }
    std::mt19937 rng(7);
    for (int round = 0; round < 50; round++) {
        for (uintptr_t m : rings) {
            auto* ctl = reinterpret_cast<volatile uint32_t*>(m);
            ctl[16] = ctl[16] + 1 + rng() % 5;  // consumer index
            if (round % 10 == 9) {
                ctl[0] = rng();  // producer index
            }
        }
        Wr w = WriteWr(100 + round, src->sge(0, 64), dst);
        Wr snd;
        snd.wr_id = 200 + round;
        snd.sge = {src->sge(0, 64)};
        // These may fail: the user broke its own rings.
        PostChain(victim.a, {w, snd});
        PostSrqRecv(spec.srq_b, 300 + round, {dst->sge(0, 64)});
        std::this_thread::sleep_for(milliseconds(5));
    }
    const long ms = DestroyAndDereg(victim, {dst, src});
    EXPECT_LT(ms, 10000) << "destroy/dereg after the scribbling took " << ms << " ms";

    // The other connection of this process: a WRITE and a SEND, checked.
    Buf* s2 = Reg(a_, 4096, kLocal);
    Buf* d2 = Reg(b_, 4096, kRemoteAll | IBV_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(HasFailure());
    Fill(s2->p(), 4096, 77);
    ASSERT_EQ(PostRecv(bystander.b, 7, {d2->sge(2048, 2048)}), 0);
    Wr w = WriteWr(5, s2->sge(0, 2048), d2);
    Wr snd;
    snd.op = IBV_WR_SEND;
    snd.wr_id = 6;
    snd.sge = {s2->sge(2048, 2048)};
    ASSERT_EQ(PostChain(bystander.a, {w, snd}), 0);
    std::vector<ibv_wc> got;
    // The victim's QPs complete into their own CQs, never these.
    for (const ibv_wc& wc : PollCq(a_.scq, 2, 5000)) {
        if (wc.qp_num == bystander.a->qp_num) {
            got.push_back(wc);
        }
    }
    ASSERT_EQ(got.size(), 2u) << "the bystander's WRITE and SEND did not both complete";
    for (const ibv_wc& wc : got) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
    std::vector<ibv_wc> rcv;
    for (const ibv_wc& wc : PollCq(b_.rcq, 1, 5000)) {
        if (wc.qp_num == bystander.b->qp_num) {
            rcv.push_back(wc);
        }
    }
    ASSERT_EQ(rcv.size(), 1u) << "the bystander's receive did not complete";
    EXPECT_EQ(rcv[0].status, IBV_WC_SUCCESS) << WcStr(rcv[0]);
    EXPECT_EQ(rcv[0].byte_len, 2048u);
    EXPECT_EQ(FirstDiff(s2->p(), d2->p(), 4096), -1) << "the bystander's data differ";
}

// ---- regressions: the old NTRDMA's defects ----

// Defect 1: a reserved lkey made a receive's address a physical address.
// lkey 0 and small integers are no keys, in send and in receive SGEs: the
// WR fails with a protection error and nothing is written anywhere (canary
// MRs, registered first, stay as they were).
TEST_F(DataPath, OldNtrdmaDefect1ReservedLkeysRejected) {
    Buf* canary_a = Reg(a_, 4096, kLocal);
    Buf* canary_b = Reg(b_, 4096, kLocal);
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(canary_a->p(), 4096, 21);
    Fill(canary_b->p(), 4096, 22);
    Fill(src->p(), 64, 23);
    const std::vector<uint8_t> ca = canary_a->mem, cb = canary_b->mem;
    for (uint32_t key : {0u, 1u, 2u, 3u, 0x80u, 0x100u, 0x101u}) {
        SCOPED_TRACE("lkey " + std::to_string(key));
        // index 1 with tag 1 is a real key about once in 255 registrations
        // (tags are random); tag 0 is never issued, so 0x100 always fails.
        if (key == canary_a->mr->lkey || key == canary_b->mr->lkey || key == src->mr->lkey) {
            std::cout << "[ NOTE     ] lkey " << key << " is one of this test's MRs\n";
            EXPECT_NE(key, 0x100u) << "the driver issued a key with tag 0";
            continue;
        }
        {  // send SGE
            Conn c = Connect();
            ASSERT_FALSE(HasFailure());
            Wr w;
            w.wr_id = 5;
            w.sge = {ibv_sge{canary_a->addr(), 64, key}};
            ASSERT_EQ(Post(c.a, w), 0);
            ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5));
        }
        {  // receive SGE
            Conn c = Connect();
            ASSERT_FALSE(HasFailure());
            ASSERT_EQ(PostRecv(c.b, 1, {ibv_sge{canary_b->addr(), 64, key}}), 0);
            Wr w;
            w.wr_id = 5;
            w.sge = {src->sge(0, 64)};
            ASSERT_EQ(Post(c.a, w), 0);
            std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
            ASSERT_EQ(r.size(), 1u) << "no responder completion";
            EXPECT_TRUE(StatusMatches(b_.ctx, r[0].status, IBV_WC_LOC_PROT_ERR)) << WcStr(r[0]);
            std::vector<ibv_wc> s = PollCq(a_.scq, 1);
            ASSERT_EQ(s.size(), 1u) << "no requester completion";
            EXPECT_NE(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
            if (s[0].status != IBV_WC_SUCCESS) {
                std::cout << "[ NOTE     ] requester status for a bad receive lkey: "
                          << ibv_wc_status_str(s[0].status) << "\n";
            }
        }
        EXPECT_TRUE(canary_a->mem == ca) << "requester canary changed";
        EXPECT_TRUE(canary_b->mem == cb) << "responder canary changed";
    }
}

// Defect 2: the send path did not bound the WQE count. Posting more WRs
// than the SQ holds is refused at the first that does not fit; the ones
// before it run; the QP goes on working.
TEST_F(DataPath, OldNtrdmaDefect2SqOverflowRefused) {
    ConnSpec cs;
    cs.wr = 8;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    const uint32_t depth = c.cap_a.max_send_wr;
    ASSERT_GE(depth, 8u);
    Buf* src = Reg(a_, 64 * (depth * 4), kLocal);
    Buf* dst = Reg(b_, 64 * (depth * 4), kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 31);
    std::vector<Wr> ws;
    for (uint32_t i = 0; i < depth * 4; i++) {
        Wr w;
        w.op = IBV_WR_RDMA_WRITE;
        w.wr_id = i;
        w.sge = {src->sge(64 * i, 64)};
        w.raddr = dst->addr(64 * i);
        w.rkey = dst->mr->rkey;
        ws.push_back(w);
    }
    size_t nbad = 0;
    int rc = PostChain(c.a, ws, &nbad);
    EXPECT_NE(rc, 0) << depth * 4 << " WRs on an SQ of " << depth;
    // Refused at the first WR that does not fit: at or after the reported
    // depth (a device may hold more than it reports).
    EXPECT_GE(nbad, depth) << "refused within the reported depth";
    ASSERT_LT(nbad, ws.size()) << "nothing refused";
    std::cout << "[ NOTE     ] SQ of " << depth << " took " << nbad << " WRs\n";
    std::vector<ibv_wc> s = PollCq(a_.scq, nbad);
    ASSERT_EQ(s.size(), nbad);
    for (uint32_t i = 0; i < nbad; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, i);
    }
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a refused WR ran";
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64 * nbad), -1);
    for (size_t i = 64 * nbad; i < dst->mem.size(); i++) {
        ASSERT_EQ(dst->p()[i], 0) << "a refused WR wrote at " << i;
    }
    // Still usable.
    ws.resize(1);
    ASSERT_EQ(PostChain(c.a, ws), 0);
    s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
}

// Defect 3: no PD or access checks, guessable keys. (The PD and access
// checks: ErrMrWithoutRemoteAccess, ErrRkeyOfMrInOtherPd, ErrLkeyOfOtherPd.)
// 1000 wrong rkeys (random ones, and the right index with every other tag)
// all fail with REM_ACCESS_ERR and write nothing.
TEST_F(DataPath, OldNtrdmaDefect3KeysNotGuessable) {
    Conn c = Connect();
    Buf* local = Reg(a_, 64, kLocal);
    Buf* remote = Reg(b_, 4096, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(local->p(), 64, 41);
    const uint32_t good = remote->mr->rkey;
    std::mt19937 rng(12345);
    std::vector<uint32_t> keys;
    for (uint32_t tag = 0; tag < 256; tag++) {
        if ((good & ~0xffu) + tag != good) {
            keys.push_back((good & ~0xffu) + tag);
        }
    }
    while (keys.size() < 1000) {
        uint32_t k = rng();
        if (k != good) {
            keys.push_back(k);
        }
    }
    int wrong = 0;
    const auto t0 = Clock::now();
    for (uint32_t k : keys) {
        // Back to RTS after each failure.
        for (ibv_qp* qp : {c.a, c.b}) {
            ASSERT_EQ(QpToState(qp, IBV_QPS_RESET), 0);
        }
        Drain(a_.scq, 0);
        RtrSpec ra, rb;
        ra.dest_qpn = c.b->qp_num;
        ra.dgid = b_.gid;
        ra.dlid = b_.lid;
        rb.dest_qpn = c.a->qp_num;
        rb.dgid = a_.gid;
        rb.dlid = a_.lid;
        ASSERT_EQ(QpToInit(c.a), 0);
        ASSERT_EQ(QpToInit(c.b), 0);
        ASSERT_EQ(QpToRtr(c.a, ra), 0);
        ASSERT_EQ(QpToRtr(c.b, rb), 0);
        ASSERT_EQ(QpToRts(c.a), 0);
        ASSERT_EQ(QpToRts(c.b), 0);
        Wr w;
        w.op = (k & 1) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        w.sge = {local->sge(0, 64)};
        w.raddr = remote->addr(64);
        w.rkey = k;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u) << "rkey " << k << ": no completion";
        if (s[0].status != IBV_WC_REM_ACCESS_ERR) {
            ADD_FAILURE() << "rkey 0x" << std::hex << k << " (good 0x" << good << std::dec
                          << "): " << WcStr(s[0]);
            if (++wrong > 5) {
                break;
            }
        }
    }
    std::cout << "[ NOTE     ] " << keys.size() << " wrong rkeys in "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count() << " ms\n";
    for (size_t i = 0; i < 4096; i++) {
        ASSERT_EQ(remote->p()[i], 0) << "target written at " << i;
    }
}

// Defect 4: MR references dropped before the DMA using the MR completed.
// Deregister the target MR while large WRITEs into it are in flight:
// dereg succeeds, every WR completes (success or REM_ACCESS_ERR, then
// flushed), no oops, and nothing lands in the buffer once dereg returned.
TEST_F(DataPath, OldNtrdmaDefect4DeregWhileWritesInFlight) {
    Conn c = Connect();
    const size_t len = 1 << 20;
    const int n = 8;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len, 51);
    for (int i = 0; i < n; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    const auto t0 = Clock::now();
    ASSERT_EQ(Dereg(dst), 0);
    const auto dereg_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::vector<uint8_t> at_dereg = dst->mem;
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n)) << "WRs did not all complete (hang?)";
    int ok = 0;
    bool failed = false;
    for (const ibv_wc& wc : s) {
        if (!failed && wc.status == IBV_WC_SUCCESS) {
            ok++;
        } else if (!failed) {
            EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << WcStr(wc);
            failed = true;
        } else {
            EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << WcStr(wc);
        }
    }
    std::cout << "[ NOTE     ] dereg took " << dereg_ms << " ms; " << ok << " of " << n
              << " WRITEs completed before it\n";
    EXPECT_TRUE(dst->mem == at_dereg) << "the buffer changed after dereg returned";
}

// Defect 10: user pages not pinned. The MR keeps the pages it registered:
// after the process unmaps the range and maps fresh pages at the same
// address, RDMA WRITE and READ still go to the registered pages, never to
// the new mapping, and nothing crashes.
TEST_F(DataPath, OldNtrdmaDefect10UserPagesPinned) {
    Conn c = Connect();
    const size_t len = 16 * 4096;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    std::memset(p, 0xAA, len);
    ibv_mr* mr = ibv_reg_mr(b_.pd, p, len, kRemoteAll);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    ASSERT_EQ(munmap(p, len), 0);
    void* q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(q, p);
    std::memset(q, 0x55, len);
    Buf* src = Reg(a_, len / 2, kLocal);
    Buf* back = Reg(a_, len, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len / 2, 61);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.wr_id = 1;
    w.sge = {src->sge(0, len / 2)};
    w.raddr = reinterpret_cast<uintptr_t>(p);
    w.rkey = mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    Wr rd = w;
    rd.op = IBV_WR_RDMA_READ;
    rd.wr_id = 2;
    rd.sge = {back->sge(0, len)};
    ASSERT_EQ(Post(c.a, rd), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    EXPECT_EQ(FirstDiff(src->p(), back->p(), len / 2), -1) << "READ did not see the WRITE";
    for (size_t i = len / 2; i < len; i++) {
        ASSERT_EQ(back->p()[i], 0xAA)
            << "READ saw the new mapping, not the registered pages, at " << i;
    }
    const uint8_t* nm = static_cast<const uint8_t*>(q);
    for (size_t i = 0; i < len; i++) {
        ASSERT_EQ(nm[i], 0x55) << "the WRITE went to the new mapping at " << i;
    }
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(munmap(q, len), 0);
}

// ---- the link (last: it takes the peer away) ----

// Its own suite, defined last, so that it runs after every other suite:
// the peer's device and netdev come back re-created (the netdev down), which
// the DataPath tests must not see.
class VerbsLinkLoss : public Verbs {};

// The session with the peer ends: PORT_ERR, QPs connected across the NTB
// go to ERR with QP_FATAL and their receives are flushed; a loopback QP
// (its destination a QP of this device) never needed the link and keeps
// working while it is down; the port comes back with the peer. The
// selftest passes the commands that take the peer away and back.
TEST_F(VerbsLinkLoss, LinkLossMakesConnectedQpsFatal) {
    const char* down = std::getenv("NTRDMA_PEER_DOWN_CMD");
    const char* up = std::getenv("NTRDMA_PEER_UP_CMD");
    if (!down || !up) {
        GTEST_SKIP() << "NTRDMA_PEER_DOWN_CMD / NTRDMA_PEER_UP_CMD not set";
    }
    ibv_cq* rcq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(rcq, nullptr);
    RcQpSpec a;
    a.recv_cq = rcq;
    a.max_send_wr = 4;
    a.max_recv_wr = 4;
    ibv_qp* qp = CreateRcQp(a);
    ASSERT_NE(qp, nullptr);
    ibv_qp* idle = CreateRcQp();  // stays in RESET: not connected
    ASSERT_NE(idle, nullptr);
    ASSERT_EQ(ToInit(qp), 0);
    RtrSpec across;  // a GID that is not ours: the peer's side of the NTB
    across.dest_qpn = qp->qp_num;
    across.dgid.raw[0] = 0xfe;
    across.dgid.raw[1] = 0x80;
    across.dgid.raw[15] = 0x01;
    ASSERT_EQ(QpToRtr(qp, across), 0);
    ASSERT_EQ(ToRts(qp), 0);
    ibv_qp* lo = CreateRcQp(a);  // connected to itself: loopback
    ASSERT_NE(lo, nullptr);
    ASSERT_EQ(ToInit(lo), 0);
    ASSERT_EQ(ToRtr(lo, lo->qp_num), 0);
    ASSERT_EQ(ToRts(lo), 0);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);

    ASSERT_EQ(std::system(down), 0) << down;
    EXPECT_TRUE(WaitAsyncEvent(ctx_, IBV_EVENT_QP_FATAL, 10000, qp));
    EXPECT_EQ(State(qp), IBV_QPS_ERR);
    EXPECT_EQ(State(idle), IBV_QPS_RESET);
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(rcq, 4, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 7u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_NE(p.state, IBV_PORT_ACTIVE);

    // the loopback QP: still RTS, and a SEND to itself lands, link down
    EXPECT_EQ(State(lo), IBV_QPS_RTS);
    wr.wr_id = 8;
    sge.addr += 64;
    ASSERT_EQ(ibv_post_recv(lo, &wr, &bad), 0);
    Wr send;
    send.wr_id = 9;
    send.sge = {ibv_sge{reinterpret_cast<uintptr_t>(buf.data()) + 128, 64, mr->lkey}};
    ASSERT_EQ(Post(lo, send), 0);
    std::vector<ibv_wc> got = PollCq(cq_, 1);
    ASSERT_EQ(got.size(), 1u) << "loopback SEND with the link down";
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS) << WcStr(got[0]);
    got = PollCq(rcq, 1);
    ASSERT_EQ(got.size(), 1u) << "loopback receive with the link down";
    EXPECT_EQ(got[0].wr_id, 8u);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS) << WcStr(got[0]);

    ASSERT_EQ(std::system(up), 0) << up;
    EXPECT_TRUE(WaitAsyncEvent(ctx_, IBV_EVENT_PORT_ACTIVE, 15000));
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.state, IBV_PORT_ACTIVE);

    EXPECT_EQ(DestroyQp(qp), 0);
    EXPECT_EQ(DestroyQp(lo), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_cq(rcq), 0);
}

}  // namespace
