/*
 * Plain model of the parts of a machine the rail planner cares about: NUMA
 * nodes, GPUs, RDMA NICs and network interfaces, each with its PCIe
 * ancestry. Filled from hwloc (topology.cc) or by hand in tests; the planner
 * (rail_plan.cc) never touches hwloc, so it works on any source.
 */
#ifndef UCXP2P_TOPO_MACHINE_H
#define UCXP2P_TOPO_MACHINE_H

#include <cstdint>
#include <string>
#include <vector>

namespace ucxp2p {
namespace topo {

enum class NicKind { EFA, MLX, OTHER };

/** "efa", "mlx", "other". */
const char *nic_kind_name(NicKind kind);

/** Kind from PCI vendor (0x1d0f Amazon, 0x15b3 Mellanox) else the name. */
NicKind nic_kind_guess(uint16_t pci_vendor, const std::string &name);

/** A device name UCX_NET_DEVICES can carry as "name:port": not empty, no
 *  ',', ':' or whitespace (a topology file may hold anything). */
bool device_name_usable(const std::string &name);

struct PciDevice {
    std::string busid;              /**< "0000:10:1b.0", empty if unknown */
    uint16_t vendor = 0;
    uint16_t device = 0;
    uint16_t pci_class = 0;         /**< e.g. 0x0302 */
    int numa = -1;                  /**< NUMA os index, -1 unknown/several */
    /** Ids (hwloc gp_index) of the ancestors, root first, then the device
     *  itself. Two devices are closer the longer their common prefix. */
    std::vector<uint64_t> ancestry;
    /** How many leading entries of ancestry are CPU-side objects (Machine,
     *  Package, Group...); a longer common prefix means a shared PCIe
     *  bridge or switch. */
    size_t cpu_depth = 0;
};

struct Gpu {
    std::string name;               /**< "cuda0", or the PCI bus id */
    PciDevice pci;
};

struct Nic {
    std::string name;               /**< OpenFabrics name: mlx5_0, rdmap16s27 */
    NicKind kind = NicKind::OTHER;
    std::vector<std::string> netdevs; /**< network interfaces of the same PCI
                                           function (e.g. ibp115s0f0) */
    PciDevice pci;
};

struct NetIf {
    std::string name;               /**< eth0, ens32 */
    PciDevice pci;
};

struct Machine {
    std::string source;             /**< "live", an XML path, or "sysfs" */
    std::vector<int> numa_nodes;    /**< os indexes, ascending */
    /** The topology's CUDA devices (cudaN) in CUDA order when it has
     *  any (gpus_cuda), else every PCI GPU sorted by bus id (CUDA
     *  PCI_BUS_ID order). */
    std::vector<Gpu> gpus;
    /** gpus are CUDA devices: the CUDA_VISIBLE_DEVICES of the process that
     *  discovered them is already applied. */
    bool gpus_cuda = false;
    std::vector<Nic> nics;          /**< sorted by PCI bus id, then name */
    std::vector<NetIf> netifs;
};

/** Length of the common ancestry prefix (0: unrelated or unknown). */
size_t pci_affinity(const PciDevice &a, const PciDevice &b);

} // namespace topo
} // namespace ucxp2p

#endif
