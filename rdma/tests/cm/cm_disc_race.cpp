// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// rdma_cm: the active side disconnects at once, from its ESTABLISHED
// event, while the passive side's accept may not have heard back yet. The
// passive side must still see ESTABLISHED, then DISCONNECTED.
//
//   ntrdma_cm_disc_race server ADDR PORT ROUNDS [PAUSED INJECT]
//   ntrdma_cm_disc_race client ADDR PORT ROUNDS
//
// The server accepts ROUNDS connections one after another; for the first
// PAUSED of them it writes "pause MS accept" to the debugfs INJECT file of
// its device first, so that its accept waits after the other end's answer
// (the window in which the DISC comes). The client connects ROUNDS times
// and destroys its QP as soon as it is connected. Each side prints a line
// per round; the server exits 0 when every round saw DISCONNECTED within
// 1 s of ESTABLISHED (after the pause), the client when every round
// connected.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <thread>

#include "cm_util.hpp"

namespace {

using ntcm::Clock;
using ntcm::EventName;
using ntcm::MakeQp;
using ntcm::milliseconds;
using ntcm::MsSince;
using ntcm::NextEvent;

constexpr int kPauseMs = 1000;
constexpr int kDiscWaitMs = 1000;

void FreeQp(rdma_cm_id* id) {
    if (id && id->qp) {
        rdma_destroy_qp(id);
    }
}

bool Inject(const std::string& path, const std::string& cmd) {
    std::ofstream f(path);
    f << cmd << std::flush;
    return f.good();
}

// The passive side's events: connect requests that come while another
// connection's events are awaited wait their turn (the next round's
// request can precede this round's ESTABLISHED).
struct Events {
    rdma_event_channel* ch;
    std::deque<rdma_cm_id*> reqs;

    // The next event of @id within @ms (@id NULL: the next connect
    // request); RDMA_CM_EVENT_* or -1.
    int For(rdma_cm_id* id, int ms) {
        const auto end = Clock::now() + milliseconds(ms);
        for (;;) {
            const long left = -MsSince(end);
            rdma_cm_id* of = nullptr;
            const int ev = left > 0 ? NextEvent(ch, static_cast<int>(left), &of) : -1;
            if (ev == RDMA_CM_EVENT_CONNECT_REQUEST && of != id) {
                reqs.push_back(of);
                if (!id) {
                    return ev;  // Request() waits for this one
                }
                continue;
            }
            if (ev < 0 || of == id) {
                return ev;
            }
        }
    }

    rdma_cm_id* Request(int ms) {
        rdma_cm_id* id = nullptr;
        if (reqs.empty() && For(nullptr, ms) < 0) {
            return nullptr;
        }
        id = reqs.front();
        reqs.pop_front();
        return id;
    }
};

// One connection on the passive side: true when DISCONNECTED followed.
bool ServeOne(Events& evs, int round, bool paused) {
    rdma_cm_id* id = evs.Request(30000);
    if (!id) {
        std::printf("round %d: no connect request in 30 s\n", round);
        return false;
    }
    bool ok = MakeQp(id);
    rdma_conn_param cp{};
    cp.initiator_depth = cp.responder_resources = 1;
    const auto t0 = Clock::now();
    const int rc = ok ? rdma_accept(id, &cp) : -1;
    const long accept_ms = MsSince(t0);
    int ev = rc ? -1 : evs.For(id, 5000);
    if (ev == RDMA_CM_EVENT_ESTABLISHED) {
        const auto t1 = Clock::now();
        ev = evs.For(id, kDiscWaitMs);
        ok = ev == RDMA_CM_EVENT_DISCONNECTED;
        std::printf("round %d%s: accept %d after %ld ms, %s %ld ms after ESTABLISHED\n", round,
                    paused ? " (accept paused)" : "", rc, accept_ms,
                    ok ? "DISCONNECTED" : "no DISCONNECTED", MsSince(t1));
    } else {
        ok = false;
        std::printf("round %d: accept %d after %ld ms, then %s instead of ESTABLISHED\n", round, rc,
                    accept_ms, EventName(ev));
    }
    FreeQp(id);
    rdma_destroy_id(id);
    return ok;
}

int Server(rdma_event_channel* ch, const addrinfo* ai, int rounds, int paused,
           const std::string& inject) {
    rdma_cm_id* listen = nullptr;
    if (rdma_create_id(ch, &listen, nullptr, RDMA_PS_TCP) || rdma_bind_addr(listen, ai->ai_addr) ||
        rdma_listen(listen, 4)) {
        std::printf("listen: %s\n", std::strerror(errno));
        return 2;
    }
    std::fflush(stdout);
    Events evs{ch, {}};
    int good = 0;
    for (int i = 0; i < rounds; i++) {
        const bool pause = i < paused;
        if (pause && !Inject(inject, "pause " + std::to_string(kPauseMs) + " accept")) {
            std::printf("cannot write %s\n", inject.c_str());
            return 2;
        }
        good += ServeOne(evs, i, pause);
        std::fflush(stdout);
    }
    std::printf("%d of %d rounds: DISCONNECTED within %d ms\n", good, rounds, kDiscWaitMs);
    rdma_destroy_id(listen);
    return good == rounds ? 0 : 1;
}

// One connection on the active side, its QP destroyed once connected.
bool ConnectOne(rdma_event_channel* ch, const addrinfo* ai, int round) {
    rdma_cm_id* id = nullptr;
    const int ev = ntcm::Connect(ch, ai, &id);
    const bool ok = ev == RDMA_CM_EVENT_ESTABLISHED;
    // At once: the DISC may reach the passive side before its accept
    // heard back.
    FreeQp(id);
    if (ok) {
        NextEvent(ch, 2000);  // our own DISCONNECTED, if it comes
        std::printf("round %d: connected, QP destroyed at once\n", round);
    } else {
        std::printf("round %d: no connection (%s)\n", round, EventName(ev));
    }
    if (id) {
        rdma_destroy_id(id);
    }
    return ok;
}

int Client(rdma_event_channel* ch, const addrinfo* ai, int rounds) {
    int good = 0;
    for (int i = 0; i < rounds; i++) {
        bool ok = false;
        // A refused connect (the server not listening again yet) retries.
        for (int t = 0; t < 10 && !ok; t++) {
            ok = ConnectOne(ch, ai, i);
            if (!ok) {
                std::this_thread::sleep_for(milliseconds(300));
            }
        }
        good += ok;
        std::fflush(stdout);
        std::this_thread::sleep_for(milliseconds(100));
    }
    std::printf("%d of %d rounds connected\n", good, rounds);
    return good == rounds ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    return ntcm::Run(argc, argv, 4, "server|client ADDR PORT ROUNDS [PAUSED INJECT]",
                     [&](rdma_event_channel* ch, const addrinfo* ai) {
                         const int rounds = std::atoi(argv[4]);
                         if (std::string(argv[1]) != "server") {
                             return Client(ch, ai, rounds);
                         }
                         const int paused = argc > 6 ? std::atoi(argv[5]) : 0;
                         return Server(ch, ai, rounds, paused, argc > 6 ? argv[6] : "");
                     });
}
