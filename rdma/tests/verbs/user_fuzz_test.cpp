// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The user fuzzer: a hostile process against the verbs face. For
// NTRDMA_USER_FUZZ_SECS seconds (default 20; `make fuzz` runs 900)
// it drives a "victim" RC connection between the two ends with:
//  - random send and receive WRs through libibverbs: any opcode value,
//    SGE lists with good, foreign-PD, deregistered and random lkeys,
//    lengths and addresses, random rkeys and remote addresses, random flags;
//  - random bytes written straight into the WQE slots and the indices of
//    the victim's mapped SQ, RQ and CQ rings (what the provider would never
//    write; the kernel must copy, then check, every field);
//  - random uverbs commands: modify_qp with random masks and values,
//    reg_mr with random access and ranges, create_cq/qp/srq with random
//    sizes, CQ arming; a victim knocked out of RTS is destroyed (timed)
//    and connected again.
// Meanwhile a bystander connection of the same process moves verified
// data every few seconds. Asserts: every destroy and dereg returns within
// 10 s (no task left in D state), the bystander never fails, and at the
// end everything is torn down in bounded time. The test bed fails the run
// on any oops, WARN, lockup or hung task in the guest console.

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <rdma/ntrdma-abi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "verbs_datapath.hpp"
#include "verbs_util.hpp"

namespace {

using namespace ntv;  // NOLINT(google-build-using-namespace)

constexpr long kBoundMs = 10000;  // destroy/dereg: longer is a hang

int FuzzSecs() {
    const char* v = std::getenv("NTRDMA_USER_FUZZ_SECS");
    return v && *v ? std::atoi(v) : 20;
}

// A mapped ring of this process: start address and length.
struct Ring {
    uint8_t* base = nullptr;
    size_t len = 0;
};

// The uverbs mappings that appeared since @before, with their lengths.
std::vector<Ring> NewRings(const std::set<uintptr_t>& before) {
    std::vector<Ring> out;
    for (const std::string& line : UverbsMapLines()) {
        unsigned long lo = 0;
        unsigned long hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || before.count(lo)) {
            continue;
        }
        out.push_back(Ring{reinterpret_cast<uint8_t*>(lo), hi - lo});
    }
    return out;
}

