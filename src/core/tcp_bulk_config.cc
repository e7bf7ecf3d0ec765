/*
 * The P2P_TCP_BULK* settings: see core/tcp_bulk_config.h.
 */
#include "core/tcp_bulk_config.h"
#include "core/cma.h"
#include "core/config.h"
#include "core/log.h"
#include "core/rails.h"
#include "core/tcp_bulk.h"
#include "core/ucx_tls.h"

#include <dirent.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace ucxp2p {
namespace tcpb {

namespace {

constexpr uint64_t kMaxLanes = Client::kMaxLanes;
constexpr uint64_t kMaxSpinUs = 100000;

/** Some RDMA device is listed in sysfs (mlx5, EFA, ...). */
bool host_has_rdma_device() {
    DIR *d = opendir("/sys/class/infiniband");
    if (d == nullptr) return false;
    bool any = false;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] != '.') {
            any = true;
            break;
        }
    }
    closedir(d);
    return any;
}

uint64_t u64_or(const char *name, uint64_t max, uint64_t min, uint64_t fallback) {
    uint64_t v = 0;
    return config_get_u64(name, max, &v, min) == P2P_OK ? v : fallback;
}

/** Network interfaces (not lo, not an RDMA port "dev:port") named in a
 *  UCX_NET_DEVICES value. */
unsigned tcp_devices(const std::string &list) {
    unsigned n = 0;
    size_t at = 0;
    while (at <= list.size()) {
        size_t end = list.find(',', at);
        if (end == std::string::npos) end = list.size();
        const std::string d = list.substr(at, end - at);
        if (!d.empty() && d != "lo" && d.find(':') == std::string::npos) ++n;
        at = end + 1;
    }
    return n;
}

}  // namespace

p2p_status_t check_settings() {
    const std::string mode = config_get("P2P_TCP_BULK");
    if (!config_is(mode, "auto") && !config_is(mode, "on") && !config_is(mode, "off")) {
        P2P_LOG(P2P_LOG_ERROR, "tcp bulk: P2P_TCP_BULK='%s' is not auto, on or off",
                mode.c_str());
        return P2P_ERR_INVALID_PARAM;
    }
    uint64_t v = 0;  // each call logs what is wrong
    p2p_status_t st = config_is(config_get("P2P_TCP_BULK_THRESH"), "auto")
                          ? P2P_OK
                          : config_get_u64("P2P_TCP_BULK_THRESH", UINT64_MAX, &v,
                                           sizeof(cma::Rts), "auto");
    if (st == P2P_OK) st = config_get_u64("P2P_TCP_BULK_LANES", kMaxLanes, &v, 1);
    if (st == P2P_OK) st = config_get_u64("P2P_TCP_BULK_SPIN_US", kMaxSpinUs, &v);
    return st;
}

uint32_t scope() {
    static const uint32_t sc = [] {
        const std::string mode = config_get("P2P_TCP_BULK");
        if (config_is(mode, "on")) return kSameHost | kOtherHosts;
        if (!config_is(mode, "auto")) return 0u;  // off (or malformed)
        const UcxTls tls = UcxTls::from_environment();
        if (!tls.allows("tcp")) return 0u;
        const std::string devs = rails_net_devices();
        if (tcp_devices(devs) > 1) {
            // UCX stripes over those rails; our connections take one route.
            P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: off: UCX_NET_DEVICES=%s names several "
                    "tcp rails", devs.c_str());
            return 0u;
        }
        uint32_t s = 0;
        if (!tls.allows_shm_am()) s |= kSameHost;
        if (!tls.allows_rdma() || !host_has_rdma_device()) s |= kOtherHosts;
        P2P_LOG(P2P_LOG_DEBUG, "tcp bulk: for peers on this host %s, on other hosts %s",
                (s & kSameHost) ? "on" : "off", (s & kOtherHosts) ? "on" : "off");
        return s;
    }();
    return sc;
}

bool threshold_auto() {
    static const bool automatic = config_is(config_get("P2P_TCP_BULK_THRESH"), "auto");
    return automatic;
}

size_t threshold() {
    // auto or malformed: the fixed default of the releases before auto.
    static const size_t t = threshold_auto() ? 262144 : static_cast<size_t>(
        u64_or("P2P_TCP_BULK_THRESH", UINT64_MAX, sizeof(cma::Rts), 262144));
    return t;
}

unsigned lanes() {
    static const unsigned n = static_cast<unsigned>(u64_or("P2P_TCP_BULK_LANES", kMaxLanes, 1, 2));
    return n;
}

unsigned spin_us() {
    static const unsigned us =
        static_cast<unsigned>(u64_or("P2P_TCP_BULK_SPIN_US", kMaxSpinUs, 0, 20));
    return us;
}

}  // namespace tcpb
}  // namespace ucxp2p
