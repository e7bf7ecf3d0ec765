/*
 * api_test: p2p_comm_signal wakes p2p_comm_wait (a thread blocked there, or
 * the next wait when none is), per queue, after entries and shutdown, in
 * every progress mode and both thread modes; and its error paths.
 */
#include "api_util.h"

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using apitest::ApiFixture;
using apitest::bounded;
using apitest::Buf;
using apitest::mode_name;

namespace {

class Signal : public apitest::ModesFixture {
protected:
    /** p2p_comm_wait on q for at most timeout_ms; *n set to what it says. */
    p2p_status_t wait(p2p_queue_t q, int timeout_ms, size_t *n) {
        p2p_completion_t c[2];
        *n = 99;
        return p2p_comm_wait(comm_, q, c, 2, n, timeout_ms);
    }
};

} // namespace

// A thread blocked with no deadline returns as soon as another thread
// signals its queue (also under P2P_THREAD_SERIALIZED, where the wait
// sleeps on the worker's events and the signal is the one call allowed
// to run beside it).
TEST_P(Signal, WakesAWaitBlockedForever) {
    for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
        p2p_status_t st = P2P_ERR_TRANSPORT;
        size_t n = 0;
        std::thread waiter([&] { st = wait(q, -1, &n); });
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it block
        EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, q));
        bounded("p2p_comm_wait(-1) after p2p_comm_signal", 20, [&] { waiter.join(); });
        EXPECT_EQ(P2P_ERR_INTERRUPTED, st);
        EXPECT_EQ(0u, n);
        // The signal woke that wait and is gone: the next one times out.
        EXPECT_EQ(P2P_ERR_TIMEOUT, wait(q, 0, &n));
        EXPECT_EQ(0u, n);
    }
}

// With nobody waiting the signal is kept for the next wait, even one that
// does not block; two signals are kept as one; the other queue never sees it.
TEST_P(Signal, KeptForTheNextWaitOfItsQueueOnly) {
    size_t n = 0;
    EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
    EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
    EXPECT_EQ(P2P_ERR_TIMEOUT, wait(P2P_QUEUE_SEND, 0, &n));
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_ERR_INTERRUPTED, wait(P2P_QUEUE_RECV, 0, &n));
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_ERR_TIMEOUT, wait(P2P_QUEUE_RECV, 50, &n));
    EXPECT_EQ(0u, n);
}

// Entries are returned before a signal is reported, and leave it kept.
TEST_P(Signal, EntriesComeFirst) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 3, b.data(), 8, mem, nullptr));
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 3, b.data() + 32, 8, mem, nullptr));
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    // The receive completes inside progress: wait for it to be queued.
    size_t queued = 1;
    for (int i = 0; i < 2000 && queued != 0; ++i) {  // serialized: the backstop runs between calls
        ASSERT_EQ(P2P_OK, p2p_comm_pending(comm_, P2P_QUEUE_RECV, &queued));
        if (queued != 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(0u, queued);
    EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
    p2p_completion_t c{};
    size_t n = 0;
    EXPECT_EQ(P2P_OK, p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, 1000));
    EXPECT_EQ(1u, n);
    EXPECT_EQ(P2P_OK, c.status);
    EXPECT_EQ(8u, c.bytes);
    EXPECT_EQ(P2P_ERR_INTERRUPTED, wait(P2P_QUEUE_RECV, 0, &n));
    EXPECT_EQ(0u, n);
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// A shut-down communicator accepts the signal; its waits still report
// P2P_ERR_SHUTDOWN, which is final.
TEST_P(Signal, ShutdownTakesPrecedence) {
    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_SEND));
    size_t n = 0;
    EXPECT_EQ(P2P_ERR_SHUTDOWN, wait(P2P_QUEUE_SEND, -1, &n));
    EXPECT_EQ(0u, n);
}

// The modes whose waits sleep differently: on the queue's condition
// variable (P2P_THREAD_MULTI), on the worker's events, spinning (busy).
INSTANTIATE_TEST_SUITE_P(Modes, Signal, apitest::all_modes(), apitest::modes_name);

class ApiSignal : public ApiFixture {};

TEST_F(ApiSignal, ErrorPaths) {
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_signal(nullptr, P2P_QUEUE_SEND));
    int bad = 7;
    p2p_queue_t q;
    std::memcpy(&q, &bad, sizeof(q));
    EXPECT_EQ(P2P_ERR_INVALID_PARAM, p2p_comm_signal(comm_, q));
    EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm_));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
    comm_ = nullptr;  // destroyed: the fixture must not destroy it again
}

// Every thread blocked on the queue returns, not just one
// (P2P_THREAD_MULTI: concurrent waits are allowed there).
TEST_F(ApiSignal, WakesEveryBlockedWait) {
    constexpr int kWaiters = 3;
    p2p_status_t st[kWaiters];
    std::vector<std::thread> waiters;
    std::atomic<int> started{0};
    for (int i = 0; i < kWaiters; ++i) {
        st[i] = P2P_ERR_TRANSPORT;
        waiters.emplace_back([&, i] {
            p2p_completion_t c;
            size_t n = 0;
            started.fetch_add(1);
            st[i] = p2p_comm_wait(comm_, P2P_QUEUE_RECV, &c, 1, &n, -1);
        });
    }
    // Every thread running (a loaded machine may start one late), then
    // time for each to block in its wait.
    bounded("three waiter threads start", 20, [&] {
        while (started.load() < kWaiters) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(P2P_OK, p2p_comm_signal(comm_, P2P_QUEUE_RECV));
    bounded("three p2p_comm_wait(-1) after one signal", 20, [&] {
        for (std::thread &t : waiters) t.join();
    });
    for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(P2P_ERR_INTERRUPTED, st[i]) << i;
}
