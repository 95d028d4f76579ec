// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "fake_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace ntb::ivshmem::test {

TempDir::TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ntb-ivshmem-test.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

bool wait_readable(int fd, int timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    int n;
    do {
        n = ::poll(&p, 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

std::optional<std::uint64_t> read_eventfd(int fd, int timeout_ms) {
    if (!wait_readable(fd, timeout_ms)) return std::nullopt;
    std::uint64_t v = 0;
    ssize_t n;
    do {
        n = ::read(fd, &v, sizeof(v));
    } while (n < 0 && errno == EINTR);
    if (n != sizeof(v)) return std::nullopt;
    return v;
}

UniqueFd connect_unix(const std::string& path) {
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s) return {};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return {};
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) < 0) return {};
    return s;
}

RecvResult FakeClient::recv(int timeout_ms) {
    if (!wait_readable(sock_.get(), timeout_ms)) {
        RecvResult r;
        r.status = RecvStatus::kError;
        r.err = ETIMEDOUT;
        return r;
    }
    return recv_msg(sock_.get());
}

std::string describe(const RecvResult& r) {
    switch (r.status) {
        case RecvStatus::kEof:
            return "EOF";
        case RecvStatus::kError:
            return std::string("error: ") + std::strerror(r.err);
        case RecvStatus::kOk:
            return "value " + std::to_string(r.value) + (r.fd.valid() ? " with fd" : " without fd");
    }
    return "?";
}

}  // namespace ntb::ivshmem::test
