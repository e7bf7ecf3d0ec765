/*
 * Mutex for the per-message path (the context's worker lock, taken by
 * every post and progress call). Uncontended, lock and unlock are one
 * locked instruction each and a few others: glibc's pthread_mutex spends
 * ~30 instructions per call on type dispatch, and a small message takes
 * two or three lock pairs on each side, a large part of what ucxp2p adds
 * to UCX's own ~400 instructions per message (docs/PERFORMANCE.md, message
 * rate).
 *
 * Contended, it sleeps on a futex at once (no spinning, see lock.cc):
 * ranks sharing cores do not burn CPU on it.
 * States: 0 free, 1 held, 2 held and someone may sleep (unlock wakes one).
 * Acquire/release atomics give the memory ordering, so ThreadSanitizer
 * sees the happens-before edges without annotations.
 *
 * Meets Lockable (std::lock_guard, std::unique_lock, try_to_lock). Not for
 * locks a condition variable waits on: std::condition_variable_any costs
 * several microseconds per wake-up (see CompletionQueue).
 */
#ifndef UCXP2P_CORE_LOCK_H
#define UCXP2P_CORE_LOCK_H

#include <atomic>

namespace ucxp2p {

class Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex &) = delete;
    Mutex &operator=(const Mutex &) = delete;

    void lock() {
        int c = 0;
        if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
            lock_slow();
        }
    }
    bool try_lock() {
        int c = 0;
        return state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    void unlock() {
        if (state_.exchange(0, std::memory_order_release) == 2) {
            wake_one();
        }
    }

private:
    void lock_slow();
    void wake_one();

    std::atomic<int> state_{0};
};

} // namespace ucxp2p

#endif
