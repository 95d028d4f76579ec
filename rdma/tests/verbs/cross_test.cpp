// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Cross-host verbs tests: the requester is this process (NTRDMA_IBDEV), the
// responder a QP of ntrdma_verbs_agent on the other host (NTRDMA_AGENT =
// ADDR:PORT; in the loop topology the agent runs in the same guest on the
// other port's device). Every opcode with its data verified on the far side
// (by hash, so no data crosses the control connection), and the remote error
// paths with the status on both ends. Without NTRDMA_AGENT they skip.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "verbs_util.hpp"

namespace {

using namespace ntv;  // NOLINT(google-build-using-namespace)

std::vector<std::string> Split(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> t;
    std::string w;
    while (in >> w) {
        t.push_back(w);
    }
    return t;
}

std::string GidHex(const ibv_gid& g) {
    char s[40];
    for (int i = 0; i < 16; i++) {
        std::snprintf(s + 2 * i, 3, "%02x", g.raw[i]);
    }
    return s;
}

// A buffer registered by the agent.
struct RBuf {
    int id = 0;
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint32_t lkey = 0;
    uint64_t a(size_t off = 0) const { return addr + off; }
};

// A receive completion on the agent's side.
struct RWc {
    uint64_t wr_id = 0;
    int status = -1;
    int opcode = -1;
    uint32_t byte_len = 0;
    uint32_t imm = 0;  // host order
    unsigned flags = 0;
    uint32_t qp = 0;
    uint32_t src = 0;
};

// How a test's QP pair is set up.
struct Spec {
    uint32_t wr = 32;
    uint32_t sge = 1;
    uint32_t inline_data = 0;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 1;  // the agent's (responder's): 0.01 ms
    unsigned access_b = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
};

class CrossHost : public ::testing::Test {
  protected:
    void SetUp() override {
        const char* agent = std::getenv("NTRDMA_AGENT");
        if (!agent || !*agent) {
            GTEST_SKIP() << "needs the verbs agent on the other host: NTRDMA_AGENT is not set";
        }
        ASSERT_NO_FATAL_FAILURE(Dial(agent));
        ctx_ = OpenDevice(DeviceName());
        ASSERT_NE(ctx_, nullptr) << "cannot open " << DeviceName();
        ASSERT_EQ(ibv_query_device(ctx_, &dev_), 0);
        pd_ = ibv_alloc_pd(ctx_);
        scq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
        ASSERT_NE(pd_, nullptr);
        ASSERT_NE(scq_, nullptr);
        ibv_port_attr p{};
        ASSERT_EQ(ibv_query_port(ctx_, 1, &p), 0);
        lid_ = p.lid;
        ASSERT_EQ(ibv_query_gid(ctx_, 1, GidIndex(), &gid_), 0);
    }

    void TearDown() override {
        if (qp_) {
            EXPECT_EQ(ibv_destroy_qp(qp_), 0);
        }
        for (auto& b : bufs_) {
            if (b->mr) {
                EXPECT_EQ(ibv_dereg_mr(b->mr), 0);
            }
        }
        if (scq_) {
            EXPECT_EQ(ibv_destroy_cq(scq_), 0);
        }
        if (pd_) {
            EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
        }
        if (ctx_) {
            EXPECT_EQ(ibv_close_device(ctx_), 0);
        }
        if (fd_ >= 0) {
            close(fd_);  // the agent frees this test's resources
        }
    }

