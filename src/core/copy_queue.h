/*
 * Large single-copy payloads moved outside the worker lock (same-host
 * copies; tcp reads, core/tcp_bulk.h).
 *
 * A single-copy transfer (core/cma.h) moves its payload inside a UCX
 * callback, with the worker lock held, where every post of every thread
 * waits for it: a 64-byte receive posted while the progress thread copied
 * 1 GiB waited 120-150 ms. The lock cannot be let go inside the callback
 * (UCX's worker is not reentrant), so a communicator queues the copy
 * instead (push_due, lock held) and whoever ran the progress call takes
 * the queue with it (claim_locked), lets the lock go, copies (run), and
 * hands the results back; the next holder of the lock concludes them
 * (conclude_locked: answers, completions). Only the job's own operation is
 * touched meanwhile, and nothing else may end or cancel it: the
 * communicator's selectors skip operations in a copy, and its shutdown
 * waits for them (a copy always ends: the peer's memory or its absence).
 *
 * Who takes the queue: the progress thread, a user thread polling
 * (p2p_comm_poll), the serialized application's own calls and its
 * backstop, and a communicator's shutdown, all right after their progress
 * call. One exception runs them with the lock held: a receive posted
 * where a running copy writes (Comm::settle_copies_into, overlapping
 * buffers only). A copy queued by a post (a receive whose request had arrived)
 * waits for the next of those; push_due wakes the progress thread for it.
 * While a thread runs them (running()), an empty p2p_comm_poll yields its
 * core to it.
 */
#ifndef UCXP2P_CORE_COPY_QUEUE_H
#define UCXP2P_CORE_COPY_QUEUE_H

#include <atomic>
#include <cstdint>
#include <mutex>

namespace ucxp2p {

/** One queued copy, embedded in its owner (the communicator's Op). */
struct CopyJob {
    CopyJob *next;
    void (*copy)(CopyJob *);      // no lock held: the copy itself
    void (*conclude)(CopyJob *);  // worker lock held: act on its result
    // No lock held, just before the job ahead of it is copied (nullptr:
    // nothing): start what can flow meanwhile (a tcp read's requests).
    // Only behind a job of at most kPrefetchBehind bytes: what it started
    // must not wait unread for long (the sender gives up on a reader that
    // takes no bytes for a peer timeout), and behind a larger copy the
    // request's round trip costs little anyway.
    void (*prefetch)(CopyJob *);
    uint64_t bytes;  // what it copies (the prefetch rule)
    std::atomic<bool> ran{false};  // copy() returned (set by run)
};

class CopyQueue {
public:
    static constexpr uint64_t kPrefetchBehind = uint64_t(16) << 20;
    /** Queue j (worker lock held). */
    void push_due(CopyJob *j) {
        j->next = nullptr;
        j->ran.store(false, std::memory_order_relaxed);
        *due_tail_ = j;
        due_tail_ = &j->next;
        due_.store(true, std::memory_order_relaxed);
    }
    /** Something waits to be claimed (a hint, any thread: one load). */
    bool due() const { return due_.load(std::memory_order_relaxed); }
    /** Take every queued job (worker lock held); nullptr when none. */
    CopyJob *claim_locked() {
        if (!due()) return nullptr;
        CopyJob *j = due_head_;
        due_head_ = nullptr;
        due_tail_ = &due_head_;
        due_.store(false, std::memory_order_relaxed);
        return j;
    }
    /** Copy the jobs claim_locked returned, in order, with no lock held;
     *  then hand them to conclude_locked. */
    void run(CopyJob *jobs);
    /** Some thread is inside run() (a hint, any thread: one load). */
    bool running() const { return running_.load(std::memory_order_relaxed) != 0; }
    /** Some copies ended and wait for conclude_locked (a hint). */
    bool copied() const { return copied_.load(std::memory_order_relaxed); }
    /** Conclude the copies run() ended (worker lock held). */
    void conclude_locked();

private:
    CopyJob *due_head_ = nullptr;       // worker lock
    CopyJob **due_tail_ = &due_head_;
    std::atomic<bool> due_{false};
    std::mutex done_mu_;                // the copiers' hand-back
    CopyJob *done_head_ = nullptr;
    CopyJob **done_tail_ = &done_head_;
    std::atomic<bool> copied_{false};
    std::atomic<unsigned> running_{0};  // threads inside run()
};

} // namespace ucxp2p

#endif
