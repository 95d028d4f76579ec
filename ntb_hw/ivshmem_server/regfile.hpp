// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The register file: shared memory handed to every ivshmem-doorbell client (BAR2 of fn0), one
// 4 KiB block per NTB port. See ntb_hw/HARDWARE.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "unique_fd.hpp"

namespace ntb::ivshmem {

namespace reg {
inline constexpr std::size_t kBlockSize = 0x1000;
inline constexpr std::size_t kMagic = 0x000;              // u32
inline constexpr std::size_t kHwPresent = 0x004;          // u32
inline constexpr std::size_t kGeneration = 0x008;         // u32
inline constexpr std::size_t kDrvEnabled = 0x00c;         // u32
inline constexpr std::size_t kDb = 0x010;                 // u64
inline constexpr std::size_t kMsgSts = 0x018;             // u32
inline constexpr std::size_t kMsg = 0x020;                // u32[4]
inline constexpr std::size_t kSpad = 0x100;               // u32[32]
inline constexpr std::uint32_t kMagicValue = 0x4942544e;  // "NTBI"
}  // namespace reg

// Valid shm size: a power of two and at least one block per port.
bool valid_shm_size(std::uint64_t size, int num_ports);

class RegisterFile {
  public:
    // Creates `path` (mode 0600) or opens it, ftruncates it to `size` and maps it MAP_SHARED.
    // Remembers the generation found in each of the `num_ports` blocks. Throws std::system_error
    // or std::invalid_argument.
    RegisterFile(const std::string& path, std::size_t size, int num_ports);
    ~RegisterFile();
    RegisterFile(const RegisterFile&) = delete;
    RegisterFile& operator=(const RegisterFile&) = delete;

    int fd() const { return fd_.get(); }
    std::size_t size() const { return size_; }
    int num_ports() const { return static_cast<int>(generation_.size()); }

    // Connect of port k: zero block k, magic, hw_present=1, generation = previous + 1.
    // Returns the new generation.
    std::uint32_t init_block(int port);
    // Disconnect of port k: zero block k except generation, magic, hw_present=0.
    void clear_block(int port);
    // The server's generation counter of port k (last value written, or found at startup).
    std::uint32_t generation(int port) const;

    // Atomic 32-bit load of any register (for diagnostics and tests).
    std::uint32_t load32(std::size_t offset) const;

  private:
    std::uint8_t* block(int port) const;
    void store32(int port, std::size_t off, std::uint32_t v) const;
    // Zeroes [from, kBlockSize) of block `port` with relaxed atomic 64-bit stores.
    void zero_from(int port, std::size_t from) const;

    UniqueFd fd_;
    std::size_t size_ = 0;
    std::uint8_t* base_ = nullptr;
    std::vector<std::uint32_t> generation_;
};

}  // namespace ntb::ivshmem
