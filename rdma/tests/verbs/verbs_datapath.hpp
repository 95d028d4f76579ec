// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The DataPath fixture of the verbs suite: two ends (requester on
// NTRDMA_IBDEV, responder on NTRDMA_PEER_IBDEV, both in this process), RC
// connections between them, registered buffers; everything created through
// it is destroyed in TearDown. Shared by the suite's files and the user
// fuzzer.
#ifndef NTRDMA_VERBS_DATAPATH_HPP
#define NTRDMA_VERBS_DATAPATH_HPP

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "verbs_util.hpp"

namespace ntv {

// One end: a device context with its PD and CQs.
struct Side {
    std::string name;
    ibv_context* ctx = nullptr;
    ibv_device_attr dev{};
    ibv_pd* pd = nullptr;
    ibv_cq* scq = nullptr;
    ibv_cq* rcq = nullptr;
    ibv_gid gid{};
    uint16_t lid = 0;
};

struct ConnSpec {
    uint32_t wr = 64;
    uint32_t sge = 1;
    uint32_t inline_data = 0;
    bool sq_sig_all = false;
    ibv_srq* srq_b = nullptr;
    ibv_cq* rcq_b = nullptr;  // default: the responder's rcq
    ibv_cq* scq_a = nullptr;  // default: the requester's scq
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 12;
    unsigned access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
};

// A connected RC pair: a on the requester's device, b on the responder's.
struct Conn {
    ibv_qp* a = nullptr;
    ibv_qp* b = nullptr;
    ibv_qp_cap cap_a{};
    ibv_qp_cap cap_b{};
};

class DataPath : public ::testing::Test {
  protected:
    void SetUp() override {
        const char* peer = std::getenv("NTRDMA_PEER_IBDEV");
        if (!peer || !*peer) {
            GTEST_SKIP() << "needs both ends in one guest (loop topology): "
                            "NTRDMA_PEER_IBDEV is not set";
        }
        ASSERT_NO_FATAL_FAILURE(Open(DeviceName(), &a_));
        ASSERT_NO_FATAL_FAILURE(Open(peer, &b_));
    }

    void TearDown() override {
        for (ibv_qp* qp : qps_) {
            EXPECT_EQ(ibv_destroy_qp(qp), 0);
        }
        for (ibv_srq* srq : srqs_) {
            EXPECT_EQ(ibv_destroy_srq(srq), 0);
        }
        for (auto& b : bufs_) {
            if (b->mr) {
                EXPECT_EQ(ibv_dereg_mr(b->mr), 0);
            }
        }
        for (ibv_cq* cq : cqs_) {
            EXPECT_EQ(ibv_destroy_cq(cq), 0);
        }
        for (ibv_comp_channel* ch : channels_) {
            EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
        }
        for (ibv_pd* pd : pds_) {
            EXPECT_EQ(ibv_dealloc_pd(pd), 0);
        }
        for (Side* s : {&b_, &a_}) {
            if (s->ctx) {
                EXPECT_EQ(ibv_close_device(s->ctx), 0);
            }
        }
    }

    void Open(const std::string& name, Side* s) {
        s->name = name;
        s->ctx = OpenDevice(name);
        ASSERT_NE(s->ctx, nullptr) << "cannot open " << name << ": " << std::strerror(errno);
        ASSERT_EQ(ibv_query_device(s->ctx, &s->dev), 0);
        s->pd = AllocPd(*s);
        ASSERT_NE(s->pd, nullptr) << std::strerror(errno);
        s->scq = CreateCq(*s, 256);
        s->rcq = CreateCq(*s, 256);
        ASSERT_NE(s->scq, nullptr) << std::strerror(errno);
        ASSERT_NE(s->rcq, nullptr) << std::strerror(errno);
        ASSERT_EQ(ibv_query_gid(s->ctx, 1, GidIndex(), &s->gid), 0);
        ibv_port_attr p{};
        ASSERT_EQ(ibv_query_port(s->ctx, 1, &p), 0);
        s->lid = p.lid;
    }