    // Connect to the agent (it may still be starting: up to 10 s).
    void Dial(const std::string& where) {
        size_t colon = where.rfind(':');
        ASSERT_NE(colon, std::string::npos) << "NTRDMA_AGENT is ADDR:PORT";
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(std::atoi(where.c_str() + colon + 1)));
        ASSERT_EQ(inet_pton(AF_INET, where.substr(0, colon).c_str(), &a.sin_addr), 1);
        const auto deadline = Clock::now() + milliseconds(10000);
        while (true) {
            fd_ = socket(AF_INET, SOCK_STREAM, 0);
            ASSERT_GE(fd_, 0);
            if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
                break;
            }
            close(fd_);
            fd_ = -1;
            ASSERT_LT(Clock::now(), deadline) << "no agent at " << where;
            usleep(100000);
        }
        int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }

    // One command; the reply's words after "ok" (a failure recorded if not ok).
    std::vector<std::string> Ok(const std::string& cmd) {
        std::string line = cmd + "\n";
        if (send(fd_, line.data(), line.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(line.size())) {
            ADD_FAILURE() << "agent connection lost sending: " << cmd;
            return {};
        }
        std::string reply;
        char c = 0;
        while (recv(fd_, &c, 1, 0) == 1 && c != '\n') {
            reply += c;
        }
        std::vector<std::string> t = Split(reply);
        if (t.empty() || t[0] != "ok") {
            ADD_FAILURE() << "agent: " << cmd << " -> " << (reply.empty() ? "(closed)" : reply);
            return {};
        }
        t.erase(t.begin());
        return t;
    }

    // Our RC QP connected to the agent's. Failures recorded.
    void ConnectQp(const Spec& s = {}) {
        RcQpSpec q;
        q.send_cq = scq_;
        q.recv_cq = scq_;
        q.max_send_wr = q.max_recv_wr = s.wr;
        q.max_send_sge = q.max_recv_sge = s.sge;
        q.max_inline_data = s.inline_data;
        qp_ = MakeRcQp(pd_, q, &cap_);
        ASSERT_NE(qp_, nullptr) << std::strerror(errno);
        std::vector<std::string> r = Ok("qp " + std::to_string(s.wr) + " " + std::to_string(s.sge));
        ASSERT_EQ(r.size(), 3u);
        rqpn_ = static_cast<uint32_t>(std::stoul(r[0]));
        RtrSpec rtr;
        rtr.dest_qpn = rqpn_;
        rtr.dlid = static_cast<uint16_t>(std::stoul(r[1]));
        for (int i = 0; i < 16; i++) {
            rtr.dgid.raw[i] = static_cast<uint8_t>(std::stoul(r[2].substr(2 * i, 2), nullptr, 16));
        }
        ASSERT_EQ(QpToInit(qp_, kQpRemoteAccess | IBV_ACCESS_REMOTE_ATOMIC), 0);
        ASSERT_EQ(QpToRtr(qp_, rtr), 0);
        ASSERT_EQ(QpToRts(qp_, s.rnr_retry), 0);
        Ok("connect " + std::to_string(qp_->qp_num) + " " + std::to_string(lid_) + " " +
           GidHex(gid_) + " " + std::to_string(s.access_b) + " " + std::to_string(s.min_rnr_timer) +
           " 7");
    }

    Buf* Reg(size_t len, int access) {
        auto b = std::make_unique<Buf>();
        b->mem.assign(len, 0);
        b->mr = ibv_reg_mr(pd_, b->mem.data(), len, access);
        EXPECT_NE(b->mr, nullptr) << "ibv_reg_mr(" << len << "): " << std::strerror(errno);
        bufs_.push_back(std::move(b));
        return bufs_.back().get();
    }

    RBuf RReg(size_t len, int access, int pd = 0) {
        std::vector<std::string> r = Ok("reg " + std::to_string(len) + " " +
                                        std::to_string(access) + " " + std::to_string(pd));
        RBuf b;
        if (r.size() == 4) {
            b.id = std::stoi(r[0]);
            b.addr = std::stoull(r[1]);
            b.rkey = static_cast<uint32_t>(std::stoul(r[2]));
            b.lkey = static_cast<uint32_t>(std::stoul(r[3]));
        }
        return b;
    }

    static std::string Rng(const RBuf& b, size_t off, size_t len) {
        return std::to_string(b.id) + " " + std::to_string(off) + " " + std::to_string(len);
    }

    uint64_t RHash(const RBuf& b, size_t off, size_t len) {
        std::vector<std::string> r = Ok("hash " + Rng(b, off, len));
        return r.size() == 1 ? std::stoull(r[0], nullptr, 16) : 0;
    }

    uint64_t RGet64(const RBuf& b, size_t off) {
        std::vector<std::string> r = Ok("get " + Rng(b, off, 8));
        uint64_t v = 0;
        for (int i = 7; r.size() == 1 && i >= 0; i--) {  // little endian
            v = v << 8 | std::stoul(r[0].substr(2 * static_cast<size_t>(i), 2), nullptr, 16);
        }
        return v;
    }

    void RSet(const RBuf& b, size_t off, size_t len, int byte) {
        Ok("set " + Rng(b, off, len) + " " + std::to_string(byte));
    }

    void RRecv(uint64_t wr_id, const std::vector<std::string>& ranges) {
        std::string c = "recv " + std::to_string(wr_id) + " " + std::to_string(ranges.size());
        for (const std::string& r : ranges) {
            c += " " + r;
        }
        Ok(c);
    }

    std::vector<RWc> RPoll(size_t n, int ms = 5000) {
        std::vector<std::string> r = Ok("poll " + std::to_string(n) + " " + std::to_string(ms));
        std::vector<RWc> out;
        for (size_t i = 1; i < r.size(); i++) {
            RWc w;
            unsigned long long id = 0;
            if (std::sscanf(r[i].c_str(), "%llu,%d,%d,%u,%u,%u,%u,%u", &id, &w.status, &w.opcode,
                            &w.byte_len, &w.imm, &w.flags, &w.qp, &w.src) == 8) {
                w.wr_id = id;
                out.push_back(w);
            } else {
                ADD_FAILURE() << "bad completion from the agent: " << r[i];
            }
        }
        return out;
    }

    bool RWaitState(ibv_qp_state st, int ms = 3000) {
        const auto deadline = Clock::now() + milliseconds(ms);
        while (true) {
            std::vector<std::string> r = Ok("state");
            if (r.size() == 1 && std::stoi(r[0]) == st) {
                return true;
            }
            if (r.empty() || Clock::now() >= deadline) {
                return false;
            }
            usleep(20000);
        }
    }

    // One signalled WR; its completion here.
    ibv_wc PostAndWait(const Wr& w) {
        EXPECT_EQ(Post(qp_, w), 0);
        std::vector<ibv_wc> wc = PollCq(scq_, 1, 15000);
        EXPECT_EQ(wc.size(), 1u) << "no requester completion";
        return wc.empty() ? ibv_wc{} : wc[0];
    }

    // The WR fails with st here; both QPs end in ERR.
    void ExpectRemoteError(const Wr& w, ibv_wc_status st) {
        ibv_wc wc = PostAndWait(w);
        EXPECT_TRUE(StatusMatches(ctx_, wc.status, st))
            << "got " << ibv_wc_status_str(wc.status) << ", expected " << ibv_wc_status_str(st);
        EXPECT_TRUE(WaitQpState(qp_, IBV_QPS_ERR)) << "requester state " << QpState(qp_);
        EXPECT_TRUE(RWaitState(IBV_QPS_ERR)) << "the responder's QP is not in ERR";
    }

    // 64 bytes from a fresh local buffer to raddr/rkey: REM_ACCESS_ERR.
    void ExpectAccessError(ibv_wr_opcode op, uint64_t raddr, uint32_t rkey) {
        Buf* src = Reg(64, kLocal);
        ASSERT_FALSE(HasFailure());
        Wr w;
        w.op = op;
        w.sge = {src->sge(0, 64)};
        w.raddr = raddr;
        w.rkey = rkey;
        ExpectRemoteError(w, IBV_WC_REM_ACCESS_ERR);
    }

    static uint64_t LocalHash(const uint8_t* p, size_t n) { return Hash(p, n); }
    static uint64_t GuardHash(size_t n) {
        std::vector<uint8_t> g(n, 0xEE);
        return Hash(g.data(), n);
    }

    int fd_ = -1;
    ibv_context* ctx_ = nullptr;
    ibv_device_attr dev_{};
    ibv_pd* pd_ = nullptr;
    ibv_cq* scq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    ibv_qp_cap cap_{};
    uint32_t rqpn_ = 0;
    uint16_t lid_ = 0;
    ibv_gid gid_{};
    std::vector<std::unique_ptr<Buf>> bufs_;
};

