/*
 * Context: the UCP context, one worker, and its progress thread.
 * Every call into the worker is made with worker_mu() held (the worker is
 * created UCS_THREAD_MODE_SERIALIZED); the lock order is
 * worker_mu -> completion queue lock, never the reverse.
 */
#ifndef UCXP2P_CORE_CONTEXT_H
#define UCXP2P_CORE_CONTEXT_H

#include "core/progress.h"
#include "core/ucx_raii.h"

#include <ucxp2p/p2p.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ucxp2p {

struct Op;
namespace tcpb {
class Server;
}

struct ContextSettings {
    p2p_progress_mode_t progress_mode;
    uint32_t spin_us;
    uint32_t spin_busy_us;
    uint32_t peer_timeout_ms;
    p2p_log_level_t log_level;
    p2p_thread_mode_t thread_mode = P2P_THREAD_MULTI;
    bool lock_bias = true;  // P2P_LOCK_BIAS (multi thread mode only)
    bool close_handshake = true;  // P2P_CLOSE_HANDSHAKE (Context::Lingering)
    bool cuda_staging = true;  // P2P_CUDA_STAGING (core/staging.h)
    bool has_local_rank = false;  // P2P_CONFIG_FIELD_LOCAL_RANK
    uint32_t local_rank = 0, local_size = 1;
};

/** Merge config (fields named in its mask) over the P2P_* environment.
 *  P2P_ERR_INVALID_PARAM for unknown mask bits or out-of-range values. */
p2p_status_t context_settings_resolve(const p2p_config_t *config,
                                      ContextSettings *out);

/** P2P_ERR_NO_DEVICE (logged) when the user's UCX_TLS allows only
 *  transports that carry no messages (self, cma, knem, cuda_copy, cuda_ipc,
 *  gdr_copy): UCX starts with them, but no endpoint with peer error
 *  handling -- every ucxp2p endpoint has it, to this process too -- can be
 *  made, so every operation would fail. p2p_context_create checks this;
 *  Context::create does not (core tests use a self-only context for a
 *  worker that moves nothing). */
p2p_status_t context_check_message_transport();

/** Elements of each shared memory FIFO (UCX's default: 64). */
constexpr unsigned kMmFifoSize = 256;

/** The UCX settings a context makes on cfg (read from the environment),
 *  each unless the user set its UCX_ variable (ucx_names: for the MM_
 *  ones also a transport's own): shared memory transports report peer
 *  failures (MM_ERROR_HANDLING=y) and have FIFOs of kMmFifoSize elements
 *  (MM_FIFO_SIZE), both where UCX_TLS allows them; keepalive rounds of
 *  peer_timeout_ms / 3 (KEEPALIVE_INTERVAL). */
void context_ucx_defaults(ucp_config_t *cfg, const ContextSettings &settings);

/** One UCX setting a context makes: name without the UCX_ prefix. Where
 *  the user set it (ucx_user_value: the variable itself or a transport's
 *  copy, in the environment or a config file), user_name is the name
 *  found, user_value its value and user_file the file ("" for the
 *  environment), and the context leaves it as the user set it. */
struct UcxDefault {
    std::string name;
    std::string value;
    std::string user_name{};
    std::string user_value{};
    std::string user_file{};
    bool user_set() const { return !user_name.empty(); }
};
/** What context_ucx_defaults sets for these settings and the environment's
 *  UCX_TLS, each with the user's own setting where there is one (applied
 *  only where there is none; p2p_ucx_print lists both). */
std::vector<UcxDefault> context_ucx_default_list(const ContextSettings &settings);

class Context {
public:
    static constexpr int kMaxComms = 256;
    using CommIdSet = std::array<uint8_t, kMaxComms / 8>;
    using CommIdGens = std::array<uint8_t, kMaxComms>;

    static p2p_status_t create(const ContextSettings &settings,
                               std::unique_ptr<Context> *out);
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    ucp_context_h ucp() const { return ucp_.get(); }
    ucp_worker_h worker() const { return worker_.get(); }
    Mutex &worker_mu() { return worker_mu_; }
    Progress &progress() { return *progress_; }
    const UcpAddress &address() const { return address_; }
    const ContextSettings &settings() const { return settings_; }
    /** UCX can move CUDA memory (ucp_context_query's memory types): device
     *  registrations are accepted, and single copy is off (core/memtype.h). */
    bool ucx_cuda() const { return ucx_cuda_; }
    /** This context's tcp bulk Server (core/tcp_bulk.h), started by the
     *  first communicator that asks; nullptr when it cannot start (logged
     *  once, not retried). Any thread, no lock held. */
    tcpb::Server *bulk_server();
    /** End send seq's offer on the Server, if one runs (core/tcp_bulk.h).
     *  Any thread. */
    void bulk_withdraw(uint32_t seq);
    /** The Server bulk_server() started (nullptr: none), one load. */
    tcpb::Server *bulk() const { return bulk_.load(std::memory_order_acquire); }
    /** The tcp bulk Server has clients (a hint): a request may wake one
     *  of its threads any moment. */
    bool bulk_serving() const;

