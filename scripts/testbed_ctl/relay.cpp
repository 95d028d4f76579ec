// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ntrdma-relay: host side of the test-bed control channel (pair topology), started by
// scripts/testbed.sh.
//
//   ntrdma-relay --run DIR --start-b SCRIPT --qemu-log FILE
//
// Listens on DIR/ctl-a.sock and DIR/ctl-b.sock, to which the guests' virtio-serial ports
// "ntrdma.ctl" are connected (QEMU chardev socket clients). It forwards exec requests from guest
// a's agent to guest b's agent and the output back, owns guest b's QEMU (started as
// `SCRIPT INSTANCE`, output appended to FILE) and serves the testbed-ctl requests:
//   peer-status | wait-peer [SECS] | kill-peer | start-peer [SECS] | poweroff-peer [SECS]
// On SIGTERM (SIGINT, SIGHUP) it powers guest b off (SIGKILL after 30 s) and exits.
// Frames: see frame.hpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "frame.hpp"
#include "io.hpp"

using namespace ntrdma::testbed;

namespace {

void log(const std::string& msg) {
    char ts[16];
    std::time_t now = std::time(nullptr);
    struct tm tm {};
    ::localtime_r(&now, &tm);
    std::strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
    std::string line = std::string(ts) + " relay: " + msg + "\n";
    write_all(1, line);
}

struct Args {
    std::string run, start_b, qemu_log;
};

// One instance of guest b's QEMU.
struct Proc {
    pid_t pid = -1;
    int inst = 0;
    bool exited = false;  // reaped (or about to be): never signal it again
};

using Clock = std::chrono::steady_clock;

class Relay {
  public:
    explicit Relay(Args args) : args_(std::move(args)) {}

    // -- sending ---------------------------------------------------------
    void send_a(char t, std::uint32_t fid, std::string_view payload = {}) {
        std::lock_guard<std::mutex> g(a_lock_);
        if (a_conn_ < 0) return;
        int e = send_all(a_conn_, encode_frame(t, fid, payload));
        if (e) log("write to guest a failed: " + errno_text(e));
    }

    bool send_b(char t, std::uint32_t fid, std::string_view payload = {}) {
        std::lock_guard<std::mutex> g(b_lock_);
        if (b_conn_ < 0) return false;
        int e = send_all(b_conn_, encode_frame(t, fid, payload));
        if (e) {
            log("write to guest b failed: " + errno_text(e));
            return false;
        }
        return true;
    }

    void reply(std::uint32_t fid, const std::string& text, int rc) {
        if (!text.empty()) send_a(rc == 0 ? ftype::kStdout : ftype::kStderr, fid, text);
        send_a(ftype::kExit, fid, std::to_string(rc));
    }

    void fail_pending(const std::string& why) {
        std::set<std::uint32_t> ids;
        {
            std::lock_guard<std::mutex> g(mu_);
            ids.swap(pending_);
        }
        for (auto fid : ids) {
            send_a(ftype::kStderr, fid, "remote: " + why + "\n");
            send_a(ftype::kExit, fid, "255");
        }
    }

    // -- guest b's QEMU --------------------------------------------------
    void start_b() {
        std::shared_ptr<Proc> proc;
        std::string failure;
        {
            std::lock_guard<std::mutex> g(mu_);
            int inst = ++inst_;
            UniqueFd logf(
                ::open(args_.qemu_log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666));
            if (logf) write_all(logf.get(), "--- instance " + std::to_string(inst) + "\n");
            SpawnOptions opt;
            opt.argv = {args_.start_b, std::to_string(inst)};
            opt.stdout_fd = logf.get();
            opt.stderr_fd = logf.get();
            pid_t pid = logf ? spawn(opt) : -errno;
            if (pid < 0) {
                state_ = "failed";
                detail_ = "instance " + std::to_string(inst) + ": cannot start " + args_.start_b +
                          ": " + errno_text(-pid);
                failure = detail_;
            } else {
                proc = std::make_shared<Proc>();
                proc->pid = pid;
                proc->inst = inst;
                proc_ = proc;
                state_ = "booting";
                detail_ = "instance " + std::to_string(inst) + " booting";
            }
            cv_.notify_all();
        }
        if (!proc) {
            log("guest b: " + failure);
            return;
        }
        log("started guest b instance " + std::to_string(proc->inst) + " (pid " +
            std::to_string(proc->pid) + ")");
        std::thread([this, proc] { watch_b(proc); }).detach();
    }

