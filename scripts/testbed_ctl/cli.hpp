// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Command lines of the guest-side client (remote, the ssh shim and testbed-ctl).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ntrdma::testbed {

inline constexpr double kDefaultRemoteTimeout = 120.0;
inline constexpr double kDefaultCtlSeconds = 180.0;
// testbed-ctl waits this much longer than the request's own timeout for the relay's answer.
inline constexpr double kCtlGrace = 120.0;

extern const char* const kCtlHelp;

// Result of parsing a command line: either something to run or an exit status (with a message
// for stderr, or text for stdout).
struct ClientCall {
    bool run = false;
    int rc = 0;           // when !run
    std::string err;      // when !run: for stderr (without the newline)
    std::string out;      // when !run: for stdout
    std::string shell;    // /bin/sh or /bin/bash
    std::string command;  // the words joined with single spaces
    double timeout = 0;   // seconds; 0 = none
    char type = 'X';      // 'X' exec or 'C' control request (then `command` is the request)
    std::string name;     // for messages: remote, ssh or testbed-ctl
};

// remote [-t SECS] [--bash] [--] CMD [ARGS...]
ClientCall parse_remote(const std::vector<std::string>& args, double default_timeout);
// ssh [OPTIONS] [USER@]HOST [OPTIONS] COMMAND [ARGS...] (OpenSSH-like option skipping)
ClientCall parse_ssh(const std::vector<std::string>& args, double default_timeout);
// testbed-ctl REQUEST [SECS]; topo/role are the guest's settings.
ClientCall parse_ctl(const std::vector<std::string>& args, std::string_view topo,
                     std::string_view role);

// $NTRDMA_REMOTE_TIMEOUT (unset or malformed: 120).
double default_timeout(const char* env_value);

// A setting: the environment's value if non-empty, else the NAME=VALUE line of the guest's
// config file (/etc/ntrdma-testbed/env), its value stripped of whitespace and quotes.
std::string lookup_setting(std::string_view name, const char* env_value,
                           std::string_view config_text);

std::string join_words(const std::vector<std::string>& words);

}  // namespace ntrdma::testbed
