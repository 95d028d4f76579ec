// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Unit tests of NTRDMA's wire checks: every value the peer writes into our
// memory goes through one of these before use.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_types.hpp"

extern "C" {
#include "ntrdma_net_wire.h"
#include "ntrdma_verbs_wire.h"
#include "ntrdma_wire.h"
}

namespace {

constexpr u64 kWindow = 1ULL << 30;

TEST(RingMath, IndexWrapsAtPowerOfTwo) {
    EXPECT_EQ(ntrdma_ring_idx(0, NTRDMA_TQP_RING), 0u);
    EXPECT_EQ(ntrdma_ring_idx(NTRDMA_TQP_RING, NTRDMA_TQP_RING), 0u);
    EXPECT_EQ(ntrdma_ring_idx(NTRDMA_TQP_RING + 5, NTRDMA_TQP_RING), 5u);
    EXPECT_EQ(ntrdma_ring_idx(0xffffffffu, NTRDMA_TQP_RING), NTRDMA_TQP_RING - 1);
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

ntrdma_wire_cqe Cqe(u32 len, u32 seq) {
    ntrdma_wire_cqe c{};
    c.len = len;
    c.seq = seq;
    return c;
}

TEST(Cqe, AcceptsCompletionWithinPostedBuffer) {
    auto c = Cqe(1500, 9);
    EXPECT_EQ(ntrdma_wire_check_cqe(&c, 9, 65536), 0);
    auto full = Cqe(65536, 9);
    EXPECT_EQ(ntrdma_wire_check_cqe(&full, 9, 65536), 0);
}

TEST(Cqe, RejectsWrongSeqAndLength) {
    auto seq = Cqe(100, 8);
    auto zero = Cqe(0, 9);
    auto over = Cqe(65537, 9);
    EXPECT_EQ(ntrdma_wire_check_cqe(&seq, 9, 65536), -1);
    EXPECT_EQ(ntrdma_wire_check_cqe(&zero, 9, 65536), -2);
    EXPECT_EQ(ntrdma_wire_check_cqe(&over, 9, 65536), -2);
}

ntrdma_net_meta Meta(u16 flags, u16 gso = 0, u16 start = 0, u16 off = 0) {
    ntrdma_net_meta m{};
    m.flags = flags;
    m.gso_size = gso;
    m.csum_start = start;
    m.csum_offset = off;
    return m;
}

TEST(NetMeta, PacksAndUnpacksEveryField) {
    auto m = Meta(NTRDMA_NET_GSO_TCPV6 | NTRDMA_NET_CSUM_OK, 8948, 54, 16);
    ntrdma_net_meta back{};
    ntrdma_net_meta_unpack(ntrdma_net_meta_pack(&m), &back);
    EXPECT_EQ(back.flags, m.flags);
    EXPECT_EQ(back.gso_size, 8948);
    EXPECT_EQ(back.csum_start, 54);
    EXPECT_EQ(back.csum_offset, 16);
    ntrdma_net_meta_unpack(~0ull, &back);
    EXPECT_EQ(back.flags, 0xffff);
    EXPECT_EQ(back.csum_offset, 0xffff);
}

TEST(NetMeta, RejectsUnknownFlags) {
    auto ok = Meta(NTRDMA_NET_CSUM_OK);
    auto bad = Meta(0x80);
    EXPECT_EQ(ntrdma_net_check_meta(&ok, 100), 0);
    EXPECT_EQ(ntrdma_net_check_meta(&bad, 100), -3);
}

TEST(NetMeta, GsoNeedsSizeAndChecksumInsideTheFrame) {
    auto m = Meta(NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_CSUM_OK, 1448, 34, 16);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), 0);
    m.gso_size = 0;
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
    m.gso_size = 1448;
    m.csum_start = 59990;
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
    m.csum_start = 0;  // GSO without a partial checksum
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
    m.csum_start = 34;
    m.flags = NTRDMA_NET_GSO_TCPV4;  // GSO without CSUM_OK
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
    m.flags = NTRDMA_NET_GSO_TCPV4 | NTRDMA_NET_GSO_TCPV6 | NTRDMA_NET_CSUM_OK;
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
}

