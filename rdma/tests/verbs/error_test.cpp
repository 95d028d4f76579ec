// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The data path's error cases (fixture DataPath): bad keys and ranges,
// access and PD checks, a receive too small, a post before RTS, a CQ that
// overflows.

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
#include <iostream>
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

// ---- error paths ----

TEST_F(DataPath, ErrBadLkeyOnSend) {
    Conn c = Connect();
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w = SendWr(5, ibv_sge{src->addr(), 64, src->mr->lkey ^ 0x5a5a00});
    Wr next = SendWr(6, src->sge(0, 64));
    ASSERT_EQ(PostChain(c.a, {w, next}), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5, 1));
}

TEST_F(DataPath, ErrSgeBeyondMr) {
    for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        Conn c;
        Buf *local, *remote;
        ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &local, 4096, &remote, 8192, kRemoteAll));
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
    Wr w = SendWr(5, src->sge(0, 64));
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5));
}

TEST_F(DataPath, ErrBadRkey) {
    for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        Conn c;
        Buf *local, *remote;
        ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &local, 64, &remote, 64, kRemoteAll));
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
        Conn c;
        Buf *local, *remote;
        ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &local, 64, &remote, 4096, kRemoteAll));
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
    Conn c;
    Buf *local, *remote;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &local, 64, &remote, 64, kRemoteAll));
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
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &src, 64, &dst, 64, kLocal));
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 16)}), 0);
    Wr w = SendWr(5, src->sge(0, 64));
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
    ibv_qp* qp = CreateQp(a_);
    ASSERT_NE(qp, nullptr);
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

// The kernel's memory against one user: resources that every call could
// grow stay bounded.
class CqCaps : public DataPath {};

// A QP in ERR on a CQ of one entry, with WQEs its user claims in both
// rings (producer indices written ahead): every doorbell flushes, finds
// the CQ full and leaves the WQE in place for the next one. The CQ
// overran once: one IBV_EVENT_CQ_ERR, however many doorbells follow, and
// the kernel's slab memory does not grow with them.
TEST_F(CqCaps, OverrunRaisesOneEventForAnyNumberOfDoorbells) {
    ibv_cq* tiny = CreateCq(a_, 1);
    ASSERT_NE(tiny, nullptr);
    ASSERT_EQ(tiny->cqe, 1);
    const std::set<uintptr_t> before = UverbsMappings();
    RcQpSpec qs;
    qs.send_cq = tiny;
    qs.recv_cq = tiny;
    qs.max_send_wr = qs.max_recv_wr = 4;
    ibv_qp* qp = MakeRcQp(a_.pd, qs);
    ASSERT_NE(qp, nullptr) << std::strerror(errno);
    qps_.push_back(qp);
    std::vector<volatile uint32_t*> rings;
    for (uintptr_t m : UverbsMappings()) {
        if (!before.count(m)) {
            rings.push_back(reinterpret_cast<volatile uint32_t*>(m));
        }
    }
    ASSERT_EQ(rings.size(), 2u) << "the QP's SQ and RQ are not mapped";
    int fl = fcntl(a_.ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(a_.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
    ASSERT_EQ(QpToInit(qp), 0);
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(qp, &err, IBV_QP_STATE), 0);
    for (volatile uint32_t* ctl : rings) {
        ctl[0] = ctl[0] + 3;  // "posted" 3 WQEs (ctl[0]: the producer index)
    }
    // With the flag the kernel set in ERR, a receive post without WRs is
    // a bare doorbell (ntrdma-abi.h).
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_recv(qp, nullptr, &bad), 0);
    const long slab0 = SlabKiB();
    ASSERT_GT(slab0, 0) << "no Slab line in /proc/meminfo";
    const auto deadline = Clock::now() + milliseconds(15000);
    long calls = 0;
    for (; calls < 300000 && (calls % 1024 || Clock::now() < deadline); calls++) {
        ASSERT_EQ(ibv_post_recv(qp, nullptr, &bad), 0) << "doorbell " << calls;
    }
    const long grown = SlabKiB() - slab0;
    int events = 0;
    int reads = 0;
    ibv_async_event ev{};
    while (reads++ < 1000 && ibv_get_async_event(a_.ctx, &ev) == 0) {
        if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == tiny) {
            events++;
        }
        ibv_ack_async_event(&ev);
    }
    std::cout << "[ NOTE     ] " << calls << " doorbells, slab +" << grown << " KiB, " << events
              << " CQ_ERR events read\n";
    ASSERT_GE(calls, 10000) << "too few doorbells to tell";
    EXPECT_EQ(events, 1) << "IBV_EVENT_CQ_ERR events after " << calls
                         << " doorbells on an overrun CQ (the first 1000 read)";
    EXPECT_LT(grown, 1024) << "the slab grew by " << grown << " KiB in " << calls << " doorbells";
}

}  // namespace
