/*
 * PMIx bootstrap in a build without PMIx (configure did not find it): the
 * same two functions, so bootstrap selection needs no #ifdef.
 */
#include "wireup/pmix_bootstrap.h"

#include "core/log.h"

namespace ucxp2p {

bool pmix_bootstrap_launched() { return false; }

p2p_status_t pmix_bootstrap_create(std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    P2P_LOG(P2P_LOG_ERROR, "pmix bootstrap: this build has no PMIx support "
                           "(configure --with-pmix and libpmix-dev)");
    return P2P_ERR_UNSUPPORTED;
}

} // namespace ucxp2p
