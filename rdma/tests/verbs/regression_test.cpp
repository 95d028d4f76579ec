// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Regressions (fixture DataPath): each test checks a behaviour the old
// NTRDMA got wrong, and its comment names the defect. (Defects 8, 11 and
// 13 have their tests beside their concern: datapath_test.cpp,
// qp_state_test.cpp.)

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

// ---- regressions: the old NTRDMA's defects ----

// Defect 1: a reserved lkey made a receive's address a physical address.
// lkey 0 and small integers are no keys, in send and in receive SGEs: the
// WR fails with a protection error and nothing is written anywhere (canary
// MRs, registered first, stay as they were).
TEST_F(DataPath, ReservedLkeysRejected) {
    Buf* canary_a = Reg(a_, 4096, kLocal);
    Buf* canary_b = Reg(b_, 4096, kLocal);
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(canary_a->p(), 4096, 21);
    Fill(canary_b->p(), 4096, 22);
    Fill(src->p(), 64, 23);
    const std::vector<uint8_t> ca = canary_a->mem, cb = canary_b->mem;
    for (uint32_t key : {0u, 1u, 2u, 3u, 0x80u, 0x100u, 0x101u}) {
        SCOPED_TRACE("lkey " + std::to_string(key));
        // index 1 with tag 1 is a real key about once in 255 registrations
        // (tags are random); tag 0 is never issued, so 0x100 always fails.
        if (key == canary_a->mr->lkey || key == canary_b->mr->lkey || key == src->mr->lkey) {
            std::cout << "[ NOTE     ] lkey " << key << " is one of this test's MRs\n";
            EXPECT_NE(key, 0x100u) << "the driver issued a key with tag 0";
            continue;
        }
        {  // send SGE
            Conn c = Connect();
            ASSERT_FALSE(HasFailure());
            Wr w = SendWr(5, ibv_sge{canary_a->addr(), 64, key});
            ASSERT_EQ(Post(c.a, w), 0);
            ASSERT_NO_FATAL_FAILURE(ExpectRequesterError(c, IBV_WC_LOC_PROT_ERR, 5));
        }
        {  // receive SGE
            Conn c = Connect();
            ASSERT_FALSE(HasFailure());
            ASSERT_EQ(PostRecv(c.b, 1, {ibv_sge{canary_b->addr(), 64, key}}), 0);
            Wr w = SendWr(5, src->sge(0, 64));
            ASSERT_EQ(Post(c.a, w), 0);
            std::vector<ibv_wc> r = PollCq(b_.rcq, 1);
            ASSERT_EQ(r.size(), 1u) << "no responder completion";
            EXPECT_TRUE(StatusMatches(b_.ctx, r[0].status, IBV_WC_LOC_PROT_ERR)) << WcStr(r[0]);
            std::vector<ibv_wc> s = PollCq(a_.scq, 1);
            ASSERT_EQ(s.size(), 1u) << "no requester completion";
            EXPECT_NE(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
            if (s[0].status != IBV_WC_SUCCESS) {
                std::cout << "[ NOTE     ] requester status for a bad receive lkey: "
                          << ibv_wc_status_str(s[0].status) << "\n";
            }
        }
        EXPECT_TRUE(canary_a->mem == ca) << "requester canary changed";
        EXPECT_TRUE(canary_b->mem == cb) << "responder canary changed";
    }
}

// Defect 2: the send path did not bound the WQE count. Posting more WRs
// than the SQ holds is refused at the first that does not fit; the ones
// before it run; the QP goes on working.
TEST_F(DataPath, SqOverflowRefused) {
    ConnSpec cs;
    cs.wr = 8;
    Conn c = Connect(cs);
    ASSERT_FALSE(HasFailure());
    const uint32_t depth = c.cap_a.max_send_wr;
    ASSERT_GE(depth, 8u);
    Buf* src = Reg(a_, 64 * (depth * 4), kLocal);
    Buf* dst = Reg(b_, 64 * (depth * 4), kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), src->mem.size(), 31);
    std::vector<Wr> ws;
    for (uint32_t i = 0; i < depth * 4; i++) {
        Wr w = WriteWr(i, src->sge(64 * i, 64), dst, 64 * i);
        ws.push_back(w);
    }
    size_t nbad = 0;
    int rc = PostChain(c.a, ws, &nbad);
    EXPECT_NE(rc, 0) << depth * 4 << " WRs on an SQ of " << depth;
    // Refused at the first WR that does not fit: at or after the reported
    // depth (a device may hold more than it reports).
    EXPECT_GE(nbad, depth) << "refused within the reported depth";
    ASSERT_LT(nbad, ws.size()) << "nothing refused";
    std::cout << "[ NOTE     ] SQ of " << depth << " took " << nbad << " WRs\n";
    std::vector<ibv_wc> s = PollCq(a_.scq, nbad);
    ASSERT_EQ(s.size(), nbad);
    for (uint32_t i = 0; i < nbad; i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, i);
    }
    EXPECT_EQ(Drain(a_.scq, 100).size(), 0u) << "a refused WR ran";
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64 * nbad), -1);
    for (size_t i = 64 * nbad; i < dst->mem.size(); i++) {
        ASSERT_EQ(dst->p()[i], 0) << "a refused WR wrote at " << i;
    }
    // Still usable.
    ws.resize(1);
    ASSERT_EQ(PostChain(c.a, ws), 0);
    s = PollCq(a_.scq, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
}

