// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ntb-ivshmem-server: ivshmem server for the emulated NTB (see ntb_hw/HARDWARE.md).
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"
#include "server.hpp"

namespace {

int g_stop_fd = -1;

void on_signal(int) {
    int saved = errno;
    std::uint64_t one = 1;
    ssize_t r = ::write(g_stop_fd, &one, sizeof(one));
    (void)r;
    errno = saved;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ntb::ivshmem;
    const char* prog = argc > 0 ? argv[0] : "ntb-ivshmem-server";
    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    ParseResult pr = parse_args(args);
    if (pr.status == ParseResult::Status::kHelp) {
        std::fputs(usage(prog).c_str(), stdout);
        return 0;
    }
    if (pr.status != ParseResult::Status::kOk) {
        std::fprintf(stderr, "ntb-ivshmem-server: %s\n%s", pr.error.c_str(), usage(prog).c_str());
        return 2;
    }

    // Signals are turned into a readable eventfd before anything (socket, pidfile) exists, so a
    // SIGTERM at any point after startup leads to a clean exit.
    g_stop_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g_stop_fd < 0) {
        std::perror("ntb-ivshmem-server: eventfd");
        return 1;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, nullptr);

    try {
        Server server(std::move(pr.config), log_to_stderr, g_stop_fd);
        return server.run();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ntb-ivshmem-server: %s\n", e.what());
        return 1;
    }
}
