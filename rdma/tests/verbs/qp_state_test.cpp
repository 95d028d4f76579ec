// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RC QPs of one device and their state machine (fixture Verbs): creation,
// limits, the transitions modify_qp takes and refuses, what RESET and ERR
// do to posted work.

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
#include "verbs_fixture.hpp"
#include "verbs_util.hpp"

namespace {

using namespace ntv;  // NOLINT(google-build-using-namespace)

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

TEST_F(Verbs, QpTypesOtherThanRcUcAndUdRejected) {
    ibv_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.cap.max_send_wr = 1;
    a.cap.max_recv_wr = 1;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    for (ibv_qp_type t : {IBV_QPT_RAW_PACKET}) {
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
    ibv_recv_wr wr = RecvWr(&sge);
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
    ibv_qp* qp = CreateRcQpOn(rcq, 4, 8);
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
    ASSERT_EQ(PostRecv(qp, 300, {sge}), 0);
    ASSERT_EQ(ibv_poll_cq(rcq, 8, wc), 1) << "a receive posted in ERR was not flushed";
    EXPECT_EQ(wc[0].wr_id, 300u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);

    EXPECT_EQ(DestroyQp(qp), 0);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(ibv_destroy_cq(rcq), 0);
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

// modify_qp refuses every transition the RC state machine does not have
// (the old NTRDMA accepted any: its defect 11; see also
// QpInvalidTransitionsRejected), and a refused one leaves the state alone.
TEST_F(Verbs, QpInvalidTransitionsRejectedInEveryState) {
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

}  // namespace
