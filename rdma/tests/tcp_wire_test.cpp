// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Unit tests of NTRDMA over TCP's record format: every header the peer sends
// goes through ntrdma_tcp_check_hdr(), and every WRITE record through
// ntrdma_tcp_check_write(), before the receiver reads its payload.

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernel_types.hpp"

extern "C" {
#include "ntrdma_tcp_wire.h"
}

namespace {

constexpr u32 kInbox = sizeof(ntrdma_inbox);

ntrdma_tcp_hdr Hdr(u8 type, u32 a, u32 b, u32 len) {
    ntrdma_tcp_hdr h{};
    h.type = type;
    h.a = a;
    h.b = b;
    h.len = len;
    return h;
}

ntrdma_tcp_hdr Hello() {
    ntrdma_tcp_hdr h = Hdr(NTRDMA_TCP_HELLO, NTRDMA_MAGIC, kInbox, 0);
    h.ver = NTRDMA_VERSION;
    return h;
}

int Check(const ntrdma_tcp_hdr& h) { return ntrdma_tcp_check_hdr(&h, h.type == NTRDMA_TCP_HELLO); }

constexpr u32 kWindow = 4u << 20;

// A WRITE as the receiver checks it: the header, then against its window.
int Write(u32 off, u32 len, u32 window = kWindow) {
    ntrdma_tcp_hdr h = Hdr(NTRDMA_TCP_WRITE, off, 0, len);
    int rc = Check(h);
    return rc ? rc : ntrdma_tcp_check_write(&h, window);
}

TEST(TcpWireLayout, HeaderIsSixteenLittleEndianBytes) {
    ntrdma_tcp_hdr h = Hdr(NTRDMA_TCP_WRITE, 0x04030201u, 0x08070605u, 0x0c0b0a09u);
    h.flags = 0xee;
    h.ver = 0xdcfe;
    std::array<u8, NTRDMA_TCP_HDR_LEN> buf{};
    ntrdma_tcp_pack(&h, buf.data());
    const std::array<u8, 16> want{
        NTRDMA_TCP_WRITE, 0xee, 0xfe, 0xdc, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    EXPECT_EQ(buf, want);
}

TEST(TcpWireLayout, UnpackInvertsPack) {
    ntrdma_tcp_hdr h = Hdr(0xff, 0xffffffffu, 0x80000001u, 0xdeadbeefu);
    h.flags = 0x81;
    h.ver = 0x8001;
    std::array<u8, NTRDMA_TCP_HDR_LEN> buf{};
    ntrdma_tcp_pack(&h, buf.data());
    ntrdma_tcp_hdr back{};
    ntrdma_tcp_unpack(buf.data(), &back);
    EXPECT_EQ(back.type, h.type);
    EXPECT_EQ(back.flags, h.flags);
    EXPECT_EQ(back.ver, h.ver);
    EXPECT_EQ(back.a, h.a);
    EXPECT_EQ(back.b, h.b);
    EXPECT_EQ(back.len, h.len);
}

TEST(TcpWireLayout, PackInvertsUnpack) {
    std::array<u8, NTRDMA_TCP_HDR_LEN> buf{};
    for (u32 i = 0; i < buf.size(); i++) buf[i] = static_cast<u8>(0xf1 - 13 * i);
    ntrdma_tcp_hdr h{};
    ntrdma_tcp_unpack(buf.data(), &h);
    EXPECT_EQ(h.a, 0x96a3b0bdu);  // bytes 4..7: bd b0 a3 96
    std::array<u8, NTRDMA_TCP_HDR_LEN> again{};
    ntrdma_tcp_pack(&h, again.data());
    EXPECT_EQ(again, buf);
}

TEST(TcpWireLayout, HelloCarriesTheVersionIn16Bits) { EXPECT_LE(NTRDMA_VERSION, 0xffffu); }

TEST(TcpWireHello, AcceptsOursOnlyAsTheFirstRecord) {
    ntrdma_tcp_hdr h = Hello();
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 1), 0);
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 0), NTRDMA_TCP_BAD_ORDER);
}

TEST(TcpWireHello, FirstRecordMustBeHello) {
    ntrdma_tcp_hdr spad = Hdr(NTRDMA_TCP_SPAD, NTRDMA_SPAD_MAGIC, 1, 0);
    EXPECT_EQ(ntrdma_tcp_check_hdr(&spad, 0), 0);
    EXPECT_EQ(ntrdma_tcp_check_hdr(&spad, 1), NTRDMA_TCP_BAD_ORDER);
}

TEST(TcpWireHello, RejectsMagicVersionInboxSizeAndPayload) {
    ntrdma_tcp_hdr h = Hello();
    h.a = NTRDMA_MAGIC + 1;
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 1), NTRDMA_TCP_BAD_MAGIC);
    h = Hello();
    h.ver = NTRDMA_VERSION + 1;
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 1), NTRDMA_TCP_BAD_VERSION);
    h = Hello();
    h.b = kInbox - 4;
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 1), NTRDMA_TCP_BAD_INBOX_SIZE);
    h = Hello();
    h.len = 4;
    EXPECT_EQ(ntrdma_tcp_check_hdr(&h, 1), NTRDMA_TCP_BAD_LEN);
}

