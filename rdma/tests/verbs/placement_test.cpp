// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Direct placement (rdma/ntrdma_place_remote.c,
// rdma/ntrdma_place_export.c): RDMA WRITEs land in the target MR without the
// target's CPU, in IB order, and never after the MR was deregistered. Loop
// topology (both ends in this process).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/ntrdma-abi.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <thread>
#include <utility>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

// SEND @sge (@wr_id) on @c into a receive of @rcv posted first; both
// completions here. The responder's status, SUCCESS or what failed.
ibv_wc SendOnce(const Conn& c, ibv_sge sge, std::vector<ibv_sge> rcv, uint64_t wr_id, ibv_cq* rcq,
                ibv_cq* scq) {
    ibv_wc r{};
    r.status = IBV_WC_GENERAL_ERR;
    if (PostRecv(c.b, wr_id, std::move(rcv)) || Post(c.a, SendWr(wr_id, sge))) {
        return r;
    }
    std::vector<ibv_wc> rw = PollCq(rcq, 1);
    std::vector<ibv_wc> sw = PollCq(scq, 1);
    if (rw.size() != 1 || sw.size() != 1 || sw[0].status != IBV_WC_SUCCESS) {
        return r;
    }
    return rw[0];
}

class Placement : public DataPath {
  protected:
    void SetUp() override {
        DataPath::SetUp();
        if (IsSkipped() || HasFailure()) {
            return;
        }
        if (!DirectPlacementOn()) {
            GTEST_SKIP() << "ntrdma loaded with direct_placement=0 (checked mode)";
        }
        if (WindowedMode()) {
            GTEST_SKIP() << "windowed mode: the window reaches no MR, nothing is placed directly";
        }
    }

    // WRITE @len bytes of @src at @dst (offset @off) on @c and wait for it.
    ibv_wc_status WriteOnce(const Conn& c, Buf* src, Buf* dst, size_t len, size_t off = 0) {
        Wr w = WriteWr(1, src->sge(0, len), dst, off);
        if (Post(c.a, w)) {
            return IBV_WC_GENERAL_ERR;
        }
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
    }

    // Exports travel apart from the data (command channel): @op (false:
    // it failed) until a_'s counter @what moves, at most 5 s. True when it
    // did. (The core caches counters for a few ms: read them after a pause.)
    bool WaitCounted(const char* what, const std::function<bool()>& op) {
        const auto deadline = Clock::now() + milliseconds(5000);
        std::this_thread::sleep_for(milliseconds(50));
        const long long before = HwCounter(a_.name, what);
        while (Clock::now() < deadline) {
            if (!op()) {
                return false;
            }
            std::this_thread::sleep_for(milliseconds(50));
            if (HwCounter(a_.name, what) > before) {
                return true;
            }
        }
        return false;
    }

    // WRITE until one is placed directly. True when it was.
    bool WaitDirect(const Conn& c, Buf* src, Buf* dst) {
        return WaitCounted("placed_writes", [&] {
            const ibv_wc_status st = WriteOnce(c, src, dst, 8);
            EXPECT_EQ(st, IBV_WC_SUCCESS) << "a WRITE failed: " << ibv_wc_status_str(st);
            return st == IBV_WC_SUCCESS;
        });
    }

    // Ten rounds: a stream of unsignalled WRITEs into a fresh MR of b_,
    // then @revoke(that MR) while it runs (it must return 0), then more
    // WRITEs with the old key and addresses. The old pages, poisoned as
    // soon as @revoke returned, must stay poisoned.
    void NothingLandsAfter(const std::function<int(Buf*)>& revoke) {
        const size_t len = 16384;
        for (int round = 0; round < 10; round++) {
            SCOPED_TRACE("round " + std::to_string(round));
            Conn c;
            Buf *src, *dst;
            ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &src, len, &dst, len, kRemoteAll));
            Fill(src->p(), len, round + 3);
            ASSERT_TRUE(WaitDirect(c, src, dst));
            for (int i = 0; i < 48; i++) {
                Wr w = WriteWr(100 + i, src->sge(0, len), dst);
                w.flags = i == 47 ? IBV_SEND_SIGNALED : 0;
                ASSERT_EQ(Post(c.a, w), 0);
            }
            std::vector<uint8_t>& pages = dst->mem;
            Wr late = WriteWr(200, src->sge(0, len), dst);
            ASSERT_EQ(revoke(dst), 0);
            std::memset(pages.data(), 0x5A, len);
            // More WRITEs with the stale key, while the old ones may finish.
            for (int i = 0; i < 8; i++) {
                late.wr_id = 200 + i;
                Post(c.a, late);  // may fail: the QP may be in ERR already
            }
            std::this_thread::sleep_for(milliseconds(300));
            Drain(a_.scq, 200);
            for (size_t i = 0; i < len; i++) {
                ASSERT_EQ(pages[i], 0x5A) << "byte " << i << " written after the MR went";
            }
        }
    }

    // @rounds rounds on @c: an unsignalled WRITE of all of *src (fresh
    // bytes each round) into *dst, then a SEND of *msg into *rcv. When the
    // SEND has arrived, every byte of the WRITE before it must be there.
    void WriteThenSendRounds(const Conn& c, Buf* src, Buf* dst, Buf* msg, Buf* rcv, int rounds) {
        const size_t len = src->mem.size();
        for (int i = 0; i < rounds; i++) {
            ASSERT_EQ(PostRecv(c.b, i, {rcv->sge(0, 8)}), 0);
            Fill(src->p(), len, 7 * i + 1);
            Wr w = WriteWr(2 * i, src->sge(0, len), dst);
            w.flags = 0;
            ASSERT_EQ(Post(c.a, w), 0);
            Wr s;
            s.wr_id = 2 * i + 1;
            s.sge = {msg->sge(0, 8)};
            ASSERT_EQ(Post(c.a, s), 0);
            std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
            ASSERT_EQ(r.size(), 1u);
            ASSERT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
            ASSERT_EQ(FirstDiff(src->p(), dst->p(), len), -1) << "round " << i;
            ASSERT_EQ(PollCq(a_.scq, 1).size(), 1u);
        }
    }

    // A connection whose WRITEs from *src (a_, @len) to *dst (b_) are
    // placed directly (fatal failure otherwise).
    void ConnectDirect(size_t len, Conn* c, Buf** src, Buf** dst) {
        ASSERT_NO_FATAL_FAILURE(ConnectBufs(c, src, len, dst, len, kRemoteAll));
        ASSERT_TRUE(WaitDirect(*c, *src, *dst)) << "no WRITE was placed directly in 5 s";
    }

    ibv_wc Send(const Conn& c, ibv_sge sge, std::vector<ibv_sge> rcv, uint64_t wr_id = 1) {
        return SendOnce(c, sge, std::move(rcv), wr_id, b_.rcq, a_.scq);
    }

    // SEND until one is placed. True when it was.
    bool WaitPlaced(const Conn& c, Buf* msg, Buf* rcv, ibv_cq* rcq = nullptr) {
        return WaitCounted("placed_sends", [&] {
            ibv_wc r = SendOnce(c, msg->sge(0, 8), {rcv->sge(0, 8)}, 1, rcq ? rcq : b_.rcq, a_.scq);
            EXPECT_EQ(r.status, IBV_WC_SUCCESS) << "a SEND failed: " << WcStr(r);
            return r.status == IBV_WC_SUCCESS;
        });
    }
};

// The target receives nothing for a plain WRITE: no segment, no copy.
TEST_F(Placement, WriteLandsWithoutTargetWork) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    std::this_thread::sleep_for(milliseconds(50));
    const long long rx0 = HwCounter(b_.name, "rx_segments");
    const long long placed0 = HwCounter(a_.name, "placed_writes");
    ASSERT_GE(rx0, 0);
    for (int i = 0; i < 100; i++) {
        Fill(src->p(), len, 1000 + i);
        ASSERT_EQ(WriteOnce(c, src, dst, len), IBV_WC_SUCCESS);
        ASSERT_EQ(FirstDiff(src->p(), dst->p(), len), -1) << "round " << i;
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_writes") - placed0, 100);
    EXPECT_EQ(HwCounter(b_.name, "rx_segments"), rx0) << "the target received segments";
}

// IB RC order: a SEND after a WRITE is seen only once the WRITE's data is.
TEST_F(Placement, WriteThenSendOrderedByContent) {
    Conn c = Connect();
    const size_t len = 65536;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    Buf* msg = Reg(a_, 8, kLocal);
    Buf* rcv = Reg(b_, 8, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c, src, dst));
    WriteThenSendRounds(c, src, dst, msg, rcv, 300);
}

// ---- placed SENDs (rdma/ntrdma_place_rq.c) ----

