/*
 * RoCE helpers against a sysfs tree (default /sys/class/infiniband; tests
 * point at fake trees): list HCAs and ports, pick the GID index UCX/NCCL
 * should use, and match HCA names against a user spec (NCCL_IB_HCA style).
 */
#ifndef UCXP2P_TOPO_ROCE_H
#define UCXP2P_TOPO_ROCE_H

#include <ucxp2p/p2p.h>

#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

extern const char *const kDefaultSysfsRoot; // "/sys/class/infiniband"

enum class GidType { UNKNOWN, ROCE_V1, ROCE_V2 };

struct GidEntry {
    unsigned index = 0;
    std::string gid;        /**< "0000:0000:0000:0000:0000:ffff:0a00:0001" */
    GidType type = GidType::UNKNOWN;
    std::string ndev;       /**< network device of the GID (bond0), or "" */
    bool ipv4 = false;      /**< IPv4-mapped ::ffff:a.b.c.d */
    bool link_local = false;/**< fe80::/10 */
};

struct GidChoice {
    int index = -1;
    GidEntry entry;
    std::string reason;     /**< "roce v2, ipv4 10.0.0.1 on bond0" */
};

/** Device names under root, sorted; empty when root is absent. */
std::vector<std::string> roce_list_devices(const std::string &root);

/** Port numbers of a device, ascending; empty when none. */
std::vector<unsigned> roce_list_ports(const std::string &root,
                                      const std::string &dev);

/** "Ethernet", "InfiniBand", or "" when unknown. */
std::string roce_link_layer(const std::string &root, const std::string &dev,
                            unsigned port);

/** False only when the port's state file says something other than
 *  ACTIVE (a missing file counts as active). */
bool roce_port_active(const std::string &root, const std::string &dev,
                      unsigned port);

/** The port's rate in Gb/s from its rate file ("100 Gb/sec (4X EDR)"; a
 *  bond's is the bond's); 0 when the port is not ACTIVE; -1 when unknown
 *  (no such file, or unreadable). */
double roce_port_rate_gbps(const std::string &root, const std::string &dev,
                           unsigned port);

/**
 * Read every populated GID of a port (zero GIDs and entries whose type
 * cannot be read are skipped). P2P_ERR_NO_DEVICE when the device or port
 * does not exist or has no gids directory.
 */
p2p_status_t roce_read_gids(const std::string &root, const std::string &dev,
                            unsigned port, std::vector<GidEntry> *out);

/** An address range, as NCCL_IB_ADDR_RANGE: "10.1.0.0/16" or
 *  "fd00::/8" (P2P_IB_ADDR_RANGE). IPv4 is kept IPv4-mapped, as RoCE GIDs
 *  hold it. */
struct AddrRange {
    unsigned char addr[16] = {};
    unsigned prefix = 0;  // leading bits of addr that must match, 0..128
    std::string text;     // as given
};

/** Parse "address/prefix" (IPv4 prefix 0..32, IPv6 0..128; host bits
 *  may be set). False when malformed. */
bool addr_range_parse(const std::string &text, AddrRange *out);

/** Whether the GID (sysfs text form) lies in range. */
bool addr_range_contains(const AddrRange &range, const std::string &gid);

/**
 * Choose among GIDs in UCX's auto order: RoCE v2 IPv4-mapped, then RoCE v2
 * IPv6 (not link-local), then RoCE v1 (IPv4 first). Within a class, GIDs on
 * netdev (when not empty) come first, then the lowest index. range (when
 * not null): only GIDs whose address lies in it.
 * P2P_ERR_NO_DEVICE when no GID qualifies.
 */
p2p_status_t roce_choose_gid(const std::vector<GidEntry> &gids,
                             const std::string &netdev, GidChoice *out,
                             const AddrRange *range = nullptr);

/** roce_read_gids + roce_choose_gid; errors logged with the path. */
p2p_status_t roce_detect_gid(const std::string &root, const std::string &dev,
                             unsigned port, const std::string &netdev,
                             GidChoice *out, const AddrRange *range = nullptr);

/**
 * HCA spec as NCCL_IB_HCA: comma-separated entries, each a name prefix
 * ("mlx5"), optionally ":port"; a leading '^' makes the whole list an
 * exclusion list, and a leading '=' (after any '^') makes every entry an
 * exact name ("=mlx5_0,mlx5_1", "^=mlx5_0,mlx5_1"). An entry of its own may
 * also start with '='. Empty spec matches everything. port_p (optional)
 * gets the port named for this device, or 0.
 */
bool hca_spec_match(const std::string &spec, const std::string &name,
                    unsigned *port_p = nullptr);

/** Every entry of spec is [=]name[:port] with a port in 1..255 (empty
 *  entries allowed); else false with the first bad entry in *bad. */
bool hca_spec_valid(const std::string &spec, std::string *bad);

/** Devices under root that match spec, sorted.
 *  P2P_ERR_NO_DEVICE when none (root missing, or nothing matches). */
p2p_status_t roce_select_hcas(const std::string &root, const std::string &spec,
                              std::vector<std::string> *out);

} // namespace topo
} // namespace ucxp2p

#endif
