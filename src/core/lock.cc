#include "core/lock.h"

#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ucxp2p {

// The futex calls take the atomic's address as a plain int.
static_assert(sizeof(std::atomic<int>) == sizeof(int) &&
                  std::atomic<int>::is_always_lock_free,
              "futex word must be a lock-free int");

namespace {

// Polls of a held lock before sleeping: about a microsecond, the length of
// the short UCX calls made under the worker lock.
constexpr int kSpins = 100;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

} // namespace

void Mutex::lock_slow() {
    for (int i = 0; i < kSpins; ++i) {
        cpu_relax();
        int c = state_.load(std::memory_order_relaxed);
        if (c == 0 && state_.compare_exchange_weak(c, 1, std::memory_order_acquire,
                                                   std::memory_order_relaxed)) {
            return;
        }
        if (c == 2) {
            break;  // others already sleep: queue behind them
        }
    }
    // Mark "held, with sleepers" and sleep until we take it free. Taking it
    // as 2 (not 1) may cost one spurious wake-up later, never a lost one.
    while (state_.exchange(2, std::memory_order_acquire) != 0) {
        syscall(SYS_futex, reinterpret_cast<int *>(&state_), FUTEX_WAIT_PRIVATE, 2,
                nullptr, nullptr, 0);
    }
}

void Mutex::wake_one() {
    syscall(SYS_futex, reinterpret_cast<int *>(&state_), FUTEX_WAKE_PRIVATE, 1,
            nullptr, nullptr, 0);
}

} // namespace ucxp2p
