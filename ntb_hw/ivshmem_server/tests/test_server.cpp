// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Integration tests: the server runs in-process on a thread, fake clients behave like QEMU.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_client.hpp"
#include "regfile.hpp"
#include "server.hpp"

namespace ntb::ivshmem {
namespace {

using test::FakeClient;

constexpr int kVectors = 5;
constexpr std::size_t kShmSize = 65536;

// Receives the next message and checks its value and whether it carries an fd.
UniqueFd expect_msg(FakeClient& c, std::int64_t value, bool with_fd, const char* what) {
    RecvResult r = c.recv();
    EXPECT_EQ(r.status, RecvStatus::kOk) << what << ": " << test::describe(r);
    EXPECT_EQ(r.value, value) << what << ": " << test::describe(r);
    EXPECT_EQ(r.fd.valid(), with_fd) << what << ": " << test::describe(r);
    return std::move(r.fd);
}

void expect_silence(FakeClient& c, const char* what) {
    RecvResult r = c.recv(150);
    EXPECT_TRUE(r.status == RecvStatus::kError && r.err == ETIMEDOUT)
        << what << ": unexpected " << test::describe(r);
}

std::vector<UniqueFd> expect_fds(FakeClient& c, std::int64_t value, const char* what) {
    std::vector<UniqueFd> fds;
    for (int v = 0; v < kVectors; ++v) fds.push_back(expect_msg(c, value, true, what));
    return fds;
}

// What a QEMU client learns from its handshake (version, id, shm).
struct Handshake {
    UniqueFd shm;
};

Handshake expect_handshake(FakeClient& c, std::int64_t id) {
    Handshake h;
    expect_msg(c, 0, false, "version");
    expect_msg(c, id, false, "own id");
    h.shm = expect_msg(c, -1, true, "shm");
    return h;
}

std::uint32_t file_u32(const std::string& path, std::size_t off) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    std::uint32_t v = 0xffffffff;
    EXPECT_EQ(::pread(fd.get(), &v, sizeof(v), static_cast<off_t>(off)), 4);
    return v;
}

void file_put_u32(const std::string& path, std::size_t off, std::uint32_t v) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(::pwrite(fd.get(), &v, sizeof(v), static_cast<off_t>(off)), 4);
}

void dirty_block(const std::string& path, int port) {
    for (std::size_t off = reg::kDrvEnabled; off < reg::kBlockSize; off += 0x40)
        file_put_u32(path, port * reg::kBlockSize + off, 0xdeadbeef);
    file_put_u32(path, port * reg::kBlockSize + reg::kBlockSize - 4, 0xdeadbeef);
}

bool block_zero_except_header(const std::string& path, int port) {
    for (std::size_t off = reg::kDrvEnabled; off < reg::kBlockSize; off += 4)
        if (file_u32(path, port * reg::kBlockSize + off) != 0) return false;
    return true;
}

void expect_block(const std::string& path, int port, std::uint32_t hw_present,
                  std::uint32_t generation) {
    std::size_t b = static_cast<std::size_t>(port) * reg::kBlockSize;
    EXPECT_EQ(file_u32(path, b + reg::kMagic), reg::kMagicValue) << "port " << port;
    EXPECT_EQ(file_u32(path, b + reg::kHwPresent), hw_present) << "port " << port;
    EXPECT_EQ(file_u32(path, b + reg::kGeneration), generation) << "port " << port;
    EXPECT_TRUE(block_zero_except_header(path, port)) << "port " << port;
}

void signal_eventfd(int fd) {
    std::uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof(one)), 8);
}

class ServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        cfg_.shm_path = dir_.file("regs");
        cfg_.shm_size = kShmSize;
        cfg_.vectors = kVectors;
        cfg_.sockets = {dir_.file("sock0"), dir_.file("sock1")};
    }
    void TearDown() override { stop(); }

    void start() {
        server_ = std::make_unique<Server>(cfg_, [this](std::string_view line) {
            std::lock_guard<std::mutex> g(mu_);
            logs_.emplace_back(line);
        });
        thread_ = std::thread([this] { result_ = server_->run(); });
    }
    void stop() {
        if (!server_) return;
        server_->request_stop();
        thread_.join();
        EXPECT_EQ(result_, 0);
        server_.reset();
    }
    bool wait_log(const std::string& needle, int timeout_ms = 3000) {
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        do {
            {
                std::lock_guard<std::mutex> g(mu_);
                for (const auto& l : logs_)
                    if (l.find(needle) != std::string::npos) return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } while (std::chrono::steady_clock::now() < end);
        return false;
    }
    // Waits until `needle` has been logged at least `n` times.
    bool wait_log_count(const std::string& needle, int n, int timeout_ms = 3000) {
        auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        do {
            {
                std::lock_guard<std::mutex> g(mu_);
                int count = 0;
                for (const auto& l : logs_)
                    if (l.find(needle) != std::string::npos) ++count;
                if (count >= n) return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        } while (std::chrono::steady_clock::now() < end);
        return false;
    }
    const std::string& shm() const { return cfg_.shm_path; }

    test::TempDir dir_;
    Config cfg_;
    std::unique_ptr<Server> server_;
    std::thread thread_;
    int result_ = -1;
    std::mutex mu_;
    std::vector<std::string> logs_;
};

TEST_F(ServerTest, TwoClientsDisconnectAndReconnect) {
    start();
    // Stale content in block 1 must be wiped when port 1 connects.
    dirty_block(shm(), 1);

    // --- client 0 ---
    FakeClient c0(cfg_.sockets[0]);
    ASSERT_TRUE(c0.connected());
    Handshake h0 = expect_handshake(c0, 0);
    ASSERT_TRUE(h0.shm.valid());
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "client 0 own eventfds");
    expect_silence(c0, "client 0 after handshake");
    expect_block(shm(), 0, 1, 1);

    // The shm fd is the register file: same size, writes through it show up in the file.
    struct stat st {};
    ASSERT_EQ(::fstat(h0.shm.get(), &st), 0);
    EXPECT_EQ(static_cast<std::size_t>(st.st_size), kShmSize);
    void* map = ::mmap(nullptr, kShmSize, PROT_READ | PROT_WRITE, MAP_SHARED, h0.shm.get(), 0);
    ASSERT_NE(map, MAP_FAILED);
    auto* words = static_cast<volatile std::uint32_t*>(map);
    words[0x8000 / 4] = 0xcafef00d;
    EXPECT_EQ(file_u32(shm(), 0x8000), 0xcafef00du);
    EXPECT_EQ(words[reg::kMagic / 4], reg::kMagicValue);
    ::munmap(map, kShmSize);

    // Nobody kicked client 0 for its own connect.
    EXPECT_FALSE(test::read_eventfd(own0[0].get(), 50));

    // --- client 1 ---
    FakeClient c1(cfg_.sockets[1]);
    ASSERT_TRUE(c1.connected());
    Handshake h1 = expect_handshake(c1, 1);
    std::vector<UniqueFd> peer0_at_1 = expect_fds(c1, 0, "client 0's eventfds at client 1");
    std::vector<UniqueFd> own1 = expect_fds(c1, 1, "client 1 own eventfds");
    expect_silence(c1, "client 1 after handshake");
    std::vector<UniqueFd> peer1_at_0 = expect_fds(c0, 1, "client 1's eventfds at client 0");
    expect_silence(c0, "client 0 after peer connect");
    expect_block(shm(), 1, 1, 1);
    expect_block(shm(), 0, 1, 1);

    // The link-change kick: client 0's vector 0 fires, exactly once; client 1 is not kicked.
    EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
    EXPECT_FALSE(test::read_eventfd(own1[0].get(), 50));
    for (int v = 1; v < kVectors; ++v) EXPECT_FALSE(test::read_eventfd(own0[v].get(), 0));

    // Peer eventfds really are the peer's own vectors, both directions.
    for (int v = 0; v < kVectors; ++v) {
        signal_eventfd(peer1_at_0[v].get());
        EXPECT_EQ(test::read_eventfd(own1[v].get(), 1000), std::optional<std::uint64_t>(1)) << v;
        signal_eventfd(peer0_at_1[v].get());
        EXPECT_EQ(test::read_eventfd(own0[v].get(), 1000), std::optional<std::uint64_t>(1)) << v;
    }
    // ... and each vector is distinct.
    signal_eventfd(peer1_at_0[3].get());
    for (int v = 0; v < kVectors; ++v)
        EXPECT_EQ(test::read_eventfd(own1[v].get(), v == 3 ? 1000 : 0).has_value(), v == 3) << v;

    // --- client 1 goes away ---
    dirty_block(shm(), 1);  // the guest of port 1 wrote registers
    c1.close();
    own1.clear();
    peer0_at_1.clear();
    expect_msg(c0, 1, false, "peer gone");
    expect_silence(c0, "client 0 after peer gone");
    expect_block(shm(), 1, 0, 1);
    EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
    EXPECT_TRUE(wait_log("client 1 disconnected"));
    // The server closed its copies; ours (as QEMU would before the peer-gone message)
    // still refer to a live eventfd.
    peer1_at_0.clear();

    // --- client 1 comes back on socket 1 ---
    dirty_block(shm(), 1);
    FakeClient c1b(cfg_.sockets[1]);
    ASSERT_TRUE(c1b.connected());
    Handshake h1b = expect_handshake(c1b, 1);
    std::vector<UniqueFd> peer0_at_1b = expect_fds(c1b, 0, "client 0's eventfds at client 1'");
    std::vector<UniqueFd> own1b = expect_fds(c1b, 1, "client 1' own eventfds");
    std::vector<UniqueFd> peer1b_at_0 = expect_fds(c0, 1, "client 1' eventfds at client 0");
    expect_block(shm(), 1, 1, 2);
    EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
    signal_eventfd(peer1b_at_0[2].get());
    EXPECT_EQ(test::read_eventfd(own1b[2].get(), 1000), std::optional<std::uint64_t>(1));
    EXPECT_EQ(server_->regfile().generation(1), 2u);
    EXPECT_EQ(server_->regfile().generation(0), 1u);
}

