#include "core/progress.h"
#include "core/log.h"
#include "core/rails.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

namespace ucxp2p {

int64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

namespace {
// A user thread that polled within this window is driving progress.
constexpr int64_t kUserDrivingNs = 2000000;  // 2 ms
constexpr int64_t kMinUserNapNs = 200000;    // 200 us
}

Progress::Progress(ucp_worker_h worker, Mutex &worker_mu,
                   const Options &opts, std::function<void()> after_progress)
    : worker_(worker), worker_mu_(worker_mu), opts_(opts),
      after_progress_(std::move(after_progress)) {}

Progress::~Progress() {
    stop();
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
}

p2p_status_t Progress::start() {
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (wake_fd_ < 0 || epoll_fd_ < 0) {
        P2P_LOG(P2P_LOG_ERROR, "progress: cannot create eventfd/epoll: %s",
                std::strerror(errno));
        return P2P_ERR_TRANSPORT;
    }
    struct epoll_event ev;
    std::memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    if (opts_.wakeup_supported) {
        ucs_status_t st = ucp_worker_get_efd(worker_, &worker_efd_);
        if (st == UCS_OK) {
            ev.data.fd = worker_efd_;
            epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, worker_efd_, &ev);
        } else {
            P2P_LOG(P2P_LOG_INFO,
                    "progress: worker has no event fd (%s), sleeping by ticks",
                    ucs_status_string(st));
            opts_.wakeup_supported = false;
        }
    }
    try {
        if (opts_.serialized) {
            thread_ = std::thread(&Progress::run_backstop, this);
        } else {
            thread_ = std::thread(&Progress::run, this);
        }
        // Named (before start() returns) for top -H, gdb and ps.
        pthread_setname_np(thread_.native_handle(),
                           opts_.serialized ? "p2p-backstop" : "p2p-progress");
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "progress: cannot start thread: %s", e.what());
        return P2P_ERR_NO_MEMORY;
    }
    return P2P_OK;
}

void Progress::stop() {
    if (!thread_.joinable()) {
        return;
    }
    stop_.store(true);
    uint64_t one = 1;
    ssize_t r = write(wake_fd_, &one, sizeof(one));
    (void)r;
    thread_.join();
}

void Progress::kick() {
    uint64_t one = 1;
    ssize_t r = write(wake_fd_, &one, sizeof(one));
    (void)r;
}

unsigned Progress::take_in_locked(unsigned max_calls) {
    unsigned n = 0;
    while (n < max_calls && ucp_worker_progress(worker_) != 0) {
        ++n;
    }
    return n;
}

unsigned Progress::progress_locked() {
    const unsigned n = conclude_and_take_in_locked();
    after_locked();
    return n;
}

unsigned Progress::progress_round_locked(unsigned max_calls) {
    const unsigned n = conclude_and_take_in_locked(max_calls);
    after_locked();
    take_in_before_copies_locked();  // as a user's progress call does
    return n;
}

unsigned Progress::progress_for_locked(int64_t max_ns) {
    conclude_copies_locked();
    const int64_t deadline = now_ns() + max_ns;
    unsigned n = 0;
    // Not the first empty call, but kIdleCalls in a row end it: an
    // interface of UCP's that no endpoint uses yet is polled only once an
    // event of its (a message in its FIFO) activated it, and that is a
    // one-shot callback of a progress call, which itself takes in nothing;
    // the next call takes the message (mp_scen_connect.cc).
    constexpr unsigned kIdleCalls = 4;
    unsigned idle = 0;
    // The clock after every call: one over tcp can take in for 2 ms.
    while (idle < kIdleCalls) {
        if (take_in_locked(1) != 0) {
            ++n;
            idle = 0;
        } else {
            ++idle;
        }
        if (now_ns() >= deadline) break;
    }
    after_locked();
    return n;
}

