// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// UD QPs (rdma/ntrdma_ud.c): datagrams through address handles, to a QP of
// the same device (the AH's GRH names our GID) and to the peer device (the
// loop topology has both in this guest). Checked: content, the 40-byte GRH
// before the payload (SGID the sender's GID 0, DGID ours), IBV_WC_GRH,
// src_qp, immediates, an answer through ibv_create_ah_from_wc(), Q_Key
// checks (a mismatch is dropped, bit 31 takes the QP's own), the port MTU
// as the limit, a receive too small, no receive posted, the WR API.
#include <arpa/inet.h>

#include <thread>

#include "verbs_datapath.hpp"

namespace ntv {
namespace {

constexpr uint32_t kQkey = 0x11223344;
constexpr uint32_t kGrh = 40;

class Ud : public SameDevice {
  protected:
    void TearDown() override {
        for (ibv_ah* ah : ahs_) {
            EXPECT_EQ(ibv_destroy_ah(ah), 0);
        }
        SameDevice::TearDown();
    }

    // A UD QP of @s in RTS with Q_Key @qkey (nullptr on failure, recorded).
    ibv_qp* UdQp(Side& s, uint32_t qkey = kQkey, ibv_qp_init_attr_ex* ex = nullptr) {
        ibv_qp_init_attr_ex a{};
        if (ex) {
            a = *ex;
        }
        a.qp_type = IBV_QPT_UD;
        a.send_cq = s.scq;
        a.recv_cq = s.rcq;
        a.cap.max_send_wr = 32;
        a.cap.max_recv_wr = 32;
        a.cap.max_send_sge = a.cap.max_send_sge ? a.cap.max_send_sge : 2;
        a.cap.max_recv_sge = 2;
        a.comp_mask |= IBV_QP_INIT_ATTR_PD;
        a.pd = s.pd;
        ibv_qp* qp = ibv_create_qp_ex(s.ctx, &a);
        if (!qp) {
            ADD_FAILURE() << "UD ibv_create_qp_ex: " << std::strerror(errno);
            return nullptr;
        }
        qps_.push_back(qp);
        ibv_qp_attr m{};
        m.qp_state = IBV_QPS_INIT;
        m.port_num = 1;
        m.qkey = qkey;
        EXPECT_EQ(
            ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
        m.qp_state = IBV_QPS_RTR;
        EXPECT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE), 0);
        m.qp_state = IBV_QPS_RTS;
        m.sq_psn = 0;
        EXPECT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
        return qp;
    }

    // An AH of a_ to @dst's port: by its GID (GRH) or, @global false, by LID.
    ibv_ah* Ah(const Side& dst, bool global = true) {
        ibv_ah_attr a{};
        a.port_num = 1;
        a.dlid = dst.lid;
        a.is_global = global;
        a.grh.dgid = dst.gid;
        a.grh.sgid_index = GidIndex();
        a.grh.hop_limit = 1;
        ibv_ah* ah = ibv_create_ah(a_.pd, &a);
        if (!ah) {
            ADD_FAILURE() << "ibv_create_ah: " << std::strerror(errno);
        } else {
            ahs_.push_back(ah);
        }
        return ah;
    }

    static int PostUd(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey, ibv_sge sge,
                      uint64_t wr_id = 1, uint32_t imm = 0) {
        ibv_send_wr wr{};
        ibv_send_wr* bad = nullptr;
        wr.wr_id = wr_id;
        wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        wr.imm_data = imm;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = qpn;
        wr.wr.ud.remote_qkey = qkey;
        return ibv_post_send(qp, &wr, &bad);
    }

    static int PostRecv1(ibv_qp* qp, uint64_t wr_id, ibv_sge sge) {
        ibv_recv_wr wr{};
        ibv_recv_wr* bad = nullptr;
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        return ibv_post_recv(qp, &wr, &bad);
    }

    // The sender's completion, successful.
    void ExpectSent(ibv_cq* cq, uint64_t wr_id = 1) {
        std::vector<ibv_wc> wc = PollCq(cq, 1);
        ASSERT_EQ(wc.size(), 1u) << "no send completion";
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
        EXPECT_EQ(wc[0].wr_id, wr_id);
    }

