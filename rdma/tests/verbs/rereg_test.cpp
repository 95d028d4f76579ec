// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ibv_rereg_mr() (ntrdma_rereg_user_mr): a new translation, access or PD
// takes effect for remote access at once, under the same keys (as HCAs
// keep them: rdma-core's suite counts on it), and the old translation,
// access and PD are reached by nothing afterwards. Two QPs of one device:
// both topologies.
#include "verbs_datapath.hpp"

namespace ntv {
namespace {

class Rereg : public SameDevice {
  protected:
    // WRITE 64 bytes of @src to @raddr under @rkey on a fresh connection:
    // the requester's completion status.
    ibv_wc_status WriteOnce(Buf* src, uint64_t raddr, uint32_t rkey) {
        Conn c = Connect();
        if (HasFailure()) {
            return IBV_WC_GENERAL_ERR;
        }
        Wr w;
        w.op = IBV_WR_RDMA_WRITE;
        w.sge = {src->sge(0, 64)};
        w.raddr = raddr;
        w.rkey = rkey;
        if (Post(c.a, w)) {
            return IBV_WC_GENERAL_ERR;
        }
        std::vector<ibv_wc> wc = PollCq(a_.scq, 1);
        return wc.size() == 1 ? wc[0].status : IBV_WC_GENERAL_ERR;
    }
};

TEST_F(Rereg, TranslationAccessAndPdChangeUnderTheSameKeys) {
    Buf* src = Reg(a_, 64, kLocal);
    Buf* dst = Reg(b_, 4096, kRemoteAll);
    std::vector<uint8_t> other(4096, 0);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 64, 9);
    const uint32_t rkey1 = dst->mr->rkey;
    ASSERT_EQ(WriteOnce(src, dst->addr(0), rkey1), IBV_WC_SUCCESS);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(), 64), -1);

    // access: remote write taken away
    ASSERT_EQ(ibv_rereg_mr(dst->mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, kLocal), 0);
    EXPECT_EQ(dst->mr->rkey, rkey1) << "the keys stay";
    EXPECT_EQ(WriteOnce(src, dst->addr(0), rkey1), IBV_WC_REM_ACCESS_ERR);

    // translation: the same MR now maps `other`, remote write again
    ASSERT_EQ(ibv_rereg_mr(dst->mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                           nullptr, other.data(), other.size(), kRemoteAll),
              0);
    EXPECT_EQ(dst->mr->rkey, rkey1) << "the keys stay";
    std::memset(dst->p(), 0, 64);
    ASSERT_EQ(WriteOnce(src, reinterpret_cast<uintptr_t>(other.data()) + 128, rkey1),
              IBV_WC_SUCCESS);
    EXPECT_EQ(FirstDiff(src->p(), other.data() + 128, 64), -1) << "the new pages";
    for (size_t i = 0; i < 64; i++) {
        ASSERT_EQ(dst->p()[i], 0) << "the old pages changed at " << i;
    }
    EXPECT_EQ(WriteOnce(src, dst->addr(0), rkey1), IBV_WC_REM_ACCESS_ERR) << "the old range";

    // PD: moved to another PD, the connection's PD no longer reaches it
    ibv_pd* pd2 = AllocPd(b_);
    ASSERT_NE(pd2, nullptr);
    ASSERT_EQ(ibv_rereg_mr(dst->mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
    EXPECT_EQ(dst->mr->pd, pd2);
    EXPECT_EQ(WriteOnce(src, reinterpret_cast<uintptr_t>(other.data()), rkey1),
              IBV_WC_REM_ACCESS_ERR);
    // and back: the connection's PD reaches it again
    ASSERT_EQ(ibv_rereg_mr(dst->mr, IBV_REREG_MR_CHANGE_PD, b_.pd, nullptr, 0, 0), 0);
    EXPECT_EQ(WriteOnce(src, reinterpret_cast<uintptr_t>(other.data()), rkey1), IBV_WC_SUCCESS);
    ASSERT_EQ(ibv_dereg_mr(dst->mr), 0);  // before its PD (TearDown: PDs last)
    dst->mr = nullptr;
}

}  // namespace
}  // namespace ntv
