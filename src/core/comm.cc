#include "core/comm.h"
#include "core/log.h"
#include "core/stack_buf.h"
#include "core/status.h"
#include "wireup/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace ucxp2p {

namespace {

constexpr uint32_t kBlobMagic = 0x55325043;  // "U2PC"
constexpr uint32_t kBlobVersion = 3;  // 3: cma::Identity names the epoch memfd

struct BlobHeader {
    uint32_t magic;
    uint32_t version;
    Context::CommIdSet free_ids;
    cma::Identity host;
    uint32_t addr_len;
};

} // namespace

void send_cb(void *request, ucs_status_t st, void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    if (op->posting) {  // inside ucp_tag_send_nbx: the poster finishes it
        op->done_in_post = true;
        op->post_status = st;
        op->post_bytes = op->entry.bytes;
        return;
    }
    if (op->comm == nullptr) {  // orphaned by a communicator torn down early
        ucp_request_free(request);
        delete op;
        return;
    }
    op->comm->complete(op, st, op->entry.bytes);
    ucp_request_free(request);
}

void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info,
             void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    size_t length = (st == UCS_OK && info != nullptr) ? info->length : 0;
    uint64_t tag = info != nullptr ? info->sender_tag : 0;
    if (op->posting) {  // inside ucp_tag_recv_nbx: the poster finishes it
        op->done_in_post = true;
        op->post_status = st;
        op->post_bytes = length;
        op->post_tag = tag;
        return;
    }
    if (op->comm == nullptr) {
        ucp_request_free(request);
        delete op;
        return;
    }
    op->comm->recv_done(op, st, length, tag);
    ucp_request_free(request);
}

