// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// ivshmem server protocol framing: every message is one little-endian int64,
// optionally carrying one file descriptor as SCM_RIGHTS ancillary data.
#pragma once

#include <array>
#include <cstdint>

#include "unique_fd.hpp"

namespace ntb::ivshmem {

inline constexpr std::size_t kMsgSize = sizeof(std::int64_t);

// Explicit little-endian encoding (independent of host byte order).
std::array<std::uint8_t, kMsgSize> encode_value(std::int64_t value);
std::int64_t decode_value(const std::array<std::uint8_t, kMsgSize>& bytes);

// Sends one message (value, plus `fd` if fd >= 0) on a UNIX stream socket. Never blocks and
// never raises SIGPIPE (MSG_DONTWAIT | MSG_NOSIGNAL); retries on EINTR. Returns 0 on success or
// an errno value (EAGAIN if the peer's receive queue is full, EPIPE if it went away, EIO for a
// short write).
int send_msg(int sock, std::int64_t value, int fd = -1);

enum class RecvStatus { kOk, kEof, kError };

struct RecvResult {
    RecvStatus status = RecvStatus::kError;
    int err = 0;             // errno for kError
    std::int64_t value = 0;  // valid for kOk
    UniqueFd fd;             // the received fd, or invalid if the message carried none
};

// Receives exactly one message the way QEMU does (8 bytes, fd taken from the ancillary data).
// Blocks if the socket is blocking; retries on EINTR. Extra fds (if any) are closed.
// A connection closed in the middle of a message is reported as kEof.
RecvResult recv_msg(int sock);

}  // namespace ntb::ivshmem