TEST_F(ServerTest, DuplicateConnectionIsRefused) {
    start();
    FakeClient c0(cfg_.sockets[0]);
    ASSERT_TRUE(c0.connected());
    expect_handshake(c0, 0);
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "own");

    FakeClient dup(cfg_.sockets[0]);
    ASSERT_TRUE(dup.connected());  // accepted by the kernel, then refused by the server
    // The refusal is an unsupported protocol version (QEMU exits on it), then EOF.
    expect_msg(dup, kRefusalVersion, false, "refusal");
    RecvResult r = dup.recv(3000);
    EXPECT_EQ(r.status, RecvStatus::kEof) << test::describe(r);
    EXPECT_TRUE(wait_log("client 0 refused"));
    expect_silence(c0, "client 0 after refused duplicate");
    EXPECT_FALSE(test::read_eventfd(own0[0].get(), 50)) << "refusal must not kick anybody";
    expect_block(shm(), 0, 1, 1);

    // The original client 0 is unaffected and the other socket still works.
    FakeClient c1(cfg_.sockets[1]);
    expect_handshake(c1, 1);
    expect_fds(c1, 0, "peer 0");
    expect_fds(c1, 1, "own 1");
    expect_fds(c0, 1, "peer 1 at 0");
    EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
}

TEST_F(ServerTest, ClientVanishingDuringConnectIsCleanedUp) {
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "own");

    {
        FakeClient c1(cfg_.sockets[1]);
        ASSERT_TRUE(c1.connected());
    }  // closed before reading anything
    // Whether the server noticed during its sends or afterwards, client 0 sees the connect
    // followed by the peer-gone notice.
    std::vector<UniqueFd> peer1 = expect_fds(c0, 1, "vanishing peer fds");
    expect_msg(c0, 1, false, "peer gone");
    expect_silence(c0, "after vanishing peer");
    expect_block(shm(), 1, 0, 1);

    FakeClient c1(cfg_.sockets[1]);
    expect_handshake(c1, 1);
    expect_fds(c1, 0, "peer 0");
    expect_fds(c1, 1, "own 1");
    expect_block(shm(), 1, 1, 2);
}