namespace {

/** Progress the worker until done() or the deadline; returns done(). */
template <class Done>
bool progress_until(Context &ctx, Done done, int64_t deadline_ns) {
    for (;;) {
        {
            std::lock_guard<Mutex> lock(ctx.worker_mu());
            ctx.progress().progress_locked();
            if (done()) {
                return true;
            }
        }
        if (now_ns() > deadline_ns) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
}

} // namespace

p2p_status_t Comm::create(std::shared_ptr<Context> ctx, uint64_t ctx_id,
                          Bootstrap &bs, std::unique_ptr<Comm> *out) {
    std::unique_ptr<Comm> c(new Comm());
    c->ctx_ = ctx;
    c->ctx_id_ = ctx_id;
    c->rank_ = bs.rank();
    c->size_ = bs.size();
    c->local_rank_ = bs.local_rank();
    c->local_size_ = bs.local_size();
    if (c->size_ == 0 || c->size_ > kMaxRanks || c->rank_ >= c->size_) {
        P2P_LOG(P2P_LOG_ERROR, "comm: bootstrap gave rank %u of %u (at most %u ranks)",
                c->rank_, c->size_, kMaxRanks);
        return P2P_ERR_UNSUPPORTED;
    }

    const UcpAddress &addr = ctx->address();
    BlobHeader h;
    h.magic = kBlobMagic;
    h.version = kBlobVersion;
    h.free_ids = ctx->free_comm_ids();
    h.host = cma::local_identity();
    h.addr_len = static_cast<uint32_t>(addr.length());
    std::vector<uint8_t> mine(sizeof(h) + addr.length());
    std::memcpy(mine.data(), &h, sizeof(h));
    std::memcpy(mine.data() + sizeof(h), addr.get(), addr.length());

    std::vector<std::vector<uint8_t>> all;
    int64_t t0 = now_ns();
    p2p_status_t st = bs.allgather(mine, &all);
    if (st != P2P_OK) {
        P2P_LOG(P2P_LOG_ERROR, "comm: address exchange failed: %s",
                p2p_status_string(st));
        return st;
    }
    if (all.size() != c->size_) {
        P2P_LOG(P2P_LOG_ERROR, "comm: allgather returned %zu blobs for %u ranks",
                all.size(), c->size_);
        return P2P_ERR_BOOTSTRAP;
    }
    Context::CommIdSet common;
    common.fill(0xff);
    std::vector<cma::Identity> hosts(c->size_);
    c->addrs_.resize(c->size_);
    for (uint32_t r = 0; r < c->size_; ++r) {
        BlobHeader rh;
        if (all[r].size() < sizeof(rh)) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u sent a short blob", r);
            return P2P_ERR_BOOTSTRAP;
        }
        std::memcpy(&rh, all[r].data(), sizeof(rh));
        if (rh.magic != kBlobMagic || rh.version != kBlobVersion ||
            all[r].size() != sizeof(rh) + rh.addr_len) {
            P2P_LOG(P2P_LOG_ERROR, "comm: rank %u sent a malformed blob "
                    "(different ucxp2p version?)", r);
            return P2P_ERR_BOOTSTRAP;
        }
        for (size_t i = 0; i < common.size(); ++i) {
            common[i] &= rh.free_ids[i];
        }
        c->addrs_[r].assign(all[r].begin() + sizeof(rh), all[r].end());
        hosts[r] = rh.host;
    }
    int id = -1;
    for (int i = 0; i < Context::kMaxComms && id < 0; ++i) {
        if (common[i / 8] & (1u << (i % 8))) {
            id = i;
        }
    }
    if (id < 0 || !ctx->claim_comm_id(static_cast<unsigned>(id))) {
        P2P_LOG(P2P_LOG_ERROR, "comm: no communicator id free on every rank "
                "(at most %d alive; create them in the same order everywhere)",
                Context::kMaxComms);
        return P2P_ERR_BUSY;
    }
    c->id_ = static_cast<uint32_t>(id);
    c->id_claimed_ = true;
    c->peers_.reset(new Peer[c->size_]);
    uint32_t ncma = 0;
    for (uint32_t r = 0; r < c->size_; ++r) {
        c->peers_[r].ref.comm = c.get();
        c->peers_[r].ref.rank = r;
        c->peers_[r].cma = cma::peer_eligible(hosts[c->rank_], hosts[r]);
        c->peers_[r].pid = hosts[r].pid;
        c->peers_[r].epoch_fd = hosts[r].epoch_fd;
        c->peers_[r].epoch_ino = hosts[r].epoch_ino;
        ncma += c->peers_[r].cma ? 1 : 0;
    }
    if (ctx->settings().thread_mode == P2P_THREAD_SERIALIZED) {
        c->cq_[0].disable_lock();  // one call at a time (p2p_thread_mode_t)
        c->cq_[1].disable_lock();
    }
    c->cma_thresh_ = cma::threshold();
    c->mapped_thresh_ = cma::mapped_threshold();
    c->split_thresh_ = cma::split_threshold();
    if (ncma > 0) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: single copy to %u same-host peers "
                "for messages of %zu bytes or more (%zu from p2p_mem_alloc "
                "memory)", c->id_, ncma, c->cma_thresh_, c->mapped_thresh_);
    }
    Comm *raw = c.get();
    ctx->add_deferred_hook(raw, [raw] { raw->handle_failures(); });
    ctx->set_goodbye_handler(c->id_, [raw](uint32_t r) {
        if (r < raw->size_ && r != raw->rank_) {
            raw->peers_[r].left = true;
            P2P_LOG(P2P_LOG_DEBUG, "comm %u: rank %u said goodbye", raw->id_, r);
        }
    });
    P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u of %u ready in %.3f ms", c->id_,
            c->rank_, c->size_, (now_ns() - t0) / 1e6);
    *out = std::move(c);
    return P2P_OK;
}

Comm::~Comm() {
    if (!peers_) {  // creation failed before anything was set up
        if (id_claimed_) ctx_->release_comm_id(id_);
        return;
    }
    shutdown();
    ctx_->set_goodbye_handler(id_, nullptr);
    // Close endpoints gracefully (flush: eager data already completed
    // locally may still be on its way). A dead peer makes the flush fail
    // within the keepalive bound, so the wait below is bounded.
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        send_goodbyes();
        for (uint32_t r = 0; r < size_; ++r) {
            if (peers_[r].ep == nullptr) continue;
            ucp_request_param_t prm = {};
            prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            prm.flags = peers_[r].failed ? UCP_EP_CLOSE_FLAG_FORCE : 0;
            void *req = ucp_ep_close_nbx(peers_[r].ep, &prm);
            peers_[r].ep = nullptr;
            if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
        }
    }
    int64_t deadline = now_ns() + (2LL * ctx_->settings().peer_timeout_ms + 1000) * 1000000LL;
    bool closed = progress_until(*ctx_, [this] {
        for (auto it = closing_.begin(); it != closing_.end();) {
            if (ucp_request_check_status(*it) != UCS_INPROGRESS) {
                ucp_request_free(*it);
                it = closing_.erase(it);
            } else {
                ++it;
            }
        }
        return closing_.empty();
    }, deadline);
    if (!closed) {
        P2P_LOG(P2P_LOG_WARN, "comm %u: %zu endpoints did not close in time",
                id_, closing_.size());
    }
    ctx_->remove_deferred_hook(this);
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        for (Op *op = ops_; op != nullptr; op = op->next) {
            op->comm = nullptr;  // orphan: UCX still owns the request
        }
    }
    for (Op *op : free_ops_) {
        delete op;
    }
    delete spare_;
    spare_ = nullptr;
    free_ops_.clear();
    ctx_->release_comm_id(id_);
    cq_[0].notify_all();
    cq_[1].notify_all();
}

