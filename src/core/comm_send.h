/*
 * Comm::send_single: the per-message path of p2p_comm_send, inline in the
 * API call.
 *
 * An 8-byte message over shared memory costs UCX ~150 instructions to
 * send; what the library adds decides the message rate (docs/PERFORMANCE.md,
 * 2026-11-29 15:00: ~100 more instructions per send cost p2p_perftest 5%
 * of its rate; ~300 more cost ucx_perftest's own sender 28%). So the
 * common case -- a connected peer, a message UCX sends inside the call --
 * runs in the caller's frame, with no call but UCX's.
 * Anything else takes the general path (post_locked) under the same lock
 * hold. Only api.cc includes it.
 */
#ifndef UCXP2P_CORE_COMM_SEND_H
#define UCXP2P_CORE_COMM_SEND_H

#include "core/comm.h"

namespace ucxp2p {

__attribute__((always_inline)) inline p2p_status_t Comm::send_single(const PostItem &it) {
    bool kick = false;
    p2p_status_t st;
    {
        std::lock_guard<Mutex> lock(ctx_->worker_mu());
        const Peer &p = peers_[it.peer];
        if (__builtin_expect(it.length <= kImmediateMax && p.ep != nullptr && !shut_.load() &&
                                 !it.mem->dead && !may_single_copy(p, it),
                             1)) {
            // Room for its completion first: it is queued once the message
            // is sent, when failing is too late (may throw: nothing sent).
            CompletionQueue &q = cq_[P2P_QUEUE_SEND];
            q.reserve(1);
            ucp_request_param_t prm;
            prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
            prm.memh = it.mem->memh;
            // FORCE_IMM_CMPL: done inside the call (UCS_OK), or nothing
            // sent (no resources, or an error the general path meets again
            // and reports).
            if (ucp_tag_send_nbx(p.ep, it.buffer, it.length,
                                 make_tag(tag_base_, rank_, it.tensor_id), &prm) == nullptr) {
                q.push_ok(it.user_context, it.peer, it.tensor_id, it.length, /*counted=*/false);
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