class PlacedSend : public Placement {
  protected:
    // A connection whose SENDs are placed (fatal failure otherwise).
    void ConnectPlaced(Conn* c, Buf** msg, size_t msg_len, Buf** rcv, size_t rcv_len,
                       const ConnSpec& cs = {}) {
        *c = Connect(cs);
        *msg = Reg(a_, msg_len, kLocal);
        *rcv = Reg(b_, rcv_len, kLocal);
        ASSERT_FALSE(HasFailure());
        ASSERT_TRUE(WaitPlaced(*c, *msg, *rcv)) << "no SEND was placed in 5 s";
    }

    // @qp (of b_) to ERR, then up to @n of b_'s receive completions.
    std::vector<ibv_wc> ErrThenPoll(ibv_qp* qp, int n) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
        return PollCq(b_.rcq, n);
    }
};

// The responder does nothing for a SEND into its RQ: no segment arrives,
// and every byte and the length are in its completion.
TEST_F(PlacedSend, SendLandsWithoutTargetWork) {
    const size_t len = 4096;
    Conn c;
    Buf *msg, *rcv;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, len, &rcv, len));
    std::this_thread::sleep_for(milliseconds(50));
    const long long rx0 = HwCounter(b_.name, "rx_segments");
    const long long placed0 = HwCounter(a_.name, "placed_sends");
    for (int i = 0; i < 100; i++) {
        const size_t n = 1 + (i * 41) % len;
        Fill(msg->p(), len, 500 + i);
        ibv_wc r = Send(c, msg->sge(0, n), {rcv->sge(0, len)}, 10 + i);
        ASSERT_EQ(r.status, IBV_WC_SUCCESS) << WcStr(r);
        ASSERT_EQ(r.wr_id, 10u + i);
        ASSERT_EQ(r.opcode, IBV_WC_RECV);
        ASSERT_EQ(r.byte_len, n);
        ASSERT_EQ(r.qp_num, c.b->qp_num);
        ASSERT_EQ(FirstDiff(msg->p(), rcv->p(), n), -1) << "round " << i;
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_sends") - placed0, 100);
    EXPECT_EQ(HwCounter(b_.name, "rx_segments"), rx0) << "the responder received segments";
}

// SEND_WITH_IMM: the immediate and its flag; a receive scattered over
// three SGEs of two MRs gets the bytes in order.
TEST_F(PlacedSend, ImmediateAndScatter) {
    Conn c;
    Buf *msg, *rcv;
    ConnSpec cs;
    cs.sge = 3;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 8192, &rcv, 8192, cs));
    Buf* rcv2 = Reg(b_, 4096, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(msg->p(), 8192, 77);
    ASSERT_EQ(PostRecv(c.b, 3, {rcv->sge(100, 1000), rcv2->sge(7, 3000), rcv->sge(5000, 3000)}), 0);
    Wr w = SendWr(4, msg->sge(0, 6000));
    w.op = IBV_WR_SEND_WITH_IMM;
    w.imm = htonl(0x12345678);
    const long long placed0 = HwCounter(a_.name, "placed_sends");
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].byte_len, 6000u);
    EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(r[0].imm_data, htonl(0x12345678));
    ASSERT_EQ(PollCq(a_.scq, 1).size(), 1u);
    EXPECT_EQ(FirstDiff(msg->p(), rcv->p(100), 1000), -1);
    EXPECT_EQ(FirstDiff(msg->p(1000), rcv2->p(7), 3000), -1);
    EXPECT_EQ(FirstDiff(msg->p(4000), rcv->p(5000), 2000), -1);
    EXPECT_EQ(rcv->p(7000)[0], 0) << "a byte past the message";
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_sends") - placed0, 1);
}

// No receive posted: the SEND waits (RNR) and lands in the receive posted
// later; the ones after it are placed again.
TEST_F(PlacedSend, NoReceiveWaitsForOne) {
    Conn c;
    Buf *msg, *rcv;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 64, &rcv, 64));
    Fill(msg->p(), 64, 5);
    ASSERT_EQ(Post(c.a, SendWr(7, msg->sge(0, 64))), 0);
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_EQ(PollCq(b_.rcq, 1, 0).size(), 0u) << "a completion without a receive";
    ASSERT_EQ(PostRecv(c.b, 8, {rcv->sge(0, 64)}), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].wr_id, 8u);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(FirstDiff(msg->p(), rcv->p(), 64), -1);
    ASSERT_TRUE(WaitPlaced(c, msg, rcv)) << "SENDs are no longer placed after the RNR";
}

// A receive its user scribbled (a key of no MR) fails that QP alone, with
// the IB errors on both ends; another connection's SENDs are still placed.
TEST_F(PlacedSend, ScribbledReceiveFailsOnlyItsQp) {
    Conn c, d;
    Buf *msg, *rcv;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 64, &rcv, 64));
    d = Connect();
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitPlaced(d, msg, rcv));
    ibv_sge bad = rcv->sge(0, 64);
    bad.lkey ^= 0x5a00;
    ASSERT_EQ(PostRecv(c.b, 9, {bad}), 0);
    ASSERT_EQ(Post(c.a, SendWr(9, msg->sge(0, 64))), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(StatusMatches(b_.ctx, r[0].status, IBV_WC_LOC_PROT_ERR)) << WcStr(r[0]);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NE(s[0].status, IBV_WC_SUCCESS);
    const long long placed0 = HwCounter(a_.name, "placed_sends");
    for (int i = 0; i < 20; i++) {
        ibv_wc ok = Send(d, msg->sge(0, 64), {rcv->sge(0, 64)}, 100 + i);
        ASSERT_EQ(ok.status, IBV_WC_SUCCESS) << WcStr(ok);
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_sends") - placed0, 20);
}

// Receive completions wait in the RQ's slots, not in the CQ's ring: a
// receive CQ of one entry loses none of 16 placed SENDs, each completes
// once, in order, with its bytes.
TEST_F(PlacedSend, OneEntryCqLosesNoReceive) {
    ConnSpec cs;
    cs.rcq_b = CreateCq(b_, 1);
    ASSERT_NE(cs.rcq_b, nullptr);
    Conn c = Connect(cs);
    Buf* msg = Reg(a_, 1024, kLocal);
    Buf* rcv = Reg(b_, 1024, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitPlaced(c, msg, rcv, cs.rcq_b)) << "no SEND was placed in 5 s";
    Fill(msg->p(), 1024, 31);
    const long long placed0 = HwCounter(a_.name, "placed_sends");
    for (int i = 0; i < 16; i++) {
        ASSERT_EQ(PostRecv(c.b, 100 + i, {rcv->sge(64 * i, 64)}), 0);
    }
    for (int i = 0; i < 16; i++) {
        ASSERT_EQ(Post(c.a, SendWr(200 + i, msg->sge(64 * i, 64 - i))), 0);
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, 16);
    ASSERT_EQ(s.size(), 16u);
    std::vector<ibv_wc> r = PollCq(cs.rcq_b, 16);
    ASSERT_EQ(r.size(), 16u);
    for (int i = 0; i < 16; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(r[i].wr_id, 100u + i);
        EXPECT_EQ(r[i].status, IBV_WC_SUCCESS) << WcStr(r[i]);
        EXPECT_EQ(r[i].byte_len, 64u - i);
        EXPECT_EQ(FirstDiff(msg->p(64 * i), rcv->p(64 * i), 64 - i), -1) << "receive " << i;
    }
    EXPECT_EQ(PollCq(cs.rcq_b, 1, 300).size(), 0u) << "a receive completed twice";
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_sends") - placed0, 16);
}

// The RQ ring is the peer's to write: a receive's wr_id (often a pointer
// of its user) comes back as posted, whatever the ring's slot holds by
// then. Here this process scribbles the slot, as the peer could.
TEST_F(PlacedSend, WrIdComesBackAsPostedWhateverTheRingSays) {
    const std::set<uintptr_t> before = UverbsMappings();
    Conn c;
    Buf *msg, *rcv;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 64, &rcv, 64));
    const uint64_t posted = 0x5eed0000c0ffee11ull;
    ASSERT_EQ(PostRecv(c.b, posted, {rcv->sge(0, 64)}), 0);
    int found = 0;
    for (const std::string& line : UverbsMapLines()) {
        unsigned long lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || before.count(lo)) {
            continue;
        }
        for (unsigned long at = lo + NTRDMA_RING_CTL_SIZE; at + sizeof(ntrdma_recv_wqe) <= hi;
             at += sizeof(ntrdma_recv_wqe)) {
            auto* w = reinterpret_cast<ntrdma_recv_wqe*>(at);
            if (w->wr_id == posted) {
                w->wr_id = 0xbad0bad0bad0bad0ull;
                found++;
            }
        }
    }
    ASSERT_EQ(found, 1) << "the receive's slot was not found in the new rings";
    Fill(msg->p(), 64, 3);
    ASSERT_EQ(Post(c.a, SendWr(5, msg->sge(0, 64))), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].wr_id, posted) << "the wr_id was read from the shared ring";
    ASSERT_EQ(PollCq(a_.scq, 1).size(), 1u);
}

