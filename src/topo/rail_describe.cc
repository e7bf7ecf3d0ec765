/*
 * How a rail plan is shown (p2p_info) and the notes about what the loaded
 * UCX can do with it (EFA support, tcp lane pairing).
 */
#include "topo/rail_plan.h"

#include <sstream>

namespace ucxp2p {
namespace topo {

std::string efa_ucx_warning(const Machine &machine, unsigned ucx_major,
                            unsigned ucx_minor) {
    std::string names;
    size_t n = 0;
    for (const Nic &nic : machine.nics) {
        if (nic.kind == NicKind::EFA) {
            names += (n++ == 0 ? "" : ",") + nic.name;
        }
    }
    if (n == 0 || ucx_major > 1 || (ucx_major == 1 && ucx_minor >= 19)) {
        return "";
    }
    return "this machine has " + std::to_string(n) + " EFA device(s) (" + names +
           ") but UCX " + std::to_string(ucx_major) + "." +
           std::to_string(ucx_minor) +
           " has no EFA transport: EFA needs UCX >= 1.19 built --with-efa "
           "(transport 'srd'); traffic falls back to tcp. Fix: install UCX >= "
           "1.19 with EFA support (e.g. from the AWS EFA installer under "
           "/opt/amazon/efa, or build it with --with-efa) and make it the one "
           "loaded (LD_LIBRARY_PATH, or configure ucxp2p --with-ucx=DIR).";
}

std::string tcp_rails_ucx_note(const RailPlan &plan, unsigned ucx_major,
                               unsigned ucx_minor) {
    size_t n = 0;
    for (const PlannedNic &pn : plan.nics) {
        n += pn.tcp ? 1 : 0;
    }
    if (n < 2 || ucx_major > 1 || (ucx_major == 1 && ucx_minor >= 20)) {
        return "";
    }
    return std::to_string(n) + " tcp rails: UCX " + std::to_string(ucx_major) +
           "." + std::to_string(ucx_minor) +
           " pairs tcp lanes in each host's device order without checking "
           "routes (UCX >= 1.20 does); when hosts list the rails in different "
           "orders and each rail is its own subnet, some rails may carry "
           "nothing (docs/PERFORMANCE-RAILS.md)";
}

void apply_ucx_limits(const Machine &machine, unsigned ucx_major, unsigned ucx_minor,
                      RailPlan *plan) {
    std::string tcp_note = tcp_rails_ucx_note(*plan, ucx_major, ucx_minor);
    if (!tcp_note.empty()) {
        plan->notes.push_back(tcp_note);
    }
    if (efa_ucx_warning(machine, ucx_major, ucx_minor).empty()) {
        return;
    }
    bool all_efa = !plan->nics.empty();
    for (const PlannedNic &n : plan->nics) {
        all_efa = all_efa && !n.tcp && n.nic.kind == NicKind::EFA;
    }
    if (all_efa && !plan->ucx_settings.empty()) {
        plan->ucx_settings.clear();
        plan->notes.push_back("efa rails not applied (UCX " + std::to_string(ucx_major) + "." +
                              std::to_string(ucx_minor) +
                              " cannot use them); UCX picks devices itself");
    }
}

std::string rail_plan_describe(const RailPlan &p) {
    std::ostringstream os;
    os << "local rank " << p.local_rank << ":";
    if (p.gpu >= 0) {
        os << " gpu " << p.gpu << " (" << p.gpu_name << ")";
        if (p.cuda_device >= 0 && p.cuda_device != p.gpu) {
            os << " = cuda device " << p.cuda_device;
        }
    }
    os << " numa " << p.numa << "\n  rails:";
    if (p.nics.empty()) {
        os << " none";
    }
    for (const PlannedNic &n : p.nics) {
        if (n.tcp) {
            os << " " << n.ucx_name() << " [tcp]";
            continue;
        }
        os << " " << n.ucx_name() << " [" << nic_kind_name(n.nic.kind);
        if (!n.nic.pci.busid.empty()) {
            os << " " << n.nic.pci.busid;
        }
        os << " numa " << n.nic.pci.numa << "]";
    }
    os << "\n  reason: " << p.reason << "\n";
    if (p.gid.index >= 0) {
        os << "  gid index: " << p.gid.index << " (" << p.gid.reason << ")\n";
    }
    for (const auto &kv : p.ucx_settings) {
        os << "  set " << kv.first << "=" << kv.second << "\n";
    }
    for (const std::string &n : p.notes) {
        os << "  note: " << n << "\n";
    }
    return os.str();
}

} // namespace topo
} // namespace ucxp2p
