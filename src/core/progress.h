/*
 * The progress engine of a context: one thread that drives the UCP worker so
 * operations complete without user calls.
 *
 * Modes (P2P_PROGRESS): busy polls forever; event sleeps on the worker's
 * event fd (ucp_worker_arm) whenever a progress call did nothing; adaptive
 * (default) keeps polling for P2P_SPIN_US after the last activity, then
 * sleeps like event. While a user thread drives progress itself (p2p_comm_poll
 * in a loop), the thread steps aside so the two do not fight for the worker.
 * A sleeping thread wakes on worker events, on kick() (after a post that
 * found it asleep), and at least every tick_ms so UCX's keepalive (peer
 * failure detection) keeps running.
 *
 * In P2P_THREAD_SERIALIZED mode (Options::serialized) the application's own
 * calls progress the worker (p2p_comm_poll on an empty queue; p2p_comm_wait
 * through progress_once and idle), and the worker lock is asymmetric
 * (core/lock.h). The thread is then only a backstop: it takes the worker
 * when the application has not locked it for a while (1 ms), so protocol
 * messages this rank still owes its peers (a single-copy ACK, a rendezvous
 * ATS or a wireup reply sitting in a pending queue, an endpoint close) go
 * out, and keepalive notices dead peers, while the application computes or
 * waits in a barrier of its own. Without it, a rank that has completed all
 * its operations and stopped calling could stall its peers forever.
 */
#ifndef UCXP2P_CORE_PROGRESS_H
#define UCXP2P_CORE_PROGRESS_H

#include <ucxp2p/p2p.h>
#include <ucp/api/ucp.h>

#include "core/copy_queue.h"
#include "core/lock.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>

namespace ucxp2p {

class Progress {
public:
    struct Options {
        p2p_progress_mode_t mode;
        uint32_t spin_us;
        uint32_t spin_busy_us;  // spin while operations are in flight
        uint32_t tick_ms;
        bool wakeup_supported;  // worker created with UCP_FEATURE_WAKEUP
        bool serialized = false;  // P2P_THREAD_SERIALIZED: a backstop thread
        // Set every period_ns by the progress (or backstop) thread, for the
        // deferred hooks' periodic work (a peer liveness sweep); null: none.
        std::atomic<bool> *periodic = nullptr;
        int64_t period_ns = 0;
    };

    /** after_progress runs (with the worker lock held) after each progress
     *  call: deferred work such as closing failed endpoints. */
    Progress(ucp_worker_h worker, Mutex &worker_mu, const Options &opts,
             std::function<void()> after_progress);
    ~Progress();
    Progress(const Progress &) = delete;
    Progress &operator=(const Progress &) = delete;

    /** Set up the event fds and start the thread (the backstop when
     *  serialized). P2P_ERR_TRANSPORT / P2P_ERR_NO_MEMORY on failure. */
    p2p_status_t start();

    /** P2P_THREAD_SERIALIZED: the application's calls progress. */
    bool serialized() const { return opts_.serialized; }
    /** Longest sleep between progress calls (keepalive must run). */
    uint32_t tick_ms() const { return opts_.tick_ms; }

    /** Serialized mode: one progress call from the caller (with the
     *  deferred work after it); true if it did something. */
    bool progress_once();
    /** Serialized mode, after progress_once found nothing: wait up to
     *  timeout_ms for worker events. Returns at once in busy mode, and in
     *  adaptive mode within P2P_SPIN_US of the last activity (the caller
     *  polls again); otherwise arms the worker and sleeps on its event fd
     *  (without event support: naps briefly). */
    void idle(int timeout_ms);
    /** Serialized mode: end an idle() now sleeping (p2p_comm_signal from
     *  another thread); elsewhere nothing sleeps there. Any thread. */
    void wake_idle();
    /** Serialized mode: the application is inside p2p_comm_wait (which
     *  progresses by itself: the backstop stays away, so it never eats the
     *  worker events the wait sleeps on). */
    void serial_wait(bool in) { app_waiting_.store(in, std::memory_order_relaxed); }
    /** Stop and join (idempotent). */
    void stop();

