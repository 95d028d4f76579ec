// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ntb-ivshmem-server: single-threaded poll() loop serving QEMU ivshmem-doorbell clients.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "plan.hpp"
#include "regfile.hpp"
#include "unique_fd.hpp"

namespace ntb::ivshmem {

using LogFn = std::function<void(std::string_view line)>;

// Writes "ntb-ivshmem-server: <line>\n" to stderr with a single write().
void log_to_stderr(std::string_view line);

class Server {
  public:
    // Opens the register file, creates the listening sockets (unlinking stale sockets at those
    // paths) and writes the pidfile. `external_stop_fd`, if >= 0, is polled too: when it becomes
    // readable run() returns (main() hands in an eventfd written by its signal handler).
    // Throws std::system_error / std::invalid_argument; whatever was created is cleaned up.
    explicit Server(Config config, LogFn log_fn = log_to_stderr, int external_stop_fd = -1);
    // Closes all clients and unlinks the sockets and the pidfile.
    ~Server();
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    // Serves until request_stop() or the external stop fd. Returns 0, or throws
    // std::system_error if poll() fails for a reason other than EINTR.
    int run();
    // Thread-safe and async-signal-safe.
    void request_stop() noexcept;

    const RegisterFile& regfile() const { return regs_; }
    const Config& config() const { return cfg_; }

  private:
    struct Client {
        UniqueFd sock;
        std::vector<UniqueFd> eventfds;  // one per vector (kPerConnection only)
        std::vector<bool> knows;         // knows[k]: was sent port k's eventfds
        bool dead = false;               // to be disconnected once the current plan is done
        std::string why;                 // reason, for the log line
    };
    // Unlinks the registered paths when destroyed (also when the constructor throws).
    struct PathCleanup {
        std::vector<std::string> paths;
        ~PathCleanup();
    };

    void log(const std::string& line) const;
    void create_listener(int port);
    void write_pidfile();
    ClientTable table() const;
    void accept_on(int port);
    void handle_client_io(int id, short revents);
    void execute(const std::vector<Action>& actions);
    void send_to(int dest, std::int64_t value, FdRef fdref);
    void kick(int dest);
    void mark_dead(int id, const std::string& why);
    void reap_dead();
    int resolve_fd(FdRef ref) const;
    static bool make_eventfds(std::vector<UniqueFd>& out, int n);

    Config cfg_;
    EventfdMode mode_;
    LogFn log_;
    PathCleanup cleanup_;
    RegisterFile regs_;
    UniqueFd stop_fd_;
    int external_stop_fd_;
    std::vector<UniqueFd> listeners_;
    std::vector<std::optional<Client>> clients_;
    std::vector<std::vector<UniqueFd>> port_eventfds_;  // kPersistent: per port, created lazily
};

}  // namespace ntb::ivshmem
