// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli.hpp"

namespace ntb::ivshmem {
namespace {

using S = ParseResult::Status;

TEST(ParseSize, Forms) {
    EXPECT_EQ(parse_size("65536"), 65536u);
    EXPECT_EQ(parse_size("0x10000"), 65536u);
    EXPECT_EQ(parse_size("64K"), 65536u);
    EXPECT_EQ(parse_size("1m"), 1048576u);
    EXPECT_EQ(parse_size("2G"), 2147483648u);
    EXPECT_FALSE(parse_size(""));
    EXPECT_FALSE(parse_size("K"));
    EXPECT_FALSE(parse_size("0x"));
    EXPECT_FALSE(parse_size("12x"));
    EXPECT_FALSE(parse_size("-4096"));
    EXPECT_FALSE(parse_size("99999999999999999999"));
    EXPECT_FALSE(parse_size("17179869184G"));  // overflows
}

TEST(ParseArgs, FullCommandLine) {
    ParseResult r =
        parse_args({"--shm", "/dev/shm/regs", "--shm-size", "65536", "--vectors", "5", "--socket",
                    "/tmp/s0", "--socket=/tmp/s1", "--pidfile", "/tmp/pid"});
    ASSERT_EQ(r.status, S::kOk) << r.error;
    EXPECT_EQ(r.config.shm_path, "/dev/shm/regs");
    EXPECT_EQ(r.config.shm_size, 65536u);
    EXPECT_EQ(r.config.vectors, 5);
    EXPECT_EQ(r.config.sockets, (std::vector<std::string>{"/tmp/s0", "/tmp/s1"}));
    EXPECT_EQ(r.config.pidfile, "/tmp/pid");
}

TEST(ParseArgs, PidfileOptional) {
    ParseResult r =
        parse_args({"--shm=/x", "--shm-size=4096", "--vectors=1", "--socket=/tmp/only"});
    ASSERT_EQ(r.status, S::kOk) << r.error;
    EXPECT_TRUE(r.config.pidfile.empty());
    EXPECT_EQ(r.config.sockets.size(), 1u);
    EXPECT_FALSE(r.config.persistent_eventfds);
}

TEST(ParseArgs, PersistentEventfdsFlag) {
    ParseResult r = parse_args({"--persistent-eventfds", "--shm=/x", "--shm-size=4096",
                                "--vectors=1", "--socket=/tmp/only"});
    ASSERT_EQ(r.status, S::kOk) << r.error;
    EXPECT_TRUE(r.config.persistent_eventfds);
    EXPECT_EQ(parse_args({"--persistent-eventfds=1", "--shm=/x", "--shm-size=4096", "--vectors=1",
                          "--socket=/tmp/only"})
                  .status,
              S::kError);
}

TEST(ParseArgs, Help) { EXPECT_EQ(parse_args({"--help"}).status, S::kHelp); }

TEST(ParseArgs, Errors) {
    const std::vector<std::string> good = {"--shm",    "/x", "--shm-size", "8192", "--vectors", "5",
                                           "--socket", "/a", "--socket",   "/b"};
    ASSERT_EQ(parse_args(good).status, S::kOk);
    auto with = [&](std::vector<std::string> extra) {
        auto v = good;
        v.insert(v.end(), extra.begin(), extra.end());
        return parse_args(v);
    };
    EXPECT_EQ(parse_args({}).status, S::kError);
    EXPECT_EQ(with({"--bogus", "1"}).status, S::kError);
    EXPECT_EQ(with({"--pidfile"}).status, S::kError);            // missing value
    EXPECT_EQ(with({"--shm-size", "12288"}).status, S::kError);  // not a power of two
    EXPECT_EQ(with({"--shm-size", "2048"}).status, S::kError);   // < 4096
    EXPECT_EQ(with({"--socket", "/c"}).status, S::kError);       // 3 ports need >= 12288 -> 16384
    EXPECT_EQ(with({"--socket", "/c", "--shm-size", "16384"}).status, S::kOk);
    EXPECT_EQ(with({"--vectors", "0"}).status, S::kError);
    EXPECT_EQ(with({"--vectors", "65"}).status, S::kError);
    EXPECT_EQ(with({"--vectors", "5x"}).status, S::kError);
    EXPECT_EQ(with({"--socket", "/a"}).status, S::kError);  // duplicate path
    EXPECT_EQ(with({"--socket", "/" + std::string(200, 'x')}).status, S::kError);
    EXPECT_EQ(with({"--shm="}).status, S::kError);
    EXPECT_EQ(parse_args({"--shm", "/x", "--shm-size", "4096", "--vectors", "1"}).status,
              S::kError);  // no socket
    EXPECT_EQ(parse_args({"--shm", "/x", "--vectors", "1", "--socket", "/a"}).status,
              S::kError);  // no size
}

}  // namespace
}  // namespace ntb::ivshmem
