// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "plan.hpp"

#include <stdexcept>
#include <string>

namespace ntb::ivshmem {

ClientTable::ClientTable(int num_ports)
    : connected_(static_cast<std::size_t>(num_ports), false),
      knows_(static_cast<std::size_t>(num_ports),
             std::vector<bool>(static_cast<std::size_t>(num_ports), false)) {}

void ClientTable::check(int id) const {
    if (!valid_id(id)) throw std::out_of_range("ivshmem id " + std::to_string(id));
}

bool ClientTable::connected(int id) const {
    check(id);
    return connected_[static_cast<std::size_t>(id)];
}

void ClientTable::set_connected(int id, bool on) {
    check(id);
    connected_[static_cast<std::size_t>(id)] = on;
    knows_[static_cast<std::size_t>(id)].assign(connected_.size(), false);
}

std::vector<int> ClientTable::connected_ids() const {
    std::vector<int> ids;
    for (int i = 0; i < size(); ++i)
        if (connected_[static_cast<std::size_t>(i)]) ids.push_back(i);
    return ids;
}

bool ClientTable::knows(int who, int port) const {
    check(who);
    check(port);
    return knows_[static_cast<std::size_t>(who)][static_cast<std::size_t>(port)];
}

void ClientTable::set_knows(int who, int port) {
    check(who);
    check(port);
    knows_[static_cast<std::size_t>(who)][static_cast<std::size_t>(port)] = true;
}

ConnectPlan plan_connect(const ClientTable& table, int new_id, int vectors, EventfdMode mode) {
    ConnectPlan plan;
    if (table.connected(new_id)) {
        plan.refused = true;
        return plan;
    }
    auto& a = plan.actions;
    a.push_back(Action::send(new_id, kProtocolVersion));
    a.push_back(Action::send(new_id, new_id));
    a.push_back(Action::send(new_id, kShmMessageValue, FdRef::shm()));
    // Reset the block before anybody learns about the new client.
    a.push_back(Action::init_block(new_id));

    std::vector<int> others = table.connected_ids();
    for (int j : others) {
        for (int v = 0; v < vectors; ++v)
            a.push_back(Action::send(new_id, j, FdRef::eventfd(j, v)));
        if (mode == EventfdMode::kPersistent && table.knows(j, new_id)) continue;
        for (int v = 0; v < vectors; ++v)
            a.push_back(Action::send(j, new_id, FdRef::eventfd(new_id, v)));
    }
    for (int v = 0; v < vectors; ++v)
        a.push_back(Action::send(new_id, new_id, FdRef::eventfd(new_id, v)));
    for (int j : others) a.push_back(Action::kick(j));
    return plan;
}

std::vector<Action> plan_disconnect(const ClientTable& table, int id, EventfdMode mode) {
    if (!table.connected(id))
        throw std::logic_error("plan_disconnect: id " + std::to_string(id) + " not connected");
    std::vector<Action> a;
    a.push_back(Action::clear_block(id));
    a.push_back(Action::close_client(id));
    std::vector<int> others;
    for (int j : table.connected_ids())
        if (j != id) others.push_back(j);
    if (mode == EventfdMode::kPerConnection)
        for (int j : others) a.push_back(Action::send(j, id));
    for (int j : others) a.push_back(Action::kick(j));
    return a;
}

std::ostream& operator<<(std::ostream& os, const Action& a) {
    switch (a.kind) {
        case ActionKind::kInitBlock:
            return os << "init_block(" << a.dest << ")";
        case ActionKind::kClearBlock:
            return os << "clear_block(" << a.dest << ")";
        case ActionKind::kCloseClient:
            return os << "close_client(" << a.dest << ")";
        case ActionKind::kKick:
            return os << "kick(" << a.dest << ")";
        case ActionKind::kSend:
            os << "send(to=" << a.dest << ", value=" << a.value;
            switch (a.fd.kind) {
                case FdKind::kNone:
                    break;
                case FdKind::kShm:
                    os << ", fd=shm";
                    break;
                case FdKind::kEventfd:
                    os << ", fd=eventfd[" << a.fd.owner << "][" << a.fd.vector << "]";
                    break;
            }
            return os << ")";
    }
    return os << "?";
}

}  // namespace ntb::ivshmem
