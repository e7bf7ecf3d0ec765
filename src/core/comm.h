/*
 * Communicator: a group of ranks agreed through a bootstrap, its lazily
 * created endpoints, its posted operations and its two completion queues.
 *
 * Tag layout: core/comm_tag.h.
 *
 * Concurrency: endpoint table, the list of in-flight operations and the
 * failed-peer list are touched only with the context's worker lock held
 * (UCX callbacks run under it too); the queues have their own lock.
 */
#ifndef UCXP2P_CORE_COMM_H
#define UCXP2P_CORE_COMM_H

#include "core/cma.h"
#include "core/comm_peer.h"
#include "core/comm_tag.h"
#include "core/context.h"
#include "core/copy_queue.h"
#include "core/cq.h"
#include "core/mem.h"
#include "core/op.h"
#include "core/path_choice.h"
#include "core/send_small.h"
#include "core/shm_region.h"
#include "core/tcp_bulk.h"

#include <ucxp2p/p2p.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace ucxp2p {

class Bootstrap;
class Comm;

/** A block to post, validated. */
struct PostItem {
    uint32_t peer;
    uint32_t tensor_id;
    void *buffer;
    size_t length;
    Mem *mem;
    void *user_context;
};

/** UCX callbacks of user sends and receives (user_data: the Op). */
void send_cb(void *request, ucs_status_t st, void *user_data);
/** The request of an Op its communicator left behind (destroyed past its
 *  deadline) ended: UCX is done with the buffer. Frees both, and releases
 *  what the post took (the registration's reference, the context's count
 *  of operations in flight). Worker lock held. */
void orphan_done(Op *op, void *request);
void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
             void *user_data);

class Comm {
public:
    /** Collective: agree on an id and exchange worker addresses. */
    static p2p_status_t create(std::shared_ptr<Context> ctx, uint64_t ctx_id,
                               Bootstrap &bootstrap, std::unique_ptr<Comm> *out);
    ~Comm();
    Comm(const Comm &) = delete;
    Comm &operator=(const Comm &) = delete;

    uint32_t rank() const { return rank_; }
    uint32_t size() const { return size_; }
    uint32_t local_rank() const { return local_rank_; }
    uint32_t local_size() const { return local_size_; }
    uint32_t id() const { return id_; }
    uint64_t ctx_id() const { return ctx_id_; }
    Context &context() { return *ctx_; }
    CompletionQueue &queue(p2p_queue_t q) { return cq_[q]; }
    /** p2p_comm_wait on queue (arguments already checked; comm_wait.cc). */
    p2p_status_t wait(p2p_queue_t queue, p2p_completion_t *entries, size_t max,
                      size_t *count_p, int timeout_ms);

    /** Post validated items (all sends or all receives). All or nothing on
     *  synchronous errors; *bad_index_p names the first failed item. */
    p2p_status_t post(bool is_send, const PostItem *items, size_t count,
                      size_t *bad_index_p);
    /** post(false, &item, 1, nullptr), with a shorter path for a receive
     *  whose message is here (recv_now). */
    p2p_status_t recv_single(const PostItem &item);
    /** post(true, &item, 1, nullptr), inline (core/comm_send.h): a send UCX
     *  completes inside the call (an eager-short message) never leaves the
     *  caller's frame, and its completion is queued with no operation
     *  record or in-flight accounting; anything else is posted as post()
     *  would. */
    inline p2p_status_t send_single(const PostItem &item);

    /** Cancel the posted receives from peer tagged tensor_id that no
     *  message has matched yet (p2p_comm_cancel_recv): each completes with
     *  P2P_ERR_CANCELED inside this call. Returns how many. */
    size_t cancel_recv(uint32_t peer, uint32_t tensor_id);
    /** Cancel everything in flight; later posts fail. Idempotent. */
    void shutdown();
    bool is_shut() const { return shut_.load(); }

