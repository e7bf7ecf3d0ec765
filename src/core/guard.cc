/* The status of an exception caught at the C API boundary (core/guard.h). */
#include "core/guard.h"

#include "core/log.h"

#include <exception>
#include <new>

namespace ucxp2p {

p2p_status_t caught(const char *what) noexcept {
    try {
        throw;
    } catch (const std::bad_alloc &) {
        P2P_LOG(P2P_LOG_ERROR, "%s: out of memory", what);
        return P2P_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "%s: internal error: %s", what, e.what());
        return P2P_ERR_TRANSPORT;
    } catch (...) {
        P2P_LOG(P2P_LOG_ERROR, "%s: unknown internal error", what);
        return P2P_ERR_TRANSPORT;
    }
}

} // namespace ucxp2p
