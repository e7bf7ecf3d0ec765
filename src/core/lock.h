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
 * Two modes drop the locked instructions for the thread that makes nearly
 * every call; both are Dekker pairs of a frequent side (a store, a
 * compiler barrier, a load: core/fence.h's light side) and a rare side (a
 * store, membarrier -- the heavy fence, a system call -- and a load):
 *
 * - Asymmetric (set_asymmetric(), P2P_THREAD_SERIALIZED): the application,
 *   which makes one call at a time, is the frequent side; the backstop
 *   progress thread, which steps in only while the application stays out
 *   of the library, is the rare side (try_lock_rare): either the
 *   application sees the backstop inside and waits for it, or the backstop
 *   sees the application inside and backs off.
 *
 * - Biased (set_biased(), P2P_THREAD_MULTI): any thread may call, so the
 *   lock learns which one to favour. A thread that takes the plain lock
 *   bias_after() times in a row, nobody else in between, gets the bias:
 *   from then on it locks as the frequent side. Any other thread takes the
 *   plain lock, then the rare side's turn, waiting for the biased thread
 *   to leave (woken by a futex). A user thread doing so revokes the bias
 *   (back to the plain lock for everyone) and doubles bias_after(), so two
 *   threads taking turns settle on the plain lock instead of paying a
 *   system call each time. The helper thread (the progress thread, which
 *   takes over once the application's polls stop) keeps the bias when the
 *   biased thread locked since the helper's last turn, and revokes it when
 *   that thread has gone quiet. Each thread that held the bias has
 *   its own owner flag (a record, up to kBiasRecords threads), so a thread
 *   that read a stale bias and backs off never clears another's flag.
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
#include <memory>
#include <pthread.h>

namespace ucxp2p {

#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer) && (defined(__x86_64__) || defined(__aarch64__))
#define UCXP2P_HAVE_THREAD_POINTER 1
#endif
#endif

/** This thread's identity, cheap: the thread pointer (one load). */
inline uintptr_t this_thread_id() {
#ifdef UCXP2P_HAVE_THREAD_POINTER
    return reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#else
    return static_cast<uintptr_t>(pthread_self());
#endif
}

class Mutex {
public:
    Mutex() = default;
    Mutex(const Mutex &) = delete;
    Mutex &operator=(const Mutex &) = delete;

    /** Switch to the asymmetric mode (see above). Call before the mutex is
     *  first used, from the thread that created it (or publish it after). */
    void set_asymmetric();
    /** Switch to the biased mode (see above); same rule. Stays plain where
     *  the kernel has no membarrier (a full fence per lock gains nothing). */
    void set_biased();

    void lock() {
        if (mode_ == kAsym) {
            lock_frequent();
            return;
        }
        if (mode_ == kBiased) {
            if (!enter_biased()) {
                lock_inner();
                acquired_biased(false);
            }
            return;
        }
        lock_inner();
    }
    bool try_lock() {
        if (mode_ == kAsym) {  // the application's side: waits out a backstop round
            lock_frequent();
            return true;
        }
        if (mode_ == kBiased) {
            if (enter_biased()) return true;
            if (!try_inner()) return false;
            acquired_biased(false);  // may wait for the biased thread to leave
            return true;
        }
        return try_inner();
    }
    void unlock() {
        if (mode_ == kAsym) {
            owner_.store(false, std::memory_order_release);
            return;
        }
        if (mode_ == kBiased) {
            const int h = held_.load(std::memory_order_relaxed);
            if (h == kHeldBias) {
                leave_biased(held_rec_.load(std::memory_order_relaxed));
                return;
            }
            if (h == kHeldRare) rare_.store(0, std::memory_order_release);
        }
        unlock_inner();
    }

    /** Biased mode: lock as the helper thread (see above); elsewhere lock(). */
    void lock_helper() {
        if (mode_ != kBiased) {
            lock();
            return;
        }
        lock_inner();
        acquired_biased(true);
    }

    /** Asymmetric mode, the rare side: take the lock unless the frequent
     *  side holds it (never waits). Costs a heavy fence (a system call). */
    bool try_lock_rare();
    void unlock_rare() { rare_done(); }
    /** Asymmetric mode: how many times the frequent side has locked (the
     *  backstop steps in only when this stops moving). Biased mode: how many
     *  times a biased thread has. */
    uint64_t frequent_locks() const { return count_.load(std::memory_order_relaxed); }

    /** Biased mode: the thread holding the bias (0: none), and how many
     *  plain locks in a row earn it. For tests and logs. */
    uintptr_t biased_thread() const;
    uint32_t bias_after() const { return bias_after_.load(std::memory_order_relaxed); }

    /** A thread waits for the lock: in the plain and biased modes, the
     *  plain lock is held and a thread may sleep on it (its unlock wakes
     *  one); in the asymmetric mode, asked by the rare side's holder, the
     *  frequent side is trying (owner_ set: it waits in wait_rare). For a
     *  holder deciding to let go before it takes the lock again. */
    bool waited_on() const {
        if (mode_ == kAsym) return owner_.load(std::memory_order_relaxed);
        return state_.load(std::memory_order_relaxed) == 2;
    }

    static constexpr int kBiasRecords = 16;
    static constexpr uint32_t kFirstBiasAfter = 64;
    static constexpr uint32_t kMaxBiasAfter = 1u << 20;

private:
    enum Mode : uint8_t { kPlain, kAsym, kBiased };
    enum Held : int { kHeldInner, kHeldBias, kHeldRare };
    struct alignas(64) BiasRecord {
        std::atomic<int> owner{0};          // its thread is inside (futex word)
        std::atomic<uintptr_t> thread{0};   // this_thread_id(); 0: unused
    };

    void lock_inner() {
        int c = 0;
        if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
            lock_slow();
        }
    }
    bool try_inner() {
        int c = 0;
        return state_.compare_exchange_strong(c, 1, std::memory_order_acquire,
                                              std::memory_order_relaxed);
    }
    void unlock_inner() {
        if (state_.exchange(0, std::memory_order_release) == 2) {
            wake_one();
        }
    }
    void lock_slow();
    void wake_one();

    // Biased mode, the frequent side: enter if this thread holds the bias
    // and no rare side is in or trying.
    bool enter_biased() {
        BiasRecord *r = bias_.load(std::memory_order_relaxed);
        if (r == nullptr || r->thread.load(std::memory_order_relaxed) != this_thread_id()) {
            return false;
        }
        r->owner.store(1, std::memory_order_relaxed);
        light_fence();  // owner before the load of rare_
        if (rare_.load(std::memory_order_acquire) == 0 &&
            bias_.load(std::memory_order_relaxed) == r) {
            held_.store(kHeldBias, std::memory_order_relaxed);
            held_rec_.store(r, std::memory_order_relaxed);
            count_.store(count_.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
            return true;
        }
        leave_biased(r);  // a rare side is in, or the bias moved: the plain way
        return false;
    }
    void leave_biased(BiasRecord *r) {
        r->owner.store(0, std::memory_order_release);
        light_fence();  // owner before the load of rare_
        if (rare_.load(std::memory_order_relaxed) != 0) {
            wake_owner_waiter(r);  // a rare side may sleep on our flag
        }
    }
    void wake_owner_waiter(BiasRecord *r);
    // Holding the plain lock in the biased mode: wait out (and maybe revoke)
    // the bias, or count toward granting it.
    void acquired_biased(bool helper);
    BiasRecord *record_for(uintptr_t thread);

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
        rare_.store(0, std::memory_order_release);
    }

    std::atomic<int> state_{0};
    Mode mode_ = kPlain;
    std::atomic<bool> owner_{false};     // asymmetric: the frequent side holds it
    std::atomic<int> rare_{0};           // the rare side holds or tries it
    std::atomic<uint64_t> count_{0};     // frequent-side lock count
    std::atomic<uint64_t> turns_{0};     // asymmetric: rare-side attempts ended

    // Biased mode. bias_ changes only under the plain lock.
    std::atomic<BiasRecord *> bias_{nullptr};
    std::atomic<int> held_{kHeldInner};          // how the holder got in
    std::atomic<BiasRecord *> held_rec_{nullptr};
    std::atomic<uint32_t> bias_after_{kFirstBiasAfter};
    uintptr_t last_ = 0;        // under the plain lock: its last user-thread holder
    uint32_t streak_ = 0;       // ... and how many times in a row
    uint64_t helper_seen_ = 0;  // count_ at the helper's last turn
    std::unique_ptr<BiasRecord[]> records_;
};

/** Lockable adapter for the helper thread's side of a biased Mutex. */
class HelperLock {
public:
    explicit HelperLock(Mutex &mu) : mu_(mu) { mu_.lock_helper(); }
    ~HelperLock() { mu_.unlock(); }
    HelperLock(const HelperLock &) = delete;
    HelperLock &operator=(const HelperLock &) = delete;

private:
    Mutex &mu_;
};

} // namespace ucxp2p

#endif
