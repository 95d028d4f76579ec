// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// End-to-end against a real QEMU (qemu-system-x86_64 with ivshmem-doorbell, guest paused with
// -S, TCG). Skipped when QEMU is not installed or NTB_SKIP_QEMU_TESTS is set.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_client.hpp"

extern char** environ;

namespace ntb::ivshmem {
namespace {

std::string find_qemu() {
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':')) {
        std::string p = dir + "/qemu-system-x86_64";
        if (::access(p.c_str(), X_OK) == 0) return p;
    }
    return {};
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int count(const std::string& hay, const std::string& needle) {
    int n = 0;
    for (auto pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1))
        ++n;
    return n;
}

class Proc {
  public:
    Proc(std::vector<std::string> argv, const std::string& stderr_path) {
        std::vector<char*> av;
        for (auto& a : argv) av.push_back(a.data());
        av.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0600);
        if (posix_spawn(&pid_, av[0], &fa, nullptr, av.data(), environ) != 0) pid_ = -1;
        posix_spawn_file_actions_destroy(&fa);
    }
    ~Proc() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    Proc(const Proc&) = delete;
    Proc& operator=(const Proc&) = delete;

    bool started() const { return pid_ > 0; }
    bool running() {
        if (pid_ <= 0) return false;
        int st;
        pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r == 0) return true;
        status_ = st;
        pid_ = -1;
        return false;
    }
    // Returns the wait status, or -1 on timeout (the process is then killed).
    int wait(int timeout_ms) {
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (running()) {
            if (std::chrono::steady_clock::now() > end) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, nullptr, 0);
                pid_ = -1;
                return -1;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return status_;
    }
    int terminate(int timeout_ms = 10000) {
        if (pid_ > 0) ::kill(pid_, SIGTERM);
        return wait(timeout_ms);
    }

  private:
    pid_t pid_ = -1;
    int status_ = -1;
};

bool wait_for(const std::function<bool()>& pred, int timeout_ms = 15000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

class QemuTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (std::getenv("NTB_SKIP_QEMU_TESTS")) GTEST_SKIP() << "NTB_SKIP_QEMU_TESTS is set";
        qemu_ = find_qemu();
        if (qemu_.empty()) GTEST_SKIP() << "qemu-system-x86_64 not found";
    }
    std::unique_ptr<Proc> start_server(bool persistent) {
        std::vector<std::string> a = {NTB_IVSHMEM_SERVER_BIN,
                                      "--shm",
                                      dir_.file("regs"),
                                      "--shm-size",
                                      "65536",
                                      "--vectors",
                                      "5",
                                      "--socket",
                                      dir_.file("s0"),
                                      "--socket",
                                      dir_.file("s1"),
                                      "--pidfile",
                                      dir_.file("pid")};
        if (persistent) a.push_back("--persistent-eventfds");
        auto p = std::make_unique<Proc>(a, dir_.file("server.log"));
        EXPECT_TRUE(wait_for([&] { return ::access(dir_.file("pid").c_str(), F_OK) == 0; }));
        return p;
    }
    std::unique_ptr<Proc> start_qemu(int port, const std::string& name) {
        return std::make_unique<Proc>(
            std::vector<std::string>{
                qemu_, "-machine", "q35", "-accel", "tcg", "-S", "-display", "none", "-nodefaults",
                "-m", "32", "-chardev",
                "socket,path=" + dir_.file("s" + std::to_string(port)) + ",id=ivs", "-device",
                "ivshmem-doorbell,chardev=ivs,vectors=5"},
            dir_.file(name + ".log"));
    }
    bool wait_server_log(const std::string& needle, int n = 1) {
        return wait_for([&] { return count(slurp(dir_.file("server.log")), needle) >= n; });
    }
    std::string qemu_;
    test::TempDir dir_;
};

// A port's QEMU restarts several times while the other keeps running; the survivor must not
// notice anything but link-change interrupts (and in particular must not crash).
TEST_F(QemuTest, PeerRestartsWithPersistentEventfds) {
    auto server = start_server(true);
    auto a = start_qemu(0, "qemu-a");
    ASSERT_TRUE(wait_server_log("client 0 connected (generation 1)"))
        << slurp(dir_.file("server.log"));
    for (int gen = 1; gen <= 3; ++gen) {
        auto b = start_qemu(1, "qemu-b");
        ASSERT_TRUE(wait_server_log("client 1 connected (generation " + std::to_string(gen) + ")"))
            << slurp(dir_.file("server.log")) << slurp(dir_.file("qemu-b.log"));
        // B may still be starting up (no signal handler yet): dying of SIGTERM is fine too.
        int st = b->terminate();
        EXPECT_TRUE((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                    (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM))
            << st << slurp(dir_.file("qemu-b.log"));
        ASSERT_TRUE(wait_server_log("client 1 disconnected", gen));
        ASSERT_TRUE(a->running()) << "surviving QEMU died: " << slurp(dir_.file("qemu-a.log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_TRUE(a->running()) << slurp(dir_.file("qemu-a.log"));
    int st = a->terminate();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << slurp(dir_.file("qemu-a.log"));
    std::string alog = slurp(dir_.file("qemu-a.log"));
    EXPECT_EQ(alog.find("rror"), std::string::npos) << alog;
    EXPECT_EQ(alog.find("corrupt"), std::string::npos) << alog;
    st = server->terminate();
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
}

// A second QEMU on an occupied port is refused and exits with an error instead of hanging.
TEST_F(QemuTest, DuplicateQemuExitsWithError) {
    auto server = start_server(false);
    auto a = start_qemu(0, "qemu-a");
    ASSERT_TRUE(wait_server_log("client 0 connected")) << slurp(dir_.file("server.log"));
    auto dup = start_qemu(0, "qemu-dup");
    int st = dup->wait(15000);
    ASSERT_NE(st, -1) << "refused QEMU did not exit";
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) != 0) << st;
    std::string dlog = slurp(dir_.file("qemu-dup.log"));
    EXPECT_NE(dlog.find("version"), std::string::npos) << dlog;
    EXPECT_TRUE(wait_server_log("client 0 refused"));
    EXPECT_TRUE(a->running());
    EXPECT_TRUE(WIFEXITED(a->terminate()));
    server->terminate();
}

}  // namespace
}  // namespace ntb::ivshmem
