// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The whole control channel without QEMU: ntrdma-remote -> ntrdma-agent a -> ntrdma-relay ->
// ntrdma-agent b, joined by UNIX sockets in a temporary directory instead of virtio-serial
// ports. The relay's "start guest b" script starts agent b directly.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io.hpp"

extern char** environ;

namespace ntrdma::testbed {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void spit(const std::string& path, const std::string& data, mode_t mode = 0644) {
    {
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        f << data;
    }
    ::chmod(path.c_str(), mode);
}

bool wait_for(const std::function<bool()>& cond, double seconds) {
    auto t0 = Clock::now();
    while (!cond()) {
        if (since(t0) > seconds) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

pid_t read_pid(const std::string& path) {
    std::string s = slurp(path);
    return s.empty() ? -1 : static_cast<pid_t>(std::stol(s));
}

// Environment of the test process without NTRDMA_* variables, plus `extra`.
std::vector<std::string> make_env(const std::vector<std::string>& extra) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        if (std::strncmp(*e, "NTRDMA_", 7) != 0) env.emplace_back(*e);
    }
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
}

struct Child {
    pid_t pid = -1;
    UniqueFd out, err;  // read ends, when captured
};

// Starts argv; stdout/stderr captured through pipes (capture) or sent to `log_path`.
Child start(const std::vector<std::string>& args, const std::vector<std::string>& env, bool capture,
            const std::string& log_path = "/dev/null") {
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    Child c;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    UniqueFd ow, ew;
    if (capture) {
        int o[2], e[2];
        EXPECT_EQ(::pipe2(o, O_CLOEXEC), 0);
        EXPECT_EQ(::pipe2(e, O_CLOEXEC), 0);
        c.out.reset(o[0]);
        ow.reset(o[1]);
        c.err.reset(e[0]);
        ew.reset(e[1]);
        posix_spawn_file_actions_adddup2(&fa, ow.get(), 1);
        posix_spawn_file_actions_adddup2(&fa, ew.get(), 2);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                         0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    }
    int rc = posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << args[0];
    return c;
}

// Waits for a child; SIGKILLs it (and fails) after `seconds`. Returns the shell-style status.
int finish(pid_t pid, double seconds = 30) {
    auto t0 = Clock::now();
    for (;;) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(status)) return WEXITSTATUS(status);
            return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
        }
        if (r < 0) return -1;
        if (since(t0) > seconds) {
            ADD_FAILURE() << "pid " << pid << " did not exit within " << seconds << " s";
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

struct Result {
    int rc = -1;
    std::string out, err;
    double seconds = 0;
};

// Runs a child to completion, collecting its stdout and stderr separately.
Result run(const std::vector<std::string>& args, const std::vector<std::string>& env,
           double limit = 60) {
    auto t0 = Clock::now();
    Child c = start(args, env, true);
    Result r;
    std::vector<pollfd> p = {{c.out.get(), POLLIN, 0}, {c.err.get(), POLLIN, 0}};
    std::string* dst[2] = {&r.out, &r.err};
    int open = 2;
    char buf[65536];
    while (open > 0 && since(t0) < limit) {
        if (::poll(p.data(), p.size(), 100) <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !p[i].revents) continue;
            ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
            if (n > 0) {
                dst[i]->append(buf, static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                p[i].fd = -1;
                --open;
            }
        }
    }
    r.rc = finish(c.pid, limit);
    r.seconds = since(t0);
    return r;
}

class Channel : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/ntrdma-ctl.XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        spit(dir_ + "/start-b.sh",
             "#!/bin/sh\n"
             "# fake guest b: its agent, connected to the relay's socket\n"
             "err=$(cat '" +
                 dir_ +
                 "/b-setup-err' 2>/dev/null)\n"
                 "export NTRDMA_ROOT='" +
                 dir_ +
                 "'\n"
                 "exec '" NTRDMA_AGENT_BIN "' --port '" +
                 dir_ + "/ctl-b.sock' b \"$err\"\n",
             0755);
        if (setup_err_) spit(dir_ + "/b-setup-err", "insmod failed");
        env_ = make_env(
            {"NTRDMA_AGENT_SOCK=" + dir_ + "/agent.sock", "NTRDMA_TOPO=pair", "NTRDMA_ROLE=a"});
        relay_ = start({NTRDMA_RELAY_BIN, "--run", dir_, "--start-b", dir_ + "/start-b.sh",
                        "--qemu-log", dir_ + "/qemu-b.log"},
                       make_env({}), false, dir_ + "/relay.log")
                     .pid;
        ASSERT_TRUE(wait_for([&] { return exists(dir_ + "/ctl-a.sock"); }, 10))
            << slurp(dir_ + "/relay.log");
        agent_a_ = start({NTRDMA_AGENT_BIN, "--port", dir_ + "/ctl-a.sock", "--socket",
                          dir_ + "/agent.sock", "a"},
                         make_env({}), false, dir_ + "/agent-a.log")
                       .pid;
        ASSERT_TRUE(wait_for([&] { return exists(dir_ + "/agent.sock"); }, 10));
        Result w = ctl({"wait-peer", "20"});
        if (!setup_err_) {
            ASSERT_EQ(w.rc, 0) << w.err << slurp(dir_ + "/relay.log");
        }
    }

    void TearDown() override {
        if (relay_ > 0) {
            ::kill(relay_, SIGTERM);
            EXPECT_EQ(finish(relay_, 40), 0);
        }
        if (agent_a_ > 0) {
            EXPECT_EQ(finish(agent_a_, 10), 0);  // ends with the relay
        }
        for (pid_t p : leftovers_) ::kill(p, SIGKILL);
        if (HasFailure()) {
            std::fprintf(stderr, "--- relay.log\n%s--- qemu-b.log\n%s--- agent-a.log\n%s",
                         slurp(dir_ + "/relay.log").c_str(), slurp(dir_ + "/qemu-b.log").c_str(),
                         slurp(dir_ + "/agent-a.log").c_str());
        }
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    Result remote(std::vector<std::string> args, double limit = 60) {
        args.insert(args.begin(), NTRDMA_REMOTE_BIN);
        return run(args, env_, limit);
    }
    Result ctl(std::vector<std::string> args) {
        args.insert(args.begin(), "--ctl");
        return remote(args);
    }

    bool setup_err_ = false;
    std::string dir_;
    std::vector<std::string> env_;
    pid_t relay_ = -1, agent_a_ = -1;
    std::vector<pid_t> leftovers_;
};

