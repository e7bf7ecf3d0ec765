// p2p_mem_alloc / p2p_mem_free: memory on the requested NUMA node, usable
// for send/recv through a 1-rank communicator, bad arguments refused, and
// a refused NUMA binding: best effort for the plan's node, an error for an
// explicit one.
#include "ucxp2p_config.h"

#include <ucxp2p/p2p.h>
#include <ucxp2p/p2p_mem.h>

#include "core/mem.h"
#include "core/rails.h"
#include "topo/numa_mem.h"

#include "../fail_each.h"
#include "../shell.h"
#include "../top_dirs.h"
#include "../ucx_warnings.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

namespace {

class NumaMem : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx_));
    }
    void TearDown() override {
        if (comm_) p2p_comm_destroy(comm_);
        if (ctx_) p2p_context_destroy(ctx_);
    }
    void make_comm() {
        p2p_bootstrap_h b = nullptr;
        ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &b));
        ASSERT_EQ(P2P_OK, p2p_comm_create(ctx_, b, &comm_));
        p2p_bootstrap_destroy(b);
    }
    p2p_context_h ctx_ = nullptr;
    p2p_comm_h comm_ = nullptr;
};

TEST_F(NumaMem, NodeZeroIsWritableAndPlaced) {
    const size_t len = 3 * 4096 + 100;
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, len, 0, &p, &mem));
    ASSERT_NE(nullptr, p);
    auto *b = static_cast<unsigned char *>(p);
    EXPECT_EQ(0, b[0]);           // zero-filled
    EXPECT_EQ(0, b[len - 1]);
    for (size_t i = 0; i < len; ++i) b[i] = static_cast<unsigned char>(i * 7);
    for (size_t i = 0; i < len; i += 997) ASSERT_EQ(static_cast<unsigned char>(i * 7), b[i]);
    EXPECT_EQ(0, p2p_mem_numa_node(p, len));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
}

/** How many of this process' fds are memfds named like ucxp2p's. */
size_t ucxp2p_memfds() {
    size_t n = 0;
    for (int fd = 0; fd < 4096; ++fd) {
        char path[64], target[256];
        std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t len = readlink(path, target, sizeof(target) - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        if (std::strncmp(target, "/memfd:ucxp2p ", 14) == 0) ++n;
    }
    return n;
}

// Same-host receivers map the allocation (core/shm_region.h): it must be a
// memfd while allocated, and p2p_mem_free must close it.
TEST_F(NumaMem, AllocationIsAMemfdUntilFreed) {
    const size_t before = ucxp2p_memfds();
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 1 << 16, -1, &p, &mem));
    EXPECT_EQ(before + 1, ucxp2p_memfds());
    // Deregistering first leaves the memory (and fd) to p2p_mem_free.
    ASSERT_EQ(P2P_OK, p2p_mem_deregister(mem));
    EXPECT_EQ(before + 1, ucxp2p_memfds());
    static_cast<unsigned char *>(p)[100] = 1;  // still mapped
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
    EXPECT_EQ(before, ucxp2p_memfds());
}

// Each allocation of p2p_mem_alloc failing in turn: every failure is
// P2P_ERR_NO_MEMORY and leaves no memfd open and no registration behind
// (none of the context's, none UCX reports at context destroy), until the
// call succeeds.
TEST_F(NumaMem, EachFailedAllocationLeavesNothing) {
    if (!p2ptest::UcxWarnings::audible()) {
        GTEST_SKIP() << "UCX_LOG_LEVEL hides UCX's warnings, which this test counts";
    }
    const size_t before = ucxp2p_memfds();
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    p2p_status_t st = P2P_ERR_NO_MEMORY;
    const unsigned k = p2ptest::fail_each_allocation(
        [&] { return p2p_mem_alloc(ctx_, 1 << 16, -1, &p, &mem); },
        [&](p2p_status_t last) {
            st = last;
            if (st == P2P_OK) return;
            EXPECT_EQ(before, ucxp2p_memfds()) << "an allocation failed";
            EXPECT_EQ(0u, ucxp2p::mem_registrations(ctx_)) << "an allocation failed";
        });
    ASSERT_EQ(P2P_OK, st) << "still failing after " << k << " allocations";
    EXPECT_GE(k, 2u) << "fewer allocations than the call makes: nothing was failed";
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
    p2ptest::UcxWarnings warnings;
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx_));
    ctx_ = nullptr;
    EXPECT_EQ(0, warnings.seen()) << "UCX found a registration left behind";
}

