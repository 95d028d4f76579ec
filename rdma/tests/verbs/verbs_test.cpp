// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Verbs conformance tests for an NTRDMA device, through libibverbs and the
// ntrdma provider. Needs a device: run inside the test bed by
// selftests/ntrdma_ib_test.sh (NTRDMA_IBDEV names the device, default
// ntrdma0). Not part of ctest on the build host.

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

std::string DeviceName() {
    const char* env = std::getenv("NTRDMA_IBDEV");
    return env && *env ? env : "ntrdma0";
}

class Verbs : public ::testing::Test {
  protected:
    void SetUp() override {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        ASSERT_NE(list, nullptr) << std::strerror(errno);
        for (int i = 0; i < n; i++) {
            if (DeviceName() == ibv_get_device_name(list[i])) {
                ctx_ = ibv_open_device(list[i]);
            }
        }
        ibv_free_device_list(list);
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

    ibv_qp* CreateRcQp(uint32_t wr = 16, uint32_t sge = 1) {
        ibv_qp_init_attr a{};
        a.send_cq = cq_;
        a.recv_cq = cq_;
        a.qp_type = IBV_QPT_RC;
        a.cap.max_send_wr = wr;
        a.cap.max_recv_wr = wr;
        a.cap.max_send_sge = sge;
        a.cap.max_recv_sge = sge;
        ibv_qp* qp = ibv_create_qp(pd_, &a);
        if (qp) {
            qps_.push_back(qp);
        }
        return qp;
    }

    // Destroy a QP made by CreateRcQp (the rest go in TearDown).
    int DestroyQp(ibv_qp* qp) {
        std::erase(qps_, qp);
        return ibv_destroy_qp(qp);
    }

    ibv_qp_state State(ibv_qp* qp) {
        ibv_qp_attr attr{};
        ibv_qp_init_attr init{};
        EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
        return attr.qp_state;
    }

    int ToInit(ibv_qp* qp) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        return ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    }

    // RTR with a RoCE address vector: our own GID 0 as destination.
    int ToRtr(ibv_qp* qp, uint32_t dest_qpn, int mask_drop = 0) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = dest_qpn;
        a.rq_psn = 0;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.sgid_index = 0;
        a.ah_attr.grh.hop_limit = 1;
        EXPECT_EQ(ibv_query_gid(ctx_, 1, 0, &a.ah_attr.grh.dgid), 0);
        int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        return ibv_modify_qp(qp, &a, mask & ~mask_drop);
    }

    int ToRts(ibv_qp* qp) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.sq_psn = 0;
        a.max_rd_atomic = 1;
        return ibv_modify_qp(qp, &a,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }

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

TEST_F(Verbs, QueryPortEthernetLinkLayerAndGid) {
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
    EXPECT_GE(p.gid_tbl_len, 1);
    EXPECT_EQ(p.pkey_tbl_len, 1);
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
    EXPECT_NE(gid.global.interface_id, 0u) << "GID 0 empty: is the netdev up?";
    uint16_t pkey = 0;
    ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
    EXPECT_EQ(pkey, 0xffff);
    EXPECT_NE(ibv_query_port(ctx_, 2, &p), 0);
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

TEST_F(Verbs, MrUnsupportedAccessRejected) {
    std::vector<char> buf(4096);
    // Memory windows are not supported: no MW_BIND on an MR.
    EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND),
              nullptr);
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

TEST_F(Verbs, QpTypeOtherThanRcRejected) {
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.qp_type = IBV_QPT_UD;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    EXPECT_EQ(ibv_create_qp(pd_, &a), nullptr);
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
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = rcq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 8;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &a);
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

    EXPECT_EQ(ibv_destroy_qp(qp), 0);
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

    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.srq = srq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_send_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &a);
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    // Receives of a QP with an SRQ go to the SRQ.
    EXPECT_EQ(ibv_post_recv(qp, &wr, &bad), EINVAL);
    // The SRQ is in use.
    EXPECT_NE(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ---- the link ----

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

// The session with the peer ends: PORT_ERR, connected QPs go to ERR with
// QP_FATAL and their receives are flushed; the port comes back with the
// peer. The selftest passes the commands that take the peer away and back.
TEST_F(Verbs, LinkLossMakesConnectedQpsFatal) {
    const char* down = std::getenv("NTRDMA_PEER_DOWN_CMD");
    const char* up = std::getenv("NTRDMA_PEER_UP_CMD");
    if (!down || !up) {
        GTEST_SKIP() << "NTRDMA_PEER_DOWN_CMD / NTRDMA_PEER_UP_CMD not set";
    }
    ibv_cq* rcq = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
    ASSERT_NE(rcq, nullptr);
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = rcq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 4;
    a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    ibv_qp* qp = ibv_create_qp(pd_, &a);
    ASSERT_NE(qp, nullptr);
    ibv_qp* idle = CreateRcQp();  // stays in RESET: not connected
    ASSERT_NE(idle, nullptr);
    ASSERT_EQ(ToInit(qp), 0);
    ASSERT_EQ(ToRtr(qp, qp->qp_num), 0);
    ASSERT_EQ(ToRts(qp), 0);
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

    ASSERT_EQ(std::system(up), 0) << up;
    EXPECT_TRUE(WaitAsyncEvent(ctx_, IBV_EVENT_PORT_ACTIVE, 15000));
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.state, IBV_PORT_ACTIVE);

    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_cq(rcq), 0);
}

}  // namespace