// Defect 3: no PD or access checks, guessable keys. (The PD and access
// checks: ErrMrWithoutRemoteAccess, ErrRkeyOfMrInOtherPd, ErrLkeyOfOtherPd.)
// 1000 wrong rkeys (random ones, and the right index with every other tag)
// all fail with REM_ACCESS_ERR and write nothing.
TEST_F(DataPath, GuessedRkeysRejected) {
    Conn c;
    Buf *local, *remote;
    ASSERT_NO_FATAL_FAILURE(ConnectBufs(&c, &local, 64, &remote, 4096, kRemoteAll));
    Fill(local->p(), 64, 41);
    const uint32_t good = remote->mr->rkey;
    std::mt19937 rng(12345);
    std::vector<uint32_t> keys;
    for (uint32_t tag = 0; tag < 256; tag++) {
        if ((good & ~0xffu) + tag != good) {
            keys.push_back((good & ~0xffu) + tag);
        }
    }
    while (keys.size() < 1000) {
        uint32_t k = rng();
        if (k != good) {
            keys.push_back(k);
        }
    }
    int wrong = 0;
    const auto t0 = Clock::now();
    for (uint32_t k : keys) {
        // Back to RTS after each failure.
        for (ibv_qp* qp : {c.a, c.b}) {
            ASSERT_EQ(QpToState(qp, IBV_QPS_RESET), 0);
        }
        Drain(a_.scq, 0);
        RtrSpec ra, rb;
        ra.dest_qpn = c.b->qp_num;
        ra.dgid = b_.gid;
        ra.dlid = b_.lid;
        rb.dest_qpn = c.a->qp_num;
        rb.dgid = a_.gid;
        rb.dlid = a_.lid;
        ASSERT_EQ(QpToInit(c.a), 0);
        ASSERT_EQ(QpToInit(c.b), 0);
        ASSERT_EQ(QpToRtr(c.a, ra), 0);
        ASSERT_EQ(QpToRtr(c.b, rb), 0);
        ASSERT_EQ(QpToRts(c.a), 0);
        ASSERT_EQ(QpToRts(c.b), 0);
        Wr w;
        w.op = (k & 1) ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
        w.sge = {local->sge(0, 64)};
        w.raddr = remote->addr(64);
        w.rkey = k;
        ASSERT_EQ(Post(c.a, w), 0);
        std::vector<ibv_wc> s = PollCq(a_.scq, 1);
        ASSERT_EQ(s.size(), 1u) << "rkey " << k << ": no completion";
        if (s[0].status != IBV_WC_REM_ACCESS_ERR) {
            ADD_FAILURE() << "rkey 0x" << std::hex << k << " (good 0x" << good << std::dec
                          << "): " << WcStr(s[0]);
            if (++wrong > 5) {
                break;
            }
        }
    }
    std::cout << "[ NOTE     ] " << keys.size() << " wrong rkeys in "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count() << " ms\n";
    for (size_t i = 0; i < 4096; i++) {
        ASSERT_EQ(remote->p()[i], 0) << "target written at " << i;
    }
}