void Comm::link(Op *op) {
    op->prev = nullptr;
    op->next = ops_;
    if (ops_ != nullptr) ops_->prev = op;
    ops_ = op;
    ++nops_;
}

void Comm::unlink(Op *op) {
    if (op->prev != nullptr) op->prev->next = op->next;
    else ops_ = op->next;
    if (op->next != nullptr) op->next->prev = op->prev;
    op->prev = op->next = nullptr;
    --nops_;
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t st) {
    Comm::PeerRef *p = static_cast<Comm::PeerRef *>(arg);
    p->comm->on_peer_error(p->rank, st);
}

p2p_status_t Comm::connect_ep(uint32_t peer, ucp_ep_h *ep_p) {
    Peer &p = peers_[peer];
    if (p.failed) {
        return P2P_ERR_PEER_FAILURE;
    }
    ucp_ep_params_t ep_params = {};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = reinterpret_cast<const ucp_address_t *>(addrs_[peer].data());
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = ep_error_cb;
    ep_params.err_handler.arg = &p.ref;
    ucs_status_t st = ucp_ep_create(ctx_->worker(), &ep_params, &p.ep);
    if (st != UCS_OK) {
        p.ep = nullptr;
        P2P_LOG(P2P_LOG_ERROR, "comm %u: cannot create endpoint to rank %u: %s",
                id_, peer, ucs_status_string(st));
        return status_from_ucs(st) == P2P_ERR_PEER_FAILURE ? P2P_ERR_PEER_FAILURE
                                                           : P2P_ERR_TRANSPORT;
    }
    *ep_p = p.ep;
    return P2P_OK;
}

bool Comm::recv_already_arrived(uint32_t peer, uint32_t tensor_id) {
    ucp_tag_recv_info_t info;
    return ucp_tag_probe_nb(ctx_->worker(), make_tag(id_, peer, tensor_id),
                            user_mask(peer), 0, &info) != nullptr;
}

p2p_status_t Comm::post(bool is_send, const PostItem *items, size_t count,
                        size_t *bad_index_p) {
    if (count == 0) {
        return P2P_OK;
    }
    bool kick = false;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        p2p_status_t st = post_locked(is_send, items, count, bad_index_p,
                                      /*try_imm=*/true, &kick);
        if (st != P2P_OK) {
            return st;
        }
    }
    if (kick) {
        ctx_->progress().kick();  // the progress thread sleeps: wake it
    }
    return P2P_OK;
}

p2p_status_t Comm::post_single(bool is_send, const PostItem &item) {
    bool kick = false;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        bool done = false;
        if (!shut_.load()) {
            done = is_send ? send_now(item) : probe_due() && recv_now(item, &kick);
        }
        if (!done) {
            // send_now found it cannot finish inside the call: no retry.
            p2p_status_t st = post_locked(is_send, &item, 1, nullptr,
                                          /*try_imm=*/false, &kick);
            if (st != P2P_OK) {
                return st;
            }
        }
    }
    if (kick) {
        ctx_->progress().kick();
    }
    return P2P_OK;
}