// A CQ armed before its QP exists (rping does so): the first SEND placed
// into the QP's RQ still raises the completion event.
TEST_F(PlacedSend, CqArmedBeforeItsQpGetsTheEvent) {
    ibv_comp_channel* ch = CreateChannel(b_);
    ASSERT_NE(ch, nullptr);
    ConnSpec cs;
    cs.rcq_b = CreateCq(b_, 16, ch);
    ASSERT_NE(cs.rcq_b, nullptr);
    ASSERT_EQ(ibv_req_notify_cq(cs.rcq_b, 0), 0);
    Conn c = Connect(cs);
    Buf* msg = Reg(a_, 64, kLocal);
    Buf* rcv = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    std::this_thread::sleep_for(milliseconds(1000));  // the QP's export reaches a
    const long long placed0 = HwCounter(a_.name, "placed_sends");
    ASSERT_EQ(PostRecv(c.b, 1, {rcv->sge(0, 64)}), 0);
    ASSERT_EQ(Post(c.a, SendWr(2, msg->sge(0, 64))), 0);
    ASSERT_EQ(PollCq(a_.scq, 1).size(), 1u);
    pollfd pfd{ch->fd, POLLIN, 0};
    ASSERT_EQ(poll(&pfd, 1, 3000), 1) << "no completion event in 3 s";
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(ev_cq, cs.rcq_b);
    ibv_ack_cq_events(ev_cq, 1);
    EXPECT_EQ(PollCq(cs.rcq_b, 1).size(), 1u);
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_sends") - placed0, 1) << "the SEND was not placed";
}

// A QP moved to ERR flushes the receives the peer did not complete, each
// once, after those it did.
TEST_F(PlacedSend, ErrFlushesTheRestOnce) {
    Conn c;
    Buf *msg, *rcv;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 64, &rcv, 64));
    for (int i = 0; i < 8; i++) {
        ASSERT_EQ(PostRecv(c.b, 50 + i, {rcv->sge(0, 64)}), 0);
    }
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(Post(c.a, SendWr(60 + i, msg->sge(0, 64))), 0);
    }
    ASSERT_EQ(PollCq(a_.scq, 3).size(), 3u);
    std::vector<ibv_wc> r = ErrThenPoll(c.b, 8);
    ASSERT_EQ(r.size(), 8u);
    for (int i = 0; i < 8; i++) {
        EXPECT_EQ(r[i].wr_id, 50u + i);
        EXPECT_EQ(r[i].status, i < 3 ? IBV_WC_SUCCESS : IBV_WC_WR_FLUSH_ERR) << WcStr(r[i]);
    }
    EXPECT_EQ(PollCq(b_.rcq, 1, 300).size(), 0u) << "a receive completed twice";
}

// The peer's consumer index runs ahead of ours while it places: many
// laps around an RQ of two entries, then ERR flushes what is posted, and
// the session (another connection) goes on.
TEST_F(PlacedSend, ErrAfterManyLapsFlushesAndKeepsTheSession) {
    Conn c, other = Connect();
    Buf *msg, *rcv;
    ConnSpec cs;
    cs.wr = 2;
    ASSERT_NO_FATAL_FAILURE(ConnectPlaced(&c, &msg, 64, &rcv, 64, cs));
    for (int i = 0; i < 12; i++) {
        ibv_wc r = Send(c, msg->sge(0, 64), {rcv->sge(0, 64)}, 70 + i);
        ASSERT_EQ(r.status, IBV_WC_SUCCESS) << WcStr(r);
        ASSERT_EQ(r.wr_id, 70u + i);
    }
    ASSERT_EQ(PostRecv(c.b, 90, {rcv->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c.b, 91, {rcv->sge(0, 64)}), 0);
    std::vector<ibv_wc> r = ErrThenPoll(c.b, 2);
    ASSERT_EQ(r.size(), 2u);
    for (int i = 0; i < 2; i++) {
        EXPECT_EQ(r[i].wr_id, 90u + i);
        EXPECT_EQ(r[i].status, IBV_WC_WR_FLUSH_ERR) << WcStr(r[i]);
    }
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(QpState(other.a), IBV_QPS_RTS) << "the session ended";
    EXPECT_EQ(QpState(other.b), IBV_QPS_RTS) << "the session ended";
}

// After dereg returns, no byte of a WRITE lands in the pages: writes in
// flight at the time finish before, later ones fail (REM_ACCESS_ERR).
TEST_F(Placement, NothingLandsAfterDeregUnderWriteStream) {
    NothingLandsAfter([this](Buf* dst) { return Dereg(dst); });
}

// ibv_rereg_mr() onto other pages under the same keys: once it returned,
// the old pages are reached by nothing, not even WRITEs already streaming.
TEST_F(Placement, NothingLandsInTheOldPagesAfterReregUnderWriteStream) {
    std::vector<uint8_t> other(16384);
    NothingLandsAfter([&other](Buf* dst) {
        return ibv_rereg_mr(dst->mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other.data(),
                            other.size(), 0);
    });
}

// A stale key (its MR deregistered, the index reused) never reaches the
// new MR, and an MR of another PD is never placed into.
TEST_F(Placement, StaleAndForeignKeysNeverPlaced) {
    Conn c = Connect();
    const size_t len = 4096;
    Buf* src = Reg(a_, len, kLocal);
    Buf* ok = Reg(b_, len, kRemoteAll);
    Buf* old = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c, src, ok));
    Fill(src->p(), len, 9);
    ASSERT_EQ(WriteOnce(c, src, old, len), IBV_WC_SUCCESS);
    const uint32_t stale = old->mr->rkey;
    const uint64_t stale_addr = old->addr();
    ASSERT_EQ(Dereg(old), 0);
    Buf* fresh = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Wr w = WriteWr(5, src->sge(0, len), fresh);
    w.rkey = stale;
    w.raddr = stale_addr;
    ASSERT_EQ(Post(c.a, w), 0);
    ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 5));
    EXPECT_EQ(FirstDiff(std::vector<uint8_t>(len, 0).data(), fresh->p(), len), -1)
        << "a stale key wrote a new MR";

    Conn c2 = Connect();
    ibv_pd* other = AllocPd(b_);
    ASSERT_NE(other, nullptr);
    Buf* foreign = Reg(b_, len, kRemoteAll, other);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c2, src, ok));
    Wr f = WriteWr(6, src->sge(0, len), foreign);
    ASSERT_EQ(Post(c2.a, f), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << WcStr(wc[0]);
    EXPECT_EQ(FirstDiff(std::vector<uint8_t>(len, 0).data(), foreign->p(), len), -1)
        << "an MR of another PD was written";
}

