// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// What one user may take of the kernel: ring memory is charged to the
// creating task's memory cgroup, and the rdma cgroup's hca_object limit
// holds. Each test runs its user in a child process placed in a cgroup of
// its own (cgroup v2, mounted at /sys/fs/cgroup if it is not).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "verbs_fixture.hpp"

namespace ntv {
namespace {

const std::string kCgRoot = "/sys/fs/cgroup";

bool WriteFile(const std::string& path, const std::string& v) {
    std::ofstream f(path);
    f << v << std::flush;
    return f.good();
}

std::string ReadFile(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// cgroup v2 with @controller usable in a child group; "" or why not.
std::string CgroupReady(const std::string& controller) {
    if (access((kCgRoot + "/cgroup.controllers").c_str(), F_OK) &&
        mount("none", kCgRoot.c_str(), "cgroup2", 0, nullptr)) {
        return "cannot mount cgroup2 at " + kCgRoot + ": " + std::strerror(errno);
    }
    if (ReadFile(kCgRoot + "/cgroup.controllers").find(controller) == std::string::npos) {
        return "the " + controller + " controller is not available";
    }
    WriteFile(kCgRoot + "/cgroup.subtree_control", "+" + controller);
    return "";
}

// A cgroup of its own, removed at the end of the test.
class Cgroup {
  public:
    explicit Cgroup(const std::string& name) : path_(kCgRoot + "/" + name) {
        rmdir(path_.c_str());
        ok_ = mkdir(path_.c_str(), 0755) == 0;
    }
    ~Cgroup() { rmdir(path_.c_str()); }
    bool ok() const { return ok_; }
    bool Set(const std::string& file, const std::string& v) const {
        return WriteFile(path_ + "/" + file, v);
    }
    bool Join() const { return WriteFile(path_ + "/cgroup.procs", std::to_string(getpid())); }

  private:
    std::string path_;
    bool ok_ = false;
};

struct Taken {
    int n = 0;    // objects created
    int err = 0;  // errno of the first refusal, 0 if none
    bool setup = true;
    int killed = 0;  // the signal that ended the child (the OOM killer's)
};

// In a child in @cg: @make(i) until it fails or @max made; what it got.
template <typename Make>
Taken InChild(const Cgroup& cg, int max, Make make) {
    int fds[2];
    Taken t;
    if (pipe(fds)) {
        return t;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        Taken c;
        c.setup = cg.Join();
        for (c.n = 0; c.setup && c.n < max; c.n++) {
            if (!make(c.n)) {
                c.err = errno;
                break;
            }
        }
        (void)!write(fds[1], &c, sizeof(c));
        _exit(0);  // the objects go with the process
    }
    close(fds[1]);
    if (read(fds[0], &t, sizeof(t)) != sizeof(t)) {
        t.setup = false;
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    t.killed = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return t;
}

// A user in the child: its own context, PD and CQ (object 0), then RC QPs
// of @wr WRs and @sge SGEs (objects 1...).
struct User {
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;

    bool Make(int i, uint32_t wr, uint32_t sge) {
        if (i == 0) {
            ctx = OpenDevice(DeviceName());
            pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
            cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
            return cq != nullptr;
        }
        RcQpSpec s;
        s.send_cq = s.recv_cq = cq;
        s.max_send_wr = s.max_recv_wr = wr;
        s.max_send_sge = s.max_recv_sge = sge;
        return MakeRcQp(pd, s) != nullptr;
    }
};

using Limits = Verbs;

// 40 of the largest QPs (several MB each) in a memory cgroup of 64 MB:
// the rings are charged, so creation fails with ENOMEM well before 40.
// (Uncharged, all 40 fit in the guest and the limit holds nothing.)
TEST_F(Limits, QpRingsAreChargedToTheUsersMemcg) {
    const std::string why = CgroupReady("memory");
    if (!why.empty()) {
        GTEST_SKIP() << why;
    }
    Cgroup cg("ntrdma-limits-mem");
    ASSERT_TRUE(cg.ok()) << std::strerror(errno);
    ASSERT_TRUE(cg.Set("memory.max", std::to_string(64 << 20)));
    cg.Set("memory.swap.max", "0");
    const auto wr = static_cast<uint32_t>(dev_.max_qp_wr);
    const auto sge = static_cast<uint32_t>(dev_.max_sge);
    User u;
    const Taken t = InChild(cg, 41, [&](int i) { return u.Make(i, wr, sge); });
    ASSERT_EQ(t.killed, 0) << "the child was killed (the memory cgroup's OOM killer?): "
                           << "creation must fail with ENOMEM instead";
    ASSERT_TRUE(t.setup) << "the child could not join the cgroup";
    ASSERT_GE(t.n, 1) << "no context, PD and CQ in the cgroup: " << std::strerror(t.err);
    std::cout << "[ NOTE     ] " << t.n - 1 << " QPs of " << wr << " WRs in 64 MB, then "
              << (t.err ? std::strerror(t.err) : "none refused") << std::endl;
    EXPECT_LT(t.n, 41) << "40 QPs of the largest size fit in a 64 MB memory cgroup";
    EXPECT_EQ(t.err, ENOMEM);
}

// The rdma cgroup's hca_object limit holds for our device: 16 objects,
// of which the child's PD and CQ take 2.
TEST_F(Limits, RdmaCgroupHcaObjectLimitHolds) {
    const std::string why = CgroupReady("rdma");
    if (!why.empty()) {
        GTEST_SKIP() << why;
    }
    Cgroup cg("ntrdma-limits-rdma");
    ASSERT_TRUE(cg.ok()) << std::strerror(errno);
    ASSERT_TRUE(cg.Set("rdma.max", DeviceName() + " hca_handle=2 hca_object=16"));
    User u;
    const Taken t = InChild(cg, 64, [&](int i) { return u.Make(i, 16, 1); });
    // Back to no limit before the cgroup goes: 6.1's rdma controller
    // frees a pool only when its limits are all "max", and a pool left
    // behind by a removed cgroup corrupts the device's list at
    // ib_unregister_device (kernel BUG in rdmacg_unregister_device).
    EXPECT_TRUE(cg.Set("rdma.max", DeviceName() + " hca_handle=max hca_object=max"));
    ASSERT_TRUE(t.setup) << "the child could not join the cgroup";
    std::cout << "[ NOTE     ] " << t.n - 1 << " QPs under hca_object=16, then "
              << (t.err ? std::strerror(t.err) : "none refused") << std::endl;
    EXPECT_GE(t.n, 2) << "not even one QP";
    EXPECT_LE(t.n, 16);
    EXPECT_NE(t.err, 0) << "64 objects made under hca_object=16";
}

}  // namespace
}  // namespace ntv
