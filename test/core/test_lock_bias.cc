// The worker lock's biased mode (P2P_THREAD_MULTI, P2P_LOCK_BIAS=on): who
// gets the bias, who takes it away, and that the biased thread, the helper
// thread and other user threads never hold the lock at once. Built into
// core_test, which CI also runs under ThreadSanitizer.
#include "core/fence.h"
#include "core/lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

// set_biased() keeps the plain lock where the kernel has no membarrier.
bool make_biased(Mutex &mu) {
    mu.set_biased();
    return fence_detail::g_asymmetric.load();
}

#define REQUIRE_BIASED(mu)                                                  \
    if (!make_biased(mu)) GTEST_SKIP() << "no membarrier: the lock stays plain"

// Lock and unlock n times from this thread.
void lock_n(Mutex &mu, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
        std::lock_guard<Mutex> g(mu);
    }
}

}  // namespace

TEST(BiasedMutex, ARunOfLocksByOneThreadEarnsTheBias) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    EXPECT_EQ(0u, mu.biased_thread());
    lock_n(mu, Mutex::kFirstBiasAfter - 1);
    EXPECT_EQ(0u, mu.biased_thread()) << "biased before the run was complete";
    lock_n(mu, 1);
    EXPECT_EQ(this_thread_id(), mu.biased_thread());
    const uint64_t before = mu.frequent_locks();
    lock_n(mu, 10);
    ASSERT_TRUE(mu.try_lock());
    mu.unlock();
    EXPECT_EQ(before + 11, mu.frequent_locks()) << "the biased thread took the plain lock";
}

TEST(BiasedMutex, AnotherUserThreadRevokesAndTheRunDoubles) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    lock_n(mu, Mutex::kFirstBiasAfter);
    ASSERT_EQ(this_thread_id(), mu.biased_thread());
    std::thread([&] { lock_n(mu, 1); }).join();
    EXPECT_EQ(0u, mu.biased_thread());
    EXPECT_EQ(2 * Mutex::kFirstBiasAfter, mu.bias_after());
    // The same run no longer earns it; the doubled one does.
    lock_n(mu, Mutex::kFirstBiasAfter);
    EXPECT_EQ(0u, mu.biased_thread());
    lock_n(mu, Mutex::kFirstBiasAfter);
    EXPECT_EQ(this_thread_id(), mu.biased_thread());
}

TEST(BiasedMutex, ABiasMovesToTheThreadThatNowMakesTheCalls) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    lock_n(mu, Mutex::kFirstBiasAfter);
    ASSERT_EQ(this_thread_id(), mu.biased_thread());
    uintptr_t other = 0;
    std::thread([&] {
        other = this_thread_id();
        lock_n(mu, 2 * Mutex::kFirstBiasAfter);  // revokes, then earns it
        EXPECT_EQ(other, mu.biased_thread());
    }).join();
    EXPECT_NE(this_thread_id(), other);
    lock_n(mu, 1);  // back here: revoked again
    EXPECT_EQ(0u, mu.biased_thread());
}

TEST(BiasedMutex, TheHelperKeepsTheBiasOfAnActiveThreadAndRevokesAnIdleOne) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    lock_n(mu, Mutex::kFirstBiasAfter);
    ASSERT_EQ(this_thread_id(), mu.biased_thread());
    auto helper_turn = [&] {
        std::thread([&] {
            HelperLock g(mu);
        }).join();
    };
    lock_n(mu, 3);
    helper_turn();  // it locked since the helper last looked: kept
    EXPECT_EQ(this_thread_id(), mu.biased_thread());
    EXPECT_EQ(Mutex::kFirstBiasAfter, mu.bias_after());
    helper_turn();  // no lock in between: the biased thread went quiet
    EXPECT_EQ(0u, mu.biased_thread());
    EXPECT_EQ(Mutex::kFirstBiasAfter, mu.bias_after()) << "a helper revocation must not slow the next bias";
}

TEST(BiasedMutex, OthersWaitWhileTheBiasedThreadHoldsIt) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    lock_n(mu, Mutex::kFirstBiasAfter);
    ASSERT_EQ(this_thread_id(), mu.biased_thread());
    for (int kind = 0; kind < 3; ++kind) {  // lock, try_lock, lock_helper
        if (kind != 0) lock_n(mu, 2 * mu.bias_after());  // earn it back
        ASSERT_EQ(this_thread_id(), mu.biased_thread()) << kind;
        mu.lock();
        std::atomic<bool> in{false};
        std::thread other([&] {
            if (kind == 0) {
                mu.lock();
            } else if (kind == 1) {
                EXPECT_TRUE(mu.try_lock());  // waits out the biased holder
            } else {
                mu.lock_helper();
            }
            in.store(true);
            mu.unlock();
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_FALSE(in.load()) << "kind " << kind << " got in while the biased thread held it";
        mu.unlock();
        other.join();
        EXPECT_TRUE(in.load());
    }
}

TEST(BiasedMutex, TheBiasedThreadWaitsWhileTheHelperHoldsIt) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    lock_n(mu, Mutex::kFirstBiasAfter);
    lock_n(mu, 1);  // so the helper keeps the bias
    std::atomic<bool> held{false};
    std::chrono::steady_clock::time_point released;  // read after join()
    std::thread helper([&] {
        mu.lock_helper();
        held.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        released = std::chrono::steady_clock::now();
        mu.unlock();
    });
    while (!held.load()) std::this_thread::yield();
    EXPECT_EQ(this_thread_id(), mu.biased_thread());
    EXPECT_FALSE(mu.try_lock()) << "try_lock got in beside the helper";
    mu.lock();
    const auto got_in = std::chrono::steady_clock::now();
    mu.unlock();
    helper.join();
    // Against the helper's release (a minimum wait from when this thread
    // saw it hold could fail if this thread was descheduled in between).
    EXPECT_GE(got_in, released) << "the biased thread got in while the helper held it";
}