    // Close a third side @s opened with Open(): everything of its context
    // that this fixture holds goes first (QPs, MRs, CQs, PDs).
    void CloseSide(Side& s) {
        auto done = [](int rc) {
            EXPECT_EQ(rc, 0);
            return true;
        };
        std::erase_if(qps_,
                      [&](ibv_qp* qp) { return qp->context == s.ctx && done(ibv_destroy_qp(qp)); });
        std::erase_if(bufs_, [&](const std::unique_ptr<Buf>& b) {
            return b->mr && b->mr->context == s.ctx && done(ibv_dereg_mr(b->mr));
        });
        std::erase_if(cqs_,
                      [&](ibv_cq* cq) { return cq->context == s.ctx && done(ibv_destroy_cq(cq)); });
        std::erase_if(pds_,
                      [&](ibv_pd* pd) { return pd->context == s.ctx && done(ibv_dealloc_pd(pd)); });
        done(ibv_close_device(s.ctx));
        s.ctx = nullptr;
    }

    ibv_pd* AllocPd(Side& s) {
        ibv_pd* pd = ibv_alloc_pd(s.ctx);
        if (pd) {
            pds_.push_back(pd);
        }
        return pd;
    }

    ibv_cq* CreateCq(Side& s, int n, ibv_comp_channel* ch = nullptr) {
        ibv_cq* cq = ibv_create_cq(s.ctx, n, nullptr, ch, 0);
        if (cq) {
            cqs_.push_back(cq);
        }
        return cq;
    }

    ibv_comp_channel* CreateChannel(Side& s) {
        ibv_comp_channel* ch = ibv_create_comp_channel(s.ctx);
        if (ch) {
            channels_.push_back(ch);
        }
        return ch;
    }

    ibv_srq* CreateSrq(Side& s, uint32_t wr, uint32_t sge) {
        ibv_srq_init_attr init{};
        init.attr.max_wr = wr;
        init.attr.max_sge = sge;
        ibv_srq* srq = ibv_create_srq(s.pd, &init);
        if (srq) {
            srqs_.push_back(srq);
        } else {
            ADD_FAILURE() << "ibv_create_srq: " << std::strerror(errno);
        }
        return srq;
    }

    // A buffer of len bytes (zeroed) registered in pd (default: the side's).
    // Failures are recorded; check HasFailure() before use.
    Buf* Reg(Side& s, size_t len, int access, ibv_pd* pd = nullptr) {
        auto b = std::make_unique<Buf>();
        b->mem.assign(len, 0);
        b->mr = ibv_reg_mr(pd ? pd : s.pd, b->mem.data(), len, access);
        if (!b->mr) {
            ADD_FAILURE() << "ibv_reg_mr(" << len << ") on " << s.name << ": "
                          << std::strerror(errno);
        }
        bufs_.push_back(std::move(b));
        return bufs_.back().get();
    }

    // Deregister now (TearDown skips it).
    int Dereg(Buf* b) {
        int rc = ibv_dereg_mr(b->mr);
        b->mr = nullptr;
        return rc;
    }

    // Destroy both QPs of @c and deregister @bufs now; the time it took.
    long DestroyAndDereg(const Conn& c, std::initializer_list<Buf*> bufs) {
        const auto t0 = Clock::now();
        std::erase(qps_, c.a);
        std::erase(qps_, c.b);
        EXPECT_EQ(ibv_destroy_qp(c.a), 0);
        EXPECT_EQ(ibv_destroy_qp(c.b), 0);
        for (Buf* b : bufs) {
            EXPECT_EQ(Dereg(b), 0);
        }
        return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
    }

