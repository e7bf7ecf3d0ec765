// Concurrency of the core's building blocks without UCX: the completion
// queue, the handle registry and read sections. Built into core_test, which
// CI also runs under ThreadSanitizer.
#include "core/cq.h"
#include "core/fence.h"
#include "core/handles.h"
#include "core/lock.h"
#include "core/rcu.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <thread>
#include <vector>

using namespace ucxp2p;

TEST(CompletionQueue, ProducersAndConsumersLoseNothing) {
    CompletionQueue q;
    constexpr int kProducers = 4, kPerProducer = 5000;
    q.add_pending(kProducers * kPerProducer);
    // Producers are serialized by the caller, as the worker lock does.
    std::mutex producer_mu;
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&q, &producer_mu, p] {
            for (int i = 0; i < kPerProducer; ++i) {
                p2p_completion_t e{};
                e.peer = static_cast<uint32_t>(p);
                e.tensor_id = static_cast<uint32_t>(i);
                std::lock_guard<std::mutex> lock(producer_mu);
                q.push(e);
            }
        });
    }
    std::atomic<int> popped{0};
    std::vector<std::vector<int>> last(2, std::vector<int>(kProducers, -1));
    std::vector<std::thread> consumers;
    for (int c = 0; c < 2; ++c) {
        consumers.emplace_back([&, c] {
            p2p_completion_t buf[16];
            while (popped.load() < kProducers * kPerProducer) {
                if (!q.wait_nonempty(10, q.signal_count())) continue;
                size_t n = q.pop(buf, 16);
                for (size_t i = 0; i < n; ++i) {
                    // FIFO per producer, as seen by one consumer.
                    int &l = last[c][buf[i].peer];
                    EXPECT_LT(l, static_cast<int>(buf[i].tensor_id));
                    l = static_cast<int>(buf[i].tensor_id);
                }
                popped.fetch_add(static_cast<int>(n));
            }
        });
    }
    for (auto &t : producers) t.join();
    for (auto &t : consumers) t.join();
    EXPECT_EQ(kProducers * kPerProducer, popped.load());
    EXPECT_EQ(0u, q.pending());
    EXPECT_TRUE(q.empty());
}

TEST(CompletionQueue, FifoAcrossSegmentsAndPendingCount) {
    CompletionQueue q;
    constexpr uint32_t kN = 1000;  // several segments
    q.add_pending(kN);
    EXPECT_EQ(kN, q.pending());
    p2p_completion_t out[7];
    EXPECT_EQ(0u, q.pop(out, 7));
    uint32_t next = 0;
    for (uint32_t i = 0; i < kN; ++i) {
        p2p_completion_t e{};
        e.tensor_id = i;
        q.push(e);
        EXPECT_EQ(kN - i - 1, q.pending());
        if (i % 3 == 0) {  // interleave partial drains with pushes
            size_t n = q.pop(out, 7);
            for (size_t k = 0; k < n; ++k) EXPECT_EQ(next++, out[k].tensor_id);
        }
    }
    size_t n;
    while ((n = q.pop(out, 7)) > 0) {
        for (size_t k = 0; k < n; ++k) EXPECT_EQ(next++, out[k].tensor_id);
    }
    EXPECT_EQ(kN, next);
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(0u, q.pending());

    // One pop spanning several segment ends (pop copies a run per segment),
    // asked for more than there is.
    constexpr uint32_t kMore = 300;
    for (uint32_t i = 0; i < kMore; ++i) {
        p2p_completion_t e{};
        e.tensor_id = kN + i;
        e.bytes = i;
        q.push(e, /*counted=*/false);
    }
    std::vector<p2p_completion_t> all(kMore + 10);
    ASSERT_EQ(kMore, q.pop(all.data(), all.size()));
    for (uint32_t i = 0; i < kMore; ++i) {
        EXPECT_EQ(kN + i, all[i].tensor_id);
        EXPECT_EQ(i, all[i].bytes);
    }
    EXPECT_TRUE(q.empty());
}

