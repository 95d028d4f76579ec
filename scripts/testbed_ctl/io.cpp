// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

extern char** environ;

namespace ntrdma::testbed {

int write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

int send_all(int fd, std::string_view data) {
    while (!data.empty()) {
        ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

FrameReader::Result FrameReader::read(Frame& out) {
    char buf[kChunk];
    for (;;) {
        Decoder::Status st = dec_.next(out);
        if (st == Decoder::Status::kFrame) return Result::kFrame;
        if (st != Decoder::Status::kNeedMore) {
            bad_ = st;
            return Result::kBadFrame;
        }
        ssize_t n = ::read(fd_, buf, sizeof(buf));
        if (n < 0) {
            if (errno == EINTR) continue;
            err_ = errno;
            return Result::kError;
        }
        if (n == 0) {
            if (eof_retry_) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                continue;
            }
            eof_ = true;
            return Result::kEof;
        }
        dec_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
}

std::string FrameReader::reason() const {
    if (bad_ != Decoder::Status::kNeedMore) return to_string(bad_);
    if (err_ != 0) return errno_text(err_);
    return eof_ ? "end of stream" : "";
}

namespace {

bool make_addr(const std::string& path, sockaddr_un& addr) {
    std::memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return false;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return true;
}

[[noreturn]] void throw_errno(int err, const std::string& what) {
    throw std::system_error(err, std::generic_category(), what);
}

}  // namespace

UniqueFd listen_unix(const std::string& path, int backlog) {
    const std::string tmp = path + ".tmp";
    sockaddr_un addr;
    if (!make_addr(tmp, addr)) throw_errno(ENAMETOOLONG, tmp);
    ::unlink(path.c_str());
    ::unlink(tmp.c_str());
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) throw_errno(errno, "socket");
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
        throw_errno(errno, "bind " + tmp);
    if (::listen(fd.get(), backlog) != 0) throw_errno(errno, "listen " + tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(errno, "rename to " + path);
    return fd;
}

UniqueFd connect_unix(const std::string& path, int& err) {
    sockaddr_un addr;
    if (!make_addr(path, addr)) {
        err = ENAMETOOLONG;
        return {};
    }
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        err = errno;
        return {};
    }
    int r;
    do {
        r = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    } while (r != 0 && errno == EINTR);
    if (r != 0) {
        err = errno;
        return {};
    }
    err = 0;
    return fd;
}

pid_t spawn(const SpawnOptions& opt) {
    if (opt.argv.empty()) return -EINVAL;
    std::vector<char*> argv;
    for (const auto& a : opt.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (opt.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&fa, opt.stdout_fd, 1);
    if (opt.stderr_fd >= 0) posix_spawn_file_actions_adddup2(&fa, opt.stderr_fd, 2);
    if (!opt.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opt.cwd.c_str());

    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (opt.new_session) flags |= POSIX_SPAWN_SETSID;
    posix_spawnattr_setflags(&attr, flags);

    pid_t pid = -1;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -rc;
}

UniqueFd open_pidfd(pid_t pid) {
    // (glibc 2.36's <sys/pidfd.h> lacks extern "C": use the system call directly)
    return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
}

int wait_status(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 255;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 255;
}

std::string errno_text(int err) {
    return "[Errno " + std::to_string(err) + "] " + std::strerror(err);
}

namespace {

std::string_view strip(std::string_view s) {
    const char* ws = " \t\n\r\f\v";
    auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

}  // namespace

bool parse_float(std::string_view s, double& out) {
    s = strip(s);
    if (s.empty()) return false;
    for (char c : s) {
        if (c == 'x' || c == 'X' || c == 'p' || c == 'P') return false;  // no hex floats
    }
    std::string buf(s);
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(buf.c_str(), &end);
    if (end != buf.c_str() + buf.size() || std::isnan(v)) return false;
    out = v;
    return true;
}

bool parse_int(std::string_view s, long long& out) {
    s = strip(s);
    if (s.empty()) return false;
    std::size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
    if (i == s.size()) return false;
    for (std::size_t j = i; j < s.size(); ++j) {
        if (s[j] < '0' || s[j] > '9') return false;
    }
    std::string buf(s);
    errno = 0;
    long long v = std::strtoll(buf.c_str(), nullptr, 10);
    if (errno == ERANGE) return false;
    out = v;
    return true;
}

std::string format_g(double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
}

std::string py_repr(std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char q = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, q);
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (c == q || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (u < 0x20 || u == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\x%02x", u);
            out += buf;
        } else {
            out.push_back(c);
        }
    }
    out.push_back(q);
    return out;
}

int poll_timeout_ms(double seconds_left) {
    if (!(seconds_left > 0)) return 0;
    if (seconds_left > 365.0 * 24 * 3600) return -1;
    double ms = std::ceil(seconds_left * 1000.0);
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace ntrdma::testbed
