#include "core/status.h"

#include <ucxp2p/p2p.h>

#include <cstring>

namespace ucxp2p {

p2p_status_t status_from_ucs(ucs_status_t st) {
    switch (st) {
    case UCS_OK:                    return P2P_OK;
    case UCS_INPROGRESS:            return P2P_IN_PROGRESS;
    case UCS_ERR_NO_MEMORY:         return P2P_ERR_NO_MEMORY;
    case UCS_ERR_INVALID_PARAM:     return P2P_ERR_INVALID_PARAM;
    case UCS_ERR_MESSAGE_TRUNCATED: return P2P_ERR_TRUNCATED;
    case UCS_ERR_CANCELED:          return P2P_ERR_CANCELED;
    case UCS_ERR_TIMED_OUT:         return P2P_ERR_TIMEOUT;
    case UCS_ERR_UNSUPPORTED:       return P2P_ERR_UNSUPPORTED;
    case UCS_ERR_NO_DEVICE:         return P2P_ERR_NO_DEVICE;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_IO_ERROR:          return P2P_ERR_PEER_FAILURE;
    default:
        // Endpoint-level failures live in a reserved range in UCS.
        if (st <= UCS_ERR_FIRST_ENDPOINT_FAILURE &&
            st >= UCS_ERR_LAST_ENDPOINT_FAILURE) {
            return P2P_ERR_PEER_FAILURE;
        }
        return P2P_ERR_TRANSPORT;
    }
}

} // namespace ucxp2p

extern "C" const char *p2p_status_string(p2p_status_t status) {
    // A C caller may pass any int: switch on its bits, not on the C++ enum
    // (a value outside the enumerators' range is undefined as the enum).
    static_assert(sizeof(p2p_status_t) == sizeof(int), "the C ABI passes an int");
    int code;
    std::memcpy(&code, &status, sizeof(code));
    switch (code) {
    case P2P_OK:                 return "success";
    case P2P_IN_PROGRESS:        return "operation in progress";
    case P2P_ERR_INVALID_PARAM:  return "invalid parameter";
    case P2P_ERR_INVALID_HANDLE: return "invalid handle (not created, destroyed or finalized)";
    case P2P_ERR_NO_MEMORY:      return "out of memory";
    case P2P_ERR_NOT_REGISTERED: return "buffer not inside the given memory registration";
    case P2P_ERR_BAD_RANK:       return "peer rank out of range";
    case P2P_ERR_TRUNCATED:      return "message truncated: longer than the receive buffer";
    case P2P_ERR_PEER_FAILURE:   return "peer failed or unreachable";
    case P2P_ERR_CANCELED:       return "operation canceled (shutdown or cancel_recv)";
    case P2P_ERR_TIMEOUT:        return "timed out";
    case P2P_ERR_BUSY:           return "resource busy";
    case P2P_ERR_SHUTDOWN:       return "communicator shut down";
    case P2P_ERR_BOOTSTRAP:      return "bootstrap (wireup) failed";
    case P2P_ERR_UNSUPPORTED:    return "unsupported";
    case P2P_ERR_TRANSPORT:      return "transport (UCX) error";
    case P2P_ERR_NO_DEVICE:      return "no usable device or transport";
    case P2P_ERR_INTERRUPTED:    return "wait interrupted by p2p_comm_signal";
    }
    return "unknown status";
}

extern "C" const char *p2p_version(void) { return PACKAGE_VERSION; }
