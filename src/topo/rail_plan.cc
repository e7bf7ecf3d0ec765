#include "topo/rail_plan.h"

#include "core/config.h"
#include "core/log.h"
#include "core/ucx_tls.h"
#include "core/ucx_user.h"
#include "topo/dir_names.h"
#include "topo/gpu_visible.h"
#include "topo/fabric_choice.h"
#include "topo/rail_auto.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>


namespace ucxp2p {
namespace topo {

namespace {

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) {
        if (!cur.empty()) {
            out.push_back(cur);
        }
    }
    return out;
}

bool parse_count(const std::string &s, unsigned long max, unsigned long *out) {
    if (s.empty() || s.size() > 6 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return false;
    }
    *out = std::strtoul(s.c_str(), nullptr, 10);
    return *out <= max;
}

/** name[:port] -> (name, port or 0); false when the port is malformed. */
bool split_port(const std::string &entry, std::string *name, unsigned *port) {
    size_t colon = entry.find(':');
    *name = entry.substr(0, colon);
    *port = 0;
    if (colon == std::string::npos) {
        return !name->empty();
    }
    unsigned long p;
    if (!parse_count(entry.substr(colon + 1), 255, &p) || p == 0) {
        return false;
    }
    *port = static_cast<unsigned>(p);
    return !name->empty();
}

/** Resolve a list of device names (name[:port]) against the known NICs. */
p2p_status_t resolve_names(const std::vector<Nic> &all, const std::string &list,
                           const char *var, std::vector<PlannedNic> *out,
                           const std::vector<std::string> &netdevs = {}) {
    for (const std::string &e : split(list, ',')) {
        std::string name;
        unsigned port;
        if (!split_port(e, &name, &port)) {
            P2P_LOG(P2P_LOG_ERROR, "rail plan: %s entry '%s' is not name[:port]",
                    var, e.c_str());
            return P2P_ERR_INVALID_PARAM;
        }
        auto it = std::find_if(all.begin(), all.end(),
                               [&](const Nic &n) { return n.name == name; });
        if (it == all.end() && port == 0 &&
            std::find(netdevs.begin(), netdevs.end(), name) != netdevs.end()) {
            PlannedNic tcp;
            tcp.nic.name = name;
            tcp.tcp = true;
            out->push_back(tcp);
            continue;
        }
        if (it == all.end()) {
            std::string known = all.empty() ? "none" : "";
            for (const Nic &n : all) {
                known += (known.empty() ? "" : ",") + n.name;
            }
            P2P_LOG(P2P_LOG_ERROR,
                    "rail plan: %s names '%s', which is not an rdma device here "
                    "(known: %s)", var, name.c_str(), known.c_str());
            return P2P_ERR_INVALID_PARAM;
        }
        out->push_back(PlannedNic{*it, port == 0 ? 1u : port, false, port != 0});
    }
    if (out->empty()) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: %s='%s' names no device", var, list.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    return P2P_OK;
}

void set_ucx(const PlanInput &in, RailPlan *plan, const std::string &name,
             const std::string &value) {
    const std::string *user = in.user_ucx_value(name);
    if (user != nullptr) {
        if (*user != value) {
            plan->notes.push_back("kept " + in.user_ucx_name(name) + "=" + *user + " " +
                                  in.user_ucx_origin(name) + " (plan wanted " + value + ")");
        }
        return;
    }
    plan->ucx_settings.emplace_back(name, value);
}

struct RoceRail {
    std::string name;   // mlx5_0:1
    GidChoice gid;
    bool found;         // gid holds a usable index
};

/** The plan's GID index: UCX_IB_GID_INDEX is one for every device, so
 *  only an index all RoCE rails agree on. Otherwise none: UCX then picks
 *  each device's GID itself, in the order detection uses. */
void choose_gid(const std::vector<RoceRail> &roce, const std::string &range,
                RailPlan *plan) {
    bool agree = !roce.empty();
    std::string each;
    for (const RoceRail &r : roce) {
        agree = agree && r.found && r.gid.index == roce.front().gid.index;
        each += (each.empty() ? "" : ", ") + r.name + ": " +
                (r.found ? std::to_string(r.gid.index) : std::string("none"));
        if (!r.found) {
            plan->notes.push_back("roce " + r.name + ": no usable gid found" +
                                  (range.empty() ? "" : " in P2P_IB_ADDR_RANGE=" + range) +
                                  "; UCX keeps its default");
        }
    }
    if (agree) {
        plan->gid = roce.front().gid;
        plan->gid.reason = roce.front().name + ": " + roce.front().gid.reason;
    } else if (roce.size() > 1 &&
               std::any_of(roce.begin(), roce.end(),
                           [](const RoceRail &r) { return r.found; })) {
        plan->notes.push_back("roce rails differ in gid index (" + each +
                              "); UCX_IB_GID_INDEX left unset: UCX picks each "
                              "device's gid itself");
    }
}

/** UCX_IB_GID_INDEX from the plan's index, unless the user chose GIDs
 *  another UCX way: a per-transport GID_INDEX (UCX_RC_MLX5_GID_INDEX), or
 *  a RoCE subnet, which UCX >= 1.18 refuses together with a GID index. */
void set_gid_index(const PlanInput &in, RailPlan *plan) {
    const std::string index = std::to_string(plan->gid.index);
    if (in.user_ucx_value("UCX_IB_GID_INDEX") == nullptr) {
        for (const auto &kv : in.user_ucx) {
            const std::string &n = kv.first;
            const std::string suffix = "GID_INDEX";
            bool gid_index = n.size() >= suffix.size() &&
                             n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
            bool subnet = n.find("ROCE_SUBNET") != std::string::npos;
            if (gid_index || subnet) {
                plan->notes.push_back(
                    "UCX_IB_GID_INDEX=" + index + " not set: " + n + "=" + kv.second + " " +
                    in.user_ucx_origin(n) + " chooses the gids" +
                    (subnet ? " (UCX >= 1.18 refuses UCX_IB_GID_INDEX with a roce subnet)"
                            : ""));
                return;
            }
        }
    }
    set_ucx(in, plan, "UCX_IB_GID_INDEX", index);
}

/** The rail of p with the index the user gave (P2P_IB_GID_INDEX=N). */
RoceRail given_index(const PlannedNic &p, unsigned long gid_override) {
    RoceRail r{p.ucx_name(), GidChoice{}, true};
    r.gid.index = static_cast<int>(gid_override);
    r.gid.reason = "P2P_IB_GID_INDEX=" + std::to_string(gid_override);
    return r;
}

/** A non-EFA rdma rail whose link layer sysfs does not show (a port
 *  directory without link_layer, or a preview without --sysfs): the index
 *  the user gave (P2P_IB_GID_INDEX=N) is still applied, as it would be to
 *  a RoCE port, and a note says so; in auto mode nothing can be detected. */
void unknown_link_layer(const PlannedNic &p, unsigned long gid_override, bool gid_auto,
                        std::vector<RoceRail> *roce, RailPlan *plan) {
    if (gid_auto || p.nic.kind == NicKind::EFA) {
        return;
    }
    plan->notes.push_back(p.ucx_name() + ": link layer unknown (not in sysfs); P2P_IB_GID_INDEX=" +
                          std::to_string(gid_override) + " applied as given");
    roce->push_back(given_index(p, gid_override));
}

/** Ports and RoCE GID from sysfs for the planned NICs. */
void apply_sysfs(const PlanInput &in, unsigned long gid_override, bool gid_auto,
                 const AddrRange *range, RailPlan *plan) {
    std::vector<RoceRail> roce;
    for (PlannedNic &p : plan->nics) {
        if (p.tcp) {
            continue;
        }
        std::vector<unsigned> ports = roce_list_ports(in.sysfs_root, p.nic.name);
        if (ports.empty()) {
            unknown_link_layer(p, gid_override, gid_auto, &roce, plan);
            continue;
        }
        bool exists = std::find(ports.begin(), ports.end(), p.port) != ports.end();
        if (exists && p.port_named) {
            // UCX is given this port: the GID must be this port's too.
            if (!roce_port_active(in.sysfs_root, p.nic.name, p.port)) {
                plan->notes.push_back(p.ucx_name() + " is not active; kept as named");
            }
        } else if (!exists || !roce_port_active(in.sysfs_root, p.nic.name, p.port)) {
            auto act = std::find_if(ports.begin(), ports.end(), [&](unsigned q) {
                return roce_port_active(in.sysfs_root, p.nic.name, q);
            });
            unsigned was = p.port;
            p.port = act != ports.end() ? *act : ports.front();
            if (p.port_named) {
                plan->notes.push_back(p.nic.name + " has no port " + std::to_string(was) +
                                      "; using port " + std::to_string(p.port));
            }
        }
        const std::string link = roce_link_layer(in.sysfs_root, p.nic.name, p.port);
        if (link.empty()) {
            unknown_link_layer(p, gid_override, gid_auto, &roce, plan);
        }
        if (link != "Ethernet") {
            continue;  // InfiniBand: no RoCE GID to choose
        }
        if (std::any_of(roce.begin(), roce.end(),
                        [&](const RoceRail &q) { return q.name == p.ucx_name(); })) {
            continue;  // named twice: drop_repeated makes it one rail
        }
        if (!gid_auto) {
            roce.push_back(given_index(p, gid_override));
            continue;
        }
        RoceRail r{p.ucx_name(), GidChoice{}, true};
        r.found = roce_detect_gid(in.sysfs_root, p.nic.name, p.port, "", &r.gid, range) ==
                  P2P_OK;
        roce.push_back(std::move(r));
    }
    choose_gid(roce, range != nullptr ? range->text : std::string(), plan);
}

/** A device (and port) named twice -- "mlx5_0,mlx5_0:1", or two entries
 *  sysfs moved to the same active port -- is one rail, not two lanes on
 *  one port. */
void drop_repeated(RailPlan *plan) {
    std::vector<PlannedNic> kept;
    std::vector<std::string> noted;
    for (PlannedNic &p : plan->nics) {
        const std::string name = p.ucx_name();
        if (std::none_of(kept.begin(), kept.end(),
                         [&](const PlannedNic &k) { return k.ucx_name() == name; })) {
            kept.push_back(std::move(p));
        } else if (std::find(noted.begin(), noted.end(), name) == noted.end()) {
            noted.push_back(name);
            plan->notes.push_back(name + " named more than once: one rail");
        }
    }
    plan->nics = std::move(kept);
}

/**
 * No rdma rail, and UCX_TLS leaves UCX network transports only (tcp): let
 * rendezvous data use as many lanes as UCX would give it without error
 * handling. UCX stripes rendezvous over up to UCX_MAX_RNDV_RAILS devices
 * through zero-copy RMA lanes, but the peer error handling every ucxp2p
 * endpoint has drops the RMA lanes of memory domains that cannot
 * invalidate (tcp), which leaves rendezvous to the active-message
 * bandwidth lanes: UCX_MAX_EAGER_RAILS of them, 1 by default. Not when
 * shared memory is allowed: a same-host endpoint would then stripe over a
 * shared-memory and a tcp lane together (64 KiB: 12x slower, measured).
 */
void network_lanes(const PlanInput &in, const UcxTls &tls, RailPlan *plan) {
    const std::string *tls_value = in.user_ucx_value("UCX_TLS");
    if (tls_value == nullptr || tls.allows_shm_am()) {
        return;
    }
    const std::string *rndv = in.user_ucx_value("UCX_MAX_RNDV_RAILS");
    std::string lanes = rndv != nullptr ? *rndv : kUcxDefaultRndvRails;
    set_ucx(in, plan, "UCX_MAX_EAGER_RAILS", lanes);
    if (in.user_ucx_value("UCX_MAX_EAGER_RAILS") != nullptr) {
        return;  // set_ucx noted the user's value
    }
    plan->notes.push_back("UCX_TLS=" + *tls_value + " has no shared memory: rendezvous "
                          "may stripe over " + lanes + " tcp lanes, as UCX does "
                          "without peer error handling");
}

} // namespace