TEST(TcpWireType, RejectsEveryUnknownType) {
    int known = 0;
    for (u32 t = 0; t <= 0xff; t++) {
        ntrdma_tcp_hdr h = Hdr(static_cast<u8>(t), 0, 0, 0);
        bool is_known = t >= NTRDMA_TCP_HELLO && t <= NTRDMA_TCP_WRITE;
        known += is_known;
        for (int first = 0; first <= 1; first++) {
            int rc = ntrdma_tcp_check_hdr(&h, first);
            if (is_known)
                EXPECT_NE(rc, NTRDMA_TCP_BAD_TYPE) << "type " << t;
            else
                EXPECT_EQ(rc, NTRDMA_TCP_BAD_TYPE) << "type " << t << " first " << first;
        }
    }
    EXPECT_EQ(known, 4);
}

TEST(TcpWireType, RejectsFlagsAndVersionOutsideHello) {
    ntrdma_tcp_hdr h = Hdr(NTRDMA_TCP_DB, NTRDMA_DB_VDB, 0, 0);
    ASSERT_EQ(Check(h), 0);
    h.flags = 0x80;
    EXPECT_EQ(Check(h), NTRDMA_TCP_BAD_RSVD);
    h = Hdr(NTRDMA_TCP_DB, NTRDMA_DB_VDB, 0, 0);
    h.ver = NTRDMA_VERSION;
    EXPECT_EQ(Check(h), NTRDMA_TCP_BAD_RSVD);
    h = Hello();
    h.flags = 1;
    EXPECT_EQ(Check(h), NTRDMA_TCP_BAD_RSVD);
}

TEST(TcpWireSpad, AcceptsEveryScratchpadAndAnyValue) {
    for (u32 i = 0; i < NTRDMA_SPAD_COUNT; i++)
        EXPECT_EQ(Check(Hdr(NTRDMA_TCP_SPAD, i, 0xffffffffu, 0)), 0) << i;
}

TEST(TcpWireSpad, RejectsIndexAndPayload) {
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_SPAD, NTRDMA_SPAD_COUNT, 0, 0)), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_SPAD, 0xffffffffu, 0, 0)), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_SPAD, NTRDMA_SPAD_ACK, 0, 4)), NTRDMA_TCP_BAD_LEN);
}

TEST(TcpWireDb, AcceptsOnlyTheTwoHardwareBits) {
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, NTRDMA_DB_VDB, 0, 0)), 0);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, NTRDMA_DB_CTRL, 0, 0)), 0);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, 2, 0, 0)), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, 0xffffffffu, 0, 0)), NTRDMA_TCP_BAD_FIELD);
}

TEST(TcpWireDb, RejectsUnusedFieldAndPayload) {
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, NTRDMA_DB_CTRL, 1, 0)), NTRDMA_TCP_BAD_RSVD);
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_DB, NTRDMA_DB_CTRL, 0, 4)), NTRDMA_TCP_BAD_LEN);
}

TEST(TcpWireWrite, LengthFrom1ToTheRecordMaximum) {
    EXPECT_EQ(Write(0, 1), 0);
    EXPECT_EQ(Write(3, 7), 0);  // data needs no alignment
    EXPECT_EQ(Write(0, NTRDMA_TCP_WRITE_MAX), 0);
    EXPECT_EQ(Write(0, 0), NTRDMA_TCP_BAD_LEN);
    EXPECT_EQ(Write(0, NTRDMA_TCP_WRITE_MAX + 1), NTRDMA_TCP_BAD_LEN);
    EXPECT_EQ(Write(0, 0xffffffffu), NTRDMA_TCP_BAD_LEN);
}

TEST(TcpWireWrite, StoreEndsAtTheWindowEndAtMost) {
    EXPECT_EQ(Write(kWindow - 1, 1), 0);
    EXPECT_EQ(Write(kWindow - 256, 256), 0);
    EXPECT_EQ(Write(kWindow, 1), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Write(kWindow - 255, 256), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Write(kInbox - 4, 8, kInbox), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Write(kInbox - 4, 4, kInbox), 0);
}

TEST(TcpWireWrite, OffsetPlusLengthCannotWrap) {
    // 0xfffffffc + 8 wraps to 4, inside the window.
    EXPECT_EQ(Write(0xfffffffcu, 8), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Write(0xffffff00u, 256), NTRDMA_TCP_BAD_FIELD);
}

TEST(TcpWireWrite, NothingLandsInAClosedWindow) {
    EXPECT_EQ(Write(0, 1, 0), NTRDMA_TCP_BAD_FIELD);
    EXPECT_EQ(Write(0, 16, 8), NTRDMA_TCP_BAD_FIELD);
}

TEST(TcpWireWrite, RejectsUnusedField) {
    EXPECT_EQ(Check(Hdr(NTRDMA_TCP_WRITE, 0, 4, 4)), NTRDMA_TCP_BAD_RSVD);
}

}  // namespace