inline bool Comm::send_imm(const PostItem &it, ucp_ep_h ep) {
    // Larger messages cannot complete inside the call (UCX's eager-short
    // limit is a few KiB on every transport): do not ask.
    constexpr size_t kImmediateMax = 16384;
    if (it.length > kImmediateMax || wants_single_copy(peers_[it.peer], it)) {
        return false;
    }
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    prm.memh = it.mem->memh;
    // FORCE_IMM_CMPL: done inside the call (UCS_OK), or nothing sent (no
    // resources, or an error the general path meets again and reports).
    return ucp_tag_send_nbx(ep, it.buffer, it.length,
                            make_tag(id_, rank_, it.tensor_id), &prm) == nullptr;
}

bool Comm::send_now(const PostItem &it) {
    ucp_ep_h ep = peers_[it.peer].ep;
    if (ep == nullptr || it.mem->dead || !send_imm(it, ep)) {
        return false;
    }
    queue_done(P2P_QUEUE_SEND, it, it.length, /*counted=*/false);
    return true;
}

bool Comm::recv_now(const PostItem &it, bool *kick) {
    const Peer &p = peers_[it.peer];
    if (p.ep == nullptr || it.mem->dead) {
        return false;  // the general path connects, or reports the failure
    }
    if (spare_ == nullptr) {
        spare_ = alloc_op();  // before the probe: nothing below may throw
    }
    ucp_worker_h worker = ctx_->worker();
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg = ucp_tag_probe_nb(worker, make_tag(id_, it.peer, it.tensor_id),
                                             user_mask(it.peer), 1, &info);
    if (msg == nullptr) {
        probe_misses_ += probe_misses_ < kProbeMisses ? 1 : 0;
        return false;
    }
    probe_misses_ = 0;
    // Removed from UCX's queue: from here on this call must receive it.
    Op *op = spare_;
    const bool data = tag_kind(info.sender_tag) == KIND_DATA;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMH;
    prm.cb.recv = recv_cb;
    prm.user_data = op;
    prm.memh = it.mem->memh;
    void *dst = it.buffer;
    size_t len = it.length;
    if (!data && len < sizeof(cma::Rts)) {  // a single-copy request: see post_one
        op->bounced = true;
        dst = op->bounce;
        len = sizeof(op->bounce);
        prm.op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
    }
    op->posting = true;
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker, dst, len, msg, &prm);
    op->posting = false;
    if (r == nullptr && data) {
        // Received inside the call (UCS_OK; 1.13 fills no recv_info there,
        // the probe did). The spare Op was not touched: it stays fresh.
        queue_done(P2P_QUEUE_RECV, it, info.length, /*counted=*/false);
        return true;
    }
    // The rest of post_one's work for a receive UCX matched in the call.
    spare_ = nullptr;
    fill_op(op, false, it);
    it.mem->acquire();  // not dead: checked above, under this lock
    cq_[P2P_QUEUE_RECV].add_pending(1);
    Progress &pr = ctx_->progress();
    pr.ops_posted(1);
    if (op->done_in_post) {
        if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r);
        }
        recv_done(op, op->post_status, op->post_bytes, op->post_tag);
    } else if (UCS_PTR_IS_PTR(r)) {
        op->request = r;
        link(op);
    } else {
        ucs_status_t st = UCS_PTR_STATUS(r);
        recv_done(op, st, st == UCS_OK ? info.length : 0, info.sender_tag);
    }
    *kick = pr.note_post_locked();
    return true;
}

