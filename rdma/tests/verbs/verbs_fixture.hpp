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
//
// The Verbs fixture (one device: a context, a PD and a CQ; RC QPs made
// through it are destroyed in TearDown) and the wait for an async event,
// shared by the suite's files (device_test.cpp, cq_test.cpp, ...).
#ifndef NTRDMA_VERBS_FIXTURE_HPP
#define NTRDMA_VERBS_FIXTURE_HPP

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "verbs_util.hpp"

namespace ntv {

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

    // An RC QP made by CreateRcQp whose receives complete on @rcq.
    ibv_qp* CreateRcQpOn(ibv_cq* rcq, uint32_t send_wr, uint32_t recv_wr) {
        RcQpSpec s;
        s.recv_cq = rcq;
        s.max_send_wr = send_wr;
        s.max_recv_wr = recv_wr;
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

// Wait up to ms for an async event of the given type; acks everything read.
inline bool WaitAsyncEvent(ibv_context* ctx, ibv_event_type type, int ms, void* element = nullptr) {
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

}  // namespace ntv

#endif  // NTRDMA_VERBS_FIXTURE_HPP
