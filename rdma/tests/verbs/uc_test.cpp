// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// UC QPs: connected, unacknowledged as seen by the user. SEND, SEND with
// immediate and RDMA WRITE (with immediate) between a UC pair, to the peer
// device (loop topology: both ends in this guest) and within one device
// (same-device loopback, both topologies). What a UC responder refuses (no
// receive posted, a receive too small, a bad rkey) it drops whole: the
// sender completes with success, the responder's QP stays in RTS, the
// device counts it (uc_dropped), and the next message arrives. READ and
// atomics are not UC operations: ibv_post_send refuses them.
#include <arpa/inet.h>

#include <thread>
#include <type_traits>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

template <class Base>
class Uc : public Base {
  protected:
    // A UC QP of @s on its CQs, in RESET (recorded on failure).
    ibv_qp* UcQp(Side& s) {
        RcQpSpec qs;
        qs.type = IBV_QPT_UC;
        qs.send_cq = s.scq;
        qs.recv_cq = s.rcq;
        qs.max_send_wr = qs.max_recv_wr = 32;
        ibv_qp* qp = MakeRcQp(s.pd, qs);
        if (!qp) {
            ADD_FAILURE() << "UC ibv_create_qp on " << s.name << ": " << std::strerror(errno);
            return nullptr;
        }
        this->qps_.push_back(qp);
        return qp;
    }

    // @qp to RTS towards @dst's QP @dqpn, with the attributes IB names for
    // UC: no READ depths, RNR timer, ACK timeout or retry counts.
    static int UcToRts(ibv_qp* qp, const Side& dst, uint32_t dqpn,
                       unsigned access = IBV_ACCESS_REMOTE_WRITE) {
        RtrSpec r;
        r.dest_qpn = dqpn;
        r.dgid = dst.gid;
        r.dlid = dst.lid;
        r.mask_drop = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        int rc = QpToInit(qp, access);
        if (!rc) {
            rc = QpToRtr(qp, r);
        }
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        return rc ? rc : ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }

    // A connected UC pair: a on the requester's side, b on the responder's.
    Conn ConnectUc() {
        Conn c;
        c.a = UcQp(this->a_);
        c.b = UcQp(this->b_);
        if (c.a && c.b) {
            EXPECT_EQ(UcToRts(c.a, this->b_, c.b->qp_num), 0) << std::strerror(errno);
            EXPECT_EQ(UcToRts(c.b, this->a_, c.a->qp_num), 0) << std::strerror(errno);
        }
        return c;
    }

    // Why nothing of this fixture is placed directly, or nullptr.
    static const char* NotPlaced() {
        if (std::is_same_v<Base, SameDevice>) {
            return "a QP of the same device takes the loopback path, never placed";
        }
        if (!DirectPlacementOn() || WindowedMode()) {
            return "direct placement off (direct_placement=0 or windowed mode)";
        }
        return nullptr;
    }

    long long Dropped() { return HwCounter(this->b_.name, "uc_dropped"); }

