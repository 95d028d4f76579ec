// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The data path between two devices (fixture DataPath, verbs_datapath.hpp):
// SEND/RECV, WRITE, READ and atomics of every size, gather/scatter lists,
// SRQ receives, unsignalled work requests and their order, completion
// events.

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

// =====================================================================
// Data path: requester on NTRDMA_IBDEV, responder on NTRDMA_PEER_IBDEV.
// =====================================================================

// ---- SEND / RECV ----

TEST_F(DataPath, SendRecvSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    uint64_t id = 10;
    for (uint32_t len : {1u, 4096u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(a_, len, kLocal);
        Buf* dst = Reg(b_, len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len);
        std::memset(dst->p(), 0xEE, len + 64);
        ASSERT_EQ(PostRecv(c.b, id, {dst->sge(0, len + 64)}), 0);
        Wr w = SendWr(id + 1, src->sge(0, len));
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u) << "no requester completion";
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
        EXPECT_EQ(s[0].wr_id, id + 1);
        EXPECT_EQ(s[0].qp_num, c.a->qp_num);
        std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
        ASSERT_EQ(r.size(), 1u) << "no responder completion";
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(r[0].wr_id, id);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(r[0].qp_num, c.b->qp_num);
        EXPECT_EQ(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
        if (IsNtrdma(b_.ctx)) {  // IB defines src_qp for UD only; ntrdma gives it for RC too
            EXPECT_EQ(r[0].src_qp, c.a->qp_num);
        }
        EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
        for (size_t i = len; i < len + 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "written past the message at " << i;
        }
        id += 2;
    }
}

// The receiver polls its last receive and ends its QP at once (destroy, or
// ERR), as ping-pong programs do at their end, while more traffic keeps
// its side's receive pass busy: the sender's SEND still completes with
// success. Its ACK was owed when the receive completed.
TEST_F(DataPath, SendSucceedsWhenTheReceiverEndsRightAfterItsReceive) {
    const uint32_t len = 64, bulk = 65536;
    const int n_bulk = 8;
    Conn busy = Connect();
    ConnSpec own_cq;
    own_cq.rcq_b = CreateCq(b_, 4);
    ASSERT_NE(own_cq.rcq_b, nullptr);
    Buf* src = Reg(a_, bulk, kLocal);
    Buf* dst = Reg(b_, bulk * n_bulk, kLocal);
    ASSERT_FALSE(HasFailure());
    for (int round = 0; round < 30; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Conn c = Connect(own_cq);
        ASSERT_FALSE(HasFailure());
        ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, len)}), 0);
        for (int i = 0; i < n_bulk; i++) {
            ASSERT_EQ(PostRecv(busy.b, 10 + i, {dst->sge(i * bulk, bulk)}), 0);
        }
        ASSERT_EQ(Post(c.a, SendWr(2, src->sge(0, len))), 0);
        for (int i = 0; i < n_bulk; i++) {
            ASSERT_EQ(Post(busy.a, SendWr(10 + i, src->sge(0, bulk))), 0);
        }
        std::vector<ibv_wc> r = PollCq(own_cq.rcq_b, 1);
        ASSERT_EQ(r.size(), 1u);
        ASSERT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        std::erase(qps_, c.b);
        if (round % 2) {
            ibv_qp_attr at{};
            at.qp_state = IBV_QPS_ERR;
            EXPECT_EQ(ibv_modify_qp(c.b, &at, IBV_QP_STATE), 0);
        }
        EXPECT_EQ(ibv_destroy_qp(c.b), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1 + n_bulk, 60000);
        ASSERT_EQ(s.size(), 1u + n_bulk) << "requester completions missing";
        for (const ibv_wc& wc : s) {
            EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
        }
        ASSERT_EQ(PollCq(b_.rcq, n_bulk).size(), static_cast<size_t>(n_bulk));
        std::erase(qps_, c.a);
        EXPECT_EQ(ibv_destroy_qp(c.a), 0);
    }
}

TEST_F(DataPath, SendWithImm) {
    Conn c;
    Buf *src, *dst;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &src, 100, &dst, 128, kLocal));
    Fill(src->p(), 100, 7);
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 128)}), 0);
    Wr w;
    w.op = IBV_WR_SEND_WITH_IMM;
    w.imm = htonl(0x12345678);
    w.sge = {src->sge(0, 100)};
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
    EXPECT_NE(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(r[0].imm_data, htonl(0x12345678));
    EXPECT_EQ(r[0].byte_len, 100u);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 100), -1);
}

