// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "fake_client.hpp"
#include "regfile.hpp"

namespace ntb::ivshmem {
namespace {

std::uint32_t file_u32(const std::string& path, std::size_t off) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    std::uint32_t v = 0xffffffff;
    EXPECT_EQ(::pread(fd.get(), &v, sizeof(v), static_cast<off_t>(off)), 4);
    return v;
}

void file_fill(const std::string& path, std::size_t off, std::size_t len, std::uint8_t byte) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    std::string buf(len, static_cast<char>(byte));
    ASSERT_EQ(::pwrite(fd.get(), buf.data(), len, static_cast<off_t>(off)),
              static_cast<ssize_t>(len));
}

bool block_zero_except_header(const std::string& path, int port) {
    for (std::size_t off = reg::kDrvEnabled; off < reg::kBlockSize; off += 4)
        if (file_u32(path, port * reg::kBlockSize + off) != 0) return false;
    return true;
}

TEST(RegisterFile, ValidSizes) {
    EXPECT_TRUE(valid_shm_size(4096, 1));
    EXPECT_TRUE(valid_shm_size(65536, 2));
    EXPECT_TRUE(valid_shm_size(8192, 2));
    EXPECT_FALSE(valid_shm_size(4096, 2));
    EXPECT_FALSE(valid_shm_size(12288, 3));
    EXPECT_FALSE(valid_shm_size(2048, 1));
    EXPECT_FALSE(valid_shm_size(0, 1));
    EXPECT_FALSE(valid_shm_size(4096, 0));
}

TEST(RegisterFile, CreatesAndSizesFile) {
    test::TempDir dir;
    std::string path = dir.file("regs");
    RegisterFile rf(path, 65536, 2);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 65536);
    EXPECT_EQ(rf.generation(0), 0u);
    EXPECT_EQ(rf.generation(1), 0u);
    EXPECT_THROW(RegisterFile(dir.file("bad"), 12288, 1), std::invalid_argument);
}

TEST(RegisterFile, ResizesExistingFile) {
    test::TempDir dir;
    std::string path = dir.file("regs");
    { UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)); }
    RegisterFile rf(path, 8192, 2);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 8192);
}

TEST(RegisterFile, InitAndClearBlock) {
    test::TempDir dir;
    std::string path = dir.file("regs");
    RegisterFile rf(path, 8192, 2);
    file_fill(path, 0, 8192, 0xa5);  // garbage everywhere, including the header of block 1
    // The constructor already captured generation 0 for both ports.
    EXPECT_EQ(rf.init_block(1), 1u);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kMagic), reg::kMagicValue);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kHwPresent), 1u);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kGeneration), 1u);
    EXPECT_TRUE(block_zero_except_header(path, 1));
    EXPECT_EQ(file_u32(path, 0x0), 0xa5a5a5a5u) << "block 0 must not be touched";
    EXPECT_EQ(file_u32(path, 0xffc), 0xa5a5a5a5u) << "block 0 must not be touched";

    file_fill(path, 0x1000 + reg::kDrvEnabled, reg::kBlockSize - reg::kDrvEnabled, 0x5a);
    rf.clear_block(1);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kMagic), reg::kMagicValue);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kHwPresent), 0u);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kGeneration), 1u);
    EXPECT_TRUE(block_zero_except_header(path, 1));

    EXPECT_EQ(rf.init_block(1), 2u);
    EXPECT_EQ(file_u32(path, 0x1000 + reg::kGeneration), 2u);
    EXPECT_EQ(rf.load32(0x1000 + reg::kHwPresent), 1u);
    EXPECT_THROW(rf.init_block(2), std::out_of_range);
}

TEST(RegisterFile, GenerationContinuesFromFile) {
    test::TempDir dir;
    std::string path = dir.file("regs");
    {
        RegisterFile rf(path, 8192, 2);
        rf.init_block(0);
        rf.init_block(0);
        rf.init_block(0);
        rf.clear_block(0);
        rf.init_block(1);
    }
    RegisterFile rf(path, 8192, 2);
    EXPECT_EQ(rf.generation(0), 3u);
    EXPECT_EQ(rf.generation(1), 1u);
    EXPECT_EQ(rf.init_block(0), 4u);
    EXPECT_EQ(file_u32(path, reg::kGeneration), 4u);
}

TEST(RegisterFile, SharedMappingSeesServerWrites) {
    test::TempDir dir;
    std::string path = dir.file("regs");
    RegisterFile rf(path, 4096, 1);
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rf.fd(), 0);
    ASSERT_NE(p, MAP_FAILED);
    auto* words = static_cast<volatile std::uint32_t*>(p);
    words[reg::kSpad / 4] = 0x1234;
    rf.init_block(0);
    EXPECT_EQ(words[reg::kMagic / 4], reg::kMagicValue);
    EXPECT_EQ(words[reg::kHwPresent / 4], 1u);
    EXPECT_EQ(words[reg::kSpad / 4], 0u);
    ::munmap(p, 4096);
}

}  // namespace
}  // namespace ntb::ivshmem
