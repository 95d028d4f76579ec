// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// File descriptors, blocking frame I/O, UNIX sockets and process spawning for the test-bed
// control programs.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frame.hpp"
#include "unique_fd.hpp"

namespace ntrdma::testbed {

// Move-only owner of a file descriptor (shared with the ivshmem server).
using UniqueFd = ntb::ivshmem::UniqueFd;

// Writes everything (retrying on EINTR and short writes). Returns 0 or an errno value.
// write_all uses write(2) (SIGPIPE as configured); send_all uses send(2) with MSG_NOSIGNAL and
// works on sockets only.
int write_all(int fd, std::string_view data);
int send_all(int fd, std::string_view data);

// Blocking reader of frames from a stream (socket, pipe or virtio-serial port).
class FrameReader {
  public:
    enum class Result { kFrame, kEof, kError, kBadFrame };

    // eof_retry: a read returning 0 means "nobody connected yet" (a virtio-serial port whose
    // host side is closed), not end of stream: wait 0.1 s and read again.
    explicit FrameReader(int fd, bool eof_retry = false) : fd_(fd), eof_retry_(eof_retry) {}

    // kEof: clean end of stream (also in the middle of a frame); kError: see error();
    // kBadFrame: bad magic or oversized length, see bad_status().
    Result read(Frame& out);
    int error() const { return err_; }
    Decoder::Status bad_status() const { return bad_; }
    // Human-readable reason for the last kError/kBadFrame/kEof result.
    std::string reason() const;

  private:
    int fd_;
    bool eof_retry_;
    Decoder dec_;
    int err_ = 0;
    Decoder::Status bad_ = Decoder::Status::kNeedMore;
    bool eof_ = false;
};

// A listening UNIX stream socket at `path`, created atomically: bound as PATH.tmp, then renamed,
// so that the path appears only once connections are accepted. Throws std::system_error.
UniqueFd listen_unix(const std::string& path, int backlog);
// Connects to a UNIX stream socket; on failure returns an invalid fd and sets `err`.
UniqueFd connect_unix(const std::string& path, int& err);

struct SpawnOptions {
    std::vector<std::string> argv;  // argv[0] is looked up in PATH if it has no '/'
    std::string cwd;                // empty: inherit
    int stdout_fd = -1;             // -1: inherit
    int stderr_fd = -1;             // -1: inherit
    bool new_session = false;       // setsid() in the child
};

// Starts a process with stdin /dev/null, an empty signal mask and all signals at their default
// disposition. Returns the pid, or -errno if it could not be started (including a failing
// chdir or exec).
pid_t spawn(const SpawnOptions& opt);

// A pidfd for a child (readable once it has exited); invalid if the kernel lacks pidfd_open.
UniqueFd open_pidfd(pid_t pid);

// Waits for `pid` (retrying on EINTR) and returns its status the way a shell reports it:
// the exit status, or 128 + the signal number.
int wait_status(pid_t pid);

// Python-style rendering of OSError text: "[Errno 2] No such file or directory".
std::string errno_text(int err);

// Parses a number the way Python's float() does for the usual spellings (surrounding
// whitespace, sign, decimal/exponent, inf). NaN, hex and trailing garbage are rejected.
bool parse_float(std::string_view s, double& out);
// Parses an integer the way Python's int() does (surrounding whitespace, optional sign).
bool parse_int(std::string_view s, long long& out);
// printf("%g").
std::string format_g(double v);
// Python's repr() of a str (quotes chosen the same way; control bytes escaped).
std::string py_repr(std::string_view s);

// Seconds as a relative timeout in milliseconds for poll(): -1 for "no limit" (inf or more than
// a year), 0 if already expired.
int poll_timeout_ms(double seconds_left);

}  // namespace ntrdma::testbed
