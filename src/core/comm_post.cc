/*
 * Posting: the general path of sends and receives (batches, and single
 * posts that cannot finish inside the call) and the short paths of single
 * posts that can (send_single in core/comm_send.h, recv_now). See core/comm.h.
 */
#include "core/comm.h"
#include "core/comm_send.h"
#include "core/stack_buf.h"

namespace ucxp2p {

namespace {

/** A single-copy request must fit whatever the receive's size: a receive
 *  smaller than one lands in op's bounce buffer first (recv_done copies
 *  data out of it). */
void bounce(Op *op, void **dst, size_t *len, ucp_request_param_t *prm) {
    op->bounced = true;
    *dst = op->bounce;
    *len = sizeof(op->bounce);
    prm->op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
}

} // namespace

bool Comm::recv_already_arrived(uint32_t peer, uint32_t tensor_id) {
    ucp_tag_recv_info_t info;
    return ucp_tag_probe_nb(ctx_->worker(), tag_with_low(peers_[peer].data_tag0, tensor_id),
                            kFullMask, 0, &info) != nullptr;
}

__attribute__((noinline, cold)) void Comm::take_in_before_connecting() {
    // A receive's first contact with a peer: what the transport delivered
    // and the worker has not taken in yet (the progress thread may not
    // have run since) comes first. The sender may be gone by now, its
    // goodbye right behind its message: taken in, the goodbye makes
    // get_ep answer P2P_ERR_PEER_FAILURE and the message is received
    // without connecting (connecting to a process that is gone fails over
    // shared memory, and UCX 1.13 can abort when a tcp connection it is
    // still setting up is refused).
    //
    // For at most 10 ms: drained to the end, the take-in went on for as
    // long as another rank streamed to us (437 ms behind 8-byte messages,
    // docs/PERFORMANCE.md, 2026-12-01). What a gone sender left takes far
    // less: a shared-memory FIFO holds 256 messages; only megabytes of
    // small messages in a tcp socket's buffer could take longer, and then
    // the connection is tried before its goodbye is seen.
    constexpr int64_t kTakeInNs = 10 * 1000 * 1000;
    ctx_->progress().progress_for_locked(kTakeInNs);
}

// Staged device memory (core/staging.h), out of line: host memory's
// per-message path pays only the test of Mem::shadow.
__attribute__((noinline, cold)) p2p_status_t Comm::staged_done(const Op *op, p2p_status_t ps,
                                                               size_t bytes) {
    if (op->is_send || ps != P2P_OK) return ps;
    return op->mem->shadow->push(op->buffer, bytes);
}

__attribute__((noinline, cold)) void Comm::landed_staged(const PostItem &it, size_t bytes) {
    const p2p_status_t st = it.mem->shadow->push(it.buffer, bytes);
    if (st == P2P_OK) {
        queue_done(P2P_QUEUE_RECV, it, bytes, /*counted=*/false);
        return;
    }
    p2p_completion_t e{};
    e.user_context = it.user_context;
    e.peer = it.peer;
    e.tensor_id = it.tensor_id;
    e.status = st;
    cq_[P2P_QUEUE_RECV].push(e, /*counted=*/false);
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

p2p_status_t Comm::recv_single(const PostItem &item) {
    bool kick = false;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        if (shut_.load() || !probe_due() || !recv_now(item, &kick)) {
            p2p_status_t st = post_locked(false, &item, 1, nullptr,
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

bool Comm::recv_now(const PostItem &it, bool *kick) {
    const Peer &p = peers_[it.peer];
    if (p.ep == nullptr || it.mem->dead) {
        return false;  // the general path connects, or reports the failure
    }
    if (spare_ == nullptr) {
        spare_ = alloc_op();  // before the probe: nothing below may throw
    }
    cq_[P2P_QUEUE_RECV].reserve(1);  // likewise room for its completion
    ucp_worker_h worker = ctx_->worker();
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg =
        ucp_tag_probe_nb(worker, tag_with_low(peers_[it.peer].data_tag0, it.tensor_id),
                         kFullMask, 1, &info);
    if (msg == nullptr) {
        probe_misses_ += probe_misses_ < kProbeMisses ? 1 : 0;
        return false;
    }
    probe_misses_ = 0;
    // Removed from UCX's queue: from here on this call must receive it.
    Op *op = spare_;
    // A single-copy request has its size (and its magic, which only the
    // payload shows: recv_done looks).
    const bool data = info.length != sizeof(cma::Rts) || !p.cma;
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMH;
    prm.cb.recv = recv_cb;
    prm.user_data = op;
    prm.memh = it.mem->memh;
    void *dst = it.buffer;
    size_t len = it.length;
    if (!data && len < sizeof(cma::Rts)) {  // maybe a single-copy request
        bounce(op, &dst, &len, &prm);
    } else if (!data && copies_ != 0) {
        settle_copies_into(dst, len);  // a request would land in dst
    }
    op->posting = true;
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker, dst, len, msg, &prm);
    op->posting = false;
    if (r == nullptr && data) {
        // Received inside the call (UCS_OK; 1.13 fills no recv_info there,
        // the probe did). The spare Op was not touched: it stays fresh.
        if (__builtin_expect(it.mem->shadow != nullptr, 0)) {
            landed_staged(it, info.length);
        } else {
            queue_done(P2P_QUEUE_RECV, it, info.length, /*counted=*/false);
        }
        return true;
    }
    // The rest of post_one's work for a receive UCX matched in the call.
    spare_ = nullptr;
    adopt_counted(op, false, it);  // memory not dead: checked above, under this lock
    settle_post(op, false, r, info.length);
    *kick = ctx_->progress().note_post_locked();
    return true;
}

// Inline: the tails of post_one (every receive posted ahead) and recv_now.
__attribute__((always_inline)) inline void Comm::adopt_counted(Op *op, bool is_send,
                                                                const PostItem &it) {
    fill_op(op, is_send, it);
    it.mem->acquire();
    cq_[is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV].add_pending(1);
    ctx_->progress().ops_posted(1);
}

__attribute__((always_inline)) inline Comm::Settled
Comm::settle_post(Op *op, bool is_send, ucs_status_ptr_t r, size_t imm_bytes) {
    ucs_status_t st;
    size_t bytes;
    Settled how;
    if (op->done_in_post) {  // its callback ran inside the call
        if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r);
        }
        st = op->post_status;
        bytes = op->post_bytes;
        how = Settled::kInCall;
    } else if (UCS_PTR_IS_PTR(r)) {
        op->request = r;
        link(op);
        return Settled::kLinked;
    } else {
        st = UCS_PTR_STATUS(r);
        bytes = st == UCS_OK ? imm_bytes : 0;
        how = Settled::kAtOnce;
    }
    if (is_send) {
        complete(op, st, bytes);
    } else {
        recv_done(op, st, bytes);  // an error only completes; data may be a request
    }
    return how;
}

// Always inline: the single posts' copies (recv_single, send_locked), with
// count 1, lose the loops and the staging buffer (~50 instructions per
// receive that waits).
__attribute__((always_inline)) inline p2p_status_t
Comm::post_locked(bool is_send, const PostItem *items, size_t count,
                  size_t *bad_index_p, bool try_imm, bool *kick) {
    if (shut_.load()) {
        return P2P_ERR_SHUTDOWN;  // no block is bad: *bad_index_p untouched
    }
    // One endpoint per item; batches up to 64 need no allocation.
    StackBuf<ucp_ep_h, 64> eps(count);
    // Resolve every endpoint first: all or nothing.
    bool from_dead = false;
    bool taken_in = false;
    for (size_t i = 0; i < count; ++i) {
        if (!is_send && !taken_in && peers_[items[i].peer].ep == nullptr) {
            take_in_before_connecting();
            taken_in = true;
        }
        const Peer &pe = peers_[items[i].peer];
        const bool connects = pe.ep == nullptr && !pe.failed;
        p2p_status_t st = get_ep(items[i].peer, &eps[i]);
        if (st != P2P_OK && st != P2P_ERR_SHUTDOWN && !is_send) {
            if (connects) {
                // The sender may have sent and left between that take-in
                // and this connect (its shared memory gone: the connect
                // failed): what it sent is in our FIFO or socket, not yet
                // taken in.
                take_in_before_connecting();
            }
            if (recv_already_arrived(items[i].peer, items[i].tensor_id)) {
                // The data is here: receive it anyway, from a peer that
                // failed or left, or one we could not connect to.
                eps[i] = nullptr;
                from_dead = true;
                st = P2P_OK;
            }
        }
        if (st != P2P_OK) {
            if (bad_index_p != nullptr) *bad_index_p = i;
            return st;
        }
    }
    // An Op for every item in the cache, and room for every completion,
    // before anything is posted: a batch too large for memory fails whole
    // (P2P_ERR_NO_MEMORY from the throw), never after posting part of it.
    cq_[is_send ? P2P_QUEUE_SEND : P2P_QUEUE_RECV].reserve(count);
    if (is_send && try_imm && spare_ == nullptr) {
        spare_ = alloc_op();  // send_try's record (the cache below is the items')
    }
    if (free_ops_.size() < count) {
        free_ops_.reserve(count);  // then push_back cannot throw: no leak
        while (free_ops_.size() < count) free_ops_.push_back(new Op());
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
        if (is_send && try_imm) {
            // No kick: accounted, and post_locked notes the batch once, below.
            const Tried t = send_try(items[i], eps[i], spare_, /*accounted=*/true, nullptr);
            if (t == Tried::kDone) {
                // What finish() does for an operation, with none.
                items[i].mem->release();
                pr.op_completed();
                queue_done(P2P_QUEUE_SEND, items[i], items[i].length, /*counted=*/true);
                continue;
            }
            if (t == Tried::kPosted) {
                // The request's record now; the next from the cache (each
                // item takes at most one: no throw).
                spare_ = alloc_op();
                in_flight = true;
                continue;
            }
        }
        in_flight |= post_one(is_send, items[i], eps[i]);
    }
    if (from_dead) {
        // One arrived message let every block of the batch naming it
        // through: the ones it did not match would wait forever, from a
        // failed peer as from one no endpoint could be created to (its
        // process gone where we cannot see it): they end with
        // P2P_ERR_PEER_FAILURE, as a single post of them fails at once.
        for (size_t i = 0; i < count; ++i) {
            if (eps[i] == nullptr) {
                cancel_waits_from(items[i].peer);
                Peer &p = peers_[items[i].peer];
                if (p.failed && p.ep_error) start_abandon_clock(&p);  // a grace of its own
            }
        }
    }
    // Sends that completed inside the post (small messages) leave no
    // work behind: a stream of them must not wake the progress thread
    // (a system call each, and a thread competing for the core).
    // Receives and sends still in flight do (a receive may have matched
    // a single-copy request whose answer needs progress).
    *kick = (!is_send || in_flight) && pr.note_post_locked();
    return P2P_OK;
}

void Comm::adopt_send(Op *op, const PostItem &it, ucs_status_ptr_t r, bool accounted,
                      bool *kick) {
    if (accounted) {
        fill_op(op, true, it);
    } else {
        adopt_counted(op, true, it);  // memory not dead: the caller checked, under this lock
    }
    if (settle_post(op, true, r, it.length) == Settled::kLinked && !accounted) {
        *kick = ctx_->progress().note_post_locked();  // post_locked notes a batch once
    }
}

p2p_status_t Comm::send_locked(const PostItem &it, bool *kick) {
    return post_locked(true, &it, 1, nullptr, /*try_imm=*/false, kick);
}

bool Comm::post_one(bool is_send, const PostItem &it, ucp_ep_h ep) {
    Op *op = alloc_op();  // from the cache post_locked filled: no throw
    fill_op(op, is_send, it);
    Peer &peer = peers_[it.peer];
    if (is_send && (mimics_rts(it) || wants_single_copy(op, peer, it))) {
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
        const ucp_tag_t tag = tag_with_low(send_tag0_, it.tensor_id);
        // The last send of a PathChooser block through UCX: completes once
        // the receiver has matched it, so the block's time is end to end.
        req = op->chosen != 0
                  ? ucp_tag_send_sync_nbx(ep, it.buffer, it.length, tag, &prm)
                  : ucp_tag_send_nbx(ep, it.buffer, it.length, tag, &prm);
    } else {
        // Always through the callback: UCX 1.13 reports no length for a
        // receive completed immediately (recv_info is not filled there).
        prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        prm.cb.recv = recv_cb;
        void *dst = it.buffer;
        size_t len = it.length;
        if (peer.cma && len < sizeof(cma::Rts)) {
            bounce(op, &dst, &len, &prm);  // a request may come instead
        } else if (peer.cma && copies_ != 0) {
            settle_copies_into(dst, len);  // a request may land in dst
        }
        req = ucp_tag_recv_nbx(ctx_->worker(), dst, len,
                               tag_with_low(peers_[it.peer].data_tag0, it.tensor_id), kFullMask,
                               &prm);
    }
    op->posting = false;
    const Settled how = settle_post(op, is_send, req, it.length);
    if (how == Settled::kLinked) {
        return true;
    }
    if (how == Settled::kInCall && !is_send) {
        probe_misses_ = 0;  // its message was waiting: recv_now looks again
        return true;        // receives are reported in flight (see post())
    }
    return false;  // completed at once (a send; or an error)
}

} // namespace ucxp2p