// ---- RDMA WRITE ----

TEST_F(DataPath, RdmaWriteSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {1u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(a_, len, kLocal);
        Buf* dst = Reg(b_, len + 128, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len + 1);
        std::memset(dst->p(), 0xEE, len + 128);
        // One receive posted: a WRITE must not consume it.
        Buf* rbuf = Reg(b_, 64, kLocal);
        ASSERT_FALSE(HasFailure());
        ASSERT_EQ(PostRecv(c.b, 77, {rbuf->sge(0, 64)}), 0);
        Wr w = WriteWr(len, src->sge(0, len), dst, 64);
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(s[0].wr_id, len);
        EXPECT_EQ(FirstDiff(src->p(), dst->p(64), len), -1);
        for (size_t i = 0; i < 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "written before the target at " << i;
            ASSERT_EQ(dst->p(64 + len)[i], 0xEE) << "written past the target at " << i;
        }
        EXPECT_EQ(Drain(b_.rcq, 50).size(), 0u) << "a WRITE consumed a receive";
        // Leave the receive for the next round; flush it at the end.
    }
    ASSERT_EQ(QpToState(c.b, IBV_QPS_ERR), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 3);
    EXPECT_EQ(r.size(), 3u);
    for (auto& wc : r) {
        EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << "a receive was consumed: " << WcStr(wc);
    }
}

TEST_F(DataPath, RdmaWriteWithImm) {
    Conn c = Connect();
    const uint32_t len = 8192;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    Buf* rbuf = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len, 3);
    std::memset(rbuf->p(), 0xEE, 64);
    ASSERT_EQ(PostRecv(c.b, 5, {rbuf->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c.b, 6, {rbuf->sge(0, 64)}), 0);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm = htonl(0xCAFEF00D);
    w.sge = {src->sge(0, len)};
    w.raddr = dst->addr();
    w.rkey = dst->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u) << "WRITE_WITH_IMM consumed no receive";
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[0].wr_id, 5u);
    EXPECT_EQ(r[0].byte_len, len);
    EXPECT_NE(r[0].wc_flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(r[0].imm_data, htonl(0xCAFEF00D));
    EXPECT_EQ(r[0].qp_num, c.b->qp_num);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
    for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(rbuf->p()[i], 0xEE) << "the receive buffer was written";
    }
    EXPECT_EQ(Drain(b_.rcq, 50).size(), 0u) << "more than one receive consumed";
}

// ---- RDMA READ ----

TEST_F(DataPath, RdmaReadSizes) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {8u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(b_, len, kRemoteAll);
        Buf* dst = Reg(a_, len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len + 2);
        std::memset(dst->p(), 0xEE, len + 64);
        Wr w = ReadWr(len, dst->sge(0, len), src);
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(s[0].wr_id, len);
        EXPECT_EQ(FirstDiff(src->p(), dst->p(), len), -1);
        for (size_t i = len; i < len + 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "read past the local SGE at " << i;
        }
    }
}

// ---- atomics ----

