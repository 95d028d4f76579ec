// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Same-device loopback (rdma/ntrdma_lo.c): two QPs of ONE ntrdma device,
// each naming our own GID as its destination, talk as on every HCA (the
// rdma-core suite connects its QPs this way), without crossing the NTB.
// Both ends are contexts of NTRDMA_IBDEV in this process (as two processes
// would hold them); runs in both topologies.
#include <arpa/inet.h>

#include <thread>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

class Loopback : public SameDevice {
  protected:
    void SetUp() override {
        SameDevice::SetUp();
        ASSERT_EQ(std::memcmp(&a_.gid, &b_.gid, sizeof(a_.gid)), 0);
    }

    // A counter of @dev after the core's cache of it expired.
    static long long Counter(const std::string& dev, const char* name) {
        std::this_thread::sleep_for(milliseconds(50));
        return HwCounter(dev, name);
    }

    // SEND @len bytes from a fresh buffer of a_ into one of @dst_side on
    // @c (a receive posted first, unless @late_recv_ms: then that long
    // after the SEND); true when both ends completed and the bytes match.
    void SendChecked(const Conn& c, Side& dst_side, uint32_t len, int late_recv_ms = 0) {
        Buf* src = Reg(a_, len, kLocal);
        Buf* dst = Reg(dst_side, len, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len);
        if (!late_recv_ms) {
            ASSERT_EQ(PostRecv(c.b, 9, {dst->sge(0, len)}), 0);
        }
        Wr send;
        send.sge = {src->sge(0, len)};
        ASSERT_EQ(Post(c.a, send), 0);
        if (late_recv_ms) {
            std::this_thread::sleep_for(milliseconds(late_recv_ms));
            EXPECT_TRUE(PollCq(a_.scq, 1, 10).empty()) << "completed with no receive posted";
            ASSERT_EQ(PostRecv(c.b, 9, {dst->sge(0, len)}), 0);
        }
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        wc = PollCq(dst_side.rcq, 1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        EXPECT_EQ(wc[0].byte_len, len);
        EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
    }

    static std::string PeerDevice() {
        const char* peer = std::getenv("NTRDMA_PEER_IBDEV");
        return peer && *peer ? peer : "";
    }
};

// Every opcode between two QPs of the device, in order, content checked;
// nothing crosses the NTB (the peer device, where there is one in this
// guest, receives no segment) and nothing is placed through the window.
TEST_F(Loopback, EveryOpcodeWithinOneDevice) {
    const size_t big = 1 << 20;
    Conn c = Connect();
    Buf* src = Reg(a_, big, kRemoteAll);
    Buf* dst = Reg(b_, big, kRemoteAll);
    Buf* back = Reg(a_, big, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), big, 7);
    const std::string peer = PeerDevice();
    const long long peer_rx0 = peer.empty() ? 0 : Counter(peer, "rx_segments");
    const long long rx0 = Counter(a_.name, "rx_segments");
    const long long placed0 = Counter(a_.name, "placed_writes");
    ASSERT_GE(rx0, 0) << "no rx_segments counter on " << a_.name;
    ASSERT_GE(placed0, 0) << "no placed_writes counter on " << a_.name;
    ASSERT_GE(peer_rx0, 0) << "no rx_segments counter on " << peer;

    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 200000)}), 0);
    Wr send;
    send.sge = {src->sge(0, 200000)};  // several segments
    ASSERT_EQ(Post(c.a, send), 0);
    Wr write = WriteWr(2, src->sge(0, big), dst);
    ASSERT_EQ(Post(c.a, write), 0);
    Wr read = WriteWr(3, back->sge(0, big), dst);
    read.op = IBV_WR_RDMA_READ;
    ASSERT_EQ(Post(c.a, read), 0);
    std::vector<ibv_wc> wc = PollCq(a_.scq, 3, 20000);
    ASSERT_EQ(wc.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS) << WcStr(wc[i]);
        EXPECT_EQ(wc[i].wr_id, i + 1);
    }
    wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    EXPECT_EQ(wc[0].byte_len, 200000u);
    EXPECT_EQ(wc[0].qp_num, c.b->qp_num);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), big), -1) << "WRITE";
    EXPECT_EQ(FirstDiff(src->p(), back->p(), big), -1) << "READ";

    // atomics on the first 8 bytes of dst
    uint64_t v = 41;
    std::memcpy(dst->p(), &v, 8);
    Wr fadd = WriteWr(4, back->sge(0, 8), dst);
    fadd.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
    fadd.compare_add = 1;
    Wr cas = WriteWr(5, back->sge(8, 8), dst);
    cas.op = IBV_WR_ATOMIC_CMP_AND_SWP;
    cas.compare_add = 42;
    cas.swap = 99;
    ASSERT_EQ(PostChain(c.a, {fadd, cas}), 0);
    wc = PollCq(a_.scq, 2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS) << WcStr(wc[1]);
    uint64_t got[2];
    std::memcpy(got, back->p(), 16);
    EXPECT_EQ(got[0], 41u) << "FETCH_AND_ADD's old value";
    EXPECT_EQ(got[1], 42u) << "CMP_AND_SWP's old value";
    std::memcpy(&v, dst->p(), 8);
    EXPECT_EQ(v, 99u);

    // WRITE_WITH_IMM takes a receive and carries the immediate
    ASSERT_EQ(PostRecv(c.b, 6, {dst->sge(0, 8)}), 0);
    Wr imm = WriteWr(6, src->sge(0, 4096), dst, 4096);
    imm.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    imm.imm = htonl(0x1234);
    ASSERT_EQ(Post(c.a, imm), 0);
    wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc[0].imm_data), 0x1234u);
    ASSERT_EQ(PollCq(a_.scq, 1).size(), 1u);

    EXPECT_GT(Counter(a_.name, "rx_segments"), rx0 + 16) << "segments delivered by the loopback";
    EXPECT_EQ(Counter(a_.name, "placed_writes"), placed0) << "a loopback WRITE used the window";
    if (!peer.empty()) {
        EXPECT_EQ(Counter(peer, "rx_segments"), peer_rx0) << "loopback traffic crossed the NTB";
    }
}

