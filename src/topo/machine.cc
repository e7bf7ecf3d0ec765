#include "topo/machine.h"

namespace ucxp2p {
namespace topo {

const char *nic_kind_name(NicKind kind) {
    switch (kind) {
    case NicKind::EFA: return "efa";
    case NicKind::MLX: return "mlx";
    default:           return "other";
    }
}

NicKind nic_kind_guess(uint16_t pci_vendor, const std::string &name) {
    if (pci_vendor == 0x1d0f || name.rfind("rdmap", 0) == 0 ||
        name.rfind("efa", 0) == 0) {
        return NicKind::EFA;
    }
    if (pci_vendor == 0x15b3 || name.rfind("mlx", 0) == 0) {
        return NicKind::MLX;
    }
    return NicKind::OTHER;
}

bool device_name_usable(const std::string &name) {
    return !name.empty() && name.find_first_of(",: \t\r\n\v\f") == std::string::npos;
}

size_t pci_affinity(const PciDevice &a, const PciDevice &b) {
    size_t n = 0;
    while (n < a.ancestry.size() && n < b.ancestry.size() &&
           a.ancestry[n] == b.ancestry[n]) {
        ++n;
    }
    return n;
}

} // namespace topo
} // namespace ucxp2p