    /** Completion from UCX (worker lock held) or inline. */
    void complete(Op *op, ucs_status_t st, size_t bytes) {
        if (st == UCS_OK) {
            finish(op, P2P_OK, bytes);
        } else {
            complete_error(op, st);
        }
    }
    /** A receive's UCX request finished: data, or an RTS to act on
     *  (is_rts). */
    void recv_done(Op *op, ucs_status_t st, size_t bytes);
    /** A single-copy send's ACK receive finished. */
    void ack_done(Op *op, ucs_status_t st);
    /** A split receive's WDONE receive finished. */
    void wdone_done(Op *op, ucs_status_t st);
    /** Endpoint error callback (worker lock held). */
    void on_peer_error(uint32_t peer, ucs_status_t st);
    /** peer's goodbye arrived: it shut its communicator down, so nothing
     *  more will come from it and nothing sent to it will be received.
     *  Worker lock held (inside progress). */
    void on_peer_left(uint32_t peer);
    /** peer connected an endpoint to us (its hello): it may wait on us, so
     *  our shutdown says goodbye to it too. Worker lock held. */
    void on_peer_hello(uint32_t peer);
    /** The flush of a new endpoint to peer ended (st): its wireup is over,
     *  say hello after this progress call. Worker lock held. */
    void on_hello_flushed(uint32_t peer, ucs_status_t st);
    /** A send UCX finished with UCS_OK after its receiver left was
     *  answered by the receiver's drain (drain_unexpected), not received. */
    bool send_unreceived(const Op *op) const {
        return op->is_send && peers_[op->entry.peer].left;
    }

    /** Argument of an endpoint's error handler. */
    struct PeerRef {
        Comm *comm = nullptr;
        uint32_t rank = 0;
        // Once the endpoint lingers after the destroy (Context::Lingering):
        // its context, which closes it when it fails.
        Context *lingers = nullptr;
    };

private:
    using Peer = CommPeer;  // core/comm_peer.h

