/* The public p2p_topo_* / p2p_roce_print API over the topo internals. */
#include "ucxp2p_config.h"

#include <ucxp2p/p2p_topo.h>

#include "core/guard.h"
#include "core/fork_mutex.h"
#include "core/log.h"
#include "topo/rail_plan.h"
#include "topo/roce.h"
#include "topo/topology.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

struct p2p_topo {
    std::unique_ptr<ucxp2p::topo::Topology> topo;
    std::string sysfs_root;
};

namespace {

using namespace ucxp2p::topo;

// Live handles, so a destroyed or made-up handle gets INVALID_HANDLE.
// Held across fork() (a child may use the topo API); never destroyed.
ucxp2p::ForkMutex &g_mutex = *new ucxp2p::ForkMutex();
std::set<const p2p_topo *> &registry() {
    static std::set<const p2p_topo *> handles;
    return handles;
}

bool valid(const p2p_topo *t) {
    std::lock_guard<ucxp2p::ForkMutex> lock(g_mutex);
    return t != nullptr && registry().count(t) != 0;
}

/** The entry points that take a handle and a pointer argument: f() inside
 *  the exception barrier once the handle is live (else INVALID_HANDLE) and
 *  arg non-NULL (else INVALID_PARAM). */
template <class F>
p2p_status_t with_topo(const char *what, const p2p_topo *t, const void *arg, F &&f) {
    return ucxp2p::guarded(what, [&]() -> p2p_status_t {
        if (!valid(t)) {
            return P2P_ERR_INVALID_HANDLE;
        }
        if (arg == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        return f();
    });
}

p2p_status_t make_plan(p2p_topo_h t, uint32_t local_rank, uint32_t local_size,
                       RailPlan *plan) {
    PlanInput in = PlanInput::from_environment(local_rank, local_size);
    in.sysfs_root = t->sysfs_root;
    Topology::Binding bind = t->topo->binding();
    in.binding_numa = bind.numa;
    in.binding_slot = bind.slot;
    p2p_status_t st = plan_rails(t->topo->machine(), in, plan);
    if (st == P2P_OK) {
        // As a context made with this UCX would apply it.
        unsigned major = 0, minor = 0, release = 0;
        ucp_get_version(&major, &minor, &release);
        apply_ucx_limits(t->topo->machine(), major, minor, plan);
    }
    return st;
}

void print_pci(FILE *s, const PciDevice &p) {
    std::fprintf(s, " [pci %s, numa %d]", p.busid.empty() ? "?" : p.busid.c_str(),
                 p.numa);
}

} // namespace

extern "C" {

p2p_status_t p2p_topo_load(const char *xml_path, p2p_topo_h *topo_p) {
    return ucxp2p::guarded("topo load", [&]() -> p2p_status_t {
        if (topo_p == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        std::string path = xml_path != nullptr ? xml_path : "";
        auto t = std::make_unique<p2p_topo>();
        p2p_status_t st = Topology::load(path, &t->topo);
        if (st != P2P_OK) {
            return st;
        }
        t->sysfs_root = path.empty() ? kDefaultSysfsRoot : "";
        {
            std::lock_guard<ucxp2p::ForkMutex> lock(g_mutex);
            registry().insert(t.get());
        }
        *topo_p = t.release();
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_destroy(p2p_topo_h topo) {
    return ucxp2p::guarded("topo destroy", [&]() -> p2p_status_t {
        {
            std::lock_guard<ucxp2p::ForkMutex> lock(g_mutex);
            if (topo == nullptr || registry().erase(topo) == 0) {
                return P2P_ERR_INVALID_HANDLE;
            }
        }
        delete topo;
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_set_sysfs(p2p_topo_h topo, const char *sysfs_root) {
    return ucxp2p::guarded("topo set_sysfs", [&]() -> p2p_status_t {
        if (!valid(topo)) {
            return P2P_ERR_INVALID_HANDLE;
        }
        topo->sysfs_root = sysfs_root != nullptr ? sysfs_root : "";
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_query(p2p_topo_h topo, p2p_topo_info_t *info_p) {
    return with_topo("topo query", topo, info_p, [&]() -> p2p_status_t {
        const Machine &m = topo->topo->machine();
        p2p_topo_info_t info{};
        info.num_numa_nodes = static_cast<uint32_t>(m.numa_nodes.size());
        info.num_gpus = static_cast<uint32_t>(m.gpus.size());
        info.num_nics = static_cast<uint32_t>(m.nics.size());
        for (const Nic &n : m.nics) {
            info.num_efa_nics += n.kind == NicKind::EFA ? 1 : 0;
        }
        *info_p = info;
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_print(p2p_topo_h topo, FILE *s) {
    return with_topo("topo print", topo, s, [&]() -> p2p_status_t {
        const Machine &m = topo->topo->machine();
        std::fprintf(s, "topology: %s\n  numa nodes: %zu (", m.source.c_str(),
                     m.numa_nodes.size());
        for (size_t i = 0; i < m.numa_nodes.size(); ++i) {
            std::fprintf(s, "%s%d", i == 0 ? "" : ",", m.numa_nodes[i]);
        }
        std::fprintf(s, ")\n  gpus: %zu\n", m.gpus.size());
        for (size_t i = 0; i < m.gpus.size(); ++i) {
            std::fprintf(s, "    gpu %zu: %s", i, m.gpus[i].name.c_str());
            print_pci(s, m.gpus[i].pci);
            std::fprintf(s, "\n");
        }
        std::fprintf(s, "  rdma nics: %zu%s\n", m.nics.size(),
                     m.nics.empty() ? " (no rdma devices)" : "");
        for (const Nic &n : m.nics) {
            std::fprintf(s, "    %s (%s)", n.name.c_str(), nic_kind_name(n.kind));
            print_pci(s, n.pci);
            for (const std::string &nd : n.netdevs) {
                std::fprintf(s, " netdev %s", nd.c_str());
            }
            std::fprintf(s, "\n");
        }
        std::fprintf(s, "  network interfaces: %zu\n", m.netifs.size());
        for (const NetIf &n : m.netifs) {
            std::fprintf(s, "    %s", n.name.c_str());
            print_pci(s, n.pci);
            std::fprintf(s, "\n");
        }
        unsigned major = 0, minor = 0, release = 0;
        ucp_get_version(&major, &minor, &release);
        std::string warn = efa_ucx_warning(m, major, minor);
        if (!warn.empty()) {
            std::fprintf(s, "  WARNING: %s\n", warn.c_str());
        }
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_plan_query(p2p_topo_h topo, uint32_t local_rank,
                                 uint32_t local_size,
                                 p2p_rail_plan_info_t *info_p) {
    return with_topo("topo plan query", topo, info_p, [&]() -> p2p_status_t {
        RailPlan plan;
        p2p_status_t st = make_plan(topo, local_rank, local_size, &plan);
        if (st != P2P_OK) {
            return st;
        }
        p2p_rail_plan_info_t info{};
        info.num_rails = static_cast<uint32_t>(plan.nics.size());
        info.numa_node = plan.numa;
        info.gpu = plan.gpu;
        info.gid_index = plan.gid.index;
        std::string devs;
        for (const PlannedNic &n : plan.nics) {
            devs += (devs.empty() ? "" : ",") + n.ucx_name();
        }
        if (devs.size() >= sizeof(info.devices)) {
            P2P_LOG(P2P_LOG_ERROR, "topo plan query: device list of %zu chars "
                    "does not fit devices[%zu]: %s", devs.size(),
                    sizeof(info.devices), devs.c_str());
            return P2P_ERR_NO_MEMORY;
        }
        std::memcpy(info.devices, devs.c_str(), devs.size() + 1);
        *info_p = info;
        return P2P_OK;
    });
}

p2p_status_t p2p_topo_plan_print(p2p_topo_h topo, uint32_t local_rank,
                                 uint32_t local_size, FILE *s) {
    return with_topo("topo plan print", topo, s, [&]() -> p2p_status_t {
        RailPlan plan;
        p2p_status_t st = make_plan(topo, local_rank, local_size, &plan);
        if (st != P2P_OK) {
            return st;
        }
        std::fputs(rail_plan_describe(plan).c_str(), s);
        return P2P_OK;
    });
}

p2p_status_t p2p_roce_print(const char *sysfs_root, FILE *s) {
    return ucxp2p::guarded("roce print", [&]() -> p2p_status_t {
        if (s == nullptr) {
            return P2P_ERR_INVALID_PARAM;
        }
        std::string root = sysfs_root != nullptr ? sysfs_root : kDefaultSysfsRoot;
        std::vector<std::string> devs = roce_list_devices(root);
        std::fprintf(s, "rdma devices in %s: %s\n", root.c_str(),
                     devs.empty() ? "no rdma devices" : "");
        for (const std::string &d : devs) {
            std::vector<unsigned> ports = roce_list_ports(root, d);
            if (ports.empty()) {
                std::fprintf(s, "  %s: no ports\n", d.c_str());
            }
            for (unsigned p : ports) {
                std::string ll = roce_link_layer(root, d, p);
                std::fprintf(s, "  %s:%u link %s, %s", d.c_str(), p,
                             ll.empty() ? "unknown" : ll.c_str(),
                             roce_port_active(root, d, p) ? "active" : "down");
                if (ll == "Ethernet") {
                    GidChoice c;
                    if (roce_detect_gid(root, d, p, "", &c) == P2P_OK) {
                        std::fprintf(s, ", gid index %d (%s)", c.index,
                                     c.reason.c_str());
                    } else {
                        std::fprintf(s, ", no usable roce gid");
                    }
                }
                std::fprintf(s, "\n");
            }
        }
        return P2P_OK;
    });
}

} // extern "C"