// IB: a QP in ERR executes nothing. When the target QP fails by its own data
// path (a SEND with a bad lkey), its export is withdrawn: WRITEs to it stop
// being placed and fail, and the one that failed left no byte.
TEST_F(Placement, TargetQpInErrTakesNoPlacements) {
    const size_t len = 4096;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    Wr bad;
    bad.wr_id = 9;
    bad.sge = {ibv_sge{dst->addr(), 8, dst->mr->lkey ^ 0x5a5a00}};
    ASSERT_EQ(Post(c.b, bad), 0);
    std::vector<ibv_wc> e = PollCq(b_.scq, 1);
    ASSERT_EQ(e.size(), 1u);
    ASSERT_EQ(e[0].status, IBV_WC_LOC_PROT_ERR) << WcStr(e[0]);
    // Until the withdrawal reaches the requester a WRITE may still land.
    const auto deadline = Clock::now() + milliseconds(5000);
    ibv_wc last{};
    int landed = 0;
    for (int i = 0; Clock::now() < deadline; i++) {
        Fill(src->p(), len, 100 + i);
        ASSERT_EQ(Post(c.a, WriteWr(i, src->sge(0, len), dst)), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1, 30000);
        ASSERT_EQ(wc.size(), 1u) << "no completion for WRITE " << i;
        last = wc[0];
        if (last.status != IBV_WC_SUCCESS) {
            break;
        }
        landed++;
    }
    ASSERT_NE(last.status, IBV_WC_SUCCESS) << "WRITEs into a QP in ERR kept landing for 5 s";
    std::cout << "[ NOTE     ] " << landed
              << " WRITE(s) landed before the withdrawal arrived; then " << WcStr(last)
              << std::endl;
    EXPECT_NE(FirstDiff(src->p(), dst->p(), len), -1) << "the failed WRITE's data landed";
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// A small READ is read straight from the target MR: no target work, and it
// sees the WRITE posted just before it.
TEST_F(Placement, SmallReadPulledAfterItsWrite) {
    Conn c = Connect();
    const size_t len = 256;
    Buf* src = Reg(a_, len, kLocal);
    Buf* back = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c, src, dst));
    std::this_thread::sleep_for(milliseconds(50));
    const long long rx0 = HwCounter(b_.name, "rx_segments");
    const long long pulled0 = HwCounter(a_.name, "pulled_reads");
    for (int i = 0; i < 100; i++) {
        Fill(src->p(), len, 31 * i + 5);
        Wr w = WriteWr(2 * i, src->sge(0, len), dst);
        w.flags = 0;
        ASSERT_EQ(Post(c.a, w), 0);
        ASSERT_EQ(Post(c.a, ReadWr(2 * i + 1, back->sge(0, len), dst)), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        ASSERT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
        ASSERT_EQ(FirstDiff(src->p(), back->p(), len), -1) << "round " << i;
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "pulled_reads") - pulled0, 100);
    EXPECT_EQ(HwCounter(b_.name, "rx_segments"), rx0) << "the target received segments";
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// WRITE_WITH_IMM: the payload is placed, only a notice crosses to the
// target, which completes a receive with the immediate and the length.
TEST_F(Placement, WriteWithImmPlacedAndNoticed) {
    Conn c = Connect();
    const size_t len = 65536;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    Buf* rcv = Reg(b_, 8, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c, src, dst));
    std::this_thread::sleep_for(milliseconds(50));
    const long long bytes0 = HwCounter(b_.name, "rx_bytes");
    const long long placed0 = HwCounter(a_.name, "placed_writes");
    const int n = 50;
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(PostRecv(c.b, 500 + i, {rcv->sge(0, 8)}), 0);
        Fill(src->p(), len, 11 * i + 2);
        Wr w = WriteWr(i, src->sge(0, len), dst);
        w.op = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm = htonl(0xabc000 + i);
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
        ASSERT_EQ(r.size(), 1u);
        ASSERT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(r[0].wr_id, 500u + i);
        EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(ntohl(r[0].imm_data), 0xabc000u + i);
        ASSERT_EQ(FirstDiff(src->p(), dst->p(), len), -1) << "round " << i;
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        ASSERT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "placed_writes") - placed0, n);
    EXPECT_LT(HwCounter(b_.name, "rx_bytes") - bytes0, 100 * n) << "payload crossed to the target";
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// The engine's debugfs directory of ib device @ibdev (the one whose info
// names its NTB device), or "".
std::string DebugfsDir(const std::string& ibdev) {
    std::error_code ec;
    const std::filesystem::path ntb =
        std::filesystem::read_symlink("/sys/class/infiniband/" + ibdev + "/device", ec);
    return ec ? "" : InfoDirWith("ntb: " + ntb.filename().string());
}

// A numeric field of debugfs info, or -1.
long long InfoField(const std::string& dir, const std::string& name) {
    std::ifstream f(dir + "/info");
    for (std::string line; std::getline(f, line);) {
        if (line.starts_with(name + ": ")) {
            return std::atoll(line.c_str() + name.size() + 2);
        }
    }
    return -1;
}

bool WaitUntil(int ms, const std::function<bool()>& ok) {
    const auto deadline = Clock::now() + milliseconds(ms);
    while (!ok()) {
        if (Clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(milliseconds(1));
    }
    return true;
}

bool PortActive(const Side& s) {
    ibv_port_attr p{};
    return ibv_query_port(s.ctx, 1, &p) == 0 && p.state == IBV_PORT_ACTIVE;
}

class PlacementSessionEnd : public Placement {
  protected:
    void SetUp() override {
        Placement::SetUp();
        if (IsSkipped() || HasFailure()) {
            return;
        }
        dbg_a_ = DebugfsDir(a_.name);
        dbg_b_ = DebugfsDir(b_.name);
        if (dbg_a_.empty() || dbg_b_.empty()) {
            GTEST_SKIP() << "no ntrdma debugfs directory for " << a_.name << " and " << b_.name
                         << " (debugfs not mounted, or not root)";
        }
        if (!std::filesystem::exists(dbg_a_ + "/inject")) {
            GTEST_SKIP() << "ntrdma built without CONFIG_NTRDMA_TEST_HOOKS (no inject file)";
        }
    }

    void Inject(const std::string& dir, const std::string& req) {
        std::ofstream f(dir + "/inject");
        f << req << std::flush;
        ASSERT_TRUE(f.good()) << "inject '" << req << "' into " << dir;
    }

    // @w posted again and again on @c, unsignalled but every 8th, at most
    // 32 outstanding, until @stop or the QP fails; counts completions.
    // With @rcv (a SEND stream), 32 receives of @rcv stay posted on @c.b:
    // each one completed on @rcq is posted again.
    static void Stream(const Conn& c, Wr w, ibv_cq* scq, const std::atomic<bool>& stop,
                       std::atomic<long>* ok, const ibv_sge* rcv = nullptr, ibv_cq* rcq = nullptr) {
        uint64_t posted = 0, done = 0;
        for (int i = 0; rcv && i < 32; i++) {
            if (PostRecv(c.b, i, {*rcv})) {
                return;
            }
        }
        while (!stop) {
            if (rcv && !Repost(c.b, rcq, *rcv)) {
                return;
            }
            if (posted - done < 32) {
                w.wr_id = posted;
                w.flags = posted % 8 == 7 ? IBV_SEND_SIGNALED : 0;
                if (Post(c.a, w)) {
                    return;
                }
                posted++;
            }
            ibv_wc wc{};
            while (ibv_poll_cq(scq, 1, &wc) == 1) {
                if (wc.status != IBV_WC_SUCCESS) {
                    return;
                }
                done += 8;
                *ok += 8;
            }
        }
    }

    // Each successful receive on @rcq posted again on @qp; false once a
    // receive failed (the session ended) or could not be posted.
    static bool Repost(ibv_qp* qp, ibv_cq* rcq, const ibv_sge& rcv) {
        ibv_wc wc{};
        while (ibv_poll_cq(rcq, 1, &wc) == 1) {
            if (wc.status != IBV_WC_SUCCESS || PostRecv(qp, wc.wr_id, {rcv})) {
                return false;
            }
        }
        return true;
    }

    // ConnectDirect() once both ports are up again (the last round ended
    // the session).
    void ConnectWhenUp(size_t len, Conn* c, Buf** src, Buf** dst) {
        ASSERT_TRUE(WaitUntil(30000, [&] { return PortActive(a_) && PortActive(b_); }))
            << "the ports did not come back up";
        ConnectDirect(len, c, src, dst);
    }

    // @w streams on @c while the side of debugfs @deaf stops looking at
    // its link for 1 s and the side of @ender ends the session (as on a
    // protocol error of the peer); then @victim (of @ender's side, written
    // by the stream) is deregistered at once and poisoned: not one byte may
    // land in it after dereg returned. The completions before the end.
    // With @rcv, @w is a SEND into receives of @rcv (in @victim).
    long EndUnderStream(const Conn& c, const Wr& w, const std::string& deaf,
                        const std::string& ender, Buf* victim, const ibv_sge* rcv = nullptr) {
        const size_t len = victim->mem.size();
        std::atomic<bool> stop{false};
        std::atomic<long> done{0};
        std::thread streamer(Stream, c, w, a_.scq, std::cref(stop), &done, rcv, b_.rcq);
        std::this_thread::sleep_for(milliseconds(200));
        const long long downs = InfoField(ender, "link_down_events");
        Inject(deaf, "link_deaf 1000");
        Inject(ender, "proto_error");
        const bool ended =
            WaitUntil(10000, [&] { return InfoField(ender, "link_down_events") > downs; });
        const auto t0 = Clock::now();
        const int rc = ended ? Dereg(victim) : -1;
        const long ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
        std::memset(victim->mem.data(), 0x5A, len);
        std::this_thread::sleep_for(milliseconds(1000));
        stop = true;
        streamer.join();
        Drain(a_.scq, 200);  // the stream's flushed WQEs
        if (rcv) {
            Drain(b_.rcq, 200);  // the flushed receives
        }
        EXPECT_TRUE(ended) << "the session did not end in 10 s";
        EXPECT_EQ(rc, 0);
        std::cout << "[ NOTE     ] dereg took " << ms << " ms" << std::endl;
        EXPECT_GT(done, 0) << "nothing completed before the session ended";
        for (size_t i = 0; i < len; i++) {
            if (victim->mem[i] != 0x5A) {
                ADD_FAILURE() << "byte " << i << " written after dereg returned";
                break;
            }
        }
        return done;
    }

    std::string dbg_a_, dbg_b_;
};

// Link loss during placements: the target (b) ends the session while the
// requester (a) still places a stream of WRITEs into b's MR, and b
// deregisters the MR at once. dereg must return only once a can no longer
// place there (it left the ended session), so not one byte lands in the
// pages after dereg returned, though a notices the end only later (up to
// its heartbeat timeout: made so with the test hook link_deaf).
TEST_F(PlacementSessionEnd, NothingLandsAfterDeregWhenTheTargetEndsTheSession) {
    const size_t len = 65536;
    for (int round = 0; round < 3; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Conn c;
        Buf *src, *dst;
        ASSERT_NO_FATAL_FAILURE(ConnectWhenUp(len, &c, &src, &dst));
        Fill(src->p(), len, round + 1);
        // a is a slow peer: for 1 s (the heartbeat timeout) its link work
        // looks at nothing. b ends the session (as on a protocol error of
        // a); a, still in it, would go on placing until it looks again but
        // for b's leave notice, which its placements read.
        const long n = EndUnderStream(c, WriteWr(0, src->sge(0, len), dst), dbg_a_, dbg_b_, dst);
        std::cout << "[ NOTE     ] round " << round << ": " << n
                  << " WRITEs completed before the end" << std::endl;
    }
}

// The same for placed SENDs: a places a stream of SENDs into receives
// of b's MR (b reposts each one completed) when b ends the session, and b
// deregisters the MR at once: not one byte of a SEND lands in the pages
// after dereg returned.
TEST_F(PlacementSessionEnd, NoSendLandsAfterDeregWhenTheResponderEndsTheSession) {
    const size_t len = 4096;
    for (int round = 0; round < 3; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        ASSERT_TRUE(WaitUntil(30000, [&] { return PortActive(a_) && PortActive(b_); }))
            << "the ports did not come back up";
        Conn c = Connect();
        Buf* msg = Reg(a_, len, kLocal);
        Buf* rcv = Reg(b_, len, kLocal);
        ASSERT_FALSE(HasFailure());
        ASSERT_TRUE(WaitPlaced(c, msg, rcv)) << "no SEND was placed in 5 s";
        Fill(msg->p(), len, round + 1);
        const long long placed0 = HwCounter(a_.name, "placed_sends");
        const ibv_sge into = rcv->sge(0, len);
        const long n = EndUnderStream(c, SendWr(0, msg->sge(0, len)), dbg_a_, dbg_b_, rcv, &into);
        std::cout << "[ NOTE     ] round " << round << ": " << n
                  << " SENDs completed before the end ("
                  << HwCounter(a_.name, "placed_sends") - placed0 << " placed)" << std::endl;
    }
}

// The same for READ sinks: the requester (a) ends the session while the
// target (b), deaf to it for 1 s, may still write queued READs into a's
// sink pages; a deregisters the sink MR at once. dereg returns only once b
// can no longer write there (the sinks of the flushed READs are held until
// b left the session), so not one byte lands after it returned.
TEST_F(PlacementSessionEnd, NothingLandsInTheSinkAfterDeregWhenTheRequesterEndsTheSession) {
    const size_t len = 65536;
    for (int round = 0; round < 3; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Conn c;
        Buf *unused, *src;
        ASSERT_NO_FATAL_FAILURE(ConnectWhenUp(len, &c, &unused, &src));
        Buf* sink = Reg(a_, len, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, round + 1);
        std::this_thread::sleep_for(milliseconds(100));  // a's QP export reaches b
        const long long pushed0 = HwCounter(a_.name, "pushed_reads");
        const long n = EndUnderStream(c, ReadWr(0, sink->sge(0, len), src), dbg_b_, dbg_a_, sink);
        std::cout << "[ NOTE     ] round " << round << ": " << n
                  << " READs completed before the end ("
                  << HwCounter(a_.name, "pushed_reads") - pushed0 << " written into the sink)"
                  << std::endl;
    }
}

// The physical address of the page holding @p (/proc/self/pagemap: root
// only), 0 when unknown. Without an IOMMU it is the page's DMA address.
uint64_t PhysAddr(const void* p) {
    const uint64_t page = sysconf(_SC_PAGESIZE);
    const int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    uint64_t e = 0;
    // pread: pagemap takes reads of whole 8-byte entries only
    const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page * 8);
    const bool ok = pread(fd, &e, sizeof(e), at) == sizeof(e);
    close(fd);
    if (!ok || !(e >> 63)) {
        return 0;
    }
    return (e & ((1ull << 55) - 1)) * page;
}