TEST_F(NumaMem, NearestNodeSendRecvOnOneRankComm) {
    make_comm();
    const size_t n = 1 << 20;
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 2 * n, -1, &p, &mem));
    auto *b = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(i % 251);
    EXPECT_GE(p2p_mem_numa_node(p, n), 0);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 7, b + n, n, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 7, b, n, mem, nullptr));
    p2p_completion_t e;
    size_t got = 0;
    ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &e, 1, &got, 10000));
    ASSERT_EQ(1u, got);
    EXPECT_EQ(P2P_OK, e.status);
    EXPECT_EQ(n, e.bytes);
    ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_SEND, &e, 1, &got, 10000));
    EXPECT_EQ(0, std::memcmp(b, b + n, n));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
}

// p2p_mem_free while an operation uses the memory: P2P_ERR_BUSY and
// nothing released -- still registered, mapped and a memfd, so the
// operation completes into it -- and the free succeeds once it is done.
TEST_F(NumaMem, FreeWithAnOperationInFlightIsBusy) {
    make_comm();
    const size_t before = ucxp2p_memfds();
    const size_t kMsg = 64;
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 8192, -1, &p, &mem));
    auto *b = static_cast<unsigned char *>(p);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 9, b + 4096, kMsg, mem, nullptr));
    EXPECT_EQ(P2P_ERR_BUSY, p2p_mem_free(p, mem));
    EXPECT_EQ(before + 1, ucxp2p_memfds()) << "the BUSY free closed the memfd";
    EXPECT_EQ(1u, ucxp2p::mem_registrations(ctx_)) << "the BUSY free deregistered";
    for (size_t i = 0; i < kMsg; ++i) b[i] = static_cast<unsigned char>(i + 1);
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 9, b, kMsg, mem, nullptr));
    p2p_completion_t e{};
    size_t got = 0;
    ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &e, 1, &got, 10000));
    ASSERT_EQ(1u, got);
    EXPECT_EQ(P2P_OK, e.status);
    EXPECT_EQ(kMsg, e.bytes);
    EXPECT_EQ(0, std::memcmp(b, b + 4096, kMsg));
    ASSERT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_SEND, &e, 1, &got, 10000));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
    EXPECT_EQ(before, ucxp2p_memfds());
    EXPECT_EQ(0u, ucxp2p::mem_registrations(ctx_));
}

TEST_F(NumaMem, BadArguments) {
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 0, -1, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -1, nullptr, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -1, &p, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -2, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, 1000, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_alloc(nullptr, 64, -1, &p, &mem));
    // Another kind of handle, and a destroyed context: found before the
    // mmap (a length no mmap can serve would say NO_MEMORY otherwise).
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
              p2p_mem_alloc(reinterpret_cast<p2p_context_h>(comm_), 1ull << 60, -1, &p, &mem));
    p2p_context_h gone = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &gone));
    ASSERT_EQ(P2P_OK, p2p_context_destroy(gone));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_alloc(gone, 1ull << 60, -1, &p, &mem));
    // The mmap itself failing.
    EXPECT_EQ(P2P_ERR_NO_MEMORY, p2p_mem_alloc(ctx_, 1ull << 60, -1, &p, &mem));
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(nullptr, mem);

    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 64, -1, &p, &mem));
    void *p2 = nullptr;
    p2p_mem_h mem2 = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 64, -1, &p2, &mem2));
    char stack[8];
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_free(stack, mem));   // not ours
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_free(p, mem2));      // wrong pair
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_free(nullptr, mem));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_free(p, mem));       // twice
    // Deregistered by the user first: p2p_mem_free still unmaps.
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem2));
    EXPECT_EQ(P2P_OK, p2p_mem_free(p2, mem2));
    EXPECT_EQ(-1, p2p_mem_numa_node(nullptr, 10));
}