TEST_F(Channel, StdoutStderrAndStatus) {
    Result r = remote({"echo out; echo err >&2; exit 7"});
    EXPECT_EQ(r.rc, 7);
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
    r = remote({"sh", "-c", "\"exit 3\""});
    EXPECT_EQ(r.rc, 3);
    r = remote({"kill -9 $$"});
    EXPECT_EQ(r.rc, 137);
    r = remote({"pwd"});  // cwd is $NTRDMA_ROOT of guest b
    EXPECT_EQ(r.out, dir_ + "\n");
    r = remote({"read x; echo \"[$x]\""});  // stdin is /dev/null
    EXPECT_EQ(r.out, "[]\n");
}

TEST_F(Channel, ByteExactBinaryStreams) {
    std::mt19937 rng(42);
    std::string a(3 << 20, '\0'), b(700001, '\0');
    for (auto& c : a) c = static_cast<char>(rng());
    for (auto& c : b) c = static_cast<char>(rng());
    spit(dir_ + "/blob-a", a);
    spit(dir_ + "/blob-b", b);
    Result r = remote({"cat blob-a; cat blob-b >&2; cat blob-a"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_TRUE(r.out == a + a) << "stdout differs (" << r.out.size() << " bytes)";
    EXPECT_TRUE(r.err == b) << "stderr differs (" << r.err.size() << " bytes)";
}

TEST_F(Channel, BashAndSshShim) {
    Result r = remote({"--bash", "[[ -e /proc ]] && echo bash-ok"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "bash-ok\n");
    r = remote({"[[ -e /proc ]] && echo bash-ok"});  // plain sh (dash) has no [[
    EXPECT_NE(r.out, "bash-ok\n");
    r = remote({"--ssh", "-o", "BatchMode=yes", "root@peer", "[[ -e /proc ]] && echo", "ssh-ok"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "ssh-ok\n");
    r = remote({"--ssh", "peer"});
    EXPECT_EQ(r.rc, 255);
}

TEST_F(Channel, TimeoutKillsTheCommand) {
    Result r = remote({"-t", "1", "echo $$ > victim.pid; echo started; exec sleep 30"});
    EXPECT_EQ(r.rc, 124);
    EXPECT_EQ(r.out, "started\n");
    EXPECT_EQ(r.err, "remote: timed out after 1 s\n");
    EXPECT_LT(r.seconds, 5);
    pid_t victim = read_pid(dir_ + "/victim.pid");
    ASSERT_GT(victim, 0);
    leftovers_.push_back(victim);
    EXPECT_TRUE(wait_for([&] { return process_gone(victim); }, 5));
    // the agent is still fine
    EXPECT_EQ(remote({"echo alive"}).out, "alive\n");
}

TEST_F(Channel, ClientGivingUpCancels) {
    Child c = start({NTRDMA_REMOTE_BIN, "echo $$ > victim.pid; exec sleep 30"}, env_, true);
    ASSERT_TRUE(wait_for([&] { return read_pid(dir_ + "/victim.pid") > 0; }, 10));
    pid_t victim = read_pid(dir_ + "/victim.pid");
    leftovers_.push_back(victim);
    ::kill(c.pid, SIGINT);
    EXPECT_EQ(finish(c.pid), 130);
    EXPECT_TRUE(wait_for([&] { return process_gone(victim); }, 5));
}

TEST_F(Channel, ConcurrentCalls) {
    constexpr int kCalls = 6;
    std::vector<Result> res(kCalls);
    std::vector<std::thread> th;
    auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
        th.emplace_back([&, i] {
            res[i] = remote({"sleep 1; echo out" + std::to_string(i) + "; echo err" +
                             std::to_string(i) + " >&2; exit " + std::to_string(i)});
        });
    }
    for (auto& t : th) t.join();
    EXPECT_LT(since(t0), 4.5);
    for (int i = 0; i < kCalls; ++i) {
        EXPECT_EQ(res[i].rc, i);
        EXPECT_EQ(res[i].out, "out" + std::to_string(i) + "\n");
        EXPECT_EQ(res[i].err, "err" + std::to_string(i) + "\n");
    }
}

TEST_F(Channel, BackgroundChildDoesNotBlock) {
    Result r = remote({"sleep 30 & echo $! > bg.pid; echo done"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "done\n");
    EXPECT_LT(r.seconds, 3);
    pid_t bg = read_pid(dir_ + "/bg.pid");
    if (bg > 0) ::kill(bg, SIGKILL);
}

TEST_F(Channel, PeerControl) {
    Result r = ctl({"peer-status"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "ready (instance 1)\n");
    r = ctl({"start-peer"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, "testbed-ctl: peer is already running (instance 1)\n");
    r = ctl({"kill-peer"});
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out + r.err, "");
    r = ctl({"peer-status"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, "down (instance 1 exited (QEMU status -9))\n");
    r = remote({"true"});
    EXPECT_EQ(r.rc, 255);
    EXPECT_EQ(r.err,
              "remote: peer guest b is not available (down, instance 1 exited (QEMU status -9))\n");
    r = ctl({"kill-peer"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, "testbed-ctl: peer is not running\n");
    r = ctl({"start-peer", "20"});
    EXPECT_EQ(r.rc, 0) << r.err;
    r = ctl({"peer-status"});
    EXPECT_EQ(r.out, "ready (instance 2)\n");
    EXPECT_EQ(remote({"echo back"}).out, "back\n");
    r = ctl({"poweroff-peer", "10"});
    EXPECT_EQ(r.rc, 0) << r.err;
    r = ctl({"peer-status"});
    EXPECT_EQ(r.err, "down (instance 2 exited (QEMU status 0))\n");
    r = ctl({"poweroff-peer"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, "testbed-ctl: poweroff-peer: not running\n");
    r = ctl({"frobnicate"});
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "testbed-ctl: unknown request 'frobnicate'\n");
    std::string qlog = slurp(dir_ + "/qemu-b.log");
    EXPECT_NE(qlog.find("--- instance 1\n"), std::string::npos);
    EXPECT_NE(qlog.find("--- instance 2\n"), std::string::npos);
}

TEST_F(Channel, PeerKilledDuringCall) {
    std::vector<std::string> args = {NTRDMA_REMOTE_BIN, "touch started; sleep 30"};
    Result r;
    std::thread t([&] { r = run(args, env_); });
    ASSERT_TRUE(wait_for([&] { return exists(dir_ + "/started"); }, 10));
    EXPECT_EQ(ctl({"kill-peer"}).rc, 0);
    t.join();
    EXPECT_EQ(r.rc, 255);
    EXPECT_TRUE(r.err == "remote: peer guest b went down\n" ||
                r.err == "remote: lost the connection to peer guest b\n")
        << r.err;
    EXPECT_LT(r.seconds, 10);
}

TEST_F(Channel, RelayStopPowersPeerOff) {
    ::kill(relay_, SIGTERM);
    EXPECT_EQ(finish(relay_, 30), 0);
    relay_ = -1;
    std::string log = slurp(dir_ + "/relay.log");
    EXPECT_NE(log.find("relay: guest b power-off: ok"), std::string::npos) << log;
    EXPECT_NE(log.find("guest b instance 1 exited (status 0)"), std::string::npos) << log;
}

class ChannelSetupFailure : public Channel {
  protected:
    ChannelSetupFailure() { setup_err_ = true; }
};

TEST_F(ChannelSetupFailure, ReportedToWaitPeerAndRemote) {
    Result r = ctl({"wait-peer", "20"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_EQ(r.err, "testbed-ctl: peer is failed (instance 1: failed: insmod failed)\n");
    r = remote({"true"});
    EXPECT_EQ(r.rc, 255);
    EXPECT_EQ(
        r.err,
        "remote: peer guest b is not available (failed, instance 1: failed: insmod failed)\n");
}

// Without the relay and agents.
std::vector<std::string> client_env(const std::string& topo, const std::string& role) {
    return make_env({"NTRDMA_TOPO=" + topo, "NTRDMA_ROLE=" + role,
                     "NTRDMA_AGENT_SOCK=/nonexistent/agent.sock"});
}

TEST(Client, LoopTopologyRunsLocally) {
    auto env = client_env("loop", "a");
    Result r = run({NTRDMA_REMOTE_BIN, "echo out; echo err >&2; exit 7"}, env);
    EXPECT_EQ(r.rc, 7);
    EXPECT_EQ(r.out, "out\n");
    EXPECT_EQ(r.err, "err\n");
    r = run({NTRDMA_REMOTE_BIN, "--bash", "[[ -e /proc ]] && echo bash-ok"}, env);
    EXPECT_EQ(r.out, "bash-ok\n");
    r = run({NTRDMA_REMOTE_BIN, "-t", "1", "sleep 10"}, env);
    EXPECT_EQ(r.rc, 124);
    EXPECT_EQ(r.err, "remote: timed out after 1 s\n");
    EXPECT_LT(r.seconds, 5);
    r = run({NTRDMA_REMOTE_BIN, "--ctl", "peer-status"}, env);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(
        r.err,
        "testbed-ctl: peer-status: not available in loop topology (there is no peer guest)\n");
}

TEST(Client, Unreachable) {
    Result r = run({NTRDMA_REMOTE_BIN, "true"}, client_env("pair", "a"));
    EXPECT_EQ(r.rc, 255);
    EXPECT_EQ(r.err,
              "remote: cannot reach the test-bed agent (/nonexistent/agent.sock): [Errno 2] No "
              "such file or directory\n");
    r = run({NTRDMA_REMOTE_BIN, "true"}, client_env("pair", "b"));
    EXPECT_EQ(r.rc, 255);
    EXPECT_EQ(r.err, "remote: only available in guest a\n");
    r = run({NTRDMA_REMOTE_BIN, "--ctl"}, client_env("pair", "a"));
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.out.substr(0, 26), "usage: testbed-ctl REQUEST");
}

}  // namespace
}  // namespace ntrdma::testbed