namespace {

/** A lost wake-up would leave the waiter asleep for its whole timeout. */
void expect_push_wakes_waiter_promptly() {
    CompletionQueue q;
    constexpr int kRounds = 200;
    std::atomic<int> woken{0};
    std::atomic<int> round{-1};
    std::thread waiter([&] {
        p2p_completion_t e;
        for (int r = 0; r < kRounds; ++r) {
            round.store(r);
            auto t0 = std::chrono::steady_clock::now();
            bool ok = q.wait_nonempty(10000, q.signal_count());
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0).count();
            EXPECT_TRUE(ok);
            EXPECT_LT(ms, 5000) << "round " << r;
            EXPECT_EQ(1u, q.pop(&e, 1));
            woken.fetch_add(1);
        }
    });
    for (int r = 0; r < kRounds; ++r) {
        while (round.load() < r) std::this_thread::yield();
        if (r % 2 == 0) std::this_thread::yield();  // vary who goes first
        q.add_pending(1);
        q.push(p2p_completion_t{});
        while (woken.load() <= r) std::this_thread::yield();
    }
    waiter.join();
    EXPECT_EQ(kRounds, woken.load());
}

} // namespace

TEST(CompletionQueue, PushWakesABlockedWaiterPromptly) {
    // With membarrier (where the kernel has it): push pays a compiler
    // barrier, the waiter a system call (core/fence.h).
    CompletionQueue warm;  // runs fence_init()
    expect_push_wakes_waiter_promptly();
}

TEST(CompletionQueue, PushWakesABlockedWaiterPromptlyWithFullFences) {
    // The fallback for kernels without membarrier: full fences both sides.
    CompletionQueue warm;
    bool was = fence_detail::g_asymmetric.exchange(false);
    expect_push_wakes_waiter_promptly();
    fence_detail::g_asymmetric.store(was);
}

TEST(CompletionQueue, WaitTimesOutWhenEmpty) {
    CompletionQueue q;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(q.wait_nonempty(50, q.signal_count()));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 45);
    EXPECT_LT(ms, 5000);
}

TEST(Mutex, ExcludesAndSleepingWaitersAllGetIn) {
    // More threads than this machine's cores, so waiters exhaust their spin
    // and sleep on the futex: every increment must still land exactly once
    // (a lost wake-up would hang the join; TSAN checks the ordering).
    Mutex mu;
    uint64_t counter = 0;  // plain: only the lock protects it
    constexpr int kThreads = 6, kIters = 20000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < kIters; ++i) {
                std::lock_guard<Mutex> lock(mu);
                ++counter;
                if (i % 1000 == 0) std::this_thread::yield();  // hold it a while
            }
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(static_cast<uint64_t>(kThreads) * kIters, counter);
}

TEST(Mutex, TryLockFailsWhileHeldAndSucceedsAfter) {
    Mutex mu;
    ASSERT_TRUE(mu.try_lock());
    std::thread other([&] { EXPECT_FALSE(mu.try_lock()); });
    other.join();
    mu.unlock();
    std::thread again([&] {
        EXPECT_TRUE(mu.try_lock());
        mu.unlock();
    });
    again.join();
}

