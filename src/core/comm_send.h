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
 * Comm::send_imm, which the batches' sends try first (comm_post.cc).
 * api.cc and comm_post.cc include it.
 */
#ifndef UCXP2P_CORE_COMM_SEND_H
#define UCXP2P_CORE_COMM_SEND_H

#include "core/comm.h"

namespace ucxp2p {

inline bool Comm::send_imm(const PostItem &it, ucp_ep_h ep) {
    const Peer &p = peers_[it.peer];
    if (it.length > kImmediateMax || may_single_copy(p, it) || mimics_rts(it)) {
        return false;
    }
    ucp_request_param_t prm;
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    prm.memh = it.mem->memh;
    // FORCE_IMM_CMPL: done inside the call (UCS_OK), or nothing sent (no
    // resources, or an error the general path meets again and reports).
    return ucp_tag_send_nbx(ep, it.buffer, it.length,
                            make_tag(tag_base_, rank_, it.tensor_id), &prm) == nullptr;
}

__attribute__((always_inline)) inline p2p_status_t Comm::send_single(const PostItem &it) {
    bool kick = false;
    p2p_status_t st;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        ucp_ep_h ep = peers_[it.peer].ep;
        if (__builtin_expect(ep != nullptr && !shut_.load() && !it.mem->dead, 1)) {
            // Room for its completion first: it is queued once the message
            // is sent, when failing is too late (may throw: nothing sent).
            cq_[P2P_QUEUE_SEND].reserve(1);
            if (send_imm(it, ep)) {
                queue_done(P2P_QUEUE_SEND, it, it.length, /*counted=*/false);
                return P2P_OK;
            }
        }
        st = send_locked(it, &kick);
    }
    if (kick) {
        ctx_->progress().kick();
    }
    return st;
}

} // namespace ucxp2p

#endif
