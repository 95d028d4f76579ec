// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The far end of the cross-host verbs tests (CrossHost in cross_test.cpp):
// runs on the responder's host, opens an RDMA device there and does what
// the test asks over a TCP connection, one text command per line:
//
//   qp WR SGE               -> ok QPN LID GID(hex)
//   connect QPN LID GID ACCESS MIN_RNR_TIMER RNR_RETRY -> ok
//   reg LEN ACCESS PD(0|1)  -> ok ID ADDR RKEY LKEY   (zeroed memory)
//   dereg ID                -> ok
//   fill ID OFF LEN SEED    -> ok     (ntv::Fill)
//   set ID OFF LEN BYTE     -> ok
//   hash ID OFF LEN         -> ok HASH (ntv::Hash, hex)
//   get ID OFF LEN          -> ok BYTES (hex, LEN <= 256)
//   recv WRID N {ID OFF LEN}*N -> ok | err RC
//   poll N TIMEOUT_MS       -> ok COUNT {WRID,STATUS,OPCODE,LEN,IMM,FLAGS,QP,SRC}*
//   state                   -> ok QP_STATE
//   error                   -> ok      (QP to ERR)
//
// Every connection is one test: its resources go when it closes. Every
// ID, offset and length from the wire is checked before use.
//
// Usage: ntrdma_verbs_agent DEVICE PORT [BIND_ADDR]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "verbs_util.hpp"

namespace {

using namespace ntv;  // NOLINT(google-build-using-namespace)

std::string Hex(const uint8_t* p, size_t n) {
    static const char kDigits[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) {
        s += kDigits[p[i] >> 4];
        s += kDigits[p[i] & 15];
    }
    return s;
}

bool ParseGid(const std::string& s, ibv_gid* gid) {
    if (s.size() != 32) {
        return false;
    }
    for (size_t i = 0; i < 16; i++) {
        unsigned v = 0;
        if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) {
            return false;
        }
        gid->raw[i] = static_cast<uint8_t>(v);
    }
    return true;
}

// One test's resources on this host.
class Session {
  public:
    explicit Session(const std::string& dev) : dev_(dev) {}

    ~Session() {
        if (qp_) {
            ibv_destroy_qp(qp_);
        }
        for (auto& [id, b] : bufs_) {
            if (b->mr) {
                ibv_dereg_mr(b->mr);
            }
        }
        for (ibv_cq* cq : {scq_, rcq_}) {
            if (cq) {
                ibv_destroy_cq(cq);
            }
        }
        for (ibv_pd* pd : pd_) {
            if (pd) {
                ibv_dealloc_pd(pd);
            }
        }
        if (ctx_) {
            ibv_close_device(ctx_);
        }
    }

    std::string Open() {
        ctx_ = OpenDevice(dev_);
        if (!ctx_) {
            return "cannot open " + dev_;
        }
        pd_[0] = ibv_alloc_pd(ctx_);
        pd_[1] = ibv_alloc_pd(ctx_);
        scq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
        rcq_ = ibv_create_cq(ctx_, 256, nullptr, nullptr, 0);
        if (!pd_[0] || !pd_[1] || !scq_ || !rcq_) {
            return std::string("set-up: ") + std::strerror(errno);
        }
        ibv_port_attr p{};
        if (ibv_query_port(ctx_, 1, &p) || ibv_query_gid(ctx_, 1, GidIndex(), &gid_)) {
            return "cannot query port 1";
        }
        lid_ = p.lid;
        return "";
    }

