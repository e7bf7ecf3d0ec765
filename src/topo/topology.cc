#include "ucxp2p_config.h"

#include "topo/topology.h"

#include "core/log.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

namespace ucxp2p {
namespace topo {

#ifdef HAVE_HWLOC

struct Topology::Handle {
    hwloc_topology_t topo = nullptr;
    Handle() = default;
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle() {
        if (topo != nullptr) {
            hwloc_topology_destroy(topo);
        }
    }
};

namespace {

/** RAII owner of an hwloc bitmap. */
class Bitmap {
public:
    Bitmap() : map_(hwloc_bitmap_alloc()) {}
    ~Bitmap() { hwloc_bitmap_free(map_); }
    Bitmap(const Bitmap &) = delete;
    Bitmap &operator=(const Bitmap &) = delete;
    hwloc_bitmap_t get() const { return map_; }

private:
    hwloc_bitmap_t map_;
};

int numa_of(hwloc_topology_t topo, hwloc_obj_t obj) {
    hwloc_obj_t cpu_parent = hwloc_get_non_io_ancestor_obj(topo, obj);
    if (cpu_parent == nullptr || cpu_parent->nodeset == nullptr ||
        hwloc_bitmap_weight(cpu_parent->nodeset) != 1) {
        return -1;
    }
    return hwloc_bitmap_first(cpu_parent->nodeset);
}

PciDevice pci_of(hwloc_topology_t topo, hwloc_obj_t obj) {
    PciDevice dev;
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
        const auto &a = obj->attr->pcidev;
        char busid[32];
        std::snprintf(busid, sizeof(busid), "%04x:%02x:%02x.%01x",
                      static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
        dev.busid = busid;
        dev.vendor = a.vendor_id;
        dev.device = a.device_id;
        dev.pci_class = a.class_id;
    }
    dev.numa = numa_of(topo, obj);
    for (hwloc_obj_t o = obj; o != nullptr; o = o->parent) {
        dev.ancestry.push_back(o->gp_index);
        if (!hwloc_obj_type_is_io(o->type)) {
            ++dev.cpu_depth;
        }
    }
    std::reverse(dev.ancestry.begin(), dev.ancestry.end());
    return dev;
}

bool is_gpu(hwloc_obj_t pci) {
    const auto &a = pci->attr->pcidev;
    return a.class_id == 0x0302 || (a.class_id == 0x0300 && a.vendor_id == 0x10de);
}

/** The PCI device an OS device hangs from, or null. */
hwloc_obj_t pci_parent(hwloc_obj_t osdev) {
    hwloc_obj_t p = osdev->parent;
    return (p != nullptr && p->type == HWLOC_OBJ_PCI_DEVICE) ? p : nullptr;
}

/** N of a CUDA OS device "cudaN"; names without one sort last. */
unsigned long cuda_ordinal(const std::string &name) {
    const char *digits = name.c_str() + std::min<size_t>(4, name.size());
    char *end = nullptr;
    unsigned long n = std::strtoul(digits, &end, 10);
    return name.compare(0, 4, "cuda") == 0 && end != digits && *end == '\0'
               ? n
               : static_cast<unsigned long>(-1);
}

Machine extract(hwloc_topology_t topo, const std::string &source) {
    Machine m;
    m.source = source;
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
         o != nullptr;
         o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) {
        m.numa_nodes.push_back(static_cast<int>(o->os_index));
    }
    std::sort(m.numa_nodes.begin(), m.numa_nodes.end());

    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o != nullptr;
         o = hwloc_get_next_pcidev(topo, o)) {
        if (is_gpu(o)) {
            Gpu g;
            g.pci = pci_of(topo, o);
            g.name = g.pci.busid;
            m.gpus.push_back(std::move(g));
        }
    }
    std::sort(m.gpus.begin(), m.gpus.end(),
              [](const Gpu &a, const Gpu &b) { return a.pci.busid < b.pci.busid; });