    Comm() = default;
    /** The endpoint to a peer, connected on first use. Worker lock held.
     *  Inline: every post asks, and all but the first find it. */
    p2p_status_t get_ep(uint32_t peer, ucp_ep_h *ep_p) {
        ucp_ep_h ep = peers_[peer].ep;
        if (ep == nullptr) {
            return connect_ep(peer, ep_p);
        }
        *ep_p = ep;
        return P2P_OK;
    }
    /** At destroy (lock held): the peers with no endpoint of ours and no
     *  hello of theirs, with their addresses (moved out), for the context
     *  to answer a hello that comes later (Context::retire_comm_locked).
     *  Out of memory: those found so far. */
    std::vector<Context::UnnamedPeer> unnamed_peers() noexcept;
    /** quiet: a failure is logged at debug level (shutdown's goodbyes). */
    p2p_status_t connect_ep(uint32_t peer, ucp_ep_h *ep_p, bool quiet = false);  // lock held
    /** post()'s body, worker lock held; try_imm: sends try send_try first;
     *  *kick: wake the progress thread after unlocking. */
    p2p_status_t post_locked(bool is_send, const PostItem *items, size_t count,
                             size_t *bad_index_p, bool try_imm, bool *kick);
    enum class Tried { kDone, kPosted, kNotSent };  // what send_try did with a send
    /** A send in one UCX call: up to kImmediateMax, no single-copy or request look-alike
     *  question, op (fresh) as its callback's data. kDone: sent inside the call, op
     *  untouched, the caller queues the completion. kPosted: UCX keeps a request (or ran
     *  the callback in the call); op is its record (adopt_send). kNotSent: not such a
     *  send, or an error at once; op untouched, post_one sends or reports. accounted:
     *  post_locked counted it (kick unused, may be null), else adopt_send. Lock held; peer
     *  connected, memory not dead. Not FORCE_IMM_CMPL: UCX 1.13 grants it only up to its
     *  inline size (PERFORMANCE.md). */
    Tried send_try(const PostItem &it, ucp_ep_h ep, Op *op, bool accounted, bool *kick);
    /** send_try's kPosted: op becomes the record of UCX's result r. */
    void adopt_send(Op *op, const PostItem &it, ucs_status_ptr_t r, bool accounted, bool *kick);
    /** Larger messages do not complete inside a send call (UCX's eager
     *  limit is a few KiB on every transport): the general path. */
    static constexpr size_t kImmediateMax = 16384;
    /** send_single's general path: post_locked of one send that did not
     *  go at once. Worker lock held. */
    p2p_status_t send_locked(const PostItem &it, bool *kick);
    /** A receive whose message is already here (in UCX's unexpected
     *  queue) takes it at once: small data lands in the user's buffer and
     *  its completion is queued with no operation record; anything else (a
     *  single-copy request, a truncation, a message UCX finishes later)
     *  goes on as a posted operation, *kick as in post_locked. False when
     *  the message has not arrived: nothing was done. Worker lock held. */
    bool recv_now(const PostItem &it, bool *kick);
    /** recv_now's receive into staged device memory landed (bytes in its
     *  host copy): copy them to the device and queue the completion, the
     *  copy's failure if it failed. Worker lock held. */
    void landed_staged(const PostItem &it, size_t bytes);
    /** finish() of an operation on staged device memory: a receive's
     *  bytes go to the device (core/staging.h); the status to report. */
    p2p_status_t staged_done(const Op *op, p2p_status_t ps, size_t bytes);
    /** Whether recv_now should look: a probe that finds nothing costs
     *  ~40-80 instructions, so where receives go up ahead of their messages
     *  (a pre-posted window) only every kProbeEvery-th post looks, until one
     *  finds its message waiting. Worker lock held. */
    bool probe_due() {
        return probe_misses_ < kProbeMisses || ++probe_tick_ % kProbeEvery == 0;
    }
    /** A message of bytes from peer, landed at payload, is a single-copy
     *  request (core/comm_tag.h: they travel as DATA): peer sends them,
     *  and it has their size and magic. */
    bool is_rts(uint32_t peer, const void *payload, size_t bytes) const {
        if (bytes != sizeof(cma::Rts) || !peers_[peer].cma) return false;
        uint32_t magic;
        std::memcpy(&magic, payload, sizeof(magic));
        return magic == cma::kRtsMagic;
    }
    /** A send of it would read as a single-copy request at its peer
     *  (is_rts): it goes by the request protocol instead. */
    bool mimics_rts(const PostItem &it) const {
        return is_rts(it.peer, it.buffer, it.length);
    }
    /** The send may go single copy (core/cma.h) rather than through UCX:
     *  it does unless the chooser says otherwise (wants_single_copy). */
    bool may_single_copy(const Peer &p, const PostItem &it) const {
        return p.cma && !p.cma_off &&
               it.length >= (p.tcp ? tcp_thresh_
                             : it.mem->shm_fd >= 0 ? mapped_thresh_ : cma_thresh_);
    }
    /** Whether the send of op goes single copy; for a size chosen at run
     *  time (P2P_CMA_THRESH=auto, P2P_TCP_BULK_THRESH=auto) the chooser
     *  picks, and op is marked for finish() to report back. Once per send.
     *  Worker lock held. */
    bool wants_single_copy(Op *op, Peer &p, const PostItem &it) {
        if (!may_single_copy(p, it)) return false;
        // p2p_mem_alloc memory goes to a same-host peer through its mapping
        // (P2P_CMA_MAPPED_THRESH), never chosen.
        if (!p.choose || (!p.tcp && it.mem->shm_fd >= 0)) return true;
        const PathChooser::Band &band = p.tcp ? PathChooser::kTcpBand
                                              : PathChooser::kSameHostBand;
        if (!PathChooser::adaptive(band, it.length)) return true;
        if (!p.chooser) {
            p.chooser.reset(new (std::nothrow) PathChooser(band));
            if (!p.chooser) return band.initial == PathChooser::kSingleCopy;
        }
        const PathChooser::Pick k = p.chooser->pick(it.length, now_ns());
        if (k.starts_probe) {
            log_probe(it.peer, it.length, k.path);
        }
        if (k.ends_block) {
            op->chosen = static_cast<uint8_t>(1 + k.path);
            op->block_start_ns = k.block_start_ns;
            op->block_bytes = k.block_bytes;
        }
        return k.path == PathChooser::kSingleCopy;
    }
    /** Debug log: the chooser for peer started a probe of path. */
    void log_probe(uint32_t peer, size_t len, PathChooser::Path path) const;
    /** A send that ended its chooser's block ended (finish). */
    void report_choice(const Op *op, bool ok);
    /** Post one item (errors complete it); true if it is still in flight
     *  afterwards, false if it completed inside the call. */
    bool post_one(bool is_send, const PostItem &it, ucp_ep_h ep);
    /** After UCX answered a post with r (op filled and counted): a request (linked), the
     *  callback ran in the call, or a status at once (imm_bytes if UCS_OK); op finished. */
    enum class Settled { kLinked, kInCall, kAtOnce };
    Settled settle_post(Op *op, bool is_send, ucs_status_ptr_t r, size_t imm_bytes);
    /** A cleared Op, recycled when one is cached. Worker lock held. */
    Op *alloc_op() {
        if (free_ops_.empty()) {
            return new Op();
        }
        Op *op = free_ops_.back();
        free_ops_.pop_back();
        std::memcpy(static_cast<void *>(op), &kFreshOp, kOpResetBytes);
        return op;
    }
    /** Back to the cache (bounded; its capacity is reserved at create, so
     *  this never allocates, never throws). Worker lock held. */
    void free_op(Op *op) {
        if (free_ops_.size() < kMaxCachedOps) {
            free_ops_.push_back(op);
        } else {
            delete op;
        }
    }
    /** fill_op, and count the operation (memory reference, pending, posted). */
    void adopt_counted(Op *op, bool is_send, const PostItem &it);
    /** Describe the operation it in op (fresh from alloc_op). */
    void fill_op(Op *op, bool is_send, const PostItem &it) {
        op->comm = this;
        op->mem = it.mem;
        op->is_send = is_send;
        op->entry.user_context = it.user_context;
        op->entry.peer = it.peer;
        op->entry.tensor_id = it.tensor_id;
        op->entry.bytes = is_send ? it.length : 0;
        op->entry.status = P2P_IN_PROGRESS;
        op->buffer = it.buffer;
        op->length = it.length;
    }
    /** Queue the success of it, finished inside its post with no operation
     *  record (send_single, recv_now, send_try); counted: it was added to the
     *  queue's pending count. Worker lock held. */
    void queue_done(p2p_queue_t q, const PostItem &it, size_t bytes, bool counted) {
        cq_[q].push_ok(it.user_context, it.peer, it.tensor_id, bytes, counted);
    }
    void link(Op *op);
    void unlink(Op *op);
    void handle_failures();  // deferred hook, worker lock held
    /** Periodic (Context::periodic_run): a same-host peer we have an
     *  endpoint to whose process is gone fails. UCX 1.13 watches only
     *  endpoints the peer answered (keepalive): one to a peer that died
     *  before it answered ours, over shared memory, never fails, and the
     *  operations naming it waited until destroy. */
    void watch_peers();
    void close_eps();        // worker lock held
    /** Operations naming a peer whose endpoint failed that UCX has still
     *  not ended P2P_PEER_TIMEOUT_MS after the failure was handled (or
     *  after a receive of a message that peer sent before it died was
     *  posted) complete with P2P_ERR_PEER_FAILURE; UCX keeps the request
     *  as an orphan (orphan_done frees it, and releases its registration,
     *  if UCX ever ends it). Seen with UCX 1.13 over shared memory: UCX
     *  rendezvous sends and matched receives naming a SIGKILLed peer that
     *  UCX never ended (UCX purges a failed endpoint's requests once its
     *  lanes are discarded, which waits on a flush that needs room in the dead
     *  rank's FIFO; README, "Peer failure").
     *  Deferred hook. */
    void abandon_stuck();
    /** Complete op now with st (abandon_stuck, abandon_in_flight): UCX
     *  keeps its request as an orphan (orphan_done frees it and releases
     *  its registration if UCX ever ends it). Worker lock held. */
    void abandon_op(Op *op, p2p_status_t st);
    /** Shutdown past its deadline: every operation still in flight
     *  completes P2P_ERR_TIMEOUT (abandon_op); returns how many. Worker
     *  lock held, no copy in progress. */
    size_t abandon_in_flight();
    /** From now, abandon_stuck gives p's operations one peer timeout. */
    void start_abandon_clock(Peer *p) {
        p->dead_since_ns = now_ns();
        dead_watch_ = true;
    }
    bool dead_watch_ = false;  // some peer's dead_since_ns is set: look
    bool recv_already_arrived(uint32_t peer, uint32_t tensor_id);
    /** Before a receive's post first connects to a peer: progress the
     *  worker once, so that what the transport delivered (a message, the
     *  peer's goodbye) is taken in first. Worker lock held. */
    void take_in_before_connecting();
    /** Report op (status ps, bytes moved) and recycle it. Worker lock held. */
    void finish(Op *op, p2p_status_t ps, size_t bytes) {
        if (__builtin_expect(op->mem->shadow != nullptr, 0)) {
            if (defer_push(op, ps, bytes)) return;  // report() once on the device
            ps = staged_done(op, ps, bytes);
        }
        report(op, ps, bytes);
    }
    /** finish() past the staged copy. Worker lock held. */
    void report(Op *op, p2p_status_t ps, size_t bytes) {
        if (op->request != nullptr) {
            unlink(op);
            op->request = nullptr;
        }
        if (op->chosen != 0) {
            report_choice(op, ps == P2P_OK);
        }
        if (__builtin_expect(op->offered, 0)) ctx_->bulk_withdraw(op->seq);
        op->mem->release();
        ctx_->progress().op_completed();
        // Field by field into the queue's slot: op->entry's status and
        // bytes stored here and copied at once would be 8- and 4-byte
        // stores read back by a 16-byte load, a store-forwarding stall on
        // every completion (perf: a third of this function's samples).
        const p2p_completion_t &e = op->entry;
        cq_[op->is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV].push_fields(
            e.user_context, e.peer, e.tensor_id, ps == P2P_OK ? bytes : 0, ps, true);
        free_op(op);
    }
    void complete_error(Op *op, ucs_status_t st);  // st != UCS_OK
    void post_rts(Op *op, const PostItem &it, ucp_ep_h ep);
    void on_rts(Op *op, const cma::Rts &rts);
    void on_split_rts(Op *op, const cma::Rts &rts);
    /** Where a single-copy sender's payload is read from: *base = its
     *  region mapped here (the payload's first byte) and *epochs its epoch
     *  table, or both nullptr (process_vm_readv). False when the answer is
     *  known without reading (*r: withdrawn). Worker lock held. */
    bool read_source(uint32_t src, const cma::Rts &rts, const uint8_t **base,
                     const uint8_t **epochs, cma::ReadResult *r);
    /** Read what kind names of op->rts into op->buffer (COPY_WHOLE: all of
     *  it, COPY_HEAD: its head, COPY_REST: the rest). False, the answer in
     *  *r and *err: read now (below 256 KiB, or the communicator is shut
     *  down), or known without reading (a withdrawn send: CANCELLED). True:
     *  queued to be copied outside the worker lock (comm_copy.cc), whose
     *  conclusion goes on. */
    bool read_payload(Op *op, Op::CopyKind kind, cma::ReadResult *r, int *err);
    /** Write our part of split send op to remote in the receiver: as
     *  read_payload (COPY_TAIL), except that a part below 256 KiB is not
     *  written now either (true): write_due_tails writes it after this
     *  progress call. */
    bool write_part(Op *op, uint64_t remote, cma::ReadResult *r, int *err);
    /** The parts below kUnlockedCopyMin write_part left for after the
     *  progress call (tails_due_): take in what arrived, then write each
     *  (nothing to a receiver that left) and go on (tail_written). From
     *  the deferred hook; worker lock held. */
    void write_due_tails();
    static cma::ReadResult write_tail(Op *op, int *err);  // the write itself
    /** Read bytes [off, off + len) of op's message (op->rts) into its
     *  buffer: from a tcp peer's server, else cma::copy_in (base, epochs:
     *  see there). Lock held or not. */
    static cma::ReadResult pull(Op *op, const uint8_t *base, const uint8_t *epochs,
                                uint64_t off, uint64_t len, int *err);
    void queue_copy(Op *op, Op::CopyKind kind);  // hand op's copy to Progress
    /** A copy into [dst, dst + len) would overwrite where another posted
     *  receive from a same-host peer takes its single-copy request (the
     *  buffers overlap, as in a benchmark's one reused buffer): it is made
     *  now, under the lock, so that the request cannot be torn. Walks the
     *  posted ops once per copy of kUnlockedCopyMin bytes or more. */
    bool lands_on_a_receive(const Op *self, const uint8_t *dst, uint64_t len) const;
    /** Before a receive into buffer is posted while copies run: wait for
     *  those writing where its single-copy request would land (running
     *  them here if still queued). Worker lock held; walks only the ops
     *  in a copy (copying_); waits only where buffers overlap. */
    void settle_copies_into(const void *buffer, size_t length);
    /** finish() of a staged receive of ps == P2P_OK: copy its bytes to
     *  the device outside the worker lock (COPY_PUSH), then report() it;
     *  false (nothing done) for a send, a failure or a small receive. */
    bool defer_push(Op *op, p2p_status_t ps, size_t bytes);
    static void copy_job_run(CopyJob *j);       // no lock held
    static void copy_job_prefetch(CopyJob *j);  // no lock held: a tcp read's requests
    static void copy_job_conclude(CopyJob *j);  // worker lock held
    /** on_cts's second half: our part was written (r, err). */
    void tail_written(Op *op, cma::ReadResult r, int err);
    /** on_split_rts's second half: the head was read (r, err). */
    void head_read(Op *op, cma::ReadResult r, int err);
    /** Answer the sender and complete the receive after reading it. */
    void conclude_read(Op *op, const cma::Rts &rts, cma::ReadResult r, int err);
    void on_cts(Op *op, uint64_t remote);
    bool post_ack_recv(Op *op);
    void send_ack(uint32_t peer, uint32_t seq, int32_t status, uint64_t addr = 0);
    void send_wdone(uint32_t peer, uint32_t seq, cma::WdoneStatus status);
    void repost_push(Op *op);
    void send_goodbyes();   // once; worker lock held
    /** Send a hello or goodbye note (Context::Note) on ep, unless the
     *  peer failed, left or is us. Lock held. */
    void say_note(uint32_t peer, ucp_ep_h ep, uint32_t magic);
    /** The close handshake (Context::Lingering): tell the peer that ep
     *  closes now; sent on any endpoint that has not failed. Lock held. */
    void say_closing(uint32_t peer, ucp_ep_h ep);
    void say_goodbye(uint32_t peer, ucp_ep_h ep) {
        say_note(peer, ep, Context::kGoodbyeMagic);
    }
    /** Goodbye to a peer that said hello and that we hold no endpoint to
     *  (connects one; closed at destroy). Worker lock held. */
    void goodbye_to_watcher(uint32_t peer);
    /** Say the hellos on_hello_flushed left due. Deferred hook. */
    void say_hellos();
    /** Goodbye to the peers whose hello came after our goodbyes (see
     *  on_peer_hello). Deferred hook, and destroy. */
    void answer_late_hellos();
    // Shutdown's step for the sends UCX moves: goodbye, then a forced
    // close (force_close_flushed), for each peer nothing else of ours
    // names any more. True while some peer waits for that (call again
    // until false). anyway: close those too, without a goodbye (the
    // shutdown's deadline passed). Worker lock held.
    bool close_sending_eps(bool anyway = false);
    void close_ep(ucp_ep_h *ep, bool force);  // into closing_; worker lock held
    /** Close *ep by force (ending the sends on it) once a flush says its
     *  wireup is over, saying goodbye on it first if goodbye, and then
     *  that it closes (say_closing), right before the close: UCX 1.13
     *  aborts when a forced close purges a tcp endpoint's pending wireup
     *  request (the assertion openucx/ucx#8175 removed). *ep is nullptr on
     *  return; the close happens now or in close_flushed. Lock held. */
    void force_close_flushed(ucp_ep_h *ep, uint32_t peer, bool goodbye);
    /** The endpoints force_close_flushed left flushing: close those whose
     *  flush ended or whose P2P_PEER_TIMEOUT_MS passed. Deferred hook. */
    void close_flushed();
    struct Flushing {
        ucp_ep_h ep;
        void *flush;        // its ucp_ep_flush_nbx request
        int64_t deadline_ns;
        uint32_t peer;
        bool goodbye;
    };
    void drain_unexpected();  // worker lock held
    void cancel_waits_from(uint32_t peer);  // a dead peer's; worker lock held
    bool ucx_sends_to(uint32_t peer) const;  // in flight in UCX; lock held
    /** ucp_request_cancel every in-flight op pred(op) selects, oldest
     *  first (ops_ holds the newest first), so that receives UCX ends inside
     *  the call complete in the order they were posted; no throw (one at a
     *  time, newest first, when out of memory). Worker lock held. */
    template <class Pred> void cancel_receives(Pred pred) noexcept;

