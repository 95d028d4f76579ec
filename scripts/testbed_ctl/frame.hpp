// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Framing of the test-bed control channel (remote/testbed-ctl <-> agent a <-> host relay <->
// agent b). Every frame is: magic "NTBC", type (1 byte), id (u32 LE), length (u32 LE), payload.
//
// Types: X exec (payload: shell letter s|b, then the command), O stdout data, E stderr data,
// R exit status (ASCII decimal), K cancel, C control request (ASCII words, for the relay),
// H hello (agent b -> relay: "ok" or "failed: TEXT"), Q power off (relay -> agent b).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ntrdma::testbed {

inline constexpr std::string_view kMagic = "NTBC";
inline constexpr std::size_t kHeaderSize = 13;
// Largest payload accepted; anything bigger is treated as a lost sync. Commands are limited by
// the kernel to 128 KiB (MAX_ARG_STRLEN) and output is sent in 64 KiB chunks.
inline constexpr std::uint32_t kMaxPayload = 16u << 20;
// Output is read from the command's pipes (and forwarded) in chunks of this size.
inline constexpr std::size_t kChunk = 65536;

namespace ftype {
inline constexpr char kExec = 'X';
inline constexpr char kStdout = 'O';
inline constexpr char kStderr = 'E';
inline constexpr char kExit = 'R';
inline constexpr char kCancel = 'K';
inline constexpr char kControl = 'C';
inline constexpr char kHello = 'H';
inline constexpr char kPowerOff = 'Q';
}  // namespace ftype

struct Frame {
    char type = 0;
    std::uint32_t id = 0;
    std::string payload;
};

// Header plus payload, ready to be written. The payload must not exceed kMaxPayload.
std::string encode_frame(char type, std::uint32_t id, std::string_view payload = {});

// Incremental decoder: feed() whatever was read, then call next() until it returns kNeedMore.
class Decoder {
  public:
    enum class Status {
        kFrame,     // `out` holds the next frame
        kNeedMore,  // no complete frame buffered
        kBadMagic,  // the stream is out of sync; the decoder stays in this state
        kTooLarge,  // the header announces more than kMaxPayload; the decoder stays in this state
    };

    void feed(std::string_view data);
    Status next(Frame& out);
    // Bytes buffered but not yet returned as frames.
    std::size_t buffered() const { return buf_.size() - pos_; }

  private:
    std::string buf_;
    std::size_t pos_ = 0;
};

const char* to_string(Decoder::Status s);

}  // namespace ntrdma::testbed
