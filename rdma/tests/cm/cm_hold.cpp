// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ntrdma_cm_hold ADDR PORT BACKLOG SECONDS: an rdma_cm listener on IPv4
// ADDR:PORT with BACKLOG that takes every connection request rdma_cm hands
// it and answers none (no accept, no reject) for SECONDS: each request
// stays pending at the driver as long as the driver keeps it. Prints
// "listening" once it listens, then "requests N" at the end, and exits 0;
// 1 on a setup error. For selftests/ntrdma_peer_limits_test.sh.
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int fail(const char* what) {
    std::fprintf(stderr, "ntrdma_cm_hold: %s: %s\n", what, std::strerror(errno));
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s ADDR PORT BACKLOG SECONDS\n", argv[0]);
        return 2;
    }
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
    if (inet_pton(AF_INET, argv[1], &sin.sin_addr) != 1) {
        std::fprintf(stderr, "ntrdma_cm_hold: bad address %s\n", argv[1]);
        return 2;
    }
    const int backlog = std::atoi(argv[3]);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[4]));

    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) return fail("rdma_create_event_channel");
    rdma_cm_id* listen_id = nullptr;
    if (rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP)) return fail("rdma_create_id");
    if (rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(&sin))) return fail("rdma_bind_addr");
    if (rdma_listen(listen_id, backlog)) return fail("rdma_listen");
    std::printf("listening\n");
    std::fflush(stdout);

    std::vector<rdma_cm_id*> held;
    while (std::chrono::steady_clock::now() < until) {
        pollfd p{ch->fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        rdma_cm_event* ev = nullptr;
        if (rdma_get_cm_event(ch, &ev)) return fail("rdma_get_cm_event");
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) held.push_back(ev->id);
        rdma_ack_cm_event(ev);
    }
    std::printf("requests %zu\n", held.size());
    std::fflush(stdout);
    for (rdma_cm_id* id : held) rdma_destroy_id(id);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(ch);
    return 0;
}
