// The completion queue's reservation: room for every pending operation's
// entry is made when it is posted, so that the push -- inside a UCX
// callback, where nothing may throw -- never allocates.
#include "core/cq.h"

#include "../fail_new.h"

#include <gtest/gtest.h>

#include <new>
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
