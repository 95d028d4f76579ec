// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// What the rdma_cm test programs share: events with a timeout, the small
// RC QP each connection gets, and address resolution.
#ifndef NTRDMA_CM_UTIL_HPP
#define NTRDMA_CM_UTIL_HPP

#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdio>
#include <functional>

namespace ntcm {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline long MsSince(Clock::time_point t) {
    return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

// The next event on @ch within @ms, acked: its type, or -1 when none came.
// @id and @copy (either may be NULL) get its cm_id and a copy of it.
inline int NextEvent(rdma_event_channel* ch, int ms, rdma_cm_id** id = nullptr,
                     rdma_cm_event* copy = nullptr) {
    pollfd p{ch->fd, POLLIN, 0};
    rdma_cm_event* ev = nullptr;
    if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev)) {
        return -1;
    }
    const int type = ev->event;
    if (id) {
        *id = ev->id;
    }
    if (copy) {
        *copy = *ev;
    }
    rdma_ack_cm_event(ev);
    return type;
}

inline const char* EventName(int ev) {
    return ev < 0 ? "no event" : rdma_event_str(static_cast<rdma_cm_event_type>(ev));
}

// A small RC QP on @id, with the PD and CQs librdmacm makes for it
// (rdma_destroy_qp() frees them).
inline bool MakeQp(rdma_cm_id* id) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 4;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    if (rdma_create_qp(id, nullptr, &a)) {
        std::perror("rdma_create_qp");
        return false;
    }
    return true;
}

// @addr:@port as an IPv4 address; freeaddrinfo() it.
inline bool Resolve(const char* addr, const char* port, addrinfo** res) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = getaddrinfo(addr, port, &hints, res);
    if (rc) {
        std::fprintf(stderr, "getaddrinfo %s: %s\n", addr, gai_strerror(rc));
        return false;
    }
    return true;
}

// The active side's connection on a new @id: address, route, the small
// QP, connect. The last event: RDMA_CM_EVENT_ESTABLISHED, or what came
// instead (-1: none, or a step failed).
inline int Connect(rdma_event_channel* ch, const addrinfo* ai, rdma_cm_id** id) {
    if (rdma_create_id(ch, id, nullptr, RDMA_PS_TCP)) {
        *id = nullptr;
        return -1;
    }
    if (rdma_resolve_addr(*id, nullptr, ai->ai_addr, 2000) ||
        NextEvent(ch, 5000) != RDMA_CM_EVENT_ADDR_RESOLVED || rdma_resolve_route(*id, 2000) ||
        NextEvent(ch, 5000) != RDMA_CM_EVENT_ROUTE_RESOLVED || !MakeQp(*id)) {
        return -1;
    }
    rdma_conn_param cp{};
    cp.initiator_depth = cp.responder_resources = 1;
    cp.retry_count = 7;
    return rdma_connect(*id, &cp) ? -1 : NextEvent(ch, 10000);
}

// main() of a program "NAME server|client ADDR PORT ..." with at least
// @nargs arguments: @run with the event channel and ADDR:PORT resolved;
// its exit status, or 2 when the arguments or the set-up failed.
inline int Run(int argc, char** argv, int nargs, const char* usage,
               const std::function<int(rdma_event_channel*, const addrinfo*)>& run) {
    if (argc < nargs + 1) {
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    addrinfo* ai = nullptr;
    if (!Resolve(argv[2], argv[3], &ai)) {
        return 2;
    }
    rdma_event_channel* ch = rdma_create_event_channel();
    if (!ch) {
        std::perror("rdma_create_event_channel");
        freeaddrinfo(ai);
        return 2;
    }
    const int rc = run(ch, ai);
    rdma_destroy_event_channel(ch);
    freeaddrinfo(ai);
    return rc;
}

}  // namespace ntcm

#endif  // NTRDMA_CM_UTIL_HPP
