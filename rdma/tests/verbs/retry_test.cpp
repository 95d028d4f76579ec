// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Retries and timeouts (fixture DataPath): RNR NAKs and their retry count,
// the local ACK timeout, peers that take nothing.

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
    Wr w = SendWr(5, src->sge(0, 64));
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
    Wr w = SendWr(5, src->sge(0, 64));
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_RNR_RETRY_EXC_ERR, 5));
}

// A SEND that fails here (an lkey nobody registered) behind one waiting for
// a receive (RNR NAKs): the SEND after it never reaches the peer. The
// requester completes the first, then the error, and flushes the last.
TEST_F(DataPath, NothingAfterALocalErrorReachesThePeer) {
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &src, 192, &dst, 192, kLocal));
    Fill(src->p(), 192, 5);
    Wr first = SendWr(1, src->sge(0, 64));
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
        return ntv::ReadWr(wr_id, local->sge(0, 4096), remote);
    }

    // The pair with a 4 KiB buffer on each end (*local of a_, *remote of
    // b_), connected by ConnectSilent(@requester); then a READ of *remote
    // into *local posted as @wr_id.
    void SilentRead(const RtsSpec& requester, uint64_t wr_id, Buf** local, Buf** remote) {
        ASSERT_NO_FATAL_FAILURE(MakePair());
        *local = Reg(a_, 4096, kLocal);
        *remote = Reg(b_, 4096, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        ASSERT_NO_FATAL_FAILURE(ConnectSilent(requester));
        ASSERT_EQ(Post(a_qp_, ReadWr(wr_id, *local, *remote)), 0);
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
    Wr w = SendWr(2, src->sge(0, 256));
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
    Buf *src, *dst;
    RtsSpec t;
    t.retry_cnt = 1;
    ASSERT_NO_FATAL_FAILURE(SilentRead(t, 4, &src, &dst));
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
    Buf *dst, *src;
    RtsSpec t;
    t.timeout = 0;
    ASSERT_NO_FATAL_FAILURE(SilentRead(t, 6, &dst, &src));
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

}  // namespace