    std::vector<Gpu> cuda;
    for (hwloc_obj_t o = hwloc_get_next_osdev(topo, nullptr); o != nullptr;
         o = hwloc_get_next_osdev(topo, o)) {
        const char *name = o->name != nullptr ? o->name : "";
        hwloc_obj_t pci = pci_parent(o);
        const hwloc_obj_osdev_type_t type = o->attr->osdev.type;
        if ((type == HWLOC_OBJ_OSDEV_OPENFABRICS || type == HWLOC_OBJ_OSDEV_NETWORK) &&
            !device_name_usable(name)) {
            // UCX_NET_DEVICES could not name it ("" would plan ":1").
            P2P_LOG(P2P_LOG_WARN, "topology: %s: skipping %s device '%s': not a "
                    "name UCX_NET_DEVICES can hold", source.c_str(),
                    type == HWLOC_OBJ_OSDEV_NETWORK ? "network" : "rdma", name);
            continue;
        }
        switch (type) {
        case HWLOC_OBJ_OSDEV_OPENFABRICS: {
            Nic n;
            n.name = name;
            n.pci = pci_of(topo, pci != nullptr ? pci : o->parent);
            n.kind = nic_kind_guess(n.pci.vendor, n.name);
            m.nics.push_back(std::move(n));
            break;
        }
        case HWLOC_OBJ_OSDEV_NETWORK: {
            NetIf ni;
            ni.name = name;
            ni.pci = pci_of(topo, pci != nullptr ? pci : o->parent);
            m.netifs.push_back(std::move(ni));
            break;
        }
        case HWLOC_OBJ_OSDEV_COPROC:
            // CUDA devices name the GPU ("cuda0"); other co-processors
            // (OpenCL) are not GPUs of their own.
            if (o->subtype != nullptr && std::strcmp(o->subtype, "CUDA") == 0) {
                cuda.push_back(Gpu{name, pci_of(topo, pci != nullptr ? pci : o->parent)});
            }
            break;
        default:
            break;
        }
    }
    if (!cuda.empty()) {
        // What CUDA sees, in its device order; a PCI GPU it does not see
        // (CUDA_VISIBLE_DEVICES, cgroups) is no rank's GPU.
        std::stable_sort(cuda.begin(), cuda.end(), [](const Gpu &a, const Gpu &b) {
            return cuda_ordinal(a.name) < cuda_ordinal(b.name);
        });
        m.gpus = std::move(cuda);
        m.gpus_cuda = true;
    }
    for (Nic &n : m.nics) {
        for (const NetIf &ni : m.netifs) {
            if (!n.pci.busid.empty() && ni.pci.busid == n.pci.busid) {
                n.netdevs.push_back(ni.name);
            }
        }
    }
    std::stable_sort(m.nics.begin(), m.nics.end(), [](const Nic &a, const Nic &b) {
        return a.pci.busid != b.pci.busid ? a.pci.busid < b.pci.busid
                                          : a.name < b.name;
    });
    return m;
}

/** hwloc plugins whose discovery the rail plan does not use and whose
 *  side effects reach the application: opencl loads every OpenCL ICD
 *  (GPU runtimes start inside each rank, and on a machine with pocl and
 *  NVIDIA's ICD the process environment changed: HWLOC_PLUGINS_PATH set,
 *  OCL_ICD_FILENAMES rewritten), gl connects to X displays. */
void exclude_intrusive_components(hwloc_topology_t topo) {
#if HWLOC_API_VERSION >= 0x00020100
    for (const char *c : {"opencl", "gl"}) {
        if (hwloc_topology_set_components(topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST,
                                          c) != 0) {
            P2P_LOG(P2P_LOG_DEBUG, "topology: cannot exclude hwloc component %s", c);
        }
    }
#else
    (void)topo;
#endif
}

} // namespace

