/*
 * Asymmetric store-load fences for a Dekker handshake whose two sides run
 * at very different rates: a completion queue's producer (every message)
 * and a thread about to block on it (rarely).
 *
 * Each side stores its flag, fences, then loads the other's. With a full
 * fence on both sides, the producer pays an mfence/xchg per message, which
 * also waits for every store still in flight: after a shared-memory send
 * that is a cache miss to the receiver's core (perf showed the fence at 18%
 * of a sender's time in the 8-byte message-rate test).
 *
 * With membarrier(2) (MEMBARRIER_CMD_PRIVATE_EXPEDITED), the frequent side
 * needs only a compiler barrier: the rare side's membarrier call makes every
 * running thread of the process execute a full barrier, which orders the
 * two sides as two fences would (the pattern of membarrier(2)'s manual).
 * Without it (old kernels, seccomp), both sides fall back to full fences.
 */
#ifndef UCXP2P_CORE_FENCE_H
#define UCXP2P_CORE_FENCE_H

#include <atomic>

namespace ucxp2p {

#if defined(__SANITIZE_THREAD__)
#define UCXP2P_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UCXP2P_TSAN 1
#endif
#endif

namespace fence_detail {
extern std::atomic<bool> g_asymmetric;  // light_fence may be a compiler barrier
extern std::atomic<int> g_fence_word;
}

/** A full store-load fence. GCC's ThreadSanitizer refuses
 *  atomic_thread_fence; there a sequentially consistent read-modify-write
 *  stands in (a locked instruction: a full barrier on x86 and, with its
 *  seq_cst ordering, on the other targets we build for). */
inline void full_fence() {
#ifdef UCXP2P_TSAN
    fence_detail::g_fence_word.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/** Enable the asymmetric mode when the kernel offers it (idempotent, thread
 *  safe). Call before the first light_fence() whose pairing matters: until
 *  then both sides use full fences, which is always correct. */
void fence_init();

/** The frequent side's fence. */
inline void light_fence() {
    if (fence_detail::g_asymmetric.load(std::memory_order_relaxed)) {
        std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
        full_fence();
    }
}

/** The rare side's fence: a full barrier on every thread of the process.
 *  Costs a system call (~1 us) in the asymmetric mode. */
void heavy_fence();

} // namespace ucxp2p

#endif