TEST_F(DataPath, Atomics) {
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(a_.dev.atomic_cap, IBV_ATOMIC_HCA);
    } else if (a_.dev.atomic_cap == IBV_ATOMIC_NONE) {
        GTEST_SKIP() << a_.name << " has no atomics (atomic_cap NONE)";
    }
    Conn c = Connect();
    Buf* tgt = Reg(b_, 64, kRemoteAll);
    Buf* res = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    uint64_t* t = reinterpret_cast<uint64_t*>(tgt->p(8));
    uint64_t* r = reinterpret_cast<uint64_t*>(res->p(0));
    auto run = [&](Wr w, ibv_wc_opcode op) {
        w.sge = {res->sge(0, 8)};
        w.raddr = tgt->addr(8);
        w.rkey = tgt->mr->rkey;
        *r = 0xDEADDEADDEADDEADull;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, op);
    };
    // Compare and swap, matching.
    *t = 0x1122334455667788ull;
    Wr cas;
    cas.op = IBV_WR_ATOMIC_CMP_AND_SWP;
    cas.compare_add = 0x1122334455667788ull;
    cas.swap = 0xA5A5A5A5F0F0F0F0ull;
    ASSERT_NO_FATAL_FAILURE(run(cas, IBV_WC_COMP_SWAP));
    EXPECT_EQ(*r, 0x1122334455667788ull) << "original value not returned";
    EXPECT_EQ(*t, 0xA5A5A5A5F0F0F0F0ull) << "matching CAS did not swap";
    // Compare and swap, not matching: target unchanged, current value back.
    cas.compare_add = 0x1ull;
    cas.swap = 0x2ull;
    ASSERT_NO_FATAL_FAILURE(run(cas, IBV_WC_COMP_SWAP));
    EXPECT_EQ(*r, 0xA5A5A5A5F0F0F0F0ull);
    EXPECT_EQ(*t, 0xA5A5A5A5F0F0F0F0ull) << "mismatching CAS swapped";
    // Fetch and add (with a carry across 32 bits).
    *t = 0x00000001FFFFFFFFull;
    Wr faa;
    faa.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
    faa.compare_add = 0x10;
    ASSERT_NO_FATAL_FAILURE(run(faa, IBV_WC_FETCH_ADD));
    EXPECT_EQ(*r, 0x00000001FFFFFFFFull);
    EXPECT_EQ(*t, 0x000000020000000Full);
    // Neighbours untouched.
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p(0)), 0u);
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p(16)), 0u);
}

// ---- inline ----

TEST_F(DataPath, InlineSendAndWrite) {
    ConnSpec cs;
    cs.inline_data = 256;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(c.cap_a.max_inline_data, 256u);
    }
    const uint32_t max = std::min<uint32_t>(c.cap_a.max_inline_data, 256);
    ASSERT_GE(max, 64u);
    Buf* dst = Reg(b_, 512, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    for (uint32_t len : {64u, max}) {
        SCOPED_TRACE("len " + std::to_string(len));
        // Not registered: inline data needs no lkey.
        std::vector<uint8_t> src(len), want(len);
        Fill(src.data(), len, len + 9);
        want = src;
        std::memset(dst->p(), 0, 512);
        ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 512)}), 0);
        Wr w;
        w.flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
        w.sge = {ibv_sge{reinterpret_cast<uintptr_t>(src.data()), len, 0}};
        ASSERT_EQ(Post(c.a, w), 0);
        std::memset(src.data(), 0x11, len);  // the WR owns a copy now
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(FirstDiff(want.data(), dst->p(), len), -1) << "inline SEND";

        Fill(src.data(), len, len + 10);
        want = src;
        w.op = IBV_WR_RDMA_WRITE;
        w.raddr = dst->addr(256);
        w.rkey = dst->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::memset(src.data(), 0x22, len);
        s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(FirstDiff(want.data(), dst->p(256), len), -1) << "inline WRITE";
    }
}

// ---- scatter / gather ----

class MultiSge : public DataPath {
  protected:
    // n SGEs of different sizes over two MRs (alternating) on side s.
    std::vector<ibv_sge> Sges(Side& s, const std::vector<uint32_t>& sizes, int access,
                              std::vector<Buf*>* bufs) {
        size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
        Buf* m0 = Reg(s, total + 64 * sizes.size(), access);
        Buf* m1 = Reg(s, total + 64 * sizes.size(), access);
        bufs->assign({m0, m1});
        std::vector<ibv_sge> out;
        if (!m0->mr || !m1->mr) {
            return out;
        }
        size_t off = 8;
        for (size_t i = 0; i < sizes.size(); i++) {
            out.push_back((i % 2 ? m1 : m0)->sge(off, sizes[i]));
            off += sizes[i] + 40;  // gaps that must stay untouched
        }
        return out;
    }

    static std::vector<uint8_t> Gather(const std::vector<ibv_sge>& sg) {
        std::vector<uint8_t> out;
        for (const ibv_sge& s : sg) {
            auto* p = reinterpret_cast<const uint8_t*>(s.addr);
            out.insert(out.end(), p, p + s.length);
        }
        return out;
    }

    static void FillSges(const std::vector<ibv_sge>& sg, uint32_t seed) {
        for (const ibv_sge& s : sg) {
            Fill(reinterpret_cast<uint8_t*>(s.addr), s.length, seed++);
        }
    }

    uint32_t N() { return static_cast<uint32_t>(std::min({a_.dev.max_sge, b_.dev.max_sge, 16})); }
};