// Pipes whose buffers hold @pages pages of the 64-bit @word repeated: the
// kernel takes unmovable pages for them, first those this CPU freed last.
class PipeSpray {
  public:
    PipeSpray(uint64_t word, int pages) {
        std::vector<uint64_t> buf(4096 / sizeof(uint64_t), word);
        for (int i = 0; i < pages; i += 16) {
            int fd[2];
            if (pipe(fd)) {
                break;
            }
            fds_.push_back(fd[0]);
            fds_.push_back(fd[1]);
            for (int j = 0; j < 16 && i + j < pages; j++) {
                if (write(fd[1], buf.data(), 4096) != 4096) {
                    break;
                }
            }
        }
    }
    PipeSpray(const PipeSpray&) = delete;
    PipeSpray& operator=(const PipeSpray&) = delete;
    ~PipeSpray() {
        for (int fd : fds_) {
            close(fd);
        }
    }

  private:
    std::vector<int> fds_;
};

// The number of bytes of @p[0..@n) that are not @c.
size_t NotByte(const uint8_t* p, size_t n, uint8_t c) { return n - std::count(p, p + n, c); }

// An export whose call gave up before the peer read its page list (the
// peer's command handling held up past the command timeout): the peer
// reads the list later all the same, and must find the MR's pages there,
// whatever this side's memory is used for meanwhile. Here the unmovable
// pages this CPU frees are refilled at once with the address of a canary
// page: WRITEs through the MR land in the MR, never in the canary.
TEST_F(PlacementSessionEnd, ExportListLivesUntilThePeerReadIt) {
    const size_t len = 16384;
    Conn c;
    Buf *src, *first;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &first));
    auto* canary = static_cast<uint8_t*>(aligned_alloc(4096, 4096));
    ASSERT_NE(canary, nullptr);
    std::unique_ptr<uint8_t, decltype(&free)> canary_owner(canary, free);
    std::memset(canary, 0x5c, 4096);
    ASSERT_EQ(mlock(canary, 4096), 0) << std::strerror(errno);
    const uint64_t phys = PhysAddr(canary);
    if (!phys) {
        GTEST_SKIP() << "no physical address in /proc/self/pagemap (not root?)";
    }
    cpu_set_t all, cpu;
    ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
    CPU_ZERO(&cpu);
    CPU_SET(sched_getcpu(), &cpu);
    ASSERT_EQ(sched_setaffinity(0, sizeof(cpu), &cpu), 0);
    std::shared_ptr<void> unpin(nullptr,
                                [&all](void*) { sched_setaffinity(0, sizeof(all), &all); });
    // a's command handling sleeps 5 s and 1.5 s, b's export waits behind
    // it and gives up after its 5 s; a reads the export's list at 6.5 s.
    for (const char* ms : {"5000", "1500"}) {
        std::ofstream(dbg_b_ + "/cmd") << "delay " << ms << " 100" << std::flush;
    }
    const auto t0 = Clock::now();
    Buf* dst = Reg(b_, len, kRemoteAll);
    const long reg_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    PipeSpray spray(phys, 512);
    ASSERT_FALSE(HasFailure());
    EXPECT_GE(reg_ms, 4000) << "the export did not wait for the held-up peer";
    const long long placed0 = HwCounter(a_.name, "placed_writes");
    bool placed = false;
    const auto deadline = Clock::now() + milliseconds(20000);
    for (int i = 0; !placed && Clock::now() < deadline; i++) {
        Fill(src->p(), len, 40 + i);
        ASSERT_EQ(WriteOnce(c, src, dst, len), IBV_WC_SUCCESS) << "WRITE " << i;
        ASSERT_EQ(NotByte(canary, 4096, 0x5c), 0u) << "WRITE " << i << " landed in the canary";
        ASSERT_EQ(FirstDiff(src->p(), dst->p(), len), -1) << "WRITE " << i;
        std::this_thread::sleep_for(milliseconds(100));
        placed = HwCounter(a_.name, "placed_writes") > placed0;
    }
    EXPECT_TRUE(placed) << "the export never reached a: nothing was placed directly in 20 s";
    std::cout << "[ NOTE     ] ibv_reg_mr took " << reg_ms << " ms" << std::endl;
}

