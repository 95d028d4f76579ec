// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Helpers shared by the verbs conformance suite and its agent (the far end
// of the cross-host tests): device selection, RC QP set-up, posting,
// polling, test patterns.
#ifndef NTRDMA_VERBS_UTIL_HPP
#define NTRDMA_VERBS_UTIL_HPP

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace ntv {

// A data path counter of @dev's port 1 (rdma statistic), or -1.
inline long long HwCounter(const std::string& dev, const char* name) {
    std::ifstream f("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/" + name);
    long long v = -1;
    f >> v;
    return f ? v : -1;
}

inline bool DirectPlacementOn() {
    std::ifstream f("/sys/module/ntrdma/parameters/direct_placement");
    char c = 'N';
    f >> c;
    return c == 'Y' || c == '1';
}

// The first line of ntrdma's debugfs info files (one per device) that
// @match accepts, and its directory; "" for both when none does (or
// debugfs is unreadable: not root).
inline std::pair<std::string, std::string> InfoLine(
    const std::function<bool(const std::string&)>& match) {
    std::error_code ec;
    for (const auto& d : std::filesystem::directory_iterator("/sys/kernel/debug/ntrdma", ec)) {
        std::ifstream f(d.path() / "info");
        for (std::string l; std::getline(f, l);) {
            if (match(l)) {
                return {d.path().string(), l};
            }
        }
    }
    return {"", ""};
}

// The first of ntrdma's debugfs directories whose info has the line @line.
inline std::string InfoDirWith(const std::string& line) {
    return InfoLine([&line](const std::string& l) { return l == line; }).first;
}

// Windowed mode (an NTB whose window cannot map the peer's RAM): nothing
// is placed directly.
inline bool WindowedMode() { return !InfoDirWith("mode: windowed").empty(); }

inline std::string DeviceName() {
    const char* env = std::getenv("NTRDMA_IBDEV");
    return env && *env ? env : "ntrdma0";
}

inline int GidIndex() {
    const char* env = std::getenv("NTRDMA_GID_INDEX");
    return env && *env ? std::atoi(env) : 0;
}

inline ibv_context* OpenDevice(const std::string& name) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) {
        return nullptr;
    }
    ibv_context* ctx = nullptr;
    for (int i = 0; i < n && !ctx; i++) {
        if (name == ibv_get_device_name(list[i])) {
            ctx = ibv_open_device(list[i]);
        }
    }
    ibv_free_device_list(list);
    return ctx;
}

inline bool IsNtrdma(ibv_context* ctx) {
    return std::string(ibv_get_device_name(ctx->device)).starts_with("ntrdma");
}

// ---- RC QP set-up, shared by the fixtures ----

struct RcQpSpec {
    ibv_qp_type type = IBV_QPT_RC;  // or IBV_QPT_UC
    ibv_cq* send_cq = nullptr;
    ibv_cq* recv_cq = nullptr;
    ibv_srq* srq = nullptr;  // receives from the SRQ: no RQ
    uint32_t max_send_wr = 16;
    uint32_t max_recv_wr = 16;
    uint32_t max_send_sge = 1;
    uint32_t max_recv_sge = 1;
    uint32_t max_inline_data = 0;
    bool sq_sig_all = false;
};

// One RC (or UC) QP; *cap (if given) gets what the device granted.
inline ibv_qp* MakeRcQp(ibv_pd* pd, const RcQpSpec& s, ibv_qp_cap* cap = nullptr) {
    ibv_qp_init_attr a{};
    a.send_cq = s.send_cq;
    a.recv_cq = s.recv_cq;
    a.srq = s.srq;
    a.qp_type = s.type;
    a.sq_sig_all = s.sq_sig_all ? 1 : 0;
    a.cap.max_send_wr = s.max_send_wr;
    a.cap.max_recv_wr = s.srq ? 0 : s.max_recv_wr;
    a.cap.max_send_sge = s.max_send_sge;
    a.cap.max_recv_sge = s.srq ? 0 : s.max_recv_sge;
    a.cap.max_inline_data = s.max_inline_data;
    ibv_qp* qp = ibv_create_qp(pd, &a);
    if (qp && cap) {
        *cap = a.cap;
    }
    return qp;
}

constexpr unsigned kQpRemoteAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

inline int QpToInit(ibv_qp* qp, unsigned access = kQpRemoteAccess) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = access;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

// RTR with a RoCE address vector towards dgid.
struct RtrSpec {
    uint32_t dest_qpn = 0;
    uint16_t dlid = 0;  // IB link layer: the peer's LID (0 on RoCE)
    ibv_gid dgid{};
    int mask_drop = 0;  // attributes left out (to test their absence)
    uint8_t min_rnr_timer = 12;
    uint8_t max_dest_rd_atomic = 1;
    uint32_t rq_psn = 0;
};

