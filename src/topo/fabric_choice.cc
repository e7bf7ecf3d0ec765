#include "topo/fabric_choice.h"
#include "topo/roce.h"

#include <algorithm>
#include <cstdio>

namespace ucxp2p {
namespace topo {

namespace {

constexpr int kKinds = 3;  // NicKind: EFA, MLX, OTHER

/** A device's fastest ACTIVE port in Gb/s (0: none active); -1 unknown. */
double device_rate(const std::string &root, const Nic &n) {
    if (root.empty()) {
        return -1;
    }
    double best = -1;
    for (unsigned p : roce_list_ports(root, n.name)) {
        double r = roce_port_rate_gbps(root, n.name, p);
        if (r < 0) {
            return -1;  // one port unknown: the device's rate is too
        }
        best = std::max(best, r);
    }
    return best;
}

std::string gbps(double g) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g Gb/s", g);
    return buf;
}

} // namespace

std::string keep_one_fabric(const std::string &sysfs_root, std::vector<Nic> *cands) {
    size_t count[kKinds] = {0, 0, 0};
    double rate[kKinds] = {0, 0, 0};
    bool rates_known = true;
    for (const Nic &n : *cands) {
        int k = static_cast<int>(n.kind);
        count[k]++;
        double r = rates_known ? device_rate(sysfs_root, n) : -1;
        rates_known = rates_known && r >= 0;
        rate[k] += std::max(r, 0.0);
    }
    int kinds = 0;
    for (int k = 0; k < kKinds; ++k) kinds += count[k] > 0 ? 1 : 0;
    if (kinds < 2) {
        return "";
    }
    // max_element keeps the first of equals: EFA, then mlx, then others.
    int keep = static_cast<int>(std::max_element(count, count + kKinds) - count);
    bool by_rate = false;
    if (rates_known) {
        int fastest = static_cast<int>(std::max_element(rate, rate + kKinds) - rate);
        if (rate[fastest] > rate[keep]) {
            keep = fastest;
            by_rate = true;
        }
    }
    std::vector<Nic> kept;
    std::string names;
    double dropped_rate = 0;
    for (const Nic &n : *cands) {
        if (static_cast<int>(n.kind) == keep) {
            kept.push_back(n);
        } else {
            names += (names.empty() ? "" : ",") + n.name;
            dropped_rate += std::max(device_rate(sysfs_root, n), 0.0);
        }
    }
    *cands = std::move(kept);
    const std::string kind = nic_kind_name(static_cast<NicKind>(keep));
    std::string why = by_rate ? gbps(dropped_rate) + " in all, below the " + kind +
                                    " devices' " + gbps(rate[keep])
                              : "fewer than the " + kind + " devices";
    return "ignoring " + names + " (" + why + "); choose them with P2P_HCA or P2P_RAILS";
}

} // namespace topo
} // namespace ucxp2p
