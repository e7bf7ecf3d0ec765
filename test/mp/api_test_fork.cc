/*
 * api_test: a process forked after it used the library. The child starts
 * without the parent's handles (they fail there as destroyed ones do, and
 * releasing them releases nothing of the parent's), may make its own, and
 * exits normally; the parent's objects keep working.
 */
#include "api_util.h"

#include <ucxp2p/p2p_mem.h>

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

using apitest::ApiFixture;
using apitest::Buf;

namespace {

/** One loopback message of len bytes through comm; true when it arrived
 *  whole. The buffers are registered with ctx for the call. */
bool loopback(p2p_context_h ctx, p2p_comm_h comm, size_t len, uint32_t tid) {
    Buf s(len, 0x3c), r(len, 0);
    p2p_mem_h sm = nullptr, rm = nullptr;
    if (p2p_mem_register(ctx, s.data(), len, &sm) != P2P_OK) return false;
    if (p2p_mem_register(ctx, r.data(), len, &rm) != P2P_OK) return false;
    bool ok = p2p_comm_recv(comm, 0, tid, r.data(), len, rm, nullptr) == P2P_OK &&
              p2p_comm_send(comm, 0, tid, s.data(), len, sm, nullptr) == P2P_OK;
    for (p2p_queue_t q : {P2P_QUEUE_RECV, P2P_QUEUE_SEND}) {
        p2p_completion_t c{};
        size_t n = 0;
        ok = ok && p2p_comm_wait(comm, q, &c, 1, &n, 10000) == P2P_OK && n == 1 &&
             c.status == P2P_OK;
    }
    ok = ok && std::memcmp(s.data(), r.data(), len) == 0;
    ok = p2p_mem_deregister(sm) == P2P_OK && ok;
    return p2p_mem_deregister(rm) == P2P_OK && ok;
}

/** The child's checks; returns 0, or the number of the first that failed
 *  (its exit status). */
int child_checks(p2p_context_h ctx, p2p_bootstrap_h bs, p2p_comm_h comm, p2p_mem_h mem,
                 void *buf, size_t len, void *alloc, p2p_mem_h alloc_mem) {
    // The parent's handles: unknown here.
    if (p2p_comm_send(comm, 0, 1, buf, len, mem, nullptr) != P2P_ERR_INVALID_HANDLE) return 1;
    size_t n = 0;
    if (p2p_comm_pending(comm, P2P_QUEUE_SEND, &n) != P2P_ERR_INVALID_HANDLE) return 2;
    p2p_bootstrap_info_t info{};
    if (p2p_bootstrap_query(bs, &info) != P2P_ERR_INVALID_HANDLE) return 3;
    // Releasing them releases nothing (the parent's UCX worker, its
    // shared memory and threads stay as they are).
    if (p2p_mem_deregister(mem) != P2P_ERR_INVALID_HANDLE) return 4;
    if (p2p_comm_destroy(comm) != P2P_ERR_INVALID_HANDLE) return 5;
    if (p2p_bootstrap_destroy(bs) != P2P_ERR_INVALID_HANDLE) return 6;
    if (p2p_context_destroy(ctx) != P2P_ERR_INVALID_HANDLE) return 7;
    // The child's view of a shared allocation is its own to unmap.
    if (p2p_mem_free(alloc, alloc_mem) != P2P_OK) return 14;
    // Its own objects work.
    p2p_context_h c2 = nullptr;
    p2p_bootstrap_h b2 = nullptr;
    p2p_comm_h m2 = nullptr;
    if (p2p_context_create(nullptr, &c2) != P2P_OK) return 8;
    if (p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &b2) != P2P_OK) return 9;
    if (p2p_comm_create(c2, b2, &m2) != P2P_OK) return 10;
    if (!loopback(c2, m2, 8, 11) || !loopback(c2, m2, size_t(1) << 20, 12)) return 11;
    if (p2p_comm_destroy(m2) != P2P_OK || p2p_bootstrap_destroy(b2) != P2P_OK) return 12;
    // One context left to exit() (its handlers stop what is still running).
    if (p2p_context_create(nullptr, &c2) != P2P_OK) return 13;
    return 0;
}

/** The exit status of child pid, waited for at most 60 s (then killed):
 *  false, with a failure recorded, when it hung or died of a signal. */
