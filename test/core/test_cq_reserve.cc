// The completion queue's reservation: room for every pending operation's
// entry is made when it is posted, so that the push -- inside a UCX
// callback, where nothing may throw -- never allocates. And its close at
// shutdown.
#include "core/cq.h"

#include "../fail_new.h"

#include <gtest/gtest.h>

#include <chrono>
#include <new>
#include <thread>
#include <vector>

using namespace ucxp2p;

namespace {

p2p_completion_t entry(uint32_t i) {
    p2p_completion_t e{};
    e.tensor_id = i;
    e.status = P2P_OK;
    return e;
}

} // namespace

TEST(CompletionQueueReserve, ReservedPushesAcrossSegmentsAllocateNothing) {
    CompletionQueue q;
    constexpr uint32_t kN = 1000;  // several 128-entry segments
    q.reserve(kN);
    q.add_pending(kN);
    {
        p2ptest::NoMemory none;
        for (uint32_t i = 0; i < kN; ++i) {
            ASSERT_NO_THROW(q.push(entry(i))) << "push " << i << " allocated";
        }
    }
    EXPECT_EQ(0u, q.pending());
    std::vector<p2p_completion_t> out(kN + 1);
    ASSERT_EQ(kN, q.pop(out.data(), out.size()));
    for (uint32_t i = 0; i < kN; ++i) ASSERT_EQ(i, out[i].tensor_id);
}

TEST(CompletionQueueReserve, ImmediateEntriesNeedTheirOwnRoom) {
    // Uncounted pushes (a send finished inside its post) use the room of
    // reserve(1) each, beside the pending operations' room.
    CompletionQueue q;
    q.reserve(200);
    q.add_pending(200);
    for (uint32_t i = 0; i < 100; ++i) {
        q.reserve(1);
        p2ptest::NoMemory none;
        ASSERT_NO_THROW(q.push(entry(i), /*counted=*/false));
    }
    p2ptest::NoMemory none;
    for (uint32_t i = 0; i < 200; ++i) ASSERT_NO_THROW(q.push(entry(100 + i)));
}

TEST(CompletionQueueReserve, ReserveFailsBeforeAnythingIsPosted) {
    CompletionQueue q;
    {
        p2ptest::NoMemory none;
        EXPECT_THROW(q.reserve(129), std::bad_alloc);  // beyond the first segment
    }
    // Within the first segment nothing needs allocating, memory or not.
    p2ptest::NoMemory none;
    EXPECT_NO_THROW(q.reserve(128));
}

// A communicator's shutdown closes its queues: a wait blocked with nothing
// pending must end then (its caller sees P2P_ERR_SHUTDOWN), not at its
// next recheck. Shutdown used to notify the waiters, whose wait condition
// (an entry or a signal) sent them back to sleep: here the wait would run
// out its 20 s and return false.
TEST(CompletionQueueClose, CloseEndsAWaitWithNothingPending) {
    CompletionQueue q;
    const uint64_t seen = q.signal_count();
    bool woke = false;
    std::thread waiter([&] { woke = q.wait_nonempty(20000, seen); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it block
    q.close();
    waiter.join();
    EXPECT_TRUE(woke);
    EXPECT_TRUE(q.wait_nonempty(20000, seen)) << "a wait after the close";
}

// An operation still pending after the close keeps its waiters asleep (no
// spin) until its entry comes.
TEST(CompletionQueueClose, PendingEntryStillHoldsTheWait) {
    CompletionQueue q;
    q.reserve(1);
    q.add_pending(1);
    const uint64_t seen = q.signal_count();
    q.close();
    EXPECT_FALSE(q.wait_nonempty(50, seen));
    std::thread pusher([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        q.push(entry(7));
    });
    EXPECT_TRUE(q.wait_nonempty(20000, seen));
    pusher.join();
    p2p_completion_t out{};
    ASSERT_EQ(1u, q.pop(&out, 1));
    EXPECT_EQ(7u, out.tensor_id);
    EXPECT_EQ(0u, q.pending());
}
