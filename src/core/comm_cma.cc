/*
 * Comm's same-host single-copy protocol (see core/cma.h): the receiver's
 * handling of a request, the sender's handling of the answer, the
 * UCX push both sides fall back to, and what the per-size path choice
 * (core/path_choice.h) learns from the sends it timed.
 */
#include "core/comm.h"
#include "core/log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ucxp2p {

namespace {

/** A control receive finished: the ACK of a single-copy send (Done =
 *  ack_done; an orphaned send still invalidates its epoch) or the WDONE of
 *  a split receive (wdone_done). Cancelled receives land here too. */
template <void (Comm::*Done)(Op *, ucs_status_t), bool kIsSend>
void ctl_recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *,
                 void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    if (op->posting) {
        op->done_in_post = true;
        op->post_status = st;
        return;
    }
    if (op->comm == nullptr) {
        if (kIsSend && st != UCS_OK && !op->abandoned) cma::bump_epoch(op->seq);
        orphan_done(op, request);
        return;
    }
    (op->comm->*Done)(op, st);
    ucp_request_free(request);
}

constexpr ucp_tag_recv_nbx_callback_t ack_cb = ctl_recv_cb<&Comm::ack_done, true>;
constexpr ucp_tag_recv_nbx_callback_t wdone_cb = ctl_recv_cb<&Comm::wdone_done, false>;

/** Post a control receive into op->ack (full tag match); a message already
 *  here sets op->done_in_post. */
void *post_ctl_recv(ucp_worker_h worker, Op *op, uint64_t tag,
                    ucp_tag_recv_nbx_callback_t cb) {
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    prm.cb.recv = cb;
    prm.user_data = op;
    op->posting = true;
    op->done_in_post = false;
    void *req = ucp_tag_recv_nbx(worker, &op->ack, sizeof(op->ack), tag,
                                 ~static_cast<ucp_tag_t>(0), &prm);
    op->posting = false;
    return req;
}

/** A control message (RTS, ACK, WDONE) to ep: see send_small. */
template <class T>
ucs_status_t send_ctl(ucp_ep_h ep, uint64_t tag, const T &msg) {
    return send_small(msg, [&](const T *buf, const ucp_request_param_t *prm) {
        return ucp_tag_send_nbx(ep, buf, sizeof(T), tag, prm);
    });
}


} // namespace

void Comm::recv_done(Op *op, ucs_status_t st, size_t bytes) {
    if (op->stage == Op::RECV_PUSH) {
        complete(op, st, bytes);
        return;
    }
    const void *landed = op->bounced ? op->bounce : op->buffer;
    if (st == UCS_OK && is_rts(op->entry.peer, landed, bytes)) {
        cma::Rts rts;
        std::memcpy(&rts, landed, sizeof(rts));
        on_rts(op, rts);
        return;
    }
    if (op->bounced && st == UCS_OK) {
        if (bytes > op->length) {
            st = UCS_ERR_MESSAGE_TRUNCATED;  // nothing written to the user
        } else if (bytes > 0) {
            std::memcpy(op->buffer, op->bounce, bytes);
        }
    }
    complete(op, st, bytes);
}

void Comm::on_rts(Op *op, const cma::Rts &rts) {
    const uint32_t src = op->entry.peer;
    if (rts.length > op->length) {
        send_ack(src, rts.seq, cma::ACK_TRUNCATED);
        finish(op, P2P_ERR_TRUNCATED, 0);
        return;
    }
    if (rts.split != 0) {
        on_split_rts(op, rts);
        return;
    }
    op->rts = rts;
    cma::ReadResult r;
    int err = 0;
    if (read_payload(op, Op::COPY_WHOLE, &r, &err)) {
        return;  // comm_copy.cc concludes it
    }
    conclude_read(op, rts, r, err);
}