    void watch_b(std::shared_ptr<Proc> proc) {
        siginfo_t si{};
        while (::waitid(P_PID, static_cast<id_t>(proc->pid), &si, WEXITED | WNOWAIT) != 0 &&
               errno == EINTR) {
        }
        int rc;
        {
            // Reaped under the lock, with `exited` set, so that kill_b never signals a pid that
            // might have been reused.
            std::lock_guard<std::mutex> g(mu_);
            proc->exited = true;
            int status = 0;
            while (::waitpid(proc->pid, &status, 0) < 0 && errno == EINTR) {
            }
            // Like Python's Popen.returncode: negative signal number when killed.
            rc = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
        }
        log("guest b instance " + std::to_string(proc->inst) + " exited (status " +
            std::to_string(rc) + ")");
        {
            std::lock_guard<std::mutex> g(mu_);
            if (proc_ == proc) {
                proc_.reset();
                state_ = "down";
                detail_ = "instance " + std::to_string(proc->inst) + " exited (QEMU status " +
                          std::to_string(rc) + ")";
            }
            cv_.notify_all();
        }
        fail_pending("peer guest b went down");
    }

    bool b_running() const { return proc_ && !proc_->exited; }  // under mu_

    // Waits until done() holds (called under mu_); false on timeout. A timeout that is not
    // finite (or huge) waits forever.
    bool wait_state(double timeout, const std::function<bool()>& done) {
        std::unique_lock<std::mutex> g(mu_);
        if (!std::isfinite(timeout) || timeout > 1e9) {
            cv_.wait(g, done);
            return true;
        }
        auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(timeout > 0 ? timeout : 0));
        return cv_.wait_until(g, end, done);
    }

    bool kill_b() {
        std::shared_ptr<Proc> proc;
        {
            std::lock_guard<std::mutex> g(mu_);
            proc = proc_;
            if (!proc) return false;
            if (!proc->exited) ::kill(proc->pid, SIGKILL);
        }
        wait_state(30, [&] { return proc_ != proc; });
        return true;
    }

    std::string poweroff_b(double timeout) {
        std::shared_ptr<Proc> proc;
        {
            std::lock_guard<std::mutex> g(mu_);
            proc = proc_;
        }
        if (!proc) return "not running";
        std::string why;
        if (send_b(ftype::kPowerOff, 0)) {
            if (wait_state(timeout, [&] { return proc_ != proc; })) return "ok";
            why = "did not power off within " + format_g(timeout) + " s; killed";
        } else {
            why = "agent not reachable; killed";
        }
        kill_b();
        return why;
    }