// P2P_THREAD_SERIALIZED's worker lock: the application's side (lock) and
// the backstop's side (try_lock_rare) never hold it at once.
TEST(AsymmetricMutex, FrequentAndRareSidesExclude) {
    Mutex mu;
    mu.set_asymmetric();
    uint64_t counter = 0;  // plain: only the lock protects it
    constexpr uint64_t kIters = 20000;
    std::atomic<bool> done{false};
    uint64_t rare_wins = 0;
    std::thread rare([&] {
        while (!done.load(std::memory_order_acquire)) {
            if (mu.try_lock_rare()) {
                uint64_t v = counter;  // a read-modify-write a race would tear
                std::this_thread::yield();
                counter = v + 1;
                ++rare_wins;
                mu.unlock_rare();
            }
        }
    });
    for (uint64_t i = 0; i < kIters; ++i) {
        mu.lock();
        uint64_t v = counter;
        if (i % 512 == 0) std::this_thread::yield();
        counter = v + 1;
        mu.unlock();
        if (i % 64 == 0) {  // stay out a while: the rare side gets turns
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
    }
    done.store(true, std::memory_order_release);
    rare.join();
    EXPECT_EQ(kIters + rare_wins, counter);
    EXPECT_GT(rare_wins, 0u) << "the rare side never got in: nothing was tested";
    EXPECT_EQ(kIters, mu.frequent_locks());
}

TEST(AsymmetricMutex, RareSideBacksOffAndFrequentSideWaits) {
    Mutex mu;
    mu.set_asymmetric();
    mu.lock();
    std::thread([&] { EXPECT_FALSE(mu.try_lock_rare()); }).join();
    mu.unlock();
    std::atomic<bool> held{false};
    std::chrono::steady_clock::time_point released;  // read after join()
    std::thread rare([&] {
        ASSERT_TRUE(mu.try_lock_rare());
        held.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        released = std::chrono::steady_clock::now();
        mu.unlock_rare();
    });
    while (!held.load()) std::this_thread::yield();
    EXPECT_TRUE(mu.try_lock());  // the frequent side's try_lock waits too
    const auto got_in = std::chrono::steady_clock::now();
    mu.unlock();
    rare.join();
    // Against the holder's release, not a minimum wait from when this
    // thread saw it hold: being descheduled in between could fail that.
    EXPECT_GE(got_in, released) << "the frequent side got in while the rare side held it";
    EXPECT_EQ(1u, mu.frequent_locks() - 1);  // lock() and try_lock() count
}

TEST(Registry, ConcurrentAddGetRemoveNeverReusesIds) {
    Registry<int> reg;
    std::mutex mu;
    std::set<uint64_t> all_ids;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            std::vector<uint64_t> mine;
            for (int i = 0; i < 2000; ++i) {
                uint64_t id = reg.add(std::make_unique<int>(i));
                auto got = reg.get(id);
                ASSERT_TRUE(got);
                EXPECT_EQ(i, *got);
                mine.push_back(id);
                if (i % 2 == 0) {
                    EXPECT_TRUE(reg.remove(id));
                    EXPECT_FALSE(reg.remove(id));  // double destroy detected
                    EXPECT_FALSE(reg.get(id));     // use after destroy detected
                }
            }
            std::lock_guard<std::mutex> lock(mu);
            for (uint64_t id : mine) EXPECT_TRUE(all_ids.insert(id).second) << id;
        });
    }
    for (auto &t : threads) t.join();
    EXPECT_EQ(8000u, all_ids.size());
    EXPECT_EQ(0u, all_ids.count(0));
}


namespace {
// Counts live instances; a lookup must never see one that was destroyed.
struct Tracked {
    static std::atomic<int> live;
    static constexpr uint32_t kAlive = 0xa11fe, kDead = 0xdead;
    std::atomic<uint32_t> state{kAlive};
    int value;
    explicit Tracked(int v) : value(v) { live.fetch_add(1); }
    ~Tracked() {
        state.store(kDead);
        live.fetch_sub(1);
    }
};
std::atomic<int> Tracked::live{0};
} // namespace

/** Two readers look the current object up (counted get, or peek inside a
 *  ReadSection) and check it is alive several times while the writer adds,
 *  removes and (dropping the registry's reference) frees objects. */
