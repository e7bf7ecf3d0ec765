/*
 * CopyQueue (core/copy_queue.h): the copies themselves and their hand-back.
 */
#include "core/copy_queue.h"

namespace ucxp2p {

void CopyQueue::run(CopyJob *jobs) {
    running_.fetch_add(1, std::memory_order_relaxed);
    CopyJob *head = jobs, **tail = &head;
    for (CopyJob *j = jobs; j != nullptr; j = j->next) {
        if (j->next != nullptr && j->next->prefetch != nullptr && j->bytes <= kPrefetchBehind) {
            j->next->prefetch(j->next);
        }
        j->copy(j);
        tail = &j->next;
        j->ran.store(true, std::memory_order_release);  // see Comm::settle_copies_into
    }
    std::lock_guard<std::mutex> lock(done_mu_);
    *done_tail_ = head;
    done_tail_ = tail;
    copied_.store(true, std::memory_order_relaxed);
    running_.fetch_sub(1, std::memory_order_relaxed);
}

void CopyQueue::conclude_locked() {
    CopyJob *j;
    {
        std::lock_guard<std::mutex> lock(done_mu_);
        j = done_head_;
        done_head_ = nullptr;
        done_tail_ = &done_head_;
        copied_.store(false, std::memory_order_relaxed);
    }
    while (j != nullptr) {
        CopyJob *next = j->next;  // the conclusion may recycle j's owner
        j->conclude(j);
        j = next;
    }
}

} // namespace ucxp2p