    // uc_dropped once it reached @want (the core caches the counters for
    // a few ms), or its value after 2 s.
    long long DroppedAtLeast(long long want) {
        long long v = Dropped();
        for (int i = 0; i < 100 && v < want; i++) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            v = Dropped();
        }
        return v;
    }

    // The sender's WC for @wr_id: success, of @op.
    void ExpectSent(uint64_t wr_id, ibv_wc_opcode op) {
        std::vector<ibv_wc> wc = PollCq(this->a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u) << "no send completion";
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        EXPECT_EQ(wc[0].wr_id, wr_id);
        EXPECT_EQ(wc[0].opcode, op);
    }

    // A SEND of @len bytes of @fill from @src; the responder's receive in
    // @dst (posted as @recv_id) gets it whole.
    void ExpectDelivered(const Conn& c, Buf* src, Buf* dst, uint32_t len, uint8_t fill,
                         uint64_t recv_id) {
        std::memset(src->p(), fill, len);
        ASSERT_EQ(PostRecv(c.b, recv_id, {dst->sge(0, len)}), 0);
        ASSERT_EQ(Post(c.a, SendWr(recv_id + 100, src->sge(0, len))), 0);
        ExpectSent(recv_id + 100, IBV_WC_SEND);
        std::vector<ibv_wc> wc = PollCq(this->b_.rcq, 1);
        ASSERT_EQ(wc.size(), 1u) << "the SEND did not arrive";
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        EXPECT_EQ(wc[0].wr_id, recv_id);
        EXPECT_EQ(wc[0].byte_len, len);
        EXPECT_EQ(wc[0].qp_num, c.b->qp_num);
        EXPECT_EQ(wc[0].src_qp, c.a->qp_num);
        EXPECT_EQ(std::count(dst->p(), dst->p(len), fill), static_cast<long>(len)) << "payload";
    }

    // SENDs of 4 KiB from @src into @dst until one was placed (exports
    // travel on the command channel: the first SENDs may take the checked
    // path); a fatal failure when none was in 5 s.
    void WaitPlaced(const Conn& c, Buf* src, Buf* dst) {
        const long long placed0 = HwCounter(this->a_.name, "placed_sends");
        const auto deadline = Clock::now() + std::chrono::seconds(5);
        for (uint64_t id = 1; Clock::now() < deadline; id++) {
            ASSERT_NO_FATAL_FAILURE(this->ExpectDelivered(c, src, dst, 4096, id & 0xff, id));
            std::this_thread::sleep_for(milliseconds(20));
            if (HwCounter(this->a_.name, "placed_sends") > placed0) {
                return;
            }
        }
        FAIL() << "no UC SEND was placed in 5 s";
    }
};

struct UcNames {
    template <class T>
    static std::string GetName(int i) {
        return i ? "SameDevice" : "Peer";
    }
};
using UcBases = ::testing::Types<DataPath, SameDevice>;
TYPED_TEST_SUITE(Uc, UcBases, UcNames);

constexpr uint32_t kBig = 256 * 1024;  // many segments

TYPED_TEST(Uc, SendAndWriteWithImmediate) {
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, kBig, kLocal);
    Buf* dst = this->Reg(this->b_, kBig, kLocal | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_FALSE(this->HasFailure());
    this->ExpectDelivered(c, src, dst, 4096, 0x5a, 1);
    this->ExpectDelivered(c, src, dst, kBig, 0xa5, 2);

    std::memset(src->p(), 0x3c, kBig);
    Wr w = WriteWr(3, src->sge(0, kBig), dst);
    w.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm = htonl(0x1234);
    ASSERT_EQ(PostRecv(c.b, 4, {dst->sge(0, 0)}), 0);
    ASSERT_EQ(Post(c.a, w), 0);
    this->ExpectSent(3, IBV_WC_RDMA_WRITE);
    std::vector<ibv_wc> wc = PollCq(this->b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u) << "no receive for the immediate";
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc[0].imm_data), 0x1234u);
    EXPECT_EQ(std::count(dst->p(), dst->p(kBig), 0x3c), static_cast<long>(kBig)) << "WRITE payload";
}

// No receive posted: the message is dropped (no RNR wait), the sender
// completes, and the next message takes the next receive.
TYPED_TEST(Uc, SendWithoutReceiveIsDropped) {
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, kBig, kLocal);
    Buf* dst = this->Reg(this->b_, kBig, kLocal);
    ASSERT_FALSE(this->HasFailure());
    const long long before = this->Dropped();
    for (uint32_t len : {64u, kBig}) {
        std::memset(src->p(), 0xee, len);
        ASSERT_EQ(Post(c.a, SendWr(10 + len, src->sge(0, len))), 0);
        this->ExpectSent(10 + len, IBV_WC_SEND);
    }
    EXPECT_EQ(this->DroppedAtLeast(before + 2), before + 2) << "uc_dropped";
    EXPECT_TRUE(Drain(this->b_.rcq, 100).empty()) << "a dropped message completed a receive";
    EXPECT_EQ(QpState(c.b), IBV_QPS_RTS);
    this->ExpectDelivered(c, src, dst, kBig, 0x11, 20);
    EXPECT_EQ(std::count(dst->p(), dst->p(kBig), 0xee), 0) << "a dropped payload arrived";
}

