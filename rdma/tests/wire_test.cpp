// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Unit tests of NTRDMA's wire checks: every value the peer writes into our
// memory goes through one of these before use.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <limits>

using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;

extern "C" {
#include "ntrdma_wire.h"
}

namespace {

constexpr u64 kWindow = 1ULL << 30;

TEST(RingMath, IndexWrapsAtPowerOfTwo) {
    EXPECT_EQ(ntrdma_ring_idx(0, NTRDMA_NET_RING), 0u);
    EXPECT_EQ(ntrdma_ring_idx(NTRDMA_NET_RING, NTRDMA_NET_RING), 0u);
    EXPECT_EQ(ntrdma_ring_idx(NTRDMA_NET_RING + 5, NTRDMA_NET_RING), 5u);
    EXPECT_EQ(ntrdma_ring_idx(0xffffffffu, NTRDMA_NET_RING), NTRDMA_NET_RING - 1);
}

TEST(RingMath, AvailAcceptsUpToSizeAcrossWrap) {
    EXPECT_TRUE(ntrdma_ring_avail_ok(10, 10, 256));
    EXPECT_TRUE(ntrdma_ring_avail_ok(266, 10, 256));
    EXPECT_FALSE(ntrdma_ring_avail_ok(267, 10, 256));
    // producer wrapped past 2^32, consumer not yet
    EXPECT_TRUE(ntrdma_ring_avail_ok(5, 0xfffffff0u, 256));
    // producer behind consumer: hostile or stale
    EXPECT_FALSE(ntrdma_ring_avail_ok(9, 10, 256));
    EXPECT_FALSE(ntrdma_ring_avail_ok(0x80000000u, 0, 256));
}

TEST(RingMath, NeedEventFiresOnlyWhenTheMoveCrossesTheEvent) {
    EXPECT_TRUE(ntrdma_need_event(10, 11, 10));                   // exactly the awaited one
    EXPECT_TRUE(ntrdma_need_event(10, 20, 5));                    // passed it in a batch
    EXPECT_FALSE(ntrdma_need_event(10, 10, 5));                   // not reached yet
    EXPECT_FALSE(ntrdma_need_event(10, 30, 20));                  // passed earlier already
    EXPECT_FALSE(ntrdma_need_event(10, 7, 7));                    // no move
    EXPECT_TRUE(ntrdma_need_event(0xfffffffeu, 3, 0xfffffff0u));  // across 2^32
}

TEST(Boot, AcceptsAValidBlock) {
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7, 0x100000,
                                     sizeof(ntrdma_inbox), kWindow),
              0);
}

TEST(Boot, RejectsMagicVersionEpoch) {
    const u32 sz = sizeof(ntrdma_inbox);
    EXPECT_EQ(ntrdma_wire_check_boot(0, NTRDMA_VERSION, 7, 0, sz, kWindow), -1);
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION + 1, 7, 0, sz, kWindow), -2);
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 0, 0, sz, kWindow), -3);
}

TEST(Boot, RejectsInboxOutsideTheWindowIncludingOverflow) {
    const u32 sz = sizeof(ntrdma_inbox);
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7, kWindow - sz, sz, kWindow),
              0);
    EXPECT_EQ(
        ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7, kWindow - sz + 1, sz, kWindow), -4);
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7, kWindow + 4096, sz, kWindow),
              -4);
    // offset + size wrapping around 2^64 must not pass
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7,
                                     std::numeric_limits<u64>::max() - 16, sz, kWindow),
              -4);
    // too small to hold an inbox
    EXPECT_EQ(ntrdma_wire_check_boot(NTRDMA_MAGIC, NTRDMA_VERSION, 7, 0, sz - 1, kWindow), -4);
}

ntrdma_wire_rxd Rxd(u64 addr, u32 len, u32 seq) {
    ntrdma_wire_rxd d{};
    d.addr = addr;
    d.len = len;
    d.seq = seq;
    return d;
}

TEST(Rxd, AcceptsInRangeBuffer) {
    auto d = Rxd(0x2000, 65536, 42);
    EXPECT_EQ(ntrdma_wire_check_rxd(&d, 42, 1, 70000, kWindow), 0);
}

