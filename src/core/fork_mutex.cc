#include "core/fork_mutex.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

namespace ucxp2p {

struct ForkMutexHandlers {
    static std::atomic<ForkMutex *> all[ForkMutex::kMaxForkMutexes];
    /** Which slots this thread's prepare locked (one registered meanwhile
     *  is neither locked nor unlocked). */
    static thread_local unsigned locked;

    static void prepare() {
        locked = 0;
        for (unsigned i = 0; i < ForkMutex::kMaxForkMutexes; ++i) {
            if (ForkMutex *m = all[i].load(std::memory_order_acquire)) {
                m->lock();
                locked |= 1u << i;
            }
        }
    }
    static void release() {
        for (unsigned i = ForkMutex::kMaxForkMutexes; i-- > 0;) {
            if (locked & (1u << i)) all[i].load(std::memory_order_relaxed)->unlock();
        }
    }
};

static_assert(ForkMutex::kMaxForkMutexes <= 32, "one bit per slot in an unsigned");
std::atomic<ForkMutex *> ForkMutexHandlers::all[ForkMutex::kMaxForkMutexes];
thread_local unsigned ForkMutexHandlers::locked = 0;

ForkMutex::ForkMutex() {
    // Registered before this mutex can be held by anyone: a fork in
    // progress holds glibc's handler list while its prepare handler waits.
    static const bool handlers = pthread_atfork(ForkMutexHandlers::prepare,
                                                ForkMutexHandlers::release,
                                                ForkMutexHandlers::release) == 0;
    (void)handlers;
    static std::atomic<unsigned> next{0};
    const unsigned i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= kMaxForkMutexes) {
        std::fprintf(stderr, "ucxp2p: more than %u ForkMutex objects\n", kMaxForkMutexes);
        std::abort();
    }
    ForkMutexHandlers::all[i].store(this, std::memory_order_release);
}

} // namespace ucxp2p
