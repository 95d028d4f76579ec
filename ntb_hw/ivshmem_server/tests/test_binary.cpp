// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Tests of the ntb-ivshmem-server binary itself: exit codes, signals, pidfile, cleanup.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_client.hpp"

extern char** environ;

namespace ntb::ivshmem {
namespace {

using test::FakeClient;

pid_t spawn_server(const std::vector<std::string>& args, const std::string& stderr_path) {
    std::vector<std::string> all = {NTB_IVSHMEM_SERVER_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot spawn " << argv[0];
    return rc == 0 ? pid : -1;
}

// Waits for the child to exit; kills it (and fails) after timeout_ms. Returns the wait status.
int wait_child(pid_t pid, int timeout_ms = 5000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    for (;;) {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0) {
            ADD_FAILURE() << "waitpid failed";
            return -1;
        }
        if (std::chrono::steady_clock::now() > end) {
            ADD_FAILURE() << "server did not exit in time";
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

bool wait_for_file(const std::string& path, int timeout_ms = 5000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (::access(path.c_str(), F_OK) != 0) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

class BinaryTest : public ::testing::Test {
  protected:
    std::vector<std::string> base_args() const {
        return {"--shm",     dir_.file("regs"), "--shm-size",    "65536",    "--vectors",
                "5",         "--socket",        dir_.file("s0"), "--socket", dir_.file("s1"),
                "--pidfile", dir_.file("pid")};
    }
    int run_to_exit(const std::vector<std::string>& args) {
        pid_t pid = spawn_server(args, dir_.file("stderr"));
        if (pid < 0) return -1;
        return wait_child(pid);
    }
    test::TempDir dir_;
};

TEST_F(BinaryTest, BadArgumentsExitWithUsage) {
    const std::vector<std::vector<std::string>> bad = {
        {},
        {"--shm", dir_.file("regs"), "--shm-size", "65536", "--vectors", "5"},
        {"--shm", dir_.file("regs"), "--shm-size", "65535", "--vectors", "5", "--socket", "/x"},
        {"--shm", dir_.file("regs"), "--shm-size", "4096", "--vectors", "5", "--socket",
         dir_.file("a"), "--socket", dir_.file("b")},
        {"--shm", dir_.file("regs"), "--shm-size", "65536", "--vectors", "0", "--socket", "/x"},
        {"--frobnicate"},
    };
    for (const auto& args : bad) {
        std::string joined;
        for (const auto& a : args) joined += a + " ";
        int status = run_to_exit(args);
        ASSERT_TRUE(WIFEXITED(status)) << joined;
        EXPECT_EQ(WEXITSTATUS(status), 2) << joined;
        EXPECT_NE(slurp(dir_.file("stderr")).find("usage:"), std::string::npos) << joined;
        EXPECT_NE(::access(dir_.file("regs").c_str(), F_OK), 0) << "nothing created: " << joined;
    }
}

TEST_F(BinaryTest, HelpExitsZero) {
    int status = run_to_exit({"--help"});
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(BinaryTest, UnusableShmPathExitsOne) {
    auto args = base_args();
    args[1] = dir_.file("no/such/dir/regs");
    int status = run_to_exit(args);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    EXPECT_NE(::access(dir_.file("pid").c_str(), F_OK), 0);
}

void sigterm_lifecycle(const test::TempDir& dir, const std::vector<std::string>& args, int sig) {
    pid_t pid = spawn_server(args, dir.file("stderr"));
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(wait_for_file(dir.file("pid"))) << slurp(dir.file("stderr"));
    EXPECT_EQ(slurp(dir.file("pid")), std::to_string(pid) + "\n");

    {
        FakeClient c1(dir.file("s1"));
        ASSERT_TRUE(c1.connected());
        RecvResult r = c1.recv();
        EXPECT_EQ(r.value, 0);
        r = c1.recv();
        EXPECT_EQ(r.value, 1);
        r = c1.recv();
        EXPECT_EQ(r.value, -1);
        EXPECT_TRUE(r.fd.valid());
        for (int v = 0; v < 5; ++v) {
            r = c1.recv();
            EXPECT_EQ(r.value, 1);
            EXPECT_TRUE(r.fd.valid());
        }
        // Keep it connected across the signal: shutdown must not wait for clients.
        ASSERT_EQ(::kill(pid, sig), 0);
        int status = wait_child(pid);
        ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
        EXPECT_EQ(WEXITSTATUS(status), 0);
        EXPECT_EQ(c1.recv().status, RecvStatus::kEof);
    }
    EXPECT_NE(::access(dir.file("s0").c_str(), F_OK), 0);
    EXPECT_NE(::access(dir.file("s1").c_str(), F_OK), 0);
    EXPECT_NE(::access(dir.file("pid").c_str(), F_OK), 0);
    EXPECT_EQ(::access(dir.file("regs").c_str(), F_OK), 0) << "register file is kept";
    std::string log = slurp(dir.file("stderr"));
    EXPECT_NE(log.find("client 1 connected"), std::string::npos) << log;
}

TEST_F(BinaryTest, SigtermExitsCleanly) { sigterm_lifecycle(dir_, base_args(), SIGTERM); }

TEST_F(BinaryTest, SigintExitsCleanly) { sigterm_lifecycle(dir_, base_args(), SIGINT); }

}  // namespace
}  // namespace ntb::ivshmem
