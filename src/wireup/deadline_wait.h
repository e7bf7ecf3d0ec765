/*
 * The end of a non-blocking operation that a caller waits for with a
 * deadline of its own, while the operation's callback may come after the
 * caller stopped waiting (or never). PmixBootstrap's fences and gets use it: a PMIx
 * server does not always end a fence at the PMIX_TIMEOUT it was given.
 *
 * The caller makes a shared DeadlineWait and hands the callback a heap
 * reference (DeadlineWait::callback_ref); the callback calls finish(),
 * which drops that reference, so the object lives until both are done.
 */
#ifndef UCXP2P_WIREUP_DEADLINE_WAIT_H
#define UCXP2P_WIREUP_DEADLINE_WAIT_H

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace ucxp2p {

struct DeadlineWait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int status = 0;
    std::shared_ptr<void> args;  // what the operation reads until it ends

    /** A reference for the callback's cbdata (give it to finish()). */
    static void *callback_ref(const std::shared_ptr<DeadlineWait> &w) {
        return new std::shared_ptr<DeadlineWait>(w);
    }
    /** Drop a reference callback_ref made whose callback will not come
     *  (the operation was refused, or done at once). */
    static void drop_ref(void *ref) { delete static_cast<std::shared_ptr<DeadlineWait> *>(ref); }
    /** The callback: record status, wake the waiter, drop the reference. */
    static void finish(void *ref, int status) {
        auto *w = static_cast<std::shared_ptr<DeadlineWait> *>(ref);
        {
            std::lock_guard<std::mutex> lock((*w)->mu);
            (*w)->status = status;
            (*w)->done = true;
        }
        (*w)->cv.notify_all();
        delete w;
    }
    /** Wait until finish() or end; true with *status when finished. */
    bool wait_until(std::chrono::steady_clock::time_point end, int *status) {
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_until(lock, end, [this] { return done; })) return false;
        *status = this->status;
        return true;
    }
    /** Wait until finish() or limit from now. */
    bool wait(std::chrono::milliseconds limit, int *status) {
        return wait_until(std::chrono::steady_clock::now() + limit, status);
    }
};

} // namespace ucxp2p

#endif
