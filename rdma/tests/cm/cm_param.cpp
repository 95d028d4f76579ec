// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// What rdma_cm tells each end about READ depths (selftests/ntrdma_cm_test.sh):
// one RC connection, the client offering RESP responder resources and INIT
// initiator depth, the server accepting with its own RESP and INIT. Each
// end prints, one line per step:
//
//   request INIT RESP        (server: the CONNECT_REQUEST's conn_param)
//   established INIT RESP    (the ESTABLISHED event's conn_param)
//   qp MAX_RD_ATOMIC MAX_DEST_RD_ATOMIC   (query_qp once connected)
//
// A server RESP or INIT of -1 accepts with the request's own value.
// Exit 0 when the connection was made and ended cleanly.
//
// Usage: ntrdma_cm_param server|client ADDR PORT RESP INIT

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cm_util.hpp"

namespace {

using ntcm::MakeQp;
using ntcm::Resolve;

constexpr int kTimeoutMs = 30000;

// The next event on @ch (within kTimeoutMs) is @want: a copy in @copy,
// its cm_id in @id; false (said on stderr) on another or none.
bool Expect(rdma_event_channel* ch, rdma_cm_event_type want, rdma_cm_event* copy,
            rdma_cm_id** id = nullptr) {
    rdma_cm_event ev{};
    const int got = ntcm::NextEvent(ch, kTimeoutMs, id, &ev);
    if (got != want) {
        std::fprintf(stderr, "event %s (status %d), expected %s\n", ntcm::EventName(got),
                     got < 0 ? 0 : ev.status, rdma_event_str(want));
        return false;
    }
    if (copy) {
        *copy = ev;
    }
    return true;
}

void PrintConn(const char* what, const rdma_cm_event& ev) {
    std::printf("%s %u %u\n", what, ev.param.conn.initiator_depth,
                ev.param.conn.responder_resources);
}

void PrintQp(rdma_cm_id* id) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(id->qp, &a, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &ia)) {
        std::perror("ibv_query_qp");
        return;
    }
    std::printf("qp %u %u\n", a.max_rd_atomic, a.max_dest_rd_atomic);
}

int Server(rdma_event_channel* ch, const addrinfo* ai, int resp, int init) {
    rdma_cm_id* listen_id = nullptr;
    rdma_cm_id* id = nullptr;
    rdma_cm_event ev{};
    if (rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP) ||
        rdma_bind_addr(listen_id, ai->ai_addr) || rdma_listen(listen_id, 1)) {
        std::perror("listen");
        return 1;
    }
    if (!Expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, &ev, &id)) {
        return 1;
    }
    PrintConn("request", ev);
    rdma_conn_param p{};
    p.initiator_depth = init < 0 ? ev.param.conn.initiator_depth : init;
    p.responder_resources = resp < 0 ? ev.param.conn.responder_resources : resp;
    if (!MakeQp(id) || rdma_accept(id, &p)) {
        std::perror("accept");
        return 1;
    }
    if (!Expect(ch, RDMA_CM_EVENT_ESTABLISHED, &ev)) {
        return 1;
    }
    PrintConn("established", ev);
    PrintQp(id);
    std::fflush(stdout);
    int rc = Expect(ch, RDMA_CM_EVENT_DISCONNECTED, nullptr) ? 0 : 1;
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
    rdma_destroy_id(listen_id);
    return rc;
}

int Client(rdma_event_channel* ch, const addrinfo* ai, int resp, int init) {
    rdma_cm_id* id = nullptr;
    rdma_cm_event ev{};
    if (rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP) ||
        rdma_resolve_addr(id, nullptr, ai->ai_addr, kTimeoutMs) ||
        !Expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, nullptr) || rdma_resolve_route(id, kTimeoutMs) ||
        !Expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, nullptr) || !MakeQp(id)) {
        std::perror("resolve");
        return 1;
    }
    rdma_conn_param p{};
    p.initiator_depth = init;
    p.responder_resources = resp;
    if (rdma_connect(id, &p)) {
        std::perror("rdma_connect");
        return 1;
    }
    if (!Expect(ch, RDMA_CM_EVENT_ESTABLISHED, &ev)) {
        return 1;
    }
    PrintConn("established", ev);
    PrintQp(id);
    std::fflush(stdout);
    int rc = rdma_disconnect(id) || !Expect(ch, RDMA_CM_EVENT_DISCONNECTED, nullptr);
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
    return rc;
}

}  // namespace

int main(int argc, char** argv) {
    return ntcm::Run(argc, argv, 5, "server|client ADDR PORT RESP INIT",
                     [argv](rdma_event_channel* ch, const addrinfo* ai) {
                         const int resp = std::atoi(argv[4]);
                         const int init = std::atoi(argv[5]);
                         return std::string(argv[1]) == "server" ? Server(ch, ai, resp, init)
                                                                 : Client(ch, ai, resp, init);
                     });
}