    // A lone RC QP of @s on its CQs (RcQpSpec's sizes), left in RESET;
    // destroyed in TearDown. nullptr if refused.
    ibv_qp* CreateQp(Side& s) {
        RcQpSpec qs;
        qs.send_cq = s.scq;
        qs.recv_cq = s.rcq;
        ibv_qp* qp = MakeRcQp(s.pd, qs);
        if (qp) {
            qps_.push_back(qp);
        }
        return qp;
    }

    // A connected RC pair (RESET -> INIT -> RTR -> RTS on both ends).
    // Failures are recorded; check HasFailure() before use.
    Conn Connect(const ConnSpec& s = {}) {
        Conn c;
        RcQpSpec qa;
        qa.send_cq = s.scq_a ? s.scq_a : a_.scq;
        qa.recv_cq = a_.rcq;
        qa.max_send_wr = qa.max_recv_wr = s.wr;
        qa.max_send_sge = qa.max_recv_sge = s.sge;
        qa.max_inline_data = s.inline_data;
        qa.sq_sig_all = s.sq_sig_all;
        RcQpSpec qb = qa;
        qb.send_cq = b_.scq;
        qb.recv_cq = s.rcq_b ? s.rcq_b : b_.rcq;
        qb.srq = s.srq_b;
        c.a = MakeRcQp(a_.pd, qa, &c.cap_a);
        c.b = MakeRcQp(b_.pd, qb, &c.cap_b);
        for (ibv_qp* qp : {c.a, c.b}) {
            if (qp) {
                qps_.push_back(qp);
            }
        }
        if (!c.a || !c.b) {
            ADD_FAILURE() << "ibv_create_qp: " << std::strerror(errno);
            return c;
        }
        auto rd_atom = [](int v) { return static_cast<uint8_t>(std::clamp(v, 1, 16)); };
        RtrSpec ra;
        ra.dest_qpn = c.b->qp_num;
        ra.dgid = b_.gid;
        ra.dlid = b_.lid;
        ra.min_rnr_timer = s.min_rnr_timer;
        ra.max_dest_rd_atomic = rd_atom(a_.dev.max_qp_rd_atom);
        RtrSpec rb = ra;
        rb.dest_qpn = c.a->qp_num;
        rb.dgid = a_.gid;
        rb.dlid = a_.lid;
        rb.max_dest_rd_atomic = rd_atom(b_.dev.max_qp_rd_atom);
        EXPECT_EQ(QpToInit(c.a, s.access), 0);
        EXPECT_EQ(QpToInit(c.b, s.access), 0);
        EXPECT_EQ(QpToRtr(c.a, ra), 0);
        EXPECT_EQ(QpToRtr(c.b, rb), 0);
        EXPECT_EQ(QpToRts(c.a, s.rnr_retry, rd_atom(a_.dev.max_qp_init_rd_atom)), 0);
        EXPECT_EQ(QpToRts(c.b, s.rnr_retry, rd_atom(b_.dev.max_qp_init_rd_atom)), 0);
        return c;
    }

    // Connect() and a buffer on each end: *src on the requester's (@src_len
    // bytes, kLocal), *dst on the responder's (@dst_len, @dst_access). A
    // fatal failure if any of it failed.
    void ConnectBufs(Conn* c, Buf** src, size_t src_len, Buf** dst, size_t dst_len,
                     int dst_access) {
        *c = Connect();
        *src = Reg(a_, src_len, kLocal);
        *dst = Reg(b_, dst_len, dst_access);
        ASSERT_FALSE(HasFailure());
    }

    // A connection whose responder receives from a new SRQ (16 WRs of one
    // SGE), in *srq. A fatal failure without the SRQ.
    void ConnectOnSrq(Conn* c, ibv_srq** srq) {
        *srq = CreateSrq(b_, 16, 1);
        ASSERT_NE(*srq, nullptr);
        ConnSpec cs;
        cs.srq_b = *srq;
        *c = Connect(cs);
    }