TEST_F(ServerTest, DataFromClientIsDiscarded) {
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    expect_fds(c0, 0, "own");
    // Send junk, including an fd, to the server: it must ignore it and keep the client.
    ASSERT_EQ(send_msg(c0.fd(), 1234, STDIN_FILENO), 0);
    ASSERT_EQ(::send(c0.fd(), "hello", 5, MSG_NOSIGNAL), 5);
    FakeClient c1(cfg_.sockets[1]);
    expect_handshake(c1, 1);
    expect_fds(c1, 0, "peer 0");
    expect_fds(c1, 1, "own 1");
    expect_fds(c0, 1, "peer 1 at 0");
    expect_block(shm(), 0, 1, 1);
}

int count_open_fds() {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)e;
        ++n;
    }
    return n;
}

TEST_F(ServerTest, NoFdLeaksOverManyConnectCycles) {
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "own");
    const int baseline = count_open_fds();
    for (int i = 0; i < 20; ++i) {
        {
            FakeClient c1(cfg_.sockets[1]);
            Handshake h = expect_handshake(c1, 1);
            expect_fds(c1, 0, "peer 0");
            expect_fds(c1, 1, "own 1");
            expect_fds(c0, 1, "peer 1 at 0");
            FakeClient dup(cfg_.sockets[0]);
            expect_msg(dup, kRefusalVersion, false, "refusal");
            EXPECT_EQ(dup.recv().status, RecvStatus::kEof);
        }
        expect_msg(c0, 1, false, "peer gone");
        ASSERT_FALSE(::testing::Test::HasFailure()) << "iteration " << i;
    }
    EXPECT_EQ(count_open_fds(), baseline);
    EXPECT_EQ(server_->regfile().generation(1), 20u);
}

TEST_F(ServerTest, PersistentEventfdsSurviveReconnects) {
    cfg_.persistent_eventfds = true;
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "own 0");

    auto c1 = std::make_unique<FakeClient>(cfg_.sockets[1]);
    expect_handshake(*c1, 1);
    std::vector<UniqueFd> peer0_at_1 = expect_fds(*c1, 0, "peer 0 at 1");
    std::vector<UniqueFd> own1 = expect_fds(*c1, 1, "own 1");
    std::vector<UniqueFd> peer1_at_0 = expect_fds(c0, 1, "peer 1 at 0");
    EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));

    for (std::uint32_t gen = 2; gen <= 4; ++gen) {
        // Port 1's QEMU goes away: no "peer gone" for client 0, just the register file + kick.
        c1.reset();
        own1.clear();
        peer0_at_1.clear();
        EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
        expect_silence(c0, "client 0 after peer left (persistent)");
        expect_block(shm(), 1, 0, gen - 1);

        // A new QEMU on port 1 gets everything; client 0 is told nothing new but is kicked.
        c1 = std::make_unique<FakeClient>(cfg_.sockets[1]);
        expect_handshake(*c1, 1);
        peer0_at_1 = expect_fds(*c1, 0, "peer 0 at new 1");
        own1 = expect_fds(*c1, 1, "own new 1");
        expect_silence(*c1, "new client 1 after handshake");
        EXPECT_EQ(test::read_eventfd(own0[0].get(), 2000), std::optional<std::uint64_t>(1));
        expect_silence(c0, "client 0 after peer came back (persistent)");
        expect_block(shm(), 1, 1, gen);

        // Client 0's old copies of port 1's eventfds reach the new QEMU, and vice versa.
        for (int v = 1; v < kVectors; ++v) {
            signal_eventfd(peer1_at_0[v].get());
            EXPECT_EQ(test::read_eventfd(own1[v].get(), 1000), std::optional<std::uint64_t>(1));
            signal_eventfd(peer0_at_1[v].get());
            EXPECT_EQ(test::read_eventfd(own0[v].get(), 1000), std::optional<std::uint64_t>(1));
        }
        ASSERT_FALSE(::testing::Test::HasFailure()) << "generation " << gen;
    }

    // Port 0 reconnecting while port 1 stays: symmetric.
    c0.close();
    own0.clear();
    peer1_at_0.clear();
    EXPECT_EQ(test::read_eventfd(own1[0].get(), 2000), std::optional<std::uint64_t>(1));
    expect_silence(*c1, "client 1 after peer 0 left");
    FakeClient c0b(cfg_.sockets[0]);
    expect_handshake(c0b, 0);
    std::vector<UniqueFd> peer1_at_0b = expect_fds(c0b, 1, "peer 1 at new 0");
    std::vector<UniqueFd> own0b = expect_fds(c0b, 0, "own new 0");
    expect_silence(*c1, "client 1 after peer 0 came back");
    signal_eventfd(peer0_at_1[2].get());
    EXPECT_EQ(test::read_eventfd(own0b[2].get(), 1000), std::optional<std::uint64_t>(1));
    signal_eventfd(peer1_at_0b[3].get());
    EXPECT_EQ(test::read_eventfd(own1[3].get(), 1000), std::optional<std::uint64_t>(1));
    expect_block(shm(), 0, 1, 2);
}

