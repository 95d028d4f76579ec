// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "framing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ntb::ivshmem {

std::array<std::uint8_t, kMsgSize> encode_value(std::int64_t value) {
    std::array<std::uint8_t, kMsgSize> out{};
    auto u = static_cast<std::uint64_t>(value);
    for (std::size_t i = 0; i < kMsgSize; ++i) out[i] = static_cast<std::uint8_t>(u >> (8 * i));
    return out;
}

std::int64_t decode_value(const std::array<std::uint8_t, kMsgSize>& bytes) {
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < kMsgSize; ++i) u |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
    return static_cast<std::int64_t>(u);
}

int send_msg(int sock, std::int64_t value, int fd) {
    auto bytes = encode_value(value);
    iovec iov{bytes.data(), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    std::memset(control, 0, sizeof(control));

    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }

    ssize_t n;
    do {
        n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    // An 8-byte message on a UNIX stream socket is queued whole or not at all; anything else
    // would desynchronise the stream, so report it as an error.
    if (static_cast<std::size_t>(n) != kMsgSize) return EIO;
    return 0;
}

namespace {

// Takes ownership of every fd in the control data: the first one is stored in `keep` (if it is
// still empty), the others are closed.
void collect_fds(msghdr& msg, UniqueFd& keep) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        std::size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < nfds; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (!keep.valid())
                keep.reset(fd);
            else
                ::close(fd);
        }
    }
}

}  // namespace

RecvResult recv_msg(int sock) {
    RecvResult res;
    std::array<std::uint8_t, kMsgSize> bytes{};
    std::size_t got = 0;
    while (got < kMsgSize) {
        iovec iov{bytes.data() + got, kMsgSize - got};
        alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof(control);
        ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n < 0) {
            if (errno == EINTR) continue;
            res.status = RecvStatus::kError;
            res.err = errno;
            res.fd.reset();
            return res;
        }
        collect_fds(msg, res.fd);
        if (n == 0) {
            res.status = RecvStatus::kEof;
            res.fd.reset();
            return res;
        }
        got += static_cast<std::size_t>(n);
    }
    res.status = RecvStatus::kOk;
    res.value = decode_value(bytes);
    return res;
}

}  // namespace ntb::ivshmem
