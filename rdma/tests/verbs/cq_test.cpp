// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Completion queues of one device (fixture Verbs): creation, limits,
// completion vectors and channels.

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

// libfabric's RDM endpoints (ofi_rxm) size one CQ for every peer's queues:
// (tx + rx) x FI_UNIVERSE_SIZE, 65536 entries with the defaults. HCAs allow
// millions (mlx5: 2^22 - 1).
TEST_F(Verbs, CqOfMillionsOfEntries) {
    EXPECT_GE(dev_.max_cqe, (1 << 22) - 1);
    ibv_cq* cq = ibv_create_cq(ctx_, 1 << 20, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << "errno " << errno;
    EXPECT_GE(cq->cqe, 1 << 20);
    ibv_wc wc[4];
    EXPECT_EQ(ibv_poll_cq(cq, 4, wc), 0);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
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

}  // namespace
