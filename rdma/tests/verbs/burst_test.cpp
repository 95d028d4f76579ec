// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The data path at its limits and under load (fixture DataPath): exact
// limits, bursts, many outstanding READs, racing atomics, a chain that
// stops at a bad WR, many QPs at once, zero-length messages, QPs destroyed
// with work in flight, a user who scribbles on its ring indices.

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

// ---- limits ----

TEST_F(DataPath, LimitsHonouredExactly) {
    const uint32_t nsge = static_cast<uint32_t>(std::min(a_.dev.max_sge, 16));
    ConnSpec cs;
    cs.sge = nsge;
    cs.inline_data = 256;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    const uint32_t max_sge = c.cap_a.max_send_sge;
    const uint32_t max_inline = c.cap_a.max_inline_data;
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(max_sge, 16u);
        EXPECT_EQ(max_inline, 256u);
    }
    Buf* src = Reg(a_, 64 * (max_sge + 2) + max_inline + 1, kLocal);
    Buf* dst = Reg(b_, 64 * (max_sge + 2) + max_inline + 1, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w;
    for (uint32_t i = 0; i < max_sge + 1; i++) {
        w.sge.push_back(src->sge(64 * i, 64));
    }
    EXPECT_NE(Post(c.a, w), 0) << max_sge + 1 << " SGEs on a QP of " << max_sge;
    w.sge.pop_back();
    Wr in;
    in.flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    in.sge = {ibv_sge{src->addr(), max_inline + 1, 0}};
    EXPECT_NE(Post(c.a, in), 0) << max_inline + 1 << " inline bytes on a QP of " << max_inline;
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a refused WR completed";
    // Exactly at the limits works.
    Fill(src->p(), 64 * (max_sge + 2) + max_inline + 1, 12);
    ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(0, 64 * max_sge)}), 0);
    ASSERT_EQ(PostRecv(c.b, 2, {dst->sge(0, max_inline)}), 0);
    ASSERT_EQ(Post(c.a, w), 0);
    in.sge[0].length = max_inline;
    ASSERT_EQ(Post(c.a, in), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    std::vector<ibv_wc> r = PollCq(b_.rcq, 2);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].byte_len, 64 * max_sge);
    EXPECT_EQ(r[1].byte_len, max_inline);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), max_inline), -1);
}

// ---- bursts ----

// A burst deeper than one message at a time: 256 SENDs of 4 KiB posted
// back to back complete in order on both sides, each in its own receive.
TEST_F(DataPath, SendBurstInOrder) {
    const int n = 256;
    const uint32_t len = 4096;
    ConnSpec cs;
    cs.wr = n;
    Conn c = Connect(cs);
    Buf* src = Reg(a_, size_t{len} * n, kLocal);
    Buf* dst = Reg(b_, size_t{len} * n, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), size_t{len} * n, 700);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(PostRecv(c.b, i, {dst->sge(size_t{len} * i, len)}), 0) << i;
    }
    for (int i = 0; i < n; i++) {
        Wr w = SendWr(i, src->sge(size_t{len} * i, len));
        ASSERT_EQ(Post(c.a, w), 0) << i;
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    std::vector<ibv_wc> r = PollCq(b_.rcq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n));
    ASSERT_EQ(r.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        ASSERT_EQ(s[i].wr_id, static_cast<uint64_t>(i)) << "requester completions out of order";
        ASSERT_EQ(r[i].status, IBV_WC_SUCCESS) << WcStr(r[i]);
        ASSERT_EQ(r[i].wr_id, static_cast<uint64_t>(i)) << "receives out of order";
        ASSERT_EQ(r[i].byte_len, len);
    }
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), size_t{len} * n), -1);
}

// Several READs outstanding at once (up to max_rd_atomic, then queued):
// all complete, in posting order, each with its own data.
TEST_F(DataPath, ManyOutstandingReadsInOrder) {
    const int n = 24;
    const uint32_t len = 65536;
    Conn c = Connect();
    Buf* src = Reg(b_, size_t{len} * n, kRemoteAll);
    Buf* dst = Reg(a_, size_t{len} * n, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), size_t{len} * n, 800);
    std::vector<Wr> ws;
    for (int i = 0; i < n; i++) {
        Wr w;
        w.op = IBV_WR_RDMA_READ;
        w.wr_id = i;
        w.sge = {dst->sge(size_t{len} * (n - 1 - i), len)};  // reversed placement
        w.raddr = src->addr(size_t{len} * i);
        w.rkey = src->mr->rkey;
        ws.push_back(w);
    }
    ASSERT_EQ(PostChain(c.a, ws), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, static_cast<uint64_t>(i)) << "READ completions out of order";
        EXPECT_EQ(s[i].opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(FirstDiff(src->p(size_t{len} * i), dst->p(size_t{len} * (n - 1 - i)), len), -1)
            << "READ " << i;
    }
}

