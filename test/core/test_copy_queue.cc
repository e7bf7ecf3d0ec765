/*
 * core/copy_queue.h: copies queued under the worker lock, run by whoever
 * claims them with no lock held, concluded by the next holder of the lock.
 */
#include "core/copy_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

struct Job {
    CopyJob link{};
    int id = 0;
    int copied = 0;     // written by the copier, no lock
    int concluded = 0;  // under the "worker lock"
    std::vector<int> *order = nullptr;
};

Job *job_of(CopyJob *j) { return reinterpret_cast<Job *>(j); }

void copy_fn(CopyJob *j) { ++job_of(j)->copied; }
void conclude_fn(CopyJob *j) {
    Job *b = job_of(j);
    EXPECT_EQ(1, b->copied) << "concluded before (or without) its copy";
    ++b->concluded;
    if (b->order != nullptr) b->order->push_back(b->id);
}

void init(Job *b, int id, std::vector<int> *order) {
    b->id = id;
    b->order = order;
    b->link.copy = copy_fn;
    b->link.conclude = conclude_fn;
}

} // namespace

TEST(CopyQueue, ClaimRunConcludeInOrder) {
    CopyQueue q;
    EXPECT_FALSE(q.due());
    EXPECT_EQ(nullptr, q.claim_locked());
    std::vector<int> order;
    Job jobs[4];
    for (int i = 0; i < 4; ++i) init(&jobs[i], i, &order);
    q.push_due(&jobs[0].link);
    q.push_due(&jobs[1].link);
    EXPECT_TRUE(q.due());
    CopyJob *mine = q.claim_locked();
    ASSERT_NE(nullptr, mine);
    EXPECT_FALSE(q.due());
    // Queued while the first two are copied: claimed by the next taker.
    q.push_due(&jobs[2].link);
    q.run(mine);
    EXPECT_TRUE(q.copied());
    EXPECT_EQ(1, jobs[0].copied);
    EXPECT_EQ(0, jobs[2].copied);
    q.push_due(&jobs[3].link);
    CopyJob *next = q.claim_locked();
    q.run(next);
    q.conclude_locked();
    EXPECT_FALSE(q.copied());
    EXPECT_EQ((std::vector<int>{0, 1, 2, 3}), order);
    for (const Job &b : jobs) EXPECT_EQ(1, b.concluded);
    q.conclude_locked();  // nothing left: no second conclusion
    for (const Job &b : jobs) EXPECT_EQ(1, b.concluded);
}

// Threads take turns on a lock standing in for the worker lock: each queues
// jobs, claims what is due, copies outside the lock and concludes under it.
// Every job is copied and concluded exactly once (ThreadSanitizer in CI).
TEST(CopyQueue, ThreadsClaimAndConcludeEachJobOnce) {
    constexpr int kThreads = 4, kPerThread = 500;
    CopyQueue q;
    std::mutex worker;
    std::vector<Job> jobs(kThreads * kPerThread);
    for (size_t i = 0; i < jobs.size(); ++i) init(&jobs[i], static_cast<int>(i), nullptr);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int k = 0; k < kPerThread; ++k) {
                CopyJob *mine;
                {
                    std::lock_guard<std::mutex> lock(worker);
                    if (q.copied()) q.conclude_locked();
                    q.push_due(&jobs[t * kPerThread + k].link);
                    mine = q.claim_locked();
                }
                if (mine != nullptr) q.run(mine);
            }
        });
    }
    for (auto &th : threads) th.join();
    {
        std::lock_guard<std::mutex> lock(worker);
        CopyJob *rest = q.claim_locked();
        if (rest != nullptr) q.run(rest);
        q.conclude_locked();
    }
    for (const Job &b : jobs) {
        EXPECT_EQ(1, b.copied) << "job " << b.id;
        EXPECT_EQ(1, b.concluded) << "job " << b.id;
    }
}

namespace {

std::vector<std::string> *g_events = nullptr;

void copy_logged(CopyJob *j) {
    g_events->push_back("copy " + std::to_string(job_of(j)->id));
    ++job_of(j)->copied;
}
void prefetch_logged(CopyJob *j) { g_events->push_back("prefetch " + std::to_string(job_of(j)->id)); }

} // namespace

// A job with a prefetch hook gets it called right before the job ahead of
// it is copied -- unless that job is larger than kPrefetchBehind (what the
// hook started would wait unread for its whole copy); the first job of a
// run has nobody ahead.
TEST(CopyQueue, PrefetchRunsBeforeTheJobAheadUnlessItIsLarge) {
    std::vector<std::string> events;
    g_events = &events;
    CopyQueue q;
    Job jobs[4];
    for (int i = 0; i < 4; ++i) {
        init(&jobs[i], i, nullptr);
        jobs[i].link.copy = copy_logged;
        jobs[i].link.prefetch = prefetch_logged;
        jobs[i].link.bytes = 4096;
    }
    jobs[1].link.bytes = CopyQueue::kPrefetchBehind + 1;  // no prefetch of 2 behind it
    for (Job &b : jobs) q.push_due(&b.link);
    q.run(q.claim_locked());
    q.conclude_locked();
    EXPECT_EQ((std::vector<std::string>{"prefetch 1", "copy 0", "copy 1", "prefetch 3", "copy 2",
                                        "copy 3"}),
              events);
    g_events = nullptr;
}

// running() tells a poller that another thread is copying (p2p_comm_poll
// yields its core then): true from the first job's copy to the last one's,
// in every thread; false before and after.
namespace {
CopyQueue *g_running_q = nullptr;
std::atomic<int> g_running_seen{0};
void copy_sees_running(CopyJob *j) {
    ++job_of(j)->copied;
    bool other = false;
    std::thread t([&] { other = g_running_q->running(); });
    t.join();
    if (g_running_q->running() && other) ++g_running_seen;
}
} // namespace

TEST(CopyQueue, RunningWhileAThreadCopies) {
    CopyQueue q;
    g_running_q = &q;
    g_running_seen = 0;
    Job jobs[2];
    for (int i = 0; i < 2; ++i) {
        init(&jobs[i], i, nullptr);
        jobs[i].link.copy = copy_sees_running;
        q.push_due(&jobs[i].link);
    }
    EXPECT_FALSE(q.running());  // queued, not claimed
    CopyJob *mine = q.claim_locked();
    EXPECT_FALSE(q.running());  // claimed, not copying yet
    q.run(mine);
    EXPECT_EQ(2, g_running_seen.load());
    EXPECT_FALSE(q.running());  // every copy returned
    q.conclude_locked();
    EXPECT_FALSE(q.running());
    g_running_q = nullptr;
}
