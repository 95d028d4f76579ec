// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "regfile.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace ntb::ivshmem {

static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic_ref<std::uint64_t>::is_always_lock_free);

bool valid_shm_size(std::uint64_t size, int num_ports) {
    if (num_ports <= 0) return false;
    return std::has_single_bit(size) && size >= 4096 &&
           size / reg::kBlockSize >= static_cast<std::uint64_t>(num_ports);
}

RegisterFile::RegisterFile(const std::string& path, std::size_t size, int num_ports) {
    if (!valid_shm_size(size, num_ports))
        throw std::invalid_argument("shm size must be a power of two >= 4096 * number of ports");
    int fd;
    do {
        fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
    fd_.reset(fd);
    if (::ftruncate(fd_.get(), static_cast<off_t>(size)) < 0)
        throw std::system_error(errno, std::generic_category(), "ftruncate " + path);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap " + path);
    base_ = static_cast<std::uint8_t*>(p);
    size_ = size;
    generation_.resize(static_cast<std::size_t>(num_ports));
    for (int k = 0; k < num_ports; ++k)
        generation_[static_cast<std::size_t>(k)] =
            load32(static_cast<std::size_t>(k) * reg::kBlockSize + reg::kGeneration);
}

RegisterFile::~RegisterFile() {
    if (base_ != nullptr) ::munmap(base_, size_);
}

std::uint8_t* RegisterFile::block(int port) const {
    if (port < 0 || port >= num_ports()) throw std::out_of_range("register block");
    return base_ + static_cast<std::size_t>(port) * reg::kBlockSize;
}

std::uint32_t RegisterFile::load32(std::size_t offset) const {
    if (offset % 4 != 0 || offset + 4 > size_) throw std::out_of_range("register offset");
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(base_ + offset))
        .load(std::memory_order_acquire);
}

void RegisterFile::store32(int port, std::size_t off, std::uint32_t v) const {
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(block(port) + off))
        .store(v, std::memory_order_release);
}

void RegisterFile::zero_from(int port, std::size_t from) const {
    std::uint8_t* b = block(port);
    std::size_t off = from;
    if (off % 8 != 0) {  // leading u32 (from is always 4-byte aligned)
        store32(port, off, 0);
        off += 4;
    }
    for (; off < reg::kBlockSize; off += 8)
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b + off))
            .store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
}

std::uint32_t RegisterFile::init_block(int port) {
    std::uint32_t gen = ++generation_.at(static_cast<std::size_t>(port));
    // Same end state as "zero everything, then set magic/hw_present/generation", but the
    // identification words never transiently read as zero; hw_present is published last.
    zero_from(port, reg::kDrvEnabled);
    store32(port, reg::kGeneration, gen);
    store32(port, reg::kMagic, reg::kMagicValue);
    store32(port, reg::kHwPresent, 1);
    return gen;
}

void RegisterFile::clear_block(int port) {
    // Link down first, then wipe the rest; generation is kept.
    store32(port, reg::kHwPresent, 0);
    zero_from(port, reg::kDrvEnabled);
    store32(port, reg::kGeneration, generation_.at(static_cast<std::size_t>(port)));
    store32(port, reg::kMagic, reg::kMagicValue);
}

std::uint32_t RegisterFile::generation(int port) const {
    return generation_.at(static_cast<std::size_t>(port));
}

}  // namespace ntb::ivshmem