    /** Called, with the worker lock held, for every post of receives and
     *  every post of sends that left one in flight (a send completed inside
     *  the post needs no progress: a stream of small sends makes no system
     *  call each): records it for a thread about to sleep. Returns true if
     *  the thread sleeps, then the caller calls kick() once the lock is
     *  released. The thread decides to sleep under the same lock (after
     *  ucp_worker_arm), so either it sees this post or this sees it
     *  sleeping: no wake-up is lost, and a post costs no atomic
     *  read-modify-write. The first post to see it asleep takes the flag
     *  down, so a burst of posts wakes it with one kick, not one each. */
    bool note_post_locked() {
        posts_.store(posts_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
        if (!sleeping_.load(std::memory_order_relaxed)) {
            return false;
        }
        sleeping_.store(false, std::memory_order_relaxed);
        return true;
    }
    /** Wake the thread from its sleep (see note_post_locked). */
    void kick();

    /** Operations posted and not yet completed, over all communicators of
     *  the context: while some are in flight the adaptive mode keeps polling
     *  longer (P2P_SPIN_BUSY_US), since a message is probably on its way.
     *  Both are called with the worker lock held (posts and completions are
     *  made under it), so the count is updated without an atomic
     *  read-modify-write; the thread only reads it. */
    void ops_posted(size_t n) { bump(&inflight_, static_cast<int64_t>(n)); }
    void op_completed() { bump(&inflight_, -1); }

    /** One ucp_worker_progress call from a user thread if nobody else holds
     *  the worker (a single call: a poll loop calls again soon, and
     *  returning at once to the caller after a completion is what lowers
     *  latency). Returns true if it ran. */
    bool try_progress_from_user();

    /** A user thread is about to block waiting for completions (it does not
     *  progress the worker itself): the thread must not keep stepping
     *  aside for pollers; wakes it if it is. */
    void note_waiter() {
        waits_.fetch_add(1, std::memory_order_seq_cst);
        if (user_sleep_.load(std::memory_order_seq_cst)) kick();
    }

    /** A user thread blocks in p2p_comm_wait from now (true) / no longer
     *  (false). While one does, the thread yields the CPU after each round
     *  that made progress: the completion it pushed has woken the waiter,
     *  which often shares this thread's core (a rank pinned to one core,
     *  or more threads than cores) and would otherwise wait until this
     *  thread runs out of work or is preempted. 8 B ping-pong with
     *  p2p_comm_wait, p50: 14.3 -> 7.0-8.2 us pinned, 15.2 -> 7.1-7.4 us
     *  unpinned; 16 KiB bw with waits 1.9-2.1 -> 2.6-3.0 GB/s. */
    void waiter_blocked(bool on) {
        blocked_.fetch_add(on ? 1 : -1, std::memory_order_relaxed);
    }

    /** Progress under the lock (caller holds worker_mu): until the worker
     *  finds nothing more, then the after-progress hooks. */
    unsigned progress_locked();
    /** The progress thread's round: like progress_locked, but at most
     *  max_calls progress calls (kRoundCalls; the backstop's rounds, one),
     *  so that its hold of the worker lock ends while a peer keeps
     *  streaming (the thread then lets a thread sleeping on the lock in
     *  first). Drained to the end under a sender
     *  of 8-byte messages, one round held the lock for 80 ms: the
     *  application's posts waited that long (the 8 B message rate fell
     *  from ~5 to 1.1-1.5 M msg/s; docs/PERFORMANCE.md, 2026-12-01).
     *  Ending a round as soon as a thread sleeps on the lock instead
     *  handed the lock over at every message: 8 B rate with
     *  p2p_comm_wait 4.3 -> 0.9 M msg/s. Returns the progress calls that
     *  found something. */
    unsigned progress_round_locked(unsigned max_calls);
    static constexpr unsigned kRoundCalls = 32;
    /** Like progress_locked, but its take-in ends once max_ns passed (the
     *  clock read after every progress call that found something), even
     *  while the worker still finds more: for a call on the application's
     *  path that wants what arrived before it, not all that a peer keeps
     *  sending meanwhile (drained to the end, a receive's first contact
     *  waited 437 ms behind another rank's stream of 8-byte messages).
     *  It ends after a few empty progress calls in a row, not the first:
     *  UCP activates an idle interface on one call and polls it on the
     *  next. */
    unsigned progress_for_locked(int64_t max_ns);

    /** Copies made outside the worker lock (core/copy_queue.h). */
    CopyQueue &copies() { return copies_; }
    /** Queue a copy (worker lock held) and make sure a thread takes it:
     *  wakes the progress thread if it sleeps. */
    void copy_due_locked(CopyJob *j) {
        copies_.push_due(j);
        if (!opts_.serialized && note_post_locked()) kick();
    }
    /** After a progress call (worker lock held): the copies queued so far,
     *  for the caller to run() once it lets the lock go; nullptr: none. */
    CopyJob *claim_copies_locked() { return copies_.claim_locked(); }

    /** Conclude the copies that ended (another thread's, since this
     *  progress call concluded them), then progress the worker until it
     *  finds nothing more, without running the after-progress hooks: for
     *  a hook that must see everything already delivered before it
     *  decides (caller holds worker_mu). Concluded first, their answers
     *  go out ahead of what it takes in, as every progress call orders
     *  them (conclude_copies_locked). */
    unsigned conclude_and_take_in_locked(unsigned max_calls = ~0u) {
        conclude_copies_locked();
        return take_in_locked(max_calls);
    }

private:
    /** The worker until it finds nothing more, or max_calls progress
     *  calls found something (no conclusion first: see
     *  conclude_and_take_in_locked). */
    unsigned take_in_locked(unsigned max_calls = ~0u);
    static void bump(std::atomic<int64_t> *v, int64_t d) {
        v->store(v->load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    }
    void run();
    void run_backstop();
    /** What follows every progress call (worker lock held): conclude the
     *  copies that ended, then the context's deferred work. */
    void after_locked() {
        conclude_copies_locked();
        after_progress_();
    }
    /** Every progress call concludes the copies that ended (made by this
     *  thread since its last round, or by another) before it takes
     *  anything more in: their answers (a WDONE, an ACK) go out ahead of
     *  what arrived meanwhile, as when the copy ran inside the callback.
     *  (A keepalive reply saying the peer closed its endpoint, taken in
     *  first, would fail the endpoint the WDONE of a written part needs; a
     *  reply another thread takes in while the copy runs still can.) */
    void conclude_copies_locked() {
        if (copies_.copied()) copies_.conclude_locked();
    }
    /** A single progress call queued copies: take in the rest of what
     *  arrived before running them (as progress_locked does), so that a
     *  split send's write sees a goodbye its receiver sent after the
     *  answer (Comm::write_tail), not only after the write. */
    void take_in_before_copies_locked() {
        if (copies_.due() && take_in_locked() != 0) after_locked();
    }
    void sleep_on_events(int timeout_ms);
    void sleep_on_wake_fd(int64_t ns);

    ucp_worker_h worker_;
    Mutex &worker_mu_;
    Options opts_;
    std::function<void()> after_progress_;
    CopyQueue copies_;
    int64_t next_period_ns_ = 0;  // the progress or backstop thread's own
    /** Raise opts_.periodic when its period passed (now: now_ns()). */
    void tick_period(int64_t now) {
        if (opts_.periodic != nullptr && now >= next_period_ns_) {
            next_period_ns_ = now + opts_.period_ns;
            opts_.periodic->store(true, std::memory_order_relaxed);
        }
    }
    int worker_efd_ = -1;
    int wake_fd_ = -1;   // eventfd
    int epoll_fd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    // Set under the worker lock by the thread before it sleeps; cleared
    // under it by the post that kicks it, and by the thread after its sleep
    // (a stale true only costs a spurious kick).
    std::atomic<bool> sleeping_{false};
    std::atomic<uint64_t> posts_{0};
    // Bumped by every user-driven progress call; the thread notices the
    // change and timestamps it (keeps clock reads off the user's path).
    std::atomic<uint64_t> user_polls_{0};
    // Bumped by note_waiter; user_sleep_ is true while the thread sleeps
    // because a user thread polls (seq_cst pair: a waiter either sees the
    // flag and kicks, or the thread sees the new count and stays awake).
    std::atomic<uint64_t> waits_{0};
    std::atomic<bool> user_sleep_{false};
    std::atomic<int64_t> inflight_{0};
    std::atomic<int> blocked_{0};  // user threads inside p2p_comm_wait's sleep
    int64_t last_active_ns_ = 0;   // serialized mode: last productive call
    std::atomic<bool> app_waiting_{false};  // serialized: inside p2p_comm_wait
};

int64_t now_ns();

} // namespace ucxp2p

#endif
