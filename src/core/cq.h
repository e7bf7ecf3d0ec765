/*
 * Completion queue: unbounded FIFO of completion entries (nothing is ever
 * dropped while the communicator lives), a count of posted-but-unfinished
 * operations, non-blocking pop and blocking pop with a deadline.
 */
#ifndef UCXP2P_CORE_CQ_H
#define UCXP2P_CORE_CQ_H

#include <ucxp2p/p2p.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace ucxp2p {

class CompletionQueue {
public:
    /** An operation was posted (it will push exactly one entry). */
    void add_pending(size_t n = 1) { pending_.fetch_add(n); }
    /** Undo add_pending for operations that were not posted after all. */
    void drop_pending(size_t n) { pending_.fetch_sub(n); }

    /** The operation finished: queue its entry. */
    void push(const p2p_completion_t &entry);

    /** Pop up to max entries; returns the count (0 when empty). */
    size_t pop(p2p_completion_t *out, size_t max);

    /** Block until an entry is queued or timeout_ms passes (-1 forever).
     *  Returns false on timeout. */
    bool wait_nonempty(int timeout_ms);

    bool empty() const { return size_.load(std::memory_order_acquire) == 0; }
    size_t pending() const { return pending_.load(); }
    size_t size() const { return size_.load(); }

    /** Wake all waiters (shutdown). */
    void notify_all();

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<p2p_completion_t> q_;
    std::atomic<size_t> size_{0};
    std::atomic<size_t> pending_{0};
    int waiters_ = 0;
};

} // namespace ucxp2p

#endif
