/*
 * mp_rank scenario of p2p_comm_cancel_recv between two ranks:
 *   cancel  (2 ranks) one tensor per size (eager, single copy, rendezvous):
 *   1. Before the sends: rank 1 posts a receive per tensor and cancels
 *      each, which must find it (rank 0 sends only after a barrier that
 *      follows); every one completes once with P2P_ERR_CANCELED and 0 bytes.
 *      Rank 0 then sends; rank 1's next receives get every byte, and every
 *      send completes P2P_OK.
 *   2. Racing the sends, ROUNDS rounds (argument 1, default 20): rank 0
 *      sends every tensor at once; rank 1 posts each receive and cancels it
 *      right away. A receive the cancel found completes P2P_ERR_CANCELED
 *      and rank 1 posts another, which must get the message; one a message
 *      matched first completes P2P_OK with its data. Exactly one completion
 *      per receive, every message delivered once, every send P2P_OK.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstdlib>
#include <vector>

namespace mp {

namespace {

const std::vector<size_t> kSizes = {8, 4096, 65536 + 3, size_t(1) << 20};

size_t offset_of(size_t k) {
    size_t off = 0;
    for (size_t i = 0; i < k; ++i) off += (kSizes[i] + 4095) / 4096 * 4096;
    return off;
}

size_t arena_bytes() { return offset_of(kSizes.size()); }

/** Rank 0: send every tensor (ids tid0 + k) and wait for each send. */
void send_all(Rank &r, RegBuf &sb, uint32_t tid0) {
    std::vector<Xfer> ops;
    for (size_t k = 0; k < kSizes.size(); ++k) {
        const Xfer x{true, 1, tid0 + uint32_t(k), kSizes[k], offset_of(k)};
        fill_pattern(sb.data() + x.off, x.len, 0, 1, x.tid);
        MP_OK(p2p_comm_send(r.comm(), 1, x.tid, sb.data() + x.off, x.len, sb.mem(),
                            ctx_of(k)));
        ops.push_back(x);
    }
    collect(r.comm(), ops, 60);
}

void check_canceled(const Xfer &x, const p2p_completion_t &c) {
    MP_CHECK(c.status == P2P_ERR_CANCELED && c.bytes == 0,
             "canceled receive of tensor %u: status %d, %llu bytes; expected "
             "P2P_ERR_CANCELED, 0", x.tid, static_cast<int>(c.status),
             static_cast<unsigned long long>(c.bytes));
}

/** Rank 1: post the receive of tensor k (id tid0 + k) from rank 0, user
 *  context ctx_of(index). */
Xfer post_recv(Rank &r, RegBuf &rb, uint32_t tid0, size_t k, size_t index) {
    const Xfer x{false, 0, tid0 + uint32_t(k), kSizes[k], offset_of(k)};
    MP_OK(p2p_comm_recv(r.comm(), 0, x.tid, rb.data() + x.off, x.len, rb.mem(),
                        ctx_of(index)));
    return x;
}

/** Rank 1: receive every tensor (ids tid0 + k) and check its bytes. */
void recv_all(Rank &r, RegBuf &rb, uint32_t tid0) {
    std::vector<Xfer> ops;
    for (size_t k = 0; k < kSizes.size(); ++k) ops.push_back(post_recv(r, rb, tid0, k, k));
    collect(r.comm(), ops, 60);
    for (const Xfer &x : ops) check_pattern(rb.data() + x.off, x.len, 0, 1, x.tid, "recv");
}

/** Phase 1 on rank 1: every receive canceled before its message exists. */
void cancel_before(Rank &r, RegBuf &rb, uint32_t tid0) {
    std::vector<Xfer> ops;
    for (size_t k = 0; k < kSizes.size(); ++k) {
        const Xfer x = post_recv(r, rb, tid0, k, k);
        size_t n = 99;
        MP_OK(p2p_comm_cancel_recv(r.comm(), 0, x.tid, &n));
        MP_CHECK(n == 1, "cancel of tensor %u (%zu bytes, not sent yet) found %zu",
                 x.tid, x.len, n);
        ops.push_back(x);
    }
    size_t pending = 99;  // each completed inside its cancel call
    MP_OK(p2p_comm_pending(r.comm(), P2P_QUEUE_RECV, &pending));
    MP_CHECK(pending == 0, "%zu receives pending after all were canceled", pending);
    collect(r.comm(), ops, 10, check_canceled);
}