// A receive too small completes in error; a WRITE with a bad rkey leaves
// nothing. Both messages are dropped, the QPs stay up, the next one arrives.
TYPED_TEST(Uc, RefusedMessagesLeaveTheQpUp) {
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, kBig, kLocal);
    Buf* dst = this->Reg(this->b_, kBig, kLocal | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_FALSE(this->HasFailure());
    const long long before = this->Dropped();
    ASSERT_EQ(PostRecv(c.b, 30, {dst->sge(0, 16)}), 0);
    ASSERT_EQ(Post(c.a, SendWr(31, src->sge(0, 8192))), 0);
    this->ExpectSent(31, IBV_WC_SEND);
    std::vector<ibv_wc> wc = PollCq(this->b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u) << "the receive too small did not complete";
    EXPECT_EQ(wc[0].wr_id, 30u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR) << WcStr(wc[0]);

    std::memset(src->p(), 0x77, kBig);
    Wr w = WriteWr(32, src->sge(0, kBig), dst);
    w.rkey ^= 0x80;
    ASSERT_EQ(Post(c.a, w), 0);
    this->ExpectSent(32, IBV_WC_RDMA_WRITE);
    EXPECT_EQ(this->DroppedAtLeast(before + 2), before + 2) << "uc_dropped";
    EXPECT_EQ(std::count(dst->p(), dst->p(kBig), 0x77), 0) << "a WRITE with a bad rkey landed";
    EXPECT_EQ(QpState(c.a), IBV_QPS_RTS);
    EXPECT_EQ(QpState(c.b), IBV_QPS_RTS);
    this->ExpectDelivered(c, src, dst, 4096, 0x22, 33);
}

TYPED_TEST(Uc, ReadAndAtomicsRefused) {
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, 64, kLocal);
    Buf* dst = this->Reg(this->b_, 64, kRemoteAll);
    ASSERT_FALSE(this->HasFailure());
    EXPECT_NE(Post(c.a, ReadWr(40, src->sge(0, 8), dst)), 0);
    Wr w = WriteWr(41, src->sge(0, 8), dst);
    w.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
    EXPECT_NE(Post(c.a, w), 0);
    EXPECT_TRUE(Drain(this->a_.scq, 100).empty()) << "a refused WR completed";
    EXPECT_EQ(QpState(c.a), IBV_QPS_RTS);
    ibv_qp_init_attr_ex x{};
    x.qp_type = IBV_QPT_UC;
    x.send_cq = this->a_.scq;
    x.recv_cq = this->a_.rcq;
    x.cap.max_send_wr = x.cap.max_recv_wr = x.cap.max_send_sge = x.cap.max_recv_sge = 1;
    x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    x.pd = this->a_.pd;
    x.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
    ibv_qp* qp = ibv_create_qp_ex(this->a_.ctx, &x);
    EXPECT_EQ(qp, nullptr) << "a UC QP with ibv_wr_rdma_read";
    if (qp) {
        this->qps_.push_back(qp);
    }
}

// To the peer, a UC SEND into the responder's own RQ is placed by the
// requester as an RC one is: no segment reaches the responder. (Exports
// travel on the command channel: the first SENDs may take the checked path.)
TYPED_TEST(Uc, SendsArePlaced) {
    if (const char* why = this->NotPlaced()) {
        GTEST_SKIP() << why;
    }
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, 4096, kLocal);
    Buf* dst = this->Reg(this->b_, 4096, kLocal);
    ASSERT_FALSE(this->HasFailure());
    ASSERT_NO_FATAL_FAILURE(this->WaitPlaced(c, src, dst));
    const long long placed = HwCounter(this->a_.name, "placed_sends");
    const long long rx0 = HwCounter(this->b_.name, "rx_segments");
    for (uint32_t i = 0; i < 50; i++) {
        ASSERT_NO_FATAL_FAILURE(this->ExpectDelivered(c, src, dst, 1 + i * 81, i, 1000 + i));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(HwCounter(this->a_.name, "placed_sends") - placed, 50);
    EXPECT_EQ(HwCounter(this->b_.name, "rx_segments"), rx0) << "the responder received segments";
}