    // @len bytes from @from (on a_) to @to of @dst; the receive completion.
    ibv_wc SendAndReceive(ibv_qp* from, ibv_qp* to, Side& dst, ibv_ah* ah, uint32_t len,
                          Buf** rbuf_out = nullptr, uint32_t imm = 0) {
        Buf* src = Reg(a_, len ? len : 1, kLocal);
        Buf* dbuf = Reg(dst, kGrh + len, kLocal);
        ibv_wc none{};
        none.status = IBV_WC_GENERAL_ERR;
        if (HasFailure()) {
            return none;
        }
        Fill(src->p(), len, len + 3);
        EXPECT_EQ(PostRecv1(to, 7, dbuf->sge(0, kGrh + len)), 0);
        EXPECT_EQ(PostUd(from, ah, to->qp_num, kQkey, src->sge(0, len), 1, imm), 0);
        ExpectSent(a_.scq);
        std::vector<ibv_wc> wc = PollCq(dst.rcq, 1);
        if (wc.size() != 1) {
            ADD_FAILURE() << "no receive completion";
            return none;
        }
        EXPECT_EQ(FirstDiff(src->p(), dbuf->p(kGrh), len), -1) << "payload";
        if (rbuf_out) {
            *rbuf_out = dbuf;
        }
        return wc[0];
    }

    // The GRH at the start of @b: SGID @sgid, DGID @dgid.
    static void ExpectGrh(Buf* b, const ibv_gid& sgid, const ibv_gid& dgid) {
        ibv_grh grh;
        std::memcpy(&grh, b->p(), sizeof(grh));
        EXPECT_EQ(ntohl(grh.version_tclass_flow) >> 28, 6u) << "IP version 6";
        EXPECT_EQ(std::memcmp(&grh.sgid, &sgid, sizeof(sgid)), 0) << "SGID";
        EXPECT_EQ(std::memcmp(&grh.dgid, &dgid, sizeof(dgid)), 0) << "DGID";
    }

    // GID 0 of @s (what a datagram's GRH says it came from).
    static ibv_gid Gid0(const Side& s) {
        ibv_gid g{};
        EXPECT_EQ(ibv_query_gid(s.ctx, 1, 0, &g), 0);
        return g;
    }

    std::vector<ibv_ah*> ahs_;
};

// Two UD QPs of one device: content, GRH, flags, src_qp, immediate; the
// receiver answers through an AH made from the completion and its GRH.
TEST_F(Ud, LoopbackDatagramAndAnswerFromWc) {
    ibv_qp* qa = UdQp(a_);
    ibv_qp* qb = UdQp(b_);
    ibv_ah* ah = Ah(b_);
    ASSERT_FALSE(HasFailure());
    Buf* rbuf = nullptr;
    ibv_wc wc = SendAndReceive(qa, qb, b_, ah, 1000, &rbuf, htonl(0xabcd));
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    EXPECT_EQ(wc.opcode, IBV_WC_RECV);
    EXPECT_EQ(wc.byte_len, kGrh + 1000);
    EXPECT_EQ(wc.src_qp, qa->qp_num);
    EXPECT_EQ(wc.qp_num, qb->qp_num);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
    EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(wc.imm_data), 0xabcdu);
    ExpectGrh(rbuf, Gid0(a_), Gid0(b_));