/** While alive, every NUMA binding of p2p_mem_alloc is refused with EPERM
 *  (as for a node outside the process's cpuset) and counted. */
class RefusedMbind {
public:
    RefusedMbind() {
        calls_ = 0;
        ucxp2p::mem_set_mbind_for_test(&refuse);
    }
    ~RefusedMbind() { ucxp2p::mem_set_mbind_for_test(nullptr); }
    RefusedMbind(const RefusedMbind &) = delete;
    RefusedMbind &operator=(const RefusedMbind &) = delete;
    static int calls() { return calls_; }

private:
    static int refuse(void *, size_t, int) {
        ++calls_;
        return EPERM;
    }
    static int calls_;
};
int RefusedMbind::calls_ = 0;

TEST_F(NumaMem, RefusedPlanNodeFallsBackToTheDefaultPolicy) {
    if (ucxp2p::rails_numa() < 0) {
        GTEST_SKIP() << "no rail plan node (built without hwloc?): -1 binds nothing";
    }
    RefusedMbind refused;
    const size_t len = 1 << 16;
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, len, -1, &p, &mem));
    EXPECT_EQ(1, RefusedMbind::calls());
    std::memset(p, 0x5a, len);
    EXPECT_GE(p2p_mem_numa_node(p, len), 0);
    EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
}

TEST_F(NumaMem, RefusedExplicitNodeIsUnsupported) {
    RefusedMbind refused;
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    EXPECT_EQ(P2P_ERR_UNSUPPORTED, p2p_mem_alloc(ctx_, 64, 0, &p, &mem));
    EXPECT_EQ(1, RefusedMbind::calls());
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(nullptr, mem);
}

#ifdef HAVE_HWLOC

/** The NUMA nodes this process may allocate on (Mems_allowed_list). */
std::string mems_allowed() {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, 19, "Mems_allowed_list:\t") == 0) {
            return line.substr(19);
        }
    }
    return "";
}

// The kernel itself refuses: the rail plan of a two-node machine (the
// gpu2_mlx2_bond fixture through HWLOC_XMLFILE; local rank 1 sits on node
// 1) run where node 1 is not allowed (this VM has node 0 only). In a child
// process (this test binary again): the topology is loaded once per
// process, before this one's tests ran.
TEST_F(NumaMem, PlanNodeTheKernelRefusesFallsBack) {
    if (std::getenv("NUMA_MEM_CHILD") != nullptr) {
        ASSERT_EQ(1, ucxp2p::rails_numa());
        const size_t len = 1 << 16;
        void *p = nullptr;
        p2p_mem_h mem = nullptr;
        ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, len, -1, &p, &mem));
        std::memset(p, 0x5a, len);
        int node = p2p_mem_numa_node(p, len);
        if (mems_allowed() == "0") {
            EXPECT_EQ(0, node);  // refused: the default policy's node
        } else {
            EXPECT_GE(node, 0);
        }
        EXPECT_EQ(P2P_OK, p2p_mem_free(p, mem));
        return;
    }
    std::string xml = p2ptest::top_srcdir() + "/test/topo/fixtures/gpu2_mlx2_bond.xml";
    std::string cmd = "env -u UCX_NET_DEVICES -u P2P_HCA -u P2P_IB_GID_INDEX "
                      "-u SMDATAPARALLEL_DEVICE_NAME NUMA_MEM_CHILD=1 "
                      "HWLOC_XMLFILE=" + xml + " P2P_LOCAL_RANK=1 "
                      "P2P_LOCAL_WORLD_SIZE=2 P2P_RAILS=lo P2P_LOG_LEVEL=info "
                      "timeout 60 /proc/" + std::to_string(getpid()) + "/exe "
                      "--gtest_filter=NumaMem.PlanNodeTheKernelRefusesFallsBack 2>&1";
    p2ptest::ShellResult r = p2ptest::run_shell(cmd);
    EXPECT_EQ(0, r.status) << r.out;
    EXPECT_NE(std::string::npos, r.out.find("[  PASSED  ] 1 test")) << r.out;
    if (mems_allowed() == "0") {
        EXPECT_NE(std::string::npos, r.out.find("of the rail plan refused")) << r.out;
    }
}

#endif

} // namespace
