// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cli.hpp"

#include <sys/un.h>

#include <charconv>
#include <set>

#include "regfile.hpp"

namespace ntb::ivshmem {

std::optional<std::uint64_t> parse_size(std::string_view s) {
    std::uint64_t mult = 1;
    if (!s.empty()) {
        switch (s.back()) {
            case 'k':
            case 'K':
                mult = 1ULL << 10;
                break;
            case 'm':
            case 'M':
                mult = 1ULL << 20;
                break;
            case 'g':
            case 'G':
                mult = 1ULL << 30;
                break;
            default:
                break;
        }
        if (mult != 1) s.remove_suffix(1);
    }
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s.remove_prefix(2);
    }
    if (s.empty()) return std::nullopt;
    std::uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
    if (v > UINT64_MAX / mult) return std::nullopt;
    return v * mult;
}

std::string usage(std::string_view prog) {
    std::string u = "usage: ";
    u += prog;
    u +=
        " --shm PATH --shm-size BYTES --vectors N --socket PATH [--socket PATH ...]"
        " [--pidfile PATH] [--persistent-eventfds]\n"
        "  --shm PATH        register file (created if missing, truncated to --shm-size)\n"
        "  --shm-size BYTES  power of two >= 4096 * number of sockets (K/M/G suffix allowed)\n"
        "  --vectors N       eventfds (MSI-X vectors) per client, 1..64\n"
        "  --socket PATH     listening socket; the k-th one hands out ivshmem id k\n"
        "  --pidfile PATH    write the server pid here once the sockets are listening\n"
        "  --persistent-eventfds\n"
        "                    eventfds belong to the port, not the connection: no \"peer gone\"\n"
        "                    notice, each client gets a port's eventfds once. Needed for a port's\n"
        "                    QEMU to reconnect while the other QEMU runs (QEMU <= 7.2 at least\n"
        "                    corrupts its heap on a peer's reconnect otherwise).\n";
    return u;
}

ParseResult parse_args(const std::vector<std::string>& args) {
    ParseResult r;
    auto fail = [&r](std::string msg) {
        r.status = ParseResult::Status::kError;
        r.error = std::move(msg);
        return r;
    };
    bool have_shm = false, have_size = false, have_vectors = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string opt = args[i];
        if (opt == "-h" || opt == "--help") {
            r.status = ParseResult::Status::kHelp;
            return r;
        }
        if (opt == "--persistent-eventfds") {
            r.config.persistent_eventfds = true;
            continue;
        }
        std::optional<std::string> value;
        if (auto eq = opt.find('='); opt.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = opt.substr(eq + 1);
            opt.resize(eq);
        }
        if (opt != "--shm" && opt != "--shm-size" && opt != "--vectors" && opt != "--socket" &&
            opt != "--pidfile")
            return fail("unknown argument '" + args[i] + "'");
        if (!value) {
            if (i + 1 >= args.size()) return fail("missing value for " + opt);
            value = args[++i];
        }
        if (value->empty()) return fail("empty value for " + opt);

        if (opt == "--shm") {
            r.config.shm_path = *value;
            have_shm = true;
        } else if (opt == "--shm-size") {
            auto sz = parse_size(*value);
            if (!sz) return fail("bad --shm-size '" + *value + "'");
            r.config.shm_size = *sz;
            have_size = true;
        } else if (opt == "--vectors") {
            int n = 0;
            auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
            if (ec != std::errc() || ptr != value->data() + value->size() || n < 1 ||
                n > kMaxVectors)
                return fail("bad --vectors '" + *value + "' (1.." + std::to_string(kMaxVectors) +
                            ")");
            r.config.vectors = n;
            have_vectors = true;
        } else if (opt == "--socket") {
            if (value->size() >= sizeof(sockaddr_un::sun_path))
                return fail("socket path too long: " + *value);
            r.config.sockets.push_back(*value);
        } else {
            r.config.pidfile = *value;
        }
    }
    if (!have_shm) return fail("--shm is required");
    if (!have_size) return fail("--shm-size is required");
    if (!have_vectors) return fail("--vectors is required");
    if (r.config.sockets.empty()) return fail("at least one --socket is required");
    if (r.config.sockets.size() > static_cast<std::size_t>(kMaxPorts))
        return fail("too many sockets");
    if (std::set<std::string>(r.config.sockets.begin(), r.config.sockets.end()).size() !=
        r.config.sockets.size())
        return fail("duplicate --socket path");
    if (!valid_shm_size(r.config.shm_size, static_cast<int>(r.config.sockets.size())))
        return fail("--shm-size must be a power of two >= 4096 * number of sockets");
    r.status = ParseResult::Status::kOk;
    return r;
}

}  // namespace ntb::ivshmem
