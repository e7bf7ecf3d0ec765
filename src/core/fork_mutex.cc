#include "core/fork_mutex.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

namespace ucxp2p {

struct ForkMutexHandlers {
    static std::atomic<ForkMutex *> all[ForkMutex::kMaxForkMutexes];
    static std::atomic<unsigned> count;
    static thread_local unsigned locked;  // how many this thread's prepare locked

    static void prepare() {
        locked = count.load(std::memory_order_acquire);
        for (unsigned i = 0; i < locked; ++i) all[i].load(std::memory_order_relaxed)->lock();
    }
    static void release() {
        for (unsigned i = locked; i-- > 0;) all[i].load(std::memory_order_relaxed)->unlock();
    }
};

std::atomic<ForkMutex *> ForkMutexHandlers::all[ForkMutex::kMaxForkMutexes];
std::atomic<unsigned> ForkMutexHandlers::count{0};
thread_local unsigned ForkMutexHandlers::locked = 0;

ForkMutex::ForkMutex() {
    // Registered before this mutex can be held by anyone: a fork in
    // progress holds glibc's handler list while its prepare handler waits.
    static const bool handlers = pthread_atfork(ForkMutexHandlers::prepare,
                                                ForkMutexHandlers::release,
                                                ForkMutexHandlers::release) == 0;
    (void)handlers;
    // Slot first, then the count: prepare reads only slots below count.
    static std::atomic<unsigned> next{0};
    const unsigned i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= kMaxForkMutexes) {
        std::fprintf(stderr, "ucxp2p: more than %u ForkMutex objects\n", kMaxForkMutexes);
        std::abort();
    }
    ForkMutexHandlers::all[i].store(this, std::memory_order_relaxed);
    unsigned expect = i;
    // In order of their slots (a later one waits for the earlier ones).
    while (!ForkMutexHandlers::count.compare_exchange_weak(expect, i + 1,
                                                           std::memory_order_release)) {
        expect = i;
    }
}

} // namespace ucxp2p
