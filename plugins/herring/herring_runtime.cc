/*
 * The per-process state behind the herring API: one bootstrap, one ucxp2p
 * context and one communicator of every rank, plus shim-owned completion
 * queues for entries ucxp2p never produces (calls rejected synchronously,
 * calls before Initialize or after Shutdown, entries kept across Shutdown).
 *
 * Locking: lifecycle_mu_ serialises Initialize/Shutdown; mu_ guards the state,
 * the handles and the local queues and is never held across a blocking
 * ucxp2p call. Every call that uses the communicator or context outside mu_
 * counts itself in users_, and Shutdown destroys them only once users_ is 0
 * (blocking waits use short slices, so that happens quickly). A call
 * rejected at once queues its entry locally and signals the queue, so a
 * completion call blocked in p2p_comm_wait returns it without delay.
 */
#include "herring_internal.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

namespace herring {

namespace {

constexpr int kWaitSliceMs = 50;
constexpr int kDrainTimeoutMs = 10000;
constexpr int kNoMemoryRetryMs = 200;
constexpr uint32_t kNoRank = 0xffffffffu;

enum class State { kUninit, kReady, kShutdown };

CompletionEntry make_entry(const void *context, uint32_t rank, uint32_t tensor_id,
                           herringP2PMessageErrorCode_t code) {
    CompletionEntry e;
    e.context = context;
    e.dst_rank = rank;
    e.tensor_id = tensor_id;
    e.error_code = code;
    return e;
}

CompletionEntry to_entry(const p2p_completion_t &c) {
    if (c.status != P2P_OK && log_enabled(P2P_LOG_DEBUG)) {
        log(P2P_LOG_DEBUG, "completion: peer %u tensor %u: %s", c.peer, c.tensor_id,
            p2p_status_string(c.status));
    }
    return make_entry(c.user_context, c.peer, c.tensor_id, map_status(c.status));
}

const char *queue_name(p2p_queue_t q) { return q == P2P_QUEUE_SEND ? "send" : "recv"; }

/**
 * The rail plan is ucxp2p's own business: p2p_context_create computes it
 * (SMDATAPARALLEL_DEVICE_NAME, P2P_RAILS, P2P_HCA, the launcher's local-rank
 * variables) and gives it to UCX through the UCP config, never through the
 * environment and never over a UCX_* variable the user set. The shim only
 * says what the planner will see (read-only). When the bootstrap knows a
 * local rank the planner would not find in the environment (the tcp
 * bootstrap computes it from host names when LOCAL_RANK is unset; a
 * launcher may set LOCAL_RANK without LOCAL_WORLD_SIZE, which the planner
 * ignores), it hands it over in p2p_config_t: returns true then.
 */
bool log_rail_inputs(const p2p_bootstrap_info_t &b) {
    if (const char *smddp = std::getenv("SMDATAPARALLEL_DEVICE_NAME")) {
        log(P2P_LOG_INFO, "initialize: SMDATAPARALLEL_DEVICE_NAME=%s goes to ucxp2p's rail "
            "plan at context creation ('rails:' log lines)", smddp);
    }
    if (b.local_size <= 1) {
        return false;
    }
    uint32_t rank = 0, size = 0;
    if (p2p_local_rank_query(&rank, &size) == P2P_OK && size > 0) {
        return false;  // the planner has a pair of its own: the launcher's
    }
    log(P2P_LOG_INFO, "initialize: no launcher variable pair names the local rank and size; "
        "the %s bootstrap's (%u of %u) goes to the rail plan", b.name, b.local_rank,
        b.local_size);
    return true;
}

class Runtime {
public:
    Runtime(const Runtime &) = delete;
    Runtime &operator=(const Runtime &) = delete;

    /** Never destroyed: usable from atexit handlers and other static
     *  destructors whatever their order. */
    static Runtime &get() {
        static Runtime *rt = new Runtime;
        return *rt;
    }

    void initialize();
    void shutdown();
    void *register_memory(void *buff, int len);
    void post(p2p_queue_t q, int rank, void *buffer, void *mr, uint64_t length, int tensor_id,
              const void *context);
    CompletionEntry pop(p2p_queue_t q);
    uint32_t local_rank();

private:
    Runtime() = default;

