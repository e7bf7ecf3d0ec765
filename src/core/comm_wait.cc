/*
 * p2p_comm_wait's blocking part: pop entries of one queue, or sleep until
 * some arrive, the communicator shuts down, p2p_comm_signal interrupts, or
 * the timeout passes. The C entry point (api.cc) looks the handle up and
 * checks the arguments.
 */
#include "core/comm.h"
#include "core/progress.h"

#include <algorithm>
#include <cstdint>

namespace ucxp2p {

p2p_status_t Comm::wait(p2p_queue_t queue, p2p_completion_t *entries, size_t max,
                        size_t *count_p, int timeout_ms) {
    CompletionQueue &q = this->queue(queue);
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ns() + timeout_ms * 1000000LL;
    Progress &pr = context().progress();
    // Serialized: this call progresses; the backstop thread stays away
    // until it returns.
    struct SerialWait {
        Progress *p;
        ~SerialWait() { if (p != nullptr) p->serial_wait(false); }
    } serial{pr.serialized() ? &pr : nullptr};
    if (serial.p != nullptr) pr.serial_wait(true);
    const uint64_t seen = q.signal_count();  // p2p_comm_signal from here on
    for (;;) {
        size_t n = q.pop(entries, max);
        if (n > 0) {
            *count_p = n;
            return P2P_OK;
        }
        // Shut down (or destroyed by another thread) with nothing left
        // to complete: no entry can ever arrive.
        if (is_shut() && q.pending() == 0 && q.empty()) {
            *count_p = 0;
            return P2P_ERR_SHUTDOWN;
        }
        // Sleeps round the time left up: a wait never ends before its
        // timeout (0.3 ms left is not "expired", and timeout 1 blocks).
        const int64_t left_ns = timeout_ms < 0 ? -1 : deadline - now_ns();
        const bool expired = timeout_ms >= 0 && left_ns <= 0;
        const int64_t left_ms = timeout_ms < 0 ? -1 : (left_ns + 999999) / 1000000;
        if (pr.serialized()) {
            // This call drives progress: one round before every
            // deadline check (so a zero timeout polls); after a round
            // that found nothing (and no entry a backstop round queued
            // just before this call began) it sleeps on worker events,
            // at most a tick at a time so keepalive runs and the
            // deadline holds.
            bool did = pr.progress_once();
            if (!q.empty()) continue;
            // A kept signal after the round: entries take precedence, and
            // here nothing else completes what already arrived.
            if (q.take_signal(seen)) {
                *count_p = 0;
                return P2P_ERR_INTERRUPTED;
            }
            if (expired) {
                *count_p = 0;
                return P2P_ERR_TIMEOUT;
            }
            if (!did) {
                int tick = static_cast<int>(pr.tick_ms());
                pr.idle(left_ms < 0 ? tick : static_cast<int>(std::min<int64_t>(left_ms, tick)));
            }
            continue;
        }
        if (q.take_signal(seen)) {
            *count_p = 0;
            return P2P_ERR_INTERRUPTED;
        }
        if (expired) {
            *count_p = 0;
            return P2P_ERR_TIMEOUT;
        }
        // The progress thread completes operations (make sure it is not
        // napping for a poller); wake up at least every 100 ms to
        // recheck the deadline.
        pr.note_waiter();
        pr.waiter_blocked(true);
        q.wait_nonempty(left_ms < 0 ? 100 : static_cast<int>(std::min<int64_t>(left_ms, 100)),
                        seen);
        pr.waiter_blocked(false);
    }
}

} // namespace ucxp2p