class UserFuzz : public DataPath {
  protected:
    void SetUp() override {
        DataPath::SetUp();
        if (IsSkipped() || HasFatalFailure()) {
            return;
        }
        other_pd_ = AllocPd(a_);
        src_ = Reg(a_, kLen, kRemoteAll);
        dst_ = Reg(b_, kLen, kRemoteAll);
        by_src_ = Reg(a_, 8192, kLocal);
        by_dst_ = Reg(b_, 8192, kRemoteAll);
        foreign_ = Reg(a_, 4096, kRemoteAll, other_pd_);
        stale_ = Reg(a_, 4096, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        stale_lkey_ = stale_->mr->lkey;
        stale_rkey_ = stale_->mr->rkey;
        ASSERT_EQ(Dereg(stale_), 0);
        ConnSpec spec;
        spec.rnr_retry = 1;  // an RNR wait must not last for ever
        by_ = Connect(spec);
        ASSERT_FALSE(HasFailure());
        vspec_.sge = 4;
        vspec_.inline_data = 64;
        vspec_.rnr_retry = 1;
        ASSERT_NO_FATAL_FAILURE(NewVictim());
    }

    // A fresh victim connection with CQs of its own (a scribbled or
    // overflowed CQ stays broken); its rings are where the scribbles go.
    void NewVictim() {
        std::set<uintptr_t> before = UverbsMappings();
        vspec_.scq_a = CreateCq(a_, 64);
        vspec_.rcq_b = CreateCq(b_, 64);
        ASSERT_NE(vspec_.scq_a, nullptr);
        ASSERT_NE(vspec_.rcq_b, nullptr);
        cq_rings_ = NewRings(before);
        ASSERT_EQ(cq_rings_.size(), 2u) << "the victim's CQ rings are not mapped";
        before = UverbsMappings();
        victim_ = Connect(vspec_);
        ASSERT_FALSE(HasFailure());
        qp_rings_ = NewRings(before);
        ASSERT_GE(qp_rings_.size(), 2u) << "the victim's QP rings are not mapped";
        victims_++;
    }

    // Destroy the victim's QPs and CQs, each within kBoundMs.
    void KillVictim() {
        for (ibv_qp* qp : {victim_.a, victim_.b}) {
            std::erase(qps_, qp);
            Timed("destroy_qp", [qp] { return ibv_destroy_qp(qp); });
        }
        for (ibv_cq* cq : {vspec_.scq_a, vspec_.rcq_b}) {
            std::erase(cqs_, cq);
            Timed("destroy_cq", [cq] { return ibv_destroy_cq(cq); });
        }
        victim_ = Conn{};
    }

    // @call returns 0 within kBoundMs.
    template <typename F>
    void Timed(const char* what, F call) {
        const auto t0 = Clock::now();
        EXPECT_EQ(call(), 0) << what;
        const long ms = std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
        EXPECT_LT(ms, kBoundMs) << what << " of a fuzzed object took " << ms << " ms";
    }

    // A key to fuzz with: @foreign (an MR of another PD), @stale (of a
    // deregistered MR), a random one, or (3 times in 4) @good.
    uint32_t AnyKey(uint32_t foreign, uint32_t stale, uint32_t good) {
        switch (rng_() % 12) {
            case 0:
                return foreign;
            case 1:
                return stale;
            case 2:
                return static_cast<uint32_t>(rng_());
            default:
                return good;
        }
    }

    uint32_t AnyLkey() { return AnyKey(foreign_->mr->lkey, stale_lkey_, src_->mr->lkey); }

    uint32_t AnyRkey() { return AnyKey(foreign_->mr->rkey, stale_rkey_, dst_->mr->rkey); }

    // An address near (or in) @b, or anywhere.
    uint64_t AnyAddr(const Buf* b) {
        if (rng_() % 4 == 0) {
            return (static_cast<uint64_t>(rng_()) << 32) | rng_();
        }
        return b->addr(rng_() % (kLen + 8192)) - 4096;
    }

    ibv_sge AnySge() {
        return ibv_sge{AnyAddr(src_), static_cast<uint32_t>(rng_() % 3 ? rng_() % 70000 : rng_()),
                       AnyLkey()};
    }

    void PostRandomSend() {
        std::array<ibv_sge, 6> sge{};
        ibv_send_wr wr{};
        for (ibv_sge& s : sge) {
            s = AnySge();
        }
        wr.wr_id = ++ops_;
        wr.opcode = static_cast<ibv_wr_opcode>(rng_() % 16);
        wr.num_sge = static_cast<int>(rng_() % 6);
        wr.sg_list = sge.data();
        wr.send_flags = rng_() & (IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED);
        if (rng_() % 8 == 0) {  // inline: the provider reads it, so real memory
            wr.send_flags |= IBV_SEND_INLINE;
            for (ibv_sge& s : sge) {
                s.addr = src_->addr(rng_() % 4096);
                s.length = static_cast<uint32_t>(rng_() % 80);
            }
        }
        wr.wr.rdma.remote_addr = AnyAddr(dst_);
        wr.wr.rdma.rkey = AnyRkey();
        ibv_send_wr* bad = nullptr;
        errors_ += ibv_post_send(victim_.a, &wr, &bad) != 0;
    }

    void PostRandomRecv() {
        std::array<ibv_sge, 6> sge{};
        for (ibv_sge& s : sge) {
            s = AnySge();
            s.addr = AnyAddr(dst_);
        }
        ibv_recv_wr wr{};
        wr.wr_id = ++ops_;
        wr.num_sge = static_cast<int>(rng_() % 6);
        wr.sg_list = sge.data();
        ibv_recv_wr* bad = nullptr;
        errors_ += ibv_post_recv(victim_.b, &wr, &bad) != 0;
    }

    // Random bytes into a slot of a ring, or into one of its indices.
    void Scribble(const Ring& r) {
        auto* ctl = reinterpret_cast<volatile uint32_t*>(r.base);
        const unsigned word = std::array<unsigned, 3>{0, 16, 32}[rng_() % 3];
        if (rng_() % 3 == 0) {
            ctl[word] = rng_() % 2 ? ctl[word] + 1 + rng_() % 8 : rng_();
            return;
        }
        const size_t body = r.len - NTRDMA_RING_CTL_SIZE;
        auto* p = reinterpret_cast<volatile uint32_t*>(r.base + NTRDMA_RING_CTL_SIZE);
        for (int i = 0; i < 16; i++) {
            p[rng_() % (body / 4)] = rng_() % 2 ? rng_() : rng_() % 64;
        }
        ctl[0] = ctl[0] + 1;  // SQ/RQ: "posted" it; CQ: "produced" it
    }

    void RandomModifyQp() {
        ibv_qp_attr a{};
        auto* raw = reinterpret_cast<uint8_t*>(&a);
        for (size_t i = 0; i < sizeof(a); i++) {
            raw[i] = static_cast<uint8_t>(rng_() % 4 ? rng_() % 8 : rng_());
        }
        // Not the path: a random GID index or a dest_qpn naming the
        // bystander's QP would be the user's own (legal) doing.
        int mask = static_cast<int>(rng_() & ((1 << 21) - 1)) &
                   ~(IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_DEST_QPN);
        if (rng_() % 4) {
            mask &= ~IBV_QP_STATE;  // mostly attributes of the live QP
        }
        errors_ += ibv_modify_qp(rng_() % 2 ? victim_.a : victim_.b, &a, mask) != 0;
    }

    void RandomRegMr() {
        const size_t off = rng_() % kLen;
        const size_t len = rng_() % 3 ? rng_() % (kLen - off + 8192) : rng_();
        ibv_mr* mr = ibv_reg_mr(a_.pd, src_->p(off), len, static_cast<int>(rng_() & 0x1ff));
        if (!mr) {
            errors_++;
            return;
        }
        Timed("dereg_mr", [mr] { return ibv_dereg_mr(mr); });
    }

    void RandomCreate() {
        const int n = static_cast<int>(rng_() % 3 ? rng_() % 5000 : rng_());
        if (ibv_cq* cq = ibv_create_cq(a_.ctx, n, nullptr, nullptr, 0)) {
            EXPECT_EQ(ibv_destroy_cq(cq), 0);
        } else {
            errors_++;
        }
        ibv_qp_init_attr qi{};
        qi.send_cq = a_.scq;
        qi.recv_cq = a_.rcq;
        qi.qp_type = rng_() % 4 ? IBV_QPT_RC : static_cast<ibv_qp_type>(rng_() % 6);
        qi.cap = {static_cast<uint32_t>(rng_() % 3 ? rng_() % 5000 : rng_()),
                  static_cast<uint32_t>(rng_() % 5000), static_cast<uint32_t>(rng_() % 20),
                  static_cast<uint32_t>(rng_() % 20), static_cast<uint32_t>(rng_() % 600)};
        if (ibv_qp* qp = ibv_create_qp(a_.pd, &qi)) {
            EXPECT_EQ(ibv_destroy_qp(qp), 0);
        } else {
            errors_++;
        }
        ibv_srq_init_attr si{};
        si.attr = {static_cast<uint32_t>(rng_() % 3 ? rng_() % 5000 : rng_()),
                   static_cast<uint32_t>(rng_() % 20), static_cast<uint32_t>(rng_() % 100)};
        if (ibv_srq* srq = ibv_create_srq(b_.pd, &si)) {
            EXPECT_EQ(ibv_destroy_srq(srq), 0);
        } else {
            errors_++;
        }
    }

    // Drain the victim's CQs (whatever they hold: a scribbled CQ may show
    // garbage to its own user) and arm them at random.
    void DrainVictimCqs() {
        for (ibv_cq* cq : {vspec_.scq_a, vspec_.rcq_b}) {
            std::array<ibv_wc, 16> wc{};
            int got = 0;
            for (int k = 0; k < 8 && (got = ibv_poll_cq(cq, 16, wc.data())) > 0; k++) {
                completions_ += got;
            }
            if (rng_() % 4 == 0) {
                ibv_req_notify_cq(cq, static_cast<int>(rng_() % 2));
            }
        }
    }

    // One random action against the victim: mostly traffic, sometimes a
    // scribble or a command (a state change ends the victim's traffic).
    void Step() {
        const unsigned r = rng_() % 32;
        if (r < 10) {
            PostRandomSend();
        } else if (r < 15) {
            PostRandomRecv();
        } else if (r < 18) {
            Scribble(qp_rings_[rng_() % qp_rings_.size()]);
            PostRandomSend();  // a doorbell: the kernel looks at the ring
        } else if (r < 19) {
            Scribble(cq_rings_[rng_() % cq_rings_.size()]);
        } else if (r < 20) {
            RandomModifyQp();
        } else if (r < 21) {
            RandomRegMr();
        } else if (r < 22) {
            RandomCreate();
        } else {
            DrainVictimCqs();
        }
        steps_++;
    }

    // The bystander moves a checked WRITE and SEND between buffers no
    // victim WR can name; returns false if not.
    bool BystanderWorks(uint32_t seed) {
        Fill(by_src_->p(), 4096, seed);
        std::memset(by_dst_->p(), 0, 8192);
        if (PostRecv(by_.b, seed, {by_dst_->sge(4096, 4096)}) != 0) {
            return false;
        }
        Wr w = WriteWr(seed, by_src_->sge(0, 4096), by_dst_);
        Wr snd;
        snd.wr_id = seed + 1;
        snd.sge = {by_src_->sge(0, 4096)};
        if (PostChain(by_.a, {w, snd}) != 0) {
            return false;
        }
        int ok = 0;
        for (const ibv_wc& wc : PollCq(a_.scq, 2, 5000)) {
            ok += wc.status == IBV_WC_SUCCESS && wc.qp_num == by_.a->qp_num;
        }
        for (const ibv_wc& wc : PollCq(b_.rcq, 1, 5000)) {
            ok += wc.status == IBV_WC_SUCCESS && wc.qp_num == by_.b->qp_num;
        }
        return ok == 3 && FirstDiff(by_src_->p(), by_dst_->p(), 4096) < 0 &&
               FirstDiff(by_src_->p(), by_dst_->p(4096), 4096) < 0;
    }

    static constexpr size_t kLen = 1 << 20;
    std::mt19937 rng_{0x5eed};
    ibv_pd* other_pd_ = nullptr;
    Buf* src_ = nullptr;
    Buf* dst_ = nullptr;
    Buf* by_src_ = nullptr;
    Buf* by_dst_ = nullptr;
    Buf* foreign_ = nullptr;
    Buf* stale_ = nullptr;
    uint32_t stale_lkey_ = 0;
    uint32_t stale_rkey_ = 0;
    ConnSpec vspec_;
    Conn victim_;
    Conn by_;
    std::vector<Ring> qp_rings_;
    std::vector<Ring> cq_rings_;
    uint64_t ops_ = 0;
    uint64_t steps_ = 0;
    uint64_t errors_ = 0;
    uint64_t completions_ = 0;
    int victims_ = 0;
};

TEST_F(UserFuzz, RandomWqesRingsAndCommandsHarmOnlyTheVictim) {
    const auto end = Clock::now() + std::chrono::seconds(FuzzSecs());
    auto next_check = Clock::now() + std::chrono::seconds(3);
    uint32_t checks = 0;
    while (Clock::now() < end && !HasFailure()) {
        for (int i = 0; i < 50; i++) {
            Step();
        }
        if (QpState(victim_.a) != IBV_QPS_RTS || QpState(victim_.b) != IBV_QPS_RTS ||
            rng_() % 50 == 0) {
            KillVictim();
            ASSERT_NO_FATAL_FAILURE(NewVictim());
        }
        if (Clock::now() >= next_check) {
            ASSERT_TRUE(BystanderWorks(1000 + 2 * checks++))
                << "the bystander connection failed after " << steps_ << " fuzz steps";
            next_check = Clock::now() + std::chrono::seconds(3);
        }
    }
    KillVictim();
    EXPECT_TRUE(BystanderWorks(7)) << "the bystander failed after the fuzzing";
    std::cout << "user fuzz: " << FuzzSecs() << " s, " << steps_ << " steps, " << ops_ << " WRs, "
              << errors_ << " calls refused, " << completions_ << " completions, " << victims_
              << " victim connections, " << checks << " bystander checks\n";
    EXPECT_GT(victims_, 1);
    EXPECT_GT(checks, 0u);
}

}  // namespace