TEST(NetMeta, RuntFramesAreRejected) {
    auto m = Meta(0);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 14), 0);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 13), -5);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 0), -5);
}

TEST(NetMeta, GsoMustNameAWholeTcpHeaderAndItsChecksum) {
    auto m = Meta(NTRDMA_NET_GSO_TCPV6 | NTRDMA_NET_CSUM_OK, 1428, 54, 16);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 74), 0);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 73), -4);  // TCP header cut short
    m.csum_offset = 6;                             // UDP's checksum, not TCP's
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
    m.csum_offset = 16;
    m.csum_start = 10;  // inside the Ethernet header
    EXPECT_EQ(ntrdma_net_check_meta(&m, 60000), -4);
}

TEST(NetMeta, PartialChecksumFieldMustLieInsideTheFrame) {
    auto m = Meta(NTRDMA_NET_CSUM_OK, 0, 34, 6);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 42), 0);
    EXPECT_EQ(ntrdma_net_check_meta(&m, 41), -4);
    m.csum_start = 0xffff;
    m.csum_offset = 0xffff;  // no u16 wrap-around
    EXPECT_EQ(ntrdma_net_check_meta(&m, 65536), -4);
}

ntrdma_wire_cmd Cmd(u32 seq, u16 len) {
    ntrdma_wire_cmd c{};
    c.seq = seq;
    c.len = len;
    return c;
}

TEST(Cmd, AcceptsInOrderRequestWithinItsSlot) {
    auto c = Cmd(0xfffffff0u, NTRDMA_CMD_DATA);
    EXPECT_EQ(ntrdma_wire_check_cmd(&c, 0xfffffff0u), 0);
}

TEST(Cmd, RejectsStaleSeqAndOversizedData) {
    auto stale = Cmd(7, 10);
    auto big = Cmd(8, NTRDMA_CMD_DATA + 1);
    EXPECT_EQ(ntrdma_wire_check_cmd(&stale, 8), -1);
    EXPECT_EQ(ntrdma_wire_check_cmd(&big, 8), -2);
}

TEST(Rsp, RejectsStaleSeqOversizedDataAndNonErrnoStatus) {
    ntrdma_wire_rsp r{};
    r.seq = 5;
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 5), 0);
    r.status = -22;
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 5), 0);
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 6), -1);
    r.len = NTRDMA_RSP_DATA + 1;
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 5), -2);
    r.len = 0;
    r.status = 1;
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 5), -3);
    r.status = -5000;
    EXPECT_EQ(ntrdma_wire_check_rsp(&r, 5), -3);
}

TEST(Layout, InboxFitsItsPagesAndRingsArePowersOfTwo) {
    EXPECT_EQ(NTRDMA_TQP_RING & (NTRDMA_TQP_RING - 1), 0u);
    EXPECT_EQ(NTRDMA_CMD_RING & (NTRDMA_CMD_RING - 1), 0u);
    EXPECT_EQ(sizeof(ntrdma_wire_rxd), 16u);
    EXPECT_EQ(sizeof(ntrdma_wire_cqe), 16u);
    EXPECT_EQ(sizeof(ntrdma_wire_cmd), 256u);
    EXPECT_EQ(sizeof(ntrdma_wire_rsp), 64u);
    EXPECT_EQ(offsetof(ntrdma_inbox, tqp) % 64, 0u);
    EXPECT_EQ(offsetof(ntrdma_inbox, cmd) % 64, 0u);
    EXPECT_EQ(sizeof(ntrdma_wire_tqp) % 64, 0u);
    EXPECT_LE(sizeof(ntrdma_inbox), 20u * 4096u);
}