TEST_F(CrossHost, SendRecvSizesDataVerifiedOnTheFarSide) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    uint64_t id = 100;
    for (uint32_t len : {1u, 4096u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(len, kLocal);
        RBuf dst = RReg(len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len);
        RSet(dst, 0, len + 64, 0xEE);
        RRecv(id, {Rng(dst, 0, len + 64)});
        Wr w;
        w.wr_id = id + 1;
        w.sge = {src->sge(0, len)};
        ibv_wc s = PostAndWait(w);
        EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
        EXPECT_EQ(s.opcode, IBV_WC_SEND);
        EXPECT_EQ(s.wr_id, id + 1);
        std::vector<RWc> r = RPoll(1);
        ASSERT_EQ(r.size(), 1u) << "no responder completion";
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(r[0].wr_id, id);
        EXPECT_EQ(r[0].byte_len, len);
        EXPECT_EQ(r[0].qp, rqpn_);
        EXPECT_EQ(r[0].src, qp_->qp_num);
        EXPECT_EQ(r[0].flags & IBV_WC_WITH_IMM, 0u);
        EXPECT_EQ(RHash(dst, 0, len), LocalHash(src->p(), len)) << "data differs";
        EXPECT_EQ(RHash(dst, len, 64), GuardHash(64)) << "written past the message";
        id += 2;
    }
}

