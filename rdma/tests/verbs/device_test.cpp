// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The device, its port, protection domains and memory regions (fixture
// Verbs: one device, no peer).

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

// ---- device and port ----

TEST_F(Verbs, QueryDeviceAdvertisesUsableLimits) {
    EXPECT_GE(dev_.max_qp, 1);
    EXPECT_GE(dev_.max_qp_wr, 256);
    EXPECT_GE(dev_.max_cqe, 256);
    EXPECT_GE(dev_.max_sge, 16);
    EXPECT_GE(dev_.max_mr, 1);
    EXPECT_GE(dev_.max_pd, 1);
    EXPECT_EQ(dev_.phys_port_cnt, 1);
    EXPECT_NE(dev_.node_guid, 0u);
}

// An InfiniBand port without a subnet manager: a LID of its own, GID 0 =
// fe80::node GUID (so LID-only and GRH address vectors both work).
TEST_F(Verbs, QueryPortLinkLayerLidAndGid) {
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_INFINIBAND);
    EXPECT_NE(p.lid, 0);
    EXPECT_GE(p.gid_tbl_len, 1);
    EXPECT_EQ(p.pkey_tbl_len, 1);
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 0, &gid), 0);
    EXPECT_EQ(gid.global.subnet_prefix, htobe64(0xfe80000000000000ull));
    EXPECT_EQ(gid.global.interface_id, dev_.node_guid);
    uint16_t pkey = 0;
    ASSERT_EQ(ibv_query_pkey(ctx_, 1, 0, &pkey), 0);
    EXPECT_EQ(pkey, 0xffff);
    EXPECT_NE(ibv_query_port(ctx_, 2, &p), 0);
}

// GID 1 holds the netdev's MAC: rdma_cm finds the device by it (the port
// connects through the iw_cm, see ntrdma_iwcm.c).
TEST_F(Verbs, GidOneIsTheMacForRdmaCm) {
    ibv_port_attr p{};
    ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
    EXPECT_EQ(p.gid_tbl_len, 2);
    ibv_gid gid{};
    ASSERT_EQ(ibv_query_gid(ctx_, 1, 1, &gid), 0);
    bool mac_set = false;
    for (int i = 0; i < 6; i++) mac_set |= gid.raw[i] != 0;
    EXPECT_TRUE(mac_set);
    for (int i = 6; i < 16; i++) EXPECT_EQ(gid.raw[i], 0) << "byte " << i;
}

// ---- PD and MR ----

TEST_F(Verbs, PdCreateDestroy) {
    ibv_pd* pd = ibv_alloc_pd(ctx_);
    ASSERT_NE(pd, nullptr);
    EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(Verbs, MrRegisterAndDeregister) {
    std::vector<char> buf(1 << 16);
    ibv_mr* mr =
        ibv_reg_mr(pd_, buf.data(), buf.size(),
                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    EXPECT_EQ(mr->lkey, mr->rkey);
    EXPECT_NE(mr->lkey, 0u);
    EXPECT_EQ(mr->length, buf.size());
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST_F(Verbs, MrRemoteWriteWithoutLocalWriteRejected) {
    std::vector<char> buf(4096);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_REMOTE_ATOMIC), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST_F(Verbs, MrZeroBasedRejectedMwBindTaken) {
    std::vector<char> buf(4096);
    // MW_BIND (memory windows, mw_test.cpp) is taken; zero-based MRs are not.
    ibv_mr* mr =
        ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ASSERT_NE(mr, nullptr) << std::strerror(errno);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(
        ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED),
        nullptr);
}

TEST_F(Verbs, MrOfUnmappedAddressFails) {
    const size_t len = 4 * 4096;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(munmap(p, len), 0);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(pd_, p, len, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_NE(errno, 0);
}

TEST_F(Verbs, MrZeroLengthFails) {
    char c;
    EXPECT_EQ(ibv_reg_mr(pd_, &c, 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
}

TEST_F(Verbs, MrKeysOfSuccessiveMrsAtTheSameIndexDiffer) {
    std::vector<char> buf(4096);
    uint32_t prev = 0;
    std::set<uint32_t> seen;
    for (int i = 0; i < 32; i++) {
        ibv_mr* mr = ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(mr, nullptr);
        if (i > 0) {
            EXPECT_EQ(mr->lkey >> 8, prev >> 8) << "index reused (lowest free)";
            EXPECT_NE(mr->lkey, prev) << "same key after dereg/reg at index " << (prev >> 8);
        }
        prev = mr->lkey;
        seen.insert(mr->lkey);
        ASSERT_EQ(ibv_dereg_mr(mr), 0);
    }
    // Random tags: many distinct keys, not a counter with a few values.
    EXPECT_GE(seen.size(), 16u);
}

}  // namespace