    std::shared_ptr<Context> ctx_;
    uint64_t ctx_id_ = 0;
    uint32_t rank_ = 0, size_ = 0, local_rank_ = 0, local_size_ = 0, id_ = 0;
    uint32_t gen_ = 0;        // id_'s generation (comm_tag_base)
    uint64_t tag_base_ = 0;   // comm_tag_base(id_, gen_)
    uint64_t send_tag0_ = 0;  // make_tag(tag_base_, rank_, 0): our DATA tags (tag_with_low)
    size_t cma_thresh_ = SIZE_MAX;   // auto: PathChooser::kMinBytes
    size_t mapped_thresh_ = SIZE_MAX;
    size_t split_thresh_ = SIZE_MAX;
    size_t tcp_thresh_ = SIZE_MAX;   // P2P_TCP_BULK_THRESH
    bool id_claimed_ = false;
    std::vector<std::vector<uint8_t>> addrs_;
    std::unique_ptr<Peer[]> peers_;
    // What UCX's callbacks on our endpoints get (error handler, hello
    // flush): apart from peers_, so that a destroy whose closes outlive
    // its bound can leave just these behind, detached (see ~Comm).
    // Shared with the context while endpoints linger (Context::Lingering).
    std::shared_ptr<PeerRef[]> refs_;
    // What hands refs_ to the context when a destroy's closes outlive its
    // bound (allocated at create: ~Comm cannot fail to).
    std::unique_ptr<std::shared_ptr<PeerRef[]>> refs_keeper_;
    std::vector<uint32_t> failed_pending_;  // peers whose error is not handled yet
    std::vector<uint32_t> late_hellos_;     // hellos after our goodbyes (on_peer_hello)
    std::vector<uint32_t> hellos_due_;      // wired up: our hello is to go (say_hellos)
    std::vector<uint32_t> watched_;         // same-host peers we have endpoints to
    std::vector<void *> closing_;           // ep close requests in flight
    std::vector<Flushing> flushing_;        // see force_close_flushed
    Op *ops_ = nullptr;                      // in-flight operations
    std::vector<Op *> free_ops_;             // recycled Op objects
    Op *spare_ = nullptr;                    // a fresh Op kept for recv_now
    // recv_now's probes: misses in a row (at most kProbeMisses), and a
    // count of the posts that skipped looking.
    static constexpr uint32_t kProbeMisses = 4;
    static constexpr uint32_t kProbeEvery = 16;
    uint32_t probe_misses_ = 0;
    uint32_t probe_tick_ = 0;
    size_t nops_ = 0;
    size_t copies_ = 0;  // ops in a copy outside the lock (comm_copy.cc)
    Op *copying_ = nullptr;  // those ops (copy_next), for settle_copies_into
    Op *tails_due_ = nullptr;  // small split parts to write (copy_next), FIFO
    Op **tails_last_ = &tails_due_;
    std::atomic<bool> shut_{false};  // raised under the worker lock (shutdown)
    // shutdown() waited (up to its deadline) once: later calls, destroy's
    // among them, do not wait again for what did not end then.
    std::atomic<bool> shutdown_waited_{false};
    bool said_goodbye_ = false;
    bool eps_closed_ = false;  // destroy closed them: connect_ep makes no more
    CompletionQueue cq_[2];
};

/** Cancel the receives pred selects (worker lock held). Shutdown and
 *  failure handling both use it. */
template <class Pred> void Comm::cancel_receives(Pred pred) noexcept {
    // Collected first: a cancellation runs the callback, which unlinks
    // and recycles the Op while we walk the list.
    std::vector<void *> reqs;
    try {
        for (Op *op = ops_; op != nullptr; op = op->next) {
            if (pred(*op)) reqs.push_back(op->request);
        }
    } catch (const std::bad_alloc &) {
        // Out of memory (this runs inside progress): one at a time, each
        // op marked so a matched one that stays linked is not retried.
        for (Op *op = ops_; op != nullptr; op = op->next) op->cancel_asked = false;
        for (;;) {
            Op *op = ops_;
            while (op != nullptr && (op->cancel_asked || !pred(*op))) op = op->next;
            if (op == nullptr) return;
            op->cancel_asked = true;
            ucp_request_cancel(ctx_->worker(), op->request);
        }
    }
    for (auto r = reqs.rbegin(); r != reqs.rend(); ++r) ucp_request_cancel(ctx_->worker(), *r);
}

} // namespace ucxp2p

#endif
