// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Command line of ntb-ivshmem-server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ntb::ivshmem {

inline constexpr int kMaxVectors = 64;   // same limit as QEMU's contrib ivshmem-server
inline constexpr int kMaxPorts = 65536;  // ivshmem ids are 16 bits (doorbell register)

struct Config {
    std::string shm_path;
    std::uint64_t shm_size = 0;
    int vectors = 0;
    std::vector<std::string> sockets;  // index = ivshmem id
    std::string pidfile;               // empty: none
    bool persistent_eventfds = false;  // EventfdMode::kPersistent (see plan.hpp)
};

struct ParseResult {
    enum class Status { kOk, kHelp, kError } status = Status::kError;
    Config config;
    std::string error;  // for kError
};

// Parses "--shm PATH --shm-size BYTES --vectors N --socket PATH [--socket PATH ...]
// [--pidfile PATH] [--persistent-eventfds]" (options with a value also as --opt=VALUE) and
// validates the values.
ParseResult parse_args(const std::vector<std::string>& args);

std::string usage(std::string_view prog);

// Decimal or 0x-hex byte count with an optional K/M/G (binary) suffix.
std::optional<std::uint64_t> parse_size(std::string_view s);

}  // namespace ntb::ivshmem
