// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ntrdma-tcp-fuzz: a hostile link for NTRDMA over TCP. It sits between a
// dialing device and a listening one and relays both ways. Records from the
// dialer to the listener are parsed (rdma/engine/ntrdma_tcp_wire.h) and
// some are damaged on the way: bytes of a WRITE's payload flipped (a peer
// that writes garbage into our window), a header made invalid (a malformed
// record), or the stream cut inside a record (a truncated one). The
// listener must take all of it: no write outside its window, no oops, and
// a new session once the relay is clean again.
//
// Usage: ntrdma-tcp-fuzz --listen PORT --to ADDR:PORT --secs N [--seed S]
//                        [--flip P] [--bad P] [--cut P]
// P: chances per record (0 to 1). Prints a summary line at the end.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernel_types.hpp"

extern "C" {
#include "ntrdma_tcp_wire.h"
}

namespace {

struct Options {
    int listen_port = 0;
    std::string to_addr;
    int to_port = 0;
    int secs = 10;
    u64 seed = 1;
    double flip = 0.05;
    double bad = 0.002;
    double cut = 0.001;
};

struct Stats {
    std::atomic<u64> conns{0}, records{0}, flips{0}, bad{0}, cuts{0};
};

std::chrono::steady_clock::time_point g_end;

bool past_end() { return std::chrono::steady_clock::now() >= g_end; }

// Data to read on @fd before the deadline.
bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    while (!past_end())
        if (poll(&p, 1, 200) > 0) return true;
    return false;
}

bool send_all(int fd, const u8* p, size_t n) {
    while (n) {
        ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

bool recv_all(int fd, u8* p, size_t n) {
    while (n) {
        if (!readable(fd)) return false;
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<size_t>(r);
    }
    return true;
}

// The listener's answers go back untouched.
void relay_back(int from, int to) {
    std::vector<u8> buf(1 << 16);
    while (readable(from)) {
        ssize_t r = recv(from, buf.data(), buf.size(), 0);
        if (r <= 0 || !send_all(to, buf.data(), static_cast<size_t>(r))) break;
    }
    shutdown(to, SHUT_RDWR);
    shutdown(from, SHUT_RDWR);
}

// One record from the dialer, maybe damaged; false ends the connection.
bool relay_record(int from, int to, std::mt19937_64& rng, const Options& o, Stats& st) {
    std::uniform_real_distribution<double> chance(0.0, 1.0);
    u8 hdr[NTRDMA_TCP_HDR_LEN];
    ntrdma_tcp_hdr h{};
    if (!recv_all(from, hdr, sizeof(hdr))) return false;
    ntrdma_tcp_unpack(hdr, &h);
    std::vector<u8> payload(h.len <= NTRDMA_TCP_WRITE_MAX ? h.len : 0);
    if (!payload.empty() && !recv_all(from, payload.data(), payload.size())) return false;
    st.records++;
    if (h.type == NTRDMA_TCP_WRITE && !payload.empty() && chance(rng) < o.flip) {
        for (int i = 0; i < 4; i++)
            payload[rng() % payload.size()] ^= static_cast<u8>(1 + rng() % 255);
        st.flips++;
    }
    if (h.type != NTRDMA_TCP_HELLO && chance(rng) < o.bad) {
        hdr[rng() % sizeof(hdr)] ^= static_cast<u8>(1 + rng() % 255);
        st.bad++;
    }
    if (chance(rng) < o.cut) {
        send_all(to, hdr, 1 + rng() % (sizeof(hdr) - 1));
        st.cuts++;
        return false;
    }
    return send_all(to, hdr, sizeof(hdr)) && send_all(to, payload.data(), payload.size());
}

int dial(const Options& o) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<u16>(o.to_port));
    inet_pton(AF_INET, o.to_addr.c_str(), &a.sin_addr);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

void serve(int dialer, const Options& o, Stats& st, u64 seed) {
    int listener = dial(o);
    if (listener < 0) {
        close(dialer);
        return;
    }
    int one = 1;
    setsockopt(listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(dialer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    st.conns++;
    std::thread back(relay_back, listener, dialer);
    std::mt19937_64 rng(seed);
    while (relay_record(dialer, listener, rng, o, st)) {
    }
    shutdown(listener, SHUT_RDWR);
    shutdown(dialer, SHUT_RDWR);
    back.join();
    close(listener);
    close(dialer);
}

int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<u16>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) || listen(fd, 4)) {
        perror("ntrdma-tcp-fuzz: listen");
        return -1;
    }
    return fd;
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string k = argv[i], v = argv[i + 1];
        if (k == "--listen")
            o.listen_port = std::stoi(v);
        else if (k == "--to") {
            auto c = v.rfind(':');
            if (c == std::string::npos) return false;
            o.to_addr = v.substr(0, c);
            o.to_port = std::stoi(v.substr(c + 1));
        } else if (k == "--secs")
            o.secs = std::stoi(v);
        else if (k == "--seed")
            o.seed = std::stoull(v);
        else if (k == "--flip")
            o.flip = std::stod(v);
        else if (k == "--bad")
            o.bad = std::stod(v);
        else if (k == "--cut")
            o.cut = std::stod(v);
        else
            return false;
    }
    return o.listen_port > 0 && o.to_port > 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    Stats st;
    if (!parse(argc, argv, o)) {
        std::fprintf(stderr,
                     "usage: ntrdma-tcp-fuzz --listen PORT --to ADDR:PORT --secs N [--seed S] "
                     "[--flip P] [--bad P] [--cut P]\n");
        return 2;
    }
    int lfd = listen_on(o.listen_port);
    if (lfd < 0) return 1;
    g_end = std::chrono::steady_clock::now() + std::chrono::seconds(o.secs);
    // One connection at a time, as the devices make them: it ends when
    // damaged or cut, or at the deadline.
    for (u64 n = 0; readable(lfd); n++) {
        int fd = accept(lfd, nullptr, nullptr);
        if (fd >= 0) serve(fd, o, st, o.seed + n);
    }
    close(lfd);
    std::printf("connections %llu records %llu flipped %llu bad %llu cut %llu\n",
                static_cast<unsigned long long>(st.conns.load()),
                static_cast<unsigned long long>(st.records.load()),
                static_cast<unsigned long long>(st.flips.load()),
                static_cast<unsigned long long>(st.bad.load()),
                static_cast<unsigned long long>(st.cuts.load()));
    return 0;
}