/** Phase 2 on rank 1: post and cancel at once while the messages come. */
void cancel_racing(Rank &r, RegBuf &rb, uint32_t tid0, unsigned *canceled) {
    const size_t nk = kSizes.size();
    // Receive k has user context ctx_of(k), its repost ctx_of(nk + k).
    std::vector<int> seen(2 * nk, 0);
    std::vector<bool> was_canceled(nk, false);
    size_t expected = nk;
    for (size_t k = 0; k < nk; ++k) {
        post_recv(r, rb, tid0, k, k);
        size_t n = 99;
        MP_OK(p2p_comm_cancel_recv(r.comm(), 0, tid0 + uint32_t(k), &n));
        MP_CHECK(n <= 1, "cancel of tensor %u found %zu receives, posted 1",
                 tid0 + unsigned(k), n);
        if (n == 1) {
            was_canceled[k] = true;
            ++*canceled;
            ++expected;
            post_recv(r, rb, tid0, k, nk + k);
        }
    }
    Clock::time_point t0 = Clock::now();
    size_t got = 0;
    while (got < expected) {
        MP_CHECK(seconds_since(t0) < 60, "%zu of %zu receive completions after 60 s",
                 got, expected);
        for (const p2p_completion_t &c : pop(r.comm(), P2P_QUEUE_RECV, 100)) {
            const size_t i = index_of(c.user_context);
            MP_CHECK(i < 2 * nk && (i < nk || was_canceled[i - nk]),
                     "completion of an unknown receive (context %zu)", i);
            MP_CHECK(seen[i]++ == 0, "second completion of receive %zu", i);
            const size_t k = i % nk;
            MP_CHECK(c.peer == 0 && c.tensor_id == tid0 + k, "receive %zu: peer %u "
                     "tensor %u", i, c.peer, c.tensor_id);
            if (i < nk && was_canceled[k]) {
                check_canceled(Xfer{false, 0, c.tensor_id, kSizes[k], 0}, c);
            } else {
                MP_CHECK(c.status == P2P_OK && c.bytes == kSizes[k], "receive %zu of "
                         "tensor %u: status %d, %llu bytes", i, c.tensor_id,
                         static_cast<int>(c.status),
                         static_cast<unsigned long long>(c.bytes));
                check_pattern(rb.data() + offset_of(k), kSizes[k], 0, 1, c.tensor_id,
                              "recv");
            }
            ++got;
        }
    }
}

} // namespace

void run_cancel(int argc, char **argv) {
    Rank r;
    set_identity(static_cast<int>(r.rank()), "cancel");
    MP_CHECK(r.size() == 2, "cancel needs 2 ranks");
    const unsigned rounds = argc > 0 ? static_cast<unsigned>(std::atoi(argv[0])) : 20;
    RegBuf buf(r.ctx(), arena_bytes(), 0);
    const uint32_t nk = static_cast<uint32_t>(kSizes.size());

    if (r.rank() == 1) cancel_before(r, buf, 10);
    r.barrier();
    if (r.rank() == 0) {
        send_all(r, buf, 10);
    } else {
        recv_all(r, buf, 10);
    }
    unsigned canceled = 0;
    for (unsigned round = 0; round < rounds; ++round) {
        const uint32_t tid0 = 100 + round * nk;
        if (r.rank() == 0) {
            send_all(r, buf, tid0);
        } else {
            cancel_racing(r, buf, tid0, &canceled);
        }
    }
    expect_quiet(r.comm());
    if (r.rank() == 1) {
        say("%u of %u receives racing their messages were canceled", canceled,
            rounds * nk);
    }
    r.barrier();
    say("cancel ok");
    r.finish();
}

} // namespace mp
