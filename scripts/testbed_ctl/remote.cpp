// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ntrdma-remote: the guest-side client of the test-bed control channel.
//
// remote [-t SECS] [--bash] [--] CMD [ARGS...]
//   Runs CMD in test-bed guest b and exits with its status. Like ssh, the words are joined with
//   single spaces and the result is run by `sh -c` (`bash -c` with --bash), cwd $NTRDMA_ROOT,
//   stdin /dev/null. Stdout and stderr arrive on our stdout and stderr (kept apart, byte-exact;
//   their relative order is not preserved). Timeout (default 120 s, or $NTRDMA_REMOTE_TIMEOUT;
//   0 = none): the command is killed, exit 124. Exit 255 if guest b is not reachable. In loop
//   topology CMD runs locally. Several remote calls may run at the same time.
//
// The same program serves the ssh shim (--ssh SSH-ARGS...) and testbed-ctl (--ctl REQUEST...),
// see scripts/guest/bin. It talks to the agent of guest a (ntrdma-agent a) over
// /run/ntrdma-testbed/agent.sock ($NTRDMA_AGENT_SOCK overrides it, for tests). Frames: see
// frame.hpp.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "frame.hpp"
#include "io.hpp"

using namespace ntrdma::testbed;

namespace {

constexpr const char* kDefaultSock = "/run/ntrdma-testbed/agent.sock";
constexpr const char* kConfigFile = "/etc/ntrdma-testbed/env";

volatile sig_atomic_t g_child = 0;  // process group of the local command (loop topology)

void on_signal(int sig) {
    if (g_child > 0) ::kill(-static_cast<pid_t>(g_child), SIGKILL);
    ::_exit(sig == SIGINT ? 130 : 143);
}

void err(const std::string& msg) {
    std::string line = msg + "\n";
    write_all(2, line);
}

std::string setting(const char* name) {
    static bool loaded = false;
    static std::string config;
    const char* env = std::getenv(name);
    if (env && *env) return env;
    if (!loaded) {
        loaded = true;
        std::ifstream f(kConfigFile);
        std::stringstream ss;
        ss << f.rdbuf();
        config = ss.str();
    }
    return lookup_setting(name, nullptr, config);
}

using Clock = std::chrono::steady_clock;

double seconds_until(Clock::time_point deadline) {
    return std::chrono::duration<double>(deadline - Clock::now()).count();
}

int run_local(const std::string& shell, const std::string& cmd, double timeout) {
    SpawnOptions opt;
    opt.argv = {shell, "-c", cmd};
    opt.cwd = setting("NTRDMA_ROOT");
    opt.new_session = true;
    pid_t pid = spawn(opt);
    if (pid < 0) {
        err("remote: " + errno_text(-pid) + ": " + shell);
        return 255;
    }
    g_child = pid;
    const bool limited = timeout != 0 && poll_timeout_ms(timeout) != -1;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(limited ? timeout : 0.0));
    UniqueFd pidfd = open_pidfd(pid);
    for (;;) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            g_child = 0;
            if (WIFEXITED(status)) return WEXITSTATUS(status);
            return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255;
        }
        if (r < 0 && errno != EINTR) return 255;
        int ms = limited ? poll_timeout_ms(seconds_until(deadline)) : -1;
        if (limited && ms == 0) {
            ::kill(-pid, SIGKILL);
            wait_status(pid);
            g_child = 0;
            err("remote: timed out after " + format_g(timeout) + " s");
            return 124;
        }
        if (pidfd) {
            pollfd p{pidfd.get(), POLLIN, 0};
            ::poll(&p, 1, ms);
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(ms < 0 || ms > 10 ? 10 : ms));
        }
    }
}

// Sends one request to the agent, copies O/E frames to stdout/stderr and returns the exit
// status from the R frame.
int request(char type, const std::string& payload, double timeout, const std::string& name) {
    const char* env_sock = std::getenv("NTRDMA_AGENT_SOCK");
    const std::string sock = env_sock && *env_sock ? env_sock : kDefaultSock;
    int cerr = 0;
    UniqueFd s = connect_unix(sock, cerr);
    if (!s) {
        err(name + ": cannot reach the test-bed agent (" + sock + "): " + errno_text(cerr));
        return 255;
    }
    if (send_all(s.get(), encode_frame(type, 0, payload)) != 0) {
        err(name + ": connection to the test-bed agent lost");
        return 255;
    }
    const bool limited = timeout != 0 && poll_timeout_ms(timeout) != -1;
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(limited ? timeout : 0.0));
    Decoder dec;
    std::vector<char> buf(262144);
    for (;;) {
        int ms = -1;
        if (limited) {
            ms = poll_timeout_ms(seconds_until(deadline));
            if (ms == 0) {
                s.reset();  // the agent cancels the command in guest b
                err(name + ": timed out after " + format_g(timeout) + " s");
                return 124;
            }
        }
        pollfd p{s.get(), POLLIN, 0};
        int pr = ::poll(&p, 1, ms);
        if (pr <= 0) continue;  // timeout (checked above) or EINTR
        ssize_t n = ::read(s.get(), buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err(name + ": connection to the test-bed agent lost");
            return 255;
        }
        dec.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        Frame f;
        for (;;) {
            Decoder::Status st = dec.next(f);
            if (st == Decoder::Status::kNeedMore) break;
            if (st != Decoder::Status::kFrame) {
                err(name + ": protocol error");
                return 255;
            }
            if (f.type == ftype::kStdout) {
                write_all(1, f.payload);
            } else if (f.type == ftype::kStderr) {
                write_all(2, f.payload);
            } else if (f.type == ftype::kExit) {
                s.reset();
                long long rc = 0;
                return parse_int(f.payload, rc) ? static_cast<int>(rc & 0xff) : 255;
            }
        }
    }
}

int exec_cmd(const ClientCall& call) {
    if (setting("NTRDMA_TOPO") == "loop") return run_local(call.shell, call.command, call.timeout);
    if (setting("NTRDMA_ROLE") == "b") {
        err(call.name + ": only available in guest a");
        return 255;
    }
    std::string payload(1, call.shell == "/bin/bash" ? 'b' : 's');
    payload += call.command;
    return request(ftype::kExec, payload, call.timeout, call.name);
}

}  // namespace

int main(int argc, char** argv) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    ::signal(SIGPIPE, SIG_DFL);

    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    ClientCall call;
    if (!args.empty() && args[0] == "--ssh") {
        args.erase(args.begin());
        call = parse_ssh(args, default_timeout(std::getenv("NTRDMA_REMOTE_TIMEOUT")));
    } else if (!args.empty() && args[0] == "--ctl") {
        args.erase(args.begin());
        call = parse_ctl(args, setting("NTRDMA_TOPO"), setting("NTRDMA_ROLE"));
    } else {
        call = parse_remote(args, default_timeout(std::getenv("NTRDMA_REMOTE_TIMEOUT")));
    }
    if (!call.run) {
        if (!call.out.empty()) write_all(1, call.out);
        if (!call.err.empty()) err(call.err);
        return call.rc;
    }
    if (call.type == ftype::kControl)
        return request(ftype::kControl, call.command, call.timeout, call.name);
    return exec_cmd(call);
}