// A UC QP moved to ERR completes each WR it still holds once, after those
// that completed: the requester's SENDs on their way (flushed, a prefix of
// them acknowledged), the responder's receives (flushed after the ones
// messages completed). Whatever the requester completed as sent, the
// responder received. To the peer with direct placement the first SENDs
// are placed: the responder's RQ flush then waits for the peer's answer to
// its withdrawal, and must still complete no receive twice.
TYPED_TEST(Uc, ErrFlushesTheRestOnce) {
    Conn c = this->ConnectUc();
    Buf* src = this->Reg(this->a_, kBig, kLocal);
    Buf* dst = this->Reg(this->b_, kBig, kLocal);
    ASSERT_FALSE(this->HasFailure());
    const bool placed = this->NotPlaced() == nullptr;
    if (placed) {
        ASSERT_NO_FATAL_FAILURE(this->WaitPlaced(c, src, dst));
    }
    constexpr size_t kRecvs = 12, kSmall = 3, kLarge = 8;
    const long long placed0 = HwCounter(this->a_.name, "placed_sends");
    for (size_t i = 0; i < kRecvs; i++) {
        ASSERT_EQ(PostRecv(c.b, 50 + i, {dst->sge(0, kBig)}), 0);
    }
    for (size_t i = 0; i < kSmall; i++) {
        ASSERT_EQ(Post(c.a, SendWr(60 + i, src->sge(0, 64))), 0);
    }
    std::vector<ibv_wc> s = PollCq(this->a_.scq, kSmall);
    ASSERT_EQ(s.size(), kSmall);
    for (size_t i = 0; i < kSmall; i++) {
        EXPECT_EQ(s[i].wr_id, 60u + i);
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
    }
    if (placed) {
        std::this_thread::sleep_for(milliseconds(50));
        EXPECT_EQ(HwCounter(this->a_.name, "placed_sends") - placed0, static_cast<long>(kSmall))
            << "the small SENDs were not placed";
    }

    // SENDs of many segments each (the checked path), and ERR while they go.
    std::vector<Wr> big;
    for (size_t i = 0; i < kLarge; i++) {
        big.push_back(SendWr(70 + i, src->sge(0, kBig)));
    }
    ASSERT_EQ(PostChain(c.a, big), 0);
    ASSERT_EQ(QpToState(c.a, IBV_QPS_ERR), 0) << std::strerror(errno);
    s = PollCq(this->a_.scq, kLarge);
    ASSERT_EQ(s.size(), kLarge) << "a SEND was lost";
    size_t acked = 0;
    for (size_t i = 0; i < kLarge; i++) {
        EXPECT_EQ(s[i].wr_id, 70u + i);
        EXPECT_EQ(s[i].qp_num, c.a->qp_num);
        if (s[i].status == IBV_WC_SUCCESS) {
            EXPECT_EQ(acked++, i) << "a SEND completed after one was flushed";
        } else {
            EXPECT_EQ(s[i].status, IBV_WC_WR_FLUSH_ERR) << WcStr(s[i]);
        }
    }
    EXPECT_TRUE(Drain(this->a_.scq, 300).empty()) << "a SEND completed twice";

    ASSERT_EQ(QpToState(c.b, IBV_QPS_ERR), 0) << std::strerror(errno);
    std::vector<ibv_wc> r = PollCq(this->b_.rcq, kRecvs);
    ASSERT_EQ(r.size(), kRecvs) << "a receive was lost";
    size_t got = 0;
    for (size_t i = 0; i < kRecvs; i++) {
        EXPECT_EQ(r[i].wr_id, 50u + i);
        if (i < kSmall) {
            EXPECT_EQ(r[i].status, IBV_WC_SUCCESS) << WcStr(r[i]);
            EXPECT_EQ(r[i].byte_len, 64u);
        } else if (r[i].status == IBV_WC_SUCCESS) {
            EXPECT_EQ(got++, i - kSmall) << "a receive completed after one was flushed";
            EXPECT_EQ(r[i].byte_len, kBig);
        } else {
            EXPECT_EQ(r[i].status, IBV_WC_WR_FLUSH_ERR) << WcStr(r[i]);
        }
    }
    EXPECT_GE(got, acked) << "a SEND completed as sent that the responder did not receive";
    EXPECT_TRUE(Drain(this->b_.rcq, 300).empty()) << "a receive completed twice";
}