// Always inline: post_single's copy, with count 1, loses the loops and
// the staging buffer (~50 instructions per receive that waits).
__attribute__((always_inline)) inline p2p_status_t
Comm::post_locked(bool is_send, const PostItem *items, size_t count,
                  size_t *bad_index_p, bool try_imm, bool *kick) {
    if (shut_.load()) {
        if (bad_index_p != nullptr) *bad_index_p = 0;
        return P2P_ERR_SHUTDOWN;
    }
    // One endpoint per item; batches up to 64 need no allocation.
    StackBuf<ucp_ep_h, 64> eps(count);
    // Resolve every endpoint first: all or nothing.
    for (size_t i = 0; i < count; ++i) {
        p2p_status_t st = get_ep(items[i].peer, &eps[i]);
        if (st == P2P_ERR_PEER_FAILURE && !is_send &&
            recv_already_arrived(items[i].peer, items[i].tensor_id)) {
            eps[i] = nullptr;  // the data is here: receive it anyway
            st = P2P_OK;
        }
        if (st != P2P_OK) {
            if (bad_index_p != nullptr) *bad_index_p = i;
            return st;
        }
    }
    for (size_t i = 0; i < count; ++i) {
        if (!items[i].mem->acquire()) {
            for (size_t j = 0; j < i; ++j) items[j].mem->release();
            if (bad_index_p != nullptr) *bad_index_p = i;
            return P2P_ERR_INVALID_HANDLE;
        }
    }
    cq_[is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV].add_pending(count);
    Progress &pr = ctx_->progress();
    pr.ops_posted(count);
    bool in_flight = false;
    for (size_t i = 0; i < count; ++i) {
        if (is_send && try_imm && send_imm(items[i], eps[i])) {
            // Done: what finish() does for an operation, with none.
            items[i].mem->release();
            pr.op_completed();
            queue_done(P2P_QUEUE_SEND, items[i], items[i].length, /*counted=*/true);
            continue;
        }
        in_flight |= post_one(is_send, items[i], eps[i]);
    }
    // Sends that completed inside the post (small messages) leave no
    // work behind: a stream of them must not wake the progress thread
    // (a system call each, and a thread competing for the core).
    // Receives and sends still in flight do (a receive may have matched
    // a single-copy request whose answer needs progress).
    *kick = (!is_send || in_flight) && pr.note_post_locked();
    return P2P_OK;
}

bool Comm::post_one(bool is_send, const PostItem &it, ucp_ep_h ep) {
    Op *op = alloc_op();
    fill_op(op, is_send, it);
    Peer &peer = peers_[it.peer];
    if (is_send && wants_single_copy(peer, it)) {
        post_rts(op, it, ep);
        return true;  // waits for the receiver's answer
    }

    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMH;
    prm.user_data = op;
    prm.memh = it.mem->memh;
    void *req;
    op->posting = true;
    if (is_send) {
        prm.cb.send = send_cb;
        req = ucp_tag_send_nbx(ep, it.buffer, it.length,
                               make_tag(id_, rank_, it.tensor_id), &prm);
    } else {
        // Always through the callback: UCX 1.13 reports no length for a
        // receive completed immediately (recv_info is not filled there).
        prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        prm.cb.recv = recv_cb;
        void *dst = it.buffer;
        size_t len = it.length;
        if (peer.cma && len < sizeof(cma::Rts)) {
            // An RTS must fit whatever the receive's size: land small
            // receives in the operation first (recv_done copies them out).
            op->bounced = true;
            dst = op->bounce;
            len = sizeof(op->bounce);
            prm.op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
        }
        req = ucp_tag_recv_nbx(ctx_->worker(), dst, len,
                               make_tag(id_, it.peer, it.tensor_id),
                               user_mask(it.peer), &prm);
    }
    op->posting = false;
    if (op->done_in_post) {
        if (UCS_PTR_IS_PTR(req)) {
            ucp_request_free(req);
        }
        if (!is_send) {
            probe_misses_ = 0;  // its message was waiting: recv_now looks again
        }
        if (is_send) {
            complete(op, op->post_status, op->post_bytes);
            return false;
        }
        recv_done(op, op->post_status, op->post_bytes, op->post_tag);
        return true;  // receives are reported in flight (see post())
    }
    if (UCS_PTR_IS_PTR(req)) {
        op->request = req;
        link(op);
        return true;
    }
    // Completed at once without a callback (a send; or an error).
    complete(op, UCS_PTR_STATUS(req), is_send ? it.length : 0);
    return false;
}

void Comm::complete_error(Op *op, ucs_status_t st) {
    p2p_status_t ps;
    if (st == UCS_ERR_MESSAGE_TRUNCATED) {
        ps = P2P_ERR_TRUNCATED;
    } else if (peers_[op->entry.peer].failed) {
        ps = P2P_ERR_PEER_FAILURE;
    } else if (st == UCS_ERR_CANCELED) {
        ps = P2P_ERR_CANCELED;
    } else {
        ps = status_from_ucs(st);
    }
    P2P_LOG(P2P_LOG_DEBUG, "comm %u: %s to/from rank %u tensor %u failed: %s",
            id_, op->is_send ? "send" : "recv", op->entry.peer,
            op->entry.tensor_id, ucs_status_string(st));
    finish(op, ps, 0);
}

