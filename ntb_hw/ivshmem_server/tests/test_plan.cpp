// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "plan.hpp"

namespace ntb::ivshmem {
namespace {

constexpr int kVectors = 5;

std::vector<Action> handshake(int id) {
    return {Action::send(id, 0), Action::send(id, id), Action::send(id, -1, FdRef::shm()),
            Action::init_block(id)};
}

void append_fds(std::vector<Action>& a, int dest, int owner, int vectors = kVectors) {
    for (int v = 0; v < vectors; ++v)
        a.push_back(Action::send(dest, owner, FdRef::eventfd(owner, v)));
}

TEST(ClientTable, TracksConnectedIds) {
    ClientTable t(4);
    EXPECT_EQ(t.size(), 4);
    EXPECT_TRUE(t.connected_ids().empty());
    t.set_connected(2, true);
    t.set_connected(0, true);
    EXPECT_EQ(t.connected_ids(), (std::vector<int>{0, 2}));
    t.set_connected(2, false);
    EXPECT_EQ(t.connected_ids(), (std::vector<int>{0}));
    EXPECT_THROW(t.connected(4), std::out_of_range);
    EXPECT_THROW(t.set_connected(-1, true), std::out_of_range);
}

TEST(PlanConnect, FirstClient) {
    ClientTable t(2);
    ConnectPlan p = plan_connect(t, 0, kVectors);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(0);
    append_fds(want, 0, 0);
    // No other client: nobody is kicked.
    EXPECT_EQ(p.actions, want);
}

TEST(PlanConnect, FirstClientOnHigherSocket) {
    ClientTable t(2);
    ConnectPlan p = plan_connect(t, 1, 2);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(1);
    append_fds(want, 1, 1, 2);
    EXPECT_EQ(p.actions, want);
}

TEST(PlanConnect, SecondClient) {
    ClientTable t(2);
    t.set_connected(0, true);
    ConnectPlan p = plan_connect(t, 1, kVectors);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(1);
    append_fds(want, 1, 0);  // client 0's eventfds to the new client
    append_fds(want, 0, 1);  // the new client's eventfds to client 0
    append_fds(want, 1, 1);  // own eventfds
    want.push_back(Action::kick(0));
    EXPECT_EQ(p.actions, want);

    // The block is initialised before anybody but the new client hears about it.
    auto init = std::find(p.actions.begin(), p.actions.end(), Action::init_block(1));
    ASSERT_NE(init, p.actions.end());
    for (auto it = p.actions.begin(); it != init; ++it) EXPECT_EQ(it->dest, 1) << *it;
    EXPECT_EQ(p.actions.back(), Action::kick(0));
}

TEST(PlanConnect, ThirdClientInterleavesPerPeerInIdOrder) {
    ClientTable t(4);
    t.set_connected(3, true);
    t.set_connected(0, true);
    ConnectPlan p = plan_connect(t, 2, 1);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(2);
    append_fds(want, 2, 0, 1);
    append_fds(want, 0, 2, 1);
    append_fds(want, 2, 3, 1);
    append_fds(want, 3, 2, 1);
    append_fds(want, 2, 2, 1);
    want.push_back(Action::kick(0));
    want.push_back(Action::kick(3));
    EXPECT_EQ(p.actions, want);
}

TEST(PlanConnect, ReconnectAfterDisconnect) {
    ClientTable t(2);
    t.set_connected(0, true);
    t.set_connected(1, true);
    std::vector<Action> gone = plan_disconnect(t, 1);
    EXPECT_EQ(gone, (std::vector<Action>{Action::clear_block(1), Action::close_client(1),
                                         Action::send(0, 1), Action::kick(0)}));
    t.set_connected(1, false);

    ConnectPlan p = plan_connect(t, 1, kVectors);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(1);
    append_fds(want, 1, 0);
    append_fds(want, 0, 1);
    append_fds(want, 1, 1);
    want.push_back(Action::kick(0));
    EXPECT_EQ(p.actions, want);
}

TEST(PlanConnect, DuplicateIdIsRefused) {
    ClientTable t(2);
    t.set_connected(0, true);
    ConnectPlan p = plan_connect(t, 0, kVectors);
    EXPECT_TRUE(p.refused);
    EXPECT_TRUE(p.actions.empty());
}

TEST(PlanConnect, InvalidIdThrows) {
    ClientTable t(2);
    EXPECT_THROW(plan_connect(t, 2, kVectors), std::out_of_range);
    EXPECT_THROW(plan_connect(t, -1, kVectors), std::out_of_range);
}

TEST(PlanDisconnect, LastClientOnlyClearsAndCloses) {
    ClientTable t(2);
    t.set_connected(0, true);
    EXPECT_EQ(plan_disconnect(t, 0),
              (std::vector<Action>{Action::clear_block(0), Action::close_client(0)}));
}

TEST(PlanDisconnect, NotifiesAllOthersWithoutFdThenKicks) {
    ClientTable t(3);
    t.set_connected(0, true);
    t.set_connected(1, true);
    t.set_connected(2, true);
    EXPECT_EQ(
        plan_disconnect(t, 1),
        (std::vector<Action>{Action::clear_block(1), Action::close_client(1), Action::send(0, 1),
                             Action::send(2, 1), Action::kick(0), Action::kick(2)}));
}

TEST(PlanDisconnect, NotConnectedThrows) {
    ClientTable t(2);
    EXPECT_THROW(plan_disconnect(t, 0), std::logic_error);
}

TEST(ClientTable, KnowledgeIsPerConnection) {
    ClientTable t(3);
    t.set_connected(0, true);
    EXPECT_FALSE(t.knows(0, 1));
    t.set_knows(0, 1);
    EXPECT_TRUE(t.knows(0, 1));
    EXPECT_FALSE(t.knows(1, 0));
    t.set_connected(0, false);  // that QEMU is gone; a new one knows nothing
    t.set_connected(0, true);
    EXPECT_FALSE(t.knows(0, 1));
    EXPECT_THROW(t.knows(0, 3), std::out_of_range);
}

TEST(PlanPersistent, FirstConnectOfAPortIsAnnounced) {
    ClientTable t(2);
    t.set_connected(0, true);
    ConnectPlan p = plan_connect(t, 1, kVectors, EventfdMode::kPersistent);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(1);
    append_fds(want, 1, 0);
    append_fds(want, 0, 1);
    append_fds(want, 1, 1);
    want.push_back(Action::kick(0));
    EXPECT_EQ(p.actions, want);
}

TEST(PlanPersistent, ReconnectIsNotReannouncedToClientsThatKnow) {
    ClientTable t(3);
    t.set_connected(0, true);
    t.set_connected(2, true);
    t.set_knows(0, 1);  // client 0 saw port 1 before; client 2 did not
    ConnectPlan p = plan_connect(t, 1, 2, EventfdMode::kPersistent);
    ASSERT_FALSE(p.refused);
    std::vector<Action> want = handshake(1);
    append_fds(want, 1, 0, 2);  // the new client always gets everybody's eventfds
    append_fds(want, 1, 2, 2);
    append_fds(want, 2, 1, 2);
    append_fds(want, 1, 1, 2);
    want.push_back(Action::kick(0));
    want.push_back(Action::kick(2));
    EXPECT_EQ(p.actions, want);
}

TEST(PlanPersistent, DisconnectSendsNoPeerGone) {
    ClientTable t(3);
    t.set_connected(0, true);
    t.set_connected(1, true);
    t.set_connected(2, true);
    EXPECT_EQ(plan_disconnect(t, 1, EventfdMode::kPersistent),
              (std::vector<Action>{Action::clear_block(1), Action::close_client(1), Action::kick(0),
                                   Action::kick(2)}));
}

TEST(PlanPersistent, DuplicateIdIsRefused) {
    ClientTable t(2);
    t.set_connected(1, true);
    EXPECT_TRUE(plan_connect(t, 1, kVectors, EventfdMode::kPersistent).refused);
}

TEST(PlanPrinting, IsReadable) {
    std::ostringstream os;
    os << Action::send(1, 0, FdRef::eventfd(0, 3)) << " " << Action::send(2, -1, FdRef::shm())
       << " " << Action::kick(4);
    EXPECT_EQ(os.str(),
              "send(to=1, value=0, fd=eventfd[0][3]) send(to=2, value=-1, fd=shm) kick(4)");
}

}  // namespace
}  // namespace ntb::ivshmem
