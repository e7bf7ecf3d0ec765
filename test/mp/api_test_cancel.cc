/*
 * api_test: p2p_comm_cancel_recv on a rank talking to itself, in every
 * progress mode and both thread modes: what it cancels (only unmatched
 * receives of its peer and tensor id, each with one P2P_ERR_CANCELED
 * completion), what it leaves (receives already matched), that the
 * message of a canceled receive still reaches the next one, and its error
 * paths.
 */
#include "api_util.h"

#include <cstdint>
#include <cstring>
#include <vector>

using apitest::Buf;

namespace {

uint8_t pat(size_t i, uint32_t tid) {
    return static_cast<uint8_t>((i * 151u) ^ (i >> 11) ^ (tid * 29u) ^ 0xa7);
}

void *uctx(uintptr_t v) { return reinterpret_cast<void *>(v); }

class Cancel : public apitest::ModesFixture {
protected:
    /** Registered send and receive buffers of n bytes each (send side
     *  filled with pat(., tid) by fill()). */
    struct Bufs {
        Bufs(p2p_context_h ctx, size_t n) : s(n + 1), r(n + 1, 0xEE) {
            EXPECT_EQ(P2P_OK, p2p_mem_register(ctx, s.data(), n + 1, &sm));
            EXPECT_EQ(P2P_OK, p2p_mem_register(ctx, r.data(), n + 1, &rm));
        }
        ~Bufs() {
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(sm));
            EXPECT_EQ(P2P_OK, p2p_mem_deregister(rm));
        }
        void fill(uint32_t tid) {
            for (size_t i = 0; i < s.size(); ++i) s.data()[i] = pat(i, tid);
        }
        /** Index of the first byte of r[0, n) that is not pat(., tid), or n. */
        size_t first_bad(size_t n, uint32_t tid) const {
            for (size_t i = 0; i < n; ++i) {
                if (r.data()[i] != pat(i, tid)) return i;
            }
            return n;
        }
        Buf s, r;
        p2p_mem_h sm = nullptr, rm = nullptr;
    };

    size_t cancel(uint32_t tid) {
        size_t n = 999;
        EXPECT_EQ(P2P_OK, p2p_comm_cancel_recv(comm_, 0, tid, &n));
        return n;
    }
    /** Nothing more on q, without blocking. */
    void expect_empty(p2p_queue_t q) {
        p2p_completion_t c{};
        size_t n = 7;
        EXPECT_EQ(P2P_OK, p2p_comm_poll(comm_, q, &c, 1, &n));
        EXPECT_EQ(0u, n);
    }
};

} // namespace

// Receives of one tensor id are canceled, each once, in the order posted
// (single and batch posts); another tensor id's receive stays and then
// completes; a second cancel finds nothing.
TEST_P(Cancel, CancelsTheUnmatchedReceivesOfItsTensorOnly) {
    Bufs b(ctx_, 64);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 7, b.r.data(), 16, b.rm, uctx(1)));
    p2p_block_t blocks[2] = {{0, 7, b.r.data() + 16, 16, b.rm, uctx(2)},
                             {0, 8, b.r.data() + 32, 16, b.rm, uctx(3)}};
    ASSERT_EQ(P2P_OK, p2p_comm_recv_batch(comm_, blocks, 2, nullptr));
    EXPECT_EQ(3u, pending(P2P_QUEUE_RECV));

    EXPECT_EQ(2u, cancel(7));
    EXPECT_EQ(1u, pending(P2P_QUEUE_RECV));
    p2p_completion_t c[3] = {};
    size_t n = 0;
    ASSERT_EQ(P2P_OK, p2p_comm_poll(comm_, P2P_QUEUE_RECV, c, 3, &n));
    ASSERT_EQ(2u, n);  // queued inside the call
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(P2P_ERR_CANCELED, c[i].status);
        EXPECT_EQ(uctx(i + 1), c[i].user_context);
        EXPECT_EQ(0u, c[i].peer);
        EXPECT_EQ(7u, c[i].tensor_id);
        EXPECT_EQ(0u, c[i].bytes);
    }
    EXPECT_EQ(0u, cancel(7));
    expect_empty(P2P_QUEUE_RECV);

    // Tensor 8's receive was left posted: its message lands there.
    b.fill(8);
    ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 8, b.s.data(), 16, b.sm, uctx(9)));
    p2p_completion_t rc = wait_one(P2P_QUEUE_RECV);
    EXPECT_EQ(P2P_OK, rc.status);
    EXPECT_EQ(uctx(3), rc.user_context);
    EXPECT_EQ(16u, rc.bytes);
    EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
    for (size_t i = 0; i < 16; ++i) {
        ASSERT_EQ(pat(i, 8), b.r.data()[32 + i]) << "byte " << i;
    }
    // The canceled receives' bytes were never written.
    for (size_t i = 0; i < 32; ++i) {
        ASSERT_EQ(0xEE, b.r.data()[i]) << "byte " << i;
    }
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
}