TEST_F(ServerTest, PersistentEventfdsDoNotLeak) {
    cfg_.persistent_eventfds = true;
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    std::vector<UniqueFd> own0 = expect_fds(c0, 0, "own");
    {
        FakeClient c1(cfg_.sockets[1]);  // first connect of port 1 creates its eventfds
        expect_handshake(c1, 1);
        expect_fds(c1, 0, "peer 0");
        expect_fds(c1, 1, "own 1");
    }
    std::vector<UniqueFd> peer1 = expect_fds(c0, 1, "peer 1 at 0");
    ASSERT_TRUE(wait_log("client 1 disconnected"));
    const int baseline = count_open_fds();
    for (int i = 0; i < 10; ++i) {
        {
            FakeClient c1(cfg_.sockets[1]);
            expect_handshake(c1, 1);
            expect_fds(c1, 0, "peer 0");
            expect_fds(c1, 1, "own 1");
        }
        ASSERT_TRUE(wait_log_count("client 1 disconnected", i + 2)) << "iteration " << i;
        EXPECT_TRUE(test::read_eventfd(own0[0].get(), 0).has_value()) << "kicked";
        ASSERT_FALSE(::testing::Test::HasFailure()) << "iteration " << i;
    }
    EXPECT_EQ(count_open_fds(), baseline);
    expect_silence(c0, "client 0 never gets peer-gone in persistent mode");
}

TEST_F(ServerTest, GenerationSurvivesServerRestart) {
    start();
    {
        FakeClient c0(cfg_.sockets[0]);
        expect_handshake(c0, 0);
        expect_fds(c0, 0, "own");
    }
    ASSERT_TRUE(wait_log("client 0 disconnected"));
    expect_block(shm(), 0, 0, 1);
    stop();
    EXPECT_NE(::access(cfg_.sockets[0].c_str(), F_OK), 0) << "socket must be unlinked on exit";

    logs_.clear();
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    expect_fds(c0, 0, "own");
    expect_block(shm(), 0, 1, 2);
}

TEST_F(ServerTest, StaleSocketIsReplacedButOtherFilesAreNot) {
    // A leftover socket file (server crashed) is unlinked and re-bound.
    {
        UniqueFd s(::socket(AF_UNIX, SOCK_STREAM, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strcpy(addr.sun_path, cfg_.sockets[0].c_str());
        ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    }
    start();
    FakeClient c0(cfg_.sockets[0]);
    expect_handshake(c0, 0);
    stop();

    // A regular file at a socket path is an error, not something to delete.
    { UniqueFd f(::open(cfg_.sockets[1].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)); }
    EXPECT_THROW(Server(cfg_, nullptr), std::system_error);
    EXPECT_EQ(::access(cfg_.sockets[1].c_str(), F_OK), 0);
    EXPECT_NE(::access(cfg_.sockets[0].c_str(), F_OK), 0) << "partially set up socket left behind";
}

}  // namespace
}  // namespace ntb::ivshmem