bool Comm::read_source(uint32_t src, const cma::Rts &rts, const uint8_t **base_p,
                       const uint8_t **epochs_p, cma::ReadResult *r) {
    Peer &p = peers_[src];
    const pid_t pid = static_cast<pid_t>(p.pid);
    *base_p = *epochs_p = nullptr;
    if (rts.region_fd >= 0 && p.epoch_fd >= 0 && !p.map_refused &&
        rts.region_off <= rts.region_len &&
        rts.length <= rts.region_len - rts.region_off) {
        const uint8_t *epochs = p.maps.get(pid, p.epoch_fd, p.epoch_ino,
                                           cma::kEpochTableBytes);
        if (epochs != nullptr) {
            size_t n = p.maps.drop_closed(pid, cma::regions_closed(epochs), epochs);
            if (n != 0) {
                P2P_LOG(P2P_LOG_DEBUG, "comm %u: unmapped %zu region(s) rank %u "
                        "freed (%zu mapped)", id_, n, src, p.maps.size());
            }
        }
        bool fresh = false;
        const uint8_t *base = epochs == nullptr ? nullptr
            : p.maps.get(pid, rts.region_fd, rts.region_ino, rts.region_len, &fresh);
        if (fresh) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: mapped a %llu-byte region of rank %u "
                    "(%zu mapped)", id_, static_cast<unsigned long long>(rts.region_len),
                    src, p.maps.size());
        }
        if (base != nullptr) {
            *base_p = base + rts.region_off;
            *epochs_p = epochs;
            return true;
        }
        const int e = errno;
        if (epochs != nullptr && cma::epoch_moved(epochs, rts.seq, rts.epoch)) {
            // Withdrawn: its user may have freed the region (ENOENT, its fd
            // closed), which says nothing about mapping this rank's next.
            *r = cma::ReadResult::CANCELLED;
            return false;
        }
        if (e == EACCES || e == EPERM || e == ENOENT || e == ENOSYS) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: cannot map rank %u's memory (%s); "
                    "reading it with process_vm_readv", id_, src, std::strerror(e));
            p.map_refused = true;
        } else {
            P2P_LOG(P2P_LOG_DEBUG, "comm %u: mapping rank %u's region failed "
                    "(%s); reading it with process_vm_readv", id_, src,
                    std::strerror(e));
        }
    }
    return true;  // process_vm_readv
}

void Comm::conclude_read(Op *op, const cma::Rts &rts, cma::ReadResult r, int err) {
    const uint32_t src = op->entry.peer;
    switch (r) {
    case cma::ReadResult::OK:
        send_ack(src, rts.seq, cma::ACK_OK);
        finish(op, P2P_OK, rts.length);
        return;
    case cma::ReadResult::CANCELLED:
        P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u withdrew tensor %u while it "
                "was read (its send was cancelled)", id_, src, op->entry.tensor_id);
        // Another send sharing the epoch slot may be the one cancelled:
        // answer, so a send still waiting does not wait forever.
        send_ack(src, rts.seq, cma::ACK_ERROR);
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    case cma::ReadResult::NOT_ALLOWED:
        if (peers_[src].tcp && shut_.load(std::memory_order_relaxed)) {
            // Shutting down reads nothing more (Comm::pull) and cancels
            // what waits: no push to wait for either. The sender's wait for
            // our answer ends with our goodbye.
            finish(op, P2P_ERR_CANCELED, 0);
            return;
        }
        if (!peers_[src].cma_refused) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: cannot read rank %u's %s (%s); "
                    "it sends through UCX instead", id_, src,
                    peers_[src].tcp ? "payloads over tcp" : "memory", std::strerror(err));
        }
        peers_[src].cma_refused = true;
        send_ack(src, rts.seq, cma::ACK_FALLBACK);
        op->stage = Op::RECV_PUSH;
        op->seq = rts.seq;
        repost_push(op);
        return;
    case cma::ReadResult::PEER_GONE:
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    case cma::ReadResult::FAILED:
        break;
    }
    P2P_LOG(P2P_LOG_WARN, "comm %u: single-copy read of %llu bytes from rank "
            "%u failed: %s", id_, static_cast<unsigned long long>(rts.length),
            src, std::strerror(err));
    send_ack(src, rts.seq, cma::ACK_ERROR);
    finish(op, P2P_ERR_TRANSPORT, 0);
}

void Comm::on_split_rts(Op *op, const cma::Rts &rts) {
    const uint32_t src = op->entry.peer;
    if (rts.split >= rts.length) {
        P2P_LOG(P2P_LOG_ERROR, "comm %u: malformed split request from rank %u "
                "(split %llu of %llu bytes)", id_, src,
                static_cast<unsigned long long>(rts.split),
                static_cast<unsigned long long>(rts.length));
        send_ack(src, rts.seq, cma::ACK_ERROR);
        finish(op, P2P_ERR_TRANSPORT, 0);
        return;
    }
    op->stage = Op::RECV_SPLIT;
    op->rts = rts;
    op->seq = rts.seq;
    // Wait for the sender's word on its part before asking for it.
    void *req = post_ctl_recv(ctx_->worker(), op,
                              make_tag(tag_base_, src, rts.seq | cma::kWdoneBit, KIND_ACK),
                              wdone_cb);
    if (!UCS_PTR_IS_PTR(req)) {
        send_ack(src, rts.seq, cma::ACK_ERROR);
        complete(op, UCS_PTR_STATUS(req), 0);
        return;
    }
    if (op->request == nullptr) link(op);  // matched inside post()
    op->request = req;
    if (op->done_in_post) {
        // The sender withdrew this send before we answered: WDONE CANCELLED
        // was waiting already. Nothing was written; no CTS needed.
        op->head = cma::ReadResult::CANCELLED;
        wdone_done(op, op->post_status);
        ucp_request_free(req);
        return;
    }
    send_ack(src, rts.seq, cma::ACK_CTS, reinterpret_cast<uint64_t>(op->buffer));
    cma::ReadResult r;
    int err = 0;
    if (read_payload(op, Op::COPY_HEAD, &r, &err)) {
        return;  // comm_copy.cc calls head_read
    }
    head_read(op, r, err);
}