// Fetch-and-add from two QPs (on two connections) onto one counter,
// interleaved: every add lands once and every returned value is distinct.
TEST_F(DataPath, AtomicsFromTwoQpsAreAtomic) {
    if (IsNtrdma(a_.ctx)) {
        EXPECT_EQ(a_.dev.atomic_cap, IBV_ATOMIC_HCA);
    } else if (a_.dev.atomic_cap == IBV_ATOMIC_NONE) {
        GTEST_SKIP() << a_.name << " has no atomics (atomic_cap NONE)";
    }
    const int n = 64;  // per QP
    ConnSpec cs;
    cs.wr = n;
    Conn c1 = Connect(cs);
    Conn c2 = Connect(cs);
    Buf* tgt = Reg(b_, 8, kRemoteAll);
    Buf* res = Reg(a_, 8 * 2 * n, kLocal);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < n; i++) {
        for (int q = 0; q < 2; q++) {
            Wr w;
            w.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
            w.wr_id = q * n + i;
            w.sge = {res->sge(8 * (q * n + i), 8)};
            w.raddr = tgt->addr();
            w.rkey = tgt->mr->rkey;
            w.compare_add = 1;
            ASSERT_EQ(Post(q ? c2.a : c1.a, w), 0);
        }
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, 2 * n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(2 * n));
    for (const ibv_wc& wc : s) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(tgt->p()), static_cast<uint64_t>(2 * n)) << "adds lost";
    std::set<uint64_t> seen;
    for (int i = 0; i < 2 * n; i++) {
        seen.insert(reinterpret_cast<uint64_t*>(res->p())[i]);
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(2 * n)) << "two adds saw the same value";
    EXPECT_EQ(*seen.rbegin(), static_cast<uint64_t>(2 * n - 1));
}

// A chain whose k-th WR is invalid (more SGEs than the QP has) is refused
// there: ibv_post_send returns an error, bad_wr points at that WR, the WRs
// before it run and none from it on.
TEST_F(DataPath, PostSendChainStopsAtBadWr) {
    Conn c = Connect();
    ASSERT_FALSE(HasFailure());
    const uint32_t max_sge = c.cap_a.max_send_sge;
    Buf* src = Reg(a_, 64 * std::max(8u, max_sge + 1), kLocal);
    Buf* dst = Reg(b_, 64 * 8, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 900);
    std::vector<Wr> ws;
    for (int i = 0; i < 6; i++) {
        Wr w = WriteWr(i, src->sge(64 * i, 64), dst, 64 * i);
        ws.push_back(w);
    }
    ws[3].sge.clear();
    for (uint32_t i = 0; i < max_sge + 1; i++) {
        ws[3].sge.push_back(src->sge(64 * i, 1));
    }
    size_t nbad = 0;
    int rc = PostChain(c.a, ws, &nbad);
    EXPECT_NE(rc, 0) << "a chain with an invalid WR was accepted";
    EXPECT_EQ(nbad, 3u) << "bad_wr does not point at the invalid WR";
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, i);
    }
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a WR at or after the invalid one ran";
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64 * 3), -1);
    for (size_t i = 64 * 3; i < 64 * 8; i++) {
        ASSERT_EQ(dst->p()[i], 0) << "a WR at or after the invalid one wrote at " << i;
    }
}