// Defect 4: MR references dropped before the DMA using the MR completed.
// Deregister the target MR while large WRITEs into it are in flight:
// dereg succeeds, every WR completes (success or REM_ACCESS_ERR, then
// flushed), no oops, and nothing lands in the buffer once dereg returned.
TEST_F(DataPath, NothingLandsAfterDeregUnderWrites) {
    Conn c = Connect();
    const size_t len = 1 << 20;
    const int n = 8;
    Buf* src = Reg(a_, len, kLocal);
    Buf* dst = Reg(b_, len, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len, 51);
    for (int i = 0; i < n; i++) {
        Wr w = WriteWr(i, src->sge(0, len), dst);
        ASSERT_EQ(Post(c.a, w), 0);
    }
    const auto t0 = Clock::now();
    ASSERT_EQ(Dereg(dst), 0);
    const auto dereg_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    std::vector<uint8_t> at_dereg = dst->mem;
    std::vector<ibv_wc> s = PollCq(a_.scq, n, 20000);
    ASSERT_EQ(s.size(), static_cast<size_t>(n)) << "WRs did not all complete (hang?)";
    int ok = 0;
    bool failed = false;
    for (const ibv_wc& wc : s) {
        if (!failed && wc.status == IBV_WC_SUCCESS) {
            ok++;
        } else if (!failed) {
            EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << WcStr(wc);
            failed = true;
        } else {
            EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << WcStr(wc);
        }
    }
    std::cout << "[ NOTE     ] dereg took " << dereg_ms << " ms; " << ok << " of " << n
              << " WRITEs completed before it\n";
    EXPECT_TRUE(dst->mem == at_dereg) << "the buffer changed after dereg returned";
}

// Defect 10: user pages not pinned. The MR keeps the pages it registered:
// after the process unmaps the range and maps fresh pages at the same
// address, RDMA WRITE and READ still go to the registered pages, never to
// the new mapping, and nothing crashes.
TEST_F(DataPath, MrKeepsItsPagesAfterUnmap) {
    Conn c = Connect();
    const size_t len = 16 * 4096;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    std::memset(p, 0xAA, len);
    ibv_mr* mr = ibv_reg_mr(b_.pd, p, len, kRemoteAll);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    ASSERT_EQ(munmap(p, len), 0);
    void* q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(q, p);
    std::memset(q, 0x55, len);
    Buf* src = Reg(a_, len / 2, kLocal);
    Buf* back = Reg(a_, len, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len / 2, 61);
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.wr_id = 1;
    w.sge = {src->sge(0, len / 2)};
    w.raddr = reinterpret_cast<uintptr_t>(p);
    w.rkey = mr->rkey;
    ASSERT_EQ(Post(c.a, w), 0);
    Wr rd = w;
    rd.op = IBV_WR_RDMA_READ;
    rd.wr_id = 2;
    rd.sge = {back->sge(0, len)};
    ASSERT_EQ(Post(c.a, rd), 0);
    std::vector<ibv_wc> s = PollCq(a_.scq, 2);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << WcStr(s[0]);
    EXPECT_EQ(s[1].status, IBV_WC_SUCCESS) << WcStr(s[1]);
    EXPECT_EQ(FirstDiff(src->p(), back->p(), len / 2), -1) << "READ did not see the WRITE";
    for (size_t i = len / 2; i < len; i++) {
        ASSERT_EQ(back->p()[i], 0xAA)
            << "READ saw the new mapping, not the registered pages, at " << i;
    }
    const uint8_t* nm = static_cast<const uint8_t*>(q);
    for (size_t i = 0; i < len; i++) {
        ASSERT_EQ(nm[i], 0x55) << "the WRITE went to the new mapping at " << i;
    }
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(munmap(q, len), 0);
}

}  // namespace
