// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "framing.hpp"

namespace ntb::ivshmem {

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
    throw std::system_error(errno, std::generic_category(), what);
}

bool write_all(int fd, const char* data, std::size_t len) {
    while (len > 0) {
        ssize_t n = ::write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data += n;
        len -= static_cast<std::size_t>(n);
    }
    return true;
}

}  // namespace

void log_to_stderr(std::string_view line) {
    std::string s = "ntb-ivshmem-server: ";
    s += line;
    s += '\n';
    write_all(STDERR_FILENO, s.data(), s.size());
}

Server::PathCleanup::~PathCleanup() {
    for (const auto& p : paths) ::unlink(p.c_str());
}

Server::Server(Config config, LogFn log_fn, int external_stop_fd)
    : cfg_(std::move(config)),
      mode_(cfg_.persistent_eventfds ? EventfdMode::kPersistent : EventfdMode::kPerConnection),
      log_(std::move(log_fn)),
      regs_(cfg_.shm_path, cfg_.shm_size, static_cast<int>(cfg_.sockets.size())),
      external_stop_fd_(external_stop_fd) {
    if (cfg_.vectors < 1 || cfg_.vectors > kMaxVectors)
        throw std::invalid_argument("vectors out of range");
    int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) throw_errno("eventfd");
    stop_fd_.reset(efd);
    clients_.resize(cfg_.sockets.size());
    port_eventfds_.resize(cfg_.sockets.size());
    for (int k = 0; k < static_cast<int>(cfg_.sockets.size()); ++k) create_listener(k);
    if (!cfg_.pidfile.empty()) write_pidfile();
    log("listening on " + std::to_string(cfg_.sockets.size()) + " socket(s), " +
        std::to_string(cfg_.vectors) + " vectors, shm " + cfg_.shm_path +
        (mode_ == EventfdMode::kPersistent ? ", persistent eventfds" : ""));
}

Server::~Server() {
    // Member destructors close the clients/listeners; cleanup_ (declared before them, so
    // destroyed after them) unlinks the sockets and the pidfile.
    clients_.clear();
    listeners_.clear();
}

void Server::log(const std::string& line) const {
    if (log_) log_(line);
}

void Server::create_listener(int port) {
    const std::string& path = cfg_.sockets[static_cast<std::size_t>(port)];
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path))
        throw std::invalid_argument("socket path too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);

    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            throw std::system_error(EEXIST, std::generic_category(),
                                    path + " exists and is not a socket");
        if (::unlink(path.c_str()) < 0) throw_errno("unlink stale socket " + path);
    }
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) throw_errno("socket");
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0)
        throw_errno("bind " + path);
    cleanup_.paths.push_back(path);
    if (::listen(s.get(), 16) < 0) throw_errno("listen " + path);
    listeners_.push_back(std::move(s));
}

void Server::write_pidfile() {
    // Write a temporary file and rename it so readers never see a partial pid.
    std::string tmp = cfg_.pidfile + ".tmp";
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) throw_errno("open " + tmp);
    std::string pid = std::to_string(::getpid()) + "\n";
    if (!write_all(fd.get(), pid.data(), pid.size())) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw std::system_error(e, std::generic_category(), "write " + tmp);
    }
    fd.reset();
    if (::rename(tmp.c_str(), cfg_.pidfile.c_str()) < 0) {
        int e = errno;
        ::unlink(tmp.c_str());
        throw std::system_error(e, std::generic_category(), "rename " + cfg_.pidfile);
    }
    cleanup_.paths.push_back(cfg_.pidfile);
}

void Server::request_stop() noexcept {
    int saved = errno;
    std::uint64_t one = 1;
    ssize_t r = ::write(stop_fd_.get(), &one, sizeof(one));
    (void)r;  // EAGAIN only if already (massively) signalled
    errno = saved;
}