// A SEND too long for the receive it takes is dropped whole: that receive
// completes in error (IB's class D: a local length error, none of the
// bytes written), the requester completes the SEND as sent, and the SENDs
// behind it land in the next receives, intact and in order. Posted once
// the dropped one completed, they are placed; posted right behind it, they
// take the checked path after it. 64 KiB is never placed (over 16 KiB);
// 8 KiB the requester tries to place and finds that it does not fit.
TYPED_TEST(Uc, TooLongSendDroppedThenPlacedSendsInOrder) {
    if (const char* why = this->NotPlaced()) {
        GTEST_SKIP() << why;
    }
    constexpr uint32_t kRecv = 4096;
    constexpr size_t kSmall = 4;
    Conn c = this->ConnectUc();
    Buf* big = this->Reg(this->a_, 65536, kLocal);
    Buf* msg = this->Reg(this->a_, kSmall * kRecv, kLocal);
    Buf* rcv = this->Reg(this->b_, (kSmall + 1) * kRecv, kLocal);
    ASSERT_FALSE(this->HasFailure());
    ASSERT_NO_FATAL_FAILURE(this->WaitPlaced(c, msg, rcv));
    struct Case {
        uint32_t len;
        bool wait;  // for the dropped SEND's completion before the rest
    };
    uint32_t seed = 1;
    for (const Case k : {Case{65536, true}, Case{8192, true}, Case{65536, false}}) {
        SCOPED_TRACE("dropped SEND of " + std::to_string(k.len) + " bytes, " +
                     (k.wait ? "the rest after its completion" : "the rest right behind it"));
        std::memset(big->p(), 0xee, k.len);
        std::memset(rcv->p(), 0, rcv->mem.size());
        uint32_t len[kSmall];
        for (size_t i = 0; i < kSmall; i++) {
            len[i] = 1 + static_cast<uint32_t>(i) * 1021;
            Fill(msg->p(i * kRecv), len[i], seed++);
        }
        for (size_t i = 0; i <= kSmall; i++) {
            ASSERT_EQ(PostRecv(c.b, 100 + i, {rcv->sge(i * kRecv, kRecv)}), 0);
        }
        std::this_thread::sleep_for(milliseconds(50));
        const long long placed0 = HwCounter(this->a_.name, "placed_sends");
        const long long dropped0 = this->Dropped();
        std::vector<Wr> ws = {SendWr(200, big->sge(0, k.len))};
        if (k.wait) {
            ASSERT_EQ(PostChain(c.a, ws), 0);
            ASSERT_NO_FATAL_FAILURE(this->ExpectSent(200, IBV_WC_SEND));
            ws.clear();
        }
        for (size_t i = 0; i < kSmall; i++) {
            ws.push_back(SendWr(201 + i, msg->sge(i * kRecv, len[i])));
        }
        ASSERT_EQ(PostChain(c.a, ws), 0);
        std::vector<ibv_wc> s = PollCq(this->a_.scq, ws.size());
        ASSERT_EQ(s.size(), ws.size()) << "a SEND did not complete";
        for (size_t i = 0; i < ws.size(); i++) {
            EXPECT_EQ(s[i].wr_id, ws[i].wr_id);
            EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        }
        std::vector<ibv_wc> r = PollCq(this->b_.rcq, kSmall + 1);
        ASSERT_EQ(r.size(), kSmall + 1) << "a receive did not complete";
        EXPECT_EQ(r[0].wr_id, 100u);
        EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR) << WcStr(r[0]);
        EXPECT_EQ(std::count(rcv->p(), rcv->p(kRecv), 0), static_cast<long>(kRecv))
            << "bytes of the dropped SEND landed in the receive it took";
        for (size_t i = 0; i < kSmall; i++) {
            const ibv_wc& w = r[i + 1];
            SCOPED_TRACE("SEND " + std::to_string(i) + " behind it");
            EXPECT_EQ(w.wr_id, 101u + i);
            EXPECT_EQ(w.status, IBV_WC_SUCCESS) << WcStr(w);
            EXPECT_EQ(w.opcode, IBV_WC_RECV);
            EXPECT_EQ(w.byte_len, len[i]);
            EXPECT_EQ(w.qp_num, c.b->qp_num);
            EXPECT_EQ(w.src_qp, c.a->qp_num);
            uint8_t* at = rcv->p((i + 1) * kRecv);
            EXPECT_EQ(FirstDiff(msg->p(i * kRecv), at, len[i]), -1) << "payload";
            EXPECT_EQ(std::count(at + len[i], at + kRecv, 0), static_cast<long>(kRecv - len[i]))
                << "bytes past the SEND's end were written";
        }
        EXPECT_TRUE(Drain(this->b_.rcq, 100).empty()) << "a receive completed twice";
        EXPECT_EQ(this->DroppedAtLeast(dropped0 + 1), dropped0 + 1) << "uc_dropped";
        EXPECT_EQ(QpState(c.a), IBV_QPS_RTS);
        EXPECT_EQ(QpState(c.b), IBV_QPS_RTS);
        if (k.wait) {
            std::this_thread::sleep_for(milliseconds(50));
            EXPECT_EQ(HwCounter(this->a_.name, "placed_sends") - placed0, static_cast<long>(kSmall))
                << "the SENDs behind the dropped one were not placed";
        }
        ASSERT_FALSE(this->HasFailure());
    }
}