std::string PlanInput::user_ucx_name(const std::string &name) const {
    for (const std::string &n : ucx_names(name)) {
        for (const auto &kv : user_ucx) {
            if (kv.first == n) {
                return n;
            }
        }
    }
    return name;
}

const std::string *PlanInput::user_ucx_value(const std::string &name) const {
    const std::string set_as = user_ucx_name(name);
    for (const auto &kv : user_ucx) {
        if (kv.first == set_as) {
            return &kv.second;
        }
    }
    return nullptr;
}

std::string PlanInput::user_ucx_origin(const std::string &name) const {
    const std::string set_as = user_ucx_name(name);
    for (const auto &kv : user_ucx_files) {
        if (kv.first == set_as) {
            return "set in " + kv.second;
        }
    }
    return "set by the user";
}

PlanInput PlanInput::from_environment(uint32_t local_rank, uint32_t local_size) {
    PlanInput in;
    in.local_rank = local_rank;
    in.local_size = local_size;
    in.rails = config_get("P2P_RAILS");
    in.hca = config_get("P2P_HCA");
    in.gid_index = config_get("P2P_IB_GID_INDEX");
    in.addr_range = config_get("P2P_IB_ADDR_RANGE");
    const char *smddp = std::getenv("SMDATAPARALLEL_DEVICE_NAME");
    in.smddp_devices = smddp != nullptr ? smddp : "";
    if (const char *cvd = std::getenv("CUDA_VISIBLE_DEVICES")) {
        in.cuda_visible_devices = cvd;
    }
    for (const auto &kv : ucx_user_settings()) {
        in.user_ucx.emplace_back(kv.first, kv.second.value);
        if (!kv.second.file.empty()) {
            in.user_ucx_files.emplace_back(kv.first, kv.second.file);
        }
    }
    in.sysfs_root = kDefaultSysfsRoot;
    in.netdevs = dir_names("/sys/class/net");
    return in;
}

