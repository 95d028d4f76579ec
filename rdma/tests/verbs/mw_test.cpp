// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory windows (rdma/ntrdma_mw.c) on an RC connection of one device
// (both topologies): the responder b_ binds windows onto an MR of its own
// (registered with MW_BIND, no remote access of its own) and the requester
// a_ reaches the MR only through them. Checked beyond rdma-core's suite:
// the window's range and access bound every remote access, a window key is
// no lkey, binds that break the rules complete MW_BIND_ERR, a bound type 2
// window is not bound again, an MR with a bound window is not deregistered
// (EBUSY), and unbinding (type 1) or invalidating (type 2) takes effect;
// SENDs around a bind keep their order when the first is NAKed (RNR);
// a bind racing the dereg of its MR: one of them fails.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

constexpr size_t kLen = 8192;
constexpr int kMwBind = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
// Test builds: how long dereg of an MW_BIND MR sleeps past its check for
// bound windows (ntrdma_mr.c).
constexpr const char* kDeregDelay = "/sys/module/ntrdma/parameters/dereg_delay_ms";

bool SetDeregDelay(unsigned ms) {
    std::ofstream f(kDeregDelay);
    f << ms << std::endl;
    return f.good();
}

class Mw : public SameDevice {
  protected:
    void SetUp() override {
        SameDevice::SetUp();
        Prepare();
    }

    // A connection, an MR with MW_BIND on b_ and a source on a_.
    void Prepare() {
        c_ = Connect();
        mr_ = Reg(b_, kLen, kMwBind);
        src_ = Reg(a_, kLen, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src_->p(), kLen, 3);
    }

    void TearDown() override {
        for (ibv_mw* mw : mws_) {
            EXPECT_EQ(ibv_dealloc_mw(mw), 0);
        }
        SameDevice::TearDown();
    }

    ibv_mw* AllocMw(ibv_mw_type type) {
        ibv_mw* mw = ibv_alloc_mw(b_.pd, type);
        if (!mw) {
            ADD_FAILURE() << "ibv_alloc_mw: " << std::strerror(errno);
        } else {
            mws_.push_back(mw);
        }
        return mw;
    }

    // Bind @mw (type 1, ibv_bind_mw) to [off, off + len) of @mr through
    // the responder's QP; the completion's status.
    ibv_wc_status Bind1(ibv_mw* mw, Buf* mr, size_t off, size_t len, unsigned access) {
        ibv_mw_bind b{};
        b.wr_id = 77;
        b.send_flags = IBV_SEND_SIGNALED;
        b.bind_info.mr = mr->mr;
        b.bind_info.addr = mr->addr(off);
        b.bind_info.length = len;
        b.bind_info.mw_access_flags = access;
        EXPECT_EQ(ibv_bind_mw(c_.b, mw, &b), 0);
        return BindStatus();
    }

    // A signalled type 2 bind of @mw with key @rkey (IBV_WR_BIND_MW).
    static ibv_send_wr Bind2Wr(ibv_mw* mw, uint32_t rkey, Buf* mr, size_t off, size_t len,
                               unsigned access) {
        ibv_send_wr wr{};
        wr.wr_id = 78;
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = rkey;
        wr.bind_mw.bind_info.mr = mr->mr;
        wr.bind_mw.bind_info.addr = mr->addr(off);
        wr.bind_mw.bind_info.length = len;
        wr.bind_mw.bind_info.mw_access_flags = access;
        return wr;
    }