// The leave notice took what was padding: a peer of the previous version
// writes 0 there (never an epoch), and ours lands where it wrote nothing.
TEST(Layout, LeaveNoticeWhereThePaddingWas) {
    EXPECT_EQ(offsetof(ntrdma_inbox, hb_seq), 8u);
    EXPECT_EQ(offsetof(ntrdma_inbox, left), 12u);
    EXPECT_EQ(offsetof(ntrdma_inbox, vdb), 16u);
}

TEST(Layout, VirtualDoorbellsOfEveryQueuePairFit) {
    EXPECT_LT(NTRDMA_VDB_TQP(NTRDMA_TQP_COUNT - 1, NTRDMA_TQP_VDB_STATE), NTRDMA_VDB_COUNT);
    EXPECT_NE(NTRDMA_VDB_TQP(0, NTRDMA_TQP_VDB_RX), NTRDMA_VDB_CMD);
}

// ---- verbs transport segment headers ----

ntrdma_vx_hdr VxHdr(u8 op, u8 flags, u32 offset, u32 total) {
    ntrdma_vx_hdr h{};
    h.op = op;
    h.flags = flags;
    h.src_qpn = 2;
    h.dst_qpn = 3;
    h.offset = offset;
    h.total = total;
    return h;
}

constexpr u32 kHdr = sizeof(ntrdma_vx_hdr);

TEST(VxHdr, HeaderIsFixedSizeAndFitsTheBuffer) {
    EXPECT_EQ(sizeof(ntrdma_vx_hdr), 56u);
    EXPECT_LT(sizeof(ntrdma_vx_hdr), NTRDMA_VX_BUF);
}

TEST(VxHdr, AcceptsSingleAndMultiSegmentSends) {
    auto one = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 100);
    EXPECT_EQ(ntrdma_vx_check_hdr(&one, kHdr + 100), 0);
    auto first = VxHdr(NTRDMA_VX_WRITE, NTRDMA_VX_FIRST, 0, 100);
    EXPECT_EQ(ntrdma_vx_check_hdr(&first, kHdr + 60), 0);
    auto last = VxHdr(NTRDMA_VX_WRITE, NTRDMA_VX_LAST, 60, 100);
    EXPECT_EQ(ntrdma_vx_check_hdr(&last, kHdr + 40), 0);
    auto empty = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 0);
    EXPECT_EQ(ntrdma_vx_check_hdr(&empty, kHdr), 0);
}

TEST(VxHdr, RejectsShortSegmentsUnknownOpsAndFlags) {
    auto h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr - 1), 0);
    h.op = 0;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
    h.op = NTRDMA_VX_OP_MAX + 1;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
    h.op = NTRDMA_VX_SEND;
    EXPECT_EQ(NTRDMA_VX_FLAGS, 0xff);  // every bit has a meaning: none unknown
}

TEST(VxHdr, InvalidateOnlyOnASendWithoutImm) {
    auto h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_INV, 0, 64);
    EXPECT_EQ(ntrdma_vx_check_hdr(&h, kHdr + 64), 0);
    h.flags |= NTRDMA_VX_IMM;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 64), 0);
    auto w = VxHdr(NTRDMA_VX_WRITE, NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_INV, 0, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&w, kHdr + 64), 0);
    auto rd = VxHdr(NTRDMA_VX_READ_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_INV, 0, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&rd, kHdr), 0);
}

TEST(VxHdr, SkippedOnlyOnARequestsFirstSegment) {
    auto h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_SKIPPED, 0, 100);
    EXPECT_EQ(ntrdma_vx_check_hdr(&h, kHdr + 60), 0);
    auto rd =
        VxHdr(NTRDMA_VX_READ_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_SKIPPED, 0, 64);
    EXPECT_EQ(ntrdma_vx_check_hdr(&rd, kHdr), 0);
    auto later = VxHdr(NTRDMA_VX_WRITE, NTRDMA_VX_LAST | NTRDMA_VX_SKIPPED, 60, 100);
    EXPECT_NE(ntrdma_vx_check_hdr(&later, kHdr + 40), 0);
    auto ack = VxHdr(NTRDMA_VX_ACK, NTRDMA_VX_FIRST | NTRDMA_VX_SKIPPED, 0, 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&ack, kHdr), 0);
}

