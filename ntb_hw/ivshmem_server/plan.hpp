// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Pure connect/disconnect sequencing of the ivshmem server: given which ids are connected, the
// plan functions return the ordered list of actions the server must perform. No I/O here.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

namespace ntb::ivshmem {

// Which ids (0 .. size()-1, one per listening socket) currently have a client, and (for
// EventfdMode::kPersistent) which ports' eventfds each connected client has already been given.
class ClientTable {
  public:
    explicit ClientTable(int num_ports);

    int size() const { return static_cast<int>(connected_.size()); }
    bool valid_id(int id) const { return id >= 0 && id < size(); }
    // All accessors throw std::out_of_range for an invalid id.
    bool connected(int id) const;
    // Also forgets what `id` knew: a new connection is a new QEMU instance.
    void set_connected(int id, bool on);
    // Connected ids in increasing order.
    std::vector<int> connected_ids() const;
    // Client `who` has been sent the eventfds of port `port` during its current connection.
    bool knows(int who, int port) const;
    void set_knows(int who, int port);

  private:
    void check(int id) const;
    std::vector<bool> connected_;
    std::vector<std::vector<bool>> knows_;
};

// How eventfds relate to connections.
enum class EventfdMode {
    // QEMU's protocol as written: fresh eventfds per connection; on disconnect every other
    // client gets the "peer gone" notice (id, no fd) and is sent the new eventfds on reconnect.
    kPerConnection,
    // Eventfds belong to the port and live as long as the server. No "peer gone" notice; a
    // client is sent a port's eventfds once per connection. Works around QEMU's ivshmem
    // (at least up to 7.2) freeing a peer's eventfd array on "peer gone" without clearing the
    // pointer: a reconnecting peer then makes the other QEMU write freed memory and crash.
    kPersistent,
};

// Which fd a message carries.
enum class FdKind {
    kNone,     // no fd
    kShm,      // the register file
    kEventfd,  // eventfd `vector` of client `owner`
};

struct FdRef {
    FdKind kind = FdKind::kNone;
    int owner = -1;
    int vector = -1;

    static FdRef none() { return {}; }
    static FdRef shm() { return {FdKind::kShm, -1, -1}; }
    static FdRef eventfd(int owner, int vector) { return {FdKind::kEventfd, owner, vector}; }
    friend bool operator==(const FdRef&, const FdRef&) = default;
};

enum class ActionKind {
    kInitBlock,    // port: reset register block for a connect (hw_present=1, generation+1)
    kClearBlock,   // port: reset register block for a disconnect (hw_present=0)
    kCloseClient,  // port: close the client's socket and eventfds
    kSend,         // dest: send (value, fd) to client dest
    kKick,         // dest: write 1 to client dest's vector-0 eventfd (link change interrupt)
};

struct Action {
    ActionKind kind;
    int dest;  // the client / port the action applies to
    std::int64_t value = 0;
    FdRef fd = FdRef::none();

    static Action init_block(int port) { return {ActionKind::kInitBlock, port}; }
    static Action clear_block(int port) { return {ActionKind::kClearBlock, port}; }
    static Action close_client(int port) { return {ActionKind::kCloseClient, port}; }
    static Action send(int dest, std::int64_t value, FdRef fd = FdRef::none()) {
        return {ActionKind::kSend, dest, value, fd};
    }
    static Action kick(int dest) { return {ActionKind::kKick, dest}; }
    friend bool operator==(const Action&, const Action&) = default;
};

std::ostream& operator<<(std::ostream& os, const Action& a);

inline constexpr std::int64_t kProtocolVersion = 0;
inline constexpr std::int64_t kShmMessageValue = -1;
// Sent (as the "version") to a refused connection before closing it: QEMU then fails with
// "server sent version -1" instead of spinning forever on the closed socket.
inline constexpr std::int64_t kRefusalVersion = -1;

struct ConnectPlan {
    bool refused = false;  // new_id is already connected: close the new connection, nothing else
    std::vector<Action> actions;
};

// Plan for a client connecting on socket `new_id` with `vectors` eventfds per client:
// version, id, shm; init block; for each other connected j (increasing): j's eventfds to the new
// client, then the new client's eventfds to j (kPersistent: only if j does not know them yet);
// the new client's own eventfds; kick every other j.
// Throws std::out_of_range for an invalid id.
ConnectPlan plan_connect(const ClientTable& table, int new_id, int vectors,
                         EventfdMode mode = EventfdMode::kPerConnection);

// Plan for client `id` going away (it must be marked connected in `table`): clear its block,
// close it, send (id, no fd) to every other connected client (kPerConnection only), then kick
// each of them.
// Throws std::out_of_range for an invalid id, std::logic_error if id is not connected.
std::vector<Action> plan_disconnect(const ClientTable& table, int id,
                                    EventfdMode mode = EventfdMode::kPerConnection);

}  // namespace ntb::ivshmem
