/*
 * NIC choice for the herring shim. SMDDP users pick the NIC of each rank with
 * SMDATAPARALLEL_DEVICE_NAME (set per rank by a wrapper script). ucxp2p's
 * rail planner reads that variable (and P2P_RAILS / P2P_HCA); the shim hands
 * the resulting plan to UCX through its environment before the UCP context
 * is created, never overriding a UCX_* variable the user set.
 */
#include "herring_internal.h"

#include <ucxp2p/p2p_topo.h>

#include <cstdio>
#include <cstdlib>

namespace herring {

namespace {

/** setenv unless the user set the variable; logs what it did. */
void set_default(const char *name, const char *value) {
    const char *user = std::getenv(name);
    if (user != nullptr) {
        log(P2P_LOG_INFO, "rail plan: keeping %s=%s set by the user (plan: %s)", name, user,
            value);
        return;
    }
    if (setenv(name, value, 0) != 0) {
        log(P2P_LOG_WARN, "rail plan: setenv %s failed", name);
        return;
    }
    log(P2P_LOG_INFO, "rail plan: %s=%s", name, value);
}

struct TopoOwner {
    p2p_topo_h topo = nullptr;
    TopoOwner() = default;
    TopoOwner(const TopoOwner &) = delete;
    TopoOwner &operator=(const TopoOwner &) = delete;
    ~TopoOwner() {
        if (topo != nullptr) {
            p2p_topo_destroy(topo);
        }
    }
};

} // namespace

void apply_rail_plan(uint32_t local_rank, uint32_t local_size) {
    const char *smddp = std::getenv("SMDATAPARALLEL_DEVICE_NAME");
    TopoOwner owner;
    p2p_status_t st = p2p_topo_load(nullptr, &owner.topo);
    if (st != P2P_OK) {
        log(smddp != nullptr ? P2P_LOG_WARN : P2P_LOG_INFO,
            "rail plan: topology unavailable (%s); UCX picks devices itself%s",
            p2p_status_string(st),
            smddp != nullptr ? ", SMDATAPARALLEL_DEVICE_NAME not applied" : "");
        return;
    }
    p2p_rail_plan_info_t plan{};
    st = p2p_topo_plan_query(owner.topo, local_rank, local_size, &plan);
    if (st != P2P_OK) {
        log(P2P_LOG_WARN, "rail plan: local rank %u of %u: %s (SMDATAPARALLEL_DEVICE_NAME=%s); "
            "UCX picks devices itself", local_rank, local_size, p2p_status_string(st),
            smddp != nullptr ? smddp : "unset");
        return;
    }
    if (plan.num_rails == 0 || plan.devices[0] == '\0') {
        log(smddp != nullptr ? P2P_LOG_WARN : P2P_LOG_INFO,
            "rail plan: no rdma device for local rank %u%s%s", local_rank,
            smddp != nullptr ? "; SMDATAPARALLEL_DEVICE_NAME ignored: " : "",
            smddp != nullptr ? smddp : "");
        return;
    }
    set_default("UCX_NET_DEVICES", plan.devices);
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%u", plan.num_rails);
    set_default("UCX_MAX_RNDV_RAILS", buf);
    if (plan.gid_index >= 0) {
        std::snprintf(buf, sizeof(buf), "%d", plan.gid_index);
        set_default("UCX_IB_GID_INDEX", buf);
    }
}

} // namespace herring
