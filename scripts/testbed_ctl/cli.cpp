// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cli.hpp"

#include "io.hpp"

namespace ntrdma::testbed {

const char* const kCtlHelp =
    "usage: testbed-ctl REQUEST\n"
    "  peer-status          print guest b's state; exit 0 if it is ready\n"
    "  wait-peer [SECS]     wait until guest b's agent is ready (default 180 s)\n"
    "  kill-peer            SIGKILL guest b's QEMU (no clean shutdown)\n"
    "  start-peer [SECS]    boot a new guest b (same devices and files) and wait\n"
    "                       until its agent is ready (default 180 s)\n"
    "  poweroff-peer [SECS] clean power-off of guest b (killed after SECS, 60)\n"
    "Only in pair topology, in guest a.\n";

namespace {

ClientCall fail(int rc, std::string err) {
    ClientCall c;
    c.rc = rc;
    c.err = std::move(err);
    return c;
}

ClientCall exec_call(std::string name, std::string shell,
                     std::vector<std::string>::const_iterator first,
                     std::vector<std::string>::const_iterator last, double timeout) {
    ClientCall c;
    c.run = true;
    c.name = std::move(name);
    c.shell = std::move(shell);
    c.command = join_words(std::vector<std::string>(first, last));
    c.timeout = timeout;
    c.type = 'X';
    return c;
}

// OpenSSH option letters that take an argument.
constexpr std::string_view kSshArgOpts = "BbcDEeFIiJLlmOopQRSWw";

}  // namespace

std::string join_words(const std::vector<std::string>& words) {
    std::string out;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (i) out.push_back(' ');
        out += words[i];
    }
    return out;
}

ClientCall parse_remote(const std::vector<std::string>& args, double default_timeout) {
    double timeout = default_timeout;
    std::string shell = "/bin/sh";
    std::size_t i = 0;
    while (i < args.size()) {
        const std::string& a = args[i];
        if ((a == "-t" || a == "--timeout") && i + 1 < args.size()) {
            if (!parse_float(args[i + 1], timeout))
                return fail(2, "remote: bad timeout " + py_repr(args[i + 1]));
            i += 2;
        } else if (a == "--bash") {
            shell = "/bin/bash";
            i += 1;
        } else if (a == "--") {
            i += 1;
            break;
        } else if (!a.empty() && a[0] == '-' && a != "-") {
            return fail(2, "remote: unknown option " + py_repr(a) +
                               " (usage: remote [-t SECS] [--bash] [--] CMD...)");
        } else {
            break;
        }
    }
    if (i >= args.size()) return fail(2, "usage: remote [-t SECS] [--bash] [--] CMD [ARGS...]");
    return exec_call("remote", shell, args.begin() + static_cast<long>(i), args.end(), timeout);
}

ClientCall parse_ssh(const std::vector<std::string>& args, double default_timeout) {
    std::optional<std::string> host;
    std::size_t i = 0;
    while (i < args.size()) {
        const std::string& a = args[i];
        if (a == "--") {
            i += 1;
            if (!host && i < args.size()) {
                host = args[i];
                i += 1;
            }
            break;
        }
        if (a.size() > 1 && a[0] == '-') {
            for (std::size_t j = 1; j < a.size(); ++j) {
                if (kSshArgOpts.find(a[j]) != std::string_view::npos) {
                    if (j + 1 == a.size()) i += 1;  // value in the next word
                    break;
                }
            }
            i += 1;
            continue;
        }
        if (host) break;
        host = a;
        i += 1;
    }
    if (!host)
        return fail(255,
                    "usage: ssh [OPTIONS] HOST COMMAND (test-bed shim: runs COMMAND in guest b)");
    if (i >= args.size())
        return fail(
            255, "ssh: test-bed shim: interactive logins are not supported (host " + *host + ")");
    return exec_call("ssh", "/bin/bash", args.begin() + static_cast<long>(i), args.end(),
                     default_timeout);
}

ClientCall parse_ctl(const std::vector<std::string>& args, std::string_view topo,
                     std::string_view role) {
    if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
        ClientCall c;
        c.rc = args.empty() ? 2 : 0;
        c.out = kCtlHelp;
        return c;
    }
    if (topo != "pair")
        return fail(2, "testbed-ctl: " + args[0] + ": not available in " +
                           std::string(topo.empty() ? "this" : topo) +
                           " topology (there is no peer guest)");
    if (role != "a") return fail(2, "testbed-ctl: only available in guest a");
    double secs = kDefaultCtlSeconds;
    if (args.size() > 1 && !parse_float(args[1], secs))
        return fail(2, "testbed-ctl: bad timeout " + py_repr(args[1]));
    ClientCall c;
    c.run = true;
    c.name = "testbed-ctl";
    c.type = 'C';
    c.command = join_words(args);
    c.timeout = secs + kCtlGrace;
    return c;
}

double default_timeout(const char* env_value) {
    double v = kDefaultRemoteTimeout;
    if (env_value && parse_float(env_value, v)) return v;
    return kDefaultRemoteTimeout;
}

std::string lookup_setting(std::string_view name, const char* env_value,
                           std::string_view config_text) {
    if (env_value && *env_value) return env_value;
    std::string prefix = std::string(name) + "=";
    while (!config_text.empty()) {
        auto nl = config_text.find('\n');
        std::string_view line = config_text.substr(0, nl);
        config_text =
            nl == std::string_view::npos ? std::string_view{} : config_text.substr(nl + 1);
        if (line.substr(0, prefix.size()) != prefix) continue;
        std::string_view v = line.substr(prefix.size());
        const char* ws = " \t\r\f\v";
        auto b = v.find_first_not_of(ws);
        if (b == std::string_view::npos) return "";
        v = v.substr(b, v.find_last_not_of(ws) - b + 1);
        auto qb = v.find_first_not_of("'\"");
        if (qb == std::string_view::npos) return "";
        v = v.substr(qb, v.find_last_not_of("'\"") - qb + 1);
        return std::string(v);
    }
    return "";
}

}  // namespace ntrdma::testbed