// Odd addresses and lengths across page boundaries, on both ends: SEND,
// WRITE and READ each move exactly the bytes asked for.
TEST_F(DataPath, UnalignedAcrossPages) {
    Conn c = Connect();
    const uint32_t len = 3 * 4096 + 5;
    const size_t soff = 4093, doff = 1;
    Buf* src = Reg(a_, soff + len + 64, kLocal);
    Buf* back = Reg(a_, soff + len + 64, kLocal);
    Buf* dst = Reg(b_, doff + len + 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 1100);
    for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ}) {
        SCOPED_TRACE("opcode " + std::to_string(op));
        std::memset(dst->p(), 0xEE, dst->mem.size());
        if (op == IBV_WR_RDMA_READ) {
            Fill(dst->p(doff), len, 1101);
        }
        std::memset(back->p(), 0xEE, back->mem.size());
        if (op == IBV_WR_SEND) {
            ASSERT_EQ(PostRecv(c.b, 1, {dst->sge(doff, len)}), 0);
        }
        Wr w;
        w.op = op;
        w.sge = {op == IBV_WR_RDMA_READ ? back->sge(soff, len) : src->sge(soff, len)};
        w.raddr = dst->addr(doff);
        w.rkey = dst->mr->rkey;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
        if (op == IBV_WR_SEND) {
            std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
            ASSERT_EQ(r.size(), 1u);
            EXPECT_EQ(r[0].byte_len, len);
        }
        if (op == IBV_WR_RDMA_READ) {
            EXPECT_EQ(FirstDiff(dst->p(doff), back->p(soff), len), -1);
            EXPECT_EQ(back->p()[soff - 1], 0xEE);
            EXPECT_EQ(back->p()[soff + len], 0xEE);
        } else {
            EXPECT_EQ(FirstDiff(src->p(soff), dst->p(doff), len), -1);
            EXPECT_EQ(dst->p()[0], 0xEE);
            EXPECT_EQ(dst->p()[doff + len], 0xEE);
        }
    }
}

// Several connections at once, their SENDs interleaved, all into one
// responder CQ: every message reaches its own QP, in order per QP.
TEST_F(DataPath, ManyQpsInterleaved) {
    const int nq = 8, nm = 16;
    const uint32_t len = 2048;
    std::vector<Conn> cs;
    for (int q = 0; q < nq; q++) {
        cs.push_back(Connect());
    }
    Buf* src = Reg(a_, size_t{len} * nq * nm, kLocal);
    Buf* dst = Reg(b_, size_t{len} * nq * nm, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 1200);
    auto slot = [&](int q, int m) { return size_t{len} * (q * nm + m); };
    for (int q = 0; q < nq; q++) {
        for (int m = 0; m < nm; m++) {
            ASSERT_EQ(PostRecv(cs[q].b, q * nm + m, {dst->sge(slot(q, m), len)}), 0);
        }
    }
    for (int m = 0; m < nm; m++) {
        for (int q = 0; q < nq; q++) {
            Wr w = SendWr(q * nm + m, src->sge(slot(q, m), len - m));
            ASSERT_EQ(Post(cs[q].a, w), 0);
        }
    }
    std::vector<ibv_wc> s = PollCq(a_.scq, nq * nm, 20000);
    std::vector<ibv_wc> r = PollCq(b_.rcq, nq * nm, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(nq * nm));
    ASSERT_EQ(r.size(), static_cast<size_t>(nq * nm));
    std::vector<int> next(nq, 0);
    for (const ibv_wc& wc : r) {
        ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
        int q = static_cast<int>(wc.wr_id) / nm, m = static_cast<int>(wc.wr_id) % nm;
        ASSERT_LT(q, nq);
        EXPECT_EQ(wc.qp_num, cs[q].b->qp_num) << "receive completed on the wrong QP";
        EXPECT_EQ(m, next[q]++) << "out of order on QP " << q;
        EXPECT_EQ(wc.byte_len, len - m);
        EXPECT_EQ(FirstDiff(src->p(slot(q, m)), dst->p(slot(q, m)), len - m), -1)
            << "QP " << q << " message " << m;
    }
    for (const ibv_wc& wc : s) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
}

