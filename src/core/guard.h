/*
 * The exception barrier of the C API: no C++ exception crosses an extern "C"
 * entry point. Used by every public p2p_* function (core, topo, info).
 */
#ifndef UCXP2P_CORE_GUARD_H
#define UCXP2P_CORE_GUARD_H

#include <ucxp2p/p2p.h>

namespace ucxp2p {

/**
 * The status for the exception being handled (call only from a catch):
 * std::bad_alloc -> P2P_ERR_NO_MEMORY, anything else -> P2P_ERR_TRANSPORT
 * (an internal error). Logged at error level, prefixed with `what`.
 */
p2p_status_t caught(const char *what) noexcept;

/** f() with every exception turned into its status by caught(). The
 *  per-message calls (post_single, p2p_comm_poll) write the try/catch
 *  themselves instead: a lambda capturing their arguments costs ~45
 *  instructions of copying per call. */
template <class F> p2p_status_t guarded(const char *what, F &&f) noexcept {
    try {
        return f();
    } catch (...) {
        return caught(what);
    }
}

} // namespace ucxp2p

#endif