TEST_F(CrossHost, SendWithImmAndSolicited) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    Buf* src = Reg(300, kLocal);
    RBuf dst = RReg(512, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 300, 9);
    RRecv(1, {Rng(dst, 0, 512)});
    Wr w;
    w.op = IBV_WR_SEND_WITH_IMM;
    w.flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    w.imm = htonl(0x0BADF00D);
    w.sge = {src->sge(0, 300)};
    ibv_wc s = PostAndWait(w);
    EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
    EXPECT_NE(r[0].flags & IBV_WC_WITH_IMM, 0u);
    EXPECT_EQ(r[0].imm, 0x0BADF00Du);
    EXPECT_EQ(r[0].byte_len, 300u);
    EXPECT_EQ(RHash(dst, 0, 300), LocalHash(src->p(), 300));
}

TEST_F(CrossHost, RdmaWriteSizesWithinTheTargetOnly) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf rb = RReg(64, kLocal);
    ASSERT_FALSE(HasFailure());
    RRecv(77, {Rng(rb, 0, 64)});  // a WRITE must not consume it
    for (uint32_t len : {1u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        Buf* src = Reg(len, kLocal);
        RBuf dst = RReg(len + 128, kRemoteAll);
        ASSERT_FALSE(HasFailure());
        Fill(src->p(), len, len + 1);
        RSet(dst, 0, len + 128, 0xEE);
        Wr w;
        w.op = IBV_WR_RDMA_WRITE;
        w.wr_id = len;
        w.sge = {src->sge(0, len)};
        w.raddr = dst.a(64);
        w.rkey = dst.rkey;
        ibv_wc s = PostAndWait(w);
        EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
        EXPECT_EQ(s.opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(RHash(dst, 64, len), LocalHash(src->p(), len)) << "data differs";
        EXPECT_EQ(RHash(dst, 0, 64), GuardHash(64)) << "written before the target";
        EXPECT_EQ(RHash(dst, 64 + len, 64), GuardHash(64)) << "written past the target";
    }
    EXPECT_EQ(RPoll(1, 100).size(), 0u) << "a WRITE consumed a receive";
}

TEST_F(CrossHost, RdmaWriteWithImmConsumesOneReceive) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    const uint32_t len = 70000;  // two segments
    Buf* src = Reg(len, kLocal);
    RBuf dst = RReg(len, kRemoteAll);
    RBuf rb = RReg(64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), len, 3);
    RSet(rb, 0, 64, 0xEE);
    RRecv(5, {Rng(rb, 0, 64)});
    RRecv(6, {Rng(rb, 0, 64)});
    Wr w;
    w.op = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm = htonl(0xCAFEF00D);
    w.sge = {src->sge(0, len)};
    w.raddr = dst.a();
    w.rkey = dst.rkey;
    ibv_wc s = PostAndWait(w);
    EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u) << "WRITE_WITH_IMM consumed no receive";
    EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(r[0].wr_id, 5u);
    EXPECT_EQ(r[0].byte_len, len);
    EXPECT_EQ(r[0].imm, 0xCAFEF00Du);
    EXPECT_EQ(RHash(dst, 0, len), LocalHash(src->p(), len));
    EXPECT_EQ(RHash(rb, 0, 64), GuardHash(64)) << "the receive buffer was written";
    EXPECT_EQ(RPoll(1, 100).size(), 0u) << "more than one receive consumed";
}

TEST_F(CrossHost, RdmaReadSizes) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    for (uint32_t len : {8u, 65536u, 1u << 20}) {
        SCOPED_TRACE("len " + std::to_string(len));
        RBuf src = RReg(len, kRemoteAll);
        Buf* dst = Reg(len + 64, kLocal);
        ASSERT_FALSE(HasFailure());
        Ok("fill " + Rng(src, 0, len) + " " + std::to_string(len + 2));
        std::vector<uint8_t> want(len);
        Fill(want.data(), len, len + 2);
        std::memset(dst->p(), 0xEE, len + 64);
        Wr w;
        w.op = IBV_WR_RDMA_READ;
        w.wr_id = len;
        w.sge = {dst->sge(0, len)};
        w.raddr = src.a();
        w.rkey = src.rkey;
        ibv_wc s = PostAndWait(w);
        EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
        EXPECT_EQ(s.opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(FirstDiff(want.data(), dst->p(), len), -1);
        for (size_t i = len; i < len + 64; i++) {
            ASSERT_EQ(dst->p()[i], 0xEE) << "read past the local SGE at " << i;
        }
    }
}

