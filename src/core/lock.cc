#include "core/lock.h"

#include <climits>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ucxp2p {

// The futex calls take the atomic's address as a plain int.
static_assert(sizeof(std::atomic<int>) == sizeof(int) &&
                  std::atomic<int>::is_always_lock_free,
              "futex word must be a lock-free int");

// No spinning before the sleep, as glibc's default mutex: the holder of the
// worker lock is usually the progress thread or another user thread of the
// same rank, often on the same core. Spinning 100 pauses added 2-4 us to
// every contended hand-off between the progress thread and a blocked
// p2p_comm_wait (8 B ping-pong with --wait: 17-20 vs 15 us unpinned, 24 vs
// 20 us pinned), and nothing measured gained from it.
void Mutex::lock_slow() {
    // Mark "held, with sleepers" and sleep until we take it free. Taking it
    // as 2 (not 1) may cost one spurious wake-up later, never a lost one.
    while (state_.exchange(2, std::memory_order_acquire) != 0) {
        syscall(SYS_futex, reinterpret_cast<int *>(&state_), FUTEX_WAIT_PRIVATE, 2,
                nullptr, nullptr, 0);
    }
}

void Mutex::set_asymmetric() {
    fence_init();  // light_fence pairs with heavy_fence from here on
    mode_ = kAsym;
}

void Mutex::set_biased() {
    fence_init();
    if (!fence_detail::g_asymmetric.load(std::memory_order_relaxed)) {
        return;  // full fences on both sides: no cheaper than the plain lock
    }
    records_.reset(new BiasRecord[kBiasRecords]);
    mode_ = kBiased;
}

uintptr_t Mutex::biased_thread() const {
    BiasRecord *r = bias_.load(std::memory_order_acquire);
    return r == nullptr ? 0 : r->thread.load(std::memory_order_relaxed);
}

// The record of `thread`, or a free one for it; nullptr when all are taken
// (by threads that held the bias before: that thread stays on the plain
// lock). Under the plain lock.
Mutex::BiasRecord *Mutex::record_for(uintptr_t thread) {
    for (int i = 0; i < kBiasRecords; ++i) {
        uintptr_t t = records_[i].thread.load(std::memory_order_relaxed);
        if (t == thread) return &records_[i];
        if (t == 0) {
            records_[i].thread.store(thread, std::memory_order_relaxed);
            return &records_[i];
        }
    }
    return nullptr;
}

void Mutex::acquired_biased(bool helper) {
    const uintptr_t self = this_thread_id();
    BiasRecord *r = bias_.load(std::memory_order_relaxed);
    if (r != nullptr) {
        if (r->thread.load(std::memory_order_relaxed) == self) {
            // The biased thread itself, which found a rare side in: the
            // plain lock keeps every other thread out.
            held_.store(kHeldInner, std::memory_order_relaxed);
            return;
        }
        const uint64_t n = count_.load(std::memory_order_relaxed);
        const bool keep = helper && n != helper_seen_;  // it is still calling
        helper_seen_ = n;
        if (!keep) {
            // Revoke: the biased thread, in or trying, sees bias_ moved (or
            // rare_ set) and takes the plain lock from its next call.
            bias_.store(nullptr, std::memory_order_relaxed);
            last_ = helper ? 0 : self;  // this lock starts the next run
            streak_ = helper ? 0 : 1;
            if (!helper) {  // two user threads take turns: bias less eagerly
                uint32_t a = bias_after_.load(std::memory_order_relaxed);
                bias_after_.store(a >= kMaxBiasAfter / 2 ? kMaxBiasAfter : a * 2,
                                  std::memory_order_relaxed);
            }
        }
        rare_.store(1, std::memory_order_relaxed);
        heavy_fence();  // rare_ (and bias_) before the load of its owner flag
        while (r->owner.load(std::memory_order_acquire) != 0) {
            syscall(SYS_futex, reinterpret_cast<int *>(&r->owner), FUTEX_WAIT_PRIVATE,
                    1, nullptr, nullptr, 0);
        }
        if (keep) {
            held_.store(kHeldRare, std::memory_order_relaxed);  // rare_ stays set
            return;
        }
        rare_.store(0, std::memory_order_release);
        held_.store(kHeldInner, std::memory_order_relaxed);
        return;
    }
    held_.store(kHeldInner, std::memory_order_relaxed);
    if (helper) {
        last_ = 0;  // the helper breaks a user thread's streak
        return;
    }
    if (last_ != self) {
        last_ = self;
        streak_ = 1;
        return;
    }
    if (++streak_ < bias_after_.load(std::memory_order_relaxed)) {
        return;
    }
    streak_ = 0;
    BiasRecord *mine = record_for(self);
    if (mine != nullptr) {
        // Published under the plain lock: the others see it once they hold it.
        bias_.store(mine, std::memory_order_release);
    }
}

void Mutex::wake_owner_waiter(BiasRecord *r) {
    syscall(SYS_futex, reinterpret_cast<int *>(&r->owner), FUTEX_WAKE_PRIVATE, 1,
            nullptr, nullptr, 0);
}

bool Mutex::try_lock_rare() {
    rare_.store(1, std::memory_order_relaxed);
    heavy_fence();  // rare_ before the load of owner_, on both sides
    if (owner_.load(std::memory_order_acquire)) {
        rare_done();
        return false;
    }
    return true;
}

// The frequent side found the rare side inside (or trying): it holds the
// lock only for one progress round, or lets go at once when it sees owner_.
// Waiting for rare_ to read false is not enough: a rare side retrying at
// once would keep it set nearly all the time (a livelock). Every attempt
// that began after owner_ was set fails, so once the attempt seen here has
// ended (the turn count moved, or rare_ is clear) the lock is ours.
void Mutex::wait_rare() {
    const uint64_t t0 = turns_.load(std::memory_order_acquire);
    while (rare_.load(std::memory_order_acquire) &&
           turns_.load(std::memory_order_acquire) == t0) {
        sched_yield();
    }
}

void Mutex::wake_one() {
    syscall(SYS_futex, reinterpret_cast<int *>(&state_), FUTEX_WAKE_PRIVATE, 1,
            nullptr, nullptr, 0);
}

} // namespace ucxp2p