void Comm::head_read(Op *op, cma::ReadResult r, int err) {
    op->head = r;
    op->head_err = err;
    if (op->wdone_pending) {  // it came while the head was copied
        op->wdone_pending = false;
        wdone_done(op, op->wdone_st);
        return;
    }
    if (r == cma::ReadResult::PEER_GONE) {
        // No process, no writer: stop waiting (wdone_done reports it).
        ucp_request_cancel(ctx_->worker(), op->request);
    }
}

void Comm::wdone_done(Op *op, ucs_status_t st) {
    if (op->copy != Op::NO_COPY) {
        // The head is being copied outside the lock: keep the answer for
        // head_read. Its request is gone (ctl_recv_cb frees it): nothing
        // may cancel it now (RECV_READ).
        op->wdone_pending = true;
        op->wdone_st = st;
        op->stage = Op::RECV_READ;
        op->request = op;
        return;
    }
    const uint32_t src = op->entry.peer;
    const cma::Rts &rts = op->rts;
    if (st != UCS_OK) {  // cancelled: the sender failed or is gone
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    }
    const int32_t wdone = op->ack.status;
    if (wdone == cma::WDONE_CANCELLED) {
        P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u withdrew tensor %u (its send "
                "was cancelled)", id_, src, op->entry.tensor_id);
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    }
    if (wdone != cma::WDONE_OK && wdone != cma::WDONE_NOT_ALLOWED) {
        finish(op, P2P_ERR_TRANSPORT, 0);  // the sender gave up already
        return;
    }
    cma::ReadResult r = op->head;
    int err = op->head_err;
    if (r == cma::ReadResult::OK && wdone == cma::WDONE_NOT_ALLOWED) {
        // The sender may not write into this process: read its part too.
        if (read_payload(op, Op::COPY_REST, &r, &err)) {
            return;  // comm_copy.cc concludes it
        }
    }
    const cma::Rts rts_copy = rts;  // finish() recycles the op
    conclude_read(op, rts_copy, r, err);
}

void Comm::send_wdone(uint32_t peer, uint32_t seq, cma::WdoneStatus status) {
    // A peer that left (its goodbye) may still wait for it, on an orphaned
    // receive that holds its registration: its parked endpoint is open.
    const Peer &p = peers_[peer];
    ucp_ep_h ep = p.ep_error ? nullptr : p.ep != nullptr ? p.ep : p.parked_ep;
    if (ep == nullptr) {
        return;  // the peer is gone or its endpoint closed by force
    }
    cma::Ack w;
    w.status = status;
    w.seq = seq;
    w.addr = 0;
    ucs_status_t st = send_ctl(ep, make_tag(tag_base_, rank_, seq | cma::kWdoneBit,
                                            KIND_ACK), w);
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: split-copy report to rank %u failed: %s",
                id_, peer, ucs_status_string(st));
    }
}

void Comm::send_ack(uint32_t peer, uint32_t seq, int32_t status, uint64_t addr) {
    ucp_ep_h ep = nullptr;
    if (get_ep(peer, &ep) != P2P_OK) {
        return;  // the peer is gone: nobody waits for the answer
    }
    cma::Ack ack;
    ack.status = status;
    ack.seq = seq;
    ack.addr = addr;
    ucs_status_t st = send_ctl(ep, make_tag(tag_base_, rank_, seq, KIND_ACK), ack);
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: answer to rank %u's single-copy "
                "request failed: %s", id_, peer, ucs_status_string(st));
    }
}

bool Comm::post_ack_recv(Op *op) {
    void *req = post_ctl_recv(ctx_->worker(), op,
                              make_tag(tag_base_, op->entry.peer, op->seq, KIND_ACK), ack_cb);
    if (!UCS_PTR_IS_PTR(req)) {
        ack_done(op, UCS_PTR_STATUS(req) != UCS_OK ? UCS_PTR_STATUS(req)
                                                  : UCS_ERR_IO_ERROR);
        return false;
    }
    if (op->request == nullptr) link(op);
    op->request = req;
    if (op->done_in_post) {  // a stale answer with a reused seq: give up
        ack_done(op, UCS_ERR_IO_ERROR);
        ucp_request_free(req);
        return false;
    }
    return true;
}

