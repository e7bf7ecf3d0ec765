/*
 * bootstrap_create: pick the implementation (P2P_BOOTSTRAP for AUTO) and
 * turn every failure into a status (nothing is thrown out of here).
 */
#include "wireup/bootstrap.h"

#include "core/config.h"
#include "core/log.h"
#include "wireup/pmix_bootstrap.h"

#include <cstring>
#include <exception>
#include <new>
#include <strings.h>

namespace ucxp2p {

namespace {

p2p_status_t resolve_auto(p2p_bootstrap_type_t *type) {
    std::string v = config_get("P2P_BOOTSTRAP");
    if (v.empty() || strcasecmp(v.c_str(), "auto") == 0) {
        // A PMIx launcher (srun --mpi=pmix, mpirun) first, then the
        // torchrun-style environment, else a single process.
        if (pmix_bootstrap_launched()) {
            *type = P2P_BOOTSTRAP_PMIX;
        } else {
            *type = tcp_bootstrap_env_present() ? P2P_BOOTSTRAP_TCP
                                                : P2P_BOOTSTRAP_SINGLE;
        }
    } else if (strcasecmp(v.c_str(), "tcp") == 0) {
        *type = P2P_BOOTSTRAP_TCP;
    } else if (strcasecmp(v.c_str(), "single") == 0) {
        *type = P2P_BOOTSTRAP_SINGLE;
    } else if (strcasecmp(v.c_str(), "pmix") == 0) {
        *type = P2P_BOOTSTRAP_PMIX;
    } else {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: P2P_BOOTSTRAP='%s' is not one of "
                "auto, tcp, single, pmix", v.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

p2p_status_t create(int raw_type, std::unique_ptr<Bootstrap> *out) {
    p2p_bootstrap_type_t type = P2P_BOOTSTRAP_AUTO;
    switch (raw_type) {
    case P2P_BOOTSTRAP_AUTO: {
        p2p_status_t st = resolve_auto(&type);
        if (st != P2P_OK) {
            return st;
        }
        break;
    }
    case P2P_BOOTSTRAP_TCP:
    case P2P_BOOTSTRAP_SINGLE:
    case P2P_BOOTSTRAP_PMIX:
        type = static_cast<p2p_bootstrap_type_t>(raw_type);
        break;
    default:
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: unknown type %d", raw_type);
        return P2P_ERR_INVALID_PARAM;
    }
    switch (type) {
    case P2P_BOOTSTRAP_TCP:
        return tcp_bootstrap_create(out);
    case P2P_BOOTSTRAP_SINGLE:
        *out = single_bootstrap_create();
        return P2P_OK;
    case P2P_BOOTSTRAP_PMIX:
    default:
        // P2P_ERR_UNSUPPORTED (logged) outside a PMIx launcher or in a
        // build without PMIx.
        return pmix_bootstrap_create(out);
    }
}

} // namespace

p2p_status_t bootstrap_create(int type, std::unique_ptr<Bootstrap> *out) {
    if (out == nullptr) {
        return P2P_ERR_INVALID_PARAM;
    }
    try {
        std::unique_ptr<Bootstrap> b;
        p2p_status_t st = create(type, &b);
        if (st == P2P_OK) {
            *out = std::move(b);
            P2P_LOG(P2P_LOG_DEBUG, "bootstrap: %s, rank %u of %u", (*out)->name(),
                    (*out)->rank(), (*out)->size());
        }
        return st;
    } catch (const std::bad_alloc &) {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: out of memory");
        return P2P_ERR_NO_MEMORY;
    } catch (const std::exception &e) {
        P2P_LOG(P2P_LOG_ERROR, "bootstrap: %s", e.what());
        return P2P_ERR_BOOTSTRAP;
    }
}

} // namespace ucxp2p
