// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// rdma_cm: the passive side disconnects as soon as a SEND arrived, while
// the ACK of that SEND is still on its way to the sender. The sender's
// SEND must complete with success, not be flushed by the disconnect:
// fi_pingpong and perftest end their runs so.
//
//   ntrdma_cm_ack_race server ADDR PORT ROUNDS
//   ntrdma_cm_ack_race client ADDR PORT ROUNDS [INJECT]
//
// Each round the client connects and sends one 32 KiB SEND (more than a
// placed SEND takes: the checked path, acknowledged by the server). With
// INJECT it first writes "pause MS vx_rx" to its device's debugfs inject
// file: its next receive pass, the one that takes the ACK, waits, and the
// server's DISC comes first. The server posts a receive, waits for it, and
// disconnects at once. The client exits 0 when every SEND succeeded and the
// data arrived, the server when every round received.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cm_util.hpp"

namespace {

using ntcm::Clock;
using ntcm::EventName;
using ntcm::MakeQp;
using ntcm::milliseconds;
using ntcm::MsSince;
using ntcm::NextEvent;

constexpr uint32_t kLen = 32768;
constexpr int kPauseMs = 1500;
constexpr int kWaitMs = 10000;

// One completion of @cq within @ms: its status, or -1 when none came.
int PollOne(ibv_cq* cq, int ms, ibv_wc* wc) {
    const auto t0 = Clock::now();
    while (MsSince(t0) < ms) {
        const int n = ibv_poll_cq(cq, 1, wc);
        if (n) {
            return n < 0 ? -1 : static_cast<int>(wc->status);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return -1;
}

struct Conn {
    rdma_cm_id* id = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<unsigned char> buf = std::vector<unsigned char>(kLen);

    bool Reg() {
        mr = ibv_reg_mr(id->pd, buf.data(), kLen, IBV_ACCESS_LOCAL_WRITE);
        return mr != nullptr;
    }
    ibv_sge Sge() { return {reinterpret_cast<uintptr_t>(buf.data()), kLen, mr->lkey}; }
    ~Conn() {
        if (id && id->qp) {
            rdma_destroy_qp(id);
        }
        if (mr) {
            ibv_dereg_mr(mr);
        }
        if (id) {
            rdma_destroy_id(id);
        }
    }
};

bool PostRecv(Conn& c) {
    ibv_sge sge = c.Sge();
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(c.id->qp, &wr, &bad) == 0;
}

// One connection on the passive side: true when the SEND arrived whole.
bool ServeOne(rdma_event_channel* ch, int round) {
    Conn c;
    if (NextEvent(ch, 30000, &c.id) != RDMA_CM_EVENT_CONNECT_REQUEST) {
        std::printf("round %d: no connect request in 30 s\n", round);
        c.id = nullptr;
        return false;
    }
    rdma_conn_param cp{};
    cp.initiator_depth = cp.responder_resources = 1;
    if (!MakeQp(c.id) || !c.Reg() || !PostRecv(c) || rdma_accept(c.id, &cp) ||
        NextEvent(ch, 5000) != RDMA_CM_EVENT_ESTABLISHED) {
        std::printf("round %d: accept failed\n", round);
        return false;
    }
    ibv_wc wc{};
    const int st = PollOne(c.id->recv_cq, kWaitMs, &wc);
    // At once: the ACK of this SEND may not have reached the sender yet.
    rdma_disconnect(c.id);
    bool ok = st == IBV_WC_SUCCESS && wc.byte_len == kLen;
    for (uint32_t i = 0; ok && i < kLen; i++) {
        ok = c.buf[i] == static_cast<unsigned char>(i * 7 + round);
    }
    const int ev = NextEvent(ch, 5000);
    std::printf("round %d: receive %s, %u bytes%s, then %s\n", round,
                st < 0 ? "none" : ibv_wc_status_str(static_cast<ibv_wc_status>(st)), wc.byte_len,
                ok ? " as sent" : "", EventName(ev));
    return ok;
}

int Server(rdma_event_channel* ch, const addrinfo* ai, int rounds) {
    rdma_cm_id* listen = nullptr;
    if (rdma_create_id(ch, &listen, nullptr, RDMA_PS_TCP) || rdma_bind_addr(listen, ai->ai_addr) ||
        rdma_listen(listen, 4)) {
        std::printf("listen: %s\n", std::strerror(errno));
        return 2;
    }
    std::fflush(stdout);
    int good = 0;
    for (int i = 0; i < rounds; i++) {
        good += ServeOne(ch, i);
        std::fflush(stdout);
    }
    std::printf("%d of %d rounds received\n", good, rounds);
    rdma_destroy_id(listen);
    return good == rounds ? 0 : 1;
}

// One connection on the active side: 1 when its SEND succeeded, 0 when
// it failed, -1 when there was no connection.
int SendOne(rdma_event_channel* ch, const addrinfo* ai, int round, const std::string& inject) {
    Conn c;
    if (ntcm::Connect(ch, ai, &c.id) != RDMA_CM_EVENT_ESTABLISHED || !c.Reg()) {
        return -1;
    }
    for (uint32_t i = 0; i < kLen; i++) {
        c.buf[i] = static_cast<unsigned char>(i * 7 + round);
    }
    if (!inject.empty()) {
        std::ofstream f(inject);
        f << "pause " << kPauseMs << " vx_rx" << std::flush;
        if (!f.good()) {
            std::printf("cannot write %s\n", inject.c_str());
            return 0;
        }
    }
    ibv_sge sge = c.Sge();
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    ibv_wc wc{};
    const int st = ibv_post_send(c.id->qp, &wr, &bad) ? -1 : PollOne(c.id->send_cq, kWaitMs, &wc);
    const int ev = NextEvent(ch, 3000);
    std::printf("round %d: SEND %s, then %s\n", round,
                st < 0 ? "not completed" : ibv_wc_status_str(static_cast<ibv_wc_status>(st)),
                EventName(ev));
    return st == IBV_WC_SUCCESS;
}

int Client(rdma_event_channel* ch, const addrinfo* ai, int rounds, const std::string& inject) {
    int good = 0;
    for (int i = 0; i < rounds; i++) {
        int rc = -1;
        // A refused connect (the server not listening again yet) retries.
        for (int t = 0; t < 10 && rc < 0; t++) {
            rc = SendOne(ch, ai, i, inject);
            if (rc < 0) {
                std::this_thread::sleep_for(milliseconds(300));
            }
        }
        good += rc > 0;
        std::fflush(stdout);
    }
    std::printf("%d of %d SENDs succeeded\n", good, rounds);
    return good == rounds ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    return ntcm::Run(argc, argv, 4, "server|client ADDR PORT ROUNDS [INJECT]",
                     [&](rdma_event_channel* ch, const addrinfo* ai) {
                         const int rounds = std::atoi(argv[4]);
                         return std::string(argv[1]) == "server"
                                    ? Server(ch, ai, rounds)
                                    : Client(ch, ai, rounds, argc > 5 ? argv[5] : "");
                     });
}
