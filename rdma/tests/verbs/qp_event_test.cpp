// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The affiliated asynchronous events of the QP life cycle (fixture
// DataPath): SQ drained, last WQE reached.

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
    Conn c;
    ibv_srq* srq = nullptr;
    ASSERT_NO_FATAL_FAILURE(ConnectOnSrq(&c, &srq));
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(QpToState(c.b, IBV_QPS_ERR), 0);
    EXPECT_TRUE(WaitAsyncEvent(b_.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, 5000, c.b))
        << "no IBV_EVENT_QP_LAST_WQE_REACHED";
}

}  // namespace