p2p_status_t Topology::load(const std::string &xml_path,
                            std::unique_ptr<Topology> *out) {
    auto handle = std::make_unique<Handle>();
    if (hwloc_topology_init(&handle->topo) != 0) {
        handle->topo = nullptr;
        P2P_LOG(P2P_LOG_ERROR, "topology: hwloc_topology_init failed: %s",
                std::strerror(errno));
        return P2P_ERR_NO_MEMORY;
    }
    hwloc_topology_set_io_types_filter(handle->topo,
                                       HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    exclude_intrusive_components(handle->topo);
    if (!xml_path.empty()) {
        if (access(xml_path.c_str(), R_OK) != 0) {
            P2P_LOG(P2P_LOG_ERROR, "topology: cannot read %s: %s",
                    xml_path.c_str(), std::strerror(errno));
            return P2P_ERR_INVALID_PARAM;
        }
        if (hwloc_topology_set_xml(handle->topo, xml_path.c_str()) != 0) {
            P2P_LOG(P2P_LOG_ERROR, "topology: %s is not usable hwloc XML",
                    xml_path.c_str());
            return P2P_ERR_INVALID_PARAM;
        }
    }
    if (hwloc_topology_load(handle->topo) != 0) {
        P2P_LOG(P2P_LOG_ERROR, "topology: loading %s failed: %s",
                xml_path.empty() ? "the live machine" : xml_path.c_str(),
                std::strerror(errno));
        return xml_path.empty() ? P2P_ERR_NO_DEVICE : P2P_ERR_INVALID_PARAM;
    }
    Machine m = extract(handle->topo, xml_path.empty() ? "live" : xml_path);
    P2P_LOG(P2P_LOG_DEBUG, "topology: %s: %zu numa nodes, %zu gpus, %zu rdma nics",
            m.source.c_str(), m.numa_nodes.size(), m.gpus.size(), m.nics.size());
    bool live = xml_path.empty();
    out->reset(new Topology(std::move(handle), std::move(m)));
    (*out)->live_ = live;
    return P2P_OK;
}

Topology::Binding Topology::binding() const {
    Binding b;
    if (!live_) {
        return b;
    }
    hwloc_topology_t topo = handle_->topo;
    Bitmap cpus;
    Bitmap nodes;
    if (hwloc_get_cpubind(topo, cpus.get(), HWLOC_CPUBIND_PROCESS) != 0) {
        return b;
    }
    hwloc_cpuset_to_nodeset(topo, cpus.get(), nodes.get());
    if (hwloc_bitmap_weight(nodes.get()) != 1) {
        return b;
    }
    b.numa = hwloc_bitmap_first(nodes.get());
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, static_cast<unsigned>(b.numa));
    if (node == nullptr || node->cpuset == nullptr) {
        return b;
    }
    Bitmap mine;
    hwloc_bitmap_and(mine.get(), cpus.get(), node->cpuset);
    int width = hwloc_bitmap_weight(mine.get());
    if (width <= 0 || width >= hwloc_bitmap_weight(node->cpuset)) {
        return b;  // the whole node: no position within it
    }
    int pos = 0;
    for (hwloc_obj_t pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, node->cpuset,
                                                                    HWLOC_OBJ_PU, nullptr);
         pu != nullptr;
         pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, node->cpuset, HWLOC_OBJ_PU, pu)) {
        if (hwloc_bitmap_isset(mine.get(), pu->os_index)) {
            b.slot = pos / width;
            break;
        }
        ++pos;
    }
    return b;
}

#else // !HAVE_HWLOC

struct Topology::Handle {};

p2p_status_t Topology::load(const std::string &xml_path,
                            std::unique_ptr<Topology> *out) {
    P2P_LOG(P2P_LOG_WARN, "topology: built without hwloc, cannot load %s",
            xml_path.empty() ? "the live machine" : xml_path.c_str());
    return P2P_ERR_UNSUPPORTED;
}

Topology::Binding Topology::binding() const { return Binding(); }

#endif

Topology::Topology(std::unique_ptr<Handle> handle, Machine machine)
    : handle_(std::move(handle)), machine_(std::move(machine)) {}

Topology::~Topology() = default;

} // namespace topo
} // namespace ucxp2p