p2p_status_t plan_rails(const Machine &m, const PlanInput &in, RailPlan *out) {
    if (out == nullptr || in.local_size == 0 || in.local_rank >= in.local_size) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: local rank %u of %u is invalid",
                in.local_rank, in.local_size);
        return P2P_ERR_INVALID_PARAM;
    }
    unsigned long rails_n = 0;
    bool rails_auto = in.rails.empty() || config_is(in.rails, "auto");
    bool rails_count = !rails_auto && parse_count(in.rails, 64, &rails_n);
    if (rails_count && rails_n == 0) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: P2P_RAILS=0; use auto, a count >= 1 "
                "or device names");
        return P2P_ERR_INVALID_PARAM;
    }
    if (!rails_auto && !rails_count &&
        in.rails.find_first_not_of("0123456789") == std::string::npos) {
        // All digits but no count (65 and up): not a device list either.
        P2P_LOG(P2P_LOG_ERROR, "rail plan: P2P_RAILS=%s; a count is 1 to 64",
                in.rails.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    unsigned long gid_n = 0;
    bool gid_auto = in.gid_index.empty() || config_is(in.gid_index, "auto");
    if (!gid_auto && !parse_count(in.gid_index, 65535, &gid_n)) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: P2P_IB_GID_INDEX='%s' is not auto or "
                "a number", in.gid_index.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    AddrRange range;
    if (!in.addr_range.empty() && !addr_range_parse(in.addr_range, &range)) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: P2P_IB_ADDR_RANGE='%s' is not an "
                "address/prefix (10.1.0.0/16, fd00::/8)", in.addr_range.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    std::string bad;
    if (!hca_spec_valid(in.hca, &bad)) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: P2P_HCA='%s': entry '%s' is not "
                "[=]name[:port] with a port in 1..255 and no whitespace", in.hca.c_str(), bad.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    if (in.gpu >= static_cast<int>(m.gpus.size())) {
        P2P_LOG(P2P_LOG_ERROR, "rail plan: gpu %d requested, machine has %zu",
                in.gpu, m.gpus.size());
        return P2P_ERR_INVALID_PARAM;
    }

    RailPlan plan;
    plan.local_rank = in.local_rank;
    std::vector<Nic> all = m.nics;
    bool from_sysfs = false;
    if (all.empty() && !in.sysfs_root.empty()) {
        for (const std::string &d : roce_list_devices(in.sysfs_root)) {
            Nic n;
            n.name = d;
            n.kind = nic_kind_guess(0, d);
            all.push_back(n);
            from_sysfs = true;
        }
    }
    VisibleGpus visible;
    if (in.gpu >= 0) {
        for (size_t i = 0; i < m.gpus.size(); ++i) {
            visible.order.push_back(i);
        }
    } else {
        visible = visible_gpus(m, in.cuda_visible_devices);
    }
    if (!visible.note.empty()) {
        plan.notes.push_back(visible.note);
    }
    if (!visible.order.empty()) {
        plan.cuda_device = in.gpu >= 0 ? -1
                                       : static_cast<int>(in.local_rank % visible.order.size());
        plan.gpu = in.gpu >= 0 ? in.gpu : static_cast<int>(visible.order[plan.cuda_device]);
        plan.gpu_name = m.gpus[plan.gpu].name;
        plan.numa = m.gpus[plan.gpu].pci.numa;
    } else if (in.binding_numa >= 0) {
        plan.numa = in.binding_numa;
    } else if (!m.numa_nodes.empty()) {
        plan.numa = m.numa_nodes[in.local_rank * m.numa_nodes.size() / in.local_size];
    }

    const std::string *user_nd = in.user_ucx_value("UCX_NET_DEVICES");
    const std::string *tls_value = in.user_ucx_value("UCX_TLS");
    const UcxTls tls(tls_value != nullptr ? tls_value->c_str() : nullptr);
    p2p_status_t st = P2P_OK;
    if (user_nd != nullptr) {
        // UCX will use what the user said; show the RDMA part of it.
        for (const std::string &e : split(*user_nd, ',')) {
            std::string name;
            unsigned port;
            if (!split_port(e, &name, &port)) {
                continue;
            }
            for (const Nic &n : all) {
                if (n.name == name || name == "all") {
                    plan.nics.push_back(PlannedNic{n, port == 0 ? 1u : port, false, port != 0});
                }
            }
        }
        plan.reason = "UCX_NET_DEVICES=" + *user_nd + " " +
                      in.user_ucx_origin("UCX_NET_DEVICES");
        if (!rails_auto) {
            plan.notes.push_back("P2P_RAILS=" + in.rails +
                                 " ignored: UCX_NET_DEVICES is set");
        } else if (!in.smddp_devices.empty()) {
            // Not even checked against the machine: say so, or a misspelt
            // device name goes unnoticed.
            plan.notes.push_back("SMDATAPARALLEL_DEVICE_NAME=" + in.smddp_devices +
                                 " ignored: UCX_NET_DEVICES is set");
        }
        if (!in.hca.empty()) {
            plan.notes.push_back("P2P_HCA=" + in.hca + " ignored: UCX_NET_DEVICES is set");
        }
    } else if (!rails_auto && !rails_count) {
        st = resolve_names(all, in.rails, "P2P_RAILS", &plan.nics, in.netdevs);
        plan.reason = "P2P_RAILS=" + in.rails;
        bool rdma = std::any_of(plan.nics.begin(), plan.nics.end(),
                                [](const PlannedNic &p) { return !p.tcp; });
        if (rdma && !tls.allows_rdma()) {
            plan.notes.push_back("UCX_TLS=" + *tls_value + " has no rdma transport: "
                                 "UCX cannot use the rdma rails named in P2P_RAILS");
        }
    } else if (!all.empty() && !tls.allows_rdma()) {
        // Pinning UCX_NET_DEVICES to rdma ports would leave a tcp-only
        // UCX (a common way to rule out the fabric) without any device.
        plan.reason = "UCX_TLS=" + *tls_value + " has no rdma transport";
        if (!in.smddp_devices.empty()) {
            plan.notes.push_back("SMDATAPARALLEL_DEVICE_NAME=" + in.smddp_devices +
                                 " ignored: UCX_TLS has no rdma transport");
        }
    } else if (!in.smddp_devices.empty()) {
        st = resolve_names(all, in.smddp_devices, "SMDATAPARALLEL_DEVICE_NAME",
                           &plan.nics);
        plan.reason = "SMDATAPARALLEL_DEVICE_NAME=" + in.smddp_devices;
    } else {
        std::vector<Nic> cands;
        std::vector<unsigned> ports;
        for (const Nic &n : all) {
            unsigned port = 0;
            if (hca_spec_match(in.hca, n.name, &port)) {
                cands.push_back(n);
                ports.push_back(port);
            }
        }
        if (in.hca.empty() && !cands.empty()) {
            // Mixed fabrics (EFA beside a ConnectX, on-board ports beside
            // a bond): one kind, the one with the most bandwidth.
            std::string note = keep_one_fabric(in.sysfs_root, &cands);
            if (!note.empty()) {
                ports.assign(cands.size(), 0);
                plan.notes.push_back(note);
            }
        }
        if (cands.empty()) {
            plan.reason = all.empty() ? "no rdma devices"
                                      : "no rdma devices match P2P_HCA=" + in.hca;
        } else {
            AutoResult r = plan.gpu >= 0
                               ? plan_with_gpu(m, cands, plan.gpu, visible.order, in.local_rank)
                               : plan_without_gpu(m, cands, in, plan.numa);
            std::vector<size_t> pick = r.share;
            if (rails_count) {
                pick.assign(r.order.begin(),
                            r.order.begin() + std::min<size_t>(rails_n, r.order.size()));
                if (rails_n > r.order.size()) {
                    plan.notes.push_back("P2P_RAILS=" + in.rails + " but only " +
                                         std::to_string(r.order.size()) +
                                         " rdma device(s) usable");
                }
            }
            for (size_t i : pick) {
                plan.nics.push_back(
                    PlannedNic{cands[i], ports[i] == 0 ? 1u : ports[i], false, ports[i] != 0});
            }
            plan.reason = (rails_count ? "P2P_RAILS=" + in.rails + "; " : "") + r.reason;
            if (from_sysfs) {
                plan.reason += " (devices from sysfs, no pcie locality)";
            }
        }
    }
    if (st != P2P_OK) {
        return st;
    }
    if (!in.sysfs_root.empty()) {
        apply_sysfs(in, gid_n, gid_auto, in.addr_range.empty() ? nullptr : &range, &plan);
    }
    if (user_nd == nullptr) {
        drop_repeated(&plan);
    }
    if (!plan.nics.empty()) {
        std::string devs;
        for (const PlannedNic &p : plan.nics) {
            devs += (devs.empty() ? "" : ",") + p.ucx_name();
        }
        std::string rails = std::to_string(
            std::min<size_t>(plan.nics.size(), kUcxMaxRails));
        if (plan.nics.size() > kUcxMaxRails) {
            plan.notes.push_back("UCX stripes over at most " +
                                 std::to_string(kUcxMaxRails) + " rails");
        }
        set_ucx(in, &plan, "UCX_NET_DEVICES", devs);
        set_ucx(in, &plan, "UCX_MAX_RNDV_RAILS", rails);
        set_ucx(in, &plan, "UCX_MAX_EAGER_RAILS", rails);
        size_t tcp = std::count_if(plan.nics.begin(), plan.nics.end(),
                                   [](const PlannedNic &p) { return p.tcp; });
        if (tcp >= 2 && tls.allows_shm_am()) {
            // UCX 1.13 picks the extra active-message lanes without a
            // bandwidth ratio check: same-host endpoints get a tcp one too.
            plan.notes.push_back(
                "tcp rails with shared memory allowed: same-host messages from "
                "8 KiB up that UCX carries stripe over shared memory and tcp "
                "together (64 KiB: 5x slower, measured); for cross-host tcp "
                "traffic only, set UCX_TLS=tcp,self");
        }
        if (plan.gid.index >= 0) {
            set_gid_index(in, &plan);
        }
    } else {
        network_lanes(in, tls, &plan);
    }
    *out = std::move(plan);
    return P2P_OK;
}

} // namespace topo
} // namespace ucxp2p
