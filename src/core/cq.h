/*
 * Completion queue: unbounded FIFO of completion entries (nothing is ever
 * dropped while the communicator lives), a count of posted-but-unfinished
 * operations, non-blocking pop and blocking pop with a deadline.
 *
 * Producers are serialized by the caller (a communicator pushes and counts
 * pending operations only with its context's worker lock held), so a push
 * writes the entry into a chain of fixed-size segments and publishes it
 * with one release store: no lock and no locked instruction on the
 * completion path. Consumers (any number of threads) take the queue's own
 * mutex, and only when an entry is there. Lock order: worker lock -> queue
 * lock (a push wakes blocked waiters under it).
 */
#ifndef UCXP2P_CORE_CQ_H
#define UCXP2P_CORE_CQ_H

#include "core/fence.h"
#include "core/lock.h"

#include <ucxp2p/p2p.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ucxp2p {

class CompletionQueue {
public:
    CompletionQueue();
    ~CompletionQueue();
    CompletionQueue(const CompletionQueue &) = delete;
    CompletionQueue &operator=(const CompletionQueue &) = delete;

    /** Room for n entries beyond those the pending operations will push,
     *  without allocating: called before posting (the only place that
     *  allocates, and may throw std::bad_alloc), so that a push -- inside a
     *  UCX callback, where nothing may throw -- never allocates. Producer
     *  side. Inline: one per post; allocates only every kSegEntries. */
    void reserve(size_t n) {
        if (pushed_.load(std::memory_order_relaxed) + pending_.load(std::memory_order_relaxed) +
                n > capacity_) {
            reserve_slow(n);
        }
    }
    /** An operation was posted (it will push exactly one entry; reserve()
     *  made room for it). Producer side: serialized with push(). */
    void add_pending(size_t n = 1) { add(&pending_, n); }
    /** Undo add_pending for operations that were not posted after all. */
    void drop_pending(size_t n) { add(&pending_, 0 - n); }

    /** The operation finished: queue its entry (and it is no longer
     *  pending; counted false: it never was, e.g. a send completed inside
     *  its post). One producer at a time. Inline: one per message. */
    void push(const p2p_completion_t &entry, bool counted = true) {
        next_slot() = entry;
        publish(counted);
    }
    /** push() of a success entry, its fields written into the queue's slot
     *  directly: the per-message completions (a copy of an entry built on
     *  the stack costs a store-forwarding stall: 8-byte stores, 16-byte
     *  loads). */
    void push_ok(void *user_context, uint32_t peer, uint32_t tensor_id,
                 uint64_t bytes, bool counted) {
        push_fields(user_context, peer, tensor_id, bytes, P2P_OK, counted);
    }
    /** push_ok with any status: an operation's completion (Comm::report),
     *  whose status and byte count are known only now. */
    void push_fields(void *user_context, uint32_t peer, uint32_t tensor_id,
                     uint64_t bytes, p2p_status_t status, bool counted) {
        p2p_completion_t &e = next_slot();
        e.user_context = user_context;
        e.peer = peer;
        e.tensor_id = tensor_id;
        e.bytes = bytes;
        e.status = status;
        e.reserved = 0;
        publish(counted);
    }

    /** Pop up to max entries; returns the count (0 when empty). */
    size_t pop(p2p_completion_t *out, size_t max);

    /** P2P_THREAD_SERIALIZED: one consumer at a time (the application),
     *  so pop takes no lock; pushes may still come from another thread
     *  (the backstop), which the lock never covered anyway. wait_nonempty
     *  is not used there. Call before the first pop. */
    void disable_lock() { unlocked_ = true; }

    /** Block until an entry is queued, a signal() comes after the one
     *  the wait saw (seen, from signal_count()) or one is kept, the queue
     *  is closed with nothing pending, or timeout_ms passes (-1 forever).
     *  Returns false on timeout. */
    bool wait_nonempty(int timeout_ms, uint64_t seen);

    /** p2p_comm_signal: wake every wait_nonempty now blocked, and keep the
     *  signal for a wait to come (take_signal). Any thread, any time. */
    void signal();
    /** Signals so far: a p2p_comm_wait reads it when it begins. */
    uint64_t signal_count() const { return signals_.load(std::memory_order_acquire); }
    /** Whether a wait that began at signal count seen was signalled (one
     *  came since, or one is kept); takes the kept one. Lock-free: the
     *  serialized mode's wait checks it every progress round. */
    bool take_signal(uint64_t seen) {
        if (signals_.load(std::memory_order_acquire) == seen &&
            !kept_.load(std::memory_order_acquire)) {
            return false;
        }
        kept_.store(false, std::memory_order_relaxed);
        return true;
    }