inline int QpToRtr(ibv_qp* qp, const RtrSpec& s) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = s.dest_qpn;
    a.rq_psn = s.rq_psn;
    a.max_dest_rd_atomic = s.max_dest_rd_atomic;
    a.min_rnr_timer = s.min_rnr_timer;
    a.ah_attr.is_global = 1;
    a.ah_attr.dlid = s.dlid;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.sgid_index = GidIndex();
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.dgid = s.dgid;
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    return ibv_modify_qp(qp, &a, mask & ~s.mask_drop);
}

struct RtsSpec {
    uint8_t timeout = 14;  // local ACK timeout: 4.096 us * 2^14 = 67 ms
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t max_rd_atomic = 1;
    uint32_t sq_psn = 0;
};

inline int QpToRts(ibv_qp* qp, const RtsSpec& s) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = s.timeout;
    a.retry_cnt = s.retry_cnt;
    a.rnr_retry = s.rnr_retry;
    a.sq_psn = s.sq_psn;
    a.max_rd_atomic = s.max_rd_atomic;
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

inline int QpToRts(ibv_qp* qp, uint8_t rnr_retry = 7, uint8_t max_rd_atomic = 1) {
    RtsSpec s;
    s.rnr_retry = rnr_retry;
    s.max_rd_atomic = max_rd_atomic;
    return QpToRts(qp, s);
}

inline int QpToState(ibv_qp* qp, ibv_qp_state st) {
    ibv_qp_attr a{};
    a.qp_state = st;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

inline ibv_qp_state QpState(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Poll cq until n completions or timeout_ms; returns what came (short on
// timeout). Sleeps between empty polls, no busy wait.
inline std::vector<ibv_wc> PollCq(ibv_cq* cq, size_t n, int timeout_ms = 5000) {
    std::vector<ibv_wc> out;
    const auto deadline = Clock::now() + milliseconds(timeout_ms);
    while (out.size() < n) {
        ibv_wc wc[16];
        int want = static_cast<int>(std::min<size_t>(16, n - out.size()));
        int got = ibv_poll_cq(cq, want, wc);
        if (got < 0) {
            ADD_FAILURE() << "ibv_poll_cq returned " << got;
            break;
        }
        out.insert(out.end(), wc, wc + got);
        if (got == 0) {
            if (Clock::now() >= deadline) {
                break;
            }
            usleep(500);
        }
    }
    return out;
}

// Everything that arrives in ms (expected: nothing).
inline std::vector<ibv_wc> Drain(ibv_cq* cq, int ms) {
    std::vector<ibv_wc> all = PollCq(cq, 1000000, ms);
    return all;
}

inline std::string WcStr(const ibv_wc& wc) {
    return std::string("wr_id ") + std::to_string(wc.wr_id) + " status " +
           ibv_wc_status_str(wc.status) + " opcode " + std::to_string(wc.opcode) + " byte_len " +
           std::to_string(wc.byte_len) + " qp " + std::to_string(wc.qp_num);
}

// Deterministic bytes that differ per position and per seed.
inline void Fill(uint8_t* p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345;
        p[i] = static_cast<uint8_t>(x >> 16);
    }
}

// First differing offset, or -1.
inline long FirstDiff(const uint8_t* a, const uint8_t* b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return static_cast<long>(i);
        }
    }
    return -1;
}

// A registered buffer.
struct Buf {
    std::vector<uint8_t> mem;
    ibv_mr* mr = nullptr;
    uint8_t* p(size_t off = 0) { return mem.data() + off; }
    uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(mem.data()) + off; }
    ibv_sge sge(size_t off, uint32_t len) const { return ibv_sge{addr(off), len, mr->lkey}; }
};

constexpr int kLocal = IBV_ACCESS_LOCAL_WRITE;
constexpr int kRemoteAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                           IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

// A send work request, built by Post.
struct Wr {
    ibv_wr_opcode op = IBV_WR_SEND;
    std::vector<ibv_sge> sge;
    unsigned flags = IBV_SEND_SIGNALED;
    uint64_t wr_id = 1;
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;  // network byte order, as ibv_send_wr has it
    uint64_t compare_add = 0;
    uint64_t swap = 0;
};

// A signalled SEND of @sge.
inline Wr SendWr(uint64_t wr_id, ibv_sge sge) {
    Wr w;
    w.wr_id = wr_id;
    w.sge = {sge};
    return w;
}