::testing::AssertionResult child_exit(pid_t pid, int *code) {
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 600 && got == 0; ++i) {
        got = ::waitpid(pid, &status, WNOHANG);
        if (got == 0) ::usleep(100 * 1000);
    }
    if (got == 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return ::testing::AssertionFailure() << "the forked child hung";
    }
    if (got != pid || !WIFEXITED(status)) {
        return ::testing::AssertionFailure()
               << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    *code = WEXITSTATUS(status);
    return ::testing::AssertionSuccess();
}

class ApiFork : public ApiFixture {};

} // namespace

TEST_F(ApiFork, ChildStartsWithoutTheParentsHandlesAndTheParentsKeepWorking) {
    // The parent's context has moved data (UCX worker, progress thread and
    // same-host state all in use) and holds a registration at the fork.
    ASSERT_TRUE(loopback(ctx_, comm_, size_t(1) << 20, 1));
    Buf held(4096, 0x11);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, held.data(), held.size(), &mem));
    const size_t kAlloc = size_t(1) << 20;
    void *alloc = nullptr;
    p2p_mem_h alloc_mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_alloc(ctx_, 2 * kAlloc, -1, &alloc, &alloc_mem));
    std::fflush(stdout);  // the child's exit() flushes its copy too
    std::fflush(stderr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // exit(), not _exit: the library's exit handlers run in the child.
        std::exit(child_checks(ctx_, bs_, comm_, mem, held.data(), held.size(), alloc,
                               alloc_mem));
    }
    int code = -1;
    ASSERT_TRUE(child_exit(pid, &code));
    EXPECT_EQ(0, code) << "child check " << code << " failed";
    // The parent's objects are untouched by what the child released.
    EXPECT_TRUE(loopback(ctx_, comm_, size_t(1) << 20, 2));
    EXPECT_TRUE(loopback(ctx_, comm_, 8, 3));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
    // The shared allocation is still mapped and registered here.
    uint8_t *a = static_cast<uint8_t *>(alloc);
    std::memset(a, 0x5a, kAlloc);
    std::memset(a + kAlloc, 0, kAlloc);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 4, a + kAlloc, kAlloc, alloc_mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 4, a, kAlloc, alloc_mem, nullptr));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_RECV).status);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    EXPECT_EQ(0, std::memcmp(a, a + kAlloc, kAlloc));
    EXPECT_EQ(P2P_OK, p2p_mem_free(alloc, alloc_mem));
}

// UCX 1.13 has no fork handler for its async thread, which tcp needs (it
// accepts connections there): in a child of a process whose context ran
// it, every tcp operation waited forever -- a 10-byte send to itself never
// completed, and p2p_comm_destroy waited out P2P_PEER_TIMEOUT_MS. Now the
// child's context is refused at once (P2P_ERR_UNSUPPORTED) when UCX_TLS
// allows tcp, and limited to shared memory, which works, when the user
// named no transports (core/fork_ucx.h).
TEST(ApiForkUcxAsync, ChildOfATcpContextIsRefusedTcpAndGetsSharedMemory) {
    p2ptest::ScopedEnv tls("UCX_TLS", "tcp,self");
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));  // tcp starts UCX's async thread
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    ASSERT_EQ(P2P_OK, p2p_comm_create(ctx, bs, &comm));
    ASSERT_TRUE(loopback(ctx, comm, 8, 1));
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        p2p_context_h c = nullptr;
        if (p2p_context_create(nullptr, &c) != P2P_ERR_UNSUPPORTED || c != nullptr) _exit(1);
        ::unsetenv("UCX_TLS");
        p2p_bootstrap_h b = nullptr;
        p2p_comm_h m = nullptr;
        if (p2p_context_create(nullptr, &c) != P2P_OK) _exit(2);
        if (p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &b) != P2P_OK) _exit(3);
        if (p2p_comm_create(c, b, &m) != P2P_OK) _exit(4);
        if (!loopback(c, m, 8, 2) || !loopback(c, m, size_t(1) << 20, 3)) _exit(5);
        if (p2p_comm_destroy(m) != P2P_OK || p2p_bootstrap_destroy(b) != P2P_OK) _exit(6);
        std::exit(p2p_context_destroy(c) == P2P_OK ? 0 : 7);
    }
    int code = -1;
    EXPECT_TRUE(child_exit(pid, &code));
    EXPECT_EQ(0, code) << "child check " << code << " failed";
    EXPECT_TRUE(loopback(ctx, comm, 8, 4));  // the parent's tcp context still works
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm));
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
    EXPECT_EQ(P2P_OK, p2p_context_destroy(ctx));
}