    // Bind @mw (type 2) with key @rkey through the responder's QP; the status.
    ibv_wc_status Bind2(ibv_mw* mw, uint32_t rkey, Buf* mr, size_t off, size_t len,
                        unsigned access) {
        ibv_send_wr wr = Bind2Wr(mw, rkey, mr, off, len, access);
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(c_.b, &wr, &bad), 0);
        return BindStatus();
    }

    ibv_wc_status BindStatus() {
        std::vector<ibv_wc> wc = PollCq(b_.scq, 1);
        if (wc.size() != 1) {
            ADD_FAILURE() << "no bind completion";
            return IBV_WC_GENERAL_ERR;
        }
        EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW) << WcStr(wc[0]);
        return wc[0].status;
    }

    // An RDMA @op of @len bytes at @off of the MR through @rkey; its status.
    // (from @requester, default c_.a)
    ibv_wc_status Access(ibv_wr_opcode op, uint32_t rkey, size_t off, uint32_t len,
                         ibv_qp* requester = nullptr) {
        Wr w = WriteWr(5, src_->sge(0, len), mr_, off);
        w.op = op;
        w.rkey = rkey;
        EXPECT_EQ(Post(requester ? requester : c_.a, w), 0);
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        if (wc.size() != 1) {
            ADD_FAILURE() << "no completion";
            return IBV_WC_GENERAL_ERR;
        }
        return wc[0].status;
    }

    Conn c_;
    Buf* mr_ = nullptr;
    Buf* src_ = nullptr;
    std::vector<ibv_mw*> mws_;
};

// Type 1: WRITE and READ inside the window land; the data is the MR's.
TEST_F(Mw, Type1WriteAndReadThroughTheWindow) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    const uint32_t before = mw->rkey;
    ASSERT_EQ(Bind1(mw, mr_, 4096, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ),
              IBV_WC_SUCCESS);
    EXPECT_NE(mw->rkey, before) << "ibv_bind_mw gives the window a new key";
    EXPECT_EQ(mw->rkey >> 8, before >> 8) << "on its own index";
    ASSERT_EQ(Access(IBV_WR_RDMA_WRITE, mw->rkey, 4096, 4096), IBV_WC_SUCCESS);
    EXPECT_EQ(FirstDiff(src_->p(), mr_->p(4096), 4096), -1);
    std::memset(src_->p(), 0, 4096);
    ASSERT_EQ(Access(IBV_WR_RDMA_READ, mw->rkey, 4096, 4096), IBV_WC_SUCCESS);
    EXPECT_EQ(FirstDiff(src_->p(), mr_->p(4096), 4096), -1);
}

// One byte before the window: a remote access error (the QP fails).
TEST_F(Mw, OutsideTheWindowIsARemoteAccessError) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ASSERT_EQ(Bind1(mw, mr_, 4096, 4096, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, mw->rkey, 4095, 64), IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(mr_->p(4095)[0], 0) << "a byte outside the window was written";
}

// The window grants READ only: a WRITE through it fails.
TEST_F(Mw, TheWindowsAccessBoundsIt) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ASSERT_EQ(Bind1(mw, mr_, 0, kLen, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, mw->rkey, 0, 64), IBV_WC_REM_ACCESS_ERR);
}

// Type 1 bound with length 0: unbound, its old key no longer works.
TEST_F(Mw, Type1UnbindEndsRemoteAccess) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ASSERT_EQ(Bind1(mw, mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    const uint32_t bound = mw->rkey;
    ASSERT_EQ(Access(IBV_WR_RDMA_WRITE, bound, 0, 64), IBV_WC_SUCCESS);
    ASSERT_EQ(Bind1(mw, mr_, 0, 0, 0), IBV_WC_SUCCESS);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, bound, 0, 64), IBV_WC_REM_ACCESS_ERR);
}

// An MR without MW_BIND takes no window.
TEST_F(Mw, BindNeedsAnMrWithMwBind) {
    Buf* plain = Reg(b_, 4096, kLocal);
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(Bind2(mw, ibv_inc_rkey(mw->rkey), plain, 0, 4096, IBV_ACCESS_REMOTE_WRITE),
              IBV_WC_MW_BIND_ERR);
}