bool Progress::try_progress_from_user() {
    // Only a change matters to the thread: a plain increment (an increment
    // lost between two polling threads still changes the value) avoids a
    // locked instruction per poll.
    user_polls_.store(user_polls_.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
    // Consecutive polls that found another thread progressing.
    static thread_local unsigned busy_polls = 0;
    std::unique_lock<Mutex> lock(worker_mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
        // Another thread is progressing -- possibly for long (UCX's own
        // shared-memory copy of megabytes runs inside it). When it shares our core
        // (ranks pinned to one core each), spinning here would halve its
        // speed: after a few polls, give it the CPU (returns at once when
        // nobody waits for it). Short holds never reach the yield.
        if (++busy_polls >= 64) {
            busy_polls = 0;
            sched_yield();
        }
        return false;
    }
    // busy_polls is not reset here: a thread-local in a shared library
    // costs a __tls_get_addr call, on every poll; a stale count only
    // yields once a little earlier next time the lock is busy.
    conclude_copies_locked();
    ucp_worker_progress(worker_);
    after_locked();
    take_in_before_copies_locked();
    CopyJob *copies = copies_.claim_locked();
    if (copies == nullptr) return true;
    lock.unlock();
    copies_.run(copies);
    // Conclude them now if the worker is free (else the thread does).
    if (lock.try_lock()) {
        after_locked();
    } else if (!opts_.serialized) {
        kick();
    }
    return true;
}

bool Progress::progress_once() {
    std::unique_lock<Mutex> lock(worker_mu_);  // the asymmetric side: plain stores
    conclude_copies_locked();
    bool did = ucp_worker_progress(worker_) != 0;
    after_locked();
    take_in_before_copies_locked();
    CopyJob *copies = copies_.claim_locked();
    if (copies != nullptr) {
        lock.unlock();
        copies_.run(copies);
        lock.lock();
        after_locked();
        did = true;
    }
    if (did) last_active_ns_ = now_ns();
    return did;
}

void Progress::idle(int timeout_ms) {
    if (opts_.mode == P2P_PROGRESS_BUSY || timeout_ms == 0) {
        return;
    }
    if (opts_.mode == P2P_PROGRESS_ADAPTIVE &&
        now_ns() - last_active_ns_ < static_cast<int64_t>(opts_.spin_us) * 1000) {
        return;  // a message is probably close: keep polling
    }
    if (!opts_.wakeup_supported) {
        struct timespec ts = {0, 50 * 1000};  // no event fd: short naps
        nanosleep(&ts, nullptr);
        return;
    }
    ucs_status_t st;
    {
        std::lock_guard<Mutex> lock(worker_mu_);
        st = ucp_worker_arm(worker_);
    }
    if (st != UCS_OK) {
        return;  // UCS_ERR_BUSY: events arrived meanwhile, progress again
    }
    struct pollfd pfd = {worker_efd_, POLLIN, 0};
    poll(&pfd, 1, timeout_ms);
}

void Progress::wake_idle() {
    if (serialized() && opts_.wakeup_supported) {
        ucp_worker_signal(worker_);  // documented safe from any thread
    }
}

void Progress::run_backstop() {
    // While the application calls, look whether it still does (a counter
    // read: nothing on its path), every kActiveMs at first and backing off
    // to kBusyMs while it keeps calling (each look is a wake-up that may
    // preempt it on its core: every 1 ms cost 3-10% of the 8-byte message
    // rate). Once it has stayed out for a round, progress; after
    // kSettleRounds quiet rounds sleep on the worker's events (armed) up to
    // tick_ms, or without event support back off to tick_ms by doubling.
    // The rule "the lock count moved: its calls progress" asks every call
    // an application may poll in a loop to progress when it takes the
    // lock and finds nothing done (p2p_comm_poll, p2p_comm_wait, a busy
    // p2p_mem_deregister); a new such call must do the same.
    constexpr int kActiveMs = 1;
    constexpr int kBusyMs = 16;
    constexpr int kSettleRounds = 8;
    const int tick = static_cast<int>(std::max<uint32_t>(opts_.tick_ms, 1));
    uint64_t seen = worker_mu_.frequent_locks();
    int quiet = 0, timeout = kActiveMs;
    bool armed = false;
    while (!stop_.load(std::memory_order_relaxed)) {
        // The worker's fd only while armed: unarmed it may stay readable.
        if (armed) {
            sleep_on_events(timeout);
        } else {
            sleep_on_wake_fd(static_cast<int64_t>(timeout) * 1000000);
        }
        armed = false;
        tick_period(now_ns());  // the application's calls or ours run it
        uint64_t now = worker_mu_.frequent_locks();
        if (now != seen || app_waiting_.load(std::memory_order_relaxed)) {
            seen = now;  // the application is calling: its calls progress
            quiet = 0;
            timeout = std::min(kBusyMs, std::max(timeout, kActiveMs) * 2);
            continue;
        }
        if (!worker_mu_.try_lock_rare()) {
            timeout = kActiveMs;  // it came back meanwhile
            continue;
        }
        if (app_waiting_.load(std::memory_order_relaxed)) {  // after the fence
            worker_mu_.unlock_rare();
            timeout = kActiveMs;
            continue;
        }
        // Rounds of one progress call (progress_round_locked), one after
        // another while the worker keeps finding something, until the
        // application wants the lock back: one drain to the end held it
        // for as long as a peer streamed (the application's next call
        // waited up to 124 ms behind a sender of 8-byte messages; with
        // rounds of 32 calls, 27 ms over tcp, where one call can take in
        // for 2 ms; docs/PERFORMANCE.md, 2026-12-01). The application,
        // trying, waits in wait_rare with owner_ set: waited_on() sees it,
        // without a heavy fence per round.
        bool more;
        unsigned rounds = 0;
        do {
            more = progress_round_locked(1) != 0;
            if (++rounds % kRoundCalls == 0) tick_period(now_ns());  // sweeps run
        } while (more && !worker_mu_.waited_on() && !copies_.due() &&
                 !stop_.load(std::memory_order_relaxed));
        ++quiet;
        if (more) quiet = 0;  // still streaming: not settled
        bool busy = false;  // events arrived since the progress call
        CopyJob *copies = copies_.claim_locked();
        if (copies != nullptr) {
            quiet = 0;  // come back soon to conclude them
        } else if (quiet >= kSettleRounds && opts_.wakeup_supported) {
            ucs_status_t st = ucp_worker_arm(worker_);
            armed = st == UCS_OK;
            busy = st == UCS_ERR_BUSY;
        }
        worker_mu_.unlock_rare();
        if (copies != nullptr) {
            copies_.run(copies);
            // An application that began to wait meanwhile sleeps on the
            // worker's events, which the copy's end is not, and keeps this
            // thread away while it waits: wake it to conclude them. (Always:
            // it may begin to wait right after a look at app_waiting_; an
            // idle() that is not sleeping returns once, early.)
            wake_idle();
        }
        if (armed) {
            timeout = tick;
        } else if (quiet >= kSettleRounds && !busy) {
            timeout = std::min(tick, std::max(timeout, kActiveMs) * 2);
        } else {
            timeout = kActiveMs;
        }
    }
}

void Progress::sleep_on_wake_fd(int64_t ns) {
    struct pollfd pfd = {wake_fd_, POLLIN, 0};
    struct timespec ts = {static_cast<time_t>(ns / 1000000000),
                          static_cast<long>(ns % 1000000000)};
    if (ppoll(&pfd, 1, &ts, nullptr) > 0 && (pfd.revents & POLLIN) != 0) {
        uint64_t v;
        ssize_t r = read(wake_fd_, &v, sizeof(v));
        (void)r;
    }
}

void Progress::sleep_on_events(int timeout_ms) {
    struct epoll_event evs[2];
    int n = epoll_wait(epoll_fd_, evs, 2, timeout_ms);
    for (int i = 0; i < n; ++i) {
        if (evs[i].data.fd == wake_fd_) {
            uint64_t v;
            ssize_t r = read(wake_fd_, &v, sizeof(v));
            (void)r;
        }
    }
}

void Progress::run() {
    rails_bind_this_thread("progress");  // the rail plan's NUMA node
    int64_t last_active = now_ns();
    uint64_t seen_user_polls = user_polls_.load(std::memory_order_relaxed);
    uint64_t seen_waits = waits_.load(std::memory_order_relaxed);
    int64_t last_user_ns = 0;
    const int64_t spin_ns = static_cast<int64_t>(opts_.spin_us) * 1000;
    const int64_t spin_busy_ns = static_cast<int64_t>(opts_.spin_busy_us) * 1000;
    while (!stop_.load(std::memory_order_relaxed)) {
        if (opts_.mode != P2P_PROGRESS_BUSY) {
            const int64_t t = now_ns();
            tick_period(t);  // a polling user's progress calls run it too
            uint64_t polls = user_polls_.load(std::memory_order_relaxed);
            if (polls != seen_user_polls) {
                seen_user_polls = polls;
                last_user_ns = t;
            }
            uint64_t waits = waits_.load(std::memory_order_seq_cst);
            if (waits != seen_waits) {  // someone blocks on us: stay on duty
                seen_waits = waits;
                last_user_ns = 0;
            }
            if (t - last_user_ns < kUserDrivingNs) {
                // A user thread is polling, so it progresses the worker:
                // step aside instead of competing -- even while there is
                // work, or both threads take turns on the worker lock (and,
                // sharing a core, on the CPU) for every event. Sleep out the
                // rest of the window in one go: each wake-up of this thread
                // preempts the poller when they share a core (200 us naps
                // cost 20% of 64 KiB shm bandwidth here). And do not
                // progress after the nap while the poller still polls: a
                // round here drains the worker with the lock held, so the
                // poller cannot post its next receives meanwhile (progressing
                // after every 2 ms nap cost 6-9% of 64 KiB shm bandwidth).
                // Once its polls stop for a window, this thread takes over.
                // A waiter or a stop wakes it early.
                user_sleep_.store(true, std::memory_order_seq_cst);
                if (waits_.load(std::memory_order_seq_cst) == seen_waits) {
                    sleep_on_wake_fd(std::max<int64_t>(last_user_ns + kUserDrivingNs - t,
                                                       kMinUserNapNs));
                }
                user_sleep_.store(false, std::memory_order_relaxed);
                continue;
            }
        }
        uint64_t posts;
        unsigned n;
        CopyJob *copies;
        bool waited_on;
        {
            HelperLock lock(worker_mu_);  // the progress thread's side (core/lock.h)
            posts = posts_.load(std::memory_order_relaxed);
            n = progress_round_locked(kRoundCalls);
            copies = copies_.claim_locked();
            waited_on = worker_mu_.waited_on();
        }
        if (waited_on) {
            // A thread sleeps on the lock (an application's post): let it
            // in before the next round takes the lock again. Sharing our
            // core, the woken thread would otherwise wait for this one to
            // run out of work or its time slice.
            sched_yield();
        }
        if (copies != nullptr) {
            copies_.run(copies);  // concluded by the next round
            ++n;
        }
        int64_t now = now_ns();
        tick_period(now);
        const bool active = n != 0 || posts != posts_.load(std::memory_order_relaxed);
        if (active) {
            last_active = now;
        }
        if (n != 0 && blocked_.load(std::memory_order_relaxed) > 0) {
            sched_yield();  // let the waiter we just woke run (waiter_blocked)
        }
        if (opts_.mode == P2P_PROGRESS_BUSY) {
            continue;
        }
        if (active) {
            continue;
        }
        if (opts_.mode == P2P_PROGRESS_ADAPTIVE) {
            bool busy = inflight_.load(std::memory_order_relaxed) > 0;
            if (now - last_active < (busy ? spin_busy_ns : spin_ns)) {
                if (busy) {
                    sched_yield();  // be polite to ranks sharing the core
                }
                continue;
            }
        }
        if (!opts_.wakeup_supported) {
            sleep_on_events(1);  // no event fd: poll by 1 ms ticks
            continue;
        }
        ucs_status_t st;
        bool quiet = false;
        {
            HelperLock lock(worker_mu_);
            st = ucp_worker_arm(worker_);
            // Decided under the lock posts take: a post made since our
            // progress call is seen here (posts_ changed), and one made
            // after this sees sleeping_ and kicks (note_post_locked).
            if (st == UCS_OK && posts == posts_.load(std::memory_order_relaxed)) {
                sleeping_.store(true, std::memory_order_relaxed);
                quiet = true;
            }
        }
        if (st == UCS_ERR_BUSY) {
            continue;  // events pending: progress again
        }
        if (st != UCS_OK) {
            sleep_on_events(1);
            continue;
        }
        if (!quiet) {
            last_active = now;  // posted meanwhile: progress it
            continue;
        }
        if (!stop_.load()) {  // stop() writes the eventfd after setting stop_
            sleep_on_events(static_cast<int>(opts_.tick_ms));
        }
        sleeping_.store(false, std::memory_order_relaxed);
    }
}

} // namespace ucxp2p