    std::string Do(const std::string& line) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "qp") {
            return Qp(in);
        }
        if (cmd == "connect") {
            return Connect(in);
        }
        if (cmd == "reg") {
            return Reg(in);
        }
        if (cmd == "recv") {
            return Recv(in);
        }
        if (cmd == "poll") {
            return Poll(in);
        }
        if (cmd == "state" || cmd == "error") {
            if (!qp_) {
                return "err no qp";
            }
            if (cmd == "error") {
                return QpToState(qp_, IBV_QPS_ERR) ? "err modify" : "ok";
            }
            ibv_qp_attr a{};
            ibv_qp_init_attr init{};
            if (ibv_query_qp(qp_, &a, IBV_QP_STATE, &init)) {
                return "err query";
            }
            return "ok " + std::to_string(a.qp_state);
        }
        return Mem(cmd, in);
    }

  private:
    struct ABuf {
        std::vector<uint8_t> mem;
        ibv_mr* mr = nullptr;
    };

    std::string Qp(std::istringstream& in) {
        uint32_t wr = 0, sge = 0;
        if (!(in >> wr >> sge) || qp_) {
            return "err usage: qp WR SGE (once)";
        }
        RcQpSpec s;
        s.send_cq = scq_;
        s.recv_cq = rcq_;
        s.max_send_wr = s.max_recv_wr = wr;
        s.max_send_sge = s.max_recv_sge = sge;
        qp_ = MakeRcQp(pd_[0], s);
        if (!qp_) {
            return std::string("err create_qp: ") + std::strerror(errno);
        }
        return "ok " + std::to_string(qp_->qp_num) + " " + std::to_string(lid_) + " " +
               Hex(gid_.raw, 16);
    }

    std::string Connect(std::istringstream& in) {
        RtrSpec r;
        std::string gid;
        unsigned access = 0, timer = 0, retry = 0;
        if (!qp_ || !(in >> r.dest_qpn >> r.dlid >> gid >> access >> timer >> retry) ||
            !ParseGid(gid, &r.dgid) || timer > 31 || retry > 7) {
            return "err usage: connect QPN LID GID ACCESS TIMER RETRY";
        }
        r.min_rnr_timer = static_cast<uint8_t>(timer);
        if (QpToInit(qp_, access) || QpToRtr(qp_, r) || QpToRts(qp_, static_cast<uint8_t>(retry))) {
            return std::string("err modify_qp: ") + std::strerror(errno);
        }
        return "ok";
    }

    std::string Reg(std::istringstream& in) {
        size_t len = 0;
        int access = 0, pd = 0;
        if (!(in >> len >> access >> pd) || len == 0 || len > (64u << 20) || pd < 0 || pd > 1) {
            return "err usage: reg LEN(1..64M) ACCESS PD(0|1)";
        }
        auto b = std::make_unique<ABuf>();
        b->mem.assign(len, 0);
        b->mr = ibv_reg_mr(pd_[pd], b->mem.data(), len, access);
        if (!b->mr) {
            return std::string("err reg_mr: ") + std::strerror(errno);
        }
        std::ostringstream out;
        out << "ok " << next_id_ << " " << reinterpret_cast<uintptr_t>(b->mem.data()) << " "
            << b->mr->rkey << " " << b->mr->lkey;
        bufs_[next_id_++] = std::move(b);
        return out.str();
    }

    // The buffer and range named on the wire, or null.
    ABuf* Range(std::istringstream& in, size_t* off, size_t* len) {
        int id = -1;
        if (!(in >> id >> *off >> *len)) {
            return nullptr;
        }
        auto it = bufs_.find(id);
        if (it == bufs_.end() || *off > it->second->mem.size() ||
            *len > it->second->mem.size() - *off) {
            return nullptr;
        }
        return it->second.get();
    }

    std::string Mem(const std::string& cmd, std::istringstream& in) {
        if (cmd == "dereg") {
            int id = -1;
            auto it = (in >> id) ? bufs_.find(id) : bufs_.end();
            if (it == bufs_.end() || !it->second->mr) {
                return "err no such MR";
            }
            int rc = ibv_dereg_mr(it->second->mr);
            it->second->mr = nullptr;
            return rc ? "err dereg_mr" : "ok";
        }
        size_t off = 0, len = 0;
        ABuf* b = Range(in, &off, &len);
        if (!b) {
            return "err bad buffer or range";
        }
        uint8_t* p = b->mem.data() + off;
        if (cmd == "fill") {
            uint32_t seed = 0;
            if (!(in >> seed)) {
                return "err usage: fill ID OFF LEN SEED";
            }
            Fill(p, len, seed);
            return "ok";
        }
        if (cmd == "set") {
            unsigned v = 0;
            if (!(in >> v) || v > 255) {
                return "err usage: set ID OFF LEN BYTE";
            }
            std::memset(p, static_cast<int>(v), len);
            return "ok";
        }
        if (cmd == "hash") {
            char h[24];
            std::snprintf(h, sizeof(h), "%016" PRIx64, Hash(p, len));
            return std::string("ok ") + h;
        }
        if (cmd == "get" && len <= 256) {
            return "ok " + Hex(p, len);
        }
        return "err unknown command " + cmd;
    }

    std::string Recv(std::istringstream& in) {
        uint64_t wr_id = 0;
        int n = 0;
        if (!qp_ || !(in >> wr_id >> n) || n < 0 || n > 64) {
            return "err usage: recv WRID N {ID OFF LEN}*N";
        }
        std::vector<ibv_sge> sge;
        for (int i = 0; i < n; i++) {
            size_t off = 0, len = 0;
            ABuf* b = Range(in, &off, &len);
            if (!b || !b->mr || len > UINT32_MAX) {
                return "err bad buffer or range";
            }
            sge.push_back(ibv_sge{reinterpret_cast<uintptr_t>(b->mem.data() + off),
                                  static_cast<uint32_t>(len), b->mr->lkey});
        }
        int rc = PostRecv(qp_, wr_id, sge);
        return rc ? "err " + std::to_string(rc) : "ok";
    }

    std::string Poll(std::istringstream& in) {
        size_t n = 0;
        int ms = 0;
        if (!(in >> n >> ms) || n > 256 || ms < 0 || ms > 60000) {
            return "err usage: poll N(<=256) TIMEOUT_MS";
        }
        std::vector<ibv_wc> wc = PollCq(rcq_, n, ms);
        std::ostringstream out;
        out << "ok " << wc.size();
        for (const ibv_wc& w : wc) {
            out << " " << w.wr_id << "," << w.status << "," << w.opcode << "," << w.byte_len << ","
                << ntohl(w.imm_data) << "," << w.wc_flags << "," << w.qp_num << "," << w.src_qp;
        }
        return out.str();
    }

    std::string dev_;
    ibv_context* ctx_ = nullptr;
    ibv_pd* pd_[2] = {nullptr, nullptr};
    ibv_cq* scq_ = nullptr;
    ibv_cq* rcq_ = nullptr;
    ibv_qp* qp_ = nullptr;
    ibv_gid gid_{};
    uint16_t lid_ = 0;
    std::map<int, std::unique_ptr<ABuf>> bufs_;
    int next_id_ = 1;
};