    // The requester's first WC is an error of status st for wr_id, the
    // next `chained` WRs (posted behind it) are flushed; then the QP is in
    // ERR, and a WR posted after that is flushed too. Nothing hangs.
    void ExpectRequesterError(const Conn& c, ibv_wc_status st, uint64_t wr_id, size_t chained = 0) {
        ibv_cq* scq = a_.scq;
        std::vector<ibv_wc> wc = PollCq(scq, 1 + chained);
        ASSERT_EQ(wc.size(), 1 + chained) << "no completion for the failing WR";
        EXPECT_TRUE(StatusMatches(a_.ctx, wc[0].status, st))
            << "got " << ibv_wc_status_str(wc[0].status) << ", expected " << ibv_wc_status_str(st);
        EXPECT_EQ(wc[0].wr_id, wr_id);
        EXPECT_EQ(wc[0].qp_num, c.a->qp_num);
        for (size_t i = 1; i <= chained; i++) {
            EXPECT_EQ(wc[i].wr_id, wr_id + i);
            EXPECT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR) << WcStr(wc[i]);
        }
        EXPECT_TRUE(WaitQpState(c.a, IBV_QPS_ERR)) << "state " << QpState(c.a);
        Buf* one = Reg(a_, 8, kLocal);
        ASSERT_FALSE(HasFailure());
        Wr later;
        later.wr_id = 0xF1u;
        later.sge = {one->sge(0, 8)};
        ASSERT_EQ(Post(c.a, later), 0);
        wc = PollCq(scq, 1);
        ASSERT_EQ(wc.size(), 1u) << "a WR posted in ERR was not flushed";
        EXPECT_EQ(wc[0].wr_id, 0xF1u);
        EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(wc[0].status);
    }

    Side a_;  // requester
    Side b_;  // responder
    std::vector<ibv_qp*> qps_;
    std::vector<ibv_srq*> srqs_;
    std::vector<std::unique_ptr<Buf>> bufs_;
    std::vector<ibv_cq*> cqs_;
    std::vector<ibv_comp_channel*> channels_;
    std::vector<ibv_pd*> pds_;
};

// Both ends on NTRDMA_IBDEV, as two contexts (as two processes would hold
// them): their QPs, connected with Connect(), name our own GID, so they
// are same-device loopback QPs. Runs in both topologies.
class SameDevice : public DataPath {
  protected:
    void SetUp() override {
        ASSERT_NO_FATAL_FAILURE(Open(DeviceName(), &a_));
        ASSERT_NO_FATAL_FAILURE(Open(DeviceName(), &b_));
    }
};

// The lines of /proc/self/maps (read in pieces of at most 511 bytes) that
// name a uverbs device: this process's mappings of one (the rings the
// provider mapped), in order. None if the file cannot be read.
inline std::vector<std::string> UverbsMapLines() {
    std::vector<std::string> out;
    FILE* f = std::fopen("/proc/self/maps", "r");
    if (!f) {
        return out;
    }
    char line[512];
    while (std::fgets(line, sizeof(line), f)) {
        if (std::strstr(line, "uverbs")) {
            out.emplace_back(line);
        }
    }
    std::fclose(f);
    return out;
}

// The start addresses of this process's mappings of a uverbs device.
inline std::set<uintptr_t> UverbsMappings() {
    std::set<uintptr_t> out;
    for (const std::string& line : UverbsMapLines()) {
        out.insert(std::strtoull(line.c_str(), nullptr, 16));
    }
    return out;
}

// The kernel's slab memory (/proc/meminfo "Slab:"), in KiB; -1 if unknown.
inline long SlabKiB() {
    FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) {
        return -1;
    }
    long kib = -1;
    char line[256];
    while (std::fgets(line, sizeof(line), f)) {
        if (std::sscanf(line, "Slab: %ld kB", &kib) == 1) {
            break;
        }
    }
    std::fclose(f);
    return kib;
}

}  // namespace ntv

#endif  // NTRDMA_VERBS_DATAPATH_HPP
