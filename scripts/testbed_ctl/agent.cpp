// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ntrdma-agent: test-bed control agent, started by scripts/guest/stage2 in pair topology.
//
//   ntrdma-agent a        guest a: multiplexes local clients (remote, ssh, testbed-ctl) from
//                         /run/ntrdma-testbed/agent.sock onto the virtio port ntrdma.ctl, which
//                         the host relay (ntrdma-relay) joins to guest b's port.
//   ntrdma-agent b [ERR]  guest b: says hello (ERR: setup failure text), then runs the commands
//                         it receives; exits on a power-off request.
//
// Test options (before a|b): --port PATH uses PATH instead of the virtio port (a UNIX socket is
// connected to; its end of stream ends the agent; logs go to stderr instead of /dev/console),
// --socket PATH is agent a's client socket. Frames: see frame.hpp.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "frame.hpp"
#include "io.hpp"

using namespace ntrdma::testbed;

namespace {

constexpr const char* kPortName = "ntrdma.ctl";
constexpr const char* kDefaultSock = "/run/ntrdma-testbed/agent.sock";

bool g_log_stderr = false;

void log(const std::string& msg) {
    std::string line = "testbed-agent: " + msg + "\n";
    if (g_log_stderr) {
        write_all(2, line);
        return;
    }
    UniqueFd c(::open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC));
    if (c) write_all(c.get(), line);
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "%s\n", msg.c_str());
    std::fflush(stderr);
    ::_exit(1);
}

std::string find_port(const std::string& name) {
    const std::string base = "/sys/class/virtio-ports";
    std::vector<std::string> entries;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base, ec))
        entries.push_back(e.path().filename());
    std::sort(entries.begin(), entries.end());
    for (const auto& d : entries) {
        std::ifstream f(base + "/" + d + "/name");
        std::string v;
        if (!f || !std::getline(f, v)) continue;
        while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
        if (v == name) return "/dev/" + d;
    }
    die("agent: no virtio port named " + name);
}

// The control port: the virtio-serial port (or a UNIX socket in tests); framed, thread-safe
// writes.
class Port {
  public:
    explicit Port(const std::string& path_override) {
        std::string path = path_override.empty() ? find_port(kPortName) : path_override;
        struct stat st {};
        bool sock =
            !path_override.empty() && ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
        if (sock) {
            int err = 0;
            fd_ = connect_unix(path, err);
            if (!fd_) die("agent: cannot connect to " + path + ": " + errno_text(err));
        } else {
            fd_.reset(::open(path.c_str(), O_RDWR | O_CLOEXEC));
            if (!fd_) die("agent: cannot open " + path + ": " + errno_text(errno));
        }
        // A virtio-serial port reads as end of file while the host side is not connected.
        reader_ = std::make_unique<FrameReader>(fd_.get(), !sock);
    }

    bool send(char type, std::uint32_t id, std::string_view payload = {}) {
        std::string data = encode_frame(type, id, payload);
        std::lock_guard<std::mutex> g(wlock_);
        return write_all(fd_.get(), data) == 0;
    }

    Frame recv() {
        Frame f;
        switch (reader_->read(f)) {
            case FrameReader::Result::kFrame:
                return f;
            case FrameReader::Result::kEof:
                log("control connection closed");
                ::_exit(0);
            case FrameReader::Result::kBadFrame:
                die("agent: bad frame from host (lost sync)");
            case FrameReader::Result::kError:
                break;
        }
        die("agent: reading the control port: " + reader_->reason());
    }

  private:
    UniqueFd fd_;
    std::mutex wlock_;
    std::unique_ptr<FrameReader> reader_;
};

// ---------------------------------------------------------------- guest a --
struct Client {
    UniqueFd fd;
};

class AgentA {
  public:
    AgentA(Port& port, std::string sock) : port_(port), sock_(std::move(sock)) {}

    [[noreturn]] void run() {
        std::error_code ec;
        std::filesystem::create_directories(std::filesystem::path(sock_).parent_path(), ec);
        UniqueFd srv;
        try {
            srv = listen_unix(sock_, 64);
        } catch (const std::exception& e) {
            die(std::string("agent: ") + e.what());
        }
        std::thread([this, fd = srv.release()] { accept_loop(fd); }).detach();

        for (;;) {
            Frame f = port_.recv();
            std::shared_ptr<Client> c;
            {
                std::lock_guard<std::mutex> g(lock_);
                auto it = clients_.find(f.id);
                if (it != clients_.end()) {
                    c = it->second;
                    if (f.type == ftype::kExit) clients_.erase(it);
                }
            }
            if (c) send_all(c->fd.get(), encode_frame(f.type, f.id, f.payload));
        }
    }

