#include "core/rcu.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <mutex>
#include <new>

namespace ucxp2p {
namespace rcu_detail {

__thread Reader *t_reader UCXP2P_TLS_IE = nullptr;

namespace {

// Records are never freed: a thread that exits gives its record back for
// the next thread, so the list grows to the peak number of threads that
// made per-message calls at once.
std::atomic<Reader *> g_head{nullptr};
pthread_key_t g_key;

/** Thread exit: give the record back (the thread is between sections). */
void detach(void *p) {
    Reader *r = static_cast<Reader *>(p);
    if (t_reader == r) t_reader = nullptr;  // a later call attaches anew
    r->taken.store(false, std::memory_order_release);
}

/** In a forked child only the forking thread lives: records the others
 *  held (perhaps inside a section) would make every remover wait forever. */
void after_fork_child() {
    for (Reader *p = g_head.load(std::memory_order_acquire); p != nullptr; p = p->next) {
        if (p == t_reader) continue;
        uint64_t s = p->seq.load(std::memory_order_relaxed);
        if (s & 1) p->seq.store(s + 1, std::memory_order_relaxed);
        p->taken.store(false, std::memory_order_relaxed);
    }
}

void make_key() {
    if (pthread_key_create(&g_key, detach) != 0) {
        throw std::bad_alloc();  // out of thread-specific keys
    }
    pthread_atfork(nullptr, nullptr, after_fork_child);
}

} // namespace

Reader *attach() {
    static std::once_flag once;
    std::call_once(once, make_key);
    fence_init();  // light_fence may then be a compiler barrier
    Reader *r = nullptr;
    for (Reader *p = g_head.load(std::memory_order_acquire); p != nullptr; p = p->next) {
        bool expect = false;
        if (!p->taken.load(std::memory_order_relaxed) &&
            p->taken.compare_exchange_strong(expect, true, std::memory_order_acquire)) {
            r = p;
            break;
        }
    }
    if (r == nullptr) {
        r = new Reader();
        r->taken.store(true, std::memory_order_relaxed);
        Reader *head = g_head.load(std::memory_order_relaxed);
        do {
            r->next = head;
        } while (!g_head.compare_exchange_weak(head, r, std::memory_order_release,
                                               std::memory_order_relaxed));
    }
    if (pthread_setspecific(g_key, r) != 0) {
        r->taken.store(false, std::memory_order_release);
        throw std::bad_alloc();
    }
    t_reader = r;
    return r;
}

size_t record_count() {
    size_t n = 0;
    for (Reader *p = g_head.load(std::memory_order_acquire); p != nullptr; p = p->next) ++n;
    return n;
}

} // namespace rcu_detail

void rcu_synchronize() {
    using rcu_detail::Reader;
    // The caller's change (a cleared id) before the loads below; with the
    // asymmetric fences this also orders every reader's entering store
    // before its own next load.
    heavy_fence();
    // One record at a time (no allocation: removers may not fail). A
    // reader that entered after the fence sees the cleared id; waiting for
    // it anyway only costs its short section.
    for (Reader *r = rcu_detail::g_head.load(std::memory_order_acquire); r != nullptr;
         r = r->next) {
        uint64_t s = r->seq.load(std::memory_order_acquire);
        if ((s & 1) == 0) continue;
        // Sections are short (a post or a poll): spin a little, then give
        // the CPU to the reader (it may share this core), then nap.
        for (unsigned n = 0; r->seq.load(std::memory_order_acquire) == s; ++n) {
            if (n < 64) {
                continue;
            } else if (n < 1064) {
                sched_yield();
            } else {
                struct timespec ts = {0, 50 * 1000};
                nanosleep(&ts, nullptr);
            }
        }
    }
}

} // namespace ucxp2p