    /** Entry for a call the shim cannot hand to ucxp2p (mu_ held). */
    herringP2PMessageErrorCode_t unusable_code() const {
        return state_ == State::kShutdown ? RDMA_SHUTDOWN : RDMA_READ_FAIL;
    }
    const char *unusable_reason() const {
        if (state_ == State::kShutdown) return "after herringP2PShutdown";
        return init_failed_ ? "after a failed herringP2PInitialize"
                            : "before herringP2PInitialize";
    }
    /** Move every entry ucxp2p already has into the local queue (mu_ held),
     *  then queue *then (when given) behind them, so a synthesised entry
     *  keeps completion order. Room is made before each entry is taken: an
     *  allocation that fails throws std::bad_alloc with the entries not
     *  yet moved still in ucxp2p's queue (and *then not queued). */
    void drain_locked(p2p_queue_t q, const CompletionEntry *then = nullptr);
    /** drain_locked of both queues; false (nothing lost) when out of memory. */
    bool try_drain_both_locked();
    void release_user() {
        std::lock_guard<std::mutex> lock(mu_);
        --users_;
        cv_.notify_all();
    }

    std::mutex lifecycle_mu_;
    std::mutex mu_;
    std::condition_variable cv_;
    State state_ = State::kUninit;
    bool init_failed_ = false;  // the last Initialize failed (state_ kUninit)
    int users_ = 0;
    p2p_bootstrap_h boot_ = nullptr;
    p2p_context_h ctx_ = nullptr;
    p2p_comm_h comm_ = nullptr;
    p2p_comm_info_t info_{};
    uint32_t device_rank_ = 0;  // local rank the rail plan used (herringLocalDevice)
    bool device_rank_set_ = false;  // an Initialize succeeded: device_rank_ holds
    std::deque<CompletionEntry> local_[2];
};

void Runtime::drain_locked(p2p_queue_t q, const CompletionEntry *then) {
    constexpr size_t kBatch = 16;
    std::deque<CompletionEntry> &d = local_[q];
    for (;;) {
        const size_t base = d.size();
        d.resize(base + kBatch);  // may throw: nothing taken yet
        p2p_completion_t c[kBatch];
        size_t n = 0;
        if (comm_ == nullptr || p2p_comm_poll(comm_, q, c, kBatch, &n) != P2P_OK) {
            n = 0;
        }
        for (size_t i = 0; i < n; ++i) {
            d[base + i] = to_entry(c[i]);
        }
        if (n == 0 && then != nullptr) {
            d[base] = *then;
            n = 1;
            then = nullptr;
            d.resize(base + n);  // shrinking never allocates
            return;
        }
        d.resize(base + n);
        if (n == 0) {
            return;
        }
    }
}

bool Runtime::try_drain_both_locked() {
    try {
        drain_locked(P2P_QUEUE_SEND);
        drain_locked(P2P_QUEUE_RECV);
        return true;
    } catch (const std::bad_alloc &) {
        return false;
    }
}

void Runtime::initialize() {
    std::lock_guard<std::mutex> life(lifecycle_mu_);
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ == State::kReady) {
            log(P2P_LOG_INFO, "initialize: already initialized, nothing to do");
            return;
        }
        if (state_ == State::kShutdown) {
            log(P2P_LOG_ERROR, "initialize: called after herringP2PShutdown; the shim "
                "stays shut down (sends/receives complete with RDMA_SHUTDOWN)");
            return;
        }
    }
    p2p_bootstrap_h boot = nullptr;
    p2p_context_h ctx = nullptr;
    p2p_comm_h comm = nullptr;
    p2p_bootstrap_info_t binfo{};
    p2p_comm_info_t cinfo{};
    uint32_t plan_local_rank = 0;
    const char *step = "joining the job (bootstrap)";
    p2p_status_t st = p2p_bootstrap_create(P2P_BOOTSTRAP_AUTO, &boot);
    if (st == P2P_OK) {
        st = p2p_bootstrap_query(boot, &binfo);
    }
    if (st == P2P_OK) {
        p2p_config_t cfg{};
        // herringLocalDevice's rank: the one it gave before Initialize (an
        // application may have chosen its GPU with it then), unless the
        // bootstrap's goes to the rail plan below.
        plan_local_rank = env_local_rank();
        if (log_rail_inputs(binfo)) {
            cfg.field_mask = P2P_CONFIG_FIELD_LOCAL_RANK;
            cfg.local_rank = plan_local_rank = binfo.local_rank;
            cfg.local_size = binfo.local_size;
        }
        // The herring API is thread-safe (a thread may sit in a completion
        // call while others post): P2P_THREAD_MODE=serialized, which
        // allows one call at a time, cannot serve it.
        const char *tm = std::getenv("P2P_THREAD_MODE");
        if (tm != nullptr && strcasecmp(tm, "multi") != 0) {  // keywords ignore case
            log(P2P_LOG_INFO, "initialize: P2P_THREAD_MODE=%s ignored: the herring API "
                "needs thread mode multi", tm);
        }
        cfg.field_mask |= P2P_CONFIG_FIELD_THREAD_MODE;
        cfg.thread_mode = P2P_THREAD_MULTI;
        step = "creating the ucxp2p context";
        st = p2p_context_create(&cfg, &ctx);
    }
    if (st == P2P_OK) {
        step = "creating the communicator";
        st = p2p_comm_create(ctx, boot, &comm);
    }
    if (st == P2P_OK) {
        st = p2p_comm_query(comm, &cinfo);
    }
    if (st != P2P_OK) {
        // herringP2PInitialize returns void: this line, NULL registrations
        // and RDMA_READ_FAIL entries are how the application learns of it.
        log(P2P_LOG_ERROR, "initialize: herringP2PInitialize failed %s: %s (the cause is "
            "logged above); the shim stays uninitialized: herringP2PRegisterMemory returns "
            "NULL and sends/receives complete with RDMA_READ_FAIL until a later "
            "herringP2PInitialize succeeds", step, p2p_status_string(st));
        if (comm != nullptr) p2p_comm_destroy(comm);
        if (ctx != nullptr) p2p_context_destroy(ctx);
        if (boot != nullptr) p2p_bootstrap_destroy(boot);
        std::lock_guard<std::mutex> lock(mu_);
        init_failed_ = true;
        return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    init_failed_ = false;
    boot_ = boot;
    ctx_ = ctx;
    comm_ = comm;
    info_ = cinfo;
    device_rank_ = plan_local_rank;
    device_rank_set_ = true;
    state_ = State::kReady;
    log(P2P_LOG_INFO, "initialize: rank %u of %u (local %u of %u) through the %s bootstrap",
        cinfo.rank, cinfo.size, cinfo.local_rank, cinfo.local_size, binfo.name);
}

void Runtime::shutdown() {
    std::lock_guard<std::mutex> life(lifecycle_mu_);
    p2p_comm_h comm;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady) {
            if (state_ == State::kUninit) {
                log(P2P_LOG_WARN, "shutdown: called %s; nothing to tear down",
                    unusable_reason());
            }
            state_ = State::kShutdown;
            return;
        }
        comm = comm_;
    }
    // Collective, like MPI_Finalize: wait for every rank to stop posting
    // first (bounded by P2P_BOOTSTRAP_TIMEOUT_MS); meanwhile a send this
    // rank left pending may still move to a receive its peer posts before
    // its own Shutdown (cancelling first always failed that receive). What
    // is still in flight when the last rank arrives is cancelled below.
    p2p_status_t st = p2p_bootstrap_barrier(boot_);
    const bool all_here = st == P2P_OK;
    if (!all_here) {
        log(P2P_LOG_WARN, "shutdown: barrier with the other ranks failed (%s); cancelling "
            "pending operations anyway", p2p_status_string(st));
    }
    // Cancel what is pending: each operation completes (P2P_ERR_CANCELED ->
    // RDMA_SHUTDOWN); later posts fail with P2P_ERR_SHUTDOWN. Keep every
    // entry in the local queues, since destroying the communicator drops
    // what it still holds.
    st = p2p_comm_shutdown(comm);
    if (st != P2P_OK) {
        log(P2P_LOG_WARN, "shutdown: cancelling pending operations: %s", p2p_status_string(st));
    }
    // From here on, whatever way this call ends, the shim is shut down:
    // completion calls that saw the communicator refuse (P2P_ERR_SHUTDOWN)
    // wait for that state, and would wait forever.
    struct EndsShutDown {
        Runtime *rt;
        ~EndsShutDown() {
            std::lock_guard<std::mutex> lock(rt->mu_);
            rt->state_ = State::kShutdown;
            rt->cv_.notify_all();
        }
    } ends{this};
    // Move the entries into the local queues as they come, until nothing is
    // pending and ucxp2p's queues are empty. Out of memory, the entries stay
    // in ucxp2p's queues (none is taken without room for it) and the loop
    // tries again: until the deadline while operations are pending, for
    // kNoMemoryRetryMs once none is.
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::milliseconds(kDrainTimeoutMs);
    auto oom_deadline = deadline;
    for (bool warned = false;;) {
        size_t pending[2] = {0, 0};
        bool drained;
        {
            std::lock_guard<std::mutex> lock(mu_);
            drained = try_drain_both_locked();
            for (p2p_queue_t q : {P2P_QUEUE_SEND, P2P_QUEUE_RECV}) {
                if (p2p_comm_pending(comm, q, &pending[q]) != P2P_OK) {
                    pending[q] = 0;
                }
            }
            cv_.notify_all();  // completion calls waiting for these entries
        }
        if (pending[0] + pending[1] == 0 && drained) {
            break;
        }
        const auto now = std::chrono::steady_clock::now();
        if (!drained && !warned) {
            log(P2P_LOG_WARN, "shutdown: no memory to keep completion entries; trying again");
            warned = true;
        }
        if (pending[0] + pending[1] == 0 && oom_deadline == deadline) {
            oom_deadline = std::min(deadline, now + std::chrono::milliseconds(kNoMemoryRetryMs));
        }
        if (pending[0] + pending[1] == 0 && now > oom_deadline) {
            break;  // the teardown below tries once more, and says what is lost
        }
        if (now > deadline) {
            log(P2P_LOG_WARN, "shutdown: %zu send(s) and %zu receive(s) still pending after "
                "%d ms%s; their completions are lost", pending[0], pending[1], kDrainTimeoutMs,
                drained ? "" : ", and entries ucxp2p holds could not be kept (no memory)");
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // And once more before the teardown: no rank destroys its worker while a
    // peer may still be reading from it. Not after a failed barrier (a rank
    // is gone or stuck: waiting the timeout again would only delay the exit).
    if (all_here) {
        st = p2p_bootstrap_barrier(boot_);
        if (st != P2P_OK) {
            log(P2P_LOG_WARN, "shutdown: barrier with the other ranks failed (%s); tearing "
                "down anyway", p2p_status_string(st));
        }
    }
    p2p_bootstrap_h boot;
    p2p_context_h ctx;
    {
        std::unique_lock<std::mutex> lock(mu_);
        state_ = State::kShutdown;  // new calls no longer touch the handles
        cv_.notify_all();
        cv_.wait(lock, [this] { return users_ == 0; });
        if (!try_drain_both_locked()) {
            log(P2P_LOG_ERROR, "shutdown: no memory to keep completion entries: those "
                "ucxp2p still holds are lost");
        }
        boot = boot_;
        ctx = ctx_;
        boot_ = nullptr;
        ctx_ = nullptr;
        comm_ = nullptr;
    }
    p2p_comm_destroy(comm);
    p2p_context_destroy(ctx);  // also releases every registration
    p2p_bootstrap_destroy(boot);
    log(P2P_LOG_INFO, "shutdown: done");
}

void *Runtime::register_memory(void *buff, int len) {
    if (buff == nullptr || len <= 0) {
        log(P2P_LOG_ERROR, "register memory: invalid buffer %p length %d", buff, len);
        return nullptr;
    }
    p2p_context_h ctx;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady) {
            log(P2P_LOG_ERROR, "register memory: called %s", unusable_reason());
            return nullptr;
        }
        ctx = ctx_;
        ++users_;
    }
    p2p_mem_h mem = nullptr;
    p2p_status_t st = p2p_mem_register(ctx, buff, static_cast<size_t>(len), &mem);
    release_user();
    if (st != P2P_OK) {
        log(P2P_LOG_ERROR, "register memory: %p length %d: %s", buff, len,
            p2p_status_string(st));
        return nullptr;
    }
    return reinterpret_cast<void *>(mem);
}