ClientTable Server::table() const {
    ClientTable t(static_cast<int>(clients_.size()));
    for (int k = 0; k < t.size(); ++k) {
        const auto& c = clients_[static_cast<std::size_t>(k)];
        if (!c) continue;
        t.set_connected(k, true);
        for (int p = 0; p < t.size(); ++p)
            if (c->knows[static_cast<std::size_t>(p)]) t.set_knows(k, p);
    }
    return t;
}

bool Server::make_eventfds(std::vector<UniqueFd>& out, int n) {
    out.clear();
    for (int v = 0; v < n; ++v) {
        UniqueFd e(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!e) {
            out.clear();
            return false;
        }
        out.push_back(std::move(e));
    }
    return true;
}

int Server::run() {
    const int nports = static_cast<int>(listeners_.size());
    std::vector<pollfd> pfds;
    std::vector<int> client_of;  // pfds index -> client id (clients only)
    for (;;) {
        pfds.clear();
        client_of.clear();
        pfds.push_back({stop_fd_.get(), POLLIN, 0});
        pfds.push_back({external_stop_fd_, POLLIN, 0});  // ignored by poll() if negative
        for (const auto& l : listeners_) pfds.push_back({l.get(), POLLIN, 0});
        const std::size_t first_client = pfds.size();
        for (int k = 0; k < nports; ++k) {
            if (clients_[static_cast<std::size_t>(k)]) {
                pfds.push_back({clients_[static_cast<std::size_t>(k)]->sock.get(), POLLIN, 0});
                client_of.push_back(k);
            }
        }

        int n = ::poll(pfds.data(), pfds.size(), -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno("poll");
        }
        if (pfds[0].revents != 0 || pfds[1].revents != 0) break;

        // Client events first: they can only remove clients. Skip a slot whose client changed.
        for (std::size_t i = first_client; i < pfds.size(); ++i) {
            if (pfds[i].revents == 0) continue;
            int id = client_of[i - first_client];
            auto& c = clients_[static_cast<std::size_t>(id)];
            if (!c || c->sock.get() != pfds[i].fd) continue;
            handle_client_io(id, pfds[i].revents);
        }
        for (int k = 0; k < nports; ++k)
            if (pfds[2 + static_cast<std::size_t>(k)].revents != 0) accept_on(k);
    }
    log("stopping");
    return 0;
}

void Server::accept_on(int port) {
    int lfd = listeners_[static_cast<std::size_t>(port)].get();
    for (;;) {
        UniqueFd s(::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!s) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log("accept on socket " + std::to_string(port) + ": " + std::strerror(errno));
            return;
        }
        ConnectPlan plan = plan_connect(table(), port, cfg_.vectors, mode_);
        if (plan.refused) {
            // Tell it in a way QEMU understands (it reports the bad version and exits), then
            // close. A failure here is irrelevant: the connection is dropped either way.
            send_msg(s.get(), kRefusalVersion);
            log("client " + std::to_string(port) + " refused: id already connected");
            continue;  // s is closed here
        }
        Client c;
        c.sock = std::move(s);
        c.knows.assign(clients_.size(), false);
        auto& port_fds = port_eventfds_[static_cast<std::size_t>(port)];
        bool ok = mode_ == EventfdMode::kPersistent
                      ? (!port_fds.empty() || make_eventfds(port_fds, cfg_.vectors))
                      : make_eventfds(c.eventfds, cfg_.vectors);
        if (!ok) {
            log("client " + std::to_string(port) + " refused: eventfd: " + std::strerror(errno));
            continue;
        }
        clients_[static_cast<std::size_t>(port)] = std::move(c);
        execute(plan.actions);
        log("client " + std::to_string(port) + " connected (generation " +
            std::to_string(regs_.generation(port)) + ")");
        reap_dead();
    }
}

