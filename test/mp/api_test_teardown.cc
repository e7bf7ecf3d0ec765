/*
 * api_test: the end of a communicator and of its context in one process
 * (rank 0 of 1): shutdown, destroy with operations pending and completions
 * unpopped, a context destroyed under a waiter.
 */
#include "api_util.h"

#include <atomic>
#include <chrono>
#include <thread>

using apitest::ApiFixture;
using apitest::bogus_handle;
using apitest::bounded;
using apitest::Buf;

TEST_F(ApiFixture, ShutdownCancelsAndRejects) {
    Buf b(1024);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 1024, &mem));
    for (uint32_t t = 0; t < 3; ++t) {
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 100 + t, b.data() + t * 8, 8, mem,
                                        reinterpret_cast<void *>(uintptr_t(t + 1))));
    }
    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_)); // idempotent
    std::set<uintptr_t> got;
    for (int i = 0; i < 3; ++i) {
        p2p_completion_t c = wait_one(P2P_QUEUE_RECV, 5000);
        EXPECT_EQ(P2P_ERR_CANCELED, c.status);
        EXPECT_TRUE(got.insert(reinterpret_cast<uintptr_t>(c.user_context)).second);
    }
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    EXPECT_EQ(P2P_ERR_SHUTDOWN, p2p_comm_recv(comm_, 0, 1, b.data(), 8, mem, nullptr));
    EXPECT_EQ(P2P_ERR_SHUTDOWN, p2p_comm_send(comm_, 0, 1, b.data(), 8, mem, nullptr));
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// ------------------------------------------------------------------ teardown

TEST(ApiTeardown, ContextDestroyWithLiveCommAndPendingReceives) {
    p2p_context_h ctx = nullptr;
    p2p_bootstrap_h bs = nullptr;
    p2p_comm_h comm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
    ASSERT_EQ(P2P_OK, p2p_bootstrap_create(P2P_BOOTSTRAP_SINGLE, &bs));
    ASSERT_EQ(P2P_OK, p2p_comm_create(ctx, bs, &comm));
    Buf b(size_t(1) << 20);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx, b.data(), b.size(), &mem));
    for (uint32_t t = 0; t < 4; ++t) {
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm, 0, t, b.data() + t * 1024, 1024, mem,
                                        nullptr));
    }
    // An undelivered completion and an unmatched large send as well.
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm, 0, 0, b.data() + 8192, 16, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm, 0, 999, b.data(), b.size(), mem, nullptr));
    p2p_status_t st = P2P_ERR_TRANSPORT;
    bounded("p2p_context_destroy with a live communicator", 20,
            [&] { st = p2p_context_destroy(ctx); });
    EXPECT_EQ(P2P_OK, st);
    size_t n = 0;
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_pending(comm, P2P_QUEUE_RECV, &n));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_destroy(comm));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_mem_deregister(mem));
    EXPECT_EQ(P2P_OK, p2p_bootstrap_destroy(bs));
}

// A thread blocked in p2p_comm_wait holds the communicator while another
// destroys the context: the destroy must still cancel its receive (the
// waiter returns it) before the registration under it goes away.
TEST_F(ApiFixture, ContextDestroyWakesAWaiterOnItsCommunicator) {
    Buf b(4096);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), b.size(), &mem));
    void *uc = reinterpret_cast<void *>(uintptr_t(0x42));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 42, b.data(), 4096, mem, uc));
    p2p_status_t wst = P2P_ERR_TRANSPORT;
    p2p_completion_t e{};
    size_t n = 0;
    std::atomic<bool> entered{false};
    std::thread waiter([&] {
        entered = true;
        wst = p2p_comm_wait(comm_, P2P_QUEUE_RECV, &e, 1, &n, 30000);
    });
    while (!entered) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // inside the wait
    p2p_status_t st = P2P_ERR_TRANSPORT;
    bounded("p2p_context_destroy under a waiter", 20,
            [&] { st = p2p_context_destroy(ctx_); });
    EXPECT_EQ(P2P_OK, st);
    bounded("the waiter after p2p_context_destroy", 10, [&] { waiter.join(); });
    ASSERT_EQ(P2P_OK, wst);
    ASSERT_EQ(1u, n);
    EXPECT_EQ(P2P_ERR_CANCELED, e.status);
    EXPECT_EQ(uc, e.user_context);
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &e, 1, &n, 0));
    ctx_ = nullptr;   // destroyed above, with the communicator
    comm_ = nullptr;
}

TEST_F(ApiFixture, CommDestroyDropsUnpoppedCompletions) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 3, b.data(), 8, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 3, b.data() + 8, 8, mem, nullptr));
    for (int i = 0; i < 200 && pending(P2P_QUEUE_RECV) != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm_));
    comm_ = nullptr;
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem)) << "destroy left ops in flight";
}
