/*
 * api_test: p2p_comm_cancel_recv on a rank talking to itself, in every
 * progress mode and both thread modes: what it cancels (only unmatched
 * receives of its peer and tensor id, each with one P2P_ERR_CANCELED
 * completion), what it leaves (receives already matched), that the
 * message of a canceled receive still reaches the next one, its error
 * paths, and cancels racing with posts, sends and polls in other threads.
 */
#include "api_util.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

using apitest::ApiFixture;
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

// Cancels racing with posts, sends and polls in other threads (CI runs this
// under ThreadSanitizer too): every receive completes exactly once, the
// P2P_ERR_CANCELED ones are exactly those the cancels counted, and no
// message is lost -- one more receive per canceled one gets every message
// left over, each with its tensor's bytes.
TEST_F(ApiFixture, CancelRacingWithPostsSendsAndPolls) {
    constexpr uint32_t kTensors = 8;
    constexpr size_t kRecvs = 2000, kSlot = 8;
    const size_t total = 2 * kRecvs;  // room for the reposts too
    Buf src(kTensors * kSlot), dst(total * kSlot);
    for (uint32_t t = 0; t < kTensors; ++t) {
        for (size_t i = 0; i < kSlot; ++i) src.data()[t * kSlot + i] = pat(i, t);
    }
    p2p_mem_h sm = nullptr, rm = nullptr;
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, src.data(), src.size(), &sm));
    ASSERT_EQ(P2P_OK, p2p_mem_register(ctx_, dst.data(), dst.size(), &rm));
    // Receive i: slot i, tensor tensor_of[i] (i % kTensors for the first
    // kRecvs; a repost takes its canceled receive's).
    std::vector<uint32_t> tensor_of(total, 0);
    for (size_t i = 0; i < kRecvs; ++i) tensor_of[i] = uint32_t(i % kTensors);
    auto post_recv = [&](size_t i) {
        return p2p_comm_recv(comm_, 0, tensor_of[i], dst.data() + i * kSlot, kSlot, rm,
                             uctx(i + 1));
    };
    std::atomic<bool> posting{true}, bad{false};
    std::atomic<size_t> canceled{0};
    std::vector<size_t> canceled_of(kTensors, 0);  // the canceller's own
    std::thread poster([&] {
        for (size_t i = 0; i < kRecvs; ++i) {
            if (post_recv(i) != P2P_OK) bad.store(true);
        }
        posting.store(false);
    });
    std::thread sender([&] {
        for (size_t j = 0; j < kRecvs; ++j) {
            const uint32_t t = uint32_t(j % kTensors);
            if (p2p_comm_send(comm_, 0, t, src.data() + t * kSlot, kSlot, sm, nullptr) != P2P_OK) {
                bad.store(true);
            }
        }
    });
    std::thread canceller([&] {
        for (uint32_t k = 0; posting.load(); ++k) {
            size_t n = 0;
            const uint32_t t = (k * 5) % kTensors;
            if (p2p_comm_cancel_recv(comm_, 0, t, &n) != P2P_OK) bad.store(true);
            canceled_of[t] += n;
            canceled.fetch_add(n);
        }
    });
    // This thread pops both queues meanwhile and afterwards.
    std::vector<int> seen(total, 0);
    std::vector<p2p_status_t> status(total, P2P_IN_PROGRESS);
    size_t sends_done = 0, recvs_done = 0;
    auto pop_some = [&] {
        p2p_completion_t e[64];
        size_t n = 0;
        EXPECT_EQ(P2P_OK, p2p_comm_poll(comm_, P2P_QUEUE_SEND, e, 64, &n));
        for (size_t k = 0; k < n; ++k) sends_done += e[k].status == P2P_OK;
        EXPECT_EQ(P2P_OK, p2p_comm_poll(comm_, P2P_QUEUE_RECV, e, 64, &n));
        for (size_t k = 0; k < n; ++k) {
            const size_t i = reinterpret_cast<uintptr_t>(e[k].user_context) - 1;
            ASSERT_LT(i, total);
            ++seen[i];
            status[i] = e[k].status;
        }
        recvs_done += n;
    };
    poster.join();
    canceller.join();
    sender.join();
    ASSERT_FALSE(bad.load());
    // Each canceled receive leaves one message: receive those too.
    size_t next = kRecvs;
    for (uint32_t t = 0; t < kTensors; ++t) {
        for (size_t c = 0; c < canceled_of[t]; ++c, ++next) {
            ASSERT_LT(next, total);
            tensor_of[next] = t;
            ASSERT_EQ(P2P_OK, post_recv(next));
        }
    }
    const size_t want_recvs = kRecvs + canceled.load();
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while ((recvs_done < want_recvs || sends_done < kRecvs) &&
           std::chrono::steady_clock::now() < until) {
        pop_some();
        if (HasFatalFailure()) return;
    }
    ASSERT_EQ(want_recvs, recvs_done);
    ASSERT_EQ(kRecvs, sends_done);
    size_t n_canceled = 0;
    for (size_t i = 0; i < next; ++i) {
        ASSERT_EQ(1, seen[i]) << "receive " << i << ": completions";
        if (status[i] == P2P_ERR_CANCELED) {
            ASSERT_LT(i, kRecvs) << "a repost was canceled";
            ++n_canceled;
            continue;
        }
        ASSERT_EQ(P2P_OK, status[i]) << "receive " << i;
        for (size_t b = 0; b < kSlot; ++b) {
            ASSERT_EQ(pat(b, tensor_of[i]), dst.data()[i * kSlot + b])
                << "receive " << i << " byte " << b;
        }
    }
    EXPECT_EQ(canceled.load(), n_canceled);
    EXPECT_EQ(0u, pending(P2P_QUEUE_RECV));
    EXPECT_EQ(0u, pending(P2P_QUEUE_SEND));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(sm));
    EXPECT_EQ(P2P_OK, p2p_mem_deregister(rm));
}