void Comm::post_rts(Op *op, const PostItem &it, ucp_ep_h ep) {
    op->stage = Op::SEND_RTS;
    op->seq = cma::next_seq();
    if (!post_ack_recv(op)) {
        return;
    }
    // A shareable buffer is copied with memcpy through the receiver's
    // mapping, faster than either side's system call: no split then.
    const bool tcp = peers_[it.peer].tcp;
    op->split = (!tcp && it.length >= split_thresh_ && !peers_[it.peer].cma_write_off &&
                 op->mem->shm_fd < 0)
                    ? cma::split_offset(it.length) : 0;
    cma::Rts rts;
    rts.magic = cma::kRtsMagic;
    rts.seq = op->seq;
    rts.addr = reinterpret_cast<uint64_t>(it.buffer);
    rts.length = it.length;
    rts.split = op->split;
    rts.region_fd = tcp ? -1 : op->mem->shm_fd;  // another host cannot map it
    rts.reserved = 0;
    rts.region_ino = op->mem->shm_ino;
    rts.region_off = reinterpret_cast<uintptr_t>(it.buffer) - op->mem->base;
    rts.region_len = op->mem->length;
    cma::stamp_epoch(&rts, op->seq);
    if (tcp) {
        // Readable on our server until the send ends (report, orphan_done).
        ctx_->bulk()->offer(op->seq, it.buffer, it.length);
        op->offered = true;
    }
    ucs_status_t st = send_ctl(ep, tag_with_low(send_tag0_, it.tensor_id), rts);
    if (st != UCS_OK) {
        op->rts_status = st;
        op->split = 0;  // nobody got the request: nobody waits for a WDONE
        ucp_request_cancel(ctx_->worker(), op->request);  // ack_done reports st
    }
}

void Comm::on_cts(Op *op, uint64_t remote) {
    cma::ReadResult r;
    int err = 0;
    if (write_part(op, remote, &r, &err)) {
        return;  // comm_copy.cc calls tail_written
    }
    tail_written(op, r, err);
}

void Comm::tail_written(Op *op, cma::ReadResult r, int err) {
    const uint32_t peer = op->entry.peer;
    cma::WdoneStatus ws = cma::WDONE_OK;
    switch (r) {
    case cma::ReadResult::OK:
        break;
    case cma::ReadResult::CANCELLED:  // not written: the receiver is gone (write_tail)
        ws = cma::WDONE_CANCELLED;
        break;
    case cma::ReadResult::NOT_ALLOWED:
        if (!peers_[peer].cma_write_off) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: cannot write rank %u's memory (%s); "
                    "it reads whole messages from this process", id_, peer,
                    std::strerror(err));
        }
        peers_[peer].cma_write_off = true;
        ws = cma::WDONE_NOT_ALLOWED;
        break;
    case cma::ReadResult::PEER_GONE:
        cma::bump_epoch(op->seq);
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    case cma::ReadResult::FAILED:
        P2P_LOG(P2P_LOG_WARN, "comm %u: single-copy write of %llu bytes to rank "
                "%u failed: %s", id_,
                static_cast<unsigned long long>(op->length - op->split), peer,
                std::strerror(err));
        send_wdone(peer, op->seq, cma::WDONE_ERROR);
        cma::bump_epoch(op->seq);
        finish(op, P2P_ERR_TRANSPORT, 0);
        return;
    }
    if (peers_[peer].failed) {
        // It failed or left while we wrote (outside the lock: comm_copy.cc;
        // cancel_waits_from skipped us): no answer will come. Tell it what
        // we did (one that left still reads its parked endpoint) and end as
        // its failure ends a send waiting for an answer.
        send_wdone(peer, op->seq, ws);
        cma::bump_epoch(op->seq);
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    }
    // Listen for the final answer before the receiver can send it.
    if (!post_ack_recv(op)) {
        return;  // finished; ack_done told the receiver (WDONE CANCELLED)
    }
    op->stage = Op::SEND_SPLIT;
    send_wdone(peer, op->seq, ws);
}