    /** Communicator ids not in use here (bit i set: id i free), and the
     *  generation each id had last here (0 if never used). */
    CommIdSet free_comm_ids(CommIdGens *gens);
    /** Reserve for the caller every id neither in use nor reserved by
     *  another caller (core/comm_wireup.h); returns them, with each id's
     *  last generation. *contended: another caller held reservations. */
    CommIdSet reserve_comm_ids(CommIdGens *gens, bool *contended);
    /** Take id, which held (the caller's reservation) must include, for
     *  generation gen, and drop the rest of held. */
    void claim_reserved_id(unsigned id, uint8_t gen, const CommIdSet &held);
    /** Drop a reservation. */
    void unreserve_comm_ids(const CommIdSet &held);
    void release_comm_id(unsigned id);

    /** Work to run after a progress call, under the worker lock (e.g. a
     *  communicator handling endpoint failures), once request_deferred()
     *  asked for it. Keyed by owner so it can be removed. */
    void add_deferred_hook(const void *owner, std::function<void()> hook);
    void remove_deferred_hook(const void *owner);
    /** Ask for the hooks to run after the next progress call (worker lock
     *  held); progress calls with nothing requested skip them. */
    void request_deferred() { deferred_pending_ = true; }
    /** Within the deferred hooks: the periodic flag was up for this run
     *  (about every peer timeout / 4: periodic work may run). */
    bool periodic_run() const { return periodic_run_; }
    /** op, completed P2P_ERR_TIMEOUT at its communicator's shutdown
     *  deadline (Comm::abandon_in_flight), still waits on a UCX receive
     *  from a same-host peer (a split receive's WDONE), which keeps its
     *  registration busy: once process pid is gone, the receive is
     *  cancelled (with the periodic deferred work), which frees op and
     *  the registration (context_orphans.cc). Worker lock held. */
    void watch_orphan(Op *op, uint32_t pid) noexcept;
    /** op's request ended (orphan_done): stop watching it. Worker lock held. */
    void forget_orphan(const Op *op) noexcept;
    /** Within a deferred hook: conclude the copies that ended, then
     *  progress the worker until it finds nothing more
     *  (Progress::conclude_and_take_in_locked). What that takes in may ask for
     *  work of hooks that ran already in this round (another
     *  communicator's small split write, a goodbye): the round then runs
     *  the hooks again instead of leaving it to the next progress call,
     *  which may be a tick away. */
    unsigned take_in_from_hook();

    /** Notes between the ranks of a communicator, one UCP active message
     *  (no receive to post, nothing left in the unexpected queue when the
     *  peer is gone already): a rank that connects an endpoint says hello
     *  (it may now wait on the peer: the peer will say goodbye to it too),
     *  and a rank shutting its communicator down says goodbye. The handler
     *  of the communicator with that id and generation runs under the
     *  worker lock; a note that comes before it is set (the peer was
     *  quicker out of the address exchange) is kept for it. */
    static constexpr unsigned kAmNote = 1;
    struct Note {
        uint32_t magic;  // kGoodbyeMagic or kHelloMagic
        uint32_t comm_id;
        uint32_t gen;  // of the id: a late note from its last user is ignored
        uint32_t rank;
    };
    static constexpr uint32_t kGoodbyeMagic = 0x42594532;  // "BYE2"
    static constexpr uint32_t kHelloMagic = 0x484c4f31;    // "HLO1"
    /** Closing: the sender closes its endpoint to us in this communicator
     *  now (see linger_locked). */
    static constexpr uint32_t kClosingMagic = 0x434c5331;  // "CLS1"
    /** h(rank, magic): a note from rank. nullptr clears. */
    using NoteHandler = std::function<void(uint32_t, uint32_t)>;
    void set_note_handler(unsigned comm_id, uint32_t gen, NoteHandler h);
    void on_note(const Note &g);  // worker lock held
    /** Send n on ep (kAmNote; a copy waits if UCX has no room now). */
    static ucs_status_t send_note(ucp_ep_h ep, const Note &n) noexcept;

