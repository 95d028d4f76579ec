// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "frame.hpp"

namespace ntrdma::testbed {

namespace {

void put_u32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint32_t get_u32(const char* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
        v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

}  // namespace

std::string encode_frame(char type, std::uint32_t id, std::string_view payload) {
    std::string out;
    out.reserve(kHeaderSize + payload.size());
    out.append(kMagic);
    out.push_back(type);
    put_u32(out, id);
    put_u32(out, static_cast<std::uint32_t>(payload.size()));
    out.append(payload);
    return out;
}

void Decoder::feed(std::string_view data) {
    // Drop what was consumed before growing the buffer.
    if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= 65536)) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
    buf_.append(data);
}

Decoder::Status Decoder::next(Frame& out) {
    if (buffered() < kHeaderSize) return Status::kNeedMore;
    const char* h = buf_.data() + pos_;
    if (std::string_view(h, kMagic.size()) != kMagic) return Status::kBadMagic;
    std::uint32_t len = get_u32(h + 9);
    if (len > kMaxPayload) return Status::kTooLarge;
    if (buffered() < kHeaderSize + len) return Status::kNeedMore;
    out.type = h[4];
    out.id = get_u32(h + 5);
    out.payload.assign(h + kHeaderSize, len);
    pos_ += kHeaderSize + len;
    return Status::kFrame;
}

const char* to_string(Decoder::Status s) {
    switch (s) {
        case Decoder::Status::kFrame:
            return "frame";
        case Decoder::Status::kNeedMore:
            return "incomplete frame";
        case Decoder::Status::kBadMagic:
            return "bad frame magic (lost sync)";
        case Decoder::Status::kTooLarge:
            return "oversized frame (lost sync)";
    }
    return "?";
}

}  // namespace ntrdma::testbed