    // the answer: an AH from the completion names a_'s port (loopback)
    ibv_ah* back = ibv_create_ah_from_wc(b_.pd, &wc, reinterpret_cast<ibv_grh*>(rbuf->p()), 1);
    ASSERT_NE(back, nullptr) << "ibv_create_ah_from_wc: " << std::strerror(errno);
    Buf* src = Reg(b_, 64, kLocal);
    Buf* dst = Reg(a_, kGrh + 64, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 64, 9);
    ASSERT_EQ(PostRecv1(qa, 8, dst->sge(0, kGrh + 64)), 0);
    ASSERT_EQ(PostUd(qb, back, wc.src_qp, kQkey, src->sge(0, 64), 2), 0);
    ExpectSent(b_.scq, 2);
    std::vector<ibv_wc> got = PollCq(a_.rcq, 1);
    ASSERT_EQ(got.size(), 1u) << "the answer did not arrive";
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS) << WcStr(got[0]);
    EXPECT_EQ(got[0].src_qp, qb->qp_num);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(kGrh), 64), -1);
    EXPECT_EQ(ibv_destroy_ah(back), 0);
}

// The peer device (loop topology: in this guest): the AH without a GRH
// names the peer; its GRH's SGID is our GID 0.
TEST_F(Ud, ToThePeerDevice) {
    const char* peer = std::getenv("NTRDMA_PEER_IBDEV");
    if (!peer || !*peer) {
        GTEST_SKIP() << "needs the peer device in this guest (loop topology)";
    }
    Side p;
    ASSERT_NO_FATAL_FAILURE(Open(peer, &p));
    ibv_qp* qa = UdQp(a_);
    ibv_qp* qp = UdQp(p);
    ibv_ah* ah = Ah(p, false);
    ASSERT_FALSE(HasFailure());
    Buf* rbuf = nullptr;
    ibv_wc wc = SendAndReceive(qa, qp, p, ah, 4096, &rbuf);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcStr(wc);
    EXPECT_EQ(wc.byte_len, kGrh + 4096);
    EXPECT_EQ(wc.src_qp, qa->qp_num);
    if (rbuf) {
        ExpectGrh(rbuf, Gid0(a_), Gid0(p));
    }
    CloseSide(p);
}

// Another Q_Key is dropped (and counted); bit 31 sends the QP's own.
TEST_F(Ud, QkeyChecked) {
    ibv_qp* qa = UdQp(a_);
    ibv_qp* qb = UdQp(b_);
    ibv_qp* qa2 = UdQp(a_, 0x11223344);
    ibv_ah* ah = Ah(b_);
    Buf* src = Reg(a_, 64, kLocal);
    Buf* dst = Reg(b_, kGrh + 64, kLocal);
    ASSERT_FALSE(HasFailure());
    const long long drop0 = HwCounter(b_.name, "ud_dropped");
    ASSERT_GE(drop0, 0) << "no ud_dropped counter";
    ASSERT_EQ(PostRecv1(qb, 1, dst->sge(0, kGrh + 64)), 0);
    ASSERT_EQ(PostUd(qa, ah, qb->qp_num, kQkey + 1, src->sge(0, 64)), 0);
    ExpectSent(a_.scq);
    EXPECT_TRUE(Drain(b_.rcq, 300).empty()) << "a datagram with another Q_Key was received";
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_GT(HwCounter(b_.name, "ud_dropped"), drop0);
    ASSERT_EQ(PostUd(qa2, ah, qb->qp_num, 0x80000000u, src->sge(0, 64), 2), 0);
    ExpectSent(a_.scq, 2);
    std::vector<ibv_wc> wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u) << "bit 31: the sending QP's Q_Key";
    EXPECT_EQ(wc[0].src_qp, qa2->qp_num);
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(qb, &attr, IBV_QP_QKEY, &init), 0);
    EXPECT_EQ(attr.qkey, kQkey);
    EXPECT_EQ(init.qp_type, IBV_QPT_UD);
}