TEST_F(MultiSge, SendGatherRecvScatter) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> ssz, rsz;
    for (uint32_t i = 0; i < n; i++) {
        ssz.push_back(1 + i * 97);
    }
    size_t total = std::accumulate(ssz.begin(), ssz.end(), size_t{0});
    for (uint32_t i = 0; i < n; i++) {  // other sizes, same total
        rsz.push_back(static_cast<uint32_t>(i + 1 < n ? total / n - 7 + i : 0));
    }
    rsz.back() = static_cast<uint32_t>(total - std::accumulate(rsz.begin(), rsz.end() - 1, 0u));
    std::vector<Buf*> sb, rb;
    std::vector<ibv_sge> s = Sges(a_, ssz, kLocal, &sb);
    std::vector<ibv_sge> r = Sges(b_, rsz, kLocal, &rb);
    ASSERT_FALSE(HasFailure());
    FillSges(s, 100);
    std::vector<uint8_t> r0 = rb[0]->mem, r1 = rb[1]->mem;
    ASSERT_EQ(PostRecv(c.b, 1, r), 0);
    Wr w;
    w.sge = s;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    std::vector<ibv_wc> rw = PollCq(b_.rcq, 1);
    ASSERT_EQ(rw.size(), 1u);
    EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS) << WcStr(rw[0]);
    EXPECT_EQ(rw[0].byte_len, total);
    EXPECT_TRUE(Gather(s) == Gather(r)) << "scattered data differs";
    // The gaps between the receive SGEs are untouched.
    std::vector<uint8_t> got = Gather(r);
    for (const ibv_sge& g : r) {
        std::memset(reinterpret_cast<void*>(g.addr), 0, g.length);
    }
    EXPECT_TRUE(rb[0]->mem == r0 && rb[1]->mem == r1) << "written outside the SGEs";
}

TEST_F(MultiSge, WriteGather) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> ssz;
    for (uint32_t i = 0; i < n; i++) {
        ssz.push_back(4096 - i * 200 + (i % 3));
    }
    size_t total = std::accumulate(ssz.begin(), ssz.end(), size_t{0});
    std::vector<Buf*> sb;
    std::vector<ibv_sge> s = Sges(a_, ssz, kLocal, &sb);
    Buf* dst = Reg(b_, total + 16, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    FillSges(s, 200);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.sge = s;
    w.raddr = dst->addr(8);
    w.rkey = dst->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    std::vector<uint8_t> want = Gather(s);
    EXPECT_EQ(FirstDiff(want.data(), dst->p(8), total), -1);
    EXPECT_EQ(dst->p()[7], 0);
    EXPECT_EQ(dst->p()[8 + total], 0);
}

TEST_F(MultiSge, ReadScatter) {
    const uint32_t n = N();
    ConnSpec cs;
    cs.sge = n;
    Conn c = Connect(cs);
    std::vector<uint32_t> dsz;
    for (uint32_t i = 0; i < n; i++) {
        dsz.push_back(1 + i * 311);
    }
    size_t total = std::accumulate(dsz.begin(), dsz.end(), size_t{0});
    std::vector<Buf*> db;
    std::vector<ibv_sge> d = Sges(a_, dsz, kLocal, &db);
    Buf* src = Reg(b_, total, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), total, 300);
    std::vector<uint8_t> d0 = db[0]->mem, d1 = db[1]->mem;
    Wr w;
    w.op = IBV_WR_RDMA_READ;
    w.sge = d;
    w.raddr = src->addr();
    w.rkey = src->mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    std::vector<ibv_wc> sw = PollCq(a_.scq, 1);
    ASSERT_EQ(sw.size(), 1u);
    EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS) << WcStr(sw[0]);
    EXPECT_EQ(sw[0].opcode, IBV_WC_RDMA_READ);
    std::vector<uint8_t> got = Gather(d);
    EXPECT_EQ(FirstDiff(got.data(), src->p(), total), -1);
    for (const ibv_sge& g : d) {
        std::memset(reinterpret_cast<void*>(g.addr), 0, g.length);
    }
    EXPECT_TRUE(db[0]->mem == d0 && db[1]->mem == d1) << "written outside the SGEs";
}

// ---- SRQ ----

