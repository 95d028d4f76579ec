// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Extended CQs (rdma/provider/ntrdma_cq_ex.c): ibv_create_cq_ex() with the
// standard wc_flags, polled with ibv_start_poll()/ibv_next_poll()/
// ibv_end_poll() and read with ibv_wc_read_*(), as newer perftest and
// rdma-core's suite do. Two QPs of one device: both topologies.
#include <arpa/inet.h>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

class CqEx : public SameDevice {
  protected:
    // An extended CQ of b_, the receiving end (TearDown destroys it
    // after the QPs).
    ibv_cq_ex* CreateCqEx(uint64_t wc_flags) {
        ibv_cq_init_attr_ex a{};
        a.cqe = 64;
        a.wc_flags = wc_flags;
        ibv_cq_ex* cq = ibv_create_cq_ex(b_.ctx, &a);
        if (cq) {
            cqs_.push_back(ibv_cq_ex_to_cq(cq));
        }
        return cq;
    }

    ibv_cq_ex* cqx_ = nullptr;
};

// Three SEND_WITH_IMMs land in a receive CQ made with ibv_create_cq_ex;
// one start/next/end pass reads them in order with every standard field,
// an empty CQ says ENOENT, and ibv_poll_cq() still works on the same CQ.
TEST_F(CqEx, StartNextEndPollReadsEveryField) {
    cqx_ = CreateCqEx(IBV_WC_STANDARD_FLAGS);
    ASSERT_NE(cqx_, nullptr) << "ibv_create_cq_ex: " << std::strerror(errno);
    ConnSpec cs;
    cs.rcq_b = ibv_cq_ex_to_cq(cqx_);
    Conn c = Connect(cs);
    Buf* src = Reg(a_, 4096, kLocal);
    Buf* dst = Reg(b_, 4096, kLocal);
    ASSERT_FALSE(HasFailure());
    ibv_poll_cq_attr pa{};
    EXPECT_EQ(ibv_start_poll(cqx_, &pa), ENOENT) << "an empty CQ";
    for (uint32_t i = 0; i < 4; i++) {
        ASSERT_EQ(PostRecv(c.b, 10 + i, {dst->sge(i * 1024, 1024)}), 0);
    }
    for (uint32_t i = 0; i < 4; i++) {
        Wr w;
        w.op = IBV_WR_SEND_WITH_IMM;
        w.wr_id = i;
        w.imm = htonl(100 + i);
        w.sge = {src->sge(0, 100 + i)};
        ASSERT_EQ(Post(c.a, w), 0);
    }
    ASSERT_EQ(PollCq(a_.scq, 4).size(), 4u);
    std::vector<ibv_wc> drained;
    for (int tries = 0; tries < 500 && drained.empty(); tries++) {
        ibv_wc one{};
        if (ibv_poll_cq(ibv_cq_ex_to_cq(cqx_), 1, &one) == 1) {
            drained.push_back(one);  // the first, by the classic call
        } else {
            usleep(2000);
        }
    }
    ASSERT_EQ(drained.size(), 1u);
    EXPECT_EQ(drained[0].wr_id, 10u);
    ASSERT_EQ(ibv_start_poll(cqx_, &pa), 0);
    for (uint32_t i = 1; i < 4; i++) {
        if (i > 1) {
            ASSERT_EQ(ibv_next_poll(cqx_), 0) << "completion " << i;
        }
        EXPECT_EQ(cqx_->wr_id, 10u + i);
        EXPECT_EQ(cqx_->status, IBV_WC_SUCCESS);
        EXPECT_EQ(ibv_wc_read_opcode(cqx_), IBV_WC_RECV);
        EXPECT_EQ(ibv_wc_read_byte_len(cqx_), 100u + i);
        EXPECT_TRUE(ibv_wc_read_wc_flags(cqx_) & IBV_WC_WITH_IMM);
        EXPECT_EQ(ntohl(ibv_wc_read_imm_data(cqx_)), 100u + i);
        EXPECT_EQ(ibv_wc_read_qp_num(cqx_), c.b->qp_num);
        EXPECT_EQ(ibv_wc_read_src_qp(cqx_), c.a->qp_num);
    }
    EXPECT_EQ(ibv_next_poll(cqx_), ENOENT);
    ibv_end_poll(cqx_);
    EXPECT_EQ(ibv_start_poll(cqx_, &pa), ENOENT) << "entries came back";
}

// What the device does not have is refused, not ignored.
TEST_F(CqEx, TimestampsAndOtherExtensionsRefused) {
    errno = 0;
    EXPECT_EQ(CreateCqEx(uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
              nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    ibv_cq_init_attr_ex a{};
    a.cqe = 8;
    a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
    a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    errno = 0;
    EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &a), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace ntv
