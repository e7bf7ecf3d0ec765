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
 * A context in P2P_THREAD_SERIALIZED mode makes its worker lock
 * asymmetric (set_asymmetric()): the application, which makes one call at
 * a time, is the frequent side and locks with plain stores and a compiler
 * barrier (core/fence.h's light side); the backstop progress thread, which
 * steps in only while the application stays out of the library, is the
 * rare side (try_lock_rare: a store, the heavy fence, a load). A Dekker
 * pair: either the application sees the backstop inside and waits for it,
 * or the backstop sees the application inside and backs off.
 *
 * Meets Lockable (std::lock_guard, std::unique_lock, try_to_lock). Not for
 * locks a condition variable waits on: std::condition_variable_any costs
 * several microseconds per wake-up (see CompletionQueue).
 */
#ifndef UCXP2P_CORE_LOCK_H
#define UCXP2P_CORE_LOCK_H

#include "core/fence.h"

#include <atomic>
#include <cstdint>

namespace ucxp2p {

class Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex &) = delete;
    Mutex &operator=(const Mutex &) = delete;

    /** Switch to the asymmetric mode (see above). Call before the mutex is
     *  first used, from the thread that created it (or publish it after). */
    void set_asymmetric();

    void lock() {
        if (asym_) {
            lock_frequent();
            return;
        }
        int c = 0;
        if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
            lock_slow();
        }
    }
    bool try_lock() {
        if (asym_) {  // the application's side: waits out a backstop round
            lock_frequent();
            return true;
        }
        int c = 0;
        return state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    void unlock() {
        if (asym_) {
            owner_.store(false, std::memory_order_release);
            return;
        }
        if (state_.exchange(0, std::memory_order_release) == 2) {
            wake_one();
        }
    }

    /** Asymmetric mode, the rare side: take the lock unless the frequent
     *  side holds it (never waits). Costs a heavy fence (a system call). */
    bool try_lock_rare();
    void unlock_rare() { rare_done(); }
    /** Asymmetric mode: how many times the frequent side has locked (the
     *  backstop steps in only when this stops moving). */
    uint64_t frequent_locks() const { return count_.load(std::memory_order_relaxed); }

private:
    void lock_slow();
    void wake_one();
    void lock_frequent() {
        // One caller at a time on this side: plain increments and stores.
        count_.store(count_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
        owner_.store(true, std::memory_order_relaxed);
        light_fence();  // owner_ before the load of rare_
        if (rare_.load(std::memory_order_acquire)) {
            wait_rare();
        }
    }
    void wait_rare();
    // The rare side lets go (after holding the lock or backing off): the
    // turn count first, so a frequent side that saw rare_ set across a
    // burst of attempts still sees one end.
    void rare_done() {
        turns_.store(turns_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_release);
        rare_.store(false, std::memory_order_release);
    }

    std::atomic<int> state_{0};
    bool asym_ = false;
    std::atomic<bool> owner_{false};     // the frequent side holds it
    std::atomic<bool> rare_{false};      // the rare side holds or tries it
    std::atomic<uint64_t> count_{0};     // frequent-side lock count
    std::atomic<uint64_t> turns_{0};     // rare-side attempts ended
};

} // namespace ucxp2p

#endif