  private:
    [[noreturn]] void accept_loop(int srv) {
        for (;;) {
            int fd = ::accept4(srv, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    continue;
                }
                die("agent: accept: " + errno_text(errno));
            }
            auto c = std::make_shared<Client>();
            c->fd.reset(fd);
            try {
                std::thread([this, c] { serve(c); }).detach();
            } catch (const std::exception&) {
                // out of threads: drop the client (it sees the connection lost)
            }
        }
    }

    void serve(const std::shared_ptr<Client>& c) {
        bool have_id = false;
        std::uint32_t fid = 0;
        FrameReader reader(c->fd.get());
        Frame f;
        if (reader.read(f) == FrameReader::Result::kFrame &&
            (f.type == ftype::kExec || f.type == ftype::kControl)) {
            {
                std::lock_guard<std::mutex> g(lock_);
                fid = next_id_++;
                have_id = true;
                clients_[fid] = c;
            }
            // If the port cannot be written, the client sees its connection closed.
            bool sent = port_.send(f.type, fid, f.payload);
            char buf[4096];
            while (sent) {  // until the client goes away
                ssize_t n = ::read(c->fd.get(), buf, sizeof(buf));
                if (n == 0 || (n < 0 && errno != EINTR)) break;
            }
        }
        bool pending = false;
        if (have_id) {
            std::lock_guard<std::mutex> g(lock_);
            pending = clients_.erase(fid) > 0;
        }
        if (pending) port_.send(ftype::kCancel, fid);  // gone before the exit status: cancel
        // The fd is closed when the last reference goes (the port reader may hold one).
        ::shutdown(c->fd.get(), SHUT_RDWR);
    }

    Port& port_;
    std::string sock_;
    std::mutex lock_;
    std::map<std::uint32_t, std::shared_ptr<Client>> clients_;
    std::uint32_t next_id_ = 1;
};

// ---------------------------------------------------------------- guest b --
class AgentB {
  public:
    explicit AgentB(Port& port) : port_(port) {
        const char* r = std::getenv("NTRDMA_ROOT");
        root_ = r && *r ? r : "/";
    }

    void run(const std::string& setup_err) {
        port_.send(ftype::kHello, 0, setup_err.empty() ? "ok" : "failed: " + setup_err);
        log("ready");
        for (;;) {
            Frame f = port_.recv();
            if (f.type == ftype::kExec) {
                try {
                    std::thread([this, f] { exec(f.id, f.payload); }).detach();
                } catch (const std::exception& e) {
                    port_.send(ftype::kStderr, f.id, std::string("remote: ") + e.what() + "\n");
                    port_.send(ftype::kExit, f.id, "255");
                }
            } else if (f.type == ftype::kCancel) {
                std::lock_guard<std::mutex> g(lock_);
                auto it = procs_.find(f.id);
                if (it != procs_.end()) {
                    ::kill(-it->second, SIGKILL);
                    procs_.erase(it);
                }
            } else if (f.type == ftype::kPowerOff) {
                log("power-off requested");
                std::lock_guard<std::mutex> g(lock_);
                for (const auto& [id, pid] : procs_) ::kill(-pid, SIGKILL);
                return;
            }
        }
    }

