// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "fake_client.hpp"
#include "framing.hpp"

namespace ntb::ivshmem {
namespace {

struct SocketPair {
    UniqueFd a, b;
    SocketPair() {
        int sv[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        a.reset(sv[0]);
        b.reset(sv[1]);
    }
};

TEST(Framing, EncodeIsLittleEndian) {
    auto b = encode_value(0x0102030405060708LL);
    EXPECT_EQ(b, (std::array<std::uint8_t, 8>{8, 7, 6, 5, 4, 3, 2, 1}));
    auto m1 = encode_value(-1);
    for (auto x : m1) EXPECT_EQ(x, 0xff);
    EXPECT_EQ(decode_value(b), 0x0102030405060708LL);
    EXPECT_EQ(decode_value(m1), -1);
    EXPECT_EQ(decode_value(encode_value(INT64_MIN)), INT64_MIN);
    EXPECT_EQ(decode_value(encode_value(65535)), 65535);
}

TEST(Framing, WireBytesWithoutFd) {
    SocketPair sp;
    ASSERT_EQ(send_msg(sp.a.get(), 0x1122334455667788LL), 0);
    std::uint8_t raw[16];
    ASSERT_EQ(::read(sp.b.get(), raw, sizeof(raw)), 8);
    const std::uint8_t want[8] = {0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
    EXPECT_EQ(std::memcmp(raw, want, 8), 0);
}

TEST(Framing, ValueWithoutFd) {
    SocketPair sp;
    ASSERT_EQ(send_msg(sp.a.get(), 7), 0);
    ASSERT_EQ(send_msg(sp.a.get(), -1), 0);
    RecvResult r = recv_msg(sp.b.get());
    ASSERT_EQ(r.status, RecvStatus::kOk);
    EXPECT_EQ(r.value, 7);
    EXPECT_FALSE(r.fd.valid());
    r = recv_msg(sp.b.get());
    ASSERT_EQ(r.status, RecvStatus::kOk);
    EXPECT_EQ(r.value, -1);
    EXPECT_FALSE(r.fd.valid());
}

TEST(Framing, EventfdTravelsAndWorks) {
    SocketPair sp;
    UniqueFd efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    ASSERT_TRUE(efd.valid());
    ASSERT_EQ(send_msg(sp.a.get(), 3, efd.get()), 0);
    ASSERT_EQ(send_msg(sp.a.get(), 4), 0);  // next message must not inherit the fd

    RecvResult r = recv_msg(sp.b.get());
    ASSERT_EQ(r.status, RecvStatus::kOk) << test::describe(r);
    EXPECT_EQ(r.value, 3);
    ASSERT_TRUE(r.fd.valid());
    EXPECT_NE(r.fd.get(), efd.get());
    EXPECT_TRUE(::fcntl(r.fd.get(), F_GETFD) & FD_CLOEXEC);

    // Same eventfd object: writes to one side are read from the other, both directions.
    std::uint64_t v = 5;
    ASSERT_EQ(::write(efd.get(), &v, sizeof(v)), 8);
    EXPECT_EQ(test::read_eventfd(r.fd.get(), 1000), std::optional<std::uint64_t>(5));
    v = 9;
    ASSERT_EQ(::write(r.fd.get(), &v, sizeof(v)), 8);
    EXPECT_EQ(test::read_eventfd(efd.get(), 1000), std::optional<std::uint64_t>(9));

    RecvResult r2 = recv_msg(sp.b.get());
    ASSERT_EQ(r2.status, RecvStatus::kOk);
    EXPECT_EQ(r2.value, 4);
    EXPECT_FALSE(r2.fd.valid());
}

TEST(Framing, RegularFileFdTravels) {
    test::TempDir dir;
    std::string path = dir.file("f");
    UniqueFd f(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    ASSERT_TRUE(f.valid());
    SocketPair sp;
    ASSERT_EQ(send_msg(sp.a.get(), -1, f.get()), 0);
    RecvResult r = recv_msg(sp.b.get());
    ASSERT_EQ(r.status, RecvStatus::kOk);
    EXPECT_EQ(r.value, -1);
    ASSERT_TRUE(r.fd.valid());
    struct stat s1 {
    }, s2{};
    ASSERT_EQ(::fstat(f.get(), &s1), 0);
    ASSERT_EQ(::fstat(r.fd.get(), &s2), 0);
    EXPECT_EQ(s1.st_ino, s2.st_ino);
    EXPECT_EQ(s1.st_dev, s2.st_dev);
}

TEST(Framing, SplitMessageIsReassembled) {
    SocketPair sp;
    auto b = encode_value(0x42);
    ASSERT_EQ(::write(sp.a.get(), b.data(), 3), 3);
    ASSERT_EQ(::write(sp.a.get(), b.data() + 3, 5), 5);
    RecvResult r = recv_msg(sp.b.get());
    ASSERT_EQ(r.status, RecvStatus::kOk);
    EXPECT_EQ(r.value, 0x42);
}

TEST(Framing, EofAndTruncatedMessage) {
    {
        SocketPair sp;
        sp.a.reset();
        EXPECT_EQ(recv_msg(sp.b.get()).status, RecvStatus::kEof);
    }
    {
        SocketPair sp;
        ASSERT_EQ(::write(sp.a.get(), "abc", 3), 3);
        sp.a.reset();
        EXPECT_EQ(recv_msg(sp.b.get()).status, RecvStatus::kEof);
    }
}

TEST(Framing, SendToClosedPeerFailsWithoutSignal) {
    SocketPair sp;
    sp.b.reset();
    // Would kill the test binary with SIGPIPE if MSG_NOSIGNAL were missing.
    EXPECT_EQ(send_msg(sp.a.get(), 1), EPIPE);
}

TEST(Framing, SendNeverBlocksOnFullPeer) {
    SocketPair sp;
    int err = 0;
    for (int i = 0; i < 1000000 && err == 0; ++i) err = send_msg(sp.a.get(), i);
    EXPECT_EQ(err, EAGAIN);
}

}  // namespace
}  // namespace ntb::ivshmem