TEST_F(CrossHost, AtomicsOnTheFarSide) {
    if (dev_.atomic_cap == IBV_ATOMIC_NONE) {
        GTEST_SKIP() << "no atomics (atomic_cap NONE)";
    }
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf t = RReg(64, kRemoteAll);
    Buf* old = Reg(8, kLocal);
    ASSERT_FALSE(HasFailure());
    auto atomic = [&](ibv_wr_opcode op, uint64_t cmp_add, uint64_t swap) {
        Wr w;
        w.op = op;
        w.sge = {old->sge(0, 8)};
        w.raddr = t.a(8);
        w.rkey = t.rkey;
        w.compare_add = cmp_add;
        w.swap = swap;
        ibv_wc s = PostAndWait(w);
        EXPECT_EQ(s.status, IBV_WC_SUCCESS) << WcStr(s);
        uint64_t v = 0;
        std::memcpy(&v, old->p(), 8);
        return v;
    };
    EXPECT_EQ(atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 0, 0x1122334455667788ull), 0u);
    EXPECT_EQ(RGet64(t, 8), 0x1122334455667788ull);
    EXPECT_EQ(atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 0x10, 0), 0x1122334455667788ull);
    EXPECT_EQ(RGet64(t, 8), 0x1122334455667798ull);
    EXPECT_EQ(atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 5, 6), 0x1122334455667798ull) << "compare failed";
    EXPECT_EQ(RGet64(t, 8), 0x1122334455667798ull) << "swapped although the compare failed";
    EXPECT_EQ(RGet64(t, 0), 0u) << "the word before was touched";
    EXPECT_EQ(RGet64(t, 16), 0u) << "the word after was touched";
}

TEST_F(CrossHost, InlineSend) {
    Spec s;
    s.inline_data = 64;
    ASSERT_NO_FATAL_FAILURE(ConnectQp(s));
    ASSERT_GE(cap_.max_inline_data, 64u);
    const uint32_t len = cap_.max_inline_data;
    std::vector<uint8_t> src(len);  // not registered: inline needs no lkey
    Fill(src.data(), len, 11);
    RBuf dst = RReg(len, kLocal);
    ASSERT_FALSE(HasFailure());
    RRecv(3, {Rng(dst, 0, len)});
    Wr w;
    w.flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    w.sge = {ibv_sge{reinterpret_cast<uintptr_t>(src.data()), len, 0}};
    ibv_wc c = PostAndWait(w);
    Fill(src.data(), len, 12);  // reusable at once: the far side must hold the old bytes
    EXPECT_EQ(c.status, IBV_WC_SUCCESS) << WcStr(c);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].byte_len, len);
    std::vector<uint8_t> want(len);
    Fill(want.data(), len, 11);
    EXPECT_EQ(RHash(dst, 0, len), LocalHash(want.data(), len));
}

TEST_F(CrossHost, SixteenSgeGatherAndScatter) {
    Spec s;
    s.sge = 16;
    ASSERT_NO_FATAL_FAILURE(ConnectQp(s));
    Buf* src = Reg(16 * 4096, kLocal);
    RBuf dst = RReg(16 * 4096, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 16 * 4096, 21);
    RSet(dst, 0, 16 * 4096, 0xEE);
    // Gather: piece i is 100 + 37 i bytes at 4096 i + i. Scatter them into
    // 16 receive SGEs of other sizes; the far side holds the concatenation.
    Wr w;
    std::vector<uint8_t> want;
    for (uint32_t i = 0; i < 16; i++) {
        uint32_t off = 4096 * i + i, len = 100 + 37 * i;
        w.sge.push_back(src->sge(off, len));
        want.insert(want.end(), src->p(off), src->p(off) + len);
    }
    std::vector<std::string> rs;
    uint32_t roff = 0;
    for (uint32_t i = 0; i < 16; i++) {
        uint32_t len = 500 - 13 * i;
        rs.push_back(Rng(dst, 4096 * i, len));
        roff += len;
    }
    ASSERT_GE(roff, want.size());
    RRecv(9, rs);
    ibv_wc c = PostAndWait(w);
    EXPECT_EQ(c.status, IBV_WC_SUCCESS) << WcStr(c);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].byte_len, want.size());
    // Walk the receive SGEs as the responder fills them.
    size_t done = 0;
    for (uint32_t i = 0; i < 16 && done < want.size(); i++) {
        size_t len = std::min<size_t>(500 - 13 * i, want.size() - done);
        EXPECT_EQ(RHash(dst, 4096 * i, len), LocalHash(want.data() + done, len)) << "SGE " << i;
        done += len;
    }
}