TEST(VxHdr, PlacedOnlyAsAPayloadlessWriteWithImm) {
    const u8 all = NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_IMM | NTRDMA_VX_PLACED;
    auto h = VxHdr(NTRDMA_VX_WRITE, all, 0, 65536);
    EXPECT_EQ(ntrdma_vx_check_hdr(&h, kHdr), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 8), 0);  // with payload
    auto s = VxHdr(NTRDMA_VX_SEND, all, 0, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&s, kHdr), 0);
    auto noimm = VxHdr(NTRDMA_VX_WRITE, all & ~NTRDMA_VX_IMM, 0, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&noimm, kHdr), 0);
    auto mid = VxHdr(NTRDMA_VX_WRITE, all & ~NTRDMA_VX_FIRST, 8, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&mid, kHdr), 0);
}

TEST(VxHdr, UdDatagramIsOneWholeSegmentOfAtMostTheMtu) {
    const u8 fl = NTRDMA_VX_FIRST | NTRDMA_VX_LAST;
    auto h = VxHdr(NTRDMA_VX_UD_SEND, fl | NTRDMA_VX_IMM | NTRDMA_VX_SOLICITED, 0, 4096);
    EXPECT_EQ(ntrdma_vx_check_hdr(&h, kHdr + 4096), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 4095), 0);  // payload short of total
    auto big = VxHdr(NTRDMA_VX_UD_SEND, fl, 0, 4097);
    EXPECT_NE(ntrdma_vx_check_hdr(&big, kHdr + 4097), 0);
    auto part = VxHdr(NTRDMA_VX_UD_SEND, NTRDMA_VX_FIRST, 0, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&part, kHdr + 64), 0);
    auto off = VxHdr(NTRDMA_VX_UD_SEND, fl, 8, 64);
    EXPECT_NE(ntrdma_vx_check_hdr(&off, kHdr + 56), 0);
    auto msn = VxHdr(NTRDMA_VX_UD_SEND, fl, 0, 64);
    msn.msn = 1;
    EXPECT_NE(ntrdma_vx_check_hdr(&msn, kHdr + 64), 0);
    for (u8 bad : {NTRDMA_VX_SKIPPED, NTRDMA_VX_INV, NTRDMA_VX_PLACED, NTRDMA_VX_FADD}) {
        auto f = VxHdr(NTRDMA_VX_UD_SEND, fl | bad, 0, 64);
        EXPECT_NE(ntrdma_vx_check_hdr(&f, kHdr + 64), 0) << "flag " << int(bad);
    }
}

// ---- direct placement exports ----

ntrdma_wire_mr_export Export(u64 first_off, u64 length) {
    ntrdma_wire_mr_export e{};
    e.key = 0x1234;
    e.pd = 1;
    e.access = 0x2;
    e.first_off = static_cast<u32>(first_off);
    e.length = length;
    e.iova = 0x10000;
    e.npages = static_cast<u32>(ntrdma_export_npages(first_off, length));
    e.first = 0;
    e.count = std::min(e.npages, NTRDMA_EXPORT_CHUNK);
    e.list = 0x8000;
    return e;
}

TEST(MrExport, AcceptsConsistentChunks) {
    auto e = Export(100, 8192);
    EXPECT_EQ(e.npages, 3u);
    EXPECT_EQ(ntrdma_wire_check_mr_export(&e, 1000), 0);
    auto big = Export(0, 4096ull * 1000);
    big.first = NTRDMA_EXPORT_CHUNK;
    big.count = 1000 - NTRDMA_EXPORT_CHUNK;
    EXPECT_EQ(ntrdma_wire_check_mr_export(&big, 1000), 0);
}