void Runtime::post(p2p_queue_t q, int rank, void *buffer, void *mr, uint64_t length,
                   int tensor_id, const void *context) {
    const uint32_t peer = static_cast<uint32_t>(rank);
    const uint32_t tid = static_cast<uint32_t>(tensor_id);
    p2p_comm_h comm;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kReady) {
            static Burst site;
            log_burst(site, P2P_LOG_WARN, "%s to/from rank %d tensor %d: called %s",
                      queue_name(q), rank, tensor_id, unusable_reason());
            local_[q].push_back(make_entry(context, peer, tid, unusable_code()));
            return;
        }
        comm = comm_;
        ++users_;
    }
    // Released on every way out, an exception's included: Shutdown waits for
    // users_ to reach 0 before it destroys the communicator.
    struct User {
        Runtime *rt;
        ~User() { rt->release_user(); }
    } user{this};
    p2p_status_t st;
    if (rank < 0) {
        st = P2P_ERR_BAD_RANK;
    } else if (q == P2P_QUEUE_SEND) {
        st = p2p_comm_send(comm, peer, tid, buffer, length, static_cast<p2p_mem_h>(mr),
                           const_cast<void *>(context));
    } else {
        st = p2p_comm_recv(comm, peer, tid, buffer, length, static_cast<p2p_mem_h>(mr),
                           const_cast<void *>(context));
    }
    if (st == P2P_OK) {
        return;
    }
    // The vendor call returns void: the error becomes its one entry.
    static Burst site;
    log_burst(site, P2P_LOG_WARN, "%s to/from rank %d tensor %d length %llu: %s",
              queue_name(q), rank, tensor_id, static_cast<unsigned long long>(length),
              p2p_status_string(st));
    const CompletionEntry rejected = make_entry(context, peer, tid, map_status(st));
    std::lock_guard<std::mutex> lock(mu_);
    drain_locked(q, &rejected);
    // A completion call blocked in p2p_comm_wait returns now and finds the
    // entry (comm is still ours: users_ not yet released).
    p2p_comm_signal(comm, q);
}

