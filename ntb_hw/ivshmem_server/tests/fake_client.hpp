// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Test helpers: a client that talks to the server exactly like QEMU's ivshmem device does
// (blocking 8-byte recvmsg with the fd in SCM_RIGHTS), temp dirs, eventfd helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "framing.hpp"
#include "unique_fd.hpp"

namespace ntb::ivshmem::test {

// Creates a fresh directory under $TMPDIR (or /tmp); removes it recursively when destroyed.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

  private:
    std::string path_;
};

bool wait_readable(int fd, int timeout_ms);
// Reads an eventfd counter if it becomes readable within timeout_ms.
std::optional<std::uint64_t> read_eventfd(int fd, int timeout_ms);
// Connects a blocking UNIX stream socket; invalid fd on failure.
UniqueFd connect_unix(const std::string& path);

class FakeClient {
  public:
    explicit FakeClient(const std::string& socket_path) : sock_(connect_unix(socket_path)) {}
    bool connected() const { return sock_.valid(); }
    int fd() const { return sock_.get(); }
    // Next message, or status kError with err == ETIMEDOUT if nothing arrives in time.
    RecvResult recv(int timeout_ms = 5000);
    void close() { sock_.reset(); }

  private:
    UniqueFd sock_;
};

// Human-readable summary of a received message, for assertion messages.
std::string describe(const RecvResult& r);

}  // namespace ntb::ivshmem::test
