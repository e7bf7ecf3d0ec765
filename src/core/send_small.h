/*
 * Small control messages (ACK, WDONE, RTS, hello, goodbye) sent from code
 * that runs inside UCX callbacks, where nothing may throw or block.
 */
#ifndef UCXP2P_CORE_SEND_SMALL_H
#define UCXP2P_CORE_SEND_SMALL_H

#include <ucp/api/ucp.h>

#include <new>

namespace ucxp2p {

/** Send callback of a control message whose payload is a heap copy of a T
 *  (user_data): frees both. */
template <class T>
void ctl_sent_cb(void *request, ucs_status_t, void *user_data) {
    delete static_cast<T *>(user_data);
    ucp_request_free(request);
}

/**
 * Send a small control message (see above) from code that
 * runs inside UCX callbacks, where nothing may throw. send(buffer, prm)
 * posts it (ucp_tag_send_nbx or ucp_am_send_nbx). First from msg itself
 * with UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL (done inside the call, so msg need
 * not outlive it: the usual case, no allocation); else from a heap copy the
 * send callback frees. UCS_ERR_NO_MEMORY when that copy cannot be made.
 */
template <class T, class Send>
ucs_status_t send_small(const T &msg, Send send) noexcept {
    ucp_request_param_t prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    void *req = send(&msg, &prm);
    if (req == nullptr) return UCS_OK;
    if (UCS_PTR_IS_PTR(req)) {
        // The flag rules this out (UCX returns UCS_OK or a status), and a
        // request would still read msg after we return: never seen.
        ucp_request_free(req);
        return UCS_ERR_IO_ERROR;
    }
    if (UCS_PTR_STATUS(req) != UCS_ERR_NO_RESOURCE) return UCS_PTR_STATUS(req);
    T *copy = new (std::nothrow) T(msg);
    if (copy == nullptr) return UCS_ERR_NO_MEMORY;
    prm = {};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.send = ctl_sent_cb<T>;
    prm.user_data = copy;
    req = send(copy, &prm);
    if (UCS_PTR_IS_PTR(req)) return UCS_OK;  // the callback frees the copy
    delete copy;
    return UCS_PTR_STATUS(req);
}

} // namespace ucxp2p

#endif