  private:
    // Has the process exited? (It is not reaped: its pid and process group stay valid.)
    static bool exited(pid_t pid) {
        siginfo_t si{};
        if (::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) != 0)
            return errno != EINTR;
        return si.si_pid != 0;
    }

    void exec(std::uint32_t fid, const std::string& payload) {
        const std::string shell = !payload.empty() && payload[0] == 'b' ? "/bin/bash" : "/bin/sh";
        const std::string cmd = payload.empty() ? std::string() : payload.substr(1);
        int out[2], err[2];
        if (::pipe2(out, O_CLOEXEC) != 0) return spawn_failed(fid, errno, shell);
        UniqueFd out_r(out[0]), out_w(out[1]);
        if (::pipe2(err, O_CLOEXEC) != 0) return spawn_failed(fid, errno, shell);
        UniqueFd err_r(err[0]), err_w(err[1]);
        if (cmd.find('\0') != std::string::npos) return spawn_failed(fid, EINVAL, shell);

        SpawnOptions opt;
        opt.argv = {shell, "-c", cmd};
        opt.cwd = root_;
        opt.stdout_fd = out_w.get();
        opt.stderr_fd = err_w.get();
        opt.new_session = true;
        pid_t pid = spawn(opt);
        out_w.reset();
        err_w.reset();
        if (pid < 0) return spawn_failed(fid, -pid, shell);
        {
            std::lock_guard<std::mutex> g(lock_);
            procs_[fid] = pid;
        }
        UniqueFd pidfd = open_pidfd(pid);
        ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
        ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);

        struct Stream {
            int fd;
            char type;
        };
        std::vector<Stream> streams = {{out_r.get(), ftype::kStdout},
                                       {err_r.get(), ftype::kStderr}};
        std::vector<char> buf(kChunk);
        // Reads one chunk; false when the stream is finished (end of file or error).
        auto pump = [&](const Stream& s, bool& finished) {
            ssize_t n = ::read(s.fd, buf.data(), buf.size());
            if (n > 0) {
                port_.send(s.type, fid, std::string_view(buf.data(), static_cast<std::size_t>(n)));
                return true;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
            finished = true;
            return false;
        };
        while (!streams.empty()) {
            bool done = exited(pid);
            std::vector<pollfd> pfds;
            for (const auto& s : streams) pfds.push_back({s.fd, POLLIN, 0});
            if (!done && pidfd) pfds.push_back({pidfd.get(), POLLIN, 0});
            int timeout = done ? 0 : (pidfd ? -1 : 500);
            int n = ::poll(pfds.data(), pfds.size(), timeout);
            if (n < 0 && errno != EINTR) break;
            std::vector<Stream> left;
            for (std::size_t i = 0; i < streams.size(); ++i) {
                bool finished = false;
                if (n > 0 && pfds[i].revents) pump(streams[i], finished);
                if (!finished) left.push_back(streams[i]);
            }
            streams.swap(left);
            if (done) {
                // Drain what is left; a background child that keeps the pipes open does not
                // hold up the exit status.
                for (const auto& s : streams) {
                    bool finished = false;
                    while (pump(s, finished)) {
                    }
                }
                break;
            }
        }
        bool cancelled;
        {
            // Forget the process before reaping it, so that a cancel never signals a pid that
            // may have been reused.
            std::lock_guard<std::mutex> g(lock_);
            cancelled = procs_.erase(fid) == 0;
        }
        int rc = wait_status(pid);
        if (!cancelled) port_.send(ftype::kExit, fid, std::to_string(rc));
    }

    void spawn_failed(std::uint32_t fid, int err, const std::string& shell) {
        port_.send(ftype::kStderr, fid,
                   "remote: " + errno_text(err) + ": " + py_repr(shell) + "\n");
        port_.send(ftype::kExit, fid, "255");
    }

    Port& port_;
    std::string root_;
    std::mutex lock_;
    std::map<std::uint32_t, pid_t> procs_;
};

[[noreturn]] void usage() { die("usage: agent a | agent b [SETUP_ERROR]"); }

}  // namespace

int main(int argc, char** argv) {
    ::signal(SIGPIPE, SIG_IGN);
    // Spawned commands get fds 0-2 from posix_spawn; make sure ours exist so that pipe ends
    // never land there.
    for (int fd = 0; fd < 3; ++fd) {
        if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
    }

    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    std::string port_path, sock = kDefaultSock;
    std::size_t i = 0;
    while (i + 1 < args.size() && (args[i] == "--port" || args[i] == "--socket")) {
        (args[i] == "--port" ? port_path : sock) = args[i + 1];
        i += 2;
    }
    if (i >= args.size()) usage();
    const std::string role = args[i];
    if (role != "a" && role != "b") usage();
    g_log_stderr = !port_path.empty();

    Port port(port_path);
    if (role == "a") {
        AgentA(port, sock).run();
    }
    AgentB(port).run(i + 1 < args.size() ? args[i + 1] : std::string());
    std::fflush(nullptr);
    ::_exit(0);
}