    // -- control requests from guest a -----------------------------------
    void ctl(std::uint32_t fid, const std::string& payload) {
        std::vector<std::string> words;
        {
            std::istringstream in(payload);
            std::string w;
            while (in >> w) words.push_back(w);
        }
        const std::string op = words.empty() ? "" : words[0];
        double secs = 0;  // 0: the request's default
        if (words.size() > 1 && !parse_float(words[1], secs))
            return reply(fid, "testbed-ctl: bad timeout " + py_repr(words[1]) + "\n", 2);
        {
            std::string all;
            for (const auto& w : words) all += (all.empty() ? "" : " ") + w;
            log("control request: " + all);
        }
        auto or_default = [&](double d) { return secs != 0 ? secs : d; };
        auto status = [&] {
            std::lock_guard<std::mutex> g(mu_);
            return std::make_pair(state_, detail_);
        };
        auto wait_booted = [&] {
            double t = or_default(180);
            bool ok = wait_state(t, [&] { return state_ != "booting"; });
            auto [st, det] = status();
            if (!ok)
                return reply(fid, "testbed-ctl: peer still booting after " + format_g(t) + " s\n",
                             124);
            if (st == "ready") return reply(fid, "", 0);
            reply(fid, "testbed-ctl: peer is " + st + " (" + det + ")\n", 1);
        };
        if (op == "peer-status") {
            auto [st, det] = status();
            return reply(fid, st + " (" + det + ")\n", st == "ready" ? 0 : 1);
        }
        if (op == "wait-peer") return wait_booted();
        if (op == "kill-peer") {
            if (!kill_b()) return reply(fid, "testbed-ctl: peer is not running\n", 1);
            return reply(fid, "", 0);
        }
        if (op == "poweroff-peer") {
            std::string why = poweroff_b(or_default(60));
            if (why == "ok") return reply(fid, "", 0);
            return reply(fid, "testbed-ctl: poweroff-peer: " + why + "\n", 1);
        }
        if (op == "start-peer") {
            {
                std::lock_guard<std::mutex> g(mu_);
                if (b_running())
                    return reply(fid, "testbed-ctl: peer is already running (" + detail_ + ")\n",
                                 1);
            }
            start_b();
            return wait_booted();
        }
        reply(fid, "testbed-ctl: unknown request " + py_repr(op) + "\n", 2);
    }

    // -- connections -----------------------------------------------------
    void serve_a(UniqueFd conn) {
        const int fd = conn.get();
        {
            std::lock_guard<std::mutex> g(a_lock_);
            if (a_conn_ >= 0) ::shutdown(a_conn_, SHUT_RDWR);  // its thread closes it
            a_conn_ = fd;
        }
        log("guest a connected");
        FrameReader reader(fd);
        Frame f;
        FrameReader::Result r;
        while ((r = reader.read(f)) == FrameReader::Result::kFrame) {
            if (f.type == ftype::kExec) {
                bool ready;
                std::string st;
                {
                    std::lock_guard<std::mutex> g(mu_);
                    ready = state_ == "ready";
                    if (ready) pending_.insert(f.id);
                    st = state_ + ", " + detail_;
                }
                if (!ready || !send_b(f.type, f.id, f.payload)) {
                    {
                        std::lock_guard<std::mutex> g(mu_);
                        pending_.erase(f.id);
                    }
                    send_a(ftype::kStderr, f.id,
                           "remote: peer guest b is not available (" + st + ")\n");
                    send_a(ftype::kExit, f.id, "255");
                }
            } else if (f.type == ftype::kCancel) {
                bool fwd;
                {
                    std::lock_guard<std::mutex> g(mu_);
                    fwd = pending_.erase(f.id) > 0;
                }
                if (fwd) send_b(ftype::kCancel, f.id);
            } else if (f.type == ftype::kControl) {
                std::thread([this, id = f.id, p = f.payload] { ctl(id, p); }).detach();
            }
        }
        if (r != FrameReader::Result::kEof) log("guest a: " + reader.reason());
        log("guest a disconnected");
        std::lock_guard<std::mutex> g(a_lock_);
        if (a_conn_ == fd) a_conn_ = -1;
        conn.reset();  // under the lock: no send_a can use the fd number after this
    }