// Both ends on one context: its PD and CQs serve both QPs.
class LoopbackOneContext : public Loopback {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(Open(DeviceName(), &a_));
        b_ = a_;
    }
    void TearDown() override {
        b_ = Side{};  // closed once, as a_
        Loopback::TearDown();
    }
};

// Two QPs of one context (one process) work the same way.
TEST_F(LoopbackOneContext, SendBetweenTwoQps) { SendChecked(Connect(), a_, 4096); }

// The responder's checks apply: a bad rkey fails the WRITE with
// REM_ACCESS_ERR and puts both QPs in ERR.
TEST_F(Loopback, BadRkeyIsARemoteAccessError) {
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &src, 64, &dst, 64, kRemoteAll));
    Wr w = WriteWr(1, src->sge(0, 64), dst);
    w.rkey ^= 0x80;  // another tag
    ASSERT_EQ(Post(c.a, w), 0);
    ExpectRequesterError(c, IBV_WC_REM_ACCESS_ERR, 1);
    EXPECT_TRUE(WaitQpState(c.b, IBV_QPS_ERR)) << "responder " << QpState(c.b);
}

// A SEND before its receive is posted waits (RNR) and then lands.
TEST_F(Loopback, RnrThenReceived) { SendChecked(Connect(), b_, 256, 100); }

// A peer QP that names a loopback QP of ours as its destination is told
// "no QP" (it never reaches the loopback QP, whatever QPN it claims).
TEST_F(Loopback, PeerSegmentsNeverReachALoopbackQp) {
    const std::string peer = PeerDevice();
    if (peer.empty()) {
        GTEST_SKIP() << "needs the peer device in this guest (loop topology)";
    }
    Conn c = Connect();
    Buf* dst = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 64)}), 0);

    Side p;
    ASSERT_NO_FATAL_FAILURE(Open(peer, &p));
    ibv_qp* pq = CreateQp(p);
    ASSERT_NE(pq, nullptr);
    Buf* src = Reg(p, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    RtrSpec r;
    r.dest_qpn = c.b->qp_num;
    r.dgid = a_.gid;  // the loopback device, across the NTB
    ASSERT_EQ(QpToInit(pq), 0);
    ASSERT_EQ(QpToRtr(pq, r), 0);
    RtsSpec rs;
    rs.retry_cnt = 1;
    ASSERT_EQ(QpToRts(pq, rs), 0);
    const long long naks0 = Counter(a_.name, "nak_no_qp_sent");
    Wr send;
    send.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(pq, send), 0);
    std::vector<ibv_wc> wc = PollCq(p.scq, 1, 15000);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << WcStr(wc[0]);
    EXPECT_GT(Counter(a_.name, "nak_no_qp_sent"), naks0) << "not answered as no QP";
    EXPECT_TRUE(PollCq(b_.rcq, 1, 100).empty()) << "the loopback QP took a peer's SEND";
    CloseSide(p);
}

}  // namespace
}  // namespace ntv