TEST(Rxd, RejectsWrongSequenceAsNotYetPosted) {
    auto d = Rxd(0x2000, 65536, 41);
    EXPECT_EQ(ntrdma_wire_check_rxd(&d, 42, 1, 70000, kWindow), -1);
}

TEST(Rxd, RejectsLengthOutOfBounds) {
    auto small = Rxd(0x2000, 0, 1);
    auto big = Rxd(0x2000, 70001, 1);
    EXPECT_EQ(ntrdma_wire_check_rxd(&small, 1, 1, 70000, kWindow), -2);
    EXPECT_EQ(ntrdma_wire_check_rxd(&big, 1, 1, 70000, kWindow), -2);
}

TEST(Rxd, RejectsAddressPlusLengthBeyondWindow) {
    auto end = Rxd(kWindow - 100, 100, 1);
    auto over = Rxd(kWindow - 99, 100, 1);
    auto wrap = Rxd(std::numeric_limits<u64>::max() - 10, 100, 1);
    EXPECT_EQ(ntrdma_wire_check_rxd(&end, 1, 1, 70000, kWindow), 0);
    EXPECT_EQ(ntrdma_wire_check_rxd(&over, 1, 1, 70000, kWindow), -3);
    EXPECT_EQ(ntrdma_wire_check_rxd(&wrap, 1, 1, 70000, kWindow), -3);
}

ntrdma_wire_cqe Cqe(u32 len, u32 seq, u16 flags = 0) {
    ntrdma_wire_cqe c{};
    c.len = len;
    c.seq = seq;
    c.flags = flags;
    return c;
}

TEST(Cqe, AcceptsCompletionWithinPostedBuffer) {
    auto c = Cqe(1500, 9, NTRDMA_CQE_CSUM_OK);
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 9, 65536), 0);
    auto full = Cqe(65536, 9);
    EXPECT_EQ(ntrdma_wire_check_cqe(&full, 9, 65536), 0);
}

TEST(Cqe, RejectsSeqLengthAndUnknownFlags) {
    auto seq = Cqe(100, 8);
    auto zero = Cqe(0, 9);
    auto over = Cqe(65537, 9);
    auto flags = Cqe(100, 9, 0x80);
    EXPECT_EQ(ntrdma_wire_check_cqe(&seq, 9, 65536), -1);
    EXPECT_EQ(ntrdma_wire_check_cqe(&zero, 9, 65536), -2);
    EXPECT_EQ(ntrdma_wire_check_cqe(&over, 9, 65536), -2);
    EXPECT_EQ(ntrdma_wire_check_cqe(&flags, 9, 65536), -3);
}

TEST(Cqe, GsoNeedsSizeAndChecksumInsideTheFrame) {
    auto c = Cqe(60000, 3, NTRDMA_CQE_GSO_TCPV4 | NTRDMA_CQE_CSUM_OK);
    c.gso_size = 1448;
    c.csum_start = 34;
    c.csum_offset = 16;
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), 0);
    c.gso_size = 0;
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), -4);
    c.gso_size = 1448;
    c.csum_start = 59990;
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), -4);
    c.csum_start = 0;  // GSO without a partial checksum
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), -4);
    c.csum_start = 34;
    c.flags = NTRDMA_CQE_GSO_TCPV4;  // GSO without CSUM_OK
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), -4);
    c.flags = NTRDMA_CQE_GSO_TCPV4 | NTRDMA_CQE_GSO_TCPV6 | NTRDMA_CQE_CSUM_OK;
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 3, 65536), -4);
}

TEST(Layout, InboxFitsItsPagesAndRingsArePowersOfTwo) {
    EXPECT_EQ(NTRDMA_NET_RING & (NTRDMA_NET_RING - 1), 0u);
    EXPECT_EQ(sizeof(ntrdma_wire_rxd), 16u);
    EXPECT_EQ(sizeof(ntrdma_wire_cqe), 16u);
    EXPECT_EQ(offsetof(ntrdma_inbox, net_rxd) % 16, 0u);
    EXPECT_EQ(offsetof(ntrdma_inbox, net_cqe) % 16, 0u);
    EXPECT_LE(sizeof(ntrdma_inbox), 3u * 4096u);
}

}  // namespace