// A responder QP reset and back in INIT while the requester has not yet
// applied its withdrawal (held open by the test hook "pause"): the receive
// it posts there is not for its old connection, whose requester still
// sends.
TEST_F(PlacementSessionEnd, ResetQpTakesNoSendOfItsOldConnection) {
    ConnSpec cs;
    cs.rnr_retry = 0;
    Conn c = Connect(cs);
    Buf* msg = Reg(a_, 64, kLocal);
    Buf* rcv = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitPlaced(c, msg, rcv)) << "no SEND was placed in 5 s";
    Fill(msg->p(), 64, 9);
    std::memset(rcv->p(), 0x5A, 64);
    Inject(dbg_a_, "pause 2000 qp_export");
    ASSERT_EQ(QpToState(c.b, IBV_QPS_RESET), 0);
    ASSERT_EQ(QpToInit(c.b), 0);
    ASSERT_EQ(PostRecv(c.b, 80, {rcv->sge(0, 64)}), 0);
    ASSERT_EQ(Post(c.a, SendWr(90, msg->sge(0, 64))), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NE(s[0].status, IBV_WC_SUCCESS) << "a SEND into a QP in INIT completed";
    EXPECT_EQ(PollCq(b_.rcq, 1, 200).size(), 0u) << "a receive in INIT completed";
    for (int i = 0; i < 64; i++) {
        ASSERT_EQ(rcv->p()[i], 0x5A) << "byte " << i << " landed in a QP in INIT";
    }
}

// An MR registered while the session ends and the next one comes up: the
// link-up work exports it into the new session while the registration's
// own export, which started in the old one, is still on its way (held
// open by the test hook "pause"). dereg must revoke the new session's
// export: the old key places nothing after dereg returned.
TEST_F(PlacementSessionEnd, AnExportStartedInAnEndedSessionIsStillRevoked) {
    const size_t len = 16384;
    Inject(dbg_b_, "pause 4000");
    Buf* dst = nullptr;
    std::thread reg([&] { dst = Reg(b_, len, kRemoteAll); });
    std::this_thread::sleep_for(milliseconds(300));
    const long long downs = InfoField(dbg_b_, "link_down_events");
    Inject(dbg_b_, "link_off");
    const bool down =
        WaitUntil(10000, [&] { return InfoField(dbg_b_, "link_down_events") > downs; });
    Inject(dbg_b_, "link_on");
    Conn c;
    Buf *src, *other;
    ConnectWhenUp(len, &c, &src, &other);
    reg.join();
    ASSERT_TRUE(down) << "link_off did not end the session in 10 s";
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitDirect(c, src, dst)) << "the MR was not exported into the new session";
    Wr late = WriteWr(77, src->sge(0, len), dst);
    ASSERT_EQ(Dereg(dst), 0);
    std::memset(dst->mem.data(), 0x5A, len);
    ASSERT_EQ(Post(c.a, late), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << WcStr(wc[0]);
    EXPECT_EQ(NotByte(dst->mem.data(), len, 0x5A), 0u) << "bytes written after dereg returned";
}

void IgnoreSignal(int) {}

// dereg under a storm of signals, while the peer's command handling is
// held up so that the revocations wait: dereg returns only once the peer
// revoked, so the old keys place nothing after it returned.
TEST_F(PlacementSessionEnd, DeregUnderSignalsStillRevokes) {
    const size_t len = 16384;
    const int n = 8;
    Conn c;
    Buf *src, *first;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &first));
    std::vector<Buf*> dst;
    std::vector<Wr> late;
    for (int i = 0; i < n; i++) {
        dst.push_back(Reg(b_, len, kRemoteAll));
        ASSERT_FALSE(HasFailure());
        ASSERT_TRUE(WaitDirect(c, src, dst.back())) << "MR " << i << " was not exported";
        late.push_back(WriteWr(300 + i, src->sge(0, len), dst.back()));
    }
    struct sigaction sa = {}, old = {};
    sa.sa_handler = IgnoreSignal;  // no SA_RESTART
    ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
    std::ofstream(dbg_b_ + "/cmd") << "delay 2000 100" << std::flush;
    itimerval storm = {{0, 1000}, {0, 1000}}, off = {};
    ASSERT_EQ(setitimer(ITIMER_REAL, &storm, nullptr), 0);
    const auto t0 = Clock::now();
    for (Buf* d : dst) {
        EXPECT_EQ(Dereg(d), 0);
        std::memset(d->mem.data(), 0x5A, len);
    }
    const long ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    setitimer(ITIMER_REAL, &off, nullptr);
    sigaction(SIGALRM, &old, nullptr);
    for (const Wr& w : late) {
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u);
        if (wc[0].status != IBV_WC_SUCCESS) {
            break;  // the QP is in ERR now: later ones flush
        }
    }
    Drain(a_.scq, 200);
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(NotByte(dst[i]->mem.data(), len, 0x5A), 0u)
            << "MR " << i << ": bytes written after dereg returned";
    }
    std::cout << "[ NOTE     ] " << n << " deregs under signals took " << ms << " ms" << std::endl;
}

// PD numbers come back at once, and QP withdrawals travel from a work
// queue: the peer must never hold a QP export of a freed PD when an MR of
// a new PD with the same number reaches it. Here the withdrawals wait
// behind the peer's held-up command handling (two delays around them)
// while the PD is freed, a new PD allocated and an MR registered in it;
// then the peer WRITEs through its QP still connected to the destroyed
// one, with the new MR's key.
TEST_F(PlacementSessionEnd, AReusedPdNumberMeetsNoStaleQpExport) {
    const size_t len = 4096;
    Conn c0;
    Buf *src, *first;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c0, &src, &first));
    ibv_pd* const own = b_.pd;
    b_.pd = ibv_alloc_pd(b_.ctx);
    ASSERT_NE(b_.pd, nullptr);
    Conn c1;
    Buf *src1, *dst1;
    ConnectDirect(len, &c1, &src1, &dst1);
    ibv_pd* const old_pd = b_.pd;
    b_.pd = own;
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(Dereg(dst1), 0);
    // The peer sleeps 3 s; c0's withdrawal waits for it, c1's behind that.
    std::ofstream(dbg_b_ + "/cmd") << "delay 3000 100" << std::flush;
    for (ibv_qp* qp : {c0.b, c1.b}) {
        std::erase(qps_, qp);
        ASSERT_EQ(ibv_destroy_qp(qp), 0);
    }
    // The PD goes and a new one gets an MR; meanwhile one more delay goes
    // into the peer's command ring, before c1's withdrawal.
    Buf* victim = nullptr;
    std::thread renew([&] {
        EXPECT_EQ(ibv_dealloc_pd(old_pd), 0);
        ibv_pd* fresh = AllocPd(b_);
        if (fresh) {
            victim = Reg(b_, len, kRemoteAll, fresh);
        }
    });
    std::this_thread::sleep_for(milliseconds(300));
    // 2.5 s: c1's withdrawal, sent after c0's answer, is answered in time.
    std::ofstream(dbg_b_ + "/cmd") << "delay 2500 100" << std::flush;
    renew.join();
    ASSERT_NE(victim, nullptr);
    ASSERT_FALSE(HasFailure());
    Fill(src1->p(), len, 5);
    ASSERT_EQ(Post(c1.a, WriteWr(9, src1->sge(0, len), victim)), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 1, 15000);
    EXPECT_EQ(NotByte(victim->p(), len, 0), 0u)
        << "a WRITE through a destroyed QP of another PD landed in the new MR";
    if (!wc.empty()) {
        EXPECT_NE(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    }
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

class PlacementRead : public Placement {
  protected:
    // A READ of @len bytes of @src (b_) into @sink (a_) on @c; its status.
    ibv_wc_status ReadOnce(const Conn& c, Buf* sink, Buf* src, size_t len, uint64_t wr_id = 1) {
        if (Post(c.a, ReadWr(wr_id, sink->sge(0, len), src))) {
            return IBV_WC_GENERAL_ERR;
        }
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
    }

    // The requester's QP export travels apart from the READ_REQ: READ
    // until one is written into the sink by the target (at most 5 s).
    bool WaitPushed(const Conn& c, Buf* sink, Buf* src, size_t len) {
        const auto deadline = Clock::now() + milliseconds(5000);
        std::this_thread::sleep_for(milliseconds(50));
        const long long before = HwCounter(a_.name, "pushed_reads");
        while (Clock::now() < deadline) {
            if (ReadOnce(c, sink, src, len) != IBV_WC_SUCCESS) {
                return false;
            }
            std::this_thread::sleep_for(milliseconds(50));
            if (HwCounter(a_.name, "pushed_reads") > before) {
                return true;
            }
        }
        return false;
    }
};

// A large READ crosses once: the target writes the data straight into the
// requester's pages and sends only a notice; the requester copies nothing.
TEST_F(PlacementRead, LargeReadPushedIntoTheSinkByContent) {
    const size_t len = 65536;
    Conn c;
    Buf *unused, *src;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &unused, &src));
    Buf* sink = Reg(a_, len + 8192, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_TRUE(WaitPushed(c, sink, src, len)) << "no READ was written into its sink in 5 s";
    std::this_thread::sleep_for(milliseconds(50));
    const long long pushed0 = HwCounter(a_.name, "pushed_reads");
    const long long rx0 = HwCounter(a_.name, "rx_bytes");
    for (int i = 0; i < 100; i++) {
        Fill(src->p(), len, 7 * i + 1);
        std::memset(sink->p(), 0, len + 8192);
        ASSERT_EQ(ReadOnce(c, sink, src, len, i), IBV_WC_SUCCESS) << "round " << i;
        ASSERT_EQ(FirstDiff(src->p(), sink->p(), len), -1) << "round " << i;
        for (size_t j = len; j < len + 8192; j++) {
            ASSERT_EQ(sink->p()[j], 0) << "round " << i << ": byte " << j << " past the READ";
        }
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(HwCounter(a_.name, "pushed_reads") - pushed0, 100);
    // Pushed: a notice per READ; sent, the data would be 100 * 64 KiB.
    EXPECT_LT(HwCounter(a_.name, "rx_bytes") - rx0, 100 * 1024) << "the READ data came as segments";
}

// READs in flight when the requester's QP fails and its sink MR goes at
// once: whatever the target still had queued never lands in those pages
// after dereg returned (the sink is held until the target let go of it).
TEST_F(PlacementRead, NothingLandsInTheSinkAfterFlushAndDereg) {
    const size_t len = 65536;
    for (int round = 0; round < 10; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Conn c;
        Buf *unused, *src;
        ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &unused, &src));
        Buf* sink = Reg(a_, len, kLocal);
        ASSERT_FALSE(HasFailure());
        ASSERT_TRUE(WaitPushed(c, sink, src, len));
        Fill(src->p(), len, round + 11);
        const int n = std::min<int>(16, c.cap_a.max_send_wr);
        for (int i = 0; i < n; i++) {
            Wr rd = ReadWr(100 + i, sink->sge(0, len), src);
            rd.flags = 0;
            ASSERT_EQ(Post(c.a, rd), 0);
        }
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        ASSERT_EQ(ibv_modify_qp(c.a, &attr, IBV_QP_STATE), 0);
        std::vector<uint8_t>& pages = sink->mem;
        ASSERT_EQ(Dereg(sink), 0);
        std::memset(pages.data(), 0x5A, len);
        std::this_thread::sleep_for(milliseconds(300));
        Drain(a_.scq, 200);
        for (size_t i = 0; i < len; i++) {
            ASSERT_EQ(pages[i], 0x5A) << "byte " << i << " written after the sink MR went";
        }
    }
}

