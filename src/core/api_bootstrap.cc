/*
 * The C entry points of bootstraps: create, destroy, query and barrier.
 */
#include "core/api_handles.h"
#include "core/guard.h"
#include "core/log.h"

#include <cstring>

using namespace ucxp2p;
using namespace ucxp2p::api;

extern "C" {

p2p_status_t p2p_bootstrap_create(p2p_bootstrap_type_t type, p2p_bootstrap_h *bootstrap_p) {
    return guarded("bootstrap", [&]() -> p2p_status_t {
        if (bootstrap_p == nullptr) return P2P_ERR_INVALID_PARAM;
        // A C caller may pass any int: read its bits (loading an
        // out-of-range value as the C++ enum type is undefined).
        int raw_type;
        std::memcpy(&raw_type, &type, sizeof(raw_type));
        std::unique_ptr<Bootstrap> bs;
        p2p_status_t st = bootstrap_create(raw_type, &bs);
        if (st != P2P_OK) return st;
        log_set_rank(static_cast<int>(bs->rank()));
        *bootstrap_p = bootstrap_handle(std::move(bs));
        return *bootstrap_p != nullptr ? P2P_OK : P2P_ERR_NO_MEMORY;
    });
}

p2p_status_t p2p_bootstrap_destroy(p2p_bootstrap_h bootstrap) {
    return guarded("bootstrap", [&]() -> p2p_status_t {
        Registry<BootstrapEntry>::Ref e = g_bootstraps.remove(handle_id(bootstrap));
        if (!e) return P2P_ERR_INVALID_HANDLE;
        std::lock_guard<std::mutex> lock(e->mu);  // wait for a call in progress
        e->bs.reset();
        return P2P_OK;
    });
}

p2p_status_t p2p_bootstrap_query(p2p_bootstrap_h bootstrap, p2p_bootstrap_info_t *info_p) {
    return guarded("bootstrap", [&]() -> p2p_status_t {
        Registry<BootstrapEntry>::Ref e = g_bootstraps.get(handle_id(bootstrap));
        if (!e) return P2P_ERR_INVALID_HANDLE;
        if (info_p == nullptr) return P2P_ERR_INVALID_PARAM;
        *info_p = e->info;
        return P2P_OK;
    });
}

p2p_status_t p2p_bootstrap_barrier(p2p_bootstrap_h bootstrap) {
    return guarded("bootstrap", [&]() -> p2p_status_t {
        Registry<BootstrapEntry>::Ref e = g_bootstraps.get(handle_id(bootstrap));
        if (!e) return P2P_ERR_INVALID_HANDLE;
        std::lock_guard<std::mutex> lock(e->mu);
        if (!e->bs) return P2P_ERR_INVALID_HANDLE;
        return e->bs->barrier();
    });
}

} // extern "C"