CompletionEntry Runtime::pop(p2p_queue_t q) {
    for (;;) {
        p2p_comm_h comm;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!local_[q].empty()) {
                CompletionEntry e = local_[q].front();
                local_[q].pop_front();
                return e;
            }
            if (state_ != State::kReady) {
                // Nothing will ever arrive: answer instead of hanging.
                return make_entry(nullptr, kNoRank, kNoRank, unusable_code());
            }
            comm = comm_;
            ++users_;
        }
        p2p_completion_t c;
        size_t n = 0;
        p2p_status_t st = p2p_comm_wait(comm, q, &c, 1, &n, kWaitSliceMs);
        release_user();
        if (st == P2P_OK && n == 1) {
            // Entries moved to the local queue while this call waited (a
            // rejected post, Shutdown) were queued before this one was
            // taken: they go first.
            std::lock_guard<std::mutex> lock(mu_);
            if (local_[q].empty()) {
                return to_entry(c);
            }
            try {
                local_[q].push_back(to_entry(c));
            } catch (const std::bad_alloc &) {
                return to_entry(c);  // out of order rather than lost
            }
            CompletionEntry e = local_[q].front();
            local_[q].pop_front();
            return e;
        }
        if (st == P2P_ERR_INTERRUPTED) {
            continue;  // post() queued a local entry: take it above
        }
        if (st == P2P_ERR_SHUTDOWN) {
            // herringP2PShutdown is running in another thread: it moves the
            // cancelled operations' entries to the local queue and then
            // changes the state; answer from those, not with a made-up entry.
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait_for(lock, std::chrono::milliseconds(kWaitSliceMs),
                         [&] { return !local_[q].empty() || state_ != State::kReady; });
            continue;
        }
        if (st != P2P_OK && st != P2P_ERR_TIMEOUT) {
            log(P2P_LOG_ERROR, "%s completion: wait failed: %s", queue_name(q),
                p2p_status_string(st));
            return make_entry(nullptr, kNoRank, kNoRank, RDMA_READ_FAIL);
        }
    }
}

uint32_t Runtime::local_rank() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (device_rank_set_) {
            return device_rank_;  // see initialize(); kept after Shutdown
        }
    }
    return env_local_rank();
}

} // namespace

herringP2PMessageErrorCode_t map_status(p2p_status_t status) {
    switch (status) {
    case P2P_OK:
        return RDMA_READ_SUCCESS;
    case P2P_ERR_CANCELED:
    case P2P_ERR_SHUTDOWN:
        return RDMA_SHUTDOWN;
    default:  // truncation, peer failure, bad rank, unregistered range, ...
        return RDMA_READ_FAIL;
    }
}

void initialize() { Runtime::get().initialize(); }
void shutdown() { Runtime::get().shutdown(); }
void *register_memory(void *buff, int len) { return Runtime::get().register_memory(buff, len); }
void post(p2p_queue_t queue, int rank, void *buffer, void *mr, uint64_t length, int tensor_id,
          const void *context) {
    Runtime::get().post(queue, rank, buffer, mr, length, tensor_id, context);
}
CompletionEntry pop_completion(p2p_queue_t queue) { return Runtime::get().pop(queue); }
uint32_t local_rank() { return Runtime::get().local_rank(); }

} // namespace herring
