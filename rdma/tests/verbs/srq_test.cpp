// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Shared receive queues of one device (fixture Verbs).

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
    ibv_recv_wr wr = RecvWr(&sge);
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

}  // namespace