// The three kinds of lockers at full speed: every increment lands once
// (a torn read-modify-write would lose some; TSAN checks the ordering).
TEST(BiasedMutex, BiasedHelperAndOtherThreadsExclude) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    uint64_t counter = 0;  // plain: only the lock protects it
    constexpr uint64_t kMain = 200000, kOther = 2000;
    std::atomic<bool> done{false};
    std::atomic<uint64_t> helper_turns{0}, biased_seen{0};
    auto bump = [&] {
        uint64_t v = counter;
        counter = v + 1;
    };
    std::thread helper([&] {
        while (!done.load(std::memory_order_acquire)) {
            {
                HelperLock g(mu);
                uint64_t v = counter;
                std::this_thread::yield();
                counter = v + 1;
            }
            helper_turns.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    std::thread other([&] {
        for (uint64_t i = 0; i < kOther; ++i) {
            std::lock_guard<Mutex> g(mu);
            bump();
            if (i % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    });
    for (uint64_t i = 0; i < kMain; ++i) {
        if (i % 2 == 0) {
            std::lock_guard<Mutex> g(mu);
            bump();
        } else {
            while (!mu.try_lock()) {
            }
            bump();
            mu.unlock();
        }
        if (mu.biased_thread() == this_thread_id()) biased_seen.fetch_add(1);
    }
    other.join();
    done.store(true, std::memory_order_release);
    helper.join();
    EXPECT_EQ(kMain + kOther + helper_turns.load(), counter);
    EXPECT_GT(helper_turns.load(), 0u);
    EXPECT_GT(biased_seen.load(), 0u) << "the main thread never held the bias: nothing was tested";
    EXPECT_GT(mu.frequent_locks(), 0u);
}

TEST(BiasedMutex, ManyThreadsSettleOnThePlainLock) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    uint64_t counter = 0;
    constexpr int kThreads = 6, kIters = 20000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < kIters; ++i) {
                std::lock_guard<Mutex> g(mu);
                ++counter;
                if (i % 1000 == 0) std::this_thread::yield();
            }
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(static_cast<uint64_t>(kThreads) * kIters, counter);
    EXPECT_LE(mu.bias_after(), Mutex::kMaxBiasAfter);
}

namespace {

/** Polls waited_on() until it says true, at most 20 s. */
void await_waited_on(const Mutex &mu) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!mu.waited_on() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// Holds mu on this thread (as the helper when helper is set), starts a
// thread that locks it, and checks what waited_on() says before the thread
// comes, while it sleeps on the lock, and once it got in and left.
void expect_waited_on_follows_a_sleeper(Mutex &mu, bool helper) {
    std::atomic<bool> in{false};
    if (helper) mu.lock_helper(); else mu.lock();
    EXPECT_FALSE(mu.waited_on()) << "nobody waits yet";
    std::thread t([&] {
        std::lock_guard<Mutex> g(mu);
        in.store(true);
    });
    // It sleeps on the futex once it found the lock held: state 2.
    await_waited_on(mu);
    EXPECT_TRUE(mu.waited_on()) << "a thread blocked in lock() was not seen";
    EXPECT_FALSE(in.load()) << "the thread got in while the lock was held";
    mu.unlock();
    t.join();
    EXPECT_TRUE(in.load());
    EXPECT_FALSE(mu.waited_on()) << "free, and nobody waits";
}

}  // namespace

// The progress thread yields after a round when an application thread
// sleeps on the worker lock (core/progress.cc); waited_on() tells it.
TEST(MutexWaitedOn, PlainLockSeesAThreadSleepingOnIt) {
    Mutex mu;
    expect_waited_on_follows_a_sleeper(mu, /*helper=*/false);
}

TEST(MutexWaitedOn, BiasedLockHeldByTheHelperSeesAUserThreadWait) {
    Mutex mu;
    REQUIRE_BIASED(mu);
    // A user thread held the bias; the next one finds the helper inside.
    std::thread([&] { lock_n(mu, Mutex::kFirstBiasAfter); }).join();
    expect_waited_on_follows_a_sleeper(mu, /*helper=*/true);
}

// The serialized backstop (core/progress.cc, run_backstop) ends its rounds
// when the application tries the lock it holds as the rare side; the
// application then waits in wait_rare with owner_ set, and waited_on()
// must say so (no futex: the plain lock's state stays 0 in this mode).
TEST(MutexWaitedOn, AsymmetricRareHolderSeesTheApplicationTry) {
    Mutex mu;
    mu.set_asymmetric();
    ASSERT_TRUE(mu.try_lock_rare()) << "nobody holds the frequent side";
    EXPECT_FALSE(mu.waited_on()) << "nobody tries yet";
    std::atomic<bool> in{false};
    std::thread t([&] {
        std::lock_guard<Mutex> g(mu);  // the frequent side: waits for the rare
        in.store(true);
    });
    await_waited_on(mu);
    EXPECT_TRUE(mu.waited_on()) << "the application's lock() was not seen";
    EXPECT_FALSE(in.load()) << "the frequent side got in past the rare holder";
    mu.unlock_rare();
    t.join();
    EXPECT_TRUE(in.load());
    EXPECT_FALSE(mu.waited_on()) << "the frequent side left: nobody tries";
    EXPECT_TRUE(mu.try_lock_rare()) << "the rare side gets in again";
    mu.unlock_rare();
}