TEST(MrExport, RejectsInconsistentOrHostileChunks) {
    auto e = Export(100, 8192);
    e.npages = 2;  // does not cover the range
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(4096, 10);  // offset beyond a page
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 4096ull * 2000);  // more pages than we hold lists for
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 8192);
    e.first = 1;
    e.count = 2;  // past the last page
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 8192);
    e.iova = ~0ull - 100;  // the range wraps
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 8192);
    e.access = 0x1;  // local write: placed SENDs land in such MRs
    EXPECT_EQ(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e.access = 0x10;  // memory-window binding is not the peer's business
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 8192);
    e.key = 0;
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
    e = Export(0, 8192);
    e.count = 0;
    EXPECT_NE(ntrdma_wire_check_mr_export(&e, 1000), 0);
}

TEST(MrExport, PageAddressesMustBeAlignedAndInTheWindow) {
    EXPECT_EQ(ntrdma_wire_check_export_page(0x1000, 0x10000), 0);
    EXPECT_EQ(ntrdma_wire_check_export_page(0xf000, 0x10000), 0);
    EXPECT_NE(ntrdma_wire_check_export_page(0x1001, 0x10000), 0);
    EXPECT_NE(ntrdma_wire_check_export_page(0x10000, 0x10000), 0);
    EXPECT_NE(ntrdma_wire_check_export_page(~0ull & ~0xfffull, 0x10000), 0);
}

TEST(QpExport, NumbersAre24BitsAndUpIsABool) {
    ntrdma_wire_qp_export q{};
    q.qpn = 2;
    q.pd = 1;
    q.access = 0x2;
    q.dest_qpn = 3;
    q.up = 1;
    EXPECT_EQ(ntrdma_wire_check_qp_export(&q), 0);
    q.dest_qpn = 1u << 24;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q.dest_qpn = 3;
    q.up = 2;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
}

// The RQ of a QP that takes placed SENDs: a ring we can index safely.
static ntrdma_wire_qp_export rq_export() {
    ntrdma_wire_qp_export q{};
    q.qpn = 2;
    q.up = 1;
    q.rq_entries = 64;
    q.rq_max_sge = 16;
    q.rq_npages = ntrdma_rq_npages(64);
    q.rq_cq = 1;
    q.rq_list = 0x1000;
    q.psend = 0x2000;
    return q;
}

TEST(QpExport, AnRqMustBeAConsistentRing) {
    ntrdma_wire_qp_export q = rq_export();
    EXPECT_EQ(ntrdma_wire_check_qp_export(&q), 0);
    EXPECT_EQ(ntrdma_rq_npages(4096), 305u);
    q.rq_entries = 48;  // not a power of two
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.rq_entries = 8192;
    q.rq_npages = ntrdma_rq_npages(8192);
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.rq_npages++;  // pages that do not match the entries
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.rq_max_sge = 17;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
}

TEST(QpExport, AnRqNamesACqAndAQpThePsendAreaHas) {
    ntrdma_wire_qp_export q = rq_export();
    q.rq_cq = 0;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q.rq_cq = NTRDMA_PSEND_CQS;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.qpn = NTRDMA_PSEND_QPN0 + NTRDMA_PSEND_QPS;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q.qpn = 1;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.psend = 0x2008;  // not page aligned
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
    q = rq_export();
    q.rq_list = 0x1004;
    EXPECT_NE(ntrdma_wire_check_qp_export(&q), 0);
}

TEST(VxHdr, RejectsPayloadBeyondTheMessageIncludingOverflow) {
    auto h = VxHdr(NTRDMA_VX_WRITE, NTRDMA_VX_LAST, 60, 100);
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 41), 0);
    h.offset = 0xfffffff0u;  // offset + payload wraps in 32 bits
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 0x20), 0);
    h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, NTRDMA_VX_MAX_MSG + 1);
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
}

