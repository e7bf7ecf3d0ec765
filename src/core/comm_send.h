/*
 * Comm::send_single: the per-message path of p2p_comm_send, inline in the
 * API call.
 *
 * An 8-byte message over shared memory costs UCX ~150 instructions to
 * send; what the library adds decides the message rate (docs/PERFORMANCE.md,
 * 2026-11-29 15:00: ~100 more instructions per send cost p2p_perftest 5%
 * of its rate; ~300 more cost ucx_perftest's own sender 28%). So the
 * common case -- a connected peer, a message UCX sends inside the call --
 * runs in the caller's frame, with no call but UCX's. Anything else takes
 * the general path (post_locked) under the same lock hold. Also here:
 * Comm::send_try, which the batches' sends try first (comm_post.cc).
 * api.cc and comm_post.cc include it.
 */
#ifndef UCXP2P_CORE_COMM_SEND_H
#define UCXP2P_CORE_COMM_SEND_H

#include "core/comm.h"

namespace ucxp2p {

__attribute__((always_inline)) inline Comm::Tried
Comm::send_try(const PostItem &it, ucp_ep_h ep, Op *op, bool accounted, bool *kick) {
    const Peer &p = peers_[it.peer];
    if (it.length > kImmediateMax || may_single_copy(p, it) || mimics_rts(it)) {
        return Tried::kNotSent;
    }
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_MEMH;
    prm.cb.send = send_cb;
    prm.user_data = op;
    prm.memh = it.mem->memh;
    op->posting = true;
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep, it.buffer, it.length,
                                          tag_with_low(send_tag0_, it.tensor_id), &prm);
    op->posting = false;
    if (__builtin_expect(!op->done_in_post, 1)) {
        if (r == nullptr) return Tried::kDone;
        if (UCS_PTR_IS_ERR(r)) return Tried::kNotSent;  // post_one meets it again
    }
    adopt_send(op, it, r, accounted, kick);
    return Tried::kPosted;
}

__attribute__((always_inline)) inline p2p_status_t Comm::send_single(const PostItem &it) {
    bool kick = false;
    p2p_status_t st = P2P_OK;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        ucp_ep_h ep = peers_[it.peer].ep;
        Tried t = Tried::kNotSent;
        if (__builtin_expect(ep != nullptr && !shut_.load() && !it.mem->dead, 1)) {
            // Room for its completion and a record first: failing is too
            // late once the message is sent (may throw: nothing sent).
            cq_[P2P_QUEUE_SEND].reserve(1);
            if (spare_ == nullptr) spare_ = alloc_op();
            t = send_try(it, ep, spare_, /*accounted=*/false, &kick);
            if (t == Tried::kDone) {
                queue_done(P2P_QUEUE_SEND, it, it.length, /*counted=*/false);
                return P2P_OK;
            }
        }
        if (t == Tried::kPosted) {
            spare_ = nullptr;  // the request's record now
        } else {
            st = send_locked(it, &kick);
        }
    }
    if (kick) {
        ctx_->progress().kick();
    }
    return st;
}

} // namespace ucxp2p

#endif
