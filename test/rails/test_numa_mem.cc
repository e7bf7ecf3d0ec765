// p2p_mem_alloc / p2p_mem_free: memory on the requested NUMA node, usable
// for send/recv through a 1-rank communicator, and bad arguments refused.
#include <ucxp2p/p2p.h>
#include <ucxp2p/p2p_mem.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
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

TEST_F(NumaMem, BadArguments) {
    void *p = nullptr;
    p2p_mem_h mem = nullptr;
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 0, -1, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -1, nullptr, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -1, &p, nullptr));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, -2, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_mem_alloc(ctx_, 64, 1000, &p, &mem));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_alloc(nullptr, 64, -1, &p, &mem));
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

} // namespace