TEST(VxHdr, FirstAndLastFlagsMustMatchTheOffsets) {
    auto h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_LAST, 0, 10);  // offset 0 but not FIRST
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 10), 0);
    h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST, 0, 10);  // whole message but not LAST
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 10), 0);
    h = VxHdr(NTRDMA_VX_SEND, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 5, 10);  // FIRST at 5
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr + 5), 0);
}

TEST(VxHdr, QpNumbersAndMsnAre24Bits) {
    auto h = VxHdr(NTRDMA_VX_READ_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 4096);
    EXPECT_EQ(ntrdma_vx_check_hdr(&h, kHdr), 0);
    h.msn = 0x1000000;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
    h.msn = 0;
    h.dst_qpn = 0x1000000;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
    h.dst_qpn = 3;
    h.src_qpn = 0xffffffff;
    EXPECT_NE(ntrdma_vx_check_hdr(&h, kHdr), 0);
}

TEST(VxHdr, RequestsAndAcksCarryNoPayload) {
    auto rd = VxHdr(NTRDMA_VX_READ_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 4096);
    EXPECT_NE(ntrdma_vx_check_hdr(&rd, kHdr + 1), 0);
    auto at = VxHdr(NTRDMA_VX_ATOMIC_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 8);
    EXPECT_EQ(ntrdma_vx_check_hdr(&at, kHdr), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&at, kHdr + 8), 0);
    at.total = 4;  // atomics are 8 bytes
    EXPECT_NE(ntrdma_vx_check_hdr(&at, kHdr), 0);
    auto ack = VxHdr(NTRDMA_VX_ACK, 0, 0, 0);
    EXPECT_EQ(ntrdma_vx_check_hdr(&ack, kHdr), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&ack, kHdr + 4), 0);
    ack.syndrome = NTRDMA_VX_SYN_MAX + 1;
    EXPECT_NE(ntrdma_vx_check_hdr(&ack, kHdr), 0);
    ack.syndrome = NTRDMA_VX_SYN_RNR;
    ack.rnr_timer = 32;
    EXPECT_NE(ntrdma_vx_check_hdr(&ack, kHdr), 0);
}

TEST(VxHdr, ReadResponsesStayInsideTheRead) {
    auto r = VxHdr(NTRDMA_VX_READ_RESP, 0, 4096, 8192);
    EXPECT_EQ(ntrdma_vx_check_hdr(&r, kHdr + 4096), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&r, kHdr + 4097), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&r, kHdr), 0);  // no data for a non-empty read
    auto z = VxHdr(NTRDMA_VX_READ_RESP, 0, 0, 0);
    EXPECT_EQ(ntrdma_vx_check_hdr(&z, kHdr), 0);  // a zero-length read
}

TEST(VxHdr, ReadRequestPayloadIsAWholeBoundedSinkList) {
    const u32 ext = sizeof(ntrdma_vx_sink);
    EXPECT_EQ(ext, 16u);
    auto rd = VxHdr(NTRDMA_VX_READ_REQ, NTRDMA_VX_FIRST | NTRDMA_VX_LAST, 0, 65536);
    EXPECT_EQ(ntrdma_vx_check_hdr(&rd, kHdr), 0);  // no sink: the data is sent
    EXPECT_EQ(ntrdma_vx_check_hdr(&rd, kHdr + ext), 0);
    EXPECT_EQ(ntrdma_vx_check_hdr(&rd, kHdr + NTRDMA_VX_SINK_MAX * ext), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&rd, kHdr + (NTRDMA_VX_SINK_MAX + 1) * ext), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&rd, kHdr + ext + 8), 0);  // a partial extent
    rd.total = 0;
    EXPECT_NE(ntrdma_vx_check_hdr(&rd, kHdr + ext), 0);  // a sink for nothing
}