bool ReadLine(int fd, std::string* line) {
    line->clear();
    char c = 0;
    while (true) {
        ssize_t r = read(fd, &c, 1);
        if (r <= 0) {
            return false;
        }
        if (c == '\n') {
            return true;
        }
        if (line->size() > 65536) {
            return false;
        }
        *line += c;
    }
}

bool WriteAll(int fd, const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
        ssize_t w = write(fd, s.data() + done, s.size() - done);
        if (w <= 0) {
            return false;
        }
        done += static_cast<size_t>(w);
    }
    return true;
}

void Serve(int fd, const std::string& dev) {
    Session s(dev);
    std::string err = s.Open();
    std::string line;
    while (ReadLine(fd, &line)) {
        std::string reply = err.empty() ? s.Do(line) : "err " + err;
        if (!WriteAll(fd, reply + "\n")) {
            break;
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s DEVICE PORT [BIND_ADDR]\n", argv[0]);
        return 2;
    }
    const std::string dev = argv[1];
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (argc > 3 && inet_pton(AF_INET, argv[3], &a.sin_addr) != 1) {
        std::fprintf(stderr, "bad address %s\n", argv[3]);
        return 2;
    }
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof(a)) || listen(ls, 4)) {
        std::perror("agent: listen");
        return 1;
    }
    std::printf("agent: %s on port %s\n", dev.c_str(), argv[2]);
    std::fflush(stdout);
    while (true) {
        int fd = accept(ls, nullptr, nullptr);
        if (fd < 0) {
            if (errno == EINTR) {
                continue;
            }
            std::perror("agent: accept");
            return 1;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        Serve(fd, dev);
        close(fd);
    }
}