// ---- remote errors: status on both ends, both QPs to ERR ----

TEST_F(CrossHost, BadRkeyIsRemoteAccessError) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf dst = RReg(64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    ExpectAccessError(IBV_WR_RDMA_WRITE, dst.a(), dst.rkey ^ 0x80);  // another tag
    EXPECT_EQ(RHash(dst, 0, 64), Hash(std::vector<uint8_t>(64, 0).data(), 64))
        << "the target was written";
}

TEST_F(CrossHost, RemoteRangeOverflowIsRemoteAccessError) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf dst = RReg(4096, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    ExpectAccessError(IBV_WR_RDMA_READ, dst.a(4096 - 32), dst.rkey);  // 32 bytes past the MR
}

TEST_F(CrossHost, MissingRemoteWriteAccessIsRemoteAccessError) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf dst = RReg(64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_FALSE(HasFailure());
    ExpectAccessError(IBV_WR_RDMA_WRITE, dst.a(), dst.rkey);
}

TEST_F(CrossHost, RkeyOfAnotherPdIsRemoteAccessError) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf dst = RReg(64, kRemoteAll, 1);  // the agent's second PD
    ASSERT_FALSE(HasFailure());
    ExpectAccessError(IBV_WR_RDMA_WRITE, dst.a(), dst.rkey);
}

TEST_F(CrossHost, DeregisteredRemoteMrIsRemoteAccessError) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    RBuf dst = RReg(64, kRemoteAll);
    ASSERT_FALSE(HasFailure());
    Ok("dereg " + std::to_string(dst.id));
    ExpectAccessError(IBV_WR_RDMA_WRITE, dst.a(), dst.rkey);
}

TEST_F(CrossHost, ReceiveTooSmallErrorsOnBothEnds) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());
    Buf* src = Reg(200, kLocal);
    RBuf dst = RReg(100, kLocal);
    ASSERT_FALSE(HasFailure());
    RRecv(4, {Rng(dst, 0, 100)});
    Wr w;
    w.sge = {src->sge(0, 200)};
    ExpectRemoteError(w, IBV_WC_REM_INV_REQ_ERR);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u) << "the responder's receive did not complete";
    EXPECT_EQ(r[0].wr_id, 4u);
    EXPECT_TRUE(r[0].status == IBV_WC_LOC_LEN_ERR) << "responder status " << r[0].status;
}

TEST_F(CrossHost, RnrRetryExhausted) {
    Spec s;
    s.rnr_retry = 2;
    ASSERT_NO_FATAL_FAILURE(ConnectQp(s));
    Buf* src = Reg(64, kLocal);
    ASSERT_FALSE(HasFailure());
    Wr w;
    w.sge = {src->sge(0, 64)};
    ibv_wc c = PostAndWait(w);
    EXPECT_EQ(c.status, IBV_WC_RNR_RETRY_EXC_ERR) << WcStr(c);
    EXPECT_TRUE(WaitQpState(qp_, IBV_QPS_ERR));
}

TEST_F(CrossHost, RnrRetriedUntilAReceiveComes) {
    ASSERT_NO_FATAL_FAILURE(ConnectQp());  // rnr_retry 7: for ever
    Buf* src = Reg(64, kLocal);
    RBuf dst = RReg(64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 64, 5);
    Wr w;
    w.sge = {src->sge(0, 64)};
    ASSERT_EQ(Post(qp_, w), 0);
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(PollCq(scq_, 1, 10).size(), 0u) << "completed without a receive";
    RRecv(8, {Rng(dst, 0, 64)});
    std::vector<ibv_wc> wc = PollCq(scq_, 1, 15000);
    ASSERT_EQ(wc.size(), 1u) << "the send did not complete after the receive came";
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    std::vector<RWc> r = RPoll(1);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].wr_id, 8u);
    EXPECT_EQ(RHash(dst, 0, 64), LocalHash(src->p(), 64));
}

}  // namespace
