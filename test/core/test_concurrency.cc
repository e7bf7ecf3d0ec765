// Concurrency of the core's building blocks without UCX: the completion
// queue and the handle registry. Built into core_test, which CI also runs
// under ThreadSanitizer.
#include "core/cq.h"
#include "core/handles.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

using namespace ucxp2p;

TEST(CompletionQueue, ProducersAndConsumersLoseNothing) {
    CompletionQueue q;
    constexpr int kProducers = 4, kPerProducer = 5000;
    q.add_pending(kProducers * kPerProducer);
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&q, p] {
            for (int i = 0; i < kPerProducer; ++i) {
                p2p_completion_t e{};
                e.peer = static_cast<uint32_t>(p);
                e.tensor_id = static_cast<uint32_t>(i);
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
                if (!q.wait_nonempty(10)) continue;
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

TEST(CompletionQueue, WaitTimesOutWhenEmpty) {
    CompletionQueue q;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(q.wait_nonempty(50));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(ms, 45);
    EXPECT_LT(ms, 5000);
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
                uint64_t id = reg.add(std::make_shared<int>(i));
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
