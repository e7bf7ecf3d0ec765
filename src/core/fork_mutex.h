/*
 * A process-wide mutex held across fork() (pthread_atfork), for the
 * library's global state that a child may use: a child made while another
 * thread held an ordinary mutex would find it locked forever (the thread
 * does not exist there), and what it guards possibly half-updated. With
 * ForkMutex, fork() waits until the holder lets go, and the child starts
 * with it free and its data consistent.
 *
 * Only for leaf locks: no other lock held across fork (another
 * ForkMutex, a handle registry's, the epoch table's) is taken while one is
 * held, nor one of them while those are held. The prepare handlers lock
 * them one after another in an order of their own; a thread holding one
 * and waiting for another could deadlock against them.
 * Construct them as never-destroyed globals (function-local statics or
 * namespace-scope objects): they stay registered for the process' life.
 */
#ifndef UCXP2P_CORE_FORK_MUTEX_H
#define UCXP2P_CORE_FORK_MUTEX_H

#include <mutex>

namespace ucxp2p {

class ForkMutex {
public:
    /** Registers it (and, the first time, the fork handlers). At most
     *  kMaxForkMutexes exist; one past that aborts (a program error). */
    ForkMutex();
    ForkMutex(const ForkMutex &) = delete;
    ForkMutex &operator=(const ForkMutex &) = delete;

    void lock() { mu_.lock(); }
    void unlock() { mu_.unlock(); }
    bool try_lock() { return mu_.try_lock(); }

    static constexpr unsigned kMaxForkMutexes = 16;

private:
    std::mutex mu_;
    friend struct ForkMutexHandlers;
};

} // namespace ucxp2p

#endif