// An RC QP connected to a UC QP by mistake reads nothing through it, even
// with REMOTE_READ in the UC QP's access: a UC responder serves no READ, so
// the requester's READ times out. (The UC QP's export grants the peer no
// remote access: a small READ would be pulled straight from the MR.)
TYPED_TEST(Uc, RcReadFromUcQpIsNotServed) {
    if (const char* why = this->NotPlaced()) {
        GTEST_SKIP() << why;
    }
    RcQpSpec qs;
    qs.send_cq = this->a_.scq;
    qs.recv_cq = this->a_.rcq;
    ibv_qp* rc = MakeRcQp(this->a_.pd, qs);
    ASSERT_NE(rc, nullptr) << std::strerror(errno);
    this->qps_.push_back(rc);
    ibv_qp* uc = this->UcQp(this->b_);
    ASSERT_NE(uc, nullptr);
    ASSERT_EQ(
        this->UcToRts(uc, this->a_, rc->qp_num, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ),
        0)
        << std::strerror(errno);
    RtrSpec r;
    r.dest_qpn = uc->qp_num;
    r.dgid = this->b_.gid;
    r.dlid = this->b_.lid;
    RtsSpec rts;
    rts.timeout = 10;  // 4 ms
    rts.retry_cnt = 1;
    ASSERT_EQ(QpToInit(rc, IBV_ACCESS_REMOTE_WRITE), 0);
    ASSERT_EQ(QpToRtr(rc, r), 0);
    ASSERT_EQ(QpToRts(rc, rts), 0);
    Buf* dst = this->Reg(this->a_, 64, kLocal);
    Buf* src = this->Reg(this->b_, 64, kRemoteAll);
    ASSERT_FALSE(this->HasFailure());
    std::memset(src->p(), 0x6b, 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // exports arrive
    const long long pulled0 = HwCounter(this->a_.name, "pulled_reads");
    ASSERT_EQ(Post(rc, ReadWr(50, dst->sge(0, 64), src)), 0);
    std::vector<ibv_wc> wc = PollCq(this->a_.scq, 1, 10000);
    ASSERT_EQ(wc.size(), 1u) << "the READ neither completed nor failed in 10 s";
    EXPECT_NE(wc[0].status, IBV_WC_SUCCESS) << "a UC QP served a READ";
    EXPECT_EQ(std::count(dst->p(), dst->p(64), 0x6b), 0) << "the READ's data arrived";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(HwCounter(this->a_.name, "pulled_reads"), pulled0) << "a READ was pulled";
}

// The RC-only attributes are not UC's (ib_modify_qp_is_ok's table).
TYPED_TEST(Uc, RcAttributesRefused) {
    ibv_qp* qp = this->UcQp(this->a_);
    ASSERT_NE(qp, nullptr);
    ASSERT_EQ(QpToInit(qp, IBV_ACCESS_REMOTE_WRITE), 0);
    RtrSpec r;
    r.dest_qpn = qp->qp_num;
    r.dgid = this->b_.gid;
    r.dlid = this->b_.lid;
    EXPECT_NE(QpToRtr(qp, r), 0) << "RTR with max_dest_rd_atomic and min_rnr_timer";
    EXPECT_EQ(QpState(qp), IBV_QPS_INIT);
}

}  // namespace
}  // namespace ntv
