#include "core/cq.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace ucxp2p {

CompletionQueue::CompletionQueue() : tail_(new Segment()), head_(tail_) {
    fence_init();  // before the first push or wait (see push)
}

CompletionQueue::~CompletionQueue() {
    for (Segment *chain : {head_, spare_}) {
        while (chain != nullptr) {
            Segment *next = chain->next.load(std::memory_order_relaxed);
            delete chain;
            chain = next;
        }
    }
}

void CompletionQueue::reserve_slow(size_t n) {
    const uint64_t need = pushed_.load(std::memory_order_relaxed) +
                          pending_.load(std::memory_order_relaxed) + n;
    while (capacity_ < need) {
        Segment *s = new Segment();  // throws before anything is posted
        s->next.store(spare_, std::memory_order_relaxed);
        spare_ = s;
        capacity_ += kSegEntries;
    }
}

void CompletionQueue::grow() {
    // A spare reserve() set aside; a new one only if a push came without
    // its reservation (a bug: it may throw where nothing may).
    Segment *s = spare_;
    if (s != nullptr) {
        spare_ = s->next.load(std::memory_order_relaxed);
        s->next.store(nullptr, std::memory_order_relaxed);
    } else {
        s = new Segment();
        capacity_ += kSegEntries;
    }
    // Linked before the entry is published: a consumer that sees the
    // entry's count also sees the link.
    tail_->next.store(s, std::memory_order_release);
    tail_ = s;
    tail_pos_ = 0;
}

void CompletionQueue::wake_waiters() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
}

size_t CompletionQueue::pop(p2p_completion_t *out, size_t max) {
    if (empty()) {
        return 0;
    }
    if (unlocked_) {
        return pop_locked(out, max);
    }
    std::lock_guard<Mutex> lock(pop_mu_);
    return pop_locked(out, max);
}

size_t CompletionQueue::pop_locked(p2p_completion_t *out, size_t max) {
    uint64_t popped = popped_.load(std::memory_order_relaxed);
    uint64_t avail = pushed_.load(std::memory_order_acquire) - popped;
    const size_t want = avail < max ? static_cast<size_t>(avail) : max;
    size_t n = 0;
    while (n < want) {
        if (head_pos_ == kSegEntries) {
            // The producer has moved on (an entry past this segment is
            // published), so nobody touches this segment any more.
            Segment *next = head_->next.load(std::memory_order_acquire);
            delete head_;
            head_ = next;
            head_pos_ = 0;
        }
        // The run up to this segment's end in one copy, not entry by entry.
        size_t run = std::min(want - n, kSegEntries - head_pos_);
        std::memcpy(out + n, head_->e + head_pos_, run * sizeof(*out));
        n += run;
        head_pos_ += run;
    }
    popped_.store(popped + n, std::memory_order_release);
    return n;
}

bool CompletionQueue::wait_nonempty(int timeout_ms, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mu_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);  // Dekker with push()
    heavy_fence();  // pairs with push()'s light_fence()
    auto nonempty = [this, seen] {
        return pushed_.load(std::memory_order_seq_cst) !=
                   popped_.load(std::memory_order_acquire) ||  // see pop_mu_
               signals_.load(std::memory_order_acquire) != seen ||
               kept_.load(std::memory_order_acquire) ||
               (closed_.load(std::memory_order_acquire) &&
                pending_.load(std::memory_order_acquire) == 0);
    };
    bool ok;
    if (timeout_ms < 0) {
        cv_.wait(lock, nonempty);
        ok = true;
    } else {
        ok = cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), nonempty);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return ok;
}

void CompletionQueue::signal() {
    kept_.store(true, std::memory_order_release);
    signals_.fetch_add(1, std::memory_order_acq_rel);
    notify_all();
}

void CompletionQueue::close() {
    closed_.store(true, std::memory_order_release);
    notify_all();
}

void CompletionQueue::notify_all() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
}

} // namespace ucxp2p