    /** A peer's worker address, kept after its communicator is gone. */
    struct UnnamedPeer {
        uint32_t rank;
        std::vector<uint8_t> address;
    };
    /** The communicator (comm_id, gen), in which we were `rank`, is being
     *  destroyed: clear its note handler and keep `unnamed`, the peers it
     *  had no endpoint to and no hello from (ascending ranks). Such a peer
     *  may still connect and say hello, and nothing of the communicator is
     *  left to say goodbye to it: the context does, over an endpoint of its
     *  own, after the progress call that brought the hello (once a peer).
     *  Kept until the next communicator with this id is destroyed, or the
     *  context. Worker lock held; does not throw. */
    void retire_comm_locked(unsigned comm_id, uint32_t gen, uint32_t rank,
                            std::vector<UnnamedPeer> &&unnamed) noexcept;

    /** The close handshake. UCX 1.13 crashes (uct_tcp, fixed in 1.14) when
     *  a keepalive of the peer's names an endpoint this worker closed
     *  already, if more of the peer's messages follow it on the connection
     *  (README, Peer failure). So an endpoint of a destroyed communicator
     *  whose peer still has its own is not closed: it lingers here until
     *  the peer says it closes its own (a kClosingMagic note, sent right
     *  before that close), the endpoint fails, or the context goes. The
     *  peer closes first then, and what follows our keepalive on the
     *  connection is nothing: we send nothing more on a lingering one. */
    struct Lingering {
        uint32_t comm_id;
        uint32_t gen;
        uint32_t rank;  // the peer's, in that communicator
        ucp_ep_h ep;
        enum Due : uint8_t { kNotDue, kClosingCame, kFailed, kGone } due;
        /** The peer's process where it is a same-host one (else 0): a
         *  periodic run closes the endpoint once it is gone, which UCX
         *  1.13 may never report (see Comm::watch_peers). */
        uint32_t pid;
    };
    /** Take eps (due kNotDue) from a communicator being destroyed;
     *  owner keeps their error handlers' arguments alive until their
     *  closes ended. false: out of memory, none taken (the caller closes
     *  them). Worker lock held; does not throw. */
    bool linger_locked(const std::vector<Lingering> &eps,
                       const std::shared_ptr<void> &owner) noexcept;
    /** A lingering endpoint failed: close it after this progress call.
     *  Inside UCX's error callback (worker lock held). */
    void on_lingering_error(ucp_ep_h ep) noexcept;
    /** How many endpoints linger (tests, logs). Worker lock held. */
    size_t lingering_count() const { return lingering_.size(); }

    /** Receive into nothing every tag message in UCX's unexpected queue
     *  whose tag matches tag under mask: each completes as a truncation
     *  (which also answers a rendezvous sender) and UCX frees it. Returns
     *  how many. Worker lock held (or no progress any more). */
    static size_t drop_unexpected(ucp_worker_h worker, uint64_t tag,
                                  uint64_t mask) noexcept;

    /** Keep p alive until the worker is gone, then free(p): what UCX may
     *  still call back with after its owner left (see ~Comm). Out of
     *  memory, p is never freed. Worker lock held; does not throw. */
    void keep_until_worker_gone(void *p, void (*free)(void *)) noexcept;

    /** Stop the progress thread (teardown; idempotent). */
    void stop_progress() { if (progress_) progress_->stop(); }

private:
    Context() = default;
    void run_deferred_hooks();
    /** Cancel the receives of watched orphans whose peer is gone
     *  (periodic runs only). Worker lock held. */
    void reap_orphans() noexcept;
    /** Register the note handler on the worker (context_notes.cc). */
    ucs_status_t listen_for_notes();
    /** Say goodbye to the peers whose hellos reached a retired
     *  communicator (retire_comm_locked). Worker lock held. */
    void answer_gone_hellos() noexcept;
    /** Periodic runs: drop the messages that reached a retired
     *  communicator after its destroy drained them (peers that had not
     *  seen its goodbye yet still sent), for each id no communicator
     *  holds now, for 4 x P2P_PEER_TIMEOUT_MS after the destroy (each
     *  probe walks UCX's unexpected queue); they stayed in UCX's
     *  unexpected queue until the context went (UCX warned for each
     *  then), or until another communicator with that id was destroyed.
     *  Worker lock held. */
    void drop_late_messages() noexcept;
    /** Close by force the endpoints of those goodbyes whose flush ended
     *  (the goodbye left) or whose P2P_PEER_TIMEOUT_MS passed: closed
     *  without force, UCX would keep each, and its connection, for as long
     *  as the peer keeps its end. all: every one (teardown). Worker lock
     *  held, or no progress any more. */
    void close_gone_eps(bool all = false) noexcept;
    /** Close the lingering endpoints due (all: every one, teardown) and
     *  free the owners of those whose closes ended (context_linger.cc).
     *  Worker lock held, or no progress any more. */
    void close_lingering(bool all = false) noexcept;
    /** Teardown, before close_lingering(true): flush the lingering
     *  endpoints whose peers still hold their own, and progress until the
     *  flushes end, those peers' processes are gone, or
     *  P2P_PEER_TIMEOUT_MS passed. What we sent
     *  on them may still wait in UCX (a slow peer's shared-memory FIFO
     *  full): our goodbye, closing note, a single-copy answer that
     *  completes the peer's send. A forced close drops it, and the
     *  peer's send would fail. No progress thread any more. */
    void flush_lingering() noexcept;
    /** A closing note for a retired communicator: true if it named a
     *  lingering endpoint (marked due). Worker lock held. */
    bool closing_for_lingering(const Note &g) noexcept;