    bool empty() const { return size() == 0; }
    size_t pending() const { return pending_.load(std::memory_order_acquire); }
    size_t size() const {
        return static_cast<size_t>(pushed_.load(std::memory_order_acquire) -
                                   popped_.load(std::memory_order_acquire));
    }

    /** The communicator shut down: nothing is posted any more. Wakes every
     *  wait, and ends those to come, once nothing is pending (an entry
     *  still pending wakes them when it is pushed). Any thread. */
    void close();

private:
    static constexpr size_t kSegEntries = 128;
    struct Segment {
        p2p_completion_t e[kSegEntries];
        std::atomic<Segment *> next{nullptr};
    };

    /** The slot the next entry goes to (not visible until publish). */
    p2p_completion_t &next_slot() {
        if (tail_pos_ == kSegEntries) {
            grow();
        }
        return tail_->e[tail_pos_];
    }
    void reserve_slow(size_t n);
    void publish(bool counted) {
        ++tail_pos_;
        pushed_.store(pushed_.load(std::memory_order_relaxed) + 1,
                      std::memory_order_release);
        // Finished: no longer pending. After the entry is visible, so a
        // reader never sees an operation as neither pending nor queued.
        if (counted) {
            add(&pending_, static_cast<size_t>(-1));
        }
        // Dekker with wait_nonempty() (store the entry count, fence, load
        // the waiter count; the waiter does the reverse), so either the
        // waiter sees the entry or we see the waiter. The fence is the
        // light side of an asymmetric pair (core/fence.h): no mfence per
        // message.
        light_fence();
        if (waiters_.load(std::memory_order_relaxed) > 0) {
            wake_waiters();
        }
    }

    void grow();          // the tail segment is full: link a spare
    size_t pop_locked(p2p_completion_t *out, size_t max);  // pop_mu_ held (or unlocked_)
    void wake_waiters();  // under mu_

    static void add(std::atomic<size_t> *v, size_t d) {
        v->store(v->load(std::memory_order_relaxed) + d, std::memory_order_release);
    }

    // Producer side (serialized by the caller).
    Segment *tail_;
    size_t tail_pos_ = 0;
    Segment *spare_ = nullptr;  // reserved segments, linked through next
    // Entries ever pushed plus those the tail and the spares still hold:
    // pushed_ + pending_ + n <= capacity_ means n more fit unallocated.
    uint64_t capacity_ = kSegEntries;
    // Consumer side: pops under pop_mu_, core/lock.h's Mutex (one locked
    // instruction per lock and unlock uncontended: 13 instructions per pop
    // where glibc's pthread mutex and its wrappers took 71, two pops per
    // 8 B ping-pong round trip; docs/PERFORMANCE.md, 2026-11-29 05:25).
    // Sleeping waiters use mu_ and cv_: a std::mutex
    // and std::condition_variable, as condition_variable_any (which a
    // custom mutex needs) added ~6 us to every blocking wait's wake-up (8 B
    // ping-pong with --wait: 20 vs 14 us). A waiter reads popped_ (an
    // atomic) without pop_mu_: a pop racing its check at worst wakes it
    // for nothing (p2p_comm_wait pops again and sleeps again).
    Mutex pop_mu_;
    mutable std::mutex mu_;
    std::condition_variable cv_;
    Segment *head_;     // pop_mu_
    size_t head_pos_ = 0;

    alignas(64) std::atomic<uint64_t> pushed_{0};   // written by the producer
    std::atomic<size_t> pending_{0};                // written by the producer
    alignas(64) std::atomic<uint64_t> popped_{0};   // written under pop_mu_
    std::atomic<int> waiters_{0};
    // signal(): count and kept flag written before mu_ is taken to notify,
    // so a waiter checking them under mu_ never misses one.
    std::atomic<uint64_t> signals_{0};
    std::atomic<bool> kept_{false};
    std::atomic<bool> closed_{false};  // close(): written before mu_ is taken
    bool unlocked_ = false;  // disable_lock()
    void notify_all();
};

} // namespace ucxp2p

#endif