TEST_F(Mw, WindowKeyAsLkeyIsAProtectionError) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ASSERT_EQ(Bind1(mw, mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    // b_ sends from its MR, naming the window's key as the lkey
    Wr w;
    w.sge = {ibv_sge{mr_->addr(0), 64, mw->rkey}};
    ASSERT_EQ(PostRecv(c_.a, 1, {src_->sge(0, 64)}), 0);
    ASSERT_EQ(Post(c_.b, w), 0);
    std::vector<ibv_wc> wc = PollCq(b_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR) << WcStr(wc[0]);
}

// Type 2: bound once (a second bind of the bound window fails), through
// its QP only; LOCAL_INV frees it for a new bind.
TEST_F(Mw, Type2BindInvalidateRebind) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
    ASSERT_NE(mw, nullptr);
    const uint32_t k1 = ibv_inc_rkey(mw->rkey);
    ASSERT_EQ(Bind2(mw, k1, mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    ASSERT_EQ(Access(IBV_WR_RDMA_WRITE, k1, 0, 64), IBV_WC_SUCCESS);

    ibv_send_wr inv{};
    ibv_send_wr* bad = nullptr;
    inv.wr_id = 79;
    inv.opcode = IBV_WR_LOCAL_INV;
    inv.send_flags = IBV_SEND_SIGNALED;
    inv.invalidate_rkey = k1;
    ASSERT_EQ(ibv_post_send(c_.b, &inv, &bad), 0);
    std::vector<ibv_wc> wc = PollCq(b_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    const uint32_t k2 = ibv_inc_rkey(k1);
    ASSERT_EQ(Bind2(mw, k2, mr_, 0, 4096, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, k2, 0, 64), IBV_WC_SUCCESS);
    EXPECT_EQ(Bind2(mw, ibv_inc_rkey(k2), mr_, 0, 64, IBV_ACCESS_REMOTE_WRITE), IBV_WC_MW_BIND_ERR)
        << "a bound type 2 window was bound again";
}

// Two SENDs with a type 2 bind between them: the bind is a local operation
// whose message number never reaches the responder (the second SEND says
// where the skipped run starts). The first SEND finds no receive (RNR NAK)
// and is sent again; the second must not overtake it, and the bind must
// not run twice. Both arrive, in order, and all three complete in order.
TEST_F(Mw, SendsAroundABindStayInOrderAfterAnRnr) {
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
    ASSERT_NE(mw, nullptr);
    Buf* out = Reg(b_, 128, kLocal);
    Buf* in = Reg(a_, 128, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(out->p(), 128, 9);
    Wr first;
    first.wr_id = 1;
    first.sge = {out->sge(0, 64)};
    Wr second = first;
    second.wr_id = 3;
    second.sge = {out->sge(64, 64)};
    ibv_send_wr bind = Bind2Wr(mw, ibv_inc_rkey(mw->rkey), mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE);
    ibv_send_wr* bad = nullptr;
    bind.wr_id = 2;
    ASSERT_EQ(Post(c_.b, first), 0);
    ASSERT_EQ(ibv_post_send(c_.b, &bind, &bad), 0);
    ASSERT_EQ(Post(c_.b, second), 0);
    EXPECT_EQ(Drain(b_.scq, 200).size(), 0u) << "completed before any receive was posted";
    ASSERT_EQ(PostRecv(c_.a, 11, {in->sge(0, 64)}), 0);
    ASSERT_EQ(PostRecv(c_.a, 12, {in->sge(64, 64)}), 0);
    std::vector<ibv_wc> s = PollCq(b_.scq, 3);
    ASSERT_EQ(s.size(), 3u) << "the requester did not complete all three";
    for (size_t i = 0; i < s.size(); i++) {
        EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << WcStr(s[i]);
        EXPECT_EQ(s[i].wr_id, i + 1) << "completed out of order";
    }
    std::vector<ibv_wc> r = PollCq(a_.rcq, 2);
    ASSERT_EQ(r.size(), 2u) << "a SEND never arrived";
    for (size_t i = 0; i < r.size(); i++) {
        EXPECT_EQ(r[i].status, IBV_WC_SUCCESS) << WcStr(r[i]);
        EXPECT_EQ(r[i].wr_id, 11 + i);
        EXPECT_EQ(r[i].byte_len, 64u);
    }
    EXPECT_EQ(FirstDiff(out->p(), in->p(), 128), -1) << "the SENDs arrived out of order";
}

// A type 2 window is reached only through the QP it was bound through.
TEST_F(Mw, Type2OnlyThroughItsQp) {
    Conn other = Connect();
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
    ASSERT_NE(mw, nullptr);
    const uint32_t k = ibv_inc_rkey(mw->rkey);
    ASSERT_EQ(Bind2(mw, k, mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, k, 0, 64, other.a), IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(Access(IBV_WR_RDMA_WRITE, k, 0, 64), IBV_WC_SUCCESS);
}

// An MR with a bound window is not deregistered; once the window is
// gone it is.
TEST_F(Mw, DeregWithABoundWindowIsBusy) {
    Buf* mr = Reg(b_, 4096, kMwBind);
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_FALSE(HasFailure());
    ASSERT_EQ(Bind1(mw, mr, 0, 4096, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
    ibv_mr* m = mr->mr;
    EXPECT_EQ(ibv_dereg_mr(m), EBUSY);
    ASSERT_EQ(ibv_dealloc_mw(mw), 0);
    mws_.clear();
    EXPECT_EQ(Dereg(mr), 0);
}

// A bind of a window (from the SQ) onto an MR while another thread
// deregisters the MR: dereg sleeps past its check for bound windows
// (kDeregDelay), the bind runs inside that sleep. One of them fails:
// either the dereg (EBUSY) and the window works, or the bind (MW_BIND_ERR)
// and the window grants nothing. A window bound to a deregistered MR
// would go on granting remote access to its pages.
TEST_F(Mw, BindRacingDeregOneOfThemFails) {
    if (!std::filesystem::exists(kDeregDelay)) {
        GTEST_SKIP() << "ntrdma built without CONFIG_NTRDMA_TEST_HOOKS (no " << kDeregDelay << ")";
    }
    Conn other = Connect();  // a failed bind takes c_.b to the error state
    ibv_mw* mw = AllocMw(IBV_MW_TYPE_1);
    ASSERT_NE(mw, nullptr);
    ASSERT_TRUE(SetDeregDelay(600));
    ibv_mr* m = mr_->mr;
    std::future<int> dereg = std::async(std::launch::async, [m] { return ibv_dereg_mr(m); });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const ibv_wc_status bind = Bind1(mw, mr_, 0, kLen, IBV_ACCESS_REMOTE_WRITE);
    const int rc = dereg.get();
    EXPECT_TRUE(SetDeregDelay(0));
    const ibv_wc_status write = Access(IBV_WR_RDMA_WRITE, mw->rkey, 0, 64, other.a);
    if (rc == 0) {
        mr_->mr = nullptr;  // deregistered: not again in TearDown
        EXPECT_EQ(bind, IBV_WC_MW_BIND_ERR) << "a window was bound to an MR being deregistered";
        EXPECT_EQ(write, IBV_WC_REM_ACCESS_ERR)
            << "the window of a deregistered MR grants remote access";
        EXPECT_TRUE(std::all_of(mr_->p(0), mr_->p(64), [](uint8_t b) { return b == 0; }))
            << "the deregistered MR's pages were written";
    } else {
        EXPECT_EQ(rc, EBUSY) << "ibv_dereg_mr: " << std::strerror(rc);
        EXPECT_EQ(bind, IBV_WC_SUCCESS);
        EXPECT_EQ(write, IBV_WC_SUCCESS);
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
        mws_.clear();
    }
}

// The Mw fixture with its ends on the two devices of the loopback NTB:
// the WRITE's segments cross the engine and come in receive passes that
// an invalidation on the target can run between.
class MwAcross : public Mw {
  protected:
    void SetUp() override {
        DataPath::SetUp();
        if (!IsSkipped() && !HasFailure()) {
            Prepare();
        }
    }

    static constexpr size_t kBig = 64 << 20;

    // A type 2 window over all of @dst with @access, bound on b's QP.
    uint32_t BindBig(Buf* dst, int access) {
        ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
        EXPECT_NE(mw, nullptr);
        if (mw == nullptr) {
            return 0;
        }
        const uint32_t k = ibv_inc_rkey(mw->rkey);
        EXPECT_EQ(Bind2(mw, k, dst, 0, kBig, access), IBV_WC_SUCCESS);
        return k;
    }

    // Until @seen's first byte is @v: the access is under way.
    static void AwaitFirstByte(Buf* seen, uint8_t v) {
        const volatile uint8_t* first = seen->p();
        const auto deadline = Clock::now() + milliseconds(10000);
        while (*first != v && Clock::now() < deadline) {
        }
        ASSERT_EQ(*first, v) << "the access's first bytes did not land in 10 s";
    }

    // LOCAL_INV of @k on @qp (of b's PD), waited for.
    void LocalInv(uint32_t k, ibv_qp* qp) {
        ibv_send_wr inv{};
        ibv_send_wr* bad = nullptr;
        inv.wr_id = 79;
        inv.opcode = IBV_WR_LOCAL_INV;
        inv.send_flags = IBV_SEND_SIGNALED;
        inv.invalidate_rkey = k;
        ASSERT_EQ(ibv_post_send(qp, &inv, &bad), 0);
        std::vector<ibv_wc> iw = PollCq(b_.scq, 1);
        ASSERT_EQ(iw.size(), 1u);
        ASSERT_EQ(iw[0].status, IBV_WC_SUCCESS) << WcStr(iw[0]);
    }

    // Once @seen's first byte is @v (the access is under way), LOCAL_INV
    // of @k on @qp (of b's PD), waited for.
    void InvalidateOnceStarted(Buf* seen, uint8_t v, uint32_t k, ibv_qp* qp) {
        ASSERT_NO_FATAL_FAILURE(AwaitFirstByte(seen, v));
        LocalInv(k, qp);
    }

    // A type 2 window over all of a new MR of b (0xA5), READ whole into
    // a sink of a; once the first bytes are in, @revoke(window, key, a
    // second connection between the PDs) ends its access (@what), then
    // the MR's bytes change (0x5A). None of the new bytes may reach the
    // sink, and the READ fails with a remote access error.
    void ReadThenRevoke(const char* what,
                        const std::function<void(ibv_mw*, uint32_t, const Conn&)>& revoke) {
        Buf* src = Reg(b_, kBig, kMwBind);
        Buf* sink = Reg(a_, kBig, kLocal);
        ASSERT_FALSE(HasFailure());
        std::memset(src->p(), 0xA5, kBig);
        ibv_mw* mw = AllocMw(IBV_MW_TYPE_2);
        ASSERT_NE(mw, nullptr);
        const uint32_t k = ibv_inc_rkey(mw->rkey);
        ASSERT_EQ(Bind2(mw, k, src, 0, kBig, IBV_ACCESS_REMOTE_READ), IBV_WC_SUCCESS);
        const Conn other = Connect();
        ASSERT_FALSE(HasFailure());
        Wr r = ReadWr(6, sink->sge(0, kBig), src);
        r.rkey = k;
        ASSERT_EQ(Post(c_.a, r), 0);
        ASSERT_NO_FATAL_FAILURE(AwaitFirstByte(sink, 0xA5));
        ASSERT_NO_FATAL_FAILURE(revoke(mw, k, other));
        std::memset(src->p(), 0x5A, kBig);
        ibv_wc rw{};
        for (int i = 0; i < 2 && rw.wr_id != 6; i++) {  // a SEND's may come first
            std::vector<ibv_wc> wc = PollCq(a_.scq, 1, 30000);
            ASSERT_EQ(wc.size(), 1u) << "no completion for the READ";
            rw = wc[0];
        }
        ASSERT_EQ(rw.wr_id, 6u);
        std::this_thread::sleep_for(milliseconds(200));
        const size_t old_bytes = Count(sink, 0xA5);
        const size_t new_bytes = Count(sink, 0x5A);
        std::cout << "[ NOTE     ] " << old_bytes << " of " << kBig << " bytes read before the "
                  << what << " completed" << std::endl;
        if (old_bytes == kBig) {
            GTEST_SKIP() << "the READ was all done before the " << what
                         << " completed: nothing shown";
        }
        EXPECT_EQ(rw.status, IBV_WC_REM_ACCESS_ERR) << WcStr(rw);
        EXPECT_EQ(new_bytes, 0u) << "bytes read after the " << what << " completed";
    }

    static size_t Count(Buf* b, uint8_t v) { return std::count(b->p(), b->p() + kBig, v); }
};

// Type 2: LOCAL_INV while a large WRITE through the window comes in (on
// the checked path: windows are never placed directly). Once the LOCAL_INV
// completed, no later byte of the WRITE lands, and the WRITE fails with a
// remote access error.
TEST_F(MwAcross, NothingLandsAfterALocalInvUnderAWrite) {
    Buf* dst = Reg(b_, kBig, kMwBind);
    Buf* src = Reg(a_, kBig, kLocal);
    ASSERT_FALSE(HasFailure());
    std::memset(src->p(), 0xA5, kBig);
    const uint32_t k = BindBig(dst, IBV_ACCESS_REMOTE_WRITE);
    ASSERT_FALSE(HasFailure());
    Wr w = WriteWr(5, src->sge(0, kBig), dst);
    w.rkey = k;
    ASSERT_EQ(Post(c_.a, w), 0);
    InvalidateOnceStarted(dst, 0xA5, k, c_.b);
    ASSERT_FALSE(HasFailure());
    const size_t at_inv = kBig - Count(dst, 0);
    std::vector<ibv_wc> ww = PollCq(a_.scq, 1, 30000);
    ASSERT_EQ(ww.size(), 1u) << "no completion for the WRITE";
    std::this_thread::sleep_for(milliseconds(200));
    const size_t after = kBig - Count(dst, 0);
    std::cout << "[ NOTE     ] " << at_inv << " of " << kBig
              << " bytes in when the LOCAL_INV completed" << std::endl;
    if (at_inv == kBig) {
        GTEST_SKIP() << "the WRITE was all in before the LOCAL_INV completed: nothing shown";
    }
    EXPECT_EQ(ww[0].status, IBV_WC_REM_ACCESS_ERR) << WcStr(ww[0]);
    EXPECT_EQ(after, at_inv) << "bytes landed after the LOCAL_INV completed";
}

// A large READ through a window goes out; once its first bytes are in,
// the window stops granting access, by an operation on another QP than
// the READ's (whose SQ sends all its answers before its next work
// request). The target's bytes change as soon as that completed: no byte
// read after it reaches the reader (none of the new value in its sink),
// and the READ fails with a remote access error.
TEST_F(MwAcross, NothingIsReadAfterALocalInvUnderARead) {
    ASSERT_NO_FATAL_FAILURE(ReadThenRevoke(
        "LOCAL_INV", [&](ibv_mw*, uint32_t k, const Conn& other) { LocalInv(k, other.b); }));
}

// The same with the invalidation sent by the reader: a SEND with
// invalidate of the window's key, on a second connection to the target's
// PD. Its receive completes only once no copy of the READ's answer reads
// the pages any more.
TEST_F(MwAcross, NothingIsReadAfterASendWithInvUnderARead) {
    Buf* msg = Reg(a_, 4096, kLocal);
    Buf* rcv = Reg(b_, 4096, kLocal);
    ASSERT_FALSE(HasFailure());
    auto send_inv = [&](ibv_mw*, uint32_t k, const Conn& other) {
        ASSERT_EQ(PostRecv(other.b, 81, {rcv->sge(0, 8)}), 0);
        Wr inv = SendWr(80, msg->sge(0, 8));
        inv.op = IBV_WR_SEND_WITH_INV;
        inv.imm = k;  // invalidate_rkey shares imm_data's place
        ASSERT_EQ(Post(other.a, inv), 0);
        std::vector<ibv_wc> got = PollCq(b_.rcq, 1, 30000);
        ASSERT_EQ(got.size(), 1u) << "no receive for the SEND with invalidate";
        ASSERT_EQ(got[0].status, IBV_WC_SUCCESS) << WcStr(got[0]);
        ASSERT_TRUE(got[0].wc_flags & IBV_WC_WITH_INV);
        ASSERT_EQ(got[0].invalidated_rkey, k);
    };
    ASSERT_NO_FATAL_FAILURE(ReadThenRevoke("SEND_WITH_INV receive", send_inv));
}

// The same with the window freed: ibv_dealloc_mw returns once no copy
// through it reads the pages any more.
TEST_F(MwAcross, NothingIsReadAfterAWindowIsFreedUnderARead) {
    ASSERT_NO_FATAL_FAILURE(ReadThenRevoke("dealloc_mw", [&](ibv_mw* mw, uint32_t, const Conn&) {
        mws_.erase(std::find(mws_.begin(), mws_.end(), mw));
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
    }));
}

}  // namespace
}  // namespace ntv