// A message sent after its receive was canceled is not lost: it waits
// for the next receive of its tensor id -- small (eager) and large (a send
// that completes only once received).
TEST_P(Cancel, TheMessageOfACanceledReceiveReachesTheNextOne) {
    for (size_t len : {size_t(8), size_t(1) << 20}) {
        SCOPED_TRACE(testing::Message() << "len " << len);
        const uint32_t tid = static_cast<uint32_t>(100 + len % 1000);
        Bufs b(ctx_, len);
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, b.r.data(), len, b.rm, uctx(1)));
        EXPECT_EQ(1u, cancel(tid));
        p2p_completion_t c = wait_one(P2P_QUEUE_RECV, 0);
        EXPECT_EQ(P2P_ERR_CANCELED, c.status);
        EXPECT_EQ(uctx(1), c.user_context);

        b.fill(tid);
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, b.s.data(), len, b.sm, uctx(2)));
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, b.r.data(), len, b.rm, uctx(3)));
        c = wait_one(P2P_QUEUE_RECV);
        EXPECT_EQ(P2P_OK, c.status);
        EXPECT_EQ(uctx(3), c.user_context);
        EXPECT_EQ(len, c.bytes);
        EXPECT_EQ(len, b.first_bad(len, tid));
        EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
        expect_empty(P2P_QUEUE_RECV);
    }
}

// A receive whose message arrived before it was posted is matched at once,
// also a large one whose data is still to move: cancel leaves it, and it
// completes with its data. (The message has arrived once a second one,
// sent after it, was received: a peer's messages match in the order sent.)
TEST_P(Cancel, LeavesAReceiveAMessageMatched) {
    for (size_t len : {size_t(8), size_t(4) << 20}) {
        SCOPED_TRACE(testing::Message() << "len " << len);
        const uint32_t tid = static_cast<uint32_t>(200 + len % 1000);
        Bufs b(ctx_, len), mark(ctx_, 8);
        b.fill(tid);
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, tid, b.s.data(), len, b.sm, uctx(1)));
        ASSERT_EQ(P2P_OK, p2p_comm_send(comm_, 0, 1, mark.s.data(), 8, mark.sm, uctx(3)));
        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 1, mark.r.data(), 8, mark.rm, uctx(4)));
        p2p_completion_t c = wait_one(P2P_QUEUE_RECV);
        ASSERT_EQ(P2P_OK, c.status);
        ASSERT_EQ(uctx(4), c.user_context);

        ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, tid, b.r.data(), len, b.rm, uctx(2)));
        EXPECT_EQ(0u, cancel(tid));
        c = wait_one(P2P_QUEUE_RECV);
        EXPECT_EQ(P2P_OK, c.status);
        EXPECT_EQ(uctx(2), c.user_context);
        EXPECT_EQ(len, c.bytes);
        EXPECT_EQ(len, b.first_bad(len, tid));
        for (int i = 0; i < 2; ++i) EXPECT_EQ(P2P_OK, wait_one(P2P_QUEUE_SEND).status);
        expect_empty(P2P_QUEUE_RECV);
    }
}

// count_p may be NULL; after shutdown (which canceled the receive itself)
// there is nothing left to cancel.
TEST_P(Cancel, NullCountAndAfterShutdown) {
    Bufs b(ctx_, 8);
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 1, b.r.data(), 8, b.rm, uctx(1)));
    ASSERT_EQ(P2P_OK, p2p_comm_recv(comm_, 0, 2, b.r.data(), 8, b.rm, uctx(2)));
    EXPECT_EQ(P2P_OK, p2p_comm_cancel_recv(comm_, 0, 1, nullptr));
    p2p_completion_t c = wait_one(P2P_QUEUE_RECV, 0);
    EXPECT_EQ(P2P_ERR_CANCELED, c.status);
    EXPECT_EQ(uctx(1), c.user_context);

    ASSERT_EQ(P2P_OK, p2p_comm_shutdown(comm_));
    c = wait_one(P2P_QUEUE_RECV, 0);
    EXPECT_EQ(P2P_ERR_CANCELED, c.status);
    EXPECT_EQ(uctx(2), c.user_context);
    EXPECT_EQ(0u, cancel(2));
    expect_empty(P2P_QUEUE_RECV);
}

TEST_P(Cancel, Errors) {
    size_t n = 5;
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_cancel_recv(nullptr, 0, 1, &n));
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE,
              p2p_comm_cancel_recv(apitest::bogus_handle<p2p_comm_h>(), 0, 1, &n));
    EXPECT_EQ(P2P_ERR_BAD_RANK, p2p_comm_cancel_recv(comm_, 1, 1, &n));
    EXPECT_EQ(P2P_ERR_BAD_RANK, p2p_comm_cancel_recv(comm_, UINT32_MAX, 1, &n));
    EXPECT_EQ(5u, n);  // untouched on error
    // A destroyed communicator's handle is no longer valid.
    p2p_comm_h gone = comm_;
    ASSERT_EQ(P2P_OK, p2p_comm_destroy(comm_));
    comm_ = nullptr;
    EXPECT_EQ(P2P_ERR_INVALID_HANDLE, p2p_comm_cancel_recv(gone, 0, 1, &n));
}

INSTANTIATE_TEST_SUITE_P(Modes, Cancel, apitest::all_modes(), apitest::modes_name);
