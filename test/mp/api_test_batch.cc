/*
 * api_test, continued: the batch calls' *bad_index_p. p2p.h: an error that
 * concerns no block (the communicator's handle, blocks NULL,
 * P2P_ERR_SHUTDOWN) leaves it untouched, and nothing is posted; a block
 * with a bad argument sets it.
 */
#include "api_util.h"

using apitest::ApiFixture;
using apitest::bogus_handle;
using apitest::Buf;

namespace {

using batch_fn = p2p_status_t (*)(p2p_comm_h, const p2p_block_t *, size_t, size_t *);

const struct {
    const char *name;
    batch_fn fn;
} kBatchCalls[] = {{"send_batch", &p2p_comm_send_batch},
                   {"recv_batch", &p2p_comm_recv_batch}};

} // namespace

TEST_F(ApiFixture, BatchErrorsOfNoBlockLeaveTheBadIndex) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    const p2p_block_t blk[2] = {{0, 1, b.data(), 8, mem, nullptr},
                                {0, 2, b.data() + 8, 8, mem, nullptr}};
    for (const auto &call : kBatchCalls) {
        SCOPED_TRACE(call.name);
        size_t bad = 99;
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, call.fn(nullptr, blk, 2, &bad));
        EXPECT_EQ(99u, bad) << "NULL communicator";
        EXPECT_EQ(P2P_ERR_INVALID_HANDLE, call.fn(bogus_handle<p2p_comm_h>(), blk, 2, &bad));
        EXPECT_EQ(99u, bad) << "bogus communicator";
        EXPECT_EQ(P2P_ERR_INVALID_PARAM, call.fn(comm_, nullptr, 2, &bad));
        EXPECT_EQ(99u, bad) << "NULL blocks";
    }
    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    for (const auto &call : kBatchCalls) {
        SCOPED_TRACE(call.name);
        size_t bad = 99;
        EXPECT_EQ(P2P_ERR_SHUTDOWN, call.fn(comm_, blk, 2, &bad));
        EXPECT_EQ(99u, bad) << "shut down";
    }
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}

// A peer rank outside the world is a bad argument of its block (the first
// round): reported with that block's index, and nothing is posted.
TEST_F(ApiFixture, BatchBlockWithARankOutsideTheWorldIsBadRank) {
    Buf b(64);
    p2p_mem_h mem = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, b.data(), 64, &mem));
    const p2p_block_t blk[3] = {{0, 1, b.data(), 8, mem, nullptr},
                                {1, 2, b.data() + 8, 8, mem, nullptr},  // world of 1
                                {0, 3, b.data() + 16, 8, mem, nullptr}};
    for (const auto &call : kBatchCalls) {
        SCOPED_TRACE(call.name);
        size_t bad = 99;
        EXPECT_EQ(P2P_ERR_BAD_RANK, call.fn(comm_, blk, 3, &bad));
        EXPECT_EQ(1u, bad);
    }
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(mem));
}