TEST_F(DataPath, SrqReceivesInOrder) {
    Conn c;
    ibv_srq* srq = nullptr;
    ASSERT_NO_FATAL_FAILURE(ConnectOnSrq(&c, &srq));
    const int n = 8;
    Buf* src = Reg(a_, 256 * n, kLocal);
    Buf* dst = Reg(b_, 256 * n, kLocal);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(c.b->srq, srq);
    Fill(src->p(), 256 * n, 400);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(PostSrqRecv(srq, 1000 + i, {dst->sge(256 * i, 256)}), 0);
    }
    for (int i = 0; i < n; i++) {
        Wr w = SendWr(i, src->sge(256 * i, 100 + i));
        ASSERT_EQ(Post(c.a, w), 0);
    }
    std::vector<ibv_wc> sw = PollCq(a_.scq, n);
    ASSERT_EQ(sw.size(), static_cast<size_t>(n));
    std::vector<ibv_wc> rw = PollCq(b_.rcq, n);
    ASSERT_EQ(rw.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(sw[i].status, IBV_WC_SUCCESS) << WcStr(sw[i]);
        EXPECT_EQ(sw[i].wr_id, static_cast<uint64_t>(i));
        EXPECT_EQ(rw[i].status, IBV_WC_SUCCESS) << WcStr(rw[i]);
        EXPECT_EQ(rw[i].wr_id, 1000u + i) << "SRQ receives out of order";
        EXPECT_EQ(rw[i].byte_len, 100u + i);
        EXPECT_EQ(rw[i].qp_num, c.b->qp_num);
        EXPECT_EQ(FirstDiff(src->p(256 * i), dst->p(256 * i), 100 + i), -1) << "message " << i;
    }
}

// ---- unsignalled work requests and ordering ----

// N unsignalled WRITEs (a large one, then small ones over its start), then a
// signalled SEND: one requester completion, and when the receive completes
// every WRITE is visible, in order (old NTRDMA defect 13: an unsignalled
// WRITE fast path overtook earlier WRs).
TEST_F(DataPath, UnsignalledWritesThenSignalledSend) {
    Conn c = Connect();  // sq_sig_all = 0
    const size_t big = 1 << 20, piece = 4096;
    const int npieces = 16;
    Buf* src = Reg(a_, big + piece * npieces, kLocal);
    Buf* dst = Reg(b_, big, kRemoteAll);
    Buf* msg = Reg(a_, 16, kLocal);
    Buf* rbuf = Reg(b_, 16, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), big + piece * npieces, 500);
    ASSERT_EQ(PostRecv(c.b, 9, {rbuf->sge(0, 16)}), 0);
    std::vector<Wr> ws;
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.flags = 0;
    w.rkey = dst->mr->rkey;
    w.wr_id = 100;
    w.sge = {src->sge(0, big)};
    w.raddr = dst->addr();
    ws.push_back(w);
    for (int i = 0; i < npieces; i++) {
        w.wr_id = 101 + i;
        w.sge = {src->sge(big + piece * i, piece)};
        w.raddr = dst->addr(piece * i);
        ws.push_back(w);
    }
    // Posted one by one, as an application does.
    for (const Wr& x : ws) {
        ASSERT_EQ(Post(c.a, x), 0);
    }
    Wr send = SendWr(200, msg->sge(0, 16));
    ASSERT_EQ(Post(c.a, send), 0);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    // Visible now, without waiting further.
    std::vector<uint8_t> want(src->p(), src->p(big));
    for (int i = 0; i < npieces; i++) {
        std::memcpy(want.data() + piece * i, src->p(big + piece * i), piece);
    }
    long d = FirstDiff(want.data(), dst->p(), big);
    EXPECT_EQ(d, -1) << "at the SEND's receive, WRITE data "
                     << (d >= 0 && d < static_cast<long>(piece * npieces)
                             ? "of a later small WRITE was overwritten by the earlier large one"
                             : "is missing");
    std::vector<ibv_wc> s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].wr_id, 200u) << "an unsignalled WR completed";
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(Drain(a_.scq, 200).size(), 0u) << "more than one requester completion";
}