    ContextSettings settings_{};
    // Declaration order = reverse destruction order: progress stops first,
    // then the address, worker and UCP context are released, and only then
    // what callbacks of that worker could still reach.
    struct Orphans {
        std::vector<std::pair<void *, void (*)(void *)>> list;
        Orphans() = default;
        Orphans(const Orphans &) = delete;
        Orphans &operator=(const Orphans &) = delete;
        ~Orphans() { for (auto &o : list) o.second(o.first); }
    } orphans_;
    // Lingering endpoints (linger_locked), each with the owner of its error
    // handler's argument; then their forced closes until they end. Worker
    // lock. Declared before the worker: the owners of closes still running
    // at teardown stay until it is gone.
    struct LingerEntry {
        Lingering l;
        std::shared_ptr<void> owner;
    };
    std::vector<LingerEntry> lingering_;
    struct LingerClose {
        void *req;  // ucp_ep_close_nbx's request
        std::shared_ptr<void> owner;
    };
    std::vector<LingerClose> linger_closes_;
    // Operations abandoned at a shutdown deadline whose sender's process is
    // watched (context_orphans.cc); before the worker, as its callbacks
    // forget them. Worker lock.
    struct WatchedOrphan {
        Op *op;
        uint32_t pid;
    };
    std::vector<WatchedOrphan> watched_orphans_;
    // Before the worker: operations its destroy cancels withdraw offers.
    std::mutex bulk_mu_;
    std::unique_ptr<tcpb::Server> bulk_owner_;  // bulk_mu_
    bool bulk_tried_ = false;                   // bulk_mu_
    std::atomic<tcpb::Server *> bulk_{nullptr};
    UcpContext ucp_;
    UcpWorker worker_;
    UcpAddress address_;
    Mutex worker_mu_;
    std::unique_ptr<Progress> progress_;

    /** Drop held from reserved_ids_; ids_mu_ held. */
    void unreserve_locked(const CommIdSet &held);
    std::mutex ids_mu_;
    CommIdSet used_ids_{};
    CommIdSet reserved_ids_{};  // by creates exchanging now (ids_mu_)
    CommIdGens id_gens_{};
    std::vector<std::pair<const void *, std::function<void()>>> hooks_;
    std::array<NoteHandler, kMaxComms> notes_;     // worker lock
    std::array<uint32_t, kMaxComms> note_gen_{};  // worker lock
    // Notes no handler took (early, or late for a communicator gone): the
    // newest kEarlyNotes, a ring (filled inside UCX callbacks: no
    // allocation). Worker lock.
    static constexpr size_t kEarlyNotes = 256;
    std::array<Note, kEarlyNotes> early_{};
    size_t early_next_ = 0, early_count_ = 0;
    // Retired communicators, one per id (retire_comm_locked). Worker lock.
    struct Gone {
        bool valid = false;
        uint32_t gen = 0;
        uint32_t rank = 0;  // ours there
        std::vector<UnnamedPeer> unnamed;
        // drop_late_messages looks for its messages until then: late
        // senders stop once our goodbye (or its answer to their hello)
        // reached them, well within this.
        int64_t drop_until_ns = 0;
    };
    std::array<Gone, kMaxComms> gone_{};
    // Hellos for them to answer after the progress call: {id, gen, rank},
    // filled inside UCX's callback (no allocation). Worker lock.
    static constexpr size_t kGoneAnswers = 64;
    std::array<Note, kGoneAnswers> answers_{};
    size_t answers_count_ = 0;
    size_t dropping_ = 0;  // gone_ entries drop_late_messages still looks at
    // Endpoints of goodbyes said for them, flushing (close_gone_eps).
    struct GoneEp {
        ucp_ep_h ep;
        void *flush;  // its ucp_ep_flush_nbx request
        int64_t deadline_ns;
    };
    std::vector<GoneEp> gone_eps_;  // worker lock
    bool deferred_pending_ = false;  // worker lock held
    std::atomic<bool> periodic_due_{false};  // set by Progress, taken with the hooks
    bool periodic_run_ = false;  // worker lock held: this run of the hooks is periodic
    bool hooks_took_in_ = false;  // worker lock held: take_in_from_hook took something
    bool ucx_cuda_ = false;
};

} // namespace ucxp2p

#endif