void Comm::on_peer_error(uint32_t peer, ucs_status_t st) {
    Peer &p = peers_[peer];
    if (p.failed) return;
    p.failed = true;
    // While shutting down, peers leaving first is expected, not a warning.
    if (p.left) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: peer rank %u left (%s)", id_, peer,
                ucs_status_string(st));
    } else {
        P2P_LOG(shut_.load() ? P2P_LOG_DEBUG : P2P_LOG_WARN,
                "comm %u: peer rank %u failed: %s", id_, peer,
                ucs_status_string(st));
    }
    failed_pending_.push_back(peer);
    ctx_->request_deferred();  // handle_failures after this progress call
}

void Comm::handle_failures() {
    if (failed_pending_.empty()) return;
    std::vector<uint32_t> failed;
    failed.swap(failed_pending_);
    for (uint32_t peer : failed) {
        // Receives from a dead peer would wait forever: cancel them (their
        // completion reports P2P_ERR_PEER_FAILURE).
        std::vector<void *> reqs;
        for (Op *op = ops_; op != nullptr; op = op->next) {
            bool waits_recv = !op->is_send || op->stage == Op::SEND_RTS ||
                              op->stage == Op::SEND_SPLIT;
            if (waits_recv && op->entry.peer == peer) reqs.push_back(op->request);
        }
        for (void *r : reqs) ucp_request_cancel(ctx_->worker(), r);
        // Force-close the endpoint: sends still queued on it fail now.
        Peer &p = peers_[peer];
        if (p.ep != nullptr) {
            ucp_request_param_t prm = {};
            prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
            void *req = ucp_ep_close_nbx(p.ep, &prm);
            p.ep = nullptr;
            if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
        }
    }
}

void Comm::send_goodbyes() {
    for (uint32_t r = 0; r < size_; ++r) {
        Peer &p = peers_[r];
        if (p.ep == nullptr || p.failed || r == rank_) continue;
        auto *g = new Context::Goodbye{Context::kGoodbyeMagic, id_, rank_};
        ucp_request_param_t prm = {};
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        prm.cb.send = ctl_sent_cb<Context::Goodbye>;
        prm.user_data = g;
        void *req = ucp_am_send_nbx(p.ep, Context::kAmGoodbye, g, sizeof(*g),
                                    nullptr, 0, &prm);
        if (!UCS_PTR_IS_PTR(req)) {
            if (UCS_PTR_STATUS(req) != UCS_OK) {
                P2P_LOG(P2P_LOG_DEBUG, "comm %u: goodbye to rank %u failed: %s",
                        id_, r, ucs_status_string(UCS_PTR_STATUS(req)));
            }
            delete g;
        }
    }
}

void Comm::shutdown() {
    shut_.store(true);
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        std::vector<void *> recvs;
        std::vector<bool> has_send(size_, false);
        for (Op *op = ops_; op != nullptr; op = op->next) {
            // A single-copy send waits on a receive (its ACK): cancel that.
            // A split receive whose tail the sender may be writing is left
            // to finish (core/cma.h): its WDONE comes, or the sender is gone.
            if (op->stage == Op::RECV_SPLIT) continue;
            if (!op->is_send || op->stage == Op::SEND_RTS ||
                op->stage == Op::SEND_SPLIT) {
                recvs.push_back(op->request);
            } else {
                has_send[op->entry.peer] = true;
            }
        }
        for (void *r : recvs) ucp_request_cancel(ctx_->worker(), r);
        // UCX cannot cancel a send; closing its endpoint by force does.
        for (uint32_t r = 0; r < size_; ++r) {
            if (has_send[r] && peers_[r].ep != nullptr) {
                ucp_request_param_t prm = {};
                prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
                prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
                void *req = ucp_ep_close_nbx(peers_[r].ep, &prm);
                peers_[r].ep = nullptr;
                if (UCS_PTR_IS_PTR(req)) closing_.push_back(req);
            }
        }
    }
    int64_t deadline = now_ns() + (2LL * ctx_->settings().peer_timeout_ms + 1000) * 1000000LL;
    if (!progress_until(*ctx_, [this] { return nops_ == 0; }, deadline)) {
        P2P_LOG(P2P_LOG_ERROR, "comm %u: %zu operations still in flight after "
                "shutdown", id_, nops_);
    }
    cq_[0].notify_all();  // waiters recheck: nothing more can arrive
    cq_[1].notify_all();
}

} // namespace ucxp2p