// Defect 13 from the requester's side: a large signalled WRITE, unsignalled
// small WRITEs over its start, then a READ of the region returns the final
// bytes, and the two completions come in posting order.
TEST_F(DataPath, UnsignalledWritesLandInPostingOrder) {
    Conn c = Connect();
    const size_t big = 256 * 1024, piece = 1024;
    const int npieces = 32;
    Buf* src = Reg(a_, big + piece * npieces, kLocal);
    Buf* back = Reg(a_, big, kLocal);
    Buf* dst = Reg(b_, big, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), big + piece * npieces, 600);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.rkey = dst->mr->rkey;
    w.wr_id = 1;
    w.sge = {src->sge(0, big)};
    w.raddr = dst->addr();
    ASSERT_EQ(Post(c.a, w), 0);
    w.flags = 0;
    for (int i = 0; i < npieces; i++) {
        w.wr_id = 10 + i;
        w.sge = {src->sge(big + piece * i, piece)};
        w.raddr = dst->addr(piece * i);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    Wr rd = ReadWr(2, back->sge(0, big), dst);
    ASSERT_EQ(Post(c.a, rd), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].wr_id, 1u);
    EXPECT_EQ(s[1].wr_id, 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    std::vector<uint8_t> want(src->p(), src->p(big));
    for (int i = 0; i < npieces; i++) {
        std::memcpy(want.data() + piece * i, src->p(big + piece * i), piece);
    }
    EXPECT_EQ(FirstDiff(want.data(), back->p(), big), -1) << "READ saw WRITEs out of order";
    EXPECT_EQ(FirstDiff(want.data(), dst->p(), big), -1) << "target bytes out of order";
}

// ---- completion events ----

// Wait for a completion event on ch within ms; acks it. True if one came.
bool WaitCqEvent(ibv_comp_channel* ch, ibv_cq* cq, int ms) {
    pollfd pfd{ch->fd, POLLIN, 0};
    if (poll(&pfd, 1, ms) != 1) {
        return false;
    }
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) {
        return false;
    }
    EXPECT_EQ(ev_cq, cq);
    ibv_ack_cq_events(ev_cq, 1);
    return true;
}

class Events : public DataPath {
  protected:
    void Prepare() {
        ch_ = CreateChannel(b_);
        ASSERT_NE(ch_, nullptr);
        rcq_ = CreateCq(b_, 16, ch_);
        ASSERT_NE(rcq_, nullptr);
        ConnSpec cs;
        cs.rcq_b = rcq_;
        c_ = Connect(cs);
        msg_ = Reg(a_, 8, kLocal);
        rbuf_ = Reg(b_, 8 * 8, kLocal);
        ASSERT_FALSE(HasFailure());
        for (int i = 0; i < 8; i++) {
            ASSERT_EQ(PostRecv(c_.b, i, {rbuf_->sge(8 * i, 8)}), 0);
        }
    }

    // A SEND; waits for its receive completion (polled, not by event).
    void Send(unsigned flags) {
        Wr w;
        w.flags = IBV_SEND_SIGNALED | flags;
        w.sge = {msg_->sge(0, 8)};
        ASSERT_EQ(Post(c_.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        std::vector<ibv_wc> r = PollCq(rcq_, 1);
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    }

    ibv_comp_channel* ch_ = nullptr;
    ibv_cq* rcq_ = nullptr;
    Conn c_;
    Buf* msg_ = nullptr;
    Buf* rbuf_ = nullptr;
};

// Armed for solicited completions only: an unsolicited SEND raises no
// event, a solicited one does.
TEST_F(Events, SolicitedOnlyEvent) {
    ASSERT_NO_FATAL_FAILURE(Prepare());
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 1), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 300)) << "event for an unsolicited completion";
    ASSERT_NO_FATAL_FAILURE(Send(IBV_SEND_SOLICITED));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "no event for a solicited completion";
}

// The old NTRDMA's req_notify_cq ignored its flags (defect 8): next
// completion (0) must fire on an unsolicited SEND, solicited-only must not,
// and an unarmed CQ raises nothing.
TEST_F(Events, NotifyFlagsHonoured) {
    ASSERT_NO_FATAL_FAILURE(Prepare());
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 200)) << "event on an unarmed CQ";
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 0), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "armed for any completion: no event";
    ASSERT_EQ(ibv_req_notify_cq(rcq_, 1), 0);
    ASSERT_NO_FATAL_FAILURE(Send(0));
    EXPECT_FALSE(WaitCqEvent(ch_, rcq_, 300)) << "armed solicited-only: unsolicited raised one";
    ASSERT_NO_FATAL_FAILURE(Send(IBV_SEND_SOLICITED));
    EXPECT_TRUE(WaitCqEvent(ch_, rcq_, 5000)) << "armed solicited-only: solicited raised none";
}

}  // namespace