void Server::handle_client_io(int id, short revents) {
    auto& c = clients_[static_cast<std::size_t>(id)];
    if (revents & POLLIN) {
        // QEMU never talks to the server: read and discard (closing any fds passed to us).
        // Bounded, so a chatty client cannot starve the others; poll() reports the rest.
        for (int round = 0; round < 64; ++round) {
            char buf[256];
            alignas(cmsghdr) char control[CMSG_SPACE(16 * sizeof(int))];
            iovec iov{buf, sizeof(buf)};
            msghdr msg{};
            msg.msg_iov = &iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control;
            msg.msg_controllen = sizeof(control);
            ssize_t n = ::recvmsg(c->sock.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0) {
                for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
                    std::size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                    for (std::size_t i = 0; i < nfds; ++i) {
                        int fd;
                        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        ::close(fd);
                    }
                }
                continue;
            }
            if (n == 0) {
                mark_dead(id, "connection closed");
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                mark_dead(id, std::string("recv: ") + std::strerror(errno));
            }
            break;
        }
    }
    if (!c->dead && (revents & (POLLHUP | POLLERR | POLLNVAL))) mark_dead(id, "hangup");
    reap_dead();
}

void Server::mark_dead(int id, const std::string& why) {
    auto& c = clients_[static_cast<std::size_t>(id)];
    if (c && !c->dead) {
        c->dead = true;
        c->why = why;
    }
}

void Server::reap_dead() {
    for (;;) {
        int victim = -1;
        for (int k = 0; k < static_cast<int>(clients_.size()); ++k) {
            if (clients_[static_cast<std::size_t>(k)] &&
                clients_[static_cast<std::size_t>(k)]->dead) {
                victim = k;
                break;
            }
        }
        if (victim < 0) return;
        std::string why = clients_[static_cast<std::size_t>(victim)]->why;
        execute(plan_disconnect(table(), victim, mode_));
        log("client " + std::to_string(victim) + " disconnected (" + why + ")");
    }
}

int Server::resolve_fd(FdRef ref) const {
    switch (ref.kind) {
        case FdKind::kNone:
            return -1;
        case FdKind::kShm:
            return regs_.fd();
        case FdKind::kEventfd: {
            const auto& fds =
                mode_ == EventfdMode::kPersistent
                    ? port_eventfds_.at(static_cast<std::size_t>(ref.owner))
                    : clients_.at(static_cast<std::size_t>(ref.owner)).value().eventfds;
            return fds.at(static_cast<std::size_t>(ref.vector)).get();
        }
    }
    return -1;
}

void Server::send_to(int dest, std::int64_t value, FdRef fdref) {
    auto& c = clients_.at(static_cast<std::size_t>(dest));
    if (!c || c->dead) return;
    int err = send_msg(c->sock.get(), value, resolve_fd(fdref));
    if (err != 0) {
        mark_dead(dest, std::string("send: ") + std::strerror(err));
    } else if (mode_ == EventfdMode::kPersistent && fdref.kind == FdKind::kEventfd &&
               fdref.owner != dest) {
        c->knows[static_cast<std::size_t>(fdref.owner)] = true;
    }
}

void Server::kick(int dest) {
    auto& c = clients_.at(static_cast<std::size_t>(dest));
    if (!c || c->dead) return;
    std::uint64_t one = 1;
    ssize_t n;
    do {
        n = ::write(resolve_fd(FdRef::eventfd(dest, 0)), &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    // EAGAIN: counter saturated, an interrupt is pending anyway.
}

void Server::execute(const std::vector<Action>& actions) {
    for (const Action& a : actions) {
        switch (a.kind) {
            case ActionKind::kInitBlock:
                regs_.init_block(a.dest);
                break;
            case ActionKind::kClearBlock:
                regs_.clear_block(a.dest);
                break;
            case ActionKind::kCloseClient:
                clients_.at(static_cast<std::size_t>(a.dest)).reset();
                break;
            case ActionKind::kSend:
                send_to(a.dest, a.value, a.fd);
                break;
            case ActionKind::kKick:
                kick(a.dest);
                break;
        }
    }
}

}  // namespace ntb::ivshmem