// Zero-length messages are valid: a SEND and a WRITE_WITH_IMM of no bytes
// each complete a receive with byte_len 0 (the immediate delivered), and a
// zero-length WRITE completes without touching the target.
TEST_F(DataPath, ZeroLengthMessages) {
    Conn c = Connect();
    Buf* rbuf = Reg(b_, 64, kLocal);
    Buf* tgt = Reg(b_, 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    std::memset(rbuf->p(), 0xEE, 64);
    std::memset(tgt->p(), 0xEE, 64);
    ASSERT_EQ(PostRecv(c.b, 1, {rbuf->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c.b, 2, {rbuf->sge(0, 64)}), 0);
    Wr send;
    send.wr_id = 11;
    Wr write;
    write.op = IBV_WR_RDMA_WRITE;
    write.wr_id = 12;
    write.raddr = tgt->addr();
    write.rkey = tgt->mr->rkey;
    Wr wimm = write;
    wimm.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    wimm.wr_id = 13;
    wimm.imm = htonl(77);
    ASSERT_EQ(PostChain(c.a, {send, write, wimm}), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, 11 + i);
    }
    std::vector<ibv_wc> r = PollCq(b_.rcq, 2);
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
    EXPECT_EQ(r[0].byte_len, 0u);
    EXPECT_EQ(r[1].status, IBV_WC_SUCCESS) << WcStr(r[1]);
    EXPECT_EQ(r[1].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[1].byte_len, 0u);
    EXPECT_EQ(r[1].imm_data, htonl(77));
    for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(rbuf->p()[i], 0xEE) << "zero-length message wrote at " << i;
        ASSERT_EQ(tgt->p()[i], 0xEE) << "zero-length WRITE wrote at " << i;
    }
}