// What one user's calls may queue in the kernel for the peer stays bounded.
class PlacementCaps : public PlacementRead {};

// RTS -> RTS modify_qp with new access flags, over and over on both QPs of
// a connection: each is an export for the peer, but only a QP's last
// state matters to it, so at most two messages of a QP wait to be sent
// (debugfs info qp_exports_pending), the kernel's memory does not grow, a
// PD freed right after (which waits for the queue) goes at once, and the
// connection still places WRITEs and READs directly.
TEST_F(PlacementCaps, AccessFlagModifiesKeepTwoExportsPerQp) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    Buf* sink = Reg(a_, len, kLocal);
    ibv_pd* spare = ibv_alloc_pd(a_.ctx);  // freed after the modifies
    ASSERT_NE(spare, nullptr);
    ASSERT_FALSE(HasFailure());
    const std::string dir_a = DebugfsDir(a_.name);
    const std::string dir_b = DebugfsDir(b_.name);
    if (dir_a.empty() || dir_b.empty()) {
        EXPECT_EQ(ibv_dealloc_pd(spare), 0);
        GTEST_SKIP() << "no ntrdma debugfs directory for " << a_.name << " and " << b_.name;
    }
    EXPECT_GE(InfoField(dir_a, "qp_exports_pending"), 0)
        << "debugfs info has no qp_exports_pending line";
    const long slab0 = SlabKiB();
    ASSERT_GT(slab0, 0) << "no Slab line in /proc/meminfo";
    const auto deadline = Clock::now() + milliseconds(15000);
    long long most = 0;
    long n = 0;
    for (; n < 100000 && (n % 256 || Clock::now() < deadline); n++) {
        ibv_qp_attr at{};
        at.qp_access_flags = kQpRemoteAccess | (n % 2 ? 0 : IBV_ACCESS_REMOTE_ATOMIC);
        ASSERT_EQ(ibv_modify_qp(c.a, &at, IBV_QP_ACCESS_FLAGS), 0) << n;
        ASSERT_EQ(ibv_modify_qp(c.b, &at, IBV_QP_ACCESS_FLAGS), 0) << n;
        if (n % 256 == 0) {
            most = std::max({most, InfoField(dir_a, "qp_exports_pending"),
                             InfoField(dir_b, "qp_exports_pending")});
        }
    }
    const long grown = SlabKiB() - slab0;
    const auto t0 = Clock::now();
    EXPECT_EQ(ibv_dealloc_pd(spare), 0);
    const long pd_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::cout << "[ NOTE     ] " << n << " x 2 modifies, at most " << most
              << " exports pending, slab +" << grown << " KiB, dealloc_pd " << pd_ms << " ms\n";
    EXPECT_GE(n, 10000) << "too few modifies to tell";
    EXPECT_LE(most, 2) << "QP exports waiting on one device with one QP modified";
    EXPECT_LT(grown, 1024) << "the slab grew by " << grown << " KiB in " << n << " x 2 modifies";
    EXPECT_LT(pd_ms, 3000) << "dealloc_pd waited for the QP export queue";
    ASSERT_TRUE(WaitDirect(c, src, dst)) << "no WRITE was placed directly in 5 s";
    ASSERT_TRUE(WaitPushed(c, sink, dst, len)) << "no READ was written into its sink in 5 s";
    Fill(src->p(), len, 5);
    ASSERT_EQ(WriteOnce(c, src, dst, len), IBV_WC_SUCCESS);
    ASSERT_EQ(ReadOnce(c, sink, dst, len), IBV_WC_SUCCESS);
    EXPECT_EQ(FirstDiff(src->p(), sink->p(), len), -1);
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// The DMA channel the engine copies with (debugfs info "copy: <name>"),
// or "" without one (use_dma=0, no channel, or debugfs unreadable).
std::string DmaChannel() {
    const std::string l = InfoLine([](const std::string& l) {
                              return l.rfind("copy: ", 0) == 0 && l != "copy: cpu";
                          }).second;
    return l.empty() ? "" : l.substr(6);
}

constexpr const char* kPlaceCopybreak = "/sys/module/ntrdma/parameters/place_copybreak";

// Placements by the engine's DMA channel (rdma/engine/ntrdma_place.c):
// a WRITE above place_copybreak goes on the channel and completes once its
// copies are done, in the order of everything else the QP sends. These
// tests set place_copybreak to 0 (every placement on the channel) and put
// it back after.
class PlacementDma : public Placement {
  protected:
    void SetUp() override {
        Placement::SetUp();
        if (IsSkipped() || HasFailure()) {
            return;
        }
        if (DmaChannel().empty()) {
            GTEST_SKIP()
                << "no DMA channel (use_dma=0 or none offered): every placement is a CPU copy";
        }
        std::ifstream in(kPlaceCopybreak);
        in >> saved_;
        ASSERT_TRUE(in) << "no place_copybreak parameter";
        ASSERT_TRUE(SetCopybreak("0")) << "cannot write " << kPlaceCopybreak;
    }

    void TearDown() override {
        if (!saved_.empty()) {
            EXPECT_TRUE(SetCopybreak(saved_));
        }
        Placement::TearDown();
    }

  private:
    static bool SetCopybreak(const std::string& v) {
        std::ofstream out(kPlaceCopybreak);
        out << v << std::flush;
        return static_cast<bool>(out);
    }

    std::string saved_;
};

