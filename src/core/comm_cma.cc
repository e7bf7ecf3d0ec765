/*
 * Comm's same-host single-copy protocol (see core/cma.h): the receiver's
 * handling of a request, the sender's handling of the answer, and the
 * UCX push both sides fall back to.
 */
#include "core/comm.h"
#include "core/log.h"

#include <algorithm>
#include <cstring>

namespace ucxp2p {

namespace {

/** The ACK of a single-copy send arrived (or its receive was cancelled). */
void ack_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *,
            void *user_data) {
    Op *op = static_cast<Op *>(user_data);
    if (op->posting) {
        op->done_in_post = true;
        op->post_status = st;
        return;
    }
    if (op->comm == nullptr) {
        if (st != UCS_OK) cma::bump_epoch(op->seq);
        ucp_request_free(request);
        delete op;
        return;
    }
    op->comm->ack_done(op, st);
    ucp_request_free(request);
}

/** Control messages (RTS, ACK) own a heap copy of their payload. */
template <class T>
ucs_status_t send_ctl(ucp_ep_h ep, uint64_t tag, const T &msg) {
    T *copy = new T(msg);
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.send = ctl_sent_cb<T>;
    prm.user_data = copy;
    void *req = ucp_tag_send_nbx(ep, copy, sizeof(T), tag, &prm);
    if (UCS_PTR_IS_PTR(req)) {
        return UCS_OK;  // the callback frees the copy
    }
    delete copy;
    return UCS_PTR_STATUS(req);
}


} // namespace

void Comm::recv_done(Op *op, ucs_status_t st, size_t bytes, uint64_t tag) {
    if (op->stage == Op::RECV_PUSH) {
        complete(op, st, bytes);
        return;
    }
    if (st == UCS_OK && tag_kind(tag) == KIND_RTS) {
        cma::Rts rts;
        std::memcpy(&rts, op->bounced ? op->bounce : op->buffer,
                    std::min(bytes, sizeof(rts)));
        if (bytes != sizeof(rts) || rts.magic != cma::kRtsMagic) {
            P2P_LOG(P2P_LOG_ERROR, "comm %u: malformed single-copy request "
                    "from rank %u (%zu bytes)", id_, op->entry.peer, bytes);
            finish(op, P2P_ERR_TRANSPORT, 0);
            return;
        }
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
    int err = 0;
    switch (cma::read(static_cast<pid_t>(peers_[src].pid), rts, op->buffer, &err)) {
    case cma::ReadResult::OK:
        send_ack(src, rts.seq, cma::ACK_OK);
        finish(op, P2P_OK, rts.length);
        return;
    case cma::ReadResult::CANCELLED:
        P2P_LOG(P2P_LOG_INFO, "comm %u: rank %u withdrew tensor %u while it "
                "was read (its send was cancelled)", id_, src, op->entry.tensor_id);
        finish(op, P2P_ERR_PEER_FAILURE, 0);
        return;
    case cma::ReadResult::NOT_ALLOWED:
        if (!peers_[src].cma_refused) {
            P2P_LOG(P2P_LOG_INFO, "comm %u: cannot read rank %u's memory (%s); "
                    "it sends through UCX instead", id_, src, std::strerror(err));
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

void Comm::send_ack(uint32_t peer, uint32_t seq, cma::AckStatus status) {
    ucp_ep_h ep = nullptr;
    if (get_ep(peer, &ep) != P2P_OK) {
        return;  // the peer is gone: nobody waits for the answer
    }
    cma::Ack ack;
    ack.status = status;
    ack.seq = seq;
    ucs_status_t st = send_ctl(ep, make_tag(id_, rank_, seq, KIND_ACK), ack);
    if (st != UCS_OK) {
        P2P_LOG(P2P_LOG_DEBUG, "comm %u: answer to rank %u's single-copy "
                "request failed: %s", id_, peer, ucs_status_string(st));
    }
}

void Comm::post_rts(Op *op, const PostItem &it, ucp_ep_h ep) {
    op->stage = Op::SEND_RTS;
    op->seq = cma::next_seq();
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    prm.cb.recv = ack_cb;
    prm.user_data = op;
    op->posting = true;
    void *req = ucp_tag_recv_nbx(ctx_->worker(), &op->ack, sizeof(op->ack),
                                 make_tag(id_, it.peer, op->seq, KIND_ACK),
                                 ~static_cast<ucp_tag_t>(0), &prm);
    op->posting = false;
    if (!UCS_PTR_IS_PTR(req)) {
        complete(op, UCS_PTR_STATUS(req), 0);
        return;
    }
    op->request = req;
    link(op);
    if (op->done_in_post) {  // a stale answer with a reused seq: give up
        ack_done(op, UCS_ERR_IO_ERROR);
        ucp_request_free(req);
        return;
    }
    cma::Rts rts;
    rts.magic = cma::kRtsMagic;
    rts.seq = op->seq;
    rts.addr = reinterpret_cast<uint64_t>(it.buffer);
    rts.length = it.length;
    cma::stamp_epoch(&rts, op->seq);
    ucs_status_t st = send_ctl(ep, make_tag(id_, rank_, it.tensor_id, KIND_RTS), rts);
    if (st != UCS_OK) {
        op->rts_status = st;
        ucp_request_cancel(ctx_->worker(), req);  // ack_done reports st
    }
}

void Comm::ack_done(Op *op, ucs_status_t st) {
    if (st != UCS_OK) {
        // Cancelled (shutdown, peer failure) or the request failed: the
        // peer must not deliver this buffer from now on.
        cma::bump_epoch(op->seq);
        complete(op, op->rts_status != UCS_OK ? op->rts_status : st, 0);
        return;
    }
    const uint32_t peer = op->entry.peer;
    switch (op->ack.status) {
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
        finish(op, P2P_ERR_TRANSPORT, 0);
        return;
    }
}

void Comm::repost_push(Op *op) {
    const bool is_send = op->stage == Op::SEND_PUSH;
    ucp_ep_h ep = nullptr;
    if (is_send && (ep = peers_[op->entry.peer].ep) == nullptr) {
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
                               make_tag(id_, rank_, op->seq, KIND_PUSH), &prm);
    } else {
        prm.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
        prm.cb.recv = recv_cb;
        req = ucp_tag_recv_nbx(ctx_->worker(), op->buffer, op->length,
                               make_tag(id_, op->entry.peer, op->seq, KIND_PUSH),
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

} // namespace ucxp2p
