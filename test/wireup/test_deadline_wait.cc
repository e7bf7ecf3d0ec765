/*
 * DeadlineWait (wireup/deadline_wait.h): the wait of a non-blocking
 * operation that ends at the caller's deadline even when the operation's
 * callback never comes, and a callback that comes after the caller left.
 * Under ASAN (CI) a reference dropped too early shows as a use after free.
 */
#include "wireup/deadline_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

using ucxp2p::DeadlineWait;
using Ms = std::chrono::milliseconds;

namespace {

struct Counted {  // the operation's arguments: counts its destruction
    explicit Counted(std::atomic<int> *n) : n_(n) {}
    ~Counted() { ++*n_; }
    std::atomic<int> *n_;
};

} // namespace

// The callback never comes: the wait ends at its limit, with no status.
TEST(DeadlineWait, EndsAtTheLimitWithoutACallback) {
    auto w = std::make_shared<DeadlineWait>();
    void *ref = DeadlineWait::callback_ref(w);
    const auto t0 = std::chrono::steady_clock::now();
    int st = 12345;
    EXPECT_FALSE(w->wait(Ms(50), &st));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, Ms(50));
    EXPECT_EQ(st, 12345);
    DeadlineWait::drop_ref(ref);  // the operation that never called back
}

// The callback from another thread before the limit: its status.
TEST(DeadlineWait, ReturnsTheCallbacksStatus) {
    auto w = std::make_shared<DeadlineWait>();
    void *ref = DeadlineWait::callback_ref(w);
    std::thread cb([ref] {
        std::this_thread::sleep_for(Ms(20));
        DeadlineWait::finish(ref, -25);
    });
    int st = 0;
    EXPECT_TRUE(w->wait(Ms(10000), &st));
    EXPECT_EQ(st, -25);
    cb.join();
}

// A callback that came before the wait: no waiting.
TEST(DeadlineWait, CallbackBeforeTheWait) {
    auto w = std::make_shared<DeadlineWait>();
    DeadlineWait::finish(DeadlineWait::callback_ref(w), 7);
    const auto t0 = std::chrono::steady_clock::now();
    int st = 0;
    EXPECT_TRUE(w->wait(Ms(10000), &st));
    EXPECT_EQ(st, 7);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, Ms(5000));
}

// The caller gives up and drops its reference; the late callback still
// finds the object, and the arguments live until it has run.
TEST(DeadlineWait, LateCallbackAfterTheCallerLeft) {
    std::atomic<int> freed{0};
    void *ref = nullptr;
    {
        auto w = std::make_shared<DeadlineWait>();
        w->args = std::make_shared<Counted>(&freed);
        ref = DeadlineWait::callback_ref(w);
        int st = 0;
        EXPECT_FALSE(w->wait(Ms(10), &st));
    }
    EXPECT_EQ(freed.load(), 0);  // the callback's reference keeps them
    std::thread cb([ref] { DeadlineWait::finish(ref, 0); });
    cb.join();
    EXPECT_EQ(freed.load(), 1);
}
