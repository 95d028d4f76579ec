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

}  // namespace ntcm

#endif  // NTRDMA_CM_UTIL_HPP
