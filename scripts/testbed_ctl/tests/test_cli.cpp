// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Command lines of remote, the ssh shim and testbed-ctl.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli.hpp"

namespace ntrdma::testbed {
namespace {

using V = std::vector<std::string>;

TEST(Remote, JoinsWordsLikeSsh) {
    ClientCall c = parse_remote({"echo", "a b", "c"}, 120);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "echo a b c");
    EXPECT_EQ(c.shell, "/bin/sh");
    EXPECT_EQ(c.timeout, 120);
    EXPECT_EQ(c.type, 'X');
    EXPECT_EQ(c.name, "remote");
}

TEST(Remote, Options) {
    ClientCall c = parse_remote({"-t", "2.5", "--bash", "--", "-x", "y"}, 120);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.timeout, 2.5);
    EXPECT_EQ(c.shell, "/bin/bash");
    EXPECT_EQ(c.command, "-x y");
    c = parse_remote({"--timeout", "0", "true"}, 120);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.timeout, 0);
    // "-" is a command word; options stop at the first word
    c = parse_remote({"-", "-t"}, 9);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "- -t");
    c = parse_remote({"echo", "--bash"}, 9);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.shell, "/bin/sh");
    EXPECT_EQ(c.command, "echo --bash");
}

TEST(Remote, Errors) {
    ClientCall c = parse_remote({}, 120);
    EXPECT_FALSE(c.run);
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "usage: remote [-t SECS] [--bash] [--] CMD [ARGS...]");
    c = parse_remote({"-t", "soon", "x"}, 120);
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "remote: bad timeout 'soon'");
    c = parse_remote({"-q", "x"}, 120);
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "remote: unknown option '-q' (usage: remote [-t SECS] [--bash] [--] CMD...)");
    // -t without a value is an unknown option, like in the Python version
    c = parse_remote({"-t"}, 120);
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "remote: unknown option '-t' (usage: remote [-t SECS] [--bash] [--] CMD...)");
    c = parse_remote({"--"}, 120);
    EXPECT_EQ(c.rc, 2);
}

TEST(Ssh, HostAndCommand) {
    ClientCall c = parse_ssh({"peer", "[[ -e /proc ]] && echo ok"}, 120);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.shell, "/bin/bash");
    EXPECT_EQ(c.command, "[[ -e /proc ]] && echo ok");
    EXPECT_EQ(c.name, "ssh");
}

TEST(Ssh, OptionsBeforeAndAfterHost) {
    ClientCall c = parse_ssh(
        {"-o", "StrictHostKeyChecking=no", "-p22", "-nT", "root@peer", "-x", "ls", "-l"}, 60);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "ls -l");
    EXPECT_EQ(c.timeout, 60);
    // an argument-taking letter inside a bundle with its value attached
    c = parse_ssh({"-vp", "22", "host", "cmd"}, 60);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "cmd");
    c = parse_ssh({"-i", "key", "--", "host", "-c", "x"}, 60);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "-c x");
    c = parse_ssh({"host", "--", "cmd"}, 60);
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.command, "cmd");
}

TEST(Ssh, Errors) {
    ClientCall c = parse_ssh({"-o", "X=y"}, 60);
    EXPECT_FALSE(c.run);
    EXPECT_EQ(c.rc, 255);
    EXPECT_EQ(c.err, "usage: ssh [OPTIONS] HOST COMMAND (test-bed shim: runs COMMAND in guest b)");
    c = parse_ssh({"peer"}, 60);
    EXPECT_EQ(c.rc, 255);
    EXPECT_EQ(c.err, "ssh: test-bed shim: interactive logins are not supported (host peer)");
}

TEST(Ctl, Help) {
    ClientCall c = parse_ctl({}, "pair", "a");
    EXPECT_FALSE(c.run);
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.out, kCtlHelp);
    c = parse_ctl({"--help"}, "", "");
    EXPECT_EQ(c.rc, 0);
    EXPECT_EQ(c.out, kCtlHelp);
    c = parse_ctl({"help"}, "loop", "a");
    EXPECT_EQ(c.rc, 0);
}

TEST(Ctl, Requests) {
    ClientCall c = parse_ctl({"wait-peer", "30"}, "pair", "a");
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.type, 'C');
    EXPECT_EQ(c.command, "wait-peer 30");
    EXPECT_EQ(c.timeout, 150);
    c = parse_ctl({"kill-peer"}, "pair", "a");
    ASSERT_TRUE(c.run);
    EXPECT_EQ(c.timeout, 300);
}

TEST(Ctl, Errors) {
    ClientCall c = parse_ctl({"peer-status"}, "loop", "a");
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err,
              "testbed-ctl: peer-status: not available in loop topology (there is no peer guest)");
    c = parse_ctl({"peer-status"}, "", "a");
    EXPECT_EQ(c.err,
              "testbed-ctl: peer-status: not available in this topology (there is no peer guest)");
    c = parse_ctl({"peer-status"}, "pair", "b");
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "testbed-ctl: only available in guest a");
    c = parse_ctl({"wait-peer", "x"}, "pair", "a");
    EXPECT_EQ(c.rc, 2);
    EXPECT_EQ(c.err, "testbed-ctl: bad timeout 'x'");
}

TEST(Settings, DefaultTimeout) {
    EXPECT_EQ(default_timeout(nullptr), 120);
    EXPECT_EQ(default_timeout("5"), 5);
    EXPECT_EQ(default_timeout("bogus"), 120);
}

TEST(Settings, Lookup) {
    const std::string cfg =
        "NTRDMA_ROOT=/work/main\n"
        "NTRDMA_TOPO=pair\n"
        "NTRDMA_ROLE='a'\n"
        "NTRDMA_ROOTX=wrong\n"
        "NTRDMA_EMPTY=''\n";
    EXPECT_EQ(lookup_setting("NTRDMA_TOPO", nullptr, cfg), "pair");
    EXPECT_EQ(lookup_setting("NTRDMA_TOPO", "loop", cfg), "loop");
    EXPECT_EQ(lookup_setting("NTRDMA_TOPO", "", cfg), "pair");
    EXPECT_EQ(lookup_setting("NTRDMA_ROLE", nullptr, cfg), "a");
    EXPECT_EQ(lookup_setting("NTRDMA_ROOT", nullptr, cfg), "/work/main");
    EXPECT_EQ(lookup_setting("NTRDMA_EMPTY", nullptr, cfg), "");
    EXPECT_EQ(lookup_setting("NTRDMA_NONE", nullptr, cfg), "");
}

}  // namespace
}  // namespace ntrdma::testbed