// A signalled RDMA WRITE of @sge to the start of @dst (at @dst_off).
inline Wr WriteWr(uint64_t wr_id, ibv_sge sge, const Buf* dst, size_t dst_off = 0) {
    Wr w;
    w.op = IBV_WR_RDMA_WRITE;
    w.wr_id = wr_id;
    w.sge = {sge};
    w.raddr = dst->addr(dst_off);
    w.rkey = dst->mr->rkey;
    return w;
}

// A signalled RDMA READ of the start of @src into @sge.
inline Wr ReadWr(uint64_t wr_id, ibv_sge sge, const Buf* src) {
    Wr w = WriteWr(wr_id, sge, src);
    w.op = IBV_WR_RDMA_READ;
    return w;
}

inline void Build(const Wr& w, ibv_send_wr* wr) {
    *wr = ibv_send_wr{};
    wr->wr_id = w.wr_id;
    wr->sg_list = const_cast<ibv_sge*>(w.sge.data());
    wr->num_sge = static_cast<int>(w.sge.size());
    wr->opcode = w.op;
    wr->send_flags = w.flags;
    wr->imm_data = w.imm;
    if (w.op == IBV_WR_ATOMIC_CMP_AND_SWP || w.op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        wr->wr.atomic.remote_addr = w.raddr;
        wr->wr.atomic.rkey = w.rkey;
        wr->wr.atomic.compare_add = w.compare_add;
        wr->wr.atomic.swap = w.swap;
    } else {
        wr->wr.rdma.remote_addr = w.raddr;
        wr->wr.rdma.rkey = w.rkey;
    }
}

// Post a chain of WRs in one ibv_post_send; returns its result and, in
// *bad_index, the position of the WR it stopped at (the chain's length if none).
inline int PostChain(ibv_qp* qp, const std::vector<Wr>& ws, size_t* bad_index = nullptr) {
    std::vector<ibv_send_wr> wrs(ws.size());
    for (size_t i = 0; i < ws.size(); i++) {
        Build(ws[i], &wrs[i]);
        wrs[i].next = i + 1 < ws.size() ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp, wrs.data(), &bad);
    if (bad_index) {
        *bad_index = bad ? static_cast<size_t>(bad - wrs.data()) : ws.size();
    }
    return rc;
}

inline int Post(ibv_qp* qp, const Wr& w) { return PostChain(qp, {w}); }

inline int PostRecv(ibv_qp* qp, uint64_t wr_id, std::vector<ibv_sge> sge) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sge.data();
    wr.num_sge = static_cast<int>(sge.size());
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(qp, &wr, &bad);
}

// A receive WR of the one SGE *sge (which must outlive it).
inline ibv_recv_wr RecvWr(ibv_sge* sge) {
    ibv_recv_wr wr{};
    wr.sg_list = sge;
    wr.num_sge = 1;
    return wr;
}

inline int PostSrqRecv(ibv_srq* srq, uint64_t wr_id, std::vector<ibv_sge> sge) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sge.data();
    wr.num_sge = static_cast<int>(sge.size());
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(srq, &wr, &bad);
}

// Wait up to ms for the QP to reach st (a device may post the error
// completion a moment before it records the state).
inline bool WaitQpState(ibv_qp* qp, ibv_qp_state st, int ms = 2000) {
    const auto deadline = Clock::now() + milliseconds(ms);
    while (QpState(qp) != st) {
        if (Clock::now() >= deadline) {
            return false;
        }
        usleep(2000);
    }
    return true;
}

// rxe, which these tests were checked against, reports a few errors with
// another status than the one the IB spec names (an invalid lkey and a
// receive too small: "local QP operation error", and the requester then sees
// "remote operation error"). Other devices may give that alternative (a note
// is printed); ntrdma must give the spec's status.
inline bool StatusMatches(ibv_context* ctx, ibv_wc_status got, ibv_wc_status want) {
    if (got == want) {
        return true;
    }
    ibv_wc_status alt = want;
    switch (want) {
        case IBV_WC_LOC_PROT_ERR:
        case IBV_WC_LOC_LEN_ERR:
            alt = IBV_WC_LOC_QP_OP_ERR;
            break;
        case IBV_WC_REM_INV_REQ_ERR:
            alt = IBV_WC_REM_OP_ERR;
            break;
        default:
            break;
    }
    if (IsNtrdma(ctx) || got != alt) {
        return false;
    }
    std::cout << "[ NOTE     ] " << ibv_get_device_name(ctx->device) << " gave "
              << ibv_wc_status_str(got) << " where the spec says " << ibv_wc_status_str(want)
              << "\n";
    return true;
}

// FNV-1a over n bytes: compares buffers on two hosts without moving them.
inline uint64_t Hash(const uint8_t* p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

}  // namespace ntv

#endif  // NTRDMA_VERBS_UTIL_HPP