// A zero-length WRITE, WRITE_WITH_IMM or READ names no memory: the
// responder looks at neither its rkey nor its address (IBA C9-88).
// rsockets sends its control messages as zero-length WRITE_WITH_IMMs with
// whatever key its stack held; refusing them failed its QPs at random.
TEST_F(DataPath, ZeroLengthIgnoresRkeyAndAddress) {
    Conn c = Connect();
    Buf* rbuf = Reg(b_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    std::memset(rbuf->p(), 0xEE, 64);
    ASSERT_EQ(PostRecv(c.b, 1, {rbuf->sge(0, 64)}), 0);
    Wr write;
    write.op = IBV_WR_RDMA_WRITE;
    write.wr_id = 21;
    write.raddr = 0xdead0000beefull;
    write.rkey = 0xfffffff7;
    Wr wimm = write;
    wimm.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    wimm.wr_id = 22;
    wimm.rkey = 0;
    wimm.imm = htonl(78);
    Wr read = write;
    read.op = IBV_WR_RDMA_READ;
    read.wr_id = 23;
    read.rkey = 0x12345678;
    ASSERT_EQ(PostChain(c.a, {write, wimm, read}), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (size_t i = 0; i < 3; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, 21 + i);
    }
    std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[0].byte_len, 0u);
    EXPECT_EQ(r[0].imm_data, htonl(78));
    for (size_t i = 0; i < 64; i++)
        ASSERT_EQ(rbuf->p()[i], 0xEE) << "zero-length message wrote at " << i;
    // The QP still works: a SEND after them arrives.
    ASSERT_EQ(PostRecv(c.b, 2, {rbuf->sge(0, 64)}), 0);
    Wr snd;
    snd.wr_id = 24;
    ASSERT_EQ(Post(c.a, snd), 0);
    s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    r = PollCq(b_.rcq, 1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << WcStr(r[0]);
    EXPECT_EQ(r[0].wr_id, 2u);
}

// Destroying both QPs while large WRITEs are in flight returns promptly,
// and the target MR can be deregistered right after (no reference left
// behind, no hang, no oops).
TEST_F(DataPath, DestroyQpsWithWorkInFlight) {
    Conn c = Connect();
    const size_t len = 1 << 20;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    for (int i = 0; i < 8; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    const long ms = DestroyAndDereg(c, {dst, src});
    EXPECT_LT(ms, 10000) << "destroy/dereg with work in flight took " << ms << " ms";
    // The device still works.
    Conn d = Connect();
    Buf* s2 = Reg(a_, 64, kLocal);
    Buf* d2 = Reg(b_, 64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(s2->p(), 64, 1000);
    Wr w = WriteWr(99, s2->sge(0, 64), d2);
    ASSERT_EQ(Post(d.a, w), 0);
    std::vector<ibv_wc> s;
    for (const ibv_wc& wc : PollCq(a_.scq, 100, 2000)) {
        if (wc.qp_num == d.a->qp_num) {
            s.push_back(wc);
        }
    }
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(FirstDiff(s2->p(), d2->p(), 64), -1);
}

// A hostile user writes the ring indices the kernel owns (SQ/SRQ consumer,
// CQ producer) and the ones it reads (SQ/SRQ producer) of one connection's
// mapped rings (its responder takes receives from an SRQ) while WRITEs and
// SENDs are in flight. The kernel keeps its own positions: nothing is wiped
// or completed twice, no MR reference leaks (dereg and destroy return at
// once), and another connection of the same process keeps working.
TEST_F(DataPath, UserScribbledRingIndicesHarmOnlyTheirQp) {
    Conn bystander = Connect();
    const std::set<uintptr_t> before = UverbsMappings();
    ConnSpec spec;
    spec.scq_a = CreateCq(a_, 64);
    spec.rcq_b = CreateCq(b_, 64);
    spec.srq_b = CreateSrq(b_, 64, 1);
    Conn victim = Connect(spec);
    const size_t len = 256 << 10;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll | IBV_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(HasFailure());
    std::vector<uintptr_t> rings;
    for (uintptr_t m : UverbsMappings()) {
        if (!before.count(m)) {
            rings.push_back(m);
        }
    }
    // SQ and RQ of each QP, two CQs, the SRQ
    ASSERT_GE(rings.size(), 5u) << "the new connection's rings are not mapped";
    for (int i = 0; i < 8; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(victim.a, w), 0);
        ASSERT_EQ(PostSrqRecv(spec.srq_b, i, {dst->sge(i * 64, 64)}), 0);
    }
    std::mt19937 rng(7);
    for (int round = 0; round < 50; round++) {
        for (uintptr_t m : rings) {
            auto* ctl = reinterpret_cast<volatile uint32_t*>(m);
            ctl[16] = ctl[16] + 1 + rng() % 5;  // consumer index
            if (round % 10 == 9) {
                ctl[0] = rng();  // producer index
            }
        }
        Wr w = WriteWr(100 + round, src->sge(0, 64), dst);
        Wr snd = SendWr(200 + round, src->sge(0, 64));
        // These may fail: the user broke its own rings.
        PostChain(victim.a, {w, snd});
        PostSrqRecv(spec.srq_b, 300 + round, {dst->sge(0, 64)});
        std::this_thread::sleep_for(milliseconds(5));
    }
    const long ms = DestroyAndDereg(victim, {dst, src});
    EXPECT_LT(ms, 10000) << "destroy/dereg after the scribbling took " << ms << " ms";

    // The other connection of this process: a WRITE and a SEND, checked.
    Buf* s2 = Reg(a_, 4096, kLocal);
    Buf* d2 = Reg(b_, 4096, kRemoteAll | IBV_ACCESS_LOCAL_WRITE);
    ASSERT_FALSE(HasFailure());
    Fill(s2->p(), 4096, 77);
    ASSERT_EQ(PostRecv(bystander.b, 7, {d2->sge(2048, 2048)}), 0);
    Wr w = WriteWr(5, s2->sge(0, 2048), d2);
    Wr snd;
    snd.op = IBV_WR_SEND;
    snd.wr_id = 6;
    snd.sge = {s2->sge(2048, 2048)};
    ASSERT_EQ(PostChain(bystander.a, {w, snd}), 0);
    std::vector<ibv_wc> got;
    // The victim's QPs complete into their own CQs, never these.
    for (const ibv_wc& wc : PollCq(a_.scq, 2, 5000)) {
        if (wc.qp_num == bystander.a->qp_num) {
            got.push_back(wc);
        }
    }
    ASSERT_EQ(got.size(), 2u) << "the bystander's WRITE and SEND did not both complete";
    for (const ibv_wc& wc : got) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    }
    std::vector<ibv_wc> rcv;
    for (const ibv_wc& wc : PollCq(b_.rcq, 1, 5000)) {
        if (wc.qp_num == bystander.b->qp_num) {
            rcv.push_back(wc);
        }
    }
    ASSERT_EQ(rcv.size(), 1u) << "the bystander's receive did not complete";
    EXPECT_EQ(rcv[0].status, IBV_WC_SUCCESS) << WcStr(rcv[0]);
    EXPECT_EQ(rcv[0].byte_len, 2048u);
    EXPECT_EQ(FirstDiff(s2->p(), d2->p(), 4096), -1) << "the bystander's data differ";
}

}  // namespace
