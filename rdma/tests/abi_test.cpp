// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The verbs user ABI (include/uapi/rdma/ntrdma-abi.h) is shared by the
// kernel and the provider, which may be built at different times: its layout
// is frozen here. Changing any of these numbers needs a new
// NTRDMA_UVERBS_ABI_VERSION.

#include <gtest/gtest.h>

#include <cstddef>

extern "C" {
#include <rdma/ntrdma-abi.h>
}

namespace {

TEST(VerbsAbi, VersionAndLimits) {
    EXPECT_EQ(NTRDMA_UVERBS_ABI_VERSION, 2);
    EXPECT_EQ(NTRDMA_MAX_SGE, 16);
    EXPECT_EQ(NTRDMA_MAX_INLINE, NTRDMA_MAX_SGE * sizeof(ntrdma_sge));
}

TEST(VerbsAbi, RingControlBlock) {
    EXPECT_EQ(sizeof(ntrdma_ring_ctl), size_t{NTRDMA_RING_CTL_SIZE});
    // Producer, consumer and arm words on separate 64-byte lines.
    EXPECT_EQ(offsetof(ntrdma_ring_ctl, prod), 0u);
    EXPECT_EQ(offsetof(ntrdma_ring_ctl, cons), 64u);
    EXPECT_EQ(offsetof(ntrdma_ring_ctl, arm), 128u);
}

TEST(VerbsAbi, EntrySizes) {
    EXPECT_EQ(sizeof(ntrdma_sge), 16u);
    EXPECT_EQ(sizeof(ntrdma_cqe), 40u);
    EXPECT_EQ(sizeof(ntrdma_send_wqe), 320u);
    EXPECT_EQ(offsetof(ntrdma_send_wqe, sge), 64u);
    EXPECT_EQ(offsetof(ntrdma_send_wqe, inline_data), 64u);
    EXPECT_EQ(sizeof(ntrdma_recv_wqe), 304u);
    EXPECT_EQ(offsetof(ntrdma_recv_wqe, sge), 16u);
    // What the peer writes when it places a SEND (ntrdma_verbs_wire.h).
    EXPECT_EQ(offsetof(ntrdma_recv_wqe, done), 272u);
    EXPECT_EQ(sizeof(ntrdma_recv_done), 32u);
    EXPECT_EQ(offsetof(ntrdma_recv_done, seq), 28u);
    EXPECT_EQ(offsetof(ntrdma_ring_ctl, cq_arm), 192u);
}

TEST(VerbsAbi, Responses) {
    // Multiples of 8: they follow the core's response in one buffer.
    EXPECT_EQ(sizeof(ntrdma_alloc_ucontext_resp), 32u);
    EXPECT_EQ(sizeof(ntrdma_create_cq_resp), 24u);
    EXPECT_EQ(sizeof(ntrdma_create_srq_resp), 24u);
    EXPECT_EQ(sizeof(ntrdma_create_qp_resp), 48u);
}

}  // namespace
