/*
 * ForkMutex (core/fork_mutex.h): the library's process-wide locks that a
 * child made by fork() may take (p2p_mem_alloc's map, the rail state a
 * context's creation reads, the topology handles, the CUDA driver binding).
 */
#include "core/fork_mutex.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

/** fork() while another thread holds mu; the child exits 0 if it can take
 *  mu, 1 if mu is still locked there. Returns the child's exit status (-1:
 *  it did not exit normally) and how long after the holder began to let
 *  go fork() returned (negative: before). release_after_fork: the holder
 *  lets go only once fork() returned in the parent (else after hold_ms on
 *  its own). */
template <class M>
int fork_while_held(M &mu, bool release_after_fork, int hold_ms, double *after_release_ms) {
    std::atomic<bool> held{false}, forked{false};
    Clock::time_point released;  // the holder's, read after join()
    std::thread holder([&] {
        mu.lock();
        held = true;
        if (release_after_fork) {
            while (!forked) std::this_thread::yield();
        } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
        }
        released = Clock::now();
        mu.unlock();
        // Alive until fork() returned: a thread that ended unjoined before
        // the fork is a leak to ThreadSanitizer in the child.
        while (!forked) std::this_thread::yield();
    });
    while (!held) std::this_thread::yield();
    const pid_t pid = ::fork();
    if (pid == 0) {
        const bool free = mu.try_lock();
        ::_exit(free ? 0 : 1);
    }
    const Clock::time_point returned = Clock::now();
    forked = true;
    holder.join();
    *after_release_ms = std::chrono::duration<double, std::milli>(returned - released).count();
    if (pid < 0) return -2;
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// What ForkMutex is for: a std::mutex another thread held at fork() stays
// locked in the child forever (the thread does not exist there).
TEST(ForkMutex, AStdMutexHeldAtForkIsLockedInTheChild) {
    static std::mutex mu;
    double ms = 0;
    EXPECT_EQ(1, fork_while_held(mu, /*release_after_fork=*/true, 0, &ms));
}

// A ForkMutex held by another thread: fork() waits until it is released,
// and the child finds it free.
TEST(ForkMutex, ForkWaitsForItsHolderAndTheChildFindsItFree) {
    static ucxp2p::ForkMutex *mu = new ucxp2p::ForkMutex();  // registered for good
    double ms = 0;
    EXPECT_EQ(0, fork_while_held(*mu, /*release_after_fork=*/false, 200, &ms));
    // Timed from the holder's release, not from when this thread saw it
    // hold mu: being descheduled in between could fail a 150 ms bound.
    EXPECT_GE(ms, 0.0) << "fork() returned before the holder let go";
    // Free in the parent too, and usable again.
    ASSERT_TRUE(mu->try_lock());
    mu->unlock();
}

} // namespace
