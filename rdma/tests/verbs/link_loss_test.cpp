// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The link to the peer lost and back (fixture Verbs). Linked after the
// other files of the suite so that its suite runs after theirs.

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
    ibv_qp* qp = CreateRcQpOn(rcq, 4, 4);
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
    ibv_qp* lo = CreateRcQpOn(rcq, 4, 4);  // connected to itself: loopback
    ASSERT_NE(lo, nullptr);
    ASSERT_EQ(ToInit(lo), 0);
    ASSERT_EQ(ToRtr(lo, lo->qp_num), 0);
    ASSERT_EQ(ToRts(lo), 0);
    std::vector<char> buf(4096);
    ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, mr->lkey};
    ASSERT_EQ(PostRecv(qp, 7, {sge}), 0);

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
    sge.addr += 64;
    ASSERT_EQ(PostRecv(lo, 8, {sge}), 0);
    Wr send = SendWr(9, ibv_sge{reinterpret_cast<uintptr_t>(buf.data()) + 128, 64, mr->lkey});
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
