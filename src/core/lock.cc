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
    asym_ = true;
}

bool Mutex::try_lock_rare() {
    rare_.store(true, std::memory_order_relaxed);
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