// The WRITE completes only once the channel wrote all of it: the source,
// reused at once, never shows in the target.
TEST_F(PlacementDma, LargeWriteCompletesOnceItsCopiesAre) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    std::this_thread::sleep_for(milliseconds(50));
    const long long dma0 = HwCounter(a_.name, "placed_dma_bytes");
    ASSERT_GE(dma0, 0) << "no placed_dma_bytes counter";
    std::vector<uint8_t> expect(len);
    for (int i = 0; i < 100; i++) {
        Fill(src->p(), len, 500 + i);
        std::memcpy(expect.data(), src->p(), len);
        ASSERT_EQ(WriteOnce(c, src, dst, len), IBV_WC_SUCCESS);
        std::memset(src->p(), 0xEE, len);  // the user's again
        ASSERT_EQ(FirstDiff(expect.data(), dst->p(), len), -1) << "round " << i;
    }
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_GE(HwCounter(a_.name, "placed_dma_bytes") - dma0, 100LL * (long long)len)
        << "the 64 KiB WRITEs did not go on the DMA channel";
}

// IB RC order between WRITEs: a small WRITE posted after a large one to
// the same bytes wins, though the small one alone would be a CPU copy.
TEST_F(PlacementDma, LaterSmallWriteWinsOverEarlierLargeOne) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    Buf* small = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < 200; i++) {
        Fill(src->p(), len, 3 * i + 1);
        Fill(small->p(), 64, 3 * i + 2);
        Wr big = WriteWr(2 * i, src->sge(0, len), dst);
        big.flags = 0;
        ASSERT_EQ(Post(c.a, big), 0);
        ASSERT_EQ(Post(c.a, WriteWr(2 * i + 1, small->sge(0, 64), dst, len - 64)), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        ASSERT_EQ(FirstDiff(src->p(), dst->p(), len - 64), -1) << "round " << i;
        ASSERT_EQ(FirstDiff(small->p(), dst->p() + len - 64, 64), -1)
            << "round " << i << ": the earlier WRITE's copy landed after the later WRITE";
    }
}

// A small READ (read straight from the target when nothing is pending)
// sees the large WRITE posted before it, still on the channel.
TEST_F(PlacementDma, SmallReadSeesTheLargeWriteBeforeIt) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    Buf* back = Reg(a_, 256, kLocal);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < 200; i++) {
        Fill(src->p(), len, 11 * i + 7);
        Wr w = WriteWr(2 * i, src->sge(0, len), dst);
        w.flags = 0;
        ASSERT_EQ(Post(c.a, w), 0);
        Wr r = ReadWr(2 * i + 1, back->sge(0, 256), dst);
        r.raddr = dst->addr(len - 256);
        ASSERT_EQ(Post(c.a, r), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        ASSERT_EQ(FirstDiff(src->p() + len - 256, back->p(), 256), -1) << "round " << i;
    }
}

// The emulated DMA engine's test knob (ntb_hw/ntb_hw_ivshmem_dma.c): refuse
// every Nth descriptor as a full ring does. False when it is not there.
bool IvdmaRefuseEvery(unsigned int n) {
    std::ofstream f("/sys/module/ntb_hw_ivshmem/parameters/fail_prep_every");
    f << n << std::flush;
    return static_cast<bool>(f);
}

long long IvdmaRefused() {
    std::ifstream f("/sys/module/ntb_hw_ivshmem/parameters/refused");
    long long v = -1;
    f >> v;
    return f ? v : -1;
}

// A channel that refuses copies part-way through a placement: the rest is
// copied by the CPU after the taken ones, and a SEND behind it still sees
// every byte.
TEST_F(PlacementDma, ChannelRefusingPartOfAPlacement) {
    const size_t len = 65536;
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectDirect(len, &c, &src, &dst));
    Buf* msg = Reg(a_, 8, kLocal);
    Buf* rcv = Reg(b_, 8, kLocal);
    ASSERT_FALSE(HasFailure());
    const long long refused0 = IvdmaRefused();
    if (refused0 < 0 || !IvdmaRefuseEvery(7)) {
        GTEST_SKIP() << "the DMA channel is not the emulated NTB's (no fail_prep_every)";
    }
    WriteThenSendRounds(c, src, dst, msg, rcv, 100);  // the knob goes back even on failure
    IvdmaRefuseEvery(0);
    EXPECT_GT(IvdmaRefused(), refused0) << "the channel refused nothing";
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// Revocation with the placements on the channel: dereg returns only once
// the peer's queued copies into the pages are done (its fence).
TEST_F(PlacementDma, NothingLandsAfterDeregUnderWriteStream) {
    NothingLandsAfter([this](Buf* dst) { return Dereg(dst); });
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// Sets a module parameter of ntrdma for the scope, then puts it back.
class ParamScope {
  public:
    ParamScope(const std::string& name, const std::string& value)
        : path_("/sys/module/ntrdma/parameters/" + name) {
        std::ifstream in(path_);
        in >> saved_;
        ok_ = static_cast<bool>(in) && Write(value);
    }
    ~ParamScope() {
        if (ok_) {
            EXPECT_TRUE(Write(saved_)) << "cannot restore " << path_;
        }
    }
    ParamScope(const ParamScope&) = delete;
    ParamScope& operator=(const ParamScope&) = delete;
    bool ok() const { return ok_; }

  private:
    bool Write(const std::string& v) const {
        std::ofstream out(path_);
        out << v << std::flush;
        return static_cast<bool>(out);
    }

    std::string path_;
    std::string saved_;
    bool ok_ = false;
};

class PlacementBudget : public Placement {
  protected:
    // One ibv_post_send of @n WRITEs of the whole 8 MiB source into the
    // target at offset 2048 (pieces of half a page each: below
    // place_copybreak, so CPU copies), only the last signalled. The post
    // returns at once: the kernel places a bounded amount per pass and
    // the rest from the QP's work, with interrupts on in between. Every
    // WRITE completes, and the bytes are there.
    void ManyLargeWritesInOnePost(int n) {
        constexpr size_t kLen = 8u << 20;
        constexpr size_t kOff = 2048;
        ConnSpec cs;
        cs.wr = static_cast<uint32_t>(std::min(a_.dev.max_qp_wr, 4096));
        n = std::min<int>(n, static_cast<int>(cs.wr));
        Conn c = Connect(cs);
        Buf* src = Reg(a_, kLen, kLocal);
        Buf* dst = Reg(b_, kLen + 4096, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        ASSERT_TRUE(WaitDirect(c, src, dst)) << "no WRITE was placed directly in 5 s";
        Fill(src->p(), kLen, 77);
        std::this_thread::sleep_for(milliseconds(50));
        const long long placed0 = HwCounter(a_.name, "placed_writes");
        std::vector<Wr> ws;
        for (int i = 0; i < n; i++) {
            Wr w = WriteWr(1000 + i, src->sge(0, kLen), dst, kOff);
            w.flags = i == n - 1 ? IBV_SEND_SIGNALED : 0;
            ws.push_back(w);
        }
        const auto t0 = Clock::now();
        ASSERT_EQ(PostChain(c.a, ws), 0);
        const long post_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1, 600000);
        const long all_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
        std::cout << "[ NOTE     ] " << n << " WRITEs of 8 MiB: the post took " << post_ms
                  << " ms, all of them " << all_ms << " ms" << std::endl;
        EXPECT_LT(post_ms, 200) << "one doorbell placed everything before returning";
        ASSERT_EQ(wc.size(), 1u) << "the last WRITE did not complete";
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        EXPECT_EQ(wc[0].wr_id, 1000u + n - 1);
        EXPECT_EQ(FirstDiff(src->p(), dst->p() + kOff, kLen), -1);
        std::this_thread::sleep_for(milliseconds(50));
        EXPECT_GE(HwCounter(a_.name, "placed_writes") - placed0, n)
            << "the WRITEs were not placed directly";
    }
};

// The default placement settings.
TEST_F(PlacementBudget, ManyLargeWritesInOnePostReturnFast) { ManyLargeWritesInOnePost(128); }

// Every placement a CPU copy, even with a DMA channel (place_copybreak
// above any placement): the worst case for interrupts off.
TEST_F(PlacementBudget, ManyLargeCpuWritesInOnePostReturnFast) {
    ParamScope cb("place_copybreak", "4294967295");
    ASSERT_TRUE(cb.ok()) << "cannot set place_copybreak";
    ManyLargeWritesInOnePost(128);
}

}  // namespace
}  // namespace ntv

namespace ntv {
namespace {

// Every placement on the DMA channel (place_copybreak 0): the budget
// leaves the channel's pipeline full.
TEST_F(PlacementBudget, ManyLargeDmaWritesInOnePostReturnFast) {
    if (DmaChannel().empty()) {
        GTEST_SKIP() << "no DMA channel (use_dma=0 or none offered)";
    }
    ParamScope cb("place_copybreak", "0");
    ASSERT_TRUE(cb.ok()) << "cannot set place_copybreak";
    ManyLargeWritesInOnePost(64);
}

}  // namespace
}  // namespace ntv