TEST(VxHdr, PlacedReadResponseIsOnePayloadlessNotice) {
    auto r =
        VxHdr(NTRDMA_VX_READ_RESP, NTRDMA_VX_FIRST | NTRDMA_VX_LAST | NTRDMA_VX_PLACED, 0, 65536);
    EXPECT_EQ(ntrdma_vx_check_hdr(&r, kHdr), 0);
    EXPECT_NE(ntrdma_vx_check_hdr(&r, kHdr + 16), 0);  // with data
    auto mid = r;
    mid.offset = 4096;
    EXPECT_NE(ntrdma_vx_check_hdr(&mid, kHdr), 0);
    auto empty = r;
    empty.total = 0;
    EXPECT_NE(ntrdma_vx_check_hdr(&empty, kHdr), 0);
}

TEST(VxSink, ExtentsMustBeNonEmptyInsideTheWindowAndAddUp) {
    const u64 reach = 1ull << 30;
    std::vector<ntrdma_vx_sink> s = {{0x1000, 4096, 0}, {0x8000, 100, 0}};
    EXPECT_EQ(ntrdma_vx_check_sink(s.data(), 2, 4196, reach), 0);
    EXPECT_NE(ntrdma_vx_check_sink(s.data(), 2, 4195, reach), 0);  // sums differ
    EXPECT_NE(ntrdma_vx_check_sink(s.data(), 0, 0, reach), 0);
    EXPECT_NE(ntrdma_vx_check_sink(s.data(), NTRDMA_VX_SINK_MAX + 1, 4196, reach), 0);
    auto bad = s;
    bad[1].len = 0;
    EXPECT_NE(ntrdma_vx_check_sink(bad.data(), 2, 4096, reach), 0);
    bad = s;
    bad[1].rsvd = 1;
    EXPECT_NE(ntrdma_vx_check_sink(bad.data(), 2, 4196, reach), 0);
    bad = s;
    bad[1].addr = reach - 50;  // runs past the window's end
    EXPECT_NE(ntrdma_vx_check_sink(bad.data(), 2, 4196, reach), 0);
    bad[1].addr = ~0ull - 10;  // and wraps
    EXPECT_NE(ntrdma_vx_check_sink(bad.data(), 2, 4196, reach), 0);
    bad[1].addr = reach - 100;  // ends exactly at it
    EXPECT_EQ(ntrdma_vx_check_sink(bad.data(), 2, 4196, reach), 0);
}

TEST(VxMsn, SerialOrderAcross24BitWrap) {
    EXPECT_EQ(ntrdma_vx_msn_diff(5, 3), 2);
    EXPECT_EQ(ntrdma_vx_msn_diff(3, 5), -2);
    EXPECT_EQ(ntrdma_vx_msn_diff(1, 0xffffff), 2);
    EXPECT_EQ(ntrdma_vx_msn_diff(0xffffff, 1), -2);
}

}  // namespace

TEST(NetState, QueueCountAndXdpFlagSplit) {
    u32 queues = 9;
    bool xdp = true;
    EXPECT_EQ(ntrdma_net_state_unpack(4, 4, &queues, &xdp), 0);
    EXPECT_EQ(queues, 4u);
    EXPECT_FALSE(xdp);
    EXPECT_EQ(ntrdma_net_state_unpack(2 | NTRDMA_NET_STATE_XDP, 4, &queues, &xdp), 0);
    EXPECT_EQ(queues, 2u);
    EXPECT_TRUE(xdp);
    EXPECT_EQ(ntrdma_net_state_unpack(0, 4, &queues, &xdp), 0);  // closed
    EXPECT_EQ(queues, 0u);
}

TEST(NetState, RejectsUnknownFlagsAndTooManyQueues) {
    u32 queues;
    bool xdp;
    EXPECT_EQ(ntrdma_net_state_unpack(5, 4, &queues, &xdp), -3);
    EXPECT_EQ(ntrdma_net_state_unpack(1 | 0x200, 4, &queues, &xdp), -3);
    EXPECT_EQ(ntrdma_net_state_unpack(0x80000001u, 4, &queues, &xdp), -3);
}