void Comm::ack_done(Op *op, ucs_status_t st) {
    const uint32_t peer = op->entry.peer;
    if (st != UCS_OK) {
        // Cancelled (shutdown, peer failure) or the request failed: the
        // peer must not deliver this buffer from now on, and a receiver
        // waiting for our part of a split copy must stop waiting.
        cma::bump_epoch(op->seq);
        if (op->split != 0 && op->stage == Op::SEND_RTS) {
            send_wdone(peer, op->seq, cma::WDONE_CANCELLED);
        }
        complete(op, op->rts_status != UCS_OK ? op->rts_status : st, 0);
        return;
    }
    const cma::Ack ack = op->ack;  // a repost reuses op->ack
    if (ack.status == cma::ACK_CTS) {
        if (op->split == 0 || op->stage != Op::SEND_RTS) {
            P2P_LOG(P2P_LOG_ERROR, "comm %u: unexpected split-copy answer from "
                    "rank %u", id_, peer);
            cma::bump_epoch(op->seq);
            finish(op, P2P_ERR_TRANSPORT, 0);
            return;
        }
        on_cts(op, ack.addr);
        return;
    }
    switch (ack.status) {
    case cma::ACK_OK:
        complete(op, UCS_OK, op->length);
        return;
    case cma::ACK_TRUNCATED:
        finish(op, P2P_ERR_TRUNCATED, 0);
        return;
    case cma::ACK_FALLBACK:
        if (!peers_[peer].cma_off) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u cannot read this "
                    "process; sending to it through UCX from now on", id_, peer);
        }
        peers_[peer].cma_off = true;
        op->stage = Op::SEND_PUSH;
        repost_push(op);
        return;
    default:
        cma::bump_epoch(op->seq);
        finish(op, P2P_ERR_TRANSPORT, 0);
        return;
    }
}

void Comm::repost_push(Op *op) {
    const bool is_send = op->stage == Op::SEND_PUSH;
    ucp_ep_h ep = nullptr;
    // A peer already failed (or left) pushes nothing and receives nothing:
    // a receive posted now would wait for a failure report that came
    // already (a tcp read fails this way when its sender died).
    if (peers_[op->entry.peer].failed ||
        (is_send && (ep = peers_[op->entry.peer].ep) == nullptr)) {
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    }
    if (op->request == nullptr) {  // from post(): not in the in-flight list yet
        link(op);
    }
    op->request = op;  // placeholder until the new request exists
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMH;
    prm.user_data = op;
    prm.memh = op->mem->memh;
    op->posting = true;
    op->done_in_post = false;
    void *req;
    if (is_send) {
        prm.cb.send = send_cb;
        req = ucp_tag_send_nbx(ep, op->buffer, op->length,
                               make_tag(tag_base_, rank_, op->seq, KIND_PUSH), &prm);
    } else {
        prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        prm.cb.recv = recv_cb;
        req = ucp_tag_recv_nbx(ctx_->worker(), op->buffer, op->length,
                               make_tag(tag_base_, op->entry.peer, op->seq, KIND_PUSH),
                               ~static_cast<ucp_tag_t>(0), &prm);
    }
    op->posting = false;
    if (op->done_in_post) {
        if (UCS_PTR_IS_PTR(req)) ucp_request_free(req);
        complete(op, op->post_status, is_send ? op->length : op->post_bytes);
        return;
    }
    if (UCS_PTR_IS_PTR(req)) {
        op->request = req;
        return;
    }
    complete(op, UCS_PTR_STATUS(req), is_send ? op->length : 0);
}

void Comm::log_probe(uint32_t peer, size_t len, PathChooser::Path path) const {
    P2P_LOG(P2P_LOG_DEBUG, "comm %u: measuring %s for sends to rank %u of %zu bytes "
            "and their size class", id_,
            path == PathChooser::kUcx ? "ucx"
            : peers_[peer].tcp        ? "tcp bulk" : "single copy",
            peer, len);
}

void Comm::report_choice(const Op *op, bool ok) {
    PathChooser *ch = peers_[op->entry.peer].chooser.get();
    const auto path = static_cast<PathChooser::Path>(op->chosen - 1);
    double from = 0, to = 0;
    bool probed = false;
    if (ch == nullptr) return;
    const bool switched = ch->done(op->length, path, op->block_start_ns, op->block_bytes,
                                   now_ns(), ok, &from, &to, &probed);
    if (probed) {
        const bool single = ch->in_use(op->length) == PathChooser::kSingleCopy;
        const char *by = peers_[op->entry.peer].tcp ? "by tcp bulk" : "by single copy";
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: sends to rank %u of %zu bytes and their "
                "size class %s %s (%.2f GB/s against %.2f)", id_, op->entry.peer,
                op->length, switched ? "now go" : "still go", single ? by : "through ucx",
                switched ? to : from, switched ? from : to);
    }
}

} // namespace ucxp2p
