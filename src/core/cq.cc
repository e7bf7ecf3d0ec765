#include "core/cq.h"

#include <chrono>

namespace ucxp2p {

void CompletionQueue::push(const p2p_completion_t &entry) {
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mu_);
        q_.push_back(entry);
        size_.store(q_.size(), std::memory_order_release);
        // Finished: no longer pending. Decrement under the lock so that a
        // reader never sees an operation as neither pending nor queued.
        pending_.fetch_sub(1);
        wake = waiters_ > 0;
    }
    if (wake) {
        cv_.notify_all();
    }
}

size_t CompletionQueue::pop(p2p_completion_t *out, size_t max) {
    if (size_.load(std::memory_order_acquire) == 0) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    while (n < max && !q_.empty()) {
        out[n++] = q_.front();
        q_.pop_front();
    }
    size_.store(q_.size(), std::memory_order_release);
    return n;
}

bool CompletionQueue::wait_nonempty(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiters_;
    bool ok;
    if (timeout_ms < 0) {
        cv_.wait(lock, [this] { return !q_.empty(); });
        ok = true;
    } else {
        ok = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                          [this] { return !q_.empty(); });
    }
    --waiters_;
    return ok;
}

void CompletionQueue::notify_all() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
}

} // namespace ucxp2p
