/*
 * api_test: destroying a communicator or deregistering memory while other
 * threads post and poll on it. The per-message calls look handles up
 * without a reference count (core/rcu.h); these races must end in a clean
 * status, never in a use after free (CI also runs this under ASAN and
 * TSAN).
 */
#include "api_util.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using apitest::ApiFixture;
using apitest::Buf;

namespace {

bool one_of(p2p_status_t st, std::initializer_list<p2p_status_t> ok) {
    for (p2p_status_t s : ok) {
        if (st == s) return true;
    }
    return false;
}

} // namespace

TEST_F(ApiFixture, CommDestroyRacingWithPostsAndPolls) {
    Buf b(4096);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), b.size(), &mem));
    for (int round = 0; round < 20; ++round) {
        p2p_comm_h comm = nullptr;
        ASSERT_EQ(P2P_OK, p2p_comm_create(ctx_, bs_, &comm));
        std::atomic<long> calls{0};
        std::atomic<bool> bad{false};
        std::vector<std::thread> th;
        for (int t = 0; t < 2; ++t) {
            th.emplace_back([&, t] {
                uint8_t *slot = b.data() + 1024 * t;
                p2p_block_t blk{0, uint32_t(t), slot + 512, 8, mem, nullptr};
                for (uint32_t i = 0;; ++i) {
                    p2p_status_t r = p2p_comm_recv(comm, 0, uint32_t(t), slot, 8, mem, nullptr);
                    p2p_status_t s = (i % 2 == 0)
                        ? p2p_comm_send(comm, 0, uint32_t(t), slot + 512, 8, mem, nullptr)
                        : p2p_comm_send_batch(comm, &blk, 1, nullptr);
                    p2p_completion_t e[8];
                    size_t n = 0;
                    p2p_status_t p = p2p_comm_poll(comm, (i % 2) ? P2P_QUEUE_SEND
                                                                 : P2P_QUEUE_RECV,
                                                   e, 8, &n);
                    for (p2p_status_t st : {r, s, p}) {
                        if (!one_of(st, {P2P_OK, P2P_ERR_SHUTDOWN, P2P_ERR_INVALID_HANDLE})) {
                            bad.store(true);
                        }
                    }
                    calls.fetch_add(1);
                    if (p == P2P_ERR_INVALID_HANDLE) return;  // destroyed
                }
            });
        }
        while (calls.load() < 200) std::this_thread::yield();
        EXPECT_EQ(P2P_OK, p2p_comm_destroy(comm));
        for (auto &x : th) x.join();
        EXPECT_FALSE(bad.load()) << "a call racing with destroy returned another status";
        p2p_completion_t e;
        size_t n = 0;
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_poll(comm, P2P_QUEUE_RECV, &e, 1, &n));
    }
    // Every operation was completed or cancelled by its communicator's
    // destroy: nothing holds the registration any more.
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

TEST_F(ApiFixture, DeregisterRacingWithPosts) {
    for (int round = 0; round < 20; ++round) {
        Buf b(1024);
        p2p_mem_h mem = nullptr;
        ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), b.size(), &mem));
        std::atomic<long> posted{0};
        std::atomic<bool> stop{false}, bad{false};
        long completed = 0;
        std::thread poster([&] {
            // Matched pairs to self; keep polling so the registration's
            // operations drain and the deregistration can succeed.
            for (uint32_t i = 0; !stop.load(); ++i) {
                p2p_status_t r = p2p_comm_recv(comm_, 0, i, b.data(), 8, mem, nullptr);
                if (r == P2P_OK) {
                    p2p_status_t s = p2p_comm_send(comm_, 0, i, b.data() + 512, 8, mem, nullptr);
                    if (s != P2P_OK) bad.store(true);  // its receive held mem
                    posted.fetch_add(2);
                } else if (r != P2P_ERR_INVALID_HANDLE) {
                    bad.store(true);
                }
                p2p_completion_t e[8];
                size_t n = 0;
                for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
                    if (p2p_comm_poll(comm_, q, e, 8, &n) != P2P_OK) bad.store(true);
                    completed += static_cast<long>(n);
                }
            }
        });
        while (posted.load() < 100) std::this_thread::yield();
        p2p_status_t st;
        do {
            st = p2p_mem_deregister(mem);
            if (st == P2P_ERR_BUSY) std::this_thread::yield();
        } while (st == P2P_ERR_BUSY);
        EXPECT_EQ(P2P_OK, st);
        // From here on every post naming mem fails.
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
                  p2p_comm_recv(comm_, 0, 1, b.data(), 8, mem, nullptr));
        stop.store(true);
        poster.join();
        EXPECT_FALSE(bad.load());
        // Every operation posted completes exactly once: drain the rest.
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (completed < posted.load() && std::chrono::steady_clock::now() < until) {
            p2p_completion_t e[8];
            size_t n = 0;
            for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
                ASSERT_EQ(P2P_OK, p2p_comm_poll(comm_, q, e, 8, &n));
                completed += static_cast<long>(n);
            }
        }
        EXPECT_EQ(posted.load(), completed);
        EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
        EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    }
}

// Registrations made while another thread destroys the context: each one
// either fails or is released with the context -- none outlives it (its
// handle would still deregister, and it would pin the context's memory).
TEST(ApiRace, RegisterRacingWithContextDestroy) {
    Buf b(4096);
    for (int round = 0; round < 40; ++round) {
        p2p_context_h ctx = nullptr;
        ASSERT_EQ(P2P_OK, p2p_context_create(nullptr, &ctx));
        std::vector<p2p_mem_h> got;
        std::atomic<bool> go{false};
        bool bad = false;
        std::thread reg([&] {
            go.store(true);
            for (;;) {
                p2p_mem_h m = nullptr;
                p2p_status_t st = p2p_mem_register(ctx, b.data(), b.size(), &m);
                if (st == P2P_ERR_INVALID_HANDLE) return;
                if (st != P2P_OK) bad = true;
                if (st != P2P_OK) return;
                got.push_back(m);
            }
        });
        while (!go.load()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
        ASSERT_EQ(P2P_OK, p2p_context_destroy(ctx));
        reg.join();
        EXPECT_FALSE(bad);
        size_t alive = 0;
        for (p2p_mem_h m : got) alive += p2p_mem_deregister(m) != P2P_ERR_INVALID_HANDLE;
        EXPECT_EQ(0u, alive) << "round " << round << ": of " << got.size()
                             << " registrations, these outlived their context";
    }
}