    void serve_b(UniqueFd conn) {
        const int fd = conn.get();
        {
            std::lock_guard<std::mutex> g(b_lock_);
            if (b_conn_ >= 0) ::shutdown(b_conn_, SHUT_RDWR);
            b_conn_ = fd;
        }
        log("guest b connected");
        FrameReader reader(fd);
        Frame f;
        FrameReader::Result r;
        while ((r = reader.read(f)) == FrameReader::Result::kFrame) {
            if (f.type == ftype::kHello) {
                {
                    std::lock_guard<std::mutex> g(mu_);
                    if (f.payload == "ok") {
                        state_ = "ready";
                        detail_ = "instance " + std::to_string(inst_);
                    } else {
                        state_ = "failed";
                        detail_ = "instance " + std::to_string(inst_) + ": " + f.payload;
                    }
                    cv_.notify_all();
                }
                log("guest b agent: " + f.payload);
            } else if (f.type == ftype::kStdout || f.type == ftype::kStderr ||
                       f.type == ftype::kExit) {
                bool fwd;
                {
                    std::lock_guard<std::mutex> g(mu_);
                    fwd = pending_.count(f.id) > 0;
                    if (f.type == ftype::kExit) pending_.erase(f.id);
                }
                if (fwd) send_a(f.type, f.id, f.payload);
            }
        }
        if (r != FrameReader::Result::kEof) log("guest b: " + reader.reason());
        log("guest b disconnected");
        bool replaced;
        {
            std::lock_guard<std::mutex> g(b_lock_);
            replaced = b_conn_ != fd;
            if (!replaced) b_conn_ = -1;
            conn.reset();
        }
        if (replaced) return;  // a new instance is already connected
        {
            std::lock_guard<std::mutex> g(mu_);
            if (state_ == "ready" || state_ == "failed") {
                state_ = "down";
                detail_ = "instance " + std::to_string(inst_) + ": control channel closed";
            }
            cv_.notify_all();
        }
        fail_pending("lost the connection to peer guest b");
    }

    void listen(const std::string& path, void (Relay::*handler)(UniqueFd)) {
        UniqueFd srv = listen_unix(path, 4);
        std::thread([this, handler, fd = srv.release()] {
            for (;;) {
                int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
                if (c < 0) {
                    if (errno == EINTR || errno == ECONNABORTED) continue;
                    log("accept: " + errno_text(errno));
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    continue;
                }
                std::thread([this, handler, c] { (this->*handler)(UniqueFd(c)); }).detach();
            }
        }).detach();
    }

    const Args& args() const { return args_; }

  private:
    Args args_;
    std::mutex mu_;  // state, proc, pending
    std::condition_variable cv_;
    std::mutex a_lock_, b_lock_;
    int a_conn_ = -1;  // owned by its serve_a thread
    int b_conn_ = -1;  // owned by its serve_b thread
    std::shared_ptr<Proc> proc_;
    int inst_ = 0;
    std::string state_ = "down";  // down | booting | ready | failed
    std::string detail_ = "not started";
    std::set<std::uint32_t> pending_;  // exec ids forwarded to b
};

int usage(const char* msg) {
    std::fprintf(stderr,
                 "usage: ntrdma-relay --run DIR --start-b SCRIPT --qemu-log FILE\n"
                 "ntrdma-relay: error: %s\n",
                 msg);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    Args args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        std::string* dst = a == "--run"        ? &args.run
                           : a == "--start-b"  ? &args.start_b
                           : a == "--qemu-log" ? &args.qemu_log
                                               : nullptr;
        if (!dst) {
            auto eq = a.find('=');
            std::string key = a.substr(0, eq);
            dst = key == "--run"        ? &args.run
                  : key == "--start-b"  ? &args.start_b
                  : key == "--qemu-log" ? &args.qemu_log
                                        : nullptr;
            if (!dst || eq == std::string::npos)
                return usage(("unrecognized argument: " + a).c_str());
            *dst = a.substr(eq + 1);
            continue;
        }
        if (i + 1 >= argc) return usage((a + " needs a value").c_str());
        *dst = argv[++i];
    }
    if (args.run.empty() || args.start_b.empty() || args.qemu_log.empty())
        return usage("--run, --start-b and --qemu-log are required");

    // The stop signals are taken with sigwait() below; every thread inherits the mask (children
    // get an empty one, see spawn()).
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    auto* relay = new Relay(args);  // never freed: detached threads use it until _exit
    try {
        relay->listen(args.run + "/ctl-b.sock", &Relay::serve_b);
        relay->start_b();
        // ctl-a.sock last: the launcher starts guest a when it appears
        relay->listen(args.run + "/ctl-a.sock", &Relay::serve_a);
    } catch (const std::exception& e) {
        log(std::string("error: ") + e.what());
        ::_exit(1);
    }

    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    log("stopping: powering guest b off");
    std::string why = relay->poweroff_b(30);
    log("guest b power-off: " + why);
    ::_exit(0);
}