void race_removes_with_lookups(bool peek) {
    Tracked::live.store(0);
    {
        Registry<Tracked> reg;
        constexpr int kRounds = 1000;
        std::atomic<uint64_t> current{0};
        std::atomic<bool> stop{false};
        std::atomic<long> hits{0};
        std::vector<std::thread> readers;
        for (int t = 0; t < 2; ++t) {
            readers.emplace_back([&] {
                while (!stop.load()) {
                    std::this_thread::yield();  // 2 cores: let the writer run
                    uint64_t id = current.load();
                    std::optional<ReadSection> rs;  // peek only: get must
                    Registry<Tracked>::Ref r;          // keep it alive alone
                    Tracked *p;
                    if (peek) {
                        rs.emplace();
                        p = reg.peek(id);  // the section alone keeps it alive
                    } else {
                        r = reg.get(id);   // held even if removed now
                        p = r.get();
                    }
                    if (p == nullptr) continue;
                    for (int k = 0; k < 10; ++k) {
                        ASSERT_EQ(Tracked::kAlive, p->state.load());
                    }
                    hits.fetch_add(1);
                }
            });
        }
        for (int i = 0; i < kRounds; ++i) {
            uint64_t id = reg.add(std::make_unique<Tracked>(i));
            ASSERT_NE(0u, id);
            current.store(id);
            std::this_thread::yield();
            if (i == 0) {
                // On a loaded machine the readers may not run at all during
                // the 1000 rounds (~10 ms): let them find the first object
                // at least once, so the race below is known to be exercised.
                auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                while (hits.load() == 0 && std::chrono::steady_clock::now() < deadline) {
                    std::this_thread::yield();
                }
            }
            auto r = reg.remove(id);
            ASSERT_TRUE(r);
            EXPECT_EQ(i, r->value);
            EXPECT_FALSE(reg.remove(id));  // double destroy
            EXPECT_FALSE(reg.get(id));     // use after destroy
        }
        stop.store(true);
        for (auto &t : readers) t.join();
        // Every object was freed by its last holder: nothing leaked.
        EXPECT_EQ(0, Tracked::live.load());
        EXPECT_GT(hits.load(), 0);
    }
    EXPECT_EQ(0, Tracked::live.load());
}

TEST(Registry, RemoveRacingWithLookupsNeverFreesAnObjectInUse) {
    race_removes_with_lookups(false);
}

TEST(Registry, RemoveRacingWithPeeksNeverFreesAnObjectInUse) {
    race_removes_with_lookups(true);
}

TEST(Registry, ForeignAndBogusIdsAreRejected) {
    Registry<int> a;
    Registry<long> b;
    uint64_t ia = a.add(std::make_unique<int>(1));
    uint64_t ib = b.add(std::make_unique<long>(2));
    ASSERT_NE(0u, ia);
    ASSERT_NE(0u, ib);
    EXPECT_NE(ia, ib);  // one sequence for every type
    EXPECT_TRUE(a.get(ia));
    EXPECT_FALSE(a.get(ib));  // a handle of another type
    EXPECT_FALSE(b.get(ia));
    EXPECT_FALSE(b.remove(ia));
    for (uint64_t bogus : {uint64_t(0), uint64_t(1), ia + 1, ia ^ (uint64_t(1) << 40),
                           ~uint64_t(0), uint64_t(0x7fff12345678)}) {
        EXPECT_FALSE(a.get(bogus)) << bogus;
        EXPECT_FALSE(a.remove(bogus)) << bogus;
    }
    EXPECT_EQ(1, *a.get(ia));
}

TEST(Registry, SlotsAreRecycledButIdsAreNot) {
    Registry<int> reg;
    uint64_t first = reg.add(std::make_unique<int>(1));
    ASSERT_TRUE(reg.remove(first));
    // Free slots: a handle of 0 or with no sequence bits matches nothing.
    for (uint64_t bogus : {uint64_t(0), first & 0xfffff, uint64_t(1)}) {
        EXPECT_FALSE(reg.get(bogus)) << bogus;
        EXPECT_FALSE(reg.remove(bogus)) << bogus;
    }
    uint64_t second = reg.add(std::make_unique<int>(2));
    EXPECT_NE(first, second);
    EXPECT_FALSE(reg.get(first));  // the stale id does not reach the new object
    EXPECT_EQ(2, *reg.get(second));
}

