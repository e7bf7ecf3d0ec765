/*
 * mp_rank scenario of many receives posted into one buffer, 2 ranks:
 *   shared-window [ROUNDS]  rank 0 sends 4 MiB messages from one buffer,
 *       rank 1 receives them all into one buffer too (as a benchmark
 *       reusing its buffer does): in even rounds a window of 64 posted at
 *       once on each side, in odd ones 128 streamed (64 in flight, the
 *       next posted as one completes). Over shared memory every message
 *       goes by single copy, whose request (an RTS) lands in the first
 *       bytes of the receive's buffer -- where other receives' copies,
 *       made outside the worker lock, write. Every operation must complete
 *       P2P_OK with all its bytes within 60 s (36f54e6: a torn request
 *       ended a receive P2P_ERR_TRANSPORT, "malformed single-copy
 *       request", and its sender waited for good; since requests travel
 *       as data, one torn at its magic would end the receive P2P_OK with
 *       80 bytes). The bytes themselves are not checked: every message
 *       overwrites the last.
 */
#include "mp_common.h"
#include "mp_scenarios.h"

#include <cstdlib>

namespace mp {

namespace {

constexpr size_t kLen = size_t(4) << 20;
constexpr uint32_t kWindow = 64;

/** A streamed round: keep kWindow operations (sends on rank 0, receives
 *  on rank 1) posted on buf, posting the next as each completes, until n
 *  completed: new requests land while earlier messages are copied. */
void stream(Rank &r, const RegBuf &buf, uint32_t tid0, uint32_t n) {
    const bool sending = r.rank() == 0;
    const p2p_queue_t q = sending ? P2P_QUEUE_SEND : P2P_QUEUE_RECV;
    uint32_t posted = 0, done = 0;
    Clock::time_point t0 = Clock::now();
    while (done < n) {
        while (posted < n && posted - done < kWindow) {
            if (sending) {
                MP_OK(p2p_comm_send(r.comm(), 1, tid0 + posted, buf.data(), kLen,
                                    buf.mem(), ctx_of(posted)));
            } else {
                MP_OK(p2p_comm_recv(r.comm(), 0, tid0 + posted, buf.data(), kLen,
                                    buf.mem(), ctx_of(posted)));
            }
            ++posted;
        }
        p2p_completion_t c[kWindow];
        size_t got = 0;
        // Polled, as a benchmark does: this thread and the progress
        // thread both take messages in and copy.
        MP_OK(p2p_comm_poll(r.comm(), q, c, kWindow, &got));
        for (size_t i = 0; i < got; ++i) {
            MP_CHECK(c[i].status == P2P_OK && c[i].bytes == kLen,
                     "%s of tensor %u: status %d (%s), %zu bytes",
                     sending ? "send" : "receive", c[i].tensor_id,
                     static_cast<int>(c[i].status), p2p_status_string(c[i].status),
                     c[i].bytes);
        }
        done += static_cast<uint32_t>(got);
        MP_CHECK(seconds_since(t0) < 60, "%u of %u %s completed in 60 s", done, n,
                 sending ? "sends" : "receives");
    }
}

} // namespace

void run_shared_window(int argc, char **argv) {
    const int rounds = argc >= 1 ? std::atoi(argv[0]) : 8;
    Rank r;
    set_identity(static_cast<int>(r.rank()), "shared-window");
    MP_CHECK(r.size() == 2, "needs 2 ranks, got %u", r.size());
    RegBuf buf(r.ctx(), kLen, r.rank() == 0 ? 0x5A : 0);
    for (int round = 0; round < rounds; ++round) {
        const bool streamed = round % 2 == 1;
        const uint32_t tid0 = streamed ? static_cast<uint32_t>(round) * kWindow * 2 : 0;
        const uint32_t n = streamed ? kWindow * 2 : kWindow;
        std::vector<Xfer> ops;
        for (uint32_t i = 0; i < n; ++i) {
            ops.push_back({r.rank() == 0, 1 - r.rank(), tid0 + i, kLen, 0});
        }
        if (streamed) {
            stream(r, buf, tid0, n);
        } else {
            for (size_t i = 0; i < ops.size(); ++i) {
                if (r.rank() == 0) {
                    MP_OK(p2p_comm_send(r.comm(), 1, ops[i].tid, buf.data(), kLen,
                                        buf.mem(), ctx_of(i)));
                } else {
                    MP_OK(p2p_comm_recv(r.comm(), 0, ops[i].tid, buf.data(), kLen,
                                        buf.mem(), ctx_of(i)));
                }
            }
            collect(r.comm(), ops, 60);
        }
    }
    expect_quiet(r.comm());
    r.barrier();
    buf.release();
    say("shared-window ok (%d rounds)", rounds);
    r.finish();
}

} // namespace mp