// More than the port MTU fails the send WQE (LOC_LEN_ERR); a receive too
// small completes LOC_LEN_ERR and the QP goes on; none posted: dropped.
TEST_F(Ud, LengthsAndMissingReceive) {
    ibv_qp* qa = UdQp(a_);
    ibv_qp* qb = UdQp(b_);
    ibv_ah* ah = Ah(b_);
    Buf* src = Reg(a_, 8192, kLocal);
    Buf* dst = Reg(b_, 8192, kLocal);
    ASSERT_FALSE(HasFailure());

    ASSERT_EQ(PostUd(qa, ah, qb->qp_num, kQkey, src->sge(0, 64)), 0);
    ExpectSent(a_.scq);
    EXPECT_TRUE(Drain(b_.rcq, 200).empty()) << "no receive was posted";

    ASSERT_EQ(PostRecv1(qb, 2, dst->sge(0, kGrh + 63)), 0);
    ASSERT_EQ(PostUd(qa, ah, qb->qp_num, kQkey, src->sge(0, 64), 2), 0);
    ExpectSent(a_.scq, 2);
    std::vector<ibv_wc> wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR) << WcStr(wc[0]);
    ASSERT_EQ(PostRecv1(qb, 3, dst->sge(0, kGrh + 64)), 0);
    ASSERT_EQ(PostUd(qa, ah, qb->qp_num, kQkey, src->sge(0, 64), 3), 0);
    ExpectSent(a_.scq, 3);
    wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u) << "the QP stopped after a short receive";
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);

    ASSERT_EQ(PostUd(qa, ah, qb->qp_num, kQkey, src->sge(0, 4097), 4), 0);
    wc = PollCq(a_.scq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR) << WcStr(wc[0]);
}

// Creation: RDMA opcodes refused at post, too many send SGEs refused.
TEST_F(Ud, PostAndCreateChecks) {
    ibv_qp_init_attr_ex ex{};
    ex.cap.max_send_sge = 9;
    ex.qp_type = IBV_QPT_UD;
    ex.send_cq = a_.scq;
    ex.recv_cq = a_.rcq;
    ex.cap.max_send_wr = 4;
    ex.cap.max_recv_wr = 4;
    ex.cap.max_recv_sge = 1;
    ex.comp_mask = IBV_QP_INIT_ATTR_PD;
    ex.pd = a_.pd;
    ibv_qp* bad = ibv_create_qp_ex(a_.ctx, &ex);
    EXPECT_EQ(bad, nullptr) << "9 send SGEs on a UD QP";
    if (bad) {
        ibv_destroy_qp(bad);
    }
    ibv_qp* qa = UdQp(a_);
    ibv_ah* ah = Ah(b_);
    Buf* src = Reg(a_, 64, kLocal);
    ASSERT_FALSE(HasFailure());
    ibv_sge sge = src->sge(0, 8);
    ibv_send_wr wr{};
    ibv_send_wr* badwr = nullptr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.ud.ah = ah;
    EXPECT_EQ(ibv_post_send(qa, &wr, &badwr), EINVAL) << "RDMA WRITE on UD";
}

// The work request API: ibv_wr_send() with ibv_wr_set_ud_addr().
TEST_F(Ud, WorkRequestApi) {
    ibv_qp_init_attr_ex ex{};
    ex.comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ex.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    ibv_qp* qa = UdQp(a_, kQkey, &ex);
    ibv_qp* qb = UdQp(b_);
    ibv_ah* ah = Ah(b_);
    Buf* src = Reg(a_, 256, kLocal);
    Buf* dst = Reg(b_, kGrh + 256, kLocal);
    ASSERT_FALSE(HasFailure());
    Fill(src->p(), 256, 5);
    ASSERT_EQ(PostRecv1(qb, 1, dst->sge(0, kGrh + 256)), 0);
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(qa);
    ASSERT_NE(qx, nullptr);
    ibv_wr_start(qx);
    qx->wr_id = 5;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send_imm(qx, htonl(77));
    ibv_wr_set_ud_addr(qx, ah, qb->qp_num, kQkey);
    ibv_wr_set_sge(qx, src->mr->lkey, src->addr(), 256);
    ASSERT_EQ(ibv_wr_complete(qx), 0);
    ExpectSent(a_.scq, 5);
    std::vector<ibv_wc> wc = PollCq(b_.rcq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << WcStr(wc[0]);
    EXPECT_EQ(ntohl(wc[0].imm_data), 77u);
    EXPECT_EQ(FirstDiff(src->p(), dst->p(kGrh), 256), -1);
}

}  // namespace
}  // namespace ntv