TEST(Registry, ForEachAndRemoveEachSeeEveryLiveObject) {
    Tracked::live.store(0);
    {
        Registry<Tracked> reg;
        std::vector<uint64_t> ids;
        for (int i = 0; i < 3000; ++i) ids.push_back(reg.add(std::make_unique<Tracked>(i)));
        for (int i = 0; i < 3000; i += 3) ASSERT_TRUE(reg.remove(ids[i]));
        long sum = 0, n = 0;
        reg.for_each([&](Tracked &t) { sum += t.value; ++n; });
        EXPECT_EQ(2000, n);
        size_t odd = 0;
        reg.remove_each([](Tracked &t) { return t.value % 2 != 0; },
                        [&](Registry<Tracked>::Ref &r) {
                            EXPECT_NE(0, r->value % 2);
                            EXPECT_FALSE(reg.get(ids[r->value])) << "handed over registered";
                            ++odd;
                        });
        size_t expect_odd = 0;
        for (int i = 0; i < 3000; ++i) expect_odd += (i % 3 != 0 && i % 2 != 0);
        EXPECT_EQ(expect_odd, odd);
        for (int i = 0; i < 3000; ++i) {
            bool live = i % 3 != 0 && i % 2 == 0;
            EXPECT_EQ(live, static_cast<bool>(reg.get(ids[i]))) << i;
        }
        EXPECT_EQ(static_cast<int>(2000 - expect_odd), Tracked::live.load());
    }
    EXPECT_EQ(0, Tracked::live.load());  // the registry frees what is left
}

TEST(ReadSection, SynchronizeWaitsForASectionInProgress) {
    std::atomic<bool> inside{false}, sync_started{false}, left{false};
    std::thread reader([&] {
        ReadSection rs;
        inside.store(true);
        while (!sync_started.load()) std::this_thread::yield();
        // Long enough that a synchronize that does not wait returns first.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        left.store(true);
    });
    while (!inside.load()) std::this_thread::yield();
    sync_started.store(true);
    rcu_synchronize();
    EXPECT_TRUE(left.load()) << "rcu_synchronize returned while a section ran";
    reader.join();
    rcu_synchronize();  // no section running: returns at once
}

TEST(ReadSection, ExitedThreadsGiveTheirRecordBack) {
    // Sequential threads reuse one record; the list does not grow per thread.
    auto one_thread = [] { std::thread([] { ReadSection rs; }).join(); };
    one_thread();
    size_t before = rcu_detail::record_count();
    for (int i = 0; i < 50; ++i) one_thread();
    EXPECT_EQ(before, rcu_detail::record_count());
}

TEST(ReadSection, ForkedChildIsNotBlockedByTheParentsOtherThreads) {
    std::atomic<bool> inside{false}, release{false};
    std::thread reader([&] {
        ReadSection rs;
        inside.store(true);
        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (!inside.load()) std::this_thread::yield();
    pid_t pid = fork();
    if (pid == 0) {
        rcu_synchronize();  // the reader does not exist here
        _exit(0);
    }
    ASSERT_GT(pid, 0);
    int status = -1;
    bool exited = false;
    for (int i = 0; i < 1000 && !exited; ++i) {  // up to 10 s
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    release.store(true);
    reader.join();
    ASSERT_TRUE(exited) << "rcu_synchronize in the child waited for a parent's thread";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(Registry, PeekFindsLiveObjectsOnly) {
    Registry<int> reg;
    uint64_t id = reg.add(std::make_unique<int>(7));
    ASSERT_NE(0u, id);
    {
        ReadSection rs;
        int *p = reg.peek(id);
        ASSERT_NE(nullptr, p);
        EXPECT_EQ(7, *p);
        for (uint64_t bogus : {uint64_t(0), uint64_t(1), id + 1, id & 0xfffff,
                               ~uint64_t(0), id ^ (uint64_t(1) << 40)}) {
            EXPECT_EQ(nullptr, reg.peek(bogus)) << bogus;
        }
    }
    ASSERT_TRUE(reg.remove(id));
    ReadSection rs;
    EXPECT_EQ(nullptr, reg.peek(id));  // destroyed
    Registry<long> other;
    EXPECT_EQ(nullptr, other.peek(id));  // another type's registry
}
